/* layerdiff — x86 vector versions of the array conversions and rounding.
 *
 * Two instruction sets, picked at run time by core/round.c:
 *  - AVX2 + F16C, 8 lanes; a tail shorter than a vector goes through a
 *    zero-padded stack buffer, so it gets the vector code too;
 *  - AVX-512 F + BW + VL, 16 lanes; tails use masked loads and stores.
 * Each function gives the same bits as the portable code in round.c on every
 * input (tests/exhaustive_round.c checks all 2^32 fp32 inputs):
 *  - fp16 uses the hardware conversions vcvtps2ph / vcvtph2ps with the
 *    rounding mode in the immediate (round to nearest even), so MXCSR.RC is
 *    not used; vcvtps2ph ignores MXCSR.FTZ and vcvtph2ps ignores MXCSR.DAZ,
 *    and DAZ on vcvtps2ph's input cannot matter (an fp32 subnormal rounds to
 *    an fp16 zero of the same sign either way). F16C's NaN handling is what
 *    the portable code copies.
 *  - bf16 and tf32 use integer arithmetic on the bit patterns (see
 *    ld_low_bits_rounder), not vcvtneps2bf16, which flushes subnormal
 *    inputs to zero whatever flush_denormals says.
 * So nothing here depends on MXCSR either. */
#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "core/round_internal.h"

#define LD_TARGET_AVX2   __attribute__((target("avx2,f16c")))
#define LD_TARGET_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl")))

/* Round to nearest even, from the immediate: bit 2 clear means "do not use MXCSR.RC". */
#define LD_CVTPS2PH_RNE _MM_FROUND_TO_NEAREST_INT

#define AVX2_LANES 8
#define AVX512_LANES 16

/* ============================== AVX2 + F16C ============================== */

/* The rounder's constants as vectors, made once per call. */
typedef struct avx2_rounder {
    __m128i drop_bits;
    __m256i add, add_lsb, keep_mask;
} avx2_rounder;

LD_TARGET_AVX2 static inline avx2_rounder avx2_rounder_make(ld_low_bits_rounder r)
{
    avx2_rounder v;
    v.drop_bits = _mm_cvtsi32_si128((int)r.drop_bits);
    v.add = _mm256_set1_epi32((int)r.add);
    v.add_lsb = _mm256_set1_epi32((int)r.add_lsb);
    v.keep_mask = _mm256_set1_epi32((int)r.keep_mask);
    return v;
}

/* All-ones lanes when flush is on, else zero: ANDed into the "is subnormal"
 * test so the loops need no branch. */
LD_TARGET_AVX2 static inline __m256i avx2_flag(bool on)
{
    return _mm256_set1_epi32(on ? -1 : 0);
}

/* fp32 subnormals (exponent field 0) become a zero of their sign where enabled. */
LD_TARGET_AVX2 static inline __m256i avx2_flush_subnormal(__m256i u, __m256i enabled)
{
    __m256i exponent = _mm256_and_si256(u, _mm256_set1_epi32((int)LD_F32_EXPONENT));
    __m256i small = _mm256_and_si256(_mm256_cmpeq_epi32(exponent, _mm256_setzero_si256()), enabled);
    return _mm256_andnot_si256(_mm256_andnot_si256(_mm256_set1_epi32((int)LD_F32_SIGN), small), u);
}

LD_TARGET_AVX2 static inline __m256i avx2_round_low_bits(__m256i u, avx2_rounder r)
{
    /* abs <= 0x7FFFFFFF, so the signed compare is the unsigned one. */
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32((int)LD_F32_ABS));
    __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32((int)LD_F32_EXPONENT));
    __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(u, r.drop_bits), r.add_lsb);
    __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, r.add), lsb);
    __m256i quieted = _mm256_or_si256(u, _mm256_set1_epi32((int)LD_F32_QUIET));
    return _mm256_and_si256(_mm256_blendv_epi8(rounded, quieted, is_nan), r.keep_mask);
}

/* fp16 subnormal results (exponent field 0) become a zero of their sign where enabled. */
LD_TARGET_AVX2 static inline __m128i avx2_flush_fp16(__m128i h, __m128i enabled)
{
    __m128i exponent = _mm_and_si128(h, _mm_set1_epi16((short)LD_F16_EXPONENT));
    __m128i small = _mm_and_si128(_mm_cmpeq_epi16(exponent, _mm_setzero_si128()), enabled);
    return _mm_andnot_si128(_mm_andnot_si128(_mm_set1_epi16((short)LD_F16_SIGN), small), h);
}

/* One vector of each kernel; the drivers below run them over an array. */

LD_TARGET_AVX2 static inline void avx2_fp32_to_fp16_block(const float *src, ld_fp16 *dst)
{
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src), LD_CVTPS2PH_RNE);
    _mm_storeu_si128((__m128i *)(void *)dst, h);
}

