/* layerdiff — the accumulate-in-half matrix product (see gemm_half.h).
 *
 * Two paths with one semantics. The portable one computes each output with
 * the scalar steps of backends/accumulate.h. The AVX-512 one packs a panel
 * of 64 columns of op(B) (K x 64, zero-padded) and runs ROWS rows against it
 * at a time, 16 columns per vector: each step is a vector multiply (exact),
 * the addition rounded to odd (from the instruction's directed roundings,
 * where the scalar code uses TwoSum: the same value) and the rounding to p by
 * a round trip through the format (vcvtps2ph / vcvtph2ps for fp16, the
 * integer carry trick of core/round.c for bf16), so the same bits. The
 * epilogue is vector code for alpha = 1 with beta = 0 or 1 (MatMul, Conv's
 * bias), scalar otherwise. Overflow counting costs the vector loop nothing: a
 * partial sum that overflows leaves a non-finite accumulator behind (inf + x
 * is never finite again), so only outputs that end non-finite are recomputed
 * with the counting scalar code. Measurements: docs/numerics.md. */
#include "backends/gemm_half.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/accumulate.h"
#include "core/round_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef struct half_gemm {
    bool ta, tb, f64;
    int64_t M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const void *A, *B;
    void *C;
    ld_precision p;
    ld_round_options round;
} half_gemm;

static inline float load(const void *base, bool f64, int64_t idx)
{
    return f64 ? (float)((const double *)base)[idx] : ((const float *)base)[idx];
}

static inline float load_a(const half_gemm *g, int64_t i, int64_t k)
{
    return load(g->A, g->f64, g->ta ? k * g->lda + i : i * g->lda + k);
}

static inline float load_b(const half_gemm *g, int64_t k, int64_t j)
{
    return load(g->B, g->f64, g->tb ? j * g->ldb + k : k * g->ldb + j);
}

static inline void store_c(const half_gemm *g, int64_t i, int64_t j, float v)
{
    if (g->f64)
        ((double *)g->C)[i * g->ldc + j] = v;
    else
        ((float *)g->C)[i * g->ldc + j] = v;
}

/* The accumulation of output (i, j), counting its partial overflows. */
static float dot_scalar(const half_gemm *g, int64_t i, int64_t j, int64_t *overflows)
{
    float acc = 0.0f;
    if (g->alpha != 0)
        for (int64_t k = 0; k < g->K; k++)
            acc = ld_fma_round(acc, load_a(g, i, k), load_b(g, k, j), g->p, &g->round,
                               overflows);
    return acc;
}

static double double_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* s, the rounded double sum whose exact error is err, rounded to odd instead
 * (the same trick as ld_fp32_sum_round_odd, one format up). */
static double double_round_odd(double s, double err)
{
    uint64_t u;
    memcpy(&u, &s, sizeof u);
    if ((err < 0 || err > 0) && (u & 1u) == 0) {
        uint64_t eu;
        memcpy(&eu, &err, sizeof eu);
        u += ((u ^ eu) >> 63) ? UINT64_MAX : 1u;
        s = double_from_bits(u);
    }
    return s;
}

/* A finite double rounded to fp32 to odd (an fp32 value above FLT_MAX
 * included: it gives FLT_MAX, whose last bit is odd). */
static float float_round_odd(double s)
{
    float f = (float)s;
    if (isfinite(s) && (double)f != s) {
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        if ((u & 1u) == 0) {
            u += fabs((double)f) < fabs(s) ? 1u : 0xFFFFFFFFu; /* magnitude toward s */
            memcpy(&f, &u, sizeof f);
        }
    }
    return f;
}

/* round_p(alpha * acc + beta * c), rounded once: alpha * acc (24 x 11 bits)
 * and beta * c (24 x 24) are exact in double, their sum is rounded to odd
 * in double (TwoSum), then to odd in fp32, then to p to nearest even; each
 * odd rounding keeps at least 2 more bits than the next, so the result is
 * that of one rounding. Counts an overflow of finite operands. */
