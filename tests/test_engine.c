/* Tests of the emulated engine's configuration and precision plan
 * (include/layerdiff/engine.h): --layer-precisions / --layer-output-types
 * SPEC parsing and its errors, the plan's rules (policy, TF32 and
 * NVIDIA_TF32_OVERRIDE, patterns, Casts, --respect-declared-types, graph
 * outputs, untouched layers), every conflict's message and the warnings,
 * and the numerics the plan gives the executor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/engine_internal.h"
#include "layerdiff/engine.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define FLOAT16 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64
#define ATTR_INT ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT

/* --- helpers ------------------------------------------------------------------------------ */

static void expect_contains(const char *text, const char *want)
{
    if (!strstr(text, want))
        fail_msg("'%s' lacks '%s'", text, want);
}

static ld_engine_config config_with(const char *precisions, const char *outputs,
                                    ld_constraints c)
{
    ld_engine_config cfg;
    ld_error err;
    ld_engine_config_init(&cfg);
    cfg.constraints = c;
    if (precisions && ld_engine_add_rules(&cfg, precisions, false, &err) != LD_OK)
        fail_msg("%s", err.message);
    if (outputs && ld_engine_add_rules(&cfg, outputs, true, &err) != LD_OK)
        fail_msg("%s", err.message);
    return cfg;
}

/* The spec must fail with a usage error whose one-line message contains want. */
static void expect_spec_error(const char *spec, bool output_types, const char *want)
{
    ld_engine_config cfg;
    ld_error err;
    ld_engine_config_init(&cfg);
    assert_int_equal(ld_engine_add_rules(&cfg, "keep:fp16", output_types, &err), LD_OK);
    ob_expect_message(ld_engine_add_rules(&cfg, spec, output_types, &err), LD_ERR_USAGE, &err,
                      output_types ? "--layer-output-types" : "--layer-precisions", want);
    /* the rules it had are kept */
    assert_int_equal(output_types ? cfg.n_layer_output_types : cfg.n_layer_precisions, 1);
    ld_engine_config_clear(&cfg);
}

static void cast_node(Onnx__GraphProto *g, const char *name, const char *in, const char *out,
                      int to)
{
    Onnx__AttributeProto *a = ob_attr(ob_node(g, "Cast", name, in, out), "to", ATTR_INT);
    a->has_i = 1;
    a->i = to;
}

/* x [2,4] f32 -> MatMul "mm" (W) -> Relu "relu" -> Cast "cast16" (fp16) -> Softmax "sm"
 * -> Cast "cast32" (fp32) -> Add "out" (bias) -> y (graph output, float32)
 * relu's output -> Shape "shape" -> Gather "dims" (static int64)
 * ids [2] int64 -> Identity "ids_copy" -> ids2 (graph output)
 * cast32's output -> Equal "eq" -> flag (bool graph output) */
static ld_graph *mixed_graph(void)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t xd[2] = {2, 4}, wd[2] = {4, 4}, one = 1;
    ob_input(g, "x", FLOAT, 2, xd);
    ob_input(g, "ids", INT64, 1, (int64_t[]){2});
    Onnx__TensorProto *w = ob_tensor("W", FLOAT, 2, wd);
    ob_set_raw(w, (float[16]){0}, sizeof(float[16]));
    OB_PUSH(g->initializer, g->n_initializer, w);
    ob_float_init(g, "bias", 4);
    Onnx__TensorProto *idx = ob_tensor("idx", INT64, 1, &one);
    ob_set_raw(idx, (int64_t[]){0}, sizeof(int64_t));
    OB_PUSH(g->initializer, g->n_initializer, idx);
    ob_node(g, "MatMul", "mm", "x,W", "a");
    ob_node(g, "Relu", "relu", "a", "b");
    ob_node(g, "Shape", "shape", "b", "s");
    ob_node(g, "Gather", "dims", "s,idx", "sd");
    cast_node(g, "cast16", "b", "c", FLOAT16);
    ob_node(g, "Softmax", "sm", "c", "d");
    cast_node(g, "cast32", "d", "e", FLOAT);
    ob_node(g, "Add", "out", "e,bias", "y");
    ob_node(g, "Identity", "ids_copy", "ids", "ids2");
    ob_node(g, "Equal", "eq", "e,e", "flag");
    ob_output(g, "y", FLOAT);
    ob_output(g, "ids2", INT64);
    ob_output(g, "flag", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL);
    ob_output(g, "sd", INT64);
    return ob_load_ok(m);
}

