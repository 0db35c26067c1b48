/* Unit tests for compare/metrics*.c and compare/quantile.c on large and
 * random tensors: the selection against qsort (radix, and Floyd and Rivest's
 * with vector passes, brackets forced to miss), and a randomized cross-check
 * of the whole computation - AVX-512 and portable kernels, kept errors and
 * sampled intervals with their narrow keys, the recomputation when an
 * interval misses or the kept errors overflow, the side statistics far from
 * zero - against a plain qsort-based implementation of docs/metrics.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/metrics_internal.h"
#include "layerdiff/compare.h"
#include "layerdiff/round.h"
#include "tests/support/compare_testing.h"

/* ---- selection against qsort ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng_state = 12345;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double urand(void) { return (double)(rnd() >> 11) * 0x1p-53; }

static void test_select_against_qsort(void **state)
{
    (void)state;
    for (int trial = 0; trial < 400; trial++) {
        int64_t m = 1 + (int64_t)(rnd() % (trial < 200 ? 100 : 20000));
        double *v = malloc((size_t)m * sizeof *v), *sorted = malloc((size_t)m * sizeof *v);
        int kind = trial % 5;
        for (int64_t i = 0; i < m; i++) {
            switch (kind) {
            case 0: v[i] = urand(); break;
            case 1: v[i] = (double)(rnd() % 4); break;                 /* heavy ties */
            case 2: v[i] = 0.75; break;                                 /* all equal */
            case 3: v[i] = ldexp(urand(), (int)(rnd() % 200) - 100); break; /* wide range */
            default: v[i] = rnd() % 7 == 0 ? INFINITY : (rnd() % 3 == 0 ? 0 : urand()); break;
            }
        }
        memcpy(sorted, v, (size_t)m * sizeof *v);
        qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
        int64_t ranks[20];
        int k = 1 + (int)(rnd() % 20);
        for (int i = 0; i < k; i++)
            ranks[i] = (int64_t)(rnd() % (uint64_t)m);
        for (int i = 1; i < k; i++) /* ascending */
            for (int j = i; j > 0 && ranks[j] < ranks[j - 1]; j--) {
                int64_t tmp = ranks[j];
                ranks[j] = ranks[j - 1];
                ranks[j - 1] = tmp;
            }
        double out[20];
        qsel_select(v, m, ranks, k, out);
        for (int i = 0; i < k; i++)
            if (out[i] != sorted[ranks[i]])
                fail_msg("trial %d kind %d m %lld rank %lld: %g, expected %g", trial, kind,
                         (long long)m, (long long)ranks[i], out[i], sorted[ranks[i]]);
        /* v reordered, not changed: qsel_plan reads its sample again */
        qsort(v, (size_t)m, sizeof *v, cmp_double);
        if (memcmp(v, sorted, (size_t)m * sizeof *v) != 0)
            fail_msg("trial %d kind %d m %lld: the values were changed", trial, kind,
                     (long long)m);
        free(v);
        free(sorted);
    }
    /* nearest rank */
    assert_int_equal(qsel_rank(0.5, 4), 1);
    assert_int_equal(qsel_rank(0.5, 5), 2);
    assert_int_equal(qsel_rank(0.9, 10), 8);
    assert_int_equal(qsel_rank(0.95, 20), 18);
    assert_int_equal(qsel_rank(0.99, 100), 98);
    assert_int_equal(qsel_rank(0, 7), 0);
    assert_int_equal(qsel_rank(1, 7), 6);
    assert_int_equal(qsel_rank(0.5, 1), 0);
}

/* ---- whole comparison against a plain implementation of docs/metrics.md ---- */

/* One side's counts and extremes, as docs/metrics.md defines them. */
typedef struct plain_side {
    int64_t nan, pos_inf, neg_inf, zero, subnormal;
    double min, max;
} plain_side;

typedef struct plain {
    double abs[5], rel[5], ulp_p99; /* median p90 p95 p99 q */
    double abs_max, rel_max, ulp_max, abs_mean, rel_mean, ulp_mean;
    int64_t abs_idx, rel_idx, ulp_idx, n_fail, first_fail, mismatch, tiny, under, over;
    int64_t test_only;
    double cosine, snr_db, l2_rel, ref_mean, ref_std, test_mean, test_std;
    plain_side ref, test;
    bool pass;
} plain;