LD_TARGET_AVX2 static inline void avx2_fp16_to_fp32_block(const ld_fp16 *src, float *dst)
{
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)src);
    _mm256_storeu_ps(dst, _mm256_cvtph_ps(h));
}

LD_TARGET_AVX2 static inline void avx2_fp32_to_bf16_block(const float *src, ld_bf16 *dst,
                                                          avx2_rounder rne)
{
    __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)src);
    __m256i b = _mm256_srli_epi32(avx2_round_low_bits(u, rne), 16);
    /* Lanes hold 0..0xFFFF, so the unsigned saturating pack just narrows. */
    __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    _mm_storeu_si128((__m128i *)(void *)dst, packed);
}

LD_TARGET_AVX2 static inline void avx2_bf16_to_fp32_block(const ld_bf16 *src, float *dst)
{
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)src);
    __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32((int)LD_F32_ABS));
    __m256i is_nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32((int)LD_F32_EXPONENT));
    u = _mm256_or_si256(u, _mm256_and_si256(is_nan, _mm256_set1_epi32((int)LD_F32_QUIET)));
    _mm256_storeu_si256((__m256i *)(void *)dst, u);
}

LD_TARGET_AVX2 static inline void avx2_round_fp16_block(float *data, __m128i flush)
{
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(data), LD_CVTPS2PH_RNE);
    _mm256_storeu_ps(data, _mm256_cvtph_ps(avx2_flush_fp16(h, flush)));
}

LD_TARGET_AVX2 static inline void avx2_round_low_bits_block(float *data, avx2_rounder r,
                                                            __m256i flush)
{
    __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)data);
    u = avx2_round_low_bits(avx2_flush_subnormal(u, flush), r);
    _mm256_storeu_si256((__m256i *)(void *)data, u);
}

LD_TARGET_AVX2 static inline void avx2_flush_fp32_block(float *data, __m256i flush)
{
    __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)data);
    _mm256_storeu_si256((__m256i *)(void *)data, avx2_flush_subnormal(u, flush));
}

LD_TARGET_AVX2 void ld_x86_avx2_fp32_to_fp16(const float *src, ld_fp16 *dst, size_t n)
{
    size_t i = 0;
    for (; i + AVX2_LANES <= n; i += AVX2_LANES)
        avx2_fp32_to_fp16_block(src + i, dst + i);
    if (i < n) {
        float in[AVX2_LANES] = {0};
        ld_fp16 out[AVX2_LANES];
        memcpy(in, src + i, (n - i) * sizeof *src);
        avx2_fp32_to_fp16_block(in, out);
        memcpy(dst + i, out, (n - i) * sizeof *dst);
    }
}

LD_TARGET_AVX2 void ld_x86_avx2_fp16_to_fp32(const ld_fp16 *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + AVX2_LANES <= n; i += AVX2_LANES)
        avx2_fp16_to_fp32_block(src + i, dst + i);
    if (i < n) {
        ld_fp16 in[AVX2_LANES] = {{0}};
        float out[AVX2_LANES];
        memcpy(in, src + i, (n - i) * sizeof *src);
        avx2_fp16_to_fp32_block(in, out);
        memcpy(dst + i, out, (n - i) * sizeof *dst);
    }
}

LD_TARGET_AVX2 void ld_x86_avx2_fp32_to_bf16(const float *src, ld_bf16 *dst, size_t n)
{
    avx2_rounder rne = avx2_rounder_make(ld_low_bits_rounder_make(16, LD_ROUND_NEAREST_EVEN));
    size_t i = 0;
    for (; i + AVX2_LANES <= n; i += AVX2_LANES)
        avx2_fp32_to_bf16_block(src + i, dst + i, rne);
    if (i < n) {
        float in[AVX2_LANES] = {0};
        ld_bf16 out[AVX2_LANES];
        memcpy(in, src + i, (n - i) * sizeof *src);
        avx2_fp32_to_bf16_block(in, out, rne);
        memcpy(dst + i, out, (n - i) * sizeof *dst);
    }
}

LD_TARGET_AVX2 void ld_x86_avx2_bf16_to_fp32(const ld_bf16 *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + AVX2_LANES <= n; i += AVX2_LANES)
        avx2_bf16_to_fp32_block(src + i, dst + i);
    if (i < n) {
        ld_bf16 in[AVX2_LANES] = {{0}};
        float out[AVX2_LANES];
        memcpy(in, src + i, (n - i) * sizeof *src);
        avx2_bf16_to_fp32_block(in, out);
        memcpy(dst + i, out, (n - i) * sizeof *dst);
    }
}

