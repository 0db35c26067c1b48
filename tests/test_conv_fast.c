/* Unit tests for the float32 convolution fast paths of backends/kernels/:
 * the direct convolution (conv_direct.c) at every instruction-set level the
 * CPU runs (AVX-512F and AVX2 + FMA; an AVX-512 machine also tests AVX2,
 * through ld_conv_direct_force_level) on random geometries (1-D, 2-D, 3-D;
 * strides 1 and 2 in the innermost dimension, others in the outer ones;
 * dilations; asymmetric padding; channel counts that fill no tile; planes
 * narrower and wider than a vector; bias or none), and every tile variant
 * of each level forced on geometries with tails, against
 *   - a scalar emulation of its documented order (fmaf over c, kd, kh, kw
 *     from +0, then + bias): bit for bit;
 *   - a double-precision reference: within (K + 2) u sum|x*w| + u|bias|;
 *   - itself on 1 and 2 threads: bit for bit;
 * the product ld_gemm_direct_f32 and ld_interleave2_add_f32 (ConvTranspose's)
 * the same way, and padding semantics (an infinite weight times a padding
 * zero is NaN, as with im2col). Levels the CPU lacks are skipped with a
 * message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_direct.h"
#include "backends/kernels/conv_direct_internal.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int64_t pick(int64_t lo, int64_t hi) /* uniform in [lo, hi] */
{
    return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1));
}

