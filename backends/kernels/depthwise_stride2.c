/* layerdiff — AVX-512 depthwise planes at stride 2 from even/odd phase rows
 * (see depthwise.h; depthwise.c calls this first and keeps the plane when it
 * declines).
 *
 * Which planes. 2-D, 3x3 or 5x5 kernels, stride 2 both ways, no dilation,
 * any padding (PaddleOCR det's four stride-2 depthwise layers), with neutral
 * padding (finite weights, bias not -0, as depthwise.c's narrow-plane copy):
 * adding a padding tap's w * 0 = +-0 to a sum that started at a non -0 bias
 * leaves it unchanged (x + y is -0 only when both are), so the zero-padded
 * rows below give the portable loop's bits with no masked taps. Each output
 * is its bias plus its taps in (kh, kw) order, a float multiply then a float
 * add (no FMA), as everywhere in depthwise.c.
 *
 * How. Each padded input row is read once and split into its even and odd
 * columns (two loads, two permutes, two stores per 32 floats), zero padding
 * included, into a ring of rows on the stack (the rows one group of output
 * rows reads; phase vectors past the input are zeroed once per plane):
 * output ow's tap kw is then element ow + kw / 2 of the row's phase kw % 2,
 * one plain load. depthwise.c's stride-2 blocks load two vectors and
 * permute them per tap and output vector, and its
 * masked edge blocks and narrow-plane copy (a memset and a copy of the whole
 * plane) cost more than the taps on det's narrow planes. Rows outside the
 * plane are one shared zero row. NR output rows (2 or 4) x NB vectors (1-6)
 * of sums are kept in registers, 6-12 independent add chains (the add's
 * latency is 3 cycles, two adds per cycle), rows beyond the plane's last
 * output row computed into a scratch row; weights are broadcast once per tap
 * and NR * NB vectors.
 *
 * Measured on the Zen 5 (2 vCPUs shared with other agents, ~3.5 GHz):
 * - A 512-bit load that crosses a cache line issues at half rate (1 per
 *   cycle against 2: a microbenchmark of load, multiply, add), so the
 *   phase rows are 64-byte aligned and 2 of 3 taps (3x3; 2 of 5 at 5x5) load
 *   aligned; taps kw >= 2 (element + 1 or + 2) do not. The row split's input
 *   loads are misaligned when pb is odd (det's 3x3) and stream from L2/L3 at
 *   half speed; taking them from aligned loads costs two more permutes per
 *   32 floats, and that was slower (det's 320x320 planes 0.44 -> 0.46 ms,
 *   160x160 0.162 -> 0.176): the permutes, not the loads, bound the split.
 * - GCC (12), with the kernel rows unrolled, saw rows shared by two output
 *   rows (2 r + kh) load the same vectors, kept them live and spilled; with
 *   row pointers it kept one index register per tap and moved them through
 *   vector registers. Hence the kh loop stays rolled and the row pointers
 *   are opaque (loads at pointer + constant).
 * - Splitting the next group's rows ahead of the current group's taps (a
 *   ring twice as long) measured 5-15% slower.
 * Harness (a loop of ld_depthwise_plane_f32_fast: 1 thread, CPU time, best of 30, warm
 * input; old and new interleaved, medians of 9 rounds), depthwise.c's
 * stride-2 blocks -> this file: 32 planes 320x320 3x3 0.56 -> 0.41 ms, 48
 * planes 160x160 3x3 0.28 -> 0.15, 96 planes 80x80 3x3 0.18 -> 0.094, 192
 * planes 40x40 5x5 0.19 -> 0.12. With 96 MB flushed before each pass (input
 * from memory; medians of 5): 1.01 -> 0.79, 0.41 -> 0.26, 0.29 -> 0.16,
 * 0.27 -> 0.14. The 320-wide layer stays the slowest per float: its split
 * (two rows of 20 cache lines per output row) streams from L3 or memory. */
#include "backends/kernels/depthwise.h"

#include <immintrin.h>
#include <math.h>
#include <stdalign.h>
#include <string.h>

