/* layerdiff — reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
 * ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp and
 * ReduceSumSquare (opsets 1, 11, 12, 13; axes as an attribute, or as an input
 * for ReduceSum 13+ and every reduction at 18+).
 *
 * Numerics. This backend is the ground truth the fp16 error analysis
 * measures against, so reductions are as accurate as is cheap:
 * - float32 (and float16/bfloat16, widened by the executor): every
 *   accumulation runs in double (squares, absolute values, products and the
 *   exp of LogSumExp too) and the result is rounded to float32 once. With
 *   24-bit inputs a double sum stays exact to far below float32 resolution
 *   for any realistic length, so this is "the exact result, rounded".
 * - float64: sums (Sum, Mean, SumSquare, L1, L2, LogSum, LogSumExp) use
 *   Neumaier compensated summation; Prod, Max and Min are plain double.
 * - LogSumExp subtracts the per-output maximum before exp (no overflow for
 *   large inputs; exact for an infinite maximum).
 * - integers (int32/int64/uint32/uint64, and int8/uint8 for Max/Min):
 *   Sum/SumSquare/L1/Prod wrap modulo 2^64 then truncate to the type (the
 *   same bits as wrapping in the type); Mean is the integer sum divided by
 *   the count, truncated toward zero; L2, LogSum and LogSumExp are computed
 *   in double and converted with saturation (NaN -> 0).
 * - empty reductions give the identity: 0 for the sums, 1 for Prod, -inf
 *   (the type's minimum for integers) for Max, +inf (maximum) for Min,
 *   -inf for LogSum/LogSumExp, NaN for a float Mean (0/0), 0 for an
 *   integer Mean.
 * - float32 in a layer of reduced precision (the emulated engine's tf32,
 *   fp16, bf16 layers; ld_accum_make): a float accumulator per output, one
 *   term at a time in increasing input position (backends/accumulate.h:
 *   fp32 accumulation, or every partial sum rounded with accumulate-half),
 *   terms and post-processing (mean, sqrt, log, exp) in float.
 * Every output element accumulates its inputs in the same order whatever the
 * path or thread count, so results are deterministic.
 *
 * The accumulator classes (one per input type) are in reduce_classes.c;
 * this file has the engine that drives them, the integer conversions and
 * the kernels. */
#include <math.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"
#include "backends/kernels/reduce_internal.h"
#include "backends/kernels/reduce_util.h"

static const red_kind red_kinds[] = {
    {"ReduceL1", OP_L1, POST_NONE},        {"ReduceL2", OP_SUMSQ, POST_SQRT},
    {"ReduceLogSum", OP_SUM, POST_LOG},    {"ReduceLogSumExp", OP_EXPSUM, POST_LSE},
    {"ReduceMax", OP_MAX, POST_NONE},      {"ReduceMean", OP_SUM, POST_MEAN},
    {"ReduceMin", OP_MIN, POST_NONE},      {"ReduceProd", OP_PROD, POST_NONE},
    {"ReduceSum", OP_SUM, POST_NONE},      {"ReduceSumSquare", OP_SUMSQ, POST_NONE},
};

/* --- the engine -------------------------------------------------------------------- */

#define TILE 1024
#define PARALLEL_WORK ((int64_t)1 << 15)

/* [kept O, reduced R]: one contiguous run per output. */
static void run_inner(const red_class *k, const red_job *j, int64_t O, int64_t R, int threads)
{
    int nt = (O > 1 && O * R >= PARALLEL_WORK) ? threads : 1;
    int64_t grouped = 0;
    if (k == &ld_red_f32r_class && ld_red_f32r_rows_apply(j)) {
        int64_t groups = O / F32R_ROWS;
#pragma omp parallel for num_threads(groups > 1 ? nt : 1) schedule(static)
        for (int64_t g = 0; g < groups; g++)
            ld_red_f32r_rows(j, g * F32R_ROWS, R);
        grouped = groups * F32R_ROWS;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t o = grouped; o < O; o++) {
        red_acc acc;
        double c = 0;
        k->init(j, &acc, &c, 1);
        k->inner(j, &acc, &c, o * R, R, o);
        k->finish(j, &acc, &c, 1, o);
    }
}

