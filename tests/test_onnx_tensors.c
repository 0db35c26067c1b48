/* Tests of TensorProto conversion in the ONNX loader (onnx/load_tensor.c):
 * every dtype through raw_data and through its typed field, malformed
 * tensors, string/complex/sparse tensors and .pb TensorProto files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "layerdiff/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "tests/support/onnx_builder.h"

static void test_bad_tensors(void **state)
{
    (void)state;
    int64_t four = 4, neg[] = {2, -3}, huge[] = {INT64_C(1) << 32, INT64_C(1) << 32};
    float f4[4] = {1, 2, 3, 4};

    Onnx__ModelProto *m = ob_relu_model();
    Onnx__TensorProto *t = ob_tensor("w", 99, 1, &four);
    ob_set_raw(t, f4, sizeof f4);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "initializer 'w': unknown data type 99");

    m = ob_relu_model();
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    ob_set_raw(t, f4, 15);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "initializer 'w': raw_data has 15 bytes");

    m = ob_relu_model();
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, neg);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "initializer 'w': negative dimension -3");

    m = ob_relu_model();
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, huge);
    ob_set_raw(t, f4, sizeof f4);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "more elements than fit in int64");

    m = ob_relu_model();
    m->graph->input[0] = ob_value_info("x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, neg);
    ob_expect_error(m, LD_ERR_INPUT, "graph input 'x': negative dimension -3");

    m = ob_relu_model();
    m->graph->input[0] = ob_value_info("x", 42, 1, &four);
    ob_expect_error(m, LD_ERR_INPUT, "graph input 'x': unknown element type 42");

    m = ob_relu_model(); /* newer than onnx 1.12: valid, but not for us */
    t = ob_tensor("w", 17, 1, &four);
    ob_set_raw(t, f4, 4);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_UNSUPPORTED, "initializer 'w': data type float8e4m3fn (17) is not "
                                        "supported");

    m = ob_relu_model(); /* 4 values announced, none given */
    OB_PUSH(m->graph->initializer, m->graph->n_initializer,
         ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four));
    ob_expect_error(m, LD_ERR_INPUT, "initializer 'w': no data");

    m = ob_relu_model();
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    t->float_data = f4;
    t->n_float_data = 3;
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "float_data has 3 values, expected 4");

    m = ob_relu_model();
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    int64_t i4[4] = {1, 2, 3, 4};
    t->int64_data = i4;
    t->n_int64_data = 4;
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "float32 data stored in int64_data (expected float_data)");

    m = ob_relu_model();
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    ob_set_raw(t, f4, sizeof f4);
    t->float_data = f4;
    t->n_float_data = 4;
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "both raw_data and float_data");

    m = ob_relu_model();
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 1, &four);
    int32_t out_of_range[4] = {1, 2, 300, 4};
    t->int32_data = out_of_range;
    t->n_int32_data = 4;
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "int32_data[2] = 300 is out of range for int8");

    m = ob_relu_model();
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    ob_set_raw(t, f4, sizeof f4);
    t->segment = ob_mem(sizeof *t->segment);
    onnx__tensor_proto__segment__init(t->segment);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_UNSUPPORTED, "segment");

    m = ob_relu_model();
    t = ob_tensor("", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &four);
    ob_set_raw(t, f4, sizeof f4);
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ob_expect_error(m, LD_ERR_INPUT, "initializer #0 has no name");
}

/* --- dtypes -------------------------------------------------------------------------- */

typedef struct dtype_case {
    int dtype;
    size_t width;
    uint8_t raw[8]; /* two little-endian elements */
    double values[2];
} dtype_case;

