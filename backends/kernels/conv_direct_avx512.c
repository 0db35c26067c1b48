/* layerdiff — the direct convolution's kernels for AVX-512F: 16 lanes,
 * zmm registers, tiles of MB x NV <= 24 accumulators (of 32 registers;
 * the rest hold NV input vectors and a weight broadcast). The bodies are
 * conv_direct_body.h's; the plan and the choice: conv_direct.c. */
#include <immintrin.h>
#include <stdint.h>

#include "backends/kernels/conv_direct_internal.h"
#include "backends/kernels/fp16_split.h"

#define CD_TARGET "avx512f"
#define CD_LANES 16
#define CD_MAX_ACC 24
#define CD_VEC __m512
#define CD_ZERO() _mm512_setzero_ps()
#define CD_LOADU(p) _mm512_loadu_ps(p)
#define CD_LOAD_N(p, n) _mm512_maskz_loadu_ps(lanes_below(n), (p))
#define CD_STOREU(p, v) _mm512_storeu_ps((p), (v))
#define CD_STORE_N(p, v, n) _mm512_mask_storeu_ps((p), lanes_below(n), (v))
#define CD_SET1(f) _mm512_set1_ps(f)
#define CD_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define CD_ADD(a, b) _mm512_add_ps((a), (b))
#define CD_FP16_PLAIN(v) ld_fp16_plain16(v)
#define CD_FP16_ROUND(v) ld_fp16_split16(v)

/* Lanes [0, n) of 16 (none for n <= 0, all for n >= 16). */
static inline __mmask16 lanes_below(int64_t n)
{
    return (__mmask16)(n <= 0 ? 0u : n >= CD_LANES ? 0xFFFFu : (1u << n) - 1u);
}

#include "backends/kernels/conv_direct_body.h"

CD_VARIANT(24, 1)
CD_VARIANT(16, 1)
CD_VARIANT(12, 1)
CD_VARIANT(12, 2)
CD_VARIANT(8, 1)
CD_VARIANT(8, 2)
CD_VARIANT(8, 3)
CD_VARIANT(4, 1)
CD_VARIANT(4, 2)
CD_VARIANT(4, 3)
CD_VARIANT(4, 4)
CD_VARIANT(4, 5)
CD_VARIANT(4, 6)

/* Tiles of at most 24 accumulators whose FMA and load slots balance (see
 * conv_direct.c's cost model). */
static const ld_cd_variant variants[] = {
    {24, 1, {tile_24_1}, {pointwise_24_1}},
    {16, 1, {tile_16_1}, {pointwise_16_1}},
    {12, 2, {tile_12_1, tile_12_2}, {pointwise_12_1, pointwise_12_2}},
    {8, 3, {tile_8_1, tile_8_2, tile_8_3}, {pointwise_8_1, pointwise_8_2, pointwise_8_3}},
    {4, 6, {tile_4_1, tile_4_2, tile_4_3, tile_4_4, tile_4_5, tile_4_6},
     {pointwise_4_1, pointwise_4_2, pointwise_4_3, pointwise_4_4, pointwise_4_5, pointwise_4_6}},
};

__attribute__((target(CD_TARGET))) static int64_t deinterleave2(const float *src, int64_t n,
                                                                float *even, float *odd)
{
    const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4,
                                        2, 0);
    const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5,
                                        3, 1);
    int64_t i = 0;
    for (; i + 2 * CD_LANES <= n; i += 2 * CD_LANES) {
        __m512 a = _mm512_loadu_ps(src + i), b = _mm512_loadu_ps(src + i + CD_LANES);
        _mm512_storeu_ps(even + i / 2, _mm512_permutex2var_ps(a, ev, b));
        _mm512_storeu_ps(odd + i / 2, _mm512_permutex2var_ps(a, od, b));
    }
    return i;
}

__attribute__((target(CD_TARGET))) static void interleave2_add(const float *a, const float *b,
                                                               float bias, float *y, int64_t n)
{
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                        24, 8);
    const __m512 bv = _mm512_set1_ps(bias);
    int64_t i = 0;
    for (; i + CD_LANES <= n; i += CD_LANES) {
        __m512 va = _mm512_add_ps(bv, _mm512_loadu_ps(a + i));
        __m512 vb = _mm512_add_ps(bv, _mm512_loadu_ps(b + i));
        _mm512_storeu_ps(y + 2 * i, _mm512_permutex2var_ps(va, lo, vb));
        _mm512_storeu_ps(y + 2 * i + CD_LANES, _mm512_permutex2var_ps(va, hi, vb));
    }
    for (; i < n; i++) {
        y[2 * i] = bias + a[i];
        y[2 * i + 1] = bias + b[i];
    }
}

const ld_cd_isa ld_cd_isa_avx512 = {
    .name = "avx512",
    .lanes = CD_LANES,
    .variants = variants,
    .n_variants = (int)(sizeof variants / sizeof variants[0]),
    .pointwise_copy = pointwise_copy,
    .deinterleave2 = deinterleave2,
    .interleave2_add = interleave2_add,
};
