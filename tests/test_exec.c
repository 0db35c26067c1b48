/* Tests of the graph executor (backends/exec.c): the order and content of
 * observer events, liveness (peak memory on a long chain), graph outputs
 * read later, values read twice, omitted optional inputs and outputs,
 * deferred outputs, input checks, unsupported operators, the float16
 * widening of WIDEN_HALF kernels, backend hooks, Constant nodes folded
 * (their attribute shown, not copied), and failures in the middle
 * of a run (everything freed: the test runs under ASan's leak checker).
 *
 * Graphs are ONNX models built with tests/support/onnx_builder. Tests that
 * need a kernel family written elsewhere skip (with a message) while that
 * kernel is missing from the registry. */
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
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* Skips the test unless the registry has op_type at opset 17. */
#define NEED_KERNEL(op)                                                                   \
    do {                                                                                  \
        if (!ld_kernel_find("", op, 17)) {                                                \
            print_message("  skipped: no %s kernel in the registry yet\n", op);           \
            skip();                                                                       \
        }                                                                                 \
    } while (0)

/* --- recording observer ------------------------------------------------------------- */

enum { MAX_EVENTS = 256 };

typedef struct recorded {
    char value[64];       /* graph value name */
    char node[64];        /* "" for graph inputs */
    int output_index;
    ld_dtype dtype;
    ld_shape shape;
    double first;         /* element 0 (NaN when empty) */
    double sum;
    ld_precision precision;
    ld_layer_counters counters;
} recorded;

typedef struct recorder {
    recorded events[MAX_EVENTS];
    int n;
    int fail_at;          /* return an error on this event (-1: never) */
} recorder;

static ld_status record(void *user, const ld_tensor_event *ev, ld_error *err)
{
    recorder *r = user;
    assert_true(r->n < MAX_EVENTS);
    recorded *e = &r->events[r->n];
    const char *name = ev->graph->values[ev->value].name;
    snprintf(e->value, sizeof e->value, "%s", name);
    snprintf(e->node, sizeof e->node, "%s", ev->node ? ev->node->name : "");
    assert_string_equal(ev->tensor->name, name);
    if (ev->node)
        assert_int_equal(ev->node->outputs[ev->output_index], ev->value);
    e->output_index = ev->output_index;
    e->dtype = ev->tensor->dtype;
    e->shape = ev->tensor->shape;
    e->first = ev->tensor->count ? ld_tensor_get_double(ev->tensor, 0) : NAN;
    e->sum = 0;
    for (int64_t i = 0; i < ev->tensor->count; i++)
        e->sum += ld_tensor_get_double(ev->tensor, i);
    e->precision = ev->precision;
    e->counters = ev->counters;
    if (r->n++ == r->fail_at)
        return ld_error_set(err, LD_ERR_IO, "observer failed on '%s'", name);
    return LD_OK;
}

static void expect_events(const recorder *r, const char *const *values, int n)
{
    for (int i = 0; i < r->n && i < n; i++)
        if (strcmp(r->events[i].value, values[i]) != 0)
            fail_msg("event %d is '%s', expected '%s'", i, r->events[i].value, values[i]);
    assert_int_equal(r->n, n);
}

/* --- helpers ------------------------------------------------------------------------ */

static ld_exec *create_ok(const ld_graph *g)
{
    ld_exec *e = NULL;
    ld_error err;
    ld_exec_config cfg = {.threads = 1};
    if (ld_exec_create(&e, g, &cfg, &err) != LD_OK)
        fail_msg("create failed: %s", err.message);
    return e;
}

static ld_tensor *tensor(const char *name, ld_dtype dtype, int rank, const int64_t *dims)
{
    ld_shape shape;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, rank, dims, &err), LD_OK);
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_create(&t, name, dtype, &shape, &err), LD_OK);
    return t;
}

