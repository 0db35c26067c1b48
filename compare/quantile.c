/* layerdiff — exact order statistics of error values without sorting them.
 *
 * Errors are non-negative doubles (or +inf), and non-negative IEEE doubles
 * order exactly like their bit patterns read as uint64. So:
 *  - qsel_select finds any ranks of an array by MSD radix partition on the
 *    bit patterns: each level looks only at the 8 bits just below the
 *    highest bit where the remaining values differ, keeps the buckets that
 *    hold a wanted rank and recurses; all-equal ranges stop at once, so
 *    ties cost nothing. O(m) per level, at most 8 levels, no O(m^2) input.
 *    qsel_select_fast does the same for large arrays by Floyd and Rivest's
 *    method with vector passes (AVX-512 here, AVX2 in quantile_avx2.c;
 *    pivots from a sample bracket each rank; a pass keeps what lies between
 *    them, about a tenth).
 *  - For large tensors, ld_compare_tensors does not keep the errors: it
 *    guesses from a sample an interval of keys (qsel_key: the high half of
 *    the bit pattern) around every wanted rank (qsel_plan), and while the
 *    blocks stream by counts the errors below each interval and keeps those
 *    inside (qsel_feed here, or a vector kernel). The answer is then
 *    exact whenever the rank falls inside the kept errors; when it does not
 *    (rare: an interval spans 4 sample standard deviations each way) the
 *    caller recomputes exactly. */
#include <immintrin.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare/metrics_internal.h"

/* The arrays are written as double elsewhere and read as bit patterns here:
 * may_alias makes that defined. */
typedef uint64_t __attribute__((may_alias)) bits64;

