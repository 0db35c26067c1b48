/* layerdiff — detection and sampling ops: NonMaxSuppression (10, 11),
 * RoiAlign (10, 16) and GridSample (16).
 *
 * RoiAlign and GridSample first compute, per output position, the source
 * pixels ("taps") and their weights — coordinates in double — and then run
 * the channel loop in the data type, so the per-element work is a short
 * weighted sum. NonMaxSuppression follows ONNX Runtime's greedy algorithm
 * (float arithmetic, strict score threshold, ties by lower box index). */
#include <math.h>
#include <stdint.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

static bool is_float_data(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT64;
}

/* A weighted sum of taps: out = sum_k w[k] * plane[index[k]]. */
typedef struct tap_table {
    int taps;          /* per output position */
    int64_t positions;
    int64_t *index;    /* positions * taps, into one input plane */
    double *weight;    /* positions * taps */
    float *weight_f;   /* the same, rounded, for float32 data */
} tap_table;

static ld_status taps_alloc(ld_kernel_ctx *ctx, tap_table *t, int taps, int64_t positions)
{
    size_t n = (size_t)(positions ? positions : 1) * (size_t)taps;
    t->taps = taps;
    t->positions = positions;
    t->index = calloc(n, sizeof *t->index);
    t->weight = calloc(n, sizeof *t->weight);
    t->weight_f = calloc(n, sizeof *t->weight_f);
    if (!t->index || !t->weight || !t->weight_f)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    return LD_OK;
}

static void taps_free(tap_table *t)
{
    free(t->index);
    free(t->weight);
    free(t->weight_f);
    memset(t, 0, sizeof *t);
}

static void taps_round(tap_table *t)
{
    for (int64_t i = 0; i < t->positions * t->taps; i++)
        t->weight_f[i] = (float)t->weight[i];
}

/* out[p] = sum_k w * plane[index] for every position, scaled by `scale`
 * (1 / sample count for RoiAlign's average). */
#define DEFINE_APPLY_TAPS(T, SFX, WEIGHTS)                                                  \
    static void apply_taps_##SFX(const tap_table *t, const T *plane, T *out, T scale)       \
    {                                                                                       \
        for (int64_t p = 0; p < t->positions; p++) {                                        \
            const int64_t *ix = t->index + p * t->taps;                                     \
            const T *w = t->WEIGHTS + p * t->taps;                                          \
            T acc = 0;                                                                      \
            for (int k = 0; k < t->taps; k++)                                               \
                acc += w[k] * plane[ix[k]];                                                 \
            out[p] = acc * scale;                                                           \
        }                                                                                   \
    }

DEFINE_APPLY_TAPS(float, f32, weight_f)
DEFINE_APPLY_TAPS(double, f64, weight)

/* --- NonMaxSuppression ---------------------------------------------------------------- */

typedef struct nms_params {
    int64_t batches, classes, boxes;
    int64_t max_per_class;
    float iou_threshold;
    bool has_score_threshold;
    float score_threshold;
    bool center_point_box;
} nms_params;

