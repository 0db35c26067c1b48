/* layerdiff — the nightly trend: reports of one model lined up over time and
 * checked for regressions (ld_trend_load, report.h; rendering in
 * report/trend_render.c).
 *
 * Regressions are judged between consecutive runs, so a change is blamed on
 * the night it appeared; only those in the newest run count for the exit
 * code (an old regression since fixed must not fail tonight's job), the
 * others are shown as history. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "report/render.h"

#define DEFAULT_FACTOR 2.0
#define ABS_FLOOR_OF_ATOL 0.01 /* abs errors below 1% of atol never count as worse */
#define ULP_FLOOR 1.0          /* nor ulp errors of at most one ulp */

/* An allocation count: n, or 1 for n <= 0 (malloc(0) may return NULL). */
static size_t slots(int n)
{
    return n > 0 ? (size_t)n : 1;
}

/* --- messages ------------------------------------------------------------------------------ */

static char *vformat(const char *fmt, va_list ap)
{
    char *s = NULL;
    return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

static bool add_warning(ld_trend *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool add_warning(ld_trend *t, const char *fmt, ...)
{
    char **grown = realloc(t->warnings, slots(t->n_warnings + 1) * sizeof *grown);
    if (!grown)
        return false;
    t->warnings = grown;
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    if (!msg)
        return false;
    t->warnings[t->n_warnings++] = msg;
    return true;
}

/* --- timestamps ----------------------------------------------------------------------------- */

/* The top-level "created" string of a report file (NULL when absent). The
 * report reader does not keep it, so it is read here on its own. */
static ld_status read_created(const char *path, char **out, ld_error *err)
{
    json_error_t jerr;
    *out = NULL;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root)
        return ld_error_set(err, LD_ERR_INPUT, "%s: line %d column %d: %s", path, jerr.line,
                            jerr.column, jerr.text);
    const char *s = json_string_value(json_object_get(root, "created"));
    ld_status st = LD_OK;
    if (s && !(*out = strdup(s)))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory reading '%s'", path);
    json_decref(root);
    return st;
}

/* ISO 8601 "YYYY-MM-DDTHH:MM:SS[.fff][Z|+HH:MM|-HH:MM]" (no zone = UTC) to
 * seconds since the epoch. */
static bool parse_timestamp(const char *s, double *out)
{
    struct tm tm = {0};
    int used = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &used) != 6)
        return false;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    double frac = 0;
    const char *p = s + used;
    if (*p == '.') {
        char *end;
        frac = strtod(p, &end);
        p = end;
    }
    int offset = 0;
    if (*p == '+' || *p == '-') {
        int hh = 0, mm = 0, n = 0;
        if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2)
            return false;
        offset = (*p == '+' ? 1 : -1) * (hh * 3600 + mm * 60);
        p += 1 + n;
    } else if (*p == 'Z') {
        p++;
    }
    if (*p != '\0')
        return false;
    time_t t = timegm(&tm);
    if (t == (time_t)-1 && errno == EOVERFLOW)
        return false;
    *out = (double)t + frac - offset;
    return true;
}

typedef struct dated {
    ld_trend_run run;
    double when;
    int order;
} dated;

static int compare_dated(const void *pa, const void *pb)
{
    const dated *a = pa, *b = pb;
    if (a->when != b->when)
        return a->when < b->when ? -1 : 1;
    return a->order - b->order;
}

