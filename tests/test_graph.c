/* Tests of the graph IR helpers (core/graph.c, core/graph_topo.c) and the
 * private name map (core/strmap.c), on graphs built by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/strmap.h"
#include "layerdiff/graph.h"

/* --- hand-built graphs --------------------------------------------------------- */

/* A graph with values "v0".."v<n-1>", v0 a graph input, the rest node
 * outputs. Nodes are added with add_node; capacity is fixed up front. */
static ld_graph *new_graph(int n_values, int max_nodes)
{
    ld_graph *g = calloc(1, sizeof *g);
    assert_non_null(g);
    g->name = strdup("g");
    g->values = calloc((size_t)n_values, sizeof *g->values);
    g->nodes = calloc((size_t)(max_nodes ? max_nodes : 1), sizeof *g->nodes);
    assert_non_null(g->values);
    assert_non_null(g->nodes);
    g->n_values = n_values;
    for (int v = 0; v < n_values; v++) {
        char name[32];
        snprintf(name, sizeof name, "v%d", v);
        g->values[v].name = strdup(name);
        g->values[v].kind = v == 0 ? LD_VALUE_INPUT : LD_VALUE_NODE_OUTPUT;
        g->values[v].producer = -1;
    }
    return g;
}

static int *int_list(const int *items, int n)
{
    int *out = malloc((size_t)(n ? n : 1) * sizeof *out);
    assert_non_null(out);
    if (n)
        memcpy(out, items, (size_t)n * sizeof *out);
    return out;
}

/* ins/outs end at the first -2 (so -1, "omitted", can be listed). */
static ld_node *add_node(ld_graph *g, const char *name, const int *ins, const int *outs)
{
    ld_node *node = &g->nodes[g->n_nodes];
    node->index = g->n_nodes++;
    node->name = strdup(name);
    node->has_name = true;
    node->op_type = strdup("Op");
    node->domain = strdup("");
    while (ins[node->n_inputs] != -2)
        node->n_inputs++;
    while (outs[node->n_outputs] != -2)
        node->n_outputs++;
    node->inputs = int_list(ins, node->n_inputs);
    node->outputs = int_list(outs, node->n_outputs);
    return node;
}

#define L(...) ((const int[]){__VA_ARGS__, -2})
#define NONE ((const int[]){-2})

static void finalize_ok(ld_graph *g)
{
    ld_error err;
    if (ld_graph_finalize(g, &err) != LD_OK)
        fail_msg("finalize failed: %s", err.message);
}

static void expect_order(const ld_graph *g, const char *const *names)
{
    for (int i = 0; i < g->n_nodes; i++) {
        if (strcmp(g->nodes[i].name, names[i]) != 0)
            fail_msg("position %d: '%s', expected '%s'", i, g->nodes[i].name, names[i]);
        assert_int_equal(g->nodes[i].index, i);
    }
}

/* --- strmap ------------------------------------------------------------------------ */

static void test_strmap(void **state)
{
    (void)state;
    enum { N = 20000 };
    ld_strmap *map = NULL;
    ld_error err;
    assert_int_equal(ld_strmap_create(&map, 0, &err), LD_OK);
    char (*keys)[16] = malloc(N * sizeof *keys);
    assert_non_null(keys);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "key%d", i);
        assert_int_equal(ld_strmap_put(map, keys[i], i, &err), LD_OK);
    }
    assert_int_equal(ld_strmap_size(map), N);
    for (int i = 0; i < N; i++)
        assert_int_equal(ld_strmap_get(map, keys[i]), i);
    assert_int_equal(ld_strmap_get(map, "key"), -1);
    assert_int_equal(ld_strmap_get(map, ""), -1);
    char copy[16] = "key77"; /* lookups compare contents, not pointers */
    assert_int_equal(ld_strmap_get(map, copy), 77);
    assert_int_equal(ld_strmap_put(map, keys[5], 12345, &err), LD_OK);
    assert_int_equal(ld_strmap_get(map, "key5"), 12345);
    assert_int_equal(ld_strmap_size(map), N);
    assert_int_equal(ld_strmap_put(map, "", 7, &err), LD_OK);
    assert_int_equal(ld_strmap_get(map, ""), 7);
    assert_int_equal(ld_strmap_get(NULL, "key1"), -1);
    ld_strmap_destroy(map);
    ld_strmap_destroy(NULL);
    free(keys);
}

