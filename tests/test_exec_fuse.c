/* Tests of elementwise chain fusion in ld_exec_run (backends/exec_fuse.c):
 * every graph runs twice, unfused and fused, and the graph outputs must be
 * the same bit for bit (NaN payloads, -0, infinities, subnormals in the
 * inputs), the observer must see the same values in the same order, with
 * data NULL exactly for the values the chain did not materialise. Graphs
 * cover every fusable op, per-channel and scalar constants (initializers and
 * folded Constant nodes), live inputs of the chain's shape and live
 * per-channel tensors, chains ended by a constant that does not broadcast
 * as a scalar or per channel, values that are graph outputs or read outside
 * the chain, sizes that are no multiple of the block, 1 and 2 threads; and
 * that fusion happens only when the config allows it and never stepwise.
 *
 * Graphs are ONNX models built with tests/support/onnx_builder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/exec.h"
#include "backends/exec_fuse_ops.h"
#include "backends/kernels/conv_pool.h"
#include "backends/kernels/activation_round.h"
#include "backends/kernels/elementwise_round.h"
#include "layerdiff/engine.h"
#include "tests/support/emulated_testing.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define ATTR_FLOAT ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT

/* --- capturing observer ------------------------------------------------------------ */

enum { MAX_EVENTS = 64, MAX_OUTPUTS = 8 };

typedef struct capture {
    int n;
    char names[MAX_EVENTS][64];
    bool null_data[MAX_EVENTS];
    ld_tensor *outputs[MAX_OUTPUTS]; /* graph outputs, cloned, in event order */
    int n_outputs;
} capture;

static ld_status capture_event(void *user, const ld_tensor_event *ev, ld_error *err)
{
    capture *c = user;
    assert_true(c->n < MAX_EVENTS);
    const ld_value *v = &ev->graph->values[ev->value];
    snprintf(c->names[c->n], sizeof c->names[c->n], "%s", v->name);
    assert_string_equal(ev->tensor->name, v->name);
    c->null_data[c->n] = ev->tensor->data == NULL && ev->tensor->count > 0;
    if (c->null_data[c->n]) /* never a graph input or output */
        assert_false(v->is_graph_output || !ev->node);
    c->n++;
    if (v->is_graph_output) {
        assert_true(c->n_outputs < MAX_OUTPUTS);
        return ld_tensor_clone(&c->outputs[c->n_outputs++], ev->tensor, NULL, err);
    }
    return LD_OK;
}

static void capture_free(capture *c)
{
    for (int i = 0; i < c->n_outputs; i++)
        ld_tensor_destroy(c->outputs[i]);
    memset(c, 0, sizeof *c);
}

/* --- helpers ------------------------------------------------------------------------ */

static ld_tensor *tensor(const char *name, int rank, const int64_t *dims)
{
    ld_shape shape;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, rank, dims, &err), LD_OK);
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    return t;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Values in [-8, 8] with NaNs of two payloads and signs, infinities, zeros
 * of both signs, subnormals, the Clip/HardSwish edges and huge values. */
static void fill_mode(ld_tensor *t, uint32_t seed, bool finite);

static void fill(ld_tensor *t, uint32_t seed)
{
    fill_mode(t, seed, false);
}

/* finite: no NaN or infinity in the input (they then come from the chain,
 * and the engine counts them as created). */
