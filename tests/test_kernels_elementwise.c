/* Unit tests of the elementwise kernel families (unary, binary, activation,
 * logical, cast) for what the ONNX node tests cover poorly: broadcasting
 * corner cases (scalars, empty tensors, three-way, more inputs than the
 * iterator takes at once), the multi-threaded paths on large tensors against
 * a naive loop, integer edge cases (overflow, division by zero, INT_MIN / -1,
 * Mod signs, shifts by the width), mixed-type Pow, exact Cast rounding
 * (float32 and float64 to float16/bfloat16, int64 to bfloat16, float to int
 * out of range), the pre-opset-7 broadcast attribute, per-channel PRelu-6,
 * Dropout modes, and error messages naming the node.
 *
 * Each test builds a one-node ONNX model (tests/support/onnx_builder.h) and
 * runs it on the reference backend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/backend.h"
#include "layerdiff/round.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

#define expect_shape kr_expect_shape

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define MAX_IO 16

/* --- one-node models ------------------------------------------------------------------- */

typedef struct tcase {
    Onnx__ModelProto *m;
    Onnx__NodeProto *node;
    ld_tensor *inputs[MAX_IO];
    int n_inputs;
    ld_tensor *outputs[MAX_IO]; /* filled by run */
    int n_outputs;
    ld_error err;
} tcase;

/* A model with one node `op` named "n1" at `opset`. Inputs are added with
 * tc_input / tc_init in the node's input order; outputs are named y0, y1... */
static tcase *tc_new(const char *op, int opset, const char *ins, int n_outputs)
{
    tcase *c = ob_mem(sizeof *c);
    c->m = ob_model();
    c->m->opset_import[0]->version = opset;
    char outs[64] = "";
    for (int i = 0; i < n_outputs; i++)
        snprintf(outs + strlen(outs), sizeof outs - strlen(outs), "%sy%d", i ? "," : "", i);
    c->node = ob_node(c->m->graph, op, "n1", ins, outs);
    c->n_outputs = n_outputs;
    return c;
}

static ld_tensor *make_tensor(const char *name, ld_dtype dt, int rank, const int64_t *dims,
                              const void *data)
{
    ld_shape shape;
    ld_error err;
    ld_tensor *t = NULL;
    assert_int_equal(ld_shape_set(&shape, rank, dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, name, dt, &shape, &err), LD_OK);
    if (t->nbytes && data)
        memcpy(t->data, data, t->nbytes);
    return t;
}

/* A graph input fed with data. */
static void tc_input(tcase *c, const char *name, ld_dtype dt, int rank, const int64_t *dims,
                     const void *data)
{
    assert_true(c->n_inputs < MAX_IO);
    ob_input(c->m->graph, name, (int)dt, rank, dims);
    c->inputs[c->n_inputs++] = make_tensor(name, dt, rank, dims, data);
}

/* An initializer. */
static void tc_init(tcase *c, const char *name, ld_dtype dt, int rank, const int64_t *dims,
                    const void *data, size_t nbytes)
{
    Onnx__TensorProto *t = ob_tensor(name, (int)dt, rank, dims);
    ob_set_raw(t, data, nbytes);
    OB_PUSH(c->m->graph->initializer, c->m->graph->n_initializer, t);
}

