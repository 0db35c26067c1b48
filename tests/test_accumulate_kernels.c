/* layerdiff tests — the kernels of reduced-precision layers that accumulate,
 * run through the executor with chosen numerics.
 *
 * - Reductions, softmax, normalizations and CumSum of fp16 layers, with fp32
 *   accumulation and with accumulate-half, on 1 and 2 threads, equal scalar
 *   emulations of the documented formulas and order (docs/numerics.md,
 *   "Accumulation") bit for bit, partial-overflow counts included; fp32
 *   numerics give the reference's results.
 * - AveragePool, LpPool, GlobalAveragePool and GlobalLpPool likewise (the
 *   window's terms in increasing input position).
 * - Conv (im2col and depthwise) and MatMul nodes take the accumulate-half
 *   GEMM, in the documented order.
 * Exact steps: tests/support/exact_emulation.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/exec.h"
#include "layerdiff/round.h"
#include "tests/support/exact_emulation.h"
#include "tests/support/onnx_builder.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

/* --- one-node graphs through the executor with chosen numerics --------------------------- */

typedef struct node_spec {
    const char *op;
    int opset;
    int n_in;
    const char *names[5];
    int rank[5];
    int64_t dims[5][6];
    const float *data[5];
    /* attributes */
    const char *int_name[3];
    int64_t int_value[3];
    const char *ints_name;
    int n_ints;
    int64_t ints[6];
    const char *ints2_name; /* a second ints attribute (pads) */
    int n_ints2;
    int64_t ints2[6];
    const char *float_name;
    float float_value;
} node_spec;

typedef struct run_result {
    ld_tensor *y;
    ld_layer_counters counters;
} run_result;

static ld_status numerics_hook(void *user, const ld_node *node, ld_layer_numerics *out,
                               ld_error *err)
{
    (void)node, (void)err;
    *out = *(const ld_layer_numerics *)user;
    return LD_OK;
}

static ld_status keep_output(void *user, const ld_tensor_event *ev, ld_error *err)
{
    run_result *r = user;
    if (!ev->node || ev->output_index != 0 || r->y)
        return LD_OK;
    r->counters = ev->counters;
    return ld_tensor_clone(&r->y, ev->tensor, NULL, err);
}

