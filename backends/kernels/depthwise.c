/* layerdiff — float32 depthwise convolution planes with AVX-512 (see
 * depthwise.h).
 *
 * Why. PaddleOCR det's 3x3 and 5x5 depthwise layers are 4% of its
 * multiply-adds but took 17% of its time in conv.c's portable loop, which
 * updates a whole output row once per kernel tap (every output loaded and
 * stored k*k times). Here up to four vectors of 16 outputs stay in registers
 * across all taps (four independent add chains hide the add latency).
 *
 * Same numbers as the portable loop, bit for bit: each output is its bias
 * plus its taps in kernel order (kd, kh, kw), each a float multiply then a
 * float add (no FMA), and taps falling in the padding are skipped, not
 * multiplied by zero (0 * inf would be NaN, and -0 + +0 would lose the sign).
 * Vector lanes are independent outputs, so lane position never matters.
 * Outputs whose kernel row sticks out of the input row (a few per row edge)
 * are computed one at a time in the same order. Strides: 1 loads
 * contiguously, 2 takes the even elements of two loads, larger ones gather.
 *
 * Stride 1, 3x3 and 5x5 with K/2 columns of left padding and neutral
 * padding (ld_depthwise_padding_is_neutral: finite weights, bias not -0), which are all
 * of det's stride-1 layers, slide rows instead (slide##K##x##NB): each
 * input row is loaded once per 16 columns, its K column shifts are built
 * with valignd and each shift feeds the K output rows that row reaches,
 * K x NB sums held in registers across the plane. The blocks it replaced
 * (FULL rows of a zero-padded copy, or row3_s1 and masked edges) ran ~1.3
 * cycles per tap vector on the Zen 5 against ~0.5 for the adders, likely
 * because every tap was an unaligned 64-byte load (4 of 5 columns split
 * cache lines); these run ~1 (the 25 weights of 5x5 come from memory, and
 * the 20-wide rows waste 12 of 32 lanes).
 * Harness (a loop of ld_depthwise_plane_f32_fast over the planes), 1
 * thread, CPU time, medians of 7 interleaved best-of-30, Zen 5: 384
 * planes 20x20 5x5 0.18 -> 0.096 ms, 192 40x40 5x5 0.29 -> 0.13, 96
 * 80x80 3x3 0.26 -> 0.085, 48 160x160 3x3 0.40 -> 0.23, 16 320x320 3x3
 * 0.48 -> 0.31 (these two read and write 10-13 MB a layer). The other
 * paths stay for other geometries and special values.
 *
 * depthwise_avx2.c is the 8-lane port for AVX2 CPUs; this file also holds
 * the dispatch (AVX-512 > AVX2 > conv.c's loop) and its test switch. On
 * Zen 3, AVX2, det's 14 depthwise nodes (1 thread, per-node profile,
 * interleaved A/B, medians of 14) went 49.4 -> 22.8 ms with the AVX2 port
 * (docs/architecture.md has the per-layer figures). */
#include "backends/kernels/depthwise.h"
#include "backends/kernels/conv_common.h"

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define LANES 16
#define MAX_BLOCKS 4
/* Per-plane mask table limit (blocks per row x kernel width); wider planes
 * use the portable loop. */
#define MAX_MASKS 4096

/* For one block of outputs and one kernel column: which lanes add this tap
 * (the input position is inside the row and the output exists), and which
 * elements to load (one load, or two for stride 2). */
typedef struct tap_masks {
    __mmask16 add, lo, hi;
} tap_masks;

static __mmask16 bits(int64_t from, int64_t to) /* bits [from, to) of 0..15 */
{
    from = from < 0 ? 0 : from;
    to = to > LANES ? LANES : to;
    return (__mmask16)(to > from ? ((1u << to) - 1) & ~((1u << from) - 1) : 0);
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
    if (s == 2) { /* elements j of the 32 loaded from p0: j = 2 * lane */
        int64_t jf = 2 * first, je = 2 * (end < n ? end : n) - 1;
        m.lo = bits(jf, je);
        m.hi = bits(jf - LANES, je - LANES);
    }
    return m;
}

/* The inputs of a block's lanes for one tap: x at xk + lane * S (S 0: s).
 * FULL: every lane's tap is inside the row and, for stride 2, so are the
 * odd elements between them: plain loads, no masks. */
