/* layerdiff — float32 depthwise convolution planes with AVX2 (see
 * depthwise.h): the 8-lane port of depthwise.c's AVX-512 kernel, for CPUs
 * without AVX-512 (Zen 3 and older, most Intel clients), where conv.c's
 * portable plane loop would otherwise run.
 *
 * The same design and the same numbers as depthwise.c (read its header
 * comment first): up to 8 vectors of sums stay in registers across all taps,
 * each output is its bias plus its taps in kernel order, a float multiply
 * then a float add (no FMA: this file is compiled for plain "avx2", and the
 * build's -ffp-contract=off would forbid fusing anyway), padding taps are
 * skipped, so the results are the portable loop's bits. What differs is only
 * how masks are expressed: AVX2 has no mask registers, so a block's lanes
 * are kept in bytes (bit l: lane l) and widened to a vector mask when used;
 * loads that may cross the row's ends use _mm256_maskload_ps (masked-off
 * lanes are not read, so they cannot fault, and read as 0), a skipped tap
 * keeps the old sum through a blend, and row tails use _mm256_maskstore_ps.
 * Stride 2 takes the even elements of two loads with one shuffle and one
 * cross-lane permute; larger strides gather.
 *
 * Kept separate from depthwise.c rather than one width-neutral body so that
 * the AVX-512 kernel (not testable on AVX2-only machines) stays unchanged. */
#include "backends/kernels/depthwise.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define LANES 8
#define MAX_BLOCKS 4
/* Per-plane mask table limit (blocks per row x kernel width), as depthwise.c. */
#define MAX_MASKS 4096

/* For one block of outputs and one kernel column: which lanes add this tap,
 * and which elements to load (one load, or two for stride 2). Bit l: lane l. */
typedef struct tap_masks {
    uint8_t add, lo, hi;
} tap_masks;

static uint8_t bits(int64_t from, int64_t to) /* bits [from, to) of 0..7 */
{
    from = from < 0 ? 0 : from;
    to = to > LANES ? LANES : to;
    return (uint8_t)(to > from ? ((1u << to) - 1) & ~((1u << from) - 1) : 0);
}

/* Masks of the block starting at output ow0 (lanes < n) for the tap whose
 * first input position is p0 = ow0 * s - pb + kw * d. */
static tap_masks masks_for(int64_t p0, int64_t s, int n, int64_t in)
{
    tap_masks m = {0};
    /* lane l reads p0 + l * s: inside [0, in) for l in [ceil(-p0 / s), ceil((in - p0) / s)) */
    int64_t first = p0 >= 0 ? 0 : (-p0 + s - 1) / s;
    int64_t end = in - p0 <= 0 ? 0 : (in - p0 + s - 1) / s;
    m.add = bits(first, end < n ? end : n);
    if (s == 2) { /* elements j of the 16 loaded from p0: j = 2 * lane */
        int64_t jf = 2 * first, je = 2 * (end < n ? end : n) - 1;
        m.lo = bits(jf, je);
        m.hi = bits(jf - LANES, je - LANES);
    }
    return m;
}

/* The vector mask of byte mask b: lane l all ones when bit l is set. */
__attribute__((target("avx2"), always_inline)) static inline __m256i lane_mask(unsigned b)
{
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)b), bit), bit);
}

/* The inputs of a block's lanes for one tap: x at xk + lane * S (S 0: s).
 * FULL: every lane's tap is inside the row and, for stride 2, so are the
 * odd elements between them: plain loads, no masks. */
__attribute__((target("avx2"), always_inline)) static inline __m256
load_lanes(const float *xk, int S, int64_t s, const tap_masks *m, int FULL)
{
    if (S == 1)
        return FULL ? _mm256_loadu_ps(xk) : _mm256_maskload_ps(xk, lane_mask(m->add));
    if (S == 2) {
        __m256 lo = FULL ? _mm256_loadu_ps(xk) : _mm256_maskload_ps(xk, lane_mask(m->lo));
        __m256 hi = FULL ? _mm256_loadu_ps(xk + LANES)
                         : _mm256_maskload_ps(xk + LANES, lane_mask(m->hi));
        /* per 128-bit half: lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6; then 64-bit pairs 0 2 1 3 */
        __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
    }
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32((int)s));
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xk, idx,
                                    _mm256_castsi256_ps(lane_mask(m->add)), 4);
}

