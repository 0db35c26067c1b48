/* layerdiff — the terminal summary of a finished comparison (report.h).
 *
 * For people, in at most 100 columns: the verdict with the tolerances that
 * gave it, the first divergent layer, the origin layers, the culprits, the
 * worst layers by accumulated and by isolated error, and the overflow/NaN
 * counts; --verbose adds one row per tensor. Names longer than their column
 * are shortened in the middle (the JSON report has them whole) and control
 * characters print as '?', so a hostile name cannot drive the terminal.
 * Nothing here computes numerics: it orders and prints the session's records. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/render.h"

#define WIDTH 100
#define DEFAULT_TOP 5
#define NUM_W 8   /* numeric cells: "%.3g", or "%.2g" when that is too wide */
#define OP_MAX 12

typedef struct printer {
    FILE *out;
    bool color;
    const ld_compare_session *s;
    const ld_compare_summary *sum;
    int top;
} printer;

static const char *style(const printer *p, const char *code)
{
    return p->color ? code : "";
}
#define BOLD(p) style(p, "\033[1m")
#define RED(p) style(p, "\033[31m")
#define GREEN(p) style(p, "\033[32m")
#define YELLOW(p) style(p, "\033[33m")
#define DIM(p) style(p, "\033[2m")
#define RESET(p) style(p, "\033[0m")

/* --- text -------------------------------------------------------------------------------- */

/* s shortened to at most w bytes by cutting out its middle ("..", never
 * inside a UTF-8 sequence). */
static char *shorten(const char *s, int w, char *buf, size_t size)
{
    if (!s)
        s = "";
    size_t len = strlen(s);
    if (w < 5)
        w = 5;
    if ((size_t)w >= size)
        w = (int)size - 1;
    if (len <= (size_t)w) {
        memcpy(buf, s, len + 1);
        return buf;
    }
    size_t head = (size_t)(w - 2) / 2, tail = (size_t)(w - 2) - head;
    while (head > 0 && ((unsigned char)s[head] & 0xC0) == 0x80)
        head--;
    size_t from = len - tail;
    while (from < len && ((unsigned char)s[from] & 0xC0) == 0x80)
        from++;
    memcpy(buf, s, head);
    memcpy(buf + head, "..", 2);
    memcpy(buf + head + 2, s + from, len - from + 1);
    return buf;
}

/* A name from a model or dump, fitted to w bytes, control bytes as '?'. */
static char *fit(const char *s, int w, char *buf, size_t size)
{
    shorten(s, w, buf, size);
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7F)
            *c = '?';
    return buf;
}

/* A name for a free-form line: cut to a line's width, cleaned, into buf. */
typedef char name_buf[WIDTH + 1];
static const char *clean(const char *s, name_buf buf)
{
    return fit(s, WIDTH, buf, sizeof(name_buf));
}

/* One line: printf, then cut to WIDTH bytes (in the middle, so the end
 * stays). Names in the arguments must come through clean(). */
static void line(const printer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(const printer *p, const char *fmt, ...)
{
    char text[1024], shown[WIDTH + 16];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(p->out, "%s\n", shorten(text, WIDTH + (p->color ? 9 : 0), shown, sizeof shown));
}

static char *num(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "-");
    else if (isinf(v))
        snprintf(buf, size, v > 0 ? "inf" : "-inf");
    else if (snprintf(buf, size, "%.3g", v) > NUM_W)
        snprintf(buf, size, "%.2g", v);
    return buf;
}

/* --- head -------------------------------------------------------------------------------- */

static void print_verdict(const printer *p)
{
    char a[32], b[32];
    const ld_compare_summary *sum = p->sum;
    if (sum->pass)
        line(p, "%sPASS%s  all %s tensors within tolerance", GREEN(p), RESET(p),
             rd_count(sum->n_compared, a, sizeof a));
    else
        line(p, "%sFAIL%s  %s of %s tensors beyond tolerance", RED(p), RESET(p),
             rd_count(sum->n_failed, a, sizeof a), rd_count(sum->n_compared, b, sizeof b));
}

static void print_side(const printer *p, const char *label, const char *source,
                       const char *run, const char *backend, const char *config)
{
    if (!source && !run && !backend)
        return;
    char text[1024], fitted[WIDTH + 1];
    name_buf b1, b2, b3;
    int o = snprintf(text, sizeof text, "  %-10s %s", label, source ? clean(source, b1) : "");
    if (run && o >= 0 && (size_t)o < sizeof text)
        o += snprintf(text + o, sizeof text - (size_t)o, "%srun '%s'", source ? ", " : "",
                      clean(run, b2));
    if (backend && o >= 0 && (size_t)o < sizeof text)
        o += snprintf(text + o, sizeof text - (size_t)o, " (backend %s", clean(backend, b3));
    if (backend && config && *config && o >= 0 && o + 4 < WIDTH) /* the config gets the rest */
        snprintf(text + o, sizeof text - (size_t)o, "; %s)",
                 fit(config, WIDTH - o - 3, fitted, sizeof fitted));
    else if (backend && o >= 0 && (size_t)o < sizeof text)
        snprintf(text + o, sizeof text - (size_t)o, ")");
    line(p, "%s", text);
}

