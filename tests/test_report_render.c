/* Unit tests for the renderers for people and CI (report/html.c, svg.c,
 * markdown.c, junit.c, from_session.c): golden structure, not golden bytes.
 * The JUnit XML is parsed by a small well-formedness checker below (there is
 * no XML library; tests/e2e/test_report.sh also parses it with Python's
 * xml.etree); the HTML must hold its charts, one table row per record and a
 * script allowed by its own Content-Security-Policy hash; names built to
 * break out of every format (markup, quotes, pipes, backticks, control and
 * invalid UTF-8 bytes) must come out escaped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layerdiff/report.h"
#include "layerdiff/sha256.h"
#include "report/render.h"
#include "tests/support/report_testing.h"

#define HOSTILE_HTML "<script>alert(1)</script>"
#define HOSTILE_MD "pipe|tick`s*bold*@team #1"
#define HOSTILE_CTRL "ctrl\x01\x1b[31mred\xff\xfe"

/* layer 0 passes, layer 1 fails (error born there), 2 and 3 inherit it;
 * 2 and 3 are graph outputs. */
static const rt_layer hostile[] = {
    {HOSTILE_HTML, "Conv\"onmouseover=\"x", 1e-4, false},
    {HOSTILE_MD, "MatMul", 0.5, false},
    {HOSTILE_CTRL, "Add", 0.5, true},
    {"y]]>&amp;<", "Relu", 0.5, true},
};
#define N_HOSTILE ((int)(sizeof hostile / sizeof hostile[0]))

static const ld_report_context hostile_ctx = {
    .command = "run", .command_line = "layerdiff run '<b>m<b>.onnx'",
    .model_path = "/m/<b>m<b>.onnx", .model_sha256 = "abc", .ref_backend = "reference",
    .test_backend = "emulated", .test_config = "fp16 & more", .input_seed = 7};

/* --- helpers ---------------------------------------------------------------------------- */

static char *capture(void (*fn)(FILE *, const char *), const char *arg)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fn(f, arg);
    fclose(f);
    return buf;
}

static void xml_text_fn(FILE *f, const char *s) { rd_xml_text(f, s, false); }
static void xml_attr_fn(FILE *f, const char *s) { rd_xml_text(f, s, true); }
static void md_code_fn(FILE *f, const char *s) { rd_md_code(f, s); }
static void xml_short_fn(FILE *f, const char *s) { rd_xml_short(f, s, 9); }

/* Every byte sequence valid UTF-8, and no control byte but tab/newline/CR. */
static void expect_clean_utf8(const char *s)
{
    while (*s) {
        uint32_t cp;
        size_t n = rd_utf8_next(s, &cp);
        if (n == 1 && (unsigned char)*s >= 0x80)
            fail_msg("invalid UTF-8 byte 0x%02x at '%.20s'", (unsigned char)*s, s);
        if (cp < 0x20 && cp != '\n' && cp != '\t' && cp != '\r')
            fail_msg("control byte 0x%02x at '%.20s'", (unsigned)cp, s - 10);
        s += n;
    }
}

/* --- a tiny XML well-formedness checker ------------------------------------------------- */

typedef struct xml_doc {
    int depth, roots;
    char stack[32][48];
    int testcases, failures, errors, properties;
    char suites_tests[16], suites_failures[16], suite_failures[16];
    char first_case_name[256];
} xml_doc;

static bool is_name_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && ((c >= '0' && c <= '9') || c == '-' || c == '.'));
}

/* An entity reference at s ('&'): its length, or 0 when not a valid one. */
static size_t entity(const char *s)
{
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (size_t i = 0; i < 5; i++)
        if (strncmp(s, named[i], strlen(named[i])) == 0)
            return strlen(named[i]);
    if (s[1] != '#')
        return 0;
    size_t i = 2;
    bool hex = s[2] == 'x';
    i += hex;
    size_t start = i;
    while ((s[i] >= '0' && s[i] <= '9') || (hex && ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'f')))
        i++;
    return i > start && s[i] == ';' ? i + 1 : 0;
}

