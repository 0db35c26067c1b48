/* layerdiff — rounding with counting for the emulated backend (see
 * emulated_count.h). One version per instruction-set level
 * (emulated_count_internal.h), picked per call:
 *  - portable: the rounding library's values (ld_round_array), then a scalar
 *    count of the values before and after;
 *  - AVX2 + F16C (emulated_count_avx2.c): fp16 (subnormals kept), bf16 and
 *    tf32 round and count in one pass; fp16 with flushing rounds with the
 *    library and counts in vector code;
 *  - AVX-512: fp16 without flushing rounds and counts in one pass here,
 *    everything else rounds with the library and counts in vector code.
 * The fused paths use the instructions (and rounding immediate) or the
 * integer formula of the library's own vector code, so every level gives the
 * library's values to the bit and the portable count
 * (tests/exhaustive_emulation.c checks all 2^32 inputs at every level). */
#include "backends/emulated_count.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>

#include "backends/emulated_count_internal.h"

/* Elements per task: small enough to split a layer over threads, and
 * 32-bit counters per chunk cannot overflow. */
#define CHUNK ((int64_t)1 << 16)
/* Below this a tensor is counted on one thread: at ~0.05 ns per value,
 * 2^18 values take ~13 us, about what waking a sleeping OpenMP worker costs
 * in these VMs (kernels/kernel_util.h); 2^16 made the small fixtures slower. */
#define PARALLEL_MIN ((int64_t)1 << 18)
/* In-place rounding keeps the values before rounding here, this many at a time. */
#define STACK_COPY 2048

/* --- levels --------------------------------------------------------------------------- */

static atomic_int forced_level = LD_EMU_LEVEL_AUTO;

const char *ld_emu_level_name(ld_emu_level level)
{
    switch (level) {
    case LD_EMU_LEVEL_PORTABLE: return "portable";
    case LD_EMU_LEVEL_AVX2: return "avx2";
    case LD_EMU_LEVEL_AVX512F: return "avx512f";
    case LD_EMU_LEVEL_AVX512: return "avx512";
    default: return "unknown";
    }
}

bool ld_emu_level_supported(ld_emu_level level)
{
    __builtin_cpu_init();
    switch (level) {
    case LD_EMU_LEVEL_PORTABLE: return true;
    case LD_EMU_LEVEL_AVX2: return ld_round_isa_supported(LD_ROUND_ISA_AVX2);
    case LD_EMU_LEVEL_AVX512F: return __builtin_cpu_supports("avx512f");
    case LD_EMU_LEVEL_AVX512: return ld_round_isa_supported(LD_ROUND_ISA_AVX512);
    default: return false;
    }
}

ld_emu_level ld_emu_level_active(void)
{
    int forced = atomic_load_explicit(&forced_level, memory_order_relaxed);
    if (forced >= 0)
        return (ld_emu_level)forced;
    switch (ld_round_isa_active()) {
    case LD_ROUND_ISA_AVX512: return LD_EMU_LEVEL_AVX512;
    case LD_ROUND_ISA_AVX2: return LD_EMU_LEVEL_AVX2;
    default: return LD_EMU_LEVEL_PORTABLE;
    }
}

bool ld_emu_force_level(ld_emu_level level)
{
    if (level != LD_EMU_LEVEL_AUTO && !ld_emu_level_supported(level))
        return false;
    atomic_store_explicit(&forced_level, (int)level, memory_order_relaxed);
    return true;
}

static inline uint32_t abs_bits(const float *p)
{
    uint32_t u;
    memcpy(&u, p, sizeof u);
    return u & 0x7FFFFFFFu;
}

static uint32_t min_normal_bits(ld_precision p)
{
    return p == LD_PRECISION_FP16 ? 0x38800000u : 0x00800000u;
}

static void add_tally(ld_emu_tally *t, uint32_t ov, uint32_t un, uint32_t sub, uint32_t inf,
                      uint32_t nan)
{
    t->overflows += ov, t->underflows += un, t->subnormals += sub;
    t->src_infs += inf, t->src_nans += nan;
}

/* --- counting a rounding (src -> after, both fp32) ------------------------------------- */

