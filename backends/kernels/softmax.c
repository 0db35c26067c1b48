/* layerdiff — the softmax family and the losses built on it: Softmax,
 * LogSoftmax, Hardmax (1, 11, 13), NegativeLogLikelihoodLoss and
 * SoftmaxCrossEntropyLoss (12, 13).
 *
 * Axis semantics differ by opset and that matters: before 13 the input is
 * coerced to 2-D at `axis` (default 1) and the softmax runs over the whole
 * flattened [axis, rank) block; from 13 it runs along the single axis
 * `axis` (default -1).
 *
 * Numerics: the maximum is subtracted first; float32 takes exp in float32
 * (expf) and sums the exponentials in double, then each output is rounded
 * once (Softmax: e * (1 / sum); LogSoftmax: (x - max) - log(sum) in double).
 * float64 works in double throughout. The losses compute everything (the
 * log-softmax of SoftmaxCrossEntropyLoss included) in double and round once.
 * Softmax and LogSoftmax in a layer of reduced precision (float32 data) run
 * sm_run_reduced instead: float throughout, the sum with an ld_accum
 * (backends/accumulate.h), intermediates held in the layer precision when
 * accumulating in half. */
#include <math.h>

#include "backends/accumulate.h"
#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

typedef enum sm_kind { SM_SOFTMAX, SM_LOGSOFTMAX, SM_HARDMAX } sm_kind;

#define SM_TILE 1024
#define SM_PARALLEL_WORK ((int64_t)1 << 15)

static inline double sm_max_nan(double a, double v)
{
    return (v > a || v != v) ? v : a;
}

/* Row functions for one element type: contiguous rows (the softmax axis is
 * innermost) and strided tiles (axis followed by `inner` elements, handled
 * `w` columns at a time with the per-column state in small arrays). */
#define SM_DEFINE(SUF, T, EXP)                                                             \
    static void sm_row_##SUF(sm_kind kind, const T *x, T *y, int64_t n)                    \
    {                                                                                      \
        if (kind == SM_HARDMAX) {                                                          \
            int64_t best = 0;                                                              \
            for (int64_t i = 1; i < n; i++)                                                \
                if (x[i] > x[best])                                                        \
                    best = i;                                                              \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = (T)(i == best);                                                     \
            return;                                                                        \
        }                                                                                  \
        T m = -INFINITY;                                                                   \
        for (int64_t i = 0; i < n; i++)                                                    \
            m = (T)sm_max_nan(m, x[i]);                                                    \
        double sum = 0;                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T e = EXP(x[i] - m);                                                           \
            sum += e;                                                                      \
            if (kind == SM_SOFTMAX)                                                        \
                y[i] = e;                                                                  \
        }                                                                                  \
        if (kind == SM_SOFTMAX) {                                                          \
            double inv = 1.0 / sum;                                                        \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = (T)(y[i] * inv);                                                    \
        } else {                                                                           \
            double ls = log(sum);                                                          \
            for (int64_t i = 0; i < n; i++)                                                \
                y[i] = (T)(((double)x[i] - m) - ls);                                       \
        }                                                                                  \
    }                                                                                      \
                                                                                           \
    static void sm_tile_##SUF(sm_kind kind, const T *x, T *y, int64_t n, int64_t inner,    \
                              int64_t w)                                                   \
    {                                                                                      \
        T m[SM_TILE];                                                                      \
        double sum[SM_TILE];                                                               \
        int64_t best[SM_TILE];                                                             \
        for (int64_t i = 0; i < w; i++) {                                                  \
            m[i] = x[i];                                                                   \
            best[i] = 0;                                                                   \
            sum[i] = 0;                                                                    \
        }                                                                                  \
        for (int64_t r = 1; r < n; r++) {                                                  \
            const T *xr = x + r * inner;                                                   \
            if (kind == SM_HARDMAX) {                                                      \
                for (int64_t i = 0; i < w; i++)                                            \
                    if (xr[i] > m[i]) {                                                    \
                        m[i] = xr[i];                                                      \
                        best[i] = r;                                                       \
                    }                                                                      \
            } else {                                                                       \
                for (int64_t i = 0; i < w; i++)                                            \
                    m[i] = (T)sm_max_nan(m[i], xr[i]);                                     \
            }                                                                              \
        }                                                                                  \
        if (kind == SM_HARDMAX) {                                                          \
            for (int64_t r = 0; r < n; r++)                                                \
                for (int64_t i = 0; i < w; i++)                                            \
                    y[r * inner + i] = (T)(best[i] == r);                                  \
            return;                                                                        \
        }                                                                                  \
        for (int64_t r = 0; r < n; r++) {                                                  \
            const T *xr = x + r * inner;                                                   \
            T *yr = y + r * inner;                                                         \
            for (int64_t i = 0; i < w; i++) {                                              \
                T e = EXP(xr[i] - m[i]);                                                   \
                sum[i] += e;                                                               \
                if (kind == SM_SOFTMAX)                                                    \
                    yr[i] = e;                                                             \
            }                                                                              \
        }                                                                                  \
        for (int64_t i = 0; i < w; i++)                                                    \
            sum[i] = kind == SM_SOFTMAX ? 1.0 / sum[i] : log(sum[i]);                      \
        for (int64_t r = 0; r < n; r++) {                                                  \
            const T *xr = x + r * inner;                                                   \
            T *yr = y + r * inner;                                                         \
            if (kind == SM_SOFTMAX)                                                        \
                for (int64_t i = 0; i < w; i++)                                            \
                    yr[i] = (T)(yr[i] * sum[i]);                                           \
            else                                                                           \
                for (int64_t i = 0; i < w; i++)                                            \
                    yr[i] = (T)(((double)xr[i] - m[i]) - sum[i]);                          \
        }                                                                                  \
    }                                                                                      \
                                                                                           \
    static void sm_run_##SUF(sm_kind kind, const T *x, T *y, int64_t outer, int64_t n,     \
                             int64_t inner, int threads)                                   \
    {                                                                                      \
        int64_t tiles = inner == 1 ? 1 : (inner + SM_TILE - 1) / SM_TILE;                  \
        int nt = outer * tiles > 1 && outer * n * inner >= SM_PARALLEL_WORK ? threads : 1; \
        _Pragma("omp parallel for num_threads(nt) schedule(static)")                       \
        for (int64_t task = 0; task < outer * tiles; task++) {                             \
            int64_t o = task / tiles, col = (task % tiles) * SM_TILE;                      \
            int64_t base = o * n * inner + col;                                            \
            if (inner == 1)                                                                \
                sm_row_##SUF(kind, x + base, y + base, n);                                 \
            else                                                                           \
                sm_tile_##SUF(kind, x + base, y + base, n, inner,                          \
                              inner - col < SM_TILE ? inner - col : SM_TILE);              \
        }                                                                                  \
    }

