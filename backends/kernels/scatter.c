/* layerdiff — Scatter (9, deprecated; 11), ScatterElements (11, 13; 16:
 * reduction add/mul; 18: max/min) and ScatterND (11, 13, 16, 18): the output
 * is a copy of data with the updates written (or combined) at the indexed
 * positions, in index order, so duplicate indices resolve deterministically
 * (the last write wins without a reduction). Plain writes move by element
 * size (every dtype); reductions compute in the data's type (float16 and
 * bfloat16 through float32, rounded after every combination; integers wrap). */
#include <inttypes.h>

#include "backends/kernels/kernels.h"
#include "backends/kernels/shape_util.h"
#include "layerdiff/round.h"

typedef enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN } reduction;

static ld_status reduction_read(ld_kernel_ctx *ctx, reduction *r)
{
    *r = RED_NONE;
    if (ctx->node->opset < 16 || strcmp(ctx->node->op_type, "Scatter") == 0)
        return LD_OK;
    const char *s;
    ld_status st = ld_kattr_string(ctx, "reduction", "none", &s);
    if (st != LD_OK)
        return st;
    static const char *const names[] = {"none", "add", "mul", "max", "min"};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *r = (reduction)i;
            return LD_OK;
        }
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "reduction '%s' is not none, add, mul, max or min",
                          s);
}

/* a OP b for n elements: dst[k] = combine(dst[k], upd[k]). */
#define COMBINE_LOOP(T, EXPR)                                                           \
    do {                                                                                \
        T *d_ = (T *)dst;                                                               \
        const T *u_ = (const T *)upd;                                                   \
        for (int64_t k = 0; k < n; k++) {                                               \
            T a = d_[k], b = u_[k];                                                     \
            d_[k] = (EXPR);                                                             \
        }                                                                               \
    } while (0)

#define COMBINE_FLOAT(T)                                                                \
    do {                                                                                \
        switch (r) {                                                                    \
        case RED_ADD: COMBINE_LOOP(T, a + b); break;                                    \
        case RED_MUL: COMBINE_LOOP(T, a * b); break;                                    \
        case RED_MAX: COMBINE_LOOP(T, a < b ? b : a); break;                            \
        default: COMBINE_LOOP(T, b < a ? b : a); break;                                 \
        }                                                                               \
    } while (0)

/* Integers: add and mul wrap (computed in uint64, keeping the low bits). */
#define COMBINE_INT(T)                                                                  \
    do {                                                                                \
        switch (r) {                                                                    \
        case RED_ADD: COMBINE_LOOP(T, (T)((uint64_t)a + (uint64_t)b)); break;           \
        case RED_MUL: COMBINE_LOOP(T, (T)((uint64_t)a * (uint64_t)b)); break;           \
        case RED_MAX: COMBINE_LOOP(T, a < b ? b : a); break;                            \
        default: COMBINE_LOOP(T, b < a ? b : a); break;                                 \
        }                                                                               \
    } while (0)

static float combine_f(reduction r, float a, float b)
{
    switch (r) {
    case RED_ADD: return a + b;
    case RED_MUL: return a * b;
    case RED_MAX: return a < b ? b : a;
    default: return b < a ? b : a;
    }
}

/* Combines n contiguous updates into dst (r != RED_NONE). */
static void combine(ld_dtype dtype, reduction r, void *dst, const void *upd, int64_t n)
{
    switch (dtype) {
    case LD_DTYPE_FLOAT32: COMBINE_FLOAT(float); break;
    case LD_DTYPE_FLOAT64: COMBINE_FLOAT(double); break;
    case LD_DTYPE_INT8: COMBINE_INT(int8_t); break;
    case LD_DTYPE_UINT8: COMBINE_INT(uint8_t); break;
    case LD_DTYPE_INT16: COMBINE_INT(int16_t); break;
    case LD_DTYPE_UINT16: COMBINE_INT(uint16_t); break;
    case LD_DTYPE_INT32: COMBINE_INT(int32_t); break;
    case LD_DTYPE_UINT32: COMBINE_INT(uint32_t); break;
    case LD_DTYPE_INT64: COMBINE_INT(int64_t); break;
    case LD_DTYPE_UINT64: COMBINE_INT(uint64_t); break;
    case LD_DTYPE_BOOL: /* add/max = or, mul/min = and (as ONNX Runtime) */
        for (int64_t k = 0; k < n; k++) {
            uint8_t *d = (uint8_t *)dst + k;
            uint8_t b = ((const uint8_t *)upd)[k] != 0;
            *d = (r == RED_ADD || r == RED_MAX) ? (*d || b) : (*d && b);
        }
        break;
    case LD_DTYPE_FLOAT16:
        for (int64_t k = 0; k < n; k++) {
            ld_fp16 *d = (ld_fp16 *)dst + k;
            float c = combine_f(r, ld_fp16_to_fp32(*d), ld_fp16_to_fp32(((const ld_fp16 *)upd)[k]));
            *d = ld_fp32_to_fp16(c);
        }
        break;
    default: /* bfloat16 */
        for (int64_t k = 0; k < n; k++) {
            ld_bf16 *d = (ld_bf16 *)dst + k;
            float c = combine_f(r, ld_bf16_to_fp32(*d), ld_bf16_to_fp32(((const ld_bf16 *)upd)[k]));
            *d = ld_fp32_to_bf16(c);
        }
        break;
    }
}

