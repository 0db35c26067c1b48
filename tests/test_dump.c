/* Unit tests for dump/: HDF5 dump writer, reader and link-name escaping.
 * tests/test_dump_reader.c checks the reader's errors on bad files and
 * tests/test_dump_interop.c reads dumps with h5dump and h5py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hdf5.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "layerdiff/dump.h"
#include "tests/support/dump_testing.h"

/* --- names -------------------------------------------------------------------- */

static void check_escape(const char *name, const char *expected)
{
    char *e = ld_dump_escape_name(name);
    assert_non_null(e);
    assert_string_equal(e, expected);
    char *back = ld_dump_unescape_name(e);
    assert_non_null(back);
    assert_string_equal(back, name);
    free(e);
    free(back);
}

static void test_escape_names(void **state)
{
    (void)state;
    check_escape("/encoder/layer.0/Add_output_0", "%2Fencoder%2Flayer.0%2FAdd_output_0");
    check_escape("plain_name", "plain_name");
    check_escape("with space", "with space");
    check_escape("100%", "100%25");
    check_escape(".", "%2E");
    check_escape("..", "%2E.");
    check_escape(".hidden.x", "%2Ehidden.x");
    check_escape("", "%00");
    check_escape("tab\there\x7f", "tab%09here%7F");
    const char *utf8 = "na\xc3\xafve \xe5\x90\x8d\xf0\x9f\x98\x80"; /* kept as is */
    check_escape(utf8, utf8);
    /* Bytes that are not UTF-8 are encoded so link names always are. */
    check_escape("bad\xff\xc3(\xed\xa0\x80", "bad%FF%C3(%ED%A0%80");
    /* Names that differ only by escaping stay distinct. */
    char *a = ld_dump_escape_name("a/b"), *b = ld_dump_escape_name("a%2Fb");
    assert_string_not_equal(a, b);
    free(a);
    free(b);
    /* Only canonical escapes are accepted back. */
    const char *bad[] = {"%2", "%", "%zz", "%2f", "%41", "a/b", ".x", "a%00b", "%FF%FE%"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *u = ld_dump_unescape_name(bad[i]);
        if (u)
            fail_msg("'%s' unescaped to '%s'", bad[i], u);
    }
    assert_null(ld_dump_escape_name(NULL));
}

/* --- round trips ---------------------------------------------------------------- */

static const uint16_t f16_bits[] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
                                    0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7E01, 0xFE00, 0x7C01};
static const uint16_t bf16_bits[] = {0x0000, 0x8000, 0x0001, 0x3F80, 0xC000, 0x7F7F,
                                     0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81};

typedef struct dtype_case {
    const char *name;
    ld_dtype dtype;
    int64_t count;
    const void *data;
} dtype_case;

