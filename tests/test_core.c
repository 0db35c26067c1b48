/* Unit tests for core/: errors, dtypes, tensors and shapes, SHA-256. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <locale.h>
#include <wchar.h>
#include "core/utf8.h"

#include "layerdiff/dtype.h"
#include "layerdiff/error.h"
#include "layerdiff/sha256.h"
#include "layerdiff/tensor.h"

static void test_error_set_and_prefix(void **state)
{
    (void)state;
    ld_error err;
    ld_error_clear(&err);
    assert_int_equal(err.status, LD_OK);
    assert_int_equal(ld_error_set(&err, LD_ERR_INPUT, "node '%s': bad\nthing", "conv1"),
                     LD_ERR_INPUT);
    assert_string_equal(err.message, "node 'conv1': bad thing");
    assert_int_equal(ld_error_prefix(&err, "%s", "model.onnx"), LD_ERR_INPUT);
    assert_string_equal(err.message, "model.onnx: node 'conv1': bad thing");
    /* NULL error objects are allowed and still return the status. */
    assert_int_equal(ld_error_set(NULL, LD_ERR_IO, "x"), LD_ERR_IO);
}

static void test_error_long_message_truncates(void **state)
{
    (void)state;
    ld_error err;
    char big[4000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ld_error_set(&err, LD_ERR_INPUT, "%s", big);
    assert_int_equal(strlen(err.message), LD_ERROR_MESSAGE_SIZE - 1);
    ld_error_prefix(&err, "file");
    assert_int_equal(strlen(err.message), LD_ERROR_MESSAGE_SIZE - 1);
    assert_memory_equal(err.message, "file: aaa", 9);
}

static void test_exit_codes(void **state)
{
    (void)state;
    assert_int_equal(ld_status_exit_code(LD_OK), 0);
    assert_int_equal(ld_status_exit_code(LD_ERR_MISMATCH), 1);
    assert_int_equal(ld_status_exit_code(LD_ERR_USAGE), 2);
    assert_int_equal(ld_status_exit_code(LD_ERR_INPUT), 2);
    assert_int_equal(ld_status_exit_code(LD_ERR_IO), 2);
    assert_int_equal(ld_status_exit_code(LD_ERR_UNSUPPORTED), 2);
    assert_int_equal(ld_status_exit_code(LD_ERR_INTERNAL), 3);
    assert_int_equal(ld_status_exit_code(LD_ERR_INTERRUPTED), 130);
    assert_string_equal(ld_status_name(LD_ERR_INPUT), "bad input");
}

static void test_dtype_table(void **state)
{
    (void)state;
    static const struct { ld_dtype d; size_t size; const char *name; } expect[] = {
        {LD_DTYPE_FLOAT32, 4, "float32"}, {LD_DTYPE_FLOAT16, 2, "float16"},
        {LD_DTYPE_BFLOAT16, 2, "bfloat16"}, {LD_DTYPE_FLOAT64, 8, "float64"},
        {LD_DTYPE_INT8, 1, "int8"}, {LD_DTYPE_INT16, 2, "int16"},
        {LD_DTYPE_INT32, 4, "int32"}, {LD_DTYPE_INT64, 8, "int64"},
        {LD_DTYPE_UINT8, 1, "uint8"}, {LD_DTYPE_UINT16, 2, "uint16"},
        {LD_DTYPE_UINT32, 4, "uint32"}, {LD_DTYPE_UINT64, 8, "uint64"},
        {LD_DTYPE_BOOL, 1, "bool"}, {LD_DTYPE_STRING, 0, "string"},
        {LD_DTYPE_COMPLEX64, 0, "complex64"},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        assert_int_equal(ld_dtype_size(expect[i].d), expect[i].size);
        assert_string_equal(ld_dtype_name(expect[i].d), expect[i].name);
        ld_dtype parsed;
        assert_true(ld_dtype_from_name(expect[i].name, &parsed));
        assert_int_equal(parsed, expect[i].d);
        assert_int_equal(ld_dtype_is_supported(expect[i].d), expect[i].size > 0);
    }
    assert_int_equal(ld_dtype_size((ld_dtype)99), 0);
    assert_string_equal(ld_dtype_name((ld_dtype)99), "undefined");
    assert_false(ld_dtype_is_known((ld_dtype)99));
    assert_false(ld_dtype_is_known(LD_DTYPE_UNDEFINED));
    ld_dtype d;
    assert_true(ld_dtype_from_name("fp16", &d));
    assert_int_equal(d, LD_DTYPE_FLOAT16);
    assert_true(ld_dtype_from_name("bf16", &d));
    assert_int_equal(d, LD_DTYPE_BFLOAT16);
    assert_false(ld_dtype_from_name("float8", &d));
    assert_false(ld_dtype_from_name(NULL, &d));
    assert_true(ld_dtype_is_float(LD_DTYPE_BFLOAT16));
    assert_false(ld_dtype_is_float(LD_DTYPE_INT32));
    assert_true(ld_dtype_is_signed_int(LD_DTYPE_INT8));
    assert_true(ld_dtype_is_unsigned_int(LD_DTYPE_UINT64));
    assert_false(ld_dtype_is_unsigned_int(LD_DTYPE_BOOL));
}

static void test_shape_count_and_overflow(void **state)
{
    (void)state;
    ld_error err;
    ld_shape s;
    int64_t n;
    int64_t dims[] = {2, 3, 4};
    assert_int_equal(ld_shape_set(&s, 3, dims, &err), LD_OK);
    assert_int_equal(ld_shape_count(&s, &n, "t", &err), LD_OK);
    assert_int_equal(n, 24);

    ld_shape scalar = {.rank = 0};
    assert_int_equal(ld_shape_count(&scalar, &n, "t", &err), LD_OK);
    assert_int_equal(n, 1);

    int64_t zero[] = {5, 0, 7};
    ld_shape_set(&s, 3, zero, &err);
    assert_int_equal(ld_shape_count(&s, &n, "t", &err), LD_OK);
    assert_int_equal(n, 0);

    int64_t negative[] = {2, -1};
    ld_shape_set(&s, 2, negative, &err);
    assert_int_equal(ld_shape_count(&s, &n, "w", &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "negative dimension -1"));
    assert_non_null(strstr(err.message, "w:"));

    int64_t huge[] = {INT64_C(1) << 32, INT64_C(1) << 32};
    ld_shape_set(&s, 2, huge, &err);
    assert_int_equal(ld_shape_count(&s, &n, "w", &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "int64"));
    /* Overflow hidden behind a zero dim is still a valid (empty) shape. */
    int64_t huge_zero[] = {INT64_C(1) << 62, 0, INT64_C(1) << 62};
    ld_shape_set(&s, 3, huge_zero, &err);
    assert_int_equal(ld_shape_count(&s, &n, "w", &err), LD_OK);
    assert_int_equal(n, 0);

    int64_t many[LD_MAX_RANK + 1] = {0};
    assert_int_equal(ld_shape_set(&s, LD_MAX_RANK + 1, many, &err), LD_ERR_UNSUPPORTED);
    assert_int_equal(ld_shape_set(&s, -1, many, &err), LD_ERR_UNSUPPORTED);

    size_t bytes;
    assert_int_equal(ld_shape_nbytes(INT64_MAX / 2, 8, &bytes, "w", &err), LD_ERR_NOMEM);
    assert_int_equal(ld_shape_nbytes(10, 8, &bytes, "w", &err), LD_OK);
    assert_int_equal(bytes, 80);
}

static void test_shape_format_and_equal(void **state)
{
    (void)state;
    ld_error err;
    ld_shape a, b;
    int64_t d1[] = {1, 3, 224, 224};
    ld_shape_set(&a, 4, d1, &err);
    char buf[64];
    assert_string_equal(ld_shape_format(&a, buf, sizeof buf), "1x3x224x224");
    char tiny[5];
    assert_string_equal(ld_shape_format(&a, tiny, sizeof tiny), "1x3x");
    ld_shape scalar = {.rank = 0};
    assert_string_equal(ld_shape_format(&scalar, buf, sizeof buf), "scalar");
    b = a;
    assert_true(ld_shape_equal(&a, &b));
    b.dims[3] = 225;
    assert_false(ld_shape_equal(&a, &b));
    b.rank = 3;
    assert_false(ld_shape_equal(&a, &b));
}

static void test_tensor_lifecycle(void **state)
{
    (void)state;
    ld_error err;
    ld_shape s;
    int64_t dims[] = {2, 3};
    ld_shape_set(&s, 2, dims, &err);
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_create(&t, "/enc/layer.0/Add_output_0", LD_DTYPE_FLOAT32, &s, &err),
                     LD_OK);
    assert_int_equal(t->count, 6);
    assert_int_equal(t->nbytes, 24);
    assert_string_equal(t->name, "/enc/layer.0/Add_output_0");
    float *f = t->data;
    for (int i = 0; i < 6; i++) {
        assert_true(f[i] == 0.0f);
        f[i] = (float)i * 0.5f;
    }
    ld_tensor *c = NULL;
    assert_int_equal(ld_tensor_clone(&c, t, "copy", &err), LD_OK);
    assert_string_equal(c->name, "copy");
    assert_memory_equal(c->data, t->data, 24);
    assert_ptr_not_equal(c->data, t->data);
    assert_true(ld_tensor_get_double(c, 5) == 2.5);
    assert_int_equal(ld_tensor_set_name(c, NULL, &err), LD_OK);
    assert_string_equal(c->name, "");
    ld_tensor_destroy(c);
    ld_tensor_destroy(t);
    ld_tensor_destroy(NULL);

    /* Zero-size tensors need no buffer. */
    int64_t zero[] = {0, 4};
    ld_shape_set(&s, 2, zero, &err);
    assert_int_equal(ld_tensor_create(&t, NULL, LD_DTYPE_INT64, &s, &err), LD_OK);
    assert_int_equal(t->count, 0);
    assert_int_equal(t->nbytes, 0);
    assert_string_equal(t->name, "");
    ld_tensor_destroy(t);
}

