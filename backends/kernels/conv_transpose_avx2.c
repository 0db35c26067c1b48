/* layerdiff — ConvTranspose 2x2 stride 2 in one pass (see conv_transpose_fast.h),
 * in 8-lane (AVX2) tiles, or 16-lane (AVX-512F) tiles on AVX-512 machines.
 *
 * Why. conv_transpose.c computes a ConvTranspose as a product (columns
 * W^T X, one row per output channel and kernel offset) and then col2im,
 * which for kernel = stride only interleaves two column rows into each
 * output row and adds the bias. PaddleOCR det's two 2x2 upsamplings (24 ->
 * 24 channels at 160x160 and 24 -> 1 at 320x320) have only C = 24 terms
 * per sum, so that product spent much of its time on what surrounds the
 * multiply-adds (copying input spans, storing and reloading 9.8 MB of
 * columns through L2, a second pass to interleave them): on Zen 3, AVX2,
 * 1 thread, the 24 -> 24 layer ran at 25-38 GFLOP/s of a 96 peak.
 *
 * How. For one input row ih, one output channel and 24 input columns, a
 * tile of 4 kernel offsets x 3 vectors of sums stays in registers over all
 * C input channels, then each of the two output rows (kh = 0, 1) gets its
 * 48 outputs once: bias + sum for kw = 0 and 1, interleaved. The input row
 * of all channels (C x W floats, copied to a small buffer) stays in L1
 * across the output channels, and the next row is prefetched (one stream per input channel:
 * more than the hardware prefetcher follows).
 *
 * Same bits as the product + col2im: each sum is the FMA chain over c =
 * 0..C-1 starting from +0 (ld_gemm_direct_f32's documented order), and the
 * output is bias + sum (bias first, as ld_interleave2_add_f32; +0 without
 * bias, which turns a -0 sum into +0 as before). Columns past the last full
 * vector run the same chain one at a time with fmaf. */
#include "backends/kernels/conv_transpose_fast.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#include "backends/kernels/conv_direct_internal.h"
#include "backends/kernels/fp16_split.h"

#define LANES 8
/* The per-call stack buffer of packed input rows (32 KiB). */
#define PACK_FLOATS 8192

bool ld_convt_level_supported(ld_convt_level level)
{
    switch (level) {
    case LD_CONVT_NONE:
        return true;
    case LD_CONVT_AVX2:
        return ld_conv_direct_level_supported(LD_CONV_DIRECT_AVX2);
    case LD_CONVT_AVX512:
        return ld_conv_direct_level_supported(LD_CONV_DIRECT_AVX512);
    default:
        return false;
    }
}

static atomic_int forced_level = LD_CONVT_AUTO;

ld_convt_level ld_convt_level_active(void)
{
    int f = atomic_load(&forced_level);
    if (f != LD_CONVT_AUTO)
        return (ld_convt_level)f;
    switch (ld_conv_direct_level_active()) {
    case LD_CONV_DIRECT_NONE:
        return LD_CONVT_NONE;
    case LD_CONV_DIRECT_AVX512:
        return LD_CONVT_AVX512;
    default:
        return LD_CONVT_AVX2;
    }
}

bool ld_convt_force_level(ld_convt_level level)
{
    if (level != LD_CONVT_AUTO && !ld_convt_level_supported(level))
        return false;
    atomic_store(&forced_level, (int)level);
    return true;
}

