/* layerdiff — kernels that select elements by index or by mask: Gather,
 * GatherElements, GatherND, OneHot, Compress, NonZero. Data moves by element
 * size (every dtype). Every index is checked: out of range fails naming the
 * node, the index, its position and the axis size; negative indices count
 * from the back as the spec says. */
#include <inttypes.h>

#include "backends/kernels/kernels.h"
#include "backends/kernels/shape_util.h"

/* Copies one element of es bytes (constant sizes compile to one move). */
static inline void copy_element(uint8_t *dst, const uint8_t *src, size_t es)
{
    switch (es) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, es);
    }
}

/* --- Gather (1, 11, 13): out = data[..., indices, ...] along axis ------------------- */

static ld_status gather_axis(ld_kernel_ctx *ctx, const ld_tensor *data, int *axis)
{
    int64_t a;
    ld_status st = ld_kattr_int(ctx, "axis", 0, &a);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, a, data->shape.rank, false, "axis", axis);
    return st;
}

static ld_status gather_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *data, *ind;
    int axis;
    ld_status st = ld_krequire_data(ctx, 0, &data);
    if (st == LD_OK)
        st = ld_krequire_indices(ctx, 1, &ind);
    if (st == LD_OK)
        st = gather_axis(ctx, data, &axis);
    if (st != LD_OK)
        return st;
    int rank = data->shape.rank - 1 + ind->shape.rank;
    if (rank > LD_MAX_RANK)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "output rank %d exceeds %d", rank,
                              LD_MAX_RANK);
    ld_shape out = {.rank = 0};
    for (int d = 0; d < axis; d++)
        out.dims[out.rank++] = data->shape.dims[d];
    for (int d = 0; d < ind->shape.rank; d++)
        out.dims[out.rank++] = ind->shape.dims[d];
    for (int d = axis + 1; d < data->shape.rank; d++)
        out.dims[out.rank++] = data->shape.dims[d];
    outs[0].dtype = data->dtype;
    outs[0].shape = out;
    return LD_OK;
}

static ld_status gather_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *data = ctx->inputs[0], *ind = ctx->inputs[1];
    int axis;
    ld_status st = gather_axis(ctx, data, &axis);
    if (st != LD_OK || ctx->outputs[0]->count == 0)
        return st;
    int64_t dim = data->shape.dims[axis], n = ind->count;
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    if (!idx)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) {
        if (!ld_knormalize_index(ld_kindex_at(ind, i), dim, &idx[i])) {
            st = ld_kindex_error(ctx, ld_kindex_at(ind, i), i, axis, dim);
            free(idx);
            return st;
        }
    }
    size_t es = ld_dtype_size(data->dtype);
    int64_t outer = ld_dims_product(data->shape.dims, 0, axis);
    int64_t inner = ld_dims_product(data->shape.dims, axis + 1, data->shape.rank) * (int64_t)es;
    const uint8_t *src = data->data;
    uint8_t *dst = ctx->outputs[0]->data;
    for (int64_t o = 0; o < outer; o++) {
        const uint8_t *block = src + o * dim * inner;
        if (inner == (int64_t)es) {
            for (int64_t i = 0; i < n; i++, dst += es)
                copy_element(dst, block + idx[i] * inner, es);
        } else {
            for (int64_t i = 0; i < n; i++, dst += inner)
                memcpy(dst, block + idx[i] * inner, (size_t)inner);
        }
    }
    free(idx);
    return LD_OK;
}

/* --- GatherElements (11, 13): out[i][j][k] = data[indices[i][j][k]][j][k] (axis 0) -- */

static ld_status gather_elements_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *data, *ind;
    int axis;
    ld_status st = ld_krequire_data(ctx, 0, &data);
    if (st == LD_OK)
        st = ld_krequire_indices(ctx, 1, &ind);
    if (st == LD_OK)
        st = gather_axis(ctx, data, &axis);
    if (st != LD_OK)
        return st;
    if (ind->shape.rank != data->shape.rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices have rank %d but data has rank %d",
                              ind->shape.rank, data->shape.rank);
    for (int d = 0; d < data->shape.rank; d++)
        if (d != axis && ind->shape.dims[d] > data->shape.dims[d])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices axis %d has size %" PRId64
                                  ", larger than the data's %" PRId64, d, ind->shape.dims[d],
                                  data->shape.dims[d]);
    outs[0].dtype = data->dtype;
    outs[0].shape = ind->shape;
    return LD_OK;
}

