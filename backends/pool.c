/* layerdiff — recycled tensor buffers (see pool.h). */
#include "backends/pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* Linux 5.14; older headers lack it (older kernels refuse it: EINVAL). */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* tests/test_pool.c defines LD_POOL_NO_BYPASS to test the cache under ASan. */
#if defined(__SANITIZE_ADDRESS__) && !defined(LD_POOL_NO_BYPASS)
#define POOL_BYPASS 1
#else
#define POOL_BYPASS 0
#endif

/* Each buffer is preceded by a header saying how it was allocated. */
#define HEADER_SIZE 64
#define PAGE ((size_t)4096)
#define HUGE_PAGE ((size_t)2 << 20)
/* Arena buffers from this size up start on a page boundary, as mapped
 * buffers did (the kernels were tuned on those); smaller ones on 64 bytes. */
#define PAGE_ALIGN_MIN ((size_t)64 << 10)
/* Address space an arena reserves (PROT_NONE: no memory, no commit charge)
 * and the least worth having; read-write in steps of ARENA_COMMIT_STEP. */
#define ARENA_RESERVE ((size_t)64 << 30)
#define ARENA_RESERVE_MIN ((size_t)64 << 20)
#define ARENA_COMMIT_STEP ((size_t)32 << 20)

/* Test hooks (tests/test_pool.c includes this file): the reservation size
 * to ask for, and madvise, so that tests can make either fail. */
static size_t arena_reserve_request = ARENA_RESERVE;
static int (*pool_madvise)(void *, size_t, int) = madvise;

enum { BLOCK_ARENA = 1, BLOCK_MAPPED, BLOCK_MALLOC };

typedef struct block_header {
    size_t capacity; /* usable bytes from the buffer on */
    size_t start;    /* BLOCK_ARENA: the block's first byte, offset in the arena;
                        BLOCK_MAPPED: bytes mapped from buffer - PAGE */
    size_t end;      /* BLOCK_ARENA: offset one past the block's last byte */
    int kind;
} block_header;

/* --- arena ------------------------------------------------------------------------------ */

/* One reservation of address space marked for transparent huge pages, from
 * which buffers of every size are carved (docs/architecture.md, "Memory and
 * cold runs"). A cold run pays for first touching its memory: ~1.3 GB/s in
 * 4 KiB faults on these VMs. Here every 2 MiB unit faults in once, as one
 * huge page, whatever the sizes of the buffers in it (small tensors and
 * the tails of big ones used to fault 4 KiB at a time: ~2.5k faults of
 * PaddleOCR det's ~3k per cold run).
 *
 * Memory stays bounded like a pool's: freed blocks return to a free list
 * (address-ordered, neighbours merged) and are carved again best fit; only
 * when none fits does the arena take fresh memory at its top, starting
 * with the free range that ends there (the touched part is reused, like a
 * mapped block grown with mremap). So what is touched is the high-water
 * mark of the arena, never more than the largest live set plus holes. */
typedef struct free_range {
    size_t start, end;
} free_range;

typedef struct arena {
    char *base;       /* 2 MiB aligned; NULL: no reservation */
    size_t reserved;  /* bytes reserved from base */
    size_t committed; /* bytes from base made read-write */
    size_t top;       /* bytes from base ever handed out (touched) */
    free_range *free; /* free ranges below top, by address, none adjacent */
    int n_free, cap_free;
    size_t free_bytes;
    size_t live;      /* blocks handed out and not returned */
    bool huge;        /* MADV_HUGEPAGE accepted */
} arena;

/* Bytes to reserve: the request, at most a quarter of RLIMIT_AS `as` (NULL:
 * unknown; PROT_NONE pages count against it), in whole 2 MiB units. */
static size_t reserve_size(size_t request, const struct rlimit *as)
{
    size_t size = request;
    if (as && as->rlim_cur != RLIM_INFINITY && as->rlim_cur / 4 < size)
        size = (size_t)(as->rlim_cur / 4);
    return size & ~(HUGE_PAGE - 1);
}

/* Reserves the arena's address space (reserve_size of
 * arena_reserve_request), halved until the kernel gives it. false when not
 * even ARENA_RESERVE_MIN is available: the caller allocates buffer by
 * buffer. */
