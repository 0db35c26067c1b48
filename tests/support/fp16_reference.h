/* layerdiff tests — an independent scalar reference for fp16 arithmetic.
 *
 * Nothing here uses the library: fp16 patterns are decoded with ldexp,
 * doubles are rounded to fp16 by scaling to the format's spacing and letting
 * the FPU round to an integer (round to nearest even), and division and
 * square root results are checked by bracketing with exact double products
 * instead of being computed. Used by tests/test_emulation_hw.c and
 * tests/exhaustive_emulation.c (header-only: the exhaustive programs link
 * the library and nothing else). */
#ifndef LAYERDIFF_TESTS_FP16_REFERENCE_H
#define LAYERDIFF_TESTS_FP16_REFERENCE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* The value of an fp16 pattern (NaN for NaN patterns). */
static inline double ref_fp16_value(uint16_t h)
{
    int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    double v;
    if (exponent == 0x1F)
        v = mantissa ? NAN : INFINITY;
    else if (exponent == 0)
        v = ldexp(mantissa, -24);
    else
        v = ldexp(1024 + mantissa, exponent - 25);
    return h & 0x8000 ? -v : v;
}

static inline bool ref_fp16_is_nan(uint16_t h)
{
    return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
}

/* x rounded to the nearest fp16, ties to even, overflowing to inf; the
 * pattern (NaN: 0x7E00 with x's sign). Exact for every double. */
static inline uint16_t ref_round_to_fp16(double x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x);
    if (isnan(x))
        return sign | 0x7E00;
    if (a == 0)
        return sign;
    int e = isinf(a) ? 16 : ilogb(a);
    int q = (e > -14 ? e : -14) - 10;        /* spacing 2^q */
    double r = nearbyint(ldexp(a, -q));      /* FPU, round to nearest even */
    double v = ldexp(r, q);
    if (v > 65504.0)
        return sign | 0x7C00;
    if (v < 0x1p-14)
        return sign | (uint16_t)ldexp(v, 24); /* subnormal (or zero) */
    int ev = ilogb(v);
    return sign | (uint16_t)((ev + 15) << 10) | (uint16_t)(ldexp(v, 10 - ev) - 1024);
}

/* Bounds of the values that round to the finite fp16 magnitude Q (to
 * nearest, ties to even): [lo, hi], with the end points included only when
 * Q's pattern is even. */
static inline void ref_fp16_interval(uint16_t q_abs, double *lo, double *hi, bool *ends_included)
{
    double Q = ref_fp16_value(q_abs);
    int e = Q == 0 ? -14 : ilogb(Q);
    double spacing = ldexp(1.0, (e > -14 ? e : -14) - 10);
    /* below a power of two of the normal range the spacing halves */
    bool power = (q_abs & 0x3FF) == 0 && (q_abs >> 10) > 1;
    *lo = Q - (power ? spacing / 4 : spacing / 2);
    *hi = Q + spacing / 2;
    *ends_included = (q_abs & 1) == 0;
}

/* Whether q is a / b rounded to nearest even (a, b: fp16 patterns). Finite
 * nonzero operands are checked by bracketing: lo * |b| <= |a| <= hi * |b|,
 * products exact in double (12 x 11 bits); the rest compares with the
 * (exact) IEEE double result rounded. */
static inline bool ref_check_div(uint16_t a, uint16_t b, uint16_t q)
{
    double x = ref_fp16_value(a), y = ref_fp16_value(b);
    if (!isfinite(x) || !isfinite(y) || x == 0 || y == 0) {
        uint16_t want = ref_round_to_fp16(x / y);
        return ref_fp16_is_nan(want) ? ref_fp16_is_nan(q) : want == q;
    }
    if ((q & 0x8000) != ((a ^ b) & 0x8000))
        return false;
    double A = fabs(x), B = fabs(y);
    uint16_t qa = q & 0x7FFF;
    if (qa == 0x7C00) /* inf: |a / b| >= 65520 */
        return A >= 65520.0 * B;
    if (qa > 0x7C00)
        return false;
    double lo, hi;
    bool ends;
    ref_fp16_interval(qa, &lo, &hi, &ends);
    if (qa == 0)
        return ends ? A <= hi * B : A < hi * B;
    return ends ? (lo * B <= A && A <= hi * B) : (lo * B < A && A < hi * B);
}

/* Whether q is sqrt(a) rounded to nearest even: lo^2 <= a <= hi^2. */
static inline bool ref_check_sqrt(uint16_t a, uint16_t q)
{
    double x = ref_fp16_value(a);
    if (!isfinite(x) || x <= 0) { /* NaN, +-inf, +-0, negative: IEEE's exact answers */
        uint16_t want = ref_round_to_fp16(sqrt(x));
        return ref_fp16_is_nan(want) ? ref_fp16_is_nan(q) : want == q;
    }
    if (q & 0x8000 || (q & 0x7FFF) >= 0x7C00)
        return false;
    double lo, hi;
    bool ends;
    ref_fp16_interval(q, &lo, &hi, &ends);
    if (q == 0)
        return false; /* sqrt of a positive fp16 is at least 2^-12 */
    return ends ? (lo * lo <= x && x <= hi * hi) : (lo * lo < x && x < hi * hi);
}

#endif
