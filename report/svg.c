/* layerdiff — inline SVG charts (report/svg.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/render.h"
#include "report/svg.h"

#define MAX_SLOTS 1000
#define MAX_DECADES 24

/* Chart geometry (viewBox units; the page scales the SVG to its width). */
#define W 1200
#define H 380
#define ML 78
#define MR 16
#define MT 40
#define MB 52
#define BAND 16 /* the "inf" row at the top and the "0" row at the bottom */

/* --- log scale ------------------------------------------------------------------------- */

typedef struct scale {
    int lo, hi;           /* decades shown: 10^lo .. 10^hi */
    double top, bottom;   /* pixel rows of 10^hi and 10^lo */
    double inf_y, zero_y; /* rows for infinities/NaN-as-error and exact zeros */
} scale;

static void range_add(double v, double *lo, double *hi)
{
    if (isfinite(v) && v > 0) {
        *lo = v < *lo ? v : *lo;
        *hi = v > *hi ? v : *hi;
    }
}

static scale make_scale(double vmin, double vmax, double y0, double y1, double band)
{
    scale s;
    if (!(vmin <= vmax)) {
        vmin = 1e-8;
        vmax = 1;
    }
    s.lo = (int)floor(log10(vmin));
    s.hi = (int)ceil(log10(vmax));
    if (s.hi <= s.lo)
        s.hi = s.lo + 1;
    if (s.hi - s.lo > MAX_DECADES)
        s.lo = s.hi - MAX_DECADES;
    s.inf_y = y0 + band / 2.0;
    s.top = y0 + band + 4;
    s.zero_y = y1 - band / 2.0;
    s.bottom = y1 - band - 4;
    return s;
}

/* The pixel row of v; NAN when v is NaN (nothing to draw). */
static double scale_y(const scale *s, double v)
{
    if (isnan(v))
        return NAN;
    if (isinf(v))
        return s->inf_y;
    if (v <= 0)
        return s->zero_y;
    double l = log10(v);
    l = l < s->lo ? s->lo : (l > s->hi ? s->hi : l);
    return s->bottom - (l - s->lo) / (s->hi - s->lo) * (s->bottom - s->top);
}

static int decade_step(const scale *s)
{
    int span = s->hi - s->lo;
    return span <= 10 ? 1 : (span <= 20 ? 2 : 3);
}

/* Horizontal grid and labels: decades, the "0" and "inf" rows. */
static void draw_y_axis(FILE *f, const scale *s, double x0, double x1, const char *label)
{
    for (int d = s->lo; d <= s->hi; d += decade_step(s)) {
        double y = scale_y(s, pow(10, d));
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", x0,
                x1, y, y);
        fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>",
                x0 - 6, y + 4, d);
    }
    fprintf(f, "<line class=\"grid zero\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
            x0, x1, s->zero_y, s->zero_y);
    fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">0</text>", x0 - 6,
            s->zero_y + 4);
    fprintf(f, "<line class=\"grid zero\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
            x0, x1, s->inf_y, s->inf_y);
    fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">inf/NaN</text>",
            x0 - 6, s->inf_y + 4);
    if (label) {
        double mid = (s->top + s->bottom) / 2;
        fprintf(f, "<text class=\"label\" transform=\"translate(14 %.1f) rotate(-90)\" "
                "text-anchor=\"middle\">", mid);
        rd_xml_text(f, label, false);
        fputs("</text>", f);
    }
}

/* --- columns (points, or groups of points above MAX_SLOTS) ---------------------------- */

typedef struct column {
    int lo, hi;           /* points [lo, hi) */
    double y[2];
    double thr;
    unsigned char flags;
} column;

static double max_ignoring_nan(double a, double b)
{
    if (isnan(a))
        return b;
    if (isnan(b))
        return a;
    return a > b ? a : b;
}

static double min_ignoring_nan(double a, double b)
{
    if (isnan(a))
        return b;
    if (isnan(b))
        return a;
    return a < b ? a : b;
}

