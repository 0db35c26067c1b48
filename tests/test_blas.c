/* Unit tests for backends/blas.c: every GEMM path (transposes, odd sizes,
 * padded leading dimensions, alpha/beta, float and double, one and two
 * threads) against the naive double-precision reference, within the
 * classic worst-case bound |error| <= (K+2) u (|alpha| sum|a*b| + |beta*c|).
 * Runs under whatever BLAS kernel the process chose (the test prints it). */
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

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}

typedef struct gemm_case {
    bool ta, tb;
    int64_t M, N, K;
    int64_t pad; /* extra elements per row of A, B and C (lda > minimum) */
    double alpha, beta;
} gemm_case;

typedef struct operands {
    int64_t lda, ldb, ldc, a_rows, b_rows;
    double *A, *B, *C0; /* the data in double (exact copies of the float values) */
} operands;

static void make_operands(const gemm_case *c, operands *o)
{
    int64_t a_cols = c->ta ? c->M : c->K, b_cols = c->tb ? c->K : c->N;
    o->a_rows = c->ta ? c->K : c->M;
    o->b_rows = c->tb ? c->N : c->K;
    o->lda = (a_cols > 1 ? a_cols : 1) + c->pad;
    o->ldb = (b_cols > 1 ? b_cols : 1) + c->pad;
    o->ldc = (c->N > 1 ? c->N : 1) + c->pad;
    o->A = calloc((size_t)(o->a_rows * o->lda + 1), sizeof(double));
    o->B = calloc((size_t)(o->b_rows * o->ldb + 1), sizeof(double));
    o->C0 = calloc((size_t)(c->M * o->ldc + 1), sizeof(double));
    assert_non_null(o->A);
    assert_non_null(o->B);
    assert_non_null(o->C0);
    /* Values representable in float, so both precisions see the same data. */
    for (int64_t i = 0; i < o->a_rows * o->lda; i++)
        o->A[i] = (float)uniform();
    for (int64_t i = 0; i < o->b_rows * o->ldb; i++)
        o->B[i] = (float)uniform();
    for (int64_t i = 0; i < c->M * o->ldc; i++)
        o->C0[i] = (float)uniform();
}

static void free_operands(operands *o)
{
    free(o->A);
    free(o->B);
    free(o->C0);
}

/* sum_k |a_ik b_kj| for the bound. */
static double abs_dot(const gemm_case *c, const operands *o, int64_t i, int64_t j)
{
    double s = 0;
    for (int64_t k = 0; k < c->K; k++) {
        double a = c->ta ? o->A[k * o->lda + i] : o->A[i * o->lda + k];
        double b = c->tb ? o->B[j * o->ldb + k] : o->B[k * o->ldb + j];
        s += fabs(a * b);
    }
    return s;
}

/* Checks got (float or double, as double via get) against the reference. */
static void check_result(const gemm_case *c, const operands *o, const double *ref,
                         const void *got, bool is_float, double unit)
{
    for (int64_t i = 0; i < c->M; i++) {
        for (int64_t j = 0; j < c->N; j++) {
            int64_t at = i * o->ldc + j;
            double g = is_float ? ((const float *)got)[at] : ((const double *)got)[at];
            double scale = fabs(c->alpha) * abs_dot(c, o, i, j) +
                           (c->beta != 0 ? fabs(c->beta * o->C0[at]) : 0);
            double bound = (double)(c->K + 2) * unit * scale + 1e-300;
            if (!(fabs(g - ref[at]) <= bound))
                fail_msg("%s ta=%d tb=%d M=%lld N=%lld K=%lld pad=%lld alpha=%g beta=%g: "
                         "C[%lld,%lld] = %.17g, reference %.17g, bound %.3g",
                         is_float ? "sgemm" : "dgemm", c->ta, c->tb, (long long)c->M,
                         (long long)c->N, (long long)c->K, (long long)c->pad, c->alpha, c->beta,
                         (long long)i, (long long)j, g, ref[at], bound);
        }
        /* Padding columns of C must be untouched. */
        for (int64_t j = c->N; j < o->ldc; j++) {
            int64_t at = i * o->ldc + j;
            double g = is_float ? ((const float *)got)[at] : ((const double *)got)[at];
            if (g != o->C0[at])
                fail_msg("padding C[%lld,%lld] was written", (long long)i, (long long)j);
        }
    }
}

