/* Tests of the executor's buffer pool (backends/pool.c): buffers of every
 * size carved from one arena marked for transparent huge pages; reuse of
 * returned blocks (best fit, neighbours merged), alignment, growth at the
 * top that keeps the touched free range (and its contents), bounded memory
 * under a random live set, the fallbacks (madvise refused: the arena still
 * pools; no reservation or a full one: buffers of their own, cached within
 * twice the request), the RLIMIT_AS cap of the reservation, and
 * ld_buffer_alloc's process-wide arena giving its pages back when empty,
 * the dry arena (ld_arena_sim) replaying the real one's choices, and
 * ld_pool_prefault (resident up to the request, nothing beyond its last
 * 2 MiB unit; one write per page when MADV_POPULATE_WRITE is refused).
 *
 * Under AddressSanitizer the library's pool hands every request to malloc
 * (so kernels' use-after-free stays visible); this test compiles its own
 * copy of pool.c with the cache on, which is what release builds run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LD_POOL_NO_BYPASS 1
#include "backends/pool.c"

#define MiB ((size_t)1 << 20)
#define HUGE_MiB2 ((uintptr_t)2 << 20)

static int setup(void **state)
{
    (void)state;
    arena_reserve_request = ARENA_RESERVE;
    pool_madvise = madvise;
    return 0;
}

static size_t offset_of(const ld_pool *pool, const void *p)
{
    return (size_t)((const char *)p - pool->arena.base);
}

static void test_returned_buffer_is_reused(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    assert_non_null(pool);
    void *a = ld_pool_get(pool, 1000);
    assert_non_null(a);
    assert_int_equal(header_of(a)->kind, BLOCK_ARENA);
    assert_int_equal((uintptr_t)a % 64, 0);
    assert_int_equal((uintptr_t)pool->arena.base % HUGE_MiB2, 0);
    ld_pool_put(pool, a);
    assert_int_equal(ld_pool_cached_bytes(pool), 1024 + HEADER_SIZE); /* rounded to 64 */
    void *b = ld_pool_get(pool, 900);
    assert_ptr_equal(a, b);
    assert_int_equal(ld_pool_cached_bytes(pool), 64); /* the rest of the block stays free */
    ld_pool_put(pool, b);
    ld_pool_destroy(pool);
}

/* Small buffers on 64 bytes, from 64 KiB up on a page, all inside the
 * arena, none overlapping, every byte usable. */
static void test_alignment_and_no_overlap(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    static const size_t sizes[] = {1, 63, 64, 65, 4095, 65535, 65536, 100000, 3 * MiB + 5, 17};
    enum { N = sizeof sizes / sizeof sizes[0] };
    unsigned char *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = ld_pool_get(pool, sizes[i]);
        assert_non_null(p[i]);
        assert_int_equal((uintptr_t)p[i] % (sizes[i] >= 65536 ? 4096 : 64), 0);
        assert_true(offset_of(pool, p[i]) + sizes[i] <= pool->arena.top);
        assert_true(header_of(p[i])->capacity >= sizes[i]);
        memset(p[i], i + 1, sizes[i]);
    }
    for (int i = 0; i < N; i++)
        for (size_t j = 0; j < sizes[i]; j += 511)
            assert_int_equal(p[i][j], i + 1);
    for (int i = 0; i < N; i++)
        ld_pool_put(pool, p[i]);
    /* all returned: one free range, the whole touched part */
    assert_int_equal(pool->arena.n_free, 1);
    assert_int_equal(ld_pool_cached_bytes(pool), pool->arena.top);
    ld_pool_destroy(pool);
}

