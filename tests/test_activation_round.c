/* Tests of Clip and Relu rounding float16 in their clamping loop for the
 * emulated engine (round_fp16_inline, backends/kernels/activation_round.h),
 * at every level this CPU runs (ld_act_round_force_level), on 1 and 2
 * threads, with tails, in place, with and without float16 bits asked for:
 *  - the kernels' values are, bit for bit (NaN payloads and zero signs
 *    included), the driver's path rounded by the hook (level NONE), which
 *    is Clip's row function's clamp rounded;
 *  - every element reaches round_block at most once, and every element
 *    whose rounding counts anything (zero from nonzero, subnormal, overflow,
 *    infinity, NaN) reaches it exactly once, unrounded; the float16 bits of
 *    the others are stored; at AVX2 most elements skip the hook, at NONE
 *    none does; without room for the bits nothing is rounded in the loop;
 *  - a model run (Clip with bounds, Relu) with the fused rounding equals the
 *    run with the pass after compute, values and counters. */
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
#include "backends/kernels/activation_round.h"
#include "layerdiff/engine.h"
#include "layerdiff/kernel.h"
#include "layerdiff/round.h"
#include "tests/support/emulated_testing.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static uint32_t rnd32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Mostly ordinary values (many near the bounds used below), with every kind
 * the counters care about and NaNs with payloads. */
