/* layerdiff — float32 direct convolution with AVX-512 (see conv_direct.h).
 *
 * Why. PaddleOCR det's 3x3 convolutions with 96 input and 24 output
 * channels are half of its multiply-adds; through im2col and OpenBLAS they
 * ran at ~105 GFLOP/s (24 output channels are a poor GEMM shape: a single
 * in-cache cblas_sgemm of 24x2400x864 peaks at ~116) plus the im2col copy.
 * Its small convolutions (K = 12-32) were memory-bound GEMMs at 30-80.
 *
 * How. The input is first copied once into rows of all channels, zero
 * padding included: xp[padded row][c][phase][column / stride] (stride-2
 * columns split into even and odd phases). Reading a tile's inputs straight
 * from NCHW planes was 2.5x slower on 160x160 planes: their 100 KiB stride
 * puts every channel's row in the same L1 set. A tile is MB output channels
 * x NV vectors of 16 consecutive outputs of one output row, held in
 * MB*NV <= 24 zmm accumulators while the loop runs over input channels and
 * kernel taps; per tap, NV contiguous vectors of xp are multiplied with MB
 * broadcast weights from a packed copy [M/MB][C][taps][MB]. The variant
 * (MB, NV) is chosen per convolution by a small cost model (FMA and load
 * slots; padding of M to MB and of the row to NV vectors). A pointwise
 * convolution (1x1, stride 1, no padding) cuts its plane into rows of
 * POINTWISE_ROW outputs. Work items are (output row, tile) pairs handed out
 * statically; every output is computed entirely by one item, always in the
 * same order. */
#include "backends/kernels/conv_direct.h"

#include <immintrin.h>
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

#define LANES 16
#define MAX_ACC 24    /* accumulators per tile (zmm0-31 minus loads and weights) */
#define MAX_NV 6      /* vectors per tile */
#define MAX_KW 16     /* innermost kernel width */
#define MAX_KROWS 256 /* kernel rows (depth x height) */
/* Products below this many multiply-adds stay on the calling thread: a
 * parallel loop on a busy machine can wait a scheduler slice for its
 * worker (docs/architecture.md, "OpenMP waiting"). */
#define PARALLEL_MIN_MACS ((double)(1 << 22))

/* Sizes of the repacked input and of the output rows. */
typedef struct direct_layout {
    int64_t in_rows[2];  /* padded depth and height: (D + pads) x (H + pads) */
    int64_t in_w;        /* padded width before the phase split */
    int64_t phases;      /* the innermost stride (1 or 2) */
    int64_t phase_len;   /* floats of one phase of one row of one channel */
    int64_t out_rows[2]; /* output depth and height */
    int64_t out_w;       /* outputs per output row */
    int64_t out_count;   /* outputs per channel (y's plane stride) */
} direct_layout;

typedef struct direct_plan {
    const float *xp, *pack, *bias;
    float *y;
    int64_t C, M, k[3], s[3], d[3];
    direct_layout L;
    int64_t row_floats; /* one padded input row of all channels: C * phases * phase_len */
    int64_t blocks;     /* 16-output vectors per output row */
    int64_t tiles;      /* per output row: ceil(blocks / NV) */
    int MB, NV;
} direct_plan;

static __mmask16 lane_bits(int64_t from, int64_t to) /* bits [from, to) of 0..15 */
{
    from = from < 0 ? 0 : from;
    to = to > LANES ? LANES : to;
    return (__mmask16)(to > from ? ((1u << to) - 1) & ~((1u << from) - 1) : 0);
}

/* --- the tile ---------------------------------------------------------------------- */

/* One tile: output channels [m0, m0 + MB) for every m0 (those < M are
 * stored), vectors [b0, b0 + NV) of output row `row`. MB and NV are
 * constants in each instantiation, so the accumulators live in registers. */