static ld_graph *spec_graph(const node_spec *s)
{
    Onnx__ModelProto *m = ob_model();
    m->opset_import[0]->version = s->opset;
    char list[128] = "";
    for (int i = 0; i < s->n_in; i++) {
        strcat(list, i ? "," : "");
        strcat(list, s->names[i]);
        ob_input(m->graph, s->names[i], FLOAT, s->rank[i], s->dims[i]);
    }
    Onnx__NodeProto *node = ob_node(m->graph, s->op, "n", list, "y");
    for (int i = 0; i < 3 && s->int_name[i]; i++) {
        Onnx__AttributeProto *a =
            ob_attr(node, s->int_name[i], ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
        a->has_i = 1, a->i = s->int_value[i];
    }
    if (s->ints_name) {
        Onnx__AttributeProto *a =
            ob_attr(node, s->ints_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
        a->ints = ob_mem(sizeof s->ints);
        memcpy(a->ints, s->ints, sizeof s->ints);
        a->n_ints = (size_t)s->n_ints;
    }
    if (s->ints2_name) {
        Onnx__AttributeProto *a =
            ob_attr(node, s->ints2_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
        a->ints = ob_mem(sizeof s->ints2);
        memcpy(a->ints, s->ints2, sizeof s->ints2);
        a->n_ints = (size_t)s->n_ints2;
    }
    if (s->float_name) {
        Onnx__AttributeProto *a =
            ob_attr(node, s->float_name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
        a->has_f = 1, a->f = s->float_value;
    }
    ob_output(m->graph, "y", FLOAT);
    return ob_load_ok(m);
}

/* Runs the node with numerics (NULL: no hooks, the reference) on `threads`. */
static run_result run_spec(const node_spec *s, const ld_layer_numerics *num, int threads)
{
    ld_graph *g = spec_graph(s);
    ld_exec_hooks hooks = {.user = (void *)num, .layer_numerics = numerics_hook};
    ld_exec_config cfg = {.threads = threads, .hooks = num ? &hooks : NULL};
    ld_exec *e = NULL;
    ld_error err;
    if (ld_exec_create(&e, g, &cfg, &err) != LD_OK)
        fail_msg("%s", err.message);
    ld_tensor *in[5] = {NULL};
    for (int i = 0; i < s->n_in; i++) {
        ld_shape shape = {.rank = s->rank[i]};
        memcpy(shape.dims, s->dims[i], sizeof s->dims[i]);
        assert_int_equal(ld_tensor_wrap(&in[i], s->names[i], LD_DTYPE_FLOAT32, &shape,
                                        (void *)s->data[i], &err), LD_OK);
    }
    run_result r = {0};
    if (ld_exec_run(e, (const ld_tensor *const *)in, keep_output, &r, &err) != LD_OK)
        fail_msg("%s", err.message);
    for (int i = 0; i < s->n_in; i++)
        ld_tensor_destroy(in[i]);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
    assert_non_null(r.y);
    return r;
}

static const ld_layer_numerics fp16_fp32acc = {.precision = LD_PRECISION_FP16};
static const ld_layer_numerics fp16_half = {.precision = LD_PRECISION_FP16,
                                            .accumulate_half = true};

/* Runs the node reduced (both modes, 1 and 2 threads) and compares with
 * want(half); the reference run must equal the run without numerics. */
static void check_spec(const node_spec *s, void (*want)(const node_spec *s, bool half, float *out,
                                                        int64_t *overflows))
{
    run_result ref = run_spec(s, NULL, 1), ref32 = run_spec(s, &(ld_layer_numerics){0}, 1);
    expect_same(ref32.y->data, ref.y->data, ref.y->count, "reference numerics");
    for (int half = 0; half < 2; half++) {
        float *expected = malloc((size_t)ref.y->count * sizeof *expected);
        assert_non_null(expected);
        int64_t overflows = 0;
        want(s, half, expected, &overflows);
        for (int threads = 1; threads <= 2; threads++) {
            run_result r = run_spec(s, half ? &fp16_half : &fp16_fp32acc, threads);
            char what[96];
            snprintf(what, sizeof what, "%s %s, %d thread(s)", s->op,
                     half ? "accumulate-half" : "fp32 accumulation", threads);
            assert_int_equal(r.y->count, ref.y->count);
            expect_same(r.y->data, expected, r.y->count, what);
            if (r.counters.partial_overflows != overflows)
                fail_msg("%s: %lld partial overflows, expected %lld", what,
                         (long long)r.counters.partial_overflows, (long long)overflows);
            ld_tensor_destroy(r.y);
        }
        free(expected);
    }
    ld_tensor_destroy(ref.y);
    ld_tensor_destroy(ref32.y);
}

/* The emulations' arithmetic: fp32, or exact-then-rounded in fp16. */
static emul em16 = {LD_PRECISION_FP16, false, 0};

static float e_add(bool half, float acc, float t)
{
    return half ? emul_step(&em16, acc, t, 0, false) : acc + t;
}

static float e_fma(bool half, float acc, float x, float y)
{
    return half ? emul_step(&em16, acc, x, y, true) : acc + x * y;
}

static float e_val(bool half, float v) /* the value as the layer holds it */
{
    return half ? ld_round_to_precision(v, LD_PRECISION_FP16, NULL) : v;
}

/* --- reductions ----------------------------------------------------------------------------- */

static int64_t spec_count(const node_spec *s, int i)
{
    int64_t n = 1;
    for (int d = 0; d < s->rank[i]; d++)
        n *= s->dims[i][d];
    return n;
}

/* Output index of input element e when the axes in `reduced` are reduced. */
static int64_t reduce_out_index(const node_spec *s, const bool *reduced, int64_t e)
{
    int64_t out = 0, stride = 1;
    for (int d = s->rank[0] - 1; d >= 0; d--) {
        int64_t idx = e % s->dims[0][d];
        e /= s->dims[0][d];
        if (!reduced[d]) {
            out += idx * stride;
            stride *= s->dims[0][d];
        }
    }
    return out;
}

static void want_reduce(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    bool reduced[6] = {false};
    for (int d = 0; d < s->rank[0]; d++)
        reduced[d] = s->n_ints == 0; /* no axes: all */
    for (int i = 0; i < s->n_ints; i++)
        reduced[s->ints[i]] = true;
    int64_t n = spec_count(s, 0), groups = 1;
    for (int d = 0; d < s->rank[0]; d++)
        groups *= reduced[d] ? 1 : s->dims[0][d];
    const float *x = s->data[0];
    float acc[256], mx[256];
    assert_true(groups <= 256);
    for (int64_t o = 0; o < groups; o++) {
        acc[o] = 0.0f;
        mx[o] = -INFINITY;
    }
    bool lse = strcmp(s->op, "ReduceLogSumExp") == 0;
    for (int64_t e = 0; lse && e < n; e++) {
        int64_t o = reduce_out_index(s, reduced, e);
        mx[o] = x[e] > mx[o] ? x[e] : mx[o];
    }
    em16.overflows = 0;
    for (int64_t e = 0; e < n; e++) { /* increasing input position */
        int64_t o = reduce_out_index(s, reduced, e);
        float v = x[e];
        if (strcmp(s->op, "ReduceSumSquare") == 0 || strcmp(s->op, "ReduceL2") == 0)
            acc[o] = e_fma(half, acc[o], v, v);
        else if (strcmp(s->op, "ReduceL1") == 0)
            acc[o] = e_add(half, acc[o], fabsf(v));
        else if (lse)
            acc[o] = e_add(half, acc[o], e_val(half, expf(e_val(half, v - mx[o]))));
        else
            acc[o] = e_add(half, acc[o], v);
    }
    for (int64_t o = 0; o < groups; o++) {
        float v = acc[o];
        if (strcmp(s->op, "ReduceMean") == 0)
            v = v / (float)(n / groups);
        else if (strcmp(s->op, "ReduceL2") == 0)
            v = sqrtf(v);
        else if (lse)
            v = mx[o] + logf(v);
        out[o] = v;
    }
    *overflows = half ? em16.overflows : 0;
}

static void test_reductions(void **state)
{
    (void)state;
    static const char *const ops[] = {"ReduceSum", "ReduceMean", "ReduceSumSquare",
                                      "ReduceL1", "ReduceL2", "ReduceLogSumExp"};
    static const int64_t axes_sets[][4] = {{1, 2}, {1, 0}, {1, 1}, {2, 0, 2}, {3, 0, 1, 2}};
    static float x[4 * 6 * 9];
    /* wide enough that fp32 sums are inexact (fp32 and double accumulation differ) */
    fill(x, 4 * 6 * 9, LD_PRECISION_FP16, -12, 6);
    for (size_t op = 0; op < sizeof ops / sizeof ops[0]; op++)
        for (size_t a = 0; a < sizeof axes_sets / sizeof axes_sets[0]; a++) {
            node_spec s = {.op = ops[op], .opset = 13, .n_in = 1, .names = {"x"}, .rank = {3},
                           .dims = {{4, 6, 9}}, .data = {x}, .int_name = {"keepdims"},
                           .int_value = {0}, .ints_name = "axes",
                           .n_ints = (int)axes_sets[a][0]};
            memcpy(s.ints, &axes_sets[a][1], sizeof(int64_t) * (size_t)s.n_ints);
            if (strcmp(ops[op], "ReduceSum") == 0) { /* axes is an input from 13 */
                s.opset = 11;
            }
            check_spec(&s, want_reduce);
        }
}

/* Reductions over the last axis: reduce.c sums 8 contiguous rows at once
 * (fp32 accumulation) and the rest one by one; 5 * 7 rows is 4 groups and a
 * remainder, 2 * 128 rows of 130 enough work for 2 threads. */
static void test_reduce_row_groups(void **state)
{
    (void)state;
    static const char *const ops[] = {"ReduceSum", "ReduceMean", "ReduceSumSquare"};
    static const int64_t dims[][3] = {{5, 7, 13}, {2, 128, 130}};
    static float x[2 * 128 * 130];
    fill(x, 2 * 128 * 130, LD_PRECISION_FP16, -12, 6);
    for (size_t op = 0; op < sizeof ops / sizeof ops[0]; op++)
        for (int d = 0; d < 2; d++) {
            node_spec s = {.op = ops[op], .opset = 11, .n_in = 1, .names = {"x"}, .rank = {3},
                           .dims = {{dims[d][0], dims[d][1], dims[d][2]}}, .data = {x},
                           .int_name = {"keepdims"}, .int_value = {1}, .ints_name = "axes",
                           .n_ints = 1, .ints = {2}};
            check_spec(&s, want_reduce);
        }
}

/* A sum whose partial sums overflow fp16: inf and counted with
 * accumulate-half, the exact 60000 with fp32 accumulation. */
static void test_reduce_partial_overflow(void **state)
{
    (void)state;
    static const float x[] = {60000, 60000, -60000, 1, 2};
    node_spec s = {.op = "ReduceSum", .opset = 11, .n_in = 1, .names = {"x"}, .rank = {1},
                   .dims = {{5}}, .data = {x}, .int_name = {"keepdims"}, .int_value = {0}};
    check_spec(&s, want_reduce);
    run_result r = run_spec(&s, &fp16_half, 1);
    assert_true(isinf(((float *)r.y->data)[0]));
    assert_int_equal(r.counters.partial_overflows, 1);
    ld_tensor_destroy(r.y);
    r = run_spec(&s, &fp16_fp32acc, 1);
    assert_true(((float *)r.y->data)[0] == 60003);
    assert_int_equal(r.counters.partial_overflows, 0);
    ld_tensor_destroy(r.y);
}

/* --- softmax ---------------------------------------------------------------------------------- */

static void want_softmax(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    bool log_softmax = strcmp(s->op, "LogSoftmax") == 0;
    int rank = s->rank[0];
    int axis = (int)(s->int_value[0] < 0 ? s->int_value[0] + rank : s->int_value[0]);
    int64_t outer = 1, n = s->dims[0][axis], inner = 1;
    for (int d = 0; d < rank; d++) {
        if (d < axis)
            outer *= s->dims[0][d];
        else if (d > axis)
            inner *= s->dims[0][d];
    }
    const float *x = s->data[0];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xv = x + o * n * inner + i;
            float *yv = out + o * n * inner + i, m = -INFINITY, sum = 0;
            for (int64_t r = 0; r < n; r++)
                m = xv[r * inner] > m ? xv[r * inner] : m;
            for (int64_t r = 0; r < n; r++) {
                float e = e_val(half, expf(e_val(half, xv[r * inner] - m)));
                sum = e_add(half, sum, e);
                yv[r * inner] = e;
            }
            float k = e_val(half, log_softmax ? logf(sum) : 1.0f / sum);
            for (int64_t r = 0; r < n; r++)
                yv[r * inner] = log_softmax ? e_val(half, xv[r * inner] - m) - k
                                            : yv[r * inner] * k;
        }
    *overflows = 0;
}

static void test_softmax(void **state)
{
    (void)state;
    /* 3 * 41 rows along the last axis: groups of 8 rows and a remainder
     * (softmax.c runs contiguous rows 8 at a time, the rest one by one). */
    static float x[3 * 41 * 5];
    fill(x, 3 * 41 * 5, LD_PRECISION_FP16, -3, 3);
    for (int log_softmax = 0; log_softmax < 2; log_softmax++)
        for (int axis = -1; axis <= 1; axis++) {
            node_spec s = {.op = log_softmax ? "LogSoftmax" : "Softmax", .opset = 13, .n_in = 1,
                           .names = {"x"}, .rank = {3}, .dims = {{3, 41, 5}}, .data = {x},
                           .int_name = {"axis"}, .int_value = {axis}};
            check_spec(&s, want_softmax);
        }
    /* Enough rows along the last axis for the row groups to run on 2 threads. */
    static float big[2 * 4101 * 4];
    fill(big, 2 * 4101 * 4, LD_PRECISION_FP16, -3, 3);
    node_spec s = {.op = "Softmax", .opset = 13, .n_in = 1, .names = {"x"}, .rank = {3},
                   .dims = {{2, 4101, 4}}, .data = {big}, .int_name = {"axis"},
                   .int_value = {-1}};
    check_spec(&s, want_softmax);
}

/* --- normalizations ---------------------------------------------------------------------- */

/* mean and variance as stats_reduced computes them (normalization.c). */
static void e_stats(bool half, const float *x, int64_t n, int64_t stride, float *mean, float *var)
{
    float sum = 0, q = 0;
    for (int64_t i = 0; i < n; i++)
        sum = e_add(half, sum, x[i * stride]);
    float m = e_val(half, sum / (float)n);
    for (int64_t i = 0; i < n; i++) {
        float d = e_val(half, x[i * stride] - m);
        q = e_fma(half, q, d, d);
    }
    *mean = m;
    *var = e_val(half, q / (float)n);
}

static float e_inv_std(bool half, float var, float epsilon)
{
    return e_val(half, 1.0f / e_val(half, sqrtf(e_val(half, var + epsilon))));
}

static void want_layer_norm(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    int64_t inner = s->dims[0][1] * s->dims[0][2], outer = s->dims[0][0];
    const float *x = s->data[0], *scale = s->data[1], *b = s->data[2];
    for (int64_t o = 0; o < outer; o++) {
        float mean, var;
        e_stats(half, x + o * inner, inner, 1, &mean, &var);
        float inv = e_inv_std(half, var, 1e-5f);
        for (int64_t i = 0; i < inner; i++)
            out[o * inner + i] =
                e_val(half, e_val(half, e_val(half, x[o * inner + i] - mean) * inv) * scale[i]) +
                b[i];
    }
    *overflows = 0;
}

static void want_instance_norm(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    int64_t N = s->dims[0][0], C = s->dims[0][1], S = s->dims[0][2];
    const float *x = s->data[0], *scale = s->data[1], *b = s->data[2];
    for (int64_t nc = 0; nc < N * C; nc++) {
        float mean, var;
        e_stats(half, x + nc * S, S, 1, &mean, &var);
        float a = e_val(half, scale[nc % C] * e_inv_std(half, var, 1e-5f));
        for (int64_t i = 0; i < S; i++)
            out[nc * S + i] = e_val(half, e_val(half, x[nc * S + i] - mean) * a) + b[nc % C];
    }
    *overflows = 0;
}

/* MVN over axes (0, 2) of (N, C, S): each channel's elements in input order. */
static void want_mvn(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    int64_t N = s->dims[0][0], C = s->dims[0][1], S = s->dims[0][2];
    const float *x = s->data[0];
    for (int64_t c = 0; c < C; c++) {
        float sum = 0, q = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++)
                sum = e_add(half, sum, x[(n * C + c) * S + i]);
        float mean = e_val(half, sum / (float)(N * S));
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                float d = e_val(half, x[(n * C + c) * S + i] - mean);
                q = e_fma(half, q, d, d);
            }
        float sd = e_val(half, sqrtf(e_val(half, q / (float)(N * S))));
        float sc = e_val(half, 1.0f / e_val(half, sd + 1e-9f));
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++)
                out[(n * C + c) * S + i] = e_val(half, x[(n * C + c) * S + i] - mean) * sc;
    }
    *overflows = 0;
}

