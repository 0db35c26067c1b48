/* layerdiff — drivers shared by the elementwise kernel families (see
 * elementwise.h). */
#include "backends/kernels/elementwise.h"

#include <inttypes.h>
#include <omp.h>
#include <stdio.h>

/* Below this many elements a kernel runs on one thread: starting a team costs
 * more than the memory-bound work. Chunks are large enough to amortise the
 * call and small enough to balance across threads. */
#define EW_PARALLEL_MIN ((int64_t)1 << 16)
#define EW_CHUNK ((int64_t)1 << 14)

static int team_size(const ld_kernel_ctx *ctx, int64_t work)
{
    if (ctx->threads <= 1 || work < EW_PARALLEL_MIN)
        return 1;
    int64_t max_useful = work / (EW_PARALLEL_MIN / 2);
    return max_useful < ctx->threads ? (int)max_useful : ctx->threads;
}

void ld_ew_map(const ld_kernel_ctx *ctx, const ld_tensor *in, ld_tensor *out, ld_ew_map_fn fn,
               const void *params)
{
    if (!out || out->count == 0) /* omitted output, or nothing to do */
        return;
    int64_t n = out->count;
    size_t in_size = ld_dtype_size(in->dtype), out_size = ld_dtype_size(out->dtype);
    const char *src = in->data;
    char *dst = out->data;
    int threads = team_size(ctx, n);
    if (threads <= 1) {
        fn(dst, src, n, params);
        return;
    }
    int64_t chunks = (n + EW_CHUNK - 1) / EW_CHUNK;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t start = c * EW_CHUNK;
        int64_t len = n - start < EW_CHUNK ? n - start : EW_CHUNK;
        fn(dst + (size_t)start * out_size, src + (size_t)start * in_size, len, params);
    }
}

typedef struct broadcast_job {
    ld_ew_row_fn fn;
    const void *params;
    int n;
    const char *base[LD_BROADCAST_MAX_INPUTS];
    size_t size[LD_BROADCAST_MAX_INPUTS];
    char *out;
    size_t out_size;
} broadcast_job;

/* Runs elements [start, start+len) of the iterator's current row. */
static void run_row(const broadcast_job *job, const ld_broadcast_iter *it, int64_t start,
                    int64_t len)
{
    const void *ptrs[LD_BROADCAST_MAX_INPUTS];
    for (int i = 0; i < job->n; i++)
        ptrs[i] = job->base[i] +
                  (size_t)(it->offset[i] + start * it->row_stride[i]) * job->size[i];
    job->fn(job->out + (size_t)(it->out_offset + start) * job->out_size, ptrs, it->row_stride,
            len, job->params);
}

/* Rows [first, last) of a fresh iterator; each thread walks its own copy up
 * to its block (cheap next to the rows' work, which is >= 16 elements each). */
static void run_rows(const broadcast_job *job, const ld_broadcast_iter *fresh, int64_t first,
                     int64_t last)
{
    ld_broadcast_iter it = *fresh;
    for (int64_t r = 0; r < last && ld_broadcast_iter_next(&it); r++)
        if (r >= first)
            run_row(job, &it, 0, it.row_length);
}

void ld_ew_broadcast(const ld_kernel_ctx *ctx, ld_tensor *out, const ld_tensor *const *ins, int n,
                     ld_ew_row_fn fn, const void *params)
{
    if (!out || out->count == 0)
        return;
    broadcast_job job = {.fn = fn, .params = params, .n = n, .out = out->data,
                         .out_size = ld_dtype_size(out->dtype)};
    const ld_shape *shapes[LD_BROADCAST_MAX_INPUTS];
    for (int i = 0; i < n; i++) {
        shapes[i] = &ins[i]->shape;
        job.base[i] = ins[i]->data;
        job.size[i] = ld_dtype_size(ins[i]->dtype);
    }
    ld_broadcast_iter it;
    ld_broadcast_iter_init(&it, &out->shape, shapes, n);
    int64_t rows = it.rows_left, len = it.row_length;
    int threads = team_size(ctx, out->count);
    if (rows == 1) {
        /* One long row (same shapes, or scalars against a tensor): split it. */
        ld_broadcast_iter_next(&it);
        int64_t chunks = threads > 1 ? (len + EW_CHUNK - 1) / EW_CHUNK : 1;
        int64_t chunk = threads > 1 ? EW_CHUNK : len;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t start = c * chunk;
            run_row(&job, &it, start, len - start < chunk ? len - start : chunk);
        }
        return;
    }
    if (threads <= 1 || len < 16) {
        while (ld_broadcast_iter_next(&it))
            run_row(&job, &it, 0, it.row_length);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        run_rows(&job, &it, rows * t / nt, rows * (t + 1) / nt);
    }
}

