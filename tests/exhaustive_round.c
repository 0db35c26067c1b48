/* Exhaustive check of core/round.c and core/round_x86.c on all 2^32 fp32
 * bit patterns, NaNs included (and all 2^16 fp16 / bf16 patterns for the
 * widening conversions). On every input:
 *  - the portable fp32 -> fp16 against the F16C instruction vcvtps2ph,
 *    AVX512-FP16's vcvtps2phx and an independent formula;
 *  - the portable fp32 -> bf16 (RNE) and tf32 (RNE, RNA, RZ) against an
 *    independent formula, and fp32 -> bf16 against AVX512-BF16's
 *    vcvtneps2bf16 (IEEE RNE, except that it turns subnormal inputs into 0);
 *  - every array function of the instruction set the dispatcher picked
 *    against those portable results, in each precision, rounding mode and
 *    flush_denormals setting (flush_denormals written out here from its
 *    definition).
 * On a sample (every 17th chunk of 2^14 inputs, about 2.5e8 inputs): the
 * other vector versions (AVX2 on an AVX-512 machine), the other portable
 * array loops and the scalar functions (the same inline helpers, one call per
 * value). LAYERDIFF_NO_SIMD=1 makes the portable loops the picked ones.
 *
 * The independent formula rounds with double-precision arithmetic: the value
 * is scaled by a power of two so that the target's spacing becomes 1, rounded
 * to an integer by the FPU (to nearest even; floor(y + 1/2) for ties away;
 * truncation) and scaled back; nothing like the integer carry trick of the
 * library. It runs as AVX-512 double code (getexp / scalef / roundscale) when
 * the CPU has AVX-512, else as scalar C (exponent read from the double, the 2^52 trick, int64
 * truncation); on 1/32 of the inputs both run and must agree, and
 * -DEXHAUSTIVE_SCALAR_REFERENCE runs the scalar one everywhere.
 *
 * One pass on two threads computes every check; each is then reported as a
 * cmocka test, skipped when the CPU lacks the hardware. Built -O2 without
 * sanitizers; about 30 s on two idle cores. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/round_internal.h"
#include "layerdiff/round.h"

#define CHUNK (1u << 14)  /* inputs per work item */
#define CHUNKS (1u << 18) /* CHUNK * CHUNKS = 2^32 */
#define CROSS_CHECK_EVERY 32 /* chunks between runs of the scalar reference next to the vector one */
/* The array functions of the instruction set the dispatcher picked run on
 * every input; the other versions (the portable loops, and AVX2 on an AVX-512
 * machine) on every sample_every-th chunk, to keep the run short. Odd, so
 * every bit pattern of the chunk index's low bits (mantissa bits 14 and up)
 * occurs. LAYERDIFF_NO_SIMD=1 makes the portable loops the picked ones;
 * LAYERDIFF_EXHAUSTIVE_FULL=1 runs everything on every input (four to five
 * times longer). */
static unsigned sample_every = 17;
static char sample_text[32] = "1/17 of inputs";
#define THREADS 2
#define MAX_CHECKS 96
#define MAX_EXAMPLES 5

typedef struct check {
    char name[112];
    const char *skip_reason; /* NULL when the check runs */
    pthread_mutex_t lock;
    unsigned long long mismatches;
    int examples;
    uint32_t example_in[MAX_EXAMPLES], example_got[MAX_EXAMPLES], example_want[MAX_EXAMPLES];
} check;

static check checks[MAX_CHECKS];
static int check_count;

static int add_check(const char *skip_reason, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_check(const char *skip_reason, const char *fmt, ...)
{
    if (check_count == MAX_CHECKS) {
        fprintf(stderr, "exhaustive_round: too many checks\n");
        exit(2);
    }
    check *c = &checks[check_count];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->name, sizeof c->name, fmt, ap);
    va_end(ap);
    c->skip_reason = skip_reason;
    pthread_mutex_init(&c->lock, NULL);
    return check_count++;
}

/* Element i of an array of 2- or 4-byte bit patterns, whatever type wrote it. */
static uint32_t load_element(const void *array, size_t size, size_t i)
{
    uint16_t h;
    uint32_t u;
    if (size == 2) {
        memcpy(&h, (const char *)array + 2 * i, sizeof h);
        return h;
    }
    memcpy(&u, (const char *)array + 4 * i, sizeof u);
    return u;
}

/* Compares got and want (n elements of size bytes) and records mismatches
 * with their inputs. memcmp first: mismatches are rare. */
static void compare(int id, const uint32_t *in, const void *got, const void *want, size_t size, size_t n)
{
    if (memcmp(got, want, n * size) == 0)
        return;
    check *c = &checks[id];
    for (size_t i = 0; i < n; i++) {
        uint32_t g = load_element(got, size, i), w = load_element(want, size, i);
        if (g == w)
            continue;
        pthread_mutex_lock(&c->lock);
        c->mismatches++;
        if (c->examples < MAX_EXAMPLES) {
            c->example_in[c->examples] = in[i];
            c->example_got[c->examples] = g;
            c->example_want[c->examples] = w;
            c->examples++;
        }
        pthread_mutex_unlock(&c->lock);
    }
}

