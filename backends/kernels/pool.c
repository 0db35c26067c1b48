/* layerdiff — pooling: AveragePool (opsets 1, 7, 10, 11), MaxPool (1, 8, 10,
 * 11, 12), LpPool (1, 2, 11), GlobalAveragePool, GlobalMaxPool (1),
 * GlobalLpPool (1, 2). 1-D, 2-D and 3-D windows with strides, pads,
 * auto_pad, dilations and ceil_mode (conv_common.h has the geometry).
 * MaxUnpool and MaxRoiPool are in pool_unpool.c.
 *
 * Numerics: sums (AveragePool, LpPool, the global pools) accumulate in double
 * and round once to the output type — this backend is the reference the
 * reduced-precision runs are measured against, and a double sum of fp32
 * values is the exact sum rounded. A float32 tensor in a layer of reduced
 * precision (the emulated engine's tf32, fp16, bf16 layers; ld_accum_make)
 * sums the way reductions do instead (docs/numerics.md, "Accumulation"): one
 * float accumulator per output, the window's terms in increasing input
 * position, each step an fp32 addition or, with accumulate-half, a partial
 * sum rounded to the layer precision (overflows counted). Maxima are exact. MaxPool propagates NaN
 * (the first NaN of a window wins), so a NaN in the input is never hidden.
 * AveragePool's count_include_pad divisor counts the window positions inside
 * the padded input (a ceil_mode window running past the end padding counts
 * only up to it), as ONNX Runtime and PyTorch do; without it the divisor is
 * the number of real input elements (0/0 gives NaN for an all-padding
 * window). MaxPool's Indices are flat indices into the whole input tensor
 * (batch and channel included), row-major for storage_order 0 and with the
 * first spatial axis fastest for storage_order 1. Planes (n, c) run in
 * parallel on the convolutions' claim pool (conv_pool.h); each output is
 * computed by one thread in a fixed order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/accumulate.h"
#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_pool.h"
#include "backends/kernels/fast_level.h"
#include "backends/kernels/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef enum pool_kind { POOL_AVG, POOL_MAX, POOL_LP } pool_kind;

typedef struct pool_state {
    ld_window_attrs attrs;
    pool_kind kind;
    bool global;
    bool count_include_pad;
    int64_t storage_order;
    double p;   /* LpPool norm */
} pool_state;

static ld_status pool_init(ld_kernel_ctx *ctx)
{
    const char *op = ctx->node->op_type;
    pool_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    s->global = strncmp(op, "Global", 6) == 0;
    const char *base = s->global ? op + 6 : op;
    s->kind = strcmp(base, "MaxPool") == 0 ? POOL_MAX : strcmp(base, "LpPool") == 0 ? POOL_LP
                                                                                  : POOL_AVG;
    int64_t cip = 0, ip = 2;
    float fp = 2.0f;
    ld_status st = s->global ? LD_OK : ld_window_attrs_parse(ctx, &s->attrs);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "count_include_pad", 0, &cip, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "storage_order", 0, &s->storage_order, ctx->err);
    /* LpPool's p is a float attribute in opset 1, an int from opset 2. */
    if (st == LD_OK && s->kind == POOL_LP && ctx->node->opset < 2)
        st = ld_node_attr_float(ctx->node, "p", 2.0f, &fp, ctx->err);
    else if (st == LD_OK && s->kind == POOL_LP)
        st = ld_node_attr_int(ctx->node, "p", 2, &ip, ctx->err);
    if (st == LD_OK && !s->global && s->attrs.n_kernel == 0)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'kernel_shape' is required");
    if (st == LD_OK && s->storage_order != 0 && s->storage_order != 1)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "storage_order must be 0 or 1, not %lld",
                            (long long)s->storage_order);
    if (st != LD_OK) {
        free(s);
        return st;
    }
    s->count_include_pad = cip != 0;
    s->p = s->kind != POOL_LP ? 0 : ctx->node->opset < 2 ? fp : (double)ip;
    if (s->kind == POOL_LP && !(s->p > 0))
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "p = %g must be positive", s->p);
    if (st != LD_OK) {
        free(s);
        return st;
    }
    ctx->state = s;
    return LD_OK;
}

