/* layerdiff — reduced-precision conversions and rounding: the portable scalar
 * code, the run-time dispatcher of the array functions, names and precision
 * properties. The vector code is in round_x86.c; docs/numerics.md
 * ("Conversions and rounding") states the semantics and how they are proven.
 *
 * Everything here works on bit patterns with integer arithmetic: no result
 * depends on the floating-point environment (rounding mode, MXCSR FTZ/DAZ)
 * and no floating-point exception is raised. */
#include "layerdiff/round.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/round_internal.h"

static uint32_t float_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bits_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static bool f32_is_nan(uint32_t u)
{
    return (u & LD_F32_ABS) > LD_F32_EXPONENT;
}

/* flush_denormals on an input: an fp32 subnormal becomes a zero of its sign. */
static uint32_t flush_subnormal(uint32_t u)
{
    return (u & LD_F32_EXPONENT) == 0 ? (u & LD_F32_SIGN) : u;
}

/* ---- fp16 ------------------------------------------------------------------ */

/* Magnitude bits of the fp16 nearest (ties to even) to the non-negative fp32
 * with bits a < 2^-14, i.e. a subnormal fp16 or zero (or 0x0400, the smallest
 * normal, when a rounds up to it; its encoding follows on naturally). */
static uint16_t fp16_small_magnitude(uint32_t a)
{
    if (a <= 0x33000000u) /* <= 2^-25, half the smallest subnormal: ties to even 0 */
        return 0;
    /* a = significand * 2^(exponent - 150) with exponent 102..112 here, so
     * a / 2^-24 (the fp16 subnormal spacing) = significand >> (126 - exponent). */
    uint32_t exponent = a >> 23;
    uint32_t significand = (a & 0x007FFFFFu) | 0x00800000u;
    uint32_t shift = 126u - exponent; /* 14..24 */
    uint32_t kept = significand >> shift;
    uint32_t rest = significand & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (kept & 1u)))
        kept++;
    return (uint16_t)kept;
}

/* fp32 bits -> fp16 bits; ld_fp32_to_fp16 in round.h. Static so that the
 * array loops below inline it. */
static inline uint16_t fp32_to_fp16_bits(uint32_t u)
{
    uint16_t sign = (uint16_t)((u >> 16) & LD_F16_SIGN);
    uint32_t a = u & LD_F32_ABS;
    uint16_t h;
    if (a > LD_F32_EXPONENT) {
        /* NaN, as F16C's vcvtps2ph: quiet, sign kept, the top 9 payload bits
         * below fp32's quiet bit kept, the low 13 dropped. */
        h = (uint16_t)(sign | LD_F16_EXPONENT | LD_F16_QUIET | ((a >> 13) & 0x01FFu));
    } else if (a >= 0x477FF000u) {
        /* >= 65520 = 65504 + half an ulp; 65504's last bit is odd, so the tie
         * goes up too: +-inf (and inf stays inf). */
        h = (uint16_t)(sign | LD_F16_EXPONENT);
    } else if (a >= 0x38800000u) {
        /* Normal fp16 (>= 2^-14): rebias the exponent (127 -> 15, i.e.
         * subtract 112 << 23) and round the 13 dropped bits to nearest even.
         * A carry out of the mantissa bumps the exponent, as it should. */
        uint32_t rebiased = a - 0x38000000u;
        uint32_t rounded = rebiased + 0x0FFFu + ((rebiased >> 13) & 1u);
        h = (uint16_t)(sign | (rounded >> 13));
    } else {
        h = (uint16_t)(sign | fp16_small_magnitude(a));
    }
    return h;
}

/* fp16 bits -> fp32 bits; ld_fp16_to_fp32 in round.h. */
static inline uint32_t fp16_bits_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & LD_F16_SIGN) << 16;
    uint32_t exponent = (h >> 10) & 0x1Fu;
    uint32_t mantissa = h & 0x03FFu;
    uint32_t u;
    if (exponent == 0x1Fu) {
        /* inf, or NaN: payload moved up 13 bits and, as F16C does, quieted. */
        u = sign | LD_F32_EXPONENT | (mantissa << 13) | (mantissa != 0 ? LD_F32_QUIET : 0u);
    } else if (exponent != 0) {
        u = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        u = sign;
    } else {
        /* Subnormal: mantissa * 2^-24 with its top bit at position top
         * (0..9) is 2^(top - 24) * 1.f, a normal fp32. */
        uint32_t top = 31u - (uint32_t)__builtin_clz(mantissa);
        uint32_t fraction = (mantissa << (23u - top)) & 0x007FFFFFu;
        u = sign | ((top + 103u) << 23) | fraction;
    }
    return u;
}