static float epilogue(const half_gemm *g, float acc, float c, int64_t *overflows)
{
    if (g->alpha == 1 && g->beta == 0)
        return acc;
    double x = (double)g->alpha * acc, s = x;
    bool finite = isfinite(acc) && isfinite(g->alpha);
    if (g->beta != 0) {
        double y = (double)g->beta * c;
        s = x + y;
        double yp = s - x, xp = s - yp;
        s = double_round_odd(s, (x - xp) + (y - yp));
        finite = finite && isfinite(c) && isfinite(g->beta);
    }
    float r = ld_round_to_precision(float_round_odd(s), g->p, &g->round);
    if (finite && isinf(r))
        (*overflows)++;
    return r;
}

static void finish_element(const half_gemm *g, int64_t i, int64_t j, float acc,
                           int64_t *overflows)
{
    float c = g->beta != 0 ? load(g->C, g->f64, i * g->ldc + j) : 0.0f;
    store_c(g, i, j, epilogue(g, acc, c, overflows));
}

/* Rows [i0, i1), columns [j0, j1), one output at a time. */
static int64_t block_scalar(const half_gemm *g, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    int64_t overflows = 0;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = j0; j < j1; j++)
            finish_element(g, i, j, dot_scalar(g, i, j, &overflows), &overflows);
    return overflows;
}

/* --- AVX-512 ------------------------------------------------------------------------- */

#define PANEL 64           /* columns of a panel: VECS vectors of 16 */
#define VECS (PANEL / 16)
#define ROWS 4             /* rows sharing one pass over the panel */

#if defined(__x86_64__)
#define TARGET_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl")))

/* ld_fp32_sum_round_odd, 16 lanes, with AVX-512's per-instruction rounding:
 * the sum rounded toward zero, with its last bit set when it is inexact
 * (rounded up and down differ). Same results as the scalar TwoSum version:
 * both are the sum rounded to odd (an exact zero is +0 in both, and a sum
 * beyond FLT_MAX, possible only for bf16, gives inf or FLT_MAX, which both
 * round to inf in bf16). */
static inline TARGET_AVX512 __m512 v_sum_round_odd(__m512 acc, __m512 prod)
{
    __m512 up = _mm512_add_round_ps(acc, prod, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
    __m512 down = _mm512_add_round_ps(acc, prod, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 zero = _mm512_add_round_ps(acc, prod, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __mmask16 inexact = _mm512_cmp_ps_mask(up, down, _CMP_NEQ_OQ);
    __m512i z = _mm512_castps_si512(zero);
    return _mm512_castsi512_ps(_mm512_mask_or_epi32(z, inexact, z, _mm512_set1_epi32(1)));
}

/* ld_round_to_precision(x, FP16, flush), 16 lanes: the hardware conversion
 * rounds to nearest even with the immediate (MXCSR does not matter). */
static inline TARGET_AVX512 __m512 v_round_fp16(__m512 x, bool flush)
{
    __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (flush) {
        __mmask16 small = _mm256_testn_epi16_mask(h, _mm256_set1_epi16(0x7C00));
        h = _mm256_mask_mov_epi16(h, small, _mm256_and_si256(h, _mm256_set1_epi16(-0x8000)));
    }
    return _mm512_cvtph_ps(h);
}

/* ld_round_to_precision(x, BF16, flush), 16 lanes (see ld_low_bits_rounder). */
static inline TARGET_AVX512 __m512 v_round_bf16(__m512 x, bool flush)
{
    __m512i u = _mm512_castps_si512(x);
    if (flush) {
        __mmask16 sub = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000));
        u = _mm512_mask_and_epi32(u, sub, u, _mm512_set1_epi32((int)0x80000000u));
    }
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                            _mm512_set1_epi32(0x7F800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF)));
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* out[r][v] for `rows` (1..ROWS) rows whose k-th A element is a[r][k],
 * against the K x PANEL panel. Inlined into one copy per (precision, flush).
 * The accumulators are locals (registers): __m512 may alias anything, so
 * accumulating through `out` would go through memory. */
