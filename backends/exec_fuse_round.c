/* layerdiff — the block-wise "all plain" float16 rounding of a fused
 * chain's Add/Sub/Mul/Div/Clip/Relu (see exec_fuse_ops.h,
 * ld_fuse_round_plain; docs/architecture.md "Emulated engine cost").
 *
 * Why: inside a fused chain a block (<= 1024 values) lives in L1, so the
 * emulated engine's per-node rounding is no longer hidden under memory
 * traffic: the per-group loops (elementwise_round.c, activation_round.c)
 * spend ~35 instructions per 16 values on the op, the "counts nothing"
 * test of each group of 16 with its branch, and the rounding, against ~6
 * for the reference's op. On PaddleOCR det (Zen 3, AVX2, one thread) the
 * chains' rounded ops took ~55 ms of CPU per run against the reference's
 * ~20. Nearly every block of det is plain throughout (zeros and
 * magnitudes in [2^-14, 65520)), so this loop does not test per group:
 * it stores every lane's rounding and only folds the lanes' magnitudes
 * into a running unsigned minimum of |v| - 1 and maximum of |v| (four
 * integer operations per 8 values, no branch), and looks at them once per
 * block. A block with any other lane is reported back and recomputed by
 * the per-group path from its inputs, which the caller keeps intact.
 *
 * Values: the op is one IEEE operation (Add/Sub/Mul/Div) or the clamp of
 * activation_round.c (ordered compares and blends), as the per-group
 * loops'; the rounding is fp16_split.h's, equal to vcvtps2ph (nearest
 * even) + vcvtph2ps on every plain value, which is what the per-group
 * loops store for a group whose values are all plain. So a block this loop
 * accepts holds the same bits as the per-group path would have written,
 * and neither hands anything to round_block (no counter changes). A block
 * it rejects (a NaN, an infinity, a tiny or huge value in it) is wholly
 * rewritten by the per-group path. */
#include "backends/exec_fuse_ops.h"

#include <stdatomic.h>

static atomic_int forced_plain = -1, forced_avx512 = -1;

void ld_fuse_round_plain_force_avx512(int mode)
{
    atomic_store_explicit(&forced_avx512, mode < 0 ? -1 : mode > 0, memory_order_relaxed);
}

void ld_fuse_round_plain_force(int mode)
{
    atomic_store_explicit(&forced_plain, mode < 0 ? -1 : mode > 0, memory_order_relaxed);
}

bool ld_fuse_round_plain_enabled(void)
{
    return atomic_load_explicit(&forced_plain, memory_order_relaxed) != 0;
}

#if defined(__x86_64__)

#include <immintrin.h>

#include "backends/kernels/fp16_split.h"

/* AVX2 only (no FMA: the split's multiply and subtractions must stay three
 * separately rounded operations). */
#define AVX2 __attribute__((target("avx2")))

AVX2 static inline __m256 arith8(int op, __m256 x, __m256 y)
{
    switch (op) {
    case LD_FUSE_ADD: return _mm256_add_ps(x, y);
    case LD_FUSE_SUB: return _mm256_sub_ps(x, y);
    case LD_FUSE_MUL: return _mm256_mul_ps(x, y);
    default: return _mm256_div_ps(x, y);
    }
}

/* activation_round.c's clamp8: CLIP_EXPR with ordered compares (NaN stays
 * x; such a block is rejected anyway). */
