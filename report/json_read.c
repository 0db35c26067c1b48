/* layerdiff — reading a JSON report back (ld_report_read_json, report.h).
 *
 * For the nightly trend (issue 6) and the fuzz target of issue 9, so it
 * trusts nothing: every field is checked for presence and type, indices for
 * range, and the first problem becomes one line naming the file and the
 * field's path ("r.json: records[3].metrics.abs.max: missing"). Unknown
 * fields are ignored (the version policy in docs/report-schema.md lets a
 * writer add fields without a new version). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "layerdiff/report.h"

#define PATH_SIZE 256

typedef struct reader {
    const char *file;
    ld_error *err;
} reader;

static ld_status bad(const reader *rd, const char *path, const char *what)
{
    return ld_error_set(rd->err, LD_ERR_INPUT, "%s: %s: %s", rd->file, path, what);
}

/* A path cut short ends in "..." (paths are only for messages). */
static const char *mark_cut(char *buf, int n)
{
    if (n < 0 || n >= PATH_SIZE)
        memcpy(buf + PATH_SIZE - 4, "...", 4);
    return buf;
}

/* "parent.key" (or "key" at the top) into buf. */
static const char *child(char *buf, const char *parent, const char *key)
{
    return mark_cut(buf, snprintf(buf, PATH_SIZE, "%s%s%s", parent, *parent ? "." : "", key));
}

static const char *item_path(char *buf, const char *parent, size_t i)
{
    return mark_cut(buf, snprintf(buf, PATH_SIZE, "%s[%zu]", parent, i));
}

/* --- typed getters: obj[key] into *out, or a one-line error --------------------------- */

static ld_status get(const reader *rd, const json_t *obj, const char *parent, const char *key,
                     json_t **out)
{
    char p[PATH_SIZE];
    *out = json_object_get(obj, key);
    return *out ? LD_OK : bad(rd, child(p, parent, key), "missing");
}

static ld_status get_typed(const reader *rd, const json_t *obj, const char *parent,
                           const char *key, json_type type, const char *what, json_t **out)
{
    char p[PATH_SIZE];
    ld_status st = get(rd, obj, parent, key, out);
    if (st == LD_OK && json_typeof(*out) != type)
        st = bad(rd, child(p, parent, key), what);
    return st;
}

static ld_status get_object(const reader *rd, const json_t *obj, const char *parent,
                            const char *key, json_t **out)
{
    return get_typed(rd, obj, parent, key, JSON_OBJECT, "expected an object", out);
}

static ld_status get_array(const reader *rd, const json_t *obj, const char *parent,
                           const char *key, json_t **out)
{
    return get_typed(rd, obj, parent, key, JSON_ARRAY, "expected an array", out);
}

static ld_status no_memory(const reader *rd)
{
    return ld_error_set(rd->err, LD_ERR_NOMEM, "out of memory reading '%s'", rd->file);
}

/* obj[key]: an array of at most max items (else `too_many`), and *items: one
 * zeroed element of elem bytes per item (NULL, *n = 0 when empty). */
static ld_status get_items(const reader *rd, const json_t *obj, const char *parent,
                           const char *key, size_t max, const char *too_many, size_t elem,
                           json_t **array, void **items, size_t *n)
{
    char p[PATH_SIZE];
    *items = NULL;
    *n = 0;
    ld_status st = get_array(rd, obj, parent, key, array);
    size_t count = st == LD_OK ? json_array_size(*array) : 0;
    if (count > max)
        return bad(rd, child(p, parent, key), too_many);
    if (count == 0)
        return st;
    *items = calloc(count, elem);
    if (!*items)
        return no_memory(rd);
    *n = count;
    return LD_OK;
}

/* A number, or one of the strings NaN/inf are written as. */
static bool decode_number(const json_t *v, double *out)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    const char *s = json_string_value(v);
    if (!s)
        return false;
    if (strcmp(s, "NaN") == 0)
        *out = NAN;
    else if (strcmp(s, "Infinity") == 0)
        *out = INFINITY;
    else if (strcmp(s, "-Infinity") == 0)
        *out = -INFINITY;
    else
        return false;
    return true;
}