static void test_roundtrip_every_dtype(void **state)
{
    dt_fixture *f = *state;
    static const uint8_t u8[] = {0, 1, 127, 128, 255};
    static const int8_t i8[] = {-128, -1, 0, 1, 127};
    static const uint16_t u16[] = {0, 1, 65535};
    static const int16_t i16[] = {-32768, -1, 32767};
    static const uint32_t u32[] = {0, 1, 4294967295u};
    static const int32_t i32[] = {INT32_MIN, -1, INT32_MAX};
    static const uint64_t u64[] = {0, 1, UINT64_MAX};
    static const int64_t i64[] = {INT64_MIN, -1, INT64_MAX};
    static const float f32[] = {0.0f, -0.0f, 1.5f, -3e38f, 1e-45f, INFINITY, NAN};
    static const double f64[] = {0.0, -1e308, 5e-324, -INFINITY, NAN};
    static const uint8_t bools[] = {1, 0, 0, 1, 1};
    const dtype_case cases[] = {
        {"f16", LD_DTYPE_FLOAT16, 14, f16_bits}, {"bf16", LD_DTYPE_BFLOAT16, 11, bf16_bits},
        {"f32", LD_DTYPE_FLOAT32, 7, f32},       {"f64", LD_DTYPE_FLOAT64, 5, f64},
        {"u8", LD_DTYPE_UINT8, 5, u8},           {"i8", LD_DTYPE_INT8, 5, i8},
        {"u16", LD_DTYPE_UINT16, 3, u16},        {"i16", LD_DTYPE_INT16, 3, i16},
        {"u32", LD_DTYPE_UINT32, 3, u32},        {"i32", LD_DTYPE_INT32, 3, i32},
        {"u64", LD_DTYPE_UINT64, 3, u64},        {"i64", LD_DTYPE_INT64, 3, i64},
        {"bool", LD_DTYPE_BOOL, 5, bools},
    };
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int gzip = 0; gzip <= 1; gzip++) {
        ld_dump_writer *w = dt_open_writer(f->path, gzip);
        dt_begin_run(w, "r");
        for (int i = 0; i < n; i++) {
            ld_tensor *t = dt_make_tensor(cases[i].dtype, 1, &cases[i].count, cases[i].data);
            ld_dump_tensor_meta m = dt_meta(cases[i].name, i, 0);
            dt_add(w, t, &m);
            ld_tensor_destroy(t);
        }
        ld_dump_writer_end_run(w, NULL);
        dt_commit(w);

        ld_dump *d = dt_open_dump(f->path);
        assert_int_equal(ld_dump_tensor_count(d, 0), n);
        for (int i = 0; i < n; i++) {
            ld_tensor *t = dt_read_by_name(d, 0, cases[i].name);
            assert_int_equal(t->dtype, cases[i].dtype);
            assert_int_equal(t->shape.rank, 1);
            assert_int_equal(t->shape.dims[0], cases[i].count);
            /* Bit-exact, NaN payloads and signed zeros included. */
            assert_memory_equal(t->data, cases[i].data, t->nbytes);
            ld_tensor_destroy(t);
        }
        ld_dump_close(d);
    }
}

static void test_scalars_and_empty_tensors(void **state)
{
    dt_fixture *f = *state;
    const float scalar = 3.25f;
    const int64_t empty_dims[][3] = {{0, 3, 0}, {2, 0, 4}, {0, 0, 0}};
    const int empty_ranks[] = {2, 3, 1};
    for (int gzip = 0; gzip <= 1; gzip++) {
        ld_dump_writer *w = dt_open_writer(f->path, gzip);
        dt_begin_run(w, "r");
        ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 0, NULL, &scalar);
        ld_dump_tensor_meta m = dt_meta("scalar", 0, 0);
        dt_add(w, t, &m);
        ld_tensor_destroy(t);
        for (int i = 0; i < 3; i++) {
            char name[32];
            snprintf(name, sizeof name, "empty%d", i);
            t = dt_make_tensor(LD_DTYPE_FLOAT16, empty_ranks[i], empty_dims[i], NULL);
            m = dt_meta(name, 1 + i, 0);
            dt_add(w, t, &m);
            ld_tensor_destroy(t);
        }
        dt_commit(w); /* ends the open run itself */

        ld_dump *d = dt_open_dump(f->path);
        t = dt_read_by_name(d, 0, "scalar");
        assert_int_equal(t->shape.rank, 0);
        assert_int_equal(t->count, 1);
        assert_true(*(float *)t->data == scalar);
        ld_tensor_destroy(t);
        for (int i = 0; i < 3; i++) {
            char name[32];
            snprintf(name, sizeof name, "empty%d", i);
            t = dt_read_by_name(d, 0, name);
            assert_int_equal(t->count, 0);
            assert_int_equal(t->shape.rank, empty_ranks[i]);
            for (int k = 0; k < empty_ranks[i]; k++)
                assert_int_equal(t->shape.dims[k], empty_dims[i][k]);
            ld_tensor_destroy(t);
        }
        ld_dump_close(d);
    }
}

/* Tensors of 1 byte to just over 64 KiB (HDF5's default sieve buffer, which
 * the writer turns off so each dataset is one direct write), written back to
 * back with distinct contents: each must read back bit for bit, none
 * overwritten by its neighbours. */
