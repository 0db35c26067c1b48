/* Tests of the AVX-512 depthwise plane (backends/kernels/depthwise.c): on
 * random 1-D, 2-D and 3-D geometries (strides 1-4, dilations, asymmetric
 * padding, planes narrower and wider than a vector), it must give exactly
 * the bits of the plain loop below, which is the documented arithmetic of
 * conv.c's portable kernel: bias, then every tap inside the input in
 * kernel order, float multiply then float add, padding taps skipped (so
 * infinite weights next to padding, NaN inputs and a -0 bias behave as in
 * the portable kernel). NaN results must be NaN (their payload may differ).
 * Skips on CPUs without AVX-512. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/depthwise.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int64_t pick(int64_t lo, int64_t hi) /* in [lo, hi] */
{
    return lo + (int64_t)(uniform() * (double)(hi - lo + 1));
}

/* The reference: output by output, taps in (kd, kh, kw) order. */
static void plain_plane(const float *x, const float *w, float bias, float *y,
                        const ld_window_geom *g)
{
    for (int64_t od = 0; od < g->out[0]; od++)
        for (int64_t oh = 0; oh < g->out[1]; oh++)
            for (int64_t ow = 0; ow < g->out[2]; ow++) {
                float acc = bias;
                for (int64_t kd = 0; kd < g->k[0]; kd++)
                    for (int64_t kh = 0; kh < g->k[1]; kh++)
                        for (int64_t kw = 0; kw < g->k[2]; kw++) {
                            int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
                            int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
                            int64_t iw = ow * g->s[2] - g->pb[2] + kw * g->d[2];
                            if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1] || iw < 0 ||
                                iw >= g->in[2])
                                continue;
                            float prod = w[(kd * g->k[1] + kh) * g->k[2] + kw] *
                                         x[(id * g->in[1] + ih) * g->in[2] + iw];
                            acc = acc + prod;
                        }
                y[(od * g->out[1] + oh) * g->out[2] + ow] = acc;
            }
}

/* A random geometry of nd spatial dims (leading dims 1), or false when the
 * kernel does not fit the padded input. */
static bool random_geometry(ld_window_geom *g, int nd, int64_t max_w)
{
    memset(g, 0, sizeof *g);
    g->nd = nd;
    for (int i = 0; i < 3; i++) {
        g->in[i] = g->out[i] = g->k[i] = g->s[i] = g->d[i] = 1;
        if (i < 3 - nd)
            continue;
        g->in[i] = pick(1, i == 2 ? max_w : 9);
        g->k[i] = pick(1, 6);
        g->s[i] = pick(1, 4);
        g->d[i] = pick(1, 2);
        g->pb[i] = pick(0, 3);
        g->pe[i] = pick(0, 3);
        int64_t span = (g->k[i] - 1) * g->d[i] + 1;
        if (g->in[i] + g->pb[i] + g->pe[i] < span)
            return false;
        g->out[i] = (g->in[i] + g->pb[i] + g->pe[i] - span) / g->s[i] + 1;
    }
    g->in_size = g->in[0] * g->in[1] * g->in[2];
    g->out_size = g->out[0] * g->out[1] * g->out[2];
    g->k_size = g->k[0] * g->k[1] * g->k[2];
    return true;
}

static void check_case(const ld_window_geom *g, int special)
{
    float *x = malloc((size_t)g->in_size * sizeof *x); /* exact sizes: ASan sees overreads */
    float *w = malloc((size_t)g->k_size * sizeof *w);
    float *want = malloc((size_t)g->out_size * sizeof *want);
    float *got = malloc((size_t)g->out_size * sizeof *got);
    assert_true(x && w && want && got);
    for (int64_t i = 0; i < g->in_size; i++) {
        x[i] = (float)(uniform() * 2 - 1);
        if (special && uniform() < 0.02)
            x[i] = uniform() < 0.5 ? -0.0f : NAN;
    }
    for (int64_t i = 0; i < g->k_size; i++) {
        w[i] = (float)(uniform() * 2 - 1);
        if (special && uniform() < 0.1)
            w[i] = uniform() < 0.5 ? INFINITY : -0.0f;
    }
    float bias = special ? -0.0f : (float)uniform();
    plain_plane(x, w, bias, want, g);
    ld_depthwise_plane_f32_avx512(x, w, bias, got, g);
    for (int64_t i = 0; i < g->out_size; i++) {
        if (isnan(want[i]) && isnan(got[i]))
            continue;
        if (memcmp(&want[i], &got[i], sizeof got[i]) != 0)
            fail_msg("output %lld: %a, expected %a (in %lldx%lldx%lld, k %lldx%lldx%lld, s %lld, "
                     "d %lld, pad %lld/%lld)", (long long)i, got[i], want[i],
                     (long long)g->in[0], (long long)g->in[1], (long long)g->in[2],
                     (long long)g->k[0], (long long)g->k[1], (long long)g->k[2],
                     (long long)g->s[2], (long long)g->d[2], (long long)g->pb[2],
                     (long long)g->pe[2]);
    }
    free(x);
    free(w);
    free(want);
    free(got);
}

static void skip_without_avx512(void)
{
    if (!ld_depthwise_avx512_available()) {
        print_message("  skipped: this CPU has no AVX-512\n");
        skip();
    }
}

static void test_random_geometries_match_bit_for_bit(void **state)
{
    (void)state;
    skip_without_avx512();
    int done = 0;
    for (int it = 0; done < 3000; it++) {
        ld_window_geom g;
        int nd = 1 + it % 3;
        if (!random_geometry(&g, nd, it % 4 == 0 ? 150 : 40) || !ld_depthwise_avx512_fits(&g))
            continue;
        check_case(&g, it % 5 == 0);
        done++;
    }
}

static void test_paddleocr_shapes(void **state)
{
    (void)state;
    skip_without_avx512();
    /* 3x3 and 5x5, stride 1 and 2, "same" padding, widths around 16-lane blocks */
    const int64_t widths[] = {20, 33, 40, 80, 160};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (int64_t k = 3; k <= 5; k += 2)
            for (int64_t s = 1; s <= 2; s++) {
                ld_window_geom g = {.nd = 2};
                for (int d = 0; d < 3; d++)
                    g.in[d] = g.k[d] = g.s[d] = g.d[d] = 1;
                g.in[1] = 5;
                g.in[2] = widths[i];
                g.k[1] = g.k[2] = k;
                g.s[1] = g.s[2] = s;
                g.pb[1] = g.pb[2] = g.pe[1] = g.pe[2] = k / 2;
                for (int d = 0; d < 3; d++)
                    g.out[d] = (g.in[d] + g.pb[d] + g.pe[d] - g.k[d]) / g.s[d] + 1;
                g.in_size = g.in[1] * g.in[2];
                g.out_size = g.out[1] * g.out[2];
                g.k_size = k * k;
                check_case(&g, 0);
                check_case(&g, 1);
            }
}

static void test_fits_limits_the_mask_table(void **state)
{
    (void)state;
    ld_window_geom g = {.nd = 1};
    for (int d = 0; d < 3; d++)
        g.in[d] = g.out[d] = g.k[d] = g.s[d] = g.d[d] = 1;
    g.out[2] = 16 * 1024;
    g.k[2] = 4;
    assert_true(ld_depthwise_avx512_fits(&g)); /* 1024 blocks x 4 columns */
    g.k[2] = 5;
    assert_false(ld_depthwise_avx512_fits(&g));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_geometries_match_bit_for_bit),
        cmocka_unit_test(test_paddleocr_shapes),
        cmocka_unit_test(test_fits_limits_the_mask_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
