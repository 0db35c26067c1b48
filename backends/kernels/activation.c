/* layerdiff — activations: Relu, LeakyRelu, PRelu, Elu, Selu, Celu, Sigmoid,
 * HardSigmoid, HardSwish, Softplus, Softsign, ThresholdedRelu, Shrink, Mish,
 * Clip, and Dropout in inference mode.
 *
 * Float math follows elementwise_unary.c: float16/bfloat16 widened by the
 * executor, float32 computed in float, float64 in double. exp(x)-1 is
 * computed with expm1 (exact near 0) — a reference should be the accurate
 * side of a comparison. NaN inputs stay NaN wherever the spec's formula is a
 * max/min/clamp (Relu, HardSigmoid, Clip), as numpy's maximum does. */
#include <float.h>

#include "backends/kernels/activation_round.h"
#include "backends/kernels/elementwise.h"
#include "backends/kernels/kernels.h"

/* Float-only op with params: f32 and f64 loops and the table. */
#define ACT_FLOAT_GEN(op, GEN, F32, F64)                                              \
    GEN(op##_f32, float, float, ld_ew_params, F32)                                    \
    GEN(op##_f64, double, double, ld_ew_params, F64)                                  \
    static const ld_ew_map_table op##_table = {                                       \
        [LD_DTYPE_FLOAT32] = op##_f32,                                                \
        [LD_DTYPE_FLOAT64] = op##_f64,                                                \
    };                                                                                \
    EW_UNARY_KERNEL(op, LD_DTYPE_UNDEFINED)
#define ACT_FLOAT(op, F32, F64) ACT_FLOAT_GEN(op, EW_MAP, F32, F64)
#define ACT_FLOAT_CALL(op, F32, F64) ACT_FLOAT_GEN(op, EW_MAP_CALL, F32, F64)

/* Relu: floats and (opset 14) signed integers. */
#define RELU_FN(sfx, T, DT, W) EW_MAP(relu_##sfx, T, T, void, x < 0 ? (T)0 : x)
#define RELU_ENTRY(sfx, T, DT, W) [DT] = relu_##sfx,
EW_FLOATS(RELU_FN)
EW_SIGNED_INTS(RELU_FN)
static const ld_ew_map_table relu_table = {EW_FLOATS(RELU_ENTRY) EW_SIGNED_INTS(RELU_ENTRY)};
static ld_status relu_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    return ld_ew_unary_infer(ctx, outs, relu_table, LD_DTYPE_UNDEFINED);
}
/* float32 for an emulated --fp16 layer: clamped to [0, +inf] (relu_f32's
 * values) and rounded to float16 in the same loop (activation_round.h). */
static ld_status relu_compute(ld_kernel_ctx *ctx)
{
    if (ctx->inputs[0]->dtype == LD_DTYPE_FLOAT32 &&
        ld_act_clamp_fp16(ctx, ctx->inputs[0], 0.0f, INFINITY, relu_f32, NULL))
        return LD_OK;
    return ld_ew_unary_compute(ctx, relu_table);
}

ACT_FLOAT(leakyrelu, x < 0 ? p->alpha * x : x, x < 0 ? (double)p->alpha * x : x)
ACT_FLOAT(thresholdedrelu, x > p->alpha ? x : 0.0f, x > (double)p->alpha ? x : 0.0)
ACT_FLOAT_CALL(elu, x < 0 ? p->alpha * expm1f(x) : x, x < 0 ? (double)p->alpha * expm1(x) : x)
ACT_FLOAT_CALL(selu, x > 0 ? p->gamma * x : p->gamma * (p->alpha * expm1f(x)),
               x > 0 ? (double)p->gamma * x : (double)p->gamma * ((double)p->alpha * expm1(x)))
/* Celu: max(0,x) + min(0, alpha*(exp(x/alpha)-1)). */
ACT_FLOAT_CALL(celu, x > 0 ? x : p->alpha * expm1f(x / p->alpha),
               x > 0 ? x : (double)p->alpha * expm1(x / (double)p->alpha))
