/* layerdiff — the convolutions' claim pool (internal to backends/; the fused
 * elementwise chains of exec_fuse.c use it too, so that a run keeps one
 * helper thread instead of waking OpenMP's and this pool's in turn).
 *
 * Why. An OpenMP parallel region ends with a join that waits for every
 * thread of the team, including a worker that the scheduler has not run
 * yet because another process holds the other CPU: up to a scheduler slice
 * (~3 ms) per region, and PaddleOCR det runs ~80 convolution regions per
 * image. On the shared 2-vCPU hosts the 2-thread convolutions ran at
 * 0.34-0.44 of the 2-thread FMA peak in every bench, against 0.58 in a quiet
 * minute (docs/architecture.md, "Convolutions").
 *
 * How. ld_conv_pool_run hands items [0, n) out in claims to the calling
 * thread and to up to threads - 1 helper threads (started on first use,
 * alive for the process, asleep when idle after a short spin). A helper
 * joins a job only while the job is open; when the caller finds no claims
 * left it closes the job and then waits only for the helpers that joined
 * (each at most its current claim), never for a helper that has not
 * started. Each worker owns a share of the items, the w-th of `threads`
 * equal runs, and claims from its front; a worker whose share is empty
 * takes claims from the back of the fullest other share (a helper that
 * never comes loses its share to the others). Claims shrink towards the end
 * of a share (half its remaining items, at most `claim`), so the last
 * claims are short. Shares: consecutive nodes split their items in the same
 * order (rows, position spans, chunks), so each thread mostly reads what it
 * wrote itself, from its own core's caches (conv_pool.c).
 *
 * Results never depend on which thread runs an item: callers compute each
 * output entirely within one item. */
#ifndef LD_KERNELS_CONV_POOL_H
#define LD_KERNELS_CONV_POOL_H

#include <stdint.h>

/* Most threads a job uses (the caller included); more are not used. */
#define LD_CONV_POOL_MAX_THREADS 16

/* The usual claim for n items on `threads` threads: about 8 claims per
 * thread (at least 1 item, at most 2^20). On a shared machine a thread the
 * scheduler holds off the CPU then delays a loop by its current claim, not
 * by its static share (half the work on 2 threads); the other thread takes
 * the rest, and a helper that has not started delays nothing. */
int64_t ld_conv_pool_claim(int64_t n, int threads);

/* Runs fn(arg, worker, i0, i1) over consecutive ranges [i0, i1) covering
 * [0, n) exactly once. worker is 0 on the calling thread and 1 ..
 * threads - 1 on helpers (a per-thread buffer index; at most
 * LD_CONV_POOL_MAX_THREADS - 1); a worker's ranges from its own share come
 * in increasing order, first the share's start (worker w's share starts at
 * item w * n / threads, rounded as ld_conv_pool_share_start). claim: the
 * most items per call (>= 1). With threads <= 1, or when
 * another job is running (a concurrent caller), everything runs on the
 * calling thread in one call fn(arg, 0, 0, n). Memory fn
 * writes is visible to the caller when this returns. */
void ld_conv_pool_run(int threads, int64_t n, int64_t claim,
                      void (*fn)(void *arg, int worker, int64_t i0, int64_t i1), void *arg);

/* The first item of worker w's share of n items on `threads` threads
 * (w = threads: n). Shares differ in length by at most one item. */
int64_t ld_conv_pool_share_start(int64_t n, int threads, int worker);

/* Starts the helpers a job on `threads` threads uses, if not yet running:
 * for a backend's prepare (kernel.h), so that the first run does not pay
 * for creating them (~0.1-1 ms on these VMs). Return value: helpers
 * running. */
int ld_conv_pool_start(int threads);

/* Tests: how many of the jobs since the process started ran with at least
 * one helper (a helper claimed items). */
int64_t ld_conv_pool_shared_jobs(void);

#endif
