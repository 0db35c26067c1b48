/* layerdiff — the AVX2 kernel's exact side (metrics_fast_avx2.c has the
 * pass): the counts a block's pass only flags, recounted as the portable
 * kernel counts them; the first index of a block's maximum; the kept pairs'
 * errors sorted into the intervals (every error and key computed as the pass
 * computes it, metrics_fast_avx2.h); and Σrt, Σr², Σt² summed again when the
 * pass's derived ones are not accurate enough. */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compare/metrics_fast_avx2.h"
#include "compare/metrics_internal.h"

/* ---- exact recounts of a block, for what the kernel only flags ---- */

TARGET static INLINE int count8(__m256 mask)
{
    return __builtin_popcount((unsigned)_mm256_movemask_ps(mask));
}

/* The counts the kernel skips, as the portable kernel counts them (float32
 * compares are exact); only those a block's extremes call for. */
TARGET void cmp_avx2_count_specials(const cmp_params *p, const float *r, const float *t,
                                    int m16, bool ref_side, bool test_side, cmp_acc *acc)
{
    const __m256 zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    const __m256 ref_mn = _mm256_set1_ps((float)p->ref_min_normal);
    const __m256 test_mn = _mm256_set1_ps((float)p->test_min_normal);
    const __m256 prec_mn = _mm256_set1_ps((float)p->prec_min_normal);
    const __m256 prec_max = _mm256_set1_ps((float)p->prec_max);
    int64_t r_zero = 0, t_zero = 0, r_small = 0, t_small = 0, tiny = 0, over = 0, under = 0;
    for (int i = 0; i < m16; i += 8) {
        __m256 rf = _mm256_loadu_ps(r + i), tf = _mm256_loadu_ps(t + i);
        __m256 arf = _mm256_andnot_ps(sign, rf), atf = _mm256_andnot_ps(sign, tf);
        if (ref_side) {
            r_zero += count8(_mm256_cmp_ps(arf, zero, _CMP_EQ_OQ));
            r_small += count8(_mm256_cmp_ps(arf, ref_mn, _CMP_LT_OQ));
            tiny += count8(_mm256_cmp_ps(arf, prec_mn, _CMP_LT_OQ));
            over += count8(_mm256_cmp_ps(arf, prec_max, _CMP_GT_OQ));
        }
        if (test_side) {
            __m256 tz = _mm256_cmp_ps(atf, zero, _CMP_EQ_OQ);
            t_zero += count8(tz);
            t_small += count8(_mm256_cmp_ps(atf, test_mn, _CMP_LT_OQ));
            under += count8(_mm256_and_ps(tz, _mm256_cmp_ps(arf, zero, _CMP_NEQ_OQ)));
        }
    }
    acc->ref.zero += r_zero;
    acc->ref.subnormal += r_small - r_zero;
    acc->test.zero += t_zero;
    acc->test.subnormal += t_small - t_zero;
    acc->rel_tiny_ref += tiny - r_zero;
    acc->would_overflow += over;
    acc->underflow_zero += under;
}

/* Which elements fail, exactly as cmp_block_double judges them.
 *
 * The Polygraphy rule's rel half, fl(a / d) > rtol (d = |r|, or the epsilon
 * for r = 0), is decided without the division for nearly every element:
 * in real comparisons (fp16 against fp32 deep in a network) most blocks
 * hold a failing element, so this pass runs over most of the tensor, and
 * the division was most of its time. With P = fl(rtol d), every product
 * rounded once (no contraction): a > fl(P (1 + 2^-51)) puts a / d above
 * rtol (1 + 2^-52 - 2^-104), so fl(a / d) is at least the double after rtol:
 * it fails; a < fl(P (1 - 2^-51)) puts a / d below rtol (1 - 2^-52 + 2^-104),
 * whose rounding is at most rtol: it passes. Only a vector holding an
 * element between the two that is over atol divides. The bounds need
 * rtol d normal: d is at least 2^-149 and below 2^128, so rtol in
 * [2^-800, 2^800] (or 0, where P = 0 and the tests are exact); any other
 * rtol divides every vector. */
