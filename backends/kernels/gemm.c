/* layerdiff — matrix products: Gemm (opsets 1, 6, 7, 9, 11, 13), MatMul (1,
 * 9, 13), MatMulInteger (10) and QLinearMatMul (10).
 *
 * float32 and float64 go through the one GEMM entry (backends/blas.h);
 * float16/bfloat16 are widened by the executor (computed in fp32, rounded
 * once, as ONNX Runtime's CPU provider does). Integer Gemm/MatMul
 * (int32/int64/uint32/uint64) use a naive loop that wraps like the type's
 * arithmetic. MatMulInteger and QLinearMatMul subtract the zero points,
 * convert to double and use the double GEMM: the sums of 8-bit products are
 * integers far below 2^53, so they are exact.
 *
 * MatMul follows numpy: 1-D operands are promoted (A: [K] -> [1, K], B: [K]
 * -> [K, 1]) and the added dimension removed from the result; batch
 * dimensions broadcast. When B has no batch dimensions, A's batch is folded
 * into one GEMM with M * batch rows (x @ W in transformers). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/blas.h"
#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

static ld_status gemm_init(ld_kernel_ctx *ctx)
{
    ld_status st = ld_blas_init(ctx->err);
    if (st != LD_OK)
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    return LD_OK;
}

static bool is_blas_type(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT64;
}

static bool is_wide_int(ld_dtype d)
{
    return d == LD_DTYPE_INT32 || d == LD_DTYPE_INT64 || d == LD_DTYPE_UINT32 ||
           d == LD_DTYPE_UINT64;
}

/* Integer element i as uint64 bits (sign-extended): products and sums in
 * uint64 wrap, and their low bits are those of the type's own arithmetic. */
static uint64_t int_load(const void *data, ld_dtype d, int64_t i)
{
    switch (d) {
    case LD_DTYPE_INT32: return (uint64_t)(int64_t)((const int32_t *)data)[i];
    case LD_DTYPE_UINT32: return ((const uint32_t *)data)[i];
    case LD_DTYPE_INT64: return (uint64_t)((const int64_t *)data)[i];
    default: return ((const uint64_t *)data)[i];
    }
}

static void int_store(void *data, ld_dtype d, int64_t i, uint64_t v)
{
    switch (d) {
    case LD_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)(uint32_t)v; break;
    case LD_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)v; break;
    case LD_DTYPE_INT64: ((int64_t *)data)[i] = (int64_t)v; break;
    default: ((uint64_t *)data)[i] = v; break;
    }
}

static double int_as_double(uint64_t v, ld_dtype d)
{
    return d == LD_DTYPE_UINT64 || d == LD_DTYPE_UINT32 ? (double)v : (double)(int64_t)v;
}

/* C[M,N] (+)= op(A) op(B) with wrapping integer arithmetic. */
static void int_matmul(ld_dtype d, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       const void *A, int64_t a0, const void *B, int64_t b0, uint64_t *acc)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            uint64_t s = 0;
            for (int64_t k = 0; k < K; k++)
                s += int_load(A, d, a0 + (ta ? k * M + i : i * K + k)) *
                     int_load(B, d, b0 + (tb ? j * K + k : k * N + j));
            acc[i * N + j] = s;
        }
}

/* --- Gemm -------------------------------------------------------------------------- */

typedef struct gemm_args {
    bool ta, tb;
    float alpha, beta;
    int64_t M, N, K;
    const ld_tensor *a, *b, *c;
} gemm_args;