/* Stores the block's outputs from yr + ow0 (fewer than 8 at a row's end). */
__attribute__((target("avx2"), always_inline)) static inline void
store_block(float *yr, int64_t ow0, int64_t out, __m256 v)
{
    if (out - ow0 >= LANES)
        _mm256_storeu_ps(yr + ow0, v); /* whole: masked stores are slow on AMD */
    else
        _mm256_maskstore_ps(yr + ow0, lane_mask(bits(0, out - ow0)), v);
}

/* NB blocks of one output row from block b0 for stride S (0: any), masks at
 * masks[(b0 + b) * k2 + kw]. A lane whose tap lies in the padding keeps its
 * sum (blend): the tap is skipped. FULL blocks (see load_lanes) have every
 * lane of every tap inside the row: unmasked loads and adds, the same
 * arithmetic. */
#define DEFINE_BLOCKS(NB, S, FULL, NAME)                                                       \
    __attribute__((target("avx2"))) static void NAME(                                          \
        const float *xp, const float *wp, float bias, const ld_window_geom *g, int64_t id0,    \
        int64_t ih0, int64_t b0, const tap_masks *masks, float *yr)                            \
    {                                                                                          \
        const int64_t s = S ? S : g->s[2], k2 = g->k[2], d2 = g->d[2], in1 = g->in[1];         \
        const int64_t in2 = g->in[2], step = LANES * s;                                        \
        __m256 acc[NB];                                                                        \
        _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[b] = _mm256_set1_ps(bias);    \
        for (int64_t kd = 0; kd < g->k[0]; kd++) {                                             \
            int64_t id = id0 + kd * g->d[0];                                                   \
            for (int64_t kh = 0; id >= 0 && id < g->in[0] && kh < g->k[1]; kh++) {             \
                int64_t ih = ih0 + kh * g->d[1];                                               \
                if (ih < 0 || ih >= in1)                                                       \
                    continue;                                                                  \
                const float *xr = xp + (id * in1 + ih) * in2 - g->pb[2] + b0 * step;           \
                const float *wr = wp + (kd * g->k[1] + kh) * k2;                               \
                const tap_masks *mr = FULL ? masks : masks + b0 * k2; /* FULL: may be NULL */  \
                for (int64_t kw = 0; kw < k2; kw++) {                                          \
                    const __m256 wv = _mm256_set1_ps(wr[kw]);                                  \
                    _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                     \
                        const tap_masks *m = FULL ? mr : &mr[b * k2 + kw];                     \
                        __m256 xv = load_lanes(xr + b * step + kw * d2, S, s, m, FULL);        \
                        __m256 sum = _mm256_add_ps(acc[b], _mm256_mul_ps(wv, xv));             \
                        acc[b] = FULL ? sum                                                    \
                                      : _mm256_blendv_ps(acc[b], sum,                          \
                                                         _mm256_castsi256_ps(                  \
                                                             lane_mask(m->add)));              \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++)                                   \
            store_block(yr, (b0 + b) * LANES, g->out[2], acc[b]);                              \
    }

#define DEFINE_BLOCKS_S(S)                                                                     \
    DEFINE_BLOCKS(1, S, 0, blocks1_s##S) DEFINE_BLOCKS(2, S, 0, blocks2_s##S)                  \
    DEFINE_BLOCKS(3, S, 0, blocks3_s##S) DEFINE_BLOCKS(4, S, 0, blocks4_s##S)
DEFINE_BLOCKS_S(1)
DEFINE_BLOCKS_S(2)
DEFINE_BLOCKS_S(0)
/* full blocks, stride 1 and 2: up to 8 at a time (8 independent add chains) */
DEFINE_BLOCKS(1, 1, 1, full1_s1)
DEFINE_BLOCKS(2, 1, 1, full2_s1)
DEFINE_BLOCKS(4, 1, 1, full4_s1)
DEFINE_BLOCKS(8, 1, 1, full8_s1)
DEFINE_BLOCKS(1, 2, 1, full1_s2)
DEFINE_BLOCKS(2, 2, 1, full2_s2)
DEFINE_BLOCKS(4, 2, 1, full4_s2)
DEFINE_BLOCKS(8, 2, 1, full8_s2)

typedef void (*blocks_fn)(const float *, const float *, float, const ld_window_geom *, int64_t,
                          int64_t, int64_t, const tap_masks *, float *);

/* [stride 1, 2][1, 2, 4, 8 blocks] */
static const blocks_fn full_table[2][4] = {
    {full1_s1, full2_s1, full4_s1, full8_s1},
    {full1_s2, full2_s2, full4_s2, full8_s2},
};

/* [stride 1, 2, other][blocks - 1] */
static const blocks_fn blocks_table[3][MAX_BLOCKS] = {
    {blocks1_s1, blocks2_s1, blocks3_s1, blocks4_s1},
    {blocks1_s2, blocks2_s2, blocks3_s2, blocks4_s2},
    {blocks1_s0, blocks2_s0, blocks3_s0, blocks4_s0},
};

bool ld_depthwise_avx2_fits(const ld_window_geom *g)
{
    int64_t blocks = (g->out[2] + LANES - 1) / LANES;
    return g->k[2] <= MAX_MASKS && blocks * g->k[2] <= MAX_MASKS && g->s[2] <= (1 << 20);
}

/* --- narrow planes ------------------------------------------------------------------
 * As in depthwise.c: when the plane's weights are finite and its bias is
 * not -0, padding taps (w * 0 = +-0) leave every sum unchanged, so a
 * zero-padded copy of the plane gives the same bits with FULL blocks only.
 * The same width limit as depthwise.c (7 x 16 = 14 x 8 outputs per row). */
#define PADDED_MAX_FLOATS 12288
#define PADDED_MAX_BLOCKS 14

typedef struct padded_plane {
    ld_window_geom g; /* the copy's geometry: no padding, rows of `in[2]` floats */
    int64_t rows, row_len;
} padded_plane;

static bool padded_layout(const ld_window_geom *g, padded_plane *pp)
{
    int64_t s = g->s[2], blocks = (g->out[2] + LANES - 1) / LANES;
    if (g->in[0] != 1 || g->k[0] != 1 || g->out[0] != 1 || g->pb[0] != 0 || (s != 1 && s != 2) ||
        blocks > PADDED_MAX_BLOCKS)
        return false;
    pp->g = *g;
    pp->rows = g->pb[1] + g->in[1] + g->pe[1];
    /* every element a FULL load of the last block reads (16 at stride 2) */
    pp->row_len = blocks * LANES * s + (g->k[2] - 1) * g->d[2] + LANES;
    if (pp->row_len < g->pb[2] + g->in[2])
        pp->row_len = g->pb[2] + g->in[2];
    pp->g.in[1] = pp->rows;
    pp->g.in[2] = pp->row_len;
    pp->g.pb[1] = pp->g.pb[2] = pp->g.pe[1] = pp->g.pe[2] = 0;
    return pp->rows * pp->row_len <= PADDED_MAX_FLOATS;
}

/* NR output rows [oh0, oh0 + NR) x NB blocks from b0 of a padded plane
 * (pp->g: no padding): NR * NB independent sums, so that short rows still
 * keep enough additions in flight. Per output the same taps in the same
 * order as the other paths. */
#define DEFINE_PADDED_ROWS(NB, NR, S)                                                          \
    __attribute__((target("avx2"))) static void padded##NB##x##NR##_s##S(                      \
        const float *buf, const float *wp, float bias, const ld_window_geom *g, int64_t oh0,   \
        int64_t b0, float *yp)                                                                 \
    {                                                                                          \
        const int64_t k2 = g->k[2], d2 = g->d[2], in2 = g->in[2], step = LANES * S;            \
        __m256 acc[NR][NB];                                                                    \
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)                                   \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[r][b] =                   \
                _mm256_set1_ps(bias);                                                          \
        for (int64_t kh = 0; kh < g->k[1]; kh++) {                                             \
            const float *wr = wp + kh * k2;                                                    \
            const float *x0 = buf + (oh0 * g->s[1] + kh * g->d[1]) * in2 + b0 * step;          \
            for (int64_t kw = 0; kw < k2; kw++) {                                              \
                const __m256 wv = _mm256_set1_ps(wr[kw]);                                      \
                _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                         \
                    const float *xr = x0 + r * g->s[1] * in2 + kw * d2;                        \
                    _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                     \
                        __m256 xv = load_lanes(xr + b * step, S, S, NULL, 1);                  \
                        acc[r][b] = _mm256_add_ps(acc[r][b], _mm256_mul_ps(wv, xv));           \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                                 \
            float *yr = yp + (oh0 + r) * g->out[2];                                            \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++)                               \
                store_block(yr, (b0 + b) * LANES, g->out[2], acc[r][b]);                       \
        }                                                                                      \
    }

#define DEFINE_PADDED_S(S)                                                                     \
    DEFINE_PADDED_ROWS(1, 8, S) DEFINE_PADDED_ROWS(2, 4, S) DEFINE_PADDED_ROWS(3, 2, S)        \
    DEFINE_PADDED_ROWS(4, 2, S) DEFINE_PADDED_ROWS(1, 1, S) DEFINE_PADDED_ROWS(2, 1, S)        \
    DEFINE_PADDED_ROWS(3, 1, S) DEFINE_PADDED_ROWS(4, 1, S)
DEFINE_PADDED_S(1)
DEFINE_PADDED_S(2)

typedef void (*padded_fn)(const float *, const float *, float, const ld_window_geom *, int64_t,
                          int64_t, float *);

/* [stride 1, 2][blocks - 1][several rows, one row] */
static const padded_fn padded_table[2][4][2] = {
    {{padded1x8_s1, padded1x1_s1}, {padded2x4_s1, padded2x1_s1}, {padded3x2_s1, padded3x1_s1},
     {padded4x2_s1, padded4x1_s1}},
    {{padded1x8_s2, padded1x1_s2}, {padded2x4_s2, padded2x1_s2}, {padded3x2_s2, padded3x1_s2},
     {padded4x2_s2, padded4x1_s2}},
};
static const int padded_rows[4] = {8, 4, 2, 2};

static void padded_plane_run(const float *xp, const float *wp, float bias, float *yp,
                             const ld_window_geom *g, const padded_plane *pp)
{
    float buf[PADDED_MAX_FLOATS];
    memset(buf, 0, (size_t)(pp->rows * pp->row_len) * sizeof *buf);
    for (int64_t ih = 0; ih < g->in[1]; ih++)
        memcpy(buf + (g->pb[1] + ih) * pp->row_len + g->pb[2], xp + ih * g->in[2],
               (size_t)g->in[2] * sizeof *buf);
    const padded_fn(*by_blocks)[2] = padded_table[g->s[2] == 1 ? 0 : 1];
    int64_t blocks = (g->out[2] + LANES - 1) / LANES;
    for (int64_t b0 = 0; b0 < blocks;) {
        int64_t nb = blocks - b0 < 4 ? blocks - b0 : 4;
        int64_t nr = padded_rows[nb - 1], oh = 0;
        for (; oh + nr <= g->out[1]; oh += nr)
            by_blocks[nb - 1][0](buf, wp, bias, &pp->g, oh, b0, yp);
        for (; oh < g->out[1]; oh++)
            by_blocks[nb - 1][1](buf, wp, bias, &pp->g, oh, b0, yp);
        b0 += nb;
    }
}

/* --- wide planes, stride 2 -----------------------------------------------------------
 * Planes too wide for the copy above (PaddleOCR det's 320x320 planes at
 * stride 2: 20 blocks per row), 2-D or 1-D, with neutral padding: each
 * padded input row is copied once, zero padding included, its columns
 * split into even and odd phases, into a ring of the kernel's height in
 * rows. Every block is then FULL with plain loads: no masked edge blocks (a
 * third of the plane's time) and no even-element shuffles (two per tap and
 * block). Zen 3, 1 thread, CPU time, 32 planes 320x320 3x3: 2.9 -> 1.55 ms.
 * At stride 1 the copy cost more than the edges saved (16 planes 320x320:
 * 1.3 -> 1.6 ms), so stride 1 keeps the blocks below. The same taps in the
 * same order as the other paths, padding taps adding +-0 to a sum that is
 * never -0. */
#define WIDE_MAX_FLOATS 12288 /* the ring: 48 KiB of stack */
/* Input rows are asked for this many rows before wide_row copies them:
 * it reads two whole rows per output row in a burst, which the hardware
 * prefetcher did not keep up with. Zen 3, AVX2, 1 thread, CPU time, inputs
 * from memory, interleaved, medians of 40: 32 planes 320x320 0.83-0.87 of
 * the time without, 48 planes 160x160 0.90-0.99. (Asking ahead in the
 * blocks path below, at stride 1, made it 5-10% slower.) */
#define PREFETCH_ROWS 8

typedef struct wide_plane {
    int64_t phases, phase_len, ring, blocks;
} wide_plane;

static bool wide_layout(const ld_window_geom *g, wide_plane *wp)
{
    int64_t s = g->s[2];
    if (g->in[0] != 1 || g->k[0] != 1 || g->out[0] != 1 || g->pb[0] != 0 || s != 2)
        return false;
    wp->phases = s;
    wp->blocks = (g->out[2] + LANES - 1) / LANES;
    /* every element a FULL load of the last block reads, and the padded row */
    int64_t reach = wp->blocks * LANES + (g->k[2] - 1) * g->d[2] / s;
    int64_t padded = (g->pb[2] + g->in[2] + g->pe[2] + s - 1) / s;
    wp->phase_len = (reach > padded ? reach : padded) + 1;
    wp->ring = (g->k[1] - 1) * g->d[1] + 1;
    return wp->ring * wp->phases * wp->phase_len <= WIDE_MAX_FLOATS;
}

/* Padded input row r (of pb[1] + in[1] + pe[1]) into dst: two phases of
 * phase_len floats, dst[q % 2][q / 2] = padded column q. */
__attribute__((target("avx2"))) static void wide_row(const float *xp, const ld_window_geom *g,
                                                     const wide_plane *wp, int64_t r, float *dst)
{
    memset(dst, 0, (size_t)(wp->phases * wp->phase_len) * sizeof *dst);
    int64_t ih = r - g->pb[1], W = g->in[2], pb = g->pb[2];
    if (ih < 0 || ih >= g->in[1])
        return;
    const float *src = xp + ih * W;
    float *ph[2] = {dst, dst + wp->phase_len};
    int64_t iw = 0;
    if (pb % 2) { /* from iw = 1 on, padded column pb + iw starts even */
        ph[1][pb / 2] = src[0];
        iw = 1;
    }
    float *even = ph[0] + (pb + iw) / 2, *odd = ph[1] + (pb + iw) / 2;
    for (int64_t i = 0; iw + 2 * LANES <= W; iw += 2 * LANES, i += LANES) {
        __m256 a = _mm256_loadu_ps(src + iw), b = _mm256_loadu_ps(src + iw + LANES);
        __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8));
        o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xD8));
        _mm256_storeu_ps(even + i, e);
        _mm256_storeu_ps(odd + i, o);
    }
    for (; iw < W; iw++)
        ph[(pb + iw) % 2][(pb + iw) / 2] = src[iw];
}

