/* layerdiff — helpers for the data-movement kernels (see shape_util.h). */
#include "backends/kernels/shape_util.h"

#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <unistd.h>

#include "layerdiff/round.h"

/* Copies smaller than this stay on one thread (thread start-up costs more). */
#define PARALLEL_MIN_BYTES ((int64_t)1 << 20)
/* Side of the square tiles a transpose is copied in: 32 source rows of up to
 * 8-byte elements stay in L1 while a tile is written. */
#define TILE 32

void ld_shape_strides(const ld_shape *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int d = shape->rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape->dims[d];
    }
}

int64_t ld_dims_product(const int64_t *dims, int begin, int end)
{
    int64_t n = 1;
    for (int d = begin; d < end; d++)
        n *= dims[d];
    return n;
}

/* --- the strided copy engine ------------------------------------------------------ */

/* The loop over the outer axes of a copy, with source and destination
 * element strides; positions are visited in row-major order. */
typedef struct outer_loop {
    int rank;
    int64_t dims[LD_VIEW_MAX_RANK];
    int64_t src[LD_VIEW_MAX_RANK];
    int64_t dst[LD_VIEW_MAX_RANK];
    int64_t total;
} outer_loop;

static void outer_add(outer_loop *l, int64_t dim, int64_t src, int64_t dst)
{
    l->dims[l->rank] = dim;
    l->src[l->rank] = src;
    l->dst[l->rank] = dst;
    l->rank++;
    l->total *= dim;
}

/* Position pos of the loop (one div/mod per axis, once per thread). */
static void outer_seek(const outer_loop *l, int64_t pos, int64_t *idx, int64_t *so, int64_t *dof)
{
    *so = 0;
    *dof = 0;
    for (int d = l->rank - 1; d >= 0; d--) {
        idx[d] = pos % l->dims[d];
        pos /= l->dims[d];
        *so += idx[d] * l->src[d];
        *dof += idx[d] * l->dst[d];
    }
}

/* Next position: an odometer increment, no division. */
static inline void outer_step(const outer_loop *l, int64_t *idx, int64_t *so, int64_t *dof)
{
    for (int d = l->rank - 1; d >= 0; d--) {
        *so += l->src[d];
        *dof += l->dst[d];
        if (++idx[d] < l->dims[d])
            return;
        *so -= l->src[d] * l->dims[d];
        *dof -= l->dst[d] * l->dims[d];
        idx[d] = 0;
    }
}

typedef enum { BODY_MEMCPY, BODY_STRIDED, BODY_TILED } body_kind;

/* How one copy runs: an outer loop, and per position either a contiguous row
 * (memcpy), a strided row, or (transposes) one band of TILE rows of a 2-D
 * block whose source is contiguous along `a` and strided along `b`. */
typedef struct copy_plan {
    body_kind kind;
    size_t es;
    outer_loop outer;
    int64_t row, row_stride;   /* MEMCPY / STRIDED: inner length, source stride */
    int64_t a, a_dst;          /* TILED: rows (source stride 1), destination stride */
    int64_t b, b_src;          /* TILED: columns (destination stride 1), source stride */
    int64_t n_sub;             /* bands per outer position (TILED), else 1 */
    ld_block_transpose_fn block_fn; /* TILED: SIMD w x w block kernel, or NULL */
    int block_w;
} copy_plan;

#define STRIDED_ROW(T)                                                                  \
    do {                                                                                \
        T *d_ = (T *)dst;                                                               \
        const T *s_ = (const T *)src;                                                   \
        for (int64_t k = 0; k < n; k++)                                                 \
            d_[k] = s_[k * stride];                                                     \
    } while (0)

static void strided_row(uint8_t *dst, const uint8_t *src, int64_t n, int64_t stride, size_t es)
{
    switch (es) {
    case 1: STRIDED_ROW(ld_e1); break;
    case 2: STRIDED_ROW(ld_e2); break;
    case 4: STRIDED_ROW(ld_e4); break;
    case 8: STRIDED_ROW(ld_e8); break;
    default:
        for (int64_t k = 0; k < n; k++)
            memcpy(dst + (size_t)k * es, src + k * stride * (int64_t)es, es);
    }
}

/* dst[i * a_dst + j] = src[i + j * b_src] for i in [i0, i1), j in [j0, j1). */
#define TRANSPOSE_RECT(T)                                                               \
    do {                                                                                \
        T *d_ = (T *)dst;                                                               \
        const T *s_ = (const T *)src;                                                   \
        for (int64_t i = i0; i < i1; i++)                                               \
            for (int64_t j = j0; j < j1; j++)                                           \
                d_[i * a_dst + j] = s_[i + j * b_src];                                  \
    } while (0)

