/* layerdiff — helpers shared by backends/inputs.c and backends/inputs_load.c
 * (private to backends/). */
#ifndef LAYERDIFF_BACKENDS_INPUTS_INTERNAL_H
#define LAYERDIFF_BACKENDS_INPUTS_INTERNAL_H

#include <stddef.h>

#include "layerdiff/inputs.h"

/* "1x3x224x224" or "scalar" -> shape; LD_ERR_USAGE (no message) when malformed. */
ld_status ld_inputs_parse_dims(const char *text, ld_shape *shape);

/* Frees n strings and the array. */
void ld_inputs_free_strings(char **items, int n);

/* A declared shape as "batchx3x224x224" ("?" unknown dims, "scalar", "unknown"). */
char *ld_inputs_format_declared(const ld_type_info *type, char *buf, size_t size);

/* "'a', 'b'" (or "none") into buf. Returns buf. */
char *ld_inputs_list_names(const ld_graph *g, char *buf, size_t size);

/* Loads every input from opts->sources into loaded[g->n_inputs] (new
 * tensors, named as the inputs, dtypes checked against the model). */
ld_status ld_inputs_load(const ld_graph *g, const ld_inputs_options *opts, ld_tensor **loaded,
                         ld_error *err);

#endif
