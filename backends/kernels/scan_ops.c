/* layerdiff — kernels that scan an axis: ArgMax / ArgMin (1; 11: negative
 * axis; 12: select_last_index; 13) and CumSum (11; 14: float16/bfloat16).
 *
 * Both run with LD_KERNEL_WIDEN_HALF: float16/bfloat16 widen exactly to
 * float32 (ArgMax's order is unchanged); CumSum then accumulates in float32
 * one addition at a time along the axis, as ONNX Runtime's CPU provider does,
 * and the executor rounds the result back. Integers wrap on overflow. The
 * loops run outer x axis x inner with the inner axis innermost (contiguous).
 * In a layer that accumulates in half (backends/accumulate.h), every float32
 * partial sum, i.e. every output, is rounded to the layer precision. */
#include <inttypes.h>

#include "backends/accumulate.h"

#include "backends/kernels/kernels.h"
#include "backends/kernels/shape_util.h"

/* --- ArgMax / ArgMin ------------------------------------------------------------------ */

typedef struct arg_params {
    int axis;
    bool keepdims, last;
} arg_params;

static ld_status arg_params_read(ld_kernel_ctx *ctx, const ld_tensor *x, arg_params *p)
{
    int64_t axis, keepdims, last = 0;
    ld_status st = ld_kattr_int(ctx, "axis", 0, &axis);
    if (st == LD_OK)
        st = ld_kattr_int(ctx, "keepdims", 1, &keepdims);
    if (st == LD_OK && ctx->node->opset >= 12)
        st = ld_kattr_int(ctx, "select_last_index", 0, &last);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, axis, x->shape.rank, false, "axis", &p->axis);
    if (st != LD_OK)
        return st;
    p->keepdims = keepdims != 0;
    p->last = last != 0;
    if (x->shape.dims[p->axis] == 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "axis %d is empty: there is no %s", p->axis,
                              ctx->node->op_type);
    return LD_OK;
}

static ld_status arg_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    arg_params p;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = arg_params_read(ctx, x, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = LD_DTYPE_INT64;
    outs[0].shape = x->shape;
    if (p.keepdims) {
        outs[0].shape.dims[p.axis] = 1;
    } else {
        outs[0].shape.rank--;
        for (int d = p.axis; d < outs[0].shape.rank; d++)
            outs[0].shape.dims[d] = x->shape.dims[d + 1];
    }
    return LD_OK;
}

/* Row j replaces the best so far where it is better (CMP: > for max, < for
 * min), or equal with select_last_index. NaN (v != v, never for integers)
 * wins over numbers, and the first NaN stays unless select_last_index:
 * numpy's argmax/argmin. */
#define ARG_SCAN(T, CMP)                                                                \
    do {                                                                                \
        const T *x_ = x->data;                                                          \
        for (int64_t o = 0; o < outer; o++) {                                           \
            const T *base = x_ + o * dim * inner;                                       \
            int64_t *best = y + o * inner;                                              \
            for (int64_t i = 0; i < inner; i++)                                         \
                best[i] = 0;                                                            \
            for (int64_t j = 1; j < dim; j++)                                           \
                for (int64_t i = 0; i < inner; i++) {                                   \
                    T v = base[j * inner + i], b = base[best[i] * inner + i];           \
                    bool take = (v CMP b) || (last && v == b) ||                        \
                                (v != v && (b == b || last));                           \
                    if (take)                                                           \
                        best[i] = j;                                                    \
                }                                                                       \
        }                                                                               \
    } while (0)

#define ARG_DISPATCH(CMP)                                                               \
    do {                                                                                \
        switch (x->dtype) {                                                             \
        case LD_DTYPE_FLOAT32: ARG_SCAN(float, CMP); break;                             \
        case LD_DTYPE_FLOAT64: ARG_SCAN(double, CMP); break;                            \
        case LD_DTYPE_INT8: ARG_SCAN(int8_t, CMP); break;                               \
        case LD_DTYPE_UINT8: ARG_SCAN(uint8_t, CMP); break;                             \
        case LD_DTYPE_INT16: ARG_SCAN(int16_t, CMP); break;                             \
        case LD_DTYPE_UINT16: ARG_SCAN(uint16_t, CMP); break;                           \
        case LD_DTYPE_INT32: ARG_SCAN(int32_t, CMP); break;                             \
        case LD_DTYPE_UINT32: ARG_SCAN(uint32_t, CMP); break;                           \
        case LD_DTYPE_INT64: ARG_SCAN(int64_t, CMP); break;                             \
        case LD_DTYPE_UINT64: ARG_SCAN(uint64_t, CMP); break;                           \
        default:                                                                        \
            return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported", \
                                  ld_dtype_name(x->dtype));                             \
        }                                                                               \
    } while (0)

static ld_status arg_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    arg_params p;
    ld_status st = arg_params_read(ctx, x, &p);
    if (st != LD_OK || ctx->outputs[0]->count == 0)
        return st;
    int64_t *y = ctx->outputs[0]->data;
    int64_t outer = ld_dims_product(x->shape.dims, 0, p.axis), dim = x->shape.dims[p.axis];
    int64_t inner = ld_dims_product(x->shape.dims, p.axis + 1, x->shape.rank);
    bool last = p.last;
    if (strcmp(ctx->node->op_type, "ArgMax") == 0)
        ARG_DISPATCH(>);
    else
        ARG_DISPATCH(<);
    return LD_OK;
}

/* --- CumSum ------------------------------------------------------------------------------ */

static ld_status cumsum_axis(ld_kernel_ctx *ctx, const ld_tensor *x, int *axis)
{
    int64_t a;
    ld_status st = ld_kread_scalar_int(ctx, ld_kin(ctx, 1), "axis", &a);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, a, x->shape.rank, false, "axis", axis);
    return st;
}

