/* layerdiff — MaxUnpool (opsets 9, 11) and MaxRoiPool (1).
 *
 * MaxUnpool scatters X into a zero tensor at the flat indices I that MaxPool
 * produced (indices into the whole output, batch and channel included). It
 * moves data without arithmetic, so it works on any dtype by element size;
 * indices are validated against the output size, and a duplicate index keeps
 * the last value written (input order). The default output size per spatial
 * dim is (in - 1) * stride + kernel - pad_begin - pad_end; the optional
 * output_shape input overrides it.
 *
 * MaxRoiPool is Caffe's ROI max pooling, as ONNX Runtime implements it: ROI
 * corners are scaled by spatial_scale and rounded half away from zero, a
 * malformed ROI becomes 1x1, bin h covers rows [floor(h * bin), ceil((h+1) *
 * bin)) of the ROI clipped to the image, and an empty bin gives 0. Bin sizes
 * are computed in the input's float type. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/conv_common.h"
#include "backends/kernels/kernels.h"

/* --- MaxUnpool ------------------------------------------------------------------------- */

typedef struct unpool_state {
    ld_window_attrs attrs;
} unpool_state;

static ld_status unpool_init(ld_kernel_ctx *ctx)
{
    unpool_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ld_status st = ld_window_attrs_parse(ctx, &s->attrs);
    if (st == LD_OK && s->attrs.n_kernel == 0)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'kernel_shape' is required");
    if (st != LD_OK) {
        free(s);
        return st;
    }
    ctx->state = s;
    return LD_OK;
}

static void unpool_fini(void *state)
{
    free(state);
}

/* *out: the output shape; *dflt: the default one, (in - 1) * stride + kernel -
 * pads, in whose coordinates MaxPool's indices count. */
static ld_status unpool_shape(ld_kernel_ctx *ctx, ld_shape *out, ld_shape *dflt)
{
    const ld_window_attrs *a = &((const unpool_state *)ctx->state)->attrs;
    const ld_tensor *x = ctx->n_inputs > 0 ? ctx->inputs[0] : NULL;
    const ld_tensor *ind = ctx->n_inputs > 1 ? ctx->inputs[1] : NULL;
    const ld_tensor *shape = ctx->n_inputs > 2 ? ctx->inputs[2] : NULL;
    char xs[64], is[64];
    if (!x || !ind)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs inputs X and I");
    if (ld_dtype_size(x->dtype) == 0)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    if (ind->dtype != LD_DTYPE_INT64 || !ld_shape_equal(&ind->shape, &x->shape))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices I (%s, %s) must be int64 with X's shape "
                              "%s", ld_dtype_name(ind->dtype),
                              ld_shape_format(&ind->shape, is, sizeof is),
                              ld_shape_format(&x->shape, xs, sizeof xs));
    int nd = x->shape.rank - 2;
    if (nd < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input X (%s) needs spatial dimensions",
                              ld_shape_format(&x->shape, xs, sizeof xs));
    ld_status st = ld_window_check_len(ctx, "kernel_shape", a->n_kernel, (size_t)nd);
    if (st == LD_OK)
        st = ld_window_check_len(ctx, "strides", a->n_strides, (size_t)nd);
    if (st == LD_OK)
        st = ld_window_check_len(ctx, "pads", a->n_pads, 2 * (size_t)nd);
    if (st != LD_OK)
        return st;
    *dflt = x->shape;
    for (int i = 0; i < nd; i++) {
        int64_t in = x->shape.dims[2 + i], k = a->kernel[i];
        int64_t s = a->n_strides ? a->strides[i] : 1;
        int64_t pads = a->n_pads ? a->pads[i] + a->pads[i + nd] : 0;
        if (k > ((int64_t)1 << 40) || s > ((int64_t)1 << 20) || pads > ((int64_t)1 << 40))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "kernel, stride or pads are too large");
        dflt->dims[2 + i] = in == 0 ? 0 : (in - 1) * s + k - pads;
        if (dflt->dims[2 + i] < 0)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "spatial dim %d: the output size would be "
                                  "%lld", i, (long long)dflt->dims[2 + i]);
    }
    *out = *dflt;
    if (shape) {
        if (shape->dtype != LD_DTYPE_INT64 || shape->shape.rank != 1 ||
            shape->count != x->shape.rank)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "output_shape must be an int64 vector of %d "
                                  "values", x->shape.rank);
        st = ld_krequire_values(ctx, shape, "output_shape");
        if (st != LD_OK)
            return st;
        for (int i = 0; i < x->shape.rank; i++) {
            out->dims[i] = ((const int64_t *)shape->data)[i];
            if (out->dims[i] < 0 || out->dims[i] > ((int64_t)1 << 40))
                return ld_kernel_fail(ctx, LD_ERR_INPUT, "output_shape[%d] = %lld is invalid", i,
                                      (long long)out->dims[i]);
        }
    }
    return ld_shape_count(out, &(int64_t){0}, "MaxUnpool output", ctx->err) == LD_OK
               ? LD_OK
               : ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name,
                                 ctx->node->op_type);
}

