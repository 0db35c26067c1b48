/* layerdiff — kernels that change a tensor's shape or build tensors from
 * shapes: Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile, Shape, Size,
 * ConstantOfShape, Range, EyeLike. Data moves by element size, so every
 * dtype works natively. Shapes read from input values are validated
 * (negative dims, overflow, a size limit) before anything is allocated. */
#include <inttypes.h>
#include <math.h>

#include "backends/broadcast.h"
#include "backends/kernels/kernels.h"
#include "backends/kernels/shape_util.h"

/* Output 0 = input 0's bytes (the shape changed, the data did not). */
static ld_status copy_input0_compute(ld_kernel_ctx *ctx)
{
    if (ctx->inputs[0]->nbytes)
        memcpy(ctx->outputs[0]->data, ctx->inputs[0]->data, ctx->inputs[0]->nbytes);
    return LD_OK;
}

/* --- Reshape (1: shape attribute; 5: shape input; 14: allowzero) ------------------ */

static ld_status reshape_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    int64_t dims[LD_MAX_RANK], allowzero = 0;
    int n = 0;
    bool present;
    if (st == LD_OK)
        st = ld_kread_list(ctx, ctx->node->opset < 5, "shape", 1, dims, LD_MAX_RANK, &n, &present);
    if (st == LD_OK && !present)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "the target shape is missing");
    if (st == LD_OK && ctx->node->opset >= 14)
        st = ld_kattr_int(ctx, "allowzero", 0, &allowzero);
    if (st != LD_OK)
        return st;
    int unknown = -1;
    bool has_zero = false;
    ld_shape out = {.rank = n};
    for (int i = 0; i < n; i++) {
        int64_t d = dims[i];
        if (d == -1) {
            if (unknown >= 0)
                return ld_kernel_fail(ctx, LD_ERR_INPUT, "target shape has -1 at axes %d and "
                                      "%d; at most one dimension can be inferred", unknown, i);
            unknown = i;
            d = 1;
        } else if (d == 0 && !allowzero) {
            if (i >= x->shape.rank)
                return ld_kernel_fail(ctx, LD_ERR_INPUT, "target shape has 0 (copy the input "
                                      "dimension) at axis %d but the input has rank %d", i,
                                      x->shape.rank);
            d = x->shape.dims[i];
        } else if (d < 0) {
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "target shape has invalid dimension %"
                                  PRId64 " at axis %d", d, i);
        }
        has_zero |= dims[i] == 0;
        out.dims[i] = d;
    }
    if (allowzero && has_zero && unknown >= 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "with allowzero=1 the target shape cannot "
                              "hold both 0 and -1");
    int64_t known;
    if (ld_shape_count(&out, &known, "target shape", ctx->err) != LD_OK)
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    char a[128], b[128];
    if (unknown >= 0) {
        if (known == 0 || x->count % known != 0)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "cannot reshape %s (%" PRId64 " elements) "
                                  "to %s: the -1 dimension cannot be inferred",
                                  ld_shape_format(&x->shape, a, sizeof a), x->count,
                                  ld_shape_format(&out, b, sizeof b));
        out.dims[unknown] = x->count / known;
    } else if (known != x->count) {
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "cannot reshape %s (%" PRId64 " elements) to "
                              "%s (%" PRId64 " elements)", ld_shape_format(&x->shape, a, sizeof a),
                              x->count, ld_shape_format(&out, b, sizeof b), known);
    }
    outs[0].dtype = x->dtype;
    outs[0].shape = out;
    return LD_OK;
}

/* --- Flatten (1, 9, 11, 13): 2-D (prod(dims[:axis]), prod(dims[axis:])) ------------- */

static ld_status flatten_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int64_t axis;
    int a;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = ld_kattr_int(ctx, "axis", 1, &axis);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, axis, x->shape.rank, true, "axis", &a);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape.rank = 2;
    outs[0].shape.dims[0] = ld_dims_product(x->shape.dims, 0, a);
    outs[0].shape.dims[1] = ld_dims_product(x->shape.dims, a, x->shape.rank);
    return LD_OK;
}

