/* Unit tests for compare/metrics*.c on hand-computed cases: every field of
 * ld_tensor_metrics (nearest-rank percentiles, zeros, NaN, inf, subnormals,
 * empty and scalar tensors, fp16 against fp32, integers, the element rules
 * and the statistic checks) with the AVX-512 and the portable kernels, and
 * the errors for mismatched shapes and dtypes. The randomized cross-checks
 * of large tensors are in test_compare_streaming.c. */
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

/* ---- helpers ---- */

static ld_tensor *f32_tensor(const float *v, int64_t n)
{
    ld_tensor *t = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
    if (n)
        memcpy(t->data, v, (size_t)n * sizeof *v);
    return t;
}

static ld_tensor *f16_tensor(const float *v, int64_t n)
{
    ld_tensor *t = cmpt_make_tensor(LD_DTYPE_FLOAT16, 1, &n);
    for (int64_t i = 0; i < n; i++)
        ((ld_fp16 *)t->data)[i] = ld_fp32_to_fp16(v[i]);
    return t;
}

static ld_tensor_metrics compare_f32(const float *r, const float *t, int64_t n, ld_precision p,
                                     const ld_tolerance *tol)
{
    ld_tensor *rt = f32_tensor(r, n), *tt = f32_tensor(t, n);
    ld_tensor_metrics m = cmpt_compare(rt, tt, p, tol);
    ld_tensor_destroy(rt);
    ld_tensor_destroy(tt);
    return m;
}

/* ---- hand-computed cases ---- */

static void identical_body(void)
{
    float v[] = {1, -2, 0, 3.5f};
    ld_tolerance tol = cmpt_tolerance(1e-5, 1e-5);
    ld_tensor_metrics m = compare_f32(v, v, 4, LD_PRECISION_FP32, &tol);
    assert_int_equal(m.n, 4);
    ld_error_stats *all[] = {&m.abs, &m.rel};
    for (int k = 0; k < 2; k++) {
        cmpt_assert_exact(all[k]->max, 0);
        cmpt_assert_exact(all[k]->mean, 0);
        cmpt_assert_exact(all[k]->median, 0);
        cmpt_assert_exact(all[k]->p99, 0);
        assert_true(isnan(all[k]->quantile)); /* not asked for */
        assert_int_equal(all[k]->max_index, 0);
    }
    cmpt_assert_exact(m.ulp.max, 0);
    cmpt_assert_exact(m.ulp.p99, 0);
    assert_true(isnan(m.ulp.median));
    cmpt_assert_exact(m.cosine, 1);
    assert_true(isinf(m.snr_db) && m.snr_db > 0);
    cmpt_assert_exact(m.l2_rel, 0);
    assert_int_equal(m.ref.zero, 1);
    assert_int_equal(m.n_fail, 0);
    assert_int_equal(m.first_fail_index, -1);
    assert_true(m.pass);
}

static void test_identical(void **state)
{
    (void)state;
    cmpt_each_kernel(identical_body);
}