/* Text or an attribute value up to `stop`: no '<', only valid entities. */
static const char *xml_chars(const char *p, char stop)
{
    while (*p && *p != stop) {
        if (*p == '<')
            fail_msg("raw '<' in text or attribute: '%.30s'", p);
        if (*p == '&') {
            size_t n = entity(p);
            if (!n)
                fail_msg("bad entity: '%.20s'", p);
            p += n;
        } else {
            p++;
        }
    }
    return p;
}

static const char *xml_attributes(const char *p, xml_doc *d, const char *tag)
{
    char names[24][48];
    int n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t')
            p++;
        if (*p == '>' || (p[0] == '/' && p[1] == '>'))
            return p;
        size_t len = 0;
        while (is_name_char(p[len], len == 0))
            len++;
        if (len == 0 || len >= 48 || p[len] != '=' || (p[len + 1] != '"' && p[len + 1] != '\''))
            fail_msg("bad attribute in <%s>: '%.30s'", tag, p);
        char name[48];
        memcpy(name, p, len);
        name[len] = '\0';
        for (int i = 0; i < n; i++)
            if (strcmp(names[i], name) == 0)
                fail_msg("duplicate attribute %s in <%s>", name, tag);
        assert_true(n < 24);
        strcpy(names[n++], name);
        char quote = p[len + 1];
        const char *value = p + len + 2, *end = xml_chars(value, quote);
        if (*end != quote)
            fail_msg("unterminated attribute %s in <%s>", name, tag);
        size_t vlen = (size_t)(end - value);
        char *target = NULL;
        if (strcmp(tag, "testsuites") == 0 && strcmp(name, "tests") == 0)
            target = d->suites_tests;
        if (strcmp(tag, "testsuites") == 0 && strcmp(name, "failures") == 0)
            target = d->suites_failures;
        if (strcmp(tag, "testsuite") == 0 && strcmp(name, "failures") == 0)
            target = d->suite_failures;
        if (target && vlen < 16) {
            memcpy(target, value, vlen);
            target[vlen] = '\0';
        }
        if (strcmp(tag, "testcase") == 0 && strcmp(name, "name") == 0 && d->testcases == 1 &&
            vlen < sizeof d->first_case_name) {
            memcpy(d->first_case_name, value, vlen);
            d->first_case_name[vlen] = '\0';
        }
        p = end + 1;
    }
}

static const char *xml_tag(const char *p, xml_doc *d)
{
    bool closing = p[1] == '/';
    p += closing ? 2 : 1;
    size_t len = 0;
    while (is_name_char(p[len], len == 0))
        len++;
    if (len == 0 || len >= 48)
        fail_msg("bad tag name: '%.20s'", p);
    char tag[48];
    memcpy(tag, p, len);
    tag[len] = '\0';
    p += len;
    if (closing) {
        if (d->depth == 0 || strcmp(d->stack[d->depth - 1], tag) != 0)
            fail_msg("</%s> does not close <%s>", tag, d->depth ? d->stack[d->depth - 1] : "");
        d->depth--;
        if (*p != '>')
            fail_msg("bad closing tag </%s", tag);
        return p + 1;
    }
    if (d->depth == 0)
        d->roots++;
    d->testcases += strcmp(tag, "testcase") == 0;
    d->failures += strcmp(tag, "failure") == 0;
    d->errors += strcmp(tag, "error") == 0;
    d->properties += strcmp(tag, "property") == 0;
    p = xml_attributes(p, d, tag);
    if (*p == '/')
        return p + 2;
    assert_true(d->depth < 32);
    strcpy(d->stack[d->depth++], tag);
    return p + 1;
}

static void xml_parse(const char *s, xml_doc *d)
{
    memset(d, 0, sizeof *d);
    expect_clean_utf8(s);
    const char *decl = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>";
    assert_memory_equal(s, decl, strlen(decl));
    const char *p = s + strlen(decl);
    while (*p) {
        p = xml_chars(p, '<');
        if (*p == '\0')
            break;
        if (p[1] == '!' || p[1] == '?')
            fail_msg("unexpected markup '%.20s'", p);
        p = xml_tag(p, d);
    }
    assert_int_equal(d->depth, 0);
    assert_int_equal(d->roots, 1);
}

/* --- escapers ---------------------------------------------------------------------------- */

