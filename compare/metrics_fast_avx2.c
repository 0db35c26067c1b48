/* layerdiff — the AVX2 comparison kernel for float32 blocks: the AVX-512
 * kernel's pass (metrics_fast_avx512.c, whose comment says what it does
 * and why) for CPUs with AVX2, FMA, BMI2 and POPCNT but no AVX-512 (Zen 3,
 * Haswell to Alder Lake). The same contract (metrics_internal.h,
 * cmp_fast_ops): the same errors, keys, counts, verdicts and kept pairs
 * element by element; sums differ from the portable kernel only in
 * summation order and fused multiply-adds.
 *
 * What AVX2 lacks and how it is done instead, 8 elements per step:
 *  - no mask registers: compares give lane masks, counted by subtracting
 *    them from per-lane counters (reduced once per block) or by movemask
 *    and popcount;
 *  - no compress: the kept elements' byte indices are looked up by the 8-bit
 *    mask (keep_index) and their pairs copied by scalar code; the kept
 *    errors (expand_n) are gathered by vpermps with indices looked up the
 *    same way (pack4);
 *  - no embedded rounding: the verdict's float32 screen (screen_failures)
 *    rounds to nearest and compares with >=, proven below to flag every
 *    failing element as the AVX-512 kernel's rounded-down bound does;
 *  - no 64-bit max: 1/ulp from the exponent field by a max of the fields
 *    read as doubles (non-negative doubles order like their bits);
 *  - no two-source permute: the keys of 8 errors (the high halves of 8
 *    doubles) come from one vshufps, in the lane order KEY_ORDER below, and
 *    masks over keys are put back in element order (elem_order).
 * abs and rel keys are narrowed to 16 bits and compared side by side, 16
 * lanes per compare, as in the AVX-512 kernel. */
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compare/metrics_fast_avx2.h"
#include "compare/metrics_internal.h"


/* keep_index[m]: the indices (bytes, lane 0 first) of the elements of
 * key-order mask m (keys8), in element order; the other bytes 0: one load
 * in the pass (a chain of pdep, multiply and pext was slower). Filled
 * at load time (a constructor: no race between threads comparing at once). */
static uint64_t keep_index[256];

__attribute__((constructor)) static void keep_index_init(void)
{
    for (unsigned m = 0; m < 256; m++) {
        unsigned e = elem_order(m), n = 0;
        uint64_t idx = 0;
        for (unsigned lane = 0; lane < 8; lane++)
            if (e >> lane & 1u)
                idx |= (uint64_t)lane << (8 * n++);
        keep_index[m] = idx;
    }
}


/* A vector of 16-bit bounds laid out like loop_errors' abs and rel keys. */
TARGET static INLINE __m256i bounds_both(int32_t abs_bound, int32_t rel_bound)
{
    int64_t a = (int64_t)((uint64_t)(uint16_t)abs_bound * 0x0001000100010001ull);
    int64_t r = (int64_t)((uint64_t)(uint16_t)rel_bound * 0x0001000100010001ull);
    return _mm256_set_epi64x(r, a, r, a);
}

/* ---- the kernel ---- */

/* Which of 8 elements may fail (all bits of a lane), judged in float32 with
 * bounds that can only flag too many; a flagged block is recounted exactly
 * (count_failures). The AVX-512 kernel rounds its bound down; here it is
 * rounded to nearest and compared with >=, which flags every element the
 * other does. Failing needs af > T (the AVX-512 kernel's argument: T = atol
 * (1 - 2^-23) and rtol |r| (1 - 2^-23), or (atol + rtol |r|)(1 - 2^-23) in
 * allclose mode), and the bound y = rt |r| (or rt |r| + ta) is at most
 * T (1 - 2^-21), rt and ta being cmp_screen_bound's. If RN32(y) is normal
 * it is at most y (1 + 2^-24) < T < af. Else (subnormal, 0) af, a float
 * above y, is at least the float above y, so af >= RN32(y). If y rounds to
 * +inf, y and T exceed FLT_MAX: af > T is +inf, and inf >= inf. */
TARGET static INLINE __m256 screen_failures(__m256 af, __m256 arf, __m256 ta, __m256 rt,
                                            const bool allclose)
{
    if (allclose)
        return _mm256_cmp_ps(af, _mm256_fmadd_ps(rt, arf, ta), _CMP_GE_OQ);
    /* af > ta and af >= rt |r| in one compare: ta here is the float above
       the bound (screen_ta), and for floats af > x is af >= the float above
       x (FLT_MAX's is +inf, which only an infinite af reaches) */
    return _mm256_cmp_ps(af, _mm256_max_ps(_mm256_mul_ps(rt, arf), ta), _CMP_GE_OQ);
}

