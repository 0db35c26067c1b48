/* layerdiff — the emulated backend's rounding with counting (private to
 * backends/). It runs over every float output of every layer, so it is
 * vector code where the CPU allows (AVX2 + F16C or AVX-512, following the
 * rounding library's dispatch: LAYERDIFF_NO_SIMD turns both off; levels and
 * the test switch in emulated_count_internal.h) and split over threads for
 * large tensors; the counts are integers, so the result never depends on
 * either. */
#ifndef LAYERDIFF_BACKENDS_EMULATED_COUNT_H
#define LAYERDIFF_BACKENDS_EMULATED_COUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/round.h"
#include "layerdiff/tensor.h"

/* What rounding a tensor did, and what its values held. */
typedef struct ld_emu_tally {
    int64_t overflows;   /* finite -> +-inf by the rounding */
    int64_t underflows;  /* nonzero -> +-0 by the rounding */
    int64_t subnormals;  /* results subnormal in precision p (fp16's range for fp16,
                            fp32's otherwise) */
    int64_t src_infs;    /* +-inf in the values before rounding */
    int64_t src_nans;    /* NaNs in the values (rounding keeps them) */
} ld_emu_tally;

/* dst[i] = src[i] rounded to precision p under o (NULL: RNE, subnormals
 * kept) — exactly ld_round_array's values — counted into *t. dst may be src
 * (in place). */
void ld_emu_round_counted(const float *src, float *dst, int64_t n, ld_precision p,
                          const ld_round_options *o, int threads, ld_emu_tally *t);

/* ld_emu_round_counted to fp16 (RNE, subnormals kept) that also stores the
 * results' float16 bits in half[n]: the float16 tensor an observer sees,
 * made in the same pass (a separate conversion for the observer was 12% of
 * an emulated --fp16 run of PaddleOCR det). Fused on AVX2 and AVX-512 CPUs
 * (the portable level converts after rounding). Returns true (it used to
 * decline on CPUs without the fused path; callers still handle false). */
bool ld_emu_round_fp16_keep(const float *src, float *dst, ld_fp16 *half, int64_t n,
                            int threads, ld_emu_tally *t);

/* ld_emu_round_counted on the calling thread, for a block a kernel has just
 * written (ld_kernel_ctx.round_block: the block is in cache, the kernel's
 * threads each round their own). With half not NULL (p must be fp16 and o
 * without flushing), also stores the results' float16 bits in half[n]. */
void ld_emu_round_block(const float *src, float *dst, ld_fp16 *half, int64_t n, ld_precision p,
                        const ld_round_options *o, ld_emu_tally *t);

/* Whether a float32/float16/bfloat16 tensor holds a NaN / an infinity
 * (false for other dtypes). */
void ld_emu_scan_nonfinite(const ld_tensor *t, int threads, bool *has_nan, bool *has_inf);

#endif
