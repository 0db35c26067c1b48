/* Tests of model inputs (backends/inputs.c, backends/inputs_load.c): the
 * PRNG against reference values computed independently (Python), value
 * ranges per dtype, --input-shapes / --val-range parsing, shape resolution
 * with symbolic and unknown dims, and loading from folders, files, NAME:FILE
 * pairs and dumps with every mismatch named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* --- PRNG ------------------------------------------------------------------------ */

static void test_rng_reference_values(void **state)
{
    (void)state;
    /* splitmix64 from 0 (the reference implementation's well-known first outputs). */
    uint64_t x = 0;
    assert_true(ld_splitmix64(&x) == 0xe220a8397b1dcdafu);
    assert_true(ld_splitmix64(&x) == 0x6e789e6aa1b965f4u);
    /* xoshiro256** seeded with 1 through splitmix64 (computed in Python). */
    static const uint64_t want[4] = {0xb3f2af6d0fc710c5u, 0x853b559647364ceau,
                                     0x92f89756082a4514u, 0x642e1c7bc266a3a7u};
    ld_rng rng;
    ld_rng_seed(&rng, 1);
    for (int i = 0; i < 4; i++)
        assert_true(ld_rng_next(&rng) == want[i]);
    /* Input "x" under seed 1, float32 in [0, 1]. */
    static const float xs[4] = {0x1.385ff8p-1f, 0x1.3f006cp-1f, 0x1.885e28p-1f, 0x1.7b45c2p-2f};
    int64_t dims[1] = {4};
    ld_shape shape;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, 1, dims, &err), LD_OK);
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_create(&t, "x", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    assert_int_equal(ld_inputs_fill_random(t, 1, (ld_value_range){0, 1}, &err), LD_OK);
    for (int i = 0; i < 4; i++)
        assert_true(((float *)t->data)[i] == xs[i]);
    ld_tensor_destroy(t);
}

static void test_rng_below(void **state)
{
    (void)state;
    ld_rng rng;
    ld_rng_seed(&rng, 7);
    int seen[7] = {0};
    for (int i = 0; i < 7000; i++) {
        uint64_t v = ld_rng_below(&rng, 7);
        assert_true(v < 7);
        seen[v]++;
    }
    for (int i = 0; i < 7; i++)
        assert_true(seen[i] > 800 && seen[i] < 1200);
    assert_true(ld_rng_below(&rng, 1) == 0);
    (void)ld_rng_below(&rng, 0); /* full range: any value */
    /* A span just above 2^63 rejects about half the draws and still ends. */
    for (int i = 0; i < 100; i++)
        assert_true(ld_rng_below(&rng, (1ull << 63) + 1) <= (1ull << 63));
}

/* --- filling ----------------------------------------------------------------------- */

static ld_tensor *make(const char *name, ld_dtype dtype, int64_t n)
{
    ld_shape shape;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, 1, &n, &err), LD_OK);
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_create(&t, name, dtype, &shape, &err), LD_OK);
    return t;
}

static void test_fill_ranges_per_dtype(void **state)
{
    (void)state;
    ld_error err;
    static const ld_dtype floats[] = {LD_DTYPE_FLOAT32, LD_DTYPE_FLOAT64, LD_DTYPE_FLOAT16,
                                      LD_DTYPE_BFLOAT16};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        ld_tensor *t = make("f", floats[i], 5000);
        assert_int_equal(ld_inputs_fill_random(t, 3, (ld_value_range){-2, 3}, &err), LD_OK);
        double lo = 1e9, hi = -1e9;
        for (int64_t k = 0; k < t->count; k++) {
            double v = ld_tensor_get_double(t, k);
            lo = fmin(lo, v);
            hi = fmax(hi, v);
        }
        assert_true(lo >= -2 && lo < -1.9 && hi <= 3 && hi > 2.9);
        ld_tensor_destroy(t);
    }
    static const ld_dtype ints[] = {LD_DTYPE_INT8,   LD_DTYPE_INT16,  LD_DTYPE_INT32,
                                    LD_DTYPE_INT64,  LD_DTYPE_UINT8,  LD_DTYPE_UINT16,
                                    LD_DTYPE_UINT32, LD_DTYPE_UINT64};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        ld_tensor *t = make("i", ints[i], 2000);
        bool is_signed = i < 4;
        ld_value_range r = is_signed ? (ld_value_range){-3.5, 2.2} : (ld_value_range){0.5, 4.9};
        assert_int_equal(ld_inputs_fill_random(t, 3, r, &err), LD_OK);
        int seen[16] = {0};
        for (int64_t k = 0; k < t->count; k++) {
            double v = ld_tensor_get_double(t, k);
            int lo = is_signed ? -3 : 1, hi = is_signed ? 2 : 4;
            assert_true(v == floor(v) && v >= lo && v <= hi);
            seen[(int)v + 8]++;
        }
        /* Both ends of the inclusive range occur. */
        assert_true(seen[is_signed ? 5 : 9] > 0 && seen[is_signed ? 10 : 12] > 0);
        ld_tensor_destroy(t);
    }
    ld_tensor *b = make("b", LD_DTYPE_BOOL, 1000);
    assert_int_equal(ld_inputs_fill_random(b, 3, (ld_value_range){5, 6}, &err), LD_OK);
    int ones = 0;
    for (int k = 0; k < 1000; k++) {
        uint8_t v = ((uint8_t *)b->data)[k];
        assert_true(v <= 1);
        ones += v;
    }
    assert_true(ones > 400 && ones < 600);
    ld_tensor_destroy(b);
    /* The whole int64 range works (span wraps to 0 = every value). */
    ld_tensor *w = make("w", LD_DTYPE_UINT64, 10);
    assert_int_equal(ld_inputs_fill_random(w, 3, (ld_value_range){0, 1.8e19}, &err), LD_OK);
    ld_tensor_destroy(w);
}

