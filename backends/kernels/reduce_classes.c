/* layerdiff — the reduction accumulator classes: float32 and float64 (the
 * reference numerics), float32 in a reduced-precision layer and integers.
 * The engine that drives them and the numerics they implement are in
 * reduce.c. */
#include <math.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/reduce_internal.h"

/* --- float classes -------------------------------------------------------------- */

static double float_identity(red_op op)
{
    return op == OP_PROD ? 1.0 : op == OP_MAX ? -INFINITY : op == OP_MIN ? INFINITY : 0.0;
}

static void float_init(const red_job *j, red_acc *acc, double *c, int64_t n)
{
    double v = float_identity(j->op);
    for (int64_t i = 0; i < n; i++)
        acc[i].d = v;
    if (c)
        memset(c, 0, (size_t)n * sizeof *c);
}

/* NaN-propagating max/min (numpy semantics). */
static inline double max_nan(double a, double v)
{
    return (v > a || v != v) ? v : a;
}
static inline double min_nan(double a, double v)
{
    return (v < a || v != v) ? v : a;
}

/* The shift LogSumExp subtracts: the maximum when finite, else 0 (an
 * infinite maximum then gives +inf or -inf by itself). */
static inline double lse_shift(double m)
{
    return isfinite(m) ? m : 0.0;
}

static inline void neumaier(double *s, double *c, double v)
{
    double t = *s + v;
    if (fabs(*s) >= fabs(v))
        *c += (*s - t) + v;
    else
        *c += (v - t) + *s;
    *s = t;
}

/* s + c, ignoring a compensation made NaN by an infinite sum. */
static inline double compensated(double s, double c)
{
    return isfinite(s) ? s + c : s;
}

static double float_post(const red_job *j, double v, double shift)
{
    switch (j->post) {
    case POST_MEAN: return v / (double)j->group;
    case POST_SQRT: return sqrt(v);
    case POST_LOG: return log(v);
    case POST_LSE: return lse_shift(shift) + log(v);
    case POST_NONE: break;
    }
    return v;
}

/* float32: double accumulators, four lanes on long contiguous sums. */
#define SUM4(n, EXPR)                                                                 \
    do {                                                                              \
        double l0 = 0, l1 = 0, l2 = 0, l3 = 0;                                        \
        int64_t i = 0;                                                                \
        for (; i + 4 <= (n); i += 4) {                                                \
            { const int64_t k = i; l0 += (EXPR); }                                     \
            { const int64_t k = i + 1; l1 += (EXPR); }                                 \
            { const int64_t k = i + 2; l2 += (EXPR); }                                 \
            { const int64_t k = i + 3; l3 += (EXPR); }                                 \
        }                                                                             \
        for (; i < (n); i++) {                                                        \
            const int64_t k = i;                                                      \
            l0 += (EXPR);                                                             \
        }                                                                             \
        a += (l0 + l1) + (l2 + l3);                                                   \
    } while (0)

static void f32_inner(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                      int64_t out_off)
{
    const float *x = (const float *)j->x + in_off;
    double a = acc->d;
    double sh = j->op == OP_EXPSUM ? lse_shift(((const float *)j->y)[out_off]) : 0.0;
    switch (j->op) {
    case OP_SUM: SUM4(n, (double)x[k]); break;
    case OP_SUMSQ: SUM4(n, (double)x[k] * x[k]); break;
    case OP_L1: SUM4(n, fabs((double)x[k])); break;
    case OP_EXPSUM: SUM4(n, exp((double)x[k] - sh)); break;
    case OP_PROD: for (int64_t i = 0; i < n; i++) a *= x[i]; break;
    case OP_MAX: for (int64_t i = 0; i < n; i++) a = max_nan(a, x[i]); break;
    case OP_MIN: for (int64_t i = 0; i < n; i++) a = min_nan(a, x[i]); break;
    }
    acc->d = a;
}

static void f32_outer(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                      int64_t out_off)
{
    const float *x = (const float *)j->x + in_off;
    const float *m = (const float *)j->y + out_off;
    red_acc *a = acc;
    switch (j->op) {
    case OP_SUM: for (int64_t i = 0; i < n; i++) a[i].d += x[i]; break;
    case OP_SUMSQ: for (int64_t i = 0; i < n; i++) a[i].d += (double)x[i] * x[i]; break;
    case OP_L1: for (int64_t i = 0; i < n; i++) a[i].d += fabs((double)x[i]); break;
    case OP_EXPSUM:
        for (int64_t i = 0; i < n; i++)
            a[i].d += exp((double)x[i] - lse_shift(m[i]));
        break;
    case OP_PROD: for (int64_t i = 0; i < n; i++) a[i].d *= x[i]; break;
    case OP_MAX: for (int64_t i = 0; i < n; i++) a[i].d = max_nan(a[i].d, x[i]); break;
    case OP_MIN: for (int64_t i = 0; i < n; i++) a[i].d = min_nan(a[i].d, x[i]); break;
    }
}