/* Output 0 = data, and updates must have data's dtype. */
static ld_status scatter_common(ld_kernel_ctx *ctx, const ld_tensor **data,
                                const ld_tensor **ind, const ld_tensor **upd, reduction *r)
{
    ld_status st = ld_krequire_data(ctx, 0, data);
    if (st == LD_OK)
        st = ld_krequire_indices(ctx, 1, ind);
    if (st == LD_OK)
        st = ld_krequire(ctx, 2);
    if (st == LD_OK)
        st = reduction_read(ctx, r);
    if (st != LD_OK)
        return st;
    *upd = ctx->inputs[2];
    if ((*upd)->dtype != (*data)->dtype)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "updates are %s but data is %s",
                              ld_dtype_name((*upd)->dtype), ld_dtype_name((*data)->dtype));
    return LD_OK;
}

/* --- ScatterElements / Scatter ------------------------------------------------------- */

static ld_status scatter_elements_check(ld_kernel_ctx *ctx, const ld_tensor *data,
                                        const ld_tensor *ind, const ld_tensor *upd, int *axis)
{
    int64_t a;
    ld_status st = ld_kattr_int(ctx, "axis", 0, &a);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, a, data->shape.rank, false, "axis", axis);
    if (st != LD_OK)
        return st;
    char s1[128], s2[128];
    if (!ld_shape_equal(&ind->shape, &upd->shape))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices (%s) and updates (%s) must have the "
                              "same shape", ld_shape_format(&ind->shape, s1, sizeof s1),
                              ld_shape_format(&upd->shape, s2, sizeof s2));
    if (ind->shape.rank != data->shape.rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices have rank %d but data has rank %d",
                              ind->shape.rank, data->shape.rank);
    for (int d = 0; d < data->shape.rank; d++)
        if (d != *axis && ind->shape.dims[d] > data->shape.dims[d])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices axis %d has size %" PRId64
                                  ", larger than the data's %" PRId64, d, ind->shape.dims[d],
                                  data->shape.dims[d]);
    return LD_OK;
}

static ld_status scatter_elements_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *data, *ind, *upd;
    reduction r;
    int axis;
    ld_status st = scatter_common(ctx, &data, &ind, &upd, &r);
    if (st == LD_OK)
        st = scatter_elements_check(ctx, data, ind, upd, &axis);
    if (st != LD_OK)
        return st;
    outs[0].dtype = data->dtype;
    outs[0].shape = data->shape;
    return LD_OK;
}

static ld_status scatter_elements_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *data, *ind, *upd;
    ld_tensor *y = ctx->outputs[0];
    reduction r;
    int axis;
    ld_status st = scatter_common(ctx, &data, &ind, &upd, &r);
    if (st == LD_OK)
        st = scatter_elements_check(ctx, data, ind, upd, &axis);
    if (st != LD_OK)
        return st;
    if (data->nbytes)
        memcpy(y->data, data->data, data->nbytes);
    if (ind->count == 0)
        return LD_OK;
    int64_t *off = malloc((size_t)ind->count * sizeof *off);
    if (!off)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    st = ld_element_offsets(ctx, data, ind, axis, off);
    size_t es = ld_dtype_size(data->dtype);
    uint8_t *dst = y->data;
    const uint8_t *src = upd->data;
    for (int64_t i = 0; st == LD_OK && i < ind->count; i++) {
        if (r == RED_NONE)
            memcpy(dst + off[i] * (int64_t)es, src + i * (int64_t)es, es);
        else
            combine(data->dtype, r, dst + off[i] * (int64_t)es, src + i * (int64_t)es, 1);
    }
    free(off);
    return st;
}

/* --- ScatterND ------------------------------------------------------------------------ */

