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
/* Mapped buffers of this capacity and more start on a 2 MiB boundary and
 * ask for transparent huge pages (map_huge, mapped_capacity). */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN HUGE_PAGE

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

/* First touch is what a cold run pays for its buffers (page faults at
 * ~1.3 GB/s in these VMs): a 64 MiB buffer takes ~50 ms in 4 KiB pages and
 * 3-7 ms in 2 MiB ones. The kernel here gives transparent huge pages only
 * to ranges marked MADV_HUGEPAGE (THP "madvise" mode), and only to 2 MiB
 * units that are aligned and wholly inside the mapping. So a huge buffer's
 * mapping is a header page followed by whole aligned 2 MiB units: len bytes
 * (header included) at an address whose offset PAGE is 2 MiB aligned,
 * carved out of a mapping one unit larger. The whole mapping is marked (a
 * mapping split in two by madvise could not be grown by mremap). NULL when
 * out of address space. */
static char *map_huge(size_t len)
{
    size_t span = len + HUGE_PAGE;
    if (span < len)
        return NULL;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t aligned = ((uintptr_t)raw + PAGE + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    char *start = (char *)(aligned - PAGE);
    size_t head = (size_t)(start - raw), tail = span - head - len;
    if (head)
        munmap(raw, head);
    if (tail)
        munmap(start + len, tail);
    madvise(start, len, MADV_HUGEPAGE); /* advice: without it, small pages */
    return start;
}

/* Capacity of a mapped buffer of nbytes: whole pages; whole huge pages when
 * that adds at most an eighth (a partly used last unit faults in as 4 KiB
 * pages; rounding every buffer up instead cost PaddleOCR det 25% more RSS
 * for 15% fewer faults). 0 on overflow. */
static size_t mapped_capacity(size_t nbytes)
{
    size_t capacity = (nbytes + PAGE - 1) & ~(PAGE - 1);
    size_t whole = (nbytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (whole >= nbytes && whole - nbytes <= nbytes / 8)
        capacity = whole;
    return capacity < nbytes || capacity > SIZE_MAX - PAGE ? 0 : capacity;
}

/* len bytes of fresh pages, or NULL. */
static char *map_plain(size_t len)
{
    void *raw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return raw == MAP_FAILED ? NULL : raw;
}

static void *fresh_buffer(size_t nbytes)
{
    if (nbytes >= MAPPED_MIN && !POOL_BYPASS) {
        size_t mapped = mapped_capacity(nbytes);
        char *raw = !mapped              ? NULL
                    : mapped >= HUGE_MIN ? map_huge(mapped + PAGE)
                                         : map_plain(mapped + PAGE);
        if (!raw)
            return NULL;
        void *buffer = raw + PAGE;
        *header_of(buffer) = (block_header){mapped, mapped + PAGE};
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

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older kernels reject it (EINVAL): no harm */
#endif

/* After growing a block from old_capacity to capacity bytes: the 2 MiB unit
 * the old end fell in holds the old tail's 4 KiB pages, so the rest of it
 * would fault in 4 KiB at a time too (a unit with a page table gets no huge
 * page). MADV_COLLAPSE makes it one huge page now (PaddleOCR det: ~450
 * faults fewer per grown block). Best effort. */
static void collapse_partial_unit(char *buffer, size_t old_capacity, size_t capacity)
{
    size_t unit = old_capacity & ~(HUGE_PAGE - 1);
    if (old_capacity % HUGE_PAGE && unit + HUGE_PAGE <= capacity)
        madvise(buffer + unit, HUGE_PAGE, MADV_COLLAPSE);
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
    size_t capacity = mapped_capacity(nbytes);
    if (best < 0 || !capacity)
        return NULL;
    void *old = pool->free_blocks[best].buffer;
    block_header *h = header_of(old);
    size_t old_capacity = h->capacity;
    void *raw = MAP_FAILED;
    if (capacity >= HUGE_MIN) {
        /* Move it to an aligned place of the new size (map_huge reserves
         * one): 2 MiB pages move whole only between aligned addresses. */
        char *target = map_huge(capacity + PAGE);
        if (target)
            raw = mremap((char *)old - PAGE, h->mapped, capacity + PAGE,
                         MREMAP_MAYMOVE | MREMAP_FIXED, target);
        if (target && raw == MAP_FAILED)
            munmap(target, capacity + PAGE);
        if (raw != MAP_FAILED) { /* it keeps the old mapping's flags: mark it */
            madvise(raw, capacity + PAGE, MADV_HUGEPAGE);
            collapse_partial_unit((char *)raw + PAGE, old_capacity, capacity);
        }
    } else {
        raw = mremap((char *)old - PAGE, h->mapped, capacity + PAGE, MREMAP_MAYMOVE);
    }
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

void *ld_buffer_alloc(size_t nbytes)
{
    return fresh_buffer(nbytes ? nbytes : 1);
}

void ld_buffer_free(void *buffer)
{
    if (buffer)
        release_buffer(buffer);
}
