/* layerdiff CLI — the report files people and CI read (--html, --markdown,
 * --junit, --junit-layers), shared by `layerdiff report` and by `run` and
 * `compare`, which render straight from their finished session.
 *
 * In a command:
 *   static ld_cli_report_values outputs;                // beside the other values
 *   ... LD_CLI_REPORT_OPTIONS(outputs), ...              // in the option table
 *   st = ld_cli_report_check(CMD, &outputs, err);        // after parsing: usage errors
 *   ...finish the session...
 *   st = ld_cli_report_write_session(&outputs, session, &ctx, err);
 * (ld_cli_compare_values carries these values for run and compare.) */
#ifndef LAYERDIFF_CLI_REPORT_OUTPUTS_H
#define LAYERDIFF_CLI_REPORT_OUTPUTS_H

#include <stdbool.h>

#include "cli/options.h"
#include "layerdiff/compare.h"
#include "layerdiff/report.h"

typedef struct ld_cli_report_values {
    const char *html, *markdown, *junit; /* FILE or "-" (stdout), NULL = not written */
    bool junit_layers;
} ld_cli_report_values;

#define LD_CLI_REPORT_OPTIONS(v)                                                               \
    {"html", 0, LD_OPT_STRING, &(v).html, "FILE",                                              \
     "report: self-contained HTML with charts and a sortable table ('-': stdout)"},           \
    {"markdown", 0, LD_OPT_STRING, &(v).markdown, "FILE",                                      \
     "report: short Markdown summary for a pull-request comment ('-': stdout)"},              \
    {"junit", 0, LD_OPT_STRING, &(v).junit, "FILE",                                            \
     "report: JUnit XML, a test case per graph output ('-': stdout)"},                        \
    {"junit-layers", 0, LD_OPT_FLAG, &(v).junit_layers, NULL,                                  \
     "report: with --junit, a test case per compared tensor"}

/* Any of --html, --markdown, --junit given. */
bool ld_cli_report_any(const ld_cli_report_values *v);
/* The first report flag given ("--html"), or NULL. */
const char *ld_cli_report_first_flag(const ld_cli_report_values *v);
/* Usage errors: --junit-layers without --junit, stdout ("-") chosen for two
 * outputs, or the same file for two outputs. */
ld_status ld_cli_report_check(const char *cmd, const ld_cli_report_values *v, ld_error *err);
/* Writes every requested file from a report (top: worst layers listed). */
ld_status ld_cli_report_write(const ld_cli_report_values *v, const ld_report *r, int top,
                              ld_error *err);
/* The same from a finished session (copies it into a report first); does
 * nothing when no report flag was given. */
ld_status ld_cli_report_write_session(const ld_cli_report_values *v,
                                      const ld_compare_session *s,
                                      const ld_report_context *ctx, ld_error *err);

#endif
