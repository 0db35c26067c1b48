/* layerdiff — comparisons and logic: Equal, Greater, GreaterOrEqual, Less,
 * LessOrEqual (bool outputs), And, Or, Xor, Not (bool tensors), and Where.
 *
 * Comparisons widen float16/bfloat16 (exact, so the result is the same as
 * comparing the halves). Bool elements are bytes; any non-zero byte counts as
 * true and outputs are 0 or 1. Where moves elements by size (1, 2, 4 or 8
 * bytes), so it serves every dtype natively. */
#include "backends/kernels/elementwise.h"
#include "backends/kernels/kernels.h"

/* --- comparisons ---------------------------------------------------------------------- */

#define COMPARE_FN(sfx, T, DT, W)                                                    \
    EW_ROW2(equal_##sfx, T, T, uint8_t, void, x == y)                                 \
    EW_ROW2(greater_##sfx, T, T, uint8_t, void, x > y)                                \
    EW_ROW2(greater_equal_##sfx, T, T, uint8_t, void, x >= y)                         \
    EW_ROW2(less_##sfx, T, T, uint8_t, void, x < y)                                   \
    EW_ROW2(less_equal_##sfx, T, T, uint8_t, void, x <= y)
EW_NUMBERS(COMPARE_FN)
EW_ROW2(equal_bool, uint8_t, uint8_t, uint8_t, void, (x != 0) == (y != 0))

#define EQUAL_ENTRY(sfx, T, DT, W) [DT] = equal_##sfx,
#define GREATER_ENTRY(sfx, T, DT, W) [DT] = greater_##sfx,
#define GREATER_EQUAL_ENTRY(sfx, T, DT, W) [DT] = greater_equal_##sfx,
#define LESS_ENTRY(sfx, T, DT, W) [DT] = less_##sfx,
#define LESS_EQUAL_ENTRY(sfx, T, DT, W) [DT] = less_equal_##sfx,
static const ld_ew_row_table equal_table = {EW_NUMBERS(EQUAL_ENTRY)[LD_DTYPE_BOOL] = equal_bool};
static const ld_ew_row_table greater_table = {EW_NUMBERS(GREATER_ENTRY)};
static const ld_ew_row_table greater_equal_table = {EW_NUMBERS(GREATER_EQUAL_ENTRY)};
static const ld_ew_row_table less_table = {EW_NUMBERS(LESS_ENTRY)};
static const ld_ew_row_table less_equal_table = {EW_NUMBERS(LESS_EQUAL_ENTRY)};
EW_BINARY_KERNEL(equal, LD_DTYPE_BOOL)
EW_BINARY_KERNEL(greater, LD_DTYPE_BOOL)
EW_BINARY_KERNEL(greater_equal, LD_DTYPE_BOOL)
EW_BINARY_KERNEL(less, LD_DTYPE_BOOL)
EW_BINARY_KERNEL(less_equal, LD_DTYPE_BOOL)

/* --- And, Or, Xor, Not ---------------------------------------------------------------- */

EW_ROW2(logic_and_bool, uint8_t, uint8_t, uint8_t, void, (x != 0) & (y != 0))
EW_ROW2(logic_or_bool, uint8_t, uint8_t, uint8_t, void, (x != 0) | (y != 0))
EW_ROW2(logic_xor_bool, uint8_t, uint8_t, uint8_t, void, (x != 0) ^ (y != 0))
static const ld_ew_row_table logic_and_table = {[LD_DTYPE_BOOL] = logic_and_bool};
static const ld_ew_row_table logic_or_table = {[LD_DTYPE_BOOL] = logic_or_bool};
static const ld_ew_row_table logic_xor_table = {[LD_DTYPE_BOOL] = logic_xor_bool};
EW_BINARY_KERNEL(logic_and, LD_DTYPE_BOOL)
EW_BINARY_KERNEL(logic_or, LD_DTYPE_BOOL)
EW_BINARY_KERNEL(logic_xor, LD_DTYPE_BOOL)

EW_MAP(logic_not_bool, uint8_t, uint8_t, void, x == 0)
static const ld_ew_map_table logic_not_table = {[LD_DTYPE_BOOL] = logic_not_bool};
EW_UNARY_KERNEL(logic_not, LD_DTYPE_BOOL)

/* --- Where(condition, X, Y): three-way broadcasting ----------------------------------- */

#define WHERE_FN(bits)                                                               \
    static void where_##bits(void *out_, const void *const *in, const int64_t *st,    \
                             int64_t n, const void *params)                           \
    {                                                                                 \
        const uint8_t *c = in[0];                                                     \
        const uint##bits##_t *x = in[1], *y = in[2];                                  \
        uint##bits##_t *out = out_;                                                   \
        (void)params;                                                                 \
        if (st[0] && st[1] && st[2]) {                                                \
            EW_PRAGMA_SIMD                                                            \
            for (int64_t i = 0; i < n; i++)                                           \
                out[i] = c[i] ? x[i] : y[i];                                          \
        } else {                                                                      \
            for (int64_t i = 0; i < n; i++)                                           \
                out[i] = c[i * st[0]] ? x[i * st[1]] : y[i * st[2]];                  \
        }                                                                             \
    }
WHERE_FN(8)
WHERE_FN(16)
WHERE_FN(32)
WHERE_FN(64)

static ld_status where_pick(ld_kernel_ctx *ctx, ld_ew_row_fn *fn)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = ld_ew_same_dtype(ctx, 1, 2);
    if (st != LD_OK)
        return st;
    if (ctx->inputs[0]->dtype != LD_DTYPE_BOOL)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "condition must be bool, got %s",
                              ld_dtype_name(ctx->inputs[0]->dtype));
    switch (ld_dtype_size(ctx->inputs[1]->dtype)) {
    case 1: *fn = where_8; return LD_OK;
    case 2: *fn = where_16; return LD_OK;
    case 4: *fn = where_32; return LD_OK;
    case 8: *fn = where_64; return LD_OK;
    default: return ld_ew_unsupported_dtype(ctx, ctx->inputs[1]->dtype);
    }
}

static ld_status where_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_ew_row_fn fn;
    ld_status st = where_pick(ctx, &fn);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[1]->dtype;
    return ld_ew_broadcast_shape(ctx, ctx->inputs, 3, &outs[0].shape);
}

static ld_status where_compute(ld_kernel_ctx *ctx)
{
    ld_ew_row_fn fn;
    ld_status st = where_pick(ctx, &fn);
    if (st == LD_OK)
        ld_ew_broadcast(ctx, ctx->outputs[0], ctx->inputs, 3, fn, NULL);
    return st;
}

#define W LD_KERNEL_WIDEN_HALF
#define ROW(name, since, flags, op) {"", name, since, flags, NULL, op##_infer, op##_compute, NULL, NULL}
static const ld_kernel logical_kernels[] = {
    ROW("And", 1, 0, logic_and),
    ROW("Equal", 1, W, equal),
    ROW("Greater", 1, W, greater),
    ROW("GreaterOrEqual", 12, W, greater_equal),
    ROW("Less", 1, W, less),
    ROW("LessOrEqual", 12, W, less_equal),
    ROW("Not", 1, 0, logic_not),
    ROW("Or", 1, 0, logic_or),
    ROW("Where", 9, 0, where),
    ROW("Xor", 1, 0, logic_xor),
};
#undef ROW
#undef W

LD_KERNEL_FAMILY(logical);
