/* layerdiff — the HTML report (ld_report_render with LD_REPORT_HTML, report.h).
 *
 * One self-contained page, in the order people read it: the verdict and how
 * the runs were made; the graph outputs; where the divergence starts (first
 * divergent layer, origin layers, culprits, overflow counts); the per-layer
 * error charts along the topological order; the error distribution of the
 * worst layers; then every tensor in a table that sorts and filters.
 * Every string that came from the model or the command line goes through
 * rd_xml_text: a tensor name cannot inject markup. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/sha256.h"
#include "report/html.h"
#include "report/render.h"
#include "report/svg.h"

#define DEFAULT_TOP 10
#define LIST_MAX 10 /* origins, culprits and overflowing tensors listed in the summary */

typedef struct page {
    FILE *f;
    const ld_report *r;
    int top;
} page;

/* --- page frame ---------------------------------------------------------------------------- */

static void base64(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = digits[v >> 18 & 63];
        out[o++] = digits[v >> 12 & 63];
        out[o++] = i + 1 < n ? digits[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? digits[v & 63] : '=';
    }
    out[o] = '\0';
}

/* The script's CSP hash, base64 of its SHA-256; false (nothing written)
 * only when libcrypto cannot compute it. */
static bool script_hash(char out[64])
{
    unsigned char raw[32];
    if (ld_sha256_raw(rd_html_js, strlen(rd_html_js), raw, NULL) != LD_OK)
        return false;
    base64(raw, 32, out);
    return true;
}

void rd_html_begin(FILE *f, const char *title, bool with_script)
{
    char hash[64];
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n", f);
    fputs("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; img-src data:; ", f);
    if (with_script && script_hash(hash)) {
        fprintf(f, "script-src 'sha256-%s'", hash);
    } else { /* without the hash the page stays readable, its table static */
        fputs("script-src 'none'", f);
    }
    fputs("\">\n<meta name=\"generator\" content=\"layerdiff\">\n<title>", f);
    rd_xml_text(f, title, false);
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n", rd_html_css);
}

void rd_html_end(FILE *f, bool with_script)
{
    if (with_script)
        fprintf(f, "<script>%s</script>\n", rd_html_js);
    fputs("</body>\n</html>\n", f);
}

/* --- small pieces ------------------------------------------------------------------------------ */

static void text(const page *p, const char *s)
{
    rd_xml_text(p->f, s, false);
}

/* A value or an em dash for NULL/empty. */
static void text_or_dash(const page *p, const char *s)
{
    if (s && *s)
        text(p, s);
    else
        fputs("<span class=\"muted\">\xE2\x80\x94</span>", p->f);
}

static void num_cell(const page *p, double v)
{
    char a[32], b[40];
    fprintf(p->f, "<td class=\"n\" data-v=\"%s\">%s</td>", rd_num_exact(v, b, sizeof b),
            rd_num(v, a, sizeof a));
}

static void count_cell(const page *p, int64_t v)
{
    char a[32];
    fprintf(p->f, "<td class=\"n\" data-v=\"%lld\">%s</td>", (long long)v,
            rd_count(v, a, sizeof a));
}

/* "12 / 4,096": failing elements of all, sorted by the failing count. */
static void failing_cell(const page *p, const ld_tensor_metrics *m)
{
    char a[32], b[32];
    fprintf(p->f, "<td class=\"n\" data-v=\"%lld\">%s / %s</td>", (long long)m->n_fail,
            rd_count(m->n_fail, a, sizeof a), rd_count(m->n, b, sizeof b));
}

/* "#12 name" linking to the table row. */
static void record_link(const page *p, int i)
{
    fprintf(p->f, "<a href=\"#r%d\">#%d</a> <span class=\"name mono\">", i + 1, i + 1);
    text(p, p->r->records[i].name);
    fputs("</span>", p->f);
}