static void test_escapers(void **state)
{
    (void)state;
    char *s = capture(xml_text_fn, "a<b>&\"'\x01\xff\tz");
    assert_string_equal(s, "a&lt;b&gt;&amp;&quot;&#39;\xEF\xBF\xBD\xEF\xBF\xBD\tz");
    free(s);
    s = capture(xml_attr_fn, "t\tn\n");
    assert_string_equal(s, "t&#9;n&#10;");
    free(s);
    /* a truncated sequence, an overlong encoding, a surrogate, U+FFFF */
    s = capture(xml_text_fn, "\xE2\x82 \xC0\xAF \xED\xA0\x80 \xEF\xBF\xBF \xE2\x82\xAC");
    assert_string_equal(s, "\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD "
                           "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD \xE2\x82\xAC");
    free(s);
    s = capture(xml_short_fn, "abcdefghijklmnop");
    assert_string_equal(s, "abcd\xE2\x80\xA6mnop");
    free(s);
    s = capture(md_code_fn, "a|b`c");
    assert_string_equal(s, "``a\\|b`c``");
    free(s);
    s = capture(md_code_fn, "`x`");
    assert_string_equal(s, "`` `x` ``");
    free(s);
    s = capture(md_code_fn, "");
    assert_string_equal(s, "\xE2\x80\x94");
    free(s);
    char buf[32];
    assert_string_equal(rd_num(NAN, buf, sizeof buf), "NaN");
    assert_string_equal(rd_num(-INFINITY, buf, sizeof buf), "-inf");
    assert_string_equal(rd_num(0.000123456, buf, sizeof buf), "0.000123");
    assert_string_equal(rd_num_exact(NAN, buf, sizeof buf), "");
    assert_string_equal(rd_num_exact(INFINITY, buf, sizeof buf), "Infinity");
    assert_string_equal(rd_count(-1234567, buf, sizeof buf), "-1,234,567");
    assert_string_equal(rd_count(999, buf, sizeof buf), "999");
}

/* --- the copy of a session --------------------------------------------------------------- */

static void test_from_session(void **state)
{
    (void)state;
    rt_session rs;
    ld_error err;
    rt_session_make(&rs, hostile, N_HOSTILE);
    ld_report *r = NULL;
    assert_int_equal(ld_report_from_session(rs.s, &hostile_ctx, &r, &err), LD_OK);
    const ld_compare_summary *sum = ld_compare_session_summary(rs.s);
    assert_int_equal(r->n_records, ld_compare_session_count(rs.s));
    assert_int_equal(r->n_records, N_HOSTILE + 1);
    assert_int_equal(r->summary.first_divergent, sum->first_divergent);
    assert_int_equal(r->summary.first_divergent, 2); /* x, then layer 0 passes */
    assert_int_equal(r->summary.n_origins, sum->n_origins);
    assert_false(r->summary.pass);
    for (int i = 0; i < r->n_records; i++) {
        const ld_compare_record *a = &r->records[i], *b = ld_compare_session_record(rs.s, i);
        assert_string_equal(a->name, b->name);
        assert_ptr_not_equal(a->name, b->name);
        assert_int_equal(a->n_inputs, b->n_inputs);
        assert_int_equal(a->metrics.pass, b->metrics.pass);
        assert_true(a->metrics.abs.max == b->metrics.abs.max);
    }
    assert_string_equal(r->context.model_path, hostile_ctx.model_path);
    assert_ptr_not_equal(r->context.model_path, hostile_ctx.model_path);
    assert_null(r->context.ref_source);
    assert_int_equal(r->context.input_seed, 7);
    /* The copy outlives the session. */
    rt_session_free(&rs);
    char *html = rt_render(r, LD_REPORT_HTML, NULL);
    assert_non_null(strstr(html, "y]]&gt;&amp;amp;&lt;"));
    free(html);
    ld_report_free(r);
}

/* --- HTML ---------------------------------------------------------------------------------- */