static void test_small_tensor_sizes_round_trip(void **state)
{
    dt_fixture *f = *state;
    const int64_t counts[] = {1, 3, 511, 4096, 16383, 16384, 16385, 40000, 65537};
    enum { N = sizeof counts / sizeof counts[0] };
    uint8_t *data = malloc(65537);
    assert_non_null(data);
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    dt_begin_run(w, "r");
    for (int i = 0; i < N; i++) {
        for (int64_t k = 0; k < counts[i]; k++)
            data[k] = (uint8_t)(k * 31 + i * 7 + 1);
        ld_tensor *t = dt_make_tensor(LD_DTYPE_UINT8, 1, &counts[i], data);
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        ld_dump_tensor_meta m = dt_meta(name, i, 0);
        dt_add(w, t, &m);
        ld_tensor_destroy(t);
    }
    dt_commit(w);
    ld_dump *d = dt_open_dump(f->path);
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        ld_tensor *t = dt_read_by_name(d, 0, name);
        assert_int_equal(t->count, counts[i]);
        const uint8_t *got = t->data;
        for (int64_t k = 0; k < counts[i]; k++)
            if (got[k] != (uint8_t)(k * 31 + i * 7 + 1))
                fail_msg("tensor %s element %lld differs", name, (long long)k);
        ld_tensor_destroy(t);
    }
    ld_dump_close(d);
    free(data);
}

static const char *const tricky_names[] = {
    "/encoder/layer.0/Add_output_0", "%2Fencoder%2Flayer.0%2FAdd_output_0", "a/b", "a%2Fb",
    "a%b", "100%", ".", "..", ".hidden", "with spaces  ", "na\xc3\xafve \xe5\x90\x8d\xe5\x89\x8d",
    "tab\tnewline\n", "bad utf8 \xff", "x", "X",
};
#define N_TRICKY ((int)(sizeof tricky_names / sizeof tricky_names[0]))

static void test_tricky_names_round_trip(void **state)
{
    dt_fixture *f = *state;
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    ld_error err;
    dt_begin_run(w, "run/with%odd name");
    for (int i = 0; i < N_TRICKY; i++) {
        int32_t v = i;
        ld_tensor *t = dt_make_tensor(LD_DTYPE_INT32, 0, NULL, &v);
        ld_dump_tensor_meta m = dt_meta(tricky_names[i], N_TRICKY - i, 0);
        dt_add(w, t, &m);
        if (i == 0) { /* a duplicate is refused, and the writer then stays failed */
            ld_dump_writer *w2 = dt_open_writer(f->path, 0);
            dt_begin_run(w2, "r");
            dt_add(w2, t, &m);
            assert_int_equal(ld_dump_writer_add_tensor(w2, t, &m, &err), LD_ERR_INPUT);
            assert_non_null(strstr(err.message, "duplicate tensor name"));
            assert_non_null(strstr(err.message, "Add_output_0"));
            assert_int_equal(ld_dump_writer_end_run(w2, &err), LD_ERR_INPUT);
            ld_dump_writer_abort(w2);
        }
        ld_tensor_destroy(t);
    }
    dt_commit(w);

    ld_dump *d = dt_open_dump(f->path);
    assert_int_equal(ld_dump_run_count(d), 1);
    assert_int_equal(ld_dump_find_run(d, "run/with%odd name"), 0);
    assert_int_equal(ld_dump_tensor_count(d, 0), N_TRICKY);
    for (int i = 0; i < N_TRICKY; i++) {
        ld_tensor *t = dt_read_by_name(d, 0, tricky_names[i]);
        assert_int_equal(*(int32_t *)t->data, i);
        ld_tensor_destroy(t);
    }
    assert_int_equal(ld_dump_find_tensor(d, 0, "a%252Fb"), -1);
    assert_int_equal(ld_dump_find_tensor(d, 0, "missing"), -1);
    assert_int_equal(ld_dump_find_tensor(d, 5, "x"), -1);
    ld_dump_close(d);
}

