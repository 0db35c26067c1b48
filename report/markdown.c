/* layerdiff — the Markdown summary for pull-request comments
 * (ld_report_render with LD_REPORT_MARKDOWN, report.h).
 *
 * Short on purpose: the verdict, the first divergent and origin layers, the
 * graph outputs, the worst layers and the overflow counts; the HTML report
 * has the rest. Every name from the model or the command line is a code span
 * (rd_md_code), inside which GitHub interprets nothing: no HTML, links,
 * @mentions or #references, and '|' is escaped so tables hold. */
#include <math.h>
#include <stdlib.h>

#include "report/render.h"

#define DEFAULT_TOP 10
#define LIST_MAX 5 /* origins and culprits named in the summary lines */

static void record_ref(FILE *f, const ld_report *r, int i)
{
    fprintf(f, "#%d ", i + 1);
    rd_md_code(f, r->records[i].name);
}

static void first_divergent(FILE *f, const ld_report *rep)
{
    const ld_compare_summary *s = &rep->summary;
    char a[32], b[32], c[32], d[32], e[32];
    if (s->first_divergent < 0) {
        fputs("**First divergent layer:** none.\n", f);
        return;
    }
    const ld_compare_record *r = &rep->records[s->first_divergent];
    fputs("**First divergent layer:** ", f);
    record_ref(f, rep, s->first_divergent);
    fputs(" (", f);
    rd_md_code(f, r->op_type);
    fprintf(f, ", %s): max abs %s (atol %s), %s ulps at the tensor's scale, %s of %s elements "
            "fail.\n", rd_precision_label(r), rd_num(r->metrics.abs.max, a, sizeof a),
            rd_num(r->tol.atol, b, sizeof b), rd_num(r->scaled_ulp, c, sizeof c),
            rd_count(r->metrics.n_fail, d, sizeof d), rd_count(r->metrics.n, e, sizeof e));
}

static void origins(FILE *f, const ld_report *rep)
{
    const ld_compare_summary *s = &rep->summary;
    char a[32];
    if (s->n_origins > 0) {
        fprintf(f, "\n**Origin layers** (%d, by rate of change R): ", s->n_origins);
        for (int k = 0; k < s->n_origins && k < LIST_MAX; k++) {
            const ld_compare_record *r = &rep->records[s->origins[k]];
            fputs(k ? ", " : "", f);
            record_ref(f, rep, s->origins[k]);
            fputs(" (", f);
            rd_md_code(f, r->op_type);
            fprintf(f, ", R %s)", rd_num(r->rate_of_change, a, sizeof a));
        }
        fputs(s->n_origins > LIST_MAX ? ", \xE2\x80\xA6\n" : "\n", f);
    }
    if (s->n_culprits > 0) {
        fprintf(f, "\n**Culprits** (%d, by the layer's own error in ulps): ", s->n_culprits);
        for (int k = 0; k < s->n_culprits && k < LIST_MAX; k++) {
            const ld_compare_record *r = &rep->records[s->culprits[k]];
            fputs(k ? ", " : "", f);
            record_ref(f, rep, s->culprits[k]);
            fprintf(f, " (%s ulp)", rd_num(r->has_isolated ? r->isolated_scaled_ulp : NAN, a,
                                           sizeof a));
        }
        fputs(s->n_culprits > LIST_MAX ? ", \xE2\x80\xA6\n" : "\n", f);
    }
}

static void result(FILE *f, const ld_report *rep, int i)
{
    const ld_compare_record *r = &rep->records[i];
    fputs(r->metrics.pass ? "pass" : "**FAIL**", f);
    if (i == rep->summary.first_divergent)
        fputs(" F", f);
    if (r->origin)
        fputs(" O", f);
    if (r->culprit)
        fputs(" C", f);
}

static void outputs_table(FILE *f, const ld_report *rep, int *rows)
{
    int n = rd_graph_outputs(rep, rows);
    if (n == 0)
        return;
    char a[32], b[32], c[32], d[32], e[32];
    fputs("\n### Graph outputs\n\n| output | result | max abs | max rel | ulp | cosine | "
          "SNR dB |\n|---|---|--:|--:|--:|--:|--:|\n", f);
    for (int k = 0; k < n; k++) {
        const ld_compare_record *r = &rep->records[rows[k]];
        const ld_tensor_metrics *m = &r->metrics;
        fputs("| ", f);
        rd_md_code(f, rep->records[rows[k]].name);
        fputs(" | ", f);
        result(f, rep, rows[k]);
        fprintf(f, " | %s | %s | %s | %s | %s |\n", rd_num(m->abs.max, a, sizeof a),
                rd_num(m->rel.max, b, sizeof b), rd_num(r->scaled_ulp, c, sizeof c),
                rd_num(m->cosine, d, sizeof d), rd_num(m->snr_db, e, sizeof e));
    }
}