static ld_status gather_elements_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *data = ctx->inputs[0], *ind = ctx->inputs[1];
    ld_tensor *y = ctx->outputs[0];
    int axis;
    ld_status st = gather_axis(ctx, data, &axis);
    if (st != LD_OK || y->count == 0)
        return st;
    int64_t *off = malloc((size_t)y->count * sizeof *off);
    if (!off)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    st = ld_element_offsets(ctx, data, ind, axis, off);
    size_t es = ld_dtype_size(data->dtype);
    const uint8_t *src = data->data;
    uint8_t *dst = y->data;
    for (int64_t i = 0; st == LD_OK && i < y->count; i++)
        copy_element(dst + i * (int64_t)es, src + off[i] * (int64_t)es, es);
    free(off);
    return st;
}

/* --- GatherND (11; 12: batch_dims; 13) ---------------------------------------------- */

typedef struct gather_nd_dims {
    int64_t b;       /* batch_dims */
    int64_t m;       /* indices' last dim: coordinates per tuple */
    int64_t batches; /* prod(data.dims[:b]) */
    int64_t tuples;  /* index tuples per batch */
    int64_t slice;   /* elements per gathered slice */
} gather_nd_dims;

static ld_status gather_nd_dims_read(ld_kernel_ctx *ctx, const ld_tensor *data,
                                     const ld_tensor *ind, gather_nd_dims *g, ld_shape *out)
{
    int r = data->shape.rank, q = ind->shape.rank;
    g->b = 0;
    if (ctx->node->opset >= 12) {
        ld_status st = ld_kattr_int(ctx, "batch_dims", 0, &g->b);
        if (st != LD_OK)
            return st;
    }
    if (r < 1 || q < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "data and indices need rank >= 1 (got %d and "
                              "%d)", r, q);
    if (g->b < 0 || g->b >= q || g->b >= r)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "batch_dims %" PRId64 " must be below both "
                              "ranks (%d and %d)", g->b, r, q);
    g->m = ind->shape.dims[q - 1];
    if (g->m < 1 || g->m > r - g->b)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices' last dimension %" PRId64 " must be "
                              "in 1..%" PRId64, g->m, r - g->b);
    for (int d = 0; d < g->b; d++)
        if (ind->shape.dims[d] != data->shape.dims[d])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "batch axis %d differs: data %" PRId64
                                  ", indices %" PRId64, d, data->shape.dims[d],
                                  ind->shape.dims[d]);
    out->rank = 0;
    for (int d = 0; d < q - 1; d++)
        out->dims[out->rank++] = ind->shape.dims[d];
    for (int64_t d = g->b + g->m; d < r; d++)
        out->dims[out->rank++] = data->shape.dims[d];
    g->batches = ld_dims_product(data->shape.dims, 0, (int)g->b);
    g->tuples = ld_dims_product(ind->shape.dims, (int)g->b, q - 1);
    g->slice = ld_dims_product(data->shape.dims, (int)(g->b + g->m), r);
    return LD_OK;
}

static ld_status gather_nd_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *data, *ind;
    gather_nd_dims g;
    ld_status st = ld_krequire_data(ctx, 0, &data);
    if (st == LD_OK)
        st = ld_krequire_indices(ctx, 1, &ind);
    if (st == LD_OK)
        st = gather_nd_dims_read(ctx, data, ind, &g, &outs[0].shape);
    outs[0].dtype = data ? data->dtype : LD_DTYPE_UNDEFINED;
    return st;
}

static ld_status gather_nd_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *data = ctx->inputs[0], *ind = ctx->inputs[1];
    ld_tensor *y = ctx->outputs[0];
    gather_nd_dims g;
    ld_shape out;
    ld_status st = gather_nd_dims_read(ctx, data, ind, &g, &out);
    if (st != LD_OK || y->count == 0)
        return st;
    int64_t es = (int64_t)ld_dtype_size(data->dtype), slice_bytes = g.slice * es;
    int64_t batch_elems = g.batches ? data->count / g.batches : 0, strides[LD_MAX_RANK];
    ld_shape_strides(&data->shape, strides);
    uint8_t *dst = y->data;
    for (int64_t bt = 0; bt < g.batches; bt++) {
        for (int64_t t = 0; t < g.tuples; t++, dst += slice_bytes) {
            int64_t off;
            st = ld_nd_tuple_offset(ctx, &data->shape, strides, ind, (int)g.b, (int)g.m,
                                    bt * g.tuples + t, &off);
            if (st != LD_OK)
                return st;
            memcpy(dst, (const uint8_t *)data->data + (bt * batch_elems + off) * es,
                   (size_t)slice_bytes);
        }
    }
    return LD_OK;
}

/* --- OneHot (9, 11): depth inserted at axis; on where index == position -------------- */