static ld_status unpool_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_shape dflt;
    ld_status st = unpool_shape(ctx, &outs[0].shape, &dflt);
    if (st == LD_OK)
        outs[0].dtype = ctx->inputs[0]->dtype;
    return st;
}

static ld_status unpool_compute(ld_kernel_ctx *ctx)
{
    ld_shape shape, dflt;
    ld_status st = unpool_shape(ctx, &shape, &dflt);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0], *ind = ctx->inputs[1];
    ld_tensor *y = ctx->outputs[0];
    size_t es = ld_dtype_size(x->dtype);
    if (y->nbytes)
        memset(y->data, 0, y->nbytes);
    int64_t dflt_count = 1;
    for (int i = 0; i < dflt.rank; i++)
        dflt_count *= dflt.dims[i];
    const int64_t *idx = ind->data;
    for (int64_t i = 0; i < x->count; i++) {
        /* The index counts in the default shape; an explicit output_shape
         * keeps the coordinates (the extra size is at the end). */
        int64_t at = idx[i], rest = idx[i], target = 0, stride = 1;
        bool ok = at >= 0 && at < dflt_count;
        for (int d = dflt.rank - 1; ok && d >= 0; d--) {
            int64_t coord = rest % dflt.dims[d];
            rest /= dflt.dims[d];
            ok = coord < shape.dims[d];
            target += coord * stride;
            stride *= shape.dims[d];
        }
        if (!ok)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "index I[%lld] = %lld is outside the output",
                                  (long long)i, (long long)at);
        memcpy((char *)y->data + (size_t)target * es, (const char *)x->data + (size_t)i * es, es);
    }
    return LD_OK;
}

/* --- MaxRoiPool ---------------------------------------------------------------------------- */

typedef struct roi_state {
    int64_t pooled[2];
    float spatial_scale;
} roi_state;

static ld_status roi_init(ld_kernel_ctx *ctx)
{
    const int64_t *shape = NULL;
    size_t n = 0;
    roi_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ld_status st = ld_node_attr_ints(ctx->node, "pooled_shape", &shape, &n, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "spatial_scale", 1.0f, &s->spatial_scale, ctx->err);
    if (st == LD_OK && (n != 2 || shape[0] < 1 || shape[1] < 1 || shape[0] > (1 << 20) ||
                        shape[1] > (1 << 20)))
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'pooled_shape' must be two positive "
                            "values");
    if (st != LD_OK) {
        free(s);
        return st;
    }
    s->pooled[0] = shape[0];
    s->pooled[1] = shape[1];
    ctx->state = s;
    return LD_OK;
}

static void roi_fini(void *state)
{
    free(state);
}

static ld_status roi_check(ld_kernel_ctx *ctx, const ld_tensor **x, const ld_tensor **rois)
{
    *x = ctx->n_inputs > 0 ? ctx->inputs[0] : NULL;
    *rois = ctx->n_inputs > 1 ? ctx->inputs[1] : NULL;
    char xs[64], rs[64];
    if (!*x || !*rois)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs inputs X and rois");
    if ((*x)->dtype != LD_DTYPE_FLOAT32 && (*x)->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name((*x)->dtype));
    if ((*rois)->dtype != (*x)->dtype || (*x)->shape.rank != 4 || (*rois)->shape.rank != 2 ||
        (*rois)->shape.dims[1] != 5)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "expected X [N, C, H, W] and rois [num_rois, 5] "
                              "of the same float type, got %s and %s",
                              ld_shape_format(&(*x)->shape, xs, sizeof xs),
                              ld_shape_format(&(*rois)->shape, rs, sizeof rs));
    return LD_OK;
}

static ld_status roi_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const roi_state *s = ctx->state;
    const ld_tensor *x, *rois;
    ld_status st = roi_check(ctx, &x, &rois);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape = (ld_shape){.rank = 4, .dims = {rois->shape.dims[0], x->shape.dims[1],
                                                   s->pooled[0], s->pooled[1]}};
    return LD_OK;
}

/* A rounded ROI coordinate as an integer, clamped so that NaN, infinities
 * and huge values cannot overflow (the bins are clipped to the image). */