static void fill_mode(ld_tensor *t, uint32_t seed, bool finite)
{
    float *x = t->data;
    for (int64_t i = 0; i < t->count; i++) {
        seed = seed * 1664525u + 1013904223u;
        float r = (float)(seed >> 8) / (float)(1u << 24) * 16.0f - 8.0f;
        switch ((i + seed % 3) % 41) {
        case 0: x[i] = from_bits(0x7fc00001u); break;
        case 1: x[i] = from_bits(0xffc12345u); break;
        case 2: x[i] = INFINITY; break;
        case 3: x[i] = -INFINITY; break;
        case 4: x[i] = -0.0f; break;
        case 5: x[i] = 0.0f; break;
        case 6: x[i] = 1e-40f; break;
        case 7: x[i] = -3e-42f; break;
        case 8: x[i] = 3.0f; break;
        case 9: x[i] = -3.0f; break;
        case 10: x[i] = 6.0f; break;
        case 11: x[i] = 3e38f; break;
        case 12: x[i] = 3e-6f; break;     /* float16 subnormal */
        case 13: x[i] = 70000.0f; break;  /* beyond float16 */
        default: x[i] = r; break;
        }
        if (finite && !isfinite(x[i]))
            x[i] = i % 2 ? 3e38f : -2e38f;
    }
}

/* Mostly plain values for float16 (zero, or magnitude in [2^-14, 65520)):
 * most fused blocks are then all plain and take the chains' block-wise
 * rounding (exec_fuse_round.c); one element in ~2000 is of fill_mode's
 * awkward kinds, so some blocks fall back to the per-group loops. */
static void fill_sparse(ld_tensor *t, uint32_t seed)
{
    fill_mode(t, seed, false);
    float *x = t->data;
    for (int64_t i = 0; i < t->count; i++) {
        seed = seed * 1664525u + 1013904223u;
        if (seed % 2003 != 0 && (!isfinite(x[i]) || fabsf(x[i]) < 0.01f || fabsf(x[i]) > 60000))
            x[i] = (float)(seed >> 8) / (float)(1u << 24) * 7.0f + 0.5f;
    }
}

static void add_init(Onnx__GraphProto *g, const char *name, int rank, const int64_t *dims,
                     const float *values, size_t n)
{
    Onnx__TensorProto *t = ob_tensor(name, FLOAT, rank, dims);
    ob_set_raw(t, values, n * sizeof *values);
    OB_PUSH(g->initializer, g->n_initializer, t);
}

static void add_scalar(Onnx__GraphProto *g, const char *name, float value)
{
    add_init(g, name, 0, NULL, &value, 1);
}

/* A Constant node (folded by the executor) with a float tensor. */
static void add_constant(Onnx__GraphProto *g, const char *out, int rank, const int64_t *dims,
                         const float *values, size_t n)
{
    Onnx__NodeProto *c = ob_node(g, "Constant", out, "", out);
    Onnx__AttributeProto *a = ob_attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = ob_tensor("", FLOAT, rank, dims);
    ob_set_raw(a->t, values, n * sizeof *values);
}

static void attr_f(Onnx__NodeProto *n, const char *name, float v)
{
    ob_attr(n, name, ATTR_FLOAT)->f = v;
}

typedef struct result {
    capture cap;
    int fused;
    size_t peak;
    double chain_seconds;
} result;

/* One run of g on inputs with `threads`, fused or not. */
static void run(const ld_graph *g, ld_tensor *const *inputs, int threads, bool fuse, result *r)
{
    ld_exec *e = NULL;
    ld_error err;
    ld_exec_set_fusion(fuse ? 1 : 0);
    ld_exec_config cfg = {.threads = threads, .fuse = true};
    if (ld_exec_create(&e, g, &cfg, &err) != LD_OK)
        fail_msg("create failed: %s", err.message);
    for (int rep = 0; rep < 2; rep++) { /* the second run reuses pooled buffers */
        capture_free(&r->cap);
        if (ld_exec_run(e, (const ld_tensor *const *)inputs, capture_event, &r->cap, &err) !=
            LD_OK)
            fail_msg("run failed: %s", err.message);
    }
    r->fused = ld_exec_fused_nodes(e);
    r->peak = ld_exec_peak_bytes(e);
    if (fuse && r->fused)
        assert_non_null(ld_exec_fusion_note(e));
    ld_exec_destroy(e);
    ld_exec_set_fusion(-1);
}

/* Fused against unfused: same events, same graph outputs bit for bit;
 * returns the fused run (caller frees). `nulls`: the values expected with
 * data NULL, comma-separated. */