__attribute__((target("avx512f"), always_inline)) static inline void
tile_body(const direct_plan *p, const float *const *rows, int64_t row, int64_t b0, const int MB,
          const int NV)
{
    const int64_t KW = p->k[2], d2 = p->d[2], phases = p->L.phases, plen = p->L.phase_len;
    const int64_t k_rows = p->k[0] * p->k[1], k_size = k_rows * KW;
    /* where each kernel column reads: phase and offset within it */
    int64_t tap_off[MAX_KW];
    for (int64_t kw = 0; kw < KW; kw++)
        tap_off[kw] = (kw * d2) % phases * plen + (kw * d2) / phases + b0 * LANES;
    int64_t y_row = row * p->L.out_w, valid = p->L.out_count - y_row;
    valid = valid < p->L.out_w ? valid : p->L.out_w;
    for (int64_t m0 = 0; m0 < p->M; m0 += MB) {
        __m512 acc[MAX_ACC];
#pragma GCC unroll 24
        for (int i = 0; i < MB * NV; i++)
            acc[i] = _mm512_setzero_ps();
        const float *wk = p->pack + m0 * p->C * k_size;
        for (int64_t c = 0; c < p->C; c++)
            for (int64_t r = 0; r < k_rows; r++) {
                const float *xr = rows[r] + c * phases * plen;
                for (int64_t kw = 0; kw < KW; kw++, wk += MB) {
                    __m512 xv[MAX_NV];
#pragma GCC unroll 6
                    for (int v = 0; v < NV; v++)
                        xv[v] = _mm512_loadu_ps(xr + tap_off[kw] + v * LANES);
#pragma GCC unroll 24
                    for (int m = 0; m < MB; m++) {
                        const __m512 wv = _mm512_set1_ps(wk[m]);
#pragma GCC unroll 6
                        for (int v = 0; v < NV; v++)
                            acc[m * NV + v] = _mm512_fmadd_ps(wv, xv[v], acc[m * NV + v]);
                    }
                }
            }
        /* y = sum + bias, the lanes of existing outputs only */
        int64_t mcount = p->M - m0 < MB ? p->M - m0 : MB;
#pragma GCC unroll 24
        for (int m = 0; m < MB; m++) { /* constant bounds: acc stays in registers */
            if (m >= mcount)
                break;
            float *yr = p->y + (m0 + m) * p->L.out_count + y_row;
            const __m512 bv = _mm512_set1_ps(p->bias ? p->bias[m0 + m] : 0.0f);
#pragma GCC unroll 6
            for (int v = 0; v < NV; v++) {
                int64_t ow0 = (b0 + v) * LANES;
                __m512 o = p->bias ? _mm512_add_ps(acc[m * NV + v], bv) : acc[m * NV + v];
                _mm512_mask_storeu_ps(yr + ow0, lane_bits(0, valid - ow0), o);
            }
        }
    }
}

typedef void (*tile_fn)(const direct_plan *, const float *const *, int64_t, int64_t);

#define TILE_VARIANT(MB, NV)                                                                   \
    __attribute__((target("avx512f"))) static void tile_##MB##_##NV(                           \
        const direct_plan *p, const float *const *rows, int64_t row, int64_t b0)               \
    {                                                                                          \
        tile_body(p, rows, row, b0, MB, NV);                                                   \
    }

TILE_VARIANT(24, 1)
TILE_VARIANT(16, 1)
TILE_VARIANT(12, 1)
TILE_VARIANT(12, 2)
TILE_VARIANT(8, 1)
TILE_VARIANT(8, 2)
TILE_VARIANT(8, 3)
TILE_VARIANT(4, 1)
TILE_VARIANT(4, 2)
TILE_VARIANT(4, 3)
TILE_VARIANT(4, 4)
TILE_VARIANT(4, 5)
TILE_VARIANT(4, 6)

/* A channel block size and its tiles of 1..NV vectors. */
typedef struct variant {
    int MB, NV;
    tile_fn fn[MAX_NV]; /* [vectors - 1] */
} variant;