/* --- Squeeze / Unsqueeze (1: axes attribute; 11: negative axes; 13: axes input) ----- */

static ld_status squeeze_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int64_t axes[LD_MAX_RANK];
    int n = 0;
    bool present;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = ld_kread_list(ctx, ctx->node->opset < 13, "axes", 1, axes, LD_MAX_RANK, &n, &present);
    if (st != LD_OK)
        return st;
    const ld_shape *in = &x->shape;
    bool drop[LD_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int a;
        st = ld_knorm_axis(ctx, axes[i], in->rank, false, "axis", &a);
        if (st != LD_OK)
            return st;
        if (drop[a])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "axis %d is listed twice", a);
        if (in->dims[a] != 1)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "cannot squeeze axis %d of size %" PRId64,
                                  a, in->dims[a]);
        drop[a] = true;
    }
    ld_shape out = {.rank = 0};
    for (int d = 0; d < in->rank; d++)
        if (!(n > 0 ? drop[d] : in->dims[d] == 1))
            out.dims[out.rank++] = in->dims[d];
    outs[0].dtype = x->dtype;
    outs[0].shape = out;
    return LD_OK;
}

static ld_status unsqueeze_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int64_t axes[LD_MAX_RANK];
    int n = 0;
    bool present;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = ld_kread_list(ctx, ctx->node->opset < 13, "axes", 1, axes, LD_MAX_RANK, &n, &present);
    if (st != LD_OK)
        return st;
    if (!present)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "axes are missing");
    int rank = x->shape.rank + n;
    if (rank > LD_MAX_RANK)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "output rank %d exceeds the supported "
                              "%d", rank, LD_MAX_RANK);
    bool inserted[LD_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        int a;
        st = ld_knorm_axis(ctx, axes[i], rank, false, "axis", &a);
        if (st != LD_OK)
            return st;
        if (inserted[a])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "axis %d is listed twice", a);
        inserted[a] = true;
    }
    ld_shape out = {.rank = rank};
    for (int d = 0, j = 0; d < rank; d++)
        out.dims[d] = inserted[d] ? 1 : x->shape.dims[j++];
    outs[0].dtype = x->dtype;
    outs[0].shape = out;
    return LD_OK;
}

/* --- Expand (8, 13): bidirectional broadcast to a shape input -------------------- */

static ld_status expand_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    ld_shape target = {.rank = 0};
    bool present;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = ld_kread_list(ctx, false, "shape", 1, target.dims, LD_MAX_RANK, &target.rank, &present);
    if (st == LD_OK && !present)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "the shape input is missing");
    for (int d = 0; st == LD_OK && d < target.rank; d++)
        if (target.dims[d] < 0)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "shape has negative dimension %" PRId64
                                  " at axis %d", target.dims[d], d);
    if (st == LD_OK && ld_broadcast_shape(&x->shape, &target, &outs[0].shape, NULL, ctx->err))
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    if (st == LD_OK)
        st = ld_kcheck_shape(ctx, &outs[0].shape, x->dtype, "expanded output");
    outs[0].dtype = x->dtype;
    return st;
}

static ld_status expand_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    int64_t in_strides[LD_MAX_RANK];
    ld_shape_strides(&x->shape, in_strides);
    ld_view v = {.rank = y->shape.rank};
    int off = y->shape.rank - x->shape.rank;
    for (int d = 0; d < v.rank; d++) {
        v.dims[d] = y->shape.dims[d];
        v.strides[d] = d < off || x->shape.dims[d - off] == 1 ? 0 : in_strides[d - off];
    }
    ld_view_copy(y->data, x->data, &v, ld_dtype_size(x->dtype), ctx->threads);
    return LD_OK;
}

/* --- Tile (1: tiles and axis scalars; 6: repeats per axis) ------------------------- */

