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
/* Additive changes within a version (fields old readers ignore): written as
 * "schema_minor"; a file without it is minor 0. 1: context.timing. */
#define LD_REPORT_SCHEMA_MINOR 1

/* How long the command took, wall clock, in seconds (schema 1.1). A report
 * without it (1.0), or a caller that did not measure, has present = false. */
typedef struct ld_report_timing {
    bool present;
    double total_seconds;    /* the command's start to its report: loading, running, comparing */
    double ref_seconds;      /* the reference backend's run (`run`; 0 for `compare`) */
    double test_seconds;     /* the test backend's run, its isolated layers included (`run`) */
    double compare_seconds;  /* comparing: within the runs for `run` (also counted in their
                                times), reading the dumps and comparing for `compare` */
} ld_report_timing;

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
    /* Tensors found on one side only (not compared; listed in the report). */
    int n_missing_in_test;      /* in the reference run, not in the test run */
    const char *const *missing_in_test;
    int n_missing_in_ref;       /* in the test run, not in the reference run */
    const char *const *missing_in_ref;
    ld_report_timing timing;    /* JUnit's time attributes come from here */
} ld_report_context;

/* Names of the tolerance modes and error statistics as the command line and
 * the JSON report spell them: "polygraphy", "allclose"; "elemwise", "max",
 * "mean", "median", "quantile". Static strings ("?" for unknown values);
 * from_name returns false for an unknown name. */
const char *ld_report_tol_mode_name(ld_tol_mode mode);
bool ld_report_tol_mode_from_name(const char *name, ld_tol_mode *out);
const char *ld_report_check_stat_name(ld_check_stat check);
bool ld_report_check_stat_from_name(const char *name, ld_check_stat *out);

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
 * worst layers by accumulated and by isolated error, overflow counts. ctx
 * and opts may be NULL. Lines fit in 100 columns (long names are shortened
 * in the middle; the JSON report has them whole). */
void ld_report_print_summary(const ld_compare_session *s, const ld_report_context *ctx,
                             const ld_summary_options *opts, FILE *out);

/* ---- reading a JSON report back (trend over nightly reports, fuzzing) ----- */

/* A report as read from a file: the same records and summary a session
 * holds, so code written for a session's records works on either. Every
 * pointer is owned by the report (ld_report_free); strings are UTF-8 (a
 * name the writer had to repair holds U+FFFD where its bad bytes were). */
typedef struct ld_report {
    int schema_version;
    char *tool_version;
    ld_report_context context;  /* NULL strings = null in the file */
    ld_compare_options options; /* the tolerance spec and culprit threshold used */
    ld_compare_summary summary; /* origins/culprits point into the report */
    int n_records;
    ld_compare_record *records;
    int schema_minor;           /* 0 when the file has no "schema_minor" */
} ld_report;

/* Reads and validates a report written by ld_report_write_json (schema name
 * LD_REPORT_SCHEMA_NAME, version 1 .. LD_REPORT_SCHEMA_VERSION; any minor). Fails with
 * LD_ERR_IO when the file cannot be read and LD_ERR_INPUT on anything else,
 * in one line naming the file and the offending field, e.g.
 *   "r.json: records[3].metrics.abs.max: expected a number or "NaN"/"Infinity"/"-Infinity""
 * Return value: new report, free with ld_report_free. */
ld_status ld_report_read_json(const char *path, ld_report **out, ld_error *err);
void ld_report_free(ld_report *r);

/* ---- reports for people and CI (issue 6): report/html.c, svg.c, markdown.c, junit.c,
 *      trend.c; `layerdiff report`, and --html/--markdown/--junit of run and compare ---- */

/* A report of a finished session, so `run` and `compare` render directly
 * without writing and re-reading JSON. A deep copy: records, summary,
 * options and every string of ctx are copied, so the session and ctx may go
 * away first; tool_version is this build's. ctx may be NULL.
 * Return value: new report, free with ld_report_free. */
ld_status ld_report_from_session(const ld_compare_session *s, const ld_report_context *ctx,
                                 ld_report **out, ld_error *err);

