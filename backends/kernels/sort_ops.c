/* layerdiff — kernels that order values: TopK (1: k attribute; 10: K input;
 * 11: largest/sorted) and Unique (11).
 *
 * TopK runs with LD_KERNEL_WIDEN_HALF (float16 -> float32 is exact and so is
 * the way back, so the values are unchanged) and keeps the best k of each
 * slice in a typed binary heap: O(n log k), no comparator calls through
 * pointers. Ties keep the lower index first; NaN ranks above every number
 * (as numpy's sort). The output is always sorted (with sorted=0 the order is
 * unspecified, so sorted is a valid choice).
 *
 * Unique works on any dtype, comparing in the element's own type; NaNs
 * compare equal to each other and above numbers, -0.0 equals 0.0. */
#include <inttypes.h>
#include <stdlib.h>

#include "backends/kernels/kernels.h"
#include "backends/kernels/shape_util.h"
#include "layerdiff/round.h"

/* --- TopK ---------------------------------------------------------------------------- */

typedef struct topk_params {
    int axis;
    int64_t k;
    bool largest;
} topk_params;

static ld_status topk_params_read(ld_kernel_ctx *ctx, const ld_tensor *x, topk_params *p)
{
    int64_t axis, largest = 1;
    ld_status st = ld_kattr_int(ctx, "axis", -1, &axis);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, axis, x->shape.rank, false, "axis", &p->axis);
    if (st == LD_OK && ctx->node->opset >= 11)
        st = ld_kattr_int(ctx, "largest", 1, &largest);
    if (st == LD_OK && ctx->node->opset < 10) {
        if (!ld_node_attr(ctx->node, "k"))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'k' is missing");
        st = ld_kattr_int(ctx, "k", 0, &p->k);
    } else if (st == LD_OK) {
        st = ld_kread_scalar_int(ctx, ld_kin(ctx, 1), "K", &p->k);
    }
    if (st != LD_OK)
        return st;
    p->largest = largest != 0;
    int64_t dim = x->shape.dims[p->axis];
    if (p->k < 0 || p->k > dim)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "k = %" PRId64 " is outside [0, %" PRId64
                              "] (axis %d)", p->k, dim, p->axis);
    return LD_OK;
}

static ld_status topk_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    topk_params p;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = topk_params_read(ctx, x, &p);
    if (st != LD_OK)
        return st;
    if (x->dtype == LD_DTYPE_BOOL)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype bool is not supported");
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    outs[0].shape.dims[p.axis] = p.k;
    outs[1].dtype = LD_DTYPE_INT64;
    outs[1].shape = outs[0].shape;
    return LD_OK;
}

/* BETTER(a, b): a ranks before b. NaN (x != x; never for integers) ranks
 * above every number; equal values rank by lower index. */
#define TOPK_BETTER_LARGEST(a, b)                                                       \
    ((a).v != (a).v ? ((b).v != (b).v ? (a).i < (b).i : true)                           \
     : (b).v != (b).v ? false                                                           \
     : (a).v != (b).v ? (a).v > (b).v : (a).i < (b).i)
#define TOPK_BETTER_SMALLEST(a, b)                                                      \
    ((a).v != (a).v ? ((b).v != (b).v ? (a).i < (b).i : false)                          \
     : (b).v != (b).v ? true                                                            \
     : (a).v != (b).v ? (a).v < (b).v : (a).i < (b).i)

/* One slice: heap[0..k) holds the best k so far with the worst at the root
 * (a heap ordered by "worse"), then is emptied worst-first from the back. */
#define TOPK_SLICE_FN(NAME, T, BETTER)                                                  \
    static void NAME(const void *xv, int64_t dim, int64_t stride, int64_t k,            \
                     void *valsv, int64_t *inds, void *scratch)                         \
    {                                                                                   \
        typedef struct { T v; int64_t i; } item;                                        \
        const T *x = xv;                                                                \
        T *vals = valsv;                                                                \
        item *h = scratch;                                                              \
        int64_t n = 0;                                                                  \
        for (int64_t j = 0; j < dim; j++) {                                             \
            item e = {x[j * stride], j};                                                \
            int64_t c;                                                                  \
            if (n < k) { /* sift up */                                                  \
                c = n++;                                                                \
                while (c > 0 && BETTER(h[(c - 1) / 2], e)) {                            \
                    h[c] = h[(c - 1) / 2];                                              \
                    c = (c - 1) / 2;                                                    \
                }                                                                       \
                h[c] = e;                                                               \
                continue;                                                               \
            }                                                                           \
            if (!BETTER(e, h[0]))                                                       \
                continue;                                                               \
            c = 0; /* replace the root, sift down */                                    \
            for (;;) {                                                                  \
                int64_t l = 2 * c + 1, w = c;                                           \
                item cw = e;                                                            \
                if (l < n && BETTER(cw, h[l])) { w = l; cw = h[l]; }                    \
                if (l + 1 < n && BETTER(cw, h[l + 1])) { w = l + 1; cw = h[l + 1]; }    \
                if (w == c) break;                                                      \
                h[c] = h[w];                                                            \
                c = w;                                                                  \
            }                                                                           \
            h[c] = e;                                                                   \
        }                                                                               \
        for (int64_t out = n - 1; out >= 0; out--) {                                    \
            vals[out * stride] = h[0].v;                                                \
            inds[out * stride] = h[0].i;                                                \
            item last = h[out];                                                         \
            int64_t c = 0, m = out;                                                     \
            for (;;) {                                                                  \
                int64_t l = 2 * c + 1, w = c;                                           \
                item cw = last;                                                         \
                if (l < m && BETTER(cw, h[l])) { w = l; cw = h[l]; }                    \
                if (l + 1 < m && BETTER(cw, h[l + 1])) { w = l + 1; cw = h[l + 1]; }    \
                if (w == c) break;                                                      \
                h[c] = h[w];                                                            \
                c = w;                                                                  \
            }                                                                           \
            h[c] = last;                                                                \
        }                                                                               \
    }