AVX2 static inline __m256 clamp8(__m256 x, __m256 lo, __m256 hi)
{
    __m256 t = _mm256_blendv_ps(x, lo, _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    return _mm256_blendv_ps(t, hi, _mm256_cmp_ps(t, hi, _CMP_GT_OQ));
}

/* d[0, n) (n a multiple of 8) = the split roundings of op's results; true
 * when every result was plain. Inlined into one function per op and
 * stride case, so neither is tested per vector. */
AVX2 static inline __attribute__((always_inline)) bool
plain_body(int op, float *d, const float *pa, const float *pb, bool a_row, bool b_row,
           float lo_, float hi_, int64_t n)
{
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1);
    const __m256 ca = a_row ? _mm256_setzero_ps() : _mm256_set1_ps(pa[0]);
    const __m256 cb = b_row || op > LD_FUSE_DIV ? _mm256_setzero_ps() : _mm256_set1_ps(pb[0]);
    const __m256 lo = _mm256_set1_ps(lo_), hi = _mm256_set1_ps(hi_);
    /* min over lanes of |v| - 1 (unsigned: a zero wraps to the top), max of |v| */
    __m256i umin = _mm256_set1_epi32(-1), amax = _mm256_setzero_si256();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 v;
        if (op <= LD_FUSE_DIV)
            v = arith8(op, a_row ? _mm256_loadu_ps(pa + i) : ca,
                       b_row ? _mm256_loadu_ps(pb + i) : cb);
        else
            v = clamp8(_mm256_loadu_ps(pa + i), lo, hi);
        __m256i a = _mm256_and_si256(_mm256_castps_si256(v), magnitude);
        umin = _mm256_min_epu32(umin, _mm256_sub_epi32(a, one));
        amax = _mm256_max_epi32(amax, a); /* NaN and inf are above every plain value */
        _mm256_storeu_ps(d + i, ld_fp16_split8(v));
    }
    /* ld_fp16_plain8's test on the folded lanes */
    __m256i lo_bound = _mm256_set1_epi32(LD_FP16_SPLIT_LO - 1);
    __m256i lo_ok = _mm256_cmpeq_epi32(_mm256_max_epu32(umin, lo_bound), umin);
    __m256i hi_ok = _mm256_cmpgt_epi32(_mm256_set1_epi32(LD_FP16_SPLIT_HI), amax);
    return _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(lo_ok, hi_ok))) == 0xFF;
}

/* In place (d may be pa or pb): groups of 32 results (4 vectors) are
 * tested before any is stored, and the first group that is not all plain
 * ends the loop, so its inputs and all after it are still unread and
 * unwritten. Returns how many values from the start were stored rounded
 * (a multiple of 32). The test per group costs more than plain_body's per
 * block, but the block needs no copy to keep the inputs for a redo. */
AVX2 static inline __attribute__((always_inline)) int64_t
prefix_body(int op, float *d, const float *pa, const float *pb, bool a_row, bool b_row,
            float lo_, float hi_, int64_t n)
{
    const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1);
    const __m256i lo_bound = _mm256_set1_epi32(LD_FP16_SPLIT_LO - 1);
    const __m256i hi_bound = _mm256_set1_epi32(LD_FP16_SPLIT_HI);
    const __m256 ca = a_row ? _mm256_setzero_ps() : _mm256_set1_ps(pa[0]);
    const __m256 cb = b_row || op > LD_FUSE_DIV ? _mm256_setzero_ps() : _mm256_set1_ps(pb[0]);
    const __m256 lo = _mm256_set1_ps(lo_), hi = _mm256_set1_ps(hi_);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v[4];
        __m256i umin = _mm256_set1_epi32(-1), amax = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            int64_t at = i + 8 * k;
            if (op <= LD_FUSE_DIV)
                v[k] = arith8(op, a_row ? _mm256_loadu_ps(pa + at) : ca,
                              b_row ? _mm256_loadu_ps(pb + at) : cb);
            else
                v[k] = clamp8(_mm256_loadu_ps(pa + at), lo, hi);
            __m256i a = _mm256_and_si256(_mm256_castps_si256(v[k]), magnitude);
            umin = _mm256_min_epu32(umin, _mm256_sub_epi32(a, one));
            amax = _mm256_max_epi32(amax, a);
        }
        __m256i lo_ok = _mm256_cmpeq_epi32(_mm256_max_epu32(umin, lo_bound), umin);
        __m256i hi_ok = _mm256_cmpgt_epi32(hi_bound, amax);
        if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(lo_ok, hi_ok))) != 0xFF)
            break;
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++)
            _mm256_storeu_ps(d + i + 8 * k, ld_fp16_split8(v[k]));
    }
    return i;
}

typedef bool (*plain_loop)(float *d, const float *pa, const float *pb, float lo, float hi,
                           int64_t n);
typedef int64_t (*prefix_loop)(float *d, const float *pa, const float *pb, float lo, float hi,
                               int64_t n);

