/* layerdiff — linear quantization: QuantizeLinear and DequantizeLinear
 * (10: per-tensor; 13: per-tensor or per-axis) and DynamicQuantizeLinear (11).
 *
 * Arithmetic follows ONNX Runtime's CPU kernels, which the spec leaves
 * open in places: quantize computes x / scale in float32, rounds to nearest
 * even, adds the zero point and saturates; dequantize computes
 * (x - zero_point) as an integer and multiplies by the scale in float32. */
#include <math.h>
#include <stdint.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

/* How scale and zero point spread over x: `blocks` runs of `channels` runs
 * of `inner` elements; parameter c applies to the c-th run in each block. */
typedef struct quant_layout {
    int64_t blocks, channels, inner;
} quant_layout;

static ld_status quant_layout_make(ld_kernel_ctx *ctx, const ld_tensor *x, const ld_tensor *scale,
                                   const ld_tensor *zero_point, quant_layout *out)
{
    if (zero_point && zero_point->count != scale->count)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "zero point has %lld values but scale has %lld",
                              (long long)zero_point->count, (long long)scale->count);
    if (scale->count == 1 && scale->shape.rank <= 1) {
        *out = (quant_layout){1, 1, x->count};
        return LD_OK;
    }
    if (ctx->node->opset < 13 || scale->shape.rank != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "scale must be a scalar%s",
                              ctx->node->opset < 13 ? " before opset 13" : " or a 1-D tensor");
    int64_t axis_attr;
    int axis = 0;
    ld_status st = ld_node_attr_int(ctx->node, "axis", 1, &axis_attr, ctx->err);
    if (st == LD_OK)
        st = ld_normalize_axis(ctx, axis_attr, x->shape.rank, &axis);
    if (st != LD_OK)
        return st;
    if (x->shape.rank == 0 || x->shape.dims[axis] != scale->count)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "scale has %lld values but axis %d of the "
                              "input has %lld", (long long)scale->count, axis,
                              x->shape.rank ? (long long)x->shape.dims[axis] : 0LL);
    out->blocks = 1;
    out->inner = 1;
    out->channels = scale->count;
    for (int d = 0; d < axis; d++)
        out->blocks *= x->shape.dims[d];
    for (int d = axis + 1; d < x->shape.rank; d++)
        out->inner *= x->shape.dims[d];
    return LD_OK;
}

/* --- QuantizeLinear ------------------------------------------------------------------ */

static ld_status quantize_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = ld_krequire(ctx, 1);
    if (st != LD_OK)
        return st;
    const ld_tensor *zp = ld_kin(ctx, 2);
    outs[0].dtype = zp ? zp->dtype : LD_DTYPE_UINT8;
    outs[0].shape = ctx->inputs[0]->shape;
    if (outs[0].dtype != LD_DTYPE_UINT8 && outs[0].dtype != LD_DTYPE_INT8)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "zero point dtype %s is not supported "
                              "(uint8 or int8)", ld_dtype_name(outs[0].dtype));
    return LD_OK;
}

/* Loads x[i] as float32 (x is float32 or int32). */
static inline float load_x(const ld_tensor *x, int64_t i)
{
    return x->dtype == LD_DTYPE_FLOAT32 ? ((const float *)x->data)[i]
                                         : (float)((const int32_t *)x->data)[i];
}

static inline float quantize_value(float x, float scale, float zero_point, float lo, float hi)
{
    float v = nearbyintf(x / scale) + zero_point;
    return fminf(hi, fmaxf(lo, v)); /* NaN saturates to lo, as a cast would not define */
}

static ld_status quantize_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0], *scale = ctx->inputs[1], *zp = ld_kin(ctx, 2);
    ld_tensor *y = ctx->outputs[0];
    if (x->dtype != LD_DTYPE_FLOAT32 && x->dtype != LD_DTYPE_INT32)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    if (scale->dtype != LD_DTYPE_FLOAT32)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "scale must be float32, got %s",
                              ld_dtype_name(scale->dtype));
    quant_layout q;
    ld_status st = quant_layout_make(ctx, x, scale, zp, &q);
    if (st != LD_OK)
        return st;
    bool is_signed = y->dtype == LD_DTYPE_INT8;
    float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
    const float *sc = scale->data;
    for (int64_t b = 0; b < q.blocks; b++) {
        for (int64_t c = 0; c < q.channels; c++) {
            float s = sc[c];
            float z = !zp ? 0.0f : is_signed ? ((const int8_t *)zp->data)[c]
                                             : ((const uint8_t *)zp->data)[c];
            int64_t base = (b * q.channels + c) * q.inner;
            if (is_signed)
                for (int64_t i = base; i < base + q.inner; i++)
                    ((int8_t *)y->data)[i] = (int8_t)quantize_value(load_x(x, i), s, z, lo, hi);
            else
                for (int64_t i = base; i < base + q.inner; i++)
                    ((uint8_t *)y->data)[i] = (uint8_t)quantize_value(load_x(x, i), s, z, lo, hi);
        }
    }
    return LD_OK;
}

