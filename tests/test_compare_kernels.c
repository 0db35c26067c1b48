/* Unit tests of the comparator's vector kernels (compare/metrics_fast*.c)
 * block by block, on every level the CPU has (AVX-512, AVX2): each against
 * the portable kernel (cmp_block_double) on blocks of every length near the
 * vector widths, the AVX2 kernel's chunks and the block size, with zeros,
 * subnormals, exact matches, values beyond fp16 and failing elements in
 * every lane; blocks whose chunks hold no value below 2^emin, or one
 * zero or tiny reference; blocks holding a NaN or an infinity in any lane
 * refused with nothing counted; the verdict's screen at atol's edges and
 * run only in the chunks with an abs error above atol; the
 * recount of only the chunks holding small values; and the interval feeding (the kept pairs,
 * in order, and the per-interval counts) against qsel_key_of element by element, with
 * every one of the 256 patterns of 8 lanes inside or outside occurring. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/metrics_internal.h"
#include "tests/support/compare_testing.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double urand(void) { return (double)(rnd() >> 11) * 0x1p-53; }

/* The parameters ld_compare_tensors sets for float32 tensors judged at fp16. */
static cmp_params fp16_params(ld_tol_mode mode, double tol, bool shifted)
{
    cmp_params p;
    memset(&p, 0, sizeof p);
    p.atol = p.rtol = tol;
    p.mode = mode;
    p.want_ulp = true;
    p.ulp_digits = 11;
    p.ulp_emin = -14;
    p.prec_min_normal = 0x1p-14;
    p.prec_max = 65504.0;
    p.ref_min_normal = p.test_min_normal = FLT_MIN;
    p.ref_shift = shifted ? 1.5 : 0.0;
    p.test_shift = shifted ? 1.25 : 0.0;
    p.kernel_shifted = shifted;
    return p;
}

/* The rtol the blocks are judged with, for the pairs at its edge. */
static double edge_rtol = 4.8828125e-3;

/* One pair of every kind the kernels treat apart, chosen at random. */
static void random_pair(float *r, float *t)
{
    float x = (float)((urand() - 0.5) * 8.0);
    switch (rnd() % 11) {
    case 10: { /* |t - r| within a step of rtol |r| where that is subnormal: the
                  float32 screen's bound rounds there (metrics_fast_avx2.c) */
        *r = (float)((1.0 + urand()) * 0x1p-126); /* spacing 2^-149 up to 2^-125 */
        double steps = floor(edge_rtol * *r / 0x1p-149) + (double)(rnd() % 3) - 1.0;
        *t = *r + (float)(fmax(steps, 0.0) * 0x1p-149);
        break;
    }
    case 0: *r = *t = x; break;                                         /* exact match */
    case 1: *r = 0.0f; *t = (float)(urand() * 1e-3); break;             /* zero reference */
    case 2: *r = (float)(urand() * 1e-39); *t = *r * 2.0f; break;       /* subnormal */
    case 3: *r = (float)(urand() * 1e-5); *t = *r * 1.001f; break;      /* below fp16's normal */
    case 4: *r = 70000.0f + x; *t = *r; break;                          /* beyond fp16 */
    case 5: *r = x; *t = 0.0f; break;                                   /* underflow */
    case 6: *r = x; *t = x + (float)(urand() * 0.1); break;             /* fails */
    case 7: *r = x; *t = -x; break;
    default: *r = x; *t = x * (float)(1.0 + (urand() - 0.5) * 1e-3); break; /* close */
    }
}