#define PLAIN_LOOP(name, op, a_row, b_row)                                                  \
    AVX2 static bool name(float *d, const float *pa, const float *pb, float lo, float hi,  \
                          int64_t n)                                                        \
    {                                                                                       \
        return plain_body(op, d, pa, pb, a_row, b_row, lo, hi, n);                          \
    }                                                                                       \
    AVX2 static int64_t name##_prefix(float *d, const float *pa, const float *pb, float lo, \
                                      float hi, int64_t n)                                  \
    {                                                                                       \
        return prefix_body(op, d, pa, pb, a_row, b_row, lo, hi, n);                         \
    }
#define PLAIN_LOOPS(sfx, op)                                                                \
    PLAIN_LOOP(sfx##_rows, op, true, true)                                                  \
    PLAIN_LOOP(sfx##_a_scalar, op, false, true)                                             \
    PLAIN_LOOP(sfx##_b_scalar, op, true, false)
PLAIN_LOOPS(add, LD_FUSE_ADD)
PLAIN_LOOPS(sub, LD_FUSE_SUB)
PLAIN_LOOPS(mul, LD_FUSE_MUL)
PLAIN_LOOPS(div, LD_FUSE_DIV)
PLAIN_LOOP(clamp_row, LD_FUSE_CLIP, true, false)

/* [op - 1][stride case]: both rows, a broadcast, b broadcast */
static const plain_loop arith_loops[4][3] = {
    {add_rows, add_a_scalar, add_b_scalar},
    {sub_rows, sub_a_scalar, sub_b_scalar},
    {mul_rows, mul_a_scalar, mul_b_scalar},
    {div_rows, div_a_scalar, div_b_scalar},
};
static const prefix_loop arith_prefix_loops[4][3] = {
    {add_rows_prefix, add_a_scalar_prefix, add_b_scalar_prefix},
    {sub_rows_prefix, sub_a_scalar_prefix, sub_b_scalar_prefix},
    {mul_rows_prefix, mul_a_scalar_prefix, mul_b_scalar_prefix},
    {div_rows_prefix, div_a_scalar_prefix, div_b_scalar_prefix},
};

/* The same loops 16 lanes wide (AVX-512F): the same IEEE operation, the
 * same ordered compares and blends for the clamp, the same split and the
 * same folded test per lane, so the same bits and the same verdicts; a
 * block's last 8 values (n a multiple of 8, not of 16) in masked lanes.
 * On Zen 5 the chains' rounded ops of PaddleOCR det took about twice the
 * reference's unrounded ops in the AVX2 loops. */
#define AVX512 __attribute__((target("avx512f")))

AVX512 static inline __m512 arith16(int op, __m512 x, __m512 y)
{
    switch (op) {
    case LD_FUSE_ADD: return _mm512_add_ps(x, y);
    case LD_FUSE_SUB: return _mm512_sub_ps(x, y);
    case LD_FUSE_MUL: return _mm512_mul_ps(x, y);
    default: return _mm512_div_ps(x, y);
    }
}

AVX512 static inline __m512 clamp16(__m512 x, __m512 lo, __m512 hi)
{
    __m512 t = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), x, lo);
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(t, hi, _CMP_GT_OQ), t, hi);
}

/* op's 16 (or, under mask k, fewer) results from offset i */
AVX512 static inline __attribute__((always_inline)) __m512
op16(int op, const float *pa, const float *pb, bool a_row, bool b_row, __m512 ca, __m512 cb,
     __m512 lo, __m512 hi, int64_t i, __mmask16 k)
{
    if (op <= LD_FUSE_DIV)
        return arith16(op, a_row ? _mm512_maskz_loadu_ps(k, pa + i) : ca,
                       b_row ? _mm512_maskz_loadu_ps(k, pb + i) : cb);
    return clamp16(_mm512_maskz_loadu_ps(k, pa + i), lo, hi);
}

/* the folded lanes' verdict: every |v| zero or in [LO, HI) */
AVX512 static inline bool plain_fold16(__m512i umin, __m512i amax)
{
    __mmask16 ok =
        _mm512_cmp_epu32_mask(umin, _mm512_set1_epi32(LD_FP16_SPLIT_LO - 1), _MM_CMPINT_NLT) &
        _mm512_cmp_epi32_mask(amax, _mm512_set1_epi32(LD_FP16_SPLIT_HI), _MM_CMPINT_LT);
    return ok == 0xFFFF;
}

