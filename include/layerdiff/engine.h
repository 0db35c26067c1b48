/* layerdiff — the emulated engine's precision configuration and the plan it
 * gives a graph.
 *
 * The configuration is what a GPU inference engine is built with (trtexec's
 * --fp16, --bf16, TF32, --precisionConstraints, --layerPrecisions,
 * --layerOutputTypes) plus layerdiff's own controls. The plan says, for every
 * node of a graph, the precision it computes in, the type its float outputs
 * get and why: the emulated backend runs it, `layerdiff inspect --engine`
 * prints it. The rules are in docs/numerics.md, "Emulated engine". */
#ifndef LAYERDIFF_ENGINE_H
#define LAYERDIFF_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include "layerdiff/dtype.h"
#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/numerics.h"
#include "layerdiff/round.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ld_constraints {
    LD_CONSTRAINTS_NONE = 0, /* per-layer rules are ignored (with a warning), as trtexec */
    LD_CONSTRAINTS_PREFER,   /* honoured where possible, a warning otherwise */
    LD_CONSTRAINTS_OBEY      /* honoured, or the plan fails */
} ld_constraints;

/* One PATTERN:TYPE entry of --layer-precisions or --layer-output-types.
 * PATTERN is an fnmatch(3) glob over node names, or "op:GLOB" over op types;
 * the bare pattern "*" is the default for layers no other entry matches. */
typedef struct ld_layer_rule {
    char *pattern;          /* owned */
    ld_precision precision; /* --layer-precisions: fp32, tf32, fp16, bf16 */
    ld_dtype type;          /* --layer-output-types: FLOAT32, FLOAT16, BFLOAT16 */
    char *text;             /* owned; "PATTERN:TYPE" as written, for messages */
} ld_layer_rule;

typedef struct ld_engine_config {
    bool fp16;                   /* float layers compute in fp16 (exclusive with bf16) */
    bool bf16;                   /* float layers compute in bf16 */
    bool tf32;                   /* fp32 Conv/ConvTranspose/Gemm/MatMul use TF32 (default on;
                                    NVIDIA_TF32_OVERRIDE=0 in the environment turns it off
                                    whatever this says, as on a GPU) */
    bool tf32_explicit;          /* --tf32 was given (for the override's warning) */
    ld_rounding tf32_rounding;   /* fp32 -> tf32 rounding (default RNE) */
    bool flush_denormals;        /* subnormal results and inputs become +-0 */
    bool accumulate_half;        /* reduced-precision layers round every partial sum */
    bool respect_declared_types; /* layers compute in the float type the model declares */
    ld_constraints constraints;
    int n_layer_precisions;
    ld_layer_rule *layer_precisions;   /* owned */
    int n_layer_output_types;
    ld_layer_rule *layer_output_types; /* owned */
} ld_engine_config;

/* Defaults: fp32, TF32 on (RNE), subnormals kept, fp32 accumulation,
 * constraints none, no rules. */
void ld_engine_config_init(ld_engine_config *cfg);
/* Frees the rules and re-initialises. NULL is a no-op. */
void ld_engine_config_clear(ld_engine_config *cfg);
/* Deep copy into *dst (which is overwritten, not cleared). */
ld_status ld_engine_config_copy(ld_engine_config *dst, const ld_engine_config *src,
                                ld_error *err);
/* Checks the combination (fp16 and bf16 together is an error). */
ld_status ld_engine_config_check(const ld_engine_config *cfg, ld_error *err);
/* Whether TF32 is in effect: cfg->tf32 and NVIDIA_TF32_OVERRIDE is not "0". */
bool ld_engine_tf32_enabled(const ld_engine_config *cfg);
/* One line for logs and the dump's run config, e.g.
 * "fp16, tf32 rne, accumulate fp32, constraints obey, layer-precisions 2 rules". */
char *ld_engine_config_describe(const ld_engine_config *cfg, char *buf, size_t size);

