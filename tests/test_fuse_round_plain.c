/* Tests of the fused chains' block-wise float16 rounding
 * (backends/exec_fuse_round.c, ld_fuse_round_plain, through
 * ld_fuse_apply_round_fp16 of exec_fuse_ops.c): for every op it takes
 * (Add, Sub, Mul, Div in the three stride cases, Clip, Relu), blocks of
 * plain values and blocks with one value of every awkward kind (NaN of two
 * payloads, infinities, float16 overflow and the values just below it,
 * float16 subnormals and underflows, values just below 2^-14, -0) at a
 * random position, sizes with and without a tail of fewer than 8, in
 * place and not, must give bit for bit the block and the round_block
 * counters of the per-group loops alone (ld_fuse_round_plain_force(0)),
 * which test_exec_fuse.c and test_emulated_fused.c check against the
 * engine's own rounding pass; ld_fuse_round_plain itself must say
 * "plain" exactly when every result is plain, and the in-place
 * ld_fuse_round_plain_prefix must stop at the first group of 32 that is
 * not, leaving it and everything after it as they were. All of it with
 * the 8-lane AVX2 loops and, on a CPU with AVX-512F, the 16-lane ones. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/emulated_count.h"
#include "backends/exec_fuse_ops.h"
#include "backends/kernels/activation_round.h"
#include "backends/kernels/elementwise_round.h"
#include "layerdiff/round.h"
#include "tests/support/emulated_testing.h"

enum { BLOCK = 1024 };

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* A plain value: magnitude in [2^-6, 2^6) (products and quotients of two
 * stay plain), random sign; one in 16 a zero of either sign. */
static float plain_value(void)
{
    uint32_t r = rnd32();
    if ((r & 15) == 0)
        return (r & 16) ? -0.0f : 0.0f;
    float m = ldexpf(1.0f + (float)(rnd32() & 0xFFFFFF) / 16777216.0f, (int)(rnd32() % 12) - 6);
    return (r & 32) ? -m : m;
}

/* Values that are not plain, or lie at the edges of the plain range. */
static float awkward_value(int k)
{
    static const uint32_t values[] = {
        0x7FC00000u, 0xFFC12345u, 0x7F800000u, 0xFF800000u, /* NaNs, infinities */
        0x477FF000u, 0x477FEFFFu, 0x477FE000u, 0xC77FF000u, /* 65520, below, 65504 */
        0x38800000u, 0x387FFFFFu, 0x387FF000u, 0x387FE000u, /* 2^-14 and just below */
        0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x00000001u, /* underflow edges, fp32 subnormal */
        0x80000000u, 0x3A000000u, 0x7F7FFFFFu, 0xB3800000u, /* -0, subnormal fp16, huge */
    };
    return bits_float(values[k % (int)(sizeof values / sizeof values[0])]);
}

enum { N_AWKWARD = 20 };

typedef struct sink {
    ld_emu_tally t;
    int64_t calls, values;
} sink;

static void sink_round(void *user, int output, float *block, int64_t n)
{
    assert_int_equal(output, 0);
    sink *s = user;
    ld_emu_round_counted(block, block, n, LD_PRECISION_FP16, NULL, 1, &s->t);
    s->calls++;
    s->values += n;
}

/* d = op(a, b) (or clamp(a)) through ld_fuse_apply_round_fp16 with the
 * plain blocks on or off; false when the level has no in-loop rounding. */
static bool apply(int op, bool plain, float *d, ld_fuse_arg a, ld_fuse_arg b, float lo,
                  float hi, int64_t n, sink *s)
{
    ld_fuse_round_plain_force(plain ? 1 : 0);
    ld_fuse_rounding r;
    ld_fuse_rounding_init(&r, sink_round, s);
    ld_fuse_round_plain_force(-1);
    return ld_fuse_apply_round_fp16(&r, op, d, a, b, lo, hi, n);
}

