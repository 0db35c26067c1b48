/* layerdiff — float32 direct convolution with AVX-512 or AVX2 (see
 * conv_direct.h): the plan, the choice of tile and the threading, for any
 * vector width; the tiles themselves are conv_direct_body.h's, compiled per
 * instruction set in conv_direct_avx512.c (16 lanes) and conv_direct_avx2.c
 * (8 lanes).
 *
 * Why. PaddleOCR det's 3x3 convolutions with 96 input and 24 output
 * channels are half of its multiply-adds; through im2col and OpenBLAS they
 * ran at ~105 GFLOP/s on a Zen 5 (24 output channels are a poor GEMM shape:
 * a single in-cache cblas_sgemm of 24x2400x864 peaks at ~116) plus the
 * im2col copy. Its small convolutions (K = 12-32) were memory-bound GEMMs
 * at 30-80.
 *
 * How. Input rows are copied into rows of all channels, zero padding
 * included: xp[padded row][c][phase][column / stride] (stride-2 columns
 * split into even and odd phases). Reading a tile's inputs straight from
 * NCHW planes was 2.5x slower on 160x160 planes: their 100 KiB stride puts
 * every channel's row in the same L1 set. A tile is MB output channels x NV
 * vectors of consecutive outputs of one output row, held in MB*NV
 * accumulator registers while the loop runs over input channels and kernel
 * taps; per tap, NV contiguous vectors of xp are multiplied with MB
 * broadcast weights from a packed copy [M/MB][C][taps][MB]. The variant
 * (MB, NV) is chosen per convolution among the instruction set's by a small
 * cost model (FMA and load slots; padding of M to MB and of the row to NV
 * vectors). A pointwise convolution (1x1, stride 1, no padding) is a
 * product over spans of positions. Work items are runs of tiles of one
 * output row, passing over the input channels in L1-sized chunks, claimed
 * by the threads a few rows at a time (conv_pool.h); every output is computed entirely
 * by one item, always in the same order, at any vector width. */
#include "backends/kernels/conv_direct.h"

#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/conv_direct_internal.h"
#include "backends/kernels/conv_pool.h"
#include "backends/pool.h"

#define MAX_KROWS 256 /* kernel rows (depth x height) */
/* Products below this many multiply-adds stay on the calling thread: a
 * parallel loop on a busy machine can wait a scheduler slice for its
 * worker (docs/architecture.md, "OpenMP waiting"). */
#define PARALLEL_MIN_MACS ((double)(1 << 22))

/* --- instruction set ------------------------------------------------------------- */

static atomic_int forced_level = LD_CONV_DIRECT_AUTO;
static atomic_int forced_variant = -1;
static _Atomic int64_t cache_packs; /* ld_conv_direct_cache_packs */
static atomic_llong forced_chunk = 0, forced_group = 0;
static atomic_int forced_ask_ahead = -1;

bool ld_conv_direct_level_supported(ld_conv_direct_level level)
{
    __builtin_cpu_init();
    switch (level) {
    case LD_CONV_DIRECT_NONE:
        return true;
    case LD_CONV_DIRECT_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case LD_CONV_DIRECT_AVX512:
        return __builtin_cpu_supports("avx512f");
    default:
        return false;
    }
}

static ld_conv_direct_level detected_level(void)
{
    static atomic_int known = -1; /* races write the same */
    int v = atomic_load(&known);
    if (v < 0) {
        v = ld_conv_direct_level_supported(LD_CONV_DIRECT_AVX512) ? LD_CONV_DIRECT_AVX512
            : ld_conv_direct_level_supported(LD_CONV_DIRECT_AVX2) ? LD_CONV_DIRECT_AVX2
                                                                   : LD_CONV_DIRECT_NONE;
        atomic_store(&known, v);
    }
    return (ld_conv_direct_level)v;
}

ld_conv_direct_level ld_conv_direct_level_active(void)
{
    int f = atomic_load(&forced_level);
    return f >= 0 ? (ld_conv_direct_level)f : detected_level();
}

bool ld_conv_direct_force_level(ld_conv_direct_level level)
{
    if (level != LD_CONV_DIRECT_AUTO && !ld_conv_direct_level_supported(level))
        return false;
    atomic_store(&forced_level, (int)level);
    return true;
}

