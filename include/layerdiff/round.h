/* layerdiff — reduced-precision conversions and rounding.
 *
 * These are the numerics the whole product rests on, so they are exact:
 *  - fp32 -> fp16 / bf16: round-to-nearest-even, overflow to +-inf, subnormal
 *    results kept (unless flush-to-zero is asked for), NaN preserved (sign and
 *    the top payload bits) and quieted.
 *  - fp16 / bf16 -> fp32: exact widening; a signalling NaN is quieted, as the
 *    F16C instruction does.
 *  - fp32 -> tf32: fp32 with the low 13 mantissa bits rounded away (10 explicit
 *    mantissa bits, fp32's exponent range), RNE by default, also
 *    round-half-away-from-zero (what cuBLAS' "rna" conversion does) and
 *    truncation.
 * NaNs bit for bit (F16C's rules, which the portable code copies):
 *    fp32 -> fp16: sign | 0x7E00 | fp32 mantissa bits 21..13
 *    fp32 -> bf16: (bits >> 16) | 0x0040       (as AVX512-BF16's vcvtneps2bf16)
 *    fp32 -> tf32: (bits | 0x00400000) & 0xFFFFE000
 *    fp16 -> fp32: sign | 0x7FC00000 | mantissa << 13; bf16 -> fp32: bits << 16 | 0x00400000
 * The scalar functions are portable C working on bit patterns: nothing depends
 * on the floating-point environment (rounding mode, MXCSR FTZ/DAZ). The array
 * functions dispatch at run time to AVX-512 or F16C + AVX2 code when the CPU
 * has it (ld_round_cpu_features()), and give bit-identical results either way
 * (tests/exhaustive_round.c checks all 2^32 inputs). docs/numerics.md,
 * "Conversions and rounding", has the details. */
#ifndef LAYERDIFF_ROUND_H
#define LAYERDIFF_ROUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layerdiff/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ld_rounding {
    LD_ROUND_NEAREST_EVEN = 0, /* "rne" (default everywhere) */
    LD_ROUND_NEAREST_AWAY,     /* "rna": ties away from zero */
    LD_ROUND_TOWARD_ZERO       /* "rz":  truncation */
} ld_rounding;

/* The precisions a layer can compute in. */
typedef enum ld_precision {
    LD_PRECISION_FP32 = 0,
    LD_PRECISION_TF32,
    LD_PRECISION_FP16,
    LD_PRECISION_BF16
} ld_precision;

typedef struct ld_round_options {
    ld_rounding mode;      /* tf32 only; fp16 and bf16 always round to nearest
                              even (mode is ignored); unknown values mean RNE */
    bool flush_denormals;  /* results that would be subnormal in the target become +-0
                              and subnormal inputs are treated as +-0 (sign kept;
                              "subnormal result" is judged after rounding, so a
                              value that rounds up to the smallest normal stays) */
} ld_round_options;

/* Scalar conversions, portable C (RNE, subnormals kept). */
ld_fp16 ld_fp32_to_fp16(float x);
float ld_fp16_to_fp32(ld_fp16 h);
ld_bf16 ld_fp32_to_bf16(float x);
float ld_bf16_to_fp32(ld_bf16 b);
/* TF32 value held in an fp32 (low 13 mantissa bits zero). */
float ld_fp32_to_tf32(float x, ld_rounding mode);

/* Rounds x to precision p and returns it widened back to fp32, honouring
 * opts (NULL = RNE, subnormals kept). For fp32, only flush_denormals applies
 * and everything else (NaN payloads included) is returned unchanged; so is x
 * for a p outside the enum. */
float ld_round_to_precision(float x, ld_precision p, const ld_round_options *opts);

/* Array versions, bit-identical to the scalar functions. Dispatched to vector
 * code at run time; n may be anything (tails are handled). The conversions
 * need separate src and dst buffers. */
void ld_convert_fp32_to_fp16(const float *src, ld_fp16 *dst, size_t n);
void ld_convert_fp16_to_fp32(const ld_fp16 *src, float *dst, size_t n);
void ld_convert_fp32_to_bf16(const float *src, ld_bf16 *dst, size_t n);
void ld_convert_bf16_to_fp32(const ld_bf16 *src, float *dst, size_t n);
/* In place: data[i] = round(data[i]) to precision p, kept as fp32. */
void ld_round_array(float *data, size_t n, ld_precision p, const ld_round_options *opts);

/* Names: "fp32", "tf32", "fp16", "bf16"; "rne", "rna", "rz". Static strings. */
const char *ld_precision_name(ld_precision p);
bool ld_precision_from_name(const char *name, ld_precision *out);
const char *ld_rounding_name(ld_rounding mode);
bool ld_rounding_from_name(const char *name, ld_rounding *out);

/* Properties of a precision, as doubles: unit roundoff (2^-11 for fp16 and
 * tf32, 2^-8 for bf16, 2^-24 for fp32), largest finite value, smallest
 * normal, and the ulp of |x| in that precision. */
double ld_precision_unit_roundoff(ld_precision p);
double ld_precision_max(ld_precision p);
double ld_precision_min_normal(ld_precision p);
double ld_precision_ulp(ld_precision p, double x);

/* CPU features the dispatcher found and the code it picked, as a static
 * string for logs, e.g. "f16c avx2 avx512f avx512bw avx512vl avx512bf16;
 * using avx512". LAYERDIFF_NO_SIMD set to anything but "" or "0" when the
 * first conversion runs forces the portable code ("...; using portable
 * (LAYERDIFF_NO_SIMD)"); the environment is read once. */
const char *ld_round_cpu_features(void);

#ifdef __cplusplus
}
#endif
#endif
