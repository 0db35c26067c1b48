/* layerdiff — the pieces shared by the kernels that round their float32
 * output to float16 in their own loop (elementwise_round.c for Add/Sub/Mul/
 * Div, activation_round.c for Clip/Relu) and by the emulated engine's
 * counting rounding (backends/emulated_count_avx2.c): the test "does this
 * float16 count anything", the store of a group of 16, and the hand-over of
 * unrounded groups to round_block. Private to backends/. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_ROUND_FP16_GROUP_H
#define LAYERDIFF_BACKENDS_KERNELS_ROUND_FP16_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/kernel.h"

/* Hands out[from, to) to ctx's round_block (nothing when from < 0). */
static inline void ld_round_group_hand_over(const ld_kernel_ctx *ctx, float *out, int64_t from,
                                            int64_t to)
{
    if (from >= 0 && to > from)
        ctx->round_block(ctx->round_user, 0, out + from, to - from);
}

#if defined(__x86_64__)

#include <immintrin.h>

#include "backends/kernels/fp16_split.h"

/* Lanes (16-bit) whose fp16 result h is zero, subnormal, inf or NaN: with
 * s = h << 1 (the sign dropped), the normal results are s in [0x0800,
 * 0xF7FE], and s + 0x7800 maps them to the signed range [-32768, 0x6FFE] and
 * the others to [0x7000, 0x7FFE]: one signed compare. */
__attribute__((target("avx2,f16c"))) static inline __m128i ld_fp16_special(__m128i h)
{
    __m128i s = _mm_add_epi16(_mm_slli_epi16(h, 1), _mm_set1_epi16(0x7800));
    return _mm_cmpgt_epi16(s, _mm_set1_epi16(0x6FFF));
}

/* 16 float32 results v0, v1: true (and nothing stored) when a lane would
 * count in the engine's rounding or is NaN; else their float16 roundings
 * (round to nearest even) go to out, and their bits to bits when not NULL.
 * Without bits it converts nothing: the test and the rounding are
 * fp16_split.h's, which also answer true for the few values just below
 * 2^-14 or from 65504 to 65520 that round to normal float16s (round_block
 * rounds those the same way, counting nothing). */
__attribute__((target("avx2,f16c"))) static inline bool
ld_round_group_store16(float *out, uint16_t *bits, __m256 v0, __m256 v1)
{
    if (!bits) { /* no float16 bits wanted: no conversions either (fp16_split.h) */
        if (!ld_fp16_plain8x2(v0, v1))
            return true;
        _mm256_storeu_ps(out, ld_fp16_split8(v0));
        _mm256_storeu_ps(out + 8, ld_fp16_split8(v1));
        return false;
    }
    __m128i h0 = _mm256_cvtps_ph(v0, _MM_FROUND_TO_NEAREST_INT);
    __m128i h1 = _mm256_cvtps_ph(v1, _MM_FROUND_TO_NEAREST_INT);
    __m128i any = _mm_or_si128(ld_fp16_special(h0), ld_fp16_special(h1));
    if (!_mm_testz_si128(any, any)) {
        /* zero results (either sign) count nothing: only those pass */
        const __m256i zero = _mm256_setzero_si256();
        __m256i z0 = _mm256_cmpeq_epi32(_mm256_slli_epi32(_mm256_castps_si256(v0), 1), zero);
        __m256i z1 = _mm256_cmpeq_epi32(_mm256_slli_epi32(_mm256_castps_si256(v1), 1), zero);
        unsigned zeros = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(z0)) |
                         (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(z1)) << 8;
        unsigned special = (unsigned)_mm_movemask_epi8(
            _mm_packs_epi16(ld_fp16_special(h0), ld_fp16_special(h1)));
        if (special & ~zeros & 0xFFFFu)
            return true;
    }
    _mm256_storeu_ps(out, _mm256_cvtph_ps(h0));
    _mm256_storeu_ps(out + 8, _mm256_cvtph_ps(h1));
    if (bits) {
        _mm_storeu_si128((__m128i *)(void *)bits, h0);
        _mm_storeu_si128((__m128i *)(void *)(bits + 8), h1);
    }
    return false;
}

#endif

#endif
