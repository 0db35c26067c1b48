/* Unit tests for ConvTranspose's fused 2x2 stride-2 kernel
 * (backends/kernels/conv_transpose_avx2.c): bit for bit against the path it
 * replaces, the product ld_gemm_direct_f32 + ld_interleave2_add_f32, at
 * every direct-convolution level the CPU runs (AVX2 tiles; AVX-512 and the
 * 16-lane tiles too when present), on geometries with channel tails (M not a multiple of 3),
 * column tails (W not a multiple of 8, W < 8), no bias, and special values
 * (signed zeros, infinities, NaN), outputs large enough for its streaming
 * stores, inputs packed and read in place (one output channel, too many
 * input channels); the output-rounding callback sees every
 * output row once; float16 rounding in the tiles (round_fp16_inline) gives
 * the values and counters of the engine's rounding after the kernel; and the whole operator (conv_transpose.c) gives the same
 * bits with the fused level and without, on 1 and 2 threads, with groups
 * and batches. Skipped with a message when the CPU lacks AVX2 + FMA. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/emulated_count.h"
#include "backends/kernels/conv_direct.h"
#include "backends/kernels/conv_direct_internal.h"
#include "backends/kernels/conv_transpose_fast.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

#define RNG_SEED 0x9e3779b97f4a7c15ull
static uint64_t rng = RNG_SEED;

static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Mostly uniform in [-1, 1); with `special`, some signed zeros, infinities
 * and NaNs. */
static float value(bool special)
{
    uint64_t r = next_u64();
    if (special) {
        switch (r % 37) {
        case 0: return 0.0f;
        case 1: return -0.0f;
        case 2: return INFINITY;
        case 3: return -INFINITY;
        case 4: return NAN;
        default: break;
        }
    }
    return (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *floats(int64_t n, bool special)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++)
        p[i] = value(special);
    return p;
}

/* conv_transpose.c's product + col2im for one group: columns [(m, kh, kw)]
 * [ih * W + iw] from ld_gemm_direct_f32, then each output row bias +
 * column, interleaved. */
static void reference(const float *x, const float *w, const float *bias, float *y, int64_t C,
                      int64_t M, int64_t H, int64_t W)
{
    int64_t P = H * W, rows_k = 4 * M;
    float *col = malloc((size_t)(rows_k * P) * sizeof *col);
    float *scratch = malloc(ld_gemm_direct_scratch_floats(rows_k, C, 1) * sizeof *scratch);
    assert_non_null(col);
    assert_non_null(scratch);
    ld_gemm_direct_f32(true, rows_k, P, C, w, rows_k, x, P, col, P, scratch, 1);
    for (int64_t m = 0; m < M; m++)
        for (int64_t kh = 0; kh < 2; kh++)
            for (int64_t ih = 0; ih < H; ih++) {
                const float *c0 = col + (m * 4 + kh * 2) * P + ih * W;
                ld_interleave2_add_f32(c0, c0 + P, bias ? bias[m] : 0.0f,
                                       y + m * 4 * P + (2 * ih + kh) * 2 * W, W);
            }
    free(col);
    free(scratch);
}

typedef struct round_log {
    int64_t calls, values;
} round_log;

/* A rounding that changes values (drops the low 12 mantissa bits) and
 * counts what it was given. */
static void chop(void *user, int output, float *v, int64_t n)
{
    round_log *log = user;
    assert_int_equal(output, 0);
    log->calls++;
    log->values += n;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], sizeof u);
        u &= ~0xfffu;
        memcpy(&v[i], &u, sizeof u);
    }
}

/* The emulated engine's counting float16 rounding (round_block), tallied. */
static void fp16_round(void *user, int output, float *v, int64_t n)
{
    assert_int_equal(output, 0);
    ld_emu_round_counted(v, v, n, LD_PRECISION_FP16, NULL, 1, user);
}

static void same_tally(const ld_emu_tally *a, const ld_emu_tally *b)
{
    assert_int_equal(a->overflows, b->overflows);
    assert_int_equal(a->underflows, b->underflows);
    assert_int_equal(a->subnormals, b->subnormals);
    assert_int_equal(a->src_infs, b->src_infs);
    assert_int_equal(a->src_nans, b->src_nans);
}

typedef void (*rows_fn)(const float *, const float *, const float *, float *, int64_t, int64_t,
                        int64_t, int64_t, int64_t, int64_t, const ld_conv_round *, bool);

