/* Unit tests for the remaining operator families (backends/kernels/{resize,
 * rnn,quantize,signal,detection}.c), for what the ONNX node tests cover
 * poorly: Resize on every dtype, n-D and thread-count determinism against a
 * naive reference, the opset-10 nearest rule; bidirectional / reverse /
 * batch-major recurrent layers with sequence_lens, peepholes, clip and
 * linear_before_reset against a naive double reference; quantization
 * rounding and saturation; DFT lengths against a naive DFT; empty and
 * degenerate inputs; and the error paths (messages name the node). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/backend.h"
#include "layerdiff/onnx.h"
#include "layerdiff/round.h"
#include "onnx/onnx.pb-c.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

#define IN(n, dt, r, ...) {.name = n, .dtype = dt, .rank = r, .dims = {__VA_ARGS__}}
#define NO_INPUT {.name = NULL}

static void expect_close(const ld_tensor *t, const double *want, int64_t n, double tol,
                         const char *what)
{
    assert_non_null(t);
    assert_int_equal(t->count, n);
    for (int64_t i = 0; i < n; i++) {
        double got = ld_tensor_get_double(t, i);
        if (!(fabs(got - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s: element %lld is %.9g, expected %.9g", what, (long long)i, got, want[i]);
    }
}

static void fill_uniform(float *v, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(kr_uniform() * scale);
}

/* --- Resize ------------------------------------------------------------------------------ */

static void test_resize_nearest_every_dtype(void **state)
{
    (void)state;
    static const ld_dtype types[] = {LD_DTYPE_UINT8, LD_DTYPE_INT16, LD_DTYPE_INT64,
                                     LD_DTYPE_BOOL, LD_DTYPE_FLOAT16, LD_DTYPE_FLOAT64};
    const float scales[4] = {1, 1, 2, 3};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        uint64_t raw[4] = {0};
        size_t e = ld_dtype_size(types[k]);
        for (int i = 0; i < 4; i++) /* distinct bit patterns valid in every type */
            ((unsigned char *)raw)[i * e] =
                (unsigned char)(types[k] == LD_DTYPE_BOOL ? i % 2 : i + 1);
        kr_input ins[] = {IN("X", types[k], 4, 1, 1, 2, 2), NO_INPUT,
                          IN("scales", LD_DTYPE_FLOAT32, 1, 4)};
        ins[0].data = raw;
        ins[2].data = scales;
        kr_attr attrs[] = {{KR_STRING, "mode", .s = "nearest"}, {KR_END}};
        kr_result r;
        kr_run(13, "Resize", attrs, ins, 3, "Y", 1, &r);
        kr_expect_ok(&r);
        assert_int_equal(r.t[0]->dtype, types[k]);
        assert_int_equal(r.t[0]->count, 24);
        for (int64_t i = 0; i < 24; i++) { /* output (y, x) reads input (y / 2, x / 3) */
            int64_t src = (i / 6) / 2 * 2 + (i % 6) / 3;
            assert_memory_equal((char *)r.t[0]->data + i * (int64_t)e,
                                (char *)raw + src * (int64_t)e, e);
        }
        kr_free(&r);
    }
}

/* Naive half_pixel linear resize of the last two axes, in double. */
static void naive_bilinear(const float *x, int64_t planes, int64_t ih, int64_t iw, int64_t oh,
                           int64_t ow, double *y)
{
    for (int64_t p = 0; p < planes; p++)
        for (int64_t j = 0; j < oh; j++)
            for (int64_t i = 0; i < ow; i++) {
                double sy = ((double)j + 0.5) * (double)ih / (double)oh - 0.5;
                double sx = ((double)i + 0.5) * (double)iw / (double)ow - 0.5;
                double fy = floor(sy), fx = floor(sx), ry = sy - fy, rx = sx - fx;
                int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
                double acc = 0;
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++) {
                        int64_t yy = y0 + a, xx = x0 + b;
                        yy = yy < 0 ? 0 : (yy >= ih ? ih - 1 : yy);
                        xx = xx < 0 ? 0 : (xx >= iw ? iw - 1 : xx);
                        acc += (a ? ry : 1 - ry) * (b ? rx : 1 - rx) * x[(p * ih + yy) * iw + xx];
                    }
                y[(p * oh + j) * ow + i] = acc;
            }
}