static void want_lp_norm(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    int64_t outer = s->dims[0][0], n = s->dims[0][1], inner = s->dims[0][2];
    const float *x = s->data[0];
    bool p1 = s->int_value[1] == 1;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xv = x + o * n * inner + i;
            float norm = 0;
            for (int64_t k = 0; k < n; k++)
                norm = p1 ? e_add(half, norm, fabsf(xv[k * inner]))
                          : e_fma(half, norm, xv[k * inner], xv[k * inner]);
            if (!p1)
                norm = e_val(half, sqrtf(norm));
            for (int64_t k = 0; k < n; k++)
                out[o * n * inner + i + k * inner] = norm == 0 ? 0 : xv[k * inner] / norm;
        }
    *overflows = 0;
}

static void want_cumsum(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    int64_t outer = s->dims[0][0], n = s->dims[0][1];
    const float *x = s->data[0];
    em16.overflows = 0;
    for (int64_t o = 0; o < outer; o++) {
        float acc = 0;
        for (int64_t k = 0; k < n; k++)
            out[o * n + k] = acc = k == 0 ? x[o * n] : e_add(half, acc, x[o * n + k]);
    }
    *overflows = half ? em16.overflows : 0;
}

static void test_normalizations(void **state)
{
    (void)state;
    static float x[3 * 8 * 25], scale[200], bias[200];
    fill(x, 3 * 8 * 25, LD_PRECISION_FP16, -3, 4);
    fill(scale, 200, LD_PRECISION_FP16, -1, 1);
    fill(bias, 200, LD_PRECISION_FP16, -2, 0);
    node_spec ln = {.op = "LayerNormalization", .opset = 17, .n_in = 3,
                    .names = {"x", "scale", "b"}, .rank = {3, 2, 2},
                    .dims = {{3, 8, 25}, {8, 25}, {8, 25}}, .data = {x, scale, bias},
                    .int_name = {"axis"}, .int_value = {1}};
    check_spec(&ln, want_layer_norm);
    node_spec in = {.op = "InstanceNormalization", .opset = 6, .n_in = 3,
                    .names = {"x", "scale", "b"}, .rank = {3, 1, 1},
                    .dims = {{3, 8, 25}, {8}, {8}}, .data = {x, scale, bias}};
    check_spec(&in, want_instance_norm);
    node_spec mvn = {.op = "MeanVarianceNormalization", .opset = 13, .n_in = 1, .names = {"x"},
                     .rank = {3}, .dims = {{3, 8, 25}}, .data = {x}, .ints_name = "axes",
                     .n_ints = 2, .ints = {0, 2}};
    check_spec(&mvn, want_mvn);
    for (int p = 1; p <= 2; p++) {
        node_spec lp = {.op = "LpNormalization", .opset = 1, .n_in = 1, .names = {"x"},
                        .rank = {3}, .dims = {{3, 8, 25}}, .data = {x},
                        .int_name = {"axis", "p"}, .int_value = {1, p}};
        check_spec(&lp, want_lp_norm);
    }
}

