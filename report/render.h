/* layerdiff — helpers shared by the renderers for people and CI (report/html.c,
 * svg.c, markdown.c, junit.c, trend*.c). Internal to report/.
 *
 * Everything a renderer prints that came from a file or a model (tensor,
 * node and op names, paths, command lines) goes through one of the escapers
 * below: a model is untrusted input, and a tensor named
 * "<script>alert(1)</script>" must show as text in every format. They also
 * repair what the JSON report may not have repaired (a live session's names
 * are raw bytes): invalid UTF-8 becomes U+FFFD, control bytes become U+FFFD
 * (XML 1.0 cannot hold them at all). */
#ifndef LAYERDIFF_REPORT_RENDER_H
#define LAYERDIFF_REPORT_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "layerdiff/report.h"
#include "report/atomic_file.h"

/* Decodes the UTF-8 sequence at s (s[0] != 0) into *cp and returns its
 * length; an invalid byte gives U+FFFD and length 1. */
size_t rd_utf8_next(const char *s, uint32_t *cp);

/* Text safe inside HTML/SVG/XML elements and double- or single-quoted
 * attributes: & < > " ' as entities, control characters (and U+FFFE/U+FFFF,
 * which XML forbids) as U+FFFD; in attributes (attr = true) tab, newline and
 * carriage return as character references so parsers keep them. NULL writes
 * nothing. */
void rd_xml_text(FILE *f, const char *s, bool attr);
/* Same, after shortening s to at most max_chars code points by cutting its
 * middle ("very_long…name_end"), for chart labels. */
void rd_xml_short(FILE *f, const char *s, int max_chars);

/* A Markdown code span holding s, safe in a GFM table cell: the backtick
 * fence is longer than any backtick run in s, '|' is escaped as '\|', control
 * characters become U+FFFD. Inside a code span nothing else is interpreted
 * (no HTML, links, @mentions or #references). Empty or NULL: "—" unquoted. */
void rd_md_code(FILE *f, const char *s);

/* Three significant digits ("0.00123", "1.23e-07", "NaN", "inf", "-inf"). */
char *rd_num(double v, char *buf, size_t size);
/* Full precision for machine use (sort keys): "%.17g", "Infinity",
 * "-Infinity", "" for NaN. */
char *rd_num_exact(double v, char *buf, size_t size);
/* "1,234,567". */
char *rd_count(int64_t n, char *buf, size_t size);
/* " at [0, 3, 1]" for a flat index into shape; "" when there is none (< 0). */
char *rd_coords(int64_t flat, const ld_shape *shape, char *buf, size_t size);
/* The last path component ("model.onnx" of "/a/b/model.onnx"); "" for NULL. */
const char *rd_basename(const char *path);

/* "fp16" for a layer, "input" for a graph input (topo_index < 0). */
const char *rd_precision_label(const ld_compare_record *r);
/* The record overflowed or produced NaN/inf: engine counters (overflows, NaNs
 * created, partial overflows), reference values beyond the layer precision's
 * range, or non-finite test values where the reference is finite. */
bool rd_record_overflowed(const ld_compare_record *r);

/* Ranks records worst first: record i of n is at(src, i), its key key(r),
 * NaN leaving it out; ties in record order. Writes up to top indices into
 * rows; returns how many (-1 when out of memory). The terminal summary ranks
 * a session's records with it, rd_worst a report's. */
typedef const ld_compare_record *(*rd_record_at)(const void *src, int i);
int rd_rank(const void *src, int n, rd_record_at at, double (*key)(const ld_compare_record *),
            int top, int *rows);
/* Indices of up to `top` float layer outputs (graph inputs are no layers), worst first: by accumulated error in
 * ulps at the tensor's scale (scaled_ulp; max abs when no record has it), NaN
 * never, ties in record order (the terminal summary ranks the same way). rows holds at least top ints.
 * Returns how many were written (-1 when out of memory). */
int rd_worst(const ld_report *r, int top, int *rows);
/* Indices of the graph-output records, in record order; rows holds
 * r->n_records ints. Returns how many. */
int rd_graph_outputs(const ld_report *r, int *rows);

/* LD_ERR_IO naming `what` when the stream has an error, else LD_OK. */
ld_status rd_stream_status(FILE *out, const char *what, ld_error *err);

/* The renderers behind ld_report_render (opts may be NULL). */
ld_status rd_render_html(const ld_report *r, const ld_render_options *opts, FILE *f,
                         ld_error *err);
ld_status rd_render_markdown(const ld_report *r, const ld_render_options *opts, FILE *f,
                             ld_error *err);
ld_status rd_render_junit(const ld_report *r, const ld_render_options *opts, FILE *f,
                          ld_error *err);

#endif
