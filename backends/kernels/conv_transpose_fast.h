/* layerdiff — ConvTranspose's fused 2x2 stride-2 kernel (conv_transpose_avx2.c),
 * private to backends/kernels/ and tests/: conv_transpose.c calls it for
 * float32 upsamplings whose kernel equals their stride (2, 2) with no
 * padding or dilation (every output written once), and keeps its product +
 * col2im for everything else. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_CONV_TRANSPOSE_FAST_H
#define LAYERDIFF_BACKENDS_KERNELS_CONV_TRANSPOSE_FAST_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/kernels/conv_direct.h"

typedef enum ld_convt_level {
    LD_CONVT_AUTO = -1, /* only for ld_convt_force_level: what was detected */
    LD_CONVT_NONE = 0,  /* no fused kernel: product (ld_gemm_direct_f32) + col2im */
    LD_CONVT_AVX2,      /* AVX2 + FMA */
    LD_CONVT_AVX512,    /* AVX-512F: 16-lane tiles, AVX2's for a last 8 columns */
} ld_convt_level;

/* Whether this CPU (and OS) runs that level (NONE: always). */
bool ld_convt_level_supported(ld_convt_level level);
/* The forced level, else the direct convolution's (AVX2 or AVX-512,
 * conv_direct_internal.h), else NONE. The fused kernel is compute-bound
 * at 8 lanes on a Zen 5 (det's 24 -> 24 at 160x160, standalone: ~100
 * GFLOP/s, the AVX2 FMA peak, on one thread); its 16-lane tiles take it
 * past that (docs/architecture.md). */
ld_convt_level ld_convt_level_active(void);
/* Tests: make conv_transpose.c use `level` (AUTO undoes it). Returns false,
 * changing nothing, when the CPU cannot run it. Global: do not call while
 * convolutions run. */
bool ld_convt_force_level(ld_convt_level level);

/* One group of a 2-D ConvTranspose with kernel 2x2, stride 2, no padding,
 * dilation 1 and output 2H x 2W, for input rows [ih0, ih1):
 *   y[m][2 ih + kh][2 iw + kw] = bias[m] + sum_c x[c][ih][iw] w[c][m][kh][kw]
 * with the sum the FMA chain over c = 0..C-1 from +0 and then bias (+0 when
 * NULL) added, exactly what ld_gemm_direct_f32 + ld_interleave2_add_f32
 * compute (conv_transpose.c's once path), bit for bit. x: C planes of H x W
 * floats; w: [C][M][2][2]; y: M planes of 2H x 2W (outputs that
 * ld_convt_streams says go out with streaming stores, fenced before
 * returning). round: NULL
 * or called on each output row once it is complete; with round_fp16_inline
 * (the caller's ld_kernel_ctx offers it and wants no float16 bits back,
 * kernel.h) the tiles round their runs of 16-48 outputs to float16
 * themselves when every value is plain (fp16_split.h, conv_direct.h's
 * scheme) and hand only the other runs, and the columns past the last
 * whole vector, to round->block: the same values and counters. Only when
 * ld_convt_level_supported(LD_CONVT_AVX2).
 * ..._avx512: the same bits with 16-lane tiles (LD_CONVT_AVX512 only),
 * streaming only outputs of 32 MiB and more (ld_convt_streams). */
/* Whether the kernel writes an output of out_bytes (all channels of the
 * group) with streaming stores (when its rows are aligned): from 4 MiB with
 * the AVX2 tiles, 32 MiB with the 16-lane ones (wide). */
bool ld_convt_streams(bool wide, int64_t out_bytes);
void ld_convt2x2_rows_f32_avx2(const float *x, const float *w, const float *bias, float *y,
                               int64_t C, int64_t M, int64_t H, int64_t W, int64_t ih0,
                               int64_t ih1, const ld_conv_round *round, bool round_fp16_inline);
void ld_convt2x2_rows_f32_avx512(const float *x, const float *w, const float *bias, float *y,
                                 int64_t C, int64_t M, int64_t H, int64_t W, int64_t ih0,
                                 int64_t ih1, const ld_conv_round *round, bool round_fp16_inline);

#endif