static void test_fill_is_deterministic_per_name(void **state)
{
    (void)state;
    ld_error err;
    ld_tensor *a = make("input", LD_DTYPE_FLOAT32, 64), *b = make("input", LD_DTYPE_FLOAT32, 64);
    ld_tensor *c = make("other", LD_DTYPE_FLOAT32, 64), *d = make("input", LD_DTYPE_FLOAT32, 64);
    ld_value_range r = {0, 1};
    assert_int_equal(ld_inputs_fill_random(a, 42, r, &err), LD_OK);
    assert_int_equal(ld_inputs_fill_random(b, 42, r, &err), LD_OK);
    assert_int_equal(ld_inputs_fill_random(c, 42, r, &err), LD_OK);
    assert_int_equal(ld_inputs_fill_random(d, 43, r, &err), LD_OK);
    assert_memory_equal(a->data, b->data, a->nbytes);
    assert_memory_not_equal(a->data, c->data, a->nbytes);
    assert_memory_not_equal(a->data, d->data, a->nbytes);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
    ld_tensor_destroy(c);
    ld_tensor_destroy(d);
}

static void test_fill_range_errors(void **state)
{
    (void)state;
    ld_error err;
    ld_tensor *h = make("h", LD_DTYPE_FLOAT16, 4);
    expect_msg(ld_inputs_fill_random(h, 1, (ld_value_range){0, 70000}, &err), LD_ERR_USAGE, &err,
               "input 'h' (float16): value range [0, 70000] leaves the type's finite range");
    expect_msg(ld_inputs_fill_random(h, 1, (ld_value_range){2, 1}, &err), LD_ERR_USAGE, &err,
               "lo <= hi");
    expect_msg(ld_inputs_fill_random(h, 1, (ld_value_range){-1e308, 1e308}, &err), LD_ERR_USAGE,
               &err, "finite");
    ld_tensor_destroy(h);
    ld_tensor *u = make("u", LD_DTYPE_UINT8, 4);
    expect_msg(ld_inputs_fill_random(u, 1, (ld_value_range){-1, 1}, &err), LD_ERR_USAGE, &err,
               "input 'u' (uint8): value range [-1, 1] leaves the type's range");
    expect_msg(ld_inputs_fill_random(u, 1, (ld_value_range){0.2, 0.8}, &err), LD_ERR_USAGE, &err,
               "holds no integer");
    expect_msg(ld_inputs_fill_random(u, 1, (ld_value_range){0, 256}, &err), LD_ERR_USAGE, &err,
               "leaves the type's range");
    assert_int_equal(ld_inputs_fill_random(u, 1, (ld_value_range){0, 255}, &err), LD_OK);
    ld_tensor_destroy(u);
    ld_tensor *l = make("l", LD_DTYPE_INT64, 4);
    expect_msg(ld_inputs_fill_random(l, 1, (ld_value_range){0, 1e19}, &err), LD_ERR_USAGE, &err,
               "leaves the type's range");
    ld_tensor_destroy(l);
}

/* --- parsing ----------------------------------------------------------------------- */

