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
 * The scalar functions are portable C. The array functions dispatch at run time
 * to F16C / AVX-512 code when the CPU has it (ld_round_cpu_features()), and
 * give bit-identical results either way. */
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
    ld_rounding mode;      /* fp16/bf16 support only NEAREST_EVEN; tf32 all three */
    bool flush_denormals;  /* results that would be subnormal in the target become +-0
                              and subnormal inputs are treated as +-0 */
} ld_round_options;

/* Scalar conversions, portable C (RNE, subnormals kept). */
ld_fp16 ld_fp32_to_fp16(float x);
float ld_fp16_to_fp32(ld_fp16 h);
ld_bf16 ld_fp32_to_bf16(float x);
float ld_bf16_to_fp32(ld_bf16 b);
/* TF32 value held in an fp32 (low 13 mantissa bits zero). */
float ld_fp32_to_tf32(float x, ld_rounding mode);

/* Rounds x to precision p and returns it widened back to fp32, honouring
 * opts (NULL = RNE, subnormals kept). For fp32, only flush_denormals applies. */
float ld_round_to_precision(float x, ld_precision p, const ld_round_options *opts);

/* Array versions; src and dst may be the same buffer for the in-place ones.
 * Dispatched to vector code at run time. */
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

/* CPU features the dispatcher found, as a static string for logs, e.g.
 * "f16c avx512f avx512fp16". LAYERDIFF_NO_SIMD=1 in the environment forces
 * the portable code (tests use it to compare both). */
const char *ld_round_cpu_features(void);

#ifdef __cplusplus
}
#endif
#endif
