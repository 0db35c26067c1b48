/* layerdiff — the AVX2 passes of the exact selection (quantile.c): the
 * bracketing passes of Floyd and Rivest's selection and the count of sample
 * keys inside the intervals, as quantile.c's AVX-512 ones, 4 doubles (or 8
 * keys) at a time. AVX2 has no compress: the kept doubles are gathered to
 * the front by vpermps with indices looked up by the lane mask (pack4). */
#include <immintrin.h>
#include <string.h>

#include "compare/metrics_internal.h"

#define SEL_TARGET2 __attribute__((target("avx2,popcnt")))


/* pack4[m]: the byte indices of the float lanes (2 per double) of the
 * doubles that the 4-bit mask m selects, in order: vpermps gathers them to
 * the front (one load of the indices instead of a chain of pdep and pext). */
static const uint64_t pack4[16] = {
    0x0000000000000000ull, 0x0000000000000100ull, 0x0000000000000302ull, 0x0000000003020100ull,
    0x0000000000000504ull, 0x0000000005040100ull, 0x0000000005040302ull, 0x0000050403020100ull,
    0x0000000000000706ull, 0x0000000007060100ull, 0x0000000007060302ull, 0x0000070603020100ull,
    0x0000000007060504ull, 0x0000070605040100ull, 0x0000070605040302ull, 0x0706050403020100ull,
};

/* Stores the lanes of x that mask (4 bits) selects, in order, at d (room
 * for 4); returns how many. */
SEL_TARGET2 static inline __attribute__((always_inline)) int64_t compress4(double *d,
                                                                            unsigned mask,
                                                                            __m256d x)
{
    __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)&pack4[mask]));
    _mm256_storeu_ps((float *)d, _mm256_permutevar8x32_ps(_mm256_castpd_ps(x), idx));
    return __builtin_popcount(mask);
}

SEL_TARGET2 int64_t qsel_bracket_pass_avx2(const double *src, int64_t len, double lo, double hi,
                                           double *dst, int64_t *below)
{
    const __m256d vlo = _mm256_set1_pd(lo), vhi = _mm256_set1_pd(hi);
    int64_t under = 0, len4 = len & ~(int64_t)3;
    double *d = dst;
    for (int64_t i = 0; i < len4; i += 4) {
        __m256d x = _mm256_loadu_pd(src + i);
        unsigned lt = (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(x, vlo, _CMP_LT_OQ));
        unsigned in = (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(x, vhi, _CMP_LE_OQ)) & ~lt;
        under += __builtin_popcount(lt);
        d += compress4(d, in, x);
    }
    for (int64_t i = len4; i < len; i++) {
        double x = src[i];
        under += x < lo;
        if (x >= lo && x <= hi)
            *d++ = x;
    }
    *below = under;
    return d - dst;
}

SEL_TARGET2 int64_t qsel_count_in_avx2(const double *v, int64_t len, double lo, double hi,
                                       int64_t *below)
{
    const __m256d vlo = _mm256_set1_pd(lo), vhi = _mm256_set1_pd(hi);
    int64_t under = 0, in = 0, len4 = len & ~(int64_t)3;
    for (int64_t i = 0; i < len4; i += 4) {
        __m256d x = _mm256_loadu_pd(v + i);
        unsigned lt = (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(x, vlo, _CMP_LT_OQ));
        under += __builtin_popcount(lt);
        in += __builtin_popcount((unsigned)_mm256_movemask_pd(_mm256_cmp_pd(x, vhi, _CMP_LE_OQ)) &
                                 ~lt);
    }
    for (int64_t i = len4; i < len; i++) {
        under += v[i] < lo;
        in += v[i] >= lo && v[i] <= hi;
    }
    *below = under;
    return in;
}