/* ---- independent reference: round with double arithmetic ------------------------------ */

static double pow2_table[400]; /* 2^e for e in [-200, 199] */

static double pow2(int e)
{
    return pow2_table[e + 200];
}

/* The exponent of a > 0 from its double encoding (every fp32 value, fp32
 * subnormals included, is a normal double). */
static int binade(double a)
{
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    return (int)((bits >> 52) & 0x7FF) - 1023;
}

/* a > 0 (an fp32 value, so exact in double) scaled so that one unit is the
 * spacing of a format with `digits` significant bits whose smallest normal
 * has exponent min_exponent (below it the spacing stays that of min_exponent:
 * subnormals). *exponent gets the exponent that goes with the scaled value:
 * a = y * 2^(*exponent - digits + 1). Scaling by a power of two is exact. */
static double scale_to_spacing(double a, int digits, int min_exponent, int *exponent)
{
    int e = binade(a);
    *exponent = e < min_exponent ? min_exponent : e;
    return a * pow2(digits - 1 - *exponent);
}

/* Rounds y (< 2^53, at most 53 significant bits) to an integer, exactly:
 * RNE by adding and subtracting 2^52 (the FPU rounds to nearest even), RNA
 * and RZ by truncating conversions to int64. */
static double round_scaled(double y, ld_rounding mode)
{
    if (mode == LD_ROUND_NEAREST_EVEN)
        return (y + 0x1p52) - 0x1p52;
    if (mode == LD_ROUND_NEAREST_AWAY)
        return (double)(int64_t)(y + 0.5);
    return (double)(int64_t)y;
}

static float bits_to_float(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t float_to_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* The expected fp32 bits of rounding u to a format with fp32's exponent range
 * (tf32: 11 digits, bf16: 8 digits) in each of the `modes` first rounding
 * modes (RNE, RNA, RZ). NaNs: quieted, low bits cleared. */
static void reference_wide_exponent(uint32_t u, int digits, int modes, uint32_t *out)
{
    float x = bits_to_float(u);
    uint32_t low_bits = (1u << (24 - digits)) - 1u;
    if (isnan(x) || isinf(x) || x == 0.0f) {
        for (int m = 0; m < modes; m++)
            out[m] = isnan(x) ? (u | 0x00400000u) & ~low_bits : u;
        return;
    }
    int exponent;
    double y = scale_to_spacing(fabs((double)x), digits, -126, &exponent);
    double spacing = pow2(exponent - digits + 1);
    double max = (2.0 - pow2(1 - digits)) * pow2(127);
    for (int m = 0; m < modes; m++) {
        double r = round_scaled(y, (ld_rounding)m) * spacing;
        if (r > max)
            r = INFINITY;
        out[m] = float_to_bits((float)(signbit(x) ? -r : r));
    }
}

/* The expected fp16 bits: the value rounded as above, encoded from its
 * significand and exponent. NaNs: F16C's rule, quiet + top 9 payload bits. */
static uint16_t reference_fp16(uint32_t u)
{
    float x = bits_to_float(u);
    unsigned sign = signbit(x) ? 0x8000u : 0u;
    if (isnan(x))
        return (uint16_t)(sign | 0x7E00u | ((u >> 13) & 0x1FFu));
    if (x == 0.0f)
        return (uint16_t)sign;
    if (isinf(x))
        return (uint16_t)(sign | 0x7C00u);
    int exponent;
    double y = scale_to_spacing(fabs((double)x), 11, -14, &exponent);
    double significand = round_scaled(y, LD_ROUND_NEAREST_EVEN);
    if (significand == 2048.0) /* carried into the next binade */
        significand = 1024.0, exponent++;
    if (exponent > 15)
        return (uint16_t)(sign | 0x7C00u);
    if (significand < 1024.0) /* subnormal (exponent is -14) or zero */
        return (uint16_t)(sign | (unsigned)significand);
    return (uint16_t)(sign | (unsigned)(exponent + 15) << 10 | ((unsigned)significand - 1024u));
}

/* The reference results for a chunk: fp16 bits, bf16 bits, tf32 (as fp32
 * bits) per rounding mode. */
typedef struct references {
    uint16_t fp16[CHUNK], bf16[CHUNK];
    uint32_t tf32[3][CHUNK];
} references;

static void reference_scalar(const uint32_t *in, size_t n, references *r)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bf16_rne, tf32_all[3];
        r->fp16[i] = reference_fp16(in[i]);
        reference_wide_exponent(in[i], 8, 1, &bf16_rne);
        r->bf16[i] = (uint16_t)(bf16_rne >> 16);
        reference_wide_exponent(in[i], 11, 3, tf32_all);
        for (int m = 0; m < 3; m++)
            r->tf32[m][i] = tf32_all[m];
    }
}