static inline __attribute__((always_inline)) TARGET_AVX512 void
panel_rows(const float *const *a, int rows, const float *panel, int64_t K,
           bool bf16, bool flush, __m512 out[ROWS][VECS])
{
    if (rows == ROWS) {
        __m512 acc[ROWS][VECS];
        for (int r = 0; r < ROWS; r++)
            for (int v = 0; v < VECS; v++)
                acc[r][v] = _mm512_setzero_ps();
        for (int64_t k = 0; k < K; k++) {
            __m512 b[VECS];
            for (int v = 0; v < VECS; v++)
                b[v] = _mm512_load_ps(panel + k * PANEL + 16 * v);
#pragma GCC unroll 4
            for (int r = 0; r < ROWS; r++) {
                __m512 ar = _mm512_set1_ps(a[r][k]);
#pragma GCC unroll 4
                for (int v = 0; v < VECS; v++) {
                    __m512 s = v_sum_round_odd(acc[r][v], _mm512_mul_ps(ar, b[v]));
                    acc[r][v] = bf16 ? v_round_bf16(s, flush) : v_round_fp16(s, flush);
                }
            }
        }
        for (int r = 0; r < ROWS; r++)
            for (int v = 0; v < VECS; v++)
                out[r][v] = acc[r][v];
        return;
    }
    for (int r = 0; r < rows; r++) {
        __m512 acc[VECS];
        for (int v = 0; v < VECS; v++)
            acc[v] = _mm512_setzero_ps();
        for (int64_t k = 0; k < K; k++) {
            __m512 ar = _mm512_set1_ps(a[r][k]);
#pragma GCC unroll 4
            for (int v = 0; v < VECS; v++) {
                __m512 b = _mm512_load_ps(panel + k * PANEL + 16 * v);
                __m512 s = v_sum_round_odd(acc[v], _mm512_mul_ps(ar, b));
                acc[v] = bf16 ? v_round_bf16(s, flush) : v_round_fp16(s, flush);
            }
        }
        for (int v = 0; v < VECS; v++)
            out[r][v] = acc[v];
    }
}

typedef void (*panel_fn)(const float *const *a, int rows, const float *panel, int64_t K,
                         __m512 acc[ROWS][VECS]);

#define PANEL_VARIANT(name, bf16, flush)                                                   \
    static TARGET_AVX512 void name(const float *const *a, int rows, const float *panel,    \
                                   int64_t K, __m512 acc[ROWS][VECS])                      \
    {                                                                                      \
        panel_rows(a, rows, panel, K, bf16, flush, acc);                                   \
    }
PANEL_VARIANT(panel_fp16, false, false)
PANEL_VARIANT(panel_fp16_flush, false, true)
PANEL_VARIANT(panel_bf16, true, false)
PANEL_VARIANT(panel_bf16_flush, true, true)

/* op(B)[k][j0 + c] for c < cols into a zero-padded K x PANEL panel. */
static void pack_panel(const half_gemm *g, int64_t j0, int64_t cols, float *panel)
{
    const float *B = g->B;
    for (int64_t k = 0; k < g->K; k++) {
        float *dst = panel + k * PANEL;
        if (!g->tb) {
            memcpy(dst, B + k * g->ldb + j0, (size_t)cols * sizeof *dst);
        } else {
            for (int64_t c = 0; c < cols; c++)
                dst[c] = B[(j0 + c) * g->ldb + k];
        }
        for (int64_t c = cols; c < PANEL; c++)
            dst[c] = 0.0f;
    }
}

/* Stores rows [i, i + rows) x columns [j0, j0 + cols) from acc, with the
 * epilogue: vector code for alpha = 1 with beta = 0 (acc as it is) or
 * beta = 1 (round_p of acc + C rounded to odd: one rounding, as in
 * epilogue()), the scalar epilogue otherwise. Lanes that end non-finite are
 * recomputed by the counting scalar code (their values are the same). */
