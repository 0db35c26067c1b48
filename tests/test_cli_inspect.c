/* Unit tests for `layerdiff inspect` (cli/cmd_inspect.c, inspect_model.c,
 * inspect_dump.c): file-kind detection, and the dump path end to end with a
 * dump written by the library (the e2e tests cannot make dumps until `run`
 * exists). The CLI objects (all but main) are linked into unit tests by the Makefile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/inspect.h"

#include "cli/options.h"
#include "cli/term.h"
#include "layerdiff/dump.h"

/* HDF5's file signature (spec: "Format Signature"), kept independent of the
 * copy in cli/cmd_inspect.c so a typo there makes this test fail. */
static const unsigned char hdf5_signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

/* --- fixture: a temporary directory per test --------------------------------- */

typedef struct fixture {
    char dir[64];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/ld-test-cli-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static void path_in(const fixture *f, const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", f->dir, name);
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* --- detection -------------------------------------------------------------------- */

static ld_file_kind detect(const char *path)
{
    ld_file_kind kind;
    ld_error err;
    if (ld_inspect_detect(path, &kind, &err) != LD_OK)
        fail_msg("detect %s: %s", path, err.message);
    return kind;
}

static void test_detect_signature_offsets(void **state)
{
    fixture *f = *state;
    char p[128];
    unsigned char buf[4096] = {0};
    /* At offset 0. */
    memcpy(buf, hdf5_signature, 8);
    path_in(f, "at0", p, sizeof p);
    write_file(p, buf, 64);
    assert_int_equal(detect(p), LD_FILE_HDF5);
    /* Behind user blocks of 512 and 2048 bytes. */
    memset(buf, 'x', sizeof buf);
    memcpy(buf + 512, hdf5_signature, 8);
    path_in(f, "at512", p, sizeof p);
    write_file(p, buf, 1024);
    assert_int_equal(detect(p), LD_FILE_HDF5);
    memset(buf, 'x', sizeof buf);
    memcpy(buf + 2048, hdf5_signature, 8);
    path_in(f, "at2048", p, sizeof p);
    write_file(p, buf, 2056);
    assert_int_equal(detect(p), LD_FILE_HDF5);
    /* Not at a user-block offset: not HDF5. */
    memset(buf, 'x', sizeof buf);
    memcpy(buf + 100, hdf5_signature, 8);
    path_in(f, "at100", p, sizeof p);
    write_file(p, buf, 1024);
    assert_int_equal(detect(p), LD_FILE_ONNX);
    /* Short and empty files go to the ONNX loader (which rejects them). */
    path_in(f, "short", p, sizeof p);
    write_file(p, hdf5_signature, 7);
    assert_int_equal(detect(p), LD_FILE_ONNX);
    path_in(f, "empty", p, sizeof p);
    write_file(p, "", 0);
    assert_int_equal(detect(p), LD_FILE_ONNX);
}

static void test_detect_errors(void **state)
{
    fixture *f = *state;
    char p[128];
    ld_file_kind kind;
    ld_error err;
    path_in(f, "missing.onnx", p, sizeof p);
    assert_int_equal(ld_inspect_detect(p, &kind, &err), LD_ERR_IO);
    assert_non_null(strstr(err.message, "cannot open"));
    assert_non_null(strstr(err.message, p));
    assert_int_equal(ld_inspect_detect(f->dir, &kind, &err), LD_ERR_IO);
    assert_non_null(strstr(err.message, "is a directory"));
}

/* --- dumps -------------------------------------------------------------------------- */

static ld_tensor *filled_tensor(int rank, const int64_t *dims)
{
    ld_shape shape;
    ld_error err;
    ld_tensor *t = NULL;
    assert_int_equal(ld_shape_set(&shape, rank, dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, "input", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    for (int64_t i = 0; i < t->count; i++)
        ((float *)t->data)[i] = (float)i;
    return t;
}

#define ATTN_OUT "/encoder/layer.0/attn/MatMul_output_0"

/* A dump with one input and two runs; run "emulated" carries counters. */
static void write_sample_dump(const char *path)
{
    ld_error err;
    ld_dump_writer *w = NULL;
    ld_dump_file_info info = {.model_path = "fixtures/transformer.onnx",
                              .model_sha256 = "ab12", .input_seed = 7};
    if (ld_dump_writer_open(&w, path, &info, NULL, &err) != LD_OK)
        fail_msg("open writer: %s", err.message);
    const int64_t dims[2] = {2, 3};
    ld_tensor *t = filled_tensor(2, dims);
    assert_int_equal(ld_dump_writer_add_input(w, t, &err), LD_OK);

    const ld_dump_run_info runs[2] = {{.name = "reference", .backend = "reference"},
                                      {.name = "emulated", .backend = "emulated",
                                       .config = "fp16 everywhere"}};
    for (int r = 0; r < 2; r++) {
        assert_int_equal(ld_dump_writer_begin_run(w, &runs[r], &err), LD_OK);
        ld_dump_tensor_meta late = {.name = ATTN_OUT, .node = "/encoder/layer.0/attn/MatMul",
                                    .op_type = "MatMul", .topo_index = 5, .output_index = 0,
                                    .precision = r ? "fp16" : "fp32"};
        ld_dump_tensor_meta early = {.name = "ln_out", .node = "ln", .op_type = "Add",
                                     .topo_index = 1, .output_index = 0,
                                     .precision = r ? "fp16" : "fp32"};
        if (r == 1)
            late.counters = (ld_layer_counters){.present = true, .overflows = 3,
                                                .nans_created = 1, .underflows = 4,
                                                .subnormals = 5, .partial_overflows = 2};
        /* Written out of order: inspect lists them by topological index. */
        if (ld_dump_writer_add_tensor(w, t, &late, &err) != LD_OK ||
            ld_dump_writer_add_tensor(w, t, &early, &err) != LD_OK ||
            ld_dump_writer_end_run(w, &err) != LD_OK)
            fail_msg("writing run %d: %s", r, err.message);
    }
    ld_tensor_destroy(t);
    if (ld_dump_writer_commit(w, &err) != LD_OK)
        fail_msg("commit: %s", err.message);
}

/* Runs ld_inspect_dump into a memory buffer. Return value: new string (free). */
static char *inspect_dump_to_string(const char *path, bool json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    assert_non_null(out);
    ld_inspect_options opts = {.json = json};
    ld_error err;
    ld_status st = ld_inspect_dump(out, path, &opts, &err);
    fclose(out);
    if (st != LD_OK)
        fail_msg("inspect %s: %s", path, err.message);
    return buf;
}

static json_t *obj_at(json_t *parent, const char *key)
{
    json_t *v = json_object_get(parent, key);
    if (!v)
        fail_msg("missing key '%s'", key);
    return v;
}

static void check_tensor(json_t *t, const char *name, int64_t topo, const char *precision)
{
    assert_string_equal(json_string_value(obj_at(t, "name")), name);
    assert_string_equal(json_string_value(obj_at(t, "dtype")), "float32");
    assert_int_equal(json_integer_value(obj_at(t, "topo_index")), topo);
    assert_int_equal(json_integer_value(obj_at(t, "output_index")), 0);
    assert_string_equal(json_string_value(obj_at(t, "precision")), precision);
    json_t *shape = obj_at(t, "shape");
    assert_int_equal(json_array_size(shape), 2);
    assert_int_equal(json_integer_value(json_array_get(shape, 1)), 3);
}

static void test_dump_json(void **state)
{
    fixture *f = *state;
    char p[128];
    path_in(f, "run.h5", p, sizeof p);
    write_sample_dump(p);
    assert_int_equal(detect(p), LD_FILE_HDF5);
    char *text = inspect_dump_to_string(p, true);
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    if (!root)
        fail_msg("invalid JSON: %s\n%s", jerr.text, text);
    assert_string_equal(json_string_value(obj_at(root, "kind")), "dump");
    assert_string_equal(json_string_value(obj_at(root, "path")), p);
    assert_string_equal(json_string_value(obj_at(root, "format")), LD_DUMP_FORMAT_NAME);
    assert_int_equal(json_integer_value(obj_at(root, "format_version")), LD_DUMP_FORMAT_VERSION);
    assert_string_equal(json_string_value(obj_at(root, "model_path")),
                        "fixtures/transformer.onnx");
    assert_string_equal(json_string_value(obj_at(root, "model_sha256")), "ab12");
    assert_int_equal(json_integer_value(obj_at(root, "input_seed")), 7);
    assert_true(json_string_length(obj_at(root, "created")) > 0);

    json_t *inputs = obj_at(root, "inputs");
    assert_int_equal(json_array_size(inputs), 1);
    assert_string_equal(json_string_value(obj_at(json_array_get(inputs, 0), "name")), "input");

    json_t *runs = obj_at(root, "runs");
    assert_int_equal(json_array_size(runs), 2);
    json_t *ref = json_array_get(runs, 0), *emu = json_array_get(runs, 1);
    assert_string_equal(json_string_value(obj_at(ref, "name")), "reference");
    assert_true(json_is_null(obj_at(ref, "config")));
    assert_string_equal(json_string_value(obj_at(emu, "config")), "fp16 everywhere");
    json_t *ref_t = obj_at(ref, "tensors"), *emu_t = obj_at(emu, "tensors");
    assert_int_equal(json_array_size(ref_t), 2);
    check_tensor(json_array_get(ref_t, 0), "ln_out", 1, "fp32");
    check_tensor(json_array_get(ref_t, 1), ATTN_OUT, 5, "fp32");
    assert_string_equal(json_string_value(obj_at(json_array_get(ref_t, 1), "node")),
                        "/encoder/layer.0/attn/MatMul");
    assert_true(json_is_null(obj_at(json_array_get(ref_t, 1), "counters")));
    check_tensor(json_array_get(emu_t, 1), ATTN_OUT, 5, "fp16");
    json_t *c = obj_at(json_array_get(emu_t, 1), "counters");
    assert_int_equal(json_integer_value(obj_at(c, "overflows")), 3);
    assert_int_equal(json_integer_value(obj_at(c, "nans_created")), 1);
    assert_int_equal(json_integer_value(obj_at(c, "underflows")), 4);
    assert_int_equal(json_integer_value(obj_at(c, "subnormals")), 5);
    assert_int_equal(json_integer_value(obj_at(c, "partial_overflows")), 2);
    json_decref(root);
    free(text);
}

static void test_dump_text(void **state)
{
    fixture *f = *state;
    char p[128];
    path_in(f, "run.h5", p, sizeof p);
    write_sample_dump(p);
    char *text = inspect_dump_to_string(p, false);
    const char *expected[] = {
        "layerdiff dump ", "layerdiff-dump v2", "fixtures/transformer.onnx",
        "generated with seed 7", "Inputs (1)", "input  float32  2 x 3",
        "Run 'reference' (backend reference, 2 tensors)",
        "Run 'emulated' (backend emulated, config fp16 everywhere, 2 tensors)",
        "partial_overflows", ATTN_OUT "  float32  2 x 3  /encoder/layer.0/attn/MatMul  MatMul",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        if (!strstr(text, expected[i]))
            fail_msg("text lacks '%s':\n%s", expected[i], text);
    /* The reference run has no counters, so no counter columns. */
    char *emulated = strstr(text, "Run 'emulated'");
    assert_null(memmem(text, (size_t)(emulated - text), "overflows", 9));
    /* Counters right-aligned under their headings: 3 1 4 5 2. */
    assert_non_null(strstr(emulated, "3     1           4           5                  2"));
    /* ln_out (topo 1) comes before the attention output (topo 5). */
    assert_true(strstr(emulated, "ln_out") < strstr(emulated, ATTN_OUT));
    free(text);
}

static void test_dump_rejects_plain_hdf5(void **state)
{
    fixture *f = *state;
    char p[128];
    path_in(f, "plain.h5", p, sizeof p);
    hid_t file = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(file >= 0);
    H5Fclose(file);
    assert_int_equal(detect(p), LD_FILE_HDF5);
    ld_inspect_options opts = {.json = true};
    ld_error err;
    FILE *out = tmpfile();
    assert_int_equal(ld_inspect_dump(out, p, &opts, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "not a layerdiff dump"));
    assert_int_equal(ftell(out), 0); /* nothing printed on failure */
    fclose(out);
}

/* --- the command itself ------------------------------------------------------------- */

/* Runs `inspect argv...` with stdout captured into *captured (new string). */
static ld_status run_inspect(char **argv, int argc, char **captured, ld_error *err)
{
    char tmpl[] = "/tmp/ld-test-cli-out-XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    dup2(fd, STDOUT_FILENO);
    ld_status st = ld_cmd_inspect.run(argc, argv, err);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    off_t size = lseek(fd, 0, SEEK_END);
    char *buf = calloc(1, (size_t)size + 1);
    assert_non_null(buf);
    assert_int_equal(pread(fd, buf, (size_t)size, 0), size);
    close(fd);
    unlink(tmpl);
    *captured = buf;
    return st;
}

static void test_command_on_dump_and_errors(void **state)
{
    fixture *f = *state;
    char p[128], *out = NULL;
    ld_error err;
    path_in(f, "run.h5", p, sizeof p);
    write_sample_dump(p);

    char *json_args[] = {"inspect", p, "--json", NULL};
    assert_int_equal(run_inspect(json_args, 3, &out, &err), LD_OK);
    json_t *root = json_loads(out, 0, NULL);
    assert_non_null(root);
    assert_string_equal(json_string_value(obj_at(root, "kind")), "dump");
    json_decref(root);
    free(out);

    char *help_args[] = {"inspect", "--help", NULL};
    assert_int_equal(run_inspect(help_args, 2, &out, &err), LD_OK);
    assert_non_null(strstr(out, "Usage: layerdiff inspect FILE"));
    assert_non_null(strstr(out, "--layers"));
    free(out);

    char *bad_opt[] = {"inspect", "--nope", p, NULL};
    assert_int_equal(run_inspect(bad_opt, 3, &out, &err), LD_ERR_USAGE);
    assert_string_equal(err.message, "unknown option '--nope' (see 'layerdiff inspect --help')");
    assert_string_equal(out, "");
    free(out);

    char *no_file[] = {"inspect", NULL};
    assert_int_equal(run_inspect(no_file, 1, &out, &err), LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "missing FILE"));
    free(out);

    char missing[128];
    path_in(f, "nope.onnx", missing, sizeof missing);
    char *missing_args[] = {"inspect", missing, NULL};
    assert_int_equal(run_inspect(missing_args, 2, &out, &err), LD_ERR_IO);
    assert_non_null(strstr(err.message, "cannot open"));
    free(out);
}

/* The model path on a fixture, when the tests run from the repository root. */
static void test_command_on_model(void **state)
{
    (void)state;
    const char *model = "fixtures/cnn.onnx";
    if (access(model, R_OK) != 0) {
        skip();
        return;
    }
    char *out = NULL;
    ld_error err;
    char *args[] = {"inspect", "--json", "--layers", (char *)model, NULL};
    if (run_inspect(args, 4, &out, &err) != LD_OK)
        fail_msg("inspect %s: %s", model, err.message);
    json_t *root = json_loads(out, JSON_DECODE_ANY, NULL);
    assert_non_null(root);
    json_t *ops = obj_at(root, "op_counts");
    const char *order[] = {"Conv", "MaxPool", "Relu", "Flatten", "Gemm"};
    size_t i = 0;
    const char *key;
    json_t *value;
    json_object_foreach(ops, key, value) {
        assert_true(i < 5);
        assert_string_equal(key, order[i]);
        assert_int_equal(json_integer_value(value), i < 3 ? 2 : 1);
        i++;
    }
    assert_int_equal(i, 5);
    assert_int_equal(json_array_size(obj_at(root, "nodes")), 8);
    assert_int_equal(json_integer_value(obj_at(obj_at(root, "parameters"), "count")), 9242);
    json_decref(root);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_detect_signature_offsets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_detect_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_text, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dump_rejects_plain_hdf5, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_on_dump_and_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_on_model, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
