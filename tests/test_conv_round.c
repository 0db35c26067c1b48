/* Unit tests for the float16 output rounding in the direct convolution's
 * stores (conv_direct_body.h store_run, ld_conv_round in conv_direct.h),
 * which the emulated engine uses under ld_kernel_ctx.round_fp16_inline
 * (include/layerdiff/kernel.h):
 *  - fp16_split.h: Veltkamp's split equals vcvtps2ph + vcvtph2ps (F16C,
 *    nearest even) on EVERY float32 whose magnitude is 0 or in [2^-14,
 *    65520), and the "plain" tests accept exactly those, for the AVX2 and
 *    the AVX-512 versions the CPU runs (skipped with a message otherwise);
 *  - the convolution with a rounding hook, at every level and tile variant,
 *    on 1 and 2 threads, with passes over channel chunks, pointwise shapes
 *    and tails, on data full of overflows, float16 subnormals, zeros and
 *    NaN: every output ends as the float16 rounding of the unrounded
 *    output, every output whose rounding is not plain reaches the hook
 *    unrounded, and none reaches it twice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_direct.h"
#include "backends/kernels/conv_direct_internal.h"
#include "backends/kernels/fp16_split.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static bool in_plain_range(uint32_t u)
{
    uint32_t a = u & 0x7FFFFFFFu;
    return a == 0 || (a >= LD_FP16_SPLIT_LO && a < LD_FP16_SPLIT_HI);
}

__attribute__((target("f16c"))) static float f16c_round(float f)
{
    return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

static void skip_without_f16c(void)
{
    if (!__builtin_cpu_supports("f16c") || !__builtin_cpu_supports("avx2")) {
        printf("# skipped: this CPU has no F16C + AVX2 to check against\n");
        skip();
    }
}

/* --- fp16_split.h ----------------------------------------------------------------------- */

/* Bit patterns [from, to) (multiples of 8 apart) in vectors of 8: the split
 * equals F16C wherever the lane is in the plain range, and plain8 says
 * whether all 8 are. Returns the lanes compared. */
__attribute__((target("avx2,f16c"))) static uint64_t check_range8(uint64_t from, uint64_t to)
{
    uint64_t compared = 0;
    for (uint64_t u = from; u < to; u += 8) {
        __m256i b = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)u),
                                     _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 v = _mm256_castsi256_ps(b);
        __m256 split = ld_fp16_split8(v), ref = _mm256_cvtph_ps(_mm256_cvtps_ph(v, 0));
        uint32_t s[8], r[8], in[8];
        _mm256_storeu_si256((__m256i *)(void *)s, _mm256_castps_si256(split));
        _mm256_storeu_si256((__m256i *)(void *)r, _mm256_castps_si256(ref));
        _mm256_storeu_si256((__m256i *)(void *)in, b);
        bool all = true;
        for (int j = 0; j < 8; j++) {
            bool plain = in_plain_range(in[j]);
            all = all && plain;
            if (plain && s[j] != r[j])
                fail_msg("split of 0x%08x: 0x%08x, F16C 0x%08x", in[j], s[j], r[j]);
            compared += plain;
        }
        if (ld_fp16_plain8(v) != all)
            fail_msg("plain8 from 0x%08x: %d, want %d", in[0], !all, all);
        /* the pair test, v beside a plain vector, either way round */
        if (ld_fp16_plain8x2(v, _mm256_set1_ps(1.5f)) != all ||
            ld_fp16_plain8x2(_mm256_setzero_ps(), v) != all)
            fail_msg("plain8x2 from 0x%08x: want %d", in[0], all);
    }
    return compared;
}

__attribute__((target("avx512f,f16c"))) static void check_range16(uint64_t from, uint64_t to)
{
    for (uint64_t u = from; u < to; u += 16) {
        __m512i b = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)u),
                                     _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                       12, 13, 14, 15));
        __m512 v = _mm512_castsi512_ps(b);
        __m512 split = ld_fp16_split16(v), ref = _mm512_cvtph_ps(_mm512_cvtps_ph(v, 0));
        uint32_t s[16], r[16], in[16];
        _mm512_storeu_si512(s, _mm512_castps_si512(split));
        _mm512_storeu_si512(r, _mm512_castps_si512(ref));
        _mm512_storeu_si512(in, b);
        bool all = true;
        for (int j = 0; j < 16; j++) {
            bool plain = in_plain_range(in[j]);
            all = all && plain;
            if (plain && s[j] != r[j])
                fail_msg("split16 of 0x%08x: 0x%08x, F16C 0x%08x", in[j], s[j], r[j]);
        }
        if (ld_fp16_plain16(v) != all)
            fail_msg("plain16 from 0x%08x: %d, want %d", in[0], !all, all);
    }
}