static float varied_float(void)
{
    static const float special[] = {70000.0f, -1e5f, INFINITY, -INFINITY, NAN, 1e-9f,
                                    -1e-8f,   1e-6f, -3e-5f,   0.0f,      -0.0f, 65519.0f,
                                    6.1e-5f,  3e38f, 1e-40f,   -1e-40f};
    uint32_t r = rnd32();
    if (r % 200 == 0)
        return special[(r / 200) % (sizeof special / sizeof special[0])];
    if (r % 499 == 0) { /* a NaN with a payload, either sign */
        uint32_t bits = 0x7FC00000u | (rnd32() & 0x3FFFFFu) | (rnd32() & 1u) << 31;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    if (r % 7 == 0)
        return r % 2 ? 0.0f : -0.0f;
    return ((float)(int32_t)(rnd32() % 2000001u) - 1000000.0f) / 97700.0f;
}

static ld_tensor *tensor_of(const char *name, int64_t n)
{
    ld_shape shape;
    ld_tensor *t = NULL;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, 1, &n, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    return t;
}

static ld_tensor *scalar_of(const char *name, float v)
{
    ld_shape shape;
    ld_tensor *t = NULL;
    ld_error err;
    assert_int_equal(ld_shape_set(&shape, 0, NULL, &err), LD_OK);
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    *(float *)t->data = v;
    return t;
}

/* What reached the hook: per element, how often and its value then. */
typedef struct coverage {
    const float *base;
    int64_t count;
    unsigned char *seen;
    float *at_hook;
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

static bool counts_something(float v)
{
    ld_emu_tally t = {0};
    float r;
    ld_emu_round_counted(&v, &r, 1, LD_PRECISION_FP16, NULL, 1, &t);
    return t.overflows || t.underflows || t.subnormals || t.src_infs || t.src_nans;
}

typedef struct op_case {
    const char *op; /* "Clip" (opset 13, bounds as inputs) or "Relu" */
    float lo, hi;
    bool all_count; /* every result is subnormal or zero from nonzero: no group skips */
} op_case;

/* Runs the op's kernel on src (n values) at `level` with the mock hook,
 * round_fp16_inline and float16 bits for `room` values (none when < 0),
 * in place or not, into *out (new); returns how many elements skipped the
 * hook, after checking the hook's side of the contract. */
static int64_t run_kernel(const op_case *oc, int level, int threads, const float *src, int64_t n,
                          int64_t room, bool in_place, ld_tensor **out, uint16_t **bits_out)
{
    assert_true(ld_act_round_force_level(level));
    const ld_kernel *k = ld_kernel_find("", oc->op, 13);
    assert_non_null(k);
    ld_tensor *x = tensor_of("x", n), *y = in_place ? x : tensor_of("y", n);
    memcpy(x->data, src, (size_t)n * sizeof *src);
    ld_tensor *lo = scalar_of("lo", oc->lo), *hi = scalar_of("hi", oc->hi);
    const ld_tensor *ins[3] = {x, lo, hi};
    coverage c = {y->data, n, calloc((size_t)n, 1), calloc((size_t)n, sizeof(float))};
    uint16_t *bits = room >= 0 ? calloc((size_t)n, sizeof *bits) : NULL;
    assert_true(c.seen && c.at_hook && (room < 0 || bits));
    ld_node node = {.name = (char *)"n", .op_type = (char *)oc->op, .domain = (char *)"",
                    .opset = 13};
    ld_error err;
    ld_layer_numerics numerics = {.precision = LD_PRECISION_FP16};
    ld_layer_counters counters = {0};
    ld_kernel_ctx ctx = {.node = &node, .n_inputs = strcmp(oc->op, "Clip") == 0 ? 3 : 1,
                         .inputs = ins, .n_outputs = 1, .outputs = &y, .threads = threads,
                         .numerics = &numerics, .counters = &counters, .err = &err,
                         .round_block = mock_round_block, .round_user = &c,
                         .round_fp16_inline = true, .round_fp16_bits = bits,
                         .round_fp16_bits_count = room};
    assert_int_equal(k->compute(&ctx), LD_OK);
    assert_int_equal(ctx.rounded_outputs, 1u);
    int64_t skipped = 0;
    const float *got = y->data;
    for (int64_t i = 0; i < n; i++) {
        if (c.seen[i] > 1)
            fail_msg("%s element %lld reached the hook %d times", oc->op, (long long)i,
                     c.seen[i]);
        skipped += c.seen[i] == 0;
        if (c.seen[i] == 0 && counts_something(got[i]))
            fail_msg("%s element %lld is %a, which counts, but skipped the hook", oc->op,
                     (long long)i, (double)got[i]);
        if (c.seen[i] == 0 && bits && bits[i] != ld_fp32_to_fp16(got[i]).bits)
            fail_msg("%s element %lld: float16 bits %04x, expected %04x", oc->op, (long long)i,
                     bits[i], ld_fp32_to_fp16(got[i]).bits);
    }
    free(c.seen);
    free(c.at_hook);
    if (!in_place)
        ld_tensor_destroy(x);
    ld_tensor_destroy(lo);
    ld_tensor_destroy(hi);
    *out = y;
    if (bits_out)
        *bits_out = bits;
    else
        free(bits);
    return skipped;
}

/* The kernel at `level` against the driver path (NONE): same bits. */
static void check_case(const op_case *oc, int level, int threads, int64_t n, bool in_place)
{
    float *src = malloc((size_t)n * sizeof *src);
    assert_non_null(src);
    for (int64_t i = 0; i < n; i++)
        src[i] = varied_float();
    ld_tensor *want = NULL, *got = NULL;
    assert_int_equal(run_kernel(oc, LD_ACT_ROUND_NONE, 1, src, n, -1, false, &want, NULL), 0);
    for (int room = 0; room < 3; room++) { /* no bits, room for all, one short */
        int64_t r = room == 0 ? -1 : room == 1 ? n : n - 1;
        int64_t skipped = run_kernel(oc, level, threads, src, n, r, in_place, &got, NULL);
        if (memcmp(got->data, want->data, (size_t)n * sizeof(float)) != 0) {
            const uint32_t *g = got->data, *w = want->data;
            int64_t i = 0;
            while (g[i] == w[i])
                i++;
            fail_msg("%s [%g, %g] level %d, %d threads, n %lld, room %lld: element %lld is "
                     "%08x, the driver's %08x (input %a)", oc->op, (double)oc->lo,
                     (double)oc->hi, level, threads, (long long)n, (long long)r, (long long)i,
                     g[i], w[i], (double)src[i]);
        }
        if (level == LD_ACT_ROUND_NONE || room == 2)
            assert_int_equal(skipped, 0);
        else if (n >= 1000 && !oc->all_count)
            assert_true(skipped > n / 2);
        ld_tensor_destroy(got);
    }
    ld_tensor_destroy(want);
    free(src);
    ld_act_round_force_level(-1);
}

static void test_clamp_rounds_inline(void **state)
{
    (void)state;
    const op_case cases[] = {
        {"Relu", 0, 0, false},
        {"Clip", 0.0f, 6.0f, false},
        {"Clip", -3.0f, 3.0f, false},
        {"Clip", -1e5f, 70000.0f, false}, /* bounds that overflow */
        {"Clip", 1e-7f, 3e-5f, true},     /* results subnormal */
        {"Clip", -0.0f, 0.0f, false},
        {"Clip", 2.0f, 1.0f, false}, /* min > max: max everywhere */
        {"Clip", -INFINITY, INFINITY, false},
        {"Clip", NAN, 5.0f, false},
    };
    const int64_t sizes[] = {300007, 16384 * 3 + 5, 1000, 33, 16, 15, 1};
    for (int level = LD_ACT_ROUND_NONE; level <= LD_ACT_ROUND_AVX2; level++) {
        if (!ld_act_round_force_level(level)) {
            printf("# activation rounding level %d: this CPU cannot run it, skipped\n", level);
            continue;
        }
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int threads = 1; threads <= 2; threads++)
                for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
                    check_case(&cases[c], level, threads, sizes[s], s % 2 == 1);
    }
    ld_act_round_force_level(-1);
}

/* Clip keeps a zero's sign and a NaN (the row function's compares; its
 * payload as the hook rounds it), rounded in the loop or not. */
static void test_clip_signed_zero_and_nan(void **state)
{
    (void)state;
    float src[32];
    uint32_t nan_bits = 0xFFC12345u;
    for (int i = 0; i < 32; i++)
        src[i] = i % 4 == 0 ? -0.0f : 1.5f;
    memcpy(&src[5], &nan_bits, sizeof nan_bits);
    const op_case clip = {"Clip", 0.0f, 6.0f, false}, relu = {"Relu", 0, 0, false};
    for (int level = LD_ACT_ROUND_NONE; level <= LD_ACT_ROUND_AVX2; level++) {
        if (!ld_act_round_force_level(level))
            continue;
        for (int k = 0; k < 2; k++) {
            ld_tensor *out = NULL;
            uint16_t *bits = NULL;
            run_kernel(k ? &relu : &clip, level, 1, src, 32, 32, false, &out, &bits);
            const uint32_t *o = out->data;
            assert_int_equal(o[0], 0x80000000u); /* -0 < 0 is false: -0 */
            float nan_out; /* the NaN, as the hook rounds it */
            memcpy(&nan_out, &nan_bits, sizeof nan_out);
            ld_round_array(&nan_out, 1, LD_PRECISION_FP16, NULL);
            uint32_t nan_out_bits;
            memcpy(&nan_out_bits, &nan_out, sizeof nan_out_bits);
            assert_int_equal(o[5], nan_out_bits);
            assert_true(((const float *)out->data)[1] == 1.5f);
            if (level == LD_ACT_ROUND_AVX2) /* a group of -0 and 1.5 skips the hook */
                assert_int_equal(bits[16], 0x8000);
            free(bits);
            ld_tensor_destroy(out);
        }
    }
    ld_act_round_force_level(-1);
}

/* --- a whole run ---------------------------------------------------------------------- */

/* x [N] -> Mul "sq" (x) -> Clip "clip" (-50, 70000) -> Sub "shift" (100)
 * -> Relu "relu" -> Add "y" (Clip's) -> y */
static ld_graph *model(int64_t n)
{
    Onnx__ModelProto *m = ob_model();
    Onnx__GraphProto *g = m->graph;
    ob_input(g, "x", FLOAT, 1, &n);
    const char *names[3] = {"lo", "hi", "c"};
    const float bounds[3] = {-50.0f, 70000.0f, 100.0f};
    for (int i = 0; i < 3; i++) {
        Onnx__TensorProto *t = ob_tensor(names[i], FLOAT, 0, NULL);
        float *v = ob_mem(sizeof *v);
        *v = bounds[i];
        ob_set_raw(t, v, sizeof *v);
        OB_PUSH(g->initializer, g->n_initializer, t);
    }
    ob_node(g, "Mul", "sq", "x,x", "squared");
    ob_node(g, "Clip", "clip", "squared,lo,hi", "clipped");
    ob_node(g, "Sub", "shift", "clipped,c", "shifted"); /* negatives too */
    ob_node(g, "Relu", "relu", "shifted", "relu_out");
    ob_node(g, "Add", "y", "relu_out,clipped", "y");
    ob_output(g, "y", FLOAT);
    return ob_load_ok(m);
}

static void expect_same_runs(const emt_capture *a, const emt_capture *b)
{
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        const emt_event *x = &a->ev[i], *y = &b->ev[i];
        assert_string_equal(x->value, y->value);
        assert_int_equal(x->t->nbytes, y->t->nbytes);
        if (memcmp(x->t->data, y->t->data, x->t->nbytes) != 0)
            fail_msg("'%s' differs between fused and unfused rounding", x->value);
        const ld_layer_counters *p = &x->counters, *q = &y->counters;
        if (p->overflows != q->overflows || p->underflows != q->underflows ||
            p->subnormals != q->subnormals || p->nans_created != q->nans_created ||
            p->present != q->present)
            fail_msg("'%s': counters differ between fused and unfused rounding", x->value);
    }
}

