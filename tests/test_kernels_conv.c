/* Unit tests for the convolution kernels (backends/kernels/conv.c,
 * conv_transpose.c): every path — im2col + GEMM (also in several tiles),
 * 1x1 without im2col, the direct depthwise loop, groups, dilations, strides,
 * asymmetric pads, auto_pad, 1-D/2-D/3-D, float32/float64/float16 — against
 * a naive direct convolution in double on random data, within the
 * worst-case bound (K + 2) u (sum |w x| + |bias|); ConvInteger and
 * QLinearConv with per-channel zero points and scales; and the error paths
 * (each message names the node). Runs on one and two threads, and float32
 * Conv/ConvTranspose at every direct-convolution level the CPU runs
 * (conv_direct_internal.h: none = im2col + BLAS, AVX2, AVX-512). */
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

#include "backends/kernels/conv_direct_internal.h"
#include "layerdiff/round.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

typedef struct conv_case {
    int nd;
    int64_t N, C, M, group;
    int64_t in[3], k[3], s[3], d[3], pads[6]; /* pads: begin..., end... */
    const char *auto_pad;                     /* NULL: explicit pads */
    bool bias;
    bool transpose;                           /* ConvTranspose */
    int64_t out_pad[3];                       /* ConvTranspose output_padding */
    int64_t out_shape[3];                     /* ConvTranspose output_shape (0: none) */
} conv_case;

/* 3-D view of a case: leading dims of size 1. */
typedef struct geom3 {
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
    int64_t in_size, out_size, k_size;
} geom3;

static int64_t full_transpose(const conv_case *c, int i)
{
    return c->s[i] * (c->in[i] - 1) + c->out_pad[i] + (c->k[i] - 1) * c->d[i] + 1;
}

/* Output sizes and begin pads straight from the ONNX spec formulas. */
static geom3 case_geometry(const conv_case *c)
{
    geom3 g;
    int shift = 3 - c->nd;
    for (int i = 0; i < 3; i++) {
        g.in[i] = g.out[i] = g.k[i] = g.s[i] = g.d[i] = 1;
        g.pb[i] = 0;
    }
    for (int i = 0; i < c->nd; i++) {
        int j = i + shift;
        int64_t ek = (c->k[i] - 1) * c->d[i] + 1, out, pb;
        bool same = c->auto_pad && strncmp(c->auto_pad, "SAME", 4) == 0;
        bool upper = c->auto_pad && strcmp(c->auto_pad, "SAME_UPPER") == 0;
        bool valid = c->auto_pad && strcmp(c->auto_pad, "VALID") == 0;
        if (c->transpose) {
            int64_t full = full_transpose(c, i);
            if (c->out_shape[i] || same) {
                out = c->out_shape[i] ? c->out_shape[i] : c->in[i] * c->s[i];
                int64_t total = full - out > 0 ? full - out : 0;
                pb = upper ? total / 2 : total - total / 2;
            } else {
                pb = valid ? 0 : c->pads[i];
                out = full - pb - (valid ? 0 : c->pads[i + c->nd]);
            }
        } else if (same) {
            out = (c->in[i] + c->s[i] - 1) / c->s[i];
            int64_t total = (out - 1) * c->s[i] + ek - c->in[i];
            total = total > 0 ? total : 0;
            pb = upper ? total / 2 : total - total / 2;
        } else {
            pb = valid ? 0 : c->pads[i];
            int64_t pe = valid ? 0 : c->pads[i + c->nd];
            out = (c->in[i] + pb + pe - ek) / c->s[i] + 1;
        }
        g.in[j] = c->in[i];
        g.out[j] = out;
        g.k[j] = c->k[i];
        g.s[j] = c->s[i];
        g.d[j] = c->d[i];
        g.pb[j] = pb;
    }
    g.in_size = g.in[0] * g.in[1] * g.in[2];
    g.out_size = g.out[0] * g.out[1] * g.out[2];
    g.k_size = g.k[0] * g.k[1] * g.k[2];
    return g;
}