TARGET void cmp_avx2_count_failures(const cmp_params *p, const float *r, const float *t,
                                    int m16, int64_t base, cmp_acc *acc)
{
    const __m256d atol = _mm256_set1_pd(p->atol), rtol = _mm256_set1_pd(p->rtol);
    const __m256d up = _mm256_set1_pd(1.0 + 0x1p-51), down = _mm256_set1_pd(1.0 - 0x1p-51);
    const __m256d eps = _mm256_set1_pd(LD_COMPARE_REL_EPSILON);
    const bool screen =
        p->rtol == 0.0 || (p->rtol >= 0x1p-800 && p->rtol <= 0x1p800); /* NaN: divides */
    /* in registers: acc in memory would make each vector wait for the last one's
       store (the compiler cannot tell it from r and t) */
    int64_t n_fail = 0, first_fail = acc->first_fail;
    for (int i = 0; i < m16; i += 4) {
        __m256d rd = _mm256_cvtps_pd(_mm_loadu_ps(r + i));
        __m256d td = _mm256_cvtps_pd(_mm_loadu_ps(t + i));
        __m256d a = abs_pd(_mm256_sub_pd(td, rd)), ar = abs_pd(rd);
        __m256d fail;
        if (p->mode == LD_TOL_ALLCLOSE) { /* no fused multiply-add: as the portable code */
            fail = _mm256_cmp_pd(a, _mm256_add_pd(atol, _mm256_mul_pd(rtol, ar)), _CMP_NLE_UQ);
        } else {
            __m256d over_atol = _mm256_cmp_pd(a, atol, _CMP_GT_OQ), over_rtol;
            if (screen) {
                __m256d d = _mm256_blendv_pd(ar, eps, _mm256_cmp_pd(ar, _mm256_setzero_pd(),
                                                                    _CMP_EQ_OQ));
                __m256d bound = _mm256_mul_pd(rtol, d);
                over_rtol = _mm256_cmp_pd(a, _mm256_mul_pd(bound, up), _CMP_GT_OQ);
                __m256d under = _mm256_cmp_pd(a, _mm256_mul_pd(bound, down), _CMP_LT_OQ);
                unsigned unsure = (unsigned)_mm256_movemask_pd(over_atol) &
                                  ~(unsigned)_mm256_movemask_pd(_mm256_or_pd(over_rtol, under));
                if (unsure)
                    over_rtol = _mm256_cmp_pd(_mm256_div_pd(a, d), rtol, _CMP_GT_OQ);
            } else {
                over_rtol = _mm256_cmp_pd(rel_error(a, ar), rtol, _CMP_GT_OQ);
            }
            fail = _mm256_and_pd(over_atol, over_rtol);
        }
        unsigned bits = (unsigned)_mm256_movemask_pd(fail);
        n_fail += __builtin_popcount(bits); /* no branch: failures fall at random */
        if (first_fail < 0 && bits)
            first_fail = base + i + __builtin_ctz(bits);
    }
    acc->n_fail += n_fail;
    acc->first_fail = first_fail;
}

/* The first index in the block whose error of measure k is x (the block's
 * maximum, just found): the error recomputed as the kernel computes it. */
TARGET int64_t cmp_avx2_find_first(const cmp_params *p, const float *r, const float *t,
                                   int m16, int k, double x)
{
    const ulp_consts u = ulp_setup(p);
    const __m256d want = _mm256_set1_pd(x);
    for (int i = 0; i < m16; i += 4) {
        __m256d rd = _mm256_cvtps_pd(_mm_loadu_ps(r + i));
        __m256d td = _mm256_cvtps_pd(_mm_loadu_ps(t + i));
        __m256d a = abs_pd(_mm256_sub_pd(td, rd)), e = a;
        if (k == CMP_REL)
            e = rel_error(a, abs_pd(rd));
        else if (k == CMP_ULP)
            e = ulp_error(&u, rd, a);
        unsigned hit = (unsigned)_mm256_movemask_pd(_mm256_cmp_pd(e, want, _CMP_EQ_OQ));
        if (hit)
            return i + __builtin_ctz(hit);
    }
    return 0;
}

/* ---- the kept pairs' errors ---- */