static ld_status get_number(const reader *rd, const json_t *obj, const char *parent,
                            const char *key, double *out)
{
    char p[PATH_SIZE];
    json_t *v;
    ld_status st = get(rd, obj, parent, key, &v);
    if (st == LD_OK && !decode_number(v, out))
        st = bad(rd, child(p, parent, key),
                 "expected a number or \"NaN\"/\"Infinity\"/\"-Infinity\"");
    return st;
}

static ld_status get_int64(const reader *rd, const json_t *obj, const char *parent,
                           const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    char p[PATH_SIZE], what[96];
    json_t *v;
    ld_status st = get(rd, obj, parent, key, &v);
    if (st != LD_OK)
        return st;
    if (!json_is_integer(v))
        return bad(rd, child(p, parent, key), "expected an integer");
    *out = (int64_t)json_integer_value(v);
    if (*out < lo || *out > hi) {
        snprintf(what, sizeof what, "%lld is out of range [%lld, %lld]", (long long)*out,
                 (long long)lo, (long long)hi);
        return bad(rd, child(p, parent, key), what);
    }
    return LD_OK;
}

static ld_status get_int(const reader *rd, const json_t *obj, const char *parent,
                         const char *key, int lo, int hi, int *out)
{
    int64_t v = 0;
    ld_status st = get_int64(rd, obj, parent, key, lo, hi, &v);
    *out = (int)v;
    return st;
}

static ld_status get_count(const reader *rd, const json_t *obj, const char *parent,
                           const char *key, int64_t *out)
{
    return get_int64(rd, obj, parent, key, 0, INT64_MAX, out);
}

static ld_status get_bool(const reader *rd, const json_t *obj, const char *parent,
                          const char *key, bool *out)
{
    char p[PATH_SIZE];
    json_t *v;
    ld_status st = get(rd, obj, parent, key, &v);
    if (st == LD_OK && !json_is_boolean(v))
        st = bad(rd, child(p, parent, key), "expected true or false");
    if (st == LD_OK)
        *out = json_is_true(v);
    return st;
}

/* A string (new copy) or, when nullable, null (NULL). */
static ld_status get_string(const reader *rd, const json_t *obj, const char *parent,
                            const char *key, bool nullable, char **out)
{
    char p[PATH_SIZE];
    json_t *v;
    *out = NULL;
    ld_status st = get(rd, obj, parent, key, &v);
    if (st != LD_OK || (nullable && json_is_null(v)))
        return st;
    if (!json_is_string(v))
        return bad(rd, child(p, parent, key), nullable ? "expected a string or null"
                                                       : "expected a string");
    *out = strdup(json_string_value(v));
    return *out ? LD_OK : no_memory(rd);
}

/* A string that must be one of a set of names, decoded by `parse`. */
static ld_status get_name(const reader *rd, const json_t *obj, const char *parent,
                          const char *key, bool (*parse)(const char *, void *), void *out)
{
    char p[PATH_SIZE];
    json_t *v;
    ld_status st = get(rd, obj, parent, key, &v);
    if (st == LD_OK && (!json_is_string(v) || !parse(json_string_value(v), out)))
        st = bad(rd, child(p, parent, key), "unknown value");
    return st;
}

static bool parse_precision(const char *s, void *out) { return ld_precision_from_name(s, out); }
static bool parse_dtype(const char *s, void *out) { return ld_dtype_from_name(s, out); }
static bool parse_mode(const char *s, void *out) { return ld_report_tol_mode_from_name(s, out); }
static bool parse_check(const char *s, void *out)
{
    return ld_report_check_stat_from_name(s, out);
}

/* --- metrics ------------------------------------------------------------------------------ */

/* Fields read by table: each JSON key is the C member's name. */
typedef enum field_kind {
    F_NUMBER,   /* double: a number or "NaN"/"Infinity"/"-Infinity" */
    F_COUNT,    /* int64_t >= 0 */
    F_INDEX,    /* int64_t >= -1 (-1: none) */
    F_BOOL,
} field_kind;

typedef struct field {
    const char *key;
    field_kind kind;
    size_t offset;
} field;

#define FIELD(type, member, kind) {#member, kind, offsetof(type, member)}
#define N_FIELDS(table) (sizeof(table) / sizeof(table)[0])

