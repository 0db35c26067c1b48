/* layerdiff — the block loops of elementwise chain fusion (see
 * exec_fuse_ops.h). The expressions are copied from the kernels' EW_MAP /
 * EW_ROW2 rows (same types, same order of operations); the loops carry the
 * same `omp simd` and target_clones as those rows, and vectorising a
 * comparison-and-select or an IEEE add/mul/div does not change its bits. */
#include "backends/exec_fuse_ops.h"

#include <math.h>

#include "backends/kernels/activation_round.h"
#include "backends/kernels/elementwise_round.h"
#include "backends/kernels/round_fp16_group.h"

#define CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define SIMD _Pragma("omp simd")

/* Binary rows: the three stride cases each a plain contiguous loop. */
#define BINARY(name, EXPR)                                                               \
    CLONES static void name(float *d, ld_fuse_arg a, ld_fuse_arg b, int64_t n)           \
    {                                                                                    \
        if (a.p && b.p) {                                                                \
            const float *pa = a.p, *pb = b.p;                                            \
            SIMD for (int64_t i = 0; i < n; i++)                                         \
            {                                                                            \
                float x = pa[i], y = pb[i];                                              \
                d[i] = EXPR;                                                             \
            }                                                                            \
        } else if (a.p) {                                                                \
            const float *pa = a.p;                                                       \
            const float y = b.s;                                                         \
            SIMD for (int64_t i = 0; i < n; i++)                                         \
            {                                                                            \
                float x = pa[i];                                                         \
                d[i] = EXPR;                                                             \
            }                                                                            \
        } else {                                                                         \
            const float *pb = b.p;                                                       \
            const float x = a.s;                                                         \
            SIMD for (int64_t i = 0; i < n; i++)                                         \
            {                                                                            \
                float y = pb[i];                                                         \
                d[i] = EXPR;                                                             \
            }                                                                            \
        }                                                                                \
    }
BINARY(add_rows, x + y)
BINARY(sub_rows, x - y)
BINARY(mul_rows, x * y)
BINARY(div_rows, x / y)

/* Unary rows: p[0], p[1] as in the kernels (Clip's bounds, alpha/beta). */
#define UNARY(name, EXPR)                                                                \
    CLONES static void name(float *d, const float *in, const float *p, int64_t n)        \
    {                                                                                    \
        SIMD for (int64_t i = 0; i < n; i++)                                             \
        {                                                                                \
            float x = in[i];                                                             \
            d[i] = EXPR;                                                                 \
        }                                                                                \
    }
/* activation.c: CLIP_EXPR, relu_f32, leakyrelu, CLAMP01, hardsigmoid, hardswish */
#define CLIP_EXPR(x) (((x) < p[0] ? p[0] : (x)) > p[1] ? p[1] : ((x) < p[0] ? p[0] : (x)))
#define CLAMP01(v) ((v) < 0 ? 0 : ((v) > 1 ? 1 : (v)))
UNARY(clip_rows, CLIP_EXPR(x))
UNARY(relu_rows, x < 0 ? (float)0 : x)
UNARY(leakyrelu_rows, x < 0 ? p[0] * x : x)
UNARY(hardsigmoid_rows, CLAMP01(p[0] * x + p[1]))
UNARY(hardswish_rows, x * CLAMP01(x * (1.0f / 6.0f) + 0.5f))

void ld_fuse_apply(int op, float *d, ld_fuse_arg a, ld_fuse_arg b, float alpha, float beta,
                   int64_t n)
{
    const float p[2] = {alpha, beta};
    switch (op) {
    case LD_FUSE_ADD: add_rows(d, a, b, n); break;
    case LD_FUSE_SUB: sub_rows(d, a, b, n); break;
    case LD_FUSE_MUL: mul_rows(d, a, b, n); break;
    case LD_FUSE_DIV: div_rows(d, a, b, n); break;
    case LD_FUSE_CLIP: clip_rows(d, a.p, p, n); break;
    case LD_FUSE_RELU: relu_rows(d, a.p, p, n); break;
    case LD_FUSE_LEAKYRELU: leakyrelu_rows(d, a.p, p, n); break;
    case LD_FUSE_HARDSIGMOID: hardsigmoid_rows(d, a.p, p, n); break;
    case LD_FUSE_HARDSWISH: hardswish_rows(d, a.p, p, n); break;
    case LD_FUSE_SIGMOID: ld_fuse_sigmoid_rows(d, a.p, n); break;
    default: break;
    }
}

/* The rows above in the kernels' row and map signatures (elementwise.h),
 * for the one-pass rounding loops of elementwise_round.c and
 * activation_round.c, which call them on the groups they leave unrounded
 * (so NaN payloads are these rows'). */
static ld_fuse_arg row_arg(const void *in, int64_t stride)
{
    ld_fuse_arg a = {0};
    if (stride)
        a.p = in;
    else
        a.s = *(const float *)in;
    return a;
}
#define ROW_ADAPTER(name, rows)                                                          \
    static void name(void *out, const void *const *in, const int64_t *stride, int64_t n, \
                     const void *params)                                                 \
    {                                                                                    \
        (void)params;                                                                    \
        rows(out, row_arg(in[0], stride[0]), row_arg(in[1], stride[1]), n);              \
    }
ROW_ADAPTER(add_row_fn, add_rows)
ROW_ADAPTER(sub_row_fn, sub_rows)
ROW_ADAPTER(mul_row_fn, mul_rows)
ROW_ADAPTER(div_row_fn, div_rows)

static void clip_map_fn(void *out, const void *in, int64_t n, const void *params)
{
    clip_rows(out, in, params, n);
}