static void test_tensor_rejects_bad_requests(void **state)
{
    (void)state;
    ld_error err;
    ld_shape s = {.rank = 1, .dims = {4}};
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_create(&t, "s", LD_DTYPE_STRING, &s, &err), LD_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "string"));
    assert_null(t);
    s.dims[0] = -3;
    assert_int_equal(ld_tensor_create(&t, "neg", LD_DTYPE_FLOAT32, &s, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "neg"));
    ld_shape big = {.rank = 2, .dims = {INT64_C(1) << 32, INT64_C(1) << 30}}; /* 2^62 floats: 2^64 bytes */
    assert_int_equal(ld_tensor_create(&t, "big", LD_DTYPE_FLOAT32, &big, &err), LD_ERR_NOMEM);
    assert_null(t);
}

static void test_tensor_wrap_borrows(void **state)
{
    (void)state;
    ld_error err;
    int32_t data[3] = {7, -8, 9};
    ld_shape s = {.rank = 1, .dims = {3}};
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_wrap(&t, "w", LD_DTYPE_INT32, &s, data, &err), LD_OK);
    assert_true(t->borrowed_data);
    assert_true(ld_tensor_get_double(t, 1) == -8.0);
    ld_tensor_destroy(t); /* must not free `data` (ASan would report it) */
    assert_int_equal(data[2], 9);
}