/* Naive direct (transposed) convolution in double; mag gets sum |w x| + |b|. */
static void naive_conv(const conv_case *c, const geom3 *g, const double *x, const double *w,
                       const double *b, double *y, double *mag)
{
    int64_t Cg = c->C / c->group, Mg = c->M / c->group, N = c->N;
    int64_t planes_out = N * c->M * g->out_size;
    for (int64_t i = 0; i < planes_out; i++) {
        int64_t m = (i / g->out_size) % c->M;
        y[i] = b ? b[m] : 0;
        mag[i] = b ? fabs(b[m]) : 0;
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < c->M; m++)
            for (int64_t cc = 0; cc < Cg; cc++)
                for (int64_t kk = 0; kk < g->k_size; kk++) {
                    int64_t gr = m / Mg, ch = gr * Cg + cc;
                    int64_t kw = kk % g->k[2], kh = (kk / g->k[2]) % g->k[1];
                    int64_t kd = kk / (g->k[2] * g->k[1]);
                    /* conv: weight W[m, cc, k]; transpose: W[ch, m % Mg, k] */
                    double wv = c->transpose ? w[(ch * Mg + m % Mg) * g->k_size + kk]
                                             : w[(m * Cg + cc) * g->k_size + kk];
                    int64_t pos_range = c->transpose ? g->in_size : g->out_size;
                    for (int64_t p = 0; p < pos_range; p++) {
                        int64_t p2 = p % (c->transpose ? g->in[2] : g->out[2]);
                        int64_t p1 = (p / (c->transpose ? g->in[2] : g->out[2])) %
                                     (c->transpose ? g->in[1] : g->out[1]);
                        int64_t p0 = p / ((c->transpose ? g->in[2] : g->out[2]) *
                                          (c->transpose ? g->in[1] : g->out[1]));
                        int64_t q0 = p0 * g->s[0] - g->pb[0] + kd * g->d[0];
                        int64_t q1 = p1 * g->s[1] - g->pb[1] + kh * g->d[1];
                        int64_t q2 = p2 * g->s[2] - g->pb[2] + kw * g->d[2];
                        const int64_t *lim = c->transpose ? g->out : g->in;
                        if (q0 < 0 || q0 >= lim[0] || q1 < 0 || q1 >= lim[1] || q2 < 0 ||
                            q2 >= lim[2])
                            continue;
                        int64_t q = (q0 * lim[1] + q1) * lim[2] + q2;
                        int64_t xi = c->transpose ? (n * c->C + ch) * g->in_size + p
                                                  : (n * c->C + ch) * g->in_size + q;
                        int64_t yi = (n * c->M + m) * g->out_size + (c->transpose ? q : p);
                        y[yi] += wv * x[xi];
                        mag[yi] += fabs(wv * x[xi]);
                    }
                }
}

static void add_ints(kr_attr *a, int *n, const char *name, const int64_t *v, int count)
{
    a[*n] = (kr_attr){.kind = KR_INTS, .name = name, .n = count};
    memcpy(a[*n].ints, v, (size_t)count * sizeof *v);
    (*n)++;
}