__attribute__((target("avx512f"), always_inline)) static inline __m512
load_lanes(const float *xk, int S, int64_t s, const tap_masks *m, int FULL)
{
    if (S == 1)
        return FULL ? _mm512_loadu_ps(xk) : _mm512_maskz_loadu_ps(m->add, xk);
    if (S == 2) {
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                              4, 2, 0);
        __m512 lo = FULL ? _mm512_loadu_ps(xk) : _mm512_maskz_loadu_ps(m->lo, xk);
        __m512 hi = FULL ? _mm512_loadu_ps(xk + LANES)
                         : _mm512_maskz_loadu_ps(m->hi, xk + LANES);
        return _mm512_permutex2var_ps(lo, even, hi);
    }
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32((int)s));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m->add, idx, xk, 4);
}

/* NB blocks of one output row from block b0 for stride S (0: any), masks at
 * masks[(b0 + b) * k2 + kw]. A lane whose tap lies in the padding keeps its
 * sum (masked add): the tap is skipped. FULL blocks (see load_lanes) have
 * every lane of every tap inside the row: unmasked loads and adds, the same
 * arithmetic. */
#define DEFINE_BLOCKS(NB, S, FULL, NAME)                                                       \
    __attribute__((target("avx512f"))) static void NAME(                                       \
        const float *xp, const float *wp, float bias, const ld_window_geom *g, int64_t id0,    \
        int64_t ih0, int64_t b0, const tap_masks *masks, float *yr)                            \
    {                                                                                          \
        const int64_t s = S ? S : g->s[2], k2 = g->k[2], d2 = g->d[2], in1 = g->in[1];         \
        const int64_t in2 = g->in[2], step = LANES * s;                                        \
        __m512 acc[NB];                                                                        \
        _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[b] = _mm512_set1_ps(bias);    \
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
                    const __m512 wv = _mm512_set1_ps(wr[kw]);                                  \
                    _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                     \
                        const tap_masks *m = FULL ? mr : &mr[b * k2 + kw];                     \
                        __m512 xv = load_lanes(xr + b * step + kw * d2, S, s, m, FULL);        \
                        __m512 t = _mm512_mul_ps(wv, xv);                                      \
                        acc[b] = FULL ? _mm512_add_ps(acc[b], t)                               \
                                      : _mm512_mask_add_ps(acc[b], m->add, acc[b], t);         \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                                 \
            int64_t ow0 = (b0 + b) * LANES;                                                    \
            _mm512_mask_storeu_ps(yr + ow0, bits(0, g->out[2] - ow0), acc[b]);                 \
        }                                                                                      \
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

/* The masked blocks eb[0, NE) (a plane's left and right edge blocks) of
 * EDGE_ROWS output rows from oh0 of a 2-D plane, every row's taps inside
 * the plane vertically: EDGE_ROWS * NE independent sums. One edge block at
 * a time was a single add chain, waiting on each add's latency (9 or 25 in
 * a row): on the Zen 5 the two edge blocks of a 320-wide row took ~20% of
 * a 3x3 stride-1 plane's time and ~35% at stride 2. Per output the same
 * taps in the same order, skipped where masked, as blocks##NB. */