static void pool_fini(void *state)
{
    free(state);
}

static bool pool_dtype_ok(const pool_state *s, ld_dtype d)
{
    if (d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT64)
        return true;
    return s->kind == POOL_MAX && !s->global && (d == LD_DTYPE_INT8 || d == LD_DTYPE_UINT8);
}

static ld_status pool_geometry(ld_kernel_ctx *ctx, ld_window_geom *g)
{
    const pool_state *s = ctx->state;
    const ld_tensor *x = ctx->n_inputs > 0 ? ctx->inputs[0] : NULL;
    if (!x)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs input X");
    if (!pool_dtype_ok(s, x->dtype))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    char xs[64];
    if (x->shape.rank < (s->global ? 2 : 3))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input X has shape %s; expected [N, C, "
                              "spatial...]", ld_shape_format(&x->shape, xs, sizeof xs));
    int nd = x->shape.rank - 2;
    if (s->global) {
        /* One window covering every spatial element. */
        memset(g, 0, sizeof *g);
        g->nd = nd;
        int64_t spatial = 1;
        for (int i = 0; i < nd; i++)
            spatial *= x->shape.dims[2 + i];
        g->in_size = g->k_size = spatial;
        g->out_size = 1;
        return LD_OK;
    }
    ld_status st = ld_window_check_len(ctx, "kernel_shape", s->attrs.n_kernel, (size_t)nd);
    if (st != LD_OK)
        return st;
    return ld_window_geom_forward(ctx, &s->attrs, nd, x->shape.dims + 2, s->attrs.kernel,
                                  LD_WINDOW_POOL, g);
}

static ld_status pool_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const pool_state *s = ctx->state;
    ld_window_geom g;
    ld_status st = pool_geometry(ctx, &g);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    int nd = x->shape.rank - 2;
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    for (int i = 0; i < nd; i++)
        outs[0].shape.dims[2 + i] = s->global ? 1 : g.out[LD_WINDOW_MAX_DIMS - nd + i];
    if (ctx->n_outputs > 1) {
        outs[1].dtype = LD_DTYPE_INT64;
        outs[1].shape = outs[0].shape;
    }
    return LD_OK;
}

/* --- windows ------------------------------------------------------------------------ */

/* Window of output o in one dimension: kernel taps [k_lo, k_hi) fall inside
 * the input; start is the input position of tap 0. */
typedef struct win1 {
    int64_t start, k_lo, k_hi, padded; /* padded: taps inside the padded input */
} win1;

static win1 window_1d(const ld_window_geom *g, int i, int64_t o)
{
    win1 w;
    int64_t s = g->s[i], d = g->d[i], k = g->k[i], in = g->in[i];
    w.start = o * s - g->pb[i];
    /* tap t is valid when 0 <= start + t*d < in */
    w.k_lo = w.start >= 0 ? 0 : (-w.start + d - 1) / d;
    int64_t room = in - w.start; /* taps with start + t*d < in: t < room/d */
    w.k_hi = room <= 0 ? 0 : (room + d - 1) / d;
    if (w.k_hi > k)
        w.k_hi = k;
    if (w.k_hi < w.k_lo)
        w.k_hi = w.k_lo;
    /* taps inside [-pb, in + pe) */
    int64_t plo = w.start >= -g->pb[i] ? 0 : (-g->pb[i] - w.start + d - 1) / d;
    int64_t proom = in + g->pe[i] - w.start;
    int64_t phi = proom <= 0 ? 0 : (proom + d - 1) / d;
    if (phi > k)
        phi = k;
    w.padded = phi > plo ? phi - plo : 0;
    return w;
}

/* Flat input offset (within a plane) of taps (td, th, tw). */
static inline int64_t tap_offset(const ld_window_geom *g, const win1 *const *w, int64_t td,
                                 int64_t th, int64_t tw)
{
    return ((w[0]->start + td * g->d[0]) * g->in[1] + (w[1]->start + th * g->d[1])) * g->in[2] +
           w[2]->start + tw * g->d[2];
}

/* The windows of every output index of each dimension, computed once per
 * call instead of once per output element. */
typedef struct pool_tables {
    win1 *w[3];
} pool_tables;