static void transpose_rect(uint8_t *dst, const uint8_t *src, int64_t i0, int64_t i1,
                           int64_t j0, int64_t j1, int64_t a_dst, int64_t b_src, size_t es)
{
    switch (es) {
    case 1: TRANSPOSE_RECT(ld_e1); break;
    case 2: TRANSPOSE_RECT(ld_e2); break;
    case 4: TRANSPOSE_RECT(ld_e4); break;
    case 8: TRANSPOSE_RECT(ld_e8); break;
    default:
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = j0; j < j1; j++)
                memcpy(dst + (i * a_dst + j) * (int64_t)es, src + (i + j * b_src) * (int64_t)es,
                       es);
    }
}

/* Rows [a0, a1) of the transpose, all b columns, in TILE-wide column tiles;
 * whole w x w blocks go through the SIMD kernel when there is one. */
static void tiled_band(const copy_plan *p, uint8_t *dst, const uint8_t *src, int64_t a0,
                       int64_t a1)
{
    int64_t w = p->block_fn ? p->block_w : 1, es = (int64_t)p->es;
    int64_t av = a0 + (a1 - a0) / w * w;
    for (int64_t j0 = 0; j0 < p->b; j0 += TILE) {
        int64_t j1 = j0 + TILE < p->b ? j0 + TILE : p->b;
        int64_t jv = p->block_fn ? j0 + (j1 - j0) / w * w : j0;
        for (int64_t i = a0; i < av && jv > j0; i += w)
            for (int64_t j = j0; j < jv; j += w)
                p->block_fn(dst + (i * p->a_dst + j) * es, p->a_dst,
                            src + (i + j * p->b_src) * es, p->b_src);
        transpose_rect(dst, src, a0, av, jv, j1, p->a_dst, p->b_src, p->es);
        transpose_rect(dst, src, av, a1, j0, j1, p->a_dst, p->b_src, p->es);
    }
}

/* Runs tasks [begin, end) of the plan (task = outer position x band). */
static void run_tasks(const copy_plan *p, uint8_t *dst, const uint8_t *src, int64_t begin,
                      int64_t end)
{
    int64_t idx[LD_VIEW_MAX_RANK], so, dof;
    int64_t es = (int64_t)p->es;
    outer_seek(&p->outer, begin / p->n_sub, idx, &so, &dof);
    int64_t sub = begin % p->n_sub;
    for (int64_t t = begin; t < end; t++) {
        uint8_t *d = dst + dof * es;
        const uint8_t *s = src + so * es;
        if (p->kind == BODY_MEMCPY) {
            memcpy(d, s, (size_t)(p->row * es));
        } else if (p->kind == BODY_STRIDED) {
            strided_row(d, s, p->row, p->row_stride, p->es);
        } else {
            int64_t a0 = sub * TILE, a1 = a0 + TILE < p->a ? a0 + TILE : p->a;
            tiled_band(p, d, s, a0, a1);
        }
        if (++sub == p->n_sub) {
            sub = 0;
            outer_step(&p->outer, idx, &so, &dof);
        }
    }
}

/* Drops size-1 axes and merges axes that are contiguous in the source.
 * Returns false when the view is empty. */
static bool coalesce(const ld_view *v, ld_view *c)
{
    c->rank = 0;
    for (int d = 0; d < v->rank; d++) {
        if (v->dims[d] == 0)
            return false;
        if (v->dims[d] == 1)
            continue;
        if (c->rank > 0 && c->strides[c->rank - 1] == v->strides[d] * v->dims[d]) {
            c->dims[c->rank - 1] *= v->dims[d];
            c->strides[c->rank - 1] = v->strides[d];
        } else {
            c->dims[c->rank] = v->dims[d];
            c->strides[c->rank] = v->strides[d];
            c->rank++;
        }
    }
    return true;
}

