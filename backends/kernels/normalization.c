/* layerdiff — normalizations: BatchNormalization (1, 6, 7, 9, 14, 15),
 * InstanceNormalization (1, 6), LayerNormalization (17), LRN (1, 13),
 * LpNormalization (1) and MeanVarianceNormalization (9, 13).
 *
 * Numerics: these ops are the ground truth for fp16 error analysis, so
 * statistics (means, variances, norms, window sums) are computed in double
 * with two passes (mean first, then the squared deviations: no
 * E[x^2] - E[x]^2 cancellation), and every output element is computed in
 * double from its float input and rounded once: y = (x - mean) * a + b with
 * a = scale / sqrt(var + epsilon) per channel. float64 works in double.
 *
 * float32 in a layer of reduced precision (the emulated engine's fp16, bf16,
 * tf32 layers) follows the engine instead: float arithmetic, statistics with
 * an ld_accum (backends/accumulate.h: float accumulators in index order, or
 * every partial sum rounded with accumulate-half) and, when accumulating in
 * half, every intermediate held in the layer precision (V below). The
 * formulas are at each *_reduced function. BatchNormalization in inference
 * accumulates nothing and keeps the reference arithmetic; LRN, LpNormalization,
 * InstanceNormalization, LayerNormalization and MeanVarianceNormalization
 * have reduced paths.
 *
 * LRN, LpNormalization and MeanVarianceNormalization are in
 * normalization_lrn_lp_mvn.c; the helpers both files use (and V) in
 * normalization_internal.h. This file has the kernel table for all of them. */
#include <math.h>

#include "backends/accumulate.h"
#include "backends/kernels/conv_pool.h"
#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"
#include "backends/kernels/reduce_util.h"
#include "backends/kernels/normalization_internal.h"

#define NORM_PARALLEL_WORK ((int64_t)1 << 15)

/* Contiguous-row primitives for one element type. */
#define NORM_DEFINE(SUF, T)                                                                \
    static void stats_##SUF(const T *x, int64_t n, double *mean, double *var)              \
    {                                                                                      \
        double s = 0, q = 0;                                                               \
        for (int64_t i = 0; i < n; i++)                                                    \
            s += x[i];                                                                     \
        double m = n ? s / (double)n : 0.0;                                                \
        for (int64_t i = 0; i < n; i++)                                                    \
            q += ((double)x[i] - m) * ((double)x[i] - m);                                  \
        *mean = m;                                                                         \
        *var = n ? q / (double)n : 0.0;                                                    \
    }                                                                                      \
    /* y = (x - mean) * a + b; y may be x (the executor runs BatchNormalization  \
     * in place). The clones vectorise the same double operations: same bits. */          \
    __attribute__((target_clones("avx512f", "avx2", "default"))) static void affine_##SUF( \
        const T *x, T *y, int64_t n, double mean, double a, double b)                      \
    {                                                                                      \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++)                                \
            y[i] = (T)(((double)x[i] - mean) * a + b);                                     \
    }                                                                                      \
    /* y = (x - mean) * inv * scale[i] + bias[i] */                                        \
    static void affine_vec_##SUF(const T *x, T *y, int64_t n, double mean, double inv,     \
                                 const double *scale, const double *bias)                  \
    {                                                                                      \
        for (int64_t i = 0; i < n; i++)                                                    \
            y[i] = (T)(((double)x[i] - mean) * inv * scale[i] + bias[i]);                  \
    }

NORM_DEFINE(f32, float)
NORM_DEFINE(f64, double)

/* --- reduced precision (float32 data) --------------------------------------------------- */

/* mean = V(sum x / n), var = V(sum d^2 / n) with d = V(x - mean): two passes,
 * each an ld_accum sum in index order (the squares as multiply-add steps). */
static void stats_reduced(const ld_accum *ac, const float *x, int64_t n, float *mean,
                          float *var)
{
    float s = 0.0f, q = 0.0f;
    for (int64_t i = 0; i < n; i++)
        s = ld_accum_add(ac, s, x[i]);
    float m = V(ac, n ? s / (float)n : 0.0f);
    for (int64_t i = 0; i < n; i++) {
        float d = V(ac, x[i] - m);
        q = ld_accum_fma(ac, q, d, d);
    }
    *mean = m;
    *var = V(ac, n ? q / (float)n : 0.0f);
}

/* V(1 / V(sqrt(V(var + epsilon)))) */
static float inv_std_reduced(const ld_accum *ac, float var, float epsilon)
{
    return V(ac, 1.0f / V(ac, sqrtf(V(ac, var + epsilon))));
}