static void tc_attr_int(tcase *c, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ob_attr(c->node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void tc_attr_float(tcase *c, const char *name, float v)
{
    Onnx__AttributeProto *a =
        ob_attr(c->node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

static void tc_attr_string(tcase *c, const char *name, const char *v)
{
    Onnx__AttributeProto *a =
        ob_attr(c->node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)ob_str(v);
    a->s.len = strlen(v);
}

static ld_status capture(void *user, const ld_tensor_event *ev, ld_error *err)
{
    tcase *c = user;
    const char *name = ev->graph->values[ev->value].name;
    if (name[0] == 'y' && ev->node)
        return ld_tensor_clone(&c->outputs[atoi(name + 1)], ev->tensor, NULL, err);
    return LD_OK;
}

static void tc_free_io(tcase *c)
{
    for (int i = 0; i < MAX_IO; i++) {
        ld_tensor_destroy(c->inputs[i]);
        ld_tensor_destroy(c->outputs[i]);
        c->inputs[i] = c->outputs[i] = NULL;
    }
}

/* Runs the model with `threads`; outputs land in c->outputs (freed by
 * tc_done), the error in c->err. */
static ld_status tc_run(tcase *c, int threads)
{
    for (int i = 0; i < c->n_outputs; i++) {
        char name[16];
        snprintf(name, sizeof name, "y%d", i);
        ob_output(c->m->graph, name, 0);
    }
    c->n_outputs = 0; /* outputs declared once even when run twice */
    const ld_backend_vtable *vt = ld_backend_find("reference");
    assert_non_null(vt);
    ld_graph *g = NULL;
    void *backend = NULL;
    ld_status st = ob_load(c->m, &g, &c->err);
    ld_backend_config cfg = {.threads = threads};
    if (st == LD_OK)
        st = vt->create(&backend, &cfg, &c->err);
    if (st == LD_OK)
        st = vt->prepare(backend, g, NULL, &c->err);
    for (int i = 0; i < MAX_IO; i++) {
        ld_tensor_destroy(c->outputs[i]);
        c->outputs[i] = NULL;
    }
    if (st == LD_OK)
        st = vt->run(backend, (const ld_tensor *const *)c->inputs, capture, c, &c->err);
    if (backend)
        vt->destroy(backend);
    ld_graph_destroy(g);
    return st;
}

static void tc_run_ok(tcase *c, int threads)
{
    if (tc_run(c, threads) != LD_OK)
        fail_msg("run failed: %s", c->err.message);
}

/* The run must fail with `want` and a one-line message naming node n1 that
 * contains `substring`. */
static void tc_run_fails(tcase *c, ld_status want, const char *substring)
{
    ld_status st = tc_run(c, 1);
    ob_expect_message(st, want, &c->err, "", substring);
    if (!strstr(c->err.message, "'n1'"))
        fail_msg("message does not name the node: %s", c->err.message);
    tc_free_io(c);
}


/* Bit-exact comparison of an output with expected bytes. */
static void expect_bytes(const ld_tensor *t, ld_dtype dt, const void *want, size_t n)
{
    assert_non_null(t);
    assert_int_equal(t->dtype, dt);
    assert_int_equal(t->nbytes, n);
    if (memcmp(t->data, want, n) != 0) {
        for (int64_t i = 0; i < t->count; i++)
            print_message("  [%lld] got %.9g\n", (long long)i, ld_tensor_get_double(t, i));
        fail_msg("output differs from the expected bytes");
    }
}

#define F32 LD_DTYPE_FLOAT32
#define F64 LD_DTYPE_FLOAT64
#define F16 LD_DTYPE_FLOAT16
#define BF16 LD_DTYPE_BFLOAT16
#define I8 LD_DTYPE_INT8
#define I32 LD_DTYPE_INT32
#define I64 LD_DTYPE_INT64
#define U8 LD_DTYPE_UINT8
#define U16 LD_DTYPE_UINT16
#define BOOL LD_DTYPE_BOOL

/* --- broadcasting -------------------------------------------------------------------------- */

static void test_broadcast_shapes_and_values(void **state)
{
    (void)state;
    /* [2,3,4] - [3,1]: B broadcast along the last axis and the first. */
    float a[24], b[3] = {100, 200, 300}, want[24];
    for (int i = 0; i < 24; i++) {
        a[i] = (float)i;
        want[i] = a[i] - b[(i / 4) % 3];
    }
    tcase *c = tc_new("Sub", 17, "a,b", 1);
    tc_input(c, "a", F32, 3, (int64_t[]){2, 3, 4}, a);
    tc_input(c, "b", F32, 2, (int64_t[]){3, 1}, b);
    tc_run_ok(c, 1);
    expect_shape(c->outputs[0], 3, (int64_t[]){2, 3, 4});
    expect_bytes(c->outputs[0], F32, want, sizeof want);
    tc_free_io(c);

    /* scalar op scalar gives a scalar; a [1] against a scalar gives [1] */
    float s = 3, t = 4, seven = 7;
    c = tc_new("Add", 17, "a,b", 1);
    tc_input(c, "a", F32, 0, NULL, &s);
    tc_input(c, "b", F32, 1, (int64_t[]){1}, &t);
    tc_run_ok(c, 1);
    expect_shape(c->outputs[0], 1, (int64_t[]){1});
    expect_bytes(c->outputs[0], F32, &seven, sizeof seven);
    tc_free_io(c);

    /* an empty dimension broadcasts against 1 and gives an empty output */
    c = tc_new("Mul", 17, "a,b", 1);
    tc_input(c, "a", F32, 2, (int64_t[]){0, 3}, NULL);
    tc_input(c, "b", F32, 2, (int64_t[]){1, 3}, b);
    tc_run_ok(c, 1);
    expect_shape(c->outputs[0], 2, (int64_t[]){0, 3});
    tc_free_io(c);
}

static void test_broadcast_incompatible_names_node(void **state)
{
    (void)state;
    float a[6] = {0}, b[4] = {0};
    tcase *c = tc_new("Add", 17, "a,b", 1);
    tc_input(c, "a", F32, 2, (int64_t[]){2, 3}, a);
    tc_input(c, "b", F32, 1, (int64_t[]){4}, b);
    tc_run_fails(c, LD_ERR_INPUT, "cannot be broadcast");

    int32_t i[3] = {0};
    c = tc_new("Add", 17, "a,b", 1);
    tc_input(c, "a", F32, 1, (int64_t[]){3}, a);
    tc_input(c, "b", I32, 1, (int64_t[]){3}, i);
    tc_run_fails(c, LD_ERR_INPUT, "share one dtype");
}

/* Large tensors take the parallel paths: one long row split in chunks, and
 * many rows split between threads. Results must equal a naive loop. */
static void test_parallel_paths_match_naive(void **state)
{
    (void)state;
    enum { N = 64, C = 3, HW = 1024 };
    float *x = malloc(sizeof(float) * N * C * HW), *want = malloc(sizeof(float) * N * C * HW);
    float bias[C] = {0.5f, -1.25f, 3};
    assert_non_null(x);
    assert_non_null(want);
    for (int i = 0; i < N * C * HW; i++) {
        x[i] = (float)((i * 7919) % 1000) / 10.0f;
        want[i] = x[i] + bias[(i / HW) % C];
    }
    for (int threads = 1; threads <= 2; threads++) {
        tcase *c = tc_new("Add", 17, "x,b", 1);
        tc_input(c, "x", F32, 3, (int64_t[]){N, C, HW}, x);
        tc_input(c, "b", F32, 2, (int64_t[]){C, 1}, bias);
        tc_run_ok(c, threads);
        expect_bytes(c->outputs[0], F32, want, sizeof(float) * N * C * HW);
        tc_free_io(c);
    }
    for (int i = 0; i < N * C * HW; i++)
        want[i] = x[i] * x[i];
    tcase *c = tc_new("Mul", 17, "x,x", 1);
    tc_input(c, "x", F32, 1, (int64_t[]){N * C * HW}, x);
    tc_run_ok(c, 2);
    expect_bytes(c->outputs[0], F32, want, sizeof(float) * N * C * HW);
    tc_free_io(c);
    for (int i = 0; i < N * C * HW; i++)
        want[i] = x[i] < 30 ? 0.0f : x[i];
    c = tc_new("ThresholdedRelu", 17, "x", 1);
    tc_attr_float(c, "alpha", 29.95f);
    tc_input(c, "x", F32, 1, (int64_t[]){N * C * HW}, x);
    tc_run_ok(c, 2);
    expect_bytes(c->outputs[0], F32, want, sizeof(float) * N * C * HW);
    tc_free_io(c);
    free(x);
    free(want);
}

/* Sum of 10 inputs (more than the iterator takes at once), each a
 * different broadcastable shape; Mean divides once at the end. */
static void test_variadic_many_inputs(void **state)
{
    (void)state;
    float v[6] = {1, 2, 3, 4, 5, 6};
    for (int mean = 0; mean < 2; mean++) {
        tcase *c = tc_new(mean ? "Mean" : "Sum", 17, "a,b,a,b,a,b,a,b,a,s", 1);
        tc_input(c, "a", F32, 2, (int64_t[]){2, 3}, v);
        tc_input(c, "b", F32, 1, (int64_t[]){3}, v);
        tc_input(c, "s", F32, 0, NULL, v);
        tc_run_ok(c, 1);
        float want[6];
        for (int i = 0; i < 6; i++) {
            want[i] = 5 * v[i] + 4 * v[i % 3] + 1;
            if (mean)
                want[i] /= 10;
        }
        expect_shape(c->outputs[0], 2, (int64_t[]){2, 3});
        expect_bytes(c->outputs[0], F32, want, sizeof want);
        tc_free_io(c);
    }
}

static void test_max_min_nan_and_ints(void **state)
{
    (void)state;
    float a[3] = {NAN, 1, 5}, b[3] = {0, NAN, 2};
    tcase *c = tc_new("Max", 17, "a,b", 1);
    tc_input(c, "a", F32, 1, (int64_t[]){3}, a);
    tc_input(c, "b", F32, 1, (int64_t[]){3}, b);
    tc_run_ok(c, 1);
    const float *y = c->outputs[0]->data;
    assert_true(isnan(y[0]) && isnan(y[1]) && y[2] == 5);
    tc_free_io(c);

    int8_t p[3] = {-128, 0, 127}, q[3] = {1, -1, -128}, want[3] = {-128, -1, -128};
    c = tc_new("Min", 17, "p,q", 1);
    tc_input(c, "p", I8, 1, (int64_t[]){3}, p);
    tc_input(c, "q", I8, 1, (int64_t[]){3}, q);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], I8, want, sizeof want);
    tc_free_io(c);
}

static void test_where_three_way_native_types(void **state)
{
    (void)state;
    /* condition [2,1], X [3] int64, Y scalar */
    uint8_t cond[2] = {1, 0};
    int64_t x[3] = {INT64_MAX, -1, 7}, y = INT64_MIN;
    int64_t want[6] = {INT64_MAX, -1, 7, INT64_MIN, INT64_MIN, INT64_MIN};
    tcase *c = tc_new("Where", 16, "c,x,y", 1);
    tc_input(c, "c", BOOL, 2, (int64_t[]){2, 1}, cond);
    tc_input(c, "x", I64, 1, (int64_t[]){3}, x);
    tc_input(c, "y", I64, 0, NULL, &y);
    tc_run_ok(c, 1);
    expect_shape(c->outputs[0], 2, (int64_t[]){2, 3});
    expect_bytes(c->outputs[0], I64, want, sizeof want);
    tc_free_io(c);

    /* float16 moves bit-exactly (a NaN payload survives: no widening) */
    uint16_t hx[2] = {0x7E01, 0x3C00}, hy[2] = {0xFC00, 0x0001}, hwant[2] = {0x7E01, 0x0001};
    uint8_t c2[2] = {1, 0};
    c = tc_new("Where", 16, "c,x,y", 1);
    tc_input(c, "c", BOOL, 1, (int64_t[]){2}, c2);
    tc_input(c, "x", F16, 1, (int64_t[]){2}, hx);
    tc_input(c, "y", F16, 1, (int64_t[]){2}, hy);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], F16, hwant, sizeof hwant);
    tc_free_io(c);

    float f[2] = {0};
    c = tc_new("Where", 16, "c,x,y", 1);
    tc_input(c, "c", F32, 1, (int64_t[]){2}, f);
    tc_input(c, "x", F32, 1, (int64_t[]){2}, f);
    tc_input(c, "y", F32, 1, (int64_t[]){2}, f);
    tc_run_fails(c, LD_ERR_INPUT, "condition must be bool");
}

