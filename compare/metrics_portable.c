/* layerdiff — the portable comparison kernel: any dtypes, any values, in
 * double, one element at a time (metrics_internal.h). It defines every
 * per-element result; the vector kernels (metrics_fast*.c) reproduce them
 * for the blocks it can take. */
#include <math.h>
#include <string.h>

#include "compare/metrics_internal.h"

void cmp_side_init(cmp_side_acc *side)
{
    memset(side, 0, sizeof *side);
    side->min = INFINITY;
    side->max = -INFINITY;
}

void cmp_acc_init(cmp_acc *acc)
{
    memset(acc, 0, sizeof *acc);
    cmp_side_init(&acc->ref);
    cmp_side_init(&acc->test);
    for (int k = 0; k < CMP_MEASURES; k++) {
        acc->max[k] = -1.0;
        acc->max_index[k] = -1;
    }
    acc->first_fail = -1;
}

double cmp_ulp_scale(const cmp_params *p, double r)
{
    uint64_t bits;
    memcpy(&bits, &r, sizeof bits);
    int exponent = (int)((bits >> 52) & 0x7ff) - 1023; /* subnormals fall below emin anyway */
    if (exponent < p->ulp_emin)
        exponent = p->ulp_emin;
    uint64_t scale_bits = (uint64_t)(1023 + (p->ulp_digits - 1) - exponent) << 52;
    double scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    return scale;
}

static inline void side_add(cmp_side_acc *s, double x, double min_normal, double shift)
{
    if (isnan(x)) {
        s->nan++;
    } else if (isinf(x)) {
        if (x > 0)
            s->pos_inf++;
        else
            s->neg_inf++;
    } else {
        s->finite++;
        if (x == 0)
            s->zero++;
        else if (fabs(x) < min_normal)
            s->subnormal++;
        double d = x - shift;
        s->s1 += d;
        s->s2 += d * d;
        s->min = x < s->min ? x : s->min;
        s->max = x > s->max ? x : s->max;
    }
}

static inline void measure_add(cmp_acc *acc, int k, double e, int64_t index)
{
    acc->sum[k] += e;
    if (e > acc->max[k]) {
        acc->max[k] = e;
        acc->max_index[k] = index;
    }
    if (e == 0)
        acc->zero_err[k]++;
    else if (isinf(e))
        acc->inf_err[k]++;
}

void cmp_block_double(const cmp_params *p, const double *r, const double *t,
                      const uint8_t *differs, int m, int64_t base, cmp_acc *acc,
                      double *abs_out, double *rel_out, double *ulp_out)
{
    for (int i = 0; i < m; i++) {
        double rv = r[i], tv = t[i], a, rel, ulp;
        bool fail;
        side_add(&acc->ref, rv, p->ref_min_normal, p->ref_shift);
        side_add(&acc->test, tv, p->test_min_normal, p->test_shift);
        if (isfinite(rv)) { /* properties of the reference alone */
            double ar = fabs(rv);
            if (ar > 0 && ar < p->prec_min_normal)
                acc->rel_tiny_ref++;
            if (ar > p->prec_max)
                acc->would_overflow++;
        }
        if (isfinite(rv) && isfinite(tv)) {
            double diff = tv - rv, ar = fabs(rv);
            a = fabs(diff);
            rel = ar != 0 ? a / ar : a / LD_COMPARE_REL_EPSILON;
            ulp = p->want_ulp ? a * cmp_ulp_scale(p, rv) : 0.0;
            if (p->mode == LD_TOL_ALLCLOSE)
                fail = !(a <= p->atol + p->rtol * ar);
            else
                fail = a > p->atol && rel > p->rtol;
            if (tv == 0 && rv != 0)
                acc->underflow_zero++;
            /* compensated: Σrt may cancel (a cosine near 0), and one
               element at a time the others would lose ~sqrt(n) ulps */
            cmp_sum2_add(&acc->srt, &acc->srt_lo, rv * tv);
            acc->srt_lo += fma(rv, tv, -(rv * tv)); /* 0 for floats: their product is exact */
            cmp_sum2_add(&acc->srr, &acc->srr_lo, rv * rv);
            cmp_sum2_add(&acc->stt, &acc->stt_lo, tv * tv);
            cmp_sum2_add(&acc->sdd, &acc->sdd_lo, diff * diff);
        } else {
            /* NaN against NaN, or the same infinity: equal; else infinitely wrong */
            bool matched = (isnan(rv) && isnan(tv)) || rv == tv;
            a = rel = ulp = matched ? 0.0 : INFINITY;
            fail = !matched;
            if (!matched) {
                acc->special_mismatch++;
                if (isfinite(rv))
                    acc->nonfinite_test_only++;
            }
        }
        if (differs)
            fail = differs[i];
        if (isnan(tv)) {
            acc->test_nan++;
            if (p->nan_is_error)
                fail = true;
        }
        if (fail) {
            if (acc->first_fail < 0)
                acc->first_fail = base + i;
            acc->n_fail++;
        }
        measure_add(acc, CMP_ABS, a, base + i);
        measure_add(acc, CMP_REL, rel, base + i);
        abs_out[i] = a;
        rel_out[i] = rel;
        if (p->want_ulp) {
            measure_add(acc, CMP_ULP, ulp, base + i);
            ulp_out[i] = ulp;
        }
    }
}