/* The atol bound screen_failures takes: cmp_screen_bound's, or in the
 * Polygraphy mode the float above it (finite and >= 0: at most +inf). */
static float screen_ta(const cmp_params *p, const bool allclose)
{
    float ta = cmp_screen_bound(p->atol);
    return allclose ? ta : nextafterf(ta, INFINITY);
}

/* abs and rel keys side by side (the low 4 words of each
 * 128-bit half abs, the high 4 rel: vpackssdw) against nv intervals each,
 * given as lo - 1 and hi (lo > every key > hi for pads): key >= lo is
 * key > lo - 1, and with the key the first operand both bounds can stay in
 * memory (16 registers do not hold them, the counters and the rest).
 * ge[v] counts per lane the keys >= lo[v] (at most CMP_BLOCK / 8 per
 * block). Returns, in key order, the elements inside an interval of either. */
_Static_assert(CMP_BLOCK / 8 <= INT16_MAX, "16-bit lane counts");
TARGET static INLINE unsigned intervals_both(const __m256i *lo_m1, const __m256i *hi, int nv,
                                             __m256i key, __m256i *ge)
{
    __m256i in = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int v = 0; v < nv; v++) {
        __m256i at_least = _mm256_cmpgt_epi16(key, lo_m1[v]);
        in = _mm256_or_si256(in, _mm256_andnot_si256(_mm256_cmpgt_epi16(key, hi[v]), at_least));
        ge[v] = _mm256_sub_epi16(ge[v], at_least);
    }
    /* an element is inside when its abs key or its rel key is */
    in = _mm256_or_si256(in, _mm256_shuffle_epi32(in, _MM_SHUFFLE(1, 0, 3, 2)));
    return _pext_u32((unsigned)_mm256_movemask_epi8(in), 0x00550055u);
}

/* 32-bit keys (ulp) the same way against nu intervals. */
TARGET static INLINE unsigned intervals32(const __m256i *lo_m1, const __m256i *hi, int nu,
                                          __m256i key, __m256i *ge)
{
    __m256i in = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int v = 0; v < nu; v++) {
        __m256i at_least = _mm256_cmpgt_epi32(key, lo_m1[v]);
        in = _mm256_or_si256(in, _mm256_andnot_si256(_mm256_cmpgt_epi32(key, hi[v]), at_least));
        ge[v] = _mm256_sub_epi32(ge[v], at_least);
    }
    return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in));
}

TARGET static INLINE int64_t sum_epi16(__m256i v)
{
    __m256i w = _mm256_madd_epi16(v, _mm256_set1_epi16(1));
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(x);
}

TARGET static INLINE double reduce_add(__m256d v)
{
    __m128d x = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(x, _mm_unpackhi_pd(x, x)));
}

TARGET static INLINE double reduce_max(__m256d v)
{
    __m128d x = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_max_sd(x, _mm_unpackhi_pd(x, x)));
}

TARGET static INLINE float reduce_min_ps(__m256 v)
{
    __m128 x = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_min_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_min_ss(x, _mm_shuffle_ps(x, x, 1)));
}

TARGET static INLINE float reduce_max_ps(__m256 v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    return _mm_cvtss_f32(_mm_max_ss(x, _mm_shuffle_ps(x, x, 1)));
}

TARGET static INLINE uint32_t reduce_min_epu32(__m256i v)
{
    __m128i x = _mm_min_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return (uint32_t)_mm_cvtsi128_si32(x);
}

/* The pass over a block runs in chunks of CHUNK elements, each in four
 * loops (float32, the side sums, the errors, the intervals; a fifth, the
 * verdict's screen, only in a chunk with an abs error above atol): AVX2 has 16
 * vector registers, and one loop holding the AVX-512 kernel's 18
 * accumulators, its constants and the interval counters kept about a third
 * of its instructions busy spilling and reloading them. The chunk stays in
 * L1 between the loops; the keys go through a small buffer. */
enum { CHUNK = CMP_CHUNK_MIN, KEEP_RUN = 256 };
_Static_assert(CMP_BLOCK % CHUNK == 0 && CHUNK % 16 == 0, "chunks of whole steps");