static float *to_float(const double *x, int64_t n)
{
    float *f = malloc((size_t)(n + 1) * sizeof *f);
    assert_non_null(f);
    for (int64_t i = 0; i < n; i++)
        f[i] = (float)x[i];
    return f;
}

static void run_case(const gemm_case *c)
{
    operands o;
    make_operands(c, &o);
    int64_t nc = c->M * o.ldc;
    double *ref = malloc((size_t)(nc + 1) * sizeof *ref);
    double *dc = malloc((size_t)(nc + 1) * sizeof *dc);
    assert_non_null(ref);
    assert_non_null(dc);
    memcpy(ref, o.C0, (size_t)nc * sizeof *ref);
    memcpy(dc, o.C0, (size_t)nc * sizeof *dc);
    /* beta == 0 must ignore C: poison it (padding excluded: it stays C0). */
    if (c->beta == 0)
        for (int64_t i = 0; i < c->M; i++)
            for (int64_t j = 0; j < c->N; j++)
                dc[i * o.ldc + j] = NAN;
    ld_dgemm_naive(c->ta, c->tb, c->M, c->N, c->K, c->alpha, o.A, o.lda, o.B, o.ldb, c->beta, ref,
                   o.ldc);

    float *fa = to_float(o.A, o.a_rows * o.lda), *fb = to_float(o.B, o.b_rows * o.ldb);
    float *fc = to_float(dc, nc), *fn = to_float(dc, nc);
    ld_sgemm(c->ta, c->tb, c->M, c->N, c->K, (float)c->alpha, fa, o.lda, fb, o.ldb,
             (float)c->beta, fc, o.ldc, NULL, NULL);
    check_result(c, &o, ref, fc, true, 0x1p-24);
    ld_sgemm_naive(c->ta, c->tb, c->M, c->N, c->K, (float)c->alpha, fa, o.lda, fb, o.ldb,
                   (float)c->beta, fn, o.ldc);
    check_result(c, &o, ref, fn, true, 0x1p-24);
    ld_dgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, o.A, o.lda, o.B, o.ldb, c->beta, dc, o.ldc,
             NULL, NULL);
    check_result(c, &o, ref, dc, false, 0x1p-53);
    free(fa);
    free(fb);
    free(fc);
    free(fn);
    free(ref);
    free(dc);
    free_operands(&o);
}

static void run_all_shapes(int threads)
{
    static const int64_t shapes[][3] = {
        {1, 1, 1}, {1, 7, 5}, {6, 1, 9}, {3, 5, 1}, {17, 33, 65}, {64, 3, 129},
        {5, 130, 70}, {130, 70, 257}, {31, 64, 16},
    };
    static const double alphas[] = {1.0, -0.5, 2.25};
    static const double betas[] = {0.0, 1.0, 0.75};
    ld_blas_set_threads(threads);
    assert_int_equal(ld_blas_threads(), threads);
    int n = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            for (int p = 0; p < 2; p++) {
                gemm_case c = {.ta = t & 1, .tb = (t >> 1) & 1, .M = shapes[s][0],
                               .N = shapes[s][1], .K = shapes[s][2], .pad = p ? 3 : 0,
                               .alpha = alphas[n % 3], .beta = betas[(n / 3) % 3]};
                run_case(&c);
                n++;
            }
}

