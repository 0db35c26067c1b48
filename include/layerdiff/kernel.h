/* layerdiff — operator kernels and their registry.
 *
 * A kernel is one row of a sorted static table: (domain, op type, first
 * opset version, lifecycle functions), like libonnx's per-op resolver. A
 * node resolves to the row with the same domain and op type whose
 * since_version is the largest <= the model's opset for that domain (cONNXr's
 * operator_set_find). Adding an op touches one file and one table row.
 *
 * Lifecycle, as xboot/libonnx: `init` parses attributes into private state
 * once per node (before anything runs, so attribute errors surface early),
 * `infer` computes output dtypes and shapes from the actual inputs, the
 * executor allocates the outputs, `compute` fills them, `fini` frees state. */
#ifndef LAYERDIFF_KERNEL_H
#define LAYERDIFF_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/numerics.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ld_exec;

typedef struct ld_kernel_ctx {
    const ld_graph *graph;
    const ld_node *node;
    int n_inputs;
    const ld_tensor *const *inputs; /* borrowed; NULL for an omitted optional input */
    int n_outputs;
    ld_tensor **outputs;            /* allocated by the executor from infer's result (or by
                                       compute for deferred outputs); NULL when the model
                                       omits that output */
    void *state;                    /* the kernel's own, from init */
    int threads;                    /* threads the kernel may use */
    const ld_layer_numerics *numerics; /* how this layer rounds (never NULL) */
    ld_layer_counters *counters;    /* where a kernel adds what it counts (accumulate-half
                                       partial overflows); never NULL */
    int64_t flops;                  /* floating-point work done, 2 per multiply-add at the
                                       nominal size (padding taps included): Conv,
                                       ConvTranspose, Gemm and MatMul add to it; the executor
                                       zeroes it and reads it for profiles */
    ld_error *err;
    struct ld_exec *exec;           /* private */
    /* Output rounding fused into the kernel (optional; fields added after the
     * ones above, zero unless a backend sets them). The emulated engine rounds
     * every float output of a layer to the layer's output type after compute:
     * a second pass over memory the kernel has just written. A backend that
     * offers round_block lets a kernel do that rounding itself, block by block,
     * while each block is still in cache. A kernel that uses it calls
     * round_block(round_user, j, block, n) right after writing the final
     * values of block[0, n) of float32 output j (block points into
     * outputs[j]->data), exactly once for every element, from any thread (the
     * hook is thread-safe), and then sets bit j of rounded_outputs. The
     * backend rounds in place and counts as its own pass would (bit for bit
     * the same values and counters) and skips its pass for that output. A
     * kernel that does not set the bit (any path it takes) leaves the output
     * to the backend's pass; calling round_block then is a bug. */
    void (*round_block)(void *round_user, int output, float *block, int64_t n);
    void *round_user;
    unsigned rounded_outputs;
    /* Set with round_block when round_block rounds output 0 to float16
     * (round to nearest even, subnormals kept), which changes nothing and
     * counts nothing for a value that is a normal float16 or a zero. A kernel
     * may then round output 0's values to float16 itself (vcvtps2ph, nearest
     * even) where the rounded value is normal, or zero from a zero, and skip
     * round_block for blocks made only of such values; every block holding
     * any other value still goes to round_block, with those values unrounded
     * (the ones it rounded itself are fixed points there). Values and
     * counters are the same either way. With round_fp16_bits set, such a
     * kernel also stores the float16 bits of each value it rounds itself at
     * the value's index there (room for round_fp16_bits_count values; when
     * output 0 has more, it leaves all rounding to round_block). */
    bool round_fp16_inline;
    uint16_t *round_fp16_bits;
    int64_t round_fp16_bits_count;
    /* Bit j (j < 32): inputs[j] is a copy the backend keeps for this node,
     * at the same address with the same values, for as long as the node's
     * kernel state lives, and hands compute on every run (the emulated
     * engine's rounded weights). A kernel may then keep work derived from
     * it in its state as it does for the graph's own constant data (Conv's
     * packed weights). Zero unless a backend's hook sets it. */
    uint32_t kept_inputs;
} ld_kernel_ctx;

/* What infer says about one output. */
typedef struct ld_output_desc {
    ld_dtype dtype;
    ld_shape shape;
    bool deferred; /* shape depends on the values (NonZero, Unique, ...): compute
                      allocates it with ld_kernel_alloc_output */
} ld_output_desc;

enum {
    /* float16/bfloat16 inputs are widened to float32 by the executor, the kernel
     * computes in float32 and float32 outputs are rounded back to the input's
     * type: "computed in fp32 and rounded per op", as ONNX Runtime's CPU provider
     * does. Kernels with this flag implement float32 (and float64) only. */
    LD_KERNEL_WIDEN_HALF = 1u << 0,
};

typedef struct ld_kernel {
    const char *domain;    /* "" for ai.onnx, "com.microsoft", ... */
    const char *op_type;
    int since_version;     /* first opset version this row implements */
    unsigned flags;
    ld_status (*init)(ld_kernel_ctx *ctx);   /* optional; may set ctx->state */
    ld_status (*infer)(ld_kernel_ctx *ctx, ld_output_desc *outs); /* outs[n_outputs] */
    ld_status (*compute)(ld_kernel_ctx *ctx);
    void (*fini)(void *state);               /* optional */
    /* Optional: called by the backend's prepare (the executor's memory plan,
     * backends/exec_plan.h) once per node, after infer, with the inputs the
     * plan knows: initializers and folded Constants with their data, computed
     * values as shapes only (data NULL), outputs NULL. For work that depends
     * on the weights and shapes alone, done once before the first timed run
     * as a GPU engine does it when it builds: packing constant weights into
     * the layout compute reads, reserving the scratch compute will take,
     * starting worker threads. compute must give the same results whether or
     * not prepare ran (it is skipped when the plan gives up); a failure only
     * leaves that work to compute, so prepare returns no status. */
    void (*prepare)(ld_kernel_ctx *ctx);
} ld_kernel;

/* The registry row for (domain, op_type) at opset, or NULL. domain "" and
 * "ai.onnx" are the same. */
const ld_kernel *ld_kernel_find(const char *domain, const char *op_type, int64_t opset);

/* The whole registry, sorted by (domain, op_type, since_version). Borrowed. */
const ld_kernel *ld_kernel_table(int *n);

/* Allocates deferred output i of the node being computed. The tensor is
 * owned by the executor; *out is borrowed. */
ld_status ld_kernel_alloc_output(ld_kernel_ctx *ctx, int i, ld_dtype dtype,
                                 const ld_shape *shape, ld_tensor **out);

/* Error helper for kernels: formats "node '<name>' (<op_type>): <message>". */
ld_status ld_kernel_fail(ld_kernel_ctx *ctx, ld_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