#if defined(__x86_64__)
#define LD_TEST_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

/* The same formula on 8 doubles: a > 0 finite, scaled so the spacing of a
 * `digits`-bit format with smallest normal exponent min_exponent is 1. */
LD_TEST_AVX512 static inline __m512d scale_to_spacing_avx512(__m512d a, int digits, int min_exponent,
                                                             __m512d *shift)
{
    __m512d exponent = _mm512_max_pd(_mm512_getexp_pd(a), _mm512_set1_pd(min_exponent));
    *shift = _mm512_sub_pd(_mm512_set1_pd(digits - 1), exponent);
    return _mm512_scalef_pd(a, *shift);
}

LD_TEST_AVX512 static inline __m512d round_scaled_avx512(__m512d y, ld_rounding mode)
{
    if (mode == LD_ROUND_NEAREST_EVEN)
        return _mm512_roundscale_pd(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (mode == LD_ROUND_NEAREST_AWAY)
        return _mm512_roundscale_pd(_mm512_add_pd(y, _mm512_set1_pd(0.5)),
                                    _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    return _mm512_roundscale_pd(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
}

/* Rounded magnitude of a as fp32 bits, +inf above max, with the sign of the input. */
LD_TEST_AVX512 static inline __m256i wide_result_avx512(__m512d rounded, __m512d shift, double max,
                                                        __m256i sign)
{
    __m512d r = _mm512_scalef_pd(rounded, _mm512_sub_pd(_mm512_setzero_pd(), shift));
    __mmask8 over = _mm512_cmp_pd_mask(r, _mm512_set1_pd(max), _CMP_GT_OQ);
    r = _mm512_mask_mov_pd(r, over, _mm512_set1_pd(INFINITY));
    return _mm256_or_si256(_mm256_castps_si256(_mm512_cvtpd_ps(r)), sign);
}

/* fp16 bits of the rounded magnitude (rounded, shift as above, digits 11). */
LD_TEST_AVX512 static inline __m128i fp16_result_avx512(__m512d rounded, __m512d shift, __m256i sign)
{
    __m512d r = _mm512_scalef_pd(rounded, _mm512_sub_pd(_mm512_setzero_pd(), shift));
    __m512d exponent = _mm512_getexp_pd(r); /* after a carry too */
    __m512d fraction = _mm512_sub_pd(_mm512_scalef_pd(r, _mm512_sub_pd(_mm512_set1_pd(10), exponent)),
                                     _mm512_set1_pd(1024));
    __m256i normal = _mm256_or_si256(
        _mm256_slli_epi32(_mm512_cvttpd_epi32(_mm512_add_pd(exponent, _mm512_set1_pd(15))), 10),
        _mm512_cvttpd_epi32(fraction));
    __m256i subnormal = _mm512_cvttpd_epi32(_mm512_scalef_pd(r, _mm512_set1_pd(24))); /* r / 2^-24 */
    __mmask8 small = _mm512_cmp_pd_mask(r, _mm512_set1_pd(0x1p-14), _CMP_LT_OQ);
    __mmask8 over = _mm512_cmp_pd_mask(r, _mm512_set1_pd(65504.0), _CMP_GT_OQ);
    __m256i bits = _mm256_mask_mov_epi32(normal, small, subnormal);
    bits = _mm256_mask_mov_epi32(bits, over, _mm256_set1_epi32(0x7C00));
    return _mm256_cvtepi32_epi16(_mm256_or_si256(bits, _mm256_srli_epi32(sign, 16)));
}

LD_TEST_AVX512 static void reference_avx512(const uint32_t *in, const float *x, size_t n, references *r)
{
    const double bf16_max = (2.0 - 0x1p-7) * 0x1p127, tf32_max = (2.0 - 0x1p-10) * 0x1p127;
    for (size_t i = 0; i < n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(in + i));
        __m256i sign = _mm256_and_si256(u, _mm256_set1_epi32((int)0x80000000u));
        __m512d a = _mm512_abs_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
        __m512d shift, y;

        y = scale_to_spacing_avx512(a, 11, -14, &shift);
        __m128i h = fp16_result_avx512(round_scaled_avx512(y, LD_ROUND_NEAREST_EVEN), shift, sign);
        _mm_storeu_si128((__m128i *)(void *)(r->fp16 + i), h);

        y = scale_to_spacing_avx512(a, 8, -126, &shift);
        __m256i b = wide_result_avx512(round_scaled_avx512(y, LD_ROUND_NEAREST_EVEN), shift, bf16_max, sign);
        _mm_storeu_si128((__m128i *)(void *)(r->bf16 + i), _mm256_cvtepi32_epi16(_mm256_srli_epi32(b, 16)));

        y = scale_to_spacing_avx512(a, 11, -126, &shift);
        for (int m = 0; m < 3; m++) {
            __m256i t = wide_result_avx512(round_scaled_avx512(y, (ld_rounding)m), shift, tf32_max, sign);
            _mm256_storeu_si256((__m256i *)(void *)(r->tf32[m] + i), t);
        }
    }
    /* Zeros, infinities and NaNs did not go through the formula: the scalar
     * reference's rules for them. */
    for (size_t i = 0; i < n; i++) {
        if (isfinite(x[i]) && x[i] != 0.0f)
            continue;
        uint32_t bf16_rne;
        r->fp16[i] = reference_fp16(in[i]);
        reference_wide_exponent(in[i], 8, 1, &bf16_rne);
        r->bf16[i] = (uint16_t)(bf16_rne >> 16);
        uint32_t tf32_all[3];
        reference_wide_exponent(in[i], 11, 3, tf32_all);
        for (int m = 0; m < 3; m++)
            r->tf32[m][i] = tf32_all[m];
    }
}
#endif

/* ---- hardware conversions --------------------------------------------------------------- */

#if defined(__x86_64__)
__attribute__((target("f16c,avx2"))) static void f16c_fp32_to_fp16(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
}

__attribute__((target("f16c,avx2"))) static uint32_t f16c_fp16_to_fp32(uint16_t h)
{
    float f = _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16((short)h)));
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

__attribute__((target("avx512fp16,avx512f,avx512vl,avx512bw"))) static void
fp16x_fp32_to_fp16(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __m256h h = _mm512_cvtx_roundps_ph(_mm512_loadu_ps(src + i),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_si256((__m256i *)(void *)(dst + i), _mm256_castph_si256(h));
    }
}

__attribute__((target("avx512bf16,avx512f,avx512vl"))) static void
hw_fp32_to_bf16(const float *src, uint16_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __m256bh b = _mm512_cvtneps_pbh(_mm512_loadu_ps(src + i));
        memcpy(dst + i, &b, sizeof b);
    }
}
#endif