static float uniform(void)
{
    return (float)((double)(next_u64() >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

/* Geometry of nd spatial dims with sizes in[], kernels k[], strides s[],
 * dilations d[], pads pb[]/pe[]; false when the output would be empty. */
static bool make_geom(ld_window_geom *g, int nd, const int64_t *in, const int64_t *k,
                      const int64_t *s, const int64_t *d, const int64_t *pb, const int64_t *pe)
{
    memset(g, 0, sizeof *g);
    g->nd = nd;
    for (int i = 0; i < nd; i++) {
        g->in[i] = in[i], g->k[i] = k[i], g->s[i] = s[i], g->d[i] = d[i];
        g->pb[i] = pb[i], g->pe[i] = pe[i];
        int64_t span = in[i] + pb[i] + pe[i] - ((k[i] - 1) * d[i] + 1);
        if (span < 0)
            return false;
        g->out[i] = span / s[i] + 1;
    }
    ld_window_geom_finish(g);
    return true;
}

typedef struct conv_case {
    ld_window_geom g;
    int64_t C, M;
    float *x, *w, *b; /* b may be NULL */
} conv_case;

/* Input value feeding output o (3-D index) through tap (kd, kh, kw) of
 * channel c, or 0 in the padding (*inside false). */
static float tap_input(const conv_case *t, int64_t c, const int64_t *o, int64_t kd, int64_t kh,
                       int64_t kw, bool *inside)
{
    const ld_window_geom *g = &t->g;
    int64_t kk[3] = {kd, kh, kw}, pos[3];
    *inside = true;
    for (int i = 0; i < 3; i++) {
        pos[i] = o[i] * g->s[i] - g->pb[i] + kk[i] * g->d[i];
        if (pos[i] < 0 || pos[i] >= g->in[i])
            *inside = false;
    }
    if (!*inside)
        return 0.0f;
    return t->x[c * g->in_size + (pos[0] * g->in[1] + pos[1]) * g->in[2] + pos[2]];
}

/* The kernel's documented arithmetic, one output at a time, and the double
 * reference with its error bound. */
static void reference(const conv_case *t, float *emulated, double *exact, double *bound)
{
    const ld_window_geom *g = &t->g;
    const double u = ldexp(1.0, -24);
    int64_t K = t->C * g->k_size;
    for (int64_t m = 0; m < t->M; m++)
        for (int64_t p = 0; p < g->out_size; p++) {
            int64_t o[3] = {p / (g->out[1] * g->out[2]), p / g->out[2] % g->out[1], p % g->out[2]};
            float acc = 0.0f;
            double sum = 0.0, mag = 0.0;
            for (int64_t c = 0; c < t->C; c++)
                for (int64_t kd = 0; kd < g->k[0]; kd++)
                    for (int64_t kh = 0; kh < g->k[1]; kh++)
                        for (int64_t kw = 0; kw < g->k[2]; kw++) {
                            bool inside;
                            float xv = tap_input(t, c, o, kd, kh, kw, &inside);
                            float wv = t->w[(m * t->C + c) * g->k_size +
                                            (kd * g->k[1] + kh) * g->k[2] + kw];
                            acc = fmaf(xv, wv, acc);
                            sum += (double)xv * wv;
                            mag += fabs((double)xv * wv);
                        }
            double bias = t->b ? t->b[m] : 0.0;
            emulated[m * g->out_size + p] = t->b ? acc + t->b[m] : acc;
            exact[m * g->out_size + p] = sum + bias;
            bound[m * g->out_size + p] = (double)(K + 2) * u * mag + u * fabs(bias) + 1e-30;
        }
}

static float *random_floats(int64_t n)
{
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = uniform();
    return v;
}

static float *run_direct(const conv_case *t, int threads)
{
    float *y = malloc((size_t)(t->M * t->g.out_size) * sizeof *y);
    size_t floats = ld_conv_direct_scratch_floats(&t->g, t->C, t->M, threads);
    float *scratch = aligned_alloc(64, (floats * sizeof *scratch + 63) / 64 * 64);
    assert_non_null(y);
    assert_non_null(scratch);
    ld_conv_direct_f32(t->x, t->w, t->b, y, t->C, t->M, &t->g, scratch, threads, NULL);
    free(scratch);
    return y;
}

static void check_case(const conv_case *t, const char *label)
{
    int64_t n = t->M * t->g.out_size;
    float *emulated = malloc((size_t)n * sizeof *emulated);
    double *exact = malloc((size_t)n * sizeof *exact), *bound = malloc((size_t)n * sizeof *bound);
    assert_true(emulated && exact && bound);
    reference(t, emulated, exact, bound);
    float *y1 = run_direct(t, 1), *y2 = run_direct(t, 2);
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&y1[i], &emulated[i], sizeof(float)) != 0 ||
            fabs((double)y1[i] - exact[i]) > bound[i]) {
            fprintf(stderr, "%s: element %lld: direct %.9g, emulated %.9g, exact %.17g (bound "
                    "%.3g)\n", label, (long long)i, (double)y1[i], (double)emulated[i], exact[i],
                    bound[i]);
            fail();
        }
    }
    assert_memory_equal(y1, y2, (size_t)n * sizeof *y1);
    free(emulated), free(exact), free(bound), free(y1), free(y2);
}

/* The levels with kernels, best first; levels[i] is tested when supported. */
static const ld_conv_direct_level levels[] = {LD_CONV_DIRECT_AVX512, LD_CONV_DIRECT_AVX2};
#define N_LEVELS 2

/* Forces level i; false (with a message, once per test) when the CPU lacks it. */
static bool use_level(int i)
{
    if (ld_conv_direct_force_level(levels[i]))
        return true;
    printf("# %s: not on this CPU, skipped\n", ld_conv_direct_level_name(levels[i]));
    return false;
}

/* After a test: back to detection and the cost model. */
static int restore_auto(void **state)
{
    (void)state;
    ld_conv_direct_force_ask_ahead(-1);
    ld_conv_direct_force_variant(-1);
    ld_conv_direct_force_blocking(0, 0);
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    return 0;
}

static void skip_without_kernels(void)
{
    if (!ld_conv_direct_level_supported(LD_CONV_DIRECT_AVX2) &&
        !ld_conv_direct_level_supported(LD_CONV_DIRECT_AVX512)) {
        printf("# skipped: this CPU has neither AVX-512F nor AVX2 + FMA\n");
        skip();
    }
}