static void test_topological_order_and_lookup(void **state)
{
    dt_fixture *f = *state;
    /* Written out of order, as a parallel executor might. */
    const struct { const char *name; int64_t topo; int output; } order[] = {
        {"c", 7, 0}, {"a1", 2, 1}, {"b", 5, 0}, {"a0", 2, 0}, {"z", 0, 0}, {"c2", 7, 2},
    };
    const char *expected[] = {"z", "a0", "a1", "b", "c", "c2"};
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    dt_begin_run(w, "r");
    for (int i = 0; i < 6; i++) {
        uint8_t v = (uint8_t)i;
        ld_tensor *t = dt_make_tensor(LD_DTYPE_UINT8, 0, NULL, &v);
        ld_dump_tensor_meta m = dt_meta(order[i].name, order[i].topo, order[i].output);
        dt_add(w, t, &m);
        ld_tensor_destroy(t);
    }
    dt_commit(w);
    ld_dump *d = dt_open_dump(f->path);
    for (int i = 0; i < 6; i++) {
        const ld_dump_tensor_meta *m = ld_dump_tensor_meta_at(d, 0, i);
        assert_string_equal(m->name, expected[i]);
        assert_int_equal(ld_dump_find_tensor(d, 0, expected[i]), i);
    }
    assert_null(ld_dump_tensor_meta_at(d, 0, 6));
    assert_null(ld_dump_tensor_meta_at(d, 1, 0));
    ld_dump_close(d);
}

static const char *const input_names[] = {"pixel_values", "attention_mask", "/odd/input"};
static const float input_x[] = {1, 2, 3, 4};
static const ld_dump_run_info two_runs[] = {{"reference", "ref", NULL, NULL},
                                            {"emulated", "emu", "fp16 all", NULL}};

/* Writes three inputs, then runs "reference" and "emulated", each with a
 * tensor "y" whose first element is the run index; only "emulated" has
 * counters. Returns the still open writer. */
static ld_dump_writer *write_inputs_and_runs(const char *path, const ld_dump_file_info *info)
{
    ld_error err;
    ld_dump_writer *w = NULL;
    assert_int_equal(ld_dump_writer_open(&w, path, info, NULL, &err), LD_OK);
    const int64_t dims[] = {2, 2};
    for (int i = 0; i < 3; i++) {
        ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 2, dims, input_x);
        ld_tensor_set_name(t, input_names[i], &err);
        assert_int_equal(ld_dump_writer_add_input(w, t, &err), LD_OK);
        ld_tensor_destroy(t);
    }
    for (int r = 0; r < 2; r++) {
        assert_int_equal(ld_dump_writer_begin_run(w, &two_runs[r], &err), LD_OK);
        ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 2, dims, input_x);
        ((float *)t->data)[0] = (float)r;
        ld_dump_tensor_meta m = {.name = "y", .node = "/layer/MatMul", .op_type = "MatMul",
                                 .topo_index = 3, .output_index = 1, .precision = "fp16"};
        if (r == 1)
            m.counters = (ld_layer_counters){true, 1, 2, 3, 4, INT64_MAX};
        dt_add(w, t, &m);
        ld_tensor_destroy(t);
        assert_int_equal(ld_dump_writer_end_run(w, &err), LD_OK);
    }
    return w;
}