/* ---- the pass ------------------------------------------------------------------------- */

static bool have_f16c, have_fp16x, have_bf16_hw, have_vector_reference;
static bool have_isa[LD_ROUND_ISA_COUNT_];
static int id_references_agree, id_f16c, id_fp16x, id_fp16_ref, id_bf16_ref, id_bf16_hw, id_tf32_ref[3];
static int id_scalar_fp16, id_scalar_bf16, id_scalar_tf32[3];

/* The settings ld_round_array is checked in. */
typedef struct variant {
    ld_precision p;
    ld_rounding mode;
    bool flush;
} variant;

static const variant variants[] = {
    {LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, false}, {LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, true},
    {LD_PRECISION_BF16, LD_ROUND_NEAREST_EVEN, false}, {LD_PRECISION_BF16, LD_ROUND_NEAREST_EVEN, true},
    {LD_PRECISION_TF32, LD_ROUND_NEAREST_EVEN, false}, {LD_PRECISION_TF32, LD_ROUND_NEAREST_AWAY, false},
    {LD_PRECISION_TF32, LD_ROUND_TOWARD_ZERO, false},  {LD_PRECISION_TF32, LD_ROUND_NEAREST_EVEN, true},
    {LD_PRECISION_TF32, LD_ROUND_NEAREST_AWAY, true},  {LD_PRECISION_TF32, LD_ROUND_TOWARD_ZERO, true},
    {LD_PRECISION_FP32, LD_ROUND_NEAREST_EVEN, true},
};
#define VARIANTS (sizeof variants / sizeof variants[0])

static int id_convert_fp16[LD_ROUND_ISA_COUNT_], id_convert_bf16[LD_ROUND_ISA_COUNT_];
static int id_round[LD_ROUND_ISA_COUNT_][VARIANTS]; /* -1: not checked */
static int id_scalar_round[VARIANTS];

/* fp16 / bf16 -> fp32 of all 2^16 patterns by the portable scalar code,
 * checked in check_widening(); used to state what rounding to fp16 / bf16
 * and back must give. */
static uint32_t fp16_widened[1u << 16], bf16_widened[1u << 16];

static atomic_uint next_chunk;

typedef struct buffers {
    uint32_t in[CHUNK];
    float x[CHUNK];
    references ref, scalar_ref;
    uint16_t fp16[CHUNK], bf16[CHUNK]; /* the portable scalar conversions */
    uint32_t tf32[3][CHUNK];
    uint16_t other16[CHUNK];
    uint32_t expected[CHUNK], other32[CHUNK];
} buffers;