/* Compares two accs: counts and extremes exactly, sums closely. */
static void assert_same_acc(const cmp_acc *a, const cmp_acc *b, const char *label)
{
    const cmp_side_acc *sa[2] = {&a->ref, &a->test}, *sb[2] = {&b->ref, &b->test};
    for (int s = 0; s < 2; s++) {
        if (sa[s]->nan != sb[s]->nan || sa[s]->pos_inf != sb[s]->pos_inf ||
            sa[s]->neg_inf != sb[s]->neg_inf || sa[s]->subnormal != sb[s]->subnormal ||
            sa[s]->zero != sb[s]->zero || sa[s]->finite != sb[s]->finite)
            fail_msg("%s: side %d counts differ", label, s);
        cmpt_assert_exact(sa[s]->min, sb[s]->min);
        cmpt_assert_exact(sa[s]->max, sb[s]->max);
        cmpt_assert_close(sa[s]->s1, sb[s]->s1, 1e-12);
        cmpt_assert_close(sa[s]->s2, sb[s]->s2, 1e-12);
    }
    for (int k = 0; k < CMP_MEASURES; k++) {
        cmpt_assert_close(a->sum[k], b->sum[k], 1e-12);
        cmpt_assert_exact(a->max[k], b->max[k]);
        if (a->max_index[k] != b->max_index[k] || a->zero_err[k] != b->zero_err[k] ||
            a->inf_err[k] != b->inf_err[k])
            fail_msg("%s: measure %d: max index %lld / %lld, zeros %lld / %lld", label, k,
                     (long long)a->max_index[k], (long long)b->max_index[k],
                     (long long)a->zero_err[k], (long long)b->zero_err[k]);
    }
    if (a->rel_tiny_ref != b->rel_tiny_ref || a->would_overflow != b->would_overflow ||
        a->underflow_zero != b->underflow_zero || a->n_fail != b->n_fail ||
        a->first_fail != b->first_fail || a->special_mismatch != b->special_mismatch)
        fail_msg("%s: counts differ: tiny %lld/%lld over %lld/%lld under %lld/%lld fail "
                 "%lld/%lld first %lld/%lld", label, (long long)a->rel_tiny_ref,
                 (long long)b->rel_tiny_ref, (long long)a->would_overflow,
                 (long long)b->would_overflow, (long long)a->underflow_zero,
                 (long long)b->underflow_zero, (long long)a->n_fail, (long long)b->n_fail,
                 (long long)a->first_fail, (long long)b->first_fail);
    cmpt_assert_close(a->srr + a->srr_lo, b->srr + b->srr_lo, 1e-12);
    cmpt_assert_close(a->stt + a->stt_lo, b->stt + b->stt_lo, 1e-12);
    cmpt_assert_close(a->sdd + a->sdd_lo, b->sdd + b->sdd_lo, 1e-12);
    /* the vector kernels derive Σrt: within a few ulps of its terms' scale */
    if (fabs((a->srt + a->srt_lo) - (b->srt + b->srt_lo)) > 1e-13 * (a->rt_scale + 1e-300))
        fail_msg("%s: Σrt %.17g, want %.17g (scale %g)", label, a->srt + a->srt_lo,
                 b->srt + b->srt_lo, a->rt_scale);
}

enum { MAXLEN = CMP_BLOCK };
static float r_f[MAXLEN + 16], t_f[MAXLEN + 16];
static double r_d[MAXLEN], t_d[MAXLEN], fast_e[CMP_MEASURES][MAXLEN], port_e[CMP_MEASURES][MAXLEN];

/* ---- store mode against the portable kernel ---- */

/* r_f/t_f (and the same values in r_d/t_d) through the vector kernel and the
 * portable one at element index `base`: every per-element measure equal to
 * the bit, and the same accumulators. */
static void check_block_against_portable(const cmp_params *p, int m, int64_t base,
                                         const char *label)
{
    cmp_acc fast, port;
    cmp_acc_init(&fast);
    cmp_acc_init(&port);
    double *out[CMP_MEASURES] = {fast_e[0], fast_e[1], fast_e[2]};
    if (!cmp_block_float_fast(p, r_f, t_f, m, base, &fast, out, NULL, NULL))
        fail_msg("%s: a finite block refused", label);
    cmp_block_double(p, r_d, t_d, NULL, m, base, &port, port_e[0], port_e[1], port_e[2]);
    for (int k = 0; k < CMP_MEASURES; k++)
        for (int i = 0; i < m; i++)
            if (memcmp(&fast_e[k][i], &port_e[k][i], sizeof(double)) != 0)
                fail_msg("%s: measure %d element %d: %.17g, want %.17g", label, k, i,
                         fast_e[k][i], port_e[k][i]);
    assert_same_acc(&fast, &port, label);
}

static void blocks_body(void)
{
    if (!cmp_fast_available())
        return; /* the portable kernel only: nothing to compare it with */
    int lengths[120], n_len = 0;
    for (int m = 1; m <= 40; m++)
        lengths[n_len++] = m;
    for (int m = 496; m <= 530; m++) /* around the AVX2 kernel's chunk of 512 */
        lengths[n_len++] = m;
    int more[] = {1023, 1024, 1025, 1535, 1536, 2047, 4095, MAXLEN};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++)
        lengths[n_len++] = more[i];
    /* atol, rtol: the fp16 default, zero, large, and rtol alone */
    const double tols[4][2] = {{4.8828125e-3, 4.8828125e-3}, {0, 0}, {1e-1, 1e-1},
                               {0, 4.8828125e-3}};
    for (int li = 0; li < n_len; li++)
        for (int mode = 0; mode < 2; mode++)
            for (int shifted = 0; shifted < 2; shifted++) {
                int m = lengths[li];
                ld_tol_mode tm = mode ? LD_TOL_ALLCLOSE : LD_TOL_POLYGRAPHY;
                const double *tol = tols[(li + mode + shifted) % 4];
                cmp_params p = fp16_params(tm, tol[0], shifted);
                p.rtol = edge_rtol = tol[1];
                for (int i = 0; i < m; i++) {
                    random_pair(&r_f[i], &t_f[i]);
                    r_d[i] = r_f[i];
                    t_d[i] = t_f[i];
                }
                char label[96];
                snprintf(label, sizeof label, "%s, %d elements, mode %d, shifted %d",
                         cmpt_kernel_name(), m, mode, shifted);
                check_block_against_portable(&p, m, 1000, label);
            }
}

