/* layerdiff — helpers shared by the renderers (report/render.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "report/render.h"

#define REPLACEMENT LD_UTF8_REPLACEMENT

/* --- UTF-8 ------------------------------------------------------------------------------ */

size_t rd_utf8_next(const char *str, uint32_t *cp)
{
    size_t n = ld_utf8_sequence(str, cp);
    if (n)
        return n;
    *cp = REPLACEMENT;
    return 1;
}

static void put_utf8(FILE *f, uint32_t cp)
{
    if (cp < 0x80) {
        fputc((int)cp, f);
    } else if (cp < 0x800) {
        fputc((int)(0xC0 | (cp >> 6)), f);
        fputc((int)(0x80 | (cp & 0x3F)), f);
    } else if (cp < 0x10000) {
        fputc((int)(0xE0 | (cp >> 12)), f);
        fputc((int)(0x80 | ((cp >> 6) & 0x3F)), f);
        fputc((int)(0x80 | (cp & 0x3F)), f);
    } else {
        fputc((int)(0xF0 | (cp >> 18)), f);
        fputc((int)(0x80 | ((cp >> 12) & 0x3F)), f);
        fputc((int)(0x80 | ((cp >> 6) & 0x3F)), f);
        fputc((int)(0x80 | (cp & 0x3F)), f);
    }
}

/* Characters no report should carry as they are: C0 controls, DEL, C1
 * controls, and the noncharacters XML forbids. */
static bool is_unprintable(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0xFFFE || cp == 0xFFFF;
}

static void xml_char(FILE *f, uint32_t cp, bool attr)
{
    switch (cp) {
    case '&': fputs("&amp;", f); return;
    case '<': fputs("&lt;", f); return;
    case '>': fputs("&gt;", f); return;
    case '"': fputs("&quot;", f); return;
    case '\'': fputs("&#39;", f); return;
    case '\t':
    case '\n':
    case '\r':
        if (attr)
            fprintf(f, "&#%u;", (unsigned)cp);
        else
            fputc((int)cp, f);
        return;
    default:
        put_utf8(f, is_unprintable(cp) ? REPLACEMENT : cp);
    }
}

void rd_xml_text(FILE *f, const char *s, bool attr)
{
    if (!s)
        return;
    while (*s) {
        uint32_t cp;
        s += rd_utf8_next(s, &cp);
        xml_char(f, cp, attr);
    }
}

static size_t count_chars(const char *s)
{
    size_t n = 0;
    for (uint32_t cp; *s; n++)
        s += rd_utf8_next(s, &cp);
    return n;
}

void rd_xml_short(FILE *f, const char *s, int max_chars)
{
    if (!s)
        return;
    size_t n = count_chars(s);
    if (max_chars < 5 || n <= (size_t)max_chars) {
        rd_xml_text(f, s, true);
        return;
    }
    size_t head = (size_t)(max_chars - 1) / 2, tail = (size_t)(max_chars - 1) - head;
    for (size_t i = 0; *s; i++) {
        uint32_t cp;
        s += rd_utf8_next(s, &cp);
        if (i < head || i >= n - tail)
            xml_char(f, cp, true);
        else if (i == head)
            fputs("\xE2\x80\xA6", f); /* … */
    }
}

void rd_md_code(FILE *f, const char *s)
{
    if (!s || !*s) {
        fputs("\xE2\x80\x94", f); /* — */
        return;
    }
    int longest = 0, run = 0;
    for (const char *p = s; *p; p++) {
        run = *p == '`' ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    int fence = longest + 1;
    /* A space inside the fence when s starts or ends with a backtick (or a
     * space), which CommonMark strips again. */
    bool pad = s[0] == '`' || s[0] == ' ' || s[strlen(s) - 1] == '`' ||
               s[strlen(s) - 1] == ' ';
    for (int i = 0; i < fence; i++)
        fputc('`', f);
    if (pad)
        fputc(' ', f);
    while (*s) {
        uint32_t cp;
        s += rd_utf8_next(s, &cp);
        if (cp == '|')
            fputs("\\|", f);
        else
            put_utf8(f, is_unprintable(cp) ? REPLACEMENT : cp);
    }
    if (pad)
        fputc(' ', f);
    for (int i = 0; i < fence; i++)
        fputc('`', f);
}

/* --- numbers ---------------------------------------------------------------------------- */

char *rd_num(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "NaN");
    else if (isinf(v))
        snprintf(buf, size, "%s", v > 0 ? "inf" : "-inf");
    else
        snprintf(buf, size, "%.3g", v);
    return buf;
}

