/* layerdiff — elementwise unary math: Abs, Neg, Sign, Reciprocal, Sqrt, Exp,
 * Log, Erf, Ceil, Floor, Round, the trigonometric and hyperbolic functions,
 * IsNaN and IsInf.
 *
 * float16/bfloat16 are widened by the executor (LD_KERNEL_WIDEN_HALF):
 * float32 is computed with the float libm functions (expf, sinf, ...), never
 * in double and rounded, so the reference matches what fp32 engines compute;
 * float64 uses the double functions. Integer types exist where the spec
 * allows them (Abs, Neg, Sign, Erf); signed Abs/Neg of the most negative
 * value wrap, as two's-complement hardware does. */
#include "backends/kernels/elementwise.h"
#include "backends/kernels/kernels.h"

/* A float-only op: f32 and f64 loops calling libm, and its table. */
#define FLOAT_MATH(op, F32, F64)                                                      \
    EW_MAP_CALL(op##_f32, float, float, void, F32)                                    \
    EW_MAP_CALL(op##_f64, double, double, void, F64)                                  \
    static const ld_ew_map_table op##_table = {                                       \
        [LD_DTYPE_FLOAT32] = op##_f32,                                                \
        [LD_DTYPE_FLOAT64] = op##_f64,                                                \
    };                                                                                \
    EW_UNARY_KERNEL(op, LD_DTYPE_UNDEFINED)

FLOAT_MATH(acos, acosf(x), acos(x))
FLOAT_MATH(acosh, acoshf(x), acosh(x))
FLOAT_MATH(asin, asinf(x), asin(x))
FLOAT_MATH(asinh, asinhf(x), asinh(x))
FLOAT_MATH(atan, atanf(x), atan(x))
FLOAT_MATH(atanh, atanhf(x), atanh(x))
FLOAT_MATH(cos, cosf(x), cos(x))
FLOAT_MATH(cosh, coshf(x), cosh(x))
FLOAT_MATH(sin, sinf(x), sin(x))
FLOAT_MATH(sinh, sinhf(x), sinh(x))
FLOAT_MATH(tan, tanf(x), tan(x))
FLOAT_MATH(tanh, tanhf(x), tanh(x))
FLOAT_MATH(exp, expf(x), exp(x))
FLOAT_MATH(log, logf(x), log(x))
FLOAT_MATH(sqrt, sqrtf(x), sqrt(x))
FLOAT_MATH(ceil, ceilf(x), ceil(x))
FLOAT_MATH(floor, floorf(x), floor(x))
/* Round: halves to even, as the spec says (nearbyint in the default
 * round-to-nearest-even mode). */
FLOAT_MATH(round, nearbyintf(x), nearbyint(x))

/* Reciprocal: a plain division, vectorisable. */
EW_MAP(reciprocal_f32, float, float, void, 1.0f / x)
EW_MAP(reciprocal_f64, double, double, void, 1.0 / x)
static const ld_ew_map_table reciprocal_table = {
    [LD_DTYPE_FLOAT32] = reciprocal_f32,
    [LD_DTYPE_FLOAT64] = reciprocal_f64,
};
EW_UNARY_KERNEL(reciprocal, LD_DTYPE_UNDEFINED)

/* --- Abs, Neg, Sign: floats and integers ----------------------------------------- */

#define ABS_SIGNED(sfx, T, DT, W) EW_MAP(abs_##sfx, T, T, void, x < 0 ? (T)((W)0 - (W)x) : x)
#define ABS_UNSIGNED(sfx, T, DT, W) EW_MAP(abs_##sfx, T, T, void, x)
#define NEG_FLOAT(sfx, T, DT, W) EW_MAP(neg_##sfx, T, T, void, -x)
#define NEG_SIGNED(sfx, T, DT, W) EW_MAP(neg_##sfx, T, T, void, (T)((W)0 - (W)x))
#define SIGN_FLOAT(sfx, T, DT, W) EW_MAP(sign_##sfx, T, T, void, x > 0 ? (T)1 : (x < 0 ? (T)-1 : x))
#define SIGN_SIGNED(sfx, T, DT, W) EW_MAP(sign_##sfx, T, T, void, (x > 0) - (x < 0))
#define SIGN_UNSIGNED(sfx, T, DT, W) EW_MAP(sign_##sfx, T, T, void, x > 0)
EW_MAP(abs_f32, float, float, void, fabsf(x))
EW_MAP(abs_f64, double, double, void, fabs(x))
EW_SIGNED_INTS(ABS_SIGNED)
EW_UNSIGNED_INTS(ABS_UNSIGNED)
EW_FLOATS(NEG_FLOAT)
EW_SIGNED_INTS(NEG_SIGNED)
EW_FLOATS(SIGN_FLOAT)
EW_SIGNED_INTS(SIGN_SIGNED)
EW_UNSIGNED_INTS(SIGN_UNSIGNED)

#define ABS_ENTRY(sfx, T, DT, W) [DT] = abs_##sfx,
#define NEG_ENTRY(sfx, T, DT, W) [DT] = neg_##sfx,
#define SIGN_ENTRY(sfx, T, DT, W) [DT] = sign_##sfx,
static const ld_ew_map_table abs_table = {EW_NUMBERS(ABS_ENTRY)};
static const ld_ew_map_table neg_table = {EW_FLOATS(NEG_ENTRY) EW_SIGNED_INTS(NEG_ENTRY)};
static const ld_ew_map_table sign_table = {EW_NUMBERS(SIGN_ENTRY)};
EW_UNARY_KERNEL(abs, LD_DTYPE_UNDEFINED)
EW_UNARY_KERNEL(neg, LD_DTYPE_UNDEFINED)
EW_UNARY_KERNEL(sign, LD_DTYPE_UNDEFINED)

/* --- Erf: floats, and integers (erf of the integer, truncated: 0 or +-1) ------- */

EW_MAP_CALL(erf_f32, float, float, void, erff(x))
EW_MAP_CALL(erf_f64, double, double, void, erf(x))
#define ERF_INT(sfx, T, DT, W) EW_MAP_CALL(erf_##sfx, T, T, void, erf((double)x))
EW_INTS(ERF_INT)
#define ERF_ENTRY(sfx, T, DT, W) [DT] = erf_##sfx,
static const ld_ew_map_table erf_table = {EW_NUMBERS(ERF_ENTRY)};
EW_UNARY_KERNEL(erf, LD_DTYPE_UNDEFINED)

/* --- IsNaN, IsInf: bool outputs ---------------------------------------------------- */

EW_MAP(isnan_f32, float, uint8_t, void, x != x)
EW_MAP(isnan_f64, double, uint8_t, void, x != x)
static const ld_ew_map_table isnan_table = {
    [LD_DTYPE_FLOAT32] = isnan_f32,
    [LD_DTYPE_FLOAT64] = isnan_f64,
};
EW_UNARY_KERNEL(isnan, LD_DTYPE_BOOL)

EW_MAP(isinf_f32, float, uint8_t, ld_ew_params,
       (x == INFINITY && p->detect_positive) || (x == -INFINITY && p->detect_negative))
EW_MAP(isinf_f64, double, uint8_t, ld_ew_params,
       (x == (double)INFINITY && p->detect_positive) ||
           (x == -(double)INFINITY && p->detect_negative))
static const ld_ew_map_table isinf_table = {
    [LD_DTYPE_FLOAT32] = isinf_f32,
    [LD_DTYPE_FLOAT64] = isinf_f64,
};
EW_UNARY_KERNEL(isinf, LD_DTYPE_BOOL)

static ld_status isinf_init(ld_kernel_ctx *ctx)
{
    ld_ew_params *p;
    int64_t negative, positive;
    ld_status st = ld_ew_attr_int(ctx, "detect_negative", 1, &negative);
    if (st == LD_OK)
        st = ld_ew_attr_int(ctx, "detect_positive", 1, &positive);
    if (st == LD_OK)
        st = ld_ew_params_alloc(ctx, &p);
    if (st != LD_OK)
        return st;
    p->detect_negative = negative != 0;
    p->detect_positive = positive != 0;
    return LD_OK;
}

/* One row per op: later versions only add types, which the tables cover
 * (opset 1's consumed_inputs attribute is legacy optimiser data, ignored). */
#define W LD_KERNEL_WIDEN_HALF
#define ROW(name, since, op) {"", name, since, W, NULL, op##_infer, op##_compute, NULL, NULL}
static const ld_kernel unary_kernels[] = {
    ROW("Abs", 1, abs),
    ROW("Acos", 7, acos),
    ROW("Acosh", 9, acosh),
    ROW("Asin", 7, asin),
    ROW("Asinh", 9, asinh),
    ROW("Atan", 7, atan),
    ROW("Atanh", 9, atanh),
    ROW("Ceil", 1, ceil),
    ROW("Cos", 7, cos),
    ROW("Cosh", 9, cosh),
    ROW("Erf", 9, erf),
    ROW("Exp", 1, exp),
    ROW("Floor", 1, floor),
    {"", "IsInf", 10, W, isinf_init, isinf_infer, isinf_compute, ld_ew_params_fini, NULL},
    ROW("IsNaN", 9, isnan),
    ROW("Log", 1, log),
    ROW("Neg", 1, neg),
    ROW("Reciprocal", 1, reciprocal),
    ROW("Round", 11, round),
    ROW("Sign", 9, sign),
    ROW("Sin", 7, sin),
    ROW("Sinh", 9, sinh),
    ROW("Sqrt", 1, sqrt),
    ROW("Tan", 7, tan),
    ROW("Tanh", 1, tanh),
};
#undef ROW
#undef W

LD_KERNEL_FAMILY(unary);