static void test_blocks_against_portable(void **state)
{
    (void)state;
    cmpt_each_kernel(blocks_body);
}

/* The AVX2 kernel divides by |r| without testing it for 0, and takes the
 * ulp exponent without clamping it to emin, in a chunk of 512 when every
 * |r| and |t| so far in the block is at least 2^emin (metrics_fast_avx2.c,
 * loop_errors): blocks without such values, and with one zero or tiny
 * reference first in various chunks and lanes, element by element against
 * the portable kernel (a zero taken by the untested division gives +inf
 * instead of |t| / 2.22e-16; an unclamped exponent a larger ulp error). */
static void zero_chunks_body(void)
{
    if (!cmp_fast_available())
        return;
    const int lengths[] = {512, 1024, 1536, MAXLEN};
    const int at[] = {-1, 0, 7, 511, 512, 515, 1030, 1535, MAXLEN - 1};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (size_t ai = 0; ai < sizeof at / sizeof at[0]; ai++)
            for (int shifted = 0; shifted < 2; shifted++) {
                int m = lengths[li], z = at[ai];
                if (z >= m)
                    continue;
                cmp_params p = fp16_params(LD_TOL_POLYGRAPHY, 4.8828125e-3, shifted);
                edge_rtol = p.rtol;
                for (int i = 0; i < m; i++) {
                    do /* any kind but those below fp16's 2^-14 */
                        random_pair(&r_f[i], &t_f[i]);
                    while (fabsf(r_f[i]) < 0x1p-14f || fabsf(t_f[i]) < 0x1p-14f);
                    r_d[i] = r_f[i];
                    t_d[i] = t_f[i];
                }
                if (z >= 0) { /* a zero, a subnormal or a value just below 2^-14 */
                    const float low[4] = {0.0f, -0.0f, 0x1p-140f, -0x1.fffffep-15f};
                    r_f[z] = low[(ai + (size_t)shifted) % 4];
                    t_f[z] = (float)(urand() * 1e-3);
                    r_d[z] = r_f[z];
                    t_d[z] = t_f[z];
                }
                char label[96];
                snprintf(label, sizeof label, "%s, %d elements, zero at %d, shifted %d",
                         cmpt_kernel_name(), m, z, shifted);
                check_block_against_portable(&p, m, 0, label);
            }
}

static void test_zero_chunks(void **state)
{
    (void)state;
    cmpt_each_kernel(zero_chunks_body);
}

/* One element at the screen's edge in each lane of blocks otherwise equal:
 * |t - r| one step of 2^-149 about rtol |r| where that is subnormal, so that
 * the float32 bound rounds onto |t - r| (metrics_fast_avx2.c, screen_failures:
 * why it compares with >=). Nothing else in the block fails, so a missed
 * element would go uncounted. */
static void screen_edges_body(void)
{
    if (!cmp_fast_available())
        return;
    for (int mode = 0; mode < 2; mode++)
        for (int m = 16; m <= 40; m += 24)
            for (int at = 0; at < m; at++)
                for (int trial = 0; trial < 24; trial++) {
                    cmp_params p = fp16_params(mode ? LD_TOL_ALLCLOSE : LD_TOL_POLYGRAPHY, 0,
                                               false);
                    p.rtol = edge_rtol = trial % 2 ? 4.8828125e-3 : 1e-3;
                    for (int i = 0; i < m; i++) {
                        r_f[i] = t_f[i] = (float)(urand() + 0.5);
                        r_d[i] = t_d[i] = r_f[i];
                    }
                    r_f[at] = (float)((1.0 + urand()) * 0x1p-126);
                    double steps = ceil(edge_rtol * r_f[at] / 0x1p-149) + (double)(trial % 3) - 1;
                    t_f[at] = r_f[at] + (float)(steps * 0x1p-149);
                    r_d[at] = r_f[at];
                    t_d[at] = t_f[at];
                    cmp_acc fast, port;
                    cmp_acc_init(&fast);
                    cmp_acc_init(&port);
                    double *out[CMP_MEASURES] = {fast_e[0], fast_e[1], fast_e[2]};
                    cmp_block_float_fast(&p, r_f, t_f, m, 0, &fast, out, NULL, NULL);
                    cmp_block_double(&p, r_d, t_d, NULL, m, 0, &port, port_e[0], port_e[1],
                                     port_e[2]);
                    if (fast.n_fail != port.n_fail || fast.first_fail != port.first_fail)
                        fail_msg("%s: mode %d, r %a, t %a at %d of %d: %lld failing, want %lld",
                                 cmpt_kernel_name(), mode, (double)r_f[at], (double)t_f[at], at,
                                 m, (long long)fast.n_fail, (long long)port.n_fail);
                }
}

