/* layerdiff — Clip bound crossings (see clip_crossing.h).
 *
 * Two passes over both tensors: their extremes, then the elements where
 * exactly one side sits at a shared extreme. Every float16, bfloat16 and
 * float32 value is exactly a float32, so both passes run on float32 blocks
 * (float16 and bfloat16 widened by the vector converters of core/round.c),
 * 8 lanes at a time where the CPU has AVX2; the comparisons are equalities
 * and orderings, the same in float32 as in double. Only a float64 side
 * takes the double path. A comparing run calls this for every Clip output
 * of both the accumulated and the isolated run (PaddleOCR det has dozens),
 * so it must cost about a pass of memory, not a scalar widening of each
 * element three times. */
#include <math.h>
#include <string.h>

#include <immintrin.h>

#include "compare/clip_crossing.h"
#include "compare/metrics_internal.h"
#include "layerdiff/round.h"

#define BLOCK 4096

bool ld_clip_crossing_applies(const char *op_type)
{
    return op_type && strcmp(op_type, "Clip") == 0;
}

static bool is_float_dtype(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT16 || d == LD_DTYPE_BFLOAT16 ||
           d == LD_DTYPE_FLOAT64;
}

/* ---- vector level ---------------------------------------------------------------------- */

/* The comparator's level (compare/metrics_fast.c): AVX2 on AVX2 and AVX-512
 * CPUs, portable under LAYERDIFF_NO_SIMD or a test's cmp_force_portable. */
static bool use_avx2(void)
{
#if defined(__x86_64__)
    return cmp_fast_available();
#else
    return false;
#endif
}

/* The shared bounds, as each side holds them; use_* false when that bound
 * is not shared (its comparisons are then skipped). */
typedef struct clip_bounds {
    float r_lo, t_lo, r_hi, t_hi;
    bool use_lo, use_hi;
} clip_bounds;

static void minmax_portable(const float *x, int n, float *lo, float *hi)
{
    float l = *lo, h = *hi;
    for (int i = 0; i < n; i++) { /* a NaN fails both comparisons */
        l = x[i] < l ? x[i] : l;
        h = x[i] > h ? x[i] : h;
    }
    *lo = l;
    *hi = h;
}

static int64_t count_portable(const float *r, const float *t, int n, const clip_bounds *b)
{
    int64_t crossed = 0;
    for (int i = 0; i < n; i++) {
        bool lo_differs = b->use_lo && ((r[i] == b->r_lo) != (t[i] == b->t_lo));
        bool hi_differs = b->use_hi && ((r[i] == b->r_hi) != (t[i] == b->t_hi));
        crossed += lo_differs || hi_differs;
    }
    return crossed;
}

#if defined(__x86_64__)
#define TARGET_AVX2 __attribute__((target("avx2,popcnt")))

static TARGET_AVX2 float hmin8(__m256 v)
{
    __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

static TARGET_AVX2 float hmax8(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* vminps/vmaxps return their second operand when either is NaN: a NaN
 * element leaves the running extremes alone, as in minmax_portable. */
static TARGET_AVX2 void minmax_avx2(const float *x, int n, float *lo, float *hi)
{
    __m256 l0 = _mm256_set1_ps(*lo), h0 = _mm256_set1_ps(*hi), l1 = l0, h1 = h0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_loadu_ps(x + i), c = _mm256_loadu_ps(x + i + 8);
        l0 = _mm256_min_ps(a, l0);
        h0 = _mm256_max_ps(a, h0);
        l1 = _mm256_min_ps(c, l1);
        h1 = _mm256_max_ps(c, h1);
    }
    float l = hmin8(_mm256_min_ps(l0, l1)), h = hmax8(_mm256_max_ps(h0, h1));
    minmax_portable(x + i, n - i, &l, &h);
    *lo = l;
    *hi = h;
}

static TARGET_AVX2 int64_t count_avx2(const float *r, const float *t, int n,
                                      const clip_bounds *b)
{
    const __m256 r_lo = _mm256_set1_ps(b->r_lo), t_lo = _mm256_set1_ps(b->t_lo);
    const __m256 r_hi = _mm256_set1_ps(b->r_hi), t_hi = _mm256_set1_ps(b->t_hi);
    const __m256 ones = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    const __m256 use_lo = b->use_lo ? ones : _mm256_setzero_ps();
    const __m256 use_hi = b->use_hi ? ones : _mm256_setzero_ps();
    int64_t crossed = 0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(r + i), y = _mm256_loadu_ps(t + i);
        __m256 lo = _mm256_xor_ps(_mm256_cmp_ps(x, r_lo, _CMP_EQ_OQ),
                                  _mm256_cmp_ps(y, t_lo, _CMP_EQ_OQ));
        __m256 hi = _mm256_xor_ps(_mm256_cmp_ps(x, r_hi, _CMP_EQ_OQ),
                                  _mm256_cmp_ps(y, t_hi, _CMP_EQ_OQ));
        __m256 any = _mm256_or_ps(_mm256_and_ps(lo, use_lo), _mm256_and_ps(hi, use_hi));
        crossed += __builtin_popcount((unsigned)_mm256_movemask_ps(any));
    }
    return crossed + count_portable(r + i, t + i, n - i, b);
}
#endif