static double plain_min_normal(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT16 ? 0x1p-14 : d == LD_DTYPE_FLOAT64 ? DBL_MIN : FLT_MIN;
}

static void plain_side_add(plain_side *side, double x, double min_normal)
{
    if (isnan(x)) {
        side->nan++;
    } else if (isinf(x)) {
        side->pos_inf += x > 0;
        side->neg_inf += x < 0;
    } else {
        side->zero += x == 0;
        side->subnormal += x != 0 && fabs(x) < min_normal;
        side->min = x < side->min ? x : side->min;
        side->max = x > side->max ? x : side->max;
    }
}

/* The population std of the finite values around their mean, in a second
 * pass (no cancellation whatever the mean). */
static double plain_std(const ld_tensor *t, double mean)
{
    long double dev = 0;
    int64_t finite = 0;
    for (int64_t i = 0; i < t->count; i++) {
        double x = ld_tensor_get_double(t, i);
        if (isfinite(x)) {
            dev += ((long double)x - mean) * ((long double)x - mean);
            finite++;
        }
    }
    return finite ? (double)sqrtl(dev / finite) : NAN;
}

static void plain_metrics(const ld_tensor *rt, const ld_tensor *tt, ld_precision p,
                          const ld_tolerance *tol, plain *o)
{
    int64_t n = rt->count;
    double *e[3];
    for (int k = 0; k < 3; k++)
        e[k] = malloc((size_t)n * sizeof(double));
    memset(o, 0, sizeof *o);
    o->first_fail = -1;
    o->abs_max = o->rel_max = o->ulp_max = -1;
    o->ref.min = o->test.min = INFINITY;
    o->ref.max = o->test.max = -INFINITY;
    double rs = 0, rss = 0, ts = 0, tss = 0;
    cmpt_exact_sum srr = {0}, stt = {0}, srt = {0}, sdd = {0}; /* exact: they may cancel */
    int64_t rn = 0, tn = 0;
    bool test_nan = false;
    for (int64_t i = 0; i < n; i++) {
        double r = ld_tensor_get_double(rt, i), t = ld_tensor_get_double(tt, i), a, rel, u;
        bool fail;
        plain_side_add(&o->ref, r, plain_min_normal(rt->dtype));
        plain_side_add(&o->test, t, plain_min_normal(tt->dtype));
        if (isfinite(r) && isfinite(t)) {
            a = fabs(t - r);
            rel = r != 0 ? a / fabs(r) : a / LD_COMPARE_REL_EPSILON;
            u = a / ld_precision_ulp(p, r);
            fail = tol->mode == LD_TOL_ALLCLOSE ? !(a <= tol->atol + tol->rtol * fabs(r))
                                                 : (a > tol->atol && rel > tol->rtol);
            cmpt_exact_add_product(&srr, r, r);
            cmpt_exact_add_product(&stt, t, t);
            cmpt_exact_add_product(&srt, r, t);
            cmpt_exact_add_product(&sdd, t - r, t - r); /* t - r rounded, as the library does */
            if (t == 0 && r != 0)
                o->under++;
        } else {
            bool same = (isnan(r) && isnan(t)) || r == t;
            a = rel = u = same ? 0 : INFINITY;
            fail = !same;
            o->mismatch += !same;
            o->test_only += !same && isfinite(r);
        }
        if (isfinite(r)) { /* properties of the reference alone, whatever t is */
            rs += r;
            rss += r * r;
            rn++;
            if (fabs(r) > 0 && fabs(r) < ld_precision_min_normal(p))
                o->tiny++;
            if ((p == LD_PRECISION_FP16 || p == LD_PRECISION_BF16) && fabs(r) > ld_precision_max(p))
                o->over++;
        }
        if (isfinite(t)) {
            ts += t;
            tss += t * t;
            tn++;
        }
        if (isnan(t)) {
            test_nan = true;
            fail = fail || tol->nan_is_error;
        }
        if (fail) {
            o->n_fail++;
            if (o->first_fail < 0)
                o->first_fail = i;
        }
        if (a > o->abs_max) { o->abs_max = a; o->abs_idx = i; }
        if (rel > o->rel_max) { o->rel_max = rel; o->rel_idx = i; }
        if (u > o->ulp_max) { o->ulp_max = u; o->ulp_idx = i; }
        o->abs_mean += a;
        o->rel_mean += rel;
        o->ulp_mean += u;
        e[0][i] = a;
        e[1][i] = rel;
        e[2][i] = u;
    }
    o->abs_mean /= (double)n;
    o->rel_mean /= (double)n;
    o->ulp_mean /= (double)n;
    double qs[5] = {0.5, 0.9, 0.95, 0.99, tol->quantile};
    for (int k = 0; k < 3; k++)
        qsort(e[k], (size_t)n, sizeof(double), cmp_double);
    for (int j = 0; j < 5; j++) {
        int64_t rank = (int64_t)ceil(qs[j] * (double)n) - 1;
        rank = rank < 0 ? 0 : rank > n - 1 ? n - 1 : rank;
        o->abs[j] = e[0][rank];
        o->rel[j] = e[1][rank];
        if (j == 3)
            o->ulp_p99 = e[2][rank];
    }
    cmpt_similarity(cmpt_exact_value(&srt), cmpt_exact_value(&srr), cmpt_exact_value(&stt),
                    cmpt_exact_value(&sdd), o->mismatch, &o->cosine, &o->snr_db, &o->l2_rel);
    o->ref_mean = rs / (double)rn;
    (void)rss;
    (void)tss;
    o->ref_std = plain_std(rt, o->ref_mean);
    o->test_mean = ts / (double)tn;
    o->test_std = plain_std(tt, o->test_mean);
    double sa = o->abs[4], sr = o->rel[4];
    switch (tol->check) {
    case LD_CHECK_MAX: sa = o->abs_max; sr = o->rel_max; break;
    case LD_CHECK_MEAN: sa = o->abs_mean; sr = o->rel_mean; break;
    case LD_CHECK_MEDIAN: sa = o->abs[0]; sr = o->rel[0]; break;
    default: break;
    }
    o->pass = tol->check == LD_CHECK_ELEMWISE ? o->n_fail == 0 : !(sa > tol->atol && sr > tol->rtol);
    if (tol->nan_is_error && test_nan)
        o->pass = false;
    for (int k = 0; k < 3; k++)
        free(e[k]);
}

