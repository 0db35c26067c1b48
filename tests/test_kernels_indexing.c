/* Unit tests for the indexing, scatter, ordering and scan kernels
 * (backends/kernels/{indexing,scatter,sort_ops,scan_ops}.c), for what the
 * ONNX node tests cover poorly: every index validated (out of range fails
 * naming the node, the index, its position and the axis size; negative
 * indices count from the back), duplicate scatter indices and reductions in
 * integer and float16 types, OneHot/Compress/NonZero corner cases, TopK and
 * Unique tie orders and NaN, ArgMax select_last_index, CumSum in float16
 * (float32 accumulation, one rounding). One-node models run on the
 * reference backend through tests/support/kernel_run.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/round.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

#define expect_fail kr_expect_fail_op
#define expect_shape kr_expect_shape
#define expect_values kr_expect_values
#define expect_i64 kr_expect_i64

#define I64 LD_DTYPE_INT64
#define F32 LD_DTYPE_FLOAT32
/* A graph input (not an initializer). */
#define IN(...) {__VA_ARGS__, false}

/* --- indexing ----------------------------------------------------------------------------- */

static void test_gather_indices_validated(void **state)
{
    (void)state;
    kr_result r;
    uint16_t x[6] = {10, 11, 12, 20, 21, 22};
    int32_t idx[] = {-1, 0, 2};
    kr_attr axis1[] = {{KR_INT, "axis", .i = 1}, {0}};
    kr_input in[] = {IN("x", LD_DTYPE_UINT16, 2, {2, 3}, x), IN("i", LD_DTYPE_INT32, 1, {3}, idx)};
    kr_run(13, "Gather", axis1, in, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){12, 10, 12, 22, 20, 22}, 6);
    kr_free(&r);

    int64_t bad[] = {0, 3};
    kr_input in2[] = {IN("x", LD_DTYPE_UINT16, 2, {2, 3}, x), IN("i", I64, 1, {2}, bad)};
    kr_run(13, "Gather", axis1, in2, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Gather", "index 3 (indices element 1) is out of range for "
                "axis 1 of size 3");
    kr_free(&r);

    /* Empty indices give an empty output, not an error. */
    kr_input in3[] = {IN("x", LD_DTYPE_UINT16, 2, {2, 3}, x), IN("i", I64, 1, {0}, bad)};
    kr_run(13, "Gather", NULL, in3, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){0, 3});
    kr_free(&r);

    float fidx[] = {0};
    kr_input in4[] = {IN("x", LD_DTYPE_UINT16, 2, {2, 3}, x), IN("i", F32, 1, {1}, fidx)};
    kr_run(13, "Gather", NULL, in4, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Gather", "indices must be int32 or int64");
    kr_free(&r);

    int64_t ge[] = {0, -4};
    kr_input in5[] = {IN("x", LD_DTYPE_UINT16, 2, {2, 3}, x), IN("i", I64, 2, {1, 2}, ge)};
    kr_run(13, "GatherElements", axis1, in5, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "GatherElements", "index -4 (indices element 1) is out of "
                "range for axis 1 of size 3");
    kr_free(&r);

    int64_t nd[] = {1, 5};
    kr_input in6[] = {IN("x", LD_DTYPE_UINT16, 2, {2, 3}, x), IN("i", I64, 2, {1, 2}, nd)};
    kr_run(13, "GatherND", NULL, in6, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "GatherND", "index 5 (indices element 1) is out of range for "
                "axis 1 of size 3");
    kr_free(&r);
}

static void test_scatter_reductions_and_errors(void **state)
{
    (void)state;
    kr_result r;
    int32_t data[4] = {1, 2, 3, 4};
    int64_t idx[] = {1, 1, -1};
    int32_t upd[] = {5, 6, 7};
    kr_attr mul[] = {{KR_STRING, "reduction", .s = "mul"}, {0}};
    kr_input in[] = {IN("d", LD_DTYPE_INT32, 1, {4}, data), IN("i", I64, 1, {3}, idx),
                IN("u", LD_DTYPE_INT32, 1, {3}, upd)};
    kr_run(16, "ScatterElements", mul, in, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){1, 60, 3, 28}, 4);
    kr_free(&r);

    /* Without a reduction duplicates resolve in index order: the last wins. */
    kr_run(13, "ScatterElements", NULL, in, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){1, 6, 3, 7}, 4);
    kr_free(&r);

    /* float16 add rounds after every combination: 2048 + 1 + 1 stays 2048. */
    ld_fp16 hd[1] = {ld_fp32_to_fp16(2048)}, hu[2] = {ld_fp32_to_fp16(1), ld_fp32_to_fp16(1)};
    int64_t zeros[2][1] = {{0}, {0}};
    kr_attr add[] = {{KR_STRING, "reduction", .s = "add"}, {0}};
    kr_input h[] = {IN("d", LD_DTYPE_FLOAT16, 1, {1}, hd), IN("i", I64, 2, {2, 1}, zeros),
               IN("u", LD_DTYPE_FLOAT16, 1, {2}, hu)};
    kr_run(16, "ScatterND", add, h, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){2048}, 1);
    kr_free(&r);

    int64_t bad[] = {4};
    kr_input in2[] = {IN("d", LD_DTYPE_INT32, 1, {4}, data), IN("i", I64, 1, {1}, bad),
                 IN("u", LD_DTYPE_INT32, 1, {1}, upd)};
    kr_run(11, "Scatter", NULL, in2, 3, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Scatter", "index 4 (indices element 0) is out of range for "
                "axis 0 of size 4");
    kr_free(&r);

    int64_t nd[] = {0};
    kr_input in3[] = {IN("d", LD_DTYPE_INT32, 2, {2, 2}, data), IN("i", I64, 2, {1, 1}, nd),
                 IN("u", LD_DTYPE_INT32, 1, {3}, upd)};
    kr_run(16, "ScatterND", NULL, in3, 3, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "ScatterND", "updates have shape 3, expected 1x2");
    kr_free(&r);
}