static ld_status tile_repeats(ld_kernel_ctx *ctx, const ld_tensor *x, int64_t *repeats)
{
    for (int d = 0; d < x->shape.rank; d++)
        repeats[d] = 1;
    if (ctx->node->opset < 6) {
        int64_t tiles, axis;
        int a;
        ld_status st = ld_kread_scalar_int(ctx, ld_kin(ctx, 1), "tiles", &tiles);
        if (st == LD_OK)
            st = ld_kread_scalar_int(ctx, ld_kin(ctx, 2), "axis", &axis);
        if (st == LD_OK)
            st = ld_knorm_axis(ctx, axis, x->shape.rank, false, "axis", &a);
        if (st == LD_OK)
            repeats[a] = tiles;
        return st;
    }
    int n;
    ld_status st = ld_kread_ints(ctx, ld_kin(ctx, 1), "repeats", repeats, LD_MAX_RANK, &n);
    if (st == LD_OK && n != x->shape.rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "repeats has %d entries for an input of rank "
                              "%d", n, x->shape.rank);
    return st;
}

static ld_status tile_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int64_t repeats[LD_MAX_RANK];
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = tile_repeats(ctx, x, repeats);
    if (st != LD_OK)
        return st;
    ld_shape out = x->shape;
    for (int d = 0; d < out.rank; d++) {
        if (repeats[d] < 0)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "repeat count %" PRId64 " for axis %d is "
                                  "negative", repeats[d], d);
        if (out.dims[d] && repeats[d] > INT64_MAX / out.dims[d])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "repeating axis %d (%" PRId64 ") %" PRId64
                                  " times overflows", d, out.dims[d], repeats[d]);
        out.dims[d] *= repeats[d];
    }
    outs[0].dtype = x->dtype;
    outs[0].shape = out;
    return ld_kcheck_shape(ctx, &out, x->dtype, "tiled output");
}

static ld_status tile_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    int64_t in_strides[LD_MAX_RANK];
    ld_shape_strides(&x->shape, in_strides);
    /* Output axis d of size r*n is viewed as (r, n) with source strides (0, s). */
    ld_view v = {.rank = 2 * x->shape.rank};
    for (int d = 0; d < x->shape.rank; d++) {
        int64_t n = x->shape.dims[d];
        v.dims[2 * d] = n ? y->shape.dims[d] / n : 0;
        v.strides[2 * d] = 0;
        v.dims[2 * d + 1] = n;
        v.strides[2 * d + 1] = in_strides[d];
    }
    ld_view_copy(y->data, x->data, &v, ld_dtype_size(x->dtype), ctx->threads);
    return LD_OK;
}

/* --- Shape (1, 13; 15: start/end), Size (1, 13) ------------------------------------ */

static ld_status shape_range(ld_kernel_ctx *ctx, int rank, int64_t *start, int64_t *end)
{
    *start = 0;
    *end = rank;
    if (ctx->node->opset < 15)
        return LD_OK;
    ld_status st = ld_kattr_int(ctx, "start", 0, start);
    if (st == LD_OK)
        st = ld_kattr_int(ctx, "end", rank, end);
    if (st != LD_OK)
        return st;
    /* Negative values count from the back; both are clamped to [0, rank]. */
    int64_t *v[2] = {start, end};
    for (int i = 0; i < 2; i++) {
        if (*v[i] < 0)
            *v[i] += rank;
        *v[i] = *v[i] < 0 ? 0 : *v[i] > rank ? rank : *v[i];
    }
    if (*end < *start)
        *end = *start;
    return LD_OK;
}

static ld_status shape_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    int64_t start = 0, end = 0; /* read below even when a check failed */
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = shape_range(ctx, ctx->inputs[0]->shape.rank, &start, &end);
    outs[0].dtype = LD_DTYPE_INT64;
    outs[0].shape.rank = 1;
    outs[0].shape.dims[0] = end - start;
    return st;
}

static ld_status shape_compute(ld_kernel_ctx *ctx)
{
    int64_t start, end;
    ld_status st = shape_range(ctx, ctx->inputs[0]->shape.rank, &start, &end);
    if (st == LD_OK && end > start)
        memcpy(ctx->outputs[0]->data, ctx->inputs[0]->shape.dims + start,
               (size_t)(end - start) * sizeof(int64_t));
    return st;
}

