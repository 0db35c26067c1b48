/* layerdiff — how a layer accumulates sums (private to backends/).
 *
 * The reference backend accumulates reductions and normalization statistics
 * in double (the exact result, rounded once). A layer whose numerics say it
 * computes in a reduced precision (tf32, fp16, bf16) accumulates the way a
 * GPU engine does instead, and every kernel that sums (reductions, softmax,
 * normalizations, CumSum) goes through these few functions, so the rules
 * live in one place (docs/numerics.md, "Accumulation"):
 *
 *  - fp32 accumulation (the default): one float accumulator per output,
 *    adding the terms one at a time in the documented order (increasing
 *    position in the input), each addition rounded to fp32.
 *  - accumulate-half (ld_layer_numerics.accumulate_half with fp16 or bf16):
 *    every partial sum is rounded to the layer precision. A step that adds a
 *    term t which is a value of the layer precision is acc = round_p(acc + t)
 *    computed as an fp32 addition and one rounding: correctly rounded, since
 *    fp32 has at least 2p + 2 significant bits (24 >= 2 * 11 + 2) so the
 *    double rounding is innocuous (tests/exhaustive_emulation.c checks every
 *    fp16 pair). A multiply-add step acc = round_p(acc + x * y) is a fused
 *    multiply-add with one rounding, as fp16 FMA hardware (HFMA, vfmadd*ph)
 *    does: x * y is exact in fp32 for fp16 and bf16 values, the fp32 sum is
 *    rounded to odd (ld_fp32_sum_round_odd) and then to p, which equals
 *    rounding the exact acc + x * y once (rounding to odd with >= p + 2 bits,
 *    Boldo and Melquiond). A partial sum that overflows (finite operands,
 *    infinite result) is counted in ld_layer_counters.partial_overflows.
 *  - accumulate_half has no effect on fp32 and tf32 layers (tensor cores
 *    accumulate tf32 products in fp32; no engine accumulates in tf32). */
#ifndef LAYERDIFF_BACKENDS_ACCUMULATE_H
#define LAYERDIFF_BACKENDS_ACCUMULATE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "layerdiff/numerics.h"
#include "layerdiff/round.h"

typedef struct ld_accum {
    bool reduced;                /* precision is not fp32: float accumulators in order */
    bool half;                   /* and every partial sum is rounded to `precision` */
    ld_precision precision;
    ld_round_options round;
    ld_layer_counters *counters; /* partial overflows are added here (NULL: not counted) */
} ld_accum;

/* Whether accumulate-half applies to a layer: asked for, and fp16 or bf16. */
static inline bool ld_numerics_accumulate_half(const ld_layer_numerics *n)
{
    return n != NULL && n->accumulate_half &&
           (n->precision == LD_PRECISION_FP16 || n->precision == LD_PRECISION_BF16);
}

/* The accumulation mode of a layer; numerics NULL or fp32 is the reference
 * (reduced = half = false). counters may be NULL. */
static inline ld_accum ld_accum_make(const ld_layer_numerics *n, ld_layer_counters *counters)
{
    ld_accum a = {.precision = LD_PRECISION_FP32, .counters = counters};
    if (n != NULL && n->precision != LD_PRECISION_FP32) {
        a.reduced = true;
        a.half = ld_numerics_accumulate_half(n);
        a.precision = n->precision;
        a.round = n->round;
    }
    return a;
}

/* Adds n partial overflows; thread-safe (kernels call it from OpenMP loops). */
static inline void ld_count_partial_overflows(ld_layer_counters *c, int64_t n)
{
    if (c != NULL && n != 0)
        __atomic_fetch_add(&c->partial_overflows, n, __ATOMIC_RELAXED);
}

/* A value as the layer holds it: rounded to the precision when accumulating
 * in half (an fp16 kernel keeps its intermediates in fp16), else unchanged. */
static inline float ld_accum_value(const ld_accum *a, float v)
{
    return a->half ? ld_round_to_precision(v, a->precision, &a->round) : v;
}

/* acc + t, as one accumulation step (t should be a value of the precision
 * when accumulating in half; see ld_accum_value). */
static inline float ld_accum_add(const ld_accum *a, float acc, float t)
{
    float s = acc + t;
    if (!a->half)
        return s;
    float r = ld_round_to_precision(s, a->precision, &a->round);
    if (isinf(r) && isfinite(acc) && isfinite(t))
        ld_count_partial_overflows(a->counters, 1);
    return r;
}

/* acc * t as one step of a running product (ReduceProd), rounded like a
 * partial sum when accumulating in half; an overflow counts as one. */
static inline float ld_accum_mul(const ld_accum *a, float acc, float t)
{
    float s = acc * t;
    if (!a->half)
        return s;
    float r = ld_round_to_precision(s, a->precision, &a->round);
    if (isinf(r) && isfinite(acc) && isfinite(t))
        ld_count_partial_overflows(a->counters, 1);
    return r;
}

/* The fp32 sum acc + prod rounded to odd: the exact sum if representable,
 * else whichever of its two fp32 neighbours has an odd last bit. prod must be
 * an exact product (x * y of fp16 or bf16 values is, barring fp32 under- and
 * overflow). TwoSum (Knuth) gives the exact error of the rounded sum; its
 * sign says on which side the exact sum lies. Infinite and NaN sums are
 * returned as they are. Needs -ffp-contract=off (the build's flag). */
static inline float ld_fp32_sum_round_odd(float acc, float prod)
{
    float s = acc + prod;
    float bp = s - acc, ap = s - bp;
    float err = (acc - ap) + (prod - bp);
    uint32_t su, eu;
    memcpy(&su, &s, sizeof su);
    memcpy(&eu, &err, sizeof eu);
    /* err is nonzero only for a finite s (an infinite s makes err NaN, which
     * compares false). s != 0 then (a nonzero exact sum never rounds to zero:
     * sums are exact below the normal range), so stepping its magnitude down
     * stays in range. */
    if ((err < 0 || err > 0) && (su & 1u) == 0) {
        su += ((su ^ eu) & 0x80000000u) ? 0xFFFFFFFFu : 1u; /* toward the exact sum */
        memcpy(&s, &su, sizeof s);
    }
    return s;
}

/* round_p(acc + x * y) with one rounding (see the header comment): the
 * multiply-add step of accumulate-half. A partial sum that overflows (finite
 * acc and product, infinite result) adds one to *overflows. */
static inline float ld_fma_round(float acc, float x, float y, ld_precision p,
                                 const ld_round_options *round, int64_t *overflows)
{
    float prod = x * y;
    float r = ld_round_to_precision(ld_fp32_sum_round_odd(acc, prod), p, round);
    if (isinf(r) && isfinite(acc) && isfinite(prod))
        (*overflows)++;
    return r;
}

/* acc + x * y as one accumulation step: fp32 (a product of values of the
 * precision is exact in fp32, so this is one rounding too), or the fused,
 * once-rounded step when accumulating in half. */
static inline float ld_accum_fma(const ld_accum *a, float acc, float x, float y)
{
    if (!a->half)
        return acc + x * y;
    int64_t overflows = 0;
    float r = ld_fma_round(acc, x, y, a->precision, &a->round, &overflows);
    ld_count_partial_overflows(a->counters, overflows);
    return r;
}

#endif
