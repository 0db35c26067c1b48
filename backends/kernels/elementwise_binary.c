/* layerdiff — elementwise arithmetic: Add, Sub, Mul, Div, Pow, Mod, BitShift
 * (two inputs, numpy broadcasting, and the broadcast/axis attributes before
 * opset 7) and the variadic Max, Min, Sum, Mean.
 *
 * float16/bfloat16 are widened by the executor; float32 computes in float,
 * float64 in double. Integers:
 *  - + - * wrap modulo 2^N (done in unsigned arithmetic: signed overflow is
 *    undefined in C), as two's-complement hardware and numpy do;
 *  - Div truncates toward zero as C and ONNX Runtime do; division by zero
 *    gives 0 and INT_MIN / -1 gives INT_MIN, as numpy (C would trap);
 *  - Mod with fmod=0 takes the sign of the divisor (Python/numpy), with
 *    fmod=1 the sign of the dividend (C fmod); x mod 0 is 0 (numpy);
 *  - BitShift by the type's width or more gives 0 (numpy);
 *  - Pow with an integer base and a non-negative integer exponent is exact
 *    repeated multiplication (wrapping, as numpy); otherwise it is computed
 *    in double and converted as ONNX Runtime's std::pow does.
 * Max and Min propagate NaN, as numpy.maximum/minimum. */
#include "backends/kernels/elementwise.h"
#include "backends/kernels/kernels.h"

/* --- Add, Sub, Mul, Div ---------------------------------------------------------- */

