/* Tests of the output rounding kernels do themselves for the emulated
 * backend (ld_kernel_ctx.round_block, include/layerdiff/kernel.h):
 *  - the elementwise drivers hand every element of output 0 to the hook
 *    exactly once, after its final value is written, in every path (one long
 *    row on one or two threads, many rows, short rows, broadcasts, maps) and
 *    mark the output rounded; without a hook they mark nothing;
 *  - ld_emu_round_block equals ld_emu_round_counted (values, float16 bits,
 *    counts) for every precision, with and without flushing;
 *  - a model run with fused rounding equals the same run with the pass after
 *    compute (ld_emulated_set_fused_rounding(false)), bit for bit and counter
 *    for counter, on tensors large enough for threads and blocks, full of
 *    overflows, underflows, subnormals, NaNs and infinities, in repeated runs
 *    (the observer's float16 bits kept by the kernel from the second run);
 *    also for BatchNormalization and nearest Resize, which round their
 *    output themselves;
 *  - Add, Sub, Mul and Div rounding float16 in their loop
 *    (round_fp16_inline, elementwise_round.h) at every level this CPU runs:
 *    the values are the hook's, and every element whose rounding counts
 *    anything still reaches the hook unrounded;
 *  - Conv (direct kernel rounding float16 in its stores, depthwise handing
 *    each plane to the hook) and ConvTranspose (each row to the hook) equal
 *    the pass, values and counters, with the observer reading only outputs
 *    or everything;
 *  - a folded Constant: observed with counters present, rounded by the layer
 *    that reads it with the same counts every run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/emulated.h"
#include "backends/emulated_count.h"
#include "backends/emulated_count_internal.h"
#include "backends/kernels/conv_direct_internal.h"
#include "backends/kernels/elementwise.h"
#include "backends/kernels/elementwise_round.h"
#include "layerdiff/backend.h"
#include "layerdiff/engine.h"
#include "tests/support/emulated_testing.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static uint64_t rng_state = 88172645463325252ull;

static uint32_t rnd32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Mostly ordinary values, with every kind the counters care about. */
static float varied_float(void)
{
    static const float special[] = {70000.0f, -1e5f, INFINITY, -INFINITY, NAN, 1e-9f,
                                    -1e-8f,   1e-6f, -3e-5f,   0.0f,      -0.0f, 65519.0f,
                                    6.1e-5f,  3e38f, 1e-40f};
    uint32_t r = rnd32();
    if (r % 50 == 0)
        return special[(r / 50) % (sizeof special / sizeof special[0])];
    if (r % 7 == 0)
        return 0.0f;
    return ((float)(int32_t)(rnd32() % 2000001u) - 1000000.0f) / 977.0f;
}

static ld_tensor *make_tensor(const char *name, int rank, const int64_t *dims)
{
    ld_shape shape;
    ld_tensor *t = NULL;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, rank, dims, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    for (int64_t i = 0; i < t->count; i++)
        ((float *)t->data)[i] = varied_float();
    return t;
}

/* --- the drivers' side of the contract ------------------------------------------------- */

typedef struct coverage {
    const float *base;  /* output 0's data */
    int64_t count;
    unsigned char *seen; /* per element: how many times it reached the hook */
    float *at_hook;      /* its value when it did */
} coverage;

static void mock_round_block(void *user, int output, float *block, int64_t n)
{
    coverage *c = user;
    assert_int_equal(output, 0);
    int64_t at = block - c->base;
    assert_true(at >= 0 && at + n <= c->count);
    for (int64_t i = 0; i < n; i++) {
        __atomic_fetch_add(&c->seen[at + i], 1, __ATOMIC_RELAXED);
        c->at_hook[at + i] = block[i];
    }
    ld_round_array(block, (size_t)n, LD_PRECISION_FP16, NULL); /* as the engine would */
}

EW_ROW2(mock_add, float, float, float, void, x + y)
EW_MAP(mock_neg, float, float, void, -x)

/* Runs out = a + b (or -a with b NULL) through the output drivers with the
 * mock hook (or none) and checks what reached it. */
