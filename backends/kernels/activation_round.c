/* layerdiff — float32 Clip and Relu with the float16 output rounding in the
 * clamping loop (see activation_round.h).
 *
 * Why: the emulated engine's --fp16 rounding of a Clip or Relu output went
 * block by block through round_block after the driver wrote it (the counting
 * rounding of emulated_count_avx2.c, plus the observer's float16 copy): on
 * a Zen 3 (AVX2) core that made PaddleOCR det's Clip layers (hard-swish, 12M
 * values per run) take 2-2.5x the reference's time, ~5 ms of CPU per run on
 * one thread, and its Relu layers ~1 ms. Clamping is two compares and two
 * blends; the float16 round trip and the "counts nothing" test fit in the
 * same loop while the memory streams run, as for Add/Sub/Mul/Div
 * (elementwise_round.c, whose scheme this is).
 *
 * Values: the clamp is Clip's row function's (activation.c's CLIP_EXPR:
 * x < lo ? lo : x, then t > hi ? hi : t), done with ordered compares and
 * blends, so NaN stays x (its payload) and -0 stays -0 as there; Relu
 * (x < 0 ? 0 : x) is the same clamp with lo 0, hi +inf, value for value.
 * The rounding is the emulated engine's fp16 rounding: vcvtps2ph with round
 * to nearest even from the immediate, vcvtph2ps. A group of 16 whose
 * rounded values are all normal float16, or zeros from zero results, counts
 * nothing in the engine's counters, so it is stored rounded; any other group
 * (a zero, subnormal or infinity from rounding, a NaN or an infinity) is
 * written unrounded by the op's own map function and handed to round_block
 * (adjacent such groups together), which rounds and counts it as always. */
#include "backends/kernels/activation_round.h"

#include <stdatomic.h>
#include <string.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/round_fp16_group.h"
#include "core/round_internal.h"

/* Work per thread and chunk, as the elementwise map driver's (elementwise.c):
 * below LD_PARALLEL_MIN_WORK one thread; chunks a multiple of 16. */
#define ACT_CHUNK ((int64_t)1 << 14)

static atomic_int forced_level = -1;

bool ld_act_round_force_level(int level)
{
    if (level == LD_ACT_ROUND_AVX2 && !ld_round_isa_supported(LD_ROUND_ISA_AVX2))
        return false;
    atomic_store_explicit(&forced_level, level, memory_order_relaxed);
    return true;
}

int ld_act_round_level(void)
{
    int forced = atomic_load_explicit(&forced_level, memory_order_relaxed);
    if (forced >= 0)
        return forced;
    ld_round_isa isa = ld_round_isa_active(); /* AVX-512 CPUs have AVX2 + F16C too */
    return isa == LD_ROUND_ISA_AVX2 || isa == LD_ROUND_ISA_AVX512 ? LD_ACT_ROUND_AVX2
                                                                  : LD_ACT_ROUND_NONE;
}

#if defined(__x86_64__)

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))

/* CLIP_EXPR on 8 lanes: ordered compares are false for NaN, so x stays. */
AVX2 static inline __m256 clamp8(__m256 x, __m256 lo, __m256 hi)
{
    __m256 t = _mm256_blendv_ps(x, lo, _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(t, hi, _mm256_cmp_ps(t, hi, _CMP_GT_OQ));
}

/* out[0, n) = clamp(in[0, n)), rounded by groups of 16
 * (ld_round_group_store16); bits: out's float16 bits (same index) or NULL. */
AVX2 static void clamp_run(const ld_kernel_ctx *ctx, float *out, uint16_t *bits, const float *in,
                           int64_t n, float lo_, float hi_, ld_ew_map_fn fn, const void *params)
{
    const __m256 lo = _mm256_set1_ps(lo_), hi = _mm256_set1_ps(hi_);
    int64_t left = -1; /* start of the groups left unrounded since, or -1 */
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = clamp8(_mm256_loadu_ps(in + i), lo, hi);
        __m256 v1 = clamp8(_mm256_loadu_ps(in + i + 8), lo, hi);
        if (ld_round_group_store16(out + i, bits ? bits + i : NULL, v0, v1)) {
            fn(out + i, in + i, 16, params); /* unrounded, for round_block */
            if (left < 0)
                left = i;
        } else if (left >= 0) {
            ld_round_group_hand_over(ctx, out, left, i);
            left = -1;
        }
    }
    if (i < n) { /* the tail, padded with zeros (a zero result counts nothing) */
        float x[16] = {0}, r[16];
        uint16_t h[16];
        int64_t k = n - i;
        memcpy(x, in + i, (size_t)k * sizeof *x);
        if (ld_round_group_store16(r, h, clamp8(_mm256_loadu_ps(x), lo, hi),
                            clamp8(_mm256_loadu_ps(x + 8), lo, hi))) {
            fn(out + i, in + i, k, params);
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

#endif

bool ld_act_clamp_fp16_block(const ld_kernel_ctx *ctx, float *out, const float *in, int64_t n,
                             float lo, float hi, ld_ew_map_fn fn, const void *params)
{
#if defined(__x86_64__)
    if (ld_act_round_level() != LD_ACT_ROUND_AVX2)
        return false;
    clamp_run(ctx, out, NULL, in, n, lo, hi, fn, params);
    return true;
#else
    (void)ctx, (void)out, (void)in, (void)n, (void)lo, (void)hi, (void)fn, (void)params;
    return false;
#endif
}

bool ld_act_clamp_fp16(ld_kernel_ctx *ctx, const ld_tensor *in, float lo, float hi,
                       ld_ew_map_fn fn, const void *params)
{
#if defined(__x86_64__)
    ld_tensor *out = ctx->n_outputs > 0 ? ctx->outputs[0] : NULL;
    if (!ctx->round_block || !ctx->round_fp16_inline || !out || out->count == 0 ||
        out->dtype != LD_DTYPE_FLOAT32 || in->dtype != LD_DTYPE_FLOAT32 ||
        in->count != out->count || ld_act_round_level() != LD_ACT_ROUND_AVX2 ||
        (ctx->round_fp16_bits && out->count > ctx->round_fp16_bits_count))
        return false;
    int64_t n = out->count;
    float *dst = out->data;
    const float *src = in->data;
    uint16_t *bits = ctx->round_fp16_bits;
    int threads = 1;
    if (ctx->threads > 1 && n >= LD_PARALLEL_MIN_WORK) {
        int64_t useful = n / (LD_PARALLEL_MIN_WORK / 2);
        threads = useful < ctx->threads ? (int)useful : ctx->threads;
    }
    if (threads <= 1) {
        clamp_run(ctx, dst, bits, src, n, lo, hi, fn, params);
    } else {
        int64_t chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t at = c * ACT_CHUNK, len = n - at < ACT_CHUNK ? n - at : ACT_CHUNK;
            clamp_run(ctx, dst + at, bits ? bits + at : NULL, src + at, len, lo, hi, fn,
                      params);
        }
    }
    ctx->rounded_outputs |= 1u;
    return true;
#else
    (void)ctx, (void)in, (void)lo, (void)hi, (void)fn, (void)params;
    return false;
#endif
}