static void test_screen_edges(void **state)
{
    (void)state;
    cmpt_each_kernel(screen_edges_body);
}

/* The exact recount's rel half at its edge (metrics_fast_avx2_exact.c,
 * cmp_avx2_count_failures decides fl(|t - r| / |r|) > rtol by products and
 * divides only near the edge): rtol set to the double quotient of one pair,
 * or the double on either side of it, so that pair sits on or one step
 * from the edge; a few other lanes (each vector position) hold the same
 * pair, the rest pairs far from it, with r = 0 (the epsilon) in some
 * trials. atol 0, and atol just under |t - r|. Every kernel against the
 * portable judgement, count and first failing index. */
static void rel_edges_body(void)
{
    if (!cmp_fast_available())
        return;
    for (int trial = 0; trial < 600; trial++) {
        int m = 16 + 8 * (trial % 4);
        cmp_params p = fp16_params(LD_TOL_POLYGRAPHY, 0.0, false);
        for (int i = 0; i < m; i++) {
            r_f[i] = (float)((urand() + 0.5) * (rnd() % 2 ? 1 : -1) * ldexp(1.0, (int)(rnd() % 40) - 20));
            t_f[i] = r_f[i] * (float)(1.0 + (urand() - 0.5) * 1e-2);
        }
        int at = (int)(rnd() % (unsigned)m);
        if (trial % 5 == 0)
            r_f[at] = 0.0f; /* the quotient is |t| / epsilon */
        if (t_f[at] == r_f[at])
            t_f[at] = nextafterf(r_f[at], INFINITY);
        for (int k = at % 4; k < m; k += 7) /* the same pair in other lanes */
            if (rnd() % 2) {
                r_f[k] = r_f[at];
                t_f[k] = t_f[at];
            }
        double a = fabs((double)t_f[at] - (double)r_f[at]);
        double d = r_f[at] == 0.0f ? LD_COMPARE_REL_EPSILON : fabs((double)r_f[at]);
        double q = a / d;
        int side = trial % 3;
        p.rtol = side == 0 ? q : side == 1 ? nextafter(q, 0.0) : nextafter(q, INFINITY);
        if (trial % 7 == 3)
            p.atol = nextafter(a, 0.0);
        for (int i = 0; i < m; i++) {
            r_d[i] = r_f[i];
            t_d[i] = t_f[i];
        }
        cmp_acc fast, port;
        cmp_acc_init(&fast);
        cmp_acc_init(&port);
        double *out[CMP_MEASURES] = {fast_e[0], fast_e[1], fast_e[2]};
        cmp_block_float_fast(&p, r_f, t_f, m, 0, &fast, out, NULL, NULL);
        cmp_block_double(&p, r_d, t_d, NULL, m, 0, &port, port_e[0], port_e[1], port_e[2]);
        if (fast.n_fail != port.n_fail || fast.first_fail != port.first_fail)
            fail_msg("%s: trial %d, r %a, t %a, rtol %a: %lld failing (first %lld), want %lld "
                     "(first %lld)", cmpt_kernel_name(), trial, (double)r_f[at], (double)t_f[at],
                     p.rtol, (long long)fast.n_fail, (long long)fast.first_fail,
                     (long long)port.n_fail, (long long)port.first_fail);
    }
}

static void test_rel_edges(void **state)
{
    (void)state;
    cmpt_each_kernel(rel_edges_body);
}

/* The Polygraphy screen's atol half (af > ta, which the AVX2 kernel tests
 * as af >= the float above ta, in one compare with the rtol half): rtol 0,
 * so that an element fails exactly when |t - r| > atol, and |t - r| one,
 * two or no steps of float32 about atol and about the screened bound, for
 * atol 0 (the bound's float above is the smallest subnormal), fp16's, one
 * whose bound is FLT_MAX (its float above is +inf: only an infinite
 * |t - r| passes it) and one near it (|t - r| overflowing float32). Every
 * lane, in blocks otherwise equal. */
