/* layerdiff — convolutions: Conv (opsets 1, 11), ConvInteger (10) and
 * QLinearConv (10), 1-D, 2-D and 3-D, with groups, dilations, strides, pads
 * and auto_pad.
 *
 * How. Per image and group, Y_g = W_g (M/g x C/g*k) times the im2col matrix
 * of X_g (C/g*k x output positions) through the one GEMM entry (ld_sgemm /
 * ld_dgemm, backends/blas.h). The im2col matrix lives in the shared scratch
 * cache (conv_common.h: reused across nodes and runs, since first touch of
 * fresh memory is slow here) and is built in tiles of output positions
 * (whole rows when they fit), so it stays a few MiB even for large images.
 * A 1x1 convolution with stride 1 and no padding multiplies X directly. A
 * convolution with one input channel per group (depthwise, or a
 * single-channel input) runs a direct loop instead of GEMMs with K = kernel
 * size: each output adds bias, then its taps in kernel order, in float32
 * (float64 for double) — the order does not depend on the thread count.
 *
 * Numerics: float32 convolutions compute in float32 (the BLAS's fp32 FMA
 * accumulation, as ONNX Runtime's CPU provider does); float16/bfloat16 are
 * widened by the executor. The integer variants compute exactly: inputs minus
 * zero points are converted to double, so the double GEMM sums integers
 * exactly (|sum| < 2^53), and the result is converted back. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/accumulate.h"
#include "backends/blas.h"
#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_direct.h"
#include "backends/kernels/conv_pool.h"
#include "backends/kernels/depthwise.h"
#include "backends/kernels/kernels.h"

/* Target size of one im2col tile. */
#define CONV_TILE_BYTES ((size_t)8 << 20)

typedef struct conv_problem {
    const void *x, *w, *b; /* b may be NULL */
    void *y;
    int64_t N, C, M, group;
    ld_window_geom g;
    size_t es;             /* 4: float, 8: double */
} conv_problem;

static const ld_tensor *kin(const ld_kernel_ctx *ctx, int i)
{
    return i < ctx->n_inputs ? ctx->inputs[i] : NULL;
}

/* --- shapes -------------------------------------------------------------------------- */

/* Validates X [N, C, D...], W [M, C/group, k...] and B [M] and computes the
 * geometry. */
static ld_status conv_geometry(ld_kernel_ctx *ctx, const ld_tensor *x, const ld_tensor *w,
                               const ld_tensor *b, conv_problem *p)
{
    const ld_window_attrs *a = ctx->state;
    char xs[64], ws[64];
    ld_shape_format(&x->shape, xs, sizeof xs);
    ld_shape_format(&w->shape, ws, sizeof ws);
    if (x->shape.rank < 3)
        return ld_kernel_fail(ctx, LD_ERR_INPUT,
                              "input X has shape %s; expected [N, C, spatial...]", xs);
    if (w->shape.rank != x->shape.rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "weights W (%s) and input X (%s) have different "
                              "ranks", ws, xs);
    int nd = x->shape.rank - 2;
    p->N = x->shape.dims[0];
    p->C = x->shape.dims[1];
    p->M = w->shape.dims[0];
    p->group = a->group;
    if (w->shape.dims[1] * a->group != p->C)
        return ld_kernel_fail(ctx, LD_ERR_INPUT,
                              "input X has %lld channels but weights W (%s) with group %lld "
                              "expect %lld", (long long)p->C, ws, (long long)a->group,
                              (long long)(w->shape.dims[1] * a->group));
    if (p->M % a->group != 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%lld output channels are not divisible by group "
                              "%lld", (long long)p->M, (long long)a->group);
    ld_status st = ld_window_check_len(ctx, "kernel_shape", a->n_kernel, (size_t)nd);
    if (st != LD_OK)
        return st;
    for (int i = 0; i < nd && a->n_kernel; i++)
        if (a->kernel[i] != w->shape.dims[2 + i])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "kernel_shape[%d] = %lld but weights W have "
                                  "shape %s", i, (long long)a->kernel[i], ws);
    if (b && (b->shape.rank != 1 || b->shape.dims[0] != p->M)) {
        char bs[64];
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "bias B has shape %s; expected [%lld]",
                              ld_shape_format(&b->shape, bs, sizeof bs), (long long)p->M);
    }
    return ld_window_geom_forward(ctx, a, nd, x->shape.dims + 2, w->shape.dims + 2,
                                  LD_WINDOW_CONV, &p->g);
}