/* Output channel m x input columns [iw0, iw0 + NV * 8) of input row ih
 * (xb: x at channel 0, row ih, column iw0): 4 NV sums over all C
 * channels, then the two output rows 2 ih + kh written from column 2 iw0
 * on. Per channel NV input loads and 4 weight broadcasts feed 4 NV FMAs;
 * 12 chains (NV 3) hide the FMA latency. One channel per tile measured
 * faster on Zen 3 than three channels x one vector (more broadcasts per
 * FMA), and reading the C input rows in place as fast as packing them. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
tile(const float *xb, int64_t cs, const float *w, const float *bias, float *y, int64_t C,
     int64_t M, int64_t H, int64_t W, int64_t ih, int64_t m, int64_t iw0,
     const ld_conv_round *round, const int NV, const int NT, const int RND)
{
    __m256 acc[4][3];
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            acc[t][v] = _mm256_setzero_ps();
    const float *wc = w + m * 4;
    const int64_t plane = H * W;
    for (int64_t c = 0; c < C; c++, xb += cs, wc += M * 4) {
        __m256 xv[3];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            xv[v] = _mm256_loadu_ps(xb + v * LANES);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const __m256 wv = _mm256_broadcast_ss(wc + t);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++)
                acc[t][v] = _mm256_fmadd_ps(wv, xv[v], acc[t][v]);
        }
    }
    const __m256 bv = _mm256_set1_ps(bias ? bias[m] : 0.0f);
#pragma GCC unroll 2
    for (int kh = 0; kh < 2; kh++) {
        float *yr = y + m * 4 * plane + (2 * ih + kh) * 2 * W + 2 * iw0;
        __m256 out[6];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) {
            __m256 a = _mm256_add_ps(bv, acc[2 * kh][v]);
            __m256 b = _mm256_add_ps(bv, acc[2 * kh + 1][v]);
            __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
            out[2 * v] = _mm256_permute2f128_ps(lo, hi, 0x20);
            out[2 * v + 1] = _mm256_permute2f128_ps(lo, hi, 0x31);
        }
        /* RND: the run of 2 NV vectors rounded to float16 here when all its
         * values are plain (fp16_split.h), as the direct convolution's
         * store_run; else stored as is and handed to round->block */
        bool plain = true;
        if (RND) {
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++)
                plain = plain && ld_fp16_plain8x2(out[2 * v], out[2 * v + 1]);
            if (plain)
#pragma GCC unroll 6
                for (int v = 0; v < 2 * NV; v++)
                    out[v] = ld_fp16_split8(out[v]);
        }
#pragma GCC unroll 6
        for (int v = 0; v < 2 * NV; v++) {
            if (NT && plain) /* whole aligned 64-byte lines (see STREAM_MIN_BYTES) */
                _mm256_stream_ps(yr + v * LANES, out[v]);
            else
                _mm256_storeu_ps(yr + v * LANES, out[v]);
        }
        if (RND && !plain)
            round->block(round->user, 0, yr, 2 * NV * LANES);
    }
}

#define DEFINE_TILE(NV, NT, RND, NAME)                                                         \
    __attribute__((target("avx2,fma"))) static void NAME(                                      \
        const float *xb, int64_t cs, const float *w, const float *bias, float *y, int64_t C,   \
        int64_t M, int64_t H, int64_t W, int64_t ih, int64_t m, int64_t iw0,                   \
        const ld_conv_round *round)                                                            \
    {                                                                                          \
        tile(xb, cs, w, bias, y, C, M, H, W, ih, m, iw0, round, NV, NT, RND);                  \
    }
DEFINE_TILE(3, 0, 0, tile3)
DEFINE_TILE(2, 0, 0, tile2)
DEFINE_TILE(1, 0, 0, tile1)
DEFINE_TILE(3, 1, 0, stream3)
DEFINE_TILE(2, 1, 0, stream2)
DEFINE_TILE(1, 1, 0, stream1)
DEFINE_TILE(3, 0, 1, round3)
DEFINE_TILE(2, 0, 1, round2)
DEFINE_TILE(1, 0, 1, round1)
DEFINE_TILE(3, 1, 1, stream_round3)
DEFINE_TILE(2, 1, 1, stream_round2)
DEFINE_TILE(1, 1, 1, stream_round1)

typedef void (*tile_fn)(const float *, int64_t, const float *, const float *, float *, int64_t,
                        int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        const ld_conv_round *);

/* [rounds in the tile][streams][NV - 1] */
static const tile_fn tiles[2][2][3] = {
    {{tile1, tile2, tile3}, {stream1, stream2, stream3}},
    {{round1, round2, round3}, {stream_round1, stream_round2, stream_round3}},
};

/* The same tile 16 lanes wide (AVX-512F): 4 NV zmm sums, each output row's
 * 32 NV values interleaved with two-source permutes. On the Zen 5 (AVX-512
 * full width) the AVX2 tile ran det's 24 -> 24 layer at its 8-lane FMA peak
 * (~100 GFLOP/s on one thread, standalone): compute-bound, not memory-bound.
 * Sums and their order are the AVX2 tile's: only the vector width differs.
 * Streamed rows go out as 32-byte halves, needing only the AVX2 tile's
 * alignment. */