/* --- the pre-opset-7 broadcast attribute ------------------------------------------------- */

static void test_legacy_broadcast(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[2] = {10, 20};
    float want[6] = {11, 12, 13, 24, 25, 26};
    tcase *c = tc_new("Add", 6, "a,b", 1);
    tc_attr_int(c, "broadcast", 1);
    tc_attr_int(c, "axis", 0);
    tc_input(c, "a", F32, 2, (int64_t[]){2, 3}, a);
    tc_input(c, "b", F32, 1, (int64_t[]){2}, b);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], F32, want, sizeof want);
    tc_free_io(c);

    /* without broadcast=1 the shapes must match */
    c = tc_new("Mul", 6, "a,b", 1);
    tc_input(c, "a", F32, 2, (int64_t[]){2, 3}, a);
    tc_input(c, "b", F32, 1, (int64_t[]){2}, b);
    tc_run_fails(c, LD_ERR_INPUT, "broadcast=1");

    /* default axis aligns B with A's last dims: [2] does not fit [2,3] */
    c = tc_new("Sub", 6, "a,b", 1);
    tc_attr_int(c, "broadcast", 1);
    tc_input(c, "a", F32, 2, (int64_t[]){2, 3}, a);
    tc_input(c, "b", F32, 1, (int64_t[]){2}, b);
    tc_run_fails(c, LD_ERR_INPUT, "cannot broadcast B");
}