static ld_status load_fields(const reader *rd, const json_t *o, const char *path,
                             const field *fields, size_t n, void *base)
{
    ld_status st = LD_OK;
    for (size_t i = 0; st == LD_OK && i < n; i++) {
        const field *f = &fields[i];
        void *at = (char *)base + f->offset;
        if (f->kind == F_NUMBER)
            st = get_number(rd, o, path, f->key, at);
        else if (f->kind == F_COUNT)
            st = get_count(rd, o, path, f->key, at);
        else if (f->kind == F_INDEX)
            st = get_int64(rd, o, path, f->key, -1, INT64_MAX, at);
        else
            st = get_bool(rd, o, path, f->key, at);
    }
    return st;
}

/* parent_obj[key] as an object whose fields are read by table. */
static ld_status load_object(const reader *rd, const json_t *parent_obj, const char *parent,
                             const char *key, const field *fields, size_t n, void *base)
{
    char p[PATH_SIZE];
    json_t *o;
    ld_status st = get_object(rd, parent_obj, parent, key, &o);
    return st == LD_OK ? load_fields(rd, o, child(p, parent, key), fields, n, base) : st;
}

static const field stats_fields[] = {
    FIELD(ld_error_stats, max, F_NUMBER), FIELD(ld_error_stats, mean, F_NUMBER),
    FIELD(ld_error_stats, median, F_NUMBER), FIELD(ld_error_stats, p90, F_NUMBER),
    FIELD(ld_error_stats, p95, F_NUMBER), FIELD(ld_error_stats, p99, F_NUMBER),
    FIELD(ld_error_stats, quantile, F_NUMBER), FIELD(ld_error_stats, max_index, F_INDEX)};

static const field side_fields[] = {
    FIELD(ld_side_stats, nan, F_COUNT), FIELD(ld_side_stats, pos_inf, F_COUNT),
    FIELD(ld_side_stats, neg_inf, F_COUNT), FIELD(ld_side_stats, subnormal, F_COUNT),
    FIELD(ld_side_stats, zero, F_COUNT), FIELD(ld_side_stats, min, F_NUMBER),
    FIELD(ld_side_stats, max, F_NUMBER), FIELD(ld_side_stats, mean, F_NUMBER),
    FIELD(ld_side_stats, std, F_NUMBER)};

/* In the order of the file (the first problem found is the one reported). */
static const field metrics_head[] = {
    FIELD(ld_tensor_metrics, n, F_COUNT), FIELD(ld_tensor_metrics, pass, F_BOOL),
    FIELD(ld_tensor_metrics, n_fail, F_COUNT),
    FIELD(ld_tensor_metrics, first_fail_index, F_INDEX)};
static const field metrics_middle[] = {
    FIELD(ld_tensor_metrics, rel_tiny_ref, F_COUNT), FIELD(ld_tensor_metrics, cosine, F_NUMBER),
    FIELD(ld_tensor_metrics, snr_db, F_NUMBER), FIELD(ld_tensor_metrics, l2_rel, F_NUMBER)};
static const field metrics_tail[] = {
    FIELD(ld_tensor_metrics, nonfinite_test_only, F_COUNT),
    FIELD(ld_tensor_metrics, special_mismatch, F_COUNT),
    FIELD(ld_tensor_metrics, would_overflow, F_COUNT),
    FIELD(ld_tensor_metrics, underflow_zero, F_COUNT)};

static const field counter_fields[] = {
    FIELD(ld_layer_counters, overflows, F_COUNT), FIELD(ld_layer_counters, nans_created, F_COUNT),
    FIELD(ld_layer_counters, underflows, F_COUNT), FIELD(ld_layer_counters, subnormals, F_COUNT),
    FIELD(ld_layer_counters, partial_overflows, F_COUNT)};

static ld_status load_metrics(const reader *rd, const json_t *o, const char *path,
                              ld_tensor_metrics *m)
{
    const struct { const char *key; ld_error_stats *e; } stats[] = {
        {"abs", &m->abs}, {"rel", &m->rel}, {"ulp", &m->ulp}};
    ld_status st = load_fields(rd, o, path, metrics_head, N_FIELDS(metrics_head), m);
    for (int i = 0; st == LD_OK && i < 3; i++)
        st = load_object(rd, o, path, stats[i].key, stats_fields, N_FIELDS(stats_fields),
                         stats[i].e);
    if (st == LD_OK) st = load_fields(rd, o, path, metrics_middle, N_FIELDS(metrics_middle), m);
    if (st == LD_OK) st = load_object(rd, o, path, "ref", side_fields, N_FIELDS(side_fields), &m->ref);
    if (st == LD_OK)
        st = load_object(rd, o, path, "test", side_fields, N_FIELDS(side_fields), &m->test);
    if (st == LD_OK) st = load_fields(rd, o, path, metrics_tail, N_FIELDS(metrics_tail), m);
    return st;
}