static TARGET_AVX512 int64_t store_rows(const half_gemm *g, int64_t i, int rows, int64_t j0,
                                        int64_t cols, __m512 acc[ROWS][VECS])
{
    int64_t overflows = 0;
    bool plain = g->alpha == 1 && g->beta == 0, add_c = g->alpha == 1 && g->beta == 1;
    bool bf16 = g->p == LD_PRECISION_BF16, flush = g->round.flush_denormals;
    for (int r = 0; r < rows; r++) {
        float *c_row = (float *)g->C + (i + r) * g->ldc + j0;
        for (int v = 0; v < VECS && 16 * v < cols; v++) {
            int64_t left = cols - 16 * v;
            __mmask16 lanes = left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1u);
            __m512 a = acc[r][v], y = a;
            float *dst = c_row + 16 * v;
            if (add_c) {
                __m512 s = v_sum_round_odd(a, _mm512_maskz_loadu_ps(lanes, dst));
                y = bf16 ? v_round_bf16(s, flush) : v_round_fp16(s, flush);
            }
            __mmask16 bad = lanes & ~_mm512_cmp_ps_mask(_mm512_abs_ps(y),
                                                        _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
            float accs[16], cs[16];
            if (bad || !(plain || add_c)) { /* the scalar way, before C is overwritten */
                _mm512_storeu_ps(accs, a);
                _mm512_storeu_ps(cs, _mm512_maskz_loadu_ps(lanes, dst));
            }
            if (plain || add_c)
                _mm512_mask_storeu_ps(dst, lanes, y);
            for (int l = 0; l < 16 && l < left; l++) {
                int64_t j = j0 + 16 * v + l;
                if ((bad >> l & 1) && !isfinite(accs[l]))
                    dot_scalar(g, i + r, j, &overflows); /* only to count */
                if (!(plain || add_c))
                    store_c(g, i + r, j, epilogue(g, accs[l], cs[l], &overflows));
                else if (bad >> l & 1)
                    epilogue(g, accs[l], cs[l], &overflows); /* only to count */
            }
        }
    }
    return overflows;
}

/* Rows [i0, i1) x columns [j0, j0 + cols), cols <= PANEL. With trans_a the
 * rows of op(A) are strided columns of A: they are gathered first. */
static TARGET_AVX512 int64_t block_avx512(const half_gemm *g, panel_fn run, int64_t i0,
                                          int64_t i1, int64_t j0, int64_t cols)
{
    size_t k_len = (size_t)(g->K > 0 ? g->K : 1);
    size_t bytes = (k_len * (PANEL + ROWS) * sizeof(float) + 63) / 64 * 64; /* C11: a multiple */
    float *panel = aligned_alloc(64, bytes);
    if (!panel) /* no memory for the panel: the same results without it */
        return block_scalar(g, i0, i1, j0, j0 + cols);
    float *rows_a = panel + k_len * PANEL;
    pack_panel(g, j0, cols, panel);
    const float *A = g->A;
    int64_t overflows = 0;
    for (int64_t i = i0; i < i1; i += ROWS) {
        int rows = i1 - i < ROWS ? (int)(i1 - i) : ROWS;
        const float *a[ROWS];
        for (int r = 0; r < ROWS; r++) {
            int64_t row = i + (r < rows ? r : 0);
            if (!g->ta) {
                a[r] = A + row * g->lda;
                continue;
            }
            float *dst = rows_a + (size_t)r * k_len; /* a column of A, gathered */
            for (int64_t k = 0; r < rows && k < g->K; k++)
                dst[k] = A[k * g->lda + row];
            a[r] = dst;
        }
        __m512 acc[ROWS][VECS];
        run(a, rows, panel, g->K, acc);
        overflows += store_rows(g, i, rows, j0, cols, acc);
    }
    free(panel);
    return overflows;
}