/* The loops' constants, read from memory in every step (opaque): with them
 * in registers GCC spilled accumulators instead, and an accumulator kept in
 * memory puts a store-to-load forwarding (about 7 cycles on Zen 3) into the
 * loop's carried chain: the float32 loop ran at about half speed and the
 * error loop's Σ(t - r)² chain bound it. Loads of constants cost nothing
 * measurable (3 loads per cycle, folded into the instructions). */
typedef struct loop_consts {
    __m256 ta, rt;
    __m256i abs_mask;
    __m256d r_shift, t_shift;
    __m256d sign, rel_eps;          /* -0.0, LD_COMPARE_REL_EPSILON */
    __m256d exp_field, room_min;    /* room_min: exp_field - ulp_consts' emin */
    __m256i base_c;                 /* ulp_consts' base - exp_field (mod 2^64) */
    __m256i bias_abs, bias_rel, one;
    __m256i shift_abs, shift_rel;   /* per lane: vpsravd takes them from memory */
} loop_consts;

/* Hides kc's value from the optimizer, so that the constants are loaded
 * where used instead of hoisted into registers (loop_consts). */
#define OPAQUE(kc) __asm__("" : "+r"(kc))

/* Loops 1 and 2, float32 and the side sums: min, max, smallest |x|, exact
 * matches; Σ(x - c) and Σ(x - c)². (fail: loop_screen's, in the few chunks
 * that need it.) */
typedef struct side_state {
    __m256 r_min, r_max, t_min, t_max, fail;
    __m256i min_abs, equal;
    __m256d r1, r2, t1, t2;
} side_state;

TARGET static INLINE void loop_sides(const loop_consts *kc, const float *r, const float *t, int n,
                                     side_state *st, const bool shifted, const bool screen,
                                     const bool allclose)
{
    side_state s = *st;
    for (int i16 = 0; i16 < n; i16 += 16) { /* n: a multiple of 16 */
        OPAQUE(kc);
#pragma GCC unroll 2
        for (int i = i16; i < i16 + 16; i += 8) {
            __m256 rf = _mm256_loadu_ps(r + i), tf = _mm256_loadu_ps(t + i);
            __m256i rb = _mm256_and_si256(_mm256_castps_si256(rf), kc->abs_mask);
            __m256i tb = _mm256_and_si256(_mm256_castps_si256(tf), kc->abs_mask);
            s.min_abs = _mm256_min_epu32(s.min_abs, _mm256_min_epu32(rb, tb));
            s.equal = _mm256_sub_epi32(s.equal,
                                       _mm256_castps_si256(_mm256_cmp_ps(rf, tf, _CMP_EQ_OQ)));
            if (screen) { /* loop_screen's, sharing the loads and |r| */
                __m256 af = _mm256_castsi256_ps(_mm256_and_si256(
                    _mm256_castps_si256(_mm256_sub_ps(tf, rf)), kc->abs_mask));
                s.fail = _mm256_or_ps(s.fail, screen_failures(af, _mm256_castsi256_ps(rb),
                                                              kc->ta, kc->rt, allclose));
            }
            s.r_min = _mm256_min_ps(s.r_min, rf);
            s.r_max = _mm256_max_ps(s.r_max, rf);
            s.t_min = _mm256_min_ps(s.t_min, tf);
            s.t_max = _mm256_max_ps(s.t_max, tf);
        }
    }
    /* the side sums in a loop of their own: with them in the loop above,
       its 11 accumulators and the temporaries did not fit in 16 registers */
#pragma GCC unroll 2
    for (int i = 0; i < n; i += 8) {
        OPAQUE(kc);
        __m256d rd0 = _mm256_cvtps_pd(_mm_loadu_ps(r + i));
        __m256d td0 = _mm256_cvtps_pd(_mm_loadu_ps(t + i));
        __m256d rd1 = _mm256_cvtps_pd(_mm_loadu_ps(r + i + 4));
        __m256d td1 = _mm256_cvtps_pd(_mm_loadu_ps(t + i + 4));
        if (shifted) {
            rd0 = _mm256_sub_pd(rd0, kc->r_shift);
            td0 = _mm256_sub_pd(td0, kc->t_shift);
            rd1 = _mm256_sub_pd(rd1, kc->r_shift);
            td1 = _mm256_sub_pd(td1, kc->t_shift);
        }
        /* the two halves added first: one addition per step in each
           accumulator's carried chain (3 cycles, where two fused
           multiply-adds were 8): only the order of the summation and where
           it rounds change, as between the portable and AVX-512 kernels */
        s.r1 = _mm256_add_pd(s.r1, _mm256_add_pd(rd0, rd1));
        s.t1 = _mm256_add_pd(s.t1, _mm256_add_pd(td0, td1));
        s.r2 = _mm256_add_pd(s.r2, _mm256_fmadd_pd(rd1, rd1, _mm256_mul_pd(rd0, rd0)));
        s.t2 = _mm256_add_pd(s.t2, _mm256_fmadd_pd(td1, td1, _mm256_mul_pd(td0, td0)));
    }
    *st = s;
}