static void f32_finish(const red_job *j, const red_acc *acc, const double *c, int64_t n,
                       int64_t out_off)
{
    float *y = (float *)j->y + out_off;
    for (int64_t i = 0; i < n; i++)
        y[i] = (float)float_post(j, acc[i].d, j->post == POST_LSE ? y[i] : 0.0);
}

/* float64: Neumaier-compensated sums. */
static void f64_rows(const red_job *j, red_acc *a, double *c, const double *x, int64_t n,
                     bool inner, const double *m)
{
    double s = a[0].d, k = c[0];
    for (int64_t i = 0; i < n; i++) {
        double *ps = inner ? &s : &a[i].d, *pk = inner ? &k : &c[i];
        double v = x[i];
        switch (j->op) {
        case OP_SUM: neumaier(ps, pk, v); break;
        case OP_SUMSQ: neumaier(ps, pk, v * v); break;
        case OP_L1: neumaier(ps, pk, fabs(v)); break;
        case OP_EXPSUM: neumaier(ps, pk, exp(v - lse_shift(m[inner ? 0 : i]))); break;
        case OP_PROD: *ps *= v; break;
        case OP_MAX: *ps = max_nan(*ps, v); break;
        case OP_MIN: *ps = min_nan(*ps, v); break;
        }
    }
    if (inner) {
        a[0].d = s;
        c[0] = k;
    }
}

static void f64_inner(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                      int64_t out_off)
{
    f64_rows(j, acc, c, (const double *)j->x + in_off, n, true, (const double *)j->y + out_off);
}

static void f64_outer(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                      int64_t out_off)
{
    f64_rows(j, acc, c, (const double *)j->x + in_off, n, false,
             (const double *)j->y + out_off);
}

static void f64_finish(const red_job *j, const red_acc *acc, const double *c, int64_t n,
                       int64_t out_off)
{
    double *y = (double *)j->y + out_off;
    for (int64_t i = 0; i < n; i++)
        y[i] = float_post(j, compensated(acc[i].d, c[i]), j->post == POST_LSE ? y[i] : 0.0);
}

const red_class ld_red_f32_class = {float_init, f32_inner, f32_outer, f32_finish};
const red_class ld_red_f64_class = {float_init, f64_inner, f64_outer, f64_finish};

/* --- float32 in a reduced-precision layer ----------------------------------------- */

static void f32r_init(const red_job *j, red_acc *acc, double *c, int64_t n)
{
    float v = (float)float_identity(j->op);
    for (int64_t i = 0; i < n; i++)
        acc[i].f = v;
}

static inline float f32r_lse_shift(float m)
{
    return isfinite(m) ? m : 0.0f;
}

/* One step of accumulator a with input v; m is the LogSumExp shift. The
 * exp term is what a half kernel holds: x - shift and exp each rounded. */
static inline float f32r_step(const red_job *j, float a, float v, float m)
{
    const ld_accum *ac = j->accum;
    switch (j->op) {
    case OP_SUM: return ld_accum_add(ac, a, v);
    case OP_SUMSQ: return ld_accum_fma(ac, a, v, v);
    case OP_L1: return ld_accum_add(ac, a, fabsf(v));
    case OP_EXPSUM:
        return ld_accum_add(ac, a, ld_accum_value(ac, expf(ld_accum_value(ac, v - m))));
    case OP_PROD: return ld_accum_mul(ac, a, v);
    case OP_MAX: return (float)max_nan(a, v);
    case OP_MIN: return (float)min_nan(a, v);
    }
    return a;
}

static void f32r_inner(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                       int64_t out_off)
{
    const float *x = (const float *)j->x + in_off;
    float m = j->op == OP_EXPSUM ? f32r_lse_shift(((const float *)j->y)[out_off]) : 0.0f;
    float a = acc->f;
    for (int64_t i = 0; i < n; i++)
        a = f32r_step(j, a, x[i], m);
    acc->f = a;
}

static void f32r_outer(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                       int64_t out_off)
{
    const float *x = (const float *)j->x + in_off, *y = (const float *)j->y + out_off;
    for (int64_t i = 0; i < n; i++)
        acc[i].f = f32r_step(j, acc[i].f, x[i], j->op == OP_EXPSUM ? f32r_lse_shift(y[i]) : 0);
}

