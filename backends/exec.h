/* layerdiff — the graph executor shared by the reference and emulated
 * backends (private to backends/).
 *
 * It runs nodes in topological order, resolving each to a registry kernel,
 * with run-time shape inference, and frees every intermediate tensor right
 * after its last consumer has run and the observer has seen it, so peak
 * memory stays near the largest live set. Buffers are recycled through a
 * pool because first-touching fresh pages is slow on these machines.
 *
 * Backends differ only through hooks: the reference computes float16 and
 * bfloat16 in float32 and rounds per op; the emulated engine rounds a
 * layer's inputs and outputs to the precision its policy picks. */
#ifndef LAYERDIFF_BACKENDS_EXEC_H
#define LAYERDIFF_BACKENDS_EXEC_H

#include "layerdiff/backend.h"
#include "layerdiff/kernel.h"

typedef struct ld_exec ld_exec;

typedef struct ld_exec_hooks {
    void *user;
    /* Numerics of a node; called once per node at create. NULL: fp32, RNE. */
    ld_status (*layer_numerics)(void *user, const ld_node *node, ld_layer_numerics *out,
                                ld_error *err);
    /* Called before compute with the node's inputs as the kernel will see
     * them (float16/bfloat16 already widened for WIDEN_HALF kernels). May
     * replace inputs[i] by a tensor from ld_exec_scratch_clone (e.g. rounded
     * to the layer precision). NULL: nothing. */
    ld_status (*before_compute)(void *user, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                                ld_error *err);
    /* Called after compute (and after narrowing back to float16/bfloat16) on
     * the node's final outputs, which it may modify in place and count in
     * *counters. NULL: nothing. */
    ld_status (*after_compute)(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                               ld_layer_counters *counters, ld_error *err);
} ld_exec_hooks;

typedef struct ld_exec_config {
    int threads;                 /* 0 = all cores */
    const ld_exec_hooks *hooks;  /* borrowed; NULL = reference behaviour */
} ld_exec_config;

/* Resolves a kernel for every node and runs each kernel's init. Fails, before
 * anything runs, on the first node with no kernel (naming node, op type and
 * opset) or with attributes its kernel rejects. g is borrowed and must
 * outlive the executor. Return value: new, free with ld_exec_destroy. */
ld_status ld_exec_create(ld_exec **out, const ld_graph *g, const ld_exec_config *cfg,
                         ld_error *err);
void ld_exec_destroy(ld_exec *e);

/* Runs the graph. inputs: one per g->inputs (borrowed), checked against the
 * declared dtypes and known dims. The observer gets every graph input and
 * every produced tensor; observer may be NULL. */
ld_status ld_exec_run(ld_exec *e, const ld_tensor *const *inputs, ld_tensor_observer observer,
                      void *user, ld_error *err);

/* Numerics chosen for node i at create. */
const ld_layer_numerics *ld_exec_node_numerics(const ld_exec *e, int node_index);

/* A scratch copy of src with buffers from the executor's pool; freed by the
 * executor after the node has run. For hooks. *out is borrowed. */
ld_status ld_exec_scratch_clone(ld_kernel_ctx *ctx, const ld_tensor *src, ld_tensor **out);

/* Peak bytes of tensor data the executor held at once during the last run
 * (initializers excluded) — for tests of liveness and for --max-memory. */
size_t ld_exec_peak_bytes(const ld_exec *e);

#endif
