/* Unit tests for the convolutions' claim pool (backends/kernels/conv_pool.c):
 * every item runs exactly once, in ranges of at most `claim` items within
 * one worker's share, each worker getting its own share's ranges in
 * increasing order from the share's start, with worker ids below the thread
 * count;
 * helpers really take claims (the caller's first claim waits until one
 * has); many tiny jobs in a row (the open/close hand-over); two callers at
 * once (the second runs alone); and the convolutions that use the pool
 * (direct, pointwise, depthwise through their kernels) give the same bits
 * on 1, 2 and 3 threads (test_conv_fast.c and test_kernels_conv.c compare
 * 1 and 2 threads against their references). Also the direct kernel's
 * packed-weight cache (ld_conv_direct_f32_cached): a second call with the
 * same weights uses the cache (proved by changing the values behind the
 * pointer, which the contract forbids, and getting the first result), and
 * other weights, another tile variant or another level pack again: the
 * bits of the uncached kernel every time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_direct.h"
#include "backends/kernels/conv_direct_internal.h"
#include "backends/kernels/conv_pool.h"

#define MAX_ITEMS 5000

typedef struct {
    _Atomic int hits[MAX_ITEMS];
    _Atomic int64_t last[LD_CONV_POOL_MAX_THREADS]; /* end of each worker's last own range */
    _Atomic int bad;                                /* ranges out of order or too long */
    int64_t claim, n;
    int threads;
} cover;

/* The share (conv_pool.h) that holds item i. */
static int share_of(const cover *c, int64_t i)
{
    int w = 0;
    while (w + 1 < c->threads && ld_conv_pool_share_start(c->n, c->threads, w + 1) <= i)
        w++;
    return w;
}

static void cover_fn(void *arg, int worker, int64_t i0, int64_t i1)
{
    cover *c = arg;
    bool alone = i0 == 0 && i1 == c->n; /* one call of everything */
    bool ok = worker >= 0 && worker < c->threads && i0 < i1 && i1 - i0 <= c->claim;
    if (ok && !alone) {
        int w = share_of(c, i0);
        ok = share_of(c, i1 - 1) == w; /* never across shares */
        /* the worker's own share: in increasing order, from its start */
        if (ok && w == worker) {
            int64_t last = atomic_load(&c->last[worker]);
            ok = last ? i0 == last : i0 == ld_conv_pool_share_start(c->n, c->threads, w);
        }
    }
    if (!ok)
        atomic_fetch_add(&c->bad, 1);
    if (ok && !alone && share_of(c, i0) == worker)
        atomic_store(&c->last[worker], i1);
    for (int64_t i = i0; i < i1; i++)
        atomic_fetch_add(&c->hits[i], 1);
}

static void check_cover(int threads, int64_t n, int64_t claim)
{
    static cover c;
    memset(&c, 0, sizeof c);
    c.claim = threads > 1 && n > 1 ? claim : n; /* alone: one call of everything */
    c.threads = threads < 1 ? 1 : threads;
    c.n = n;
    ld_conv_pool_run(threads, n, claim, cover_fn, &c);
    assert_int_equal(atomic_load(&c.bad), 0);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(atomic_load(&c.hits[i]), 1);
}

static void test_pool_cover(void **state)
{
    (void)state;
    const int64_t ns[] = {0, 1, 2, 3, 7, 64, 100, 1000, MAX_ITEMS};
    const int64_t claims[] = {1, 3, 16, 1000000};
    for (int threads = 1; threads <= 5; threads++)
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
            for (size_t b = 0; b < sizeof claims / sizeof *claims; b++)
                check_cover(threads, ns[a], claims[b]);
}

/* Thousands of tiny jobs: a helper that wakes late must never run a claim
 * of a job that closed or of the next one. */
static void test_pool_many_jobs(void **state)
{
    (void)state;
    for (int k = 0; k < 3000; k++)
        check_cover(2 + k % 3, 1 + k % 17, 1 + k % 4);
}