#define TOPK_TYPE(SUFFIX, T)                                                            \
    TOPK_SLICE_FN(topk_max_##SUFFIX, T, TOPK_BETTER_LARGEST)                            \
    TOPK_SLICE_FN(topk_min_##SUFFIX, T, TOPK_BETTER_SMALLEST)

TOPK_TYPE(f32, float)
TOPK_TYPE(f64, double)
TOPK_TYPE(i8, int8_t)
TOPK_TYPE(u8, uint8_t)
TOPK_TYPE(i16, int16_t)
TOPK_TYPE(u16, uint16_t)
TOPK_TYPE(i32, int32_t)
TOPK_TYPE(u32, uint32_t)
TOPK_TYPE(i64, int64_t)
TOPK_TYPE(u64, uint64_t)

typedef void (*topk_slice_fn)(const void *x, int64_t dim, int64_t stride, int64_t k, void *vals,
                              int64_t *inds, void *scratch);

static ld_status topk_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *vals = ld_kout(ctx, 0), *inds = ld_kout(ctx, 1);
    topk_params p;
    ld_status st = topk_params_read(ctx, x, &p);
    if (st != LD_OK || p.k == 0 || x->count == 0)
        return st;
    /* One call per slice, not per element. */
#define PICK(SUFFIX) (p.largest ? topk_max_##SUFFIX : topk_min_##SUFFIX)
    topk_slice_fn fn;
    switch (x->dtype) {
    case LD_DTYPE_FLOAT32: fn = PICK(f32); break;
    case LD_DTYPE_FLOAT64: fn = PICK(f64); break;
    case LD_DTYPE_INT8: fn = PICK(i8); break;
    case LD_DTYPE_UINT8: fn = PICK(u8); break;
    case LD_DTYPE_INT16: fn = PICK(i16); break;
    case LD_DTYPE_UINT16: fn = PICK(u16); break;
    case LD_DTYPE_INT32: fn = PICK(i32); break;
    case LD_DTYPE_UINT32: fn = PICK(u32); break;
    case LD_DTYPE_INT64: fn = PICK(i64); break;
    case LD_DTYPE_UINT64: fn = PICK(u64); break;
    default:
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    }
#undef PICK
    size_t es = ld_dtype_size(x->dtype);
    int64_t dim = x->shape.dims[p.axis];
    int64_t outer = ld_dims_product(x->shape.dims, 0, p.axis);
    int64_t inner = ld_dims_product(x->shape.dims, p.axis + 1, x->shape.rank);
    /* Outputs the model omits still need somewhere to go. */
    size_t out_count = (size_t)(outer * p.k * inner);
    void *scratch = malloc((size_t)p.k * 16);
    void *vbuf = vals ? vals->data : malloc(out_count * es);
    int64_t *ibuf = inds ? inds->data : malloc(out_count * sizeof *ibuf);
    if (!scratch || !vbuf || !ibuf) {
        st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t in_at = o * dim * inner + i, out_at = o * p.k * inner + i;
            fn((const uint8_t *)x->data + in_at * (int64_t)es, dim, inner, p.k,
               (uint8_t *)vbuf + out_at * (int64_t)es, ibuf + out_at, scratch);
        }
out:
    free(scratch);
    if (!vals)
        free(vbuf);
    if (!inds)
        free(ibuf);
    return st;
}

/* --- Unique ---------------------------------------------------------------------------- */

/* The input seen as `n` slices along the axis, each of outer x inner elements. */
typedef struct unique_view {
    const uint8_t *data;
    ld_dtype dtype;
    size_t es;
    int64_t outer, n, inner;
} unique_view;

/* Three-way compare of two elements of the same dtype; NaN above numbers
 * and equal to NaN. */
static int compare_elements(const uint8_t *a, const uint8_t *b, ld_dtype dtype)
{
#define CMP3(x, y) ((x) < (y) ? -1 : (x) > (y) ? 1 : 0)
#define CMP_AS(T)                                                                       \
    do {                                                                                \
        T x_, y_;                                                                       \
        memcpy(&x_, a, sizeof x_);                                                      \
        memcpy(&y_, b, sizeof y_);                                                      \
        return CMP3(x_, y_);                                                            \
    } while (0)
#define CMP_FLOAT(x, y)                                                                 \
    ((x) != (x) ? ((y) != (y) ? 0 : 1) : (y) != (y) ? -1 : CMP3(x, y))
    switch (dtype) {
    case LD_DTYPE_INT8: CMP_AS(int8_t);
    case LD_DTYPE_UINT8: case LD_DTYPE_BOOL: CMP_AS(uint8_t);
    case LD_DTYPE_INT16: CMP_AS(int16_t);
    case LD_DTYPE_UINT16: CMP_AS(uint16_t);
    case LD_DTYPE_INT32: CMP_AS(int32_t);
    case LD_DTYPE_UINT32: CMP_AS(uint32_t);
    case LD_DTYPE_INT64: CMP_AS(int64_t);
    case LD_DTYPE_UINT64: CMP_AS(uint64_t);
    case LD_DTYPE_FLOAT32: { float x, y; memcpy(&x, a, 4); memcpy(&y, b, 4); return CMP_FLOAT(x, y); }
    case LD_DTYPE_FLOAT64: { double x, y; memcpy(&x, a, 8); memcpy(&y, b, 8); return CMP_FLOAT(x, y); }
    case LD_DTYPE_FLOAT16: {
        ld_fp16 h, g;
        memcpy(&h, a, 2);
        memcpy(&g, b, 2);
        float x = ld_fp16_to_fp32(h), y = ld_fp16_to_fp32(g);
        return CMP_FLOAT(x, y);
    }
    default: {
        ld_bf16 h, g;
        memcpy(&h, a, 2);
        memcpy(&g, b, 2);
        float x = ld_bf16_to_fp32(h), y = ld_bf16_to_fp32(g);
        return CMP_FLOAT(x, y);
    }
    }
#undef CMP3
#undef CMP_AS
#undef CMP_FLOAT
}

static int compare_slices(const unique_view *v, int64_t s, int64_t t)
{
    for (int64_t o = 0; o < v->outer; o++) {
        const uint8_t *a = v->data + ((o * v->n + s) * v->inner) * (int64_t)v->es;
        const uint8_t *b = v->data + ((o * v->n + t) * v->inner) * (int64_t)v->es;
        for (int64_t i = 0; i < v->inner; i++) {
            int c = compare_elements(a + i * (int64_t)v->es, b + i * (int64_t)v->es, v->dtype);
            if (c)
                return c;
        }
    }
    return 0;
}

/* qsort_r comparator over slice ids: by value, then by id (a stable order). */
static int compare_ids(const void *pa, const void *pb, void *arg)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    int c = compare_slices(arg, a, b);
    return c ? c : (a > b) - (a < b);
}

