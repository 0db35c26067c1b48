/* Unit tests for the dump additions of the live comparison: several runs
 * written interleaved (open_run / add_tensor_to / close_run, mixed with the
 * one-run API), the run attribute isolated_of, the tensor attribute inputs
 * (the producing node's input names), and reading dumps without them (older
 * files: "" and 0 inputs) or with them written by another tool
 * (fixed-length strings) or malformed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/dump.h"
#include "tests/support/dump_testing.h"

#define SETUP(f) cmocka_unit_test_setup_teardown(f, dt_setup, dt_teardown)

static int open_run(ld_dump_writer *w, const char *name, const char *isolated_of)
{
    ld_dump_run_info run = {.name = name, .backend = "b", .config = "",
                            .isolated_of = isolated_of};
    int handle = -1;
    ld_error err;
    if (ld_dump_writer_open_run(w, &run, &handle, &err) != LD_OK)
        fail_msg("open_run: %s", err.message);
    return handle;
}

static void add_to(ld_dump_writer *w, int run, const char *name, int64_t topo, float value,
                   int n_inputs, const char *const *inputs)
{
    ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 0, NULL, &value);
    ld_dump_tensor_meta m = dt_meta(name, topo, 0);
    m.n_inputs = n_inputs;
    m.inputs = inputs;
    ld_error err;
    if (ld_dump_writer_add_tensor_to(w, run, t, &m, &err) != LD_OK)
        fail_msg("add_tensor_to '%s': %s", name, err.message);
    ld_tensor_destroy(t);
}

static float read_scalar(const ld_dump *d, int run, const char *name)
{
    ld_tensor *t = dt_read_by_name(d, run, name);
    float v = *(const float *)t->data;
    ld_tensor_destroy(t);
    return v;
}

static void test_interleaved_runs(void **state)
{
    dt_fixture *f = *state;
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    int ref = open_run(w, "reference", NULL);
    int test = open_run(w, "emulated", "");
    int iso = open_run(w, "emulated.isolated", "emulated");
    const char *in_a[] = {"x", "w"}, *in_b[] = {"a", "", "bias"};
    /* layer by layer, all three runs at once */
    add_to(w, ref, "a", 0, 1.0f, 2, in_a);
    add_to(w, iso, "a", 0, 1.5f, 2, in_a);
    add_to(w, test, "a", 0, 2.0f, 2, in_a);
    add_to(w, ref, "b", 1, 3.0f, 3, in_b);
    add_to(w, test, "b", 1, 4.0f, 3, in_b);
    ld_error err;
    assert_int_equal(ld_dump_writer_close_run(w, ref, &err), LD_OK);
    /* a closed run takes no more tensors, and cannot be closed twice */
    ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 0, NULL, &(float){0});
    ld_dump_tensor_meta m = dt_meta("c", 2, 0);
    assert_int_equal(ld_dump_writer_add_tensor_to(w, ref, t, &m, &err), LD_ERR_INTERNAL);
    assert_int_equal(ld_dump_writer_add_tensor_to(w, 99, t, &m, &err), LD_ERR_INTERNAL);
    assert_int_equal(ld_dump_writer_close_run(w, ref, &err), LD_ERR_INTERNAL);
    /* a duplicate run name fails the writer for good */
    ld_dump_run_info dup = {.name = "emulated", .backend = "b"};
    int h;
    assert_int_equal(ld_dump_writer_open_run(w, &dup, &h, &err), LD_ERR_INPUT);
    ld_tensor_destroy(t);
    ld_dump_writer_abort(w);
    assert_int_equal(dt_count_dir_entries(f->dir), 0);

    /* again, committed with runs still open */
    w = dt_open_writer(f->path, 0);
    ref = open_run(w, "reference", NULL);
    test = open_run(w, "emulated", NULL);
    iso = open_run(w, "emulated.isolated", "emulated");
    add_to(w, test, "b", 1, 4.0f, 3, in_b);
    add_to(w, ref, "a", 0, 1.0f, 2, in_a);
    add_to(w, iso, "b", 1, 3.5f, 3, in_b);
    add_to(w, test, "a", 0, 2.0f, 2, in_a);
    add_to(w, ref, "b", 1, 3.0f, 0, NULL);
    dt_commit(w);

    ld_dump *d = dt_open_dump(f->path);
    assert_int_equal(ld_dump_run_count(d), 3);
    int r = ld_dump_find_run(d, "reference"), e = ld_dump_find_run(d, "emulated");
    int i = ld_dump_find_run(d, "emulated.isolated");
    assert_true(r >= 0 && e >= 0 && i >= 0);
    assert_string_equal(ld_dump_run(d, r)->isolated_of, "");
    assert_string_equal(ld_dump_run(d, i)->isolated_of, "emulated");
    assert_int_equal(ld_dump_tensor_count(d, e), 2);
    assert_int_equal(ld_dump_tensor_count(d, i), 1);
    /* ordered by topo_index whatever the writing order */
    assert_string_equal(ld_dump_tensor_meta_at(d, e, 0)->name, "a");
    assert_true(read_scalar(d, e, "b") == 4.0f);
    assert_true(read_scalar(d, i, "b") == 3.5f);
    const ld_dump_tensor_meta *mb = ld_dump_tensor_meta_at(d, e, 1);
    assert_int_equal(mb->n_inputs, 3);
    assert_string_equal(mb->inputs[0], "a");
    assert_string_equal(mb->inputs[1], ""); /* an omitted input */
    assert_string_equal(mb->inputs[2], "bias");
    assert_int_equal(ld_dump_tensor_meta_at(d, r, 1)->n_inputs, 0);
    assert_null(ld_dump_tensor_meta_at(d, r, 1)->inputs);
    ld_dump_close(d);
}

