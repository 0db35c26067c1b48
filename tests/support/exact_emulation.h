/* layerdiff tests — random values of a precision and an exact emulation of
 * reduced-precision accumulation, independent of the library's arithmetic
 * (tests/test_accumulate.c, tests/test_accumulate_kernels.c). Header-only;
 * include after <cmocka.h>.
 *
 * emul_step is one accumulation step, round_p(acc + a * b) or
 * round_p(acc + a), computed as the exact sum in a 128-bit integer and
 * rounded to fp16 or bf16 by integer code, counting overflows. */
#ifndef LAYERDIFF_TESTS_EXACT_EMULATION_H
#define LAYERDIFF_TESTS_EXACT_EMULATION_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "layerdiff/round.h"

/* --- random values --------------------------------------------------------------------- */

static uint64_t rng_state = 0x853c49e6748fea9bULL;

static inline uint64_t rnd64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline int rnd_int(int lo, int hi) /* inclusive */
{
    return lo + (int)(rnd64() % (uint64_t)(hi - lo + 1));
}

static inline int digits_of(ld_precision p)
{
    return p == LD_PRECISION_BF16 ? 8 : 11;
}

/* A value of precision p: random sign and mantissa, exponent in [emin, emax],
 * zero one time in 16. */
static inline float rnd_value(ld_precision p, int emin, int emax)
{
    if (rnd64() % 16 == 0)
        return rnd64() & 1 ? -0.0f : 0.0f;
    int d = digits_of(p);
    double m = 1.0 + (double)(rnd64() % (1u << (d - 1))) / (double)(1u << (d - 1));
    float v = (float)ldexp(rnd64() & 1 ? -m : m, rnd_int(emin, emax));
    return ld_round_to_precision(v, p, NULL);
}

static inline void fill(float *x, int64_t n, ld_precision p, int emin, int emax)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rnd_value(p, emin, emax);
}

static inline bool same(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b));
}

static inline void expect_same(const float *got, const float *want, int64_t n, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (!same(got[i], want[i]))
            fail_msg("%s: element %lld: got %a, expected %a", what, (long long)i, got[i],
                     want[i]);
}

/* --- exact arithmetic, independent of the library ------------------------------------- */

typedef __int128 i128;
typedef unsigned __int128 u128;

/* Sums are integers in units of 2^unit: fp16 values are multiples of 2^-24
 * and their products of 2^-48; the bf16 test values (exponents >= -20) are
 * multiples of 2^-27, products of 2^-54. */
static inline int unit_of(ld_precision p)
{
    return p == LD_PRECISION_BF16 ? -54 : -48;
}

/* v / 2^unit, which must be an integer. */
static inline i128 units(float v, int unit)
{
    if (v == 0)
        return 0;
    int e;
    double f = frexp(fabs((double)v), &e);
    i128 m = (i128)ldexp(f, 24); /* v = m * 2^(e - 24) */
    int sh = e - 24 - unit;
    if (sh >= 0) {
        assert_true(sh < 100);
        m <<= sh;
    } else {
        assert_true(-sh < 100);
        assert_true((m & (((i128)1 << -sh) - 1)) == 0); /* else the unit is too coarse */
        m >>= -sh;
    }
    return v < 0 ? -m : m;
}

/* v * 2^unit rounded to nearest even in p, overflowing to inf; with flush,
 * fp16 results that round to a subnormal and bf16 values below 2^-126 are
 * +-0 (ld_round_options' definition). negative_zero: the sign of an exact 0. */
static inline float round_units(i128 v, int unit, ld_precision p, bool flush, bool negative_zero)
{
    if (v == 0)
        return negative_zero ? -0.0f : 0.0f;
    bool neg = v < 0;
    u128 m = neg ? (u128)-v : (u128)v;
    int top = 0;
    while ((m >> top) > 1)
        top++;
    int d = digits_of(p), emin = p == LD_PRECISION_BF16 ? -126 : -14;
    int emax = p == LD_PRECISION_BF16 ? 127 : 15, e = top + unit;
    if (flush && p == LD_PRECISION_BF16 && e < emin)
        return neg ? -0.0f : 0.0f;
    int q = (e > emin ? e : emin) - (d - 1); /* spacing 2^q */
    int sh = q - unit;
    u128 r;
    if (sh <= 0) {
        r = m << -sh;
    } else {
        r = m >> sh;
        u128 rest = m & (((u128)1 << sh) - 1), half = (u128)1 << (sh - 1);
        if (rest > half || (rest == half && (r & 1)))
            r++;
    }
    double value = ldexp((double)r, q);
    if (value > ldexp(2.0 - ldexp(1.0, 1 - d), emax))
        value = INFINITY;
    if (flush && p == LD_PRECISION_FP16 && value < ldexp(1.0, emin))
        value = 0;
    return (float)(neg ? -value : value);
}

typedef struct emul {
    ld_precision p;
    bool flush;
    int64_t overflows;
} emul;

/* round_p(acc + a * b) (product) or round_p(acc + a), exactly, counting overflows. */
static inline float emul_step(emul *em, float acc, float a, float b, bool product)
{
    float term = product ? a * b : a;
    if (!isfinite(acc) || !isfinite(a) || !isfinite(b))
        return acc + term; /* inf or NaN, exactly as IEEE says */
    int unit = unit_of(em->p);
    i128 t = product ? units(a, unit / 2) * units(b, unit / 2) : units(a, unit);
    bool t_negative = product ? (signbit(a) != 0) != (signbit(b) != 0) : signbit(a) != 0;
    i128 sum = units(acc, unit) + t;
    bool negative_zero = acc == 0 && signbit(acc) && t == 0 && t_negative;
    float r = round_units(sum, unit, em->p, em->flush, negative_zero);
    em->overflows += isinf(r) != 0; /* glibc's isinf(-inf) is -1 */
    return r;
}

#endif
