/* layerdiff — the direct convolution's tiles, written once for any vector
 * width and included by conv_direct_avx512.c and conv_direct_avx2.c (the
 * plan and the algorithm: conv_direct.c). No include guard: one inclusion
 * per translation unit, after the including file defines
 *   CD_TARGET        the target attribute string ("avx512f", "avx2,fma")
 *   CD_LANES         floats per vector
 *   CD_MAX_ACC       most accumulators a tile holds
 *   CD_VEC           the vector type
 *   CD_ZERO()        a zero vector
 *   CD_LOADU(p)      an unaligned load
 *   CD_LOAD_N(p, n)  lanes [0, n) of p (none when n <= 0), zeros above
 *   CD_STOREU(p, v)  an unaligned store
 *   CD_STORE_N(p, v, n) lanes [0, n) of v to p (none when n <= 0)
 *   CD_SET1(f)       f in every lane (a broadcast load from memory)
 *   CD_FMA(a, b, c)  a * b + c, rounded once
 *   CD_ADD(a, b)     a + b
 *   CD_FP16_PLAIN(v) every lane's float16 rounding normal, or a zero (fp16_split.h)
 *   CD_FP16_ROUND(v) the float16 rounding of such a vector (fp16_split.h)
 * Every output is the same chain of fused multiply-adds in the same order
 * at any width, so both instruction sets give the same bits. */

/* --- the stores -------------------------------------------------------------------- */

/* o[0, NV): final outputs of one channel, lanes [0, valid) of them at y.
 * With round (kernel.h's round_fp16_inline, conv_direct.h): rounded to
 * float16 here when every vector is plain, else stored unrounded and handed
 * to round->block, which rounds and counts them as the engine's pass would. */
__attribute__((target(CD_TARGET), always_inline)) static inline void
store_run(float *y, const CD_VEC *o, int64_t valid, const ld_conv_round *round, const int NV)
{
    bool plain = round != NULL;
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++)
        plain = plain && CD_FP16_PLAIN(o[v]);
    if (plain) {
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++)
            CD_STORE_N(y + v * CD_LANES, CD_FP16_ROUND(o[v]), valid - v * CD_LANES);
        return;
    }
#pragma GCC unroll 6
    for (int v = 0; v < NV; v++)
        CD_STORE_N(y + v * CD_LANES, o[v], valid - v * CD_LANES);
    int64_t n = valid < NV * CD_LANES ? valid : NV * CD_LANES;
    if (round && n > 0)
        round->block(round->user, 0, y, n);
}

/* --- the tile ---------------------------------------------------------------------- */

/* One tile: output channels [m0, m0 + MB) for every m0 (those < M are
 * stored), vectors [b0, b0 + NV) of output row `row`, input channels [c0,
 * c1). A pass that does not start at channel 0 continues the sums the
 * previous pass left in y (a float32 accumulator stored and loaded back is
 * the same value, so the chain is unchanged); the pass ending at C adds the
 * bias. MB and NV are constants in each instantiation, so the accumulators
 * live in registers. */