static void test_onehot_compress_nonzero(void **state)
{
    (void)state;
    kr_result r;
    float idx[] = {1.9f, -1, 7, 0};
    float depth = 3;
    int8_t values[] = {-1, 4};
    kr_attr axis0[] = {{KR_INT, "axis", .i = 0}, {0}};
    kr_input in[] = {IN("i", F32, 1, {4}, idx), IN("d", F32, 0, {0}, &depth),
                IN("v", LD_DTYPE_INT8, 1, {2}, values)};
    kr_run(11, "OneHot", axis0, in, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){3, 4});
    /* 1.9 truncates to 1; -1 means depth-1; 7 is out of range: all off. */
    expect_values(r.t[0], (double[]){-1, -1, -1, 4, 4, -1, -1, -1, -1, 4, -1, -1}, 12);
    kr_free(&r);

    int64_t x[6] = {1, 2, 3, 4, 5, 6};
    bool cond[] = {false, true, true, true, true, true, true, true}; /* longer than the axis */
    kr_input c[] = {IN("x", I64, 2, {2, 3}, x), IN("c", LD_DTYPE_BOOL, 1, {2}, cond)};
    kr_run(11, "Compress", NULL, c, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_i64(r.t[0], (int64_t[]){2}, 1);
    kr_free(&r);

    kr_attr axis1[] = {{KR_INT, "axis", .i = 1}, {0}};
    kr_input c2[] = {IN("x", I64, 2, {2, 3}, x), IN("c", LD_DTYPE_BOOL, 1, {8}, cond)};
    kr_run(11, "Compress", axis1, c2, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_i64(r.t[0], (int64_t[]){2, 3, 5, 6}, 4);
    kr_free(&r);

    /* NonZero: -0.0 is zero, NaN is not; a scalar is a 1-element vector. */
    float f[] = {0.0f, -0.0f, NAN, 1.0f};
    kr_input nz[] = {IN("x", F32, 2, {2, 2}, f)};
    kr_run(13, "NonZero", NULL, nz, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){2, 2});
    expect_i64(r.t[0], (int64_t[]){1, 1, 0, 1}, 4);
    kr_free(&r);

    bool s = true;
    kr_input nzs[] = {IN("x", LD_DTYPE_BOOL, 0, {0}, &s)};
    kr_run(13, "NonZero", NULL, nzs, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){1, 1});
    kr_free(&r);
}

/* --- order and scans ------------------------------------------------------------------------ */

static void test_topk_ties_nan_and_dtypes(void **state)
{
    (void)state;
    kr_result r;
    float x[] = {3, 1, 3, NAN, 1, 2};
    int64_t k = 4;
    kr_input in[] = {IN("x", F32, 1, {6}, x), IN("k", I64, 1, {1}, &k)};
    kr_run(11, "TopK", NULL, in, 2, "v,i", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){NAN, 3, 3, 2}, 4);
    expect_i64(r.t[1], (int64_t[]){3, 0, 2, 5}, 4);
    kr_free(&r);

    kr_attr smallest[] = {{KR_INT, "largest", .i = 0}, {KR_INT, "axis", .i = 0}, {0}};
    int32_t xi[] = {5, -2, 5, -2, 0, 7};
    int64_t k2 = 2;
    kr_input in2[] = {IN("x", LD_DTYPE_INT32, 2, {3, 2}, xi), IN("k", I64, 1, {1}, &k2)};
    kr_run(11, "TopK", smallest, in2, 2, "v,i", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){0, -2, 5, -2}, 4);
    expect_i64(r.t[1], (int64_t[]){2, 0, 0, 1}, 4);
    kr_free(&r);

    /* TopK-1: k attribute; float16 values come back unchanged. */
    ld_fp16 h[3] = {ld_fp32_to_fp16(0.1f), ld_fp32_to_fp16(0.3f), ld_fp32_to_fp16(0.2f)};
    kr_attr k1[] = {{KR_INT, "k", .i = 1}, {0}};
    kr_input in3[] = {IN("x", LD_DTYPE_FLOAT16, 1, {3}, h)};
    kr_run(1, "TopK", k1, in3, 1, "v,i", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_FLOAT16);
    assert_int_equal(((ld_fp16 *)r.t[0]->data)[0].bits, h[1].bits);
    kr_free(&r);

    int64_t k4 = 7;
    kr_input in4[] = {IN("x", F32, 1, {6}, x), IN("k", I64, 1, {1}, &k4)};
    kr_run(11, "TopK", NULL, in4, 2, "v,i", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "TopK", "k = 7 is outside [0, 6]");
    kr_free(&r);
}

