/* layerdiff — Resize (10, 11, 13) and the deprecated Upsample (7, 9).
 *
 * Every mode is computed from per-axis tables built once per call: for each
 * output index along an axis, the clamped source indices ("taps") and their
 * weights, and whether tf_crop_and_resize extrapolates there. Nearest then is
 * one gather over all axes (by element size, so every dtype works);
 * linear and cubic are separable passes, innermost axis first, which is
 * exactly the order of the ONNX reference (it interpolates the inner axes of
 * each outer neighbour, then combines them along the outer axis). Axes the
 * tables show to be the identity are skipped; when only the last two axes
 * change (NCHW images) one fused sweep blends cached, horizontally resized
 * source rows without an intermediate tensor.
 *
 * With scales, "length_resized" in the coordinate formulas is scale * input
 * length (not the floored output length), as the ONNX reference computes it.
 *
 * Coordinates and weights are computed in double, as the ONNX reference
 * does; the interpolation itself runs in the data's type (float32 in float,
 * float64 in double). Integer inputs to linear/cubic are interpolated in
 * double and rounded to nearest (ties to even), saturating to the type. */
#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

/* Work below this many multiply-adds runs on one thread (kernel_util.h). */
#define RESIZE_PARALLEL_MIN LD_PARALLEL_MIN_WORK

typedef enum { INTERP_NEAREST, INTERP_LINEAR, INTERP_CUBIC } interp_mode;

typedef enum {
    COORD_HALF_PIXEL, COORD_PYTORCH_HALF_PIXEL, COORD_ALIGN_CORNERS, COORD_ASYMMETRIC,
    COORD_TF_HALF_PIXEL_FOR_NN, COORD_TF_CROP_AND_RESIZE,
} coord_mode;

/* NEAREST_SIMPLE is Resize-10 and Upsample: truncate, ceil when downsampling
 * (as ONNX Runtime). */
typedef enum {
    NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL,
    NEAREST_SIMPLE,
} nearest_mode;

typedef struct resize_state {
    interp_mode mode;
    coord_mode coord;
    nearest_mode nearest;
    float cubic_a;
    bool exclude_outside;
    float extrapolation;
    bool upsample;           /* Upsample: scales must be >= 1 */
    int roi_input;           /* input index, -1 when the version has none */
    int scales_input;
    int sizes_input;
    const float *attr_scales; /* Upsample-7: borrowed from the node */
    size_t n_attr_scales;
} resize_state;

/* What one call resizes: shapes, per-axis scales and roi. */
typedef struct resize_plan {
    int rank;
    int64_t in[LD_MAX_RANK];
    int64_t out[LD_MAX_RANK];
    double scale[LD_MAX_RANK];   /* the scale the coordinate formulas divide by */
    double length[LD_MAX_RANK];  /* "length_resized": scale * in (scales) or the size */
    double roi_start[LD_MAX_RANK];
    double roi_end[LD_MAX_RANK];
    bool roi_float;              /* roi was float32 */
} resize_plan;

/* Per-axis sampling table. */
typedef struct axis_table {
    int taps;
    int64_t *index;   /* out * taps clamped source indices */
    double *weight_d; /* out * taps (linear/cubic only) */
    float *weight_f;
    uint8_t *outside; /* out flags: extrapolate (tf_crop_and_resize only), else NULL */
    bool identity;
} axis_table;

/* --- attributes ------------------------------------------------------------------- */

static ld_status parse_mode(ld_kernel_ctx *ctx, resize_state *s, bool cubic_allowed)
{
    const char *mode;
    ld_status st = ld_node_attr_string(ctx->node, "mode", "nearest", &mode, ctx->err);
    if (st != LD_OK)
        return st;
    if (strcmp(mode, "nearest") == 0)
        s->mode = INTERP_NEAREST;
    else if (strcmp(mode, "linear") == 0 || (s->upsample && strcmp(mode, "bilinear") == 0))
        s->mode = INTERP_LINEAR;
    else if (cubic_allowed && strcmp(mode, "cubic") == 0)
        s->mode = INTERP_CUBIC;
    else
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "mode '%s' is not one of nearest, linear%s",
                              mode, cubic_allowed ? ", cubic" : "");
    return LD_OK;
}

/* Looks string attribute `attr` (default `fallback`) up in names[] and
 * stores the matching index in *out. */
static ld_status parse_choice(ld_kernel_ctx *ctx, const char *attr, const char *fallback,
                              const char *const *names, int n, int *out)
{
    const char *name;
    ld_status st = ld_node_attr_string(ctx->node, attr, fallback, &name, ctx->err);
    if (st != LD_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = i;
            return LD_OK;
        }
    }
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s '%s' is not supported", attr, name);
}