/* Fills r (fp32) and t (fp32 or fp16) with one of several error shapes. */
#define RANDOM_KINDS 9
static void random_pair(ld_tensor *rt, ld_tensor *tt, int kind)
{
    int64_t n = rt->count;
    float *r = rt->data;
    for (int64_t i = 0; i < n; i++) {
        float rv = (float)((urand() - 0.5) * 8), tv;
        switch (kind) {
        case 0: tv = rv + (float)((urand() - 0.5) * 1e-3); break;            /* small noise */
        case 1: tv = rnd() % 3 ? rv : rv + 0.25f; break;                     /* heavy ties */
        case 2: rv = 1.5f; tv = 1.75f; break;                                 /* all equal */
        case 3: tv = rv * (float)(1 + ldexp(urand(), -(int)(rnd() % 30))); break; /* wide range */
        case 4: /* NaN/inf mixes and zeros */
            tv = rv + 1e-4f;
            if (rnd() % 50 == 0) rv = NAN;
            if (rnd() % 50 == 0) tv = NAN;
            if (rnd() % 70 == 0) tv = INFINITY;
            if (rnd() % 40 == 0) rv = 0;
            break;
        case 5: tv = rnd() % 2 ? rv : 0; break;                              /* zeros in t */
        case 6: /* rare specials among mostly finite blocks (both kernels in one tensor),
                   subnormals, exact matches, zeros, values beyond fp16 */
            tv = rv + (float)((urand() - 0.5) * 1e-3);
            switch (rnd() % 20011) {
            case 0: rv = NAN; break;
            case 1: tv = -INFINITY; break;
            case 2: rv = tv = INFINITY; break;
            default: break;
            }
            if (rnd() % 997 == 0) rv = 1e-40f;
            if (rnd() % 991 == 0) tv = -3e-41f;
            if (rnd() % 89 == 0) tv = rv;
            if (rnd() % 983 == 0) rv = 0;
            if (rnd() % 977 == 0) tv = 0;
            if (rnd() % 1999 == 0) rv = tv = 7e4f;
            break;
        case 7: /* few distinct errors: ties at every interval bound */
            tv = rv + (float)(rnd() % 8) * 0x1p-10f;
            break;
        default: /* a large mean: the side sums around a shift */
            rv = 1000.0f + (float)((urand() - 0.5) * 0.01);
            tv = rv + (float)((urand() - 0.5) * 1e-4);
            break;
        }
        r[i] = rv;
        if (tt->dtype == LD_DTYPE_FLOAT16)
            ((ld_fp16 *)tt->data)[i] = ld_fp32_to_fp16(tv);
        else
            ((float *)tt->data)[i] = tv;
    }
}

