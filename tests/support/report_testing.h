/* layerdiff tests — small comparison sessions and reports for the renderer
 * tests (test_report_render.c, test_report_trend.c). Any test may use them.
 *
 * A session holds a graph input "x" ({1, 2, 3, 4}, 2x2 float32) and one fp16
 * layer per rt_layer, each fed by the one before; the layer's test tensor is
 * its reference {1, 2, 3, 4} with `error` added to element 0 (INFINITY gives
 * an overflow, NAN a NaN). Failures end the test (cmocka). */
#ifndef LAYERDIFF_TESTS_REPORT_TESTING_H
#define LAYERDIFF_TESTS_REPORT_TESTING_H

#include <stdbool.h>
#include <stddef.h>

#include "layerdiff/report.h"

typedef struct rt_layer {
    const char *name;
    const char *op;        /* NULL: "Conv" */
    double error;
    bool output;           /* a graph output */
} rt_layer;

/* A finished session (free with rt_session_free). */
typedef struct rt_session {
    ld_compare_options opts;
    ld_compare_session *s;
} rt_session;
void rt_session_make(rt_session *rs, const rt_layer *layers, int n);
void rt_session_free(rt_session *rs);

/* A report of such a session, through ld_report_from_session; ctx may be
 * NULL. Free with ld_report_free. */
ld_report *rt_report(const rt_layer *layers, int n, const ld_report_context *ctx);

/* Writes such a session's JSON report to path, dated `epoch` (seconds; < 0:
 * no SOURCE_DATE_EPOCH, the clock) and naming model sha256 `sha`. */
void rt_write_json(const char *path, const rt_layer *layers, int n, const char *sha,
                   long long epoch);

/* Renders r into a new NUL-terminated buffer (free it). */
char *rt_render(const ld_report *r, ld_report_format format, const ld_render_options *opts);

/* Occurrences of needle in haystack. */
int rt_count(const char *haystack, const char *needle);

#endif
