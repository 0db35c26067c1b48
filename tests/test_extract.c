/* Tests of sub-model extraction (onnx/extract.c): which nodes a reduction
 * keeps (the target, up to K producers nearest first, Constants free), which
 * tensors are cut, and the written model: it loads back with the kept
 * NodeProtos untouched (names, attributes), the initializers they read
 * (external data turned into raw data, so the repro stands alone in another
 * folder), the cut tensors as typed inputs with exact shapes, the target's
 * outputs as outputs, and the source's opsets. Nodes listed out of order in
 * the file are found again by their outputs. onnx.checker runs on written
 * models in tests/e2e/test_reduce.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/bisect.h"
#include "layerdiff/onnx.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

/* x -> relu -> a;  k = Constant;  add(a, k) -> b;  mul(b, w) -> y, with
 * `shuffled` listing the nodes in the file out of topological order. */
static Onnx__ModelProto *chain_model(bool shuffled, bool external_w)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t dims[] = {2, 3};
    ob_input(g, "x", FLOAT, 2, dims);
    if (shuffled) {
        ob_node(g, "Mul", "mul", "b,w", "y");
        ob_node(g, "Add", "add", "a,k", "b");
    }
    ob_node(g, "Relu", "relu", "x", "a");
    Onnx__NodeProto *c = ob_node(g, "Constant", "const", "", "k");
    Onnx__AttributeProto *v = ob_attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    float two = 2.0f;
    v->t = ob_tensor("kval", FLOAT, 0, NULL);
    ob_set_raw(v->t, &two, sizeof two);
    if (!shuffled) {
        ob_node(g, "Add", "add", "a,k", "b");
        ob_node(g, "Mul", "mul", "b,w", "y");
    }
    if (external_w) {
        int64_t three = 3;
        Onnx__TensorProto *t = ob_tensor("w", FLOAT, 1, &three);
        ob_external(t, "location", "weights.bin");
        OB_PUSH(g->initializer, g->n_initializer, t);
    } else {
        ob_float_init(g, "w", 3);
    }
    ob_output(g, "y", FLOAT);
    return m;
}

static ld_graph *load_written(const Onnx__ModelProto *m, const char *name)
{
    ob_make_tmpdir();
    float weights[3] = {5, 6, 7};
    ob_write_file(ob_tmp_path("weights.bin"), weights, sizeof weights);
    size_t size;
    uint8_t *buf = ob_pack(m, &size);
    ob_write_file(ob_tmp_path(name), buf, size);
    ld_graph *g = NULL;
    ld_error err;
    if (ld_onnx_load_file(&g, ob_tmp_path(name), &err) != LD_OK)
        fail_msg("%s", err.message);
    return g;
}

static int node(const ld_graph *g, const char *name)
{
    int i = ld_graph_find_node(g, name);
    assert_true(i >= 0);
    return i;
}

static void test_select_and_cut(void **state)
{
    (void)state;
    ld_graph *g = load_written(chain_model(false, false), "m.onnx");
    int nodes[8], n = 0, cut[8], n_cut = 0;
    ld_error err;
    assert_int_equal(ld_extract_select(g, node(g, "mul"), 0, nodes, &n, &err), LD_OK);
    assert_int_equal(n, 1);
    assert_int_equal(nodes[0], node(g, "mul"));
    ld_extract_cut(g, nodes, n, cut, &n_cut);
    assert_int_equal(n_cut, 1); /* b; w is an initializer */
    assert_string_equal(g->values[cut[0]].name, "b");

    /* one producer: add, and the Constant it reads comes for free */
    assert_int_equal(ld_extract_select(g, node(g, "mul"), 1, nodes, &n, &err), LD_OK);
    assert_int_equal(n, 3);
    ld_extract_cut(g, nodes, n, cut, &n_cut);
    assert_int_equal(n_cut, 1);
    assert_string_equal(g->values[cut[0]].name, "a");

    assert_int_equal(ld_extract_select(g, node(g, "mul"), 10, nodes, &n, &err), LD_OK);
    assert_int_equal(n, 4);
    ld_extract_cut(g, nodes, n, cut, &n_cut);
    assert_int_equal(n_cut, 1);
    assert_string_equal(g->values[cut[0]].name, "x");
    for (int k = 1; k < n; k++)
        assert_true(nodes[k - 1] < nodes[k]); /* ascending: topological */
    ld_graph_destroy(g);
}