static void test_parse_shapes(void **state)
{
    (void)state;
    ld_input_shape_arg *a = NULL;
    int n = 0;
    ld_error err;
    assert_int_equal(ld_inputs_parse_shapes("x:1x3x224x224,batch:2,in:put:0:4X5,s:scalar", &a,
                                            &n, &err), LD_OK);
    assert_int_equal(n, 4);
    assert_string_equal(a[0].name, "x");
    assert_int_equal(a[0].shape.rank, 4);
    assert_int_equal(a[0].shape.dims[3], 224);
    assert_string_equal(a[1].name, "batch");
    assert_int_equal(a[1].shape.rank, 1);
    assert_int_equal(a[1].shape.dims[0], 2);
    assert_string_equal(a[2].name, "in:put:0");
    assert_int_equal(a[2].shape.dims[1], 5);
    assert_int_equal(a[3].shape.rank, 0);
    ld_input_shape_args_free(a, n);
    static const char *bad[] = {"x", "x:", ":3", "x:3x", "x:3xx4", "x:-1", "x:1,,y:2", "x:abc",
                                "x:1x2x3x4x5x6x7x8x9x10x11x12x13x14x15x16x17",
                                "x:99999999999999999999", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a = NULL;
        ld_status st = ld_inputs_parse_shapes(bad[i], &a, &n, &err);
        if (st != LD_ERR_USAGE)
            fail_msg("'%s' parsed", bad[i]);
        assert_non_null(strstr(err.message, "--input-shapes"));
        assert_null(a);
    }
}

static void test_parse_ranges(void **state)
{
    (void)state;
    ld_input_range_arg *a = NULL;
    int n = 0;
    ld_error err;
    assert_int_equal(ld_inputs_parse_ranges("[-1,1],ids:[0,999],a:b:[1e-3,2.5]", &a, &n, &err),
                     LD_OK);
    assert_int_equal(n, 3);
    assert_null(a[0].name);
    assert_true(a[0].range.lo == -1 && a[0].range.hi == 1);
    assert_string_equal(a[1].name, "ids");
    assert_true(a[1].range.hi == 999);
    assert_string_equal(a[2].name, "a:b");
    assert_true(a[2].range.lo == 1e-3 && a[2].range.hi == 2.5);
    ld_input_range_args_free(a, n);
    static const char *bad[] = {"0,1", "[1,0]", "[0,1", "[0 1]", "[nan,1]", "[0,inf]", ":[0,1]",
                                "x:[0,1]junk", "[a,b]", "[0,1],,[0,2]", "[-1e308,1e308]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        a = NULL;
        if (ld_inputs_parse_ranges(bad[i], &a, &n, &err) != LD_ERR_USAGE)
            fail_msg("'%s' parsed", bad[i]);
        assert_non_null(strstr(err.message, "--val-range"));
        assert_null(a);
    }
}

/* --- shape resolution ----------------------------------------------------------------- */

static void set_param(ld_graph *g, const char *input, int d, const char *param)
{
    ld_value *v = &g->values[ld_graph_find_value(g, input)];
    free(v->type.dims[d].param);
    v->type.dims[d].param = param ? strdup(param) : NULL;
}