static void test_runs_inputs_and_attributes(void **state)
{
    dt_fixture *f = *state;
    ld_error err;
    ld_dump_file_info info = {.model_path = "m\xc3\xa9.onnx", .model_sha256 = NULL,
                              .tool_version = "9.9", .created = "2024-01-02T03:04:05Z",
                              .input_seed = -1};
    /* A second run with the same name is refused. */
    ld_dump_writer *w = write_inputs_and_runs(f->path, &info);
    assert_int_equal(ld_dump_writer_begin_run(w, &two_runs[0], &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "duplicate run name"));
    ld_dump_writer_abort(w);
    assert_false(dt_file_exists(f->path));

    /* Same again without the failing call, then read everything back. */
    dt_commit(write_inputs_and_runs(f->path, &info));
    ld_dump *d = dt_open_dump(f->path);
    const ld_dump_file_info *fi = ld_dump_info(d);
    assert_string_equal(fi->model_path, info.model_path);
    assert_null(fi->model_sha256);
    assert_string_equal(fi->tool_version, "9.9");
    assert_string_equal(fi->created, info.created);
    assert_int_equal(fi->input_seed, -1);
    assert_int_equal(fi->format_version, LD_DUMP_FORMAT_VERSION);
    assert_int_equal(ld_dump_input_count(d), 3);
    for (int i = 0; i < 3; i++) { /* declaration order */
        const ld_dump_tensor_meta *m = ld_dump_input_meta(d, i);
        assert_string_equal(m->name, input_names[i]);
        assert_int_equal(m->topo_index, -1);
        assert_string_equal(m->node, "");
    }
    ld_tensor *t = dt_read_by_name(d, -1, "/odd/input");
    assert_memory_equal(t->data, input_x, sizeof input_x);
    ld_tensor_destroy(t);
    assert_int_equal(ld_dump_run_count(d), 2);
    for (int r = 0; r < 2; r++) {
        const ld_dump_run_info *ri = ld_dump_run(d, r);
        assert_string_equal(ri->name, two_runs[r].name);
        assert_string_equal(ri->backend, two_runs[r].backend);
        assert_string_equal(ri->config, two_runs[r].config ? two_runs[r].config : "");
        assert_int_equal(ld_dump_find_run(d, two_runs[r].name), r);
        const ld_dump_tensor_meta *m = ld_dump_tensor_meta_at(d, r, 0);
        assert_string_equal(m->node, "/layer/MatMul");
        assert_string_equal(m->op_type, "MatMul");
        assert_string_equal(m->precision, "fp16");
        assert_int_equal(m->topo_index, 3);
        assert_int_equal(m->output_index, 1);
        assert_int_equal(m->dtype, LD_DTYPE_FLOAT32);
        assert_int_equal(m->counters.present, r == 1);
        t = dt_read_by_name(d, r, "y");
        assert_true(((float *)t->data)[0] == (float)r);
        ld_tensor_destroy(t);
    }
    const ld_layer_counters *c = &ld_dump_tensor_meta_at(d, 1, 0)->counters;
    assert_int_equal(c->overflows, 1);
    assert_int_equal(c->nans_created, 2);
    assert_int_equal(c->underflows, 3);
    assert_int_equal(c->subnormals, 4);
    assert_int_equal(c->partial_overflows, INT64_MAX);
    assert_null(ld_dump_run(d, 2));
    assert_int_equal(ld_dump_find_run(d, "nope"), -1);
    ld_dump_close(d);
}

static void test_gzip_layout(void **state)
{
    dt_fixture *f = *state;
    const int64_t dims[] = {300, 1000}; /* 1.2 MB: more than one chunk */
    float *x = malloc(300 * 1000 * sizeof *x);
    for (int i = 0; i < 300 * 1000; i++)
        x[i] = (float)(i % 977) * 0.25f;
    ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 2, dims, x);
    const int levels[] = {0, 6};
    for (int k = 0; k < 2; k++) {
        ld_dump_writer *w = dt_open_writer(f->path, levels[k]);
        dt_begin_run(w, "r");
        ld_dump_tensor_meta m = dt_meta("big", 0, 0);
        dt_add(w, t, &m);
        dt_commit(w);
        /* Check the layout with HDF5 itself. */
        hid_t file = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
        hid_t dset = H5Dopen2(file, "/runs/r/big", H5P_DEFAULT);
        hid_t dcpl = H5Dget_create_plist(dset);
        assert_int_equal(H5Pget_layout(dcpl), levels[k] ? H5D_CHUNKED : H5D_CONTIGUOUS);
        assert_int_equal(H5Pget_nfilters(dcpl), levels[k] ? 2 : 0);
        H5Pclose(dcpl);
        H5Dclose(dset);
        H5Fclose(file);
        ld_dump *d = dt_open_dump(f->path);
        ld_tensor *back = dt_read_by_name(d, 0, "big");
        assert_memory_equal(back->data, x, t->nbytes);
        ld_tensor_destroy(back);
        ld_dump_close(d);
    }
    ld_error err;
    ld_dump_writer *w = NULL;
    ld_dump_writer_options bad = {.gzip_level = 10};
    assert_int_equal(ld_dump_writer_open(&w, f->path, NULL, &bad, &err), LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "gzip level 10"));
    ld_tensor_destroy(t);
    free(x);
}

