/* Tests of the depthwise planes (backends/kernels/depthwise.c, AVX-512, and
 * depthwise_avx2.c, AVX2), each instruction set the running CPU supports
 * (an AVX-512 machine tests the AVX2 kernel too): on random 1-D, 2-D and
 * 3-D geometries (strides 1-4, dilations, asymmetric padding, planes
 * narrower and wider than a vector, widths not a multiple of 8 or 16), each
 * must give exactly the bits of the plain loop below, which is the
 * documented arithmetic of conv.c's portable kernel: bias, then every tap
 * inside the input in kernel order, float multiply then float add, padding
 * taps skipped (so infinite weights next to padding, NaN inputs and a -0
 * bias behave as in the portable kernel). NaN results must be NaN (their
 * payload may differ). The AVX-512 stride-2 kernel (depthwise_stride2.c) is
 * also checked on its own: which planes it takes and declines. Also checks
 * the level switch and that the dispatch
 * (ld_depthwise_plane_f32_fast) runs the forced level. */
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

/* The kernel levels to test: every one the CPU supports. */
static const ld_depthwise_level kernel_levels[] = {LD_DEPTHWISE_AVX2, LD_DEPTHWISE_AVX512};
#define N_LEVELS (sizeof kernel_levels / sizeof kernel_levels[0])

static bool level_fits(ld_depthwise_level level, const ld_window_geom *g)
{
    return level == LD_DEPTHWISE_AVX2 ? ld_depthwise_avx2_fits(g) : ld_depthwise_avx512_fits(g);
}

/* special 0: finite values; 1: NaN and -0 inputs, infinite and -0 weights,
 * -0 bias; 2: NaN, inf and -0 inputs, finite weights, bias 0 (no bias: the
 * narrow-plane copy path still applies); 3: finite values, bias 0. */