SM_DEFINE(f32, float, expf)
SM_DEFINE(f64, double, exp)

/* Softmax / LogSoftmax of a reduced-precision layer on `w` columns (the
 * axis has n elements `inner` apart), with V = ld_accum_value (identity
 * unless accumulating in half):
 *   m = max x;  e_r = V(exp(V(x_r - m)));  sum = e_0 + e_1 + ... (ld_accum_add, in order)
 *   Softmax: y_r = e_r * V(1 / sum);  LogSoftmax: y_r = V(x_r - m) - V(log(sum)). */
static void sm_tile_reduced(sm_kind kind, const ld_accum *ac, const float *x, float *y,
                            int64_t n, int64_t inner, int64_t w)
{
    float m[SM_TILE], sum[SM_TILE];
    for (int64_t i = 0; i < w; i++) {
        m[i] = -INFINITY;
        sum[i] = 0.0f;
    }
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < w; i++)
            m[i] = (float)sm_max_nan(m[i], x[r * inner + i]);
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < w; i++) {
            float e = ld_accum_value(ac, expf(ld_accum_value(ac, x[r * inner + i] - m[i])));
            sum[i] = ld_accum_add(ac, sum[i], e);
            if (kind == SM_SOFTMAX)
                y[r * inner + i] = e;
        }
    for (int64_t i = 0; i < w; i++)
        sum[i] = ld_accum_value(ac, kind == SM_SOFTMAX ? 1.0f / sum[i] : logf(sum[i]));
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < w; i++) {
            float *yr = y + r * inner + i;
            if (kind == SM_SOFTMAX)
                *yr = *yr * sum[i];
            else
                *yr = ld_accum_value(ac, x[r * inner + i] - m[i]) - sum[i];
        }
}

/* The same computation on SM_ROWS contiguous rows (inner == 1) at a time:
 * the per-row state lives in small arrays the compiler keeps in registers,
 * and the rows' sequential sums are independent chains that overlap. Each
 * row sees exactly the operations of sm_tile_reduced in the same order, so
 * the results are bit-identical; only the interleaving across rows differs.
 * (sm_tile_reduced on one row keeps m and sum in memory and each step waits
 * for the previous store: twice the cost of the expf calls.) */
