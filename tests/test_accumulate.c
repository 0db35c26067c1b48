/* layerdiff tests — matrix products of reduced-precision layers
 * (backends/gemm_half.c, ld_sgemm / ld_dgemm with numerics).
 *
 * - fp32 accumulation of fp16 operands is the BLAS (bit for bit) and equals
 *   a double-accumulated reference to within fp32 rounding of sum |a b|.
 * - accumulate-half GEMM equals a plain scalar emulation bit for bit (both
 *   code paths, every transposition, alpha / beta, fp16 and bf16, flush,
 *   strided matrices, specials), partial-overflow counts included. The
 *   emulation (tests/support/exact_emulation.h) is independent of the
 *   library's arithmetic: each step is the exact sum as a 128-bit integer,
 *   rounded to the format by integer code.
 * tests/test_accumulate_kernels.c covers the kernels that use it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/blas.h"
#include "backends/gemm_half.h"
#include "core/round_internal.h"
#include "layerdiff/round.h"
#include "tests/support/exact_emulation.h"

/* --- GEMM --------------------------------------------------------------------------------- */

typedef struct gemm_case {
    bool ta, tb;
    int64_t M, N, K;
    float alpha, beta; /* multiples of 1/4 (the emulation's epilogue units) */
} gemm_case;

typedef struct gemm_data {
    int64_t lda, ldb, ldc;
    float *A, *B, *C0; /* C0: C before the product */
} gemm_data;

static float at_a(const gemm_case *c, const gemm_data *d, int64_t i, int64_t k)
{
    return c->ta ? d->A[k * d->lda + i] : d->A[i * d->lda + k];
}

static float at_b(const gemm_case *c, const gemm_data *d, int64_t k, int64_t j)
{
    return c->tb ? d->B[j * d->ldb + k] : d->B[k * d->ldb + j];
}

/* The documented accumulate-half GEMM (backends/gemm_half.h), output by output. */
static void emul_gemm(const gemm_case *c, const gemm_data *d, emul *em, float *out)
{
    int unit = unit_of(em->p);
    for (int64_t i = 0; i < c->M; i++)
        for (int64_t j = 0; j < c->N; j++) {
            float acc = 0.0f, cv = d->C0[i * d->ldc + j], r;
            if (c->alpha != 0)
                for (int64_t k = 0; k < c->K; k++)
                    acc = emul_step(em, acc, at_a(c, d, i, k), at_b(c, d, k, j), true);
            bool use_c = c->beta != 0;
            if (c->alpha == 1 && !use_c) {
                r = acc;
            } else if (!isfinite(acc) || (use_c && !isfinite(cv))) {
                r = (float)((double)c->alpha * acc + (use_c ? (double)c->beta * cv : 0.0));
            } else {
                i128 v = units(c->alpha, -2) * units(acc, unit);
                if (use_c)
                    v += units(c->beta, -2) * units(cv, unit);
                bool x_neg = (signbit(c->alpha) != 0) != (signbit(acc) != 0);
                bool y_neg = (signbit(c->beta) != 0) != (signbit(cv) != 0);
                bool x_zero = c->alpha == 0 || acc == 0, y_zero = c->beta == 0 || cv == 0;
                bool negative_zero = x_zero && x_neg && (!use_c || (y_zero && y_neg));
                r = round_units(v, unit - 2, em->p, em->flush, negative_zero);
                em->overflows += isinf(r) != 0;
            }
            out[i * d->ldc + j] = r;
        }
}

static void gemm_data_make(const gemm_case *c, gemm_data *d, ld_precision p, int emin, int emax)
{
    d->lda = (c->ta ? c->M : c->K) + 3;
    d->ldb = (c->tb ? c->K : c->N) + 1;
    d->ldc = c->N + 2;
    int64_t na = (c->ta ? c->K : c->M) * d->lda, nb = (c->tb ? c->N : c->K) * d->ldb;
    d->A = malloc((size_t)na * sizeof(float));
    d->B = malloc((size_t)nb * sizeof(float));
    d->C0 = malloc((size_t)(c->M * d->ldc) * sizeof(float));
    assert_non_null(d->A);
    assert_non_null(d->B);
    assert_non_null(d->C0);
    fill(d->A, na, p, emin, emax);
    fill(d->B, nb, p, emin, emax);
    fill(d->C0, c->M * d->ldc, p, emin, emax);
    if (c->beta == 0) /* not read: NaN must not show */
        for (int64_t i = 0; i < c->M * d->ldc; i++)
            d->C0[i] = NAN;
}

