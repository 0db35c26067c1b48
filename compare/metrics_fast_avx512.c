/* layerdiff — the AVX-512 comparison kernel for float32 blocks (float16 and
 * bfloat16 widened first), the common case: fp32 reference against an fp32
 * or emulated fp16 test run.
 *
 * One pass does everything, 16 elements at a time, and is shaped by what
 * this hardware does cheaply (integer, add and multiply lanes) and what it
 * does not (compares into mask registers, compress, conversions):
 *  - each side's min and max in float32, and the exact matches (t == r,
 *    one compare); the counts that are nearly always zero (zeros,
 *    subnormals, tiny references, would-overflow, underflow) are not
 *    counted per element: the kernel tracks the smallest |r| and |t| as
 *    integers, and a block where it (or the largest |r|) says "maybe" is
 *    counted exactly afterwards;
 *  - the verdict screened in float32, 16 lanes, with bounds that can only
 *    flag too many (screen_failures); a flagged block is recounted exactly;
 *  - the errors and every sum in double, 8 lanes at a time, with 1/ulp
 *    built in the exponent field;
 *  - for large tensors, the order-statistics intervals (quantile.c): each
 *    measure's errors get their keys (qsel_key: the high half of the
 *    double's bits, one permute for 16; abs and rel then mapped to 16 bits,
 *    qsel_key_of, and compared side by side, 32 lanes per compare) compared
 *    with the interval bounds, and the (r, t) pairs of the elements inside
 *    any interval are compressed straight from the registers, one compress
 *    for all three measures; cmp_fast_expand recomputes their errors
 *    afterwards, so no error is ever stored and read back. The interval
 *    tests and the compress of one 16 run in the next iteration (software
 *    pipelining): they wait on the division's long latency, and out-of-order
 *    execution alone did not overlap enough of it (the pass about 10% faster).
 * Element by element it gives the same errors and verdicts as the portable
 * kernel (cmp_block_double); sums differ only in summation order (and fused
 * multiply-adds), i.e. in the last bits, but for Σrt, which the kernel
 * derives (commit; metrics_similarity.c sums it again where that is not
 * accurate). Blocks holding NaN or infinity are
 * left to the portable kernel. */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compare/metrics_internal.h"

#define TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,popcnt,bmi")))
#define INLINE inline __attribute__((always_inline))

/* 1/ulp_p(r) = 2^(digits - 1 - max(e(r), emin)) as double bits: the base
 * minus the larger of r's exponent field and emin's. */
typedef struct ulp_consts {
    __m512i exp_field, emin_field, base;
} ulp_consts;

TARGET static INLINE ulp_consts ulp_setup(const cmp_params *p)
{
    ulp_consts u = {
        .exp_field = _mm512_set1_epi64(0x7ff0000000000000ll),
        .emin_field = _mm512_set1_epi64((int64_t)((uint64_t)(1023 + p->ulp_emin) << 52)),
        .base = _mm512_set1_epi64((int64_t)((uint64_t)(2 * 1023 + p->ulp_digits - 1) << 52)),
    };
    return u;
}

TARGET static INLINE __m512d ulp_error(const ulp_consts *u, __m512d rd, __m512d a)
{
    __m512i e = _mm512_and_si512(_mm512_castpd_si512(rd), u->exp_field);
    __m512i scale = _mm512_sub_epi64(u->base, _mm512_max_epi64(e, u->emin_field));
    return _mm512_mul_pd(a, _mm512_castsi512_pd(scale)); /* exact: a power of two */
}

TARGET static INLINE __m512d rel_error(__m512d a, __m512d ar)
{
    __mmask8 r_zero = _mm512_cmp_pd_mask(ar, _mm512_setzero_pd(), _CMP_EQ_OQ);
    return _mm512_div_pd(a, _mm512_mask_mov_pd(ar, r_zero,
                                                _mm512_set1_pd(LD_COMPARE_REL_EPSILON)));
}

/* The keys of 16 errors (8 + 8 doubles): the high halves of their bits. */
TARGET static INLINE __m512i keys16(__m512d lo, __m512d hi)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_epi32(_mm512_castpd_si512(lo), odd, _mm512_castpd_si512(hi));
}

/* The narrow keys of a measure (qsel_key_of) for 16 wide keys: packed to
 * int16 (the saturation does the clamping), or in int32 lanes. */