static void check_case(const ld_window_geom *g, int special, ld_depthwise_level level)
{
    float *x = malloc((size_t)g->in_size * sizeof *x); /* exact sizes: ASan sees overreads */
    float *w = malloc((size_t)g->k_size * sizeof *w);
    float *want = malloc((size_t)g->out_size * sizeof *want);
    float *got = malloc((size_t)g->out_size * sizeof *got);
    assert_true(x && w && want && got);
    for (int64_t i = 0; i < g->in_size; i++) {
        x[i] = (float)(uniform() * 2 - 1);
        if (special == 1 && uniform() < 0.02)
            x[i] = uniform() < 0.5 ? -0.0f : NAN;
        if (special == 2 && uniform() < 0.03)
            x[i] = uniform() < 0.3 ? -0.0f : uniform() < 0.5 ? NAN : -INFINITY;
    }
    for (int64_t i = 0; i < g->k_size; i++) {
        w[i] = (float)(uniform() * 2 - 1);
        if (special == 1 && uniform() < 0.1)
            w[i] = uniform() < 0.5 ? INFINITY : -0.0f;
    }
    float bias = special == 1 ? -0.0f : special >= 2 ? 0.0f : (float)uniform();
    plain_plane(x, w, bias, want, g);
    for (int64_t i = 0; i < g->out_size; i++)
        got[i] = -1234.5f; /* an output left unwritten fails */
    assert_true(ld_depthwise_force_level(level));
    if (uniform() < 0.5) /* the dispatch conv.c uses, or the kernel itself */
        assert_true(ld_depthwise_plane_f32_fast(x, w, bias, got, g));
    else if (level == LD_DEPTHWISE_AVX2)
        ld_depthwise_plane_f32_avx2(x, w, bias, got, g);
    else
        ld_depthwise_plane_f32_avx512(x, w, bias, got, g);
    assert_true(ld_depthwise_force_level(LD_DEPTHWISE_AUTO));
    for (int64_t i = 0; i < g->out_size; i++) {
        if (isnan(want[i]) && isnan(got[i]))
            continue;
        if (memcmp(&want[i], &got[i], sizeof got[i]) != 0)
            fail_msg("%s output %lld: %a, expected %a (in %lldx%lldx%lld, k %lldx%lldx%lld, s %lld, "
                     "d %lld, pad %lld/%lld)", level == LD_DEPTHWISE_AVX2 ? "avx2" : "avx512",
                     (long long)i, got[i], want[i],
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

static void test_random_geometries_match_bit_for_bit(void **state)
{
    (void)state;
    for (size_t l = 0; l < N_LEVELS; l++) {
        ld_depthwise_level level = kernel_levels[l];
        if (!ld_depthwise_level_supported(level)) {
            print_message("  skipped %s: not supported by this CPU\n",
                          level == LD_DEPTHWISE_AVX2 ? "avx2" : "avx512");
            continue;
        }
        int done = 0;
        for (int it = 0; done < 3000; it++) {
            ld_window_geom g;
            int nd = 1 + it % 3;
            if (!random_geometry(&g, nd, it % 4 == 0 ? 150 : 40) || !level_fits(level, &g))
                continue;
            check_case(&g, it % 5 == 0 ? 1 : it % 7 == 0 ? 2 : it % 11 == 0 ? 3 : 0, level);
            done++;
        }
    }
}

static void test_paddleocr_shapes(void **state)
{
    (void)state;
    /* 3x3 and 5x5, stride 1 and 2, "same" padding, widths around 8- and
     * 16-lane blocks, below and above the narrow-plane copy's limit (112) */
    const int64_t widths[] = {1, 5, 7, 9, 15, 17, 20, 23, 33, 40, 57, 80, 113, 121, 160, 321};
    for (size_t l = 0; l < N_LEVELS; l++) {
        if (!ld_depthwise_level_supported(kernel_levels[l]))
            continue;
        for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
            for (int64_t k = 3; k <= 5; k += 2)
                for (int64_t s = 1; s <= 2; s++) {
                    ld_window_geom g = {.nd = 2};
                    for (int d = 0; d < 3; d++)
                        g.in[d] = g.k[d] = g.s[d] = g.d[d] = 1;
                    g.in[1] = 5 + (int64_t)i % 4;
                    g.in[2] = widths[i];
                    g.k[1] = g.k[2] = k;
                    g.s[1] = g.s[2] = s;
                    g.pb[1] = g.pb[2] = g.pe[1] = g.pe[2] = k / 2;
                    for (int d = 0; d < 3; d++)
                        g.out[d] = (g.in[d] + g.pb[d] + g.pe[d] - g.k[d]) / g.s[d] + 1;
                    g.in_size = g.in[1] * g.in[2];
                    g.out_size = g.out[1] * g.out[2];
                    g.k_size = k * k;
                    for (int special = 0; special < 4; special++)
                        check_case(&g, special, kernel_levels[l]);
                }
    }
}

/* Wide planes at stride 2 (more blocks per row than the narrow-plane copy
 * takes: the AVX2 kernel's ring of even/odd rows), 2-D and 1-D, random
 * kernels, dilations and padding, every special-value mix (the -0 bias and
 * infinite weights must leave the ring for the masked blocks), and a row
 * too wide for the ring. */
static void test_wide_stride2_planes(void **state)
{
    (void)state;
    for (size_t l = 0; l < N_LEVELS; l++) {
        if (!ld_depthwise_level_supported(kernel_levels[l]))
            continue;
        for (int it = 0; it < 120; it++) {
            ld_window_geom g = {.nd = it % 4 == 0 ? 1 : 2};
            for (int d = 0; d < 3; d++)
                g.in[d] = g.k[d] = g.s[d] = g.d[d] = 1;
            if (g.nd == 2) {
                g.in[1] = pick(1, 9);
                g.k[1] = pick(1, 6);
                g.s[1] = pick(1, 3);
                g.d[1] = pick(1, 2);
                g.pb[1] = pick(0, 3);
                g.pe[1] = pick(0, 3);
            }
            g.in[2] = it == 119 ? 30001 : pick(225, 900);
            g.k[2] = pick(1, 6);
            g.s[2] = 2;
            g.d[2] = pick(1, 2);
            g.pb[2] = pick(0, 3);
            g.pe[2] = pick(0, 3);
            bool ok = true;
            for (int d = 0; d < 3; d++) {
                int64_t span = (g.k[d] - 1) * g.d[d] + 1;
                ok = ok && g.in[d] + g.pb[d] + g.pe[d] >= span;
                if (ok)
                    g.out[d] = (g.in[d] + g.pb[d] + g.pe[d] - span) / g.s[d] + 1;
            }
            if (!ok || !level_fits(kernel_levels[l], &g))
                continue;
            g.in_size = g.in[0] * g.in[1] * g.in[2];
            g.out_size = g.out[0] * g.out[1] * g.out[2];
            g.k_size = g.k[0] * g.k[1] * g.k[2];
            check_case(&g, it % 4, kernel_levels[l]);
        }
    }
}

/* A 2-D geometry: in x in, k x k, stride s, padding pb/pe on both axes
 * (pb2/pe2 horizontally). */
static ld_window_geom geom2d(int64_t in1, int64_t in2, int64_t k, int64_t s, int64_t pb1,
                             int64_t pe1, int64_t pb2, int64_t pe2)
{
    ld_window_geom g = {.nd = 2};
    for (int d = 0; d < 3; d++)
        g.in[d] = g.out[d] = g.k[d] = g.s[d] = g.d[d] = 1;
    g.in[1] = in1;
    g.in[2] = in2;
    g.k[1] = g.k[2] = k;
    g.s[1] = g.s[2] = s;
    g.pb[1] = pb1;
    g.pe[1] = pe1;
    g.pb[2] = pb2;
    g.pe[2] = pe2;
    for (int d = 1; d < 3; d++)
        g.out[d] = (g.in[d] + g.pb[d] + g.pe[d] - g.k[d]) / g.s[d] + 1;
    g.in_size = g.in[1] * g.in[2];
    g.out_size = g.out[1] * g.out[2];
    g.k_size = k * k;
    return g;
}

/* The stride-2 phase-row kernel (depthwise_stride2.c) on its own: it must
 * take the planes it is for (returns true) and give the reference's bits,
 * with the plane at every float offset from a 64-byte boundary (its row
 * split loads whole vectors in the middle of a row and masked ones at the
 * ends), and decline (false, nothing written) a -0 bias or an infinite
 * weight, whose padding taps are not neutral. */
static void check_stride2_direct(const ld_window_geom *g, int offset, int special)
{
    /* rounded up: aligned_alloc wants a multiple of the alignment (reads
       past the plane are caught by check_case's exact-size mallocs) */
    size_t bytes = ((size_t)(g->in_size + 16) * sizeof(float) + 63) / 64 * 64;
    float *block = aligned_alloc(64, bytes);
    float *w = malloc((size_t)g->k_size * sizeof *w);
    float *want = malloc((size_t)g->out_size * sizeof *want);
    float *got = malloc((size_t)g->out_size * sizeof *got);
    assert_true(block && w && want && got);
    float *x = block + offset;
    for (int64_t i = 0; i < g->in_size; i++) {
        x[i] = (float)(uniform() * 2 - 1);
        if (special == 2 && uniform() < 0.03)
            x[i] = uniform() < 0.3 ? -0.0f : uniform() < 0.5 ? NAN : INFINITY;
    }
    for (int64_t i = 0; i < g->k_size; i++)
        w[i] = (float)(uniform() * 2 - 1);
    float bias = special == 1 ? -0.0f : special == 3 ? 0.0f : (float)uniform();
    if (special == 4)
        w[g->k_size - 1] = -INFINITY;
    plain_plane(x, w, bias, want, g);
    for (int64_t i = 0; i < g->out_size; i++)
        got[i] = -1234.5f;
    bool took = ld_depthwise_stride2_avx512(x, w, bias, got, g);
    if (special == 1 || special == 4) { /* padding not neutral: declined */
        assert_false(took);
        for (int64_t i = 0; i < g->out_size; i++)
            assert_true(got[i] == -1234.5f);
    } else {
        assert_true(took);
        for (int64_t i = 0; i < g->out_size; i++) {
            if (isnan(want[i]) && isnan(got[i]))
                continue;
            if (memcmp(&want[i], &got[i], sizeof got[i]) != 0)
                fail_msg("stride2 output %lld: %a, expected %a (in %lldx%lld, k %lld, pad "
                         "%lld/%lld %lld/%lld, offset %d)", (long long)i, got[i], want[i],
                         (long long)g->in[1], (long long)g->in[2], (long long)g->k[2],
                         (long long)g->pb[1], (long long)g->pe[1], (long long)g->pb[2],
                         (long long)g->pe[2], offset);
        }
    }
    free(block);
    free(w);
    free(want);
    free(got);
}

static void test_stride2_phase_rows(void **state)
{
    (void)state;
    if (!ld_depthwise_level_supported(LD_DEPTHWISE_AVX512)) {
        print_message("  skipped: no AVX-512\n");
        return;
    }
    /* det's four stride-2 layers, "same" padding, a few planes each, through
       the dispatch and the kernel (check_case) and on their own */
    const int64_t det[4][2] = {{320, 3}, {160, 3}, {80, 3}, {40, 5}};
    for (int i = 0; i < 4; i++) {
        int64_t w = det[i][0], k = det[i][1];
        ld_window_geom g = geom2d(w, w, k, 2, k / 2, k / 2, k / 2, k / 2);
        for (int special = 0; special < 4; special++)
            check_case(&g, special, LD_DEPTHWISE_AVX512);
        check_stride2_direct(&g, 0, 0);
        check_stride2_direct(&g, 1, 2);
    }
    /* widths around 16 and 32 (one phase vector: 32 inputs), odd heights,
       every padding from 0 to 3 on each side, the plane at every offset
       from a 64-byte boundary, NaN, inf and -0 inputs, bias 0 and -0, an
       infinite weight */
    const int64_t widths[] = {1, 2, 3, 5, 15, 16, 17, 31, 32, 33, 34, 47, 63, 64, 65, 66, 95,
                              96, 97, 129, 191, 193, 200};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (int64_t k = 3; k <= 5; k += 2)
            for (int it = 0; it < 6; it++) {
                int64_t in1 = pick(1, 13);
                ld_window_geom g = geom2d(in1, widths[i], k, 2, pick(0, 3), pick(0, 3),
                                          pick(0, 3), pick(0, 3));
                if (g.in[1] + g.pb[1] + g.pe[1] < k || g.in[2] + g.pb[2] + g.pe[2] < k)
                    continue;
                check_stride2_direct(&g, (int)pick(0, 15), it % 5);
                check_case(&g, it % 4, LD_DEPTHWISE_AVX512);
            }
    /* planes it does not take: decline, writing nothing */
    float x[64] = {0}, wt[25] = {0}, y = -1.0f;
    ld_window_geom s1 = geom2d(8, 8, 3, 1, 1, 1, 1, 1), k7 = geom2d(8, 8, 7, 2, 3, 3, 3, 3);
    assert_false(ld_depthwise_stride2_avx512(x, wt, 1.0f, &y, &s1));
    assert_false(ld_depthwise_stride2_avx512(x, wt, 1.0f, &y, &k7));
    ld_window_geom wide = geom2d(2, 20000, 3, 2, 1, 1, 1, 1); /* ring too long for the stack */
    assert_false(ld_depthwise_stride2_avx512(x, wt, 1.0f, &y, &wide));
    assert_true(y == -1.0f);
}

/* Stride 1, 3x3 and 5x5, K/2 columns of left padding: the sliding-rows
 * kernel of depthwise.c (AVX-512) when the padding is neutral, the other
 * paths when not (special 1: -0 bias, infinite weights). det's shapes
 * (20, 40, 80, 160 wide), odd heights, heights below the row-slot count
 * and below the kernel, rows padded above and below by 0..K-1, right
 * padding 0..K-1, and planes tall and wide enough to be cut into row
 * bands (320 and 1000 wide). */
static void test_stride1_sliding_rows(void **state)
{
    (void)state;
    const int64_t heights[] = {1, 2, 3, 4, 5, 6, 7, 9, 13, 20, 21, 40, 80};
    const int64_t widths[] = {1, 3, 15, 16, 17, 20, 31, 33, 40, 64, 80, 81, 160};
    for (size_t l = 0; l < N_LEVELS; l++) {
        if (!ld_depthwise_level_supported(kernel_levels[l]))
            continue;
        int n = 0;
        for (int64_t k = 3; k <= 5; k += 2)
            for (size_t hi = 0; hi < sizeof heights / sizeof heights[0]; hi++)
                for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++, n++) {
                    ld_window_geom g = {.nd = 2};
                    for (int d = 0; d < 3; d++)
                        g.in[d] = g.out[d] = g.k[d] = g.s[d] = g.d[d] = 1;
                    g.in[1] = heights[hi];
                    g.in[2] = widths[wi];
                    g.k[1] = g.k[2] = k;
                    g.pb[2] = k / 2;
                    bool same = n % 3 != 0; /* else random vertical and right padding */
                    g.pb[1] = same ? k / 2 : pick(0, k - 1);
                    g.pe[1] = same ? k / 2 : pick(0, k - 1);
                    g.pe[2] = same ? k / 2 : pick(0, k - 1);
                    bool ok = true;
                    for (int d = 1; d < 3; d++) {
                        ok = ok && g.in[d] + g.pb[d] + g.pe[d] >= k;
                        g.out[d] = ok ? g.in[d] + g.pb[d] + g.pe[d] - k + 1 : 1;
                    }
                    if (!ok)
                        continue;
                    g.in_size = g.in[1] * g.in[2];
                    g.out_size = g.out[1] * g.out[2];
                    g.k_size = k * k;
                    check_case(&g, n % 4, kernel_levels[l]);
                }
        /* wide planes: several strips of blocks */
        for (int it = 0; it < 8; it++) {
            int64_t k = it % 2 ? 5 : 3;
            ld_window_geom g = {.nd = 2};
            for (int d = 0; d < 3; d++)
                g.in[d] = g.out[d] = g.k[d] = g.s[d] = g.d[d] = 1;
            g.in[1] = it < 4 ? 61 + it : 17 + it;
            g.in[2] = it < 4 ? 320 : 1000;
            g.k[1] = g.k[2] = k;
            g.pb[1] = g.pb[2] = g.pe[1] = g.pe[2] = k / 2;
            for (int d = 1; d < 3; d++)
                g.out[d] = g.in[d];
            g.in_size = g.out_size = g.in[1] * g.in[2];
            g.k_size = k * k;
            check_case(&g, it % 4, kernel_levels[l]);
        }
    }
}

static void test_level_switch(void **state)
{
    (void)state;
    ld_depthwise_level best = ld_depthwise_level_active();
    assert_true(ld_depthwise_level_supported(LD_DEPTHWISE_NONE));
    assert_true(ld_depthwise_level_supported(best));
    if (ld_depthwise_level_supported(LD_DEPTHWISE_AVX512))
        assert_int_equal(best, LD_DEPTHWISE_AVX512);
    else if (ld_depthwise_level_supported(LD_DEPTHWISE_AVX2))
        assert_int_equal(best, LD_DEPTHWISE_AVX2);
    else
        assert_int_equal(best, LD_DEPTHWISE_NONE);
    for (size_t l = 0; l < N_LEVELS; l++)
        if (!ld_depthwise_level_supported(kernel_levels[l])) { /* refused, nothing changed */
            assert_false(ld_depthwise_force_level(kernel_levels[l]));
            assert_int_equal(ld_depthwise_level_active(), best);
        }
    /* NONE: the dispatch declines and writes nothing (conv.c's loop runs) */
    ld_window_geom g = {.nd = 1};
    for (int d = 0; d < 3; d++)
        g.in[d] = g.out[d] = g.k[d] = g.s[d] = g.d[d] = 1;
    g.in_size = g.out_size = g.k_size = 1;
    float x = 2.0f, w = 3.0f, y = -1.0f;
    assert_true(ld_depthwise_force_level(LD_DEPTHWISE_NONE));
    assert_int_equal(ld_depthwise_level_active(), LD_DEPTHWISE_NONE);
    assert_false(ld_depthwise_plane_f32_fast(&x, &w, 1.0f, &y, &g));
    assert_true(y == -1.0f);
    assert_true(ld_depthwise_force_level(LD_DEPTHWISE_AUTO));
    assert_int_equal(ld_depthwise_level_active(), best);
    if (best != LD_DEPTHWISE_NONE) {
        assert_true(ld_depthwise_plane_f32_fast(&x, &w, 1.0f, &y, &g));
        assert_true(y == 7.0f);
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
    g.out[2] = 8 * 1024; /* AVX2: 8-lane blocks */
    g.k[2] = 4;
    assert_true(ld_depthwise_avx2_fits(&g));
    g.k[2] = 5;
    assert_false(ld_depthwise_avx2_fits(&g));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_geometries_match_bit_for_bit),
        cmocka_unit_test(test_paddleocr_shapes),
        cmocka_unit_test(test_wide_stride2_planes),
        cmocka_unit_test(test_stride2_phase_rows),
        cmocka_unit_test(test_stride1_sliding_rows),
        cmocka_unit_test(test_fits_limits_the_mask_table),
        cmocka_unit_test(test_level_switch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
