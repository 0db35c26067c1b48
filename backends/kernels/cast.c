/* layerdiff — Cast and CastLike between bool, the integer types, float16,
 * bfloat16, float32 and float64. Strings are out of scope (LD_ERR_UNSUPPORTED).
 *
 * Every conversion rounds once, to nearest even:
 *  - float32 -> float16/bfloat16 use the exact converters of round.h;
 *  - float64 and 64-bit integers -> float16/bfloat16 go through float32
 *    rounded to odd (truncate, then set the last bit when inexact), which
 *    makes the second rounding exact (round-to-odd at >= 2 extra bits);
 *  - float -> integer truncates toward zero, NaN and out-of-range values as
 *    x86-64 hardware converts them (elementwise.h, ld_ew_to_*);
 *  - integer -> narrower integer keeps the low bits (two's complement);
 *  - to bool: non-zero (NaN included) is true; from bool: 0 or 1.
 * Halves are not widened by the executor here: Cast handles them itself.
 * Elements go through a small buffer of one "canonical" type per source
 * (int64, uint64, float, double), so the dtype is switched on per chunk of
 * CHUNK elements, not per element. */
#include <strings.h>

#include "backends/kernels/elementwise.h"
#include "backends/kernels/kernels.h"
#include "layerdiff/round.h"

#define CHUNK 512

typedef enum canonical { CANON_I64, CANON_U64, CANON_F32, CANON_F64 } canonical;

typedef union chunk_buf {
    int64_t i[CHUNK];
    uint64_t u[CHUNK];
    float f[CHUNK];
    double d[CHUNK];
} chunk_buf;

typedef struct cast_params {
    ld_dtype from, to;
} cast_params;

static canonical canonical_of(ld_dtype dt)
{
    switch (dt) {
    case LD_DTYPE_UINT8: case LD_DTYPE_UINT16: case LD_DTYPE_UINT32: case LD_DTYPE_UINT64:
        return CANON_U64;
    case LD_DTYPE_FLOAT16: case LD_DTYPE_BFLOAT16: case LD_DTYPE_FLOAT32:
        return CANON_F32;
    case LD_DTYPE_FLOAT64:
        return CANON_F64;
    default:
        return CANON_I64; /* bool and signed integers */
    }
}

/* --- rounding to odd --------------------------------------------------------------- */