static void check_against_plain(const ld_tensor *rt, const ld_tensor *tt, ld_precision p,
                                const ld_tolerance *tol, ld_compare_scratch *scratch,
                                const char *label)
{
    plain o;
    ld_tensor_metrics m;
    ld_error err;
    if (ld_compare_tensors(rt, tt, p, tol, scratch, label, &m, &err) != LD_OK)
        fail_msg("%s: %s", label, err.message);
    plain_metrics(rt, tt, p, tol, &o);
    double got_abs[5] = {m.abs.median, m.abs.p90, m.abs.p95, m.abs.p99, m.abs.quantile};
    double got_rel[5] = {m.rel.median, m.rel.p90, m.rel.p95, m.rel.p99, m.rel.quantile};
    if (tol->check != LD_CHECK_QUANTILE) {
        assert_true(isnan(m.abs.quantile) && isnan(m.rel.quantile));
        got_abs[4] = o.abs[4];
        got_rel[4] = o.rel[4];
    }
    for (int j = 0; j < 5; j++) {
        if (got_abs[j] != o.abs[j] || got_rel[j] != o.rel[j])
            fail_msg("%s: quantile %d: abs %.17g (want %.17g) rel %.17g (want %.17g)", label, j,
                     got_abs[j], o.abs[j], got_rel[j], o.rel[j]);
    }
    if (m.ulp.p99 != o.ulp_p99 || m.abs.max != o.abs_max || m.rel.max != o.rel_max ||
        m.ulp.max != o.ulp_max)
        fail_msg("%s: ulp p99 %.17g/%.17g or maxima differ", label, m.ulp.p99, o.ulp_p99);
    if (m.abs.max_index != o.abs_idx || m.rel.max_index != o.rel_idx ||
        m.ulp.max_index != o.ulp_idx)
        fail_msg("%s: max index %lld %lld %lld, want %lld %lld %lld", label,
                 (long long)m.abs.max_index, (long long)m.rel.max_index,
                 (long long)m.ulp.max_index, (long long)o.abs_idx, (long long)o.rel_idx,
                 (long long)o.ulp_idx);
    if (m.n_fail != o.n_fail || m.first_fail_index != o.first_fail ||
        m.special_mismatch != o.mismatch || m.rel_tiny_ref != o.tiny ||
        m.underflow_zero != o.under || m.would_overflow != o.over || m.pass != o.pass)
        fail_msg("%s: fail %lld/%lld first %lld/%lld mismatch %lld/%lld tiny %lld/%lld under "
                 "%lld/%lld over %lld/%lld pass %d/%d", label, (long long)m.n_fail,
                 (long long)o.n_fail, (long long)m.first_fail_index, (long long)o.first_fail,
                 (long long)m.special_mismatch, (long long)o.mismatch,
                 (long long)m.rel_tiny_ref, (long long)o.tiny, (long long)m.underflow_zero,
                 (long long)o.under, (long long)m.would_overflow, (long long)o.over, m.pass,
                 o.pass);
    cmpt_assert_close(m.abs.mean, o.abs_mean, 1e-9);
    cmpt_assert_close(m.rel.mean, o.rel_mean, 1e-9);
    cmpt_assert_close(m.ulp.mean, o.ulp_mean, 1e-9);
    /* against exact sums, whatever the cancellation (verdict_edges_body has
       elements of +-3e38 of both signs beside ones near 1: cosines near 0,
       sides of different scales; see also test_similarity_accuracy) */
    cmpt_assert_similarity(&m, o.cosine, o.snr_db, o.l2_rel, label);
    assert_int_equal(m.nonfinite_test_only, o.test_only);
    const ld_side_stats *got[2] = {&m.ref, &m.test};
    const plain_side *want[2] = {&o.ref, &o.test};
    for (int k = 0; k < 2; k++) {
        if (got[k]->nan != want[k]->nan || got[k]->pos_inf != want[k]->pos_inf ||
            got[k]->neg_inf != want[k]->neg_inf || got[k]->zero != want[k]->zero ||
            got[k]->subnormal != want[k]->subnormal)
            fail_msg("%s: side %d counts nan %lld/%lld inf %lld/%lld -inf %lld/%lld zero "
                     "%lld/%lld subnormal %lld/%lld", label, k, (long long)got[k]->nan,
                     (long long)want[k]->nan, (long long)got[k]->pos_inf,
                     (long long)want[k]->pos_inf, (long long)got[k]->neg_inf,
                     (long long)want[k]->neg_inf, (long long)got[k]->zero,
                     (long long)want[k]->zero, (long long)got[k]->subnormal,
                     (long long)want[k]->subnormal);
        if (isfinite(want[k]->min)) {
            cmpt_assert_exact(got[k]->min, want[k]->min);
            cmpt_assert_exact(got[k]->max, want[k]->max);
        }
    }
    /* a mean is a sum that may cancel (values of both signs): judged on the
       data's scale, as side_stats_body does */
    if (fabs(m.ref.mean - o.ref_mean) > 1e-9 * (fabs(o.ref_mean) + o.ref_std) ||
        fabs(m.test.mean - o.test_mean) > 1e-9 * (fabs(o.test_mean) + o.test_std))
        fail_msg("%s: means %.17g %.17g, want %.17g %.17g", label, m.ref.mean, m.test.mean,
                 o.ref_mean, o.test_mean);
    /* two-pass against sums around a shift: close, whatever the mean */
    if (!cmpt_same_double(m.ref.std, o.ref_std, 1e-9) || !cmpt_same_double(m.test.std, o.test_std, 1e-9))
        fail_msg("%s: std %.17g %.17g, want %.17g %.17g", label, m.ref.std, m.test.std,
                 o.ref_std, o.test_std);
}

