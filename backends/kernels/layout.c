/* layerdiff — kernels that rearrange or cut tensors: Transpose, DepthToSpace,
 * SpaceToDepth, Slice (strided views through ld_view_copy), Concat and
 * Split (block copies). All move data by element size, for every dtype. */
#include <inttypes.h>
#include <string.h>

#include "backends/kernels/conv_pool.h"
#include "backends/kernels/kernels.h"
#include "backends/kernels/shape_util.h"

/* --- Transpose (1, 13) -------------------------------------------------------------- */

static ld_status transpose_perm(ld_kernel_ctx *ctx, int rank, int *perm)
{
    const int64_t *p;
    size_t n;
    if (ld_node_attr_ints(ctx->node, "perm", &p, &n, ctx->err) != LD_OK)
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    if (!ld_node_attr(ctx->node, "perm")) {
        for (int i = 0; i < rank; i++)
            perm[i] = rank - 1 - i; /* default: reverse the axes */
        return LD_OK;
    }
    if (n != (size_t)rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "perm has %zu entries for an input of rank %d",
                              n, rank);
    bool seen[LD_MAX_RANK] = {false};
    for (int i = 0; i < rank; i++) {
        int a;
        ld_status st = ld_knorm_axis(ctx, p[i], rank, false, "perm entry", &a);
        if (st != LD_OK)
            return st;
        if (seen[a])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "perm lists axis %d twice", a);
        seen[a] = true;
        perm[i] = a;
    }
    return LD_OK;
}

static ld_status transpose_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int perm[LD_MAX_RANK];
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = transpose_perm(ctx, x->shape.rank, perm);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape.rank = x->shape.rank;
    for (int i = 0; i < x->shape.rank; i++)
        outs[0].shape.dims[i] = x->shape.dims[perm[i]];
    return LD_OK;
}

static ld_status transpose_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    int perm[LD_MAX_RANK];
    ld_status st = transpose_perm(ctx, x->shape.rank, perm);
    if (st != LD_OK)
        return st;
    int64_t strides[LD_MAX_RANK];
    ld_shape_strides(&x->shape, strides);
    ld_view v = {.rank = x->shape.rank};
    for (int i = 0; i < v.rank; i++) {
        v.dims[i] = x->shape.dims[perm[i]];
        v.strides[i] = strides[perm[i]];
    }
    ld_view_copy(ctx->outputs[0]->data, x->data, &v, ld_dtype_size(x->dtype), ctx->threads);
    return LD_OK;
}

/* --- DepthToSpace (1; 11: mode DCR/CRD; 13), SpaceToDepth (1, 13) ------------------ */

typedef struct block_params {
    int64_t b;
    bool crd; /* DepthToSpace mode CRD (column-row-depth) instead of DCR */
} block_params;

static ld_status block_params_read(ld_kernel_ctx *ctx, const ld_tensor *x, block_params *p)
{
    ld_status st = ld_kattr_int(ctx, "blocksize", 0, &p->b);
    const char *mode = "DCR";
    if (st == LD_OK && strcmp(ctx->node->op_type, "DepthToSpace") == 0 && ctx->node->opset >= 11)
        st = ld_kattr_string(ctx, "mode", "DCR", &mode);
    if (st != LD_OK)
        return st;
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "mode '%s' is not DCR or CRD", mode);
    p->crd = strcmp(mode, "CRD") == 0;
    if (p->b <= 0 || p->b > (1 << 20))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "blocksize %" PRId64 " must be positive",
                              p->b);
    if (x->shape.rank != 4)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input must be 4-D (N, C, H, W), got rank %d",
                              x->shape.rank);
    return LD_OK;
}

