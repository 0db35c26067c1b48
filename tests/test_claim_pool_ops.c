/* layerdiff tests — the ops besides convolutions and fused chains that run
 * their parallel work on the convolutions' claim pool (conv_pool.h):
 * GlobalAveragePool and the other pools, BatchNormalization, Concat, and
 * the elementwise drivers (unary maps, binary ops on one long row and on
 * broadcast rows). For each: a 2-thread run's work reaches the pool's helper
 * (OpenMP's threads are not woken any more: on a shared 2-vCPU VM they cost
 * 25-180 us to wake and their spin competes with the helper), and every
 * 2-thread result equals the 1-thread result bit for bit. The sizes are
 * above each op's parallel threshold and are not multiples of the claim or
 * group sizes, so tails are covered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/conv_pool.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

#define F32 LD_DTYPE_FLOAT32

/* n deterministic float32 values in [-2, 2), a few exact zeros. */
static float *values(int64_t n, unsigned seed)
{
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = i % 97 == 0 ? 0.0f : (float)((double)(s >> 8) / (1 << 24) * 4.0 - 2.0);
    }
    return v;
}

/* Runs the node on 1 thread, then on 2 threads until a run's job reached the
 * pool's helper (at most 50 runs: the helper may not be scheduled in time on
 * a busy machine); every output of every 2-thread run equals the 1-thread
 * run's, bit for bit. */
static void check_shared(int opset, const char *op, const kr_attr *attrs, const kr_input *ins,
                         int n_in, const char *outs)
{
    kr_result one;
    kr_run(opset, op, attrs, ins, n_in, outs, 1, &one);
    kr_expect_ok(&one);
    int64_t before = ld_conv_pool_shared_jobs();
    for (int i = 0; i < 50 && ld_conv_pool_shared_jobs() == before; i++) {
        kr_result two;
        kr_run(opset, op, attrs, ins, n_in, outs, 2, &two);
        kr_expect_ok(&two);
        for (int k = 0; k < KR_MAX_OUT && one.t[k]; k++) {
            assert_non_null(two.t[k]);
            assert_int_equal(two.t[k]->nbytes, one.t[k]->nbytes);
            if (memcmp(two.t[k]->data, one.t[k]->data, one.t[k]->nbytes) != 0)
                fail_msg("%s: output %d on 2 threads differs from 1 thread", op, k);
        }
        kr_free(&two);
    }
    kr_free(&one);
    if (ld_conv_pool_shared_jobs() == before)
        fail_msg("%s: no 2-thread run reached the claim pool's helper", op);
}

static void test_global_average_pool(void **state)
{
    (void)state;
    /* 21 planes: two groups of 8 and 5 single planes */
    int64_t n = 21 * 61 * 67;
    float *x = values(n, 1);
    kr_input in[] = {{"x", F32, 4, {1, 21, 61, 67}, x, false}};
    check_shared(1, "GlobalAveragePool", NULL, in, 1, "y");
    check_shared(2, "GlobalLpPool", NULL, in, 1, "y");
    check_shared(1, "GlobalMaxPool", NULL, in, 1, "y");
    free(x);
}

static void test_windowed_pools(void **state)
{
    (void)state;
    int64_t n = 2 * 5 * 45 * 53;
    float *x = values(n, 2);
    kr_input in[] = {{"x", F32, 4, {2, 5, 45, 53}, x, false}};
    kr_attr k3[] = {{KR_INTS, "kernel_shape", .n = 2, .ints = {3, 3}},
                    {KR_INTS, "pads", .n = 4, .ints = {1, 1, 1, 1}}, {0}};
    check_shared(12, "MaxPool", k3, in, 1, "y");   /* the separable path's per-worker rows */
    check_shared(12, "MaxPool", k3, in, 1, "y,i"); /* with Indices */
    check_shared(11, "AveragePool", k3, in, 1, "y");
    free(x);
}

static void test_batch_normalization(void **state)
{
    (void)state;
    int64_t C = 19, n = 2 * C * 37 * 29;
    float *x = values(n, 3), *sc = values(C, 4), *b = values(C, 5), *m = values(C, 6);
    float *v = values(C, 7);
    for (int64_t c = 0; c < C; c++)
        v[c] = fabsf(v[c]) + 0.25f;
    kr_input in[] = {{"x", F32, 4, {2, C, 37, 29}, x, false}, {"s", F32, 1, {C}, sc, true},
                     {"b", F32, 1, {C}, b, true}, {"m", F32, 1, {C}, m, true},
                     {"v", F32, 1, {C}, v, true}};
    check_shared(15, "BatchNormalization", NULL, in, 5, "y");
    free(x);
    free(sc);
    free(b);
    free(m);
    free(v);
}

static void test_concat(void **state)
{
    (void)state;
    /* 4 inputs along the channels (det's FPN), 2 along the last axis (many
       short blocks per claim); both above 256 KB */
    float *a = values(3 * 81 * 83, 8), *b = values(5 * 81 * 83, 9);
    kr_attr axis1[] = {{KR_INT, "axis", .i = 1}, {0}}, axis3[] = {{KR_INT, "axis", .i = 3}, {0}};
    kr_input four[] = {{"a", F32, 4, {1, 3, 81, 83}, a, false},
                       {"b", F32, 4, {1, 5, 81, 83}, b, false},
                       {"c", F32, 4, {1, 3, 81, 83}, a, false},
                       {"d", F32, 4, {1, 5, 81, 83}, b, false}};
    check_shared(13, "Concat", axis1, four, 4, "y");
    kr_input two[] = {{"a", F32, 4, {1, 5, 81, 83}, b, false},
                      {"b", F32, 4, {1, 5, 81, 83}, b, false}};
    check_shared(13, "Concat", axis3, two, 2, "y");
    free(a);
    free(b);
}

static void test_elementwise(void **state)
{
    (void)state;
    int64_t C = 13, HW = 71 * 79, n = C * HW;
    float *x = values(n, 10), *z = values(n, 11), *ch = values(C, 12);
    kr_input unary[] = {{"x", F32, 4, {1, C, 71, 79}, x, false}};
    check_shared(14, "Relu", NULL, unary, 1, "y");
    check_shared(13, "Sigmoid", NULL, unary, 1, "y");
    /* same shapes: the one-row path, cut in chunks */
    kr_input same[] = {{"x", F32, 4, {1, C, 71, 79}, x, false},
                       {"z", F32, 4, {1, C, 71, 79}, z, false}};
    check_shared(14, "Add", NULL, same, 2, "y");
    /* per channel (an SE block's Mul): rows of 71 * 79, sought per claim */
    kr_input per_channel[] = {{"x", F32, 4, {1, C, 71, 79}, x, false},
                              {"c", F32, 4, {1, C, 1, 1}, ch, false}};
    check_shared(14, "Mul", NULL, per_channel, 2, "y");
    /* a row vector against a matrix: many short rows */
    kr_input rowwise[] = {{"x", F32, 2, {C * 71, 79}, x, false},
                          {"r", F32, 1, {79}, z, false}};
    check_shared(14, "Sub", NULL, rowwise, 2, "y");
    free(x);
    free(z);
    free(ch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_global_average_pool, ob_teardown),
        cmocka_unit_test_teardown(test_windowed_pools, ob_teardown),
        cmocka_unit_test_teardown(test_batch_normalization, ob_teardown),
        cmocka_unit_test_teardown(test_concat, ob_teardown),
        cmocka_unit_test_teardown(test_elementwise, ob_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