static void test_blas_loads_and_describes(void **state)
{
    (void)state;
    ld_error err;
    ld_error_clear(&err);
    /* The kernel choice must not leak into (or override) the environment. */
    const char *vars[] = {"OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "BLIS_ARCH_TYPE"};
    char before[3][64];
    bool had[3];
    for (int i = 0; i < 3; i++) {
        had[i] = getenv(vars[i]) != NULL;
        snprintf(before[i], sizeof before[i], "%s", had[i] ? getenv(vars[i]) : "");
    }
    const char *requested = getenv("LAYERDIFF_BLAS_CORETYPE");
    assert_int_equal(ld_blas_init(&err), LD_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(getenv(vars[i]) != NULL, had[i]);
        if (had[i])
            assert_string_equal(getenv(vars[i]), before[i]);
    }
    ld_blas_set_threads(2);
    const char *d = ld_blas_describe();
    printf("# BLAS: %s\n", d);
    assert_true(strncmp(d, "openblas ", 9) == 0 || strncmp(d, "blis ", 5) == 0);
    /* The kernel follows the CPU (a preset OPENBLAS_CORETYPE, which this
     * workplace sets to Haswell, is ignored) unless LAYERDIFF_BLAS_CORETYPE
     * says otherwise. */
    unsigned cpu = ld_blas_cpu_features();
    if (strncmp(d, "openblas ", 9) == 0 && !(requested && *requested)) {
        if (cpu & LD_CPU_AVX512)
            assert_non_null(strstr(d, " SkylakeX (chosen by layerdiff for this AVX-512 CPU"));
        else if (cpu & LD_CPU_AVX2_FMA)
            assert_non_null(strstr(d, " Haswell (chosen by layerdiff for this AVX2+FMA CPU"));
        if (had[0] && *before[0]) {
            char want[160];
            snprintf(want, sizeof want, "OPENBLAS_CORETYPE=%s in the environment ignored",
                     before[0]);
            assert_non_null(strstr(d, want));
        }
    }
    assert_non_null(strstr(d, "2 threads"));
    ld_blas_set_threads(1);
    assert_non_null(strstr(ld_blas_describe(), "1 thread"));
    ld_blas_set_threads(0); /* clamps */
    assert_int_equal(ld_blas_threads(), 1);
}

enum {
    CPU_AVX2 = LD_CPU_SSE3 | LD_CPU_SSSE3 | LD_CPU_SSE41 | LD_CPU_SSE42 | LD_CPU_AVX |
               LD_CPU_AVX2_FMA,
    CPU_AVX512 = CPU_AVX2 | LD_CPU_AVX512,
};

/* The policy on made-up CPUs: the CPU decides, a preset OPENBLAS_CORETYPE
 * is ignored but named, LAYERDIFF_BLAS_CORETYPE wins when valid. */
static void test_core_policy(void **state)
{
    (void)state;
    ld_blas_core_choice c;
    ld_error err;
    ld_error_clear(&err);
    assert_int_equal(ld_blas_choose_core(NULL, NULL, CPU_AVX512, &c, &err), LD_OK);
    assert_string_equal(c.core, "SkylakeX");
    assert_int_equal(c.needs, LD_CPU_AVX512);
    assert_string_equal(c.why, "chosen by layerdiff for this AVX-512 CPU");
    assert_int_equal(ld_blas_choose_core("", "Haswell", CPU_AVX512, &c, &err), LD_OK);
    assert_string_equal(c.core, "SkylakeX");
    assert_string_equal(c.why, "chosen by layerdiff for this AVX-512 CPU; OPENBLAS_CORETYPE="
                               "Haswell in the environment ignored, LAYERDIFF_BLAS_CORETYPE "
                               "chooses");
    assert_int_equal(ld_blas_choose_core(NULL, "SkylakeX", CPU_AVX2, &c, &err), LD_OK);
    assert_string_equal(c.core, "Haswell");
    assert_int_equal(c.needs, LD_CPU_AVX2_FMA);
    assert_int_equal(ld_blas_choose_core(NULL, NULL, LD_CPU_SSE3 | LD_CPU_AVX, &c, &err), LD_OK);
    assert_string_equal(c.core, "");
    assert_int_equal(c.needs, 0);
    assert_string_equal(c.why, "the library's own CPU detection");
    /* the user's choice, any case, named as OpenBLAS spells it */
    assert_int_equal(ld_blas_choose_core("haswell", "Prescott", CPU_AVX512, &c, &err), LD_OK);
    assert_string_equal(c.core, "Haswell");
    assert_string_equal(c.why, "LAYERDIFF_BLAS_CORETYPE=haswell set by the user");
    assert_int_equal(ld_blas_choose_core("COOPERLAKE", NULL, CPU_AVX512, &c, &err), LD_OK);
    assert_string_equal(c.core, "Cooperlake");
    assert_int_equal(ld_blas_choose_core("Prescott", NULL, CPU_AVX2, &c, &err), LD_OK);
    assert_string_equal(c.core, "Prescott");
}

static void test_core_policy_errors(void **state)
{
    (void)state;
    ld_blas_core_choice c;
    ld_error err;
    ld_error_clear(&err);
    assert_int_equal(ld_blas_choose_core("Skylake", NULL, CPU_AVX512, &c, &err), LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "LAYERDIFF_BLAS_CORETYPE=Skylake is not an OpenBLAS core "
                                        "type (one of Katmai, "));
    assert_non_null(strstr(err.message, ", SkylakeX, Cooperlake, SapphireRapids)"));
    assert_null(strchr(err.message, '\n'));
    ld_error_clear(&err);
    assert_int_equal(ld_blas_choose_core("skylakex", NULL, CPU_AVX2, &c, &err), LD_ERR_USAGE);
    assert_string_equal(err.message, "LAYERDIFF_BLAS_CORETYPE=skylakex: OpenBLAS's SkylakeX "
                                     "kernel needs AVX-512 (F, CD, BW, DQ, VL), which this CPU "
                                     "lacks");
    ld_error_clear(&err);
    assert_int_equal(ld_blas_choose_core("Bulldozer", NULL, CPU_AVX512, &c, &err), LD_ERR_USAGE);
    assert_string_equal(err.message, "LAYERDIFF_BLAS_CORETYPE=Bulldozer: OpenBLAS's Bulldozer "
                                     "kernel needs FMA4, which this CPU lacks");
    ld_error_clear(&err);
    assert_int_equal(ld_blas_choose_core("Sandybridge", NULL, LD_CPU_SSE3, &c, &err),
                     LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "needs AVX, which this CPU lacks"));
}