static ld_status load_tolerance(const reader *rd, const json_t *o, const char *path,
                                ld_tolerance *t)
{
    ld_status st = get_number(rd, o, path, "atol", &t->atol);
    if (st == LD_OK) st = get_number(rd, o, path, "rtol", &t->rtol);
    if (st == LD_OK) st = get_name(rd, o, path, "mode", parse_mode, &t->mode);
    if (st == LD_OK) st = get_name(rd, o, path, "check_error_stat", parse_check, &t->check);
    if (st == LD_OK) st = get_number(rd, o, path, "error_quantile", &t->quantile);
    if (st == LD_OK) st = get_bool(rd, o, path, "nan_is_error", &t->nan_is_error);
    return st;
}

static ld_status load_counters(const reader *rd, const json_t *rec, const char *path,
                               ld_layer_counters *c)
{
    char p[PATH_SIZE];
    json_t *o;
    ld_status st = get(rd, rec, path, "counters", &o);
    if (st != LD_OK || json_is_null(o))
        return st;
    if (!json_is_object(o))
        return bad(rd, child(p, path, "counters"), "expected an object or null");
    c->present = true;
    return load_fields(rd, o, child(p, path, "counters"), counter_fields,
                       N_FIELDS(counter_fields), c);
}

/* --- records ---------------------------------------------------------------------------- */