/* The one-run API and the handles mix: begin_run's run is a handle too. */
/* The writer reuses the last tensor's dataspace while shapes repeat (each
 * layer's runs share one): a change of any dim, of the rank only ((4) then
 * (4, 1)), to a scalar or to an empty shape, across runs and the model
 * inputs, must still give every dataset its own shape and data. */
static void test_shapes_change_between_tensors(void **state)
{
    dt_fixture *f = *state;
    static const int ranks[] = {2, 2, 2, 1, 2, 0, 2, 3, 2};
    static const int64_t dims[][3] = {{2, 3}, {2, 3}, {3, 2}, {4}, {4, 1}, {0},
                                      {0, 3}, {1, 2, 3}, {2, 3}};
    enum { N = sizeof ranks / sizeof ranks[0] };
    float data[6] = {0};
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    ld_error err;
    const int64_t in_dims[2] = {2, 3};
    ld_tensor *in = dt_make_tensor(LD_DTYPE_FLOAT32, 2, in_dims, data);
    free(in->name);
    in->name = strdup("x");
    assert_int_equal(ld_dump_writer_add_input(w, in, &err), LD_OK);
    ld_tensor_destroy(in);
    int runs[2] = {open_run(w, "a", NULL), open_run(w, "b", NULL)};
    for (int i = 0; i < N; i++)
        for (int r = 0; r < 2; r++) {
            for (int k = 0; k < 6; k++)
                data[k] = (float)(100 * r + 10 * i + k);
            ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, ranks[i], dims[i], data);
            char name[16];
            snprintf(name, sizeof name, "t%d", i);
            ld_dump_tensor_meta m = dt_meta(name, i, 0);
            assert_int_equal(ld_dump_writer_add_tensor_to(w, runs[r], t, &m, &err), LD_OK);
            ld_tensor_destroy(t);
        }
    dt_commit(w);
    ld_dump *d = dt_open_dump(f->path);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < N; i++) {
            char name[16];
            snprintf(name, sizeof name, "t%d", i);
            ld_tensor *t = dt_read_by_name(d, ld_dump_find_run(d, r ? "b" : "a"), name);
            assert_int_equal(t->shape.rank, ranks[i]);
            for (int k = 0; k < ranks[i]; k++)
                assert_int_equal(t->shape.dims[k], dims[i][k]);
            for (int64_t k = 0; k < t->count; k++)
                assert_true(((float *)t->data)[k] == (float)(100 * r + 10 * i + k));
            ld_tensor_destroy(t);
        }
    assert_int_equal(ld_dump_input_meta(d, 0)->shape.rank, 2);
    assert_int_equal(ld_dump_input_meta(d, 0)->shape.dims[1], 3);
    ld_dump_close(d);
}

