/* Tests of --max-memory (layerdiff/memory.h, core/memory.c, the executor's
 * check in backends/exec.c): size parsing, the static estimate of a run, its
 * one-line error, and the limit enforced during a run on tensors whose shape
 * is only known then. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "layerdiff/backend.h"
#include "layerdiff/memory.h"
#include "tests/support/onnx_builder.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define MIB (UINT64_C(1) << 20)

static void expect_size(const char *text, uint64_t want)
{
    uint64_t got = 0;
    ld_error err;
    ld_status st = ld_memory_parse_size(text, &got, &err);
    if (st != LD_OK || got != want)
        fail_msg("'%s': status %d, %llu bytes, want %llu (%s)", text, st,
                 (unsigned long long)got, (unsigned long long)want, err.message);
}

static void expect_bad_size(const char *text, const char *substring)
{
    uint64_t got = 0;
    ld_error err;
    ob_expect_message(ld_memory_parse_size(text, &got, &err), LD_ERR_USAGE, &err,
                      "memory size '", substring);
}

static void test_parse_size(void **state)
{
    (void)state;
    expect_size("123", 123);
    expect_size("100k", 100 << 10);
    expect_size("512M", 512 * MIB);
    expect_size("4G", UINT64_C(4) << 30);
    expect_size("1.5GiB", UINT64_C(3) << 29);
    expect_size("2tb", UINT64_C(2) << 40);
    expect_size("1MiB", MIB);
    expect_size("0.5K", 512);
    expect_size("7B", 7);
    const char *format = "expected a number of bytes, optionally with K, M, G or T";
    expect_bad_size("", format);
    expect_bad_size("M", format);
    expect_bad_size("1.5x", format);
    expect_bad_size("-1G", format);
    expect_bad_size("1e9", format);
    expect_bad_size("1.2.3", format);
    expect_bad_size("4 G", format);
    expect_bad_size("1P", format);
    expect_bad_size("0", "must be at least 1 byte and below 8 EiB");
    expect_bad_size("0.1", "must be at least 1 byte");
    expect_bad_size("8388608T", "below 8 EiB"); /* 2^63 */
    expect_size("8388607T", UINT64_C(8388607) << 40);
}

static void test_format_and_default(void **state)
{
    (void)state;
    char buf[32];
    assert_string_equal(ld_memory_format(0, buf, sizeof buf), "0 B");
    assert_string_equal(ld_memory_format(1023, buf, sizeof buf), "1023 B");
    assert_string_equal(ld_memory_format(1536, buf, sizeof buf), "1.5 KiB");
    assert_string_equal(ld_memory_format(UINT64_C(3) << 30, buf, sizeof buf), "3.0 GiB");
    assert_string_equal(ld_memory_format(UINT64_MAX, buf, sizeof buf), "more than 16 EiB");
    /* 80% of RAM: some hundreds of MB at least on any machine that runs this. */
    uint64_t def = ld_memory_default_limit();
    assert_true(def > 100 * MIB);
    assert_int_equal(ld_memory_limit(), 0);
    ld_memory_limit_set(def);
    assert_true(ld_memory_limit() == def);
    ld_memory_limit_set(0);
}

/* x (N, 1000) float -> Relu r -> Add(r, x) y -> Cast to int8 c -> Reshape z:
 * r, y and c follow from x (nothing declares them), z's shape is computed. */
static Onnx__ModelProto *chain_model(void)
{
    Onnx__ModelProto *m = ob_model();
    int64_t dims[] = {-1, 1000};
    ob_input(m->graph, "x", FLOAT, 2, dims);
    ob_float_init(m->graph, "w", 250);               /* 1000 bytes of weights */
    ob_node(m->graph, "Relu", "relu", "x", "r");
    ob_node(m->graph, "Add", "add", "r,x", "y");
    Onnx__NodeProto *cast = ob_node(m->graph, "Cast", "cast", "y", "c");
    Onnx__AttributeProto *to = ob_attr(cast, "to", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    to->has_i = 1;
    to->i = 3; /* int8 */
    ob_node(m->graph, "Reshape", "reshape", "c,shape", "z");
    Onnx__TensorProto *shape = ob_tensor("shape", INT64, 1, (int64_t[]){1});
    int64_t minus_one = -1;
    ob_set_raw(shape, &minus_one, sizeof minus_one);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, shape);
    ob_output(m->graph, "z", ONNX__TENSOR_PROTO__DATA_TYPE__INT8);
    return m;
}