static void test_cumsum(void **state)
{
    (void)state;
    static float x[6 * 300];
    fill(x, 6 * 300, LD_PRECISION_FP16, -2, 9);
    for (int i = 0; i < 300; i++) /* row 0 passes 65504 after 128 terms */
        x[i] = 512;
    static const int64_t axis = 1;
    Onnx__ModelProto *m = ob_model();
    int64_t dx[] = {6, 300}, da[] = {1};
    ob_input(m->graph, "x", FLOAT, 2, dx);
    Onnx__TensorProto *t = ob_tensor("axis", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, da);
    ob_set_raw(t, &axis, sizeof axis);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_node(m->graph, "CumSum", "n", "x,axis", "y");
    ob_output(m->graph, "y", FLOAT);
    ld_graph *g = ob_load_ok(m);
    node_spec s = {.rank = {2}, .dims = {{6, 300}}, .data = {x}};
    for (int half = 0; half < 2; half++) {
        ld_exec_hooks hooks = {.user = (void *)(half ? &fp16_half : &fp16_fp32acc),
                               .layer_numerics = numerics_hook};
        ld_exec_config cfg = {.threads = 1, .hooks = &hooks};
        ld_exec *e = NULL;
        ld_error err;
        assert_int_equal(ld_exec_create(&e, g, &cfg, &err), LD_OK);
        ld_tensor *in = NULL;
        ld_shape shape = {.rank = 2, .dims = {6, 300}};
        assert_int_equal(ld_tensor_wrap(&in, "x", LD_DTYPE_FLOAT32, &shape, x, &err), LD_OK);
        run_result r = {0};
        const ld_tensor *ins[] = {in};
        assert_int_equal(ld_exec_run(e, ins, keep_output, &r, &err), LD_OK);
        float want[6 * 300];
        int64_t overflows;
        want_cumsum(&s, half, want, &overflows);
        expect_same(r.y->data, want, 6 * 300, half ? "CumSum half" : "CumSum fp32");
        assert_int_equal(r.counters.partial_overflows, overflows);
        if (half)
            assert_true(overflows > 0);
        ld_tensor_destroy(r.y);
        ld_tensor_destroy(in);
        ld_exec_destroy(e);
    }
    ld_graph_destroy(g);
}