/* --- integer semantics ------------------------------------------------------------------- */

static void test_integer_arithmetic_edges(void **state)
{
    (void)state;
    int32_t a[4] = {INT32_MAX, INT32_MIN, 7, -7}, b[4] = {1, -1, 0, 2};
    struct { const char *op; int32_t want[4]; } cases[] = {
        {"Add", {INT32_MIN, INT32_MAX, 7, -5}},   /* wraps */
        {"Sub", {INT32_MAX - 1, INT32_MIN + 1, 7, -9}},
        {"Mul", {INT32_MAX, INT32_MIN, 0, -14}},  /* INT_MIN * -1 wraps */
        {"Div", {INT32_MAX, INT32_MIN, 0, -3}},   /* /0 -> 0, truncation */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        tcase *c = tc_new(cases[k].op, 17, "a,b", 1);
        tc_input(c, "a", I32, 1, (int64_t[]){4}, a);
        tc_input(c, "b", I32, 1, (int64_t[]){4}, b);
        tc_run_ok(c, 1);
        expect_bytes(c->outputs[0], I32, cases[k].want, sizeof cases[k].want);
        tc_free_io(c);
    }
    /* uint16 * uint16 must not overflow int (C promotion) */
    uint16_t u[1] = {65535}, uwant[1] = {1};
    tcase *c = tc_new("Mul", 17, "a,a", 1);
    tc_input(c, "a", U16, 1, (int64_t[]){1}, u);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], U16, uwant, sizeof uwant);
    tc_free_io(c);
    /* Abs and Neg of INT_MIN wrap */
    int8_t m[2] = {-128, -5}, absw[2] = {-128, 5}, negw[2] = {-128, 5};
    c = tc_new("Abs", 17, "m", 1);
    tc_input(c, "m", I8, 1, (int64_t[]){2}, m);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], I8, absw, sizeof absw);
    tc_free_io(c);
    c = tc_new("Neg", 17, "m", 1);
    tc_input(c, "m", I8, 1, (int64_t[]){2}, m);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], I8, negw, sizeof negw);
    tc_free_io(c);
}