/* r = {1, 2, 4, 0}, t = {1.5, 2, 3, 2^-10}: every field by hand. */
static void small_body(void)
{
    float r[] = {1, 2, 4, 0}, t[] = {1.5f, 2, 3, 0x1p-10f};
    ld_tolerance tol = cmpt_tolerance(1e-5, 1e-5);
    ld_tensor_metrics m = compare_f32(r, t, 4, LD_PRECISION_FP32, &tol);
    double tiny = 0x1p-10, eps = LD_COMPARE_REL_EPSILON;
    /* abs sorted {0, 2^-10, 0.5, 1}: ranks median ceil(2)-1 = 1, p90..p99 = 3 */
    cmpt_assert_exact(m.abs.max, 1);
    assert_int_equal(m.abs.max_index, 2);
    cmpt_assert_exact(m.abs.mean, (1.5 + tiny) / 4);
    cmpt_assert_exact(m.abs.median, tiny);
    cmpt_assert_exact(m.abs.p90, 1);
    cmpt_assert_exact(m.abs.p95, 1);
    cmpt_assert_exact(m.abs.p99, 1);
    /* rel {0.5, 0, 0.25, 2^-10/eps} */
    cmpt_assert_exact(m.rel.max, tiny / eps);
    assert_int_equal(m.rel.max_index, 3);
    cmpt_assert_exact(m.rel.median, 0.25);
    cmpt_assert_exact(m.rel.p90, tiny / eps);
    cmpt_assert_close(m.rel.mean, (0.5 + 0.25 + tiny / eps) / 4, 1e-15);
    /* ulp in fp32: ulp(1) = 2^-23, ulp(4) = 2^-21, ulp(0) = 2^-149 */
    cmpt_assert_exact(m.ulp.max, 0x1p139);
    assert_int_equal(m.ulp.max_index, 3);
    cmpt_assert_exact(m.ulp.p99, 0x1p139);
    cmpt_assert_close(m.ulp.mean, (0x1p22 + 0x1p21 + 0x1p139) / 4, 1e-15);
    /* similarity */
    double srr = 21, stt = 15.25 + 0x1p-20, srt = 17.5, sdd = 1.25 + 0x1p-20;
    cmpt_assert_close(m.cosine, srt / sqrt(srr * stt), 1e-14);
    cmpt_assert_close(m.snr_db, 10 * log10(srr / sdd), 1e-14);
    cmpt_assert_close(m.l2_rel, sqrt(sdd) / sqrt(srr), 1e-14);
    /* sides */
    cmpt_assert_exact(m.ref.min, 0);
    cmpt_assert_exact(m.ref.max, 4);
    cmpt_assert_close(m.ref.mean, 1.75, 1e-15);
    cmpt_assert_close(m.ref.std, sqrt(2.1875), 1e-14);
    assert_int_equal(m.ref.zero, 1);
    assert_int_equal(m.test.zero, 0);
    cmpt_assert_exact(m.test.min, tiny);
    cmpt_assert_exact(m.test.max, 3);
    assert_int_equal(m.ref.subnormal, 0);
    assert_int_equal(m.rel_tiny_ref, 0);
    assert_int_equal(m.underflow_zero, 0);
    assert_int_equal(m.would_overflow, 0);
    assert_int_equal(m.special_mismatch, 0);
    /* elements 0, 2, 3 fail both abs > 1e-5 and rel > 1e-5 */
    assert_int_equal(m.n_fail, 3);
    assert_int_equal(m.first_fail_index, 0);
    assert_false(m.pass);
}

static void test_small_by_hand(void **state)
{
    (void)state;
    cmpt_each_kernel(small_body);
}

/* Nearest rank on 10 and 100 values: errors 1..n in shuffled order. */
static void percentiles_body(void)
{
    for (int n = 10; n <= 100; n += 90) {
        float r[100], t[100];
        for (int i = 0; i < n; i++) {
            r[i] = 1000;
            t[i] = 1000 + (float)((i * 37) % n + 1); /* a permutation of 1..n */
        }
        ld_tolerance tol = cmpt_tolerance(1e-5, 1e-5);
        tol.check = LD_CHECK_QUANTILE;
        tol.quantile = 0.25;
        ld_tensor_metrics m = compare_f32(r, t, n, LD_PRECISION_FP32, &tol);
        double median = n == 10 ? 5 : 50, p90 = n == 10 ? 9 : 90, p95 = n == 10 ? 10 : 95;
        double p99 = n == 10 ? 10 : 99, q25 = n == 10 ? 3 : 25;
        cmpt_assert_exact(m.abs.median, median);
        cmpt_assert_exact(m.abs.p90, p90);
        cmpt_assert_exact(m.abs.p95, p95);
        cmpt_assert_exact(m.abs.p99, p99);
        cmpt_assert_exact(m.abs.quantile, q25);
        cmpt_assert_exact(m.abs.max, n);
        cmpt_assert_exact(m.abs.mean, (n + 1) / 2.0);
        cmpt_assert_exact(m.rel.median, median / 1000);
        cmpt_assert_exact(m.rel.quantile, q25 / 1000);
        /* ulp of 1000 in fp32 is 2^-14 */
        cmpt_assert_exact(m.ulp.p99, p99 * 0x1p14);
        cmpt_assert_exact(m.ulp.max, n * 0x1p14);
    }
}

