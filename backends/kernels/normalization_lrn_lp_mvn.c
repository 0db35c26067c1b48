/* layerdiff — LRN (1, 13), LpNormalization (1) and
 * MeanVarianceNormalization (9, 13); the kernel table and the numerics
 * (reference in double, reduced paths at each *_reduced function) are in
 * normalization.c. */
#include <math.h>

#include "backends/accumulate.h"
#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"
#include "backends/kernels/normalization_internal.h"
#include "backends/kernels/reduce_util.h"

/* --- LRN ----------------------------------------------------------------------------------- */

ld_status ld_lrn_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = require_float_inputs(ctx, 1);
    if (st != LD_OK)
        return st;
    int64_t size;
    st = ld_node_attr_int(ctx->node, "size", 0, &size, ctx->err);
    if (st != LD_OK)
        return st;
    if (size <= 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'size' must be given and positive");
    if (ctx->inputs[0]->shape.rank < 2)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input must be (N, C, D1, ...), got rank %d",
                              ctx->inputs[0]->shape.rank);
    return ld_infer_like_input0(ctx, outs);
}

/* sq = sum over the window, in channel order, of x^2 (multiply-add steps);
 * y = x / pow(V(bias + V(k * sq)), beta). sq: scratch of S floats. */
static void lrn_reduced(const ld_accum *ac, const float *x, float *y, int64_t N, int64_t C,
                        int64_t S, int64_t before, int64_t after, float k, float bias,
                        float beta, float *sq)
{
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            int64_t lo = c - before < 0 ? 0 : c - before;
            int64_t hi = c + after > C - 1 ? C - 1 : c + after;
            for (int64_t s = 0; s < S; s++)
                sq[s] = 0.0f;
            for (int64_t i = lo; i <= hi; i++)
                for (int64_t s = 0; s < S; s++) {
                    float v = x[(n * C + i) * S + s];
                    sq[s] = ld_accum_fma(ac, sq[s], v, v);
                }
            for (int64_t s = 0; s < S; s++) {
                int64_t e = (n * C + c) * S + s;
                y[e] = x[e] / powf(V(ac, bias + V(ac, k * sq[s])), beta);
            }
        }
}

/* y[n, c, s] = x / (bias + alpha / size * sum_{i in window(c)} x[n, i, s]^2)^beta */
ld_status ld_lrn_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    int64_t size;
    float alpha, beta, bias;
    ld_status st = ld_node_attr_int(ctx->node, "size", 0, &size, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "alpha", 1e-4f, &alpha, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "beta", 0.75f, &beta, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "bias", 1.0f, &bias, ctx->err);
    if (st != LD_OK)
        return st;
    int64_t N, C, S;
    bn_layout(x, &N, &C, &S);
    double *sq = malloc((size_t)(S ? S : 1) * sizeof *sq);
    if (!sq)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    int64_t before = (size - 1) / 2, after = size / 2; /* floor and ceil of (size-1)/2 */
    double k = (double)alpha / (double)size;
    ld_accum ac = accum_of(ctx, x);
    if (ac.reduced) {
        lrn_reduced(&ac, x->data, y->data, N, C, S, before, after, (float)k, bias, beta,
                    (float *)sq);
        free(sq);
        return LD_OK;
    }
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = 0; c < C; c++) {
            int64_t lo = c - before < 0 ? 0 : c - before;
            int64_t hi = c + after > C - 1 ? C - 1 : c + after;
            memset(sq, 0, (size_t)S * sizeof *sq);
            for (int64_t i = lo; i <= hi; i++)
                for (int64_t s = 0; s < S; s++) {
                    double v = at(x, (n * C + i) * S + s);
                    sq[s] += v * v;
                }
            for (int64_t s = 0; s < S; s++) {
                int64_t e = (n * C + c) * S + s;
                put(y, e, at(x, e) / pow((double)bias + k * sq[s], (double)beta));
            }
        }
    }
    free(sq);
    return LD_OK;
}

/* --- LpNormalization ----------------------------------------------------------------------- */