static ld_status depth_to_space_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    block_params p;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = block_params_read(ctx, x, &p);
    if (st != LD_OK)
        return st;
    const int64_t *d = x->shape.dims;
    if (d[1] % (p.b * p.b) != 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "channels (%" PRId64 ") are not a multiple of "
                              "blocksize^2 (%" PRId64 ")", d[1], p.b * p.b);
    ld_shape out = {.rank = 4, .dims = {d[0], d[1] / (p.b * p.b), d[2] * p.b, d[3] * p.b}};
    outs[0].dtype = x->dtype;
    outs[0].shape = out;
    return ld_kcheck_shape(ctx, &out, x->dtype, "output");
}

static ld_status depth_to_space_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    block_params p;
    ld_status st = block_params_read(ctx, x, &p);
    if (st != LD_OK)
        return st;
    int64_t s[4], b = p.b, c = x->shape.dims[1] / (b * b);
    ld_shape_strides(&x->shape, s);
    /* The output (N, C', H*b, W*b) read as (N, C', H, b, W, b); the source
     * channel is (bh*b + bw)*C' + c in DCR mode, (c*b + bh)*b + bw in CRD. */
    ld_view v = {.rank = 6, .dims = {x->shape.dims[0], c, x->shape.dims[2], b,
                                     x->shape.dims[3], b}};
    v.strides[0] = s[0];
    v.strides[2] = s[2];
    v.strides[4] = s[3];
    v.strides[1] = p.crd ? b * b * s[1] : s[1];
    v.strides[3] = p.crd ? b * s[1] : b * c * s[1];
    v.strides[5] = p.crd ? s[1] : c * s[1];
    ld_view_copy(ctx->outputs[0]->data, x->data, &v, ld_dtype_size(x->dtype), ctx->threads);
    return LD_OK;
}

static ld_status space_to_depth_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    block_params p;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = block_params_read(ctx, x, &p);
    if (st != LD_OK)
        return st;
    const int64_t *d = x->shape.dims;
    if (d[2] % p.b != 0 || d[3] % p.b != 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "height %" PRId64 " and width %" PRId64
                              " must be multiples of blocksize %" PRId64, d[2], d[3], p.b);
    ld_shape out = {.rank = 4, .dims = {d[0], d[1] * p.b * p.b, d[2] / p.b, d[3] / p.b}};
    outs[0].dtype = x->dtype;
    outs[0].shape = out;
    return ld_kcheck_shape(ctx, &out, x->dtype, "output");
}

static ld_status space_to_depth_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    block_params p;
    ld_status st = block_params_read(ctx, x, &p);
    if (st != LD_OK)
        return st;
    int64_t s[4], b = p.b;
    ld_shape_strides(&x->shape, s);
    /* Output channel (bh*b + bw)*C + c, i.e. the output read as
     * (N, bh, bw, C, H/b, W/b) from source (n, c, h*b + bh, w*b + bw). */
    ld_view v = {.rank = 6, .dims = {x->shape.dims[0], b, b, x->shape.dims[1],
                                     x->shape.dims[2] / b, x->shape.dims[3] / b}};
    v.strides[0] = s[0];
    v.strides[1] = s[2];
    v.strides[2] = s[3];
    v.strides[3] = s[1];
    v.strides[4] = b * s[2];
    v.strides[5] = b * s[3];
    ld_view_copy(ctx->outputs[0]->data, x->data, &v, ld_dtype_size(x->dtype), ctx->threads);
    return LD_OK;
}

/* --- Concat (1: axis defaults to 1; 4: axis required; 11: negative axis; 13) ------- */

static ld_status concat_axis(ld_kernel_ctx *ctx, int rank, int *axis)
{
    int64_t a;
    if (ctx->node->opset >= 4 && !ld_node_attr(ctx->node, "axis"))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'axis' is missing");
    ld_status st = ld_kattr_int(ctx, "axis", 1, &a);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, a, rank, false, "axis", axis);
    return st;
}