/* Sigmoid without overflow: exp of a non-positive argument only, computed
 * once (expf may set errno, so the compiler does not merge two calls; the
 * detection head of PaddleOCR det spent 3 ms here). */
static inline float sigmoid_f(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}
static inline double sigmoid_d(double x)
{
    if (x >= 0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
ACT_FLOAT_CALL(sigmoid, sigmoid_f(x), sigmoid_d(x))
/* clamp(alpha*x + beta, 0, 1), NaN kept. */
#define CLAMP01(v) ((v) < 0 ? 0 : ((v) > 1 ? 1 : (v)))
ACT_FLOAT(hardsigmoid, CLAMP01(p->alpha * x + p->beta),
          CLAMP01((double)p->alpha * x + (double)p->beta))
/* HardSwish = x * HardSigmoid(x) with alpha 1/6, beta 1/2 (its function body). */
ACT_FLOAT(hardswish, x * CLAMP01(x * (1.0f / 6.0f) + 0.5f), x * CLAMP01(x * (1.0 / 6.0) + 0.5))
/* Softplus = log(1 + exp(x)) without overflow. */
#define SOFTPLUS_F(x) ((x) > 0 ? (x) + log1pf(expf(-(x))) : log1pf(expf(x)))
#define SOFTPLUS_D(x) ((x) > 0 ? (x) + log1p(exp(-(x))) : log1p(exp(x)))
ACT_FLOAT_CALL(softplus, SOFTPLUS_F(x), SOFTPLUS_D(x))
ACT_FLOAT(softsign, x / (1.0f + fabsf(x)), x / (1.0 + fabs(x)))
/* Mish (opset 18) = x * tanh(softplus(x)). */
ACT_FLOAT_CALL(mish, x * tanhf(SOFTPLUS_F(x)), x * tanh(SOFTPLUS_D(x)))

/* Shrink: floats and integers; integers compare and subtract in double and
 * convert back (bias and lambd are float attributes). */
#define SHRINK_EXPR(x, WIDE)                                                            \
    ((WIDE)(x) < -(WIDE)p->lambd  ? (WIDE)(x) + (WIDE)p->bias                          \
     : (WIDE)(x) > (WIDE)p->lambd ? (WIDE)(x) - (WIDE)p->bias                          \
                                  : (WIDE)0)
EW_MAP(shrink_f32, float, float, ld_ew_params, SHRINK_EXPR(x, float))
EW_MAP(shrink_f64, double, double, ld_ew_params, SHRINK_EXPR(x, double))
#define SHRINK_INT(sfx, T, DT, W)                                                       \
    EW_MAP(shrink_##sfx, T, T, ld_ew_params, ld_ew_to_##sfx(SHRINK_EXPR(x, double)))
#define SHRINK_ENTRY(sfx, T, DT, W) [DT] = shrink_##sfx,
EW_INTS(SHRINK_INT)
static const ld_ew_map_table shrink_table = {EW_NUMBERS(SHRINK_ENTRY)};
EW_UNARY_KERNEL(shrink, LD_DTYPE_UNDEFINED)

/* --- attribute parsing ----------------------------------------------------------- */

/* Reads alpha, beta, gamma (each with its default) into new params. */
static ld_status params_init(ld_kernel_ctx *ctx, float alpha, float beta, float gamma)
{
    ld_ew_params *p;
    ld_status st = ld_ew_params_alloc(ctx, &p);
    if (st == LD_OK)
        st = ld_ew_attr_float(ctx, "alpha", alpha, &p->alpha);
    if (st == LD_OK)
        st = ld_ew_attr_float(ctx, "beta", beta, &p->beta);
    if (st == LD_OK)
        st = ld_ew_attr_float(ctx, "gamma", gamma, &p->gamma);
    return st; /* on failure ctx->state is freed by fini */
}

static ld_status leakyrelu_init(ld_kernel_ctx *ctx) { return params_init(ctx, 0.01f, 0, 0); }
static ld_status alpha_one_init(ld_kernel_ctx *ctx) { return params_init(ctx, 1.0f, 0, 0); }
static ld_status hardsigmoid_init(ld_kernel_ctx *ctx) { return params_init(ctx, 0.2f, 0.5f, 0); }

static ld_status selu_init(ld_kernel_ctx *ctx)
{
    /* Selu-1's defaults were rounded; Selu-6 gives them to float precision. */
    if (ctx->node->opset < 6)
        return params_init(ctx, 1.6732f, 0, 1.0507f);
    return params_init(ctx, 1.67326319217681884765625f, 0, 1.05070102214813232421875f);
}

static ld_status shrink_init(ld_kernel_ctx *ctx)
{
    ld_ew_params *p;
    ld_status st = ld_ew_params_alloc(ctx, &p);
    if (st == LD_OK)
        st = ld_ew_attr_float(ctx, "lambd", 0.5f, &p->lambd);
    if (st == LD_OK)
        st = ld_ew_attr_float(ctx, "bias", 0.0f, &p->bias);
    return st;
}

/* --- PRelu: y = x < 0 ? slope * x : x, slope broadcast to x -------------------- */

#define PRELU_FLOAT(sfx, T, DT, W) EW_ROW2(prelu_##sfx, T, T, T, void, x < 0 ? y * x : x)
#define PRELU_SIGNED(sfx, T, DT, W) \
    EW_ROW2(prelu_##sfx, T, T, T, void, x < 0 ? (T)((W)y * (W)x) : x)
#define PRELU_UNSIGNED(sfx, T, DT, W) EW_ROW2(prelu_##sfx, T, T, T, void, ((void)y, x))
#define PRELU_ENTRY(sfx, T, DT, W) [DT] = prelu_##sfx,
EW_FLOATS(PRELU_FLOAT)
EW_SIGNED_INTS(PRELU_SIGNED)
EW_UNSIGNED_INTS(PRELU_UNSIGNED)
static const ld_ew_row_table prelu_table = {EW_NUMBERS(PRELU_ENTRY)};

/* The slope as seen by the iterator. Opset 7+: numpy unidirectional
 * broadcasting (slope must broadcast to X's shape). Before 7 the slope is a
 * single value or one per channel (axis 1), as Caffe2 exporters wrote it. */
static ld_status prelu_slope_view(ld_kernel_ctx *ctx, ld_tensor *view)
{
    const ld_tensor *x = ctx->inputs[0], *slope = ctx->inputs[1];
    *view = *slope;
    if (ctx->node->opset < 7 && slope->count == 1) {
        view->shape.rank = 0;
    } else if (ctx->node->opset < 7 && slope->shape.rank == 1 && x->shape.rank >= 2 &&
               slope->shape.dims[0] == x->shape.dims[1]) {
        view->shape.rank = x->shape.rank - 1;
        for (int d = 1; d < view->shape.rank; d++)
            view->shape.dims[d] = 1;
    }
    const ld_tensor *both[2] = {x, view};
    ld_shape out;
    ld_status st = ld_ew_broadcast_shape(ctx, both, 2, &out);
    if (st == LD_OK && !ld_shape_equal(&out, &x->shape)) {
        char sx[128], ss[128];
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "slope %s does not broadcast to X %s",
                              ld_shape_format(&slope->shape, ss, sizeof ss),
                              ld_shape_format(&x->shape, sx, sizeof sx));
    }
    return st;
}

static ld_status prelu_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_tensor view;
    ld_ew_row_fn fn;
    ld_status st = ld_ew_same_dtype(ctx, 0, 2);
    if (st == LD_OK)
        st = ld_ew_pick_row(ctx, prelu_table, ctx->inputs[0]->dtype, &fn);
    if (st == LD_OK)
        st = prelu_slope_view(ctx, &view);
    if (st == LD_OK)
        st = ld_infer_like_input0(ctx, outs);
    return st;
}

static ld_status prelu_compute(ld_kernel_ctx *ctx)
{
    ld_tensor view;
    ld_ew_row_fn fn;
    ld_status st = ld_ew_pick_row(ctx, prelu_table, ctx->inputs[0]->dtype, &fn);
    if (st == LD_OK)
        st = prelu_slope_view(ctx, &view);
    if (st == LD_OK) {
        const ld_tensor *ins[2] = {ctx->inputs[0], &view};
        ld_ew_broadcast_output(ctx, ins, 2, fn, NULL);
    }
    return st;
}

/* --- Clip ---------------------------------------------------------------------------
 * The bounds travel as params: two values of the input's type. min > max
 * gives max everywhere, as numpy.clip. */

#define CLIP_EXPR(x) (((x) < p[0] ? p[0] : (x)) > p[1] ? p[1] : ((x) < p[0] ? p[0] : (x)))
#define CLIP_FN(sfx, T, DT, W) EW_MAP(clip_##sfx, T, T, T, CLIP_EXPR(x))
#define CLIP_ENTRY(sfx, T, DT, W) [DT] = clip_##sfx,
EW_NUMBERS(CLIP_FN)
static const ld_ew_map_table clip_table = {EW_NUMBERS(CLIP_ENTRY)};

typedef union clip_bounds {
    float f32[2];
    double f64[2];
    int8_t i8[2];
    int16_t i16[2];
    int32_t i32[2];
    int64_t i64[2];
    uint8_t u8[2];
    uint16_t u16[2];
    uint32_t u32[2];
    uint64_t u64[2];
} clip_bounds;

/* Fills bound `which` (0 min, 1 max) from input `input` when present, else
 * keeps the default already in b. */
static ld_status clip_bound_input(ld_kernel_ctx *ctx, int input, int which, clip_bounds *b)
{
    const ld_tensor *t = ld_kin(ctx, input);
    if (!t)
        return LD_OK;
    char shape[128];
    if (t->dtype != ctx->inputs[0]->dtype)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s is %s but the input is %s",
                              which ? "max" : "min", ld_dtype_name(t->dtype),
                              ld_dtype_name(ctx->inputs[0]->dtype));
    if (t->count != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s must be a scalar, got shape %s",
                              which ? "max" : "min",
                              ld_shape_format(&t->shape, shape, sizeof shape));
    ld_status st = ld_krequire_values(ctx, t, which ? "max" : "min");
    if (st != LD_OK)
        return st;
    size_t size = ld_dtype_size(t->dtype);
    memcpy((char *)b + (size_t)which * size, t->data, size);
    return LD_OK;
}

#define CLIP_DEFAULT(sfx, T, DT, LO, HI) \
    case DT: b->sfx[0] = LO; b->sfx[1] = HI; break;

/* Bounds for opset 11+: inputs, defaulting to the type's lowest and max. */
static ld_status clip_bounds_from_inputs(ld_kernel_ctx *ctx, clip_bounds *b)
{
    switch (ctx->inputs[0]->dtype) {
    CLIP_DEFAULT(f32, float, LD_DTYPE_FLOAT32, -FLT_MAX, FLT_MAX)
    CLIP_DEFAULT(f64, double, LD_DTYPE_FLOAT64, -DBL_MAX, DBL_MAX)
    CLIP_DEFAULT(i8, int8_t, LD_DTYPE_INT8, INT8_MIN, INT8_MAX)
    CLIP_DEFAULT(i16, int16_t, LD_DTYPE_INT16, INT16_MIN, INT16_MAX)
    CLIP_DEFAULT(i32, int32_t, LD_DTYPE_INT32, INT32_MIN, INT32_MAX)
    CLIP_DEFAULT(i64, int64_t, LD_DTYPE_INT64, INT64_MIN, INT64_MAX)
    CLIP_DEFAULT(u8, uint8_t, LD_DTYPE_UINT8, 0, UINT8_MAX)
    CLIP_DEFAULT(u16, uint16_t, LD_DTYPE_UINT16, 0, UINT16_MAX)
    CLIP_DEFAULT(u32, uint32_t, LD_DTYPE_UINT32, 0, UINT32_MAX)
    CLIP_DEFAULT(u64, uint64_t, LD_DTYPE_UINT64, 0, UINT64_MAX)
    default: return ld_ew_unsupported_dtype(ctx, ctx->inputs[0]->dtype);
    }
    ld_status st = clip_bound_input(ctx, 1, 0, b);
    if (st == LD_OK)
        st = clip_bound_input(ctx, 2, 1, b);
    return st;
}

/* Bounds for opsets 1 and 6: float attributes. Clip-6 defaults to
 * +-FLT_MAX; Clip-1 has no defaults, so an absent bound does not clip. */
static ld_status clip_bounds_from_attrs(ld_kernel_ctx *ctx, clip_bounds *b)
{
    float none = ctx->node->opset < 6 ? INFINITY : FLT_MAX, lo, hi;
    ld_status st = ld_ew_attr_float(ctx, "min", -none, &lo);
    if (st == LD_OK)
        st = ld_ew_attr_float(ctx, "max", none, &hi);
    if (st != LD_OK)
        return st;
    if (ctx->inputs[0]->dtype == LD_DTYPE_FLOAT32) {
        b->f32[0] = lo;
        b->f32[1] = hi;
    } else if (ctx->inputs[0]->dtype == LD_DTYPE_FLOAT64) {
        b->f64[0] = lo;
        b->f64[1] = hi;
    } else {
        return ld_ew_unsupported_dtype(ctx, ctx->inputs[0]->dtype);
    }
    return LD_OK;
}

static ld_status clip_bounds_get(ld_kernel_ctx *ctx, clip_bounds *b)
{
    return ctx->node->opset < 11 ? clip_bounds_from_attrs(ctx, b)
                                 : clip_bounds_from_inputs(ctx, b);
}

static ld_status clip_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    clip_bounds b;
    ld_status st = ld_ew_unary_infer(ctx, outs, clip_table, LD_DTYPE_UNDEFINED);
    return st == LD_OK ? clip_bounds_get(ctx, &b) : st;
}