static const variant variants[] = {
    {24, 1, {tile_24_1}},
    {16, 1, {tile_16_1}},
    {12, 2, {tile_12_1, tile_12_2}},
    {8, 3, {tile_8_1, tile_8_2, tile_8_3}},
    {4, 6, {tile_4_1, tile_4_2, tile_4_3, tile_4_4, tile_4_5, tile_4_6}},
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* --- pointwise ---------------------------------------------------------------------- */

/* Positions copied per span: up to 256, while C x span floats stay within
 * 32 KiB (L1); at least NV vectors. Longer spans keep the reads of each
 * input plane and the writes of each output plane in whole lines: with one
 * tile of 16-48 positions, a 1x1 convolution with 32 input and 48 output
 * channels at 160x160 ran at 80 GFLOP/s, every access a conflict in one L1
 * set (the planes are 100 KiB apart). */
#define MAX_SPAN 256
#define SPAN_FLOATS 8192
static int64_t pointwise_span(int64_t C, int NV)
{
    int64_t unit = (int64_t)NV * LANES, fit = SPAN_FLOATS / (C > 0 ? C : 1) / unit * unit;
    int64_t most = MAX_SPAN / unit * unit;
    return fit < unit ? unit : fit > most ? most : fit;
}

/* A pointwise convolution is the product W [M][C] x X [C][P]. Its tiles are
 * NV vectors of consecutive positions: the tile's C x NV*16 inputs are first
 * copied to a per-thread buffer (the planes' large strides would map every
 * channel to one L1 set; one streaming read per tile does not mind), then
 * every channel block runs on the buffer. */
typedef struct pointwise_plan {
    const float *x, *pack, *bias;
    float *y;
    int64_t C, M, P;
    int64_t x_stride, y_stride; /* floats between channels (rows of X and Y) */
    int64_t blocks;
    int64_t span;               /* positions copied at a time: a multiple of NV vectors */
    int MB, NV;
} pointwise_plan;

/* The inputs of positions [p0, p0 + n) into buf [C][span] (zeros past P),
 * asking for the next span's at the same time: the channels' rows are too
 * many streams for the hardware prefetcher. */
__attribute__((target("avx512f"))) static void pointwise_copy(const pointwise_plan *p,
                                                              int64_t p0, float *buf)
{
    int64_t valid = p->P - p0, span = p->span;
    for (int64_t c = 0; c < p->C; c++) {
        const float *xc = p->x + c * p->x_stride + p0;
        for (int64_t i = 0; i < span; i += LANES) {
            _mm512_storeu_ps(buf + c * span + i,
                             _mm512_maskz_loadu_ps(lane_bits(0, valid - i), xc + i));
            if (valid > span + i)
                _mm_prefetch((const char *)(xc + span + i), _MM_HINT_T0);
        }
    }
}

/* One tile: vectors [b0, b0 + NV) of positions, their inputs at xb (rows of
 * p->span floats, copied by pointwise_copy). */
__attribute__((target("avx512f"), always_inline)) static inline void
pointwise_body(const pointwise_plan *p, int64_t b0, const float *buf, const int MB, const int NV)
{
    const int64_t p0 = b0 * LANES, valid = p->P - p0, C = p->C, span = p->span;
    __mmask16 lanes[MAX_NV];
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++)
        lanes[v] = lane_bits(0, valid - v * LANES);
    for (int64_t m0 = 0; m0 < p->M; m0 += MB) {
        __m512 acc[MAX_ACC];
#pragma GCC unroll 24
        for (int i = 0; i < MB * NV; i++)
            acc[i] = _mm512_setzero_ps();
        const float *wk = p->pack + m0 * C;
        const float *xb = buf;
        for (int64_t c = 0; c < C; c++, wk += MB, xb += span) {
            __m512 xv[MAX_NV];
#pragma GCC unroll 6
            for (int v = 0; v < NV; v++)
                xv[v] = _mm512_loadu_ps(xb + v * LANES);
#pragma GCC unroll 24
            for (int m = 0; m < MB; m++) {
                const __m512 wv = _mm512_set1_ps(wk[m]);
#pragma GCC unroll 6
                for (int v = 0; v < NV; v++)
                    acc[m * NV + v] = _mm512_fmadd_ps(wv, xv[v], acc[m * NV + v]);
            }
        }
        int64_t mcount = p->M - m0 < MB ? p->M - m0 : MB;
#pragma GCC unroll 24
        for (int m = 0; m < MB; m++) {
            if (m >= mcount)
                break;
            float *yr = p->y + (m0 + m) * p->y_stride + p0;
            const __m512 bv = _mm512_set1_ps(p->bias ? p->bias[m0 + m] : 0.0f);
#pragma GCC unroll 6
            for (int v = 0; v < NV; v++) {
                __m512 o = p->bias ? _mm512_add_ps(acc[m * NV + v], bv) : acc[m * NV + v];
                _mm512_mask_storeu_ps(yr + v * LANES, lanes[v], o);
            }
        }
    }
}

typedef void (*pointwise_fn)(const pointwise_plan *, int64_t, const float *);