static void test_html_structure(void **state)
{
    (void)state;
    ld_report *r = rt_report(hostile, N_HOSTILE, &hostile_ctx);
    char *html = rt_render(r, LD_REPORT_HTML, NULL);
    expect_clean_utf8(html);
    assert_memory_equal(html, "<!DOCTYPE html>", 15);
    assert_non_null(strstr(html, "</html>\n"));
    /* verdict, configuration, outputs first */
    assert_non_null(strstr(html, "class=\"verdict fail\">FAIL<"));
    assert_non_null(strstr(html, "fp16 &amp; more"));
    assert_non_null(strstr(html, "<th>Input seed</th><td>7</td>"));
    const char *outputs = strstr(html, "id=\"outputs\""), *charts = strstr(html, "id=\"charts\"");
    assert_non_null(outputs);
    assert_non_null(charts);
    assert_true(outputs < charts);
    /* charts: abs and ulp along the network, the distribution of the worst */
    assert_int_equal(rt_count(html, "<svg "), 3);
    assert_int_equal(rt_count(html, "</svg>"), 3);
    assert_non_null(strstr(html, "id=\"chart-abs\""));
    assert_non_null(strstr(html, "id=\"chart-ulp\""));
    assert_non_null(strstr(html, "id=\"chart-dist\""));
    assert_non_null(strstr(html, "class=\"thr\""));      /* the tolerance line */
    assert_non_null(strstr(html, "class=\"mk-first\"")); /* first divergent marked */
    assert_non_null(strstr(html, "class=\"mk-origin\""));
    assert_non_null(strstr(html, "class=\"pt-fail\""));
    /* one table row per record, with ids the charts link to */
    assert_int_equal(rt_count(html, "<tr id=\"r"), r->n_records);
    assert_non_null(strstr(html, "<tr id=\"r5\""));
    assert_non_null(strstr(html, "href=\"#r3\""));
    /* escaping: the only script element is ours; names show as text */
    assert_int_equal(rt_count(html, "<script"), 1);
    assert_null(strstr(html, "alert(1)</script>"));
    assert_non_null(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert_null(strstr(html, "<b>m<b>"));
    assert_non_null(strstr(html, "&lt;b&gt;m&lt;b&gt;.onnx"));
    assert_null(strstr(html, "Conv\"onmouseover"));
    assert_non_null(strstr(html, "Conv&quot;onmouseover=&quot;x"));
    assert_non_null(strstr(html, "ctrl\xEF\xBF\xBD\xEF\xBF\xBD[31mred\xEF\xBF\xBD\xEF\xBF\xBD"));
    /* nothing loaded from the network */
    assert_null(strstr(html, "src="));
    assert_null(strstr(html, "href=\"http"));
    assert_null(strstr(html, "url("));
    assert_null(strstr(html, "@import"));
    /* printable */
    assert_non_null(strstr(html, "@media print"));
    free(html);
    ld_report_free(r);
}

static void base64(const unsigned char *in, size_t n, char *out)
{
    static const char d[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = d[v >> 18 & 63];
        out[o++] = d[v >> 12 & 63];
        out[o++] = i + 1 < n ? d[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? d[v & 63] : '=';
    }
    out[o] = '\0';
}

/* The page's CSP allows exactly the script it holds: the browser would
 * refuse to run it otherwise (and any other inline script). */
static void test_html_csp(void **state)
{
    (void)state;
    ld_report *r = rt_report(hostile, N_HOSTILE, NULL);
    char *html = rt_render(r, LD_REPORT_HTML, NULL);
    const char *csp = strstr(html, "Content-Security-Policy");
    assert_non_null(csp);
    assert_non_null(strstr(csp, "default-src 'none'"));
    const char *hash = strstr(csp, "script-src 'sha256-");
    assert_non_null(hash);
    hash += strlen("script-src 'sha256-");
    const char *open = strstr(html, "<script>"), *close = strstr(html, "</script>");
    assert_non_null(open);
    assert_non_null(close);
    open += strlen("<script>");
    char hex[65], b64[64];
    unsigned char raw[32];
    assert_int_equal(ld_sha256_hex(open, (size_t)(close - open), hex, NULL), LD_OK);
    for (int i = 0; i < 32; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        raw[i] = (unsigned char)v;
    }
    base64(raw, 32, b64);
    assert_memory_equal(hash, b64, strlen(b64));
    assert_int_equal(hash[strlen(b64)], '\'');
    free(html);
    ld_report_free(r);
}

/* Above 1000 tensors a chart groups neighbours into 1000 columns; the table
 * keeps every row. */
static void test_html_many_layers(void **state)
{
    (void)state;
    enum { N = 2500 };
    rt_layer *layers = calloc(N, sizeof *layers);
    char (*names)[16] = calloc(N, sizeof *names);
    assert_non_null(layers);
    assert_non_null(names);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "t%d", i);
        layers[i] = (rt_layer){names[i], "Add", i == 1700 ? 1.0 : 1e-4, i == N - 1};
    }
    ld_report *r = rt_report(layers, N, NULL);
    ld_render_options opts = {.top = 3};
    char *html = rt_render(r, LD_REPORT_HTML, &opts);
    assert_int_equal(rt_count(html, "<tr id=\"r"), N + 1);
    const char *abs = strstr(html, "id=\"chart-abs\""), *ulp = strstr(html, "id=\"chart-ulp\"");
    assert_non_null(abs);
    assert_non_null(ulp);
    char *chart = strndup(abs, (size_t)(ulp - abs));
    assert_int_equal(rt_count(chart, "class=\"hit\""), 1000);
    assert_non_null(strstr(chart, "class=\"mk-first\""));
    free(chart);
    assert_int_equal(rt_count(html, "class=\"bxr"), 3);
    free(html);
    ld_report_free(r);
    free(layers);
    free(names);
}

