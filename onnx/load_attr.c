/* layerdiff — AttributeProto -> ld_attr, every attribute kind. Subgraphs
 * (GRAPH, GRAPHS) are loaded recursively with the node's graph as parent so
 * their outer-scope references can be checked; nesting depth is that of the
 * model's control flow, not of its node count. */
#include "onnx/onnx_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* IR version 1 writers could omit `type`: infer it from the field set. */
static ld_attr_type infer_type(const Onnx__AttributeProto *p)
{
    if (p->has_f) return LD_ATTR_FLOAT;
    if (p->has_i) return LD_ATTR_INT;
    if (p->has_s) return LD_ATTR_STRING;
    if (p->t) return LD_ATTR_TENSOR;
    if (p->g) return LD_ATTR_GRAPH;
    if (p->sparse_tensor) return LD_ATTR_SPARSE_TENSOR;
    if (p->tp) return LD_ATTR_TYPE_PROTO;
    if (p->n_floats) return LD_ATTR_FLOATS;
    if (p->n_ints) return LD_ATTR_INTS;
    if (p->n_strings) return LD_ATTR_STRINGS;
    if (p->n_tensors) return LD_ATTR_TENSORS;
    if (p->n_graphs) return LD_ATTR_GRAPHS;
    if (p->n_sparse_tensors) return LD_ATTR_SPARSE_TENSORS;
    if (p->n_type_protos) return LD_ATTR_TYPE_PROTOS;
    return LD_ATTR_UNDEFINED;
}

/* ONNX strings are bytes: copy with an added NUL, keeping embedded NULs. */
static char *copy_bytes(const ProtobufCBinaryData *b)
{
    char *s = malloc(b->len + 1);
    if (!s)
        return NULL;
    if (b->len)
        memcpy(s, b->data, b->len);
    s[b->len] = '\0';
    return s;
}

static ld_status load_subgraph(ld_graph **out, const Onnx__GraphProto *proto, ld_graph *scope,
                               const char *what, const ld_onnx_ctx *ctx, ld_error *err)
{
    ld_graph *g = calloc(1, sizeof *g);
    if (!g)
        return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
    g->parent = scope;
    ld_status st = ld_onnx_graph_fill(g, proto, ctx, err);
    if (st != LD_OK) {
        ld_error_prefix(err, "%s", what);
        ld_graph_destroy(g);
        return st;
    }
    *out = g;
    return LD_OK;
}

