/* layerdiff — recycled tensor buffers (private to backends/).
 *
 * First touch of freshly allocated memory costs 10-50x a warm write on these
 * VMs (docs/architecture.md, "Memory and cold runs"), so the executor hands
 * freed activation buffers to the next layer instead of returning them to
 * malloc. A pool carves buffers of every size out of one reservation of
 * address space marked for transparent huge pages (an arena): every 2 MiB
 * of it faults in once, as one huge page (~10x faster than 512 faults of
 * 4 KiB), whatever the buffers in it. Returned buffers go back to the
 * arena's free list (neighbours merged) and are reused best fit; fresh
 * memory is taken at the arena's top only when no free range fits, so
 * what a run touches is bounded by its largest live set plus holes.
 * Buffers are 64-byte aligned, from 64 KiB up page aligned. Without a
 * reservation (address-space limit) or beyond it, buffers are allocated
 * one by one and cached. Under AddressSanitizer the pool is bypassed so
 * use-after-free in kernels is still caught. */
#ifndef LAYERDIFF_BACKENDS_POOL_H
#define LAYERDIFF_BACKENDS_POOL_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ld_pool ld_pool;

/* Return value: new pool (owned by the caller, ld_pool_destroy), or NULL
 * when out of memory. The arena is reserved at the first ld_pool_get. */
ld_pool *ld_pool_create(void);
/* Frees the arena, every cached buffer and the pool. Buffers still out are
 * the caller's to return first (they die with the arena). NULL is a no-op. */
void ld_pool_destroy(ld_pool *pool);
/* A buffer of at least nbytes (nbytes > 0), owned by the caller until
 * ld_pool_put; NULL when out of memory. Contents are unspecified. Not
 * thread-safe: one pool per executor. */
void *ld_pool_get(ld_pool *pool, size_t nbytes);
/* Gives back a buffer from ld_pool_get. NULL is a no-op. */
void ld_pool_put(ld_pool *pool, void *buffer);
/* Bytes cached (free) in the pool: the arena's free ranges (headers
 * included) and the cached buffers of their own. */
size_t ld_pool_cached_bytes(const ld_pool *pool);

/* Bytes from the arena's start ever handed out (its high-water mark, what
 * a run has touched); 0 without an arena. */
size_t ld_pool_top(const ld_pool *pool);
/* Faults in the first nbytes of a fresh arena before anything is carved
 * from it (reserving it first): made read-write to the end of the last
 * 2 MiB unit and populated (MADV_POPULATE_WRITE, else one write per 4 KiB
 * page), so that a run whose arena top stays within nbytes pays no page
 * fault. For the executor's memory plan (exec_plan.h): nbytes is the
 * planned top, never more. Return value: bytes faulted in (page rounded),
 * 0 when nothing was (arena already used or absent, nbytes beyond the
 * reservation, under AddressSanitizer). */
size_t ld_pool_prefault(ld_pool *pool, size_t nbytes);
/* What ld_pool_prefault faulted in (0: nothing). */
size_t ld_pool_prefaulted(const ld_pool *pool);

/* A dry arena: the pool's arena carving (best fit, merging, growth at the
 * top) replayed on offsets alone, touching no memory, so that a planned
 * sequence of gets and puts yields the top a real pool reaches with the
 * same sequence. Return value: new (ld_arena_sim_destroy), NULL when out
 * of memory. */
typedef struct ld_arena_sim ld_arena_sim;
typedef struct ld_arena_block {
    size_t start, end; /* offsets of a carved block, for ld_arena_sim_put */
} ld_arena_block;
ld_arena_sim *ld_arena_sim_create(void);
void ld_arena_sim_destroy(ld_arena_sim *s);
/* As ld_pool_get(nbytes) on a pool in the same state; false when out of
 * memory or beyond a reservation. */
bool ld_arena_sim_get(ld_arena_sim *s, size_t nbytes, ld_arena_block *block);
void ld_arena_sim_put(ld_arena_sim *s, ld_arena_block block);
size_t ld_arena_sim_top(const ld_arena_sim *s);

/* One buffer allocated as the pool allocates, from one process-wide arena
 * (thread-safe), for caches outside the pool such as the convolution
 * scratch (kernels/conv_common.h); the arena's pages go back to the system
 * when its last buffer is freed. Return value: new buffer of at least
 * nbytes (owned by the caller, ld_buffer_free); NULL when out of memory. */
void *ld_buffer_alloc(size_t nbytes);
/* Frees a buffer from ld_buffer_alloc. NULL is a no-op. */
void ld_buffer_free(void *buffer);

#endif