/* bracket_all with AVX2: 4 lanes, the same chunks and room checks. */
SEL_TARGET2 static inline __attribute__((always_inline)) void
bracket_all2(const double *v, int64_t m, const int k, const double *lo_v, const double *hi_v,
             int64_t *below, double **dst, double *const *end, bool *full)
{
    __m256d lo[QSEL_MAX_RANKS], hi[QSEL_MAX_RANKS];
    double *d[QSEL_MAX_RANKS];
    int64_t under[QSEL_MAX_RANKS];
    for (int t = 0; t < k; t++) {
        lo[t] = _mm256_set1_pd(lo_v[t]);
        hi[t] = _mm256_set1_pd(hi_v[t]);
        d[t] = dst[t];
        under[t] = 0;
    }
    for (int64_t c = 0; c < m; c += QSEL_CHUNK) {
        int64_t stop = m - c < QSEL_CHUNK ? m : c + QSEL_CHUNK;
        for (int t = 0; t < k; t++)
            if (d[t] + (stop - c) + 8 > end[t]) {
                full[t] = true;
                d[t] = end[t] - QSEL_CHUNK - 8;
            }
        for (int64_t i = c; i < stop; i += 4) {
            __m256d x = _mm256_loadu_pd(v + i);
#pragma GCC unroll 5
            for (int t = 0; t < k; t++) {
                unsigned lt = (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(x, lo[t], _CMP_LT_OQ));
                unsigned in =
                    (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(x, hi[t], _CMP_LE_OQ)) & ~lt;
                under[t] += __builtin_popcount(lt);
                d[t] += compress4(d[t], in, x);
            }
        }
    }
    for (int t = 0; t < k; t++) {
        below[t] = under[t];
        dst[t] = d[t];
    }
}

#define BRACKET2(k)                                                                            \
    SEL_TARGET2 void qsel_bracket_avx2_##k(const double *v, int64_t m, const double *lo,    \
                                         const double *hi, int64_t *below, double **dst,       \
                                         double *const *end, bool *full)                       \
    {                                                                                          \
        bracket_all2(v, m, k, lo, hi, below, dst, end, full);                                  \
    }
BRACKET2(1) BRACKET2(2) BRACKET2(3) BRACKET2(4) BRACKET2(5)
#undef BRACKET2
/* The same with AVX2, 8 keys at a time (their order does not matter). */
SEL_TARGET2 void qsel_count_inside_avx2(const qsel *q, const double *sample, int64_t s,
                                        int64_t *inside)
{
    __m256i lo[QSEL_MAX_RANKS], hi[QSEL_MAX_RANKS], neg[QSEL_MAX_RANKS];
    for (int v = 0; v < q->n_iv; v++) {
        lo[v] = _mm256_set1_epi32(q->lo[v]);
        hi[v] = _mm256_set1_epi32(q->hi[v]);
        neg[v] = _mm256_setzero_si256(); /* minus the keys inside, per lane */
    }
    int64_t s8 = s & ~(int64_t)7;
    const __m256i bias = _mm256_set1_epi32(q->bias);
    const __m256i min16 = _mm256_set1_epi32(INT16_MIN), max16 = _mm256_set1_epi32(INT16_MAX);
    const __m128i shift = _mm_cvtsi32_si128(q->shift);
    for (int64_t i = 0; i < s8; i += 8) {
        __m256 lo_half = _mm256_loadu_ps((const float *)(sample + i));
        __m256 hi_half = _mm256_loadu_ps((const float *)(sample + i + 4));
        __m256i key = _mm256_castps_si256(
            _mm256_shuffle_ps(lo_half, hi_half, _MM_SHUFFLE(3, 1, 3, 1))); /* the high halves */
        if (q->narrow) /* qsel_key_of */
            key = _mm256_min_epi32(
                _mm256_max_epi32(
                    _mm256_sub_epi32(
                        _mm256_sra_epi32(_mm256_sub_epi32(key, _mm256_set1_epi32(1)), shift),
                        bias),
                    min16),
                max16);
        for (int v = 0; v < q->n_iv; v++)
            neg[v] = _mm256_add_epi32(
                neg[v], _mm256_andnot_si256(_mm256_cmpgt_epi32(lo[v], key),
                                              _mm256_andnot_si256(_mm256_cmpgt_epi32(key, hi[v]),
                                                                  _mm256_set1_epi32(-1))));
    }
    for (int v = 0; v < q->n_iv; v++) {
        int32_t lanes[8];
        _mm256_storeu_si256((__m256i *)lanes, neg[v]);
        inside[v] = 0;
        for (int l = 0; l < 8; l++)
            inside[v] -= lanes[l];
    }
    for (int64_t i = s8; i < s; i++)
        for (int v = 0; v < q->n_iv; v++)
            inside[v] += qsel_key_of(q, sample[i]) >= q->lo[v] &&
                         qsel_key_of(q, sample[i]) <= q->hi[v];
}

