/* Unit tests of the fast paths behind backends/kernels/fast_level.h,
 * Resize's nearest integer upsampling (resize_interp.c) and
 * GlobalAveragePool's grouped sums (pool.c), and of Concat's parallel copy
 * (layout.c).
 *
 * Every level the CPU runs is forced in turn (ld_fast_force_level) and its
 * output compared bit for bit with the portable level and with a naive loop,
 * on 1 and 2 threads, over shapes with vector tails, broadcasts, and values
 * with NaN payloads, infinities, signed zeros and subnormals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/fast_level.h"
#include "layerdiff/backend.h"
#include "layerdiff/engine.h"
#include "tests/support/emulated_testing.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

#define IN(n, dt, r, ...) {.name = n, .dtype = dt, .rank = r, .dims = {__VA_ARGS__}}
#define NO_INPUT {.name = NULL}

static const ld_fast_level levels[] = {LD_FAST_PORTABLE, LD_FAST_AVX2};
#define N_LEVELS ((int)(sizeof levels / sizeof levels[0]))

static uint64_t rng = 0x9E3779B97F4A7C15u;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Mostly ordinary values, with NaNs (distinct payloads, both signs),
 * infinities, signed zeros, subnormals and huge values mixed in (each kind
 * one in 16). */
static float edge_value(void)
{
    uint32_t r = next_u32();
    switch (r % 16) {
    case 0: return from_bits(0x7FC00000u | (next_u32() & 0x3FFFFFu) | (r & 0x80000000u));
    case 1: return (r & 64) ? INFINITY : -INFINITY;
    case 2: return (r & 64) ? 0.0f : -0.0f;
    case 3: return from_bits((next_u32() & 0x7FFFFFu) | (r & 0x80000000u)); /* subnormal */
    case 4: return (r & 64 ? 1 : -1) * 3e38f;
    default: return (float)((int32_t)next_u32() % 20000) / 997.0f;
    }
}

/* Bits equal, or both NaN when payload_free. */
static void expect_same_float(float got, float want, bool payload_free, const char *what,
                              int64_t i)
{
    if (bits_of(got) == bits_of(want) || (payload_free && isnan(got) && isnan(want)))
        return;
    fail_msg("%s: element %lld is %a (0x%08x), expected %a (0x%08x)", what, (long long)i,
             (double)got, bits_of(got), (double)want, bits_of(want));
}

static void force(ld_fast_level level)
{
    assert_true(ld_fast_force_level(level));
}

static void teardown_level(void)
{
    assert_true(ld_fast_force_level(LD_FAST_AUTO));
}

/* --- Resize nearest, integer upsampling ------------------------------------------------ */

/* Nearest (asymmetric, floor) upsampling of the last two axes by (fy, fx)
 * for 4-byte float and int32 data, widths with vector tails: bit copies of
 * the source at every level and thread count. */
static void test_resize_nearest_integer_factors(void **state)
{
    (void)state;
    static const int factors[][2] = {{2, 2}, {1, 2}, {2, 3}, {4, 4}, {3, 8}, {1, 16}, {2, 5}};
    static const int64_t widths[] = {1, 3, 4, 7, 9, 13, 40};
    for (size_t f = 0; f < sizeof factors / sizeof factors[0]; f++)
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
            for (int is_int = 0; is_int < 2; is_int++) {
                const int64_t N = 1, C = 3, H = 5, W = widths[w];
                int fy = factors[f][0], fx = factors[f][1];
                int64_t n = N * C * H * W, oh = H * fy, ow = W * fx;
                uint32_t *x = malloc((size_t)n * sizeof *x);
                assert_non_null(x);
                for (int64_t i = 0; i < n; i++)
                    x[i] = is_int ? next_u32() : bits_of(edge_value());
                const float scales[4] = {1, 1, (float)fy, (float)fx};
                kr_input ins[] = {IN("X", is_int ? LD_DTYPE_INT32 : LD_DTYPE_FLOAT32, 4, N, C,
                                     H, W),
                                  NO_INPUT, IN("scales", LD_DTYPE_FLOAT32, 1, 4)};
                ins[0].data = x;
                ins[2].data = scales;
                kr_attr attrs[] = {{KR_STRING, "mode", .s = "nearest"},
                                   {KR_STRING, "coordinate_transformation_mode",
                                    .s = "asymmetric"},
                                   {KR_STRING, "nearest_mode", .s = "floor"},
                                   {KR_END}};
                for (int level = 0; level < N_LEVELS; level++) {
                    if (!ld_fast_level_supported(levels[level]))
                        continue;
                    force(levels[level]);
                    for (int threads = 1; threads <= 2; threads++) {
                        kr_result r;
                        kr_run(13, "Resize", attrs, ins, 3, "Y", threads, &r);
                        kr_expect_ok(&r);
                        assert_int_equal(r.t[0]->count, N * C * oh * ow);
                        const uint32_t *y = r.t[0]->data;
                        for (int64_t p = 0; p < N * C; p++)
                            for (int64_t j = 0; j < oh; j++)
                                for (int64_t i = 0; i < ow; i++) {
                                    uint32_t want = x[(p * H + j / fy) * W + i / fx];
                                    uint32_t got = y[(p * oh + j) * ow + i];
                                    if (got != want)
                                        fail_msg("factors %dx%d width %lld level %d: (%lld, "
                                                 "%lld) is 0x%08x, expected 0x%08x", fy, fx,
                                                 (long long)W, level, (long long)j,
                                                 (long long)i, got, want);
                                }
                        kr_free(&r);
                    }
                }
                free(x);
            }
    teardown_level();
}