#define LANES 16
/* The ring of phase rows plus the zero row and the scratch output row. */
#define S2_MAX_FLOATS 16384
/* The split asks for the input this many rows ahead, two lines per vector
 * pair, in its own loop; past the plane's last row it asks for the next
 * plane's first rows, which usually follow (prefetches never fault). Det's
 * 32 planes of 320x320 from L3: 0.59 -> 0.48 ms against a separate
 * prefetch loop per row (harness, interleaved, medians of 9); 2, 3, 5 or 6
 * rows ahead, and a second prefetch to L2 further ahead, measured alike
 * (warm and flushed). */
#define S2_PREFETCH_ROWS 3

static __mmask16 lane_bits(int64_t from, int64_t to) /* bits [from, to) of 0..15 */
{
    from = from < 0 ? 0 : from;
    to = to > LANES ? LANES : to;
    return (__mmask16)(to > from ? ((1u << to) - 1) & ~((1u << from) - 1) : 0);
}

/* Input row x as padded row phases: dst[j] = padded column 2j, dst[le + j] =
 * padded column 2j + 1 (padded column q = input column q - pb), zero
 * outside the input, j in [0, le). Writes the vectors j < live (the
 * others hold no input: zero once per plane). The 32 inputs of the
 * phases' vector j are those from x - pb + 32 j; vectors [whole_lo,
 * whole_hi) load them whole, the others masked by masks[2 j + 0 or 1] to the ones inside the
 * row (masked-off lanes are not read and load as 0): masked loads cost 1.7x
 * plain ones here (Zen 5, in L1, unaligned). pf: the prefetch distance. */
__attribute__((target("avx512f"))) static void phase_row(const float *x, int64_t pb, int64_t le,
                                                          int64_t live, int64_t whole_lo,
                                                          int64_t whole_hi,
                                                          const __mmask16 *masks, float *dst,
                                                          int64_t pf)
{
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4,
                                          2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5,
                                         3, 1);
    const float *xs = x - pb;
    for (int64_t j = 0; j < live; j++) {
        const float *xj = xs + 2 * j * LANES;
        __m512 lo, hi;
        __builtin_prefetch(xj + pf, 0, 3);
        __builtin_prefetch(xj + pf + LANES, 0, 3);
        if (j >= whole_lo && j < whole_hi) {
            lo = _mm512_loadu_ps(xj);
            hi = _mm512_loadu_ps(xj + LANES);
        } else {
            lo = _mm512_maskz_loadu_ps(masks[2 * j], xj);
            hi = _mm512_maskz_loadu_ps(masks[2 * j + 1], xj + LANES);
        }
        _mm512_store_ps(dst + j * LANES, _mm512_permutex2var_ps(lo, even, hi));
        _mm512_store_ps(dst + le + j * LANES, _mm512_permutex2var_ps(lo, odd, hi));
    }
}

/* NR output rows x NB vectors from vector b0: rows[i] is padded row
 * 2 * oh0 + i as phases (le floats each), yr[r] output row oh0 + r (of
 * `out` floats; a scratch row past the plane's last). */
#define DEFINE_S2(K, NR, NB)                                                                   \
    __attribute__((target("avx512f"))) static void s2_k##K##_r##NR##_b##NB(                    \
        const float *const *rows, int64_t le, const float *wp, float bias, int64_t b0,         \
        float *const *yr, int64_t out)                                                         \
    {                                                                                          \
        __m512 acc[NR][NB];                                                                    \
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)                                   \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[r][b] =                   \
                _mm512_set1_ps(bias);                                                          \
        const int64_t o0 = b0 * LANES;                                                         \
        _Pragma("GCC unroll 1") for (int kh = 0; kh < K; kh++)                                 \
        {                                                                                      \
            /* opaque row pointers: loads at pointer + constant (GCC otherwise                 \
               kept one index register per tap and ran out of them) */                         \
            const float *ph[NR][2];                                                            \
            _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)                               \
            {                                                                                  \
                ph[r][0] = rows[2 * r + kh] + o0;                                              \
                ph[r][1] = ph[r][0] + le;                                                      \
                __asm__("" : "+r"(ph[r][0]), "+r"(ph[r][1]));                                  \
            }                                                                                  \
            _Pragma("GCC unroll 5") for (int kw = 0; kw < K; kw++)                             \
            {                                                                                  \
                const __m512 wv = _mm512_set1_ps(wp[kh * K + kw]);                             \
                _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)                           \
                {                                                                              \
                    const float *x = ph[r][kw % 2] + kw / 2;                                   \
                    _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[r][b] =           \
                        _mm512_add_ps(acc[r][b],                                               \
                                      _mm512_mul_ps(wv, _mm512_loadu_ps(x + b * LANES)));      \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)                                   \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++)                               \
        {                                                                                      \
            int64_t o = o0 + b * LANES;                                                        \
            if (o + LANES <= out)                                                              \
                _mm512_storeu_ps(yr[r] + o, acc[r][b]);                                        \
            else                                                                               \
                _mm512_mask_storeu_ps(yr[r] + o, lane_bits(0, out - o), acc[r][b]);            \
        }                                                                                      \
    }