typedef enum ld_report_format {
    LD_REPORT_HTML = 0, /* one self-contained page: inline CSS, SVG charts, a little inline
                           JS (table sorting and filtering); loads nothing from the network */
    LD_REPORT_MARKDOWN, /* a short summary for a pull-request comment */
    LD_REPORT_JUNIT     /* JUnit XML: a test case per graph output (per tensor with
                           junit_layers), failures carrying the metrics */
} ld_report_format;

typedef struct ld_render_options {
    bool junit_layers;  /* JUnit: a test case for every compared tensor */
    int top;            /* worst layers listed (Markdown) and charted (HTML); 10 when 0 */
} ld_render_options;

/* Renders r in format to out; opts may be NULL. Names from the model are
 * escaped for the format (a tensor name can never inject markup) and invalid
 * UTF-8 or control bytes in them become U+FFFD. LD_ERR_IO when out fails. */
ld_status ld_report_render(const ld_report *r, ld_report_format format,
                           const ld_render_options *opts, FILE *out, ld_error *err);
/* The same into path ("-" = stdout) through a temporary file renamed over
 * path once complete: a failed write never leaves a file that looks whole. */
ld_status ld_report_render_file(const ld_report *r, ld_report_format format,
                                const ld_render_options *opts, const char *path,
                                ld_error *err);

/* ---- the nightly trend: reports of one model over time (report/trend*.c) ----------- */

typedef struct ld_trend_run {
    char *path;
    char *created;      /* the report's "created" timestamp; NULL when it has none */
    ld_report *report;
} ld_trend_run;

/* A change for the worse between two consecutive runs of one tensor. */
typedef struct ld_trend_finding {
    int series;         /* index into ld_trend.series */
    int run;            /* the later run: the change is runs[run - 1] -> runs[run] */
    bool latest;        /* run is the newest: counts for the exit code */
    char *message;      /* one line: "y: passed, now fails (max abs 0.12, atol 0.0049)" */
} ld_trend_finding;

typedef struct ld_trend {
    double regress_factor;
    int n_runs;
    ld_trend_run *runs;     /* oldest first */
    int n_series;           /* tensors followed: the graph outputs of every run (union, in
                               first-seen order); every tensor when no run marks outputs */
    char **series;
    int *cells;             /* cells[run * n_series + s]: record index in that run, -1 */
    int n_findings;         /* regressions between any two consecutive runs */
    ld_trend_finding *findings;
    int n_regressions;      /* findings whose run is the newest */
    int n_warnings;         /* different models, missing timestamps, vanished outputs */
    char **warnings;
} ld_trend;

/* Reads n >= 1 JSON reports, orders them by their "created" timestamps
 * (command-line order, with a warning, when one has none; ties keep that
 * order) and finds regressions: a tensor that passed and now fails, one that
 * now has NaN/inf where the reference is finite, or a metric (max abs, mean
 * abs, scaled_ulp) that grew by more than regress_factor (2 when <= 0) and is
 * not negligible (above 1% of atol for abs errors, above 1 ulp for ulps).
 * Reports of different models (model_sha256) are lined up with a warning.
 * LD_ERR_IO / LD_ERR_INPUT naming the file on unreadable or invalid reports.
 * Return value: new trend, free with ld_trend_free. */
ld_status ld_trend_load(const char *const *paths, int n, double regress_factor,
                        ld_trend **out, ld_error *err);
void ld_trend_free(ld_trend *t);
/* format: LD_REPORT_HTML (a chart per tensor over the runs, the findings) or
 * LD_REPORT_MARKDOWN; LD_ERR_USAGE for JUnit. */
ld_status ld_trend_render(const ld_trend *t, ld_report_format format, FILE *out,
                          ld_error *err);
ld_status ld_trend_render_file(const ld_trend *t, ld_report_format format, const char *path,
                               ld_error *err);
/* Terminal lines: runs, warnings, regressions. */
void ld_trend_print_summary(const ld_trend *t, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