static ld_status gemm_prepare(ld_kernel_ctx *ctx, gemm_args *g)
{
    int64_t ta = 0, tb = 0;
    memset(g, 0, sizeof *g);
    ld_status st = ld_node_attr_int(ctx->node, "transA", 0, &ta, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "transB", 0, &tb, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "alpha", 1.0f, &g->alpha, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "beta", 1.0f, &g->beta, ctx->err);
    if (st != LD_OK)
        return st;
    g->ta = ta != 0;
    g->tb = tb != 0;
    g->a = ld_kin(ctx, 0);
    g->b = ld_kin(ctx, 1);
    g->c = ld_kin(ctx, 2);
    if (!g->a || !g->b)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs inputs A and B");
    if (ctx->node->opset < 11 && !g->c)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input C is required before opset 11");
    char as[64], bs[64], cs[64];
    ld_shape_format(&g->a->shape, as, sizeof as);
    ld_shape_format(&g->b->shape, bs, sizeof bs);
    if (g->a->shape.rank != 2 || g->b->shape.rank != 2)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "A (%s) and B (%s) must be 2-D", as, bs);
    if (!is_blas_type(g->a->dtype) && !is_wide_int(g->a->dtype))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(g->a->dtype));
    if (g->b->dtype != g->a->dtype || (g->c && g->c->dtype != g->a->dtype))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "A, B and C must have the same dtype (%s, %s, %s)",
                              ld_dtype_name(g->a->dtype), ld_dtype_name(g->b->dtype),
                              g->c ? ld_dtype_name(g->c->dtype) : "-");
    g->M = g->a->shape.dims[g->ta ? 1 : 0];
    g->K = g->a->shape.dims[g->ta ? 0 : 1];
    g->N = g->b->shape.dims[g->tb ? 0 : 1];
    if (g->b->shape.dims[g->tb ? 1 : 0] != g->K)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "op(A) is %s%s and op(B) is %s%s: inner "
                              "dimensions differ", as, g->ta ? "^T" : "", bs, g->tb ? "^T" : "");
    if (g->c) {
        const ld_shape *s = &g->c->shape;
        int64_t want[2] = {g->M, g->N};
        bool ok = s->rank <= 2;
        for (int i = 0; ok && i < s->rank; i++) {
            int64_t dim = s->dims[s->rank - 1 - i], target = want[1 - i];
            ok = dim == target || dim == 1;
        }
        if (!ok)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "C (%s) does not broadcast to [%lld, %lld]",
                                  ld_shape_format(s, cs, sizeof cs), (long long)g->M,
                                  (long long)g->N);
    }
    return LD_OK;
}

static ld_status gemm_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    gemm_args g;
    ld_status st = gemm_prepare(ctx, &g);
    if (st != LD_OK)
        return st;
    outs[0].dtype = g.a->dtype;
    outs[0].shape = (ld_shape){.rank = 2, .dims = {g.M, g.N}};
    return LD_OK;
}

/* Element (i, j) of C broadcast to [M, N]: its flat index. */
static int64_t c_index(const ld_tensor *c, int64_t i, int64_t j)
{
    const ld_shape *s = &c->shape;
    int64_t rows = s->rank == 2 ? s->dims[0] : 1, cols = s->rank >= 1 ? s->dims[s->rank - 1] : 1;
    return (rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j);
}

static void gemm_float(ld_kernel_ctx *ctx, const gemm_args *g, void *y)
{
    bool use_c = g->c && g->beta != 0 && g->c->count > 0;
    bool f32 = g->a->dtype == LD_DTYPE_FLOAT32;
    for (int64_t i = 0; use_c && i < g->M; i++)
        for (int64_t j = 0; j < g->N; j++) {
            if (f32)
                ((float *)y)[i * g->N + j] = ((const float *)g->c->data)[c_index(g->c, i, j)];
            else
                ((double *)y)[i * g->N + j] = ((const double *)g->c->data)[c_index(g->c, i, j)];
        }
    int64_t lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
    ld_blas_set_threads(ctx->threads);
    ctx->flops += (int64_t)(2.0 * (double)g->M * (double)g->N * (double)g->K);
    if (f32)
        ld_sgemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, g->a->data, lda ? lda : 1, g->b->data,
                 ldb ? ldb : 1, use_c ? g->beta : 0.0f, y, g->N ? g->N : 1, ctx->numerics,
                 ctx->counters);
    else
        ld_dgemm(g->ta, g->tb, g->M, g->N, g->K, g->alpha, g->a->data, lda ? lda : 1, g->b->data,
                 ldb ? ldb : 1, use_c ? g->beta : 0.0, y, g->N ? g->N : 1, ctx->numerics,
                 ctx->counters);
}

/* Integer Gemm: wrapping sums; alpha/beta other than 1 scale in double. */
static ld_status gemm_int(ld_kernel_ctx *ctx, const gemm_args *g, void *y)
{
    ld_dtype d = g->a->dtype;
    int64_t cells = g->M * g->N;
    uint64_t *acc = malloc((size_t)(cells > 0 ? cells : 1) * sizeof *acc);
    if (!acc)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    int_matmul(d, g->ta, g->tb, g->M, g->N, g->K, g->a->data, 0, g->b->data, 0, acc);
    for (int64_t i = 0; i < g->M; i++)
        for (int64_t j = 0; j < g->N; j++) {
            uint64_t v = acc[i * g->N + j];
            uint64_t c = g->c && g->c->count ? int_load(g->c->data, d, c_index(g->c, i, j)) : 0;
            if (g->alpha == 1 && (g->beta == 1 || !g->c)) {
                v += g->c ? c : 0;
            } else {
                double r = g->alpha * int_as_double(v, d) +
                           (g->c ? g->beta * int_as_double(c, d) : 0);
                v = d == LD_DTYPE_UINT64 || d == LD_DTYPE_UINT32 ? (uint64_t)fmax(r, 0)
                                                                  : (uint64_t)(int64_t)r;
            }
            int_store(y, d, i * g->N + j, v);
        }
    free(acc);
    return LD_OK;
}