static void test_estimate(void **state)
{
    (void)state;
    ld_graph *g = ob_load_ok(chain_model());
    ld_shape shapes[1] = {{.rank = 2, .dims = {10, 1000}}};
    ld_memory_estimate est;
    ld_error err;
    assert_int_equal(ld_memory_estimate_run(g, shapes, &est, &err), LD_OK);
    assert_int_equal(est.weight_bytes, 1000 + 8);
    assert_int_equal(est.input_bytes, 40000);
    /* relu: r 40000; add: r + y = 80000 (r dies after add); cast: y + c = 50000. */
    assert_int_equal(est.peak_bytes, 80000);
    assert_string_equal(g->nodes[est.peak_node].name, "add");
    assert_int_equal(est.total_bytes, 1008 + 40000 + 80000);
    assert_int_equal(est.n_unknown, 1); /* Reshape's output */
    assert_int_equal(est.largest_bytes, 40000);
    assert_string_equal(g->values[est.largest_value].name, "x"); /* the first of the 40000s */

    assert_int_equal(ld_memory_check(g, &est, est.total_bytes, &err), LD_OK);
    assert_int_equal(ld_memory_check(g, &est, 0, &err), LD_OK);
    ob_expect_message(ld_memory_check(g, &est, 100000, &err), LD_ERR_NOMEM, &err,
                      "the run needs at least 118.2 KiB of tensors (weights 1008 B, inputs "
                      "39.1 KiB, layer outputs alive at once 78.1 KiB at node 'add' (Add); "
                      "largest tensor 'x', 39.1 KiB), more than the memory limit 97.7 KiB "
                      "(--max-memory)",
                      "");
    ld_graph_destroy(g);
}

static void test_estimate_saturates(void **state)
{
    (void)state;
    ld_graph *g = ob_load_ok(ob_relu_model());
    /* 2^40 x 2^40 elements: more bytes than 64 bits count. */
    ld_shape shapes[1] = {{.rank = 2, .dims = {INT64_C(1) << 40, INT64_C(1) << 40}}};
    ld_memory_estimate est;
    ld_error err;
    assert_int_equal(ld_memory_estimate_run(g, shapes, &est, &err), LD_OK);
    assert_true(est.input_bytes == UINT64_MAX);
    assert_true(est.total_bytes == UINT64_MAX);
    assert_int_equal(ld_memory_check(g, &est, UINT64_MAX - 1, &err), LD_ERR_NOMEM);
    assert_non_null(strstr(err.message, "the run needs more than 16 EiB of tensors"));
    ld_graph_destroy(g);
}

/* ConstantOfShape(s) -> big (shape known only at run time) -> ReduceMax y. */
static Onnx__ModelProto *runtime_shape_model(int64_t rows)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__TensorProto *s = ob_tensor("s", INT64, 1, (int64_t[]){2});
    int64_t *dims = ob_mem(2 * sizeof *dims);
    dims[0] = rows;
    dims[1] = 1024;
    ob_set_raw(s, dims, 2 * sizeof *dims);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, s);
    ob_node(m->graph, "ConstantOfShape", "fill", "s", "big");
    ob_attr(ob_node(m->graph, "ReduceMax", "max", "big", "y"), "keepdims",
            ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->has_i = 1;
    ob_output(m->graph, "y", FLOAT);
    return m;
}

static ld_status run_reference(const ld_graph *g, ld_error *err)
{
    const ld_backend_vtable *vt = ld_backend_find("reference");
    void *b = NULL;
    ld_backend_config cfg = {.threads = 1};
    ld_status st = vt->create(&b, &cfg, err);
    if (st == LD_OK)
        st = vt->prepare(b, g, NULL, err);
    if (st == LD_OK)
        st = vt->run(b, NULL, NULL, NULL, err);
    if (b)
        vt->destroy(b);
    return st;
}