static ld_status onehot_params(ld_kernel_ctx *ctx, int *axis, int64_t *depth)
{
    const ld_tensor *ind = ld_kin(ctx, 0), *values;
    int64_t a;
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = ld_kread_scalar_int(ctx, ld_kin(ctx, 1), "depth", depth);
    if (st == LD_OK)
        st = ld_krequire_data(ctx, 2, &values);
    if (st == LD_OK)
        st = ld_kattr_int(ctx, "axis", -1, &a);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, a, ind->shape.rank + 1, false, "axis", axis);
    if (st != LD_OK)
        return st;
    if (!ld_dtype_is_supported(ind->dtype) || ind->dtype == LD_DTYPE_BOOL)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices must be numeric, not %s",
                              ld_dtype_name(ind->dtype));
    if (values->count != 2)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "values must hold [off, on] (2 elements), it "
                              "has %" PRId64, values->count);
    if (*depth < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "depth %" PRId64 " must be positive", *depth);
    return LD_OK;
}

static ld_status onehot_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    int axis;
    int64_t depth;
    ld_status st = onehot_params(ctx, &axis, &depth);
    if (st != LD_OK)
        return st;
    const ld_shape *in = &ctx->inputs[0]->shape;
    if (in->rank + 1 > LD_MAX_RANK)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "output rank %d exceeds %d", in->rank + 1,
                              LD_MAX_RANK);
    ld_shape out = {.rank = in->rank + 1};
    for (int d = 0, j = 0; d < out.rank; d++)
        out.dims[d] = d == axis ? depth : in->dims[j++];
    outs[0].dtype = ctx->inputs[2]->dtype;
    outs[0].shape = out;
    return ld_kcheck_shape(ctx, &out, outs[0].dtype, "output");
}

static ld_status onehot_compute(ld_kernel_ctx *ctx)
{
    int axis;
    int64_t depth;
    ld_status st = onehot_params(ctx, &axis, &depth);
    if (st != LD_OK)
        return st;
    const ld_tensor *ind = ctx->inputs[0], *values = ctx->inputs[2];
    ld_tensor *y = ctx->outputs[0];
    size_t es = ld_dtype_size(y->dtype);
    const uint8_t *off = values->data, *on = off + es;
    ld_fill_elements(y->data, off, es, y->count);
    int64_t outer = ld_dims_product(ind->shape.dims, 0, axis);
    int64_t inner = ld_dims_product(ind->shape.dims, axis, ind->shape.rank);
    /* Indices outside [-depth, depth) leave an all-off row, as the spec says. */
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t k = ld_tensor_int_at(ind, o * inner + i);
            if (k < 0)
                k += depth;
            if (k >= 0 && k < depth)
                memcpy((uint8_t *)y->data + ((o * depth + k) * inner + i) * (int64_t)es, on, es);
        }
    return LD_OK;
}

/* --- Compress (9, 11): the slices along axis (or flat elements) where condition ---- */

static ld_status compress_params(ld_kernel_ctx *ctx, const ld_tensor *x, int *axis,
                                 int64_t *kept)
{
    const ld_tensor *cond = ld_kin(ctx, 1);
    int64_t a;
    ld_status st = ld_krequire(ctx, 1);
    *axis = -1;
    if (st == LD_OK && ld_node_attr(ctx->node, "axis")) {
        st = ld_kattr_int(ctx, "axis", 0, &a);
        if (st == LD_OK)
            st = ld_knorm_axis(ctx, a, x->shape.rank, false, "axis", axis);
    }
    if (st != LD_OK)
        return st;
    if (cond->shape.rank != 1 || !ld_dtype_is_supported(cond->dtype))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "condition must be a 1-D bool tensor");
    st = ld_krequire_values(ctx, cond, "condition");
    if (st != LD_OK)
        return st;
    /* Entries beyond the axis length are ignored (ONNX Runtime does so too). */
    int64_t dim = *axis < 0 ? x->count : x->shape.dims[*axis];
    int64_t n = cond->count < dim ? cond->count : dim;
    *kept = 0;
    for (int64_t i = 0; i < n; i++)
        *kept += ld_tensor_int_at(cond, i) != 0;
    return LD_OK;
}

static ld_status compress_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int axis;
    int64_t kept;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = compress_params(ctx, x, &axis, &kept);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    if (axis < 0) {
        outs[0].shape.rank = 1;
        outs[0].shape.dims[0] = kept;
    } else {
        outs[0].shape = x->shape;
        outs[0].shape.dims[axis] = kept;
    }
    return LD_OK;
}