static ld_status gemm_compute(ld_kernel_ctx *ctx)
{
    gemm_args g;
    ld_status st = gemm_prepare(ctx, &g);
    if (st != LD_OK)
        return st;
    void *y = ctx->outputs[0]->data;
    if (g.M == 0 || g.N == 0)
        return LD_OK;
    if (is_blas_type(g.a->dtype)) {
        gemm_float(ctx, &g, y);
        return LD_OK;
    }
    return gemm_int(ctx, &g, y);
}

/* --- MatMul ----------------------------------------------------------------------------- */

typedef struct mm_plan {
    int64_t M, N, K;
    ld_shape a_batch, b_batch, o_batch; /* batch dims (rank may be 0) */
    int64_t batch, a_count, b_count;    /* output batch size; matrices in A and B */
    ld_shape out;
} mm_plan;

static int64_t shape_product(const ld_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dims[i];
    return n;
}

static ld_status mm_plan_make(ld_kernel_ctx *ctx, const ld_tensor *a, const ld_tensor *b,
                              mm_plan *p)
{
    char as[64], bs[64];
    memset(p, 0, sizeof *p);
    int ra = a->shape.rank, rb = b->shape.rank;
    if (ra < 1 || rb < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "A (%s) and B (%s) must have rank >= 1",
                              ld_shape_format(&a->shape, as, sizeof as),
                              ld_shape_format(&b->shape, bs, sizeof bs));
    p->M = ra == 1 ? 1 : a->shape.dims[ra - 2];
    p->K = a->shape.dims[ra - 1];
    int64_t kb = rb == 1 ? b->shape.dims[0] : b->shape.dims[rb - 2];
    p->N = rb == 1 ? 1 : b->shape.dims[rb - 1];
    if (kb != p->K)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "A (%s) and B (%s): inner dimensions %lld and "
                              "%lld differ", ld_shape_format(&a->shape, as, sizeof as),
                              ld_shape_format(&b->shape, bs, sizeof bs), (long long)p->K,
                              (long long)kb);
    p->a_batch.rank = ra > 2 ? ra - 2 : 0;
    p->b_batch.rank = rb > 2 ? rb - 2 : 0;
    memcpy(p->a_batch.dims, a->shape.dims, (size_t)p->a_batch.rank * sizeof(int64_t));
    memcpy(p->b_batch.dims, b->shape.dims, (size_t)p->b_batch.rank * sizeof(int64_t));
    /* numpy broadcasting of the batch dimensions (right-aligned, equal or 1) */
    p->o_batch.rank = p->a_batch.rank > p->b_batch.rank ? p->a_batch.rank : p->b_batch.rank;
    for (int i = 0; i < p->o_batch.rank; i++) {
        int ia = i - (p->o_batch.rank - p->a_batch.rank);
        int ib = i - (p->o_batch.rank - p->b_batch.rank);
        int64_t da = ia >= 0 ? p->a_batch.dims[ia] : 1, db = ib >= 0 ? p->b_batch.dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "batch dimensions of A (%s) and B (%s) do not "
                                  "broadcast", ld_shape_format(&a->shape, as, sizeof as),
                                  ld_shape_format(&b->shape, bs, sizeof bs));
        p->o_batch.dims[i] = da == 1 ? db : da;
    }
    p->batch = shape_product(&p->o_batch);
    p->a_count = shape_product(&p->a_batch);
    p->b_count = shape_product(&p->b_batch);
    p->out = p->o_batch;
    if (ra > 1)
        p->out.dims[p->out.rank++] = p->M;
    if (rb > 1)
        p->out.dims[p->out.rank++] = p->N;
    if (p->out.rank > LD_MAX_RANK)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "result rank exceeds %d", LD_MAX_RANK);
    return LD_OK;
}