/* --- GlobalAveragePool ------------------------------------------------------------------- */

/* Plane counts around the group of 8 and plane sizes with tails: the mean
 * of each plane is its double sum in element order over n, rounded to float,
 * at every level and thread count. */
static void test_global_average_pool_groups(void **state)
{
    (void)state;
    static const int64_t channels[] = {1, 8, 13, 24, 96};
    static const int64_t sides[][2] = {{1, 1}, {3, 5}, {8, 8}, {7, 9}, {40, 41}};
    for (size_t c = 0; c < sizeof channels / sizeof channels[0]; c++)
        for (size_t s = 0; s < sizeof sides / sizeof sides[0]; s++) {
            const int64_t N = 2, C = channels[c], H = sides[s][0], W = sides[s][1];
            int64_t plane = H * W, n = N * C * plane;
            float *x = malloc((size_t)n * sizeof *x);
            assert_non_null(x);
            /* magnitudes from 2^-40 to 2^40, so that the double sums round and a
             * different order of the terms gives other bits; sums stay finite */
            for (int64_t i = 0; i < n; i++)
                x[i] = ldexpf((float)((int32_t)next_u32() % 100000) / 313.0f,
                              (int)(next_u32() % 81) - 40);
            if (n > 20)
                x[17] = -0.0f;
            kr_input ins[] = {IN("X", LD_DTYPE_FLOAT32, 4, N, C, H, W)};
            ins[0].data = x;
            for (int level = 0; level < N_LEVELS; level++) {
                if (!ld_fast_level_supported(levels[level]))
                    continue;
                force(levels[level]);
                for (int threads = 1; threads <= 2; threads++) {
                    kr_result r;
                    kr_run(11, "GlobalAveragePool", NULL, ins, 1, "Y", threads, &r);
                    kr_expect_ok(&r);
                    const float *y = r.t[0]->data;
                    for (int64_t p = 0; p < N * C; p++) {
                        double sum = 0;
                        for (int64_t i = 0; i < plane; i++)
                            sum += x[p * plane + i];
                        expect_same_float(y[p], (float)(sum / (double)plane), false,
                                          "GlobalAveragePool", p);
                    }
                    kr_free(&r);
                }
            }
            free(x);
        }
    teardown_level();
}

/* A NaN or infinity in a plane reaches that plane's mean only. */
static void test_global_average_pool_specials(void **state)
{
    (void)state;
    enum { C = 16, P = 27 };
    static float x[C * P];
    for (int i = 0; i < C * P; i++)
        x[i] = (float)(i % 7) - 3.0f;
    x[2 * P + 5] = NAN;
    x[9 * P + 26] = INFINITY;
    x[15 * P] = -INFINITY;
    kr_input ins[] = {IN("X", LD_DTYPE_FLOAT32, 4, 1, C, 3, 9)};
    ins[0].data = x;
    for (int level = 0; level < N_LEVELS; level++) {
        if (!ld_fast_level_supported(levels[level]))
            continue;
        force(levels[level]);
        kr_result r;
        kr_run(11, "GlobalAveragePool", NULL, ins, 1, "Y", 1, &r);
        kr_expect_ok(&r);
        const float *y = r.t[0]->data;
        for (int p = 0; p < C; p++) {
            double sum = 0;
            for (int i = 0; i < P; i++)
                sum += x[p * P + i];
            expect_same_float(y[p], (float)(sum / P), true, "specials", p);
        }
        assert_true(isnan(y[2]) && y[9] == INFINITY && y[15] == -INFINITY);
        kr_free(&r);
    }
    teardown_level();
}