#define EDGE_ROWS 4
#define DEFINE_EDGES(NE, S)                                                                    \
    __attribute__((target("avx512f"))) static void edges##NE##_s##S(                           \
        const float *xp, const float *wp, float bias, const ld_window_geom *g, int64_t oh0,    \
        const int64_t *eb, const tap_masks *masks, float *yp)                                  \
    {                                                                                          \
        const int64_t k2 = g->k[2], d2 = g->d[2], in2 = g->in[2], step = LANES * S;            \
        __m512 acc[EDGE_ROWS][NE];                                                             \
        _Pragma("GCC unroll 8") for (int r = 0; r < EDGE_ROWS; r++)                            \
            _Pragma("GCC unroll 8") for (int e = 0; e < NE; e++) acc[r][e] =                   \
                _mm512_set1_ps(bias);                                                          \
        for (int64_t kh = 0; kh < g->k[1]; kh++) {                                             \
            const float *wr = wp + kh * k2;                                                    \
            const float *x0 = xp + (oh0 * g->s[1] - g->pb[1] + kh * g->d[1]) * in2 - g->pb[2]; \
            for (int64_t kw = 0; kw < k2; kw++) {                                              \
                const __m512 wv = _mm512_set1_ps(wr[kw]);                                      \
                _Pragma("GCC unroll 8") for (int e = 0; e < NE; e++) {                         \
                    const tap_masks *m = &masks[eb[e] * k2 + kw];                              \
                    const float *xe = x0 + eb[e] * step + kw * d2;                             \
                    _Pragma("GCC unroll 8") for (int r = 0; r < EDGE_ROWS; r++) {              \
                        __m512 xv = load_lanes(xe + r * g->s[1] * in2, S, S, m, 0);            \
                        acc[r][e] = _mm512_mask_add_ps(acc[r][e], m->add, acc[r][e],           \
                                                       _mm512_mul_ps(wv, xv));                 \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 8") for (int r = 0; r < EDGE_ROWS; r++) {                          \
            float *yr = yp + (oh0 + r) * g->out[2];                                            \
            _Pragma("GCC unroll 8") for (int e = 0; e < NE; e++) {                             \
                int64_t ow0 = eb[e] * LANES;                                                   \
                _mm512_mask_storeu_ps(yr + ow0, bits(0, g->out[2] - ow0), acc[r][e]);          \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_EDGES(1, 1)
DEFINE_EDGES(2, 1)
DEFINE_EDGES(1, 2)
DEFINE_EDGES(2, 2)

/* The FULL blocks [b_lo, b_hi) of one output row of a 3x3 kernel (no
 * dilation) whose three input rows r0-r2 (already offset by the left
 * padding) are inside the plane: the nine weights stay in registers and the
 * taps are unrolled. The generic FULL blocks loop over kh and kw around
 * 8 blocks, and at 3x3 that loop's own work was about as much as the
 * arithmetic (~18-25 cycles per 16 outputs on the Zen 5 against ~5 for
 * the adds and multiplies). Same taps, same order, as blocks##NB. */
#define DEFINE_ROW3(S)                                                                         \
    __attribute__((target("avx512f"))) static void row3_s##S(                                  \
        const float *r0, const float *r1, const float *r2, const float *wp, float bias,        \
        int64_t b_lo, int64_t b_hi, int64_t out_w, float *yr)                                  \
    {                                                                                          \
        const int64_t step = LANES * S;                                                        \
        __m512 w[9];                                                                           \
        _Pragma("GCC unroll 9") for (int t = 0; t < 9; t++) w[t] = _mm512_set1_ps(wp[t]);      \
        const float *rows[3] = {r0, r1, r2};                                                   \
        int64_t b = b_lo;                                                                      \
        for (; b + 4 <= b_hi; b += 4) {                                                        \
            __m512 acc[4];                                                                     \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) acc[j] = _mm512_set1_ps(bias); \
            _Pragma("GCC unroll 3") for (int kh = 0; kh < 3; kh++)                             \
                _Pragma("GCC unroll 3") for (int kw = 0; kw < 3; kw++)                         \
                    _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                      \
                        __m512 xv = load_lanes(rows[kh] + (b + j) * step + kw, S, S, NULL, 1); \
                        acc[j] = _mm512_add_ps(acc[j], _mm512_mul_ps(w[kh * 3 + kw], xv));     \
                    }                                                                          \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) {                              \
                int64_t ow0 = (b + j) * LANES;                                                 \
                _mm512_mask_storeu_ps(yr + ow0, bits(0, out_w - ow0), acc[j]);                 \
            }                                                                                  \
        }                                                                                      \
        for (; b < b_hi; b++) {                                                                \
            __m512 acc = _mm512_set1_ps(bias);                                                 \
            _Pragma("GCC unroll 3") for (int kh = 0; kh < 3; kh++)                             \
                _Pragma("GCC unroll 3") for (int kw = 0; kw < 3; kw++) {                       \
                    __m512 xv = load_lanes(rows[kh] + b * step + kw, S, S, NULL, 1);           \
                    acc = _mm512_add_ps(acc, _mm512_mul_ps(w[kh * 3 + kw], xv));               \
                }                                                                              \
            int64_t ow0 = b * LANES;                                                           \
            _mm512_mask_storeu_ps(yr + ow0, bits(0, out_w - ow0), acc);                        \
        }                                                                                      \
    }
DEFINE_ROW3(1)

typedef void (*edges_fn)(const float *, const float *, float, const ld_window_geom *, int64_t,
                         const int64_t *, const tap_masks *, float *);
/* [stride 1, 2][edge blocks - 1] */
static const edges_fn edges_table[2][2] = {{edges1_s1, edges2_s1}, {edges1_s2, edges2_s2}};

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

bool ld_depthwise_avx512_available(void)
{
    static atomic_int known; /* 0: not asked yet, 1: no, 2: yes (races write the same) */
    int v = atomic_load(&known);
    if (v == 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("avx512f") ? 2 : 1;
        atomic_store(&known, v);
    }
    return v == 2;
}

bool ld_depthwise_level_supported(ld_depthwise_level level)
{
    switch (level) {
    case LD_DEPTHWISE_NONE:
        return true;
    case LD_DEPTHWISE_AVX2: {
        static atomic_int known; /* as ld_depthwise_avx512_available */
        int v = atomic_load(&known);
        if (v == 0) {
            __builtin_cpu_init();
            v = __builtin_cpu_supports("avx2") ? 2 : 1;
            atomic_store(&known, v);
        }
        return v == 2;
    }
    case LD_DEPTHWISE_AVX512:
        return ld_depthwise_avx512_available();
    default:
        return false;
    }
}

static atomic_int forced_level = LD_DEPTHWISE_AUTO;

ld_depthwise_level ld_depthwise_level_active(void)
{
    int f = atomic_load(&forced_level);
    if (f != LD_DEPTHWISE_AUTO)
        return (ld_depthwise_level)f;
    return ld_depthwise_avx512_available() ? LD_DEPTHWISE_AVX512
           : ld_depthwise_level_supported(LD_DEPTHWISE_AVX2) ? LD_DEPTHWISE_AVX2
                                                              : LD_DEPTHWISE_NONE;
}

bool ld_depthwise_force_level(ld_depthwise_level level)
{
    if (level != LD_DEPTHWISE_AUTO && !ld_depthwise_level_supported(level))
        return false;
    atomic_store(&forced_level, (int)level);
    return true;
}

bool ld_depthwise_plane_f32_fast(const float *xp, const float *wp, float bias, float *yp,
                                 const ld_window_geom *g)
{
    switch (ld_depthwise_level_active()) {
    case LD_DEPTHWISE_AVX512:
        if (!ld_depthwise_avx512_fits(g))
            return false;
        ld_depthwise_plane_f32_avx512(xp, wp, bias, yp, g);
        return true;
    case LD_DEPTHWISE_AVX2:
        if (!ld_depthwise_avx2_fits(g))
            return false;
        ld_depthwise_plane_f32_avx2(xp, wp, bias, yp, g);
        return true;
    default:
        return false;
    }
}

bool ld_depthwise_avx512_fits(const ld_window_geom *g)
{
    int64_t blocks = (g->out[2] + LANES - 1) / LANES;
    return g->k[2] <= MAX_MASKS && blocks * g->k[2] <= MAX_MASKS && g->s[2] <= (1 << 20);
}

/* --- narrow planes ------------------------------------------------------------------
 * Planes of a few vectors per row are mostly edge blocks, which run 2x
 * slower masked. When the plane's weights are finite and its bias is not
 * -0, adding a padding tap (w * 0 = +-0) to a sum leaves it unchanged (the
 * sum, starting at the bias, never becomes -0: x + y is -0 only when both
 * are), so a zero-padded copy of the plane computes the same bits with FULL
 * blocks only. Each plane is copied into a per-call stack buffer. */
#define PADDED_MAX_FLOATS 12288
#define PADDED_MAX_BLOCKS 7

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
    /* every element a FULL load of the last block reads (32 at stride 2) */
    pp->row_len = blocks * LANES * s + (g->k[2] - 1) * g->d[2] + LANES;
    if (pp->row_len < g->pb[2] + g->in[2])
        pp->row_len = g->pb[2] + g->in[2];
    pp->g.in[1] = pp->rows;
    pp->g.in[2] = pp->row_len;
    pp->g.pb[1] = pp->g.pb[2] = pp->g.pe[1] = pp->g.pe[2] = 0;
    return pp->rows * pp->row_len <= PADDED_MAX_FLOATS;
}

