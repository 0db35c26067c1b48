/* layerdiff — rendering the nightly trend (ld_trend_render, report.h): an
 * HTML page with a chart per followed tensor over the runs, and a Markdown
 * summary. Names are escaped as in the single-report renderers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"
#include "report/render.h"
#include "report/svg.h"

#define MAX_CHARTS 50   /* tensors charted in the HTML page (graph outputs are few) */
#define MD_RUNS 8       /* newest runs shown in the Markdown table */
#define MD_SERIES 20    /* tensors in the Markdown table */

static const ld_compare_record *cell(const ld_trend *t, int run, int s)
{
    int i = t->cells[run * t->n_series + s];
    return i >= 0 ? &t->runs[run].report->records[i] : NULL;
}

static bool has_finding(const ld_trend *t, int run, int s)
{
    for (int i = 0; i < t->n_findings; i++)
        if (t->findings[i].run == run && t->findings[i].series == s)
            return true;
    return false;
}

/* The label of a run: its timestamp, else its file name. */
static const char *run_label(const ld_trend *t, int k)
{
    return t->runs[k].created ? t->runs[k].created : rd_basename(t->runs[k].path);
}

static const char *model_name(const ld_trend *t)
{
    const char *m = rd_basename(t->runs[t->n_runs - 1].report->context.model_path);
    return *m ? m : "(model unknown)";
}

/* --- HTML ----------------------------------------------------------------------------------- */

