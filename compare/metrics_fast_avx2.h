/* layerdiff — private to compare/metrics_fast_avx2*.c: the AVX2 kernel's
 * helpers shared by the pass (metrics_fast_avx2.c) and the exact recounts,
 * the kept pairs' errors and the similarity sums (metrics_fast_avx2_exact.c),
 * which must compute every error and key exactly as the pass does. */
#ifndef LAYERDIFF_COMPARE_METRICS_FAST_AVX2_H
#define LAYERDIFF_COMPARE_METRICS_FAST_AVX2_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#include "compare/metrics_internal.h"

#define TARGET __attribute__((target("avx2,fma,f16c,bmi,bmi2,popcnt")))
#define INLINE inline __attribute__((always_inline))

/* Key lane j of keys8 holds element KEY_ORDER[j] (vshufps works within
 * 128-bit halves): 0, 1, 4, 5, 2, 3, 6, 7 — swapping 2, 3 with 4, 5. */
static inline unsigned elem_order(unsigned key_mask)
{
    return (key_mask & 0xC3u) | ((key_mask >> 2) & 0x0Cu) | ((key_mask << 2) & 0x30u);
}

/* 1/ulp_p(r) = 2^(digits - 1 - max(e(r), emin)): the base minus the larger
 * exponent field, the fields compared as doubles (a power of two or 0). */
typedef struct ulp_consts {
    __m256d exp_field, emin;
    __m256i base;
} ulp_consts;

TARGET static INLINE ulp_consts ulp_setup(const cmp_params *p)
{
    ulp_consts u = {
        .exp_field = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7ff0000000000000ll)),
        .emin = _mm256_castsi256_pd(
            _mm256_set1_epi64x((int64_t)((uint64_t)(1023 + p->ulp_emin) << 52))),
        .base = _mm256_set1_epi64x((int64_t)((uint64_t)(2 * 1023 + p->ulp_digits - 1) << 52)),
    };
    return u;
}

TARGET static INLINE __m256d ulp_error(const ulp_consts *u, __m256d rd, __m256d a)
{
    __m256d e = _mm256_max_pd(_mm256_and_pd(rd, u->exp_field), u->emin);
    __m256i scale = _mm256_sub_epi64(u->base, _mm256_castpd_si256(e));
    return _mm256_mul_pd(a, _mm256_castsi256_pd(scale)); /* exact: a power of two */
}

TARGET static INLINE __m256d rel_error(__m256d a, __m256d ar)
{
    __m256d r_zero = _mm256_cmp_pd(ar, _mm256_setzero_pd(), _CMP_EQ_OQ);
    return _mm256_div_pd(a, _mm256_blendv_pd(ar, _mm256_set1_pd(LD_COMPARE_REL_EPSILON), r_zero));
}

TARGET static INLINE __m256d abs_pd(__m256d x)
{
    return _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
}

/* The keys of 8 errors (elements 0-3 in lo, 4-7 in hi), in KEY_ORDER. */
TARGET static INLINE __m256i keys8(__m256d lo, __m256d hi)
{
    return _mm256_castps_si256(
        _mm256_shuffle_ps(_mm256_castpd_ps(lo), _mm256_castpd_ps(hi), _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The narrow keys of a measure (qsel_key_of) before saturation. */
typedef struct narrow_map {
    __m256i bias;
    __m128i shift;
} narrow_map;

TARGET static INLINE narrow_map narrow_setup(const qsel *q)
{
    narrow_map m = {_mm256_set1_epi32(q->bias), _mm_cvtsi32_si128(q->shift)};
    return m;
}

TARGET static INLINE __m256i narrow_unclamped(const narrow_map *m, __m256i key)
{
    key = _mm256_sra_epi32(_mm256_sub_epi32(key, _mm256_set1_epi32(1)), m->shift);
    return _mm256_sub_epi32(key, m->bias);
}

TARGET static INLINE __m256i narrow32(const narrow_map *m, __m256i key)
{
    return _mm256_min_epi32(_mm256_max_epi32(narrow_unclamped(m, key),
                                             _mm256_set1_epi32(INT16_MIN)),
                            _mm256_set1_epi32(INT16_MAX));
}

TARGET static INLINE int64_t sum_epi32(__m256i v)
{
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(x);
}

/* 4 elements' errors: the pass's errors_step computes them as
 * expand_errors and find_first do (rel_error, ulp_error), with its
 * constants from memory (loop_consts). */
typedef struct err4 {
    __m256d diff, abs, rel, ulp;
} err4;

/* metrics_fast_avx2_exact.c: the cmp_fast_ops members other than the pass */
void cmp_avx2_count_specials(const cmp_params *p, const float *r, const float *t, int m16,
                             bool ref_side, bool test_side, cmp_acc *acc);
void cmp_avx2_count_failures(const cmp_params *p, const float *r, const float *t, int m16,
                             int64_t base, cmp_acc *acc);
int64_t cmp_avx2_find_first(const cmp_params *p, const float *r, const float *t, int m16, int k,
                            double x);
void cmp_avx2_expand_40(const cmp_params *p, const float *r, const float *t, int64_t n, qsel *q);
void cmp_avx2_expand_50(const cmp_params *p, const float *r, const float *t, int64_t n, qsel *q);
void cmp_avx2_expand_41(const cmp_params *p, const float *r, const float *t, int64_t n, qsel *q);
void cmp_avx2_expand_51(const cmp_params *p, const float *r, const float *t, int64_t n, qsel *q);

#endif
