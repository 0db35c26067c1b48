/* Tests of compare/clip_crossing.c (elements of a Clip output on the other side of a
 * bound than in the reference, issue 8 story 5), of the session filling
 * ld_compare_record.clip_crossings / ld_compare_summary.clip_crossings, and of the
 * field's trip through the JSON report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compare/clip_crossing.h"
#include "layerdiff/compare.h"
#include "layerdiff/report.h"
#include "layerdiff/round.h"

static ld_tensor *f32(const char *name, int n, const float *v)
{
    ld_error err;
    ld_tensor *t = NULL;
    ld_shape shape = {.rank = 1, .dims = {n}};
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    memcpy(t->data, v, t->nbytes);
    return t;
}

static ld_tensor *f16(const char *name, int n, const float *v)
{
    ld_error err;
    ld_tensor *t = NULL;
    ld_shape shape = {.rank = 1, .dims = {n}};
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT16, &shape, &err), LD_OK);
    for (int i = 0; i < n; i++)
        ((ld_fp16 *)t->data)[i] = ld_fp32_to_fp16(v[i]);
    return t;
}

static int64_t crossings(const float *r, const float *t, int n)
{
    ld_tensor *a = f32("r", n, r), *b = f32("t", n, t);
    int64_t c = ld_clip_crossings(a, b);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
    return c;
}

/* Clip(0, 6): element 1 is clamped to 0 in the reference only, elements 4 and 5 to 6 in
 * the test only; elements at a bound on both sides do not count. */
static void test_counts_one_sided_clamps(void **state)
{
    (void)state;
    const float r[] = {0, 0, 3, 6, 5.999f, 5.9f, 0, 2};
    const float t[] = {0, 1e-3f, 3, 6, 6, 6, 0, 2};
    assert_int_equal(crossings(r, t, 8), 3);
    assert_int_equal(crossings(t, r, 8), 3); /* symmetric */
    assert_int_equal(crossings(r, r, 8), 0);
}

/* The bounds are read off the tensors: a smallest (largest) value the two sides do not
 * share is no bound, so an unclamped tensor whose extremes moved counts nothing. */
static void test_unshared_extremes_are_no_bound(void **state)
{
    (void)state;
    const float r[] = {0.5f, 1, 2, 3.25f};
    const float t[] = {0.5001f, 1, 2, 3.2501f};
    assert_int_equal(crossings(r, t, 4), 0);
    /* lower bound shared (0), upper not: only the lower one counts */
    const float r2[] = {0, 0.01f, 2, 3.25f};
    const float t2[] = {0, 0, 2, 3.2501f};
    assert_int_equal(crossings(r2, t2, 4), 1);
}

/* An element clamped to the lower bound on one side and the upper on the other counts
 * once; NaNs never sit at a bound. */
static void test_both_bounds_and_nans(void **state)
{
    (void)state;
    const float r[] = {0, 6, 0, 3, NAN, 6};
    const float t[] = {6, 6, 0, NAN, 0, 6};
    assert_int_equal(crossings(r, t, 6), 2); /* elements 0 and 4 */
}

/* An fp16 test tensor against the fp32 reference: the reference's bound is converted to
 * fp16 before it is compared (Clip(0.1, 0.7): neither is exact in fp16). */
static void test_fp16_test_against_fp32_reference(void **state)
{
    (void)state;
    const float r[] = {0.1f, 0.1f, 0.4f, 0.7f, 0.69f};
    const float t[] = {0.1f, 0.1002f, 0.4f, 0.7f, 0.7f};
    ld_tensor *a = f32("r", 5, r), *b = f16("t", 5, t);
    assert_int_equal(ld_clip_crossings(a, b), 2);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
}

/* Tensors that cannot be compared give 0, never a crash. */
static void test_degenerate_inputs(void **state)
{
    (void)state;
    const float v[] = {0, 1, 2};
    ld_tensor *a = f32("a", 3, v), *b = f32("b", 2, v);
    assert_int_equal(ld_clip_crossings(a, b), 0);
    assert_int_equal(ld_clip_crossings(a, NULL), 0);
    ld_error err;
    ld_tensor *ints = NULL;
    ld_shape shape = {.rank = 1, .dims = {3}};
    assert_int_equal(ld_tensor_create(&ints, "i", LD_DTYPE_INT64, &shape, &err), LD_OK);
    assert_int_equal(ld_clip_crossings(ints, ints), 0);
    const float nans[] = {NAN, NAN, NAN};
    ld_tensor *n = f32("n", 3, nans);
    assert_int_equal(ld_clip_crossings(n, a), 0);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
    ld_tensor_destroy(ints);
    ld_tensor_destroy(n);
    assert_true(ld_clip_crossing_applies("Clip"));
    assert_false(ld_clip_crossing_applies("Relu"));
    assert_false(ld_clip_crossing_applies(NULL));
}

