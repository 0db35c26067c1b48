/* layerdiff CLI — what `layerdiff bisect` found, printed and written
 * (cli/bisect_output.c): the terminal summary, and in -o DIR the
 * --layer-precisions / --layer-output-types files, the trtexec flags, the
 * ONNX Runtime float16 converter's node_block_list and bisect.json. */
#ifndef LAYERDIFF_CLI_BISECT_OUTPUT_H
#define LAYERDIFF_CLI_BISECT_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/bisect_common.h"

/* One line of the trial log. */
typedef struct ld_bisect_trial_log {
    int set_size;
    int first_changed, start_node, nodes_run;
    bool pass;
    int worst_output;      /* graph output index, -1 */
    double worst_abs;      /* its max abs error */
    double seconds;
} ld_bisect_trial_log;

typedef struct ld_bisect_outcome {
    const char *mode;              /* "ddmin", "prefix", "suffix" */
    bool found;                    /* a set passes */
    bool minimal;                  /* ddmin: checked 1-minimal */
    int k;                         /* prefix/suffix: the number of nodes; -1 */
    int n_set;
    int *set;                      /* owned; node indices, ascending */
    ld_tensor_metrics *before;     /* owned; per graph output (baseline) */
    ld_tensor_metrics *after;      /* owned; per graph output (fresh engine with the set),
                                      NULL when nothing was found */
    bool verified;                 /* the fresh engine's outputs pass */
    int n_trials, cap_trials;
    ld_bisect_trial_log *trials;   /* owned */
    int memo_calls, memo_hits;
    double full_run_seconds;       /* one plain run of the test engine */
    double total_seconds;
    ld_trials_stats stats;
} ld_bisect_outcome;

void ld_bisect_outcome_free(ld_bisect_outcome *o);

/* The paths written into -o DIR (borrowed names, owned strings). */
typedef struct ld_bisect_files {
    char *precisions, *output_types, *trtexec, *ort, *json;
} ld_bisect_files;
void ld_bisect_files_free(ld_bisect_files *f);

/* The rules of the set, exactly as written into the files: appends them to
 * cfg (constraints set to obey). Names that cannot be written in an @FILE
 * (newline, trailing whitespace) make it fail with LD_ERR_UNSUPPORTED. */
ld_status ld_bisect_add_rules(const ld_graph *g, const ld_precision_plan *plan, const int *set,
                              int n, ld_engine_config *cfg, ld_error *err);

/* Writes the five files into dir (created when missing). Warnings (names
 * trtexec or ONNX Runtime cannot take exactly) go to stderr. */
ld_status ld_bisect_write_files(const char *dir, const ld_cli_bisect_setup *s,
                                const ld_precision_plan *plan, const ld_trials *t,
                                const ld_bisect_outcome *o, const char *check_command,
                                ld_bisect_files *files, ld_error *err);

/* bisect.json (cli/bisect_report.c): schema in docs/bisect.md. trtexec is
 * the flags line, check_command the `layerdiff run` line (may be NULL). */
ld_status ld_bisect_write_json(const char *path, const ld_cli_bisect_setup *s,
                               const ld_trials *t, const ld_bisect_outcome *o,
                               const char *trtexec, int unexpressed,
                               const char *check_command, ld_error *err);

/* The terminal summary on stdout (cli/bisect_report.c). */
void ld_bisect_print(const ld_cli_bisect_setup *s, const ld_trials *t,
                     const ld_bisect_outcome *o);

/* The trtexec flags for the set (one line, shell-quoted words); names it
 * cannot express are counted in *unexpressed. New string. */
char *ld_bisect_trtexec_flags(const ld_graph *g, const ld_precision_plan *plan,
                              const ld_engine_config *cfg, const int *set, int n,
                              int *unexpressed);

/* Whether trtexec's --layerPrecisions can name the node exactly. */
bool ld_bisect_trtexec_expressible(const ld_graph *g, const ld_node *node);

#endif