static ld_status clip_compute(ld_kernel_ctx *ctx)
{
    clip_bounds b;
    ld_ew_map_fn fn;
    ld_status st = ld_ew_pick_map(ctx, clip_table, ctx->inputs[0]->dtype, &fn);
    if (st == LD_OK)
        st = clip_bounds_get(ctx, &b);
    if (st != LD_OK)
        return st;
    /* float32 for an emulated --fp16 layer: rounded in the clamping loop */
    if (ctx->inputs[0]->dtype == LD_DTYPE_FLOAT32 &&
        ld_act_clamp_fp16(ctx, ctx->inputs[0], b.f32[0], b.f32[1], fn, &b))
        return LD_OK;
    ld_ew_map_output(ctx, ctx->inputs[0], fn, &b);
    return LD_OK;
}

/* --- Dropout (inference): y = x, mask all ones ---------------------------------------
 * Opset 12+ takes ratio and training_mode as inputs: training mode with a
 * non-zero ratio is random and not supported; with ratio 0 it is the
 * identity. The opset 1/6 is_test attribute is ignored: layerdiff runs
 * models for inference. The mask is of the data type before opset 10, bool
 * from 10. */

static ld_status dropout_check_mode(ld_kernel_ctx *ctx)
{
    const ld_tensor *training = ld_kin(ctx, 2), *ratio = ld_kin(ctx, 1);
    if (!training)
        return LD_OK;
    if (training->dtype != LD_DTYPE_BOOL || training->count != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "training_mode must be a bool scalar");
    ld_status st = ld_krequire_values(ctx, training, "training_mode");
    if (st == LD_OK)
        st = ld_krequire_values(ctx, ratio, "ratio");
    if (st != LD_OK)
        return st;
    if (!*(const uint8_t *)training->data)
        return LD_OK;
    if (ratio && (!ld_dtype_is_float(ratio->dtype) || ratio->count != 1))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "ratio must be a float scalar");
    double r = ratio ? ld_tensor_get_double(ratio, 0) : 0.5;
    if (r != 0)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "training mode (training_mode = true, "
                              "ratio %g) drops random elements; only inference is supported", r);
    return LD_OK;
}