typedef struct narrow_map {
    __m512i bias;
    __m128i shift;
} narrow_map;

TARGET static INLINE narrow_map narrow_setup(const qsel *q)
{
    narrow_map m = {_mm512_set1_epi32(q->bias), _mm_cvtsi32_si128(q->shift)};
    return m;
}

TARGET static INLINE __m512i narrow_unclamped(const narrow_map *m, __m512i key)
{
    key = _mm512_sra_epi32(_mm512_sub_epi32(key, _mm512_set1_epi32(1)), m->shift);
    return _mm512_sub_epi32(key, m->bias);
}

TARGET static INLINE __m256i narrow16(const narrow_map *m, __m512i key)
{
    return _mm512_cvtsepi32_epi16(narrow_unclamped(m, key)); /* saturating */
}

TARGET static INLINE __m512i narrow32(const narrow_map *m, __m512i key)
{
    return _mm512_min_epi32(_mm512_max_epi32(narrow_unclamped(m, key),
                                             _mm512_set1_epi32(INT16_MIN)),
                            _mm512_set1_epi32(INT16_MAX));
}

/* ---- the kernel ---- */

/* What one call judges and where its by-products go. */
typedef cmp_kernel_args kernel_args;
typedef cmp_kernel_result kernel_result;

typedef struct sums {
    __m512d abs, rel, ulp, dd, r1, r2, t1, t2, max_abs, max_rel, max_ulp;
} sums;

typedef struct consts {
    __m512d r_shift, t_shift;
    ulp_consts u;
} consts;

typedef struct half_err {
    __m512d abs, rel, ulp;
} half_err;

/* 8 elements in double: errors, sums, maxima. */
TARGET static INLINE void half8(const consts *c, __m256 rf, __m256 tf, const bool shifted,
                                sums *s, half_err *e)
{
    __m512d rd = _mm512_cvtps_pd(rf), td = _mm512_cvtps_pd(tf);
    __m512d diff = _mm512_sub_pd(td, rd);
    __m512d a = _mm512_abs_pd(diff), ar = _mm512_abs_pd(rd);
    __m512d rel = rel_error(a, ar);
    __m512d ulp = ulp_error(&c->u, rd, a);
    s->abs = _mm512_add_pd(s->abs, a);
    s->rel = _mm512_add_pd(s->rel, rel);
    s->ulp = _mm512_add_pd(s->ulp, ulp);
    s->max_abs = _mm512_max_pd(s->max_abs, a);
    s->max_rel = _mm512_max_pd(s->max_rel, rel);
    s->max_ulp = _mm512_max_pd(s->max_ulp, ulp);
    s->dd = _mm512_fmadd_pd(diff, diff, s->dd);
    if (shifted) {
        rd = _mm512_sub_pd(rd, c->r_shift);
        td = _mm512_sub_pd(td, c->t_shift);
    }
    s->r1 = _mm512_add_pd(s->r1, rd);
    s->r2 = _mm512_fmadd_pd(rd, rd, s->r2);
    s->t1 = _mm512_add_pd(s->t1, td);
    s->t2 = _mm512_fmadd_pd(td, td, s->t2);
    e->abs = a;
    e->rel = rel;
    e->ulp = ulp;
}

/* abs and rel at once: their narrow keys side by side as 32 16-bit lanes
 * (abs in the low 16), against nv intervals each; ge[v] counts, per lane,
 * the keys >= lo[v] (a block adds at most CMP_BLOCK / 16 to a lane). Returns
 * the elements inside an interval of either. */
_Static_assert(CMP_BLOCK / 16 <= INT16_MAX, "16-bit lane counts");
TARGET static INLINE __mmask16 intervals32(const __m512i *lo, const __m512i *hi, int nv,
                                          __m512i key, __m512i *ge)
{
    __mmask32 in = 0;
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) {
        __mmask32 above_lo = _mm512_cmp_epi16_mask(key, lo[v], _MM_CMPINT_NLT);
        in = _kor_mask32(in, _mm512_mask_cmp_epi16_mask(above_lo, key, hi[v], _MM_CMPINT_LE));
        ge[v] = _mm512_mask_sub_epi16(ge[v], above_lo, ge[v], _mm512_set1_epi16(-1));
    }
    return (__mmask16)(in | (in >> 16));
}

/* The keys inside one of nv intervals [lo[v], hi[v]]; ge[v] counts the
 * keys >= lo[v]. */