/* x [batch, 3, H] float32, y [batch, ?] int64, z int64 without shape. */
static ld_graph *dynamic_graph(bool with_z)
{
    Onnx__ModelProto *m = ob_model();
    int64_t xd[] = {-1, 3, -1}, yd[] = {-1, -1};
    ob_input(m->graph, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, xd);
    ob_input(m->graph, "y", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, yd);
    if (with_z)
        ob_input(m->graph, "z", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, -1, NULL);
    ob_node(m->graph, "Identity", "ix", "x", "x_out");
    ob_node(m->graph, "Identity", "iy", "y", "y_out");
    ob_output(m->graph, "x_out", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    ob_output(m->graph, "y_out", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    ld_graph *g = ob_load_ok(m);
    set_param(g, "x", 0, "batch");
    set_param(g, "x", 2, "H");
    set_param(g, "y", 0, "batch");
    set_param(g, "y", 1, NULL); /* unnamed dynamic dim */
    return g;
}

static ld_status resolve(const ld_graph *g, const char *text, const ld_tensor *const *loaded,
                         ld_shape *out, ld_error *err)
{
    ld_input_shape_arg *a = NULL;
    int n = 0;
    ld_status st = ld_inputs_parse_shapes(text, &a, &n, err);
    if (st == LD_OK)
        st = ld_inputs_resolve_shapes(g, a, n, loaded, out, err);
    ld_input_shape_args_free(a, n);
    return st;
}

static void test_resolve_shapes(void **state)
{
    (void)state;
    ld_graph *g = dynamic_graph(false);
    ld_shape s[2];
    ld_error err;
    assert_int_equal(resolve(g, "batch:2,H:5,y:2x7", NULL, s, &err), LD_OK);
    assert_int_equal(s[0].rank, 3);
    assert_int_equal(s[0].dims[0], 2);
    assert_int_equal(s[0].dims[1], 3);
    assert_int_equal(s[0].dims[2], 5);
    assert_int_equal(s[1].dims[1], 7);
    /* Whole shapes bind symbolic dims for the other inputs. */
    assert_int_equal(resolve(g, "x:4x3x9,y:4x1", NULL, s, &err), LD_OK);
    assert_int_equal(s[1].dims[0], 4);
    expect_msg(resolve(g, "H:5", NULL, s, &err), LD_ERR_USAGE, &err,
               "input 'x': dim 0 is symbolic ('batch') and has no value; pass --input-shapes "
               "batch:N or x:DIMS");
    expect_msg(resolve(g, "batch:2,H:5", NULL, s, &err), LD_ERR_USAGE, &err,
               "input 'y': dim 1 is dynamic (unnamed) and has no value; pass --input-shapes y:DIMS");
    expect_msg(resolve(g, "x:2x4x5,y:2x1", NULL, s, &err), LD_ERR_INPUT, &err,
               "input 'x': --input-shapes has shape 2x4x5, the model declares batchx3xH (dim 1 "
               "must be 3)");
    expect_msg(resolve(g, "x:2x3,y:2x1", NULL, s, &err), LD_ERR_INPUT, &err, "rank 2");
    expect_msg(resolve(g, "x:2x3x5,y:3x1", NULL, s, &err), LD_ERR_USAGE, &err,
               "symbolic dim 'batch' is 2");
    expect_msg(resolve(g, "batch:2,x:3x3x3,y:3x1", NULL, s, &err), LD_ERR_USAGE, &err,
               "symbolic dim 'batch'");
    expect_msg(resolve(g, "nope:2", NULL, s, &err), LD_ERR_USAGE, &err,
               "no input or symbolic dim named 'nope' (inputs: 'x', 'y')");
    expect_msg(resolve(g, "batch:2x2", NULL, s, &err), LD_ERR_USAGE, &err, "give one number");
    expect_msg(resolve(g, "batch:2,batch:2", NULL, s, &err), LD_ERR_USAGE, &err, "twice");
    /* Loaded tensors give shapes and bind dims; contradictions are named. */
    ld_tensor *y = make("y", LD_DTYPE_INT64, 6);
    y->shape.rank = 2;
    y->shape.dims[0] = 3;
    y->shape.dims[1] = 2;
    const ld_tensor *loaded[2] = {NULL, y};
    assert_int_equal(resolve(g, "H:1", loaded, s, &err), LD_OK);
    assert_int_equal(s[0].dims[0], 3);
    expect_msg(resolve(g, "H:1,y:3x3", loaded, s, &err), LD_ERR_USAGE, &err,
               "input 'y': the loaded tensor has shape 3x2 but --input-shapes says 3x3");
    expect_msg(resolve(g, "batch:5,H:1", loaded, s, &err), LD_ERR_USAGE, &err,
               "symbolic dim 'batch' is 5 (from --input-shapes) but 3 (from the loaded tensor "
               "for input 'y')");
    ld_tensor_destroy(y);
    ld_graph_destroy(g);

    g = dynamic_graph(true);
    ld_shape s3[3];
    expect_msg(resolve(g, "batch:1,H:1,y:1x1", NULL, s3, &err), LD_ERR_USAGE, &err,
               "input 'z': the model declares no shape; pass --input-shapes z:DIMS");
    assert_int_equal(resolve(g, "batch:1,H:1,y:1x1,z:scalar", NULL, s3, &err), LD_OK);
    assert_int_equal(s3[2].rank, 0);
    ld_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rng_reference_values),
        cmocka_unit_test(test_rng_below),
        cmocka_unit_test(test_fill_ranges_per_dtype),
        cmocka_unit_test(test_fill_is_deterministic_per_name),
        cmocka_unit_test(test_fill_range_errors),
        cmocka_unit_test(test_parse_shapes),
        cmocka_unit_test(test_parse_ranges),
        T(test_resolve_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