static void check_references(buffers *b, unsigned chunk)
{
#if defined(__x86_64__)
    if (have_vector_reference) {
        reference_avx512(b->in, b->x, CHUNK, &b->ref);
        if (chunk % CROSS_CHECK_EVERY == 0) {
            reference_scalar(b->in, CHUNK, &b->scalar_ref);
            compare(id_references_agree, b->in, b->ref.fp16, b->scalar_ref.fp16, 2, CHUNK);
            compare(id_references_agree, b->in, b->ref.bf16, b->scalar_ref.bf16, 2, CHUNK);
            for (int m = 0; m < 3; m++)
                compare(id_references_agree, b->in, b->ref.tf32[m], b->scalar_ref.tf32[m], 4, CHUNK);
        }
        return;
    }
#endif
    (void)chunk;
    reference_scalar(b->in, CHUNK, &b->ref);
}

/* The portable conversions, as the array functions run them, against the
 * reference formula and the hardware. Their results are what every other
 * version and the scalar functions are compared with. */
static void check_portable_conversions(buffers *b)
{
    ld_convert_fp32_to_fp16_isa(LD_ROUND_ISA_PORTABLE, b->x, (ld_fp16 *)(void *)b->fp16, CHUNK);
    compare(id_fp16_ref, b->in, b->fp16, b->ref.fp16, 2, CHUNK);
    ld_convert_fp32_to_bf16_isa(LD_ROUND_ISA_PORTABLE, b->x, (ld_bf16 *)(void *)b->bf16, CHUNK);
    compare(id_bf16_ref, b->in, b->bf16, b->ref.bf16, 2, CHUNK);
    for (int m = LD_ROUND_NEAREST_EVEN; m <= LD_ROUND_TOWARD_ZERO; m++) {
        ld_round_options opts = {(ld_rounding)m, false};
        float *tf32 = (float *)(void *)b->tf32[m];
        memcpy(tf32, b->x, sizeof b->x);
        ld_round_array_isa(LD_ROUND_ISA_PORTABLE, tf32, CHUNK, LD_PRECISION_TF32, &opts);
        compare(id_tf32_ref[m], b->in, b->tf32[m], b->ref.tf32[m], 4, CHUNK);
    }
#if defined(__x86_64__)
    if (have_f16c) {
        f16c_fp32_to_fp16(b->x, b->other16, CHUNK);
        compare(id_f16c, b->in, b->fp16, b->other16, 2, CHUNK);
    }
    if (have_fp16x) {
        fp16x_fp32_to_fp16(b->x, b->other16, CHUNK);
        compare(id_fp16x, b->in, b->fp16, b->other16, 2, CHUNK);
    }
    if (have_bf16_hw) {
        /* The hardware turns subnormal inputs into zeros, and is RNE elsewhere. */
        uint16_t *want = (uint16_t *)(void *)b->other32;
        for (size_t i = 0; i < CHUNK; i++) {
            bool subnormal = (b->in[i] & 0x7F800000u) == 0;
            want[i] = subnormal ? (uint16_t)((b->in[i] >> 16) & 0x8000u) : b->bf16[i];
        }
        hw_fp32_to_bf16(b->x, b->other16, CHUNK);
        compare(id_bf16_hw, b->in, b->other16, want, 2, CHUNK);
    }
#endif
}

/* The scalar functions of round.h (the same inline helpers as the portable
 * loops, one call per value) on a sample. */
static void check_scalar_functions(buffers *b)
{
    for (size_t i = 0; i < CHUNK; i++)
        b->other16[i] = ld_fp32_to_fp16(b->x[i]).bits;
    compare(id_scalar_fp16, b->in, b->other16, b->fp16, 2, CHUNK);
    for (size_t i = 0; i < CHUNK; i++)
        b->other16[i] = ld_fp32_to_bf16(b->x[i]).bits;
    compare(id_scalar_bf16, b->in, b->other16, b->bf16, 2, CHUNK);
    for (int m = LD_ROUND_NEAREST_EVEN; m <= LD_ROUND_TOWARD_ZERO; m++) {
        for (size_t i = 0; i < CHUNK; i++)
            b->other32[i] = float_to_bits(ld_fp32_to_tf32(b->x[i], (ld_rounding)m));
        compare(id_scalar_tf32[m], b->in, b->other32, b->tf32[m], 4, CHUNK);
    }
}

static bool is_subnormal(uint32_t u)
{
    return (u & 0x7F800000u) == 0;
}

/* What ld_round_array must give, from the checked scalar conversions and the
 * definition of flush_denormals: fp32 subnormal inputs count as +-0, results
 * subnormal in the target become +-0. One simple loop per case. */
