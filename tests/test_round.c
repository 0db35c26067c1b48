/* Unit tests for core/round.c and core/round_x86.c: edge cases of every
 * conversion and rounding mode, all 65,536 fp16 values against the F16C
 * instruction and an ldexp() computation, precision properties, names, and
 * every vector version of the array functions against the scalar code
 * (odd lengths for the tails, with guards after the end, and under a hostile
 * MXCSR). All 2^32 fp32 inputs are covered by tests/exhaustive_round.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/round_internal.h"
#include "layerdiff/round.h"

static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float bitsf(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint16_t to_fp16(uint32_t u)
{
    return ld_fp32_to_fp16(bitsf(u)).bits;
}

static uint32_t from_fp16(uint16_t h)
{
    return fbits(ld_fp16_to_fp32((ld_fp16){h}));
}

static uint16_t to_bf16(uint32_t u)
{
    return ld_fp32_to_bf16(bitsf(u)).bits;
}

static uint32_t from_bf16(uint16_t b)
{
    return fbits(ld_bf16_to_fp32((ld_bf16){b}));
}

/* Fails the test with the context of a wrong bit pattern. */
#define EXPECT_BITS(got, want, ...)                                                       \
    do {                                                                                  \
        unsigned long long got_ = (got), want_ = (want);                                  \
        if (got_ != want_) {                                                              \
            print_error(__VA_ARGS__);                                                     \
            print_error(": got 0x%llx, want 0x%llx\n", got_, want_);                      \
            fail();                                                                       \
        }                                                                                 \
    } while (0)

/* ---- fp16 --------------------------------------------------------------------- */