/* --- finalize: order, producers, consumers ------------------------------------------------ */

static void test_sorted_graph_keeps_its_order(void **state)
{
    (void)state;
    /* Two independent chains interleaved: a valid order already. */
    ld_graph *g = new_graph(5, 4);
    add_node(g, "a1", L(0), L(1));
    add_node(g, "b1", L(0), L(2));
    add_node(g, "a2", L(1), L(3));
    add_node(g, "b2", L(2), L(4));
    finalize_ok(g);
    expect_order(g, (const char *const[]){"a1", "b1", "a2", "b2"});
    ld_graph_destroy(g);
}

static void test_unsorted_graph_is_sorted_stably(void **state)
{
    (void)state;
    /* Diamond v0 -> top -> (left, right) -> bottom, listed backwards, plus a
     * free node that should keep its place relative to the others. */
    ld_graph *g = new_graph(6, 5);
    add_node(g, "bottom", L(2, 3), L(4));
    add_node(g, "free", L(0), L(5));
    add_node(g, "right", L(1), L(3));
    add_node(g, "left", L(1), L(2));
    add_node(g, "top", L(0), L(1));
    finalize_ok(g);
    expect_order(g, (const char *const[]){"free", "top", "right", "left", "bottom"});
    assert_int_equal(g->values[4].producer, 4);
    assert_int_equal(g->values[1].producer, 1);
    assert_int_equal(g->values[0].producer, -1);
    /* v1 is read by right and left, listed in topological order. */
    assert_int_equal(g->values[1].n_consumers, 2);
    assert_int_equal(g->values[1].consumers[0], 2);
    assert_int_equal(g->values[1].consumers[1], 3);
    assert_int_equal(g->values[4].n_consumers, 0);
    assert_null(g->values[4].consumers);
    /* The indexes follow the new order. */
    assert_int_equal(ld_graph_find_node(g, "bottom"), 4);
    assert_int_equal(ld_graph_find_value(g, "v3"), 3);
    /* Finalizing again changes nothing. */
    finalize_ok(g);
    expect_order(g, (const char *const[]){"free", "top", "right", "left", "bottom"});
    assert_int_equal(g->values[1].n_consumers, 2);
    ld_graph_destroy(g);
}

static void test_consumers_dedupe_and_implicit_inputs(void **state)
{
    (void)state;
    ld_graph *g = new_graph(4, 3);
    add_node(g, "sq", L(0, 0, -1), L(1, -1)); /* reads v0 twice, omits an input and an output */
    ld_node *loop = add_node(g, "loop", L(1), L(2));
    add_node(g, "late", L(0), L(3));
    /* loop's subgraph reads v3 (produced by "late") and v0 from outside. */
    loop->implicit_inputs = int_list(L(3, 0), 2);
    loop->n_implicit_inputs = 2;
    finalize_ok(g);
    expect_order(g, (const char *const[]){"sq", "late", "loop"});
    assert_int_equal(g->values[0].n_consumers, 3); /* sq once, late, loop (implicit) */
    assert_int_equal(g->values[0].consumers[0], 0);
    assert_int_equal(g->values[0].consumers[1], 1);
    assert_int_equal(g->values[0].consumers[2], 2);
    assert_int_equal(g->values[3].n_consumers, 1);
    assert_int_equal(g->values[3].consumers[0], 2);
    ld_graph_destroy(g);
}

