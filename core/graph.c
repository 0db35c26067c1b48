/* layerdiff — graph IR helpers: lookups, attribute getters, names, cleanup
 * (see include/layerdiff/graph.h). Sorting and indexing: core/graph_topo.c. */
#include "layerdiff/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"

void ld_type_info_clear(ld_type_info *type)
{
    if (!type)
        return;
    for (int i = 0; type->dims && i < type->rank; i++)
        free(type->dims[i].param);
    free(type->dims);
    memset(type, 0, sizeof *type);
}

void ld_attr_clear(ld_attr *attr)
{
    if (!attr)
        return;
    free(attr->name);
    free(attr->s);
    ld_tensor_destroy(attr->t);
    ld_graph_destroy(attr->g);
    free(attr->floats);
    free(attr->ints);
    for (size_t i = 0; attr->strings && i < attr->n; i++)
        free(attr->strings[i]);
    free(attr->strings);
    for (size_t i = 0; attr->tensors && i < attr->n; i++)
        ld_tensor_destroy(attr->tensors[i]);
    free(attr->tensors);
    for (size_t i = 0; attr->graphs && i < attr->n; i++)
        ld_graph_destroy(attr->graphs[i]);
    free(attr->graphs);
    size_t n_types = attr->type == LD_ATTR_TYPE_PROTO ? 1 : attr->n;
    for (size_t i = 0; attr->types && i < n_types; i++)
        ld_type_info_clear(&attr->types[i]);
    free(attr->types);
    free(attr->ref_attr_name);
    memset(attr, 0, sizeof *attr);
}

static void node_clear(ld_node *node)
{
    free(node->name);
    free(node->op_type);
    free(node->domain);
    free(node->inputs);
    free(node->outputs);
    free(node->implicit_inputs);
    for (int i = 0; node->attrs && i < node->n_attrs; i++)
        ld_attr_clear(&node->attrs[i]);
    free(node->attrs);
}

static void value_clear(ld_value *value)
{
    free(value->name);
    ld_type_info_clear(&value->type);
    ld_tensor_destroy(value->initializer);
    free(value->consumers);
}

void ld_graph_destroy(ld_graph *g)
{
    if (!g)
        return;
    for (int i = 0; g->nodes && i < g->n_nodes; i++)
        node_clear(&g->nodes[i]);
    free(g->nodes);
    for (int i = 0; g->values && i < g->n_values; i++)
        value_clear(&g->values[i]);
    free(g->values);
    for (int i = 0; g->opsets && i < g->n_opsets; i++)
        free(g->opsets[i].domain);
    free(g->opsets);
    for (int i = 0; g->notes && i < g->n_notes; i++)
        free(g->notes[i]);
    free(g->notes);
    free(g->inputs);
    free(g->outputs);
    free(g->initializers);
    free(g->name);
    free(g->producer_name);
    free(g->producer_version);
    free(g->model_domain);
    free(g->doc_string);
    free(g->model_path);
    ld_strmap_destroy(g->name_index);
    ld_strmap_destroy(g->node_index);
    free(g);
}

int ld_graph_find_value(const ld_graph *g, const char *name)
{
    if (!g || !name)
        return -1;
    if (g->name_index)
        return ld_strmap_get(g->name_index, name);
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i].name && strcmp(g->values[i].name, name) == 0)
            return i;
    return -1;
}

int ld_graph_find_node(const ld_graph *g, const char *name)
{
    if (!g || !name)
        return -1;
    if (g->node_index)
        return ld_strmap_get(g->node_index, name);
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].name && strcmp(g->nodes[i].name, name) == 0)
            return i;
    return -1;
}

const ld_graph *ld_graph_root(const ld_graph *g)
{
    while (g && g->parent)
        g = g->parent;
    return g;
}

/* "" and "ai.onnx" both name the default ONNX domain. */
static bool same_domain(const char *a, const char *b)
{
    if (!a || strcmp(a, "ai.onnx") == 0)
        a = "";
    if (!b || strcmp(b, "ai.onnx") == 0)
        b = "";
    return strcmp(a, b) == 0;
}

int64_t ld_graph_opset(const ld_graph *g, const char *domain)
{
    const ld_graph *root = ld_graph_root(g);
    if (!root)
        return -1;
    for (int i = 0; i < root->n_opsets; i++)
        if (same_domain(root->opsets[i].domain, domain))
            return root->opsets[i].version;
    return -1;
}

ld_status ld_graph_add_note(ld_graph *g, ld_error *err, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);

    char **notes = realloc(g->notes, ((size_t)g->n_notes + 1) * sizeof *notes);
    if (!notes)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory adding a note");
    g->notes = notes;
    notes[g->n_notes] = strdup(line);
    if (!notes[g->n_notes])
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory adding a note");
    g->n_notes++;
    return LD_OK;
}

const ld_attr *ld_node_attr(const ld_node *node, const char *name)
{
    for (int i = 0; i < node->n_attrs; i++)
        if (strcmp(node->attrs[i].name, name) == 0)
            return &node->attrs[i];
    return NULL;
}

/* Looks the attribute up and checks its type; *attr is NULL when absent. */
static ld_status typed_attr(const ld_node *node, const char *name, ld_attr_type want,
                            const ld_attr **attr, ld_error *err)
{
    *attr = ld_node_attr(node, name);
    if (*attr && (*attr)->type != want)
        return ld_error_set(err, LD_ERR_INPUT,
                            "node '%s' (%s): attribute '%s' is %s, expected %s", node->name,
                            node->op_type, name, ld_attr_type_name((*attr)->type),
                            ld_attr_type_name(want));
    return LD_OK;
}