static void make_plan(const ld_view *c, size_t es, copy_plan *p)
{
    int r = c->rank;
    int64_t dst_strides[LD_VIEW_MAX_RANK], s = 1;
    for (int d = r - 1; d >= 0; d--) {
        dst_strides[d] = s;
        s *= c->dims[d];
    }
    memset(p, 0, sizeof *p);
    p->es = es;
    p->n_sub = 1;
    p->outer.total = 1;
    int tile_axis = -1;
    if (c->strides[r - 1] != 1)
        for (int d = 0; d < r - 1; d++)
            if (c->strides[d] == 1)
                tile_axis = d;
    if (tile_axis >= 0) {
        p->kind = BODY_TILED;
        p->a = c->dims[tile_axis];
        p->a_dst = dst_strides[tile_axis];
        p->b = c->dims[r - 1];
        p->b_src = c->strides[r - 1];
        p->n_sub = (p->a + TILE - 1) / TILE;
        p->block_fn = ld_block_transpose_kernel(es, &p->block_w);
    } else {
        p->kind = c->strides[r - 1] == 1 ? BODY_MEMCPY : BODY_STRIDED;
        p->row = c->dims[r - 1];
        p->row_stride = c->strides[r - 1];
    }
    for (int d = 0; d < r - 1; d++)
        if (d != tile_axis)
            outer_add(&p->outer, c->dims[d], c->strides[d], dst_strides[d]);
}

void ld_view_copy(void *dst, const void *src, const ld_view *v, size_t elem_size, int threads)
{
    ld_view c;
    if (!coalesce(v, &c))
        return;
    if (c.rank == 0) {
        memcpy(dst, src, elem_size);
        return;
    }
    copy_plan p;
    make_plan(&c, elem_size, &p);
    int64_t n_tasks = p.outer.total * p.n_sub;
    int64_t bytes = ld_dims_product(c.dims, 0, c.rank) * (int64_t)elem_size;
    int nt = threads > 1 && bytes >= PARALLEL_MIN_BYTES ? threads : 1;
    if (nt > n_tasks)
        nt = (int)n_tasks;
    if (nt <= 1) {
        run_tasks(&p, dst, src, 0, n_tasks);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        int64_t begin = n_tasks * t / n, end = n_tasks * (t + 1) / n;
        if (begin < end)
            run_tasks(&p, dst, src, begin, end);
    }
}

/* --- reading small integer inputs ------------------------------------------------- */

static int64_t double_to_int64(double x)
{
    if (x != x)
        return 0;
    if (x >= 9.2e18)
        return INT64_MAX;
    if (x <= -9.2e18)
        return INT64_MIN;
    return (int64_t)x;
}

int64_t ld_tensor_int_at(const ld_tensor *t, int64_t i)
{
    const void *p = (const uint8_t *)t->data + (size_t)i * ld_dtype_size(t->dtype);
    switch (t->dtype) {
    case LD_DTYPE_INT8: return *(const int8_t *)p;
    case LD_DTYPE_UINT8: return *(const uint8_t *)p;
    case LD_DTYPE_BOOL: return *(const uint8_t *)p != 0;
    case LD_DTYPE_INT16: return *(const int16_t *)p;
    case LD_DTYPE_UINT16: return *(const uint16_t *)p;
    case LD_DTYPE_INT32: return *(const int32_t *)p;
    case LD_DTYPE_UINT32: return *(const uint32_t *)p;
    case LD_DTYPE_INT64: return *(const int64_t *)p;
    case LD_DTYPE_UINT64: {
        uint64_t u = *(const uint64_t *)p;
        return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    case LD_DTYPE_FLOAT32: return double_to_int64(*(const float *)p);
    case LD_DTYPE_FLOAT64: return double_to_int64(*(const double *)p);
    case LD_DTYPE_FLOAT16: return double_to_int64(ld_fp16_to_fp32(*(const ld_fp16 *)p));
    case LD_DTYPE_BFLOAT16: return double_to_int64(ld_bf16_to_fp32(*(const ld_bf16 *)p));
    default: return 0;
    }
}

static ld_status check_int_input(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what)
{
    if (!t)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input '%s' is missing", what);
    if (!ld_dtype_is_supported(t->dtype) || t->dtype == LD_DTYPE_BOOL)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input '%s' must hold integers, not %s", what,
                              ld_dtype_name(t->dtype));
    if (t->shape.rank > 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input '%s' must be a 1-D tensor, got rank %d",
                              what, t->shape.rank);
    return ld_krequire_values(ctx, t, what);
}

ld_status ld_kread_ints(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what, int64_t *out,
                        int cap, int *n)
{
    ld_status st = check_int_input(ctx, t, what);
    if (st != LD_OK)
        return st;
    if (t->count > cap)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input '%s' has %" PRId64 " elements, at most "
                              "%d allowed", what, t->count, cap);
    for (int64_t i = 0; i < t->count; i++)
        out[i] = ld_tensor_int_at(t, i);
    *n = (int)t->count;
    return LD_OK;
}

ld_status ld_kread_ints_alloc(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what,
                              int64_t **out, int64_t *n)
{
    ld_status st = check_int_input(ctx, t, what);
    if (st != LD_OK)
        return st;
    int64_t *v = malloc((size_t)(t->count ? t->count : 1) * sizeof *v);
    if (!v)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory reading input '%s'", what);
    for (int64_t i = 0; i < t->count; i++)
        v[i] = ld_tensor_int_at(t, i);
    *out = v;
    *n = t->count;
    return LD_OK;
}

