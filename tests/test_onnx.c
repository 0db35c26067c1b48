/* Tests of the ONNX loader (onnx/): model structure, scopes, attributes,
 * external data and every malformed-model error. Models are built in memory
 * with protobuf-c (tests/support/onnx_builder.h) so each malformed case is
 * exactly the one named; files go to a mkdtemp directory the teardown
 * removes. Tensor conversion is tested in test_onnx_tensors.c, the sweep
 * over Debian's libonnx-testdata in test_onnx_testdata.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "layerdiff/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "tests/support/onnx_builder.h"

/* --- well-formed models ---------------------------------------------------------------- */

static void test_minimal_model(void **state)
{
    (void)state;
    ld_graph *g = ob_load_ok(ob_relu_model());
    assert_int_equal(g->ir_version, 8);
    assert_string_equal(g->producer_name, "test_onnx");
    assert_int_equal(ld_graph_opset(g, ""), 17);
    assert_int_equal(ld_graph_opset(g, "ai.onnx"), 17);
    assert_int_equal(g->n_nodes, 1);
    assert_int_equal(g->n_inputs, 1);
    assert_int_equal(g->n_outputs, 1);
    const ld_node *relu = &g->nodes[0];
    assert_string_equal(relu->name, "Relu_0"); /* generated */
    assert_false(relu->has_name);
    assert_string_equal(relu->domain, "");
    assert_int_equal(relu->opset, 17);
    const ld_value *x = &g->values[g->inputs[0]];
    assert_string_equal(x->name, "x");
    assert_int_equal(x->kind, LD_VALUE_INPUT);
    assert_int_equal(x->type.kind, LD_TYPE_TENSOR);
    assert_int_equal(x->type.dtype, LD_DTYPE_FLOAT32);
    assert_true(x->type.has_shape);
    assert_int_equal(x->type.rank, 2);
    assert_int_equal(x->type.dims[0].value, -1);
    assert_string_equal(x->type.dims[0].param, "N");
    assert_int_equal(x->type.dims[1].value, 3);
    assert_null(x->type.dims[1].param);
    assert_int_equal(x->n_consumers, 1);
    assert_int_equal(x->consumers[0], 0);
    const ld_value *y = &g->values[g->outputs[0]];
    assert_int_equal(y->kind, LD_VALUE_NODE_OUTPUT);
    assert_int_equal(y->producer, 0);
    assert_true(y->is_graph_output);
    assert_int_equal(y->type.dtype, LD_DTYPE_FLOAT32); /* from the output declaration */
    assert_int_equal(ld_graph_find_value(g, "y"), g->outputs[0]);
    assert_int_equal(ld_graph_find_node(g, "Relu_0"), 0);
    assert_int_equal(ld_graph_find_node(g, "nope"), -1);
    ld_graph_destroy(g);
}

