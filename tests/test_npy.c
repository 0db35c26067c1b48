/* Tests of the .npy reader (backends/npy.c): every supported dtype and
 * format version, and hostile or broken headers, which must fail with one
 * clear line and never crash (run under ASan/UBSan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layerdiff/inputs.h"
#include "layerdiff/round.h"

/* A .npy file in memory: magic, version, header padded to 64 bytes, data. */
static uint8_t *npy_bytes(int major, const char *dict, const void *data, size_t data_len,
                          size_t *size)
{
    size_t fixed = major == 1 ? 10 : 12;
    size_t header_len = strlen(dict) + 1;
    header_len += (64 - (fixed + header_len) % 64) % 64;
    *size = fixed + header_len + data_len;
    uint8_t *b = malloc(*size);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    for (size_t i = 0; i < fixed - 8; i++)
        b[8 + i] = (uint8_t)(header_len >> (8 * i));
    memset(b + fixed, ' ', header_len);
    memcpy(b + fixed, dict, strlen(dict));
    b[fixed + header_len - 1] = '\n';
    if (data_len)
        memcpy(b + fixed + header_len, data, data_len);
    return b;
}

static ld_tensor *read_ok(const uint8_t *b, size_t size)
{
    ld_tensor *t = NULL;
    ld_error err;
    ld_status st = ld_npy_read_buffer(&t, b, size, "t.npy", "in", &err);
    if (st != LD_OK)
        fail_msg("read failed: %s", err.message);
    assert_string_equal(t->name, "in");
    return t;
}

/* Expects failure with `want` and a one-line message naming the file and
 * containing `text`. */
static void expect_error(const uint8_t *b, size_t size, ld_status want, const char *text)
{
    ld_tensor *t = NULL;
    ld_error err;
    ld_status st = ld_npy_read_buffer(&t, b, size, "bad.npy", NULL, &err);
    if (st == LD_OK) {
        ld_tensor_destroy(t);
        fail_msg("expected an error containing '%s'", text);
    }
    if (st != want)
        fail_msg("status %s, expected %s: %s", ld_status_name(st), ld_status_name(want),
                 err.message);
    if (strncmp(err.message, "bad.npy: ", 9) != 0 || !strstr(err.message, text) ||
        strchr(err.message, '\n'))
        fail_msg("message '%s' should start with 'bad.npy: ' and contain '%s'", err.message, text);
    assert_null(t);
}

static void expect_dict_error(const char *dict, ld_status want, const char *text)
{
    float data[64] = {0};
    size_t size;
    uint8_t *b = npy_bytes(1, dict, data, sizeof data, &size);
    expect_error(b, size, want, text);
    free(b);
}

static void test_every_dtype(void **state)
{
    (void)state;
    static const struct {
        const char *descr;
        ld_dtype dtype;
        size_t size;
    } cases[] = {
        {"<f4", LD_DTYPE_FLOAT32, 4}, {"<f8", LD_DTYPE_FLOAT64, 8}, {"<f2", LD_DTYPE_FLOAT16, 2},
        {"|i1", LD_DTYPE_INT8, 1},    {"<i2", LD_DTYPE_INT16, 2},   {"<i4", LD_DTYPE_INT32, 4},
        {"<i8", LD_DTYPE_INT64, 8},   {"|u1", LD_DTYPE_UINT8, 1},   {"<u2", LD_DTYPE_UINT16, 2},
        {"<u4", LD_DTYPE_UINT32, 4},  {"<u8", LD_DTYPE_UINT64, 8},  {"|b1", LD_DTYPE_BOOL, 1},
        {"<i1", LD_DTYPE_INT8, 1},    {">u1", LD_DTYPE_UINT8, 1},
    };
    uint8_t data[6 * 8];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i % 2); /* valid bools too */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char dict[128];
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }",
                 cases[c].descr);
        size_t size;
        uint8_t *b = npy_bytes(1, dict, data, 6 * cases[c].size, &size);
        ld_tensor *t = read_ok(b, size);
        assert_int_equal(t->dtype, cases[c].dtype);
        assert_int_equal(t->shape.rank, 2);
        assert_int_equal(t->shape.dims[0], 2);
        assert_int_equal(t->shape.dims[1], 3);
        assert_memory_equal(t->data, data, 6 * cases[c].size);
        ld_tensor_destroy(t);
        free(b);
    }
}