/* Every plain value of both signs, and 2^16 patterns around each edge of
 * the range, zero, infinity and the NaNs (where plain must say no). */
static void test_split_every_plain_value(void **state)
{
    (void)state;
    skip_without_f16c();
    static const uint32_t edges[] = {0x00000000u, LD_FP16_SPLIT_LO, LD_FP16_SPLIT_HI,
                                     0x7F800000u, 0x7FC00000u};
    uint64_t compared = 0;
    for (uint64_t sign = 0; sign <= 0x80000000u; sign += 0x80000000u) {
        compared += check_range8(sign + LD_FP16_SPLIT_LO, sign + LD_FP16_SPLIT_HI);
        for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
            uint64_t lo = sign + edges[e] >= 0x8000u ? sign + edges[e] - 0x8000u : sign;
            compared += check_range8(lo, sign + edges[e] + 0x8000u);
        }
    }
    assert_true(compared > 2 * (uint64_t)(LD_FP16_SPLIT_HI - LD_FP16_SPLIT_LO));
    if (!__builtin_cpu_supports("avx512f")) {
        printf("# AVX-512F: not on this CPU, its split skipped\n");
        return;
    }
    for (uint64_t sign = 0; sign <= 0x80000000u; sign += 0x80000000u) {
        check_range16(sign + LD_FP16_SPLIT_LO, sign + LD_FP16_SPLIT_HI);
        for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
            uint64_t lo = sign + edges[e] >= 0x8000u ? sign + edges[e] - 0x8000u : sign;
            check_range16(lo, sign + edges[e] + 0x8000u);
        }
    }
}

/* --- the convolution's stores ----------------------------------------------------------- */

typedef struct hook_log {
    float *y;            /* the output */
    const float *plain;  /* the same convolution unrounded */
    int64_t n;
    atomic_uchar *seen;  /* per element: handed to the hook */
    atomic_long handed;
} hook_log;

