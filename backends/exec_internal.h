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
};

/* Returns t's buffer to the pool and frees the tensor. NULL is a no-op. */
void ld_exec_release_tensor(ld_exec *e, ld_tensor *t);
/* Releases outputs[0..node->n_outputs) and sets them to NULL. */
void ld_exec_release_outputs(ld_exec *e, const ld_node *node, ld_tensor **outputs);
/* Computes node i into e->out_buf (pool tensors the caller installs in the
 * slots or releases). Inputs come from the slots, or from e->foreign where
 * set. On failure the outputs are already released. */
ld_status ld_exec_compute_node(ld_exec *e, int i, ld_layer_counters *counters,
                               ld_node_profile *prof, ld_error *err);

#endif
