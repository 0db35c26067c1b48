/* Unit tests for the reduction, normalization, softmax and composite-math
 * kernels (backends/kernels/{reduce,normalization,softmax,math_misc}.c), for
 * what the ONNX node tests cover poorly: every reduction layout against a
 * naive double reference, thread-count determinism, integer dtypes,
 * compensated float64 sums, empty reductions, opset-dependent semantics
 * (axes attribute vs input, Softmax 2-D coercion before 13), Einsum
 * parsing and broadcasting, and the error paths (messages name the node).
 * Each test builds a one-node model in memory and runs it on the reference
 * backend. */
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

#include "layerdiff/backend.h"
#include "layerdiff/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

#define expect_shape kr_expect_shape

/* --- one-node models (tests/support/kernel_run.h) ------------------------------------- */

typedef kr_input tin;
typedef kr_attr tattr;
typedef kr_result run_out;
enum { A_END = KR_END, A_INT = KR_INT, A_FLOAT = KR_FLOAT, A_STRING = KR_STRING, A_INTS = KR_INTS };
#define MAX_OUT KR_MAX_OUT

static void run1(int opset, const char *op, const tattr *attrs, const tin *ins, int n_in,
                 const char *outs, run_out *r)
{
    kr_run(opset, op, attrs, ins, n_in, outs, 1, r);
}

#define run_free kr_free
#define expect_ok kr_expect_ok
#define expect_fail kr_expect_fail


