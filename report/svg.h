/* layerdiff — inline SVG charts for the HTML reports (report/svg.c). Internal.
 *
 * Charts are written straight into the page (no script draws them, so they
 * print and show with JavaScript off). Styling comes from CSS classes the
 * page defines (report/html.c): .grid, .axis, .thr, .s-acc, .s-iso, .band-ovf,
 * .mk-first, .mk-origin, .mk-culprit, .pt-fail, .pt-reg, .hit, .bx, .bx-w,
 * .bx-tol. Errors are drawn on a log scale; exact zeros sit on a "0" row below
 * it and infinities / NaN on an "inf" row above it, so neither vanishes. */
#ifndef LAYERDIFF_REPORT_SVG_H
#define LAYERDIFF_REPORT_SVG_H

#include <stdbool.h>
#include <stdio.h>

#include "layerdiff/compare.h"

/* Per-point marks (bits). */
enum {
    SVG_FAIL = 1,       /* red dot on the first series */
    SVG_OVERFLOW = 2,   /* shaded column: overflow or NaN/inf */
    SVG_FIRST = 4,      /* dashed line: first divergent layer */
    SVG_ORIGIN = 8,     /* triangle on top: origin layer */
    SVG_CULPRIT = 16,   /* diamond on top: culprit */
    SVG_REGRESSION = 32 /* ring: a regression (trend) */
};

typedef struct svg_series {
    const char *label;  /* legend text */
    const char *cls;    /* CSS class of its line ("s-acc", "s-iso") */
    const double *y;    /* n values, NaN = none (the line has a gap) */
} svg_series;

/* Writes the tooltip text of point i (escaped by the callee: rd_xml_text). */
typedef void (*svg_tooltip_fn)(FILE *f, const void *ctx, int i);

typedef struct svg_line_chart {
    const char *id;             /* unique in the page */
    const char *title;          /* accessible title (plain ASCII, not escaped) */
    const char *y_label, *x_label;
    int n;                      /* points along x */
    int n_series;               /* 1 or 2 */
    svg_series series[2];
    const double *threshold;    /* per point (step line) or NULL */
    const char *threshold_label;
    const unsigned char *flags; /* per point or NULL */
    const char *const *x_names; /* a tick label per point (few points) or NULL: numbers */
    svg_tooltip_fn tooltip;     /* or NULL */
    const void *ctx;
    const char *link_prefix;    /* point i links to "<prefix><i + 1>" (a table row), or NULL */
} svg_line_chart;

/* Above 1000 points, neighbours share a column showing their maximum (and
 * the smallest threshold, and every mark), so no spike is lost. */
void svg_line_chart_write(FILE *f, const svg_line_chart *c);

typedef struct svg_box_row {
    const char *name;
    const ld_error_stats *stats; /* median, p90, p95, p99, max and mean are drawn */
    double tol;                  /* tick (atol), NaN = none */
    bool fail;
    int record;                  /* links to "#r<record + 1>", -1 = no link */
} svg_box_row;

/* One row per layer: a whisker from the median to the max, a box from p90 to
 * p99, ticks at p95 and the tolerance, a cross at the mean. */
void svg_box_chart_write(FILE *f, const char *id, const char *title, const char *x_label,
                         const svg_box_row *rows, int n);

#endif
