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

typedef struct {
    void (*fn)(void *arg, int worker, int64_t i0, int64_t i1);
    void *arg;
    int64_t n, claim;
    int threads;
    _Atomic int64_t next;
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

/* The next claim [*i0, *i1): half the remaining items per thread, at most
 * job->claim, at least 1. False when none are left. */
static bool take_claim(pool_job *job, int64_t *i0, int64_t *i1)
{
    int64_t at = atomic_load_explicit(&job->next, memory_order_relaxed);
    for (;;) {
        int64_t left = job->n - at;
        if (left <= 0)
            return false;
        int64_t size = left / (2 * (int64_t)job->threads);
        size = size > job->claim ? job->claim : size < 1 ? 1 : size;
        if (atomic_compare_exchange_weak_explicit(&job->next, &at, at + size,
                                                  memory_order_relaxed, memory_order_relaxed)) {
            *i0 = at;
            *i1 = at + size;
            return true;
        }
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
            while (take_claim(&pool.job, &i0, &i1)) {
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
    if (threads > 1 && n > 1 && pthread_mutex_trylock(&pool.run_lock) == 0) {
        int helpers = start_helpers(threads);
        if (helpers > 0) {
            threads = helpers + 1 < threads ? helpers + 1 : threads;
            pool_job *job = &pool.job;
            job->fn = fn;
            job->arg = arg;
            job->n = n;
            job->claim = claim < 1 ? 1 : claim;
            job->threads = threads;
            atomic_store(&job->next, 0);
            uint64_t open = ((atomic_load(&pool.state) >> 1) + 1) << 1 | 1;
            atomic_store(&pool.state, open);
            atomic_fetch_add(&pool.wake, 1);
            futex_wake_all(&pool.wake);
            int64_t i0, i1;
            while (take_claim(job, &i0, &i1))
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