static ld_status size_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    outs[0].dtype = LD_DTYPE_INT64;
    outs[0].shape.rank = 0;
    return ld_krequire(ctx, 0);
}

static ld_status size_compute(ld_kernel_ctx *ctx)
{
    memcpy(ctx->outputs[0]->data, &ctx->inputs[0]->count, sizeof(int64_t));
    return LD_OK;
}

/* --- ConstantOfShape (9): a shape input filled with the one-element `value` ------- */

typedef struct fill_state {
    ld_dtype dtype;
    uint8_t value[8];
} fill_state;

static ld_status constant_of_shape_init(ld_kernel_ctx *ctx)
{
    fill_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    s->dtype = LD_DTYPE_FLOAT32; /* default: float32 zero */
    const ld_attr *a = ld_node_attr(ctx->node, "value");
    if (!a)
        return LD_OK;
    if (a->type != LD_ATTR_TENSOR || !a->t)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'value' must be a tensor");
    size_t es = ld_dtype_size(a->t->dtype);
    if (es == 0 || es > sizeof s->value || !a->t->data)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "attribute 'value' has dtype %s, which "
                              "is not supported", ld_dtype_name(a->t->dtype));
    if (a->t->count != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'value' must hold one element, it "
                              "has %" PRId64, a->t->count);
    s->dtype = a->t->dtype;
    memcpy(s->value, a->t->data, es);
    return LD_OK;
}

static ld_status constant_of_shape_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const fill_state *s = ctx->state;
    ld_shape shape = {.rank = 0};
    ld_status st = ld_kread_ints(ctx, ld_kin(ctx, 0), "input", shape.dims, LD_MAX_RANK,
                                 &shape.rank);
    if (st == LD_OK)
        st = ld_kcheck_shape(ctx, &shape, s->dtype, "output");
    outs[0].dtype = s->dtype;
    outs[0].shape = shape;
    return st;
}

static ld_status constant_of_shape_compute(ld_kernel_ctx *ctx)
{
    const fill_state *s = ctx->state;
    ld_tensor *y = ctx->outputs[0];
    ld_fill_elements(y->data, s->value, ld_dtype_size(y->dtype), y->count);
    return LD_OK;
}

/* --- Range (11): start, start+delta, ... while < limit (> for negative delta) -------- */

static ld_status range_scalar(ld_kernel_ctx *ctx, int i, const char *what, double *out)
{
    const ld_tensor *t = ld_kin(ctx, i);
    if (!t)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input '%s' is missing", what);
    if (t->count != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input '%s' must be a scalar, it has %" PRId64
                              " elements", what, t->count);
    if (t->dtype != ctx->inputs[0]->dtype)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input '%s' is %s but start is %s", what,
                              ld_dtype_name(t->dtype), ld_dtype_name(ctx->inputs[0]->dtype));
    ld_status st = ld_krequire_values(ctx, t, what);
    if (st != LD_OK)
        return st;
    *out = ld_tensor_get_double(t, 0);
    return LD_OK;
}

/* Element count of an integer Range, exactly (no int64 overflow, no
 * rounding through double): ceil((limit - start) / delta), at least 0. */
static uint64_t range_int_count(int64_t start, int64_t limit, int64_t delta)
{
    if (delta > 0 ? limit <= start : limit >= start)
        return 0;
    uint64_t diff = delta > 0 ? (uint64_t)limit - (uint64_t)start
                              : (uint64_t)start - (uint64_t)limit;
    uint64_t step = delta > 0 ? (uint64_t)delta : (uint64_t)(-(delta + 1)) + 1;
    return diff / step + (diff % step != 0);
}

