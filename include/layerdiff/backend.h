/* layerdiff — the backend interface.
 *
 * A backend is a small vtable (ggml's ggml_backend_i idea): create from a
 * config, prepare for a graph and input shapes, run with an observer that is
 * called once per produced tensor, destroy. The observer sees each tensor
 * right after it is computed and before the executor may free it, so dumps
 * and comparisons stream layer by layer and never hold the whole model's
 * activations.
 *
 * Built-in backends register in one table (backends/registry.c). A backend can
 * also come from a shared object given with --backend-plugin: it exports
 *
 *     const ld_backend_vtable *layerdiff_backend_plugin(void);
 *
 * returning a vtable whose abi_version is LD_BACKEND_ABI_VERSION. The plugin
 * may call the public layerdiff API (tensors, errors), which the layerdiff
 * binary exports. See tests/plugins/ for a complete example. */
#ifndef LAYERDIFF_BACKEND_H
#define LAYERDIFF_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/numerics.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever the vtable grows: the loader must not read slots past the
 * end of an older plugin's table. 2: profile. */
#define LD_BACKEND_ABI_VERSION 2
#define LD_BACKEND_PLUGIN_SYMBOL "layerdiff_backend_plugin"

/* One produced tensor, as the observer sees it. Everything is borrowed and
 * valid only during the callback. */
typedef struct ld_tensor_event {
    const ld_graph *graph;
    const ld_node *node;        /* producing node; NULL for graph inputs */
    int output_index;           /* which output of the node */
    int value;                  /* index into graph->values */
    const ld_tensor *tensor;    /* named as the graph value */
    ld_precision precision;     /* precision the layer ran in */
    ld_layer_counters counters; /* present only when the backend counts */
} ld_tensor_event;

/* Returning an error stops the run with that error. */
typedef ld_status (*ld_tensor_observer)(void *user, const ld_tensor_event *ev, ld_error *err);

typedef struct ld_backend_config {
    int threads;                    /* 0 = all cores */
    int n_options;
    const char *const *options;     /* backend-specific "key=value" strings */
    const void *engine;             /* emulated backend: its precision config; else NULL */
} ld_backend_config;

/* Where one node's time went in a run (for `layerdiff run --profile`). */
typedef struct ld_node_profile {
    double seconds;   /* wall time of the node: inputs, outputs, compute (not the observer) */
    int64_t flops;    /* floating-point work, 2 per multiply-add (Conv, ConvTranspose, Gemm,
                         MatMul; 0 for other ops) */
} ld_node_profile;

typedef struct ld_backend_profile {
    int n_nodes;                  /* the graph's nodes, in topological order */
    const ld_node_profile *nodes; /* borrowed; valid until the next run or destroy */
    const char *description;      /* how it computes, e.g. its BLAS (borrowed, may be NULL) */
} ld_backend_profile;

typedef struct ld_backend_vtable {
    int abi_version;                /* LD_BACKEND_ABI_VERSION */
    const char *name;               /* "reference", "emulated", a plugin's own */
    const char *description;        /* one line for --help */

    /* New backend state in *state; freed with destroy. */
    ld_status (*create)(void **state, const ld_backend_config *cfg, ld_error *err);
    /* Resolves kernels and checks the graph (unsupported ops fail here, before
     * anything runs). input_shapes has one shape per g->inputs entry. The graph
     * is borrowed and must outlive the backend. */
    ld_status (*prepare)(void *state, const ld_graph *g, const ld_shape *input_shapes,
                         ld_error *err);
    /* Runs the graph on inputs (one per g->inputs, borrowed). Calls observer for
     * every graph input and every produced tensor, in topological order. */
    ld_status (*run)(void *state, const ld_tensor *const *inputs, ld_tensor_observer observer,
                     void *user, ld_error *err);
    void (*destroy)(void *state);

    /* Optional (NULL when the backend does not offer it): */
    /* The precision node i will run in (for plans and dumps). */
    ld_precision (*node_precision)(void *state, int node_index);
    /* Per-node time and work of the last run. */
    ld_status (*profile)(void *state, ld_backend_profile *out, ld_error *err);
} ld_backend_vtable;

/* Built-in backend by name, or NULL. */
const ld_backend_vtable *ld_backend_find(const char *name);
/* All built-in backends; *n receives the count. Borrowed. */
const ld_backend_vtable *const *ld_backend_list(int *n);
/* dlopens path and returns its vtable (checked: symbol present, ABI version,
 * mandatory slots set). The library stays loaded for the process lifetime. */
ld_status ld_backend_load_plugin(const char *path, const ld_backend_vtable **out,
                                 ld_error *err);

#ifdef __cplusplus
}
#endif
#endif