static void test_values_and_versions(void **state)
{
    (void)state;
    float values[4] = {1.5f, -2.0f, 0.25f, 1e30f};
    for (int major = 1; major <= 3; major++) {
        size_t size;
        uint8_t *b = npy_bytes(major, "{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(4,)}",
                               values, sizeof values, &size);
        ld_tensor *t = read_ok(b, size);
        assert_int_equal(t->shape.rank, 1);
        assert_int_equal(t->count, 4);
        for (int i = 0; i < 4; i++)
            assert_true(((float *)t->data)[i] == values[i]);
        ld_tensor_destroy(t);
        free(b);
    }
    /* float16 bit patterns come through unchanged. */
    uint16_t half[2] = {0x3C00, 0xFC00}; /* 1.0, -inf */
    size_t size;
    uint8_t *b = npy_bytes(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", half,
                           sizeof half, &size);
    ld_tensor *t = read_ok(b, size);
    assert_true(ld_tensor_get_double(t, 0) == 1.0);
    assert_true(ld_tensor_get_double(t, 1) < -1e300);
    ld_tensor_destroy(t);
    free(b);
}

static void test_scalar_and_empty_shapes(void **state)
{
    (void)state;
    double one = 1.0;
    size_t size;
    uint8_t *b = npy_bytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", &one,
                           sizeof one, &size);
    ld_tensor *t = read_ok(b, size);
    assert_int_equal(t->shape.rank, 0);
    assert_int_equal(t->count, 1);
    assert_true(((double *)t->data)[0] == 1.0);
    ld_tensor_destroy(t);
    free(b);

    b = npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", NULL, 0, &size);
    t = read_ok(b, size);
    assert_int_equal(t->shape.rank, 2);
    assert_int_equal(t->count, 0);
    ld_tensor_destroy(t);
    free(b);

    /* Python 2 wrote longs with an L suffix; key order does not matter. */
    int64_t v[3] = {1, -2, 3};
    b = npy_bytes(1, "{'shape': (3L,), 'fortran_order': False, 'descr': '<i8'}", v, sizeof v, &size);
    t = read_ok(b, size);
    assert_int_equal(t->count, 3);
    assert_int_equal(((int64_t *)t->data)[1], -2);
    ld_tensor_destroy(t);
    free(b);
}

static void test_unsupported_layouts(void **state)
{
    (void)state;
    expect_dict_error("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
                      LD_ERR_UNSUPPORTED, "Fortran order");
    expect_dict_error("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
                      LD_ERR_UNSUPPORTED, "big-endian");
    expect_dict_error("{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }",
                      LD_ERR_UNSUPPORTED, "'<U3' is not supported");
    expect_dict_error("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
                      LD_ERR_UNSUPPORTED, "not supported");
    expect_dict_error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                      LD_ERR_UNSUPPORTED, "structured");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': "
                      "(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }",
                      LD_ERR_UNSUPPORTED, "more than 16 dimensions");
}

static void test_malformed_headers(void **state)
{
    (void)state;
    expect_dict_error("{'descr': '<f4', 'shape': (2,), }", LD_ERR_INPUT, "needs the keys");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
                      LD_ERR_INPUT, "unexpected or repeated key");
    expect_dict_error("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
                      LD_ERR_INPUT, "unexpected or repeated key");
    expect_dict_error("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", LD_ERR_INPUT,
                      "expected ',' or '}'");
    expect_dict_error("{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}", LD_ERR_INPUT,
                      "expected ':'");
    expect_dict_error("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,)}", LD_ERR_INPUT,
                      "fortran_order");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", LD_ERR_INPUT,
                      "not a tuple");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", LD_ERR_INPUT,
                      "non-negative integer");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", LD_ERR_INPUT,
                      "expected ',' or ')'");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                      LD_ERR_INPUT, "overflows int64");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                      "4294967296)}", LD_ERR_INPUT, "");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} trailing",
                      LD_ERR_INPUT, "text after the dict");
    expect_dict_error("descr: <f4", LD_ERR_INPUT, "does not start with '{'");
    expect_dict_error("{'descr': 'a\\'b', 'fortran_order': False, 'shape': (2,)}", LD_ERR_INPUT,
                      "escapes");
    expect_dict_error("{'descrdescrdescrdescrdescrdescrdescr': '<f4'}", LD_ERR_INPUT, "too long");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", LD_ERR_INPUT,
                      "expected");
    expect_dict_error("{'descr': '<f4', 'fortran_order': False, 'shape': (",
                      LD_ERR_INPUT, "");
}