static void expected_rounding(buffers *b, const variant *v)
{
    const uint32_t *in = b->in;
    uint32_t *want = b->expected;
    switch (v->p) {
    case LD_PRECISION_FP16:
        for (size_t i = 0; i < CHUNK; i++) {
            uint16_t h = b->fp16[i];
            bool subnormal_result = (h & 0x7C00u) == 0;
            want[i] = fp16_widened[v->flush && subnormal_result ? h & 0x8000u : h];
        }
        break;
    case LD_PRECISION_BF16:
        for (size_t i = 0; i < CHUNK; i++)
            want[i] = bf16_widened[b->bf16[i]];
        break;
    case LD_PRECISION_TF32:
        memcpy(want, b->tf32[v->mode], sizeof b->expected);
        break;
    default:
        memcpy(want, in, sizeof b->expected);
        break;
    }
    /* A chunk's inputs share their top 18 bits, the exponent among them. */
    if (v->flush && v->p != LD_PRECISION_FP16 && is_subnormal(in[0]))
        for (size_t i = 0; i < CHUNK; i++)
            want[i] = is_subnormal(in[i]) ? in[i] & 0x80000000u : want[i];
}

static ld_round_isa dispatched_isa;

static bool run_isa(int isa, unsigned chunk)
{
    return have_isa[isa] && (isa == (int)dispatched_isa || chunk % sample_every == 0);
}

/* Every version of the array functions against the portable conversions
 * (the portable ones themselves are the reference's subjects above), and
 * ld_round_to_precision on the sample. */
static void check_arrays(buffers *b, unsigned chunk)
{
    for (int isa = LD_ROUND_ISA_AVX2; isa < LD_ROUND_ISA_COUNT_; isa++) {
        if (!run_isa(isa, chunk))
            continue;
        ld_convert_fp32_to_fp16_isa((ld_round_isa)isa, b->x, (ld_fp16 *)(void *)b->other16, CHUNK);
        compare(id_convert_fp16[isa], b->in, b->other16, b->fp16, 2, CHUNK);
        ld_convert_fp32_to_bf16_isa((ld_round_isa)isa, b->x, (ld_bf16 *)(void *)b->other16, CHUNK);
        compare(id_convert_bf16[isa], b->in, b->other16, b->bf16, 2, CHUNK);
    }
    for (size_t v = 0; v < VARIANTS; v++) {
        ld_round_options opts = {variants[v].mode, variants[v].flush};
        expected_rounding(b, &variants[v]);
        for (int isa = LD_ROUND_ISA_PORTABLE; isa < LD_ROUND_ISA_COUNT_; isa++) {
            if (id_round[isa][v] < 0 || !run_isa(isa, chunk))
                continue;
            float *data = (float *)(void *)b->other32;
            memcpy(data, b->x, sizeof b->x);
            ld_round_array_isa((ld_round_isa)isa, data, CHUNK, variants[v].p, &opts);
            compare(id_round[isa][v], b->in, b->other32, b->expected, 4, CHUNK);
        }
        if (chunk % sample_every == 0) {
            for (size_t i = 0; i < CHUNK; i++)
                b->other32[i] = float_to_bits(ld_round_to_precision(b->x[i], variants[v].p, &opts));
            compare(id_scalar_round[v], b->in, b->other32, b->expected, 4, CHUNK);
        }
    }
}

static void *worker(void *arg)
{
    (void)arg;
    buffers *b = malloc(sizeof *b);
    if (b == NULL) {
        fprintf(stderr, "exhaustive_round: out of memory\n");
        exit(2);
    }
    for (;;) {
        unsigned chunk = atomic_fetch_add(&next_chunk, 1u);
        if (chunk >= CHUNKS)
            break;
        for (uint32_t i = 0; i < CHUNK; i++)
            b->in[i] = chunk * CHUNK + i;
        memcpy(b->x, b->in, sizeof b->x);
        check_references(b, chunk);
        check_portable_conversions(b);
        if (chunk % sample_every == 0)
            check_scalar_functions(b);
        check_arrays(b, chunk);
    }
    free(b);
    return NULL;
}

/* ---- widening: all 2^16 fp16 and bf16 patterns ------------------------------------------------ */

static int id_widen_fp16_ref, id_widen_f16c, id_widen_fp16_isa[LD_ROUND_ISA_COUNT_];
static int id_widen_bf16_ref, id_widen_bf16_isa[LD_ROUND_ISA_COUNT_];

/* fp16 -> fp32 from the fields with ldexp; NaNs quieted (bit 22 set). */
static uint32_t widen_fp16_reference(uint16_t h)
{
    int exponent = (h >> 10) & 31, mantissa = h & 1023;
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    if (exponent == 31 && mantissa != 0)
        return sign | 0x7FC00000u | (uint32_t)mantissa << 13;
    double value = exponent == 31 ? INFINITY
                   : exponent == 0 ? ldexp(mantissa, -24) : ldexp(1024 + mantissa, exponent - 25);
    return float_to_bits((float)value) | sign;
}