static void test_long_chain_sorts_without_recursion(void **state)
{
    (void)state;
    enum { N = 200000 };
    ld_graph *g = new_graph(N + 1, N);
    for (int i = N - 1; i >= 0; i--) { /* listed backwards */
        char name[32];
        snprintf(name, sizeof name, "n%d", i);
        add_node(g, name, L(i), L(i + 1));
    }
    finalize_ok(g);
    for (int i = 0; i < N; i++)
        assert_int_equal(g->nodes[i].outputs[0], i + 1);
    assert_int_equal(ld_graph_find_node(g, "n0"), 0);
    ld_graph_destroy(g);
}

static void test_cycle_names_a_node_on_it(void **state)
{
    (void)state;
    /* "downstream" is listed first and cannot run, but it is not on the
     * cycle (mid <-> back): the message must name mid or back. */
    ld_graph *g = new_graph(6, 4);
    add_node(g, "downstream", L(3), L(5));
    add_node(g, "start", L(0), L(1));
    add_node(g, "mid", L(1, 4), L(2));
    add_node(g, "back", L(2), L(3, 4));
    ld_error err;
    assert_int_equal(ld_graph_finalize(g, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "cycle"));
    if (!strstr(err.message, "'mid'") && !strstr(err.message, "'back'"))
        fail_msg("message names no node of the cycle: %s", err.message);
    ld_graph_destroy(g);
}

static void test_finalize_rejects_bad_graphs(void **state)
{
    (void)state;
    ld_error err;
    ld_graph *g = new_graph(3, 2);
    add_node(g, "one", L(0), L(1));
    add_node(g, "two", L(0), L(1));
    assert_int_equal(ld_graph_finalize(g, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "duplicate tensor name 'v1': produced by node 'one' "
                                        "and by node 'two'"));
    ld_graph_destroy(g);

    g = new_graph(2, 1);
    add_node(g, "writes_input", NONE, L(0));
    assert_int_equal(ld_graph_finalize(g, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "duplicate tensor name 'v0'"));
    ld_graph_destroy(g);

    g = new_graph(2, 1);
    free(g->values[1].name);
    g->values[1].name = strdup("v0");
    assert_int_equal(ld_graph_finalize(g, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "duplicate tensor name 'v0'"));
    ld_graph_destroy(g);

    g = new_graph(2, 1);
    add_node(g, "bad_index", L(7), L(1));
    assert_int_equal(ld_graph_finalize(g, &err), LD_ERR_INTERNAL);
    ld_graph_destroy(g);
}

static void test_lookups_without_index(void **state)
{
    (void)state;
    ld_graph *g = new_graph(3, 2);
    add_node(g, "first", L(0), L(1));
    add_node(g, "first", L(1), L(2)); /* duplicate node names are legal */
    /* Before finalize there is no index: linear search answers. */
    assert_int_equal(ld_graph_find_value(g, "v2"), 2);
    assert_int_equal(ld_graph_find_value(g, "zz"), -1);
    assert_int_equal(ld_graph_find_node(g, "first"), 0);
    finalize_ok(g);
    assert_int_equal(ld_graph_find_node(g, "first"), 0);
    assert_int_equal(ld_graph_find_value(g, "v2"), 2);
    assert_int_equal(ld_graph_find_value(g, NULL), -1);
    assert_int_equal(ld_graph_find_value(NULL, "v2"), -1);
    ld_graph_destroy(g);
    ld_graph_destroy(NULL);
}

/* --- attributes, opsets, totals, names -------------------------------------------------------- */

