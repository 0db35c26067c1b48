/* Unit tests for report/: the JSON report (written, then parsed with jansson
 * and checked field by field, NaN/inf encoding, atomic replacement), its
 * reader (round trip, and one-line errors for a wrong schema name or
 * version, a missing or mistyped field, bad indices, bad JSON) and the
 * terminal summary (content, 100 columns, colour only when asked, control
 * characters in names). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "layerdiff/report.h"

#define N 4

typedef struct fixture {
    char dir[64];
    char path[128];
    ld_compare_options opts;
    ld_compare_session *s;
} fixture;

static ld_tensor *tensor_of(const float *v)
{
    ld_error err;
    ld_tensor *t = NULL;
    ld_shape shape = {.rank = 2, .dims = {2, 2}};
    assert_int_equal(ld_tensor_create(&t, "t", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    memcpy(t->data, v, t->nbytes);
    return t;
}

static void add(ld_compare_session *s, const char *name, int64_t topo, const char *input,
                const float *ref, const float *test, const float *iso)
{
    ld_error err;
    ld_tensor *r = tensor_of(ref), *t = tensor_of(test), *i = iso ? tensor_of(iso) : NULL;
    const char *inputs[] = {input, "W"};
    ld_compare_item item = {.name = name, .node = topo >= 0 ? "node" : "",
                            .op_type = topo >= 0 ? "Conv" : "", .topo_index = topo,
                            .precision = topo >= 0 ? LD_PRECISION_FP16 : LD_PRECISION_FP32,
                            .counters = {.present = topo == 1, .overflows = 3},
                            .n_inputs = input ? 2 : 0, .inputs = inputs,
                            .is_graph_output = topo == 2, .ref = r, .test = t, .isolated = i};
    if (ld_compare_session_add(s, &item, &err) != LD_OK)
        fail_msg("%s", err.message);
    ld_tensor_destroy(r);
    ld_tensor_destroy(t);
    ld_tensor_destroy(i);
}

/* x (input) -> a (passes) -> bad\x01name (error born, NaN in test, isolated
 * 1.0 off) -> z (reference all zero: SNR -inf). */
static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    ld_error err;
    snprintf(f->dir, sizeof f->dir, "/tmp/ld-report-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/report.json", f->dir);
    assert_int_equal(ld_tolerance_spec_add(&f->opts.tol, true, "a*:0.5", &err), LD_OK);
    assert_int_equal(ld_compare_session_create(&f->s, &f->opts, &err), LD_OK);
    const float x[N] = {1, 2, 3, 4}, nan_t[N] = {1, NAN, 3, 4.5f}, iso[N] = {1, 2, 3, 5};
    const float zero[N] = {0, 0, 0, 0}, one[N] = {1, 1, 1, 1};
    add(f->s, "x", -1, NULL, x, x, NULL);
    add(f->s, "a", 0, "x", x, x, x);
    add(f->s, "bad\x01name", 1, "a", x, nan_t, iso);
    add(f->s, "z", 2, "bad\x01name", zero, one, NULL);
    assert_int_equal(ld_compare_session_finish(f->s, &err), LD_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ld_compare_session_destroy(f->s);
    ld_tolerance_spec_free(&f->opts.tol);
    DIR *d = opendir(f->dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", f->dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(f->dir);
    free(f);
    return 0;
}

static const char *const missing[] = {"gone"};
static const ld_report_context context = {
    .command = "compare", .command_line = "layerdiff compare a.h5 b.h5",
    .model_path = "m.onnx", .ref_source = "a.h5", .test_source = "b.h5",
    .ref_run = "reference", .ref_backend = "reference", .test_run = "emulated",
    .test_backend = "emulated", .test_config = "fp16", .input_seed = 7,
    .n_missing_in_test = 1, .missing_in_test = missing};

static json_t *write_and_load(fixture *f)
{
    ld_error err;
    json_error_t jerr;
    assert_int_equal(ld_report_write_json(f->s, &context, f->path, &err), LD_OK);
    json_t *root = json_load_file(f->path, 0, &jerr);
    if (!root)
        fail_msg("report is not JSON: %s (line %d)", jerr.text, jerr.line);
    return root;
}

static json_t *at(json_t *root, const char *path)
{
    json_t *v = root;
    char key[64];
    while (*path && v) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        char *end;
        long index = strtol(key, &end, 10);
        v = *end == '\0' && json_is_array(v) ? json_array_get(v, (size_t)index)
                                             : json_object_get(v, key);
        path += n + (path[n] == '.');
    }
    if (!v)
        fail_msg("no field %s", path);
    return v;
}