static const ld_layer_plan *layer(const ld_graph *g, const ld_precision_plan *p, const char *name)
{
    int i = ld_graph_find_node(g, name);
    assert_true(i >= 0);
    return &p->layers[i];
}

static ld_precision_plan *plan_ok(const ld_graph *g, const ld_engine_config *cfg)
{
    ld_precision_plan *p = NULL;
    ld_error err;
    ld_status st = ld_precision_plan_build(g, cfg, &p, &err);
    if (st != LD_OK)
        fail_msg("plan failed: %s", err.message);
    return p;
}

static void expect_plan_error(const ld_graph *g, const ld_engine_config *cfg, const char *want1,
                              const char *want2)
{
    ld_precision_plan *p = NULL;
    ld_error err;
    ld_status st = ld_precision_plan_build(g, cfg, &p, &err);
    ob_expect_message(st, LD_ERR_USAGE, &err, "", want1);
    if (want2)
        expect_contains(err.message, want2);
    assert_null(p);
}

/* The plan's only warning contains want. */
static void expect_one_warning(const ld_precision_plan *p, const char *want)
{
    assert_int_equal(p->n_warnings, 1);
    expect_contains(p->warnings[0], want);
    assert_null(strchr(p->warnings[0], '\n'));
}

/* --- specs ---------------------------------------------------------------------------- */

static void test_spec_parsing(void **state)
{
    (void)state;
    ld_engine_config cfg;
    ld_error err;
    ld_engine_config_init(&cfg);
    assert_int_equal(ld_engine_add_rules(&cfg, " conv*:fp16 , op:Softmax:fp32,/a/b:c:bf16,"
                                         "x:float16,y:TF32", false, &err), LD_OK);
    assert_int_equal(cfg.n_layer_precisions, 5);
    assert_string_equal(cfg.layer_precisions[0].pattern, "conv*");
    assert_string_equal(cfg.layer_precisions[0].text, "conv*:fp16");
    assert_int_equal(cfg.layer_precisions[0].precision, LD_PRECISION_FP16);
    assert_string_equal(cfg.layer_precisions[1].pattern, "op:Softmax"); /* the last ':' splits */
    assert_int_equal(cfg.layer_precisions[1].precision, LD_PRECISION_FP32);
    assert_string_equal(cfg.layer_precisions[2].pattern, "/a/b:c");
    assert_int_equal(cfg.layer_precisions[2].precision, LD_PRECISION_BF16);
    assert_int_equal(cfg.layer_precisions[3].precision, LD_PRECISION_FP16);
    assert_int_equal(cfg.layer_precisions[4].precision, LD_PRECISION_TF32);
    assert_int_equal(ld_engine_add_rules(&cfg, "a:fp16,b:bf16,c:fp32", true, &err), LD_OK);
    assert_int_equal(cfg.n_layer_output_types, 3);
    assert_int_equal(cfg.layer_output_types[0].type, LD_DTYPE_FLOAT16);
    assert_int_equal(cfg.layer_output_types[1].type, LD_DTYPE_BFLOAT16);
    assert_int_equal(cfg.layer_output_types[2].type, LD_DTYPE_FLOAT32);
    /* a second spec appends */
    assert_int_equal(ld_engine_add_rules(&cfg, "z:fp32", false, &err), LD_OK);
    assert_int_equal(cfg.n_layer_precisions, 6);

    ld_engine_config copy;
    assert_int_equal(ld_engine_config_copy(&copy, &cfg, &err), LD_OK);
    assert_int_equal(copy.n_layer_precisions, 6);
    assert_ptr_not_equal(copy.layer_precisions[2].pattern, cfg.layer_precisions[2].pattern);
    assert_string_equal(copy.layer_precisions[2].pattern, "/a/b:c");
    ld_engine_config_clear(&cfg);
    assert_int_equal(cfg.n_layer_precisions, 0);
    assert_true(cfg.tf32);
    assert_string_equal(copy.layer_output_types[1].text, "b:bf16");
    ld_engine_config_clear(&copy);
}

