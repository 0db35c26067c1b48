/* Tests of the executor's per-node profile (ld_exec_profile) and the
 * reference backend's profile slot: the floating-point work every
 * conv/gemm kernel reports (2 per multiply-add at the nominal size, padding
 * taps included), zero for other ops, times that are set for every node,
 * and a profile that describes the last run only (not a sum over runs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/exec.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define ATTR_INT ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT
#define ATTR_INTS ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS

/* A float32 initializer of the given shape holding small values. */
static void add_weights(Onnx__GraphProto *g, const char *name, int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    float *v = ob_mem((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(i % 7) * 0.125f - 0.25f;
    Onnx__TensorProto *t = ob_tensor(name, FLOAT, rank, dims);
    ob_set_raw(t, v, (size_t)n * sizeof *v);
    OB_PUSH(g->initializer, g->n_initializer, t);
}

static void set_ints(Onnx__NodeProto *n, const char *name, int count, const int64_t *values)
{
    Onnx__AttributeProto *a = ob_attr(n, name, ATTR_INTS);
    a->n_ints = (size_t)count;
    a->ints = ob_mem((size_t)count * sizeof *a->ints);
    memcpy(a->ints, values, (size_t)count * sizeof *a->ints);
}

/* x [2, 4, 9, 9]
 *   conv      3x3, 4 -> 6 channels, pad 1      -> [2, 6, 9, 9]
 *   dw        3x3 depthwise (group 6), stride 2 -> [2, 6, 5, 5]
 *   relu
 *   up        ConvTranspose 2x2 stride 2, 6 -> 3 -> [2, 3, 10, 10]
 *   flat      Reshape to [2, 300]
 *   fc        Gemm with W [300, 5] (transB 0)   -> [2, 5]
 *   mm        MatMul [2, 5] x [5, 4]            -> [2, 4]
 */
static ld_graph *profile_model(void)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    const int64_t xd[] = {2, 4, 9, 9}, cw[] = {6, 4, 3, 3}, dww[] = {6, 1, 3, 3},
                  tw[] = {6, 3, 2, 2}, fw[] = {300, 5}, mw[] = {5, 4}, shape_d[] = {2};
    ob_input(g, "x", FLOAT, 4, xd);
    add_weights(g, "cw", 4, cw);
    add_weights(g, "dww", 4, dww);
    add_weights(g, "tw", 4, tw);
    add_weights(g, "fw", 2, fw);
    add_weights(g, "mw", 2, mw);
    const int64_t flat_shape[] = {2, 300};
    Onnx__TensorProto *shape = ob_tensor("flat_shape", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1,
                                         shape_d);
    ob_set_raw(shape, flat_shape, sizeof flat_shape);
    OB_PUSH(g->initializer, g->n_initializer, shape);
    const int64_t pads1[] = {1, 1, 1, 1}, s2[] = {2, 2};
    Onnx__NodeProto *conv = ob_node(g, "Conv", "conv", "x,cw", "c");
    set_ints(conv, "pads", 4, pads1);
    Onnx__NodeProto *dw = ob_node(g, "Conv", "dw", "c,dww", "d");
    set_ints(dw, "pads", 4, pads1);
    set_ints(dw, "strides", 2, s2);
    Onnx__AttributeProto *group = ob_attr(dw, "group", ATTR_INT);
    group->has_i = 1;
    group->i = 6;
    ob_node(g, "Relu", "relu", "d", "r");
    Onnx__NodeProto *up = ob_node(g, "ConvTranspose", "up", "r,tw", "u");
    set_ints(up, "strides", 2, s2);
    ob_node(g, "Reshape", "flat", "u,flat_shape", "f");
    ob_node(g, "Gemm", "fc", "f,fw", "h");
    ob_node(g, "MatMul", "mm", "h,mw", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

/* Expected work per node, by name (see profile_model). */
static int64_t expected_flops(const char *name)
{
    if (strcmp(name, "conv") == 0)
        return 2LL * 2 * 6 * (9 * 9) * (4 * 3 * 3);
    if (strcmp(name, "dw") == 0)
        return 2LL * 2 * 6 * (5 * 5) * (1 * 3 * 3);
    if (strcmp(name, "up") == 0) /* each input position times each output channel and tap */
        return 2LL * 2 * 3 * (5 * 5) * 6 * (2 * 2);
    if (strcmp(name, "fc") == 0)
        return 2LL * 2 * 5 * 300;
    if (strcmp(name, "mm") == 0)
        return 2LL * 2 * 4 * 5;
    return 0;
}

static ld_tensor *input_x(void)
{
    const int64_t dims[] = {2, 4, 9, 9};
    ld_shape shape;
    ld_error err;
    ld_tensor *t = NULL;
    assert_int_equal(ld_shape_set(&shape, 4, dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, "x", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    for (int64_t i = 0; i < t->count; i++)
        ((float *)t->data)[i] = (float)(i % 11) * 0.1f;
    return t;
}

static void skip_without(const char *op)
{
    if (!ld_kernel_find("", op, 17)) {
        print_message("  skipped: no %s kernel in the registry\n", op);
        skip();
    }
}

static void expect_profile(const ld_graph *g, const ld_node_profile *p)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const char *name = g->nodes[i].name;
        if (p[i].flops != expected_flops(name))
            fail_msg("node '%s': flops %lld, expected %lld", name, (long long)p[i].flops,
                     (long long)expected_flops(name));
        if (!(p[i].seconds > 0 && p[i].seconds < 10))
            fail_msg("node '%s': time %g s", name, p[i].seconds);
    }
}

static void test_exec_profile_counts_conv_and_gemm_work(void **state)
{
    (void)state;
    skip_without("ConvTranspose");
    ld_graph *g = profile_model();
    ld_exec *e = NULL;
    ld_error err;
    ld_exec_config cfg = {.threads = 1};
    if (ld_exec_create(&e, g, &cfg, &err) != LD_OK)
        fail_msg("create: %s", err.message);
    const ld_node_profile *p = ld_exec_profile(e);
    for (int i = 0; i < g->n_nodes; i++) /* before any run: nothing */
        assert_true(p[i].seconds == 0 && p[i].flops == 0);
    ld_tensor *x = input_x();
    const ld_tensor *in[] = {x};
    for (int run = 0; run < 2; run++) { /* the second run replaces the first's figures */
        if (ld_exec_run(e, in, NULL, NULL, &err) != LD_OK)
            fail_msg("run: %s", err.message);
        expect_profile(g, ld_exec_profile(e));
    }
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

static void test_exec_profile_same_work_on_two_threads(void **state)
{
    (void)state;
    skip_without("ConvTranspose");
    ld_graph *g = profile_model();
    ld_exec *e = NULL;
    ld_error err;
    ld_exec_config cfg = {.threads = 2};
    if (ld_exec_create(&e, g, &cfg, &err) != LD_OK)
        fail_msg("create: %s", err.message);
    ld_tensor *x = input_x();
    const ld_tensor *in[] = {x};
    if (ld_exec_run(e, in, NULL, NULL, &err) != LD_OK)
        fail_msg("run: %s", err.message);
    expect_profile(g, ld_exec_profile(e));
    ld_tensor_destroy(x);
    ld_exec_destroy(e);
    ld_graph_destroy(g);
}

static ld_status ignore(void *user, const ld_tensor_event *ev, ld_error *err)
{
    (void)user;
    (void)ev;
    (void)err;
    return LD_OK;
}

static void test_reference_backend_profile_slot(void **state)
{
    (void)state;
    skip_without("ConvTranspose");
    const ld_backend_vtable *vt = ld_backend_find("reference");
    assert_non_null(vt);
    assert_non_null(vt->profile);
    ld_graph *g = profile_model();
    ld_backend_config cfg = {.threads = 1};
    void *b = NULL;
    ld_error err;
    ld_backend_profile prof;
    assert_int_equal(vt->create(&b, &cfg, &err), LD_OK);
    /* before prepare there is no executor to ask */
    assert_int_equal(vt->profile(b, &prof, &err), LD_ERR_INTERNAL);
    ld_tensor *x = input_x();
    const ld_tensor *in[] = {x};
    assert_int_equal(vt->prepare(b, g, &x->shape, &err), LD_OK);
    if (vt->run(b, in, ignore, NULL, &err) != LD_OK)
        fail_msg("run: %s", err.message);
    assert_int_equal(vt->profile(b, &prof, &err), LD_OK);
    assert_int_equal(prof.n_nodes, g->n_nodes);
    expect_profile(g, prof.nodes);
    assert_non_null(prof.description); /* the BLAS line */
    assert_true(strlen(prof.description) > 0);
    vt->destroy(b);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_exec_profile_counts_conv_and_gemm_work),
        T(test_exec_profile_same_work_on_two_threads),
        T(test_reference_backend_profile_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