static panel_fn panel_for(const half_gemm *g)
{
    bool flush = g->round.flush_denormals;
    if (g->p == LD_PRECISION_BF16)
        return flush ? panel_bf16_flush : panel_bf16;
    return flush ? panel_fp16_flush : panel_fp16;
}
#endif

/* --- driver -------------------------------------------------------------------------- */

/* Work is cut into tasks of (rows, panel of columns), taken dynamically by
 * the threads. Outputs are independent, so the cut does not change results. */
static int64_t run_tasks(const half_gemm *g, bool avx512, int threads)
{
    const int64_t panel = PANEL;
    int64_t col_tiles = (g->N + panel - 1) / panel;
    /* about four tasks per thread, whole ROWS groups of rows */
    int64_t want = 4 * (int64_t)(threads > 0 ? threads : 1);
    int64_t row_parts = col_tiles >= want ? 1 : (want + col_tiles - 1) / col_tiles;
    int64_t rows_per = (g->M + row_parts - 1) / row_parts;
    rows_per = (rows_per + ROWS - 1) / ROWS * ROWS;
    rows_per = rows_per < ROWS ? ROWS : rows_per;
    row_parts = (g->M + rows_per - 1) / rows_per;
    int64_t tasks = col_tiles * row_parts, overflows = 0;
    double work = (double)g->M * (double)g->N * (double)(g->K + 1);
    bool parallel = threads > 1 && tasks > 1 && work >= 65536.0 && !omp_in_parallel();
#pragma omp parallel for num_threads(threads) if (parallel) schedule(dynamic, 1) \
    reduction(+ : overflows)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t j0 = (t / row_parts) * panel, i0 = (t % row_parts) * rows_per;
        int64_t i1 = i0 + rows_per < g->M ? i0 + rows_per : g->M;
        int64_t cols = g->N - j0 < panel ? g->N - j0 : panel;
#if defined(__x86_64__)
        if (avx512 && g->alpha != 0 && g->K > 0) {
            overflows += block_avx512(g, panel_for(g), i0, i1, j0, cols);
            continue;
        }
#endif
        overflows += block_scalar(g, i0, i1, j0, j0 + cols);
    }
    return overflows;
}

static void check_precision(ld_precision p)
{
    if (p != LD_PRECISION_FP16 && p != LD_PRECISION_BF16) {
        fprintf(stderr, "layerdiff: internal error: accumulate-half GEMM in %s\n",
                ld_precision_name(p));
        abort();
    }
}

static ld_round_options options_or_default(const ld_round_options *round)
{
    ld_round_options o = {LD_ROUND_NEAREST_EVEN, false};
    return round ? *round : o;
}

int64_t ld_sgemm_half(ld_gemm_half_path path, int threads, bool trans_a, bool trans_b,
                      int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                      ld_precision p, const ld_round_options *round)
{
    check_precision(p);
    if (M <= 0 || N <= 0)
        return 0;
    half_gemm g = {trans_a, trans_b, false, M, N, K, lda, ldb, ldc, alpha, beta,
                   A, B, C, p, options_or_default(round)};
    bool avx512 = false;
#if defined(__x86_64__)
    if (path == LD_GEMM_HALF_AUTO)
        avx512 = ld_round_isa_active() == LD_ROUND_ISA_AVX512;
    else if (path == LD_GEMM_HALF_AVX512)
        avx512 = ld_round_isa_supported(LD_ROUND_ISA_AVX512);
#endif
    return run_tasks(&g, avx512, threads);
}

int64_t ld_dgemm_half(int threads, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      double alpha, const double *A, int64_t lda, const double *B, int64_t ldb,
                      double beta, double *C, int64_t ldc, ld_precision p,
                      const ld_round_options *round)
{
    check_precision(p);
    if (M <= 0 || N <= 0)
        return 0;
    half_gemm g = {trans_a, trans_b, true, M, N, K, lda, ldb, ldc, (float)alpha, (float)beta,
                   A, B, C, p, options_or_default(round)};
    return run_tasks(&g, false, threads);
}
