/* layerdiff CLI — the emulated engine's flags, shared by `layerdiff run`
 * (which passes them to the emulated backend) and `layerdiff inspect
 * --engine` (which prints the precision plan they give). A command puts
 * LD_CLI_ENGINE_OPTIONS(values) into its option table, zeroes the values
 * before parsing, and turns them into an ld_engine_config with
 * ld_cli_engine_config. */
#ifndef LAYERDIFF_CLI_ENGINE_OPTIONS_H
#define LAYERDIFF_CLI_ENGINE_OPTIONS_H

#include <stdbool.h>

#include "cli/options.h"
#include "layerdiff/backend.h"
#include "layerdiff/engine.h"

typedef struct ld_cli_engine_values {
    bool fp16, bf16, tf32, no_tf32, flush_denormals, respect_declared_types;
    const char *accumulate;       /* NULL (fp32), "fp32" or "half" */
    const char *tf32_rounding;    /* NULL (rne), "rne", "rna" or "rz" */
    const char *constraints;      /* NULL (none), "none", "prefer" or "obey" */
    ld_cli_list layer_precisions; /* SPECs, in order */
    ld_cli_list layer_output_types;
} ld_cli_engine_values;

#define LD_CLI_ENGINE_OPTIONS(v)                                                                 \
    {"fp16", 0, LD_OPT_FLAG, &(v).fp16, NULL, "engine: float layers compute in fp16"},           \
    {"bf16", 0, LD_OPT_FLAG, &(v).bf16, NULL, "engine: float layers compute in bf16"},           \
    {"tf32", 0, LD_OPT_FLAG, &(v).tf32, NULL,                                                    \
     "engine: TF32 for fp32 conv/matmul (the default; NVIDIA_TF32_OVERRIDE=0 turns it off)"},    \
    {"no-tf32", 0, LD_OPT_FLAG, &(v).no_tf32, NULL, "engine: fp32 conv/matmul in full fp32"},    \
    {"tf32-rounding", 0, LD_OPT_STRING, &(v).tf32_rounding, "rne|rna|rz",                       \
     "engine: fp32 -> tf32 rounding (default rne)"},                                             \
    {"accumulate", 0, LD_OPT_STRING, &(v).accumulate, "fp32|half",                               \
     "engine: fp16/bf16 GEMM and reduction sums (default fp32)"},                                \
    {"flush-denormals", 0, LD_OPT_FLAG, &(v).flush_denormals, NULL,                              \
     "engine: subnormal inputs and results become zero"},                                        \
    {"respect-declared-types", 0, LD_OPT_FLAG, &(v).respect_declared_types, NULL,                \
     "engine: every layer computes in the float type the model declares"},                      \
    {"precision-constraints", 0, LD_OPT_STRING, &(v).constraints, "none|prefer|obey",           \
     "engine: how per-layer settings apply (default none: ignored)"},                           \
    {"layer-precisions", 0, LD_OPT_LIST, &(v).layer_precisions, "SPEC",                          \
     "engine: PATTERN:TYPE,... or @FILE; PATTERN a node-name glob or op:OpType"},               \
    {"layer-output-types", 0, LD_OPT_LIST, &(v).layer_output_types, "SPEC",                      \
     "engine: PATTERN:TYPE,... or @FILE for the layers' output types"}

/* The first engine flag given, as "--fp16", or NULL when none was. */
const char *ld_cli_engine_first_flag(const ld_cli_engine_values *v);

/* Builds *cfg (initialised here; clear it with ld_engine_config_clear) from
 * the flags. Usage errors end with a pointer to `cmd`'s help. */
ld_status ld_cli_engine_config(const char *cmd, const ld_cli_engine_values *v,
                               ld_engine_config *cfg, ld_error *err);

/* For commands that run backends: builds *cfg (always initialised; clear it
 * with ld_engine_config_clear) and sets *emulated when one of the backends
 * is "emulated". Engine flags without the emulated backend are a usage
 * error (they would otherwise do nothing). */
ld_status ld_cli_engine_setup(const char *cmd, const ld_cli_engine_values *v,
                              const ld_backend_vtable *const *backends, int n_backends,
                              ld_engine_config *cfg, bool *emulated, ld_error *err);

/* Plans g under cfg and prints the plan's warnings to stderr, one line each
 * ("layerdiff <cmd>: warning: ..."). A conflict becomes a usage error. On
 * success *out (may be NULL: not wanted) receives the plan (new, free with
 * ld_precision_plan_destroy). */
ld_status ld_cli_engine_plan(const char *cmd, const ld_graph *g, const ld_engine_config *cfg,
                             ld_precision_plan **out, ld_error *err);

#endif