static void test_attribute_getters(void **state)
{
    (void)state;
    ld_graph *g = new_graph(2, 1);
    ld_node *node = add_node(g, "conv", L(0), L(1));
    node->attrs = calloc(4, sizeof *node->attrs);
    node->n_attrs = 4;
    node->attrs[0] = (ld_attr){.name = strdup("group"), .type = LD_ATTR_INT, .i = 2};
    node->attrs[1] = (ld_attr){.name = strdup("alpha"), .type = LD_ATTR_FLOAT, .f = 0.25f};
    node->attrs[2] = (ld_attr){.name = strdup("mode"), .type = LD_ATTR_STRING,
                               .s = strdup("edge"), .s_len = 4};
    node->attrs[3] = (ld_attr){.name = strdup("pads"), .type = LD_ATTR_INTS, .n = 2,
                               .ints = malloc(2 * sizeof(int64_t))};
    node->attrs[3].ints[0] = 1;
    node->attrs[3].ints[1] = 3;
    ld_error err;
    int64_t i;
    float f;
    const char *s;
    const int64_t *ints;
    const float *floats;
    size_t n;
    assert_int_equal(ld_node_attr_int(node, "group", 1, &i, &err), LD_OK);
    assert_int_equal(i, 2);
    assert_int_equal(ld_node_attr_int(node, "missing", 1, &i, &err), LD_OK);
    assert_int_equal(i, 1);
    assert_int_equal(ld_node_attr_float(node, "alpha", 1, &f, &err), LD_OK);
    assert_true(f == 0.25f);
    assert_int_equal(ld_node_attr_string(node, "mode", "constant", &s, &err), LD_OK);
    assert_string_equal(s, "edge");
    assert_int_equal(ld_node_attr_string(node, "other", "constant", &s, &err), LD_OK);
    assert_string_equal(s, "constant");
    assert_int_equal(ld_node_attr_ints(node, "pads", &ints, &n, &err), LD_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ints[1], 3);
    assert_int_equal(ld_node_attr_ints(node, "strides", &ints, &n, &err), LD_OK);
    assert_int_equal(n, 0);
    assert_null(ints);
    assert_int_equal(ld_node_attr_floats(node, "scales", &floats, &n, &err), LD_OK);
    assert_null(floats);
    assert_int_equal(ld_node_attr_float(node, "group", 0, &f, &err), LD_ERR_INPUT);
    assert_string_equal(err.message, "node 'conv' (Op): attribute 'group' is int, expected float");
    assert_int_equal(ld_node_attr_ints(node, "group", &ints, &n, &err), LD_ERR_INPUT);
    assert_null(ld_node_attr(node, "nope"));
    assert_ptr_equal(ld_node_attr(node, "pads"), &node->attrs[3]);
    ld_graph_destroy(g);
}