static inline int64_t roi_int(double v)
{
    const double limit = 1e12;
    return !(v > -limit) ? -(int64_t)limit : v > limit ? (int64_t)limit : (int64_t)v;
}

/* One ROI over all channels. Returns false on a bad batch index. */
#define DEFINE_ROIPOOL(T, NAME)                                                                \
    static bool NAME(const T *x, const T *roi, int64_t N, int64_t C, int64_t H, int64_t W,     \
                     const roi_state *s, T *y)                                                 \
    {                                                                                          \
        T scale = (T)s->spatial_scale;                                                         \
        if (!(roi[0] >= 0 && roi[0] < (T)N))                                                   \
            return false;                                                                      \
        int64_t batch = (int64_t)roi[0];                                                       \
        int64_t w0 = roi_int(round(roi[1] * scale)), h0 = roi_int(round(roi[2] * scale));     \
        int64_t w1 = roi_int(round(roi[3] * scale)), h1 = roi_int(round(roi[4] * scale));     \
        int64_t rh = h1 - h0 + 1 > 1 ? h1 - h0 + 1 : 1, rw = w1 - w0 + 1 > 1 ? w1 - w0 + 1 : 1; \
        T bin_h = (T)rh / (T)s->pooled[0], bin_w = (T)rw / (T)s->pooled[1];                    \
        for (int64_t c = 0; c < C; c++) {                                                      \
            const T *xp = x + (batch * C + c) * H * W;                                         \
            for (int64_t ph = 0; ph < s->pooled[0]; ph++)                                      \
                for (int64_t pw = 0; pw < s->pooled[1]; pw++) {                                \
                    int64_t hs = (int64_t)floor((T)ph * bin_h) + h0;                           \
                    int64_t he = (int64_t)ceil((T)(ph + 1) * bin_h) + h0;                      \
                    int64_t ws = (int64_t)floor((T)pw * bin_w) + w0;                           \
                    int64_t we = (int64_t)ceil((T)(pw + 1) * bin_w) + w0;                      \
                    hs = hs < 0 ? 0 : hs > H ? H : hs;                                         \
                    he = he < 0 ? 0 : he > H ? H : he;                                         \
                    ws = ws < 0 ? 0 : ws > W ? W : ws;                                         \
                    we = we < 0 ? 0 : we > W ? W : we;                                         \
                    T best = 0;                                                                \
                    if (he > hs && we > ws) {                                                  \
                        best = -INFINITY;                                                      \
                        for (int64_t h = hs; h < he; h++)                                      \
                            for (int64_t w = ws; w < we; w++)                                  \
                                if (xp[h * W + w] > best || isnan(xp[h * W + w]))              \
                                    best = xp[h * W + w];                                      \
                    }                                                                          \
                    y[(c * s->pooled[0] + ph) * s->pooled[1] + pw] = best;                     \
                }                                                                              \
        }                                                                                      \
        return true;                                                                           \
    }

DEFINE_ROIPOOL(float, roipool_f32)
DEFINE_ROIPOOL(double, roipool_f64)

static ld_status roi_compute(ld_kernel_ctx *ctx)
{
    const roi_state *s = ctx->state;
    const ld_tensor *x, *rois;
    ld_status st = roi_check(ctx, &x, &rois);
    if (st != LD_OK)
        return st;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], H = x->shape.dims[2],
            W = x->shape.dims[3];
    int64_t per_roi = C * s->pooled[0] * s->pooled[1];
    for (int64_t r = 0; r < rois->shape.dims[0]; r++) {
        bool ok;
        if (x->dtype == LD_DTYPE_FLOAT32)
            ok = roipool_f32(x->data, (const float *)rois->data + r * 5, N, C, H, W, s,
                             (float *)ctx->outputs[0]->data + r * per_roi);
        else
            ok = roipool_f64(x->data, (const double *)rois->data + r * 5, N, C, H, W, s,
                             (double *)ctx->outputs[0]->data + r * per_roi);
        if (!ok)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "rois[%lld] has batch index %g outside "
                                  "[0, %lld)", (long long)r,
                                  ld_tensor_get_double(rois, r * 5), (long long)N);
    }
    return LD_OK;
}

static const ld_kernel unpool_kernels[] = {
    {"", "MaxRoiPool", 1, LD_KERNEL_WIDEN_HALF, roi_init, roi_infer, roi_compute, roi_fini, NULL},
    {"", "MaxUnpool", 9, 0, unpool_init, unpool_infer, unpool_compute, unpool_fini, NULL},
    {"", "MaxUnpool", 11, 0, unpool_init, unpool_infer, unpool_compute, unpool_fini, NULL},
};

LD_KERNEL_FAMILY(unpool);
