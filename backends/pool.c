/* layerdiff — recycled tensor buffers (see pool.h). */
#include "backends/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* tests/test_pool.c defines LD_POOL_NO_BYPASS to test the cache under ASan. */
#if defined(__SANITIZE_ADDRESS__) && !defined(LD_POOL_NO_BYPASS)
#define POOL_BYPASS 1
#else
#define POOL_BYPASS 0
#endif

/* Each buffer is preceded by a header holding its usable capacity and how it
 * was allocated. */
#define HEADER_SIZE 64
/* Buffers from this size up are mapped pages of their own (their header in a
 * page before them), so they can grow in place: see grow_block. */
#define MAPPED_MIN ((size_t)1 << 20)
#define PAGE ((size_t)4096)

typedef struct block_header {
    size_t capacity;
    size_t mapped; /* bytes mapped from buffer - PAGE; 0: from posix_memalign */
} block_header;

typedef struct pool_block {
    void *buffer;
    size_t capacity;
} pool_block;

struct ld_pool {
    pool_block *free_blocks;
    int n_free;
    int cap_free;
    size_t cached_bytes;
};

static block_header *header_of(void *buffer)
{
    return (block_header *)((char *)buffer - HEADER_SIZE);
}

static void release_buffer(void *buffer)
{
    block_header *h = header_of(buffer);
    if (h->mapped)
        munmap((char *)buffer - PAGE, h->mapped);
    else
        free((char *)buffer - HEADER_SIZE);
}

ld_pool *ld_pool_create(void)
{
    return calloc(1, sizeof(ld_pool));
}

void ld_pool_destroy(ld_pool *pool)
{
    if (!pool)
        return;
    for (int i = 0; i < pool->n_free; i++)
        release_buffer(pool->free_blocks[i].buffer);
    free(pool->free_blocks);
    free(pool);
}

static void *fresh_buffer(size_t nbytes)
{
    if (nbytes >= MAPPED_MIN && !POOL_BYPASS) {
        size_t capacity = (nbytes + PAGE - 1) & ~(PAGE - 1);
        if (capacity < nbytes || capacity > SIZE_MAX - PAGE)
            return NULL;
        void *raw = mmap(NULL, capacity + PAGE, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED)
            return NULL;
        void *buffer = (char *)raw + PAGE;
        *header_of(buffer) = (block_header){capacity, capacity + PAGE};
        return buffer;
    }
    size_t capacity = (nbytes + 63) & ~(size_t)63;
    if (capacity < nbytes || capacity > SIZE_MAX - HEADER_SIZE)
        return NULL;
    void *raw = NULL;
    if (posix_memalign(&raw, 64, capacity + HEADER_SIZE) != 0)
        return NULL;
    void *buffer = (char *)raw + HEADER_SIZE;
    *header_of(buffer) = (block_header){capacity, 0};
    return buffer;
}

/* First touch of fresh pages is the slow part of a cold run here (page
 * faults at ~2 GB/s against 30+ GB/s for warm writes), and tensor sizes
 * vary, so a best-fit pool alone kept finding no block big enough: PaddleOCR
 * det faulted in 78 MB of buffers for a peak live set of 44 MB. When nothing
 * fits, the largest cached mapped block that is too small is grown with
 * mremap instead: its pages, already touched, move along (no copy), and only
 * the difference is new. NULL when there is no such block. */
static void *grow_block(ld_pool *pool, size_t nbytes)
{
    int best = -1;
    for (int i = 0; i < pool->n_free; i++) {
        pool_block *b = &pool->free_blocks[i];
        if (b->capacity < nbytes && header_of(b->buffer)->mapped &&
            (best < 0 || b->capacity > pool->free_blocks[best].capacity))
            best = i;
    }
    size_t capacity = (nbytes + PAGE - 1) & ~(PAGE - 1);
    if (best < 0 || capacity < nbytes || capacity > SIZE_MAX - PAGE)
        return NULL;
    void *old = pool->free_blocks[best].buffer;
    block_header *h = header_of(old);
    void *raw = mremap((char *)old - PAGE, h->mapped, capacity + PAGE, MREMAP_MAYMOVE);
    if (raw == MAP_FAILED)
        return NULL; /* the block stays cached as it was */
    pool->cached_bytes -= pool->free_blocks[best].capacity;
    pool->free_blocks[best] = pool->free_blocks[--pool->n_free];
    void *buffer = (char *)raw + PAGE;
    *header_of(buffer) = (block_header){capacity, capacity + PAGE};
    return buffer;
}

void *ld_pool_get(ld_pool *pool, size_t nbytes)
{
    if (nbytes == 0)
        nbytes = 1;
    if (POOL_BYPASS)
        return fresh_buffer(nbytes);
    /* Best fit, but never hand a block more than twice the request: a big
     * buffer parked under a tiny tensor would inflate the live set. */
    int best = -1;
    for (int i = 0; i < pool->n_free; i++) {
        size_t c = pool->free_blocks[i].capacity;
        if (c >= nbytes && c / 2 <= nbytes + 4096 &&
            (best < 0 || c < pool->free_blocks[best].capacity))
            best = i;
    }
    if (best < 0) {
        void *grown = nbytes >= MAPPED_MIN ? grow_block(pool, nbytes) : NULL;
        return grown ? grown : fresh_buffer(nbytes);
    }
    void *buffer = pool->free_blocks[best].buffer;
    pool->cached_bytes -= pool->free_blocks[best].capacity;
    pool->free_blocks[best] = pool->free_blocks[--pool->n_free];
    return buffer;
}

void ld_pool_put(ld_pool *pool, void *buffer)
{
    if (!buffer)
        return;
    if (POOL_BYPASS) {
        release_buffer(buffer);
        return;
    }
    if (pool->n_free == pool->cap_free) {
        int cap = pool->cap_free ? pool->cap_free * 2 : 32;
        pool_block *grown = realloc(pool->free_blocks, (size_t)cap * sizeof *grown);
        if (!grown) { /* cannot cache it: release it instead */
            release_buffer(buffer);
            return;
        }
        pool->free_blocks = grown;
        pool->cap_free = cap;
    }
    size_t capacity = header_of(buffer)->capacity;
    pool->free_blocks[pool->n_free++] = (pool_block){buffer, capacity};
    pool->cached_bytes += capacity;
}

size_t ld_pool_cached_bytes(const ld_pool *pool)
{
    return pool->cached_bytes;
}
