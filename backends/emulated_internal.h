/* layerdiff — the emulated backend's shared state (private to the
 * backends/emulated*.c files). The backend is split by concern:
 *   emulated.c          the vtable: create, prepare, run, stepwise execution;
 *   emulated_inputs.c   rounding a layer's inputs (before compute), constants cached;
 *   emulated_outputs.c  rounding and counting its outputs (after compute, or in the
 *                       kernel through ld_kernel_ctx.round_block) and what observers see;
 *   emulated_isolate.c  one layer run on another backend's inputs (isolation);
 *   emulated_count.c    the counting rounding itself (vector code; levels and the
 *                       test switch in emulated_count_internal.h, the AVX2 code in
 *                       emulated_count_avx2.c).
 * See emulated.c for what the engine does and docs/numerics.md for why. */
#ifndef LAYERDIFF_BACKENDS_EMULATED_INTERNAL_H
#define LAYERDIFF_BACKENDS_EMULATED_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/emulated_count.h"
#include "backends/exec.h"
#include "layerdiff/engine.h"

/* A constant input (initializer or Constant output) as a layer sees it. */
typedef struct ld_emu_cached_input {
    bool ready;
    ld_tensor *tensor;   /* owned float32 copy, rounded; NULL: the input is used as it is */
    ld_emu_tally events;
    bool has_nan, has_inf;
} ld_emu_cached_input;

typedef struct ld_emu_node {
    unsigned kernel_flags;
    ld_emu_cached_input *cache; /* n_inputs entries, allocated at prepare */
} ld_emu_node;

enum { LD_EMU_VALUE_KNOWN = 1, LD_EMU_VALUE_NAN = 2, LD_EMU_VALUE_INF = 4 };

/* What the backend knows about a value's tensor in the current run. */
typedef struct ld_emu_value {
    unsigned char flags; /* LD_EMU_VALUE_*: NaN / inf scanned or counted */
    int exact;           /* -1, or the ld_precision a float32 tensor's values are exact in */
    ld_dtype show_as;    /* the type observers see it in; UNDEFINED: as stored */
} ld_emu_value;

/* The output rounding a kernel does itself for the node being computed
 * (ld_kernel_ctx.round_block): what to round to, and what it counted. The
 * counters are added to from the kernel's threads (atomically). */
typedef struct ld_emu_fused {
    const ld_kernel_ctx *ctx;  /* the node being computed; NULL when none is offered */
    ld_precision precision;    /* the layer's output type as a precision */
    ld_round_options round;
    bool keep;                 /* also store output 0's float16 bits in show_buf */
    int64_t kept;              /* elements of output 0 whose bits show_buf holds */
    ld_emu_tally *tally;       /* per output (max_outputs entries, owned) */
    int max_outputs;
} ld_emu_fused;

/* A node of a fused elementwise chain (exec_fuse.c): its output rounding,
 * done per block by the chain (round_user of ld_emu_fuse_round_block), what
 * it counted and what its inputs from outside the chain held. */
typedef struct ld_emu_fuse_node {
    struct ld_emulated_backend *b;
    ld_precision precision;    /* the layer's output type as a precision */
    ld_round_options round;
    ld_emu_tally tally;        /* added to from the chain's threads (atomically) */
    bool in_nan, in_inf;       /* inputs from outside the chain hold NaN / +-inf */
} ld_emu_fuse_node;

struct ld_emu_observe_wrap;

typedef struct ld_emulated_backend {
    int threads;
    ld_engine_config cfg;       /* owned copy */
    const ld_graph *graph;      /* borrowed, set by prepare */
    ld_precision_plan *plan;    /* owned */
    ld_emu_node *nodes;         /* owned, per node */
    ld_emu_value *values;       /* owned, per value */
    bool in_nan, in_inf;        /* the node being run: a float input holds NaN / +-inf */
    void *show_buf;             /* owned; what observers see of a converted tensor */
    size_t show_cap;
    int shown_value;            /* the value whose float16 bits show_buf holds from its
                                   rounding, -1 for none */
    bool observing;             /* the run has an observer */
    ld_emu_fused fused;         /* owned tally array */
    bool unfused;               /* ld_emulated_set_fused_rounding(false): no round_block */
    ld_emu_fuse_node *fuse;     /* owned, per node: chain fusion state */
    bool fuse_allowed;          /* the config's observe_outputs_only */
    bool outputs_only_run;      /* in `run` with fuse_allowed: the observer reads only
                                   graph outputs' data (not in the stepwise calls) */
    char description[320];      /* the profile's */
    ld_exec *exec;              /* owned */
    struct ld_emu_observe_wrap *wrap; /* owned; the stepwise run's observer */
} ld_emulated_backend;

/* The observer exec calls: converts what the backend holds to what the
 * layer outputs, then calls the caller's. */
typedef struct ld_emu_observe_wrap {
    ld_emulated_backend *b;
    ld_tensor_observer inner;
    void *user;
} ld_emu_observe_wrap;

/* --- precisions (emulated_inputs.c) ------------------------------------------------ */

/* fp16 for float16, bf16 for bfloat16, fp32 otherwise. */
ld_precision ld_emu_precision_of_type(ld_dtype d);
/* Every value of precision q is a value of precision p (subnormals included). */
bool ld_emu_precision_within(ld_precision q, ld_precision p);
/* Inputs that say how to compute rather than what (Resize's scales, ...):
 * never rounded. */
bool ld_emu_is_parameter_input(const ld_node *node, int j);

/* A scratch float32 tensor (exec's pool) holding the float tensor src
 * rounded to p under o; the rounding is added to *t. *out is borrowed. */
ld_status ld_emu_round_tensor(ld_kernel_ctx *ctx, const ld_tensor *src, ld_precision p,
                              const ld_round_options *o, ld_tensor **out, ld_emu_tally *t);

/* --- hooks (exec's ld_exec_hooks; user is the backend) -------------------------------- */

ld_status ld_emu_before_compute(void *user, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                                ld_error *err);
ld_status ld_emu_after_compute(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                               ld_layer_counters *counters, ld_error *err);

/* Elementwise chain fusion (exec.h's fuse_* hooks): before (emulated_inputs.c),
 * accept and after (emulated_outputs.c). */
ld_status ld_emu_fuse_before(void *user, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                             ld_error *err);
bool ld_emu_fuse_accept(void *user, const ld_node *node, const bool *chain_input);
ld_status ld_emu_fuse_after(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                            ld_layer_counters *counters, ld_error *err);
/* round_block of a fused node: user is its ld_emu_fuse_node. */
void ld_emu_fuse_round_block(void *user, int output, float *block, int64_t n);

/* --- outputs (emulated_outputs.c) --------------------------------------------------- */

/* Offers the node being computed the fused output rounding when its outputs
 * will be rounded like a computing kernel's (called by before_compute). */
void ld_emu_offer_rounding(ld_emulated_backend *b, ld_kernel_ctx *ctx);

/* The observer to hand exec for inner (NULL: none); w is filled and must
 * live through the run. Resets what show_buf holds. */
ld_tensor_observer ld_emu_wrap_observer(ld_emu_observe_wrap *w, ld_emulated_backend *b,
                                        ld_tensor_observer inner, void *user);

/* --- isolation (emulated_isolate.c) ------------------------------------------------- */

/* Runs node i on the caller's inputs converted to what this engine holds
 * for them, leaving the run's state as it was. */
ld_status ld_emu_run_isolated(ld_emulated_backend *b, int i, const ld_tensor *const *inputs,
                              ld_tensor_observer observer, void *user, ld_error *err);

#endif
