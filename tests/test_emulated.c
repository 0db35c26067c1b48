/* Tests of the emulated backend (backends/emulated.c): runs of small graphs
 * under --fp16 / --bf16 / TF32 equal a hand-rolled scalar emulation built on
 * ld_round_to_precision (inputs and weights rounded to the layer precision,
 * fp32 compute, outputs rounded to the output type), bit for bit, and so do
 * the per-layer counters (overflows, NaNs created, underflows, subnormals),
 * including flush_denormals, fp32 islands between Casts with and without
 * --respect-declared-types, TF32 on, off, its three rounding modes and
 * NVIDIA_TF32_OVERRIDE=0, kernels that only move data, untouched layers, the
 * graph outputs' declared type and repeated runs (cached weights). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/emulated.h"
#include "backends/emulated_count.h"
#include "backends/emulated_count_internal.h"
#include "layerdiff/backend.h"
#include "layerdiff/engine.h"
#include "tests/support/emulated_testing.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define FLOAT16 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

/* --- building and running -------------------------------------------------------------- */

static void init_f32(Onnx__GraphProto *g, const char *name, int64_t n, const float *v)
{
    Onnx__TensorProto *t = ob_tensor(name, FLOAT, 1, &n);
    ob_set_raw(t, v, (size_t)n * sizeof(float));
    OB_PUSH(g->initializer, g->n_initializer, t);
}