__attribute__((target("avx512f"), always_inline)) static inline void
tile16(const float *xb, int64_t cs, const float *w, const float *bias, float *y, int64_t C,
       int64_t M, int64_t H, int64_t W, int64_t ih, int64_t m, int64_t iw0,
       const ld_conv_round *round, const int NV, const int NT, const int RND)
{
    __m512 acc[4][3];
#pragma GCC unroll 4
    for (int t = 0; t < 4; t++)
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            acc[t][v] = _mm512_setzero_ps();
    const float *wc = w + m * 4;
    const int64_t plane = H * W;
    for (int64_t c = 0; c < C; c++, xb += cs, wc += M * 4) {
        __m512 xv[3];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++)
            xv[v] = _mm512_loadu_ps(xb + v * 2 * LANES);
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const __m512 wv = _mm512_set1_ps(wc[t]);
#pragma GCC unroll 3
            for (int v = 0; v < NV; v++)
                acc[t][v] = _mm512_fmadd_ps(wv, xv[v], acc[t][v]);
        }
    }
    const __m512 bv = _mm512_set1_ps(bias ? bias[m] : 0.0f);
    /* lanes 0-7 (8-15) of a and b, alternating: kw = 0, 1 of each column */
    const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi_idx = _mm512_add_epi32(lo_idx, _mm512_set1_epi32(8));
#pragma GCC unroll 2
    for (int kh = 0; kh < 2; kh++) {
        float *yr = y + m * 4 * plane + (2 * ih + kh) * 2 * W + 2 * iw0;
        __m512 out[6];
#pragma GCC unroll 3
        for (int v = 0; v < NV; v++) {
            __m512 a = _mm512_add_ps(bv, acc[2 * kh][v]);
            __m512 b = _mm512_add_ps(bv, acc[2 * kh + 1][v]);
            out[2 * v] = _mm512_permutex2var_ps(a, lo_idx, b);
            out[2 * v + 1] = _mm512_permutex2var_ps(a, hi_idx, b);
        }
        bool plain = true; /* RND: as in tile() */
        if (RND) {
#pragma GCC unroll 6
            for (int v = 0; v < 2 * NV; v++)
                plain = plain && ld_fp16_plain16(out[v]);
            if (plain)
#pragma GCC unroll 6
                for (int v = 0; v < 2 * NV; v++)
                    out[v] = ld_fp16_split16(out[v]);
        }
#pragma GCC unroll 6
        for (int v = 0; v < 2 * NV; v++) {
            float *o = yr + v * 2 * LANES;
            if (NT && plain) {
                _mm256_stream_ps(o, _mm512_castps512_ps256(out[v]));
                _mm256_stream_ps(o + LANES,
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(out[v]), 1)));
            } else {
                _mm512_storeu_ps(o, out[v]);
            }
        }
        if (RND && !plain)
            round->block(round->user, 0, yr, 4 * NV * LANES);
    }
}

#define DEFINE_TILE16(NV, NT, RND, NAME)                                                       \
    __attribute__((target("avx512f"))) static void NAME(                                       \
        const float *xb, int64_t cs, const float *w, const float *bias, float *y, int64_t C,   \
        int64_t M, int64_t H, int64_t W, int64_t ih, int64_t m, int64_t iw0,                   \
        const ld_conv_round *round)                                                            \
    {                                                                                          \
        tile16(xb, cs, w, bias, y, C, M, H, W, ih, m, iw0, round, NV, NT, RND);                \
    }
DEFINE_TILE16(3, 0, 0, z_tile3)
DEFINE_TILE16(2, 0, 0, z_tile2)
DEFINE_TILE16(1, 0, 0, z_tile1)
DEFINE_TILE16(3, 1, 0, z_stream3)
DEFINE_TILE16(2, 1, 0, z_stream2)
DEFINE_TILE16(1, 1, 0, z_stream1)
DEFINE_TILE16(3, 0, 1, z_round3)
DEFINE_TILE16(2, 0, 1, z_round2)
DEFINE_TILE16(1, 0, 1, z_round1)
DEFINE_TILE16(3, 1, 1, z_stream_round3)
DEFINE_TILE16(2, 1, 1, z_stream_round2)
DEFINE_TILE16(1, 1, 1, z_stream_round1)