/* The three errors of 4 pairs, as the kernel computes them. */
TARGET static INLINE err4 expand_errors(const ulp_consts *u, const float *r, const float *t)
{
    __m256d rd = _mm256_cvtps_pd(_mm_loadu_ps(r)), td = _mm256_cvtps_pd(_mm_loadu_ps(t));
    err4 e;
    e.abs = abs_pd(_mm256_sub_pd(td, rd));
    e.rel = rel_error(e.abs, abs_pd(rd));
    e.ulp = ulp_error(u, rd, e.abs);
    return e;
}

/* pack4[m]: the byte indices of the float lanes (2 per double) of the
 * doubles that the 4-bit mask m selects, in order: vpermps gathers them to
 * the front (one load of the indices instead of a chain of pdep and pext). */
static const uint64_t pack4[16] = {
    0x0000000000000000ull, 0x0000000000000100ull, 0x0000000000000302ull, 0x0000000003020100ull,
    0x0000000000000504ull, 0x0000000005040100ull, 0x0000000005040302ull, 0x0000050403020100ull,
    0x0000000000000706ull, 0x0000000007060100ull, 0x0000000007060302ull, 0x0000070603020100ull,
    0x0000000007060504ull, 0x0000070605040100ull, 0x0000070605040302ull, 0x0706050403020100ull,
};

/* Stores the lanes of 4 doubles that mask (4 bits) selects, in order, at
 * dst (room for 4); returns how many. */
TARGET static INLINE int compress_store4(double *dst, unsigned mask, __m256d x)
{
    __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)&pack4[mask]));
    _mm256_storeu_ps((float *)dst, _mm256_permutevar8x32_ps(_mm256_castpd_ps(x), idx));
    return __builtin_popcount(mask);
}

/* The errors of pairs [0, n) (n a multiple of 8): each measure's inside
 * one of its intervals appended to q[k].cand (room made by the caller) and
 * counted per interval, by the kernel's keys. abs and rel padded to nv
 * intervals, ulp nu (pads keep nothing). */
TARGET static INLINE void expand_n(const cmp_params *p, const float *r, const float *t, int64_t n,
                                   qsel *q, const int nv, const int nu)
{
    const ulp_consts u = ulp_setup(p);
    const int nvk[CMP_MEASURES] = {nv, nv, nu};
    narrow_map map[CMP_MEASURES];
    __m256i lo[CMP_MEASURES][QSEL_MAX_RANKS], hi[CMP_MEASURES][QSEL_MAX_RANKS];
    __m256i outside[CMP_MEASURES][QSEL_MAX_RANKS]; /* minus the keys outside, per lane */
    double *dst[CMP_MEASURES];
    for (int k = 0; k < CMP_MEASURES; k++) {
        map[k] = narrow_setup(&q[k]);
        for (int v = 0; v < nvk[k]; v++) {
            bool real = v < q[k].n_iv;
            lo[k][v] = _mm256_set1_epi32(real ? q[k].lo[v] : INT32_MAX);
            hi[k][v] = _mm256_set1_epi32(real ? q[k].hi[v] : INT32_MIN);
            outside[k][v] = _mm256_setzero_si256();
        }
        dst[k] = q[k].cand + q[k].n;
    }
    for (int64_t i = 0; i < n; i += 8) {
        err4 e0 = expand_errors(&u, r + i, t + i), e1 = expand_errors(&u, r + i + 4, t + i + 4);
        const __m256d lo_e[CMP_MEASURES] = {e0.abs, e0.rel, e0.ulp};
        const __m256d hi_e[CMP_MEASURES] = {e1.abs, e1.rel, e1.ulp};
#pragma GCC unroll 3
        for (int k = 0; k < CMP_MEASURES; k++) {
            if (nvk[k] == 0)
                continue;
            __m256i key = keys8(lo_e[k], hi_e[k]);
            if (k != CMP_ULP) /* narrow, as the kernel compares them */
                key = narrow32(&map[k], key);
            __m256i out = _mm256_set1_epi32(-1);
#pragma GCC unroll 8
            for (int v = 0; v < nvk[k]; v++) {
                __m256i out_v = _mm256_or_si256(_mm256_cmpgt_epi32(lo[k][v], key),
                                                _mm256_cmpgt_epi32(key, hi[k][v]));
                outside[k][v] = _mm256_add_epi32(outside[k][v], out_v);
                out = _mm256_and_si256(out, out_v);
            }
            unsigned in = elem_order(~(unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(out)) &
                                     0xffu);
            dst[k] += compress_store4(dst[k], in & 0xfu, lo_e[k]);
            dst[k] += compress_store4(dst[k], in >> 4, hi_e[k]);
        }
    }
    for (int k = 0; k < CMP_MEASURES; k++) {
        q[k].n = dst[k] - q[k].cand;
        for (int v = 0; v < q[k].n_iv; v++) /* n keys, minus those outside */
            q[k].in_iv[v] += n + sum_epi32(outside[k][v]);
    }
}