bool ld_depthwise_padding_is_neutral(const float *wp, float bias, int64_t k_size)
{
    if (bias == 0.0f && signbit(bias))
        return false;
    for (int64_t i = 0; i < k_size; i++)
        if (!isfinite(wp[i]))
            return false;
    return true;
}

/* NR output rows [oh0, oh0 + NR) x NB blocks from b0 of a padded plane
 * (pp->g: no padding): NR * NB independent sums, so that short rows still
 * keep enough additions in flight (one row of 2-3 blocks waited on each
 * add's latency, 25 in a row for a 5x5 kernel). Per output the same taps
 * in the same order as the other paths. */
#define DEFINE_PADDED_ROWS(NB, NR, S)                                                          \
    __attribute__((target("avx512f"))) static void padded##NB##x##NR##_s##S(                   \
        const float *buf, const float *wp, float bias, const ld_window_geom *g, int64_t oh0,   \
        int64_t b0, float *yp)                                                                 \
    {                                                                                          \
        const int64_t k2 = g->k[2], d2 = g->d[2], in2 = g->in[2], step = LANES * S;            \
        __m512 acc[NR][NB];                                                                    \
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++)                                   \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[r][b] =                   \
                _mm512_set1_ps(bias);                                                          \
        for (int64_t kh = 0; kh < g->k[1]; kh++) {                                             \
            const float *wr = wp + kh * k2;                                                    \
            const float *x0 = buf + (oh0 * g->s[1] + kh * g->d[1]) * in2 + b0 * step;          \
            for (int64_t kw = 0; kw < k2; kw++) {                                              \
                const __m512 wv = _mm512_set1_ps(wr[kw]);                                      \
                _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                         \
                    const float *xr = x0 + r * g->s[1] * in2 + kw * d2;                        \
                    _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                     \
                        __m512 xv = load_lanes(xr + b * step, S, S, NULL, 1);                  \
                        acc[r][b] = _mm512_add_ps(acc[r][b], _mm512_mul_ps(wv, xv));           \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                                 \
            float *yr = yp + (oh0 + r) * g->out[2];                                            \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                             \
                int64_t ow0 = (b0 + b) * LANES;                                                \
                _mm512_mask_storeu_ps(yr + ow0, bits(0, g->out[2] - ow0), acc[r][b]);          \
            }                                                                                  \
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

__attribute__((target("avx512f"))) static void
padded_plane_run(const float *xp, const float *wp, float bias, float *yp,
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

/* --- stride 1, sliding rows -----------------------------------------------------------
 * Stride 1, no dilation, a KxK kernel (3 or 5) with K/2 columns of padding
 * on the left, whose padding is neutral (ld_depthwise_padding_is_neutral): the plane is
 * walked one input row at a time, and each input row is added into the K
 * output rows it reaches (output row o takes kernel row kh = v + pb - o of
 * input row v). Per input row and block of 16 columns the row is loaded
 * once (unaligned, masked at the right edge: the lanes past the row read
 * zero) and the K column shifts are built with valignd from it and its
 * neighbours (zero outside the row), so each shifted vector feeds K
 * multiply-adds instead of one load each. Output rows live in K slots
 * (slot (o - pb) mod K), the row loop unrolled K times so that the slots
 * are registers. Per output its taps arrive in (kh, kw) order: kh grows
 * with v, kw is the inner order within a row. Padding taps are zero lanes
 * or skipped rows, the same bits when the padding is neutral. */
__attribute__((target("avx512f"), always_inline)) static inline __m512
shifted(__m512 lo, __m512 mid, __m512 hi, int t) /* x[16b + lane + t], t in [-2, 2] */
{
    switch (t) {
    case -2:
        return _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(mid), _mm512_castps_si512(lo), 14));
    case -1:
        return _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(mid), _mm512_castps_si512(lo), 15));
    case 1:
        return _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(hi), _mm512_castps_si512(mid), 1));
    case 2:
        return _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(hi), _mm512_castps_si512(mid), 2));
    default:
        return mid;
    }
}