static void test_mod_signs(void **state)
{
    (void)state;
    int64_t a[6] = {-7, 7, -7, 7, INT64_MIN, 5}, b[6] = {3, -3, -3, 3, -1, 0};
    int64_t python[6] = {2, -2, -1, 1, 0, 0}, c_fmod[6] = {-1, 1, -1, 1, 0, 0};
    for (int fmod = 0; fmod < 2; fmod++) {
        tcase *c = tc_new("Mod", 13, "a,b", 1);
        tc_attr_int(c, "fmod", fmod);
        tc_input(c, "a", I64, 1, (int64_t[]){6}, a);
        tc_input(c, "b", I64, 1, (int64_t[]){6}, b);
        tc_run_ok(c, 1);
        expect_bytes(c->outputs[0], I64, fmod ? c_fmod : python, sizeof python);
        tc_free_io(c);
    }
    float f[2] = {-7.5f, 2};
    tcase *c = tc_new("Mod", 13, "a,b", 1);
    tc_input(c, "a", F32, 1, (int64_t[]){1}, f);
    tc_input(c, "b", F32, 1, (int64_t[]){1}, f + 1);
    tc_run_fails(c, LD_ERR_INPUT, "fmod must be 1");
}

static void test_bitshift_width(void **state)
{
    (void)state;
    uint8_t x[4] = {0x81, 0x81, 0x81, 0x81}, s[4] = {1, 7, 8, 200};
    uint8_t left[4] = {0x02, 0x80, 0, 0}, right[4] = {0x40, 0x01, 0, 0};
    for (int dir = 0; dir < 2; dir++) {
        tcase *c = tc_new("BitShift", 11, "x,s", 1);
        tc_attr_string(c, "direction", dir ? "RIGHT" : "LEFT");
        tc_input(c, "x", U8, 1, (int64_t[]){4}, x);
        tc_input(c, "s", U8, 1, (int64_t[]){4}, s);
        tc_run_ok(c, 1);
        expect_bytes(c->outputs[0], U8, dir ? right : left, sizeof left);
        tc_free_io(c);
    }
    tcase *c = tc_new("BitShift", 11, "x,s", 1);
    tc_attr_string(c, "direction", "UP");
    tc_input(c, "x", U8, 1, (int64_t[]){4}, x);
    tc_input(c, "s", U8, 1, (int64_t[]){4}, s);
    tc_run_fails(c, LD_ERR_INPUT, "direction");
}

static void test_pow_mixed_types(void **state)
{
    (void)state;
    /* int64 ^ int64 exact (3^39 needs 62 bits; double would round it) */
    int64_t base[4] = {3, 2, -1, 5}, ex[4] = {39, -1, -3, 0};
    int64_t want[4] = {4052555153018976267LL, 0, -1, 1};
    tcase *c = tc_new("Pow", 15, "x,y", 1);
    tc_input(c, "x", I64, 1, (int64_t[]){4}, base);
    tc_input(c, "y", I64, 1, (int64_t[]){4}, ex);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], I64, want, sizeof want);
    tc_free_io(c);
    /* int32 ^ float: computed in double, truncated */
    int32_t ib[2] = {2, 10};
    float fe[2] = {0.5f, 2.5f};
    int32_t iwant[2] = {1, 316};
    c = tc_new("Pow", 15, "x,y", 1);
    tc_input(c, "x", I32, 1, (int64_t[]){2}, ib);
    tc_input(c, "y", F32, 1, (int64_t[]){2}, fe);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], I32, iwant, sizeof iwant);
    tc_free_io(c);
    /* float16 base, float32 exponent: output float16 */
    uint16_t h[1] = {0x4200}; /* 3.0 */
    float two = 2;
    uint16_t nine[1] = {0x4880};
    c = tc_new("Pow", 15, "x,y", 1);
    tc_input(c, "x", F16, 1, (int64_t[]){1}, h);
    tc_input(c, "y", F32, 0, NULL, &two);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], F16, nine, sizeof nine);
    tc_free_io(c);
    /* unsupported pair */
    uint8_t u[1] = {2};
    c = tc_new("Pow", 15, "x,y", 1);
    tc_input(c, "x", U8, 1, (int64_t[]){1}, u);
    tc_input(c, "y", U8, 1, (int64_t[]){1}, u);
    tc_run_fails(c, LD_ERR_UNSUPPORTED, "base uint8 with exponent uint8");
}

/* --- unary math and activations ---------------------------------------------------------- */

static void test_round_half_even_and_sign(void **state)
{
    (void)state;
    float x[8] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4999998f, NAN, -0.0f};
    tcase *c = tc_new("Round", 11, "x", 1);
    tc_input(c, "x", F32, 1, (int64_t[]){8}, x);
    tc_run_ok(c, 1);
    const float *y = c->outputs[0]->data;
    float want[6] = {0, 2, 2, -0.0f, -2, 2};
    assert_memory_equal(y, want, sizeof want);
    assert_true(isnan(y[6]));
    assert_true(y[7] == 0 && signbit(y[7]));
    tc_free_io(c);

    c = tc_new("Sign", 13, "x", 1);
    tc_input(c, "x", F32, 1, (int64_t[]){8}, x);
    tc_run_ok(c, 1);
    y = c->outputs[0]->data;
    assert_true(y[0] == 1 && y[3] == -1 && isnan(y[6]) && y[7] == 0);
    tc_free_io(c);
}

