/* Interop tests for dump/: a dump written by layerdiff is read with the
 * HDF5 tools (h5dump) and with h5py (tests/check_dump.py, skipped when
 * Debian's python3-h5py is missing). The tensors written here and the
 * expectations in tests/check_dump.py describe the same file: change both
 * together. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layerdiff/dump.h"
#include "tests/support/dump_testing.h"

#define PYTHON "/usr/bin/python3"

/* --- the interop dump ---------------------------------------------------------- */

typedef struct spec {
    const char *name;
    ld_dtype dtype;
    int rank;
    int64_t dims[2];
    const void *data;
} spec;

static const uint16_t f16_bits[14] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
                                      0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7E01, 0xFE00, 0x3555};
static const uint16_t bf16_bits[9] = {0x0000, 0x8000, 0x0001, 0x3F80, 0xC000,
                                      0x7F7F, 0x7F80, 0xFF80, 0x7FC0};
static const uint8_t bools[4] = {1, 0, 0, 1};
static const int8_t i8[3] = {-128, 0, 127};
static const uint8_t u8[3] = {0, 128, 255};
static const int16_t i16[3] = {-32768, 0, 32767};
static const uint16_t u16[3] = {0, 32768, 65535};
static const int32_t i32[3] = {INT32_MIN, 0, INT32_MAX};
static const uint32_t u32[3] = {0, 2147483648u, 4294967295u};
static const int64_t i64[3] = {INT64_MIN, 0, INT64_MAX};
static const uint64_t u64[3] = {0, 9223372036854775808u, UINT64_MAX};
static const float scalar = 3.25f;
static const double f64[3] = {1e308, -5e-324, 0.1};
static const float input_values[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
static const uint8_t mask[6] = {1, 0, 1, 0, 1, 1};
static const int64_t token_ids[3] = {0, 7, 1099511627776};
static const float emulated[3] = {1.5f, -2.0f, 65504.0f};

#define F16_NAME "/encoder/layer.0/Add_output_0"
#define BF16_NAME "na\xc3\xafve \xe5\x90\x8d\xe5\x89\x8d %2F.x"

static const spec reference_run[] = {
    {F16_NAME, LD_DTYPE_FLOAT16, 2, {2, 7}, f16_bits},
    {BF16_NAME, LD_DTYPE_BFLOAT16, 1, {9}, bf16_bits},
    {".starts with dot", LD_DTYPE_BOOL, 2, {2, 2}, bools},
    {"ints/int8", LD_DTYPE_INT8, 1, {3}, i8},
    {"ints/uint8", LD_DTYPE_UINT8, 1, {3}, u8},
    {"ints/int16", LD_DTYPE_INT16, 1, {3}, i16},
    {"ints/uint16", LD_DTYPE_UINT16, 1, {3}, u16},
    {"ints/int32", LD_DTYPE_INT32, 1, {3}, i32},
    {"ints/uint32", LD_DTYPE_UINT32, 1, {3}, u32},
    {"ints/int64", LD_DTYPE_INT64, 1, {3}, i64},
    {"ints/uint64", LD_DTYPE_UINT64, 1, {3}, u64},
    {"scalar", LD_DTYPE_FLOAT32, 0, {0}, &scalar},
    {"empty", LD_DTYPE_FLOAT32, 2, {0, 3}, NULL},
    {"f64", LD_DTYPE_FLOAT64, 1, {3}, f64},
};
static const spec inputs[] = {
    {"input.1", LD_DTYPE_FLOAT32, 2, {2, 3}, input_values},
    {"mask", LD_DTYPE_BOOL, 2, {2, 3}, mask},
    {"token ids", LD_DTYPE_INT64, 1, {3}, token_ids},
};

static ld_tensor *tensor_of(const spec *s)
{
    ld_shape shape;
    ld_tensor *t = NULL;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, s->rank, s->dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, s->name, s->dtype, &shape, &err), LD_OK);
    if (t->nbytes)
        memcpy(t->data, s->data, t->nbytes);
    return t;
}