#define POINTWISE_VARIANT(MB, NV)                                                              \
    __attribute__((target("avx512f"))) static void pointwise_##MB##_##NV(                      \
        const pointwise_plan *p, int64_t b0, const float *buf)                                 \
    {                                                                                          \
        pointwise_body(p, b0, buf, MB, NV);                                                    \
    }

POINTWISE_VARIANT(24, 1)
POINTWISE_VARIANT(16, 1)
POINTWISE_VARIANT(12, 1)
POINTWISE_VARIANT(12, 2)
POINTWISE_VARIANT(8, 1)
POINTWISE_VARIANT(8, 2)
POINTWISE_VARIANT(8, 3)
POINTWISE_VARIANT(4, 1)
POINTWISE_VARIANT(4, 2)
POINTWISE_VARIANT(4, 3)
POINTWISE_VARIANT(4, 4)
POINTWISE_VARIANT(4, 5)
POINTWISE_VARIANT(4, 6)

/* [variant index][vectors - 1], in the order of variants[] */
static const pointwise_fn pointwise_fns[][MAX_NV] = {
    {pointwise_24_1},
    {pointwise_16_1},
    {pointwise_12_1, pointwise_12_2},
    {pointwise_8_1, pointwise_8_2, pointwise_8_3},
    {pointwise_4_1, pointwise_4_2, pointwise_4_3, pointwise_4_4, pointwise_4_5, pointwise_4_6},
};

/* Estimated cycles per input tap of an MB x nv tile: two FMAs and two loads
 * (nv input vectors, MB weight broadcasts) per cycle. */
static double tap_cycles(int MB, int nv)
{
    double fma = MB * nv / 2.0, loads = (nv + MB) / 2.0;
    return fma > loads ? fma : loads;
}

static double variant_cost(const variant *v, int64_t M, int64_t blocks)
{
    int64_t mblocks = (M + v->MB - 1) / v->MB, full = blocks / v->NV, rest = blocks % v->NV;
    double per_row = (double)full * tap_cycles(v->MB, v->NV) +
                     (rest ? tap_cycles(v->MB, (int)rest) : 0.0);
    return (double)mblocks * per_row;
}

static const variant *choose_variant(int64_t M, int64_t blocks)
{
    const variant *best = &variants[0];
    double best_cost = variant_cost(best, M, blocks);
    for (int i = 1; i < N_VARIANTS; i++) {
        double c = variant_cost(&variants[i], M, blocks);
        if (c < best_cost) {
            best = &variants[i];
            best_cost = c;
        }
    }
    return best;
}

/* --- layout and repacking ----------------------------------------------------------------- */

static bool is_pointwise(const ld_window_geom *g)
{
    for (int i = 0; i < LD_WINDOW_MAX_DIMS; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] != 0 || g->pe[i] != 0)
            return false;
    return true;
}

static void layout_for(const ld_window_geom *g, direct_layout *L)
{
    memset(L, 0, sizeof *L);
    L->out_count = g->out_size;
    L->phases = g->s[2];
    for (int i = 0; i < 2; i++) {
        L->in_rows[i] = g->pb[i] + g->in[i] + g->pe[i];
        L->out_rows[i] = g->out[i];
    }
    L->in_w = g->pb[2] + g->in[2] + g->pe[2];
    L->out_w = g->out[2];
    /* every column a vector of the last tile reads: blocks * 16 + the last tap */
    int64_t blocks = (L->out_w + LANES - 1) / LANES;
    int64_t reach = blocks * LANES + (g->k[2] - 1) * g->d[2] / L->phases;
    int64_t need = (L->in_w + L->phases - 1) / L->phases;
    L->phase_len = (reach > need ? reach : need) + 1;
}

static size_t repacked_floats(const direct_layout *L, int64_t C)
{
    return (size_t)(L->in_rows[0] * L->in_rows[1]) * (size_t)C * (size_t)L->phases *
           (size_t)L->phase_len;
}

