/* layerdiff fuzz target: the command-line spec parsers of `layerdiff run`.
 *
 * The first input byte picks the parser, the rest is the option text:
 *   0  --input-shapes  ld_inputs_parse_shapes, then the shapes are resolved
 *                      against a model with symbolic dims (ld_inputs_resolve_shapes)
 *   1  --val-range     ld_inputs_parse_ranges, then generated inputs of 2-6
 *                      elements are made with those ranges (ld_inputs_make)
 *   2  --load-inputs   line 1 is an --input-shapes text (may be empty), every
 *                      further line one --load-inputs value; loaded with
 *                      ld_inputs_make from inside the sandbox, which holds
 *                      .npy, .pb and dump files for the model's inputs
 *   3  --layer-precisions / --layer-output-types SPEC (bit 2 of the first
 *                      byte picks which): ld_engine_add_rules, then the
 *                      precision plan of the model under those rules, with
 *                      --fp16/--bf16 and the constraints mode taken from bits
 *                      3-6; "@FILE" specs may name rules.txt in the sandbox
 *
 * The model (bytes below, made with python3-onnx) has inputs x float32
 * [batch,4], ids int64 [batch], "a:b" float16 [2,seq] (a name with a colon)
 * and flag bool (scalar), each through an Identity node. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layerdiff/dump.h"
#include "layerdiff/engine.h"
#include "layerdiff/inputs.h"
#include "layerdiff/onnx.h"
#include "tests/fuzz/support.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t model_bytes[] = {
    0x08, 0x08, 0x12, 0x0e, 0x6c, 0x61, 0x79, 0x65, 0x72, 0x64, 0x69, 0x66, 0x66, 0x2d, 0x66, 0x75,
    0x7a, 0x7a, 0x3a, 0xda, 0x02, 0x0a, 0x1a, 0x0a, 0x01, 0x78, 0x12, 0x05, 0x78, 0x5f, 0x6f, 0x75,
    0x74, 0x1a, 0x04, 0x69, 0x64, 0x5f, 0x78, 0x22, 0x08, 0x49, 0x64, 0x65, 0x6e, 0x74, 0x69, 0x74,
    0x79, 0x0a, 0x20, 0x0a, 0x03, 0x69, 0x64, 0x73, 0x12, 0x07, 0x69, 0x64, 0x73, 0x5f, 0x6f, 0x75,
    0x74, 0x1a, 0x06, 0x69, 0x64, 0x5f, 0x69, 0x64, 0x73, 0x22, 0x08, 0x49, 0x64, 0x65, 0x6e, 0x74,
    0x69, 0x74, 0x79, 0x0a, 0x20, 0x0a, 0x03, 0x61, 0x3a, 0x62, 0x12, 0x07, 0x61, 0x3a, 0x62, 0x5f,
    0x6f, 0x75, 0x74, 0x1a, 0x06, 0x69, 0x64, 0x5f, 0x61, 0x3a, 0x62, 0x22, 0x08, 0x49, 0x64, 0x65,
    0x6e, 0x74, 0x69, 0x74, 0x79, 0x0a, 0x23, 0x0a, 0x04, 0x66, 0x6c, 0x61, 0x67, 0x12, 0x08, 0x66,
    0x6c, 0x61, 0x67, 0x5f, 0x6f, 0x75, 0x74, 0x1a, 0x07, 0x69, 0x64, 0x5f, 0x66, 0x6c, 0x61, 0x67,
    0x22, 0x08, 0x49, 0x64, 0x65, 0x6e, 0x74, 0x69, 0x74, 0x79, 0x12, 0x0b, 0x66, 0x75, 0x7a, 0x7a,
    0x5f, 0x69, 0x6e, 0x70, 0x75, 0x74, 0x73, 0x5a, 0x18, 0x0a, 0x01, 0x78, 0x12, 0x13, 0x0a, 0x11,
    0x08, 0x01, 0x12, 0x0d, 0x0a, 0x07, 0x12, 0x05, 0x62, 0x61, 0x74, 0x63, 0x68, 0x0a, 0x02, 0x08,
    0x04, 0x5a, 0x16, 0x0a, 0x03, 0x69, 0x64, 0x73, 0x12, 0x0f, 0x0a, 0x0d, 0x08, 0x07, 0x12, 0x09,
    0x0a, 0x07, 0x12, 0x05, 0x62, 0x61, 0x74, 0x63, 0x68, 0x5a, 0x18, 0x0a, 0x03, 0x61, 0x3a, 0x62,
    0x12, 0x11, 0x0a, 0x0f, 0x08, 0x0a, 0x12, 0x0b, 0x0a, 0x02, 0x08, 0x02, 0x0a, 0x05, 0x12, 0x03,
    0x73, 0x65, 0x71, 0x5a, 0x0e, 0x0a, 0x04, 0x66, 0x6c, 0x61, 0x67, 0x12, 0x06, 0x0a, 0x04, 0x08,
    0x09, 0x12, 0x00, 0x62, 0x1c, 0x0a, 0x05, 0x78, 0x5f, 0x6f, 0x75, 0x74, 0x12, 0x13, 0x0a, 0x11,
    0x08, 0x01, 0x12, 0x0d, 0x0a, 0x07, 0x12, 0x05, 0x62, 0x61, 0x74, 0x63, 0x68, 0x0a, 0x02, 0x08,
    0x04, 0x62, 0x1a, 0x0a, 0x07, 0x69, 0x64, 0x73, 0x5f, 0x6f, 0x75, 0x74, 0x12, 0x0f, 0x0a, 0x0d,
    0x08, 0x07, 0x12, 0x09, 0x0a, 0x07, 0x12, 0x05, 0x62, 0x61, 0x74, 0x63, 0x68, 0x62, 0x1c, 0x0a,
    0x07, 0x61, 0x3a, 0x62, 0x5f, 0x6f, 0x75, 0x74, 0x12, 0x11, 0x0a, 0x0f, 0x08, 0x0a, 0x12, 0x0b,
    0x0a, 0x02, 0x08, 0x02, 0x0a, 0x05, 0x12, 0x03, 0x73, 0x65, 0x71, 0x62, 0x12, 0x0a, 0x08, 0x66,
    0x6c, 0x61, 0x67, 0x5f, 0x6f, 0x75, 0x74, 0x12, 0x06, 0x0a, 0x04, 0x08, 0x09, 0x12, 0x00, 0x42,
    0x04, 0x0a, 0x00, 0x10, 0x0d,
};

/* TensorProtos of the four inputs (numpy_helper.from_array(...).SerializeToString()). */
static const uint8_t pb_x[] = {
    0x08, 0x02, 0x08, 0x04, 0x10, 0x01, 0x42, 0x01, 0x78, 0x4a, 0x20, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x40, 0x40, 0x00, 0x00, 0x80,
    0x40, 0x00, 0x00, 0xa0, 0x40, 0x00, 0x00, 0xc0, 0x40, 0x00, 0x00, 0xe0, 0x40};