static void count_pair_portable(const float *src, const float *after, int64_t m,
                                uint32_t min_normal, ld_emu_tally *t)
{
    uint32_t ov = 0, un = 0, sub = 0, inf = 0, nan = 0;
    for (int64_t i = 0; i < m; i++) {
        uint32_t a = abs_bits(&src[i]), r = abs_bits(&after[i]);
        ov += (r == 0x7F800000u) & (a < 0x7F800000u);
        un += (r == 0) & (a != 0);
        sub += (r - 1u) < min_normal - 1u;
        inf += a == 0x7F800000u;
        nan += a > 0x7F800000u;
    }
    add_tally(t, ov, un, sub, inf, nan);
}

#define AVX512 __attribute__((target("avx512f")))

/* Counts 16 lanes into vector counters (a = |src| bits, r = |result| bits,
 * 32-bit lanes): masked increments, no mask-to-integer traffic in the loop. */
#define COUNT16(a, r, r_inf, r_min_normal)                                                  \
    do {                                                                                    \
        __mmask16 src_inf_ = _mm512_cmpeq_epi32_mask(a, f32_inf);                           \
        __mmask16 src_nan_ = _mm512_cmpgt_epu32_mask(a, f32_inf);                           \
        __mmask16 ov_ = _mm512_mask_cmpeq_epi32_mask(                                       \
            _mm512_cmplt_epu32_mask(a, f32_inf), r, r_inf);                                 \
        __mmask16 un_ = _mm512_mask_cmpneq_epi32_mask(_mm512_cmpeq_epi32_mask(r, zero), a, zero); \
        __mmask16 sub_ = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(r, one), r_min_normal);   \
        v_ov = _mm512_mask_add_epi32(v_ov, ov_, v_ov, one);                                 \
        v_un = _mm512_mask_add_epi32(v_un, un_, v_un, one);                                 \
        v_sub = _mm512_mask_add_epi32(v_sub, sub_, v_sub, one);                             \
        v_inf = _mm512_mask_add_epi32(v_inf, src_inf_, v_inf, one);                         \
        v_nan = _mm512_mask_add_epi32(v_nan, src_nan_, v_nan, one);                         \
    } while (0)

/* Lanes worth counting: a result that is +-inf, NaN or subnormal, or zero
 * from a nonzero value (an infinite or NaN source gives an infinite or NaN
 * result). Most blocks have none. */
#define SPECIAL16(a, r, r_inf, r_min_normal)                                                \
    (_mm512_cmplt_epu32_mask(_mm512_sub_epi32(r, one), r_min_normal) |                      \
     _mm512_cmpge_epu32_mask(r, r_inf) |                                                    \
     _mm512_mask_cmpneq_epi32_mask(_mm512_cmpeq_epi32_mask(r, zero), a, zero))

#define COUNTERS_INIT                                                                       \
    __m512i v_ov = _mm512_setzero_si512(), v_un = v_ov, v_sub = v_ov, v_inf = v_ov, v_nan = v_ov
#define COUNTERS_ADD(t)                                                                     \
    add_tally(t, (uint32_t)_mm512_reduce_add_epi32(v_ov), (uint32_t)_mm512_reduce_add_epi32(v_un), \
              (uint32_t)_mm512_reduce_add_epi32(v_sub), (uint32_t)_mm512_reduce_add_epi32(v_inf), \
              (uint32_t)_mm512_reduce_add_epi32(v_nan))

AVX512 static void count_pair_avx512(const float *src, const float *after, int64_t m,
                                     uint32_t min_normal, ld_emu_tally *t)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), f32_inf = _mm512_set1_epi32(0x7F800000);
    const __m512i r_min = _mm512_set1_epi32((int)min_normal - 1), zero = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
    COUNTERS_INIT;
    int64_t i = 0;
    for (; i + 16 <= m; i += 16) {
        __m512i a = _mm512_and_si512(_mm512_loadu_si512(src + i), abs_mask);
        __m512i r = _mm512_and_si512(_mm512_loadu_si512(after + i), abs_mask);
        if (SPECIAL16(a, r, f32_inf, r_min) | _mm512_cmpge_epu32_mask(a, f32_inf))
            COUNT16(a, r, f32_inf, r_min);
    }
    COUNTERS_ADD(t);
    count_pair_portable(src + i, after + i, m - i, min_normal, t);
}