/* Runs the case in dtype on `threads` threads and checks against naive_conv. */
static void run_conv_case(const conv_case *c, ld_dtype dtype, int threads)
{
    geom3 g = case_geometry(c);
    int64_t w_dims[5], x_dims[5], y_dims[5];
    int64_t Cg = c->C / c->group, Mg = c->M / c->group;
    x_dims[0] = c->N, x_dims[1] = c->C;
    w_dims[0] = c->transpose ? c->C : c->M, w_dims[1] = c->transpose ? Mg : Cg;
    y_dims[0] = c->N, y_dims[1] = c->M;
    for (int i = 0; i < c->nd; i++) {
        x_dims[2 + i] = c->in[i];
        w_dims[2 + i] = c->k[i];
        y_dims[2 + i] = g.out[3 - c->nd + i];
    }
    int64_t nx = c->N * c->C * g.in_size, nw = w_dims[0] * w_dims[1] * g.k_size;
    int64_t ny = c->N * c->M * g.out_size;
    double *x = malloc((size_t)nx * 8), *w = malloc((size_t)nw * 8), *b = malloc((size_t)c->M * 8);
    double *y = malloc((size_t)ny * 8), *mag = malloc((size_t)ny * 8);
    size_t es = ld_dtype_size(dtype);
    void *xs = malloc((size_t)nx * es), *ws = malloc((size_t)nw * es);
    void *bs = malloc((size_t)c->M * es);
    assert_true(x && w && b && y && mag && xs && ws && bs);
    /* Random values, then exactly what the kernel sees (rounded to dtype). */
    double *all[3] = {x, w, b};
    void *stored[3] = {xs, ws, bs};
    int64_t counts[3] = {nx, nw, c->M};
    for (int t = 0; t < 3; t++)
        for (int64_t i = 0; i < counts[t]; i++) {
            double v = kr_uniform();
            if (dtype == LD_DTYPE_FLOAT64) {
                ((double *)stored[t])[i] = v;
            } else if (dtype == LD_DTYPE_FLOAT32) {
                ((float *)stored[t])[i] = (float)v;
                v = (float)v;
            } else {
                float f = (float)v;
                ld_convert_fp32_to_fp16(&f, (ld_fp16 *)stored[t] + i, 1);
                ld_convert_fp16_to_fp32((ld_fp16 *)stored[t] + i, &f, 1);
                v = f;
            }
            all[t][i] = v;
        }
    naive_conv(c, &g, x, w, c->bias ? b : NULL, y, mag);

    kr_attr attrs[12];
    int na = 0;
    int64_t ks[3], ss[3], ds[3];
    for (int i = 0; i < c->nd; i++)
        ks[i] = c->k[i], ss[i] = c->s[i], ds[i] = c->d[i];
    add_ints(attrs, &na, "kernel_shape", ks, c->nd);
    add_ints(attrs, &na, "strides", ss, c->nd);
    add_ints(attrs, &na, "dilations", ds, c->nd);
    if (c->auto_pad)
        attrs[na++] = (kr_attr){.kind = KR_STRING, .name = "auto_pad", .s = c->auto_pad};
    else if (!c->out_shape[0])
        add_ints(attrs, &na, "pads", c->pads, 2 * c->nd);
    if (c->transpose && c->out_shape[0])
        add_ints(attrs, &na, "output_shape", c->out_shape, c->nd);
    if (c->transpose)
        add_ints(attrs, &na, "output_padding", c->out_pad, c->nd);
    attrs[na++] = (kr_attr){.kind = KR_INT, .name = "group", .i = c->group};
    attrs[na] = (kr_attr){.kind = KR_END};
    kr_input ins[3] = {
        {.name = "x", .dtype = dtype, .rank = c->nd + 2, .data = xs},
        {.name = "w", .dtype = dtype, .rank = c->nd + 2, .data = ws, .initializer = true},
        {.name = "b", .dtype = dtype, .rank = 1, .dims = {c->M}, .data = bs, .initializer = true},
    };
    memcpy(ins[0].dims, x_dims, sizeof x_dims);
    memcpy(ins[1].dims, w_dims, sizeof w_dims);
    kr_result r;
    kr_run(11, c->transpose ? "ConvTranspose" : "Conv", attrs, ins, c->bias ? 3 : 2, "y", threads,
           &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, dtype);
    assert_int_equal(r.t[0]->shape.rank, c->nd + 2);
    for (int i = 0; i < c->nd + 2; i++)
        assert_int_equal(r.t[0]->shape.dims[i], y_dims[i]);
    double u = dtype == LD_DTYPE_FLOAT64 ? 0x1p-53 : 0x1p-24;
    int64_t K = Cg * g.k_size + 2;
    for (int64_t i = 0; i < ny; i++) {
        double got = ld_tensor_get_double(r.t[0], i);
        double bound = (double)K * u * mag[i];
        if (dtype == LD_DTYPE_FLOAT16) /* plus the final rounding to fp16 */
            bound += 0x1p-11 * fabs(y[i]) + 0x1p-24;
        if (!(fabs(got - y[i]) <= bound))
            fail_msg("%s nd=%d group=%lld %s threads=%d: y[%lld] = %.9g, reference %.9g, bound "
                     "%.3g", c->transpose ? "ConvTranspose" : "Conv", c->nd, (long long)c->group,
                     ld_dtype_name(dtype), threads, (long long)i, got, y[i], bound);
    }
    kr_free(&r);
    free(x), free(w), free(b), free(y), free(mag), free(xs), free(ws), free(bs);
}

/* The direct-convolution levels float32 cases run at (those the CPU lacks
 * are skipped): NONE takes im2col + BLAS for Conv and the BLAS product for
 * ConvTranspose. */
static const ld_conv_direct_level levels[] = {LD_CONV_DIRECT_NONE, LD_CONV_DIRECT_AVX2,
                                              LD_CONV_DIRECT_AVX512};