/* The screened verdict of a chunk (screen_failures), run only for a chunk
 * holding an abs error above atol (kernel): no element of any other chunk
 * can fail. In both modes failing needs |t - r| > atol: Polygraphy's rule
 * says so, and allclose fails only when |t - r| > RN(atol + RN(rtol |r|)),
 * which is at least atol (rtol |r| >= 0, rounding is monotone). The chunk
 * is in L1 by then (loop_sides read it). */
TARGET static INLINE void loop_screen(const loop_consts *kc, const float *r, const float *t,
                                      int n, __m256 *fail, const bool allclose)
{
    __m256 f = *fail;
    for (int i = 0; i < n; i += 8) {
        OPAQUE(kc);
        __m256 rf = _mm256_loadu_ps(r + i), tf = _mm256_loadu_ps(t + i);
        __m256 arf = _mm256_and_ps(rf, _mm256_castsi256_ps(kc->abs_mask));
        __m256 af = _mm256_and_ps(_mm256_sub_ps(tf, rf), _mm256_castsi256_ps(kc->abs_mask));
        f = _mm256_or_ps(f, screen_failures(af, arf, kc->ta, kc->rt, allclose));
    }
    *fail = f;
}

/* Loop 3, the errors in double: their sums and maxima, Σ(t - r)², and
 * either every error stored or the keys to keys (store false): per 8
 * elements the abs and rel narrow keys (side by side,
 * saturated to 16 bits: the low 4 words of each 128-bit half abs, the high 4
 * rel), then the ulp keys. */
typedef struct err_state {
    __m256d abs, rel, ulp, dd, max_abs, max_rel, max_ulp;
} err_state;

TARGET static INLINE err4 errors_step(const loop_consts *kc, const float *r, const float *t,
                                      const bool low)
{
    __m256d rd = _mm256_cvtps_pd(_mm_loadu_ps(r)), td = _mm256_cvtps_pd(_mm_loadu_ps(t));
    err4 e;
    e.diff = _mm256_sub_pd(td, rd);
    e.abs = _mm256_andnot_pd(kc->sign, e.diff);
    __m256d ar = _mm256_andnot_pd(kc->sign, rd);
    /* with low false every |r| is at least 2^emin (loop_errors): no r is 0
       and no exponent below emin */
    if (low) { /* r = 0 divides by LD_COMPARE_REL_EPSILON instead */
        __m256d r_zero = _mm256_cmp_pd(ar, _mm256_setzero_pd(), _CMP_EQ_OQ);
        ar = _mm256_blendv_pd(ar, kc->rel_eps, r_zero);
    }
    e.rel = _mm256_div_pd(e.abs, ar);
    /* ulp_error's base - max(ex, emin), ex the exponent field of r, as
       (base - F) + min(F - ex, F - emin), F the whole field: F - ex is
       ~r & F (one vandnpd with F from memory, where base - ex needed base
       loaded into a register first), and the fields read as non-negative
       doubles order like their bits, as in ulp_error; the same integer */
    __m256d room = _mm256_andnot_pd(rd, kc->exp_field);
    if (low)
        room = _mm256_min_pd(room, kc->room_min);
    __m256i scale = _mm256_add_epi64(_mm256_castpd_si256(room), kc->base_c);
    e.ulp = _mm256_mul_pd(e.abs, _mm256_castsi256_pd(scale)); /* exact: a power of two */
    return e;
}

/* ((key - 1) >> shift) - bias; folded (fold_ok), (key - (1 + (bias << shift)))
 * >> shift, one instruction fewer: the same integer, floor((key - 1) / 2^shift)
 * - bias, when no subtraction wraps. */
TARGET static INLINE __m256i narrow_kc(__m256i bias, __m256i shift, __m256i one, __m256i key,
                                       const bool folded)
{
    if (folded)
        return _mm256_srav_epi32(_mm256_sub_epi32(key, bias), shift);
    return _mm256_sub_epi32(_mm256_srav_epi32(_mm256_sub_epi32(key, one), shift), bias);
}

