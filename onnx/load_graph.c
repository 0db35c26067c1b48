/* layerdiff — GraphProto -> ld_graph.
 *
 * Order of work: initializers, then graph inputs (an input that also has an
 * initializer is an initializer: older IR versions list every weight as an
 * input), then every node output (so names are known before any input is
 * resolved, whatever order the file lists nodes in), then node inputs,
 * attributes and subgraphs, graph outputs and value_info, and finally
 * ld_graph_finalize sorts the nodes and fills consumers. A name a subgraph
 * reads but does not define must exist in an enclosing graph; it becomes an
 * LD_VALUE_OUTER_SCOPE value there and an implicit input of the node that
 * owns the subgraph, so the outer value lives until that node has run. */
#include "onnx/onnx_internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"

typedef struct builder {
    ld_graph *g;
    const ld_onnx_ctx *ctx;
    int values_capacity;
} builder;

static ld_status nomem(ld_error *err)
{
    return ld_error_set(err, LD_ERR_NOMEM, "out of memory building the graph");
}

/* Appends a value named `name` (copied) and indexes it. The caller has
 * checked the name is new. */
static ld_status add_value(builder *b, const char *name, ld_value_kind kind, int *index,
                           ld_error *err)
{
    ld_graph *g = b->g;
    if (g->n_values == b->values_capacity) {
        if (b->values_capacity > INT_MAX / 2)
            return ld_error_set(err, LD_ERR_NOMEM, "too many tensors in one graph");
        int capacity = b->values_capacity ? 2 * b->values_capacity : 64;
        ld_value *values = realloc(g->values, (size_t)capacity * sizeof *values);
        if (!values)
            return nomem(err);
        g->values = values;
        b->values_capacity = capacity;
    }
    ld_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->producer = -1;
    v->kind = kind;
    v->name = strdup(name);
    if (!v->name)
        return nomem(err);
    g->n_values++;
    *index = g->n_values - 1;
    return ld_strmap_put(g->name_index, v->name, *index, err);
}

/* What an existing value is, for "duplicate tensor name" messages. */
static void describe_value(const ld_graph *g, int v, char *buf, size_t size)
{
    const ld_value *value = &g->values[v];
    if (value->kind == LD_VALUE_NODE_OUTPUT && value->producer >= 0)
        snprintf(buf, size, "the output of node '%s'", g->nodes[value->producer].name);
    else if (value->kind == LD_VALUE_INITIALIZER)
        snprintf(buf, size, "an initializer");
    else if (value->kind == LD_VALUE_INPUT)
        snprintf(buf, size, "a graph input");
    else
        snprintf(buf, size, "a %s value", ld_value_kind_name(value->kind));
}

static bool defined_in_enclosing_scope(const ld_graph *g, const char *name)
{
    for (const ld_graph *p = g->parent; p; p = p->parent)
        if (ld_graph_find_value(p, name) >= 0)
            return true;
    return false;
}

/* Index of `name` in this graph; a name only an enclosing graph defines is
 * added as an outer-scope value. -1 when no scope defines it. */
static ld_status resolve_name(builder *b, const char *name, int *index, ld_error *err)
{
    *index = ld_strmap_get(b->g->name_index, name);
    if (*index >= 0 || !defined_in_enclosing_scope(b->g, name))
        return LD_OK;
    return add_value(b, name, LD_VALUE_OUTER_SCOPE, index, err);
}

static ld_status load_initializers(builder *b, const Onnx__GraphProto *gp, ld_error *err)
{
    ld_graph *g = b->g;
    size_t total = gp->n_initializer + gp->n_sparse_initializer;
    if (total > INT_MAX)
        return ld_error_set(err, LD_ERR_INPUT, "too many initializers (%zu)", total);
    g->initializers = calloc(total ? total : 1, sizeof *g->initializers);
    if (!g->initializers)
        return nomem(err);
    for (size_t i = 0; i < total; i++) {
        bool sparse = i >= gp->n_initializer;
        const Onnx__SparseTensorProto *sp = sparse ? gp->sparse_initializer[i - gp->n_initializer]
                                                   : NULL;
        const Onnx__TensorProto *tp = sparse ? sp->values : gp->initializer[i];
        const char *name = tp && tp->name ? tp->name : "";
        char what[300];
        ld_tensor *t = NULL;
        int v;
        if (!*name)
            return ld_error_set(err, LD_ERR_INPUT, "%sinitializer #%zu has no name",
                                sparse ? "sparse " : "", i);
        if (ld_strmap_get(g->name_index, name) >= 0)
            return ld_error_set(err, LD_ERR_INPUT, "duplicate tensor name '%s': two "
                                "initializers have it", name);
        snprintf(what, sizeof what, "%sinitializer '%s'", sparse ? "sparse " : "", name);
        ld_status st = sparse ? ld_onnx_sparse_to_dense(&t, sp, what, b->ctx, err)
                              : ld_onnx_tensor_from_proto(&t, tp, what, b->ctx, err);
        if (st == LD_OK)
            st = add_value(b, name, LD_VALUE_INITIALIZER, &v, err);
        if (st != LD_OK) {
            ld_tensor_destroy(t);
            return st;
        }
        g->values[v].initializer = t;
        st = ld_onnx_type_from_tensor(&g->values[v].type, t, err);
        if (st != LD_OK)
            return st;
        g->initializers[g->n_initializers++] = v;
    }
    return LD_OK;
}