/* Float16 rounding in the tiles (round_fp16_inline): the values and
 * counters of the counting rounding over the whole output after the kernel
 * (what the engine's per-row round_block gives), for the inputs as they
 * are (mostly plain outputs: the tiles round them) and scaled by 2^-13
 * with the bias (outputs around float16's smallest normal: runs that are
 * not plain go to round_block); in two calls of input rows. */
static void check_fp16_inline(rows_fn rows, const float *x, const float *w, const float *bias,
                              float *want, float *got, int64_t C, int64_t M, int64_t H, int64_t W)
{
    int64_t P = H * W, out = 4 * M * P;
    float *xs = floats(C * P, false), *bs = floats(M, false);
    for (int scaled = 0; scaled <= 1; scaled++) {
        for (int64_t i = 0; i < C * P; i++)
            xs[i] = scaled ? x[i] * 0x1p-13f : x[i];
        for (int64_t i = 0; bias && i < M; i++)
            bs[i] = scaled ? bias[i] * 0x1p-13f : bias[i];
        const float *b = bias ? bs : NULL;
        rows(xs, w, b, want, C, M, H, W, 0, H, NULL, false);
        ld_emu_tally tw = {0}, tg = {0};
        ld_emu_round_counted(want, want, out, LD_PRECISION_FP16, NULL, 1, &tw);
        ld_conv_round round = {fp16_round, &tg};
        memset(got, 0xff, (size_t)out * sizeof *got);
        rows(xs, w, b, got, C, M, H, W, 0, H / 2, &round, true);
        rows(xs, w, b, got, C, M, H, W, H / 2, H, &round, true);
        for (int64_t i = 0; i < out; i++)
            if (memcmp(&want[i], &got[i], sizeof *got) != 0)
                fail_msg("fp16 in the tiles, C %lld M %lld H %lld W %lld scaled %d: output "
                         "%lld is %a, want %a", (long long)C, (long long)M, (long long)H,
                         (long long)W, scaled, (long long)i, (double)got[i], (double)want[i]);
        same_tally(&tw, &tg);
    }
    free(xs);
    free(bs);
}

/* Each direct level with the fused kernel's entry for it: the AVX2 tiles,
 * and the 16-lane tiles (with the AVX2 ones for a last 8 columns). */
static const ld_conv_direct_level levels[] = {LD_CONV_DIRECT_AVX2, LD_CONV_DIRECT_AVX512};
static const rows_fn level_rows[] = {ld_convt2x2_rows_f32_avx2, ld_convt2x2_rows_f32_avx512};

static void check_case(int64_t C, int64_t M, int64_t H, int64_t W, bool with_bias, bool special)
{
    int64_t P = H * W, out = 4 * M * P;
    float *x = floats(C * P, special), *w = floats(C * M * 4, special);
    float *bias = with_bias ? floats(M, special) : NULL;
    /* aligned as a tensor's data is, so that outputs of 4 MiB and more stream */
    size_t bytes = ((size_t)out * sizeof(float) + 63) / 64 * 64;
    float *want = aligned_alloc(64, bytes), *got = aligned_alloc(64, bytes);
    assert_non_null(want);
    assert_non_null(got);
    for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
        if (!ld_conv_direct_force_level(levels[l]))
            continue;
        rows_fn rows = level_rows[l];
        reference(x, w, bias, want, C, M, H, W);
        memset(got, 0xff, (size_t)out * sizeof *got);
        /* in two calls, as two claims of input rows would */
        rows(x, w, bias, got, C, M, H, W, 0, H / 2, NULL, false);
        rows(x, w, bias, got, C, M, H, W, H / 2, H, NULL, false);
        if (memcmp(want, got, (size_t)out * sizeof *got) != 0) {
            for (int64_t i = 0; i < out; i++)
                if (memcmp(&want[i], &got[i], sizeof *got) != 0) {
                    print_error("C %lld M %lld H %lld W %lld bias %d special %d level %s: "
                                "output %lld is %a, want %a\n", (long long)C, (long long)M,
                                (long long)H, (long long)W, with_bias, special,
                                ld_conv_direct_level_name(levels[l]), (long long)i,
                                (double)got[i], (double)want[i]);
                    break;
                }
            fail();
        }
        /* rounding: every output row once, after it is complete */
        round_log log = {0};
        ld_conv_round round = {chop, &log};
        rows(x, w, bias, got, C, M, H, W, 0, H, &round, false);
        assert_int_equal(log.calls, 2 * M * H);
        assert_int_equal(log.values, out);
        round_log ref_log = {0};
        for (int64_t r = 0; r < 2 * M * H; r++)
            chop(&ref_log, 0, want + r * 2 * W, 2 * W);
        assert_memory_equal(want, got, (size_t)out * sizeof *got);
        check_fp16_inline(rows, x, w, bias, want, got, C, M, H, W);
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    free(x);
    free(w);
    free(bias);
    free(want);
    free(got);
}