/* Matrix index in A and B of output batch element i (broadcast). */
static void mm_batch_index(const mm_plan *p, int64_t i, int64_t *ai, int64_t *bi)
{
    int64_t a = 0, b = 0, a_stride = 1, b_stride = 1;
    int off_a = p->o_batch.rank - p->a_batch.rank, off_b = p->o_batch.rank - p->b_batch.rank;
    for (int d = p->o_batch.rank - 1; d >= 0; d--) {
        int64_t idx = i % p->o_batch.dims[d];
        i /= p->o_batch.dims[d];
        if (d >= off_a) {
            int64_t dim = p->a_batch.dims[d - off_a];
            a += (dim == 1 ? 0 : idx) * a_stride;
            a_stride *= dim;
        }
        if (d >= off_b) {
            int64_t dim = p->b_batch.dims[d - off_b];
            b += (dim == 1 ? 0 : idx) * b_stride;
            b_stride *= dim;
        }
    }
    *ai = a;
    *bi = b;
}

/* Float MatMul (es 4 or 8) into y. */
static void mm_float(ld_kernel_ctx *ctx, const mm_plan *p, const void *a, const void *b, void *y,
                     size_t es)
{
    int64_t M = p->M, N = p->N, K = p->K, batch = p->batch;
    bool fold = p->b_count == 1 && p->a_count == batch;
    if (fold) {
        M *= batch;
        batch = 1;
    }
    ld_blas_set_threads(ctx->threads);
    ctx->flops += (int64_t)(2.0 * (double)M * (double)N * (double)K * (double)batch);
    /* Many small products (attention heads): one per thread, when together
     * they are worth waking a thread for (GEMM_PARALLEL_MIN in blas.c). A
     * large one is split inside ld_sgemm instead. Each product is computed
     * the same way either way. */
    int threads = ctx->threads;
    double work = (double)M * (double)N * (double)K;
    bool per_batch = batch > 1 && work < (double)(1 << 20) && work * (double)batch >= 4194304.0;
#pragma omp parallel for num_threads(threads) if (per_batch) schedule(static)
    for (int64_t i = 0; i < batch; i++) {
        int64_t ai = 0, bi = 0;
        if (!fold)
            mm_batch_index(p, i, &ai, &bi);
        const void *ap = (const char *)a + (size_t)(ai * p->M * K) * es;
        const void *bp = (const char *)b + (size_t)(bi * K * N) * es;
        void *yp = (char *)y + (size_t)(i * M * N) * es;
        if (es == 4)
            ld_sgemm(false, false, M, N, K, 1.0f, ap, K ? K : 1, bp, N ? N : 1, 0.0f, yp,
                     N ? N : 1, ctx->numerics, ctx->counters);
        else
            ld_dgemm(false, false, M, N, K, 1.0, ap, K ? K : 1, bp, N ? N : 1, 0.0, yp, N ? N : 1,
                     ctx->numerics, ctx->counters);
    }
}

static ld_status mm_int(ld_kernel_ctx *ctx, const mm_plan *p, const ld_tensor *a,
                        const ld_tensor *b, void *y)
{
    int64_t cells = p->M * p->N;
    uint64_t *acc = malloc((size_t)(cells > 0 ? cells : 1) * sizeof *acc);
    if (!acc)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < p->batch; i++) {
        int64_t ai, bi;
        mm_batch_index(p, i, &ai, &bi);
        int_matmul(a->dtype, false, false, p->M, p->N, p->K, a->data, ai * p->M * p->K, b->data,
                   bi * p->K * p->N, acc);
        for (int64_t j = 0; j < p->M * p->N; j++)
            int_store(y, a->dtype, i * p->M * p->N + j, acc[j]);
    }
    free(acc);
    return LD_OK;
}

static ld_status matmul_prepare(ld_kernel_ctx *ctx, mm_plan *p)
{
    const ld_tensor *a = ld_kin(ctx, 0), *b = ld_kin(ctx, 1);
    if (!a || !b)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs inputs A and B");
    if (!is_blas_type(a->dtype) && !is_wide_int(a->dtype))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(a->dtype));
    if (b->dtype != a->dtype)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "A is %s but B is %s", ld_dtype_name(a->dtype),
                              ld_dtype_name(b->dtype));
    return mm_plan_make(ctx, a, b, p);
}

static ld_status matmul_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    mm_plan p;
    ld_status st = matmul_prepare(ctx, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    outs[0].shape = p.out;
    return LD_OK;
}