/* Resize 11 and 13: X, roi, scales, sizes and the full attribute set. */
static ld_status parse_resize11(ld_kernel_ctx *ctx, resize_state *s)
{
    /* In coord_mode / nearest_mode order. tf_half_pixel_for_nn left the spec
     * in opset 13; ONNX Runtime still runs it, and so do we. */
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "tf_half_pixel_for_nn",
                                         "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    int coord = 0, nearest = 0;
    ld_status st = parse_mode(ctx, s, true);
    if (st == LD_OK)
        st = parse_choice(ctx, "coordinate_transformation_mode", "half_pixel", coords, 6, &coord);
    if (st == LD_OK)
        st = parse_choice(ctx, "nearest_mode", "round_prefer_floor", nearests, 4, &nearest);
    s->coord = (coord_mode)coord;
    s->nearest = (nearest_mode)nearest;
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "cubic_coeff_a", -0.75f, &s->cubic_a, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "extrapolation_value", 0.0f, &s->extrapolation,
                                ctx->err);
    int64_t exclude = 0, antialias = 0;
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "exclude_outside", 0, &exclude, ctx->err);
    s->exclude_outside = exclude != 0;
    /* Opset 18 additions this kernel does not implement: refuse, never ignore. */
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "antialias", 0, &antialias, ctx->err);
    if (st == LD_OK && (antialias || ld_node_attr(ctx->node, "axes") ||
                        ld_node_attr(ctx->node, "keep_aspect_ratio_policy")))
        st = ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "antialias, axes and "
                            "keep_aspect_ratio_policy (opset 18) are not supported");
    s->roi_input = 1;
    s->scales_input = 2;
    s->sizes_input = 3;
    return st;
}

static ld_status resize_init(ld_kernel_ctx *ctx)
{
    resize_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    s->roi_input = s->scales_input = s->sizes_input = -1;
    s->upsample = strcmp(ctx->node->op_type, "Upsample") == 0;
    if (!s->upsample && ctx->node->opset >= 11)
        return parse_resize11(ctx, s);
    /* Upsample 7/9 and Resize 10: asymmetric coordinates, "simple" nearest. */
    s->coord = COORD_ASYMMETRIC;
    s->nearest = NEAREST_SIMPLE;
    s->cubic_a = -0.75f;
    ld_status st = parse_mode(ctx, s, false);
    if (st != LD_OK)
        return st;
    if (s->upsample && ctx->node->opset < 9) {
        st = ld_node_attr_floats(ctx->node, "scales", &s->attr_scales, &s->n_attr_scales,
                                 ctx->err);
        if (st == LD_OK && !s->attr_scales)
            st = ld_kernel_fail(ctx, LD_ERR_INPUT, "the 'scales' attribute is required");
        return st;
    }
    s->scales_input = 1;
    return LD_OK;
}

static void resize_fini(void *state)
{
    free(state);
}

/* --- the plan: output shape, scales, roi ------------------------------------------ */

static const ld_tensor *optional_input(const ld_kernel_ctx *ctx, int i)
{
    const ld_tensor *t = i >= 0 ? ld_kin(ctx, i) : NULL;
    return t && t->count > 0 ? t : NULL;
}

static ld_status plan_from_scales(ld_kernel_ctx *ctx, const resize_state *s,
                                  const float *scales, int64_t n, resize_plan *p)
{
    if (n != p->rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "scales has %lld values for an input of rank "
                              "%d", (long long)n, p->rank);
    for (int d = 0; d < p->rank; d++) {
        double scale = scales[d];
        if (!(scale > 0) || !isfinite(scale) || (s->upsample && scale < 1))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "scale %g for axis %d is invalid (must be "
                                  "%s)", scale, d, s->upsample ? ">= 1" : "> 0 and finite");
        double out = floor((double)p->in[d] * scale);
        if (out > (double)INT32_MAX * 1024)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "scale %g for axis %d gives an output "
                                  "dimension that is too large", scale, d);
        p->out[d] = (int64_t)out;
        p->scale[d] = scale;
        p->length[d] = scale * (double)p->in[d];
    }
    return LD_OK;
}

static ld_status plan_from_sizes(ld_kernel_ctx *ctx, const ld_tensor *sizes, resize_plan *p)
{
    if (sizes->dtype != LD_DTYPE_INT64)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "sizes must be int64, got %s",
                              ld_dtype_name(sizes->dtype));
    if (sizes->count != p->rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "sizes has %lld values for an input of rank %d",
                              (long long)sizes->count, p->rank);
    const int64_t *v = sizes->data;
    for (int d = 0; d < p->rank; d++) {
        if (v[d] < 0 || (p->in[d] == 0 && v[d] != 0))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "size %lld for axis %d is invalid (input "
                                  "dimension %lld)", (long long)v[d], d, (long long)p->in[d]);
        p->out[d] = v[d];
        p->scale[d] = p->in[d] ? (double)v[d] / (double)p->in[d] : 1.0;
        p->length[d] = (double)v[d];
    }
    return LD_OK;
}