static void test_fp32_to_fp16_edges(void **state)
{
    (void)state;
    static const struct { uint32_t in; uint16_t out; const char *what; } cases[] = {
        {0x00000000, 0x0000, "+0"}, {0x80000000, 0x8000, "-0"},
        {0x7F800000, 0x7C00, "+inf"}, {0xFF800000, 0xFC00, "-inf"},
        {0x3F800000, 0x3C00, "1"}, {0xBFC00000, 0xBE00, "-1.5"},
        {0x3F801000, 0x3C00, "1 + 2^-11: tie, even neighbour is below"},
        {0x3F803000, 0x3C02, "1 + 3*2^-11: tie, even neighbour is above"},
        {0x3F801001, 0x3C01, "just above a tie"}, {0x3F800FFF, 0x3C00, "just below a tie"},
        {0x477FE000, 0x7BFF, "65504, largest finite"},
        {0x477FD000, 0x7BFE, "65488: tie between 65472 and 65504, even is 65472"},
        {0x477FEFFF, 0x7BFF, "just below 65520"},
        {0x477FF000, 0x7C00, "65520: tie above 65504 (odd) goes to inf"},
        {0xC77FF000, 0xFC00, "-65520"}, {0x477FF001, 0x7C00, "above 65520"},
        {0x47800000, 0x7C00, "65536"}, {0x7F7FFFFF, 0x7C00, "FLT_MAX"},
        {0x33800000, 0x0001, "2^-24, smallest subnormal"},
        {0x33000000, 0x0000, "2^-25: tie between 0 and 2^-24, even is 0"},
        {0xB3000000, 0x8000, "-2^-25"}, {0x33000001, 0x0001, "just above 2^-25"},
        {0x33C00000, 0x0002, "1.5 * 2^-24: tie, goes to 2"},
        {0x34200000, 0x0002, "2.5 * 2^-24: tie, goes to 2"},
        {0x34600000, 0x0004, "3.5 * 2^-24: tie, goes to 4"},
        {0x387FC000, 0x03FF, "largest subnormal"},
        {0x387FE000, 0x0400, "1023.5 * 2^-24: tie, rounds up to the smallest normal"},
        {0x38800000, 0x0400, "2^-14, smallest normal"},
        {0x38801000, 0x0400, "2^-14 + half an ulp: tie, even"},
        {0x00000001, 0x0000, "smallest fp32 subnormal"}, {0x807FFFFF, 0x8000, "-largest fp32 subnormal"},
        {0x7FC00000, 0x7E00, "quiet NaN"}, {0xFFC00000, 0xFE00, "-quiet NaN"},
        {0x7F800001, 0x7E00, "signalling NaN, payload only in the low bits: quieted"},
        {0x7FA00000, 0x7F00, "signalling NaN, top payload kept and quieted"},
        {0x7F802000, 0x7E01, "NaN, lowest kept payload bit"},
        {0x7FBFE000, 0x7FFF, "signalling NaN, all kept payload bits"},
        {0xFFFFFFFF, 0xFFFF, "-NaN all ones"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        EXPECT_BITS(to_fp16(cases[i].in), cases[i].out, "fp32 0x%08x (%s) -> fp16", cases[i].in,
                    cases[i].what);
}

static void test_fp16_to_fp32_edges(void **state)
{
    (void)state;
    static const struct { uint16_t in; uint32_t out; } cases[] = {
        {0x0000, 0x00000000}, {0x8000, 0x80000000}, {0x0001, 0x33800000}, {0x8001, 0xB3800000},
        {0x0200, 0x38000000}, {0x03FF, 0x387FC000}, {0x0400, 0x38800000}, {0x3C00, 0x3F800000},
        {0x7BFF, 0x477FE000}, {0xFBFF, 0xC77FE000}, {0x7C00, 0x7F800000}, {0xFC00, 0xFF800000},
        {0x7C01, 0x7FC02000}, /* signalling NaN: quieted, as F16C does */
        {0xFD00, 0xFFE00000}, {0x7E00, 0x7FC00000}, {0x7FFF, 0x7FFFE000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        EXPECT_BITS(from_fp16(cases[i].in), cases[i].out, "fp16 0x%04x -> fp32", cases[i].in);
}

/* Independent value of an fp16 bit pattern, from its fields with ldexp(). */
static uint32_t fp16_reference(uint16_t h)
{
    int negative = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
    double value = exponent == 0 ? ldexp(mantissa, -24) : ldexp(1024 + mantissa, exponent - 25);
    if (exponent == 31)
        value = INFINITY; /* NaNs are checked separately */
    return fbits((float)(negative ? -value : value));
}

static void test_fp16_all_against_ldexp(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xFFFF; h++) {
        uint32_t got = from_fp16((uint16_t)h);
        bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
        if (!nan) {
            EXPECT_BITS(got, fp16_reference((uint16_t)h), "fp16 0x%04x -> fp32", h);
            /* and back: every non-NaN fp16 survives the round trip */
            EXPECT_BITS(to_fp16(got), h, "fp16 0x%04x -> fp32 -> fp16", h);
            continue;
        }
        assert_true(isnan(bitsf(got)));
        EXPECT_BITS(got >> 31, h >> 15, "sign of NaN 0x%04x", h);
        EXPECT_BITS((got >> 13) & 0x3FF, (h & 0x3FF) | 0x200, "payload of NaN 0x%04x, quieted", h);
        EXPECT_BITS(got & 0x1FFF, 0, "low bits of NaN 0x%04x", h);
        EXPECT_BITS(to_fp16(got), h | 0x200, "NaN 0x%04x -> fp32 -> fp16", h);
    }
}

#if defined(__x86_64__)
__attribute__((target("f16c,avx2"))) static uint32_t f16c_fp16_to_fp32(uint16_t h)
{
    return fbits(_mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16((short)h))));
}

__attribute__((target("f16c,avx2"))) static uint16_t f16c_fp32_to_fp16(uint32_t u)
{
    __m128i h = _mm_cvtps_ph(_mm_set1_ps(bitsf(u)), _MM_FROUND_TO_NEAREST_INT);
    return (uint16_t)_mm_extract_epi16(h, 0);
}

__attribute__((target("avx512bf16,avx512f,avx512vl"))) static uint16_t hw_fp32_to_bf16(uint32_t u)
{
    __m128bh b = _mm_cvtneps_pbh(_mm_set1_ps(bitsf(u)));
    uint16_t out;
    memcpy(&out, &b, sizeof out);
    return out;
}
#endif

static bool cpu_has(const char *what)
{
#if defined(__x86_64__)
    if (strcmp(what, "f16c") == 0)
        return __builtin_cpu_supports("f16c");
    if (strcmp(what, "avx512bf16") == 0)
        return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vl");
#endif
    (void)what;
    return false;
}

static void test_fp16_all_against_f16c(void **state)
{
    (void)state;
    if (!cpu_has("f16c")) {
        print_message("skipped: this CPU has no F16C to check fp16 against\n");
        skip();
    }
#if defined(__x86_64__)
    for (uint32_t h = 0; h <= 0xFFFF; h++)
        EXPECT_BITS(from_fp16((uint16_t)h), f16c_fp16_to_fp32((uint16_t)h), "fp16 0x%04x -> fp32 vs F16C",
                    h);
    uint64_t x = 0x9E3779B97F4A7C15u;
    for (int i = 0; i < (1 << 20); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t u = (uint32_t)(x >> 16);
        EXPECT_BITS(to_fp16(u), f16c_fp32_to_fp16(u), "fp32 0x%08x -> fp16 vs F16C", u);
    }
#endif
}

/* ---- bf16 and tf32 ----------------------------------------------------------------- */

static void test_bf16_edges(void **state)
{
    (void)state;
    static const struct { uint32_t in; uint16_t out; const char *what; } cases[] = {
        {0x00000000, 0x0000, "+0"}, {0x80000000, 0x8000, "-0"},
        {0x7F800000, 0x7F80, "+inf"}, {0xFF800000, 0xFF80, "-inf"},
        {0x3F800000, 0x3F80, "1"}, {0x3F808000, 0x3F80, "tie, even below"},
        {0x3F818000, 0x3F82, "tie, even above"}, {0xBF818000, 0xBF82, "negative tie"},
        {0x3F808001, 0x3F81, "just above a tie"}, {0x3F807FFF, 0x3F80, "just below a tie"},
        {0x7F7FFFFF, 0x7F80, "FLT_MAX overflows"}, {0x7F7F7FFF, 0x7F7F, "largest finite bf16 kept"},
        {0x7F7F8000, 0x7F80, "tie above the largest finite (odd): inf"}, {0xFF7F8000, 0xFF80, "-inf"},
        {0x00008000, 0x0000, "subnormal tie to 0"}, {0x00018000, 0x0002, "subnormal tie to 2"},
        {0x00008001, 0x0001, "subnormal above a tie"}, {0x00000001, 0x0000, "smallest subnormal"},
        {0x007FFFFF, 0x0080, "largest subnormal rounds to the smallest normal"},
        {0x80018000, 0x8002, "negative subnormal tie"},
        {0x7FC00000, 0x7FC0, "quiet NaN"}, {0x7F800001, 0x7FC0, "signalling NaN, low payload"},
        {0x7F810000, 0x7FC1, "signalling NaN, kept payload"}, {0xFFFFFFFF, 0xFFFF, "-NaN all ones"},
        {0x7F80FFFF, 0x7FC0, "NaN that the rounding add would carry out of"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        EXPECT_BITS(to_bf16(cases[i].in), cases[i].out, "fp32 0x%08x (%s) -> bf16", cases[i].in,
                    cases[i].what);
    static const struct { uint16_t in; uint32_t out; } widen[] = {
        {0x7F81, 0x7FC10000}, {0xFF80, 0xFF800000}, {0x0001, 0x00010000}, {0x3F80, 0x3F800000},
        {0x7FC0, 0x7FC00000}, {0xFFFF, 0xFFFF0000}, {0x8000, 0x80000000},
    };
    for (size_t i = 0; i < sizeof widen / sizeof widen[0]; i++)
        EXPECT_BITS(from_bf16(widen[i].in), widen[i].out, "bf16 0x%04x -> fp32", widen[i].in);
}

static void test_bf16_all_widen(void **state)
{
    (void)state;
    for (uint32_t b = 0; b <= 0xFFFF; b++) {
        bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0;
        uint32_t want = (b << 16) | (nan ? 0x00400000u : 0u);
        EXPECT_BITS(from_bf16((uint16_t)b), want, "bf16 0x%04x -> fp32", b);
        EXPECT_BITS(to_bf16(want), nan ? (b | 0x40) : b, "bf16 0x%04x -> fp32 -> bf16", b);
    }
}

static void test_bf16_against_hardware(void **state)
{
    (void)state;
    if (!cpu_has("avx512bf16")) {
        print_message("skipped: this CPU has no AVX512-BF16 to check bf16 against\n");
        skip();
    }
#if defined(__x86_64__)
    /* vcvtneps2bf16 always flushes subnormal inputs; otherwise it is IEEE RNE. */
    uint64_t x = 0x2545F4914F6CDD1Du;
    for (int i = 0; i < (1 << 20); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t u = (uint32_t)(x >> 16);
        bool subnormal = (u & 0x7F800000u) == 0;
        EXPECT_BITS(hw_fp32_to_bf16(u), subnormal ? (u >> 16) & 0x8000u : to_bf16(u),
                    "fp32 0x%08x -> bf16 vs vcvtneps2bf16", u);
        ld_round_options flush = {LD_ROUND_NEAREST_EVEN, true};
        EXPECT_BITS(fbits(ld_round_to_precision(bitsf(u), LD_PRECISION_BF16, &flush)),
                    (uint32_t)hw_fp32_to_bf16(u) << 16,
                    "fp32 0x%08x rounded to bf16 with flush vs vcvtneps2bf16", u);
    }
#endif
}

static void test_tf32_modes(void **state)
{
    (void)state;
    static const struct { uint32_t in, rne, rna, rz; } cases[] = {
        {0x3F801000, 0x3F800000, 0x3F802000, 0x3F800000}, /* tie, even below */
        {0x3F803000, 0x3F804000, 0x3F804000, 0x3F802000}, /* tie, even above */
        {0xBF801000, 0xBF800000, 0xBF802000, 0xBF800000}, /* negative tie: rna goes away from 0 */
        {0x3F801001, 0x3F802000, 0x3F802000, 0x3F800000},
        {0x3F800FFF, 0x3F800000, 0x3F800000, 0x3F800000},
        {0x3FFFF000, 0x40000000, 0x40000000, 0x3FFFE000}, /* carry into the exponent */
        {0x7F7FFFFF, 0x7F800000, 0x7F800000, 0x7F7FE000}, /* overflow; rz keeps the largest */
        {0x7F7FF000, 0x7F800000, 0x7F800000, 0x7F7FE000},
        {0x7F7FEFFF, 0x7F7FE000, 0x7F7FE000, 0x7F7FE000},
        {0xFF7FF000, 0xFF800000, 0xFF800000, 0xFF7FE000},
        {0x7F800000, 0x7F800000, 0x7F800000, 0x7F800000},
        {0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000},
        {0x7F800001, 0x7FC00000, 0x7FC00000, 0x7FC00000}, /* signalling NaN quieted */
        {0xFFA03FFF, 0xFFE02000, 0xFFE02000, 0xFFE02000},
        {0x00001000, 0x00000000, 0x00002000, 0x00000000}, /* subnormal ties */
        {0x00003000, 0x00004000, 0x00004000, 0x00002000},
        {0x80001000, 0x80000000, 0x80002000, 0x80000000},
        {0x007FF000, 0x00800000, 0x00800000, 0x007FE000},
        {0x00000000, 0x00000000, 0x00000000, 0x00000000},
        {0x80000000, 0x80000000, 0x80000000, 0x80000000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float x = bitsf(cases[i].in);
        EXPECT_BITS(fbits(ld_fp32_to_tf32(x, LD_ROUND_NEAREST_EVEN)), cases[i].rne, "tf32 rne 0x%08x",
                    cases[i].in);
        EXPECT_BITS(fbits(ld_fp32_to_tf32(x, LD_ROUND_NEAREST_AWAY)), cases[i].rna, "tf32 rna 0x%08x",
                    cases[i].in);
        EXPECT_BITS(fbits(ld_fp32_to_tf32(x, LD_ROUND_TOWARD_ZERO)), cases[i].rz, "tf32 rz 0x%08x",
                    cases[i].in);
        ld_round_options opts = {LD_ROUND_NEAREST_AWAY, false};
        EXPECT_BITS(fbits(ld_round_to_precision(x, LD_PRECISION_TF32, &opts)), cases[i].rna,
                    "round_to_precision tf32 rna 0x%08x", cases[i].in);
    }
}

/* ---- ld_round_to_precision and flush_denormals ---------------------------------------- */

static void test_round_to_precision_defaults(void **state)
{
    (void)state;
    /* NULL options: RNE, subnormals kept. */
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x3F801000), LD_PRECISION_TF32, NULL)), 0x3F800000, "tf32");
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x3F818000), LD_PRECISION_BF16, NULL)), 0x3F820000, "bf16");
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x477FF000), LD_PRECISION_FP16, NULL)), 0x7F800000, "fp16");
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x33800000), LD_PRECISION_FP16, NULL)), 0x33800000, "fp16");
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x7F800001), LD_PRECISION_FP16, NULL)), 0x7FC00000, "NaN");
    /* fp32 is the identity, NaN payloads and subnormals included; so is an unknown precision. */
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x7F800001), LD_PRECISION_FP32, NULL)), 0x7F800001, "fp32");
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x00000001), LD_PRECISION_FP32, NULL)), 0x00000001, "fp32");
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x3F801234), (ld_precision)42, NULL)), 0x3F801234, "bad p");
    /* fp16 and bf16 ignore the mode: always RNE. */
    ld_round_options rz = {LD_ROUND_TOWARD_ZERO, false};
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x3F818001), LD_PRECISION_BF16, &rz)), 0x3F820000, "bf16");
    EXPECT_BITS(fbits(ld_round_to_precision(bitsf(0x3F803000), LD_PRECISION_FP16, &rz)), 0x3F804000, "fp16");
}