static column *make_columns(const svg_line_chart *c, int *n_out)
{
    int n = c->n > MAX_SLOTS ? MAX_SLOTS : c->n;
    column *cols = calloc(n > 0 ? (size_t)n : 1, sizeof *cols);
    if (!cols)
        return NULL;
    for (int k = 0; k < n; k++) {
        column *col = &cols[k];
        col->lo = (int)((long long)k * c->n / n);
        col->hi = (int)((long long)(k + 1) * c->n / n);
        col->y[0] = col->y[1] = col->thr = NAN;
        for (int i = col->lo; i < col->hi; i++) {
            for (int s = 0; s < c->n_series; s++)
                col->y[s] = max_ignoring_nan(col->y[s], c->series[s].y[i]);
            if (c->threshold)
                col->thr = min_ignoring_nan(col->thr, c->threshold[i]);
            if (c->flags)
                col->flags |= c->flags[i];
        }
    }
    *n_out = n;
    return cols;
}

typedef struct frame {
    double x0, x1, y0, y1; /* plot area */
    int n;                 /* columns */
    scale s;
} frame;

static double col_x(const frame *fr, int k)
{
    return fr->x0 + (k + 0.5) * (fr->x1 - fr->x0) / fr->n;
}

static double col_w(const frame *fr)
{
    return (fr->x1 - fr->x0) / fr->n;
}

static void draw_bands(FILE *f, const frame *fr, const column *cols)
{
    double w = col_w(fr);
    for (int k = 0; k < fr->n; k++) {
        if (!(cols[k].flags & SVG_OVERFLOW))
            continue;
        int end = k;
        while (end + 1 < fr->n && (cols[end + 1].flags & SVG_OVERFLOW))
            end++;
        double x = fr->x0 + k * w, width = (end - k + 1) * w;
        if (width < 2) {
            x -= (2 - width) / 2;
            width = 2;
        }
        fprintf(f, "<rect class=\"band-ovf\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                "height=\"%.1f\"/>", x, fr->y0, width, fr->y1 - fr->y0);
        k = end;
    }
}

/* 1, 2, 5, 10, 20, ... : the smallest giving at most 10 ticks over n. */
static long long nice_step(long long n)
{
    static const int mult[] = {1, 2, 5};
    for (long long mag = 1;; mag *= 10)
        for (int i = 0; i < 3; i++)
            if (n / (mult[i] * mag) <= 10)
                return mult[i] * mag;
}

static void draw_x_axis(FILE *f, const frame *fr, const svg_line_chart *c, const column *cols)
{
    fprintf(f, "<rect class=\"axis\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>",
            fr->x0, fr->y0, fr->x1 - fr->x0, fr->y1 - fr->y0);
    if (c->x_names) {
        bool tilt = fr->n > 8;
        int every = fr->n > 40 ? (fr->n + 39) / 40 : 1;
        for (int k = 0; k < fr->n; k += every) {
            double x = col_x(fr, k), y = fr->y1 + 14;
            fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"", x, y,
                    tilt ? "end" : "middle");
            if (tilt)
                fprintf(f, " transform=\"rotate(-25 %.1f %.1f)\"", x, y);
            fputs(">", f);
            rd_xml_short(f, c->x_names[cols[k].lo], 24);
            fputs("</text>", f);
        }
    } else {
        /* Ticks at round record numbers (1-based, as in the table). */
        long long step = nice_step(c->n);
        for (long long v = step; v <= c->n; v += step) {
            double x = fr->x0 + (v - 0.5) * (fr->x1 - fr->x0) / c->n;
            fprintf(f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                    x, x, fr->y1, fr->y1 + 4);
            fprintf(f, "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld"
                    "</text>", x, fr->y1 + 16, v);
        }
    }
    if (c->x_label) {
        fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
                (fr->x0 + fr->x1) / 2, H - 6);
        rd_xml_text(f, c->x_label, false);
        fputs("</text>", f);
    }
}

/* A path through the columns' values; breaks at NaN. Step = a horizontal
 * segment across each column (thresholds), else a line between centres. */
static void draw_path(FILE *f, const frame *fr, const column *cols, int series, bool step,
                      const char *cls)
{
    bool open = false, any = false;
    double w = col_w(fr);
    for (int k = 0; k < fr->n; k++) {
        double v = series < 0 ? cols[k].thr : cols[k].y[series];
        double y = scale_y(&fr->s, v);
        if (isnan(y)) {
            open = false;
            continue;
        }
        if (!any)
            fprintf(f, "<path class=\"%s\" d=\"", cls);
        any = true;
        if (step)
            fprintf(f, "%c%.1f %.1fH%.1f", open ? 'L' : 'M', fr->x0 + k * w, y,
                    fr->x0 + (k + 1) * w);
        else
            fprintf(f, "%c%.1f %.1f", open ? 'L' : 'M', col_x(fr, k), y);
        open = true;
    }
    if (any)
        fputs("\"/>", f);
}

