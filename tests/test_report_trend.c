/* Unit tests for the nightly trend (report/trend.c, trend_render.c): JSON
 * reports written by the real writer with chosen timestamps
 * (SOURCE_DATE_EPOCH), where the regression is known by construction —
 * ordering by timestamp whatever the command-line order, a metric growing
 * past the factor, pass to fail, a regression since fixed (history, not
 * counted), model mismatch and missing timestamps (warnings), bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layerdiff/report.h"
#include "tests/support/report_testing.h"

#define DAY 86400LL
#define T0 1767225600LL /* 2026-01-01T00:00:00Z */
#define SHA "5ha"

typedef struct fixture {
    char dir[64];
    char paths[6][128];
    int n;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/ld-trend-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < f->n; i++)
        unlink(f->paths[i]);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* A report whose graph output "y" is `error` off (fp16 atol 0.00488), after
 * a passing layer "a"; dated T0 + day days. */
static const char *night(fixture *f, int day, double error, const char *sha)
{
    const rt_layer layers[] = {{"a", "Conv", 1e-4, false}, {"y", "Add", error, true}};
    assert_true(f->n < 6);
    char *path = f->paths[f->n++];
    char dir[64];
    memcpy(dir, f->dir, sizeof dir);
    snprintf(path, sizeof f->paths[0], "%s/night%d.json", dir, day);
    rt_write_json(path, layers, 2, sha, day >= 0 ? T0 + day * DAY : -1);
    return path;
}

static ld_trend *load(const char *const *paths, int n, double factor)
{
    ld_trend *t = NULL;
    ld_error err;
    if (ld_trend_load(paths, n, factor, &t, &err) != LD_OK)
        fail_msg("%s", err.message);
    return t;
}

static char *render(const ld_trend *t, ld_report_format format)
{
    char *buf = NULL;
    size_t len = 0;
    ld_error err;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    assert_int_equal(ld_trend_render(t, format, out, &err), LD_OK);
    fclose(out);
    return buf;
}

static void test_orders_by_timestamp(void **state)
{
    fixture *f = *state;
    const char *p2 = night(f, 2, 1e-3, SHA), *p0 = night(f, 0, 1e-3, SHA);
    const char *p1 = night(f, 1, 1e-3, SHA);
    const char *paths[] = {p2, p0, p1};
    ld_trend *t = load(paths, 3, 0);
    assert_int_equal(t->n_runs, 3);
    assert_string_equal(t->runs[0].path, p0);
    assert_string_equal(t->runs[1].path, p1);
    assert_string_equal(t->runs[2].path, p2);
    assert_string_equal(t->runs[0].created, "2026-01-01T00:00:00Z");
    assert_int_equal(t->n_series, 1);
    assert_string_equal(t->series[0], "y");
    assert_int_equal(t->cells[2 * t->n_series], 2); /* x, a, y: y is record 2 */
    assert_int_equal(t->n_findings, 0);
    assert_int_equal(t->n_regressions, 0);
    assert_int_equal(t->n_warnings, 0);
    assert_true(t->regress_factor == 2.0);
    ld_trend_free(t);
}

/* 1e-3 -> 3e-3: still passing, but 3x worse. */
static void test_metric_growth(void **state)
{
    fixture *f = *state;
    const char *paths[] = {night(f, 0, 1e-3, SHA), night(f, 1, 3e-3, SHA)};
    ld_trend *t = load(paths, 2, 0);
    assert_int_equal(t->n_regressions, 1);
    assert_int_equal(t->n_findings, 1);
    assert_int_equal(t->findings[0].run, 1);
    assert_int_equal(t->findings[0].series, 0);
    assert_true(t->findings[0].latest);
    assert_non_null(strstr(t->findings[0].message, "y: "));
    assert_non_null(strstr(t->findings[0].message, "max abs 0.001 -> 0.003"));
    assert_null(strstr(t->findings[0].message, "now fails"));
    ld_trend_free(t);
    t = load(paths, 2, 5); /* within a factor of 5 */
    assert_int_equal(t->n_regressions, 0);
    assert_int_equal(t->n_findings, 0);
    ld_trend_free(t);
}

static void test_pass_to_fail(void **state)
{
    fixture *f = *state;
    const char *paths[] = {night(f, 0, 4e-3, SHA), night(f, 1, 6e-3, SHA)};
    ld_trend *t = load(paths, 2, 10); /* 1.5x: only the verdict changed */
    assert_int_equal(t->n_regressions, 1);
    assert_non_null(strstr(t->findings[0].message, "passed, now fails"));
    char *md = render(t, LD_REPORT_MARKDOWN);
    assert_non_null(strstr(md, "## layerdiff trend: **REGRESSION**"));
    assert_non_null(strstr(md, "### Regressions in the newest report"));
    assert_non_null(strstr(md, "| `y` | 0.004 | **0.006** |"));
    free(md);
    char *html = render(t, LD_REPORT_HTML);
    assert_non_null(strstr(html, "class=\"verdict fail\">REGRESSION<"));
    assert_int_equal(rt_count(html, "<svg "), 1);
    assert_non_null(strstr(html, "class=\"pt-reg\""));
    assert_non_null(strstr(html, "2026-01-02T00:00:00Z"));
    assert_null(strstr(html, "<script"));
    free(html);
    ld_trend_free(t);
}