static float set_last_bit(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    bits |= 1;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* x in float32 rounded to odd. Overflow gives +-FLT_MAX with the sticky bit
 * (which still rounds to inf in any narrower type); underflow the smallest
 * subnormal. */
static float f64_to_f32_odd(double x)
{
    float f = (float)x;
    if ((double)f == x || x != x)
        return f;
    if (fabs((double)f) > fabs(x))
        f = nextafterf(f, 0.0f);
    return set_last_bit(f);
}

static float u64_to_f32_odd(uint64_t v)
{
    if (v < ((uint64_t)1 << 24))
        return (float)v;
    int shift = 40 - __builtin_clzll(v); /* bits below the top 24 */
    uint64_t mantissa = v >> shift;
    if (v & (((uint64_t)1 << shift) - 1))
        mantissa |= 1;
    return ldexpf((float)mantissa, shift); /* exact: mantissa < 2^24 */
}

static float i64_to_f32_odd(int64_t v)
{
    float magnitude = u64_to_f32_odd(v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
    return v < 0 ? -magnitude : magnitude;
}

/* --- chunk readers and writers ---------------------------------------------------------- */

#define LOOP(T, EXPR)                                                                 \
    do {                                                                              \
        T *d_ = dst;                                                                  \
        for (int64_t i = 0; i < n; i++)                                               \
            d_[i] = (EXPR);                                                           \
    } while (0)
#define READ(T, field)                                                               \
    do {                                                                              \
        const T *s_ = src;                                                            \
        for (int64_t i = 0; i < n; i++)                                               \
            b->field[i] = s_[i];                                                      \
    } while (0)

#define READ_SIGNED(sfx, T, DT, W) case DT: READ(T, i); break;
#define READ_UNSIGNED(sfx, T, DT, W) case DT: READ(T, u); break;

static void read_chunk(const void *src, ld_dtype dt, int64_t n, chunk_buf *b)
{
    switch (dt) {
    case LD_DTYPE_BOOL: {
        const uint8_t *s = src;
        for (int64_t i = 0; i < n; i++)
            b->i[i] = s[i] != 0;
        break;
    }
    EW_SIGNED_INTS(READ_SIGNED)
    EW_UNSIGNED_INTS(READ_UNSIGNED)
    case LD_DTYPE_FLOAT16: ld_convert_fp16_to_fp32(src, b->f, (size_t)n); break;
    case LD_DTYPE_BFLOAT16: ld_convert_bf16_to_fp32(src, b->f, (size_t)n); break;
    case LD_DTYPE_FLOAT32: READ(float, f); break;
    case LD_DTYPE_FLOAT64: READ(double, d); break;
    default: break; /* excluded by cast_check */
    }
}

/* Integer and float targets from an integer canonical value v[i]. */
#define FROM_INT_CASE(sfx, T, DT, W) case DT: LOOP(T, (T)v[i]); break;
#define FROM_INT_WRITER(name, VT, field, TO_BF16)                                     \
    static void name(void *dst, ld_dtype dt, int64_t n, const chunk_buf *b)           \
    {                                                                                 \
        const VT *v = b->field;                                                       \
        switch (dt) {                                                                 \
        case LD_DTYPE_BOOL: LOOP(uint8_t, v[i] != 0); break;                          \
        EW_INTS(FROM_INT_CASE)                                                        \
        case LD_DTYPE_FLOAT32: LOOP(float, (float)v[i]); break;                       \
        case LD_DTYPE_FLOAT64: LOOP(double, (double)v[i]); break;                     \
        /* exact: every |v| < 2^24 is a float, every larger one is inf in fp16 */     \
        case LD_DTYPE_FLOAT16: LOOP(ld_fp16, ld_fp32_to_fp16((float)v[i])); break;   \
        case LD_DTYPE_BFLOAT16: LOOP(ld_bf16, ld_fp32_to_bf16(TO_BF16(v[i]))); break; \
        default: break;                                                               \
        }                                                                             \
    }
FROM_INT_WRITER(write_from_i64, int64_t, i, i64_to_f32_odd)
FROM_INT_WRITER(write_from_u64, uint64_t, u, u64_to_f32_odd)

#define FROM_FLOAT_CASE(sfx, T, DT, W) case DT: LOOP(T, ld_ew_to_##sfx((double)v[i])); break;

static void write_from_f32(void *dst, ld_dtype dt, int64_t n, const chunk_buf *b)
{
    const float *v = b->f;
    switch (dt) {
    case LD_DTYPE_BOOL: LOOP(uint8_t, v[i] != 0); break;
    EW_INTS(FROM_FLOAT_CASE)
    case LD_DTYPE_FLOAT32: LOOP(float, v[i]); break;
    case LD_DTYPE_FLOAT64: LOOP(double, (double)v[i]); break;
    case LD_DTYPE_FLOAT16: ld_convert_fp32_to_fp16(v, dst, (size_t)n); break;
    case LD_DTYPE_BFLOAT16: ld_convert_fp32_to_bf16(v, dst, (size_t)n); break;
    default: break;
    }
}

static void write_from_f64(void *dst, ld_dtype dt, int64_t n, const chunk_buf *b)
{
    const double *v = b->d;
    switch (dt) {
    case LD_DTYPE_BOOL: LOOP(uint8_t, v[i] != 0); break;
    EW_INTS(FROM_FLOAT_CASE)
    case LD_DTYPE_FLOAT32: LOOP(float, (float)v[i]); break;
    case LD_DTYPE_FLOAT64: LOOP(double, v[i]); break;
    case LD_DTYPE_FLOAT16: LOOP(ld_fp16, ld_fp32_to_fp16(f64_to_f32_odd(v[i]))); break;
    case LD_DTYPE_BFLOAT16: LOOP(ld_bf16, ld_fp32_to_bf16(f64_to_f32_odd(v[i]))); break;
    default: break;
    }
}

/* ld_ew_map_fn: converts n elements chunk by chunk. */
static void cast_map(void *out, const void *in, int64_t n, const void *params)
{
    const cast_params *p = params;
    size_t in_size = ld_dtype_size(p->from), out_size = ld_dtype_size(p->to);
    canonical canon = canonical_of(p->from);
    chunk_buf b;
    for (int64_t start = 0; start < n; start += CHUNK) {
        int64_t len = n - start < CHUNK ? n - start : CHUNK;
        const char *src = (const char *)in + (size_t)start * in_size;
        char *dst = (char *)out + (size_t)start * out_size;
        read_chunk(src, p->from, len, &b);
        switch (canon) {
        case CANON_I64: write_from_i64(dst, p->to, len, &b); break;
        case CANON_U64: write_from_u64(dst, p->to, len, &b); break;
        case CANON_F32: write_from_f32(dst, p->to, len, &b); break;
        case CANON_F64: write_from_f64(dst, p->to, len, &b); break;
        }
    }
}

/* Whole-array fast paths for the common float conversions. */
static void f32_to_f16_map(void *out, const void *in, int64_t n, const void *p)
{
    ld_convert_fp32_to_fp16(in, out, (size_t)n);
}
static void f16_to_f32_map(void *out, const void *in, int64_t n, const void *p)
{
    ld_convert_fp16_to_fp32(in, out, (size_t)n);
}
static void f32_to_bf16_map(void *out, const void *in, int64_t n, const void *p)
{
    ld_convert_fp32_to_bf16(in, out, (size_t)n);
}
static void bf16_to_f32_map(void *out, const void *in, int64_t n, const void *p)
{
    ld_convert_bf16_to_fp32(in, out, (size_t)n);
}

/* --- Cast and CastLike ------------------------------------------------------------------ */

static bool castable(ld_dtype dt)
{
    return ld_dtype_is_supported(dt) && dt != LD_DTYPE_STRING;
}

static ld_status cast_check(ld_kernel_ctx *ctx, ld_dtype from, ld_dtype to)
{
    if (from == LD_DTYPE_STRING || to == LD_DTYPE_STRING)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "casts %s string are not supported",
                              from == LD_DTYPE_STRING ? "from" : "to");
    if (!castable(from))
        return ld_ew_unsupported_dtype(ctx, from);
    if (!castable(to))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "cannot cast to %s", ld_dtype_name(to));
    return LD_OK;
}