LD_TARGET_AVX2 void ld_x86_avx2_round_fp16(float *data, size_t n, bool flush_outputs)
{
    __m128i flush = _mm_set1_epi16(flush_outputs ? -1 : 0);
    size_t i = 0;
    for (; i + AVX2_LANES <= n; i += AVX2_LANES)
        avx2_round_fp16_block(data + i, flush);
    if (i < n) {
        float tail[AVX2_LANES] = {0};
        memcpy(tail, data + i, (n - i) * sizeof *data);
        avx2_round_fp16_block(tail, flush);
        memcpy(data + i, tail, (n - i) * sizeof *data);
    }
}

LD_TARGET_AVX2 void ld_x86_avx2_round_low_bits(float *data, size_t n, ld_low_bits_rounder r,
                                               bool flush_inputs)
{
    avx2_rounder v = avx2_rounder_make(r);
    __m256i flush = avx2_flag(flush_inputs);
    size_t i = 0;
    for (; i + AVX2_LANES <= n; i += AVX2_LANES)
        avx2_round_low_bits_block(data + i, v, flush);
    if (i < n) {
        float tail[AVX2_LANES] = {0};
        memcpy(tail, data + i, (n - i) * sizeof *data);
        avx2_round_low_bits_block(tail, v, flush);
        memcpy(data + i, tail, (n - i) * sizeof *data);
    }
}

LD_TARGET_AVX2 void ld_x86_avx2_flush_fp32(float *data, size_t n)
{
    __m256i flush = avx2_flag(true);
    size_t i = 0;
    for (; i + AVX2_LANES <= n; i += AVX2_LANES)
        avx2_flush_fp32_block(data + i, flush);
    if (i < n) {
        float tail[AVX2_LANES] = {0};
        memcpy(tail, data + i, (n - i) * sizeof *data);
        avx2_flush_fp32_block(tail, flush);
        memcpy(data + i, tail, (n - i) * sizeof *data);
    }
}

/* ============================== AVX-512 ============================== */

typedef struct avx512_rounder {
    __m128i drop_bits;
    __m512i add, add_lsb, keep_mask;
} avx512_rounder;

LD_TARGET_AVX512 static inline avx512_rounder avx512_rounder_make(ld_low_bits_rounder r)
{
    avx512_rounder v;
    v.drop_bits = _mm_cvtsi32_si128((int)r.drop_bits);
    v.add = _mm512_set1_epi32((int)r.add);
    v.add_lsb = _mm512_set1_epi32((int)r.add_lsb);
    v.keep_mask = _mm512_set1_epi32((int)r.keep_mask);
    return v;
}

/* Lanes of the first `count` (< 16) elements: for tails. */
static inline __mmask16 avx512_tail_mask(size_t count)
{
    return (__mmask16)((1u << count) - 1u);
}

/* enabled: all ones when flush is on, else 0. */
LD_TARGET_AVX512 static inline __m512i avx512_flush_subnormal(__m512i u, __mmask16 enabled)
{
    __mmask16 small = _mm512_testn_epi32_mask(u, _mm512_set1_epi32((int)LD_F32_EXPONENT)) & enabled;
    return _mm512_mask_and_epi32(u, small, u, _mm512_set1_epi32((int)LD_F32_SIGN));
}

LD_TARGET_AVX512 static inline __m512i avx512_round_low_bits(__m512i u, avx512_rounder r)
{
    __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32((int)LD_F32_ABS));
    __mmask16 is_nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32((int)LD_F32_EXPONENT));
    __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(u, r.drop_bits), r.add_lsb);
    __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, r.add), lsb);
    rounded = _mm512_mask_or_epi32(rounded, is_nan, u, _mm512_set1_epi32((int)LD_F32_QUIET));
    return _mm512_and_si512(rounded, r.keep_mask);
}

LD_TARGET_AVX512 static inline __m256i avx512_fp32_to_fp16(__m512 x)
{
    return _mm512_cvtps_ph(x, LD_CVTPS2PH_RNE);
}

LD_TARGET_AVX512 static inline __m512i avx512_bf16_to_fp32(__m256i b)
{
    __m512i u = _mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16);
    __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32((int)LD_F32_ABS));
    __mmask16 is_nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32((int)LD_F32_EXPONENT));
    return _mm512_mask_or_epi32(u, is_nan, u, _mm512_set1_epi32((int)LD_F32_QUIET));
}

LD_TARGET_AVX512 static inline __m256i avx512_fp32_to_bf16(__m512i u, avx512_rounder rne)
{
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(avx512_round_low_bits(u, rne), 16));
}

LD_TARGET_AVX512 static inline __m512 avx512_round_fp16(__m512 x, __mmask16 flush)
{
    __m256i h = avx512_fp32_to_fp16(x);
    __mmask16 small = _mm256_testn_epi16_mask(h, _mm256_set1_epi16((short)LD_F16_EXPONENT)) & flush;
    h = _mm256_mask_mov_epi16(h, small, _mm256_and_si256(h, _mm256_set1_epi16((short)LD_F16_SIGN)));
    return _mm512_cvtph_ps(h);
}