/* NB blocks from b0 of output row oh; rows[kh] is the ring row kernel row
 * kh reads. */
#define DEFINE_WIDE_BLOCKS(NB)                                                                 \
    __attribute__((target("avx2"))) static void wide##NB(                                      \
        const float *const *rows, const float *wp, float bias, const ld_window_geom *g,        \
        const wide_plane *pl, int64_t b0, float *yr)                                           \
    {                                                                                          \
        const int64_t k2 = g->k[2], d2 = g->d[2], s = pl->phases, plen = pl->phase_len;        \
        __m256 acc[NB];                                                                        \
        _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[b] = _mm256_set1_ps(bias);    \
        for (int64_t kh = 0; kh < g->k[1]; kh++) {                                             \
            const float *wr = wp + kh * k2;                                                    \
            for (int64_t kw = 0; kw < k2; kw++) {                                              \
                const __m256 wv = _mm256_set1_ps(wr[kw]);                                      \
                const float *xr = rows[kh] + (kw * d2) % s * plen + (kw * d2) / s + b0 * LANES; \
                _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                         \
                    __m256 xv = _mm256_loadu_ps(xr + b * LANES);                               \
                    acc[b] = _mm256_add_ps(acc[b], _mm256_mul_ps(wv, xv));                     \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++)                                   \
            store_block(yr, (b0 + b) * LANES, g->out[2], acc[b]);                              \
    }
DEFINE_WIDE_BLOCKS(1)
DEFINE_WIDE_BLOCKS(2)
DEFINE_WIDE_BLOCKS(4)
DEFINE_WIDE_BLOCKS(8)

static void wide_plane_run(const float *xp, const float *wp, float bias, float *yp,
                           const ld_window_geom *g, const wide_plane *pl)
{
    float ring[WIDE_MAX_FLOATS];
    int64_t held[WIDE_MAX_FLOATS / 2], row_floats = pl->phases * pl->phase_len;
    const float *rows[WIDE_MAX_FLOATS / 2];
    for (int64_t i = 0; i < pl->ring; i++)
        held[i] = -1;
    for (int64_t oh = 0; oh < g->out[1]; oh++) {
        for (int64_t kh = 0; kh < g->k[1]; kh++) {
            int64_t r = oh * g->s[1] + kh * g->d[1], slot = r % pl->ring;
            if (held[slot] != r) {
                wide_row(xp, g, pl, r, ring + slot * row_floats);
                held[slot] = r;
                int64_t ahead = r + PREFETCH_ROWS - g->pb[1];
                if (ahead >= 0 && ahead < g->in[1])
                    ld_prefetch_floats(xp + ahead * g->in[2], g->in[2]);
            }
            rows[kh] = ring + slot * row_floats;
        }
        float *yr = yp + oh * g->out[2];
        for (int64_t b0 = 0; b0 < pl->blocks;) {
            int64_t left = pl->blocks - b0;
            if (left >= 8)
                wide8(rows, wp, bias, g, pl, b0, yr), b0 += 8;
            else if (left >= 4)
                wide4(rows, wp, bias, g, pl, b0, yr), b0 += 4;
            else if (left >= 2)
                wide2(rows, wp, bias, g, pl, b0, yr), b0 += 2;
            else
                wide1(rows, wp, bias, g, pl, b0, yr), b0 += 1;
        }
    }
}

/* Whether block b (n lanes) is FULL for every kernel column: each lane's
 * input inside [0, in) and, for stride 2, all 16 elements its loads read. */
static bool block_full(const ld_window_geom *g, int64_t b, int64_t n)
{
    int64_t s = g->s[2];
    if (n < LANES || s > 2)
        return false;
    for (int64_t kw = 0; kw < g->k[2]; kw++) {
        int64_t p0 = b * LANES * s - g->pb[2] + kw * g->d[2];
        if (p0 < 0 || p0 + LANES * s > g->in[2])
            return false;
    }
    return true;
}

void ld_depthwise_plane_f32_avx2(const float *xp, const float *wp, float bias, float *yp,
                                 const ld_window_geom *g)
{
    padded_plane pp;
    if (padded_layout(g, &pp) && ld_depthwise_padding_is_neutral(wp, bias, g->k_size)) {
        padded_plane_run(xp, wp, bias, yp, g, &pp);
        return;
    }
    wide_plane wpl;
    if (wide_layout(g, &wpl) && ld_depthwise_padding_is_neutral(wp, bias, g->k_size)) {
        wide_plane_run(xp, wp, bias, yp, g, &wpl);
        return;
    }
    tap_masks masks[MAX_MASKS];
    int64_t k2 = g->k[2], s = g->s[2], blocks = (g->out[2] + LANES - 1) / LANES;
    int64_t full_lo = blocks, full_hi = blocks; /* the run of FULL blocks, [full_lo, full_hi) */
    for (int64_t b = 0; b < blocks; b++) {
        int n = (int)(g->out[2] - b * LANES < LANES ? g->out[2] - b * LANES : LANES);
        for (int64_t kw = 0; kw < k2; kw++)
            masks[b * k2 + kw] = masks_for(b * LANES * s - g->pb[2] + kw * g->d[2], s, n,
                                           g->in[2]);
        if (block_full(g, b, n)) {
            if (full_lo == blocks)
                full_lo = b;
            full_hi = b + 1;
        }
    }
    for (int64_t b = full_lo; b < full_hi; b++) /* one run: the FULL blocks are contiguous */
        if (!block_full(g, b, LANES))
            full_lo = full_hi = blocks;
    const blocks_fn *by_count = blocks_table[s == 1 ? 0 : s == 2 ? 1 : 2];
    const blocks_fn *full = s == 1 ? full_table[0] : full_table[1];
    for (int64_t od = 0; od < g->out[0]; od++)
        for (int64_t oh = 0; oh < g->out[1]; oh++) {
            float *yr = yp + (od * g->out[1] + oh) * g->out[2];
            int64_t id0 = od * g->s[0] - g->pb[0], ih0 = oh * g->s[1] - g->pb[1];
            for (int64_t b0 = 0; b0 < blocks;) {
                if (b0 >= full_lo && b0 < full_hi) {
                    int64_t nb = full_hi - b0 >= 8 ? 8 : full_hi - b0 >= 4 ? 4
                                                     : full_hi - b0 >= 2 ? 2 : 1;
                    full[nb == 8 ? 3 : nb == 4 ? 2 : nb - 1](xp, wp, bias, g, id0, ih0, b0,
                                                             masks, yr);
                    b0 += nb;
                    continue;
                }
                int64_t end = b0 < full_lo ? full_lo : blocks; /* masked up to the next run */
                int64_t nb = end - b0 < MAX_BLOCKS ? end - b0 : MAX_BLOCKS;
                by_count[nb - 1](xp, wp, bias, g, id0, ih0, b0, masks, yr);
                b0 += nb;
            }
        }
}