static void test_spec_errors(void **state)
{
    (void)state;
    expect_spec_error("conv1", false, "entry 'conv1' is not PATTERN:TYPE");
    expect_spec_error(":fp16", false, "entry ':fp16' has an empty pattern");
    expect_spec_error("op::fp16", false, "entry 'op::fp16' has an empty pattern");
    expect_spec_error("a:fp16,,b:fp32", false, "empty entry");
    expect_spec_error("a:fp16,", false, "empty entry");
    expect_spec_error("", false, "empty list");
    expect_spec_error("   ", true, "empty list");
    expect_spec_error("x:int8", false, "entry 'x:int8': 'int8' is not a float type (use fp32, "
                      "tf32, fp16 or bf16)");
    expect_spec_error("x:bool", true, "'bool' is not a float type (use fp32, fp16 or bf16)");
    expect_spec_error("x:float64", false, "float64 layers are left alone");
    expect_spec_error("x:fp8", false, "unknown type 'fp8'");
    expect_spec_error("x:", false, "unknown type ''");
    expect_spec_error("x:tf32", true, "entry 'x:tf32': tf32 is a compute precision");
}

static void test_spec_file(void **state)
{
    (void)state;
    ob_make_tmpdir();
    char *path = ob_tmp_path("rules.txt");
    const char *text = "# per-layer precisions\n\n/enc/a,b:fp32\r\n  op:Softmax : fp16  \n";
    ob_write_file(path, text, strlen(text));
    char spec[512];
    snprintf(spec, sizeof spec, "@%s", path);
    ld_engine_config cfg;
    ld_error err;
    ld_engine_config_init(&cfg);
    assert_int_equal(ld_engine_add_rules(&cfg, spec, false, &err), LD_OK);
    assert_int_equal(cfg.n_layer_precisions, 2);
    assert_string_equal(cfg.layer_precisions[0].pattern, "/enc/a,b"); /* commas are names here */
    assert_string_equal(cfg.layer_precisions[1].pattern, "op:Softmax");
    assert_int_equal(cfg.layer_precisions[1].precision, LD_PRECISION_FP16);

    const char *bad = "a:fp16\nb:int32\n";
    char *bad_path = ob_tmp_path("bad.txt");
    ob_write_file(bad_path, bad, strlen(bad));
    snprintf(spec, sizeof spec, "@%s", bad_path);
    ob_expect_message(ld_engine_add_rules(&cfg, spec, true, &err), LD_ERR_USAGE, &err,
                      "--layer-output-types @", "bad.txt line 2: entry 'b:int32'");
    char *empty = ob_tmp_path("empty.txt");
    ob_write_file(empty, "# nothing\n", 10);
    snprintf(spec, sizeof spec, "@%s", empty);
    ob_expect_message(ld_engine_add_rules(&cfg, spec, false, &err), LD_ERR_USAGE, &err,
                      "--layer-precisions @", "no entries in the file");
    ob_expect_message(ld_engine_add_rules(&cfg, "@/nonexistent/rules.txt", false, &err),
                      LD_ERR_IO, &err, "--layer-precisions @/nonexistent/rules.txt",
                      "cannot open");
    assert_int_equal(cfg.n_layer_precisions, 2);
    assert_int_equal(cfg.n_layer_output_types, 0);
    ld_engine_config_clear(&cfg);
}

static void test_config_check_and_describe(void **state)
{
    (void)state;
    ld_engine_config cfg = config_with("a:fp16", "b:fp32", LD_CONSTRAINTS_OBEY);
    ld_error err;
    char buf[256];
    unsetenv("NVIDIA_TF32_OVERRIDE");
    assert_int_equal(ld_engine_config_check(&cfg, &err), LD_OK);
    cfg.fp16 = true;
    cfg.accumulate_half = true;
    cfg.tf32_rounding = LD_ROUND_NEAREST_AWAY;
    assert_string_equal(ld_engine_config_describe(&cfg, buf, sizeof buf),
                        "fp16, tf32 rna, accumulate half, constraints obey, layer-precisions "
                        "a:fp16, layer-output-types b:fp32");
    cfg.bf16 = true;
    ob_expect_message(ld_engine_config_check(&cfg, &err), LD_ERR_USAGE, &err, "--fp16 and --bf16",
                      "exclude each other");
    ld_graph *g = mixed_graph();
    expect_plan_error(g, &cfg, "--fp16 and --bf16 exclude each other", NULL);
    cfg.bf16 = false;
    setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
    assert_false(ld_engine_tf32_enabled(&cfg));
    expect_contains(ld_engine_config_describe(&cfg, buf, sizeof buf),
                    "tf32 off (NVIDIA_TF32_OVERRIDE=0)");
    setenv("NVIDIA_TF32_OVERRIDE", "1", 1);
    assert_true(ld_engine_tf32_enabled(&cfg));
    unsetenv("NVIDIA_TF32_OVERRIDE");
    cfg.tf32 = false;
    assert_false(ld_engine_tf32_enabled(&cfg));
    char tiny[8];
    ld_engine_config_describe(&cfg, tiny, sizeof tiny); /* truncates safely */
    assert_int_equal(strlen(tiny), 7);
    ld_engine_config_clear(&cfg);
    ld_graph_destroy(g);
}