static inline double double_of(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

int64_t qsel_rank(double q, int64_t n)
{
    if (n <= 0)
        return 0;
    if (!(q > 0)) /* also NaN */
        return 0;
    double pos = ceil(q * (double)n) - 1.0;
    if (pos < 0)
        return 0;
    if (pos >= (double)(n - 1))
        return n - 1;
    return (int64_t)pos;
}

/* ---- exact selection in an array ---- */

#define RADIX_BITS 8
#define RADIX_BUCKETS (1 << RADIX_BITS)
#define SMALL_SELECT 32
#define SELECT_MAX_RANKS 16 /* per select_bits call; qsel_select splits longer lists */

static void insertion_sort(bits64 *v, int64_t m)
{
    for (int64_t i = 1; i < m; i++) {
        uint64_t x = v[i];
        int64_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* Moves the members of the wanted buckets to the front, bucket after
 * bucket (cat[digit] = their order, n_cat for the rest), in place: one
 * compaction sweep per wanted bucket over what is left. The wanted buckets
 * are small, so the sweeps are mostly reads, and unlike a full permutation
 * no load waits on the one before. */
static void sweep_buckets(bits64 *v, int64_t m, const uint8_t *cat, int n_cat, unsigned shift,
                          uint64_t base)
{
    int64_t w = 0;
    for (int c = 0; c < n_cat; c++) {
        for (int64_t i = w; i < m; i++) {
            uint64_t x = v[i];
            if (cat[(x >> shift) - base] == c) {
                v[i] = v[w];
                v[w++] = x;
            }
        }
    }
}

/* sweep_buckets, with room for m in tmp: whether an element belongs to a
 * wanted bucket is as good as random, and the sweeps' branch, mispredicted
 * about as often as it is taken, was most of a small selection's time (82%
 * of ld_compare_tensors on 4,096 pairs). So one pass without a branch
 * first parts the wanted from the rest into tmp (the wanted from the
 * front, the rest from the back: the place is a register choice, no store
 * waits on another), the sweeps then group the few wanted, and v gets the
 * parted order back. */
static void group_buckets(bits64 *v, int64_t m, const uint8_t *cat, int n_cat, unsigned shift,
                          uint64_t base, bits64 *tmp)
{
    if (!tmp) {
        sweep_buckets(v, m, cat, n_cat, shift, base);
        return;
    }
    int64_t front = 0, back = m;
    for (int64_t i = 0; i < m; i++) {
        uint64_t x = v[i];
        bool wanted = cat[(x >> shift) - base] < n_cat;
        back -= !wanted;
        tmp[wanted ? front : back] = x;
        front += wanted;
    }
    sweep_buckets(tmp, front, cat, n_cat, shift, base);
    memcpy(v, tmp, (size_t)m * sizeof *v);
}

/* tmp: room for m (NULL: the sweeps alone); the levels below reuse it. */
static void select_bits(bits64 *v, int64_t m, const int64_t *ranks, int k, uint64_t *out,
                        bits64 *tmp)
{
    if (k <= 0 || m <= 0)
        return;
    if (m <= SMALL_SELECT) {
        insertion_sort(v, m);
        for (int i = 0; i < k; i++)
            out[i] = v[ranks[i]];
        return;
    }
    uint64_t lo = v[0], hi = v[0];
    for (int64_t i = 1; i < m; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    if (lo == hi) {
        for (int i = 0; i < k; i++)
            out[i] = lo;
        return;
    }
    int top = 63 - __builtin_clzll(lo ^ hi); /* highest bit where values differ */
    unsigned shift = top >= RADIX_BITS - 1 ? (unsigned)(top - (RADIX_BITS - 1)) : 0;
    uint64_t base = lo >> shift;
    int64_t count[RADIX_BUCKETS] = {0}, start[RADIX_BUCKETS], end[RADIX_BUCKETS];
    for (int64_t i = 0; i < m; i++)
        count[(v[i] >> shift) - base]++;
    int64_t sum = 0;
    for (int b = 0; b < RADIX_BUCKETS; b++) {
        start[b] = sum;
        sum += count[b];
        end[b] = sum;
    }
    /* the buckets holding wanted ranks, grouped at the front, then each
       searched on its own with the next digit */
    uint8_t cat[RADIX_BUCKETS];
    int64_t cat_count[SELECT_MAX_RANKS], cat_start[SELECT_MAX_RANKS];
    int bucket_of[SELECT_MAX_RANKS], n_cat = 0;
    memset(cat, SELECT_MAX_RANKS, sizeof cat);
    for (int i = 0, b = 0; i < k; i++) {
        while (ranks[i] >= end[b])
            b++;
        if (n_cat == 0 || bucket_of[n_cat - 1] != b) {
            bucket_of[n_cat] = b;
            cat_count[n_cat] = count[b];
            cat[b] = (uint8_t)n_cat;
            n_cat++;
        }
    }
    for (int j = 0; j < RADIX_BUCKETS; j++)
        if (cat[j] == SELECT_MAX_RANKS)
            cat[j] = (uint8_t)n_cat; /* everything else: the last category */
    int64_t sum_cat = 0;
    for (int c = 0; c < n_cat; c++) {
        cat_start[c] = sum_cat;
        sum_cat += cat_count[c];
    }
    group_buckets(v, m, cat, n_cat, shift, base, tmp);
    for (int i = 0, c = 0; i < k; c++) {
        int64_t sub[SELECT_MAX_RANKS];
        int j = i;
        while (j < k && ranks[j] < end[bucket_of[c]]) {
            sub[j - i] = ranks[j] - start[bucket_of[c]];
            j++;
        }
        select_bits(v + cat_start[c], cat_count[c], sub, j - i, out + i, tmp);
        i = j;
    }
}

#define SELECT_STACK 4096 /* up to this many, select_bits' room is on the stack (32 KiB) */

void qsel_select(double *v, int64_t m, const int64_t *ranks, int k, double *out)
{
    bits64 *bits = (bits64 *)(void *)v;
    uint64_t res[SELECT_MAX_RANKS];
    uint64_t room[SELECT_STACK];
    /* without room (out of memory) it only goes slower */
    bits64 *tmp = m <= SELECT_STACK ? room : malloc((size_t)m * sizeof *tmp);
    int done = 0;
    while (done < k) {
        int kk = k - done;
        if (kk > (int)(sizeof res / sizeof res[0]))
            kk = (int)(sizeof res / sizeof res[0]);
        select_bits(bits, m, ranks + done, kk, res, tmp);
        for (int i = 0; i < kk; i++)
            out[done + i] = double_of(res[i]);
        done += kk;
    }
    if (tmp != room)
        free(tmp);
}

/* ---- intervals planned from a sample ---- */

double qsel_bracket_sigmas = 4.0;

/* ---- intervals fed block by block ---- */

void qsel_block_done(qsel *q, int64_t m, const int64_t *ge)
{
    for (int v = 0; v < q->n_iv; v++)
        q->ge[v] += ge[v];
    q->seen += m;
}

void qsel_feed(qsel *q, const double *x, int64_t m)
{
    for (int64_t i = 0; i < m; i++) {
        int32_t key = qsel_key_of(q, x[i]);
        int inside = -1;
        for (int v = 0; v < q->n_iv; v++) {
            if (key >= q->lo[v]) {
                q->ge[v]++;
                if (key <= q->hi[v])
                    inside = v;
            }
        }
        if (inside >= 0) {
            q->in_iv[inside]++;
            if (q->n < q->cap)
                q->cand[q->n++] = x[i];
            else
                q->overflow = true;
        }
    }
    q->seen += m;
}

/* ---- selection among many kept errors ---- */

#define FR_SMALL 4096   /* below this, the radix selection on a copy */
#define FR_SAMPLE 1024  /* elements sampled to choose each pass's pivots */

#define SEL_TARGET __attribute__((target("avx512f,avx512dq,avx512bw,popcnt")))

double qsel_pivot_sigmas = 3.5;
int64_t qsel_cap_limit = INT64_MAX;

/* One pass over src[0, len): how many are < lo (*below), and those in
 * [lo, hi] compressed to dst (room for len + 16; may be src, the writing
 * never gets ahead of the reading). Returns how many. */
SEL_TARGET static int64_t bracket_pass_avx512(const double *src, int64_t len, double lo,
                                              double hi, double *dst, int64_t *below)
{
    const __m512d vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
    int64_t under = 0, len8 = len & ~(int64_t)7;
    double *d = dst;
    for (int64_t i = 0; i < len8; i += 8) {
        __m512d x = _mm512_loadu_pd(src + i);
        __mmask8 lt = _mm512_cmp_pd_mask(x, vlo, _CMP_LT_OQ);
        __mmask8 in = _mm512_mask_cmp_pd_mask((__mmask8)~lt, x, vhi, _CMP_LE_OQ);
        under += __builtin_popcount(lt);
        _mm512_storeu_pd(d, _mm512_maskz_compress_pd(in, x));
        d += __builtin_popcount(in);
    }
    for (int64_t i = len8; i < len; i++) {
        double x = src[i];
        under += x < lo;
        if (x >= lo && x <= hi)
            *d++ = x;
    }
    *below = under;
    return d - dst;
}

/* How many of v[0, len) are < lo (*below) and in [lo, hi] (returned). */
SEL_TARGET static int64_t count_in_avx512(const double *v, int64_t len, double lo, double hi,
                                          int64_t *below)
{
    const __m512d vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
    int64_t under = 0, in = 0, len8 = len & ~(int64_t)7;
    for (int64_t i = 0; i < len8; i += 8) {
        __m512d x = _mm512_loadu_pd(v + i);
        __mmask8 lt = _mm512_cmp_pd_mask(x, vlo, _CMP_LT_OQ);
        under += __builtin_popcount(lt);
        in += __builtin_popcount(_mm512_mask_cmp_pd_mask((__mmask8)~lt, x, vhi, _CMP_LE_OQ));
    }
    for (int64_t i = len8; i < len; i++) {
        under += v[i] < lo;
        in += v[i] >= lo && v[i] <= hi;
    }
    *below = under;
    return in;
}

/* The passes of the vector level in use (the callers need one). */
static int64_t bracket_pass(const double *src, int64_t len, double lo, double hi, double *dst,
                            int64_t *below)
{
    if (cmp_fast_level() == CMP_LEVEL_AVX512)
        return bracket_pass_avx512(src, len, lo, hi, dst, below);
    return qsel_bracket_pass_avx2(src, len, lo, hi, dst, below);
}

static int64_t count_in(const double *v, int64_t len, double lo, double hi, int64_t *below)
{
    if (cmp_fast_level() == CMP_LEVEL_AVX512)
        return count_in_avx512(v, len, lo, hi, below);
    return qsel_count_in_avx2(v, len, lo, hi, below);
}

/* Pivots around ranks j[0, k) of v[0, len) from one sample: lo[t] and
 * hi[t] are elements of v, and rank j[t] lies between them unless the
 * sample was unlucky. One selection of all 2k sample ranks: select_many's
 * ranks share the sample (its places depend on len only). */
static void pivots_many(const double *v, int64_t len, const int64_t *j, int k, double *lo,
                        double *hi)
{
    double sample[FR_SAMPLE];
    for (int i = 0; i < FR_SAMPLE; i++)
        sample[i] = v[(int64_t)((double)i * (double)len / FR_SAMPLE)];
    int64_t ranks[2 * QSEL_MAX_RANKS] = {0};
    int slot[2 * QSEL_MAX_RANKS] = {0};
    for (int t = 0; t < k; t++) {
        double f = ((double)j[t] + 0.5) / (double)len, at = f * FR_SAMPLE;
        double spread = qsel_pivot_sigmas * sqrt(FR_SAMPLE * f * (1.0 - f)) + 2.0;
        if (qsel_pivot_sigmas < 0) { /* tests: a bracket far from the rank, to miss it */
            at = (f < 0.5 ? 0.9 : 0.1) * FR_SAMPLE;
            spread = 2.0;
        }
        double at_lo = floor(at - spread), at_hi = ceil(at + spread);
        ranks[2 * t] = at_lo < 0 ? 0 : (int64_t)at_lo;
        ranks[2 * t + 1] = at_hi > FR_SAMPLE - 1 ? FR_SAMPLE - 1 : (int64_t)at_hi;
        slot[2 * t] = 2 * t;
        slot[2 * t + 1] = 2 * t + 1;
    }
    for (int i = 1; i < 2 * k; i++) /* ascending for the selection */
        for (int n = i; n > 0 && ranks[n] < ranks[n - 1]; n--) {
            int64_t r = ranks[n];
            ranks[n] = ranks[n - 1];
            ranks[n - 1] = r;
            int sl = slot[n];
            slot[n] = slot[n - 1];
            slot[n - 1] = sl;
        }
    double piv[2 * QSEL_MAX_RANKS];
    qsel_select(sample, FR_SAMPLE, ranks, 2 * k, piv);
    for (int i = 0; i < 2 * k; i++) {
        if (slot[i] % 2)
            hi[slot[i] / 2] = piv[i];
        else
            lo[slot[i] / 2] = piv[i];
    }
}

static void pivots(const double *v, int64_t len, int64_t j, double *lo, double *hi)
{
    pivots_many(v, len, &j, 1, lo, hi);
}

/* The element of rank j (0-based, ascending) of v[0, len), v and tmp
 * (room for len + 16) overwritten: Floyd and Rivest's selection with
 * vector passes. Each round brackets the rank between two pivots from a
 * sample and keeps, in the other buffer, only what lies between them
 * (about a tenth); a bracket that misses (rare) keeps one side instead, in
 * a second pass over the same, intact, source. Exact whatever the pivots:
 * they only decide how fast it goes. */
static double select_in_place(double *v, int64_t len, int64_t j, double *tmp)
{
    double *src = v, *dst = tmp;
    while (len > FR_SMALL) {
        double lo, hi;
        int64_t below, under;
        pivots(src, len, j, &lo, &hi);
        int64_t kept = bracket_pass(src, len, lo, hi, dst, &below);
        if (j < below) { /* under the bracket: what is below it */
            kept = bracket_pass(src, len, -INFINITY, nextafter(lo, -INFINITY), dst, &under);
        } else if (j < below + kept) {
            j -= below;
        } else {
            j -= below + kept;
            kept = bracket_pass(src, len, nextafter(hi, INFINITY), INFINITY, dst, &under);
        }
        if (kept == len)
            break; /* every element equals a pivot: bracketing cannot shrink it (dst holds
                      them all, as src does) */
        double *t = src;
        src = dst;
        dst = t;
        len = kept;
    }
    double out;
    qsel_select(src, len, &j, 1, &out);
    return out;
}

/* select_in_place without a second buffer: each round counts first, then
 * keeps the side that holds the rank in place. For the small brackets of
 * select_many. */
static double select_in_place_small(double *v, int64_t len, int64_t j)
{
    while (len > FR_SMALL) {
        double lo, hi;
        int64_t below, kept;
        pivots(v, len, j, &lo, &hi);
        int64_t mid = count_in(v, len, lo, hi, &below);
        if (j < below) {
            kept = bracket_pass(v, len, -INFINITY, nextafter(lo, -INFINITY), v, &below);
        } else if (j < below + mid) {
            kept = bracket_pass(v, len, lo, hi, v, &below);
            j -= below;
        } else {
            j -= below + mid;
            kept = bracket_pass(v, len, nextafter(hi, INFINITY), INFINITY, v, &below);
        }
        if (kept == len)
            break;
        len = kept;
    }
    double out;
    qsel_select(v, len, &j, 1, &out);
    return out;
}

/* The bracketing pass of select_many over v[0, m) (m a multiple of 8) for
 * k ranks (a constant in each instantiation below): counts below each
 * bracket, compresses each bracket to dst[t] while it stays under end[t]
 * (checked every chunk; full[t] set when it would not). */
#define SEL_CHUNK QSEL_CHUNK
SEL_TARGET static inline __attribute__((always_inline)) void
bracket_all(const double *v, int64_t m, const int k, const double *lo_v, const double *hi_v,
            int64_t *below, double **dst, double *const *end, bool *full)
{
    __m512d lo[QSEL_MAX_RANKS], hi[QSEL_MAX_RANKS];
    double *d[QSEL_MAX_RANKS];
    int64_t under[QSEL_MAX_RANKS];
    for (int t = 0; t < k; t++) {
        lo[t] = _mm512_set1_pd(lo_v[t]);
        hi[t] = _mm512_set1_pd(hi_v[t]);
        d[t] = dst[t];
        under[t] = 0;
    }
    for (int64_t c = 0; c < m; c += SEL_CHUNK) {
        int64_t stop = m - c < SEL_CHUNK ? m : c + SEL_CHUNK;
        for (int t = 0; t < k; t++)
            if (d[t] + (stop - c) + 8 > end[t]) {
                full[t] = true; /* it might not fit: from here on into the last chunk's room */
                d[t] = end[t] - SEL_CHUNK - 8;
            }
        for (int64_t i = c; i < stop; i += 8) {
            __m512d x = _mm512_loadu_pd(v + i);
#pragma GCC unroll 5
            for (int t = 0; t < k; t++) {
                __mmask8 lt = _mm512_cmp_pd_mask(x, lo[t], _CMP_LT_OQ);
                __mmask8 in = _mm512_mask_cmp_pd_mask((__mmask8)~lt, x, hi[t], _CMP_LE_OQ);
                under[t] += __builtin_popcount(lt);
                _mm512_storeu_pd(d[t], _mm512_maskz_compress_pd(in, x));
                d[t] += __builtin_popcount(in);
            }
        }
    }
    for (int t = 0; t < k; t++) {
        below[t] = under[t];
        dst[t] = d[t];
    }
}

typedef void (*bracket_fn)(const double *, int64_t, const double *, const double *, int64_t *,
                           double **, double *const *, bool *);
#define BRACKET(k)                                                                             \
    SEL_TARGET static void bracket_##k(const double *v, int64_t m, const double *lo,         \
                                       const double *hi, int64_t *below, double **dst,         \
                                       double *const *end, bool *full)                         \
    {                                                                                          \
        bracket_all(v, m, k, lo, hi, below, dst, end, full);                                   \
    }
BRACKET(1) BRACKET(2) BRACKET(3) BRACKET(4) BRACKET(5)
#undef BRACKET
static const bracket_fn brackets[2][QSEL_MAX_RANKS] = {
    {qsel_bracket_avx2_1, qsel_bracket_avx2_2, qsel_bracket_avx2_3, qsel_bracket_avx2_4,
     qsel_bracket_avx2_5},
    {bracket_1, bracket_2, bracket_3, bracket_4, bracket_5}};

/* The elements of ranks j[0..k) of v[0, m) (v unchanged), out[i] for j[i]:
 * one first vector pass brackets every rank at once, each bracket going to
 * its own part of tmp (room for m + 16), then each is finished in place. A
 * bracket that misses or does not fit its part is redone from a copy of v. */
static void select_many(const double *v, int64_t m, const int64_t *j, int k, double *tmp,
                        double *out)
{
    double lo[QSEL_MAX_RANKS], hi[QSEL_MAX_RANKS];
    int64_t below[QSEL_MAX_RANKS] = {0}, part = (m + 16) / k;
    double *dst[QSEL_MAX_RANKS], *start[QSEL_MAX_RANKS], *end[QSEL_MAX_RANKS];
    bool full[QSEL_MAX_RANKS] = {false};
    int64_t m8 = m & ~(int64_t)7;
    pivots_many(v, m, j, k, lo, hi);
    for (int t = 0; t < k; t++) {
        start[t] = dst[t] = tmp + (int64_t)t * part;
        end[t] = start[t] + part;
    }
    if (part < 2 * SEL_CHUNK + 16) { /* tiny: the radix selection */
        memcpy(tmp, v, (size_t)m * sizeof *tmp);
        qsel_select(tmp, m, j, k, out);
        return;
    }
    brackets[cmp_fast_level() == CMP_LEVEL_AVX512][k - 1](v, m8, lo, hi, below, dst, end, full);
    for (int64_t i = m8; i < m; i++) /* the last few */
        for (int t = 0; t < k; t++) {
            below[t] += v[i] < lo[t];
            if (v[i] >= lo[t] && v[i] <= hi[t])
                *dst[t]++ = v[i];
        }
    int redo = k;
    for (int t = 0; t < k; t++) {
        int64_t mid = dst[t] - start[t];
        if (full[t] || j[t] < below[t] || j[t] >= below[t] + mid) {
            redo = t; /* rare: the sample misled the pivots */
            break;
        }
        out[t] = select_in_place_small(start[t], mid, j[t] - below[t]);
    }
    for (int t = redo; t < k; t++) { /* from a copy, one rank at a time */
        memcpy(tmp, v, (size_t)m * sizeof *tmp);
        out[t] = select_in_place_small(tmp, m, j[t]);
    }
}

/* Sample keys inside each interval. */
SEL_TARGET static void count_inside_avx512(const qsel *q, const double *sample, int64_t s,
                                           int64_t *inside)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i lo[QSEL_MAX_RANKS], hi[QSEL_MAX_RANKS];
    for (int v = 0; v < q->n_iv; v++) {
        lo[v] = _mm512_set1_epi32(q->lo[v]);
        hi[v] = _mm512_set1_epi32(q->hi[v]);
        inside[v] = 0;
    }
    int64_t s16 = s & ~(int64_t)15;
    const __m512i bias = _mm512_set1_epi32(q->bias);
    const __m512i min16 = _mm512_set1_epi32(INT16_MIN), max16 = _mm512_set1_epi32(INT16_MAX);
    const __m128i shift = _mm_cvtsi32_si128(q->shift);
    for (int64_t i = 0; i < s16; i += 16) {
        __m512i key = _mm512_permutex2var_epi32(_mm512_loadu_si512(sample + i), odd,
                                                _mm512_loadu_si512(sample + i + 8));
        if (q->narrow) /* qsel_key_of */
            key = _mm512_min_epi32(
                _mm512_max_epi32(
                    _mm512_sub_epi32(
                        _mm512_sra_epi32(_mm512_sub_epi32(key, _mm512_set1_epi32(1)), shift),
                        bias),
                    min16),
                max16);
        for (int v = 0; v < q->n_iv; v++)
            inside[v] += __builtin_popcount(_mm512_mask_cmp_epi32_mask(
                _mm512_cmp_epi32_mask(key, lo[v], _MM_CMPINT_NLT), key, hi[v], _MM_CMPINT_LE));
    }
    for (int64_t i = s16; i < s; i++)
        for (int v = 0; v < q->n_iv; v++)
            inside[v] += qsel_key_of(q, sample[i]) >= q->lo[v] &&
                         qsel_key_of(q, sample[i]) <= q->hi[v];
}

static void count_inside(const qsel *q, const double *sample, int64_t s, int64_t *inside)
{
    if (cmp_fast_level() == CMP_LEVEL_AVX512) {
        count_inside_avx512(q, sample, s, inside);
        return;
    }
    if (cmp_fast_level() == CMP_LEVEL_AVX2) {
        qsel_count_inside_avx2(q, sample, s, inside);
        return;
    }
    for (int v = 0; v < q->n_iv; v++)
        inside[v] = 0;
    for (int64_t i = 0; i < s; i++) {
        int32_t key = qsel_key_of(q, sample[i]);
        for (int v = 0; v < q->n_iv; v++)
            inside[v] += (key >= q->lo[v]) & (key <= q->hi[v]);
    }
}

/* Intervals sorted by lo, merged where they overlap. */
static void merge_intervals(qsel *q, int n_iv, const int32_t *lo, const int32_t *hi)
{
    q->n_iv = 0;
    for (int i = 0; i < n_iv; i++) {
        if (q->n_iv > 0 && lo[i] <= q->hi[q->n_iv - 1]) {
            if (hi[i] > q->hi[q->n_iv - 1])
                q->hi[q->n_iv - 1] = hi[i];
            continue;
        }
        q->lo[q->n_iv] = lo[i];
        q->hi[q->n_iv] = hi[i];
        q->n_iv++;
    }
}

/* Narrow keys for q's intervals (qsel_key_of): the smallest shift that
 * fits them into 65533 steps, the bias that puts the first at -32766; the
 * bounds mapped (a bound can only move outward, the map rounding down: more
 * errors kept, never fewer) and merged again. The wide bounds are >= 1. */
static void narrow_keys(qsel *q)
{
    q->narrow = true;
    q->shift = 30;
    q->bias = 0;
    if (q->n_iv == 0)
        return;
    uint32_t first = (uint32_t)q->lo[0] - 1, last = (uint32_t)q->hi[q->n_iv - 1] - 1;
    int shift = 0;
    while ((last >> shift) - (first >> shift) > 65532)
        shift++;
    q->shift = shift;
    q->bias = (int32_t)(first >> shift) + 32766;
    int32_t lo[QSEL_MAX_RANKS], hi[QSEL_MAX_RANKS];
    int n_iv = q->n_iv;
    for (int v = 0; v < n_iv; v++) { /* within -32766..32766 by construction */
        lo[v] = (int32_t)(((uint32_t)q->lo[v] - 1) >> shift) - q->bias;
        hi[v] = (int32_t)(((uint32_t)q->hi[v] - 1) >> shift) - q->bias;
    }
    merge_intervals(q, n_iv, lo, hi);
}

void qsel_plan(qsel *q, double *sample, int64_t s, int64_t n, const int64_t *ranks, int k,
               double *tmp, bool narrow)
{
    memset(q, 0, sizeof *q);
    q->n_ranks = k;
    /* where each rank sits in the sample, and how far the sample's order
       statistics stray from it: binomial spread, plus a constant for the
       extremes; positions past the ends mean "no bound" */
    double lo_pos[QSEL_MAX_RANKS], hi_pos[QSEL_MAX_RANKS];
    int64_t at[2 * QSEL_MAX_RANKS] = {0};
    int n_at = 0;
    for (int i = 0; i < k; i++) {
        q->rank[i] = ranks[i];
        double f = ((double)ranks[i] + 0.5) / (double)n;
        double pos = f * (double)s;
        double spread = qsel_bracket_sigmas * sqrt((double)s * f * (1.0 - f)) +
                        (qsel_bracket_sigmas > 0 ? 3.0 : -3.0);
        lo_pos[i] = floor(pos - spread);
        hi_pos[i] = ceil(pos + spread);
        at[n_at++] = lo_pos[i] < 0 ? 0 : lo_pos[i] > (double)(s - 1) ? s - 1 : (int64_t)lo_pos[i];
        at[n_at++] = hi_pos[i] < 0 ? 0 : hi_pos[i] > (double)(s - 1) ? s - 1 : (int64_t)hi_pos[i];
    }
    for (int i = 1; i < n_at; i++) /* ascending for the selection */
        for (int j = i; j > 0 && at[j] < at[j - 1]; j--) {
            int64_t t = at[j];
            at[j] = at[j - 1];
            at[j - 1] = t;
        }
    /* the keys at those places: the key is monotone in the error, so the
       key of the j-th smallest error is the j-th smallest key */
    double value[2 * QSEL_MAX_RANKS];
    if (tmp && cmp_fast_available() && s > FR_SMALL) {
        select_many(sample, s, at, n_at / 2, tmp, value);
        select_many(sample, s, at + n_at / 2, n_at - n_at / 2, tmp, value + n_at / 2);
    } else {
        qsel_select(sample, s, at, n_at, value);
    }
    const int32_t key_max = (int32_t)qsel_key(DBL_MAX); /* below +inf's */
    int32_t lo[QSEL_MAX_RANKS], hi[QSEL_MAX_RANKS];
    int n_iv = 0;
    for (int i = 0; i < k; i++) {
        int64_t lp = lo_pos[i] < 0 ? 0 : lo_pos[i] > (double)(s - 1) ? s - 1 : (int64_t)lo_pos[i];
        int64_t hp = hi_pos[i] < 0 ? 0 : hi_pos[i] > (double)(s - 1) ? s - 1 : (int64_t)hi_pos[i];
        int32_t l = 0, h = INT32_MAX;
        for (int j = 0; j < n_at; j++) {
            if (at[j] == lp && lo_pos[i] >= 0)
                l = (int32_t)qsel_key(value[j]);
            if (at[j] == hp && hi_pos[i] <= (double)(s - 1))
                h = (int32_t)qsel_key(value[j]);
        }
        /* zeros and +inf are counted by the kernels, never kept */
        l = l < 1 ? 1 : l;
        h = h > key_max ? key_max : h;
        if (l > h)
            continue; /* only zeros or infinities expected there */
        int pos = n_iv++; /* insertion by lo */
        while (pos > 0 && lo[pos - 1] > l) {
            lo[pos] = lo[pos - 1];
            hi[pos] = hi[pos - 1];
            pos--;
        }
        lo[pos] = l;
        hi[pos] = h;
    }
    merge_intervals(q, n_iv, lo, hi);
    if (narrow)
        narrow_keys(q);
    /* room for twice what the sample predicts, and some */
    int64_t inside[QSEL_MAX_RANKS], all = 0;
    count_inside(q, sample, s, inside);
    for (int v = 0; v < q->n_iv; v++)
        all += inside[v];
    double cap = 2.0 * ((double)all / (double)s) * (double)n + 4096.0;
    q->cap = cap >= (double)n ? n : (int64_t)cap;
    q->cap = q->cap < qsel_cap_limit ? q->cap : qsel_cap_limit;
}

bool qsel_answer(qsel *q, int64_t n, int64_t zeros, int64_t infs, double *tmp, double *out)
{
    bool needed = false; /* some rank lies between the zeros and the infinities */
    for (int i = 0; i < q->n_ranks; i++)
        needed |= q->rank[i] >= zeros && q->rank[i] < n - infs;
    if (needed && q->overflow)
        return false;
    /* the kept errors sorted would be interval after interval (their keys
       are), and every key below lo[v] is below interval v's, every key above
       hi[v] above: rank r in interval v is element before[v] + r - below[v] */
    int64_t before[QSEL_MAX_RANKS], sum = 0;
    for (int v = 0; v < q->n_iv; v++) {
        before[v] = sum;
        sum += q->in_iv[v];
    }
    int64_t pos[QSEL_MAX_RANKS];
    int dest[QSEL_MAX_RANKS], k = 0;
    for (int i = 0; i < q->n_ranks; i++) {
        int64_t r = q->rank[i], p = -1;
        if (r < zeros || r >= n - infs) {
            out[i] = r < zeros ? 0.0 : INFINITY;
            continue;
        }
        for (int v = 0; v < q->n_iv && p < 0; v++) {
            int64_t below = q->seen - q->ge[v]; /* keys < lo[v] */
            if (r >= below && r < below + q->in_iv[v])
                p = before[v] + (r - below);
        }
        if (p < 0)
            return false;
        int at = k++; /* ascending positions */
        while (at > 0 && pos[at - 1] > p) {
            pos[at] = pos[at - 1];
            dest[at] = dest[at - 1];
            at--;
        }
        pos[at] = p;
        dest[at] = i;
    }
    if (k == 0)
        return true;
    double vals[QSEL_MAX_RANKS];
    qsel_select_fast(q->cand, q->n, pos, k, tmp, vals);
    for (int i = 0; i < k; i++)
        out[dest[i]] = vals[i];
    return true;
}

void qsel_select_fast(double *v, int64_t m, const int64_t *ranks, int k, double *tmp, double *out)
{
    if (!tmp || !cmp_fast_available() || m <= FR_SMALL || k > QSEL_MAX_RANKS)
        qsel_select(v, m, ranks, k, out);
    else if (k == 1)
        out[0] = select_in_place(v, m, ranks[0], tmp);
    else
        select_many(v, m, ranks, k, tmp, out);
}

_Static_assert(sizeof(double) == sizeof(uint64_t), "doubles are 64-bit");