static void test_flush_denormals(void **state)
{
    (void)state;
    static const struct {
        ld_precision p;
        ld_rounding mode;
        uint32_t in, flushed, kept;
    } cases[] = {
        {LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, 0x38000000, 0x00000000, 0x38000000}, /* 2^-15 */
        {LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, 0xB8000000, 0x80000000, 0xB8000000}, /* sign kept */
        {LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, 0x33800000, 0x00000000, 0x33800000}, /* 2^-24 */
        {LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, 0x387FF000, 0x38800000, 0x38800000}, /* rounds to normal */
        {LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, 0x38800000, 0x38800000, 0x38800000},
        {LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, 0x80000001, 0x80000000, 0x80000000},
        {LD_PRECISION_FP32, LD_ROUND_NEAREST_EVEN, 0x00400000, 0x00000000, 0x00400000},
        {LD_PRECISION_FP32, LD_ROUND_NEAREST_EVEN, 0x80000001, 0x80000000, 0x80000001},
        {LD_PRECISION_FP32, LD_ROUND_NEAREST_EVEN, 0x00800000, 0x00800000, 0x00800000},
        {LD_PRECISION_FP32, LD_ROUND_NEAREST_EVEN, 0x7F800001, 0x7F800001, 0x7F800001}, /* NaN untouched */
        {LD_PRECISION_TF32, LD_ROUND_NEAREST_EVEN, 0x00003000, 0x00000000, 0x00004000},
        {LD_PRECISION_TF32, LD_ROUND_NEAREST_AWAY, 0x80001000, 0x80000000, 0x80002000},
        {LD_PRECISION_TF32, LD_ROUND_TOWARD_ZERO, 0x007FFFFF, 0x00000000, 0x007FE000},
        {LD_PRECISION_BF16, LD_ROUND_NEAREST_EVEN, 0x00018000, 0x00000000, 0x00020000},
        {LD_PRECISION_BF16, LD_ROUND_NEAREST_EVEN, 0x807FFFFF, 0x80000000, 0x80800000},
        {LD_PRECISION_BF16, LD_ROUND_NEAREST_EVEN, 0x00800000, 0x00800000, 0x00800000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ld_round_options on = {cases[i].mode, true}, off = {cases[i].mode, false};
        float x = bitsf(cases[i].in);
        const char *name = ld_precision_name(cases[i].p);
        EXPECT_BITS(fbits(ld_round_to_precision(x, cases[i].p, &on)), cases[i].flushed,
                    "%s 0x%08x with flush", name, cases[i].in);
        EXPECT_BITS(fbits(ld_round_to_precision(x, cases[i].p, &off)), cases[i].kept,
                    "%s 0x%08x without flush", name, cases[i].in);
    }
}

/* ---- properties and names ---------------------------------------------------------- */

static void expect_double(double got, double want, const char *what)
{
    if (!(got == want)) {
        print_error("%s: got %a, want %a\n", what, got, want);
        fail();
    }
}

static void test_precision_properties(void **state)
{
    (void)state;
    expect_double(ld_precision_unit_roundoff(LD_PRECISION_FP32), 0x1p-24, "u fp32");
    expect_double(ld_precision_unit_roundoff(LD_PRECISION_TF32), 0x1p-11, "u tf32");
    expect_double(ld_precision_unit_roundoff(LD_PRECISION_FP16), 0x1p-11, "u fp16");
    expect_double(ld_precision_unit_roundoff(LD_PRECISION_BF16), 0x1p-8, "u bf16");
    expect_double(ld_precision_max(LD_PRECISION_FP32), FLT_MAX, "max fp32");
    expect_double(ld_precision_max(LD_PRECISION_TF32), bitsf(0x7F7FE000), "max tf32");
    expect_double(ld_precision_max(LD_PRECISION_FP16), 65504.0, "max fp16");
    expect_double(ld_precision_max(LD_PRECISION_BF16), bitsf(0x7F7F0000), "max bf16");
    expect_double(ld_precision_min_normal(LD_PRECISION_FP16), 0x1p-14, "min fp16");
    expect_double(ld_precision_min_normal(LD_PRECISION_BF16), FLT_MIN, "min bf16");
    expect_double(ld_precision_min_normal(LD_PRECISION_TF32), FLT_MIN, "min tf32");
    expect_double(ld_precision_min_normal(LD_PRECISION_FP32), FLT_MIN, "min fp32");
    expect_double(ld_precision_ulp(LD_PRECISION_FP16, 1.0), 0x1p-10, "ulp fp16 1");
    expect_double(ld_precision_ulp(LD_PRECISION_FP16, 1024.0), 1.0, "ulp fp16 1024");
    expect_double(ld_precision_ulp(LD_PRECISION_FP16, -65504.0), 32.0, "ulp fp16 -65504");
    expect_double(ld_precision_ulp(LD_PRECISION_FP16, 0x1p-20), 0x1p-24, "ulp fp16 subnormal");
    expect_double(ld_precision_ulp(LD_PRECISION_FP16, 0.0), 0x1p-24, "ulp fp16 0");
    expect_double(ld_precision_ulp(LD_PRECISION_BF16, 1.0), 0x1p-7, "ulp bf16 1");
    expect_double(ld_precision_ulp(LD_PRECISION_FP32, 1.0), FLT_EPSILON, "ulp fp32 1");
    expect_double(ld_precision_ulp(LD_PRECISION_FP32, FLT_MIN / 2), 0x1p-149, "ulp fp32 subnormal");
    expect_double(ld_precision_ulp(LD_PRECISION_TF32, -3.0), 0x1p-9, "ulp tf32 -3");
    expect_double(ld_precision_ulp(LD_PRECISION_TF32, 1.5), 0x1p-10, "ulp tf32 1.5");
    expect_double(ld_precision_ulp(LD_PRECISION_FP16, INFINITY), INFINITY, "ulp inf");
    assert_true(isnan(ld_precision_ulp(LD_PRECISION_FP16, NAN)));
    assert_true(isnan(ld_precision_max((ld_precision)42)));
    assert_true(isnan(ld_precision_unit_roundoff((ld_precision)-1)));
    /* The ulp is the gap to the next fp16, for every positive finite fp16. */
    for (uint16_t h = 0; h < 0x7BFF; h++) {
        double x = bitsf(from_fp16(h)), next = bitsf(from_fp16((uint16_t)(h + 1)));
        if (ld_precision_ulp(LD_PRECISION_FP16, x) != next - x) {
            print_error("ulp of fp16 0x%04x = %a, gap to the next is %a\n", h,
                        ld_precision_ulp(LD_PRECISION_FP16, x), next - x);
            fail();
        }
    }
}

static void test_names(void **state)
{
    (void)state;
    for (int p = LD_PRECISION_FP32; p <= LD_PRECISION_BF16; p++) {
        ld_precision parsed = (ld_precision)-1;
        assert_true(ld_precision_from_name(ld_precision_name((ld_precision)p), &parsed));
        assert_int_equal(parsed, p);
    }
    assert_string_equal(ld_precision_name(LD_PRECISION_TF32), "tf32");
    assert_string_equal(ld_precision_name((ld_precision)42), "unknown");
    ld_precision p = LD_PRECISION_FP32;
    assert_true(ld_precision_from_name("half", &p));
    assert_int_equal(p, LD_PRECISION_FP16);
    assert_true(ld_precision_from_name("BF16", &p));
    assert_int_equal(p, LD_PRECISION_BF16);
    assert_true(ld_precision_from_name("bfloat16", &p));
    assert_true(ld_precision_from_name("float32", &p));
    assert_int_equal(p, LD_PRECISION_FP32);
    assert_false(ld_precision_from_name("fp8", &p));
    assert_false(ld_precision_from_name("", &p));
    assert_false(ld_precision_from_name(NULL, &p));
    assert_int_equal(p, LD_PRECISION_FP32); /* untouched on failure */
    for (int m = LD_ROUND_NEAREST_EVEN; m <= LD_ROUND_TOWARD_ZERO; m++) {
        ld_rounding parsed = (ld_rounding)-1;
        assert_true(ld_rounding_from_name(ld_rounding_name((ld_rounding)m), &parsed));
        assert_int_equal(parsed, m);
    }
    assert_string_equal(ld_rounding_name(LD_ROUND_NEAREST_AWAY), "rna");
    assert_string_equal(ld_rounding_name((ld_rounding)9), "unknown");
    ld_rounding mode = LD_ROUND_NEAREST_EVEN;
    assert_true(ld_rounding_from_name("RZ", &mode));
    assert_int_equal(mode, LD_ROUND_TOWARD_ZERO);
    assert_false(ld_rounding_from_name("rd", &mode));
    assert_false(ld_rounding_from_name(NULL, &mode));
    assert_int_equal(mode, LD_ROUND_TOWARD_ZERO);
}

/* ---- array functions ----------------------------------------------------------------- */

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Random fp32 bit patterns weighted towards the interesting ones. */
static void fill_inputs(uint32_t *u, size_t n, uint64_t *seed)
{
    static const uint32_t specials[] = {
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFA00000,
        0x7F7FFFFF, 0x477FE000, 0x477FF000, 0x33800000, 0x33000000, 0x00000001, 0x807FFFFF,
        0x387FF000, 0x38000000, 0x3F801000, 0x3F808000, 0x7F7F8000, 0x7F7FF000, 0x00001000,
    };
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random(seed);
        switch (r & 3) {
        case 0: u[i] = specials[(r >> 8) % (sizeof specials / sizeof specials[0])]; break;
        case 1: u[i] = (uint32_t)(r >> 32) & 0x807FFFFFu; break;                    /* subnormal */
        case 2: u[i] = ((uint32_t)(r >> 32) & ~0x1FFFu) | ((r >> 8) & 1 ? 0x1000u : 0x8000u); break;
        default: u[i] = (uint32_t)(r >> 32); break;
        }
    }
}