/* --- rounding a chunk ------------------------------------------------------------------- */

/* The rounding library's instruction set for a level (the values are the
 * same at every one; this keeps a forced level's code path its own). */
static ld_round_isa round_isa_of(ld_emu_level level)
{
    if (level == LD_EMU_LEVEL_AVX512)
        return LD_ROUND_ISA_AVX512;
    if (level != LD_EMU_LEVEL_PORTABLE && ld_round_isa_supported(LD_ROUND_ISA_AVX2))
        return LD_ROUND_ISA_AVX2;
    return LD_ROUND_ISA_PORTABLE;
}

/* Counts the rounding of src[m] into after[m] at a level. */
static void count_pair(ld_emu_level level, const float *src, const float *after, int64_t m,
                       uint32_t min_normal, ld_emu_tally *t)
{
    if (level == LD_EMU_LEVEL_AVX512 || level == LD_EMU_LEVEL_AVX512F)
        count_pair_avx512(src, after, m, min_normal, t);
    else if (level == LD_EMU_LEVEL_AVX2)
        ld_emu_avx2_count_pair(src, after, m, min_normal, t);
    else
        count_pair_portable(src, after, m, min_normal, t);
}

/* The library's rounding of [src, src+m) into dst (dst may be src), counted. */
static void round_chunk_generic(const float *src, float *dst, int64_t m, ld_precision p,
                                const ld_round_options *o, ld_emu_level level, ld_emu_tally *t)
{
    float before[STACK_COPY];
    for (int64_t i = 0; i < m; i += STACK_COPY) {
        int64_t k = m - i < STACK_COPY ? m - i : STACK_COPY;
        memcpy(before, src + i, (size_t)k * sizeof *before);
        if (dst + i != src + i)
            memcpy(dst + i, src + i, (size_t)k * sizeof *dst);
        ld_round_array_isa(round_isa_of(level), dst + i, (size_t)k, p, o);
        count_pair(level, before, dst + i, k, min_normal_bits(p), t);
    }
}

/* fp16, subnormals kept: round trip through vcvtps2ph / vcvtph2ps and count
 * the blocks that need it, in one pass; with `half`, the fp16 bits too. */
AVX512 static void round_fp16_avx512(const float *src, float *dst, ld_fp16 *half, int64_t m,
                                     ld_emu_tally *t)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), f32_inf = _mm512_set1_epi32(0x7F800000);
    const __m512i h_abs = _mm512_set1_epi32(0x7FFF), h_inf = _mm512_set1_epi32(0x7C00);
    const __m512i h_min = _mm512_set1_epi32(0x3FF), zero = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
    COUNTERS_INIT;
    int64_t i = 0;
    for (; i + 16 <= m; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        __m256i h16 = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h16));
        if (half)
            _mm256_storeu_si256((__m256i *)(half + i), h16);
        __m512i a = _mm512_and_si512(_mm512_castps_si512(v), abs_mask);
        __m512i r = _mm512_and_si512(_mm512_cvtepu16_epi32(h16), h_abs);
        if (SPECIAL16(a, r, h_inf, h_min))
            COUNT16(a, r, h_inf, h_min);
    }
    COUNTERS_ADD(t);
    if (i < m) {
        round_chunk_generic(src + i, dst + i, m - i, LD_PRECISION_FP16, NULL,
                            LD_EMU_LEVEL_PORTABLE, t);
        if (half) /* exact: dst holds fp16 values */
            ld_convert_fp32_to_fp16_isa(LD_ROUND_ISA_PORTABLE, dst + i, half + i, (size_t)(m - i));
    }
}

/* The same with a cheaper test for "this block needs counting", on the
 * 16-bit results (AVX-512 BW/VL): |h| - 0x400 >= 0x7800 as unsigned 16-bit
 * is exactly |h| == 0, subnormal, inf or NaN; zero results of zero sources
 * are then dropped. A block with none is rounded in 5 vector operations
 * instead of 12 (the rounding pass over every output was 18% of an emulated
 * --fp16 run of PaddleOCR det). */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