static void gemm_data_free(gemm_data *d)
{
    free(d->A);
    free(d->B);
    free(d->C0);
}

static float *copy_c(const gemm_case *c, const gemm_data *d)
{
    float *x = malloc((size_t)(c->M * d->ldc) * sizeof *x);
    assert_non_null(x);
    memcpy(x, d->C0, (size_t)(c->M * d->ldc) * sizeof *x);
    return x;
}

/* Every path against the emulation on one case; also through ld_sgemm with
 * numerics and counters. fp32_c: C holds fp32 values that are not values of
 * p (24-bit significands; the epilogue must still round once). */
static void check_case(const gemm_case *c, ld_precision p, bool flush, int emin, int emax,
                       bool fp32_c)
{
    gemm_data d;
    gemm_data_make(c, &d, p, emin, emax);
    for (int64_t i = 0; fp32_c && c->beta != 0 && i < c->M * d.ldc; i++)
        d.C0[i] = (float)ldexp(1.0 + (double)(rnd64() % (1u << 23)) / 0x1p23, rnd_int(-3, 6)) *
                  (rnd64() & 1 ? -1.0f : 1.0f);
    emul em = {p, flush, 0};
    float *want = copy_c(c, &d);
    emul_gemm(c, &d, &em, want);
    ld_round_options ro = {LD_ROUND_NEAREST_EVEN, flush};
    char what[160];
    static const ld_gemm_half_path paths[] = {LD_GEMM_HALF_PORTABLE, LD_GEMM_HALF_AVX512};
    for (int t = 0; t < 2; t++) {
        if (paths[t] == LD_GEMM_HALF_AVX512 && !ld_round_isa_supported(LD_ROUND_ISA_AVX512))
            continue;
        float *got = copy_c(c, &d);
        int64_t n = ld_sgemm_half(paths[t], 2, c->ta, c->tb, c->M, c->N, c->K, c->alpha, d.A,
                                  d.lda, d.B, d.ldb, c->beta, got, d.ldc, p, &ro);
        snprintf(what, sizeof what, "%s %s%s ta=%d tb=%d %lldx%lldx%lld alpha=%g beta=%g",
                 t ? "avx512" : "portable", ld_precision_name(p), flush ? " flush" : "", c->ta,
                 c->tb, (long long)c->M, (long long)c->N, (long long)c->K, c->alpha, c->beta);
        for (int64_t i = 0; i < c->M; i++)
            expect_same(got + i * d.ldc, want + i * d.ldc, c->N, what);
        if (n != em.overflows)
            fail_msg("%s: %lld partial overflows, expected %lld", what, (long long)n,
                     (long long)em.overflows);
        free(got);
    }
    ld_layer_numerics num = {.precision = p, .round = ro, .accumulate_half = true};
    ld_layer_counters counters = {0};
    float *got = copy_c(c, &d);
    ld_blas_set_threads(2);
    ld_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d.A, d.lda, d.B, d.ldb, c->beta, got,
             d.ldc, &num, &counters);
    for (int64_t i = 0; i < c->M; i++)
        expect_same(got + i * d.ldc, want + i * d.ldc, c->N, "ld_sgemm accumulate-half");
    assert_int_equal(counters.partial_overflows, em.overflows);
    free(got);
    free(want);
    gemm_data_free(&d);
}

static void check_half_case(const gemm_case *c, ld_precision p, bool flush, int emin, int emax)
{
    check_case(c, p, flush, emin, emax, false);
}