#define GUARD 16
#define GUARD_BYTE 0xA5

static void check_guard(const void *end, const char *what, size_t n)
{
    const unsigned char *g = end;
    for (size_t i = 0; i < GUARD; i++) {
        if (g[i] != GUARD_BYTE) {
            print_error("%s wrote past the end of %zu elements\n", what, n);
            fail();
        }
    }
}

/* Runs every array function of isa on n inputs and compares with the scalar code. */
static void check_arrays(ld_round_isa isa, const uint32_t *in, size_t n)
{
    const char *name = ld_round_isa_name(isa);
    float *src = malloc(n > 0 ? n * sizeof *src : 1); /* exact size: ASan sees any over-read */
    ld_fp16 *h = malloc((n + GUARD) * sizeof *h);
    ld_bf16 *b = malloc((n + GUARD) * sizeof *b);
    float *f = malloc((n + GUARD) * sizeof *f);
    assert_non_null(src);
    assert_non_null(h);
    assert_non_null(b);
    assert_non_null(f);
    memcpy(src, in, n * sizeof *src);

    memset(h, GUARD_BYTE, (n + GUARD) * sizeof *h);
    ld_convert_fp32_to_fp16_isa(isa, src, h, n);
    check_guard(h + n, "fp32_to_fp16", n);
    for (size_t i = 0; i < n; i++)
        EXPECT_BITS(h[i].bits, to_fp16(in[i]), "%s fp32->fp16 [%zu of %zu] 0x%08x", name, i, n, in[i]);

    memset(f, GUARD_BYTE, (n + GUARD) * sizeof *f);
    ld_convert_fp16_to_fp32_isa(isa, h, f, n);
    check_guard(f + n, "fp16_to_fp32", n);
    for (size_t i = 0; i < n; i++)
        EXPECT_BITS(fbits(f[i]), from_fp16(h[i].bits), "%s fp16->fp32 [%zu of %zu]", name, i, n);

    memset(b, GUARD_BYTE, (n + GUARD) * sizeof *b);
    ld_convert_fp32_to_bf16_isa(isa, src, b, n);
    check_guard(b + n, "fp32_to_bf16", n);
    for (size_t i = 0; i < n; i++)
        EXPECT_BITS(b[i].bits, to_bf16(in[i]), "%s fp32->bf16 [%zu of %zu] 0x%08x", name, i, n, in[i]);

    for (size_t i = 0; i < n; i++) /* every bf16 pattern, NaNs included */
        b[i].bits = (uint16_t)(in[i] >> ((i & 1) ? 16 : 0));
    memset(f, GUARD_BYTE, (n + GUARD) * sizeof *f);
    ld_convert_bf16_to_fp32_isa(isa, b, f, n);
    check_guard(f + n, "bf16_to_fp32", n);
    for (size_t i = 0; i < n; i++)
        EXPECT_BITS(fbits(f[i]), from_bf16(b[i].bits), "%s bf16->fp32 [%zu of %zu]", name, i, n);

    for (int p = LD_PRECISION_FP32; p <= LD_PRECISION_BF16; p++) {
        for (int m = LD_ROUND_NEAREST_EVEN; m <= LD_ROUND_TOWARD_ZERO; m++) {
            for (int flush = 0; flush <= 1; flush++) {
                ld_round_options opts = {(ld_rounding)m, flush != 0};
                memcpy(f, in, n * sizeof *f);
                memset(f + n, GUARD_BYTE, GUARD * sizeof *f);
                ld_round_array_isa(isa, f, n, (ld_precision)p, &opts);
                check_guard(f + n, "round_array", n);
                for (size_t i = 0; i < n; i++)
                    EXPECT_BITS(fbits(f[i]), fbits(ld_round_to_precision(src[i], (ld_precision)p, &opts)),
                                "%s round_array %s %s flush=%d [%zu of %zu] 0x%08x", name,
                                ld_precision_name((ld_precision)p), ld_rounding_name((ld_rounding)m),
                                flush, i, n, in[i]);
            }
        }
    }
    free(src);
    free(h);
    free(b);
    free(f);
}