static ld_status dropout_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_infer_like_input0(ctx, outs);
    if (st == LD_OK && !ld_dtype_is_float(ctx->inputs[0]->dtype))
        st = ld_ew_unsupported_dtype(ctx, ctx->inputs[0]->dtype);
    if (st == LD_OK)
        st = dropout_check_mode(ctx);
    if (st == LD_OK && ctx->n_outputs > 1) {
        outs[1].shape = outs[0].shape;
        outs[1].dtype = ctx->node->opset < 10 ? outs[0].dtype : LD_DTYPE_BOOL;
    }
    return st;
}

/* Fills t with the value one of its type. */
static void fill_ones(ld_tensor *t)
{
    uint16_t half_one = t->dtype == LD_DTYPE_FLOAT16 ? 0x3C00 : 0x3F80;
    for (int64_t i = 0; i < t->count; i++) {
        switch (t->dtype) {
        case LD_DTYPE_FLOAT32: ((float *)t->data)[i] = 1.0f; break;
        case LD_DTYPE_FLOAT64: ((double *)t->data)[i] = 1.0; break;
        case LD_DTYPE_FLOAT16:
        case LD_DTYPE_BFLOAT16: ((uint16_t *)t->data)[i] = half_one; break;
        default: ((uint8_t *)t->data)[i] = 1; break; /* bool */
        }
    }
}

