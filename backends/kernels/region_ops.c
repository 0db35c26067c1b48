/* layerdiff — kernels that copy regions of a tensor and fill or rearrange
 * the rest: Pad (constant / reflect / edge), Trilu, ReverseSequence. Rows
 * are copied with memcpy; only the padded borders of edge/reflect rows go
 * element by element. Every dtype, by element size. */
#include <inttypes.h>

#include "backends/kernels/kernels.h"
#include "backends/kernels/shape_util.h"
#include "layerdiff/round.h"

/* --- Pad (1: paddings attribute; 2: pads attribute; 11: pads and constant_value
 *     inputs; 13: bfloat16) ------------------------------------------------------------ */

typedef enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE } pad_mode;

/* Negative pads crop first, then the positive ones pad the cropped region
 * (as ONNX Runtime does: edge and reflect see only the kept elements). */
typedef struct pad_plan {
    pad_mode mode;
    int64_t pre[LD_MAX_RANK];   /* elements added before the kept region */
    int64_t start[LD_MAX_RANK]; /* first kept input element */
    int64_t len[LD_MAX_RANK];   /* kept input elements */
    ld_shape out;
    uint8_t value[8]; /* the constant, as one element of the data's dtype */
} pad_plan;

/* The float `value` attribute of Pad-1/2 as an element of dtype. */
static void value_from_float(ld_dtype dtype, float f, uint8_t *out)
{
    memset(out, 0, 8);
    switch (dtype) {
    case LD_DTYPE_FLOAT32: memcpy(out, &f, 4); break;
    case LD_DTYPE_FLOAT64: { double d = f; memcpy(out, &d, 8); break; }
    case LD_DTYPE_FLOAT16: { ld_fp16 h = ld_fp32_to_fp16(f); memcpy(out, &h, 2); break; }
    case LD_DTYPE_BFLOAT16: { ld_bf16 b = ld_fp32_to_bf16(f); memcpy(out, &b, 2); break; }
    default: {
        /* Pad-2 is float-only; integers get the truncated value anyway. */
        int64_t i = f != f ? 0 : f > 9e18f ? INT64_MAX : f < -9e18f ? INT64_MIN : (int64_t)f;
        memcpy(out, &i, ld_dtype_size(dtype)); /* little-endian low bytes */
    }
    }
}

static ld_status pad_mode_read(ld_kernel_ctx *ctx, pad_mode *mode)
{
    const char *s;
    ld_status st = ld_kattr_string(ctx, "mode", "constant", &s);
    if (st != LD_OK)
        return st;
    if (strcmp(s, "constant") == 0)
        *mode = PAD_CONSTANT;
    else if (strcmp(s, "reflect") == 0)
        *mode = PAD_REFLECT;
    else if (strcmp(s, "edge") == 0)
        *mode = PAD_EDGE;
    else
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "mode '%s' is not supported (constant, "
                              "reflect, edge)", s);
    return LD_OK;
}

static ld_status pad_value_read(ld_kernel_ctx *ctx, const ld_tensor *x, pad_plan *p)
{
    memset(p->value, 0, sizeof p->value);
    if (ctx->node->opset < 11) {
        float f;
        if (ld_node_attr_float(ctx->node, "value", 0.0f, &f, ctx->err) != LD_OK)
            return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name,
                                   ctx->node->op_type);
        value_from_float(x->dtype, f, p->value);
        return LD_OK;
    }
    const ld_tensor *v = ld_kin(ctx, 2);
    if (!v)
        return LD_OK;
    if (v->dtype != x->dtype || v->count != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "constant_value must be one %s element, got %s "
                              "with %" PRId64 " elements", ld_dtype_name(x->dtype),
                              ld_dtype_name(v->dtype), v->count);
    ld_status st = ld_krequire_values(ctx, v, "constant_value");
    if (st != LD_OK)
        return st;
    memcpy(p->value, v->data, ld_dtype_size(v->dtype));
    return LD_OK;
}

static ld_status pad_plan_make(ld_kernel_ctx *ctx, const ld_tensor *x, pad_plan *p)
{
    int rank = x->shape.rank, n = 0;
    int64_t pads[2 * LD_MAX_RANK];
    bool present;
    const char *name = ctx->node->opset < 2 ? "paddings" : "pads";
    ld_status st = pad_mode_read(ctx, &p->mode);
    if (st == LD_OK)
        st = ld_kread_list(ctx, ctx->node->opset < 11, name, 1, pads, 2 * LD_MAX_RANK, &n,
                           &present);
    if (st == LD_OK)
        st = pad_value_read(ctx, x, p);
    if (st != LD_OK)
        return st;
    if (!present)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s are missing", name);
    if (ld_kin(ctx, 3))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "the axes input (opset 18) is not "
                              "supported");
    if (n != 2 * rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s has %d entries; an input of rank %d needs "
                              "%d", name, n, rank, 2 * rank);
    p->out.rank = rank;
    for (int d = 0; d < rank; d++) {
        int64_t dim = x->shape.dims[d], lo = pads[d], hi = pads[d + rank], out;
        p->pre[d] = lo > 0 ? lo : 0;
        p->start[d] = lo < 0 ? -lo : 0;
        p->len[d] = dim - p->start[d] - (hi < 0 ? -hi : 0);
        if (lo == INT64_MIN || hi == INT64_MIN || p->len[d] < 0 ||
            __builtin_add_overflow(p->len[d], p->pre[d], &out) ||
            __builtin_add_overflow(out, hi > 0 ? hi : 0, &out))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "pads %" PRId64 " and %" PRId64 " on axis "
                                  "%d of size %" PRId64 " give an invalid size", lo, hi, d, dim);
        if (p->mode != PAD_CONSTANT && p->len[d] == 0 && out > 0)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "cannot pad the empty axis %d in %s mode",
                                  d, p->mode == PAD_EDGE ? "edge" : "reflect");
        p->out.dims[d] = out;
    }
    return ld_kcheck_shape(ctx, &p->out, x->dtype, "padded output");
}