static const dtype_case dtype_cases[] = {
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, {0, 0, 0xc0, 0x3f, 0, 0, 0x20, 0xc1}, {1.5, -10}},
    {ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, 2, {0x00, 0x3e, 0x00, 0xc5}, {1.5, -5}},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, 2, {0xc0, 0x3f, 0x20, 0xc1}, {1.5, -10}},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT8, 1, {0x80, 0x7f}, {-128, 127}},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT8, 1, {0xff, 0x01}, {255, 1}},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, 2, {0x00, 0x80, 0x34, 0x12}, {-32768, 0x1234}},
    {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, 2, {0xff, 0xff, 0x02, 0x00}, {65535, 2}},
    {ONNX__TENSOR_PROTO__DATA_TYPE__INT32, 4, {0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0}, {-1, 7}},
    {ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 1, {1, 0}, {1, 0}},
};

static void check_tensor(const ld_tensor *t, ld_dtype dtype, const double *values)
{
    assert_int_equal(t->dtype, dtype);
    assert_int_equal(t->count, 2);
    for (int i = 0; i < 2; i++)
        if (ld_tensor_get_double(t, i) != values[i])
            fail_msg("%s[%d] = %g, expected %g", ld_dtype_name(dtype), i,
                     ld_tensor_get_double(t, i), values[i]);
}

static const ld_tensor *load_single_init(Onnx__TensorProto *t, ld_graph **g)
{
    Onnx__ModelProto *m = ob_relu_model();
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    *g = ob_load_ok(m);
    return (*g)->values[(*g)->initializers[0]].initializer;
}

static void test_every_dtype_raw_and_typed(void **state)
{
    (void)state;
    int64_t two = 2;
    for (size_t c = 0; c < sizeof dtype_cases / sizeof dtype_cases[0]; c++) {
        const dtype_case *dc = &dtype_cases[c];
        ld_graph *g;
        Onnx__TensorProto *t = ob_tensor("w", dc->dtype, 1, &two);
        ob_set_raw(t, dc->raw, 2 * dc->width);
        check_tensor(load_single_init(t, &g), (ld_dtype)dc->dtype, dc->values);
        ld_graph_destroy(g);

        /* The same values through the typed field (int32_data or float_data). */
        t = ob_tensor("w", dc->dtype, 1, &two);
        if (dc->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
            t->float_data = ob_mem(2 * sizeof(float));
            memcpy(t->float_data, dc->raw, 8);
            t->n_float_data = 2;
        } else {
            t->int32_data = ob_mem(2 * sizeof(int32_t));
            t->n_int32_data = 2;
            for (int i = 0; i < 2; i++) {
                const uint8_t *b = dc->raw + i * dc->width;
                uint32_t bits = 0;
                for (size_t k = 0; k < dc->width; k++)
                    bits |= (uint32_t)b[k] << (8 * k);
                bool is_signed = dc->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT8 ||
                                 dc->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 ||
                                 dc->dtype == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
                t->int32_data[i] = is_signed ? (int32_t)dc->values[i] : (int32_t)bits;
            }
        }
        check_tensor(load_single_init(t, &g), (ld_dtype)dc->dtype, dc->values);
        ld_graph_destroy(g);
    }

    /* 8-byte types and uint32: raw_data and their own typed fields. */
    ld_graph *g;
    int64_t i64[2] = {INT64_MIN, 42};
    uint64_t u64[2] = {UINT64_MAX, 3};
    double f64[2] = {-0.25, 1e300};
    Onnx__TensorProto *t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &two);
    ob_set_raw(t, i64, sizeof i64);
    const ld_tensor *lt = load_single_init(t, &g);
    assert_memory_equal(lt->data, i64, sizeof i64);
    ld_graph_destroy(g);
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, &two);
    t->int64_data = i64;
    t->n_int64_data = 2;
    lt = load_single_init(t, &g);
    assert_memory_equal(lt->data, i64, sizeof i64);
    ld_graph_destroy(g);

    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, 1, &two);
    t->uint64_data = u64;
    t->n_uint64_data = 2;
    lt = load_single_init(t, &g);
    assert_memory_equal(lt->data, u64, sizeof u64);
    ld_graph_destroy(g);
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, 1, &two);
    ob_set_raw(t, u64, sizeof u64);
    lt = load_single_init(t, &g);
    assert_memory_equal(lt->data, u64, sizeof u64);
    ld_graph_destroy(g);

    uint64_t u32_in[2] = {4000000000u, 5};
    uint32_t u32[2] = {4000000000u, 5};
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, 1, &two);
    t->uint64_data = u32_in;
    t->n_uint64_data = 2;
    lt = load_single_init(t, &g);
    assert_memory_equal(lt->data, u32, sizeof u32);
    ld_graph_destroy(g);
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, 1, &two);
    ob_set_raw(t, u32, sizeof u32);
    lt = load_single_init(t, &g);
    assert_memory_equal(lt->data, u32, sizeof u32);
    ld_graph_destroy(g);

    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, 1, &two);
    t->double_data = f64;
    t->n_double_data = 2;
    lt = load_single_init(t, &g);
    assert_memory_equal(lt->data, f64, sizeof f64);
    ld_graph_destroy(g);
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, 1, &two);
    ob_set_raw(t, f64, sizeof f64);
    lt = load_single_init(t, &g);
    assert_memory_equal(lt->data, f64, sizeof f64);
    ld_graph_destroy(g);

    /* A scalar and an empty tensor. */
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL);
    float one = 1.0f;
    ob_set_raw(t, &one, sizeof one);
    lt = load_single_init(t, &g);
    assert_int_equal(lt->shape.rank, 0);
    assert_int_equal(lt->count, 1);
    ld_graph_destroy(g);
    int64_t zero_dims[2] = {3, 0};
    t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, zero_dims);
    lt = load_single_init(t, &g);
    assert_int_equal(lt->count, 0);
    ld_graph_destroy(g);
}

