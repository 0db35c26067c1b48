/* layerdiff — helpers shared by the dump writer and reader (private to dump/).
 *
 * HDF5 type construction and matching, attribute I/O with bounded strings,
 * and the translation of HDF5's error stack into one-line layerdiff errors.
 * HDF5 (serial build) is not thread-safe: every dump function must be called
 * from one thread at a time. */
#ifndef LAYERDIFF_DUMP_INTERNAL_H
#define LAYERDIFF_DUMP_INTERNAL_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layerdiff/dump.h"

/* Longest string attribute the reader accepts (a hostile file could claim
 * gigabytes); ONNX names are far shorter. */
#define LD_DUMP_MAX_STRING (1u << 20)

/* Group paths and attribute names of format version 1 (docs/dump-format.md). */
#define LD_DUMP_INPUTS_GROUP "/inputs"
#define LD_DUMP_RUNS_GROUP "/runs"
/* Format version 2: one index table per run, /index/<run link>. */
#define LD_DUMP_INDEX_GROUP "/index"

/* --- dump_isolate.c: HDF5 metadata reads in a child process first --- */

/* Opens and indexes path, then closes it again; run in the child. */
typedef ld_status (*ld_dump_probe_fn)(const char *path, ld_error *err);

/* False when LAYERDIFF_HDF5_ISOLATION=0. */
bool ld_dump_isolation_enabled(void);

/* Runs probe(path) in a forked child with a time limit (LAYERDIFF_HDF5_TIMEOUT,
 * default 120 s). Returns the probe's own status and message, or
 * LD_ERR_INPUT naming path when the child crashed or ran out of time, or
 * LD_ERR_INTERRUPTED when SIGINT/SIGTERM killed it. LD_OK without running
 * anything when isolation is off. */
ld_status ld_dump_probe_isolated(const char *path, ld_dump_probe_fn probe, ld_error *err);

/* Turns off HDF5's automatic printing of its error stack to stderr (errors
 * are reported through ld_error instead). Idempotent. */
void ld_dump_h5_quiet(void);

/* Writes the most useful line of HDF5's current error stack into buf (the
 * OS error text when the failure was a system call, e.g. "No space left on
 * device"), or "HDF5 error" when the stack is empty. Returns buf. */
const char *ld_dump_h5_error_detail(char *buf, size_t size);

/* HDF5 datatype used to store dtype in a file (little-endian): IEEE floats,
 * the half type h5py builds for float16, an 8/7-bit float for bfloat16, and
 * h5py's FALSE/TRUE int8 enum for bool. Return value: new type id the caller
 * closes with H5Tclose, or H5I_INVALID_HID for a dtype without data. */
hid_t ld_dump_h5_file_type(ld_dtype dtype);
/* The same layout in the machine's byte order, for H5Dwrite/H5Dread buffers.
 * Return value: new type id (H5Tclose). */
hid_t ld_dump_h5_mem_type(ld_dtype dtype);

/* True when the stored type `type` holds dtype values that can be read with
 * ld_dump_h5_mem_type(dtype) without changing any value: same class, size,
 * sign, float field layout and bias (either byte order). On false, `why`
 * receives a short description of the stored type. */
bool ld_dump_h5_type_matches(hid_t type, ld_dtype dtype, char *why, size_t why_size);

/* Scalar attributes. Strings are written as variable-length UTF-8 (h5py
 * reads them as str). Return LD_OK or LD_ERR_IO with a message naming the
 * attribute; callers prefix the file and object. */
ld_status ld_dump_attr_write_string(hid_t obj, const char *name, const char *value,
                                    ld_error *err);
ld_status ld_dump_attr_write_int64(hid_t obj, const char *name, int64_t value, ld_error *err);

/* The same with the string type and the scalar dataspace made once: a writer
 * writes a dozen attributes per tensor, thousands of tensors per run. */
typedef struct ld_dump_attr_cache {
    hid_t str_type;   /* variable-length UTF-8 */
    hid_t scalar;
} ld_dump_attr_cache;
ld_status ld_dump_attr_cache_init(ld_dump_attr_cache *c, ld_error *err);
void ld_dump_attr_cache_close(ld_dump_attr_cache *c); /* safe on a failed init */
ld_status ld_dump_attr_put_string(hid_t obj, const ld_dump_attr_cache *c, const char *name,
                                  const char *value, ld_error *err);
ld_status ld_dump_attr_put_int64(hid_t obj, const ld_dump_attr_cache *c, const char *name,
                                 int64_t value, ld_error *err);

/* A 1-D attribute of n variable-length UTF-8 strings (NULL entries are
 * written as ""). n must be > 0. */
ld_status ld_dump_attr_write_strings(hid_t obj, const char *name, int n,
                                     const char *const *values, ld_error *err);
/* Reads such an attribute (1-D or scalar, variable- or fixed-length, at
 * most LD_DUMP_MAX_LIST strings of at most LD_DUMP_MAX_STRING bytes). A
 * missing attribute gives *n = 0, *out = NULL. Return value in *out: new
 * array of new strings; free with ld_dump_strings_free. */