#define SM_ROWS 8
static void sm_rows_reduced(sm_kind kind, const ld_accum *ac, const float *x, float *y,
                            int64_t n)
{
    float m[SM_ROWS], sum[SM_ROWS];
    const bool half = ac->half;
    for (int i = 0; i < SM_ROWS; i++) {
        m[i] = -INFINITY;
        sum[i] = 0.0f;
    }
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < SM_ROWS; i++)
            m[i] = (float)sm_max_nan(m[i], x[i * n + r]);
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < SM_ROWS; i++) {
            float d = x[i * n + r] - m[i];
            float e = expf(half ? ld_accum_value(ac, d) : d);
            e = half ? ld_accum_value(ac, e) : e;
            sum[i] = half ? ld_accum_add(ac, sum[i], e) : sum[i] + e;
            if (kind == SM_SOFTMAX)
                y[i * n + r] = e;
        }
    for (int i = 0; i < SM_ROWS; i++)
        sum[i] = ld_accum_value(ac, kind == SM_SOFTMAX ? 1.0f / sum[i] : logf(sum[i]));
    for (int i = 0; i < SM_ROWS; i++)
        for (int64_t r = 0; r < n; r++) {
            float *yr = y + i * n + r;
            if (kind == SM_SOFTMAX)
                *yr = *yr * sum[i];
            else
                *yr = ld_accum_value(ac, x[i * n + r] - m[i]) - sum[i];
        }
}

/* Contiguous rows (inner == 1): groups of SM_ROWS, the rest one by one. */
static void sm_run_reduced_rows(sm_kind kind, const ld_accum *ac, const float *x, float *y,
                                int64_t outer, int64_t n, int threads)
{
    int64_t groups = outer / SM_ROWS;
    int nt = groups > 1 && outer * n >= SM_PARALLEL_WORK ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t g = 0; g < groups; g++)
        sm_rows_reduced(kind, ac, x + g * SM_ROWS * n, y + g * SM_ROWS * n, n);
    for (int64_t o = groups * SM_ROWS; o < outer; o++)
        sm_tile_reduced(kind, ac, x + o * n, y + o * n, n, 1, 1);
}

static void sm_run_reduced(sm_kind kind, const ld_accum *ac, const float *x, float *y,
                           int64_t outer, int64_t n, int64_t inner, int threads)
{
    if (inner == 1) {
        sm_run_reduced_rows(kind, ac, x, y, outer, n, threads);
        return;
    }
    int64_t tiles = (inner + SM_TILE - 1) / SM_TILE;
    int nt = outer * tiles > 1 && outer * n * inner >= SM_PARALLEL_WORK ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t task = 0; task < outer * tiles; task++) {
        int64_t o = task / tiles, col = (task % tiles) * SM_TILE;
        int64_t base = o * n * inner + col;
        sm_tile_reduced(kind, ac, x + base, y + base, n, inner,
                        inner - col < SM_TILE ? inner - col : SM_TILE);
    }
}

/* --- Softmax, LogSoftmax, Hardmax -------------------------------------------------------- */

typedef struct sm_state {
    sm_kind kind;
    int64_t axis;
    bool coerce_2d; /* opset < 13 */
} sm_state;

static void sm_fini(void *state)
{
    free(state);
}

static ld_status sm_init(ld_kernel_ctx *ctx)
{
    sm_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    const char *op = ctx->node->op_type;
    s->kind = strcmp(op, "Softmax") == 0      ? SM_SOFTMAX
              : strcmp(op, "LogSoftmax") == 0 ? SM_LOGSOFTMAX
                                              : SM_HARDMAX;
    s->coerce_2d = ctx->node->opset < 13;
    return ld_node_attr_int(ctx->node, "axis", s->coerce_2d ? 1 : -1, &s->axis, ctx->err);
}

/* The (outer, n, inner) layout of the softmax axis; rank-0 inputs are a
 * single element. */
static ld_status sm_layout(ld_kernel_ctx *ctx, int64_t *outer, int64_t *n, int64_t *inner)
{
    const sm_state *s = ctx->state;
    const ld_shape *sh = &ctx->inputs[0]->shape;
    *outer = *n = *inner = 1;
    if (sh->rank == 0)
        return LD_OK;
    int axis = 0;
    ld_status st = ld_normalize_axis(ctx, s->axis, sh->rank, &axis);
    if (st != LD_OK)
        return st;
    for (int d = 0; d < sh->rank; d++) {
        if (d < axis)
            *outer *= sh->dims[d];
        else if (d == axis || s->coerce_2d)
            *n *= sh->dims[d];
        else
            *inner *= sh->dims[d];
    }
    return LD_OK;
}