typedef struct {
    _Atomic int helper_items;
    _Atomic int total;
    _Atomic int64_t helper_first; /* the helper's first item, -1 before */
    bool timed_out;
} share;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void share_fn(void *arg, int worker, int64_t i0, int64_t i1)
{
    share *s = arg;
    if (worker != 0) {
        int64_t none = -1;
        atomic_compare_exchange_strong(&s->helper_first, &none, i0);
        atomic_fetch_add(&s->helper_items, (int)(i1 - i0));
    } else if (i0 == 0) { /* the caller's first claim waits for a helper (10 s at most) */
        double until = now_s() + 10.0;
        while (atomic_load(&s->helper_items) == 0 && now_s() < until) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        s->timed_out = atomic_load(&s->helper_items) == 0;
    }
    atomic_fetch_add(&s->total, (int)(i1 - i0));
}

/* The usual claim: about 8 per thread, never 0, never above 2^20. */
static void test_pool_claim(void **state)
{
    (void)state;
    assert_int_equal(ld_conv_pool_claim(0, 2), 1);
    assert_int_equal(ld_conv_pool_claim(15, 2), 1);
    assert_int_equal(ld_conv_pool_claim(160, 2), 10);
    assert_int_equal(ld_conv_pool_claim(160, 1), 20);
    assert_int_equal(ld_conv_pool_claim(160, 0), 20); /* no threads: as one */
    assert_int_equal(ld_conv_pool_claim((int64_t)1 << 40, 2), 1 << 20);
}

static void test_pool_helpers_share(void **state)
{
    (void)state;
    int64_t before = ld_conv_pool_shared_jobs();
    share s = {.helper_first = -1};
    ld_conv_pool_run(2, 64, 1, share_fn, &s);
    assert_false(s.timed_out);
    assert_true(atomic_load(&s.helper_items) > 0);
    /* the helper starts on its own share, the second half: the caller
       waited in its first claim, so nothing of that share was taken */
    assert_int_equal(atomic_load(&s.helper_first), ld_conv_pool_share_start(64, 2, 1));
    assert_int_equal(ld_conv_pool_share_start(64, 2, 1), 32);
    const int64_t starts[] = {0, 3, 5, 7}; /* 7 items on 3 threads: 3, 2, 2 */
    for (int w = 0; w <= 3; w++)
        assert_int_equal(ld_conv_pool_share_start(7, 3, w), starts[w]);
    assert_int_equal(atomic_load(&s.total), 64);
    assert_true(ld_conv_pool_shared_jobs() > before);
}

/* Two callers at once: one job runs on the pool, the other alone; both
 * complete and cover their items. */
typedef struct {
    cover c;
    int64_t n;
} caller_arg;

static void *caller_main(void *p)
{
    caller_arg *a = p;
    for (int k = 0; k < 200; k++) {
        memset(&a->c, 0, sizeof a->c);
        a->c.claim = a->n; /* either way of running */
        a->c.threads = 3;
        a->c.n = a->n;
        ld_conv_pool_run(3, a->n, 5, cover_fn, &a->c);
        if (atomic_load(&a->c.bad))
            return (void *)1;
        for (int64_t i = 0; i < a->n; i++)
            if (atomic_load(&a->c.hits[i]) != 1)
                return (void *)1;
    }
    return NULL;
}

static void test_pool_concurrent_callers(void **state)
{
    (void)state;
    caller_arg *a = calloc(2, sizeof *a);
    assert_non_null(a);
    a[0].n = 300;
    a[1].n = 77;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller_main, &a[i]), 0);
    for (int i = 0; i < 2; i++) {
        void *rc = (void *)1;
        assert_int_equal(pthread_join(t[i], &rc), 0);
        assert_null(rc);
    }
    free(a);
}

/* The direct convolution (windowed, ring and pointwise) on 1, 2 and 3
 * threads: the same bits (each output is computed within one item). */
static void run_direct(const float *x, const float *w, const float *b, float *y, int64_t C,
                       int64_t M, const ld_window_geom *g, int threads)
{
    size_t n = ld_conv_direct_scratch_floats(g, C, M, threads);
    float *scratch = malloc(n * sizeof(float));
    assert_non_null(scratch);
    ld_conv_direct_f32(x, w, b, y, C, M, g, scratch, threads, NULL);
    free(scratch);
}