#define DEFINE_S2_K(K)                                                                         \
    DEFINE_S2(K, 4, 1) DEFINE_S2(K, 4, 2) DEFINE_S2(K, 4, 3) DEFINE_S2(K, 2, 1)                \
    DEFINE_S2(K, 2, 2) DEFINE_S2(K, 2, 3) DEFINE_S2(K, 2, 4) DEFINE_S2(K, 2, 5)                \
    DEFINE_S2(K, 2, 6)
DEFINE_S2_K(3)
DEFINE_S2_K(5)

typedef void (*s2_fn)(const float *const *, int64_t, const float *, float, int64_t,
                      float *const *, int64_t);

/* [3x3, 5x5][NB - 1]: rows of at most 3 vectors 4 at a time, wider ones 2
 * at a time in chunks of up to 6 vectors */
static const s2_fn s2_four[2][3] = {{s2_k3_r4_b1, s2_k3_r4_b2, s2_k3_r4_b3},
                                    {s2_k5_r4_b1, s2_k5_r4_b2, s2_k5_r4_b3}};
static const s2_fn s2_two[2][6] = {
    {s2_k3_r2_b1, s2_k3_r2_b2, s2_k3_r2_b3, s2_k3_r2_b4, s2_k3_r2_b5, s2_k3_r2_b6},
    {s2_k5_r2_b1, s2_k5_r2_b2, s2_k5_r2_b3, s2_k5_r2_b4, s2_k5_r2_b5, s2_k5_r2_b6},
};

typedef struct s2_layout {
    int64_t k, nr, vecs, le;
    int64_t span; /* padded rows an NR-row group reads: the ring's rows */
} s2_layout;

static bool s2_fits(const ld_window_geom *g, s2_layout *l)
{
    if (g->in[0] != 1 || g->k[0] != 1 || g->out[0] != 1 || g->pb[0] != 0 || g->s[1] != 2 ||
        g->s[2] != 2 || g->d[1] != 1 || g->d[2] != 1 || g->k[1] != g->k[2] ||
        (g->k[2] != 3 && g->k[2] != 5) || g->out[2] < 1 || g->out[1] < 1)
        return false;
    l->k = g->k[2];
    l->vecs = (g->out[2] + LANES - 1) / LANES;
    l->nr = l->vecs <= 3 ? 4 : 2;
    /* the last vector's loads reach element vecs * 16 + k / 2 - 1 */
    l->le = l->vecs * LANES + LANES;
    l->span = 2 * (l->nr - 1) + l->k;
    /* ring, zero row, scratch output row */
    return (l->span + 1) * 2 * l->le + l->le <= S2_MAX_FLOATS;
}

/* A plane's ring of phase rows: padded rows [next - span, next) are split,
 * row next - 1 in slot last. */
typedef struct s2_ring {
    const float *xp;
    const ld_window_geom *g;
    const s2_layout *l;
    float *buf, *zero;
    const __mmask16 *masks;
    int64_t live, whole_lo, whole_hi; /* phase_row's */
    int64_t next, last;
} s2_ring;

/* Splits the padded rows up to `upto` not split yet (in order, rows outside
 * the plane taking a slot but not written) and sets rows[i] to padded row
 * r0 + i's phases, i < span. */
