/* layerdiff — the bisect search over an abstract oracle (see bisect.h).
 *
 * Nothing here knows about graphs: an item is an int, a trial is a call of
 * the oracle with a set of items. The memo makes every search free to ask
 * the same set twice (ddmin revisits sets, grow and ddmin share the
 * ranking's prefixes), which matters because each oracle call is a partial
 * run of a model. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/bisect.h"

/* One remembered answer. */
typedef struct memo_entry {
    uint64_t hash;
    int n;
    int *set;   /* owned, ascending */
    bool pass;
} memo_entry;

struct ld_bisect_memo {
    ld_bisect_oracle oracle;
    void *user;
    memo_entry *entries;
    int n, cap;
    int calls, hits;
    int *scratch;   /* sorted copy of the set being asked about */
    int scratch_cap;
};

ld_status ld_bisect_memo_create(ld_bisect_memo **out, ld_bisect_oracle oracle, void *user,
                                ld_error *err)
{
    ld_bisect_memo *m = calloc(1, sizeof *m);
    if (!m)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    m->oracle = oracle;
    m->user = user;
    *out = m;
    return LD_OK;
}

void ld_bisect_memo_destroy(ld_bisect_memo *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n; i++)
        free(m->entries[i].set);
    free(m->entries);
    free(m->scratch);
    free(m);
}

int ld_bisect_memo_calls(const ld_bisect_memo *m)
{
    return m->calls;
}

int ld_bisect_memo_hits(const ld_bisect_memo *m)
{
    return m->hits;
}

static int compare_ints(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* FNV-1a over the ints of a sorted set. */
static uint64_t hash_set(const int *set, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        uint32_t v = (uint32_t)set[i];
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    return h ^ (uint64_t)n;
}

static ld_status sorted_copy(ld_bisect_memo *m, const int *set, int n, ld_error *err)
{
    if (n > m->scratch_cap) {
        int *grown = realloc(m->scratch, (size_t)n * sizeof *grown);
        if (!grown)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        m->scratch = grown;
        m->scratch_cap = n;
    }
    if (n)
        memcpy(m->scratch, set, (size_t)n * sizeof *set);
    if (n > 1)
        qsort(m->scratch, (size_t)n, sizeof *m->scratch, compare_ints);
    for (int i = 1; i < n; i++)
        if (m->scratch[i] == m->scratch[i - 1])
            return ld_error_set(err, LD_ERR_INTERNAL, "bisect: item %d twice in one set",
                                m->scratch[i]);
    return LD_OK;
}

static const memo_entry *memo_find(const ld_bisect_memo *m, const int *set, int n, uint64_t h)
{
    for (int i = 0; i < m->n; i++) {
        const memo_entry *e = &m->entries[i];
        if (e->hash == h && e->n == n && (n == 0 || memcmp(e->set, set, (size_t)n * sizeof *set) == 0))
            return e;
    }
    return NULL;
}

static ld_status memo_add(ld_bisect_memo *m, const int *set, int n, uint64_t h, bool pass,
                          ld_error *err)
{
    if (m->n == m->cap) {
        int cap = m->cap ? 2 * m->cap : 64;
        memo_entry *grown = realloc(m->entries, (size_t)cap * sizeof *grown);
        if (!grown)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        m->entries = grown;
        m->cap = cap;
    }
    int *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
    if (!copy)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (n)
        memcpy(copy, set, (size_t)n * sizeof *set);
    m->entries[m->n++] = (memo_entry){h, n, copy, pass};
    return LD_OK;
}

ld_status ld_bisect_memo_test(ld_bisect_memo *m, const int *set, int n, bool *pass,
                              ld_error *err)
{
    ld_status st = sorted_copy(m, set, n, err);
    if (st != LD_OK)
        return st;
    uint64_t h = hash_set(m->scratch, n);
    const memo_entry *e = memo_find(m, m->scratch, n, h);
    if (e) {
        m->hits++;
        *pass = e->pass;
        return LD_OK;
    }
    m->calls++;
    /* The oracle may call back into nothing here, but keep the sorted set
     * safe from a nested test: ask with a private copy. */
    int *asked = malloc((size_t)(n ? n : 1) * sizeof *asked);
    if (!asked)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (n)
        memcpy(asked, m->scratch, (size_t)n * sizeof *asked);
    bool result = false;
    st = m->oracle(m->user, asked, n, &result, err);
    if (st == LD_OK)
        st = memo_add(m, asked, n, h, result, err);
    free(asked);
    if (st == LD_OK)
        *pass = result;
    return st;
}

/* ---- grow: the smallest passing prefix of a ranking ------------------------------------ */

ld_status ld_bisect_grow(ld_bisect_memo *m, const int *ranking, int n, int *k, ld_error *err)
{
    bool pass = false;
    ld_status st = ld_bisect_memo_test(m, ranking, 0, &pass, err);
    if (st != LD_OK)
        return st;
    if (pass) {
        *k = 0;
        return LD_OK;
    }
    int lo = 0, hi = -1; /* lo fails; hi passes (-1: none found yet) */
    for (int step = 1; st == LD_OK;) {
        int try = step < n ? step : n;
        st = ld_bisect_memo_test(m, ranking, try, &pass, err);
        if (st == LD_OK && pass) {
            hi = try;
            break;
        }
        lo = try;
        if (try == n)
            break;
        step *= 2; /* step <= n here: no overflow */
    }
    if (st != LD_OK)
        return st;
    if (hi < 0) {
        *k = -1;
        return LD_OK;
    }
    while (hi - lo > 1 && st == LD_OK) {
        int mid = lo + (hi - lo) / 2;
        st = ld_bisect_memo_test(m, ranking, mid, &pass, err);
        if (st == LD_OK && pass)
            hi = mid;
        else if (st == LD_OK)
            lo = mid;
    }
    *k = hi;
    return st;
}

/* ---- ddmin ---------------------------------------------------------------------------- */

/* Chunk i of `parts` nearly equal chunks of [0, n): [*begin, *end). */
static void chunk(int n, int parts, int i, int *begin, int *end)
{
    *begin = (int)((int64_t)n * i / parts);
    *end = (int)((int64_t)n * (i + 1) / parts);
}

/* cur[0..n) without chunk [b, e), into out; returns the size. */
static int complement(const int *cur, int n, int b, int e, int *out)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (i < b || i >= e)
            out[k++] = cur[i];
    return k;
}