static ld_status concat_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int axis;
    ld_status st = ctx->n_inputs > 0 ? ld_krequire_data(ctx, 0, &x)
                                     : ld_kernel_fail(ctx, LD_ERR_INPUT, "has no inputs");
    if (st == LD_OK)
        st = concat_axis(ctx, x->shape.rank, &axis);
    if (st != LD_OK)
        return st;
    ld_shape out = x->shape;
    out.dims[axis] = 0;
    for (int i = 0; i < ctx->n_inputs; i++) {
        const ld_tensor *t = ctx->inputs[i];
        if (!t)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "input %d is missing", i);
        bool same = t->dtype == x->dtype && t->shape.rank == x->shape.rank;
        for (int d = 0; same && d < out.rank; d++)
            same = d == axis || t->shape.dims[d] == x->shape.dims[d];
        if (!same) {
            char a[128], b[128];
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "input %d (%s %s) does not match input 0 "
                                  "(%s %s) outside axis %d", i, ld_dtype_name(t->dtype),
                                  ld_shape_format(&t->shape, a, sizeof a),
                                  ld_dtype_name(x->dtype), ld_shape_format(&x->shape, b, sizeof b),
                                  axis);
        }
        out.dims[axis] += t->shape.dims[axis];
    }
    outs[0].dtype = x->dtype;
    outs[0].shape = out;
    return LD_OK;
}

/* Output bytes [from, to) of a Concat: walks the (outer row, input) blocks
 * that range covers and copies each part. */
static void concat_range(const ld_kernel_ctx *ctx, int axis, int64_t inner, int64_t out_row,
                         int64_t from, int64_t to)
{
    uint8_t *y = ctx->outputs[0]->data;
    while (from < to) {
        int64_t o = from / out_row, in_row = from - o * out_row, at = 0, block = 0;
        int i = 0;
        for (; i < ctx->n_inputs; i++) {
            block = ctx->inputs[i]->shape.dims[axis] * inner;
            if (in_row < at + block)
                break;
            at += block;
        }
        int64_t off = in_row - at, len = block - off < to - from ? block - off : to - from;
        memcpy(y + from, (const uint8_t *)ctx->inputs[i]->data + o * block + off, (size_t)len);
        from += len;
    }
}

/* Below this many output bytes Concat copies on one thread. */
#define CONCAT_PARALLEL_MIN_BYTES ((int64_t)1 << 18)
/* The output is copied in items of this many bytes (a multiple of 64: no
 * cache line is written by two threads). */
#define CONCAT_ITEM_BYTES ((int64_t)1 << 15)

typedef struct concat_job {
    const ld_kernel_ctx *ctx;
    int axis;
    int64_t inner, out_row, total;
} concat_job;

/* Items [i0, i1) of CONCAT_ITEM_BYTES (a claim of ld_conv_pool_run). */
static void concat_items(void *arg, int worker, int64_t i0, int64_t i1)
{
    (void)worker;
    const concat_job *j = arg;
    int64_t to = i1 * CONCAT_ITEM_BYTES;
    concat_range(j->ctx, j->axis, j->inner, j->out_row, i0 * CONCAT_ITEM_BYTES,
                 to < j->total ? to : j->total);
}

/* The output is cut into byte ranges copied on the convolutions' claim pool
 * (PaddleOCR det's FPN concatenates 4 x 2.4 MB into one 9.8 MB tensor: a
 * copy one core cannot finish at the memory's speed); as the fused chains
 * (exec_fuse.c), one helper thread for the whole run instead of waking
 * OpenMP's. Bytes are copied as they are. */
static ld_status concat_compute(ld_kernel_ctx *ctx)
{
    ld_tensor *y = ctx->outputs[0];
    int axis;
    ld_status st = concat_axis(ctx, y->shape.rank, &axis);
    if (st != LD_OK || y->count == 0)
        return st;
    size_t es = ld_dtype_size(y->dtype);
    int64_t inner = ld_dims_product(y->shape.dims, axis + 1, y->shape.rank) * (int64_t)es;
    int64_t out_row = y->shape.dims[axis] * inner, total = (int64_t)y->nbytes;
    if (out_row == 0)
        return LD_OK;
    int threads = ctx->threads > 1 && total >= CONCAT_PARALLEL_MIN_BYTES ? ctx->threads : 1;
    if (threads == 1) {
        concat_range(ctx, axis, inner, out_row, 0, total);
        return LD_OK;
    }
    concat_job job = {.ctx = ctx, .axis = axis, .inner = inner, .out_row = out_row,
                      .total = total};
    int64_t items = (total + CONCAT_ITEM_BYTES - 1) / CONCAT_ITEM_BYTES;
    ld_conv_pool_run(threads, items, ld_conv_pool_claim(items, threads), concat_items, &job);
    return LD_OK;
}

