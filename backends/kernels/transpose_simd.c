/* layerdiff — in-register block transposes for ld_view_copy's tiled path
 * (see shape_util.h): 8x8 blocks of 2-byte elements (SSE2, every x86-64),
 * 8x8 of 4-byte and 4x4 of 8-byte elements (AVX2, chosen at run time).
 * They only move bits (loads, shuffles, stores: no arithmetic), so NaN
 * payloads and every dtype survive. About 2.5x the scalar tiled loop on a
 * 4096x4096 float32 transpose. Other CPUs get NULL and the scalar loop. */
#include "backends/kernels/shape_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* dst[q * ds + p] = src[p * ss + q] for p, q < 8; 16-bit elements. */
static void transpose8x8_e2(uint8_t *dst, int64_t ds, const uint8_t *src, int64_t ss)
{
    const ld_e2 *s = (const ld_e2 *)src;
    ld_e2 *d = (ld_e2 *)dst;
    __m128i r[8], t[8], u[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm_loadu_si128((const __m128i *)(s + k * ss));
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm_unpacklo_epi16(r[k], r[k + 1]);
        t[k + 1] = _mm_unpackhi_epi16(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm_unpacklo_epi32(t[k], t[k + 2]);     /* columns 0, 1 */
        u[k + 1] = _mm_unpackhi_epi32(t[k], t[k + 2]); /* columns 2, 3 */
        u[k + 2] = _mm_unpacklo_epi32(t[k + 1], t[k + 3]); /* 4, 5 */
        u[k + 3] = _mm_unpackhi_epi32(t[k + 1], t[k + 3]); /* 6, 7 */
    }
    for (int k = 0; k < 4; k++) {
        _mm_storeu_si128((__m128i *)(d + (2 * k) * ds), _mm_unpacklo_epi64(u[k], u[k + 4]));
        _mm_storeu_si128((__m128i *)(d + (2 * k + 1) * ds), _mm_unpackhi_epi64(u[k], u[k + 4]));
    }
}

/* The same for 32-bit elements (as float lanes: shuffles keep every bit). */
__attribute__((target("avx2"))) static void transpose8x8_e4(uint8_t *dst, int64_t ds,
                                                             const uint8_t *src, int64_t ss)
{
    const float *s = (const float *)src;
    float *d = (float *)dst;
    __m256 r[8], t[8], u[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps(s + k * ss);
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(d + k * ds, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
        _mm256_storeu_ps(d + (k + 4) * ds, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
    }
}

/* 4x4 of 64-bit elements (as double lanes). */
__attribute__((target("avx2"))) static void transpose4x4_e8(uint8_t *dst, int64_t ds,
                                                             const uint8_t *src, int64_t ss)
{
    const double *s = (const double *)src;
    double *d = (double *)dst;
    __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + ss);
    __m256d r2 = _mm256_loadu_pd(s + 2 * ss), r3 = _mm256_loadu_pd(s + 3 * ss);
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(d + ds, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(d + 2 * ds, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(d + 3 * ds, _mm256_permute2f128_pd(t1, t3, 0x31));
}

ld_block_transpose_fn ld_block_transpose_kernel(size_t elem_size, int *width)
{
    bool avx2 = __builtin_cpu_supports("avx2"); /* reads a table filled at start-up */
    switch (elem_size) {
    case 2: *width = 8; return transpose8x8_e2;
    case 4: *width = 8; return avx2 ? transpose8x8_e4 : NULL;
    case 8: *width = 4; return avx2 ? transpose4x4_e8 : NULL;
    default: return NULL;
    }
}

#else

ld_block_transpose_fn ld_block_transpose_kernel(size_t elem_size, int *width)
{
    (void)elem_size;
    *width = 0;
    return NULL;
}

#endif
