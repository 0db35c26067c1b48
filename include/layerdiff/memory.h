/* layerdiff — how much memory a run needs, and the limit it must stay under
 * (`--max-memory`, docs/reliability.md).
 *
 * Two checks guard a run. Before it starts, ld_memory_estimate walks the
 * graph with the input shapes: weights, inputs, and the largest set of
 * activations alive at once when intermediate tensors are freed after their
 * last reader (as the executor does), for every tensor whose shape is known
 * statically (declared with concrete or input-bound dims, or following from
 * its inputs for elementwise ops). A run over the limit fails there, before
 * any input is generated. Shapes only known at run time (Reshape to a
 * computed shape, ConstantOfShape, ...) are enforced by the executor: each
 * tensor it allocates is checked against ld_memory_limit(), and the error
 * names the node and the bytes needed. The limit covers the whole run: what
 * every executor of the process holds, added up (the shared budget below). */
#ifndef LAYERDIFF_MEMORY_H
#define LAYERDIFF_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "512M", "4G", "1.5GiB", "100k", "123456" (bytes): a decimal number, maybe
 * with a fraction, then K, M, G or T, optionally followed by "i" and/or "B"
 * (case-insensitive). Every suffix is a power of 1024. Fails (LD_ERR_USAGE,
 * naming the text) on anything else, zero, or more than 2^63 bytes. */
ld_status ld_memory_parse_size(const char *text, uint64_t *out, ld_error *err);

/* 80% of the physical RAM (sysconf), or 0 when the system does not say. */
uint64_t ld_memory_default_limit(void);

/* The process-wide limit the executors enforce on the tensors of a run
 * (weights, inputs and live activations); 0 = none (the default). Set by the
 * CLI from --max-memory before running. */
void ld_memory_limit_set(uint64_t bytes);
uint64_t ld_memory_limit(void);

/* The run's shared budget. Every executor of the process charges the tensors
 * it allocates to one account, so backends that hold tensors at the same
 * time (the reference and the test backend compared in lockstep, and the
 * test layers re-run on the reference's inputs) stay under one limit
 * together, not one limit each. The weights and inputs they share count
 * once: ld_memory_set_resident replaces the resident part (each executor
 * declares it when a run begins; the executors of one run declare the same
 * graph and inputs). Thread-safe (atomics). */
void ld_memory_set_resident(uint64_t bytes);
uint64_t ld_memory_resident(void);
/* Adds bytes to the tensors held unless that would take resident + held
 * past a non-zero limit: then adds nothing and returns false. */
bool ld_memory_try_hold(uint64_t bytes);
/* Adds bytes unconditionally (a buffer taken over in place, tensors made
 * before a run begins). */
void ld_memory_hold(uint64_t bytes);
/* Gives back what a hold took (saturating at 0). */
void ld_memory_release(uint64_t bytes);
/* Tensors held now by every executor, the resident part not included. */
uint64_t ld_memory_held(void);

/* "512 B", "1.5 GiB" (1024-based, one decimal) into buf. Returns buf. */
char *ld_memory_format(uint64_t bytes, char *buf, size_t size);

/* What a run of a graph needs, from what is known before it runs. Byte
 * counts saturate at UINT64_MAX (dims whose product overflows). */
typedef struct ld_memory_estimate {
    uint64_t weight_bytes;      /* initializers */
    uint64_t input_bytes;       /* graph inputs at the given shapes */
    uint64_t peak_bytes;        /* largest live set of node outputs */
    int peak_node;              /* node whose outputs make that peak, or -1 */
    uint64_t total_bytes;       /* weights + inputs + peak */
    int largest_value;          /* value index of the largest single tensor, or -1 */
    uint64_t largest_bytes;
    int n_unknown;              /* node outputs whose size is only known at run time
                                   (not counted: the totals are lower bounds) */
    int backends;               /* executors holding layer outputs at once (0 or 1: one;
                                   2: a lockstep comparison), set by the caller:
                                   ld_memory_check counts the peak that many times */
} ld_memory_estimate;

/* Estimates a run of g on inputs of input_shapes (one per g->inputs). Fails
 * only when out of memory. */
ld_status ld_memory_estimate_run(const ld_graph *g, const ld_shape *input_shapes,
                                 ld_memory_estimate *out, ld_error *err);

/* LD_OK when what the run needs (est->total_bytes, with the peak counted
 * est->backends times) is <= limit (or limit is 0); else LD_ERR_NOMEM with
 * one line saying what the run needs, of what, and the largest tensor. */
ld_status ld_memory_check(const ld_graph *g, const ld_memory_estimate *est, uint64_t limit,
                          ld_error *err);

#ifdef __cplusplus
}
#endif
#endif