static void random_body(void)
{
    ld_compare_scratch *scratch = NULL;
    ld_error err;
    assert_int_equal(ld_compare_scratch_create(&scratch, &err), LD_OK);
    /* sizes around the block and kept-errors limits, small and large */
    int64_t sizes[] = {1, 2, 15, 17, 1000, 1024, 1025, 4099, 65536, 65537, 150001, 300000};
    int case_no = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (int kind = 0; kind < RANDOM_KINDS; kind++) {
            int64_t n = sizes[si];
            bool fp16 = (case_no++ % 2) == 1;
            ld_tensor *rt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
            ld_tensor *tt = cmpt_make_tensor(fp16 ? LD_DTYPE_FLOAT16 : LD_DTYPE_FLOAT32, 1, &n);
            random_pair(rt, tt, kind);
            ld_precision p = fp16 ? LD_PRECISION_FP16 : (kind % 2 ? LD_PRECISION_FP32 : LD_PRECISION_BF16);
            ld_tolerance tol = cmpt_tolerance(1e-4, 1e-3);
            tol.mode = kind % 3 == 2 ? LD_TOL_ALLCLOSE : LD_TOL_POLYGRAPHY;
            tol.check = (ld_check_stat)(case_no % 5);
            tol.quantile = urand();
            tol.nan_is_error = kind == 4 && si % 2;
            char label[96];
            snprintf(label, sizeof label, "n=%lld kind=%d fp16=%d", (long long)n, kind, fp16);
            int64_t recomputed = cmp_scratch_recomputed(scratch);
            check_against_plain(rt, tt, p, &tol, scratch, label);
            if (cmp_scratch_recomputed(scratch) != recomputed) /* names the case */
                fail_msg("%s: an interval missed or overflowed", label);
            ld_tensor_destroy(rt);
            ld_tensor_destroy(tt);
        }
    }
    /* the sampled intervals held every rank: no exact recomputation was needed */
    assert_int_equal(cmp_scratch_recomputed(scratch), 0);
    ld_compare_scratch_destroy(scratch);
}

static void test_random_against_plain(void **state)
{
    (void)state;
    cmpt_each_kernel(random_body);
}

