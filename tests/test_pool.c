/* Tests of the executor's buffer pool (backends/pool.c): reuse of returned
 * buffers, best fit within twice the request, alignment, and growing a
 * cached mapped buffer in place when none is big enough (its touched pages
 * move along: the old contents are still there), and huge buffers: 2 MiB
 * aligned, in whole 2 MiB units when that costs at most an eighth, marked
 * for transparent huge pages, still aligned and marked after growing.
 *
 * Under AddressSanitizer the library's pool hands every request to malloc
 * (so kernels' use-after-free stays visible); this test compiles its own
 * copy of pool.c with the cache on, which is what release builds run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LD_POOL_NO_BYPASS 1
#include "backends/pool.c"

#define MiB ((size_t)1 << 20)

static void test_returned_buffer_is_reused(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    assert_non_null(pool);
    void *a = ld_pool_get(pool, 1000);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 64, 0);
    ld_pool_put(pool, a);
    assert_int_equal(ld_pool_cached_bytes(pool), 1024); /* rounded to 64 */
    void *b = ld_pool_get(pool, 900);
    assert_ptr_equal(a, b);
    assert_int_equal(ld_pool_cached_bytes(pool), 0);
    ld_pool_put(pool, b);
    ld_pool_destroy(pool);
}

static void test_best_fit_within_twice_the_request(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    void *small = ld_pool_get(pool, 10000), *mid = ld_pool_get(pool, 40000),
         *big = ld_pool_get(pool, 200000);
    ld_pool_put(pool, big);
    ld_pool_put(pool, small);
    ld_pool_put(pool, mid);
    assert_ptr_equal(ld_pool_get(pool, 30000), mid);    /* the smallest that fits */
    void *fresh = ld_pool_get(pool, 60000);             /* big is more than twice as large */
    assert_true(fresh != big && fresh != small);
    assert_ptr_equal(ld_pool_get(pool, 150000), big);
    ld_pool_put(pool, fresh);
    ld_pool_put(pool, mid);
    ld_pool_put(pool, big);
    ld_pool_destroy(pool); /* frees every cached buffer (the leak checker would see one) */
}

static void test_large_buffer_grows_in_place(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    unsigned char *a = ld_pool_get(pool, 2 * MiB + 100);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 4096, 0);
    assert_true(header_of(a)->mapped > 0);
    for (size_t i = 0; i < 2 * MiB + 100; i++)
        a[i] = (unsigned char)(i * 7 + 1);
    ld_pool_put(pool, a);
    /* 5 MiB: no cached block fits, the 2 MiB one grows (pages kept, contents too) */
    unsigned char *b = ld_pool_get(pool, 5 * MiB);
    assert_non_null(b);
    assert_int_equal(ld_pool_cached_bytes(pool), 0);
    assert_true(header_of(b)->capacity >= 5 * MiB);
    for (size_t i = 0; i < 2 * MiB + 100; i += 4093)
        if (b[i] != (unsigned char)(i * 7 + 1))
            fail_msg("byte %zu was not carried over", i);
    memset(b, 0xAB, 5 * MiB); /* all of it is usable */
    ld_pool_put(pool, b);
    assert_true(ld_pool_cached_bytes(pool) >= 5 * MiB);
    assert_ptr_equal(ld_pool_get(pool, 4 * MiB), b);
    ld_pool_put(pool, b);
    ld_pool_destroy(pool);
}

static void test_small_buffers_do_not_grow(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    void *small = ld_pool_get(pool, 4096);
    assert_int_equal(header_of(small)->mapped, 0);
    ld_pool_put(pool, small);
    void *big = ld_pool_get(pool, 2 * MiB); /* only mapped blocks grow: a new one */
    assert_true(big != small);
    assert_int_equal(ld_pool_cached_bytes(pool), 4096);
    ld_pool_put(pool, big);
    ld_pool_destroy(pool);
}

/* Whether the mapping holding p is marked for transparent huge pages
 * ("hg" in its VmFlags); -1 when the kernel has no THP (nothing to test). */
static int marked_huge(const void *p)
{
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) != 0)
        return -1;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int found = 0, result = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            found = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (found && strncmp(line, "VmFlags:", 8) == 0) {
            result = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    return result;
}

#define HUGE_MiB2 ((uintptr_t)2 << 20)

static void test_huge_buffers_are_aligned_whole_units(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    unsigned char *a = ld_pool_get(pool, 4 * MiB - 1000);  /* whole units: 4 MiB */
    unsigned char *b = ld_pool_get(pool, 2 * MiB + 100);   /* an eighth more: not rounded */
    unsigned char *c = ld_pool_get(pool, 1 * MiB + 100);   /* small pages, not aligned */
    assert_int_equal((uintptr_t)a % HUGE_MiB2, 0);
    assert_int_equal((uintptr_t)b % HUGE_MiB2, 0);
    assert_int_equal(header_of(a)->capacity, 4 * MiB);
    assert_int_equal(header_of(b)->capacity, 2 * MiB + 4096);
    assert_int_equal(header_of(c)->capacity, 1 * MiB + 4096);
    int marked = marked_huge(a);
    if (marked >= 0) {
        assert_int_equal(marked, 1);
        assert_int_equal(marked_huge(c), 0);
    }
    memset(a, 1, 4 * MiB);
    memset(b, 2, 2 * MiB + 100);
    ld_pool_put(pool, a);
    ld_pool_put(pool, b);
    ld_pool_put(pool, c);
    ld_pool_destroy(pool);
}

/* A huge block grows to an aligned place, keeping its pages and the mark. */
static void test_huge_block_grows_aligned(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    unsigned char *a = ld_pool_get(pool, 3 * MiB);
    for (size_t i = 0; i < 3 * MiB; i++)
        a[i] = (unsigned char)(i * 13 + 5);
    ld_pool_put(pool, a);
    unsigned char *b = ld_pool_get(pool, 8 * MiB); /* grown: nothing else cached */
    assert_int_equal(ld_pool_cached_bytes(pool), 0);
    assert_int_equal((uintptr_t)b % HUGE_MiB2, 0);
    assert_int_equal(header_of(b)->capacity, 8 * MiB);
    for (size_t i = 0; i < 3 * MiB; i += 4091)
        if (b[i] != (unsigned char)(i * 13 + 5))
            fail_msg("byte %zu was not carried over", i);
    memset(b, 0xCD, 8 * MiB);
    if (marked_huge(b) >= 0)
        assert_int_equal(marked_huge(b), 1);
    ld_pool_put(pool, b);
    ld_pool_destroy(pool);
}

/* ld_buffer_alloc: the pool's allocation without the pool. */
static void test_buffer_alloc(void **state)
{
    (void)state;
    unsigned char *big = ld_buffer_alloc(5 * MiB), *small = ld_buffer_alloc(100);
    assert_non_null(big);
    assert_non_null(small);
    assert_int_equal((uintptr_t)big % HUGE_MiB2, 0);
    assert_int_equal((uintptr_t)small % 64, 0);
    memset(big, 3, 5 * MiB);
    memset(small, 4, 100);
    ld_buffer_free(big);
    ld_buffer_free(small);
    ld_buffer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_returned_buffer_is_reused),
        cmocka_unit_test(test_best_fit_within_twice_the_request),
        cmocka_unit_test(test_large_buffer_grows_in_place),
        cmocka_unit_test(test_small_buffers_do_not_grow),
        cmocka_unit_test(test_huge_buffers_are_aligned_whole_units),
        cmocka_unit_test(test_huge_block_grows_aligned),
        cmocka_unit_test(test_buffer_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