static void test_string_and_complex_are_noted(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_relu_model();
    int64_t two = 2;
    Onnx__TensorProto *t = ob_tensor("labels", ONNX__TENSOR_PROTO__DATA_TYPE__STRING, 1, &two);
    t->string_data = ob_mem(2 * sizeof *t->string_data);
    t->string_data[0] = (ProtobufCBinaryData){3, (uint8_t *)"cat"};
    t->string_data[1] = (ProtobufCBinaryData){3, (uint8_t *)"dog"};
    t->n_string_data = 2;
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    t = ob_tensor("z", ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, 1, &two);
    float c[4] = {1, 2, 3, 4};
    t->float_data = c;
    t->n_float_data = 4;
    OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    ld_graph *g = ob_load_ok(m);
    const ld_tensor *labels = g->values[ld_graph_find_value(g, "labels")].initializer;
    assert_int_equal(labels->dtype, LD_DTYPE_STRING);
    assert_int_equal(labels->count, 2);
    assert_null(labels->data);
    assert_int_equal(g->n_notes, 2);
    assert_non_null(strstr(g->notes[0], "initializer 'labels' has dtype string"));
    assert_non_null(strstr(g->notes[1], "complex64"));
    ld_graph_destroy(g);
}

static void test_sparse_initializer_densified(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_relu_model();
    Onnx__SparseTensorProto *sp = ob_mem(sizeof *sp);
    onnx__sparse_tensor_proto__init(sp);
    int64_t nnz = 2, dims[2] = {2, 3}, coords[4] = {0, 1, 1, 2};
    sp->values = ob_tensor("s", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &nnz);
    float vals[2] = {5, 6};
    ob_set_raw(sp->values, vals, sizeof vals);
    int64_t idx_dims[2] = {2, 2};
    sp->indices = ob_tensor("", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, idx_dims);
    ob_set_raw(sp->indices, coords, sizeof coords);
    sp->dims = dims;
    sp->n_dims = 2;
    OB_PUSH(m->graph->sparse_initializer, m->graph->n_sparse_initializer, sp);
    ld_graph *g = ob_load_ok(m);
    const ld_tensor *s = g->values[ld_graph_find_value(g, "s")].initializer;
    assert_int_equal(s->count, 6);
    const double want[6] = {0, 5, 0, 0, 0, 6};
    for (int i = 0; i < 6; i++)
        assert_true(ld_tensor_get_double(s, i) == want[i]);
    ld_graph_destroy(g);

    coords[3] = 3; /* out of bounds on axis 1 */
    ob_set_raw(sp->indices, coords, sizeof coords);
    ob_expect_error(m, LD_ERR_INPUT, "sparse index 3 is out of bounds on axis 1");
}