/* Elements at the verdict's edges: |t - r| within a few float steps of atol,
 * of rtol |r| and of atol + rtol |r|, exactly on them, r = 0, subnormals,
 * huge exponent gaps (t - r inexact or infinite in float32), t = r; for
 * tolerances from 0 to infinite, in both modes. The AVX-512 kernel screens
 * the verdict in float32 and recounts flagged blocks: the counts and the
 * first failing index must be exactly the plain ones. */
static float edge_value(void)
{
    static const float mags[] = {0.0f, 1e-41f, 1e-30f, 0.5f, 1.0f, 3.0f, 1e10f, 3e38f};
    float m = mags[rnd() % (sizeof mags / sizeof mags[0])];
    return rnd() % 2 ? -m : m;
}

static void edge_pair(float *r, float *t, double atol, double rtol)
{
    double rv = edge_value(), step = ldexp((double)((int)(rnd() % 5) - 2), -23), d;
    double sign = rnd() % 2 ? 1.0 : -1.0;
    switch (rnd() % 8) {
    case 0: d = atol * (1 + step); break;
    case 1: d = rtol * fabs(rv) * (1 + step); break;
    case 2: d = fmax(atol, rtol * fabs(rv)) * (1 + step); break;
    case 3: d = (atol + rtol * fabs(rv)) * (1 + step); break;
    case 4: rv = 1.0; d = 0x1p-10; break;                  /* on a power-of-two tolerance */
    case 5: /* t - r inexact in float32, or beyond its range */
        if (rnd() % 2) {
            rv = rnd() % 2 ? 1e30 : 1.5;
            d = ldexp(urand(), -(int)(rnd() % 100)) - rv;
        } else {
            rv = 3e38;
            d = -2 * rv;
        }
        break;
    case 6: d = 0; break;                                  /* t == r */
    default: d = ldexp(urand(), -(int)(rnd() % 40)); break;
    }
    double tv = rv + sign * d;
    *r = (float)rv;
    *t = isfinite(tv) && fabs(tv) <= FLT_MAX ? (float)tv : (float)rv;
}

static void verdict_edges_body(void)
{
    static const double tols[][2] = {
        {0, 0}, {1e-5, 1e-5}, {0x1p-10, 0x1p-10}, {1e-3, 0}, {0, 1e-3}, {1e-300, 1e-300},
        {1, 1}, {1e30, 1e-30}, {FLT_MAX, 3.0}, {1e300, 1e300}, {INFINITY, 0.5},
        {0.5, INFINITY}, {0x1p-11 * 10, 0x1p-11 * 10},
    };
    /* small: the kernel that stores every error; large: the one that feeds
       the intervals (3 rounds) */
    const int64_t sizes[] = {4099, 140000, 140000, 140000};
    ld_compare_scratch *scratch = NULL;
    ld_error err;
    assert_int_equal(ld_compare_scratch_create(&scratch, &err), LD_OK);
    for (size_t ti = 0; ti < sizeof tols / sizeof tols[0]; ti++)
        for (int mode = 0; mode < 2; mode++)
            for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
                int64_t n = sizes[si];
                ld_tensor *rt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
                ld_tensor *tt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
                float *r = rt->data, *t = tt->data;
                for (int64_t i = 0; i < n; i++) { /* errors 0: nothing fails */
                    r[i] = (float)((urand() - 0.5) * 8);
                    t[i] = r[i];
                }
                /* one edge element per block of 4096 (and a few more in every
                   fourth): a block's verdict then rests on its screening alone */
                for (int64_t b0 = 0; b0 < n; b0 += 4096) {
                    int64_t len = n - b0 < 4096 ? n - b0 : 4096;
                    int extra = (b0 / 4096) % 4 == 3 ? 3 : 0;
                    for (int e = 0; e <= extra; e++) {
                        int64_t i = b0 + (int64_t)(rnd() % (uint64_t)len);
                        edge_pair(&r[i], &t[i], tols[ti][0], tols[ti][1]);
                    }
                }
                ld_tolerance tol = cmpt_tolerance(tols[ti][0], tols[ti][1]);
                tol.mode = mode ? LD_TOL_ALLCLOSE : LD_TOL_POLYGRAPHY;
                char label[96];
                snprintf(label, sizeof label, "atol=%g rtol=%g mode=%d n=%lld", tols[ti][0],
                         tols[ti][1], mode, (long long)n);
                check_against_plain(rt, tt, si ? LD_PRECISION_FP16 : LD_PRECISION_FP32, &tol,
                                    scratch, label);
                ld_tensor_destroy(rt);
                ld_tensor_destroy(tt);
            }
    ld_compare_scratch_destroy(scratch);
}