static result compare(const ld_graph *g, ld_tensor *const *inputs, int threads,
                      const char *nulls, int want_fused)
{
    result plain = {0}, fused = {0};
    run(g, inputs, threads, false, &plain);
    run(g, inputs, threads, true, &fused);
    assert_int_equal(plain.fused, 0);
    assert_int_equal(fused.fused, want_fused);
    assert_int_equal(plain.cap.n, fused.cap.n);
    for (int i = 0; i < plain.cap.n; i++) {
        assert_string_equal(plain.cap.names[i], fused.cap.names[i]);
        assert_false(plain.cap.null_data[i]);
        char key[70];
        snprintf(key, sizeof key, ",%s,", fused.cap.names[i]);
        char list[512];
        snprintf(list, sizeof list, ",%s,", nulls);
        if (fused.cap.null_data[i] != (strstr(list, key) != NULL))
            fail_msg("value '%s': data %s, expected %s", fused.cap.names[i],
                     fused.cap.null_data[i] ? "NULL" : "present",
                     strstr(list, key) ? "NULL" : "present");
    }
    assert_int_equal(plain.cap.n_outputs, fused.cap.n_outputs);
    for (int k = 0; k < plain.cap.n_outputs; k++) {
        const ld_tensor *a = plain.cap.outputs[k], *b = fused.cap.outputs[k];
        assert_true(ld_shape_equal(&a->shape, &b->shape));
        const uint32_t *x = a->data, *y = b->data;
        for (int64_t i = 0; i < a->count; i++)
            if (x[i] != y[i])
                fail_msg("output '%s' element %lld: unfused 0x%08x, fused 0x%08x", a->name,
                         (long long)i, x[i], y[i]);
    }
    capture_free(&plain.cap);
    return fused;
}

/* --- the det-like chain -------------------------------------------------------------- */

/* x [N,C,H,W] -> Mul(per-channel [C,1,1]) -> Add(per-channel [1,C,1,1], a
 * folded Constant) -> Add(3) -> Clip(0, 6) -> Mul(a1, clip) -> Div(6)
 * -> Sub(x) -> LeakyRelu -> HardSigmoid -> HardSwish -> Sigmoid -> Relu -> y,
 * with a1 also read by a Transpose outside the chain (materialised) and d
 * a graph output. */
static const ld_graph *det_like(int64_t n, int64_t c, int64_t h, int64_t w)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t dims[4] = {n, c, h, w}, cdims3[3] = {c, 1, 1}, cdims4[4] = {1, c, 1, 1};
    float scale[64], bias[64];
    assert_true(c <= 64);
    for (int k = 0; k < c; k++) {
        scale[k] = 0.5f + 0.37f * (float)k;
        bias[k] = -1.25f + 0.61f * (float)k;
    }
    scale[c - 1] = -0.0f;
    ob_input(g, "x", FLOAT, 4, dims);
    add_init(g, "scale", 3, cdims3, scale, (size_t)c);
    add_scalar(g, "three", 3.0f);
    add_scalar(g, "zero", 0.0f);
    add_scalar(g, "six", 6.0f);
    ob_node(g, "Mul", "m1", "x,scale", "m1");
    add_constant(g, "bias", 4, cdims4, bias, (size_t)c);
    ob_node(g, "Add", "a1", "m1,bias", "a1");
    ob_node(g, "Add", "a2", "a1,three", "a2");
    ob_node(g, "Clip", "cl", "a2,zero,six", "cl");
    ob_node(g, "Mul", "m2", "a1,cl", "m2");
    ob_node(g, "Div", "d", "m2,six", "d");
    ob_node(g, "Sub", "s", "d,x", "s");
    attr_f(ob_node(g, "LeakyRelu", "lr", "s", "lr"), "alpha", 0.3f);
    Onnx__NodeProto *hsg = ob_node(g, "HardSigmoid", "hsg", "lr", "hsg");
    attr_f(hsg, "alpha", 0.25f);
    attr_f(hsg, "beta", 0.4f);
    ob_node(g, "Sub", "sh", "hsg,lr", "sh");
    ob_node(g, "HardSwish", "hsw", "sh", "hsw");
    ob_node(g, "Sigmoid", "sg", "hsw", "sg");
    ob_node(g, "Sub", "s2", "sg,hsw", "s2");
    ob_node(g, "Relu", "y", "s2", "y");
    ob_node(g, "Transpose", "t", "a1", "t");
    ob_output(g, "y", FLOAT);
    ob_output(g, "d", FLOAT);
    ob_output(g, "t", FLOAT);
    return ob_load_ok(m);
}