#define LD_DUMP_MAX_LIST 65536
ld_status ld_dump_attr_read_strings(hid_t obj, const char *name, int *n, const char ***out,
                                    ld_error *err);
void ld_dump_strings_free(int n, const char **values);

/* Reads a string attribute (variable- or fixed-length, scalar) of at most
 * LD_DUMP_MAX_STRING bytes. A missing attribute gives *out = NULL and
 * LD_OK when `required` is false, LD_ERR_INPUT otherwise. Return value in
 * *out: new string, freed with free((char *)*out) (const because it usually
 * lands in a const field of the public metadata structs). */
ld_status ld_dump_attr_read_string(hid_t obj, const char *name, bool required,
                                   const char **out, ld_error *err);
/* Reads an integer attribute (any integer type, one element) as int64.
 * *found is set when found is non-NULL; a missing attribute is an error
 * only when found is NULL. */
ld_status ld_dump_attr_read_int64(hid_t obj, const char *name, int64_t *out, bool *found,
                                  ld_error *err);

/* --- dump_index.c: the per-run tensor index of format version 2 --- */

/* One row of /index/<run link> (docs/dump-format.md, "Run index"). The
 * counters' names match ld_dump_counter_names. */
typedef struct ld_dump_index_row {
    char *link, *name, *node, *op_type;
    int64_t topo_index, output_index;
    char *precision, *dtype;
    char *inputs;             /* escaped input names joined by '/' ("" none) */
    int8_t graph_output;      /* 1: the tensor is a graph output */
    int8_t counters;          /* 1: the five counters below are the engine's */
    int64_t overflows, nans_created, underflows, subnormals, partial_overflows;
} ld_dump_index_row;

/* Rows a writer buffers per run (and a reader reads at once); also the
 * table's chunk size. */
#define LD_DUMP_INDEX_BLOCK 256

typedef struct ld_dump_index_types {
    hid_t mem;                /* native ld_dump_index_row */
    hid_t file;               /* packed little-endian */
    hid_t dxpl;               /* transfer properties: conversion buffers of one block */
} ld_dump_index_types;
ld_status ld_dump_index_types_init(ld_dump_index_types *types, ld_error *err);
void ld_dump_index_types_close(ld_dump_index_types *types); /* safe after a failed init */

/* A table being written: rows are buffered and appended a block at a time. */
typedef struct ld_dump_index {
    hid_t dset;
    const ld_dump_index_types *types; /* borrowed */
    ld_dump_index_row *rows;  /* LD_DUMP_INDEX_BLOCK, strings owned */
    int n_rows;
    hsize_t written;
} ld_dump_index;
/* Creates the empty table parent/link (link already escaped). */
ld_status ld_dump_index_create(ld_dump_index *ix, hid_t parent, const char *link, hid_t lcpl,
                               const ld_dump_index_types *types, ld_error *err);
/* Buffers the row of one tensor (strings copied), appending the buffer
 * first when it is full. */
ld_status ld_dump_index_add(ld_dump_index *ix, const char *link, const ld_dump_tensor_meta *m,
                            ld_dtype dtype, ld_error *err);
/* Appends the buffered rows. */
ld_status ld_dump_index_flush(ld_dump_index *ix, ld_error *err);
/* Closes the table, dropping unflushed rows. Safe on a zeroed or closed index
 * whose dset is H5I_INVALID_HID. */
void ld_dump_index_close(ld_dump_index *ix);

/* Reads table parent/link, which must have `expected` rows, calling on_row
 * for each in order; the row's strings (NULL when absent) are valid only
 * during the call. Messages say what is wrong; the caller names the table. */
typedef ld_status (*ld_dump_index_row_fn)(void *user, int i, const ld_dump_index_row *row,
                                          ld_error *err);
ld_status ld_dump_index_read(hid_t parent, const char *link, int expected,
                             ld_dump_index_row_fn on_row, void *user, ld_error *err);
/* Fills m (strings new, owned by m; dtype from the row, shape not set) and
 * *link (new) from row i, bounding every string and checking that the link
 * is the name escaped. On failure what was filled is still the caller's to
 * free. */
ld_status ld_dump_index_row_meta(const ld_dump_index_row *row, int i, ld_dump_tensor_meta *m,
                                 char **link, ld_error *err);

/* The inputs column: escaped names joined by '/' (escaping encodes every
 * '/' in a name, so the separator is unambiguous; no inputs is ""). join
 * returns a new string (free) or NULL out of memory; split returns a new
 * array freed with ld_dump_strings_free, or an error for an entry that is
 * not a canonical escaped name. */
char *ld_dump_join_inputs(int n, const char *const *names);
ld_status ld_dump_split_inputs(const char *joined, int *n, const char ***out, ld_error *err);

/* The counters attribute names, in ld_layer_counters field order. */
extern const char *const ld_dump_counter_names[5];

#endif