ld_fp16 ld_fp32_to_fp16(float x)
{
    ld_fp16 h = {fp32_to_fp16_bits(float_bits(x))};
    return h;
}

float ld_fp16_to_fp32(ld_fp16 h)
{
    return bits_float(fp16_bits_to_fp32(h.bits));
}

/* Round trip through fp16, with flush_denormals on the fp16 result (an fp32
 * subnormal input becomes +-0 in fp16 anyway). */
static inline float round_fp16(float x, bool flush)
{
    uint16_t h = fp32_to_fp16_bits(float_bits(x));
    if (flush && (h & LD_F16_EXPONENT) == 0)
        h &= LD_F16_SIGN;
    return bits_float(fp16_bits_to_fp32(h));
}

/* ---- bf16 and tf32: rounding away low mantissa bits ----------------------------- */

/* Unknown modes round to nearest even. */
static inline ld_low_bits_rounder rounder_make(unsigned drop_bits, ld_rounding mode)
{
    uint32_t half = 1u << (drop_bits - 1u);
    ld_low_bits_rounder r = {drop_bits, half - 1u, 1u, ~((1u << drop_bits) - 1u)};
    if (mode == LD_ROUND_NEAREST_AWAY) {
        r.add = half;
        r.add_lsb = 0;
    } else if (mode == LD_ROUND_TOWARD_ZERO) {
        r.add = 0;
        r.add_lsb = 0;
    }
    return r;
}

ld_low_bits_rounder ld_low_bits_rounder_make(unsigned drop_bits, ld_rounding mode)
{
    return rounder_make(drop_bits, mode);
}

/* See ld_low_bits_rounder in round_internal.h. Cannot wrap: the largest
 * non-NaN pattern is 0xFF800000 and add is at most 0x8000. */
static inline uint32_t round_low_bits(uint32_t u, ld_low_bits_rounder r)
{
    if (f32_is_nan(u))
        return (u | LD_F32_QUIET) & r.keep_mask;
    return (u + r.add + ((u >> r.drop_bits) & r.add_lsb)) & r.keep_mask;
}

ld_bf16 ld_fp32_to_bf16(float x)
{
    ld_low_bits_rounder rne = rounder_make(16, LD_ROUND_NEAREST_EVEN);
    ld_bf16 b = { (uint16_t)(round_low_bits(float_bits(x), rne) >> 16) };
    return b;
}

float ld_bf16_to_fp32(ld_bf16 b)
{
    uint32_t u = (uint32_t)b.bits << 16;
    if (f32_is_nan(u))
        u |= LD_F32_QUIET; /* quieted, like fp16 -> fp32 */
    return bits_float(u);
}

float ld_fp32_to_tf32(float x, ld_rounding mode)
{
    return bits_float(round_low_bits(float_bits(x), rounder_make(13, mode)));
}

/* ---- rounding to a precision ---------------------------------------------------- */

static ld_low_bits_rounder rounder_for(ld_precision p, const ld_round_options *opts)
{
    if (p == LD_PRECISION_TF32)
        return rounder_make(13, opts != NULL ? opts->mode : LD_ROUND_NEAREST_EVEN);
    return rounder_make(16, LD_ROUND_NEAREST_EVEN);
}

float ld_round_to_precision(float x, ld_precision p, const ld_round_options *opts)
{
    bool flush = opts != NULL && opts->flush_denormals;
    uint32_t u = float_bits(x);
    switch (p) {
    case LD_PRECISION_FP16:
        return round_fp16(x, flush);
    case LD_PRECISION_BF16:
    case LD_PRECISION_TF32:
        /* Same exponent range as fp32: only subnormal inputs give subnormal
         * results, so flushing the input is flushing the result too. */
        if (flush)
            u = flush_subnormal(u);
        return bits_float(round_low_bits(u, rounder_for(p, opts)));
    case LD_PRECISION_FP32:
    default:
        return flush ? bits_float(flush_subnormal(u)) : x;
    }
}

/* ---- dispatch ------------------------------------------------------------------- */