static void test_model_fused_equals_pass(void **state)
{
    (void)state;
    const int64_t sizes[] = {200003, 77};
    for (int level = LD_ACT_ROUND_NONE; level <= LD_ACT_ROUND_AVX2; level++) {
        if (!ld_act_round_force_level(level))
            continue;
        for (size_t s = 0; s < 2; s++) {
            ld_graph *g = model(sizes[s]);
            ld_tensor *x = tensor_of("x", sizes[s]);
            for (int64_t i = 0; i < x->count; i++)
                ((float *)x->data)[i] = varied_float();
            for (int flush = 0; flush <= 1; flush++) {
                ld_engine_config cfg;
                ld_engine_config_init(&cfg);
                cfg.fp16 = true;
                cfg.flush_denormals = flush;
                for (int threads = 1; threads <= 2; threads++) {
                    emt_capture fused = {0}, unfused = {0};
                    emt_run(g, &cfg, &x, &fused, 2, threads, true);
                    emt_run(g, &cfg, &x, &unfused, 2, threads, false);
                    expect_same_runs(&fused, &unfused);
                    int64_t counted = 0; /* the data must exercise the counters */
                    for (int i = 0; i < fused.n; i++)
                        counted += fused.ev[i].counters.overflows +
                                   fused.ev[i].counters.underflows +
                                   fused.ev[i].counters.subnormals;
                    assert_true(counted > 0);
                    emt_capture_free(&fused);
                    emt_capture_free(&unfused);
                }
                ld_engine_config_clear(&cfg);
            }
            ld_tensor_destroy(x);
            ld_graph_destroy(g);
        }
    }
    ld_act_round_force_level(-1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_clamp_rounds_inline),
        T(test_clip_signed_zero_and_nan),
        T(test_model_fused_equals_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