/* |got - want| <= tol * max(1, |want|), NaN and infinities by identity. */
static void expect_values(const ld_tensor *t, const double *want, int64_t n, double tol)
{
    assert_non_null(t);
    assert_int_equal(t->count, n);
    for (int64_t i = 0; i < n; i++) {
        double got = ld_tensor_get_double(t, i), w = want[i];
        bool ok = isnan(w) ? isnan(got)
                  : isinf(w) ? got == w
                             : fabs(got - w) <= tol * (fabs(w) > 1 ? fabs(w) : 1);
        if (!ok)
            fail_msg("element %lld: got %.17g, expected %.17g", (long long)i, got, w);
    }
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static double rnd(void)
{
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* --- reductions --------------------------------------------------------------------------- */

static const char *const red_ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin",
                                      "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                                      "ReduceLogSumExp", "ReduceSumSquare"};

/* Naive double reference of a reduction of x (shape dims, rank 4) over mask. */
static void naive_reduce(const char *op, const float *x, const int64_t *dims,
                         const bool *mask, double *out, int64_t out_count)
{
    double *acc = calloc((size_t)out_count, sizeof *acc), *mx = calloc((size_t)out_count, 8);
    int64_t *cnt = calloc((size_t)out_count, sizeof *cnt);
    for (int64_t o = 0; o < out_count; o++) {
        acc[o] = strcmp(op, "ReduceProd") == 0 ? 1 : strcmp(op, "ReduceMax") == 0 ? -INFINITY
                 : strcmp(op, "ReduceMin") == 0 ? INFINITY : 0;
        mx[o] = -INFINITY;
    }
    for (int pass = 0; pass < 2; pass++) {
        int64_t idx[4];
        for (idx[0] = 0; idx[0] < dims[0]; idx[0]++)
        for (idx[1] = 0; idx[1] < dims[1]; idx[1]++)
        for (idx[2] = 0; idx[2] < dims[2]; idx[2]++)
        for (idx[3] = 0; idx[3] < dims[3]; idx[3]++) {
            int64_t in = ((idx[0] * dims[1] + idx[1]) * dims[2] + idx[2]) * dims[3] + idx[3];
            int64_t o = 0;
            for (int d = 0; d < 4; d++)
                if (!mask[d])
                    o = o * dims[d] + idx[d];
            double v = x[in];
            if (pass == 0) {
                mx[o] = v > mx[o] ? v : mx[o];
                continue;
            }
            cnt[o]++;
            if (!strcmp(op, "ReduceProd")) acc[o] *= v;
            else if (!strcmp(op, "ReduceMax")) acc[o] = v > acc[o] ? v : acc[o];
            else if (!strcmp(op, "ReduceMin")) acc[o] = v < acc[o] ? v : acc[o];
            else if (!strcmp(op, "ReduceL1")) acc[o] += fabs(v);
            else if (!strcmp(op, "ReduceL2") || !strcmp(op, "ReduceSumSquare")) acc[o] += v * v;
            else if (!strcmp(op, "ReduceLogSumExp")) acc[o] += exp(v - mx[o]);
            else acc[o] += v;
        }
    }
    for (int64_t o = 0; o < out_count; o++) {
        double v = acc[o];
        if (!strcmp(op, "ReduceMean")) v /= (double)cnt[o];
        else if (!strcmp(op, "ReduceL2")) v = sqrt(v);
        else if (!strcmp(op, "ReduceLogSum")) v = log(v);
        else if (!strcmp(op, "ReduceLogSumExp")) v = mx[o] + log(v);
        out[o] = v;
    }
    free(acc);
    free(mx);
    free(cnt);
}

/* Every layout (inner, middle, outer, general, all, none) of every reduction
 * matches the naive reference, with 1 and 2 threads giving identical bits. */
static void test_reduce_layouts_match_naive(void **state)
{
    (void)state;
    static const int64_t dims[4] = {3, 70, 5, 300};
    static const bool masks[][4] = {
        {false, false, false, true}, {false, true, false, false}, {true, false, false, false},
        {false, true, true, false},  {true, false, true, false},  {false, true, false, true},
        {true, true, true, true},    {false, false, true, false},
    };
    int64_t count = 3 * 70 * 5 * 300;
    float *x = malloc((size_t)count * sizeof *x);
    for (int64_t i = 0; i < count; i++)
        x[i] = (float)(rnd() * 2.0 + 0.0);
    for (size_t op = 0; op < sizeof red_ops / sizeof red_ops[0]; op++) {
        bool positive = !strcmp(red_ops[op], "ReduceLogSum") || !strcmp(red_ops[op], "ReduceProd");
        float *data = x;
        float *pos = NULL;
        if (positive) { /* keep logs defined and products finite */
            pos = malloc((size_t)count * sizeof *pos);
            for (int64_t i = 0; i < count; i++)
                pos[i] = !strcmp(red_ops[op], "ReduceProd") ? 1.0f + x[i] * 1e-3f
                                                            : fabsf(x[i]) + 0.1f;
            data = pos;
        }
        for (size_t m = 0; m < sizeof masks / sizeof masks[0]; m++) {
            tattr attrs[] = {{A_INTS, "axes", .n = 0}, {A_INT, "keepdims", .i = 0}, {A_END}};
            int64_t out_count = 1, out_dims[4];
            int out_rank = 0;
            for (int d = 0; d < 4; d++) {
                if (masks[m][d])
                    attrs[0].ints[attrs[0].n++] = d;
                else
                    out_count *= dims[d], out_dims[out_rank++] = dims[d];
            }
            tin in = {"x", LD_DTYPE_FLOAT32, 4, {3, 70, 5, 300}, data, false};
            run_out r1, r2;
            kr_run(11, red_ops[op], attrs, &in, 1, "y", 1, &r1);
            kr_run(11, red_ops[op], attrs, &in, 1, "y", 2, &r2);
            expect_ok(&r1);
            expect_ok(&r2);
            expect_shape(r1.t[0], out_rank, out_dims);
            double *want = malloc((size_t)out_count * sizeof *want);
            naive_reduce(red_ops[op], data, dims, masks[m], want, out_count);
            expect_values(r1.t[0], want, out_count, 2e-7);
            assert_memory_equal(r1.t[0]->data, r2.t[0]->data, r1.t[0]->nbytes);
            free(want);
            run_free(&r1);
            run_free(&r2);
        }
        free(pos);
    }
    free(x);
}

/* Axes: attribute before 13, input for ReduceSum 13+ and every reduction 18+,
 * noop_with_empty_axes, keepdims, negative axes. */
static void test_reduce_axes_by_opset(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t axes_last[1] = {-1}, none[1] = {0};
    tin ins[2] = {{"x", LD_DTYPE_FLOAT32, 2, {2, 3}, x, false},
                  {"axes", LD_DTYPE_INT64, 1, {1}, axes_last, true}};
    run_out r;
    /* opset 11: axes attribute; keepdims default 1 */
    tattr attr_axes[] = {{A_INTS, "axes", .n = 1, .ints = {0}}, {A_END}};
    run1(11, "ReduceSum", attr_axes, ins, 1, "y", &r);
    expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){1, 3});
    expect_values(r.t[0], (double[]){5, 7, 9}, 3, 0);
    run_free(&r);
    /* opset 13: axes input */
    run1(13, "ReduceSum", NULL, ins, 2, "y", &r);
    expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){2, 1});
    expect_values(r.t[0], (double[]){6, 15}, 2, 0);
    run_free(&r);
    /* opset 18: ReduceMean takes axes as an input too */
    run1(18, "ReduceMean", (tattr[]){{A_INT, "keepdims", .i = 0}, {A_END}}, ins, 2, "y", &r);
    expect_ok(&r);
    expect_shape(r.t[0], 1, (int64_t[]){2});
    expect_values(r.t[0], (double[]){2, 5}, 2, 0);
    run_free(&r);
    /* empty axes input: reduce everything, or nothing with noop_with_empty_axes */
    ins[1].rank = 1, ins[1].dims[0] = 0, ins[1].data = none;
    run1(13, "ReduceSum", NULL, ins, 2, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){21}, 1, 0);
    run_free(&r);
    run1(13, "ReduceSum", (tattr[]){{A_INT, "noop_with_empty_axes", .i = 1}, {A_END}}, ins, 2,
         "y", &r);
    expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){2, 3});
    expect_values(r.t[0], (double[]){1, 2, 3, 4, 5, 6}, 6, 0);
    run_free(&r);
    /* omitted axes input at 13: all axes */
    run1(13, "ReduceSum", (tattr[]){{A_INT, "keepdims", .i = 0}, {A_END}}, ins, 1, "y", &r);
    expect_ok(&r);
    expect_shape(r.t[0], 0, NULL);
    expect_values(r.t[0], (double[]){21}, 1, 0);
    run_free(&r);
}

