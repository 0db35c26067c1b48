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
 * contiguously, 2 takes the even elements of two loads, larger ones gather. */
#include "backends/kernels/depthwise.h"

#include <immintrin.h>
#include <stdatomic.h>

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

/* The inputs of a block's lanes for one tap: x at xk + lane * S (S 0: s). */
__attribute__((target("avx512f"), always_inline)) static inline __m512
load_lanes(const float *xk, int S, int64_t s, const tap_masks *m)
{
    if (S == 1)
        return _mm512_maskz_loadu_ps(m->add, xk);
    if (S == 2) {
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                              4, 2, 0);
        __m512 lo = _mm512_maskz_loadu_ps(m->lo, xk);
        __m512 hi = _mm512_maskz_loadu_ps(m->hi, xk + LANES);
        return _mm512_permutex2var_ps(lo, even, hi);
    }
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        _mm512_set1_epi32((int)s));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m->add, idx, xk, 4);
}

/* NB blocks of one output row from block b0 for stride S (0: any), masks at
 * masks[(b0 + b) * k2 + kw]. A lane whose tap lies in the padding keeps its
 * sum (masked add): the tap is skipped. */
#define DEFINE_BLOCKS(NB, S)                                                                   \
    __attribute__((target("avx512f"))) static void blocks##NB##_s##S(                          \
        const float *xp, const float *wp, float bias, const ld_window_geom *g, int64_t id0,    \
        int64_t ih0, int64_t b0, const tap_masks *masks, float *yr)                            \
    {                                                                                          \
        const int64_t s = S ? S : g->s[2], k2 = g->k[2], d2 = g->d[2], in1 = g->in[1];         \
        const int64_t in2 = g->in[2], step = LANES * s;                                        \
        __m512 acc[NB];                                                                        \
        _Pragma("GCC unroll 4") for (int b = 0; b < NB; b++) acc[b] = _mm512_set1_ps(bias);    \
        for (int64_t kd = 0; kd < g->k[0]; kd++) {                                             \
            int64_t id = id0 + kd * g->d[0];                                                   \
            for (int64_t kh = 0; id >= 0 && id < g->in[0] && kh < g->k[1]; kh++) {             \
                int64_t ih = ih0 + kh * g->d[1];                                               \
                if (ih < 0 || ih >= in1)                                                       \
                    continue;                                                                  \
                const float *xr = xp + (id * in1 + ih) * in2 - g->pb[2] + b0 * step;           \
                const float *wr = wp + (kd * g->k[1] + kh) * k2;                               \
                const tap_masks *mr = masks + b0 * k2;                                         \
                for (int64_t kw = 0; kw < k2; kw++) {                                          \
                    const __m512 wv = _mm512_set1_ps(wr[kw]);                                  \
                    _Pragma("GCC unroll 4") for (int b = 0; b < NB; b++) {                     \
                        const tap_masks *m = &mr[b * k2 + kw];                                 \
                        __m512 xv = load_lanes(xr + b * step + kw * d2, S, s, m);              \
                        acc[b] = _mm512_mask_add_ps(acc[b], m->add, acc[b],                    \
                                                    _mm512_mul_ps(wv, xv));                    \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 4") for (int b = 0; b < NB; b++) {                                 \
            int64_t ow0 = (b0 + b) * LANES;                                                    \
            _mm512_mask_storeu_ps(yr + ow0, bits(0, g->out[2] - ow0), acc[b]);                 \
        }                                                                                      \
    }

#define DEFINE_BLOCKS_S(S) DEFINE_BLOCKS(1, S) DEFINE_BLOCKS(2, S) DEFINE_BLOCKS(3, S) \
    DEFINE_BLOCKS(4, S)
DEFINE_BLOCKS_S(1)
DEFINE_BLOCKS_S(2)
DEFINE_BLOCKS_S(0)

typedef void (*blocks_fn)(const float *, const float *, float, const ld_window_geom *, int64_t,
                          int64_t, int64_t, const tap_masks *, float *);

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

bool ld_depthwise_avx512_fits(const ld_window_geom *g)
{
    int64_t blocks = (g->out[2] + LANES - 1) / LANES;
    return g->k[2] <= MAX_MASKS && blocks * g->k[2] <= MAX_MASKS && g->s[2] <= (1 << 20);
}

__attribute__((target("avx512f"))) void ld_depthwise_plane_f32_avx512(const float *xp,
                                                                      const float *wp,
                                                                      float bias, float *yp,
                                                                      const ld_window_geom *g)
{
    tap_masks masks[MAX_MASKS];
    int64_t k2 = g->k[2], s = g->s[2], blocks = (g->out[2] + LANES - 1) / LANES;
    for (int64_t b = 0; b < blocks; b++) {
        int n = (int)(g->out[2] - b * LANES < LANES ? g->out[2] - b * LANES : LANES);
        for (int64_t kw = 0; kw < k2; kw++)
            masks[b * k2 + kw] = masks_for(b * LANES * s - g->pb[2] + kw * g->d[2], s, n,
                                           g->in[2]);
    }
    const blocks_fn *by_count = blocks_table[s == 1 ? 0 : s == 2 ? 1 : 2];
    for (int64_t od = 0; od < g->out[0]; od++)
        for (int64_t oh = 0; oh < g->out[1]; oh++) {
            float *yr = yp + (od * g->out[1] + oh) * g->out[2];
            int64_t id0 = od * g->s[0] - g->pb[0], ih0 = oh * g->s[1] - g->pb[1];
            for (int64_t b0 = 0; b0 < blocks; b0 += MAX_BLOCKS) {
                int64_t nb = blocks - b0 < MAX_BLOCKS ? blocks - b0 : MAX_BLOCKS;
                by_count[nb - 1](xp, wp, bias, g, id0, ih0, b0, masks, yr);
            }
        }
}
