/* layerdiff fuzz target: the JSON report reader (ld_report_read_json, what
 * `layerdiff report` and the nightly trend read), then everything that
 * consumes what it accepted: the HTML, Markdown and JUnit renderers and the
 * trend over two copies of the report. A report comes from anywhere (a CI
 * artifact, another machine), so names and numbers in it are hostile input
 * for the renderers too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/report.h"
#include "tests/fuzz/support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_report(const ld_report *r)
{
    if (r->schema_version < 1 || r->schema_version > LD_REPORT_SCHEMA_VERSION)
        fuzz_fail("accepted a schema version outside 1 .. LD_REPORT_SCHEMA_VERSION", NULL);
    if (r->n_records < 0 || (r->n_records > 0 && !r->records))
        fuzz_fail("record count and array disagree", NULL);
}

static void render_all(const ld_report *r)
{
    static const ld_report_format formats[] = {LD_REPORT_HTML, LD_REPORT_MARKDOWN,
                                               LD_REPORT_JUNIT};
    ld_render_options opts = {.junit_layers = true, .top = 3};
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        ld_error err;
        ld_error_clear(&err);
        ld_status st = ld_report_render(r, formats[i], &opts, fuzz_null_output(), &err);
        fuzz_check_status(st, &err, "ld_report_render");
        if (st != LD_OK && st != LD_ERR_IO)
            fuzz_fail("rendering an accepted report failed other than by I/O", &err);
    }
}

static void trend_twice(const char *path)
{
    const char *paths[2] = {path, path};
    ld_trend *t = NULL;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_trend_load(paths, 2, 0, &t, &err);
    fuzz_check_status(st, &err, "ld_trend_load");
    if (st != LD_OK)
        fuzz_fail("the trend refused a report the reader accepted", &err);
    if (t->n_regressions != 0)
        fuzz_fail("a report compared with itself shows a regression", NULL);
    st = ld_trend_render(t, LD_REPORT_HTML, fuzz_null_output(), &err);
    fuzz_check_status(st, &err, "ld_trend_render");
    ld_trend_print_summary(t, fuzz_null_output());
    ld_trend_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("r.json", data, size);
    ld_report *r = NULL;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_report_read_json(path, &r, &err);
    fuzz_check_status(st, &err, "ld_report_read_json");
    if (st == LD_OK && !r)
        fuzz_fail("success without a report", NULL);
    if (st != LD_OK && r)
        fuzz_fail("failure that still returned a report", &err);
    if (st == LD_OK) {
        check_report(r);
        render_all(r);
        trend_twice(path);
    }
    ld_report_free(r);
    return 0;
}
