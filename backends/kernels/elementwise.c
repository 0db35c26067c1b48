/* layerdiff — drivers shared by the elementwise kernel families (see
 * elementwise.h). */
#include "backends/kernels/elementwise.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "backends/kernels/conv_pool.h"
#include "backends/kernels/elementwise_round.h"

/* Below this many elements a kernel runs on one thread: starting a team costs
 * more than the memory-bound work. Chunks are large enough to amortise the
 * call and small enough to balance across threads. */
#define EW_PARALLEL_MIN LD_PARALLEL_MIN_WORK
#define EW_CHUNK ((int64_t)1 << 14)
/* Output rounding (round_block) follows the kernel this many elements at a
 * time: 8 KB, in L1 when it is rounded. */
#define EW_ROUND_BLOCK ((int64_t)1 << 11)

static int team_size(const ld_kernel_ctx *ctx, int64_t work)
{
    if (ctx->threads <= 1 || work < EW_PARALLEL_MIN)
        return 1;
    int64_t max_useful = work / (EW_PARALLEL_MIN / 2);
    return max_useful < ctx->threads ? (int)max_useful : ctx->threads;
}

/* Output rounding fused into the drivers (kernel.h, round_block): a driver
 * call that writes the final values of float32 output 0 hands each block to
 * the backend right after writing it, while it is in cache. The hook is
 * called once per element, from the thread that wrote it. */
static bool rounds_output(const ld_kernel_ctx *ctx, const ld_tensor *out)
{
    return ctx->round_block && ctx->n_outputs > 0 && ctx->outputs[0] == out &&
           out->dtype == LD_DTYPE_FLOAT32;
}

static void round_out(const ld_kernel_ctx *ctx, char *block, int64_t n)
{
    ctx->round_block(ctx->round_user, 0, (float *)block, n);
}

/* fn over [0, len), rounded (when asked) in blocks of EW_ROUND_BLOCK, each
 * right after fn wrote it: the values are still in L1. */
static void map_block(const ld_kernel_ctx *ctx, ld_ew_map_fn fn, char *dst, size_t out_size,
                      const char *src, size_t in_size, int64_t len, const void *params,
                      bool round)
{
    if (!round) {
        fn(dst, src, len, params);
        return;
    }
    for (int64_t at = 0; at < len; at += EW_ROUND_BLOCK) {
        int64_t k = len - at < EW_ROUND_BLOCK ? len - at : EW_ROUND_BLOCK;
        fn(dst + (size_t)at * out_size, src + (size_t)at * in_size, k, params);
        round_out(ctx, dst + (size_t)at * out_size, k);
    }
}

typedef struct map_job {
    const ld_kernel_ctx *ctx;
    ld_ew_map_fn fn;
    const void *params;
    const char *src;
    char *dst;
    size_t in_size, out_size;
    int64_t n;
    bool round;
} map_job;

/* Chunks [c0, c1) of EW_CHUNK elements (a claim of ld_conv_pool_run). */
static void map_chunks(void *arg, int worker, int64_t c0, int64_t c1)
{
    (void)worker;
    const map_job *j = arg;
    int64_t start = c0 * EW_CHUNK, end = c1 * EW_CHUNK < j->n ? c1 * EW_CHUNK : j->n;
    map_block(j->ctx, j->fn, j->dst + (size_t)start * j->out_size, j->out_size,
              j->src + (size_t)start * j->in_size, j->in_size, end - start, j->params,
              j->round);
}

/* Parallel drivers run on the convolutions' claim pool, as the fused chains
 * (exec_fuse.c): one helper thread for the whole run instead of waking
 * OpenMP's (25-180 us after an idle gap on a shared VM) in turn with it. */
static void map_run(const ld_kernel_ctx *ctx, const ld_tensor *in, ld_tensor *out,
                    ld_ew_map_fn fn, const void *params, bool round)
{
    if (!out || out->count == 0) /* omitted output, or nothing to do */
        return;
    int64_t n = out->count;
    size_t in_size = ld_dtype_size(in->dtype), out_size = ld_dtype_size(out->dtype);
    const char *src = in->data;
    char *dst = out->data;
    int threads = team_size(ctx, n);
    if (threads <= 1) {
        map_block(ctx, fn, dst, out_size, src, in_size, n, params, round);
        return;
    }
    map_job job = {.ctx = ctx, .fn = fn, .params = params, .src = src, .dst = dst,
                   .in_size = in_size, .out_size = out_size, .n = n, .round = round};
    int64_t chunks = (n + EW_CHUNK - 1) / EW_CHUNK;
    ld_conv_pool_run(threads, chunks, ld_conv_pool_claim(chunks, threads), map_chunks, &job);
}