static void tags(const page *p, int i)
{
    const ld_compare_record *r = &p->r->records[i];
    if (i == p->r->summary.first_divergent)
        fputs("<span class=\"tag first\" title=\"first divergent layer\">F</span>", p->f);
    if (r->origin)
        fputs("<span class=\"tag origin\" title=\"origin layer\">O</span>", p->f);
    if (r->culprit)
        fputs("<span class=\"tag culprit\" title=\"culprit\">C</span>", p->f);
    if (rd_record_overflowed(r))
        fputs("<span class=\"tag ovf\" title=\"overflow or NaN\">OVF</span>", p->f);
}

static void result_cell(const page *p, int i)
{
    bool pass = p->r->records[i].metrics.pass;
    fprintf(p->f, "<td data-v=\"%d\"><span class=\"%s\">%s</span>", pass ? 1 : 0,
            pass ? "res-pass" : "res-fail", pass ? "pass" : "FAIL");
    tags(p, i);
    fputs("</td>", p->f);
}

/* --- head: verdict and configuration --------------------------------------------------------- */

static void side(const page *p, const char *label, const char *backend, const char *run,
                 const char *config, const char *source)
{
    fprintf(p->f, "<tr><th>%s</th><td>", label);
    text_or_dash(p, backend);
    if (run && *run) {
        fputs(" <span class=\"muted\">run</span> <span class=\"mono\">", p->f);
        text(p, run);
        fputs("</span>", p->f);
    }
    if (config && *config) {
        fputs(" <span class=\"muted\">config</span> <span class=\"mono\">", p->f);
        text(p, config);
        fputs("</span>", p->f);
    }
    if (source && *source) {
        fputs(" <span class=\"muted\">from</span> <span class=\"mono name\">", p->f);
        text(p, source);
        fputs("</span>", p->f);
    }
    fputs("</td></tr>\n", p->f);
}

static void precisions_row(const page *p)
{
    int counts[4] = {0};
    for (int i = 0; i < p->r->n_records; i++) {
        const ld_compare_record *r = &p->r->records[i];
        if (r->topo_index >= 0 && (int)r->precision >= 0 && (int)r->precision < 4)
            counts[r->precision]++;
    }
    fputs("<tr><th>Test precisions</th><td>", p->f);
    bool any = false;
    for (int k = 0; k < 4; k++)
        if (counts[k]) {
            fprintf(p->f, "%s%s: %d tensor%s", any ? ", " : "", ld_precision_name((ld_precision)k),
                    counts[k], counts[k] == 1 ? "" : "s");
            any = true;
        }
    if (!any)
        fputs("<span class=\"muted\">\xE2\x80\x94</span>", p->f);
    fputs("</td></tr>\n", p->f);
}

static void overrides(const page *p, const char *what, int n, const ld_tolerance_override *o)
{
    char a[32];
    for (int i = 0; i < n; i++) {
        fprintf(p->f, "; %s <span class=\"mono\">", what);
        text(p, o[i].pattern);
        fprintf(p->f, "</span>: %s", rd_num(o[i].value, a, sizeof a));
    }
}

static void tolerance_row(const page *p)
{
    const ld_tolerance_spec *t = &p->r->options.tol;
    char a[32], b[32], c[32], d[32];
    fputs("<tr><th>Tolerances</th><td>", p->f);
    if (t->atol_set)
        fprintf(p->f, "atol %s", rd_num(t->atol, a, sizeof a));
    else
        fputs("atol default", p->f);
    if (t->rtol_set)
        fprintf(p->f, ", rtol %s", rd_num(t->rtol, a, sizeof a));
    else
        fputs(", rtol default", p->f);
    if (!t->atol_set || !t->rtol_set)
        fprintf(p->f, " <span class=\"muted\">(defaults: fp32 %s, tf32 %s, fp16 %s, bf16 %s)"
                "</span>", rd_num(ld_tolerance_default(LD_PRECISION_FP32), a, sizeof a),
                rd_num(ld_tolerance_default(LD_PRECISION_TF32), b, sizeof b),
                rd_num(ld_tolerance_default(LD_PRECISION_FP16), c, sizeof c),
                rd_num(ld_tolerance_default(LD_PRECISION_BF16), d, sizeof d));
    fprintf(p->f, "; mode %s; check %s", ld_report_tol_mode_name(t->mode),
            ld_report_check_stat_name(t->check));
    if (t->check == LD_CHECK_QUANTILE)
        fprintf(p->f, " %s", rd_num(t->quantile, a, sizeof a));
    if (t->nan_is_error)
        fputs("; NaN is an error", p->f);
    overrides(p, "atol", t->n_atol, t->atol_overrides);
    overrides(p, "rtol", t->n_rtol, t->rtol_overrides);
    fprintf(p->f, "; culprit above %s ulp</td></tr>\n",
            rd_num(p->r->options.culprit_ulp, a, sizeof a));
}

