/* layerdiff — internals of backends/emulated_count.c for tests
 * (tests/test_emulated*.c, tests/exhaustive_emulation.c). Not a public
 * header.
 *
 * The counted rounding comes in one version per instruction-set level. By
 * default the level follows the rounding library's active instruction set
 * (ld_round_isa_active in core/round_internal.h: LAYERDIFF_NO_SIMD and
 * ld_round_force_isa move both); ld_emu_force_level pins it, so a test on an
 * AVX-512 machine also runs the AVX2 code. The *_level functions take the
 * level as an argument and touch no global state, for tests that compare
 * levels from several threads. Every level gives the same values, float16
 * bits and counters, bit for bit. */
#ifndef LAYERDIFF_BACKENDS_EMULATED_COUNT_INTERNAL_H
#define LAYERDIFF_BACKENDS_EMULATED_COUNT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/emulated_count.h"
#include "core/round_internal.h"

typedef enum ld_emu_level {
    LD_EMU_LEVEL_AUTO = -1,    /* only for ld_emu_force_level: follow the rounding library */
    LD_EMU_LEVEL_PORTABLE = 0, /* scalar counting after ld_round_array */
    LD_EMU_LEVEL_AVX2,         /* AVX2 + F16C: fused fp16, bf16 and tf32 round + count */
    LD_EMU_LEVEL_AVX512F,      /* AVX-512 F: fused fp16 with 32-bit lane tests */
    LD_EMU_LEVEL_AVX512,       /* AVX-512 F + BW + VL: fused fp16 with 16-bit lane tests */
    LD_EMU_LEVEL_COUNT_
} ld_emu_level;

/* "portable", "avx2", "avx512f", "avx512" ("unknown" otherwise). Static string. */
const char *ld_emu_level_name(ld_emu_level level);
/* True if this CPU can run level's code (PORTABLE always). */
bool ld_emu_level_supported(ld_emu_level level);
/* The level the public functions use now: the forced one, else the one
 * matching ld_round_isa_active() (AVX512 -> AVX512, AVX2 -> AVX2). */
ld_emu_level ld_emu_level_active(void);
/* Tests: make the public functions use level (AUTO undoes it). Returns false,
 * changing nothing, when the CPU cannot run it. Global: do not call while
 * other threads round. */
bool ld_emu_force_level(ld_emu_level level);

/* ld_emu_round_counted on the calling thread at a given level (which must be
 * supported); with half not NULL (p fp16, o without flushing), also stores the
 * results' float16 bits, as ld_emu_round_fp16_keep. */
void ld_emu_round_counted_level(ld_emu_level level, const float *src, float *dst, ld_fp16 *half,
                                int64_t n, ld_precision p, const ld_round_options *o,
                                ld_emu_tally *t);

/* backends/emulated_count_avx2.c; call only when LD_EMU_LEVEL_AVX2 is
 * supported. Each adds its counts to *t; dst may be src.
 *  - count_pair: counts the rounding of src[m] whose results are after[m]
 *    (min_normal: the result precision's smallest normal, as fp32 bits);
 *  - round_fp16: src rounded to fp16 (RNE, subnormals kept) into dst, the
 *    float16 bits into half[m] when not NULL;
 *  - round_low_bits: src rounded with r (bf16 or tf32), fp32 subnormal
 *    inputs flushed to zero first when flush. */
void ld_emu_avx2_count_pair(const float *src, const float *after, int64_t m,
                            uint32_t min_normal, ld_emu_tally *t);
void ld_emu_avx2_round_fp16(const float *src, float *dst, ld_fp16 *half, int64_t m,
                            ld_emu_tally *t);
void ld_emu_avx2_round_low_bits(const float *src, float *dst, int64_t m, ld_low_bits_rounder r,
                                bool flush, ld_emu_tally *t);

#endif
