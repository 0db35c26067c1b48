/* layerdiff — ConvTranspose (opsets 1, 11): 1-D, 2-D and 3-D, groups,
 * strides, dilations, pads, output_padding, output_shape and auto_pad.
 *
 * How. Per image and group, the columns W_g^T (M/g*k x C/g) times X_g (C/g x
 * input positions) come from the one GEMM entry (backends/blas.h), in tiles
 * of input rows kept in the shared scratch cache; col2im then adds each
 * column entry to the output position it lands on (output = input * stride -
 * pad_begin + kernel offset * dilation). col2im runs in parallel over output
 * channels; every output element adds its contributions in the same order
 * (kernel offset, then input position) whatever the thread count. float32
 * computes in float32 (float16/bfloat16 widened by the executor), float64 in
 * double.
 *
 * Padding with output_shape or auto_pad follows the ONNX spec: total =
 * stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - out;
 * SAME_UPPER puts total/2 at the beginning, otherwise the beginning gets
 * total - total/2. An output_shape larger than the full result (negative
 * total) leaves zeros (plus bias) at the end, as ONNX Runtime does. */
#include <stdlib.h>
#include <string.h>

#include "backends/accumulate.h"
#include "backends/blas.h"
#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_direct.h"
#include "backends/kernels/conv_pool.h"
#include "backends/kernels/conv_transpose_fast.h"
#include "backends/kernels/kernels.h"

#define CONVT_TILE_BYTES ((size_t)8 << 20)
/* With the direct product (AVX-512/AVX2) and a non-overlapping col2im, the
 * columns are read back right after they are written: tiles of this much
 * per thread keep them in L2 (1 MiB per core on Zen 3) instead of a round
 * trip to memory (PaddleOCR det's 24 -> 24 2x2 upsampling: 9.8 MB of
 * columns). Each output is bias + one column there, so the tiling never
 * changes a result. */
#define CONVT_DIRECT_TILE_BYTES ((size_t)512 << 10)

typedef struct convt_problem {
    const void *x, *w, *b;
    void *y;
    int64_t N, C, M, group;
    ld_window_geom g; /* in: X spatial, out: Y spatial */
    size_t es;
} convt_problem;

static const ld_tensor *kin(const ld_kernel_ctx *ctx, int i)
{
    return i < ctx->n_inputs ? ctx->inputs[i] : NULL;
}

/* Output size and padding of spatial dim i (see the file comment). */
static ld_status convt_dim(ld_kernel_ctx *ctx, const ld_window_attrs *a, int i, int nd,
                           ld_window_geom *g)
{
    int64_t in = g->in[i], k = g->k[i], s = g->s[i], d = g->d[i];
    int64_t adj = a->n_output_padding ? a->output_padding[i] : 0;
    const int64_t limit = (int64_t)1 << 40;
    if (in > limit || k > limit || s > limit || d > limit || adj > limit)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "spatial dim %d: sizes are too large", i);
    if (adj >= s && adj >= d)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "output_padding[%d] = %lld must be smaller than "
                              "the stride (%lld) or the dilation (%lld)", i, (long long)adj,
                              (long long)s, (long long)d);
    int64_t full = s * (in - 1) + adj + (k - 1) * d + 1;
    bool same = a->auto_pad == LD_AUTO_PAD_SAME_UPPER || a->auto_pad == LD_AUTO_PAD_SAME_LOWER;
    if (a->n_output_shape || same) {
        int64_t out = a->n_output_shape ? a->output_shape[a->n_output_shape - nd + i] : in * s;
        int64_t total = full - out;
        if (total < 0)
            total = 0;
        g->out[i] = out;
        g->pb[i] = a->auto_pad == LD_AUTO_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        g->pe[i] = total - g->pb[i];
    } else {
        bool pads = a->auto_pad == LD_AUTO_PAD_NOTSET && a->n_pads;
        g->pb[i] = pads ? a->pads[i] : 0;
        g->pe[i] = pads ? a->pads[i + nd] : 0;
        if (g->pb[i] > limit || g->pe[i] > limit)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "pads of spatial dim %d are too large", i);
        g->out[i] = full - g->pb[i] - g->pe[i];
    }
    if (g->out[i] < 1 && in > 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "spatial dim %d: the output size would be %lld",
                              i, (long long)g->out[i]);
    return LD_OK;
}