static ld_status plan_roi(ld_kernel_ctx *ctx, const resize_state *s, resize_plan *p)
{
    for (int d = 0; d < p->rank; d++) {
        p->roi_start[d] = 0;
        p->roi_end[d] = 1;
    }
    if (s->coord != COORD_TF_CROP_AND_RESIZE)
        return LD_OK;
    const ld_tensor *roi = optional_input(ctx, s->roi_input);
    if (!roi)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "tf_crop_and_resize needs the roi input");
    if (roi->count != 2 * p->rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "roi has %lld values, expected %d (2 * rank)",
                              (long long)roi->count, 2 * p->rank);
    if (roi->dtype != LD_DTYPE_FLOAT32 && roi->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "roi must be a float tensor, got %s",
                              ld_dtype_name(roi->dtype));
    p->roi_float = roi->dtype == LD_DTYPE_FLOAT32;
    for (int d = 0; d < p->rank; d++) {
        p->roi_start[d] = ld_tensor_get_double(roi, d);
        p->roi_end[d] = ld_tensor_get_double(roi, d + p->rank);
    }
    return LD_OK;
}

static ld_status resize_plan_make(ld_kernel_ctx *ctx, resize_plan *p)
{
    const resize_state *s = ctx->state;
    ld_status st = ld_krequire(ctx, 0);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    p->rank = x->shape.rank;
    for (int d = 0; d < p->rank; d++)
        p->in[d] = x->shape.dims[d];
    const ld_tensor *scales = optional_input(ctx, s->scales_input);
    const ld_tensor *sizes = optional_input(ctx, s->sizes_input);
    if (scales && sizes)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "only one of scales and sizes may be given");
    if (s->attr_scales)
        st = plan_from_scales(ctx, s, s->attr_scales, (int64_t)s->n_attr_scales, p);
    else if (scales && scales->dtype != LD_DTYPE_FLOAT32)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "scales must be float32, got %s",
                            ld_dtype_name(scales->dtype));
    else if (scales)
        st = plan_from_scales(ctx, s, scales->data, scales->count, p);
    else if (sizes)
        st = plan_from_sizes(ctx, sizes, p);
    else if (p->rank == 0)
        st = LD_OK;
    else
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "needs a non-empty scales or sizes input");
    if (st != LD_OK)
        return st;
    return plan_roi(ctx, s, p);
}

static ld_status resize_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    resize_plan p = {0};
    ld_status st = resize_plan_make(ctx, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    outs[0].shape.rank = p.rank;
    for (int d = 0; d < p.rank; d++)
        outs[0].shape.dims[d] = p.out[d];
    return LD_OK;
}

/* --- per-axis tables ----------------------------------------------------------------- */

/* The source coordinate of output index x along axis d (ONNX reference formulas). */
static double source_coord(const resize_state *s, const resize_plan *p, int d, double x)
{
    double in = (double)p->in[d], len = p->length[d], scale = p->scale[d];
    switch (s->coord) {
    case COORD_PYTORCH_HALF_PIXEL:
        return len == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case COORD_ALIGN_CORNERS:
        return len == 1 ? 0 : x * (in - 1) / (len - 1);
    case COORD_ASYMMETRIC:
        return x / scale;
    case COORD_TF_HALF_PIXEL_FOR_NN:
        return (x + 0.5) / scale;
    case COORD_TF_CROP_AND_RESIZE: {
        /* A float32 roi's span (end - start) is a float subtraction, as in the
         * ONNX reference; exact halves under nearest rounding depend on it. */
        double r0 = p->roi_start[d], r1 = p->roi_end[d];
        double span = p->roi_float ? (double)((float)r1 - (float)r0) : r1 - r0;
        double c = len == 1 ? span * (in - 1) / 2 : x * span * (in - 1) / (len - 1);
        return c + r0 * (in - 1);
    }
    case COORD_HALF_PIXEL:
    default:
        return (x + 0.5) / scale - 0.5;
    }
}

static int64_t nearest_index(const resize_state *s, double x, bool downsampling)
{
    double fl = floor(x), ratio = x - fl;
    switch (s->nearest) {
    case NEAREST_SIMPLE:
        return downsampling ? (int64_t)ceil(x) : (int64_t)x;
    case NEAREST_FLOOR:
        return (int64_t)fl;
    case NEAREST_CEIL:
        return (int64_t)ceil(x);
    case NEAREST_ROUND_PREFER_CEIL:
        return (int64_t)fl + (ratio >= 0.5);
    case NEAREST_ROUND_PREFER_FLOOR:
    default:
        return (int64_t)fl + (ratio > 0.5);
    }
}