static void test_json_fields(void **state)
{
    fixture *f = *state;
    json_t *root = write_and_load(f);
    /* schema first, so a reader can tell the file without parsing further */
    void *it = json_object_iter(root);
    assert_string_equal(json_object_iter_key(it), "schema");
    assert_string_equal(json_string_value(at(root, "schema")), LD_REPORT_SCHEMA_NAME);
    assert_int_equal(json_integer_value(at(root, "schema_version")), LD_REPORT_SCHEMA_VERSION);
    assert_string_equal(json_string_value(at(root, "context.test.config")), "fp16");
    assert_true(json_is_null(at(root, "context.reference.config")));
    assert_true(json_is_null(at(root, "context.model_sha256")));
    assert_int_equal(json_integer_value(at(root, "context.input_seed")), 7);
    assert_string_equal(json_string_value(at(root, "context.missing_in_test.0")), "gone");
    assert_true(json_is_null(at(root, "tolerances.atol")));
    assert_string_equal(json_string_value(at(root, "tolerances.atol_overrides.0.pattern")), "a*");
    assert_true(json_real_value(at(root, "tolerances.defaults.fp16")) == 10.0 / 2048);
    assert_true(json_real_value(at(root, "tolerances.culprit_ulp")) == 8);
    assert_string_equal(json_string_value(at(root, "tolerances.mode")), "polygraphy");
    assert_string_equal(json_string_value(at(root, "summary.verdict")), "fail");
    assert_int_equal(json_integer_value(at(root, "summary.compared")), 4);
    assert_int_equal(json_integer_value(at(root, "summary.failed")), 2);
    assert_int_equal(json_integer_value(at(root, "summary.first_divergent.record")), 2);
    /* names that are not printable stay exact in JSON (escaped) */
    assert_string_equal(json_string_value(at(root, "summary.first_divergent.name")),
                        "bad\x01name");
    assert_string_equal(json_string_value(at(root, "summary.first_divergent.max_abs")),
                        "Infinity");
    assert_int_equal(json_array_size(at(root, "summary.origins")), 1);
    assert_int_equal(json_integer_value(at(root, "summary.culprits.0.record")), 2);
    assert_true(json_real_value(at(root, "summary.culprits.0.isolated_mean_abs")) == 0.25);
    assert_int_equal(json_integer_value(at(root, "summary.engine_counters.overflows")), 3);
    assert_true(json_is_true(at(root, "summary.has_isolated")));
    assert_int_equal(json_array_size(at(root, "records")), 4);
    assert_int_equal(json_integer_value(at(root, "records.2.inputs.0.record")), 1);
    assert_true(json_is_null(at(root, "records.2.inputs.1.record")));
    assert_string_equal(json_string_value(at(root, "records.2.inputs.1.name")), "W");
    assert_string_equal(json_string_value(at(root, "records.2.precision")), "fp16");
    assert_int_equal(json_integer_value(at(root, "records.2.shape.1")), 2);
    assert_int_equal(json_integer_value(at(root, "records.2.metrics.nonfinite_test_only")), 1);
    assert_int_equal(json_integer_value(at(root, "records.2.metrics.abs.max_coords.1")), 1);
    assert_true(json_real_value(at(root, "records.2.isolated.abs.max")) == 1.0);
    /* 1.0 off at a scale of 4, in fp16 ulps of 4 (2^-8) */
    assert_true(json_real_value(at(root, "records.2.isolated_scaled_ulp")) == 256);
    assert_string_equal(json_string_value(at(root, "records.2.scaled_ulp")), "Infinity");
    assert_true(json_is_null(at(root, "records.3.isolated_scaled_ulp")));
    assert_true(json_real_value(at(root, "summary.culprits.0.isolated_scaled_ulp")) == 256);
    assert_true(json_is_null(at(root, "records.3.isolated")));
    assert_true(json_is_true(at(root, "records.3.is_graph_output")));
    assert_string_equal(json_string_value(at(root, "records.3.metrics.snr_db")), "-Infinity");
    assert_string_equal(json_string_value(at(root, "records.0.metrics.snr_db")), "Infinity");
    assert_string_equal(json_string_value(at(root, "records.0.metrics.abs.quantile")), "NaN");
    assert_true(json_real_value(at(root, "records.1.tolerance.atol")) == 0.5);
    assert_true(json_is_null(at(root, "records.0.counters")));
    assert_int_equal(json_integer_value(at(root, "records.2.counters.overflows")), 3);
    json_decref(root);
}