/* --- DequantizeLinear ---------------------------------------------------------------- */

static ld_status dequantize_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = ld_krequire(ctx, 1);
    if (st != LD_OK)
        return st;
    outs[0].dtype = LD_DTYPE_FLOAT32;
    outs[0].shape = ctx->inputs[0]->shape;
    return LD_OK;
}

static inline int64_t load_int(const ld_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case LD_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case LD_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    default: return ((const int32_t *)t->data)[i];
    }
}

static ld_status dequantize_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0], *scale = ctx->inputs[1], *zp = ld_kin(ctx, 2);
    float *y = ctx->outputs[0]->data;
    if (x->dtype != LD_DTYPE_INT8 && x->dtype != LD_DTYPE_UINT8 && x->dtype != LD_DTYPE_INT32)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    if (zp && zp->dtype != x->dtype)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "zero point is %s but x is %s",
                              ld_dtype_name(zp->dtype), ld_dtype_name(x->dtype));
    if (scale->dtype != LD_DTYPE_FLOAT32)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "scale must be float32, got %s",
                              ld_dtype_name(scale->dtype));
    quant_layout q;
    ld_status st = quant_layout_make(ctx, x, scale, zp, &q);
    if (st != LD_OK)
        return st;
    const float *sc = scale->data;
    for (int64_t b = 0; b < q.blocks; b++) {
        for (int64_t c = 0; c < q.channels; c++) {
            float s = sc[c];
            int64_t z = zp ? load_int(zp, c) : 0;
            int64_t base = (b * q.channels + c) * q.inner;
            for (int64_t i = base; i < base + q.inner; i++)
                y[i] = (float)(load_int(x, i) - z) * s;
        }
    }
    return LD_OK;
}

/* --- DynamicQuantizeLinear ----------------------------------------------------------- */

static ld_status dynamic_quantize_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st != LD_OK)
        return st;
    outs[0].dtype = LD_DTYPE_UINT8;
    outs[0].shape = ctx->inputs[0]->shape;
    outs[1].dtype = LD_DTYPE_FLOAT32;
    outs[1].shape.rank = 0;
    if (ctx->n_outputs > 2) {
        outs[2].dtype = LD_DTYPE_UINT8;
        outs[2].shape.rank = 0;
    }
    return LD_OK;
}

static ld_status dynamic_quantize_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    if (x->dtype != LD_DTYPE_FLOAT32)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    const float *v = x->data;
    /* The range always includes 0 (ONNX: "data range is adjusted to include 0"). */
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < x->count; i++) {
        lo = fminf(lo, v[i]);
        hi = fmaxf(hi, v[i]);
    }
    /* As ONNX Runtime: a zero range gives scale 1 instead of dividing by 0. */
    float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float zp = nearbyintf(fminf(255.0f, fmaxf(0.0f, 0.0f - lo / scale)));
    uint8_t *y = ctx->outputs[0]->data;
    for (int64_t i = 0; i < x->count; i++)
        y[i] = (uint8_t)quantize_value(v[i], scale, zp, 0.0f, 255.0f);
    if (ld_kout(ctx, 1))
        *(float *)ctx->outputs[1]->data = scale;
    if (ld_kout(ctx, 2))
        *(uint8_t *)ctx->outputs[2]->data = (uint8_t)zp;
    return LD_OK;
}

static const ld_kernel quantize_kernels[] = {
    {"", "DequantizeLinear", 10, LD_KERNEL_WIDEN_HALF, NULL, dequantize_infer, dequantize_compute, NULL, NULL},
    {"", "DequantizeLinear", 13, LD_KERNEL_WIDEN_HALF, NULL, dequantize_infer, dequantize_compute, NULL, NULL},
    {"", "DynamicQuantizeLinear", 11, LD_KERNEL_WIDEN_HALF, NULL, dynamic_quantize_infer, dynamic_quantize_compute, NULL, NULL},
    {"", "QuantizeLinear", 10, LD_KERNEL_WIDEN_HALF, NULL, quantize_infer, quantize_compute, NULL, NULL},
    {"", "QuantizeLinear", 13, LD_KERNEL_WIDEN_HALF, NULL, quantize_infer, quantize_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(quantize);