ld_status ld_kread_scalar_int(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what,
                              int64_t *out)
{
    ld_status st = check_int_input(ctx, t, what);
    if (st != LD_OK)
        return st;
    if (t->count != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input '%s' must hold one value, it has %" PRId64,
                              what, t->count);
    *out = ld_tensor_int_at(t, 0);
    return LD_OK;
}

ld_status ld_kread_list(ld_kernel_ctx *ctx, bool from_attr, const char *name, int input,
                        int64_t *out, int cap, int *n, bool *present)
{
    *n = 0;
    *present = false;
    if (from_attr) {
        const int64_t *v;
        size_t len;
        if (ld_node_attr_ints(ctx->node, name, &v, &len, ctx->err) != LD_OK)
            return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name,
                                   ctx->node->op_type);
        if (!ld_node_attr(ctx->node, name))
            return LD_OK;
        if (len > (size_t)cap)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute '%s' has %zu entries, at most "
                                  "%d allowed", name, len, cap);
        if (len)
            memcpy(out, v, len * sizeof *v);
        *n = (int)len;
        *present = true;
        return LD_OK;
    }
    const ld_tensor *t = ld_kin(ctx, input);
    if (!t)
        return LD_OK;
    *present = true;
    return ld_kread_ints(ctx, t, name, out, cap, n);
}

ld_status ld_kattr_int(ld_kernel_ctx *ctx, const char *name, int64_t fallback, int64_t *out)
{
    if (ld_node_attr_int(ctx->node, name, fallback, out, ctx->err) != LD_OK)
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    return LD_OK;
}

ld_status ld_kattr_string(ld_kernel_ctx *ctx, const char *name, const char *fallback,
                          const char **out)
{
    if (ld_node_attr_string(ctx->node, name, fallback, out, ctx->err) != LD_OK)
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    return LD_OK;
}

/* --- small things ------------------------------------------------------------------- */

ld_status ld_kelem_size(ld_kernel_ctx *ctx, ld_dtype dtype, size_t *size)
{
    *size = ld_dtype_size(dtype);
    if (*size == 0)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(dtype));
    return LD_OK;
}

ld_status ld_krequire_data(ld_kernel_ctx *ctx, int i, const ld_tensor **x)
{
    size_t es;
    *x = ld_kin(ctx, i);
    ld_status st = ld_krequire(ctx, i);
    if (st == LD_OK)
        st = ld_kelem_size(ctx, (*x)->dtype, &es);
    return st;
}

int64_t ld_kernel_value_shaped_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t limit = LD_KERNEL_MAX_VALUE_SHAPED_BYTES;
    if (pages > 0 && page > 0 && (int64_t)pages < limit / page)
        limit = (int64_t)pages * page;
    return limit;
}

ld_status ld_kcheck_shape(ld_kernel_ctx *ctx, const ld_shape *shape, ld_dtype dtype,
                          const char *what)
{
    int64_t count;
    if (ld_shape_count(shape, &count, what, ctx->err) != LD_OK)
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    int64_t es = (int64_t)ld_dtype_size(dtype), limit = ld_kernel_value_shaped_limit();
    if (es && count > limit / es) {
        char buf[256];
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "%s: shape %s (%" PRId64 " elements of %s) "
                              "exceeds the limit of %.1f GiB for shapes read from input values",
                              what, ld_shape_format(shape, buf, sizeof buf), count,
                              ld_dtype_name(dtype), (double)limit / (1 << 30));
    }
    return LD_OK;
}

#define FILL(T)                                                                         \
    do {                                                                                \
        T v_;                                                                           \
        memcpy(&v_, value, sizeof v_);                                                  \
        T *d_ = dst;                                                                    \
        for (int64_t i = 0; i < n; i++)                                                 \
            d_[i] = v_;                                                                 \
    } while (0)

void ld_fill_elements(void *dst, const void *value, size_t elem_size, int64_t n)
{
    if (n <= 0)
        return; /* dst may be NULL then */
    switch (elem_size) {
    case 1: memset(dst, *(const uint8_t *)value, (size_t)n); break;
    case 2: FILL(ld_e2); break;
    case 4: FILL(ld_e4); break;
    case 8: FILL(ld_e8); break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy((uint8_t *)dst + (size_t)i * elem_size, value, elem_size);
    }
}

