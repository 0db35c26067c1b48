/* layerdiff — JUnit XML for CI (ld_report_render with LD_REPORT_JUNIT, report.h).
 *
 * The shape CI systems read (Jenkins, GitLab, GitHub test reporters):
 *   <testsuites name tests failures errors time>
 *     <testsuite name tests failures errors time timestamp hostname id package>
 *       <properties><property name value/>...</properties>
 *       <testcase name classname time>[<failure message type>details</failure>]</testcase>
 *       <system-out>summary</system-out><system-err/>
 * One test case per compared graph output (per tensor with junit_layers, or
 * when no record is marked as a graph output); with junit_layers, tensors
 * found in one run only are test cases with an <error>. A failure's message
 * carries the key metrics in one line, its text all of them. Everything is
 * XML-escaped, control bytes and invalid UTF-8 included (rd_xml_text).
 *
 * Times come from the report's timing (schema 2; 0 when the report has
 * none): the suite's is the whole command's, a test case's is its share of
 * the comparison time in proportion to its element count (comparing is
 * linear in the elements; the report does not time tensors one by one). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report/render.h"

typedef struct suite {
    FILE *f;
    const ld_report *r;
    bool layers;      /* a test case per record */
    char classname[160];
    double seconds_per_element; /* comparison time / elements compared, 0 when not timed */
} suite;

static bool in_suite(const suite *s, int i)
{
    return s->layers || s->r->records[i].is_graph_output;
}

static void attr(FILE *f, const char *name, const char *value)
{
    fprintf(f, " %s=\"", name);
    rd_xml_text(f, value ? value : "", true);
    fputc('"', f);
}

static void property(FILE *f, const char *name, const char *value)
{
    if (!value)
        return;
    fputs("      <property", f);
    attr(f, "name", name);
    attr(f, "value", value);
    fputs("/>\n", f);
}

static void properties(const suite *s)
{
    const ld_report_context *c = &s->r->context;
    const ld_tolerance_spec *t = &s->r->options.tol;
    char a[32], b[32], seed[32];
    FILE *f = s->f;
    fputs("    <properties>\n", f);
    property(f, "verdict", s->r->summary.pass ? "pass" : "fail");
    property(f, "model", c->model_path);
    property(f, "model_sha256", c->model_sha256);
    property(f, "command_line", c->command_line);
    property(f, "reference_backend", c->ref_backend);
    property(f, "reference_run", c->ref_run);
    property(f, "reference_source", c->ref_source);
    property(f, "test_backend", c->test_backend);
    property(f, "test_run", c->test_run);
    property(f, "test_source", c->test_source);
    property(f, "atol", t->atol_set ? rd_num(t->atol, a, sizeof a) : "default per precision");
    property(f, "rtol", t->rtol_set ? rd_num(t->rtol, b, sizeof b) : "default per precision");
    property(f, "tol_mode", ld_report_tol_mode_name(t->mode));
    property(f, "check_error_stat", ld_report_check_stat_name(t->check));
    if (c->input_seed >= 0) {
        snprintf(seed, sizeof seed, "%lld", (long long)c->input_seed);
        property(f, "input_seed", seed);
    }
    if (s->r->summary.first_divergent >= 0)
        property(f, "first_divergent", s->r->records[s->r->summary.first_divergent].name);
    property(f, "layerdiff_version", s->r->tool_version);
    fputs("    </properties>\n", f);
}

static void failure_message(FILE *f, const ld_compare_record *r)
{
    const ld_tensor_metrics *m = &r->metrics;
    char a[32], b[32], c[32], d[32], e[32], g[32], h[32], k[32], l[32], at[200];
    fprintf(f, "%s of %s elements out of tolerance; max abs %s%s (atol %s), max rel %s "
            "(rtol %s), %s ulps at the tensor's scale, cosine %s, SNR %s dB",
            rd_count(m->n_fail, a, sizeof a), rd_count(m->n, b, sizeof b),
            rd_num(m->abs.max, c, sizeof c), rd_coords(m->abs.max_index, &r->shape, at, sizeof at),
            rd_num(r->tol.atol, d, sizeof d), rd_num(m->rel.max, e, sizeof e),
            rd_num(r->tol.rtol, g, sizeof g), rd_num(r->scaled_ulp, h, sizeof h),
            rd_num(m->cosine, k, sizeof k), rd_num(m->snr_db, l, sizeof l));
}