__attribute__((target("avx512f"))) static void s2_rows(s2_ring *rg, int64_t r0, int64_t upto,
                                                       const float **rows)
{
    const ld_window_geom *g = rg->g;
    const int64_t in1 = g->in[1], in2 = g->in[2], ring = rg->l->span;
    const int64_t row_floats = 2 * rg->l->le;
    for (; rg->next <= upto; rg->next++) {
        rg->last = rg->last + 1 < ring ? rg->last + 1 : 0;
        int64_t ih = rg->next - g->pb[1];
        if (ih < 0 || ih >= in1)
            continue;
        phase_row(rg->xp + ih * in2, g->pb[2], rg->l->le, rg->live, rg->whole_lo, rg->whole_hi,
                  rg->masks, rg->buf + rg->last * row_floats, S2_PREFETCH_ROWS * in2);
    }
    for (int64_t i = 0; rows && i < rg->l->span; i++) {
        int64_t r = r0 + i, ih = r - g->pb[1], slot = rg->last - (rg->next - 1 - r);
        slot = slot < 0 ? slot + ring : slot;
        rows[i] = ih < 0 || ih >= in1 ? rg->zero : rg->buf + slot * row_floats;
    }
}

__attribute__((target("avx512f"))) bool ld_depthwise_stride2_avx512(const float *xp,
                                                                    const float *wp, float bias,
                                                                    float *yp,
                                                                    const ld_window_geom *g)
{
    s2_layout l;
    if (!s2_fits(g, &l) || !ld_depthwise_padding_is_neutral(wp, bias, g->k_size))
        return false;
    alignas(64) float buf[S2_MAX_FLOATS];
    __mmask16 masks[S2_MAX_FLOATS / LANES]; /* phase_row's, two per vector of a phase */
    s2_ring rg = {.xp = xp, .g = g, .l = &l, .buf = buf, .masks = masks, .live = 0,
                  .whole_lo = -1, .whole_hi = -1, .next = 0, .last = l.span - 1};
    rg.zero = buf + l.span * 2 * l.le;
    float *scratch = rg.zero + 2 * l.le;
    memset(rg.zero, 0, (size_t)(2 * l.le) * sizeof *rg.zero);
    for (int64_t j = 0; j < l.le / LANES; j++) {
        int64_t p = 2 * j * LANES - g->pb[2];
        masks[2 * j] = lane_bits(-p, g->in[2] - p);
        masks[2 * j + 1] = lane_bits(-p - LANES, g->in[2] - p - LANES);
        if (masks[2 * j] | masks[2 * j + 1])
            rg.live = j + 1;
        if (p >= 0 && p + 2 * LANES <= g->in[2]) {
            rg.whole_lo = rg.whole_lo < 0 ? j : rg.whole_lo;
            rg.whole_hi = j + 1;
        }
    }
    /* the phases' vectors past the input: 1 of 3 on det's 40-wide rows */
    for (int64_t i = 0; i < 2 * l.span; i++)
        memset(buf + i * l.le + rg.live * LANES, 0,
               (size_t)(l.le - rg.live * LANES) * sizeof *buf);
    const int ki = l.k == 3 ? 0 : 1;
    for (int64_t oh0 = 0; oh0 < g->out[1]; oh0 += l.nr) {
        /* split just before their loads: splitting a group ahead (a
           ring twice as long) measured 5-15% slower */
        const float *rows[16];
        s2_rows(&rg, 2 * oh0, 2 * oh0 + l.span - 1, rows);
        float *yr[4];
        for (int64_t r = 0; r < l.nr; r++)
            yr[r] = oh0 + r < g->out[1] ? yp + (oh0 + r) * g->out[2] : scratch;
        if (l.nr == 4) {
            s2_four[ki][l.vecs - 1](rows, l.le, wp, bias, 0, yr, g->out[2]);
            continue;
        }
        /* chunks of at most 6 vectors, as even as possible */
        int64_t chunks = (l.vecs + 5) / 6;
        for (int64_t c = 0, b0 = 0; c < chunks; c++) {
            int64_t nb = (l.vecs - b0) / (chunks - c);
            s2_two[ki][nb - 1](rows, l.le, wp, bias, b0, yr, g->out[2]);
            b0 += nb;
        }
    }
    return true;
}