static void write_interop_dump(const char *path)
{
    ld_error err;
    ld_dump_file_info info = {
        .model_path = "models/tiny.onnx",
        .model_sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        .tool_version = "test-1.0", .created = "2024-05-06T07:08:09Z", .input_seed = 1234,
    };
    ld_dump_writer *w = NULL;
    if (ld_dump_writer_open(&w, path, &info, NULL, &err) != LD_OK)
        fail_msg("%s", err.message);
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
        ld_tensor *t = tensor_of(&inputs[i]);
        assert_int_equal(ld_dump_writer_add_input(w, t, &err), LD_OK);
        ld_tensor_destroy(t);
    }
    ld_dump_run_info ref = {"reference", "reference", "fp32 everywhere", NULL};
    assert_int_equal(ld_dump_writer_begin_run(w, &ref, &err), LD_OK);
    for (size_t i = 0; i < sizeof reference_run / sizeof reference_run[0]; i++) {
        ld_tensor *t = tensor_of(&reference_run[i]);
        ld_dump_tensor_meta m = {.name = reference_run[i].name, .node = "node", .op_type = "Op",
                                 .topo_index = (int64_t)i, .output_index = 0,
                                 .precision = "fp32"};
        static const char *const node_inputs[] = {"input.1", "", "/a/b"};
        m.graph_output = i + 1 == sizeof reference_run / sizeof reference_run[0];
        if (i == 0) {
            m.n_inputs = 3;
            m.inputs = node_inputs;
            m.node = "/encoder/layer.0/Add";
            m.op_type = "Add";
            m.precision = "fp16";
            m.counters = (ld_layer_counters){true, 1, 2, 3, 4, 5};
        }
        if (ld_dump_writer_add_tensor(w, t, &m, &err) != LD_OK)
            fail_msg("%s", err.message);
        ld_tensor_destroy(t);
    }
    assert_int_equal(ld_dump_writer_end_run(w, &err), LD_OK);
    ld_dump_run_info emu = {"emulated/fp16", "emulated", "fp16", NULL};
    assert_int_equal(ld_dump_writer_begin_run(w, &emu, &err), LD_OK);
    spec s = {F16_NAME, LD_DTYPE_FLOAT32, 1, {3}, emulated};
    ld_tensor *t = tensor_of(&s);
    ld_dump_tensor_meta m = {.name = F16_NAME, .node = "/encoder/layer.0/Add", .op_type = "Add",
                             .topo_index = 0, .output_index = 0, .precision = "fp16"};
    assert_int_equal(ld_dump_writer_add_tensor(w, t, &m, &err), LD_OK);
    ld_tensor_destroy(t);
    if (ld_dump_writer_commit(w, &err) != LD_OK)
        fail_msg("%s", err.message);
}

/* --- h5dump ------------------------------------------------------------------------ */

/* Output of a shell command. Return value: new string (free()). */
static char *run_command(const char *cmd, int *exit_status)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    for (size_t n; (n = fread(out + len, 1, cap - len - 1, p)) > 0;) {
        len += n;
        if (cap - len < 1024)
            out = realloc(out, cap *= 2);
    }
    out[len] = '\0';
    *exit_status = pclose(p);
    return out;
}

/* The text of h5dump's block for DATASET "<link>" in GROUP "<group>" (up
 * to the next dataset). */
static char *dataset_block(const char *dump, const char *group, const char *link)
{
    char header[256];
    snprintf(header, sizeof header, "GROUP \"%s\" {", group);
    const char *in_group = strstr(dump, header);
    if (!in_group) {
        fail_msg("h5dump shows no %s", header);
        return NULL; /* not reached */
    }
    snprintf(header, sizeof header, "DATASET \"%s\" {", link);
    const char *start = strstr(in_group, header);
    if (!start) {
        fail_msg("h5dump shows no %s", header);
        return NULL; /* not reached */
    }
    const char *end = strstr(start + strlen(header), "DATASET \"");
    size_t len = end ? (size_t)(end - start) : strlen(start);
    return strndup(start, len);
}

static void expect_in_block(const char *dump, const char *group, const char *link,
                            const char *text)
{
    char *block = dataset_block(dump, group, link);
    if (!strstr(block, text))
        fail_msg("h5dump block of '%s' lacks '%s':\n%s", link, text, block);
    free(block);
}