static ld_status convt_geometry(ld_kernel_ctx *ctx, convt_problem *p)
{
    const ld_window_attrs *a = ctx->state;
    const ld_tensor *x = kin(ctx, 0), *w = kin(ctx, 1), *b = kin(ctx, 2);
    char xs[64], ws[64];
    if (!x || !w)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs inputs X and W");
    ld_shape_format(&x->shape, xs, sizeof xs);
    ld_shape_format(&w->shape, ws, sizeof ws);
    if (x->dtype != LD_DTYPE_FLOAT32 && x->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "X, W and B must have the same dtype");
    if (x->shape.rank < 3 || w->shape.rank != x->shape.rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input X (%s) and weights W (%s) must both be "
                              "[N, C, spatial...] of the same rank", xs, ws);
    int nd = x->shape.rank - 2;
    if (nd > LD_WINDOW_MAX_DIMS)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "%d spatial dimensions are not supported",
                              nd);
    p->N = x->shape.dims[0];
    p->C = x->shape.dims[1];
    p->group = a->group;
    p->M = w->shape.dims[1] * a->group;
    if (w->shape.dims[0] != p->C || p->C % a->group != 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input X has %lld channels but weights W are %s "
                              "(group %lld)", (long long)p->C, ws, (long long)a->group);
    if (b && (b->shape.rank != 1 || b->shape.dims[0] != p->M))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "bias B must have shape [%lld]", (long long)p->M);
    ld_status st = ld_window_check_len(ctx, "kernel_shape", a->n_kernel, (size_t)nd);
    if (st == LD_OK)
        st = ld_window_check_len(ctx, "strides", a->n_strides, (size_t)nd);
    if (st == LD_OK)
        st = ld_window_check_len(ctx, "dilations", a->n_dilations, (size_t)nd);
    if (st == LD_OK)
        st = ld_window_check_len(ctx, "pads", a->n_pads, 2 * (size_t)nd);
    if (st == LD_OK)
        st = ld_window_check_len(ctx, "output_padding", a->n_output_padding, (size_t)nd);
    if (st == LD_OK && a->n_output_shape && a->n_output_shape != (size_t)nd &&
        a->n_output_shape != (size_t)nd + 2)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "output_shape has %zu entries; expected %d",
                            a->n_output_shape, nd);
    if (st != LD_OK)
        return st;
    memset(&p->g, 0, sizeof p->g);
    p->g.nd = nd;
    for (int i = 0; i < nd && st == LD_OK; i++) {
        if (a->n_kernel && a->kernel[i] != w->shape.dims[2 + i])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "kernel_shape[%d] = %lld but weights W are %s",
                                  i, (long long)a->kernel[i], ws);
        p->g.in[i] = x->shape.dims[2 + i];
        p->g.k[i] = w->shape.dims[2 + i];
        p->g.s[i] = a->n_strides ? a->strides[i] : 1;
        p->g.d[i] = a->n_dilations ? a->dilations[i] : 1;
        st = convt_dim(ctx, a, i, nd, &p->g);
    }
    if (st != LD_OK)
        return st;
    ld_window_geom_finish(&p->g);
    p->x = x->data;
    p->w = w->data;
    p->b = b ? b->data : NULL;
    p->es = ld_dtype_size(x->dtype);
    return LD_OK;
}