static void screen_atol_body(void)
{
    if (!cmp_fast_available())
        return;
    const double atols[] = {0.0, 4.8828125e-3, 1e-40, 1e300, 1e38};
    for (size_t ai = 0; ai < sizeof atols / sizeof atols[0]; ai++)
        for (int at = 0; at < 24; at++)
            for (int step = -2; step <= 2; step++)
                for (int about = 0; about < 2; about++) {
                    cmp_params p = fp16_params(LD_TOL_POLYGRAPHY, atols[ai], false);
                    p.rtol = edge_rtol = 0.0;
                    int m = 24;
                    for (int i = 0; i < m; i++) {
                        r_f[i] = t_f[i] = (float)(urand() + 0.5);
                        r_d[i] = t_d[i] = r_f[i];
                    }
                    /* |t - r| near atol (or the bound), reached from r = 0 or,
                       for atol near FLT_MAX, from r = -t (and once from
                       -FLT_MAX to FLT_MAX: t - r overflows float32) */
                    float target = about ? cmp_screen_bound(atols[ai])
                                         : (float)fmin(atols[ai], FLT_MAX);
                    float d = target;
                    for (int k = 0; k < (step < 0 ? -step : step); k++)
                        d = nextafterf(d, step < 0 ? 0.0f : INFINITY);
                    if (isinf(d))
                        d = FLT_MAX;
                    if (atols[ai] >= 1e38 && step == 2) { /* float32 t - r is +inf */
                        r_f[at] = -FLT_MAX;
                        t_f[at] = FLT_MAX;
                    } else if (atols[ai] >= 1e38) {
                        r_f[at] = -d * 0.5f;
                        t_f[at] = d * 0.5f;
                    } else {
                        r_f[at] = 0.0f;
                        t_f[at] = d;
                    }
                    r_d[at] = r_f[at];
                    t_d[at] = t_f[at];
                    cmp_acc fast, port;
                    cmp_acc_init(&fast);
                    cmp_acc_init(&port);
                    double *out[CMP_MEASURES] = {fast_e[0], fast_e[1], fast_e[2]};
                    cmp_block_float_fast(&p, r_f, t_f, m, 0, &fast, out, NULL, NULL);
                    cmp_block_double(&p, r_d, t_d, NULL, m, 0, &port, port_e[0], port_e[1],
                                     port_e[2]);
                    if (fast.n_fail != port.n_fail || fast.first_fail != port.first_fail)
                        fail_msg("%s: atol %g, r %a, t %a at %d: %lld failing, want %lld",
                                 cmpt_kernel_name(), atols[ai], (double)r_f[at],
                                 (double)t_f[at], at, (long long)fast.n_fail,
                                 (long long)port.n_fail);
                }
}

static void test_screen_atol_edges(void **state)
{
    (void)state;
    cmpt_each_kernel(screen_atol_body);
}

/* The AVX2 kernel screens the verdict only in chunks of 512 holding an abs
 * error above atol (metrics_fast_avx2.c, loop_screen: no other element can
 * fail in either mode), in the float32 loop when the chunk before held one:
 * blocks of errors within atol/2 with, in one or two chunks (the first, a
 * middle one, the last, a short last one, two in a row), elements
 * that fail (|t - r| above atol, or 0 against a nonzero t), that exceed atol
 * but pass (a large |r|: rel within rtol, and within atol + rtol |r|), or
 * sit at exactly atol (pass: not above it), at chunk edges and inside,
 * against the portable kernel (a skipped chunk's failure would go
 * uncounted, a wrong chunk's first_fail index differ, the block's
 * largest error be lost). */
static void screen_chunks_body(void)
{
    if (!cmp_fast_available())
        return;
    const int lengths[] = {MAXLEN, 1040, 1536};
    const double atol = 4.8828125e-3; /* 5 * 2^-10: t = r + atol is exact for r = 1.5 */
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (int mode = 0; mode < 2; mode++)
            for (int kind = 0; kind < 5; kind++)
                for (int where = 0; where < 7; where++) {
                    int m = lengths[li];
                    cmp_params p = fp16_params(mode ? LD_TOL_ALLCLOSE : LD_TOL_POLYGRAPHY, atol,
                                               where % 2 == 1);
                    p.rtol = edge_rtol = atol;
                    for (int i = 0; i < m; i++) {
                        r_f[i] = (float)(urand() + 0.5);
                        t_f[i] = r_f[i] + (float)((urand() - 0.5) * atol);
                    }
                    /* the chunk(s) and place: first element, last of a chunk,
                       first of the next, inside the last (short) chunk */
                    int last = m - 1, mid = (m / 1024) * 512;
                    const int at[7][2] = {{0, -1}, {511, -1}, {512, 700}, {mid + 3, last},
                                          {last, -1}, {100, mid + 511}, {100, 600}};
                    for (int e = 0; e < 2; e++) {
                        int i = at[where][e];
                        if (i < 0 || i >= m)
                            continue;
                        /* where 6: chunks 0 and 1, the second's kind three on
                           (one above atol that passes, then one that fails) */
                        switch ((kind + e * (where == 6 ? 3 : 1)) % 5) {
                        case 0: /* fails: abs and rel about 2.7 atol */
                            r_f[i] = 1.5f;
                            t_f[i] = 1.5f + (float)(4 * atol);
                            break;
                        case 1: /* fails: a zero reference */
                            r_f[i] = 0.0f;
                            t_f[i] = (float)(2 * atol);
                            break;
                        case 2: /* abs above atol, passes: rel 2^-10 */
                            r_f[i] = 1024.0f;
                            t_f[i] = 1025.0f;
                            break;
                        case 3: /* exactly atol, rel above rtol: passes */
                            r_f[i] = 0.75f;
                            t_f[i] = 0.75f + (float)atol;
                            break;
                        default: /* just above atol, rel above rtol: fails */
                            r_f[i] = 0.75f;
                            t_f[i] = nextafterf(0.75f + (float)atol, INFINITY);
                            break;
                        }
                    }
                    for (int i = 0; i < m; i++) {
                        r_d[i] = r_f[i];
                        t_d[i] = t_f[i];
                    }
                    char label[112];
                    snprintf(label, sizeof label, "%s, %d elements, mode %d, kind %d, where %d",
                             cmpt_kernel_name(), m, mode, kind, where);
                    check_block_against_portable(&p, m, 77, label);
                }
}

