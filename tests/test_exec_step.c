/* Tests of stepwise and isolated execution (backends/exec.c, the ABI 3 slots
 * of the reference and emulated backends): begin + step + finish_step + end
 * gives the same events as one run; a node's outputs and inputs stay
 * readable until its finish_step; steps out of order are refused; a node
 * run on foreign inputs reports what those inputs give without touching the
 * run in progress; the emulated engine first converts foreign inputs to
 * what it holds (fp16 values, overflow to inf). Runs under ASan's leak
 * checker, so everything the steps allocate must be freed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/emulated.h"
#include "backends/exec.h"
#include "layerdiff/engine.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

/* --- recording observer ------------------------------------------------------------ */

enum { MAX_EVENTS = 32 };

typedef struct recorder {
    int n;
    char names[MAX_EVENTS][32];
    double first[MAX_EVENTS]; /* element 0 */
    double sum[MAX_EVENTS];
    ld_dtype dtype[MAX_EVENTS];
} recorder;

static ld_status record(void *user, const ld_tensor_event *ev, ld_error *err)
{
    (void)err;
    recorder *r = user;
    assert_true(r->n < MAX_EVENTS);
    snprintf(r->names[r->n], sizeof r->names[0], "%s", ev->graph->values[ev->value].name);
    r->first[r->n] = ev->tensor->count ? ld_tensor_get_double(ev->tensor, 0) : NAN;
    r->sum[r->n] = 0;
    for (int64_t i = 0; i < ev->tensor->count; i++)
        r->sum[r->n] += ld_tensor_get_double(ev->tensor, i);
    r->dtype[r->n] = ev->tensor->dtype;
    r->n++;
    return LD_OK;
}

/* --- graphs -------------------------------------------------------------------------- */

static void add_scalar(Onnx__GraphProto *g, const char *name, float value)
{
    Onnx__TensorProto *t = ob_tensor(name, FLOAT, 0, NULL);
    ob_set_raw(t, &value, sizeof value);
    OB_PUSH(g->initializer, g->n_initializer, t);
}

/* x [4] -> Mul two "double" -> a -> Add one "inc" -> b -> Mul half "halve" -> y;
 * a is also a graph output (read by inc only), b is read by twice only. */
static ld_graph *chain_graph(void)
{
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {4};
    ob_input(m->graph, "x", FLOAT, 1, d);
    add_scalar(m->graph, "two", 2.0f);
    add_scalar(m->graph, "one", 1.0f);
    add_scalar(m->graph, "half", 0.5f);
    ob_node(m->graph, "Mul", "double", "x,two", "a");
    ob_node(m->graph, "Add", "inc", "a,one", "b");
    ob_node(m->graph, "Mul", "halve", "b,half", "y");
    ob_output(m->graph, "a", FLOAT);
    ob_output(m->graph, "y", FLOAT);
    return ob_load_ok(m);
}

static int value_index(const ld_graph *g, const char *name)
{
    for (int v = 0; v < g->n_values; v++)
        if (strcmp(g->values[v].name, name) == 0)
            return v;
    fail_msg("no value '%s'", name);
    return -1;
}

static ld_tensor *vector(const char *name, const float *values, int n)
{
    ld_shape shape;
    ld_error err;
    int64_t d[] = {n};
    assert_int_equal(ld_shape_set(&shape, 1, d, &err), LD_OK);
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    memcpy(t->data, values, (size_t)n * sizeof(float));
    return t;
}

static ld_exec *create_ok(const ld_graph *g)
{
    ld_exec *e = NULL;
    ld_error err;
    ld_exec_config cfg = {.threads = 1};
    if (ld_exec_create(&e, g, &cfg, &err) != LD_OK)
        fail_msg("create failed: %s", err.message);
    return e;
}

/* --- executor ------------------------------------------------------------------------- */