TARGET static INLINE __mmask16 intervals16(const __m512i *lo, const __m512i *hi, int nv,
                                          __m512i key, int64_t *ge)
{
    __mmask16 in = 0;
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) {
        __mmask16 above_lo = _mm512_cmp_epi32_mask(key, lo[v], _MM_CMPINT_NLT);
        in = _kor_mask16(in, _mm512_mask_cmp_epi32_mask(above_lo, key, hi[v], _MM_CMPINT_LE));
        ge[v] += __builtin_popcount(above_lo);
    }
    return in;
}

/* Which of 16 elements may fail, judged in float32 (16 lanes, no
 * division) with bounds that can only flag too many: a flagged block is
 * recounted exactly (count_failures). Why nothing failing is missed: an
 * element fails when a = RN64(|t - r|) > atol and RN64(a / |r|) > rtol (or
 * a > RN64(atol + RN64(rtol |r|)) in allclose mode), so |t - r| > atol
 * (1 - 2^-51) and |t - r| > rtol |r| (1 - 2^-51); the float difference
 * af = RN32(|t - r|) is at least |t - r| (1 - 2^-24) (or +inf), so af >
 * atol (1 - 2^-23) > ta = screen_bound(atol), and af > rtol |r| (1 - 2^-23) >
 * RD32(rt |r|) with rt = screen_bound(rtol) (rounded down: no overflow to
 * +inf, and 0 when r = 0, where rel > rtol >= 0 needs af > 0). */
TARGET static INLINE __mmask16 screen_failures(__m512 af, __m512 arf, __m512 ta, __m512 rt,
                                               const bool allclose)
{
/* a macro, not a const int: clang wants an integer constant expression */
#define ROUND_DOWN (_MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
    if (allclose)
        return _mm512_cmp_ps_mask(af, _mm512_fmadd_round_ps(rt, arf, ta, ROUND_DOWN), _CMP_GT_OQ);
    return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(af, ta, _CMP_GT_OQ), af,
                                   _mm512_mul_round_ps(rt, arf, ROUND_DOWN), _CMP_GT_OQ);
#undef ROUND_DOWN
}

/* The whole block; the flags and counts are constants in each
 * instantiation. nv: intervals of abs and of rel (padded), nu: of ulp. */
