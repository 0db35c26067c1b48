/* layerdiff — float32 direct convolution with AVX-512 or AVX2 + FMA
 * (private to backends/kernels/; used by conv.c for one group's product
 * when ld_conv_direct_preferred says so; the im2col + BLAS path stays for
 * other CPUs, float64, accumulate-half layers and geometries outside
 * ld_conv_direct_fits). Both instruction sets give the same bits.
 *
 * What it computes, per output element: the sum over input channels c and
 * kernel taps (kd, kh, kw), in that order, of x * w as a chain of fused
 * multiply-adds in float32 starting from +0, then plus the bias when there
 * is one. Taps in the padding multiply a zero (as im2col's zero columns do:
 * 0 * inf is NaN). One output's sum never depends on the thread count or on
 * which tile it falls in, so results are bitwise the same for any --threads.
 * Tested against a double-precision reference (tests/test_conv_fast.c). */
#ifndef LAYERDIFF_BACKENDS_KERNELS_CONV_DIRECT_H
#define LAYERDIFF_BACKENDS_KERNELS_CONV_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/kernels/conv_common.h"

/* Whether this CPU (and OS) runs the kernels (AVX-512F, or AVX2 and FMA;
 * tests can force one: conv_direct_internal.h). */
bool ld_conv_direct_available(void);

/* Whether a group with C input and M output channels of geometry g is within
 * the kernel's limits: innermost stride 1 or 2, innermost kernel width <= 16,
 * C and M >= 1. */
bool ld_conv_direct_fits(const ld_window_geom *g, int64_t C, int64_t M);

/* Whether conv.c should take the direct kernel for this group rather than
 * im2col + BLAS: available and fits, and on AVX2 machines only for the
 * shapes where it was measured faster (conv_direct.c). */
bool ld_conv_direct_preferred(const ld_window_geom *g, int64_t C, int64_t M);

/* Floats of scratch ld_conv_direct_f32 needs on up to `threads` threads: the
 * packed weights, and the input repacked with its padding (about C x padded
 * plane) or, for a pointwise convolution, one small tile buffer per thread. */
size_t ld_conv_direct_scratch_floats(const ld_window_geom *g, int64_t C, int64_t M,
                                     int threads);

/* Floats between the starts of two workers' buffers of `floats` floats in
 * the scratch: more than twice the buffer (an untouched gap after each, so
 * that one core's prefetches past its buffer's end never reach the buffer
 * another core is writing; conv_direct.c). */
size_t ld_conv_direct_worker_stride(size_t floats);

/* One group of one image: y [M][g->out_size] = conv(x [C][g->in_size],
 * w [M][C][g->k_size]) + bias[M] (bias NULL: none). scratch: 64-byte
 * aligned, ld_conv_direct_scratch_floats floats (contents unspecified).
 * Splits the work over up to `threads` threads of the claim pool
 * (conv_pool.h; the full input repack of 3-D and very tall kernels: OpenMP) when it is large
 * enough. round: NULL, or the float16 rounding above of every output.
 * Only call it when ld_conv_direct_available() and ld_conv_direct_fits(). */
/* Float16 rounding of the output in the tiles' stores, for a caller whose
 * ld_kernel_ctx offers round_fp16_inline (include/layerdiff/kernel.h): a
 * tile's run of one output channel whose values are all normal float16
 * after rounding, or zeros, is stored rounded (fp16_split.h); any other run
 * is stored unrounded and handed to block(user, 0, run, n) right after. */
typedef struct ld_conv_round {
    void (*block)(void *user, int output, float *values, int64_t n);
    void *user;
} ld_conv_round;

void ld_conv_direct_f32(const float *x, const float *w, const float *bias, float *y, int64_t C,
                        int64_t M, const ld_window_geom *g, float *scratch, int threads,
                        const ld_conv_round *round);

/* Packed weights kept across calls. Packing (~2 ms of PaddleOCR det's run
 * on one thread, serial) is the same every run when the weights are a
 * constant initializer; conv.c keeps one per node and group then. An empty
 * one is all zeros. The packing depends on the level and tile variant (MB)
 * and on the weights' address and sizes: a call with any of them different
 * packs again. The caller promises that the values at w do not change while
 * the cache holds w (ld_conv_direct_pack_clear forgets them). */
typedef struct ld_conv_direct_pack {
    const float *w;   /* what data was packed from; NULL: nothing held */
    int64_t C, M, k_size;
    int MB, level;
    float *data;      /* owned (malloc), or NULL */
} ld_conv_direct_pack;

/* ld_conv_direct_f32 that takes its packed weights from `cache` when it
 * holds this call's, and otherwise packs them into it (growing cache->data;
 * into scratch when that allocation fails). cache NULL: ld_conv_direct_f32.
 * Same results as ld_conv_direct_f32, bit for bit. */
void ld_conv_direct_f32_cached(const float *x, const float *w, const float *bias, float *y,
                               int64_t C, int64_t M, const ld_window_geom *g, float *scratch,
                               int threads, const ld_conv_round *round,
                               ld_conv_direct_pack *cache);

/* Frees what the cache holds and empties it. */
void ld_conv_direct_pack_clear(ld_conv_direct_pack *cache);

/* Packs w (M x C x taps, as ld_conv_direct_f32 reads it) into cache as a
 * call of ld_conv_direct_f32_cached on geometry g would, at the level and
 * forced variant in effect now, so that the call finds it there: for a
 * backend's prepare (kernel.h). The cache owns what it holds
 * (ld_conv_direct_pack_clear). Return value: false when the direct kernels
 * do not take g (nothing packed) or the allocation fails. */
bool ld_conv_direct_prepack(const float *w, int64_t C, int64_t M, const ld_window_geom *g,
                            ld_conv_direct_pack *cache);

/* Tests: how many times weights were packed into a cache since the process
 * started. */
int64_t ld_conv_direct_cache_packs(void);

/* The pointwise kernel as a product, for ConvTranspose's columns:
 * C [M][N] (rows ldc apart) = op(A) B, B [K][N] (rows ldb apart), op(A) =
 * A [M][K] (rows lda apart) or, with a_trans, the transpose of A [K][M]
 * (rows lda apart). Each element is the FMA chain over k from +0 (as the
 * convolution without bias). scratch: ld_gemm_direct_scratch_floats floats.
 * Only when ld_conv_direct_available(). */
size_t ld_gemm_direct_scratch_floats(int64_t M, int64_t K, int threads);
void ld_gemm_direct_f32(bool a_trans, int64_t M, int64_t N, int64_t K, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                        float *scratch, int threads);

/* y[2i] = bias + a[i], y[2i + 1] = bias + b[i] for i < n (ConvTranspose's
 * stride-2 col2im). Only when ld_conv_direct_available(). */
void ld_interleave2_add_f32(const float *a, const float *b, float bias, float *y, int64_t n);

#endif
