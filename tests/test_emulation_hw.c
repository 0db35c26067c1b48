/* layerdiff tests — the emulated engine's fp16 elementwise arithmetic against
 * hardware and against an independent reference.
 *
 * The engine computes an fp16 add, sub, mul, div or sqrt as: widen the fp16
 * inputs to fp32, compute in fp32, round the result to fp16
 * (ld_convert_fp16_to_fp32, the float operation, ld_convert_fp32_to_fp16).
 * Because fp32 has 24 >= 2 * 11 + 2 significant bits, rounding twice gives
 * the correctly rounded fp16 result, so this must equal what fp16 hardware
 * computes. Checked here on 2^21 random pairs per operation (uniform bit
 * patterns, which include every class: zeros, subnormals, normals,
 * infinities, quiet and signalling NaNs; pairs of close magnitude, where
 * addition cancels; pairs with a special value) and on every pair of 34
 * edge values:
 *  - against AVX512-FP16 (vaddph, vsubph, vmulph, vdivph, vsqrtph; the fp32
 *    -> fp16 conversion against vcvtps2phx on 2^22 random floats and edge
 *    values), bit for bit, NaN payloads included (a NaN result of two NaN
 *    operands may carry either payload). Skipped, with a message, on CPUs
 *    without AVX512-FP16 (such as the development machine, AMD Zen 5);
 *  - everywhere, against tests/support/fp16_reference.h: add, sub and mul
 *    exactly in double rounded by an independent routine, div and sqrt by
 *    bracketing with exact products. tests/exhaustive_emulation.c runs
 *    that check on all 2^32 pairs (and all 2^16 square roots). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "layerdiff/round.h"
#include "tests/support/fp16_reference.h"

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_SQRT, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"add", "sub", "mul", "div", "sqrt"};

#define SAMPLE (1u << 21)

static const uint16_t edges[] = {
    0x0000, 0x8000, 0x0001, 0x8001, 0x0002, 0x0200, 0x03FF, 0x83FF, 0x0400, 0x0401,
    0x07FF, 0x1400, 0x3555, 0x3BFF, 0x3C00, 0xBC00, 0x3C01, 0x4000, 0x5BFF, 0x6800,
    0x6801, 0x7BFE, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01,
    0x7FFF, 0x7D55, 0x0010, 0x57FF,
};
#define N_EDGES (sizeof edges / sizeof edges[0])

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;

static uint64_t rnd64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef struct pairs {
    size_t n;
    uint16_t *a, *b;
} pairs;

/* The sample: random patterns, close magnitudes, a special partner; then
 * every pair of edge values. */
static pairs make_pairs(void)
{
    pairs p = {SAMPLE + N_EDGES * N_EDGES, NULL, NULL};
    p.a = malloc(p.n * sizeof *p.a);
    p.b = malloc(p.n * sizeof *p.b);
    assert_true(p.a && p.b);
    for (size_t i = 0; i < SAMPLE; i++) {
        uint64_t r = rnd64();
        uint16_t a = (uint16_t)r, b = (uint16_t)(r >> 16);
        switch ((r >> 32) & 3) {
        case 2: { /* close magnitude: exponent within 2, random sign and mantissa */
            int e = (a >> 10) & 0x1F;
            e += (int)((r >> 36) % 5) - 2;
            e = e < 0 ? 0 : e > 30 ? 30 : e;
            b = (uint16_t)((b & 0x83FF) | (e << 10));
            break;
        }
        case 3:
            b = edges[(r >> 40) % N_EDGES];
            break;
        default:
            break;
        }
        p.a[i] = a;
        p.b[i] = b;
    }
    for (size_t i = 0; i < N_EDGES * N_EDGES; i++) {
        p.a[SAMPLE + i] = edges[i / N_EDGES];
        p.b[SAMPLE + i] = edges[i % N_EDGES];
    }
    return p;
}

static void free_pairs(pairs *p)
{
    free(p->a);
    free(p->b);
}