/* Padded row r of channel c into dst (phases x phase_len floats). */
__attribute__((target("avx512f"))) static void repack_row(const float *x, const ld_window_geom *g,
                                                          const direct_layout *L, int64_t r,
                                                          int64_t c, float *dst)
{
    size_t row_bytes = (size_t)(L->phases * L->phase_len) * sizeof(float);
    int64_t id = r / L->in_rows[1] - g->pb[0], ih = r % L->in_rows[1] - g->pb[1];
    memset(dst, 0, row_bytes);
    if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1])
        return;
    const float *src = x + c * g->in_size + (id * g->in[1] + ih) * g->in[2];
    int64_t W = g->in[2], pb = g->pb[2];
    if (L->phases == 1) {
        memcpy(dst + pb, src, (size_t)W * sizeof(float));
        return;
    }
    /* stride 2: padded column q = pb + iw goes to phase q % 2, index q / 2 */
    float *even = dst, *odd = dst + L->phase_len;
    int64_t iw = 0;
    if (pb % 2) { /* from iw = 1 on, padded column pb + iw starts even */
        odd[pb / 2] = src[0];
        iw = 1;
    }
    {
        const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                            4, 2, 0);
        const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7,
                                            5, 3, 1);
        for (; iw + 2 * LANES <= W; iw += 2 * LANES) {
            __m512 a = _mm512_loadu_ps(src + iw), b = _mm512_loadu_ps(src + iw + LANES);
            _mm512_storeu_ps(even + (pb + iw) / 2, _mm512_permutex2var_ps(a, ev, b));
            _mm512_storeu_ps(odd + (pb + iw) / 2, _mm512_permutex2var_ps(a, od, b));
        }
    }
    for (; iw < W; iw++) {
        int64_t q = pb + iw;
        (q % 2 ? odd : even)[q / 2] = src[iw];
    }
}

static void repack_input(const float *x, const ld_window_geom *g, const direct_layout *L,
                         int64_t C, float *xp, bool parallel, int threads)
{
    int64_t rows = L->in_rows[0] * L->in_rows[1], row_len = L->phases * L->phase_len;
#pragma omp parallel for num_threads(threads) if (parallel) schedule(static)
    for (int64_t i = 0; i < rows * C; i++)
        repack_row(x, g, L, i / C, i % C, xp + i * row_len);
}

/* Output channels the packed weights hold for any variant: M rounded up to
 * a multiple of MB <= 24 is at most M + 23. */
static size_t pack_rows(int64_t M)
{
    return (size_t)M + 24;
}

/* pack[((m0 / MB) * C + c) * k_size + k][mm] = w[m0 + mm][c][k], zero for
 * channels beyond M. The weights of output channel m and input channel c
 * start at w + m * m_stride + c * c_stride (a plain [M][C][k] tensor:
 * C * k_size and k_size). */
static void pack_weights(const float *w, int64_t m_stride, int64_t c_stride, int64_t C,
                         int64_t M, int64_t k_size, int MB, float *pack)
{
    for (int64_t m0 = 0; m0 < M; m0 += MB)
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < k_size; k++, pack += MB)
                for (int mm = 0; mm < MB; mm++)
                    pack[mm] = m0 + mm < M ? w[(m0 + mm) * m_stride + c * c_stride + k] : 0.0f;
}

/* --- public ------------------------------------------------------------------------- */

bool ld_conv_direct_available(void)
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

bool ld_conv_direct_fits(const ld_window_geom *g, int64_t C, int64_t M)
{
    return C >= 1 && M >= 1 && (g->s[2] == 1 || g->s[2] == 2) && g->k[2] <= MAX_KW &&
           g->k[0] * g->k[1] <= MAX_KROWS && g->out_size > 0;
}

/* 2-D and 1-D convolutions repack input rows just before their first use,
 * into a per-thread ring of the kernel's height in rows: they are then in
 * L2 for every tile that reads them (with the whole input repacked first,
 * the 160x160 planes' rows came back from memory: 2x slower). */
#define MAX_RING 64

static int64_t ring_rows(const ld_window_geom *g, const direct_layout *L)
{
    int64_t R = (g->k[1] - 1) * g->d[1] + 1;
    return L->in_rows[0] == 1 && L->out_rows[0] == 1 && R <= MAX_RING ? R : 0;
}