static void test_percentiles(void **state)
{
    (void)state;
    cmpt_each_kernel(percentiles_body);
}

static void specials_body(void)
{
    float nan = NAN, inf = INFINITY;
    float r[] = {nan, inf, -inf, 1, nan, 1, inf, 2};
    float t[] = {nan, inf, inf, nan, 1, inf, 1, 2};
    ld_tolerance tol = cmpt_tolerance(1e-5, 1e-5);
    ld_tensor_metrics m = compare_f32(r, t, 8, LD_PRECISION_FP32, &tol);
    assert_int_equal(m.special_mismatch, 5);
    assert_int_equal(m.nonfinite_test_only, 2);
    assert_int_equal(m.n_fail, 5);
    assert_int_equal(m.first_fail_index, 2);
    assert_true(isinf(m.abs.max));
    assert_int_equal(m.abs.max_index, 2);
    assert_true(isinf(m.abs.mean));
    /* sorted {0, 0, 0, inf x5}: median rank 3 */
    assert_true(isinf(m.abs.median));
    assert_true(isinf(m.rel.p90));
    assert_true(isinf(m.ulp.max));
    assert_true(isnan(m.cosine));
    assert_true(isinf(m.snr_db) && m.snr_db < 0);
    assert_true(isinf(m.l2_rel));
    assert_int_equal(m.ref.nan, 2);
    assert_int_equal(m.ref.pos_inf, 2);
    assert_int_equal(m.ref.neg_inf, 1);
    cmpt_assert_exact(m.ref.min, 1);
    cmpt_assert_exact(m.ref.max, 2);
    assert_int_equal(m.test.nan, 2);
    assert_int_equal(m.test.pos_inf, 3);
    assert_int_equal(m.test.neg_inf, 0);
    assert_false(m.pass);

    /* NaN and inf in the same places only: equal, unless NaN is an error */
    float r2[] = {nan, 1, -inf, 3}, t2[] = {nan, 1, -inf, 3};
    m = compare_f32(r2, t2, 4, LD_PRECISION_FP32, &tol);
    assert_true(m.pass);
    assert_int_equal(m.n_fail, 0);
    cmpt_assert_exact(m.abs.max, 0);
    cmpt_assert_exact(m.cosine, 1);
    assert_true(isinf(m.snr_db) && m.snr_db > 0);
    tol.nan_is_error = true;
    m = compare_f32(r2, t2, 4, LD_PRECISION_FP32, &tol);
    assert_false(m.pass);
    assert_int_equal(m.n_fail, 1);
    assert_int_equal(m.first_fail_index, 0);
    tol.check = LD_CHECK_MEDIAN; /* any NaN fails whatever the statistic */
    m = compare_f32(r2, t2, 4, LD_PRECISION_FP32, &tol);
    assert_false(m.pass);
}

static void test_nan_and_inf(void **state)
{
    (void)state;
    cmpt_each_kernel(specials_body);
}