/* Only the final file remains; an old file is replaced whole. */
static void test_json_atomic(void **state)
{
    fixture *f = *state;
    ld_error err;
    FILE *old = fopen(f->path, "w");
    fputs("old", old);
    fclose(old);
    json_decref(write_and_load(f));
    DIR *d = opendir(f->dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        files += e->d_name[0] != '.';
    closedir(d);
    assert_int_equal(files, 1);
    char bad[256];
    snprintf(bad, sizeof bad, "%s/no/such/dir/r.json", f->dir);
    assert_int_equal(ld_report_write_json(f->s, NULL, bad, &err), LD_ERR_IO);
    assert_non_null(strstr(err.message, bad));
}

static bool same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static void assert_same_stats(const ld_error_stats *a, const ld_error_stats *b)
{
    assert_true(same_double(a->max, b->max) && same_double(a->mean, b->mean) &&
                same_double(a->median, b->median) && same_double(a->p90, b->p90) &&
                same_double(a->p95, b->p95) && same_double(a->p99, b->p99) &&
                same_double(a->quantile, b->quantile));
    assert_int_equal(a->max_index, b->max_index);
}

static void assert_same_metrics(const ld_tensor_metrics *a, const ld_tensor_metrics *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->pass, b->pass);
    assert_int_equal(a->n_fail, b->n_fail);
    assert_same_stats(&a->abs, &b->abs);
    assert_same_stats(&a->rel, &b->rel);
    assert_same_stats(&a->ulp, &b->ulp);
    assert_true(same_double(a->cosine, b->cosine) && same_double(a->snr_db, b->snr_db) &&
                same_double(a->l2_rel, b->l2_rel));
    assert_true(same_double(a->ref.std, b->ref.std) && same_double(a->test.min, b->test.min));
    assert_int_equal(a->test.nan, b->test.nan);
    assert_int_equal(a->nonfinite_test_only, b->nonfinite_test_only);
}

static void test_read_round_trip(void **state)
{
    fixture *f = *state;
    ld_error err;
    json_decref(write_and_load(f));
    ld_report *r = NULL;
    if (ld_report_read_json(f->path, &r, &err) != LD_OK)
        fail_msg("%s", err.message);
    assert_int_equal(r->schema_version, 1);
    assert_string_equal(r->context.test_run, "emulated");
    assert_null(r->context.ref_config);
    assert_int_equal(r->context.n_missing_in_test, 1);
    assert_string_equal(r->context.missing_in_test[0], "gone");
    assert_false(r->options.tol.atol_set);
    assert_int_equal(r->options.tol.n_atol, 1);
    assert_string_equal(r->options.tol.atol_overrides[0].pattern, "a*");
    const ld_compare_summary *want = ld_compare_session_summary(f->s);
    assert_int_equal(r->summary.pass, want->pass);
    assert_int_equal(r->summary.first_divergent, want->first_divergent);
    assert_int_equal(r->summary.n_origins, want->n_origins);
    assert_int_equal(r->summary.origins[0], want->origins[0]);
    assert_int_equal(r->summary.n_culprits, want->n_culprits);
    assert_int_equal(r->summary.overflows, 3);
    assert_int_equal(r->n_records, ld_compare_session_count(f->s));
    for (int i = 0; i < r->n_records; i++) {
        const ld_compare_record *a = &r->records[i], *b = ld_compare_session_record(f->s, i);
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->topo_index, b->topo_index);
        assert_int_equal(a->precision, b->precision);
        assert_int_equal(a->n_inputs, b->n_inputs);
        for (int j = 0; j < a->n_inputs; j++)
            assert_int_equal(a->inputs[j], b->inputs[j]);
        assert_true(ld_shape_equal(&a->shape, &b->shape));
        assert_true(a->tol.atol == b->tol.atol);
        assert_true(same_double(a->rate_of_change, b->rate_of_change));
        assert_true(same_double(a->scaled_ulp, b->scaled_ulp));
        assert_true(same_double(a->isolated_scaled_ulp, b->isolated_scaled_ulp));
        assert_int_equal(a->origin, b->origin);
        assert_int_equal(a->culprit, b->culprit);
        assert_int_equal(a->counters.present, b->counters.present);
        assert_same_metrics(&a->metrics, &b->metrics);
        assert_int_equal(a->has_isolated, b->has_isolated);
        if (a->has_isolated)
            assert_same_metrics(&a->isolated, &b->isolated);
    }
    ld_report_free(r);
    ld_report_free(NULL);
}

/* Edits the written report with `edit`, reads it back and expects an
 * LD_ERR_INPUT naming the file and `expect`. */