const char *ld_conv_direct_level_name(ld_conv_direct_level level)
{
    return level == LD_CONV_DIRECT_AVX512 ? "avx512"
           : level == LD_CONV_DIRECT_AVX2 ? "avx2"
           : level == LD_CONV_DIRECT_NONE ? "none"
                                          : "auto";
}

int ld_conv_direct_variant_count(void)
{
    ld_conv_direct_level level = ld_conv_direct_level_active();
    return level == LD_CONV_DIRECT_AVX512 ? ld_cd_isa_avx512.n_variants
           : level == LD_CONV_DIRECT_AVX2 ? ld_cd_isa_avx2.n_variants
                                          : 0;
}

void ld_conv_direct_force_variant(int index)
{
    atomic_store(&forced_variant, index < 0 ? -1 : index);
}

void ld_conv_direct_force_blocking(int64_t channels, int64_t tiles)
{
    atomic_store(&forced_chunk, (long long)(channels > 0 ? channels : 0));
    atomic_store(&forced_group, (long long)(tiles > 0 ? tiles : 0));
}

/* The active level's kernels (only called when one is active). */
static const ld_cd_isa *active_isa(void)
{
    return ld_conv_direct_level_active() == LD_CONV_DIRECT_AVX512 ? &ld_cd_isa_avx512
                                                                  : &ld_cd_isa_avx2;
}

/* --- the choice of tile --------------------------------------------------------------- */

/* Positions copied per pointwise span: up to 256, while C x span floats
 * stay within 32 KiB (L1); at least NV vectors. Longer spans keep the reads
 * of each input plane and the writes of each output plane in whole lines:
 * with one tile of 16-48 positions, a 1x1 convolution with 32 input and 48
 * output channels at 160x160 ran at 80 GFLOP/s, every access a conflict in
 * one L1 set (the planes are 100 KiB apart). */
#define MAX_SPAN 256
#define SPAN_FLOATS 8192
static int64_t pointwise_span(int64_t C, int64_t unit)
{
    int64_t fit = SPAN_FLOATS / (C > 0 ? C : 1) / unit * unit;
    int64_t most = MAX_SPAN / unit * unit;
    return fit < unit ? unit : fit > most ? most : fit;
}

/* Pointwise outputs of more than this many bytes ask for their lines
 * ahead (conv_direct_body.h's pointwise_ask_ahead): in a run, outputs that
 * big come mostly from memory, and their stores' reads for ownership with
 * them. On Zen 5 (1 thread, in det, interleaved medians of 9) its 12.5 and
 * 9.4 MiB outputs (16 -> 32 at 320x320, 12 -> 96 at 160x160) gained 15-17%,
 * its 4.7 MiB ones (48 -> 48, 32 -> 48 at 160x160) lost up to 8%: in cache,
 * the prefetches only add loads (a 9.4 MiB output rewritten in a loop, in
 * L3, lost 20%). */
#define ASK_AHEAD_BYTES ((double)(8 << 20))

bool ld_conv_direct_pw_asks_ahead(int64_t M, int64_t P)
{
    int forced = atomic_load(&forced_ask_ahead);
    if (forced >= 0)
        return forced > 0;
    return (double)M * (double)P * (double)sizeof(float) > ASK_AHEAD_BYTES;
}

void ld_conv_direct_force_ask_ahead(int mode)
{
    atomic_store(&forced_ask_ahead, mode < 0 ? -1 : mode > 0);
}

/* Estimated cycles per input tap of an MB x nv tile: two FMAs and two loads
 * (nv input vectors, MB weight broadcasts) per cycle -- Zen 3 with AVX2 and
 * Zen 4/5 with AVX-512 alike -- plus load_weight cycles per load. Windowed
 * convolutions pass 0.1: their tiles read the inputs from the ring in L2
 * and the chunk's weights near the edge of L1, so of two variants the FMA
 * slots rate equal, the one with fewer loads runs faster (Zen 3, AVX2, 1
 * thread, CPU time: 96 -> 24 3x3 at 160x160 4x3 ~70 GFLOP/s, 6x2 ~64; at
 * 40x40 78 against 72; at 80x80, whose 10 vectors 4x3 splits 3+3+3+1, 6x2
 * stays the cheaper, measured 64 against 60). Pointwise tiles read an L1
 * buffer and pass 0: there 6x2 measured as fast as 4x3 or faster. AVX-512
 * passes 0 everywhere (not measured there: its choices stay as they were). */