/* --- Split (1: split input or attribute; 2: attribute; 11: negative axis;
 *     13: split input) ----------------------------------------------------------------- */

/* The sizes of the outputs along the axis; *sizes is new (free it). */
static ld_status split_sizes(ld_kernel_ctx *ctx, const ld_tensor *x, int *axis, int64_t **sizes)
{
    int64_t a;
    ld_status st = ld_kattr_int(ctx, "axis", 0, &a);
    if (st == LD_OK)
        st = ld_knorm_axis(ctx, a, x->shape.rank, false, "axis", axis);
    if (st != LD_OK)
        return st;
    int64_t dim = x->shape.dims[*axis], n = 0, *s = NULL;
    const ld_attr *attr = ld_node_attr(ctx->node, "split");
    const ld_tensor *input = ctx->node->opset < 2 || ctx->node->opset >= 13 ? ld_kin(ctx, 1)
                                                                              : NULL;
    if (input) {
        st = ld_kread_ints_alloc(ctx, input, "split", &s, &n);
    } else if (attr && ctx->node->opset < 13) {
        if (attr->type != LD_ATTR_INTS)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'split' must be ints");
        n = (int64_t)attr->n;
        s = malloc((size_t)(n ? n : 1) * sizeof *s);
        if (!s)
            return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        if (n)
            memcpy(s, attr->ints, (size_t)n * sizeof *s);
    } else {
        /* Equal parts. */
        n = ctx->n_outputs;
        if (n <= 0 || dim % n != 0)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "axis %d of size %" PRId64 " cannot be "
                                  "split into %d equal parts", *axis, dim, ctx->n_outputs);
        s = malloc((size_t)n * sizeof *s);
        if (!s)
            return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < n; i++)
            s[i] = dim / n;
    }
    if (st != LD_OK)
        return st;
    int64_t total = 0;
    for (int64_t i = 0; st == LD_OK && i < n; i++) {
        if (s[i] < 0 || s[i] > dim)
            st = ld_kernel_fail(ctx, LD_ERR_INPUT, "split size %" PRId64 " (output %" PRId64
                                ") is out of range for axis %d of size %" PRId64, s[i], i,
                                *axis, dim);
        total += s[i];
    }
    if (st == LD_OK && n != ctx->n_outputs)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "split has %" PRId64 " sizes for %d outputs", n,
                            ctx->n_outputs);
    if (st == LD_OK && total != dim)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "split sizes add up to %" PRId64 ", not the "
                            "axis %d size %" PRId64, total, *axis, dim);
    if (st != LD_OK)
        free(s);
    else
        *sizes = s;
    return st;
}

static ld_status split_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    int axis;
    int64_t *sizes = NULL;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = split_sizes(ctx, x, &axis, &sizes);
    if (st != LD_OK)
        return st;
    for (int i = 0; i < ctx->n_outputs; i++) {
        outs[i].dtype = x->dtype;
        outs[i].shape = x->shape;
        outs[i].shape.dims[axis] = sizes[i];
    }
    free(sizes);
    return LD_OK;
}