static void test_gemm_half_matches_emulation(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{1, 1, 1},   {3, 5, 7},    {4, 64, 9},  {5, 65, 33},
                                        {17, 130, 40}, {64, 64, 64}, {2, 3, 300}, {33, 17, 1},
                                        {1, 200, 128}, {9, 1, 70}};
    static const float ab[][2] = {{1, 0}, {1, 1}, {0.5f, -2}, {-1.5f, 0.25f}, {3, 0}, {-1, 1}};
    int n = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int prec = 0; prec < 2; prec++, n++) {
                gemm_case c = {t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2],
                               ab[n % 6][0], ab[n % 6][1]};
                ld_precision p = prec ? LD_PRECISION_BF16 : LD_PRECISION_FP16;
                bool flush = n % 4 == 1;
                /* fp16: mostly moderate magnitudes (long sums round a lot), every
                 * third case the full range with subnormals and overflows */
                if (p == LD_PRECISION_FP16)
                    check_half_case(&c, p, flush, n % 3 ? -6 : -24, n % 3 ? 3 : 15);
                else
                    check_half_case(&c, p, flush, -20, 20);
                if (s < 6 && c.beta != 0) /* C of fp32 values: the epilogue rounds once */
                    check_case(&c, p, flush, -4, 3, true);
            }
}

/* Near the bottom of the range (fp16 subnormal sums; bf16 sums around 2^-126,
 * below the emulation's units) the two paths agree, with and without flush. */
static void test_gemm_half_paths_agree_tiny(void **state)
{
    (void)state;
    if (!ld_round_isa_supported(LD_ROUND_ISA_AVX512))
        skip();
    gemm_case c = {false, true, 9, 70, 25, 1, 1};
    for (int t = 0; t < 4; t++) {
        ld_precision p = t & 1 ? LD_PRECISION_BF16 : LD_PRECISION_FP16;
        ld_round_options ro = {LD_ROUND_NEAREST_EVEN, t >= 2};
        gemm_data d;
        if (p == LD_PRECISION_BF16)
            gemm_data_make(&c, &d, p, -76, -60); /* products mostly below 2^-126 */
        else
            gemm_data_make(&c, &d, p, -14, -6);
        float scale = p == LD_PRECISION_BF16 ? 0x1p-64f : 0x1p-10f;
        for (int64_t i = 0; i < c.M * d.ldc; i++) /* C tiny too */
            d.C0[i] = ld_round_to_precision(d.C0[i] * scale, p, NULL);
        float *portable = copy_c(&c, &d), *vector = copy_c(&c, &d);
        int64_t n1 = ld_sgemm_half(LD_GEMM_HALF_PORTABLE, 1, c.ta, c.tb, c.M, c.N, c.K, c.alpha,
                                   d.A, d.lda, d.B, d.ldb, c.beta, portable, d.ldc, p, &ro);
        int64_t n2 = ld_sgemm_half(LD_GEMM_HALF_AVX512, 1, c.ta, c.tb, c.M, c.N, c.K, c.alpha,
                                   d.A, d.lda, d.B, d.ldb, c.beta, vector, d.ldc, p, &ro);
        int zeros = 0;
        for (int64_t i = 0; i < c.M; i++) {
            expect_same(vector + i * d.ldc, portable + i * d.ldc, c.N, "tiny values");
            for (int64_t j = 0; j < c.N; j++)
                zeros += portable[i * d.ldc + j] == 0;
        }
        assert_int_equal(n1, n2);
        if (ro.flush_denormals) /* flushing happened */
            assert_true(zeros > 0);
        free(portable);
        free(vector);
        gemm_data_free(&d);
    }
}