static void check_block(int op, int stride_case, int64_t n, int awkward, bool in_place)
{
    float a[BLOCK], b[BLOCK], d0[BLOCK], d1[BLOCK];
    for (int64_t i = 0; i < n; i++) {
        a[i] = plain_value();
        b[i] = plain_value();
        if (op == LD_FUSE_DIV && b[i] == 0)
            b[i] = 0.5f; /* a zero divisor is an infinity: plain blocks need none */
    }
    int64_t at = awkward >= 0 ? (int64_t)(rnd32() % (uint32_t)n) : -1;
    if (at >= 0)
        ((rnd32() & 1) || op > LD_FUSE_DIV ? a : b)[at] = awkward_value(awkward);
    ld_fuse_arg x = {.p = a}, y = {.p = b};
    if (op <= LD_FUSE_DIV && stride_case == 1)
        x = (ld_fuse_arg){.s = at >= 0 ? awkward_value(awkward) : plain_value()};
    if (op <= LD_FUSE_DIV && stride_case == 2)
        y = (ld_fuse_arg){.s = op == LD_FUSE_DIV && at < 0 ? 4.0f
                               : at >= 0           ? awkward_value(awkward)
                                                   : plain_value()};
    float lo = op == LD_FUSE_CLIP ? -(float)(rnd32() % 4) : 0, hi = op == LD_FUSE_CLIP ? 6 : 0;
    sink s0 = {0}, s1 = {0};
    float a_copy[BLOCK];
    memcpy(a_copy, a, sizeof a);
    float *o0 = in_place ? a : d0;
    bool done0 = apply(op, false, o0, x, y, lo, hi, n, &s0);
    memcpy(d0, o0, (size_t)n * sizeof *d0);
    memcpy(a, a_copy, sizeof a);
    float *o1 = in_place ? a : d1;
    bool done1 = apply(op, true, o1, x, y, lo, hi, n, &s1);
    memcpy(d1, o1, (size_t)n * sizeof *d1);
    assert_int_equal(done0, done1);
    if (!done0)
        return;
    for (int64_t i = 0; i < n; i++)
        if (emt_bits(d0[i]) != emt_bits(d1[i]))
            fail_msg("op %d case %d n %lld awkward %d in place %d: [%lld] %08x vs %08x", op,
                     stride_case, (long long)n, awkward, in_place, (long long)i,
                     emt_bits(d0[i]), emt_bits(d1[i]));
    emt_expect_tally(&s1.t, &s0.t);
    /* products and quotients of plain values stay plain (sums may cancel) */
    if (awkward < 0 && (op == LD_FUSE_MUL || op == LD_FUSE_DIV) && ld_ew_round_level() == LD_EW_ROUND_AVX2)
        assert_int_equal(s1.calls, 0); /* a plain block: nothing for round_block */
}

static void every_op(void)
{
    static const int ops[] = {LD_FUSE_ADD, LD_FUSE_SUB, LD_FUSE_MUL, LD_FUSE_DIV,
                              LD_FUSE_CLIP, LD_FUSE_RELU};
    static const int64_t sizes[] = {BLOCK, 8, 16, 24, 400, 1000, 1021, 5};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int sc = 0; sc < (ops[o] <= LD_FUSE_DIV ? 3 : 1); sc++)
            for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
                for (int aw = -1; aw < N_AWKWARD; aw++)
                    for (int ip = 0; ip <= 1; ip++)
                        check_block(ops[o], sc, sizes[k], aw, ip && sc != 1);
}

/* Every level of the per-group loops the CPU has (the plain blocks are
 * used only at AVX2, where they fall back to those loops). */
static void test_plain_equals_groups_at(void **state)
{
    (void)state;
    for (int level = LD_EW_ROUND_NONE; level <= LD_EW_ROUND_AVX2; level++) {
        if (!ld_ew_round_force_level(level))
            continue;
        for (int act = LD_ACT_ROUND_NONE; act <= LD_ACT_ROUND_AVX2; act++)
            if (ld_act_round_force_level(act))
                every_op();
    }
    ld_ew_round_force_level(-1);
    ld_act_round_force_level(-1);
}

/* ld_fuse_round_plain's verdict: true exactly for blocks of plain results
 * (zero, or magnitude in [2^-14, 65520)), and then the F16C rounding. */