static void row_stats(const ld_tensor *x, int64_t off, int64_t n, double *mean, double *var)
{
    if (is_f64(x))
        stats_f64((const double *)x->data + off, n, mean, var);
    else
        stats_f32((const float *)x->data + off, n, mean, var);
}

static void row_affine(const ld_tensor *x, ld_tensor *y, int64_t off, int64_t n, double mean,
                       double a, double b)
{
    if (is_f64(x))
        affine_f64((const double *)x->data + off, (double *)y->data + off, n, mean, a, b);
    else
        affine_f32((const float *)x->data + off, (float *)y->data + off, n, mean, a, b);
}

static ld_status check_count(ld_kernel_ctx *ctx, int i, const char *name, int64_t want)
{
    const ld_tensor *t = ctx->inputs[i];
    if (t->count == want)
        return LD_OK;
    char buf[128];
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s has shape %s; expected %lld elements", name,
                          ld_shape_format(&t->shape, buf, sizeof buf), (long long)want);
}

static void norm_fini(void *state)
{
    free(state);
}

/* --- BatchNormalization ----------------------------------------------------------------- */

typedef struct bn_state {
    float epsilon, momentum;
    bool training;      /* 14+: training_mode = 1 */
} bn_state;

static ld_status bn_init(ld_kernel_ctx *ctx)
{
    bn_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    int64_t training = 0;
    ld_status st = ld_node_attr_float(ctx->node, "epsilon", 1e-5f, &s->epsilon, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "momentum", 0.9f, &s->momentum, ctx->err);
    if (st == LD_OK && ctx->node->opset >= 14)
        st = ld_node_attr_int(ctx->node, "training_mode", 0, &training, ctx->err);
    if (st != LD_OK)
        return st;
    s->training = training != 0;
    bool extra_outputs = false;
    for (int i = 1; i < ctx->node->n_outputs; i++)
        extra_outputs |= ctx->node->outputs[i] >= 0;
    if (ctx->node->opset < 14 && extra_outputs)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "training mode (mean, var, saved_mean, "
                              "saved_var outputs) is not supported before opset 14");
    if (!s->training && extra_outputs)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "running_mean/running_var outputs require "
                              "training_mode = 1");
    return LD_OK;
}

static ld_status bn_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = require_float_inputs(ctx, 5);
    if (st != LD_OK)
        return st;
    int64_t N, C, S;
    const ld_tensor *x = ctx->inputs[0];
    bn_layout(x, &N, &C, &S);
    /* Parameters are per channel (C), or per activation (C x D1..Dn) for the
     * old spatial = 0 mode (opsets < 9). */
    int64_t want = ctx->inputs[1]->count == C * S && ctx->node->opset < 9 ? C * S : C;
    static const char *const names[] = {"", "scale", "B", "mean", "var"};
    for (int i = 1; i < 5 && st == LD_OK; i++)
        st = check_count(ctx, i, names[i], want);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    for (int i = 1; i < 3 && i < ctx->n_outputs; i++) {
        outs[i].dtype = ctx->inputs[2 + i]->dtype;
        outs[i].shape = ctx->inputs[2 + i]->shape;
    }
    return LD_OK;
}

/* Per-channel mean and population variance over N and the spatial dims. */
static void bn_batch_stats(const ld_tensor *x, int64_t N, int64_t C, int64_t S, double *mean,
                           double *var)
{
    for (int64_t c = 0; c < C; c++) {
        double s = 0, q = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++)
                s += at(x, (n * C + c) * S + i);
        double m = N * S > 0 ? s / (double)(N * S) : 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i = 0; i < S; i++) {
                double d = at(x, (n * C + c) * S + i) - m;
                q += d * d;
            }
        mean[c] = m;
        var[c] = N * S > 0 ? q / (double)(N * S) : 0.0;
    }
}

/* Output rounding fused into the kernel (kernel.h, round_block): each
 * channel plane is rounded BN_ROUND_BLOCK elements at a time right after its
 * final values are written, while they are in L1, instead of in a second pass
 * over the whole output. Only for per-channel parameters with planes long
 * enough that the hook's per-call cost does not matter. */
#define BN_ROUND_BLOCK 4096
#define BN_ROUND_MIN_PLANE 256
static bool bn_rounds_output(const ld_kernel_ctx *ctx, const ld_tensor *y, bool per_channel,
                             int64_t S)
{
    return ctx->round_block && ctx->n_outputs > 0 && ctx->outputs[0] == y &&
           y->dtype == LD_DTYPE_FLOAT32 && per_channel && S >= BN_ROUND_MIN_PLANE;
}