static ld_status load_inputs(builder *b, const Onnx__GraphProto *gp, ld_error *err)
{
    ld_graph *g = b->g;
    if (gp->n_input > INT_MAX)
        return ld_error_set(err, LD_ERR_INPUT, "too many graph inputs (%zu)", gp->n_input);
    g->inputs = calloc(gp->n_input ? gp->n_input : 1, sizeof *g->inputs);
    if (!g->inputs)
        return nomem(err);
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        char what[300];
        int v = vi->name && *vi->name ? ld_strmap_get(g->name_index, vi->name) : -1;
        if (!vi->name || !*vi->name)
            return ld_error_set(err, LD_ERR_INPUT, "graph input #%zu has no name", i);
        if (v >= 0 && g->values[v].kind == LD_VALUE_INITIALIZER)
            continue; /* an input with a default value: a weight */
        if (v >= 0)
            return ld_error_set(err, LD_ERR_INPUT, "duplicate tensor name '%s': graph input "
                                "listed twice", vi->name);
        snprintf(what, sizeof what, "graph input '%s'", vi->name);
        ld_status st = add_value(b, vi->name, LD_VALUE_INPUT, &v, err);
        if (st == LD_OK)
            st = ld_onnx_type_from_proto(&g->values[v].type, vi->type, what, err);
        if (st != LD_OK)
            return st;
        g->inputs[g->n_inputs++] = v;
    }
    return LD_OK;
}

/* Copies names and op types; unnamed nodes get "<op_type>_<index>", with a
 * suffix when a real node already has that name. */
static ld_status name_nodes(builder *b, const Onnx__GraphProto *gp, ld_error *err)
{
    ld_graph *g = b->g;
    ld_strmap *taken = NULL;
    ld_status st = ld_strmap_create(&taken, gp->n_node, err);
    for (size_t i = 0; i < gp->n_node && st == LD_OK; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        ld_node *node = &g->nodes[i];
        node->index = (int)i;
        node->has_name = np->name && *np->name;
        if (!np->op_type || !*np->op_type) {
            st = ld_error_set(err, LD_ERR_INPUT, "node #%zu ('%s') has no op_type", i,
                              node->has_name ? np->name : "");
            break;
        }
        const char *domain = np->domain && strcmp(np->domain, "ai.onnx") != 0 ? np->domain : "";
        node->op_type = strdup(np->op_type);
        node->domain = strdup(domain);
        node->name = node->has_name ? strdup(np->name) : NULL;
        if (!node->op_type || !node->domain || (node->has_name && !node->name))
            st = nomem(err);
        else if (node->has_name)
            st = ld_strmap_put(taken, node->name, (int)i, err);
    }
    for (size_t i = 0; i < gp->n_node && st == LD_OK; i++) {
        ld_node *node = &g->nodes[i];
        if (node->has_name)
            continue;
        char name[300];
        snprintf(name, sizeof name, "%s_%zu", node->op_type, i);
        for (int k = 1; ld_strmap_get(taken, name) >= 0; k++)
            snprintf(name, sizeof name, "%s_%zu_%d", node->op_type, i, k);
        if (!(node->name = strdup(name)))
            st = nomem(err);
        else
            st = ld_strmap_put(taken, node->name, (int)i, err);
    }
    ld_strmap_destroy(taken);
    return st;
}

