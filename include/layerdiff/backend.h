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
 * returning a vtable whose abi_version is LD_BACKEND_ABI_VERSION (plugins
 * built for ABI 2, whose table ends after `profile`, still load; their
 * stepwise slots read as NULL). The plugin may call the public layerdiff API
 * (tensors, errors), which the layerdiff binary exports. See tests/plugins/
 * for a complete example. */
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
 * end of an older plugin's table. 2: profile. 3: stepwise execution (begin,
 * step, value, finish_step, end, run_node_on). */
#define LD_BACKEND_ABI_VERSION 3
/* The oldest ABI the plugin loader still accepts. */
#define LD_BACKEND_ABI_MIN_VERSION 2
#define LD_BACKEND_PLUGIN_SYMBOL "layerdiff_backend_plugin"

/* One produced tensor, as the observer sees it. Everything is borrowed and
 * valid only during the callback. */
typedef struct ld_tensor_event {
    const ld_graph *graph;
    const ld_node *node;        /* producing node; NULL for graph inputs */
    int output_index;           /* which output of the node */
    int value;                  /* index into graph->values */
    const ld_tensor *tensor;    /* named as the graph value. Its data is NULL (shape and
                                   dtype still set) for a value the backend computed
                                   without storing it (elementwise chain fusion,
                                   docs/architecture.md) or would have had to convert
                                   for the observer (the emulated engine's float16
                                   views): only in `run` with
                                   ld_backend_config.observe_outputs_only set, never
                                   for a graph input or output */
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
    /* Added after ABI 3's first release, at the end so that plugins built
     * before it read the fields above unchanged (they never see it). True
     * when the observers passed to `run` read tensor data only of graph
     * outputs (and of graph inputs): the backend may then compute several
     * nodes at once without storing the values between them, and shows such
     * a value to the observer with tensor->data NULL. Every node output is
     * still reported, in topological order, with its counters. The stepwise
     * slots and run_node_on are not affected. false: every event has data. */
    bool observe_outputs_only;
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

    /* ABI 3, optional: stepwise execution, so that `layerdiff run` can run a
     * test backend in lockstep with the reference and compare each tensor the
     * moment both exist. A backend offers all six or none (the caller checks
     * all six); without them `run` falls back to comparing against a
     * temporary dump of the reference, without isolated error.
     *
     * begin: like run's start: takes the inputs (borrowed until end) and
     * reports the graph inputs to the observer. step: runs node i (strictly
     * the next node in topological order) and reports its outputs. After
     * step(i), node i's outputs and inputs stay readable through value()
     * until finish_step(i) frees what died at node i; the next step comes
     * after finish_step. end: frees everything; also after a failed step. */
    ld_status (*begin)(void *state, const ld_tensor *const *inputs, ld_tensor_observer observer,
                       void *user, ld_error *err);
    ld_status (*step)(void *state, int node_index, ld_tensor_observer observer, void *user,
                      ld_error *err);
    /* The live tensor of graph value v as the backend holds it (possibly a
     * wider type than observers see, with the same values), or NULL. */
    const ld_tensor *(*value)(void *state, int value_index);
    void (*finish_step)(void *state, int node_index);
    void (*end)(void *state);
    /* Isolated execution: computes node i on the caller's input tensors
     * (one per node input, borrowed; NULL = the backend's own tensor, as for
     * initializers and omitted inputs), reports the outputs to the observer,
     * then frees them. The backend's own run state is unchanged. Called
     * between step(i - 1)'s finish_step and step(i) or after step(i) (the
     * backend's own inputs of node i are then live): a backend that stores
     * values in a narrower type first converts the caller's inputs to the
     * type it holds for them, exactly as its own producer would have. */
    ld_status (*run_node_on)(void *state, int node_index, const ld_tensor *const *inputs,
                             ld_tensor_observer observer, void *user, ld_error *err);
} ld_backend_vtable;

/* True when vt offers every stepwise slot (ABI 3). */
bool ld_backend_is_stepwise(const ld_backend_vtable *vt);

/* Built-in backend by name, or NULL. */
const ld_backend_vtable *ld_backend_find(const char *name);
/* All built-in backends; *n receives the count. Borrowed. */
const ld_backend_vtable *const *ld_backend_list(int *n);
/* dlopens path and returns its vtable (checked: symbol present, ABI version
 * between LD_BACKEND_ABI_MIN_VERSION and LD_BACKEND_ABI_VERSION, mandatory
 * slots set). An older plugin's table is copied into a full-size one with
 * the slots it lacks set to NULL (abi_version kept). The library and the
 * table stay for the process lifetime. */
ld_status ld_backend_load_plugin(const char *path, const ld_backend_vtable **out,
                                 ld_error *err);

#ifdef __cplusplus
}
#endif
#endif