static void conv_output_shape(const conv_problem *p, ld_shape *out)
{
    out->rank = p->g.nd + 2;
    out->dims[0] = p->N;
    out->dims[1] = p->M;
    for (int i = 0; i < p->g.nd; i++)
        out->dims[2 + i] = p->g.out[LD_WINDOW_MAX_DIMS - p->g.nd + i];
}

/* --- the float core --------------------------------------------------------------- */

#define DEPTHWISE_MAX_KW 32

/* Direct loop for one input channel per group (see the file comment): one
 * output plane, as bias plus one vectorised row update per kernel tap. On
 * AVX-512 and AVX2 CPUs float32 planes go to depthwise.c (depthwise_avx2.c)
 * instead, which keeps the sums in registers across the taps (2-3x faster,
 * the same bits).
 * Compiled for AVX-512, AVX2 and baseline x86-64 (picked at load time);
 * -ffp-contract=off keeps every clone's arithmetic identical (multiply, then
 * add: no FMA), so the clone never changes a result. */
#define DEFINE_DEPTHWISE_PLANE(T, NAME)                                                        \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void NAME(             \
        const T *restrict xp, const T *restrict wp, T bias, T *restrict yp,                    \
        const ld_window_geom *g)                                                               \
    {                                                                                          \
        /* valid output columns of each kernel column, once per plane */                       \
        int64_t lo_k[DEPTHWISE_MAX_KW], hi_k[DEPTHWISE_MAX_KW];                                \
        bool table = g->k[2] <= DEPTHWISE_MAX_KW;                                              \
        for (int64_t kw = 0; table && kw < g->k[2]; kw++)                                      \
            ld_window_valid_range(g->in[2], g->out[2], g->s[2], g->pb[2], kw * g->d[2],        \
                                  &lo_k[kw], &hi_k[kw]);                                       \
        for (int64_t i = 0; i < g->out_size; i++)                                              \
            yp[i] = bias;                                                                      \
        for (int64_t od = 0; od < g->out[0]; od++)                                             \
            for (int64_t oh = 0; oh < g->out[1]; oh++) {                                       \
                T *restrict yr = yp + (od * g->out[1] + oh) * g->out[2];                       \
                for (int64_t kd = 0; kd < g->k[0]; kd++) {                                     \
                    int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];                       \
                    if (id < 0 || id >= g->in[0])                                              \
                        continue;                                                              \
                    for (int64_t kh = 0; kh < g->k[1]; kh++) {                                 \
                        int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];                   \
                        if (ih < 0 || ih >= g->in[1])                                          \
                            continue;                                                          \
                        const T *restrict xr = xp + (id * g->in[1] + ih) * g->in[2];           \
                        const T *wr = wp + (kd * g->k[1] + kh) * g->k[2];                      \
                        for (int64_t kw = 0; kw < g->k[2]; kw++) {                             \
                            int64_t lo, hi, off = kw * g->d[2] - g->pb[2], s2 = g->s[2];       \
                            if (table)                                                         \
                                lo = lo_k[kw], hi = hi_k[kw];                                  \
                            else                                                               \
                                ld_window_valid_range(g->in[2], g->out[2], s2, g->pb[2],       \
                                                      kw * g->d[2], &lo, &hi);                 \
                            T wv = wr[kw];                                                     \
                            if (s2 == 1) {                                                     \
                                _Pragma("omp simd") for (int64_t ow = lo; ow < hi; ow++)       \
                                    yr[ow] += wv * xr[ow + off];                               \
                            } else {                                                           \
                                _Pragma("omp simd") for (int64_t ow = lo; ow < hi; ow++)       \
                                    yr[ow] += wv * xr[ow * s2 + off];                          \
                            }                                                                  \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
    }

typedef struct {
    const conv_problem *p;
    const ld_conv_round *round;
} depthwise_job;

/* round: NULL, or the backend's output rounding (kernel.h round_block),
 * called on each plane as soon as it is computed, while it is in cache.
 * Planes go through the claim pool (conv_pool.h: a helper the scheduler has
 * not run yet delays nothing), in its usual claims: one plane per claim cost
 * det's 384 planes of 20x20 a shared atomic per 0.5 µs plane, and on two
 * threads that layer ran no faster than on one (Zen 5: a 12-layer chain of
 * them, per-node medians 0.20 -> 0.135 ms). */
#define DEFINE_DEPTHWISE(T, NAME, PLANE)                                                       \
    static void NAME##_planes(void *arg, int worker, int64_t pl0, int64_t pl1)                 \
    {                                                                                          \
        (void)worker;                                                                          \
        const depthwise_job *j = arg;                                                          \
        const conv_problem *p = j->p;                                                          \
        const ld_window_geom *g = &p->g;                                                       \
        const T *x = p->x, *w = p->w, *b = p->b;                                               \
        T *y = p->y;                                                                           \
        int64_t Mg = p->M / p->group;                                                          \
        for (int64_t pl = pl0; pl < pl1; pl++) {                                               \
            int64_t n = pl / p->M, m = pl % p->M, c = m / Mg;                                  \
            PLANE(x + (n * p->C + c) * g->in_size, w + m * g->k_size, b ? b[m] : (T)0,         \
                  y + pl * g->out_size, g);                                                    \
            if (j->round)                                                                      \
                j->round->block(j->round->user, 0, (float *)(void *)(y + pl * g->out_size),    \
                                g->out_size);                                                  \
        }                                                                                      \
    }                                                                                          \
    static void NAME(const conv_problem *p, int threads, const ld_conv_round *round)           \
    {                                                                                          \
        const ld_window_geom *g = &p->g;                                                       \
        int64_t planes = p->N * p->M;                                                          \
        depthwise_job job = {.p = p, .round = round};                                          \
        bool parallel = planes * g->out_size * g->k_size > (1 << 16);                          \
        ld_conv_pool_run(parallel ? threads : 1, planes, ld_conv_pool_claim(planes, threads),  \
                         NAME##_planes, &job);                                                 \
    }

DEFINE_DEPTHWISE_PLANE(float, depthwise_plane_f32)
DEFINE_DEPTHWISE_PLANE(double, depthwise_plane_f64)
static void depthwise_plane_f32_best(const float *xp, const float *wp, float bias, float *yp,
                                     const ld_window_geom *g)
{
    if (!ld_depthwise_plane_f32_fast(xp, wp, bias, yp, g)) /* AVX-512 > AVX2 > this loop */
        depthwise_plane_f32(xp, wp, bias, yp, g);
}

DEFINE_DEPTHWISE(float, depthwise_f32, depthwise_plane_f32_best)
DEFINE_DEPTHWISE(double, depthwise_f64, depthwise_plane_f64)

/* Fills `rows` rows of n elements with bias[r] (or zero when bias is NULL). */
static void fill_rows(void *y, const void *bias, int64_t rows, int64_t n, size_t es)
{
    for (int64_t r = 0; r < rows; r++) {
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

static void gemm_es(size_t es, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                    const void *B, int64_t ldb, bool accumulate, void *C, int64_t ldc,
                    const ld_layer_numerics *numerics, ld_layer_counters *counters)
{
    if (es == 4)
        ld_sgemm(false, false, M, N, K, 1.0f, A, lda, B, ldb, accumulate ? 1.0f : 0.0f, C, ldc,
                 numerics, counters);
    else
        ld_dgemm(false, false, M, N, K, 1.0, A, lda, B, ldb, accumulate ? 1.0 : 0.0, C, ldc,
                 numerics, counters);
}

static bool is_pointwise(const ld_window_geom *g)
{
    for (int i = 0; i < LD_WINDOW_MAX_DIMS; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] != 0 || g->pe[i] != 0)
            return false;
    return true;
}

/* The backend's output rounding of a float32 output 0 written at p->y
 * (kernel.h), for kernels that round blocks themselves: false when there is
 * none. inline_fp16: only where the kernel may round float16 itself
 * (round_fp16_inline) and no float16 bits are wanted back. */
static bool output_rounding(const ld_kernel_ctx *ctx, const conv_problem *p, bool inline_fp16,
                            ld_conv_round *round)
{
    const ld_tensor *out = ctx->n_outputs > 0 ? ctx->outputs[0] : NULL;
    if (!ctx->round_block || !out || out->dtype != LD_DTYPE_FLOAT32 || out->data != p->y ||
        p->es != 4 || (inline_fp16 && (!ctx->round_fp16_inline || ctx->round_fp16_bits)))
        return false;
    round->block = ctx->round_block;
    round->user = ctx->round_user;
    return true;
}

/* The data of value v when the graph itself holds it: an initializer's, or
 * the `value` tensor attribute of the Constant node producing v (PaddleOCR
 * det keeps its weights in Constant nodes, which the executor folds: each
 * run shows the attribute's data, exec.c). NULL otherwise. */
static const void *graph_constant_data(const ld_graph *g, int v)
{
    if (v < 0 || v >= g->n_values)
        return NULL;
    const ld_value *val = &g->values[v];
    if (val->kind == LD_VALUE_INITIALIZER)
        return val->initializer ? val->initializer->data : NULL;
    if (val->kind != LD_VALUE_NODE_OUTPUT || val->producer < 0)
        return NULL;
    const ld_node *node = &g->nodes[val->producer];
    if (node->domain[0] || strcmp(node->op_type, "Constant") != 0 || node->n_outputs != 1)
        return NULL;
    for (int i = 0; i < node->n_attrs; i++)
        if (node->attrs[i].type == LD_ATTR_TENSOR && strcmp(node->attrs[i].name, "value") == 0)
            return node->attrs[i].t ? node->attrs[i].t->data : NULL;
    return NULL;
}

/* Whether the weights W this call reads keep their address and values for
 * as long as this node's kernel state lives: the graph's own constant data
 * (above; nothing writes a graph's tensors while an exec of it exists), or
 * a copy the backend says it keeps for the node (ld_kernel_ctx.kept_inputs:
 * the emulated engine's rounded weights). A user-fed input, a converted
 * copy made per run or a Constant the executor did not fold has other data
 * and does not count. */
static bool weights_constant(const ld_kernel_ctx *ctx)
{
    if (!ctx->graph || !ctx->node || ctx->node->n_inputs < 2 || ctx->n_inputs < 2 ||
        !ctx->inputs || !ctx->inputs[1] || !ctx->inputs[1]->data)
        return false;
    return (ctx->kept_inputs & 2u) ||
           graph_constant_data(ctx->graph, ctx->node->inputs[1]) == ctx->inputs[1]->data;
}

/* The packed-weight cache of group gr (NULL: pack every call): one per
 * group in the node's state, for constant weights only. */
static ld_conv_direct_pack *pack_cache(ld_kernel_ctx *ctx, const conv_problem *p, int64_t gr)
{
    ld_window_attrs *a = ctx->state;
    if (!a || !weights_constant(ctx))
        return NULL;
    if (a->n_packs < p->group) {
        ld_conv_direct_pack *n = realloc(a->packs, (size_t)p->group * sizeof *n);
        if (!n)
            return NULL;
        memset(n + a->n_packs, 0, (size_t)(p->group - a->n_packs) * sizeof *n);
        a->packs = n;
        a->n_packs = p->group;
    }
    return &a->packs[gr];
}

/* float32 on AVX-512 and AVX2 CPUs: conv_direct.c per image and group, no im2col. */
static ld_status conv_run_direct(ld_kernel_ctx *ctx, const conv_problem *p)
{
    const ld_window_geom *g = &p->g;
    int64_t Cg = p->C / p->group, Mg = p->M / p->group, Kg = Cg * g->k_size;
    size_t scratch_bytes =
        ld_conv_direct_scratch_floats(g, Cg, Mg, ctx->threads) * sizeof(float);
    float *scratch = ld_scratch_get(scratch_bytes);
    if (!scratch)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "cannot allocate %zu bytes of convolution "
                              "scratch", scratch_bytes);
    const float *x = p->x, *w = p->w, *b = p->b;
    float *y = p->y;
    /* the emulated engine's float16 rounding in the tiles' stores */
    ld_conv_round round;
    bool rounds = output_rounding(ctx, p, true, &round);
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t gr = 0; gr < p->group; gr++)
            ld_conv_direct_f32_cached(x + (n * p->C + gr * Cg) * g->in_size, w + gr * Mg * Kg,
                                      b ? b + gr * Mg : NULL,
                                      y + (n * p->M + gr * Mg) * g->out_size, Cg, Mg, g,
                                      scratch, ctx->threads, rounds ? &round : NULL,
                                      pack_cache(ctx, p, gr));
    if (rounds)
        ctx->rounded_outputs |= 1u;
    ld_scratch_put(scratch);
    return LD_OK;
}

/* Whether conv_run takes conv_run_direct for p (not depthwise, which has
 * its own loops; accumulate-half takes the GEMM path): conv_prepare_hook
 * prepares what that path reads. */
static bool runs_direct(const ld_kernel_ctx *ctx, const conv_problem *p)
{
    int64_t Cg = p->C / p->group, Mg = p->M / p->group;
    return p->es == 4 && Cg != 1 && !ld_numerics_accumulate_half(ctx->numerics) &&
           ld_conv_direct_preferred(&p->g, Cg, Mg);
}

static ld_status conv_run(ld_kernel_ctx *ctx, const conv_problem *p)
{
    const ld_window_geom *g = &p->g;
    int64_t Cg = p->C / p->group, Mg = p->M / p->group, Kg = Cg * g->k_size;
    if (p->N == 0 || p->M == 0 || g->out_size == 0)
        return LD_OK;
    ctx->flops += (int64_t)(2.0 * (double)p->N * (double)p->M * (double)g->out_size * (double)Kg);
    /* Depthwise has its own loops; accumulate-half takes the GEMM path, whose
     * order and rounding are the documented ones (backends/gemm_half.h). */
    if (Cg == 1 && !ld_numerics_accumulate_half(ctx->numerics)) {
        if (p->es == 4) {
            ld_conv_round round;
            bool rounds = output_rounding(ctx, p, false, &round);
            depthwise_f32(p, ctx->threads, rounds ? &round : NULL);
            if (rounds)
                ctx->rounded_outputs |= 1u;
        } else {
            depthwise_f64(p, ctx->threads, NULL);
        }
        return LD_OK;
    }
    if (runs_direct(ctx, p))
        return conv_run_direct(ctx, p);
    bool pointwise = is_pointwise(g);
    /* im2col in tiles of output positions (whole rows when they fit) */
    int64_t positions = g->out_size, tile = positions;
    void *col = NULL;
    if (!pointwise) {
        size_t pos_bytes = (size_t)Kg * p->es;
        tile = (int64_t)(CONV_TILE_BYTES / (pos_bytes ? pos_bytes : 1));
        if (tile >= g->out[2])
            tile -= tile % g->out[2];
        tile = tile < 256 ? 256 : tile;
        tile = tile > positions ? positions : tile;
        col = ld_scratch_get(pos_bytes * (size_t)tile);
        if (!col)
            return ld_kernel_fail(ctx, LD_ERR_NOMEM, "cannot allocate %zu bytes of im2col scratch",
                                  pos_bytes * (size_t)tile);
    }
    ld_blas_set_threads(ctx->threads);
    for (int64_t n = 0; n < p->N; n++)
        for (int64_t gr = 0; gr < p->group; gr++) {
            const char *x =
                (const char *)p->x + (size_t)((n * p->C + gr * Cg) * g->in_size) * p->es;
            const char *w = (const char *)p->w + (size_t)(gr * Mg * Kg) * p->es;
            const void *b = p->b ? (const char *)p->b + (size_t)(gr * Mg) * p->es : NULL;
            char *y = (char *)p->y + (size_t)((n * p->M + gr * Mg) * g->out_size) * p->es;
            if (b)
                fill_rows(y, b, Mg, g->out_size, p->es);
            for (int64_t p0 = 0; p0 < positions; p0 += tile) {
                int64_t p1 = p0 + tile < positions ? p0 + tile : positions, cols = p1 - p0;
                const void *B = x;
                int64_t ldb = g->out_size;
                if (!pointwise) {
                    ld_im2col(x, Cg, g, p0, p1, col, p->es, ctx->threads);
                    B = col;
                    ldb = cols;
                }
                gemm_es(p->es, Mg, cols, Kg, w, Kg, B, ldb, b != NULL,
                        y + (size_t)p0 * p->es, g->out_size, ctx->numerics, ctx->counters);
            }
        }
    ld_scratch_put(col);
    return LD_OK;
}

/* --- Conv ---------------------------------------------------------------------------- */

static ld_status require_float(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what,
                               ld_dtype want)
{
    if (t->dtype == want)
        return LD_OK;
    return ld_kernel_fail(ctx, t->dtype == LD_DTYPE_FLOAT32 || t->dtype == LD_DTYPE_FLOAT64
                                   ? LD_ERR_INPUT : LD_ERR_UNSUPPORTED,
                          "%s has dtype %s; expected %s", what, ld_dtype_name(t->dtype),
                          ld_dtype_name(want));
}

static ld_status conv_prepare(ld_kernel_ctx *ctx, conv_problem *p)
{
    memset(p, 0, sizeof *p);
    const ld_tensor *x = kin(ctx, 0), *w = kin(ctx, 1), *b = kin(ctx, 2);
    if (!x || !w)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs inputs X and W");
    if (x->dtype != LD_DTYPE_FLOAT32 && x->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    ld_status st = require_float(ctx, w, "weights W", x->dtype);
    if (st == LD_OK && b)
        st = require_float(ctx, b, "bias B", x->dtype);
    if (st != LD_OK)
        return st;
    p->x = x->data;
    p->w = w->data;
    p->b = b ? b->data : NULL;
    p->es = x->dtype == LD_DTYPE_FLOAT32 ? 4 : 8;
    return conv_geometry(ctx, x, w, b, p);
}

static ld_status conv_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    conv_problem p;
    ld_status st = conv_prepare(ctx, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    conv_output_shape(&p, &outs[0].shape);
    return LD_OK;
}

static ld_status conv_compute(ld_kernel_ctx *ctx)
{
    conv_problem p;
    ld_status st = conv_prepare(ctx, &p);
    if (st != LD_OK)
        return st;
    p.y = ctx->outputs[0]->data;
    return conv_run(ctx, &p);
}

/* Before the first run (kernel.h): the claim pool's helpers, and for a
 * float32 convolution that runs direct, the shared scratch it takes and,
 * when its weights are constant, their packed copy: ~2 ms of PaddleOCR
 * det's first run on one thread, serial, and its scratch grew in ten
 * fresh allocations there. */
static void conv_prepare_hook(ld_kernel_ctx *ctx)
{
    conv_problem p;
    if (conv_prepare(ctx, &p) != LD_OK || p.es != 4 || p.N == 0 || p.M == 0 ||
        p.g.out_size == 0 || ld_numerics_accumulate_half(ctx->numerics))
        return;
    ld_conv_pool_start(ctx->threads);
    if (!runs_direct(ctx, &p))
        return;
    const ld_window_geom *g = &p.g;
    int64_t Cg = p.C / p.group, Mg = p.M / p.group, Kg = Cg * g->k_size;
    ld_scratch_reserve(ld_conv_direct_scratch_floats(g, Cg, Mg, ctx->threads) * sizeof(float));
    for (int64_t gr = 0; gr < p.group; gr++) {
        ld_conv_direct_pack *cache = pack_cache(ctx, &p, gr);
        if (!cache || !ld_conv_direct_prepack((const float *)p.w + gr * Mg * Kg, Cg, Mg, g, cache))
            return;
    }
}

/* --- ConvInteger and QLinearConv ----------------------------------------------------------- */

static bool is_8bit(ld_dtype d)
{
    return d == LD_DTYPE_UINT8 || d == LD_DTYPE_INT8;
}

static double int8_at(const ld_tensor *t, int64_t i)
{
    return t->dtype == LD_DTYPE_UINT8 ? ((const uint8_t *)t->data)[i]
                                      : ((const int8_t *)t->data)[i];
}

/* A zero point (or scale) with one entry, or one per output channel when
 * per_channel > 0: checks the element count and dtype. */
static ld_status check_param(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what,
                             int64_t per_channel, ld_dtype want)
{
    if (!t)
        return LD_OK;
    if (want != LD_DTYPE_UNDEFINED && t->dtype != want)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s has dtype %s; expected %s", what,
                              ld_dtype_name(t->dtype), ld_dtype_name(want));
    if (t->count == 1 || (per_channel > 0 && t->count == per_channel && t->shape.rank == 1))
        return LD_OK;
    char s[64];
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s has shape %s; expected a scalar%s", what,
                          ld_shape_format(&t->shape, s, sizeof s),
                          per_channel > 0 ? " or one value per output channel" : "");
}

static double param_at(const ld_tensor *t, int64_t i)
{
    if (!t)
        return 0;
    return ld_tensor_get_double(t, t->count == 1 ? 0 : i);
}

/* x - x_zp and w - w_zp(m) as double arrays (new, malloc). */
static ld_status widen_quantized(ld_kernel_ctx *ctx, const ld_tensor *x, const ld_tensor *xzp,
                                 const ld_tensor *w, const ld_tensor *wzp, double **xd,
                                 double **wd)
{
    *xd = malloc((size_t)(x->count ? x->count : 1) * sizeof **xd);
    *wd = malloc((size_t)(w->count ? w->count : 1) * sizeof **wd);
    if (!*xd || !*wd) {
        free(*xd);
        free(*wd);
        *xd = *wd = NULL;
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    }
    double xz = param_at(xzp, 0);
    for (int64_t i = 0; i < x->count; i++)
        (*xd)[i] = int8_at(x, i) - xz;
    int64_t per_m = w->shape.dims[0] ? w->count / w->shape.dims[0] : 0;
    for (int64_t i = 0; i < w->count; i++)
        (*wd)[i] = int8_at(w, i) - param_at(wzp, per_m ? i / per_m : 0);
    return LD_OK;
}

/* Inputs of ConvInteger (x, w, x_zp, w_zp at 0, 1, 2, 3) or QLinearConv
 * (x 0, x_scale 1, x_zp 2, w 3, w_scale 4, w_zp 5, y_scale 6, y_zp 7, B 8). */
typedef struct qconv_inputs {
    const ld_tensor *x, *xzp, *w, *wzp, *xs, *ws, *ys, *yzp, *b;
} qconv_inputs;

static ld_status qconv_gather(ld_kernel_ctx *ctx, qconv_inputs *q, conv_problem *p)
{
    bool qlinear = strcmp(ctx->node->op_type, "QLinearConv") == 0;
    memset(q, 0, sizeof *q);
    memset(p, 0, sizeof *p);
    if (qlinear) {
        *q = (qconv_inputs){.x = kin(ctx, 0), .xs = kin(ctx, 1), .xzp = kin(ctx, 2),
                            .w = kin(ctx, 3), .ws = kin(ctx, 4), .wzp = kin(ctx, 5),
                            .ys = kin(ctx, 6), .yzp = kin(ctx, 7), .b = kin(ctx, 8)};
        if (!q->xs || !q->ws || !q->ys || !q->xzp || !q->wzp || !q->yzp)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs x, x_scale, x_zero_point, w, "
                                  "w_scale, w_zero_point, y_scale and y_zero_point");
    } else {
        *q = (qconv_inputs){.x = kin(ctx, 0), .w = kin(ctx, 1), .xzp = kin(ctx, 2),
                            .wzp = kin(ctx, 3)};
    }
    if (!q->x || !q->w)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs inputs x and w");
    if (!is_8bit(q->x->dtype) || !is_8bit(q->w->dtype))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "x (%s) and w (%s) must be int8 or uint8",
                              ld_dtype_name(q->x->dtype), ld_dtype_name(q->w->dtype));
    if (q->b && q->b->dtype != LD_DTYPE_INT32)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "bias B has dtype %s; expected int32",
                              ld_dtype_name(q->b->dtype));
    ld_status st = conv_geometry(ctx, q->x, q->w, q->b, p);
    int64_t M = q->w->shape.dims[0];
    if (st == LD_OK)
        st = check_param(ctx, q->xzp, "x_zero_point", 0, q->x->dtype);
    if (st == LD_OK)
        st = check_param(ctx, q->wzp, "w_zero_point", M, q->w->dtype);
    if (st == LD_OK)
        st = check_param(ctx, q->xs, "x_scale", 0, LD_DTYPE_FLOAT32);
    if (st == LD_OK)
        st = check_param(ctx, q->ws, "w_scale", M, LD_DTYPE_FLOAT32);
    if (st == LD_OK)
        st = check_param(ctx, q->ys, "y_scale", 0, LD_DTYPE_FLOAT32);
    if (st == LD_OK && q->yzp && !is_8bit(q->yzp->dtype))
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "y_zero_point has dtype %s; expected int8 or "
                            "uint8", ld_dtype_name(q->yzp->dtype));
    if (st == LD_OK)
        st = check_param(ctx, q->yzp, "y_zero_point", 0, LD_DTYPE_UNDEFINED);
    return st;
}