/* [kept O, reduced R, kept I]: rows of I accumulate into tiles of outputs. */
static void run_middle(const red_class *k, const red_job *j, int64_t O, int64_t R, int64_t I,
                       int threads)
{
    int64_t tiles = (I + TILE - 1) / TILE;
    int nt = (O * tiles > 1 && O * R * I >= PARALLEL_WORK) ? threads : 1;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t task = 0; task < O * tiles; task++) {
        red_acc acc[TILE];
        double c[TILE];
        int64_t o = task / tiles, col = (task % tiles) * TILE;
        int64_t w = I - col < TILE ? I - col : TILE;
        k->init(j, acc, c, w);
        for (int64_t r = 0; r < R; r++)
            k->outer(j, acc, c, (o * R + r) * I + col, w, o * I + col);
        k->finish(j, acc, c, w, o * I + col);
    }
}

/* Any other layout: one pass in memory order over full-size accumulators. */
static ld_status run_general(ld_kernel_ctx *ctx, const red_class *k, const red_job *j,
                             const ld_reduce_plan *p)
{
    int64_t n = p->out_count;
    red_acc *acc = malloc((size_t)n * sizeof *acc);
    double *c = calloc((size_t)n, sizeof *c);
    if (!acc || !c) {
        free(acc);
        free(c);
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    }
    k->init(j, acc, c, n);
    ld_reduce_rows it;
    ld_reduce_rows_init(&it, p);
    while (ld_reduce_rows_next(&it)) {
        if (it.row_reduced)
            k->inner(j, acc + it.out_off, c + it.out_off, it.in_off, it.row_len, it.out_off);
        else
            k->outer(j, acc + it.out_off, c + it.out_off, it.in_off, it.row_len, it.out_off);
    }
    k->finish(j, acc, c, n, 0);
    free(acc);
    free(c);
    return LD_OK;
}

static ld_status run_pass(ld_kernel_ctx *ctx, const red_class *k, const red_job *j,
                          const ld_reduce_plan *p)
{
    const int64_t *s = p->size;
    const bool *r = p->reduced;
    if (p->out_count == 0)
        return LD_OK;
    if (p->in_count == 0)
        return run_general(ctx, k, j, p);
    if (p->nblk == 1 && r[0])
        run_inner(k, j, 1, s[0], ctx->threads);
    else if (p->nblk == 2 && !r[0] && r[1])
        run_inner(k, j, s[0], s[1], ctx->threads);
    else if (p->nblk == 1)
        run_middle(k, j, 1, 1, s[0], ctx->threads);
    else if (p->nblk == 2)
        run_middle(k, j, 1, s[0], s[1], ctx->threads);
    else if (p->nblk == 3 && !r[0])
        run_middle(k, j, s[0], s[1], s[2], ctx->threads);
    else
        return run_general(ctx, k, j, p);
    return LD_OK;
}

/* LogSumExp runs twice: the maximum into y, then the shifted exp sums. */
static ld_status run_reduction(ld_kernel_ctx *ctx, const red_class *k, red_job j,
                               const ld_reduce_plan *p)
{
    if (j.op != OP_EXPSUM)
        return run_pass(ctx, k, &j, p);
    red_job max_job = j;
    max_job.op = OP_MAX;
    max_job.post = POST_NONE;
    ld_status st = run_pass(ctx, k, &max_job, p);
    return st != LD_OK ? st : run_pass(ctx, k, &j, p);
}

/* --- integer inputs and outputs ------------------------------------------------------ */

static bool int_dtype_unsigned(ld_dtype d)
{
    return d == LD_DTYPE_UINT8 || d == LD_DTYPE_UINT32 || d == LD_DTYPE_UINT64;
}