static pthread_mutex_t detect_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int detected_isa = -1; /* -1: not detected yet */
static atomic_int forced_isa = LD_ROUND_ISA_AUTO;
static char features_text[192] = "";

const char *ld_round_isa_name(ld_round_isa isa)
{
    switch (isa) {
    case LD_ROUND_ISA_PORTABLE: return "portable";
    case LD_ROUND_ISA_AVX2: return "avx2";
    case LD_ROUND_ISA_AVX512: return "avx512";
    default: return "unknown";
    }
}

bool ld_round_isa_supported(ld_round_isa isa)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (isa == LD_ROUND_ISA_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    if (isa == LD_ROUND_ISA_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
#endif
    return isa == LD_ROUND_ISA_PORTABLE;
}

/* Called with detect_lock held. */
static void detect_locked(void)
{
    const char *no_simd = getenv("LAYERDIFF_NO_SIMD");
    bool forced_portable = no_simd != NULL && no_simd[0] != '\0' && strcmp(no_simd, "0") != 0;
    ld_round_isa best = LD_ROUND_ISA_PORTABLE;
    for (int isa = LD_ROUND_ISA_AVX512; isa > LD_ROUND_ISA_PORTABLE; isa--) {
        if (ld_round_isa_supported((ld_round_isa)isa)) {
            best = (ld_round_isa)isa;
            break;
        }
    }
    char flags[128] = "";
#if defined(__x86_64__)
    static const char *const names[] = {"f16c", "avx2", "avx512f", "avx512bw", "avx512vl",
                                        "avx512bf16", "avx512fp16"};
    const bool have[] = {
        __builtin_cpu_supports("f16c"), __builtin_cpu_supports("avx2"),
        __builtin_cpu_supports("avx512f"), __builtin_cpu_supports("avx512bw"),
        __builtin_cpu_supports("avx512vl"), __builtin_cpu_supports("avx512bf16"),
        __builtin_cpu_supports("avx512fp16")};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (have[i]) {
            strncat(flags, flags[0] != '\0' ? " " : "", sizeof flags - strlen(flags) - 1);
            strncat(flags, names[i], sizeof flags - strlen(flags) - 1);
        }
    }
#endif
    ld_round_isa chosen = forced_portable ? LD_ROUND_ISA_PORTABLE : best;
    snprintf(features_text, sizeof features_text, "%s; using %s%s", flags[0] != '\0' ? flags : "none",
             ld_round_isa_name(chosen), forced_portable ? " (LAYERDIFF_NO_SIMD)" : "");
    atomic_store_explicit(&detected_isa, (int)chosen, memory_order_release);
}

ld_round_isa ld_round_isa_detected(void)
{
    int isa = atomic_load_explicit(&detected_isa, memory_order_acquire);
    if (isa >= 0)
        return (ld_round_isa)isa;
    pthread_mutex_lock(&detect_lock);
    if (atomic_load_explicit(&detected_isa, memory_order_acquire) < 0)
        detect_locked();
    isa = atomic_load_explicit(&detected_isa, memory_order_acquire);
    pthread_mutex_unlock(&detect_lock);
    return (ld_round_isa)isa;
}

void ld_round_redetect(void)
{
    pthread_mutex_lock(&detect_lock);
    detect_locked();
    pthread_mutex_unlock(&detect_lock);
}

ld_round_isa ld_round_isa_active(void)
{
    int forced = atomic_load_explicit(&forced_isa, memory_order_relaxed);
    return forced >= 0 ? (ld_round_isa)forced : ld_round_isa_detected();
}

bool ld_round_force_isa(ld_round_isa isa)
{
    if (isa != LD_ROUND_ISA_AUTO && !ld_round_isa_supported(isa))
        return false;
    atomic_store_explicit(&forced_isa, (int)isa, memory_order_relaxed);
    return true;
}

void ld_round_force_portable(bool on)
{
    ld_round_force_isa(on ? LD_ROUND_ISA_PORTABLE : LD_ROUND_ISA_AUTO);
}

const char *ld_round_cpu_features(void)
{
    ld_round_isa_detected();
    return features_text;
}

/* ---- array functions ------------------------------------------------------------ */