static void test_reduce_errors(void **state)
{
    (void)state;
    float x[6] = {0};
    int32_t axes32[1] = {0};
    tin ins[2] = {{"x", LD_DTYPE_FLOAT32, 2, {2, 3}, x, false},
                  {"axes", LD_DTYPE_INT32, 1, {1}, axes32, true}};
    run_out r;
    run1(11, "ReduceMax", (tattr[]){{A_INTS, "axes", .n = 1, .ints = {2}}, {A_END}}, ins, 1,
         "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "axis 2 is out of range for rank 2");
    run1(11, "ReduceMax", (tattr[]){{A_INTS, "axes", .n = 2, .ints = {1, -1}}, {A_END}}, ins,
         1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "given twice");
    run1(13, "ReduceSum", NULL, ins, 2, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "1-D int64");
    int8_t b[6] = {0};
    tin i8 = {"x", LD_DTYPE_INT8, 2, {2, 3}, b, false};
    run1(13, "ReduceProd", NULL, &i8, 1, "y", &r);
    expect_fail(&r, LD_ERR_UNSUPPORTED, "dtype int8 is not supported");
}

/* Integer reductions: wrapping sums, truncated means, int8 Max, saturating
 * identities of empty Max/Min, integer LogSumExp via double. */
static void test_reduce_integers(void **state)
{
    (void)state;
    run_out r;
    int32_t big[3] = {INT32_MAX, 1, 5};
    tin in = {"x", LD_DTYPE_INT32, 1, {3}, big, false};
    run1(13, "ReduceSum", NULL, &in, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(((int32_t *)r.t[0]->data)[0], INT32_MIN + 5); /* wraps like int32 */
    run_free(&r);
    int32_t m[4] = {-7, 2, 0, 0};
    in.dims[0] = 4, in.data = m;
    run1(13, "ReduceMean", NULL, &in, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(((int32_t *)r.t[0]->data)[0], -1); /* -5 / 4 truncated */
    run_free(&r);
    run1(13, "ReduceL2", NULL, &in, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(((int32_t *)r.t[0]->data)[0], 7); /* sqrt(53) */
    run_free(&r);
    run1(13, "ReduceLogSumExp", NULL, &in, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(((int32_t *)r.t[0]->data)[0], 2); /* log(e^-7 + e^2 + 2) = 2.24 */
    run_free(&r);
    int8_t s8[4] = {-100, 120, 3, -128};
    tin i8 = {"x", LD_DTYPE_INT8, 1, {4}, s8, false};
    run1(13, "ReduceMax", NULL, &i8, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(((int8_t *)r.t[0]->data)[0], 120);
    run_free(&r);
    uint64_t u[2] = {UINT64_MAX, 3};
    tin u64 = {"x", LD_DTYPE_UINT64, 1, {2}, u, false};
    run1(13, "ReduceMin", NULL, &u64, 1, "y", &r);
    expect_ok(&r);
    assert_true(((uint64_t *)r.t[0]->data)[0] == 3);
    run_free(&r);
    run1(13, "ReduceMax", NULL, &u64, 1, "y", &r);
    expect_ok(&r);
    assert_true(((uint64_t *)r.t[0]->data)[0] == UINT64_MAX);
    run_free(&r);
    /* empty: Max gives the type minimum, Min the maximum */
    tin empty = {"x", LD_DTYPE_INT32, 2, {2, 0}, m, false};
    tattr last[] = {{A_INTS, "axes", .n = 1, .ints = {1}}, {A_END}};
    run1(11, "ReduceMax", last, &empty, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(((int32_t *)r.t[0]->data)[1], INT32_MIN);
    run_free(&r);
    run1(11, "ReduceMin", last, &empty, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(((int32_t *)r.t[0]->data)[0], INT32_MAX);
    run_free(&r);
}

/* Empty float reductions give the identities; float64 sums are compensated;
 * LogSumExp does not overflow; float16 inputs are widened and rounded back. */
static void test_reduce_float_numerics(void **state)
{
    (void)state;
    run_out r;
    float none[1] = {0};
    tin empty = {"x", LD_DTYPE_FLOAT32, 2, {2, 0}, none, false};
    tattr last[] = {{A_INTS, "axes", .n = 1, .ints = {1}}, {A_END}};
    static const struct { const char *op; double want; } id[] = {
        {"ReduceSum", 0}, {"ReduceProd", 1}, {"ReduceMax", -INFINITY}, {"ReduceMin", INFINITY},
        {"ReduceMean", NAN}, {"ReduceLogSum", -INFINITY}, {"ReduceLogSumExp", -INFINITY},
        {"ReduceL2", 0},
    };
    for (size_t k = 0; k < sizeof id / sizeof id[0]; k++) {
        run1(11, id[k].op, last, &empty, 1, "y", &r);
        expect_ok(&r);
        expect_values(r.t[0], (double[]){id[k].want, id[k].want}, 2, 0);
        run_free(&r);
    }
    double d[5] = {1.0, 1e100, 1.0, -1e100, 1.0};
    tin f64 = {"x", LD_DTYPE_FLOAT64, 1, {5}, d, false};
    run1(13, "ReduceSum", NULL, &f64, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){3.0}, 1, 0); /* naive double summation gives 1 */
    run_free(&r);
    float big[3] = {1000.0f, 1000.0f, -INFINITY};
    tin lse = {"x", LD_DTYPE_FLOAT32, 1, {3}, big, false};
    run1(13, "ReduceLogSumExp", NULL, &lse, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){1000.0 + log(2.0)}, 1, 1e-7);
    run_free(&r);
    /* float32 sums accumulate in double: 1 + 2^-24 * 2^20 is exact */
    int64_t n = (1 << 20) + 1;
    float *small = malloc((size_t)n * sizeof *small);
    small[0] = 1.0f;
    for (int64_t i = 1; i < n; i++)
        small[i] = 0x1p-24f;
    tin acc = {"x", LD_DTYPE_FLOAT32, 1, {n}, small, false};
    run1(13, "ReduceSum", NULL, &acc, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){1.0625}, 1, 0); /* float accumulation stays at 1 */
    run_free(&r);
    free(small);
    uint16_t h[2] = {0x3c00, 0x4000}; /* 1.0, 2.0 */
    tin f16 = {"x", LD_DTYPE_FLOAT16, 1, {2}, h, false};
    run1(13, "ReduceMean", NULL, &f16, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_FLOAT16);
    assert_int_equal(((uint16_t *)r.t[0]->data)[0], 0x3e00); /* 1.5 */
    run_free(&r);
}

/* --- softmax family ------------------------------------------------------------------------- */

/* Before 13 Softmax flattens to 2-D at axis; from 13 it runs along the one
 * axis. The same (2, 2, 2) input and axis = 1 gives different results. */
static void test_softmax_axis_semantics_by_opset(void **state)
{
    (void)state;
    float x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    tin in = {"x", LD_DTYPE_FLOAT32, 3, {2, 2, 2}, x, false};
    tattr axis1[] = {{A_INT, "axis", .i = 1}, {A_END}};
    run_out r;
    double want11[8], want13[8];
    for (int n = 0; n < 2; n++) {
        double s = 0;
        for (int k = 0; k < 4; k++)
            s += exp(x[n * 4 + k]);
        for (int k = 0; k < 4; k++)
            want11[n * 4 + k] = exp(x[n * 4 + k]) / s;
        for (int j = 0; j < 2; j++) {
            double a = exp(x[n * 4 + j]), b = exp(x[n * 4 + 2 + j]);
            want13[n * 4 + j] = a / (a + b);
            want13[n * 4 + 2 + j] = b / (a + b);
        }
    }
    run1(11, "Softmax", axis1, &in, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], want11, 8, 1e-6);
    run_free(&r);
    run1(13, "Softmax", axis1, &in, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], want13, 8, 1e-6);
    run_free(&r);
    /* Hardmax 11, default axis 1: one 1 per flattened row of 4 */
    run1(11, "Hardmax", NULL, &in, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){0, 0, 0, 1, 0, 0, 0, 1}, 8, 0);
    run_free(&r);
    /* Hardmax 13, axis 1 */
    run1(13, "Hardmax", axis1, &in, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){0, 0, 1, 1, 0, 0, 1, 1}, 8, 0);
    run_free(&r);
    /* LogSoftmax 13 along axis 0 of large values does not overflow */
    float big[4] = {1000, 2000, 1000, -INFINITY};
    tin b = {"x", LD_DTYPE_FLOAT32, 2, {2, 2}, big, false};
    run1(13, "LogSoftmax", (tattr[]){{A_INT, "axis", .i = 0}, {A_END}}, &b, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){-log(2.0), 0, -log(2.0), -INFINITY}, 4, 1e-6);
    run_free(&r);
    run1(13, "Softmax", (tattr[]){{A_INT, "axis", .i = -4}, {A_END}}, &in, 1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "axis -4 is out of range for rank 3");
}