/* Integer tensor -> int64 values (uint64 as bits), or -> double. */
static void load_ints(const ld_tensor *t, int64_t *out, double *out_d)
{
    const void *p = t->data;
    for (int64_t i = 0; i < t->count; i++) {
        int64_t v = 0;
        switch (t->dtype) {
        case LD_DTYPE_INT8: v = ((const int8_t *)p)[i]; break;
        case LD_DTYPE_UINT8: v = ((const uint8_t *)p)[i]; break;
        case LD_DTYPE_INT32: v = ((const int32_t *)p)[i]; break;
        case LD_DTYPE_UINT32: v = ((const uint32_t *)p)[i]; break;
        case LD_DTYPE_INT64: v = ((const int64_t *)p)[i]; break;
        case LD_DTYPE_UINT64: v = (int64_t)((const uint64_t *)p)[i]; break;
        default: break;
        }
        if (out)
            out[i] = v;
        else
            out_d[i] = t->dtype == LD_DTYPE_UINT64 ? (double)(uint64_t)v : (double)v;
    }
}

/* Integer range of a dtype as doubles / as int64 (uint64: see callers). */
static void int_range(ld_dtype d, int64_t *lo, int64_t *hi)
{
    switch (d) {
    case LD_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case LD_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; break;
    case LD_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    case LD_DTYPE_UINT32: *lo = 0; *hi = UINT32_MAX; break;
    default: *lo = INT64_MIN; *hi = INT64_MAX; break;
    }
}

static void store_int(ld_dtype d, void *out, int64_t i, uint64_t bits)
{
    switch (d) {
    case LD_DTYPE_INT8: ((int8_t *)out)[i] = (int8_t)bits; break;
    case LD_DTYPE_UINT8: ((uint8_t *)out)[i] = (uint8_t)bits; break;
    case LD_DTYPE_INT32: ((int32_t *)out)[i] = (int32_t)bits; break;
    case LD_DTYPE_UINT32: ((uint32_t *)out)[i] = (uint32_t)bits; break;
    case LD_DTYPE_INT64: ((int64_t *)out)[i] = (int64_t)bits; break;
    case LD_DTYPE_UINT64: ((uint64_t *)out)[i] = bits; break;
    default: break;
    }
}

/* Wrapping (truncating) or, for Max/Min whose only out-of-range results are
 * the identities of empty reductions, saturating stores. */
static void store_int_results(ld_dtype d, void *out, const uint64_t *v, int64_t n,
                              bool saturate)
{
    int64_t lo, hi;
    int_range(d, &lo, &hi);
    bool is_unsigned = int_dtype_unsigned(d);
    for (int64_t i = 0; i < n; i++) {
        uint64_t b = v[i];
        if (saturate && d != LD_DTYPE_UINT64 && d != LD_DTYPE_INT64) {
            if (is_unsigned)
                b = b > (uint64_t)hi ? (uint64_t)hi : b;
            else
                b = (int64_t)b < lo ? (uint64_t)lo : (int64_t)b > hi ? (uint64_t)hi : b;
        }
        store_int(d, out, i, b);
    }
}

/* double -> integer type, truncating toward zero and saturating; NaN -> 0. */
static void store_double_results(ld_dtype d, void *out, const double *v, int64_t n)
{
    int64_t lo, hi;
    int_range(d, &lo, &hi);
    for (int64_t i = 0; i < n; i++) {
        double x = v[i] != v[i] ? 0.0 : v[i];
        uint64_t b;
        if (d == LD_DTYPE_UINT64)
            b = x <= 0 ? 0 : x >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)x;
        else if (x <= (double)lo)
            b = (uint64_t)lo;
        else if (x >= (double)hi) /* (double)INT64_MAX rounds up to 2^63 */
            b = (uint64_t)hi;
        else
            b = (uint64_t)(int64_t)x;
        store_int(d, out, i, b);
    }
}