ld_status ld_ew_broadcast_shape(ld_kernel_ctx *ctx, const ld_tensor *const *ins, int n,
                                ld_shape *out)
{
    ld_error local;
    *out = ins[0]->shape;
    for (int i = 1; i < n; i++) {
        ld_shape folded;
        ld_status st = ld_broadcast_shape(out, &ins[i]->shape, &folded, NULL, &local);
        if (st != LD_OK)
            return ld_kernel_fail(ctx, st, "input %d: %s", i, local.message);
        *out = folded;
    }
    return LD_OK;
}

ld_status ld_ew_same_dtype(ld_kernel_ctx *ctx, int first, int n)
{
    for (int i = first; i < first + n; i++) {
        ld_status st = ld_krequire(ctx, i);
        if (st != LD_OK)
            return st;
        if (ctx->inputs[i]->dtype != ctx->inputs[first]->dtype)
            return ld_kernel_fail(ctx, LD_ERR_INPUT,
                                  "inputs must share one dtype: input %d is %s, input %d is %s",
                                  first, ld_dtype_name(ctx->inputs[first]->dtype), i,
                                  ld_dtype_name(ctx->inputs[i]->dtype));
    }
    return LD_OK;
}

ld_status ld_ew_unsupported_dtype(ld_kernel_ctx *ctx, ld_dtype dtype)
{
    return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                          ld_dtype_name(dtype));
}

ld_status ld_ew_pick_map(ld_kernel_ctx *ctx, const ld_ew_map_fn *table, ld_dtype dtype,
                         ld_ew_map_fn *out)
{
    *out = (unsigned)dtype < LD_DTYPE_COUNT_ ? table[dtype] : NULL;
    return *out ? LD_OK : ld_ew_unsupported_dtype(ctx, dtype);
}

ld_status ld_ew_pick_row(ld_kernel_ctx *ctx, const ld_ew_row_fn *table, ld_dtype dtype,
                         ld_ew_row_fn *out)
{
    *out = (unsigned)dtype < LD_DTYPE_COUNT_ ? table[dtype] : NULL;
    return *out ? LD_OK : ld_ew_unsupported_dtype(ctx, dtype);
}

ld_status ld_ew_attr_float(ld_kernel_ctx *ctx, const char *name, float fallback, float *out)
{
    return ld_node_attr_float(ctx->node, name, fallback, out, ctx->err);
}

ld_status ld_ew_attr_int(ld_kernel_ctx *ctx, const char *name, int64_t fallback, int64_t *out)
{
    return ld_node_attr_int(ctx->node, name, fallback, out, ctx->err);
}

