/* layerdiff CLI — the comparison flags, shared by `layerdiff run` (live
 * comparison) and `layerdiff compare` (dumps), as cli/engine_options.h
 * shares the engine flags.
 *
 * How to use it in a command (e.g. cmd_run.c):
 *
 *   static ld_cli_compare_values cmp_flags;           // beside the other values
 *   static const ld_cli_option run_options[] = {
 *       ...,
 *       LD_CLI_COMPARE_OPTIONS(cmp_flags),             // --atol ... --top
 *   };
 *
 *   memset(&cmp_flags, 0, sizeof cmp_flags);           // before ld_cli_parse
 *   ...parse...
 *   ld_compare_options copts;
 *   ld_summary_options sopts;
 *   st = ld_cli_compare_setup(CMD, &cmp_flags, &copts, &sopts, err);  // usage errors: exit 2
 *   ...ld_compare_session_create(&session, &copts, err)... add items ... finish ...
 *   ld_report_print_summary(session, &ctx, &sopts, ld_cli_compare_summary_stream(&cmp_flags));
 *   if (cmp_flags.report_json)
 *       st = ld_report_write_json(session, &ctx, cmp_flags.report_json, err);
 *   ld_compare_session_destroy(session);
 *   ld_cli_compare_options_clear(&copts);              // after the session is gone
 *   return summary->pass ? LD_OK : LD_ERR_MISMATCH;    // with an empty err message: exit 1
 *
 * In the command's help, print LD_CLI_COMPARE_HELP (the defaults, a few
 * lines) after ld_cli_print_options.
 *
 * Call ld_cli_compare_setup before any expensive work, so a bad flag fails
 * at once. `ld_cli_compare_first_flag` tells whether any comparison flag was
 * given (e.g. to refuse them when `run` compares nothing). The session
 * borrows copts.tol's override patterns: clear copts only after destroying
 * the session. */
#ifndef LAYERDIFF_CLI_COMPARE_OPTIONS_H
#define LAYERDIFF_CLI_COMPARE_OPTIONS_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/options.h"
#include "cli/report_outputs.h"
#include "layerdiff/compare.h"
#include "layerdiff/report.h"

typedef struct ld_cli_compare_values {
    ld_cli_list atol, rtol;        /* "VALUE" or "PATTERN:VALUE", in order */
    const char *tol_mode;          /* NULL (polygraphy), "polygraphy" or "allclose" */
    const char *check_error_stat;  /* NULL (elemwise), "elemwise", "max", ... */
    const char *error_quantile;    /* NULL (0.99) or a number in [0, 1] */
    bool nan_is_error;
    const char *culprit_ulp;       /* NULL (8) or a positive number */
    const char *report_json;       /* NULL or FILE ("-" = stdout) */
    bool verbose;
    const char *top;               /* NULL (5) or a count >= 1 */
    ld_cli_report_values render;   /* --html, --markdown, --junit, --junit-layers: written
                                      with ld_cli_report_write_session after the session */
} ld_cli_compare_values;

/* The tolerance flags alone (the comparison's judgement, not its report):
 * `bisect` and `reduce` judge with them and write no report. */
#define LD_CLI_TOLERANCE_OPTIONS(v)                                                            \
    {"atol", 0, LD_OPT_LIST, &(v).atol, "[PAT:]X",                                             \
     "compare: absolute tolerance; PAT:X for tensors matching a glob"},                       \
    {"rtol", 0, LD_OPT_LIST, &(v).rtol, "[PAT:]X",                                             \
     "compare: relative tolerance, as --atol"},                                               \
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

/* Every comparison flag: the tolerances, then the report's. */
#define LD_CLI_COMPARE_OPTIONS(v)                                                              \
    LD_CLI_TOLERANCE_OPTIONS(v),                                                               \
    {"report-json", 0, LD_OPT_STRING, &(v).report_json, "FILE",                                \
     "compare: write every metric of every tensor as JSON ('-': stdout)"},                    \
    {"verbose", 0, LD_OPT_FLAG, &(v).verbose, NULL,                                            \
     "compare: print a row for every tensor, not only the worst"},                            \
    {"top", 0, LD_OPT_STRING, &(v).top, "N", "compare: rows in each ranking (default 5)"},    \
    LD_CLI_REPORT_OPTIONS((v).render)

/* The help text under the options: what the defaults are, in a few lines. */
#define LD_CLI_COMPARE_HELP                                                                    \
    "Tolerances: --atol/--rtol default to 1e-5 for layers computed in fp32 and to ten\n"       \
    "times the unit roundoff of a reduced precision (fp16/tf32 0.00488, bf16 0.0391).\n"       \
    "'PATTERN:X' sets X for tensors whose name matches the glob; the last match wins.\n"       \
    "NaN or inf in the same place on both sides compares equal. Culprits: layers whose\n"     \
    "isolated error exceeds --culprit-ulp ulps of their precision at the tensor's scale\n"     \
    "(its largest |reference|), or whose isolated output overflows.\n"

/* Where the terminal summary goes: stdout, or stderr when --report-json is
 * "-" (so stdout holds nothing but the JSON). */
FILE *ld_cli_compare_summary_stream(const ld_cli_compare_values *v);

/* The first comparison flag given, as "--atol", or NULL when none was. */
const char *ld_cli_compare_first_flag(const ld_cli_compare_values *v);

/* Turns the flags into options for ld_compare_session_create (*copts, always
 * initialised; free with ld_cli_compare_options_clear) and for
 * ld_report_print_summary (*sopts; colour on when the summary stream is a
 * terminal and NO_COLOR is unset). Usage errors (LD_ERR_USAGE, exit 2) end with a pointer
 * to `cmd`'s help. */
ld_status ld_cli_compare_setup(const char *cmd, const ld_cli_compare_values *v,
                               ld_compare_options *copts, ld_summary_options *sopts,
                               ld_error *err);
void ld_cli_compare_options_clear(ld_compare_options *copts);

#endif
