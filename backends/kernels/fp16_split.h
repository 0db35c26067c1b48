/* layerdiff — float16 rounding in float32 registers without conversions,
 * for kernels that round their output to float16 themselves under
 * ld_kernel_ctx.round_fp16_inline (include/layerdiff/kernel.h): the direct
 * convolution's tile stores (conv_direct_body.h). Private to backends/.
 *
 * Veltkamp's split: with p = v * (2^13 + 1), hi = p - (p - v) is v rounded
 * to its 11 leading significand bits, to nearest even: for every float32 v
 * with 2^-14 <= |v| < 65520 and for +-0 it is exactly what vcvtps2ph
 * (nearest even) then vcvtph2ps give, sign of zero included
 * (tests/test_conv_fast.c checks every such v against F16C). Outside that
 * range (float16 subnormals, overflow to infinity, NaN) it differs, so a
 * kernel uses it only on vectors that ..._plain says are inside. Three
 * floating-point operations instead of two conversions, and no F16C needed
 * in kernels compiled for AVX2 + FMA or AVX-512F. Needs -ffp-contract=off
 * (every file of the project is built so): a fused p - (p - v) is v. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_FP16_SPLIT_H
#define LAYERDIFF_BACKENDS_KERNELS_FP16_SPLIT_H

#include <stdbool.h>

#if defined(__x86_64__)

#include <immintrin.h>

/* |bits| thresholds: float16's smallest normal 2^-14, and 65520, from
 * which float16 rounding overflows. A lane is "plain" when its magnitude
 * bits a are 0 or in [LD_FP16_SPLIT_LO, LD_FP16_SPLIT_HI): then a - 1,
 * unsigned, is at least LD_FP16_SPLIT_LO - 1 (0 wraps to the top). */
#define LD_FP16_SPLIT_LO 0x38800000
#define LD_FP16_SPLIT_HI 0x477FF000

__attribute__((target("avx2"))) static inline __m256 ld_fp16_split8(__m256 v)
{
    __m256 p = _mm256_mul_ps(v, _mm256_set1_ps(8193.0f));
    return _mm256_sub_ps(p, _mm256_sub_ps(p, v));
}

/* Every lane of v zero or of magnitude in [2^-14, 65520) (NaN and
 * infinities are not). */
__attribute__((target("avx2"))) static inline bool ld_fp16_plain8(__m256 v)
{
    __m256i a = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF));
    __m256i u = _mm256_sub_epi32(a, _mm256_set1_epi32(1));
    __m256i lo = _mm256_set1_epi32(LD_FP16_SPLIT_LO - 1);
    /* u >= lo unsigned: max(u, lo) == u */
    __m256i lo_ok = _mm256_cmpeq_epi32(_mm256_max_epu32(u, lo), u);
    __m256i hi_ok = _mm256_cmpgt_epi32(_mm256_set1_epi32(LD_FP16_SPLIT_HI), a);
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(lo_ok, hi_ok))) == 0xFF;
}

/* ld_fp16_plain8(v0) && ld_fp16_plain8(v1), with one test. */
__attribute__((target("avx2"))) static inline bool ld_fp16_plain8x2(__m256 v0, __m256 v1)
{
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1);
    __m256i a0 = _mm256_and_si256(_mm256_castps_si256(v0), magnitude);
    __m256i a1 = _mm256_and_si256(_mm256_castps_si256(v1), magnitude);
    __m256i u = _mm256_min_epu32(_mm256_sub_epi32(a0, one), _mm256_sub_epi32(a1, one));
    __m256i lo = _mm256_set1_epi32(LD_FP16_SPLIT_LO - 1);
    __m256i lo_ok = _mm256_cmpeq_epi32(_mm256_max_epu32(u, lo), u);
    __m256i hi_ok =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(LD_FP16_SPLIT_HI), _mm256_max_epi32(a0, a1));
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(lo_ok, hi_ok))) == 0xFF;
}

__attribute__((target("avx512f"))) static inline __m512 ld_fp16_split16(__m512 v)
{
    __m512 p = _mm512_mul_ps(v, _mm512_set1_ps(8193.0f));
    return _mm512_sub_ps(p, _mm512_sub_ps(p, v));
}

__attribute__((target("avx512f"))) static inline bool ld_fp16_plain16(__m512 v)
{
    __m512i a = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7FFFFFFF));
    __m512i u = _mm512_sub_epi32(a, _mm512_set1_epi32(1));
    __mmask16 ok = _mm512_cmp_epu32_mask(u, _mm512_set1_epi32(LD_FP16_SPLIT_LO - 1), _MM_CMPINT_NLT) &
                   _mm512_cmp_epi32_mask(a, _mm512_set1_epi32(LD_FP16_SPLIT_HI), _MM_CMPINT_LT);
    return ok == 0xFFFF;
}

#endif

#endif