static void det_like_case(int64_t n, int64_t c, int64_t h, int64_t w, int threads)
{
    const ld_graph *g = det_like(n, c, h, w);
    int64_t dims[4] = {n, c, h, w};
    ld_tensor *x = tensor("x", 4, dims);
    fill(x, 7);
    /* 14 nodes fuse; a1 (read by the Transpose) and d (an output) are kept */
    result r = compare(g, &x, threads, "m1,a2,cl,m2,s,lr,hsg,sh,hsw,sg,s2", 14);
    capture_free(&r.cap);
    ld_tensor_destroy(x);
    ld_graph_destroy((ld_graph *)g);
}

static void test_det_like_one_thread(void **state)
{
    (void)state;
    det_like_case(1, 3, 37, 41, 1);      /* planes of 1517: no multiple of the block */
    det_like_case(2, 5, 61, 67, 1);
}

static void test_det_like_two_threads(void **state)
{
    (void)state;
    det_like_case(2, 4, 97, 91, 2);      /* 70616 elements: parallel */
    det_like_case(1, 16, 64, 64, 2);     /* planes a multiple of the block */
}

/* A chain's blocks run on the convolutions' claim pool (exec_fuse.c,
 * compute): with 2 threads its helper takes some of them. A busy machine
 * may keep the helper off the CPU for one run, not for fifty. */
static void test_chain_blocks_share_the_claim_pool(void **state)
{
    (void)state;
    int64_t before = ld_conv_pool_shared_jobs();
    for (int i = 0; i < 50 && ld_conv_pool_shared_jobs() == before; i++)
        det_like_case(1, 16, 128, 128, 2);
    assert_true(ld_conv_pool_shared_jobs() > before);
}

/* --- chains ended and broken ---------------------------------------------------------- */

/* Mul by a constant of shape [1,1,1,W] (neither a scalar nor per channel)
 * is not fused; the chain before it ends there (its value materialised),
 * and a new one starts after it. */
static void test_non_broadcastable_constant_ends_chain(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t dims[4] = {1, 3, 20, 30}, wdims[4] = {1, 1, 1, 30};
    float row[30];
    for (int k = 0; k < 30; k++)
        row[k] = 0.1f * (float)k - 1.0f;
    ob_input(g, "x", FLOAT, 4, dims);
    add_init(g, "row", 4, wdims, row, 30);
    add_scalar(g, "two", 2.0f);
    ob_node(g, "Add", "a", "x,two", "a");
    ob_node(g, "Relu", "r", "a", "r");
    ob_node(g, "Mul", "mr", "r,row", "mr");   /* not fusable */
    ob_node(g, "Mul", "b", "mr,two", "b");
    ob_node(g, "Sub", "y", "b,x", "y");
    ob_output(g, "y", FLOAT);
    const ld_graph *graph = ob_load_ok(m);
    ld_tensor *x = tensor("x", 4, dims);
    fill(x, 3);
    result r = compare(graph, &x, 1, "a,b", 4);
    capture_free(&r.cap);
    ld_tensor_destroy(x);
    ld_graph_destroy((ld_graph *)graph);
}

/* Residual and SE-style inputs: Add of two live tensors of the chain's
 * shape, Mul by a live per-channel tensor (GlobalAveragePool's output
 * through a HardSigmoid, which is too small to start a chain), both
 * read block by block; x is a graph input and never written over.
 * copy_x: x is also copied to a second graph output. */