static void test_plain_verdict_at(void **state)
{
    (void)state;
    if (!__builtin_cpu_supports("avx2")) {
        skip();
        return;
    }
    float a[64], one[64], d[64];
    for (int k = 0; k < 64; k++)
        one[k] = 1.0f;
    for (int trial = 0; trial < 20000; trial++) {
        /* plain values (zeros among them), and at most one lane from around
           an edge of the plain range or from anywhere */
        bool plain = true;
        for (int k = 0; k < 64; k++) {
            uint32_t u = rnd32();
            uint32_t mag = (u & 63) == 0 ? 0 : 0x3C000000u + (rnd32() % 0x1000000u);
            a[k] = bits_float(mag | (u & 0x80000000u));
        }
        uint32_t u = rnd32(), mag;
        switch (u & 3) {
        case 0: mag = 0x38800000u + (rnd32() % 0x2000u) - 0x1000u; break;
        case 1: mag = 0x477FF000u + (rnd32() % 0x2000u) - 0x1000u; break;
        case 2: mag = rnd32() & 0x7FFFFFFFu; break;
        default: mag = (rnd32() & 1) ? 0 : 0x3C000000u; break;
        }
        /* every other trial 56 values (the 16-lane loop's masked last 8),
           NaNs after them that it must not look at */
        int n = (trial & 1) ? 56 : 64;
        for (int k = n; k < 64; k++)
            a[k] = NAN;
        a[rnd32() % (uint32_t)n] = bits_float(mag | (u & 0x80000000u));
        plain = mag == 0 || (mag >= 0x38800000u && mag < 0x477FF000u);
        ld_fuse_arg x = {.p = a}, y = {.p = one};
        bool said = ld_fuse_round_plain(LD_FUSE_MUL, d, x, y, 0, 0, n);
        assert_int_equal(said, plain);
        if (!said)
            continue;
        for (int k = 0; k < n; k++) {
            float want = ld_fp16_to_fp32(ld_fp32_to_fp16(a[k]));
            if (emt_bits(want) != emt_bits(d[k]))
                fail_msg("%08x: %08x, want %08x", emt_bits(a[k]), emt_bits(d[k]),
                         emt_bits(want));
        }
    }
    /* the sizes it refuses: no multiple of 8, empty */
    ld_fuse_arg x = {.p = one}, y = {.p = one};
    assert_false(ld_fuse_round_plain(LD_FUSE_ADD, d, x, y, 0, 0, 12));
    assert_false(ld_fuse_round_plain(LD_FUSE_ADD, d, x, y, 0, 0, 0));
    assert_false(ld_fuse_round_plain(LD_FUSE_SIGMOID, d, x, y, 0, 0, 8));
}

/* In place, one value that is not plain (or none) at a random position:
 * the prefix ends at its group of 32, rounded before, untouched from there. */
static void test_prefix_stops_at(void **state)
{
    (void)state;
    if (!__builtin_cpu_supports("avx2")) {
        skip();
        return;
    }
    enum { N = 200 };
    float a[N], before[N];
    for (int trial = 0; trial < 4000; trial++) {
        for (int k = 0; k < N; k++)
            a[k] = plain_value();
        int at = (int)(rnd32() % N);
        int kind = (int)(rnd32() % (N_AWKWARD + 1)) - 1;
        if (kind >= 0)
            a[at] = awkward_value(kind);
        memcpy(before, a, sizeof a);
        bool plain = true;
        for (int k = 0; k < N; k++) {
            uint32_t m = emt_bits(a[k]) & 0x7FFFFFFFu;
            plain &= m == 0 || (m >= 0x38800000u && m < 0x477FF000u);
        }
        int64_t want = plain ? N / 32 * 32 : at / 32 * 32;
        ld_fuse_arg x = {.p = a}, y = {.s = 1.0f};
        int64_t done = ld_fuse_round_plain_prefix(LD_FUSE_MUL, a, x, y, 0, 0, N);
        assert_int_equal(done, want);
        for (int k = 0; k < N; k++) {
            float r = k < done ? ld_fp16_to_fp32(ld_fp32_to_fp16(before[k])) : before[k];
            if (emt_bits(r) != emt_bits(a[k]))
                fail_msg("[%d] of %lld: %08x, want %08x", k, (long long)done, emt_bits(a[k]),
                         emt_bits(r));
        }
    }
    float one[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    ld_fuse_arg x = {.p = one}, y = {.p = one};
    assert_int_equal(ld_fuse_round_plain_prefix(LD_FUSE_ADD, one, x, y, 0, 0, 8), 0);
}

/* Each test with the AVX2 loops, then with the AVX-512 ones where the CPU
 * has them (ld_fuse_round_plain_force_avx512). */
static void both_widths(void (*test)(void **), void **state)
{
    ld_fuse_round_plain_force_avx512(0);
    test(state);
    ld_fuse_round_plain_force_avx512(-1);
    if (__builtin_cpu_supports("avx512f"))
        test(state);
    else
        print_message("no AVX-512F: 16-lane loops not tested\n");
}

static void test_plain_equals_groups(void **state)
{
    both_widths(test_plain_equals_groups_at, state);
}

static void test_plain_verdict(void **state)
{
    both_widths(test_plain_verdict_at, state);
}

static void test_prefix_stops(void **state)
{
    both_widths(test_prefix_stops_at, state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_equals_groups),
        cmocka_unit_test(test_plain_verdict),
        cmocka_unit_test(test_prefix_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