static ld_status load_shape(const reader *rd, const json_t *rec, const char *path, ld_shape *s)
{
    char p[PATH_SIZE], ip[PATH_SIZE];
    json_t *a;
    ld_status st = get_array(rd, rec, path, "shape", &a);
    const char *sp = child(p, path, "shape");
    if (st == LD_OK && json_array_size(a) > LD_MAX_RANK)
        return bad(rd, sp, "rank above 16");
    s->rank = st == LD_OK ? (int)json_array_size(a) : 0;
    for (int d = 0; st == LD_OK && d < s->rank; d++) {
        json_t *v = json_array_get(a, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return bad(rd, item_path(ip, sp, (size_t)d), "expected a dimension >= 0");
        s->dims[d] = (int64_t)json_integer_value(v);
    }
    return st;
}

static ld_status load_inputs(const reader *rd, const json_t *rec, const char *path, int index,
                             ld_compare_record *r)
{
    char p[PATH_SIZE], ip[PATH_SIZE];
    json_t *a;
    void *items;
    size_t n;
    ld_status st = get_items(rd, rec, path, "inputs", INT_MAX / 2, "too many inputs",
                             sizeof *r->inputs, &a, &items, &n);
    r->inputs = items;
    const char *ap = child(p, path, "inputs");
    if (n == 0)
        return st;
    r->input_names = calloc(n, sizeof *r->input_names);
    if (!r->input_names)
        return no_memory(rd);
    r->n_inputs = (int)n;
    for (size_t j = 0; st == LD_OK && j < n; j++) {
        json_t *in = json_array_get(a, j), *k = NULL;
        const char *jp = item_path(ip, ap, j);
        if (!json_is_object(in))
            return bad(rd, jp, "expected an object");
        st = get_string(rd, in, jp, "name", false, &r->input_names[j]);
        if (st == LD_OK)
            st = get(rd, in, jp, "record", &k);
        if (st != LD_OK)
            return st;
        if (json_is_null(k)) {
            r->inputs[j] = -1;
            continue;
        }
        st = get_int(rd, in, jp, "record", 0, index - 1, &r->inputs[j]);
    }
    return st;
}

/* "clip_crossings": optional (reports before it lack it), null or a count; -1 when absent
 * or null, as ld_compare_record and ld_compare_summary hold it. */
static ld_status get_clip_crossings(const reader *rd, const json_t *obj, const char *path,
                                    int64_t *out)
{
    const json_t *v = json_object_get(obj, "clip_crossings");
    *out = -1;
    if (!v || json_is_null(v))
        return LD_OK;
    return get_int64(rd, obj, path, "clip_crossings", 0, INT64_MAX, out);
}

static ld_status load_record(const reader *rd, const json_t *rec, const char *path, int index,
                             ld_compare_record *r)
{
    json_t *o;
    int64_t at = 0;
    ld_status st = json_is_object(rec) ? LD_OK : bad(rd, path, "expected an object");
    if (st == LD_OK) st = get_int64(rd, rec, path, "index", index, index, &at);
    if (st == LD_OK) st = get_string(rd, rec, path, "name", false, &r->name);
    if (st == LD_OK) st = get_string(rd, rec, path, "node", false, &r->node);
    if (st == LD_OK) st = get_string(rd, rec, path, "op_type", false, &r->op_type);
    if (st == LD_OK) st = get_int64(rd, rec, path, "topo_index", -1, INT64_MAX, &r->topo_index);
    if (st == LD_OK) st = get_int(rd, rec, path, "output_index", 0, INT_MAX, &r->output_index);
    if (st == LD_OK) st = get_name(rd, rec, path, "precision", parse_precision, &r->precision);
    if (st == LD_OK) st = get_name(rd, rec, path, "ref_dtype", parse_dtype, &r->ref_dtype);
    if (st == LD_OK) st = get_name(rd, rec, path, "test_dtype", parse_dtype, &r->test_dtype);
    if (st == LD_OK) st = load_shape(rd, rec, path, &r->shape);
    if (st == LD_OK) st = get_bool(rd, rec, path, "is_graph_output", &r->is_graph_output);
    if (st == LD_OK) st = get_bool(rd, rec, path, "is_float", &r->is_float);
    if (st == LD_OK) st = load_inputs(rd, rec, path, index, r);
    if (st == LD_OK) st = get_bool(rd, rec, path, "origin", &r->origin);
    if (st == LD_OK) st = get_bool(rd, rec, path, "culprit", &r->culprit);
    if (st == LD_OK) st = get_number(rd, rec, path, "rate_of_change", &r->rate_of_change);
    if (st == LD_OK) st = get_number(rd, rec, path, "scaled_ulp", &r->scaled_ulp);
    if (st == LD_OK) st = get_clip_crossings(rd, rec, path, &r->clip_crossings);
    if (st == LD_OK) st = load_counters(rd, rec, path, &r->counters);
    char p[PATH_SIZE];
    if (st == LD_OK) st = get_object(rd, rec, path, "tolerance", &o);
    if (st == LD_OK) st = load_tolerance(rd, o, child(p, path, "tolerance"), &r->tol);
    if (st == LD_OK) st = get_object(rd, rec, path, "metrics", &o);
    if (st == LD_OK) st = load_metrics(rd, o, child(p, path, "metrics"), &r->metrics);
    if (st == LD_OK) st = get(rd, rec, path, "isolated", &o);
    r->isolated_scaled_ulp = NAN;
    if (st != LD_OK || json_is_null(o))
        return st;
    if (!json_is_object(o))
        return bad(rd, child(p, path, "isolated"), "expected an object or null");
    r->has_isolated = true;
    st = get_number(rd, rec, path, "isolated_scaled_ulp", &r->isolated_scaled_ulp);
    if (st == LD_OK)
        st = load_metrics(rd, o, child(p, path, "isolated"), &r->isolated);
    return st;
}

static ld_status load_records(const reader *rd, const json_t *root, ld_report *rep)
{
    char p[PATH_SIZE];
    json_t *a;
    void *items;
    size_t n;
    ld_status st = get_items(rd, root, "", "records", INT_MAX / 2, "too many records",
                             sizeof *rep->records, &a, &items, &n);
    rep->records = items;
    rep->n_records = (int)n;
    for (size_t i = 0; st == LD_OK && i < n; i++)
        st = load_record(rd, json_array_get(a, i), item_path(p, "records", i), (int)i,
                         &rep->records[i]);
    return st;
}

/* --- head ---------------------------------------------------------------------------------- */

static ld_status load_schema(const reader *rd, const json_t *root, ld_report *rep)
{
    char what[160];
    if (!json_is_object(root))
        return ld_error_set(rd->err, LD_ERR_INPUT, "%s: not a layerdiff report (the JSON is "
                            "not an object)", rd->file);
    const char *name = json_string_value(json_object_get(root, "schema"));
    if (!name || strcmp(name, LD_REPORT_SCHEMA_NAME) != 0) {
        snprintf(what, sizeof what, "expected \"%s\": not a layerdiff report",
                 LD_REPORT_SCHEMA_NAME);
        return bad(rd, "schema", what);
    }
    int64_t version = 0;
    ld_status st = get_int64(rd, root, "", "schema_version", 1, INT64_MAX, &version);
    if (st != LD_OK)
        return st;
    if (version > LD_REPORT_SCHEMA_VERSION) {
        snprintf(what, sizeof what, "%lld: written by a newer layerdiff (this one reads "
                 "version %d)", (long long)version, LD_REPORT_SCHEMA_VERSION);
        return bad(rd, "schema_version", what);
    }
    rep->schema_version = (int)version;
    int64_t minor = 0;
    if (json_object_get(root, "schema_minor")) /* files before 1.1 have none */
        st = get_int64(rd, root, "", "schema_minor", 0, INT_MAX, &minor);
    rep->schema_minor = (int)minor;
    return st == LD_OK ? get_string(rd, root, "", "tool_version", false, &rep->tool_version)
                       : st;
}

static ld_status load_names(const reader *rd, const json_t *obj, const char *parent,
                            const char *key, int *n_out, const char *const **out)
{
    char p[PATH_SIZE], ip[PATH_SIZE];
    json_t *a;
    void *items;
    size_t n;
    ld_status st = get_items(rd, obj, parent, key, INT_MAX / 2, "too many names",
                             sizeof(char *), &a, &items, &n);
    char **names = items;
    if (n == 0)
        return st;
    *out = (const char *const *)names;
    *n_out = (int)n;
    const char *ap = child(p, parent, key);
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (!s)
            return bad(rd, item_path(ip, ap, i), "expected a string");
        names[i] = strdup(s);
        if (!names[i])
            return no_memory(rd);
    }
    return LD_OK;
}