/* Softmax over a strided axis with more columns than a tile, threads 1 and 2. */
static void test_softmax_strided_tiles(void **state)
{
    (void)state;
    int64_t N = 2, C = 3, S = 1500;
    float *x = malloc((size_t)(N * C * S) * sizeof *x);
    for (int64_t i = 0; i < N * C * S; i++)
        x[i] = (float)(rnd() * 10);
    tin in = {"x", LD_DTYPE_FLOAT32, 3, {N, C, S}, x, false};
    tattr axis1[] = {{A_INT, "axis", .i = 1}, {A_END}};
    double *want = malloc((size_t)(N * C * S) * sizeof *want);
    for (int64_t n = 0; n < N; n++)
        for (int64_t s = 0; s < S; s++) {
            double m = -INFINITY, sum = 0;
            for (int64_t c = 0; c < C; c++)
                m = fmax(m, x[(n * C + c) * S + s]);
            for (int64_t c = 0; c < C; c++)
                sum += exp(x[(n * C + c) * S + s] - m);
            for (int64_t c = 0; c < C; c++)
                want[(n * C + c) * S + s] = x[(n * C + c) * S + s] - m - log(sum);
        }
    run_out r1, r2;
    kr_run(13, "LogSoftmax", axis1, &in, 1, "y", 1, &r1);
    kr_run(13, "LogSoftmax", axis1, &in, 1, "y", 2, &r2);
    expect_ok(&r1);
    expect_ok(&r2);
    expect_values(r1.t[0], want, N * C * S, 1e-6);
    assert_memory_equal(r1.t[0]->data, r2.t[0]->data, r1.t[0]->nbytes);
    run_free(&r1);
    run_free(&r2);
    free(x);
    free(want);
}