static double tap_cycles(int MB, int nv, double load_weight)
{
    double fma = MB * nv / 2.0, loads = (nv + MB) / 2.0;
    return (fma > loads ? fma : loads) + load_weight * (nv + MB);
}

static double variant_cost(const ld_cd_variant *v, int64_t M, int64_t blocks, double load_weight)
{
    int64_t mblocks = (M + v->MB - 1) / v->MB, full = blocks / v->NV, rest = blocks % v->NV;
    double per_row = (double)full * tap_cycles(v->MB, v->NV, load_weight) +
                     (rest ? tap_cycles(v->MB, (int)rest, load_weight) : 0.0);
    return (double)mblocks * per_row;
}

/* The cheapest variant (the first of equal ones). */
static const ld_cd_variant *choose_variant(const ld_cd_isa *isa, int64_t M, int64_t blocks,
                                           double load_weight)
{
    int forced = atomic_load(&forced_variant);
    if (forced >= 0 && forced < isa->n_variants)
        return &isa->variants[forced];
    const ld_cd_variant *best = &isa->variants[0];
    double best_cost = variant_cost(best, M, blocks, load_weight);
    for (int i = 1; i < isa->n_variants; i++) {
        double c = variant_cost(&isa->variants[i], M, blocks, load_weight);
        if (c < best_cost) {
            best = &isa->variants[i];
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

static void layout_for(const ld_window_geom *g, int lanes, ld_cd_layout *L)
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
    int64_t blocks = (L->out_w + lanes - 1) / lanes;
    int64_t reach = blocks * lanes + (g->k[2] - 1) * g->d[2] / L->phases;
    int64_t need = (L->in_w + L->phases - 1) / L->phases;
    L->phase_len = (reach > need ? reach : need) + 1;
}

static size_t repacked_floats(const ld_cd_layout *L, int64_t C)
{
    return (size_t)(L->in_rows[0] * L->in_rows[1]) * (size_t)C * (size_t)L->phases *
           (size_t)L->phase_len;
}

/* Padded row r of channel c into dst (phases x phase_len floats). */
static void repack_row(const ld_cd_isa *isa, const float *x, const ld_window_geom *g,
                       const ld_cd_layout *L, int64_t r, int64_t c, float *dst)
{
    size_t row_bytes = (size_t)(L->phases * L->phase_len) * sizeof(float);
    int64_t id = r / L->in_rows[1] - g->pb[0], ih = r % L->in_rows[1] - g->pb[1];
    if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {
        memset(dst, 0, row_bytes);
        return;
    }
    const float *src = x + c * g->in_size + (id * g->in[1] + ih) * g->in[2];
    int64_t W = g->in[2], pb = g->pb[2], n = L->phase_len;
    /* Only what the input does not cover is zeroed (the padding and the
     * slack to phase_len): a memset of the whole row first wrote most of it
     * twice. */
    if (L->phases == 1) {
        memset(dst, 0, (size_t)pb * sizeof(float));
        memcpy(dst + pb, src, (size_t)W * sizeof(float));
        memset(dst + pb + W, 0, (size_t)(n - pb - W) * sizeof(float));
        return;
    }
    /* stride 2: padded column q = pb + iw goes to phase q % 2, index q / 2;
     * the even phase holds indices [(pb + 1) / 2, (pb + W + 1) / 2), the odd
     * one [pb / 2, (pb + W) / 2) */
    float *even = dst, *odd = dst + n;
    memset(even, 0, (size_t)((pb + 1) / 2) * sizeof(float));
    memset(even + (pb + W + 1) / 2, 0, (size_t)(n - (pb + W + 1) / 2) * sizeof(float));
    memset(odd, 0, (size_t)(pb / 2) * sizeof(float));
    memset(odd + (pb + W) / 2, 0, (size_t)(n - (pb + W) / 2) * sizeof(float));
    int64_t iw = 0;
    if (pb % 2) { /* from iw = 1 on, padded column pb + iw starts even */
        odd[pb / 2] = src[0];
        iw = 1;
    }
    iw += isa->deinterleave2(src + iw, W - iw, even + (pb + iw) / 2, odd + (pb + iw) / 2);
    for (; iw < W; iw++) {
        int64_t q = pb + iw;
        (q % 2 ? odd : even)[q / 2] = src[iw];
    }
}

static void repack_input(const ld_cd_isa *isa, const float *x, const ld_window_geom *g,
                         const ld_cd_layout *L, int64_t C, float *xp, bool parallel, int threads)
{
    int64_t rows = L->in_rows[0] * L->in_rows[1], row_len = L->phases * L->phase_len;
#pragma omp parallel for num_threads(threads) if (parallel) schedule(static)
    for (int64_t i = 0; i < rows * C; i++)
        repack_row(isa, x, g, L, i / C, i % C, xp + i * row_len);
}

/* The variant a pointwise product of M rows over P positions runs. */
static const ld_cd_variant *pointwise_variant(const ld_cd_isa *isa, int64_t M, int64_t P)
{
    return choose_variant(isa, M, (P + isa->lanes - 1) / isa->lanes, 0.0);
}

/* The variant a windowed convolution of layout L with M output channels
 * runs (the load tie-break was measured on Zen 3, AVX2, only: AVX-512 keeps
 * its choices). */
static const ld_cd_variant *window_variant(const ld_cd_isa *isa, const ld_cd_layout *L, int64_t M)
{
    return choose_variant(isa, M, (L->out_w + isa->lanes - 1) / isa->lanes,
                          isa == &ld_cd_isa_avx2 ? 0.1 : 0.0);
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
    /* Each output channel's weights are read in their order in memory (a
     * row of the plain [M][C][k] tensor, or a column of a transposed GEMM
     * operand) and scattered MB floats apart into the block, which is in
     * L1 or L2: reading MB rows in turn, as the block's order would, took
     * a miss per float from weights that come from memory every run. */
    for (int64_t m0 = 0; m0 < M; m0 += MB, pack += MB * C * k_size)
        for (int mm = 0; mm < MB; mm++) {
            float *dst = pack + mm;
            if (m0 + mm >= M) {
                for (int64_t i = 0; i < C * k_size; i++)
                    dst[i * MB] = 0.0f;
                continue;
            }
            const float *src = w + (m0 + mm) * m_stride;
            for (int64_t c = 0; c < C; c++)
                for (int64_t k = 0; k < k_size; k++)
                    dst[(c * k_size + k) * MB] = src[c * c_stride + k];
        }
}

/* The packed weights of this call: the cache's when it holds exactly these
 * (same weights, sizes, level and MB), else packed into the cache, or into
 * `into` (scratch) without a cache or when its allocation fails. */
static const float *packed_weights(const float *w, int64_t m_stride, int64_t c_stride, int64_t C,
                                   int64_t M, int64_t k_size, int MB, float *into,
                                   ld_conv_direct_pack *cache)
{
    if (!cache) {
        pack_weights(w, m_stride, c_stride, C, M, k_size, MB, into);
        return into;
    }
    int level = (int)ld_conv_direct_level_active();
    if (cache->data && cache->w == w && cache->C == C && cache->M == M &&
        cache->k_size == k_size && cache->MB == MB && cache->level == level)
        return cache->data;
    ld_conv_direct_pack_clear(cache);
    size_t bytes = ((size_t)((M + MB - 1) / MB * MB) * (size_t)C * (size_t)k_size *
                        sizeof(float) + 63) / 64 * 64;
    /* From the process-wide arena (backends/pool.h: huge pages): in a
     * run's first pass every node packs, and aligned_alloc's fresh 4 KiB
     * pages cost a VM page fault each (0.2-0.9 GB/s here). */
    float *data = ld_buffer_alloc(bytes);
    if (!data) {
        if (!into)
            return NULL;
        pack_weights(w, m_stride, c_stride, C, M, k_size, MB, into);
        return into;
    }
    pack_weights(w, m_stride, c_stride, C, M, k_size, MB, data);
    atomic_fetch_add(&cache_packs, 1);
    *cache = (ld_conv_direct_pack){.w = w, .C = C, .M = M, .k_size = k_size, .MB = MB,
                                   .level = level, .data = data};
    return data;
}

void ld_conv_direct_pack_clear(ld_conv_direct_pack *cache)
{
    ld_buffer_free(cache->data);
    memset(cache, 0, sizeof *cache);
}

int64_t ld_conv_direct_cache_packs(void)
{
    return atomic_load(&cache_packs);
}

bool ld_conv_direct_prepack(const float *w, int64_t C, int64_t M, const ld_window_geom *g,
                            ld_conv_direct_pack *cache)
{
    if (!ld_conv_direct_available() || !ld_conv_direct_fits(g, C, M))
        return false;
    const ld_cd_isa *isa = active_isa();
    if (is_pointwise(g))
        return packed_weights(w, C, 1, C, M, 1, pointwise_variant(isa, M, g->out_size)->MB,
                              NULL, cache) != NULL;
    ld_cd_layout L;
    layout_for(g, isa->lanes, &L);
    return packed_weights(w, C * g->k_size, g->k_size, C, M, g->k_size,
                          window_variant(isa, &L, M)->MB, NULL, cache) != NULL;
}

/* --- public ------------------------------------------------------------------------- */

bool ld_conv_direct_available(void)
{
    return ld_conv_direct_level_active() != LD_CONV_DIRECT_NONE;
}

bool ld_conv_direct_fits(const ld_window_geom *g, int64_t C, int64_t M)
{
    return C >= 1 && M >= 1 && (g->s[2] == 1 || g->s[2] == 2) && g->k[2] <= LD_CD_MAX_KW &&
           g->k[0] * g->k[1] <= MAX_KROWS && g->out_size > 0;
}

bool ld_conv_direct_preferred(const ld_window_geom *g, int64_t C, int64_t M)
{
    if (!ld_conv_direct_available() || !ld_conv_direct_fits(g, C, M))
        return false;
    return true;
}

/* 2-D and 1-D convolutions repack input rows just before their first use,
 * into a per-thread ring of the kernel's height in rows: they are then in
 * L2 for every tile that reads them (with the whole input repacked first,
 * the 160x160 planes' rows came back from memory: 2x slower). */
#define MAX_RING 64

static int64_t ring_rows(const ld_window_geom *g, const ld_cd_layout *L)
{
    int64_t R = (g->k[1] - 1) * g->d[1] + 1;
    return L->in_rows[0] == 1 && L->out_rows[0] == 1 && R <= MAX_RING ? R : 0;
}

/* Floats from one worker's buffer (a ring, a pointwise span buffer) to the
 * next worker's in the scratch: the buffer, then a gap of as many floats
 * again plus 64 KiB, never touched. Why: the hardware prefetcher of the
 * core that reads a ring extrapolates its stride (one ring row, R rows in
 * turn) past the ring's end; with the rings back to back it kept fetching
 * the next worker's rows while that worker rewrote them on the other core,
 * and the helper thread's tiles ran ~40% slower than the caller's (Zen 5,
 * 2 threads, 96 -> 24 3x3 at 160x160, per-row medians of 25: 56 against
 * 39 µs; with the next ring 128 KiB further on 49, from 192 KiB on 40;
 * the layer 3.75 -> 3.14 ms). */
size_t ld_conv_direct_worker_stride(size_t floats)
{
    return ((2 * floats + 16384) + 15) / 16 * 16;
}

size_t ld_conv_direct_scratch_floats(const ld_window_geom *g, int64_t C, int64_t M,
                                     int threads)
{
    size_t pack = pack_rows(M) * (size_t)C * (size_t)g->k_size;
    size_t per_thread = (size_t)(threads > 1 ? threads : 1);
    if (is_pointwise(g))
        return pack + per_thread * ld_conv_direct_worker_stride((size_t)C * MAX_SPAN);
    ld_cd_layout L;
    layout_for(g, active_isa()->lanes, &L);
    int64_t R = ring_rows(g, &L);
    size_t row = (size_t)C * (size_t)L.phases * (size_t)L.phase_len;
    return pack +
           (R ? per_thread * ld_conv_direct_worker_stride((size_t)R * row)
              : repacked_floats(&L, C)) +
           16;
}

static bool worth_threads(const ld_window_geom *g, int64_t C, int64_t M, int threads)
{
    return threads > 1 &&
           (double)M * (double)C * (double)g->k_size * (double)g->out_size >= PARALLEL_MIN_MACS;
}

/* The pointwise product's work: spans of positions (pointwise_run). */
typedef struct {
    ld_cd_pw_plan *p;
    const ld_cd_variant *v;
    const ld_cd_isa *isa;
    /* per worker: C x MAX_SPAN floats, ld_conv_direct_worker_stride apart */
    float *bufs;
} pw_job;

static void pw_items(void *arg, int worker, int64_t t0, int64_t t1)
{
    const pw_job *j = arg;
    ld_cd_pw_plan *p = j->p;
    const ld_cd_variant *v = j->v;
    const int64_t lanes = j->isa->lanes;
    float *buf =
        j->bufs + (size_t)worker * ld_conv_direct_worker_stride((size_t)(p->C * MAX_SPAN));
    for (int64_t t = t0; t < t1; t++) {
        j->isa->pointwise_copy(p, t * p->span, buf);
        int64_t first = t * p->span / lanes, end = first + p->span / lanes;
        end = end < p->blocks ? end : p->blocks;
        int64_t full = (end - first) / p->NV, rest = (end - first) % p->NV;
        if (full) /* all channel blocks of all full tiles: conv_direct_body.h */
            v->pw[p->NV - 1](p, first, full, buf);
        if (rest)
            v->pw[rest - 1](p, first + full * p->NV, 1, buf + full * p->NV * lanes);
    }
}

/* Y [M][P] (rows y_stride apart) = W X (+ bias), X [C][P] (rows x_stride
 * apart); w as for pack_weights. */
static void pointwise_run(ld_cd_pw_plan *p, const float *w, int64_t w_m_stride,
                          int64_t w_c_stride, float *scratch, int threads,
                          ld_conv_direct_pack *cache)
{
    const ld_cd_isa *isa = active_isa();
    const int64_t lanes = isa->lanes;
    p->blocks = (p->P + lanes - 1) / lanes;
    const ld_cd_variant *v = pointwise_variant(isa, p->M, p->P);
    p->MB = v->MB;
    p->NV = v->NV;
    p->span = pointwise_span(p->C, p->NV * lanes);
    p->ask_ahead = ld_conv_direct_pw_asks_ahead(p->M, p->P);
    float *pack = scratch, *bufs = scratch + pack_rows(p->M) * (size_t)p->C;
    p->pack = packed_weights(w, w_m_stride, w_c_stride, p->C, p->M, 1, p->MB, pack, cache);
    int64_t spans = (p->P + p->span - 1) / p->span;
    bool parallel = threads > 1 &&
                    (double)p->M * (double)p->C * (double)p->P >= PARALLEL_MIN_MACS;
    int64_t claim = ld_conv_pool_claim(spans, threads);
    pw_job job = {.p = p, .v = v, .isa = isa, .bufs = bufs};
    ld_conv_pool_run(parallel ? threads : 1, spans, claim, pw_items, &job);
}

static void pointwise_f32(const float *x, const float *w, const float *bias, float *y, int64_t C,
                          int64_t M, const ld_window_geom *g, float *scratch, int threads,
                          const ld_conv_round *round, ld_conv_direct_pack *cache)
{
    ld_cd_pw_plan p = {.x = x, .bias = bias, .y = y, .C = C, .M = M, .P = g->out_size,
                        .x_stride = g->in_size, .y_stride = g->out_size, .round = round};
    pointwise_run(&p, w, C, 1, scratch, threads, cache);
}

void ld_interleave2_add_f32(const float *a, const float *b, float bias, float *y, int64_t n)
{
    active_isa()->interleave2_add(a, b, bias, y, n);
}

size_t ld_gemm_direct_scratch_floats(int64_t M, int64_t K, int threads)
{
    return pack_rows(M) * (size_t)K + (size_t)(threads > 1 ? threads : 1) *
                                          ld_conv_direct_worker_stride((size_t)K * MAX_SPAN);
}

void ld_gemm_direct_f32(bool a_trans, int64_t M, int64_t N, int64_t K, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                        float *scratch, int threads)
{
    ld_cd_pw_plan p = {.x = B, .y = C, .C = K, .M = M, .P = N, .x_stride = ldb,
                        .y_stride = ldc};
    pointwise_run(&p, A, a_trans ? 1 : lda, a_trans ? lda : 1, scratch, threads, NULL);
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
    ld_prefetch_floats(x + c * g->in_size + ih * g->in[2], g->in[2]);
}

/* Points rows[kd * KH + kh] at the repacked input rows output row `row`
 * reads: in the full repack, or in the thread's ring (filling what is
 * missing; held[slot] = the padded row a slot holds, -1 for none). */
static void rows_for(const ld_cd_isa *isa, const ld_cd_plan *p, const float *x, const ld_window_geom *g, int64_t row,
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
                    repack_row(isa, x, g, &p->L, r, c, slot + c * row_len);
                    prefetch_row(x, g, r + p->s[1], c);
                }
                held[r % R] = r;
            }
            rows[i] = slot;
        }
}