/* The engine's way: widen, compute in fp32, round (library array functions). */
static void emulate(int op, const pairs *p, uint16_t *out)
{
    float *x = malloc(p->n * sizeof *x), *y = malloc(p->n * sizeof *y);
    assert_true(x && y);
    ld_convert_fp16_to_fp32((const ld_fp16 *)p->a, x, p->n);
    ld_convert_fp16_to_fp32((const ld_fp16 *)p->b, y, p->n);
    for (size_t i = 0; i < p->n; i++) {
        switch (op) {
        case OP_ADD: x[i] = x[i] + y[i]; break;
        case OP_SUB: x[i] = x[i] - y[i]; break;
        case OP_MUL: x[i] = x[i] * y[i]; break;
        case OP_DIV: x[i] = x[i] / y[i]; break;
        default: x[i] = sqrtf(x[i]); break;
        }
    }
    ld_convert_fp32_to_fp16(x, (ld_fp16 *)out, p->n);
    free(x);
    free(y);
}

/* --- hardware ------------------------------------------------------------------------- */

static bool have_fp16_hw(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512fp16");
#else
    return false;
#endif
}

static void skip_without_hw(void)
{
    if (!have_fp16_hw()) {
        printf("      skipped: this CPU has no AVX512-FP16 (the reference checks still run)\n");
        skip();
    }
}

#if defined(__x86_64__)
#define TARGET_FP16 __attribute__((target("avx512fp16,avx512f,avx512bw,avx512vl")))

static TARGET_FP16 void hardware(int op, const pairs *p, uint16_t *out)
{
    size_t i = 0;
    for (; i < p->n; i += 32) {
        __mmask32 m = p->n - i >= 32 ? 0xFFFFFFFFu : (1u << (p->n - i)) - 1u;
        __m512h a = _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, p->a + i));
        __m512h b = _mm512_castsi512_ph(_mm512_maskz_loadu_epi16(m, p->b + i));
        __m512h r;
        switch (op) {
        case OP_ADD: r = _mm512_add_ph(a, b); break;
        case OP_SUB: r = _mm512_sub_ph(a, b); break;
        case OP_MUL: r = _mm512_mul_ph(a, b); break;
        case OP_DIV: r = _mm512_div_ph(a, b); break;
        default: r = _mm512_sqrt_ph(a); break;
        }
        _mm512_mask_storeu_epi16(out + i, m, _mm512_castph_si512(r));
    }
}

static TARGET_FP16 void hardware_convert(const float *x, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m256h h = _mm512_cvtxps_ph(_mm512_maskz_loadu_ps(m, x + i));
        _mm256_mask_storeu_epi16(out + i, m, _mm256_castph_si256(h));
    }
}
#endif

static void test_against_avx512fp16(void **state)
{
    (void)state;
    skip_without_hw();
#if defined(__x86_64__)
    pairs p = make_pairs();
    uint16_t *want = malloc(p.n * 2), *got = malloc(p.n * 2);
    assert_true(want && got);
    for (int op = 0; op < OP_COUNT; op++) {
        hardware(op, &p, want);
        emulate(op, &p, got);
        size_t bad = 0;
        for (size_t i = 0; i < p.n; i++) {
            bool two_nans = op != OP_SQRT && ref_fp16_is_nan(p.a[i]) && ref_fp16_is_nan(p.b[i]);
            bool ok = got[i] == want[i] ||
                      (two_nans && ref_fp16_is_nan(got[i]) && ref_fp16_is_nan(want[i]));
            if (!ok && bad++ < 5)
                printf("      %s(0x%04x, 0x%04x): emulated 0x%04x, AVX512-FP16 0x%04x\n",
                       op_names[op], p.a[i], p.b[i], got[i], want[i]);
        }
        if (bad)
            fail_msg("%s: %zu of %zu results differ from AVX512-FP16", op_names[op], bad, p.n);
    }
    free(want);
    free(got);
    free_pairs(&p);
#endif
}

static void test_conversion_against_vcvtps2phx(void **state)
{
    (void)state;
    skip_without_hw();
#if defined(__x86_64__)
    static const uint32_t edge_bits[] = {
        0x00000000, 0x80000000, 0x00000001, 0x33000000, 0x33000001, 0x337FFFFF, 0x38800000,
        0x387FF000, 0x387FEFFF, 0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x7F7FFFFF,
        0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x7FBFFFFF, 0xFFC02000, 0x3F801000,
        0x3F803000, 0x3F800FFF, 0x3F801001, 0x00800000, 0x007FFFFF};
    size_t n_edges = sizeof edge_bits / sizeof edge_bits[0], n = (1u << 22) + n_edges;
    float *x = malloc(n * sizeof *x);
    uint16_t *want = malloc(n * 2), *got = malloc(n * 2);
    assert_true(x && want && got);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = i < n_edges ? edge_bits[i] : (uint32_t)rnd64();
        memcpy(&x[i], &u, 4);
    }
    hardware_convert(x, want, n);
    ld_convert_fp32_to_fp16(x, (ld_fp16 *)got, n);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i] || ld_fp32_to_fp16(x[i]).bits != want[i])
            fail_msg("fp32 -> fp16 of %a: library 0x%04x, vcvtps2phx 0x%04x", x[i], got[i],
                     want[i]);
    free(x);
    free(want);
    free(got);