static void test_new_nan(void **state)
{
    fixture *f = *state;
    const char *paths[] = {night(f, 0, 1e-3, SHA), night(f, 1, INFINITY, SHA)};
    ld_trend *t = load(paths, 2, 0);
    assert_int_equal(t->n_regressions, 1);
    assert_non_null(strstr(t->findings[0].message, "NaN/inf where the reference is finite"));
    ld_trend_free(t);
}

/* A regression two nights ago, fixed last night: history, exit 0. */
static void test_fixed_regression(void **state)
{
    fixture *f = *state;
    const char *paths[] = {night(f, 0, 1e-3, SHA), night(f, 1, 0.5, SHA),
                           night(f, 2, 1e-3, SHA)};
    ld_trend *t = load(paths, 3, 0);
    assert_int_equal(t->n_findings, 1);
    assert_int_equal(t->findings[0].run, 1);
    assert_false(t->findings[0].latest);
    assert_int_equal(t->n_regressions, 0);
    char *md = render(t, LD_REPORT_MARKDOWN);
    assert_non_null(strstr(md, "no regression"));
    assert_non_null(strstr(md, "### Earlier regressions"));
    free(md);
    ld_trend_free(t);
}

/* Improvements and tiny absolute changes are no regressions. */
static void test_noise_floor(void **state)
{
    fixture *f = *state;
    const char *paths[] = {night(f, 0, 0, SHA), night(f, 1, 1e-6, SHA),
                           night(f, 2, 0, SHA)};
    ld_trend *t = load(paths, 3, 0);
    assert_int_equal(t->n_findings, 0);
    ld_trend_free(t);
}

/* Removes the "created" line from a report the writer indented. */
static void drop_created(const char *path)
{
    FILE *in = fopen(path, "r");
    assert_non_null(in);
    char *text = calloc(1, 1 << 16);
    size_t len = fread(text, 1, (1 << 16) - 1, in);
    fclose(in);
    char *line = strstr(text, "  \"created\"");
    assert_non_null(line);
    char *end = strchr(line, '\n');
    memmove(line, end + 1, len - (size_t)(end + 1 - text) + 1);
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fputs(text, out);
    fclose(out);
    free(text);
}

static void test_warnings(void **state)
{
    fixture *f = *state;
    const char *first = night(f, 1, 1e-3, "other"), *second = night(f, 0, 1e-3, SHA);
    const char *third = night(f, 2, 1e-3, SHA);
    drop_created(third);
    const char *paths[] = {first, second, third};
    ld_trend *t = load(paths, 3, 0);
    /* no timestamp in the third: command-line order is kept */
    assert_string_equal(t->runs[0].path, paths[0]);
    assert_string_equal(t->runs[2].path, paths[2]);
    assert_true(t->n_warnings >= 2);
    bool timestamp = false, model = false;
    for (int i = 0; i < t->n_warnings; i++) {
        timestamp |= strstr(t->warnings[i], "timestamp") != NULL;
        model |= strstr(t->warnings[i], "differs from the newest report") != NULL;
    }
    assert_true(timestamp);
    assert_true(model);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    ld_trend_print_summary(t, out);
    fclose(out);
    assert_non_null(strstr(buf, "warning: "));
    assert_non_null(strstr(buf, "no regression in the newest report"));
    free(buf);
    ld_trend_free(t);
}

static void test_bad_input(void **state)
{
    fixture *f = *state;
    ld_trend *t = NULL;
    ld_error err;
    char *bad = f->paths[f->n++];
    char dir[64];
    memcpy(dir, f->dir, sizeof dir);
    snprintf(bad, sizeof f->paths[0], "%s/bad.json", dir);
    FILE *out = fopen(bad, "w");
    assert_non_null(out);
    fputs("{\"schema\": \"something-else\"}", out);
    fclose(out);
    const char *paths[] = {night(f, 0, 1e-3, SHA), bad};
    assert_int_equal(ld_trend_load(paths, 2, 0, &t, &err), LD_ERR_INPUT);
    assert_null(t);
    assert_non_null(strstr(err.message, "bad.json"));
    const char *missing[] = {"/nonexistent/r.json"};
    assert_int_equal(ld_trend_load(missing, 1, 0, &t, &err), LD_ERR_IO);
    assert_int_equal(ld_trend_load(paths, 0, 0, &t, &err), LD_ERR_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_orders_by_timestamp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metric_growth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pass_to_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_nan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fixed_regression, setup, teardown),
        cmocka_unit_test_setup_teardown(test_noise_floor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_warnings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