/* Reads every report and orders them oldest first. */
static ld_status load_runs(ld_trend *t, const char *const *paths, int n, ld_error *err)
{
    dated *d = calloc(slots(n), sizeof *d);
    if (!d)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory reading %d reports", n);
    ld_status st = LD_OK;
    bool all_dated = true;
    for (int i = 0; st == LD_OK && i < n; i++) {
        d[i].order = i;
        d[i].run.path = strdup(paths[i]);
        if (!d[i].run.path)
            st = ld_error_set(err, LD_ERR_NOMEM, "out of memory reading '%s'", paths[i]);
        if (st == LD_OK)
            st = ld_report_read_json(paths[i], &d[i].run.report, err);
        if (st == LD_OK)
            st = read_created(paths[i], &d[i].run.created, err);
        if (st == LD_OK && !parse_timestamp(d[i].run.created, &d[i].when)) {
            all_dated = false;
            if (!add_warning(t, "%s: %s; reports are kept in command-line order", paths[i],
                             d[i].run.created ? "the \"created\" timestamp cannot be read"
                                              : "no \"created\" timestamp"))
                st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        }
    }
    if (st == LD_OK && all_dated)
        qsort(d, (size_t)n, sizeof *d, compare_dated);
    t->runs = calloc(slots(n), sizeof *t->runs);
    if (st == LD_OK && !t->runs)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory reading %d reports", n);
    for (int i = 0; i < n; i++) {
        if (st == LD_OK) {
            t->runs[i] = d[i].run;
            continue;
        }
        free(d[i].run.path);
        free(d[i].run.created);
        ld_report_free(d[i].run.report);
    }
    if (st == LD_OK)
        t->n_runs = n;
    free(d);
    return st;
}

static bool check_models(ld_trend *t)
{
    const ld_trend_run *newest = &t->runs[t->n_runs - 1];
    const char *sha = newest->report->context.model_sha256;
    bool ok = true;
    for (int i = 0; ok && i < t->n_runs; i++) {
        const char *other = t->runs[i].report->context.model_sha256;
        if (!other)
            ok = add_warning(t, "%s: the report has no model sha256: cannot check it is the "
                             "same model", t->runs[i].path);
        else if (sha && strcmp(other, sha) != 0)
            ok = add_warning(t, "%s: model sha256 %.12s differs from the newest report's "
                             "(%s, %.12s): different models lined up anyway",
                             t->runs[i].path, other, newest->path, sha);
    }
    return ok;
}

/* --- series: which tensors are followed, and where each is in every run ----------------------- */

typedef struct named {
    const char *name;
    int index;
} named;

static int compare_named(const void *pa, const void *pb)
{
    const named *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : a->index - b->index;
}

static bool any_graph_output(const ld_trend *t)
{
    for (int k = 0; k < t->n_runs; k++)
        for (int i = 0; i < t->runs[k].report->n_records; i++)
            if (t->runs[k].report->records[i].is_graph_output)
                return true;
    return false;
}

/* Each run's followed records sorted by name, for lookups. */
static named *sorted_records(const ld_report *r, bool outputs_only, int *n_out)
{
    named *list = malloc(slots(r->n_records) * sizeof *list);
    int n = 0;
    for (int i = 0; list && i < r->n_records; i++)
        if (!outputs_only || r->records[i].is_graph_output)
            list[n++] = (named){r->records[i].name, i};
    if (list)
        qsort(list, (size_t)n, sizeof *list, compare_named);
    *n_out = n;
    return list;
}

