/* layerdiff — which layers to keep in fp32 (bisect) and the smallest model
 * that still fails (reduce). docs/bisect.md has the algorithms and the
 * memory/time trade-offs.
 *
 * Three parts, each usable alone:
 *   1. The search (compare/bisect.c): delta debugging and prefix searches
 *      over an abstract oracle "does forcing this set of layers to fp32 make
 *      the outputs pass?". Knows nothing about graphs; unit-tested with
 *      made-up oracles.
 *   2. The trial runner (backends/trial.c, backends/trial_pass.c): runs the
 *      reference once, then answers the oracle cheaply by re-executing the
 *      emulated engine only from the first layer whose precision changed,
 *      reusing the base run's tensors from checkpoints.
 *   3. Sub-model extraction (onnx/extract.c): a standalone ONNX model made of
 *      some nodes of a model, cut tensors becoming graph inputs. */
#ifndef LAYERDIFF_BISECT_H
#define LAYERDIFF_BISECT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layerdiff/compare.h"
#include "layerdiff/engine.h"
#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 1. the search ------------------------------------------------------------------- */

/* The oracle: *pass receives whether the outputs pass when exactly the items
 * set[0..n) (ascending, distinct) are forced to fp32. An error stops the
 * search with that error. */
typedef ld_status (*ld_bisect_oracle)(void *user, const int *set, int n, bool *pass,
                                      ld_error *err);

/* Remembers oracle answers by set, so no set is tried twice. */
typedef struct ld_bisect_memo ld_bisect_memo;

/* Return value: new, free with ld_bisect_memo_destroy. */
ld_status ld_bisect_memo_create(ld_bisect_memo **out, ld_bisect_oracle oracle, void *user,
                                ld_error *err);
void ld_bisect_memo_destroy(ld_bisect_memo *m);
/* Asks the oracle about set[0..n) (any order; duplicates are an internal
 * error), or answers from memory. */
ld_status ld_bisect_memo_test(ld_bisect_memo *m, const int *set, int n, bool *pass,
                              ld_error *err);
/* Oracle calls made, and answers given from memory. */
int ld_bisect_memo_calls(const ld_bisect_memo *m);
int ld_bisect_memo_hits(const ld_bisect_memo *m);

/* Smallest k such that the first k items of `ranking` pass: tries k = 1, 2,
 * 4, ... up to n, then bisects between the last failing and the first
 * passing k (assumes adding layers does not break a passing set; when that
 * does not hold, the k found still passes). *k = -1 when even all n fail;
 * *k = 0 when the empty set passes. */
ld_status ld_bisect_grow(ld_bisect_memo *m, const int *ranking, int n, int *k, ld_error *err);

/* Delta debugging (Zeller and Hildebrandt, "Simplifying and isolating
 * failure-inducing input", 2002) turned around: finds a subset of
 * items[0..n) that passes and is 1-minimal (removing any single item makes
 * it fail). Precondition: items[0..n) pass (checked: LD_ERR_INPUT when
 * not). out (room for n) receives the subset in ascending order, *n_out its
 * size. */
ld_status ld_bisect_ddmin(ld_bisect_memo *m, const int *items, int n, int *out, int *n_out,
                          ld_error *err);

/* Polygraphy's `debug precision --mode bisect`: the layers are 0..n_layers-1
 * in order; a trial marks the first k (from_end false, Polygraphy's
 * "forward") or the last k ("reverse"). Binary search on k exactly as
 * Polygraphy's BisectMarker (starting from k = n_layers). *k receives the
 * smallest passing k found, or -1 when none passes. The oracle sees layer
 * indices. */
ld_status ld_bisect_polygraphy(ld_bisect_memo *m, int n_layers, bool from_end, int *k,
                               ld_error *err);

/* True when set[0..n) passes and every set with one item removed fails
 * (asks the oracle through the memo). For tests and for the final check. */
ld_status ld_bisect_is_one_minimal(ld_bisect_memo *m, const int *set, int n, bool *minimal,
                                   ld_error *err);

/* ---- 2. the trial runner ------------------------------------------------------------- */

typedef struct ld_trials ld_trials;