static void config_table(const page *p)
{
    const ld_report_context *c = &p->r->context;
    fputs("<table class=\"kv\">\n<tr><th>Model</th><td><span class=\"mono name\">", p->f);
    text_or_dash(p, c->model_path);
    fputs("</span>", p->f);
    if (c->model_sha256) {
        fputs(" <span class=\"muted mono\">sha256 ", p->f);
        text(p, c->model_sha256);
        fputs("</span>", p->f);
    }
    fputs("</td></tr>\n", p->f);
    side(p, "Reference", c->ref_backend, c->ref_run, c->ref_config, c->ref_source);
    side(p, "Test", c->test_backend, c->test_run, c->test_config, c->test_source);
    precisions_row(p);
    tolerance_row(p);
    if (c->input_seed >= 0)
        fprintf(p->f, "<tr><th>Input seed</th><td>%lld</td></tr>\n", (long long)c->input_seed);
    else
        fputs("<tr><th>Inputs</th><td>loaded from files (no seed)</td></tr>\n", p->f);
    fputs("<tr><th>Command</th><td class=\"mono name\">", p->f);
    text_or_dash(p, c->command_line ? c->command_line : c->command);
    fputs("</td></tr>\n</table>\n", p->f);
}

static void header(const page *p)
{
    const ld_compare_summary *s = &p->r->summary;
    char a[32], b[32];
    fprintf(p->f, "<h1><span class=\"verdict %s\">%s</span> <span class=\"name\">",
            s->pass ? "pass" : "fail", s->pass ? "PASS" : "FAIL");
    const char *model = rd_basename(p->r->context.model_path);
    text(p, *model ? model : "layerdiff report");
    fputs("</span></h1>\n", p->f);
    fprintf(p->f, "<p>%s of %s compared tensors fail.", rd_count(s->n_failed, a, sizeof a),
            rd_count(s->n_compared, b, sizeof b));
    if (s->first_divergent >= 0) {
        fputs(" First divergent layer: ", p->f);
        record_link(p, s->first_divergent);
        fputs(".", p->f);
    }
    fputs("</p>\n", p->f);
    config_table(p);
}

/* --- graph outputs and divergence ------------------------------------------------------------ */

static void metrics_cells(const page *p, const ld_compare_record *r)
{
    const ld_tensor_metrics *m = &r->metrics;
    num_cell(p, m->abs.max);
    num_cell(p, m->abs.mean);
    num_cell(p, m->rel.max);
    num_cell(p, r->scaled_ulp);
    num_cell(p, m->cosine);
    num_cell(p, m->snr_db);
}

static void outputs_section(const page *p, int *rows)
{
    int n = rd_graph_outputs(p->r, rows);
    fputs("<h2 id=\"outputs\">Graph outputs</h2>\n", p->f);
    if (n == 0) {
        fputs("<p class=\"muted\">No graph output was compared.</p>\n", p->f);
        return;
    }
    fputs("<div class=\"scroll\"><table>\n<thead><tr><th>#</th><th>output</th><th>result</th>"
          "<th class=\"n\">max abs</th><th class=\"n\">mean abs</th><th class=\"n\">max rel</th>"
          "<th class=\"n\">ulp</th><th class=\"n\">cosine</th><th class=\"n\">SNR dB</th>"
          "<th class=\"n\">failing</th><th class=\"n\">atol</th></tr></thead>\n<tbody>\n",
          p->f);
    for (int k = 0; k < n; k++) {
        const ld_compare_record *r = &p->r->records[rows[k]];
        fprintf(p->f, "<tr%s><td><a href=\"#r%d\">%d</a></td><td class=\"name mono\">",
                r->metrics.pass ? "" : " class=\"fail\"", rows[k] + 1, rows[k] + 1);
        text(p, r->name);
        fputs("</td>", p->f);
        result_cell(p, rows[k]);
        metrics_cells(p, r);
        count_cell(p, r->metrics.n_fail);
        num_cell(p, r->tol.atol);
        fputs("</tr>\n", p->f);
    }
    fputs("</tbody></table></div>\n", p->f);
}