static int find(const named *list, int n, const char *name)
{
    named key = {name, -1};
    int lo = 0, hi = n;
    while (lo < hi) { /* first entry >= key */
        int mid = lo + (hi - lo) / 2;
        if (compare_named(&list[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && strcmp(list[lo].name, name) == 0 ? list[lo].index : -1;
}

static ld_status build_series(ld_trend *t, ld_error *err)
{
    bool outputs_only = any_graph_output(t);
    int cap = 0;
    for (int k = 0; k < t->n_runs; k++)
        cap += t->runs[k].report->n_records;
    named **lists = calloc(slots(t->n_runs), sizeof *lists);
    int *counts = calloc(slots(t->n_runs), sizeof *counts);
    t->series = malloc(slots(cap) * sizeof *t->series);
    ld_status st = lists && counts && t->series ? LD_OK : LD_ERR_NOMEM;
    for (int k = 0; st == LD_OK && k < t->n_runs; k++)
        if (!(lists[k] = sorted_records(t->runs[k].report, outputs_only, &counts[k])))
            st = LD_ERR_NOMEM;
    /* Names in first-seen order, oldest run first. */
    for (int k = 0; st == LD_OK && k < t->n_runs; k++) {
        const ld_report *r = t->runs[k].report;
        for (int i = 0; i < r->n_records; i++) {
            const ld_compare_record *rec = &r->records[i];
            if (outputs_only && !rec->is_graph_output)
                continue;
            bool seen = false;
            for (int j = 0; j < k && !seen; j++)
                seen = find(lists[j], counts[j], rec->name) >= 0;
            if (!seen && find(lists[k], counts[k], rec->name) == i)
                t->series[t->n_series++] = rec->name; /* borrowed from the report */
        }
    }
    if (st == LD_OK)
        t->cells = malloc(slots(t->n_series) * slots(t->n_runs) * sizeof *t->cells);
    if (st == LD_OK && !t->cells)
        st = LD_ERR_NOMEM;
    for (int k = 0; st == LD_OK && k < t->n_runs; k++)
        for (int s = 0; s < t->n_series; s++)
            t->cells[k * t->n_series + s] = find(lists[k], counts[k], t->series[s]);
    for (int k = 0; lists && k < t->n_runs; k++)
        free(lists[k]);
    free(lists);
    free(counts);
    return st == LD_OK ? LD_OK : ld_error_set(err, st, "out of memory lining up the reports");
}

/* --- regressions ---------------------------------------------------------------------------- */

/* cur is worse than prev by more than factor, and not negligible. */
static bool worsened(double prev, double cur, double floor, double factor)
{
    if (isnan(prev) || isnan(cur) || cur <= floor || isinf(prev))
        return false;
    return isinf(cur) || cur > factor * prev;
}

typedef struct reasons {
    char text[600];
    size_t len;
} reasons;

static void reason(reasons *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reason(reasons *r, const char *fmt, ...)
{
    if (r->len >= sizeof r->text - 1)
        return;
    if (r->len)
        r->len += (size_t)snprintf(r->text + r->len, sizeof r->text - r->len, "; ");
    va_list ap;
    va_start(ap, fmt);
    if (r->len < sizeof r->text)
        r->len += (size_t)vsnprintf(r->text + r->len, sizeof r->text - r->len, fmt, ap);
    va_end(ap);
    if (r->len > sizeof r->text - 1)
        r->len = sizeof r->text - 1;
}

static void metric_reason(reasons *why, const char *name, double prev, double cur, double floor,
                          double factor)
{
    char a[32], b[32];
    if (!worsened(prev, cur, floor, factor))
        return;
    if (isinf(cur) || prev <= 0)
        reason(why, "%s %s -> %s", name, rd_num(prev, a, sizeof a), rd_num(cur, b, sizeof b));
    else
        reason(why, "%s %s -> %s (x%.3g)", name, rd_num(prev, a, sizeof a),
               rd_num(cur, b, sizeof b), cur / prev);
}

static void judge(const ld_trend *t, const ld_compare_record *p, const ld_compare_record *c,
                  reasons *why)
{
    char a[32], b[32];
    if (p->metrics.pass && !c->metrics.pass)
        reason(why, "passed, now fails (max abs %s, atol %s)", rd_num(c->metrics.abs.max, a,
               sizeof a), rd_num(c->tol.atol, b, sizeof b));
    if (p->metrics.nonfinite_test_only == 0 && c->metrics.nonfinite_test_only > 0)
        reason(why, "now %lld NaN/inf where the reference is finite",
               (long long)c->metrics.nonfinite_test_only);
    double abs_floor = ABS_FLOOR_OF_ATOL * c->tol.atol;
    metric_reason(why, "max abs", p->metrics.abs.max, c->metrics.abs.max, abs_floor,
                  t->regress_factor);
    metric_reason(why, "mean abs", p->metrics.abs.mean, c->metrics.abs.mean, abs_floor,
                  t->regress_factor);
    metric_reason(why, "ulps at scale", p->scaled_ulp, c->scaled_ulp, ULP_FLOOR,
                  t->regress_factor);
}

static bool add_finding(ld_trend *t, int series, int run, const char *why)
{
    ld_trend_finding *grown = realloc(t->findings, slots(t->n_findings + 1) * sizeof *grown);
    if (!grown)
        return false;
    t->findings = grown;
    ld_trend_finding *f = &t->findings[t->n_findings];
    if (asprintf(&f->message, "%s: %s", t->series[series], why) < 0)
        return false;
    f->series = series;
    f->run = run;
    f->latest = run == t->n_runs - 1;
    t->n_findings++;
    t->n_regressions += f->latest;
    return true;
}

static bool find_regressions(ld_trend *t)
{
    bool ok = true;
    for (int k = 1; ok && k < t->n_runs; k++)
        for (int s = 0; ok && s < t->n_series; s++) {
            int pi = t->cells[(k - 1) * t->n_series + s], ci = t->cells[k * t->n_series + s];
            if (pi >= 0 && ci < 0) {
                ok = add_warning(t, "%s: '%s' is in %s but not in %s", t->runs[k].path,
                                 t->series[s], t->runs[k - 1].path, t->runs[k].path);
                continue;
            }
            if (pi < 0 || ci < 0)
                continue;
            reasons why = {.len = 0};
            why.text[0] = '\0';
            judge(t, &t->runs[k - 1].report->records[pi], &t->runs[k].report->records[ci], &why);
            if (why.len)
                ok = add_finding(t, s, k, why.text);
        }
    return ok;
}

ld_status ld_trend_load(const char *const *paths, int n, double regress_factor,
                        ld_trend **out, ld_error *err)
{
    *out = NULL;
    if (n < 1)
        return ld_error_set(err, LD_ERR_USAGE, "the trend needs at least one report");
    ld_trend *t = calloc(1, sizeof *t);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    t->regress_factor = regress_factor > 0 ? regress_factor : DEFAULT_FACTOR;
    ld_status st = load_runs(t, paths, n, err);
    if (st == LD_OK && n == 1 && !add_warning(t, "one report only: nothing to compare it with"))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK && !check_models(t))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK)
        st = build_series(t, err);
    if (st == LD_OK && !find_regressions(t))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st != LD_OK) {
        ld_trend_free(t);
        return st;
    }
    *out = t;
    return LD_OK;
}

void ld_trend_free(ld_trend *t)
{
    if (!t)
        return;
    for (int k = 0; k < t->n_runs; k++) {
        free(t->runs[k].path);
        free(t->runs[k].created);
        ld_report_free(t->runs[k].report);
    }
    free(t->runs);
    free(t->series); /* the names are the reports' */
    free(t->cells);
    for (int i = 0; i < t->n_findings; i++)
        free(t->findings[i].message);
    free(t->findings);
    for (int i = 0; i < t->n_warnings; i++)
        free(t->warnings[i]);
    free(t->warnings);
    free(t);
}

/* Terminal text: control characters in names become '?'. */
static void plain(FILE *out, const char *s)
{
    for (; s && *s; s++)
        fputc((unsigned char)*s < 0x20 || *s == 0x7F ? '?' : *s, out);
}

void ld_trend_print_summary(const ld_trend *t, FILE *out)
{
    const ld_report_context *c = &t->runs[t->n_runs - 1].report->context;
    fprintf(out, "layerdiff trend: %d report%s of ", t->n_runs, t->n_runs == 1 ? "" : "s");
    plain(out, *rd_basename(c->model_path) ? rd_basename(c->model_path) : "(model unknown)");
    fputs(t->runs[0].created ? ", " : "", out);
    plain(out, t->runs[0].created);
    fputs(t->runs[0].created && t->runs[t->n_runs - 1].created ? " to " : "", out);
    plain(out, t->runs[0].created ? t->runs[t->n_runs - 1].created : NULL);
    fprintf(out, "; %d tensor%s followed\n", t->n_series, t->n_series == 1 ? "" : "s");
    for (int i = 0; i < t->n_warnings; i++) {
        fputs("  warning: ", out);
        plain(out, t->warnings[i]);
        fputc('\n', out);
    }
    for (int i = 0; i < t->n_findings; i++) {
        const ld_trend_finding *f = &t->findings[i];
        fprintf(out, "  %s ", f->latest ? "REGRESSION" : "earlier regression");
        plain(out, t->runs[f->run].path);
        fputs(": ", out);
        plain(out, f->message);
        fputc('\n', out);
    }
    if (t->n_regressions)
        fprintf(out, "%d regression%s in the newest report (factor %g)\n", t->n_regressions,
                t->n_regressions == 1 ? "" : "s", t->regress_factor);
    else
        fprintf(out, "no regression in the newest report (factor %g)\n", t->regress_factor);
}