/* The same tensors give the same bytes (no timestamps in the file). */
static void test_deterministic_bytes(void **state)
{
    dt_fixture *f = *state;
    char paths[2][192];
    ld_dump_file_info info = {.model_path = "m.onnx", .created = "2024-01-01T00:00:00Z"};
    for (int k = 0; k < 2; k++) {
        snprintf(paths[k], sizeof paths[k], "%s/same%d.h5", f->dir, k);
        ld_dump_writer *w = NULL;
        ld_error err;
        assert_int_equal(ld_dump_writer_open(&w, paths[k], &info, NULL, &err), LD_OK);
        dt_begin_run(w, "r");
        const int64_t n = 3;
        const float x[] = {1, 2, 3};
        ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 1, &n, x);
        ld_dump_tensor_meta m = dt_meta("x", 0, 0);
        dt_add(w, t, &m);
        ld_tensor_destroy(t);
        dt_commit(w);
        if (k == 0)
            sleep(1); /* HDF5 timestamps have one-second resolution */
    }
    FILE *a = fopen(paths[0], "rb"), *b = fopen(paths[1], "rb");
    assert_non_null(a);
    assert_non_null(b);
    int ca, cb;
    long offset = 0;
    do {
        ca = fgetc(a);
        cb = fgetc(b);
        if (ca != cb)
            fail_msg("the two dumps differ at byte %ld", offset);
        offset++;
    } while (ca != EOF);
    fclose(a);
    fclose(b);
}

/* Run datasets carry no object timestamps and are contiguous without
 * filters, in both format versions; the writer leaves HDF5's default dataset
 * creation list as it found it. (HDF5 1.10 reads the default list's
 * timestamp flag once, at library start: a writer that switched it off on
 * the default list to spare H5Dcreate2 its per-dataset copy of a custom list
 * would still write timestamps; docs/dump-format.md "Writing".) Checked
 * without waiting a second as test_deterministic_bytes does. */
static void test_run_datasets_have_no_timestamps(void **state)
{
    dt_fixture *f = *state;
    const int64_t n = 3;
    const float x[] = {1, 2, 3};
    ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 1, &n, x);
    ld_dump_tensor_meta m = dt_meta("x", 0, 0);
    for (int version = 1; version <= 2; version++) {
        char path[192];
        snprintf(path, sizeof path, "%s/stamps%d.h5", f->dir, version);
        ld_dump_writer *w = NULL;
        ld_dump_writer_options o = {.format_version = version};
        ld_error err;
        assert_int_equal(ld_dump_writer_open(&w, path, NULL, &o, &err), LD_OK);
        dt_begin_run(w, "r");
        dt_add(w, t, &m);
        dt_commit(w);
        hbool_t track = 0;
        assert_true(H5Pget_obj_track_times(H5P_DATASET_CREATE_DEFAULT, &track) >= 0);
        assert_true(track);
        hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        assert_true(file >= 0);
        hid_t dset = H5Dopen2(file, "/runs/r/x", H5P_DEFAULT);
        assert_true(dset >= 0);
        hid_t dcpl = H5Dget_create_plist(dset);
        assert_true(dcpl >= 0);
        track = 1;
        assert_true(H5Pget_obj_track_times(dcpl, &track) >= 0);
        assert_false(track);
        assert_int_equal(H5Pget_layout(dcpl), H5D_CONTIGUOUS);
        assert_int_equal(H5Pget_nfilters(dcpl), 0);
        H5Pclose(dcpl);
        H5Dclose(dset);
        H5Fclose(file);
    }
    ld_tensor_destroy(t);
}

/* --- temporary file, commit, abort, failures ------------------------------------- */