static const int64_t live_dims[4] = {1, 8, 33, 35};

static const ld_graph *live_inputs_graph(bool copy_x)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    ob_input(g, "x", FLOAT, 4, live_dims);
    ob_input(g, "z", FLOAT, 4, live_dims);
    add_scalar(g, "half", 0.5f);
    ob_node(g, "GlobalAveragePool", "gap", "x", "gap");
    ob_node(g, "HardSigmoid", "hs", "gap", "hs");
    ob_node(g, "Relu", "rz", "z", "rz");              /* a live value that dies in the chain */
    ob_node(g, "Mul", "se", "x,hs", "se");
    ob_node(g, "Add", "res", "se,rz", "res");
    ob_node(g, "Mul", "mh", "half,res", "mh");        /* scalar first */
    ob_node(g, "Div", "dv", "x,mh", "dv");            /* live input first */
    ob_node(g, "Add", "y", "dv,rz", "y");
    ob_output(g, "y", FLOAT);
    if (copy_x) {
        ob_output(g, "x_copy", FLOAT);
        ob_node(g, "Identity", "idx", "x", "x_copy");
    }
    return ob_load_ok(m);
}

static void test_live_inputs(void **state)
{
    (void)state;
    const ld_graph *graph = live_inputs_graph(true);
    const int64_t *dims = live_dims;
    ld_tensor *in[2] = {tensor("x", 4, dims), tensor("z", 4, dims)};
    fill(in[0], 11);
    fill(in[1], 12);
    /* rz, se..y: the Relu on z is fused into nothing (its chain is one node
       long: se does not read it), so se starts the chain of 5 */
    result r = compare(graph, in, 1, "se,res,mh,dv", 5);
    capture_free(&r.cap);
    r = compare(graph, in, 2, "se,res,mh,dv", 5);
    capture_free(&r.cap);
    ld_tensor_destroy(in[0]);
    ld_tensor_destroy(in[1]);
    ld_graph_destroy((ld_graph *)graph);
}

/* Clip-6 (opset 10): bounds from attributes, one of them defaulted. */
static void test_clip_attributes(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    m->opset_import[0]->version = 10;
    Onnx__GraphProto *g = m->graph;
    int64_t dims[2] = {129, 77};
    ob_input(g, "x", FLOAT, 2, dims);
    add_scalar(g, "k", 1.5f);
    ob_node(g, "Mul", "a", "x,k", "a");
    attr_f(ob_node(g, "Clip", "c1", "a", "c1"), "min", -2.0f);
    Onnx__NodeProto *c2 = ob_node(g, "Clip", "c2", "c1", "c2");
    attr_f(c2, "min", 1.0f); /* min > max: max everywhere, as the kernel */
    attr_f(c2, "max", 0.5f);
    ob_node(g, "Add", "y", "c1,c2", "y");
    ob_output(g, "y", FLOAT);
    const ld_graph *graph = ob_load_ok(m);
    ld_tensor *x = tensor("x", 2, dims);
    fill(x, 5);
    result r = compare(graph, &x, 1, "a,c1,c2", 4);
    capture_free(&r.cap);
    ld_tensor_destroy(x);
    ld_graph_destroy((ld_graph *)graph);
}

/* --- when fusion is allowed ------------------------------------------------------------ */