static ld_status nms_params_make(ld_kernel_ctx *ctx, nms_params *p)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = ld_krequire(ctx, 1);
    if (st != LD_OK)
        return st;
    const ld_tensor *boxes = ctx->inputs[0], *scores = ctx->inputs[1];
    if (boxes->dtype != LD_DTYPE_FLOAT32 || scores->dtype != LD_DTYPE_FLOAT32)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "boxes and scores must be float32");
    if (boxes->shape.rank != 3 || boxes->shape.dims[2] != 4)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "boxes must be [batches, boxes, 4]");
    if (scores->shape.rank != 3 || scores->shape.dims[0] != boxes->shape.dims[0] ||
        scores->shape.dims[2] != boxes->shape.dims[1])
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "scores must be [batches, classes, boxes] "
                              "matching boxes");
    p->batches = boxes->shape.dims[0];
    p->boxes = boxes->shape.dims[1];
    p->classes = scores->shape.dims[1];
    p->max_per_class = 0;
    p->iou_threshold = 0;
    const ld_tensor *t = ld_kin(ctx, 2);
    if (t && t->count > 0) {
        if (t->dtype != LD_DTYPE_INT64)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "max_output_boxes_per_class must be int64");
        if ((st = ld_krequire_values(ctx, t, "max_output_boxes_per_class")) != LD_OK)
            return st;
        p->max_per_class = ((const int64_t *)t->data)[0];
    }
    if (p->max_per_class < 0)
        p->max_per_class = 0;
    if ((t = ld_kin(ctx, 3)) && t->count > 0) {
        if (t->dtype != LD_DTYPE_FLOAT32)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "iou_threshold must be float32");
        if ((st = ld_krequire_values(ctx, t, "iou_threshold")) != LD_OK)
            return st;
        p->iou_threshold = ((const float *)t->data)[0];
        if (!(p->iou_threshold >= 0 && p->iou_threshold <= 1))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "iou_threshold %g is not in [0, 1]",
                                  (double)p->iou_threshold);
    }
    p->has_score_threshold = false;
    if ((t = ld_kin(ctx, 4)) && t->count > 0) {
        if (t->dtype != LD_DTYPE_FLOAT32)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "score_threshold must be float32");
        if ((st = ld_krequire_values(ctx, t, "score_threshold")) != LD_OK)
            return st;
        p->has_score_threshold = true;
        p->score_threshold = ((const float *)t->data)[0];
    }
    int64_t center;
    st = ld_node_attr_int(ctx->node, "center_point_box", 0, &center, ctx->err);
    if (st == LD_OK && center != 0 && center != 1)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "center_point_box must be 0 or 1");
    p->center_point_box = center == 1;
    return st;
}

static ld_status nms_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    nms_params p = {0};
    ld_status st = nms_params_make(ctx, &p);
    outs[0].dtype = LD_DTYPE_INT64;
    outs[0].deferred = true;
    return st;
}

/* Box corners as (x_min, y_min, x_max, y_max). */
static void box_corners(const float *b, bool center, float out[4])
{
    if (center) {
        out[0] = b[0] - b[2] / 2.0f;
        out[1] = b[1] - b[3] / 2.0f;
        out[2] = b[0] + b[2] / 2.0f;
        out[3] = b[1] + b[3] / 2.0f;
    } else { /* [y1, x1, y2, x2], any diagonal */
        out[0] = fminf(b[1], b[3]);
        out[1] = fminf(b[0], b[2]);
        out[2] = fmaxf(b[1], b[3]);
        out[3] = fmaxf(b[0], b[2]);
    }
}

static bool suppressed_by_iou(const float a[4], const float b[4], float threshold)
{
    float ix0 = fmaxf(a[0], b[0]), iy0 = fmaxf(a[1], b[1]);
    float ix1 = fminf(a[2], b[2]), iy1 = fminf(a[3], b[3]);
    if (ix1 <= ix0 || iy1 <= iy0)
        return false;
    float inter = (ix1 - ix0) * (iy1 - iy0);
    float area_a = (a[2] - a[0]) * (a[3] - a[1]), area_b = (b[2] - b[0]) * (b[3] - b[1]);
    float uni = area_a + area_b - inter;
    if (area_a <= 0 || area_b <= 0 || uni <= 0)
        return false;
    return inter / uni > threshold;
}

typedef struct nms_candidate {
    float score;
    int64_t box;
} nms_candidate;

static int candidate_order(const void *pa, const void *pb)
{
    const nms_candidate *a = pa, *b = pb;
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    return (a->box > b->box) - (a->box < b->box);
}

/* Selects boxes of one (batch, class); appends box indices to `picked`. */
static int64_t nms_one_class(const nms_params *p, const float *corners, const float *scores,
                             nms_candidate *cand, int64_t *picked)
{
    int64_t n = 0, chosen = 0;
    for (int64_t b = 0; b < p->boxes; b++)
        if (!p->has_score_threshold || scores[b] > p->score_threshold)
            cand[n++] = (nms_candidate){scores[b], b};
    qsort(cand, (size_t)n, sizeof *cand, candidate_order);
    for (int64_t i = 0; i < n && chosen < p->max_per_class; i++) {
        const float *box = corners + cand[i].box * 4;
        bool keep = true;
        for (int64_t k = 0; keep && k < chosen; k++)
            keep = !suppressed_by_iou(corners + picked[k] * 4, box, p->iou_threshold);
        if (keep)
            picked[chosen++] = cand[i].box;
    }
    return chosen;
}