static ld_status matmul_compute(ld_kernel_ctx *ctx)
{
    mm_plan p;
    ld_status st = matmul_prepare(ctx, &p);
    if (st != LD_OK)
        return st;
    const ld_tensor *a = ctx->inputs[0], *b = ctx->inputs[1];
    if (is_blas_type(a->dtype))
        mm_float(ctx, &p, a->data, b->data, ctx->outputs[0]->data, ld_dtype_size(a->dtype));
    else
        st = mm_int(ctx, &p, a, b, ctx->outputs[0]->data);
    return st;
}

/* --- MatMulInteger and QLinearMatMul ------------------------------------------------------ */

typedef struct qmm_inputs {
    const ld_tensor *a, *azp, *b, *bzp, *as, *bs, *ys, *yzp;
} qmm_inputs;

static bool is_8bit(ld_dtype d)
{
    return d == LD_DTYPE_UINT8 || d == LD_DTYPE_INT8;
}

/* A zero point or scale: one value, or `per` values (1-D) when per > 0. */
static ld_status check_param(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what, int64_t per,
                             bool want_float, ld_dtype like)
{
    if (!t)
        return LD_OK;
    if (want_float ? t->dtype != LD_DTYPE_FLOAT32 : t->dtype != like)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s has dtype %s; expected %s", what,
                              ld_dtype_name(t->dtype),
                              ld_dtype_name(want_float ? LD_DTYPE_FLOAT32 : like));
    if (t->count == 1 || (per > 0 && t->count == per && t->shape.rank == 1))
        return LD_OK;
    char s[64];
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s has shape %s; expected a scalar%s", what,
                          ld_shape_format(&t->shape, s, sizeof s),
                          per > 0 ? " or a 1-D tensor with one value per row/column" : "");
}

static double param_at(const ld_tensor *t, int64_t i)
{
    return t ? ld_tensor_get_double(t, t->count == 1 ? 0 : i) : 0;
}

static ld_status qmm_prepare(ld_kernel_ctx *ctx, qmm_inputs *q, mm_plan *p)
{
    bool qlinear = strcmp(ctx->node->op_type, "QLinearMatMul") == 0;
    if (qlinear)
        *q = (qmm_inputs){.a = ld_kin(ctx, 0), .as = ld_kin(ctx, 1), .azp = ld_kin(ctx, 2),
                          .b = ld_kin(ctx, 3), .bs = ld_kin(ctx, 4), .bzp = ld_kin(ctx, 5),
                          .ys = ld_kin(ctx, 6), .yzp = ld_kin(ctx, 7)};
    else
        *q = (qmm_inputs){.a = ld_kin(ctx, 0), .b = ld_kin(ctx, 1), .azp = ld_kin(ctx, 2),
                          .bzp = ld_kin(ctx, 3)};
    if (!q->a || !q->b)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs inputs A and B");
    if (qlinear && (!q->as || !q->azp || !q->bs || !q->bzp || !q->ys || !q->yzp))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs a, a_scale, a_zero_point, b, b_scale, "
                              "b_zero_point, y_scale and y_zero_point");
    if (!is_8bit(q->a->dtype) || !is_8bit(q->b->dtype))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "A (%s) and B (%s) must be int8 or uint8",
                              ld_dtype_name(q->a->dtype), ld_dtype_name(q->b->dtype));
    ld_status st = mm_plan_make(ctx, q->a, q->b, p);
    if (st == LD_OK)
        st = check_param(ctx, q->azp, "a_zero_point", p->M, false, q->a->dtype);
    if (st == LD_OK)
        st = check_param(ctx, q->bzp, "b_zero_point", p->N, false, q->b->dtype);
    if (st == LD_OK)
        st = check_param(ctx, q->as, "a_scale", 0, true, LD_DTYPE_FLOAT32);
    if (st == LD_OK)
        st = check_param(ctx, q->bs, "b_scale", p->N, true, LD_DTYPE_FLOAT32);
    if (st == LD_OK)
        st = check_param(ctx, q->ys, "y_scale", 0, true, LD_DTYPE_FLOAT32);
    if (st == LD_OK && q->yzp && (!is_8bit(q->yzp->dtype) || q->yzp->count != 1))
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "y_zero_point must be one int8 or uint8 value");
    return st;
}

static ld_status qmm_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    qmm_inputs q;
    mm_plan p;
    ld_status st = qmm_prepare(ctx, &q, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = q.yzp ? q.yzp->dtype : LD_DTYPE_INT32;
    outs[0].shape = p.out;
    return LD_OK;
}