/* context.reference / context.test: {source, run, backend, config}. */
static ld_status load_side_context(const reader *rd, const json_t *ctx, const char *key,
                                   const char **source, const char **run,
                                   const char **backend, const char **config)
{
    char p[PATH_SIZE];
    const char **fields[4] = {source, run, backend, config};
    static const char *const names[4] = {"source", "run", "backend", "config"};
    json_t *o;
    ld_status st = get_object(rd, ctx, "context", key, &o);
    const char *path = child(p, "context", key);
    for (int i = 0; st == LD_OK && i < 4; i++) {
        char *v = NULL;
        st = get_string(rd, o, path, names[i], true, &v);
        *fields[i] = v;
    }
    return st;
}

static ld_status load_context_string(const reader *rd, const json_t *o, const char *key,
                                     const char **out)
{
    char *v = NULL;
    ld_status st = get_string(rd, o, "context", key, true, &v);
    *out = v;
    return st;
}

static const field timing_fields[] = {
    {"total_seconds", F_NUMBER, offsetof(ld_report_timing, total_seconds)},
    {"reference_seconds", F_NUMBER, offsetof(ld_report_timing, ref_seconds)},
    {"test_seconds", F_NUMBER, offsetof(ld_report_timing, test_seconds)},
    {"compare_seconds", F_NUMBER, offsetof(ld_report_timing, compare_seconds)}};

/* context.timing (schema 1.1): absent (older files) or null (not timed), or
 * an object of seconds. */
static ld_status load_timing(const reader *rd, const json_t *ctx, ld_report_timing *t)
{
    json_t *o = json_object_get(ctx, "timing");
    if (!o || json_is_null(o))
        return LD_OK;
    if (!json_is_object(o))
        return bad(rd, "context.timing", "expected an object or null");
    t->present = true;
    return load_fields(rd, o, "context.timing", timing_fields, N_FIELDS(timing_fields), t);
}