/* alpha = 0: A and B are not read; K = 0: only the epilogue. */
static void test_gemm_half_degenerate(void **state)
{
    (void)state;
    gemm_case c = {false, false, 3, 4, 5, 0.0f, 0.5f};
    for (int prec = 0; prec < 2; prec++) {
        ld_precision p = prec ? LD_PRECISION_BF16 : LD_PRECISION_FP16;
        check_half_case(&c, p, false, -4, 4);
        gemm_case k0 = {true, true, 3, 4, 0, 1.0f, -1.5f};
        check_half_case(&k0, p, false, -4, 4);
    }
    float A[4] = {NAN, NAN, NAN, NAN}, B[4] = {NAN, NAN, NAN, NAN}, C[4] = {1, 2, 3, 4};
    ld_sgemm_half(LD_GEMM_HALF_AUTO, 1, false, false, 2, 2, 2, 0.0f, A, 2, B, 2, 2.0f, C, 2,
                  LD_PRECISION_FP16, NULL);
    assert_true(C[0] == 2 && C[1] == 4 && C[2] == 6 && C[3] == 8);
}

/* NaN and inf operands propagate as IEEE says, in both paths. */
static void test_gemm_half_specials(void **state)
{
    (void)state;
    gemm_case c = {false, true, 6, 70, 12, 1.0f, 1.0f};
    for (int prec = 0; prec < 2; prec++) {
        ld_precision p = prec ? LD_PRECISION_BF16 : LD_PRECISION_FP16;
        gemm_data d;
        gemm_data_make(&c, &d, p, -3, 3);
        d.A[0] = INFINITY;
        d.A[d.lda + 5] = NAN;
        d.B[3 * d.ldb + 2] = -INFINITY;
        d.B[7 * d.ldb + 11] = INFINITY;
        d.C0[2] = INFINITY;
        d.C0[d.ldc + 3] = NAN;
        emul em = {p, false, 0};
        float *want = copy_c(&c, &d);
        emul_gemm(&c, &d, &em, want);
        for (int t = 0; t < 2; t++) {
            float *got = copy_c(&c, &d);
            int64_t n = ld_sgemm_half(t ? LD_GEMM_HALF_AVX512 : LD_GEMM_HALF_PORTABLE, 1, c.ta,
                                      c.tb, c.M, c.N, c.K, c.alpha, d.A, d.lda, d.B, d.ldb,
                                      c.beta, got, d.ldc, p, NULL);
            for (int64_t i = 0; i < c.M; i++)
                expect_same(got + i * d.ldc, want + i * d.ldc, c.N, "specials");
            assert_int_equal(n, 0); /* infinities from infinite operands are no overflow */
            for (int64_t j = 0; j < c.N; j++) /* A's row 1 holds a NaN */
                assert_true(isnan(got[d.ldc + j]));
            free(got);
        }
        free(want);
        gemm_data_free(&d);
    }
}

/* Partial sums that overflow although the exact result is small: counted,
 * and the result is inf; fp32 accumulation gets the exact 0. */
static void test_gemm_half_partial_overflow(void **state)
{
    (void)state;
    /* row i of A: 200, 200, -200, -200; B: 200 everywhere (products 40000) */
    float A[2 * 4] = {200, 200, -200, -200, 200, -200, 200, -200};
    float B[4 * 3];
    for (int i = 0; i < 12; i++)
        B[i] = 200;
    float C[6];
    ld_layer_numerics half = {.precision = LD_PRECISION_FP16, .accumulate_half = true};
    ld_layer_counters counters = {0};
    ld_sgemm(false, false, 2, 3, 4, 1.0f, A, 4, B, 3, 0.0f, C, 3, &half, &counters);
    for (int j = 0; j < 3; j++) {
        assert_true(isinf(C[j]) && C[j] > 0); /* 40000 + 40000 = 80000 > 65504 */
        assert_true(C[3 + j] == 0);           /* 40000 - 40000 + 40000 - 40000 */
    }
    assert_int_equal(counters.partial_overflows, 3);
    ld_layer_numerics fp32acc = {.precision = LD_PRECISION_FP16};
    counters.partial_overflows = 0;
    ld_sgemm(false, false, 2, 3, 4, 1.0f, A, 4, B, 3, 0.0f, C, 3, &fp32acc, &counters);
    assert_true(C[0] == 0 && C[3] == 0);
    assert_int_equal(counters.partial_overflows, 0);
    /* an epilogue that overflows counts too: alpha * 60000 */
    float a1 = 240, b1 = 250, c1 = 0;
    counters.partial_overflows = 0;
    ld_sgemm(false, false, 1, 1, 1, 2.0f, &a1, 1, &b1, 1, 0.0f, &c1, 1, &half, &counters);
    assert_true(isinf(c1));
    assert_int_equal(counters.partial_overflows, 1);
    /* alpha = beta = 1 (Conv's bias, the vector epilogue): 60000 + 8000 in both paths */
    for (int t = 0; t < 2; t++) {
        float c2[3] = {8000, 8000, 8000}, b2[3] = {250, 250, 1};
        int64_t n = ld_sgemm_half(t ? LD_GEMM_HALF_AVX512 : LD_GEMM_HALF_PORTABLE, 1, false,
                                  false, 1, 3, 1, 1.0f, &a1, 1, b2, 3, 1.0f, c2, 3,
                                  LD_PRECISION_FP16, NULL);
        assert_true(isinf(c2[0]) && isinf(c2[1]) && c2[2] == 8240);
        assert_int_equal(n, 2);
    }
}

