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
#include "compare/metrics_internal.h"
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

/* A tensor of dtype d holding v (as d rounds it). */
static ld_tensor *of_dtype(ld_dtype d, int n, const float *v)
{
    ld_error err;
    ld_tensor *t = NULL;
    ld_shape shape = {.rank = 1, .dims = {n}};
    assert_int_equal(ld_tensor_create(&t, "x", d, &shape, &err), LD_OK);
    for (int i = 0; i < n; i++) {
        if (d == LD_DTYPE_FLOAT32)
            ((float *)t->data)[i] = v[i];
        else if (d == LD_DTYPE_FLOAT16)
            ((ld_fp16 *)t->data)[i] = ld_fp32_to_fp16(v[i]);
        else if (d == LD_DTYPE_BFLOAT16)
            ((ld_bf16 *)t->data)[i] = ld_fp32_to_bf16(v[i]);
        else
            ((double *)t->data)[i] = v[i];
    }
    return t;
}

static double value_at(const ld_tensor *t, int i)
{
    switch (t->dtype) {
    case LD_DTYPE_FLOAT32:
        return ((const float *)t->data)[i];
    case LD_DTYPE_FLOAT16:
        return ld_fp16_to_fp32(((const ld_fp16 *)t->data)[i]);
    case LD_DTYPE_BFLOAT16:
        return ld_bf16_to_fp32(((const ld_bf16 *)t->data)[i]);
    default:
        return ((const double *)t->data)[i];
    }
}

/* The header's definition, element by element in double, written apart from
 * the implementation: the shared smallest/largest non-NaN values are the
 * bounds (the reference's rounded to the test's dtype), an element counts
 * when exactly one side sits at one of them. */
static int64_t crossings_by_definition(const ld_tensor *r, const ld_tensor *t)
{
    int n = (int)r->count;
    double rl = INFINITY, rh = -INFINITY, tl = INFINITY, th = -INFINITY;
    int seen_r = 0, seen_t = 0;
    for (int i = 0; i < n; i++) {
        double x = value_at(r, i), y = value_at(t, i);
        if (x == x) {
            seen_r = 1;
            rl = fmin(rl, x);
            rh = fmax(rh, x);
        }
        if (y == y) {
            seen_t = 1;
            tl = fmin(tl, y);
            th = fmax(th, y);
        }
    }
    if (!seen_r || !seen_t)
        return 0;
    ld_tensor *b = of_dtype(t->dtype, 1, (const float[]){(float)rl});
    double rl_t = t->dtype == LD_DTYPE_FLOAT64 ? rl : value_at(b, 0);
    ld_tensor_destroy(b);
    b = of_dtype(t->dtype, 1, (const float[]){(float)rh});
    double rh_t = t->dtype == LD_DTYPE_FLOAT64 ? rh : value_at(b, 0);
    ld_tensor_destroy(b);
    bool lo = rl_t == tl, hi = rh_t == th;
    int64_t c = 0;
    for (int i = 0; i < n; i++) {
        double x = value_at(r, i), y = value_at(t, i);
        c += (lo && ((x == rl) != (y == tl))) || (hi && ((x == rh) != (y == th)));
    }
    return c;
}

static uint64_t rng_state = 0x1234567u;
static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* Random Clip-like outputs (values clamped to [lo, hi], a few nudged across,
 * NaNs, infinities, signed zeros) of every float dtype pair and of sizes
 * around the vector width and the block: the vector and portable loops both
 * agree with the definition. */
static void test_random_against_definition(void **state)
{
    (void)state;
    const ld_dtype types[] = {LD_DTYPE_FLOAT32, LD_DTYPE_FLOAT16, LD_DTYPE_BFLOAT16,
                              LD_DTYPE_FLOAT64};
    const int sizes[] = {1, 7, 8, 15, 16, 17, 33, 4095, 4096, 4097, 9000};
    float *rv = malloc(9000 * sizeof *rv), *tv = malloc(9000 * sizeof *tv);
    assert_non_null(rv);
    assert_non_null(tv);
    int64_t total = 0, both = 0;
    for (int trial = 0; trial < 40; trial++) {
        int n = sizes[trial % 11];
        float lo = (trial % 3) ? 0.0f : -0.3f, hi = (trial % 5) ? 6.0f : 0.7f;
        for (int i = 0; i < n; i++) {
            float x = -2.0f + 10.0f * (float)rnd() / 4294967296.0f;
            x = x < lo ? lo : x > hi ? hi : x;
            float y = x;
            switch (rnd() % 16) {
            case 0: /* let through just inside the bound in the test */
                y = x == hi ? hi - 1e-3f : x;
                break;
            case 1: /* and in some trials past it: that bound is then not shared */
                y = x == lo ? lo + 1e-3f : trial % 4 == 3 ? x - 1e-3f : x;
                break;
            case 2: x = lo; break;        /* at the bound in the reference only */
            case 3: y = hi; break;
            case 4: y = NAN; break;
            case 5: x = NAN; break;
            case 6: if (trial == 7) { x = INFINITY; y = INFINITY; } break;
            case 7: if (lo == 0.0f) y = -0.0f; break;
            default: break;
            }
            rv[i] = x;
            tv[i] = y;
        }
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++) {
                ld_tensor *r = of_dtype(types[a], n, rv), *t = of_dtype(types[b], n, tv);
                int64_t want = crossings_by_definition(r, t);
                cmp_force_portable(true);
                int64_t portable = ld_clip_crossings(r, t);
                cmp_force_portable(false);
                int64_t fast = ld_clip_crossings(r, t);
                if (portable != want || fast != want)
                    fail_msg("trial %d n %d dtypes %d/%d: definition %lld, portable %lld, "
                             "vector %lld", trial, n, a, b, (long long)want,
                             (long long)portable, (long long)fast);
                total += want;
                if (trial % 4 != 3)
                    both += want;
                ld_tensor_destroy(r);
                ld_tensor_destroy(t);
            }
    }
    assert_true(total > 1000); /* the data do cross bounds, */
    assert_true(both > 100);   /* both of them in some trials */
    free(rv);
    free(tv);
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

static int portable_setup(void **state)
{
    (void)state;
    cmp_force_portable(true);
    return 0;
}

static int portable_teardown(void **state)
{
    (void)state;
    cmp_force_portable(false);
    return 0;
}

int main(void)
{
    /* every case on the CPU's vector loops, then on the portable ones */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_one_sided_clamps),
        cmocka_unit_test(test_unshared_extremes_are_no_bound),
        cmocka_unit_test(test_both_bounds_and_nans),
        cmocka_unit_test(test_fp16_test_against_fp32_reference),
        cmocka_unit_test(test_degenerate_inputs),
        cmocka_unit_test(test_many_blocks),
        cmocka_unit_test(test_session_and_report),
        cmocka_unit_test(test_no_clip_is_not_zero),
        cmocka_unit_test(test_random_against_definition),
        cmocka_unit_test_setup_teardown(test_counts_one_sided_clamps, portable_setup,
                                        portable_teardown),
        cmocka_unit_test_setup_teardown(test_unshared_extremes_are_no_bound, portable_setup,
                                        portable_teardown),
        cmocka_unit_test_setup_teardown(test_both_bounds_and_nans, portable_setup,
                                        portable_teardown),
        cmocka_unit_test_setup_teardown(test_fp16_test_against_fp32_reference, portable_setup,
                                        portable_teardown),
        cmocka_unit_test_setup_teardown(test_many_blocks, portable_setup, portable_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