static ld_status nms_compute(ld_kernel_ctx *ctx)
{
    nms_params p = {0};
    ld_status st = nms_params_make(ctx, &p);
    if (st != LD_OK)
        return st;
    const float *boxes = ctx->inputs[0]->data, *scores = ctx->inputs[1]->data;
    size_t nb = (size_t)(p.boxes ? p.boxes : 1);
    int64_t total_max = p.batches * p.classes * (p.max_per_class < p.boxes ? p.max_per_class
                                                                           : p.boxes);
    float *corners = malloc(nb * 4 * sizeof *corners);
    nms_candidate *cand = malloc(nb * sizeof *cand);
    int64_t *picked = malloc(nb * sizeof *picked);
    int64_t *triples = malloc((size_t)(total_max ? total_max : 1) * 3 * sizeof *triples);
    int64_t selected = 0;
    if (!corners || !cand || !picked || !triples) {
        st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t b = 0; b < p.batches; b++) {
        for (int64_t i = 0; i < p.boxes; i++)
            box_corners(boxes + (b * p.boxes + i) * 4, p.center_point_box, corners + i * 4);
        for (int64_t c = 0; c < p.classes; c++) {
            int64_t n = nms_one_class(&p, corners, scores + (b * p.classes + c) * p.boxes, cand,
                                      picked);
            for (int64_t k = 0; k < n; k++) {
                triples[selected * 3] = b;
                triples[selected * 3 + 1] = c;
                triples[selected * 3 + 2] = picked[k];
                selected++;
            }
        }
    }
    ld_shape shape = {.rank = 2, .dims = {selected, 3}};
    ld_tensor *y;
    st = ld_kernel_alloc_output(ctx, 0, LD_DTYPE_INT64, &shape, &y);
    if (st == LD_OK && selected)
        memcpy(y->data, triples, (size_t)selected * 3 * sizeof *triples);
out:
    free(corners);
    free(cand);
    free(picked);
    free(triples);
    return st;
}

/* --- RoiAlign ------------------------------------------------------------------------- */

typedef struct roialign_state {
    bool max_mode;
    bool half_pixel;
    int64_t out_h, out_w, sampling_ratio;
    float spatial_scale;
} roialign_state;

static ld_status roialign_init(ld_kernel_ctx *ctx)
{
    roialign_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    const char *mode, *coord;
    ld_status st = ld_node_attr_string(ctx->node, "mode", "avg", &mode, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_string(ctx->node, "coordinate_transformation_mode",
                                 ctx->node->opset >= 16 ? "half_pixel" : "output_half_pixel",
                                 &coord, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "output_height", 1, &s->out_h, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "output_width", 1, &s->out_w, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "sampling_ratio", 0, &s->sampling_ratio, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "spatial_scale", 1.0f, &s->spatial_scale, ctx->err);
    if (st != LD_OK)
        return st;
    if (strcmp(mode, "avg") != 0 && strcmp(mode, "max") != 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "mode '%s' is not avg or max", mode);
    if (strcmp(coord, "half_pixel") != 0 && strcmp(coord, "output_half_pixel") != 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "coordinate_transformation_mode '%s' is not "
                              "half_pixel or output_half_pixel", coord);
    if (s->out_h < 1 || s->out_w < 1 || s->sampling_ratio < 0 || s->out_h > (1 << 20) ||
        s->out_w > (1 << 20))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "output_height/output_width must be positive "
                              "and sampling_ratio non-negative");
    s->max_mode = strcmp(mode, "max") == 0;
    s->half_pixel = strcmp(coord, "half_pixel") == 0;
    return LD_OK;
}

static void free_state(void *state)
{
    free(state);
}