static bool have_avx2(void)
{
    if (ld_convt_level_supported(LD_CONVT_AVX2))
        return true;
    print_message("skipped: this CPU has no AVX2 + FMA\n");
    return false;
}

static void test_kernel_bits(void **state)
{
    (void)state;
    if (!have_avx2())
        return;
    /* PaddleOCR det's shapes, scaled down in height */
    check_case(24, 24, 3, 160, true, false);
    check_case(24, 1, 3, 320, true, false);
    /* channel tails (M % 3), column tails (W % 8, W < 8, W < 24; 16-lane
     * tiles: W % 16, W % 48 in 16, 32, and a last 8 columns) */
    const int64_t Ms[] = {1, 2, 4, 5, 7};
    const int64_t Ws[] = {1, 5, 8, 13, 16, 23, 24, 31, 32, 40, 49, 56, 80};
    for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++)
        for (size_t j = 0; j < sizeof Ws / sizeof Ws[0]; j++)
            check_case((int64_t)(1 + (i + j) % 5), Ms[i], 1 + (int64_t)j % 3, Ws[j], (i + j) % 2,
                       false);
    /* outputs of 4 MiB and more: streaming stores of the AVX2 tiles (W % 4
     * == 0), and the plain stores when the rows are not aligned (W % 4 !=
     * 0); 32 MiB: the 16-lane tiles' streaming stores */
    check_case(2, 8, 128, 256, true, false);
    check_case(2, 8, 128, 258, false, false);
    check_case(1, 32, 128, 512, true, false);
    /* C = 1 and a long chain */
    check_case(1, 3, 2, 17, true, false);
    check_case(67, 6, 2, 19, true, false);
    /* too many channels for the kernel's packed rows (32 KiB): read in place */
    check_case(300, 2, 1, 17, true, false);
}

static void test_kernel_special_values(void **state)
{
    (void)state;
    if (!have_avx2())
        return;
    /* A fixed draw, whatever test_kernel_bits drew before: with several NaN
     * sources in one sum, which NaN (its sign) comes out follows the FMA
     * form each kernel's compiler picked, and the product and these tiles
     * need not agree there (another draw gave a +NaN where the product gives
     * -NaN, at the AVX2 level too, before the 16-lane tiles existed). */
    rng = RNG_SEED;
    /* signed zeros (a -0 sum plus +0 or a -0 bias), infinities, NaNs */
    check_case(3, 5, 4, 29, true, true);
    check_case(3, 5, 4, 29, false, true);
    check_case(1, 4, 3, 11, true, true);
    check_case(2, 3, 2, 8, false, true);
}

/* The operator with the fused kernel (AVX2 and 16-lane tiles) and without
 * (product + col2im) at the AVX2 direct level: the same bits, on 1 and 2
 * threads. */
static void run_op(int64_t N, int64_t C, int64_t M, int64_t group, int64_t H, int64_t W,
                   bool with_bias, ld_convt_level level, int threads, float *y)
{
    float *x = floats(N * C * H * W, false), *w = floats(C * (M / group) * 4, false);
    float *b = floats(M, false);
    kr_input ins[3] = {
        {"x", LD_DTYPE_FLOAT32, 4, {N, C, H, W}, x, false},
        {"w", LD_DTYPE_FLOAT32, 4, {C, M / group, 2, 2}, w, true},
        {"b", LD_DTYPE_FLOAT32, 1, {M}, b, true},
    };
    kr_attr attrs[] = {{.kind = KR_INTS, .name = "kernel_shape", .n = 2, .ints = {2, 2}},
                       {.kind = KR_INTS, .name = "strides", .n = 2, .ints = {2, 2}},
                       {.kind = KR_INT, .name = "group", .i = group},
                       {.kind = KR_END}};
    assert_true(ld_convt_force_level(level));
    kr_result r;
    kr_run(11, "ConvTranspose", attrs, ins, with_bias ? 3 : 2, "y", threads, &r);
    ld_convt_force_level(LD_CONVT_AUTO);
    kr_expect_ok(&r);
    int64_t dims[4] = {N, M, 2 * H, 2 * W};
    kr_expect_shape(r.t[0], 4, dims);
    memcpy(y, r.t[0]->data, (size_t)(N * M * 4 * H * W) * sizeof *y);
    kr_free(&r);
    free(x);
    free(w);
    free(b);
}