static void test_steps_give_the_run(void **state)
{
    (void)state;
    ld_graph *g = chain_graph();
    ld_exec *e = create_ok(g);
    const float xs[] = {1, 2, 3, 4};
    ld_tensor *x = vector("x", xs, 4);
    const ld_tensor *in[] = {x};
    recorder whole = {0}, steps = {0};
    ld_error err;
    assert_int_equal(ld_exec_run(e, in, record, &whole, &err), LD_OK);
    size_t run_peak = ld_exec_peak_bytes(e);

    int va = value_index(g, "a"), vb = value_index(g, "b"), vy = value_index(g, "y");
    assert_int_equal(ld_exec_begin(e, in, record, &steps, &err), LD_OK);
    assert_ptr_equal(ld_exec_value(e, value_index(g, "x")), x);
    assert_non_null(ld_exec_value(e, value_index(g, "two"))); /* initializers are readable */
    for (int i = 0; i < g->n_nodes; i++) {
        assert_int_equal(ld_exec_step(e, i, record, &steps, &err), LD_OK);
        /* node i's outputs are readable until its finish_step */
        assert_non_null(ld_exec_value(e, g->nodes[i].outputs[0]));
        if (i == 1)
            assert_non_null(ld_exec_value(e, va)); /* inc's input: dies at inc's finish */
        ld_exec_finish_step(e, i);
        if (i == 1) {
            assert_null(ld_exec_value(e, va));
            assert_non_null(ld_exec_value(e, vb));
        }
    }
    assert_null(ld_exec_value(e, vy)); /* y has no reader: freed at its finish_step */
    ld_exec_end(e);
    ld_exec_end(e); /* twice is harmless */

    assert_int_equal(steps.n, whole.n);
    assert_int_equal(whole.n, 4);
    for (int k = 0; k < whole.n; k++) {
        assert_string_equal(steps.names[k], whole.names[k]);
        assert_true(steps.sum[k] == whole.sum[k]);
    }
    assert_true(whole.sum[3] == (2 * 10 + 4) / 2); /* y = (2x + 1) / 2 */
    /* Stepwise, a node's input and output are both alive (the whole run may
     * compute in place, kernels/inplace.h, so it can need less). */
    size_t tensor_bytes = 4 * sizeof(float);
    assert_int_equal(ld_exec_peak_bytes(e), 2 * tensor_bytes);
    assert_true(run_peak >= tensor_bytes && run_peak <= 2 * tensor_bytes);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

static void test_steps_in_order_only(void **state)
{
    (void)state;
    ld_graph *g = chain_graph();
    ld_exec *e = create_ok(g);
    const float xs[] = {1, 2, 3, 4};
    ld_tensor *x = vector("x", xs, 4);
    const ld_tensor *in[] = {x};
    ld_error err;
    assert_int_equal(ld_exec_step(e, 0, NULL, NULL, &err), LD_ERR_INTERNAL); /* no begin */
    assert_int_equal(ld_exec_begin(e, in, NULL, NULL, &err), LD_OK);
    ob_expect_message(ld_exec_step(e, 1, NULL, NULL, &err), LD_ERR_INTERNAL, &err, "executor",
                      "out of order");
    assert_int_equal(ld_exec_step(e, 0, NULL, NULL, &err), LD_OK);
    /* the next step needs node 0's finish first */
    assert_int_equal(ld_exec_step(e, 1, NULL, NULL, &err), LD_ERR_INTERNAL);
    ld_exec_finish_step(e, 0);
    assert_int_equal(ld_exec_step(e, 1, NULL, NULL, &err), LD_OK);
    /* abandoned half-way: end frees it all (the leak checker would say) */
    ld_exec_end(e);
    /* and a new run can begin */
    assert_int_equal(ld_exec_run(e, in, NULL, NULL, &err), LD_OK);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

static void test_run_node_on_foreign_inputs(void **state)
{
    (void)state;
    ld_graph *g = chain_graph();
    ld_exec *e = create_ok(g);
    const float xs[] = {1, 2, 3, 4}, other[] = {10, 10, 10, 10};
    ld_tensor *x = vector("x", xs, 4);
    ld_tensor *foreign_a = vector("a", other, 4);
    const ld_tensor *in[] = {x};
    ld_error err;
    recorder iso = {0}, own = {0};
    assert_int_equal(ld_exec_begin(e, in, NULL, NULL, &err), LD_OK);
    assert_int_equal(ld_exec_step(e, 0, NULL, NULL, &err), LD_OK);
    ld_exec_finish_step(e, 0);
    /* inc on a = 10: b = 11; the initializer `one` is the executor's own (NULL) */
    const ld_tensor *foreign[] = {foreign_a, NULL};
    assert_int_equal(ld_exec_run_node_on(e, 1, foreign, record, &iso, &err), LD_OK);
    assert_int_equal(iso.n, 1);
    assert_string_equal(iso.names[0], "b");
    assert_true(iso.sum[0] == 44);
    /* the run goes on with its own a = 2x */
    assert_int_equal(ld_exec_step(e, 1, record, &own, &err), LD_OK);
    assert_true(own.sum[0] == 2 * 10 + 4);
    ld_exec_finish_step(e, 1);
    /* NULL inputs: the node's own live tensors */
    assert_int_equal(ld_exec_run_node_on(e, 2, NULL, record, &iso, &err), LD_OK);
    assert_true(iso.sum[1] == 24 / 2);
    ld_exec_end(e);
    ld_tensor_destroy(foreign_a);
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

/* --- backends ------------------------------------------------------------------------- */

static void *backend_ok(const ld_backend_vtable *vt, const ld_graph *g,
                        const ld_engine_config *cfg)
{
    void *s = NULL;
    ld_error err;
    ld_backend_config bc = {.threads = 1, .engine = cfg};
    if (vt->create(&s, &bc, &err) != LD_OK || vt->prepare(s, g, NULL, &err) != LD_OK)
        fail_msg("%s: %s", vt->name, err.message);
    return s;
}

static void test_builtins_are_stepwise(void **state)
{
    (void)state;
    assert_true(ld_backend_is_stepwise(ld_backend_find("reference")));
    assert_true(ld_backend_is_stepwise(ld_backend_find("emulated")));
    ld_backend_vtable partial = *ld_backend_find("reference");
    partial.run_node_on = NULL;
    assert_false(ld_backend_is_stepwise(&partial));
    partial = *ld_backend_find("reference");
    partial.abi_version = 2; /* an old table's slots are not to be trusted */
    assert_false(ld_backend_is_stepwise(&partial));
    assert_false(ld_backend_is_stepwise(NULL));
}

/* The emulated fp16 engine holds a's and b's values in fp16: a foreign
 * float32 input is rounded to fp16 first (70000 -> inf), as its own producer
 * would have stored it, before the layer computes — also when the layer
 * itself runs in fp32 (halve, by --layer-precisions: inf / 2 = inf, where
 * the unconverted 70000 / 2 = 35000 fits). The reference takes the inputs as
 * they are. The observer sees fp16 layers' outputs in fp16. */
static void test_emulated_converts_foreign_inputs(void **state)
{
    (void)state;
    ld_graph *g = chain_graph();
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    cfg.constraints = LD_CONSTRAINTS_OBEY;
    ld_error err;
    assert_int_equal(ld_engine_add_rules(&cfg, "halve:fp32", false, &err), LD_OK);
    const ld_backend_vtable *emu = ld_backend_find("emulated");
    const ld_backend_vtable *ref = ld_backend_find("reference");
    void *es = backend_ok(emu, g, &cfg), *rs = backend_ok(ref, g, NULL);
    const float xs[] = {1, 2, 3, 4}, odd[] = {1.0f + 0x1p-12f, 70000, -2, 0};
    ld_tensor *x = vector("x", xs, 4), *foreign_a = vector("a", odd, 4);
    const ld_tensor *in[] = {x};
    const ld_tensor *foreign[] = {foreign_a, NULL};
    recorder e_iso = {0}, r_iso = {0}, e_own = {0};
    assert_int_equal(emu->begin(es, in, NULL, NULL, &err), LD_OK);
    assert_int_equal(emu->step(es, 0, NULL, NULL, &err), LD_OK);
    emu->finish_step(es, 0);
    assert_int_equal(emu->run_node_on(es, 1, foreign, record, &e_iso, &err), LD_OK);
    assert_int_equal(e_iso.n, 1);
    assert_int_equal(e_iso.dtype[0], LD_DTYPE_FLOAT16);
    assert_true(e_iso.first[0] == 2.0); /* 1 + 2^-12 + 1, in fp16 */
    assert_int_equal(ref->begin(rs, in, NULL, NULL, &err), LD_OK);
    assert_int_equal(ref->step(rs, 0, NULL, NULL, &err), LD_OK);
    ref->finish_step(rs, 0);
    assert_int_equal(ref->run_node_on(rs, 1, foreign, record, &r_iso, &err), LD_OK);
    assert_true(r_iso.first[0] == 2.0 + 0x1p-12);
    assert_true(isinf(e_iso.sum[0]) && e_iso.sum[0] > 0); /* 70000 + 1 */
    /* the engine's own run is undisturbed: b = 2x + 1, finite */
    assert_int_equal(emu->step(es, 1, record, &e_own, &err), LD_OK);
    assert_true(e_own.sum[0] == 24);
    const ld_tensor *b = emu->value(es, value_index(g, "b"));
    assert_non_null(b);
    emu->finish_step(es, 1);
    const float big[] = {70000, 3, 3, 3};
    ld_tensor *foreign_b = vector("b", big, 4);
    const ld_tensor *foreign2[] = {foreign_b, NULL};
    assert_int_equal(emu->run_node_on(es, 2, foreign2, record, &e_iso, &err), LD_OK);
    assert_true(isinf(e_iso.first[1]) && e_iso.first[1] > 0);
    assert_int_equal(e_iso.dtype[1], LD_DTYPE_FLOAT32); /* y: the graph output type */
    assert_int_equal(ref->step(rs, 1, NULL, NULL, &err), LD_OK);
    ref->finish_step(rs, 1);
    assert_int_equal(ref->run_node_on(rs, 2, foreign2, record, &r_iso, &err), LD_OK);
    assert_true(r_iso.first[1] == 35000);
    ld_tensor_destroy(foreign_b);
    assert_int_equal(emu->step(es, 2, NULL, NULL, &err), LD_OK);
    emu->finish_step(es, 2);
    emu->end(es);
    ref->end(rs);
    /* a plain run after the stepwise one still works (state reset) */
    recorder again = {0};
    assert_int_equal(emu->run(es, in, record, &again, &err), LD_OK);
    assert_int_equal(again.n, 4);
    assert_true(again.sum[3] == 12);
    emu->destroy(es);
    ref->destroy(rs);
    ld_engine_config_clear(&cfg);
    ld_tensor_destroy(foreign_a);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_steps_give_the_run),
        T(test_steps_in_order_only),
        T(test_run_node_on_foreign_inputs),
        T(test_builtins_are_stepwise),
        T(test_emulated_converts_foreign_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