/* --- plan: policies ------------------------------------------------------------------------ */

static void test_plan_default_fp32_tf32(void **state)
{
    (void)state;
    unsetenv("NVIDIA_TF32_OVERRIDE");
    ld_graph *g = mixed_graph();
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    ld_precision_plan *p = plan_ok(g, &cfg);
    assert_true(p->tf32);
    assert_int_equal(p->n_warnings, 0);
    const ld_layer_plan *mm = layer(g, p, "mm");
    assert_true(mm->emulated);
    assert_int_equal(mm->precision, LD_PRECISION_TF32);
    assert_int_equal(mm->output_type, LD_DTYPE_FLOAT32);
    assert_string_equal(mm->why, "fp32 default; TF32 for conv/matmul");
    assert_int_equal(layer(g, p, "relu")->precision, LD_PRECISION_FP32);
    assert_string_equal(layer(g, p, "relu")->why, "fp32 default");
    /* the fp16 island keeps its Casts' types; Softmax computes in fp32 */
    const ld_layer_plan *c16 = layer(g, p, "cast16");
    assert_int_equal(c16->output_type, LD_DTYPE_FLOAT16);
    assert_int_equal(c16->output_reason, LD_PLAN_CAST);
    assert_string_equal(c16->why, "fp32 default; output: Cast to float16");
    assert_int_equal(layer(g, p, "sm")->output_type, LD_DTYPE_FLOAT32);
    /* untouched layers */
    const ld_layer_plan *shape = layer(g, p, "shape"), *dims = layer(g, p, "dims");
    assert_false(shape->emulated);
    assert_int_equal(shape->precision_reason, LD_PLAN_SHAPE);
    assert_int_equal(dims->precision_reason, LD_PLAN_SHAPE);
    assert_string_equal(shape->why, "untouched: it computes shapes or constants");
    const ld_layer_plan *ids = layer(g, p, "ids_copy");
    assert_false(ids->emulated);
    assert_int_equal(ids->precision_reason, LD_PLAN_NOT_FLOAT);
    assert_int_equal(ids->output_type, LD_DTYPE_UNDEFINED);
    expect_contains(ids->why, "no float32, float16 or bfloat16 tensors");
    /* Equal: a float layer without float outputs */
    const ld_layer_plan *eq = layer(g, p, "eq");
    assert_true(eq->emulated);
    assert_int_equal(eq->output_type, LD_DTYPE_UNDEFINED);
    ld_precision_plan_destroy(p);

    cfg.tf32 = false;
    p = plan_ok(g, &cfg);
    assert_int_equal(layer(g, p, "mm")->precision, LD_PRECISION_FP32);
    assert_string_equal(layer(g, p, "mm")->why, "fp32 default; TF32 off (--no-tf32)");
    ld_precision_plan_destroy(p);
    ld_graph_destroy(g);
}