static void expect_read_error(fixture *f, void (*edit)(json_t *root), const char *expect)
{
    ld_error err;
    json_t *root = write_and_load(f);
    edit(root);
    assert_int_equal(json_dump_file(root, f->path, 0), 0);
    json_decref(root);
    ld_report *r = NULL;
    assert_int_equal(ld_report_read_json(f->path, &r, &err), LD_ERR_INPUT);
    assert_null(r);
    if (!strstr(err.message, f->path) || !strstr(err.message, expect))
        fail_msg("message '%s' lacks '%s'", err.message, expect);
    assert_null(strchr(err.message, '\n'));
}

static void wrong_name(json_t *root) { json_object_set_new(root, "schema", json_string("x")); }
static void newer(json_t *root) { json_object_set_new(root, "schema_version", json_integer(2)); }
static void no_max(json_t *root) { json_object_del(at(root, "records.1.metrics.abs"), "max"); }
static void bad_nan(json_t *root)
{
    json_object_set_new(at(root, "records.1.metrics.rel"), "p99", json_string("nan"));
}
static void bad_origin(json_t *root)
{
    json_object_set_new(at(root, "summary.origins.0"), "record", json_integer(4));
}
static void forward_input(json_t *root)
{
    json_object_set_new(at(root, "records.1.inputs.0"), "record", json_integer(3));
}
static void bad_precision(json_t *root)
{
    json_object_set_new(at(root, "records.0"), "precision", json_string("fp8"));
}
static void wrong_count(json_t *root)
{
    json_object_set_new(at(root, "summary"), "compared", json_integer(5));
}

static void bad_timing(json_t *root)
{
    json_t *t = json_object();
    json_object_set_new(t, "total_seconds", json_string("soon"));
    json_object_set_new(at(root, "context"), "timing", t);
}
static void bad_minor(json_t *root) { json_object_set_new(root, "schema_minor", json_integer(-1)); }

static void test_read_errors(void **state)
{
    expect_read_error(*state, bad_timing,
                      "context.timing.total_seconds: expected a number or \"NaN\"");
    expect_read_error(*state, bad_minor, "schema_minor: -1 is out of range");
    fixture *f = *state;
    expect_read_error(f, wrong_name, "schema: expected \"layerdiff-report\"");
    expect_read_error(f, newer, "schema_version: 2: written by a newer layerdiff");
    expect_read_error(f, no_max, "records[1].metrics.abs.max: missing");
    expect_read_error(f, bad_nan, "records[1].metrics.rel.p99: expected a number");
    expect_read_error(f, bad_origin, "summary.origins[0].record: 4 is out of range");
    expect_read_error(f, forward_input, "records[1].inputs[0].record");
    expect_read_error(f, bad_precision, "records[0].precision: unknown value");
    expect_read_error(f, wrong_count, "summary.compared");

    ld_error err;
    ld_report *r = NULL;
    FILE *bad = fopen(f->path, "w");
    fputs("{\"schema\": \"layerdiff-report\",\n  oops", bad);
    fclose(bad);
    assert_int_equal(ld_report_read_json(f->path, &r, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "line 2"));
    bad = fopen(f->path, "w");
    fputs("[1, 2]", bad);
    fclose(bad);
    assert_int_equal(ld_report_read_json(f->path, &r, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "not a layerdiff report"));
    unlink(f->path);
    assert_int_equal(ld_report_read_json(f->path, &r, &err), LD_ERR_IO);
}

/* "-Infinity" and friends decode back to the doubles. */
static void minus_inf_rate(json_t *root)
{
    json_object_set_new(at(root, "records.1"), "rate_of_change", json_string("-Infinity"));
}

static void test_read_special_strings(void **state)
{
    fixture *f = *state;
    ld_error err;
    json_t *root = write_and_load(f);
    minus_inf_rate(root);
    assert_int_equal(json_dump_file(root, f->path, 0), 0);
    json_decref(root);
    ld_report *r = NULL;
    assert_int_equal(ld_report_read_json(f->path, &r, &err), LD_OK);
    assert_true(isinf(r->records[1].rate_of_change) && r->records[1].rate_of_change < 0);
    assert_true(isnan(r->records[0].metrics.abs.quantile));
    assert_true(isinf(r->records[2].metrics.abs.max));
    ld_report_free(r);
}

/* --- terminal summary ------------------------------------------------------------------ */

static char *summary_text(fixture *f, bool color, bool verbose)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    ld_summary_options o = {.color = color, .verbose = verbose, .top = 3};
    ld_report_print_summary(f->s, &context, &o, out);
    fclose(out);
    return text;
}