static const uint8_t pb_ids[] = {
    0x08, 0x02, 0x10, 0x07, 0x42, 0x03, 0x69, 0x64, 0x73, 0x4a, 0x10, 0x03, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const uint8_t pb_ab[] = {
    0x08, 0x02, 0x08, 0x03, 0x10, 0x0a, 0x42, 0x03, 0x61, 0x3a, 0x62, 0x4a, 0x0c,
    0x00, 0x3c, 0x00, 0x3c, 0x00, 0x3c, 0x00, 0x3c, 0x00, 0x3c, 0x00, 0x3c};
static const uint8_t pb_flag[] = {0x10, 0x09, 0x42, 0x04, 0x66, 0x6c, 0x61, 0x67, 0x4a, 0x01, 0x01};

static ld_graph *model;
static int home_fd = -1; /* the working directory libFuzzer started in */

static void must(ld_status st, const ld_error *err, const char *what)
{
    if (st != LD_OK)
        fuzz_fail(what, err);
}

/* A version 1.0 .npy file: magic, header padded to 64 bytes, data. */
static void write_npy(const char *name, const char *descr, const char *shape, const void *data,
                      size_t size)
{
    uint8_t buf[256];
    char header[64];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, "
                     "'shape': %s, }", descr, shape);
    memset(header + n, ' ', sizeof header - 1 - (size_t)n);
    header[sizeof header - 1] = '\n';
    memcpy(buf, "\x93NUMPY\x01\x00\x40\x00", 10);
    memcpy(buf + 10, header, sizeof header);
    memcpy(buf + 10 + sizeof header, data, size);
    fuzz_write(name, buf, 10 + sizeof header + size);
}