static void mock_round_block(void *user, int output, float *values, int64_t n)
{
    hook_log *h = user;
    assert_int_equal(output, 0);
    int64_t at = values - h->y;
    assert_true(at >= 0 && n > 0 && at + n <= h->n);
    for (int64_t i = at; i < at + n; i++) {
        if (atomic_exchange(&h->seen[i], 1))
            fail_msg("element %lld handed to the hook twice", (long long)i);
        if (bits_of(h->y[i]) != bits_of(h->plain[i]))
            fail_msg("element %lld reached the hook rounded: %a, unrounded %a", (long long)i,
                     (double)h->y[i], (double)h->plain[i]);
        h->y[i] = f16c_round(h->y[i]);
    }
    atomic_fetch_add(&h->handed, n);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Values whose sums overflow float16 (x 3000), land in its subnormals
 * (x 1e-6), cancel to zero (integers of both signs), or are NaN (1 in 997). */
static float wild(void)
{
    uint64_t r = next_u64();
    float v = (float)(int)(r % 7) - 3.0f;
    switch ((r >> 8) % 8) {
    case 0: return v * 3000.0f;
    case 1: return v * 1e-6f;
    case 2: return (r >> 16) % 997 == 0 ? NAN : v;
    default: return v * 0.25f + (float)((r >> 20) % 1000) * 1e-3f;
    }
}

static float *wild_floats(int64_t n, bool integers)
{
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = integers ? (float)(int)(next_u64() % 5) - 2.0f : wild();
    return v;
}

static void conv(const ld_window_geom *g, int64_t C, int64_t M, const float *x, const float *w,
                 const float *b, float *y, int threads, const ld_conv_round *round)
{
    size_t floats = ld_conv_direct_scratch_floats(g, C, M, threads);
    float *scratch = aligned_alloc(64, (floats * sizeof *scratch + 63) / 64 * 64);
    assert_non_null(scratch);
    ld_conv_direct_f32(x, w, b, y, C, M, g, scratch, threads, round);
    free(scratch);
}

/* One geometry at the forced level/variant/blocking: unrounded, then with
 * the hook, on `threads`. Returns how many elements went to the hook. */
static int64_t check_rounded(const ld_window_geom *g, int64_t C, int64_t M, bool integers,
                             int threads, const char *label)
{
    int64_t n = M * g->out_size;
    float *x = wild_floats(C * g->in_size, integers), *w = wild_floats(M * C * g->k_size, integers);
    float *b = wild_floats(M, integers);
    float *plain = malloc((size_t)n * sizeof *plain), *y = malloc((size_t)n * sizeof *y);
    hook_log h = {.y = y, .plain = plain, .n = n, .seen = calloc((size_t)n, 1)};
    assert_true(plain && y && h.seen);
    conv(g, C, M, x, w, b, plain, threads, NULL);
    ld_conv_round round = {mock_round_block, &h};
    conv(g, C, M, x, w, b, y, threads, &round);
    for (int64_t i = 0; i < n; i++) {
        float want = f16c_round(plain[i]);
        if (bits_of(y[i]) != bits_of(want) && !(isnan(y[i]) && isnan(want)))
            fail_msg("%s: element %lld: %a, want %a (unrounded %a)", label, (long long)i,
                     (double)y[i], (double)want, (double)plain[i]);
        if (!in_plain_range(bits_of(plain[i])) && !h.seen[i])
            fail_msg("%s: element %lld (%a) is not plain and missed the hook", label,
                     (long long)i, (double)plain[i]);
    }
    int64_t handed = atomic_load(&h.handed);
    free(x), free(w), free(b), free(plain), free(y), free((void *)h.seen);
    return handed;
}

static bool make_geom(ld_window_geom *g, int nd, const int64_t *in, const int64_t *k,
                      const int64_t *s, const int64_t *pb, const int64_t *pe)
{
    memset(g, 0, sizeof *g);
    g->nd = nd;
    for (int i = 0; i < nd; i++) {
        g->in[i] = in[i], g->k[i] = k[i], g->s[i] = s[i], g->d[i] = 1;
        g->pb[i] = pb[i], g->pe[i] = pe[i];
        int64_t span = in[i] + pb[i] + pe[i] - (k[i] - 1) - 1;
        if (span < 0)
            return false;
        g->out[i] = span / s[i] + 1;
    }
    ld_window_geom_finish(g);
    return true;
}

static const ld_conv_direct_level levels[] = {LD_CONV_DIRECT_AVX512, LD_CONV_DIRECT_AVX2};

static int restore_auto(void **state)
{
    (void)state;
    ld_conv_direct_force_variant(-1);
    ld_conv_direct_force_blocking(0, 0);
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    return 0;
}

/* 3x3 (stride 1 and 2, with padding, rows ending in a partial vector) and
 * pointwise, every variant, whole passes and forced channel chunks, 1 and
 * 2 threads, wild data and small integers (many exact zeros). */
static void test_direct_rounds_in_stores(void **state)
{
    (void)state;
    skip_without_f16c();
    int64_t handed = 0, tested = 0;
    for (size_t li = 0; li < sizeof levels / sizeof levels[0]; li++) {
        if (!ld_conv_direct_force_level(levels[li])) {
            printf("# %s: not on this CPU, skipped\n", ld_conv_direct_level_name(levels[li]));
            continue;
        }
        int lanes = levels[li] == LD_CONV_DIRECT_AVX512 ? 16 : 8;
        for (int v = 0; v < ld_conv_direct_variant_count(); v++) {
            ld_conv_direct_force_variant(v);
            for (int shape = 0; shape < 3; shape++) {
                int64_t in[2] = {5, 2 * 6 * lanes + 3}, k[2] = {3, 3}, s[2] = {1, 1};
                int64_t pb[2] = {1, 1}, pe[2] = {1, 1};
                if (shape == 1)
                    s[0] = s[1] = 2, pe[1] = 2;
                if (shape == 2)
                    k[0] = k[1] = 1, pb[0] = pb[1] = pe[0] = pe[1] = 0;
                ld_window_geom g;
                assert_true(make_geom(&g, 2, in, k, s, pb, pe));
                int64_t C = 9 + v % 3, M = 1 + (shape * 11 + v * 7) % 27;
                for (int chunked = 0; chunked < 2; chunked++) {
                    ld_conv_direct_force_blocking(chunked ? 4 : 0, chunked ? 2 : 0);
                    for (int threads = 1; threads <= 2; threads++) {
                        char label[128];
                        snprintf(label, sizeof label, "%s variant %d shape %d chunked %d "
                                 "threads %d", ld_conv_direct_level_name(levels[li]), v, shape,
                                 chunked, threads);
                        handed += check_rounded(&g, C, M, (v + shape) % 2, threads, label);
                        tested += M * g.out_size;
                    }
                }
                ld_conv_direct_force_blocking(0, 0);
            }
        }
        ld_conv_direct_force_variant(-1);
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    /* both ways taken: some runs handed over, most rounded in the stores */
    assert_true(handed > 0 && handed < tested);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_every_plain_value),
        cmocka_unit_test_teardown(test_direct_rounds_in_stores, restore_auto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
