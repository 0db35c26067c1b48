/* Tests of the executor's memory plan (backends/exec_plan.c): on the
 * fixtures and on generated graphs, the planned buffer of every value, the
 * planned peaks and the dry arena's top equal what real runs allocate
 * (ld_exec_run with in-place donation, and the stepwise run without); the
 * pass gives up on a Reshape to a computed shape, on deferred outputs and
 * on an infer that would read a placeholder's values; the kernel helpers
 * refuse tensors without data; prepare faults in the planned top and no
 * more, and fails early, naming the limit, when --max-memory cannot hold
 * the planned run; with the emulated engine's hooks the prefault stays
 * within what its run touches.
 *
 * Under AddressSanitizer the library's pool hands every request to malloc;
 * like tests/test_pool.c this test compiles its own pool.c with the arena
 * on (its definitions take the place of the archive's), so that the real
 * arena's top can be compared with the dry one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LD_POOL_NO_BYPASS 1
#include "backends/pool.c"

#include "backends/emulated_internal.h"
#include "backends/exec_internal.h"
#include "backends/exec_plan.h"
#include "backends/kernels/conv_direct.h"
#include "backends/kernels/shape_util.h"
#include "layerdiff/backend.h"
#include "layerdiff/engine.h"
#include "layerdiff/inputs.h"
#include "layerdiff/memory.h"
#include "layerdiff/onnx.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define FLOAT16 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16
#define INT64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static void int_attr(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = ob_attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static ld_exec *create_fusing(const ld_graph *g, int threads, bool fuse)
{
    ld_exec *e = NULL;
    ld_error err;
    ld_exec_config cfg = {.threads = threads, .fuse = fuse};
    if (ld_exec_create(&e, g, &cfg, &err) != LD_OK)
        fail_msg("create failed: %s", err.message);
    return e;
}

static ld_exec *create_ok(const ld_graph *g, int threads)
{
    return create_fusing(g, threads, false);
}

/* Nodes the fused runs of check_plan_matches computed in chains. */
static int fused_nodes_seen;

/* Bytes of the buffer each value's tensor held in a run (0: not seen, or
 * not the executor's: inputs, folded Constants). */
typedef struct seen {
    const ld_exec *e;
    size_t *bytes;
} seen;

static ld_status see(void *user, const ld_tensor_event *ev, ld_error *err)
{
    (void)err;
    seen *s = user;
    if (ev->node && !s->e->nodes[ev->node->index].folded && ev->tensor->data)
        s->bytes[ev->value] = ev->tensor->nbytes;
    return LD_OK;
}

/* Plans g at the input set's shapes, then runs it three ways on fresh
 * executors (ld_exec_run, stepwise, ld_exec_run fusing elementwise chains)
 * and compares sizes, peaks and tops. */
static void check_plan_matches(const ld_graph *g, const ld_input_set *in)
{
    ld_error err;
    char why[256] = "";
    for (int mode = 0; mode < 3; mode++) {
        bool stepwise = mode == 1, fused = mode == 2;
        ld_exec_set_fusion(fused ? 1 : 0);
        ld_exec *e = create_fusing(g, 2, fused);
        ld_exec_set_fusion(-1);
        ld_exec_plan plan;
        if (!ld_exec_plan_build(e, in->shapes, &plan, why, sizeof why))
            fail_msg("no plan: %s", why);
        assert_true(plan.exact);
        seen s = {e, calloc((size_t)g->n_values + 1, sizeof(size_t))};
        const ld_tensor *const *inputs = (const ld_tensor *const *)in->tensors;
        if (!stepwise) {
            if (ld_exec_run(e, inputs, see, &s, &err) != LD_OK)
                fail_msg("run failed: %s", err.message);
        } else {
            assert_int_equal(ld_exec_begin(e, inputs, see, &s, &err), LD_OK);
            for (int i = 0; i < g->n_nodes; i++) {
                assert_int_equal(ld_exec_step(e, i, see, &s, &err), LD_OK);
                ld_exec_finish_step(e, i);
            }
            ld_exec_end(e);
        }
        /* (a fused run stores only some values; those it stores match) */
        for (int v = 0; v < g->n_values; v++)
            if (s.bytes[v] != plan.value_bytes[v] && (!fused || s.bytes[v]))
                fail_msg("value '%s': planned %zu bytes, the run allocated %zu",
                         g->values[v].name, plan.value_bytes[v], s.bytes[v]);
        if (fused)
            fused_nodes_seen += ld_exec_fused_nodes(e);
        assert_int_equal(ld_exec_peak_bytes(e), stepwise ? plan.peak_live : plan.peak_checked_run);
        assert_true(plan.peak_checked_run <= plan.peak_live);
        assert_int_equal(ld_pool_top(e->pool), stepwise ? plan.top_stepwise : plan.top_run);
        assert_true(ld_pool_top(e->pool) > 0 || plan.peak_live == 0);
        free(s.bytes);
        ld_exec_plan_clear(&plan);
        ld_exec_destroy(e);
    }
}