static const tile_fn tiles16[2][2][3] = {
    {{z_tile1, z_tile2, z_tile3}, {z_stream1, z_stream2, z_stream3}},
    {{z_round1, z_round2, z_round3}, {z_stream_round1, z_stream_round2, z_stream_round3}},
};

/* Outputs of at least this many bytes (all channels) are written with
 * streaming stores: they are far larger than L2, and plain stores first
 * read every line they write (write-allocate). PaddleOCR det's 24 -> 24
 * upsampling (9.8 MB out) on Zen 3, AVX2, interleaved A/B, medians of 9-11
 * (det run, per-node times): before the input rows were packed 4.3 -> 3.0
 * ms on 1 thread, 3.8 -> 2.9 on 2; with them, 3.5 -> 2.1 on 1 thread and
 * 1.5 -> 1.1 on 2. The nodes reading its output next (Add, BatchNorm,
 * Relu, the next ConvTranspose) then read it from memory rather than L3:
 * 0-0.6 ms more on 1 thread, ~0.4 ms on 2 (about the gain there). Its
 * 24 -> 1 layer (1.6 MB out) gained nothing and keeps plain stores. */
#define STREAM_MIN_BYTES ((int64_t)4 << 20)
/* The 16-lane tiles (chosen on AVX-512 machines, measured on the Zen 5)
 * stream only outputs larger than its L3 slice would keep: there, det's
 * 24 -> 24 layer with plain stores, det run, per-node medians of 11
 * interleaved rounds, 1 thread: the layer 1.07 -> 0.82 ms, it and the four
 * nodes reading its output 1.98 -> 1.67 ms; 2 threads 1.32 either way
 * (the layer 0.58 -> 0.54, the Add after it reading the other core's half
 * 0.16 -> 0.25). */
#define STREAM_MIN_BYTES_WIDE ((int64_t)32 << 20)

bool ld_convt_streams(bool wide, int64_t out_bytes)
{
    return out_bytes >= (wide ? STREAM_MIN_BYTES_WIDE : STREAM_MIN_BYTES);
}

/* Columns [iw0, W) of input row ih (fewer than a vector), one output at a
 * time in the same order. */
__attribute__((target("avx2,fma"))) static void tail_columns(const float *x, const float *w,
                                                             const float *bias, float *y,
                                                             int64_t C, int64_t M, int64_t H,
                                                             int64_t W, int64_t ih, int64_t iw0)
{
    const int64_t plane = H * W;
    for (int64_t m = 0; m < M; m++) {
        float b = bias ? bias[m] : 0.0f;
        for (int64_t t = 0; t < 4; t++) {
            float *yr = y + m * 4 * plane + (2 * ih + t / 2) * 2 * W + t % 2;
            for (int64_t iw = iw0; iw < W; iw++) {
                float acc = 0.0f;
                for (int64_t c = 0; c < C; c++)
                    acc = __builtin_fmaf(w[(c * M + m) * 4 + t], x[c * plane + ih * W + iw], acc);
                yr[2 * iw] = b + acc;
            }
        }
    }
}

/* Asks for input row ih of every channel (one stream per channel). */
static void prefetch_row(const float *x, int64_t C, int64_t H, int64_t W, int64_t ih)
{
    for (int64_t c = 0; c < C; c++)
        ld_prefetch_floats(x + c * H * W + ih * W, W);
}

/* Input rows [ih0, ih1) (the entry points below); wide: 16-lane tiles
 * first, the AVX2 tiles for a last 8 columns. */