static void subnormals_body(void)
{
    float r[] = {1e-40f, 0, 1, 1e-30f, -1e-39f, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
    float t[17];
    memcpy(t, r, sizeof t);
    t[5] = 0; /* underflow: t = 0 where r != 0 */
    ld_tolerance tol = cmpt_tolerance(1e-5, 1e-5);
    ld_tensor_metrics m = compare_f32(r, t, 17, LD_PRECISION_FP32, &tol);
    assert_int_equal(m.ref.subnormal, 2);
    assert_int_equal(m.test.subnormal, 2);
    assert_int_equal(m.ref.zero, 1);
    assert_int_equal(m.test.zero, 2);
    assert_int_equal(m.underflow_zero, 1);
    assert_int_equal(m.rel_tiny_ref, 2); /* below fp32's smallest normal */
    /* fp16 precision: 1e-30 is tiny too (below 2^-14) */
    m = compare_f32(r, t, 17, LD_PRECISION_FP16, &tol);
    assert_int_equal(m.rel_tiny_ref, 3);
    /* the ulp of a subnormal reference is the precision's subnormal spacing */
    float r3[] = {1e-40f}, t3[] = {2e-40f};
    m = compare_f32(r3, t3, 1, LD_PRECISION_FP32, &tol);
    cmpt_assert_exact(m.ulp.max, ((double)2e-40f - (double)1e-40f) / 0x1p-149);
    m = compare_f32(r3, t3, 1, LD_PRECISION_FP16, &tol);
    cmpt_assert_exact(m.ulp.max, ((double)2e-40f - (double)1e-40f) / 0x1p-24);
}

static void test_subnormals(void **state)
{
    (void)state;
    cmpt_each_kernel(subnormals_body);
}

static void test_empty_and_scalar(void **state)
{
    (void)state;
    int64_t dims[2] = {0, 3};
    ld_tensor *a = cmpt_make_tensor(LD_DTYPE_FLOAT32, 2, dims), *b = cmpt_make_tensor(LD_DTYPE_FLOAT16, 2, dims);
    ld_tensor_metrics m = cmpt_compare(a, b, LD_PRECISION_FP16, NULL);
    assert_int_equal(m.n, 0);
    assert_true(m.pass);
    assert_true(isnan(m.abs.max) && isnan(m.abs.median) && isnan(m.rel.mean));
    assert_true(isnan(m.ulp.p99));
    assert_int_equal(m.abs.max_index, -1);
    assert_true(isnan(m.cosine) && isnan(m.snr_db) && isnan(m.l2_rel));
    assert_true(isnan(m.ref.min) && isnan(m.test.std));
    assert_int_equal(m.first_fail_index, -1);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);

    a = cmpt_make_tensor(LD_DTYPE_FLOAT32, 0, NULL);
    b = cmpt_make_tensor(LD_DTYPE_FLOAT32, 0, NULL);
    *(float *)a->data = 2;
    *(float *)b->data = 2.5f;
    ld_tolerance tol = cmpt_tolerance(0.1, 0.1);
    m = cmpt_compare(a, b, LD_PRECISION_FP32, &tol);
    assert_int_equal(m.n, 1);
    cmpt_assert_exact(m.abs.max, 0.5);
    cmpt_assert_exact(m.abs.median, 0.5);
    cmpt_assert_exact(m.abs.p99, 0.5);
    cmpt_assert_exact(m.rel.mean, 0.25);
    assert_int_equal(m.abs.max_index, 0);
    cmpt_assert_exact(m.ulp.max, 0.5 / 0x1p-22);
    cmpt_assert_exact(m.ref.std, 0);
    cmpt_assert_exact(m.cosine, 1);
    assert_int_equal(m.n_fail, 1);
    assert_false(m.pass);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
}

/* The emulated case: fp16 test tensor, fp32 reference, fp16 precision. */
static void fp16_body(void)
{
    float r[] = {1.0001f, 100.03f, -3.14159f, 65519.f, 70000.f, 1e-6f, 0.1f, 2.f, 3.f, 4.f,
                 5.f, 6.f, 7.f, 8.f, 9.f, 10.f, 11.f, 12.f};
    int n = (int)(sizeof r / sizeof r[0]);
    ld_tensor *rt = f32_tensor(r, n), *tt = f16_tensor(r, n);
    ld_tolerance tol = cmpt_tolerance(ld_tolerance_default(LD_PRECISION_FP16),
                                 ld_tolerance_default(LD_PRECISION_FP16));
    ld_tensor_metrics m = cmpt_compare(rt, tt, LD_PRECISION_FP16, &tol);
    /* 65519 rounds to 65504 (finite), 70000 overflows to inf */
    assert_int_equal(m.would_overflow, 2);
    assert_int_equal(m.nonfinite_test_only, 1);
    assert_int_equal(m.special_mismatch, 1);
    assert_int_equal(m.test.pos_inf, 1);
    assert_int_equal(m.rel_tiny_ref, 1);   /* 1e-6 < 2^-14 */
    assert_int_equal(m.test.subnormal, 1); /* fp16(1e-6) is an fp16 subnormal */
    assert_int_equal(m.ref.subnormal, 0);  /* but a normal fp32 */
    /* max finite ulp error is at most half an ulp: check element 0 by hand */
    double t0 = ld_fp16_to_fp32(ld_fp32_to_fp16(r[0]));
    double u0 = fabs(t0 - (double)r[0]) / ld_precision_ulp(LD_PRECISION_FP16, r[0]);
    assert_true(u0 > 0.09 && u0 < 0.11);
    assert_true(isinf(m.ulp.max));
    assert_int_equal(m.ulp.max_index, 4);
    assert_int_equal(m.first_fail_index, 4); /* the only element beyond 10 unit roundoffs */
    assert_int_equal(m.n_fail, 1);
    assert_false(m.pass);
    ld_tensor_destroy(rt);
    ld_tensor_destroy(tt);
}