static void make_inputs(const ld_graph *g, const char *shapes, ld_input_set *in)
{
    ld_error err;
    ld_inputs_options io = {.shapes = shapes, .seed = 3};
    if (ld_inputs_make(in, g, &io, &err) != LD_OK)
        fail_msg("inputs: %s", err.message);
}

/* The real model the plan is also checked on: $LD_TEST_PLAN_MODEL at
 * $LD_TEST_PLAN_SHAPES when set, else PaddleOCR det at 640x640 when
 * scripts/fetch-models.sh has put it in models/ (NULL: none). */
static const char *real_model(const char **shapes)
{
    const char *model = getenv("LD_TEST_PLAN_MODEL");
    *shapes = getenv("LD_TEST_PLAN_SHAPES");
    if (!model && access("models/ppocr_det.onnx", R_OK) == 0) {
        model = "models/ppocr_det.onnx";
        *shapes = "x:1x3x640x640";
    }
    return model;
}

/* Every fixture, and the real model (PaddleOCR det: its fused chains). */
static void test_fixtures(void **state)
{
    (void)state;
    const char *models[] = {"fixtures/accumulate.onnx", "fixtures/cnn.onnx", "fixtures/deep.onnx",
                            "fixtures/overflow.onnx", "fixtures/transformer.onnx", NULL};
    const char *real_shapes;
    models[5] = real_model(&real_shapes);
    for (size_t k = 0; k < sizeof models / sizeof *models && models[k]; k++) {
        ld_graph *g = NULL;
        ld_error err;
        if (ld_onnx_load_file(&g, models[k], &err) != LD_OK)
            fail_msg("%s: %s", models[k], err.message);
        ld_input_set in = {0};
        make_inputs(g, k == 5                ? real_shapes
                       : strstr(models[k], "deep") || strstr(models[k], "transformer") ? "batch:3"
                                                                                      : NULL,
                    &in);
        print_message("  %s\n", models[k]);
        check_plan_matches(g, &in);
        ld_input_set_clear(&in);
        ld_graph_destroy(g);
    }
}

/* --- generated graphs ----------------------------------------------------------------- */

static void add_int64_init(Onnx__GraphProto *g, const char *name, int64_t n, const int64_t *v)
{
    Onnx__TensorProto *t = ob_tensor(name, INT64, 1, &n);
    ob_set_raw(t, v, (size_t)n * sizeof *v);
    OB_PUSH(g->initializer, g->n_initializer, t);
}

/* A random graph over one (1, C, H, W) input: elementwise ops (in place
 * when their input dies), ops whose output differs in size (Concat, Split,
 * Transpose, MaxPool, ReduceMean), values read twice and later, and the
 * shape arithmetic of a flatten: Shape -> Gather -> Concat -> Reshape,
 * computed for real by the pass. half: a float16 input, so WIDEN_HALF
 * kernels widen and narrow. */