static void rows_f32(const float *x, const float *w, const float *bias, float *y, int64_t C,
                     int64_t M, int64_t H, int64_t W, int64_t ih0, int64_t ih1,
                     const ld_conv_round *round, bool round_fp16_inline, bool wide)
{
    const int64_t full = W / LANES * LANES; /* columns in whole vectors */
    const bool in_tile = round && round_fp16_inline;
    /* streaming stores need aligned rows (and a rounding callback after
     * the row would read it back right away; in the tile only the runs
     * that are not plain go to it, stored the usual way) */
    const bool stream = (!round || in_tile) &&
                        ld_convt_streams(wide, M * 4 * H * W * (int64_t)sizeof(float)) &&
                        W % 4 == 0 && (uintptr_t)y % 32 == 0;
    const tile_fn t3 = tiles[in_tile][stream][2], t2 = tiles[in_tile][stream][1],
                  t1 = tiles[in_tile][stream][0];
    const tile_fn z3 = tiles16[in_tile][stream][2], z2 = tiles16[in_tile][stream][1],
                  z1 = tiles16[in_tile][stream][0];
    const int64_t wide_full = wide ? W / (2 * LANES) * (2 * LANES) : 0;
    float buf[PACK_FLOATS];
    /* With more than one output channel the input row of every channel is
     * read once per channel: copied here rows ld floats apart (64 bytes
     * off a multiple of 4 KiB), they stay in L1. In place, det's 160x160
     * planes (100 KiB apart) put all 24 rows in the same L1 sets and the
     * loads waited on L2: 1 thread, CPU time, interleaved, means of 40,
     * 3.5 -> 3.0 ms. One output channel reads each input once: no copy. */
    const int64_t ld = (full + 15) / 16 * 16 + 16;
    const bool pack = M >= 2 && C * ld <= PACK_FLOATS;
    for (int64_t ih = ih0; ih < ih1; ih++) {
        if (ih + 1 < H)
            prefetch_row(x, C, H, W, ih + 1);
        const float *xr = x + ih * W;
        int64_t cs = H * W;
        if (pack) {
            for (int64_t c = 0; c < C; c++)
                memcpy(buf + c * ld, xr + c * H * W, (size_t)full * sizeof *buf);
            xr = buf, cs = ld;
        }
        for (int64_t m = 0; m < M; m++) {
            int64_t i = 0;
            for (; i + 6 * LANES <= wide_full; i += 6 * LANES)
                z3(xr + i, cs, w, bias, y, C, M, H, W, ih, m, i, round);
            for (; i + 4 * LANES <= wide_full; i += 4 * LANES)
                z2(xr + i, cs, w, bias, y, C, M, H, W, ih, m, i, round);
            for (; i < wide_full; i += 2 * LANES)
                z1(xr + i, cs, w, bias, y, C, M, H, W, ih, m, i, round);
            for (; i + 3 * LANES <= full; i += 3 * LANES)
                t3(xr + i, cs, w, bias, y, C, M, H, W, ih, m, i, round);
            for (; i + 2 * LANES <= full; i += 2 * LANES)
                t2(xr + i, cs, w, bias, y, C, M, H, W, ih, m, i, round);
            for (; i < full; i += LANES)
                t1(xr + i, cs, w, bias, y, C, M, H, W, ih, m, i, round);
        }
        if (full < W)
            tail_columns(x, w, bias, y, C, M, H, W, ih, full);
        /* the rows (or, rounded in the tiles, their tail columns) */
        int64_t from = in_tile ? 2 * full : 0;
        if (round && from < 2 * W)
            for (int64_t m = 0; m < M; m++)
                for (int64_t kh = 0; kh < 2; kh++)
                    round->block(round->user, 0,
                                 y + m * 4 * H * W + (2 * ih + kh) * 2 * W + from, 2 * W - from);
    }
    if (stream)
        _mm_sfence(); /* the streamed stores before the pool's hand-back */
}

void ld_convt2x2_rows_f32_avx2(const float *x, const float *w, const float *bias, float *y,
                               int64_t C, int64_t M, int64_t H, int64_t W, int64_t ih0,
                               int64_t ih1, const ld_conv_round *round, bool round_fp16_inline)
{
    rows_f32(x, w, bias, y, C, M, H, W, ih0, ih1, round, round_fp16_inline, false);
}

void ld_convt2x2_rows_f32_avx512(const float *x, const float *w, const float *bias, float *y,
                                 int64_t C, int64_t M, int64_t H, int64_t W, int64_t ih0,
                                 int64_t ih1, const ld_conv_round *round, bool round_fp16_inline)
{
    rows_f32(x, w, bias, y, C, M, H, W, ih0, ih1, round, round_fp16_inline, true);
}