#define ARITH_FLOAT(sfx, T, DT, W)                                                   \
    EW_ROW2(add_##sfx, T, T, T, void, x + y)                                          \
    EW_ROW2(sub_##sfx, T, T, T, void, x - y)                                          \
    EW_ROW2(mul_##sfx, T, T, T, void, x * y)                                          \
    EW_ROW2(div_##sfx, T, T, T, void, x / y)
#define ARITH_INT(sfx, T, DT, W)                                                     \
    EW_ROW2(add_##sfx, T, T, T, void, (W)x + (W)y)                                    \
    EW_ROW2(sub_##sfx, T, T, T, void, (W)x - (W)y)                                    \
    EW_ROW2(mul_##sfx, T, T, T, void, (W)x * (W)y)
EW_FLOATS(ARITH_FLOAT)
EW_INTS(ARITH_INT)

/* Integer division: the divisor 0 and INT_MIN / -1 are handled without a
 * branch the vectoriser cannot take (the quotient is computed with a safe
 * divisor and then replaced). */
#define DIV_SIGNED(sfx, T, DT, W)                                                    \
    static inline T div_one_##sfx(T x, T y)                                           \
    {                                                                                 \
        if (y == 0)                                                                   \
            return 0;                                                                 \
        if (y == -1)                                                                  \
            return (T)((W)0 - (W)x);                                                  \
        return (T)(x / y);                                                            \
    }                                                                                 \
    EW_ROW2_CALL(div_##sfx, T, T, T, void, div_one_##sfx(x, y))
#define DIV_UNSIGNED(sfx, T, DT, W) \
    EW_ROW2_CALL(div_##sfx, T, T, T, void, y == 0 ? (T)0 : (T)(x / y))
EW_SIGNED_INTS(DIV_SIGNED)
EW_UNSIGNED_INTS(DIV_UNSIGNED)

#define ADD_ENTRY(sfx, T, DT, W) [DT] = add_##sfx,
#define SUB_ENTRY(sfx, T, DT, W) [DT] = sub_##sfx,
#define MUL_ENTRY(sfx, T, DT, W) [DT] = mul_##sfx,
#define DIV_ENTRY(sfx, T, DT, W) [DT] = div_##sfx,
static const ld_ew_row_table add_table = {EW_NUMBERS(ADD_ENTRY)};
static const ld_ew_row_table sub_table = {EW_NUMBERS(SUB_ENTRY)};
static const ld_ew_row_table mul_table = {EW_NUMBERS(MUL_ENTRY)};
static const ld_ew_row_table div_table = {EW_NUMBERS(DIV_ENTRY)};
EW_ARITH_KERNEL(add, LD_EW_ARITH_ADD)
EW_ARITH_KERNEL(sub, LD_EW_ARITH_SUB)
EW_ARITH_KERNEL(mul, LD_EW_ARITH_MUL)
EW_ARITH_KERNEL(div, LD_EW_ARITH_DIV)

/* --- Mod ---------------------------------------------------------------------------- */

EW_ROW2_CALL(fmod_f32, float, float, float, void, fmodf(x, y))
EW_ROW2_CALL(fmod_f64, double, double, double, void, fmod(x, y))
/* y == -1 is special-cased: INT_MIN % -1 traps in C (the result is 0). */
#define MOD_SIGNED(sfx, T, DT, W)                                                    \
    static inline T cmod_one_##sfx(T x, T y)                                          \
    {                                                                                 \
        return (y == 0 || y == -1) ? (T)0 : (T)(x % y);                               \
    }                                                                                 \
    static inline T pymod_one_##sfx(T x, T y)                                         \
    {                                                                                 \
        T r = cmod_one_##sfx(x, y);                                                   \
        return (r != 0 && ((r < 0) != (y < 0))) ? (T)(r + y) : r;                     \
    }                                                                                 \
    EW_ROW2_CALL(fmod_##sfx, T, T, T, void, cmod_one_##sfx(x, y))                     \
    EW_ROW2_CALL(mod_##sfx, T, T, T, void, pymod_one_##sfx(x, y))
#define MOD_UNSIGNED(sfx, T, DT, W)                                                  \
    EW_ROW2_CALL(fmod_##sfx, T, T, T, void, y == 0 ? (T)0 : (T)(x % y))               \
    EW_ROW2_CALL(mod_##sfx, T, T, T, void, y == 0 ? (T)0 : (T)(x % y))
EW_SIGNED_INTS(MOD_SIGNED)
EW_UNSIGNED_INTS(MOD_UNSIGNED)
#define FMOD_ENTRY(sfx, T, DT, W) [DT] = fmod_##sfx,
#define MOD_ENTRY(sfx, T, DT, W) [DT] = mod_##sfx,
static const ld_ew_row_table fmod_table = {EW_NUMBERS(FMOD_ENTRY)};
static const ld_ew_row_table mod_table = {EW_INTS(MOD_ENTRY)};

static ld_status mod_init(ld_kernel_ctx *ctx)
{
    ld_ew_params *p;
    ld_status st = ld_ew_params_alloc(ctx, &p);
    if (st == LD_OK)
        st = ld_ew_attr_int(ctx, "fmod", 0, &p->mode);
    if (st == LD_OK && p->mode != 0 && p->mode != 1)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute fmod must be 0 or 1, got %lld",
                            (long long)p->mode);
    return st;
}

static ld_status mod_check(ld_kernel_ctx *ctx, const ld_ew_row_fn **table)
{
    const ld_ew_params *p = ctx->state;
    ld_status st = ld_ew_same_dtype(ctx, 0, 2);
    if (st == LD_OK && !p->mode && ld_dtype_is_float(ctx->inputs[0]->dtype))
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "fmod must be 1 for %s inputs (the spec "
                            "defines integer-style mod for integers only)",
                            ld_dtype_name(ctx->inputs[0]->dtype));
    *table = p->mode ? fmod_table : mod_table;
    return st;
}

static ld_status mod_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_ew_row_fn *table;
    ld_status st = mod_check(ctx, &table);
    return st == LD_OK ? ld_ew_binary_infer(ctx, outs, table, LD_DTYPE_UNDEFINED) : st;
}

static ld_status mod_compute(ld_kernel_ctx *ctx)
{
    const ld_ew_row_fn *table;
    ld_status st = mod_check(ctx, &table);
    return st == LD_OK ? ld_ew_binary_compute(ctx, table) : st;
}

/* --- BitShift (unsigned integers) ------------------------------------------------------ */

#define BITS(T) ((T)(sizeof(T) * 8))
#define SHIFT_FN(sfx, T, DT, W)                                                      \
    EW_ROW2(shl_##sfx, T, T, T, void, y >= BITS(T) ? (T)0 : (T)((W)x << y))           \
    EW_ROW2(shr_##sfx, T, T, T, void, y >= BITS(T) ? (T)0 : (T)(x >> y))
EW_UNSIGNED_INTS(SHIFT_FN)
#define SHL_ENTRY(sfx, T, DT, W) [DT] = shl_##sfx,
#define SHR_ENTRY(sfx, T, DT, W) [DT] = shr_##sfx,
static const ld_ew_row_table shl_table = {EW_UNSIGNED_INTS(SHL_ENTRY)};
static const ld_ew_row_table shr_table = {EW_UNSIGNED_INTS(SHR_ENTRY)};

static ld_status bitshift_init(ld_kernel_ctx *ctx)
{
    ld_ew_params *p;
    const char *direction;
    ld_status st = ld_node_attr_string(ctx->node, "direction", NULL, &direction, ctx->err);
    if (st != LD_OK)
        return st;
    if (!direction || (strcmp(direction, "LEFT") != 0 && strcmp(direction, "RIGHT") != 0))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute direction must be \"LEFT\" or "
                              "\"RIGHT\"%s%s", direction ? ", got " : " (it is missing)",
                              direction ? direction : "");
    st = ld_ew_params_alloc(ctx, &p);
    if (st == LD_OK)
        p->mode = strcmp(direction, "LEFT") == 0;
    return st;
}

static ld_status bitshift_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_ew_params *p = ctx->state;
    return ld_ew_binary_infer(ctx, outs, p->mode ? shl_table : shr_table, LD_DTYPE_UNDEFINED);
}

static ld_status bitshift_compute(ld_kernel_ctx *ctx)
{
    const ld_ew_params *p = ctx->state;
    return ld_ew_binary_compute(ctx, p->mode ? shl_table : shr_table);
}

/* --- Pow: base T (float32/64, int32/64), exponent T1 (any number type) ----------------- */

/* Integer base, integer exponent: exact square-and-multiply, wrapping. A
 * negative exponent follows std::pow and the float->int conversion. */
#define IPOW(sfx, T, W)                                                              \
    static inline T ipow_##sfx(T x, int64_t y)                                        \
    {                                                                                 \
        if (y < 0)                                                                    \
            return ld_ew_to_##sfx(pow((double)x, (double)y));                         \
        W result = 1, base = (W)x;                                                    \
        for (uint64_t e = (uint64_t)y; e; e >>= 1) {                                  \
            if (e & 1)                                                                \
                result *= base;                                                       \
            base *= base;                                                             \
        }                                                                             \
        return (T)result;                                                             \
    }
IPOW(i32, int32_t, uint32_t)
IPOW(i64, int64_t, uint64_t)

/* X(base suffix, base type, exponent suffix, exponent type, is-integer exponent) */
#define POW_EXPONENTS(X, bs, BT)                                                     \
    X(bs, BT, f32, float, 0) X(bs, BT, f64, double, 0)                                \
    X(bs, BT, i8, int8_t, 1) X(bs, BT, i16, int16_t, 1) X(bs, BT, i32, int32_t, 1)    \
    X(bs, BT, i64, int64_t, 1) X(bs, BT, u8, uint8_t, 1) X(bs, BT, u16, uint16_t, 1)  \
    X(bs, BT, u32, uint32_t, 1) X(bs, BT, u64, uint64_t, 1)

/* Exponent as int64 for ipow (uint64 above INT64_MAX saturates: any such
 * power of an integer other than 0, +-1 wraps to 0 or is 0/+-1 anyway). */
#define POW_I64(y) ((y) > (double)INT64_MAX ? INT64_MAX : (int64_t)(y))
#define POW_FLOAT_BASE(bs, BT, es, ET, is_int)                                       \
    EW_ROW2_CALL(pow_##bs##_##es, BT, ET, BT, void, (BT)pow((double)x, (double)y))
#define POW_INT_BASE(bs, BT, es, ET, is_int)                                         \
    EW_ROW2_CALL(pow_##bs##_##es, BT, ET, BT, void,                                   \
                 is_int ? ipow_##bs(x, POW_I64(y)) : ld_ew_to_##bs(pow((double)x, (double)y)))
POW_EXPONENTS(POW_FLOAT_BASE, f64, double)
POW_EXPONENTS(POW_INT_BASE, i32, int32_t)
POW_EXPONENTS(POW_INT_BASE, i64, int64_t)
/* float32 ^ float32 is powf (fp32 math); other float32 pairs follow std::pow's
 * promotion to double. */
EW_ROW2_CALL(pow_f32_f32, float, float, float, void, powf(x, y))
#define POW_F32_MIXED(bs, BT, es, ET, is_int)                                        \
    EW_ROW2_CALL(pow_##bs##_##es, BT, ET, BT, void, (BT)pow((double)x, (double)y))
#define POW_F32_NOT_F32(X, bs, BT)                                                   \
    X(bs, BT, f64, double, 0)                                                         \
    X(bs, BT, i8, int8_t, 1) X(bs, BT, i16, int16_t, 1) X(bs, BT, i32, int32_t, 1)    \
    X(bs, BT, i64, int64_t, 1) X(bs, BT, u8, uint8_t, 1) X(bs, BT, u16, uint16_t, 1)  \
    X(bs, BT, u32, uint32_t, 1) X(bs, BT, u64, uint64_t, 1)
POW_F32_NOT_F32(POW_F32_MIXED, f32, float)

#define DT_f32 LD_DTYPE_FLOAT32
#define DT_f64 LD_DTYPE_FLOAT64
#define DT_i8 LD_DTYPE_INT8
#define DT_i16 LD_DTYPE_INT16
#define DT_i32 LD_DTYPE_INT32
#define DT_i64 LD_DTYPE_INT64
#define DT_u8 LD_DTYPE_UINT8
#define DT_u16 LD_DTYPE_UINT16
#define DT_u32 LD_DTYPE_UINT32
#define DT_u64 LD_DTYPE_UINT64
#define POW_ENTRY(bs, BT, es, ET, is_int) [DT_##bs][DT_##es] = pow_##bs##_##es,
static const ld_ew_row_fn pow_table[LD_DTYPE_COUNT_][LD_DTYPE_COUNT_] = {
    POW_EXPONENTS(POW_ENTRY, f32, float)
    POW_EXPONENTS(POW_ENTRY, f64, double)
    POW_EXPONENTS(POW_ENTRY, i32, int32_t)
    POW_EXPONENTS(POW_ENTRY, i64, int64_t)
};

static ld_status pow_pick(ld_kernel_ctx *ctx, ld_ew_row_fn *fn, ld_tensor *y_view)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = ld_krequire(ctx, 1);
    if (st != LD_OK)
        return st;
    ld_dtype base = ctx->inputs[0]->dtype, exponent = ctx->inputs[1]->dtype;
    *fn = (unsigned)base < LD_DTYPE_COUNT_ && (unsigned)exponent < LD_DTYPE_COUNT_
              ? pow_table[base][exponent]
              : NULL;
    if (!*fn)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "base %s with exponent %s is not "
                              "supported", ld_dtype_name(base), ld_dtype_name(exponent));
    return ld_ew_legacy_view(ctx, ctx->inputs[0], ctx->inputs[1], y_view);
}

static ld_status pow_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_ew_row_fn fn;
    ld_tensor y_view;
    ld_status st = pow_pick(ctx, &fn, &y_view);
    if (st != LD_OK)
        return st;
    const ld_tensor *ins[2] = {ctx->inputs[0], &y_view};
    outs[0].dtype = ctx->inputs[0]->dtype;
    return ld_ew_broadcast_shape(ctx, ins, 2, &outs[0].shape);
}

/* x^2 with a scalar exponent 2 (LayerNorm decompositions): x*x is the
 * correctly rounded square, which powf only nearly always is. */
EW_ROW2(square_f32, float, float, float, void, ((void)y, x * x))
EW_ROW2(square_f64, double, double, double, void, ((void)y, x * x))

static bool exponent_is_two(const ld_tensor *y)
{
    if (y->count != 1)
        return false;
    if (y->dtype == LD_DTYPE_FLOAT32)
        return *(const float *)y->data == 2.0f;
    return y->dtype == LD_DTYPE_FLOAT64 && *(const double *)y->data == 2.0;
}

static ld_status pow_compute(ld_kernel_ctx *ctx)
{
    ld_ew_row_fn fn;
    ld_tensor y_view;
    ld_status st = pow_pick(ctx, &fn, &y_view);
    if (st == LD_OK && ctx->inputs[0]->dtype == ctx->inputs[1]->dtype &&
        exponent_is_two(ctx->inputs[1]))
        fn = ctx->inputs[0]->dtype == LD_DTYPE_FLOAT32 ? square_f32 : square_f64;
    if (st == LD_OK) {
        const ld_tensor *ins[2] = {ctx->inputs[0], &y_view};
        ld_ew_broadcast_output(ctx, ins, 2, fn, NULL);
    }
    return st;
}

/* --- Max, Min, Sum, Mean: variadic, folded left to right ------------------------------ */

#define MAX_FN(sfx, T, DT, W)                                                        \
    EW_ROW2(max_##sfx, T, T, T, void, (x > y || x != x) ? x : y)                      \
    EW_ROW2(min_##sfx, T, T, T, void, (x < y || x != x) ? x : y)
EW_NUMBERS(MAX_FN)
#define MAX_ENTRY(sfx, T, DT, W) [DT] = max_##sfx,
#define MIN_ENTRY(sfx, T, DT, W) [DT] = min_##sfx,
static const ld_ew_row_table max_table = {EW_NUMBERS(MAX_ENTRY)};
static const ld_ew_row_table min_table = {EW_NUMBERS(MIN_ENTRY)};
static const ld_ew_row_table sum_table = {EW_FLOATS(ADD_ENTRY)};
#define mean_table sum_table

static ld_status variadic_infer(ld_kernel_ctx *ctx, ld_output_desc *outs,
                                const ld_ew_row_fn *table)
{
    ld_ew_row_fn fn;
    if (ctx->n_inputs < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs at least one input");
    ld_status st = ld_ew_same_dtype(ctx, 0, ctx->n_inputs);
    if (st == LD_OK)
        st = ld_ew_pick_row(ctx, table, ctx->inputs[0]->dtype, &fn);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    return ld_ew_broadcast_shape(ctx, ctx->inputs, ctx->n_inputs, &outs[0].shape);
}

EW_MAP(scale_f32, float, float, double, x / (float)p[0])
EW_MAP(scale_f64, double, double, double, x / p[0])

/* out = in0 op in1, then out = out op in_k: the same order for any thread count. */
static ld_status variadic_compute(ld_kernel_ctx *ctx, const ld_ew_row_fn *table, bool mean)
{
    ld_ew_row_fn fn;
    ld_tensor *out = ctx->outputs[0];
    ld_status st = ld_ew_pick_row(ctx, table, ctx->inputs[0]->dtype, &fn);
    if (st != LD_OK || !out)
        return st;
    if (ctx->n_inputs == 1) {
        if (out->nbytes)
            memcpy(out->data, ctx->inputs[0]->data, out->nbytes);
        return LD_OK;
    }
    const ld_tensor *pair[2] = {ctx->inputs[0], ctx->inputs[1]};
    ld_ew_broadcast(ctx, out, pair, 2, fn, NULL);
    for (int k = 2; k < ctx->n_inputs; k++) {
        pair[0] = out; /* in place: each row reads element i before writing it */
        pair[1] = ctx->inputs[k];
        ld_ew_broadcast(ctx, out, pair, 2, fn, NULL);
    }
    if (mean) {
        double n = ctx->n_inputs;
        ld_ew_map(ctx, out, out, out->dtype == LD_DTYPE_FLOAT32 ? scale_f32 : scale_f64, &n);
    }
    return LD_OK;
}

#define VARIADIC(op, is_mean)                                                        \
    static ld_status op##_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)            \
    {                                                                                 \
        return variadic_infer(ctx, outs, op##_table);                                 \
    }                                                                                 \
    static ld_status op##_compute(ld_kernel_ctx *ctx)                                \
    {                                                                                 \
        return variadic_compute(ctx, op##_table, is_mean);                            \
    }
VARIADIC(max, false)
VARIADIC(min, false)
VARIADIC(sum, false)
VARIADIC(mean, true)

#define W LD_KERNEL_WIDEN_HALF
#define ROW(name, since, op) {"", name, since, W, NULL, op##_infer, op##_compute, NULL, NULL}
static const ld_kernel binary_kernels[] = {
    ROW("Add", 1, add),
    {"", "BitShift", 11, 0, bitshift_init, bitshift_infer, bitshift_compute, ld_ew_params_fini, NULL},
    ROW("Div", 1, div),
    ROW("Max", 1, max),
    ROW("Mean", 1, mean),
    ROW("Min", 1, min),
    {"", "Mod", 10, W, mod_init, mod_infer, mod_compute, ld_ew_params_fini, NULL},
    ROW("Mul", 1, mul),
    ROW("Pow", 1, pow),
    ROW("Sub", 1, sub),
    ROW("Sum", 1, sum),
};
#undef ROW
#undef W

LD_KERNEL_FAMILY(binary);