static void draw_marks(FILE *f, const frame *fr, const column *cols)
{
    double top = fr->y0 + 1;
    for (int k = 0; k < fr->n; k++) {
        double x = col_x(fr, k);
        unsigned char fl = cols[k].flags;
        if (fl & SVG_FIRST)
            fprintf(f, "<line class=\"mk-first\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" "
                    "y2=\"%.1f\"/>", x, x, fr->y0, fr->y1);
        if (fl & SVG_ORIGIN)
            fprintf(f, "<path class=\"mk-origin\" d=\"M%.1f %.1fl-5 -9h10z\"/>", x, top + 9);
        if (fl & SVG_CULPRIT)
            fprintf(f, "<path class=\"mk-culprit\" d=\"M%.1f %.1fl4 5 -4 5 -4 -5z\"/>", x,
                    top + 10);
        double y = scale_y(&fr->s, cols[k].y[0]);
        if (isnan(y))
            continue;
        if (fl & SVG_FAIL)
            fprintf(f, "<circle class=\"pt-fail\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>", x, y);
        if (fl & SVG_REGRESSION)
            fprintf(f, "<circle class=\"pt-reg\" cx=\"%.1f\" cy=\"%.1f\" r=\"7\"/>", x, y);
    }
}

static void column_tooltip(FILE *f, const svg_line_chart *c, const column *col)
{
    if (col->hi - col->lo == 1 && c->tooltip) {
        c->tooltip(f, c->ctx, col->lo);
        return;
    }
    char a[32];
    fprintf(f, "#%d to #%d", col->lo + 1, col->hi);
    for (int s = 0; s < c->n_series; s++) {
        fputs(", max ", f);
        rd_xml_text(f, c->series[s].label, false);
        fprintf(f, " %s", rd_num(col->y[s], a, sizeof a));
    }
}

/* Transparent full-height columns carrying the tooltips and row links. */
static void draw_hits(FILE *f, const frame *fr, const svg_line_chart *c, const column *cols)
{
    double w = col_w(fr);
    for (int k = 0; k < fr->n; k++) {
        bool link = c->link_prefix && cols[k].hi - cols[k].lo >= 1;
        if (link)
            fprintf(f, "<a href=\"%s%d\">", c->link_prefix, cols[k].lo + 1);
        fprintf(f, "<rect class=\"hit\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\">"
                "<title>", fr->x0 + k * w, fr->y0, w, fr->y1 - fr->y0);
        column_tooltip(f, c, &cols[k]);
        fputs("</title></rect>", f);
        if (link)
            fputs("</a>", f);
    }
}

static void legend_item(FILE *f, double *x, const char *cls, const char *shape,
                        const char *label)
{
    if (strcmp(shape, "line") == 0)
        fprintf(f, "<path class=\"%s\" d=\"M%.1f 14h22\"/>", cls, *x);
    else if (strcmp(shape, "dot") == 0)
        fprintf(f, "<circle class=\"%s\" cx=\"%.1f\" cy=\"14\" r=\"4\"/>", cls, *x + 11);
    else if (strcmp(shape, "tri") == 0)
        fprintf(f, "<path class=\"%s\" d=\"M%.1f 19l-5 -9h10z\"/>", cls, *x + 11);
    else if (strcmp(shape, "dia") == 0)
        fprintf(f, "<path class=\"%s\" d=\"M%.1f 9l4 5 -4 5 -4 -5z\"/>", cls, *x + 11);
    else
        fprintf(f, "<rect class=\"%s\" x=\"%.1f\" y=\"7\" width=\"22\" height=\"14\"/>", cls,
                *x);
    fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"18\">", *x + 28);
    rd_xml_text(f, label, false);
    fputs("</text>", f);
    *x += 40 + 6.5 * (double)strlen(label);
}

