/* Exhaustive check of the fused chains' AVX-512 Sigmoid row
 * (backends/exec_fuse_sigmoid.c) against the portable row (activation.c's
 * sigmoid_f with libm's expf) on all 2^32 fp32 bit patterns, NaNs included:
 * the outputs' bits must be equal. The vector row rounds its own double
 * exp to float and recomputes with libm only the lanes near a rounding
 * midpoint, so this is what shows that its bits are libm's everywhere.
 * Inputs go in chunks of 2^14, each cut so that a masked tail of 0 .. 15
 * lanes runs too; every 8th chunk in place (d == in). Two threads; skipped
 * on a CPU without AVX-512F. Built -O2 without sanitizers; about 20 s on
 * two idle Zen 5 cores. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "backends/exec_fuse_ops.h"

#define CHUNK (1u << 14)
#define CHUNKS (1u << 18) /* CHUNK * CHUNKS = 2^32 */
#define THREADS 2

static atomic_uint next_chunk;
static atomic_ullong mismatches;
static atomic_uint example_in, example_got, example_want;
static atomic_bool unsupported;

static void *worker(void *arg)
{
    (void)arg;
    static _Thread_local uint32_t in[CHUNK], got[CHUNK], want[CHUNK];
    for (;;) {
        unsigned c = atomic_fetch_add(&next_chunk, 1);
        if (c >= CHUNKS)
            return NULL;
        for (uint32_t i = 0; i < CHUNK; i++)
            in[i] = c * CHUNK + i;
        ld_fuse_sigmoid_rows_portable((float *)want, (const float *)in, CHUNK);
        uint32_t cut = CHUNK - 16 + c % 16; /* a tail of c % 16 lanes, then the rest */
        bool in_place = c % 8 == 0;
        float *dst = in_place ? (float *)in : (float *)got;
        if (!ld_fuse_sigmoid_rows_avx512(dst, (const float *)in, cut) ||
            !ld_fuse_sigmoid_rows_avx512(dst + cut, (const float *)in + cut, CHUNK - cut)) {
            atomic_store(&unsupported, true);
            return NULL;
        }
        const uint32_t *out = in_place ? in : got;
        for (uint32_t i = 0; i < CHUNK; i++)
            if (out[i] != want[i] && atomic_fetch_add(&mismatches, 1) == 0) {
                atomic_store(&example_in, c * CHUNK + i);
                atomic_store(&example_got, out[i]);
                atomic_store(&example_want, want[i]);
            }
    }
}

static void test_sigmoid_avx512_all_inputs(void **state)
{
    (void)state;
    float probe;
    if (!ld_fuse_sigmoid_rows_avx512(&probe, &(float){0.0f}, 1))
        skip();
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&threads[t], NULL, worker, NULL), 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    assert_false(atomic_load(&unsupported));
    unsigned long long bad = atomic_load(&mismatches);
    if (bad)
        fail_msg("%llu inputs differ; first seen: input 0x%08x gave 0x%08x, portable 0x%08x", bad,
                 atomic_load(&example_in), atomic_load(&example_got), atomic_load(&example_want));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigmoid_avx512_all_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
