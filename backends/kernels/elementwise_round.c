/* layerdiff — float32 Add, Sub, Mul and Div with the float16 output
 * rounding in the same loop (see elementwise_round.h).
 *
 * Why: the emulated engine's --fp16 rounding of an elementwise output, done
 * block by block after the kernel (round_block), costs ~0.2 ns per element
 * on a Zen 3 (AVX2) core: its vcvtps2ph / vcvtph2ps run while the memory
 * streams of the kernel stand still. On PaddleOCR det these four ops write
 * 117M elements per run: ~23 ms of CPU, the largest part of what an emulated
 * run costs more than the reference. Rounding in the registers of the
 * arithmetic loop hides that work under the loop's memory traffic (measured
 * on a 3.3M-element Add out of cache: 2.5 ms plain, 3.2 ms with the block
 * rounding, 2.5 ms rounded in the loop).
 *
 * Values: the arithmetic is one IEEE operation per element, as the row
 * function's (elementwise_binary.c); only groups without NaN go this way (a
 * NaN result sends its group to the row function, so NaN payloads are the
 * row function's). The rounding is the emulated engine's fp16 rounding:
 * vcvtps2ph with round to nearest even from the immediate, vcvtph2ps
 * (core/round_x86.c, backends/emulated_count_avx2.c). A group of 16 whose
 * rounded values are all normal float16, or zeros from zero results, counts
 * nothing in the engine's counters, so it is stored rounded; any other group
 * (a zero, subnormal or infinity from rounding, a NaN or infinity) is written
 * unrounded by the row function itself and handed to round_block (adjacent
 * such groups together), which rounds and counts it as always. */
#include "backends/kernels/elementwise_round.h"

#include <stdatomic.h>
#include <string.h>

#include "backends/kernels/round_fp16_group.h"
#include "core/round_internal.h"

static atomic_int forced_level = -1;

bool ld_ew_round_force_level(int level)
{
    if (level == LD_EW_ROUND_AVX2 && !ld_round_isa_supported(LD_ROUND_ISA_AVX2))
        return false;
    atomic_store_explicit(&forced_level, level, memory_order_relaxed);
    return true;
}

int ld_ew_round_level(void)
{
    int forced = atomic_load_explicit(&forced_level, memory_order_relaxed);
    if (forced >= 0)
        return forced;
    ld_round_isa isa = ld_round_isa_active(); /* AVX-512 CPUs have AVX2 + F16C too */
    return isa == LD_ROUND_ISA_AVX2 || isa == LD_ROUND_ISA_AVX512 ? LD_EW_ROUND_AVX2
                                                                  : LD_EW_ROUND_NONE;
}

#if defined(__x86_64__)

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))

AVX2 static inline __m256 arith8(ld_ew_arith op, __m256 x, __m256 y)
{
    switch (op) {
    case LD_EW_ARITH_ADD: return _mm256_add_ps(x, y);
    case LD_EW_ARITH_SUB: return _mm256_sub_ps(x, y);
    case LD_EW_ARITH_MUL: return _mm256_mul_ps(x, y);
    default: return _mm256_div_ps(x, y);
    }
}

/* The loop; inlined into one function per op and stride case (below), so
 * that neither is tested per group. */