/* Output rows [o_lo, o_hi) x columns [16 * b0, 16 * (b0 + NB)) of a plane,
 * K 3 or 5: K * NB independent sums. v walks the input rows from o_lo - pb
 * (negative: padding, no adds); slot (v - vs - kh) mod K holds output
 * v + pb - kh. The first and last K - 1 rows reach outputs outside the
 * range: SLIDE_ROW(.., 1) checks each kernel row there, (.., 0) runs in
 * between. Full blocks load and store unmasked (the masked ones stood out in
 * profiles of det's 320-wide layer on the Zen 5). With 15 or
 * more sums GCC emits each sum's K adds of a row back to back, one chain
 * at a time (det's 40-wide 5x5 layer 0.175 ms); the empty asm after each
 * add keeps the source order, every sum advancing by one tap in turn
 * (0.150 ms); with fewer sums it measured slightly slower. */
#define SLIDE_ROW(K, NB, CHECKED)                                                              \
    do {                                                                                       \
        if (v > vs) /* output v + pb starts: its slot held output v + pb - K */                \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[u][b] =                   \
                _mm512_set1_ps(bias);                                                          \
        if (v >= 0 && v < in1) {                                                               \
            const float *xr = xp + v * in2 + (b0 - 1) * LANES;                                 \
            __m512 a[NB + 2];                                                                  \
            _Pragma("GCC unroll 8") for (int j = 0; j < NB + 2; j++) a[j] =                    \
                lm[j] == 0xFFFF ? _mm512_loadu_ps(xr + j * LANES)                              \
                                : _mm512_maskz_loadu_ps(lm[j], xr + j * LANES);                \
            _Pragma("GCC unroll 8") for (int kw = 0; kw < K; kw++)                             \
                _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                         \
                    __m512 xs = shifted(a[b], a[b + 1], a[b + 2], kw - K / 2);                 \
                    _Pragma("GCC unroll 8") for (int kh = 0; kh < K; kh++) {                   \
                        if (CHECKED && (v + pb - kh < o_lo || v + pb - kh >= o_hi))            \
                            continue;                                                          \
                        __m512 t = _mm512_mul_ps(_mm512_set1_ps(wp[kh * K + kw]), xs);         \
                        __m512 *ac = &acc[(u - kh + K) % K][b];                                \
                        *ac = _mm512_add_ps(*ac, t);                                           \
                        if (K * NB >= 15)                                                      \
                            __asm__("" : "+v"(*ac));                                           \
                    }                                                                          \
                }                                                                              \
        }                                                                                      \
        int64_t o = v + pb - (K - 1); /* complete after this row */                            \
        if (o >= o_lo && o < o_hi)                                                             \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) {                             \
                float *y = yp + o * out2 + (b0 + b) * LANES;                                   \
                if (sm[b] == 0xFFFF) /* masked stores are slow on the Zen 5 */                 \
                    _mm512_storeu_ps(y, acc[(u + 1) % K][b]);                                  \
                else                                                                           \
                    _mm512_mask_storeu_ps(y, sm[b], acc[(u + 1) % K][b]);                      \
            }                                                                                  \
    } while (0)

