/* layerdiff — the graph IR every module works on.
 *
 * A graph is a list of values (every named tensor: graph inputs,
 * initializers, node outputs) and a list of nodes in topological order that
 * refer to values by index. Interning names once makes liveness (who reads
 * a value last) and lookups cheap for the executor, the dump and the
 * comparator. The graph owns everything reachable from it; nodes and values
 * borrow from each other by index. Initializer bytes are copied out of the
 * protobuf once and the protobuf is freed after loading. */
#ifndef LAYERDIFF_GRAPH_H
#define LAYERDIFF_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layerdiff/dtype.h"
#include "layerdiff/error.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One dimension of a declared (value_info) shape. */
typedef struct ld_dim {
    int64_t value;     /* >= 0 when known; -1 when symbolic or unknown */
    char *param;       /* owned; symbolic name ("batch") or NULL */
} ld_dim;

/* Which kind of type a declaration names. layerdiff computes tensors only;
 * the other kinds are recorded so later stages can refuse them clearly. */
typedef enum ld_type_kind {
    LD_TYPE_UNKNOWN = 0,    /* no declaration, or a TypeProto with nothing set */
    LD_TYPE_TENSOR,
    LD_TYPE_SPARSE_TENSOR,
    LD_TYPE_SEQUENCE,
    LD_TYPE_MAP,
    LD_TYPE_OPTIONAL
} ld_type_kind;

/* A declared type: what the model says a value is. For sequence and
 * optional types dtype/dims describe nothing (UNDEFINED, no shape). */
typedef struct ld_type_info {
    ld_type_kind kind;
    ld_dtype dtype;    /* UNDEFINED when the model does not say */
    bool has_shape;    /* false when the model gives no shape at all */
    int rank;
    ld_dim *dims;      /* owned, rank entries */
} ld_type_info;

typedef enum ld_value_kind {
    LD_VALUE_INPUT = 0,     /* graph input fed by the user */
    LD_VALUE_INITIALIZER,   /* constant weight (also: inputs with a default initializer) */
    LD_VALUE_NODE_OUTPUT,   /* produced by a node */
    LD_VALUE_OUTER_SCOPE    /* subgraph only: read from an enclosing graph */
} ld_value_kind;

typedef struct ld_value {
    char *name;             /* owned; the exact ONNX name */
    ld_value_kind kind;
    ld_type_info type;      /* declared type (input/output/value_info/initializer);
                               kind UNKNOWN when nothing declares it, and always for
                               OUTER_SCOPE values (look the name up in `parent`) */
    ld_tensor *initializer; /* owned; for LD_VALUE_INITIALIZER, else NULL. Its data
                               is NULL when the dtype is unsupported (string, complex) */
    int producer;           /* node index, or -1 */
    int *consumers;         /* owned; node indices in topological order (a node
                               reading a value twice appears once). Includes nodes
                               whose subgraphs read the value (implicit_inputs) */
    int n_consumers;
    bool is_graph_output;
} ld_value;

typedef enum ld_attr_type {
    LD_ATTR_UNDEFINED = 0,
    LD_ATTR_FLOAT = 1,
    LD_ATTR_INT = 2,
    LD_ATTR_STRING = 3,
    LD_ATTR_TENSOR = 4,
    LD_ATTR_GRAPH = 5,
    LD_ATTR_FLOATS = 6,
    LD_ATTR_INTS = 7,
    LD_ATTR_STRINGS = 8,
    LD_ATTR_TENSORS = 9,
    LD_ATTR_GRAPHS = 10,
    LD_ATTR_SPARSE_TENSOR = 11,
    LD_ATTR_SPARSE_TENSORS = 12,
    LD_ATTR_TYPE_PROTO = 13,
    LD_ATTR_TYPE_PROTOS = 14
} ld_attr_type;

struct ld_graph;

typedef struct ld_attr {
    char *name;             /* owned */
    ld_attr_type type;
    float f;
    int64_t i;
    char *s;                /* owned, NUL-terminated copy; s_len excludes the NUL
                               (ONNX strings are bytes and may contain NUL) */
    size_t s_len;
    ld_tensor *t;           /* owned */
    struct ld_graph *g;     /* owned subgraph */
    size_t n;               /* element count of the list kinds below */
    float *floats;          /* owned */
    int64_t *ints;          /* owned */
    char **strings;         /* owned, n NUL-terminated copies */
    ld_tensor **tensors;    /* owned */
    struct ld_graph **graphs; /* owned */
    ld_type_info *types;    /* owned; TYPE_PROTO (1 entry) and TYPE_PROTOS (n entries) */
    char *ref_attr_name;    /* owned; set inside function bodies, else NULL */
} ld_attr;

typedef struct ld_node {
    char *name;             /* owned; ONNX name, or a generated "<op_type>_<index>"
                               when the model leaves it empty (has_name false) */
    bool has_name;
    char *op_type;          /* owned */
    char *domain;           /* owned; "" for the default ONNX domain */
    int64_t opset;          /* the opset version imported for this node's domain */
    int n_inputs;
    int *inputs;            /* owned; value indices, -1 for an omitted optional input */
    int n_outputs;
    int *outputs;           /* owned; value indices, -1 for an omitted optional output */
    int n_implicit_inputs;
    int *implicit_inputs;   /* owned; value indices (in this node's graph) that the
                               node's subgraphs read from the outer scope, so the
                               value must stay alive until this node has run */
    int n_attrs;
    ld_attr *attrs;         /* owned */
    int index;              /* position in the topological order */
} ld_node;