/* --- attributes, shapes ---------------------------------------------------------------- */

typedef struct red_state {
    red_kind kind;
    bool keepdims;
    bool axes_from_input;  /* ReduceSum 13+, every reduction 18+ */
    bool noop_with_empty_axes;
    const int64_t *axes;   /* attribute (borrowed from the node) */
    size_t n_axes;
} red_state;

static ld_status red_init(ld_kernel_ctx *ctx)
{
    const ld_node *node = ctx->node;
    red_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    for (size_t i = 0; i < sizeof red_kinds / sizeof red_kinds[0]; i++)
        if (strcmp(red_kinds[i].op_type, node->op_type) == 0)
            s->kind = red_kinds[i];
    int64_t keepdims = 1, noop = 0;
    ld_status st = ld_node_attr_int(node, "keepdims", 1, &keepdims, ctx->err);
    if (st != LD_OK)
        return st;
    s->keepdims = keepdims != 0;
    s->axes_from_input = node->opset >= 18 ||
                         (node->opset >= 13 && strcmp(node->op_type, "ReduceSum") == 0);
    if (s->axes_from_input) {
        st = ld_node_attr_int(node, "noop_with_empty_axes", 0, &noop, ctx->err);
        s->noop_with_empty_axes = noop != 0;
    } else {
        st = ld_node_attr_ints(node, "axes", &s->axes, &s->n_axes, ctx->err);
    }
    return st;
}

/* Which axes of x are reduced; *noop when none is (empty axes with
 * noop_with_empty_axes). */
static ld_status red_axes(ld_kernel_ctx *ctx, const ld_tensor *x, bool *reduced, bool *noop)
{
    const red_state *s = ctx->state;
    const int64_t *axes = s->axes;
    int64_t n = (int64_t)s->n_axes;
    const ld_tensor *t = s->axes_from_input ? ld_kin(ctx, 1) : NULL;
    if (t) {
        if (t->dtype != LD_DTYPE_INT64 || t->shape.rank > 1)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "input 'axes' must be a 1-D int64 tensor "
                                  "(got %s of rank %d)", ld_dtype_name(t->dtype), t->shape.rank);
        ld_status st = ld_krequire_values(ctx, t, "axes");
        if (st != LD_OK)
            return st;
        axes = t->data;
        n = t->count;
    }
    int rank = x->shape.rank;
    *noop = n == 0 && s->noop_with_empty_axes;
    for (int d = 0; d < rank; d++)
        reduced[d] = n == 0 && !*noop;
    for (int64_t i = 0; i < n; i++) {
        int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (a < 0 || a >= (rank ? rank : 1))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "axis %lld is out of range for rank %d",
                                  (long long)axes[i], rank);
        if (rank == 0)
            continue;
        if (reduced[a])
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "axis %lld is given twice",
                                  (long long)axes[i]);
        reduced[a] = true;
    }
    return LD_OK;
}

static bool red_dtype_ok(red_op op, ld_dtype d)
{
    switch (d) {
    case LD_DTYPE_FLOAT32: case LD_DTYPE_FLOAT64:
    case LD_DTYPE_INT32: case LD_DTYPE_INT64: case LD_DTYPE_UINT32: case LD_DTYPE_UINT64:
        return true;
    case LD_DTYPE_INT8: case LD_DTYPE_UINT8:
        return op == OP_MAX || op == OP_MIN;
    default:
        return false;
    }
}

static ld_status red_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const red_state *s = ctx->state;
    ld_status st = ld_krequire(ctx, 0);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    if (!red_dtype_ok(s->kind.op, x->dtype))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    bool reduced[LD_MAX_RANK], noop;
    st = red_axes(ctx, x, reduced, &noop);
    if (st != LD_OK)
        return st;
    outs[0].dtype = x->dtype;
    outs[0].shape.rank = 0;
    for (int d = 0; d < x->shape.rank; d++) {
        if (!reduced[d])
            outs[0].shape.dims[outs[0].shape.rank++] = x->shape.dims[d];
        else if (s->keepdims)
            outs[0].shape.dims[outs[0].shape.rank++] = 1;
    }
    return LD_OK;
}