static ld_status roialign_check(ld_kernel_ctx *ctx)
{
    ld_status st = ld_krequire(ctx, 0);
    for (int i = 1; st == LD_OK && i < 3; i++)
        st = ld_krequire(ctx, i);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0], *rois = ctx->inputs[1], *idx = ctx->inputs[2];
    if (!is_float_data(x->dtype) || rois->dtype != x->dtype)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "X and rois must be the same float type");
    if (x->shape.rank != 4)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "X must be 4-D (N, C, H, W)");
    if (rois->shape.rank != 2 || rois->shape.dims[1] != 4)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "rois must be [num_rois, 4]");
    if (idx->dtype != LD_DTYPE_INT64 || idx->shape.rank != 1 ||
        idx->shape.dims[0] != rois->shape.dims[0])
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "batch_indices must be int64 [num_rois]");
    if (rois->shape.dims[0] > 0 && (x->shape.dims[2] == 0 || x->shape.dims[3] == 0))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "X has an empty spatial plane");
    if ((st = ld_krequire_values(ctx, idx, "batch_indices")) != LD_OK)
        return st;
    const int64_t *b = idx->data;
    for (int64_t i = 0; i < idx->count; i++)
        if (b[i] < 0 || b[i] >= x->shape.dims[0])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "batch index %lld of roi %lld is out of "
                                  "range (batch %lld)", (long long)b[i], (long long)i,
                                  (long long)x->shape.dims[0]);
    return LD_OK;
}

static ld_status roialign_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const roialign_state *s = ctx->state;
    ld_status st = roialign_check(ctx);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    outs[0].shape = (ld_shape){.rank = 4, .dims = {ctx->inputs[1]->shape.dims[0],
                                                   ctx->inputs[0]->shape.dims[1], s->out_h,
                                                   s->out_w}};
    return LD_OK;
}

/* Bilinear taps of one sample point (ONNX Runtime's rules: points more
 * than one pixel outside give nothing, the rest clamp to the border). */
static void roi_sample_taps(double y, double x, int64_t h, int64_t w, int64_t *ix, double *wt)
{
    for (int k = 0; k < 4; k++) {
        ix[k] = 0;
        wt[k] = 0;
    }
    if (y < -1.0 || y > (double)h || x < -1.0 || x > (double)w)
        return;
    y = y <= 0 ? 0 : y;
    x = x <= 0 ? 0 : x;
    int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1, x1;
    if (y0 >= h - 1) {
        y1 = y0 = h - 1;
        y = (double)y0;
    } else {
        y1 = y0 + 1;
    }
    if (x0 >= w - 1) {
        x1 = x0 = w - 1;
        x = (double)x0;
    } else {
        x1 = x0 + 1;
    }
    double ly = y - (double)y0, lx = x - (double)x0, hy = 1 - ly, hx = 1 - lx;
    ix[0] = y0 * w + x0;
    ix[1] = y0 * w + x1;
    ix[2] = y1 * w + x0;
    ix[3] = y1 * w + x1;
    wt[0] = hy * hx;
    wt[1] = hy * lx;
    wt[2] = ly * hx;
    wt[3] = ly * lx;
}

/* Taps of every output bin of one roi: grid_h * grid_w sample points of 4 taps. */
static ld_status roi_taps(ld_kernel_ctx *ctx, const double box[4], int64_t h, int64_t w,
                          tap_table *t, int64_t *count)
{
    const roialign_state *s = ctx->state;
    double offset = s->half_pixel ? 0.5 : 0.0, scale = s->spatial_scale;
    double x0 = box[0] * scale - offset, y0 = box[1] * scale - offset;
    double rw = box[2] * scale - offset - x0, rh = box[3] * scale - offset - y0;
    if (!s->half_pixel) { /* the legacy mode forces rois of at least one pixel */
        rw = fmax(rw, 1.0);
        rh = fmax(rh, 1.0);
    }
    double bin_h = rh / (double)s->out_h, bin_w = rw / (double)s->out_w;
    int64_t gh = s->sampling_ratio > 0 ? s->sampling_ratio : (int64_t)ceil(rh / (double)s->out_h);
    int64_t gw = s->sampling_ratio > 0 ? s->sampling_ratio : (int64_t)ceil(rw / (double)s->out_w);
    gh = gh < 0 ? 0 : (gh > 4096 ? 4096 : gh);
    gw = gw < 0 ? 0 : (gw > 4096 ? 4096 : gw);
    *count = gh * gw > 1 ? gh * gw : 1;
    if (4 * gh * gw * s->out_h * s->out_w > ((int64_t)1 << 31))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "roi needs %lld x %lld sampling points "
                              "per bin, too many", (long long)gh, (long long)gw);
    int64_t samples = gh * gw;
    ld_status st = taps_alloc(ctx, t, (int)(4 * (samples > 0 ? samples : 1)), s->out_h * s->out_w);
    if (st != LD_OK || samples == 0)
        return st;
    for (int64_t ph = 0; ph < s->out_h; ph++)
        for (int64_t pw = 0; pw < s->out_w; pw++)
            for (int64_t iy = 0; iy < gh; iy++)
                for (int64_t ix = 0; ix < gw; ix++) {
                    double yy = y0 + (double)ph * bin_h + ((double)iy + 0.5) * bin_h / (double)gh;
                    double xx = x0 + (double)pw * bin_w + ((double)ix + 0.5) * bin_w / (double)gw;
                    int64_t at = (ph * s->out_w + pw) * t->taps + (iy * gw + ix) * 4;
                    roi_sample_taps(yy, xx, h, w, t->index + at, t->weight + at);
                }
    taps_round(t);
    return LD_OK;
}