static void test_gemm_paths_one_thread(void **state)
{
    (void)state;
    run_all_shapes(1);
}

static void test_gemm_paths_two_threads(void **state)
{
    (void)state;
    run_all_shapes(2);
}

/* Shapes large enough that the BLAS splits the work between threads and
 * uses its full kernels (the conv-like shape of the benchmarks). */
static void test_gemm_large_shapes(void **state)
{
    (void)state;
    static const gemm_case cases[] = {
        {false, false, 64, 3136, 576, 0, 1.0, 0.0},
        {false, true, 128, 768, 768, 0, 1.0, 1.0},
        {true, false, 200, 300, 400, 5, -1.5, 0.5},
        {true, true, 257, 129, 300, 1, 1.0, 0.0},
    };
    for (int threads = 1; threads <= 2; threads++) {
        ld_blas_set_threads(threads);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(&cases[i]);
    }
}

/* Large products are cut into fixed blocks whatever the thread count: the
 * results are bitwise the same on one and two threads. */
static void test_gemm_threads_bitwise(void **state)
{
    (void)state;
    static const int64_t shapes[][3] = {{200, 300, 400}, {300, 100, 257}, {64, 3136, 576}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc((size_t)(M * K) * sizeof *A), *B = malloc((size_t)(K * N) * sizeof *B);
        float *C1 = malloc((size_t)(M * N) * sizeof *C1);
        float *C2 = malloc((size_t)(M * N) * sizeof *C2);
        assert_true(A && B && C1 && C2);
        for (int64_t i = 0; i < M * K; i++)
            A[i] = (float)uniform();
        for (int64_t i = 0; i < K * N; i++)
            B[i] = (float)uniform();
        ld_blas_set_threads(1);
        ld_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N, NULL, NULL);
        ld_blas_set_threads(2);
        ld_sgemm(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C2, N, NULL, NULL);
        assert_memory_equal(C1, C2, (size_t)(M * N) * sizeof *C1);
        free(A), free(B), free(C1), free(C2);
    }
    ld_blas_set_threads(1);
}

