/* layerdiff — the JSON report of a finished comparison (report.h; the schema
 * is docs/report-schema.md, which must change with this file).
 *
 * The report is written in two parts so memory does not grow with the
 * model: the head (schema, context, tolerances, summary) is one jansson
 * tree, printed indented; then each record is built, printed on its own
 * line and freed. A model with 100,000 tensors would otherwise hold a tree
 * of ~10 million JSON values. Doubles are printed with 17 significant digits
 * so the reader gets the same bits back; NaN and infinities, which JSON
 * cannot hold, become the strings "NaN", "Infinity" and "-Infinity". */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/utf8.h"
#include "layerdiff/report.h"
#include "report/atomic_file.h"

#ifndef LAYERDIFF_VERSION
#define LAYERDIFF_VERSION "unknown"
#endif

#define DUMP_FLAGS (JSON_REAL_PRECISION(17))

/* --- values ---------------------------------------------------------------------------- */

static json_t *jstr(const char *s)
{
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    char *fixed = ld_utf8_sanitize(s);
    if (!fixed)
        return NULL;
    j = json_string(fixed);
    free(fixed);
    return j;
}

static json_t *jnum(double v)
{
    if (isnan(v))
        return json_string("NaN");
    if (isinf(v))
        return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static json_t *jint(int64_t v)
{
    return json_integer((json_int_t)v);
}

/* obj[key] = value, stealing value; false when value is NULL or the set
 * fails, so builders chain with &&. */
static bool set(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0;
}

static bool append(json_t *arr, json_t *value)
{
    return value && json_array_append_new(arr, value) == 0;
}

/* Builders return a new reference or NULL (out of memory); on failure they
 * free what they built. */
#define BUILD(obj, chain)                                                                      \
    do {                                                                                       \
        if (!(obj) || !(chain)) {                                                              \
            json_decref(obj);                                                                  \
            return NULL;                                                                       \
        }                                                                                      \
        return (obj);                                                                          \
    } while (0)

static json_t *shape_json(const ld_shape *shape)
{
    json_t *a = json_array();
    bool ok = a != NULL;
    for (int i = 0; ok && i < shape->rank; i++)
        ok = append(a, jint(shape->dims[i]));
    BUILD(a, ok);
}

/* The multi-dimensional index of a flat index (row-major), or null. */
static json_t *coords_json(int64_t flat, const ld_shape *shape)
{
    if (flat < 0)
        return json_null();
    int64_t idx[LD_MAX_RANK];
    for (int d = shape->rank - 1; d >= 0; d--) {
        int64_t dim = shape->dims[d];
        idx[d] = dim > 0 ? flat % dim : 0;
        flat = dim > 0 ? flat / dim : 0;
    }
    json_t *a = json_array();
    bool ok = a != NULL;
    for (int d = 0; ok && d < shape->rank; d++)
        ok = append(a, jint(idx[d]));
    BUILD(a, ok);
}

static json_t *stats_json(const ld_error_stats *e, const ld_shape *shape)
{
    json_t *o = json_object();
    BUILD(o, set(o, "max", jnum(e->max)) && set(o, "mean", jnum(e->mean)) &&
                 set(o, "median", jnum(e->median)) && set(o, "p90", jnum(e->p90)) &&
                 set(o, "p95", jnum(e->p95)) && set(o, "p99", jnum(e->p99)) &&
                 set(o, "quantile", jnum(e->quantile)) &&
                 set(o, "max_index", jint(e->max_index)) &&
                 set(o, "max_coords", coords_json(e->max_index, shape)));
}

static json_t *side_json(const ld_side_stats *s)
{
    json_t *o = json_object();
    BUILD(o, set(o, "nan", jint(s->nan)) && set(o, "pos_inf", jint(s->pos_inf)) &&
                 set(o, "neg_inf", jint(s->neg_inf)) && set(o, "subnormal", jint(s->subnormal)) &&
                 set(o, "zero", jint(s->zero)) && set(o, "min", jnum(s->min)) &&
                 set(o, "max", jnum(s->max)) && set(o, "mean", jnum(s->mean)) &&
                 set(o, "std", jnum(s->std)));
}

static json_t *metrics_json(const ld_tensor_metrics *m, const ld_shape *shape)
{
    json_t *o = json_object();
    BUILD(o, set(o, "n", jint(m->n)) && set(o, "pass", json_boolean(m->pass)) &&
                 set(o, "n_fail", jint(m->n_fail)) &&
                 set(o, "first_fail_index", jint(m->first_fail_index)) &&
                 set(o, "first_fail_coords", coords_json(m->first_fail_index, shape)) &&
                 set(o, "abs", stats_json(&m->abs, shape)) &&
                 set(o, "rel", stats_json(&m->rel, shape)) &&
                 set(o, "ulp", stats_json(&m->ulp, shape)) &&
                 set(o, "rel_tiny_ref", jint(m->rel_tiny_ref)) &&
                 set(o, "cosine", jnum(m->cosine)) && set(o, "snr_db", jnum(m->snr_db)) &&
                 set(o, "l2_rel", jnum(m->l2_rel)) && set(o, "ref", side_json(&m->ref)) &&
                 set(o, "test", side_json(&m->test)) &&
                 set(o, "nonfinite_test_only", jint(m->nonfinite_test_only)) &&
                 set(o, "special_mismatch", jint(m->special_mismatch)) &&
                 set(o, "would_overflow", jint(m->would_overflow)) &&
                 set(o, "underflow_zero", jint(m->underflow_zero)));
}

static json_t *tolerance_json(const ld_tolerance *t)
{
    json_t *o = json_object();
    BUILD(o, set(o, "atol", jnum(t->atol)) && set(o, "rtol", jnum(t->rtol)) &&
                 set(o, "mode", json_string(ld_report_tol_mode_name(t->mode))) &&
                 set(o, "check_error_stat", json_string(ld_report_check_stat_name(t->check))) &&
                 set(o, "error_quantile", jnum(t->quantile)) &&
                 set(o, "nan_is_error", json_boolean(t->nan_is_error)));
}

static json_t *counters_json(const ld_layer_counters *c)
{
    if (!c->present)
        return json_null();
    json_t *o = json_object();
    BUILD(o, set(o, "overflows", jint(c->overflows)) &&
                 set(o, "nans_created", jint(c->nans_created)) &&
                 set(o, "underflows", jint(c->underflows)) &&
                 set(o, "subnormals", jint(c->subnormals)) &&
                 set(o, "partial_overflows", jint(c->partial_overflows)));
}

static json_t *inputs_json(const ld_compare_record *r)
{
    json_t *a = json_array();
    bool ok = a != NULL;
    for (int j = 0; ok && j < r->n_inputs; j++) {
        json_t *in = json_object();
        ok = in && set(in, "name", jstr(r->input_names ? r->input_names[j] : "")) &&
             set(in, "record", r->inputs[j] >= 0 ? json_integer(r->inputs[j]) : json_null());
        if (!ok)
            json_decref(in);
        else
            ok = append(a, in);
    }
    BUILD(a, ok);
}

static json_t *record_json(const ld_compare_record *r, int index)
{
    json_t *o = json_object();
    BUILD(o, set(o, "index", json_integer(index)) && set(o, "name", jstr(r->name)) &&
                 set(o, "node", jstr(r->node)) && set(o, "op_type", jstr(r->op_type)) &&
                 set(o, "topo_index", jint(r->topo_index)) &&
                 set(o, "output_index", json_integer(r->output_index)) &&
                 set(o, "precision", json_string(ld_precision_name(r->precision))) &&
                 set(o, "ref_dtype", json_string(ld_dtype_name(r->ref_dtype))) &&
                 set(o, "test_dtype", json_string(ld_dtype_name(r->test_dtype))) &&
                 set(o, "shape", shape_json(&r->shape)) &&
                 set(o, "is_graph_output", json_boolean(r->is_graph_output)) &&
                 set(o, "is_float", json_boolean(r->is_float)) &&
                 set(o, "inputs", inputs_json(r)) &&
                 set(o, "tolerance", tolerance_json(&r->tol)) &&
                 set(o, "pass", json_boolean(r->metrics.pass)) &&
                 set(o, "origin", json_boolean(r->origin)) &&
                 set(o, "culprit", json_boolean(r->culprit)) &&
                 set(o, "rate_of_change", jnum(r->rate_of_change)) &&
                 set(o, "scaled_ulp", jnum(r->scaled_ulp)) &&
                 set(o, "isolated_scaled_ulp",
                     r->has_isolated ? jnum(r->isolated_scaled_ulp) : json_null()) &&
                 set(o, "counters", counters_json(&r->counters)) &&
                 set(o, "metrics", metrics_json(&r->metrics, &r->shape)) &&
                 set(o, "isolated", r->has_isolated ? metrics_json(&r->isolated, &r->shape)
                                                    : json_null()) &&
                 set(o, "clip_crossings",
                     r->clip_crossings >= 0 ? jint(r->clip_crossings) : json_null()));
}

/* --- head --------------------------------------------------------------------------------- */

static json_t *side_context_json(const char *source, const char *run, const char *backend,
                                 const char *config)
{
    json_t *o = json_object();
    BUILD(o, set(o, "source", jstr(source)) && set(o, "run", jstr(run)) &&
                 set(o, "backend", jstr(backend)) && set(o, "config", jstr(config)));
}

static json_t *names_json(int n, const char *const *names)
{
    json_t *a = json_array();
    bool ok = a != NULL;
    for (int i = 0; ok && i < n; i++)
        ok = append(a, jstr(names[i]));
    BUILD(a, ok);
}

/* null when the command was not timed */
static json_t *timing_json(const ld_report_timing *t)
{
    if (!t->present)
        return json_null();
    json_t *o = json_object();
    BUILD(o, set(o, "total_seconds", jnum(t->total_seconds)) &&
                 set(o, "reference_seconds", jnum(t->ref_seconds)) &&
                 set(o, "test_seconds", jnum(t->test_seconds)) &&
                 set(o, "compare_seconds", jnum(t->compare_seconds)));
}

static json_t *context_json(const ld_report_context *c)
{
    json_t *o = json_object();
    BUILD(o, set(o, "command", jstr(c->command)) &&
                 set(o, "command_line", jstr(c->command_line)) &&
                 set(o, "model_path", jstr(c->model_path)) &&
                 set(o, "model_sha256", jstr(c->model_sha256)) &&
                 set(o, "input_seed", jint(c->input_seed)) &&
                 set(o, "reference", side_context_json(c->ref_source, c->ref_run,
                                                       c->ref_backend, c->ref_config)) &&
                 set(o, "test", side_context_json(c->test_source, c->test_run,
                                                  c->test_backend, c->test_config)) &&
                 set(o, "missing_in_test", names_json(c->n_missing_in_test,
                                                      c->missing_in_test)) &&
                 set(o, "missing_in_reference", names_json(c->n_missing_in_ref,
                                                           c->missing_in_ref)) &&
                 set(o, "timing", timing_json(&c->timing)));
}

static json_t *overrides_json(int n, const ld_tolerance_override *list)
{
    json_t *a = json_array();
    bool ok = a != NULL;
    for (int i = 0; ok && i < n; i++) {
        json_t *o = json_object();
        ok = o && set(o, "pattern", jstr(list[i].pattern)) && set(o, "value", jnum(list[i].value));
        if (!ok)
            json_decref(o);
        else
            ok = append(a, o);
    }
    BUILD(a, ok);
}

static json_t *defaults_json(void)
{
    static const ld_precision all[] = {LD_PRECISION_FP32, LD_PRECISION_TF32,
                                       LD_PRECISION_FP16, LD_PRECISION_BF16};
    json_t *o = json_object();
    bool ok = o != NULL;
    for (size_t i = 0; ok && i < sizeof all / sizeof all[0]; i++)
        ok = set(o, ld_precision_name(all[i]), jnum(ld_tolerance_default(all[i])));
    BUILD(o, ok);
}

static json_t *tolerances_json(const ld_compare_options *opts)
{
    const ld_tolerance_spec *t = &opts->tol;
    json_t *o = json_object();
    BUILD(o, set(o, "atol", t->atol_set ? jnum(t->atol) : json_null()) &&
                 set(o, "rtol", t->rtol_set ? jnum(t->rtol) : json_null()) &&
                 set(o, "atol_overrides", overrides_json(t->n_atol, t->atol_overrides)) &&
                 set(o, "rtol_overrides", overrides_json(t->n_rtol, t->rtol_overrides)) &&
                 set(o, "defaults", defaults_json()) &&
                 set(o, "mode", json_string(ld_report_tol_mode_name(t->mode))) &&
                 set(o, "check_error_stat", json_string(ld_report_check_stat_name(t->check))) &&
                 set(o, "error_quantile", jnum(t->quantile)) &&
                 set(o, "nan_is_error", json_boolean(t->nan_is_error)) &&
                 set(o, "culprit_ulp", jnum(opts->culprit_ulp)));
}

/* A summary entry: where a record is and the metrics that put it there. */
static json_t *entry_json(const ld_compare_session *s, int index)
{
    const ld_compare_record *r = ld_compare_session_record(s, index);
    const ld_tensor_metrics *m = &r->metrics;
    json_t *o = json_object();
    BUILD(o, set(o, "record", json_integer(index)) && set(o, "name", jstr(r->name)) &&
                 set(o, "node", jstr(r->node)) && set(o, "op_type", jstr(r->op_type)) &&
                 set(o, "precision", json_string(ld_precision_name(r->precision))) &&
                 set(o, "max_abs", jnum(m->abs.max)) &&
                 set(o, "max_abs_coords", coords_json(m->abs.max_index, &r->shape)) &&
                 set(o, "mean_abs", jnum(m->abs.mean)) && set(o, "max_rel", jnum(m->rel.max)) &&
                 set(o, "max_ulp", jnum(m->ulp.max)) &&
                 set(o, "scaled_ulp", jnum(r->scaled_ulp)) && set(o, "n_fail", jint(m->n_fail)) &&
                 set(o, "rate_of_change", jnum(r->rate_of_change)) &&
                 set(o, "isolated_max_ulp",
                     r->has_isolated ? jnum(r->isolated.ulp.max) : json_null()) &&
                 set(o, "isolated_scaled_ulp",
                     r->has_isolated ? jnum(r->isolated_scaled_ulp) : json_null()) &&
                 set(o, "isolated_mean_abs",
                     r->has_isolated ? jnum(r->isolated.abs.mean) : json_null()));
}

static json_t *entries_json(const ld_compare_session *s, int n, const int *indices)
{
    json_t *a = json_array();
    bool ok = a != NULL;
    for (int i = 0; ok && i < n; i++)
        ok = append(a, entry_json(s, indices[i]));
    BUILD(a, ok);
}

static json_t *engine_json(const ld_compare_summary *sum)
{
    json_t *o = json_object();
    BUILD(o, set(o, "overflows", jint(sum->overflows)) &&
                 set(o, "nans_created", jint(sum->nans_created)) &&
                 set(o, "underflows", jint(sum->underflows)));
}

static json_t *summary_json(const ld_compare_session *s)
{
    const ld_compare_summary *sum = ld_compare_session_summary(s);
    json_t *o = json_object();
    BUILD(o, set(o, "verdict", json_string(sum->pass ? "pass" : "fail")) &&
                 set(o, "compared", json_integer(sum->n_compared)) &&
                 set(o, "failed", json_integer(sum->n_failed)) &&
                 set(o, "first_divergent", sum->first_divergent >= 0
                                               ? entry_json(s, sum->first_divergent)
                                               : json_null()) &&
                 set(o, "origins", entries_json(s, sum->n_origins, sum->origins)) &&
                 set(o, "culprits", entries_json(s, sum->n_culprits, sum->culprits)) &&
                 set(o, "engine_counters", engine_json(sum)) &&
                 set(o, "would_overflow", jint(sum->would_overflow)) &&
                 set(o, "has_isolated", json_boolean(sum->has_isolated)) &&
                 set(o, "clip_crossings",
                     sum->clip_crossings >= 0 ? jint(sum->clip_crossings) : json_null()));
}

/* When the report was made, as ISO 8601 UTC ("2026-01-31T02:00:00Z"), so the
 * nightly trend (report/trend.c) can order reports. SOURCE_DATE_EPOCH (the
 * reproducible-builds convention) overrides the clock. */
static json_t *created_json(void)
{
    time_t now = time(NULL);
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    if (epoch && *epoch) {
        char *end;
        errno = 0;
        long long v = strtoll(epoch, &end, 10);
        if (errno == 0 && *end == '\0' && v >= 0)
            now = (time_t)v;
    }
    struct tm tm;
    char buf[32];
    if (!gmtime_r(&now, &tm) || strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return json_null();
    return json_string(buf);
}

static json_t *head_json(const ld_compare_session *s, const ld_report_context *ctx)
{
    json_t *o = json_object();
    BUILD(o, set(o, "schema", json_string(LD_REPORT_SCHEMA_NAME)) &&
                 set(o, "schema_version", json_integer(LD_REPORT_SCHEMA_VERSION)) &&
                 set(o, "schema_minor", json_integer(LD_REPORT_SCHEMA_MINOR)) &&
                 set(o, "tool_version", json_string(LAYERDIFF_VERSION)) &&
                 set(o, "created", created_json()) &&
                 set(o, "context", context_json(ctx)) &&
                 set(o, "tolerances", tolerances_json(ld_compare_session_options(s))) &&
                 set(o, "summary", summary_json(s)));
}

/* --- writing ---------------------------------------------------------------------------- */

/* The head printed indented, without its closing brace, then the records
 * one per line. Returns false on an allocation or write failure. */
static bool write_report(FILE *f, const ld_compare_session *s, const ld_report_context *ctx)
{
    json_t *head = head_json(s, ctx);
    char *text = head ? json_dumps(head, JSON_INDENT(2) | DUMP_FLAGS) : NULL;
    json_decref(head);
    if (!text)
        return false;
    size_t len = strlen(text);
    while (len > 0 && text[len - 1] != '}')
        len--;
    while (len > 1 && (text[len - 2] == '\n' || text[len - 2] == ' '))
        len--; /* drop the whitespace before the final brace */
    bool ok = len > 1 && fwrite(text, 1, len - 1, f) == len - 1;
    free(text);
    ok = ok && fputs(",\n  \"records\": [", f) >= 0;
    int n = ld_compare_session_count(s);
    for (int i = 0; ok && i < n; i++) {
        json_t *rec = record_json(ld_compare_session_record(s, i), i);
        ok = rec && fputs(i ? ",\n    " : "\n    ", f) >= 0 &&
             json_dumpf(rec, f, DUMP_FLAGS) == 0;
        json_decref(rec);
    }
    return ok && fputs(n ? "\n  ]\n}\n" : "]\n}\n", f) >= 0;
}

typedef struct report_job {
    const ld_compare_session *s;
    const ld_report_context *ctx;
} report_job;

static ld_status write_job(const void *job, FILE *f, ld_error *err)
{
    const report_job *j = job;
    errno = 0;
    if (write_report(f, j->s, j->ctx) || ferror(f))
        return LD_OK; /* a write error: ld_atomic_write_file reports it with errno */
    return ld_error_set(err, LD_ERR_NOMEM, "out of memory writing the JSON report");
}

ld_status ld_report_write_json(const ld_compare_session *s, const ld_report_context *ctx,
                               const char *path, ld_error *err)
{
    static const ld_report_context no_context = {.input_seed = -1};
    report_job j = {s, ctx ? ctx : &no_context};
    return ld_atomic_write_file(path, "report", write_job, &j, err);
}