/* --- pooling ------------------------------------------------------------------------------ */

/* The attribute named `name` among the spec's int attributes (def if absent). */
static int64_t spec_int(const node_spec *s, const char *name, int64_t def)
{
    for (int i = 0; i < 3 && s->int_name[i]; i++)
        if (strcmp(s->int_name[i], name) == 0)
            return s->int_value[i];
    return def;
}

/* One term of a pooled sum: x for AveragePool (p = 0), else |x|^p as the
 * layer holds it (p = 2: a multiply-add step). */
static float e_pool_step(bool half, float acc, float v, int64_t p)
{
    if (p == 0)
        return e_add(half, acc, v);
    if (p == 2)
        return e_fma(half, acc, v, v);
    if (p == 1)
        return e_add(half, acc, fabsf(v));
    return e_add(half, acc, e_val(half, powf(fabsf(v), (float)p)));
}

static float e_pool_finish(float sum, int64_t p, int64_t count)
{
    if (p == 0)
        return sum / (float)count;
    return p == 1 ? sum : p == 2 ? sqrtf(sum) : powf(sum, 1.0f / (float)p);
}

/* 2-D AveragePool / LpPool, stride 1, kernel kh x kw, symmetric pads q (ints2
 * {q, q, q, q}), or the global pools: taps row by row inside the input. */