static ld_status compress_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0], *cond = ctx->inputs[1];
    ld_tensor *y = ctx->outputs[0];
    int axis;
    int64_t kept;
    ld_status st = compress_params(ctx, x, &axis, &kept);
    if (st != LD_OK || y->count == 0)
        return st;
    int64_t es = (int64_t)ld_dtype_size(x->dtype);
    int64_t dim = axis < 0 ? x->count : x->shape.dims[axis];
    int64_t outer = axis < 0 ? 1 : ld_dims_product(x->shape.dims, 0, axis);
    int64_t inner = axis < 0 ? es : ld_dims_product(x->shape.dims, axis + 1, x->shape.rank) * es;
    int64_t n = cond->count < dim ? cond->count : dim;
    uint8_t *dst = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < n; i++)
            if (ld_tensor_int_at(cond, i) != 0) {
                memcpy(dst, (const uint8_t *)x->data + (o * dim + i) * inner, (size_t)inner);
                dst += inner;
            }
    return LD_OK;
}

/* --- NonZero (9, 13): coordinates of the nonzero elements, [rank, count] ----------- */

/* Nonzero test by element size; for floats the sign bit is masked so -0.0
 * counts as zero (NaN counts as nonzero, as in numpy). */
static inline bool element_nonzero(const uint8_t *p, size_t es, bool is_float)
{
    switch (es) {
    case 1: return *p != 0;
    case 2: { uint16_t v; memcpy(&v, p, 2); return (is_float ? v & 0x7FFFu : v) != 0; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return (is_float ? v & 0x7FFFFFFFu : v) != 0; }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return (is_float ? v & 0x7FFFFFFFFFFFFFFFull : v) != 0;
    }
    }
}

static ld_status nonzero_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    outs[0].dtype = LD_DTYPE_INT64;
    outs[0].deferred = true;
    return st;
}

static ld_status nonzero_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    size_t es = ld_dtype_size(x->dtype);
    bool is_float = ld_dtype_is_float(x->dtype);
    const uint8_t *p = x->data;
    int64_t nnz = 0;
    for (int64_t i = 0; i < x->count; i++)
        nnz += element_nonzero(p + (size_t)i * es, es, is_float);
    /* A scalar is treated as a 1-element vector (as ONNX Runtime does). */
    int rank = x->shape.rank ? x->shape.rank : 1;
    ld_shape shape = {.rank = 2, .dims = {rank, nnz}};
    ld_tensor *y;
    if (ctx->node->outputs[0] < 0)
        return LD_OK;
    ld_status st = ld_kernel_alloc_output(ctx, 0, LD_DTYPE_INT64, &shape, &y);
    if (st != LD_OK || nnz == 0)
        return st;
    int64_t *out = y->data, idx[LD_MAX_RANK] = {0}, k = 0;
    for (int64_t i = 0; i < x->count; i++) {
        if (element_nonzero(p + (size_t)i * es, es, is_float)) {
            for (int d = 0; d < rank; d++)
                out[d * nnz + k] = idx[d];
            k++;
        }
        for (int d = x->shape.rank - 1; d >= 0 && ++idx[d] == x->shape.dims[d]; d--)
            idx[d] = 0;
    }
    return LD_OK;
}

static const ld_kernel indexing_kernels[] = {
    {"", "Compress", 9, 0, NULL, compress_infer, compress_compute, NULL, NULL},
    {"", "Compress", 11, 0, NULL, compress_infer, compress_compute, NULL, NULL},
    {"", "Gather", 1, 0, NULL, gather_infer, gather_compute, NULL, NULL},
    {"", "Gather", 11, 0, NULL, gather_infer, gather_compute, NULL, NULL},
    {"", "Gather", 13, 0, NULL, gather_infer, gather_compute, NULL, NULL},
    {"", "GatherElements", 11, 0, NULL, gather_elements_infer, gather_elements_compute, NULL, NULL},
    {"", "GatherElements", 13, 0, NULL, gather_elements_infer, gather_elements_compute, NULL, NULL},
    {"", "GatherND", 11, 0, NULL, gather_nd_infer, gather_nd_compute, NULL, NULL},
    {"", "GatherND", 12, 0, NULL, gather_nd_infer, gather_nd_compute, NULL, NULL},
    {"", "GatherND", 13, 0, NULL, gather_nd_infer, gather_nd_compute, NULL, NULL},
    {"", "NonZero", 9, 0, NULL, nonzero_infer, nonzero_compute, NULL, NULL},
    {"", "NonZero", 13, 0, NULL, nonzero_infer, nonzero_compute, NULL, NULL},
    {"", "OneHot", 9, 0, NULL, onehot_infer, onehot_compute, NULL, NULL},
    {"", "OneHot", 11, 0, NULL, onehot_infer, onehot_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(indexing);
