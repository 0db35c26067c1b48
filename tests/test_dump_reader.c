/* Unit tests for the dump reader's handling of bad files: not HDF5, not a
 * dump, newer format, missing or mistyped attributes, types that contradict
 * the dtype attribute, hostile layouts. Each error must be one clear line
 * naming the file (and the dataset). */
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

/* Applies an edit to an attribute of `object` in the file at path:
 * deletes it and, when value is non-NULL, rewrites it as a string
 * (string_value) or int64. */
static void edit_attr(const char *path, const char *object, const char *attr,
                      const char *string_value, const int64_t *int_value)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(file >= 0);
    hid_t obj = H5Oopen(file, object, H5P_DEFAULT);
    assert_true(obj >= 0);
    if (H5Aexists(obj, attr) > 0)
        assert_true(H5Adelete(obj, attr) >= 0);
    hid_t space = H5Screate(H5S_SCALAR);
    if (string_value) {
        hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, strlen(string_value) + 1);
        hid_t a = H5Acreate2(obj, attr, type, space, H5P_DEFAULT, H5P_DEFAULT);
        assert_true(H5Awrite(a, type, string_value) >= 0);
        H5Aclose(a);
        H5Tclose(type);
    } else if (int_value) {
        hid_t a = H5Acreate2(obj, attr, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT);
        assert_true(H5Awrite(a, H5T_NATIVE_INT64, int_value) >= 0);
        H5Aclose(a);
    }
    H5Sclose(space);
    H5Oclose(obj);
    assert_true(H5Fclose(file) >= 0);
}

static void test_reader_errors(void **state)
{
    dt_fixture *f = *state;
    char missing[256];
    snprintf(missing, sizeof missing, "%s/missing.h5", f->dir);
    dt_expect_open_error(missing, LD_ERR_IO, "No such file or directory");

    FILE *text = fopen(f->path, "w");
    fputs("this is not HDF5\n", text);
    fclose(text);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "not an HDF5 file");

    hid_t file = H5Fcreate(f->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(file);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "not a layerdiff dump");

    const int64_t v99 = 99, v0 = 0;
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/", "format_version", NULL, &v99);
    dt_expect_open_error(f->path, LD_ERR_UNSUPPORTED,
                      "was written by a newer layerdiff (format version 99 > 2)");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/", "format_version", NULL, &v0);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "invalid format version 0");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/", "format", "something-else", NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "not a layerdiff dump");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/", "complete", NULL, NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "incomplete dump");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/", "created", NULL, NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "missing attribute 'created'");

    /* Fixed-length ASCII strings (other writers) are read as well. */
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/runs/r/x", "op_type", "Relu", NULL);
    ld_dump *d = dt_open_dump(f->path);
    assert_string_equal(ld_dump_tensor_meta_at(d, 0, 0)->op_type, "Relu");
    ld_dump_close(d);

    dt_write_small_dump(f->path);
    edit_attr(f->path, "/runs/r/x", "dtype", "int32", NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT,
                      "dataset '/runs/r/x': holds a 4-byte float with 8 exponent and 23 "
                      "mantissa bits, bias 127, but its dtype attribute says int32");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/runs/r/x", "dtype", "float16", NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "but its dtype attribute says float16");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/runs/r/x", "dtype", "complex64", NULL);
    dt_expect_open_error(f->path, LD_ERR_UNSUPPORTED, "unknown dtype attribute 'complex64'");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/runs/r/x", "node", NULL, NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "dataset '/runs/r/x': missing attribute 'node'");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/runs/r/x", "topo_index", "3", NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "attribute 'topo_index' is not an integer");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/runs/r/x", "name", NULL, &v0);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "attribute 'name' is not a string");
    dt_write_small_dump(f->path);
    edit_attr(f->path, "/runs/r", "backend", NULL, NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "run group '/runs/r': missing attribute 'backend'");

    /* An external link must not make the reader open another file. */
    dt_write_small_dump(f->path);
    file = H5Fopen(f->path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Lcreate_external("/etc/other.h5", "/x", file, "/runs/r/ext", H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(file);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "soft or external link");
}

/* Adds float32 dataset `link` (a path) with the given shape, holding `data`
 * (never written when NULL), and a complete set of attributes: name `name`,
 * topo_index `topo`, the other strings empty. */