static void test_isinf_detect_flags(void **state)
{
    (void)state;
    float x[4] = {INFINITY, -INFINITY, NAN, 1};
    uint8_t want[4] = {1, 0, 0, 0};
    tcase *c = tc_new("IsInf", 10, "x", 1);
    tc_attr_int(c, "detect_negative", 0);
    tc_input(c, "x", F32, 1, (int64_t[]){4}, x);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], BOOL, want, sizeof want);
    tc_free_io(c);
}

static void test_relu_dtypes(void **state)
{
    (void)state;
    int32_t i[3] = {-3, 0, 4}, iwant[3] = {0, 0, 4};
    tcase *c = tc_new("Relu", 14, "x", 1);
    tc_input(c, "x", I32, 1, (int64_t[]){3}, i);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], I32, iwant, sizeof iwant);
    tc_free_io(c);
    /* float16 through widening: Relu keeps NaN, output stays float16 */
    uint16_t h[3] = {0xBC00, 0x7E00, 0x3C00}, hwant[3] = {0x0000, 0x7E00, 0x3C00};
    c = tc_new("Relu", 14, "x", 1);
    tc_input(c, "x", F16, 1, (int64_t[]){3}, h);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], F16, hwant, sizeof hwant);
    tc_free_io(c);
    uint8_t u[1] = {1};
    c = tc_new("Relu", 14, "x", 1);
    tc_input(c, "x", U8, 1, (int64_t[]){1}, u);
    tc_run_fails(c, LD_ERR_UNSUPPORTED, "dtype uint8 is not supported");
}

static void test_prelu_versions(void **state)
{
    (void)state;
    /* opset 6: slope [C] is per channel of X [N,C,H] */
    float x[8] = {-1, -1, -1, -1, 1, 1, 1, 1}, slope[2] = {2, 3};
    float want[8] = {-2, -2, -3, -3, 1, 1, 1, 1};
    tcase *c = tc_new("PRelu", 6, "x,s", 1);
    tc_input(c, "x", F32, 3, (int64_t[]){2, 2, 2}, x);
    tc_input(c, "s", F32, 1, (int64_t[]){2}, slope);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], F32, want, sizeof want);
    tc_free_io(c);
    /* opset 16: numpy broadcasting, the slope must broadcast to X */
    float wide[3] = {1, 2, 3};
    c = tc_new("PRelu", 16, "x,s", 1);
    tc_input(c, "x", F32, 3, (int64_t[]){2, 2, 2}, x);
    tc_input(c, "s", F32, 1, (int64_t[]){3}, wide);
    tc_run_fails(c, LD_ERR_INPUT, "cannot be broadcast");
    float big[16] = {0};
    c = tc_new("PRelu", 16, "x,s", 1);
    tc_input(c, "x", F32, 1, (int64_t[]){2}, x);
    tc_input(c, "s", F32, 2, (int64_t[]){8, 2}, big);
    tc_run_fails(c, LD_ERR_INPUT, "does not broadcast to X");
}

static void test_clip_versions(void **state)
{
    (void)state;
    /* opset 13 integers, min > max gives max everywhere */
    int64_t x[3] = {-5, 0, 5}, lo = 3, hi = 1, want[3] = {1, 1, 1};
    tcase *c = tc_new("Clip", 13, "x,lo,hi", 1);
    tc_input(c, "x", I64, 1, (int64_t[]){3}, x);
    tc_init(c, "lo", I64, 0, NULL, &lo, sizeof lo);
    tc_init(c, "hi", I64, 0, NULL, &hi, sizeof hi);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], I64, want, sizeof want);
    tc_free_io(c);
    /* opset 13, only max given (min omitted) */
    float f[3] = {-INFINITY, 0.5f, INFINITY}, fhi = 0.25f;
    c = tc_new("Clip", 13, "x,,hi", 1);
    tc_input(c, "x", F32, 1, (int64_t[]){3}, f);
    tc_init(c, "hi", F32, 0, NULL, &fhi, sizeof fhi);
    tc_run_ok(c, 1);
    const float *y = c->outputs[0]->data;
    assert_true(y[0] == -3.40282347e38f && y[1] == 0.25f && y[2] == 0.25f);
    tc_free_io(c);
    /* opset 6 attributes */
    c = tc_new("Clip", 6, "x", 1);
    tc_attr_float(c, "min", -1);
    tc_input(c, "x", F32, 1, (int64_t[]){3}, f);
    tc_run_ok(c, 1);
    y = c->outputs[0]->data;
    assert_true(y[0] == -1 && y[1] == 0.5f && y[2] == 3.40282347e38f);
    tc_free_io(c);
    /* a bound that is not a scalar */
    float two[2] = {0, 1};
    c = tc_new("Clip", 13, "x,lo", 1);
    tc_input(c, "x", F32, 1, (int64_t[]){3}, f);
    tc_init(c, "lo", F32, 1, (int64_t[]){2}, two, sizeof two);
    tc_run_fails(c, LD_ERR_INPUT, "min must be a scalar");
}