static void test_best_fit_and_merging(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    void *small = ld_pool_get(pool, 10000), *sep1 = ld_pool_get(pool, 100);
    void *mid = ld_pool_get(pool, 40000), *sep2 = ld_pool_get(pool, 100);
    void *big = ld_pool_get(pool, 200000), *sep3 = ld_pool_get(pool, 100);
    size_t top = pool->arena.top;
    ld_pool_put(pool, big);
    ld_pool_put(pool, small);
    ld_pool_put(pool, mid);
    assert_int_equal(pool->arena.n_free, 3);
    assert_ptr_equal(ld_pool_get(pool, 30000), mid); /* the smallest free range that fits */
    ld_pool_put(pool, mid);
    /* a separator returned: its neighbours merge with it */
    ld_pool_put(pool, sep1);
    assert_int_equal(pool->arena.n_free, 2);
    void *both = ld_pool_get(pool, 50000); /* fits only in small+sep1+mid */
    assert_ptr_equal(both, small);
    assert_int_equal(pool->arena.top, top); /* no fresh memory */
    ld_pool_put(pool, both);
    ld_pool_put(pool, sep2);
    ld_pool_put(pool, sep3);
    assert_int_equal(pool->arena.n_free, 1);
    assert_int_equal(pool->arena.live, 0);
    ld_pool_destroy(pool);
}

/* No free range fits: the one ending at the top grows into fresh memory,
 * keeping its touched pages and contents. */
static void test_top_range_grows(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    unsigned char *a = ld_pool_get(pool, 3 * MiB);
    for (size_t i = 0; i < 3 * MiB; i++)
        a[i] = (unsigned char)(i * 13 + 5);
    ld_pool_put(pool, a);
    unsigned char *b = ld_pool_get(pool, 8 * MiB);
    assert_ptr_equal(b, a);
    assert_int_equal(ld_pool_cached_bytes(pool), 0);
    assert_true(pool->arena.top <= 8 * MiB + 2 * PAGE);
    for (size_t i = 0; i < 3 * MiB; i += 4091)
        if (b[i] != (unsigned char)(i * 13 + 5))
            fail_msg("byte %zu was not kept", i);
    memset(b, 0xCD, 8 * MiB);
    /* a range that does not end at the top does not grow: fresh memory */
    void *c = ld_pool_get(pool, 100);
    ld_pool_put(pool, b);
    void *d = ld_pool_get(pool, 9 * MiB);
    assert_true((unsigned char *)d > (unsigned char *)c);
    ld_pool_put(pool, c);
    ld_pool_put(pool, d);
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

/* The arena is marked, so small buffers get huge pages too; committing
 * more of it (mprotect) keeps the mark. */
static void test_arena_is_marked_huge(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    unsigned char *small = ld_pool_get(pool, 4096);
    unsigned char *big = ld_pool_get(pool, ARENA_COMMIT_STEP + MiB); /* a second commit */
    memset(small, 1, 4096);
    memset(big, 2, ARENA_COMMIT_STEP + MiB);
    int marked = marked_huge(small);
    if (marked >= 0) {
        assert_true(pool->arena.huge);
        assert_int_equal(marked, 1);
        assert_int_equal(marked_huge(big + ARENA_COMMIT_STEP), 1);
    }
    ld_pool_put(pool, small);
    ld_pool_put(pool, big);
    ld_pool_destroy(pool);
}

static int refuse_madvise(void *addr, size_t len, int advice)
{
    (void)addr;
    (void)len;
    (void)advice;
    errno = EINVAL;
    return -1;
}

/* madvise refused (no THP): the arena still pools, in small pages. */
static void test_madvise_refused_still_pools(void **state)
{
    (void)state;
    pool_madvise = refuse_madvise;
    ld_pool *pool = ld_pool_create();
    unsigned char *a = ld_pool_get(pool, 3 * MiB);
    assert_non_null(a);
    assert_false(pool->arena.huge);
    assert_int_equal(header_of(a)->kind, BLOCK_ARENA);
    assert_int_equal(marked_huge(a) == 1, 0);
    memset(a, 7, 3 * MiB);
    ld_pool_put(pool, a);
    assert_ptr_equal(ld_pool_get(pool, 2 * MiB), a);
    ld_pool_put(pool, a);
    ld_pool_destroy(pool);
    pool_madvise = madvise;
}

/* The dry arena (ld_arena_sim) makes the same choices as the real one: a
 * random sequence of gets and puts gives every block the same offsets and
 * the same top, in both. */
static void test_dry_arena_replays_the_real_one(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    ld_arena_sim *sim = ld_arena_sim_create();
    assert_non_null(sim);
    enum { SLOTS = 20, STEPS = 4000 };
    void *p[SLOTS] = {0};
    ld_arena_block b[SLOTS];
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = (int)(x % SLOTS);
        if (p[k]) {
            ld_pool_put(pool, p[k]);
            ld_arena_sim_put(sim, b[k]);
            p[k] = NULL;
            continue;
        }
        size_t n = (size_t)1 << (x >> 40) % 23; /* 1 byte .. 4 MiB */
        n += (x >> 20) % n;
        p[k] = ld_pool_get(pool, n);
        assert_non_null(p[k]);
        assert_true(ld_arena_sim_get(sim, n, &b[k]));
        assert_int_equal(header_of(p[k])->start, b[k].start);
        assert_int_equal(header_of(p[k])->end, b[k].end);
        assert_int_equal(ld_pool_top(pool), ld_arena_sim_top(sim));
    }
    assert_true(ld_pool_top(pool) > 0);
    for (int k = 0; k < SLOTS; k++)
        ld_pool_put(pool, p[k]);
    ld_arena_sim_destroy(sim);
    ld_pool_destroy(pool);
}