/* check_case at every supported level. */
static void check_all_levels(const conv_case *t, const char *label)
{
    for (int i = 0; i < N_LEVELS; i++) {
        if (!ld_conv_direct_level_supported(levels[i]))
            continue;
        assert_true(ld_conv_direct_force_level(levels[i]));
        char full[200];
        snprintf(full, sizeof full, "%s [%s]", label, ld_conv_direct_level_name(levels[i]));
        check_case(t, full);
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
}

/* Random geometries of every rank the kernel takes. */
static void test_direct_random(void **state)
{
    (void)state;
    skip_without_kernels();
    int done = 0;
    for (int trial = 0; done < 120 && trial < 1000; trial++) {
        int nd = (int)pick(1, 3);
        int64_t in[3], k[3], s[3], d[3], pb[3], pe[3];
        for (int i = 0; i < nd; i++) {
            bool inner = i == nd - 1;
            in[i] = inner ? pick(1, 70) : pick(1, nd == 3 ? 6 : 12);
            k[i] = pick(1, inner ? 5 : 3);
            s[i] = pick(1, inner ? 2 : 3);
            d[i] = pick(1, 10) <= 8 ? 1 : 2;
            pb[i] = pick(0, k[i] > 1 ? 2 : 1);
            pe[i] = pick(0, k[i] > 1 ? 2 : 1);
        }
        conv_case t = {.C = pick(1, 20), .M = pick(1, 40)};
        if (!make_geom(&t.g, nd, in, k, s, d, pb, pe) || !ld_conv_direct_fits(&t.g, t.C, t.M))
            continue;
        if (t.M * t.C * t.g.k_size * t.g.out_size > 4000000)
            continue;
        t.x = random_floats(t.C * t.g.in_size);
        t.w = random_floats(t.M * t.C * t.g.k_size);
        t.b = pick(0, 1) ? random_floats(t.M) : NULL;
        char label[160];
        snprintf(label, sizeof label, "trial %d: nd %d, C %lld, M %lld, in %lldx%lldx%lld, "
                 "k %lldx%lldx%lld, s %lld", trial, nd, (long long)t.C, (long long)t.M,
                 (long long)t.g.in[0], (long long)t.g.in[1], (long long)t.g.in[2],
                 (long long)t.g.k[0], (long long)t.g.k[1], (long long)t.g.k[2],
                 (long long)t.g.s[2]);
        check_all_levels(&t, label);
        free(t.x), free(t.w), free(t.b);
        done++;
    }
    assert_true(done >= 100);
}

/* The shapes PaddleOCR det runs (smaller planes), which pick every tile
 * variant, and a product large enough to run on two threads. */
static void test_direct_model_shapes(void **state)
{
    (void)state;
    skip_without_kernels();
    static const int64_t shapes[][6] = {
        /* C, M, H = W, k, stride, pad */
        {96, 24, 40, 3, 1, 1}, {3, 16, 64, 3, 2, 1}, {16, 32, 48, 1, 1, 0},
        {12, 96, 20, 1, 1, 0}, {384, 360, 8, 1, 1, 0}, {48, 12, 33, 1, 1, 0},
        {32, 8, 17, 5, 2, 2}, {64, 4, 50, 3, 1, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t *sh = shapes[i];
        int64_t in[2] = {sh[2], sh[2]}, k[2] = {sh[3], sh[3]}, s[2] = {sh[4], sh[4]};
        int64_t d[2] = {1, 1}, p[2] = {sh[5], sh[5]};
        conv_case t = {.C = sh[0], .M = sh[1]};
        assert_true(make_geom(&t.g, 2, in, k, s, d, p, p));
        assert_true(ld_conv_direct_fits(&t.g, t.C, t.M));
        t.x = random_floats(t.C * t.g.in_size);
        t.w = random_floats(t.M * t.C * t.g.k_size);
        t.b = i % 2 ? NULL : random_floats(t.M);
        char label[64];
        snprintf(label, sizeof label, "model shape %zu", i);
        check_all_levels(&t, label);
        free(t.x), free(t.w), free(t.b);
    }
}

/* An infinite weight meets the zero padding at the border: NaN there, as
 * in the im2col path (0 * inf); inside, +-inf. */
static void test_direct_padding_nan(void **state)
{
    (void)state;
    skip_without_kernels();
    int64_t in[2] = {5, 20}, k[2] = {3, 3}, s[2] = {1, 1}, d[2] = {1, 1}, p[2] = {1, 1};
    conv_case t = {.C = 1, .M = 1};
    assert_true(make_geom(&t.g, 2, in, k, s, d, p, p));
    t.x = random_floats(t.g.in_size);
    for (int64_t i = 0; i < t.g.in_size; i++)
        t.x[i] = 1.0f;
    t.w = random_floats(9);
    for (int i = 0; i < 9; i++)
        t.w[i] = 0.0f;
    t.w[0] = INFINITY; /* tap (0, 0): outside for the first row and column */
    for (int i = 0; i < N_LEVELS; i++) {
        if (!use_level(i))
            continue;
        float *y = run_direct(&t, 1);
        for (int64_t oh = 0; oh < 5; oh++)
            for (int64_t ow = 0; ow < 20; ow++) {
                float v = y[oh * 20 + ow];
                if (oh == 0 || ow == 0)
                    assert_true(isnan(v));
                else
                    assert_true(isinf(v) && v > 0);
            }
        free(y);
    }
    free(t.x), free(t.w);
}

/* Every tile variant of every level, forced, on geometries with tails: M not
 * a multiple of the channel block, rows ending in a partial tile and a
 * partial vector, stride 2 with odd padding, dilation, 1-D, 3-D, and
 * pointwise planes. */
static void test_direct_every_variant(void **state)
{
    (void)state;
    skip_without_kernels();
    for (int li = 0; li < N_LEVELS; li++) {
        if (!use_level(li))
            continue;
        int lanes = levels[li] == LD_CONV_DIRECT_AVX512 ? 16 : 8;
        int count = ld_conv_direct_variant_count();
        assert_true(count >= 5);
        for (int v = 0; v < count; v++) {
            ld_conv_direct_force_variant(v);
            for (int shape = 0; shape < 6; shape++) {
                /* nd, in (d, h, w), k, s (innermost), d (innermost), pads */
                int nd = shape == 3 ? 1 : shape == 4 ? 3 : 2;
                int64_t wide = 2 * 6 * lanes + 3; /* two of the widest tiles and a bit */
                int64_t in[3], k[3], st[3], dl[3], pb[3], pe[3];
                for (int i = 0; i < 3; i++)
                    in[i] = 3, k[i] = 1, st[i] = 1, dl[i] = 1, pb[i] = 0, pe[i] = 0;
                int last = nd - 1;
                switch (shape) {
                case 0: /* 3x3, pad 1, a wide row */
                    in[last] = wide, k[0] = k[1] = 3, pb[0] = pb[1] = pe[0] = pe[1] = 1;
                    break;
                case 1: /* 3x3 stride 2, odd left pad, rows of both parities */
                    in[0] = 5, in[last] = wide + 6, k[0] = k[1] = 3, st[0] = st[1] = 2;
                    pb[0] = pb[1] = 1, pe[1] = 2;
                    break;
                case 2: /* narrow row, kernel width 5, dilation 2 */
                    in[last] = 11, k[0] = 2, k[1] = 5, dl[1] = 2, pb[1] = 3, pe[1] = 2;
                    break;
                case 3: /* 1-D, stride 2, dilation 2 */
                    in[0] = wide + 9, k[0] = 4, st[0] = 2, dl[0] = 2, pb[0] = 2, pe[0] = 1;
                    break;
                case 4: /* 3-D */
                    in[0] = 3, in[1] = 4, in[2] = lanes + 5, k[0] = 2, k[1] = 2, k[2] = 3;
                    pb[2] = 1, pe[2] = 1;
                    break;
                default: /* pointwise, a plane ending in a partial vector */
                    in[0] = 3, in[1] = wide;
                    break;
                }
                conv_case t = {.C = 3 + v % 3};
                assert_true(make_geom(&t.g, nd, in, k, st, dl, pb, pe));
                t.M = 1 + (shape * 7 + v * 5) % 30;
                assert_true(ld_conv_direct_fits(&t.g, t.C, t.M));
                t.x = random_floats(t.C * t.g.in_size);
                t.w = random_floats(t.M * t.C * t.g.k_size);
                t.b = shape % 2 ? random_floats(t.M) : NULL;
                char label[96];
                snprintf(label, sizeof label, "%s variant %d shape %d M %lld",
                         ld_conv_direct_level_name(levels[li]), v, shape, (long long)t.M);
                check_case(&t, label);
                free(t.x), free(t.w), free(t.b);
            }
        }
        ld_conv_direct_force_variant(-1);
    }
}

/* Pointwise convolutions run each span's full tiles in one call, channel
 * blocks outside and tiles inside (conv_direct_body.h), then the span's
 * partial tile: every variant of every level on spans of several full
 * tiles and a rest (C = 2: spans of 256 positions), spans of one or two
 * tiles (C = 300: spans of 24-48 positions), M a block and one over, a
 * plane ending in a partial vector, and one product large enough to run
 * on 2 threads. The same bits as the emulated chain. */
static void test_direct_pointwise_spans(void **state)
{
    (void)state;
    skip_without_kernels();
    static const int64_t Cs[] = {2, 300, 40};
    for (int li = 0; li < N_LEVELS; li++) {
        if (!use_level(li))
            continue;
        for (int v = 0; v < ld_conv_direct_variant_count(); v++) {
            ld_conv_direct_force_variant(v);
            /* with and without asking for the output lines ahead */
            for (size_t i = 0; i < 2 * sizeof Cs / sizeof Cs[0]; i++) {
                size_t ci = i / 2;
                int ahead = (int)(i % 2);
                ld_conv_direct_force_ask_ahead(ahead);
                /* 7 x 131 = 917 positions; the last case 3 x 1399 = 4197
                 * with 40 x 30 channels: 5.0M multiply-adds, threaded */
                bool big = ci == 2;
                int64_t in[3] = {big ? 3 : 7, big ? 1399 : 131, 1}, k[3] = {1, 1, 1};
                int64_t st[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, pb[3] = {0}, pe[3] = {0};
                conv_case t = {.C = Cs[ci], .M = big ? 30 : 13 + (int64_t)(v % 2) * 12};
                assert_true(make_geom(&t.g, 2, in, k, st, dl, pb, pe));
                t.x = random_floats(t.C * t.g.in_size);
                t.w = random_floats(t.M * t.C);
                t.b = (v + ci) % 2 ? random_floats(t.M) : NULL;
                char label[112];
                snprintf(label, sizeof label, "%s pointwise variant %d C %lld M %lld ahead %d",
                         ld_conv_direct_level_name(levels[li]), v, (long long)t.C,
                         (long long)t.M, ahead);
                check_case(&t, label);
                free(t.x), free(t.w), free(t.b);
            }
        }
        ld_conv_direct_force_variant(-1);
    }
}

/* Pointwise products ask for their output lines ahead when the output is
 * past 8 MiB (conv_direct.c): det's 16 -> 32 at 320x320 and 12 -> 96 at
 * 160x160 do, its 4.7 MiB 48 -> 48 at 160x160 does not; forcing overrides. */
static void test_pointwise_ask_ahead_choice(void **state)
{
    (void)state;
    assert_true(ld_conv_direct_pw_asks_ahead(32, 320 * 320));
    assert_true(ld_conv_direct_pw_asks_ahead(96, 160 * 160));
    assert_false(ld_conv_direct_pw_asks_ahead(48, 160 * 160));
    assert_false(ld_conv_direct_pw_asks_ahead(2048, 1024)); /* exactly 8 MiB */
    assert_true(ld_conv_direct_pw_asks_ahead(2048, 1025));
    ld_conv_direct_force_ask_ahead(0);
    assert_false(ld_conv_direct_pw_asks_ahead(32, 320 * 320));
    ld_conv_direct_force_ask_ahead(1);
    assert_true(ld_conv_direct_pw_asks_ahead(1, 1));
    ld_conv_direct_force_ask_ahead(-1);
    assert_false(ld_conv_direct_pw_asks_ahead(1, 1));
}

/* Passes over chunks of input channels (the sums continue through y) and
 * work items of a few tiles, forced small, with every variant of every
 * level: channel counts that leave a short last chunk, rows ending in a
 * partial tile, M not a multiple of the block, with and without bias, 2-D
 * stride 1 and 2, 3-D, and a kernel of more taps than the flat tap loop
 * takes (LD_CD_MAX_TAPS). The same bits as the emulated chain. */
_Static_assert(5 * 14 > LD_CD_MAX_TAPS, "the 5 x 14 kernel must take the nested tap loops");

static void test_direct_blocking(void **state)
{
    (void)state;
    skip_without_kernels();
    static const int64_t chunks[] = {1, 2, 5, 7}, groups[] = {1, 2, 3};
    for (int li = 0; li < N_LEVELS; li++) {
        if (!use_level(li))
            continue;
        int lanes = levels[li] == LD_CONV_DIRECT_AVX512 ? 16 : 8;
        for (int v = 0; v < ld_conv_direct_variant_count(); v++) {
            ld_conv_direct_force_variant(v);
            for (int shape = 0; shape < 4; shape++) {
                int nd = shape == 2 ? 3 : 2;
                int64_t in[3] = {4, 3 * 6 * lanes + 5, 1}, k[3] = {3, 3, 1}, st[3] = {1, 1, 1};
                int64_t dl[3] = {1, 1, 1}, pb[3] = {1, 1, 0}, pe[3] = {1, 1, 0};
                if (shape == 1)
                    st[0] = st[1] = 2, pe[1] = 2;
                if (shape == 2) {
                    in[0] = 3, in[1] = 3, in[2] = 2 * lanes + 3;
                    k[0] = 2, k[1] = 2, k[2] = 3, pb[0] = pe[0] = 0;
                    pb[1] = pe[1] = 0, pb[2] = pe[2] = 1;
                }
                if (shape == 3) { /* 5 x 14 = 70 taps: more than the flat tap loop takes */
                    in[0] = 6, in[1] = 2 * lanes + 20, k[0] = 5, k[1] = 14;
                    pb[0] = 2, pe[0] = 1, pb[1] = 6, pe[1] = 7;
                }
                conv_case t = {.C = 11 + v % 3, .M = 1 + (shape * 11 + v * 7) % 27};
                assert_true(make_geom(&t.g, nd, in, k, st, dl, pb, pe));
                assert_true(ld_conv_direct_fits(&t.g, t.C, t.M));
                t.x = random_floats(t.C * t.g.in_size);
                t.w = random_floats(t.M * t.C * t.g.k_size);
                t.b = (shape + v) % 2 ? random_floats(t.M) : NULL;
                for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
                    ld_conv_direct_force_blocking(chunks[ci], groups[ci % 3]);
                    char label[128];
                    snprintf(label, sizeof label, "%s variant %d shape %d C %lld M %lld chunk "
                             "%lld group %lld", ld_conv_direct_level_name(levels[li]), v, shape,
                             (long long)t.C, (long long)t.M, (long long)chunks[ci],
                             (long long)groups[ci % 3]);
                    check_case(&t, label);
                }
                ld_conv_direct_force_blocking(0, 0);
                free(t.x), free(t.w), free(t.b);
            }
        }
        ld_conv_direct_force_variant(-1);
    }
}

/* ld_gemm_direct_f32 (ConvTranspose's product), A plain and transposed,
 * with row strides wider than the rows (N = 87: a last vector of 7 of 8
 * or 16 lanes, whose masked store must not reach the gap): the FMA chain over k from +0, bit
 * for bit, on 1 and 2 threads, with every variant of every level. */
static void test_gemm_direct(void **state)
{
    (void)state;
    skip_without_kernels();
    const int64_t M = 29, N = 87, K = 19, lda_pad = 3, ldb = N + 5, ldc = N + 2;
    float *A = random_floats(M * (K + lda_pad) + K * (M + lda_pad));
    float *B = random_floats(K * ldb);
    float *C = malloc((size_t)(M * ldc) * sizeof *C), *want = malloc((size_t)(M * N) * sizeof *want);
    assert_true(C && want);
    for (int trans = 0; trans < 2; trans++) {
        int64_t lda = trans ? M + lda_pad : K + lda_pad;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                float acc = 0.0f;
                for (int64_t k = 0; k < K; k++)
                    acc = fmaf(trans ? A[k * lda + i] : A[i * lda + k], B[k * ldb + j], acc);
                want[i * N + j] = acc;
            }
        for (int li = 0; li < N_LEVELS; li++) {
            if (!use_level(li))
                continue;
            for (int v = -1; v < ld_conv_direct_variant_count(); v++) {
                ld_conv_direct_force_variant(v);
                for (int threads = 1; threads <= 2; threads++) {
                    size_t floats = ld_gemm_direct_scratch_floats(M, K, threads);
                    float *scratch = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
                    assert_non_null(scratch);
                    for (int64_t i = 0; i < M * ldc; i++)
                        C[i] = -7.0f; /* the gaps between rows must stay */
                    ld_gemm_direct_f32(trans, M, N, K, A, lda, B, ldb, C, ldc, scratch, threads);
                    for (int64_t i = 0; i < M; i++) {
                        assert_memory_equal(C + i * ldc, want + i * N, (size_t)N * sizeof(float));
                        for (int64_t j = N; j < ldc; j++)
                            assert_true(C[i * ldc + j] == -7.0f);
                    }
                    free(scratch);
                }
            }
            ld_conv_direct_force_variant(-1);
        }
    }
    free(A), free(B), free(C), free(want);
}

/* ld_interleave2_add_f32: y[2i] = bias + a[i], y[2i + 1] = bias + b[i],
 * every length from 0 to 3 vectors and a bit, nothing written past 2n. */
static void test_interleave2(void **state)
{
    (void)state;
    skip_without_kernels();
    float *a = random_floats(70), *b = random_floats(70), y[142];
    for (int li = 0; li < N_LEVELS; li++) {
        if (!use_level(li))
            continue;
        for (int64_t n = 0; n <= 70; n++) {
            for (int i = 0; i < 142; i++)
                y[i] = 99.0f;
            ld_interleave2_add_f32(a, b, 0.375f, y, n);
            for (int64_t i = 0; i < n; i++) {
                assert_true(y[2 * i] == 0.375f + a[i]);
                assert_true(y[2 * i + 1] == 0.375f + b[i]);
            }
            for (int64_t i = 2 * n; i < 142; i++)
                assert_true(y[i] == 99.0f);
        }
    }
    free(a), free(b);
}

/* The level switch: unsupported levels are refused, NONE turns the kernels
 * off (conv.c then takes im2col), AUTO restores detection. */
static void test_direct_levels(void **state)
{
    (void)state;
    ld_conv_direct_level detected = ld_conv_direct_level_active();
    assert_true(ld_conv_direct_level_supported(detected));
    assert_true(ld_conv_direct_force_level(LD_CONV_DIRECT_NONE));
    assert_false(ld_conv_direct_available());
    int64_t in[2] = {9, 40}, k[2] = {3, 3}, s[2] = {1, 1}, d[2] = {1, 1}, p[2] = {1, 1};
    ld_window_geom g;
    assert_true(make_geom(&g, 2, in, k, s, d, p, p));
    assert_false(ld_conv_direct_preferred(&g, 4, 4));
    for (int i = 0; i < N_LEVELS; i++) {
        bool ok = ld_conv_direct_force_level(levels[i]);
        assert_int_equal(ok, ld_conv_direct_level_supported(levels[i]));
        if (ok) {
            assert_int_equal(ld_conv_direct_level_active(), levels[i]);
            assert_true(ld_conv_direct_available());
        }
    }
    assert_true(ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO));
    assert_int_equal(ld_conv_direct_level_active(), detected);
}