typedef struct unique_result {
    int64_t n_unique;
    int64_t *first;   /* per unique value (output order): index of its first occurrence */
    int64_t *counts;  /* per unique value */
    int64_t *inverse; /* per input slice: its unique value's position */
} unique_result;

static void unique_result_free(unique_result *r)
{
    free(r->first);
    free(r->counts);
    free(r->inverse);
}

/* Groups equal slices; unique values in sorted order, or in order of first
 * occurrence. */
static ld_status unique_find(ld_kernel_ctx *ctx, const unique_view *v, bool sorted,
                             unique_result *r)
{
    size_t n = (size_t)v->n, cap = n ? n : 1;
    int64_t *ids = malloc(cap * sizeof *ids);     /* slice ids in sorted order */
    int64_t *group = malloc(cap * sizeof *group); /* per slice id: its run (sorted order) */
    int64_t *pos = malloc(cap * sizeof *pos);     /* per run: output position */
    r->first = malloc(cap * sizeof *r->first);
    r->counts = calloc(cap, sizeof *r->counts);
    r->inverse = malloc(cap * sizeof *r->inverse);
    ld_status st = LD_OK;
    if (!ids || !group || !pos || !r->first || !r->counts || !r->inverse) {
        st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = (int64_t)i;
    qsort_r(ids, n, sizeof *ids, compare_ids, (void *)v);
    /* Runs of equal slices; the id tie-break puts each run's first
     * occurrence at its start. */
    r->n_unique = 0;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || compare_slices(v, ids[i - 1], ids[i]) != 0)
            r->n_unique++;
        group[ids[i]] = r->n_unique - 1;
    }
    if (sorted) {
        for (int64_t g = 0; g < r->n_unique; g++)
            pos[g] = g;
    } else {
        /* Number the runs by first occurrence: scanning ids upwards meets
         * each run first at its first occurrence. */
        int64_t next = 0;
        for (int64_t g = 0; g < r->n_unique; g++)
            pos[g] = -1;
        for (size_t i = 0; i < n; i++)
            if (pos[group[i]] < 0)
                pos[group[i]] = next++;
    }
    for (size_t i = n; i-- > 0;) {
        int64_t u = pos[group[i]];
        r->inverse[i] = u;
        r->first[u] = (int64_t)i; /* the last write is the lowest id */
        r->counts[u]++;
    }
