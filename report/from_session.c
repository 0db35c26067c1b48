/* layerdiff — a report from a live session (ld_report_from_session, report.h).
 *
 * A deep copy laid out exactly as ld_report_read_json lays out a report it
 * read, so ld_report_free frees both: every string and array is its own
 * allocation. Records hold no tensors, so the copy is small (a few hundred
 * bytes per tensor). */
#include <stdlib.h>
#include <string.h>

#include "layerdiff/report.h"

#ifndef LAYERDIFF_VERSION
#define LAYERDIFF_VERSION "unknown"
#endif

/* strdup that keeps NULL; *ok becomes false when out of memory. */
static char *copy_string(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *c = strdup(s);
    if (!c)
        *ok = false;
    return c;
}

static const char *const *copy_names(int n, const char *const *names, bool *ok)
{
    if (n <= 0 || !names)
        return NULL;
    char **c = calloc((size_t)n, sizeof *c);
    if (!c) {
        *ok = false;
        return NULL;
    }
    for (int i = 0; i < n; i++)
        c[i] = copy_string(names[i] ? names[i] : "", ok);
    return (const char *const *)c;
}

static void copy_context(ld_report_context *dst, const ld_report_context *src, bool *ok)
{
    *dst = *src;
    dst->command = copy_string(src->command, ok);
    dst->command_line = copy_string(src->command_line, ok);
    dst->model_path = copy_string(src->model_path, ok);
    dst->model_sha256 = copy_string(src->model_sha256, ok);
    dst->ref_source = copy_string(src->ref_source, ok);
    dst->ref_run = copy_string(src->ref_run, ok);
    dst->ref_backend = copy_string(src->ref_backend, ok);
    dst->ref_config = copy_string(src->ref_config, ok);
    dst->test_source = copy_string(src->test_source, ok);
    dst->test_run = copy_string(src->test_run, ok);
    dst->test_backend = copy_string(src->test_backend, ok);
    dst->test_config = copy_string(src->test_config, ok);
    dst->missing_in_test = copy_names(src->n_missing_in_test, src->missing_in_test, ok);
    dst->n_missing_in_test = dst->missing_in_test ? src->n_missing_in_test : 0;
    dst->missing_in_ref = copy_names(src->n_missing_in_ref, src->missing_in_ref, ok);
    dst->n_missing_in_ref = dst->missing_in_ref ? src->n_missing_in_ref : 0;
}

static ld_tolerance_override *copy_overrides(int n, const ld_tolerance_override *src, int *n_out,
                                             bool *ok)
{
    *n_out = 0;
    if (n <= 0 || !src)
        return NULL;
    ld_tolerance_override *c = calloc((size_t)n, sizeof *c);
    if (!c) {
        *ok = false;
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        c[i].value = src[i].value;
        c[i].pattern = copy_string(src[i].pattern ? src[i].pattern : "", ok);
    }
    *n_out = n;
    return c;
}

static const int *copy_indices(int n, const int *src, int *n_out, bool *ok)
{
    *n_out = 0;
    if (n <= 0 || !src)
        return NULL;
    int *c = malloc((size_t)n * sizeof *c);
    if (!c) {
        *ok = false;
        return NULL;
    }
    memcpy(c, src, (size_t)n * sizeof *c);
    *n_out = n;
    return c;
}

static void copy_record(ld_compare_record *dst, const ld_compare_record *src, bool *ok)
{
    *dst = *src;
    dst->name = copy_string(src->name ? src->name : "", ok);
    dst->node = copy_string(src->node ? src->node : "", ok);
    dst->op_type = copy_string(src->op_type ? src->op_type : "", ok);
    dst->inputs = NULL;
    dst->input_names = NULL;
    dst->n_inputs = 0;
    if (src->n_inputs <= 0)
        return;
    dst->inputs = malloc((size_t)src->n_inputs * sizeof *dst->inputs);
    dst->input_names = calloc((size_t)src->n_inputs, sizeof *dst->input_names);
    if (!dst->inputs || !dst->input_names) {
        *ok = false;
        return; /* ld_report_free frees what is there */
    }
    dst->n_inputs = src->n_inputs;
    for (int j = 0; j < src->n_inputs; j++) {
        dst->inputs[j] = src->inputs ? src->inputs[j] : -1;
        const char *name = src->input_names && src->input_names[j] ? src->input_names[j] : "";
        dst->input_names[j] = copy_string(name, ok);
    }
}