/* K == 0: C = beta * C; M or N == 0: nothing is touched. */
static void test_gemm_degenerate(void **state)
{
    (void)state;
    float C[6] = {1, 2, 3, 4, 5, 6}, A[1] = {7}, B[1] = {8};
    ld_sgemm(false, false, 2, 3, 0, 1.0f, A, 1, B, 3, 0.5f, C, 3, NULL, NULL);
    for (int i = 0; i < 6; i++)
        assert_true(C[i] == 0.5f * (float)(i + 1));
    C[0] = NAN;
    ld_sgemm(false, false, 2, 3, 0, 1.0f, A, 1, B, 3, 0.0f, C, 3, NULL, NULL);
    for (int i = 0; i < 6; i++)
        assert_true(C[i] == 0.0f);
    double D[2] = {3, NAN};
    ld_dgemm(false, false, 0, 2, 4, 1.0, NULL, 4, NULL, 2, 0.0, D, 2, NULL, NULL);
    assert_true(D[0] == 3 && isnan(D[1]));
    /* alpha == 0 does not read A/B (NaN there must not leak). */
    float An[4] = {NAN, NAN, NAN, NAN}, Bn[4] = {NAN, NAN, NAN, NAN}, Cn[4] = {1, 2, 3, 4};
    ld_sgemm(false, false, 2, 2, 2, 0.0f, An, 2, Bn, 2, 2.0f, Cn, 2, NULL, NULL);
    for (int i = 0; i < 4; i++)
        assert_true(Cn[i] == 2.0f * (float)(i + 1));
}

/* A known product (not just agreement between two implementations). */
static void test_gemm_known_values(void **state)
{
    (void)state;
    const float A[6] = {1, 2, 3, 4, 5, 6};       /* 2x3 */
    const float B[6] = {7, 8, 9, 10, 11, 12};    /* 3x2 */
    float C[4] = {1, 1, 1, 1};
    ld_sgemm(false, false, 2, 2, 3, 1.0f, A, 3, B, 2, 1.0f, C, 2, NULL, NULL);
    assert_true(C[0] == 59 && C[1] == 65 && C[2] == 140 && C[3] == 155);
    /* A^T (3x2 stored) times B^T (2x3 stored). */
    float Ct[9];
    ld_sgemm(true, true, 3, 3, 2, 1.0f, A, 3, B, 2, 0.0f, Ct, 3, NULL, NULL);
    /* A^T = [[1,4],[2,5],[3,6]], B^T = [[7,9,11],[8,10,12]] */
    const float want[9] = {39, 49, 59, 54, 68, 82, 69, 87, 105};
    for (int i = 0; i < 9; i++)
        assert_true(Ct[i] == want[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blas_loads_and_describes),
        cmocka_unit_test(test_core_policy),
        cmocka_unit_test(test_core_policy_errors),
        cmocka_unit_test(test_gemm_known_values),
        cmocka_unit_test(test_gemm_degenerate),
        cmocka_unit_test(test_gemm_paths_one_thread),
        cmocka_unit_test(test_gemm_paths_two_threads),
        cmocka_unit_test(test_gemm_large_shapes),
        cmocka_unit_test(test_gemm_threads_bitwise),
    };
    return cmocka_run_group_tests_name("blas", tests, NULL, NULL);
}