static void f32r_finish(const red_job *j, const red_acc *acc, const double *c, int64_t n,
                        int64_t out_off)
{
    float *y = (float *)j->y + out_off;
    for (int64_t i = 0; i < n; i++) {
        float v = acc[i].f;
        switch (j->post) {
        case POST_MEAN: v = v / (float)j->group; break;
        case POST_SQRT: v = sqrtf(v); break;
        case POST_LOG: v = logf(v); break;
        case POST_LSE: v = f32r_lse_shift(y[i]) + logf(v); break;
        case POST_NONE: break;
        }
        y[i] = v;
    }
}

const red_class ld_red_f32r_class = {f32r_init, f32r_inner, f32r_outer, f32r_finish};

/* F32R_ROWS contiguous runs of R (outputs o0, o0 + 1, ...) summed at once,
 * for ReduceSum / ReduceMean / ReduceSumSquare with fp32 accumulation: each
 * output adds its terms in the documented order, exactly as f32r_inner does
 * (ld_accum_add and ld_accum_fma are acc + v and acc + v * v then), but the
 * rows' dependency chains overlap instead of each addition waiting for the
 * previous one (the transformer fixture's ReduceMean over 64 values: 1.8x). */
bool ld_red_f32r_rows_apply(const red_job *j)
{
    return !j->accum->half && (j->op == OP_SUM || j->op == OP_SUMSQ);
}

void ld_red_f32r_rows(const red_job *j, int64_t o0, int64_t R)
{
    const float *x = (const float *)j->x + o0 * R;
    float a[F32R_ROWS];
    red_acc acc[F32R_ROWS];
    f32r_init(j, acc, NULL, F32R_ROWS);
    for (int i = 0; i < F32R_ROWS; i++)
        a[i] = acc[i].f;
    if (j->op == OP_SUM) {
        for (int64_t r = 0; r < R; r++)
            for (int i = 0; i < F32R_ROWS; i++)
                a[i] = a[i] + x[i * R + r];
    } else {
        for (int64_t r = 0; r < R; r++)
            for (int i = 0; i < F32R_ROWS; i++)
                a[i] = a[i] + x[i * R + r] * x[i * R + r];
    }
    for (int i = 0; i < F32R_ROWS; i++)
        acc[i].f = a[i];
    f32r_finish(j, acc, NULL, F32R_ROWS, o0);
}

/* --- integer class ---------------------------------------------------------------- */

static void int_init(const red_job *j, red_acc *acc, double *c, int64_t n)
{
    uint64_t v = 0;
    if (j->op == OP_PROD)
        v = 1;
    else if (j->op == OP_MAX)
        v = j->is_unsigned ? 0 : (uint64_t)INT64_MIN;
    else if (j->op == OP_MIN)
        v = j->is_unsigned ? UINT64_MAX : (uint64_t)INT64_MAX;
    for (int64_t i = 0; i < n; i++)
        acc[i].u = v;
}

static inline uint64_t int_step(const red_job *j, uint64_t a, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (j->op) {
    case OP_SUM: return a + u;
    case OP_SUMSQ: return a + u * u;
    case OP_L1: return a + ((j->is_unsigned || v >= 0) ? u : 0 - u);
    case OP_PROD: return a * u;
    case OP_MAX: return j->is_unsigned ? (u > a ? u : a) : (v > (int64_t)a ? u : a);
    case OP_MIN: return j->is_unsigned ? (u < a ? u : a) : (v < (int64_t)a ? u : a);
    case OP_EXPSUM: break; /* integer LogSumExp runs in the float64 class */
    }
    return a;
}

static void int_inner(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                      int64_t out_off)
{
    const int64_t *x = (const int64_t *)j->x + in_off;
    uint64_t a = acc->u;
    for (int64_t i = 0; i < n; i++)
        a = int_step(j, a, x[i]);
    acc->u = a;
}

static void int_outer(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                      int64_t out_off)
{
    const int64_t *x = (const int64_t *)j->x + in_off;
    for (int64_t i = 0; i < n; i++)
        acc[i].u = int_step(j, acc[i].u, x[i]);
}

static void int_finish(const red_job *j, const red_acc *acc, const double *c, int64_t n,
                       int64_t out_off)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t a = acc[i].u;
        double as_double = j->is_unsigned ? (double)a : (double)(int64_t)a;
        if (j->post == POST_SQRT || j->post == POST_LOG) {
            ((double *)j->y)[out_off + i] =
                j->post == POST_SQRT ? sqrt(as_double) : log(as_double);
            continue;
        }
        uint64_t r = a;
        if (j->post == POST_MEAN)
            r = j->group == 0 ? 0
                : j->is_unsigned ? a / (uint64_t)j->group
                                 : (uint64_t)((int64_t)a / j->group);
        ((uint64_t *)j->y)[out_off + i] = r;
    }
}

const red_class ld_red_int_class = {int_init, int_inner, int_outer, int_finish};