AVX2 static inline __attribute__((always_inline)) void
arith_body(const ld_kernel_ctx *ctx, ld_ew_arith op, float *out, uint16_t *bits, const float *a,
           const float *b, bool a_row, bool b_row, int64_t n, ld_ew_row_fn fn,
           const void *params)
{
    const int64_t stride[2] = {a_row, b_row};
    __m256 ca = _mm256_set1_ps(a[0]), cb = _mm256_set1_ps(b[0]);
    int64_t left = -1; /* start of the groups left unrounded since, or -1 */
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 x0 = a_row ? _mm256_loadu_ps(a + i) : ca, x1 = a_row ? _mm256_loadu_ps(a + i + 8) : ca;
        __m256 y0 = b_row ? _mm256_loadu_ps(b + i) : cb, y1 = b_row ? _mm256_loadu_ps(b + i + 8) : cb;
        if (ld_round_group_store16(out + i, bits ? bits + i : NULL, arith8(op, x0, y0),
                            arith8(op, x1, y1))) {
            const void *in[2] = {a + (a_row ? i : 0), b + (b_row ? i : 0)};
            fn(out + i, in, stride, 16, params); /* unrounded, for round_block */
            if (left < 0)
                left = i;
        } else if (left >= 0) {
            ld_round_group_hand_over(ctx, out, left, i);
            left = -1;
        }
    }
    if (i < n) { /* the tail, padded with ones (1 op 1 counts nothing) */
        float x[16], y[16], r[16];
        uint16_t h[16];
        int64_t k = n - i;
        for (int j = 0; j < 16; j++) {
            x[j] = j < k ? a[a_row ? i + j : 0] : 1.0f;
            y[j] = j < k ? b[b_row ? i + j : 0] : 1.0f;
        }
        if (ld_round_group_store16(r, h, arith8(op, _mm256_loadu_ps(x), _mm256_loadu_ps(y)),
                            arith8(op, _mm256_loadu_ps(x + 8), _mm256_loadu_ps(y + 8)))) {
            const void *in[2] = {a + (a_row ? i : 0), b + (b_row ? i : 0)};
            fn(out + i, in, stride, k, params);
            if (left < 0)
                left = i;
        } else {
            memcpy(out + i, r, (size_t)k * sizeof *r);
            if (bits)
                memcpy(bits + i, h, (size_t)k * sizeof *h);
        }
    }
    ld_round_group_hand_over(ctx, out, left, n);
}

typedef void (*arith_loop)(const ld_kernel_ctx *ctx, float *out, uint16_t *bits, const float *a,
                           const float *b, int64_t n, ld_ew_row_fn fn, const void *params);

#define ARITH_LOOP(name, op, a_row, b_row)                                                   \
    AVX2 static void name(const ld_kernel_ctx *ctx, float *out, uint16_t *bits,            \
                          const float *a, const float *b, int64_t n, ld_ew_row_fn fn,      \
                          const void *params)                                              \
    {                                                                                      \
        arith_body(ctx, op, out, bits, a, b, a_row, b_row, n, fn, params);                 \
    }
#define ARITH_LOOPS(sfx, op)                                                               \
    ARITH_LOOP(sfx##_rows, op, true, true)                                                 \
    ARITH_LOOP(sfx##_a_scalar, op, false, true)                                            \
    ARITH_LOOP(sfx##_b_scalar, op, true, false)
ARITH_LOOPS(add, LD_EW_ARITH_ADD)
ARITH_LOOPS(sub, LD_EW_ARITH_SUB)
ARITH_LOOPS(mul, LD_EW_ARITH_MUL)
ARITH_LOOPS(div, LD_EW_ARITH_DIV)

/* [op - 1][stride case]: both rows, a broadcast, b broadcast */
static const arith_loop arith_loops[4][3] = {
    {add_rows, add_a_scalar, add_b_scalar},
    {sub_rows, sub_a_scalar, sub_b_scalar},
    {mul_rows, mul_a_scalar, mul_b_scalar},
    {div_rows, div_a_scalar, div_b_scalar},
};

#endif

void ld_ew_arith_fp16(const ld_kernel_ctx *ctx, int level, ld_ew_arith op, float *out,
                      const float *a, const float *b, bool a_row, bool b_row, int64_t n,
                      ld_ew_row_fn fn, const void *params)
{
#if defined(__x86_64__)
    if (level == LD_EW_ROUND_AVX2) {
        uint16_t *bits = ctx->round_fp16_bits
                             ? ctx->round_fp16_bits + (out - (const float *)ctx->outputs[0]->data)
                             : NULL;
        if (op >= LD_EW_ARITH_ADD && op <= LD_EW_ARITH_DIV && (a_row || b_row)) {
            arith_loops[op - 1][a_row && b_row ? 0 : a_row ? 2 : 1](ctx, out, bits, a, b, n, fn,
                                                                   params);
            return;
        }
    }
#endif
    (void)level, (void)op;
    const int64_t stride[2] = {a_row, b_row};
    const void *in[2] = {a, b};
    fn(out, in, stride, n, params);
    ld_round_group_hand_over(ctx, out, 0, n);
}