static void test_screen_chunks(void **state)
{
    (void)state;
    cmpt_each_kernel(screen_chunks_body);
}

/* The AVX2 kernel reports each chunk's smallest |r| or |t|, and only the
 * chunks holding a zero, a subnormal, a reference below fp16's 2^-14 or an
 * underflow are recounted (metrics_fast.c, commit): blocks of various
 * lengths (a short last chunk too) with such values of each kind at chunk
 * edges and inside, in one chunk or several, with and without a value
 * beyond fp16 (which recounts the whole block), against the portable
 * kernel; the other values all normal and above 2^-14. */
static void small_chunks_body(void)
{
    if (!cmp_fast_available())
        return;
    const int lengths[] = {48, 512, 1040, 2048, MAXLEN};
    const int at[] = {0, 1, 15, 16, 511, 512, 513, 1023, 1024, 1039, 1535, 2047, 3000, 4095};
    const int n_at = (int)(sizeof at / sizeof at[0]);
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (int kind = 0; kind < 6; kind++)
            for (int pattern = 0; pattern < 4; pattern++)
                for (int over = 0; over < 2; over++) {
                    int m = lengths[li];
                    cmp_params p = fp16_params(LD_TOL_POLYGRAPHY, 4.8828125e-3, pattern & 1);
                    edge_rtol = p.rtol;
                    for (int i = 0; i < m; i++) {
                        do
                            random_pair(&r_f[i], &t_f[i]);
                        while (fabsf(r_f[i]) < 0x1p-14f || fabsf(t_f[i]) < 0x1p-14f ||
                               fabsf(r_f[i]) > 65504.0f);
                    }
                    /* pattern 0, 1: one position each; 2, 3: every position */
                    for (int a = 0; a < n_at; a++) {
                        int z = at[a];
                        if (z >= m || (pattern < 2 && a != (kind + (int)li) % n_at))
                            continue;
                        float x = (float)(urand() + 0.5);
                        switch ((kind + a) % 6) {
                        case 0: r_f[z] = 0.0f; t_f[z] = x * 1e-3f; break;     /* zero ref */
                        case 1: r_f[z] = x; t_f[z] = 0.0f; break;             /* underflow */
                        case 2: r_f[z] = x; t_f[z] = x * 1e-39f; break;       /* subnormal t */
                        case 3: r_f[z] = x * 1e-39f; t_f[z] = x; break;       /* subnormal r */
                        case 4: r_f[z] = x * 1e-5f; t_f[z] = x * 1.1e-5f; break; /* tiny ref */
                        default: r_f[z] = -0.0f; t_f[z] = 0.0f; break;        /* both zero */
                        }
                    }
                    if (over)
                        r_f[m / 3] = t_f[m / 3] = 70000.0f;
                    for (int i = 0; i < m; i++) {
                        r_d[i] = r_f[i];
                        t_d[i] = t_f[i];
                    }
                    char label[96];
                    snprintf(label, sizeof label, "%s, %d elements, kind %d, pattern %d, over %d",
                             cmpt_kernel_name(), m, kind, pattern, over);
                    check_block_against_portable(&p, m, 0, label);
                }
}

static void test_small_chunks(void **state)
{
    (void)state;
    cmpt_each_kernel(small_chunks_body);
}

/* A NaN or an infinity in any lane, on either side, of blocks of 16 to 40:
 * refused, nothing counted. */