/* float32 tensor holding start, start+1, ... */
static ld_tensor *ramp(const char *name, int rank, const int64_t *dims, float start)
{
    ld_tensor *t = tensor(name, LD_DTYPE_FLOAT32, rank, dims);
    for (int64_t i = 0; i < t->count; i++)
        ((float *)t->data)[i] = start + (float)i;
    return t;
}

static void run_ok(ld_exec *e, const ld_tensor *const *inputs, recorder *r)
{
    ld_error err;
    if (r) {
        r->n = 0;
        r->fail_at = -1;
    }
    if (ld_exec_run(e, inputs, r ? record : NULL, r, &err) != LD_OK)
        fail_msg("run failed: %s", err.message);
}

static void add_int64_init(Onnx__GraphProto *g, const char *name, int rank, const int64_t *dims,
                           const int64_t *values, size_t n)
{
    Onnx__TensorProto *t = ob_tensor(name, INT64, rank, dims);
    ob_set_raw(t, values, n * sizeof *values);
    OB_PUSH(g->initializer, g->n_initializer, t);
}

static void add_float_scalar(Onnx__GraphProto *g, const char *name, int dtype, float value)
{
    Onnx__TensorProto *t = ob_tensor(name, dtype, 0, NULL);
    if (dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16) {
        ld_fp16 h = ld_fp32_to_fp16(value);
        ob_set_raw(t, &h, sizeof h);
    } else {
        ob_set_raw(t, &value, sizeof value);
    }
    OB_PUSH(g->initializer, g->n_initializer, t);
}

/* --- order ---------------------------------------------------------------------------- */