#define DEFINE_SLIDE(K, NB, ...)                                                               \
    __attribute__((target("avx512f") __VA_ARGS__)) static void slide##K##x##NB(                \
        const float *restrict xp, const float *restrict wp, float bias,                        \
        const ld_window_geom *restrict g, int64_t o_lo, int64_t o_hi, int64_t b0,              \
        float *restrict yp)                                                                    \
    {                                                                                          \
        const int64_t in1 = g->in[1], in2 = g->in[2], out2 = g->out[2], pb = g->pb[1];         \
        const int64_t vs = o_lo - pb, v_end = o_hi - pb + K - 1;                               \
        __mmask16 lm[NB + 2], sm[NB]; /* load masks of blocks b0 - 1 .. b0 + NB, stores */     \
        for (int j = 0; j < NB + 2; j++)                                                       \
            lm[j] = b0 - 1 + j < 0 ? 0 : bits(0, in2 - (b0 - 1 + j) * LANES);                  \
        for (int j = 0; j < NB; j++)                                                           \
            sm[j] = bits(0, out2 - (b0 + j) * LANES);                                          \
        __m512 acc[K][NB];                                                                     \
        _Pragma("GCC unroll 8") for (int r = 0; r < K; r++)                                    \
            _Pragma("GCC unroll 8") for (int b = 0; b < NB; b++) acc[r][b] =                   \
                _mm512_set1_ps(bias);                                                          \
        for (int64_t v0 = vs; v0 < v_end; v0 += K)                                             \
            _Pragma("GCC unroll 8") for (int u = 0; u < K; u++) {                              \
                const int64_t v = v0 + u;                                                      \
                if (v >= v_end)                                                                \
                    break;                                                                     \
                if (v - vs >= K - 1 && v + pb < o_hi)                                          \
                    SLIDE_ROW(K, NB, 0);                                                       \
                else                                                                           \
                    SLIDE_ROW(K, NB, 1);                                                       \
            }                                                                                  \
    }