static ld_status load_context(const reader *rd, const json_t *root, ld_report_context *c)
{
    json_t *o;
    ld_status st = get_object(rd, root, "", "context", &o);
    if (st == LD_OK) st = load_context_string(rd, o, "command", &c->command);
    if (st == LD_OK) st = load_context_string(rd, o, "command_line", &c->command_line);
    if (st == LD_OK) st = load_context_string(rd, o, "model_path", &c->model_path);
    if (st == LD_OK) st = load_context_string(rd, o, "model_sha256", &c->model_sha256);
    if (st == LD_OK)
        st = get_int64(rd, o, "context", "input_seed", -1, INT64_MAX, &c->input_seed);
    if (st == LD_OK)
        st = load_side_context(rd, o, "reference", &c->ref_source, &c->ref_run,
                               &c->ref_backend, &c->ref_config);
    if (st == LD_OK)
        st = load_side_context(rd, o, "test", &c->test_source, &c->test_run,
                               &c->test_backend, &c->test_config);
    if (st == LD_OK)
        st = load_names(rd, o, "context", "missing_in_test", &c->n_missing_in_test,
                        &c->missing_in_test);
    if (st == LD_OK)
        st = load_names(rd, o, "context", "missing_in_reference", &c->n_missing_in_ref,
                        &c->missing_in_ref);
    if (st == LD_OK)
        st = load_timing(rd, o, &c->timing);
    return st;
}

static ld_status load_overrides(const reader *rd, const json_t *tol, const char *key,
                                int *n_out, ld_tolerance_override **out)
{
    char p[PATH_SIZE], ip[PATH_SIZE];
    json_t *a;
    void *items;
    size_t n;
    ld_status st = get_items(rd, tol, "tolerances", key, INT_MAX / 2, "too many overrides",
                             sizeof **out, &a, &items, &n);
    *out = items;
    const char *ap = child(p, "tolerances", key);
    *n_out = (int)n;
    for (size_t i = 0; st == LD_OK && i < n; i++) {
        json_t *o = json_array_get(a, i);
        const char *op = item_path(ip, ap, i);
        if (!json_is_object(o))
            return bad(rd, op, "expected an object");
        st = get_string(rd, o, op, "pattern", false, &(*out)[i].pattern);
        if (st == LD_OK)
            st = get_number(rd, o, op, "value", &(*out)[i].value);
    }
    return st;
}

/* atol/rtol: a number, or null for "the default of each tensor's precision". */
static ld_status load_global_tol(const reader *rd, const json_t *tol, const char *key,
                                 bool *set, double *value)
{
    json_t *v = json_object_get(tol, key);
    *set = v && !json_is_null(v);
    if (v && !*set)
        return LD_OK;
    return get_number(rd, tol, "tolerances", key, value);
}

static ld_status load_options(const reader *rd, const json_t *root, ld_compare_options *opts)
{
    ld_tolerance_spec *t = &opts->tol;
    json_t *o;
    const char *p = "tolerances";
    ld_status st = get_object(rd, root, "", p, &o);
    if (st == LD_OK) st = load_global_tol(rd, o, "atol", &t->atol_set, &t->atol);
    if (st == LD_OK) st = load_global_tol(rd, o, "rtol", &t->rtol_set, &t->rtol);
    if (st == LD_OK) st = load_overrides(rd, o, "atol_overrides", &t->n_atol, &t->atol_overrides);
    if (st == LD_OK) st = load_overrides(rd, o, "rtol_overrides", &t->n_rtol, &t->rtol_overrides);
    if (st == LD_OK) st = get_name(rd, o, p, "mode", parse_mode, &t->mode);
    if (st == LD_OK) st = get_name(rd, o, p, "check_error_stat", parse_check, &t->check);
    if (st == LD_OK) st = get_number(rd, o, p, "error_quantile", &t->quantile);
    if (st == LD_OK) st = get_bool(rd, o, p, "nan_is_error", &t->nan_is_error);
    if (st == LD_OK) st = get_number(rd, o, p, "culprit_ulp", &opts->culprit_ulp);
    return st;
}

/* summary.origins / summary.culprits: entries naming records by index. */
static ld_status load_entries(const reader *rd, const json_t *sum, const char *key, int n_records,
                              int *n_out, const int **out)
{
    char p[PATH_SIZE], ip[PATH_SIZE];
    json_t *a;
    void *items;
    size_t n;
    ld_status st = get_items(rd, sum, "summary", key, (size_t)n_records,
                             "more entries than records", sizeof(int), &a, &items, &n);
    int *indices = items;
    const char *ap = child(p, "summary", key);
    *out = indices;
    *n_out = (int)n;
    for (size_t i = 0; st == LD_OK && i < n; i++) {
        json_t *e = json_array_get(a, i);
        const char *ep = item_path(ip, ap, i);
        st = json_is_object(e) ? get_int(rd, e, ep, "record", 0, n_records - 1, &indices[i])
                               : bad(rd, ep, "expected an object");
    }
    return st;
}