typedef struct ld_opset {
    char *domain;           /* owned; "" for ai.onnx */
    int64_t version;
} ld_opset;

typedef struct ld_graph {
    char *name;             /* owned */
    /* Model-level metadata (filled on the top-level graph only). */
    int64_t ir_version;
    char *producer_name;    /* owned, may be "" */
    char *producer_version; /* owned, may be "" */
    char *model_domain;     /* owned, may be "" */
    int64_t model_version;
    char *doc_string;       /* owned, may be "" */
    int n_opsets;
    ld_opset *opsets;       /* owned */
    char *model_path;       /* owned; path the model was loaded from, or NULL */

    int n_values;
    ld_value *values;       /* owned */
    int n_nodes;
    ld_node *nodes;         /* owned, topological order */
    int n_inputs;
    int *inputs;            /* owned; value indices of graph inputs fed by the user
                               (initializers excluded), in declaration order */
    int n_outputs;
    int *outputs;           /* owned; value indices of graph outputs, declaration order */
    int n_initializers;
    int *initializers;      /* owned; value indices, declaration order */

    struct ld_graph *parent; /* borrowed; enclosing graph for subgraphs, else NULL */
    void *name_index;       /* private: name -> value index hash (NULL: linear search) */
    void *node_index;       /* private: node name -> node index hash (NULL: linear search) */

    /* Things the loader accepted but layerdiff cannot compute (string or
     * complex initializers, model-local functions, ...): one line each.
     * The loader puts the notes of subgraphs on the top-level graph. */
    int n_notes;
    char **notes;           /* owned */
} ld_graph;

/* Frees the graph and everything it owns. NULL is a no-op. */
void ld_graph_destroy(ld_graph *g);

/* Makes a graph whose values and nodes are filled in (by the loader or by
 * hand) ready to use: sorts the nodes topologically (stable Kahn: a graph
 * already in order keeps its order), renumbers node indices and producers,
 * fills consumers and builds the name indexes. Node inputs, outputs and
 * implicit inputs must be valid value indices or -1; value producers are
 * recomputed from the node outputs. Fails on a value produced twice, or a
 * cycle (the message names a node on it). Iterative: no recursion depth
 * limit on long chains. */
/* Hand-built graphs: every value needs a unique name and its kind (a node's
 * outputs must be LD_VALUE_NODE_OUTPUT values). */
ld_status ld_graph_finalize(ld_graph *g, ld_error *err);

/* Appends a printf-formatted note to g->notes. */
ld_status ld_graph_add_note(ld_graph *g, ld_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The top-level graph (g itself unless g is a subgraph). */
const ld_graph *ld_graph_root(const ld_graph *g);

/* Index of the value with this exact name, or -1. */
int ld_graph_find_value(const ld_graph *g, const char *name);

/* Index of the node with this name, or -1 (first match in topological order). */
int ld_graph_find_node(const ld_graph *g, const char *name);

/* The opset version imported for a domain ("" or "ai.onnx" = default), or -1.
 * Subgraphs answer with their top-level graph's imports. */
int64_t ld_graph_opset(const ld_graph *g, const char *domain);

/* Attribute lookup on a node: NULL when absent. The typed getters return
 * the attribute's value or `fallback` when absent, and fail with a clear
 * error naming the node when present with the wrong type. */
const ld_attr *ld_node_attr(const ld_node *node, const char *name);
ld_status ld_node_attr_int(const ld_node *node, const char *name, int64_t fallback,
                           int64_t *out, ld_error *err);
ld_status ld_node_attr_float(const ld_node *node, const char *name, float fallback,
                             float *out, ld_error *err);
/* *out is borrowed from the node; fallback may be NULL. */
ld_status ld_node_attr_string(const ld_node *node, const char *name, const char *fallback,
                              const char **out, ld_error *err);
/* *out borrowed; *n = 0 and *out = NULL when absent. */
ld_status ld_node_attr_ints(const ld_node *node, const char *name, const int64_t **out,
                            size_t *n, ld_error *err);
ld_status ld_node_attr_floats(const ld_node *node, const char *name, const float **out,
                              size_t *n, ld_error *err);

/* Lower-case names ("ints", "graph", "initializer", "sequence"). Static strings. */
const char *ld_attr_type_name(ld_attr_type type);
const char *ld_value_kind_name(ld_value_kind kind);
const char *ld_type_kind_name(ld_type_kind kind);

/* Frees what a type info / attribute owns and zeroes it (not the struct
 * itself). Used by the loader while building; NULL is a no-op. */
void ld_type_info_clear(ld_type_info *type);
void ld_attr_clear(ld_attr *attr);

/* Total parameter count (elements) and bytes of all initializers, including
 * those of subgraphs. Initializers without data (string) add elements only. */
void ld_graph_parameter_totals(const ld_graph *g, int64_t *params, int64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
