/* layerdiff tests — the fused chains' Sigmoid rows (exec_fuse_sigmoid.c):
 * the AVX-512 row and the dispatching one give the portable row's bits on
 * the values where its paths meet (zeros, infinities, NaNs with payloads,
 * subnormals, the -87 limit of its own exp, values whose sigmoid rounds to
 * 0.5 or 1), on a million pseudo-random bit patterns, for every tail length
 * and in place. tests/exhaustive_sigmoid.c checks all 2^32 inputs; this one
 * runs with the unit tests (and under ASan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/exec_fuse_ops.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* in[0, n) through every row, out of place and in place; all equal the
 * portable row's bits. */
static void check_rows(const float *in, int64_t n)
{
    float *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    ld_fuse_sigmoid_rows_portable(want, in, n);
    for (int pass = 0; pass < 4; pass++) {
        bool in_place = pass & 1;
        if (in_place)
            memcpy(got, in, (size_t)n * sizeof *got);
        bool ran = true;
        if (pass < 2)
            ld_fuse_sigmoid_rows(got, in_place ? got : in, n);
        else
            ran = ld_fuse_sigmoid_rows_avx512(got, in_place ? got : in, n);
        if (!ran)
            continue;
        for (int64_t i = 0; i < n; i++)
            if (bits(got[i]) != bits(want[i]))
                fail_msg("pass %d, input 0x%08x: got 0x%08x, portable 0x%08x", pass,
                         bits(in[i]), bits(got[i]), bits(want[i]));
    }
    free(want);
    free(got);
}

static void test_special_values(void **state)
{
    (void)state;
    const uint32_t special[] = {
        0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
        0x7fc12345, 0xffa00001, 0x7f800001, 0x00000001, 0x80000001, 0x007fffff,
        0x807fffff, 0x00800000, 0x80800000, 0x33800000, 0xb3800000, 0x3f800000,
        0xbf800000, 0x7f7fffff, 0xff7fffff,
    };
    const float near[] = {-87.0f, 87.0f, -86.99999f, -87.00001f, -87.33654f, -88.72284f,
                          -103.97208f, -104.0f, 16.63553f, 17.0f, 88.0f, -15.9424f,
                          0.5f, -0.5f, 1e-8f, -1e-8f, 5.9604645e-08f, -5.9604645e-08f};
    enum { N_SPECIAL = sizeof special / sizeof special[0], N_NEAR = sizeof near / sizeof near[0] };
    float in[N_SPECIAL + N_NEAR];
    for (int i = 0; i < N_SPECIAL; i++)
        in[i] = from_bits(special[i]);
    memcpy(in + N_SPECIAL, near, sizeof near);
    check_rows(in, N_SPECIAL + N_NEAR);
    /* each value alone: a one-lane tail */
    for (int i = 0; i < N_SPECIAL + N_NEAR; i++)
        check_rows(in + i, 1);
}

static void test_random_values_and_tails(void **state)
{
    (void)state;
    enum { N = 1 << 20 };
    float *in = malloc(N * sizeof *in);
    assert_non_null(in);
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        uint32_t u = (uint32_t)(s >> 32);
        /* half anywhere, half in [-128, 128) where most lanes take the vector path */
        in[i] = i % 2 ? from_bits(u) : (float)((double)u / 4294967296.0 * 256.0 - 128.0);
    }
    check_rows(in, N);
    for (int n = 0; n <= 40; n++)
        check_rows(in + 3 * n, n);
    free(in);
}

/* The AVX-512 row runs exactly when the CPU has AVX-512F (so that the
 * checks above ran it here). */
static void test_avx512_taken(void **state)
{
    (void)state;
#if defined(__x86_64__)
    float y;
    assert_int_equal(ld_fuse_sigmoid_rows_avx512(&y, &(float){1.0f}, 1),
                     __builtin_cpu_supports("avx512f") != 0);
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_random_values_and_tails),
        cmocka_unit_test(test_avx512_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