/* row_affine over [off, off + n) of float32 x and y, each block handed to
 * round_block once its values are final. */
static void bn_affine_rounded(const ld_kernel_ctx *ctx, const ld_tensor *x, ld_tensor *y,
                              int64_t off, int64_t n, double mean, double a, double b)
{
    for (int64_t lo = 0; lo < n; lo += BN_ROUND_BLOCK) {
        int64_t m = n - lo < BN_ROUND_BLOCK ? n - lo : BN_ROUND_BLOCK;
        row_affine(x, y, off + lo, m, mean, a, b);
        ctx->round_block(ctx->round_user, 0, (float *)y->data + off + lo, m);
    }
}

/* One BatchNormalization for ld_conv_pool_run: items are the (n, c) blocks
 * of S elements, each computed by one thread (same bits on any count). */
typedef struct bn_job {
    const ld_kernel_ctx *ctx;
    const bn_state *s;
    const ld_tensor *x;
    ld_tensor *y;
    const ld_tensor *scale, *bias;
    const double *mean, *var;
    int64_t C, S;
    bool per_channel, round;
} bn_job;

/* Blocks [nc0, nc1) (a claim of ld_conv_pool_run). */
static void bn_blocks(void *arg, int worker, int64_t nc0, int64_t nc1)
{
    (void)worker;
    const bn_job *j = arg;
    const int64_t C = j->C, S = j->S;
    for (int64_t nc = nc0; nc < nc1; nc++) {
        int64_t c = nc % C;
        int64_t len = j->per_channel ? S : 1, steps = j->per_channel ? 1 : S;
        for (int64_t k = 0; k < steps; k++) {
            int64_t p = j->per_channel ? c : c * S + k;
            double a = at(j->scale, p) / sqrt(j->var[p] + (double)j->s->epsilon);
            if (j->round)
                bn_affine_rounded(j->ctx, j->x, j->y, nc * S, len, j->mean[p], a,
                                  at(j->bias, p));
            else
                row_affine(j->x, j->y, nc * S + k, len, j->mean[p], a, at(j->bias, p));
        }
    }
}

static ld_status bn_compute(ld_kernel_ctx *ctx)
{
    const bn_state *s = ctx->state;
    const ld_tensor *x = ctx->inputs[0], *scale = ctx->inputs[1], *bias = ctx->inputs[2];
    const ld_tensor *in_mean = ctx->inputs[3], *in_var = ctx->inputs[4];
    int64_t N, C, S;
    bn_layout(x, &N, &C, &S);
    int64_t P = scale->count; /* C, or C * S per activation */
    double *mean = malloc((size_t)(P ? P : 1) * 2 * sizeof *mean);
    if (!mean)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    double *var = mean + P;
    if (s->training) {
        bn_batch_stats(x, N, C, S, mean, var);
        for (int out = 1; out <= 2; out++) {
            ld_tensor *r = ld_kout(ctx, out);
            const ld_tensor *prev = out == 1 ? in_mean : in_var;
            for (int64_t c = 0; r && c < C; c++)
                put(r, c, at(prev, c) * s->momentum +
                              (out == 1 ? mean : var)[c] * (1.0 - (double)s->momentum));
        }
    } else {
        for (int64_t p = 0; p < P; p++) {
            mean[p] = at(in_mean, p);
            var[p] = at(in_var, p);
        }
    }
    /* (n, c) blocks of S elements; per-activation parameters index c * S + i. */
    ld_tensor *y = ctx->outputs[0];
    bool per_channel = P == C;
    bool round = bn_rounds_output(ctx, y, per_channel, S);
    bn_job job = {.ctx = ctx, .s = s, .x = x, .y = y, .scale = scale, .bias = bias,
                  .mean = mean, .var = var, .C = C, .S = S, .per_channel = per_channel,
                  .round = round};
    /* on the convolutions' claim pool, as the fused chains (exec_fuse.c):
       one helper thread for the whole run instead of waking OpenMP's */
    int nt = x->count >= NORM_PARALLEL_WORK ? ctx->threads : 1;
    ld_conv_pool_run(nt, N * C, ld_conv_pool_claim(N * C, nt), bn_blocks, &job);
    if (round)
        ctx->rounded_outputs |= 1u;
    free(mean);
    return LD_OK;
}