static void tables_free(pool_tables *t)
{
    for (int i = 0; i < 3; i++)
        free(t->w[i]);
}

static bool tables_make(const ld_window_geom *g, pool_tables *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < 3; i++) {
        t->w[i] = malloc((size_t)(g->out[i] > 0 ? g->out[i] : 1) * sizeof *t->w[i]);
        if (!t->w[i]) {
            tables_free(t);
            return false;
        }
        for (int64_t o = 0; o < g->out[i]; o++)
            t->w[i][o] = window_1d(g, i, o);
    }
    return true;
}

/* Index reported by MaxPool for plane offset off (row-major within the
 * plane): storage_order 1 numbers the first spatial axis fastest. */
static int64_t storage_index(const ld_window_geom *g, int64_t off, int64_t order)
{
    if (order == 0 || g->nd < 2)
        return off;
    int64_t w = off % g->in[2], h = (off / g->in[2]) % g->in[1], d = off / (g->in[2] * g->in[1]);
    if (g->nd == 2)
        return h + w * g->in[1];
    return d + h * g->in[0] + w * g->in[0] * g->in[1];
}

/* --- MaxPool ------------------------------------------------------------------------ */

/* One plane: y[out_size] and optional flat plane offsets idx[out_size]. */
#define DEFINE_MAXPOOL(T, NAME, LOWEST, IS_NAN)                                              \
    static void NAME(const T *x, const ld_window_geom *g, const pool_tables *t, T *y,        \
                     int64_t *idx)                                                           \
    {                                                                                        \
        int64_t o = 0, d2 = g->d[2];                                                         \
        for (int64_t od = 0; od < g->out[0]; od++)                                           \
            for (int64_t oh = 0; oh < g->out[1]; oh++)                                       \
                for (int64_t ow = 0; ow < g->out[2]; ow++, o++) {                            \
                    const win1 *w[3] = {&t->w[0][od], &t->w[1][oh], &t->w[2][ow]};           \
                    T best = LOWEST;                                                         \
                    int64_t at = -1;                                                         \
                    bool nan = false;                                                        \
                    for (int64_t td = w[0]->k_lo; td < w[0]->k_hi && !nan; td++)             \
                        for (int64_t th = w[1]->k_lo; th < w[1]->k_hi && !nan; th++) {       \
                            int64_t row = tap_offset(g, w, td, th, 0);                       \
                            for (int64_t tw = w[2]->k_lo; tw < w[2]->k_hi; tw++) {           \
                                int64_t off = row + tw * d2;                                 \
                                T v = x[off];                                                \
                                if (IS_NAN(v)) {                                             \
                                    best = v;                                                \
                                    at = off;                                                \
                                    nan = true;                                              \
                                    break;                                                   \
                                }                                                            \
                                bool take = v > best || at < 0; /* branch-free select */    \
                                best = take ? v : best;                                      \
                                at = take ? off : at;                                        \
                            }                                                                \
                        }                                                                    \
                    y[o] = best;                                                             \
                    if (idx)                                                                 \
                        idx[o] = at;                                                         \
                }                                                                            \
    }

/* MaxPool float32 without Indices and without dilation, separably: the
 * maximum over the window's rows into row (vectorised), then over the
 * window's columns. The maximum is exact, so this equals the generic loop
 * except which NaN payload a NaN window reports. */
static void maxpool_rows_f32(const float *x, const ld_window_geom *g, const pool_tables *t,
                             float *y, float *row)
{
    int64_t o = 0, in2 = g->in[2];
    for (int64_t od = 0; od < g->out[0]; od++)
        for (int64_t oh = 0; oh < g->out[1]; oh++, o += g->out[2]) {
            const win1 *w[3] = {&t->w[0][od], &t->w[1][oh], &t->w[2][0]};
            bool any = false;
            for (int64_t td = w[0]->k_lo; td < w[0]->k_hi; td++)
                for (int64_t th = w[1]->k_lo; th < w[1]->k_hi; th++) {
                    const float *xr = x + tap_offset(g, w, td, th, 0) - w[2]->start;
                    if (!any) {
                        memcpy(row, xr, (size_t)in2 * sizeof *row);
                        any = true;
                        continue;
                    }
#pragma omp simd
                    for (int64_t i = 0; i < in2; i++) {
                        float v = xr[i], m = row[i];
                        row[i] = v > m || v != v ? v : m;
                    }
                }
            for (int64_t ow = 0; ow < g->out[2]; ow++) {
                const win1 *ww = &t->w[2][ow];
                float m = -INFINITY;
                for (int64_t tw = ww->k_lo; tw < ww->k_hi && any; tw++) {
                    float v = row[ww->start + tw];
                    m = v > m || v != v ? v : m;
                }
                y[o + ow] = m;
            }
        }
}