static void test_observer_order(void **state)
{
    (void)state;
    NEED_KERNEL("Split");
    NEED_KERNEL("Concat");
    /* Listed out of order: the loader sorts topologically. */
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {2, 3};
    ob_input(m->graph, "a", FLOAT, 2, d);
    ob_input(m->graph, "b", FLOAT, 2, d);
    Onnx__NodeProto *cat = ob_node(m->graph, "Concat", "cat", "s1,b_id,s0", "out");
    ob_attr(cat, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->i = 0;
    Onnx__NodeProto *split = ob_node(m->graph, "Split", "split", "a_id", "s0,s1");
    ob_attr(split, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->i = 0;
    ob_node(m->graph, "Identity", "id_b", "b", "b_id");
    ob_node(m->graph, "Identity", "id_a", "a", "a_id");
    ob_output(m->graph, "out", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    ld_tensor *a = ramp("a", 2, d, 0), *b = ramp("b", 2, d, 100);
    const ld_tensor *in[] = {a, b};
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, in, r);
    /* Inputs first, then every node output once, in the graph's topological order. */
    const char *want[] = {"a", "b", "b_id", "a_id", "s0", "s1", "out"};
    expect_events(r, want, 7);
    assert_string_equal(r->events[0].node, "");
    assert_string_equal(r->events[4].node, "split");
    assert_int_equal(r->events[4].output_index, 0);
    assert_int_equal(r->events[5].output_index, 1);
    assert_int_equal(r->events[5].shape.dims[0], 1);
    assert_true(r->events[5].first == 3.0);
    assert_int_equal(r->events[6].shape.dims[0], 4); /* s1 (1) + b (2) + s0 (1) */
    assert_true(r->events[6].first == 3.0);
    for (int i = 2; i < 7; i++)
        assert_int_equal(r->events[i].precision, LD_PRECISION_FP32);
    /* The executor is reusable and gives the same events again. */
    run_ok(e, in, r);
    expect_events(r, want, 7);
    free(r);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

/* --- liveness ---------------------------------------------------------------------- */

static void test_chain_peak_is_two_tensors(void **state)
{
    (void)state;
    enum { N = 64, COUNT = 1 << 18 }; /* 1 MiB per tensor */
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *gp = m->graph;
    int64_t dims[] = {COUNT};
    ob_input(gp, "t0", FLOAT, 1, dims);
    gp->node = ob_mem(N * sizeof *gp->node);
    Onnx__GraphProto *scratch = ob_graph("scratch"); /* ob_node pushes at most OB_CAP */
    for (int i = 0; i < N; i++) {
        char ins[16], outs[16], name[16];
        snprintf(ins, sizeof ins, "t%d", i);
        snprintf(outs, sizeof outs, "t%d", i + 1);
        snprintf(name, sizeof name, "n%d", i);
        scratch->n_node = 0;
        gp->node[i] = ob_node(scratch, "Identity", name, ins, outs);
    }
    gp->n_node = N;
    ob_output(gp, "t64", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    ld_tensor *x = ramp("t0", 1, dims, 1);
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, in, r);
    assert_int_equal(r->n, N + 1);
    assert_true(r->events[N].first == 1.0);
    size_t one = (size_t)COUNT * sizeof(float);
    size_t peak = ld_exec_peak_bytes(e);
    /* Each node holds its input and its output; the graph input is the
     * caller's and not counted. Without liveness this would be N tensors. */
    if (peak < one || peak > 2 * one)
        fail_msg("peak %zu bytes, expected between %zu and %zu", peak, one, 2 * one);
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

static void test_graph_output_read_later(void **state)
{
    (void)state;
    NEED_KERNEL("Concat");
    /* y is a graph output and read again two nodes later. */
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {1024};
    ob_input(m->graph, "x", FLOAT, 1, d);
    ob_node(m->graph, "Identity", "make_y", "x", "y");
    ob_node(m->graph, "Identity", "mid", "y", "z");
    ob_node(m->graph, "Identity", "mid2", "z", "w");
    Onnx__NodeProto *cat = ob_node(m->graph, "Concat", "late", "w,y", "out");
    ob_attr(cat, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->i = 0;
    ob_output(m->graph, "y", FLOAT);
    ob_output(m->graph, "out", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    ld_tensor *x = ramp("x", 1, d, 0);
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, in, r);
    const char *want[] = {"x", "y", "z", "w", "out"};
    expect_events(r, want, 5);
    double ramp_sum = 1023.0 * 1024.0 / 2.0;
    assert_true(r->events[1].sum == ramp_sum);
    assert_true(r->events[4].sum == 2 * ramp_sum); /* y was intact when `late` read it */
    /* y, z (until mid2), then y, w and out: at most three 4 KiB tensors. */
    assert_true(ld_exec_peak_bytes(e) <= 3 * 4096 + 2 * 4096);
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

static void test_value_read_twice(void **state)
{
    (void)state;
    NEED_KERNEL("Concat");
    NEED_KERNEL("Add");
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {4};
    ob_input(m->graph, "x", FLOAT, 1, d);
    ob_node(m->graph, "Identity", "id", "x", "t");
    ob_node(m->graph, "Add", "twice", "t,t", "u");            /* t's last reader reads it twice */
    Onnx__NodeProto *cat = ob_node(m->graph, "Concat", "cat", "u,u,x,x", "v");
    ob_attr(cat, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->i = 0;
    ob_output(m->graph, "v", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    ld_tensor *x = ramp("x", 1, d, 1); /* 1 2 3 4 */
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    for (int pass = 0; pass < 2; pass++) {
        run_ok(e, in, r);
        assert_int_equal(r->n, 4);
        assert_true(r->events[2].sum == 20.0);
        assert_true(r->events[3].sum == 2 * 20.0 + 2 * 10.0);
        assert_int_equal(r->events[3].shape.dims[0], 16);
    }
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

/* --- optional and deferred ------------------------------------------------------------- */

static void test_omitted_optional_inputs_and_outputs(void **state)
{
    (void)state;
    NEED_KERNEL("Clip");
    NEED_KERNEL("Dropout");
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {6};
    ob_input(m->graph, "x", FLOAT, 1, d);
    add_float_scalar(m->graph, "hi", FLOAT, 2.5f);
    ob_node(m->graph, "Clip", "clip", "x,,hi", "c");   /* min omitted */
    ob_node(m->graph, "Dropout", "drop", "c", "y,");   /* mask omitted */
    ob_node(m->graph, "Dropout", "drop2", "y", "z,mask");
    ob_output(m->graph, "z", FLOAT);
    ob_output(m->graph, "mask", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL);
    ld_graph *g = ob_load_ok(m);
    assert_int_equal(g->nodes[0].inputs[1], -1);
    assert_int_equal(g->nodes[1].outputs[1], -1);
    ld_exec *e = create_ok(g);
    ld_tensor *x = ramp("x", 1, d, -2); /* -2 .. 3 */
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, in, r);
    const char *want[] = {"x", "c", "y", "z", "mask"};
    expect_events(r, want, 5);
    assert_true(r->events[1].sum == -2 - 1 + 0 + 1 + 2 + 2.5);
    assert_int_equal(r->events[4].dtype, LD_DTYPE_BOOL);
    assert_true(r->events[4].sum == 6);
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

static void test_deferred_output(void **state)
{
    (void)state;
    NEED_KERNEL("NonZero");
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {2, 3};
    ob_input(m->graph, "x", FLOAT, 2, d);
    ob_node(m->graph, "NonZero", "nz", "x", "idx");
    ob_output(m->graph, "idx", INT64);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    ld_tensor *x = ramp("x", 2, d, -1); /* one zero at (0, 1) */
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, in, r);
    assert_int_equal(r->n, 2);
    assert_int_equal(r->events[1].dtype, LD_DTYPE_INT64);
    assert_int_equal(r->events[1].shape.dims[0], 2);
    assert_int_equal(r->events[1].shape.dims[1], 5);
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

/* --- inputs ----------------------------------------------------------------------------- */

static void expect_run_error(ld_exec *e, const ld_tensor *const *in, ld_status want,
                             const char *text)
{
    ld_error err;
    recorder *r = calloc(1, sizeof *r);
    r->fail_at = -1;
    ld_status st = ld_exec_run(e, in, record, r, &err);
    if (st != want || !strstr(err.message, text))
        fail_msg("status %s '%s', expected %s with '%s'", ld_status_name(st),
                 st ? err.message : "", ld_status_name(want), text);
    assert_null(strchr(err.message, '\n'));
    assert_int_equal(r->n, 0); /* nothing was observed: the check comes first */
    free(r);
}

static void test_input_checks(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    int64_t dx[] = {-1, 3}, dy[] = {2, 3};
    ob_input(m->graph, "x", FLOAT, 2, dx); /* N x 3 */
    ob_input(m->graph, "y", INT64, 2, dy);
    ob_node(m->graph, "Identity", "a", "x", "xo");
    ob_node(m->graph, "Identity", "b", "y", "yo");
    ob_output(m->graph, "xo", FLOAT);
    ob_output(m->graph, "yo", INT64);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    int64_t d5[] = {5, 3}, d7[] = {7, 3}, bad[] = {2, 4}, flat[] = {6};
    ld_tensor *x5 = ramp("x", 2, d5, 0), *x7 = ramp("x", 2, d7, 0);
    ld_tensor *y = tensor("y", LD_DTYPE_INT64, 2, dy);
    ld_tensor *y_f = tensor("y", LD_DTYPE_FLOAT32, 2, dy);
    ld_tensor *y_bad = tensor("y", LD_DTYPE_INT64, 2, bad);
    ld_tensor *y_flat = tensor("y", LD_DTYPE_INT64, 1, flat);
    ld_tensor *x_bad = ramp("x", 2, bad, 0);
    /* Symbolic dims take any value, run after run. */
    const ld_tensor *ok5[] = {x5, y}, *ok7[] = {x7, y};
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, ok5, r);
    assert_int_equal(r->events[2].shape.dims[0], 5);
    run_ok(e, ok7, r);
    assert_int_equal(r->events[2].shape.dims[0], 7);
    const ld_tensor *wrong_type[] = {x5, y_f}, *wrong_shape[] = {x5, y_bad};
    const ld_tensor *wrong_rank[] = {x5, y_flat}, *wrong_fixed[] = {x_bad, y};
    const ld_tensor *missing[] = {x5, NULL};
    expect_run_error(e, wrong_type, LD_ERR_INPUT,
                     "input 'y': the model expects int64, got float32");
    expect_run_error(e, wrong_shape, LD_ERR_INPUT,
                     "input 'y': the model expects shape 2x3, got 2x4");
    expect_run_error(e, wrong_rank, LD_ERR_INPUT, "input 'y': the model expects shape 2x3, got 6");
    expect_run_error(e, wrong_fixed, LD_ERR_INPUT,
                     "input 'x': the model expects shape Nx3, got 2x4");
    expect_run_error(e, missing, LD_ERR_INPUT, "input 'y': no tensor given");
    run_ok(e, ok5, r); /* still usable after failed runs */
    free(r);
    ld_tensor *all[] = {x5, x7, y, y_f, y_bad, y_flat, x_bad};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ld_tensor_destroy(all[i]);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

/* --- unsupported operators --------------------------------------------------------------- */

static void test_unsupported_op_fails_at_create(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    ob_opset(m, "com.example", 3);
    int64_t d[] = {2};
    ob_input(m->graph, "x", FLOAT, 1, d);
    ob_node(m->graph, "Identity", "first", "x", "a");
    ob_node(m->graph, "FancyOp", "fancy", "a", "b");
    ob_output(m->graph, "b", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = NULL;
    ld_error err;
    assert_int_equal(ld_exec_create(&e, g, NULL, &err), LD_ERR_UNSUPPORTED);
    assert_null(e);
    assert_string_equal(err.message, "node 'fancy': operator FancyOp (opset 17) is not supported");
    ld_graph_destroy(g);

    Onnx__NodeProto *n = m->graph->node[1];
    n->domain = ob_str("com.example");
    n->op_type = ob_str("Frob");
    g = ob_load_ok(m);
    assert_int_equal(ld_exec_create(&e, g, NULL, &err), LD_ERR_UNSUPPORTED);
    assert_string_equal(err.message,
                        "node 'fancy': operator com.example.Frob (opset 3) is not supported");
    /* Through the backend interface: prepare fails, nothing runs. */
    const ld_backend_vtable *vt = ld_backend_find("reference");
    assert_non_null(vt);
    void *b = NULL;
    assert_int_equal(vt->create(&b, NULL, &err), LD_OK);
    assert_int_equal(vt->prepare(b, g, NULL, &err), LD_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "com.example.Frob"));
    ld_tensor *x = ramp("x", 1, d, 0);
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    r->fail_at = -1;
    assert_int_equal(vt->run(b, in, record, r, &err), LD_ERR_INTERNAL);
    assert_int_equal(r->n, 0);
    free(r);
    vt->destroy(b);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

/* --- float16 through a widened kernel ------------------------------------------------------ */

static void test_widen_half(void **state)
{
    (void)state;
    NEED_KERNEL("Relu");
    NEED_KERNEL("Clip");
    const ld_kernel *k = ld_kernel_find("", "Relu", 17);
    assert_true(k->flags & LD_KERNEL_WIDEN_HALF);
    static const int types[] = {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16,
                                ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16};
    for (int t = 0; t < 2; t++) {
        ld_dtype dt = t == 0 ? LD_DTYPE_FLOAT16 : LD_DTYPE_BFLOAT16;
        Onnx__ModelProto *m = ob_model();
        int64_t d[] = {8};
        ob_input(m->graph, "x", types[t], 1, d);
        ob_node(m->graph, "Relu", "relu", "x", "y");
        ob_node(m->graph, "Identity", "id", "y", "z");
        ob_output(m->graph, "z", types[t]);
        ld_graph *g = ob_load_ok(m);
        ld_exec *e = create_ok(g);
        ld_tensor *x = tensor("x", dt, 1, d);
        float src[8] = {-1.5f, -0.0f, 0.1f, 1.0f / 3.0f, 2.0f, 65504.0f, 1e-7f, -3e4f};
        for (int i = 0; i < 8; i++) {
            if (dt == LD_DTYPE_FLOAT16)
                ((ld_fp16 *)x->data)[i] = ld_fp32_to_fp16(src[i]);
            else
                ((ld_bf16 *)x->data)[i] = ld_fp32_to_bf16(src[i]);
        }
        const ld_tensor *in[] = {x};
        recorder *r = calloc(1, sizeof *r);
        run_ok(e, in, r);
        assert_int_equal(r->n, 3);
        /* Narrowed back to the input's type, values exactly relu(x). */
        assert_int_equal(r->events[1].dtype, dt);
        assert_int_equal(r->events[2].dtype, dt);
        double want = 0;
        for (int i = 0; i < 8; i++) {
            double v = ld_tensor_get_double(x, i);
            want += v > 0 ? v : 0;
        }
        assert_true(r->events[1].sum == want);
        /* The widened scratch copy counts towards the peak: x (not counted)
         * -> fp32 copy (32 B) + fp32 output (32 B) + fp16 output. */
        assert_true(ld_exec_peak_bytes(e) >= 64);
        free(r);
        ld_tensor_destroy(x);
        ld_exec_destroy(e);
        ld_graph_destroy(g);
    }
    /* Several half inputs (Clip with float16 bounds) are all widened. */
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {4};
    ob_input(m->graph, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, 1, d);
    add_float_scalar(m->graph, "lo", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, -0.5f);
    add_float_scalar(m->graph, "hi", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, 1.25f);
    ob_node(m->graph, "Clip", "clip", "x,lo,hi", "y");
    ob_output(m->graph, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    ld_tensor *x = tensor("x", LD_DTYPE_FLOAT16, 1, d);
    float src[4] = {-2, 0.5f, 1, 7};
    for (int i = 0; i < 4; i++)
        ((ld_fp16 *)x->data)[i] = ld_fp32_to_fp16(src[i]);
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, in, r);
    assert_int_equal(r->events[1].dtype, LD_DTYPE_FLOAT16);
    assert_true(r->events[1].sum == -0.5 + 0.5 + 1 + 1.25);
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

/* --- hooks ------------------------------------------------------------------------------- */

static ld_status hook_numerics(void *user, const ld_node *node, ld_layer_numerics *out,
                               ld_error *err)
{
    (void)user, (void)err;
    out->precision = strcmp(node->op_type, "Identity") == 0 ? LD_PRECISION_FP16
                                                            : LD_PRECISION_FP32;
    return LD_OK;
}

/* Replaces input 0 by a scratch copy plus 10. */
static ld_status hook_before(void *user, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                             ld_error *err)
{
    (void)err;
    int *calls = user;
    calls[0]++;
    ld_tensor *copy = NULL;
    ld_status st = ld_exec_scratch_clone(ctx, inputs[0], &copy);
    if (st != LD_OK)
        return st;
    for (int64_t i = 0; i < copy->count; i++)
        ((float *)copy->data)[i] += 10;
    inputs[0] = copy;
    return LD_OK;
}

static ld_status hook_after(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                            ld_layer_counters *counters, ld_error *err)
{
    (void)err;
    int *calls = user;
    calls[1]++;
    assert_int_equal(ctx->numerics->precision, LD_PRECISION_FP16);
    ((float *)outputs[0]->data)[0] = -1;
    counters->present = true;
    counters->overflows = 7;
    return LD_OK;
}

static void test_hooks(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {3};
    ob_input(m->graph, "x", FLOAT, 1, d);
    ob_node(m->graph, "Identity", "id", "x", "y");
    ob_output(m->graph, "y", FLOAT);
    ld_graph *g = ob_load_ok(m);
    int calls[2] = {0, 0};
    ld_exec_hooks hooks = {calls, hook_numerics, hook_before, hook_after, NULL, NULL, NULL};
    ld_exec_config cfg = {.threads = 1, .hooks = &hooks};
    ld_exec *e = NULL;
    ld_error err;
    assert_int_equal(ld_exec_create(&e, g, &cfg, &err), LD_OK);
    assert_int_equal(ld_exec_node_numerics(e, 0)->precision, LD_PRECISION_FP16);
    ld_tensor *x = ramp("x", 1, d, 0);
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, in, r);
    assert_int_equal(calls[0], 1);
    assert_int_equal(calls[1], 1);
    assert_true(r->events[1].sum == -1 + 11 + 12);
    assert_int_equal(r->events[1].precision, LD_PRECISION_FP16);
    assert_true(r->events[1].counters.present);
    assert_int_equal(r->events[1].counters.overflows, 7);
    assert_false(r->events[0].counters.present);
    assert_true(((float *)x->data)[0] == 0); /* the caller's input is untouched */
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

/* --- failures mid-run ------------------------------------------------------------------------- */

static void test_observer_error_stops_the_run(void **state)
{
    (void)state;
    enum { N = 10 };
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {1000};
    ob_input(m->graph, "t0", FLOAT, 1, d);
    for (int i = 0; i < N; i++) {
        char ins[16], outs[16], name[16];
        snprintf(ins, sizeof ins, "t%d", i);
        snprintf(outs, sizeof outs, "t%d", i + 1);
        snprintf(name, sizeof name, "n%d", i);
        ob_node(m->graph, "Identity", name, ins, outs);
    }
    ob_output(m->graph, "t10", FLOAT);
    ob_output(m->graph, "t3", FLOAT); /* live when the run stops */
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    ld_tensor *x = ramp("t0", 1, d, 0);
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    for (int fail_at = 0; fail_at <= N; fail_at++) {
        r->n = 0;
        r->fail_at = fail_at;
        ld_error err;
        assert_int_equal(ld_exec_run(e, in, record, r, &err), LD_ERR_IO);
        assert_int_equal(r->n, fail_at + 1); /* nothing after the failing event */
        char want[64];
        snprintf(want, sizeof want, "observer failed on 't%d'", fail_at);
        assert_string_equal(err.message, want);
    }
    run_ok(e, in, r); /* and the executor still works */
    assert_int_equal(r->n, N + 1);
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e); /* LeakSanitizer checks nothing was left behind */
    ld_graph_destroy(g);
}

static void test_kernel_error_mid_run(void **state)
{
    (void)state;
    NEED_KERNEL("Reshape");
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {6}, sd[] = {2}, shape[] = {4, 2};
    ob_input(m->graph, "x", FLOAT, 1, d);
    add_int64_init(m->graph, "shape", 1, sd, shape, 2);
    ob_node(m->graph, "Identity", "a", "x", "y");
    ob_node(m->graph, "Reshape", "bad_reshape", "y,shape", "z");
    ob_output(m->graph, "y", FLOAT);
    ob_output(m->graph, "z", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g);
    ld_tensor *x = ramp("x", 1, d, 0);
    const ld_tensor *in[] = {x};
    recorder *r = calloc(1, sizeof *r);
    r->fail_at = -1;
    ld_error err;
    assert_int_not_equal(ld_exec_run(e, in, record, r, &err), LD_OK);
    assert_non_null(strstr(err.message, "bad_reshape"));
    assert_int_equal(r->n, 2); /* x and y were observed, z never */
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

/* Records the data pointer of the tensor shown for value "c". */
static ld_status catch_constant(void *user, const ld_tensor_event *ev, ld_error *err)
{
    (void)err;
    if (strcmp(ev->graph->values[ev->value].name, "c") == 0) {
        assert_string_equal(ev->tensor->name, "c");
        assert_true(((const float *)ev->tensor->data)[3] == 40.0f);
        *(const void **)user = ev->tensor->data;
    }
    return LD_OK;
}

/* Counts the nodes it is called for (user: an int). */
static ld_status after_nothing(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                               ld_layer_counters *counters, ld_error *err)
{
    (void)ctx, (void)outputs, (void)counters, (void)err;
    ++*(int *)user;
    return LD_OK;
}

/* Every layer in fp16 (a Constant too), as a hook that rounds everything. */
static ld_status all_fp16(void *user, const ld_node *node, ld_layer_numerics *out, ld_error *err)
{
    (void)user, (void)node, (void)err;
    out->precision = LD_PRECISION_FP16;
    return LD_OK;
}

/* c = Constant(value = [10, 20, 30, 40]); y = x + c. Without hooks every
 * run shows the attribute's own data as c (folded: never copied) and
 * ld_exec_run_node_on gets a copy; with hooks too when c's layer numerics
 * are fp32 without output type (the hooks are not called for c); with
 * hooks that give c another precision, the kernel computes c into a buffer
 * of its own. */
static void test_constant_is_folded(void **state)
{
    (void)state;
    NEED_KERNEL("Add");
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {4};
    ob_input(m->graph, "x", FLOAT, 1, d);
    Onnx__NodeProto *c = ob_node(m->graph, "Constant", "k", "", "c");
    Onnx__AttributeProto *a = ob_attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = ob_tensor("", FLOAT, 1, d);
    float vals[] = {10, 20, 30, 40};
    ob_set_raw(a->t, vals, sizeof vals);
    ob_node(m->graph, "Add", "add", "x,c", "y");
    ob_output(m->graph, "y", FLOAT);
    ld_graph *g = ob_load_ok(m);
    const void *attr_data = g->nodes[0].attrs[0].t->data;
    ld_tensor *x = ramp("x", 1, d, 1);
    const ld_tensor *in[] = {x};
    ld_error err;
    ld_exec *e = create_ok(g);
    for (int run = 0; run < 2; run++) {
        const void *seen = NULL;
        assert_int_equal(ld_exec_run(e, in, catch_constant, &seen, &err), LD_OK);
        assert_ptr_equal(seen, attr_data);
    }
    recorder *r = calloc(1, sizeof *r);
    run_ok(e, in, r);
    assert_true(r->events[2].sum == 1 + 2 + 3 + 4 + 100);
    assert_true(ld_exec_peak_bytes(e) <= 16); /* y only: c is not the run's */
    const void *copy = NULL;
    assert_int_equal(ld_exec_run_node_on(e, 0, NULL, catch_constant, &copy, &err), LD_OK);
    assert_true(copy && copy != attr_data);
    ld_exec_destroy(e);
    int calls = 0;
    ld_exec_hooks hooks = {.user = &calls, .after_compute = after_nothing};
    ld_exec_config cfg = {.threads = 1, .hooks = &hooks};
    assert_int_equal(ld_exec_create(&e, g, &cfg, &err), LD_OK);
    const void *folded = NULL;
    assert_int_equal(ld_exec_run(e, in, catch_constant, &folded, &err), LD_OK);
    assert_ptr_equal(folded, attr_data);
    assert_int_equal(calls, 1); /* the Add only */
    ld_exec_destroy(e);
    hooks.layer_numerics = all_fp16;
    calls = 0;
    assert_int_equal(ld_exec_create(&e, g, &cfg, &err), LD_OK);
    const void *computed = NULL;
    assert_int_equal(ld_exec_run(e, in, catch_constant, &computed, &err), LD_OK);
    assert_true(computed && computed != attr_data);
    assert_int_equal(calls, 2);
    free(r);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_observer_order),
        T(test_chain_peak_is_two_tensors),
        T(test_graph_output_read_later),
        T(test_value_read_twice),
        T(test_omitted_optional_inputs_and_outputs),
        T(test_deferred_output),
        T(test_input_checks),
        T(test_unsupported_op_fails_at_create),
        T(test_widen_half),
        T(test_hooks),
        T(test_observer_error_stops_the_run),
        T(test_kernel_error_mid_run),
        T(test_constant_is_folded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