/* One rounding per step, not two: acc = 1 + 2^-10 (odd last bit) plus the
 * product 1023 * 2^-16 * 1025 * 2^-15 = 2^-11 - 2^-31 is just below the fp16
 * midpoint 1 + 2^-10 + 2^-11, so the answer is 1 + 2^-10; an fp32 addition
 * rounds to the midpoint, which then ties to even: 1 + 2^-9. */
static void test_gemm_half_single_rounding(void **state)
{
    (void)state;
    float A[2] = {1.0f + 0x1p-10f, 1023 * 0x1p-16f}, B[2] = {1.0f, 1025 * 0x1p-15f};
    for (int t = 0; t < 2; t++) {
        float C = -1;
        ld_sgemm_half(t ? LD_GEMM_HALF_AVX512 : LD_GEMM_HALF_PORTABLE, 1, false, false, 1, 1, 2,
                      1.0f, A, 2, B, 1, 0.0f, &C, 1, LD_PRECISION_FP16, NULL);
        assert_true(C == 1.0f + 0x1p-10f);
        float twice = ld_round_to_precision(A[0] * B[0] + A[1] * B[1], LD_PRECISION_FP16, NULL);
        assert_true(twice == 1.0f + 0x1p-9f); /* what rounding twice would give */
    }
    /* the epilogue with alpha = beta = 1 and a C that is not an fp16 value:
     * (1 + 2^-10) + (2^-11 - 2^-30) */
    float a1[16], b1[16], c1[16];
    for (int j = 0; j < 16; j++) {
        b1[j] = 1.0f;
        c1[j] = 0x1p-11f - 0x1p-30f;
    }
    a1[0] = 1.0f + 0x1p-10f;
    for (int t = 0; t < 2; t++) {
        float c[16];
        memcpy(c, c1, sizeof c);
        ld_sgemm_half(t ? LD_GEMM_HALF_AVX512 : LD_GEMM_HALF_PORTABLE, 1, false, false, 1, 16, 1,
                      1.0f, a1, 1, b1, 16, 1.0f, c, 16, LD_PRECISION_FP16, NULL);
        for (int j = 0; j < 16; j++)
            assert_true(c[j] == 1.0f + 0x1p-10f);
    }
}