/* The terms of each plane are added in element order: 0.75 + 2^53 - 2^53
 * is 0 in double, 0.75 - 2^53 + 2^53 is 1. Each plane puts the pair at
 * another position of a vector step (the last one across two steps). */
static void test_global_average_pool_term_order(void **state)
{
    (void)state;
    enum { C = 16, P = 27 };
    static float x[C * P];
    memset(x, 0, sizeof x);
    for (int p = 0; p < C; p++) {
        int j0 = p % 8, at = 8 + j0;
        x[p * P + at - 1] = 0.75f;
        x[p * P + at] = 0x1p53f;
        x[p * P + at + 1] = -0x1p53f;
    }
    kr_input ins[] = {IN("X", LD_DTYPE_FLOAT32, 4, 1, C, 3, 9)};
    ins[0].data = x;
    for (int level = 0; level < N_LEVELS; level++) {
        if (!ld_fast_level_supported(levels[level]))
            continue;
        force(levels[level]);
        kr_result r;
        kr_run(11, "GlobalAveragePool", NULL, ins, 1, "Y", 1, &r);
        kr_expect_ok(&r);
        for (int p = 0; p < C; p++)
            expect_same_float(((const float *)r.t[0]->data)[p], 0.0f, false, "term order", p);
        kr_free(&r);
    }
    teardown_level();
}

/* In a reduced-precision layer (the emulated engine at fp16) the sums are
 * float accumulators (global_avg_group_f32r): every level gives the
 * portable level's bits, on 1 and 2 threads, and the terms go in element
 * order (the data makes another order visible after the float16 output). */