static int64_t clamp_index(int64_t i, int64_t n)
{
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

/* Cubic convolution weights of the 4 taps floor(x)-1 .. floor(x)+2 for the
 * fraction r (Keys, coefficient a). */
static void cubic_weights(double a, double r, double w[4])
{
    double t = r + 1, u = 1 - r, v = 2 - r;
    w[0] = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    w[2] = ((a + 2) * u - (a + 3)) * u * u + 1;
    w[3] = ((a * v - 5 * a) * v + 8 * a) * v - 4 * a;
}

static void fill_entry(const resize_state *s, int64_t in, double x, int64_t *idx, double *w)
{
    double fl = floor(x), r = x - fl;
    int64_t base = (int64_t)fl;
    if (s->mode == INTERP_LINEAR) {
        idx[0] = base;
        idx[1] = base + 1;
        w[0] = 1 - r;
        w[1] = r;
    } else {
        cubic_weights(s->cubic_a, r, w);
        double sum = 0;
        for (int k = 0; k < 4; k++) {
            idx[k] = base - 1 + k;
            if (s->exclude_outside && (idx[k] < 0 || idx[k] >= in))
                w[k] = 0;
            sum += w[k];
        }
        if (s->exclude_outside && sum != 0)
            for (int k = 0; k < 4; k++)
                w[k] /= sum;
    }
    int taps = s->mode == INTERP_LINEAR ? 2 : 4;
    for (int k = 0; k < taps; k++)
        idx[k] = clamp_index(idx[k], in);
}

static void table_free(axis_table *t)
{
    free(t->index);
    free(t->weight_d);
    free(t->weight_f);
    free(t->outside);
    memset(t, 0, sizeof *t);
}

/* True when output j reads exactly source j with weight 1. */
static bool entry_is_identity(const axis_table *t, int64_t j)
{
    if (t->outside && t->outside[j])
        return false;
    double total = 0;
    for (int k = 0; k < t->taps; k++) {
        double w = t->weight_d ? t->weight_d[j * t->taps + k] : 1;
        if (t->index[j * t->taps + k] == j)
            total += w;
        else if (w != 0)
            return false;
    }
    return total == 1;
}

static ld_status table_build(ld_kernel_ctx *ctx, const resize_plan *p, int d, axis_table *t)
{
    const resize_state *s = ctx->state;
    int64_t in = p->in[d], out = p->out[d];
    t->taps = s->mode == INTERP_NEAREST ? 1 : (s->mode == INTERP_LINEAR ? 2 : 4);
    size_t n = (size_t)(out ? out : 1) * (size_t)t->taps;
    t->index = malloc(n * sizeof *t->index);
    if (s->mode != INTERP_NEAREST) {
        t->weight_d = malloc(n * sizeof *t->weight_d);
        t->weight_f = malloc(n * sizeof *t->weight_f);
    }
    if (s->coord == COORD_TF_CROP_AND_RESIZE)
        t->outside = calloc((size_t)(out ? out : 1), 1);
    if (!t->index || (s->mode != INTERP_NEAREST && (!t->weight_d || !t->weight_f)) ||
        (s->coord == COORD_TF_CROP_AND_RESIZE && !t->outside)) {
        table_free(t);
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    }
    t->identity = in == out;
    for (int64_t j = 0; j < out; j++) {
        double x = source_coord(s, p, d, (double)j);
        int64_t *idx = t->index + j * t->taps;
        if (t->outside && (x < 0 || x > (double)(in - 1))) {
            t->outside[j] = 1;
            x = 0;
        }
        if (s->mode == INTERP_NEAREST) {
            idx[0] = clamp_index(nearest_index(s, x, p->scale[d] < 1), in);
        } else {
            double *w = t->weight_d + j * t->taps;
            fill_entry(s, in, x, idx, w);
            for (int k = 0; k < t->taps; k++)
                t->weight_f[j * t->taps + k] = (float)w[k];
        }
        if (t->identity && !entry_is_identity(t, j))
            t->identity = false;
    }
    return LD_OK;
}

/* --- nearest: one gather over all axes ----------------------------------------------- */

typedef struct gather_job {
    const resize_plan *p;
    const axis_table *tables;
    int64_t offsets_start[LD_MAX_RANK]; /* into offsets */
    int64_t *offsets;                   /* per axis, per output index: source element offset
                                           or -1 to extrapolate */
    size_t elem;
    unsigned char extrap[8];            /* extrapolation value in the element type */
} gather_job;

/* Stores v as element i of dst in dtype: floats as they are, integers
 * rounded to nearest (ties to even) and saturated, NaN as 0. */
static void store_saturated(ld_dtype dtype, void *dst, int64_t i, double v)
{
    double r = nearbyint(v);
#define SAT(T, LO, HI) ((T *)dst)[i] = (T)(r != r ? 0 : fmin(HI, fmax(LO, r)))
    switch (dtype) {
    case LD_DTYPE_FLOAT32: ((float *)dst)[i] = (float)v; break;
    case LD_DTYPE_FLOAT64: ((double *)dst)[i] = v; break;
    case LD_DTYPE_INT8: SAT(int8_t, -128.0, 127.0); break;
    case LD_DTYPE_UINT8: case LD_DTYPE_BOOL: SAT(uint8_t, 0.0, 255.0); break;
    case LD_DTYPE_INT16: SAT(int16_t, -32768.0, 32767.0); break;
    case LD_DTYPE_UINT16: SAT(uint16_t, 0.0, 65535.0); break;
    case LD_DTYPE_INT32: SAT(int32_t, -2147483648.0, 2147483647.0); break;
    case LD_DTYPE_UINT32: SAT(uint32_t, 0.0, 4294967295.0); break;
    case LD_DTYPE_INT64: SAT(int64_t, -9223372036854775808.0, 9223372036854774784.0); break;
    case LD_DTYPE_UINT64: SAT(uint64_t, 0.0, 18446744073709549568.0); break;
    default: break;
    }
#undef SAT
}

/* Copies one output row (the last axis) whose source row starts at base. */
static void gather_row(const gather_job *job, const unsigned char *src, unsigned char *dst,
                       int64_t base, bool row_outside)
{
    int last = job->p->rank - 1;
    int64_t w = job->p->out[last];
    const int64_t *off = job->offsets + job->offsets_start[last];
    size_t e = job->elem;
    if (row_outside) {
        for (int64_t j = 0; j < w; j++)
            memcpy(dst + (size_t)j * e, job->extrap, e);
        return;
    }
    if (job->tables[last].outside) {
        for (int64_t j = 0; j < w; j++)
            memcpy(dst + (size_t)j * e,
                   off[j] < 0 ? job->extrap : src + (size_t)(base + off[j]) * e, e);
        return;
    }
#define GATHER_AS(T)                                                                      \
    do {                                                                                  \
        const T *s_ = (const T *)src + base;                                              \
        T *d_ = (T *)dst;                                                                 \
        for (int64_t j = 0; j < w; j++)                                                   \
            d_[j] = s_[off[j]];                                                           \
    } while (0)
    switch (e) {
    case 1: GATHER_AS(uint8_t); break;
    case 2: GATHER_AS(uint16_t); break;
    case 4: GATHER_AS(uint32_t); break;
    default: GATHER_AS(uint64_t); break;
    }
#undef GATHER_AS
}

/* Source offset of output row r (all axes but the last), or -1 when an outer
 * axis extrapolates there. */
static int64_t gather_row_base(const gather_job *job, int64_t r)
{
    int64_t base = 0;
    bool outside = false;
    for (int d = job->p->rank - 2; d >= 0; d--) {
        int64_t n = job->p->out[d], i = r % n;
        r /= n;
        int64_t off = job->offsets[job->offsets_start[d] + i];
        if (off < 0)
            outside = true;
        base += off;
    }
    return outside ? -1 : base;
}

/* Output rounding fused into nearest mode (kernel.h, round_block): each
 * thread hands its consecutive output rows to the hook in runs of at least
 * RESIZE_ROUND_BLOCK values, right after writing them, instead of the
 * engine's second pass over the output. */
#define RESIZE_ROUND_BLOCK 4096
static bool nearest_rounds_output(const ld_kernel_ctx *ctx, const ld_tensor *y)
{
    return ctx->round_block && ctx->n_outputs > 0 && ctx->outputs[0] == y &&
           y->dtype == LD_DTYPE_FLOAT32;
}

static void nearest_round_rows(const ld_kernel_ctx *ctx, ld_tensor *y, int64_t first,
                               int64_t n_rows, int64_t width)
{
    ctx->round_block(ctx->round_user, 0, (float *)y->data + first * width, n_rows * width);
}

static ld_status resize_nearest(ld_kernel_ctx *ctx, const resize_plan *p, const axis_table *tables)
{
    const resize_state *s = ctx->state;
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    gather_job job = {.p = p, .tables = tables, .elem = ld_dtype_size(x->dtype)};
    if (job.elem != 1 && job.elem != 2 && job.elem != 4 && job.elem != 8)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    store_saturated(x->dtype, job.extrap, 0, s->extrapolation);
    int64_t total = 0, stride = 1, in_stride[LD_MAX_RANK];
    for (int d = p->rank - 1; d >= 0; d--) {
        in_stride[d] = stride;
        stride *= p->in[d];
        job.offsets_start[d] = total;
        total += p->out[d];
    }
    job.offsets = malloc((size_t)(total ? total : 1) * sizeof *job.offsets);
    if (!job.offsets)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    for (int d = 0; d < p->rank; d++)
        for (int64_t j = 0; j < p->out[d]; j++)
            job.offsets[job.offsets_start[d] + j] =
                tables[d].outside && tables[d].outside[j] ? -1 : tables[d].index[j] * in_stride[d];
    int64_t width = p->out[p->rank - 1], rows = y->count / width;
    size_t row_bytes = (size_t)width * job.elem;
    const unsigned char *src = x->data;
    unsigned char *dst = y->data;
    bool round = nearest_rounds_output(ctx, y);
#pragma omp parallel num_threads(ctx->threads) if (y->count > RESIZE_PARALLEL_MIN)
    {
        int64_t prev_base = -2, prev_row = -1, run = -1; /* run: first row not yet rounded */
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            int64_t base = gather_row_base(&job, r);
            unsigned char *out_row = dst + (size_t)r * row_bytes;
            /* Upsampling repeats source rows: copy the row just made (while
             * it is not rounded yet: each value is rounded and counted once,
             * as made). */
            if (base == prev_base && prev_row == r - 1 && (!round || (run >= 0 && run < r)))
                memcpy(out_row, out_row - row_bytes, row_bytes);
            else
                gather_row(&job, src, out_row, base < 0 ? 0 : base, base < 0);
            prev_base = base;
            prev_row = r;
            if (round) {
                run = run < 0 ? r : run;
                if ((r - run + 1) * width >= RESIZE_ROUND_BLOCK) {
                    nearest_round_rows(ctx, y, run, r + 1 - run, width);
                    run = -1;
                }
            }
        }
        if (round && run >= 0) /* this thread's last rows */
            nearest_round_rows(ctx, y, run, prev_row + 1 - run, width);
    }
    if (round)
        ctx->rounded_outputs |= 1u;
    free(job.offsets);
    return LD_OK;
}