/* Extracts {add, const, mul} with `a` as a float16 2x3 input (a cut tensor
 * keeps the type the run gave it, whatever the source declared). */
static ld_graph *extract_tail(bool shuffled, bool external_w)
{
    ld_graph *g = load_written(chain_model(shuffled, external_w), "m.onnx");
    int nodes[8], n = 0;
    ld_error err;
    assert_int_equal(ld_extract_select(g, node(g, "mul"), 1, nodes, &n, &err), LD_OK);
    ld_extract_io in = {ld_graph_find_value(g, "a"), LD_DTYPE_FLOAT16, {2, {2, 3}}};
    ld_extract_io out = {ld_graph_find_value(g, "y"), LD_DTYPE_FLOAT32, {2, {2, 3}}};
    ld_extract_spec spec = {n, nodes, 1, &in, 1, &out, NULL, "test"};
    char *dir = ob_str(ob_tmp_path("sub"));
    char path[4200];
    snprintf(path, sizeof path, "%s.onnx", dir);
    if (ld_onnx_extract(ob_tmp_path("m.onnx"), g, &spec, path, &err) != LD_OK)
        fail_msg("%s", err.message);
    ld_graph_destroy(g);
    /* load from another folder: no external file can be found from there */
    ob_write_file(ob_tmp_path("weights.bin"), "", 0);
    ld_graph *r = NULL;
    if (ld_onnx_load_file(&r, path, &err) != LD_OK)
        fail_msg("%s", err.message);
    return r;
}

static void check_tail(ld_graph *r)
{
    assert_int_equal(r->n_nodes, 3);
    assert_string_equal(r->name, "main_reduced"); /* the source graph is "main" */
    assert_int_equal(ld_graph_opset(r, ""), 17);
    assert_int_equal(r->n_inputs, 1);
    const ld_value *a = &r->values[r->inputs[0]];
    assert_string_equal(a->name, "a");
    assert_int_equal(a->type.dtype, LD_DTYPE_FLOAT16);
    assert_int_equal(a->type.rank, 2);
    assert_int_equal(a->type.dims[0].value, 2);
    assert_int_equal(a->type.dims[1].value, 3);
    assert_int_equal(r->n_outputs, 1);
    assert_string_equal(r->values[r->outputs[0]].name, "y");
    assert_int_equal(r->n_initializers, 1);
    const ld_tensor *w = r->values[r->initializers[0]].initializer;
    assert_int_equal(w->count, 3);
    const ld_node *c = &r->nodes[ld_graph_find_node(r, "const")];
    const ld_attr *v = ld_node_attr(c, "value");
    assert_non_null(v); /* the attribute came with the NodeProto */
    assert_true(ld_tensor_get_double(v->t, 0) == 2.0);
    assert_true(ld_graph_find_node(r, "relu") < 0);
}

static void test_extract_loads_back(void **state)
{
    (void)state;
    ld_graph *r = extract_tail(false, false);
    check_tail(r);
    const ld_tensor *w = r->values[r->initializers[0]].initializer;
    assert_true(ld_tensor_get_double(w, 2) == 2.0); /* ob_float_init: 0, 1, 2 */
    ld_graph_destroy(r);
}

static void test_extract_external_and_shuffled(void **state)
{
    (void)state;
    ld_graph *r = extract_tail(true, true);
    check_tail(r);
    const ld_tensor *w = r->values[r->initializers[0]].initializer;
    assert_true(ld_tensor_get_double(w, 0) == 5.0); /* weights.bin, now raw data */
    assert_true(ld_tensor_get_double(w, 2) == 7.0);
    ld_graph_destroy(r);
}

static void test_extract_bad_target(void **state)
{
    (void)state;
    ld_graph *g = load_written(chain_model(false, false), "m.onnx");
    int nodes[8], n = 0;
    ld_error err;
    assert_int_equal(ld_extract_select(g, 99, 0, nodes, &n, &err), LD_ERR_INTERNAL);
    ld_extract_spec spec = {0};
    assert_int_not_equal(ld_onnx_extract(ob_tmp_path("missing.onnx"), g, &spec,
                                         ob_tmp_path("o.onnx"), &err),
                         LD_OK);
    assert_non_null(strstr(err.message, "missing.onnx"));
    ld_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_select_and_cut),
        T(test_extract_loads_back),
        T(test_extract_external_and_shuffled),
        T(test_extract_bad_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