static void test_losses(void **state)
{
    (void)state;
    float x[6] = {-1, -2, -3, -4, -5, -6}; /* (N=2, C=3) log-probabilities */
    int64_t t[2] = {2, 0}, bad[2] = {3, 0};
    float w[3] = {0.5f, 1, 2};
    tin ins[3] = {{"x", LD_DTYPE_FLOAT32, 2, {2, 3}, x, false},
                  {"t", LD_DTYPE_INT64, 1, {2}, t, false},
                  {"w", LD_DTYPE_FLOAT32, 1, {3}, w, false}};
    run_out r;
    run1(13, "NegativeLogLikelihoodLoss", NULL, ins, 3, "loss", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){(3 * 2 + 4 * 0.5) / 2.5}, 1, 1e-7);
    run_free(&r);
    /* every target ignored: mean over no weight is 0/0 */
    run1(13, "NegativeLogLikelihoodLoss",
         (tattr[]){{A_INT, "ignore_index", .i = 0}, {A_END}}, ins, 2, "loss", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){3.0}, 1, 1e-7); /* only sample 0 counts */
    run_free(&r);
    ins[1].data = bad;
    run1(13, "NegativeLogLikelihoodLoss", NULL, ins, 2, "loss", &r);
    expect_fail(&r, LD_ERR_INPUT, "target value 3 at element 0 is outside [0, 3)");
    run1(13, "NegativeLogLikelihoodLoss",
         (tattr[]){{A_STRING, "reduction", .s = "avg"}, {A_END}}, ins, 2, "loss", &r);
    expect_fail(&r, LD_ERR_INPUT, "reduction 'avg'");
    ins[1].data = t;
    ins[1].dims[0] = 3;
    run1(13, "SoftmaxCrossEntropyLoss", NULL, ins, 2, "loss", &r);
    expect_fail(&r, LD_ERR_INPUT, "do not match");
    ins[1].dims[0] = 2;
    /* SCE with log_prob output and sum reduction */
    run1(13, "SoftmaxCrossEntropyLoss", (tattr[]){{A_STRING, "reduction", .s = "none"}, {A_END}},
         ins, 2, "loss,log_prob", &r);
    expect_ok(&r);
    double lse0 = log(exp(-1.0) + exp(-2.0) + exp(-3.0)), lse1 = log(exp(-4.0) + exp(-5.0) +
                                                                     exp(-6.0));
    expect_values(r.t[0], (double[]){-(-3 - lse0), -(-4 - lse1)}, 2, 1e-6);
    expect_values(r.t[1], (double[]){-1 - lse0, -2 - lse0, -3 - lse0, -4 - lse1, -5 - lse1,
                                     -6 - lse1}, 6, 1e-6);
    run_free(&r);
}

