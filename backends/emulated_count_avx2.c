/* layerdiff — the emulated backend's counted rounding in AVX2 + F16C (see
 * emulated_count.c, which picks these at run time, and
 * emulated_count_internal.h).
 *
 * Why: on an AVX2-only CPU (Zen 3) the engine used to round with the
 * library's AVX2 code and then count with a scalar loop over the values
 * before and after: that loop was 54% of an emulated --fp16 run of PaddleOCR
 * det. Here one pass rounds, stores, and tests each block of lanes for
 * anything worth counting; only the rare blocks that have something get the
 * full count, in vector counters.
 *
 * The values are the library's to the bit: fp16 uses the instructions and
 * rounding immediate of core/round_x86.c (vcvtps2ph with round to nearest
 * even from the immediate, vcvtph2ps), bf16 / tf32 the same integer formula
 * (ld_low_bits_rounder). The counters follow the definitions of
 * count_pair_portable in emulated_count.c, with integer compares only (no
 * float compare, so MXCSR.DAZ cannot change a count). tests/
 * exhaustive_emulation.c checks both on all 2^32 inputs. */
#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "backends/emulated_count_internal.h"
#include "backends/kernels/round_fp16_group.h"

#define AVX2 __attribute__((target("avx2,f16c")))

/* Per-lane 32-bit event counters; a lane counts at most n / 8 events, and a
 * call rounds far fewer than 2^32 values. */
typedef struct avx2_counters {
    __m256i ov, un, sub, inf, nan;
} avx2_counters;

AVX2 static inline avx2_counters counters_zero(void)
{
    __m256i z = _mm256_setzero_si256();
    return (avx2_counters){z, z, z, z, z};
}

AVX2 static inline int64_t hsum(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return (int64_t)(uint32_t)_mm_cvtsi128_si32(s);
}

AVX2 static inline void counters_add(const avx2_counters *c, ld_emu_tally *t)
{
    t->overflows += hsum(c->ov), t->underflows += hsum(c->un), t->subnormals += hsum(c->sub);
    t->src_infs += hsum(c->inf), t->src_nans += hsum(c->nan);
}

/* Counts 8 lanes: a = |source| bits, r = |result| bits, both <= 0x7FFFFFFF
 * so signed compares are unsigned ones. r_inf is the result's infinity and
 * r_min_normal its smallest normal, in r's encoding (fp16 bits or fp32 bits).
 * A lane mask is -1, so subtracting it counts. */
AVX2 static inline void count8(__m256i a, __m256i r, __m256i r_inf, __m256i r_min_normal,
                               avx2_counters *c)
{
    const __m256i f32_inf = _mm256_set1_epi32(0x7F800000), zero = _mm256_setzero_si256();
    __m256i ov = _mm256_and_si256(_mm256_cmpeq_epi32(r, r_inf), _mm256_cmpgt_epi32(f32_inf, a));
    __m256i un = _mm256_andnot_si256(_mm256_cmpeq_epi32(a, zero), _mm256_cmpeq_epi32(r, zero));
    __m256i sub = _mm256_and_si256(_mm256_cmpgt_epi32(r, zero), _mm256_cmpgt_epi32(r_min_normal, r));
    c->ov = _mm256_sub_epi32(c->ov, ov);
    c->un = _mm256_sub_epi32(c->un, un);
    c->sub = _mm256_sub_epi32(c->sub, sub);
    c->inf = _mm256_sub_epi32(c->inf, _mm256_cmpeq_epi32(a, f32_inf));
    c->nan = _mm256_sub_epi32(c->nan, _mm256_cmpgt_epi32(a, f32_inf));
}

/* --- counting a rounding done elsewhere ------------------------------------------------ */

AVX2 static inline void count_pair8(const float *src, const float *after, __m256i min_normal,
                                    avx2_counters *c)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i f32_inf = _mm256_set1_epi32(0x7F800000), below_inf = _mm256_set1_epi32(0x7F7FFFFF);
    __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)src), abs_mask);
    __m256i r = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)after), abs_mask);
    /* Lanes that may count: a result below the smallest normal (zero
     * included) or not finite, or a source not finite; lanes that are zero
     * before and after count nothing. Most blocks have none. */
    __m256i special = _mm256_or_si256(
        _mm256_or_si256(_mm256_cmpgt_epi32(min_normal, r), _mm256_cmpgt_epi32(r, below_inf)),
        _mm256_cmpgt_epi32(a, below_inf));
    special = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_or_si256(a, r), _mm256_setzero_si256()),
                                  special);
    if (!_mm256_testz_si256(special, special))
        count8(a, r, f32_inf, min_normal, c);
}