/* Input channels per pass. A tile reads, per input channel, the weights of
 * every channel block (M x taps floats) and its inputs (a few lines per
 * kernel row); with all of C at once, PaddleOCR det's 96 -> 24 3x3 layers
 * read 83 KiB of weights and ~36 KiB of inputs per tile, far more than L1
 * (32 KiB on Zen 3), so both came from L2 for every channel block. Chunks
 * whose weights and one tile's inputs take about 48 KiB keep most of the
 * weights in L1 over a row of tiles and the inputs over the channel
 * blocks; the sums go through y between passes (conv_direct_body.h), whose
 * planes all map to the same L1 sets, so fewer passes also count: on Zen 3
 * (AVX2, 1 thread, CPU time, 160x160) 3 passes of 32 channels ran at 72-73
 * GFLOP/s, 6 of 16 at 69, 4 of 24 at 71, one pass of 96 at 69. AVX-512
 * runs one pass: on Zen 5 (48 KiB L1, 1 MiB L2; 1 thread, CPU time, best of
 * 15) the same layer took 6.36 ms in 4 passes of 24, 6.13 in 2 of 48 and
 * 6.00 in one (80x80: 1.37 -> 1.31 ms, 40x40: 0.400 -> 0.381). */
#define CHUNK_BYTES (48 * 1024)