static ld_status split_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    int axis;
    int64_t *sizes = NULL;
    ld_status st = split_sizes(ctx, x, &axis, &sizes);
    if (st != LD_OK)
        return st;
    size_t es = ld_dtype_size(x->dtype);
    int64_t outer = ld_dims_product(x->shape.dims, 0, axis);
    int64_t inner = ld_dims_product(x->shape.dims, axis + 1, x->shape.rank) * (int64_t)es;
    int64_t in_row = x->shape.dims[axis] * inner, at = 0;
    for (int i = 0; i < ctx->n_outputs; i++) {
        ld_tensor *y = ctx->outputs[i];
        int64_t block = sizes[i] * inner;
        for (int64_t o = 0; y && block && o < outer; o++)
            memcpy((uint8_t *)y->data + o * block, (const uint8_t *)x->data + o * in_row + at,
                   (size_t)block);
        at += block;
    }
    free(sizes);
    return LD_OK;
}

/* --- Slice (1: starts/ends/axes attributes; 10: inputs and steps; 11, 13) ---------- */

typedef struct slice_plan {
    int64_t start[LD_MAX_RANK], step[LD_MAX_RANK];
    ld_shape out;
} slice_plan;

/* The 1-D list of starts/ends/axes/steps: attribute (opset 1) or input. */
static ld_status slice_list(ld_kernel_ctx *ctx, const char *name, int input, int64_t **out,
                            int64_t *n, bool *present)
{
    *out = NULL;
    *n = 0;
    *present = false;
    if (ctx->node->opset < 10) {
        const ld_attr *a = ld_node_attr(ctx->node, name);
        if (!a)
            return LD_OK;
        if (a->type != LD_ATTR_INTS)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute '%s' must be ints", name);
        *present = true;
        *out = malloc((a->n ? a->n : 1) * sizeof **out);
        if (!*out)
            return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        if (a->n)
            memcpy(*out, a->ints, a->n * sizeof **out);
        *n = (int64_t)a->n;
        return LD_OK;
    }
    if (!ld_kin(ctx, input))
        return LD_OK;
    *present = true;
    return ld_kread_ints_alloc(ctx, ld_kin(ctx, input), name, out, n);
}

/* Clamps start/end per the spec (ONNX Runtime does the same) and counts. */
static int64_t slice_axis(int64_t dim, int64_t *start, int64_t end, int64_t step)
{
    if (*start < 0)
        *start += dim;
    if (end < 0)
        end += dim;
    if (step > 0) {
        *start = *start < 0 ? 0 : *start > dim ? dim : *start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        return end > *start ? 1 + (end - *start - 1) / step : 0;
    }
    if (dim == 0)
        return 0;
    *start = *start < 0 ? 0 : *start > dim - 1 ? dim - 1 : *start;
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    return *start > end ? 1 + (*start - end - 1) / -step : 0;
}

static ld_status slice_plan_make(ld_kernel_ctx *ctx, const ld_tensor *x, slice_plan *p)
{
    const char *names[4] = {"starts", "ends", "axes", "steps"};
    int64_t *v[4] = {NULL}, n[4];
    bool present[4];
    ld_status st = LD_OK;
    for (int i = 0; st == LD_OK && i < 4; i++)
        st = slice_list(ctx, names[i], i + 1, &v[i], &n[i], &present[i]);
    if (st == LD_OK && (!present[0] || !present[1]))
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "starts and ends are required");
    for (int i = 1; st == LD_OK && i < 4; i++)
        if (present[i] && n[i] != n[0])
            st = ld_kernel_fail(ctx, LD_ERR_INPUT, "%s has %" PRId64 " entries but starts has %"
                                PRId64, names[i], n[i], n[0]);
    if (st == LD_OK && n[0] > x->shape.rank)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "starts has %" PRId64 " entries for an input of "
                            "rank %d", n[0], x->shape.rank);
    p->out = x->shape;
    bool sliced[LD_MAX_RANK] = {false};
    for (int d = 0; d < x->shape.rank; d++) {
        p->start[d] = 0;
        p->step[d] = 1;
    }
    for (int64_t i = 0; st == LD_OK && i < n[0]; i++) {
        int axis = (int)i;
        if (present[2])
            st = ld_knorm_axis(ctx, v[2][i], x->shape.rank, false, "axis", &axis);
        if (st == LD_OK && sliced[axis])
            st = ld_kernel_fail(ctx, LD_ERR_INPUT, "axis %d is sliced twice", axis);
        int64_t step = present[3] ? v[3][i] : 1;
        if (st == LD_OK && step == 0)
            st = ld_kernel_fail(ctx, LD_ERR_INPUT, "step for axis %d is zero", axis);
        if (st != LD_OK)
            break;
        sliced[axis] = true;
        p->start[axis] = v[0][i];
        p->step[axis] = step;
        p->out.dims[axis] = slice_axis(x->shape.dims[axis], &p->start[axis], v[1][i], step);
    }
    for (int i = 0; i < 4; i++)
        free(v[i]);
    return st;
}