static void test_plan_tf32_override(void **state)
{
    (void)state;
    ld_graph *g = mixed_graph();
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
    ld_precision_plan *p = plan_ok(g, &cfg);
    assert_false(p->tf32);
    assert_int_equal(p->n_warnings, 0); /* the default yields silently, as on a GPU */
    assert_int_equal(layer(g, p, "mm")->precision, LD_PRECISION_FP32);
    assert_string_equal(layer(g, p, "mm")->why, "fp32 default; TF32 off (NVIDIA_TF32_OVERRIDE=0)");
    ld_precision_plan_destroy(p);
    cfg.tf32_explicit = true; /* --tf32 */
    p = plan_ok(g, &cfg);
    assert_int_equal(layer(g, p, "mm")->precision, LD_PRECISION_FP32);
    expect_one_warning(p, "--tf32 has no effect: NVIDIA_TF32_OVERRIDE=0 in the environment");
    ld_precision_plan_destroy(p);
    unsetenv("NVIDIA_TF32_OVERRIDE");
    ld_graph_destroy(g);
}

static void test_plan_fp16_bf16(void **state)
{
    (void)state;
    unsetenv("NVIDIA_TF32_OVERRIDE");
    ld_graph *g = mixed_graph();
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    ld_precision_plan *p = plan_ok(g, &cfg);
    const char *fp16_layers[] = {"mm", "relu", "cast16", "sm", "cast32", "out", "eq"};
    for (size_t i = 0; i < sizeof fp16_layers / sizeof fp16_layers[0]; i++)
        assert_int_equal(layer(g, p, fp16_layers[i])->precision, LD_PRECISION_FP16);
    assert_string_equal(layer(g, p, "mm")->why, "--fp16");
    assert_int_equal(layer(g, p, "relu")->output_type, LD_DTYPE_FLOAT16);
    /* the fp32 island after cast32 runs in fp16 too; the Cast's type is fixed */
    assert_int_equal(layer(g, p, "cast32")->output_type, LD_DTYPE_FLOAT32);
    /* the graph output leaves in its declared float32 */
    const ld_layer_plan *out = layer(g, p, "out");
    assert_int_equal(out->output_type, LD_DTYPE_FLOAT16);
    assert_int_equal(out->delivered_type, LD_DTYPE_FLOAT32);
    assert_string_equal(out->why, "--fp16; graph output delivered as float32");
    assert_false(layer(g, p, "shape")->emulated);
    ld_precision_plan_destroy(p);

    cfg.fp16 = false;
    cfg.bf16 = true;
    p = plan_ok(g, &cfg);
    assert_int_equal(layer(g, p, "mm")->precision, LD_PRECISION_BF16); /* bf16 beats TF32 */
    assert_int_equal(layer(g, p, "relu")->output_type, LD_DTYPE_BFLOAT16);
    assert_string_equal(layer(g, p, "relu")->why, "--bf16");
    ld_precision_plan_destroy(p);
    ld_graph_destroy(g);
}

static void test_plan_respect_declared_types(void **state)
{
    (void)state;
    unsetenv("NVIDIA_TF32_OVERRIDE");
    ld_graph *g = mixed_graph();
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    cfg.respect_declared_types = true;
    ld_precision_plan *p = plan_ok(g, &cfg);
    /* fp32 layers outside the island: fp32 (TF32 for the MatMul) */
    const ld_layer_plan *mm = layer(g, p, "mm"), *relu = layer(g, p, "relu");
    assert_int_equal(mm->precision, LD_PRECISION_TF32);
    assert_string_equal(mm->why, "model declares float32; TF32 for conv/matmul");
    assert_int_equal(relu->precision, LD_PRECISION_FP32);
    assert_int_equal(relu->output_type, LD_DTYPE_FLOAT32);
    assert_int_equal(relu->precision_reason, LD_PLAN_DECLARED);
    assert_string_equal(relu->why, "model declares float32");
    /* the fp16 island: inferred from the Cast, computes in fp16 */
    const ld_layer_plan *sm = layer(g, p, "sm");
    assert_int_equal(sm->precision, LD_PRECISION_FP16);
    assert_int_equal(sm->output_type, LD_DTYPE_FLOAT16);
    assert_int_equal(layer(g, p, "cast16")->precision, LD_PRECISION_FP16);
    assert_int_equal(layer(g, p, "cast32")->precision, LD_PRECISION_FP32);
    assert_int_equal(layer(g, p, "out")->delivered_type, LD_DTYPE_UNDEFINED);
    /* Equal has no float output: its input's type */
    assert_int_equal(layer(g, p, "eq")->precision, LD_PRECISION_FP32);
    ld_precision_plan_destroy(p);
    ld_graph_destroy(g);
}

/* --- plan: rules ---------------------------------------------------------------------------- */