static void test_verdict_edges(void **state)
{
    (void)state;
    cmpt_each_kernel(verdict_edges_body);
}

/* Intervals that always miss: the exact recomputation answers instead. */
static void test_bracket_miss_recomputes(void **state)
{
    (void)state;
    double saved = qsel_bracket_sigmas;
    qsel_bracket_sigmas = -50;
    int64_t n = 200000;
    ld_compare_scratch *scratch = NULL;
    ld_error err;
    assert_int_equal(ld_compare_scratch_create(&scratch, &err), LD_OK);
    for (int kind = 0; kind < 3; kind++) {
        ld_tensor *rt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
        ld_tensor *tt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
        random_pair(rt, tt, kind == 2 ? 3 : kind);
        ld_tolerance tol = cmpt_tolerance(1e-4, 1e-3);
        tol.check = LD_CHECK_QUANTILE;
        tol.quantile = 0.3;
        check_against_plain(rt, tt, LD_PRECISION_FP32, &tol, scratch, "missed intervals");
        assert_int_equal(cmp_scratch_recomputed(scratch), kind + 1);
        ld_tensor_destroy(rt);
        ld_tensor_destroy(tt);
    }
    ld_compare_scratch_destroy(scratch);
    qsel_bracket_sigmas = saved;
}

/* More kept errors than planned room: per measure, and for the AVX-512
 * kernel's kept pairs. The exact recomputation answers. */
static void overflow_body(void)
{
    struct {
        int64_t cap, pairs;
        bool surely; /* the limits are far below what 200000 elements keep */
    } limits[] = {{3000, INT64_MAX, true}, {INT64_MAX, 5000, true}, {25000, 60000, false}};
    int64_t n = 200000;
    ld_compare_scratch *scratch = NULL;
    ld_error err;
    assert_int_equal(ld_compare_scratch_create(&scratch, &err), LD_OK);
    for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++) {
        qsel_cap_limit = limits[li].cap;
        cmp_pairs_limit = limits[li].pairs;
        int kinds[] = {0, 7, 6};
        for (int ki = 0; ki < 3; ki++) {
            ld_tensor *rt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
            ld_tensor *tt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
            random_pair(rt, tt, kinds[ki]);
            ld_tolerance tol = cmpt_tolerance(1e-4, 1e-3);
            int64_t before = cmp_scratch_recomputed(scratch);
            char label[64];
            snprintf(label, sizeof label, "overflow limits %zu kind %d", li, kinds[ki]);
            check_against_plain(rt, tt, LD_PRECISION_FP32, &tol, scratch, label);
            /* the pairs exist in the vector kernels only */
            bool expect = limits[li].surely &&
                          (limits[li].cap < INT64_MAX || cmp_fast_available());
            if (expect && cmp_scratch_recomputed(scratch) == before)
                fail_msg("%s: the kept errors did not overflow", label);
            ld_tensor_destroy(rt);
            ld_tensor_destroy(tt);
        }
    }
    qsel_cap_limit = cmp_pairs_limit = INT64_MAX;
    ld_compare_scratch_destroy(scratch);
}

static void test_overflow_recomputes(void **state)
{
    (void)state;
    cmpt_each_kernel(overflow_body);
}

/* The faster selection (Floyd and Rivest's, with vector passes) against
 * qsort, on sizes around its thresholds and inputs that defeat pivots:
 * ties, all equal, sorted, two clusters, +inf; and with every bracket
 * forced to miss. */
