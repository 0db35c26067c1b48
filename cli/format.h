/* layerdiff CLI — text and JSON formatting helpers shared by subcommands:
 * aligned tables, human-readable numbers, shapes, and JSON output. */
#ifndef LAYERDIFF_CLI_FORMAT_H
#define LAYERDIFF_CLI_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/tensor.h"

/* --- numbers and shapes ------------------------------------------------------ */

/* "1,234,567" into buf. Returns buf. */
char *ld_fmt_count(int64_t n, char *buf, size_t size);
/* "512 B", "36.1 KiB", "2.0 MiB" (1024-based) into buf. Returns buf. */
char *ld_fmt_bytes(int64_t n, char *buf, size_t size);
/* A declared shape as "batch x 16 x 64": symbolic dims by name, unknown
 * dims "?", rank 0 "scalar", no shape at all "unknown". Returns buf. */
char *ld_fmt_type_shape(const ld_type_info *type, char *buf, size_t size);
/* A concrete shape as "1 x 3 x 32 x 32" ("scalar" for rank 0). Returns buf. */
char *ld_fmt_shape(const ld_shape *shape, char *buf, size_t size);

/* --- aligned text tables -------------------------------------------------------- */

/* Cells are added left to right, rows wrap every n_cols cells. Cells are
 * copied, with control characters replaced by '?' so a hostile model name
 * cannot drive the terminal. */
typedef struct ld_table ld_table;

/* Return value: new table (free with ld_table_destroy), NULL when out of memory. */
ld_table *ld_table_create(int n_cols);
void ld_table_destroy(ld_table *t);
/* Right-aligns column col (numbers). */
void ld_table_align_right(ld_table *t, int col);
ld_status ld_table_add(ld_table *t, const char *cell, ld_error *err);
ld_status ld_table_addf(ld_table *t, ld_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints each row on its own line after `indent`, columns two spaces apart;
 * with `header`, row 0 is printed in bold when color is on. */
void ld_table_print(const ld_table *t, FILE *out, const char *indent, bool header, bool color);

/* --- JSON -------------------------------------------------------------------------- */

/* A JSON string for s: invalid UTF-8 bytes become U+FFFD, NULL becomes "".
 * Return value: new reference, NULL only when out of memory. */
json_t *ld_json_string(const char *s);
/* Declared shape as a JSON array of ints (known dims), strings (symbolic)
 * and nulls (unknown); JSON null when the model gives no shape. New reference. */
json_t *ld_json_type_shape(const ld_type_info *type);
/* Concrete shape as an array of ints. New reference. */
json_t *ld_json_shape(const ld_shape *shape);
/* obj[key] = value, stealing value; returns false (and frees value) when
 * value is NULL or the set fails, so builders can chain with &&. */
bool ld_json_set(json_t *obj, const char *key, json_t *value);
bool ld_json_append(json_t *array, json_t *value);
/* Prints root indented, with a trailing newline. */
ld_status ld_json_print(FILE *out, const json_t *root, ld_error *err);

/* A shell word for s: as is when it holds only safe characters, else in
 * single quotes. Return value: new string, NULL when out of memory. */
char *ld_cli_shell_quote(const char *s);
/* "layerdiff" and argv (the subcommand first) as one line of shell words, to
 * reproduce the command (reports). New string, NULL when out of memory. */
char *ld_cli_command_line(int argc, char **argv);

#endif