#define EXPAND(nv, nu)                                                                         \
    TARGET void cmp_avx2_expand_##nv##nu(const cmp_params *p, const float *r, const float *t, \
                                         int64_t n, qsel *q)                                  \
    {                                                                                          \
        expand_n(p, r, t, n, q, nv, nu);                                                       \
    }
EXPAND(4, 0)
EXPAND(5, 0)
EXPAND(4, 1)
EXPAND(5, 1)
#undef EXPAND

/* ---- Σrt, Σr², Σt² again (metrics_similarity.c) ---- */

/* hi + lo += x, per lane (TwoSum) */
TARGET static INLINE void sum2_add4(__m256d *hi, __m256d *lo, __m256d x)
{
    __m256d sum = _mm256_add_pd(*hi, x), x_part = _mm256_sub_pd(sum, *hi);
    *lo = _mm256_add_pd(*lo, _mm256_add_pd(_mm256_sub_pd(*hi, _mm256_sub_pd(sum, x_part)),
                                           _mm256_sub_pd(x, x_part)));
    *hi = sum;
}

TARGET void cmp_similarity_float_avx2(const float *r, const float *t, int m, cmp_acc *acc)
{
    /* float products are exact in double: TwoSum alone keeps every bit */
    __m256d hi[3], lo[3];
    for (int k = 0; k < 3; k++)
        hi[k] = lo[k] = _mm256_setzero_pd();
    for (int i = 0; i < m; i += 4) {
        if (!(i & 12)) {
            _mm_prefetch((const char *)(r + i + 1024), _MM_HINT_T0);
            _mm_prefetch((const char *)(t + i + 1024), _MM_HINT_T0);
        }
        __m256d rd, td;
        if (m - i >= 4) {
            rd = _mm256_cvtps_pd(_mm_loadu_ps(r + i));
            td = _mm256_cvtps_pd(_mm_loadu_ps(t + i));
        } else { /* the tail: zero pairs add nothing */
            float pr[4] = {0}, pt[4] = {0};
            memcpy(pr, r + i, (size_t)(m - i) * sizeof(float));
            memcpy(pt, t + i, (size_t)(m - i) * sizeof(float));
            rd = _mm256_cvtps_pd(_mm_loadu_ps(pr));
            td = _mm256_cvtps_pd(_mm_loadu_ps(pt));
        }
        /* finite pairs only: x - x is 0 exactly when x is finite */
        __m256d finite = _mm256_cmp_pd(_mm256_sub_pd(rd, rd), _mm256_sub_pd(td, td), _CMP_EQ_OQ);
        rd = _mm256_and_pd(finite, rd);
        td = _mm256_and_pd(finite, td);
        sum2_add4(&hi[0], &lo[0], _mm256_mul_pd(rd, td));
        sum2_add4(&hi[1], &lo[1], _mm256_mul_pd(rd, rd));
        sum2_add4(&hi[2], &lo[2], _mm256_mul_pd(td, td));
    }
    double *dst_hi[3] = {&acc->srt, &acc->srr, &acc->stt};
    double *dst_lo[3] = {&acc->srt_lo, &acc->srr_lo, &acc->stt_lo};
    for (int k = 0; k < 3; k++) {
        double h[4], l[4];
        _mm256_storeu_pd(h, hi[k]);
        _mm256_storeu_pd(l, lo[k]);
        for (int lane = 0; lane < 4; lane++) {
            cmp_sum2_add(dst_hi[k], dst_lo[k], h[lane]);
            *dst_lo[k] += l[lane];
        }
    }
}