/* The double entry converts to fp32 and gives the same values. */
static void test_dgemm_half(void **state)
{
    (void)state;
    gemm_case c = {true, false, 7, 9, 31, 0.5f, 1.0f};
    gemm_data d;
    gemm_data_make(&c, &d, LD_PRECISION_FP16, -5, 5);
    int64_t na = c.K * d.lda, nb = c.K * d.ldb, nc = c.M * d.ldc;
    double *A = malloc((size_t)na * 8), *B = malloc((size_t)nb * 8), *C = malloc((size_t)nc * 8);
    assert_true(A && B && C);
    for (int64_t i = 0; i < na; i++)
        A[i] = d.A[i];
    for (int64_t i = 0; i < nb; i++)
        B[i] = d.B[i];
    for (int64_t i = 0; i < nc; i++)
        C[i] = d.C0[i];
    float *want = copy_c(&c, &d);
    emul em = {LD_PRECISION_FP16, false, 0};
    emul_gemm(&c, &d, &em, want);
    ld_layer_numerics num = {.precision = LD_PRECISION_FP16, .accumulate_half = true};
    ld_dgemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, d.lda, B, d.ldb, c.beta, C, d.ldc, &num,
             NULL);
    for (int64_t i = 0; i < c.M; i++)
        for (int64_t j = 0; j < c.N; j++)
            if (!same((float)C[i * d.ldc + j], want[i * d.ldc + j]) ||
                C[i * d.ldc + j] != (double)(float)C[i * d.ldc + j])
                fail_msg("(%lld, %lld): got %a, expected %a", (long long)i, (long long)j,
                         C[i * d.ldc + j], want[i * d.ldc + j]);
    free(A);
    free(B);
    free(C);
    free(want);
    gemm_data_free(&d);
}

/* fp16 operands, fp32 accumulation: the BLAS bit for bit, and within
 * (K + 2) * 2^-24 * (|alpha| sum |a b| + |beta c|) of a double reference. */
static void test_gemm_fp32_accumulation(void **state)
{
    (void)state;
    static const gemm_case cases[] = {{false, false, 8, 300, 1000, 1, 0},
                                      {true, false, 64, 96, 2048, 1, 1},
                                      {false, true, 3, 4, 5000, -0.5f, 2},
                                      {true, true, 33, 65, 129, 1, 0}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const gemm_case *c = &cases[t];
        gemm_data d;
        gemm_data_make(c, &d, LD_PRECISION_FP16, -8, 6);
        float *plain = copy_c(c, &d), *emulated = copy_c(c, &d);
        ld_layer_numerics num = {.precision = LD_PRECISION_FP16};
        ld_layer_counters counters = {0};
        ld_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d.A, d.lda, d.B, d.ldb, c->beta,
                 plain, d.ldc, NULL, NULL);
        ld_sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d.A, d.lda, d.B, d.ldb, c->beta,
                 emulated, d.ldc, &num, &counters);
        for (int64_t i = 0; i < c->M; i++)
            expect_same(emulated + i * d.ldc, plain + i * d.ldc, c->N, "fp32 accumulation");
        double worst = 0;
        for (int64_t i = 0; i < c->M; i++)
            for (int64_t j = 0; j < c->N; j++) {
                double ref = 0, mag = 0;
                for (int64_t k = 0; k < c->K; k++) {
                    double prod = (double)at_a(c, &d, i, k) * at_b(c, &d, k, j);
                    ref += prod;
                    mag += fabs(prod);
                }
                double cv = c->beta != 0 ? d.C0[i * d.ldc + j] : 0;
                ref = c->alpha * ref + c->beta * cv;
                mag = fabs(c->alpha) * mag + fabs(c->beta * cv);
                double err = fabs(emulated[i * d.ldc + j] - ref);
                double bound = (double)(c->K + 2) * 0x1p-24 * mag;
                if (err > bound)
                    fail_msg("case %zu (%lld, %lld): error %g > bound %g", t, (long long)i,
                             (long long)j, err, bound);
                if (bound > 0 && err / bound > worst)
                    worst = err / bound;
            }
        assert_int_equal(counters.partial_overflows, 0);
        if (getenv("LD_TEST_VERBOSE"))
            printf("case %zu: worst error %.3g of the bound\n", t, worst);
        free(plain);
        free(emulated);
        gemm_data_free(&d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_half_matches_emulation),
        cmocka_unit_test(test_gemm_half_paths_agree_tiny),
        cmocka_unit_test(test_gemm_half_degenerate),
        cmocka_unit_test(test_gemm_half_specials),
        cmocka_unit_test(test_gemm_half_single_rounding),
        cmocka_unit_test(test_gemm_half_partial_overflow),
        cmocka_unit_test(test_dgemm_half),
        cmocka_unit_test(test_gemm_fp32_accumulation),
    };
    return cmocka_run_group_tests_name("accumulate", tests, NULL, NULL);
}