#define FLOAT_IS_NAN(v) isnan(v)
#define INT_IS_NAN(v) false
DEFINE_MAXPOOL(float, maxpool_f32, -INFINITY, FLOAT_IS_NAN)
DEFINE_MAXPOOL(double, maxpool_f64, -INFINITY, FLOAT_IS_NAN)
DEFINE_MAXPOOL(int8_t, maxpool_i8, INT8_MIN, INT_IS_NAN)
DEFINE_MAXPOOL(uint8_t, maxpool_u8, 0, INT_IS_NAN)

/* --- AveragePool and LpPool ----------------------------------------------------------------- */

static inline double lp_term(double v, double p)
{
    double a = fabs(v);
    return p == 1 ? a : p == 2 ? a * a : pow(a, p);
}

static inline double lp_root(double sum, double p)
{
    return p == 1 ? sum : p == 2 ? sqrt(sum) : pow(sum, 1.0 / p);
}

/* One plane of AveragePool (p == 0) or LpPool (p > 0), into double y. */
#define DEFINE_SUMPOOL(T, NAME)                                                              \
    static void NAME(const T *x, const ld_window_geom *g, const pool_tables *t,              \
                     bool include_pad, double p, double *y)                                  \
    {                                                                                        \
        int64_t o = 0, d2 = g->d[2];                                                         \
        for (int64_t od = 0; od < g->out[0]; od++)                                           \
            for (int64_t oh = 0; oh < g->out[1]; oh++)                                       \
                for (int64_t ow = 0; ow < g->out[2]; ow++, o++) {                            \
                    const win1 *w[3] = {&t->w[0][od], &t->w[1][oh], &t->w[2][ow]};           \
                    double sum = 0;                                                          \
                    for (int64_t td = w[0]->k_lo; td < w[0]->k_hi; td++)                     \
                        for (int64_t th = w[1]->k_lo; th < w[1]->k_hi; th++) {               \
                            const T *row = x + tap_offset(g, w, td, th, 0);                  \
                            for (int64_t tw = w[2]->k_lo; tw < w[2]->k_hi; tw++) {           \
                                double v = row[tw * d2];                                     \
                                sum += p > 0 ? lp_term(v, p) : v;                            \
                            }                                                                \
                        }                                                                    \
                    if (p > 0) {                                                             \
                        y[o] = lp_root(sum, p);                                              \
                        continue;                                                            \
                    }                                                                        \
                    int64_t count = include_pad ? w[0]->padded * w[1]->padded * w[2]->padded \
                                                : (w[0]->k_hi - w[0]->k_lo) *                \
                                                      (w[1]->k_hi - w[1]->k_lo) *            \
                                                      (w[2]->k_hi - w[2]->k_lo);             \
                    y[o] = sum / (double)count;                                              \
                }                                                                            \
    }

DEFINE_SUMPOOL(float, sumpool_f32)
DEFINE_SUMPOOL(double, sumpool_f64)

/* --- reduced precision: float accumulators in window order ------------------------------------ */

/* One accumulation step of AveragePool (p == 0) or LpPool: p = 2 squares
 * with multiply-add steps (as ReduceSumSquare), p = 1 adds |v|, any other p
 * adds V(powf(|v|, p)), the term as a half kernel holds it. */
static inline float sum_step_r(const ld_accum *ac, float acc, float v, float p)
{
    if (p == 0)
        return ld_accum_add(ac, acc, v);
    if (p == 2)
        return ld_accum_fma(ac, acc, v, v);
    if (p == 1)
        return ld_accum_add(ac, acc, fabsf(v));
    return ld_accum_add(ac, acc, ld_accum_value(ac, powf(fabsf(v), p)));
}