/* The full metrics of a failing tensor: the failure's text. */
static void failure_details(FILE *f, const suite *s, int i)
{
    const ld_compare_record *r = &s->r->records[i];
    const ld_tensor_metrics *m = &r->metrics;
    char v[9][32];
    fputs("tensor: ", f);
    rd_xml_text(f, r->name, false);
    fputs("\nnode: ", f);
    rd_xml_text(f, r->node, false);
    fputs("\nop: ", f);
    rd_xml_text(f, r->op_type, false);
    fprintf(f, "\nprecision: %s; record #%d of %d\n", rd_precision_label(r), i + 1,
            s->r->n_records);
    const struct { const char *name; const ld_error_stats *e; } stats[] = {
        {"abs error", &m->abs}, {"rel error", &m->rel}, {"per-element ulp error", &m->ulp}};
    for (int k = 0; k < 3; k++) {
        const ld_error_stats *e = stats[k].e;
        fprintf(f, "%s: max %s, mean %s, median %s, p90 %s, p95 %s, p99 %s\n", stats[k].name,
                rd_num(e->max, v[0], 32), rd_num(e->mean, v[1], 32), rd_num(e->median, v[2], 32),
                rd_num(e->p90, v[3], 32), rd_num(e->p95, v[4], 32), rd_num(e->p99, v[5], 32));
    }
    fprintf(f, "ulps at the tensor's scale %s; cosine %s, SNR %s dB, normalized L2 error %s\n",
            rd_num(r->scaled_ulp, v[3], 32), rd_num(m->cosine, v[0], 32),
            rd_num(m->snr_db, v[1], 32), rd_num(m->l2_rel, v[2], 32));
    fprintf(f, "test NaN %s, +inf %s, -inf %s; non-finite where the reference is finite %s; "
            "would overflow %s; underflowed to zero %s\n", rd_count(m->test.nan, v[0], 32),
            rd_count(m->test.pos_inf, v[1], 32), rd_count(m->test.neg_inf, v[2], 32),
            rd_count(m->nonfinite_test_only, v[3], 32), rd_count(m->would_overflow, v[4], 32),
            rd_count(m->underflow_zero, v[5], 32));
    fprintf(f, "tolerance: atol %s, rtol %s, %s, %s\n", rd_num(r->tol.atol, v[0], 32),
            rd_num(r->tol.rtol, v[1], 32), ld_report_tol_mode_name(r->tol.mode),
            ld_report_check_stat_name(r->tol.check));
    if (r->has_isolated)
        fprintf(f, "isolated (layer alone on reference inputs): max abs %s, %s ulps at the "
                "tensor's scale\n", rd_num(r->isolated.abs.max, v[0], 32),
                rd_num(r->isolated_scaled_ulp, v[1], 32));
    if (i == s->r->summary.first_divergent)
        fputs("first divergent layer\n", f);
    if (r->origin)
        fprintf(f, "origin layer (rate of change R %s)\n", rd_num(r->rate_of_change, v[0], 32));
    if (r->culprit)
        fputs("culprit\n", f);
}

static void testcase(const suite *s, int i)
{
    const ld_compare_record *r = &s->r->records[i];
    FILE *f = s->f;
    fputs("    <testcase", f);
    attr(f, "name", r->name);
    fprintf(f, " classname=\"%s.%s\" time=\"%.6f\"", s->classname,
            r->is_graph_output ? "outputs" : "layers",
            (double)r->metrics.n * s->seconds_per_element);
    if (r->metrics.pass) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n      <failure type=\"mismatch\" message=\"", f);
    /* The message is built into a buffer so it can be escaped as an attribute. */
    char *msg = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&msg, &len);
    if (m) {
        failure_message(m, r);
        fclose(m);
        rd_xml_text(f, msg, true);
        free(msg);
    }
    fputs("\">", f);
    failure_details(f, s, i);
    fputs("</failure>\n    </testcase>\n", f);
}

static void missing_case(const suite *s, const char *name, const char *where)
{
    FILE *f = s->f;
    fputs("    <testcase", f);
    attr(f, "name", name);
    fprintf(f, " classname=\"%s.missing\" time=\"0\">\n      <error type=\"missing\" "
            "message=\"found in the %s run only: not compared\"/>\n    </testcase>\n",
            s->classname, where);
}