/* Appends the entries of SPEC (a comma list of PATTERN:TYPE, or "@FILE"
 * with one entry per line; blank lines and lines starting with '#' are
 * skipped) to cfg's --layer-precisions rules (output_types false) or
 * --layer-output-types rules (true). The pattern is split from the type at
 * the last ':'. Errors (LD_ERR_USAGE; LD_ERR_IO for an unreadable file) name
 * the entry: no ':', an empty pattern, a type that is not a float type, tf32
 * as an output type. On error cfg keeps the rules it had. */
ld_status ld_engine_add_rules(ld_engine_config *cfg, const char *spec, bool output_types,
                              ld_error *err);

/* Why a layer got its precision or output type. */
typedef enum ld_plan_reason {
    LD_PLAN_DEFAULT = 0,  /* the engine's policy: --fp16 / --bf16, else fp32 (tf32 for
                             conv/matmul with TF32 on); for output types: the precision */
    LD_PLAN_PATTERN,      /* a --layer-precisions / --layer-output-types rule */
    LD_PLAN_CAST,         /* output type: the Cast's `to` */
    LD_PLAN_DECLARED,     /* --respect-declared-types: the type the model declares */
    LD_PLAN_NOT_FLOAT,    /* no float32/float16/bfloat16 tensor: untouched */
    LD_PLAN_SHAPE         /* computes shapes or constants (does not depend on the values of
                             the graph inputs): untouched, computed as the reference does */
} ld_plan_reason;

typedef struct ld_layer_plan {
    bool emulated;               /* false: untouched (NOT_FLOAT or SHAPE) */
    ld_precision precision;      /* FP32 when untouched */
    ld_dtype output_type;        /* FLOAT32/FLOAT16/BFLOAT16 its float outputs are rounded to;
                                    UNDEFINED when untouched or for a Cast to a non-float
                                    (or float64) type */
    ld_dtype delivered_type;     /* UNDEFINED, or the float type the model declares for a
                                    graph output this node produces, when that differs from
                                    output_type and no rule set the output type: the result
                                    is rounded to output_type, then converted to it */
    ld_plan_reason precision_reason;
    ld_plan_reason output_reason;
    const ld_layer_rule *precision_rule; /* borrowed from the config (PATTERN only) */
    const ld_layer_rule *output_rule;    /* borrowed from the config (PATTERN only) */
    char *why;                   /* owned; one line, e.g. "--fp16" or "Cast to float32" */
} ld_layer_plan;

typedef struct ld_precision_plan {
    int n_layers;                /* = graph->n_nodes, topological order */
    ld_layer_plan *layers;       /* owned */
    bool tf32;                   /* TF32 in effect (ld_engine_tf32_enabled) */
    int n_warnings;
    char **warnings;             /* owned; one line each, for stderr */
} ld_precision_plan;

/* Plans every node of g (borrowed; the plan borrows rules from cfg, which
 * must outlive it). Fails (LD_ERR_USAGE, one line) on the conflicts of
 * docs/numerics.md: fp16 with bf16; a --layer-output-types entry whose type
 * contradicts a Cast's `to` (naming the node, the `to` type and the entry);
 * two entries giving one layer different types (naming both); under `obey`,
 * an entry that matches layers but none it can apply to. Warnings: entries
 * matching no layer, entries ignored under `none` (one warning listing
 * them), entries `prefer` cannot apply, --tf32 overridden by
 * NVIDIA_TF32_OVERRIDE=0. Return value: new, free with
 * ld_precision_plan_destroy. */
ld_status ld_precision_plan_build(const ld_graph *g, const ld_engine_config *cfg,
                                  ld_precision_plan **out, ld_error *err);
void ld_precision_plan_destroy(ld_precision_plan *plan);

/* The numerics the executor runs node i with. */
void ld_precision_plan_numerics(const ld_precision_plan *plan, const ld_engine_config *cfg,
                                int node_index, ld_layer_numerics *out);

/* "default", "pattern", "cast", "declared", "not-float", "shape". Static. */
const char *ld_plan_reason_name(ld_plan_reason reason);

#ifdef __cplusplus
}
#endif
#endif
