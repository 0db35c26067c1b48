/* layerdiff — HDF5 dumps of model runs (format: docs/dump-format.md).
 *
 * One file holds the model inputs and one group per backend run; one dataset
 * per tensor with its native dtype and shape. Writing streams one tensor at
 * a time into a temporary file that is renamed over the final path only by
 * ld_dump_writer_commit(), so an interrupted run never leaves a file that
 * looks complete. */
#ifndef LAYERDIFF_DUMP_H
#define LAYERDIFF_DUMP_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/numerics.h"
#include "layerdiff/round.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LD_DUMP_FORMAT_NAME "layerdiff-dump"
/* 2: run tensors are described by one index table per run instead of a
 * dozen attributes per dataset (docs/dump-format.md); version 1 files are
 * still read. */
#define LD_DUMP_FORMAT_VERSION 2

/* File-level attributes. Strings are borrowed by the writer, owned by the
 * reader's dump object. */
typedef struct ld_dump_file_info {
    const char *model_path;    /* as given on the command line */
    const char *model_sha256;  /* 64 lower-case hex digits, or NULL */
    const char *tool_version;  /* filled by the writer when NULL */
    const char *created;       /* ISO 8601 UTC; filled by the writer when NULL */
    int64_t input_seed;        /* -1 when inputs were loaded, not generated */
    int format_version;        /* reader only */
} ld_dump_file_info;

/* Per-run attributes. */
typedef struct ld_dump_run_info {
    const char *name;          /* run/group name, e.g. "reference", "emulated" */
    const char *backend;       /* backend name */
    const char *config;        /* free-form description of the precision config, or NULL
                                  (the writer stores NULL as "") */
    const char *isolated_of;   /* this run holds each layer of run `isolated_of` computed on
                                  the reference run's inputs (isolated error); NULL or "" for
                                  an ordinary run. Absent in older dumps (reader: "") */
} ld_dump_run_info;

/* ld_layer_counters (per-layer engine counters) is defined in numerics.h. */

/* Per-tensor attributes. Strings borrowed by the writer, owned by the reader. */
typedef struct ld_dump_tensor_meta {
    const char *name;          /* the exact original tensor name */
    const char *node;          /* producing node name ("" for inputs) */
    const char *op_type;       /* producing op type ("" for inputs) */
    int64_t topo_index;        /* producing node's topological index (-1 for inputs) */
    int output_index;          /* which output of the node (0 for inputs) */
    const char *precision;     /* "fp32", "fp16", ... the layer ran in ("" unknown) */
    ld_layer_counters counters;
    int n_inputs;              /* the producing node's input tensor names ("" = omitted input);
                                  0 for graph inputs and in dumps written before they were
                                  stored */
    const char *const *inputs;
    int graph_output;          /* writer: nonzero when the tensor is one of the graph's outputs.
                                  reader: 1 or 0; -1 (unknown) in dumps of format version 1
                                  and for model inputs */
    /* reader only: */
    ld_dtype dtype;
    ld_shape shape;
} ld_dump_tensor_meta;

typedef struct ld_dump_writer ld_dump_writer;

typedef struct ld_dump_writer_options {
    int gzip_level;            /* 0 = uncompressed (default); 1..9 = shuffle+gzip */
    bool sync;                 /* fsync the file (and its directory) at commit, so a
                                  power loss cannot leave a renamed but unwritten file;
                                  off by default (commit then waits for the disk) */
    int format_version;        /* 0: LD_DUMP_FORMAT_VERSION (default); 1: the older layout
                                  (attributes on every dataset, no index tables, no
                                  graph-output flag), for compatibility tests */
} ld_dump_writer_options;

/* Opens a writer for `path` (writes go to a temporary file beside it). opts
 * may be NULL. Return value: new writer; finish it with commit or abort.
 * After any failed call the writer stays failed: later calls return the
 * first error again and commit removes the temporary file. */
ld_status ld_dump_writer_open(ld_dump_writer **out, const char *path,
                              const ld_dump_file_info *info,
                              const ld_dump_writer_options *opts, ld_error *err);
/* The temporary file being written ("<path>.tmp-<pid>-<random>"), for
 * messages and for cleanup from a signal handler's caller. Borrowed; valid
 * until commit or abort. */