static void test_fp16_against_fp32(void **state)
{
    (void)state;
    cmpt_each_kernel(fp16_body);
}

static void test_shape_and_dtype_errors(void **state)
{
    (void)state;
    int64_t d23[2] = {2, 3}, d32[2] = {3, 2};
    ld_tensor *a = cmpt_make_tensor(LD_DTYPE_FLOAT32, 2, d23), *b = cmpt_make_tensor(LD_DTYPE_FLOAT32, 2, d32);
    ld_tensor_metrics m;
    ld_error err;
    assert_int_equal(ld_compare_tensors(a, b, LD_PRECISION_FP32, NULL, NULL, "conv1_out", &m, &err),
                     LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "conv1_out"));
    assert_non_null(strstr(err.message, "2x3"));
    assert_non_null(strstr(err.message, "3x2"));
    assert_null(strchr(err.message, '\n'));
    ld_tensor *c = cmpt_make_tensor(LD_DTYPE_INT64, 2, d23);
    assert_int_equal(ld_compare_tensors(a, c, LD_PRECISION_FP32, NULL, NULL, "idx", &m, &err),
                     LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "idx"));
    assert_non_null(strstr(err.message, "int64"));
    assert_non_null(strstr(err.message, "float32"));
    ld_tolerance tol = cmpt_tolerance(0, 0);
    tol.check = LD_CHECK_QUANTILE;
    tol.quantile = 1.5;
    assert_int_equal(ld_compare_tensors(a, a, LD_PRECISION_FP32, &tol, NULL, "q", &m, &err),
                     LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "quantile"));
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
    ld_tensor_destroy(c);
}

static void test_integers_exact(void **state)
{
    (void)state;
    int64_t n = 3;
    ld_tensor *a = cmpt_make_tensor(LD_DTYPE_INT32, 1, &n), *b = cmpt_make_tensor(LD_DTYPE_INT64, 1, &n);
    int32_t av[] = {1, 2, 3};
    int64_t bv[] = {1, 2, 4};
    memcpy(a->data, av, sizeof av);
    memcpy(b->data, bv, sizeof bv);
    ld_tolerance tol = cmpt_tolerance(10, 10); /* tolerances do not apply to integers */
    ld_tensor_metrics m = cmpt_compare(a, b, LD_PRECISION_FP32, &tol);
    assert_int_equal(m.n_fail, 1);
    assert_int_equal(m.first_fail_index, 2);
    assert_false(m.pass);
    cmpt_assert_exact(m.abs.max, 1);
    assert_int_equal(m.abs.max_index, 2);
    cmpt_assert_exact(m.rel.max, 1.0 / 3);
    assert_true(isnan(m.ulp.max) && isnan(m.ulp.p99));
    assert_int_equal(m.ulp.max_index, -1);
    ld_tensor_destroy(b);
    /* uint64 values that collide as doubles still differ */
    ld_tensor *c = cmpt_make_tensor(LD_DTYPE_UINT64, 1, &n), *d = cmpt_make_tensor(LD_DTYPE_UINT64, 1, &n);
    uint64_t cv[] = {1, (1ull << 63) + 1, 5}, dv[] = {1, 1ull << 63, 5};
    memcpy(c->data, cv, sizeof cv);
    memcpy(d->data, dv, sizeof dv);
    m = cmpt_compare(c, d, LD_PRECISION_FP32, &tol);
    assert_int_equal(m.n_fail, 1);
    assert_int_equal(m.first_fail_index, 1);
    cmpt_assert_exact(m.abs.max, 0);
    assert_false(m.pass);
    m = cmpt_compare(c, c, LD_PRECISION_FP32, &tol);
    assert_true(m.pass);
    assert_int_equal(m.first_fail_index, -1);
    /* bool against uint8 */
    ld_tensor *e = cmpt_make_tensor(LD_DTYPE_BOOL, 1, &n), *f = cmpt_make_tensor(LD_DTYPE_UINT8, 1, &n);
    uint8_t ev[] = {1, 0, 1}, fv[] = {1, 0, 1};
    memcpy(e->data, ev, 3);
    memcpy(f->data, fv, 3);
    m = cmpt_compare(e, f, LD_PRECISION_FP32, NULL);
    assert_true(m.pass);
    assert_int_equal(m.ref.zero, 1);
    ld_tensor_destroy(a);
    ld_tensor_destroy(c);
    ld_tensor_destroy(d);
    ld_tensor_destroy(e);
    ld_tensor_destroy(f);
}