/* --- normalizations ------------------------------------------------------------------------- */

static void test_layer_norm_outputs_and_broadcast(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 4, 6, 8};
    float scale[1] = {2}, bias[3] = {0, 1, 2};
    tin ins[3] = {{"x", LD_DTYPE_FLOAT32, 2, {2, 3}, x, false},
                  {"s", LD_DTYPE_FLOAT32, 1, {1}, scale, true},
                  {"b", LD_DTYPE_FLOAT32, 1, {3}, bias, true}};
    run_out r;
    run1(17, "LayerNormalization", (tattr[]){{A_FLOAT, "epsilon", .f = 0}, {A_END}}, ins, 3,
         "y,mean,inv", &r);
    expect_ok(&r);
    double inv0 = 1 / sqrt(2.0 / 3), inv1 = 1 / sqrt(8.0 / 3);
    expect_values(r.t[0], (double[]){-2 * inv0, 1, 2 + 2 * inv0, -4 * inv1, 1, 2 + 4 * inv1},
                  6, 1e-6);
    expect_shape(r.t[1], 2, (int64_t[]){2, 1});
    assert_int_equal(r.t[1]->dtype, LD_DTYPE_FLOAT32);
    expect_values(r.t[1], (double[]){2, 6}, 2, 1e-7);
    expect_values(r.t[2], (double[]){inv0, inv1}, 2, 1e-6);
    run_free(&r);
    ins[2].dims[0] = 2;
    run1(17, "LayerNormalization", NULL, ins, 3, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "B of shape 2 does not broadcast to the normalized shape 3");
}

static void test_batch_norm_modes(void **state)
{
    (void)state;
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}; /* (N=2, C=2, S=2) */
    float one[2] = {1, 1}, zero[2] = {0, 0}, mean[2] = {1, 2}, var[2] = {4, 4};
    tin ins[5] = {{"x", LD_DTYPE_FLOAT32, 3, {2, 2, 2}, x, false},
                  {"s", LD_DTYPE_FLOAT32, 1, {2}, one, true},
                  {"b", LD_DTYPE_FLOAT32, 1, {2}, zero, true},
                  {"m", LD_DTYPE_FLOAT32, 1, {2}, mean, true},
                  {"v", LD_DTYPE_FLOAT32, 1, {2}, var, true}};
    tattr eps0[] = {{A_FLOAT, "epsilon", .f = 0}, {A_END}};
    run_out r;
    run1(15, "BatchNormalization", eps0, ins, 5, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){0, 0.5, 0.5, 1, 2, 2.5, 2.5, 3}, 8, 1e-7);
    run_free(&r);
    /* opset 7 with training outputs: not supported */
    run1(7, "BatchNormalization", eps0, ins, 5, "y,rm,rv,sm,sv", &r);
    expect_fail(&r, LD_ERR_UNSUPPORTED, "training mode");
    /* opset 7 spatial = 0: per-activation parameters of shape (C, S) */
    float m4[4] = {1, 2, 3, 4}, v4[4] = {1, 1, 1, 1}, s4[4] = {1, 1, 1, 1}, b4[4] = {0, 0, 0, 0};
    tin act[5] = {ins[0], {"s", LD_DTYPE_FLOAT32, 2, {2, 2}, s4, true},
                  {"b", LD_DTYPE_FLOAT32, 2, {2, 2}, b4, true},
                  {"m", LD_DTYPE_FLOAT32, 2, {2, 2}, m4, true},
                  {"v", LD_DTYPE_FLOAT32, 2, {2, 2}, v4, true}};
    run1(7, "BatchNormalization",
         (tattr[]){{A_FLOAT, "epsilon", .f = 0}, {A_INT, "spatial", .i = 0}, {A_END}}, act, 5,
         "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){0, 0, 0, 0, 4, 4, 4, 4}, 8, 1e-7);
    run_free(&r);
    /* wrong parameter size */
    ins[3].dims[0] = 1;
    run1(15, "BatchNormalization", NULL, ins, 5, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "mean has shape 1; expected 2 elements");
}