/* One ddmin round at granularity *parts: shrinks cur (size *n) to a passing
 * chunk or complement when one passes. *reduced tells whether it did. */
static ld_status ddmin_round(ld_bisect_memo *m, int *cur, int *n, int *parts, int *tmp,
                             bool *reduced, ld_error *err)
{
    bool pass = false;
    ld_status st = LD_OK;
    *reduced = false;
    for (int i = 0; i < *parts && st == LD_OK; i++) { /* a chunk alone */
        int b, e;
        chunk(*n, *parts, i, &b, &e);
        if (e - b == *n)
            continue; /* the whole set: known to pass */
        st = ld_bisect_memo_test(m, cur + b, e - b, &pass, err);
        if (st == LD_OK && pass) {
            memmove(cur, cur + b, (size_t)(e - b) * sizeof *cur);
            *n = e - b;
            *parts = 2;
            *reduced = true;
            return LD_OK;
        }
    }
    for (int i = 0; i < *parts && st == LD_OK; i++) { /* everything but a chunk */
        int b, e;
        chunk(*n, *parts, i, &b, &e);
        int k = complement(cur, *n, b, e, tmp);
        st = ld_bisect_memo_test(m, tmp, k, &pass, err);
        if (st == LD_OK && pass) {
            memcpy(cur, tmp, (size_t)k * sizeof *cur);
            *n = k;
            *parts = *parts - 1 > 2 ? *parts - 1 : 2;
            *reduced = true;
            return LD_OK;
        }
    }
    return st;
}

ld_status ld_bisect_ddmin(ld_bisect_memo *m, const int *items, int n, int *out, int *n_out,
                          ld_error *err)
{
    int *cur = malloc((size_t)(n ? n : 1) * sizeof *cur);
    int *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    bool pass = false;
    ld_status st = cur && tmp ? LD_OK : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK)
        st = ld_bisect_memo_test(m, items, n, &pass, err);
    if (st == LD_OK && !pass)
        st = ld_error_set(err, LD_ERR_INPUT, "bisect: the %d layers to minimise do not pass "
                          "together", n);
    if (st != LD_OK)
        goto out;
    memcpy(cur, items, (size_t)n * sizeof *cur);
    int size = n, parts = 2;
    while (size > 0 && st == LD_OK) {
        if (parts > size)
            parts = size;
        bool reduced = false;
        st = ddmin_round(m, cur, &size, &parts, tmp, &reduced, err);
        if (st != LD_OK || reduced)
            continue;
        if (parts >= size)
            break; /* every single removal fails: 1-minimal */
        parts = 2 * parts < size ? 2 * parts : size;
    }
    if (st != LD_OK)
        goto out;
    qsort(cur, (size_t)size, sizeof *cur, compare_ints);
    if (size)
        memcpy(out, cur, (size_t)size * sizeof *cur);
    *n_out = size;
out:
    free(cur);
    free(tmp);
    return st;
}

/* ---- Polygraphy's prefix / suffix bisection --------------------------------------------- */

/* The layers of a k-trial: the first k or the last k of n. */
static void marked_layers(int n, int k, bool from_end, int *out)
{
    for (int i = 0; i < k; i++)
        out[i] = from_end ? n - k + i : i;
}

ld_status ld_bisect_polygraphy(ld_bisect_memo *m, int n_layers, bool from_end, int *k,
                               ld_error *err)
{
    int *layers = malloc((size_t)(n_layers ? n_layers : 1) * sizeof *layers);
    if (!layers)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    /* polygraphy/tools/debug/subtool/precision.py, BisectMarker: start with
     * every layer marked; good = n + 1 pretends marking all layers passes. */
    int good = n_layers + 1, bad = 0, mark = n_layers;
    ld_status st = LD_OK;
    for (;;) {
        bool pass = false;
        marked_layers(n_layers, mark, from_end, layers);
        st = ld_bisect_memo_test(m, layers, mark, &pass, err);
        if (st != LD_OK)
            break;
        int old = mark;
        if (pass) {
            good = mark;
            mark = (good + bad) / 2; /* floor: toward bad */
        } else {
            bad = mark;
            mark = (good + bad + 1) / 2; /* ceil */
        }
        if (old == mark || abs(good - bad) <= 1 || mark > n_layers)
            break;
    }
    free(layers);
    if (st == LD_OK)
        *k = good <= n_layers ? good : -1;
    return st;
}

ld_status ld_bisect_is_one_minimal(ld_bisect_memo *m, const int *set, int n, bool *minimal,
                                   ld_error *err)
{
    int *less = malloc((size_t)(n ? n : 1) * sizeof *less);
    if (!less)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    bool pass = false;
    ld_status st = ld_bisect_memo_test(m, set, n, &pass, err);
    *minimal = st == LD_OK && pass;
    for (int i = 0; i < n && st == LD_OK && *minimal; i++) {
        int k = complement(set, n, i, i + 1, less);
        st = ld_bisect_memo_test(m, less, k, &pass, err);
        *minimal = !pass;
    }
    free(less);
    return st;
}