static ld_status lp_params(ld_kernel_ctx *ctx, int64_t *p, int64_t *outer, int64_t *n,
                           int64_t *inner)
{
    const ld_shape *sh = &ctx->inputs[0]->shape;
    int64_t a;
    int axis = 0;
    ld_status st = ld_node_attr_int(ctx->node, "p", 2, p, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "axis", -1, &a, ctx->err);
    if (st != LD_OK)
        return st;
    if (*p != 1 && *p != 2)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "p must be 1 or 2, got %lld", (long long)*p);
    if (sh->rank == 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input must have rank >= 1");
    st = ld_normalize_axis(ctx, a, sh->rank, &axis);
    if (st != LD_OK)
        return st;
    *outer = *n = *inner = 1;
    for (int d = 0; d < sh->rank; d++)
        *(d < axis ? outer : d == axis ? n : inner) *= sh->dims[d];
    return LD_OK;
}

ld_status ld_lp_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = require_float_inputs(ctx, 1);
    int64_t p, outer, n, inner;
    if (st == LD_OK)
        st = lp_params(ctx, &p, &outer, &n, &inner);
    return st != LD_OK ? st : ld_infer_like_input0(ctx, outs);
}

/* norm = sum |x| (p = 1) or V(sqrt(sum x^2)) (p = 2, multiply-add steps),
 * in axis order; y = x / norm (0 for a zero norm). */
static void lp_reduced(const ld_accum *ac, const float *x, float *y, int64_t p, int64_t outer,
                       int64_t n, int64_t inner)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xv = x + o * n * inner + i;
            float *yv = y + o * n * inner + i;
            float norm = 0.0f;
            for (int64_t k = 0; k < n; k++)
                norm = p == 1 ? ld_accum_add(ac, norm, fabsf(xv[k * inner]))
                              : ld_accum_fma(ac, norm, xv[k * inner], xv[k * inner]);
            if (p == 2)
                norm = V(ac, sqrtf(norm));
            for (int64_t k = 0; k < n; k++)
                yv[k * inner] = norm == 0 ? 0.0f : xv[k * inner] / norm;
        }
}

/* y = x / ||x||_p along the axis; an all-zero vector stays zero. */
ld_status ld_lp_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    int64_t p, outer, n, inner;
    ld_status st = lp_params(ctx, &p, &outer, &n, &inner);
    if (st != LD_OK)
        return st;
    ld_accum ac = accum_of(ctx, x);
    if (ac.reduced) {
        lp_reduced(&ac, x->data, y->data, p, outer, n, inner);
        return LD_OK;
    }
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double norm = 0;
            for (int64_t k = 0; k < n; k++) {
                double v = at(x, base + k * inner);
                norm += p == 1 ? fabs(v) : v * v;
            }
            if (p == 2)
                norm = sqrt(norm);
            for (int64_t k = 0; k < n; k++)
                put(y, base + k * inner, norm == 0 ? 0.0 : at(x, base + k * inner) / norm);
        }
    }
    return LD_OK;
}

/* --- MeanVarianceNormalization ------------------------------------------------------------- */

/* y = (x - mean) / (sqrt(var) + 1e-9) over `axes` (default 0, 2, 3), as the
 * ONNX function body (with the variance from two passes). */
static ld_status mvn_plan(ld_kernel_ctx *ctx, ld_reduce_plan *plan)
{
    static const int64_t default_axes[] = {0, 2, 3};
    const ld_shape *sh = &ctx->inputs[0]->shape;
    const int64_t *axes;
    size_t n;
    ld_status st = ld_node_attr_ints(ctx->node, "axes", &axes, &n, ctx->err);
    if (st != LD_OK)
        return st;
    if (!ld_node_attr(ctx->node, "axes")) {
        axes = default_axes;
        n = 3;
    }
    bool reduced[LD_MAX_RANK] = {false};
    for (size_t i = 0; i < n; i++) {
        int a = 0;
        st = ld_normalize_axis(ctx, axes[i], sh->rank, &a);
        if (st != LD_OK)
            return st;
        reduced[a] = true;
    }
    ld_reduce_plan_init(plan, sh, reduced);
    return LD_OK;
}

