/* layerdiff — executor internals shared by exec.c (create, tensors from
 * the pool, computing one node) and exec_step.c (the stepwise run).
 * Private to those two files. */
#ifndef LAYERDIFF_BACKENDS_EXEC_INTERNAL_H
#define LAYERDIFF_BACKENDS_EXEC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/exec.h"
#include "backends/pool.h"

/* Per-node data resolved at create. */
typedef struct exec_node {
    const ld_kernel *kernel;
    void *state;
    ld_layer_numerics numerics;
    bool inplace; /* output 0 may take over a dying input's buffer (kernels/inplace.h) */
    ld_tensor *folded; /* a folded Constant's output, borrowing the attribute's data
                          (foldable_constant in exec.c); its kernel is not run */
    /* chain fusion (exec_fuse.c): the elementwise op (exec_fuse_ops.h,
       LD_FUSE_NONE when the node never fuses) and its attributes */
    int fuse_op;
    float fuse_a, fuse_b;
} exec_node;

struct ld_exec {
    const ld_graph *graph;
    int threads;
    ld_exec_hooks hooks;
    exec_node *nodes;
    int *last_use;          /* per value: last consuming node index, -1 if none */
    ld_tensor **slots;      /* per value: the live tensor during a run */
    bool *owned;            /* per value: slot is the executor's to free */
    ld_pool *pool;
    /* scratch tensors of the node being run (widened inputs, hook copies) */
    ld_tensor **scratch;
    int n_scratch;
    int cap_scratch;
    size_t live_bytes;
    size_t peak_bytes;
    ld_node_profile *profile; /* per node: time and work of the last run */
    /* per-node buffers, sized at create for the widest node */
    const ld_tensor **in_buf;
    ld_tensor **out_buf;
    ld_output_desc *descs;
    /* the stepwise run in progress (ld_exec_begin .. ld_exec_end) */
    bool running;
    int next_node;          /* the node the next step runs */
    int pending;            /* node stepped but not finished, -1 when none */
    /* ld_exec_run_node_on: the node's inputs given by the caller (NULL
       entries: the executor's own), NULL otherwise */
    const ld_tensor *const *foreign;
    /* --max-memory (layerdiff/memory.h): the limit read when a run begins,
       the weights and inputs it holds besides live tensors, the node being
       computed (for the message), and whether the limit stopped it */
    uint64_t max_bytes;
    uint64_t resident_bytes;
    const ld_node *current;
    bool over_limit;
    /* in place (kernels/inplace.h): allowed during ld_exec_run only; the
       value whose buffer the node being computed writes its output 0 to */
    bool donate;
    int donor;
    /* elementwise chain fusion (exec_fuse.c): allowed by the config (the
       observer reads only graph outputs' data) and by ld_exec_set_fusion;
       what the last run fused, for the profile */
    bool fuse;
    int fused_nodes, fused_chains;
    char fuse_note[160];
};

/* Frees the scratch tensors of the node (or chain) just run. */
void ld_exec_release_scratch(ld_exec *e);
/* Returns t's buffer to the pool and frees the tensor. NULL is a no-op. */
void ld_exec_release_tensor(ld_exec *e, ld_tensor *t);
/* Releases outputs[0..node->n_outputs) and sets them to NULL. */
void ld_exec_release_outputs(ld_exec *e, const ld_node *node, ld_tensor **outputs);
/* Computes node i into e->out_buf (pool tensors the caller installs in the
 * slots or releases). Inputs come from the slots, or from e->foreign where
 * set. On failure the outputs are already released. */
ld_status ld_exec_compute_node(ld_exec *e, int i, ld_layer_counters *counters,
                               ld_node_profile *prof, ld_error *err);

/* A pool tensor of dtype and shape (contents undefined), charged to the
 * run's memory budget; *out is new, free with ld_exec_release_tensor. */
ld_status ld_exec_pool_tensor(ld_exec *e, const char *name, ld_dtype dtype, const ld_shape *shape,
                              ld_tensor **out, ld_error *err);

/* --- exec_step.c, for the fused run ---------------------------------------------- */

/* Shows one tensor to the observer (nothing when observer is NULL). */
ld_status ld_exec_observe(ld_exec *e, const ld_node *node, int output_index, int value,
                          const ld_tensor *t, const ld_layer_numerics *numerics,
                          const ld_layer_counters *counters, ld_tensor_observer observer,
                          void *user, ld_error *err);
/* What ld_exec_finish_step does after node i: frees its unconsumed outputs
 * and the values whose last reader it is. */
void ld_exec_retire_node(ld_exec *e, int i);

/* --- exec_fuse.c ------------------------------------------------------------------- */

/* Sets xn->fuse_op and its attributes at create. */
void ld_exec_fuse_classify(const ld_node *node, exec_node *xn);
/* During ld_exec_run with fusion on: when node i starts a chain of at least
 * two fusable nodes, computes the chain, shows every node of [i, i + *covered)
 * to the observer in order and retires them; *covered = 0 when node i does
 * not start a chain (nothing done). */
ld_status ld_exec_fuse_run(ld_exec *e, int i, ld_tensor_observer observer, void *user,
                           int *covered, ld_error *err);

/* For the memory plan (exec_plan.c): the chain ld_exec_fuse_run would
 * compute at node i of ld_exec_run, given the live tensors slots[v] (shape
 * and dtype; data may be NULL) and the values that hold a buffer of the
 * executor's (can_donate[v]). false when e does not fuse or node i starts
 * no chain. */
#define LD_FUSE_DRY_MAX 32
typedef struct ld_fuse_dry {
    int end;                       /* the index after the chain's last node */
    ld_shape shape;                /* every step's (float32) */
    int n;                         /* its steps (fused nodes), in order */
    int node[LD_FUSE_DRY_MAX];
    int value[LD_FUSE_DRY_MAX];    /* the value each step produces */
    bool keep[LD_FUSE_DRY_MAX];    /* materialised: a pool tensor */
    int donor[LD_FUSE_DRY_MAX];    /* keep: the dying value whose buffer it takes, or -1 */
} ld_fuse_dry;
bool ld_exec_fuse_dry(const ld_exec *e, const ld_tensor *const *slots, const bool *can_donate,
                      int i, ld_fuse_dry *out);

#endif
