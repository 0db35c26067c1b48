/* Unit tests for Conv's packed-weight cache through the executor
 * (backends/kernels/conv.c, weights_constant): one exec runs a one-Conv
 * model several times, with new inputs each run, its weights
 *   - an initializer, or the value of a Constant node (folded: each run
 *     shows the attribute's data): the cache is used, every run's output is
 *     the direct kernel's on that run's input, bit for bit;
 *   - a graph input whose values change between runs in the same buffer:
 *     never cached, every run computes with the new weights;
 * on 1 and 2 threads, windowed and pointwise. Under the emulated engine
 * (--fp16), whose rounded copy of constant weights is kept for the node
 * (ld_kernel_ctx.kept_inputs), the cache is used too: weights are packed in
 * the first run only, and every run's output is bit for bit that of a
 * fresh engine; weights fed as an input are rounded into a new copy each
 * run, never cached (packed per call, outside the cache). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_direct.h"
#include "layerdiff/backend.h"
#include "layerdiff/engine.h"
#include "onnx/onnx.pb-c.h"
#include "tests/support/onnx_builder.h"

#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

enum { W_INITIALIZER, W_CONSTANT, W_INPUT };

static void fill(float *v, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
}

static Onnx__ModelProto *conv_model(int mode, const float *w, const int64_t *xd,
                                    const int64_t *wd, int64_t pad)
{
    Onnx__ModelProto *m = ob_model();
    size_t wbytes = (size_t)(wd[0] * wd[1] * wd[2] * wd[3]) * sizeof(float);
    ob_input(m->graph, "x", FLOAT, 4, xd);
    if (mode == W_INITIALIZER) {
        Onnx__TensorProto *t = ob_tensor("w", FLOAT, 4, wd);
        ob_set_raw(t, w, wbytes);
        OB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
    } else if (mode == W_CONSTANT) {
        Onnx__NodeProto *c = ob_node(m->graph, "Constant", "k", "", "w");
        Onnx__AttributeProto *a =
            ob_attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
        a->t = ob_tensor("", FLOAT, 4, wd);
        ob_set_raw(a->t, w, wbytes);
    } else {
        ob_input(m->graph, "w", FLOAT, 4, wd);
    }
    Onnx__NodeProto *n = ob_node(m->graph, "Conv", "conv", "x,w", "y");
    Onnx__AttributeProto *p = ob_attr(n, "pads", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    p->ints = ob_mem(4 * sizeof(int64_t));
    for (int i = 0; i < 4; i++)
        p->ints[i] = pad;
    p->n_ints = 4;
    ob_output(m->graph, "y", FLOAT);
    return m;
}

typedef struct {
    float *y;
    size_t bytes;
} catch_y;

static ld_status catch_output(void *user, const ld_tensor_event *ev, ld_error *err)
{
    (void)err;
    catch_y *c = user;
    if (strcmp(ev->tensor->name, "y") == 0 && ev->tensor->nbytes == c->bytes)
        memcpy(c->y, ev->tensor->data, c->bytes);
    return LD_OK;
}

/* A k x k, stride-1, "same"-padded geometry over H x W. */
static void same_geometry(ld_window_geom *g, int64_t H, int64_t W, int64_t k)
{
    memset(g, 0, sizeof *g);
    g->nd = 2;
    g->in[0] = H, g->in[1] = W, g->k[0] = g->k[1] = k, g->s[0] = g->s[1] = 1;
    g->d[0] = g->d[1] = 1;
    g->pb[0] = g->pb[1] = g->pe[0] = g->pe[1] = k / 2;
    g->out[0] = H, g->out[1] = W;
    ld_window_geom_finish(g);
}

static void check_runs(int mode, int threads, int64_t C, int64_t M, int64_t H, int64_t W,
                       int64_t k)
{
    int64_t pad = k / 2, xd[4] = {1, C, H, W}, wd[4] = {M, C, k, k};
    ld_window_geom g;
    same_geometry(&g, H, W, k);
    if (!ld_conv_direct_preferred(&g, C, M)) {
        print_message("direct convolution not available here: skipped\n");
        return;
    }
    size_t nx = (size_t)(C * H * W), nw = (size_t)(M * C * k * k), ny = (size_t)(M * H * W);
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *want = malloc(ny * sizeof(float));
    float *scratch = malloc(ld_conv_direct_scratch_floats(&g, C, M, 1) * sizeof(float));
    assert_true(x && w && y && want && scratch);
    fill(w, nw, 7);
    ld_graph *graph = ob_load_ok(conv_model(mode, w, xd, wd, pad));
    const ld_backend_vtable *vt = ld_backend_find("reference");
    assert_non_null(vt);
    void *b = NULL;
    ld_error err;
    ld_backend_config cfg = {.threads = threads};
    assert_int_equal(vt->create(&b, &cfg, &err), LD_OK);
    ld_shape shapes[2] = {{.rank = 4}, {.rank = 4}};
    memcpy(shapes[0].dims, xd, sizeof xd);
    memcpy(shapes[1].dims, wd, sizeof wd);
    assert_int_equal(vt->prepare(b, graph, shapes, &err), LD_OK);
    ld_tensor *xt = NULL, *wt = NULL;
    assert_int_equal(ld_tensor_wrap(&xt, "x", LD_DTYPE_FLOAT32, &shapes[0], x, &err), LD_OK);
    assert_int_equal(ld_tensor_wrap(&wt, "w", LD_DTYPE_FLOAT32, &shapes[1], w, &err), LD_OK);
    const ld_tensor *ins[2] = {xt, wt};
    for (int run = 0; run < 4; run++) {
        fill(x, nx, 100 + (uint32_t)run);
        if (mode == W_INPUT && run > 0)
            fill(w, nw, 200 + (uint32_t)run); /* new weights, same buffer */
        /* initializer / Constant: the model's weights are the first w */
        ld_conv_direct_f32(x, w, NULL, want, C, M, &g, scratch, 1, NULL);
        memset(y, 0xff, ny * sizeof(float));
        catch_y c = {y, ny * sizeof(float)};
        assert_int_equal(vt->run(b, ins, catch_output, &c, &err), LD_OK);
        assert_memory_equal(y, want, ny * sizeof(float));
    }
    ld_tensor_destroy(xt);
    ld_tensor_destroy(wt);
    vt->destroy(b);
    ld_graph_destroy(graph);
    free(x), free(w), free(y), free(want), free(scratch);
}