void ld_ew_map(const ld_kernel_ctx *ctx, const ld_tensor *in, ld_tensor *out, ld_ew_map_fn fn,
               const void *params)
{
    map_run(ctx, in, out, fn, params, false);
}

void ld_ew_map_output(ld_kernel_ctx *ctx, const ld_tensor *in, ld_ew_map_fn fn,
                      const void *params)
{
    ld_tensor *out = ctx->outputs[0];
    bool round = out && rounds_output(ctx, out);
    map_run(ctx, in, out, fn, params, round);
    if (round)
        ctx->rounded_outputs |= 1u;
}

typedef struct broadcast_job {
    ld_ew_row_fn fn;
    const void *params;
    int n;
    const char *base[LD_BROADCAST_MAX_INPUTS];
    size_t size[LD_BROADCAST_MAX_INPUTS];
    char *out;
    size_t out_size;
    const ld_kernel_ctx *ctx;
    bool round; /* output rounding fused (rounds_output) */
    /* float16 rounding in the arithmetic loop (elementwise_round.h): the op
     * and the loop's level, NONE when not */
    ld_ew_arith arith;
    int arith_level;
    /* the parallel claims' fresh iterator (on its first row when the output
       is one row) and that row's chunk */
    const ld_broadcast_iter *it;
    int64_t chunk;
} broadcast_job;

/* Written rows not yet rounded: one contiguous range of the output, so that
 * short rows reach the hook in blocks of about EW_ROUND_BLOCK elements. */
typedef struct unrounded {
    char *start;
    int64_t n;
} unrounded;

static void round_pending(const broadcast_job *job, unrounded *u)
{
    if (u->n)
        round_out(job->ctx, u->start, u->n);
    u->n = 0;
}

/* Runs elements [start, start+len) of the iterator's current row. */
static void run_segment(const broadcast_job *job, const ld_broadcast_iter *it, int64_t start,
                        int64_t len, unrounded *u)
{
    const void *ptrs[LD_BROADCAST_MAX_INPUTS];
    for (int i = 0; i < job->n; i++)
        ptrs[i] = job->base[i] +
                  (size_t)(it->offset[i] + start * it->row_stride[i]) * job->size[i];
    char *out = job->out + (size_t)(it->out_offset + start) * job->out_size;
    if (job->arith != LD_EW_ARITH_NONE) {
        /* rounded in the loop, the rest handed to the hook there */
        ld_ew_arith_fp16(job->ctx, job->arith_level, job->arith, (float *)(void *)out, ptrs[0],
                         ptrs[1], it->row_stride[0] != 0, it->row_stride[1] != 0, len, job->fn,
                         job->params);
        return;
    }
    job->fn(out, ptrs, it->row_stride, len, job->params);
    if (!job->round)
        return;
    if (u->n && u->start + (size_t)u->n * job->out_size != out)
        round_pending(job, u);
    if (!u->n)
        u->start = out;
    u->n += len;
    if (u->n >= EW_ROUND_BLOCK)
        round_pending(job, u);
}

/* The same, in blocks of EW_ROUND_BLOCK when rounding. */
static void run_row(const broadcast_job *job, const ld_broadcast_iter *it, int64_t start,
                    int64_t len, unrounded *u)
{
    if (!job->round) {
        run_segment(job, it, start, len, u);
        return;
    }
    for (int64_t at = 0; at < len; at += EW_ROUND_BLOCK)
        run_segment(job, it, start + at, len - at < EW_ROUND_BLOCK ? len - at : EW_ROUND_BLOCK,
                    u);
}

/* Rows [first, last) of a fresh iterator, sought to its first row. */
static void run_rows(const broadcast_job *job, const ld_broadcast_iter *fresh, int64_t first,
                     int64_t last)
{
    if (first >= last)
        return;
    ld_broadcast_iter it = *fresh;
    ld_broadcast_iter_seek(&it, first);
    unrounded u = {0};
    for (int64_t r = first; r < last; r++) {
        run_row(job, &it, 0, it.row_length, &u);
        if (r + 1 < last)
            ld_broadcast_iter_next(&it);
    }
    round_pending(job, &u);
}