static void worst_table(FILE *f, const ld_report *rep, int top, int *rows)
{
    int n = rd_worst(rep, top, rows);
    if (n <= 0)
        return;
    bool iso = rep->summary.has_isolated;
    char a[32], b[32], c[32], d[32];
    fprintf(f, "\n### %d worst layers (by error in ulps at the tensor's scale)\n\n| # | tensor "
            "| op | prec | max abs | max rel | ulp |%s result |\n|--:|---|---|---|--:|--:|--:|%s---|\n", n,
            iso ? " isolated ulp |" : "", iso ? "--:|" : "");
    for (int k = 0; k < n; k++) {
        const ld_compare_record *r = &rep->records[rows[k]];
        fprintf(f, "| %d | ", rows[k] + 1);
        rd_md_code(f, r->name);
        fputs(" | ", f);
        rd_md_code(f, r->op_type);
        fprintf(f, " | %s | %s | %s | %s |", rd_precision_label(r),
                rd_num(r->metrics.abs.max, a, sizeof a), rd_num(r->metrics.rel.max, b, sizeof b),
                rd_num(r->scaled_ulp, c, sizeof c));
        if (iso)
            fprintf(f, " %s |", rd_num(r->has_isolated ? r->isolated_scaled_ulp : NAN, d,
                                       sizeof d));
        fputs(" ", f);
        result(f, rep, rows[k]);
        fputs(" |\n", f);
    }
}

static void overflow_counts(FILE *f, const ld_report *rep)
{
    const ld_compare_summary *s = &rep->summary;
    char a[32], b[32], c[32], d[32], e[32];
    int64_t nonfinite = 0;
    int tensors = 0;
    for (int i = 0; i < rep->n_records; i++) {
        nonfinite += rep->records[i].metrics.nonfinite_test_only;
        tensors += rd_record_overflowed(&rep->records[i]);
    }
    fprintf(f, "\n### Overflow and NaN\n\n"
            "- engine counters: %s overflows, %s NaNs created, %s underflows\n"
            "- %s reference values beyond the fp16/bf16 range of their layer\n"
            "- %s non-finite test values where the reference is finite\n"
            "- %d tensor%s overflowed or produced NaN/inf\n",
            rd_count(s->overflows, a, sizeof a), rd_count(s->nans_created, b, sizeof b),
            rd_count(s->underflows, c, sizeof c), rd_count(s->would_overflow, d, sizeof d),
            rd_count(nonfinite, e, sizeof e), tensors, tensors == 1 ? "" : "s");
}

static void head(FILE *f, const ld_report *rep)
{
    const ld_report_context *c = &rep->context;
    const ld_compare_summary *s = &rep->summary;
    char a[32], b[32];
    fprintf(f, "## layerdiff: %s \xE2\x80\x94 ", s->pass ? "PASS" : "**FAIL**");
    rd_md_code(f, *rd_basename(c->model_path) ? rd_basename(c->model_path) : "(model unknown)");
    fprintf(f, "\n\n**%s of %s compared tensors fail.** Reference ",
            rd_count(s->n_failed, a, sizeof a), rd_count(s->n_compared, b, sizeof b));
    rd_md_code(f, c->ref_backend ? c->ref_backend : c->ref_source);
    fputs(" vs test ", f);
    rd_md_code(f, c->test_backend ? c->test_backend : c->test_source);
    const ld_tolerance_spec *t = &rep->options.tol;
    fputs("; atol ", f);
    fputs(t->atol_set ? rd_num(t->atol, a, sizeof a) : "default", f);
    fputs(", rtol ", f);
    fputs(t->rtol_set ? rd_num(t->rtol, b, sizeof b) : "default", f);
    fprintf(f, " (%s, %s)", ld_report_tol_mode_name(t->mode),
            ld_report_check_stat_name(t->check));
    if (c->input_seed >= 0)
        fprintf(f, "; seed %lld", (long long)c->input_seed);
    fputs(".\n\n", f);
}

ld_status rd_render_markdown(const ld_report *rep, const ld_render_options *opts, FILE *f,
                             ld_error *err)
{
    int top = opts && opts->top > 0 ? opts->top : DEFAULT_TOP;
    size_t n = (size_t)(rep->n_records > top ? rep->n_records : top);
    int *rows = malloc((n ? n : 1) * sizeof *rows);
    if (!rows)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory rendering the Markdown report");
    head(f, rep);
    first_divergent(f, rep);
    origins(f, rep);
    outputs_table(f, rep, rows);
    worst_table(f, rep, top, rows);
    overflow_counts(f, rep);
    fputs("\n<sub>layerdiff ", f);
    rd_md_code(f, rep->tool_version);
    fputs(" \xC2\xB7 F first divergent, O origin, C culprit</sub>\n", f);
    free(rows);
    return rd_stream_status(f, "Markdown report", err);
}