ld_status ld_report_from_session(const ld_compare_session *s, const ld_report_context *ctx,
                                 ld_report **out, ld_error *err)
{
    static const ld_report_context no_context = {.input_seed = -1};
    *out = NULL;
    bool ok = true;
    ld_report *r = calloc(1, sizeof *r);
    if (!r)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory copying the comparison report");
    r->schema_version = LD_REPORT_SCHEMA_VERSION;
    r->schema_minor = LD_REPORT_SCHEMA_MINOR;
    r->tool_version = copy_string(LAYERDIFF_VERSION, &ok);
    copy_context(&r->context, ctx ? ctx : &no_context, &ok);

    const ld_compare_options *opts = ld_compare_session_options(s);
    r->options = *opts;
    r->options.tol.atol_overrides = copy_overrides(opts->tol.n_atol, opts->tol.atol_overrides,
                                                   &r->options.tol.n_atol, &ok);
    r->options.tol.rtol_overrides = copy_overrides(opts->tol.n_rtol, opts->tol.rtol_overrides,
                                                   &r->options.tol.n_rtol, &ok);

    const ld_compare_summary *sum = ld_compare_session_summary(s);
    r->summary = *sum;
    r->summary.origins = copy_indices(sum->n_origins, sum->origins, &r->summary.n_origins, &ok);
    r->summary.culprits = copy_indices(sum->n_culprits, sum->culprits, &r->summary.n_culprits,
                                       &ok);

    int n = ld_compare_session_count(s);
    if (n > 0) {
        r->records = calloc((size_t)n, sizeof *r->records);
        if (!r->records)
            ok = false;
        else
            r->n_records = n;
    }
    for (int i = 0; ok && i < n; i++)
        copy_record(&r->records[i], ld_compare_session_record(s, i), &ok);
    if (!ok) {
        ld_report_free(r);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory copying the comparison report");
    }
    *out = r;
    return LD_OK;
}

/* --- freeing (reports made here and read by json_read.c alike) ---------------------------------------------------------------------------- */

static void free_names(int n, const char *const *names)
{
    for (int i = 0; names && i < n; i++)
        free((char *)names[i]);
    free((void *)names);
}

static void free_context(ld_report_context *c)
{
    const char *strings[] = {c->command, c->command_line, c->model_path, c->model_sha256,
                             c->ref_source, c->ref_run, c->ref_backend, c->ref_config,
                             c->test_source, c->test_run, c->test_backend, c->test_config};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        free((char *)strings[i]);
    free_names(c->n_missing_in_test, c->missing_in_test);
    free_names(c->n_missing_in_ref, c->missing_in_ref);
}

static void free_overrides(int n, ld_tolerance_override *list)
{
    for (int i = 0; list && i < n; i++)
        free(list[i].pattern);
    free(list);
}

void ld_report_free(ld_report *r)
{
    if (!r)
        return;
    free(r->tool_version);
    free_context(&r->context);
    free_overrides(r->options.tol.n_atol, r->options.tol.atol_overrides);
    free_overrides(r->options.tol.n_rtol, r->options.tol.rtol_overrides);
    free((void *)r->summary.origins);
    free((void *)r->summary.culprits);
    for (int i = 0; r->records && i < r->n_records; i++) {
        ld_compare_record *rec = &r->records[i];
        free(rec->name);
        free(rec->node);
        free(rec->op_type);
        for (int j = 0; rec->input_names && j < rec->n_inputs; j++)
            free(rec->input_names[j]);
        free(rec->input_names);
        free(rec->inputs);
    }
    free(r->records);
    free(r);
}