static void test_opsets_notes_totals(void **state)
{
    (void)state;
    ld_graph *root = new_graph(3, 1);
    root->opsets = calloc(2, sizeof *root->opsets);
    root->n_opsets = 2;
    root->opsets[0] = (ld_opset){strdup(""), 13};
    root->opsets[1] = (ld_opset){strdup("com.microsoft"), 1};
    assert_int_equal(ld_graph_opset(root, ""), 13);
    assert_int_equal(ld_graph_opset(root, "ai.onnx"), 13);
    assert_int_equal(ld_graph_opset(root, NULL), 13);
    assert_int_equal(ld_graph_opset(root, "com.microsoft"), 1);
    assert_int_equal(ld_graph_opset(root, "ai.onnx.ml"), -1);

    /* v1: float32 (2, 3) weight; v2: a string initializer without data. */
    ld_shape shape = {2, {2, 3}};
    ld_error err;
    root->initializers = calloc(2, sizeof(int));
    root->values[1].kind = LD_VALUE_INITIALIZER;
    assert_int_equal(ld_tensor_create(&root->values[1].initializer, "v1", LD_DTYPE_FLOAT32,
                                      &shape, &err), LD_OK);
    root->values[2].kind = LD_VALUE_INITIALIZER;
    root->values[2].initializer = calloc(1, sizeof(ld_tensor));
    root->values[2].initializer->name = strdup("v2");
    root->values[2].initializer->dtype = LD_DTYPE_STRING;
    root->values[2].initializer->count = 5;
    root->initializers[0] = 1;
    root->initializers[1] = 2;
    root->n_initializers = 2;

    /* A subgraph (If branch) with a weight of its own: int8 (4). */
    ld_graph *sub = new_graph(2, 0);
    sub->parent = root;
    ld_shape four = {1, {4}};
    sub->values[1].kind = LD_VALUE_INITIALIZER;
    assert_int_equal(ld_tensor_create(&sub->values[1].initializer, "w", LD_DTYPE_INT8, &four,
                                      &err), LD_OK);
    sub->initializers = calloc(1, sizeof(int));
    sub->n_initializers = 1;
    sub->initializers[0] = 1;
    ld_node *node = add_node(root, "if", L(0), NONE);
    node->attrs = calloc(1, sizeof *node->attrs);
    node->n_attrs = 1;
    node->attrs[0] = (ld_attr){.name = strdup("then_branch"), .type = LD_ATTR_GRAPH, .g = sub};
    assert_ptr_equal(ld_graph_root(sub), root);
    assert_int_equal(ld_graph_opset(sub, "com.microsoft"), 1);

    int64_t params = -1, bytes = -1;
    ld_graph_parameter_totals(root, &params, &bytes);
    assert_int_equal(params, 6 + 5 + 4);
    assert_int_equal(bytes, 24 + 0 + 4);

    assert_int_equal(ld_graph_add_note(root, &err, "note %d", 1), LD_OK);
    assert_int_equal(ld_graph_add_note(root, &err, "second"), LD_OK);
    assert_int_equal(root->n_notes, 2);
    assert_string_equal(root->notes[0], "note 1");
    ld_graph_destroy(root); /* frees the subgraph too (ASan checks) */
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(ld_attr_type_name(LD_ATTR_INTS), "ints");
    assert_string_equal(ld_attr_type_name(LD_ATTR_GRAPH), "graph");
    assert_string_equal(ld_attr_type_name(LD_ATTR_TYPE_PROTOS), "type_protos");
    assert_string_equal(ld_attr_type_name((ld_attr_type)99), "unknown");
    for (int t = LD_ATTR_UNDEFINED; t <= LD_ATTR_TYPE_PROTOS; t++)
        assert_string_not_equal(ld_attr_type_name((ld_attr_type)t), "unknown");
    assert_string_equal(ld_value_kind_name(LD_VALUE_INITIALIZER), "initializer");
    assert_string_equal(ld_value_kind_name(LD_VALUE_OUTER_SCOPE), "outer scope");
    assert_string_equal(ld_type_kind_name(LD_TYPE_SEQUENCE), "sequence");
    assert_string_equal(ld_type_kind_name(LD_TYPE_TENSOR), "tensor");
}

static void test_clear_helpers(void **state)
{
    (void)state;
    ld_type_info type = {.kind = LD_TYPE_TENSOR, .rank = 2, .has_shape = true};
    type.dims = calloc(2, sizeof *type.dims);
    type.dims[0].param = strdup("batch");
    ld_type_info_clear(&type);
    assert_null(type.dims);
    assert_int_equal(type.rank, 0);
    ld_type_info_clear(NULL);

    ld_attr attr = {.name = strdup("tps"), .type = LD_ATTR_TYPE_PROTOS, .n = 2};
    attr.types = calloc(2, sizeof *attr.types);
    attr.types[1].dims = calloc(1, sizeof(ld_dim));
    attr.types[1].rank = 1;
    attr.types[1].dims[0].param = strdup("N");
    attr.strings = NULL;
    ld_attr_clear(&attr);
    assert_null(attr.name);
    ld_attr_clear(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strmap),
        cmocka_unit_test(test_sorted_graph_keeps_its_order),
        cmocka_unit_test(test_unsorted_graph_is_sorted_stably),
        cmocka_unit_test(test_consumers_dedupe_and_implicit_inputs),
        cmocka_unit_test(test_long_chain_sorts_without_recursion),
        cmocka_unit_test(test_cycle_names_a_node_on_it),
        cmocka_unit_test(test_finalize_rejects_bad_graphs),
        cmocka_unit_test(test_lookups_without_index),
        cmocka_unit_test(test_attribute_getters),
        cmocka_unit_test(test_opsets_notes_totals),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_clear_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
