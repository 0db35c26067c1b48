/* layerdiff — private state of the bisect trial runner (backends/trial.c:
 * engines, trials, checkpoints; backends/trial_pass.c: the baseline pass and
 * the reference captures). See layerdiff/bisect.h and docs/bisect.md. */
#ifndef LAYERDIFF_BACKENDS_TRIAL_INTERNAL_H
#define LAYERDIFF_BACKENDS_TRIAL_INTERNAL_H

#include "layerdiff/backend.h"
#include "layerdiff/bisect.h"

/* A tensor of the base run shared between a trial's live set and the
 * checkpoints that saved it: freed when the last holder lets go. */
typedef struct trial_tensor {
    ld_tensor *t;      /* owned (its buffer from the runner's pool) unless borrowed */
    bool borrowed;     /* a graph input: the caller's */
    int refs;          /* holders: one live slot + checkpoints */
    int pins;          /* checkpoints among the holders (for the cache's byte count) */
} trial_tensor;

/* The live set of the base run just before node `node` runs. */
typedef struct trial_checkpoint {
    int node;
    int n;
    int *values;             /* owned; value indices */
    trial_tensor **tensors;  /* owned array; tensors shared */
    uint64_t used;           /* LRU stamp */
} trial_checkpoint;

/* A free buffer kept for reuse (fresh pages are slow to touch). */
typedef struct trial_block {
    void *data;
    size_t cap;
} trial_block;

struct ld_trials {
    ld_trials_config cfg;
    const ld_graph *g;
    const ld_backend_vtable *ref_vt, *emu_vt;
    void *ref, *base, *fp32;          /* backend states */
    ld_engine_config base_cfg, fp32_cfg;
    ld_precision_plan *base_plan;
    bool *candidate;                  /* per node */
    int *candidates, n_candidates;
    int *last_use;                    /* per value: last reading node, -1 none */
    int *output_of;                   /* per value: graph output index, -1 */
    int *out_producer;                /* per graph output: producing node, -1 for inputs */
    ld_tolerance *out_tol;            /* per graph output */
    ld_precision *out_precision;      /* per graph output: the base layer's precision */
    ld_tensor **ref_outputs;          /* per graph output, owned (from the baseline) */
    ld_tensor_metrics *base_metrics;  /* per graph output (baseline) */
    ld_tensor_metrics *metrics;       /* per graph output (last trial) */
    ld_compare_scratch *scratch;
    ld_compare_session *session;      /* the baseline's */
    ld_trials_layer *layers;          /* per node, from the baseline */
    bool baseline_done;

    /* the executor of trials */
    trial_tensor **live;              /* per value */
    const ld_tensor **in_buf;         /* per node input */
    ld_tensor **wide;                 /* per node input: float32 view of a half input */
    void **wide_buf;                  /* its buffer (owned, reused) */
    size_t *wide_cap;
    int max_inputs;
    const char **name_buf;            /* per node input (session items) */
    bool *in_set;                     /* per node: forced to fp32 in this trial */
    bool *wanted;                     /* per node: checkpoint wished */
    trial_checkpoint *cps;            /* sorted by node */
    int n_cps, cap_cps;
    uint64_t clock;
    size_t cache_bytes, cache_peak;
    trial_block *pool;
    int n_pool, cap_pool;
    double last_progress;
    ld_layer_counters last_counters;  /* the engine's counters of the node just run */

    ld_trials_stats stats;
};

/* --- trial.c, used by trial_pass.c --- */

/* Runs node i on `backend` (the base or fp32 engine) with its inputs from the
 * live set; the outputs join the live set and graph outputs are judged into
 * t->metrics. exec_node then frees the values that died at i (compute_node
 * leaves that to release_node). */
ld_status ld_trials_exec_node(ld_trials *t, void *backend, int i, ld_error *err);
ld_status ld_trials_compute_node(ld_trials *t, void *backend, int i, ld_error *err);
void ld_trials_release_node(ld_trials *t, int i);
/* Puts the graph inputs into the live set (borrowed). */
ld_status ld_trials_live_inputs(ld_trials *t, ld_error *err);
/* Drops every live tensor. */
void ld_trials_live_clear(ld_trials *t);
/* Polls the interrupt flag and draws progress. */
ld_status ld_trials_tick(ld_trials *t, int node, ld_error *err);
/* Judges graph output k's tensor against the reference into metrics[k]. */
ld_status ld_trials_judge(ld_trials *t, int k, const ld_tensor *test, ld_tensor_metrics *out,
                          ld_error *err);
double ld_trials_now(void);
/* Saves the live set as the checkpoint before node `node` (node 0: always;
 * others when the budget allows). */
ld_status ld_trials_snapshot(ld_trials *t, int node, ld_error *err);
/* Frees every checkpoint. */
void ld_trials_checkpoints_clear(ld_trials *t);

#endif