/* Max mode as ONNX Runtime: the maximum over sample points of the largest
 * weighted corner value (not of the interpolated value). */
static double roi_max_bin(const tap_table *t, int64_t p, const void *plane, bool is_double)
{
    double best = 0;
    for (int k = 0; k < t->taps; k += 4) {
        double v = -INFINITY;
        for (int c = 0; c < 4; c++) {
            int64_t i = p * t->taps + k + c;
            double x = is_double ? ((const double *)plane)[t->index[i]]
                                 : (double)((const float *)plane)[t->index[i]];
            double wx = is_double ? t->weight[i] * x : (double)(t->weight_f[i] * (float)x);
            v = fmax(v, wx);
        }
        best = k == 0 ? v : fmax(best, v);
    }
    return best;
}

static ld_status roialign_compute(ld_kernel_ctx *ctx)
{
    const roialign_state *s = ctx->state;
    ld_status st = roialign_check(ctx);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0], *rois = ctx->inputs[1];
    const int64_t *batch = ctx->inputs[2]->data;
    ld_tensor *y = ctx->outputs[0];
    bool is_double = x->dtype == LD_DTYPE_FLOAT64;
    size_t elem = is_double ? 8 : 4;
    int64_t channels = x->shape.dims[1], h = x->shape.dims[2], w = x->shape.dims[3];
    int64_t plane_out = s->out_h * s->out_w;
    for (int64_t r = 0; st == LD_OK && r < rois->shape.dims[0]; r++) {
        double box[4];
        for (int k = 0; k < 4; k++)
            box[k] = ld_tensor_get_double(rois, r * 4 + k);
        tap_table t = {0};
        int64_t count;
        st = roi_taps(ctx, box, h, w, &t, &count);
        for (int64_t c = 0; st == LD_OK && c < channels; c++) {
            const char *plane =
                (const char *)x->data + (size_t)((batch[r] * channels + c) * h * w) * elem;
            char *out = (char *)y->data + (size_t)((r * channels + c) * plane_out) * elem;
            if (s->max_mode) {
                for (int64_t p = 0; p < plane_out; p++) {
                    double v = roi_max_bin(&t, p, plane, is_double);
                    if (is_double)
                        ((double *)out)[p] = v;
                    else
                        ((float *)out)[p] = (float)v;
                }
            } else if (is_double) {
                apply_taps_f64(&t, (const double *)plane, (double *)out, 1.0 / (double)count);
            } else {
                apply_taps_f32(&t, (const float *)plane, (float *)out, 1.0f / (float)count);
            }
        }
        taps_free(&t);
    }
    return st;
}

/* --- GridSample ----------------------------------------------------------------------- */

typedef enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC } gs_mode;
typedef enum { GS_ZEROS, GS_BORDER, GS_REFLECTION } gs_padding;

typedef struct gridsample_state {
    gs_mode mode;
    gs_padding padding;
    bool align_corners;
} gridsample_state;