static void test_interop_h5dump(void **state)
{
    dt_fixture *f = *state;
    if (system("command -v h5dump >/dev/null 2>&1") != 0)
        skip(); /* configure.sh requires h5dump; only a broken setup gets here */
    write_interop_dump(f->path);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "h5dump -w 0 '%s' 2>&1", f->path);
    int status;
    char *out = run_command(cmd, &status);
    if (status != 0)
        fail_msg("h5dump failed (%d): %s", status, out);

    /* Root attributes. */
    assert_non_null(strstr(out, "ATTRIBUTE \"format\""));
    assert_non_null(strstr(out, "(0): \"layerdiff-dump\""));
    assert_non_null(strstr(out, "GROUP \"emulated%2Ffp16\""));
    /* float16 and bfloat16 are 16-bit IEEE-style floats (h5dump cannot tell
     * them apart; the dtype attribute does). */
    const char *half = "DATATYPE  16-bit little-endian floating-point 16-bit precision";
    const char *f16_link = "%2Fencoder%2Flayer.0%2FAdd_output_0";
    expect_in_block(out, "reference", f16_link, half);
    /* smallest subnormal, largest subnormal, smallest normal, ..., 65504, 1/3 */
    expect_in_block(out, "reference", f16_link,
                    "(0,0): 0, -0, 5.96046e-08, 6.09756e-05, 6.10352e-05, 1, -1,");
    expect_in_block(out, "reference", f16_link,
                    "(1,0): 65504, inf, -inf, nan, nan, -nan, 0.333252");
    /* Format version 2: the tensors' descriptions are rows of /index/<run>. */
    expect_in_block(out, "index", "reference", "\"/encoder/layer.0/Add_output_0\"");
    expect_in_block(out, "index", "reference", "\"float16\"");
    expect_in_block(out, "index", "reference", "\"input.1/%00/%2Fa%2Fb\"");
    expect_in_block(out, "emulated%2Ffp16", f16_link, "DATATYPE  H5T_IEEE_F32LE");
    const char *bf16_link = "na\xc3\xafve \xe5\x90\x8d\xe5\x89\x8d %252F.x";
    expect_in_block(out, "reference", bf16_link, half);
    expect_in_block(out, "index", "reference", "\"bfloat16\"");
    expect_in_block(out, "reference", bf16_link,
                    "(0): 0, -0, 9.18355e-41, 1, -2, 3.38953e+38, inf, -inf, nan");
    expect_in_block(out, "reference", "%2Estarts with dot", "H5T_ENUM");
    expect_in_block(out, "reference", "%2Estarts with dot", "\"FALSE\"            0;");
    expect_in_block(out, "reference", "%2Estarts with dot", "\"TRUE\"             1;");
    expect_in_block(out, "reference", "%2Estarts with dot", "(0,0): TRUE, FALSE,");
    expect_in_block(out, "reference", "ints%2Fint8", "DATATYPE  H5T_STD_I8LE");
    expect_in_block(out, "reference", "ints%2Fuint64", "DATATYPE  H5T_STD_U64LE");
    expect_in_block(out, "reference", "ints%2Fuint64",
                    "(0): 0, 9223372036854775808, 18446744073709551615");
    expect_in_block(out, "reference", "ints%2Fint64",
                    "(0): -9223372036854775808, 0, 9223372036854775807");
    expect_in_block(out, "reference", "scalar", "DATASPACE  SCALAR");
    expect_in_block(out, "reference", "scalar", "(0): 3.25");
    expect_in_block(out, "reference", "empty", "DATASPACE  SIMPLE { ( 0, 3 ) / ( 0, 3 ) }");
    expect_in_block(out, "reference", "f64", "DATATYPE  H5T_IEEE_F64LE");
    expect_in_block(out, "inputs", "input.1", "DATATYPE  H5T_IEEE_F32LE");
    expect_in_block(out, "inputs", "token ids", "(0): 0, 7, 1099511627776");
    free(out);
}

/* --- h5py --------------------------------------------------------------------------- */

static void test_interop_h5py(void **state)
{
    dt_fixture *f = *state;
    if (access(PYTHON, X_OK) != 0 ||
        system(PYTHON " -c 'import h5py, numpy' >/dev/null 2>&1") != 0) {
        print_message("h5py check skipped: Debian's python3-h5py is not installed\n");
        skip();
    }
    const char *srcdir = getenv("LAYERDIFF_SRCDIR") ? getenv("LAYERDIFF_SRCDIR") : ".";
    char script[512];
    snprintf(script, sizeof script, "%s/tests/check_dump.py", srcdir);
    if (access(script, R_OK) != 0)
        fail_msg("cannot find %s: run from the repository root or set LAYERDIFF_SRCDIR", script);
    write_interop_dump(f->path);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, PYTHON " '%s' '%s' 2>&1", script, f->path);
    int status;
    char *out = run_command(cmd, &status);
    if (status != 0)
        fail_msg("%s failed (status %d):\n%s", script, status, out);
    assert_non_null(strstr(out, "check_dump: OK"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_interop_h5dump, dt_setup, dt_teardown),
        cmocka_unit_test_setup_teardown(test_interop_h5py, dt_setup, dt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