AVX2 void ld_emu_avx2_count_pair(const float *src, const float *after, int64_t m,
                                 uint32_t min_normal, ld_emu_tally *t)
{
    const __m256i lim = _mm256_set1_epi32((int)min_normal);
    avx2_counters c = counters_zero();
    int64_t i = 0;
    for (; i + 8 <= m; i += 8)
        count_pair8(src + i, after + i, lim, &c);
    if (i < m) { /* zero padding counts nothing */
        float a[8] = {0}, r[8] = {0};
        memcpy(a, src + i, (size_t)(m - i) * sizeof *a);
        memcpy(r, after + i, (size_t)(m - i) * sizeof *r);
        count_pair8(a, r, lim, &c);
    }
    counters_add(&c, t);
}

/* --- fp16: round trip through vcvtps2ph / vcvtph2ps, counted ------------------------------ */

AVX2 static inline void count8_fp16(__m256 v, __m128i h, avx2_counters *c)
{
    __m256i a = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF));
    __m256i r = _mm256_and_si256(_mm256_cvtepu16_epi32(h), _mm256_set1_epi32(0x7FFF));
    count8(a, r, _mm256_set1_epi32(0x7C00), _mm256_set1_epi32(0x0400), c);
}

/* 16 values: rounded into dst, their fp16 bits into half (when not NULL),
 * counted when a lane holds anything countable. A zero result from a zero
 * source (ReLU outputs are full of them) counts nothing, so those lanes are
 * dropped before the full count. */
AVX2 static inline void fp16_block16(const float *src, float *dst, ld_fp16 *half,
                                     avx2_counters *c)
{
    __m256 v0 = _mm256_loadu_ps(src), v1 = _mm256_loadu_ps(src + 8);
    __m128i h0 = _mm256_cvtps_ph(v0, _MM_FROUND_TO_NEAREST_INT);
    __m128i h1 = _mm256_cvtps_ph(v1, _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(dst, _mm256_cvtph_ps(h0));
    _mm256_storeu_ps(dst + 8, _mm256_cvtph_ps(h1));
    if (half) {
        _mm_storeu_si128((__m128i *)(void *)half, h0);
        _mm_storeu_si128((__m128i *)(void *)(half + 8), h1);
    }
    __m128i s0 = ld_fp16_special(h0), s1 = ld_fp16_special(h1);
    __m128i any = _mm_or_si128(s0, s1);
    if (_mm_testz_si128(any, any))
        return;
    /* 1 bit per lane, lanes 0-15 in order */
    unsigned special = (unsigned)_mm_movemask_epi8(_mm_packs_epi16(s0, s1));
    const __m256i zero = _mm256_setzero_si256();
    __m256i z0 = _mm256_cmpeq_epi32(_mm256_slli_epi32(_mm256_castps_si256(v0), 1), zero);
    __m256i z1 = _mm256_cmpeq_epi32(_mm256_slli_epi32(_mm256_castps_si256(v1), 1), zero);
    unsigned zeros = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(z0)) |
                     (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(z1)) << 8;
    special &= ~zeros;
    if (special & 0x00FFu)
        count8_fp16(v0, h0, c);
    if (special & 0xFF00u)
        count8_fp16(v1, h1, c);
}

AVX2 void ld_emu_avx2_round_fp16(const float *src, float *dst, ld_fp16 *half, int64_t m,
                                 ld_emu_tally *t)
{
    avx2_counters c = counters_zero();
    int64_t i = 0;
    for (; i + 16 <= m; i += 16)
        fp16_block16(src + i, dst + i, half ? half + i : NULL, &c);
    if (i < m) { /* zero padding rounds to zero and counts nothing */
        float in[16] = {0}, out[16];
        ld_fp16 bits[16];
        size_t k = (size_t)(m - i);
        memcpy(in, src + i, k * sizeof *in);
        fp16_block16(in, out, bits, &c);
        memcpy(dst + i, out, k * sizeof *out);
        if (half)
            memcpy(half + i, bits, k * sizeof *bits);
    }
    counters_add(&c, t);
}