/* --- linear / cubic: separable passes ------------------------------------------------ */

/* Typed loops: one interpolated row, a blend of rows, a pass along one axis
 * of a tensor viewed as [outer, in_len, inner] -> [outer, out_len, inner],
 * and the fused resize of the last two axes. */
#define DEFINE_RESIZE_LOOPS(T, SFX, WEIGHTS)                                                 \
    static void resize_row_##SFX(const T *src, T *dst, const axis_table *t, int64_t n,       \
                                 T extrap)                                                   \
    {                                                                                        \
        const int taps = t->taps;                                                            \
        if (taps == 2 && !t->outside) { /* linear: the hot case, unrolled */                 \
            const int64_t *ix = t->index;                                                    \
            const T *w = t->WEIGHTS;                                                         \
            for (int64_t j = 0; j < n; j++)                                                  \
                dst[j] = w[2 * j] * src[ix[2 * j]] + w[2 * j + 1] * src[ix[2 * j + 1]];      \
            return;                                                                          \
        }                                                                                    \
        for (int64_t j = 0; j < n; j++) {                                                    \
            const int64_t *ix = t->index + j * taps;                                         \
            const T *w = t->WEIGHTS + j * taps;                                              \
            T acc = w[0] * src[ix[0]];                                                       \
            for (int k = 1; k < taps; k++)                                                   \
                acc += w[k] * src[ix[k]];                                                    \
            dst[j] = t->outside && t->outside[j] ? extrap : acc;                             \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    /* d = sum_k w[k] * rows[k], or the extrapolation value when outside */                 \
    static void blend_rows_##SFX(const T *const *rows, const T *w, int taps, bool outside,   \
                                 T extrap, T *d, int64_t n)                                  \
    {                                                                                        \
        if (outside) {                                                                       \
            for (int64_t i = 0; i < n; i++)                                                  \
                d[i] = extrap;                                                               \
            return;                                                                          \
        }                                                                                    \
        const T *s0 = rows[0], w0 = w[0];                                                    \
        if (taps == 2) { /* the same sums as below, in one sweep */                          \
            const T *s1 = rows[1], w1 = w[1];                                                \
            for (int64_t i = 0; i < n; i++)                                                  \
                d[i] = w0 * s0[i] + w1 * s1[i];                                              \
            return;                                                                          \
        }                                                                                    \
        for (int64_t i = 0; i < n; i++)                                                      \
            d[i] = w0 * s0[i];                                                               \
        for (int k = 1; k < taps; k++) {                                                     \
            const T *sk = rows[k], wk = w[k];                                                \
            for (int64_t i = 0; i < n; i++)                                                  \
                d[i] += wk * sk[i];                                                          \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    static void resize_pass_##SFX(const T *src, T *dst, int64_t outer, int64_t in_len,       \
                                  int64_t out_len, int64_t inner, const axis_table *t,       \
                                  T extrap, int threads)                                     \
    {                                                                                        \
        const int taps = t->taps;                                                            \
        const int64_t rows = outer * out_len;                                                \
        const bool par = rows * inner * taps > RESIZE_PARALLEL_MIN;                          \
        if (inner == 1) {                                                                    \
            _Pragma("omp parallel for num_threads(threads) if (par)")                        \
            for (int64_t o = 0; o < outer; o++)                                              \
                resize_row_##SFX(src + o * in_len, dst + o * out_len, t, out_len, extrap);   \
            return;                                                                          \
        }                                                                                    \
        _Pragma("omp parallel for num_threads(threads) if (par)")                            \
        for (int64_t r = 0; r < rows; r++) {                                                 \
            int64_t o = r / out_len, j = r % out_len;                                        \
            const T *rowp[4];                                                                \
            for (int k = 0; k < taps; k++)                                                   \
                rowp[k] = src + (o * in_len + t->index[j * taps + k]) * inner;               \
            blend_rows_##SFX(rowp, t->WEIGHTS + j * taps, taps, t->outside && t->outside[j], \
                             extrap, dst + r * inner, inner);                                \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    /* [outer, in_h, in_w] -> [outer, out_h, out_w] in one sweep: each output row           \
     * blends horizontally resized source rows, which a per-thread cache of one             \
     * row per tap (slot = source row mod taps; a row's taps are distinct mod taps)        \
     * computes once. Tasks are bands of output rows. */                                    \
    static void resize_2d_##SFX(const T *src, T *dst, int64_t outer, int64_t in_h,           \
                                int64_t in_w, const axis_table *th, int64_t out_h,           \
                                const axis_table *tw, int64_t out_w, T extrap, T *cache,     \
                                int threads)                                                 \
    {                                                                                        \
        const int taps = th->taps;                                                           \
        const int64_t band = 16, bands = (out_h + band - 1) / band, tasks = outer * bands;   \
        const bool par = tasks > 1 && outer * out_h * out_w * taps > RESIZE_PARALLEL_MIN;    \
        _Pragma("omp parallel num_threads(threads) if (par)")                                \
        {                                                                                    \
            T *rows = cache + (size_t)omp_get_thread_num() * (size_t)(taps * out_w);         \
            _Pragma("omp for schedule(static)")                                              \
            for (int64_t task = 0; task < tasks; task++) {                                   \
                int64_t o = task / bands, j0 = task % bands * band;                          \
                int64_t j1 = j0 + band < out_h ? j0 + band : out_h, tag[4] = {-1, -1, -1, -1}; \
                const T *plane = src + o * in_h * in_w;                                      \
                for (int64_t j = j0; j < j1; j++) {                                          \
                    const T *rowp[4];                                                        \
                    for (int k = 0; k < taps; k++) {                                         \
                        int64_t sr = th->index[j * taps + k], slot = sr % taps;              \
                        if (tag[slot] != sr) {                                               \
                            resize_row_##SFX(plane + sr * in_w, rows + slot * out_w, tw,     \
                                             out_w, extrap);                                 \
                            tag[slot] = sr;                                                  \
                        }                                                                    \
                        rowp[k] = rows + slot * out_w;                                       \
                    }                                                                        \
                    blend_rows_##SFX(rowp, th->WEIGHTS + j * taps, taps,                     \
                                     th->outside && th->outside[j], extrap,                  \
                                     dst + (o * out_h + j) * out_w, out_w);                  \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }

DEFINE_RESIZE_LOOPS(float, f32, weight_f)
DEFINE_RESIZE_LOOPS(double, f64, weight_d)

/* The last two axes only (NCHW images): the fused 2-D sweep. */
static ld_status resize_last_two(ld_kernel_ctx *ctx, const resize_plan *p,
                                 const axis_table *tables, bool is_double, const void *src,
                                 void *dst)
{
    const resize_state *s = ctx->state;
    int r = p->rank;
    int64_t outer = 1;
    for (int d = 0; d < r - 2; d++)
        outer *= p->in[d];
    int threads = ctx->threads > 0 ? ctx->threads : 1;
    size_t n = (size_t)threads * (size_t)tables[r - 1].taps * (size_t)p->out[r - 1];
    void *cache = malloc((n ? n : 1) * (is_double ? sizeof(double) : sizeof(float)));
    if (!cache)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    if (is_double)
        resize_2d_f64(src, dst, outer, p->in[r - 2], p->in[r - 1], &tables[r - 2], p->out[r - 2],
                      &tables[r - 1], p->out[r - 1], s->extrapolation, cache, threads);
    else
        resize_2d_f32(src, dst, outer, p->in[r - 2], p->in[r - 1], &tables[r - 2], p->out[r - 2],
                      &tables[r - 1], p->out[r - 1], s->extrapolation, cache, threads);
    free(cache);
    return LD_OK;
}

/* Runs the passes for every non-identity axis, innermost first, from src
 * (float32 or float64, shape p->in) into dst (shape p->out). */
static ld_status resize_separable(ld_kernel_ctx *ctx, const resize_plan *p,
                                  const axis_table *tables, bool is_double, const void *src,
                                  void *dst)
{
    const resize_state *s = ctx->state;
    size_t elem = is_double ? sizeof(double) : sizeof(float);
    int axes[LD_MAX_RANK], n_axes = 0;
    for (int d = p->rank - 1; d >= 0; d--)
        if (!tables[d].identity)
            axes[n_axes++] = d;
    int64_t cur[LD_MAX_RANK], in_count = 1, max_tmp = 0;
    for (int d = 0; d < p->rank; d++) {
        cur[d] = p->in[d];
        in_count *= p->in[d];
    }
    if (n_axes == 0) {
        if (in_count)
            memcpy(dst, src, (size_t)in_count * elem);
        return LD_OK;
    }
    if (n_axes == 2 && axes[0] == p->rank - 1 && axes[1] == p->rank - 2)
        return resize_last_two(ctx, p, tables, is_double, src, dst);
    /* Size of the largest intermediate result. */
    for (int a = 0; a + 1 < n_axes; a++) {
        cur[axes[a]] = p->out[axes[a]];
        int64_t count = 1;
        for (int d = 0; d < p->rank; d++)
            if (__builtin_mul_overflow(count, cur[d], &count) || count > INT64_MAX / 8)
                return ld_kernel_fail(ctx, LD_ERR_NOMEM, "intermediate result is too large");
        if (count > max_tmp)
            max_tmp = count;
    }
    void *tmp[2] = {NULL, NULL};
    if (n_axes > 1) {
        tmp[0] = malloc((size_t)(max_tmp ? max_tmp : 1) * elem);
        tmp[1] = n_axes > 2 ? malloc((size_t)(max_tmp ? max_tmp : 1) * elem) : NULL;
        if (!tmp[0] || (n_axes > 2 && !tmp[1])) {
            free(tmp[0]);
            free(tmp[1]);
            return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        }
    }
    for (int d = 0; d < p->rank; d++)
        cur[d] = p->in[d];
    const void *from = src;
    for (int a = 0; a < n_axes; a++) {
        int d = axes[a];
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < d; k++)
            outer *= cur[k];
        for (int k = d + 1; k < p->rank; k++)
            inner *= cur[k];
        void *to = a + 1 == n_axes ? dst : tmp[a % 2];
        if (is_double)
            resize_pass_f64(from, to, outer, cur[d], p->out[d], inner, &tables[d],
                            s->extrapolation, ctx->threads);
        else
            resize_pass_f32(from, to, outer, cur[d], p->out[d], inner, &tables[d],
                            s->extrapolation, ctx->threads);
        cur[d] = p->out[d];
        from = to;
    }
    free(tmp[0]);
    free(tmp[1]);
    return LD_OK;
}

/* Integer data: interpolate in double, round to nearest even, saturate. */
static ld_status resize_integer(ld_kernel_ctx *ctx, const resize_plan *p, const axis_table *tables)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    if (!ld_dtype_is_signed_int(x->dtype) && !ld_dtype_is_unsigned_int(x->dtype))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported for "
                              "linear or cubic resize", ld_dtype_name(x->dtype));
    double *in = malloc((size_t)(x->count ? x->count : 1) * sizeof *in);
    double *out = malloc((size_t)(y->count ? y->count : 1) * sizeof *out);
    ld_status st = LD_OK;
    if (!in || !out) {
        st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < x->count; i++)
        in[i] = ld_tensor_get_double(x, i);
    st = resize_separable(ctx, p, tables, true, in, out);
    for (int64_t i = 0; st == LD_OK && i < y->count; i++)
        store_saturated(y->dtype, y->data, i, out[i]);
out:
    free(in);
    free(out);
    return st;
}