static void print_overrides(const printer *p, const char *what, int n,
                            const ld_tolerance_override *list)
{
    char text[WIDTH * 2] = "", v[32];
    name_buf nb;
    size_t o = 0;
    for (int i = 0; i < n && o < sizeof text; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "%s'%s' %s", i ? ", " : "",
                              clean(list[i].pattern, nb), num(list[i].value, v, sizeof v));
    if (n)
        line(p, "             %s overrides: %s", what, text);
}

static void print_tolerance(const printer *p)
{
    const ld_compare_options *o = ld_compare_session_options(p->s);
    const ld_tolerance_spec *t = &o->tol;
    char a[32], r[32], q[48] = "", f16[32], b16[32], f32[32];
    if (t->check == LD_CHECK_QUANTILE)
        snprintf(q, sizeof q, " %g", t->quantile);
    line(p, "  %-10s %s rule, %s%s check%s; atol %s, rtol %s", "tolerance",
         ld_report_tol_mode_name(t->mode), ld_report_check_stat_name(t->check), q,
         t->nan_is_error ? ", any NaN fails" : "",
         t->atol_set ? num(t->atol, a, sizeof a) : "default",
         t->rtol_set ? num(t->rtol, r, sizeof r) : "default");
    if (!t->atol_set || !t->rtol_set)
        line(p, "             defaults by precision: fp32 %s, tf32/fp16 %s, bf16 %s",
             num(ld_tolerance_default(LD_PRECISION_FP32), f32, sizeof f32),
             num(ld_tolerance_default(LD_PRECISION_FP16), f16, sizeof f16),
             num(ld_tolerance_default(LD_PRECISION_BF16), b16, sizeof b16));
    print_overrides(p, "atol", t->n_atol, t->atol_overrides);
    print_overrides(p, "rtol", t->n_rtol, t->rtol_overrides);
}

static void print_head(const printer *p, const ld_report_context *ctx)
{
    print_verdict(p);
    if (ctx) {
        print_side(p, "reference", ctx->ref_source, ctx->ref_run, ctx->ref_backend,
                   ctx->ref_config);
        print_side(p, "test", ctx->test_source, ctx->test_run, ctx->test_backend,
                   ctx->test_config);
    }
    print_tolerance(p);
    if (p->sum->has_isolated)
        line(p, "  %-10s each test layer also ran on the reference's inputs", "isolated");
    if (ctx && (ctx->n_missing_in_test || ctx->n_missing_in_ref))
        line(p, "  %-10s not compared: %d tensors only in the reference run, %d only in the "
             "test run", "missing", ctx->n_missing_in_test, ctx->n_missing_in_ref);
}

static void print_first(const printer *p)
{
    int i = p->sum->first_divergent;
    if (i < 0)
        return;
    const ld_compare_record *r = ld_compare_session_record(p->s, i);
    const ld_tensor_metrics *m = &r->metrics;
    char a[32], b[32], c[32], d[32], e[32], at[128], n1[32], n2[32];
    name_buf nb1, nb2;
    fprintf(p->out, "\n%sFirst divergent layer%s\n", BOLD(p), RESET(p));
    line(p, "  tensor  %s%s%s", YELLOW(p), clean(r->name, nb1), RESET(p));
    if (r->topo_index >= 0)
        line(p, "  node    %s (%s, %s), topological index %lld", clean(r->node, nb1), clean(r->op_type, nb2),
             ld_precision_name(r->precision), (long long)r->topo_index);
    else
        line(p, "  node    (graph input)");
    line(p, "  error   max abs %s%s  max rel %s  mean abs %s", num(m->abs.max, a, sizeof a),
         rd_coords(m->abs.max_index, &r->shape, at, sizeof at), num(m->rel.max, b, sizeof b),
         num(m->abs.mean, d, sizeof d));
    if (r->is_float)
        line(p, "          %s ulps of %s at the tensor's scale (%s at the worst element)",
             num(r->scaled_ulp, c, sizeof c), ld_precision_name(r->precision),
             num(m->ulp.max, e, sizeof e));
    line(p, "          %s of %s elements fail (atol %s, rtol %s)",
         rd_count(m->n_fail, n1, sizeof n1), rd_count(m->n, n2, sizeof n2),
         num(r->tol.atol, e, sizeof e), num(r->tol.rtol, a, sizeof a));
}

