/* layerdiff CLI — formatting helpers (see format.h). */
#include "cli/format.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/term.h"
#include "core/utf8.h"
#include "layerdiff/memory.h"

/* --- numbers and shapes ------------------------------------------------------ */

char *ld_fmt_count(int64_t n, char *buf, size_t size)
{
    char digits[32];
    /* Work on the magnitude as unsigned so INT64_MIN formats too. */
    uint64_t mag = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n;
    int len = snprintf(digits, sizeof digits, "%" PRIu64, mag);
    char grouped[48];
    size_t g = 0;
    if (n < 0)
        grouped[g++] = '-';
    for (int i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            grouped[g++] = ',';
        grouped[g++] = digits[i];
    }
    grouped[g] = '\0';
    snprintf(buf, size, "%s", grouped);
    return buf;
}

char *ld_fmt_bytes(int64_t n, char *buf, size_t size)
{
    if (n >= 0)
        return ld_memory_format((uint64_t)n, buf, size); /* one formatter for sizes */
    snprintf(buf, size, "%" PRId64 " B", n);
    return buf;
}

/* Appends s to buf at *pos, never overflowing; truncated output stays terminated. */
static void append(char *buf, size_t size, size_t *pos, const char *s)
{
    if (*pos >= size)
        return;
    int n = snprintf(buf + *pos, size - *pos, "%s", s);
    if (n > 0)
        *pos += (size_t)n < size - *pos ? (size_t)n : size - *pos - 1;
}

char *ld_fmt_type_shape(const ld_type_info *type, char *buf, size_t size)
{
    size_t pos = 0;
    buf[0] = '\0';
    if (!type->has_shape) {
        append(buf, size, &pos, "unknown");
        return buf;
    }
    if (type->rank == 0) {
        append(buf, size, &pos, "scalar");
        return buf;
    }
    for (int i = 0; i < type->rank; i++) {
        char dim[64];
        const ld_dim *d = &type->dims[i];
        if (d->param && *d->param)
            snprintf(dim, sizeof dim, "%s", d->param);
        else if (d->value >= 0)
            snprintf(dim, sizeof dim, "%" PRId64, d->value);
        else
            snprintf(dim, sizeof dim, "?");
        if (i > 0)
            append(buf, size, &pos, " x ");
        append(buf, size, &pos, dim);
    }
    return buf;
}

char *ld_fmt_shape(const ld_shape *shape, char *buf, size_t size)
{
    size_t pos = 0;
    buf[0] = '\0';
    if (shape->rank == 0) {
        append(buf, size, &pos, "scalar");
        return buf;
    }
    for (int i = 0; i < shape->rank; i++) {
        char dim[32];
        snprintf(dim, sizeof dim, "%" PRId64, shape->dims[i]);
        if (i > 0)
            append(buf, size, &pos, " x ");
        append(buf, size, &pos, dim);
    }
    return buf;
}

/* --- aligned text tables -------------------------------------------------------- */

struct ld_table {
    int n_cols;
    size_t n_cells, cap;
    char **cells;
    bool *right; /* n_cols */
};

ld_table *ld_table_create(int n_cols)
{
    ld_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->n_cols = n_cols;
    t->right = calloc((size_t)n_cols, sizeof *t->right);
    if (!t->right) {
        free(t);
        return NULL;
    }
    return t;
}

void ld_table_destroy(ld_table *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n_cells; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t->right);
    free(t);
}

void ld_table_align_right(ld_table *t, int col)
{
    if (col >= 0 && col < t->n_cols)
        t->right[col] = true;
}

