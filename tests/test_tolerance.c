/* Unit tests for compare/tolerance.c: --atol/--rtol parsing (global values,
 * PATTERN:VALUE overrides, patterns with colons, bad values named in the
 * error), glob matching with the last matching override winning, the
 * per-precision defaults and what ld_tolerance_for copies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "layerdiff/compare.h"

static void test_defaults(void **state)
{
    (void)state;
    assert_true(ld_tolerance_default(LD_PRECISION_FP32) == 1e-5);
    assert_true(ld_tolerance_default(LD_PRECISION_FP16) == 10 * 0x1p-11);
    assert_true(ld_tolerance_default(LD_PRECISION_TF32) == 10 * 0x1p-11);
    assert_true(ld_tolerance_default(LD_PRECISION_BF16) == 10 * 0x1p-8);
    /* no spec: the defaults, Polygraphy's element rule */
    ld_tolerance t = ld_tolerance_for(NULL, "x", LD_PRECISION_BF16);
    assert_true(t.atol == 10 * 0x1p-8 && t.rtol == 10 * 0x1p-8);
    assert_int_equal(t.mode, LD_TOL_POLYGRAPHY);
    assert_int_equal(t.check, LD_CHECK_ELEMWISE);
    assert_false(t.nan_is_error);
}

static void test_global_and_overrides(void **state)
{
    (void)state;
    ld_tolerance_spec spec;
    ld_error err;
    memset(&spec, 0, sizeof spec);
    spec.mode = LD_TOL_ALLCLOSE;
    spec.check = LD_CHECK_QUANTILE;
    spec.quantile = 0.9;
    spec.nan_is_error = true;
    assert_int_equal(ld_tolerance_spec_add(&spec, true, "1e-3", &err), LD_OK);
    assert_int_equal(ld_tolerance_spec_add(&spec, true, "conv*:1e-2", &err), LD_OK);
    assert_int_equal(ld_tolerance_spec_add(&spec, true, "conv1_*:0.5", &err), LD_OK);
    assert_int_equal(ld_tolerance_spec_add(&spec, true, "conv*:0.25", &err), LD_OK);
    assert_int_equal(ld_tolerance_spec_add(&spec, false, "layer:0:2e-4", &err), LD_OK);
    assert_int_equal(spec.n_atol, 3);
    assert_int_equal(spec.n_rtol, 1);
    assert_string_equal(spec.rtol_overrides[0].pattern, "layer:0");

    /* the last matching override wins, whichever is more specific */
    ld_tolerance t = ld_tolerance_for(&spec, "conv1_out", LD_PRECISION_FP16);
    assert_true(t.atol == 0.25);
    assert_true(t.rtol == 10 * 0x1p-11); /* no rtol given: the precision's default */
    t = ld_tolerance_for(&spec, "relu", LD_PRECISION_FP16);
    assert_true(t.atol == 1e-3);         /* the global value */
    t = ld_tolerance_for(&spec, "layer:0", LD_PRECISION_FP32);
    assert_true(t.rtol == 2e-4);
    assert_true(t.atol == 1e-3);
    t = ld_tolerance_for(&spec, "layer:01", LD_PRECISION_FP32);
    assert_true(t.rtol == 1e-5);
    assert_int_equal(t.mode, LD_TOL_ALLCLOSE);
    assert_int_equal(t.check, LD_CHECK_QUANTILE);
    assert_true(t.quantile == 0.9);
    assert_true(t.nan_is_error);
    /* a later global value replaces the earlier one */
    assert_int_equal(ld_tolerance_spec_add(&spec, true, "0", &err), LD_OK);
    assert_true(ld_tolerance_for(&spec, "relu", LD_PRECISION_FP16).atol == 0);
    ld_tolerance_spec_free(&spec);
    assert_int_equal(spec.n_atol, 0);
    assert_null(spec.atol_overrides);
    ld_tolerance_spec_free(&spec); /* twice is harmless */
}

static void test_bad_values(void **state)
{
    (void)state;
    const char *bad[] = {"", "abc", "-1e-3", "1e-3x", "conv:", "conv:-2", "nan", "inf",
                         "x:1e999", " 1", "conv:abc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_tolerance_spec spec;
        ld_error err;
        memset(&spec, 0, sizeof spec);
        bool atol = i % 2 == 0;
        if (ld_tolerance_spec_add(&spec, atol, bad[i], &err) != LD_ERR_USAGE)
            fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(err.message, atol ? "--atol" : "--rtol"));
        assert_null(strchr(err.message, '\n'));
        assert_int_equal(spec.n_atol + spec.n_rtol, 0);
        assert_false(spec.atol_set || spec.rtol_set);
    }
    ld_tolerance_spec spec;
    ld_error err;
    memset(&spec, 0, sizeof spec);
    assert_int_equal(ld_tolerance_spec_add(&spec, true, ":1e-3", &err), LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "empty"));
    assert_int_equal(ld_tolerance_spec_add(&spec, true, "1e-3x", &err), LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "1e-3x"));
    /* accepted forms */
    assert_int_equal(ld_tolerance_spec_add(&spec, false, "0.5", &err), LD_OK);
    assert_int_equal(ld_tolerance_spec_add(&spec, false, "1E-2", &err), LD_OK);
    assert_true(spec.rtol == 1e-2);
    assert_int_equal(ld_tolerance_spec_add(&spec, false, "*:-0", &err), LD_OK);
    assert_true(spec.rtol_overrides[0].value == 0 && !signbit(spec.rtol_overrides[0].value));
    ld_tolerance_spec_free(&spec);
}

static void test_glob_classes(void **state)
{
    (void)state;
    ld_tolerance_spec spec;
    ld_error err;
    memset(&spec, 0, sizeof spec);
    assert_int_equal(ld_tolerance_spec_add(&spec, true, "block[0-2]/*:1", &err), LD_OK);
    assert_int_equal(ld_tolerance_spec_add(&spec, true, "?x:2", &err), LD_OK);
    assert_true(ld_tolerance_for(&spec, "block1/conv", LD_PRECISION_FP32).atol == 1);
    assert_true(ld_tolerance_for(&spec, "block3/conv", LD_PRECISION_FP32).atol == 1e-5);
    assert_true(ld_tolerance_for(&spec, "ax", LD_PRECISION_FP32).atol == 2);
    assert_true(ld_tolerance_for(&spec, "abx", LD_PRECISION_FP32).atol == 1e-5);
    assert_true(ld_tolerance_for(&spec, NULL, LD_PRECISION_FP32).atol == 1e-5);
    ld_tolerance_spec_free(&spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_global_and_overrides),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_glob_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