static double q8_at(const ld_tensor *t, int64_t i)
{
    return t->dtype == LD_DTYPE_UINT8 ? ((const uint8_t *)t->data)[i]
                                      : ((const int8_t *)t->data)[i];
}

/* ONNX Runtime's requantisation: float32 accumulator times the float32 scale
 * a_scale * b_scale / y_scale, rounded half to even, plus the zero point,
 * saturated. */
static void qmm_store(const qmm_inputs *q, const mm_plan *p, const double *acc, ld_tensor *y)
{
    if (y->dtype == LD_DTYPE_INT32) {
        for (int64_t i = 0; i < y->count; i++)
            ((int32_t *)y->data)[i] = (int32_t)(uint32_t)(int64_t)acc[i];
        return;
    }
    float as = (float)param_at(q->as, 0), ys = (float)param_at(q->ys, 0);
    double zp = param_at(q->yzp, 0);
    double lo = y->dtype == LD_DTYPE_UINT8 ? 0 : -128, hi = y->dtype == LD_DTYPE_UINT8 ? 255 : 127;
    for (int64_t i = 0; i < y->count; i++) {
        float scale = as * (float)param_at(q->bs, i % p->N) / ys;
        double v = nearbyintf((float)acc[i] * scale) + zp;
        v = v < lo ? lo : v > hi ? hi : v;
        if (y->dtype == LD_DTYPE_UINT8)
            ((uint8_t *)y->data)[i] = (uint8_t)v;
        else
            ((int8_t *)y->data)[i] = (int8_t)v;
    }
}

static ld_status qmm_compute(ld_kernel_ctx *ctx)
{
    qmm_inputs q;
    mm_plan p;
    ld_tensor *y = ctx->outputs[0];
    ld_status st = qmm_prepare(ctx, &q, &p);
    if (st != LD_OK)
        return st;
    double *ad = malloc((size_t)(q.a->count ? q.a->count : 1) * sizeof *ad);
    double *bd = malloc((size_t)(q.b->count ? q.b->count : 1) * sizeof *bd);
    double *yd = malloc((size_t)(y->count ? y->count : 1) * sizeof *yd);
    if (!ad || !bd || !yd) {
        st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* a's zero point per row (index within the M rows), b's per column. */
    for (int64_t i = 0; i < q.a->count; i++)
        ad[i] = q8_at(q.a, i) - param_at(q.azp, (i / p.K) % p.M);
    for (int64_t i = 0; i < q.b->count; i++)
        bd[i] = q8_at(q.b, i) - param_at(q.bzp, i % p.N);
    mm_float(ctx, &p, ad, bd, yd, sizeof(double));
    qmm_store(&q, &p, yd, y);
out:
    free(ad);
    free(bd);
    free(yd);
    return st;
}

static const ld_kernel gemm_kernels[] = {
    {"", "Gemm", 1, LD_KERNEL_WIDEN_HALF, gemm_init, gemm_infer, gemm_compute, NULL, NULL},
    {"", "Gemm", 6, LD_KERNEL_WIDEN_HALF, gemm_init, gemm_infer, gemm_compute, NULL, NULL},
    {"", "Gemm", 7, LD_KERNEL_WIDEN_HALF, gemm_init, gemm_infer, gemm_compute, NULL, NULL},
    {"", "Gemm", 9, LD_KERNEL_WIDEN_HALF, gemm_init, gemm_infer, gemm_compute, NULL, NULL},
    {"", "Gemm", 11, LD_KERNEL_WIDEN_HALF, gemm_init, gemm_infer, gemm_compute, NULL, NULL},
    {"", "Gemm", 13, LD_KERNEL_WIDEN_HALF, gemm_init, gemm_infer, gemm_compute, NULL, NULL},
    {"", "MatMul", 1, LD_KERNEL_WIDEN_HALF, gemm_init, matmul_infer, matmul_compute, NULL, NULL},
    {"", "MatMul", 9, LD_KERNEL_WIDEN_HALF, gemm_init, matmul_infer, matmul_compute, NULL, NULL},
    {"", "MatMul", 13, LD_KERNEL_WIDEN_HALF, gemm_init, matmul_infer, matmul_compute, NULL, NULL},
    {"", "MatMulInteger", 10, 0, gemm_init, qmm_infer, qmm_compute, NULL, NULL},
    {"", "QLinearMatMul", 10, 0, gemm_init, qmm_infer, qmm_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(gemm);