static ld_status load_verdict(const reader *rd, const json_t *o, ld_compare_summary *s)
{
    const char *v = json_string_value(json_object_get(o, "verdict"));
    if (!v)
        return bad(rd, "summary.verdict", json_object_get(o, "verdict") ? "expected a string"
                                                                        : "missing");
    if (strcmp(v, "pass") != 0 && strcmp(v, "fail") != 0)
        return bad(rd, "summary.verdict", "expected \"pass\" or \"fail\"");
    s->pass = strcmp(v, "pass") == 0;
    return LD_OK;
}

static ld_status load_first(const reader *rd, const json_t *o, int n_records,
                            ld_compare_summary *s)
{
    json_t *first;
    ld_status st = get(rd, o, "summary", "first_divergent", &first);
    s->first_divergent = -1;
    if (st != LD_OK || json_is_null(first))
        return st;
    if (!json_is_object(first))
        return bad(rd, "summary.first_divergent", "expected an object or null");
    return get_int(rd, first, "summary.first_divergent", "record", 0, n_records - 1,
                   &s->first_divergent);
}

static ld_status load_summary(const reader *rd, const json_t *root, ld_report *rep)
{
    ld_compare_summary *s = &rep->summary;
    int n = rep->n_records;
    json_t *o, *e;
    const char *p = "summary";
    ld_status st = get_object(rd, root, "", p, &o);
    if (st == LD_OK) st = load_verdict(rd, o, s);
    if (st == LD_OK) st = get_int(rd, o, p, "compared", n, n, &s->n_compared);
    if (st == LD_OK) st = get_int(rd, o, p, "failed", 0, n, &s->n_failed);
    if (st == LD_OK) st = load_first(rd, o, n, s);
    if (st == LD_OK) st = load_entries(rd, o, "origins", n, &s->n_origins, &s->origins);
    if (st == LD_OK) st = load_entries(rd, o, "culprits", n, &s->n_culprits, &s->culprits);
    if (st == LD_OK) st = get_object(rd, o, p, "engine_counters", &e);
    const char *ep = "summary.engine_counters";
    if (st == LD_OK) st = get_int64(rd, e, ep, "overflows", INT64_MIN, INT64_MAX, &s->overflows);
    if (st == LD_OK)
        st = get_int64(rd, e, ep, "nans_created", INT64_MIN, INT64_MAX, &s->nans_created);
    if (st == LD_OK)
        st = get_int64(rd, e, ep, "underflows", INT64_MIN, INT64_MAX, &s->underflows);
    if (st == LD_OK) st = get_count(rd, o, p, "would_overflow", &s->would_overflow);
    if (st == LD_OK) st = get_bool(rd, o, p, "has_isolated", &s->has_isolated);
    if (st == LD_OK) st = get_clip_crossings(rd, o, p, &s->clip_crossings);
    return st;
}

static ld_status load_head(const reader *rd, const json_t *root, ld_report *rep)
{
    ld_status st = load_context(rd, root, &rep->context);
    if (st == LD_OK)
        st = load_options(rd, root, &rep->options);
    if (st == LD_OK)
        st = load_summary(rd, root, rep);
    return st;
}

ld_status ld_report_read_json(const char *path, ld_report **out, ld_error *err)
{
    *out = NULL;
    reader rd = {.file = path, .err = err};
    json_error_t jerr;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ld_error_set(err, LD_ERR_IO, "cannot open report '%s': %s", path,
                            strerror(errno));
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    bool read_error = ferror(f);
    fclose(f);
    if (!root && read_error)
        return ld_error_set(err, LD_ERR_IO, "cannot read report '%s'", path);
    if (!root)
        return ld_error_set(err, LD_ERR_INPUT, "%s: line %d column %d: %s", path, jerr.line,
                            jerr.column, jerr.text);
    ld_report *rep = calloc(1, sizeof *rep);
    ld_status st = rep ? LD_OK : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK)
        st = load_schema(&rd, root, rep);
    if (st == LD_OK)
        st = load_records(&rd, root, rep);
    if (st == LD_OK)
        st = load_head(&rd, root, rep);
    json_decref(root);
    if (st != LD_OK) {
        ld_report_free(rep);
        return st;
    }
    *out = rep;
    return LD_OK;
}