static const size_t test_lengths[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 100, 1023, 4097};

static void test_arrays_match_scalar(void **state)
{
    (void)state;
    uint64_t seed = 0x0123456789ABCDEFu;
    for (int isa = LD_ROUND_ISA_PORTABLE; isa < LD_ROUND_ISA_COUNT_; isa++) {
        if (!ld_round_isa_supported((ld_round_isa)isa)) {
            print_message("skipped %s array checks: not supported by this CPU\n",
                          ld_round_isa_name((ld_round_isa)isa));
            continue;
        }
        for (size_t k = 0; k < sizeof test_lengths / sizeof test_lengths[0]; k++) {
            size_t n = test_lengths[k];
            uint32_t *in = malloc((n + 1) * sizeof *in);
            assert_non_null(in);
            fill_inputs(in, n, &seed);
            check_arrays((ld_round_isa)isa, in, n);
            free(in);
        }
    }
}

#if defined(__x86_64__)
/* Counts elements where the vector code under the current MXCSR differs from
 * the scalar code. No cmocka assertion here: the caller restores MXCSR first. */
static size_t count_vector_mismatches(ld_round_isa isa, const uint32_t *in, size_t n)
{
    size_t bad = 0;
    ld_fp16 h[512];
    float src[512], f[512];
    memcpy(src, in, n * sizeof *src);
    ld_convert_fp32_to_fp16_isa(isa, src, h, n);
    ld_convert_fp16_to_fp32_isa(isa, h, f, n);
    for (size_t i = 0; i < n; i++)
        bad += h[i].bits != to_fp16(in[i]) || fbits(f[i]) != from_fp16(h[i].bits);
    for (int p = LD_PRECISION_FP32; p <= LD_PRECISION_BF16; p++) {
        for (int flush = 0; flush <= 1; flush++) {
            ld_round_options opts = {LD_ROUND_NEAREST_EVEN, flush != 0};
            memcpy(f, in, n * sizeof *f);
            ld_round_array_isa(isa, f, n, (ld_precision)p, &opts);
            for (size_t i = 0; i < n; i++)
                bad += fbits(f[i]) != fbits(ld_round_to_precision(src[i], (ld_precision)p, &opts));
        }
    }
    return bad;
}
#endif

