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
#include "cli/format.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "layerdiff/bisect.h"
#include "layerdiff/inputs.h"

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
 * usage errors). engine values are modified (the default). Catches Ctrl-C
 * (cli/interrupt.h). On failure the setup holds nothing to free. */
ld_status ld_cli_bisect_open(ld_cli_bisect_setup *s, const char *cmd, const char *model_path,
                             const ld_cli_input_values *iv, ld_cli_engine_values *ev,
                             const ld_cli_compare_values *cv, ld_error *err);
void ld_cli_bisect_close(ld_cli_bisect_setup *s);

/* A trial runner over the setup, with the progress line on a terminal and
 * Ctrl-C stopping it. Runs the baseline too. */
ld_status ld_cli_bisect_trials(ld_cli_bisect_setup *s, bool isolate, size_t cache_bytes,
                               int threads, ld_trials **out, ld_error *err);

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