TARGET static INLINE void kernel(const kernel_args *A, kernel_result *R, const bool store,
                                 const bool shifted, const bool allclose, const int nv,
                                 const int nu)
{
    const cmp_params *p = A->p;
    const float *r = A->r, *t = A->t;
    consts c = {
        .r_shift = _mm512_set1_pd(p->ref_shift), .t_shift = _mm512_set1_pd(p->test_shift),
        .u = ulp_setup(p),
    };
    const __m512 ta = _mm512_set1_ps(cmp_screen_bound(p->atol));
    const __m512 rt = _mm512_set1_ps(cmp_screen_bound(p->rtol));
    const __m512d zero = _mm512_setzero_pd();
    sums s;
    s.abs = s.rel = s.ulp = s.dd = s.r1 = s.r2 = s.t1 = s.t2 = zero;
    s.max_abs = s.max_rel = s.max_ulp = _mm512_set1_pd(-1.0);
    __mmask16 fail = 0;
    int64_t equal = 0;
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
    __m512 r_min = _mm512_set1_ps(INFINITY), r_max = _mm512_set1_ps(-INFINITY);
    __m512 t_min = r_min, t_max = r_max;
    __m512i min_abs = _mm512_set1_epi32(-1);
    int64_t ge[CMP_MEASURES][QSEL_MAX_RANKS] = {{0}};
    float *kept_r = A->kept_r, *kept_t = A->kept_t;
    narrow_map map_abs, map_rel;
    __m512i lo2[QSEL_MAX_RANKS], hi2[QSEL_MAX_RANKS]; /* abs bound | rel bound, 16-bit */
    __m512i ge2[QSEL_MAX_RANKS];                      /* abs | rel counts per lane */
    __m512i lo_u[QSEL_MAX_RANKS], hi_u[QSEL_MAX_RANKS];
    for (int v = 0; v < nv; v++)
        ge2[v] = _mm512_setzero_si512();
    if (nv + nu > 0) {
        map_abs = narrow_setup(&A->q[CMP_ABS]);
        map_rel = narrow_setup(&A->q[CMP_REL]);
        for (int v = 0; v < nv; v++) {
            lo2[v] = _mm512_inserti64x4(_mm512_set1_epi16((short)A->lo[CMP_ABS][v]),
                                        _mm256_set1_epi16((short)A->lo[CMP_REL][v]), 1);
            hi2[v] = _mm512_inserti64x4(_mm512_set1_epi16((short)A->hi[CMP_ABS][v]),
                                        _mm256_set1_epi16((short)A->hi[CMP_REL][v]), 1);
        }
        for (int v = 0; v < nu; v++) {
            lo_u[v] = _mm512_set1_epi32((int)A->lo[CMP_ULP][v]);
            hi_u[v] = _mm512_set1_epi32((int)A->hi[CMP_ULP][v]);
        }
    }
    /* nothing yet: keys below every interval */
    __m512i prev_both = _mm512_set1_epi16(INT16_MIN), prev_ulp = _mm512_set1_epi32(INT32_MIN);
    __m512 prev_r = _mm512_setzero_ps(), prev_t = prev_r;
    for (int i = 0; i < A->m16; i += 16) {
        /* 4 KiB ahead: the hardware's own prefetch falls behind this loop */
        _mm_prefetch((const char *)(r + i + 1024), _MM_HINT_T0);
        _mm_prefetch((const char *)(t + i + 1024), _MM_HINT_T0);
        __m512 rf = _mm512_loadu_ps(r + i), tf = _mm512_loadu_ps(t + i);
        __m512i rb = _mm512_and_si512(_mm512_castps_si512(rf), abs_mask);
        __m512i tb = _mm512_and_si512(_mm512_castps_si512(tf), abs_mask);
        __m512 af = _mm512_abs_ps(_mm512_sub_ps(tf, rf));
        min_abs = _mm512_min_epu32(min_abs, _mm512_min_epu32(rb, tb));
        equal += __builtin_popcount(_mm512_cmp_ps_mask(rf, tf, _CMP_EQ_OQ));
        fail = _kor_mask16(fail, screen_failures(af, _mm512_castsi512_ps(rb), ta, rt, allclose));
        r_min = _mm512_min_ps(r_min, rf);
        r_max = _mm512_max_ps(r_max, rf);
        t_min = _mm512_min_ps(t_min, tf);
        t_max = _mm512_max_ps(t_max, tf);
        half_err lo, hi;
        /* the upper halves loaded again rather than extracted: load ports to spare */
        half8(&c, _mm512_castps512_ps256(rf), _mm512_castps512_ps256(tf), shifted, &s, &lo);
        half8(&c, _mm256_loadu_ps(r + i + 8), _mm256_loadu_ps(t + i + 8), shifted, &s, &hi);
        if (store) {
            _mm512_storeu_pd(A->store[CMP_ABS] + i, lo.abs);
            _mm512_storeu_pd(A->store[CMP_ABS] + i + 8, hi.abs);
            _mm512_storeu_pd(A->store[CMP_REL] + i, lo.rel);
            _mm512_storeu_pd(A->store[CMP_REL] + i + 8, hi.rel);
            _mm512_storeu_pd(A->store[CMP_ULP] + i, lo.ulp);
            _mm512_storeu_pd(A->store[CMP_ULP] + i + 8, hi.ulp);
        }
        if (nv + nu > 0) {
            /* software-pipelined: the previous 16's intervals while these
               16's errors are still being computed */
            __mmask16 in = 0;
            if (nv > 0)
                in |= intervals32(lo2, hi2, nv, prev_both, ge2);
            if (nu > 0)
                in |= intervals16(lo_u, hi_u, nu, prev_ulp, ge[CMP_ULP]);
            _mm512_storeu_ps(kept_r, _mm512_maskz_compress_ps(in, prev_r));
            _mm512_storeu_ps(kept_t, _mm512_maskz_compress_ps(in, prev_t));
            kept_r += __builtin_popcount(in);
            kept_t += __builtin_popcount(in);
            if (nv > 0)
                prev_both = _mm512_inserti64x4(
                    _mm512_castsi256_si512(narrow16(&map_abs, keys16(lo.abs, hi.abs))),
                    narrow16(&map_rel, keys16(lo.rel, hi.rel)), 1);
            if (nu > 0)
                prev_ulp = keys16(lo.ulp, hi.ulp);
            prev_r = rf;
            prev_t = tf;
        }
    }
    if (nv + nu > 0) {
        __mmask16 in = 0;
        if (nv > 0)
            in |= intervals32(lo2, hi2, nv, prev_both, ge2);
        if (nu > 0)
            in |= intervals16(lo_u, hi_u, nu, prev_ulp, ge[CMP_ULP]);
        _mm512_storeu_ps(kept_r, _mm512_maskz_compress_ps(in, prev_r));
        _mm512_storeu_ps(kept_t, _mm512_maskz_compress_ps(in, prev_t));
        kept_r += __builtin_popcount(in);
        kept_t += __builtin_popcount(in);
    }
    R->sum[CMP_ABS] = _mm512_reduce_add_pd(s.abs);
    R->sum[CMP_REL] = _mm512_reduce_add_pd(s.rel);
    R->sum[CMP_ULP] = _mm512_reduce_add_pd(s.ulp);
    R->max[CMP_ABS] = _mm512_reduce_max_pd(s.max_abs);
    R->max[CMP_REL] = _mm512_reduce_max_pd(s.max_rel);
    R->max[CMP_ULP] = _mm512_reduce_max_pd(s.max_ulp);
    R->dd = _mm512_reduce_add_pd(s.dd);
    R->r1 = _mm512_reduce_add_pd(s.r1);
    R->r2 = _mm512_reduce_add_pd(s.r2);
    R->t1 = _mm512_reduce_add_pd(s.t1);
    R->t2 = _mm512_reduce_add_pd(s.t2);
    R->r_min = _mm512_reduce_min_ps(r_min);
    R->r_max = _mm512_reduce_max_ps(r_max);
    R->t_min = _mm512_reduce_min_ps(t_min);
    R->t_max = _mm512_reduce_max_ps(t_max);
    R->min_abs = (uint32_t)_mm512_reduce_min_epu32(min_abs);
    R->equal = equal;
    R->maybe_fail = fail != 0;
    R->kept = kept_r - A->kept_r;
    for (int v = 0; v < nv; v++) { /* the per-lane counts: abs in the low 16, rel above */
        ge[CMP_ABS][v] = _mm512_reduce_add_epi32(
            _mm512_cvtepi16_epi32(_mm512_castsi512_si256(ge2[v])));
        ge[CMP_REL][v] = _mm512_reduce_add_epi32(
            _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(ge2[v], 1)));
    }
    memcpy(R->ge, ge, sizeof ge);
}