static bool arena_init(arena *a)
{
    *a = (arena){0};
    struct rlimit lim;
    bool limited = getrlimit(RLIMIT_AS, &lim) == 0;
    size_t size = reserve_size(arena_reserve_request, limited ? &lim : NULL);
    for (; size >= ARENA_RESERVE_MIN; size /= 2) {
        char *raw = mmap(NULL, size + HUGE_PAGE, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (raw == MAP_FAILED)
            continue;
        uintptr_t aligned = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
        size_t head = (size_t)((char *)aligned - raw), tail = HUGE_PAGE - head;
        if (head)
            munmap(raw, head);
        if (tail)
            munmap((char *)aligned + size, tail);
        a->base = (char *)aligned;
        a->reserved = size;
        /* THP runs in "madvise" mode here: only marked ranges get huge
         * pages. Without them (no THP, or refused) the arena still pools,
         * in 4 KiB pages. */
        a->huge = pool_madvise(a->base, size, MADV_HUGEPAGE) == 0;
        return true;
    }
    return false;
}

static void arena_destroy(arena *a)
{
    if (a->base)
        munmap(a->base, a->reserved);
    free(a->free);
    *a = (arena){0};
}

/* The first block at or after offset s that can hold nbytes: its end, the
 * buffer's offset in *data. */
static size_t block_end(size_t s, size_t nbytes, size_t *data)
{
    size_t align = nbytes >= PAGE_ALIGN_MIN ? PAGE : 64;
    size_t d = (s + HEADER_SIZE + align - 1) & ~(align - 1);
    *data = d;
    return (d + nbytes + 63) & ~(size_t)63;
}

static void remove_range(arena *a, int i)
{
    memmove(&a->free[i], &a->free[i + 1], (size_t)(a->n_free - i - 1) * sizeof *a->free);
    a->n_free--;
}

/* Where a request goes: a free range (index best) or the top (best < 0,
 * extending the free range that ends there when extend). */
typedef struct carve {
    int best;
    bool extend;
    size_t start, data, end;
} carve;

/* The place arena_get gives a request of nbytes, from the bookkeeping
 * alone (no memory read or written: the dry arenas of ld_arena_sim replay
 * the same choices on offsets). false when it does not fit the
 * reservation. */
static bool arena_find(const arena *a, size_t nbytes, carve *c)
{
    if (nbytes > a->reserved)
        return false;
    *c = (carve){.best = -1};
    for (int i = 0; i < a->n_free; i++) {
        size_t d, e = block_end(a->free[i].start, nbytes, &d);
        if (e <= a->free[i].end &&
            (c->best < 0 || a->free[i].end - a->free[i].start <
                                a->free[c->best].end - a->free[c->best].start)) {
            c->best = i;
            c->data = d;
            c->end = e;
        }
    }
    if (c->best >= 0) { /* touched memory: the smallest free range that fits */
        c->start = a->free[c->best].start;
        return true;
    }
    /* fresh memory at the top, after the free range ending there */
    c->extend = a->n_free > 0 && a->free[a->n_free - 1].end == a->top;
    c->start = c->extend ? a->free[a->n_free - 1].start : a->top;
    c->end = block_end(c->start, nbytes, &c->data);
    return c->end <= a->reserved;
}

/* Room in the free list for one range per live block plus one (returning
 * a block can add a range), made before a block goes out so that returning
 * never fails. */
static bool arena_reserve_ranges(arena *a)
{
    if ((size_t)a->cap_free >= a->live + 2)
        return true;
    size_t cap = (a->live + 2) * 2;
    free_range *grown = realloc(a->free, cap * sizeof *grown);
    if (!grown)
        return false;
    a->free = grown;
    a->cap_free = (int)cap;
    return true;
}

/* Records the block arena_find chose as handed out. */
static void arena_take(arena *a, const carve *c)
{
    if (c->best >= 0) {
        a->free_bytes -= c->end - c->start;
        if (c->end == a->free[c->best].end)
            remove_range(a, c->best);
        else
            a->free[c->best].start = c->end;
    } else {
        if (c->extend) {
            a->free_bytes -= a->top - c->start;
            a->n_free--;
        }
        a->top = c->end;
    }
    a->live++;
}

/* Makes [0, end) of the arena read-write (in ARENA_COMMIT_STEP units, at
 * most the reservation). */
static bool arena_commit(arena *a, size_t end)
{
    if (end <= a->committed)
        return true;
    size_t c = (end + ARENA_COMMIT_STEP - 1) & ~(ARENA_COMMIT_STEP - 1);
    c = c > a->reserved ? a->reserved : c;
    if (mprotect(a->base + a->committed, c - a->committed, PROT_READ | PROT_WRITE) != 0)
        return false;
    a->committed = c;
    return true;
}

/* A buffer of nbytes (< reserved) carved from the arena, or NULL when the
 * arena is full or out of memory. The header is written. */
static void *arena_get(arena *a, size_t nbytes)
{
    carve c;
    if (!a->base || !arena_reserve_ranges(a) || !arena_find(a, nbytes, &c) ||
        !arena_commit(a, c.end))
        return NULL;
    arena_take(a, &c);
    void *buffer = a->base + c.data;
    *(block_header *)((char *)buffer - HEADER_SIZE) =
        (block_header){c.end - c.data, c.start, c.end, BLOCK_ARENA};
    return buffer;
}

/* Returns the block [start, end) to the free list, merged with free
 * neighbours. Never fails (arena_get made room). */
static void arena_put(arena *a, size_t start, size_t end)
{
    int lo = 0, hi = a->n_free; /* first range after the block */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (a->free[mid].start < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    a->free_bytes += end - start;
    a->live--;
    bool prev = lo > 0 && a->free[lo - 1].end == start;
    bool next = lo < a->n_free && a->free[lo].start == end;
    if (prev && next) {
        a->free[lo - 1].end = a->free[lo].end;
        remove_range(a, lo);
    } else if (prev) {
        a->free[lo - 1].end = end;
    } else if (next) {
        a->free[lo].start = start;
    } else {
        memmove(&a->free[lo + 1], &a->free[lo], (size_t)(a->n_free - lo) * sizeof *a->free);
        a->free[lo] = (free_range){start, end};
        a->n_free++;
    }
}

/* With no block out, gives the touched pages back to the system (the
 * reservation stays): for the process-wide arena of ld_buffer_alloc, whose
 * caches empty when the last executor goes. */
static void arena_trim(arena *a)
{
    if (a->live || !a->top)
        return;
    madvise(a->base, a->top, MADV_DONTNEED);
    a->top = 0;
    a->n_free = 0;
    a->free_bytes = 0;
}

/* --- buffers of their own ------------------------------------------------------------------ */

/* When an arena cannot serve a request (no reservation, or full), the
 * buffer is allocated by itself: from 2 MiB up, mapped at a 2 MiB boundary
 * (header page just before) and marked for huge pages, in whole 2 MiB units
 * when that adds at most an eighth; else from malloc. Under
 * AddressSanitizer every buffer is, so use-after-free stays visible. */
static block_header *header_of(void *buffer)
{
    return (block_header *)((char *)buffer - HEADER_SIZE);
}

/* len bytes at an address whose offset PAGE is 2 MiB aligned, carved out of
 * a mapping one unit larger, marked; NULL when out of address space. */
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
    pool_madvise(start, len, MADV_HUGEPAGE); /* advice: without it, small pages */
    return start;
}

static void *own_buffer(size_t nbytes)
{
    if (nbytes >= HUGE_PAGE && !POOL_BYPASS) {
        size_t capacity = (nbytes + PAGE - 1) & ~(PAGE - 1);
        size_t whole = (nbytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        if (whole >= nbytes && whole - nbytes <= nbytes / 8)
            capacity = whole;
        if (capacity < nbytes || capacity > SIZE_MAX - PAGE)
            return NULL;
        char *raw = map_huge(capacity + PAGE);
        if (!raw)
            return NULL;
        void *buffer = raw + PAGE;
        *header_of(buffer) = (block_header){capacity, capacity + PAGE, 0, BLOCK_MAPPED};
        return buffer;
    }
    size_t capacity = (nbytes + 63) & ~(size_t)63;
    if (capacity < nbytes || capacity > SIZE_MAX - HEADER_SIZE)
        return NULL;
    void *raw = NULL;
    if (posix_memalign(&raw, 64, capacity + HEADER_SIZE) != 0)
        return NULL;
    void *buffer = (char *)raw + HEADER_SIZE;
    *header_of(buffer) = (block_header){capacity, 0, 0, BLOCK_MALLOC};
    return buffer;
}

static void release_own(void *buffer)
{
    block_header *h = header_of(buffer);
    if (h->kind == BLOCK_MAPPED)
        munmap((char *)buffer - PAGE, h->start);
    else
        free((char *)buffer - HEADER_SIZE);
}

/* --- pool ------------------------------------------------------------------------------ */

typedef struct pool_block {
    void *buffer;
    size_t capacity;
} pool_block;

struct ld_pool {
    arena arena;
    bool arena_tried;   /* the reservation is made at the first request */
    pool_block *cached; /* returned buffers of their own (no arena) */
    int n_cached, cap_cached;
    size_t cached_bytes;
    size_t prefaulted;  /* bytes ld_pool_prefault faulted in */
};

ld_pool *ld_pool_create(void)
{
    return calloc(1, sizeof(ld_pool));
}

void ld_pool_destroy(ld_pool *pool)
{
    if (!pool)
        return;
    for (int i = 0; i < pool->n_cached; i++)
        release_own(pool->cached[i].buffer);
    free(pool->cached);
    arena_destroy(&pool->arena);
    free(pool);
}

void *ld_pool_get(ld_pool *pool, size_t nbytes)
{
    if (nbytes == 0)
        nbytes = 1;
    if (POOL_BYPASS)
        return own_buffer(nbytes);
    if (!pool->arena_tried) {
        pool->arena_tried = true;
        arena_init(&pool->arena);
    }
    void *buffer = arena_get(&pool->arena, nbytes);
    if (buffer)
        return buffer;
    /* No arena or a full one: best fit among returned buffers of their own,
     * never more than twice the request (a big buffer parked under a tiny
     * tensor would inflate the live set). */
    int best = -1;
    for (int i = 0; i < pool->n_cached; i++) {
        size_t c = pool->cached[i].capacity;
        if (c >= nbytes && c / 2 <= nbytes + 4096 &&
            (best < 0 || c < pool->cached[best].capacity))
            best = i;
    }
    if (best < 0)
        return own_buffer(nbytes);
    buffer = pool->cached[best].buffer;
    pool->cached_bytes -= pool->cached[best].capacity;
    pool->cached[best] = pool->cached[--pool->n_cached];
    return buffer;
}

void ld_pool_put(ld_pool *pool, void *buffer)
{
    if (!buffer)
        return;
    block_header *h = header_of(buffer);
    if (h->kind == BLOCK_ARENA) {
        arena_put(&pool->arena, h->start, h->end);
        return;
    }
    if (POOL_BYPASS) {
        release_own(buffer);
        return;
    }
    if (pool->n_cached == pool->cap_cached) {
        int cap = pool->cap_cached ? pool->cap_cached * 2 : 32;
        pool_block *grown = realloc(pool->cached, (size_t)cap * sizeof *grown);
        if (!grown) { /* cannot cache it: release it instead */
            release_own(buffer);
            return;
        }
        pool->cached = grown;
        pool->cap_cached = cap;
    }
    pool->cached[pool->n_cached++] = (pool_block){buffer, h->capacity};
    pool->cached_bytes += h->capacity;
}

size_t ld_pool_cached_bytes(const ld_pool *pool)
{
    return pool->cached_bytes + pool->arena.free_bytes;
}

size_t ld_pool_top(const ld_pool *pool)
{
    return pool->arena.top;
}

/* Faults [0, len) of the arena in: MADV_POPULATE_WRITE (Linux 5.14; one
 * call, the kernel allocates and zeroes every page, huge pages where the
 * range is marked), else one write per 4 KiB page (each write faults its
 * page, or its whole huge page, in). The arena is fresh: nothing to keep. */
static void arena_populate(arena *a, size_t len)
{
    if (pool_madvise(a->base, len, MADV_POPULATE_WRITE) == 0)
        return;
    for (size_t off = 0; off < len; off += PAGE)
        ((volatile char *)a->base)[off] = 0;
}

size_t ld_pool_prefault(ld_pool *pool, size_t nbytes)
{
    if (POOL_BYPASS || !nbytes)
        return 0;
    if (!pool->arena_tried) {
        pool->arena_tried = true;
        arena_init(&pool->arena);
    }
    arena *a = &pool->arena;
    /* Only a fresh arena: once buffers have been carved, the run that
     * faulted them in has paid already. */
    if (!a->base || a->top || a->committed)
        return 0;
    size_t len = (nbytes + PAGE - 1) & ~(PAGE - 1);
    if (len < nbytes || len > a->reserved)
        return 0;
    /* Read-write to the end of the last 2 MiB unit (the run would commit
     * at least that much, and a unit cut by the protection would fault in
     * 4 KiB pages); faulted only as far as planned. */
    size_t commit = (len + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    commit = commit > a->reserved ? a->reserved : commit;
    if (mprotect(a->base, commit, PROT_READ | PROT_WRITE) != 0)
        return 0;
    a->committed = commit;
    arena_populate(a, len);
    pool->prefaulted = len;
    return len;
}

size_t ld_pool_prefaulted(const ld_pool *pool)
{
    return pool->prefaulted;
}

/* --- dry arenas (ld_arena_sim) ---------------------------------------------------------- */

struct ld_arena_sim {
    arena arena; /* base NULL: offsets only */
};

ld_arena_sim *ld_arena_sim_create(void)
{
    ld_arena_sim *s = calloc(1, sizeof *s);
    if (s) /* as big as any reservation: a plan beyond it is not prefaulted */
        s->arena.reserved = ARENA_RESERVE;
    return s;
}

void ld_arena_sim_destroy(ld_arena_sim *s)
{
    if (!s)
        return;
    free(s->arena.free);
    free(s);
}

bool ld_arena_sim_get(ld_arena_sim *s, size_t nbytes, ld_arena_block *block)
{
    carve c;
    if (nbytes == 0)
        nbytes = 1;
    if (!arena_reserve_ranges(&s->arena) || !arena_find(&s->arena, nbytes, &c))
        return false;
    arena_take(&s->arena, &c);
    *block = (ld_arena_block){c.start, c.end};
    return true;
}

void ld_arena_sim_put(ld_arena_sim *s, ld_arena_block block)
{
    arena_put(&s->arena, block.start, block.end);
}

size_t ld_arena_sim_top(const ld_arena_sim *s)
{
    return s->arena.top;
}

/* --- buffers outside a pool -------------------------------------------------------------- */

/* The process-wide arena of ld_buffer_alloc (the convolution scratch cache,
 * shared by every executor); its pages go back when its last buffer does. */
static pthread_mutex_t buffer_lock = PTHREAD_MUTEX_INITIALIZER;
static arena buffer_arena;
static bool buffer_arena_tried;

void *ld_buffer_alloc(size_t nbytes)
{
    if (nbytes == 0)
        nbytes = 1;
    if (POOL_BYPASS)
        return own_buffer(nbytes);
    pthread_mutex_lock(&buffer_lock);
    if (!buffer_arena_tried) {
        buffer_arena_tried = true;
        arena_init(&buffer_arena);
    }
    void *buffer = arena_get(&buffer_arena, nbytes);
    pthread_mutex_unlock(&buffer_lock);
    return buffer ? buffer : own_buffer(nbytes);
}

void ld_buffer_free(void *buffer)
{
    if (!buffer)
        return;
    block_header *h = header_of(buffer);
    if (h->kind != BLOCK_ARENA) {
        release_own(buffer);
        return;
    }
    pthread_mutex_lock(&buffer_lock);
    arena_put(&buffer_arena, h->start, h->end);
    arena_trim(&buffer_arena);
    pthread_mutex_unlock(&buffer_lock);
}