/* Rows [r0, r1) (a claim of ld_conv_pool_run). */
static void rows_claim(void *arg, int worker, int64_t r0, int64_t r1)
{
    (void)worker;
    const broadcast_job *job = arg;
    run_rows(job, job->it, r0, r1);
}

/* Chunks [c0, c1) of the output's one row (a claim of ld_conv_pool_run). */
static void chunks_claim(void *arg, int worker, int64_t c0, int64_t c1)
{
    (void)worker;
    const broadcast_job *job = arg;
    int64_t len = job->it->row_length;
    for (int64_t c = c0; c < c1; c++) {
        int64_t start = c * job->chunk;
        unrounded u = {0};
        run_row(job, job->it, start, len - start < job->chunk ? len - start : job->chunk, &u);
        round_pending(job, &u);
    }
}

static void broadcast_run(const ld_kernel_ctx *ctx, ld_tensor *out, const ld_tensor *const *ins,
                          int n, ld_ew_row_fn fn, const void *params, bool round,
                          ld_ew_arith arith)
{
    if (!out || out->count == 0)
        return;
    broadcast_job job = {.fn = fn, .params = params, .n = n, .out = out->data,
                         .out_size = ld_dtype_size(out->dtype), .ctx = ctx, .round = round};
    if (round && arith != LD_EW_ARITH_NONE && ctx->round_fp16_inline && n == 2 &&
        ins[0]->dtype == LD_DTYPE_FLOAT32 && ins[1]->dtype == LD_DTYPE_FLOAT32 &&
        (!ctx->round_fp16_bits || out->count <= ctx->round_fp16_bits_count)) {
        job.arith_level = ld_ew_round_level();
        job.arith = job.arith_level != LD_EW_ROUND_NONE ? arith : LD_EW_ARITH_NONE;
    }
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
        /* One long row (same shapes, or scalars against a tensor): split it
         * (also on one thread when rounding, so each block is in cache). */
        ld_broadcast_iter_next(&it);
        job.it = &it;
        job.chunk = threads > 1 || round ? EW_CHUNK : len;
        int64_t chunks = (len + job.chunk - 1) / job.chunk;
        ld_conv_pool_run(threads, chunks, ld_conv_pool_claim(chunks, threads), chunks_claim, &job);
        return;
    }
    if (threads <= 1 || len < 16) {
        run_rows(&job, &it, 0, rows);
        return;
    }
    job.it = &it;
    ld_conv_pool_run(threads, rows, ld_conv_pool_claim(rows, threads), rows_claim, &job);
}

void ld_ew_broadcast(const ld_kernel_ctx *ctx, ld_tensor *out, const ld_tensor *const *ins, int n,
                     ld_ew_row_fn fn, const void *params)
{
    broadcast_run(ctx, out, ins, n, fn, params, false, LD_EW_ARITH_NONE);
}

static void broadcast_output(ld_kernel_ctx *ctx, const ld_tensor *const *ins, int n,
                             ld_ew_row_fn fn, const void *params, ld_ew_arith arith)
{
    ld_tensor *out = ctx->outputs[0];
    bool round = out && rounds_output(ctx, out);
    broadcast_run(ctx, out, ins, n, fn, params, round, arith);
    if (round)
        ctx->rounded_outputs |= 1u;
}

void ld_ew_broadcast_output(ld_kernel_ctx *ctx, const ld_tensor *const *ins, int n,
                            ld_ew_row_fn fn, const void *params)
{
    broadcast_output(ctx, ins, n, fn, params, LD_EW_ARITH_NONE);
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
        ld_ew_map_output(ctx, ctx->inputs[0], fn, ctx->state);
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

ld_status ld_ew_binary_compute_arith(ld_kernel_ctx *ctx, const ld_ew_row_fn *table,
                                     ld_ew_arith op)
{
    ld_ew_row_fn fn;
    ld_tensor b_view;
    ld_status st = ld_ew_pick_row(ctx, table, ctx->inputs[0]->dtype, &fn);
    if (st == LD_OK)
        st = ld_ew_legacy_view(ctx, ctx->inputs[0], ctx->inputs[1], &b_view);
    if (st == LD_OK && ctx->outputs[0]) {
        const ld_tensor *ins[2] = {ctx->inputs[0], &b_view};
        broadcast_output(ctx, ins, 2, fn, ctx->state, op);
    }
    return st;
}

ld_status ld_ew_binary_compute(ld_kernel_ctx *ctx, const ld_ew_row_fn *table)
{
    return ld_ew_binary_compute_arith(ctx, table, LD_EW_ARITH_NONE);
}