static void test_resize_linear_matches_naive_and_threads(void **state)
{
    (void)state;
    enum { N = 2, C = 3, IH = 37, IW = 41, OH = 80, OW = 29 };
    static float x[N * C * IH * IW];
    static double want[N * C * OH * OW];
    fill_uniform(x, N * C * IH * IW, 5);
    naive_bilinear(x, N * C, IH, IW, OH, OW, want);
    const int64_t sizes[4] = {N, C, OH, OW};
    kr_input ins[] = {IN("X", LD_DTYPE_FLOAT32, 4, N, C, IH, IW), NO_INPUT, NO_INPUT,
                      IN("sizes", LD_DTYPE_INT64, 1, 4)};
    ins[0].data = x;
    ins[3].data = sizes;
    kr_attr attrs[] = {{KR_STRING, "mode", .s = "linear"}, {KR_END}};
    kr_result one, two;
    kr_run(13, "Resize", attrs, ins, 4, "Y", 1, &one);
    kr_run(13, "Resize", attrs, ins, 4, "Y", 2, &two);
    kr_expect_ok(&one);
    kr_expect_ok(&two);
    expect_close(one.t[0], want, N * C * OH * OW, 1e-5, "bilinear");
    assert_memory_equal(one.t[0]->data, two.t[0]->data, one.t[0]->nbytes);
    kr_free(&one);
    kr_free(&two);
}

static void test_resize_integer_linear_rounds(void **state)
{
    (void)state;
    const int32_t x[2] = {0, 3};
    const float scales[1] = {2};
    kr_input ins[] = {IN("X", LD_DTYPE_INT32, 1, 2), NO_INPUT,
                      IN("scales", LD_DTYPE_FLOAT32, 1, 1)};
    ins[0].data = x;
    ins[2].data = scales;
    kr_attr attrs[] = {{KR_STRING, "mode", .s = "linear"}, {KR_END}};
    kr_result r;
    kr_run(13, "Resize", attrs, ins, 3, "Y", 1, &r);
    kr_expect_ok(&r);
    /* half_pixel: 0, 0.75, 2.25, 3 -> rounded to nearest */
    const double want[4] = {0, 1, 2, 3};
    expect_close(r.t[0], want, 4, 0, "int32 linear");
    kr_free(&r);
}