static const ld_graph *simple_chain(int64_t len)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t dims[2] = {4, len};
    ob_input(g, "x", FLOAT, 2, dims);
    add_scalar(g, "k", 1.25f);
    ob_node(g, "Mul", "a", "x,k", "a");
    ob_node(g, "Add", "b", "a,k", "b");
    ob_node(g, "Mul", "c", "a,b", "c"); /* a is read twice: unfused, not in place */
    ob_node(g, "Relu", "y", "c", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

/* The config's flag and ld_exec_set_fusion must both allow it; stepwise
 * runs never fuse. Fused intermediates take no pool memory. */
static void test_fusion_only_when_allowed(void **state)
{
    (void)state;
    const ld_graph *g = simple_chain(100000);
    int64_t dims[2] = {4, 100000};
    ld_tensor *x = tensor("x", 2, dims);
    fill(x, 9);
    ld_error err;
    capture cap = {0};
    for (int mode = 0; mode < 3; mode++) {
        ld_exec *e = NULL;
        ld_exec_set_fusion(mode == 2 ? 0 : 1);
        ld_exec_config cfg = {.threads = 1, .fuse = mode == 1};
        assert_int_equal(ld_exec_create(&e, g, &cfg, &err), LD_OK);
        ld_exec_set_fusion(-1);
        assert_int_equal(ld_exec_run(e, (const ld_tensor *const *)&x, capture_event, &cap, &err),
                         LD_OK);
        assert_int_equal(ld_exec_fused_nodes(e), mode == 1 ? 4 : 0);
        for (int i = 0; i < cap.n; i++)
            assert_int_equal(cap.null_data[i], mode == 1 && i >= 1 && i <= 3);
        /* unfused: two 1.6 MB tensors live at once; fused: only y */
        size_t one = (size_t)x->nbytes;
        if (mode == 1)
            assert_int_equal(ld_exec_peak_bytes(e), one);
        else
            assert_true(ld_exec_peak_bytes(e) >= 2 * one);
        capture_free(&cap);
        if (mode == 1) { /* stepwise, same executor: every event has data */
            assert_int_equal(ld_exec_begin(e, (const ld_tensor *const *)&x, capture_event, &cap,
                                           &err), LD_OK);
            for (int i = 0; i < g->n_nodes; i++) {
                assert_int_equal(ld_exec_step(e, i, capture_event, &cap, &err), LD_OK);
                ld_exec_finish_step(e, i);
            }
            ld_exec_end(e);
            assert_int_equal(cap.n, 5);
            for (int i = 0; i < cap.n; i++)
                assert_false(cap.null_data[i]);
            capture_free(&cap);
        }
        ld_exec_destroy(e);
    }
    ld_tensor_destroy(x);
    ld_graph_destroy((ld_graph *)g);
}

/* The profile splits a chain's time evenly over its nodes. */
static void test_profile_split(void **state)
{
    (void)state;
    const ld_graph *g = simple_chain(50000);
    int64_t dims[2] = {4, 50000};
    ld_tensor *x = tensor("x", 2, dims);
    fill(x, 1);
    ld_error err;
    ld_exec *e = NULL;
    ld_exec_set_fusion(1);
    ld_exec_config cfg = {.threads = 1, .fuse = true};
    assert_int_equal(ld_exec_create(&e, g, &cfg, &err), LD_OK);
    ld_exec_set_fusion(-1);
    assert_int_equal(ld_exec_run(e, (const ld_tensor *const *)&x, NULL, NULL, &err), LD_OK);
    const ld_node_profile *p = ld_exec_profile(e);
    assert_true(p[0].seconds > 0);
    for (int i = 1; i < 4; i++)
        assert_true(p[i].seconds == p[0].seconds);
    const char *note = ld_exec_fusion_note(e);
    assert_non_null(note);
    assert_non_null(strstr(note, "4 elementwise nodes fused into 1 chains"));
    ld_exec_destroy(e);
    ld_tensor_destroy(x);
    ld_graph_destroy((ld_graph *)g);
}

/* --- the emulated engine --------------------------------------------------------------- */

typedef struct emu_capture {
    capture cap;
    ld_dtype dtype[MAX_EVENTS];
    ld_precision precision[MAX_EVENTS];
    ld_layer_counters counters[MAX_EVENTS];
} emu_capture;

static ld_status emu_event(void *user, const ld_tensor_event *ev, ld_error *err)
{
    emu_capture *c = user;
    int i = c->cap.n;
    assert_true(i < MAX_EVENTS);
    c->dtype[i] = ev->tensor->dtype;
    c->precision[i] = ev->precision;
    c->counters[i] = ev->counters;
    return capture_event(&c->cap, ev, err);
}

/* Runs g twice on the emulated engine (cfg), fused or not; the last run's
 * events in *c. Returns whether the profile says it fused. */
static bool emu_run(const ld_graph *g, const ld_engine_config *cfg, ld_tensor *const *inputs,
                    int threads, bool fuse, emu_capture *c)
{
    const ld_backend_vtable *vt = ld_backend_find("emulated");
    assert_non_null(vt);
    ld_backend_config bc = {.threads = threads, .engine = cfg, .observe_outputs_only = fuse};
    void *state = NULL;
    ld_error err;
    ld_exec_set_fusion(1); /* the config's flag decides */
    assert_int_equal(vt->create(&state, &bc, &err), LD_OK);
    ld_shape shapes[4];
    for (int k = 0; k < g->n_inputs; k++)
        shapes[k] = inputs[k]->shape;
    if (vt->prepare(state, g, shapes, &err) != LD_OK)
        fail_msg("prepare: %s", err.message);
    ld_exec_set_fusion(-1);
    for (int rep = 0; rep < 2; rep++) { /* the second with the constants cached */
        capture_free(&c->cap);
        if (vt->run(state, (const ld_tensor *const *)inputs, emu_event, c, &err) != LD_OK)
            fail_msg("run: %s", err.message);
    }
    ld_backend_profile prof;
    assert_int_equal(vt->profile(state, &prof, &err), LD_OK);
    bool fused = prof.description && strstr(prof.description, "fused") != NULL;
    vt->destroy(state);
    return fused;
}

static void emu_compare_level(const ld_graph *g, const ld_engine_config *cfg,
                              ld_tensor *const *inputs, int threads, bool want_fused);

/* Values, types, precisions and every counter the same fused and unfused,
 * at each level of the in-loop float16 rounding (elementwise_round.h, activation_round.h) the
 * CPU has (the portable one hands every block to round_block), with and without the
 * chains' block-wise plain rounding (exec_fuse_ops.h, ld_fuse_round_plain). */
static void emu_compare(const ld_graph *g, const ld_engine_config *cfg, ld_tensor *const *inputs,
                        int threads, bool want_fused)
{
    for (int level = LD_EW_ROUND_NONE; level <= LD_EW_ROUND_AVX2; level++) {
        if (!ld_ew_round_force_level(level))
            continue;
        /* Clip/Relu's level (activation_round.h) both ways under each, and
           the chains' block-wise plain rounding (exec_fuse_round.c) off and on */
        for (int act = LD_ACT_ROUND_NONE; act <= LD_ACT_ROUND_AVX2; act++) {
            if (!ld_act_round_force_level(act))
                continue;
            for (int plain = 0; plain <= 1; plain++) {
                ld_fuse_round_plain_force(plain);
                emu_compare_level(g, cfg, inputs, threads, want_fused);
            }
        }
    }
    ld_ew_round_force_level(-1);
    ld_act_round_force_level(-1);
    ld_fuse_round_plain_force(-1);
}

static void emu_compare_level(const ld_graph *g, const ld_engine_config *cfg,
                              ld_tensor *const *inputs, int threads, bool want_fused)
{
    emu_capture plain = {0}, fused = {0};
    assert_false(emu_run(g, cfg, inputs, threads, false, &plain));
    assert_int_equal(emu_run(g, cfg, inputs, threads, true, &fused), want_fused);
    assert_int_equal(plain.cap.n, fused.cap.n);
    int nulls = 0;
    for (int i = 0; i < plain.cap.n; i++) {
        const char *name = plain.cap.names[i];
        assert_string_equal(name, fused.cap.names[i]);
        assert_false(plain.cap.null_data[i]);
        nulls += fused.cap.null_data[i];
        if (plain.dtype[i] != fused.dtype[i] || plain.precision[i] != fused.precision[i])
            fail_msg("'%s': dtype/precision differ", name);
        const ld_layer_counters *a = &plain.counters[i], *b = &fused.counters[i];
        if (a->present != b->present || a->overflows != b->overflows ||
            a->nans_created != b->nans_created || a->underflows != b->underflows ||
            a->subnormals != b->subnormals || a->partial_overflows != b->partial_overflows)
            fail_msg("'%s': counters differ: overflows %lld/%lld nans %lld/%lld underflows "
                     "%lld/%lld subnormals %lld/%lld", name, (long long)a->overflows,
                     (long long)b->overflows, (long long)a->nans_created,
                     (long long)b->nans_created, (long long)a->underflows,
                     (long long)b->underflows, (long long)a->subnormals,
                     (long long)b->subnormals);
    }
    /* fused values, and (fused or not) float16 views nobody reads */
    assert_true(nulls > 0);
    assert_int_equal(plain.cap.n_outputs, fused.cap.n_outputs);
    for (int k = 0; k < plain.cap.n_outputs; k++) {
        const ld_tensor *x = plain.cap.outputs[k], *y = fused.cap.outputs[k];
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->nbytes, y->nbytes);
        if (memcmp(x->data, y->data, x->nbytes) != 0)
            fail_msg("output '%s' differs", x->name);
    }
    capture_free(&plain.cap);
    capture_free(&fused.cap);
}