static void test_global_average_pool_reduced(void **state)
{
    (void)state;
    enum { N = 2, C = 24, H = 7, W = 9, P = H * W };
    Onnx__ModelProto *m = ob_model();
    int64_t dims[4] = {N, C, H, W};
    ob_input(m->graph, "x", LD_DTYPE_FLOAT32, 4, dims);
    ob_node(m->graph, "GlobalAveragePool", "gap", "x", "y");
    ob_output(m->graph, "y", LD_DTYPE_FLOAT32);
    ld_graph *g = ob_load_ok(m);
    ld_shape shape;
    ld_error err;
    ld_tensor *x = NULL;
    assert_int_equal(ld_shape_set(&shape, 4, dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&x, "x", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    /* planes p % 8 in 1..6: zeros but 2^-10 + 65504 - 65504 inside one vector step
     * (0 in this order, 2^-10 in another; all float16 values); the others
     * random multiples of 1/64 */
    float *xv = x->data;
    for (int p = 0; p < N * C; p++)
        for (int i = 0; i < P; i++)
            xv[p * P + i] = p % 8 == 0 || p % 8 == 7
                                ? (float)((int32_t)next_u32() % 2000) / 64.0f
                                : 0.0f;
    for (int p = 0; p < N * C; p++) {
        if (p % 8 == 0 || p % 8 == 7)
            continue;
        int at = 8 + p % 8;
        xv[p * P + at - 1] = 0x1p-10f;
        xv[p * P + at] = 65504.0f;
        xv[p * P + at + 1] = -65504.0f;
    }
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    emt_capture want = {0};
    force(LD_FAST_PORTABLE);
    emt_run(g, &cfg, &x, &want, 1, 1, true);
    const ld_tensor *w = emt_find(&want, "y")->t;
    for (int p = 0; p < N * C; p++)
        if (p % 8 != 0 && p % 8 != 7)
            expect_same_float(((const float *)w->data)[p], 0.0f, false, "reduced order", p);
    for (int level = 0; level < N_LEVELS; level++) {
        if (!ld_fast_level_supported(levels[level]))
            continue;
        force(levels[level]);
        for (int threads = 1; threads <= 2; threads++) {
            emt_capture got = {0};
            emt_run(g, &cfg, &x, &got, 1, threads, true);
            const ld_tensor *t = emt_find(&got, "y")->t;
            assert_int_equal(t->nbytes, w->nbytes);
            for (int64_t i = 0; i < w->count; i++)
                expect_same_float(((const float *)t->data)[i], ((const float *)w->data)[i],
                                  false, "reduced", i);
            emt_capture_free(&got);
        }
    }
    emt_capture_free(&want);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
    teardown_level();
}

/* --- Concat -------------------------------------------------------------------------- */

/* Large enough to be cut between threads, on axes 0, 1 and the last, with
 * an empty input: 1 and 2 threads give the naive copy's bytes. */
static void test_concat_parallel_ranges(void **state)
{
    (void)state;
    for (int axis = 0; axis < 3; axis++) {
        int64_t sizes[4] = {13, 0, 64, 7}; /* along the axis */
        int64_t base[3] = {3, 5, 4099};    /* dims of the others */
        kr_input ins[4];
        uint32_t *data[4];
        int64_t total_axis = 0;
        for (int k = 0; k < 4; k++) {
            int64_t dims[3] = {base[0], base[1], base[2]};
            dims[axis] = sizes[k];
            total_axis += sizes[k];
            int64_t n = dims[0] * dims[1] * dims[2];
            data[k] = malloc((size_t)(n ? n : 1) * sizeof(uint32_t));
            assert_non_null(data[k]);
            for (int64_t i = 0; i < n; i++)
                data[k][i] = next_u32();
            static const char *const names[] = {"A", "B", "C", "D"};
            ins[k] = (kr_input){.name = names[k], .dtype = LD_DTYPE_FLOAT32, .rank = 3,
                                .dims = {dims[0], dims[1], dims[2]}, .data = data[k]};
        }
        kr_attr attrs[] = {{KR_INT, "axis", .i = axis}, {KR_END}};
        int64_t out_dims[3] = {base[0], base[1], base[2]};
        out_dims[axis] = total_axis;
        for (int threads = 1; threads <= 2; threads++) {
            kr_result r;
            kr_run(13, "Concat", attrs, ins, 4, "Y", threads, &r);
            kr_expect_ok(&r);
            const uint32_t *y = r.t[0]->data;
            for (int64_t i0 = 0; i0 < out_dims[0]; i0++)
                for (int64_t i1 = 0; i1 < out_dims[1]; i1++)
                    for (int64_t i2 = 0; i2 < out_dims[2]; i2++) {
                        int64_t idx[3] = {i0, i1, i2}, at = idx[axis];
                        int k = 0;
                        while (at >= sizes[k])
                            at -= sizes[k++];
                        int64_t d[3] = {base[0], base[1], base[2]};
                        d[axis] = sizes[k];
                        idx[axis] = at;
                        uint32_t want = data[k][(idx[0] * d[1] + idx[1]) * d[2] + idx[2]];
                        uint32_t got = y[(i0 * out_dims[1] + i1) * out_dims[2] + i2];
                        if (got != want)
                            fail_msg("axis %d threads %d: (%lld, %lld, %lld) differs", axis,
                                     threads, (long long)i0, (long long)i1, (long long)i2);
                    }
            kr_free(&r);
        }
        for (int k = 0; k < 4; k++)
            free(data[k]);
    }
}

/* --- the level switch --------------------------------------------------------------------- */

static void test_force_level(void **state)
{
    (void)state;
    assert_true(ld_fast_force_level(LD_FAST_PORTABLE));
    assert_int_equal(ld_fast_level_active(), LD_FAST_PORTABLE);
    if (ld_fast_level_supported(LD_FAST_AVX2)) {
        assert_true(ld_fast_force_level(LD_FAST_AVX2));
        assert_int_equal(ld_fast_level_active(), LD_FAST_AVX2);
    } else {
        assert_false(ld_fast_force_level(LD_FAST_AVX2));
    }
    assert_false(ld_fast_force_level((ld_fast_level)7));
    assert_true(ld_fast_force_level(LD_FAST_AUTO));
    assert_int_equal(ld_fast_level_active(), ld_fast_level_supported(LD_FAST_AVX2)
                                                 ? LD_FAST_AVX2
                                                 : LD_FAST_PORTABLE);
}

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_resize_nearest_integer_factors),
        T(test_global_average_pool_groups),
        T(test_global_average_pool_specials),
        T(test_global_average_pool_term_order),
        T(test_global_average_pool_reduced),
        T(test_concat_parallel_ranges),
        T(test_force_level),
    };
    if (getenv("LD_TEST_FILTER")) /* run a subset: LD_TEST_FILTER='*resize*' */
        cmocka_set_test_filter(getenv("LD_TEST_FILTER"));
    return cmocka_run_group_tests_name("kernels_fast", tests, NULL, NULL);
}
