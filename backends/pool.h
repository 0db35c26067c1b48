/* layerdiff — recycled tensor buffers (private to backends/).
 *
 * First touch of freshly allocated memory costs 10-50x a warm write on these
 * VMs (docs/architecture.md), so the executor hands freed activation buffers
 * to the next layer instead of returning them to malloc. Buffers are 64-byte
 * aligned; those of 1 MiB and more are pages mapped for them, which the pool
 * grows with mremap when no cached buffer is big enough (the touched pages
 * move along, only the difference is new); those of 2 MiB and more are
 * whole transparent huge pages (madvise), which fault in ~10x faster than
 * 4 KiB pages. Under AddressSanitizer the pool is bypassed so use-after-free
 * in kernels is still caught. */
#ifndef LAYERDIFF_BACKENDS_POOL_H
#define LAYERDIFF_BACKENDS_POOL_H

#include <stddef.h>

typedef struct ld_pool ld_pool;

/* Return value: new pool, or NULL when out of memory. */
ld_pool *ld_pool_create(void);
/* Frees every cached buffer and the pool. Buffers still out are the caller's
 * to return first. NULL is a no-op. */
void ld_pool_destroy(ld_pool *pool);
/* A buffer of at least nbytes (nbytes > 0), or NULL when out of memory.
 * Contents are unspecified. */
void *ld_pool_get(ld_pool *pool, size_t nbytes);
/* Gives back a buffer from ld_pool_get. NULL is a no-op. */
void ld_pool_put(ld_pool *pool, void *buffer);
/* Bytes cached (free) in the pool. */
size_t ld_pool_cached_bytes(const ld_pool *pool);

/* One buffer allocated as the pool allocates (64-byte aligned; from 2 MiB
 * up, whole 2 MiB huge pages, which fault in ~10x faster), for caches
 * outside the pool such as the convolution scratch (kernels/conv_common.h).
 * Return value: new buffer of at least nbytes, free with ld_buffer_free; NULL
 * when out of memory. */
void *ld_buffer_alloc(size_t nbytes);
/* Frees a buffer from ld_buffer_alloc. NULL is a no-op. */
void ld_buffer_free(void *buffer);

#endif
