/* layerdiff — Sigmoid rows of the fused chains (see exec_fuse_ops.h).
 *
 * The portable row is activation.c's sigmoid_f one value at a time (libm's
 * expf, then 1 / (1 + e) or e / (1 + e)). PaddleOCR det ends in a Sigmoid
 * over 640 x 640 values: about 1 ms on one Zen 5 core that way.
 *
 * The AVX-512 row gives the same bits, 16 values at a time. Written
 * branch-free, sigmoid_f is (x >= 0 ? 1 : e) / (1 + e) with e =
 * expf(-|x|): the same IEEE float operations on the same e, so only e has to
 * match. glibc's expf (2.27 on) evaluates exp in double with a relative
 * error below 2^-33 and rounds that once to float; so wherever the exact
 * e^y is farther than that from a float rounding boundary (a midpoint
 * between two floats), its result is e^y correctly rounded. Here e^y is
 * evaluated in double with a relative error near 2^-50 (table of 2^(j/32),
 * degree-6 Taylor polynomial on |r| <= ln2/64, truncation 2^-58) and rounded
 * to float; a lane whose double lies within 2^-31 (relative) of a midpoint,
 * and every lane that is NaN or has -|x| < -87 (subnormal or zero e, where
 * that margin does not hold), is recomputed with sigmoid_f. About 1 lane in
 * 128 is; tests/exhaustive_sigmoid.c checks all 2^32 inputs against the
 * portable row. */
#include "backends/exec_fuse_ops.h"

#include <math.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* activation.c's sigmoid_f (libm's expf). */
static inline float sigmoid_f(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

void ld_fuse_sigmoid_rows_portable(float *d, const float *in, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = sigmoid_f(in[i]);
}

#if defined(__x86_64__)

/* 2^(j/32), j = 0 .. 31, rounded to double */
static const double exp2_32[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0,
};

/* e^y for 8 doubles y in [-87, 0]: y = (32 kh + j) ln2/32 + r, e^y =
 * 2^kh 2^(j/32) e^r. *unsafe: the lanes whose value rounded to float may
 * differ from glibc's expf (within 2^-31 of a midpoint between floats). */
__attribute__((target("avx512f"))) static inline __m256 exp_lanes(__m512d y, __mmask8 *unsafe)
{
    const __m512d inv_l = _mm512_set1_pd(0x1.71547652b82fep+5); /* 32 / ln2 */
    const __m512d l_hi = _mm512_set1_pd(0x1.62e42fefa39efp-6);  /* ln2 / 32, split */
    const __m512d l_lo = _mm512_set1_pd(0x1.abc9e3b39803fp-61);
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(y, inv_l),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, l_hi, y);
    r = _mm512_fnmadd_pd(k, l_lo, r);
    /* e^r - 1 by Horner, |r| <= ln2/64 + a little */
    __m512d p = _mm512_set1_pd(1.0 / 720);
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 120));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 24));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 6));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    p = _mm512_mul_pd(p, r);
    /* kh = floor(k / 32), j = k - 32 kh in 0 .. 31 (exact: k is an integer) */
    __m512d kh = _mm512_roundscale_pd(_mm512_mul_pd(k, _mm512_set1_pd(1.0 / 32)),
                                      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512d jd = _mm512_fnmadd_pd(kh, _mm512_set1_pd(32.0), k);
    /* j in the low bits of j + 2^52 */
    __m512i j = _mm512_castpd_si512(_mm512_add_pd(jd, _mm512_set1_pd(0x1p52)));
    __m512d t_lo = _mm512_permutex2var_pd(_mm512_loadu_pd(exp2_32), j, _mm512_loadu_pd(exp2_32 + 8));
    __m512d t_hi =
        _mm512_permutex2var_pd(_mm512_loadu_pd(exp2_32 + 16), j, _mm512_loadu_pd(exp2_32 + 24));
    __mmask8 upper = _mm512_test_epi64_mask(j, _mm512_set1_epi64(16));
    __m512d t = _mm512_mask_blend_pd(upper, t_lo, t_hi);
    /* t e^r = t + t (e^r - 1), then times 2^kh */
    __m512d e = _mm512_scalef_pd(_mm512_fmadd_pd(t, p, t), kh);
    /* the 29 bits a float drops: a midpoint is 2^28 */
    __m512i low = _mm512_and_si512(_mm512_castpd_si512(e), _mm512_set1_epi64((1 << 29) - 1));
    __m512i dist = _mm512_abs_epi64(_mm512_sub_epi64(low, _mm512_set1_epi64(1 << 28)));
    *unsafe = _mm512_cmplt_epi64_mask(dist, _mm512_set1_epi64(1 << 21));
    return _mm512_cvtpd_ps(e);
}

/* 16 values (the lanes of `active`) of d = sigmoid(in); the lanes that need
 * it recomputed with sigmoid_f. */
__attribute__((target("avx512f"))) static inline void sigmoid16(float *d, const float *in,
                                                               __mmask16 active)
{
    __m512 x = _mm512_maskz_loadu_ps(active, in);
    __m512 y = _mm512_castsi512_ps( /* -|x| */
        _mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
    /* NaN, or e subnormal or zero: not in the margin's reach */
    __mmask16 slow = _mm512_cmp_ps_mask(y, _mm512_set1_ps(-87.0f), _CMP_NGE_UQ);
    __mmask8 u_lo, u_hi;
    __m256 e_lo = exp_lanes(_mm512_cvtps_pd(_mm512_castps512_ps256(y)), &u_lo);
    __m256 y_hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(y), 1));
    __m256 e_hi = exp_lanes(_mm512_cvtps_pd(y_hi), &u_hi);
    slow = (__mmask16)((slow | u_lo | (unsigned)u_hi << 8) & active);
    __m512 e = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(e_lo)),
                                                   _mm256_castps_pd(e_hi), 1));
    __m512 one = _mm512_set1_ps(1.0f);
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NGE_UQ);
    __m512 num = _mm512_mask_blend_ps(neg, one, e);
    float xs[16]; /* the inputs kept: d may be in */
    if (slow)
        _mm512_storeu_ps(xs, x);
    _mm512_mask_storeu_ps(d, active, _mm512_div_ps(num, _mm512_add_ps(one, e)));
    while (slow) {
        int l = __builtin_ctz(slow);
        d[l] = sigmoid_f(xs[l]);
        slow &= (__mmask16)(slow - 1);
    }
}

__attribute__((target("avx512f"))) static void sigmoid_rows_avx512(float *d, const float *in,
                                                                  int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        sigmoid16(d + i, in + i, 0xffff);
    if (i < n)
        sigmoid16(d + i, in + i, (__mmask16)((1u << (n - i)) - 1));
}

bool ld_fuse_sigmoid_rows_avx512(float *d, const float *in, int64_t n)
{
    if (!__builtin_cpu_supports("avx512f"))
        return false;
    sigmoid_rows_avx512(d, in, n);
    return true;
}

#else

bool ld_fuse_sigmoid_rows_avx512(float *d, const float *in, int64_t n)
{
    (void)d, (void)in, (void)n;
    return false;
}

#endif

void ld_fuse_sigmoid_rows(float *d, const float *in, int64_t n)
{
    if (!ld_fuse_sigmoid_rows_avx512(d, in, n))
        ld_fuse_sigmoid_rows_portable(d, in, n);
}