static void test_dropout_modes(void **state)
{
    (void)state;
    float x[3] = {1, 2, 3};
    uint8_t ones[3] = {1, 1, 1}, yes = 1;
    float ratio0 = 0, ratio5 = 0.5f;
    /* inference: identity and an all-true mask */
    tcase *c = tc_new("Dropout", 13, "x", 2);
    tc_input(c, "x", F32, 1, (int64_t[]){3}, x);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], F32, x, sizeof x);
    expect_bytes(c->outputs[1], BOOL, ones, sizeof ones);
    tc_free_io(c);
    /* training with ratio 0 is still the identity */
    c = tc_new("Dropout", 13, "x,r,t", 2);
    tc_input(c, "x", F32, 1, (int64_t[]){3}, x);
    tc_init(c, "r", F32, 0, NULL, &ratio0, sizeof ratio0);
    tc_init(c, "t", BOOL, 0, NULL, &yes, 1);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], F32, x, sizeof x);
    tc_free_io(c);
    c = tc_new("Dropout", 13, "x,r,t", 1);
    tc_input(c, "x", F32, 1, (int64_t[]){3}, x);
    tc_init(c, "r", F32, 0, NULL, &ratio5, sizeof ratio5);
    tc_init(c, "t", BOOL, 0, NULL, &yes, 1);
    tc_run_fails(c, LD_ERR_UNSUPPORTED, "training mode");
    /* opset 7: the mask has the data's type */
    float fones[3] = {1, 1, 1};
    c = tc_new("Dropout", 7, "x", 2);
    tc_input(c, "x", F32, 1, (int64_t[]){3}, x);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[1], F32, fones, sizeof fones);
    tc_free_io(c);
}

/* --- Cast --------------------------------------------------------------------------------- */

static tcase *cast_case(ld_dtype from, ld_dtype to, int64_t n, const void *data)
{
    tcase *c = tc_new("Cast", 13, "x", 1);
    tc_attr_int(c, "to", to);
    tc_input(c, "x", from, 1, &n, data);
    tc_run_ok(c, 1);
    return c;
}

static void test_cast_float_to_half_rne(void **state)
{
    (void)state;
    /* ties to even at 1 + 2^-11 (down) and 1 + 3*2^-11 (up); just above a
     * tie rounds up; 65520 overflows; the smallest subnormal half of 2^-24
     * rounds to 0 (tie to even) */
    float f[6] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-11f + 0x1p-23f,
                  65520.0f, 0x1p-25f, -0x1p-24f};
    uint16_t want[6] = {0x3C00, 0x3C02, 0x3C01, 0x7C00, 0x0000, 0x8001};
    tcase *c = cast_case(F32, F16, 6, f);
    expect_bytes(c->outputs[0], F16, want, sizeof want);
    tc_free_io(c);
    /* float64: rounding via float32 would tie (1 + 2^-11 + 2^-40 rounds to
     * 1 + 2^-11 in float32, then down to 1): exact rounding goes up */
    double d[3] = {1.0 + 0x1p-11 + 0x1p-40, 1e300, -1e-300};
    uint16_t dwant[3] = {0x3C01, 0x7C00, 0x8000};
    c = cast_case(F64, F16, 3, d);
    expect_bytes(c->outputs[0], F16, dwant, sizeof dwant);
    tc_free_io(c);
    /* bfloat16 from float32 rounds to nearest even, from float64 once */
    float bf[2] = {1.0f + 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f};
    uint16_t bwant[2] = {0x3F80, 0x3F81};
    c = cast_case(F32, BF16, 2, bf);
    expect_bytes(c->outputs[0], BF16, bwant, sizeof bwant);
    tc_free_io(c);
    double bd[1] = {1.0 + 0x1p-8 + 0x1p-40};
    c = cast_case(F64, BF16, 1, bd);
    expect_bytes(c->outputs[0], BF16, bwant + 1, 2);
    tc_free_io(c);
}

static void test_cast_integers(void **state)
{
    (void)state;
    /* int64 -> bfloat16 rounds once: 2^40 + 2^32 + 1 is just above a tie */
    int64_t i[3] = {((int64_t)1 << 40) + ((int64_t)1 << 32) + 1, -257, 0};
    uint16_t iwant[3] = {0x5381, 0xC380, 0x0000}; /* -257 ties to -256 */
    tcase *c = cast_case(I64, BF16, 3, i);
    expect_bytes(c->outputs[0], BF16, iwant, sizeof iwant);
    tc_free_io(c);
    /* float -> int: truncation; NaN and out of range as x86 converts */
    float f[5] = {-2.9f, 2.9f, NAN, 3e9f, -3e9f};
    int32_t want32[5] = {-2, 2, INT32_MIN, INT32_MIN, INT32_MIN};
    c = cast_case(F32, I32, 5, f);
    expect_bytes(c->outputs[0], I32, want32, sizeof want32);
    tc_free_io(c);
    /* narrowing integers keep the low bits; to bool is non-zero (NaN too) */
    int32_t w[3] = {300, -1, 128};
    uint8_t want8[3] = {44, 255, 128};
    c = cast_case(I32, U8, 3, w);
    expect_bytes(c->outputs[0], U8, want8, sizeof want8);
    tc_free_io(c);
    float b[3] = {0.0f, -0.0f, NAN};
    uint8_t wantb[3] = {0, 0, 1};
    c = cast_case(F32, BOOL, 3, b);
    expect_bytes(c->outputs[0], BOOL, wantb, sizeof wantb);
    tc_free_io(c);
    uint8_t bools[2] = {0, 1};
    double wantd[2] = {0, 1};
    c = cast_case(BOOL, F64, 2, bools);
    expect_bytes(c->outputs[0], F64, wantd, sizeof wantd);
    tc_free_io(c);
}