#define N_LEVELS 3

static void run_everywhere(const conv_case *c)
{
    for (int i = 0; i < N_LEVELS; i++) {
        if (!ld_conv_direct_force_level(levels[i]))
            continue;
        run_conv_case(c, LD_DTYPE_FLOAT32, 1);
        run_conv_case(c, LD_DTYPE_FLOAT32, 2);
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    run_conv_case(c, LD_DTYPE_FLOAT64, 2);
}

/* --- Conv paths ----------------------------------------------------------------------------- */

static void test_conv_2d_im2col(void **state)
{
    (void)state;
    conv_case c = {.nd = 2, .N = 2, .C = 3, .M = 4, .group = 1, .in = {7, 9}, .k = {3, 3},
                   .s = {1, 1}, .d = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true};
    run_everywhere(&c);
    conv_case odd = {.nd = 2, .N = 1, .C = 5, .M = 3, .group = 1, .in = {8, 11}, .k = {2, 4},
                     .s = {2, 3}, .d = {2, 1}, .pads = {0, 2, 3, 1}, .bias = false};
    run_everywhere(&odd);
}

static void test_conv_groups_and_dilations(void **state)
{
    (void)state;
    conv_case c = {.nd = 2, .N = 2, .C = 4, .M = 6, .group = 2, .in = {9, 8}, .k = {3, 2},
                   .s = {2, 1}, .d = {1, 2}, .pads = {1, 0, 2, 1}, .bias = true};
    run_everywhere(&c);
}

static void test_conv_depthwise(void **state)
{
    (void)state;
    conv_case c = {.nd = 2, .N = 2, .C = 5, .M = 5, .group = 5, .in = {9, 10}, .k = {3, 3},
                   .s = {2, 2}, .d = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true};
    run_everywhere(&c);
    /* channel multiplier 2, dilation, asymmetric pads */
    conv_case mult = {.nd = 2, .N = 1, .C = 3, .M = 6, .group = 3, .in = {7, 12}, .k = {3, 5},
                      .s = {1, 2}, .d = {2, 1}, .pads = {2, 0, 1, 3}, .bias = false};
    run_everywhere(&mult);
    /* a single input channel (group 1) also takes the direct loop */
    conv_case single = {.nd = 2, .N = 1, .C = 1, .M = 4, .group = 1, .in = {6, 6}, .k = {3, 3},
                        .s = {1, 1}, .d = {1, 1}, .pads = {0, 0, 0, 0}, .bias = true};
    run_everywhere(&single);
}

static void test_conv_pointwise(void **state)
{
    (void)state;
    conv_case c = {.nd = 2, .N = 2, .C = 8, .M = 3, .group = 1, .in = {5, 7}, .k = {1, 1},
                   .s = {1, 1}, .d = {1, 1}, .bias = true};
    run_everywhere(&c);
    conv_case strided = c;
    strided.s[0] = strided.s[1] = 2;
    run_everywhere(&strided);
    conv_case grouped = {.nd = 2, .N = 1, .C = 6, .M = 4, .group = 2, .in = {3, 4}, .k = {1, 1},
                         .s = {1, 1}, .d = {1, 1}, .bias = false};
    run_everywhere(&grouped);
}

static void test_conv_1d_and_3d(void **state)
{
    (void)state;
    conv_case c1 = {.nd = 1, .N = 2, .C = 3, .M = 2, .group = 1, .in = {17}, .k = {5},
                    .s = {2}, .d = {2}, .pads = {2, 1}, .bias = true};
    run_everywhere(&c1);
    conv_case c3 = {.nd = 3, .N = 1, .C = 2, .M = 3, .group = 1, .in = {5, 6, 4},
                    .k = {3, 3, 2}, .s = {1, 2, 1}, .d = {1, 1, 2}, .pads = {1, 0, 1, 1, 1, 0},
                    .bias = true};
    run_everywhere(&c3);
    conv_case dw3 = {.nd = 3, .N = 1, .C = 2, .M = 2, .group = 2, .in = {4, 5, 6},
                     .k = {2, 3, 3}, .s = {2, 1, 2}, .d = {1, 1, 1}, .pads = {0, 1, 1, 1, 1, 0},
                     .bias = false};
    run_everywhere(&dw3);
}

static void test_conv_auto_pad(void **state)
{
    (void)state;
    const char *modes[] = {"SAME_UPPER", "SAME_LOWER", "VALID"};
    for (int i = 0; i < 3; i++) {
        conv_case c = {.nd = 2, .N = 1, .C = 3, .M = 2, .group = 1, .in = {7, 8}, .k = {3, 4},
                       .s = {2, 3}, .d = {1, 1}, .auto_pad = modes[i], .bias = true};
        run_everywhere(&c);
        conv_case dw = {.nd = 2, .N = 1, .C = 2, .M = 2, .group = 2, .in = {6, 5}, .k = {2, 3},
                        .s = {2, 2}, .d = {1, 1}, .auto_pad = modes[i], .bias = false};
        run_everywhere(&dw);
    }
}

/* Big enough that im2col is built in several tiles of output positions. */
static void test_conv_tiled(void **state)
{
    (void)state;
    conv_case c = {.nd = 2, .N = 1, .C = 64, .M = 8, .group = 1, .in = {40, 130}, .k = {3, 3},
                   .s = {1, 1}, .d = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true};
    /* 1-D: tiles end in the middle of the single output row */
    conv_case c1 = {.nd = 1, .N = 1, .C = 64, .M = 4, .group = 1, .in = {8000}, .k = {9},
                    .s = {1}, .d = {1}, .pads = {4, 4}, .bias = true};
    for (int i = 0; i < N_LEVELS; i++) {
        if (!ld_conv_direct_force_level(levels[i]))
            continue;
        run_conv_case(&c, LD_DTYPE_FLOAT32, 2);
        run_conv_case(&c1, LD_DTYPE_FLOAT32, 2);
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
    run_conv_case(&c1, LD_DTYPE_FLOAT64, 1);
}

/* Conv results do not depend on --threads: the GEMM blocks, the direct
 * kernels, the depthwise loop and col2im compute each output the same way
 * on any thread count (at every direct-convolution level). */
static void test_conv_threads_bitwise(void **state)
{
    (void)state;
    const char *ops[] = {"Conv", "Conv", "ConvTranspose"};
    const int64_t groups[] = {1, 32, 1};
    for (int run = 0; run < 3 * N_LEVELS; run++) {
        int k = run % 3;
        if (k == 0 && !ld_conv_direct_force_level(levels[run / 3])) {
            run += 2;
            continue;
        }
        int64_t C = 32, H = 40, W = 60, M = groups[k] == 1 ? 24 : 32;
        int64_t nx = C * H * W, nw = k == 2 ? C * M * 9 : M * (C / groups[k]) * 9;
        float *x = malloc((size_t)nx * sizeof *x), *w = malloc((size_t)nw * sizeof *w);
        assert_true(x && w);
        for (int64_t i = 0; i < nx; i++)
            x[i] = (float)kr_uniform();
        for (int64_t i = 0; i < nw; i++)
            w[i] = (float)kr_uniform();
        kr_input ins[2] = {
            {.name = "x", .dtype = LD_DTYPE_FLOAT32, .rank = 4, .dims = {1, C, H, W}, .data = x},
            {.name = "w", .dtype = LD_DTYPE_FLOAT32, .rank = 4,
             .dims = {k == 2 ? C : M, k == 2 ? M : C / groups[k], 3, 3}, .data = w,
             .initializer = true},
        };
        kr_attr attrs[] = {{.kind = KR_INTS, .name = "pads", .n = 4, .ints = {1, 1, 1, 1}},
                           {.kind = KR_INT, .name = "group", .i = groups[k]},
                           {0}};
        kr_result one, two;
        kr_run(11, ops[k], attrs, ins, 2, "y", 1, &one);
        kr_run(11, ops[k], attrs, ins, 2, "y", 2, &two);
        kr_expect_ok(&one);
        kr_expect_ok(&two);
        assert_int_equal(one.t[0]->nbytes, two.t[0]->nbytes);
        assert_memory_equal(one.t[0]->data, two.t[0]->data, one.t[0]->nbytes);
        kr_free(&one);
        kr_free(&two);
        free(x);
        free(w);
    }
    ld_conv_direct_force_level(LD_CONV_DIRECT_AUTO);
}

static void test_conv_float16(void **state)
{
    (void)state;
    conv_case c = {.nd = 2, .N = 1, .C = 4, .M = 3, .group = 1, .in = {6, 5}, .k = {3, 3},
                   .s = {1, 1}, .d = {1, 1}, .pads = {1, 1, 1, 1}, .bias = true};
    run_conv_case(&c, LD_DTYPE_FLOAT16, 1);
}

/* --- ConvTranspose paths ------------------------------------------------------------ */

static void test_conv_transpose_paths(void **state)
{
    (void)state;
    conv_case c = {.nd = 2, .N = 2, .C = 4, .M = 6, .group = 2, .in = {4, 5}, .k = {3, 2},
                   .s = {2, 3}, .d = {1, 2}, .pads = {1, 0, 0, 1}, .bias = true,
                   .transpose = true, .out_pad = {1, 0}};
    run_everywhere(&c);
    conv_case c1 = {.nd = 1, .N = 1, .C = 3, .M = 2, .group = 1, .in = {6}, .k = {4}, .s = {3},
                    .d = {1}, .pads = {1, 2}, .bias = false, .transpose = true};
    run_everywhere(&c1);
    conv_case c3 = {.nd = 3, .N = 1, .C = 2, .M = 3, .group = 1, .in = {3, 4, 3},
                    .k = {2, 3, 2}, .s = {2, 1, 2}, .d = {1, 1, 1}, .bias = true,
                    .transpose = true};
    run_everywhere(&c3);
    conv_case shaped = {.nd = 2, .N = 1, .C = 2, .M = 2, .group = 1, .in = {3, 3}, .k = {3, 3},
                        .s = {2, 2}, .d = {1, 1}, .bias = false, .transpose = true,
                        .out_shape = {6, 8}};
    run_everywhere(&shaped);
    conv_case same = {.nd = 2, .N = 1, .C = 1, .M = 2, .group = 1, .in = {3, 4}, .k = {3, 3},
                      .s = {2, 2}, .d = {1, 1}, .auto_pad = "SAME_UPPER", .bias = true,
                      .transpose = true};
    run_everywhere(&same);
    same.auto_pad = "SAME_LOWER";
    run_everywhere(&same);
    /* Several tiles of input rows on the direct product (512 KiB of columns
     * per thread): the non-overlapping 2x2 stride-2 col2im and the
     * overlapping one, tiles ending mid-image. */
    conv_case up = {.nd = 2, .N = 1, .C = 8, .M = 24, .group = 1, .in = {40, 200}, .k = {2, 2},
                    .s = {2, 2}, .d = {1, 1}, .bias = true, .transpose = true};
    run_everywhere(&up);
    conv_case over = {.nd = 2, .N = 1, .C = 8, .M = 16, .group = 1, .in = {41, 200},
                      .k = {3, 3}, .s = {2, 2}, .d = {1, 1}, .pads = {1, 1, 1, 1},
                      .bias = true, .transpose = true};
    run_everywhere(&over);
}

/* --- integer convolutions ----------------------------------------------------------- */

/* ConvInteger with a per-output-channel weight zero point, and QLinearConv
 * with per-channel scales, against naive integer arithmetic. */
static void test_conv_integer_per_channel(void **state)
{
    (void)state;
    uint8_t x[1 * 2 * 4 * 4];
    int8_t w[3 * 2 * 2 * 2];
    for (size_t i = 0; i < sizeof x; i++)
        x[i] = (uint8_t)(i * 37 % 251);
    for (size_t i = 0; i < sizeof w; i++)
        w[i] = (int8_t)((int)(i * 53 % 200) - 100);
    uint8_t xzp = 7;
    int8_t wzp[3] = {-3, 0, 5};
    int32_t want[3 * 3 * 3];
    for (int m = 0; m < 3; m++)
        for (int oh = 0; oh < 3; oh++)
            for (int ow = 0; ow < 3; ow++) {
                int32_t acc = 0;
                for (int c = 0; c < 2; c++)
                    for (int kh = 0; kh < 2; kh++)
                        for (int kw = 0; kw < 2; kw++)
                            acc += (x[(c * 4 + oh + kh) * 4 + ow + kw] - xzp) *
                                   (w[((m * 2 + c) * 2 + kh) * 2 + kw] - wzp[m]);
                want[(m * 3 + oh) * 3 + ow] = acc;
            }
    kr_input ins[4] = {
        {.name = "x", .dtype = LD_DTYPE_UINT8, .rank = 4, .dims = {1, 2, 4, 4}, .data = x},
        {.name = "w", .dtype = LD_DTYPE_INT8, .rank = 4, .dims = {3, 2, 2, 2}, .data = w,
         .initializer = true},
        {.name = "xzp", .dtype = LD_DTYPE_UINT8, .rank = 0, .data = &xzp, .initializer = true},
        {.name = "wzp", .dtype = LD_DTYPE_INT8, .rank = 1, .dims = {3}, .data = wzp,
         .initializer = true},
    };
    kr_result r;
    kr_run(10, "ConvInteger", NULL, ins, 4, "y", 2, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_INT32);
    assert_int_equal(r.t[0]->count, 27);
    assert_memory_equal(r.t[0]->data, want, sizeof want);
    kr_free(&r);

    /* QLinearConv: same accumulators, per-channel w_scale, int8 output. */
    float xs = 0.05f, wsc[3] = {0.01f, 0.02f, 0.004f}, ys = 0.25f;
    int8_t yzp = -4;
    int32_t bias[3] = {100, -50, 7};
    kr_input q[9] = {
        ins[0],
        {.name = "xs", .dtype = LD_DTYPE_FLOAT32, .rank = 0, .data = &xs, .initializer = true},
        ins[2],
        ins[1],
        {.name = "ws", .dtype = LD_DTYPE_FLOAT32, .rank = 1, .dims = {3}, .data = wsc,
         .initializer = true},
        ins[3],
        {.name = "ys", .dtype = LD_DTYPE_FLOAT32, .rank = 0, .data = &ys, .initializer = true},
        {.name = "yzp", .dtype = LD_DTYPE_INT8, .rank = 0, .data = &yzp, .initializer = true},
        {.name = "b", .dtype = LD_DTYPE_INT32, .rank = 1, .dims = {3}, .data = bias,
         .initializer = true},
    };
    kr_run(10, "QLinearConv", NULL, q, 9, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_INT8);
    for (int i = 0; i < 27; i++) {
        int m = i / 9;
        float scale = xs * wsc[m] / ys;
        double v = nearbyintf((float)(want[i] + bias[m]) * scale) + yzp;
        v = v < -128 ? -128 : v > 127 ? 127 : v;
        assert_int_equal(((int8_t *)r.t[0]->data)[i], (int)v);
    }
    kr_free(&r);
}

/* --- error paths ---------------------------------------------------------------------- */

static void expect_conv_error(const char *op, const int64_t *xd, int xr, const int64_t *wd, int wr,
                              const int64_t *bd, const kr_attr *attrs, ld_status want,
                              const char *substring)
{
    static float data[4096];
    kr_input ins[3] = {{.name = "x", .dtype = LD_DTYPE_FLOAT32, .rank = xr, .data = data},
                       {.name = "w", .dtype = LD_DTYPE_FLOAT32, .rank = wr, .data = data,
                        .initializer = true},
                       {.name = "b", .dtype = LD_DTYPE_FLOAT32, .rank = 1, .data = data,
                        .initializer = true}};
    memcpy(ins[0].dims, xd, (size_t)xr * sizeof *xd);
    memcpy(ins[1].dims, wd, (size_t)wr * sizeof *wd);
    if (bd)
        ins[2].dims[0] = bd[0];
    kr_result r;
    kr_run(11, op, attrs, ins, bd ? 3 : 2, "y", 1, &r);
    kr_expect_fail(&r, want, substring);
    kr_free(&r);
}

static void test_conv_errors(void **state)
{
    (void)state;
    const int64_t x[] = {1, 3, 5, 5}, w[] = {2, 2, 3, 3}, w3[] = {2, 3, 3, 3};
    expect_conv_error("Conv", x, 4, w, 4, NULL, NULL, LD_ERR_INPUT,
                      "input X has 3 channels but weights W (2x2x3x3) with group 1 expect 2");
    kr_attr pads3[] = {{.kind = KR_INTS, .name = "pads", .n = 3, .ints = {1, 1, 1}}, {0}};
    expect_conv_error("Conv", x, 4, w3, 4, NULL, pads3, LD_ERR_INPUT,
                      "attribute 'pads' has 3 entries, expected 4");
    kr_attr negative[] = {{.kind = KR_INTS, .name = "pads", .n = 4, .ints = {0, -1, 0, 0}}, {0}};
    expect_conv_error("Conv", x, 4, w3, 4, NULL, negative, LD_ERR_INPUT,
                      "attribute 'pads'[1] = -1 must be >= 0");
    const int64_t big[] = {2, 3, 7, 3};
    expect_conv_error("Conv", x, 4, big, 4, NULL, NULL, LD_ERR_INPUT,
                      "is larger than the padded input");
    kr_attr group2[] = {{.kind = KR_INT, .name = "group", .i = 3}, {0}};
    const int64_t w_g[] = {2, 1, 3, 3};
    expect_conv_error("Conv", x, 4, w_g, 4, NULL, group2, LD_ERR_INPUT,
                      "2 output channels are not divisible by group 3");
    const int64_t b3[] = {3};
    expect_conv_error("Conv", x, 4, w3, 4, b3, NULL, LD_ERR_INPUT,
                      "bias B has shape 3; expected [2]");
    kr_attr bad_pad[] = {{.kind = KR_STRING, .name = "auto_pad", .s = "SAME"}, {0}};
    expect_conv_error("Conv", x, 4, w3, 4, NULL, bad_pad, LD_ERR_INPUT,
                      "auto_pad 'SAME' is not one of");
    kr_attr kshape[] = {{.kind = KR_INTS, .name = "kernel_shape", .n = 2, .ints = {3, 2}}, {0}};
    expect_conv_error("Conv", x, 4, w3, 4, NULL, kshape, LD_ERR_INPUT,
                      "kernel_shape[1] = 2 but weights W have shape 2x3x3x3");
    const int64_t x6[] = {1, 1, 2, 2, 2, 2}, w6[] = {1, 1, 1, 1, 1, 1};
    expect_conv_error("Conv", x6, 6, w6, 6, NULL, NULL, LD_ERR_UNSUPPORTED,
                      "4 spatial dimensions are not supported");
    const int64_t x2[] = {1, 3};
    expect_conv_error("Conv", x2, 2, w3, 4, NULL, NULL, LD_ERR_INPUT,
                      "input X has shape 1x3; expected [N, C, spatial...]");
    expect_conv_error("ConvTranspose", x, 4, w, 4, NULL, NULL, LD_ERR_INPUT,
                      "input X has 3 channels but weights W are 2x2x3x3");
    kr_attr strides0[] = {{.kind = KR_INTS, .name = "strides", .n = 2, .ints = {1, 0}}, {0}};
    expect_conv_error("ConvTranspose", x, 4, w3, 4, NULL, strides0, LD_ERR_INPUT,
                      "attribute 'strides'[1] = 0 must be >= 1");
}

static void test_conv_unsupported_dtype(void **state)
{
    (void)state;
    int32_t data[64] = {0};
    kr_input ins[2] = {{.name = "x", .dtype = LD_DTYPE_INT32, .rank = 4, .dims = {1, 1, 3, 3},
                        .data = data},
                       {.name = "w", .dtype = LD_DTYPE_INT32, .rank = 4, .dims = {1, 1, 2, 2},
                        .data = data, .initializer = true}};
    kr_result r;
    kr_run(11, "Conv", NULL, ins, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_UNSUPPORTED, "dtype int32 is not supported");
    kr_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_conv_2d_im2col, ob_teardown),
        cmocka_unit_test_teardown(test_conv_groups_and_dilations, ob_teardown),
        cmocka_unit_test_teardown(test_conv_depthwise, ob_teardown),
        cmocka_unit_test_teardown(test_conv_pointwise, ob_teardown),
        cmocka_unit_test_teardown(test_conv_1d_and_3d, ob_teardown),
        cmocka_unit_test_teardown(test_conv_auto_pad, ob_teardown),
        cmocka_unit_test_teardown(test_conv_tiled, ob_teardown),
        cmocka_unit_test_teardown(test_conv_float16, ob_teardown),
        cmocka_unit_test_teardown(test_conv_threads_bitwise, ob_teardown),
        cmocka_unit_test_teardown(test_conv_transpose_paths, ob_teardown),
        cmocka_unit_test_teardown(test_conv_integer_per_channel, ob_teardown),
        cmocka_unit_test_teardown(test_conv_errors, ob_teardown),
        cmocka_unit_test_teardown(test_conv_unsupported_dtype, ob_teardown),
    };
    return cmocka_run_group_tests_name("kernels_conv", tests, NULL, NULL);
}