static void test_html_nothing_compared(void **state)
{
    (void)state;
    ld_report *r = rt_report(NULL, 0, NULL); /* the graph input only */
    char *html = rt_render(r, LD_REPORT_HTML, NULL);
    assert_non_null(strstr(html, "class=\"verdict pass\">PASS<"));
    assert_non_null(strstr(html, "No graph output was compared."));
    assert_int_equal(rt_count(html, "<tr id=\"r"), 1);
    free(html);
    char *md = rt_render(r, LD_REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "**First divergent layer:** none."));
    free(md);
    ld_report_free(r);
}

/* --- JUnit ------------------------------------------------------------------------------- */

static void test_junit_outputs(void **state)
{
    (void)state;
    ld_report *r = rt_report(hostile, N_HOSTILE, &hostile_ctx);
    char *xml = rt_render(r, LD_REPORT_JUNIT, NULL);
    xml_doc d;
    xml_parse(xml, &d);
    assert_int_equal(d.testcases, 2); /* the graph outputs */
    assert_int_equal(d.failures, 2);
    assert_int_equal(d.errors, 0);
    assert_string_equal(d.suites_tests, "2");
    assert_string_equal(d.suites_failures, "2");
    assert_string_equal(d.suite_failures, "2");
    assert_true(d.properties > 5);
    assert_string_equal(d.first_case_name, "ctrl\xEF\xBF\xBD\xEF\xBF\xBD[31mred\xEF\xBF\xBD"
                                           "\xEF\xBF\xBD");
    assert_non_null(strstr(xml, "classname=\"layerdiff._b_m_b_.outputs\""));
    /* failures carry the metrics */
    assert_non_null(strstr(xml, "elements out of tolerance; max abs 0.5 at [0, 0] (atol "));
    assert_non_null(strstr(xml, "SNR "));
    for (const char *p = xml; (p = strstr(p, "<failure ")) != NULL; p++)
        assert_non_null(strstr(p, "type=\"mismatch\""));
    free(xml);
    ld_report_free(r);
}