__attribute__((target(CD_TARGET), always_inline)) static inline void
tile_body(const ld_cd_plan *p, const float *const *rows, int64_t row, int64_t b0, int64_t c0,
          int64_t c1, const int MB, const int NV)
{
    const int64_t KW = p->k[2], d2 = p->d[2], phases = p->L.phases, plen = p->L.phase_len;
    const int64_t k_rows = p->k[0] * p->k[1], k_size = k_rows * KW;
    const bool first = c0 == 0, last = c1 == p->C;
    /* where each kernel column reads: phase and offset within it */
    int64_t tap_off[LD_CD_MAX_KW];
    for (int64_t kw = 0; kw < KW; kw++)
        tap_off[kw] = (kw * d2) % phases * plen + (kw * d2) / phases + b0 * CD_LANES;
    /* Kernels of at most LD_CD_MAX_TAPS taps run one loop over them per
     * input channel, where each tap reads channel 0 in a table: the nest of
     * kernel rows and columns cost as much as the FMAs when taps are few
     * per channel (the first layer's 3 channels; kernels 3 wide). */
    const bool flat = k_size <= LD_CD_MAX_TAPS;
    const float *tap_x[LD_CD_MAX_TAPS];
    for (int64_t r = 0; flat && r < k_rows; r++)
        for (int64_t kw = 0; kw < KW; kw++)
            tap_x[r * KW + kw] = rows[r] + tap_off[kw];
    int64_t y_row = row * p->L.out_w, valid = p->L.out_count - y_row;
    valid = valid < p->L.out_w ? valid : p->L.out_w;
    /* The first pass writes y's lines for the first time, and their reads
     * for ownership come from memory: ask for the next tile's now, a tile
     * of work ahead (3->16 stride 2 at 640x640, 27 taps per channel block:
     * 22-23 -> 24-25 GFLOP/s, Zen 3, 1 thread, outputs cold). */
    if (first) {
        int64_t nb = (b0 + NV) * CD_LANES, ne = nb + NV * CD_LANES - 1;
        ne = ne < valid ? ne : valid - 1;
        for (int64_t m = 0; nb < valid && m < p->M; m++) {
            const float *yn = p->y + m * p->L.out_count + y_row;
            __builtin_prefetch(yn + nb, 1, 3);
            __builtin_prefetch(yn + ne, 1, 3);
        }
    }
    for (int64_t m0 = 0; m0 < p->M; m0 += MB) {
        int64_t mcount = p->M - m0 < MB ? p->M - m0 : MB;
        CD_VEC acc[CD_MAX_ACC];
#pragma GCC unroll 24
        for (int m = 0; m < MB; m++) {
            const float *yr = p->y + (m0 + m) * p->L.out_count + y_row;
#pragma GCC unroll 6
            for (int v = 0; v < NV; v++) {
                int64_t ow0 = (b0 + v) * CD_LANES;
                acc[m * NV + v] = first || m >= mcount ? CD_ZERO()
                                                       : CD_LOAD_N(yr + ow0, valid - ow0);
            }
        }
        const float *wk = p->pack + (m0 * p->C + c0 * MB) * k_size;
        if (flat) {
            for (int64_t c = c0; c < c1; c++) {
                const int64_t xc = c * phases * plen;
                for (int64_t t = 0; t < k_size; t++, wk += MB) {
                    const float *xt = tap_x[t] + xc;
                    CD_VEC xv[LD_CD_MAX_NV];
#pragma GCC unroll 6
                    for (int v = 0; v < NV; v++)
                        xv[v] = CD_LOADU(xt + v * CD_LANES);
#pragma GCC unroll 24
                    for (int m = 0; m < MB; m++) {
                        const CD_VEC wv = CD_SET1(wk[m]);
#pragma GCC unroll 6
                        for (int v = 0; v < NV; v++)
                            acc[m * NV + v] = CD_FMA(wv, xv[v], acc[m * NV + v]);
                    }
                }
            }
        } else {
        for (int64_t c = c0; c < c1; c++)
            for (int64_t r = 0; r < k_rows; r++) {
                const float *xr = rows[r] + c * phases * plen;
                for (int64_t kw = 0; kw < KW; kw++, wk += MB) {
                    CD_VEC xv[LD_CD_MAX_NV];
#pragma GCC unroll 6
                    for (int v = 0; v < NV; v++)
                        xv[v] = CD_LOADU(xr + tap_off[kw] + v * CD_LANES);
#pragma GCC unroll 24
                    for (int m = 0; m < MB; m++) {
                        const CD_VEC wv = CD_SET1(wk[m]);
#pragma GCC unroll 6
                        for (int v = 0; v < NV; v++)
                            acc[m * NV + v] = CD_FMA(wv, xv[v], acc[m * NV + v]);
                    }
                }
            }
        }
        /* y = sum (+ bias after the last pass), the lanes of existing outputs only */
#pragma GCC unroll 24
        for (int m = 0; m < MB; m++) { /* constant bounds: acc stays in registers */
            if (m >= mcount)
                break;
            float *yr = p->y + (m0 + m) * p->L.out_count + y_row;
            const bool add_bias = last && p->bias;
            const CD_VEC bv = CD_SET1(add_bias ? p->bias[m0 + m] : 0.0f);
            CD_VEC o[LD_CD_MAX_NV];
#pragma GCC unroll 6
            for (int v = 0; v < NV; v++)
                o[v] = add_bias ? CD_ADD(acc[m * NV + v], bv) : acc[m * NV + v];
            store_run(yr + b0 * CD_LANES, o, valid - b0 * CD_LANES, last ? p->round : NULL, NV);
        }
    }
}

/* --- pointwise ---------------------------------------------------------------------- */

/* The inputs of positions [p0, p0 + span) into buf [C][span] (zeros past
 * P), asking for the next span's at the same time (one prefetch per 64-byte
 * line): the channels' rows are too many streams for the hardware
 * prefetcher. */
__attribute__((target(CD_TARGET))) static void pointwise_copy(const ld_cd_pw_plan *p, int64_t p0,
                                                              float *buf)
{
    int64_t valid = p->P - p0, span = p->span;
    for (int64_t c = 0; c < p->C; c++) {
        const float *xc = p->x + c * p->x_stride + p0;
        for (int64_t i = 0; i < span; i += CD_LANES) {
            CD_STOREU(buf + c * span + i, CD_LOAD_N(xc + i, valid - i));
            if (i % 16 == 0 && valid > span + i)
                _mm_prefetch((const char *)(xc + span + i), _MM_HINT_T0);
        }
    }
}

/* Tiles ahead whose output lines pointwise_body asks for. */
#define PW_AHEAD 2