static void specials_body(void)
{
    if (!cmp_fast_available())
        return;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    cmp_params p = fp16_params(LD_TOL_POLYGRAPHY, 1e-3, false);
    for (int m = 16; m <= 40; m += 8)
        for (int at = 0; at < m; at++)
            for (int b = 0; b < 3; b++)
                for (int side = 0; side < 2; side++) {
                    for (int i = 0; i < m; i++)
                        random_pair(&r_f[i], &t_f[i]);
                    (side ? t_f : r_f)[at] = bad[b];
                    cmp_acc acc, before;
                    cmp_acc_init(&acc);
                    before = acc;
                    double *out[CMP_MEASURES] = {fast_e[0], fast_e[1], fast_e[2]};
                    if (cmp_block_float_fast(&p, r_f, t_f, m, 0, &acc, out, NULL, NULL))
                        fail_msg("%s: %d elements, %g at %d on side %d accepted",
                                 cmpt_kernel_name(), m, (double)bad[b], at, side);
                    if (memcmp(&acc, &before, sizeof acc) != 0)
                        fail_msg("%s: a refused block changed the acc", cmpt_kernel_name());
                }
}

static void test_specials_refused(void **state)
{
    (void)state;
    cmpt_each_kernel(specials_body);
}

/* ---- feed mode: the kept pairs and the counts ---- */

enum { FEED_N = 32 * CMP_BLOCK };
#ifndef FEED_SIGMAS
#define FEED_SIGMAS 22
#endif

static bool inside_any(const qsel *q, double e)
{
    int32_t key = qsel_key_of(q, e);
    for (int v = 0; v < q->n_iv; v++)
        if (key >= q->lo[v] && key <= q->hi[v])
            return true;
    return false;
}