/* More elements than one block of the implementation (4096), crossings in the last one. */
static void test_many_blocks(void **state)
{
    (void)state;
    enum { COUNT = 3 * 4096 + 17 };
    float *r = malloc(COUNT * sizeof *r), *t = malloc(COUNT * sizeof *t);
    assert_non_null(r);
    assert_non_null(t);
    for (int i = 0; i < COUNT; i++)
        r[i] = t[i] = (float)(i % 7); /* 0 .. 6 */
    r[COUNT - 1] = 0; /* clamped low in the reference only */
    t[COUNT - 1] = 0.25f;
    r[COUNT - 2] = 5.5f; /* clamped high in the test only */
    t[COUNT - 2] = 6;
    assert_int_equal(crossings(r, t, COUNT), 2);
    free(r);
    free(t);
}

/* The session records it for Clip outputs (-1 for others), sums it in the summary and the
 * JSON report carries both through a write and a read. */
static void test_session_and_report(void **state)
{
    (void)state;
    ld_error err;
    ld_compare_session *s = NULL;
    assert_int_equal(ld_compare_session_create(&s, NULL, &err), LD_OK);
    const float x[] = {-1, 0.5f, 3, 7};
    const float pre_t[] = {-1, 0.5f, 3, 7};
    const float r[] = {0, 0, 3, 6}, t[] = {1e-3f, 0, 3, 6};
    ld_tensor *xr = f32("x", 4, x), *xt = f32("x", 4, pre_t);
    ld_tensor *cr = f32("y", 4, r), *ct = f32("y", 4, t);
    const char *clip_inputs[] = {"x"};
    ld_compare_item in = {.name = "x", .node = "", .op_type = "", .topo_index = -1,
                          .precision = LD_PRECISION_FP32, .ref = xr, .test = xt};
    ld_compare_item clip = {.name = "y", .node = "clip", .op_type = "Clip", .topo_index = 0,
                            .precision = LD_PRECISION_TF32, .n_inputs = 1,
                            .inputs = clip_inputs, .is_graph_output = true, .ref = cr,
                            .test = ct};
    assert_int_equal(ld_compare_session_add(s, &in, &err), LD_OK);
    assert_int_equal(ld_compare_session_add(s, &clip, &err), LD_OK);
    assert_int_equal(ld_compare_session_finish(s, &err), LD_OK);
    assert_int_equal(ld_compare_session_record(s, 0)->clip_crossings, -1);
    assert_int_equal(ld_compare_session_record(s, 1)->clip_crossings, 1);
    assert_int_equal(ld_compare_session_summary(s)->clip_crossings, 1);

    char path[] = "/tmp/ld-clip-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ld_report_context ctx = {.command = "run", .input_seed = 1};
    assert_int_equal(ld_report_write_json(s, &ctx, path, &err), LD_OK);
    ld_report *rep = NULL;
    ld_status st = ld_report_read_json(path, &rep, &err);
    if (st != LD_OK)
        fail_msg("%s", err.message);
    assert_int_equal(rep->records[0].clip_crossings, -1);
    assert_int_equal(rep->records[1].clip_crossings, 1);
    assert_int_equal(rep->summary.clip_crossings, 1);
    ld_report_free(rep);
    unlink(path);

    ld_compare_session_destroy(s);
    ld_tensor_destroy(xr);
    ld_tensor_destroy(xt);
    ld_tensor_destroy(cr);
    ld_tensor_destroy(ct);
}

/* Without a Clip output the summary says -1 (JSON null), not 0. */
static void test_no_clip_is_not_zero(void **state)
{
    (void)state;
    ld_error err;
    ld_compare_session *s = NULL;
    assert_int_equal(ld_compare_session_create(&s, NULL, &err), LD_OK);
    const float v[] = {0, 6};
    ld_tensor *a = f32("a", 2, v);
    ld_compare_item relu = {.name = "a", .node = "relu", .op_type = "Relu", .topo_index = 0,
                            .precision = LD_PRECISION_FP32, .ref = a, .test = a};
    assert_int_equal(ld_compare_session_add(s, &relu, &err), LD_OK);
    assert_int_equal(ld_compare_session_finish(s, &err), LD_OK);
    assert_int_equal(ld_compare_session_summary(s)->clip_crossings, -1);
    ld_compare_session_destroy(s);
    ld_tensor_destroy(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_one_sided_clamps),
        cmocka_unit_test(test_unshared_extremes_are_no_bound),
        cmocka_unit_test(test_both_bounds_and_nans),
        cmocka_unit_test(test_fp16_test_against_fp32_reference),
        cmocka_unit_test(test_degenerate_inputs),
        cmocka_unit_test(test_many_blocks),
        cmocka_unit_test(test_session_and_report),
        cmocka_unit_test(test_no_clip_is_not_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