static void want_pool(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    bool global = strncmp(s->op, "Global", 6) == 0;
    bool lp = strstr(s->op, "LpPool") != NULL;
    int64_t p = lp ? spec_int(s, "p", 2) : 0, pad_counts = spec_int(s, "count_include_pad", 0);
    int64_t NC = s->dims[0][0] * s->dims[0][1], H = s->dims[0][2], W = s->dims[0][3];
    int64_t kh = global ? 0 : s->ints[0], kw = global ? 0 : s->ints[1];
    int64_t q = global || s->n_ints2 == 0 ? 0 : s->ints2[0];
    int64_t OH = global ? 1 : H + 2 * q - kh + 1, OW = global ? 1 : W + 2 * q - kw + 1;
    const float *x = s->data[0];
    em16.overflows = 0;
    for (int64_t pl = 0; pl < NC; pl++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                const float *xp = x + pl * H * W;
                float sum = 0;
                int64_t count = 0;
                for (int64_t ih = 0; ih < H; ih++)
                    for (int64_t iw = 0; iw < W; iw++) {
                        bool in = global || (ih >= oh - q && ih < oh - q + kh &&
                                             iw >= ow - q && iw < ow - q + kw);
                        if (in) {
                            sum = e_pool_step(half, sum, xp[ih * W + iw], p);
                            count++;
                        }
                    }
                if (!global && pad_counts)
                    count = kh * kw;
                out[(pl * OH + oh) * OW + ow] = e_pool_finish(sum, p, count);
            }
    *overflows = half ? em16.overflows : 0;
}