static void draw_legend(FILE *f, const svg_line_chart *c, unsigned char all_flags)
{
    double x = ML;
    for (int s = 0; s < c->n_series; s++)
        legend_item(f, &x, c->series[s].cls, "line", c->series[s].label);
    if (c->threshold)
        legend_item(f, &x, "thr", "line", c->threshold_label ? c->threshold_label : "tolerance");
    if (all_flags & SVG_FAIL)
        legend_item(f, &x, "pt-fail", "dot", "fails");
    if (all_flags & SVG_FIRST)
        legend_item(f, &x, "mk-first", "line", "first divergent");
    if (all_flags & SVG_ORIGIN)
        legend_item(f, &x, "mk-origin", "tri", "origin");
    if (all_flags & SVG_CULPRIT)
        legend_item(f, &x, "mk-culprit", "dia", "culprit");
    if (all_flags & SVG_OVERFLOW)
        legend_item(f, &x, "band-ovf", "box", "overflow / NaN");
    if (all_flags & SVG_REGRESSION)
        legend_item(f, &x, "pt-reg", "dot", "regression");
}

void svg_line_chart_write(FILE *f, const svg_line_chart *c)
{
    int n_cols = 0;
    column *cols = c->n > 0 ? make_columns(c, &n_cols) : NULL;
    if (!cols) {
        fputs("<p class=\"muted\">(no data to chart)</p>\n", f);
        return;
    }
    double lo = INFINITY, hi = 0;
    unsigned char all_flags = 0;
    for (int k = 0; k < n_cols; k++) {
        for (int s = 0; s < c->n_series; s++)
            range_add(cols[k].y[s], &lo, &hi);
        range_add(cols[k].thr, &lo, &hi);
        all_flags |= cols[k].flags;
    }
    frame fr = {.x0 = ML, .x1 = W - MR, .y0 = MT, .y1 = H - MB, .n = n_cols};
    fr.s = make_scale(lo, hi, fr.y0, fr.y1, BAND);
    fprintf(f, "<svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "aria-labelledby=\"%s-t\" xmlns=\"http://www.w3.org/2000/svg\">"
            "<title id=\"%s-t\">", c->id, W, H, c->id, c->id);
    rd_xml_text(f, c->title, false);
    fputs("</title>\n", f);
    draw_bands(f, &fr, cols);
    draw_y_axis(f, &fr.s, fr.x0, fr.x1, c->y_label);
    draw_x_axis(f, &fr, c, cols);
    fputs("\n", f);
    if (c->threshold)
        draw_path(f, &fr, cols, -1, true, "thr");
    for (int s = c->n_series - 1; s >= 0; s--)
        draw_path(f, &fr, cols, s, false, c->series[s].cls);
    fputs("\n", f);
    draw_marks(f, &fr, cols);
    fputs("\n", f);
    draw_hits(f, &fr, c, cols);
    draw_legend(f, c, all_flags);
    fputs("</svg>\n", f);
    free(cols);
}

/* --- box chart ------------------------------------------------------------------------------ */

#define BOX_LABEL_W 320
#define BOX_ROW_H 28

static void box_tooltip(FILE *f, const svg_box_row *r)
{
    const ld_error_stats *e = r->stats;
    char a[32], b[32], c[32], d[32], m[32], x[32], t[32];
    rd_xml_text(f, r->name, false);
    fprintf(f, ": median %s, p90 %s, p95 %s, p99 %s, max %s, mean %s, atol %s",
            rd_num(e->median, a, sizeof a), rd_num(e->p90, b, sizeof b),
            rd_num(e->p95, c, sizeof c), rd_num(e->p99, d, sizeof d),
            rd_num(e->max, x, sizeof x), rd_num(e->mean, m, sizeof m),
            rd_num(r->tol, t, sizeof t));
}

static double box_x(const scale *s, double v, double x0, double x1)
{
    /* the scale is vertical; reuse it by mapping its pixel rows onto x */
    double y = scale_y(s, v);
    return x0 + (s->zero_y - y) / (s->zero_y - s->inf_y) * (x1 - x0);
}