static void test_junit_layers(void **state)
{
    (void)state;
    const char *missing[] = {"gone<&>", "bye\x02"};
    ld_report_context ctx = hostile_ctx;
    ctx.n_missing_in_test = 2;
    ctx.missing_in_test = missing;
    ld_report *r = rt_report(hostile, N_HOSTILE, &ctx);
    ld_render_options opts = {.junit_layers = true};
    char *xml = rt_render(r, LD_REPORT_JUNIT, &opts);
    xml_doc d;
    xml_parse(xml, &d);
    assert_int_equal(d.testcases, N_HOSTILE + 1 + 2); /* every record, the missing two */
    assert_int_equal(d.failures, 3);
    assert_int_equal(d.errors, 2);
    assert_string_equal(d.suites_tests, "7");
    assert_non_null(strstr(xml, "name=\"gone&lt;&amp;&gt;\""));
    assert_non_null(strstr(xml, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert_null(strstr(xml, "<script>"));
    free(xml);
    ld_report_free(r);
}

/* --- Markdown ---------------------------------------------------------------------------- */

/* Cells of a GFM table row: unescaped pipes minus one. */
static int md_cells(const char *line, size_t len)
{
    int pipes = 0;
    for (size_t i = 0; i < len; i++)
        if (line[i] == '|' && (i == 0 || line[i - 1] != '\\'))
            pipes++;
    return pipes - 1;
}

static void test_markdown(void **state)
{
    (void)state;
    ld_report *r = rt_report(hostile, N_HOSTILE, &hostile_ctx);
    char *md = rt_render(r, LD_REPORT_MARKDOWN, NULL);
    expect_clean_utf8(md);
    assert_non_null(strstr(md, "## layerdiff: **FAIL**"));
    assert_non_null(strstr(md, "**First divergent layer:** #3 ``pipe\\|tick`s*bold*@team #1``"));
    assert_non_null(strstr(md, "**Origin layers**"));
    assert_non_null(strstr(md, "### Graph outputs"));
    assert_non_null(strstr(md, "### 4 worst layers"));
    assert_non_null(strstr(md, "### Overflow and NaN"));
    assert_non_null(strstr(md, "`<script>alert(1)</script>`")); /* literal in a code span */
    /* every table row has as many cells as its header */
    int expected = -1, rows = 0;
    for (const char *line = md; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len && line[0] == '|') {
            int cells = md_cells(line, len);
            if (expected < 0)
                expected = cells;
            assert_int_equal(cells, expected);
            rows++;
        } else {
            expected = -1;
        }
        line += len + (end ? 1 : 0);
    }
    assert_int_equal(rows, 2 + 2 + 2 + 4); /* two tables: header, rule, rows */
    free(md);
    ld_report_free(r);
}

static void test_markdown_top(void **state)
{
    (void)state;
    rt_layer layers[14];
    char names[14][16];
    for (int i = 0; i < 14; i++) {
        snprintf(names[i], sizeof names[i], "L%d", i);
        layers[i] = (rt_layer){names[i], "Mul", 1e-4 * (i + 1), i == 13};
    }
    ld_report *r = rt_report(layers, 14, NULL);
    char *md = rt_render(r, LD_REPORT_MARKDOWN, NULL);
    assert_non_null(strstr(md, "### 10 worst layers"));
    assert_non_null(strstr(md, "| 15 | `L13`")); /* the worst first */
    assert_null(strstr(md, "`L2`"));            /* the three best are left out */
    free(md);
    ld_render_options opts = {.top = 2};
    md = rt_render(r, LD_REPORT_MARKDOWN, &opts);
    assert_non_null(strstr(md, "### 2 worst layers"));
    free(md);
    ld_report_free(r);
}

/* --- files --------------------------------------------------------------------------------- */

static void test_render_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/ld-render-XXXXXX", path[128], bad[160];
    ld_error err;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/out.html", dir);
    ld_report *r = rt_report(hostile, N_HOSTILE, NULL);
    assert_int_equal(ld_report_render_file(r, LD_REPORT_HTML, NULL, path, &err), LD_OK);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(sb.st_size > 1000);
    snprintf(bad, sizeof bad, "%s/no/such/dir/out.xml", dir);
    assert_int_equal(ld_report_render_file(r, LD_REPORT_JUNIT, NULL, bad, &err), LD_ERR_IO);
    assert_non_null(strstr(err.message, "no/such/dir/out.xml"));
    assert_null(strchr(err.message, '\n'));
    ld_report_free(r);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* nothing else was left behind */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapers),
        cmocka_unit_test(test_from_session),
        cmocka_unit_test(test_html_structure),
        cmocka_unit_test(test_html_csp),
        cmocka_unit_test(test_html_many_layers),
        cmocka_unit_test(test_html_nothing_compared),
        cmocka_unit_test(test_junit_outputs),
        cmocka_unit_test(test_junit_layers),
        cmocka_unit_test(test_markdown),
        cmocka_unit_test(test_markdown_top),
        cmocka_unit_test(test_render_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
