/* layerdiff — recycled tensor buffers (see pool.h). */
#include "backends/pool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define POOL_BYPASS 1
#else
#define POOL_BYPASS 0
#endif

/* Each buffer is preceded by a header holding its usable capacity. */
#define HEADER_SIZE 64

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

static size_t *capacity_slot(void *buffer)
{
    return (size_t *)((char *)buffer - HEADER_SIZE);
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
        free((char *)pool->free_blocks[i].buffer - HEADER_SIZE);
    free(pool->free_blocks);
    free(pool);
}

static void *fresh_buffer(size_t nbytes)
{
    size_t capacity = (nbytes + 63) & ~(size_t)63;
    if (capacity < nbytes || capacity > SIZE_MAX - HEADER_SIZE)
        return NULL;
    void *raw = NULL;
    if (posix_memalign(&raw, 64, capacity + HEADER_SIZE) != 0)
        return NULL;
    void *buffer = (char *)raw + HEADER_SIZE;
    *capacity_slot(buffer) = capacity;
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
    if (best < 0)
        return fresh_buffer(nbytes);
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
        free((char *)buffer - HEADER_SIZE);
        return;
    }
    if (pool->n_free == pool->cap_free) {
        int cap = pool->cap_free ? pool->cap_free * 2 : 32;
        pool_block *grown = realloc(pool->free_blocks, (size_t)cap * sizeof *grown);
        if (!grown) { /* cannot cache it: release it instead */
            free((char *)buffer - HEADER_SIZE);
            return;
        }
        pool->free_blocks = grown;
        pool->cap_free = cap;
    }
    size_t capacity = *capacity_slot(buffer);
    pool->free_blocks[pool->n_free++] = (pool_block){buffer, capacity};
    pool->cached_bytes += capacity;
}

size_t ld_pool_cached_bytes(const ld_pool *pool)
{
    return pool->cached_bytes;
}