/* 5x5: GCC's scheduling before register allocation (off at -O2) interleaves
 * the sums' chains; det's 20x20 layer 0.111 -> 0.096 ms (harness, medians
 * of 9 interleaved), the 40x40 one unchanged; 3x3 measured a little slower
 * with it. Clang does not know the attribute. */
#if defined(__GNUC__) && !defined(__clang__)
#define SLIDE5_ATTR , optimize("schedule-insns", "sched-pressure")
#else
#define SLIDE5_ATTR
#endif
DEFINE_SLIDE(3, 1, )
DEFINE_SLIDE(3, 2, )
DEFINE_SLIDE(3, 3, )
DEFINE_SLIDE(3, 4, )
DEFINE_SLIDE(3, 5, )
DEFINE_SLIDE(5, 1, SLIDE5_ATTR)
DEFINE_SLIDE(5, 2, SLIDE5_ATTR)
DEFINE_SLIDE(5, 3, SLIDE5_ATTR)
DEFINE_SLIDE(5, 4, SLIDE5_ATTR)

typedef void (*slide_fn)(const float *, const float *, float, const ld_window_geom *, int64_t,
                         int64_t, int64_t, float *);
/* blocks per strip: 3x3 up to 5 (15 sums, 9 weights and 7 input vectors
 * fit the 32 registers), 5x5 up to 4 (its 25 weights come from memory) */
#define SLIDE_MAX_BLOCKS 5
static const slide_fn slide_table[2][SLIDE_MAX_BLOCKS] = {
    {slide3x1, slide3x2, slide3x3, slide3x4, slide3x5},
    {slide5x1, slide5x2, slide5x3, slide5x4, NULL},
};

/* Whether the sliding rows take plane g (before the weights are known). */
static bool slide_fits(const ld_window_geom *g)
{
    int64_t k = g->k[2];
    return g->in[0] == 1 && g->k[0] == 1 && g->out[0] == 1 && g->pb[0] == 0 &&
           (k == 3 || k == 5) && g->k[1] == k && g->s[1] == 1 && g->s[2] == 1 &&
           g->d[1] == 1 && g->d[2] == 1 && g->pb[2] == k / 2 && g->pe[2] <= k - 1 &&
           g->pb[1] <= k - 1 && g->pe[1] <= k - 1 && g->out[1] >= 1 && g->out[2] >= 1;
}

/* The plane in strips of whole output rows and up to 5 (3x3) or 4 (5x5)
 * blocks, the strips as even as possible (5x5, 5 blocks: 3 + 2, not 4 + 1:
 * one block alone is only K sums). det's 80-wide 3x3 layer took 0.19 ms
 * in strips of 3 + 2 blocks, 0.16 in one of 5. Each strip walks the whole plane: cutting
 * it into bands of rows that stay in L1 (32 KB) measured slower on det's
 * 160- and 320-wide planes (0.28 against 0.25 ms, 0.42 against 0.35). */
__attribute__((target("avx512f"))) static void slide_plane(const float *xp, const float *wp,
                                                            float bias, float *yp,
                                                            const ld_window_geom *g)
{
    int64_t blocks = (g->out[2] + LANES - 1) / LANES;
    int64_t mx = g->k[2] == 3 ? 5 : 4;
    int64_t strips = (blocks + mx - 1) / mx;
    const slide_fn *by_blocks = slide_table[g->k[2] == 3 ? 0 : 1];
    for (int64_t i = 0, b0 = 0; i < strips; i++) {
        int64_t nb = (blocks - b0) / (strips - i) + ((blocks - b0) % (strips - i) != 0);
        by_blocks[nb - 1](xp, wp, bias, g, 0, g->out[1], b0, yp);
        b0 += nb;
    }
}