out:
    free(ids);
    free(group);
    free(pos);
    return st;
}

static ld_status unique_params(ld_kernel_ctx *ctx, const ld_tensor *x, unique_view *v,
                               int *axis, bool *sorted)
{
    int64_t a, s;
    ld_status st = ld_kattr_int(ctx, "sorted", 1, &s);
    *axis = -1;
    if (st == LD_OK && ld_node_attr(ctx->node, "axis")) {
        st = ld_kattr_int(ctx, "axis", 0, &a);
        if (st == LD_OK)
            st = ld_knorm_axis(ctx, a, x->shape.rank, false, "axis", axis);
    }
    if (st != LD_OK)
        return st;
    *sorted = s != 0;
    v->data = x->data;
    v->dtype = x->dtype;
    v->es = ld_dtype_size(x->dtype);
    v->outer = *axis < 0 ? 1 : ld_dims_product(x->shape.dims, 0, *axis);
    v->n = *axis < 0 ? x->count : x->shape.dims[*axis];
    v->inner = *axis < 0 ? 1 : ld_dims_product(x->shape.dims, *axis + 1, x->shape.rank);
    return LD_OK;
}

static ld_status unique_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    for (int i = 0; i < ctx->n_outputs; i++) {
        outs[i].dtype = i == 0 && x ? x->dtype : LD_DTYPE_INT64;
        outs[i].deferred = true;
    }
    return st;
}

/* Allocates deferred output i as a 1-D int64 tensor holding values[n]. */
static ld_status unique_int_output(ld_kernel_ctx *ctx, int i, const int64_t *values, int64_t n)
{
    if (i >= ctx->n_outputs || ctx->node->outputs[i] < 0)
        return LD_OK;
    ld_shape shape = {.rank = 1, .dims = {n}};
    ld_tensor *t;
    ld_status st = ld_kernel_alloc_output(ctx, i, LD_DTYPE_INT64, &shape, &t);
    if (st == LD_OK && n)
        memcpy(t->data, values, (size_t)n * sizeof *values);
    return st;
}

static ld_status unique_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    unique_view v;
    unique_result r = {0};
    int axis;
    bool sorted;
    ld_status st = unique_params(ctx, x, &v, &axis, &sorted);
    if (st == LD_OK)
        st = unique_find(ctx, &v, sorted, &r);
    if (st == LD_OK && ctx->node->outputs[0] >= 0) {
        ld_shape shape = {.rank = 1, .dims = {r.n_unique}};
        if (axis >= 0) {
            shape = x->shape;
            shape.dims[axis] = r.n_unique;
        }
        ld_tensor *y;
        st = ld_kernel_alloc_output(ctx, 0, x->dtype, &shape, &y);
        int64_t row = v.inner * (int64_t)v.es;
        uint8_t *dst = st == LD_OK ? y->data : NULL;
        for (int64_t o = 0; st == LD_OK && o < v.outer; o++)
            for (int64_t u = 0; u < r.n_unique; u++, dst += row)
                memcpy(dst, v.data + (o * v.n + r.first[u]) * row, (size_t)row);
    }
    if (st == LD_OK)
        st = unique_int_output(ctx, 1, r.first, r.n_unique);
    if (st == LD_OK)
        st = unique_int_output(ctx, 2, r.inverse, v.n);
    if (st == LD_OK)
        st = unique_int_output(ctx, 3, r.counts, r.n_unique);
    unique_result_free(&r);
    return st;
}

static const ld_kernel sort_kernels[] = {
    {"", "TopK", 1, LD_KERNEL_WIDEN_HALF, NULL, topk_infer, topk_compute, NULL, NULL},
    {"", "TopK", 10, LD_KERNEL_WIDEN_HALF, NULL, topk_infer, topk_compute, NULL, NULL},
    {"", "TopK", 11, LD_KERNEL_WIDEN_HALF, NULL, topk_infer, topk_compute, NULL, NULL},
    {"", "Unique", 11, 0, NULL, unique_infer, unique_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(sort);