static void test_pools(void **state)
{
    (void)state;
    static float x[2 * 3 * 7 * 8];
    fill(x, 2 * 3 * 7 * 8, LD_PRECISION_FP16, -10, 7);
    for (int lp = 0; lp < 2; lp++)
        for (int variant = 0; variant < 3; variant++) {
            /* AveragePool: count_include_pad 0 / 1 / no pads; LpPool: p = 1, 2, 3 */
            node_spec s = {.op = lp ? "LpPool" : "AveragePool", .opset = 11, .n_in = 1,
                           .names = {"x"}, .rank = {4}, .dims = {{2, 3, 7, 8}}, .data = {x},
                           .int_name = {lp ? "p" : "count_include_pad"},
                           .int_value = {lp ? variant + 1 : variant == 1},
                           .ints_name = "kernel_shape", .n_ints = 2, .ints = {3, 3},
                           .ints2_name = variant < 2 || lp ? "pads" : NULL,
                           .n_ints2 = variant < 2 || lp ? 4 : 0, .ints2 = {1, 1, 1, 1}};
            check_spec(&s, want_pool);
        }
    node_spec gap = {.op = "GlobalAveragePool", .opset = 1, .n_in = 1, .names = {"x"},
                     .rank = {4}, .dims = {{2, 3, 7, 8}}, .data = {x}};
    check_spec(&gap, want_pool);
    for (int p = 2; p <= 3; p++) {
        node_spec glp = {.op = "GlobalLpPool", .opset = 2, .n_in = 1, .names = {"x"},
                         .rank = {4}, .dims = {{2, 3, 7, 8}}, .data = {x},
                         .int_name = {"p"}, .int_value = {p}};
        check_spec(&glp, want_pool);
    }
}

/* Window sums whose partial sums overflow fp16: counted with accumulate-half. */
static void test_pool_partial_overflow(void **state)
{
    (void)state;
    static const float x[] = {60000, 60000, -60000, 1, 2, 3};
    node_spec avg = {.op = "AveragePool", .opset = 11, .n_in = 1, .names = {"x"}, .rank = {4},
                     .dims = {{1, 1, 1, 6}}, .data = {x}, .ints_name = "kernel_shape",
                     .n_ints = 2, .ints = {1, 3}};
    check_spec(&avg, want_pool);
    run_result r = run_spec(&avg, &fp16_half, 1);
    assert_true(isinf(((float *)r.y->data)[0]));
    assert_int_equal(r.counters.partial_overflows, 1);
    ld_tensor_destroy(r.y);
    node_spec gap = {.op = "GlobalAveragePool", .opset = 1, .n_in = 1, .names = {"x"},
                     .rank = {4}, .dims = {{1, 1, 1, 6}}, .data = {x}};
    check_spec(&gap, want_pool);
    r = run_spec(&gap, &fp16_half, 2);
    assert_true(isinf(((float *)r.y->data)[0]));
    assert_int_equal(r.counters.partial_overflows, 1);
    ld_tensor_destroy(r.y);
    r = run_spec(&gap, &fp16_fp32acc, 1);
    assert_true(((float *)r.y->data)[0] == 60006.0f / 6.0f);
    assert_int_equal(r.counters.partial_overflows, 0);
    ld_tensor_destroy(r.y);
}

/* --- Conv and MatMul nodes take the accumulate-half GEMM ------------------------------- */

/* Conv (N=1, pads 1, stride 1, 3x3) as the GEMM over (c, kh, kw) in order,
 * then + bias: the epilogue with beta = 1. */