static int64_t channel_chunk(const ld_cd_plan *p, const ld_cd_isa *isa)
{
    long long forced = atomic_load(&forced_chunk);
    if (forced > 0)
        return forced < p->C ? (int64_t)forced : p->C;
    if (isa == &ld_cd_isa_avx512)
        return p->C;
    const int64_t lanes = isa->lanes;
    int64_t k_rows = p->k[0] * p->k[1], KW = p->k[2];
    int64_t mpad = (p->M + p->MB - 1) / p->MB * p->MB;
    int64_t w_bytes = mpad * k_rows * KW * (int64_t)sizeof(float);
    int64_t span = p->NV * lanes + (KW - 1) * p->d[2] / p->L.phases; /* floats per phase */
    int64_t phases = KW < p->L.phases ? KW : p->L.phases;
    int64_t x_bytes = k_rows * phases * ((span * (int64_t)sizeof(float) + 63) / 64 + 1) * 64;
    int64_t fit = CHUNK_BYTES / (w_bytes + x_bytes);
    fit = fit < 1 ? 1 : fit;
    if (fit >= p->C)
        return p->C;
    int64_t passes = (p->C + fit - 1) / fit;
    return (p->C + passes - 1) / passes; /* even chunks */
}

/* Tiles per work item: a whole output row (its passes then share the
 * weights), unless the rows are too few to share among the threads. */