LD_TARGET_AVX512 void ld_x86_avx512_fp32_to_fp16(const float *src, ld_fp16 *dst, size_t n)
{
    size_t i = 0;
    for (; i + AVX512_LANES <= n; i += AVX512_LANES)
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), avx512_fp32_to_fp16(_mm512_loadu_ps(src + i)));
    if (i < n) {
        __mmask16 k = avx512_tail_mask(n - i);
        __m256i h = avx512_fp32_to_fp16(_mm512_maskz_loadu_ps(k, src + i));
        _mm256_mask_storeu_epi16(dst + i, k, h);
    }
}

LD_TARGET_AVX512 void ld_x86_avx512_fp16_to_fp32(const ld_fp16 *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + AVX512_LANES <= n; i += AVX512_LANES) {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
    }
    if (i < n) {
        __mmask16 k = avx512_tail_mask(n - i);
        _mm512_mask_storeu_ps(dst + i, k, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, src + i)));
    }
}

LD_TARGET_AVX512 void ld_x86_avx512_fp32_to_bf16(const float *src, ld_bf16 *dst, size_t n)
{
    avx512_rounder rne = avx512_rounder_make(ld_low_bits_rounder_make(16, LD_ROUND_NEAREST_EVEN));
    size_t i = 0;
    for (; i + AVX512_LANES <= n; i += AVX512_LANES) {
        __m256i b = avx512_fp32_to_bf16(_mm512_loadu_si512(src + i), rne);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), b);
    }
    if (i < n) {
        __mmask16 k = avx512_tail_mask(n - i);
        __m256i b = avx512_fp32_to_bf16(_mm512_maskz_loadu_epi32(k, src + i), rne);
        _mm256_mask_storeu_epi16(dst + i, k, b);
    }
}

LD_TARGET_AVX512 void ld_x86_avx512_bf16_to_fp32(const ld_bf16 *src, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + AVX512_LANES <= n; i += AVX512_LANES) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(src + i));
        _mm512_storeu_si512(dst + i, avx512_bf16_to_fp32(b));
    }
    if (i < n) {
        __mmask16 k = avx512_tail_mask(n - i);
        _mm512_mask_storeu_epi32(dst + i, k, avx512_bf16_to_fp32(_mm256_maskz_loadu_epi16(k, src + i)));
    }
}

LD_TARGET_AVX512 void ld_x86_avx512_round_fp16(float *data, size_t n, bool flush_outputs)
{
    __mmask16 flush = flush_outputs ? (__mmask16)0xFFFF : (__mmask16)0;
    size_t i = 0;
    for (; i + AVX512_LANES <= n; i += AVX512_LANES)
        _mm512_storeu_ps(data + i, avx512_round_fp16(_mm512_loadu_ps(data + i), flush));
    if (i < n) {
        __mmask16 k = avx512_tail_mask(n - i);
        _mm512_mask_storeu_ps(data + i, k, avx512_round_fp16(_mm512_maskz_loadu_ps(k, data + i), flush));
    }
}

LD_TARGET_AVX512 void ld_x86_avx512_round_low_bits(float *data, size_t n, ld_low_bits_rounder r,
                                                   bool flush_inputs)
{
    avx512_rounder v = avx512_rounder_make(r);
    __mmask16 flush = flush_inputs ? (__mmask16)0xFFFF : (__mmask16)0;
    size_t i = 0;
    for (; i + AVX512_LANES <= n; i += AVX512_LANES) {
        __m512i u = avx512_flush_subnormal(_mm512_loadu_si512(data + i), flush);
        _mm512_storeu_si512(data + i, avx512_round_low_bits(u, v));
    }
    if (i < n) {
        __mmask16 k = avx512_tail_mask(n - i);
        __m512i u = avx512_flush_subnormal(_mm512_maskz_loadu_epi32(k, data + i), flush);
        _mm512_mask_storeu_epi32(data + i, k, avx512_round_low_bits(u, v));
    }
}

LD_TARGET_AVX512 void ld_x86_avx512_flush_fp32(float *data, size_t n)
{
    size_t i = 0;
    for (; i + AVX512_LANES <= n; i += AVX512_LANES)
        _mm512_storeu_si512(data + i, avx512_flush_subnormal(_mm512_loadu_si512(data + i), 0xFFFF));
    if (i < n) {
        __mmask16 k = avx512_tail_mask(n - i);
        __m512i u = avx512_flush_subnormal(_mm512_maskz_loadu_epi32(k, data + i), 0xFFFF);
        _mm512_mask_storeu_epi32(data + i, k, u);
    }
}

#else
/* Not x86-64: round.c runs the portable code only. ISO C wants a declaration. */
typedef int ld_round_x86_unused;
#endif