static void minmax(const float *x, int n, float *lo, float *hi)
{
#if defined(__x86_64__)
    if (use_avx2()) {
        minmax_avx2(x, n, lo, hi);
        return;
    }
#endif
    minmax_portable(x, n, lo, hi);
}

static int64_t count_block(const float *r, const float *t, int n, const clip_bounds *b)
{
#if defined(__x86_64__)
    if (use_avx2())
        return count_avx2(r, t, n, b);
#endif
    return count_portable(r, t, n, b);
}

/* ---- float32 path (float16, bfloat16 and float32 tensors) ------------------------------ */

/* Elements [start, start + n) of t as float32: in place for float32, else
 * widened into buf (room for n). */
static const float *float_block(const ld_tensor *t, int64_t start, int n, float *buf)
{
    switch (t->dtype) {
    case LD_DTYPE_FLOAT32:
        return (const float *)t->data + start;
    case LD_DTYPE_FLOAT16:
        ld_convert_fp16_to_fp32((const ld_fp16 *)t->data + start, buf, (size_t)n);
        return buf;
    default: /* BFLOAT16 */
        ld_convert_bf16_to_fp32((const ld_bf16 *)t->data + start, buf, (size_t)n);
        return buf;
    }
}

/* v as the nearest value of dtype d: a bound in the reference's float32 and
 * the same bound in an fp16 test tensor must compare equal. */
static float in_dtype_f(float v, ld_dtype d)
{
    if (d == LD_DTYPE_FLOAT16)
        return ld_fp16_to_fp32(ld_fp32_to_fp16(v));
    if (d == LD_DTYPE_BFLOAT16)
        return ld_bf16_to_fp32(ld_fp32_to_bf16(v));
    return v;
}

static int64_t crossings_float(const ld_tensor *ref, const ld_tensor *test)
{
    float rbuf[BLOCK], tbuf[BLOCK];
    /* +inf and -inf: any non-NaN value moves them, and lo > hi after the
       pass means there was none */
    float r_lo = INFINITY, r_hi = -INFINITY, t_lo = INFINITY, t_hi = -INFINITY;
    for (int64_t start = 0; start < ref->count; start += BLOCK) {
        int n = (int)(ref->count - start < BLOCK ? ref->count - start : BLOCK);
        minmax(float_block(ref, start, n, rbuf), n, &r_lo, &r_hi);
        minmax(float_block(test, start, n, tbuf), n, &t_lo, &t_hi);
    }
    if (r_lo > r_hi || t_lo > t_hi)
        return 0; /* a side of NaNs only: no bound is recognised */
    clip_bounds b = {.r_lo = r_lo, .t_lo = t_lo, .r_hi = r_hi, .t_hi = t_hi};
    b.use_lo = in_dtype_f(r_lo, test->dtype) == t_lo;
    b.use_hi = in_dtype_f(r_hi, test->dtype) == t_hi;
    if (!b.use_lo && !b.use_hi)
        return 0;
    int64_t crossed = 0;
    for (int64_t start = 0; start < ref->count; start += BLOCK) {
        int n = (int)(ref->count - start < BLOCK ? ref->count - start : BLOCK);
        crossed += count_block(float_block(ref, start, n, rbuf), float_block(test, start, n, tbuf),
                               n, &b);
    }
    return crossed;
}