static void want_conv(const node_spec *s, bool half, float *out, int64_t *overflows)
{
    int64_t C = s->dims[0][1], H = s->dims[0][2], W = s->dims[0][3], M = s->dims[1][0];
    int64_t Cg = s->dims[1][1], group = C / Cg, Mg = M / group;
    const float *x = s->data[0], *w = s->data[1], *b = s->data[2];
    emul em = {LD_PRECISION_FP16, false, 0};
    for (int64_t m = 0; m < M; m++)
        for (int64_t oh = 0; oh < H; oh++)
            for (int64_t ow = 0; ow < W; ow++) {
                float acc = 0;
                int64_t g = m / Mg;
                for (int64_t c = 0; c < Cg; c++)
                    for (int64_t kh = 0; kh < 3; kh++)
                        for (int64_t kw = 0; kw < 3; kw++) {
                            int64_t ih = oh + kh - 1, iw = ow + kw - 1;
                            float xv = ih < 0 || ih >= H || iw < 0 || iw >= W
                                           ? 0.0f
                                           : x[((g * Cg + c) * H + ih) * W + iw];
                            float wv = w[((m * Cg + c) * 3 + kh) * 3 + kw];
                            acc = half ? emul_step(&em, acc, wv, xv, true) : acc + wv * xv;
                        }
                out[(m * H + oh) * W + ow] = half ? emul_step(&em, acc, b[m], 0, false)
                                                  : acc + b[m];
            }
    *overflows = em.overflows;
}

static void test_conv_and_matmul(void **state)
{
    (void)state;
    static float x[12 * 9 * 10], w[12 * 12 * 9], b[12];
    fill(x, 12 * 90, LD_PRECISION_FP16, -3, 3);
    fill(w, 12 * 12 * 9, LD_PRECISION_FP16, -3, 2);
    fill(b, 12, LD_PRECISION_FP16, -2, 2);
    for (int depthwise = 0; depthwise < 2; depthwise++) {
        node_spec s = {.op = "Conv", .opset = 11, .n_in = 3, .names = {"x", "w", "b"},
                       .rank = {4, 4, 1},
                       .dims = {{1, 12, 9, 10}, {12, depthwise ? 1 : 12, 3, 3}, {12}},
                       .data = {x, w, b}, .int_name = {"group"},
                       .int_value = {depthwise ? 12 : 1}, .ints_name = "pads", .n_ints = 4,
                       .ints = {1, 1, 1, 1}};
        float want[12 * 90];
        int64_t overflows;
        want_conv(&s, true, want, &overflows);
        run_result r = run_spec(&s, &fp16_half, 2);
        expect_same(r.y->data, want, 12 * 90, depthwise ? "depthwise Conv" : "Conv");
        assert_int_equal(r.counters.partial_overflows, overflows);
        ld_tensor_destroy(r.y);
    }
    /* MatMul (5, 37) x (37, 20) */
    static float a[5 * 37], bm[37 * 20];
    fill(a, 5 * 37, LD_PRECISION_FP16, -2, 5);
    fill(bm, 37 * 20, LD_PRECISION_FP16, -2, 5);
    for (int k = 0; k < 37; k++) { /* output (0, 0): 37 products of 2^12 or more overflow */
        a[k] = 64 + (float)k;
        bm[k * 20] = 64;
    }
    node_spec mm = {.op = "MatMul", .opset = 13, .n_in = 2, .names = {"a", "b"}, .rank = {2, 2},
                    .dims = {{5, 37}, {37, 20}}, .data = {a, bm}};
    float want[100];
    emul em = {LD_PRECISION_FP16, false, 0};
    for (int i = 0; i < 5; i++) /* each output: the products in k order, then nothing */
        for (int j = 0; j < 20; j++) {
            float acc = 0;
            for (int k = 0; k < 37; k++)
                acc = emul_step(&em, acc, a[i * 37 + k], bm[k * 20 + j], true);
            want[i * 20 + j] = acc;
        }
    run_result r = run_spec(&mm, &fp16_half, 1);
    expect_same(r.y->data, want, 100, "MatMul");
    assert_int_equal(r.counters.partial_overflows, em.overflows);
    assert_true(em.overflows > 0);
    ld_tensor_destroy(r.y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_reductions, ob_teardown),
        cmocka_unit_test_teardown(test_reduce_partial_overflow, ob_teardown),
        cmocka_unit_test_teardown(test_reduce_row_groups, ob_teardown),
        cmocka_unit_test_teardown(test_softmax, ob_teardown),
        cmocka_unit_test_teardown(test_normalizations, ob_teardown),
        cmocka_unit_test_teardown(test_cumsum, ob_teardown),
        cmocka_unit_test_teardown(test_pools, ob_teardown),
        cmocka_unit_test_teardown(test_pool_partial_overflow, ob_teardown),
        cmocka_unit_test_teardown(test_conv_and_matmul, ob_teardown),
    };
    return cmocka_run_group_tests_name("accumulate_kernels", tests, NULL, NULL);
}