static void op_case(int64_t N, int64_t C, int64_t M, int64_t group, int64_t H, int64_t W,
                    bool with_bias)
{
    size_t n = (size_t)(N * M * 4 * H * W);
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    uint64_t seed = rng;
    run_op(N, C, M, group, H, W, with_bias, LD_CONVT_NONE, 1, want);
    const ld_convt_level fused[] = {LD_CONVT_AVX2, LD_CONVT_AVX512};
    for (size_t l = 0; l < sizeof fused / sizeof fused[0]; l++)
        for (int threads = 1; threads <= 2 && ld_convt_level_supported(fused[l]); threads++) {
            rng = seed; /* the same inputs */
            run_op(N, C, M, group, H, W, with_bias, fused[l], threads, got);
            assert_memory_equal(want, got, n * sizeof *got);
        }
    free(want);
    free(got);
}

static void test_operator_bits(void **state)
{
    (void)state;
    if (!have_avx2())
        return;
    assert_true(ld_conv_direct_force_level(LD_CONV_DIRECT_AVX2));
    op_case(1, 24, 24, 1, 40, 160, true); /* several claims of rows on 2 threads */
    op_case(1, 24, 1, 1, 20, 320, true);
    op_case(2, 6, 4, 2, 5, 13, true);     /* batches and groups */
    op_case(1, 3, 5, 1, 7, 9, false);
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
}

/* The automatic choice: fused whenever the direct convolution has a level,
 * with the 16-lane tiles at AVX-512. */
static void test_level_choice(void **state)
{
    (void)state;
    assert_true(ld_convt_level_supported(LD_CONVT_NONE));
    assert_true(ld_conv_direct_force_level(LD_CONV_DIRECT_NONE));
    assert_int_equal(ld_convt_level_active(), LD_CONVT_NONE);
    if (ld_conv_direct_force_level(LD_CONV_DIRECT_AVX2))
        assert_int_equal(ld_convt_level_active(), LD_CONVT_AVX2);
    if (ld_conv_direct_force_level(LD_CONV_DIRECT_AVX512))
        assert_int_equal(ld_convt_level_active(), LD_CONVT_AVX512);
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    if (ld_convt_level_supported(LD_CONVT_AVX2)) {
        assert_true(ld_convt_force_level(LD_CONVT_AVX2));
        assert_int_equal(ld_convt_level_active(), LD_CONVT_AVX2);
        assert_true(ld_convt_force_level(LD_CONVT_AUTO));
    }
    if (ld_convt_level_supported(LD_CONVT_AVX512)) {
        assert_true(ld_convt_force_level(LD_CONVT_AVX512));
        assert_int_equal(ld_convt_level_active(), LD_CONVT_AVX512);
        assert_true(ld_convt_force_level(LD_CONVT_AUTO));
    }
}

/* Streaming stores: from 4 MiB of output with the AVX2 tiles (tuned on a
 * Zen 3), from 32 MiB with the 16-lane ones (a Zen 5 keeps det's 9.8 MB in
 * its L3 for the nodes after). */
static void test_stream_choice(void **state)
{
    (void)state;
    assert_false(ld_convt_streams(false, ((int64_t)4 << 20) - 1));
    assert_true(ld_convt_streams(false, (int64_t)4 << 20));
    assert_false(ld_convt_streams(true, (int64_t)24 * 4 * 160 * 160 * 4)); /* det's 24 -> 24 */
    assert_false(ld_convt_streams(true, ((int64_t)32 << 20) - 1));
    assert_true(ld_convt_streams(true, (int64_t)32 << 20));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_bits),
        cmocka_unit_test(test_kernel_special_values),
        cmocka_unit_test_teardown(test_operator_bits, ob_teardown),
        cmocka_unit_test(test_level_choice),
        cmocka_unit_test(test_stream_choice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