ld_status ld_table_add(ld_table *t, const char *cell, ld_error *err)
{
    if (t->n_cells == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **cells = realloc(t->cells, cap * sizeof *cells);
        if (!cells)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory building a table");
        t->cells = cells;
        t->cap = cap;
    }
    char *copy = strdup(cell ? cell : "");
    if (!copy)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory building a table");
    for (unsigned char *p = (unsigned char *)copy; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
    t->cells[t->n_cells++] = copy;
    return LD_OK;
}

ld_status ld_table_addf(ld_table *t, ld_error *err, const char *fmt, ...)
{
    char cell[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cell, sizeof cell, fmt, ap);
    va_end(ap);
    return ld_table_add(t, cell, err);
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t display_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

void ld_table_print(const ld_table *t, FILE *out, const char *indent, bool header, bool color)
{
    size_t widths[32] = {0};
    int n_cols = t->n_cols < 32 ? t->n_cols : 32;
    for (size_t i = 0; i < t->n_cells; i++) {
        int col = (int)(i % (size_t)t->n_cols);
        size_t w = display_width(t->cells[i]);
        if (col < n_cols && w > widths[col])
            widths[col] = w;
    }
    for (size_t i = 0; i < t->n_cells; i++) {
        int col = (int)(i % (size_t)t->n_cols);
        bool bold = header && i < (size_t)t->n_cols;
        if (col == 0)
            fprintf(out, "%s%s", indent, bold ? ld_term_style_code(color, LD_STYLE_BOLD) : "");
        bool last = col == t->n_cols - 1 || i == t->n_cells - 1;
        size_t pad = col < n_cols ? widths[col] - display_width(t->cells[i]) : 0;
        if (t->right[col])
            fprintf(out, "%*s%s", (int)pad, "", t->cells[i]);
        else
            fprintf(out, "%s%*s", t->cells[i], last ? 0 : (int)pad, "");
        if (last)
            fprintf(out, "%s\n", bold ? ld_term_style_code(color, LD_STYLE_RESET) : "");
        else
            fputs("  ", out);
    }
}

/* --- JSON -------------------------------------------------------------------------- */

json_t *ld_json_string(const char *s)
{
    if (!s)
        return json_string("");
    json_t *j = json_string(s);
    if (j)
        return j;
    /* Not valid UTF-8 (ONNX names are bytes): replace bad bytes with U+FFFD. */
    char *fixed = ld_utf8_sanitize(s);
    if (!fixed)
        return NULL;
    j = json_string(fixed);
    free(fixed);
    return j;
}

json_t *ld_json_type_shape(const ld_type_info *type)
{
    if (!type->has_shape)
        return json_null();
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    for (int i = 0; i < type->rank; i++) {
        const ld_dim *d = &type->dims[i];
        json_t *dim;
        if (d->param && *d->param)
            dim = ld_json_string(d->param);
        else if (d->value >= 0)
            dim = json_integer(d->value);
        else
            dim = json_null();
        if (!ld_json_append(arr, dim)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

json_t *ld_json_shape(const ld_shape *shape)
{
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    for (int i = 0; i < shape->rank; i++) {
        if (!ld_json_append(arr, json_integer(shape->dims[i]))) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

bool ld_json_set(json_t *obj, const char *key, json_t *value)
{
    if (!value)
        return false;
    return json_object_set_new(obj, key, value) == 0;
}

bool ld_json_append(json_t *array, json_t *value)
{
    if (!value)
        return false;
    return json_array_append_new(array, value) == 0;
}

ld_status ld_json_print(FILE *out, const json_t *root, ld_error *err)
{
    if (json_dumpf(root, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 ||
        fputc('\n', out) == EOF)
        return ld_error_set(err, LD_ERR_IO, "cannot write JSON output");
    return LD_OK;
}

/* --- shell words ---------------------------------------------------------------------- */

char *ld_cli_shell_quote(const char *s)
{
    bool safe = *s != '\0';
    for (const char *p = s; *p && safe; p++)
        safe = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                      "@%+=:,./-_", *p) != NULL;
    if (safe)
        return strdup(s);
    size_t len = 3;
    for (const char *p = s; *p; p++)
        len += *p == '\'' ? 4 : 1;
    char *out = malloc(len), *o = out;
    if (!out)
        return NULL;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return out;
}

char *ld_cli_command_line(int argc, char **argv)
{
    size_t len = strlen("layerdiff") + 1, used;
    char *line = malloc(len);
    if (!line)
        return NULL;
    used = (size_t)sprintf(line, "layerdiff");
    for (int i = 0; i < argc; i++) {
        char *word = ld_cli_shell_quote(argv[i]);
        char *grown = word ? realloc(line, used + strlen(word) + 2) : NULL;
        if (!grown) {
            free(word);
            free(line);
            return NULL;
        }
        line = grown;
        used += (size_t)sprintf(line + used, " %s", word);
        free(word);
    }
    return line;
}