static void test_arrays_ignore_mxcsr(void **state)
{
    (void)state;
#if defined(__x86_64__)
    uint32_t in[512];
    uint64_t seed = 42;
    fill_inputs(in, 512, &seed);
    size_t bad[LD_ROUND_ISA_COUNT_] = {0};
    const unsigned ftz = 0x8000, daz = 0x0040, round_toward_zero = 0x6000;
    unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | ftz | daz | round_toward_zero);
    for (int isa = LD_ROUND_ISA_PORTABLE; isa < LD_ROUND_ISA_COUNT_; isa++)
        if (ld_round_isa_supported((ld_round_isa)isa))
            bad[isa] = count_vector_mismatches((ld_round_isa)isa, in, 511);
    _mm_setcsr(saved);
    for (int isa = LD_ROUND_ISA_PORTABLE; isa < LD_ROUND_ISA_COUNT_; isa++) {
        if (bad[isa] != 0) {
            print_error("%s: %zu results changed under FTZ+DAZ+round-toward-zero\n",
                        ld_round_isa_name((ld_round_isa)isa), bad[isa]);
            fail();
        }
    }
#else
    print_message("skipped: MXCSR is x86 only\n");
    skip();
#endif
}

/* ---- dispatch -------------------------------------------------------------------------- */