static void emu_case(bool fp16, bool bf16, bool flush, int threads)
{
    int64_t n = threads > 1 ? 2 : 1, c = 4, h = 97, w = 91;
    const ld_graph *g = det_like(n, c, h, w);
    int64_t dims[4] = {n, c, h, w};
    ld_tensor *x = tensor("x", 4, dims);
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = fp16;
    cfg.bf16 = bf16;
    cfg.flush_denormals = flush;
    /* flushing rounds every input again: chains never form */
    for (int finite = 0; finite < 2; finite++) {
        fill_mode(x, 21, finite);
        emu_compare(g, &cfg, &x, threads, !flush);
    }
    fill_sparse(x, 22);
    emu_compare(g, &cfg, &x, threads, !flush);
    ld_engine_config_clear(&cfg);
    ld_tensor_destroy(x);
    ld_graph_destroy((ld_graph *)g);
}

static void test_emulated_fp16(void **state)
{
    (void)state;
    emu_case(true, false, false, 1);
    emu_case(true, false, false, 2);
}

static void test_emulated_bf16(void **state)
{
    (void)state;
    emu_case(false, true, false, 1);
    emu_case(false, true, false, 2);
}

static void test_emulated_flush(void **state)
{
    (void)state;
    emu_case(true, false, true, 1);
}