char *rd_num_exact(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "%s", "");
    else if (isinf(v))
        snprintf(buf, size, "%s", v > 0 ? "Infinity" : "-Infinity");
    else
        snprintf(buf, size, "%.17g", v);
    return buf;
}

char *rd_count(int64_t n, char *buf, size_t size)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%lld", (long long)(n < 0 ? -n : n));
    size_t len = strlen(digits), o = 0;
    if (n < 0 && o + 1 < size)
        buf[o++] = '-';
    for (size_t i = 0; i < len && o + 1 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 1 < size)
            buf[o++] = ',';
        if (o + 1 < size)
            buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

char *rd_coords(int64_t flat, const ld_shape *shape, char *buf, size_t size)
{
    buf[0] = '\0';
    if (flat < 0 || size < 4)
        return buf;
    int64_t idx[LD_MAX_RANK];
    for (int d = shape->rank - 1; d >= 0; d--) {
        int64_t dim = shape->dims[d];
        idx[d] = dim > 0 ? flat % dim : 0;
        flat = dim > 0 ? flat / dim : 0;
    }
    size_t o = (size_t)snprintf(buf, size, " at [");
    for (int d = 0; d < shape->rank && o < size; d++)
        o += (size_t)snprintf(buf + o, size - o, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (o < size)
        snprintf(buf + o, size - o, "]");
    return buf;
}

const char *rd_basename(const char *path)
{
    if (!path)
        return "";
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

/* --- records ---------------------------------------------------------------------------- */

const char *rd_precision_label(const ld_compare_record *r)
{
    return r->topo_index < 0 ? "input" : ld_precision_name(r->precision);
}

bool rd_record_overflowed(const ld_compare_record *r)
{
    const ld_layer_counters *c = &r->counters;
    bool engine = c->present && (c->overflows > 0 || c->nans_created > 0 ||
                                 c->partial_overflows > 0);
    const ld_tensor_metrics *m = &r->metrics;
    return engine || m->would_overflow > 0 || m->nonfinite_test_only > 0;
}

typedef struct keyed {
    double key;
    int index;
} keyed;

static int compare_keyed(const void *pa, const void *pb)
{
    const keyed *a = pa, *b = pb;
    if (a->key != b->key)
        return a->key > b->key ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

int rd_rank(const void *src, int n, rd_record_at at, double (*key)(const ld_compare_record *),
            int top, int *rows)
{
    keyed *list = malloc((n > 0 ? (size_t)n : 1) * sizeof *list);
    if (!list)
        return -1;
    int m = 0;
    for (int i = 0; i < n; i++) {
        double k = key(at(src, i));
        if (!isnan(k))
            list[m++] = (keyed){k, i};
    }
    qsort(list, (size_t)m, sizeof *list, compare_keyed);
    m = m < top ? m : top;
    for (int i = 0; i < m; i++)
        rows[i] = list[i].index;
    free(list);
    return m;
}

static const ld_compare_record *report_record(const void *report, int i)
{
    return &((const ld_report *)report)->records[i];
}

/* rd_worst's keys: float layer outputs, by scaled_ulp or by max abs error. */
static double worst_by_ulp(const ld_compare_record *r)
{
    return r->is_float && r->topo_index >= 0 ? r->scaled_ulp : NAN;
}

static double worst_by_abs(const ld_compare_record *r)
{
    return r->is_float && r->topo_index >= 0 ? r->metrics.abs.max : NAN;
}

int rd_worst(const ld_report *r, int top, int *rows)
{
    bool any_ulp = false;
    for (int i = 0; i < r->n_records && !any_ulp; i++)
        any_ulp = r->records[i].is_float && !isnan(r->records[i].scaled_ulp);
    return rd_rank(r, r->n_records, report_record, any_ulp ? worst_by_ulp : worst_by_abs, top,
                   rows);
}

int rd_graph_outputs(const ld_report *r, int *rows)
{
    int n = 0;
    for (int i = 0; i < r->n_records; i++)
        if (r->records[i].is_graph_output)
            rows[n++] = i;
    return n;
}

/* --- files ------------------------------------------------------------------------------ */

ld_status rd_stream_status(FILE *out, const char *what, ld_error *err)
{
    if (ferror(out))
        return ld_error_set(err, LD_ERR_IO, "cannot write the %s: %s", what,
                            errno ? strerror(errno) : "write error");
    return LD_OK;
}