/* Called during a trial or the baseline pass every few hundred milliseconds
 * at most, for a progress line: the node being run out of n_nodes. */
typedef void (*ld_trials_progress)(void *user, int node, int n_nodes);

typedef struct ld_trials_config {
    const ld_graph *graph;             /* borrowed; must outlive the runner */
    const ld_tensor *const *inputs;    /* one per graph input; borrowed, outlive the runner */
    const ld_engine_config *engine;    /* the test engine (e.g. --fp16); copied */
    const ld_compare_options *compare; /* tolerances (tol borrowed) and culprit threshold;
                                          must outlive the runner */
    int threads;                       /* 0 = all cores */
    bool isolate;                      /* baseline also computes each layer's isolated error */
    size_t cache_bytes;                /* checkpoint budget (0: LD_TRIALS_DEFAULT_CACHE) */
    ld_trials_progress progress;       /* NULL: none */
    void *progress_user;
    const volatile sig_atomic_t *interrupted; /* polled between nodes (NULL: never) */
} ld_trials_config;

#define LD_TRIALS_DEFAULT_CACHE ((size_t)1 << 30)

/* Prepares the reference and two emulated engines: the test engine as
 * configured, and the same with every candidate layer forced to fp32
 * (compute precision and output type, constraints obey). Fails with
 * LD_ERR_USAGE when the plans conflict. Return value: new, free with
 * ld_trials_destroy. */
ld_status ld_trials_create(ld_trials **out, const ld_trials_config *cfg, ld_error *err);
void ld_trials_destroy(ld_trials *t);

/* The baseline pass, once, before any trial: steps the reference node by
 * node and, beside it, the test engine (the empty set) and, with isolate,
 * each test layer on the reference's inputs; every pair goes into a
 * comparison session (finished here). Keeps the reference's graph outputs
 * (the only tensors kept across trials besides checkpoints). */
ld_status ld_trials_baseline(ld_trials *t, ld_error *err);
/* The baseline's session (records, divergence summary). Borrowed. */
const ld_compare_session *ld_trials_session(const ld_trials *t);

/* Candidate layers: nodes whose compute precision or float output type
 * changes when forced to fp32 (in topological order). Borrowed. */
const int *ld_trials_candidates(const ld_trials *t, int *n);
bool ld_trials_is_candidate(const ld_trials *t, int node);

/* What the baseline learnt about one node's isolated error (its worst
 * output). */
typedef struct ld_trials_layer {
    bool measured;         /* it had isolated metrics */
    bool overflow;         /* its isolated output overflowed (or went non-finite alone) */
    double scaled_ulp;     /* isolated error in ulps of its precision at the tensor's scale */
    double max_ulp;        /* per-element isolated max ulp error */
    double max_abs;        /* isolated max abs error */
} ld_trials_layer;
void ld_trials_layer_info(const ld_trials *t, int node, ld_trials_layer *out);

/* The candidates ranked for bisect: overflowing layers first, then by
 * isolated error (scaled ulps) descending, then topological order. new
 * array in *out (free()), *n its size. */
ld_status ld_trials_ranking(const ld_trials *t, int **out, int *n, ld_error *err);

/* One trial's outcome. metrics: one per graph output (borrowed, valid until
 * the next trial). */
typedef struct ld_trial_result {
    bool pass;
    int n_outputs;
    const ld_tensor_metrics *metrics;
    int worst_output;      /* index of the graph output with the largest max abs error
                              relative to its atol (failing ones first); -1 when none */
    int start_node;        /* where it re-executed from (a checkpoint) */
    int first_changed;     /* the first node of the set (g->n_nodes for the empty set) */
    int nodes_run;
    double seconds;
} ld_trial_result;

/* Runs the test engine with nodes[0..n) forced to fp32 (any order; all must
 * be candidates, else LD_ERR_USAGE) and judges the graph outputs against the
 * reference's. Needs the baseline. */
ld_status ld_trials_run(ld_trials *t, const int *nodes, int n, ld_trial_result *res,
                        ld_error *err);
/* The empty set's result (the baseline's outputs). */
void ld_trials_base_result(const ld_trials *t, ld_trial_result *res);