AVX512 static inline __attribute__((always_inline)) bool
plain_body16(int op, float *d, const float *pa, const float *pb, bool a_row, bool b_row,
             float lo_, float hi_, int64_t n)
{
    const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF), one = _mm512_set1_epi32(1);
    const __m512 ca = a_row ? _mm512_setzero_ps() : _mm512_set1_ps(pa[0]);
    const __m512 cb = b_row || op > LD_FUSE_DIV ? _mm512_setzero_ps() : _mm512_set1_ps(pb[0]);
    const __m512 lo = _mm512_set1_ps(lo_), hi = _mm512_set1_ps(hi_);
    __m512i umin = _mm512_set1_epi32(-1), amax = _mm512_setzero_si512();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = op16(op, pa, pb, a_row, b_row, ca, cb, lo, hi, i, 0xFFFF);
        __m512i a = _mm512_and_si512(_mm512_castps_si512(v), magnitude);
        umin = _mm512_min_epu32(umin, _mm512_sub_epi32(a, one));
        amax = _mm512_max_epi32(amax, a);
        _mm512_storeu_ps(d + i, ld_fp16_split16(v));
    }
    if (i < n) { /* 8 left: the low lanes */
        const __mmask16 k = 0x00FF;
        __m512 v = op16(op, pa, pb, a_row, b_row, ca, cb, lo, hi, i, k);
        __m512i a = _mm512_and_si512(_mm512_castps_si512(v), magnitude);
        umin = _mm512_mask_min_epu32(umin, k, umin, _mm512_sub_epi32(a, one));
        amax = _mm512_mask_max_epi32(amax, k, amax, a);
        _mm512_mask_storeu_ps(d + i, k, ld_fp16_split16(v));
    }
    return plain_fold16(umin, amax);
}

AVX512 static inline __attribute__((always_inline)) int64_t
prefix_body16(int op, float *d, const float *pa, const float *pb, bool a_row, bool b_row,
              float lo_, float hi_, int64_t n)
{
    const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF), one = _mm512_set1_epi32(1);
    const __m512 ca = a_row ? _mm512_setzero_ps() : _mm512_set1_ps(pa[0]);
    const __m512 cb = b_row || op > LD_FUSE_DIV ? _mm512_setzero_ps() : _mm512_set1_ps(pb[0]);
    const __m512 lo = _mm512_set1_ps(lo_), hi = _mm512_set1_ps(hi_);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 v0 = op16(op, pa, pb, a_row, b_row, ca, cb, lo, hi, i, 0xFFFF);
        __m512 v1 = op16(op, pa, pb, a_row, b_row, ca, cb, lo, hi, i + 16, 0xFFFF);
        __m512i a0 = _mm512_and_si512(_mm512_castps_si512(v0), magnitude);
        __m512i a1 = _mm512_and_si512(_mm512_castps_si512(v1), magnitude);
        __m512i umin = _mm512_min_epu32(_mm512_sub_epi32(a0, one), _mm512_sub_epi32(a1, one));
        if (!plain_fold16(umin, _mm512_max_epi32(a0, a1)))
            break;
        _mm512_storeu_ps(d + i, ld_fp16_split16(v0));
        _mm512_storeu_ps(d + i + 16, ld_fp16_split16(v1));
    }
    return i;
}

#define PLAIN_LOOP16(name, op, a_row, b_row)                                                \
    AVX512 static bool name##16(float *d, const float *pa, const float *pb, float lo,       \
                                float hi, int64_t n)                                        \
    {                                                                                       \
        return plain_body16(op, d, pa, pb, a_row, b_row, lo, hi, n);                        \
    }                                                                                       \
    AVX512 static int64_t name##_prefix16(float *d, const float *pa, const float *pb,       \
                                          float lo, float hi, int64_t n)                    \
    {                                                                                       \
        return prefix_body16(op, d, pa, pb, a_row, b_row, lo, hi, n);                       \
    }