/* Allocates a zeroed array of n elements (at least one, so NULL means OOM). */
static void *alloc_array(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

static ld_status load_lists(ld_attr *out, const Onnx__AttributeProto *p, ld_graph *scope,
                            const char *what, const ld_onnx_ctx *ctx, ld_error *err)
{
    ld_status st = LD_OK;
    switch (out->type) {
    case LD_ATTR_FLOATS:
        out->n = p->n_floats;
        if (!(out->floats = alloc_array(p->n_floats, sizeof(float))))
            goto nomem;
        if (p->n_floats)
            memcpy(out->floats, p->floats, p->n_floats * sizeof(float));
        break;
    case LD_ATTR_INTS:
        out->n = p->n_ints;
        if (!(out->ints = alloc_array(p->n_ints, sizeof(int64_t))))
            goto nomem;
        if (p->n_ints)
            memcpy(out->ints, p->ints, p->n_ints * sizeof(int64_t));
        break;
    case LD_ATTR_STRINGS:
        out->n = p->n_strings;
        if (!(out->strings = alloc_array(p->n_strings, sizeof(char *))))
            goto nomem;
        for (size_t i = 0; i < p->n_strings; i++)
            if (!(out->strings[i] = copy_bytes(&p->strings[i])))
                goto nomem;
        break;
    case LD_ATTR_TENSORS:
        out->n = p->n_tensors;
        if (!(out->tensors = alloc_array(p->n_tensors, sizeof(ld_tensor *))))
            goto nomem;
        for (size_t i = 0; i < p->n_tensors && st == LD_OK; i++)
            st = ld_onnx_tensor_from_proto(&out->tensors[i], p->tensors[i], what, ctx, err);
        break;
    case LD_ATTR_SPARSE_TENSORS:
        out->n = p->n_sparse_tensors;
        if (!(out->tensors = alloc_array(p->n_sparse_tensors, sizeof(ld_tensor *))))
            goto nomem;
        for (size_t i = 0; i < p->n_sparse_tensors && st == LD_OK; i++)
            st = ld_onnx_sparse_to_dense(&out->tensors[i], p->sparse_tensors[i], what, ctx, err);
        break;
    case LD_ATTR_GRAPHS:
        out->n = p->n_graphs;
        if (!(out->graphs = alloc_array(p->n_graphs, sizeof(ld_graph *))))
            goto nomem;
        for (size_t i = 0; i < p->n_graphs && st == LD_OK; i++)
            st = load_subgraph(&out->graphs[i], p->graphs[i], scope, what, ctx, err);
        break;
    case LD_ATTR_TYPE_PROTOS:
        out->n = p->n_type_protos;
        if (!(out->types = alloc_array(p->n_type_protos, sizeof(ld_type_info))))
            goto nomem;
        for (size_t i = 0; i < p->n_type_protos && st == LD_OK; i++)
            st = ld_onnx_type_from_proto(&out->types[i], p->type_protos[i], what, err);
        break;
    default:
        st = ld_error_set(err, LD_ERR_INTERNAL, "%s: not a list attribute", what);
        break;
    }
    return st;
nomem:
    return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
}

static ld_status load_value(ld_attr *out, const Onnx__AttributeProto *p, ld_graph *scope,
                            const char *what, const ld_onnx_ctx *ctx, ld_error *err)
{
    switch (out->type) {
    case LD_ATTR_FLOAT:
        out->f = p->f;
        return LD_OK;
    case LD_ATTR_INT:
        out->i = p->i;
        return LD_OK;
    case LD_ATTR_STRING:
        out->s_len = p->s.len;
        if (!(out->s = copy_bytes(&p->s)))
            return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
        return LD_OK;
    case LD_ATTR_TENSOR:
        if (!p->t)
            return ld_error_set(err, LD_ERR_INPUT, "%s: type tensor but no tensor", what);
        return ld_onnx_tensor_from_proto(&out->t, p->t, what, ctx, err);
    case LD_ATTR_SPARSE_TENSOR:
        /* Kept dense: the executor only ever needs the values (ConstantOfShape
         * and Constant's sparse_value). */
        if (!p->sparse_tensor)
            return ld_error_set(err, LD_ERR_INPUT, "%s: type sparse_tensor but no tensor", what);
        return ld_onnx_sparse_to_dense(&out->t, p->sparse_tensor, what, ctx, err);
    case LD_ATTR_GRAPH:
        if (!p->g)
            return ld_error_set(err, LD_ERR_INPUT, "%s: type graph but no graph", what);
        return load_subgraph(&out->g, p->g, scope, what, ctx, err);
    case LD_ATTR_TYPE_PROTO:
        if (!(out->types = calloc(1, sizeof *out->types)))
            return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
        return ld_onnx_type_from_proto(&out->types[0], p->tp, what, err);
    default:
        return load_lists(out, p, scope, what, ctx, err);
    }
}

ld_status ld_onnx_attr_from_proto(ld_attr *out, const Onnx__AttributeProto *p, ld_graph *scope,
                                  const char *node_name, const ld_onnx_ctx *ctx, ld_error *err)
{
    char what[512];
    ld_status st;
    memset(out, 0, sizeof *out);
    if (!p->name || !*p->name)
        return ld_error_set(err, LD_ERR_INPUT, "node '%s': an attribute has no name", node_name);
    snprintf(what, sizeof what, "node '%s' attribute '%s'", node_name, p->name);

    if (p->has_type && p->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED)
        out->type = (ld_attr_type)p->type;
    else
        out->type = infer_type(p);
    if (out->type == LD_ATTR_UNDEFINED)
        return ld_error_set(err, LD_ERR_INPUT, "%s: no type and no value", what);
    if (out->type < LD_ATTR_FLOAT || out->type > LD_ATTR_TYPE_PROTOS)
        return ld_error_set(err, LD_ERR_INPUT, "%s: unknown attribute type %d", what,
                            (int)p->type);
    out->name = strdup(p->name);
    if (!out->name)
        return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
    if (p->ref_attr_name && *p->ref_attr_name) {
        /* Function bodies: the value comes from the calling node. */
        if (!(out->ref_attr_name = strdup(p->ref_attr_name)))
            st = ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
        else
            st = LD_OK;
    } else {
        st = load_value(out, p, scope, what, ctx, err);
    }
    if (st != LD_OK)
        ld_attr_clear(out);
    return st;
}