typedef double (*getter)(const ld_compare_record *r);
static double get_rate(const ld_compare_record *r) { return r->rate_of_change; }
static double get_mean_abs(const ld_compare_record *r) { return r->metrics.abs.mean; }
static double get_max_abs(const ld_compare_record *r) { return r->metrics.abs.max; }
static double get_ulp(const ld_compare_record *r) { return r->scaled_ulp; }
static double get_iso_ulp(const ld_compare_record *r)
{
    return r->has_isolated ? r->isolated_scaled_ulp : NAN;
}
static double get_iso_abs(const ld_compare_record *r)
{
    return r->has_isolated ? r->isolated.abs.mean : NAN;
}

typedef struct column {
    const char *title;
    getter get;
} column;

static void ranked_table(const page *p, const int *rows, int n, const column *cols, int n_cols)
{
    fputs("<div class=\"scroll\"><table>\n<thead><tr><th>#</th><th>tensor</th><th>op</th>"
          "<th>prec</th>", p->f);
    for (int c = 0; c < n_cols; c++)
        fprintf(p->f, "<th class=\"n\">%s</th>", cols[c].title);
    fputs("<th>result</th></tr></thead>\n<tbody>\n", p->f);
    for (int k = 0; k < n; k++) {
        const ld_compare_record *r = &p->r->records[rows[k]];
        fprintf(p->f, "<tr><td><a href=\"#r%d\">%d</a></td><td class=\"name mono\">",
                rows[k] + 1, rows[k] + 1);
        text(p, r->name);
        fputs("</td><td>", p->f);
        text(p, r->op_type);
        fprintf(p->f, "</td><td>%s</td>", rd_precision_label(r));
        for (int c = 0; c < n_cols; c++)
            num_cell(p, cols[c].get(r));
        result_cell(p, rows[k]);
        fputs("</tr>\n", p->f);
    }
    fputs("</tbody></table></div>\n", p->f);
}

static void first_divergent(const page *p)
{
    const ld_compare_summary *s = &p->r->summary;
    char a[32], b[32], c[32], d[32], e[32], g[32];
    fputs("<h3>First divergent layer</h3>\n", p->f);
    if (s->first_divergent < 0) {
        fputs("<p>None: every compared tensor is within tolerance.</p>\n", p->f);
        return;
    }
    const ld_compare_record *r = &p->r->records[s->first_divergent];
    fputs("<p>", p->f);
    record_link(p, s->first_divergent);
    fputs(" \xE2\x80\x94 op <b>", p->f);
    text_or_dash(p, r->op_type);
    fputs("</b>, node <span class=\"mono name\">", p->f);
    text_or_dash(p, r->node);
    fprintf(p->f, "</span>, %s: max abs error %s (atol %s), max rel %s, %s ulps at the "
            "tensor's scale; %s of %s elements fail.</p>\n", rd_precision_label(r),
            rd_num(r->metrics.abs.max, a, sizeof a), rd_num(r->tol.atol, b, sizeof b),
            rd_num(r->metrics.rel.max, c, sizeof c), rd_num(r->scaled_ulp, d, sizeof d), rd_count(r->metrics.n_fail, e, sizeof e),
            rd_count(r->metrics.n, g, sizeof g));
}