/* Whether a narrow map can be folded: the keys of finite errors lie in
 * 0..0x7FEFFFFF (below +inf's), so key - (1 + B), B = bias << shift, stays
 * inside int32 for every key when -0x100000 <= B <= INT32_MAX - 1 (both
 * bounds with room to spare: 0x7FEFFFFF - 1 + 0x100000 < 2^31). Outside
 * (intervals of errors near the ends of the double range) the kernel
 * narrows unfolded. */
bool cmp_avx2_unfolded = false;

static bool fold_ok(const qsel *q)
{
    if (cmp_avx2_unfolded)
        return false;
    int64_t b = (int64_t)q->bias * ((int64_t)1 << q->shift);
    return q->shift >= 0 && q->shift < 31 && b >= -0x100000 && b <= INT32_MAX - 1;
}

TARGET static INLINE void loop_errors(const loop_consts *kc, const float *r, const float *t,
                                      int n, err_state *st, double *const out[CMP_MEASURES],
                                      __m256i *keys, const bool store, const bool feed,
                                      const bool low, const bool folded)
{
    err_state s = *st;
    __m256i *kp = keys;
    for (int i = 0; i < n; i += 8, kp += 2) {
        OPAQUE(kc);
        /* the next chunk, r's and t's lines (each line twice: two
           prefetches cost fewer instructions than choosing one): the
           hardware's prefetch falls behind, and issued here, in the loop
           bound by vector instructions and divisions, the requests spread
           over the chunk's time; from the float32 loop (4 KiB ahead, as the
           AVX-512 kernel) they came in bursts while that loop waited for
           memory: about 8% slower (paired timing, Zen 3). Further ahead, or
           to L2, was slower. */
        _mm_prefetch((const char *)(r + i + CHUNK), _MM_HINT_T0);
        _mm_prefetch((const char *)(t + i + CHUNK), _MM_HINT_T0);
        err4 lo = errors_step(kc, r + i, t + i, low);
        err4 hi = errors_step(kc, r + i + 4, t + i + 4, low);
        /* the halves added first (loop_sides): one addition in each sum's
           carried chain per step */
        s.abs = _mm256_add_pd(s.abs, _mm256_add_pd(lo.abs, hi.abs));
        s.rel = _mm256_add_pd(s.rel, _mm256_add_pd(lo.rel, hi.rel));
        s.ulp = _mm256_add_pd(s.ulp, _mm256_add_pd(lo.ulp, hi.ulp));
        s.dd = _mm256_fmadd_pd(hi.diff, hi.diff, _mm256_fmadd_pd(lo.diff, lo.diff, s.dd));
        s.max_abs = _mm256_max_pd(s.max_abs, _mm256_max_pd(lo.abs, hi.abs));
        s.max_rel = _mm256_max_pd(s.max_rel, _mm256_max_pd(lo.rel, hi.rel));
        s.max_ulp = _mm256_max_pd(s.max_ulp, _mm256_max_pd(lo.ulp, hi.ulp));
        if (store) {
            _mm256_storeu_pd(out[CMP_ABS] + i, lo.abs);
            _mm256_storeu_pd(out[CMP_ABS] + i + 4, hi.abs);
            _mm256_storeu_pd(out[CMP_REL] + i, lo.rel);
            _mm256_storeu_pd(out[CMP_REL] + i + 4, hi.rel);
            _mm256_storeu_pd(out[CMP_ULP] + i, lo.ulp);
            _mm256_storeu_pd(out[CMP_ULP] + i + 4, hi.ulp);
        }
        if (feed) {
            /* abs and rel narrow keys side by side, saturated to 16 bits */
            __m256i ka = narrow_kc(kc->bias_abs, kc->shift_abs, kc->one, keys8(lo.abs, hi.abs),
                                   folded);
            __m256i kr = narrow_kc(kc->bias_rel, kc->shift_rel, kc->one, keys8(lo.rel, hi.rel),
                                   folded);
            _mm256_storeu_si256(kp, _mm256_packs_epi32(ka, kr));
            _mm256_storeu_si256(kp + 1, keys8(lo.ulp, hi.ulp));
        }
    }
    *st = s;
}

/* Loop 4, the keys against the intervals: per lane counts of the keys at
 * or above each interval's start, and the (r, t) pairs inside any kept. */