static void check_widening(void)
{
    static uint32_t in[1u << 16], want[1u << 16], got[1u << 16];
    static uint16_t patterns[1u << 16];
    for (uint32_t i = 0; i < (1u << 16); i++) {
        in[i] = i;
        patterns[i] = (uint16_t)i;
        fp16_widened[i] = float_to_bits(ld_fp16_to_fp32((ld_fp16){(uint16_t)i}));
        bf16_widened[i] = float_to_bits(ld_bf16_to_fp32((ld_bf16){(uint16_t)i}));
    }
    for (uint32_t i = 0; i < (1u << 16); i++)
        want[i] = widen_fp16_reference((uint16_t)i);
    compare(id_widen_fp16_ref, in, fp16_widened, want, 4, 1u << 16);
#if defined(__x86_64__)
    if (have_f16c) {
        for (uint32_t i = 0; i < (1u << 16); i++)
            want[i] = f16c_fp16_to_fp32((uint16_t)i);
        compare(id_widen_f16c, in, fp16_widened, want, 4, 1u << 16);
    }
#endif
    for (uint32_t i = 0; i < (1u << 16); i++) { /* bf16 is the top half of an fp32 */
        bool nan = (i & 0x7F80u) == 0x7F80u && (i & 0x7Fu) != 0;
        want[i] = i << 16 | (nan ? 0x00400000u : 0u);
    }
    compare(id_widen_bf16_ref, in, bf16_widened, want, 4, 1u << 16);
    for (int isa = LD_ROUND_ISA_PORTABLE; isa < LD_ROUND_ISA_COUNT_; isa++) {
        if (!have_isa[isa])
            continue;
        ld_convert_fp16_to_fp32_isa((ld_round_isa)isa, (const ld_fp16 *)(const void *)patterns,
                                    (float *)(void *)got, 1u << 16);
        compare(id_widen_fp16_isa[isa], in, got, fp16_widened, 4, 1u << 16);
        ld_convert_bf16_to_fp32_isa((ld_round_isa)isa, (const ld_bf16 *)(const void *)patterns,
                                    (float *)(void *)got, 1u << 16);
        compare(id_widen_bf16_isa[isa], in, got, bf16_widened, 4, 1u << 16);
    }
}

/* ---- setup and reporting ------------------------------------------------------------------ */

/* "fp16", "tf32 rna flush_denormals", ... Static buffer per variant. */
static const char *variant_name(const variant *v)
{
    static char names[VARIANTS][48];
    char *name = names[v - variants];
    bool tf32 = v->p == LD_PRECISION_TF32;
    snprintf(name, sizeof names[0], "%s%s%s%s", ld_precision_name(v->p), tf32 ? " " : "",
             tf32 ? ld_rounding_name(v->mode) : "", v->flush ? " flush_denormals" : "");
    return name;
}