static void add_raw_dataset(const char *path, const char *link, const char *name, int64_t topo,
                            int rank, const hsize_t *dims, const float *data)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t dset = H5Dcreate2(file, link, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT);
    assert_true(dset >= 0);
    if (data)
        assert_true(H5Dwrite(dset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(dset);
    H5Sclose(space);
    H5Fclose(file);
    const int64_t zero = 0;
    const char *strings[][2] = {{"name", name}, {"node", ""}, {"op_type", ""},
                                {"precision", ""}, {"dtype", "float32"}};
    for (int i = 0; i < 5; i++)
        edit_attr(path, link, strings[i][0], strings[i][1], NULL);
    edit_attr(path, link, "topo_index", NULL, &topo);
    edit_attr(path, link, "output_index", NULL, &zero);
}

/* A dump made with plain HDF5 calls, as another tool (or h5py) would: no
 * creation-order index, fixed-length ASCII strings, 32-bit integers. */
static void test_reader_accepts_other_writers(void **state)
{
    dt_fixture *f = *state;
    hid_t file = H5Fcreate(f->path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(H5Gcreate2(file, "/inputs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Gclose(H5Gcreate2(file, "/runs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Gclose(H5Gcreate2(file, "/runs/r", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Fclose(file);
    const int64_t one = 1, seed = 5;
    const char *root_strings[][2] = {{"format", "layerdiff-dump"}, {"model_path", "m.onnx"},
                                     {"tool_version", "other"}, {"created", "2020"}};
    for (int i = 0; i < 4; i++)
        edit_attr(f->path, "/", root_strings[i][0], root_strings[i][1], NULL);
    edit_attr(f->path, "/", "format_version", NULL, &one);
    edit_attr(f->path, "/", "complete", NULL, &one);
    edit_attr(f->path, "/", "input_seed", NULL, &seed);
    edit_attr(f->path, "/runs/r", "name", "r", NULL);
    edit_attr(f->path, "/runs/r", "backend", "b", NULL);
    const hsize_t n = 2;
    const float x[] = {1.5f, -2.0f};
    /* link names in name order differ from the topological order */
    add_raw_dataset(f->path, "/runs/r/a", "late", 9, 1, &n, x);
    add_raw_dataset(f->path, "/runs/r/b", "early", 1, 1, &n, x);

    ld_dump *d = dt_open_dump(f->path);
    assert_int_equal(ld_dump_info(d)->input_seed, 5);
    assert_null(ld_dump_run(d, 0)->config);
    assert_int_equal(ld_dump_tensor_count(d, 0), 2);
    assert_string_equal(ld_dump_tensor_meta_at(d, 0, 0)->name, "early");
    assert_string_equal(ld_dump_tensor_meta_at(d, 0, 1)->name, "late");
    ld_tensor *t = dt_read_by_name(d, 0, "late");
    assert_memory_equal(t->data, x, sizeof x);
    ld_tensor_destroy(t);
    ld_dump_close(d);
}

static void test_reader_hostile_layouts(void **state)
{
    dt_fixture *f = *state;
    hsize_t dims[17];
    for (int i = 0; i < 17; i++)
        dims[i] = 1;
    dt_write_small_dump(f->path);
    add_raw_dataset(f->path, "/runs/r/deep", "raw", 0, 17, dims, NULL);
    dt_expect_open_error(f->path, LD_ERR_UNSUPPORTED, "dataset '/runs/r/deep': has rank 17");

    /* Metadata fine, but the data was never stored. */
    dt_write_small_dump(f->path);
    dims[0] = 1000;
    add_raw_dataset(f->path, "/runs/r/unwritten", "raw", 0, 1, dims, NULL);
    ld_dump *d = dt_open_dump(f->path);
    ld_tensor *t = NULL;
    ld_error err;
    int i = ld_dump_find_tensor(d, 0, "raw");
    assert_int_equal(ld_dump_read_tensor(d, 0, i, &t, &err), LD_ERR_INPUT);
    assert_null(t);
    assert_non_null(strstr(err.message, "stores only 0 bytes for 4000 bytes"));
    assert_non_null(strstr(err.message, "'/runs/r/unwritten'"));
    ld_dump_close(d);

    /* A group where a dataset should be. */
    dt_write_small_dump(f->path);
    hid_t file = H5Fopen(f->path, H5F_ACC_RDWR, H5P_DEFAULT);
    H5Gclose(H5Gcreate2(file, "/runs/r/sub", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Fclose(file);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "'/runs/r/sub' is not a readable dataset");
}

/* A bool dataset holding 2 (valid for HDF5's enum, not for layerdiff). */
static void test_reader_rejects_bad_bool(void **state)
{
    dt_fixture *f = *state;
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    dt_begin_run(w, "r");
    const int64_t n = 3;
    const uint8_t ok[] = {0, 1, 0};
    ld_tensor *t = dt_make_tensor(LD_DTYPE_BOOL, 1, &n, ok);
    ld_dump_tensor_meta m = dt_meta("flags", 0, 0);
    dt_add(w, t, &m);
    ld_tensor_destroy(t);
    dt_commit(w);
    hid_t file = H5Fopen(f->path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t dset = H5Dopen2(file, "/runs/r/flags", H5P_DEFAULT);
    const uint8_t bad[] = {0, 2, 1};
    /* with the enum type itself: raw bytes, no conversion */
    hid_t type = H5Dget_type(dset);
    assert_true(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bad) >= 0);
    H5Tclose(type);
    H5Dclose(dset);
    H5Fclose(file);
    ld_dump *d = dt_open_dump(f->path);
    ld_error err;
    ld_tensor *back = NULL;
    assert_int_equal(ld_dump_read_tensor(d, 0, 0, &back, &err), LD_ERR_INPUT);
    assert_null(back);
    assert_non_null(strstr(err.message, "bool value 2 at element 1"));
    assert_non_null(strstr(err.message, "'flags'"));
    ld_dump_close(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reader_errors, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_reader_accepts_other_writers, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_reader_hostile_layouts, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_reader_rejects_bad_bool, dt_setup, dt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