static ld_status gridsample_init(ld_kernel_ctx *ctx)
{
    gridsample_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    const char *mode, *padding;
    int64_t align;
    ld_status st = ld_node_attr_string(ctx->node, "mode",
                                       ctx->node->opset >= 20 ? "linear" : "bilinear", &mode,
                                       ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_string(ctx->node, "padding_mode", "zeros", &padding, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "align_corners", 0, &align, ctx->err);
    if (st != LD_OK)
        return st;
    s->align_corners = align != 0;
    /* Opset 20 renamed the modes linear / cubic (and allows N-D, which the
     * rank check refuses). */
    bool v20 = ctx->node->opset >= 20;
    if (strcmp(mode, v20 ? "linear" : "bilinear") == 0)
        s->mode = GS_BILINEAR;
    else if (strcmp(mode, "nearest") == 0)
        s->mode = GS_NEAREST;
    else if (strcmp(mode, v20 ? "cubic" : "bicubic") == 0)
        s->mode = GS_BICUBIC;
    else
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "mode '%s' is not supported", mode);
    if (strcmp(padding, "zeros") == 0)
        s->padding = GS_ZEROS;
    else if (strcmp(padding, "border") == 0)
        s->padding = GS_BORDER;
    else if (strcmp(padding, "reflection") == 0)
        s->padding = GS_REFLECTION;
    else
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "padding_mode '%s' is not zeros, border or "
                              "reflection", padding);
    return LD_OK;
}

static ld_status gridsample_check(ld_kernel_ctx *ctx)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = ld_krequire(ctx, 1);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0], *grid = ctx->inputs[1];
    if (!is_float_data(x->dtype) || grid->dtype != x->dtype)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "X and grid must be the same float type");
    if (x->shape.rank != 4 || grid->shape.rank != 4 || grid->shape.dims[3] != 2 ||
        grid->shape.dims[0] != x->shape.dims[0])
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "X must be (N, C, H, W) and grid (N, H_out, "
                              "W_out, 2)");
    return LD_OK;
}

static ld_status gridsample_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = gridsample_check(ctx);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0], *grid = ctx->inputs[1];
    outs[0].dtype = x->dtype;
    outs[0].shape = (ld_shape){.rank = 4, .dims = {x->shape.dims[0], x->shape.dims[1],
                                                   grid->shape.dims[1], grid->shape.dims[2]}};
    return LD_OK;
}

/* PyTorch's grid_sampler helpers (the operator's definition). */
static double gs_unnormalize(double coord, int64_t size, bool align)
{
    return align ? (coord + 1) / 2 * (double)(size - 1) : ((coord + 1) * (double)size - 1) / 2;
}