static ld_status range_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    double start, limit, delta;
    ld_status st = ld_krequire(ctx, 0);
    if (st == LD_OK)
        st = range_scalar(ctx, 0, "start", &start);
    if (st == LD_OK)
        st = range_scalar(ctx, 1, "limit", &limit);
    if (st == LD_OK)
        st = range_scalar(ctx, 2, "delta", &delta);
    if (st != LD_OK)
        return st;
    ld_dtype dt = ctx->inputs[0]->dtype;
    if (dt != LD_DTYPE_FLOAT32 && dt != LD_DTYPE_FLOAT64 && dt != LD_DTYPE_INT16 &&
        dt != LD_DTYPE_INT32 && dt != LD_DTYPE_INT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(dt));
    if (delta == 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "delta is zero");
    double n;
    if (ld_dtype_is_float(dt)) {
        /* As ONNX Runtime: ceil((limit - start) / delta), the difference taken
         * in the input type. */
        double diff = dt == LD_DTYPE_FLOAT32 ? (double)((float)limit - (float)start)
                                             : limit - start;
        n = ceil(diff / delta);
        if (!(n > 0))
            n = 0;
    } else {
        n = (double)range_int_count(ld_tensor_int_at(ctx->inputs[0], 0),
                                    ld_tensor_int_at(ctx->inputs[1], 0),
                                    ld_tensor_int_at(ctx->inputs[2], 0));
    }
    int64_t es = (int64_t)ld_dtype_size(dt);
    if (n > (double)(ld_kernel_value_shaped_limit() / es))
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "start %g, limit %g, delta %g give %g elements, "
                              "over the limit for shapes read from input values", start, limit,
                              delta, n);
    outs[0].dtype = dt;
    outs[0].shape.rank = 1;
    outs[0].shape.dims[0] = (int64_t)n;
    return LD_OK;
}

/* Integers: start + i * delta in wrapping arithmetic (exact, never overflows
 * while the value stays below limit). Floats: accumulated one addition at a
 * time in the input type, as ONNX Runtime and the spec's function body do. */
#define RANGE_INT(T)                                                                    \
    do {                                                                                \
        T s_, d_;                                                                       \
        memcpy(&s_, ctx->inputs[0]->data, sizeof s_);                                   \
        memcpy(&d_, ctx->inputs[2]->data, sizeof d_);                                   \
        T *y_ = y->data;                                                                \
        for (int64_t i = 0; i < y->count; i++)                                          \
            y_[i] = (T)(uint64_t)((uint64_t)(int64_t)s_ + (uint64_t)i * (uint64_t)(int64_t)d_); \
    } while (0)
#define RANGE_FLOAT(T)                                                                  \
    do {                                                                                \
        T s_, d_;                                                                       \
        memcpy(&s_, ctx->inputs[0]->data, sizeof s_);                                   \
        memcpy(&d_, ctx->inputs[2]->data, sizeof d_);                                   \
        T *y_ = y->data;                                                                \
        for (int64_t i = 0; i < y->count; i++, s_ += d_)                                \
            y_[i] = s_;                                                                 \
    } while (0)

static ld_status range_compute(ld_kernel_ctx *ctx)
{
    ld_tensor *y = ctx->outputs[0];
    switch (y->dtype) {
    case LD_DTYPE_FLOAT32: RANGE_FLOAT(float); break;
    case LD_DTYPE_FLOAT64: RANGE_FLOAT(double); break;
    case LD_DTYPE_INT16: RANGE_INT(int16_t); break;
    case LD_DTYPE_INT32: RANGE_INT(int32_t); break;
    default: RANGE_INT(int64_t); break;
    }
    return LD_OK;
}

/* --- EyeLike (9): ones on diagonal k of a 2-D shape, zeros elsewhere ---------------- */

static ld_status eyelike_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_krequire(ctx, 0);
    int64_t dtype;
    if (st == LD_OK)
        st = ld_kattr_int(ctx, "dtype", ctx->inputs[0]->dtype, &dtype);
    if (st != LD_OK)
        return st;
    uint8_t one[8];
    if (dtype <= 0 || dtype >= LD_DTYPE_COUNT_ || !ld_dtype_one((ld_dtype)dtype, one))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "output dtype %s (%" PRId64 ") is not "
                              "supported", ld_dtype_name((ld_dtype)dtype), dtype);
    if (ctx->inputs[0]->shape.rank != 2)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input must be 2-D, got rank %d",
                              ctx->inputs[0]->shape.rank);
    outs[0].dtype = (ld_dtype)dtype;
    outs[0].shape = ctx->inputs[0]->shape;
    return LD_OK;
}