static void test_resize10_nearest_rule_and_empty(void **state)
{
    (void)state;
    /* Resize-10: asymmetric; downsampling rounds up (as ONNX Runtime). */
    const float x[5] = {10, 11, 12, 13, 14}, scales[1] = {0.6f};
    kr_input ins[] = {IN("X", LD_DTYPE_FLOAT32, 1, 5), IN("scales", LD_DTYPE_FLOAT32, 1, 1)};
    ins[0].data = x;
    ins[1].data = scales;
    kr_result r;
    kr_run(10, "Resize", NULL, ins, 2, "Y", 1, &r);
    kr_expect_ok(&r);
    const double want[3] = {10, 12, 14}; /* ceil(0/0.6, 1/0.6, 2/0.6) = 0, 2, 4 */
    expect_close(r.t[0], want, 3, 0, "resize-10 nearest");
    kr_free(&r);
    /* An empty axis stays empty. */
    const float sc2[2] = {2, 2};
    kr_input empty[] = {IN("X", LD_DTYPE_FLOAT32, 2, 0, 3), NO_INPUT,
                        IN("scales", LD_DTYPE_FLOAT32, 1, 2)};
    empty[0].data = x;
    empty[2].data = sc2;
    kr_attr attrs[] = {{KR_STRING, "mode", .s = "linear"}, {KR_END}};
    kr_run(13, "Resize", attrs, empty, 3, "Y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.dims[0], 0);
    assert_int_equal(r.t[0]->shape.dims[1], 6);
    kr_free(&r);
}

static void test_resize_errors(void **state)
{
    (void)state;
    const float x[4] = {1, 2, 3, 4}, scales[2] = {1, 2}, bad_scales[1] = {2};
    const int64_t sizes[2] = {2, 4}, neg_sizes[2] = {2, -1};
    kr_input both[] = {IN("X", LD_DTYPE_FLOAT32, 2, 2, 2), NO_INPUT,
                       IN("scales", LD_DTYPE_FLOAT32, 1, 2), IN("sizes", LD_DTYPE_INT64, 1, 2)};
    both[0].data = x;
    both[2].data = scales;
    both[3].data = sizes;
    kr_result r;
    kr_run(13, "Resize", NULL, both, 4, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "only one of scales and sizes");
    both[2] = (kr_input)NO_INPUT;
    both[3].data = neg_sizes;
    kr_run(13, "Resize", NULL, both, 4, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "size -1 for axis 1");
    kr_input wrong[] = {IN("X", LD_DTYPE_FLOAT32, 2, 2, 2), NO_INPUT,
                        IN("scales", LD_DTYPE_FLOAT32, 1, 1)};
    wrong[0].data = x;
    wrong[2].data = bad_scales;
    kr_run(13, "Resize", NULL, wrong, 3, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "scales has 1 values for an input of rank 2");
    kr_attr crop[] = {{KR_STRING, "coordinate_transformation_mode", .s = "tf_crop_and_resize"},
                      {KR_END}};
    both[2] = (kr_input)NO_INPUT;
    both[3].data = sizes;
    kr_run(13, "Resize", crop, both, 4, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "needs the roi input");
    kr_attr bad_mode[] = {{KR_STRING, "mode", .s = "bicubic"}, {KR_END}};
    kr_run(13, "Resize", bad_mode, both, 4, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "mode 'bicubic'");
    kr_attr bad_nearest[] = {{KR_STRING, "nearest_mode", .s = "up"}, {KR_END}};
    kr_run(13, "Resize", bad_nearest, both, 4, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "nearest_mode 'up'");
    const float down[2] = {1, 0.5f};
    kr_input up[] = {IN("X", LD_DTYPE_FLOAT32, 2, 2, 2), IN("scales", LD_DTYPE_FLOAT32, 1, 2)};
    up[0].data = x;
    up[1].data = down;
    kr_run(9, "Upsample", NULL, up, 2, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "must be >= 1");
    /* opset 18 attributes are refused, not ignored */
    kr_attr aa[] = {{KR_INT, "antialias", .i = 1}, {KR_END}};
    kr_run(18, "Resize", aa, both, 4, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_UNSUPPORTED, "antialias");
}

/* --- recurrent layers ---------------------------------------------------------------------- */

typedef struct rnn_case {
    const char *op;
    int64_t seq, batch, input, hidden, dirs;
    bool reverse, lbr, input_forget, peepholes, layout1;
    double clip; /* 0: none */
    int32_t lens[4];
} rnn_case;

static double sigm(double v) { return 1 / (1 + exp(-v)); }

/* Naive double reference, time-major, default activations. Y [seq, dirs,
 * batch, H], Yh / Yc [dirs, batch, H]; Y is zero past each length. */
static void naive_rnn(const rnn_case *c, const float *X, const float *W, const float *R,
                      const float *B, const float *h0, const float *c0, const float *P,
                      double *Y, double *Yh, double *Yc)
{
    int64_t H = c->hidden, G = strcmp(c->op, "LSTM") == 0 ? 4 : (strcmp(c->op, "GRU") == 0 ? 3 : 1);
    memset(Y, 0, (size_t)(c->seq * c->dirs * c->batch * H) * sizeof *Y);
    double g[64], h[16], cs[16], hn[16], v[16];
    for (int64_t d = 0; d < c->dirs; d++)
        for (int64_t b = 0; b < c->batch; b++) {
            for (int64_t j = 0; j < H; j++) {
                h[j] = h0[(d * c->batch + b) * H + j];
                cs[j] = c0 ? c0[(d * c->batch + b) * H + j] : 0;
            }
            for (int64_t s = 0; s < c->lens[b]; s++) {
                int64_t t = (c->reverse || d == 1) ? c->lens[b] - 1 - s : s;
                const float *x = X + (t * c->batch + b) * c->input;
                for (int64_t r = 0; r < G * H; r++) {
                    double acc = B[d * 2 * G * H + r];
                    for (int64_t k = 0; k < c->input; k++)
                        acc += W[(d * G * H + r) * c->input + k] * x[k];
                    bool h_gate_gru = G == 3 && r >= 2 * H;
                    double rec = (c->lbr || !h_gate_gru) ? B[d * 2 * G * H + G * H + r] : 0;
                    for (int64_t k = 0; k < H && !h_gate_gru; k++)
                        rec += R[(d * G * H + r) * H + k] * h[k];
                    g[r] = acc + (h_gate_gru ? 0 : rec);
                }
#define CLIP(e) (c->clip > 0 ? fmin(c->clip, fmax(-c->clip, (e))) : (e))
                for (int64_t j = 0; j < H; j++) {
                    if (G == 1) {
                        hn[j] = tanh(CLIP(g[j]));
                    } else if (G == 3) {
                        double z = sigm(CLIP(g[j])), rr = sigm(CLIP(g[H + j])), rec = 0;
                        for (int64_t k = 0; k < H; k++)
                            rec += R[(d * G * H + 2 * H + j) * H + k] *
                                   (c->lbr ? h[k] : sigm(CLIP(g[H + k])) * h[k]);
                        double rbh = B[d * 2 * G * H + G * H + 2 * H + j];
                        double hh = tanh(CLIP(c->lbr ? g[2 * H + j] + rr * (rec + rbh)
                                                     : g[2 * H + j] + rec + rbh));
                        hn[j] = (1 - z) * hh + z * h[j];
                    } else {
                        const float *p = P ? P + d * 3 * H : NULL;
                        double i = sigm(CLIP(g[j] + (p ? p[j] * cs[j] : 0)));
                        double pf = p ? p[2 * H + j] * cs[j] : 0;
                        double f = c->input_forget ? 1 - i : sigm(CLIP(g[2 * H + j] + pf));
                        double cn = f * cs[j] + i * tanh(CLIP(g[3 * H + j]));
                        double o = sigm(CLIP(g[H + j] + (p ? p[H + j] * cn : 0)));
                        v[j] = cn;
                        hn[j] = o * tanh(cn);
                    }
                }
#undef CLIP
                for (int64_t j = 0; j < H; j++) {
                    h[j] = hn[j];
                    if (G == 4)
                        cs[j] = v[j];
                    Y[((t * c->dirs + d) * c->batch + b) * H + j] = h[j];
                }
            }
            for (int64_t j = 0; j < H; j++) {
                Yh[(d * c->batch + b) * H + j] = h[j];
                Yc[(d * c->batch + b) * H + j] = cs[j];
            }
        }
}

/* Batch-major copy of a [a, b, rest] tensor as [b, a, rest]. */
static void swap01(const void *src, void *dst, int64_t a, int64_t b, int64_t rest, size_t e)
{
    for (int64_t i = 0; i < a; i++)
        for (int64_t j = 0; j < b; j++)
            memcpy((char *)dst + (size_t)((j * a + i) * rest) * e,
                   (const char *)src + (size_t)((i * b + j) * rest) * e, (size_t)rest * e);
}

static void run_rnn_case(const rnn_case *c)
{
    int64_t G = strcmp(c->op, "LSTM") == 0 ? 4 : (strcmp(c->op, "GRU") == 0 ? 3 : 1);
    int64_t S = c->seq, N = c->batch, I = c->input, H = c->hidden, D = c->dirs;
    static float X[256], W[1024], R[1024], B[512], h0[64], c0[64], P[64], Xb[256], h0b[64], c0b[64];
    static double Y[512], Yh[64], Yc[64], Yt[512];
    fill_uniform(X, S * N * I, 1);
    fill_uniform(W, D * G * H * I, 0.6);
    fill_uniform(R, D * G * H * H, 0.6);
    fill_uniform(B, D * 2 * G * H, 0.5);
    fill_uniform(h0, D * N * H, 1);
    fill_uniform(c0, D * N * H, 1);
    fill_uniform(P, D * 3 * H, 0.5);
    bool lstm = G == 4;
    naive_rnn(c, X, W, R, B, h0, lstm ? c0 : NULL, c->peepholes ? P : NULL, Y, Yh, Yc);
    if (c->layout1) {
        swap01(X, Xb, S, N, I, sizeof(float));
        swap01(h0, h0b, D, N, H, sizeof(float));
        swap01(c0, c0b, D, N, H, sizeof(float));
    }
    kr_input ins[8] = {
        IN("X", LD_DTYPE_FLOAT32, 3, c->layout1 ? N : S, c->layout1 ? S : N, I),
        IN("W", LD_DTYPE_FLOAT32, 3, D, G * H, I), IN("R", LD_DTYPE_FLOAT32, 3, D, G * H, H),
        IN("B", LD_DTYPE_FLOAT32, 2, D, 2 * G * H), IN("sequence_lens", LD_DTYPE_INT32, 1, N),
        IN("initial_h", LD_DTYPE_FLOAT32, 3, c->layout1 ? N : D, c->layout1 ? D : N, H),
        IN("initial_c", LD_DTYPE_FLOAT32, 3, c->layout1 ? N : D, c->layout1 ? D : N, H),
        IN("P", LD_DTYPE_FLOAT32, 2, D, 3 * H),
    };
    const void *data[8] = {c->layout1 ? Xb : X, W, R, B, c->lens, c->layout1 ? h0b : h0,
                           c->layout1 ? c0b : c0, P};
    for (int i = 0; i < 8; i++)
        ins[i].data = data[i];
    if (!c->peepholes)
        ins[7] = (kr_input)NO_INPUT;
    kr_attr attrs[8] = {{KR_INT, "hidden_size", .i = H},
                        {KR_STRING, "direction", .s = D == 2 ? "bidirectional"
                                                     : c->reverse ? "reverse" : "forward"},
                        {KR_INT, "layout", .i = c->layout1}};
    int na = 3;
    if (c->clip > 0)
        attrs[na++] = (kr_attr){KR_FLOAT, "clip", .f = (float)c->clip};
    if (c->lbr)
        attrs[na++] = (kr_attr){KR_INT, "linear_before_reset", .i = 1};
    if (c->input_forget)
        attrs[na++] = (kr_attr){KR_INT, "input_forget", .i = 1};
    attrs[na] = (kr_attr){KR_END};
    kr_result r;
    kr_run(14, c->op, attrs, ins, lstm ? 8 : 6, lstm ? "Y,Y_h,Y_c" : "Y,Y_h", 1, &r);
    kr_expect_ok(&r);
    if (c->layout1) { /* expected Y as [batch, seq, dirs, H], states as [batch, dirs, H] */
        swap01(Y, Yt, S * D, N, H, sizeof(double));
        memcpy(Y, Yt, (size_t)(S * D * N * H) * sizeof(double));
        swap01(Yh, Yt, D, N, H, sizeof(double));
        memcpy(Yh, Yt, (size_t)(D * N * H) * sizeof(double));
        swap01(Yc, Yt, D, N, H, sizeof(double));
        memcpy(Yc, Yt, (size_t)(D * N * H) * sizeof(double));
    }
    expect_close(r.t[0], Y, S * D * N * H, 1e-5, "Y");
    expect_close(r.t[1], Yh, D * N * H, 1e-5, "Y_h");
    if (lstm)
        expect_close(r.t[2], Yc, D * N * H, 1e-5, "Y_c");
    kr_free(&r);
}

static void test_recurrent_against_naive(void **state)
{
    (void)state;
    const rnn_case cases[] = {
        {"RNN", 4, 3, 3, 4, 2, .lens = {4, 2, 0}},
        {"RNN", 4, 3, 3, 4, 1, .reverse = true, .layout1 = true, .clip = 0.8, .lens = {3, 4, 1}},
        {"GRU", 5, 3, 2, 4, 2, .lens = {5, 1, 3}},
        {"GRU", 5, 2, 3, 3, 2, .lbr = true, .layout1 = true, .lens = {2, 5}},
        {"GRU", 3, 2, 3, 3, 1, .reverse = true, .lbr = true, .clip = 0.5, .lens = {3, 2}},
        {"LSTM", 4, 3, 3, 4, 2, .peepholes = true, .lens = {4, 0, 2}},
        {"LSTM", 4, 2, 2, 3, 2, .input_forget = true, .peepholes = true, .layout1 = true,
         .clip = 0.6, .lens = {1, 4}},
        {"LSTM", 3, 2, 3, 5, 1, .reverse = true, .lens = {3, 2}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_rnn_case(&cases[i]);
}

static void test_recurrent_errors(void **state)
{
    (void)state;
    static float X[12], W[24], R[16];
    const int32_t lens[2] = {3, 7};
    kr_input ins[] = {IN("X", LD_DTYPE_FLOAT32, 3, 3, 2, 2), IN("W", LD_DTYPE_FLOAT32, 3, 1, 4, 3),
                      IN("R", LD_DTYPE_FLOAT32, 3, 1, 4, 4), NO_INPUT,
                      IN("sequence_lens", LD_DTYPE_INT32, 1, 2)};
    ins[0].data = X, ins[1].data = W, ins[2].data = R, ins[4].data = lens;
    kr_attr attrs[] = {{KR_INT, "hidden_size", .i = 4}, {KR_END}};
    kr_result r;
    kr_run(14, "RNN", attrs, ins, 5, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "input W is float32 1x4x3; expected float32 1x4x2");
    ins[1].dims[2] = 2;
    kr_run(14, "RNN", attrs, ins, 5, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "sequence_lens[1] = 7 is outside [0, 3]");
    kr_attr bad_dir[] = {{KR_STRING, "direction", .s = "sideways"}, {KR_END}};
    kr_run(14, "RNN", bad_dir, ins, 3, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "direction 'sideways'");
    kr_attr bad_act[] = {{KR_STRING, "activations", .s = "Tanh"}, {KR_END}};
    kr_run(14, "RNN", bad_act, ins, 3, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "must be strings");
}

/* --- quantization ------------------------------------------------------------------------ */

static void test_quantize_rounding_and_saturation(void **state)
{
    (void)state;
    const float x[8] = {2.5f, 3.5f, -2.5f, 1000, -1000, 0.49f, NAN, -0.5f};
    const float scale = 1.0f;
    const int8_t zp = 1;
    kr_input ins[] = {IN("x", LD_DTYPE_FLOAT32, 1, 8), IN("s", LD_DTYPE_FLOAT32, 0),
                      IN("z", LD_DTYPE_INT8, 0)};
    ins[0].data = x, ins[1].data = &scale, ins[2].data = &zp;
    kr_result r;
    kr_run(13, "QuantizeLinear", NULL, ins, 3, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_INT8);
    const double want[8] = {3, 5, -1, 127, -128, 1, -128, 1}; /* ties to even, then + 1 */
    expect_close(r.t[0], want, 8, 0, "int8");
    kr_free(&r);
    /* No zero point: uint8, saturating at 0. */
    kr_run(10, "QuantizeLinear", NULL, ins, 2, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_UINT8);
    const double want_u[8] = {2, 4, 0, 255, 0, 0, 0, 0};
    expect_close(r.t[0], want_u, 8, 0, "uint8");
    kr_free(&r);
}

static void test_quantize_errors_and_dynamic(void **state)
{
    (void)state;
    const float x[6] = {1, 2, 3, 4, 5, 6}, scales[3] = {1, 2, 4};
    const uint8_t zps[2] = {0, 0};
    kr_input ins[] = {IN("x", LD_DTYPE_FLOAT32, 2, 2, 3), IN("s", LD_DTYPE_FLOAT32, 1, 3),
                      IN("z", LD_DTYPE_UINT8, 1, 2)};
    ins[0].data = x, ins[1].data = scales, ins[2].data = zps;
    kr_result r;
    kr_run(13, "QuantizeLinear", NULL, ins, 3, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "zero point has 2 values but scale has 3");
    kr_attr axis0[] = {{KR_INT, "axis", .i = 0}, {KR_END}};
    kr_run(13, "DequantizeLinear", axis0, ins, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_UNSUPPORTED, "dtype float32 is not supported");
    kr_run(13, "QuantizeLinear", axis0, ins, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "scale has 3 values but axis 0 of the input has 2");
    kr_run(10, "QuantizeLinear", NULL, ins, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "scale must be a scalar before opset 13");
    /* Per-axis along axis 1 (default). */
    kr_run(13, "QuantizeLinear", NULL, ins, 2, "y", 1, &r);
    kr_expect_ok(&r);
    const double want[6] = {1, 1, 1, 4, 2, 2}; /* 2/2 = 1, 3/4 -> 1, 5/2 = 2.5 -> 2, 6/4 -> 2 */
    expect_close(r.t[0], want, 6, 0, "per-axis");
    kr_free(&r);
    /* DynamicQuantizeLinear of all zeros: scale 1, zero point 0 (no 0/0). */
    const float zeros[3] = {0, 0, 0};
    kr_input dz[] = {IN("x", LD_DTYPE_FLOAT32, 1, 3)};
    dz[0].data = zeros;
    kr_run(11, "DynamicQuantizeLinear", NULL, dz, 1, "y,s,z", 1, &r);
    kr_expect_ok(&r);
    assert_true(ld_tensor_get_double(r.t[1], 0) == 1.0);
    assert_true(ld_tensor_get_double(r.t[2], 0) == 0.0);
    kr_free(&r);
}

/* --- signal ------------------------------------------------------------------------------- */

static void check_dft(int64_t n, int64_t dft_length, bool onesided)
{
    static float x[2 * 64];
    fill_uniform(x, 2 * n, 1);
    int64_t bins = onesided ? dft_length / 2 + 1 : dft_length;
    static double want[2 * 64 * 2];
    for (int64_t b = 0; b < 2; b++)
        for (int64_t k = 0; k < bins; k++) {
            double re = 0, im = 0;
            for (int64_t j = 0; j < n && j < dft_length; j++) {
                double a = -2 * M_PI * (double)(j * k) / (double)dft_length;
                re += x[b * n + j] * cos(a);
                im += x[b * n + j] * sin(a);
            }
            want[(b * bins + k) * 2] = re;
            want[(b * bins + k) * 2 + 1] = im;
        }
    kr_input ins[] = {IN("x", LD_DTYPE_FLOAT32, 3, 2, n, 1), IN("len", LD_DTYPE_INT64, 0)};
    ins[0].data = x;
    ins[1].data = &dft_length;
    kr_attr attrs[] = {{KR_INT, "onesided", .i = onesided}, {KR_END}};
    kr_result r;
    kr_run(17, "DFT", attrs, ins, 2, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.dims[1], bins);
    expect_close(r.t[0], want, 2 * bins * 2, 1e-5, "dft");
    kr_free(&r);
}

static void test_dft_lengths_and_errors(void **state)
{
    (void)state;
    check_dft(16, 16, false); /* radix 2 */
    check_dft(64, 64, true);
    check_dft(12, 12, false); /* direct */
    check_dft(7, 10, true);   /* zero padded */
    check_dft(20, 16, false); /* truncated */
    static float x[12];
    kr_input ins[] = {IN("x", LD_DTYPE_FLOAT32, 3, 2, 2, 3)};
    ins[0].data = x;
    kr_result r;
    kr_run(17, "DFT", NULL, ins, 1, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "1 or 2");
    ins[0].dims[2] = 2;
    kr_attr both[] = {{KR_INT, "onesided", .i = 1}, {KR_INT, "inverse", .i = 1}, {KR_END}};
    kr_run(17, "DFT", both, ins, 1, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_UNSUPPORTED, "onesided inverse");
    const int64_t step = 2, frame = 9;
    kr_input st[] = {IN("signal", LD_DTYPE_FLOAT32, 3, 1, 6, 1), IN("step", LD_DTYPE_INT64, 0),
                     NO_INPUT, IN("frame", LD_DTYPE_INT64, 0)};
    st[0].data = x, st[1].data = &step, st[3].data = &frame;
    kr_run(17, "STFT", NULL, st, 4, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "do not fit a signal of length 6");
}

static void test_windows_and_mel(void **state)
{
    (void)state;
    kr_result r;
    for (int64_t size = 0; size <= 1; size++) { /* empty and one-point windows */
        kr_input ins[] = {IN("n", LD_DTYPE_INT64, 0)};
        ins[0].data = &size;
        kr_attr sym[] = {{KR_INT, "periodic", .i = 0}, {KR_END}};
        kr_run(17, "HannWindow", sym, ins, 1, "w", 1, &r);
        kr_expect_ok(&r);
        assert_int_equal(r.t[0]->count, size);
        if (size == 1)
            assert_true(ld_tensor_get_double(r.t[0], 0) == 1.0);
        kr_free(&r);
    }
    const int32_t size = 4;
    kr_input ins[] = {IN("n", LD_DTYPE_INT32, 0)};
    ins[0].data = &size;
    kr_attr f64[] = {{KR_INT, "output_datatype", .i = LD_DTYPE_FLOAT64}, {KR_END}};
    kr_run(17, "BlackmanWindow", f64, ins, 1, "w", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_FLOAT64);
    const double want[4] = {0, 0.34, 1, 0.34}; /* 0.42 - 0.5 cos + 0.08 cos 2x at 0, pi/2, pi */
    expect_close(r.t[0], want, 4, 1e-12, "blackman");
    kr_free(&r);
    kr_attr bad[] = {{KR_INT, "output_datatype", .i = 8}, {KR_END}};
    kr_run(17, "HammingWindow", bad, ins, 1, "w", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "output_datatype 8");
    const int64_t bins = 4, dft = 8, rate = 8000;
    const float lo = 0, hi = 4000;
    kr_input mel[] = {IN("b", LD_DTYPE_INT64, 0), IN("d", LD_DTYPE_INT64, 0),
                      IN("r", LD_DTYPE_INT64, 0), IN("l", LD_DTYPE_FLOAT32, 0),
                      IN("h", LD_DTYPE_FLOAT32, 0)};
    mel[0].data = &bins, mel[1].data = &dft, mel[2].data = &rate;
    mel[3].data = &lo, mel[4].data = &hi;
    kr_run(17, "MelWeightMatrix", NULL, mel, 5, "m", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.dims[0], 5);
    assert_int_equal(r.t[0]->shape.dims[1], 4);
    for (int64_t i = 0; i < r.t[0]->count; i++) { /* triangles peak at 1 */
        double v = ld_tensor_get_double(r.t[0], i);
        assert_true(v >= 0 && v <= 1);
    }
    kr_free(&r);
}

/* --- detection ------------------------------------------------------------------------------ */

static void test_nms_edges(void **state)
{
    (void)state;
    static const float boxes[8] = {0, 0, 1, 1, 0, 0, 1, 1};
    static const float scores[2] = {0.5f, 0.4f};
    const int64_t max_out = 5;
    const float iou = 0.5f, thresh = 0.5f, bad_iou = 1.5f;
    kr_input ins[] = {IN("boxes", LD_DTYPE_FLOAT32, 3, 1, 2, 4),
                      IN("scores", LD_DTYPE_FLOAT32, 3, 1, 1, 2),
                      IN("max", LD_DTYPE_INT64, 1, 1), IN("iou", LD_DTYPE_FLOAT32, 1, 1),
                      IN("score", LD_DTYPE_FLOAT32, 1, 1)};
    ins[0].data = boxes, ins[1].data = scores, ins[2].data = &max_out, ins[3].data = &iou;
    ins[4].data = &thresh;
    kr_result r;
    /* score_threshold is exclusive: 0.5 is not > 0.5, nothing is selected */
    kr_run(11, "NonMaxSuppression", NULL, ins, 5, "sel", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.rank, 2);
    assert_int_equal(r.t[0]->shape.dims[0], 0);
    assert_int_equal(r.t[0]->shape.dims[1], 3);
    kr_free(&r);
    /* without the threshold the identical second box is suppressed */
    kr_run(11, "NonMaxSuppression", NULL, ins, 4, "sel", 1, &r);
    kr_expect_ok(&r);
    const double want[3] = {0, 0, 0};
    expect_close(r.t[0], want, 3, 0, "nms");
    kr_free(&r);
    ins[3].data = &bad_iou;
    kr_run(11, "NonMaxSuppression", NULL, ins, 4, "sel", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "iou_threshold 1.5 is not in [0, 1]");
    /* no boxes at all */
    kr_input none[] = {IN("boxes", LD_DTYPE_FLOAT32, 3, 1, 0, 4),
                       IN("scores", LD_DTYPE_FLOAT32, 3, 1, 1, 0),
                       IN("max", LD_DTYPE_INT64, 1, 1)};
    none[0].data = boxes, none[1].data = scores, none[2].data = &max_out;
    kr_run(11, "NonMaxSuppression", NULL, none, 3, "sel", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.dims[0], 0);
    kr_free(&r);
}

static void test_roialign_and_gridsample_edges(void **state)
{
    (void)state;
    static float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    const float rois[4] = {0, 0, 3, 3};
    const int64_t bad_batch = 1, batch = 0;
    kr_input ins[] = {IN("X", LD_DTYPE_FLOAT32, 4, 1, 1, 4, 4),
                      IN("rois", LD_DTYPE_FLOAT32, 2, 1, 4),
                      IN("idx", LD_DTYPE_INT64, 1, 1)};
    ins[0].data = x, ins[1].data = rois, ins[2].data = &bad_batch;
    kr_result r;
    kr_run(16, "RoiAlign", NULL, ins, 3, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "batch index 1 of roi 0 is out of range");
    /* one bin over the whole roi: opset 10 (no pixel shift) averages the 3x3
     * sample grid at 0.5, 1.5, 2.5 -> the mean of the bilinear values */
    ins[2].data = &batch;
    kr_run(10, "RoiAlign", NULL, ins, 3, "Y", 1, &r);
    kr_expect_ok(&r);
    const double mean = (1.5 * 4 + 1.5); /* value at (y, x) is 4y + x: mean y = mean x = 1.5 */
    expect_close(r.t[0], &mean, 1, 1e-6, "roialign opset 10");
    kr_free(&r);
    ins[1].dims[0] = 0, ins[2].dims[0] = 0;
    kr_run(16, "RoiAlign", NULL, ins, 3, "Y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.dims[0], 0);
    kr_free(&r);
    /* GridSample: the centre of the image with align_corners is pixel (1.5, 1.5) */
    const double grid[2] = {0, 0};
    kr_input gs[] = {IN("X", LD_DTYPE_FLOAT64, 4, 1, 1, 4, 4),
                     IN("grid", LD_DTYPE_FLOAT64, 4, 1, 1, 1, 2)};
    static double xd[16];
    for (int i = 0; i < 16; i++)
        xd[i] = i;
    gs[0].data = xd, gs[1].data = grid;
    kr_attr ac[] = {{KR_INT, "align_corners", .i = 1}, {KR_END}};
    kr_run(16, "GridSample", ac, gs, 2, "Y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_FLOAT64);
    const double centre = 7.5;
    expect_close(r.t[0], &centre, 1, 1e-12, "gridsample");
    kr_free(&r);
    /* opset 20 names bicubic "cubic"; symmetric taps reproduce the linear ramp */
    kr_attr cubic[] = {{KR_INT, "align_corners", .i = 1}, {KR_STRING, "mode", .s = "cubic"},
                       {KR_END}};
    kr_run(20, "GridSample", cubic, gs, 2, "Y", 1, &r);
    kr_expect_ok(&r);
    expect_close(r.t[0], &centre, 1, 1e-12, "gridsample cubic");
    kr_free(&r);
    gs[1].dims[0] = 2;
    kr_run(16, "GridSample", NULL, gs, 2, "Y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "grid (N, H_out, W_out, 2)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_resize_nearest_every_dtype, ob_teardown),
        cmocka_unit_test_teardown(test_resize_linear_matches_naive_and_threads, ob_teardown),
        cmocka_unit_test_teardown(test_resize_integer_linear_rounds, ob_teardown),
        cmocka_unit_test_teardown(test_resize10_nearest_rule_and_empty, ob_teardown),
        cmocka_unit_test_teardown(test_resize_errors, ob_teardown),
        cmocka_unit_test_teardown(test_recurrent_against_naive, ob_teardown),
        cmocka_unit_test_teardown(test_recurrent_errors, ob_teardown),
        cmocka_unit_test_teardown(test_quantize_rounding_and_saturation, ob_teardown),
        cmocka_unit_test_teardown(test_quantize_errors_and_dynamic, ob_teardown),
        cmocka_unit_test_teardown(test_dft_lengths_and_errors, ob_teardown),
        cmocka_unit_test_teardown(test_windows_and_mel, ob_teardown),
        cmocka_unit_test_teardown(test_nms_edges, ob_teardown),
        cmocka_unit_test_teardown(test_roialign_and_gridsample_edges, ob_teardown),
    };
    return cmocka_run_group_tests_name("kernels_misc", tests, NULL, NULL);
}
