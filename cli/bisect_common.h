/* layerdiff CLI — what `layerdiff bisect` and `layerdiff reduce` share:
 * their input, engine and tolerance flags, loading the model and making
 * the inputs, the trial runner with a progress line and Ctrl-C, and the
 * flags written back into the commands they print. */
#ifndef LAYERDIFF_CLI_BISECT_COMMON_H
#define LAYERDIFF_CLI_BISECT_COMMON_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/compare_options.h"
#include "cli/engine_options.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "layerdiff/bisect.h"
#include "layerdiff/inputs.h"

/* The inputs' flags, as `layerdiff run` has them. */
typedef struct ld_cli_input_values {
    int64_t threads;
    int64_t seed;          /* -1: not given */
    ld_cli_list ranges, loads, shapes;
} ld_cli_input_values;

#define LD_CLI_INPUT_OPTIONS(v)                                                                \
    {"threads", 't', LD_OPT_INT, &(v).threads, "N", "threads per kernel (default: all cores)"}, \
    {"seed", 0, LD_OPT_INT, &(v).seed, "N", "seed of the generated inputs (default 1)"},        \
    {"val-range", 0, LD_OPT_LIST, &(v).ranges, "RANGES",                                        \
     "generated values: [LO,HI] and/or NAME:[LO,HI] (default [0,1])"},                          \
    {"load-inputs", 0, LD_OPT_LIST, &(v).loads, "SRC",                                          \
     "load inputs: a folder, .npy/.pb file, dump, or NAME:FILE,..."},                           \
    {"input-shapes", 0, LD_OPT_LIST, &(v).shapes, "SHAPES",                                     \
     "dynamic dims: NAME:1x3x224x224 or DIM:N, comma-separated"}

/* The tolerance flags of `run` (the comparison's judgement, not its report). */
#define LD_CLI_TOLERANCE_OPTIONS(v)                                                            \
    {"atol", 0, LD_OPT_LIST, &(v).atol, "[PAT:]X",                                             \
     "compare: absolute tolerance; PAT:X for tensors matching a glob"},                       \
    {"rtol", 0, LD_OPT_LIST, &(v).rtol, "[PAT:]X", "compare: relative tolerance, as --atol"},  \
    {"tol-mode", 0, LD_OPT_STRING, &(v).tol_mode, "MODE",                                      \
     "compare: polygraphy (abs>atol AND rel>rtol fails; default) or allclose"},               \
    {"check-error-stat", 0, LD_OPT_STRING, &(v).check_error_stat, "STAT",                      \
     "compare: elemwise (default), max, mean, median or quantile"},                           \
    {"error-quantile", 0, LD_OPT_STRING, &(v).error_quantile, "Q",                             \
     "compare: the quantile for --check-error-stat quantile (default 0.99)"},                 \
    {"nan-is-error", 0, LD_OPT_FLAG, &(v).nan_is_error, NULL,                                  \
     "compare: any NaN in a test tensor fails it, even facing a NaN"},                        \
    {"culprit-ulp", 0, LD_OPT_STRING, &(v).culprit_ulp, "X",                                   \
     "compare: culprit when the isolated error exceeds X ulps (default 8)"}

/* Everything a bisect or reduce run starts from. */
typedef struct ld_cli_bisect_setup {
    const char *cmd;
    const char *model_path;
    ld_graph *graph;               /* owned */
    ld_input_set inputs;           /* owned */
    char sha256[65];
    ld_engine_config engine;       /* owned */
    ld_compare_options compare;    /* owned (its tolerance overrides) */
    char *ranges, *shapes;         /* owned joined flag values */
    ld_progress progress;
    int progress_label_trial;      /* shown in the progress line */
} ld_cli_bisect_setup;

/* Loads the model, makes the inputs, builds the engine config (defaulting to
 * --fp16 unless --bf16 is given: a bisect needs a reduced precision) and the
 * tolerances, and plans the engine once (warnings to stderr, conflicts are
 * usage errors). engine values are modified (the default). Installs the
 * Ctrl-C handler. On failure the setup holds nothing to free. */
ld_status ld_cli_bisect_open(ld_cli_bisect_setup *s, const char *cmd, const char *model_path,
                             const ld_cli_input_values *iv, ld_cli_engine_values *ev,
                             const ld_cli_compare_values *cv, ld_error *err);
void ld_cli_bisect_close(ld_cli_bisect_setup *s);

/* A trial runner over the setup, with the progress line on a terminal and
 * Ctrl-C stopping it. Runs the baseline too. */
ld_status ld_cli_bisect_trials(ld_cli_bisect_setup *s, bool isolate, size_t cache_bytes,
                               int threads, ld_trials **out, ld_error *err);

/* The interrupt flag the runner polls (set by SIGINT/SIGTERM). */
extern volatile sig_atomic_t ld_cli_bisect_interrupted;

/* A shell word for s: as is when it holds only safe characters, else in
 * single quotes. Return value: new string, NULL when out of memory. */
char *ld_cli_shell_quote(const char *s);

/* The flags that reproduce the inputs and their shapes (unless
 * skip_inputs: a repro has fixed shapes and its own inputs), the engine and
 * the tolerances, each a separate shell-quoted word after a space
 * (" --fp16 --atol 0.001"). Return value: new string, NULL when out of
 * memory. */
char *ld_cli_bisect_flags(const ld_cli_input_values *iv, const ld_cli_engine_values *ev,
                          const ld_cli_compare_values *cv, bool skip_inputs);

/* "max abs 0.431  mean abs 0.21  cos 0.97" (+ "  non-finite N") into buf. */
char *ld_cli_metrics_brief(const ld_tensor_metrics *m, char *buf, size_t size);

#endif