static void overflow_summary(const page *p, int *rows)
{
    const ld_compare_summary *s = &p->r->summary;
    char a[32], b[32], c[32], d[32], e[32];
    int64_t nonfinite = 0;
    int n = 0;
    for (int i = 0; i < p->r->n_records; i++) {
        const ld_compare_record *r = &p->r->records[i];
        nonfinite += r->metrics.nonfinite_test_only;
        if (rd_record_overflowed(r))
            rows[n++] = i;
    }
    fputs("<h3>Overflow and NaN</h3>\n<div class=\"cards\">", p->f);
    fprintf(p->f, "<div class=\"card\"><b>%s</b>overflows (engine)</div>"
            "<div class=\"card\"><b>%s</b>NaNs created (engine)</div>"
            "<div class=\"card\"><b>%s</b>underflows (engine)</div>"
            "<div class=\"card\"><b>%s</b>reference values beyond the layer's range</div>"
            "<div class=\"card\"><b>%s</b>non-finite test values, finite reference</div></div>\n",
            rd_count(s->overflows, a, sizeof a), rd_count(s->nans_created, b, sizeof b),
            rd_count(s->underflows, c, sizeof c), rd_count(s->would_overflow, d, sizeof d),
            rd_count(nonfinite, e, sizeof e));
    if (n == 0)
        return;
    fprintf(p->f, "<p>%d tensor%s overflowed or produced NaN/inf%s:</p>\n", n, n == 1 ? "" : "s",
            n > LIST_MAX ? " (the first ten)" : "");
    static const column cols[] = {{"max abs", get_max_abs}, {"ulp", get_ulp}};
    ranked_table(p, rows, n < LIST_MAX ? n : LIST_MAX, cols, 2);
}

static void divergence_section(const page *p, int *rows)
{
    const ld_compare_summary *s = &p->r->summary;
    fputs("<h2 id=\"divergence\">Where it diverges</h2>\n", p->f);
    first_divergent(p);
    if (s->n_origins > 0) {
        static const column cols[] = {{"R", get_rate}, {"mean abs", get_mean_abs},
                                      {"max abs", get_max_abs}, {"ulp", get_ulp}};
        fprintf(p->f, "<h3>Origin layers</h3>\n<p class=\"muted\">%d layer%s fail while their "
                "inputs pass: errors born there, ranked by rate of change R.</p>\n",
                s->n_origins, s->n_origins == 1 ? "" : "s");
        ranked_table(p, s->origins, s->n_origins < LIST_MAX ? s->n_origins : LIST_MAX, cols, 4);
    }
    if (s->n_culprits > 0) {
        static const column cols[] = {{"isolated ulp", get_iso_ulp},
                                      {"isolated mean abs", get_iso_abs},
                                      {"ulp", get_ulp}};
        fprintf(p->f, "<h3>Culprits</h3>\n<p class=\"muted\">%d layer%s whose own (isolated) "
                "error is far above their precision's rounding, or that overflow.</p>\n",
                s->n_culprits, s->n_culprits == 1 ? "" : "s");
        ranked_table(p, s->culprits, s->n_culprits < LIST_MAX ? s->n_culprits : LIST_MAX, cols,
                     3);
    }
    overflow_summary(p, rows);
}

/* --- charts ------------------------------------------------------------------------------------ */

static void layer_tooltip(FILE *f, const void *ctx, int i)
{
    const ld_report *rep = ctx;
    const ld_compare_record *r = &rep->records[i];
    char a[32], b[32], c[32], d[32];
    fprintf(f, "#%d ", i + 1);
    rd_xml_text(f, r->name, false);
    fputs(" (", f);
    rd_xml_text(f, r->op_type && *r->op_type ? r->op_type : "input", false);
    fprintf(f, ", %s): max abs %s, atol %s, %s ulp", rd_precision_label(r),
            rd_num(r->metrics.abs.max, a, sizeof a), rd_num(r->tol.atol, b, sizeof b),
            rd_num(r->scaled_ulp, c, sizeof c));
    if (r->has_isolated)
        fprintf(f, ", isolated %s ulp", rd_num(r->isolated_scaled_ulp, d, sizeof d));
    fputs(r->metrics.pass ? "; pass" : "; FAIL", f);
    if (i == rep->summary.first_divergent)
        fputs(", first divergent", f);
    if (r->origin)
        fputs(", origin", f);
    if (r->culprit)
        fputs(", culprit", f);
    if (rd_record_overflowed(r))
        fputs(", overflow/NaN", f);
}