round_fp16_avx512bw(const float *src, float *dst, ld_fp16 *half, int64_t m, ld_emu_tally *t)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), f32_inf = _mm512_set1_epi32(0x7F800000);
    const __m512i h_abs = _mm512_set1_epi32(0x7FFF), h_inf = _mm512_set1_epi32(0x7C00);
    const __m512i h_min = _mm512_set1_epi32(0x3FF), zero = _mm512_setzero_si512();
    const __m512i one = _mm512_set1_epi32(1);
    const __m256i h_abs16 = _mm256_set1_epi16(0x7FFF), h_low16 = _mm256_set1_epi16(0x400);
    const __m256i h_span16 = _mm256_set1_epi16(0x7800);
    COUNTERS_INIT;
    int64_t i = 0;
    for (; i + 16 <= m; i += 16) {
        __m512 v = _mm512_loadu_ps(src + i);
        __m256i h16 = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h16));
        if (half)
            _mm256_storeu_si256((__m256i *)(half + i), h16);
        __mmask16 special = _mm256_cmpge_epu16_mask(
            _mm256_sub_epi16(_mm256_and_si256(h16, h_abs16), h_low16), h_span16);
        if (!special)
            continue;
        special &= (__mmask16)~_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_EQ_OQ);
        if (!special)
            continue;
        __m512i a = _mm512_and_si512(_mm512_castps_si512(v), abs_mask);
        __m512i r = _mm512_and_si512(_mm512_cvtepu16_epi32(h16), h_abs);
        COUNT16(a, r, h_inf, h_min);
    }
    COUNTERS_ADD(t);
    if (i < m) {
        round_chunk_generic(src + i, dst + i, m - i, LD_PRECISION_FP16, NULL,
                            LD_EMU_LEVEL_PORTABLE, t);
        if (half) /* exact: dst holds fp16 values */
            ld_convert_fp32_to_fp16_isa(LD_ROUND_ISA_PORTABLE, dst + i, half + i, (size_t)(m - i));
    }
}

/* fp16 without flushing, rounded and counted in one pass at a vector level. */
static void round_fp16_fused(ld_emu_level level, const float *src, float *dst, ld_fp16 *half,
                             int64_t m, ld_emu_tally *t)
{
    if (level == LD_EMU_LEVEL_AVX512)
        round_fp16_avx512bw(src, dst, half, m, t);
    else if (level == LD_EMU_LEVEL_AVX512F)
        round_fp16_avx512(src, dst, half, m, t);
    else
        ld_emu_avx2_round_fp16(src, dst, half, m, t);
}

/* --- chunks over threads ------------------------------------------------------------ */

/* One chunk (m <= CHUNK, so the 32-bit vector counters cannot overflow):
 * the library's rounding of src into dst, counted, with the float16 bits in
 * half[m] when half is not NULL (p is then fp16). */
static void round_chunk(const float *src, float *dst, ld_fp16 *half, int64_t m, ld_precision p,
                        const ld_round_options *o, ld_emu_level level, ld_emu_tally *t)
{
    bool flush = o && o->flush_denormals;
    if (level != LD_EMU_LEVEL_PORTABLE && p == LD_PRECISION_FP16 && !flush) {
        round_fp16_fused(level, src, dst, half, m, t);
        return;
    }
    if (level == LD_EMU_LEVEL_AVX2 && (p == LD_PRECISION_BF16 || p == LD_PRECISION_TF32)) {
        ld_low_bits_rounder r = ld_low_bits_rounder_make(
            p == LD_PRECISION_TF32 ? 13 : 16,
            p == LD_PRECISION_TF32 && o ? o->mode : LD_ROUND_NEAREST_EVEN);
        ld_emu_avx2_round_low_bits(src, dst, m, r, flush, t);
        return;
    }
    if (p == LD_PRECISION_FP32 && !flush) { /* fp32: only flushing changes values */
        if (dst != src)
            memcpy(dst, src, (size_t)m * sizeof *dst);
        count_pair(level, src, src, m, min_normal_bits(p), t);
        return;
    }
    round_chunk_generic(src, dst, m, p, o, level, t);
    if (half) /* exact: dst holds fp16 values */
        ld_convert_fp32_to_fp16_isa(round_isa_of(level), dst, half, (size_t)m);
}