/* Limits: what fits and what does not. */
/* Per-worker buffers (rings of input rows, pointwise span buffers) sit at
 * least their own size plus 64 KiB apart in the scratch, in whole 64-byte
 * lines (a core's prefetches past its buffer must not reach the next
 * worker's, conv_direct.c), and the scratch has room for every worker's. */
static void test_worker_buffers_apart(void **state)
{
    (void)state;
    for (size_t floats = 1; floats < 3000000; floats = floats * 7 + 5) {
        size_t stride = ld_conv_direct_worker_stride(floats);
        assert_true(stride >= 2 * floats + 16384);
        assert_int_equal(stride % 16, 0);
    }
    if (!ld_conv_direct_available())
        return;
    /* 96 -> 24, 3x3 at 160x160 (det's largest layer) and a pointwise one */
    for (int k = 1; k <= 3; k += 2) {
        ld_window_geom g = {.nd = 2};
        for (int d = 0; d < 3; d++)
            g.in[d] = g.out[d] = g.k[d] = g.s[d] = g.d[d] = 1;
        g.in[1] = g.in[2] = g.out[1] = g.out[2] = 160;
        g.k[1] = g.k[2] = k;
        g.pb[1] = g.pb[2] = g.pe[1] = g.pe[2] = k / 2;
        ld_window_geom_finish(&g);
        size_t one = ld_conv_direct_scratch_floats(&g, 96, 24, 1);
        size_t two = ld_conv_direct_scratch_floats(&g, 96, 24, 2);
        /* the second worker's buffer and its gap: more than 64 KiB */
        assert_true(two - one >= 16384 + 2 * (size_t)96 * 160);
    }
}