typedef struct iv_state {
    __m256i ge2[QSEL_MAX_RANKS], ge_u[QSEL_MAX_RANKS];
    float *kept_r, *kept_t;
} iv_state;

TARGET static INLINE void loop_intervals(const float *r, const float *t, int n,
                                         const __m256i *keys, const __m256i *lo2,
                                         const __m256i *hi2, const __m256i *lo_u,
                                         const __m256i *hi_u, iv_state *st, const int nv,
                                         const int nu)
{
    __m256i ge2[QSEL_MAX_RANKS], ge_u[QSEL_MAX_RANKS];
    for (int v = 0; v < nv; v++)
        ge2[v] = st->ge2[v];
    for (int v = 0; v < nu; v++)
        ge_u[v] = st->ge_u[v];
    float *kept_r = st->kept_r, *kept_t = st->kept_t;
    /* the kept elements' indices (one byte each, within a run of 256), then
       their pairs copied by scalar code: a vector gather per 8 elements
       (an index load, two vpermps and two stores) took vector instructions
       from the tests, and only about 7% of the elements are kept */
    _Static_assert(KEEP_RUN % 8 == 0 && KEEP_RUN <= 256, "byte indices within a run");
    uint8_t kept_at[KEEP_RUN + 8];
    for (int run = 0; run < n; run += KEEP_RUN) {
        int end = n - run < KEEP_RUN ? n : run + KEEP_RUN;
        unsigned kept = 0;
        /* pointers and the byte offset stepped, not derived from an index
           each step (that was 7 of the step's ~48 instructions) */
        const __m256i *kp = keys + run / 4, *kend = keys + end / 4;
        for (uint64_t place = 0; kp < kend; kp += 2, place += 8 * 0x0101010101010101ull) {
            unsigned in = 0;
            if (nv > 0)
                in |= intervals_both(lo2, hi2, nv, _mm256_loadu_si256(kp), ge2);
            if (nu > 0)
                in |= intervals32(lo_u, hi_u, nu, _mm256_loadu_si256(kp + 1), ge_u);
            /* keep_index's lanes (0..7, the unused bytes 0) plus the step's
               place in the run: no byte carries into the next */
            uint64_t at = keep_index[in] + place;
            memcpy(kept_at + kept, &at, sizeof at);
            kept += (unsigned)__builtin_popcount(in);
        }
        const float *rr = r + run, *tt = t + run;
        for (unsigned k = 0; k < kept; k++) {
            kept_r[k] = rr[kept_at[k]];
            kept_t[k] = tt[kept_at[k]];
        }
        kept_r += kept;
        kept_t += kept;
    }
    for (int v = 0; v < nv; v++)
        st->ge2[v] = ge2[v];
    for (int v = 0; v < nu; v++)
        st->ge_u[v] = ge_u[v];
    st->kept_r = kept_r;
    st->kept_t = kept_t;
}

/* The whole block; the flags and counts are constants in each
 * instantiation. nv: intervals of abs and of rel (padded), nu: of ulp. */