size_t ld_conv_direct_scratch_floats(const ld_window_geom *g, int64_t C, int64_t M,
                                     int threads)
{
    size_t pack = pack_rows(M) * (size_t)C * (size_t)g->k_size;
    size_t per_thread = (size_t)(threads > 1 ? threads : 1);
    if (is_pointwise(g))
        return pack + per_thread * (size_t)C * MAX_SPAN;
    direct_layout L;
    layout_for(g, &L);
    int64_t R = ring_rows(g, &L);
    size_t row = (size_t)C * (size_t)L.phases * (size_t)L.phase_len;
    return pack + (R ? per_thread * (size_t)R * row : repacked_floats(&L, C)) + LANES;
}

static bool worth_threads(const ld_window_geom *g, int64_t C, int64_t M, int threads)
{
    return threads > 1 &&
           (double)M * (double)C * (double)g->k_size * (double)g->out_size >= PARALLEL_MIN_MACS;
}

/* Y [M][P] (rows y_stride apart) = W X (+ bias), X [C][P] (rows x_stride
 * apart); w as for pack_weights. */
static void pointwise_run(pointwise_plan *p, const float *w, int64_t w_m_stride,
                          int64_t w_c_stride, float *scratch, int threads)
{
    p->blocks = (p->P + LANES - 1) / LANES;
    const variant *v = choose_variant(p->M, p->blocks);
    const pointwise_fn *fns = pointwise_fns[v - variants];
    p->MB = v->MB;
    p->NV = v->NV;
    p->span = pointwise_span(p->C, p->NV);
    float *pack = scratch, *bufs = scratch + pack_rows(p->M) * (size_t)p->C;
    pack_weights(w, w_m_stride, w_c_stride, p->C, p->M, 1, p->MB, pack);
    p->pack = pack;
    int64_t spans = (p->P + p->span - 1) / p->span;
    bool parallel = threads > 1 &&
                    (double)p->M * (double)p->C * (double)p->P >= PARALLEL_MIN_MACS;
#pragma omp parallel num_threads(threads) if (parallel)
    {
        float *buf = bufs + (size_t)omp_get_thread_num() * (size_t)(p->C * MAX_SPAN);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < spans; t++) {
            pointwise_copy(p, t * p->span, buf);
            int64_t first = t * p->span / LANES, end = first + p->span / LANES;
            end = end < p->blocks ? end : p->blocks;
            for (int64_t b0 = first; b0 < end; b0 += p->NV) {
                int64_t nv = end - b0 < p->NV ? end - b0 : p->NV;
                fns[nv - 1](p, b0, buf + (b0 - first) * LANES);
            }
        }
    }
}

static void pointwise_f32(const float *x, const float *w, const float *bias, float *y, int64_t C,
                          int64_t M, const ld_window_geom *g, float *scratch, int threads)
{
    pointwise_plan p = {.x = x, .bias = bias, .y = y, .C = C, .M = M, .P = g->out_size,
                        .x_stride = g->in_size, .y_stride = g->out_size};
    pointwise_run(&p, w, C, 1, scratch, threads);
}

__attribute__((target("avx512f"))) void ld_interleave2_add_f32(const float *a, const float *b,
                                                               float bias, float *y, int64_t n)
{
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                        24, 8);
    const __m512 bv = _mm512_set1_ps(bias);
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        __m512 va = _mm512_add_ps(bv, _mm512_loadu_ps(a + i));
        __m512 vb = _mm512_add_ps(bv, _mm512_loadu_ps(b + i));
        _mm512_storeu_ps(y + 2 * i, _mm512_permutex2var_ps(va, lo, vb));
        _mm512_storeu_ps(y + 2 * i + LANES, _mm512_permutex2var_ps(va, hi, vb));
    }
    for (; i < n; i++) {
        y[2 * i] = bias + a[i];
        y[2 * i + 1] = bias + b[i];
    }
}

size_t ld_gemm_direct_scratch_floats(int64_t M, int64_t K, int threads)
{
    return pack_rows(M) * (size_t)K + (size_t)(threads > 1 ? threads : 1) * (size_t)K * MAX_SPAN;
}

void ld_gemm_direct_f32(bool a_trans, int64_t M, int64_t N, int64_t K, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                        float *scratch, int threads)
{
    pointwise_plan p = {.x = B, .y = C, .C = K, .M = M, .P = N, .x_stride = ldb,
                        .y_stride = ldc};
    pointwise_run(&p, A, a_trans ? 1 : lda, a_trans ? lda : 1, scratch, threads);
}

