/* layerdiff — float32 Add, Sub, Mul and Div that round their output to
 * float16 in the arithmetic loop, for the emulated engine's output rounding
 * (ld_kernel_ctx.round_fp16_inline, include/layerdiff/kernel.h). Private to
 * backends/kernels/ (and its tests); elementwise_round.c says why. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_ELEMENTWISE_ROUND_H
#define LAYERDIFF_BACKENDS_KERNELS_ELEMENTWISE_ROUND_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/kernels/elementwise.h"

/* Levels of the fused loop. NONE: the drivers round through round_block as
 * before. AVX2: AVX2 + F16C (also on AVX-512 CPUs). */
enum { LD_EW_ROUND_NONE = 0, LD_EW_ROUND_AVX2 = 1 };

/* The level the drivers use: the forced one, else AVX2 when the rounding
 * library's active instruction set is AVX2 or AVX-512 (ld_round_isa_active:
 * LAYERDIFF_NO_SIMD turns it off), else NONE. */
int ld_ew_round_level(void);

/* Tests: pin the level (-1 undoes it). False, changing nothing, when the CPU
 * cannot run it. Global: not while kernels run. */
bool ld_ew_round_force_level(int level);

/* out[i] = a[a_row ? i : 0] op b[b_row ? i : 0] for i < n, where fn is the
 * op's float32 row function (elementwise.h; params its params), for output 0
 * of ctx, whose round_block rounds to float16 (round_fp16_inline): groups of
 * 16 whose float16 roundings count nothing there (all normal, or zeros of
 * zero results) are stored rounded; the others are written unrounded by fn
 * and passed to ctx->round_block (runs of adjacent ones in one call), so
 * every element is rounded once. With ctx->round_fp16_bits, the float16 bits
 * of the stored values go there (at their index in output 0; the caller
 * checked it has room). out may be a or b (in place). At level
 * NONE, fn writes everything and round_block gets all of it. */
void ld_ew_arith_fp16(const ld_kernel_ctx *ctx, int level, ld_ew_arith op, float *out,
                      const float *a, const float *b, bool a_row, bool b_row, int64_t n,
                      ld_ew_row_fn fn, const void *params);

#endif
