/* layerdiff tests — helpers for the dump tests (test_dump*.c): a temporary
 * directory per test and short wrappers that fail the test with the
 * library's error message. Any test may use them.
 *
 * Register the fixture with cmocka_unit_test_setup_teardown(test_x,
 * dt_setup, dt_teardown); *state is then a dt_fixture. The teardown removes
 * every file in the directory and the directory itself. */
#ifndef LAYERDIFF_TESTS_DUMP_TESTING_H
#define LAYERDIFF_TESTS_DUMP_TESTING_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/dump.h"

typedef struct dt_fixture {
    char dir[64];   /* mkdtemp directory */
    char path[128]; /* <dir>/d.h5, the dump most tests write */
} dt_fixture;

int dt_setup(void **state);
int dt_teardown(void **state);

bool dt_file_exists(const char *path);
/* Number of entries in dir besides "." and "..". */
int dt_count_dir_entries(const char *dir);

/* New tensor named "t" holding a copy of data (data may be NULL when the
 * shape has no elements). Caller frees with ld_tensor_destroy. */
ld_tensor *dt_make_tensor(ld_dtype dtype, int rank, const int64_t *dims, const void *data);
/* Metadata with node "node", op_type "Op", precision "fp32" (strings static). */
ld_dump_tensor_meta dt_meta(const char *name, int64_t topo, int output);

/* Writer with fixed file info (model "models/m.onnx", sha "ab12", seed 42). */
ld_dump_writer *dt_open_writer(const char *path, int gzip_level);
/* Run with backend "reference" and config "all fp32". */
void dt_begin_run(ld_dump_writer *w, const char *name);
void dt_add(ld_dump_writer *w, const ld_tensor *t, const ld_dump_tensor_meta *m);
void dt_commit(ld_dump_writer *w);
/* A dump with one run "r" holding the float32 scalar "x" = 1. */
/* Writes format version 1 (attributes on every dataset, the layout the
 * reader tests edit); dt_write_small_dump_version chooses the version. */
void dt_write_small_dump(const char *path);
void dt_write_small_dump_version(const char *path, int format_version);
/* dt_open_writer with a format version (0: current). */
ld_dump_writer *dt_open_writer_version(const char *path, int gzip_level, int format_version);

ld_dump *dt_open_dump(const char *path);
/* Reads tensor `name` of run (-1: inputs); checks the tensor is named so. */
ld_tensor *dt_read_by_name(const ld_dump *d, int run, const char *name);
/* Expects ld_dump_open(path) to fail with status and a message containing
 * text and naming path. */
void dt_expect_open_error(const char *path, ld_status status, const char *text);

#endif
