/* Tests of a run's inputs as ld_inputs_make builds them: generated (shapes,
 * dtypes, ranges, reproducibility) and loaded from a folder of .npy / .pb
 * files, NAME:FILE pairs, a single file and a dump, with every dtype, shape
 * and naming problem reported against the input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "layerdiff/dump.h"
#include "layerdiff/inputs.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)

#define expect_msg(st, want, err, text) expect_msg_at(st, want, err, text, __LINE__)
static void expect_msg_at(ld_status st, ld_status want, const ld_error *err, const char *text,
                          int line)
{
    if (st != want)
        fail_msg("line %d: status %s, expected %s (%s)", line, ld_status_name(st),
                 ld_status_name(want), st == LD_OK ? "" : err->message);
    if (!strstr(err->message, text) || strchr(err->message, '\n'))
        fail_msg("line %d: message '%s' lacks '%s'", line, err->message, text);
}

/* x float32 [N, 3], ids int64 [N], mask bool [N], each through an Identity. */
static ld_graph *three_inputs(void)
{
    Onnx__ModelProto *m = ob_model();
    int64_t xd[] = {-1, 3}, nd[] = {-1};
    ob_input(m->graph, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd);
    ob_input(m->graph, "ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, nd);
    ob_input(m->graph, "mask", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 1, nd);
    ob_node(m->graph, "Identity", "a", "x", "xo");
    ob_node(m->graph, "Identity", "b", "ids", "io");
    ob_node(m->graph, "Identity", "c", "mask", "mo");
    ob_output(m->graph, "xo", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ob_output(m->graph, "io", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    ob_output(m->graph, "mo", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL);
    return ob_load_ok(m);
}

static ld_graph *one_input(const char *name)
{
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {2, 3};
    ob_input(m->graph, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d);
    ob_node(m->graph, "Identity", "a", name, "y");
    ob_output(m->graph, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    return ob_load_ok(m);
}

static ld_status make(ld_input_set *set, const ld_graph *g, const char *shapes, const char *ranges,
                      uint64_t seed, int n_sources, const char *const *sources, ld_error *err)
{
    ld_inputs_options o = {shapes, ranges, seed, n_sources, sources};
    return ld_inputs_make(set, g, &o, err);
}

/* --- files ---------------------------------------------------------------------------- */

static void write_npy(const char *path, const char *descr, const char *shape, const void *data,
                      size_t len)
{
    char header[128];
    int n = snprintf(header, sizeof header,
                     "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    while ((10 + n + 1) % 64)
        header[n++] = ' ';
    header[n++] = '\n';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t fixed[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)n, 0};
    assert_int_equal(fwrite(fixed, 1, 10, f), 10);
    assert_int_equal(fwrite(header, 1, (size_t)n, f), (size_t)n);
    if (len)
        assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_pb(const char *path, const char *name, int dtype, int rank, const int64_t *dims,
                     const void *data, size_t len)
{
    Onnx__TensorProto *t = ob_tensor(name, dtype, rank, dims);
    ob_set_raw(t, data, len);
    size_t size = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = ob_mem(size);
    assert_int_equal(onnx__tensor_proto__pack(t, buf), size);
    ob_write_file(path, buf, size);
}

static const float x_data[6] = {1, 2, 3, 4, 5, 6};
static const int64_t ids_data[2] = {7, -8};
static const uint8_t mask_data[2] = {1, 0};

/* A folder with x.npy, input_1.pb (ids) and mask.npy. */
static const char *make_folder(void)
{
    ob_make_tmpdir();
    write_npy(ob_tmp_path("x.npy"), "<f4", "(2, 3)", x_data, sizeof x_data);
    int64_t d = 2;
    write_pb(ob_tmp_path("input_1.pb"), "whatever", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &d,
             ids_data, sizeof ids_data);
    write_npy(ob_tmp_path("mask.npy"), "|b1", "(2,)", mask_data, sizeof mask_data);
    return ob_tmpdir();
}

static void expect_loaded(const ld_input_set *s)
{
    assert_int_equal(s->n, 3);
    assert_false(s->generated);
    assert_string_equal(s->tensors[0]->name, "x");
    assert_string_equal(s->tensors[1]->name, "ids");
    assert_string_equal(s->tensors[2]->name, "mask");
    assert_memory_equal(s->tensors[0]->data, x_data, sizeof x_data);
    assert_memory_equal(s->tensors[1]->data, ids_data, sizeof ids_data);
    assert_memory_equal(s->tensors[2]->data, mask_data, sizeof mask_data);
    assert_int_equal(s->shapes[0].dims[0], 2);
    assert_int_equal(s->shapes[0].dims[1], 3);
}

/* --- generated ------------------------------------------------------------------------- */

static void test_generate(void **state)
{
    (void)state;
    ld_graph *g = three_inputs();
    ld_input_set a = {0}, b = {0};
    ld_error err;
    assert_int_equal(make(&a, g, "N:4", "[-1,1],ids:[0,9]", 5, 0, NULL, &err), LD_OK);
    assert_true(a.generated);
    assert_true(a.seed == 5);
    assert_int_equal(a.tensors[0]->dtype, LD_DTYPE_FLOAT32);
    assert_int_equal(a.tensors[0]->count, 12);
    assert_int_equal(a.tensors[1]->dtype, LD_DTYPE_INT64);
    assert_int_equal(a.tensors[2]->dtype, LD_DTYPE_BOOL);
    assert_int_equal(a.shapes[1].rank, 1);
    assert_int_equal(a.shapes[1].dims[0], 4);
    bool negative = false;
    for (int i = 0; i < 12; i++) {
        double v = ld_tensor_get_double(a.tensors[0], i);
        assert_true(v >= -1 && v <= 1);
        negative |= v < 0;
    }
    assert_true(negative); /* the global range applies to x */
    for (int i = 0; i < 4; i++) {
        double v = ld_tensor_get_double(a.tensors[1], i);
        assert_true(v >= 0 && v <= 9);
    }
    assert_int_equal(make(&b, g, "N:4", "[-1,1],ids:[0,9]", 5, 0, NULL, &err), LD_OK);
    for (int k = 0; k < 3; k++)
        assert_memory_equal(a.tensors[k]->data, b.tensors[k]->data, a.tensors[k]->nbytes);
    ld_input_set_clear(&a);
    ld_input_set_clear(&b);
    assert_null(a.tensors);

    expect_msg(make(&a, g, "N:4", "nope:[0,1]", 1, 0, NULL, &err), LD_ERR_USAGE, &err,
               "--val-range: the model has no input 'nope' (inputs: 'x', 'ids', 'mask')");
    expect_msg(make(&a, g, "N:4", "[0,1],[0,2]", 1, 0, NULL, &err), LD_ERR_USAGE, &err,
               "the global range twice");
    expect_msg(make(&a, g, "N:4", "ids:[-1,1]", 1, 0, NULL, &err), LD_OK, &err, "");
    ld_input_set_clear(&a);
    expect_msg(make(&a, g, NULL, NULL, 1, 0, NULL, &err), LD_ERR_USAGE, &err,
               "input 'x': dim 0 is symbolic ('N') and has no value; pass --input-shapes N:N or "
               "x:DIMS");
    assert_null(a.tensors);
    /* Types that cannot be generated. */
    g->values[g->inputs[1]].type.dtype = LD_DTYPE_UNDEFINED;
    expect_msg(make(&a, g, "N:1", NULL, 1, 0, NULL, &err), LD_ERR_USAGE, &err,
               "input 'ids': the model declares no element type; give its values with "
               "--load-inputs");
    g->values[g->inputs[1]].type.dtype = LD_DTYPE_STRING;
    expect_msg(make(&a, g, "N:1", NULL, 1, 0, NULL, &err), LD_ERR_UNSUPPORTED, &err,
               "input 'ids' is a string tensor");
    g->values[g->inputs[1]].type.kind = LD_TYPE_SEQUENCE;
    expect_msg(make(&a, g, "N:1", NULL, 1, 0, NULL, &err), LD_ERR_UNSUPPORTED, &err,
               "input 'ids' is a sequence, not a tensor");
    ld_graph_destroy(g);
}

/* --- loaded ----------------------------------------------------------------------------- */

static void test_load_folder(void **state)
{
    (void)state;
    ld_graph *g = three_inputs();
    const char *dir = make_folder();
    ld_input_set s = {0};
    ld_error err;
    assert_int_equal(make(&s, g, NULL, NULL, 1, 1, &dir, &err), LD_OK);
    expect_loaded(&s);
    ld_input_set_clear(&s);
    /* --input-shapes must agree with the files. */
    expect_msg(make(&s, g, "N:3", NULL, 1, 1, &dir, &err), LD_ERR_USAGE, &err,
               "symbolic dim 'N' is 3 (from --input-shapes) but 2 (from the loaded tensor for "
               "input 'x')");
    assert_int_equal(remove(ob_tmp_path("mask.npy")), 0);
    expect_msg(make(&s, g, NULL, NULL, 1, 1, &dir, &err), LD_ERR_INPUT, &err,
               "input 'mask': folder '");
    assert_non_null(strstr(err.message, "has neither mask.npy nor input_2.pb"));
    /* Wrong dtype and shape are named. */
    write_npy(ob_tmp_path("mask.npy"), "<f4", "(2,)", x_data, 8);
    expect_msg(make(&s, g, NULL, NULL, 1, 1, &dir, &err), LD_ERR_INPUT, &err,
               "input 'mask': the loaded tensor is float32, the model expects bool");
    write_npy(ob_tmp_path("mask.npy"), "|b1", "(2,)", mask_data, 2);
    write_npy(ob_tmp_path("x.npy"), "<f4", "(3, 2)", x_data, sizeof x_data);
    expect_msg(make(&s, g, NULL, NULL, 1, 1, &dir, &err), LD_ERR_INPUT, &err,
               "input 'x': the loaded tensor has shape 3x2, the model declares Nx3 (dim 1 must "
               "be 3)");
    write_npy(ob_tmp_path("x.npy"), "<f4", "(1, 3)", x_data, 12);
    expect_msg(make(&s, g, NULL, NULL, 1, 1, &dir, &err), LD_ERR_USAGE, &err,
               "symbolic dim 'N' is 1");
    ld_graph_destroy(g);
}

static void test_load_pairs(void **state)
{
    (void)state;
    ld_graph *g = three_inputs();
    make_folder();
    char *first = ob_mem(512), *second = ob_mem(512);
    snprintf(first, 512, "x:%s,ids:%s", ob_tmp_path("x.npy"), ob_tmp_path("input_1.pb"));
    snprintf(second, 512, "mask:%s", ob_tmp_path("mask.npy"));
    const char *sources[2] = {first, second};
    ld_input_set s = {0};
    ld_error err;
    assert_int_equal(make(&s, g, NULL, NULL, 1, 2, sources, &err), LD_OK);
    expect_loaded(&s);
    ld_input_set_clear(&s);
    expect_msg(make(&s, g, NULL, NULL, 1, 1, sources, &err), LD_ERR_USAGE, &err,
               "input 'mask' has no file in --load-inputs");
    const char *twice[2] = {first, first};
    expect_msg(make(&s, g, NULL, NULL, 1, 2, twice, &err), LD_ERR_USAGE, &err,
               "gives input 'x' twice");
    const char *unknown = "y:a.npy";
    expect_msg(make(&s, g, NULL, NULL, 1, 1, &unknown, &err), LD_ERR_USAGE, &err,
               "--load-inputs 'y:a.npy': the model has no input named like the part before ':' "
               "(inputs: 'x', 'ids', 'mask')");
    const char *missing = "nothing-here.npy";
    expect_msg(make(&s, g, NULL, NULL, 1, 1, &missing, &err), LD_ERR_USAGE, &err,
               "no such file or folder");
    char *absent = ob_mem(512);
    snprintf(absent, 512, "x:%s", ob_tmp_path("absent.npy"));
    expect_msg(make(&s, g, NULL, NULL, 1, 1, (const char *const *)&absent, &err), LD_ERR_IO,
               &err, "cannot open");
    const char *dir_and_pair[2] = {ob_tmpdir(), second};
    expect_msg(make(&s, g, NULL, NULL, 1, 2, dir_and_pair, &err), LD_ERR_USAGE, &err,
               "give one folder or file, or NAME:FILE pairs");
    ld_graph_destroy(g);
}

static void test_load_single_file_and_names(void **state)
{
    (void)state;
    ob_make_tmpdir();
    ld_graph *g = one_input("in/put:0");
    write_npy(ob_tmp_path("in%2Fput:0.npy"), "<f4", "(2, 3)", x_data, sizeof x_data);
    const char *dir = ob_tmpdir();
    ld_input_set s = {0};
    ld_error err;
    /* A name with '/' is looked up escaped, as in dumps. */
    assert_int_equal(make(&s, g, NULL, NULL, 1, 1, &dir, &err), LD_OK);
    assert_string_equal(s.tensors[0]->name, "in/put:0");
    ld_input_set_clear(&s);
    /* NAME:FILE with ':' inside the name. */
    char *pair = ob_mem(512);
    snprintf(pair, 512, "in/put:0:%s", ob_tmp_path("in%2Fput:0.npy"));
    assert_int_equal(make(&s, g, NULL, NULL, 1, 1, (const char *const *)&pair, &err), LD_OK);
    ld_input_set_clear(&s);
    /* One file for a one-input model, .npy or .pb. */
    const char *file = ob_tmp_path("in%2Fput:0.npy");
    assert_int_equal(make(&s, g, NULL, NULL, 1, 1, &file, &err), LD_OK);
    assert_memory_equal(s.tensors[0]->data, x_data, sizeof x_data);
    ld_input_set_clear(&s);
    int64_t d[2] = {2, 3};
    write_pb(ob_tmp_path("t.pb"), "t", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, d, x_data,
             sizeof x_data);
    file = ob_tmp_path("t.pb");
    assert_int_equal(make(&s, g, NULL, NULL, 1, 1, &file, &err), LD_OK);
    assert_string_equal(s.tensors[0]->name, "in/put:0");
    ld_input_set_clear(&s);
    ld_graph_destroy(g);
    /* ... but not for a model with three. */
    g = three_inputs();
    expect_msg(make(&s, g, NULL, NULL, 1, 1, &file, &err), LD_ERR_USAGE, &err,
               "one file can feed only a model with one input, this one has 3");
    ld_graph_destroy(g);
}

static void test_load_dump(void **state)
{
    (void)state;
    ld_graph *g = three_inputs();
    ob_make_tmpdir();
    ld_input_set gen = {0}, s = {0};
    ld_error err;
    assert_int_equal(make(&gen, g, "N:5", "[-3,3]", 9, 0, NULL, &err), LD_OK);
    const char *path = ob_tmp_path("d.h5");
    ld_dump_file_info info = {.model_path = "m.onnx", .input_seed = 9};
    ld_dump_writer *w = NULL;
    assert_int_equal(ld_dump_writer_open(&w, path, &info, NULL, &err), LD_OK);
    for (int k = 0; k < 3; k++)
        assert_int_equal(ld_dump_writer_add_input(w, gen.tensors[k], &err), LD_OK);
    assert_int_equal(ld_dump_writer_commit(w, &err), LD_OK);
    assert_int_equal(make(&s, g, NULL, NULL, 1, 1, &path, &err), LD_OK);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(s.tensors[k]->dtype, gen.tensors[k]->dtype);
        assert_true(ld_shape_equal(&s.shapes[k], &gen.shapes[k]));
        assert_memory_equal(s.tensors[k]->data, gen.tensors[k]->data, gen.tensors[k]->nbytes);
    }
    ld_input_set_clear(&s);
    /* NAME:dump.h5 takes that input from the dump. */
    char *pairs = ob_mem(1024);
    snprintf(pairs, 1024, "x:%s,ids:%s,mask:%s", path, path, path);
    assert_int_equal(make(&s, g, NULL, NULL, 1, 1, (const char *const *)&pairs, &err), LD_OK);
    ld_input_set_clear(&s);
    /* A dump lacking an input is named. */
    assert_int_equal(ld_dump_writer_open(&w, path, &info, NULL, &err), LD_OK);
    assert_int_equal(ld_dump_writer_add_input(w, gen.tensors[0], &err), LD_OK);
    assert_int_equal(ld_dump_writer_commit(w, &err), LD_OK);
    expect_msg(make(&s, g, NULL, NULL, 1, 1, &path, &err), LD_ERR_INPUT, &err,
               "input 'ids': dump '");
    assert_non_null(strstr(err.message, "has no such input (it holds 1 input)"));
    ld_input_set_clear(&gen);
    ld_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_generate),
        T(test_load_folder),
        T(test_load_pairs),
        T(test_load_single_file_and_names),
        T(test_load_dump),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