bool ld_dtype_one(ld_dtype dtype, void *out)
{
    switch (dtype) {
    case LD_DTYPE_FLOAT32: { float v = 1.0f; memcpy(out, &v, sizeof v); return true; }
    case LD_DTYPE_FLOAT64: { double v = 1.0; memcpy(out, &v, sizeof v); return true; }
    case LD_DTYPE_FLOAT16: { uint16_t v = 0x3C00; memcpy(out, &v, sizeof v); return true; }
    case LD_DTYPE_BFLOAT16: { uint16_t v = 0x3F80; memcpy(out, &v, sizeof v); return true; }
    case LD_DTYPE_INT8: case LD_DTYPE_UINT8: case LD_DTYPE_BOOL:
        *(uint8_t *)out = 1; return true;
    case LD_DTYPE_INT16: case LD_DTYPE_UINT16: { uint16_t v = 1; memcpy(out, &v, 2); return true; }
    case LD_DTYPE_INT32: case LD_DTYPE_UINT32: { uint32_t v = 1; memcpy(out, &v, 4); return true; }
    case LD_DTYPE_INT64: case LD_DTYPE_UINT64: { uint64_t v = 1; memcpy(out, &v, 8); return true; }
    default: return false;
    }
}

ld_status ld_knorm_axis(ld_kernel_ctx *ctx, int64_t axis, int rank, bool inclusive,
                        const char *what, int *out)
{
    int64_t hi = inclusive ? rank : rank - 1;
    int64_t a = axis < 0 ? axis + rank : axis;
    if (axis < -(int64_t)rank || a < 0 || a > hi)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s %" PRId64 " is out of range for rank %d "
                              "(allowed: %d..%" PRId64 ")", what, axis, rank, -rank, hi);
    *out = (int)a;
    return LD_OK;
}

/* --- indices ------------------------------------------------------------------------ */

ld_status ld_krequire_indices(ld_kernel_ctx *ctx, int i, const ld_tensor **t)
{
    *t = ld_kin(ctx, i);
    ld_status st = ld_krequire(ctx, i);
    if (st != LD_OK)
        return st;
    if ((*t)->dtype != LD_DTYPE_INT32 && (*t)->dtype != LD_DTYPE_INT64)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices must be int32 or int64, not %s",
                              ld_dtype_name((*t)->dtype));
    return LD_OK;
}

ld_status ld_kindex_error(ld_kernel_ctx *ctx, int64_t value, int64_t pos, int axis, int64_t dim)
{
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "index %" PRId64 " (indices element %" PRId64
                          ") is out of range for axis %d of size %" PRId64, value, pos, axis,
                          dim);
}

ld_status ld_element_offsets(ld_kernel_ctx *ctx, const ld_tensor *data, const ld_tensor *ind,
                             int axis, int64_t *offsets)
{
    int r = data->shape.rank;
    int64_t ds[LD_MAX_RANK], idx[LD_MAX_RANK] = {0};
    ld_shape_strides(&data->shape, ds);
    int64_t dim = data->shape.dims[axis], row = ind->shape.dims[r - 1];
    int64_t rows = row ? ind->count / row : 0, base = 0;
    for (int64_t rw = 0, pos = 0; rw < rows; rw++) {
        for (int64_t j = 0; j < row; j++, pos++) {
            int64_t k;
            if (!ld_knormalize_index(ld_kindex_at(ind, pos), dim, &k))
                return ld_kindex_error(ctx, ld_kindex_at(ind, pos), pos, axis, dim);
            offsets[pos] = base + (axis == r - 1 ? 0 : j) + k * ds[axis];
        }
        /* Odometer over axes 0..r-2; the axis itself contributes through k. */
        for (int d = r - 2; d >= 0; d--) {
            if (d != axis)
                base += ds[d];
            if (++idx[d] < ind->shape.dims[d])
                break;
            if (d != axis)
                base -= ds[d] * ind->shape.dims[d];
            idx[d] = 0;
        }
    }
    return LD_OK;
}

ld_status ld_nd_tuple_offset(ld_kernel_ctx *ctx, const ld_shape *data_shape,
                             const int64_t *strides, const ld_tensor *ind, int b, int m,
                             int64_t tuple, int64_t *offset)
{
    int64_t off = 0;
    for (int c = 0; c < m; c++) {
        int64_t pos = tuple * m + c, dim = data_shape->dims[b + c], k;
        if (!ld_knormalize_index(ld_kindex_at(ind, pos), dim, &k))
            return ld_kindex_error(ctx, ld_kindex_at(ind, pos), pos, b + c, dim);
        off += k * strides[b + c];
    }
    *offset = off;
    return LD_OK;
}