/* --- bf16 and tf32: rounding away low mantissa bits, counted ------------------------------ */

typedef struct avx2_low_bits {
    __m128i drop_bits;
    __m256i add, add_lsb, keep_mask, flush;
} avx2_low_bits;

/* The library's ld_low_bits_rounder formula (core/round_x86.c), with its
 * flush_denormals on the input: subnormal fp32 inputs become a zero of
 * their sign first. */
AVX2 static inline __m256i round_low_bits8(__m256i u, const avx2_low_bits *r)
{
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u), exp = _mm256_set1_epi32(0x7F800000);
    __m256i small = _mm256_and_si256(
        _mm256_cmpeq_epi32(_mm256_and_si256(u, exp), _mm256_setzero_si256()), r->flush);
    u = _mm256_andnot_si256(_mm256_andnot_si256(sign, small), u);
    __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
    __m256i is_nan = _mm256_cmpgt_epi32(abs, exp);
    __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(u, r->drop_bits), r->add_lsb);
    __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, r->add), lsb);
    __m256i quieted = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
    return _mm256_and_si256(_mm256_blendv_epi8(rounded, quieted, is_nan), r->keep_mask);
}

/* 8 values rounded into dst and counted. Result lanes worth a look: zero or
 * subnormal (below 2^-126) or not finite. With s = result << 1 (sign
 * dropped), normal results are s in [0x01000000, 0xFEFFFFFE]; s + 0x7F000000
 * maps them to the signed range [INT_MIN, 0x7DFFFFFE] and the others above
 * it. Zero sources (whose result is zero) are dropped before the count. */
AVX2 static inline void low_bits_block8(const float *src, float *dst, const avx2_low_bits *r,
                                        avx2_counters *c)
{
    __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)src);
    __m256i res = round_low_bits8(u, r);
    _mm256_storeu_si256((__m256i *)(void *)dst, res);
    __m256i s = _mm256_add_epi32(_mm256_slli_epi32(res, 1), _mm256_set1_epi32(0x7F000000));
    __m256i special = _mm256_cmpgt_epi32(s, _mm256_set1_epi32(0x7DFFFFFF));
    if (_mm256_testz_si256(special, special))
        return;
    __m256i src_zero = _mm256_cmpeq_epi32(_mm256_slli_epi32(u, 1), _mm256_setzero_si256());
    if (_mm256_testc_si256(src_zero, special)) /* every special lane is a zero source */
        return;
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    count8(_mm256_and_si256(u, abs_mask), _mm256_and_si256(res, abs_mask),
           _mm256_set1_epi32(0x7F800000), _mm256_set1_epi32(0x00800000), c);
}

AVX2 void ld_emu_avx2_round_low_bits(const float *src, float *dst, int64_t m,
                                     ld_low_bits_rounder rounder, bool flush, ld_emu_tally *t)
{
    avx2_low_bits r = {_mm_cvtsi32_si128((int)rounder.drop_bits),
                       _mm256_set1_epi32((int)rounder.add), _mm256_set1_epi32((int)rounder.add_lsb),
                       _mm256_set1_epi32((int)rounder.keep_mask), _mm256_set1_epi32(flush ? -1 : 0)};
    avx2_counters c = counters_zero();
    int64_t i = 0;
    for (; i + 8 <= m; i += 8)
        low_bits_block8(src + i, dst + i, &r, &c);
    if (i < m) { /* zero padding rounds to zero and counts nothing */
        float in[8] = {0}, out[8];
        size_t k = (size_t)(m - i);
        memcpy(in, src + i, k * sizeof *in);
        low_bits_block8(in, out, &r, &c);
        memcpy(dst + i, out, k * sizeof *out);
    }
    counters_add(&c, t);
}

#else
/* Not x86-64: emulated_count.c runs the portable code only. ISO C wants a declaration. */
typedef int ld_emu_count_avx2_unused;
#endif