static void box_row(FILE *f, const scale *s, const svg_box_row *r, double y, double x0,
                    double x1)
{
    const ld_error_stats *e = r->stats;
    double xm = box_x(s, e->median, x0, x1), xmax = box_x(s, e->max, x0, x1);
    double x90 = box_x(s, e->p90, x0, x1), x99 = box_x(s, e->p99, x0, x1);
    double x95 = box_x(s, e->p95, x0, x1), xmean = box_x(s, e->mean, x0, x1);
    if (r->record >= 0)
        fprintf(f, "<a href=\"#r%d\">", r->record + 1);
    fprintf(f, "<g class=\"%s\"><title>", r->fail ? "bxr fail" : "bxr");
    box_tooltip(f, r);
    fputs("</title>", f);
    fprintf(f, "<rect class=\"hit\" x=\"0\" y=\"%.1f\" width=\"%d\" height=\"%d\"/>",
            y - BOX_ROW_H / 2.0, W, BOX_ROW_H);
    fprintf(f, "<text class=\"boxname\" x=\"%d\" y=\"%.1f\" text-anchor=\"end\">",
            BOX_LABEL_W - 10, y + 4);
    rd_xml_short(f, r->name, 44);
    fputs("</text>", f);
    if (!isnan(xm) && !isnan(xmax))
        fprintf(f, "<line class=\"bx-w\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", xm,
                xmax, y, y);
    if (!isnan(x90) && !isnan(x99))
        fprintf(f, "<rect class=\"bx\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"12\"/>",
                x90, y - 6, x99 - x90 > 1 ? x99 - x90 : 1);
    if (!isnan(x95))
        fprintf(f, "<line class=\"bx-w\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", x95,
                x95, y - 6, y + 6);
    if (!isnan(xm))
        fprintf(f, "<circle class=\"bx-med\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"/>", xm, y);
    if (!isnan(xmax))
        fprintf(f, "<line class=\"bx-w\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>",
                xmax, xmax, y - 8, y + 8);
    if (!isnan(xmean))
        fprintf(f, "<path class=\"bx-mean\" d=\"M%.1f %.1fl6 6m0 -6l-6 6\"/>", xmean - 3, y - 3);
    double xt = isnan(r->tol) ? NAN : box_x(s, r->tol, x0, x1);
    if (!isnan(xt))
        fprintf(f, "<line class=\"bx-tol\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>", xt,
                xt, y - 11, y + 11);
    fputs("</g>", f);
    if (r->record >= 0)
        fputs("</a>", f);
    fputs("\n", f);
}

void svg_box_chart_write(FILE *f, const char *id, const char *title, const char *x_label,
                         const svg_box_row *rows, int n)
{
    if (n <= 0) {
        fputs("<p class=\"muted\">(no float tensors to chart)</p>\n", f);
        return;
    }
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < n; i++) {
        const ld_error_stats *e = rows[i].stats;
        double vals[] = {e->median, e->p90, e->p95, e->p99, e->max, e->mean, rows[i].tol};
        for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++)
            range_add(vals[k], &lo, &hi);
    }
    int height = 40 + n * BOX_ROW_H + 40;
    double x0 = BOX_LABEL_W, x1 = W - MR;
    /* A horizontal log scale: built over 1000 "rows" mapped onto [x0, x1], with
     * room between the 0 / inf ends and the decades for their labels. */
    scale s = make_scale(lo, hi, 0, 1000, 60);
    fprintf(f, "<svg class=\"chart\" id=\"%s\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "aria-labelledby=\"%s-t\" xmlns=\"http://www.w3.org/2000/svg\"><title id=\"%s-t\">",
            id, W, height, id, id);
    rd_xml_text(f, title, false);
    fputs("</title>\n", f);
    double top = 30, bottom = 30 + n * BOX_ROW_H;
    for (int d = s.lo; d <= s.hi; d += decade_step(&s)) {
        double x = box_x(&s, pow(10, d), x0, x1);
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">1e%d</text>",
                x, x, top, bottom, x, bottom + 14, d);
    }
    const char *ends[2] = {"0", "inf"};
    double end_x[2] = {box_x(&s, 0, x0, x1), box_x(&s, INFINITY, x0, x1)};
    for (int k = 0; k < 2; k++)
        fprintf(f, "<line class=\"grid zero\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/>"
                "<text class=\"tick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>",
                end_x[k], end_x[k], top, bottom, end_x[k], bottom + 14, ends[k]);
    for (int i = 0; i < n; i++)
        box_row(f, &s, &rows[i], top + (i + 0.5) * BOX_ROW_H, x0, x1);
    fprintf(f, "<text class=\"label\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
            (x0 + x1) / 2, height - 20);
    rd_xml_text(f, x_label, false);
    fputs("</text>", f);
    fprintf(f, "<text class=\"legend\" x=\"%.1f\" y=\"18\">line: median to max \xC2\xB7 box: p90 "
            "to p99 \xC2\xB7 tick: p95 \xC2\xB7 \xC3\x97: mean \xC2\xB7 red tick: atol</text>",
            x0);
    fputs("</svg>\n", f);
}