TARGET static INLINE void kernel(const cmp_kernel_args *A, cmp_kernel_result *R,
                                 const bool store, const bool shifted, const bool allclose,
                                 const int nv, const int nu)
{
    const cmp_params *p = A->p;
    const bool feed = nv + nu > 0;
    const __m256d zero = _mm256_setzero_pd();
    side_state ss = {
        .r_min = _mm256_set1_ps(INFINITY), .r_max = _mm256_set1_ps(-INFINITY),
        .t_min = _mm256_set1_ps(INFINITY), .t_max = _mm256_set1_ps(-INFINITY),
        .fail = _mm256_setzero_ps(), .min_abs = _mm256_set1_epi32(-1),
        .equal = _mm256_setzero_si256(), .r1 = zero, .r2 = zero, .t1 = zero, .t2 = zero,
    };
    err_state es = {zero, zero, zero, zero, _mm256_set1_pd(-1.0), _mm256_set1_pd(-1.0),
                    _mm256_set1_pd(-1.0)};
    const ulp_consts u = ulp_setup(p);
    loop_consts kc = {
        .ta = _mm256_set1_ps(screen_ta(p, allclose)),
        .rt = _mm256_set1_ps(cmp_screen_bound(p->rtol)),
        .abs_mask = _mm256_set1_epi32(0x7fffffff),
        .r_shift = _mm256_set1_pd(p->ref_shift), .t_shift = _mm256_set1_pd(p->test_shift),
        .sign = _mm256_set1_pd(-0.0), .rel_eps = _mm256_set1_pd(LD_COMPARE_REL_EPSILON),
        .exp_field = u.exp_field,
        .room_min = _mm256_castsi256_pd(_mm256_sub_epi64(_mm256_castpd_si256(u.exp_field),
                                                         _mm256_castpd_si256(u.emin))),
        .base_c = _mm256_sub_epi64(u.base, _mm256_castpd_si256(u.exp_field)),
        .one = _mm256_set1_epi32(1),
    };
    /* the narrow maps folded into one subtraction where that cannot wrap */
    const bool folded = feed && fold_ok(&A->q[CMP_ABS]) && fold_ok(&A->q[CMP_REL]);
    if (feed) {
        kc.bias_abs = _mm256_set1_epi32(
            folded ? (int32_t)(1 + (int64_t)A->q[CMP_ABS].bias * ((int64_t)1 << A->q[CMP_ABS].shift))
                   : A->q[CMP_ABS].bias);
        kc.bias_rel = _mm256_set1_epi32(
            folded ? (int32_t)(1 + (int64_t)A->q[CMP_REL].bias * ((int64_t)1 << A->q[CMP_REL].shift))
                   : A->q[CMP_REL].bias);
        /* vpsravd's count per lane: like vpsrad's, above 31 it fills with the sign */
        kc.shift_abs = _mm256_set1_epi32(A->q[CMP_ABS].shift);
        kc.shift_rel = _mm256_set1_epi32(A->q[CMP_REL].shift);
    }
    const loop_consts *kcp = &kc;
    /* the bits of 2^emin as a float (at least the smallest subnormal, 2^-149;
       +inf when emin exceeds the floats' range: no finite |x| reaches it) */
    float low_f = ldexpf(1.0f, p->ulp_emin < -149 ? -149 : p->ulp_emin > 128 ? 128 : p->ulp_emin);
    uint32_t low_bits;
    memcpy(&low_bits, &low_f, sizeof low_bits);
    iv_state is;
    __m256i lo2[QSEL_MAX_RANKS], hi2[QSEL_MAX_RANKS]; /* abs | rel bounds, 16-bit */
    __m256i lo_u[QSEL_MAX_RANKS], hi_u[QSEL_MAX_RANKS];
    __m256i keys[CHUNK / 4];
    for (int v = 0; v < nv; v++) {
        /* lo - 1: intervals lie inside -32766..32766, pads have lo = 32767 */
        lo2[v] = bounds_both(A->lo[CMP_ABS][v] - 1, A->lo[CMP_REL][v] - 1);
        hi2[v] = bounds_both(A->hi[CMP_ABS][v], A->hi[CMP_REL][v]);
        is.ge2[v] = _mm256_setzero_si256();
    }
    for (int v = 0; v < nu; v++) {
        lo_u[v] = _mm256_set1_epi32((int)A->lo[CMP_ULP][v] - 1); /* lo >= 1, pads INT32_MAX */
        hi_u[v] = _mm256_set1_epi32((int)A->hi[CMP_ULP][v]);
        is.ge_u[v] = _mm256_setzero_si256();
    }
    is.kept_r = A->kept_r;
    is.kept_t = A->kept_t;
    uint32_t block_min = UINT32_MAX;
    bool screen_next = false;
    for (int c = 0; c < A->m16; c += CHUNK) {
        int n = A->m16 - c < CHUNK ? A->m16 - c : CHUNK;
        const float *r = A->r + c, *t = A->t + c;
        ss.min_abs = _mm256_set1_epi32(-1); /* each chunk's own (n_chunk_min) */
        /* with the screen when the chunk before needed it (abs errors above
           atol tend to come in runs: large values), else without */
        if (screen_next)
            loop_sides(kcp, r, t, n, &ss, shifted, true, allclose);
        else
            loop_sides(kcp, r, t, n, &ss, shifted, false, allclose);
        uint32_t chunk_min = reduce_min_epu32(ss.min_abs);
        R->chunk_min_abs[c / CHUNK] = chunk_min;
        block_min = chunk_min < block_min ? chunk_min : block_min;
        double *out[CMP_MEASURES];
        for (int k = 0; k < CMP_MEASURES; k++)
            out[k] = store ? A->store[k] + c : NULL;
        /* in most chunks every |r| is at least 2^emin (the smallest |r| or
           |t| of the chunk, from loop_sides, says so): then the relative
           error's denominator needs no test for 0 and the ulp exponent no
           clamp (errors_step) */
        bool low = chunk_min < low_bits;
        /* the chunk's largest abs error, then the block's again (a maximum:
           the same whatever the grouping) */
        __m256d block_max_abs = es.max_abs;
        es.max_abs = _mm256_set1_pd(-1.0);
        if (!low && folded)
            loop_errors(kcp, r, t, n, &es, out, keys, store, feed, false, true);
        else if (!low)
            loop_errors(kcp, r, t, n, &es, out, keys, store, feed, false, false);
        else if (folded)
            loop_errors(kcp, r, t, n, &es, out, keys, store, feed, true, true);
        else
            loop_errors(kcp, r, t, n, &es, out, keys, store, feed, true, false);
        /* no element of a chunk whose abs errors are all within atol fails
           (loop_screen): the verdict's screen runs only where one is not */
        bool over = reduce_max(es.max_abs) > p->atol;
        if (over && !screen_next)
            loop_screen(kcp, r, t, n, &ss.fail, allclose);
        screen_next = over;
        es.max_abs = _mm256_max_pd(es.max_abs, block_max_abs);
        if (feed)
            loop_intervals(r, t, n, keys, lo2, hi2, lo_u, hi_u, &is, nv, nu);
    }
    R->sum[CMP_ABS] = reduce_add(es.abs);
    R->sum[CMP_REL] = reduce_add(es.rel);
    R->sum[CMP_ULP] = reduce_add(es.ulp);
    R->max[CMP_ABS] = reduce_max(es.max_abs);
    R->max[CMP_REL] = reduce_max(es.max_rel);
    R->max[CMP_ULP] = reduce_max(es.max_ulp);
    R->dd = reduce_add(es.dd);
    R->r1 = reduce_add(ss.r1);
    R->r2 = reduce_add(ss.r2);
    R->t1 = reduce_add(ss.t1);
    R->t2 = reduce_add(ss.t2);
    R->r_min = reduce_min_ps(ss.r_min);
    R->r_max = reduce_max_ps(ss.r_max);
    R->t_min = reduce_min_ps(ss.t_min);
    R->t_max = reduce_max_ps(ss.t_max);
    R->min_abs = block_min;
    R->n_chunk_min = (A->m16 + CHUNK - 1) / CHUNK;
    R->equal = sum_epi32(ss.equal);
    R->maybe_fail = !_mm256_testz_ps(ss.fail, ss.fail);
    R->kept = feed ? is.kept_r - A->kept_r : 0;
    memset(R->ge, 0, sizeof R->ge);
    /* the per-lane counts: abs in words 0-3 of each 128-bit half, rel in 4-7 */
    const __m256i abs_words = _mm256_set_epi64x(0, -1, 0, -1);
    for (int v = 0; v < nv; v++) {
        R->ge[CMP_ABS][v] = sum_epi16(_mm256_and_si256(is.ge2[v], abs_words));
        R->ge[CMP_REL][v] = sum_epi16(_mm256_andnot_si256(abs_words, is.ge2[v]));
    }
    for (int v = 0; v < nu; v++)
        R->ge[CMP_ULP][v] = sum_epi32(is.ge_u[v]);
}