/* Whether block b (n lanes) is FULL for every kernel column: each lane's
 * input inside [0, in) and, for stride 2, all 32 elements its loads read. */
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

__attribute__((target("avx512f"))) void ld_depthwise_plane_f32_avx512(const float *xp,
                                                                      const float *wp,
                                                                      float bias, float *yp,
                                                                      const ld_window_geom *g)
{
    if (ld_depthwise_stride2_avx512(xp, wp, bias, yp, g)) /* depthwise_stride2.c */
        return;
    if (slide_fits(g) && ld_depthwise_padding_is_neutral(wp, bias, g->k_size)) {
        slide_plane(xp, wp, bias, yp, g);
        return;
    }
    padded_plane pp;
    if (padded_layout(g, &pp) && ld_depthwise_padding_is_neutral(wp, bias, g->k_size)) {
        padded_plane_run(xp, wp, bias, yp, g, &pp);
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
    /* the edge blocks of EDGE_ROWS rows at once (edges##NE): a 2-D plane
     * with at most two masked blocks per row, stride 1 or 2 */
    int64_t eb[2], n_edges = 0;
    for (int64_t b = 0; b < blocks && n_edges <= 2; b++)
        if (b < full_lo || b >= full_hi) {
            if (n_edges < 2)
                eb[n_edges] = b;
            n_edges++;
        }
    bool edge_rows = g->out[0] == 1 && g->k[0] == 1 && g->pb[0] == 0 && g->in[0] == 1 &&
                     (s == 1 || s == 2) && n_edges >= 1 && n_edges <= 2;
    /* stride 1 only: at stride 2 (two loads and a permute per tap) the
       unrolled row measured slower on det's 32-channel 320-wide layer */
    bool row3 = s == 1 && g->s[1] == 1 && g->k[1] == 3 && g->k[2] == 3 && g->d[1] == 1 &&
                g->d[2] == 1;
    /* output rows whose taps are all inside the plane vertically: [oh_lo, oh_hi) */
    int64_t oh_lo = (g->pb[1] + g->s[1] - 1) / g->s[1], oh_hi = 0;
    if (g->in[1] - (g->k[1] - 1) * g->d[1] + g->pb[1] > 0)
        oh_hi = (g->in[1] - (g->k[1] - 1) * g->d[1] + g->pb[1] - 1) / g->s[1] + 1;
    oh_hi = oh_hi < g->out[1] ? oh_hi : g->out[1];
    for (int64_t od = 0; od < g->out[0]; od++)
        for (int64_t oh = 0; oh < g->out[1]; oh++) {
            float *yr = yp + (od * g->out[1] + oh) * g->out[2];
            int64_t id0 = od * g->s[0] - g->pb[0], ih0 = oh * g->s[1] - g->pb[1];
            /* Stride 2 reads two new input rows per output row, twice the
               stream of stride 1, and det's 32-channel 320-wide plane comes
               from memory: 1.0-1.5 ms a layer with cold caches, 0.70-0.94
               with the rows of output row oh + 4 prefetched (harness, 1
               thread; 0.62-0.67 warm either way). */
            if (edge_rows && g->s[1] == 2) {
                int64_t last = (oh + 4) * 2 - g->pb[1] + (g->k[1] - 1) * g->d[1];
                for (int64_t r = last - 1; r <= last; r++)
                    if (r >= 0 && r < g->in[1])
                        ld_prefetch_floats(xp + r * g->in[2], g->in[2]);
            }
            /* in a group of EDGE_ROWS interior rows, the first row computes
               the group's edge blocks, every row its FULL blocks */
            bool grouped = edge_rows && oh >= oh_lo &&
                           oh_lo + (oh_hi - oh_lo) / EDGE_ROWS * EDGE_ROWS > oh;
            if (grouped && (oh - oh_lo) % EDGE_ROWS == 0)
                edges_table[s - 1][n_edges - 1](xp, wp, bias, g, oh, eb, masks, yp);
            if (grouped && row3) {
                const float *r0 = xp + ih0 * g->in[2] - g->pb[2];
                row3_s1(r0, r0 + g->in[2], r0 + 2 * g->in[2], wp, bias, full_lo, full_hi,
                        g->out[2], yr);
                continue;
            }
            for (int64_t b0 = grouped ? full_lo : 0; b0 < (grouped ? full_hi : blocks);) {
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