static int64_t tile_group(const ld_cd_plan *p, bool parallel, int threads)
{
    long long forced = atomic_load(&forced_group);
    if (forced > 0)
        return forced < p->tiles ? (int64_t)forced : p->tiles;
    int64_t rows = p->L.out_rows[0] * p->L.out_rows[1], want = 8 * (int64_t)threads;
    if (!parallel || rows >= want)
        return p->tiles;
    int64_t split = (want + rows - 1) / rows;
    split = split < p->tiles ? split : p->tiles;
    return (p->tiles + split - 1) / split;
}

/* A windowed convolution's work: items are runs of tiles of one output
 * row; each worker keeps its ring of repacked input rows (or reads the
 * full repack when R is 0). */
typedef struct {
    const ld_cd_isa *isa;
    const ld_cd_plan *p;
    const ld_cd_variant *v;
    const float *x;
    const ld_window_geom *g;
    /* per worker: R rows of row_floats (R > 0), ld_conv_direct_worker_stride apart */
    float *inputs;
    int64_t R, groups;
    struct {
        int64_t held[MAX_RING], current;
        const float *rows[MAX_KROWS];
    } __attribute__((aligned(64))) w[LD_CONV_POOL_MAX_THREADS];
} win_job;

static void win_items(void *arg, int worker, int64_t i0, int64_t i1)
{
    win_job *j = arg;
    const ld_cd_plan *p = j->p;
    float *ring = j->R ? j->inputs + (size_t)worker * ld_conv_direct_worker_stride(
                                                   (size_t)(j->R * p->row_floats))
                       : NULL;
    int64_t *held = j->w[worker].held, *current = &j->w[worker].current;
    const float **rows = j->w[worker].rows;
    for (int64_t i = i0; i < i1; i++) {
        int64_t row = i / j->groups, t0 = (i % j->groups) * p->group;
        int64_t t1 = t0 + p->group < p->tiles ? t0 + p->group : p->tiles;
        if (row != *current) {
            rows_for(j->isa, p, j->x, j->g, row, ring, j->R, held, rows);
            *current = row;
        }
        for (int64_t c0 = 0; c0 < p->C; c0 += p->chunk) {
            int64_t c1 = c0 + p->chunk < p->C ? c0 + p->chunk : p->C;
            for (int64_t t = t0; t < t1; t++) {
                int64_t b0 = t * p->NV, nv = p->blocks - b0 < p->NV ? p->blocks - b0 : p->NV;
                j->v->tile[nv - 1](p, rows, row, b0, c0, c1);
            }
        }
    }
}