/* Input coordinate for coordinate i (may be outside [0, n)) along an axis
 * of size n > 0, or -1 for "the constant" in constant mode. Reflect
 * repeats with period 2(n-1) for pads wider than the axis, as numpy does. */
static int64_t pad_map(int64_t i, int64_t n, pad_mode mode)
{
    if (i >= 0 && i < n)
        return i;
    if (mode == PAD_CONSTANT)
        return -1;
    if (mode == PAD_EDGE || n == 1)
        return i < 0 ? 0 : n - 1;
    int64_t period = 2 * (n - 1);
    i %= period;
    if (i < 0)
        i += period;
    return i < n ? i : period - i;
}

/* One output row of w elements from the n kept elements at src, `pre`
 * elements added before them (pre >= 0). */
static void pad_row(uint8_t *dst, const uint8_t *src, int64_t w, int64_t n, int64_t pre,
                    const pad_plan *p, size_t es)
{
    int64_t j0 = pre < 0 ? 0 : pre > w ? w : pre;
    int64_t j1 = pre + n < w ? pre + n : w;
    if (j1 < j0)
        j1 = j0;
    if (j1 > j0)
        memcpy(dst + j0 * (int64_t)es, src + (j0 - pre) * (int64_t)es, (size_t)(j1 - j0) * es);
    if (p->mode == PAD_CONSTANT) {
        ld_fill_elements(dst, p->value, es, j0);
        ld_fill_elements(dst + j1 * (int64_t)es, p->value, es, w - j1);
        return;
    }
    for (int64_t j = 0; j < j0; j++)
        memcpy(dst + j * (int64_t)es, src + pad_map(j - pre, n, p->mode) * (int64_t)es, es);
    for (int64_t j = j1; j < w; j++)
        memcpy(dst + j * (int64_t)es, src + pad_map(j - pre, n, p->mode) * (int64_t)es, es);
}

static ld_status pad_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    pad_plan p;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = pad_plan_make(ctx, x, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape = p.out;
    return LD_OK;
}

static ld_status pad_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    pad_plan p;
    ld_status st = pad_plan_make(ctx, x, &p);
    int r = x->shape.rank;
    size_t es = ld_dtype_size(x->dtype);
    if (st != LD_OK || y->count == 0)
        return st;
    if (r == 0) {
        memcpy(y->data, x->data, es);
        return LD_OK;
    }
    int64_t strides[LD_MAX_RANK], idx[LD_MAX_RANK] = {0};
    ld_shape_strides(&x->shape, strides);
    int64_t w = p.out.dims[r - 1], rows = y->count / w;
    for (int64_t row = 0; row < rows; row++) {
        uint8_t *dst = (uint8_t *)y->data + row * w * (int64_t)es;
        int64_t off = p.start[r - 1];
        bool outside = false;
        for (int d = 0; d < r - 1 && !outside; d++) {
            int64_t i = pad_map(idx[d] - p.pre[d], p.len[d], p.mode);
            outside = i < 0;
            off += (p.start[d] + i) * strides[d];
        }
        if (outside)
            ld_fill_elements(dst, p.value, es, w);
        else
            pad_row(dst, (const uint8_t *)x->data + off * (int64_t)es, w, p.len[r - 1],
                    p.pre[r - 1], &p, es);
        for (int d = r - 2; d >= 0 && ++idx[d] == p.out.dims[d]; d--)
            idx[d] = 0;
    }
    return LD_OK;
}

/* --- Trilu (14): keep the upper (j - i >= k) or lower (j - i <= k) triangle -------- */

static ld_status trilu_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK && x->shape.rank < 2)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "input must have rank >= 2, got %d",
                            x->shape.rank);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    return LD_OK;
}