ld_status ld_mvn_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_reduce_plan plan;
    ld_status st = require_float_inputs(ctx, 1);
    if (st == LD_OK)
        st = mvn_plan(ctx, &plan);
    return st != LD_OK ? st : ld_infer_like_input0(ctx, outs);
}

/* pass 0: sums -> means; pass 1: squared deviations -> scale; pass 2: output. */
static void mvn_pass(int pass, const ld_reduce_plan *plan, const ld_tensor *x, ld_tensor *y,
                     double *mean, double *scale)
{
    ld_reduce_rows it;
    ld_reduce_rows_init(&it, plan);
    while (ld_reduce_rows_next(&it)) {
        for (int64_t i = 0; i < it.row_len; i++) {
            int64_t o = it.out_off + (it.row_reduced ? 0 : i), e = it.in_off + i;
            double v = at(x, e);
            if (pass == 0)
                mean[o] += v;
            else if (pass == 1)
                scale[o] += (v - mean[o]) * (v - mean[o]);
            else
                put(y, e, (v - mean[o]) * scale[o]);
        }
    }
}

/* The three passes of mvn_pass in float: mean = V(sum x / g), d = V(x - mean),
 * scale = V(1 / V(V(sqrt(V(sum d^2 / g))) + 1e-9)), y = d * scale. */
static void mvn_pass_reduced(const ld_accum *ac, int pass, const ld_reduce_plan *plan,
                             const float *x, float *y, float *mean, float *scale)
{
    ld_reduce_rows it;
    ld_reduce_rows_init(&it, plan);
    while (ld_reduce_rows_next(&it)) {
        for (int64_t i = 0; i < it.row_len; i++) {
            int64_t o = it.out_off + (it.row_reduced ? 0 : i), e = it.in_off + i;
            if (pass == 0) {
                mean[o] = ld_accum_add(ac, mean[o], x[e]);
                continue;
            }
            float d = V(ac, x[e] - mean[o]);
            if (pass == 1)
                scale[o] = ld_accum_fma(ac, scale[o], d, d);
            else
                y[e] = d * scale[o];
        }
    }
}

static void mvn_reduced(const ld_accum *ac, const ld_reduce_plan *plan, const float *x,
                        float *y, float *mean)
{
    float *scale = mean + plan->out_count, g = (float)plan->group;
    mvn_pass_reduced(ac, 0, plan, x, NULL, mean, scale);
    for (int64_t o = 0; o < plan->out_count; o++)
        mean[o] = V(ac, mean[o] / g);
    mvn_pass_reduced(ac, 1, plan, x, NULL, mean, scale);
    for (int64_t o = 0; o < plan->out_count; o++)
        scale[o] = V(ac, 1.0f / V(ac, V(ac, sqrtf(V(ac, scale[o] / g))) + 1e-9f));
    mvn_pass_reduced(ac, 2, plan, x, y, mean, scale);
}

ld_status ld_mvn_compute(ld_kernel_ctx *ctx)
{
    ld_reduce_plan plan;
    ld_status st = mvn_plan(ctx, &plan);
    if (st != LD_OK || plan.in_count == 0)
        return st;
    double *mean = calloc((size_t)plan.out_count * 2, sizeof *mean);
    if (!mean)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ld_accum ac = accum_of(ctx, ctx->inputs[0]);
    if (ac.reduced) { /* 2 * out_count floats of zero fit in the zeroed doubles */
        mvn_reduced(&ac, &plan, ctx->inputs[0]->data, ctx->outputs[0]->data, (float *)mean);
        free(mean);
        return LD_OK;
    }
    double *scale = mean + plan.out_count, g = (double)plan.group;
    mvn_pass(0, &plan, ctx->inputs[0], NULL, mean, scale);
    for (int64_t o = 0; o < plan.out_count; o++)
        mean[o] /= g;
    mvn_pass(1, &plan, ctx->inputs[0], NULL, mean, scale);
    for (int64_t o = 0; o < plan.out_count; o++)
        scale[o] = 1.0 / (sqrt(scale[o] / g) + 1e-9);
    mvn_pass(2, &plan, ctx->inputs[0], ctx->outputs[0], mean, scale);
    free(mean);
    return LD_OK;
}