static void element_rules_body(void)
{
    /* |t - r| = 0.15 at r = 10: Polygraphy fails it (0.15 > 0.1 and 0.015 >
       0.01), allclose passes it (0.15 <= 0.1 + 0.01 * 10) */
    float r[] = {10, 1}, t[] = {10.15f, 1};
    ld_tolerance tol = cmpt_tolerance(0.1, 0.01);
    ld_tensor_metrics m = compare_f32(r, t, 2, LD_PRECISION_FP32, &tol);
    assert_int_equal(m.n_fail, 1);
    assert_false(m.pass);
    tol.mode = LD_TOL_ALLCLOSE;
    m = compare_f32(r, t, 2, LD_PRECISION_FP32, &tol);
    assert_int_equal(m.n_fail, 0);
    assert_true(m.pass);
    /* Polygraphy passes an element when either error is small */
    tol = cmpt_tolerance(0.2, 0);
    m = compare_f32(r, t, 2, LD_PRECISION_FP32, &tol);
    assert_true(m.pass);
    tol = cmpt_tolerance(0, 0.02);
    m = compare_f32(r, t, 2, LD_PRECISION_FP32, &tol);
    assert_true(m.pass);
}

static void test_element_rules(void **state)
{
    (void)state;
    cmpt_each_kernel(element_rules_body);
}