static ld_status eyelike_compute(ld_kernel_ctx *ctx)
{
    ld_tensor *y = ctx->outputs[0];
    int64_t k;
    ld_status st = ld_kattr_int(ctx, "k", 0, &k);
    if (st != LD_OK)
        return st;
    uint8_t one[8];
    ld_dtype_one(y->dtype, one);
    size_t es = ld_dtype_size(y->dtype);
    if (y->nbytes)
        memset(y->data, 0, y->nbytes);
    int64_t rows = y->shape.dims[0], cols = y->shape.dims[1];
    for (int64_t i = k < 0 ? -k : 0; i < rows && i + k < cols; i++)
        memcpy((uint8_t *)y->data + (size_t)(i * cols + i + k) * es, one, es);
    return LD_OK;
}

/* One row per opset version the spec defines; kernels that differ by
 * version read ctx->node->opset. */
static const ld_kernel shape_kernels[] = {
    {"", "ConstantOfShape", 9, 0, constant_of_shape_init, constant_of_shape_infer,
     constant_of_shape_compute, free, NULL},
    {"", "Expand", 8, 0, NULL, expand_infer, expand_compute, NULL, NULL},
    {"", "Expand", 13, 0, NULL, expand_infer, expand_compute, NULL, NULL},
    {"", "EyeLike", 9, 0, NULL, eyelike_infer, eyelike_compute, NULL, NULL},
    {"", "Flatten", 1, 0, NULL, flatten_infer, copy_input0_compute, NULL, NULL},
    {"", "Flatten", 9, 0, NULL, flatten_infer, copy_input0_compute, NULL, NULL},
    {"", "Flatten", 11, 0, NULL, flatten_infer, copy_input0_compute, NULL, NULL},
    {"", "Flatten", 13, 0, NULL, flatten_infer, copy_input0_compute, NULL, NULL},
    {"", "Range", 11, 0, NULL, range_infer, range_compute, NULL, NULL},
    {"", "Reshape", 1, 0, NULL, reshape_infer, copy_input0_compute, NULL, NULL},
    {"", "Reshape", 5, 0, NULL, reshape_infer, copy_input0_compute, NULL, NULL},
    {"", "Reshape", 13, 0, NULL, reshape_infer, copy_input0_compute, NULL, NULL},
    {"", "Reshape", 14, 0, NULL, reshape_infer, copy_input0_compute, NULL, NULL},
    {"", "Shape", 1, 0, NULL, shape_infer, shape_compute, NULL, NULL},
    {"", "Shape", 13, 0, NULL, shape_infer, shape_compute, NULL, NULL},
    {"", "Shape", 15, 0, NULL, shape_infer, shape_compute, NULL, NULL},
    {"", "Size", 1, 0, NULL, size_infer, size_compute, NULL, NULL},
    {"", "Size", 13, 0, NULL, size_infer, size_compute, NULL, NULL},
    {"", "Squeeze", 1, 0, NULL, squeeze_infer, copy_input0_compute, NULL, NULL},
    {"", "Squeeze", 11, 0, NULL, squeeze_infer, copy_input0_compute, NULL, NULL},
    {"", "Squeeze", 13, 0, NULL, squeeze_infer, copy_input0_compute, NULL, NULL},
    {"", "Tile", 1, 0, NULL, tile_infer, tile_compute, NULL, NULL},
    {"", "Tile", 6, 0, NULL, tile_infer, tile_compute, NULL, NULL},
    {"", "Tile", 13, 0, NULL, tile_infer, tile_compute, NULL, NULL},
    {"", "Unsqueeze", 1, 0, NULL, unsqueeze_infer, copy_input0_compute, NULL, NULL},
    {"", "Unsqueeze", 11, 0, NULL, unsqueeze_infer, copy_input0_compute, NULL, NULL},
    {"", "Unsqueeze", 13, 0, NULL, unsqueeze_infer, copy_input0_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(shape);