#define PLAIN_LOOPS16(sfx, op)                                                              \
    PLAIN_LOOP16(sfx##_rows, op, true, true)                                                \
    PLAIN_LOOP16(sfx##_a_scalar, op, false, true)                                           \
    PLAIN_LOOP16(sfx##_b_scalar, op, true, false)
PLAIN_LOOPS16(add, LD_FUSE_ADD)
PLAIN_LOOPS16(sub, LD_FUSE_SUB)
PLAIN_LOOPS16(mul, LD_FUSE_MUL)
PLAIN_LOOPS16(div, LD_FUSE_DIV)
PLAIN_LOOP16(clamp_row, LD_FUSE_CLIP, true, false)

static const plain_loop arith_loops16[4][3] = {
    {add_rows16, add_a_scalar16, add_b_scalar16},
    {sub_rows16, sub_a_scalar16, sub_b_scalar16},
    {mul_rows16, mul_a_scalar16, mul_b_scalar16},
    {div_rows16, div_a_scalar16, div_b_scalar16},
};
static const prefix_loop arith_prefix_loops16[4][3] = {
    {add_rows_prefix16, add_a_scalar_prefix16, add_b_scalar_prefix16},
    {sub_rows_prefix16, sub_a_scalar_prefix16, sub_b_scalar_prefix16},
    {mul_rows_prefix16, mul_a_scalar_prefix16, mul_b_scalar_prefix16},
    {div_rows_prefix16, div_a_scalar_prefix16, div_b_scalar_prefix16},
};

/* The AVX-512 loops when the CPU has AVX-512F (and tests do not forbid them). */
static bool use_avx512(void)
{
    int f = atomic_load_explicit(&forced_avx512, memory_order_relaxed);
    return f != 0 && __builtin_cpu_supports("avx512f");
}

#endif

bool ld_fuse_round_plain(int op, float *d, ld_fuse_arg a, ld_fuse_arg b, float lo, float hi,
                         int64_t n)
{
#if defined(__x86_64__)
    if (n <= 0 || n % 8 != 0 || !__builtin_cpu_supports("avx2"))
        return false;
    bool w = use_avx512();
    switch (op) {
    case LD_FUSE_ADD:
    case LD_FUSE_SUB:
    case LD_FUSE_MUL:
    case LD_FUSE_DIV:
        if (!a.p && !b.p)
            return false;
    {
        int c = a.p && b.p ? 0 : a.p ? 2 : 1;
        plain_loop f = w ? arith_loops16[op - 1][c] : arith_loops[op - 1][c];
        return f(d, a.p ? a.p : &a.s, b.p ? b.p : &b.s, lo, hi, n);
    }
    case LD_FUSE_CLIP:
    case LD_FUSE_RELU: return a.p && (w ? clamp_row16 : clamp_row)(d, a.p, NULL, lo, hi, n);
    default: return false;
    }
#else
    (void)op, (void)d, (void)a, (void)b, (void)lo, (void)hi, (void)n;
    return false;
#endif
}

int64_t ld_fuse_round_plain_prefix(int op, float *d, ld_fuse_arg a, ld_fuse_arg b, float lo,
                                   float hi, int64_t n)
{
#if defined(__x86_64__)
    if (n < 32 || !__builtin_cpu_supports("avx2"))
        return 0;
    bool w = use_avx512();
    switch (op) {
    case LD_FUSE_ADD:
    case LD_FUSE_SUB:
    case LD_FUSE_MUL:
    case LD_FUSE_DIV:
        if (!a.p && !b.p)
            return 0;
    {
        int c = a.p && b.p ? 0 : a.p ? 2 : 1;
        prefix_loop f = w ? arith_prefix_loops16[op - 1][c] : arith_prefix_loops[op - 1][c];
        return f(d, a.p ? a.p : &a.s, b.p ? b.p : &b.s, lo, hi, n);
    }
    case LD_FUSE_CLIP:
    case LD_FUSE_RELU:
        return a.p ? (w ? clamp_row_prefix16 : clamp_row_prefix)(d, a.p, NULL, lo, hi, n) : 0;
    default: return 0;
    }
#else
    (void)op, (void)d, (void)a, (void)b, (void)lo, (void)hi, (void)n;
    return 0;
#endif
}