static void check_direct_threads(int64_t C, int64_t M, int64_t H, int64_t W, int64_t k,
                                 int64_t s, int64_t pad)
{
    ld_window_geom g;
    memset(&g, 0, sizeof g);
    g.nd = 2; /* nd dims first: ld_window_geom_finish moves them to the end */
    g.in[0] = H, g.in[1] = W;
    g.k[0] = g.k[1] = k;
    g.s[0] = g.s[1] = s;
    g.d[0] = g.d[1] = 1;
    g.pb[0] = g.pb[1] = g.pe[0] = g.pe[1] = pad;
    g.out[0] = (H + 2 * pad - k) / s + 1;
    g.out[1] = (W + 2 * pad - k) / s + 1;
    ld_window_geom_finish(&g);
    if (!ld_conv_direct_preferred(&g, C, M)) {
        print_message("direct convolution not available here: skipped\n");
        return;
    }
    size_t nx = (size_t)(C * g.in_size), nw = (size_t)(M * C * g.k_size);
    size_t ny = (size_t)(M * g.out_size);
    float *x = malloc(nx * sizeof(float)), *w = malloc(nw * sizeof(float));
    float *b = malloc((size_t)M * sizeof(float)), *y[3];
    assert_true(x && w && b);
    uint32_t r = 12345;
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (size_t i = 0; i < nw; i++)
        w[i] = (float)((r = r * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int64_t i = 0; i < M; i++)
        b[i] = (float)i * 0.125f;
    for (int t = 0; t < 3; t++) {
        y[t] = malloc(ny * sizeof(float));
        assert_non_null(y[t]);
        run_direct(x, w, b, y[t], C, M, &g, t + 1);
    }
    assert_memory_equal(y[0], y[1], ny * sizeof(float));
    assert_memory_equal(y[0], y[2], ny * sizeof(float));
    for (int t = 0; t < 3; t++)
        free(y[t]);
    free(x);
    free(w);
    free(b);
}

/* One geometry's buffers for the cache test. */
typedef struct {
    ld_window_geom g;
    int64_t C, M;
    float *x, *w, *w2, *b, *y, *want, *scratch;
    size_t nx, nw, ny;
} cache_case;

static void fill(float *v, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
}

static bool cache_case_make(cache_case *c, int64_t C, int64_t M, int64_t H, int64_t W, int64_t k)
{
    memset(c, 0, sizeof *c);
    c->g.nd = 2;
    c->g.in[0] = H, c->g.in[1] = W;
    c->g.k[0] = c->g.k[1] = k;
    c->g.s[0] = c->g.s[1] = 1;
    c->g.d[0] = c->g.d[1] = 1;
    c->g.pb[0] = c->g.pb[1] = c->g.pe[0] = c->g.pe[1] = k / 2;
    c->g.out[0] = H, c->g.out[1] = W;
    ld_window_geom_finish(&c->g);
    c->C = C, c->M = M;
    if (!ld_conv_direct_preferred(&c->g, C, M))
        return false;
    c->nx = (size_t)(C * c->g.in_size), c->nw = (size_t)(M * C * c->g.k_size);
    c->ny = (size_t)(M * c->g.out_size);
    c->x = malloc(c->nx * sizeof(float));
    c->w = malloc(c->nw * sizeof(float));
    c->w2 = malloc(c->nw * sizeof(float));
    c->b = malloc((size_t)M * sizeof(float));
    c->y = malloc(c->ny * sizeof(float));
    c->want = malloc(c->ny * sizeof(float));
    c->scratch = malloc(ld_conv_direct_scratch_floats(&c->g, C, M, 2) * sizeof(float));
    assert_true(c->x && c->w && c->w2 && c->b && c->y && c->want && c->scratch);
    fill(c->x, c->nx, 1);
    fill(c->w, c->nw, 2);
    fill(c->w2, c->nw, 3);
    fill(c->b, (size_t)M, 4);
    return true;
}

static void cache_case_free(cache_case *c)
{
    free(c->x), free(c->w), free(c->w2), free(c->b), free(c->y), free(c->want);
    free(c->scratch);
}

/* y = the cached call; want = the uncached one (on weights w). */
static void cached_vs_plain(cache_case *c, const float *w, ld_conv_direct_pack *cache)
{
    ld_conv_direct_f32(c->x, w, c->b, c->want, c->C, c->M, &c->g, c->scratch, 2, NULL);
    ld_conv_direct_f32_cached(c->x, w, c->b, c->y, c->C, c->M, &c->g, c->scratch, 2, NULL,
                              cache);
    assert_memory_equal(c->y, c->want, c->ny * sizeof(float));
    assert_ptr_equal(cache->w, w);
    assert_non_null(cache->data);
}

static void check_cache(int64_t C, int64_t M, int64_t H, int64_t W, int64_t k)
{
    cache_case c;
    if (!cache_case_make(&c, C, M, H, W, k)) {
        print_message("direct convolution not available here: skipped\n");
        return;
    }
    ld_conv_direct_pack cache = {0};
    cached_vs_plain(&c, c.w, &cache); /* packs */
    const float *held = cache.data;
    cached_vs_plain(&c, c.w, &cache); /* hits */
    assert_ptr_equal(cache.data, held);
    /* the values behind the pointer changed (forbidden): the cache still
     * gives the first weights' result, so the call did not pack again */
    float *first = malloc(c.ny * sizeof(float)), *saved = malloc(c.nw * sizeof(float));
    assert_true(first && saved);
    memcpy(first, c.y, c.ny * sizeof(float));
    memcpy(saved, c.w, c.nw * sizeof(float));
    memcpy(c.w, c.w2, c.nw * sizeof(float));
    ld_conv_direct_f32_cached(c.x, c.w, c.b, c.y, C, M, &c.g, c.scratch, 2, NULL, &cache);
    assert_memory_equal(c.y, first, c.ny * sizeof(float));
    memcpy(c.w, saved, c.nw * sizeof(float));
    /* other weights: packs again */
    cached_vs_plain(&c, c.w2, &cache);
    /* every tile variant (another MB), then back */
    for (int v = 0; v < ld_conv_direct_variant_count(); v++) {
        ld_conv_direct_force_variant(v);
        cached_vs_plain(&c, c.w, &cache);
    }
    ld_conv_direct_force_variant(-1);
    cached_vs_plain(&c, c.w, &cache);
    ld_conv_direct_pack_clear(&cache);
    assert_null(cache.data);
    assert_null(cache.w);
    free(first);
    free(saved);
    cache_case_free(&c);
}

/* ld_conv_direct_prepack packs what the call on the same geometry reads:
 * the call finds it in the cache (no second packing) and gives the bits of
 * the uncached kernel, at every variant forced and at the automatic one. */
static void check_prepack(int64_t C, int64_t M, int64_t H, int64_t W, int64_t k)
{
    cache_case c;
    if (!cache_case_make(&c, C, M, H, W, k))
        return;
    for (int v = -1; v < ld_conv_direct_variant_count(); v++) {
        ld_conv_direct_force_variant(v);
        ld_conv_direct_pack cache = {0};
        assert_true(ld_conv_direct_prepack(c.w, C, M, &c.g, &cache));
        const float *held = cache.data;
        int64_t packs = ld_conv_direct_cache_packs();
        cached_vs_plain(&c, c.w, &cache);
        assert_ptr_equal(cache.data, held);
        assert_int_equal(ld_conv_direct_cache_packs(), packs);
        /* a second prepack of the same weights keeps what the cache holds */
        assert_true(ld_conv_direct_prepack(c.w, C, M, &c.g, &cache));
        assert_ptr_equal(cache.data, held);
        ld_conv_direct_pack_clear(&cache);
    }
    ld_conv_direct_force_variant(-1);
    cache_case_free(&c);
}

static void test_prepack(void **state)
{
    (void)state;
    for (int level = LD_CONV_DIRECT_AVX2; level <= LD_CONV_DIRECT_AVX512; level++) {
        if (!ld_conv_direct_force_level((ld_conv_direct_level)level))
            continue;
        /* widths and channel counts whose automatic variants differ */
        check_prepack(24, 20, 23, 37, 3);
        check_prepack(8, 96, 12, 160, 3);
        check_prepack(96, 24, 9, 9, 3);
        check_prepack(40, 36, 20, 21, 1);
        check_prepack(12, 96, 4, 160, 1);
        check_prepack(3, 8, 5, 7, 3);
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    /* geometries the direct kernels do not take: nothing packed */
    ld_window_geom g = {.nd = 2, .in = {4, 4}, .k = {3, 3}, .s = {3, 3}, .d = {1, 1},
                        .out = {1, 1}};
    ld_window_geom_finish(&g);
    float w[2 * 2 * 9] = {0};
    ld_conv_direct_pack cache = {0};
    assert_false(ld_conv_direct_prepack(w, 2, 2, &g, &cache));
    assert_null(cache.data);
}

/* The scratch cache: a reservation is taken by the next get of that size or
 * less (no fresh buffer), and a growth at least doubles the buffer. */
static void test_scratch_reserve(void **state)
{
    (void)state;
    ld_scratch_retain();
    size_t big = (size_t)5 << 20;
    ld_scratch_reserve(big);
    char *p = ld_scratch_get(big);
    assert_non_null(p);
    p[big - 1] = 1;
    ld_scratch_put(p);
    assert_ptr_equal(ld_scratch_get(1000), p);
    ld_scratch_put(p);
    /* growing past it: a new buffer of at least twice the size, which
     * then serves anything up to that size */
    char *q = ld_scratch_get(big + 1);
    assert_non_null(q);
    ld_scratch_put(q);
    assert_ptr_equal(ld_scratch_get(2 * big), q);
    ld_scratch_put(q);
    ld_scratch_release();
}

/* ld_conv_pool_start: the helpers run before the first job. */
static void test_pool_start(void **state)
{
    (void)state;
    assert_true(ld_conv_pool_start(1) >= 0);
    assert_true(ld_conv_pool_start(3) >= 2);
    assert_true(ld_conv_pool_start(2) >= 2); /* never fewer once started */
}

static void test_pack_cache(void **state)
{
    (void)state;
    for (int level = LD_CONV_DIRECT_AVX2; level <= LD_CONV_DIRECT_AVX512; level++) {
        if (!ld_conv_direct_force_level((ld_conv_direct_level)level)) {
            print_message("level %s not supported here: skipped\n",
                          ld_conv_direct_level_name((ld_conv_direct_level)level));
            continue;
        }
        check_cache(24, 20, 23, 37, 3); /* windowed */
        check_cache(40, 36, 20, 21, 1); /* pointwise */
    }
    /* a cache filled at one level and used at another packs again */
    if (ld_conv_direct_level_supported(LD_CONV_DIRECT_AVX512) &&
        ld_conv_direct_level_supported(LD_CONV_DIRECT_AVX2)) {
        cache_case c;
        ld_conv_direct_force_level(LD_CONV_DIRECT_AVX512);
        if (cache_case_make(&c, 24, 20, 23, 37, 3)) {
            ld_conv_direct_pack cache = {0};
            cached_vs_plain(&c, c.w, &cache);
            ld_conv_direct_force_level(LD_CONV_DIRECT_AVX2);
            cached_vs_plain(&c, c.w, &cache);
            assert_int_equal(cache.level, LD_CONV_DIRECT_AVX2);
            ld_conv_direct_pack_clear(&cache);
            cache_case_free(&c);
        }
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    ld_conv_direct_force_variant(-1);
}

static void test_pool_direct_threads(void **state)
{
    (void)state;
    for (int level = LD_CONV_DIRECT_AVX2; level <= LD_CONV_DIRECT_AVX512; level++) {
        if (!ld_conv_direct_force_level((ld_conv_direct_level)level)) {
            print_message("level %s not supported here: skipped\n",
                          ld_conv_direct_level_name((ld_conv_direct_level)level));
            continue;
        }
        check_direct_threads(24, 20, 37, 45, 3, 1, 1); /* ring, rows split in groups */
        check_direct_threads(16, 12, 61, 29, 3, 2, 1); /* stride 2 */
        check_direct_threads(40, 36, 30, 33, 1, 1, 0); /* pointwise spans */
        check_direct_threads(8, 30, 9, 11, 5, 1, 2);   /* few rows */
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_cover),
        cmocka_unit_test(test_pool_many_jobs),
        cmocka_unit_test(test_pool_claim),
        cmocka_unit_test(test_pool_helpers_share),
        cmocka_unit_test(test_pool_concurrent_callers),
        cmocka_unit_test(test_pool_direct_threads),
        cmocka_unit_test(test_pack_cache),
        cmocka_unit_test(test_prepack),
        cmocka_unit_test(test_scratch_reserve),
        cmocka_unit_test(test_pool_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