static inline float lp_root_r(float sum, float p)
{
    return p == 1 ? sum : p == 2 ? sqrtf(sum) : powf(sum, 1.0f / p);
}

/* One float32 plane of AveragePool (p == 0) or LpPool (p > 0), reduced. */
static void sumpool_f32r(const float *x, const ld_window_geom *g, const pool_tables *t,
                         bool include_pad, float p, const ld_accum *ac, float *y)
{
    int64_t o = 0, d2 = g->d[2];
    for (int64_t od = 0; od < g->out[0]; od++)
        for (int64_t oh = 0; oh < g->out[1]; oh++)
            for (int64_t ow = 0; ow < g->out[2]; ow++, o++) {
                const win1 *w[3] = {&t->w[0][od], &t->w[1][oh], &t->w[2][ow]};
                float sum = 0.0f;
                for (int64_t td = w[0]->k_lo; td < w[0]->k_hi; td++)
                    for (int64_t th = w[1]->k_lo; th < w[1]->k_hi; th++) {
                        const float *row = x + tap_offset(g, w, td, th, 0);
                        for (int64_t tw = w[2]->k_lo; tw < w[2]->k_hi; tw++)
                            sum = sum_step_r(ac, sum, row[tw * d2], p);
                    }
                if (p > 0) {
                    y[o] = lp_root_r(sum, p);
                    continue;
                }
                int64_t count = include_pad ? w[0]->padded * w[1]->padded * w[2]->padded
                                            : (w[0]->k_hi - w[0]->k_lo) *
                                                  (w[1]->k_hi - w[1]->k_lo) *
                                                  (w[2]->k_hi - w[2]->k_lo);
                y[o] = sum / (float)count;
            }
}

/* --- global pools ---------------------------------------------------------------------------- */

static void global_plane(const void *x, ld_dtype d, int64_t n, const pool_state *s, void *y)
{
    double acc = s->kind == POOL_MAX ? -INFINITY : 0;
    bool nan = false;
    for (int64_t i = 0; i < n && !nan; i++) {
        double v = d == LD_DTYPE_FLOAT32 ? ((const float *)x)[i] : ((const double *)x)[i];
        if (s->kind == POOL_MAX) {
            nan = isnan(v);
            acc = nan || v > acc ? v : acc;
        } else {
            acc += s->kind == POOL_LP ? lp_term(v, s->p) : v;
        }
    }
    double r = s->kind == POOL_MAX ? acc : s->kind == POOL_LP ? lp_root(acc, s->p)
                                                              : acc / (double)n;
    if (d == LD_DTYPE_FLOAT32)
        *(float *)y = (float)r;
    else
        *(double *)y = r;
}

/* GlobalAveragePool of GLOBAL_GROUP float32 planes of n elements: the same
 * double sums as global_plane, one per plane in element order, interleaved
 * so that the additions of different planes overlap (one plane alone waits
 * for each add's latency: 4 cycles per element). */
#define GLOBAL_GROUP 8
/* Floats ahead of the loads that the vector groups prefetch in each plane:
 * eight planes of det's 160x160 layers are eight streams 100 KiB apart,
 * more than the hardware prefetcher follows; the group waited on every
 * line (Zen 5, 1 thread, 96 planes: 0.75 -> 0.52-0.55 ms, medians of 7,
 * interleaved). Sixteen planes at a time, for more independent sums, ran
 * slower: sixteen such streams share one 12-way L1 set. */