/* --- InstanceNormalization ---------------------------------------------------------------- */

static ld_status in_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = require_float_inputs(ctx, 3);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    if (x->shape.rank < 2)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input must be (N, C, D1, ...), got rank %d",
                              x->shape.rank);
    st = check_count(ctx, 1, "scale", x->shape.dims[1]);
    if (st == LD_OK)
        st = check_count(ctx, 2, "B", x->shape.dims[1]);
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    return st;
}

/* a = V(scale * inv_std), y = V(V(x - mean) * a) + b */
static void in_row_reduced(const ld_accum *ac, const float *x, float *y, int64_t n,
                           float epsilon, float scale, float b)
{
    float mean, var;
    stats_reduced(ac, x, n, &mean, &var);
    float a = V(ac, scale * inv_std_reduced(ac, var, epsilon));
    for (int64_t i = 0; i < n; i++)
        y[i] = V(ac, V(ac, x[i] - mean) * a) + b;
}

static ld_status in_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0], *scale = ctx->inputs[1], *bias = ctx->inputs[2];
    ld_tensor *y = ctx->outputs[0];
    float epsilon;
    ld_status st = ld_node_attr_float(ctx->node, "epsilon", 1e-5f, &epsilon, ctx->err);
    if (st != LD_OK)
        return st;
    int64_t N, C, S;
    bn_layout(x, &N, &C, &S);
    ld_accum ac = accum_of(ctx, x);
    int nt = x->count >= NORM_PARALLEL_WORK ? ctx->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t nc = 0; nc < N * C; nc++) {
        int64_t c = nc % C;
        if (ac.reduced) {
            in_row_reduced(&ac, (const float *)x->data + nc * S, (float *)y->data + nc * S, S,
                           epsilon, (float)at(scale, c), (float)at(bias, c));
            continue;
        }
        double mean, var;
        row_stats(x, nc * S, S, &mean, &var);
        double a = at(scale, c) / sqrt(var + (double)epsilon);
        row_affine(x, y, nc * S, S, mean, a, at(bias, c));
    }
    return LD_OK;
}

/* --- LayerNormalization ------------------------------------------------------------------- */

/* Expands a parameter (Scale or B) that broadcasts unidirectionally to the
 * normalized shape dims[axis:] into a dense double vector of `inner`. */
static ld_status ln_expand(ld_kernel_ctx *ctx, const ld_tensor *t, const char *name,
                           const ld_shape *norm, int64_t inner, double *out)
{
    const ld_shape *ps = &t->shape;
    bool ok = ps->rank <= norm->rank;
    for (int d = 0; ok && d < ps->rank; d++) {
        int64_t pd = ps->dims[d], nd = norm->dims[norm->rank - ps->rank + d];
        ok = pd == nd || pd == 1;
    }
    if (!ok) {
        char a[128], b[128];
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s of shape %s does not broadcast to the "
                              "normalized shape %s", name, ld_shape_format(ps, a, sizeof a),
                              ld_shape_format(norm, b, sizeof b));
    }
    for (int64_t i = 0; i < inner; i++) {
        int64_t rest = i, src = 0, stride = 1;
        for (int d = norm->rank - 1, pd = ps->rank - 1; pd >= 0; d--, pd--) {
            int64_t idx = rest % norm->dims[d];
            rest /= norm->dims[d];
            if (ps->dims[pd] != 1)
                src += idx * stride;
            stride *= ps->dims[pd];
        }
        out[i] = at(t, src);
    }
    return LD_OK;
}

static ld_status ln_layout(ld_kernel_ctx *ctx, int *axis, int64_t *outer, int64_t *inner)
{
    const ld_tensor *x = ctx->inputs[0];
    int64_t a, stash;
    ld_status st = ld_node_attr_int(ctx->node, "axis", -1, &a, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "stash_type", 1, &stash, ctx->err);
    if (st == LD_OK && stash != 1)
        st = ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "stash_type %lld is not supported (only "
                            "1, float)", (long long)stash);
    if (st == LD_OK)
        st = ld_normalize_axis(ctx, a, x->shape.rank, axis);
    if (st != LD_OK)
        return st;
    *outer = *inner = 1;
    for (int d = 0; d < x->shape.rank; d++)
        *(d < *axis ? outer : inner) *= x->shape.dims[d];
    return LD_OK;
}