static double gs_reflect(double v, double twice_low, double twice_high)
{
    if (twice_low == twice_high)
        return 0;
    double lo = twice_low / 2, span = (twice_high - twice_low) / 2;
    v = fabs(v - lo);
    double extra = fmod(v, span);
    int64_t flips = (int64_t)floor(v / span);
    return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

static double gs_pad(const gridsample_state *s, double v, int64_t size)
{
    if (s->padding == GS_ZEROS)
        return v;
    if (s->padding == GS_REFLECTION)
        v = s->align_corners ? gs_reflect(v, 0, 2 * (double)(size - 1))
                             : gs_reflect(v, -1, 2 * (double)size - 1);
    return fmin((double)(size - 1), fmax(v, 0));
}

/* One tap at integral pixel (yy, xx): weight w, or weight 0 when out of
 * bounds (NaN coordinates included). */
static void gs_tap(double yy, double xx, int64_t h, int64_t w, double weight, int64_t *ix,
                   double *wt)
{
    bool inside = yy >= 0 && yy < (double)h && xx >= 0 && xx < (double)w;
    *ix = inside ? (int64_t)yy * w + (int64_t)xx : 0;
    *wt = inside ? weight : 0;
}

static void gs_cubic(double t, double c[4])
{
    const double a = -0.75;
    double x = t + 1;
    c[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
    x = 1 - t;
    c[2] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 2 - t;
    c[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

static void gs_position_taps(const gridsample_state *s, double gx, double gy, int64_t h,
                             int64_t w, int64_t *ix, double *wt)
{
    double x = gs_unnormalize(gx, w, s->align_corners), y = gs_unnormalize(gy, h, s->align_corners);
    if (s->mode == GS_BICUBIC) { /* padding applies to each tap, not to the point */
        double fx = floor(x), fy = floor(y), cx[4], cy[4];
        gs_cubic(x - fx, cx);
        gs_cubic(y - fy, cy);
        for (int j = 0; j < 4; j++)
            for (int i = 0; i < 4; i++)
                gs_tap(floor(gs_pad(s, fy - 1 + j, h)), floor(gs_pad(s, fx - 1 + i, w)), h, w,
                       cx[i] * cy[j], ix + j * 4 + i, wt + j * 4 + i);
        return;
    }
    x = gs_pad(s, x, w);
    y = gs_pad(s, y, h);
    if (s->mode == GS_NEAREST) {
        gs_tap(nearbyint(y), nearbyint(x), h, w, 1, ix, wt);
        return;
    }
    double x0 = floor(x), y0 = floor(y), lx = x - x0, ly = y - y0;
    gs_tap(y0, x0, h, w, (1 - lx) * (1 - ly), ix, wt);
    gs_tap(y0, x0 + 1, h, w, lx * (1 - ly), ix + 1, wt + 1);
    gs_tap(y0 + 1, x0, h, w, (1 - lx) * ly, ix + 2, wt + 2);
    gs_tap(y0 + 1, x0 + 1, h, w, lx * ly, ix + 3, wt + 3);
}

static ld_status gridsample_compute(ld_kernel_ctx *ctx)
{
    const gridsample_state *s = ctx->state;
    ld_status st = gridsample_check(ctx);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0], *grid = ctx->inputs[1];
    ld_tensor *y = ctx->outputs[0];
    bool is_double = x->dtype == LD_DTYPE_FLOAT64;
    size_t elem = is_double ? 8 : 4;
    int64_t n = x->shape.dims[0], channels = x->shape.dims[1];
    int64_t h = x->shape.dims[2], w = x->shape.dims[3];
    int64_t positions = grid->shape.dims[1] * grid->shape.dims[2];
    int taps = s->mode == GS_NEAREST ? 1 : (s->mode == GS_BILINEAR ? 4 : 16);
    if (h == 0 || w == 0) { /* nothing to sample: every point is padding */
        if (y->nbytes)
            memset(y->data, 0, y->nbytes);
        return LD_OK;
    }
    for (int64_t b = 0; st == LD_OK && b < n; b++) {
        tap_table t = {0};
        st = taps_alloc(ctx, &t, taps, positions);
        for (int64_t p = 0; st == LD_OK && p < positions; p++) {
            double gx = ld_tensor_get_double(grid, (b * positions + p) * 2);
            double gy = ld_tensor_get_double(grid, (b * positions + p) * 2 + 1);
            gs_position_taps(s, gx, gy, h, w, t.index + p * taps, t.weight + p * taps);
        }
        if (st == LD_OK)
            taps_round(&t);
        for (int64_t c = 0; st == LD_OK && c < channels; c++) {
            const char *plane = (const char *)x->data + (size_t)((b * channels + c) * h * w) * elem;
            char *out = (char *)y->data + (size_t)((b * channels + c) * positions) * elem;
            if (is_double)
                apply_taps_f64(&t, (const double *)plane, (double *)out, 1.0);
            else
                apply_taps_f32(&t, (const float *)plane, (float *)out, 1.0f);
        }
        taps_free(&t);
    }
    return st;
}

static const ld_kernel detection_kernels[] = {
    {"", "GridSample", 16, LD_KERNEL_WIDEN_HALF, gridsample_init, gridsample_infer, gridsample_compute, free_state, NULL},
    {"", "NonMaxSuppression", 10, LD_KERNEL_WIDEN_HALF, NULL, nms_infer, nms_compute, NULL, NULL},
    {"", "RoiAlign", 10, LD_KERNEL_WIDEN_HALF, roialign_init, roialign_infer, roialign_compute, free_state, NULL},
    {"", "RoiAlign", 16, LD_KERNEL_WIDEN_HALF, roialign_init, roialign_infer, roialign_compute, free_state, NULL},
};

LD_KERNEL_FAMILY(detection);
