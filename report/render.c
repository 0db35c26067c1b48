/* layerdiff — choosing a renderer (ld_report_render, report.h). */
#include "report/render.h"

typedef struct job {
    const ld_report *r;
    ld_report_format format;
    const ld_render_options *opts;
} job;

static const char *format_name(ld_report_format format)
{
    switch (format) {
    case LD_REPORT_HTML: return "HTML report";
    case LD_REPORT_MARKDOWN: return "Markdown report";
    case LD_REPORT_JUNIT: return "JUnit report";
    }
    return "report";
}

ld_status ld_report_render(const ld_report *r, ld_report_format format,
                           const ld_render_options *opts, FILE *out, ld_error *err)
{
    switch (format) {
    case LD_REPORT_HTML: return rd_render_html(r, opts, out, err);
    case LD_REPORT_MARKDOWN: return rd_render_markdown(r, opts, out, err);
    case LD_REPORT_JUNIT: return rd_render_junit(r, opts, out, err);
    }
    return ld_error_set(err, LD_ERR_INTERNAL, "unknown report format %d", (int)format);
}

static ld_status render_job(const void *ctx, FILE *out, ld_error *err)
{
    const job *j = ctx;
    return ld_report_render(j->r, j->format, j->opts, out, err);
}

ld_status ld_report_render_file(const ld_report *r, ld_report_format format,
                                const ld_render_options *opts, const char *path,
                                ld_error *err)
{
    job j = {r, format, opts};
    return ld_atomic_write_file(path, format_name(format), render_job, &j, err);
}