static Onnx__ModelProto *random_model(unsigned seed, bool half)
{
    srand(seed);
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *gr = m->graph;
    int64_t dims[] = {1, 2 + rand() % 6, 2 * (4 + rand() % 20), 2 * (4 + rand() % 20)};
    ob_input(gr, "x", half ? FLOAT16 : FLOAT, 4, dims);
    char names[64][16];
    int n = 1;
    snprintf(names[0], sizeof names[0], "x");
    const char *unary[] = {"Relu", "Sigmoid", "Neg", "Abs", "Exp"};
    /* constants for chains of elementwise nodes the executor fuses */
    static const float half_f = 0.5f, three_f = 3.0f;
    int64_t one = 1;
    Onnx__TensorProto *ct = ob_tensor("half", FLOAT, 1, &one);
    ob_set_raw(ct, &half_f, sizeof half_f);
    OB_PUSH(gr->initializer, gr->n_initializer, ct);
    ct = ob_tensor("three", FLOAT, 1, &one);
    ob_set_raw(ct, &three_f, sizeof three_f);
    OB_PUSH(gr->initializer, gr->n_initializer, ct);
    int steps = 8 + rand() % 20;
    for (int s = 0; s < steps && n < 60 && gr->n_node < OB_CAP - 6; s++) {
        const char *a = names[n - 1];
        char out[16], out2[16], node[16];
        snprintf(out, sizeof out, "v%d", n);
        snprintf(node, sizeof node, "n%d", n);
        int pick = rand() % 9;
        if (half && pick >= 7) /* the constants are float32 */
            pick = 0;
        switch (pick) {
        case 0: case 1:
            ob_node(gr, unary[rand() % 5], node, a, out);
            break;
        case 7: case 8: { /* a chain: x * 0.5 + 3, then Relu, often kept going */
            char ins[40], mid[16], node2[16];
            snprintf(mid, sizeof mid, "c%d", n);
            snprintf(node2, sizeof node2, "m%d", n);
            snprintf(ins, sizeof ins, "%s,half", a);
            ob_node(gr, "Mul", node2, ins, mid);
            snprintf(ins, sizeof ins, "%s,three", mid);
            ob_node(gr, pick == 7 ? "Add" : "Sub", node, ins, out);
            break;
        }
        case 2: { /* a value read twice (in place only when a dies here) */
            char ins[40];
            snprintf(ins, sizeof ins, "%s,%s", a, a);
            ob_node(gr, rand() % 2 ? "Add" : "Mul", node, ins, out);
            break;
        }
        case 3: {
            char ins[40];
            snprintf(ins, sizeof ins, "%s,%s", a, a);
            int_attr(ob_node(gr, "Concat", node, ins, out), "axis", 1);
            dims[1] *= 2;
            break;
        }
        case 4: {
            int axis = 1 + rand() % 3;
            if (dims[axis] % 2) { /* odd: an elementwise op instead */
                ob_node(gr, unary[rand() % 5], node, a, out);
                break;
            }
            char outs[40];
            snprintf(out2, sizeof out2, "u%d", n);
            snprintf(outs, sizeof outs, "%s,%s", out, out2);
            int_attr(ob_node(gr, "Split", node, a, outs), "axis", axis);
            dims[axis] /= 2;
            if (rand() % 2) /* else u dies unread: freed after the step */
                snprintf(names[n++], sizeof names[0], "%s", out2);
            break;
        }
        case 5: {
            Onnx__NodeProto *t = ob_node(gr, "Transpose", node, a, out);
            Onnx__AttributeProto *p =
                ob_attr(t, "perm", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
            static int64_t perm[] = {0, 1, 3, 2};
            p->n_ints = 4;
            p->ints = perm;
            int64_t h = dims[2];
            dims[2] = dims[3];
            dims[3] = h;
            break;
        }
        default: {
            Onnx__NodeProto *r = ob_node(gr, "ReduceMean", node, a, out);
            Onnx__AttributeProto *ax =
                ob_attr(r, "axes", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
            static int64_t axis3[] = {3};
            ax->n_ints = 1;
            ax->ints = axis3;
            dims[3] = 1;
            break;
        }
        }
        snprintf(names[n++], sizeof names[0], "%s", out);
    }
    /* flatten the last value to (1, -1) through computed shape arithmetic */
    int64_t zero = 0, minus1 = -1;
    add_int64_init(gr, "idx0", 1, &zero);
    add_int64_init(gr, "minus1", 1, &minus1);
    ob_node(gr, "Shape", "shape", names[n - 1], "shp");
    Onnx__NodeProto *ga = ob_node(gr, "Gather", "gather", "shp,idx0", "batch");
    int_attr(ga, "axis", 0);
    Onnx__NodeProto *cc = ob_node(gr, "Concat", "cat_shape", "batch,minus1", "flat_shape");
    int_attr(cc, "axis", 0);
    char ins[40];
    snprintf(ins, sizeof ins, "%s,flat_shape", names[n - 1]);
    ob_node(gr, "Reshape", "flatten", ins, "y");
    ob_output(gr, "y", half ? FLOAT16 : FLOAT);
    ob_output(gr, names[n / 2], half ? FLOAT16 : FLOAT); /* read later and as an output */
    return m;
}

static void test_generated_graphs(void **state)
{
    (void)state;
    for (unsigned seed = 1; seed <= 32; seed++) {
        Onnx__ModelProto *m = random_model(seed, seed % 3 == 0);
        ld_graph *g = ob_load_ok(m);
        ld_input_set in = {0};
        make_inputs(g, NULL, &in);
        print_message("  seed %u\n", seed);
        check_plan_matches(g, &in);
        ld_input_set_clear(&in);
        ld_graph_destroy(g);
    }
    /* the fused walk was exercised, not only planned */
    assert_true(fused_nodes_seen > 0);
}

/* A hard-swish chain over a graph input: unfused, a1 stays live beside a2
 * (two buffers: neither the input nor a1 can be written over); fused,
 * only the graph output is stored. The plan of a fusing executor must
 * follow the fused run, not the unfused one. */
static void test_fused_chain_plan(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *gr = m->graph;
    int64_t dims[] = {1, 4, 64, 64}, one = 1;
    ob_input(gr, "x", FLOAT, 4, dims);
    static const float three = 3.0f, zero = 0.0f, six = 6.0f;
    const char *names[] = {"three", "zero", "six"};
    const float *values[] = {&three, &zero, &six};
    for (int k = 0; k < 3; k++) {
        Onnx__TensorProto *t = ob_tensor(names[k], FLOAT, 1, &one);
        ob_set_raw(t, values[k], sizeof(float));
        OB_PUSH(gr->initializer, gr->n_initializer, t);
    }
    ob_node(gr, "Add", "a1", "x,three", "a1");
    ob_node(gr, "Add", "a2", "a1,three", "a2");
    ob_node(gr, "Clip", "cl", "a2,zero,six", "cl");
    ob_node(gr, "Mul", "m2", "a1,cl", "m2");
    ob_node(gr, "Div", "y", "m2,six", "y");
    ob_output(gr, "y", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_input_set in = {0};
    make_inputs(g, NULL, &in);
    int before = fused_nodes_seen;
    check_plan_matches(g, &in);
    assert_int_equal(fused_nodes_seen - before, 5);
    ld_exec_plan plain, fused;
    ld_exec *e = create_ok(g, 1);
    ld_exec_set_fusion(1);
    ld_exec *f = create_fusing(g, 1, true);
    ld_exec_set_fusion(-1);
    assert_true(ld_exec_plan_build(e, in.shapes, &plain, NULL, 0));
    assert_true(ld_exec_plan_build(f, in.shapes, &fused, NULL, 0));
    size_t tensor = 4 * 64 * 64 * sizeof(float);
    assert_true(plain.peak_checked_run >= 2 * tensor);
    assert_int_equal(fused.peak_checked_run, tensor);
    assert_true(fused.top_run < plain.top_run);
    assert_int_equal(fused.top_stepwise, plain.top_stepwise); /* stepwise never fuses */
    ld_exec_plan_clear(&plain);
    ld_exec_plan_clear(&fused);
    ld_exec_destroy(e);
    ld_exec_destroy(f);
    ld_input_set_clear(&in);
    ld_graph_destroy(g);
}

/* --- giving up ------------------------------------------------------------------------ */

static void expect_no_plan(const Onnx__ModelProto *m, const char *reason)
{
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g, 1);
    ld_input_set in = {0};
    make_inputs(g, NULL, &in);
    ld_exec_plan plan;
    char why[256] = "";
    assert_false(ld_exec_plan_build(e, in.shapes, &plan, why, sizeof why));
    if (!strstr(why, reason))
        fail_msg("gave up for '%s', expected '%s'", why, reason);
    assert_null(plan.value_bytes);
    /* silent at prepare, and nothing faulted: the run is as without a plan */
    ld_error err;
    assert_int_equal(ld_exec_plan_prepare(e, in.shapes, &err), LD_OK);
    assert_int_equal(ld_exec_plan_prefaulted(e), 0);
    if (ld_exec_run(e, (const ld_tensor *const *)in.tensors, NULL, NULL, &err) != LD_OK)
        fail_msg("run failed: %s", err.message);
    ld_input_set_clear(&in);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

static void test_gives_up_on_computed_reshape(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {2, 6}, two = 2;
    ob_input(m->graph, "x", FLOAT, 2, d);
    ob_input(m->graph, "s", FLOAT, 1, &two);
    Onnx__NodeProto *c = ob_node(m->graph, "Cast", "cast", "s", "s64");
    int_attr(c, "to", INT64);
    ob_node(m->graph, "Reshape", "reshape", "x,s64", "y");
    ob_output(m->graph, "y", FLOAT);
    expect_no_plan(m, "non-float output computed from unknown values");
}

static void test_gives_up_on_deferred_outputs(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {2, 3};
    ob_input(m->graph, "x", FLOAT, 2, d);
    ob_node(m->graph, "NonZero", "nz", "x", "idx");
    ob_output(m->graph, "idx", INT64);
    expect_no_plan(m, "shaped by its values");
}

static void test_gives_up_on_reading_a_placeholder(void **state)
{
    (void)state;
    /* Resize's scales computed from the input: infer would read them */
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {1, 1, 2, 2}, four = 4;
    ob_input(m->graph, "x", FLOAT, 4, d);
    ob_input(m->graph, "s", FLOAT, 1, &four);
    ob_node(m->graph, "Abs", "abs", "s", "scales");
    ob_node(m->graph, "Resize", "resize", "x,,scales", "y");
    ob_output(m->graph, "y", FLOAT);
    expect_no_plan(m, "holds no values yet");
}

static void test_kernel_helpers_refuse_placeholders(void **state)
{
    (void)state;
    ld_node node = {.name = "n", .op_type = "Reshape"};
    ld_error err;
    ld_kernel_ctx ctx = {.node = &node, .err = &err};
    ld_shape shape;
    int64_t two = 2;
    assert_int_equal(ld_shape_set(&shape, 1, &two, &err), LD_OK);
    ld_tensor *t = NULL;
    assert_int_equal(ld_tensor_wrap(&t, "shape", LD_DTYPE_INT64, &shape, NULL, &err), LD_OK);
    int64_t out[4], *alloc = NULL, n64 = 0;
    int n = 0;
    assert_int_equal(ld_kread_ints(&ctx, t, "shape", out, 4, &n), LD_ERR_INTERNAL);
    assert_non_null(strstr(err.message, "holds no values yet"));
    assert_int_equal(ld_kread_ints_alloc(&ctx, t, "shape", &alloc, &n64), LD_ERR_INTERNAL);
    assert_null(alloc);
    assert_int_equal(ld_krequire_values(&ctx, t, "shape"), LD_ERR_INTERNAL);
    ld_tensor_destroy(t);
    /* one element: the scalar reader too; empty tensors hold no values to read */
    assert_int_equal(ld_shape_set(&shape, 0, NULL, &err), LD_OK);
    assert_int_equal(ld_tensor_wrap(&t, "k", LD_DTYPE_INT64, &shape, NULL, &err), LD_OK);
    assert_int_equal(ld_kread_scalar_int(&ctx, t, "k", &n64), LD_ERR_INTERNAL);
    ld_tensor_destroy(t);
    int64_t zero = 0;
    assert_int_equal(ld_shape_set(&shape, 1, &zero, &err), LD_OK);
    assert_int_equal(ld_tensor_wrap(&t, "e", LD_DTYPE_INT64, &shape, NULL, &err), LD_OK);
    assert_int_equal(ld_kread_ints(&ctx, t, "e", out, 4, &n), LD_OK);
    assert_int_equal(n, 0);
    ld_tensor_destroy(t);
}

/* --- prepare: prefault and --max-memory ------------------------------------------------- */

static void load_fixture(const char *path, const char *shapes, ld_graph **g, ld_input_set *in)
{
    ld_error err;
    if (ld_onnx_load_file(g, path, &err) != LD_OK)
        fail_msg("%s: %s", path, err.message);
    *in = (ld_input_set){0};
    make_inputs(*g, shapes, in);
}

static void test_prepare_prefaults_the_planned_top(void **state)
{
    (void)state;
    ld_graph *g = NULL;
    ld_input_set in;
    load_fixture("fixtures/deep.onnx", "batch:64", &g, &in);
    ld_exec *e = create_ok(g, 1);
    ld_exec_plan plan;
    assert_true(ld_exec_plan_build(e, in.shapes, &plan, NULL, 0));
    size_t top = plan.top_run < plan.top_stepwise ? plan.top_run : plan.top_stepwise;
    ld_error err;
    assert_int_equal(ld_exec_plan_prepare(e, in.shapes, &err), LD_OK);
    size_t faulted = ld_exec_plan_prefaulted(e);
    assert_int_equal(faulted, (top + PAGE - 1) & ~(PAGE - 1));
    /* read-write and resident no further than the planned top's 2 MiB unit */
    arena *a = &e->pool->arena;
    assert_int_equal(a->committed, (faulted + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
    size_t pages = (a->committed + 2 * HUGE_PAGE) / PAGE;
    unsigned char *vec = calloc(pages, 1);
    assert_int_equal(mincore(a->base, pages * PAGE, vec), 0);
    for (size_t p = 0; p < pages; p++) {
        if (p * PAGE < faulted && !(vec[p] & 1))
            fail_msg("page %zu of the planned %zu bytes is not resident", p, faulted);
        if (p * PAGE >= a->committed && (vec[p] & 1))
            fail_msg("page %zu beyond the plan is resident", p);
    }
    free(vec);
    /* the run stays within what was faulted: its top is the planned one */
    if (ld_exec_run(e, (const ld_tensor *const *)in.tensors, NULL, NULL, &err) != LD_OK)
        fail_msg("run failed: %s", err.message);
    assert_int_equal(ld_pool_top(e->pool), plan.top_run);
    assert_true(faulted <= ((plan.top_run + PAGE - 1) & ~(PAGE - 1)));
    ld_exec_plan_clear(&plan);
    ld_exec_destroy(e);
    ld_input_set_clear(&in);
    ld_graph_destroy(g);
}

static void test_prepare_fails_over_the_memory_limit(void **state)
{
    (void)state;
    ld_graph *g = NULL;
    ld_input_set in;
    load_fixture("fixtures/deep.onnx", "batch:64", &g, &in);
    ld_exec *e = create_ok(g, 1);
    ld_exec_plan plan;
    assert_true(ld_exec_plan_build(e, in.shapes, &plan, NULL, 0));
    uint64_t resident = 0;
    for (int k = 0; k < g->n_initializers; k++)
        resident += g->values[g->initializers[k]].initializer->nbytes;
    resident += in.tensors[0]->nbytes;
    uint64_t need = plan.peak_checked_run + resident;
    ld_error err;
    /* one byte short: fails at prepare, naming the limit and the bytes */
    ld_memory_limit_set(need - 1);
    assert_int_equal(ld_exec_plan_prepare(e, in.shapes, &err), LD_ERR_NOMEM);
    char want[32], lim[32];
    ld_memory_format(need, want, sizeof want);
    ld_memory_format(need - 1, lim, sizeof lim);
    assert_non_null(strstr(err.message, "memory plan: the run needs "));
    assert_non_null(strstr(err.message, want));
    assert_non_null(strstr(err.message, lim));
    assert_non_null(strstr(err.message, "(--max-memory)"));
    assert_null(strchr(err.message, '\n'));
    assert_int_equal(ld_exec_plan_prefaulted(e), 0);
    /* and the run itself would have failed */
    assert_int_equal(ld_exec_run(e, (const ld_tensor *const *)in.tensors, NULL, NULL, &err),
                     LD_ERR_NOMEM);
    /* exactly enough: prepare and the run pass */
    ld_memory_limit_set(need);
    ld_exec_destroy(e);
    e = create_ok(g, 1);
    assert_int_equal(ld_exec_plan_prepare(e, in.shapes, &err), LD_OK);
    if (ld_exec_run(e, (const ld_tensor *const *)in.tensors, NULL, NULL, &err) != LD_OK)
        fail_msg("run failed at the planned limit: %s", err.message);
    ld_memory_limit_set(0);
    ld_exec_plan_clear(&plan);
    ld_exec_destroy(e);
    ld_input_set_clear(&in);
    ld_graph_destroy(g);
}

/* prepare calls the kernels' prepare (kernel.h): the CNN fixture's two
 * convolutions pack their weights there, and the run packs nothing more;
 * without prepare the run packs them itself. */
static void test_prepare_packs_convolution_weights(void **state)
{
    (void)state;
    if (!ld_conv_direct_available()) {
        print_message("direct convolution not available here: skipped\n");
        return;
    }
    ld_graph *g = NULL;
    ld_input_set in;
    load_fixture("fixtures/cnn.onnx", NULL, &g, &in);
    ld_error err;
    ld_exec *e = create_ok(g, 2);
    int64_t packs = ld_conv_direct_cache_packs();
    assert_int_equal(ld_exec_plan_prepare(e, in.shapes, &err), LD_OK);
    assert_int_equal(ld_conv_direct_cache_packs() - packs, 2);
    packs = ld_conv_direct_cache_packs();
    if (ld_exec_run(e, (const ld_tensor *const *)in.tensors, NULL, NULL, &err) != LD_OK)
        fail_msg("run failed: %s", err.message);
    assert_int_equal(ld_conv_direct_cache_packs(), packs);
    ld_exec_destroy(e);
    e = create_ok(g, 2);
    if (ld_exec_run(e, (const ld_tensor *const *)in.tensors, NULL, NULL, &err) != LD_OK)
        fail_msg("run failed: %s", err.message);
    assert_int_equal(ld_conv_direct_cache_packs() - packs, 2);
    ld_exec_destroy(e);
    ld_input_set_clear(&in);
    ld_graph_destroy(g);
}

/* A run that allocates nothing (a folded Constant its only node): no peak
 * node to name; the weights alone are the CLI's estimate's, prepare passes. */
static void test_prepare_without_allocations(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {4};
    ob_input(m->graph, "x", FLOAT, 1, d);
    Onnx__NodeProto *c = ob_node(m->graph, "Constant", "k", "", "y");
    Onnx__AttributeProto *a = ob_attr(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = ob_tensor("", FLOAT, 1, d);
    float vals[] = {10, 20, 30, 40};
    ob_set_raw(a->t, vals, sizeof vals);
    ob_output(m->graph, "y", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_exec *e = create_ok(g, 1);
    ld_input_set in = {0};
    make_inputs(g, NULL, &in);
    ld_exec_plan plan;
    assert_true(ld_exec_plan_build(e, in.shapes, &plan, NULL, 0));
    assert_int_equal(plan.peak_live, 0);
    assert_int_equal(plan.peak_node, -1);
    ld_exec_plan_clear(&plan);
    ld_error err;
    ld_memory_limit_set(1);
    assert_int_equal(ld_exec_plan_prepare(e, in.shapes, &err), LD_OK);
    ld_memory_limit_set(0);
    assert_int_equal(ld_exec_plan_prefaulted(e), 0);
    ld_exec_destroy(e);
    ld_input_set_clear(&in);
    ld_graph_destroy(g);
}

/* The emulated engine's hooks allocate scratch the plan does not follow:
 * what prepare faults in stays within the arena its run touches. Also on
 * the real model (real_model). */
static void test_emulated_prefault_within_its_run(void **state)
{
    (void)state;
    const char *models[] = {"fixtures/deep.onnx", "fixtures/transformer.onnx",
                            "fixtures/cnn.onnx", "fixtures/accumulate.onnx",
                            "fixtures/overflow.onnx", NULL};
    const char *real_shapes;
    models[5] = real_model(&real_shapes);
    for (size_t k = 0; k < sizeof models / sizeof *models && models[k]; k++) {
        ld_graph *g = NULL;
        ld_input_set in;
        bool batch = strstr(models[k], "deep") || strstr(models[k], "transformer");
        const char *shapes = k == 5 ? real_shapes : batch ? "batch:8" : NULL;
        load_fixture(models[k], shapes, &g, &in);
        const ld_backend_vtable *vt = ld_backend_find("emulated");
        void *state_ = NULL;
        ld_error err;
        ld_engine_config cfg;
        ld_engine_config_init(&cfg);
        cfg.fp16 = true;
        ld_backend_config bc = {.threads = 1, .engine = &cfg};
        assert_int_equal(vt->create(&state_, &bc, &err), LD_OK);
        if (vt->prepare(state_, g, in.shapes, &err) != LD_OK)
            fail_msg("%s: prepare: %s", models[k], err.message);
        ld_emulated_backend *b = state_;
        size_t faulted = ld_exec_plan_prefaulted(b->exec);
        assert_true(faulted > 0);
        if (vt->run(state_, (const ld_tensor *const *)in.tensors, NULL, NULL, &err) != LD_OK)
            fail_msg("%s: run: %s", models[k], err.message);
        size_t top = ld_pool_top(b->exec->pool);
        print_message("  %s: prefaulted %zu, run's top %zu\n", models[k], faulted, top);
        assert_true(faulted <= ((top + PAGE - 1) & ~(PAGE - 1)));
        vt->destroy(state_);
        ld_engine_config_clear(&cfg);
        ld_input_set_clear(&in);
        ld_graph_destroy(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_fixtures),
        T(test_generated_graphs),
        T(test_gives_up_on_computed_reshape),
        T(test_gives_up_on_deferred_outputs),
        T(test_gives_up_on_reading_a_placeholder),
        T(test_kernel_helpers_refuse_placeholders),
        T(test_fused_chain_plan),
        T(test_prepare_prefaults_the_planned_top),
        T(test_prepare_fails_over_the_memory_limit),
        T(test_prepare_without_allocations),
        T(test_prepare_packs_convolution_weights),
        T(test_emulated_prefault_within_its_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
