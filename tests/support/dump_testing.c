/* layerdiff tests — dump test helpers (see dump_testing.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/dump_testing.h"

int dt_setup(void **state)
{
    dt_fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/ld-test-dump-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return -1;
    }
    snprintf(f->path, sizeof f->path, "%s/d.h5", f->dir);
    *state = f;
    return 0;
}

int dt_teardown(void **state)
{
    dt_fixture *f = *state;
    DIR *d = opendir(f->dir);
    char p[512];
    for (struct dirent *e; d && (e = readdir(d));) {
        snprintf(p, sizeof p, "%s/%s", f->dir, e->d_name);
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(f->dir);
    free(f);
    return 0;
}

bool dt_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int dt_count_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

ld_tensor *dt_make_tensor(ld_dtype dtype, int rank, const int64_t *dims, const void *data)
{
    ld_shape shape;
    ld_error err;
    ld_tensor *t = NULL;
    assert_int_equal(ld_shape_set(&shape, rank, dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, "t", dtype, &shape, &err), LD_OK);
    if (t->nbytes)
        memcpy(t->data, data, t->nbytes);
    return t;
}

ld_dump_tensor_meta dt_meta(const char *name, int64_t topo, int output)
{
    return (ld_dump_tensor_meta){.name = name, .node = "node", .op_type = "Op",
                                 .topo_index = topo, .output_index = output,
                                 .precision = "fp32"};
}

ld_dump_writer *dt_open_writer(const char *path, int gzip_level)
{
    return dt_open_writer_version(path, gzip_level, 0);
}

ld_dump_writer *dt_open_writer_version(const char *path, int gzip_level, int format_version)
{
    ld_dump_file_info info = {.model_path = "models/m.onnx", .model_sha256 = "ab12",
                              .input_seed = 42};
    ld_dump_writer_options opts = {.gzip_level = gzip_level, .format_version = format_version};
    ld_dump_writer *w = NULL;
    ld_error err;
    if (ld_dump_writer_open(&w, path, &info, &opts, &err) != LD_OK)
        fail_msg("open writer: %s", err.message);
    return w;
}

void dt_begin_run(ld_dump_writer *w, const char *name)
{
    ld_dump_run_info run = {.name = name, .backend = "reference", .config = "all fp32"};
    ld_error err;
    if (ld_dump_writer_begin_run(w, &run, &err) != LD_OK)
        fail_msg("begin_run: %s", err.message);
}

void dt_add(ld_dump_writer *w, const ld_tensor *t, const ld_dump_tensor_meta *m)
{
    ld_error err;
    if (ld_dump_writer_add_tensor(w, t, m, &err) != LD_OK)
        fail_msg("add_tensor '%s': %s", m->name, err.message);
}

void dt_commit(ld_dump_writer *w)
{
    ld_error err;
    if (ld_dump_writer_commit(w, &err) != LD_OK)
        fail_msg("commit: %s", err.message);
}

void dt_write_small_dump(const char *path)
{
    dt_write_small_dump_version(path, 1);
}

void dt_write_small_dump_version(const char *path, int format_version)
{
    ld_dump_writer *w = dt_open_writer_version(path, 0, format_version);
    dt_begin_run(w, "r");
    const float v = 1.0f;
    ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 0, NULL, &v);
    ld_dump_tensor_meta m = dt_meta("x", 0, 0);
    dt_add(w, t, &m);
    ld_tensor_destroy(t);
    dt_commit(w);
}

ld_dump *dt_open_dump(const char *path)
{
    ld_dump *d = NULL;
    ld_error err;
    if (ld_dump_open(&d, path, &err) != LD_OK)
        fail_msg("open dump: %s", err.message);
    return d;
}

ld_tensor *dt_read_by_name(const ld_dump *d, int run, const char *name)
{
    int i = ld_dump_find_tensor(d, run, name);
    if (i < 0)
        fail_msg("tensor '%s' not found", name);
    ld_tensor *t = NULL;
    ld_error err;
    if (ld_dump_read_tensor(d, run, i, &t, &err) != LD_OK)
        fail_msg("read '%s': %s", name, err.message);
    assert_string_equal(t->name, name);
    return t;
}

void dt_expect_open_error(const char *path, ld_status status, const char *text)
{
    ld_dump *d = NULL;
    ld_error err;
    ld_status st = ld_dump_open(&d, path, &err);
    if (st == LD_OK) {
        ld_dump_close(d);
        fail_msg("opening %s succeeded, expected an error with '%s'", path, text);
    }
    assert_null(d);
    if (st != status || !strstr(err.message, text))
        fail_msg("got status %d '%s', expected %d with '%s'", st, err.message, status, text);
    assert_non_null(strstr(err.message, path)); /* names the file */
}