static ld_status resize_compute(ld_kernel_ctx *ctx)
{
    const resize_state *s = ctx->state;
    resize_plan p = {0};
    ld_status st = resize_plan_make(ctx, &p);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    if (y->count == 0)
        return LD_OK;
    if (p.rank == 0) {
        memcpy(y->data, x->data, x->nbytes);
        return LD_OK;
    }
    axis_table tables[LD_MAX_RANK];
    memset(tables, 0, sizeof tables);
    for (int d = 0; st == LD_OK && d < p.rank; d++)
        st = table_build(ctx, &p, d, &tables[d]);
    if (st != LD_OK)
        goto out;
    if (s->mode == INTERP_NEAREST)
        st = resize_nearest(ctx, &p, tables);
    else if (x->dtype == LD_DTYPE_FLOAT32 || x->dtype == LD_DTYPE_FLOAT64)
        st = resize_separable(ctx, &p, tables, x->dtype == LD_DTYPE_FLOAT64, x->data, y->data);
    else
        st = resize_integer(ctx, &p, tables);
out:
    for (int d = 0; d < p.rank; d++)
        table_free(&tables[d]);
    return st;
}

static const ld_kernel resize_kernels[] = {
    {"", "Resize", 10, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini},
    {"", "Resize", 11, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini},
    {"", "Resize", 13, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini},
    {"", "Upsample", 7, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini},
    {"", "Upsample", 9, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini},
};

LD_KERNEL_FAMILY(resize);