static void test_direct_fits(void **state)
{
    (void)state;
    int64_t in[2] = {9, 40}, d[2] = {1, 1}, p[2] = {0, 0};
    ld_window_geom g;
    int64_t k3[2] = {3, 3}, s2[2] = {1, 2}, s3[2] = {1, 3}, k17[2] = {1, 17};
    assert_true(make_geom(&g, 2, in, k3, s2, d, p, p));
    assert_true(ld_conv_direct_fits(&g, 4, 4));
    assert_false(ld_conv_direct_fits(&g, 0, 4));
    assert_true(make_geom(&g, 2, in, k3, s3, d, p, p));
    assert_false(ld_conv_direct_fits(&g, 4, 4)); /* innermost stride 3 */
    assert_true(make_geom(&g, 2, in, k17, s2, d, p, p));
    assert_false(ld_conv_direct_fits(&g, 4, 4)); /* kernel width 17 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_fits),
        cmocka_unit_test(test_worker_buffers_apart),
        cmocka_unit_test_teardown(test_direct_levels, restore_auto),
        cmocka_unit_test_teardown(test_direct_padding_nan, restore_auto),
        cmocka_unit_test_teardown(test_interleave2, restore_auto),
        cmocka_unit_test_teardown(test_gemm_direct, restore_auto),
        cmocka_unit_test_teardown(test_direct_every_variant, restore_auto),
        cmocka_unit_test_teardown(test_direct_pointwise_spans, restore_auto),
        cmocka_unit_test_teardown(test_pointwise_ask_ahead_choice, restore_auto),
        cmocka_unit_test_teardown(test_direct_blocking, restore_auto),
        cmocka_unit_test_teardown(test_direct_model_shapes, restore_auto),
        cmocka_unit_test_teardown(test_direct_random, restore_auto),
    };
    return cmocka_run_group_tests_name("conv_fast", tests, NULL, NULL);
}