static void test_tensor_get_double_all_dtypes(void **state)
{
    (void)state;
    ld_error err;
    ld_shape s = {.rank = 1, .dims = {1}};
    struct { ld_dtype d; uint64_t bits; double expect; } cases[] = {
        {LD_DTYPE_FLOAT16, 0x3C00, 1.0}, {LD_DTYPE_FLOAT16, 0xC000, -2.0},
        {LD_DTYPE_BFLOAT16, 0x3F80, 1.0}, {LD_DTYPE_INT8, 0xFF, -1.0},
        {LD_DTYPE_UINT8, 0xFF, 255.0}, {LD_DTYPE_INT16, 0xFFFE, -2.0},
        {LD_DTYPE_UINT16, 0xFFFE, 65534.0}, {LD_DTYPE_BOOL, 0x01, 1.0},
        {LD_DTYPE_UINT32, 0xFFFFFFFF, 4294967295.0}, {LD_DTYPE_INT64, UINT64_MAX, -1.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ld_tensor *t = NULL;
        assert_int_equal(ld_tensor_create(&t, "x", cases[i].d, &s, &err), LD_OK);
        memcpy(t->data, &cases[i].bits, t->nbytes); /* little-endian */
        assert_true(ld_tensor_get_double(t, 0) == cases[i].expect);
        ld_tensor_destroy(t);
    }
}

static void sha_of_string(const char *s, size_t repeat, char hex[65])
{
    size_t n = strlen(s);
    char *all = malloc(n * repeat + 1);
    assert_non_null(all);
    for (size_t i = 0; i < repeat; i++)
        memcpy(all + i * n, s, n);
    assert_int_equal(ld_sha256_hex(all, n * repeat, hex, NULL), LD_OK);
    free(all);
}

static void test_sha256_vectors(void **state)
{
    (void)state;
    char hex[65];
    /* FIPS 180-4 / NIST example vectors. */
    sha_of_string("", 1, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_of_string("abc", 1, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha_of_string("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    sha_of_string("a", 1000000, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* 55/56/64-byte boundaries of the padding. */
    sha_of_string("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1, hex);
    assert_string_equal(hex, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    sha_of_string("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1, hex);
    assert_string_equal(hex, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
}

static void test_sha256_file_matches_sha256sum(void **state)
{
    (void)state;
    char path[] = "/tmp/layerdiff-sha-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    for (int i = 0; i < 300000; i++)
        fputc((i * 131 + 7) & 0xFF, f);
    fclose(f);

    char hex[65];
    ld_error err;
    assert_int_equal(ld_sha256_file(path, hex, &err), LD_OK);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[256] = {0};
    assert_non_null(fgets(line, sizeof line, p));
    pclose(p);
    assert_memory_equal(line, hex, 64);
    unlink(path);

    assert_int_equal(ld_sha256_file("/nonexistent/model.onnx", hex, &err), LD_ERR_IO);
    assert_non_null(strstr(err.message, "/nonexistent/model.onnx"));
}

/* ld_utf8_sequence against glibc's own UTF-8 decoder (C.UTF-8 locale), on
 * every 1- and 2-byte sequence and every 3-byte sequence, then round trips of
 * every code point through a plain encoder. */
static size_t encode_utf8(uint32_t cp, char out[5])
{
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const unsigned char lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (size_t i = n - 1; i > 0; i--) {
        out[i] = (char)(0x80 | (cp & 0x3F));
        cp >>= 6;
    }
    out[0] = (char)(lead[n] | cp);
    out[n] = '\0';
    return n;
}

static size_t glibc_sequence(const char *s, size_t max)
{
    mbstate_t st;
    memset(&st, 0, sizeof st);
    wchar_t wc;
    size_t r = mbrtowc(&wc, s, max, &st);
    if (r == (size_t)-1 || r == (size_t)-2)
        return 0;
    return r == 0 ? 1 : r;
}

static void test_utf8_matches_glibc(void **state)
{
    (void)state;
    if (!setlocale(LC_CTYPE, "C.UTF-8")) {
        skip();
        return;
    }
    char s[5] = {0};
    for (unsigned a = 1; a < 256; a++) {
        s[0] = (char)a;
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (char)b;
            for (unsigned c = 0; c < 256; c++) {
                if (a < 0xE0 && c > 0)
                    break; /* only lead bytes of 3-byte forms need a third byte */
                s[2] = (char)c;
                s[3] = 0;
                size_t mine = ld_utf8_sequence(s, NULL);
                size_t theirs = glibc_sequence(s, strlen(s));
                if (mine != theirs)
                    fail_msg("%02x %02x %02x: ours %zu, glibc %zu", a, b, c, mine, theirs);
            }
        }
    }
    setlocale(LC_CTYPE, "C");
    for (uint32_t cp = 1; cp <= 0x10FFFF; cp++) {
        size_t n = encode_utf8(cp, s);
        uint32_t back = 0;
        size_t got = ld_utf8_sequence(s, &back);
        if (cp >= 0xD800 && cp <= 0xDFFF)
            assert_int_equal(got, 0);
        else if (got != n || back != cp)
            fail_msg("U+%04X: length %zu (want %zu), decoded U+%04X", cp, got, n, back);
    }
    char *fixed = ld_utf8_sanitize("a\xff\xc3\xa9\xed\xa0\x80z\xf0\x9f");
    assert_non_null(fixed);
    assert_string_equal(fixed, "a\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdz"
                               "\xef\xbf\xbd\xef\xbf\xbd");
    free(fixed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_set_and_prefix),
        cmocka_unit_test(test_error_long_message_truncates),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_dtype_table),
        cmocka_unit_test(test_shape_count_and_overflow),
        cmocka_unit_test(test_shape_format_and_equal),
        cmocka_unit_test(test_tensor_lifecycle),
        cmocka_unit_test(test_tensor_rejects_bad_requests),
        cmocka_unit_test(test_tensor_wrap_borrows),
        cmocka_unit_test(test_tensor_get_double_all_dtypes),
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_sha256_file_matches_sha256sum),
        cmocka_unit_test(test_utf8_matches_glibc),
    };
    return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}