/* Asks for ownership of the output lines of tile k (channel block k /
 * ntiles, tile k % ntiles) of this call, if it has one (p->ask_ahead: y
 * too big to be in cache). Each tile stores MB x NV whole lines, and every
 * store's read for ownership came from memory in turn; asked two tiles
 * ahead they overlap the FMAs (Zen 5, 1 thread, det's 16 -> 32 at 320x320:
 * 1.20 -> 0.97 ms). Only lines of this call's own tiles: another thread's
 * would be taken from under its stores. Prefetches change no output. */
__attribute__((target(CD_TARGET), always_inline)) static inline void
pointwise_ask_ahead(const ld_cd_pw_plan *p, int64_t b0, int64_t ntiles, int64_t k, const int MB,
                    const int NV)
{
    int64_t m0 = k / ntiles * MB, q = (b0 + k % ntiles * NV) * CD_LANES;
    if (m0 >= p->M)
        return;
    int64_t mcount = p->M - m0 < MB ? p->M - m0 : MB;
    for (int64_t m = 0; m < mcount; m++) {
        const float *yr = p->y + (m0 + m) * p->y_stride + q;
#pragma GCC unroll 6
        for (int v = 0; v < NV; v++)
            if (q + v * CD_LANES < p->P)
                __builtin_prefetch(yr + v * CD_LANES, 1, 3);
    }
}

/* Tiles of NV vectors of positions from vector b0, `ntiles` of them, their
 * inputs at buf (rows of p->span floats, copied by pointwise_copy). The
 * loop runs over channel blocks outside and tiles inside, so the stores go
 * to MB output planes at a time, each a run of ntiles * NV vectors: with
 * the tiles outside, a 1x1 convolution of 12 input and 96 output channels
 * at 160x160 wrote 96 planes in turn, one line each, all in one L1 set
 * (the planes are 100 KiB apart). Which order runs changes no output. */
__attribute__((target(CD_TARGET), always_inline)) static inline void
pointwise_body(const ld_cd_pw_plan *p, int64_t b0, int64_t ntiles, const float *buf,
               const int MB, const int NV)
{
    const int64_t C = p->C, span = p->span;
    for (int64_t m0 = 0; m0 < p->M; m0 += MB) {
        int64_t mcount = p->M - m0 < MB ? p->M - m0 : MB;
        for (int64_t t = 0; t < ntiles; t++) {
            const int64_t p0 = (b0 + t * NV) * CD_LANES, valid = p->P - p0;
            if (p->ask_ahead)
                pointwise_ask_ahead(p, b0, ntiles, m0 / MB * ntiles + t + PW_AHEAD, MB, NV);
            CD_VEC acc[CD_MAX_ACC];
#pragma GCC unroll 24
            for (int i = 0; i < MB * NV; i++)
                acc[i] = CD_ZERO();
            const float *wk = p->pack + m0 * C;
            const float *xb = buf + t * NV * CD_LANES;
            for (int64_t c = 0; c < C; c++, wk += MB, xb += span) {
                CD_VEC xv[LD_CD_MAX_NV];
#pragma GCC unroll 6
                for (int v = 0; v < NV; v++)
                    xv[v] = CD_LOADU(xb + v * CD_LANES);
#pragma GCC unroll 24
                for (int m = 0; m < MB; m++) {
                    const CD_VEC wv = CD_SET1(wk[m]);
#pragma GCC unroll 6
                    for (int v = 0; v < NV; v++)
                        acc[m * NV + v] = CD_FMA(wv, xv[v], acc[m * NV + v]);
                }
            }
#pragma GCC unroll 24
            for (int m = 0; m < MB; m++) {
                if (m >= mcount)
                    break;
                float *yr = p->y + (m0 + m) * p->y_stride + p0;
                const CD_VEC bm = CD_SET1(p->bias ? p->bias[m0 + m] : 0.0f);
                CD_VEC o[LD_CD_MAX_NV];
#pragma GCC unroll 6
                for (int v = 0; v < NV; v++)
                    o[v] = p->bias ? CD_ADD(acc[m * NV + v], bm) : acc[m * NV + v];
                store_run(yr, o, valid, p->round, NV);
            }
        }
    }
}

/* tile_MB_NV and pointwise_MB_NV: the two bodies with constant sizes. */
#define CD_VARIANT(MB, NV)                                                                     \
    __attribute__((target(CD_TARGET))) static void tile_##MB##_##NV(                           \
        const ld_cd_plan *p, const float *const *rows, int64_t row, int64_t b0, int64_t c0,    \
        int64_t c1)                                                                            \
    {                                                                                          \
        tile_body(p, rows, row, b0, c0, c1, MB, NV);                                           \
    }                                                                                          \
    __attribute__((target(CD_TARGET))) static void pointwise_##MB##_##NV(                      \
        const ld_cd_pw_plan *p, int64_t b0, int64_t ntiles, const float *buf)                  \
    {                                                                                          \
        pointwise_body(p, b0, ntiles, buf, MB, NV);                                            \
    }
