/* Unit tests for dump format version 2: the per-run index tables
 * (/index/<run link>) that replace the attributes of run datasets, the
 * graph-output flag, writing and reading format version 1 (no tables, no
 * flag: -1), and index tables that are missing, short, of the wrong type
 * or with rows that contradict the datasets. */
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

/* More rows than one index block (256) in each run, not a multiple of it. */
#define N_TENSORS 600
#define N_RUNS 3

/* Names that need escaping; the rest are "t<i>". */
static const char *const odd_names[] = {"a/b", "", "100%", ".x", "bad \xff byte", "naïve"};
#define N_ODD ((int)(sizeof odd_names / sizeof odd_names[0]))
/* Inputs with an omitted ("") and a '/'-holding name: the separator case. */
static const char *const node_inputs[] = {"x", "", "/enc/a.0", "%2F"};

static const char *name_of(int i, char *buf, size_t size)
{
    if (i < N_ODD)
        return odd_names[i];
    snprintf(buf, size, "t%d", i);
    return buf;
}

static int64_t counter_of(int run, int i, int k)
{
    return (int64_t)run * 100000 + i * 10 + k;
}

static void write_runs(const char *path, int format_version)
{
    ld_dump_writer *w = dt_open_writer_version(path, 0, format_version);
    const char *run_names[N_RUNS] = {"reference", "emulated", "emulated.isolated"};
    int handle[N_RUNS];
    ld_error err;
    for (int r = 0; r < N_RUNS; r++) {
        ld_dump_run_info run = {.name = run_names[r], .backend = "b", .config = "c",
                                .isolated_of = r == 2 ? "emulated" : NULL};
        assert_int_equal(ld_dump_writer_open_run(w, &run, &handle[r], &err), LD_OK);
    }
    for (int i = 0; i < N_TENSORS; i++)
        for (int r = 0; r < N_RUNS; r++) { /* interleaved, as layerdiff run writes */
            char buf[32];
            const float v = (float)(i * N_RUNS + r);
            ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 0, NULL, &v);
            ld_dump_tensor_meta m = dt_meta(name_of(i, buf, sizeof buf), N_TENSORS - i, i % 2);
            m.graph_output = i % 7 == 3;
            m.n_inputs = i % 5 == 0 ? 4 : i % 5 == 1 ? 1 : 0;
            m.inputs = node_inputs;
            if (i % 3 == 0)
                m.counters = (ld_layer_counters){true, counter_of(r, i, 0), counter_of(r, i, 1),
                                                 counter_of(r, i, 2), counter_of(r, i, 3),
                                                 counter_of(r, i, 4)};
            if (ld_dump_writer_add_tensor_to(w, handle[r], t, &m, &err) != LD_OK)
                fail_msg("add %d: %s", i, err.message);
            ld_tensor_destroy(t);
        }
    dt_commit(w);
}

static void check_runs(const char *path, int format_version)
{
    ld_dump *d = dt_open_dump(path);
    assert_int_equal(ld_dump_info(d)->format_version, format_version);
    assert_int_equal(ld_dump_run_count(d), N_RUNS);
    assert_string_equal(ld_dump_run(d, 2)->isolated_of, "emulated");
    for (int r = 0; r < N_RUNS; r++) {
        assert_int_equal(ld_dump_tensor_count(d, r), N_TENSORS);
        for (int i = 0; i < N_TENSORS; i++) {
            char buf[32];
            int at = ld_dump_find_tensor(d, r, name_of(i, buf, sizeof buf));
            assert_true(at >= 0);
            /* ordered by topo_index = N_TENSORS - i */
            assert_int_equal(at, N_TENSORS - 1 - i);
            const ld_dump_tensor_meta *m = ld_dump_tensor_meta_at(d, r, at);
            assert_int_equal(m->topo_index, N_TENSORS - i);
            assert_int_equal(m->output_index, i % 2);
            assert_string_equal(m->node, "node");
            assert_string_equal(m->op_type, "Op");
            assert_string_equal(m->precision, "fp32");
            assert_int_equal(m->dtype, LD_DTYPE_FLOAT32);
            assert_int_equal(m->shape.rank, 0);
            assert_int_equal(m->graph_output, format_version >= 2 ? i % 7 == 3 : -1);
            int n_inputs = i % 5 == 0 ? 4 : i % 5 == 1 ? 1 : 0;
            assert_int_equal(m->n_inputs, n_inputs);
            for (int k = 0; k < n_inputs; k++)
                assert_string_equal(m->inputs[k], node_inputs[k]);
            assert_int_equal(m->counters.present, i % 3 == 0);
            if (i % 3 == 0) {
                assert_int_equal(m->counters.overflows, counter_of(r, i, 0));
                assert_int_equal(m->counters.partial_overflows, counter_of(r, i, 4));
            }
            ld_tensor *t = NULL;
            ld_error err;
            assert_int_equal(ld_dump_read_tensor(d, r, at, &t, &err), LD_OK);
            assert_true(*(const float *)t->data == (float)(i * N_RUNS + r));
            ld_tensor_destroy(t);
        }
    }
    ld_dump_close(d);
}