static void int_attr(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ob_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static ld_tensor *f32_tensor(const char *name, int rank, const int64_t *dims, const float *v)
{
    ld_shape shape;
    ld_tensor *t = NULL;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, rank, dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    memcpy(t->data, v, t->nbytes);
    return t;
}

/* --- the hand-rolled emulation --------------------------------------------------------- */

typedef struct ref_layer {
    ld_precision p;             /* the layer's precision */
    ld_precision out;           /* its output type's precision */
    ld_round_options o;
    ld_layer_counters c;
    bool in_nan, in_inf;
} ref_layer;

static ref_layer ref_begin(ld_precision p, ld_precision out, bool flush)
{
    return (ref_layer){.p = p, .out = out, .o = {LD_ROUND_NEAREST_EVEN, flush}};
}

/* An input rounded to the layer precision. */
static float ref_in(ref_layer *r, float x)
{
    float y = ld_round_to_precision(x, r->p, &r->o);
    r->c.overflows += isfinite(x) && isinf(y);
    r->c.underflows += x != 0 && y == 0;
    r->in_nan |= isnan(y) != 0;
    r->in_inf |= isinf(y) != 0;
    return y;
}

static bool subnormal_in(float z, ld_precision p)
{
    float a = fabsf(z);
    return a != 0 && a < (p == LD_PRECISION_FP16 ? 0x1p-14f : 0x1p-126f);
}

/* A kernel's fp32 result rounded to the output type (after every ref_in). */
static float ref_out(ref_layer *r, float y)
{
    float z = ld_round_to_precision(y, r->out, &r->o);
    r->c.overflows += (isfinite(y) && isinf(z)) || (isinf(y) && !r->in_inf);
    r->c.nans_created += isnan(y) && !r->in_nan;
    r->c.underflows += y != 0 && z == 0;
    r->c.subnormals += subnormal_in(z, r->out);
    return z;
}

static void expect_counters(const emt_event *e, const ld_layer_counters *want)
{
    const ld_layer_counters *got = &e->counters;
    assert_true(got->present);
    if (got->overflows != want->overflows || got->nans_created != want->nans_created ||
        got->underflows != want->underflows || got->subnormals != want->subnormals)
        fail_msg("%s: counters overflow %lld nan %lld underflow %lld subnormal %lld, expected "
                 "%lld %lld %lld %lld", e->node, (long long)got->overflows,
                 (long long)got->nans_created, (long long)got->underflows,
                 (long long)got->subnormals, (long long)want->overflows,
                 (long long)want->nans_created, (long long)want->underflows,
                 (long long)want->subnormals);
}

/* t (any float dtype) holds exactly `want` (NaN matches any NaN). */
static void expect_values(const emt_event *e, ld_dtype dtype, const float *want, int n)
{
    assert_int_equal(e->t->dtype, dtype);
    assert_int_equal(e->t->count, n);
    for (int i = 0; i < n; i++) {
        float got = (float)ld_tensor_get_double(e->t, i);
        if (isnan(want[i]) && isnan(got))
            continue;
        if (emt_bits(got) != emt_bits(want[i]))
            fail_msg("%s[%d] = %a, expected %a", e->value, i, (double)got, (double)want[i]);
    }
}

/* --- fp16: rounding everywhere --------------------------------------------------------- */

static const float X8[8] = {0.1f, 1000.3f, -3.14159f, 65519.0f, 1e-3f, 2.0f, -0.5f, 7.77f};
static const float W8[8] = {3.3f, 1.001f, 0.7f, 1.0f, 1e-3f, 0.3333f, 4.0f, 1.1f};
static const float B8[8] = {0.01f, 0.5f, -1.0f, 100.0f, 0.0f, 1e-4f, 2.0f, -8.0f};

/* x -> Mul "mul" (W) -> Add "add" (B) -> Relu "relu" -> y (float32 output) */
static ld_graph *chain_graph(void)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t n = 8;
    ob_input(g, "x", FLOAT, 1, &n);
    init_f32(g, "W", 8, W8);
    init_f32(g, "B", 8, B8);
    ob_node(g, "Mul", "mul", "x,W", "m");
    ob_node(g, "Add", "add", "m,B", "a");
    ob_node(g, "Relu", "relu", "a", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

static void test_fp16_chain_equals_emulation(void **state)
{
    (void)state;
    ld_graph *g = chain_graph();
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    int64_t n = 8;
    ld_tensor *x = f32_tensor("x", 1, &n, X8);
    float m[8], a[8], y[8];
    ref_layer rm = ref_begin(LD_PRECISION_FP16, LD_PRECISION_FP16, false);
    float xr[8], wr[8], br[8];
    for (int i = 0; i < 8; i++)
        xr[i] = ref_in(&rm, X8[i]);
    for (int i = 0; i < 8; i++)
        wr[i] = ref_in(&rm, W8[i]);
    for (int i = 0; i < 8; i++)
        m[i] = ref_out(&rm, xr[i] * wr[i]);
    ref_layer ra = ref_begin(LD_PRECISION_FP16, LD_PRECISION_FP16, false);
    for (int i = 0; i < 8; i++)
        ref_in(&ra, m[i]); /* already fp16: no events, but its NaN/inf count */
    for (int i = 0; i < 8; i++)
        br[i] = ref_in(&ra, B8[i]);
    for (int i = 0; i < 8; i++)
        a[i] = ref_out(&ra, m[i] + br[i]);
    ref_layer rr = ref_begin(LD_PRECISION_FP16, LD_PRECISION_FP16, false);
    for (int i = 0; i < 8; i++)
        ref_in(&rr, a[i]);
    assert_true(rr.in_inf); /* a holds +inf: Relu's inf is no overflow */
    for (int i = 0; i < 8; i++)
        y[i] = ref_out(&rr, a[i] > 0 ? a[i] : 0.0f);
    /* what the emulation must show, by hand: 65519 rounds to 65504, + 100 overflows */
    assert_true(m[3] == 65504.0f && isinf(a[3]));
    assert_int_equal(ra.c.overflows, 1);
    assert_int_equal(rm.c.subnormals, 1); /* 1e-3 * 1e-3 */

    emt_capture cap = {0};
    for (int runs = 1; runs <= 3; runs += 2) { /* the third run reads cached weights */
        emt_run(g, &cfg, &x, &cap, runs, 2, true);
        expect_values(emt_find(&cap, "m"), LD_DTYPE_FLOAT16, m, 8);
        expect_values(emt_find(&cap, "a"), LD_DTYPE_FLOAT16, a, 8);
        /* the graph output leaves in its declared float32, holding fp16 values */
        expect_values(emt_find(&cap, "y"), LD_DTYPE_FLOAT32, y, 8);
        expect_counters(emt_find(&cap, "m"), &rm.c);
        expect_counters(emt_find(&cap, "a"), &ra.c);
        expect_counters(emt_find(&cap, "y"), &rr.c);
        assert_int_equal(emt_find(&cap, "m")->precision, LD_PRECISION_FP16);
        emt_capture_free(&cap);
    }
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

/* --- counters ------------------------------------------------------------------------- */

/* One node per case, each on its own input. */
static void test_counters(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *gp = m->graph;
    int64_t n = 4;
    const char *names[] = {"e", "s", "sn", "ai", "d"};
    for (int i = 0; i < 5; i++)
        ob_input(gp, names[i], FLOAT, 1, &n);
    init_f32(gp, "z", 4, (float[]){0, 0, 0, 4});
    ob_node(gp, "Exp", "exp", "e", "exp_out");
    ob_node(gp, "Sqrt", "sqrt", "s", "sqrt_out");
    ob_node(gp, "Sqrt", "sqrt_nan", "sn", "sqrt_nan_out");
    ob_node(gp, "Add", "add_inf", "ai,ai", "add_inf_out");
    ob_node(gp, "Div", "div0", "d,z", "div0_out");
    const char *outs[] = {"exp_out", "sqrt_out", "sqrt_nan_out", "add_inf_out", "div0_out"};
    for (int i = 0; i < 5; i++)
        ob_output(gp, outs[i], FLOAT16); /* delivered as fp16: no second conversion */
    ld_graph *g = ob_load_ok(m);
    const float vals[5][4] = {{12.0f, 100.0f, 1.0f, -100.0f},
                              {-1.0f, 4.0f, 2.0f, 0.0f},
                              {NAN, -1.0f, 4.0f, 1.0f},
                              {INFINITY, 60000.0f, 1.0f, 2.0f},
                              {1.0f, -1.0f, 0.0f, 2.0f}};
    ld_tensor *inputs[5];
    for (int i = 0; i < 5; i++)
        inputs[i] = f32_tensor(names[i], 1, &n, vals[i]);
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    emt_capture cap = {0};
    emt_run(g, &cfg, inputs, &cap, 1, 2, true);
    /* by hand: exp(12) = 162755 overflows when rounded, exp(100) = inf in fp32 from a
     * finite input, exp(-100) = 3.7e-44 underflows */
    ld_layer_counters want = {.present = true, .overflows = 2, .underflows = 1};
    expect_counters(emt_find(&cap, "exp_out"), &want);
    want = (ld_layer_counters){.present = true, .nans_created = 1}; /* sqrt(-1) */
    expect_counters(emt_find(&cap, "sqrt_out"), &want);
    want = (ld_layer_counters){.present = true}; /* a NaN input: its NaNs are not created */
    expect_counters(emt_find(&cap, "sqrt_nan_out"), &want);
    want = (ld_layer_counters){.present = true, .overflows = 1}; /* 120000; inf + inf is not */
    expect_counters(emt_find(&cap, "add_inf_out"), &want);
    want = (ld_layer_counters){.present = true, .overflows = 2, .nans_created = 1}; /* 1/0, 0/0 */
    expect_counters(emt_find(&cap, "div0_out"), &want);
    /* and the values, through the scalar emulation */
    for (int k = 0; k < 5; k++) {
        ref_layer r = ref_begin(LD_PRECISION_FP16, LD_PRECISION_FP16, false);
        float in[4], out[4], zr[4] = {0, 0, 0, 4};
        for (int i = 0; i < 4; i++)
            in[i] = ref_in(&r, vals[k][i]);
        for (int i = 0; i < 4; i++) {
            float y = k == 0 ? expf(in[i]) : k <= 2 ? sqrtf(in[i]) : k == 3 ? in[i] + in[i]
                                                                            : in[i] / zr[i];
            out[i] = ref_out(&r, y);
        }
        expect_values(emt_find(&cap, outs[k]), LD_DTYPE_FLOAT16, out, 4);
        expect_counters(emt_find(&cap, outs[k]), &r.c);
    }
    emt_capture_free(&cap);
    for (int i = 0; i < 5; i++)
        ld_tensor_destroy(inputs[i]);
    ld_graph_destroy(g);
}

/* x -> Mul "tiny" (one) -> y */
static ld_graph *scale_graph(int64_t n)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    ob_input(g, "x", FLOAT, 1, &n);
    float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    init_f32(g, "one", n, ones);
    ob_node(g, "Mul", "tiny", "x,one", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

static void check_scale(ld_graph *g, ld_engine_config *cfg, const float *x, int n,
                        ld_precision p, ld_dtype out_dtype, ld_layer_counters *seen)
{
    int64_t dim = n;
    ld_tensor *t = f32_tensor("x", 1, &dim, x);
    ref_layer r = ref_begin(p, p, cfg->flush_denormals);
    float in[8], out[8];
    for (int i = 0; i < n; i++)
        in[i] = ref_in(&r, x[i]);
    for (int i = 0; i < n; i++)
        ref_in(&r, 1.0f);
    for (int i = 0; i < n; i++)
        out[i] = ref_out(&r, in[i] * 1.0f);
    emt_capture cap = {0};
    emt_run(g, cfg, &t, &cap, 2, 2, true);
    const emt_event *e = emt_find(&cap, "y");
    assert_int_equal(e->precision, p);
    expect_values(e, out_dtype, out, n);
    expect_counters(e, &r.c);
    *seen = e->counters;
    emt_capture_free(&cap);
    ld_tensor_destroy(t);
}

static void test_subnormals_and_flush(void **state)
{
    (void)state;
    const float x[5] = {1e-5f, 3e-5f, 1e-3f, 6e-8f, 2e-8f};
    ld_graph *g = scale_graph(5);
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    ld_layer_counters c;
    check_scale(g, &cfg, x, 5, LD_PRECISION_FP16, LD_DTYPE_FLOAT32, &c);
    assert_int_equal(c.subnormals, 3); /* 1e-5, 3e-5, 2^-24 */
    assert_int_equal(c.underflows, 1); /* 2e-8 as an input */
    cfg.flush_denormals = true;
    check_scale(g, &cfg, x, 5, LD_PRECISION_FP16, LD_DTYPE_FLOAT32, &c);
    assert_int_equal(c.subnormals, 0);
    assert_int_equal(c.underflows, 4); /* the four subnormal-or-smaller inputs */
    ld_graph_destroy(g);

    /* bf16 keeps fp32's range: only fp32 subnormals are subnormal */
    const float xb[4] = {1e-40f, 1.0f + 0x1p-9f, 3.4e38f, -2.5f};
    g = scale_graph(4);
    ld_engine_config_init(&cfg);
    cfg.bf16 = true;
    check_scale(g, &cfg, xb, 4, LD_PRECISION_BF16, LD_DTYPE_FLOAT32, &c);
    assert_int_equal(c.subnormals, 1);
    assert_int_equal(c.overflows, 1); /* 3.4e38 rounds past bf16's largest */
    cfg.flush_denormals = true;
    check_scale(g, &cfg, xb, 4, LD_PRECISION_BF16, LD_DTYPE_FLOAT32, &c);
    assert_int_equal(c.underflows, 1);
    assert_int_equal(c.subnormals, 0);
    ld_graph_destroy(g);
}

/* --- bf16 ------------------------------------------------------------------------------ */

static void test_bf16_chain(void **state)
{
    (void)state;
    ld_graph *g = chain_graph();
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.bf16 = true;
    int64_t n = 8;
    ld_tensor *x = f32_tensor("x", 1, &n, X8);
    ref_layer rm = ref_begin(LD_PRECISION_BF16, LD_PRECISION_BF16, false);
    float xr[8], wr[8], mv[8];
    for (int i = 0; i < 8; i++)
        xr[i] = ref_in(&rm, X8[i]);
    for (int i = 0; i < 8; i++)
        wr[i] = ref_in(&rm, W8[i]);
    for (int i = 0; i < 8; i++)
        mv[i] = ref_out(&rm, xr[i] * wr[i]);
    emt_capture cap = {0};
    emt_run(g, &cfg, &x, &cap, 1, 2, true);
    expect_values(emt_find(&cap, "m"), LD_DTYPE_BFLOAT16, mv, 8);
    expect_counters(emt_find(&cap, "m"), &rm.c);
    assert_int_equal(emt_find(&cap, "a")->t->dtype, LD_DTYPE_BFLOAT16);
    assert_int_equal(emt_find(&cap, "y")->t->dtype, LD_DTYPE_FLOAT32);
    assert_int_equal(emt_find(&cap, "y")->precision, LD_PRECISION_BF16);
    emt_capture_free(&cap);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

/* --- fp32 islands ---------------------------------------------------------------------- */

/* x (f32) -> Cast "c16" (fp16) -> Add "a16" (self) -> Cast "c32" (fp32) -> Mul "m2" (K)
 * -> Cast "back16" (fp16) -> Relu "r" -> y (declared float16) */
static ld_graph *island_graph(void)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t n = 4;
    ob_input(g, "x", FLOAT, 1, &n);
    init_f32(g, "K", 4, (float[]){1.0f / 3.0f, 0.1f, 1e-3f, 7.0f});
    int_attr(ob_node(g, "Cast", "c16", "x", "h"), "to", FLOAT16);
    ob_node(g, "Add", "a16", "h,h", "hh");
    int_attr(ob_node(g, "Cast", "c32", "hh", "f"), "to", FLOAT);
    ob_node(g, "Mul", "m2", "f,K", "fk");
    int_attr(ob_node(g, "Cast", "back16", "fk", "h2"), "to", FLOAT16);
    ob_node(g, "Relu", "r", "h2", "y");
    ob_output(g, "y", FLOAT16);
    return ob_load_ok(m);
}

static void test_fp32_islands(void **state)
{
    (void)state;
    const float xv[4] = {1.1f, 2.2f, 3.3f, 4.4f}, K[4] = {1.0f / 3.0f, 0.1f, 1e-3f, 7.0f};
    int64_t n = 4;
    ld_graph *g = island_graph();
    ld_tensor *x = f32_tensor("x", 1, &n, xv);
    float hh[4], fk16[4], fk32[4];
    for (int i = 0; i < 4; i++) {
        float h = ld_round_to_precision(xv[i], LD_PRECISION_FP16, NULL);
        hh[i] = ld_round_to_precision(h + h, LD_PRECISION_FP16, NULL);
        fk16[i] = ld_round_to_precision(hh[i] * ld_round_to_precision(K[i], LD_PRECISION_FP16, NULL),
                                        LD_PRECISION_FP16, NULL);
        fk32[i] = hh[i] * K[i];
    }
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    emt_capture cap = {0};
    /* --fp16: the island computes in fp16 too; the Cast keeps its float32 type */
    emt_run(g, &cfg, &x, &cap, 1, 2, true);
    expect_values(emt_find(&cap, "f"), LD_DTYPE_FLOAT32, hh, 4);
    assert_int_equal(emt_find(&cap, "fk")->precision, LD_PRECISION_FP16);
    expect_values(emt_find(&cap, "fk"), LD_DTYPE_FLOAT16, fk16, 4);
    expect_values(emt_find(&cap, "y"), LD_DTYPE_FLOAT16, fk16, 4);
    emt_capture_free(&cap);
    /* --respect-declared-types: the island computes in fp32, K unrounded */
    cfg.respect_declared_types = true;
    emt_run(g, &cfg, &x, &cap, 1, 2, true);
    assert_int_equal(emt_find(&cap, "fk")->precision, LD_PRECISION_FP32);
    expect_values(emt_find(&cap, "fk"), LD_DTYPE_FLOAT32, fk32, 4);
    assert_int_equal(emt_find(&cap, "hh")->precision, LD_PRECISION_FP16);
    expect_values(emt_find(&cap, "hh"), LD_DTYPE_FLOAT16, hh, 4);
    float y[4];
    for (int i = 0; i < 4; i++)
        y[i] = ld_round_to_precision(fk32[i], LD_PRECISION_FP16, NULL);
    expect_values(emt_find(&cap, "y"), LD_DTYPE_FLOAT16, y, 4);
    emt_capture_free(&cap);
    /* no --fp16: fp16 tensors are computed in fp32 (the declared output stays fp16) */
    ld_engine_config_init(&cfg);
    emt_run(g, &cfg, &x, &cap, 1, 2, true);
    assert_int_equal(emt_find(&cap, "hh")->precision, LD_PRECISION_FP32);
    assert_int_equal(emt_find(&cap, "hh")->t->dtype, LD_DTYPE_FLOAT32);
    assert_int_equal(emt_find(&cap, "y")->t->dtype, LD_DTYPE_FLOAT16);
    emt_capture_free(&cap);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

/* --- TF32 ----------------------------------------------------------------------------- */

/* x [1,2] @ W [2,1] -> y [1,1]; x holds values TF32 rounds in telling ways. */
static ld_graph *matmul_graph(void)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t xd[2] = {1, 2}, wd[2] = {2, 1};
    ob_input(g, "x", FLOAT, 2, xd);
    Onnx__TensorProto *w = ob_tensor("W", FLOAT, 2, wd);
    ob_set_raw(w, (float[]){1.0f + 0x1p-11f + 0x1p-13f, 3.0f}, 2 * sizeof(float));
    OB_PUSH(g->initializer, g->n_initializer, w);
    ob_node(g, "MatMul", "mm", "x,W", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

static float matmul_result(ld_engine_config *cfg)
{
    ld_graph *g = matmul_graph();
    int64_t xd[2] = {1, 2};
    ld_tensor *x = f32_tensor("x", 2, xd, (float[]){1.0f, 1.0f + 0x1p-11f});
    emt_capture cap = {0};
    emt_run(g, cfg, &x, &cap, 1, 2, true);
    const emt_event *e = emt_find(&cap, "y");
    assert_int_equal(e->t->dtype, LD_DTYPE_FLOAT32);
    float y = ((const float *)e->t->data)[0];
    ld_precision p = e->precision;
    emt_capture_free(&cap);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
    return p == LD_PRECISION_TF32 ? y : -y; /* the sign tells the precision */
}

static void test_tf32(void **state)
{
    (void)state;
    /* W0 = 1 + 2^-11 + 2^-13 (above the tf32 tie), x1 = 1 + 2^-11 (exactly a tie), W1 = 3 */
    const float w0 = 1.0f + 0x1p-11f + 0x1p-13f, x1 = 1.0f + 0x1p-11f;
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    unsetenv("NVIDIA_TF32_OVERRIDE");
    /* rne: W0 -> 1 + 2^-10, x1 -> 1 (tie to even) */
    assert_true(matmul_result(&cfg) == (1.0f + 0x1p-10f) + 3.0f);
    cfg.tf32_rounding = LD_ROUND_NEAREST_AWAY; /* x1 -> 1 + 2^-10 */
    assert_true(matmul_result(&cfg) == (1.0f + 0x1p-10f) + 3.0f * (1.0f + 0x1p-10f));
    cfg.tf32_rounding = LD_ROUND_TOWARD_ZERO; /* both truncate to 1 */
    assert_true(matmul_result(&cfg) == 1.0f + 3.0f);
    cfg.tf32_rounding = LD_ROUND_NEAREST_EVEN;
    cfg.tf32 = false; /* --no-tf32: exact fp32 */
    assert_true(matmul_result(&cfg) == -(w0 + 3.0f * x1));
    cfg.tf32 = true;
    setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
    assert_true(matmul_result(&cfg) == -(w0 + 3.0f * x1));
    unsetenv("NVIDIA_TF32_OVERRIDE");
    /* fp16 beats TF32 */
    cfg.fp16 = true;
    float h = matmul_result(&cfg);
    assert_true(h == -ld_round_to_precision((1.0f + 0x1p-10f) + 3.0f, LD_PRECISION_FP16, NULL));
}

/* --- kernels that move data, untouched layers ----------------------------------------- */

/* x -> Relu "r" -> Concat "cat" (r, W) -> Identity "id" -> y; x -> Shape "shape" -> s */
static ld_graph *concat_graph(void)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t n = 2;
    ob_input(g, "x", FLOAT, 1, &n);
    init_f32(g, "W", 2, (float[]){0.1f, 70000.0f});
    ob_node(g, "Relu", "r", "x", "rx");
    int_attr(ob_node(g, "Concat", "cat", "rx,W", "c"), "axis", 0);
    ob_node(g, "Identity", "id", "c", "y");
    ob_node(g, "Shape", "shape", "x", "s");
    ob_output(g, "y", FLOAT);
    ob_output(g, "s", INT64);
    return ob_load_ok(m);
}

static void test_data_movement_and_untouched(void **state)
{
    (void)state;
    ld_graph *g = concat_graph();
    int64_t n = 2;
    ld_tensor *x = f32_tensor("x", 1, &n, (float[]){1.5f, -2.0f});
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    emt_capture cap = {0};
    emt_run(g, &cfg, &x, &cap, 2, 2, true);
    /* Concat sees one storage type: W converted to fp16 (70000 overflows) */
    const float c16[4] = {1.5f, 0.0f, ld_round_to_precision(0.1f, LD_PRECISION_FP16, NULL),
                          INFINITY};
    const emt_event *c = emt_find(&cap, "c");
    expect_values(c, LD_DTYPE_FLOAT16, c16, 4);
    assert_int_equal(c->precision, LD_PRECISION_FP16);
    ld_layer_counters want = {.present = true, .overflows = 1};
    expect_counters(c, &want);
    expect_values(emt_find(&cap, "y"), LD_DTYPE_FLOAT32, c16, 4);
    /* Shape is untouched, and counted as nothing */
    const emt_event *s = emt_find(&cap, "s");
    assert_int_equal(s->t->dtype, LD_DTYPE_INT64);
    assert_int_equal(s->precision, LD_PRECISION_FP32);
    want = (ld_layer_counters){.present = true};
    expect_counters(s, &want);
    emt_capture_free(&cap);

    /* Concat pinned to fp32: its inputs are widened (exact), W unrounded */
    ld_error err;
    cfg.constraints = LD_CONSTRAINTS_OBEY;
    assert_int_equal(ld_engine_add_rules(&cfg, "cat:fp32", false, &err), LD_OK);
    emt_run(g, &cfg, &x, &cap, 1, 2, true);
    const float c32[4] = {1.5f, 0.0f, 0.1f, 70000.0f};
    expect_values(emt_find(&cap, "c"), LD_DTYPE_FLOAT32, c32, 4);
    assert_int_equal(emt_find(&cap, "c")->precision, LD_PRECISION_FP32);
    /* Identity follows --fp16 again */
    const float y16[4] = {1.5f, 0.0f, c16[2], INFINITY};
    expect_values(emt_find(&cap, "y"), LD_DTYPE_FLOAT32, y16, 4);
    assert_int_equal(emt_find(&cap, "y")->counters.overflows, 1);
    emt_capture_free(&cap);
    ld_engine_config_clear(&cfg);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

/* --- the vtable ------------------------------------------------------------------------ */

static void test_backend_vtable(void **state)
{
    (void)state;
    const ld_backend_vtable *vt = ld_backend_find("emulated");
    assert_non_null(vt);
    assert_ptr_equal(vt, &ld_backend_emulated);
    assert_non_null(vt->node_precision);
    void *st = NULL;
    ld_error err;
    const char *opts[] = {"fp16=1"};
    ld_backend_config bc = {.n_options = 1, .options = opts};
    ob_expect_message(vt->create(&st, &bc, &err), LD_ERR_USAGE, &err, "backend 'emulated'",
                      "takes no options");
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = cfg.bf16 = true;
    bc = (ld_backend_config){.engine = &cfg};
    ob_expect_message(vt->create(&st, &bc, &err), LD_ERR_USAGE, &err, "--fp16 and --bf16", "");
    /* defaults without a config: fp32, TF32 for the MatMul */
    unsetenv("NVIDIA_TF32_OVERRIDE");
    ld_graph *g = matmul_graph();
    bc = (ld_backend_config){.threads = 1};
    assert_int_equal(vt->create(&st, &bc, &err), LD_OK);
    assert_null(ld_emulated_plan(st));
    ld_shape shape = {2, {1, 2}};
    assert_int_equal(vt->prepare(st, g, &shape, &err), LD_OK);
    assert_int_equal(vt->node_precision(st, 0), LD_PRECISION_TF32);
    assert_int_equal(ld_emulated_plan(st)->n_layers, 1);
    /* prepared twice: the plan is rebuilt, nothing leaks */
    assert_int_equal(vt->prepare(st, g, &shape, &err), LD_OK);
    vt->destroy(st);
    ld_graph_destroy(g);
}

/* --- the counted conversions on many values ---------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint32_t next_bits(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Random fp32 patterns weighted towards what the counters care about. */
static float interesting_float(void)
{
    uint32_t u = next_bits(), kind = next_bits() % 8;
    if (kind == 0)
        u &= 0x807FFFFFu;                      /* fp32 subnormals and zeros */
    else if (kind == 1)
        u = (u & 0x80FFFFFFu) | 0x33000000u;   /* around fp16's smallest subnormal */
    else if (kind == 2)
        u = (u & 0x807FFFFFu) | 0x47000000u;   /* around fp16's largest */
    else if (kind == 3)
        u |= 0x7F800000u;                      /* inf and NaN */
    else if (kind == 4)
        u &= 0x80000000u;                      /* +-0 */
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void scalar_tally(float x, float r, ld_precision p, ld_emu_tally *t)
{
    t->overflows += isfinite(x) && isinf(r);
    t->underflows += x != 0 && r == 0;
    t->subnormals += subnormal_in(r, p);
    t->src_infs += isinf(x) != 0;
    t->src_nans += isnan(x) != 0;
}

/* ld_emu_round_fp16_keep: the same values and tally, and the float16 bits of
 * the values (when the CPU runs it). */
static void check_rounding_kept(const float *src, const float *want, int64_t n, int threads,
                                const ld_emu_tally *expected)
{
    float *got = malloc((size_t)n * sizeof *got);
    ld_fp16 *half = malloc((size_t)n * sizeof *half), *half_want = malloc((size_t)n * sizeof *half);
    assert_true(got && half && half_want);
    memcpy(got, src, (size_t)n * sizeof *got);
    ld_emu_tally t = {0};
    if (ld_emu_round_fp16_keep(got, got, half, n, threads, &t)) {
        assert_memory_equal(got, want, (size_t)n * sizeof *got);
        emt_expect_tally(&t, expected);
        ld_convert_fp32_to_fp16(want, half_want, (size_t)n);
        assert_memory_equal(half, half_want, (size_t)n * sizeof *half);
    } else {
        printf("# ld_emu_round_fp16_keep: not on this CPU\n");
    }
    free(got);
    free(half);
    free(half_want);
}

static void check_rounding(const float *src, int64_t n, ld_precision p, ld_rounding mode,
                           bool flush)
{
    ld_round_options o = {mode, flush};
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    assert_true(want && got);
    memcpy(want, src, (size_t)n * sizeof *want);
    ld_round_array(want, (size_t)n, p, &o);
    ld_emu_tally expected = {0};
    for (int64_t i = 0; i < n; i++)
        scalar_tally(src[i], want[i], p == LD_PRECISION_FP16 ? p : LD_PRECISION_FP32, &expected);
    for (int threads = 1; threads <= 2; threads++) {
        ld_emu_tally t = {0};
        ld_emu_round_counted(src, got, n, p, &o, threads, &t); /* separate buffers */
        assert_memory_equal(got, want, (size_t)n * sizeof *got);
        emt_expect_tally(&t, &expected);
        memcpy(got, src, (size_t)n * sizeof *got);
        t = (ld_emu_tally){0};
        ld_emu_round_counted(got, got, n, p, &o, threads, &t); /* in place */
        assert_memory_equal(got, want, (size_t)n * sizeof *got);
        emt_expect_tally(&t, &expected);
        if (p == LD_PRECISION_FP16 && mode == LD_ROUND_NEAREST_EVEN && !flush)
            check_rounding_kept(src, want, n, threads, &expected);
    }
    free(want);
    free(got);
}

static void test_counted_rounding(void **state)
{
    (void)state;
    const int64_t n = 300007; /* several chunks, over threads, and a tail */
    float *src = malloc((size_t)n * sizeof *src);
    assert_non_null(src);
    for (int64_t i = 0; i < n; i++)
        src[i] = interesting_float();
    for (int flush = 0; flush <= 1; flush++) {
        check_rounding(src, n, LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, flush);
        check_rounding(src, n, LD_PRECISION_BF16, LD_ROUND_NEAREST_EVEN, flush);
        check_rounding(src, n, LD_PRECISION_FP32, LD_ROUND_NEAREST_EVEN, flush);
        for (int mode = 0; mode < 3; mode++)
            check_rounding(src, n, LD_PRECISION_TF32, (ld_rounding)mode, flush);
    }
    check_rounding(src, 15, LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, false); /* tail only */
    /* nothing to count, then a single special lane */
    for (int64_t i = 0; i < n; i++)
        src[i] = 1.0f + (float)(i % 1000);
    ld_emu_tally t = {0};
    ld_emu_round_counted(src, src, n, LD_PRECISION_FP16, NULL, 1, &t);
    assert_int_equal(t.overflows + t.underflows + t.subnormals + t.src_infs + t.src_nans, 0);
    src[70000] = 1e-6f;
    ld_emu_round_counted(src, src, n, LD_PRECISION_FP16, NULL, 2, &t);
    assert_int_equal(t.subnormals, 1);
    /* one special lane among ordinary ones: each kind alone must be counted
     * (the fused paths only look closer at blocks their filter flags) */
    const float lone[] = {70000.0f, -1e5f, INFINITY, -INFINITY, NAN, 1e-9f, -1e-8f, 1e-6f,
                          -3e-5f, 0.0f, -0.0f, 65504.0f, 6.1e-5f};
    for (size_t k = 0; k < sizeof lone / sizeof lone[0]; k++) {
        float block[37], want_block[37];
        for (int i = 0; i < 37; i++)
            block[i] = 1.5f;
        block[5 + (int)k % 16] = lone[k];
        memcpy(want_block, block, sizeof block);
        ld_round_array(want_block, 37, LD_PRECISION_FP16, NULL);
        ld_emu_tally want_t = {0}, got_t = {0};
        for (int i = 0; i < 37; i++)
            scalar_tally(block[i], want_block[i], LD_PRECISION_FP16, &want_t);
        float got_block[37];
        ld_emu_round_counted(block, got_block, 37, LD_PRECISION_FP16, NULL, 1, &got_t);
        emt_expect_tally(&got_t, &want_t);
        check_rounding_kept(block, want_block, 37, 1, &want_t);
    }
    ld_tensor *tensor = f32_tensor("s", 1, &n, src);
    bool nan, inf;
    ld_emu_scan_nonfinite(tensor, 2, &nan, &inf);
    assert_false(nan || inf);
    ((float *)tensor->data)[n - 1] = NAN;
    ld_emu_scan_nonfinite(tensor, 1, &nan, &inf);
    assert_true(nan && !inf);
    ld_tensor_destroy(tensor);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_fp16_chain_equals_emulation),
        T(test_counters),
        T(test_subnormals_and_flush),
        T(test_bf16_chain),
        T(test_fp32_islands),
        T(test_tf32),
        T(test_data_movement_and_untouched),
        T(test_backend_vtable),
        T(test_counted_rounding),
    };
    /* every counting level this CPU can run (an AVX-512 machine also runs
     * the AVX2 code) */
    return emt_run_every_level("test_emulated", tests, sizeof tests / sizeof tests[0]);
}