/* Instantiations as in the AVX-512 file: [allclose][shifted] for storing;
 * for feeding also [ulp intervals 0/1][abs and rel padded to 4 or 5]. */
#define STORE_KERNEL(ac, sh)                                                                   \
    TARGET static void kernel_store_##ac##sh(const cmp_kernel_args *A, cmp_kernel_result *R)   \
    {                                                                                          \
        kernel(A, R, true, sh, ac, 0, 0);                                                      \
    }
#define FEED_KERNEL(ac, sh, nv, nu)                                                            \
    TARGET static void kernel_feed_##ac##sh##nv##nu(const cmp_kernel_args *A,                 \
                                                    cmp_kernel_result *R)                     \
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
const cmp_fast_ops cmp_fast_avx2_ops = {
    .store = {STORE_ROW(0), STORE_ROW(1)},
    .feed = {{ROW(0, 0), ROW(0, 1)}, {ROW(1, 0), ROW(1, 1)}},
    .count_specials = cmp_avx2_count_specials,
    .count_failures = cmp_avx2_count_failures,
    .find_first = cmp_avx2_find_first,
    .expand = {{cmp_avx2_expand_40, cmp_avx2_expand_50}, {cmp_avx2_expand_41, cmp_avx2_expand_51}},
};
#undef ROW
#undef STORE_ROW
