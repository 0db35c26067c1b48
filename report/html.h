/* layerdiff — pieces shared by the HTML pages (report/html.c, report/trend_html.c).
 * Internal. */
#ifndef LAYERDIFF_REPORT_HTML_H
#define LAYERDIFF_REPORT_HTML_H

#include <stdbool.h>
#include <stdio.h>

extern const char rd_html_css[]; /* report/html_assets.c */
extern const char rd_html_js[];  /* sorts and filters table#layers */

/* The page up to and including <body>: doctype, charset, viewport, a
 * Content-Security-Policy that forbids every network load and allows only
 * rd_html_js (by its SHA-256) when with_script, the title (escaped), the CSS. */
void rd_html_begin(FILE *f, const char *title, bool with_script);
/* rd_html_js when with_script, then </body></html>. */
void rd_html_end(FILE *f, bool with_script);

#endif