static ld_status cumsum_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int axis;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = cumsum_axis(ctx, x, &axis);
    if (st != LD_OK)
        return st;
    if (x->dtype == LD_DTYPE_BOOL)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype bool is not supported");
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    return LD_OK;
}

/* Along the axis in visiting order j0, j1, ...: y[j0] = x[j0] (exclusive: 0),
 * y[jk] = y[jk-1] + x[jk] (exclusive: + x[jk-1]). ADD is the type's sum. */
#define CUMSUM(T, ADD)                                                                  \
    do {                                                                                \
        const T *x_ = x->data;                                                          \
        T *y_ = y->data;                                                                \
        for (int64_t o = 0; o < outer; o++) {                                           \
            const T *xb = x_ + o * dim * inner;                                         \
            T *yb = y_ + o * dim * inner;                                               \
            for (int64_t s = 0; s < dim; s++) {                                         \
                int64_t j = reverse ? dim - 1 - s : s, prev = reverse ? j + 1 : j - 1;  \
                T *yr = yb + j * inner;                                                 \
                const T *xr = xb + (exclusive ? prev : j) * inner;                      \
                const T *yp = yb + prev * inner;                                        \
                for (int64_t i = 0; i < inner; i++) {                                   \
                    if (s == 0) {                                                       \
                        yr[i] = exclusive ? (T)0 : xr[i];                               \
                    } else {                                                            \
                        T a = yp[i], b = xr[i];                                         \
                        yr[i] = (ADD);                                                  \
                    }                                                                   \
                }                                                                       \
            }                                                                           \
        }                                                                               \
    } while (0)
#define FADD (a + b)
#define HALF_ADD ld_accum_add(&ac, a, b)
#define WRAP_ADD(T) (T)((uint64_t)a + (uint64_t)b)

static ld_status cumsum_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    int axis;
    int64_t exclusive, reverse;
    ld_status st = cumsum_axis(ctx, x, &axis);
    if (st == LD_OK)
        st = ld_kattr_int(ctx, "exclusive", 0, &exclusive);
    if (st == LD_OK)
        st = ld_kattr_int(ctx, "reverse", 0, &reverse);
    if (st != LD_OK || y->count == 0)
        return st;
    int64_t outer = ld_dims_product(x->shape.dims, 0, axis), dim = x->shape.dims[axis];
    int64_t inner = ld_dims_product(x->shape.dims, axis + 1, x->shape.rank);
    ld_accum ac = ld_accum_make(ctx->numerics, ctx->counters);
    switch (x->dtype) {
    case LD_DTYPE_FLOAT32:
        if (ac.half)
            CUMSUM(float, HALF_ADD);
        else
            CUMSUM(float, FADD);
        break;
    case LD_DTYPE_FLOAT64: CUMSUM(double, FADD); break;
    case LD_DTYPE_INT8: CUMSUM(int8_t, WRAP_ADD(int8_t)); break;
    case LD_DTYPE_UINT8: CUMSUM(uint8_t, WRAP_ADD(uint8_t)); break;
    case LD_DTYPE_INT16: CUMSUM(int16_t, WRAP_ADD(int16_t)); break;
    case LD_DTYPE_UINT16: CUMSUM(uint16_t, WRAP_ADD(uint16_t)); break;
    case LD_DTYPE_INT32: CUMSUM(int32_t, WRAP_ADD(int32_t)); break;
    case LD_DTYPE_UINT32: CUMSUM(uint32_t, WRAP_ADD(uint32_t)); break;
    case LD_DTYPE_INT64: CUMSUM(int64_t, WRAP_ADD(int64_t)); break;
    case LD_DTYPE_UINT64: CUMSUM(uint64_t, WRAP_ADD(uint64_t)); break;
    default:
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    }
    return LD_OK;
}

static const ld_kernel scan_kernels[] = {
    {"", "ArgMax", 1, LD_KERNEL_WIDEN_HALF, NULL, arg_infer, arg_compute, NULL, NULL},
    {"", "ArgMax", 11, LD_KERNEL_WIDEN_HALF, NULL, arg_infer, arg_compute, NULL, NULL},
    {"", "ArgMax", 12, LD_KERNEL_WIDEN_HALF, NULL, arg_infer, arg_compute, NULL, NULL},
    {"", "ArgMax", 13, LD_KERNEL_WIDEN_HALF, NULL, arg_infer, arg_compute, NULL, NULL},
    {"", "ArgMin", 1, LD_KERNEL_WIDEN_HALF, NULL, arg_infer, arg_compute, NULL, NULL},
    {"", "ArgMin", 11, LD_KERNEL_WIDEN_HALF, NULL, arg_infer, arg_compute, NULL, NULL},
    {"", "ArgMin", 12, LD_KERNEL_WIDEN_HALF, NULL, arg_infer, arg_compute, NULL, NULL},
    {"", "ArgMin", 13, LD_KERNEL_WIDEN_HALF, NULL, arg_infer, arg_compute, NULL, NULL},
    {"", "CumSum", 11, LD_KERNEL_WIDEN_HALF, NULL, cumsum_infer, cumsum_compute, NULL, NULL},
    {"", "CumSum", 14, LD_KERNEL_WIDEN_HALF, NULL, cumsum_infer, cumsum_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(scan);