/* Checks updates.shape == indices.shape[:-1] + data.shape[m:]; *m = tuple
 * length, *slice = elements per update slice. */
static ld_status scatter_nd_check(ld_kernel_ctx *ctx, const ld_tensor *data,
                                  const ld_tensor *ind, const ld_tensor *upd, int *m,
                                  int64_t *slice)
{
    int r = data->shape.rank, q = ind->shape.rank;
    if (r < 1 || q < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "data and indices need rank >= 1 (got %d and "
                              "%d)", r, q);
    int64_t last = ind->shape.dims[q - 1];
    if (last < 1 || last > r)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "indices' last dimension %" PRId64 " must be "
                              "in 1..%d", last, r);
    *m = (int)last;
    ld_shape want = {.rank = q - 1 + r - *m};
    if (want.rank > LD_MAX_RANK)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "updates rank %d exceeds %d", want.rank,
                              LD_MAX_RANK);
    for (int d = 0; d < q - 1; d++)
        want.dims[d] = ind->shape.dims[d];
    for (int d = *m; d < r; d++)
        want.dims[q - 1 + d - *m] = data->shape.dims[d];
    if (!ld_shape_equal(&want, &upd->shape)) {
        char s1[128], s2[128];
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "updates have shape %s, expected %s "
                              "(indices.shape[:-1] + data.shape[%d:])",
                              ld_shape_format(&upd->shape, s1, sizeof s1),
                              ld_shape_format(&want, s2, sizeof s2), *m);
    }
    *slice = ld_dims_product(data->shape.dims, *m, r);
    return LD_OK;
}

static ld_status scatter_nd_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *data, *ind, *upd;
    reduction r;
    int m;
    int64_t slice;
    ld_status st = scatter_common(ctx, &data, &ind, &upd, &r);
    if (st == LD_OK)
        st = scatter_nd_check(ctx, data, ind, upd, &m, &slice);
    if (st != LD_OK)
        return st;
    outs[0].dtype = data->dtype;
    outs[0].shape = data->shape;
    return LD_OK;
}

static ld_status scatter_nd_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *data, *ind, *upd;
    ld_tensor *y = ctx->outputs[0];
    reduction r;
    int m;
    int64_t slice;
    ld_status st = scatter_common(ctx, &data, &ind, &upd, &r);
    if (st == LD_OK)
        st = scatter_nd_check(ctx, data, ind, upd, &m, &slice);
    if (st != LD_OK)
        return st;
    if (data->nbytes)
        memcpy(y->data, data->data, data->nbytes);
    int64_t es = (int64_t)ld_dtype_size(data->dtype), strides[LD_MAX_RANK];
    int64_t tuples = ind->count / m;
    ld_shape_strides(&data->shape, strides);
    uint8_t *dst = y->data;
    const uint8_t *src = upd->data;
    for (int64_t t = 0; t < tuples && slice > 0; t++) {
        int64_t off;
        st = ld_nd_tuple_offset(ctx, &data->shape, strides, ind, 0, m, t, &off);
        if (st != LD_OK)
            return st;
        if (r == RED_NONE)
            memcpy(dst + off * es, src + t * slice * es, (size_t)(slice * es));
        else
            combine(data->dtype, r, dst + off * es, src + t * slice * es, slice);
    }
    return LD_OK;
}

static const ld_kernel scatter_kernels[] = {
    {"", "Scatter", 9, 0, NULL, scatter_elements_infer, scatter_elements_compute, NULL, NULL},
    {"", "Scatter", 11, 0, NULL, scatter_elements_infer, scatter_elements_compute, NULL, NULL},
    {"", "ScatterElements", 11, 0, NULL, scatter_elements_infer, scatter_elements_compute, NULL, NULL},
    {"", "ScatterElements", 13, 0, NULL, scatter_elements_infer, scatter_elements_compute, NULL, NULL},
    {"", "ScatterElements", 16, 0, NULL, scatter_elements_infer, scatter_elements_compute, NULL, NULL},
    {"", "ScatterElements", 18, 0, NULL, scatter_elements_infer, scatter_elements_compute, NULL, NULL},
    {"", "ScatterND", 11, 0, NULL, scatter_nd_infer, scatter_nd_compute, NULL, NULL},
    {"", "ScatterND", 13, 0, NULL, scatter_nd_infer, scatter_nd_compute, NULL, NULL},
    {"", "ScatterND", 16, 0, NULL, scatter_nd_infer, scatter_nd_compute, NULL, NULL},
    {"", "ScatterND", 18, 0, NULL, scatter_nd_infer, scatter_nd_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(scatter);