/* Instantiations: [allclose][shifted] for storing; for feeding also
 * [ulp intervals 0/1][abs and rel padded to 4 or 5 intervals]. */
#define STORE_KERNEL(ac, sh)                                                                   \
    TARGET static void kernel_store_##ac##sh(const kernel_args *A, kernel_result *R)           \
    {                                                                                          \
        kernel(A, R, true, sh, ac, 0, 0);                                                      \
    }
#define FEED_KERNEL(ac, sh, nv, nu)                                                            \
    TARGET static void kernel_feed_##ac##sh##nv##nu(const kernel_args *A, kernel_result *R)    \
    {                                                                                          \
        kernel(A, R, false, sh, ac, nv, nu);                                                   \
    }
#define KERNELS(ac, sh)                                                                        \
    STORE_KERNEL(ac, sh)                                                                       \
    FEED_KERNEL(ac, sh, 4, 0) FEED_KERNEL(ac, sh, 5, 0) FEED_KERNEL(ac, sh, 4, 1)              \
    FEED_KERNEL(ac, sh, 5, 1)
KERNELS(0, 0)
KERNELS(0, 1)
KERNELS(1, 0)
KERNELS(1, 1)
#undef KERNELS
#undef FEED_KERNEL
#undef STORE_KERNEL

#define ROW(ac, sh)                                                                            \
    {{kernel_feed_##ac##sh##40, kernel_feed_##ac##sh##50},                                     \
     {kernel_feed_##ac##sh##41, kernel_feed_##ac##sh##51}}
#define STORE_ROW(ac) {kernel_store_##ac##0, kernel_store_##ac##1}

/* ---- exact recounts of a block, for what the kernel only flags ---- */

/* The counts the kernel skips, as the portable kernel counts them (float32
 * compares are exact); only those a block's extremes call for. */
TARGET static void count_specials(const cmp_params *p, const float *r, const float *t, int m16,
                                  bool ref_side, bool test_side, cmp_acc *acc)
{
    const __m512 zero = _mm512_setzero_ps();
    const __m512 ref_mn = _mm512_set1_ps((float)p->ref_min_normal);
    const __m512 test_mn = _mm512_set1_ps((float)p->test_min_normal);
    const __m512 prec_mn = _mm512_set1_ps((float)p->prec_min_normal);
    const __m512 prec_max = _mm512_set1_ps((float)p->prec_max);
    int64_t r_zero = 0, t_zero = 0, r_small = 0, t_small = 0, tiny = 0, over = 0, under = 0;
    for (int i = 0; i < m16; i += 16) {
        __m512 rf = _mm512_loadu_ps(r + i), tf = _mm512_loadu_ps(t + i);
        __m512 arf = _mm512_abs_ps(rf), atf = _mm512_abs_ps(tf);
        if (ref_side) {
            r_zero += __builtin_popcount(_mm512_cmp_ps_mask(arf, zero, _CMP_EQ_OQ));
            r_small += __builtin_popcount(_mm512_cmp_ps_mask(arf, ref_mn, _CMP_LT_OQ));
            tiny += __builtin_popcount(_mm512_cmp_ps_mask(arf, prec_mn, _CMP_LT_OQ));
            over += __builtin_popcount(_mm512_cmp_ps_mask(arf, prec_max, _CMP_GT_OQ));
        }
        if (test_side) {
            __mmask16 tz = _mm512_cmp_ps_mask(atf, zero, _CMP_EQ_OQ);
            t_zero += __builtin_popcount(tz);
            t_small += __builtin_popcount(_mm512_cmp_ps_mask(atf, test_mn, _CMP_LT_OQ));
            under += __builtin_popcount(_mm512_mask_cmp_ps_mask(tz, arf, zero, _CMP_NEQ_OQ));
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

/* Which elements fail, exactly as cmp_block_double judges them. */
TARGET static void count_failures(const cmp_params *p, const float *r, const float *t, int m16,
                                  int64_t base, cmp_acc *acc)
{
    const __m512d atol = _mm512_set1_pd(p->atol), rtol = _mm512_set1_pd(p->rtol);
    for (int i = 0; i < m16; i += 8) {
        __m512d rd = _mm512_cvtps_pd(_mm256_loadu_ps(r + i));
        __m512d td = _mm512_cvtps_pd(_mm256_loadu_ps(t + i));
        __m512d a = _mm512_abs_pd(_mm512_sub_pd(td, rd)), ar = _mm512_abs_pd(rd);
        __mmask8 fail;
        if (p->mode == LD_TOL_ALLCLOSE)
            fail = _mm512_cmp_pd_mask(a, _mm512_add_pd(atol, _mm512_mul_pd(rtol, ar)),
                                      _CMP_NLE_UQ);
        else
            fail = _mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(a, atol, _CMP_GT_OQ),
                                           rel_error(a, ar), rtol, _CMP_GT_OQ);
        if (fail) {
            if (acc->first_fail < 0)
                acc->first_fail = base + i + __builtin_ctz(fail);
            acc->n_fail += __builtin_popcount(fail);
        }
    }
}

/* The first index in the block whose error of measure k is x (the block's
 * maximum, just found): the error recomputed as the kernel computes it. */
TARGET static int64_t find_first(const cmp_params *p, const float *r, const float *t, int m16,
                                 int k, double x)
{
    const ulp_consts u = ulp_setup(p);
    const __m512d want = _mm512_set1_pd(x);
    for (int i = 0; i < m16; i += 8) {
        __m512d rd = _mm512_cvtps_pd(_mm256_loadu_ps(r + i));
        __m512d td = _mm512_cvtps_pd(_mm256_loadu_ps(t + i));
        __m512d a = _mm512_abs_pd(_mm512_sub_pd(td, rd)), e = a;
        if (k == CMP_REL)
            e = rel_error(a, _mm512_abs_pd(rd));
        else if (k == CMP_ULP)
            e = ulp_error(&u, rd, a);
        __mmask8 hit = _mm512_cmp_pd_mask(e, want, _CMP_EQ_OQ);
        if (hit)
            return i + __builtin_ctz(hit);
    }
    return 0;
}


/* The three errors of 8 pairs, as the kernel computes them. */
TARGET static INLINE void errors8(const ulp_consts *u, const float *r, const float *t,
                                  __m512d e[CMP_MEASURES])
{
    __m512d rd = _mm512_cvtps_pd(_mm256_loadu_ps(r)), td = _mm512_cvtps_pd(_mm256_loadu_ps(t));
    e[CMP_ABS] = _mm512_abs_pd(_mm512_sub_pd(td, rd));
    e[CMP_REL] = rel_error(e[CMP_ABS], _mm512_abs_pd(rd));
    e[CMP_ULP] = ulp_error(u, rd, e[CMP_ABS]);
}

/* The errors of pairs [0, n) (n a multiple of 16): each measure's inside
 * one of its intervals appended to q[k].cand (room made by the caller) and
 * counted per interval, by the kernel's keys. abs and rel padded to nv
 * intervals, ulp nu (pads keep nothing). */
TARGET static INLINE void expand_n(const cmp_params *p, const float *r, const float *t, int64_t n,
                                   qsel *q, const int nv, const int nu)
{
    const ulp_consts u = ulp_setup(p);
    const int nvk[CMP_MEASURES] = {nv, nv, nu};
    narrow_map map[CMP_MEASURES];
    __m512i lo[CMP_MEASURES][QSEL_MAX_RANKS], hi[CMP_MEASURES][QSEL_MAX_RANKS];
    int64_t in_iv[CMP_MEASURES][QSEL_MAX_RANKS] = {{0}};
    double *dst[CMP_MEASURES];
    for (int k = 0; k < CMP_MEASURES; k++) {
        map[k] = narrow_setup(&q[k]);
        for (int v = 0; v < nvk[k]; v++) {
            bool real = v < q[k].n_iv;
            lo[k][v] = _mm512_set1_epi32(real ? q[k].lo[v] : INT32_MAX);
            hi[k][v] = _mm512_set1_epi32(real ? q[k].hi[v] : INT32_MIN);
        }
        dst[k] = q[k].cand + q[k].n;
    }
    for (int64_t i = 0; i < n; i += 16) {
        __m512d e0[CMP_MEASURES], e1[CMP_MEASURES];
        errors8(&u, r + i, t + i, e0);
        errors8(&u, r + i + 8, t + i + 8, e1);
#pragma GCC unroll 3
        for (int k = 0; k < CMP_MEASURES; k++) {
            if (nvk[k] == 0)
                continue;
            __m512i key = keys16(e0[k], e1[k]);
            if (k != CMP_ULP) /* narrow, as the kernel compares them */
                key = narrow32(&map[k], key);
            __mmask16 in = 0;
#pragma GCC unroll 8
            for (int v = 0; v < nvk[k]; v++) {
                __mmask16 in_v = _mm512_mask_cmp_epi32_mask(
                    _mm512_cmp_epi32_mask(key, lo[k][v], _MM_CMPINT_NLT), key, hi[k][v],
                    _MM_CMPINT_LE);
                in_iv[k][v] += __builtin_popcount(in_v);
                in |= in_v;
            }
            _mm512_storeu_pd(dst[k], _mm512_maskz_compress_pd((__mmask8)in, e0[k]));
            dst[k] += __builtin_popcount(in & 0xff);
            _mm512_storeu_pd(dst[k], _mm512_maskz_compress_pd((__mmask8)(in >> 8), e1[k]));
            dst[k] += __builtin_popcount(in >> 8);
        }
    }
    for (int k = 0; k < CMP_MEASURES; k++) {
        q[k].n = dst[k] - q[k].cand;
        for (int v = 0; v < q[k].n_iv; v++)
            q[k].in_iv[v] += in_iv[k][v];
    }
}

#define EXPAND(nv, nu)                                                                         \
    TARGET static void expand_##nv##nu(const cmp_params *p, const float *r, const float *t,    \
                                       int64_t n, qsel *q)                                    \
    {                                                                                          \
        expand_n(p, r, t, n, q, nv, nu);                                                       \
    }
EXPAND(4, 0)
EXPAND(5, 0)
EXPAND(4, 1)
EXPAND(5, 1)
#undef EXPAND

const cmp_fast_ops cmp_fast_avx512_ops = {
    .store = {STORE_ROW(0), STORE_ROW(1)},
    .feed = {{ROW(0, 0), ROW(0, 1)}, {ROW(1, 0), ROW(1, 1)}},
    .count_specials = count_specials,
    .count_failures = count_failures,
    .find_first = find_first,
    .expand = {{expand_40, expand_50}, {expand_41, expand_51}},
};
#undef ROW
#undef STORE_ROW