/* Registers every node output, refusing a name that already exists. */
static ld_status register_outputs(builder *b, const Onnx__GraphProto *gp, ld_error *err)
{
    ld_graph *g = b->g;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        ld_node *node = &g->nodes[i];
        if (np->n_output > INT_MAX || np->n_input > INT_MAX)
            return ld_error_set(err, LD_ERR_INPUT, "node '%s': too many inputs/outputs",
                                node->name);
        node->outputs = calloc(np->n_output ? np->n_output : 1, sizeof *node->outputs);
        if (!node->outputs)
            return nomem(err);
        node->n_outputs = (int)np->n_output;
        for (size_t k = 0; k < np->n_output; k++) {
            const char *name = np->output[k];
            int v = -1; /* "" is an omitted optional output */
            if (name && *name) {
                int existing = ld_strmap_get(g->name_index, name);
                if (existing >= 0) {
                    char desc[400];
                    describe_value(g, existing, desc, sizeof desc);
                    return ld_error_set(err, LD_ERR_INPUT, "duplicate tensor name '%s': output "
                                        "of node '%s' (%s) is also %s", name, node->name,
                                        node->op_type, desc);
                }
                ld_status st = add_value(b, name, LD_VALUE_NODE_OUTPUT, &v, err);
                if (st != LD_OK)
                    return st;
                g->values[v].producer = (int)i;
            }
            node->outputs[k] = v;
        }
    }
    return LD_OK;
}

static ld_status resolve_inputs(builder *b, const Onnx__NodeProto *np, ld_node *node,
                                ld_error *err)
{
    node->inputs = calloc(np->n_input ? np->n_input : 1, sizeof *node->inputs);
    if (!node->inputs)
        return nomem(err);
    node->n_inputs = (int)np->n_input;
    for (size_t k = 0; k < np->n_input; k++) {
        const char *name = np->input[k];
        node->inputs[k] = -1; /* "" is an omitted optional input */
        if (!name || !*name)
            continue;
        ld_status st = resolve_name(b, name, &node->inputs[k], err);
        if (st != LD_OK)
            return st;
        if (node->inputs[k] < 0)
            return ld_error_set(err, LD_ERR_INPUT, "node '%s' (%s): input '%s' is not a graph "
                                "input, an initializer or the output of any node", node->name,
                                node->op_type, name);
    }
    return LD_OK;
}

/* Makes every outer-scope value of `sub` an implicit input of `node`. */
static ld_status add_implicit_inputs(builder *b, ld_node *node, const ld_graph *sub,
                                     ld_error *err)
{
    for (int sv = 0; sv < sub->n_values; sv++) {
        if (sub->values[sv].kind != LD_VALUE_OUTER_SCOPE)
            continue;
        int v;
        ld_status st = resolve_name(b, sub->values[sv].name, &v, err);
        if (st != LD_OK)
            return st;
        if (v < 0)
            return ld_error_set(err, LD_ERR_INTERNAL, "node '%s': outer-scope name '%s' "
                                "vanished", node->name, sub->values[sv].name);
        bool seen = false;
        for (int k = 0; k < node->n_implicit_inputs && !seen; k++)
            seen = node->implicit_inputs[k] == v;
        if (seen)
            continue;
        int *grown = realloc(node->implicit_inputs,
                             ((size_t)node->n_implicit_inputs + 1) * sizeof *grown);
        if (!grown)
            return nomem(err);
        node->implicit_inputs = grown;
        node->implicit_inputs[node->n_implicit_inputs++] = v;
    }
    return LD_OK;
}