static void select_fast_body(void)
{
    for (int trial = 0; trial < 120; trial++) {
        int64_t sizes[] = {1, 17, 4096, 4097, 9000, 20011, 65536, 150000};
        int64_t m = sizes[trial % 8];
        double *v = malloc((size_t)(m + 16) * sizeof *v), *sorted = malloc((size_t)m * sizeof *v);
        double *tmp = malloc((size_t)(m + 16) * sizeof *tmp);
        int kind = (trial / 8) % 7;
        for (int64_t i = 0; i < m; i++) {
            switch (kind) {
            case 0: v[i] = urand(); break;
            case 1: v[i] = (double)(rnd() % 4); break;
            case 2: v[i] = 0.75; break;
            case 3: v[i] = (double)i; break;
            case 4: v[i] = (double)(m - i); break;
            case 5: v[i] = rnd() % 2 ? 1e-3 + urand() * 1e-9 : 5.0 + urand(); break;
            default: v[i] = rnd() % 11 == 0 ? INFINITY : ldexp(urand(), (int)(rnd() % 60) - 30); break;
            }
        }
        memcpy(sorted, v, (size_t)m * sizeof *v);
        qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
        int k = 1 + (int)(rnd() % QSEL_MAX_RANKS);
        int64_t ranks[QSEL_MAX_RANKS];
        for (int i = 0; i < k; i++)
            ranks[i] = (int64_t)(rnd() % (uint64_t)m);
        for (int i = 1; i < k; i++) /* ascending */
            for (int j = i; j > 0 && ranks[j] < ranks[j - 1]; j--) {
                int64_t t = ranks[j];
                ranks[j] = ranks[j - 1];
                ranks[j - 1] = t;
            }
        qsel_pivot_sigmas = trial % 3 == 2 ? -1.0 : 3.5; /* brackets that miss */
        double out[QSEL_MAX_RANKS];
        qsel_select_fast(v, m, ranks, k, tmp, out);
        for (int i = 0; i < k; i++)
            if (out[i] != sorted[ranks[i]])
                fail_msg("trial %d kind %d m %lld rank %lld: %g, expected %g", trial, kind,
                         (long long)m, (long long)ranks[i], out[i], sorted[ranks[i]]);
        free(v);
        free(sorted);
        free(tmp);
    }
    qsel_pivot_sigmas = 3.5;
}

static void test_select_fast_against_qsort(void **state)
{
    (void)state;
    cmpt_each_kernel(select_fast_body);
}

/* The side statistics of a large tensor far from 0 (mean 1000, spread
 * 0.003): kept around a shift, the std is exact to many digits; and of a
 * centred one, summed without a shift. Against two-pass sums in long
 * double. */
static void side_stats_body(void)
{
    int64_t n = 300000;
    for (int centred = 0; centred < 2; centred++) {
        ld_tensor *rt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
        ld_tensor *tt = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
        float *r = rt->data, *t = tt->data;
        for (int64_t i = 0; i < n; i++) {
            r[i] = centred ? (float)((urand() - 0.5) * 8) : 1000.0f + (float)((urand() - 0.5) * 0.01);
            t[i] = r[i] + (float)((urand() - 0.5) * 1e-4);
        }
        ld_tensor_metrics m = cmpt_compare(rt, tt, LD_PRECISION_FP32, NULL);
        const float *side[2] = {r, t};
        const ld_side_stats *got[2] = {&m.ref, &m.test};
        for (int k = 0; k < 2; k++) {
            long double sum = 0, dev = 0;
            for (int64_t i = 0; i < n; i++)
                sum += side[k][i];
            long double mean = sum / n;
            for (int64_t i = 0; i < n; i++)
                dev += (side[k][i] - mean) * (side[k][i] - mean);
            double std = (double)sqrtl(dev / n);
            /* a mean near 0 is a sum that cancels: judged on the data's scale */
            if (fabs(got[k]->mean - (double)mean) > 1e-12 * (fabsl(mean) + std))
                fail_msg("side %d mean %.17g, want %.17Lg", k, got[k]->mean, mean);
            cmpt_assert_close(got[k]->std, std, 1e-9);
        }
        ld_tensor_destroy(rt);
        ld_tensor_destroy(tt);
    }
}

static void test_side_stats_far_from_zero(void **state)
{
    (void)state;
    cmpt_each_kernel(side_stats_body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_select_against_qsort),
        cmocka_unit_test(test_select_fast_against_qsort),
        cmocka_unit_test(test_random_against_plain),
        cmocka_unit_test(test_verdict_edges),
        cmocka_unit_test(test_bracket_miss_recomputes),
        cmocka_unit_test(test_overflow_recomputes),
        cmocka_unit_test(test_side_stats_far_from_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