/* Integer reductions: int64 copy of the input (double for LogSumExp), then
 * a typed store. */
static ld_status red_compute_int(ld_kernel_ctx *ctx, red_job j, const ld_reduce_plan *p)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    bool via_double = j.op == OP_EXPSUM;
    bool double_out = via_double || j.post == POST_SQRT || j.post == POST_LOG;
    void *in = malloc((size_t)(x->count ? x->count : 1) * 8);
    void *out = malloc((size_t)(y->count ? y->count : 1) * 8);
    ld_status st = LD_OK;
    if (!in || !out) {
        st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    load_ints(x, via_double ? NULL : in, via_double ? in : NULL);
    j.x = in;
    j.y = out;
    j.is_unsigned = int_dtype_unsigned(x->dtype);
    st = run_reduction(ctx, via_double ? &ld_red_f64_class : &ld_red_int_class, j, p);
    if (st != LD_OK)
        goto out;
    if (double_out)
        store_double_results(y->dtype, y->data, out, y->count);
    else
        store_int_results(y->dtype, y->data, out, y->count, j.op == OP_MAX || j.op == OP_MIN);
out:
    free(in);
    free(out);
    return st;
}

static ld_status red_compute(ld_kernel_ctx *ctx)
{
    const red_state *s = ctx->state;
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    bool reduced[LD_MAX_RANK], noop;
    ld_status st = red_axes(ctx, x, reduced, &noop);
    if (st != LD_OK)
        return st;
    if (noop) {
        if (x->nbytes)
            memcpy(y->data, x->data, x->nbytes);
        return LD_OK;
    }
    ld_reduce_plan p;
    ld_reduce_plan_init(&p, &x->shape, reduced);
    ld_accum accum = ld_accum_make(ctx->numerics, ctx->counters);
    red_job j = {.op = s->kind.op, .post = s->kind.post, .x = x->data, .y = y->data,
                 .group = p.group, .accum = &accum};
    if (x->dtype == LD_DTYPE_FLOAT32)
        return run_reduction(ctx, accum.reduced ? &ld_red_f32r_class : &ld_red_f32_class, j, &p);
    if (x->dtype == LD_DTYPE_FLOAT64)
        return run_reduction(ctx, &ld_red_f64_class, j, &p);
    return red_compute_int(ctx, j, &p);
}

static void red_fini(void *state)
{
    free(state);
}

#define RED_ROW(name, since) \
    {"", name, since, LD_KERNEL_WIDEN_HALF, red_init, red_infer, red_compute, red_fini, NULL}

static const ld_kernel reduce_kernels[] = {
    RED_ROW("ReduceL1", 1),        RED_ROW("ReduceL1", 18),
    RED_ROW("ReduceL2", 1),        RED_ROW("ReduceL2", 18),
    RED_ROW("ReduceLogSum", 1),    RED_ROW("ReduceLogSum", 18),
    RED_ROW("ReduceLogSumExp", 1), RED_ROW("ReduceLogSumExp", 18),
    RED_ROW("ReduceMax", 1),       RED_ROW("ReduceMax", 18),
    RED_ROW("ReduceMean", 1),      RED_ROW("ReduceMean", 18),
    RED_ROW("ReduceMin", 1),       RED_ROW("ReduceMin", 18),
    RED_ROW("ReduceProd", 1),      RED_ROW("ReduceProd", 18),
    RED_ROW("ReduceSum", 1),       RED_ROW("ReduceSum", 13),
    RED_ROW("ReduceSumSquare", 1), RED_ROW("ReduceSumSquare", 18),
};

LD_KERNEL_FAMILY(reduce);