static void test_sizes_and_bounds(void **state)
{
    (void)state;
    float data[4] = {0};
    size_t size;
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    /* Short and long data. */
    uint8_t *b = npy_bytes(1, dict, data, 8, &size);
    expect_error(b, size, LD_ERR_INPUT, "data is 8 bytes, but shape 3 of float32 needs 12");
    free(b);
    b = npy_bytes(1, dict, data, 16, &size);
    expect_error(b, size, LD_ERR_INPUT, "data is 16 bytes");
    free(b);
    /* Truncated anywhere in the fixed part or header. */
    b = npy_bytes(1, dict, data, 12, &size);
    for (size_t cut = 0; cut < size - 12; cut++) {
        ld_tensor *t = NULL;
        ld_error err;
        assert_int_not_equal(ld_npy_read_buffer(&t, b, cut, "cut.npy", NULL, &err), LD_OK);
        assert_null(t);
    }
    /* A header length beyond the file, and beyond the limit. */
    b[8] = 0xFF;
    b[9] = 0xFF;
    expect_error(b, size, LD_ERR_INPUT, "truncated .npy header");
    free(b);
    b = npy_bytes(2, dict, data, 12, &size);
    b[11] = 0x7F;
    expect_error(b, size, LD_ERR_INPUT, "exceeds");
    b[6] = 4;
    expect_error(b, size, LD_ERR_UNSUPPORTED, "version 4.0");
    b[0] = 'X';
    expect_error(b, size, LD_ERR_INPUT, "not a .npy file");
    free(b);
    /* A NUL byte inside the header. */
    b = npy_bytes(1, dict, data, 12, &size);
    b[20] = '\0';
    expect_error(b, size, LD_ERR_INPUT, "NUL");
    free(b);
    /* Bool bytes other than 0 and 1. */
    uint8_t bools[3] = {0, 1, 2};
    b = npy_bytes(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bools, 3, &size);
    expect_error(b, size, LD_ERR_INPUT, "bool element 2 is 2");
    free(b);
}

/* Random byte flips and truncations of valid files: every outcome is fine
 * except a crash, a sanitizer report or a success with a wrong size. */
static void test_mutations_do_not_crash(void **state)
{
    (void)state;
    int64_t data[6] = {1, 2, 3, 4, 5, 6};
    size_t size;
    uint8_t *valid = npy_bytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }",
                               data, sizeof data, &size);
    uint8_t *b = malloc(size);
    assert_non_null(b);
    uint64_t x = 12345;
    int ok = 0, failed = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(b, valid, size);
        int flips = 1 + (int)(ld_splitmix64(&x) % 4);
        for (int f = 0; f < flips; f++) {
            size_t pos = (size_t)(ld_splitmix64(&x) % 80); /* fixed part and header */
            b[pos] = (uint8_t)ld_splitmix64(&x);
        }
        size_t len = iter % 5 == 0 ? (size_t)(ld_splitmix64(&x) % (size + 1)) : size;
        ld_tensor *t = NULL;
        ld_error err;
        if (ld_npy_read_buffer(&t, b, len, "m.npy", NULL, &err) == LD_OK) {
            assert_true(t->nbytes <= len);
            ld_tensor_destroy(t);
            ok++;
        } else {
            assert_true(err.message[0] != '\0');
            assert_null(strchr(err.message, '\n'));
            failed++;
        }
    }
    assert_true(failed > 0);
    free(b);
    free(valid);
}

static void test_read_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/ld_test_npy_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/a.npy", dir);
    int32_t data[5] = {5, 4, 3, 2, 1};
    size_t size;
    uint8_t *b = npy_bytes(3, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", data,
                           sizeof data, &size);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
    ld_tensor *t = NULL;
    ld_error err;
    assert_int_equal(ld_npy_read_file(&t, path, "x", &err), LD_OK);
    assert_int_equal(t->dtype, LD_DTYPE_INT32);
    assert_memory_equal(t->data, data, sizeof data);
    assert_string_equal(t->name, "x");
    ld_tensor_destroy(t);
    /* Truncated on disk: the size check happens before reading data. */
    assert_int_equal(truncate(path, (off_t)size - 1), 0);
    t = NULL;
    assert_int_equal(ld_npy_read_file(&t, path, "x", &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, path));
    assert_null(t);
    assert_int_equal(ld_npy_read_file(&t, dir, "x", &err), LD_ERR_IO);
    assert_non_null(strstr(err.message, "not a regular file"));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(ld_npy_read_file(&t, path, "x", &err), LD_ERR_IO);
    assert_non_null(strstr(err.message, "cannot open"));
    assert_int_equal(rmdir(dir), 0);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_dtype),
        cmocka_unit_test(test_values_and_versions),
        cmocka_unit_test(test_scalar_and_empty_shapes),
        cmocka_unit_test(test_unsupported_layouts),
        cmocka_unit_test(test_malformed_headers),
        cmocka_unit_test(test_sizes_and_bounds),
        cmocka_unit_test(test_mutations_do_not_crash),
        cmocka_unit_test(test_read_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