static ld_status sm_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_infer_like_input0(ctx, outs);
    if (st != LD_OK)
        return st;
    ld_dtype d = ctx->inputs[0]->dtype;
    if (d != LD_DTYPE_FLOAT32 && d != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(d));
    int64_t outer, n, inner;
    return sm_layout(ctx, &outer, &n, &inner);
}

static ld_status sm_compute(ld_kernel_ctx *ctx)
{
    const sm_state *s = ctx->state;
    const ld_tensor *x = ctx->inputs[0];
    int64_t outer, n, inner;
    ld_status st = sm_layout(ctx, &outer, &n, &inner);
    if (st != LD_OK || x->count == 0)
        return st;
    ld_accum ac = ld_accum_make(ctx->numerics, ctx->counters);
    if (x->dtype == LD_DTYPE_FLOAT32 && ac.reduced && s->kind != SM_HARDMAX)
        sm_run_reduced(s->kind, &ac, x->data, ctx->outputs[0]->data, outer, n, inner,
                       ctx->threads);
    else if (x->dtype == LD_DTYPE_FLOAT32)
        sm_run_f32(s->kind, x->data, ctx->outputs[0]->data, outer, n, inner, ctx->threads);
    else
        sm_run_f64(s->kind, x->data, ctx->outputs[0]->data, outer, n, inner, ctx->threads);
    return LD_OK;
}

/* --- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ---------------------------------- */

typedef enum loss_reduction { LOSS_NONE, LOSS_SUM, LOSS_MEAN } loss_reduction;

typedef struct loss_state {
    loss_reduction reduction;
    bool has_ignore;
    int64_t ignore_index;
} loss_state;

static ld_status loss_init(ld_kernel_ctx *ctx)
{
    loss_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    const char *reduction;
    ld_status st = ld_node_attr_string(ctx->node, "reduction", "mean", &reduction, ctx->err);
    if (st != LD_OK)
        return st;
    if (strcmp(reduction, "none") == 0)
        s->reduction = LOSS_NONE;
    else if (strcmp(reduction, "sum") == 0)
        s->reduction = LOSS_SUM;
    else if (strcmp(reduction, "mean") == 0)
        s->reduction = LOSS_MEAN;
    else
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "reduction '%s' is not one of none, sum, mean",
                              reduction);
    s->has_ignore = ld_node_attr(ctx->node, "ignore_index") != NULL;
    return ld_node_attr_int(ctx->node, "ignore_index", 0, &s->ignore_index, ctx->err);
}

/* Checks input (N, C, d1..dk), target (N, d1..dk) of int32/int64 and the
 * optional weight (C). */
static ld_status loss_check(ld_kernel_ctx *ctx)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = ld_krequire(ctx, 1);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0], *t = ctx->inputs[1], *w = ld_kin(ctx, 2);
    if (x->dtype != LD_DTYPE_FLOAT32 && x->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    if (t->dtype != LD_DTYPE_INT32 && t->dtype != LD_DTYPE_INT64)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "target must be int32 or int64, not %s",
                              ld_dtype_name(t->dtype));
    char xs[128], ts[128];
    bool ok = x->shape.rank >= 2 && t->shape.rank == x->shape.rank - 1 &&
              t->shape.dims[0] == x->shape.dims[0];
    for (int d = 1; ok && d < t->shape.rank; d++)
        ok = t->shape.dims[d] == x->shape.dims[d + 1];
    if (!ok)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input %s and target %s do not match: expected "
                              "(N, C, d1..dk) and (N, d1..dk)",
                              ld_shape_format(&x->shape, xs, sizeof xs),
                              ld_shape_format(&t->shape, ts, sizeof ts));
    if (w && (w->shape.rank != 1 || w->shape.dims[0] != x->shape.dims[1] ||
              w->dtype != x->dtype))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "weight must be a %s vector of C = %lld "
                              "elements (got %s %s)", ld_dtype_name(x->dtype),
                              (long long)x->shape.dims[1], ld_dtype_name(w->dtype),
                              ld_shape_format(&w->shape, ts, sizeof ts));
    return LD_OK;
}

static ld_status loss_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const loss_state *s = ctx->state;
    ld_status st = loss_check(ctx);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    outs[0].shape = s->reduction == LOSS_NONE ? ctx->inputs[1]->shape : (ld_shape){.rank = 0};
    if (ctx->n_outputs > 1) { /* SoftmaxCrossEntropyLoss log_prob */
        outs[1].dtype = ctx->inputs[0]->dtype;
        outs[1].shape = ctx->inputs[0]->shape;
    }
    return LD_OK;
}