static void test_limit_enforced_during_run(void **state)
{
    (void)state;
    ld_graph *g = ob_load_ok(runtime_shape_model(1024)); /* big: 4 MiB */
    ld_memory_estimate est;
    ld_error err;
    assert_int_equal(ld_memory_estimate_run(g, NULL, &est, &err), LD_OK);
    assert_int_equal(est.n_unknown, 2); /* nothing says big's shape before the run */
    assert_int_equal(est.total_bytes, 16);

    ld_memory_limit_set(3 * MIB);
    ld_status st = run_reference(g, &err);
    ob_expect_message(st, LD_ERR_NOMEM, &err,
                      "node 'fill' (ConstantOfShape): tensor 'big' needs 4.0 MiB; with 0 B of "
                      "layer outputs alive and 16 B of weights and inputs the run would hold "
                      "4.0 MiB, more than the memory limit 3.0 MiB (--max-memory)",
                      "");
    /* Just enough: weights + big + y. */
    ld_memory_limit_set(4 * MIB + 16 + 4);
    assert_int_equal(run_reference(g, &err), LD_OK);
    ld_memory_limit_set(4 * MIB + 16 + 3);
    st = run_reference(g, &err);
    ob_expect_message(st, LD_ERR_NOMEM, &err, "node 'max' (ReduceMax): tensor 'y' needs 4 B",
                      "the run would hold 4.0 MiB, more than the memory limit 4.0 MiB");
    ld_memory_limit_set(0);
    assert_int_equal(run_reference(g, &err), LD_OK);
    ld_graph_destroy(g);
}

/* The shared budget: resident bytes count once (replaced, not summed), holds
 * add up across callers and fail only past a non-zero limit. */
static void test_shared_budget(void **state)
{
    (void)state;
    assert_true(ld_memory_held() == 0);
    ld_memory_limit_set(100);
    ld_memory_set_resident(30);
    ld_memory_set_resident(30); /* a second executor of the same run: still 30 */
    assert_true(ld_memory_resident() == 30);
    assert_true(ld_memory_try_hold(40));
    assert_true(ld_memory_try_hold(30)); /* 30 + 40 + 30 = 100: at the limit */
    assert_false(ld_memory_try_hold(1));
    assert_true(ld_memory_held() == 70);
    ld_memory_hold(50); /* unconditional */
    assert_true(ld_memory_held() == 120);
    ld_memory_release(120);
    assert_true(ld_memory_try_hold(UINT64_MAX - 10) == false); /* no wrap-around */
    ld_memory_limit_set(0);
    assert_true(ld_memory_try_hold(1000)); /* no limit */
    ld_memory_release(5000);              /* saturates */
    assert_true(ld_memory_held() == 0);
    ld_memory_set_resident(0);
}

/* What another backend holds counts against this one's tensors: the lockstep
 * comparison's two executors share one --max-memory. */
static void test_limit_shared_by_backends(void **state)
{
    (void)state;
    ld_graph *g = ob_load_ok(runtime_shape_model(1024)); /* big: 4 MiB */
    ld_error err;
    ld_memory_limit_set(5 * MIB);
    assert_int_equal(run_reference(g, &err), LD_OK); /* alone it fits */
    assert_true(ld_memory_held() == 0);               /* and gives everything back */
    ld_memory_hold(2 * MIB);                           /* the other backend's live tensors */
    ld_status st = run_reference(g, &err);
    ob_expect_message(st, LD_ERR_NOMEM, &err,
                      "node 'fill' (ConstantOfShape): tensor 'big' needs 4.0 MiB; with 2.0 MiB "
                      "of layer outputs alive and 16 B of weights and inputs the run would hold "
                      "6.0 MiB, more than the memory limit 5.0 MiB (--max-memory)",
                      "");
    ld_memory_release(2 * MIB);
    assert_true(ld_memory_held() == 0);
    ld_memory_limit_set(0);
    ld_graph_destroy(g);
}

/* The estimate of a lockstep comparison counts the layer outputs twice. */
static void test_estimate_two_backends(void **state)
{
    (void)state;
    ld_graph *g = ob_load_ok(runtime_shape_model(1024));
    ld_memory_estimate est = {.weight_bytes = 100, .input_bytes = 20, .peak_bytes = 1000,
                              .peak_node = 1, .total_bytes = 1120, .largest_value = -1};
    ld_error err;
    assert_int_equal(ld_memory_check(g, &est, 1500, &err), LD_OK);
    est.backends = 2;
    ob_expect_message(ld_memory_check(g, &est, 1500, &err), LD_ERR_NOMEM, &err,
                      "the run needs 2.1 KiB of tensors (weights 100 B, inputs 20 B, layer "
                      "outputs alive at once 1000 B at node 'max' (ReduceMax), in each of the 2 "
                      "backends run together;",
                      "more than the memory limit 1.5 KiB");
    assert_int_equal(ld_memory_check(g, &est, 2120, &err), LD_OK);
    ld_graph_destroy(g);
}

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_parse_size),
        T(test_format_and_default),
        T(test_estimate),
        T(test_estimate_saturates),
        T(test_limit_enforced_during_run),
        T(test_shared_budget),
        T(test_limit_shared_by_backends),
        T(test_estimate_two_backends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
