/* layerdiff — the graph executor shared by the reference and emulated
 * backends (private to backends/).
 *
 * It runs nodes in topological order, resolving each to a registry kernel,
 * with run-time shape inference, and frees every intermediate tensor right
 * after its last consumer has run and the observer has seen it, so peak
 * memory stays near the largest live set. Buffers are recycled through a
 * pool because first-touching fresh pages is slow on these machines. A
 * Constant node with a tensor value is folded when there are no compute
 * hooks, or its layer numerics are fp32 with no output type (the hooks are
 * then not called for it): runs show its attribute's tensor (borrowed)
 * instead of a copy.
 * exec.c holds create/destroy and computing a node, exec_step.c the run,
 * exec_fuse.c the elementwise chain fusion of ld_exec_run.
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
     * the node's final outputs, which it may modify in place, replace
     * (ld_exec_replace_output) and count in *counters. When the node's
     * numerics name a float output_type, the executor does not narrow: the
     * float32 results of WIDEN_HALF kernels reach this hook as computed and
     * the hook converts them. NULL: nothing. */
    ld_status (*after_compute)(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                               ld_layer_counters *counters, ld_error *err);
    /* Elementwise chain fusion with hooks (exec_fuse.c); an executor with
     * hooks fuses only when all three are set. fuse_accept: may the node
     * join a chain, chain_input[j] saying which of its inputs the chain
     * computes without storing them? Called when planning, every run.
     * fuse_before: for each node of a chosen chain, in order, before any
     * computes: like before_compute (inputs[j] NULL for chain inputs; may
     * replace the others and add to ctx->counters) and may set
     * ctx->round_block / round_user, which the chain then calls for every
     * block of the node's output right after computing it (output 0,
     * float32, from any thread; the block is what the next node reads).
     * fuse_after: for each node in order once the chain has computed: like
     * after_compute; outputs[0] is NULL when the value was not stored. */
    bool (*fuse_accept)(void *user, const ld_node *node, const bool *chain_input);
    ld_status (*fuse_before)(void *user, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                             ld_error *err);
    ld_status (*fuse_after)(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                            ld_layer_counters *counters, ld_error *err);
} ld_exec_hooks;

typedef struct ld_exec_config {
    int threads;                 /* 0 = all cores */
    const ld_exec_hooks *hooks;  /* borrowed; NULL = reference behaviour */
    /* The observers of ld_exec_run read tensor data only of graph outputs
     * (ld_backend_config.observe_outputs_only): ld_exec_run may then compute
     * chains of elementwise nodes block by block (exec_fuse.c) and show
     * values it did not materialise with data NULL. The stepwise API and
     * ld_exec_run_node_on never fuse. */
    bool fuse;
} ld_exec_config;

/* Whether chain fusion happens when a config asks for it: LD_EXEC_FUSE_DEFAULT
 * unless ld_exec_set_fusion chose (for tests and --no-fuse comparisons):
 * mode 1 always, 0 never, -1 back to the default. Read at ld_exec_create.
 * Executors with compute hooks fuse only when they offer the fuse_* hooks. */
#define LD_EXEC_FUSE_DEFAULT 1
void ld_exec_set_fusion(int mode);
bool ld_exec_fusion_allowed(const ld_exec_hooks *hooks);

/* "N elementwise nodes fused into M chains (...)" about the last run, or
 * NULL when it fused nothing. Borrowed, valid until the next call. */
const char *ld_exec_fusion_note(ld_exec *e);
/* Nodes the last ld_exec_run computed inside fused chains. */
int ld_exec_fused_nodes(const ld_exec *e);

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

/* Stepwise execution, for running two executors in lockstep (layerdiff run
 * compares a test backend with the reference node by node). ld_exec_run is
 * exactly begin, then step + finish_step for every node in order, then end.
 *
 * ld_exec_begin checks and installs the inputs (one per g->inputs, borrowed
 * until ld_exec_end) and shows them to the observer (may be NULL).
 * ld_exec_step runs node i, which must be the next node in topological
 * order, and shows its outputs to the observer. The node's outputs and
 * inputs stay readable (ld_exec_value) until ld_exec_finish_step(e, i),
 * which frees the values that died at node i; the next step may only come
 * after it. After a failed step, call ld_exec_end. */
ld_status ld_exec_begin(ld_exec *e, const ld_tensor *const *inputs, ld_tensor_observer observer,
                        void *user, ld_error *err);
ld_status ld_exec_step(ld_exec *e, int i, ld_tensor_observer observer, void *user, ld_error *err);
void ld_exec_finish_step(ld_exec *e, int i);
/* The live tensor of graph value v (an initializer's tensor for
 * initializers), or NULL when it is not live. Borrowed. */
const ld_tensor *ld_exec_value(const ld_exec *e, int v);
/* Frees everything the run still holds. Safe to call twice. */
void ld_exec_end(ld_exec *e);

/* Computes node i on foreign inputs: inputs[j] (borrowed) replaces the
 * node's input j; a NULL entry means the executor's own tensor (an
 * initializer, an omitted input, or a live slot). The executor's slots are
 * not touched: the outputs go to the observer, then back to the pool. The
 * hooks run as for a step (they see the foreign tensors, and
 * ld_exec_input_dtype reports their dtypes); kernel state is shared, so
 * calls must not overlap a step. */
ld_status ld_exec_run_node_on(ld_exec *e, int i, const ld_tensor *const *inputs,
                              ld_tensor_observer observer, void *user, ld_error *err);

/* Numerics chosen for node i at create. */
const ld_layer_numerics *ld_exec_node_numerics(const ld_exec *e, int node_index);

/* A scratch copy of src with buffers from the executor's pool; freed by the
 * executor after the node has run. For hooks. *out is borrowed. */
ld_status ld_exec_scratch_clone(ld_kernel_ctx *ctx, const ld_tensor *src, ld_tensor **out);

/* A new scratch tensor (contents undefined) from the pool, freed like
 * ld_exec_scratch_clone's. For hooks that convert an input to another dtype.
 * *out is borrowed. */
ld_status ld_exec_scratch_tensor(ld_kernel_ctx *ctx, const char *name, ld_dtype dtype,
                                 const ld_shape *shape, ld_tensor **out);

/* For after_compute: replaces ctx->outputs[j] by a new pool tensor of dtype
 * (same name and shape, contents undefined) for the hook to fill; the old one
 * (*old) stays readable until the node has run, then goes back to the pool.
 * Both borrowed. */
ld_status ld_exec_replace_output(ld_kernel_ctx *ctx, int j, ld_dtype dtype, ld_tensor **fresh,
                                 const ld_tensor **old);

/* The dtype input j of the node being run is stored in, before any widening
 * (UNDEFINED for an omitted input). For hooks. */
ld_dtype ld_exec_input_dtype(const ld_kernel_ctx *ctx, int j);

/* Peak bytes of tensor data the executor held at once during the last run
 * (initializers and folded Constant outputs excluded) — for tests of
 * liveness and for --max-memory. */
size_t ld_exec_peak_bytes(const ld_exec *e);

/* Time and work of each node (g->n_nodes entries, topological order) in the
 * last run; zero for nodes it did not reach. Time covers gathering inputs,
 * allocating outputs, the hooks and compute, not the observer. Borrowed,
 * valid until the next run or ld_exec_destroy. */
const ld_node_profile *ld_exec_profile(const ld_exec *e);

#endif