static void relu_map_fn(void *out, const void *in, int64_t n, const void *params)
{
    relu_rows(out, in, params, n);
}

void ld_fuse_rounding_init(ld_fuse_rounding *r,
                           void (*round_block)(void *, int, float *, int64_t), void *user)
{
    *r = (ld_fuse_rounding){.ew_level = ld_ew_round_level(), .act_level = ld_act_round_level()};
    r->ctx.round_block = round_block; /* the loops read round_block and round_user only */
    r->ctx.round_user = user;
    /* the plain blocks replace the per-group loops, which it falls back to */
    r->plain = ld_fuse_round_plain_enabled() && r->ew_level == LD_EW_ROUND_AVX2;
}

/* The per-group loops of elementwise_round.c / activation_round.c. */
static bool apply_round_groups(const ld_fuse_rounding *r, int op, float *d, ld_fuse_arg a,
                               ld_fuse_arg b, float alpha, float beta, int64_t n)
{
    static const ld_ew_row_fn arith_rows[] = {
        [LD_FUSE_ADD] = add_row_fn,
        [LD_FUSE_SUB] = sub_row_fn,
        [LD_FUSE_MUL] = mul_row_fn,
        [LD_FUSE_DIV] = div_row_fn,
    };
    static const ld_ew_arith arith_ops[] = {
        [LD_FUSE_ADD] = LD_EW_ARITH_ADD,
        [LD_FUSE_SUB] = LD_EW_ARITH_SUB,
        [LD_FUSE_MUL] = LD_EW_ARITH_MUL,
        [LD_FUSE_DIV] = LD_EW_ARITH_DIV,
    };
    const float p[2] = {alpha, beta};
    switch (op) {
    case LD_FUSE_ADD:
    case LD_FUSE_SUB:
    case LD_FUSE_MUL:
    case LD_FUSE_DIV:
        if (r->ew_level != LD_EW_ROUND_AVX2 || (!a.p && !b.p))
            return false;
        ld_ew_arith_fp16(&r->ctx, r->ew_level, arith_ops[op], d, a.p ? a.p : &a.s,
                         b.p ? b.p : &b.s, a.p != NULL, b.p != NULL, n, arith_rows[op], NULL);
        return true;
    case LD_FUSE_CLIP:
        return r->act_level == LD_ACT_ROUND_AVX2 &&
               ld_act_clamp_fp16_block(&r->ctx, d, a.p, n, alpha, beta, clip_map_fn, p);
    case LD_FUSE_RELU:
        return r->act_level == LD_ACT_ROUND_AVX2 &&
               ld_act_clamp_fp16_block(&r->ctx, d, a.p, n, 0.0f, INFINITY, relu_map_fn, p);
    default: return false;
    }
}

bool ld_fuse_apply_round_fp16(const ld_fuse_rounding *r, int op, float *d, ld_fuse_arg a,
                              ld_fuse_arg b, float alpha, float beta, int64_t n)
{
    bool act = op == LD_FUSE_CLIP || op == LD_FUSE_RELU;
    /* r->plain implies the elementwise level AVX2; with Clip/Relu's level
     * AVX2 too, apply_round_groups below cannot decline */
    if (r->plain && op >= LD_FUSE_ADD && op <= LD_FUSE_RELU &&
        (!act || r->act_level == LD_ACT_ROUND_AVX2)) {
        /* the per-group loop's Clip/Relu: clamp to [alpha, beta], Relu to [0, inf) */
        float lo = op == LD_FUSE_RELU ? 0.0f : alpha, hi = op == LD_FUSE_RELU ? INFINITY : beta;
        int64_t done;
        if (d == a.p || d == b.p) {
            /* in place: plain groups of 32 up to the first that is not,
               whose inputs it has not overwritten */
            done = ld_fuse_round_plain_prefix(op, d, a, b, lo, hi, n);
        } else {
            /* the whole block (but a tail of fewer than 8), redone by the
               per-group loop when it is not all plain */
            int64_t n8 = n & ~(int64_t)7;
            done = n8 > 0 && ld_fuse_round_plain(op, d, a, b, lo, hi, n8) ? n8 : 0;
        }
        if (done == n)
            return true;
        /* the rest the per-group way: values and counters are per element */
        if (a.p)
            a.p += done;
        if (b.p)
            b.p += done;
        return apply_round_groups(r, op, d + done, a, b, alpha, beta, n - done);
    }
    return apply_round_groups(r, op, d, a, b, alpha, beta, n);
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) static void
round_fp16_avx2(float *d, int64_t n, void (*round_block)(void *, int, float *, int64_t),
                void *user)
{
    int64_t left = -1, i = 0; /* start of the groups left unrounded, or -1 */
    for (; i + 16 <= n; i += 16) {
        if (ld_round_group_store16(d + i, NULL, _mm256_loadu_ps(d + i),
                                   _mm256_loadu_ps(d + i + 8))) {
            if (left < 0)
                left = i;
        } else if (left >= 0) {
            round_block(user, 0, d + left, i - left);
            left = -1;
        }
    }
    if (left < 0)
        left = i;
    if (n > left)
        round_block(user, 0, d + left, n - left);
}
#endif

void ld_fuse_round_fp16(const ld_fuse_rounding *r, float *d, int64_t n)
{
#if defined(__x86_64__)
    if (r->ew_level == LD_EW_ROUND_AVX2) {
        round_fp16_avx2(d, n, r->ctx.round_block, r->ctx.round_user);
        return;
    }
#endif
    r->ctx.round_block(r->ctx.round_user, 0, d, n);
}