static void define_checks(void)
{
#if defined(__x86_64__)
    have_f16c = __builtin_cpu_supports("f16c");
    have_fp16x = __builtin_cpu_supports("avx512fp16");
    have_bf16_hw = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl");
    have_vector_reference = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#endif
#ifdef EXHAUSTIVE_SCALAR_REFERENCE /* -DEXHAUSTIVE_SCALAR_REFERENCE: the slow reference on every input */
    have_vector_reference = false;
#endif
    for (int isa = LD_ROUND_ISA_PORTABLE; isa < LD_ROUND_ISA_COUNT_; isa++)
        have_isa[isa] = ld_round_isa_supported((ld_round_isa)isa);
    dispatched_isa = ld_round_isa_detected();
    const char *full = getenv("LAYERDIFF_EXHAUSTIVE_FULL");
    if (full != NULL && full[0] != '\0' && strcmp(full, "0") != 0) {
        sample_every = 1;
        snprintf(sample_text, sizeof sample_text, "all inputs");
    }

    id_widen_fp16_ref = add_check(NULL, "fp16->fp32 portable == ldexp formula (all 2^16)");
    id_widen_f16c = add_check(have_f16c ? NULL : "this CPU has no F16C",
                              "fp16->fp32 portable == F16C vcvtph2ps (all 2^16)");
    id_widen_bf16_ref = add_check(NULL, "bf16->fp32 portable == shift, NaNs quieted (all 2^16)");
    id_references_agree = add_check(have_vector_reference ? NULL : "the scalar reference is the only one",
                                    "reference formula: AVX-512 double code == scalar C (1/%d of inputs)",
                                    CROSS_CHECK_EVERY);
    id_fp16_ref = add_check(NULL, "ld_convert_fp32_to_fp16 portable == reference formula");
    id_f16c = add_check(have_f16c ? NULL : "this CPU has no F16C",
                        "ld_convert_fp32_to_fp16 portable == F16C vcvtps2ph");
    id_fp16x = add_check(have_fp16x ? NULL : "this CPU has no AVX512-FP16",
                         "ld_convert_fp32_to_fp16 portable == AVX512-FP16 vcvtps2phx");
    id_bf16_ref = add_check(NULL, "ld_convert_fp32_to_bf16 portable == reference formula (rne)");
    id_bf16_hw = add_check(have_bf16_hw ? NULL : "this CPU has no AVX512-BF16",
                           "ld_convert_fp32_to_bf16 portable == AVX512-BF16 vcvtneps2bf16 "
                           "(which flushes subnormal inputs)");
    for (int m = LD_ROUND_NEAREST_EVEN; m <= LD_ROUND_TOWARD_ZERO; m++)
        id_tf32_ref[m] = add_check(NULL, "ld_round_array portable tf32 %s == reference formula",
                                   ld_rounding_name((ld_rounding)m));
    id_scalar_fp16 = add_check(NULL, "ld_fp32_to_fp16 == portable array (%s)", sample_text);
    id_scalar_bf16 = add_check(NULL, "ld_fp32_to_bf16 == portable array (%s)", sample_text);
    for (int m = LD_ROUND_NEAREST_EVEN; m <= LD_ROUND_TOWARD_ZERO; m++)
        id_scalar_tf32[m] = add_check(NULL, "ld_fp32_to_tf32 %s == portable array (%s)",
                                      ld_rounding_name((ld_rounding)m), sample_text);
    for (size_t v = 0; v < VARIANTS; v++)
        id_scalar_round[v] = add_check(NULL, "ld_round_to_precision %s == expected (%s)",
                                       variant_name(&variants[v]), sample_text);
    for (int isa = LD_ROUND_ISA_PORTABLE; isa < LD_ROUND_ISA_COUNT_; isa++) {
        const char *skip = have_isa[isa] ? NULL : "this CPU cannot run this vector code";
        const char *isa_name = ld_round_isa_name((ld_round_isa)isa);
        const char *coverage = isa == (int)dispatched_isa ? "dispatched, all inputs" : sample_text;
        id_widen_fp16_isa[isa] = add_check(skip, "ld_convert_fp16_to_fp32 %s == scalar (all 2^16)", isa_name);
        id_widen_bf16_isa[isa] = add_check(skip, "ld_convert_bf16_to_fp32 %s == scalar (all 2^16)", isa_name);
        if (isa != LD_ROUND_ISA_PORTABLE) { /* the portable ones are checked against the formula */
            id_convert_fp16[isa] = add_check(skip, "ld_convert_fp32_to_fp16 %s == portable (%s)", isa_name,
                                             coverage);
            id_convert_bf16[isa] = add_check(skip, "ld_convert_fp32_to_bf16 %s == portable (%s)", isa_name,
                                             coverage);
        }
        for (size_t v = 0; v < VARIANTS; v++) {
            bool source = isa == LD_ROUND_ISA_PORTABLE && variants[v].p == LD_PRECISION_TF32 &&
                          !variants[v].flush;
            id_round[isa][v] = source ? -1
                                      : add_check(skip, "ld_round_array %s %s == expected (%s)", isa_name,
                                                  variant_name(&variants[v]), coverage);
        }
    }
}

static void report_check(void **state)
{
    check *c = *state;
    if (c->skip_reason != NULL) {
        print_message("skipped: %s (%s)\n", c->name, c->skip_reason);
        skip();
        return;
    }
    if (c->mismatches == 0)
        return;
    print_error("%s: %llu inputs differ; first ones found:\n", c->name, c->mismatches);
    for (int i = 0; i < c->examples; i++)
        print_error("  input 0x%08x: got 0x%08x, want 0x%08x\n", c->example_in[i], c->example_got[i],
                    c->example_want[i]);
    fail();
}

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + 1e-9 * (double)(now.tv_nsec - start->tv_nsec);
}

int main(void)
{
    for (int e = -200; e < 200; e++)
        pow2_table[e + 200] = ldexp(1.0, e);
    define_checks();
    printf("exhaustive_round: cpu: %s; reference formula: %s\n", ld_round_cpu_features(),
           have_vector_reference ? "AVX-512 double code (scalar C on 1/32 of inputs)" : "scalar C");

    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    check_widening();
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        if (pthread_create(&threads[t], NULL, worker, NULL) != 0) {
            fprintf(stderr, "exhaustive_round: cannot start a thread\n");
            return 2;
        }
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    printf("exhaustive_round: %d checks over all 2^32 fp32 inputs in %.1f s on %d threads\n", check_count,
           seconds_since(&start), THREADS);
    fflush(stdout);

    struct CMUnitTest tests[MAX_CHECKS];
    for (int i = 0; i < check_count; i++)
        tests[i] = (struct CMUnitTest){checks[i].name, report_check, NULL, NULL, &checks[i]};
    int failed = _cmocka_run_group_tests("exhaustive_round", tests, (size_t)check_count, NULL, NULL);

    int skipped = 0;
    for (int i = 0; i < check_count; i++)
        skipped += checks[i].skip_reason != NULL;
    fflush(stderr);
    printf("exhaustive_round: %d passed, %d failed, %d skipped\n", check_count - skipped - failed, failed,
           skipped);
    return failed == 0 ? 0 : 1;
}