static void system_out(const suite *s, int tests, int failures)
{
    const ld_compare_summary *sum = &s->r->summary;
    FILE *f = s->f;
    fprintf(f, "    <system-out>layerdiff %s: %d of %d compared tensors fail; %d of %d test "
            "cases fail.", sum->pass ? "PASS" : "FAIL", sum->n_failed, sum->n_compared,
            failures, tests);
    if (sum->first_divergent >= 0) {
        fputs(" First divergent layer: ", f);
        rd_xml_text(f, s->r->records[sum->first_divergent].name, false);
        fputs(".", f);
    }
    fprintf(f, " Engine counters: %lld overflows, %lld NaNs created, %lld underflows.",
            (long long)sum->overflows, (long long)sum->nans_created, (long long)sum->underflows);
    fputs("</system-out>\n    <system-err/>\n", f);
}

static void make_classname(suite *s)
{
    const char *base = rd_basename(s->r->context.model_path);
    char stem[120];
    snprintf(stem, sizeof stem, "%s", *base ? base : "model");
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem)
        *dot = '\0';
    for (char *c = stem; *c; c++)
        if (*c == '.' || *c == '"' || *c == '&' || *c == '<' || *c == '>' || *c == '\'' ||
            (unsigned char)*c < 0x20)
            *c = '_';
    snprintf(s->classname, sizeof s->classname, "layerdiff.%s", stem);
}

static double per_element(const ld_report *r)
{
    const ld_report_timing *t = &r->context.timing;
    double elements = 0;
    for (int i = 0; i < r->n_records; i++)
        elements += (double)r->records[i].metrics.n;
    bool timed = t->present && isfinite(t->compare_seconds) && t->compare_seconds > 0;
    return timed && elements > 0 ? t->compare_seconds / elements : 0;
}

/* The whole command's time, 0 when the report has none. */
static double suite_seconds(const ld_report *r)
{
    const ld_report_timing *t = &r->context.timing;
    return t->present && isfinite(t->total_seconds) && t->total_seconds > 0 ? t->total_seconds
                                                                            : 0;
}

static void timestamp(char *buf, size_t size)
{
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        snprintf(buf, size, "1970-01-01T00:00:00");
}

ld_status rd_render_junit(const ld_report *rep, const ld_render_options *opts, FILE *f,
                          ld_error *err)
{
    suite s = {.f = f, .r = rep, .layers = opts && opts->junit_layers,
               .seconds_per_element = per_element(rep)};
    bool any_output = false;
    for (int i = 0; i < rep->n_records && !any_output; i++)
        any_output = rep->records[i].is_graph_output;
    s.layers = s.layers || !any_output;
    make_classname(&s);
    int tests = 0, failures = 0, errors = 0;
    for (int i = 0; i < rep->n_records; i++)
        if (in_suite(&s, i)) {
            tests++;
            failures += !rep->records[i].metrics.pass;
        }
    if (s.layers) {
        errors = rep->context.n_missing_in_test + rep->context.n_missing_in_ref;
        tests += errors;
    }
    char host[256] = "localhost", when[32];
    if (gethostname(host, sizeof host) != 0 || !host[0])
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    timestamp(when, sizeof when);
    double seconds = suite_seconds(rep);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"layerdiff\" "
            "tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.3f\">\n  <testsuite",
            tests, failures, errors, seconds);
    attr(f, "name", s.classname);
    fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"%d\" time=\"%.3f\" timestamp=\"%s\"",
            tests, failures, errors, seconds, when);
    attr(f, "hostname", host);
    fputs(" id=\"0\" package=\"layerdiff\">\n", f);
    properties(&s);
    for (int i = 0; i < rep->n_records; i++)
        if (in_suite(&s, i))
            testcase(&s, i);
    for (int i = 0; s.layers && i < rep->context.n_missing_in_test; i++)
        missing_case(&s, rep->context.missing_in_test[i], "reference");
    for (int i = 0; s.layers && i < rep->context.n_missing_in_ref; i++)
        missing_case(&s, rep->context.missing_in_ref[i], "test");
    system_out(&s, tests, failures);
    fputs("  </testsuite>\n</testsuites>\n", f);
    return rd_stream_status(f, "JUnit report", err);
}