static void test_plan_patterns(void **state)
{
    (void)state;
    unsetenv("NVIDIA_TF32_OVERRIDE");
    ld_graph *g = mixed_graph();
    ld_engine_config cfg = config_with("*:fp16,relu:fp32,op:Soft*:bf16", "relu:fp16,op:Add:bf16",
                                       LD_CONSTRAINTS_PREFER);
    ld_precision_plan *p = plan_ok(g, &cfg);
    assert_int_equal(p->n_warnings, 0);
    const ld_layer_plan *relu = layer(g, p, "relu"), *mm = layer(g, p, "mm");
    assert_int_equal(relu->precision, LD_PRECISION_FP32);
    assert_int_equal(relu->precision_reason, LD_PLAN_PATTERN);
    assert_string_equal(relu->precision_rule->text, "relu:fp32");
    assert_int_equal(relu->output_type, LD_DTYPE_FLOAT16);
    assert_int_equal(relu->output_reason, LD_PLAN_PATTERN);
    assert_string_equal(relu->why, "--layer-precisions 'relu:fp32'; output: --layer-output-types "
                                   "'relu:fp16'");
    assert_int_equal(mm->precision, LD_PRECISION_FP16); /* "*" for the unnamed */
    assert_string_equal(mm->precision_rule->text, "*:fp16");
    assert_int_equal(layer(g, p, "sm")->precision, LD_PRECISION_BF16);
    /* an output-type rule on a graph output: no conversion to the declared type */
    const ld_layer_plan *out = layer(g, p, "out");
    assert_int_equal(out->output_type, LD_DTYPE_BFLOAT16);
    assert_int_equal(out->delivered_type, LD_DTYPE_UNDEFINED);
    /* "*" never touches untouched layers */
    assert_false(layer(g, p, "shape")->emulated);
    ld_precision_plan_destroy(p);
    ld_engine_config_clear(&cfg);

    /* with "none" nothing applies, and one warning lists every rule */
    cfg = config_with("relu:fp16,x*:fp32", "out:bf16", LD_CONSTRAINTS_NONE);
    p = plan_ok(g, &cfg);
    assert_int_equal(layer(g, p, "relu")->precision, LD_PRECISION_FP32);
    assert_int_equal(layer(g, p, "out")->output_type, LD_DTYPE_FLOAT32);
    expect_one_warning(p, "--precision-constraints none (the default) ignores --layer-precisions "
                          "'relu:fp16', 'x*:fp32' and --layer-output-types 'out:bf16'; use "
                          "--precision-constraints prefer or obey");
    ld_precision_plan_destroy(p);
    ld_engine_config_clear(&cfg);
    ld_graph_destroy(g);
}

static void test_plan_conflicts(void **state)
{
    (void)state;
    ld_graph *g = mixed_graph();
    /* the *:fp16,*:fp32 mistake */
    ld_engine_config cfg = config_with("*:fp16,*:fp32", NULL, LD_CONSTRAINTS_PREFER);
    expect_plan_error(g, &cfg, "--layer-precisions '*:fp16' and '*:fp32' give every layer two "
                      "different types", NULL);
    ld_engine_config_clear(&cfg);
    /* two patterns on one layer */
    cfg = config_with("re*:fp16,*lu:fp32", NULL, LD_CONSTRAINTS_OBEY);
    expect_plan_error(g, &cfg, "--layer-precisions 're*:fp16' and '*lu:fp32' give node 'relu' "
                      "(Relu) two different types (fp16 and fp32)", NULL);
    ld_engine_config_clear(&cfg);
    cfg = config_with(NULL, "op:Relu:fp16,relu:bf16", LD_CONSTRAINTS_PREFER);
    expect_plan_error(g, &cfg, "--layer-output-types 'op:Relu:fp16' and 'relu:bf16'", NULL);
    ld_engine_config_clear(&cfg);
    /* agreeing patterns are fine */
    cfg = config_with("re*:fp16,*lu:fp16,relu:float16", NULL, LD_CONSTRAINTS_OBEY);
    ld_precision_plan *p = plan_ok(g, &cfg);
    assert_int_equal(layer(g, p, "relu")->precision, LD_PRECISION_FP16);
    ld_precision_plan_destroy(p);
    ld_engine_config_clear(&cfg);
    /* an output type against a Cast's `to` */
    cfg = config_with(NULL, "cast*:fp32", LD_CONSTRAINTS_PREFER);
    expect_plan_error(g, &cfg, "--layer-output-types 'cast*:fp32' contradicts node 'cast16' "
                      "(Cast), whose output type is fixed by its to=float16", NULL);
    ld_engine_config_clear(&cfg);
    /* ... but "*" leaves Casts alone, and an agreeing type is fine */
    cfg = config_with(NULL, "*:bf16,cast32:fp32", LD_CONSTRAINTS_OBEY);
    p = plan_ok(g, &cfg);
    assert_int_equal(layer(g, p, "cast16")->output_type, LD_DTYPE_FLOAT16);
    assert_int_equal(layer(g, p, "cast16")->output_reason, LD_PLAN_CAST);
    assert_int_equal(layer(g, p, "cast32")->output_reason, LD_PLAN_PATTERN);
    assert_int_equal(layer(g, p, "relu")->output_type, LD_DTYPE_BFLOAT16);
    ld_precision_plan_destroy(p);
    ld_engine_config_clear(&cfg);
    ld_graph_destroy(g);
}