const char *ld_dump_writer_temp_path(const ld_dump_writer *w);
/* Writes a model input tensor into /inputs. */
ld_status ld_dump_writer_add_input(ld_dump_writer *w, const ld_tensor *t, ld_error *err);
/* Starts a run group; tensors written after it belong to that run. */
ld_status ld_dump_writer_begin_run(ld_dump_writer *w, const ld_dump_run_info *run,
                                   ld_error *err);
/* Writes one tensor of the current run (meta->name is the key; t's own
 * name is ignored). Fails on a duplicate name in the run. */
ld_status ld_dump_writer_add_tensor(ld_dump_writer *w, const ld_tensor *t,
                                    const ld_dump_tensor_meta *meta, ld_error *err);
ld_status ld_dump_writer_end_run(ld_dump_writer *w, ld_error *err);

/* Runs written interleaved (layerdiff run writes the reference, the test
 * and the isolated run of each layer as it is computed): open_run starts a
 * run group and gives a handle; tensors go to any open run in any order;
 * close_run ends one (commit closes those still open). begin_run /
 * add_tensor / end_run above are open_run / add_tensor_to / close_run on one
 * "current" run and can be mixed with these. */
ld_status ld_dump_writer_open_run(ld_dump_writer *w, const ld_dump_run_info *run, int *handle,
                                  ld_error *err);
ld_status ld_dump_writer_add_tensor_to(ld_dump_writer *w, int handle, const ld_tensor *t,
                                       const ld_dump_tensor_meta *meta, ld_error *err);
ld_status ld_dump_writer_close_run(ld_dump_writer *w, int handle, ld_error *err);
/* Closes and renames the temporary file to its final path. Frees w whatever
 * the outcome; on failure the temporary file is removed. */
ld_status ld_dump_writer_commit(ld_dump_writer *w, ld_error *err);
/* Closes, removes the temporary file, frees w. NULL is a no-op. */
void ld_dump_writer_abort(ld_dump_writer *w);

typedef struct ld_dump ld_dump;

/* Opens a dump for reading and indexes it (names, metadata; no tensor data).
 * Fails with a clear error on a file that is not a layerdiff dump, has a
 * newer format version or malformed metadata. Return value: new.
 * HDF5 is not thread-safe: use dumps (readers and writers) from one thread
 * at a time. */
ld_status ld_dump_open(ld_dump **out, const char *path, ld_error *err);
void ld_dump_close(ld_dump *d);

const ld_dump_file_info *ld_dump_info(const ld_dump *d);
int ld_dump_input_count(const ld_dump *d);
/* Borrowed metadata of input i (declaration order). */
const ld_dump_tensor_meta *ld_dump_input_meta(const ld_dump *d, int i);
int ld_dump_run_count(const ld_dump *d);
/* Borrowed; NULL when i is out of range. */
const ld_dump_run_info *ld_dump_run(const ld_dump *d, int i);
/* Run index by name, or -1. */
int ld_dump_find_run(const ld_dump *d, const char *name);
int ld_dump_tensor_count(const ld_dump *d, int run);
/* Borrowed metadata of tensor i of a run, tensors ordered by (topo_index,
 * output_index). */
const ld_dump_tensor_meta *ld_dump_tensor_meta_at(const ld_dump *d, int run, int i);
/* Index of a tensor in a run by its original name, or -1. */
int ld_dump_find_tensor(const ld_dump *d, int run, const char *name);
/* Reads tensor i of run (run = -1: input i) into a new tensor named after
 * the original name. Caller frees with ld_tensor_destroy. */
ld_status ld_dump_read_tensor(const ld_dump *d, int run, int i, ld_tensor **out,
                              ld_error *err);

/* Escapes an arbitrary tensor name into an HDF5 link name and back
 * (docs/dump-format.md, "Link names"): '%', '/', a leading '.', control bytes
 * and bytes that are not well-formed UTF-8 become "%XX"; "" becomes "%00".
 * Injective, so distinct names never share a link. Unescape returns NULL for
 * anything escape would not produce. Return value: new string (free()), NULL
 * on a NULL argument or out of memory. */
char *ld_dump_escape_name(const char *name);
char *ld_dump_unescape_name(const char *escaped);

#ifdef __cplusplus
}
#endif
#endif