void ld_convert_fp32_to_fp16_isa(ld_round_isa isa, const float *src, ld_fp16 *dst, size_t n)
{
#if defined(__x86_64__)
    if (isa == LD_ROUND_ISA_AVX512) {
        ld_x86_avx512_fp32_to_fp16(src, dst, n);
        return;
    }
    if (isa == LD_ROUND_ISA_AVX2) {
        ld_x86_avx2_fp32_to_fp16(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i].bits = fp32_to_fp16_bits(float_bits(src[i]));
}

void ld_convert_fp16_to_fp32_isa(ld_round_isa isa, const ld_fp16 *src, float *dst, size_t n)
{
#if defined(__x86_64__)
    if (isa == LD_ROUND_ISA_AVX512) {
        ld_x86_avx512_fp16_to_fp32(src, dst, n);
        return;
    }
    if (isa == LD_ROUND_ISA_AVX2) {
        ld_x86_avx2_fp16_to_fp32(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = bits_float(fp16_bits_to_fp32(src[i].bits));
}

void ld_convert_fp32_to_bf16_isa(ld_round_isa isa, const float *src, ld_bf16 *dst, size_t n)
{
#if defined(__x86_64__)
    if (isa == LD_ROUND_ISA_AVX512) {
        ld_x86_avx512_fp32_to_bf16(src, dst, n);
        return;
    }
    if (isa == LD_ROUND_ISA_AVX2) {
        ld_x86_avx2_fp32_to_bf16(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = ld_fp32_to_bf16(src[i]);
}

void ld_convert_bf16_to_fp32_isa(ld_round_isa isa, const ld_bf16 *src, float *dst, size_t n)
{
#if defined(__x86_64__)
    if (isa == LD_ROUND_ISA_AVX512) {
        ld_x86_avx512_bf16_to_fp32(src, dst, n);
        return;
    }
    if (isa == LD_ROUND_ISA_AVX2) {
        ld_x86_avx2_bf16_to_fp32(src, dst, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        dst[i] = ld_bf16_to_fp32(src[i]);
}

static void round_fp16_array(ld_round_isa isa, float *data, size_t n, bool flush)
{
#if defined(__x86_64__)
    if (isa == LD_ROUND_ISA_AVX512) {
        ld_x86_avx512_round_fp16(data, n, flush);
        return;
    }
    if (isa == LD_ROUND_ISA_AVX2) {
        ld_x86_avx2_round_fp16(data, n, flush);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        data[i] = round_fp16(data[i], flush);
}

static void round_low_bits_array(ld_round_isa isa, float *data, size_t n, ld_low_bits_rounder r,
                                 bool flush)
{
#if defined(__x86_64__)
    if (isa == LD_ROUND_ISA_AVX512) {
        ld_x86_avx512_round_low_bits(data, n, r, flush);
        return;
    }
    if (isa == LD_ROUND_ISA_AVX2) {
        ld_x86_avx2_round_low_bits(data, n, r, flush);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) {
        uint32_t u = float_bits(data[i]);
        data[i] = bits_float(round_low_bits(flush ? flush_subnormal(u) : u, r));
    }
}

static void flush_fp32_array(ld_round_isa isa, float *data, size_t n)
{
#if defined(__x86_64__)
    if (isa == LD_ROUND_ISA_AVX512) {
        ld_x86_avx512_flush_fp32(data, n);
        return;
    }
    if (isa == LD_ROUND_ISA_AVX2) {
        ld_x86_avx2_flush_fp32(data, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        data[i] = bits_float(flush_subnormal(float_bits(data[i])));
}

void ld_round_array_isa(ld_round_isa isa, float *data, size_t n, ld_precision p,
                        const ld_round_options *opts)
{
    bool flush = opts != NULL && opts->flush_denormals;
    switch (p) {
    case LD_PRECISION_FP16:
        round_fp16_array(isa, data, n, flush);
        break;
    case LD_PRECISION_BF16:
    case LD_PRECISION_TF32:
        round_low_bits_array(isa, data, n, rounder_for(p, opts), flush);
        break;
    case LD_PRECISION_FP32:
    default:
        if (flush)
            flush_fp32_array(isa, data, n);
        break;
    }
}

void ld_convert_fp32_to_fp16(const float *src, ld_fp16 *dst, size_t n)
{
    ld_convert_fp32_to_fp16_isa(ld_round_isa_active(), src, dst, n);
}

void ld_convert_fp16_to_fp32(const ld_fp16 *src, float *dst, size_t n)
{
    ld_convert_fp16_to_fp32_isa(ld_round_isa_active(), src, dst, n);
}

void ld_convert_fp32_to_bf16(const float *src, ld_bf16 *dst, size_t n)
{
    ld_convert_fp32_to_bf16_isa(ld_round_isa_active(), src, dst, n);
}

void ld_convert_bf16_to_fp32(const ld_bf16 *src, float *dst, size_t n)
{
    ld_convert_bf16_to_fp32_isa(ld_round_isa_active(), src, dst, n);
}

void ld_round_array(float *data, size_t n, ld_precision p, const ld_round_options *opts)
{
    ld_round_array_isa(ld_round_isa_active(), data, n, p, opts);
}

/* ---- names ---------------------------------------------------------------------- */

const char *ld_precision_name(ld_precision p)
{
    switch (p) {
    case LD_PRECISION_FP32: return "fp32";
    case LD_PRECISION_TF32: return "tf32";
    case LD_PRECISION_FP16: return "fp16";
    case LD_PRECISION_BF16: return "bf16";
    default: return "unknown";
    }
}

bool ld_precision_from_name(const char *name, ld_precision *out)
{
    static const struct { const char *name; ld_precision p; } table[] = {
        {"fp32", LD_PRECISION_FP32}, {"float32", LD_PRECISION_FP32}, {"float", LD_PRECISION_FP32},
        {"tf32", LD_PRECISION_TF32},
        {"fp16", LD_PRECISION_FP16}, {"float16", LD_PRECISION_FP16}, {"half", LD_PRECISION_FP16},
        {"bf16", LD_PRECISION_BF16}, {"bfloat16", LD_PRECISION_BF16},
    };
    for (size_t i = 0; name != NULL && i < sizeof table / sizeof table[0]; i++) {
        if (strcasecmp(name, table[i].name) == 0) {
            if (out != NULL)
                *out = table[i].p;
            return true;
        }
    }
    return false;
}

const char *ld_rounding_name(ld_rounding mode)
{
    switch (mode) {
    case LD_ROUND_NEAREST_EVEN: return "rne";
    case LD_ROUND_NEAREST_AWAY: return "rna";
    case LD_ROUND_TOWARD_ZERO: return "rz";
    default: return "unknown";
    }
}

bool ld_rounding_from_name(const char *name, ld_rounding *out)
{
    for (int mode = LD_ROUND_NEAREST_EVEN; name != NULL && mode <= LD_ROUND_TOWARD_ZERO; mode++) {
        if (strcasecmp(name, ld_rounding_name((ld_rounding)mode)) == 0) {
            if (out != NULL)
                *out = (ld_rounding)mode;
            return true;
        }
    }
    return false;
}

/* ---- properties ----------------------------------------------------------------- */

typedef struct precision_format {
    int digits;       /* significand bits, the implicit one included */
    int min_exponent; /* exponent of the smallest normal */
    int max_exponent; /* exponent of the largest finite */
} precision_format;

static bool format_of(ld_precision p, precision_format *f)
{
    switch (p) {
    case LD_PRECISION_FP32: *f = (precision_format){24, -126, 127}; return true;
    case LD_PRECISION_TF32: *f = (precision_format){11, -126, 127}; return true;
    case LD_PRECISION_FP16: *f = (precision_format){11, -14, 15}; return true;
    case LD_PRECISION_BF16: *f = (precision_format){8, -126, 127}; return true;
    default: return false;
    }
}

double ld_precision_unit_roundoff(ld_precision p)
{
    precision_format f;
    return format_of(p, &f) ? ldexp(1.0, -f.digits) : NAN;
}

double ld_precision_max(ld_precision p)
{
    precision_format f;
    return format_of(p, &f) ? ldexp(2.0 - ldexp(1.0, 1 - f.digits), f.max_exponent) : NAN;
}

double ld_precision_min_normal(ld_precision p)
{
    precision_format f;
    return format_of(p, &f) ? ldexp(1.0, f.min_exponent) : NAN;
}

double ld_precision_ulp(ld_precision p, double x)
{
    precision_format f;
    if (!format_of(p, &f) || isnan(x))
        return NAN;
    if (isinf(x))
        return INFINITY;
    int exponent = f.min_exponent; /* zero and subnormals: the subnormal spacing */
    if (x != 0.0) {
        int e;
        frexp(x, &e); /* |x| = m * 2^e, m in [0.5, 1) */
        if (e - 1 > exponent)
            exponent = e - 1;
    }
    return ldexp(1.0, exponent - (f.digits - 1));
}