#define GLOBAL_AHEAD 512
#define DEFINE_GLOBAL_AVG_GROUP(NAME, ACC)                                                     \
    static void NAME(const float *x, int64_t n, float *y)                                      \
    {                                                                                          \
        /* named accumulators: an array here is vectorised across planes and kept in          \
         * memory, which brings the latency back */                                           \
        ACC a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;                    \
        const float *x0 = x, *x1 = x + n, *x2 = x + 2 * n, *x3 = x + 3 * n, *x4 = x + 4 * n;   \
        const float *x5 = x + 5 * n, *x6 = x + 6 * n, *x7 = x + 7 * n;                         \
        for (int64_t i = 0; i < n; i++) {                                                      \
            a0 += x0[i], a1 += x1[i], a2 += x2[i], a3 += x3[i];                                \
            a4 += x4[i], a5 += x5[i], a6 += x6[i], a7 += x7[i];                                \
        }                                                                                      \
        const ACC sums[GLOBAL_GROUP] = {a0, a1, a2, a3, a4, a5, a6, a7};                       \
        for (int k = 0; k < GLOBAL_GROUP; k++)                                                 \
            y[k] = (float)(sums[k] / (ACC)n);                                                  \
    }
/* double sums as global_plane; float sums as global_plane_f32r without
 * accumulate-half */
DEFINE_GLOBAL_AVG_GROUP(global_avg_group_f32, double)
DEFINE_GLOBAL_AVG_GROUP(global_avg_group_f32r, float)

#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2")))
/* The 8x8 transpose of r[0..7] (r[k] = 8 consecutive elements of plane k):
 * afterwards r[i] holds element i of planes 0..7. */
AVX2 static inline void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* global_avg_group_f32 (double sums) and _f32r (float sums) on AVX2: the
 * same sums, each plane's terms added in element order, one vector lane per
 * plane (8 elements of each plane loaded and transposed), so the same bits.
 * Why: the scalar group is bound by its 8 scalar adds per element step
 * (~0.4 ns per element on a Zen 3); these take one or two vector adds. */
AVX2 static void global_avg_group_f32_avx2(const float *x, int64_t n, float *y)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 r[8];
        for (int k = 0; k < 8; k++) {
            if (i % 16 == 0)
                _mm_prefetch((const char *)(x + k * n + i + GLOBAL_AHEAD), _MM_HINT_T0);
            r[k] = _mm256_loadu_ps(x + k * n + i);
        }
        transpose8(r);
        for (int j = 0; j < 8; j++) {
            lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(r[j])));
            hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(r[j], 1)));
        }
    }
    double a[8];
    _mm256_storeu_pd(a, lo);
    _mm256_storeu_pd(a + 4, hi);
    for (; i < n; i++)
        for (int k = 0; k < 8; k++)
            a[k] += x[k * n + i];
    for (int k = 0; k < 8; k++)
        y[k] = (float)(a[k] / (double)n);
}

AVX2 static void global_avg_group_f32r_avx2(const float *x, int64_t n, float *y)
{
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 r[8];
        for (int k = 0; k < 8; k++) {
            if (i % 16 == 0)
                _mm_prefetch((const char *)(x + k * n + i + GLOBAL_AHEAD), _MM_HINT_T0);
            r[k] = _mm256_loadu_ps(x + k * n + i);
        }
        transpose8(r);
        for (int j = 0; j < 8; j++)
            acc = _mm256_add_ps(acc, r[j]);
    }
    float a[8];
    _mm256_storeu_ps(a, acc);
    for (; i < n; i++)
        for (int k = 0; k < 8; k++)
            a[k] += x[k * n + i];
    for (int k = 0; k < 8; k++)
        y[k] = a[k] / (float)n;
}
#undef AVX2
#endif

typedef void (*global_group_fn)(const float *x, int64_t n, float *y);

/* The group function of the active level (fast_level.h). */
static global_group_fn global_group(bool reduced)
{
#if defined(__x86_64__)
    if (ld_fast_level_active() == LD_FAST_AVX2)
        return reduced ? global_avg_group_f32r_avx2 : global_avg_group_f32_avx2;
#endif
    return reduced ? global_avg_group_f32r : global_avg_group_f32;
}

/* GlobalAveragePool / GlobalLpPool of one float32 plane, reduced. */
static void global_plane_f32r(const float *x, int64_t n, const pool_state *s,
                              const ld_accum *ac, float *y)
{
    float p = s->kind == POOL_LP ? (float)s->p : 0.0f, sum = 0.0f;
    for (int64_t i = 0; i < n; i++)
        sum = sum_step_r(ac, sum, x[i], p);
    *y = p > 0 ? lp_root_r(sum, p) : sum / (float)n;
}

/* --- compute --------------------------------------------------------------------- */