/* --- tables -------------------------------------------------------------------------- */

typedef struct column {
    const char *title;
    double (*get)(const ld_compare_record *r);
} column;

static double get_rate(const ld_compare_record *r) { return r->rate_of_change; }
static double get_mean_abs(const ld_compare_record *r) { return r->metrics.abs.mean; }
static double get_max_abs(const ld_compare_record *r) { return r->metrics.abs.max; }
static double get_max_rel(const ld_compare_record *r) { return r->metrics.rel.max; }
static double get_ulp(const ld_compare_record *r) { return r->scaled_ulp; }
static double get_iso_ulp(const ld_compare_record *r)
{
    return r->has_isolated ? r->isolated_scaled_ulp : NAN;
}
static double get_iso_abs(const ld_compare_record *r)
{
    return r->has_isolated ? r->isolated.abs.max : NAN;
}

static const char *result(const printer *p, const ld_compare_record *r, int i, char *buf,
                          size_t size)
{
    snprintf(buf, size, "%s%s%s%s%s%s", r->metrics.pass ? "" : RED(p),
             r->metrics.pass ? "ok" : "FAIL", r->metrics.pass ? "" : RESET(p),
             i == p->sum->first_divergent ? " F" : "", r->origin ? " O" : "",
             r->culprit ? " C" : "");
    return buf;
}

static void print_table(const printer *p, const int *rows, int n, const column *cols,
                        int n_cols)
{
    int op_w = 2, name_w = 6, num_w = 2;
    for (int k = 0; k < n; k++) {
        const ld_compare_record *r = ld_compare_session_record(p->s, rows[k]);
        int op = (int)strlen(r->op_type), nm = (int)strlen(r->name);
        op_w = op > op_w ? (op < OP_MAX ? op : OP_MAX) : op_w;
        name_w = nm > name_w ? nm : name_w;
    }
    for (int x = rows && n ? rows[n - 1] + 1 : 1; x >= 10; x /= 10)
        num_w++;
    /* "  #  name  op  prec  cols...  result": result is at most 10 bytes */
    int room = WIDTH - 2 - num_w - 2 - 2 - op_w - 2 - 4 - n_cols * (NUM_W + 2) - 2 - 10;
    name_w = name_w < room ? name_w : (room > 8 ? room : 8);
    char name[WIDTH + 1], op[OP_MAX + 1], cell[32], res[64];
    fprintf(p->out, "%s  %*s  %-*s  %-*s  %-4s", DIM(p), num_w, "#", name_w, "tensor", op_w,
            "op", "prec");
    for (int c = 0; c < n_cols; c++)
        fprintf(p->out, "  %*s", NUM_W, cols[c].title);
    fprintf(p->out, "  result%s\n", RESET(p));
    for (int k = 0; k < n; k++) {
        const ld_compare_record *r = ld_compare_session_record(p->s, rows[k]);
        fprintf(p->out, "  %*d  %-*s  %-*s  %-4s", num_w, rows[k] + 1, name_w,
                fit(r->name, name_w, name, sizeof name), op_w,
                fit(r->op_type, op_w, op, sizeof op),
                r->topo_index >= 0 ? ld_precision_name(r->precision) : "in");
        for (int c = 0; c < n_cols; c++)
            fprintf(p->out, "  %*s", NUM_W, num(cols[c].get(r), cell, sizeof cell));
        fprintf(p->out, "  %s\n", result(p, r, rows[k], res, sizeof res));
    }
}

static const ld_compare_record *session_record(const void *session, int i)
{
    return ld_compare_session_record(session, i);
}

/* worst()'s keys: records without error are no one's worst. */
static double worst_accumulated(const ld_compare_record *r)
{
    double k = get_ulp(r);
    return r->is_float && k > 0 ? k : NAN;
}

static double worst_isolated(const ld_compare_record *r)
{
    double k = get_iso_ulp(r);
    return r->is_float && r->has_isolated && k > 0 ? k : NAN;
}

/* The top records by key (descending, ties in topological order). */
static int worst(const printer *p, double (*key)(const ld_compare_record *), int *rows)
{
    int n = rd_rank(p->s, ld_compare_session_count(p->s), session_record, key, p->top, rows);
    return n > 0 ? n : 0;
}

static void section(const printer *p, const char *title)
{
    fputc('\n', p->out);
    line(p, "%s%s%s", BOLD(p), title, RESET(p));
}

