/* layerdiff — rendering a finished comparison session (report/).
 *
 * The JSON report is the source of truth (schema: docs/report-schema.md,
 * versioned by LD_REPORT_SCHEMA_VERSION); the terminal summary is for people.
 * Renderers only read the session: nothing here computes numerics. */
#ifndef LAYERDIFF_REPORT_H
#define LAYERDIFF_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "layerdiff/compare.h"
#include "layerdiff/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LD_REPORT_SCHEMA_NAME "layerdiff-report"
#define LD_REPORT_SCHEMA_VERSION 1

/* Where the compared runs came from. All strings borrowed; NULL = unknown. */
typedef struct ld_report_context {
    const char *command;        /* "run" or "compare" */
    const char *command_line;   /* as typed, for reproduction */
    const char *model_path;
    const char *model_sha256;
    const char *ref_source;     /* dump path for `compare`, NULL for live runs */
    const char *test_source;
    const char *ref_run, *ref_backend, *ref_config;
    const char *test_run, *test_backend, *test_config;
    int64_t input_seed;         /* -1 when inputs were loaded */
} ld_report_context;

/* Writes the JSON report of a finished session to path (temporary file +
 * rename, so a failed write never leaves a file that looks complete; "-" =
 * stdout). NaN and infinities are encoded as the strings "NaN", "Infinity"
 * and "-Infinity" (docs/report-schema.md), never dropped. */
ld_status ld_report_write_json(const ld_compare_session *s, const ld_report_context *ctx,
                               const char *path, ld_error *err);

typedef struct ld_summary_options {
    bool verbose;               /* the full per-tensor table */
    bool color;                 /* ANSI colours (callers decide: TTY and no NO_COLOR) */
    int top;                    /* rows in the "worst layers" lists (default 5 when 0) */
} ld_summary_options;

/* The terminal summary: verdict, first divergent layer, top origin layers,
 * worst layers by accumulated and by isolated error, overflow counts. */
void ld_report_print_summary(const ld_compare_session *s, const ld_report_context *ctx,
                             const ld_summary_options *opts, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