static void test_temp_file_commit_and_abort(void **state)
{
    dt_fixture *f = *state;
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", ld_dump_writer_temp_path(w));
    assert_non_null(strstr(tmp, "/d.h5.tmp-"));
    assert_true(dt_file_exists(tmp));
    assert_false(dt_file_exists(f->path)); /* nothing at the final path before commit */
    ld_dump_writer_abort(w);
    assert_false(dt_file_exists(tmp));
    assert_int_equal(dt_count_dir_entries(f->dir), 0);

    /* Commit replaces an existing file atomically. */
    FILE *old = fopen(f->path, "w");
    fputs("old", old);
    fclose(old);
    w = dt_open_writer(f->path, 0);
    snprintf(tmp, sizeof tmp, "%s", ld_dump_writer_temp_path(w));
    dt_commit(w);
    assert_false(dt_file_exists(tmp));
    assert_int_equal(dt_count_dir_entries(f->dir), 1);
    ld_dump_close(dt_open_dump(f->path));

    /* With sync on. */
    ld_dump_writer_options sync = {.sync = true};
    ld_error err;
    assert_int_equal(ld_dump_writer_open(&w, f->path, NULL, &sync, &err), LD_OK);
    dt_commit(w);
    ld_dump_close(dt_open_dump(f->path));
}

static void test_commit_to_missing_directory(void **state)
{
    dt_fixture *f = *state;
    char path[256];
    snprintf(path, sizeof path, "%s/no/such/dir/d.h5", f->dir);
    ld_dump_writer *w = NULL;
    ld_error err;
    assert_int_equal(ld_dump_writer_open(&w, path, NULL, NULL, &err), LD_ERR_IO);
    assert_null(w);
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "No such file or directory"));
}

/* Disk full, simulated with a file size limit: the write fails, the error
 * says so, and neither the final nor the temporary file is left. */
static void test_write_failure_leaves_no_file(void **state)
{
    dt_fixture *f = *state;
    const int64_t n = 1 << 20; /* 4 MiB of float32 */
    float *x = calloc((size_t)n, sizeof *x);
    ld_tensor *t = dt_make_tensor(LD_DTYPE_FLOAT32, 1, &n, x);
    ld_dump_writer *w = dt_open_writer(f->path, 0);
    dt_begin_run(w, "r");

    struct rlimit saved, limited;
    getrlimit(RLIMIT_FSIZE, &saved);
    limited = saved;
    limited.rlim_cur = 1 << 20;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &limited), 0);
    ld_error err;
    ld_dump_tensor_meta m = dt_meta("big", 0, 0);
    ld_status st = ld_dump_writer_add_tensor(w, t, &m, &err);
    if (st == LD_OK)
        st = ld_dump_writer_commit(w, &err);
    else {
        ld_error again;
        /* the failure is sticky: commit repeats it and cleans up */
        assert_int_equal(ld_dump_writer_commit(w, &again), st);
        assert_string_equal(again.message, err.message);
    }
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);

    assert_int_equal(st, LD_ERR_IO);
    assert_non_null(strstr(err.message, f->path));
    assert_non_null(strstr(err.message, "File too large"));
    assert_false(dt_file_exists(f->path));
    assert_int_equal(dt_count_dir_entries(f->dir), 0);
    ld_tensor_destroy(t);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_names),
        cmocka_unit_test_setup_teardown(test_roundtrip_every_dtype, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_scalars_and_empty_tensors, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_small_tensor_sizes_round_trip, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_tricky_names_round_trip, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_topological_order_and_lookup, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_runs_inputs_and_attributes, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_gzip_layout, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_deterministic_bytes, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_run_datasets_have_no_timestamps, dt_setup,
                                        dt_teardown),
        cmocka_unit_test_setup_teardown(test_temp_file_commit_and_abort, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_commit_to_missing_directory, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_write_failure_leaves_no_file, dt_setup, dt_teardown),
    };
    if (getenv("LD_TEST_FILTER")) /* run a subset: LD_TEST_FILTER='*gzip*' */
        cmocka_set_test_filter(getenv("LD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