typedef struct chart_data {
    double *acc_abs, *iso_abs, *acc_ulp, *iso_ulp, *atol, *culprit_ulp;
    unsigned char *flags;
} chart_data;

static bool chart_data_fill(const ld_report *rep, chart_data *d)
{
    size_t n = (size_t)rep->n_records;
    double **arrays[] = {&d->acc_abs, &d->iso_abs, &d->acc_ulp, &d->iso_ulp, &d->atol,
                         &d->culprit_ulp};
    for (size_t k = 0; k < sizeof arrays / sizeof arrays[0]; k++)
        if (!(*arrays[k] = malloc(n * sizeof(double))))
            return false;
    if (!(d->flags = calloc(n, 1)))
        return false;
    for (size_t i = 0; i < n; i++) {
        const ld_compare_record *r = &rep->records[i];
        d->acc_abs[i] = r->metrics.abs.max;
        d->iso_abs[i] = r->has_isolated ? r->isolated.abs.max : NAN;
        d->acc_ulp[i] = r->scaled_ulp;
        d->iso_ulp[i] = r->has_isolated ? r->isolated_scaled_ulp : NAN;
        d->atol[i] = r->tol.atol;
        d->culprit_ulp[i] = rep->options.culprit_ulp > 0 ? rep->options.culprit_ulp : 8;
        d->flags[i] = (unsigned char)((r->metrics.pass ? 0 : SVG_FAIL) |
                                      (rd_record_overflowed(r) ? SVG_OVERFLOW : 0) |
                                      ((int)i == rep->summary.first_divergent ? SVG_FIRST : 0) |
                                      (r->origin ? SVG_ORIGIN : 0) |
                                      (r->culprit ? SVG_CULPRIT : 0));
    }
    return true;
}

static void chart_data_free(chart_data *d)
{
    free(d->acc_abs);
    free(d->iso_abs);
    free(d->acc_ulp);
    free(d->iso_ulp);
    free(d->atol);
    free(d->culprit_ulp);
    free(d->flags);
}

static void layer_charts(const page *p)
{
    const ld_report *rep = p->r;
    bool iso = rep->summary.has_isolated;
    fputs("<h2 id=\"charts\">Error along the network</h2>\n", p->f);
    chart_data d = {0};
    if (rep->n_records == 0 || !chart_data_fill(rep, &d)) {
        fputs("<p class=\"muted\">No tensors to chart.</p>\n", p->f);
        chart_data_free(&d);
        return;
    }
    fprintf(p->f, "<p class=\"muted\">Each tensor in topological order (hover for details, "
            "click to jump to its row). Accumulated: the test run against the reference.%s "
            "Log scale; exact zeros on the bottom row, inf/NaN errors on the top row.</p>\n",
            iso ? " Isolated: the test layer alone, fed the reference's inputs." : "");
    svg_line_chart abs = {
        .id = "chart-abs", .title = "Max abs error per tensor, in topological order",
        .y_label = "max |test - ref|", .x_label = "tensor # (topological order)",
        .n = rep->n_records, .n_series = iso ? 2 : 1,
        .series = {{"accumulated", "s-acc", d.acc_abs}, {"isolated", "s-iso", d.iso_abs}},
        .threshold = d.atol, .threshold_label = "atol (per tensor)", .flags = d.flags,
        .tooltip = layer_tooltip, .ctx = rep, .link_prefix = "#r"};
    fputs("<h3>Max abs error</h3>\n", p->f);
    svg_line_chart_write(p->f, &abs);
    bool any_ulp = false;
    for (int i = 0; i < rep->n_records && !any_ulp; i++)
        any_ulp = !isnan(d.acc_ulp[i]);
    if (any_ulp) {
        svg_line_chart ulp = abs;
        ulp.id = "chart-ulp";
        ulp.title = "Max error in ulps of each layer's precision at the tensor's scale";
        ulp.y_label = "ulps at the tensor's scale";
        ulp.series[0].y = d.acc_ulp;
        ulp.series[1].y = d.iso_ulp;
        ulp.threshold = iso ? d.culprit_ulp : NULL;
        ulp.threshold_label = "culprit threshold";
        fputs("<h3>Max error in ulps of the layer's precision, at the tensor's scale</h3>\n"
              "<p class=\"muted\">Max abs error over the ulp at the tensor's largest |ref|: "
              "plain rounding of the layer's precision gives about 1.</p>\n", p->f);
        svg_line_chart_write(p->f, &ulp);
    }
    chart_data_free(&d);
}