static ld_status trilu_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    int64_t k = 0, upper;
    ld_status st = ld_kattr_int(ctx, "upper", 1, &upper);
    if (st == LD_OK && ld_kin(ctx, 1))
        st = ld_kread_scalar_int(ctx, ld_kin(ctx, 1), "k", &k);
    if (st != LD_OK || y->count == 0)
        return st;
    int r = x->shape.rank;
    int64_t rows = x->shape.dims[r - 2], cols = x->shape.dims[r - 1];
    int64_t es = (int64_t)ld_dtype_size(x->dtype), n_mat = y->count / (rows * cols);
    /* Beyond +-(rows + cols) every k means the same; clamping avoids overflow. */
    k = k > rows + cols ? rows + cols : k < -(rows + cols) ? -(rows + cols) : k;
    for (int64_t m = 0; m < n_mat; m++) {
        for (int64_t i = 0; i < rows; i++) {
            int64_t at = (m * rows + i) * cols * es;
            uint8_t *d = (uint8_t *)y->data + at;
            const uint8_t *s = (const uint8_t *)x->data + at;
            /* Upper keeps columns [split, cols), lower keeps [0, split). */
            int64_t split = upper ? i + k : i + k + 1;
            split = split < 0 ? 0 : split > cols ? cols : split;
            int64_t keep0 = upper ? split : 0, keep1 = upper ? cols : split;
            memset(d, 0, (size_t)(cols * es));
            if (keep1 > keep0)
                memcpy(d + keep0 * es, s + keep0 * es, (size_t)((keep1 - keep0) * es));
        }
    }
    return LD_OK;
}

/* --- ReverseSequence (10): reverse the first seq_len[b] steps of every batch ------- */

typedef struct reverse_params {
    int time_axis, batch_axis;
    int64_t *lens; /* new, one per batch */
} reverse_params;

static ld_status reverse_params_read(ld_kernel_ctx *ctx, const ld_tensor *x, reverse_params *p)
{
    int64_t time_axis, batch_axis, n;
    p->lens = NULL;
    ld_status st = ld_kattr_int(ctx, "time_axis", 0, &time_axis);
    if (st == LD_OK)
        st = ld_kattr_int(ctx, "batch_axis", 1, &batch_axis);
    if (st != LD_OK)
        return st;
    if (x->shape.rank < 2)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input must have rank >= 2, got %d",
                              x->shape.rank);
    if ((time_axis != 0 && time_axis != 1) || (batch_axis != 0 && batch_axis != 1) ||
        time_axis == batch_axis)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "time_axis (%" PRId64 ") and batch_axis (%"
                              PRId64 ") must be 0 and 1 in some order", time_axis, batch_axis);
    p->time_axis = (int)time_axis;
    p->batch_axis = (int)batch_axis;
    st = ld_kread_ints_alloc(ctx, ld_kin(ctx, 1), "sequence_lens", &p->lens, &n);
    if (st != LD_OK)
        return st;
    int64_t batch = x->shape.dims[batch_axis], steps = x->shape.dims[time_axis];
    if (n != batch)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "sequence_lens has %" PRId64 " entries for a "
                            "batch of %" PRId64, n, batch);
    for (int64_t b = 0; st == LD_OK && b < n; b++)
        if (p->lens[b] < 0 || p->lens[b] > steps)
            st = ld_kernel_fail(ctx, LD_ERR_INPUT, "sequence_lens[%" PRId64 "] = %" PRId64
                                " is outside [0, %" PRId64 "]", b, p->lens[b], steps);
    if (st != LD_OK) {
        free(p->lens);
        p->lens = NULL;
    }
    return st;
}

static ld_status reverse_sequence_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    reverse_params p;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = reverse_params_read(ctx, x, &p);
    if (st != LD_OK)
        return st;
    free(p.lens);
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    return LD_OK;
}

static ld_status reverse_sequence_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    reverse_params p;
    ld_status st = reverse_params_read(ctx, x, &p);
    if (st != LD_OK)
        return st;
    int64_t strides[LD_MAX_RANK], es = (int64_t)ld_dtype_size(x->dtype);
    ld_shape_strides(&x->shape, strides);
    int64_t st_t = strides[p.time_axis] * es, st_b = strides[p.batch_axis] * es;
    int64_t inner = strides[1] * es; /* both axes are 0 and 1: the rest is contiguous */
    if (y->count == 0) {
        free(p.lens);
        return LD_OK;
    }
    for (int64_t b = 0; b < x->shape.dims[p.batch_axis]; b++)
        for (int64_t t = 0; t < x->shape.dims[p.time_axis]; t++) {
            int64_t from = t < p.lens[b] ? p.lens[b] - 1 - t : t;
            memcpy((uint8_t *)y->data + t * st_t + b * st_b,
                   (const uint8_t *)x->data + from * st_t + b * st_b, (size_t)inner);
        }
    free(p.lens);
    return LD_OK;
}

static const ld_kernel region_kernels[] = {
    {"", "Pad", 1, 0, NULL, pad_infer, pad_compute, NULL, NULL},
    {"", "Pad", 2, 0, NULL, pad_infer, pad_compute, NULL, NULL},
    {"", "Pad", 11, 0, NULL, pad_infer, pad_compute, NULL, NULL},
    {"", "Pad", 13, 0, NULL, pad_infer, pad_compute, NULL, NULL},
    {"", "ReverseSequence", 10, 0, NULL, reverse_sequence_infer, reverse_sequence_compute,
     NULL, NULL},
    {"", "Trilu", 14, 0, NULL, trilu_infer, trilu_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(region);
