/* layerdiff — the block loops of elementwise chain fusion (see
 * exec_fuse_ops.h). The expressions are copied from the kernels' EW_MAP /
 * EW_ROW2 rows (same types, same order of operations); the loops carry the
 * same `omp simd` and target_clones as those rows, and vectorising a
 * comparison-and-select or an IEEE add/mul/div does not change its bits. */
#include "backends/exec_fuse_ops.h"

#include <math.h>

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

/* activation.c's sigmoid_f, scalar as its EW_MAP_CALL loop (libm's expf). */
static inline float sigmoid_f(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static void sigmoid_rows(float *d, const float *in, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = sigmoid_f(in[i]);
}

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
    case LD_FUSE_SIGMOID: sigmoid_rows(d, a.p, n); break;
    default: break;
    }
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

void ld_fuse_round_fp16(float *d, int64_t n, void (*round_block)(void *, int, float *, int64_t),
                        void *user)
{
#if defined(__x86_64__)
    if (ld_ew_round_level() == LD_EW_ROUND_AVX2) {
        round_fp16_avx2(d, n, round_block, user);
        return;
    }
#endif
    round_block(user, 0, d, n);
}