void ld_conv_direct_f32(const float *x, const float *w, const float *bias, float *y, int64_t C,
                        int64_t M, const ld_window_geom *g, float *scratch, int threads,
                        const ld_conv_round *round)
{
    ld_conv_direct_f32_cached(x, w, bias, y, C, M, g, scratch, threads, round, NULL);
}

void ld_conv_direct_f32_cached(const float *x, const float *w, const float *bias, float *y,
                               int64_t C, int64_t M, const ld_window_geom *g, float *scratch,
                               int threads, const ld_conv_round *round,
                               ld_conv_direct_pack *cache)
{
    if (is_pointwise(g)) {
        pointwise_f32(x, w, bias, y, C, M, g, scratch, threads, round, cache);
        return;
    }
    const ld_cd_isa *isa = active_isa();
    ld_cd_plan p = {.bias = bias, .y = y, .C = C, .M = M, .round = round};
    for (int i = 0; i < 3; i++)
        p.k[i] = g->k[i], p.s[i] = g->s[i], p.d[i] = g->d[i];
    layout_for(g, isa->lanes, &p.L);
    p.row_floats = C * p.L.phases * p.L.phase_len;
    p.blocks = (p.L.out_w + isa->lanes - 1) / isa->lanes;
    const ld_cd_variant *v = window_variant(isa, &p.L, M);
    p.MB = v->MB;
    p.NV = v->NV;
    p.tiles = (p.blocks + p.NV - 1) / p.NV;
    int64_t R = ring_rows(g, &p.L);
    float *pack = scratch, *inputs = scratch + pack_rows(M) * (size_t)C *
                                                   (size_t)g->k_size;
    p.pack = packed_weights(w, C * g->k_size, g->k_size, C, M, g->k_size, p.MB, pack, cache);
    bool parallel = worth_threads(g, C, M, threads);
    if (!R) {
        repack_input(isa, x, g, &p.L, C, inputs, parallel, threads);
        p.xp = inputs;
    }
    p.chunk = channel_chunk(&p, isa);
    p.group = tile_group(&p, parallel, threads);
    int64_t groups = (p.tiles + p.group - 1) / p.group;
    int64_t items = p.L.out_rows[0] * p.L.out_rows[1] * groups;
    /* claims of consecutive rows: the ring refills once per claim */
    int64_t claim = ld_conv_pool_claim(items, threads);
    win_job job = {.isa = isa, .p = &p, .v = v, .x = x, .g = g, .inputs = inputs, .R = R,
                   .groups = groups};
    int workers = parallel ? (threads < LD_CONV_POOL_MAX_THREADS ? threads
                                                                 : LD_CONV_POOL_MAX_THREADS)
                           : 1;
    for (int t = 0; t < workers; t++) {
        job.w[t].current = -1;
        for (int64_t i = 0; i < R; i++)
            job.w[t].held[i] = -1;
    }
    ld_conv_pool_run(workers, items, claim, win_items, &job);
}
