/* layerdiff — the vector comparison kernels' driver: picks the kernel
 * (AVX-512, metrics_fast_avx512.c; AVX2, metrics_fast_avx2.c; or none), adds
 * a judged block into the acc, recounting exactly what the kernel only
 * flagged, and recomputes the kept pairs' errors for the order statistics.
 * What a kernel computes, and why, is said in metrics_fast_avx512.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare/metrics_internal.h"
#include "core/round_internal.h"

static int forced = -2; /* the level cap; -2: not decided yet, -1: none */

void cmp_force_level(int level)
{
    forced = level < 0 ? -2 : level; /* -2: the environment decides again */
}

void cmp_force_portable(bool on)
{
    cmp_force_level(on ? CMP_LEVEL_PORTABLE : -1);
}

cmp_level cmp_cpu_level(void)
{
    static int cpu = -1;
    if (cpu < 0) {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw"))
            cpu = CMP_LEVEL_AVX512;
        /* F16C through the rounding library's check: clang 14 (the fuzz
           build) has no __builtin_cpu_supports("f16c") */
        else if (ld_round_isa_supported(LD_ROUND_ISA_AVX2) && __builtin_cpu_supports("fma") &&
                 __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt"))
            cpu = CMP_LEVEL_AVX2;
        else
            cpu = CMP_LEVEL_PORTABLE;
    }
    return (cmp_level)cpu;
}

cmp_level cmp_fast_level(void)
{
    if (forced == -2) {
        const char *env = getenv("LAYERDIFF_NO_SIMD");
        forced = env && *env && strcmp(env, "0") != 0 ? CMP_LEVEL_PORTABLE : -1;
    }
    cmp_level cpu = cmp_cpu_level();
    return forced >= 0 && forced < (int)cpu ? (cmp_level)forced : cpu;
}

bool cmp_fast_available(void)
{
    return cmp_fast_level() != CMP_LEVEL_PORTABLE;
}

/* The kernels of the level in use (one exists: cmp_fast_available). */
static const cmp_fast_ops *fast_ops(void)
{
    return cmp_fast_level() == CMP_LEVEL_AVX512 ? &cmp_fast_avx512_ops : &cmp_fast_avx2_ops;
}

bool cmp_fast_usable(const cmp_params *p)
{
    /* the float32 screening of the verdict (screen_failures) is proven for
       finite tolerances >= +0; the others go to the portable kernel: with an
       infinite rtol, rtol |r| is NaN for r = 0 and allclose fails the
       element, which no finite bound screens */
    return cmp_fast_available() && p->want_ulp && p->atol >= 0 && p->rtol >= 0 &&
           !signbit(p->atol) && !signbit(p->rtol) && isfinite(p->atol) && isfinite(p->rtol);
}

float cmp_screen_bound(double x)
{
    double shrunk = x * (1.0 - 0x1p-21);
    if (!(shrunk < FLT_MAX))
        return FLT_MAX;
    float f = (float)shrunk;
    return (double)f > shrunk ? nextafterf(f, 0.0f) : f;
}

static uint32_t float_bits(double x)
{
    float f = (float)x;
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* Adds one finite block to acc, recounting exactly what the kernel only flagged. */
static void commit(const cmp_fast_ops *ops, const cmp_params *p, const cmp_kernel_args *A,
                   const cmp_kernel_result *R, int64_t base, cmp_acc *acc)
{
    int m16 = A->m16;
    double n = m16;
    /* zeros, subnormals, tiny or overflowing references: none unless one of
       these extremes says so; the exact matches the kernel counted */
    float max_abs_r = -R->r_min > R->r_max ? -R->r_min : R->r_max;
    bool small = R->min_abs < float_bits(p->ref_min_normal) ||
                 R->min_abs < float_bits(p->prec_min_normal) ||
                 R->min_abs < float_bits(p->test_min_normal);
    bool over = max_abs_r > p->prec_max;
    if (small && !over && R->n_chunk_min > 0) {
        /* only the runs whose own smallest |r| or |t| is small: a run whose
           every value is at least each threshold (all > 0) holds no zero,
           subnormal, tiny reference or underflow to count (in the bench's
           fp16 data 1 block in 12 holds a reference below 2^-14, most of
           it in runs without one) */
        uint32_t threshold = float_bits(p->ref_min_normal);
        threshold = float_bits(p->prec_min_normal) > threshold ? float_bits(p->prec_min_normal)
                                                               : threshold;
        threshold = float_bits(p->test_min_normal) > threshold ? float_bits(p->test_min_normal)
                                                               : threshold;
        for (int c = 0; c < R->n_chunk_min; c++) {
            int from = c * CMP_CHUNK_MIN;
            int len = m16 - from < CMP_CHUNK_MIN ? m16 - from : CMP_CHUNK_MIN;
            if (R->chunk_min_abs[c] < threshold)
                ops->count_specials(p, A->r + from, A->t + from, len, true, true, acc);
        }
    } else if (small || over) {
        ops->count_specials(p, A->r, A->t, m16, small || over, small, acc);
    }
    for (int k = 0; k < CMP_MEASURES; k++)
        acc->zero_err[k] += R->equal;
    if (R->maybe_fail)
        ops->count_failures(p, A->r, A->t, m16, base, acc);
    acc->ref.finite += m16;
    acc->test.finite += m16;
    for (int k = 0; k < CMP_MEASURES; k++) {
        acc->sum[k] += R->sum[k];
        if (R->max[k] > acc->max[k]) {
            acc->max[k] = R->max[k];
            acc->max_index[k] = base + ops->find_first(p, A->r, A->t, m16, k, R->max[k]);
        }
    }
    acc->ref.min = R->r_min < acc->ref.min ? R->r_min : acc->ref.min;
    acc->ref.max = R->r_max > acc->ref.max ? R->r_max : acc->ref.max;
    acc->test.min = R->t_min < acc->test.min ? R->t_min : acc->test.min;
    acc->test.max = R->t_max > acc->test.max ? R->t_max : acc->test.max;
    /* the kernel sums x - c and its square (c the side's shift, or 0), and
       (t - r)², but not rt (another accumulator cost the pass ~4%): Σx² =
       Σ(x-c)² + c(2Σ(x-c) + n c) and Σrt = (Σr² + Σt² - Σ(t-r)²) / 2, each
       within a few ulps of the sum of its terms' magnitudes (the scales);
       cmp_similarity_inexact judges the results by them, and the sums are
       summed again if that is not a few ulps of the result */
    double cr = p->kernel_shifted ? p->ref_shift : 0.0;
    double ct = p->kernel_shifted ? p->test_shift : 0.0;
    double rr = R->r2 + cr * (2.0 * R->r1 + n * cr);
    double tt = R->t2 + ct * (2.0 * R->t1 + n * ct);
    cmp_sum2_add(&acc->srr, &acc->srr_lo, rr);
    cmp_sum2_add(&acc->stt, &acc->stt_lo, tt);
    cmp_sum2_add(&acc->sdd, &acc->sdd_lo, R->dd);
    cmp_sum2_add(&acc->srt, &acc->srt_lo, 0.5 * (rr + tt - R->dd));
    double rr_scale = R->r2 + fabs(cr) * (2.0 * fabs(R->r1) + n * fabs(cr));
    double tt_scale = R->t2 + fabs(ct) * (2.0 * fabs(R->t1) + n * fabs(ct));
    acc->rr_scale += rr_scale;
    acc->tt_scale += tt_scale;
    acc->rt_scale += rr_scale + tt_scale + R->dd;
    /* the side sums are kept around the side's shift, whatever the kernel used */
    double dr = cr - p->ref_shift, dt = ct - p->test_shift;
    acc->ref.s1 += R->r1 + n * dr;
    acc->ref.s2 += R->r2 + dr * (2.0 * R->r1 + n * dr);
    acc->test.s1 += R->t1 + n * dt;
    acc->test.s2 += R->t2 + dt * (2.0 * R->t1 + n * dt);
}

/* The bounds the kernel compares with: each measure's intervals, padded
 * to the instantiation's count with lo > every key > hi. */
static cmp_kernel_fn prepare_feed(const cmp_fast_ops *ops, const cmp_params *p,
                                  cmp_kernel_args *A, const qsel *q)
{
    for (int k = 0; k < CMP_MEASURES; k++)
        for (int v = 0; v < QSEL_MAX_RANKS; v++) {
            A->lo[k][v] = v < q[k].n_iv ? q[k].lo[v] : q[k].narrow ? INT16_MAX : INT32_MAX;
            A->hi[k][v] = v < q[k].n_iv ? q[k].hi[v] : q[k].narrow ? INT16_MIN : INT32_MIN;
        }
    A->q = q;
    bool five = q[CMP_ABS].n_iv > 4 || q[CMP_REL].n_iv > 4;
    return ops->feed[p->mode == LD_TOL_ALLCLOSE][p->kernel_shifted][q[CMP_ULP].n_iv > 0][five];
}

bool cmp_block_float_fast(const cmp_params *p, const float *r, const float *t, int m,
                          int64_t base, cmp_acc *acc, double *const out[CMP_MEASURES],
                          qsel *q, cmp_pairs *pairs)
{
    int m16 = m & ~15;
    for (int i = m16; i < m; i++) /* the tail must be finite too before anything counts */
        if (!isfinite(r[i]) || !isfinite(t[i]))
            return false;
    const cmp_fast_ops *ops = fast_ops();
    cmp_kernel_args A;
    cmp_kernel_result R;
    A.p = p;
    A.r = r;
    A.t = t;
    A.m16 = m16;
    cmp_kernel_fn fn = ops->store[p->mode == LD_TOL_ALLCLOSE][p->kernel_shifted];
    for (int k = 0; k < CMP_MEASURES; k++)
        A.store[k] = out ? out[k] : NULL;
    if (q) {
        fn = prepare_feed(ops, p, &A, q);
        cmp_pairs_reserve_block(pairs, m16, &A.kept_r, &A.kept_t);
    }
    if (m16 > 0) {
        R.n_chunk_min = 0; /* the AVX-512 kernel gives the block's minimum alone */
        fn(&A, &R);
        /* a float squared cannot overflow a double sum: a non-finite sum of
           squares means a NaN or an infinity somewhere in the block */
        if (!isfinite(R.r2 + R.t2))
            return false;
        commit(ops, p, &A, &R, base, acc);
        if (q) {
            cmp_pairs_block_done(pairs, R.kept);
            for (int k = 0; k < CMP_MEASURES; k++)
                qsel_block_done(&q[k], m16, R.ge[k]);
        }
    }
    if (m16 < m) {
        double tail_r[16], tail_t[16], tail_err[CMP_MEASURES][16];
        for (int i = m16; i < m; i++) {
            tail_r[i - m16] = r[i];
            tail_t[i - m16] = t[i];
        }
        cmp_block_double(p, tail_r, tail_t, NULL, m - m16, base + m16, acc, tail_err[CMP_ABS],
                         tail_err[CMP_REL], tail_err[CMP_ULP]);
        for (int k = 0; k < CMP_MEASURES; k++) {
            if (out && out[k])
                memcpy(out[k] + m16, tail_err[k], (size_t)(m - m16) * sizeof(double));
            if (q)
                qsel_feed(&q[k], tail_err[k], m - m16);
        }
    }
    return true;
}

/* ---- the kept pairs' errors ---- */

void cmp_pairs_reserve_block(cmp_pairs *pairs, int64_t m, float **r, float **t)
{
    if (!pairs->overflow && pairs->n + m > pairs->cap)
        pairs->overflow = true;
    *r = pairs->overflow ? pairs->sink_r : pairs->r + pairs->n;
    *t = pairs->overflow ? pairs->sink_t : pairs->t + pairs->n;
}

void cmp_pairs_block_done(cmp_pairs *pairs, int64_t kept)
{
    if (!pairs->overflow)
        pairs->n += kept;
}

void cmp_fast_expand(const cmp_params *p, const cmp_pairs *pairs, qsel *q)
{
    bool five = q[CMP_ABS].n_iv > 4 || q[CMP_REL].n_iv > 4;
    cmp_expand_fn fn = fast_ops()->expand[q[CMP_ULP].n_iv > 0][five];
    int64_t n = pairs->n;
    for (int64_t i = 0, m; i < n; i += m) {
        /* as many pairs as surely fit (each keeps at most one error per
           measure): the room is checked between chunks */
        int64_t room = 16384;
        for (int k = 0; k < CMP_MEASURES; k++)
            room = q[k].cap - q[k].n < room ? q[k].cap - q[k].n : room;
        m = n - i < room ? n - i : room;
        int64_t m16 = m & ~(int64_t)15;
        if (room < 16 || (m16 == 0 && n - i >= 16)) { /* more than planned: all recompute */
            for (int k = 0; k < CMP_MEASURES; k++)
                q[k].overflow = true;
            return;
        }
        fn(p, pairs->r + i, pairs->t + i, m16, q);
        if (m16 < m) { /* the last few through the same code, padded with zero
                          pairs: error 0, below every interval */
            float pr[16] = {0}, pt[16] = {0};
            memcpy(pr, pairs->r + i + m16, (size_t)(m - m16) * sizeof(float));
            memcpy(pt, pairs->t + i + m16, (size_t)(m - m16) * sizeof(float));
            fn(p, pr, pt, 16, q);
        }
    }
}