/* One pool node's work for ld_conv_pool_run: items [0, groups) are groups of
 * GLOBAL_GROUP planes (GlobalAveragePool, float32), items from groups on are
 * single planes from plane `grouped` on. Every output is computed by one
 * item, so the result never depends on the thread count. */
typedef struct pool_job {
    const pool_state *s;
    const ld_window_geom *g;
    const pool_tables *tables;
    const ld_accum *accum;
    ld_dtype dtype;
    size_t es;
    const char *xb;
    char *yb;
    int64_t *ind;     /* MaxPool's Indices, or NULL */
    double *tmp;      /* the sums of the double-accumulated windowed pools */
    float *rows;      /* the separable MaxPool's row buffers, one per worker */
    bool reduced;
    global_group_fn group;
    int64_t groups, grouped;
} pool_job;

/* Floats between two workers' MaxPool row buffers: whole 64-byte lines
 * and one more, so that no line is written by two cores (a shared line
 * moves between them on every write). */
static size_t worker_row_floats(int64_t w)
{
    return ((size_t)(w > 0 ? w : 1) + 31) / 16 * 16;
}

static void pool_plane(const pool_job *j, int worker, int64_t pl)
{
    const pool_state *s = j->s;
    const ld_window_geom *g = j->g;
    const char *xp = j->xb + (size_t)(pl * g->in_size) * j->es;
    char *yp = j->yb + (size_t)(pl * g->out_size) * j->es;
    if (j->reduced && s->global) {
        global_plane_f32r((const float *)xp, g->in_size, s, j->accum, (float *)yp);
        return;
    }
    if (j->reduced) {
        sumpool_f32r((const float *)xp, g, j->tables, s->count_include_pad,
                     s->kind == POOL_LP ? (float)s->p : 0.0f, j->accum, (float *)yp);
        return;
    }
    if (s->global) {
        global_plane(xp, j->dtype, g->in_size, s, yp);
        return;
    }
    if (s->kind != POOL_MAX) {
        double *tp = j->tmp + pl * g->out_size;
        double p = s->kind == POOL_LP ? s->p : 0;
        if (j->dtype == LD_DTYPE_FLOAT32)
            sumpool_f32((const float *)xp, g, j->tables, s->count_include_pad, p, tp);
        else
            sumpool_f64((const double *)xp, g, j->tables, s->count_include_pad, p, tp);
        for (int64_t i = 0; i < g->out_size; i++) {
            if (j->dtype == LD_DTYPE_FLOAT32)
                ((float *)yp)[i] = (float)tp[i];
            else
                ((double *)yp)[i] = tp[i];
        }
        return;
    }
    int64_t *ip = j->ind ? j->ind + pl * g->out_size : NULL;
    if (j->rows) {
        maxpool_rows_f32((const float *)xp, g, j->tables, (float *)yp,
                         j->rows + (size_t)worker * worker_row_floats(g->in[2]));
        return;
    }
    switch (j->dtype) {
    case LD_DTYPE_FLOAT32: maxpool_f32((const float *)xp, g, j->tables, (float *)yp, ip); break;
    case LD_DTYPE_FLOAT64: maxpool_f64((const double *)xp, g, j->tables, (double *)yp, ip); break;
    case LD_DTYPE_INT8: maxpool_i8((const int8_t *)xp, g, j->tables, (int8_t *)yp, ip); break;
    default: maxpool_u8((const uint8_t *)xp, g, j->tables, (uint8_t *)yp, ip); break;
    }
    for (int64_t i = 0; ip && i < g->out_size; i++)
        ip[i] = ip[i] < 0 ? -1 : pl * g->in_size + storage_index(g, ip[i], s->storage_order);
}

/* Items [i0, i1) of a pool job (a claim of ld_conv_pool_run). */
static void pool_items(void *arg, int worker, int64_t i0, int64_t i1)
{
    const pool_job *j = arg;
    for (int64_t i = i0; i < i1; i++) {
        if (i < j->groups)
            j->group((const float *)j->xb + i * GLOBAL_GROUP * j->g->in_size, j->g->in_size,
                     (float *)j->yb + i * GLOBAL_GROUP);
        else
            pool_plane(j, worker, j->grouped + (i - j->groups));
    }
}