static void test_cast_attribute_forms(void **state)
{
    (void)state;
    /* Cast-1 names the type as a string */
    float f[2] = {1.5f, -2.5f};
    double want[2] = {1.5, -2.5};
    tcase *c = tc_new("Cast", 1, "x", 1);
    tc_attr_string(c, "to", "DOUBLE");
    tc_input(c, "x", F32, 1, (int64_t[]){2}, f);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], F64, want, sizeof want);
    tc_free_io(c);
    c = tc_new("Cast", 13, "x", 1);
    tc_attr_int(c, "to", LD_DTYPE_STRING);
    tc_input(c, "x", F32, 1, (int64_t[]){2}, f);
    tc_run_fails(c, LD_ERR_UNSUPPORTED, "to string");
    c = tc_new("Cast", 13, "x", 1);
    tc_attr_int(c, "to", 99);
    tc_input(c, "x", F32, 1, (int64_t[]){2}, f);
    tc_run_fails(c, LD_ERR_INPUT, "not a data type");
    /* CastLike takes the type of its second input */
    int8_t like = 0;
    int8_t iwant[2] = {1, -2};
    c = tc_new("CastLike", 15, "x,l", 1);
    tc_input(c, "x", F32, 1, (int64_t[]){2}, f);
    tc_input(c, "l", I8, 0, NULL, &like);
    tc_run_ok(c, 1);
    expect_bytes(c->outputs[0], I8, iwant, sizeof iwant);
    tc_free_io(c);
}

/* --- comparisons and logic --------------------------------------------------------------- */

static void test_comparisons_and_logic(void **state)
{
    (void)state;
    /* float16 compared through exact widening; NaN compares false */
    uint16_t a[3] = {0x3C00, 0x7E00, 0xC000}, b[3] = {0x3C01, 0x7E00, 0xC000};
    uint8_t lt[3] = {1, 0, 0}, le[3] = {1, 0, 1}, eq[3] = {0, 0, 1};
    const char *ops[3] = {"Less", "LessOrEqual", "Equal"};
    const uint8_t *wants[3] = {lt, le, eq};
    for (int k = 0; k < 3; k++) {
        tcase *c = tc_new(ops[k], 16, "a,b", 1);
        tc_input(c, "a", F16, 1, (int64_t[]){3}, a);
        tc_input(c, "b", F16, 1, (int64_t[]){3}, b);
        tc_run_ok(c, 1);
        expect_bytes(c->outputs[0], BOOL, wants[k], 3);
        tc_free_io(c);
    }
    uint8_t p[4] = {0, 0, 1, 1}, q[4] = {0, 1, 0, 1};
    uint8_t and_w[4] = {0, 0, 0, 1}, or_w[4] = {0, 1, 1, 1}, xor_w[4] = {0, 1, 1, 0};
    const char *lops[3] = {"And", "Or", "Xor"};
    const uint8_t *lwants[3] = {and_w, or_w, xor_w};
    for (int k = 0; k < 3; k++) {
        tcase *c = tc_new(lops[k], 7, "p,q", 1);
        tc_input(c, "p", BOOL, 1, (int64_t[]){4}, p);
        tc_input(c, "q", BOOL, 1, (int64_t[]){4}, q);
        tc_run_ok(c, 1);
        expect_bytes(c->outputs[0], BOOL, lwants[k], 4);
        tc_free_io(c);
    }
    float f[4] = {0};
    tcase *c = tc_new("And", 7, "p,q", 1);
    tc_input(c, "p", F32, 1, (int64_t[]){4}, f);
    tc_input(c, "q", F32, 1, (int64_t[]){4}, f);
    tc_run_fails(c, LD_ERR_UNSUPPORTED, "dtype float32");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_broadcast_shapes_and_values),
        T(test_broadcast_incompatible_names_node),
        T(test_parallel_paths_match_naive),
        T(test_variadic_many_inputs),
        T(test_max_min_nan_and_ints),
        T(test_where_three_way_native_types),
        T(test_legacy_broadcast),
        T(test_integer_arithmetic_edges),
        T(test_mod_signs),
        T(test_bitshift_width),
        T(test_pow_mixed_types),
        T(test_round_half_even_and_sign),
        T(test_isinf_detect_flags),
        T(test_relu_dtypes),
        T(test_prelu_versions),
        T(test_clip_versions),
        T(test_dropout_modes),
        T(test_cast_float_to_half_rne),
        T(test_cast_integers),
        T(test_cast_attribute_forms),
        T(test_comparisons_and_logic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