static ld_status qconv_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    qconv_inputs q;
    conv_problem p;
    ld_status st = qconv_gather(ctx, &q, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = q.yzp ? q.yzp->dtype : LD_DTYPE_INT32;
    conv_output_shape(&p, &outs[0].shape);
    return LD_OK;
}

/* ONNX Runtime's requantisation: the float32 product of the accumulator and
 * the float32 scale x_scale * w_scale / y_scale, rounded half to even, plus
 * the zero point, saturated. */
static void requantize(const double *acc, const qconv_inputs *q, int64_t N, int64_t M,
                       int64_t plane, ld_tensor *y)
{
    float xs = (float)param_at(q->xs, 0), ys = (float)param_at(q->ys, 0);
    double zp = param_at(q->yzp, 0);
    double lo = y->dtype == LD_DTYPE_UINT8 ? 0 : -128, hi = y->dtype == LD_DTYPE_UINT8 ? 255 : 127;
    for (int64_t n = 0; n < N; n++)
        for (int64_t m = 0; m < M; m++) {
            float scale = xs * (float)param_at(q->ws, m) / ys;
            int64_t base = (n * M + m) * plane;
            for (int64_t i = 0; i < plane; i++) {
                double v = nearbyintf((float)acc[base + i] * scale) + zp;
                v = v < lo ? lo : v > hi ? hi : v;
                if (y->dtype == LD_DTYPE_UINT8)
                    ((uint8_t *)y->data)[base + i] = (uint8_t)v;
                else
                    ((int8_t *)y->data)[base + i] = (int8_t)v;
            }
        }
}