/* The live-input graph in fp16: residual, SE-style per-channel tensor. */
static void test_emulated_live_inputs(void **state)
{
    (void)state;
    const ld_graph *graph = live_inputs_graph(false);
    const int64_t *dims = live_dims;
    ld_tensor *in[2] = {tensor("x", 4, dims), tensor("z", 4, dims)};
    fill(in[0], 31);
    fill(in[1], 32);
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    emu_compare(graph, &cfg, in, 1, true);
    ld_engine_config_clear(&cfg);
    ld_tensor_destroy(in[0]);
    ld_tensor_destroy(in[1]);
    ld_graph_destroy((ld_graph *)graph);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_det_like_one_thread),
        T(test_det_like_two_threads),
        T(test_chain_blocks_share_the_claim_pool),
        T(test_non_broadcastable_constant_ends_chain),
        T(test_live_inputs),
        T(test_clip_attributes),
        T(test_fusion_only_when_allowed),
        T(test_profile_split),
    };
    const struct CMUnitTest emulated[] = {
        T(test_emulated_fp16),
        T(test_emulated_bf16),
        T(test_emulated_flush),
        T(test_emulated_live_inputs),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    /* every counting level of the emulated engine this CPU has */
    return failed + emt_run_every_level("emulated chains", emulated,
                                        sizeof emulated / sizeof emulated[0]);
}
