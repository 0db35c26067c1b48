/* layerdiff — the direct convolution's kernels for AVX2 + FMA: 8 lanes,
 * 16 ymm registers, so tiles of MB x NV <= 12 accumulators plus NV input
 * vectors and one weight broadcast (12x1, 8x1, 6x2, 4x3, 2x5, 1x6: every
 * one fits without spills). Zen 3 issues two FMAs and two loads per cycle,
 * and a broadcast from memory is a load: 6x2 and 4x3 keep both FMA pipes
 * busy (12 FMAs, 8 or 7 loads per tap), 12x1 is load-bound (13 loads).
 * Masked stores (_mm256_maskstore_ps) write the partial vectors at the end
 * of a row. The bodies are conv_direct_body.h's, the same as AVX-512's;
 * the plan and the choice: conv_direct.c. */
#include <immintrin.h>
#include <stdint.h>

#include "backends/kernels/conv_direct_internal.h"
#include "backends/kernels/fp16_split.h"

#define CD_TARGET "avx2,fma"
#define CD_LANES 8
#define CD_MAX_ACC 12
#define CD_VEC __m256
#define CD_ZERO() _mm256_setzero_ps()
#define CD_LOADU(p) _mm256_loadu_ps(p)
#define CD_LOAD_N(p, n) load_n((p), (n))
#define CD_STOREU(p, v) _mm256_storeu_ps((p), (v))
#define CD_STORE_N(p, v, n) store_n((p), (v), (n))
#define CD_SET1(f) _mm256_set1_ps(f)
#define CD_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define CD_ADD(a, b) _mm256_add_ps((a), (b))
#define CD_FP16_PLAIN(v) ld_fp16_plain8(v)
#define CD_FP16_ROUND(v) ld_fp16_split8(v)

/* Lane masks: 8 - n floats into the table, the first n lanes set. */
static const int32_t mask_table[2 * CD_LANES] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                 0,  0,  0,  0,  0,  0,  0,  0};

/* Lanes [0, n) of p, zeros above; the masked lanes are not read (no fault
 * past the end of the input). */
__attribute__((target(CD_TARGET), always_inline)) static inline __m256 load_n(const float *p,
                                                                              int64_t n)
{
    if (n >= CD_LANES)
        return _mm256_loadu_ps(p);
    if (n <= 0)
        return _mm256_setzero_ps();
    __m256i m = _mm256_loadu_si256((const __m256i *)(mask_table + CD_LANES - n));
    return _mm256_maskload_ps(p, m);
}

/* Lanes [0, n) of v to p; memory above is not touched. */
__attribute__((target(CD_TARGET), always_inline)) static inline void store_n(float *p, __m256 v,
                                                                             int64_t n)
{
    if (n >= CD_LANES) {
        _mm256_storeu_ps(p, v);
    } else if (n > 0) {
        __m256i m = _mm256_loadu_si256((const __m256i *)(mask_table + CD_LANES - n));
        _mm256_maskstore_ps(p, m, v);
    }
}

#include "backends/kernels/conv_direct_body.h"

CD_VARIANT(12, 1)
CD_VARIANT(8, 1)
CD_VARIANT(6, 1)
CD_VARIANT(6, 2)
CD_VARIANT(4, 1)
CD_VARIANT(4, 2)
CD_VARIANT(4, 3)
CD_VARIANT(2, 1)
CD_VARIANT(2, 2)
CD_VARIANT(2, 3)
CD_VARIANT(2, 4)
CD_VARIANT(2, 5)
CD_VARIANT(1, 1)
CD_VARIANT(1, 2)
CD_VARIANT(1, 3)
CD_VARIANT(1, 4)
CD_VARIANT(1, 5)
CD_VARIANT(1, 6)

static const ld_cd_variant variants[] = {
    {12, 1, {tile_12_1}, {pointwise_12_1}},
    {8, 1, {tile_8_1}, {pointwise_8_1}},
    {6, 2, {tile_6_1, tile_6_2}, {pointwise_6_1, pointwise_6_2}},
    {4, 3, {tile_4_1, tile_4_2, tile_4_3}, {pointwise_4_1, pointwise_4_2, pointwise_4_3}},
    {2, 5, {tile_2_1, tile_2_2, tile_2_3, tile_2_4, tile_2_5},
     {pointwise_2_1, pointwise_2_2, pointwise_2_3, pointwise_2_4, pointwise_2_5}},
    {1, 6, {tile_1_1, tile_1_2, tile_1_3, tile_1_4, tile_1_5, tile_1_6},
     {pointwise_1_1, pointwise_1_2, pointwise_1_3, pointwise_1_4, pointwise_1_5, pointwise_1_6}},
};

/* Two vectors of 8 -> their even and odd floats: within each 128-bit half,
 * shuffle_ps takes a0 a2 b0 b2 | a4 a6 b4 b6; the 64-bit permute (0, 2, 1,
 * 3) puts a's pairs before b's. */
__attribute__((target(CD_TARGET))) static int64_t deinterleave2(const float *src, int64_t n,
                                                                float *even, float *odd)
{
    int64_t i = 0;
    for (; i + 2 * CD_LANES <= n; i += 2 * CD_LANES) {
        __m256 a = _mm256_loadu_ps(src + i), b = _mm256_loadu_ps(src + i + CD_LANES);
        __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        __m256 o = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
        o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), _MM_SHUFFLE(3, 1, 2, 0)));
        _mm256_storeu_ps(even + i / 2, e);
        _mm256_storeu_ps(odd + i / 2, o);
    }
    return i;
}

/* unpacklo/hi give a0 b0 a1 b1 | a4 b4 a5 b5 and a2 b2 a3 b3 | a6 b6 a7 b7;
 * the 128-bit permutes put the halves in order. */
__attribute__((target(CD_TARGET))) static void interleave2_add(const float *a, const float *b,
                                                               float bias, float *y, int64_t n)
{
    const __m256 bv = _mm256_set1_ps(bias);
    int64_t i = 0;
    for (; i + CD_LANES <= n; i += CD_LANES) {
        __m256 va = _mm256_add_ps(bv, _mm256_loadu_ps(a + i));
        __m256 vb = _mm256_add_ps(bv, _mm256_loadu_ps(b + i));
        __m256 lo = _mm256_unpacklo_ps(va, vb), hi = _mm256_unpackhi_ps(va, vb);
        _mm256_storeu_ps(y + 2 * i, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(y + 2 * i + CD_LANES, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
    for (; i < n; i++) {
        y[2 * i] = bias + a[i];
        y[2 * i + 1] = bias + b[i];
    }
}

const ld_cd_isa ld_cd_isa_avx2 = {
    .name = "avx2",
    .lanes = CD_LANES,
    .variants = variants,
    .n_variants = (int)(sizeof variants / sizeof variants[0]),
    .pointwise_copy = pointwise_copy,
    .deinterleave2 = deinterleave2,
    .interleave2_add = interleave2_add,
};