static ld_status qconv_compute(ld_kernel_ctx *ctx)
{
    qconv_inputs q;
    conv_problem p;
    double *xd = NULL, *wd = NULL, *bd = NULL, *yd = NULL;
    ld_tensor *y = ctx->outputs[0];
    ld_status st = qconv_gather(ctx, &q, &p);
    if (st == LD_OK)
        st = widen_quantized(ctx, q.x, q.xzp, q.w, q.wzp, &xd, &wd);
    if (st != LD_OK)
        goto out;
    yd = malloc((size_t)(y->count ? y->count : 1) * sizeof *yd);
    bd = q.b ? malloc((size_t)(q.b->count ? q.b->count : 1) * sizeof *bd) : NULL;
    if (!yd || (q.b && !bd)) {
        st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; q.b && i < q.b->count; i++)
        bd[i] = ((const int32_t *)q.b->data)[i];
    p.x = xd;
    p.w = wd;
    p.b = bd;
    p.y = yd;
    p.es = 8;
    st = conv_run(ctx, &p);
    if (st != LD_OK)
        goto out;
    if (y->dtype == LD_DTYPE_INT32) {
        /* Exact integers; wrap like int32 arithmetic would on overflow. */
        for (int64_t i = 0; i < y->count; i++)
            ((int32_t *)y->data)[i] = (int32_t)(uint32_t)(int64_t)yd[i];
    } else {
        requantize(yd, &q, p.N, p.M, p.g.out_size, y);
    }
out:
    free(xd);
    free(wd);
    free(bd);
    free(yd);
    return st;
}

static const ld_kernel conv_kernels[] = {
    {"", "Conv", 1, LD_KERNEL_WIDEN_HALF, ld_window_kernel_init, conv_infer, conv_compute,
     ld_window_kernel_fini, conv_prepare_hook},
    {"", "Conv", 11, LD_KERNEL_WIDEN_HALF, ld_window_kernel_init, conv_infer, conv_compute,
     ld_window_kernel_fini, conv_prepare_hook},
    {"", "ConvInteger", 10, 0, ld_window_kernel_init, qconv_infer, qconv_compute,
     ld_window_kernel_fini, NULL},
    {"", "QLinearConv", 10, 0, ld_window_kernel_init, qconv_infer, qconv_compute,
     ld_window_kernel_fini, NULL},
};

LD_KERNEL_FAMILY(conv);