/* Schema 1.1: the command's times, written, read back and used by JUnit;
 * a 1.0 file (no schema_minor, no timing) reads as not timed. */
static void test_timing(void **state)
{
    fixture *f = *state;
    ld_error err;
    ld_report_context timed = context;
    timed.timing = (ld_report_timing){.present = true, .total_seconds = 2.5, .ref_seconds = 1,
                                      .test_seconds = 1.25, .compare_seconds = 0.8};
    assert_int_equal(ld_report_write_json(f->s, &timed, f->path, &err), LD_OK);
    json_error_t jerr;
    json_t *root = json_load_file(f->path, 0, &jerr);
    assert_non_null(root);
    assert_int_equal(json_integer_value(at(root, "schema_version")), 1);
    assert_int_equal(json_integer_value(at(root, "schema_minor")), LD_REPORT_SCHEMA_MINOR);
    assert_true(json_real_value(at(root, "context.timing.total_seconds")) == 2.5);
    assert_true(json_real_value(at(root, "context.timing.test_seconds")) == 1.25);
    ld_report *r = NULL;
    assert_int_equal(ld_report_read_json(f->path, &r, &err), LD_OK);
    assert_int_equal(r->schema_minor, 1);
    assert_true(r->context.timing.present);
    assert_true(r->context.timing.total_seconds == 2.5 && r->context.timing.ref_seconds == 1 &&
                r->context.timing.test_seconds == 1.25 &&
                r->context.timing.compare_seconds == 0.8);
    /* JUnit: the suite takes the command's time, each case its share of the
     * comparison by elements (4 records of 4 elements: 0.8 s / 16 each). */
    char *xml = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&xml, &len);
    ld_render_options ro = {.junit_layers = true};
    assert_int_equal(ld_report_render(r, LD_REPORT_JUNIT, &ro, m, &err), LD_OK);
    fclose(m);
    assert_non_null(strstr(xml, "<testsuites name=\"layerdiff\" tests=\"5\" failures=\"2\" "
                                "errors=\"1\" time=\"2.500\">"));
    assert_non_null(strstr(xml, "errors=\"1\" time=\"2.500\" timestamp="));
    assert_non_null(strstr(xml, "classname=\"layerdiff.m.layers\" time=\"0.200000\""));
    assert_null(strstr(xml, "time=\"0\">\n      <failure"));
    free(xml);
    ld_report_free(r);
    /* the same file as 1.0 wrote it */
    json_object_del(root, "schema_minor");
    json_object_del(at(root, "context"), "timing");
    assert_int_equal(json_dump_file(root, f->path, 0), 0);
    json_decref(root);
    assert_int_equal(ld_report_read_json(f->path, &r, &err), LD_OK);
    assert_int_equal(r->schema_minor, 0);
    assert_false(r->context.timing.present);
    xml = NULL;
    m = open_memstream(&xml, &len);
    assert_int_equal(ld_report_render(r, LD_REPORT_JUNIT, &ro, m, &err), LD_OK);
    fclose(m);
    assert_non_null(strstr(xml, "errors=\"1\" time=\"0.000\">"));
    free(xml);
    ld_report_free(r);
}

static void test_summary(void **state)
{
    fixture *f = *state;
    char *text = summary_text(f, false, true);
    assert_non_null(strstr(text, "FAIL  2 of 4 tensors beyond tolerance"));
    assert_non_null(strstr(text, "First divergent layer"));
    assert_non_null(strstr(text, "tensor  bad?name")); /* control byte shown as '?' */
    assert_non_null(strstr(text, "max abs inf at [0, 1]"));
    assert_non_null(strstr(text, "Origin layers (1"));
    assert_non_null(strstr(text, "Culprits (1"));
    assert_non_null(strstr(text, "3 overflows"));
    assert_non_null(strstr(text, "atol overrides: 'a*' 0.5"));
    assert_non_null(strstr(text, "Every tensor"));
    assert_null(strchr(text, '\033'));
    assert_null(strchr(text, '\x01'));
    for (char *line = text; *line;) {
        size_t len = strcspn(line, "\n");
        if (len > 100)
            fail_msg("line longer than 100 columns: %.*s", (int)len, line);
        line += len + (line[len] == '\n');
    }
    free(text);
    text = summary_text(f, true, false);
    assert_non_null(strstr(text, "\033[31mFAIL"));
    assert_null(strstr(text, "Every tensor"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_json_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_atomic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_special_strings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_summary, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