static ld_status slice_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const ld_tensor *x;
    slice_plan p;
    ld_status st = ld_krequire_data(ctx, 0, &x);
    if (st == LD_OK)
        st = slice_plan_make(ctx, x, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape = p.out;
    return LD_OK;
}

static ld_status slice_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    slice_plan p;
    ld_status st = slice_plan_make(ctx, x, &p);
    if (st != LD_OK || y->count == 0)
        return st;
    int64_t strides[LD_MAX_RANK], offset = 0;
    size_t es = ld_dtype_size(x->dtype);
    ld_shape_strides(&x->shape, strides);
    ld_view v = {.rank = x->shape.rank};
    for (int d = 0; d < v.rank; d++) {
        offset += p.start[d] * strides[d];
        v.dims[d] = p.out.dims[d];
        v.strides[d] = p.step[d] * strides[d];
    }
    ld_view_copy(y->data, (const uint8_t *)x->data + offset * (int64_t)es, &v, es, ctx->threads);
    return LD_OK;
}

static const ld_kernel layout_kernels[] = {
    {"", "Concat", 1, 0, NULL, concat_infer, concat_compute, NULL, NULL},
    {"", "Concat", 4, 0, NULL, concat_infer, concat_compute, NULL, NULL},
    {"", "Concat", 11, 0, NULL, concat_infer, concat_compute, NULL, NULL},
    {"", "Concat", 13, 0, NULL, concat_infer, concat_compute, NULL, NULL},
    {"", "DepthToSpace", 1, 0, NULL, depth_to_space_infer, depth_to_space_compute, NULL, NULL},
    {"", "DepthToSpace", 11, 0, NULL, depth_to_space_infer, depth_to_space_compute, NULL, NULL},
    {"", "DepthToSpace", 13, 0, NULL, depth_to_space_infer, depth_to_space_compute, NULL, NULL},
    {"", "Slice", 1, 0, NULL, slice_infer, slice_compute, NULL, NULL},
    {"", "Slice", 10, 0, NULL, slice_infer, slice_compute, NULL, NULL},
    {"", "Slice", 11, 0, NULL, slice_infer, slice_compute, NULL, NULL},
    {"", "Slice", 13, 0, NULL, slice_infer, slice_compute, NULL, NULL},
    {"", "SpaceToDepth", 1, 0, NULL, space_to_depth_infer, space_to_depth_compute, NULL, NULL},
    {"", "SpaceToDepth", 13, 0, NULL, space_to_depth_infer, space_to_depth_compute, NULL, NULL},
    {"", "Split", 1, 0, NULL, split_infer, split_compute, NULL, NULL},
    {"", "Split", 2, 0, NULL, split_infer, split_compute, NULL, NULL},
    {"", "Split", 11, 0, NULL, split_infer, split_compute, NULL, NULL},
    {"", "Split", 13, 0, NULL, split_infer, split_compute, NULL, NULL},
    {"", "Transpose", 1, 0, NULL, transpose_infer, transpose_compute, NULL, NULL},
    {"", "Transpose", 13, 0, NULL, transpose_infer, transpose_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(layout);
