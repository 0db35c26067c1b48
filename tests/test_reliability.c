/* Tests of the defences added for hostile inputs (docs/reliability.md):
 * the protobuf nesting limit (onnx/nesting.c), external data checked before
 * the tensor is allocated (onnx/file_io.c), and the child process that reads
 * a dump's metadata first (dump/dump_isolate.c). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "dump/dump_internal.h"
#include "layerdiff/onnx.h"
#include "onnx/onnx_internal.h"
#include "tests/support/onnx_builder.h"

/* --- nesting -------------------------------------------------------------------------- */

/* A TypeProto nesting sequence_type `levels` times around an empty TypeProto:
 * message depth 2 * levels below the root. Caller frees. */
static uint8_t *nested_type(int levels, bool tensor_inside, size_t *size)
{
    size_t cap = 16 + (size_t)levels * 12;
    uint8_t *buf = malloc(cap), *tmp = malloc(cap);
    assert_non_null(buf);
    assert_non_null(tmp);
    size_t n = 0;
    if (tensor_inside) { /* tensor_type { elem_type: FLOAT }: one more level */
        memcpy(buf, "\x0a\x02\x08\x01", 4);
        n = 4;
    }
    for (int i = 0; i < levels; i++) {
        /* field 4 (sequence_type) { field 1 (elem_type) { buf } } */
        size_t inner = 0;
        uint8_t hdr[12];
        size_t h = 0;
        hdr[h++] = 0x0a;
        for (size_t v = n; ; v >>= 7) {
            hdr[h++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
            if (v < 0x80)
                break;
        }
        inner = h + n;
        size_t t = 0;
        tmp[t++] = 0x22;
        for (size_t v = inner; ; v >>= 7) {
            tmp[t++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
            if (v < 0x80)
                break;
        }
        memcpy(tmp + t, hdr, h);
        memcpy(tmp + t + h, buf, n);
        n = t + h + n;
        uint8_t *swap = buf;
        buf = tmp;
        tmp = swap;
    }
    free(tmp);
    *size = n;
    return buf;
}

static void test_nesting_limit_is_exact(void **state)
{
    (void)state;
    ld_error err;
    size_t size;
    /* 50 levels = depth 100: accepted, and protobuf-c unpacks it. */
    uint8_t *ok = nested_type(LD_ONNX_MAX_NESTING / 2, false, &size);
    assert_int_equal(ld_onnx_check_nesting(ok, size, &onnx__type_proto__descriptor, "type", &err),
                     LD_OK);
    Onnx__TypeProto *tp = onnx__type_proto__unpack(NULL, size, ok);
    assert_non_null(tp);
    onnx__type_proto__free_unpacked(tp, NULL);
    free(ok);
    /* One message deeper: refused with the limit in the message. */
    uint8_t *deep = nested_type(LD_ONNX_MAX_NESTING / 2, true, &size);
    assert_int_equal(ld_onnx_check_nesting(deep, size, &onnx__type_proto__descriptor, "type",
                                           &err),
                     LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "not a valid ONNX type: messages nested more than 100 deep"));
    free(deep);
}

static void test_nesting_ignores_malformed_and_bytes(void **state)
{
    (void)state;
    ld_error err;
    /* Truncated length, an unknown field holding 'nested-looking' bytes, a group
     * wire type: none is the check's business. */
    static const uint8_t truncated[] = {0x3a, 0x7f, 0x0a};
    static const uint8_t unknown[] = {0xfa, 0x01, 0x04, 0x22, 0x02, 0x0a, 0x00};
    static const uint8_t group[] = {0x0b, 0x0c};
    assert_int_equal(ld_onnx_check_nesting(truncated, sizeof truncated,
                                           &onnx__model_proto__descriptor, "model", &err), LD_OK);
    assert_int_equal(ld_onnx_check_nesting(unknown, sizeof unknown,
                                           &onnx__model_proto__descriptor, "model", &err), LD_OK);
    assert_int_equal(ld_onnx_check_nesting(group, sizeof group,
                                           &onnx__model_proto__descriptor, "model", &err), LD_OK);
}

/* --- external data before allocation ------------------------------------------------------ */

static void test_external_checked_before_allocation(void **state)
{
    (void)state;
    /* 2^40 float32 elements = 4 TiB: had the loader allocated first, this
     * would be an allocation failure (or an allocator abort under ASan). */
    int64_t dims[] = {INT64_C(1) << 40};
    Onnx__TensorProto *t = ob_tensor("w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, dims);
    ob_external(t, "location", "weights.bin");
    size_t size = onnx__tensor_proto__get_packed_size(t);
    uint8_t *bytes = ob_mem(size);
    onnx__tensor_proto__pack(t, bytes);
    ld_tensor *out = NULL;
    ld_error err;
    ld_status st = ld_onnx_load_tensor_buffer(&out, bytes, size, "w.pb", &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, "w.pb: ", "not loaded from a file");
    assert_null(out);

    /* From a file next to a 16-byte weights.bin: the length mismatch is reported. */
    ob_make_tmpdir();
    ob_write_file(ob_tmp_path("weights.bin"), "0123456789abcdef", 16);
    ob_write_file(ob_tmp_path("w.pb"), bytes, size);
    st = ld_onnx_load_tensor_file(&out, ob_tmp_path("w.pb"), &err);
    ob_expect_message(st, LD_ERR_INPUT, &err, ob_tmp_path("w.pb"),
                      "is 16 bytes, but its dtype and shape need 4398046511104");
    assert_null(out);
}

/* --- dump isolation ----------------------------------------------------------------------- */

static ld_status probe_ok(const char *path, ld_error *err)
{
    (void)path;
    ld_error_clear(err);
    return LD_OK;
}

static ld_status probe_error(const char *path, ld_error *err)
{
    return ld_error_set(err, LD_ERR_UNSUPPORTED, "dump '%s': made-up problem", path);
}

static ld_status probe_segv(const char *path, ld_error *err)
{
    (void)path;
    (void)err;
    raise(SIGSEGV);
    return LD_OK;
}

static ld_status probe_hang(const char *path, ld_error *err)
{
    (void)path;
    (void)err;
    while (pause() != 12345)
        ;
    return LD_OK;
}

static ld_status probe_sigint(const char *path, ld_error *err)
{
    (void)path;
    (void)err;
    raise(SIGINT);
    return LD_OK;
}

static ld_status probe_exit(const char *path, ld_error *err)
{
    (void)path;
    (void)err;
    _exit(7);
}

static void test_isolation_reports_what_the_child_did(void **state)
{
    (void)state;
    ld_error err;
    unsetenv("LAYERDIFF_HDF5_ISOLATION");
    assert_int_equal(ld_dump_probe_isolated("d.h5", probe_ok, &err), LD_OK);

    assert_int_equal(ld_dump_probe_isolated("d.h5", probe_error, &err), LD_ERR_UNSUPPORTED);
    assert_string_equal(err.message, "dump 'd.h5': made-up problem");

    assert_int_equal(ld_dump_probe_isolated("d.h5", probe_segv, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "dump 'd.h5': the HDF5 library crashed (Segmentation fault)"));

    assert_int_equal(ld_dump_probe_isolated("d.h5", probe_exit, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "failed abnormally (exit status 7)"));

    assert_int_equal(ld_dump_probe_isolated("d.h5", probe_sigint, &err), LD_ERR_INTERRUPTED);
    assert_non_null(strstr(err.message, "interrupted by SIGINT"));
}

static void test_isolation_time_limit(void **state)
{
    (void)state;
    ld_error err;
    setenv("LAYERDIFF_HDF5_TIMEOUT", "1", 1);
    time_t t0 = time(NULL);
    ld_status st = ld_dump_probe_isolated("slow.h5", probe_hang, &err);
    time_t took = time(NULL) - t0;
    unsetenv("LAYERDIFF_HDF5_TIMEOUT");
    assert_int_equal(st, LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "did not finish reading its metadata within 1 s"));
    assert_true(took <= 3);
}

static void test_isolation_can_be_turned_off(void **state)
{
    (void)state;
    ld_error err;
    setenv("LAYERDIFF_HDF5_ISOLATION", "0", 1);
    assert_false(ld_dump_isolation_enabled());
    /* Not run at all: the crashing probe would otherwise fail. */
    assert_int_equal(ld_dump_probe_isolated("d.h5", probe_segv, &err), LD_OK);
    unsetenv("LAYERDIFF_HDF5_ISOLATION");
    assert_true(ld_dump_isolation_enabled());
}

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_nesting_limit_is_exact),
        T(test_nesting_ignores_malformed_and_bytes),
        T(test_external_checked_before_allocation),
        T(test_isolation_reports_what_the_child_did),
        T(test_isolation_time_limit),
        T(test_isolation_can_be_turned_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