static void feed_body(void)
{
    if (!cmp_fast_available())
        return;
    static float r[FEED_N + 16], t[FEED_N + 16], kept_r[FEED_N + 16], kept_t[FEED_N + 16];
    static float sink_r[CMP_BLOCK + 16], sink_t[CMP_BLOCK + 16];
    static double e[CMP_MEASURES][FEED_N], sample[FEED_N], cand[CMP_MEASURES][FEED_N + 16];
    cmp_params p = fp16_params(LD_TOL_POLYGRAPHY, 4.8828125e-3, false);
    for (int i = 0; i < FEED_N; i++) {
        random_pair(&r[i], &t[i]);
        double rd = r[i], td = t[i];
        cmp_acc unused;
        cmp_acc_init(&unused);
        cmp_block_double(&p, &rd, &td, NULL, 1, 0, &unused, &e[0][i], &e[1][i], &e[2][i]);
    }
    /* an interval around each measure's median, widened so that about half
       of the elements fall inside one of some measure (every lane pattern
       then occurs many times) */
    double saved = qsel_bracket_sigmas;
    qsel_bracket_sigmas = FEED_SIGMAS;
    qsel q[CMP_MEASURES];
    for (int k = 0; k < CMP_MEASURES; k++) {
        int64_t ranks[1] = {FEED_N / 2};
        memcpy(sample, e[k], sizeof sample);
        qsel_plan(&q[k], sample, FEED_N / 8, FEED_N, ranks, 1, NULL, k != CMP_ULP);
        q[k].cand = cand[k];
        q[k].cap = FEED_N;
    }
    qsel_bracket_sigmas = saved;
    /* abs errors whose keys sit exactly at the edges of the narrow keys of
       each interval bound (the smallest key of lo's narrow value and the one
       below it, the largest of hi's and the one above): r = 0, t a float
       whose double's key is that (key = (bits >> 3) + 0x38000000 for a
       normal float); at the ends of the AVX2 kernel's runs of 256 kept
       indices and chunks of 512, and elsewhere */
    const qsel *qa = &q[CMP_ABS];
    int at = 0;
    for (int v = 0; v < qa->n_iv; v++) {
        int64_t lo0 = ((int64_t)qa->lo[v] + qa->bias) * ((int64_t)1 << qa->shift) + 1;
        int64_t hi1 = ((int64_t)qa->hi[v] + qa->bias + 1) * ((int64_t)1 << qa->shift);
        const int64_t edge[4] = {lo0 - 1, lo0, hi1, hi1 + 1};
        for (int j = 0; j < 4; j++) {
            assert_true(edge[j] >= 0x38100000 && edge[j] < 0x47F00000); /* normal floats */
            uint32_t bits = (uint32_t)(edge[j] - 0x38000000) << 3;
            float d;
            memcpy(&d, &bits, sizeof d);
            for (int rep = 0; rep < 6; rep++, at++) {
                int i = (at * 256 + (at & 1 ? 0 : 255) + 8 * (at % 5)) % FEED_N;
                r[i] = 0.0f;
                t[i] = rep & 1 ? -d : d;
                double rd = r[i], td = t[i];
                cmp_acc unused;
                cmp_acc_init(&unused);
                cmp_block_double(&p, &rd, &td, NULL, 1, 0, &unused, &e[0][i], &e[1][i],
                                 &e[2][i]);
                if (qsel_key(e[CMP_ABS][i]) != (uint32_t)edge[j])
                    fail_msg("edge element %d: key %#x, want %#llx", i,
                             qsel_key(e[CMP_ABS][i]), (unsigned long long)edge[j]);
            }
        }
    }
    cmp_pairs pairs = {kept_r, kept_t, 0, FEED_N, sink_r, sink_t, false};
    cmp_acc acc;
    cmp_acc_init(&acc);
    for (int b = 0; b < FEED_N; b += CMP_BLOCK)
        if (!cmp_block_float_fast(&p, r + b, t + b, CMP_BLOCK, b, &acc, NULL, q, &pairs))
            fail_msg("%s: a finite block refused", cmpt_kernel_name());
    /* the pairs kept are those inside, in order; every 8-lane pattern seen */
    bool seen[256] = {false};
    int64_t j = 0;
    for (int i = 0; i < FEED_N; i += 8) {
        unsigned pattern = 0;
        for (int l = 0; l < 8; l++) {
            bool in = false;
            for (int k = 0; k < CMP_MEASURES; k++)
                in = in || inside_any(&q[k], e[k][i + l]);
            if (!in)
                continue;
            pattern |= 1u << l;
            if (j >= pairs.n || kept_r[j] != r[i + l] || kept_t[j] != t[i + l])
                fail_msg("%s: kept pair %lld is not element %d", cmpt_kernel_name(),
                         (long long)j, i + l);
            j++;
        }
        seen[pattern] = true;
    }
    if (getenv("FEED_DEBUG"))
        printf("kept %lld of %d\n", (long long)j, FEED_N);
    if (j != pairs.n)
        fail_msg("%s: %lld pairs kept, want %lld", cmpt_kernel_name(), (long long)pairs.n,
                 (long long)j);
    for (int pattern = 0; pattern < 256; pattern++)
        if (!seen[pattern])
            fail_msg("lane pattern %#x never occurred: the test data is too narrow", pattern);
    /* the counts of keys >= each lower bound, then the kept pairs' errors */
    for (int k = 0; k < CMP_MEASURES; k++)
        for (int v = 0; v < q[k].n_iv; v++) {
            int64_t ge = 0;
            for (int i = 0; i < FEED_N; i++)
                ge += qsel_key_of(&q[k], e[k][i]) >= q[k].lo[v];
            if (q[k].ge[v] != ge)
                fail_msg("%s: measure %d interval %d: %lld keys >= lo, want %lld",
                         cmpt_kernel_name(), k, v, (long long)q[k].ge[v], (long long)ge);
        }
    cmp_fast_expand(&p, &pairs, q);
    for (int k = 0; k < CMP_MEASURES; k++) {
        int64_t n = 0, in_iv[QSEL_MAX_RANKS] = {0};
        for (int i = 0; i < FEED_N; i++) {
            int32_t key = qsel_key_of(&q[k], e[k][i]);
            for (int v = 0; v < q[k].n_iv; v++)
                if (key >= q[k].lo[v] && key <= q[k].hi[v]) {
                    if (n >= q[k].n || memcmp(&q[k].cand[n], &e[k][i], sizeof(double)) != 0)
                        fail_msg("%s: measure %d: kept error %lld is not element %d's",
                                 cmpt_kernel_name(), k, (long long)n, i);
                    n++;
                    in_iv[v]++;
                }
        }
        if (n != q[k].n)
            fail_msg("%s: measure %d: %lld errors kept, want %lld", cmpt_kernel_name(), k,
                     (long long)q[k].n, (long long)n);
        for (int v = 0; v < q[k].n_iv; v++)
            if (q[k].in_iv[v] != in_iv[v])
                fail_msg("%s: measure %d interval %d holds %lld, want %lld", cmpt_kernel_name(),
                         k, v, (long long)q[k].in_iv[v], (long long)in_iv[v]);
    }
}

static void test_feed_keeps_exactly(void **state)
{
    (void)state;
    cmpt_each_kernel(feed_body);
    /* the AVX2 kernel's narrow keys in both forms: folded (what these
       intervals get) and not (intervals near the top of the double range) */
    cmp_avx2_unfolded = true;
    cmpt_each_kernel(feed_body);
    cmp_avx2_unfolded = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_against_portable),
        cmocka_unit_test(test_zero_chunks),
        cmocka_unit_test(test_screen_edges),
        cmocka_unit_test(test_screen_atol_edges),
        cmocka_unit_test(test_rel_edges),
        cmocka_unit_test(test_screen_chunks),
        cmocka_unit_test(test_small_chunks),
        cmocka_unit_test(test_specials_refused),
        cmocka_unit_test(test_feed_keeps_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