/* Number of attributes on object `path` of the file, or -1. */
static int attribute_count(const char *file_path, const char *path)
{
    hid_t file = H5Fopen(file_path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5O_info_t info;
    int n = file >= 0 && H5Oget_info_by_name(file, path, &info, H5P_DEFAULT) >= 0
                ? (int)info.num_attrs
                : -1;
    if (file >= 0)
        H5Fclose(file);
    return n;
}

static void test_index_round_trip(void **state)
{
    dt_fixture *f = *state;
    write_runs(f->path, 0);
    check_runs(f->path, 2);
    /* the datasets carry no attributes: their rows describe them */
    assert_int_equal(attribute_count(f->path, "/runs/reference/t100"), 0);
    assert_int_equal(attribute_count(f->path, "/runs/reference/a%2Fb"), 0);
    assert_true(attribute_count(f->path, "/index/emulated.isolated") >= 0);
}

static void test_format_version_1(void **state)
{
    dt_fixture *f = *state;
    write_runs(f->path, 1);
    check_runs(f->path, 1); /* graph_output -1: unknown */
    assert_true(attribute_count(f->path, "/runs/reference/t100") >= 7);
    assert_int_equal(attribute_count(f->path, "/index"), -1);

    ld_dump_writer *w = NULL;
    ld_dump_writer_options opts = {.format_version = 3};
    ld_error err;
    assert_int_equal(ld_dump_writer_open(&w, f->path, NULL, &opts, &err), LD_ERR_USAGE);
    assert_null(w);
    assert_non_null(strstr(err.message, "cannot write format version 3"));
}

/* --- hostile tables ------------------------------------------------------------------ */

static hid_t open_rw(const char *path)
{
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(file >= 0);
    return file;
}

/* Overwrites string column `column` of row 0 of /index/r. */
static void set_row_string(const char *path, const char *column, const char *value)
{
    hid_t file = open_rw(path);
    hid_t dset = H5Dopen2(file, "/index/r", H5P_DEFAULT);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, H5T_VARIABLE);
    hid_t mem = H5Tcreate(H5T_COMPOUND, sizeof(char *));
    assert_true(H5Tinsert(mem, column, 0, str) >= 0);
    hsize_t start[1] = {0}, count[1] = {1};
    hid_t file_space = H5Dget_space(dset);
    hid_t mem_space = H5Screate_simple(1, count, NULL);
    H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL);
    assert_true(H5Dwrite(dset, mem, mem_space, file_space, H5P_DEFAULT, &value) >= 0);
    H5Sclose(mem_space);
    H5Sclose(file_space);
    H5Tclose(mem);
    H5Tclose(str);
    H5Dclose(dset);
    assert_true(H5Fclose(file) >= 0);
}

static void test_index_hostile(void **state)
{
    dt_fixture *f = *state;
    dt_write_small_dump_version(f->path, 2);
    ld_dump *d = dt_open_dump(f->path);
    assert_int_equal(ld_dump_tensor_meta_at(d, 0, 0)->graph_output, 0);
    assert_int_equal(ld_dump_input_count(d), 0);
    ld_dump_close(d);

    hid_t file = open_rw(f->path);
    assert_true(H5Ldelete(file, "/index/r", H5P_DEFAULT) >= 0);
    H5Fclose(file);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "index table '/index/r': is missing");

    /* a dataset without a row */
    dt_write_small_dump_version(f->path, 2);
    file = open_rw(f->path);
    hid_t space = H5Screate(H5S_SCALAR);
    H5Dclose(H5Dcreate2(file, "/runs/r/extra", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT));
    H5Fclose(file);
    dt_expect_open_error(f->path, LD_ERR_INPUT,
                         "index table '/index/r': has 1 rows for 2 tensor datasets");

    /* not a compound table */
    dt_write_small_dump_version(f->path, 2);
    file = open_rw(f->path);
    H5Ldelete(file, "/index/r", H5P_DEFAULT);
    hsize_t one = 1;
    hid_t space1 = H5Screate_simple(1, &one, NULL);
    H5Dclose(H5Dcreate2(file, "/index/r", H5T_STD_I32LE, space1, H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT));
    H5Fclose(file);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "index table '/index/r': is not a compound");

    /* a compound without the name column */
    dt_write_small_dump_version(f->path, 2);
    file = open_rw(f->path);
    H5Ldelete(file, "/index/r", H5P_DEFAULT);
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, H5T_VARIABLE);
    hid_t partial = H5Tcreate(H5T_COMPOUND, H5Tget_size(str));
    H5Tinsert(partial, "link", 0, str);
    H5Dclose(H5Dcreate2(file, "/index/r", partial, space1, H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT));
    H5Tclose(partial);
    H5Tclose(str);
    H5Sclose(space1);
    H5Sclose(space);
    H5Fclose(file);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "has no variable-length string column 'name'");

    /* rows contradicting the datasets */
    dt_write_small_dump_version(f->path, 2);
    set_row_string(f->path, "link", "bogus");
    dt_expect_open_error(f->path, LD_ERR_INPUT, "row 0: link 'bogus' is not tensor 'x' escaped");
    dt_write_small_dump_version(f->path, 2);
    set_row_string(f->path, "dtype", "int32");
    dt_expect_open_error(f->path, LD_ERR_INPUT,
                         "dataset '/runs/r/x': holds a 4-byte float with 8 exponent and 23 "
                         "mantissa bits, bias 127, but its dtype attribute says int32");
    dt_write_small_dump_version(f->path, 2);
    set_row_string(f->path, "dtype", "complex64");
    dt_expect_open_error(f->path, LD_ERR_UNSUPPORTED, "row 0: unknown dtype 'complex64'");
    dt_write_small_dump_version(f->path, 2);
    set_row_string(f->path, "inputs", "a/%zz");
    dt_expect_open_error(f->path, LD_ERR_INPUT, "row 0: has a malformed inputs entry");
    dt_write_small_dump_version(f->path, 2);
    set_row_string(f->path, "name", NULL);
    dt_expect_open_error(f->path, LD_ERR_INPUT, "row 0 has no name, link or dtype");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        SETUP(test_index_round_trip),
        SETUP(test_format_version_1),
        SETUP(test_index_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