static void test_lp_mvn_lrn(void **state)
{
    (void)state;
    float x[6] = {3, 4, 0, 0, 0, 0};
    tin in = {"x", LD_DTYPE_FLOAT32, 2, {2, 3}, x, false};
    run_out r;
    run1(1, "LpNormalization", NULL, &in, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){0.6, 0.8, 0, 0, 0, 0}, 6, 1e-7);
    run_free(&r);
    run1(1, "LpNormalization", (tattr[]){{A_INT, "p", .i = 1}, {A_INT, "axis", .i = 0}, {A_END}},
         &in, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){1, 1, 0, 0, 0, 0}, 6, 1e-7);
    run_free(&r);
    run1(1, "LpNormalization", (tattr[]){{A_INT, "p", .i = 3}, {A_END}}, &in, 1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "p must be 1 or 2");
    /* MVN over axis 1 only */
    float m[6] = {1, 2, 3, 10, 10, 10};
    tin mi = {"x", LD_DTYPE_FLOAT32, 2, {2, 3}, m, false};
    run1(13, "MeanVarianceNormalization", (tattr[]){{A_INTS, "axes", .n = 1, .ints = {1}},
                                                    {A_END}}, &mi, 1, "y", &r);
    expect_ok(&r);
    double sd = sqrt(2.0 / 3);
    expect_values(r.t[0], (double[]){-1 / sd, 0, 1 / sd, 0, 0, 0}, 6, 1e-6);
    run_free(&r);
    /* LRN with an even size: window [c - 0, c + 1] for size 2 */
    float l[3] = {1, 2, 3};
    tin li = {"x", LD_DTYPE_FLOAT32, 3, {1, 3, 1}, l, false};
    run1(13, "LRN", (tattr[]){{A_INT, "size", .i = 2}, {A_FLOAT, "alpha", .f = 1},
                              {A_FLOAT, "beta", .f = 1}, {A_FLOAT, "bias", .f = 1}, {A_END}},
         &li, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){1 / (1 + 5.0 / 2), 2 / (1 + 13.0 / 2), 3 / (1 + 9.0 / 2)},
                  3, 1e-6);
    run_free(&r);
    run1(13, "LRN", NULL, &li, 1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "'size'");
}

/* --- Einsum, Det ------------------------------------------------------------------------------ */

static void test_einsum_forms(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}; /* (2, 3) */
    float b[6] = {1, 0, 0, 1, 1, 1}; /* (3, 2) */
    tin ins[2] = {{"a", LD_DTYPE_FLOAT32, 2, {2, 3}, a, false},
                  {"b", LD_DTYPE_FLOAT32, 2, {3, 2}, b, false}};
    run_out r;