static void distribution_chart(const page *p, int *rows)
{
    int n = rd_worst(p->r, p->top, rows);
    fprintf(p->f, "<h2 id=\"distribution\">Error distribution of the %d worst layers</h2>\n"
            "<p class=\"muted\">Worst by accumulated error in ulps at the tensor's scale. "
            "Abs error quantiles over each tensor's elements.</p>\n", n > 0 ? n : 0);
    svg_box_row *box = n > 0 ? calloc((size_t)n, sizeof *box) : NULL;
    for (int k = 0; box && k < n; k++) {
        const ld_compare_record *r = &p->r->records[rows[k]];
        box[k] = (svg_box_row){r->name, &r->metrics.abs, r->tol.atol, !r->metrics.pass,
                               rows[k]};
    }
    svg_box_chart_write(p->f, "chart-dist", "Abs error distribution of the worst layers",
                        "|test - ref| (log scale)", box, box ? n : 0);
    free(box);
}

/* --- the layer table ------------------------------------------------------------------------ */

static void counters_cell(const page *p, const ld_compare_record *r)
{
    const ld_layer_counters *c = &r->counters;
    const ld_tensor_metrics *m = &r->metrics;
    int64_t total = m->would_overflow + m->nonfinite_test_only;
    if (c->present)
        total += c->overflows + c->nans_created + c->underflows + c->partial_overflows;
    total += r->clip_crossings > 0 ? r->clip_crossings : 0;
    fprintf(p->f, "<td data-v=\"%lld\">", (long long)total);
    struct { const char *label; int64_t v; } items[] = {
        {"ovf", c->present ? c->overflows : 0}, {"NaN", c->present ? c->nans_created : 0},
        {"unf", c->present ? c->underflows : 0},
        {"part.ovf", c->present ? c->partial_overflows : 0},
        {"\xE2\x86\x92inf", m->would_overflow}, {"non-finite", m->nonfinite_test_only},
        {"clip\xC3\x97", r->clip_crossings}};
    bool any = false;
    for (size_t k = 0; k < sizeof items / sizeof items[0]; k++)
        if (items[k].v > 0) {
            fprintf(p->f, "%s%s %lld", any ? " " : "", items[k].label, (long long)items[k].v);
            any = true;
        }
    fputs("</td>", p->f);
}

static void layer_row(const page *p, int i)
{
    const ld_compare_record *r = &p->r->records[i];
    bool flagged = i == p->r->summary.first_divergent || r->origin || r->culprit ||
                   rd_record_overflowed(r);
    fprintf(p->f, "<tr id=\"r%d\" class=\"%s%s%s\"><td class=\"n\" data-v=\"%d\">%d</td>"
            "<td class=\"name mono\">", i + 1, r->metrics.pass ? "pass" : "fail",
            flagged ? " flag" : "", rd_record_overflowed(r) ? " ovf" : "", i + 1, i + 1);
    text(p, r->name);
    fputs("</td><td class=\"name mono\">", p->f);
    text(p, r->node);
    fputs("</td><td>", p->f);
    text(p, r->op_type);
    fprintf(p->f, "</td><td>%s</td>", rd_precision_label(r));
    num_cell(p, r->metrics.abs.max);
    num_cell(p, r->metrics.abs.mean);
    num_cell(p, r->metrics.rel.max);
    num_cell(p, r->metrics.rel.mean);
    num_cell(p, r->scaled_ulp);
    num_cell(p, r->metrics.ulp.max);
    if (p->r->summary.has_isolated)
        num_cell(p, r->has_isolated ? r->isolated_scaled_ulp : NAN);
    num_cell(p, r->metrics.cosine);
    num_cell(p, r->metrics.snr_db);
    failing_cell(p, &r->metrics);
    counters_cell(p, r);
    result_cell(p, i);
    fputs("</tr>\n", p->f);
}