static ld_status load_attrs(builder *b, const Onnx__NodeProto *np, ld_node *node, ld_error *err)
{
    if (np->n_attribute > INT_MAX)
        return ld_error_set(err, LD_ERR_INPUT, "node '%s': too many attributes", node->name);
    node->attrs = calloc(np->n_attribute ? np->n_attribute : 1, sizeof *node->attrs);
    if (!node->attrs)
        return nomem(err);
    node->n_attrs = (int)np->n_attribute;
    for (size_t k = 0; k < np->n_attribute; k++) {
        ld_attr *attr = &node->attrs[k];
        ld_status st = ld_onnx_attr_from_proto(attr, np->attribute[k], b->g, node->name,
                                               b->ctx, err);
        if (st != LD_OK)
            return st;
        for (size_t j = 0; j < k; j++)
            if (strcmp(node->attrs[j].name, attr->name) == 0)
                return ld_error_set(err, LD_ERR_INPUT, "node '%s' (%s): attribute '%s' given "
                                    "twice", node->name, node->op_type, attr->name);
        if (attr->g)
            st = add_implicit_inputs(b, node, attr->g, err);
        for (size_t j = 0; attr->graphs && j < attr->n && st == LD_OK; j++)
            st = add_implicit_inputs(b, node, attr->graphs[j], err);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

static ld_status load_nodes(builder *b, const Onnx__GraphProto *gp, ld_error *err)
{
    ld_graph *g = b->g;
    if (gp->n_node > INT_MAX / 2)
        return ld_error_set(err, LD_ERR_INPUT, "too many nodes (%zu)", gp->n_node);
    g->nodes = calloc(gp->n_node ? gp->n_node : 1, sizeof *g->nodes);
    if (!g->nodes)
        return nomem(err);
    g->n_nodes = (int)gp->n_node;
    ld_status st = name_nodes(b, gp, err);
    if (st == LD_OK)
        st = register_outputs(b, gp, err);
    for (size_t i = 0; i < gp->n_node && st == LD_OK; i++) {
        ld_node *node = &g->nodes[i];
        node->opset = ld_graph_opset(b->ctx->root, node->domain);
        if (node->opset < 0)
            return ld_error_set(err, LD_ERR_INPUT, "node '%s' (%s): domain '%s' has no opset "
                                "import in the model", node->name, node->op_type,
                                *node->domain ? node->domain : "ai.onnx");
        st = resolve_inputs(b, gp->node[i], node, err);
        if (st == LD_OK)
            st = load_attrs(b, gp->node[i], node, err);
    }
    return st;
}

static ld_status load_outputs(builder *b, const Onnx__GraphProto *gp, ld_error *err)
{
    ld_graph *g = b->g;
    if (gp->n_output > INT_MAX)
        return ld_error_set(err, LD_ERR_INPUT, "too many graph outputs (%zu)", gp->n_output);
    g->outputs = calloc(gp->n_output ? gp->n_output : 1, sizeof *g->outputs);
    if (!g->outputs)
        return nomem(err);
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        char what[300];
        int v;
        if (!vi->name || !*vi->name)
            return ld_error_set(err, LD_ERR_INPUT, "graph output #%zu has no name", i);
        ld_status st = resolve_name(b, vi->name, &v, err);
        if (st != LD_OK)
            return st;
        if (v < 0)
            return ld_error_set(err, LD_ERR_INPUT, "graph output '%s' is not produced by any "
                                "node and is not a graph input or initializer", vi->name);
        ld_value *value = &g->values[v];
        value->is_graph_output = true;
        g->outputs[g->n_outputs++] = v;
        if (value->type.kind != LD_TYPE_UNKNOWN)
            continue; /* inputs and initializers already say what they are */
        snprintf(what, sizeof what, "graph output '%s'", vi->name);
        st = ld_onnx_type_from_proto(&value->type, vi->type, what, err);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

/* value_info: declared types of intermediate values. Entries naming values
 * that do not exist are harmless (exporters leave them behind) and skipped. */
static ld_status load_value_info(builder *b, const Onnx__GraphProto *gp, ld_error *err)
{
    for (size_t i = 0; i < gp->n_value_info; i++) {
        const Onnx__ValueInfoProto *vi = gp->value_info[i];
        int v = vi->name ? ld_strmap_get(b->g->name_index, vi->name) : -1;
        if (v < 0 || b->g->values[v].type.kind != LD_TYPE_UNKNOWN)
            continue;
        char what[300];
        snprintf(what, sizeof what, "value_info '%s'", vi->name);
        ld_status st = ld_onnx_type_from_proto(&b->g->values[v].type, vi->type, what, err);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

ld_status ld_onnx_graph_fill(ld_graph *g, const Onnx__GraphProto *gp, const ld_onnx_ctx *ctx,
                             ld_error *err)
{
    builder b = {g, ctx, 0};
    ld_strmap *names = NULL;
    g->name = strdup(gp->name ? gp->name : "");
    if (!g->name)
        return nomem(err);
    ld_status st = ld_strmap_create(&names, gp->n_initializer + gp->n_input + gp->n_node, err);
    g->name_index = names;
    if (st == LD_OK)
        st = load_initializers(&b, gp, err);
    if (st == LD_OK)
        st = load_inputs(&b, gp, err);
    if (st == LD_OK)
        st = load_nodes(&b, gp, err);
    if (st == LD_OK)
        st = load_outputs(&b, gp, err);
    if (st == LD_OK)
        st = load_value_info(&b, gp, err);
    if (st == LD_OK)
        st = ld_graph_finalize(g, err);
    return st;
}