static void test_plan_unusable_rules(void **state)
{
    (void)state;
    ld_graph *g = mixed_graph();
    ld_engine_config cfg = config_with("shape:fp16,nothing*:fp32", "eq:fp16",
                                       LD_CONSTRAINTS_PREFER);
    ld_precision_plan *p = plan_ok(g, &cfg);
    assert_int_equal(p->n_warnings, 3);
    assert_string_equal(p->warnings[0], "--layer-precisions 'shape:fp16' is not applied: it "
                        "matches only layers it cannot apply to, e.g. node 'shape' (Shape): it "
                        "computes shapes or constants");
    assert_string_equal(p->warnings[1], "--layer-precisions 'nothing*:fp32' matches no layer");
    assert_string_equal(p->warnings[2], "--layer-output-types 'eq:fp16' is not applied: it "
                        "matches only layers it cannot apply to, e.g. node 'eq' (Equal): it has "
                        "no float outputs");
    assert_false(layer(g, p, "shape")->emulated);
    ld_precision_plan_destroy(p);
    cfg.constraints = LD_CONSTRAINTS_OBEY;
    expect_plan_error(g, &cfg, "--layer-precisions 'shape:fp16' cannot be obeyed: it matches "
                      "only layers it cannot apply to, e.g. node 'shape' (Shape)", NULL);
    ld_engine_config_clear(&cfg);
    cfg = config_with("ids_copy:fp16", NULL, LD_CONSTRAINTS_OBEY);
    expect_plan_error(g, &cfg, "node 'ids_copy' (Identity): it has no float32, float16 or "
                      "bfloat16 tensors", NULL);
    ld_engine_config_clear(&cfg);
    cfg = config_with(NULL, "eq:fp16", LD_CONSTRAINTS_OBEY);
    expect_plan_error(g, &cfg, "'eq:fp16' cannot be obeyed", "it has no float outputs");
    ld_engine_config_clear(&cfg);
    /* a glob over float and non-float layers applies where it can, silently */
    cfg = config_with("s*:bf16", NULL, LD_CONSTRAINTS_OBEY);
    p = plan_ok(g, &cfg);
    assert_int_equal(p->n_warnings, 0);
    assert_int_equal(layer(g, p, "sm")->precision, LD_PRECISION_BF16);
    assert_false(layer(g, p, "shape")->emulated);
    ld_precision_plan_destroy(p);
    ld_engine_config_clear(&cfg);
    ld_graph_destroy(g);
}

/* --- numerics and static types ------------------------------------------------------------- */