static ld_status convt_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    convt_problem p;
    ld_status st = convt_geometry(ctx, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    outs[0].shape.rank = p.g.nd + 2;
    outs[0].shape.dims[0] = p.N;
    outs[0].shape.dims[1] = p.M;
    for (int i = 0; i < p.g.nd; i++)
        outs[0].shape.dims[2 + i] = p.g.out[LD_WINDOW_MAX_DIMS - p.g.nd + i];
    return LD_OK;
}

/* Adds columns of input rows [r0, r1) (flattened (D, H) input rows) into the
 * Mg output planes at y. col: Mg * k_size rows of (r1 - r0) * in[2]. ADD(y, c)
 * is the accumulation step: plain, or ld_accum_add (accumulate-half: each
 * contribution is one rounded partial sum of the output, in this order). */
#define PLAIN_ADD(a, b) ((a) + (b))
#define ACCUM_ADD(a, b) ld_accum_add(ac, a, b)
#define DEFINE_COL2IM(T, NAME, ADD)                                                            \
    static void NAME(const T *col, const ld_window_geom *g, int64_t Mg, int64_t r0, int64_t r1, \
                     T *y, int threads, const ld_accum *ac)                                    \
    {                                                                                          \
        int64_t in2 = g->in[2], ncols = (r1 - r0) * in2;                                       \
        _Pragma("omp parallel for num_threads(threads) if (Mg * g->k_size * ncols > (1 << 16)) schedule(static)") \
        for (int64_t m = 0; m < Mg; m++) {                                                     \
            T *yp = y + m * g->out_size;                                                       \
            for (int64_t kidx = 0; kidx < g->k_size; kidx++) {                                 \
                int64_t kw = kidx % g->k[2], kh = (kidx / g->k[2]) % g->k[1];                  \
                int64_t kd = kidx / (g->k[2] * g->k[1]), lo, hi;                               \
                ld_window_valid_range(g->out[2], in2, g->s[2], g->pb[2], kw * g->d[2], &lo,    \
                                      &hi);                                                    \
                const T *cr = col + (m * g->k_size + kidx) * ncols;                            \
                for (int64_t row = r0; row < r1; row++) {                                      \
                    int64_t id = row / g->in[1], ih = row % g->in[1];                          \
                    int64_t od = id * g->s[0] - g->pb[0] + kd * g->d[0];                       \
                    int64_t oh = ih * g->s[1] - g->pb[1] + kh * g->d[1];                       \
                    if (od < 0 || od >= g->out[0] || oh < 0 || oh >= g->out[1])                \
                        continue;                                                              \
                    int64_t base = (od * g->out[1] + oh) * g->out[2] - g->pb[2] + kw * g->d[2]; \
                    const T *c = cr + (row - r0) * in2;                                        \
                    for (int64_t iw = lo; iw < hi; iw++)                                       \
                        yp[base + iw * g->s[2]] = ADD(yp[base + iw * g->s[2]], c[iw]);         \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

DEFINE_COL2IM(float, col2im_f32, PLAIN_ADD)
DEFINE_COL2IM(float, col2im_f32_half, ACCUM_ADD)
DEFINE_COL2IM(double, col2im_f64, PLAIN_ADD)

/* Whether every output position gets exactly one column entry, in order:
 * kernel = stride, no dilation, no padding, and the output exactly input x
 * stride (2-D or 1-D). Such a col2im is bias + column, written once. */
static bool non_overlapping(const ld_window_geom *g)
{
    if (g->in[0] != 1 || g->k[0] != 1 || g->out[0] != 1)
        return false;
    for (int i = 1; i < LD_WINDOW_MAX_DIMS; i++)
        if (g->k[i] != g->s[i] || g->d[i] != 1 || g->pb[i] != 0 || g->pe[i] != 0 ||
            g->out[i] != g->in[i] * g->s[i])
            return false;
    return true;
}

typedef struct {
    const float *col, *bias;
    const ld_window_geom *g;
    int64_t r0, r1;
    float *y;
    const ld_conv_round *round;
} col2im_once_job;

static void col2im_once_channels(void *arg, int worker, int64_t m0, int64_t m1)
{
    (void)worker;
    const col2im_once_job *j = arg;
    const ld_window_geom *g = j->g;
    int64_t r0 = j->r0, r1 = j->r1;
    int64_t in2 = g->in[2], ncols = (r1 - r0) * in2, s1 = g->s[1], s2 = g->s[2];
    for (int64_t m = m0; m < m1; m++) {
        float b = j->bias ? j->bias[m] : 0.0f;
        for (int64_t kh = 0; kh < s1; kh++)
            for (int64_t row = r0; row < r1; row++) {
                float *yr = j->y + m * g->out_size + (row * s1 + kh) * g->out[2];
                const float *c0 = j->col + ((m * s1 + kh) * s2) * ncols + (row - r0) * in2;
                if (s2 == 2 && ld_conv_direct_available()) {
                    ld_interleave2_add_f32(c0, c0 + ncols, b, yr, in2);
                } else {
                    for (int64_t kw = 0; kw < s2; kw++) {
                        const float *c = c0 + kw * ncols;
                        for (int64_t iw = 0; iw < in2; iw++)
                            yr[iw * s2 + kw] = b + c[iw];
                    }
                }
                if (j->round)
                    j->round->block(j->round->user, 0, yr, g->out[2]);
            }
    }
}

/* col2im of a non-overlapping float32 ConvTranspose (see non_overlapping):
 * y[m][ih * s1 + kh][iw * s2 + kw] = bias[m] + col[(m, kh, kw)][row][iw]
 * for the input rows [r0, r1). Stride 2 in the width interleaves two column
 * rows with vector permutes (AVX-512 or AVX2, conv_direct.c) when the CPU has them.
 * round: NULL, or the backend's output rounding (kernel.h round_block), given
 * each output row as soon as it is written. Channels go through the claim
 * pool (conv_pool.h), one per claim. */
static void col2im_once_f32(const float *col, const ld_window_geom *g, int64_t Mg, int64_t r0,
                            int64_t r1, const float *bias, float *y, int threads,
                            const ld_conv_round *round)
{
    int64_t work = Mg * g->k_size * (r1 - r0) * g->in[2];
    col2im_once_job job = {.col = col, .bias = bias, .g = g, .r0 = r0, .r1 = r1, .y = y,
                           .round = round};
    ld_conv_pool_run(work > LD_PARALLEL_MIN_WORK ? threads : 1, Mg, 1, col2im_once_channels,
                     &job);
}

/* 2-D, kernel 2x2 = stride, no padding or dilation, output exactly 2H x 2W:
 * what conv_transpose_avx2.c computes in one pass. */
static bool fused_2x2(const ld_window_geom *g)
{
    return g->nd == 2 && non_overlapping(g) && g->k[1] == 2 && g->k[2] == 2;
}

typedef struct {
    const float *x, *w, *bias;
    float *y;
    int64_t C, M, H, W;
    const ld_conv_round *round;
    bool round_fp16_inline, wide; /* wide: the AVX-512 tiles */
} fused_job;

static void fused_rows(void *arg, int worker, int64_t r0, int64_t r1)
{
    (void)worker;
    const fused_job *j = arg;
    (j->wide ? ld_convt2x2_rows_f32_avx512 : ld_convt2x2_rows_f32_avx2)(
        j->x, j->w, j->bias, j->y, j->C, j->M, j->H, j->W, r0, r1, j->round, j->round_fp16_inline);
}

/* One image and group of a fused_2x2 float32 ConvTranspose: input rows go
 * through the claim pool (conv_pool.h), a few per claim; each writes its
 * own output rows, so the thread count changes no result. */
static void fused_2x2_f32(const float *x, const float *w, const float *bias, float *y,
                          int64_t Cg, int64_t Mg, const ld_window_geom *g, int threads,
                          const ld_conv_round *round, bool round_fp16_inline, bool wide)
{
    fused_job job = {.x = x, .w = w, .bias = bias, .y = y, .C = Cg, .M = Mg, .H = g->in[1],
                     .W = g->in[2], .round = round, .round_fp16_inline = round_fp16_inline,
                     .wide = wide};
    int64_t work = Mg * 4 * Cg * g->in_size;
    ld_conv_pool_run(work > LD_PARALLEL_MIN_WORK ? threads : 1, g->in[1], 4, fused_rows, &job);
}

static void fill_planes(void *y, const void *bias, int64_t planes, int64_t n, size_t es)
{
    for (int64_t r = 0; r < planes; r++) {
        if (es == 4) {
            float v = bias ? ((const float *)bias)[r] : 0.0f, *o = (float *)y + r * n;
            for (int64_t i = 0; i < n; i++)
                o[i] = v;
        } else {
            double v = bias ? ((const double *)bias)[r] : 0.0, *o = (double *)y + r * n;
            for (int64_t i = 0; i < n; i++)
                o[i] = v;
        }
    }
}

static ld_status convt_compute(ld_kernel_ctx *ctx)
{
    convt_problem p;
    ld_status st = convt_geometry(ctx, &p);
    if (st != LD_OK)
        return st;
    p.y = ctx->outputs[0]->data;
    const ld_window_geom *g = &p.g;
    int64_t Cg = p.C / p.group, Mg = p.M / p.group, rows_k = Mg * g->k_size;
    ld_accum ac = ld_accum_make(ctx->numerics, ctx->counters);
    /* float32 with AVX-512 or AVX2: the columns from conv_direct.c's product, and a
     * non-overlapping col2im writes bias + column once */
    bool direct = p.es == 4 && !ac.half && ld_conv_direct_available();
    bool once = direct && non_overlapping(g);
    ld_convt_level convt = ld_convt_level_active();
    bool fused = once && fused_2x2(g) && convt != LD_CONVT_NONE;
    for (int64_t n = 0; n < p.N && !once; n++)
        fill_planes((char *)p.y + (size_t)(n * p.M * g->out_size) * p.es, p.b, p.M, g->out_size,
                    p.es);
    int64_t rows = g->in[0] * g->in[1], row_len = g->in[2];
    if (p.N == 0 || rows_k == 0 || rows * row_len == 0 || g->out_size == 0) {
        for (int64_t n = 0; n < p.N && once; n++) /* bias only */
            fill_planes((char *)p.y + (size_t)(n * p.M * g->out_size) * p.es, p.b, p.M,
                        g->out_size, p.es);
        return LD_OK;
    }
    /* the backend's output rounding, row by row as col2im writes them once */
    const ld_tensor *out = ctx->outputs[0];
    ld_conv_round round = {ctx->round_block, ctx->round_user};
    bool rounds = once && ctx->round_block && out->dtype == LD_DTYPE_FLOAT32;
    /* the fused kernel may round float16 in its tiles (kernel.h) */
    bool fp16_inline = rounds && ctx->round_fp16_inline && !ctx->round_fp16_bits;
    ctx->flops += (int64_t)(2.0 * (double)p.N * (double)p.group * (double)rows_k *
                            (double)(rows * row_len) * (double)Cg);
    if (fused) {
        for (int64_t n = 0; n < p.N; n++)
            for (int64_t gr = 0; gr < p.group; gr++)
                fused_2x2_f32((const float *)p.x + (n * p.C + gr * Cg) * g->in_size,
                              (const float *)p.w + gr * Cg * rows_k,
                              p.b ? (const float *)p.b + gr * Mg : NULL,
                              (float *)p.y + (n * p.M + gr * Mg) * g->out_size, Cg, Mg, g,
                              ctx->threads, rounds ? &round : NULL, fp16_inline,
                              convt == LD_CONVT_AVX512);
        if (rounds)
            ctx->rounded_outputs |= 1u;
        return LD_OK;
    }
    size_t row_bytes = (size_t)rows_k * (size_t)row_len * p.es;
    /* only where each output is written once: an overlapping col2im adds
     * a tile's columns before the next tile's, so its tiles set the order */
    size_t per_thread = (size_t)(ctx->threads > 1 ? ctx->threads : 1);
    size_t tile_bytes = once ? CONVT_DIRECT_TILE_BYTES * per_thread : CONVT_TILE_BYTES;
    int64_t tile = (int64_t)(tile_bytes / row_bytes);
    tile = tile < 1 ? 1 : tile > rows ? rows : tile;
    size_t pack_bytes =
        direct ? ld_gemm_direct_scratch_floats(rows_k, Cg, ctx->threads) * sizeof(float) : 0;
    size_t col_bytes = (row_bytes * (size_t)tile + 63) / 64 * 64;
    char *col = ld_scratch_get(col_bytes + pack_bytes);
    if (!col)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "cannot allocate %zu bytes of scratch",
                              col_bytes + pack_bytes);
    ld_blas_set_threads(ctx->threads);
    for (int64_t n = 0; n < p.N; n++)
        for (int64_t gr = 0; gr < p.group; gr++) {
            const char *x = (const char *)p.x + (size_t)((n * p.C + gr * Cg) * g->in_size) * p.es;
            const char *w = (const char *)p.w + (size_t)(gr * Cg * rows_k) * p.es;
            char *y = (char *)p.y + (size_t)((n * p.M + gr * Mg) * g->out_size) * p.es;
            for (int64_t r0 = 0; r0 < rows; r0 += tile) {
                int64_t r1 = r0 + tile < rows ? r0 + tile : rows, cols = (r1 - r0) * row_len;
                const char *xt = x + (size_t)(r0 * row_len) * p.es;
                if (direct) {
                    ld_gemm_direct_f32(true, rows_k, cols, Cg, (const float *)w, rows_k,
                                       (const float *)xt, g->in_size, (float *)col, cols,
                                       (float *)(col + col_bytes), ctx->threads);
                    if (once)
                        col2im_once_f32((const float *)col, g, Mg, r0, r1,
                                        p.b ? (const float *)p.b + gr * Mg : NULL, (float *)y,
                                        ctx->threads, rounds ? &round : NULL);
                    else
                        col2im_f32((const float *)col, g, Mg, r0, r1, (float *)y, ctx->threads,
                                   &ac);
                } else if (p.es == 4) {
                    ld_sgemm(true, false, rows_k, cols, Cg, 1.0f, (const float *)w, rows_k,
                             (const float *)xt, g->in_size, 0.0f, (float *)col, cols,
                             ctx->numerics, ctx->counters);
                    (ac.half ? col2im_f32_half : col2im_f32)((const float *)col, g, Mg, r0, r1,
                                                             (float *)y, ctx->threads, &ac);
                } else {
                    ld_dgemm(true, false, rows_k, cols, Cg, 1.0, (const double *)w, rows_k,
                             (const double *)xt, g->in_size, 0.0, (double *)col, cols,
                             ctx->numerics, ctx->counters);
                    col2im_f64((const double *)col, g, Mg, r0, r1, (double *)y, ctx->threads,
                               &ac);
                }
            }
        }
    ld_scratch_put(col);
    if (rounds)
        ctx->rounded_outputs |= 1u;
    return LD_OK;
}

static const ld_kernel conv_transpose_kernels[] = {
    {"", "ConvTranspose", 1, LD_KERNEL_WIDEN_HALF, ld_window_kernel_init, convt_infer, convt_compute,
     ld_window_kernel_fini, NULL},
    {"", "ConvTranspose", 11, LD_KERNEL_WIDEN_HALF, ld_window_kernel_init, convt_infer, convt_compute,
     ld_window_kernel_fini, NULL},
};

LD_KERNEL_FAMILY(conv_transpose);