static void layer_table(const page *p)
{
    fprintf(p->f, "<h2 id=\"layers-h\">Every tensor</h2>\n"
            "<div class=\"controls noprint\"><input type=\"search\" id=\"filter\" "
            "placeholder=\"filter by tensor, node or op\" aria-label=\"filter\">"
            "<label><input type=\"checkbox\" id=\"only-fail\"> failing only</label>"
            "<label><input type=\"checkbox\" id=\"only-flag\"> flagged only (F first divergent, "
            "O origin, C culprit, OVF overflow/NaN)</label><span id=\"shown\" class=\"muted\">"
            "%d tensors</span></div>\n", p->r->n_records);
    fputs("<div class=\"scroll\"><table id=\"layers\">\n<thead><tr><th class=\"n\">#</th>"
          "<th>tensor</th><th>node</th><th>op</th><th>prec</th><th class=\"n\">max abs</th>"
          "<th class=\"n\">mean abs</th><th class=\"n\">max rel</th><th class=\"n\">mean rel</th>"
          "<th class=\"n\" title=\"max abs error in ulps at the tensor's scale\">ulp</th>"
          "<th class=\"n\" title=\"largest per-element error in ulps of the reference value\">"
          "elem ulp</th>", p->f);
    if (p->r->summary.has_isolated)
        fputs("<th class=\"n\" title=\"the layer alone, on the reference's inputs\">iso ulp"
              "</th>", p->f);
    fputs("<th class=\"n\">cosine</th><th class=\"n\">SNR dB</th>"
          "<th class=\"n\" title=\"elements out of tolerance / elements\">failing</th>"
          "<th>counters</th><th>result</th></tr></thead>\n<tbody>\n",
          p->f);
    for (int i = 0; i < p->r->n_records; i++)
        layer_row(p, i);
    fputs("</tbody></table></div>\n", p->f);
}

static void missing_section(const page *p)
{
    const ld_report_context *c = &p->r->context;
    const char *labels[2] = {"In the reference run only (not compared)",
                             "In the test run only (not compared)"};
    int counts[2] = {c->n_missing_in_test, c->n_missing_in_ref};
    const char *const *names[2] = {c->missing_in_test, c->missing_in_ref};
    for (int k = 0; k < 2; k++) {
        if (counts[k] <= 0)
            continue;
        fprintf(p->f, "<h3>%s: %d</h3>\n<p class=\"mono name\">", labels[k], counts[k]);
        for (int i = 0; i < counts[k]; i++) {
            if (i)
                fputs(", ", p->f);
            text(p, names[k][i]);
        }
        fputs("</p>\n", p->f);
    }
}

static ld_status render(const ld_report *r, const ld_render_options *opts, FILE *f,
                        ld_error *err)
{
    page p = {.f = f, .r = r, .top = opts && opts->top > 0 ? opts->top : DEFAULT_TOP};
    size_t n = (size_t)(r->n_records > p.top ? r->n_records : p.top);
    int *rows = malloc((n ? n : 1) * sizeof *rows);
    if (!rows)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory rendering the HTML report");
    char title[300];
    snprintf(title, sizeof title, "layerdiff %s: %s", r->summary.pass ? "PASS" : "FAIL",
             *rd_basename(r->context.model_path) ? rd_basename(r->context.model_path)
                                                 : "report");
    rd_html_begin(f, title, true);
    header(&p);
    outputs_section(&p, rows);
    divergence_section(&p, rows);
    layer_charts(&p);
    distribution_chart(&p, rows);
    layer_table(&p);
    missing_section(&p);
    fputs("<footer>Made by layerdiff ", f);
    text(&p, r->tool_version);
    fprintf(f, " (report schema %d.%d). Self-contained: no network access.</footer>\n",
            r->schema_version, r->schema_minor);
    rd_html_end(f, true);
    free(rows);
    return rd_stream_status(f, "HTML report", err);
}

ld_status rd_render_html(const ld_report *r, const ld_render_options *opts, FILE *f,
                         ld_error *err)
{
    return render(r, opts, f, err);
}