static void test_current_run_and_handles(void **state)
{
    dt_fixture *f = *state;
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    int side = open_run(w, "side", NULL);
    dt_begin_run(w, "main");
    ld_error err;
    ld_dump_run_info again = {.name = "other", .backend = "b"};
    assert_int_equal(ld_dump_writer_begin_run(w, &again, &err), LD_ERR_INTERNAL);
    const float v = 7;
    ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 0, NULL, &v);
    ld_dump_tensor_meta m = dt_meta("x", 0, 0);
    dt_add(w, t, &m);
    add_to(w, side, "y", 0, 8.0f, 0, NULL);
    assert_int_equal(ld_dump_writer_end_run(w, &err), LD_OK);
    assert_int_equal(ld_dump_writer_add_tensor(w, t, &m, &err), LD_ERR_INTERNAL);
    add_to(w, side, "z", 1, 9.0f, 0, NULL);
    ld_tensor_destroy(t);
    dt_commit(w);
    ld_dump *d = dt_open_dump(f->path);
    assert_true(read_scalar(d, ld_dump_find_run(d, "main"), "x") == 7.0f);
    assert_int_equal(ld_dump_tensor_count(d, ld_dump_find_run(d, "side")), 2);
    ld_dump_close(d);
}

/* --- reading what others wrote --------------------------------------------------------- */

/* Writes attribute `name` on object `object` of the file: n fixed-length
 * ASCII strings of width `width` (n = 0: a scalar int64 instead). */
static void put_attr(const char *path, const char *object, const char *name, int n,
                     const char *const *values, size_t width)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t obj = H5Oopen(file, object, H5P_DEFAULT);
    assert_true(file >= 0 && obj >= 0);
    if (H5Aexists(obj, name) > 0)
        H5Adelete(obj, name);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t space = n ? H5Screate_simple(1, dims, NULL) : H5Screate(H5S_SCALAR);
    if (n) {
        char *buf = calloc((size_t)n, width);
        for (int i = 0; i < n; i++)
            strncpy(buf + (size_t)i * width, values[i], width);
        hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, width);
        hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
        assert_true(H5Awrite(a, type, buf) >= 0);
        H5Aclose(a);
        H5Tclose(type);
        free(buf);
    } else {
        const int64_t v = 3;
        hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
        assert_true(H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0);
        H5Aclose(a);
    }
    H5Sclose(space);
    H5Oclose(obj);
    H5Fclose(file);
}

static void test_older_and_foreign_files(void **state)
{
    dt_fixture *f = *state;
    /* written as before the attributes existed */
    dt_write_small_dump(f->path);
    ld_dump *d = dt_open_dump(f->path);
    assert_string_equal(ld_dump_run(d, 0)->isolated_of, "");
    assert_int_equal(ld_dump_tensor_meta_at(d, 0, 0)->n_inputs, 0);
    ld_dump_close(d);

    /* fixed-length strings, as h5py writes numpy 'S' arrays */
    const char *names[] = {"first", "", "third_input"};
    put_attr(f->path, "/runs/r/x", "inputs", 3, names, 12);
    put_attr(f->path, "/runs/r", "isolated_of", 1, names, 8);
    d = dt_open_dump(f->path);
    const ld_dump_tensor_meta *m = ld_dump_tensor_meta_at(d, 0, 0);
    assert_int_equal(m->n_inputs, 3);
    assert_string_equal(m->inputs[0], "first");
    assert_string_equal(m->inputs[1], "");
    assert_string_equal(m->inputs[2], "third_input");
    assert_string_equal(ld_dump_run(d, 0)->isolated_of, "first");
    ld_dump_close(d);

    /* not strings: refused, naming the dataset */
    put_attr(f->path, "/runs/r/x", "inputs", 0, NULL, 0);
    dt_expect_open_error(f->path, LD_ERR_INPUT,
                         "dataset '/runs/r/x': attribute 'inputs' is not a list of at most");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        SETUP(test_interleaved_runs),
        SETUP(test_current_run_and_handles),
        SETUP(test_shapes_change_between_tensors),
        SETUP(test_older_and_foreign_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