/* Asks for input row (padded index r) of channel c, which the ring needs an
 * output row later: one channel row per plane, 96 planes for PaddleOCR
 * det's big convolutions, are too many streams for the hardware prefetcher,
 * and each cold row cost a memory latency. */
static void prefetch_row(const float *x, const ld_window_geom *g, int64_t r, int64_t c)
{
    int64_t ih = r - g->pb[1];
    if (ih < 0 || ih >= g->in[1])
        return;
    const char *src = (const char *)(x + c * g->in_size + ih * g->in[2]);
    for (int64_t b = 0; b < g->in[2] * (int64_t)sizeof(float); b += 64)
        __builtin_prefetch(src + b, 0, 3);
}

/* Points rows[kd * KH + kh] at the repacked input rows output row `row`
 * reads: in the full repack, or in the thread's ring (filling what is
 * missing; held[slot] = the padded row a slot holds, -1 for none). */
static void rows_for(const direct_plan *p, const float *x, const ld_window_geom *g, int64_t row,
                     float *ring, int64_t R, int64_t *held, const float **rows)
{
    int64_t od = row / p->L.out_rows[1], oh = row % p->L.out_rows[1];
    for (int64_t kd = 0, i = 0; kd < p->k[0]; kd++)
        for (int64_t kh = 0; kh < p->k[1]; kh++, i++) {
            int64_t r = (od * p->s[0] + kd * p->d[0]) * p->L.in_rows[1] + oh * p->s[1] +
                        kh * p->d[1];
            if (!ring) {
                rows[i] = p->xp + r * p->row_floats;
                continue;
            }
            float *slot = ring + (r % R) * p->row_floats;
            if (held[r % R] != r) {
                int64_t row_len = p->L.phases * p->L.phase_len;
                for (int64_t c = 0; c < p->C; c++) {
                    repack_row(x, g, &p->L, r, c, slot + c * row_len);
                    prefetch_row(x, g, r + p->s[1], c);
                }
                held[r % R] = r;
            }
            rows[i] = slot;
        }
}

void ld_conv_direct_f32(const float *x, const float *w, const float *bias, float *y, int64_t C,
                        int64_t M, const ld_window_geom *g, float *scratch, int threads)
{
    if (is_pointwise(g)) {
        pointwise_f32(x, w, bias, y, C, M, g, scratch, threads);
        return;
    }
    direct_plan p = {.bias = bias, .y = y, .C = C, .M = M};
    for (int i = 0; i < 3; i++)
        p.k[i] = g->k[i], p.s[i] = g->s[i], p.d[i] = g->d[i];
    layout_for(g, &p.L);
    p.row_floats = C * p.L.phases * p.L.phase_len;
    p.blocks = (p.L.out_w + LANES - 1) / LANES;
    const variant *v = choose_variant(M, p.blocks);
    p.MB = v->MB;
    p.NV = v->NV;
    p.tiles = (p.blocks + p.NV - 1) / p.NV;
    int64_t R = ring_rows(g, &p.L);
    float *pack = scratch, *inputs = scratch + pack_rows(M) * (size_t)C *
                                                   (size_t)g->k_size;
    pack_weights(w, C * g->k_size, g->k_size, C, M, g->k_size, p.MB, pack);
    p.pack = pack;
    bool parallel = worth_threads(g, C, M, threads);
    if (!R) {
        repack_input(x, g, &p.L, C, inputs, parallel, threads);
        p.xp = inputs;
    }
    int64_t items = p.L.out_rows[0] * p.L.out_rows[1] * p.tiles;
#pragma omp parallel num_threads(threads) if (parallel)
    {
        float *ring = R ? inputs + (size_t)omp_get_thread_num() * (size_t)(R * p.row_floats)
                        : NULL;
        int64_t held[MAX_RING], current = -1;
        const float *rows[MAX_KROWS];
        for (int64_t i = 0; i < R; i++)
            held[i] = -1;
#pragma omp for schedule(static)
        for (int64_t i = 0; i < items; i++) {
            int64_t row = i / p.tiles, b0 = (i % p.tiles) * p.NV;
            int64_t nv = p.blocks - b0 < p.NV ? p.blocks - b0 : p.NV;
            if (row != current) {
                rows_for(&p, x, g, row, ring, R, held, rows);
                current = row;
            }
            v->fn[nv - 1](&p, rows, row, b0);
        }
    }
}