static void test_unique_orders(void **state)
{
    (void)state;
    kr_result r;
    int16_t x[] = {3, 1, 3, 2, 1, 3};
    kr_attr unsorted[] = {{KR_INT, "sorted", .i = 0}, {0}};
    kr_input in[] = {IN("x", LD_DTYPE_INT16, 1, {6}, x)};
    kr_run(11, "Unique", unsorted, in, 1, "y,i,inv,c", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){3, 1, 2}, 3);
    expect_i64(r.t[1], (int64_t[]){0, 1, 3}, 3);
    expect_i64(r.t[2], (int64_t[]){0, 1, 0, 2, 1, 0}, 6);
    expect_i64(r.t[3], (int64_t[]){3, 2, 1}, 3);
    kr_free(&r);

    /* Rows (axis 0), sorted, with -0.0 == 0.0; only Y and counts requested. */
    float m[] = {1, 0, 0, 5, 1, -0.0f, -1, 9};
    kr_attr axis0[] = {{KR_INT, "axis", .i = 0}, {0}};
    kr_input in2[] = {IN("x", F32, 2, {4, 2}, m)};
    kr_run(11, "Unique", axis0, in2, 1, "y,,,c", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){3, 2});
    expect_values(r.t[0], (double[]){-1, 9, 0, 5, 1, 0}, 6);
    expect_i64(r.t[1], (int64_t[]){1, 1, 2}, 3);
    kr_free(&r);
}

static void test_argmax_cumsum(void **state)
{
    (void)state;
    kr_result r;
    int8_t x[] = {4, 9, 9, 1, 9, 0};
    kr_attr last[] = {{KR_INT, "axis", .i = 1}, {KR_INT, "keepdims", .i = 0},
                    {KR_INT, "select_last_index", .i = 1}, {0}};
    kr_input in[] = {IN("x", LD_DTYPE_INT8, 2, {2, 3}, x)};
    kr_run(13, "ArgMax", last, in, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 1, (int64_t[]){2});
    expect_i64(r.t[0], (int64_t[]){2, 1}, 2);
    kr_free(&r);

    kr_run(11, "ArgMin", last, in, 1, "y", 1, &r); /* opset 11 ignores select_last_index */
    kr_expect_ok(&r);
    expect_i64(r.t[0], (int64_t[]){0, 2}, 2);
    kr_free(&r);

    kr_input empty[] = {IN("x", LD_DTYPE_INT8, 2, {0, 3}, x)};
    kr_run(13, "ArgMax", NULL, empty, 1, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "ArgMax", "axis 0 is empty");
    kr_free(&r);

    /* int32 CumSum, reverse + exclusive along axis 1. */
    int32_t c[] = {1, 2, 3, 4, 5, 6};
    int32_t axis = 1;
    kr_attr rev[] = {{KR_INT, "reverse", .i = 1}, {KR_INT, "exclusive", .i = 1}, {0}};
    kr_input ci[] = {IN("x", LD_DTYPE_INT32, 2, {2, 3}, c), IN("a", LD_DTYPE_INT32, 0, {0}, &axis)};
    kr_run(14, "CumSum", rev, ci, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){5, 3, 0, 11, 6, 0}, 6);
    kr_free(&r);

    /* float16 sums in float32 and rounds once: 2048 + 1 + 1 = 2050. */
    ld_fp16 h[3] = {ld_fp32_to_fp16(2048), ld_fp32_to_fp16(1), ld_fp32_to_fp16(1)};
    int64_t a0 = 0;
    kr_input ch[] = {IN("x", LD_DTYPE_FLOAT16, 1, {3}, h), IN("a", I64, 1, {1}, &a0)};
    kr_run(14, "CumSum", NULL, ch, 2, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_FLOAT16);
    expect_values(r.t[0], (double[]){2048, 2048, 2050}, 3);
    kr_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_gather_indices_validated, ob_teardown),
        cmocka_unit_test_teardown(test_scatter_reductions_and_errors, ob_teardown),
        cmocka_unit_test_teardown(test_onehot_compress_nonzero, ob_teardown),
        cmocka_unit_test_teardown(test_topk_ties_nan_and_dtypes, ob_teardown),
        cmocka_unit_test_teardown(test_unique_orders, ob_teardown),
        cmocka_unit_test_teardown(test_argmax_cumsum, ob_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