static void test_weights_cache_runs(void **state)
{
    (void)state;
    for (int mode = W_INITIALIZER; mode <= W_INPUT; mode++)
        for (int threads = 1; threads <= 2; threads++) {
            check_runs(mode, threads, 24, 20, 19, 21, 3); /* windowed */
            check_runs(mode, threads, 40, 36, 20, 21, 1); /* pointwise */
        }
}

/* The emulated engine with --fp16 on `threads` threads, prepared for graph. */
static void *emulated_fp16(ld_graph *graph, const ld_shape *shapes, int threads)
{
    const ld_backend_vtable *vt = ld_backend_find("emulated");
    assert_non_null(vt);
    ld_engine_config ec;
    ld_engine_config_init(&ec);
    ec.fp16 = true;
    ld_backend_config cfg = {.threads = threads, .engine = &ec};
    void *b = NULL;
    ld_error err;
    assert_int_equal(vt->create(&b, &cfg, &err), LD_OK);
    ld_engine_config_clear(&ec);
    assert_int_equal(vt->prepare(b, graph, shapes, &err), LD_OK);
    return b;
}

static void check_emulated_runs(int mode, int threads, int64_t C, int64_t M, int64_t H,
                                int64_t W, int64_t k)
{
    int64_t pad = k / 2, xd[4] = {1, C, H, W}, wd[4] = {M, C, k, k};
    ld_window_geom g;
    same_geometry(&g, H, W, k);
    if (!ld_conv_direct_preferred(&g, C, M)) {
        print_message("direct convolution not available here: skipped\n");
        return;
    }
    size_t nx = (size_t)(C * H * W), nw = (size_t)(M * C * k * k), ny = (size_t)(M * H * W);
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
    float *y = malloc(ny * sizeof(float)), *want = malloc(ny * sizeof(float));
    assert_true(x && w && y && want);
    fill(w, nw, 7);
    ld_graph *graph = ob_load_ok(conv_model(mode, w, xd, wd, pad));
    const ld_backend_vtable *vt = ld_backend_find("emulated");
    ld_shape shapes[2] = {{.rank = 4}, {.rank = 4}};
    memcpy(shapes[0].dims, xd, sizeof xd);
    memcpy(shapes[1].dims, wd, sizeof wd);
    void *b = emulated_fp16(graph, shapes, threads);
    ld_error err;
    ld_tensor *xt = NULL, *wt = NULL;
    assert_int_equal(ld_tensor_wrap(&xt, "x", LD_DTYPE_FLOAT32, &shapes[0], x, &err), LD_OK);
    assert_int_equal(ld_tensor_wrap(&wt, "w", LD_DTYPE_FLOAT32, &shapes[1], w, &err), LD_OK);
    const ld_tensor *ins[2] = {xt, wt};
    for (int run = 0; run < 4; run++) {
        fill(x, nx, 100 + (uint32_t)run);
        if (mode == W_INPUT && run > 0)
            fill(w, nw, 200 + (uint32_t)run); /* new weights, same buffer */
        /* a fresh engine's run: rounds and packs what this run reads */
        void *fresh = emulated_fp16(graph, shapes, threads);
        catch_y c = {want, ny * sizeof(float)};
        memset(want, 0xff, ny * sizeof(float));
        assert_int_equal(vt->run(fresh, ins, catch_output, &c, &err), LD_OK);
        vt->destroy(fresh);
        memset(y, 0xff, ny * sizeof(float));
        c.y = y;
        int64_t packs = ld_conv_direct_cache_packs();
        assert_int_equal(vt->run(b, ins, catch_output, &c, &err), LD_OK);
        packs = ld_conv_direct_cache_packs() - packs;
        assert_memory_equal(y, want, ny * sizeof(float));
        if (mode == W_INPUT)
            assert_int_equal(packs, 0); /* a new rounded copy each run: no cache */
        else if (run == 0)
            assert_true(packs > 0);
        else
            assert_int_equal(packs, 0); /* the kept rounded weights' packing */
    }
    ld_tensor_destroy(xt);
    ld_tensor_destroy(wt);
    vt->destroy(b);
    ld_graph_destroy(graph);
    free(x), free(w), free(y), free(want);
}

static void test_weights_cache_emulated(void **state)
{
    (void)state;
    for (int mode = W_INITIALIZER; mode <= W_INPUT; mode++)
        for (int threads = 1; threads <= 2; threads++) {
            check_emulated_runs(mode, threads, 24, 20, 19, 21, 3); /* windowed */
            check_emulated_runs(mode, threads, 40, 36, 20, 21, 1); /* pointwise */
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_weights_cache_runs, ob_teardown),
        cmocka_unit_test_teardown(test_weights_cache_emulated, ob_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