/* Rounds n elements chunk by chunk on the calling thread. */
static void round_serial(ld_emu_level level, const float *src, float *dst, ld_fp16 *half,
                         int64_t n, ld_precision p, const ld_round_options *o, ld_emu_tally *out)
{
    for (int64_t lo = 0; lo < n; lo += CHUNK) {
        int64_t m = n - lo < CHUNK ? n - lo : CHUNK;
        round_chunk(src + lo, dst + lo, half ? half + lo : NULL, m, p, o, level, out);
    }
}

/* Rounds n elements in chunks over up to `threads` threads. */
static void round_chunks(const float *src, float *dst, ld_fp16 *half, int64_t n, ld_precision p,
                         const ld_round_options *o, int threads, ld_emu_tally *out)
{
    ld_emu_level level = ld_emu_level_active();
    if (threads <= 1 || n < PARALLEL_MIN) {
        round_serial(level, src, dst, half, n, p, o, out);
        return;
    }
    int64_t n_chunks = (n + CHUNK - 1) / CHUNK;
    int64_t ov = 0, un = 0, sub = 0, inf = 0, nan = 0;
#pragma omp parallel for num_threads(threads) schedule(static) \
    reduction(+ : ov, un, sub, inf, nan)
    for (int64_t c = 0; c < n_chunks; c++) {
        ld_emu_tally t = {0};
        int64_t lo = c * CHUNK, m = n - lo < CHUNK ? n - lo : CHUNK;
        round_chunk(src + lo, dst + lo, half ? half + lo : NULL, m, p, o, level, &t);
        ov += t.overflows, un += t.underflows, sub += t.subnormals;
        inf += t.src_infs, nan += t.src_nans;
    }
    out->overflows += ov, out->underflows += un, out->subnormals += sub;
    out->src_infs += inf, out->src_nans += nan;
}

void ld_emu_round_counted(const float *src, float *dst, int64_t n, ld_precision p,
                          const ld_round_options *o, int threads, ld_emu_tally *out)
{
    round_chunks(src, dst, NULL, n, p, o, threads, out);
}

bool ld_emu_round_fp16_keep(const float *src, float *dst, ld_fp16 *half, int64_t n,
                            int threads, ld_emu_tally *out)
{
    round_chunks(src, dst, half, n, LD_PRECISION_FP16, NULL, threads, out);
    return true;
}

void ld_emu_round_block(const float *src, float *dst, ld_fp16 *half, int64_t n, ld_precision p,
                        const ld_round_options *o, ld_emu_tally *t)
{
    round_serial(ld_emu_level_active(), src, dst, half, n, p, o, t);
}

void ld_emu_round_counted_level(ld_emu_level level, const float *src, float *dst, ld_fp16 *half,
                                int64_t n, ld_precision p, const ld_round_options *o,
                                ld_emu_tally *t)
{
    round_serial(level, src, dst, half, n, p, o, t);
}

void ld_emu_scan_nonfinite(const ld_tensor *t, int threads, bool *has_nan, bool *has_inf)
{
    ld_emu_tally tally = {0};
    if (t->dtype == LD_DTYPE_FLOAT32) {
        /* rounding to fp32 without flushing changes nothing: only src_* matter */
        ld_emu_round_counted(t->data, t->data, t->count, LD_PRECISION_FP32, NULL, threads,
                             &tally);
    } else if (t->dtype == LD_DTYPE_FLOAT16 || t->dtype == LD_DTYPE_BFLOAT16) {
        uint16_t inf_bits = t->dtype == LD_DTYPE_FLOAT16 ? 0x7C00u : 0x7F80u;
        const uint16_t *x = t->data;
        for (int64_t i = 0; i < t->count; i++) {
            uint16_t a = x[i] & 0x7FFFu;
            tally.src_infs += a == inf_bits;
            tally.src_nans += a > inf_bits;
        }
    }
    *has_nan = tally.src_nans > 0;
    *has_inf = tally.src_infs > 0;
}
