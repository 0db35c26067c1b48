/* layerdiff — float32 Clip and Relu that round their output to float16 in
 * the clamping loop, for the emulated engine's output rounding
 * (ld_kernel_ctx.round_fp16_inline, include/layerdiff/kernel.h), as
 * elementwise_round.h does for Add/Sub/Mul/Div. Private to
 * backends/kernels/ (and its tests); activation_round.c says why. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_ACTIVATION_ROUND_H
#define LAYERDIFF_BACKENDS_KERNELS_ACTIVATION_ROUND_H

#include <stdbool.h>

#include "backends/kernels/elementwise.h"

/* Levels of the fused loop. NONE: the driver rounds through round_block
 * (ld_ew_map_output). AVX2: AVX2 + F16C (also on AVX-512 CPUs). */
enum { LD_ACT_ROUND_NONE = 0, LD_ACT_ROUND_AVX2 = 1 };

/* The level Clip and Relu use: the forced one, else AVX2 when the rounding
 * library's active instruction set is AVX2 or AVX-512 (ld_round_isa_active:
 * LAYERDIFF_NO_SIMD turns it off), else NONE. */
int ld_act_round_level(void);

/* Tests: pin the level (-1 undoes it). False, changing nothing, when the CPU
 * cannot run it. Global: not while kernels run. */
bool ld_act_round_force_level(int level);

/* Output 0 of ctx = clamp of the float32 tensor in to [lo, hi] with the
 * compares of Clip's row function (x < lo ? lo : x, then > hi ? hi: NaN and
 * a zero's sign kept; Relu is lo 0, hi +inf), rounded to float16 in the
 * loop, when ctx's round_block rounds output 0 to float16
 * (round_fp16_inline), output 0 is float32 with in's element count, the
 * level is AVX2 and round_fp16_bits (if set) has room for output 0: groups
 * of 16 whose float16 roundings count nothing there (all normal, or zeros
 * from zeros) are stored rounded (their float16 bits in round_fp16_bits);
 * the others are written unrounded by fn (the op's float32 map function,
 * params its params) and passed to round_block, so every element is rounded
 * once; then bit 0 of rounded_outputs is set and it returns true. Otherwise
 * it does nothing and returns false: the caller runs its usual driver. in
 * may be output 0 (in place). */
bool ld_act_clamp_fp16(ld_kernel_ctx *ctx, const ld_tensor *in, float lo, float hi,
                       ld_ew_map_fn fn, const void *params);

/* The same loop over one block the caller owns, on the calling thread (the
 * fused chains of backends/exec_fuse.c): out[0, n) = clamp of in[0, n),
 * rounded by groups of 16 as above, the other groups written by fn and
 * handed to ctx->round_block (which must round to float16; only round_block
 * and round_user of ctx are read; no float16 bits are kept). False, doing
 * nothing, when the level is not AVX2. in may be out. */
bool ld_act_clamp_fp16_block(const ld_kernel_ctx *ctx, float *out, const float *in, int64_t n,
                             float lo, float hi, ld_ew_map_fn fn, const void *params);

#endif