static void test_plan_numerics(void **state)
{
    (void)state;
    unsetenv("NVIDIA_TF32_OVERRIDE");
    ld_graph *g = mixed_graph();
    ld_engine_config cfg = config_with("relu:fp16", NULL, LD_CONSTRAINTS_OBEY);
    cfg.tf32_rounding = LD_ROUND_TOWARD_ZERO;
    cfg.flush_denormals = true;
    cfg.accumulate_half = true;
    ld_precision_plan *p = plan_ok(g, &cfg);
    ld_layer_numerics n;
    ld_precision_plan_numerics(p, &cfg, ld_graph_find_node(g, "mm"), &n);
    assert_int_equal(n.precision, LD_PRECISION_TF32);
    assert_int_equal(n.round.mode, LD_ROUND_TOWARD_ZERO);
    assert_true(n.round.flush_denormals);
    assert_false(n.accumulate_half); /* GPUs do not accumulate in tf32 */
    assert_int_equal(n.output_type, LD_DTYPE_FLOAT32);
    ld_precision_plan_numerics(p, &cfg, ld_graph_find_node(g, "relu"), &n);
    assert_int_equal(n.precision, LD_PRECISION_FP16);
    assert_int_equal(n.round.mode, LD_ROUND_NEAREST_EVEN);
    assert_true(n.accumulate_half);
    assert_int_equal(n.output_type, LD_DTYPE_FLOAT16);
    ld_precision_plan_numerics(p, &cfg, ld_graph_find_node(g, "shape"), &n);
    assert_int_equal(n.precision, LD_PRECISION_FP32);
    assert_int_equal(n.output_type, LD_DTYPE_UNDEFINED); /* the executor narrows as usual */
    assert_false(n.accumulate_half);
    assert_false(n.round.flush_denormals);
    ld_precision_plan_destroy(p);
    ld_engine_config_clear(&cfg);
    ld_graph_destroy(g);
    assert_string_equal(ld_plan_reason_name(LD_PLAN_SHAPE), "shape");
    assert_string_equal(ld_plan_reason_name(LD_PLAN_NOT_FLOAT), "not-float");
    assert_string_equal(ld_plan_reason_name(LD_PLAN_CAST), "cast");
}

static void test_static_types(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t d[1] = {3};
    ob_input(g, "x", FLOAT16, 1, d);
    ob_input(g, "c", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 1, d);
    ob_node(g, "Shape", "shape", "x", "s");
    ob_node(g, "ConstantOfShape", "zeros", "s", "z");      /* float32 by default */
    ob_node(g, "Where", "where", "c,x,x", "w");           /* X's type */
    ob_node(g, "ArgMax", "am", "x", "i");
    ob_node(g, "TopK", "topk", "x,s", "tv,ti");
    ob_node(g, "Less", "less", "x,x", "l");
    ob_node(g, "Mul", "mul", "x,x", "xx");
    OB_PUSH(g->value_info, g->n_value_info,
            ob_value_info("xx", ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, -1, NULL)); /* declared */
    ob_output(g, "z", FLOAT);
    ld_graph *graph = ob_load_ok(m);
    ld_static_info info = {0};
    ld_error err;
    assert_int_equal(ld_static_info_compute(graph, &info, &err), LD_OK);
#define TYPE_OF(name) info.types[ld_graph_find_value(graph, name)]
#define DYN(name) info.dynamic[ld_graph_find_value(graph, name)]
    assert_int_equal(TYPE_OF("s"), LD_DTYPE_INT64);
    assert_int_equal(TYPE_OF("z"), LD_DTYPE_FLOAT32);
    assert_int_equal(TYPE_OF("w"), LD_DTYPE_FLOAT16);
    assert_int_equal(TYPE_OF("i"), LD_DTYPE_INT64);
    assert_int_equal(TYPE_OF("tv"), LD_DTYPE_FLOAT16);
    assert_int_equal(TYPE_OF("ti"), LD_DTYPE_INT64);
    assert_int_equal(TYPE_OF("l"), LD_DTYPE_BOOL);
    assert_int_equal(TYPE_OF("xx"), LD_DTYPE_BFLOAT16);
    assert_true(DYN("x"));
    assert_false(DYN("s"));
    assert_false(DYN("z"));
    assert_true(DYN("w"));
    assert_true(DYN("tv"));
#undef TYPE_OF
#undef DYN
    ld_static_info_free(&info);
    ld_graph_destroy(graph);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_spec_parsing),
        T(test_spec_errors),
        T(test_spec_file),
        T(test_config_check_and_describe),
        T(test_plan_default_fp32_tf32),
        T(test_plan_tf32_override),
        T(test_plan_fp16_bf16),
        T(test_plan_respect_declared_types),
        T(test_plan_patterns),
        T(test_plan_conflicts),
        T(test_plan_unusable_rules),
        T(test_plan_numerics),
        T(test_static_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