static void test_dispatch_and_force(void **state)
{
    (void)state;
    ld_round_isa detected = ld_round_isa_detected();
    assert_true(ld_round_isa_supported(detected));
    assert_true(ld_round_isa_supported(LD_ROUND_ISA_PORTABLE));
    assert_false(ld_round_isa_supported((ld_round_isa)99));
    assert_false(ld_round_force_isa((ld_round_isa)99));
    assert_int_equal(ld_round_isa_active(), detected);

    ld_round_force_portable(true);
    assert_int_equal(ld_round_isa_active(), LD_ROUND_ISA_PORTABLE);
    uint32_t in[37];
    uint64_t seed = 7;
    fill_inputs(in, 37, &seed);
    ld_fp16 h[37];
    float x[37];
    memcpy(x, in, sizeof x);
    ld_convert_fp32_to_fp16(x, h, 37);
    for (size_t i = 0; i < 37; i++)
        EXPECT_BITS(h[i].bits, to_fp16(in[i]), "forced portable fp32->fp16 [%zu]", i);
    ld_round_force_portable(false);
    assert_int_equal(ld_round_isa_active(), detected);

    /* The public functions run the active version. */
    float f[37], g[37];
    memcpy(f, in, sizeof f);
    memcpy(g, in, sizeof g);
    ld_round_options opts = {LD_ROUND_NEAREST_AWAY, true};
    ld_round_array(f, 37, LD_PRECISION_TF32, &opts);
    ld_round_array_isa(LD_ROUND_ISA_PORTABLE, g, 37, LD_PRECISION_TF32, &opts);
    assert_memory_equal(f, g, sizeof f);
}