static void check_driver(int threads, int ra, const int64_t *da, int rb, const int64_t *db,
                         bool hook)
{
    ld_tensor *a = make_tensor("a", ra, da);
    ld_tensor *b = rb ? make_tensor("b", rb, db) : NULL;
    ld_tensor *out = NULL;
    ld_error err;
    ld_shape shape = a->shape;
    if (b)
        assert_int_equal(ld_broadcast_shape(&a->shape, &b->shape, &shape, NULL, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&out, "out", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    coverage c = {out->data, out->count, calloc((size_t)out->count, 1),
                  calloc((size_t)out->count, sizeof(float))};
    assert_true(c.seen && c.at_hook);
    const ld_tensor *ins[2] = {a, b};
    ld_kernel_ctx ctx = {.n_inputs = b ? 2 : 1, .inputs = ins, .n_outputs = 1,
                         .outputs = &out, .threads = threads, .err = &err};
    if (hook) {
        ctx.round_block = mock_round_block;
        ctx.round_user = &c;
    }
    if (b)
        ld_ew_broadcast_output(&ctx, ins, 2, mock_add, NULL);
    else
        ld_ew_map_output(&ctx, a, mock_neg, NULL);
    assert_int_equal(ctx.rounded_outputs, hook ? 1u : 0u);
    /* the unrounded result, by a plain broadcast without a hook */
    ld_tensor *plain = NULL;
    assert_int_equal(ld_tensor_create(&plain, "plain", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    ld_kernel_ctx pctx = {.n_inputs = ctx.n_inputs, .inputs = ins, .n_outputs = 1,
                          .outputs = &plain, .threads = 1, .err = &err};
    if (b)
        ld_ew_broadcast(&pctx, plain, ins, 2, mock_add, NULL);
    else
        ld_ew_map(&pctx, a, plain, mock_neg, NULL);
    const float *got = out->data, *want = plain->data;
    for (int64_t i = 0; i < out->count; i++) {
        float w = hook ? ld_round_to_precision(want[i], LD_PRECISION_FP16, NULL) : want[i];
        if (hook && c.seen[i] != 1)
            fail_msg("element %lld reached the hook %d times", (long long)i, c.seen[i]);
        if (!hook && c.seen[i] != 0)
            fail_msg("element %lld reached an absent hook", (long long)i);
        if (hook && emt_bits(c.at_hook[i]) != emt_bits(want[i]) && !isnan(want[i]))
            fail_msg("element %lld reached the hook as %a before its final value %a",
                     (long long)i, (double)c.at_hook[i], (double)want[i]);
        if (emt_bits(got[i]) != emt_bits(w) && !(isnan(got[i]) && isnan(w)))
            fail_msg("element %lld is %a, expected %a", (long long)i, (double)got[i], (double)w);
    }
    free(c.seen);
    free(c.at_hook);
    ld_tensor_destroy(plain);
    ld_tensor_destroy(out);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
}

static void test_drivers_round_every_element_once(void **state)
{
    (void)state;
    const int64_t big[1] = {300007}, small[1] = {1000}, one[1] = {1};
    const int64_t rows[2] = {64, 3000}, col[2] = {64, 1};
    const int64_t many[2] = {20000, 8}, row8[2] = {1, 8};
    const int64_t mid[2] = {4096, 40}, row40[1] = {40};
    for (int threads = 1; threads <= 2; threads++) {
        for (int hook = 0; hook <= 1; hook++) {
            check_driver(threads, 1, big, 1, big, hook);     /* one long row, chunks */
            check_driver(threads, 1, small, 1, small, hook); /* one short row */
            check_driver(threads, 1, big, 1, one, hook);     /* tensor and scalar */
            check_driver(threads, 2, rows, 2, col, hook);    /* long rows, broadcast */
            check_driver(threads, 2, many, 2, row8, hook);   /* rows shorter than 16 */
            check_driver(threads, 2, mid, 1, row40, hook);   /* rows split over threads */
            check_driver(threads, 1, big, 0, NULL, hook);    /* map */
            check_driver(threads, 1, small, 0, NULL, hook);
        }
    }
}

/* --- rounding in the arithmetic loop (round_fp16_inline) -------------------------------- */

EW_ROW2(mock_sub, float, float, float, void, x - y)
EW_ROW2(mock_mul, float, float, float, void, x * y)
EW_ROW2(mock_div, float, float, float, void, x / y)

static bool counts_something(float v)
{
    ld_emu_tally t = {0};
    float r;
    ld_emu_round_counted(&v, &r, 1, LD_PRECISION_FP16, NULL, 1, &t);
    return t.overflows || t.underflows || t.subnormals || t.src_infs || t.src_nans;
}

/* out = a op b through ld_ew_binary_compute_arith with round_fp16_inline at
 * the given level, with float16 bits asked for (room for `room` values, or
 * none when room < 0); returns how many elements skipped the hook. */
static int64_t check_inline_bits(int level, ld_ew_arith op, int threads, int ra,
                                 const int64_t *da, int rb, const int64_t *db, int64_t room)
{
    assert_true(ld_ew_round_force_level(level));
    ld_ew_row_fn fn = op == LD_EW_ARITH_ADD ? mock_add : op == LD_EW_ARITH_SUB ? mock_sub
                      : op == LD_EW_ARITH_MUL ? mock_mul : mock_div;
    ld_ew_row_table table = {[LD_DTYPE_FLOAT32] = fn};
    ld_tensor *a = make_tensor("a", ra, da), *b = make_tensor("b", rb, db);
    ld_tensor *out = NULL, *plain = NULL;
    ld_error err;
    ld_shape shape;
    assert_int_equal(ld_broadcast_shape(&a->shape, &b->shape, &shape, NULL, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&out, "out", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&plain, "plain", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    coverage c = {out->data, out->count, calloc((size_t)out->count, 1),
                  calloc((size_t)out->count, sizeof(float))};
    assert_true(c.seen && c.at_hook);
    const ld_tensor *ins[2] = {a, b};
    ld_node node = {.name = (char *)"n", .op_type = (char *)"Add", .domain = (char *)"", .opset = 13};
    ld_kernel_ctx ctx = {.node = &node, .n_inputs = 2, .inputs = ins, .n_outputs = 1,
                         .outputs = &out, .threads = threads, .err = &err,
                         .round_block = mock_round_block, .round_user = &c,
                         .round_fp16_inline = true};
    uint16_t *bits = room >= 0 ? malloc((size_t)out->count * sizeof *bits) : NULL;
    if (room >= 0) {
        assert_non_null(bits);
        ctx.round_fp16_bits = bits;
        ctx.round_fp16_bits_count = room;
    }
    assert_int_equal(ld_ew_binary_compute_arith(&ctx, table, op), LD_OK);
    assert_int_equal(ctx.rounded_outputs, 1u);
    ld_kernel_ctx pctx = {.n_inputs = 2, .inputs = ins, .n_outputs = 1, .outputs = &plain,
                          .threads = 1, .err = &err};
    ld_ew_broadcast(&pctx, plain, ins, 2, fn, NULL);
    const float *got = out->data, *want = plain->data;
    int64_t skipped = 0;
    for (int64_t i = 0; i < out->count; i++) {
        float w = ld_round_to_precision(want[i], LD_PRECISION_FP16, NULL);
        if (emt_bits(got[i]) != emt_bits(w) && !(isnan(got[i]) && isnan(w)))
            fail_msg("op %d element %lld is %a, expected %a", op, (long long)i, (double)got[i],
                     (double)w);
        if (c.seen[i] > 1)
            fail_msg("element %lld reached the hook %d times", (long long)i, c.seen[i]);
        skipped += c.seen[i] == 0;
        if (bits && c.seen[i] == 0 && bits[i] != ld_fp32_to_fp16(w).bits)
            fail_msg("element %lld: float16 bits %04x, expected %04x", (long long)i, bits[i],
                     ld_fp32_to_fp16(w).bits);
        if (counts_something(want[i]) &&
            (c.seen[i] != 1 ||
             (emt_bits(c.at_hook[i]) != emt_bits(want[i]) && !isnan(want[i]))))
            fail_msg("op %d element %lld (%a) counts in the rounding but reached the hook "
                     "%d times, as %a", op, (long long)i, (double)want[i], c.seen[i],
                     (double)c.at_hook[i]);
    }
    free(c.seen);
    free(c.at_hook);
    free(bits);
    ld_tensor_destroy(plain);
    ld_tensor_destroy(out);
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
    ld_ew_round_force_level(-1);
    return skipped;
}

static int64_t check_inline(int level, ld_ew_arith op, int threads, int ra, const int64_t *da,
                            int rb, const int64_t *db)
{
    int64_t skipped = check_inline_bits(level, op, threads, ra, da, rb, db, -1);
    int64_t count = 1; /* the output's elements: the larger input's */
    for (int d = 0; d < (ra > rb ? ra : rb); d++) {
        int64_t x = d < ra ? da[ra - 1 - d] : 1, y = d < rb ? db[rb - 1 - d] : 1;
        count *= x > y ? x : y;
    }
    skipped += check_inline_bits(level, op, threads, ra, da, rb, db, count);
    /* no room for the bits: no rounding in the loop */
    assert_int_equal(check_inline_bits(level, op, threads, ra, da, rb, db, count - 1), 0);
    return skipped;
}

static void test_arith_rounds_inline(void **state)
{
    (void)state;
    const int64_t big[1] = {300007}, one[1] = {1}, rows[2] = {64, 3003}, col[2] = {64, 1};
    const int64_t many[2] = {20000, 8}, row8[2] = {1, 8}, mid[2] = {4096, 40}, row40[1] = {40};
    for (int level = LD_EW_ROUND_NONE; level <= LD_EW_ROUND_AVX2; level++) {
        if (!ld_ew_round_force_level(level)) {
            printf("# elementwise rounding level %d: this CPU cannot run it, skipped\n", level);
            continue;
        }
        for (int op = LD_EW_ARITH_ADD; op <= LD_EW_ARITH_DIV; op++) {
            for (int threads = 1; threads <= 2; threads++) {
                int64_t skipped = check_inline(level, (ld_ew_arith)op, threads, 1, big, 1, big);
                skipped += check_inline(level, (ld_ew_arith)op, threads, 1, big, 1, one);
                skipped += check_inline(level, (ld_ew_arith)op, threads, 1, one, 1, big);
                skipped += check_inline(level, (ld_ew_arith)op, threads, 2, rows, 2, col);
                skipped += check_inline(level, (ld_ew_arith)op, threads, 2, many, 2, row8);
                skipped += check_inline(level, (ld_ew_arith)op, threads, 2, mid, 1, row40);
                /* NONE: every element reaches the hook; AVX2: most do not */
                if (level == LD_EW_ROUND_NONE)
                    assert_int_equal(skipped, 0);
                else
                    assert_true(skipped > 0);
            }
        }
    }
    ld_ew_round_force_level(-1);
}

/* --- the engine's side: the block rounding ---------------------------------------------- */

static void check_block(const float *src, int64_t n, ld_precision p, ld_rounding mode,
                        bool flush, bool with_half)
{
    ld_round_options o = {mode, flush};
    float *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    ld_fp16 *half = malloc((size_t)n * sizeof *half);
    assert_true(a && b && half);
    memcpy(b, src, (size_t)n * sizeof *b);
    ld_emu_tally ta = {0}, tb = {0};
    ld_emu_round_counted(src, a, n, p, &o, 2, &ta);
    ld_emu_round_block(b, b, with_half ? half : NULL, n, p, &o, &tb); /* in place */
    for (int64_t i = 0; i < n; i++) {
        if (emt_bits(a[i]) != emt_bits(b[i]))
            fail_msg("%s element %lld: block %a, counted %a", ld_precision_name(p),
                     (long long)i, (double)b[i], (double)a[i]);
        if (with_half && half[i].bits != ld_fp32_to_fp16(a[i]).bits)
            fail_msg("element %lld: float16 bits %04x, expected %04x", (long long)i,
                     half[i].bits, ld_fp32_to_fp16(a[i]).bits);
    }
    emt_expect_tally(&tb, &ta);
    free(a);
    free(b);
    free(half);
}

static void test_round_block_equals_counted(void **state)
{
    (void)state;
    const int64_t n = 150011; /* several chunks and a tail */
    float *src = malloc((size_t)n * sizeof *src);
    assert_non_null(src);
    for (int64_t i = 0; i < n; i++)
        src[i] = varied_float();
    for (int flush = 0; flush <= 1; flush++) {
        check_block(src, n, LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, flush, !flush);
        check_block(src, n, LD_PRECISION_BF16, LD_ROUND_NEAREST_EVEN, flush, false);
        check_block(src, n, LD_PRECISION_FP32, LD_ROUND_NEAREST_EVEN, flush, false);
        for (int mode = 0; mode < 3; mode++)
            check_block(src, n, LD_PRECISION_TF32, (ld_rounding)mode, flush, false);
    }
    check_block(src, 13, LD_PRECISION_FP16, LD_ROUND_NEAREST_EVEN, false, true); /* tail */
    free(src);
}

/* --- a whole run: fused against the pass after compute ---------------------------------- */

/* x [N, C], s [C] -> Mul "scale" (s) -> Add "shift" (x) -> Clip "clip" ->
 * Div "div" (x) -> Relu "relu" -> Sigmoid "sig" -> Sub "sub" (Relu) -> y */
static ld_graph *model(int64_t n, int64_t c)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t dims[2] = {n, c};
    ob_input(g, "x", FLOAT, 2, dims);
    Onnx__TensorProto *s = ob_tensor("s", FLOAT, 1, &c);
    float *sv = ob_mem((size_t)c * sizeof *sv);
    for (int64_t i = 0; i < c; i++)
        sv[i] = i % 5 == 0 ? 3000.0f : i % 5 == 1 ? 1e-4f : 0.37f * (float)(i + 1);
    ob_set_raw(s, sv, (size_t)c * sizeof *sv);
    OB_PUSH(g->initializer, g->n_initializer, s);
    ob_node(g, "Mul", "scale", "x,s", "scaled");
    ob_node(g, "Add", "shift", "scaled,x", "shifted");
    ob_node(g, "Clip", "clip", "shifted", "clipped");
    ob_node(g, "Div", "div", "clipped,x", "divided");
    ob_node(g, "Relu", "relu", "divided", "relu_out");
    ob_node(g, "Sigmoid", "sig", "relu_out", "sig_out");
    ob_node(g, "Sub", "sub", "sig_out,relu_out", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

static Onnx__TensorProto *bn_param(Onnx__GraphProto *g, const char *name, int64_t c,
                                    float base, float step)
{
    Onnx__TensorProto *t = ob_tensor(name, FLOAT, 1, &c);
    float *v = ob_mem((size_t)c * sizeof *v);
    for (int64_t i = 0; i < c; i++)
        v[i] = base + step * (float)i;
    ob_set_raw(t, v, (size_t)c * sizeof *v);
    OB_PUSH(g->initializer, g->n_initializer, t);
    return t;
}

/* x [N, C, S] -> Mul "square" (x) -> BatchNormalization "bn" -> Relu "relu" -> y:
 * BatchNormalization rounds its output planes itself (normalization.c). */
static ld_graph *model_bn(int64_t n, int64_t c, int64_t s)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t dims[3] = {n, c, s};
    ob_input(g, "x", FLOAT, 3, dims);
    bn_param(g, "gamma", c, 0.5f, 900.0f); /* large scales overflow fp16 */
    bn_param(g, "beta", c, -1.0f, 0.25f);
    bn_param(g, "mean", c, 0.1f, 0.01f);
    bn_param(g, "var", c, 1e-3f, 3.0f);
    ob_node(g, "Mul", "square", "x,x", "sq");
    ob_node(g, "BatchNormalization", "bn", "sq,gamma,beta,mean,var", "normed");
    ob_node(g, "Relu", "relu", "normed", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

/* x [N, C, H, W] -> Mul "square" (x) -> Resize "up" (nearest, scales
 * 1, 1, 2, 3) -> Relu "relu" -> y: nearest Resize rounds its output rows
 * itself (resize.c). */
static ld_graph *model_resize(int64_t n, int64_t c, int64_t h, int64_t w)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    int64_t dims[4] = {n, c, h, w}, four = 4, none = 0;
    ob_input(g, "x", FLOAT, 4, dims);
    Onnx__TensorProto *roi = ob_tensor("roi", FLOAT, 1, &none);
    OB_PUSH(g->initializer, g->n_initializer, roi);
    Onnx__TensorProto *scales = ob_tensor("scales", FLOAT, 1, &four);
    float *sv = ob_mem(4 * sizeof *sv);
    sv[0] = 1.0f, sv[1] = 1.0f, sv[2] = 2.0f, sv[3] = 3.0f;
    ob_set_raw(scales, sv, 4 * sizeof *sv);
    OB_PUSH(g->initializer, g->n_initializer, scales);
    ob_node(g, "Mul", "square", "x,x", "sq");
    Onnx__NodeProto *up = ob_node(g, "Resize", "up", "sq,roi,scales", "upsampled");
    Onnx__AttributeProto *mode = ob_attr(up, "mode", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    mode->has_s = 1;
    mode->s.data = (uint8_t *)ob_str("nearest");
    mode->s.len = 7;
    ob_node(g, "Relu", "relu", "upsampled", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

static void expect_same_runs(const emt_capture *a, const emt_capture *b)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        const emt_event *x = &a->ev[i], *y = &b->ev[i];
        assert_string_equal(x->value, y->value);
        assert_true((x->t == NULL) == (y->t == NULL)); /* shown without data */
        if (x->t) {
            assert_int_equal(x->t->dtype, y->t->dtype);
            assert_int_equal(x->t->nbytes, y->t->nbytes);
            if (memcmp(x->t->data, y->t->data, x->t->nbytes) != 0)
                fail_msg("'%s' differs between fused and unfused rounding", x->value);
        }
        const ld_layer_counters *p = &x->counters, *q = &y->counters;
        if (p->overflows != q->overflows || p->underflows != q->underflows ||
            p->subnormals != q->subnormals || p->nans_created != q->nans_created ||
            p->present != q->present)
            fail_msg("'%s': counters fused %lld/%lld/%lld/%lld, unfused %lld/%lld/%lld/%lld",
                     x->value, (long long)p->overflows, (long long)p->underflows,
                     (long long)p->subnormals, (long long)p->nans_created,
                     (long long)q->overflows, (long long)q->underflows,
                     (long long)q->subnormals, (long long)q->nans_created);
    }
}

/* w > 0: model_resize(n, c, s, w); else s > 0: model_bn(n, c, s); else
 * model(n, c). */
static void check_model_of(int64_t n, int64_t c, int64_t s, int64_t w, bool bf16, bool flush,
                           int threads, int runs)
{
    ld_graph *g = w > 0 ? model_resize(n, c, s, w) : s > 0 ? model_bn(n, c, s) : model(n, c);
    int64_t dims[4] = {n, c, s, w};
    ld_tensor *x = make_tensor("x", w > 0 ? 4 : s > 0 ? 3 : 2, dims);
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = !bf16;
    cfg.bf16 = bf16;
    cfg.flush_denormals = flush;
    emt_capture fused = {0}, unfused = {0};
    emt_run(g, &cfg, &x, &fused, runs, threads, true);
    emt_run(g, &cfg, &x, &unfused, runs, threads, false);
    expect_same_runs(&fused, &unfused);
    int64_t counted = 0; /* the data must exercise the counters */
    for (int i = 0; i < fused.n; i++)
        counted += fused.ev[i].counters.overflows + fused.ev[i].counters.underflows +
                   fused.ev[i].counters.subnormals + fused.ev[i].counters.nans_created;
    assert_true(counted > 0);
    emt_capture_free(&fused);
    emt_capture_free(&unfused);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

static void check_model(int64_t n, int64_t c, bool bf16, bool flush, int threads, int runs)
{
    check_model_of(n, c, 0, 0, bf16, flush, threads, runs);
}

static void test_fused_run_equals_pass(void **state)
{
    (void)state;
    check_model(1200, 250, false, false, 2, 2); /* 300000 elements: threads, blocks */
    check_model(1200, 250, false, false, 1, 1);
    check_model(37, 5, false, false, 2, 2);     /* small, one thread inside */
    check_model(600, 250, false, true, 2, 1);   /* flush: the generic rounding */
    check_model(600, 250, true, false, 2, 2);   /* bf16 */
    /* BatchNormalization: planes of several blocks with a tail, threads */
    check_model_of(3, 8, 9000, 0, false, false, 2, 2);
    check_model_of(2, 3, 300, 0, false, false, 1, 1);  /* one short block per plane */
    check_model_of(2, 8, 5000, 0, false, true, 2, 1);  /* flush */
    /* nearest Resize: runs of rows per thread, repeated rows, a short tail */
    check_model_of(2, 16, 37, 29, false, false, 2, 2);
    check_model_of(1, 3, 5, 7, false, false, 1, 1);
    check_model_of(2, 16, 37, 29, false, true, 2, 1); /* flush */
    /* Add, Sub, Mul, Div rounding in their loop, and not */
    for (int level = LD_EW_ROUND_NONE; level <= LD_EW_ROUND_AVX2; level++) {
        if (!ld_ew_round_force_level(level))
            continue;
        check_model(1200, 250, false, false, 2, 2);
        check_model(37, 5, false, false, 1, 1);
    }
    ld_ew_round_force_level(-1);
}

/* --- convolutions ------------------------------------------------------------------------ */

/* scale x [-4, 4] in steps, a ninth zeros; with spikes, 1 in 997 is 300
 * (x scale) and 1 in 20000 NaN: overflows and NaN stay local in space. */
static float conv_value(float scale, bool spikes)
{
    uint32_t r = rnd32();
    if (spikes && r % 20011 == 0)
        return NAN;
    if (spikes && r % 997 == 0)
        return 300.0f * scale;
    if (r % 9 == 0)
        return 0.0f;
    return scale * ((float)(int32_t)(rnd32() % 2001u) - 1000.0f) / 250.0f;
}

/* Conv (or, transpose, ConvTranspose with strides k: each output written
 * once) `name` with weights and bias initializers of varied magnitudes. */
static void conv_node(Onnx__GraphProto *g, const char *name, const char *in, const char *out,
                      int64_t m, int64_t c_per_group, int64_t k, int64_t group, bool transpose)
{
    char w_name[32], b_name[32], ins[96];
    snprintf(w_name, sizeof w_name, "%s_w", name);
    snprintf(b_name, sizeof b_name, "%s_b", name);
    int64_t dims[4] = {m, c_per_group, k, k}, count = m * c_per_group * k * k;
    Onnx__TensorProto *w = ob_tensor(w_name, FLOAT, 4, dims);
    float *wv = ob_mem((size_t)count * sizeof *wv);
    int64_t per_m = count / m; /* output channels of tiny (subnormal results) and large weights */
    for (int64_t i = 0; i < count; i++)
        wv[i] = i / per_m % 4 == 1 ? conv_value(1e-7f, false)
                : i / per_m % 4 == 2 ? conv_value(2.0f, false) : conv_value(0.1f, false);
    ob_set_raw(w, wv, (size_t)count * sizeof *wv);
    OB_PUSH(g->initializer, g->n_initializer, w);
    Onnx__TensorProto *b = ob_tensor(b_name, FLOAT, 1, &m);
    float *bv = ob_mem((size_t)m * sizeof *bv);
    for (int64_t i = 0; i < m; i++)
        bv[i] = i % 4 != 3 ? 0.0f : conv_value(0.01f, false);
    ob_set_raw(b, bv, (size_t)m * sizeof *bv);
    OB_PUSH(g->initializer, g->n_initializer, b);
    snprintf(ins, sizeof ins, "%s,%s,%s", in, w_name, b_name);
    Onnx__NodeProto *n = ob_node(g, transpose ? "ConvTranspose" : "Conv", name, ins, out);
    Onnx__AttributeProto *ints = ob_attr(n, transpose ? "strides" : "pads",
                                         ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    ints->n_ints = transpose ? 2 : 4;
    ints->ints = ob_mem(4 * sizeof *ints->ints);
    for (int i = 0; i < 4; i++)
        ints->ints[i] = transpose ? k : k / 2;
    Onnx__AttributeProto *grp = ob_attr(n, "group", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    grp->has_i = 1;
    grp->i = group;
}

/* x [N, C, H, W] -> Mul "square" -> Conv "dense" (3x3, pads 1, C -> M) ->
 * Conv "dw" (depthwise 3x3) -> Conv "pw" (1x1) -> ConvTranspose "up" (2x2,
 * strides 2) -> Mul "same" (x 1) -> y: the direct convolution rounds
 * float16 in its stores, depthwise hands each plane to round_block (conv.c),
 * ConvTranspose each output row (conv_transpose.c). */
static ld_graph *model_conv(int64_t n, int64_t c, int64_t m, int64_t h, int64_t w)
{
    Onnx__ModelProto *mp = ob_model();
    Onnx__GraphProto *g = mp->graph;
    int64_t dims[4] = {n, c, h, w}, one = 1;
    ob_input(g, "x", FLOAT, 4, dims);
    Onnx__TensorProto *s = ob_tensor("one", FLOAT, 1, &one);
    float *sv = ob_mem(sizeof *sv);
    sv[0] = 1.0f;
    ob_set_raw(s, sv, sizeof *sv);
    OB_PUSH(g->initializer, g->n_initializer, s);
    ob_node(g, "Mul", "square", "x,x", "sq");
    conv_node(g, "dense", "sq", "dense_out", m, c, 3, 1, false);
    conv_node(g, "dw", "dense_out", "dw_out", m, 1, 3, m, false);
    conv_node(g, "pw", "dw_out", "pw_out", m, m, 1, 1, false);
    conv_node(g, "up", "pw_out", "up_out", m, m, 2, 1, true);
    ob_node(g, "Mul", "same", "up_out,one", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(mp);
}

/* The convolutions' own rounding equals the engine's pass, values and every
 * layer's counters, when the observer reads only the outputs (then the
 * direct convolution rounds in its stores) and when it reads everything
 * (the float16 bits kept: the stores leave rounding to the hook), on 1 and
 * 2 threads, at every direct-convolution level the CPU runs and without the
 * direct kernels (im2col). */
static void test_conv_rounding_equals_pass(void **state)
{
    (void)state;
    static const ld_conv_direct_level levels[] = {LD_CONV_DIRECT_NONE, LD_CONV_DIRECT_AVX2,
                                                  LD_CONV_DIRECT_AVX512};
    ld_graph *g = model_conv(1, 6, 13, 21, 45);
    int64_t dims[4] = {1, 6, 21, 45};
    ld_tensor *x = make_tensor("x", 4, dims);
    for (int64_t i = 0; i < x->count; i++)
        ((float *)x->data)[i] = conv_value(1.0f, true);
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    for (size_t li = 0; li < sizeof levels / sizeof levels[0]; li++) {
        if (!ld_conv_direct_force_level(levels[li]))
            continue;
        for (int threads = 1; threads <= 2; threads++)
            for (int outputs_only = 0; outputs_only < 2; outputs_only++) {
                emt_capture fused = {0}, unfused = {0};
                emt_run_observing(g, &cfg, &x, &fused, 2, threads, true, outputs_only);
                emt_run_observing(g, &cfg, &x, &unfused, 2, threads, false, outputs_only);
                expect_same_runs(&fused, &unfused);
                int64_t counted = 0;
                for (int i = 0; i < fused.n; i++) {
                    if (strcmp(fused.ev[i].node, "same") != 0)
                        counted += fused.ev[i].counters.overflows +
                                   fused.ev[i].counters.underflows +
                                   fused.ev[i].counters.subnormals +
                                   fused.ev[i].counters.nans_created;
                }
                assert_true(counted > 0); /* the data exercises the counters */
                assert_non_null(emt_find(&fused, "y")->t);
                emt_capture_free(&fused);
                emt_capture_free(&unfused);
            }
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

/* --- a folded Constant ------------------------------------------------------------------ */

/* A Constant is folded (exec.c's foldable_constant; never an emulated layer,
 * so the hooks are not called for it): observers see it with its float32
 * values and counters present (zero); Add rounds it (1.0, inf: 70000
 * overflows, 0: 1e-8 underflows, 2.5) with the same counts every run. */
static void test_constant_folded(void **state)
{
    (void)state;
    Onnx__ModelProto *m = ob_model();
    int64_t n = 4;
    ob_input(m->graph, "x", FLOAT, 1, &n);
    Onnx__NodeProto *k = ob_node(m->graph, "Constant", "k", "", "c");
    Onnx__AttributeProto *a = ob_attr(k, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = ob_tensor("", FLOAT, 1, &n);
    const float cv[4] = {1.0001f, 70000.0f, 1e-8f, 2.5f}, y[4] = {2.0f, INFINITY, 1.0f, 3.5f};
    ob_set_raw(a->t, cv, sizeof cv);
    ob_node(m->graph, "Add", "add", "x,c", "y");
    ob_output(m->graph, "y", FLOAT);
    ld_graph *g = ob_load_ok(m);
    ld_tensor *x = make_tensor("x", 1, &n);
    for (int i = 0; i < 4; i++)
        ((float *)x->data)[i] = 1.0f;
    ld_engine_config cfg;
    ld_engine_config_init(&cfg);
    cfg.fp16 = true;
    for (int runs = 1; runs <= 3; runs += 2) {
        emt_capture cap = {0};
        emt_run(g, &cfg, &x, &cap, runs, 2, true);
        const emt_event *c = emt_find(&cap, "c"), *e = emt_find(&cap, "y");
        assert_int_equal(c->t->dtype, LD_DTYPE_FLOAT32);
        assert_int_equal(e->t->dtype, LD_DTYPE_FLOAT32);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(emt_bits(((const float *)c->t->data)[i]), emt_bits(cv[i]));
            assert_int_equal(emt_bits(((const float *)e->t->data)[i]), emt_bits(y[i]));
        }
        assert_int_equal(c->precision, LD_PRECISION_FP32);
        assert_true(c->counters.present && e->counters.present);
        assert_int_equal(c->counters.overflows + c->counters.underflows, 0);
        assert_int_equal(e->counters.overflows, 1);
        assert_int_equal(e->counters.underflows, 1);
        assert_int_equal(e->counters.subnormals + e->counters.nans_created, 0);
        emt_capture_free(&cap);
    }
    ld_engine_config_clear(&cfg);
    ld_tensor_destroy(x);
    ld_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_drivers_round_every_element_once),
        T(test_arith_rounds_inline),
        T(test_constant_folded),
        T(test_round_block_equals_counted),
        T(test_fused_run_equals_pass),
        T(test_conv_rounding_equals_pass),
    };
    /* every counting level this CPU can run (an AVX-512 machine also runs
     * the AVX2 code) */
    return emt_run_every_level("test_emulated_fused", tests, sizeof tests / sizeof tests[0]);
}