static ld_status ln_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = require_float_inputs(ctx, 2);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    if (x->shape.rank == 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input must have rank >= 1");
    int axis = 0;
    int64_t outer, inner;
    st = ln_layout(ctx, &axis, &outer, &inner);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    for (int i = 1; i < 3 && i < ctx->n_outputs; i++) {
        outs[i].dtype = LD_DTYPE_FLOAT32; /* stash_type */
        outs[i].shape = x->shape;
        for (int d = axis; d < x->shape.rank; d++)
            outs[i].shape.dims[d] = 1;
    }
    return LD_OK;
}

/* y = V(V(V(x - mean) * inv_std) * scale) + b; Mean and InvStdDev outputs as held. */
static void ln_row_reduced(const ld_accum *ac, const float *x, float *y, int64_t n,
                           float epsilon, const double *scale, const double *b,
                           float *mean_out, float *inv_out)
{
    float mean, var;
    stats_reduced(ac, x, n, &mean, &var);
    float inv = inv_std_reduced(ac, var, epsilon);
    for (int64_t i = 0; i < n; i++)
        y[i] = V(ac, V(ac, V(ac, x[i] - mean) * inv) * (float)scale[i]) + (float)b[i];
    if (mean_out)
        *mean_out = mean;
    if (inv_out)
        *inv_out = inv;
}

static ld_status ln_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0], *bias = ld_kin(ctx, 2);
    ld_tensor *y = ctx->outputs[0], *mean_out = ld_kout(ctx, 1), *inv_out = ld_kout(ctx, 2);
    int axis = 0;
    int64_t outer, inner;
    float epsilon;
    ld_status st = ln_layout(ctx, &axis, &outer, &inner);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "epsilon", 1e-5f, &epsilon, ctx->err);
    if (st != LD_OK)
        return st;
    double *scale = calloc((size_t)(inner ? inner : 1) * 2, sizeof *scale);
    if (!scale)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    double *b = scale + inner;
    ld_shape norm = {.rank = x->shape.rank - axis};
    memcpy(norm.dims, x->shape.dims + axis, (size_t)norm.rank * sizeof norm.dims[0]);
    st = ln_expand(ctx, ctx->inputs[1], "Scale", &norm, inner, scale);
    if (st == LD_OK && bias)
        st = ln_expand(ctx, bias, "B", &norm, inner, b);
    if (st != LD_OK)
        goto out;
    ld_accum ac = accum_of(ctx, x);
    int nt = x->count >= NORM_PARALLEL_WORK ? ctx->threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        if (ac.reduced) {
            ln_row_reduced(&ac, (const float *)x->data + o * inner,
                           (float *)y->data + o * inner, inner, epsilon, scale, b,
                           mean_out ? (float *)mean_out->data + o : NULL,
                           inv_out ? (float *)inv_out->data + o : NULL);
            continue;
        }
        double mean, var;
        row_stats(x, o * inner, inner, &mean, &var);
        double inv = 1.0 / sqrt(var + (double)epsilon);
        if (is_f64(x))
            affine_vec_f64((const double *)x->data + o * inner, (double *)y->data + o * inner,
                           inner, mean, inv, scale, b);
        else
            affine_vec_f32((const float *)x->data + o * inner, (float *)y->data + o * inner,
                           inner, mean, inv, scale, b);
        if (mean_out)
            ((float *)mean_out->data)[o] = (float)mean;
        if (inv_out)
            ((float *)inv_out->data)[o] = (float)inv;
    }
out:
    free(scale);
    return st;
}

#define NORM_ROW(name, since, init, infer, compute, fini) \
    {"", name, since, LD_KERNEL_WIDEN_HALF, init, infer, compute, fini, NULL}

static const ld_kernel normalization_kernels[] = {
    NORM_ROW("BatchNormalization", 1, bn_init, bn_infer, bn_compute, norm_fini),
    NORM_ROW("BatchNormalization", 14, bn_init, bn_infer, bn_compute, norm_fini),
    NORM_ROW("InstanceNormalization", 1, NULL, in_infer, in_compute, NULL),
    NORM_ROW("LRN", 1, NULL, ld_lrn_infer, ld_lrn_compute, NULL),
    NORM_ROW("LayerNormalization", 17, NULL, ln_infer, ln_compute, NULL),
    NORM_ROW("LpNormalization", 1, NULL, ld_lp_infer, ld_lp_compute, NULL),
    NORM_ROW("MeanVarianceNormalization", 9, NULL, ld_mvn_infer, ld_mvn_compute, NULL),
};

LD_KERNEL_FAMILY(normalization);
