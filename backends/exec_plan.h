/* layerdiff — the executor's memory plan (private to backends/).
 *
 * A cold run (one per process, as `layerdiff run` is used) used to pay for
 * faulting in the pool's arena as its top grew: a 2 MiB huge page zeroed
 * by the kernel per step, with the other OpenMP thread waiting at a
 * barrier (docs/architecture.md, "Memory and cold runs"). Like a GPU
 * engine that allocates its activation memory when the execution context
 * is created, the backends plan the run at prepare, from the input shapes
 * alone: every node's output shapes from its kernel's infer (shape-only
 * placeholder tensors for computed float values, the real tensors for
 * initializers and folded Constants, shape arithmetic computed for real),
 * then the pool gets and puts the run makes, in order, with the
 * executor's liveness and in-place rules, replayed through a dry copy of
 * the arena (ld_arena_sim). The arena is then faulted in up to the
 * planned top before the timed run.
 *
 * The pass gives up (no plan; the run behaves as without it) whenever it
 * cannot be sure: a kernel whose infer fails (one that would read the
 * values of a placeholder fails: kernel_util.h's ld_krequire_values), a
 * deferred output, a computed non-float value it cannot compute for real,
 * control flow, sequences, an input of unknown dtype. */
#ifndef LAYERDIFF_BACKENDS_EXEC_PLAN_H
#define LAYERDIFF_BACKENDS_EXEC_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "backends/exec.h"

typedef struct ld_exec_plan {
    /* Largest bytes of tensors held at once: what ld_exec_peak_bytes says
     * after the run. */
    size_t peak_live;
    int peak_node;           /* the node being computed at that peak */
    /* Largest held bytes at an allocation the --max-memory check sees
     * (buffers taken over in place are not checked): ld_exec_run, and the
     * stepwise run (every allocation checked: peak_live). */
    size_t peak_checked_run;
    /* The arena's top after ld_exec_run (in-place donation on; chains of
     * elementwise nodes fused when the executor fuses: exec_fuse.c, which
     * the plan asks what it would fuse) and after a stepwise run (begin /
     * step / finish_step: no donation, no fusion). peak_checked_run and
     * peak_node above are ld_exec_run's likewise. */
    size_t top_run;
    size_t top_stepwise;
    /* Per graph value: bytes of the buffer a run without fusion allocates for it, 0 for
     * none (initializers, graph inputs, folded Constants, empty tensors,
     * omitted outputs). n_values entries; owned. */
    size_t *value_bytes;
    int n_values;
    /* No compute hooks: every pool allocation of the run is planned, so
     * peak and tops are exact. With hooks (the emulated engine) their own
     * scratch and replaced outputs are not: see ld_exec_plan_prepare. */
    bool exact;
} ld_exec_plan;

/* Plans a run of e on inputs of input_shapes (one per graph input, of the
 * dtypes the graph declares). Return value: true with *plan filled (free
 * with ld_exec_plan_clear); false when the pass cannot be sure, with the
 * reason in why[why_size] (why may be NULL). Never an error; with the
 * environment variable LD_EXEC_PLAN_DEBUG set the reason goes to stderr. */
bool ld_exec_plan_build(const ld_exec *e, const ld_shape *input_shapes, ld_exec_plan *plan,
                        char *why, size_t why_size);
void ld_exec_plan_clear(ld_exec_plan *plan);

/* For a backend's prepare, after ld_exec_create: plans the run (input
 * shapes may be NULL: nothing is done), calling on the way each node's
 * kernel prepare (kernel.h: packed constant weights, reserved scratch,
 * worker threads; not under a before_compute hook, which hands compute
 * other inputs), and, with a plan, faults in the executor's arena up to
 * the smaller of the two planned tops (ld_pool_prefault; never more than a
 * run would touch). With an exact
 * plan and a --max-memory limit (layerdiff/memory.h) that the run would
 * certainly exceed, fails (LD_ERR_NOMEM) with a one-line message naming
 * the limit and the planned bytes; otherwise the run's own checks stay. */
ld_status ld_exec_plan_prepare(ld_exec *e, const ld_shape *input_shapes, ld_error *err);

/* Bytes ld_exec_plan_prepare faulted in for e's arena (0: none). */
size_t ld_exec_plan_prefaulted(const ld_exec *e);

#endif
