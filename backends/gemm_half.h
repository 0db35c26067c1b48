/* layerdiff — the accumulate-in-half matrix product (private to backends/).
 *
 * What an engine that accumulates in fp16 (or bf16) computes, bit for bit:
 * ld_sgemm takes this path for layers with accumulate_half and precision
 * fp16 or bf16 (ld_numerics_accumulate_half); Conv (im2col), ConvTranspose,
 * Gemm, MatMul and the RNN family get it from there. Same contract as
 * ld_sgemm (row-major, op(A) M x K, op(B) K x N; beta == 0: C is not read;
 * alpha == 0: A and B are not read). The operands should already be values
 * of precision p (the engine rounds a layer's inputs).
 *
 * Order of operations, for each output C[i][j] independently:
 *     acc = +0
 *     for k = 0, 1, ..., K-1:  acc = round_p(acc + a[i][k] * b[k][j])
 *     C[i][j] = round_p(alpha * acc + beta * C[i][j])   (beta * C omitted when beta == 0;
 *                                                       skipped when alpha = 1, beta = 0)
 * where each round_p rounds the exact value once (round to nearest even, with
 * ld_round_options' flush_denormals), i.e. every step is a fused
 * multiply-add of the precision, as HFMA / vfmadd231ph do; the epilogue is one
 * rounding of the exact alpha * acc + beta * C. (For bf16, a product that
 * under- or overflows fp32 is first rounded in fp32; no real model has one.)
 * A partial sum, or the epilogue, that overflows (finite operands, infinite
 * result) is a partial overflow.
 *
 * The results do not depend on the thread count or on the code path: each
 * output is computed on its own in the order above. */
#ifndef LAYERDIFF_BACKENDS_GEMM_HALF_H
#define LAYERDIFF_BACKENDS_GEMM_HALF_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/round.h"

/* The code paths; both give bit-identical results (NaN payloads aside). */
typedef enum ld_gemm_half_path {
    LD_GEMM_HALF_AUTO = 0,  /* AVX-512 when the round dispatcher uses it, else portable */
    LD_GEMM_HALF_PORTABLE,  /* scalar C, one output at a time */
    LD_GEMM_HALF_AVX512     /* 64-column panels, 16 lanes; needs AVX-512 F + BW + VL */
} ld_gemm_half_path;

/* C = alpha * op(A) * op(B) + beta * C accumulated in p (FP16 or BF16; any
 * other precision is a caller bug and aborts). Splits the work over up to
 * `threads` OpenMP threads (one when called inside a parallel region).
 * Returns the number of partial overflows. An AVX512 path on a CPU without
 * it runs the portable code. */
int64_t ld_sgemm_half(ld_gemm_half_path path, int threads, bool trans_a, bool trans_b,
                      int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc,
                      ld_precision p, const ld_round_options *round);

/* The same on double matrices (portable code only): each operand is first
 * converted to fp32, which is exact for values of the precision; the result
 * is widened back. */
int64_t ld_dgemm_half(int threads, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                      double alpha, const double *A, int64_t lda, const double *B, int64_t ldb,
                      double beta, double *C, int64_t ldc, ld_precision p,
                      const ld_round_options *round);

#endif