static inline double elem_at(const void *data, bool is_double, int64_t i)
{
    return is_double ? ((const double *)data)[i] : ((const float *)data)[i];
}

static void store_loss(ld_tensor *y, int64_t i, double v)
{
    if (y->dtype == LD_DTYPE_FLOAT64)
        ((double *)y->data)[i] = v;
    else
        ((float *)y->data)[i] = (float)v;
}

/* loss = -logp[n, target, d] * weight[target], reduced. logp is the input
 * (NLL) or the computed log-softmax (SCE, as double). */
static ld_status nll_core(ld_kernel_ctx *ctx, const void *logp, bool logp_double)
{
    const loss_state *s = ctx->state;
    const ld_tensor *x = ctx->inputs[0], *t = ctx->inputs[1], *w = ld_kin(ctx, 2);
    ld_tensor *y = ctx->outputs[0];
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], D = N ? t->count / N : 0;
    double total = 0, weight_total = 0;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t d = 0; d < D; d++) {
            int64_t i = n * D + d;
            int64_t c = t->dtype == LD_DTYPE_INT64 ? ((const int64_t *)t->data)[i]
                                                   : ((const int32_t *)t->data)[i];
            double loss = 0, wt = 0;
            if (!(s->has_ignore && c == s->ignore_index)) {
                if (c < 0 || c >= C)
                    return ld_kernel_fail(ctx, LD_ERR_INPUT, "target value %lld at element "
                                          "%lld is outside [0, %lld)", (long long)c,
                                          (long long)i, (long long)C);
                wt = w ? elem_at(w->data, w->dtype == LD_DTYPE_FLOAT64, c) : 1.0;
                loss = -elem_at(logp, logp_double, (n * C + c) * D + d) * wt;
            }
            if (s->reduction == LOSS_NONE && y)
                store_loss(y, i, loss);
            total += loss;
            weight_total += wt;
        }
    }
    if (s->reduction != LOSS_NONE && y)
        store_loss(y, 0, s->reduction == LOSS_SUM ? total : total / weight_total);
    return LD_OK;
}

static ld_status nll_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    return nll_core(ctx, x->data, x->dtype == LD_DTYPE_FLOAT64);
}

/* log-softmax over axis 1 of (N, C, D) in double. */
static void log_softmax_axis1(const ld_tensor *x, double *lp)
{
    bool dbl = x->dtype == LD_DTYPE_FLOAT64;
    int64_t N = x->shape.dims[0], C = x->shape.dims[1], D = N && C ? x->count / (N * C) : 0;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t d = 0; d < D; d++) {
            int64_t base = n * C * D + d;
            double m = -INFINITY, sum = 0;
            for (int64_t c = 0; c < C; c++)
                m = sm_max_nan(m, elem_at(x->data, dbl, base + c * D));
            for (int64_t c = 0; c < C; c++)
                sum += exp(elem_at(x->data, dbl, base + c * D) - m);
            double ls = log(sum);
            for (int64_t c = 0; c < C; c++)
                lp[base + c * D] = (elem_at(x->data, dbl, base + c * D) - m) - ls;
        }
    }
}

static ld_status sce_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *log_prob = ld_kout(ctx, 1);
    double *lp = malloc((size_t)(x->count ? x->count : 1) * sizeof *lp);
    if (!lp)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    log_softmax_axis1(x, lp);
    for (int64_t i = 0; log_prob && i < x->count; i++)
        store_loss(log_prob, i, lp[i]);
    ld_status st = nll_core(ctx, lp, true);
    free(lp);
    return st;
}

#define SM_ROW(name, since) \
    {"", name, since, LD_KERNEL_WIDEN_HALF, sm_init, sm_infer, sm_compute, sm_fini, NULL}

static const ld_kernel softmax_kernels[] = {
    SM_ROW("Hardmax", 1),
    SM_ROW("Hardmax", 13),
    SM_ROW("LogSoftmax", 1),
    SM_ROW("LogSoftmax", 13),
    {"", "NegativeLogLikelihoodLoss", 12, LD_KERNEL_WIDEN_HALF, loss_init, loss_infer,
     nll_compute, sm_fini, NULL},
    SM_ROW("Softmax", 1),
    SM_ROW("Softmax", 13),
    {"", "SoftmaxCrossEntropyLoss", 12, LD_KERNEL_WIDEN_HALF, loss_init, loss_infer,
     sce_compute, sm_fini, NULL},
};

LD_KERNEL_FAMILY(softmax);