#endif
}

/* --- the independent reference (runs everywhere) ------------------------------------- */

static bool reference_ok(int op, uint16_t a, uint16_t b, uint16_t r)
{
    double x = ref_fp16_value(a), y = ref_fp16_value(b);
    uint16_t want;
    switch (op) {
    case OP_ADD: want = ref_round_to_fp16(x + y); break; /* exact in double */
    case OP_SUB: want = ref_round_to_fp16(x - y); break;
    case OP_MUL: want = ref_round_to_fp16(x * y); break;
    case OP_DIV: return ref_check_div(a, b, r);
    default: return ref_check_sqrt(a, r);
    }
    return ref_fp16_is_nan(want) ? ref_fp16_is_nan(r) : want == r;
}

static void test_against_reference(void **state)
{
    (void)state;
    pairs p = make_pairs();
    uint16_t *got = malloc(p.n * 2);
    assert_non_null(got);
    for (int op = 0; op < OP_COUNT; op++) {
        emulate(op, &p, got);
        size_t bad = 0;
        for (size_t i = 0; i < p.n; i++)
            if (!reference_ok(op, p.a[i], p.b[i], got[i]) && bad++ < 5)
                printf("      %s(0x%04x, 0x%04x): emulated 0x%04x\n", op_names[op], p.a[i],
                       p.b[i], got[i]);
        if (bad)
            fail_msg("%s: %zu of %zu results are not correctly rounded", op_names[op], bad, p.n);
    }
    free(got);
    free_pairs(&p);
}

/* The reference itself on hand-made cases, so that a broken reference
 * cannot pass everything. */
static void test_reference_cases(void **state)
{
    (void)state;
    assert_int_equal(ref_round_to_fp16(65504), 0x7BFF);
    assert_int_equal(ref_round_to_fp16(65519.99), 0x7BFF);
    assert_int_equal(ref_round_to_fp16(65520), 0x7C00);
    assert_int_equal(ref_round_to_fp16(-0x1p-25), 0x8000);            /* tie to even 0 */
    assert_int_equal(ref_round_to_fp16(0x1.8p-24), 0x0002);           /* tie up to even */
    assert_int_equal(ref_round_to_fp16(1 + 0x1p-11), 0x3C00);         /* tie to even */
    assert_int_equal(ref_round_to_fp16(1 + 0x1p-10 + 0x1p-11), 0x3C02);
    assert_int_equal(ref_round_to_fp16(0x1.ff8p-15), 0x03FF);         /* largest subnormal */
    assert_int_equal(ref_round_to_fp16(0x1.ffap-15), 0x03FF);
    assert_int_equal(ref_round_to_fp16(0x1.ffcp-15), 0x0400);         /* tie up to normal */
    assert_true(ref_check_div(0x3C00, 0x4200, 0x3555));               /* 1/3 */
    assert_false(ref_check_div(0x3C00, 0x4200, 0x3556));
    assert_true(ref_check_div(0x7BFF, 0x3BFF, 0x7C00));               /* 65504 / (1 - 2^-11) */
    assert_false(ref_check_div(0x7BFF, 0x3C00, 0x7C00));
    assert_true(ref_check_sqrt(0x4000, 0x3DA8));                      /* sqrt 2 */
    assert_false(ref_check_sqrt(0x4000, 0x3DA9));
    for (int h = 0; h < 0x7C00; h++) /* decoding and rounding agree on every finite value */
        assert_int_equal(ref_round_to_fp16(ref_fp16_value((uint16_t)h)), h);
}

int main(void)
{
    if (!have_fp16_hw())
        printf("test_emulation_hw: AVX512-FP16 not available on this CPU: the hardware "
               "comparisons are skipped; the independent reference checks run\n");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_cases),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_against_avx512fp16),
        cmocka_unit_test(test_conversion_against_vcvtps2phx),
    };
    return cmocka_run_group_tests_name("emulation_hw", tests, NULL, NULL);
}
