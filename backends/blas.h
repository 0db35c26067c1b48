/* layerdiff — the single GEMM entry point (private to backends/).
 *
 * Every matrix product in the kernels (Conv via im2col, ConvTranspose,
 * Gemm, MatMul) goes through ld_sgemm / ld_dgemm. They call cblas_sgemm /
 * cblas_dgemm of a BLAS that backends/blas.c loads with dlopen at first use,
 * after choosing the CPU kernel the library should run (see blas.c and
 * docs/architecture.md "BLAS" for the measurements behind the choice).
 *
 * Matrices are row-major. op(A) is M x K, op(B) is K x N, C is M x N:
 *     C = alpha * op(A) * op(B) + beta * C
 * where op(X) = X or X^T. As in BLAS, beta == 0 means C is not read (NaN in
 * C does not propagate) and alpha == 0 means A and B are not read.
 * Leading dimensions: lda >= max(1, trans_a ? M : K), ldb >= max(1, trans_b ?
 * K : N), ldc >= max(1, N). Violating them is a bug in the caller and aborts. */
#ifndef LAYERDIFF_BACKENDS_BLAS_H
#define LAYERDIFF_BACKENDS_BLAS_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/numerics.h"

/* Loads and configures the BLAS once per process (thread-safe, idempotent).
 * Call it early while the process is single-threaded (kernel init does): it
 * sets OPENBLAS_CORETYPE / BLIS_ARCH_TYPE for the moment of loading and
 * restores the environment afterwards. Order: libopenblas.so.0, then
 * libblis.so.4; LAYERDIFF_BLAS=openblas|blis forces one. Fails with
 * LD_ERR_USAGE on a bad LAYERDIFF_BLAS or LAYERDIFF_BLAS_CORETYPE (every
 * later call returns the same error), with LD_ERR_UNSUPPORTED (naming the
 * libraries tried and why) when none loads; ld_sgemm then falls back to the
 * naive loops below. */
ld_status ld_blas_init(ld_error *err);

/* --- Kernel policy ------------------------------------------------------------------
 * The BLAS's CPU kernel comes from the CPU's features: OpenBLAS "SkylakeX" on
 * AVX-512 (F, CD, BW, DQ, VL), "Haswell" on AVX2+FMA, else the library's own
 * detection (BLIS: skx, haswell, its own). OPENBLAS_CORETYPE and
 * BLIS_ARCH_TYPE in the environment are ignored (environments preset them
 * for other programs; see blas_core.c); LAYERDIFF_BLAS_CORETYPE=NAME, any
 * OpenBLAS core type name, case-insensitive, wins when the CPU has the
 * instructions that kernel needs (under BLIS: AVX-512 names run skx,
 * Haswell/Zen/Excavator run haswell, others BLIS's own detection). */

/* CPU feature bits that decide a kernel. LD_CPU_AVX512 is F, CD, BW, DQ and
 * VL together (what OpenBLAS's SkylakeX kernel and BLIS's skx use). */
enum {
    LD_CPU_SSE3 = 1u << 0,
    LD_CPU_SSSE3 = 1u << 1,
    LD_CPU_SSE41 = 1u << 2,
    LD_CPU_SSE42 = 1u << 3,
    LD_CPU_AVX = 1u << 4,
    LD_CPU_AVX2_FMA = 1u << 5,
    LD_CPU_AVX512 = 1u << 6,
    LD_CPU_FMA4 = 1u << 7,
    LD_CPU_3DNOW = 1u << 8,
};

/* This CPU's LD_CPU_* bits (and the OS saves the registers they use). */
unsigned ld_blas_cpu_features(void);

typedef struct ld_blas_core_choice {
    char core[32];  /* OpenBLAS core type name to load with; "" = the library's detection */
    unsigned needs; /* LD_CPU_* bits of that core ("": 0) */
    char why[200];  /* for ld_blas_describe, e.g. "chosen by layerdiff for this AVX-512 CPU" */
} ld_blas_core_choice;

/* The policy above as a pure function (tested with made-up CPUs): requested
 * is LAYERDIFF_BLAS_CORETYPE (NULL or "" when unset), preset the
 * OPENBLAS_CORETYPE found in the environment (only named in *why), cpu the
 * LD_CPU_* bits. Fails with LD_ERR_USAGE, one line listing the valid names,
 * for an unknown name, or naming the missing instructions for a core this
 * CPU cannot run. */
ld_status ld_blas_choose_core(const char *requested, const char *preset, unsigned cpu,
                              ld_blas_core_choice *out, ld_error *err);

/* One line for logs and benchmarks, e.g. "openblas 0.3.21 SkylakeX (chosen by
 * layerdiff for this AVX-512 CPU), 2 threads". Borrowed, valid until the next
 * call of ld_blas_describe from any thread. */
const char *ld_blas_describe(void);

/* OpenMP threads one product may use (global to the process). n < 1 means
 * 1. The library itself always runs single-threaded: ld_sgemm splits large
 * products into blocks over OpenMP threads (see blas.c). Cheap, so kernels
 * call it with ctx->threads before each product. */
void ld_blas_set_threads(int n);
int ld_blas_threads(void);

/* numerics: how the layer computes (NULL: the reference). Every precision
 * accumulates in fp32 by default: the BLAS on the operands as given, which
 * for a reduced-precision layer are already rounded, so the products are
 * exact and this is what tensor cores compute (in a different summation
 * order). With accumulate_half and precision fp16 or bf16
 * (ld_numerics_accumulate_half) the product is ld_sgemm_half's
 * (backends/gemm_half.h: every partial sum rounded, in a documented order)
 * and its partial overflows are added to counters->partial_overflows
 * (counters may be NULL). */
void ld_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc, const ld_layer_numerics *numerics, ld_layer_counters *counters);
void ld_dgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
              const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
              double *C, int64_t ldc, const ld_layer_numerics *numerics,
              ld_layer_counters *counters);

/* Naive references (llm.c style triple loops, same contract): float data with
 * a double accumulator rounded once at the end, and double data with a
 * double accumulator. Tests compare every fast path against ld_dgemm_naive;
 * ld_sgemm also falls back to ld_sgemm_naive when no BLAS could be loaded
 * or a dimension exceeds the BLAS's 32-bit integers. Slow: never on the hot
 * path otherwise. */
void ld_sgemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc);
void ld_dgemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                    const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                    double *C, int64_t ldc);

#endif