ld_status ld_node_attr_int(const ld_node *node, const char *name, int64_t fallback,
                           int64_t *out, ld_error *err)
{
    const ld_attr *attr;
    ld_status st = typed_attr(node, name, LD_ATTR_INT, &attr, err);
    if (st == LD_OK)
        *out = attr ? attr->i : fallback;
    return st;
}

ld_status ld_node_attr_float(const ld_node *node, const char *name, float fallback,
                             float *out, ld_error *err)
{
    const ld_attr *attr;
    ld_status st = typed_attr(node, name, LD_ATTR_FLOAT, &attr, err);
    if (st == LD_OK)
        *out = attr ? attr->f : fallback;
    return st;
}

ld_status ld_node_attr_string(const ld_node *node, const char *name, const char *fallback,
                              const char **out, ld_error *err)
{
    const ld_attr *attr;
    ld_status st = typed_attr(node, name, LD_ATTR_STRING, &attr, err);
    if (st == LD_OK)
        *out = attr ? attr->s : fallback;
    return st;
}

ld_status ld_node_attr_ints(const ld_node *node, const char *name, const int64_t **out,
                            size_t *n, ld_error *err)
{
    const ld_attr *attr;
    ld_status st = typed_attr(node, name, LD_ATTR_INTS, &attr, err);
    if (st == LD_OK) {
        *out = attr ? attr->ints : NULL;
        *n = attr ? attr->n : 0;
    }
    return st;
}

ld_status ld_node_attr_floats(const ld_node *node, const char *name, const float **out,
                              size_t *n, ld_error *err)
{
    const ld_attr *attr;
    ld_status st = typed_attr(node, name, LD_ATTR_FLOATS, &attr, err);
    if (st == LD_OK) {
        *out = attr ? attr->floats : NULL;
        *n = attr ? attr->n : 0;
    }
    return st;
}

const char *ld_attr_type_name(ld_attr_type type)
{
    switch (type) {
    case LD_ATTR_UNDEFINED: return "undefined";
    case LD_ATTR_FLOAT: return "float";
    case LD_ATTR_INT: return "int";
    case LD_ATTR_STRING: return "string";
    case LD_ATTR_TENSOR: return "tensor";
    case LD_ATTR_GRAPH: return "graph";
    case LD_ATTR_FLOATS: return "floats";
    case LD_ATTR_INTS: return "ints";
    case LD_ATTR_STRINGS: return "strings";
    case LD_ATTR_TENSORS: return "tensors";
    case LD_ATTR_GRAPHS: return "graphs";
    case LD_ATTR_SPARSE_TENSOR: return "sparse_tensor";
    case LD_ATTR_SPARSE_TENSORS: return "sparse_tensors";
    case LD_ATTR_TYPE_PROTO: return "type_proto";
    case LD_ATTR_TYPE_PROTOS: return "type_protos";
    }
    return "unknown";
}

const char *ld_value_kind_name(ld_value_kind kind)
{
    switch (kind) {
    case LD_VALUE_INPUT: return "input";
    case LD_VALUE_INITIALIZER: return "initializer";
    case LD_VALUE_NODE_OUTPUT: return "node output";
    case LD_VALUE_OUTER_SCOPE: return "outer scope";
    }
    return "unknown";
}

const char *ld_type_kind_name(ld_type_kind kind)
{
    switch (kind) {
    case LD_TYPE_UNKNOWN: return "unknown";
    case LD_TYPE_TENSOR: return "tensor";
    case LD_TYPE_SPARSE_TENSOR: return "sparse tensor";
    case LD_TYPE_SEQUENCE: return "sequence";
    case LD_TYPE_MAP: return "map";
    case LD_TYPE_OPTIONAL: return "optional";
    }
    return "unknown";
}

static void add_attr_parameters(const ld_attr *attr, int64_t *params, int64_t *bytes);

static void add_graph_parameters(const ld_graph *g, int64_t *params, int64_t *bytes)
{
    for (int i = 0; i < g->n_initializers; i++) {
        const ld_tensor *t = g->values[g->initializers[i]].initializer;
        if (t) {
            *params += t->count;
            *bytes += (int64_t)t->nbytes;
        }
    }
    /* Subgraphs (If branches, Loop bodies) can carry weights of their own. */
    for (int n = 0; n < g->n_nodes; n++)
        for (int a = 0; a < g->nodes[n].n_attrs; a++)
            add_attr_parameters(&g->nodes[n].attrs[a], params, bytes);
}

static void add_attr_parameters(const ld_attr *attr, int64_t *params, int64_t *bytes)
{
    if (attr->g)
        add_graph_parameters(attr->g, params, bytes);
    for (size_t i = 0; attr->graphs && i < attr->n; i++)
        add_graph_parameters(attr->graphs[i], params, bytes);
}

void ld_graph_parameter_totals(const ld_graph *g, int64_t *params, int64_t *bytes)
{
    int64_t p = 0, b = 0;
    if (g)
        add_graph_parameters(g, &p, &b);
    if (params)
        *params = p;
    if (bytes)
        *bytes = b;
}