static void test_initializer_listed_as_input(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_relu_model();
    int64_t n = 3;
    ob_input(m->graph, "w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &n); /* IR < 4 style */
    ob_float_init(m->graph, "w", 3);
    ob_node(m->graph, "Add", "add", "y,w", "z");
    ob_output(m->graph, "z", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ld_graph *g = ob_load_ok(m);
    assert_int_equal(g->n_inputs, 1); /* only x */
    assert_int_equal(g->n_initializers, 1);
    const ld_value *w = &g->values[ld_graph_find_value(g, "w")];
    assert_int_equal(w->kind, LD_VALUE_INITIALIZER);
    assert_non_null(w->initializer);
    assert_int_equal(w->initializer->count, 3);
    assert_true(ld_tensor_get_double(w->initializer, 2) == 2.0);
    int64_t params, bytes;
    ld_graph_parameter_totals(g, &params, &bytes);
    assert_int_equal(params, 3);
    assert_int_equal(bytes, 12);
    ld_graph_destroy(g);
}

static void test_unsorted_nodes_get_sorted(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *gp = m->graph;
    int64_t one = 1;
    ob_input(gp, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    ob_node(gp, "Relu", "c", "b", "c");
    ob_node(gp, "Relu", "a", "x", "a");
    ob_node(gp, "Neg", "side", "x", "s"); /* independent: stays before b */
    ob_node(gp, "Relu", "b", "a", "b");
    ob_output(gp, "c", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ob_output(gp, "s", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ld_graph *g = ob_load_ok(m);
    const char *want[] = {"a", "side", "b", "c"};
    for (int i = 0; i < 4; i++) {
        assert_string_equal(g->nodes[i].name, want[i]);
        assert_int_equal(g->nodes[i].index, i);
        assert_int_equal(g->values[g->nodes[i].outputs[0]].producer, i);
    }
    const ld_value *x = &g->values[ld_graph_find_value(g, "x")];
    assert_int_equal(x->n_consumers, 2);
    assert_int_equal(x->consumers[0], 0);
    assert_int_equal(x->consumers[1], 1);
    ld_graph_destroy(g);
}

static void test_optional_inputs_and_generated_names(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_relu_model();
    /* A real node already named like the name the unnamed node 1 would get. */
    ob_node(m->graph, "Clip", "", "y,,", "z,");
    ob_node(m->graph, "Clip", "Clip_1", "z", "z2");
    ob_output(m->graph, "z2", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ld_graph *g = ob_load_ok(m);
    const ld_node *clip = &g->nodes[ld_graph_find_node(g, "Clip_1_1")];
    assert_false(clip->has_name);
    assert_int_equal(clip->n_inputs, 3);
    assert_true(clip->inputs[0] >= 0);
    assert_int_equal(clip->inputs[1], -1);
    assert_int_equal(clip->inputs[2], -1);
    assert_int_equal(clip->n_outputs, 2);
    assert_int_equal(clip->outputs[1], -1);
    assert_true(g->nodes[ld_graph_find_node(g, "Clip_1")].has_name);
    ld_graph_destroy(g);
}

static void test_constant_node_and_value_info(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_relu_model();
    Onnx__NodeProto *c = ob_node(m->graph, "Constant", "k", "", "kv");
    Onnx__AttributeProto *a = ob_attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    int64_t n = 2;
    a->t = ob_tensor("", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &n);
    int64_t vals[] = {-5, 7};
    a->t->int64_data = vals;
    a->t->n_int64_data = 2;
    ob_node(m->graph, "Reshape", "r", "y,kv", "yr");
    ob_output(m->graph, "yr", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    int64_t dims[] = {3, 2};
    OB_PUSH(m->graph->value_info, m->graph->n_value_info,
         ob_value_info("kv", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &n));
    OB_PUSH(m->graph->value_info, m->graph->n_value_info,
         ob_value_info("unused_name", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, dims));
    ld_graph *g = ob_load_ok(m);
    const ld_node *k = &g->nodes[ld_graph_find_node(g, "k")];
    assert_string_equal(k->op_type, "Constant");
    const ld_attr *value = ld_node_attr(k, "value");
    assert_non_null(value);
    assert_int_equal(value->type, LD_ATTR_TENSOR);
    assert_int_equal(value->t->dtype, LD_DTYPE_INT64);
    assert_true(ld_tensor_get_double(value->t, 0) == -5.0);
    assert_true(ld_tensor_get_double(value->t, 1) == 7.0);
    const ld_value *kv = &g->values[ld_graph_find_value(g, "kv")];
    assert_int_equal(kv->kind, LD_VALUE_NODE_OUTPUT);
    assert_int_equal(kv->type.dtype, LD_DTYPE_INT64); /* from value_info */
    assert_int_equal(kv->type.rank, 1);
    assert_int_equal(kv->type.dims[0].value, 2);
    assert_int_equal(ld_graph_find_value(g, "unused_name"), -1);
    ld_graph_destroy(g);
}

static void test_chain_of_100000_nodes(void **state)
{
    (void)state;
    enum { N = 100000 };
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *gp = m->graph;
    int64_t one = 1;
    ob_input(gp, "t0", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    /* Listed in reverse so the sort has to do all the work. */
    gp->node = ob_mem(N * sizeof *gp->node);
    Onnx__NodeProto *nodes = ob_mem(N * sizeof *nodes);
    char (*names)[16] = ob_mem((N + 1) * sizeof *names);
    char **ios = ob_mem(2 * N * sizeof *ios);
    for (int i = 0; i <= N; i++)
        snprintf(names[i], sizeof names[i], "t%d", i);
    for (int i = 0; i < N; i++) {
        Onnx__NodeProto *n = &nodes[i];
        onnx__node_proto__init(n);
        n->op_type = "Relu";
        n->name = "";
        ios[2 * i] = names[i];
        ios[2 * i + 1] = names[i + 1];
        n->input = &ios[2 * i];
        n->n_input = 1;
        n->output = &ios[2 * i + 1];
        n->n_output = 1;
        gp->node[N - 1 - i] = n;
    }
    gp->n_node = N;
    ob_output(gp, names[N], ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ld_graph *g = ob_load_ok(m);
    assert_int_equal(g->n_nodes, N);
    for (int i = 0; i < N; i++) {
        const ld_value *out = &g->values[g->nodes[i].outputs[0]];
        assert_string_equal(out->name, names[i + 1]);
        assert_int_equal(out->n_consumers, i == N - 1 ? 0 : 1);
        if (i < N - 1)
            assert_int_equal(out->consumers[0], i + 1);
    }
    /* Generated names follow the file position (the last listed is first run). */
    char want[32];
    snprintf(want, sizeof want, "Relu_%d", N - 1);
    assert_string_equal(g->nodes[0].name, want);
    ld_graph_destroy(g);
}

/* --- malformed files ------------------------------------------------------------------ */

static void test_empty_garbage_truncated(void **state)
{
    (void)state;
    ld_graph *g = NULL;
    ld_error err;
    ld_status st = ld_onnx_load_buffer(&g, (const uint8_t *)"", 0, NULL, "e.onnx", &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, "e.onnx: ", "empty file");

    const char *text = "ir_version: 8\ngraph { node { op_type: \"Relu\" } }\n";
    st = ld_onnx_load_buffer(&g, (const uint8_t *)text, strlen(text), NULL, "t.onnx", &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, "t.onnx: ", "not an ONNX model");

    const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    st = ld_onnx_load_buffer(&g, junk, sizeof junk, NULL, "j.onnx", &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, "j.onnx: ", "not an ONNX model");

    Onnx__ModelProto *m = ob_relu_model();
    ob_float_init(m->graph, "w", 1000);
    size_t size;
    uint8_t *buf = ob_pack(m, &size);
    for (size_t cut = size - 1; cut > 10; cut = cut * 2 / 3) {
        st = ld_onnx_load_buffer(&g, buf, cut, NULL, "cut.onnx", &err);
        if (st == LD_OK) /* a cut between two top-level fields can be valid */
            ld_graph_destroy(g);
        else
            ob_expect_message(st, LD_ERR_INPUT, &err, "cut.onnx: ", "not a valid ONNX model");
    }
    st = ld_onnx_load_buffer(&g, buf, size - 1, NULL, "cut.onnx", &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, "cut.onnx: ", "truncated");

    Onnx__ModelProto *no_graph = ob_model();
    no_graph->graph = NULL;
    ob_expect_error(no_graph, LD_ERR_INPUT, "ModelProto has no graph");
}

static void test_file_errors_name_the_path(void **state)
{
    (void)state;
    ob_make_tmpdir();
    ld_graph *g = NULL;
    ld_error err;
    char *empty = ob_tmp_path("empty.onnx");
    ob_write_file(empty, "", 0);
    ld_status st = ld_onnx_load_file(&g, empty, &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, empty, "empty file");

    char *missing = ob_tmp_path("missing.onnx");
    st = ld_onnx_load_file(&g, missing, &err);
    assert_int_not_equal(st, LD_OK);
    assert_non_null(strstr(err.message, missing));

    st = ld_onnx_load_file(&g, ob_tmpdir(), &err); /* a directory */
    assert_int_not_equal(st, LD_OK);
    assert_non_null(strstr(err.message, "not a regular file"));

    size_t size;
    uint8_t *buf = ob_pack(ob_relu_model(), &size);
    char *good = ob_tmp_path("good.onnx");
    ob_write_file(good, buf, size);
    assert_int_equal(ld_onnx_load_file(&g, good, &err), LD_OK);
    assert_string_equal(g->model_path, good);
    ld_graph_destroy(g);
    char *cut = ob_tmp_path("cut.onnx");
    ob_write_file(cut, buf, size - 3);
    st = ld_onnx_load_file(&g, cut, &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, cut, "not a valid ONNX model");
}

static void test_duplicate_names(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_relu_model();
    ob_float_init(m->graph, "w", 2);
    ob_float_init(m->graph, "w", 2);
    ob_expect_error(m, LD_ERR_INPUT, "duplicate tensor name 'w'");

    m = ob_relu_model();
    ob_float_init(m->graph, "w", 2);
    ob_node(m->graph, "Neg", "neg", "x", "w");
    ob_expect_error(m, LD_ERR_INPUT, "duplicate tensor name 'w': output of node 'neg' (Neg) is "
                                  "also an initializer");

    m = ob_relu_model();
    ob_node(m->graph, "Neg", "neg", "x", "x");
    ob_expect_error(m, LD_ERR_INPUT, "duplicate tensor name 'x': output of node 'neg' (Neg) is "
                                  "also a graph input");

    m = ob_relu_model();
    ob_node(m->graph, "Neg", "neg", "x", "y");
    ob_expect_error(m, LD_ERR_INPUT, "duplicate tensor name 'y': output of node 'neg' (Neg) is "
                                  "also the output of node 'Relu_0'");

    m = ob_relu_model();
    int64_t one = 1;
    ob_input(m->graph, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    ob_expect_error(m, LD_ERR_INPUT, "duplicate tensor name 'x'");
}

static void test_structure_errors(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    int64_t one = 1;
    ob_input(m->graph, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    ob_node(m->graph, "Add", "first", "x,c", "b");
    ob_node(m->graph, "Relu", "second", "b", "c");
    ob_output(m->graph, "c", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ob_expect_error(m, LD_ERR_INPUT, "cycle through node '");

    m = ob_model(); /* a node feeding itself */
    ob_node(m->graph, "Relu", "self", "s", "s");
    ob_output(m->graph, "s", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ob_expect_error(m, LD_ERR_INPUT, "cycle through node 'self' (Relu)");

    m = ob_relu_model();
    ob_node(m->graph, "Add", "adder", "y,nope", "z");
    ob_expect_error(m, LD_ERR_INPUT, "node 'adder' (Add): input 'nope' is not a graph input, an "
                                  "initializer or the output of any node");

    m = ob_relu_model();
    Onnx__NodeProto *n = ob_node(m->graph, "Custom", "custom", "y", "z");
    n->domain = ob_str("com.example");
    ob_expect_error(m, LD_ERR_INPUT, "node 'custom' (Custom): domain 'com.example' has no opset "
                                  "import");
    ob_opset(m, "com.example", 1);
    ld_graph *g = ob_load_ok(m);
    assert_int_equal(g->nodes[1].opset, 1);
    assert_string_equal(g->nodes[1].domain, "com.example");
    ld_graph_destroy(g);

    m = ob_relu_model();
    m->n_opset_import = 0;
    ob_expect_error(m, LD_ERR_INPUT, "node 'Relu_0' (Relu): domain 'ai.onnx' has no opset import");
    m->ir_version = 2; /* before opset_import existed: opset 1 is implied */
    g = ob_load_ok(m);
    assert_int_equal(g->nodes[0].opset, 1);
    ld_graph_destroy(g);

    m = ob_relu_model();
    ob_output(m->graph, "ghost", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ob_expect_error(m, LD_ERR_INPUT, "graph output 'ghost' is not produced by any node");

    m = ob_relu_model();
    m->graph->node[0]->op_type = ob_str("");
    ob_expect_error(m, LD_ERR_INPUT, "node #0 ('') has no op_type");
}

/* --- external data ----------------------------------------------------------------------- */

/* Writes model.onnx (initializer w: float32 (4) from external data with the
 * given entries; NULL skips an entry) and weights.bin (8 floats 0..7). */
static ld_status load_external(const char *location, const char *offset, const char *length,
                               ld_graph **g, ld_error *err)
{
    ob_make_tmpdir();
    float weights[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    ob_write_file(ob_tmp_path("weights.bin"), weights, sizeof weights);
    Onnx__ModelProto *m = ob_relu_model();
    int64_t four = 4;
    Onnx__TensorProto *t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    if (location)
        ob_external(t, "location", location);
    if (offset)
        ob_external(t, "offset", offset);
    if (length)
        ob_external(t, "length", length);
    ob_external(t, "checksum", "ignored");
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    size_t size;
    uint8_t *buf = ob_pack(m, &size);
    char *path = ob_tmp_path("model.onnx");
    ob_write_file(path, buf, size);
    return ld_onnx_load_file(g, path, err);
}

static void expect_external_error(const char *location, const char *offset, const char *length,
                                  const char *substring)
{
    ld_graph *g = NULL;
    ld_error err;
    ld_status st = load_external(location, offset, length, &g, &err);
    if (st == LD_OK)
        ld_graph_destroy(g);
    ob_expect_message(st, LD_ERR_INPUT, &err, ob_tmpdir(), substring);
    ob_teardown(NULL);
}

static void test_external_data(void **state)
{
    (void)state;
    ld_graph *g = NULL;
    ld_error err;
    assert_int_equal(load_external("weights.bin", "8", "16", &g, &err), LD_OK);
    const ld_tensor *w = g->values[ld_graph_find_value(g, "w")].initializer;
    for (int i = 0; i < 4; i++)
        assert_true(ld_tensor_get_double(w, i) == 2.0 + i);
    ld_graph_destroy(g);
    ob_teardown(NULL);

    /* no length: the rest of the file */
    assert_int_equal(load_external("weights.bin", "16", NULL, &g, &err), LD_OK);
    w = g->values[ld_graph_find_value(g, "w")].initializer;
    assert_true(ld_tensor_get_double(w, 3) == 7.0);
    ld_graph_destroy(g);
    ob_teardown(NULL);

    expect_external_error("missing.bin", NULL, "16", "external data file 'missing.bin' not found");
    expect_external_error("../weights.bin", NULL, "16", "is not a relative path inside");
    expect_external_error("sub/../../weights.bin", NULL, "16", "is not a relative path inside");
    expect_external_error("/etc/passwd", NULL, "16", "is not a relative path inside");
    expect_external_error("weights.bin", "40", NULL, "offset 40 is past the end");
    expect_external_error("weights.bin", "24", "16", "offset 24 + length 16 runs past the end");
    expect_external_error("weights.bin", "0", "12", "is 12 bytes, but its dtype and shape need 16");
    expect_external_error("weights.bin", "-4", NULL, "offset '-4' is not a non-negative integer");
    expect_external_error(NULL, "0", NULL, "external data has no 'location'");

    /* From memory there is no folder to resolve the location against. */
    Onnx__ModelProto *m = ob_relu_model();
    int64_t four = 4;
    Onnx__TensorProto *t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    ob_external(t, "location", "weights.bin");
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "not loaded from a file");
}

/* A sparse file with 16 bytes after the 3 GB mark: 64-bit offsets work. */
static void test_external_data_past_3gb(void **state)
{
    (void)state;
    ob_make_tmpdir();
    const int64_t offset = INT64_C(3) << 30;
    char *bin = ob_tmp_path("big.bin");
    FILE *f = fopen(bin, "wb");
    assert_non_null(f);
    float vals[4] = {1.5f, -2.5f, 3.5f, -4.5f};
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0 || fwrite(vals, sizeof vals, 1, f) != 1) {
        fclose(f);
        skip(); /* filesystem without sparse files / large offsets */
    }
    assert_int_equal(fclose(f), 0);
    Onnx__ModelProto *m = ob_relu_model();
    int64_t four = 4;
    Onnx__TensorProto *t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    ob_external(t, "location", "big.bin");
    ob_external(t, "offset", "3221225472");
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    size_t size;
    uint8_t *buf = ob_pack(m, &size);
    char *path = ob_tmp_path("model.onnx");
    ob_write_file(path, buf, size);
    ld_graph *g = NULL;
    ld_error err;
    if (ld_onnx_load_file(&g, path, &err) != LD_OK)
        fail_msg("%s", err.message);
    const ld_tensor *w = g->values[ld_graph_find_value(g, "w")].initializer;
    assert_memory_equal(w->data, vals, sizeof vals);
    ld_graph_destroy(g);
}

/* --- attributes and subgraphs ----------------------------------------------------------- */

static Onnx__GraphProto *branch(const char *name, const char *op, const char *in,
                                const char *out)
{
    Onnx__GraphProto *g = ob_graph(name);
    ob_node(g, op, "", in, out);
    ob_output(g, out, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    return g;
}

static void test_attribute_kinds(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_relu_model();
    Onnx__NodeProto *n = ob_node(m->graph, "Custom", "all", "y", "z");
    ob_output(m->graph, "z", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    Onnx__AttributeProto *a;
    a = ob_attr(n, "f", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1, a->f = 0.5f;
    a = ob_attr(n, "i", 0); /* no type: inferred, as IR v1 writers did */
    a->has_i = 1, a->i = -7;
    a = ob_attr(n, "s", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1, a->s = (ProtobufCBinaryData){3, (uint8_t *)"a\0b"};
    a = ob_attr(n, "floats", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    static float fl[3] = {1, 2, 3};
    a->floats = fl, a->n_floats = 3;
    a = ob_attr(n, "ints", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    static int64_t in[2] = {4, -5};
    a->ints = in, a->n_ints = 2;
    a = ob_attr(n, "strings", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
    a->strings = ob_mem(2 * sizeof *a->strings), a->n_strings = 2;
    a->strings[0] = (ProtobufCBinaryData){2, (uint8_t *)"hi"};
    a->strings[1] = (ProtobufCBinaryData){0, NULL};
    int64_t one = 1;
    a = ob_attr(n, "t", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = ob_tensor("tt", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    ob_set_raw(a->t, fl, 4);
    a = ob_attr(n, "tensors", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS);
    a->tensors = ob_ptrs(), a->n_tensors = 2;
    a->tensors[0] = ob_tensor("t0", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    ob_set_raw(a->tensors[0], fl + 1, 4);
    a->tensors[1] = ob_tensor("t1", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    ob_set_raw(a->tensors[1], fl + 2, 4);
    a = ob_attr(n, "g", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    a->g = branch("body", "Neg", "y", "gy");
    a = ob_attr(n, "graphs", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS);
    a->graphs = ob_ptrs(), a->n_graphs = 2;
    a->graphs[0] = branch("g0", "Neg", "x", "g0y");
    a->graphs[1] = branch("g1", "Abs", "x", "g1y");
    a = ob_attr(n, "sparse", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR);
    a->sparse_tensor = ob_mem(sizeof *a->sparse_tensor);
    onnx__sparse_tensor_proto__init(a->sparse_tensor);
    int64_t three = 3;
    static int64_t lin[1] = {2};
    a->sparse_tensor->values = ob_tensor("sv", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    ob_set_raw(a->sparse_tensor->values, fl + 2, 4);
    a->sparse_tensor->indices = ob_tensor("", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &one);
    ob_set_raw(a->sparse_tensor->indices, lin, 8);
    a->sparse_tensor->dims = &three, a->sparse_tensor->n_dims = 1;
    a = ob_attr(n, "tp", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO);
    a->tp = ob_value_info("unused", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 1, &one)->type;
    a = ob_attr(n, "tps", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS);
    a->type_protos = ob_ptrs(), a->n_type_protos = 1;
    a->type_protos[0] = ob_value_info("unused", ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, 0, NULL)->type;

    ld_graph *g = ob_load_ok(m);
    const ld_node *node = &g->nodes[ld_graph_find_node(g, "all")];
    ld_error err;
    float f;
    int64_t i;
    const char *s;
    const int64_t *ints;
    const float *floats;
    size_t count;
    assert_int_equal(ld_node_attr_float(node, "f", 9, &f, &err), LD_OK);
    assert_true(f == 0.5f);
    assert_int_equal(ld_node_attr_int(node, "i", 9, &i, &err), LD_OK);
    assert_int_equal(i, -7);
    assert_int_equal(ld_node_attr_int(node, "absent", 9, &i, &err), LD_OK);
    assert_int_equal(i, 9);
    assert_int_equal(ld_node_attr_string(node, "s", NULL, &s, &err), LD_OK);
    assert_int_equal(ld_node_attr(node, "s")->s_len, 3);
    assert_memory_equal(s, "a\0b", 4);
    assert_int_equal(ld_node_attr_floats(node, "floats", &floats, &count, &err), LD_OK);
    assert_int_equal(count, 3);
    assert_true(floats[2] == 3.0f);
    assert_int_equal(ld_node_attr_ints(node, "ints", &ints, &count, &err), LD_OK);
    assert_int_equal(count, 2);
    assert_int_equal(ints[1], -5);
    assert_int_equal(ld_node_attr_int(node, "f", 0, &i, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "node 'all' (Custom): attribute 'f' is float, expected int"));
    const ld_attr *at = ld_node_attr(node, "strings");
    assert_int_equal(at->n, 2);
    assert_string_equal(at->strings[0], "hi");
    assert_string_equal(at->strings[1], "");
    at = ld_node_attr(node, "t");
    assert_true(ld_tensor_get_double(at->t, 0) == 1.0);
    at = ld_node_attr(node, "tensors");
    assert_int_equal(at->n, 2);
    assert_true(ld_tensor_get_double(at->tensors[1], 0) == 3.0);
    at = ld_node_attr(node, "g");
    assert_ptr_equal(at->g->parent, g);
    assert_int_equal(at->g->n_nodes, 1);
    assert_string_equal(at->g->name, "body");
    at = ld_node_attr(node, "graphs");
    assert_int_equal(at->n, 2);
    assert_string_equal(at->graphs[1]->nodes[0].op_type, "Abs");
    at = ld_node_attr(node, "sparse");
    assert_int_equal(at->type, LD_ATTR_SPARSE_TENSOR);
    assert_int_equal(at->t->count, 3);
    assert_true(ld_tensor_get_double(at->t, 2) == 3.0);
    at = ld_node_attr(node, "tp");
    assert_int_equal(at->types[0].kind, LD_TYPE_TENSOR);
    assert_int_equal(at->types[0].dtype, LD_DTYPE_INT8);
    at = ld_node_attr(node, "tps");
    assert_int_equal(at->types[0].dtype, LD_DTYPE_UINT8);
    assert_true(at->types[0].has_shape);
    assert_int_equal(at->types[0].rank, 0);
    ld_graph_destroy(g);

    ob_attr(n, "f", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)->has_i = 1;
    ob_expect_error(m, LD_ERR_INPUT, "node 'all' (Custom): attribute 'f' given twice");
    n->n_attribute--;
    ob_attr(n, "empty", 0);
    ob_expect_error(m, LD_ERR_INPUT, "node 'all' attribute 'empty': no type and no value");
}

static void test_subgraph_outer_scope(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_relu_model();
    int64_t one = 1;
    ob_input(m->graph, "cond", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 0, NULL);
    ob_float_init(m->graph, "w", 3);
    Onnx__NodeProto *n = ob_node(m->graph, "If", "if", "cond", "r");
    ob_output(m->graph, "r", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    Onnx__AttributeProto *then_a = ob_attr(n, "then_branch",
                                            ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    then_a->g = branch("then", "Add", "y,w", "t");
    Onnx__AttributeProto *else_a = ob_attr(n, "else_branch",
                                            ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH);
    /* else: a nested If whose own branch reads x from two levels up. */
    Onnx__GraphProto *else_g = ob_graph("else");
    ob_input(else_g, "unused_in", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
    Onnx__NodeProto *inner = ob_node(else_g, "If", "inner_if", "cond", "e");
    ob_output(else_g, "e", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ob_attr(inner, "then_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g =
        branch("inner_then", "Neg", "x", "n1");
    ob_attr(inner, "else_branch", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH)->g =
        branch("inner_else", "Abs", "x", "n2");
    else_a->g = else_g;

    ld_graph *g = ob_load_ok(m);
    const ld_node *if_node = &g->nodes[ld_graph_find_node(g, "if")];
    /* Relu produces y, so the If comes after it even though it reads y only
     * through its subgraph. */
    assert_true(if_node->index > ld_graph_find_node(g, "Relu_0"));
    /* y, w (then branch); cond, x (the nested If in the else branch reads
     * both from the outer scope, so they pass through the else graph). */
    assert_int_equal(if_node->n_implicit_inputs, 4);
    const ld_graph *then_g = ld_node_attr(if_node, "then_branch")->g;
    assert_ptr_equal(then_g->parent, g);
    int tw = ld_graph_find_value(then_g, "w");
    assert_true(tw >= 0);
    assert_int_equal(then_g->values[tw].kind, LD_VALUE_OUTER_SCOPE);
    assert_null(then_g->values[tw].initializer);
    const ld_value *w = &g->values[ld_graph_find_value(g, "w")];
    assert_int_equal(w->n_consumers, 1);
    assert_int_equal(w->consumers[0], if_node->index);
    const ld_graph *mid = ld_node_attr(if_node, "else_branch")->g;
    assert_int_equal(mid->values[ld_graph_find_value(mid, "x")].kind, LD_VALUE_OUTER_SCOPE);
    assert_int_equal(mid->n_inputs, 1);
    const ld_node *inner_if = &mid->nodes[0];
    assert_int_equal(inner_if->n_implicit_inputs, 1);
    const ld_graph *leaf = ld_node_attr(inner_if, "then_branch")->g;
    assert_ptr_equal(leaf->parent, mid);
    assert_ptr_equal(ld_graph_root(leaf), g);
    assert_int_equal(ld_graph_opset(leaf, ""), 17);
    assert_int_equal(leaf->nodes[0].opset, 17);
    int64_t params;
    ld_graph_parameter_totals(g, &params, NULL);
    assert_int_equal(params, 3);
    ld_graph_destroy(g);

    then_a->g = branch("then", "Add", "y,nowhere", "t");
    ob_expect_error(m, LD_ERR_INPUT, "node 'if' attribute 'then_branch': node 'Add_0' (Add): input "
                                  "'nowhere' is not a graph input");
}

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_minimal_model),
        T(test_initializer_listed_as_input),
        T(test_unsorted_nodes_get_sorted),
        T(test_optional_inputs_and_generated_names),
        T(test_constant_node_and_value_info),
        T(test_chain_of_100000_nodes),
        T(test_empty_garbage_truncated),
        T(test_file_errors_name_the_path),
        T(test_duplicate_names),
        T(test_structure_errors),
        T(test_external_data),
        T(test_external_data_past_3gb),
        T(test_attribute_kinds),
        T(test_subgraph_outer_scope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