/* ---- double path (a float64 side) ------------------------------------------------------ */

/* Elements [start, start + n) of t as doubles (exact for every float dtype). */
static void load_block(const ld_tensor *t, int64_t start, int n, double *out)
{
    switch (t->dtype) {
    case LD_DTYPE_FLOAT32:
        for (int i = 0; i < n; i++)
            out[i] = ((const float *)t->data)[start + i];
        break;
    case LD_DTYPE_FLOAT64:
        memcpy(out, (const double *)t->data + start, (size_t)n * sizeof *out);
        break;
    case LD_DTYPE_FLOAT16:
        for (int i = 0; i < n; i++)
            out[i] = ld_fp16_to_fp32(((const ld_fp16 *)t->data)[start + i]);
        break;
    default: /* BFLOAT16: is_float_dtype let nothing else through */
        for (int i = 0; i < n; i++)
            out[i] = ld_bf16_to_fp32(((const ld_bf16 *)t->data)[start + i]);
        break;
    }
}

/* Smallest and largest non-NaN value (NaN, NaN when there is none). */
static void extremes(const ld_tensor *t, double *lo, double *hi)
{
    double buf[BLOCK];
    *lo = NAN;
    *hi = NAN;
    for (int64_t start = 0; start < t->count; start += BLOCK) {
        int n = (int)(t->count - start < BLOCK ? t->count - start : BLOCK);
        load_block(t, start, n, buf);
        for (int i = 0; i < n; i++) {
            if (isnan(buf[i]))
                continue;
            if (!(buf[i] >= *lo))
                *lo = buf[i];
            if (!(buf[i] <= *hi))
                *hi = buf[i];
        }
    }
}

static double in_dtype(double v, ld_dtype d)
{
    if (d == LD_DTYPE_FLOAT16)
        return ld_fp16_to_fp32(ld_fp32_to_fp16((float)v));
    if (d == LD_DTYPE_BFLOAT16)
        return ld_bf16_to_fp32(ld_fp32_to_bf16((float)v));
    if (d == LD_DTYPE_FLOAT32)
        return (float)v;
    return v;
}

static int64_t crossings_double(const ld_tensor *ref, const ld_tensor *test)
{
    double r_lo, r_hi, t_lo, t_hi;
    extremes(ref, &r_lo, &r_hi);
    extremes(test, &t_lo, &t_hi);
    /* NaN (no value) compares unequal, so a side of NaNs only recognises no bound */
    bool has_lo = in_dtype(r_lo, test->dtype) == t_lo;
    bool has_hi = in_dtype(r_hi, test->dtype) == t_hi;
    if (!has_lo && !has_hi)
        return 0;
    double rb[BLOCK], tb[BLOCK];
    int64_t crossed = 0;
    for (int64_t start = 0; start < ref->count; start += BLOCK) {
        int n = (int)(ref->count - start < BLOCK ? ref->count - start : BLOCK);
        load_block(ref, start, n, rb);
        load_block(test, start, n, tb);
        for (int i = 0; i < n; i++) {
            bool lo_differs = has_lo && ((rb[i] == r_lo) != (tb[i] == t_lo));
            bool hi_differs = has_hi && ((rb[i] == r_hi) != (tb[i] == t_hi));
            crossed += lo_differs || hi_differs;
        }
    }
    return crossed;
}

int64_t ld_clip_crossings(const ld_tensor *ref, const ld_tensor *test)
{
    if (!ref || !test || !is_float_dtype(ref->dtype) || !is_float_dtype(test->dtype) ||
        ref->count != test->count || ref->count == 0)
        return 0;
    if (ref->dtype == LD_DTYPE_FLOAT64 || test->dtype == LD_DTYPE_FLOAT64)
        return crossings_double(ref, test);
    return crossings_float(ref, test);
}