static ld_status pool_compute(ld_kernel_ctx *ctx)
{
    const pool_state *s = ctx->state;
    ld_window_geom g;
    ld_status st = pool_geometry(ctx, &g);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    ld_tensor *ind = ctx->n_outputs > 1 ? ctx->outputs[1] : NULL;
    int64_t planes = x->shape.dims[0] * x->shape.dims[1];
    double *tmp = NULL;
    pool_tables tables = {{NULL}};
    if (!s->global && !tables_make(&g, &tables))
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ld_accum accum = ld_accum_make(ctx->numerics, ctx->counters);
    /* float32 sums of a reduced-precision layer: float accumulators, no buffer */
    bool reduced = accum.reduced && s->kind != POOL_MAX && x->dtype == LD_DTYPE_FLOAT32;
    if (!s->global && s->kind != POOL_MAX && !reduced) {
        int64_t cells = planes * g.out_size;
        tmp = malloc((size_t)(cells > 0 ? cells : 1) * sizeof *tmp);
        if (!tmp) {
            tables_free(&tables);
            return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        }
    }
    /* Planes run on the convolutions' claim pool, as the fused chains
     * (exec_fuse.c): one helper thread for the whole run instead of waking
     * OpenMP's (25-180 us after an idle gap) and competing with its spin. */
    int threads = planes * g.out_size * g.k_size > LD_PARALLEL_MIN_WORK ? ctx->threads : 1;
    if (threads > LD_CONV_POOL_MAX_THREADS)
        threads = LD_CONV_POOL_MAX_THREADS;
    if (threads < 1)
        threads = 1;
    /* the separable MaxPool path: one row buffer per worker */
    float *rows = NULL;
    if (!s->global && s->kind == POOL_MAX && !ind && x->dtype == LD_DTYPE_FLOAT32 &&
        g.d[0] == 1 && g.d[1] == 1 && g.d[2] == 1) {
        rows = aligned_alloc(64, (size_t)threads * worker_row_floats(g.in[2]) * sizeof *rows);
        if (!rows) {
            free(tmp);
            tables_free(&tables);
            return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        }
    }
    pool_job job = {.s = s, .g = &g, .tables = &tables, .accum = &accum, .dtype = x->dtype,
                    .es = ld_dtype_size(x->dtype), .xb = x->data, .yb = y->data,
                    .ind = ind ? ind->data : NULL, .tmp = tmp, .rows = rows,
                    .reduced = reduced};
    if (s->global && s->kind == POOL_AVG && !accum.half && x->dtype == LD_DTYPE_FLOAT32) {
        job.groups = planes / GLOBAL_GROUP; /* planes done GLOBAL_GROUP at a time */
        job.grouped = job.groups * GLOBAL_GROUP;
        job.group = global_group(reduced);
    }
    int64_t items = job.groups + (planes - job.grouped);
    ld_conv_pool_run(threads, items, ld_conv_pool_claim(items, threads), pool_items, &job);
    free(tmp);
    free(rows);
    tables_free(&tables);
    return LD_OK;
}

#define POOL_ROW(op, version) \
    {"", op, version, LD_KERNEL_WIDEN_HALF, pool_init, pool_infer, pool_compute, pool_fini, NULL}

static const ld_kernel pool_kernels[] = {
    POOL_ROW("AveragePool", 1),
    POOL_ROW("AveragePool", 7),
    POOL_ROW("AveragePool", 10),
    POOL_ROW("AveragePool", 11),
    POOL_ROW("GlobalAveragePool", 1),
    POOL_ROW("GlobalLpPool", 1),
    POOL_ROW("GlobalLpPool", 2),
    POOL_ROW("GlobalMaxPool", 1),
    POOL_ROW("LpPool", 1),
    POOL_ROW("LpPool", 2),
    POOL_ROW("LpPool", 11),
    POOL_ROW("MaxPool", 1),
    POOL_ROW("MaxPool", 8),
    POOL_ROW("MaxPool", 10),
    POOL_ROW("MaxPool", 11),
    POOL_ROW("MaxPool", 12),
};

LD_KERNEL_FAMILY(pool);
