/* layerdiff — internals of the conversions and rounding (core/round.c and
 * core/round_x86.c), also used by tests/test_round.c and
 * tests/exhaustive_round.c. Not a public header.
 *
 * The array functions of layerdiff/round.h come in one version per
 * instruction set (ld_round_isa). The public functions run the one the
 * dispatcher picked; the *_isa() functions below take the instruction set as
 * an argument, so tests can compare every version against the portable
 * scalar code from several threads at once without touching global state. */
#ifndef LAYERDIFF_CORE_ROUND_INTERNAL_H
#define LAYERDIFF_CORE_ROUND_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layerdiff/round.h"

#ifdef __cplusplus
extern "C" {
#endif

/* fp32 bit fields. */
#define LD_F32_SIGN      0x80000000u
#define LD_F32_ABS       0x7FFFFFFFu
#define LD_F32_EXPONENT  0x7F800000u /* also the bits of +inf */
#define LD_F32_QUIET     0x00400000u /* top mantissa bit: set in a quiet NaN */
/* fp16 bit fields. */
#define LD_F16_SIGN      0x8000u
#define LD_F16_EXPONENT  0x7C00u
#define LD_F16_QUIET     0x0200u

typedef enum ld_round_isa {
    LD_ROUND_ISA_AUTO = -1,   /* only for ld_round_force_isa: back to what was detected */
    LD_ROUND_ISA_PORTABLE = 0,
    LD_ROUND_ISA_AVX2,        /* F16C + AVX2, 256-bit vectors, tails via a stack buffer */
    LD_ROUND_ISA_AVX512,      /* AVX-512 F + BW + VL, 512-bit vectors, masked tails */
    LD_ROUND_ISA_COUNT_
} ld_round_isa;

/* "portable", "avx2", "avx512" ("unknown" otherwise). Static string. */
const char *ld_round_isa_name(ld_round_isa isa);
/* True if this CPU (and OS) can run isa's code. PORTABLE is always true. */
bool ld_round_isa_supported(ld_round_isa isa);
/* The best supported instruction set, or PORTABLE when LAYERDIFF_NO_SIMD is
 * set to anything but "" or "0". Detected once, on first use. */
ld_round_isa ld_round_isa_detected(void);
/* What the public array functions use now: the forced one, else the detected one. */
ld_round_isa ld_round_isa_active(void);
/* Tests: make the public array functions use isa (LD_ROUND_ISA_AUTO undoes
 * it). Returns false, changing nothing, if the CPU cannot run isa. Global:
 * do not call while other threads convert. */
bool ld_round_force_isa(ld_round_isa isa);
/* Same as ld_round_force_isa(on ? PORTABLE : AUTO). */
void ld_round_force_portable(bool on);
/* Tests: detect again, re-reading LAYERDIFF_NO_SIMD (detection is otherwise
 * done once). Rewrites the ld_round_cpu_features() string in place. */
void ld_round_redetect(void);

/* The array functions for a given instruction set. isa must be supported
 * (ld_round_isa_supported); anything else runs the portable code. */
void ld_convert_fp32_to_fp16_isa(ld_round_isa isa, const float *src, ld_fp16 *dst, size_t n);
void ld_convert_fp16_to_fp32_isa(ld_round_isa isa, const ld_fp16 *src, float *dst, size_t n);
void ld_convert_fp32_to_bf16_isa(ld_round_isa isa, const float *src, ld_bf16 *dst, size_t n);
void ld_convert_bf16_to_fp32_isa(ld_round_isa isa, const ld_bf16 *src, float *dst, size_t n);
void ld_round_array_isa(ld_round_isa isa, float *data, size_t n, ld_precision p,
                        const ld_round_options *opts);

/* Rounding away the low `drop_bits` bits of an fp32 bit pattern u (13 for
 * tf32, 16 for bf16), the same way in the scalar and the vector code:
 *   NaN:       (u | LD_F32_QUIET) & keep_mask   (quieted, sign and top payload kept)
 *   otherwise: (u + add + ((u >> drop_bits) & add_lsb)) & keep_mask
 * RNE adds half an ulp minus one plus the kept lsb (so a tie goes to the even
 * neighbour), RNA adds half an ulp, RZ adds nothing. A carry out of the
 * mantissa bumps the exponent, and from the largest finite value gives +-inf
 * (0x7F800000), so overflow, subnormals and infinities need no special case;
 * sign-magnitude makes the same add work for negative values. */
typedef struct ld_low_bits_rounder {
    unsigned drop_bits;
    uint32_t add;
    uint32_t add_lsb;   /* 1 for RNE, 0 otherwise */
    uint32_t keep_mask; /* ~((1 << drop_bits) - 1) */
} ld_low_bits_rounder;

ld_low_bits_rounder ld_low_bits_rounder_make(unsigned drop_bits, ld_rounding mode);

#if defined(__x86_64__)
/* core/round_x86.c. Call only when ld_round_isa_supported() says so. The
 * rounding kernels work in place on n floats; flush_inputs turns fp32
 * subnormals into +-0 first; flush_outputs (fp16) turns fp16 subnormal results
 * into +-0. */
void ld_x86_avx2_fp32_to_fp16(const float *src, ld_fp16 *dst, size_t n);
void ld_x86_avx2_fp16_to_fp32(const ld_fp16 *src, float *dst, size_t n);
void ld_x86_avx2_fp32_to_bf16(const float *src, ld_bf16 *dst, size_t n);
void ld_x86_avx2_bf16_to_fp32(const ld_bf16 *src, float *dst, size_t n);
void ld_x86_avx2_round_fp16(float *data, size_t n, bool flush_outputs);
void ld_x86_avx2_round_low_bits(float *data, size_t n, ld_low_bits_rounder r, bool flush_inputs);
void ld_x86_avx2_flush_fp32(float *data, size_t n);

void ld_x86_avx512_fp32_to_fp16(const float *src, ld_fp16 *dst, size_t n);
void ld_x86_avx512_fp16_to_fp32(const ld_fp16 *src, float *dst, size_t n);
void ld_x86_avx512_fp32_to_bf16(const float *src, ld_bf16 *dst, size_t n);
void ld_x86_avx512_bf16_to_fp32(const ld_bf16 *src, float *dst, size_t n);
void ld_x86_avx512_round_fp16(float *data, size_t n, bool flush_outputs);
void ld_x86_avx512_round_low_bits(float *data, size_t n, ld_low_bits_rounder r, bool flush_inputs);
void ld_x86_avx512_flush_fp32(float *data, size_t n);
#endif

#ifdef __cplusplus
}
#endif
#endif
