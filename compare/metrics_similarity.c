/* layerdiff — Σrt, Σr² and Σt² for the cosine, snr_db and l2_rel when the
 * AVX-512 kernel's derived ones are not accurate (metrics_internal.h,
 * cmp_acc: rt_scale; docs/metrics.md, "Similarity"): a second pass, each
 * product exact (float32 in double) or with its rounding error (float64, by
 * fma), every addition compensated (Knuth's TwoSum). */
#include <immintrin.h>
#include <math.h>

#include "compare/metrics_internal.h"

#define TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw")))
#define INLINE inline __attribute__((always_inline))

bool cmp_similarity_inexact(const cmp_acc *acc)
{
    /* a derived sum is off by a few ulps of its scale: accepted when that is
       within a factor 4 of the result (2Σrt for Σrt, whose scale is that of
       2Σrt = Σr² + Σt² - Σ(t-r)²), so within a few ulps of it, whatever the
       cancellation. Like-scaled tensors with a cosine above ~0.4 pass. */
    double srt = acc->srt + acc->srt_lo, srr = acc->srr + acc->srr_lo;
    double stt = acc->stt + acc->stt_lo;
    return acc->rt_scale > 8.0 * fabs(srt) || acc->rr_scale > 4.0 * srr ||
           acc->tt_scale > 4.0 * stt;
}

void cmp_similarity_double(const double *r, const double *t, int m, cmp_acc *acc)
{
    for (int i = 0; i < m; i++)
        if (isfinite(r[i]) && isfinite(t[i])) {
            /* r t of doubles is not exact: its rounding error (an fma) joins lo */
            double rt = r[i] * t[i], rr = r[i] * r[i], tt = t[i] * t[i];
            cmp_sum2_add(&acc->srt, &acc->srt_lo, rt);
            cmp_sum2_add(&acc->srr, &acc->srr_lo, rr);
            cmp_sum2_add(&acc->stt, &acc->stt_lo, tt);
            acc->srt_lo += fma(r[i], t[i], -rt);
            acc->srr_lo += fma(r[i], r[i], -rr);
            acc->stt_lo += fma(t[i], t[i], -tt);
        }
}

/* hi + lo += x, per lane (TwoSum) */
TARGET static INLINE void sum2_add8(__m512d *hi, __m512d *lo, __m512d x)
{
    __m512d sum = _mm512_add_pd(*hi, x), x_part = _mm512_sub_pd(sum, *hi);
    *lo = _mm512_add_pd(*lo, _mm512_add_pd(_mm512_sub_pd(*hi, _mm512_sub_pd(sum, x_part)),
                                           _mm512_sub_pd(x, x_part)));
    *hi = sum;
}

TARGET static void similarity_float_avx512(const float *r, const float *t, int m, cmp_acc *acc)
{
    /* float products are exact in double: TwoSum alone keeps every bit */
    __m512d hi[3], lo[3];
    for (int k = 0; k < 3; k++)
        hi[k] = lo[k] = _mm512_setzero_pd();
    for (int i = 0; i < m; i += 8) {
        /* 4 KiB ahead, as the kernel: without it the pass waits on memory */
        _mm_prefetch((const char *)(r + i + 1024), _MM_HINT_T0);
        _mm_prefetch((const char *)(t + i + 1024), _MM_HINT_T0);
        __mmask8 in = m - i >= 8 ? 0xff : (__mmask8)((1u << (m - i)) - 1);
        __m512d rd = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(in, r + i));
        __m512d td = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(in, t + i));
        /* finite pairs only: x - x is 0 exactly when x is finite */
        __mmask8 finite = _mm512_cmp_pd_mask(_mm512_sub_pd(rd, rd), _mm512_sub_pd(td, td),
                                             _CMP_EQ_OQ);
        rd = _mm512_maskz_mov_pd(finite, rd);
        td = _mm512_maskz_mov_pd(finite, td);
        sum2_add8(&hi[0], &lo[0], _mm512_mul_pd(rd, td));
        sum2_add8(&hi[1], &lo[1], _mm512_mul_pd(rd, rd));
        sum2_add8(&hi[2], &lo[2], _mm512_mul_pd(td, td));
    }
    double *dst_hi[3] = {&acc->srt, &acc->srr, &acc->stt};
    double *dst_lo[3] = {&acc->srt_lo, &acc->srr_lo, &acc->stt_lo};
    for (int k = 0; k < 3; k++) {
        double h[8], l[8];
        _mm512_storeu_pd(h, hi[k]);
        _mm512_storeu_pd(l, lo[k]);
        for (int lane = 0; lane < 8; lane++) {
            cmp_sum2_add(dst_hi[k], dst_lo[k], h[lane]);
            *dst_lo[k] += l[lane];
        }
    }
}

/* The vector kernel in use sums them (the AVX2 one in metrics_fast_avx2_exact.c). */
void cmp_similarity_float_fast(const float *r, const float *t, int m, cmp_acc *acc)
{
    if (cmp_fast_level() == CMP_LEVEL_AVX512)
        similarity_float_avx512(r, t, m, acc);
    else
        cmp_similarity_float_avx2(r, t, m, acc);
}