ld_status ld_ew_legacy_view(ld_kernel_ctx *ctx, const ld_tensor *a, const ld_tensor *b,
                            ld_tensor *b_view)
{
    *b_view = *b;
    if (ctx->node->opset >= 7)
        return LD_OK;
    int64_t broadcast, axis;
    ld_status st = ld_ew_attr_int(ctx, "broadcast", 0, &broadcast);
    if (st == LD_OK)
        st = ld_ew_attr_int(ctx, "axis", a->shape.rank - b->shape.rank, &axis);
    if (st != LD_OK)
        return st;
    char sa[128], sb[128];
    ld_shape_format(&a->shape, sa, sizeof sa);
    ld_shape_format(&b->shape, sb, sizeof sb);
    if (!broadcast) {
        if (!ld_shape_equal(&a->shape, &b->shape))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "shapes %s and %s differ and the node does "
                                  "not set broadcast=1 (opset %" PRId64 " rules)",
                                  sa, sb, ctx->node->opset);
        return LD_OK;
    }
    int rank = a->shape.rank;
    if (axis < 0)
        axis += rank;
    if (b->shape.rank > rank || axis < 0 || axis + b->shape.rank > rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "cannot broadcast B %s onto A %s at axis %" PRId64
                              " (opset %" PRId64 " rules)", sb, sa, axis, ctx->node->opset);
    b_view->shape.rank = rank;
    for (int d = 0; d < rank; d++) {
        int64_t dim = d >= axis && d < axis + b->shape.rank ? b->shape.dims[d - axis] : 1;
        if (dim != 1 && dim != a->shape.dims[d])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "cannot broadcast B %s onto A %s at axis "
                                  "%" PRId64 ": dimension %d is %" PRId64 " vs %" PRId64,
                                  sb, sa, axis, d, dim, a->shape.dims[d]);
        b_view->shape.dims[d] = dim;
    }
    return LD_OK;
}

ld_status ld_ew_params_alloc(ld_kernel_ctx *ctx, ld_ew_params **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = *out;
    return LD_OK;
}

void ld_ew_params_fini(void *state)
{
    free(state);
}

ld_status ld_ew_unary_infer(ld_kernel_ctx *ctx, ld_output_desc *outs, const ld_ew_map_fn *table,
                            ld_dtype out_dtype)
{
    ld_ew_map_fn fn;
    ld_status st = ld_infer_like_input0(ctx, outs);
    if (st == LD_OK)
        st = ld_ew_pick_map(ctx, table, ctx->inputs[0]->dtype, &fn);
    if (st == LD_OK && out_dtype != LD_DTYPE_UNDEFINED)
        outs[0].dtype = out_dtype;
    return st;
}

ld_status ld_ew_unary_compute(ld_kernel_ctx *ctx, const ld_ew_map_fn *table)
{
    ld_ew_map_fn fn;
    ld_status st = ld_ew_pick_map(ctx, table, ctx->inputs[0]->dtype, &fn);
    if (st == LD_OK && ctx->outputs[0])
        ld_ew_map(ctx, ctx->inputs[0], ctx->outputs[0], fn, ctx->state);
    return st;
}

ld_status ld_ew_binary_infer(ld_kernel_ctx *ctx, ld_output_desc *outs, const ld_ew_row_fn *table,
                             ld_dtype out_dtype)
{
    ld_ew_row_fn fn;
    ld_tensor b_view;
    ld_status st = ld_ew_same_dtype(ctx, 0, 2);
    if (st == LD_OK)
        st = ld_ew_pick_row(ctx, table, ctx->inputs[0]->dtype, &fn);
    if (st == LD_OK)
        st = ld_ew_legacy_view(ctx, ctx->inputs[0], ctx->inputs[1], &b_view);
    if (st != LD_OK)
        return st;
    const ld_tensor *ins[2] = {ctx->inputs[0], &b_view};
    outs[0].dtype = out_dtype != LD_DTYPE_UNDEFINED ? out_dtype : ctx->inputs[0]->dtype;
    return ld_ew_broadcast_shape(ctx, ins, 2, &outs[0].shape);
}

ld_status ld_ew_binary_compute(ld_kernel_ctx *ctx, const ld_ew_row_fn *table)
{
    ld_ew_row_fn fn;
    ld_tensor b_view;
    ld_status st = ld_ew_pick_row(ctx, table, ctx->inputs[0]->dtype, &fn);
    if (st == LD_OK)
        st = ld_ew_legacy_view(ctx, ctx->inputs[0], ctx->inputs[1], &b_view);
    if (st == LD_OK && ctx->outputs[0]) {
        const ld_tensor *ins[2] = {ctx->inputs[0], &b_view};
        ld_ew_broadcast(ctx, ctx->outputs[0], ins, 2, fn, ctx->state);
    }
    return st;
}