static void html_head(FILE *f, const ld_trend *t)
{
    fprintf(f, "<h1><span class=\"verdict %s\">%s</span> <span class=\"name\">",
            t->n_regressions ? "fail" : "pass", t->n_regressions ? "REGRESSION" : "NO REGRESSION");
    rd_xml_text(f, model_name(t), false);
    fprintf(f, "</span></h1>\n<p>%d report%s, oldest first; %d tensor%s followed; a metric "
            "counts as a regression when it grows more than %gx (max abs, mean abs, ulps at "
            "the tensor's scale), "
            "or a tensor that passed now fails.</p>\n", t->n_runs, t->n_runs == 1 ? "" : "s",
            t->n_series, t->n_series == 1 ? "" : "s", t->regress_factor);
    if (t->n_warnings) {
        fputs("<h2>Warnings</h2>\n<ul>\n", f);
        for (int i = 0; i < t->n_warnings; i++) {
            fputs("<li class=\"name\">", f);
            rd_xml_text(f, t->warnings[i], false);
            fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
    }
}

static void html_findings(FILE *f, const ld_trend *t)
{
    fputs("<h2 id=\"regressions\">Regressions</h2>\n", f);
    if (t->n_findings == 0) {
        fputs("<p>None between any two consecutive reports.</p>\n", f);
        return;
    }
    fputs("<div class=\"scroll\"><table>\n<thead><tr><th>report</th><th>when</th><th>what"
          "</th></tr></thead>\n<tbody>\n", f);
    for (int i = t->n_findings - 1; i >= 0; i--) {
        const ld_trend_finding *x = &t->findings[i];
        fprintf(f, "<tr%s><td class=\"name mono\">", x->latest ? " class=\"fail\"" : "");
        rd_xml_text(f, t->runs[x->run].path, false);
        fputs(x->latest ? "<span class=\"tag reg\">newest</span>" : "", f);
        fputs("</td><td>", f);
        rd_xml_text(f, run_label(t, x->run), false);
        fputs("</td><td class=\"name\">", f);
        rd_xml_text(f, x->message, false);
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

static void html_runs(FILE *f, const ld_trend *t)
{
    char a[32], b[32];
    fputs("<h2 id=\"runs\">Reports</h2>\n<div class=\"scroll\"><table>\n<thead><tr><th>#</th>"
          "<th>created</th><th>file</th><th>verdict</th><th class=\"n\">failing</th>"
          "<th>test backend</th><th>first divergent</th><th>layerdiff</th></tr></thead>\n"
          "<tbody>\n", f);
    for (int k = 0; k < t->n_runs; k++) {
        const ld_report *r = t->runs[k].report;
        fprintf(f, "<tr%s><td>%d</td><td>", r->summary.pass ? "" : " class=\"fail\"", k + 1);
        rd_xml_text(f, t->runs[k].created ? t->runs[k].created : "\xE2\x80\x94", false);
        fputs("</td><td class=\"name mono\">", f);
        rd_xml_text(f, t->runs[k].path, false);
        fprintf(f, "</td><td><span class=\"%s\">%s</span></td><td class=\"n\">%s / %s</td><td>",
                r->summary.pass ? "res-pass" : "res-fail", r->summary.pass ? "pass" : "FAIL",
                rd_count(r->summary.n_failed, a, sizeof a),
                rd_count(r->summary.n_compared, b, sizeof b));
        rd_xml_text(f, r->context.test_backend, false);
        fputs("</td><td class=\"name mono\">", f);
        if (r->summary.first_divergent >= 0)
            rd_xml_text(f, r->records[r->summary.first_divergent].name, false);
        fputs("</td><td>", f);
        rd_xml_text(f, r->tool_version, false);
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
}

typedef struct point_ctx {
    const ld_trend *t;
    int series;
} point_ctx;

static void point_tooltip(FILE *f, const void *ctx, int k)
{
    const point_ctx *p = ctx;
    const ld_compare_record *r = cell(p->t, k, p->series);
    char a[32], b[32], c[32];
    rd_xml_text(f, run_label(p->t, k), false);
    fputs(" ", f);
    rd_xml_text(f, p->t->runs[k].path, false);
    if (!r) {
        fputs(": not in this report", f);
        return;
    }
    fprintf(f, ": max abs %s, mean abs %s, %s ulps at scale, %s",
            rd_num(r->metrics.abs.max, a, sizeof a), rd_num(r->metrics.abs.mean, b, sizeof b),
            rd_num(r->scaled_ulp, c, sizeof c),
            r->metrics.pass ? "pass" : "FAIL");
    if (has_finding(p->t, k, p->series))
        fputs(", regression", f);
}

static void html_chart(FILE *f, const ld_trend *t, int s, double *abs, double *thr,
                       unsigned char *flags, const char **names)
{
    for (int k = 0; k < t->n_runs; k++) {
        const ld_compare_record *r = cell(t, k, s);
        abs[k] = r ? r->metrics.abs.max : NAN;
        thr[k] = r ? r->tol.atol : NAN;
        flags[k] = (unsigned char)((r && !r->metrics.pass ? SVG_FAIL : 0) |
                                   (r && rd_record_overflowed(r) ? SVG_OVERFLOW : 0) |
                                   (has_finding(t, k, s) ? SVG_REGRESSION : 0));
        names[k] = run_label(t, k);
    }
    char id[32];
    snprintf(id, sizeof id, "trend-%d", s);
    point_ctx ctx = {t, s};
    svg_line_chart c = {
        .id = id, .title = "Max abs error over the reports", .y_label = "max |test - ref|",
        .x_label = "report (oldest first)", .n = t->n_runs, .n_series = 1,
        .series = {{"max abs error", "s-acc", abs}}, .threshold = thr,
        .threshold_label = "atol", .flags = flags, .x_names = names, .tooltip = point_tooltip,
        .ctx = &ctx};
    fprintf(f, "<h3 class=\"name mono\" id=\"s%d\">", s + 1);
    rd_xml_text(f, t->series[s], false);
    fputs("</h3>\n", f);
    svg_line_chart_write(f, &c);
}

static void html_charts(FILE *f, const ld_trend *t)
{
    size_t n = (size_t)t->n_runs;
    double *abs = malloc(n * sizeof *abs), *thr = malloc(n * sizeof *thr);
    unsigned char *flags = malloc(n);
    const char **names = malloc(n * sizeof *names);
    fputs("<h2 id=\"charts\">Each tensor over the reports</h2>\n", f);
    int shown = t->n_series < MAX_CHARTS ? t->n_series : MAX_CHARTS;
    if (shown < t->n_series)
        fprintf(f, "<p class=\"muted\">The first %d of %d tensors.</p>\n", shown, t->n_series);
    for (int s = 0; abs && thr && flags && names && s < shown; s++)
        html_chart(f, t, s, abs, thr, flags, names);
    free(abs);
    free(thr);
    free(flags);
    free(names);
}

static ld_status render_html(const ld_trend *t, FILE *f, ld_error *err)
{
    char title[300];
    snprintf(title, sizeof title, "layerdiff trend %s: %s",
             t->n_regressions ? "REGRESSION" : "ok", model_name(t));
    rd_html_begin(f, title, false);
    html_head(f, t);
    html_findings(f, t);
    html_charts(f, t);
    html_runs(f, t);
    fputs("<footer>Made by layerdiff. Self-contained: no network access.</footer>\n", f);
    rd_html_end(f, false);
    return rd_stream_status(f, "HTML trend", err);
}

/* --- Markdown ---------------------------------------------------------------------------- */

static void md_findings(FILE *f, const ld_trend *t, bool latest)
{
    bool any = false;
    for (int i = 0; i < t->n_findings; i++) {
        const ld_trend_finding *x = &t->findings[i];
        if (x->latest != latest)
            continue;
        if (!any)
            fputs(latest ? "\n### Regressions in the newest report\n\n"
                         : "\n### Earlier regressions\n\n", f);
        any = true;
        /* message = "<tensor>: <what changed>"; the second part is ours (words and
         * numbers), the tensor name is the model's: a code span. */
        const char *series = t->series[x->series];
        const char *what = x->message + strlen(series) + 2;
        fputs("- ", f);
        rd_md_code(f, run_label(t, x->run));
        fputs(" ", f);
        rd_md_code(f, series);
        fprintf(f, ": %s\n", what);
    }
}

static void md_table(FILE *f, const ld_trend *t)
{
    int first = t->n_runs > MD_RUNS ? t->n_runs - MD_RUNS : 0;
    int shown = t->n_series < MD_SERIES ? t->n_series : MD_SERIES;
    if (shown == 0)
        return;
    fprintf(f, "\n### Max abs error over the %sreports\n\n| tensor |",
            first ? "newest " : "");
    for (int k = first; k < t->n_runs; k++) {
        fputc(' ', f);
        rd_md_code(f, run_label(t, k));
        fputs(" |", f);
    }
    fputs("\n|---|", f);
    for (int k = first; k < t->n_runs; k++)
        fputs("--:|", f);
    fputc('\n', f);
    char a[32];
    for (int s = 0; s < shown; s++) {
        fputs("| ", f);
        rd_md_code(f, t->series[s]);
        fputs(" |", f);
        for (int k = first; k < t->n_runs; k++) {
            const ld_compare_record *r = cell(t, k, s);
            if (!r)
                fputs(" \xE2\x80\x94 |", f);
            else
                fprintf(f, " %s%s%s |", r->metrics.pass ? "" : "**",
                        rd_num(r->metrics.abs.max, a, sizeof a), r->metrics.pass ? "" : "**");
        }
        fputc('\n', f);
    }
    if (shown < t->n_series)
        fprintf(f, "\n(%d more tensors in the HTML trend)\n", t->n_series - shown);
}

static ld_status render_markdown(const ld_trend *t, FILE *f, ld_error *err)
{
    fprintf(f, "## layerdiff trend: %s \xE2\x80\x94 ",
            t->n_regressions ? "**REGRESSION**" : "no regression");
    rd_md_code(f, model_name(t));
    fprintf(f, "\n\n%d report%s (oldest first), %d tensor%s followed, regress factor %g.\n",
            t->n_runs, t->n_runs == 1 ? "" : "s", t->n_series, t->n_series == 1 ? "" : "s",
            t->regress_factor);
    md_findings(f, t, true);
    md_findings(f, t, false);
    if (t->n_warnings) {
        fputs("\n### Warnings\n\n", f);
        for (int i = 0; i < t->n_warnings; i++) {
            fputs("- ", f);
            rd_md_code(f, t->warnings[i]);
            fputc('\n', f);
        }
    }
    md_table(f, t);
    return rd_stream_status(f, "Markdown trend", err);
}

ld_status ld_trend_render(const ld_trend *t, ld_report_format format, FILE *out,
                          ld_error *err)
{
    switch (format) {
    case LD_REPORT_HTML: return render_html(t, out, err);
    case LD_REPORT_MARKDOWN: return render_markdown(t, out, err);
    case LD_REPORT_JUNIT: break;
    }
    return ld_error_set(err, LD_ERR_USAGE, "the trend renders as HTML or Markdown only");
}

typedef struct job {
    const ld_trend *t;
    ld_report_format format;
} job;

static ld_status render_job(const void *ctx, FILE *out, ld_error *err)
{
    const job *j = ctx;
    return ld_trend_render(j->t, j->format, out, err);
}

ld_status ld_trend_render_file(const ld_trend *t, ld_report_format format, const char *path,
                               ld_error *err)
{
    job j = {t, format};
    return ld_atomic_write_file(path, format == LD_REPORT_HTML ? "HTML trend" : "Markdown trend",
                                render_job, &j, err);
}
