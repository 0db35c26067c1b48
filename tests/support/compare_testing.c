/* layerdiff tests — comparator test scaffolding (compare_testing.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "compare/metrics_internal.h"
#include "tests/support/compare_testing.h"

bool cmpt_same_double(double a, double b, double rel)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    double scale = fmax(fabs(a), fabs(b));
    return fabs(a - b) <= rel * scale || fabs(a - b) <= 1e-300;
}

ld_tensor *cmpt_make_tensor(ld_dtype dtype, int rank, const int64_t *dims)
{
    ld_shape shape;
    ld_error err;
    ld_tensor *t = NULL;
    assert_int_equal(ld_shape_set(&shape, rank, dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, "t", dtype, &shape, &err), LD_OK);
    return t;
}

ld_tolerance cmpt_tolerance(double atol, double rtol)
{
    ld_tolerance tol;
    memset(&tol, 0, sizeof tol);
    tol.atol = atol;
    tol.rtol = rtol;
    tol.mode = LD_TOL_POLYGRAPHY;
    tol.check = LD_CHECK_ELEMWISE;
    tol.quantile = 0.5;
    return tol;
}

ld_tensor_metrics cmpt_compare(const ld_tensor *r, const ld_tensor *t, ld_precision p,
                               const ld_tolerance *tol)
{
    ld_tensor_metrics m;
    ld_error err;
    ld_error_clear(&err);
    if (ld_compare_tensors(r, t, p, tol, NULL, "x", &m, &err) != LD_OK)
        fail_msg("ld_compare_tensors: %s", err.message);
    return m;
}

void cmpt_exact_add(cmpt_exact_sum *s, double x)
{
    assert_true(isfinite(x));
    int kept = 0;
    for (int i = 0; i < s->n; i++) {
        double y = s->part[i];
        if (fabs(x) < fabs(y)) {
            double swap = x;
            x = y;
            y = swap;
        }
        double hi = x + y, lo = y - (hi - x); /* |x| >= |y|: exact (Fast2Sum) */
        if (lo != 0)
            s->part[kept++] = lo;
        x = hi;
    }
    assert_true(kept < (int)(sizeof s->part / sizeof s->part[0]));
    s->part[kept++] = x;
    s->n = kept;
}

void cmpt_exact_add_product(cmpt_exact_sum *s, double a, double b)
{
    double p = a * b;
    cmpt_exact_add(s, p);
    cmpt_exact_add(s, fma(a, b, -p));
}

double cmpt_exact_value(const cmpt_exact_sum *s)
{
    /* the parts ascend in magnitude without overlapping: from the top, stop
       once the rest cannot change the rounding; then Python's fsum's
       correction of a half-way case */
    if (s->n == 0)
        return 0.0;
    int i = s->n - 1;
    double hi = s->part[i], lo = 0;
    while (i > 0) {
        double x = hi, y = s->part[--i];
        hi = x + y;
        lo = y - (hi - x);
        if (lo != 0)
            break;
    }
    if (i > 0 && ((lo < 0 && s->part[i - 1] < 0) || (lo > 0 && s->part[i - 1] > 0))) {
        double y = lo * 2, x = hi + y;
        if (y == x - hi)
            hi = x;
    }
    return hi;
}

void cmpt_similarity(double srt, double srr, double stt, double sdd, int64_t mismatch,
                     double *cosine, double *snr_db, double *l2_rel)
{
    *cosine = mismatch ? NAN
              : srr == 0 && stt == 0 ? 1
              : srr == 0 || stt == 0 ? 0
              : sdd == 0 ? 1
              : srt / (sqrt(srr) * sqrt(stt));
    *cosine = *cosine > 1 ? 1 : *cosine < -1 ? -1 : *cosine;
    *snr_db = mismatch ? -INFINITY : sdd == 0 ? INFINITY : 10 * log10(srr / sdd);
    *l2_rel = mismatch ? INFINITY : sdd == 0 ? 0 : sqrt(sdd) / sqrt(srr);
}

void cmpt_assert_similarity(const ld_tensor_metrics *got, double cosine, double snr_db,
                            double l2_rel, const char *label)
{
    double snr_scale = fmax(fabs(snr_db), 10 / log(10.0));
    bool snr_ok = isfinite(snr_db) ? fabs(got->snr_db - snr_db) <= CMPT_SIMILARITY_REL * snr_scale
                                   : got->snr_db == snr_db;
    if (!cmpt_same_double(got->cosine, cosine, CMPT_SIMILARITY_REL) || !snr_ok ||
        !cmpt_same_double(got->l2_rel, l2_rel, CMPT_SIMILARITY_REL))
        fail_msg("%s: cosine %.17g snr_db %.17g l2_rel %.17g, want %.17g %.17g %.17g", label,
                 got->cosine, got->snr_db, got->l2_rel, cosine, snr_db, l2_rel);
}

const char *cmpt_kernel_name(void)
{
    static const char *const names[] = {"portable", "AVX2", "AVX-512"};
    return names[cmp_fast_level()];
}

void cmpt_each_kernel(void (*body)(void))
{
    /* best first, so that a failure names the first kernel that broke */
    for (int level = (int)cmp_cpu_level(); level >= (int)CMP_LEVEL_PORTABLE; level--) {
        cmp_force_level(level);
        if ((int)cmp_fast_level() != level)
            fail_msg("the comparator kernel %d could not be forced", level);
        body();
    }
    cmp_force_level(-1);
}