static ld_status dropout_compute(ld_kernel_ctx *ctx)
{
    ld_tensor *y = ld_kout(ctx, 0), *mask = ld_kout(ctx, 1);
    if (y && y->nbytes)
        memcpy(y->data, ctx->inputs[0]->data, y->nbytes);
    if (mask)
        fill_ones(mask);
    return LD_OK;
}

#define W LD_KERNEL_WIDEN_HALF
#define ROW(name, since, op) {"", name, since, W, NULL, op##_infer, op##_compute, NULL, NULL}
#define ROW_P(name, since, op, init) \
    {"", name, since, W, init, op##_infer, op##_compute, ld_ew_params_fini, NULL}
static const ld_kernel activation_kernels[] = {
    ROW_P("Celu", 12, celu, alpha_one_init),
    {"", "Clip", 1, W, NULL, clip_infer, clip_compute, NULL, NULL},
    {"", "Dropout", 1, 0, NULL, dropout_infer, dropout_compute, NULL, NULL},
    ROW_P("Elu", 1, elu, alpha_one_init),
    ROW_P("HardSigmoid", 1, hardsigmoid, hardsigmoid_init),
    ROW("HardSwish", 14, hardswish),
    ROW_P("LeakyRelu", 1, leakyrelu, leakyrelu_init),
    ROW("Mish", 18, mish),
    ROW("PRelu", 1, prelu),
    ROW("Relu", 1, relu),
    ROW_P("Selu", 1, selu, selu_init),
    ROW_P("Shrink", 9, shrink, shrink_init),
    ROW("Sigmoid", 1, sigmoid),
    ROW("Softplus", 1, softplus),
    ROW("Softsign", 1, softsign),
    ROW_P("ThresholdedRelu", 10, thresholdedrelu, alpha_one_init),
};
#undef ROW
#undef ROW_P
#undef W

LD_KERNEL_FAMILY(activation);