/* --- TensorProto files ------------------------------------------------------------------ */

static void test_tensor_pb_files(void **state)
{
    (void)state;
    const char *dir = "/usr/share/libonnx-testdata/data/node/test_abs/test_data_set_0";
    char in_path[256], out_path[256];
    snprintf(in_path, sizeof in_path, "%s/input_0.pb", dir);
    snprintf(out_path, sizeof out_path, "%s/output_0.pb", dir);
    if (access(in_path, R_OK) != 0) {
        print_message("libonnx-testdata not installed (%s): skipped\n", in_path);
        skip();
    }
    ld_tensor *in = NULL, *out = NULL;
    ld_error err;
    assert_int_equal(ld_onnx_load_tensor_file(&in, in_path, &err), LD_OK);
    assert_int_equal(ld_onnx_load_tensor_file(&out, out_path, &err), LD_OK);
    assert_string_equal(in->name, "x");
    assert_int_equal(in->dtype, LD_DTYPE_FLOAT32);
    assert_int_equal(in->shape.rank, 3);
    assert_int_equal(in->shape.dims[0], 3);
    assert_int_equal(in->shape.dims[1], 4);
    assert_int_equal(in->shape.dims[2], 5);
    assert_int_equal(out->count, 60);
    int negatives = 0;
    for (int64_t i = 0; i < in->count; i++) {
        float x = ((float *)in->data)[i], y = ((float *)out->data)[i];
        negatives += x < 0;
        assert_true(y == (x < 0 ? -x : x)); /* test_abs: y = |x| */
    }
    assert_true(negatives > 0);
    ld_tensor_destroy(in);
    ld_tensor_destroy(out);

    /* From memory, and the malformed cases. */
    int64_t two = 2;
    Onnx__TensorProto *t = ob_tensor("v", ONNX__TENSOR_PROTO__DATA_TYPE__INT16, 1, &two);
    int16_t v[2] = {-3, 9};
    ob_set_raw(t, v, sizeof v);
    size_t size = onnx__tensor_proto__get_packed_size(t);
    uint8_t *buf = ob_mem(size);
    onnx__tensor_proto__pack(t, buf);
    assert_int_equal(ld_onnx_load_tensor_buffer(&in, buf, size, "v.pb", &err), LD_OK);
    assert_memory_equal(in->data, v, sizeof v);
    ld_tensor_destroy(in);
    ld_status st = ld_onnx_load_tensor_buffer(&in, buf, size - 1, "v.pb", &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, "v.pb: ", "truncated");
    st = ld_onnx_load_tensor_buffer(&in, buf, 0, "v.pb", &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, "v.pb: ", "empty file");
    st = ld_onnx_load_tensor_buffer(&in, (const uint8_t *)"hello", 5, "v.pb", &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, "v.pb: ", "not an ONNX tensor");
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
    t->has_raw_data = 0;
    size = onnx__tensor_proto__get_packed_size(t);
    onnx__tensor_proto__pack(t, buf);
    st = ld_onnx_load_tensor_buffer(&in, buf, size, "s.pb", &err);
    ob_expect_message(st, LD_ERR_UNSUPPORTED, &err, "s.pb: ", "dtype string is not supported");
}

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_bad_tensors),
        T(test_every_dtype_raw_and_typed),
        T(test_string_and_complex_are_noted),
        T(test_sparse_initializer_densified),
        T(test_tensor_pb_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
