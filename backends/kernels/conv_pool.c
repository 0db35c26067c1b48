/* layerdiff — the convolutions' claim pool (see conv_pool.h).
 *
 * One job at a time (a mutex; a concurrent caller runs its job alone). The
 * job is published through one atomic word, `state` = sequence << 1 | open:
 * the caller writes the job's fields, then stores (seq + 1) << 1 | 1. A
 * helper that sees a new open state announces itself (active + 1), then
 * loads state again: only if it is still that same open state does it take
 * claims. The caller, out of claims, stores the closed state and waits
 * until active is 0. In the single total order of these sequentially
 * consistent operations, a helper that found the job open incremented
 * active before the close, so the caller waits for it; a helper that finds
 * it closed (or a later job) takes nothing and leaves. The job's fields
 * are rewritten only after active returned to 0. */
#include "backends/kernels/conv_pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Pause iterations a helper spins on `state` after a job before it sleeps
 * (a pause takes 30-70 ns on the Zen 3 hosts: 6-14 µs). Enough for jobs that
 * follow at once (ConvTranspose's product and col2im tiles, groups, images);
 * the next convolution of a model comes after elementwise nodes, whose
 * OpenMP worker needs that CPU: a longer spin would take it from them. A
 * sleeping helper costs a job only its late start (the caller goes on). */
#define SPIN_PAUSES 200

/* One worker's share of a job's items: [front, back) still unclaimed,
 * packed as back << 32 | front (items are counted from the share's start,
 * below 2^32: see ld_conv_pool_run), alone in its cache line. */
typedef struct {
    _Alignas(64) _Atomic uint64_t left;
    int64_t start;
} pool_share;

typedef struct {
    void (*fn)(void *arg, int worker, int64_t i0, int64_t i1);
    void *arg;
    int64_t n, claim;
    int threads;
    pool_share share[LD_CONV_POOL_MAX_THREADS];
} pool_job;

static struct {
    pthread_mutex_t run_lock; /* one job at a time */
    pthread_mutex_t start_lock;
    int started;                /* helpers created (ids 1 .. started) */
    _Atomic uint64_t state;     /* seq << 1 | open */
    _Atomic uint32_t wake;      /* futex word: bumped with every job */
    _Atomic int active;         /* helpers inside the current job */
    _Atomic int64_t shared_jobs;
    pool_job job;
} pool = {.run_lock = PTHREAD_MUTEX_INITIALIZER, .start_lock = PTHREAD_MUTEX_INITIALIZER};

static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void futex_wait(_Atomic uint32_t *word, uint32_t value)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Claims are taken from shares. Worker w owns share w, items [w n / T,
 * (w + 1) n / T), and claims from its front; a worker whose share is empty
 * takes from the back of the fullest other share. Why: consecutive nodes
 * split their items in the same order (output rows, position spans,
 * chunks), so a thread mostly reads what it wrote itself, in its own
 * core's caches; with one shared counter the
 * claims interleaved, and on the Zen 5 (two vCPUs on different dies:
 * ~470 ns for a cache line's round trip) half of each read crossed over
 * (a 10 MiB read-and-write pass over two threads' own halves ran at ~150
 * GB/s, over each other's at ~105; det on 2 threads 28.8 -> 26.2 ms).
 * A claim: at most job->claim items and half the share's remaining ones,
 * at least 1. */
static uint64_t share_pack(int64_t front, int64_t back)
{
    return (uint64_t)back << 32 | (uint64_t)front;
}

/* Takes a claim from share s: from its front (the owner) or its back. */
static bool take_from(pool_job *job, pool_share *s, bool front, int64_t *i0, int64_t *i1)
{
    uint64_t v = atomic_load_explicit(&s->left, memory_order_relaxed);
    for (;;) {
        int64_t f = (int64_t)(v & 0xFFFFFFFFu), b = (int64_t)(v >> 32);
        if (f >= b)
            return false;
        int64_t size = (b - f) / 2;
        size = size > job->claim ? job->claim : size < 1 ? 1 : size;
        uint64_t next = front ? share_pack(f + size, b) : share_pack(f, b - size);
        if (atomic_compare_exchange_weak_explicit(&s->left, &v, next, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *i0 = s->start + (front ? f : b - size);
            *i1 = *i0 + size;
            return true;
        }
    }
}

/* The next claim [*i0, *i1) of `worker`. False when none are left. */
static bool take_claim(pool_job *job, int worker, int64_t *i0, int64_t *i1)
{
    if (take_from(job, &job->share[worker], true, i0, i1))
        return true;
    for (;;) {
        int victim = -1;
        int64_t most = 0;
        for (int w = 0; w < job->threads; w++) {
            uint64_t v = atomic_load_explicit(&job->share[w].left, memory_order_relaxed);
            int64_t rest = (int64_t)(v >> 32) - (int64_t)(v & 0xFFFFFFFFu);
            if (rest > most) {
                most = rest;
                victim = w;
            }
        }
        if (victim < 0)
            return false;
        if (take_from(job, &job->share[victim], false, i0, i1))
            return true;
    }
}

static void *helper_main(void *p)
{
    int id = (int)(intptr_t)p;
    uint64_t seen = 0; /* no job yet: joins a job already open */
    for (;;) {
        uint64_t s;
        int spins = 0;
        for (;;) {
            s = atomic_load(&pool.state);
            if (s != seen)
                break;
            if (spins < SPIN_PAUSES) {
                spins++;
                cpu_pause();
                continue;
            }
            uint32_t w = atomic_load(&pool.wake);
            s = atomic_load(&pool.state);
            if (s != seen)
                break;
            futex_wait(&pool.wake, w);
        }
        seen = s;
        if (!(s & 1))
            continue; /* a close: wait for the next job */
        atomic_fetch_add(&pool.active, 1);
        if (atomic_load(&pool.state) == s && id < pool.job.threads) {
            int64_t i0, i1;
            bool took = false;
            while (take_claim(&pool.job, id, &i0, &i1)) {
                pool.job.fn(pool.job.arg, id, i0, i1);
                took = true;
            }
            if (took)
                atomic_fetch_add_explicit(&pool.shared_jobs, 1, memory_order_relaxed);
        }
        atomic_fetch_sub(&pool.active, 1); /* releases what fn wrote */
    }
    return NULL;
}

/* Starts helpers up to id want - 1; returns how many exist. */
static int start_helpers(int want)
{
    pthread_mutex_lock(&pool.start_lock);
    while (pool.started < want - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, helper_main, (void *)(intptr_t)(pool.started + 1));
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        pool.started++;
    }
    int have = pool.started;
    pthread_mutex_unlock(&pool.start_lock);
    return have;
}

void ld_conv_pool_run(int threads, int64_t n, int64_t claim,
                      void (*fn)(void *arg, int worker, int64_t i0, int64_t i1), void *arg)
{
    if (n <= 0)
        return;
    threads = threads < LD_CONV_POOL_MAX_THREADS ? threads : LD_CONV_POOL_MAX_THREADS;
    if (threads > 1 && n > 1 && n / threads < ((int64_t)1 << 31) &&
        pthread_mutex_trylock(&pool.run_lock) == 0) {
        int helpers = start_helpers(threads);
        if (helpers > 0) {
            threads = helpers + 1 < threads ? helpers + 1 : threads;
            pool_job *job = &pool.job;
            job->fn = fn;
            job->arg = arg;
            job->n = n;
            job->claim = claim < 1 ? 1 : claim;
            job->threads = threads;
            for (int w = 0; w < threads; w++) {
                int64_t lo = ld_conv_pool_share_start(n, threads, w);
                int64_t len = ld_conv_pool_share_start(n, threads, w + 1) - lo;
                job->share[w].start = lo;
                atomic_store_explicit(&job->share[w].left, share_pack(0, len),
                                      memory_order_relaxed);
            }
            uint64_t open = ((atomic_load(&pool.state) >> 1) + 1) << 1 | 1;
            atomic_store(&pool.state, open);
            atomic_fetch_add(&pool.wake, 1);
            futex_wake_all(&pool.wake);
            int64_t i0, i1;
            while (take_claim(job, 0, &i0, &i1))
                fn(arg, 0, i0, i1);
            atomic_store(&pool.state, open & ~(uint64_t)1);
            /* only helpers that joined before the close: each finishes its claim */
            for (int spins = 0; atomic_load(&pool.active) != 0; spins++) {
                if (spins < 4096)
                    cpu_pause();
                else
                    sched_yield();
            }
            pthread_mutex_unlock(&pool.run_lock);
            return;
        }
        pthread_mutex_unlock(&pool.run_lock);
    }
    fn(arg, 0, 0, n);
}

int64_t ld_conv_pool_share_start(int64_t n, int threads, int worker)
{
    int64_t t = threads > 1 ? threads : 1, w = worker < 0 ? 0 : worker > t ? t : worker;
    return n / t * w + (w < n % t ? w : n % t);
}

int64_t ld_conv_pool_claim(int64_t n, int threads)
{
    int64_t c = n / (8 * (int64_t)(threads > 1 ? threads : 1));
    return c < 1 ? 1 : c > (1 << 20) ? (1 << 20) : c;
}

int ld_conv_pool_start(int threads)
{
    threads = threads < LD_CONV_POOL_MAX_THREADS ? threads : LD_CONV_POOL_MAX_THREADS;
    return threads > 1 ? start_helpers(threads) : pool.started;
}

int64_t ld_conv_pool_shared_jobs(void)
{
    return atomic_load(&pool.shared_jobs);
}