static void test_no_simd_environment(void **state)
{
    (void)state;
    ld_round_isa best = LD_ROUND_ISA_PORTABLE;
    for (int isa = LD_ROUND_ISA_PORTABLE; isa < LD_ROUND_ISA_COUNT_; isa++)
        if (ld_round_isa_supported((ld_round_isa)isa))
            best = (ld_round_isa)isa;

    setenv("LAYERDIFF_NO_SIMD", "1", 1);
    ld_round_redetect();
    ld_round_isa with_env = ld_round_isa_detected();
    char features[256];
    snprintf(features, sizeof features, "%s", ld_round_cpu_features());
    setenv("LAYERDIFF_NO_SIMD", "0", 1);
    ld_round_redetect();
    ld_round_isa with_zero = ld_round_isa_detected();
    unsetenv("LAYERDIFF_NO_SIMD");
    ld_round_redetect();

    assert_int_equal(with_env, LD_ROUND_ISA_PORTABLE);
    assert_non_null(strstr(features, "using portable (LAYERDIFF_NO_SIMD)"));
    assert_int_equal(with_zero, best);
    assert_int_equal(ld_round_isa_detected(), best);
    const char *now = ld_round_cpu_features();
    print_message("cpu features: %s\n", now);
    char using[64];
    snprintf(using, sizeof using, "using %s", ld_round_isa_name(best));
    assert_non_null(strstr(now, using));
    assert_true((strstr(now, "f16c") != NULL) == cpu_has("f16c"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_to_fp16_edges),
        cmocka_unit_test(test_fp16_to_fp32_edges),
        cmocka_unit_test(test_fp16_all_against_ldexp),
        cmocka_unit_test(test_fp16_all_against_f16c),
        cmocka_unit_test(test_bf16_edges),
        cmocka_unit_test(test_bf16_all_widen),
        cmocka_unit_test(test_bf16_against_hardware),
        cmocka_unit_test(test_tf32_modes),
        cmocka_unit_test(test_round_to_precision_defaults),
        cmocka_unit_test(test_flush_denormals),
        cmocka_unit_test(test_precision_properties),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_arrays_match_scalar),
        cmocka_unit_test(test_arrays_ignore_mxcsr),
        cmocka_unit_test(test_dispatch_and_force),
        cmocka_unit_test(test_no_simd_environment),
    };
    return cmocka_run_group_tests_name("round", tests, NULL, NULL);
}