static ld_status cast_run(ld_kernel_ctx *ctx, ld_dtype to)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    ld_status st = cast_check(ctx, x->dtype, to);
    if (st != LD_OK || !y)
        return st;
    if (x->dtype == to) {
        if (y->nbytes)
            memcpy(y->data, x->data, y->nbytes);
        return LD_OK;
    }
    cast_params p = {x->dtype, to};
    ld_ew_map_fn fn = cast_map;
    if (x->dtype == LD_DTYPE_FLOAT32 && to == LD_DTYPE_FLOAT16)
        fn = f32_to_f16_map;
    else if (x->dtype == LD_DTYPE_FLOAT16 && to == LD_DTYPE_FLOAT32)
        fn = f16_to_f32_map;
    else if (x->dtype == LD_DTYPE_FLOAT32 && to == LD_DTYPE_BFLOAT16)
        fn = f32_to_bf16_map;
    else if (x->dtype == LD_DTYPE_BFLOAT16 && to == LD_DTYPE_FLOAT32)
        fn = bf16_to_f32_map;
    ld_ew_map(ctx, x, y, fn, &p);
    return LD_OK;
}

/* Cast-1 names the target type as a string ("FLOAT"), later versions as a
 * TensorProto.DataType number. */
static ld_status cast_target_from_name(ld_kernel_ctx *ctx, const char *name, ld_dtype *out)
{
    static const struct { const char *name; ld_dtype dtype; } names[] = {
        {"FLOAT", LD_DTYPE_FLOAT32}, {"UINT8", LD_DTYPE_UINT8}, {"INT8", LD_DTYPE_INT8},
        {"UINT16", LD_DTYPE_UINT16}, {"INT16", LD_DTYPE_INT16}, {"INT32", LD_DTYPE_INT32},
        {"INT64", LD_DTYPE_INT64}, {"STRING", LD_DTYPE_STRING}, {"BOOL", LD_DTYPE_BOOL},
        {"FLOAT16", LD_DTYPE_FLOAT16}, {"DOUBLE", LD_DTYPE_FLOAT64},
        {"UINT32", LD_DTYPE_UINT32}, {"UINT64", LD_DTYPE_UINT64},
        {"BFLOAT16", LD_DTYPE_BFLOAT16},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(name, names[i].name) == 0) {
            *out = names[i].dtype;
            return LD_OK;
        }
    }
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'to' names no known type: \"%s\"", name);
}

typedef struct cast_state {
    ld_dtype to;
} cast_state;

static ld_status cast_init(ld_kernel_ctx *ctx)
{
    const ld_attr *to = ld_node_attr(ctx->node, "to");
    ld_dtype target = LD_DTYPE_UNDEFINED;
    ld_status st;
    if (!to)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'to' is missing");
    if (to->type == LD_ATTR_STRING) {
        st = cast_target_from_name(ctx, to->s, &target);
    } else if (to->type == LD_ATTR_INT) {
        target = (ld_dtype)to->i;
        st = to->i > 0 && to->i < LD_DTYPE_COUNT_
                 ? LD_OK
                 : ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'to' is %lld, not a data type",
                                  (long long)to->i);
    } else {
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'to' is %s, expected int",
                            ld_attr_type_name(to->type));
    }
    if (st != LD_OK)
        return st;
    cast_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    s->to = target;
    ctx->state = s;
    return LD_OK;
}

static ld_status cast_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const cast_state *s = ctx->state;
    ld_status st = ld_infer_like_input0(ctx, outs);
    if (st == LD_OK)
        st = cast_check(ctx, ctx->inputs[0]->dtype, s->to);
    outs[0].dtype = s->to;
    return st;
}

static ld_status cast_compute(ld_kernel_ctx *ctx)
{
    const cast_state *s = ctx->state;
    return cast_run(ctx, s->to);
}

static ld_status castlike_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_infer_like_input0(ctx, outs);
    if (st == LD_OK)
        st = ld_krequire(ctx, 1);
    if (st == LD_OK)
        st = cast_check(ctx, ctx->inputs[0]->dtype, ctx->inputs[1]->dtype);
    if (st == LD_OK)
        outs[0].dtype = ctx->inputs[1]->dtype;
    return st;
}

static ld_status castlike_compute(ld_kernel_ctx *ctx)
{
    return cast_run(ctx, ctx->inputs[1]->dtype);
}

static const ld_kernel cast_kernels[] = {
    {"", "Cast", 1, 0, cast_init, cast_infer, cast_compute, free, NULL},
    {"", "CastLike", 15, 0, NULL, castlike_infer, castlike_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(cast);