#define EQ(e) ((tattr[]){{A_STRING, "equation", .s = (e)}, {A_END}})
    run1(12, "Einsum", EQ("ij, jk"), ins, 2, "y", &r); /* implicit: ik */
    expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){2, 2});
    expect_values(r.t[0], (double[]){4, 5, 10, 11}, 4, 0);
    run_free(&r);
    run1(12, "Einsum", EQ("ba"), ins, 1, "y", &r); /* implicit output "ab": a transpose */
    expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){3, 2});
    expect_values(r.t[0], (double[]){1, 4, 2, 5, 3, 6}, 6, 0);
    run_free(&r);
    run1(12, "Einsum", EQ("ij->"), ins, 1, "y", &r);
    expect_ok(&r);
    expect_shape(r.t[0], 0, NULL);
    expect_values(r.t[0], (double[]){21}, 1, 0);
    run_free(&r);
    /* ellipsis broadcasting: (2, 1, 2, 2) x (3, 2, 2) -> (2, 3, 2, 2) batched matmul */
    float e1[8] = {1, 2, 3, 4, 5, 6, 7, 8}, e2[12] = {1, 0, 0, 1, 2, 0, 0, 2, 0, 1, 1, 0};
    tin ell[2] = {{"a", LD_DTYPE_FLOAT32, 4, {2, 1, 2, 2}, e1, false},
                  {"b", LD_DTYPE_FLOAT32, 3, {3, 2, 2}, e2, false}};
    run1(12, "Einsum", EQ("...ij,...jk->...ik"), ell, 2, "y", &r);
    expect_ok(&r);
    expect_shape(r.t[0], 4, (int64_t[]){2, 3, 2, 2});
    expect_values(r.t[0], (double[]){1, 2, 3, 4, 2, 4, 6, 8, 2, 1, 4, 3,
                                     5, 6, 7, 8, 10, 12, 14, 16, 6, 5, 8, 7}, 24, 0);
    run_free(&r);
    /* trace and diagonal on int32 */
    int32_t sq[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    tin si = {"a", LD_DTYPE_INT32, 2, {3, 3}, sq, false};
    run1(12, "Einsum", EQ("ii"), &si, 1, "y", &r);
    expect_ok(&r);
    assert_int_equal(((int32_t *)r.t[0]->data)[0], 15);
    run_free(&r);
    run1(12, "Einsum", EQ("ii->i"), &si, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){1, 5, 9}, 3, 0);
    run_free(&r);
    /* errors */
    run1(12, "Einsum", EQ("ij,jk->ik"), ins, 1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "has 2 operands but the node has 1 inputs");
    run1(12, "Einsum", EQ("i$"), ins, 1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "invalid character '$'");
    tin outer[2] = {ins[0], ins[0]};
    outer[1].name = "c";
    run1(12, "Einsum", EQ("ij,kl->ik"), outer, 2, "y", &r); /* j and l summed separately */
    expect_ok(&r);
    expect_values(r.t[0], (double[]){6 * 6, 6 * 15, 15 * 6, 15 * 15}, 4, 0);
    run_free(&r);
    run1(12, "Einsum", EQ("ij,ij->i"), ins, 2, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "do not match");
    run1(12, "Einsum", EQ("...j->j"), ell, 1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "no '...'");
    run1(12, "Einsum", EQ("ij->iz"), ins, 1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "not in any input");
#undef EQ
}

static void test_det(void **state)
{
    (void)state;
    double m[18] = {2, 0, 0, 0, 3, 0, 0, 0, 4, /* 24 */
                    1, 2, 3, 2, 4, 6, 0, 1, 1}; /* singular: 0 */
    tin in = {"x", LD_DTYPE_FLOAT64, 3, {2, 3, 3}, m, false};
    run_out r;
    run1(11, "Det", NULL, &in, 1, "y", &r);
    expect_ok(&r);
    expect_shape(r.t[0], 1, (int64_t[]){2});
    expect_values(r.t[0], (double[]){24, 0}, 2, 1e-12);
    run_free(&r);
    float p[4] = {0, 1, 1, 0}; /* needs a pivot: det -1 */
    tin pi = {"x", LD_DTYPE_FLOAT32, 2, {2, 2}, p, false};
    run1(11, "Det", NULL, &pi, 1, "y", &r);
    expect_ok(&r);
    expect_values(r.t[0], (double[]){-1}, 1, 0);
    run_free(&r);
    in.dims[2] = 2;
    in.dims[1] = 3, in.dims[0] = 1;
    run1(11, "Det", NULL, &in, 1, "y", &r);
    expect_fail(&r, LD_ERR_INPUT, "not a (batch of) square matrices");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_reduce_layouts_match_naive, ob_teardown),
        cmocka_unit_test_teardown(test_reduce_axes_by_opset, ob_teardown),
        cmocka_unit_test_teardown(test_reduce_errors, ob_teardown),
        cmocka_unit_test_teardown(test_reduce_integers, ob_teardown),
        cmocka_unit_test_teardown(test_reduce_float_numerics, ob_teardown),
        cmocka_unit_test_teardown(test_softmax_axis_semantics_by_opset, ob_teardown),
        cmocka_unit_test_teardown(test_softmax_strided_tiles, ob_teardown),
        cmocka_unit_test_teardown(test_losses, ob_teardown),
        cmocka_unit_test_teardown(test_layer_norm_outputs_and_broadcast, ob_teardown),
        cmocka_unit_test_teardown(test_batch_norm_modes, ob_teardown),
        cmocka_unit_test_teardown(test_lp_mvn_lrn, ob_teardown),
        cmocka_unit_test_teardown(test_einsum_forms, ob_teardown),
        cmocka_unit_test_teardown(test_det, ob_teardown),
    };
    return cmocka_run_group_tests_name("kernels_reduce", tests, NULL, NULL);
}