static void write_dump(const char *name, ld_tensor *const *inputs, int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_sandbox(), name);
    ld_dump_file_info info = {.model_path = "fuzz.onnx", .input_seed = -1};
    ld_dump_writer *w = NULL;
    ld_error err;
    must(ld_dump_writer_open(&w, path, &info, NULL, &err), &err, "ld_dump_writer_open");
    for (int i = 0; i < n; i++)
        must(ld_dump_writer_add_input(w, inputs[i], &err), &err, "ld_dump_writer_add_input");
    must(ld_dump_writer_commit(w, &err), &err, "ld_dump_writer_commit");
}

/* Fills the sandbox with every kind of input file --load-inputs reads. */
static void make_input_files(void)
{
    const float x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const int64_t ids[2] = {3, -4};
    const uint16_t ab[6] = {0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00};
    const uint8_t flag = 1, bad_flag = 7;
    char dir[512];
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/%s", fuzz_sandbox(), i ? "pb" : "npy");
        if (mkdir(dir, 0700) != 0)
            fuzz_fail("cannot make a sandbox folder", NULL);
    }
    write_npy("npy/x.npy", "<f4", "(2, 4)", x, sizeof x);
    write_npy("npy/ids.npy", "<i8", "(2,)", ids, sizeof ids);
    write_npy("npy/a:b.npy", "<f2", "(2, 3)", ab, sizeof ab);
    write_npy("npy/flag.npy", "|b1", "()", &flag, 1);
    write_npy("x.npy", "<f4", "(2, 4)", x, sizeof x);
    write_npy("x8.npy", "<f4", "(8,)", x, sizeof x);
    write_npy("ids.npy", "<i8", "(2,)", ids, sizeof ids);
    write_npy("badflag.npy", "|b1", "()", &bad_flag, 1);
    fuzz_write("pb/input_0.pb", pb_x, sizeof pb_x);
    fuzz_write("pb/input_1.pb", pb_ids, sizeof pb_ids);
    fuzz_write("pb/input_2.pb", pb_ab, sizeof pb_ab);
    fuzz_write("pb/input_3.pb", pb_flag, sizeof pb_flag);
    fuzz_write("ab.pb", pb_ab, sizeof pb_ab);

    const char rules[] = "# a rules file\nid_x:fp16\n\nop:Identity:bf16\n*:fp32\n";
    fuzz_write("rules.txt", rules, sizeof rules - 1);

    ld_tensor *t[4] = {NULL};
    ld_error err;
    must(ld_npy_read_file(&t[0], "npy/x.npy", "x", &err), &err, "sandbox x.npy");
    must(ld_npy_read_file(&t[1], "npy/ids.npy", "ids", &err), &err, "sandbox ids.npy");
    must(ld_onnx_load_tensor_file(&t[2], "ab.pb", &err), &err, "sandbox ab.pb");
    must(ld_npy_read_file(&t[3], "npy/flag.npy", "flag", &err), &err, "sandbox flag.npy");
    write_dump("d.h5", t, 4);
    write_dump("partial.h5", t, 2);
    for (int i = 0; i < 4; i++)
        ld_tensor_destroy(t[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ld_error err;
    must(ld_onnx_load_buffer(&model, model_bytes, sizeof model_bytes, NULL, "fuzz.onnx", &err),
         &err, "loading the built-in model");
    home_fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (home_fd < 0 || chdir(fuzz_sandbox()) != 0)
        fuzz_fail("cannot enter the sandbox", NULL);
    make_input_files();
    if (fchdir(home_fd) != 0)
        fuzz_fail("cannot leave the sandbox", NULL);
    return 0;
}

static void fuzz_shapes(const char *text)
{
    ld_input_shape_arg *args = NULL;
    int n = 0;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_inputs_parse_shapes(text, &args, &n, &err);
    fuzz_check_status(st, &err, "ld_inputs_parse_shapes");
    if (st != LD_OK)
        return;
    for (int i = 0; i < n; i++)
        if (!args[i].name || args[i].shape.rank < 0 || args[i].shape.rank > LD_MAX_RANK)
            fuzz_fail("parsed --input-shapes item without a name or with a bad rank", NULL);
    ld_shape shapes[4];
    st = ld_inputs_resolve_shapes(model, args, n, NULL, shapes, &err);
    fuzz_check_status(st, &err, "ld_inputs_resolve_shapes");
    ld_input_shape_args_free(args, n);
}

static void fuzz_ranges(const char *text)
{
    ld_input_range_arg *args = NULL;
    int n = 0;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_inputs_parse_ranges(text, &args, &n, &err);
    fuzz_check_status(st, &err, "ld_inputs_parse_ranges");
    if (st != LD_OK)
        return;
    for (int i = 0; i < n; i++)
        if (!(args[i].range.lo <= args[i].range.hi))
            fuzz_fail("parsed --val-range with lo > hi or NaN", NULL);
    ld_input_range_args_free(args, n);
    /* The whole path: names checked against the model, values generated. */
    ld_input_set set = {0};
    ld_inputs_options opts = {.shapes = "batch:3,seq:2", .ranges = text, .seed = 7};
    st = ld_inputs_make(&set, model, &opts, &err);
    fuzz_check_status(st, &err, "ld_inputs_make (generated)");
    ld_input_set_clear(&set);
}

/* Paths must stay inside the sandbox: no absolute paths, no "..". */
static bool source_is_confined(const char *s)
{
    if (strstr(s, ".."))
        return false;
    for (const char *p = s; *p; p++)
        if (*p == '/' && (p == s || p[-1] == ':' || p[-1] == ','))
            return false;
    return true;
}

static void fuzz_load_inputs(char *text)
{
    const char *sources[8];
    int n = 0;
    char *save = NULL;
    char *shapes = strchr(text, '\n');
    if (!shapes)
        return;
    *shapes = '\0';
    shapes = text; /* line 1 */
    for (char *line = strtok_r(shapes + strlen(shapes) + 1, "\n", &save); line && n < 8;
         line = strtok_r(NULL, "\n", &save)) {
        if (!source_is_confined(line))
            return;
        sources[n++] = line;
    }
    if (n == 0)
        return;
    ld_input_set set = {0};
    ld_inputs_options opts = {.shapes = *shapes ? shapes : NULL, .n_sources = n,
                              .sources = sources};
    ld_error err;
    ld_error_clear(&err);
    if (chdir(fuzz_sandbox()) != 0)
        fuzz_fail("cannot enter the sandbox", NULL);
    ld_status st = ld_inputs_make(&set, model, &opts, &err);
    if (fchdir(home_fd) != 0)
        fuzz_fail("cannot leave the sandbox", NULL);
    fuzz_check_status(st, &err, "ld_inputs_make (loaded)");
    if (st == LD_OK) {
        if (set.n != model->n_inputs || set.generated)
            fuzz_fail("loaded input set has the wrong size or claims to be generated", NULL);
        for (int k = 0; k < set.n; k++)
            if (!set.tensors[k] || !ld_shape_equal(&set.tensors[k]->shape, &set.shapes[k]))
                fuzz_fail("loaded input missing or its shape differs from the resolved one",
                          NULL);
    }
    ld_input_set_clear(&set);
}

static void fuzz_layer_rules(uint8_t flags, const char *spec)
{
    if (!source_is_confined(spec))
        return;
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = flags & 8;
    cfg.bf16 = flags & 16;
    cfg.constraints = (ld_constraints)((flags >> 5) % 3);
    ld_error err;
    ld_error_clear(&err);
    if (chdir(fuzz_sandbox()) != 0)
        fuzz_fail("cannot enter the sandbox", NULL);
    ld_status st = ld_engine_add_rules(&cfg, spec, flags & 4, &err);
    if (fchdir(home_fd) != 0)
        fuzz_fail("cannot leave the sandbox", NULL);
    fuzz_check_status(st, &err, "ld_engine_add_rules");
    if (st == LD_OK) {
        char text[256];
        ld_engine_config_describe(&cfg, text, sizeof text);
        ld_precision_plan *plan = NULL;
        st = ld_engine_config_check(&cfg, &err);
        if (st == LD_OK)
            st = ld_precision_plan_build(model, &cfg, &plan, &err);
        fuzz_check_status(st, &err, "ld_precision_plan_build");
        if (st == LD_OK && plan->n_layers != model->n_nodes)
            fuzz_fail("plan does not cover every node", NULL);
        ld_precision_plan_destroy(plan);
    }
    ld_engine_config_clear(&cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    char *text = fuzz_cstring(data + 1, size - 1);
    switch (data[0] & 3) {
    case 0: fuzz_shapes(text); break;
    case 1: fuzz_ranges(text); break;
    case 2: fuzz_load_inputs(text); break;
    default: fuzz_layer_rules(data[0], text); break;
    }
    free(text);
    return 0;
}