/* Resident pages of [base, base + len) (mincore), counted; *first_beyond:
 * whether any page at or after `from` is resident. */
static size_t resident_pages(const char *base, size_t len, size_t from, bool *any_beyond)
{
    size_t pages = len / PAGE, n = 0;
    unsigned char *vec = calloc(pages, 1);
    assert_int_equal(mincore((void *)base, len, vec), 0);
    *any_beyond = false;
    for (size_t i = 0; i < pages; i++) {
        n += vec[i] & 1;
        if (i * PAGE >= from && (vec[i] & 1))
            *any_beyond = true;
    }
    free(vec);
    return n;
}

static void check_prefault(size_t nbytes)
{
    ld_pool *pool = ld_pool_create();
    size_t len = (nbytes + PAGE - 1) & ~(PAGE - 1);
    assert_int_equal(ld_pool_prefault(pool, nbytes), len);
    assert_int_equal(ld_pool_prefaulted(pool), len);
    arena *a = &pool->arena;
    size_t unit_end = (len + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    assert_int_equal(a->committed, unit_end);
    assert_int_equal(a->top, 0);
    /* resident up to the planned bytes, nothing beyond their last 2 MiB unit */
    bool beyond;
    size_t n = resident_pages(a->base, unit_end + 2 * HUGE_PAGE, unit_end, &beyond);
    assert_false(beyond);
    assert_true(n >= len / PAGE);
    /* only once, and not on an arena in use */
    assert_int_equal(ld_pool_prefault(pool, nbytes), 0);
    void *buf = ld_pool_get(pool, nbytes);
    assert_ptr_equal(buf, a->base + HEADER_SIZE + (nbytes >= PAGE_ALIGN_MIN ? PAGE - HEADER_SIZE : 0));
    memset(buf, 3, nbytes);
    ld_pool_put(pool, buf);
    ld_pool_destroy(pool);
}

static void test_prefault(void **state)
{
    (void)state;
    check_prefault(5 * MiB + 100);
    check_prefault(3000);
    ld_pool *pool = ld_pool_create();
    assert_int_equal(ld_pool_prefault(pool, 0), 0);
    assert_int_equal(ld_pool_prefault(pool, ARENA_RESERVE + PAGE), 0); /* beyond it */
    assert_int_equal(pool->arena.committed, 0);
    void *buf = ld_pool_get(pool, 100);
    assert_int_equal(ld_pool_prefault(pool, MiB), 0); /* in use already */
    ld_pool_put(pool, buf);
    ld_pool_destroy(pool);
}

static int refuse_populate(void *addr, size_t len, int advice)
{
    if (advice == MADV_POPULATE_WRITE) {
        errno = EINVAL;
        return -1;
    }
    return madvise(addr, len, advice);
}

/* Kernels before 5.14 refuse MADV_POPULATE_WRITE: one write per page. */
static void test_prefault_without_populate(void **state)
{
    (void)state;
    pool_madvise = refuse_populate;
    check_prefault(3 * MiB + 5);
    pool_madvise = madvise;
}

/* A random live set (sizes from 64 bytes to 6 MiB, freed in random order):
 * the touched part stays within a bound of the largest live set, the
 * accounting adds up, and no two live buffers overlap (each holds its
 * pattern until returned). */
static void test_bounded_under_random_live_set(void **state)
{
    (void)state;
    ld_pool *pool = ld_pool_create();
    enum { SLOTS = 24, STEPS = 3000 };
    unsigned char *p[SLOTS] = {0};
    size_t n[SLOTS] = {0}, live = 0, peak = 0, largest = 0;
    uint64_t x = 88172645463325252u;
    for (int step = 0; step < STEPS; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int s = (int)(x % SLOTS);
        if (p[s]) {
            for (size_t j = 0; j < n[s]; j += 1021)
                if (p[s][j] != (unsigned char)s)
                    fail_msg("slot %d overwritten at step %d", s, step);
            ld_pool_put(pool, p[s]);
            live -= n[s];
            p[s] = NULL;
            continue;
        }
        int shift = 6 + (int)((x >> 20) % 17); /* 64 B .. 8 MiB */
        n[s] = ((size_t)1 << shift) + (size_t)((x >> 40) % ((size_t)1 << shift));
        p[s] = ld_pool_get(pool, n[s]);
        assert_non_null(p[s]);
        memset(p[s], s, n[s]);
        live += n[s];
        peak = live > peak ? live : peak;
        largest = n[s] > largest ? n[s] : largest;
        size_t out = 0;
        for (int i = 0; i < SLOTS; i++)
            if (p[i])
                out += header_of(p[i])->end - header_of(p[i])->start;
        assert_int_equal(out + pool->arena.free_bytes, pool->arena.top);
    }
    /* Best fit with merging stays near the peak live set; the bound leaves
     * room for holes (a plain bump allocator would need GBs here). */
    assert_true(pool->arena.top <= 2 * peak + largest);
    for (int s = 0; s < SLOTS; s++)
        ld_pool_put(pool, p[s]);
    assert_int_equal(pool->arena.n_free, 1);
    ld_pool_destroy(pool);
}

/* No reservation: buffers of their own, cached best fit within twice the
 * request; from 2 MiB up mapped, 2 MiB aligned, whole units when that
 * costs at most an eighth. */
static void test_without_arena(void **state)
{
    (void)state;
    arena_reserve_request = 0;
    ld_pool *pool = ld_pool_create();
    void *small = ld_pool_get(pool, 10000), *mid = ld_pool_get(pool, 40000),
         *big = ld_pool_get(pool, 200000);
    assert_null(pool->arena.base);
    assert_int_equal(header_of(small)->kind, BLOCK_MALLOC);
    ld_pool_put(pool, big);
    ld_pool_put(pool, small);
    ld_pool_put(pool, mid);
    assert_ptr_equal(ld_pool_get(pool, 30000), mid);
    void *fresh = ld_pool_get(pool, 60000); /* big is more than twice as large */
    assert_true(fresh != big && fresh != small);
    assert_ptr_equal(ld_pool_get(pool, 150000), big);
    unsigned char *a = ld_pool_get(pool, 4 * MiB - 1000); /* whole units: 4 MiB */
    unsigned char *b = ld_pool_get(pool, 2 * MiB + 100);  /* an eighth more: not rounded */
    assert_int_equal(header_of(a)->kind, BLOCK_MAPPED);
    assert_int_equal((uintptr_t)a % HUGE_MiB2, 0);
    assert_int_equal((uintptr_t)b % HUGE_MiB2, 0);
    assert_int_equal(header_of(a)->capacity, 4 * MiB);
    assert_int_equal(header_of(b)->capacity, 2 * MiB + 4096);
    if (marked_huge(a) >= 0)
        assert_int_equal(marked_huge(a), 1);
    memset(a, 1, 4 * MiB);
    memset(b, 2, 2 * MiB + 100);
    ld_pool_put(pool, a);
    ld_pool_put(pool, b);
    ld_pool_put(pool, fresh);
    ld_pool_put(pool, mid);
    ld_pool_put(pool, big);
    ld_pool_destroy(pool); /* frees every cached buffer (the leak checker would see one) */
    arena_reserve_request = ARENA_RESERVE;
}

/* A full arena: what does not fit is a buffer of its own; the arena keeps
 * serving what fits. */
static void test_full_arena_falls_back(void **state)
{
    (void)state;
    arena_reserve_request = ARENA_RESERVE_MIN;
    ld_pool *pool = ld_pool_create();
    void *a = ld_pool_get(pool, 40 * MiB);
    assert_int_equal(header_of(a)->kind, BLOCK_ARENA);
    assert_int_equal(pool->arena.reserved, ARENA_RESERVE_MIN);
    void *b = ld_pool_get(pool, 40 * MiB); /* 80 MiB > 64 MiB reserved */
    assert_int_equal(header_of(b)->kind, BLOCK_MAPPED);
    void *c = ld_pool_get(pool, 100 * MiB);
    assert_int_equal(header_of(c)->kind, BLOCK_MAPPED);
    ld_pool_put(pool, b);
    assert_int_equal(ld_pool_cached_bytes(pool), 40 * MiB);
    ld_pool_put(pool, a);
    assert_ptr_equal(ld_pool_get(pool, 30 * MiB), a); /* the arena first */
    ld_pool_put(pool, a);
    ld_pool_put(pool, c);
    ld_pool_destroy(pool);
    arena_reserve_request = ARENA_RESERVE;
}

static void test_reserve_size(void **state)
{
    (void)state;
    struct rlimit unlimited = {RLIM_INFINITY, RLIM_INFINITY};
    struct rlimit limited = {(rlim_t)8 << 30, RLIM_INFINITY};
    assert_int_equal(reserve_size(ARENA_RESERVE, NULL), ARENA_RESERVE);
    assert_int_equal(reserve_size(ARENA_RESERVE, &unlimited), ARENA_RESERVE);
    assert_int_equal(reserve_size(ARENA_RESERVE, &limited), (size_t)2 << 30); /* a quarter */
    limited.rlim_cur = ((rlim_t)8 << 30) + 12345;
    assert_int_equal(reserve_size(ARENA_RESERVE, &limited), (size_t)2 << 30); /* whole units */
    assert_int_equal(reserve_size(3 * MiB, NULL), 2 * MiB);
}

/* ld_buffer_alloc: the process-wide arena; returned blocks are reused, and
 * its pages go back to the system when the last one is freed. */
static void test_buffer_alloc(void **state)
{
    (void)state;
    unsigned char *big = ld_buffer_alloc(5 * MiB), *small = ld_buffer_alloc(100);
    assert_non_null(big);
    assert_non_null(small);
    assert_int_equal(header_of(big)->kind, BLOCK_ARENA);
    assert_int_equal((uintptr_t)big % 4096, 0);
    assert_int_equal((uintptr_t)small % 64, 0);
    memset(big, 3, 5 * MiB);
    memset(small, 4, 100);
    ld_buffer_free(big);
    unsigned char *again = ld_buffer_alloc(4 * MiB);
    assert_ptr_equal(again, big);
    assert_int_equal(again[4 * MiB - 1], 3); /* the same pages, still there */
    ld_buffer_free(again);
    assert_true(buffer_arena.top > 0);
    ld_buffer_free(small);
    assert_int_equal(buffer_arena.top, 0); /* empty: pages given back */
    assert_int_equal(buffer_arena.n_free, 0);
    unsigned char *fresh = ld_buffer_alloc(5 * MiB); /* where big was, in new zero pages */
    assert_ptr_equal(fresh, big);
    assert_int_equal(fresh[0], 0);
    assert_int_equal(fresh[4 * MiB - 1], 0);
    ld_buffer_free(fresh);
    ld_buffer_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_returned_buffer_is_reused, setup),
        cmocka_unit_test_setup(test_alignment_and_no_overlap, setup),
        cmocka_unit_test_setup(test_best_fit_and_merging, setup),
        cmocka_unit_test_setup(test_top_range_grows, setup),
        cmocka_unit_test_setup(test_arena_is_marked_huge, setup),
        cmocka_unit_test_setup(test_madvise_refused_still_pools, setup),
        cmocka_unit_test_setup(test_bounded_under_random_live_set, setup),
        cmocka_unit_test_setup(test_without_arena, setup),
        cmocka_unit_test_setup(test_full_arena_falls_back, setup),
        cmocka_unit_test_setup(test_reserve_size, setup),
        cmocka_unit_test_setup(test_buffer_alloc, setup),
        cmocka_unit_test_setup(test_dry_arena_replays_the_real_one, setup),
        cmocka_unit_test_setup(test_prefault, setup),
        cmocka_unit_test_setup(test_prefault_without_populate, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