static void check_stats_body(void)
{
    /* abs = rel = {0, 0, 0, 0, 1} */
    float r[] = {1, 1, 1, 1, 1}, t[] = {1, 1, 1, 1, 2};
    ld_tolerance tol = cmpt_tolerance(0.1, 0.1);
    struct { ld_check_stat check; double q; bool pass; } cases[] = {
        {LD_CHECK_ELEMWISE, 0, false}, {LD_CHECK_MAX, 0, false},     {LD_CHECK_MEAN, 0, false},
        {LD_CHECK_MEDIAN, 0, true},    {LD_CHECK_QUANTILE, 0.5, true}, {LD_CHECK_QUANTILE, 0.9, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tol.check = cases[i].check;
        tol.quantile = cases[i].q;
        ld_tensor_metrics m = compare_f32(r, t, 5, LD_PRECISION_FP32, &tol);
        if (m.pass != cases[i].pass)
            fail_msg("check %d quantile %g: pass %d", (int)cases[i].check, cases[i].q, m.pass);
        assert_int_equal(m.n_fail, 1); /* counted for every check */
    }
    /* a statistic fails only when both abs and rel exceed their tolerance */
    tol = cmpt_tolerance(2, 0);
    tol.check = LD_CHECK_MAX;
    assert_true(compare_f32(r, t, 5, LD_PRECISION_FP32, &tol).pass);
    tol = cmpt_tolerance(0, 2);
    tol.check = LD_CHECK_MAX;
    assert_true(compare_f32(r, t, 5, LD_PRECISION_FP32, &tol).pass);
}

static void test_check_stats(void **state)
{
    (void)state;
    cmpt_each_kernel(check_stats_body);
}

static void test_overflow_by_precision(void **state)
{
    (void)state;
    float r[] = {1e5f, 3.0e38f, 1};
    ld_tolerance tol = cmpt_tolerance(1, 1);
    assert_int_equal(compare_f32(r, r, 3, LD_PRECISION_FP16, &tol).would_overflow, 2);
    assert_int_equal(compare_f32(r, r, 3, LD_PRECISION_BF16, &tol).would_overflow, 0);
    float r2[] = {3.4e38f, 1};
    assert_int_equal(compare_f32(r2, r2, 2, LD_PRECISION_BF16, &tol).would_overflow, 1);
    assert_int_equal(compare_f32(r2, r2, 2, LD_PRECISION_FP32, &tol).would_overflow, 0);
    assert_int_equal(compare_f32(r2, r2, 2, LD_PRECISION_TF32, &tol).would_overflow, 0);
}

static void test_float64_and_default_tolerance(void **state)
{
    (void)state;
    int64_t n = 2;
    ld_tensor *a = cmpt_make_tensor(LD_DTYPE_FLOAT64, 1, &n), *b = cmpt_make_tensor(LD_DTYPE_FLOAT32, 1, &n);
    double av[] = {1.0 + 1e-12, 3};
    float bv[] = {1, 3};
    memcpy(a->data, av, sizeof av);
    memcpy(b->data, bv, sizeof bv);
    ld_tensor_metrics m = cmpt_compare(a, b, LD_PRECISION_FP32, NULL); /* default 1e-5 */
    assert_true(m.pass);
    cmpt_assert_close(m.abs.max, 1e-12, 1e-3);
    assert_int_equal(m.abs.max_index, 0);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
}

/* ---- cosine, snr_db and l2_rel on adversarial data ---- */

static uint64_t sim_rng = 0x5eed;
static double sim_rand(void) /* uniform in [-1, 1) */
{
    sim_rng ^= sim_rng << 13;
    sim_rng ^= sim_rng >> 7;
    sim_rng ^= sim_rng << 17;
    return (double)(sim_rng >> 11) * 0x1p-52 - 1.0;
}

#define SIM_KINDS 8
static const char *const sim_kind_names[SIM_KINDS] = {
    "huge test values where the reference is ~1 (different scales, cosine ~0)",
    "+-3e38 of both signs on both sides (cosine near 0 from terms of 1e77)",
    "t = r in the first half, -r in the second (cancellation across blocks)",
    "t = 1e6 r (scales 1e6 apart, cosine 1)",
    "t independent of r (cosine ~ 1/sqrt(n))",
    "a large mean and a first value far from it (the small tensors' shift)",
    "mixed magnitudes 1e-30..1e30, t = r (1 + noise)",
    "the brief's case: +-3e38 of both signs, some t = r, some t far off",
};

/* Element i of a pair of the given kind, in double (rounded to float by the caller). */
static void sim_pair(int kind, int64_t i, int64_t n, double *r, double *t)
{
    double x = 4 * sim_rand();
    *r = x;
    *t = x + 1e-3 * sim_rand();
    switch (kind) {
    case 0: if (i % 997 == 5) *t = (i % 2 ? 2.5e38 : -1e30) * (1 + sim_rand() / 4); break;
    case 1:
        if (i % 331 == 7) {
            *r = 3e38 * (1 + sim_rand() / 8);
            *t = (i / 331) % 2 ? *r : -*r;
        }
        break;
    case 2: *t = i < n / 2 ? x : -x; if (i == n / 3) *t = x + 1; break;
    case 3: *t = 1e6 * x; break;
    case 4: *t = 4 * sim_rand(); break;
    case 5: *r = i == 0 ? -3e30 : 1000 + sim_rand(); *t = *r + 1e-3 * sim_rand(); break;
    case 6: *r = ldexp(x, (int)(sim_rand() * 100)); *t = *r * (1 + 1e-4 * sim_rand()); break;
    default:
        if (i % 401 == 3) {
            *r = (i % 2 ? 3e38 : -3e38);
            *t = i % 3 == 0 ? *r : i % 3 == 1 ? -*r : 1.5;
        }
        break;
    }
}

/* Every kind, small (the kernel that keeps every error) and large (the
 * one that feeds the intervals), float32 and float64 pairs, float16 test
 * values: cosine, snr_db and l2_rel against exact sums. The AVX-512 kernel
 * derives Σrt (and Σx² around a shift), which is not accurate on this data
 * unless it sums again: the cosine was -0.0048 for -0.0072 before. */
static void similarity_body(void)
{
    const int64_t sizes[] = {4099, 140001};
    const ld_dtype types[][2] = {{LD_DTYPE_FLOAT32, LD_DTYPE_FLOAT32},
                                 {LD_DTYPE_FLOAT32, LD_DTYPE_FLOAT16},
                                 {LD_DTYPE_FLOAT64, LD_DTYPE_FLOAT64}};
    for (int kind = 0; kind < SIM_KINDS; kind++)
        for (size_t si = 0; si < 2; si++)
            for (size_t ti = 0; ti < 3; ti++) {
                int64_t n = sizes[si];
                if (ti == 1 && kind != 2 && kind != 4)
                    continue; /* the others go beyond float16 */
                ld_tensor *rt = cmpt_make_tensor(types[ti][0], 1, &n);
                ld_tensor *tt = cmpt_make_tensor(types[ti][1], 1, &n);
                cmpt_exact_sum srt = {0}, srr = {0}, stt = {0}, sdd = {0};
                for (int64_t i = 0; i < n; i++) {
                    double r, t;
                    sim_pair(kind, i, n, &r, &t);
                    if (types[ti][0] == LD_DTYPE_FLOAT64) {
                        ((double *)rt->data)[i] = r;
                        ((double *)tt->data)[i] = t;
                    } else {
                        r = (float)r;
                        ((float *)rt->data)[i] = (float)r;
                        if (types[ti][1] == LD_DTYPE_FLOAT16) {
                            ((ld_fp16 *)tt->data)[i] = ld_fp32_to_fp16((float)t);
                            t = ld_fp16_to_fp32(((ld_fp16 *)tt->data)[i]);
                        } else {
                            t = (float)t;
                            ((float *)tt->data)[i] = (float)t;
                        }
                    }
                    cmpt_exact_add_product(&srt, r, t);
                    cmpt_exact_add_product(&srr, r, r);
                    cmpt_exact_add_product(&stt, t, t);
                    cmpt_exact_add_product(&sdd, t - r, t - r);
                }
                double cosine, snr_db, l2_rel;
                cmpt_similarity(cmpt_exact_value(&srt), cmpt_exact_value(&srr),
                                cmpt_exact_value(&stt), cmpt_exact_value(&sdd), 0, &cosine,
                                &snr_db, &l2_rel);
                ld_tensor_metrics m = cmpt_compare(rt, tt, LD_PRECISION_FP32, NULL);
                char label[160];
                snprintf(label, sizeof label, "%s, n=%lld, %s/%s, %s", sim_kind_names[kind],
                         (long long)n, ld_dtype_name(types[ti][0]), ld_dtype_name(types[ti][1]),
                         cmpt_kernel_name());
                cmpt_assert_similarity(&m, cosine, snr_db, l2_rel, label);
                ld_tensor_destroy(rt);
                ld_tensor_destroy(tt);
            }
}

static void test_similarity_accuracy(void **state)
{
    (void)state;
    cmpt_each_kernel(similarity_body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical),
        cmocka_unit_test(test_small_by_hand),
        cmocka_unit_test(test_percentiles),
        cmocka_unit_test(test_nan_and_inf),
        cmocka_unit_test(test_subnormals),
        cmocka_unit_test(test_empty_and_scalar),
        cmocka_unit_test(test_fp16_against_fp32),
        cmocka_unit_test(test_shape_and_dtype_errors),
        cmocka_unit_test(test_integers_exact),
        cmocka_unit_test(test_element_rules),
        cmocka_unit_test(test_check_stats),
        cmocka_unit_test(test_overflow_by_precision),
        cmocka_unit_test(test_float64_and_default_tolerance),
        cmocka_unit_test(test_similarity_accuracy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