static void print_rankings(const printer *p)
{
    static const column origin_cols[] = {
        {"R", get_rate}, {"mean abs", get_mean_abs}, {"max abs", get_max_abs},
        {"ulp", get_ulp}};
    static const column acc_cols[] = {
        {"ulp", get_ulp}, {"max abs", get_max_abs}, {"max rel", get_max_rel},
        {"iso ulp", get_iso_ulp}};
    static const column iso_cols[] = {
        {"iso ulp", get_iso_ulp}, {"iso abs", get_iso_abs}, {"ulp", get_ulp}};
    const ld_compare_summary *sum = p->sum;
    int n = sum->n_origins < p->top ? sum->n_origins : p->top;
    char title[160];
    if (sum->n_origins) {
        snprintf(title, sizeof title, "Origin layers (%d: fail while their inputs pass), by "
                 "rate of change R", sum->n_origins);
        section(p, title);
        print_table(p, sum->origins, n, origin_cols, 4);
    }
    n = sum->n_culprits < p->top ? sum->n_culprits : p->top;
    if (sum->n_culprits) {
        snprintf(title, sizeof title, "Culprits (%d: isolated error above %g ulps, or "
                 "overflow), by isolated error", sum->n_culprits,
                 ld_compare_session_options(p->s)->culprit_ulp);
        section(p, title);
        print_table(p, sum->culprits, n, iso_cols, 3);
    }
    int *rows = malloc((size_t)p->top * sizeof *rows);
    if (!rows)
        return;
    n = worst(p, worst_accumulated, rows);
    if (n) {
        section(p, "Worst layers by accumulated error (ulp: max abs error in ulps of the "
                "precision at the largest |ref|)");
        print_table(p, rows, n, acc_cols, sum->has_isolated ? 4 : 3);
    }
    n = sum->has_isolated ? worst(p, worst_isolated, rows) : 0;
    if (n) {
        section(p, "Worst layers by isolated error (iso ulp: the layer alone, on the "
                "reference's inputs)");
        print_table(p, rows, n, iso_cols, 3);
    }
    free(rows);
}

static void print_counters(const printer *p)
{
    int n = ld_compare_session_count(p->s);
    int64_t nonfinite = 0;
    int nonfinite_tensors = 0, clip_tensors = 0;
    for (int i = 0; i < n; i++) {
        const ld_compare_record *r = ld_compare_session_record(p->s, i);
        if (r->metrics.nonfinite_test_only > 0) {
            nonfinite_tensors++;
            nonfinite += r->metrics.nonfinite_test_only;
        }
        clip_tensors += r->clip_crossings >= 0;
    }
    const ld_compare_summary *sum = p->sum;
    char a[32], b[32], c[32], d[32], e[32];
    section(p, "Overflow and NaN");
    line(p, "  engine counters    %s overflows, %s NaNs created, %s underflows",
         rd_count(sum->overflows, a, sizeof a), rd_count(sum->nans_created, b, sizeof b),
         rd_count(sum->underflows, c, sizeof c));
    line(p, "  would overflow     %s reference values beyond the fp16/bf16 range of their layer",
         rd_count(sum->would_overflow, d, sizeof d));
    line(p, "  non-finite in test %s values in %d tensors where the reference is finite",
         rd_count(nonfinite, e, sizeof e), nonfinite_tensors);
    if (clip_tensors > 0) /* compare/clip_crossing.h */
        line(p, "  clip crossings     %s values clamped on one side only, in %d Clip output%s",
             rd_count(sum->clip_crossings, a, sizeof a), clip_tensors, clip_tensors == 1 ? "" : "s");
}

static void print_all(const printer *p)
{
    static const column cols[] = {
        {"max abs", get_max_abs}, {"max rel", get_max_rel}, {"ulp", get_ulp},
        {"iso ulp", get_iso_ulp}};
    int n = ld_compare_session_count(p->s);
    int *rows = malloc((size_t)(n ? n : 1) * sizeof *rows);
    if (!rows)
        return;
    for (int i = 0; i < n; i++)
        rows[i] = i;
    section(p, "Every tensor (F first divergent, O origin, C culprit)");
    print_table(p, rows, n, cols, p->sum->has_isolated ? 4 : 3);
    free(rows);
}

void ld_report_print_summary(const ld_compare_session *s, const ld_report_context *ctx,
                             const ld_summary_options *opts, FILE *out)
{
    printer p = {.out = out, .s = s, .sum = ld_compare_session_summary(s)};
    p.color = opts && opts->color;
    p.top = opts && opts->top > 0 ? opts->top : DEFAULT_TOP;
    print_head(&p, ctx);
    print_first(&p);
    print_rankings(&p);
    print_counters(&p);
    if (opts && opts->verbose)
        print_all(&p);
    fflush(out);
}