/* Checkpoint positions worth keeping: trials passing through these nodes
 * in the base part of their run save the live tensors there (budget
 * permitting), so later trials cutting there start there. Replaces the
 * previous wish list; nodes are copied. */
ld_status ld_trials_want(ld_trials *t, const int *nodes, int n, ld_error *err);

/* A full run of a fresh emulated engine built from cfg (not the runner's
 * composition of two engines), judged like a trial. For the final check
 * that the flags written out give what the trials found. */
ld_status ld_trials_verify(ld_trials *t, const ld_engine_config *cfg, ld_trial_result *res,
                           ld_error *err);

/* Seconds of one plain run of the test engine (its own run, no observer
 * work), measured now: the unit the benchmark divides trial times by. */
ld_status ld_trials_time_full_run(ld_trials *t, double *seconds, ld_error *err);

typedef struct ld_trials_stats {
    int trials;
    int64_t nodes_run;         /* over all trials */
    double trial_seconds;      /* over all trials */
    double baseline_seconds;
    int checkpoints;           /* held now */
    int checkpoints_made, checkpoints_evicted, checkpoints_skipped;
    size_t cache_bytes;        /* held by checkpoints now */
    size_t cache_peak;
    size_t cache_budget;
} ld_trials_stats;
void ld_trials_get_stats(const ld_trials *t, ld_trials_stats *out);

/* The reference's value of graph output `output_index` (an index into
 * g->outputs) kept from the baseline, or NULL. Borrowed. */
const ld_tensor *ld_trials_reference_output(const ld_trials *t, int output_index);

/* Runs the reference once more and hands over copies of the values
 * values[0..n) (node outputs or graph inputs): out[i] new, caller frees each
 * with ld_tensor_destroy. */
ld_status ld_trials_capture_reference(ld_trials *t, const int *values, int n, ld_tensor **out,
                                      ld_error *err);

/* An --layer-precisions pattern matching exactly the node named `name`
 * (fnmatch specials escaped; safe at the start of a line of an @FILE: a
 * leading '#', whitespace or "op:" are escaped too). Return value: new
 * string (free()), NULL when out of memory. */
char *ld_bisect_exact_pattern(const char *name);

/* ---- 3. sub-model extraction ----------------------------------------------------------- */

/* A graph input of the extracted model: a cut tensor with its exact type. */
typedef struct ld_extract_io {
    int value;             /* value index in the source graph */
    ld_dtype dtype;
    ld_shape shape;
} ld_extract_io;

typedef struct ld_extract_spec {
    int n_nodes;
    const int *nodes;      /* node indices of the source graph to keep */
    int n_inputs;
    const ld_extract_io *inputs;   /* become the graph inputs, in this order */
    int n_outputs;
    const ld_extract_io *outputs;  /* become the graph outputs, in this order */
    const char *graph_name;        /* NULL: "<source graph>_reduced" */
    const char *doc_string;        /* NULL: none */
} ld_extract_spec;

/* Writes to out_path a standalone ONNX model holding the nodes of
 * spec (as the source model's NodeProtos, attributes untouched), the
 * initializers they read (external data and sparse initializers become
 * plain raw data from g), the source's opset imports, IR version and
 * model-local functions, and the given inputs and outputs with their exact
 * dtypes and shapes. g must be the graph loaded from model_path. The file
 * is packed with protobuf-c and written atomically (temporary + rename). */
ld_status ld_onnx_extract(const char *model_path, const ld_graph *g, const ld_extract_spec *spec,
                          const char *out_path, ld_error *err);

/* Nodes for a reduced model around node `target`: the target plus up to
 * `context` producer nodes, nearest first (breadth-first over the inputs);
 * Constant nodes it reads are kept without counting. out (room for
 * g->n_nodes) receives ascending node indices. */
ld_status ld_extract_select(const ld_graph *g, int target, int context, int *out, int *n_out,
                            ld_error *err);

/* The cut tensors of a node set: values the nodes read (inputs and implicit
 * inputs) that are neither initializers nor produced inside the set, in
 * first-use order. out has room for g->n_values. */
void ld_extract_cut(const ld_graph *g, const int *nodes, int n_nodes, int *out, int *n_out);

#ifdef __cplusplus
}
#endif
#endif
