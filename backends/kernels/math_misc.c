/* layerdiff — composite math: Einsum (12) and Det (11).
 *
 * Einsum follows numpy.einsum (the ONNX reference): explicit ("ij,jk->ik")
 * or implicit output (ellipsis dims first, then the letters used exactly
 * once, in ASCII order), repeated letters in one term take the diagonal,
 * "..." broadcasts numpy-style, and labelled dims of size 1 broadcast too.
 * It runs as a plain loop over the output index space with an inner loop
 * over the summed labels — correctness first. float32 products and sums run
 * in double and each output is rounded once; integers wrap modulo 2^64 and
 * truncate to the type.
 *
 * Det: LU decomposition with partial pivoting in double, rounded once. */
#include <math.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

#define EIN_MAX_INPUTS 16
#define EIN_LETTERS 52
#define EIN_MAX_LABELS (LD_MAX_RANK + EIN_LETTERS)
#define EIN_ELLIPSIS (-1)

typedef struct ein_term {
    int n;                      /* labels in the term (the ellipsis counts as one) */
    int labels[LD_MAX_RANK + 1]; /* letter index 0..51 or EIN_ELLIPSIS */
    bool has_ellipsis;
} ein_term;

/* Labels of the loop space: ellipsis dims are 0..E-1, letter l is E + l. The
 * first n_out labels are the output's, in output order. */
typedef struct ein_plan {
    int n_in;
    int n_labels, n_out;
    int order[EIN_MAX_LABELS];  /* loop position -> label id */
    int64_t size[EIN_MAX_LABELS]; /* by loop position */
    int64_t stride[EIN_MAX_INPUTS][EIN_MAX_LABELS]; /* by loop position */
    ld_shape out_shape;
} ein_plan;

static int letter_index(char c)
{
    if (c >= 'a' && c <= 'z')
        return 26 + (c - 'a');
    if (c >= 'A' && c <= 'Z')
        return c - 'A'; /* ASCII order: upper case first, as numpy sorts */
    return -1;
}

/* Parses one term from *p up to ',', '-' or the end. */
static ld_status parse_term(ld_kernel_ctx *ctx, const char **p, ein_term *t)
{
    t->n = 0;
    t->has_ellipsis = false;
    for (; **p && **p != ',' && **p != '-'; (*p)++) {
        char c = **p;
        if (c == ' ')
            continue;
        if (t->n > LD_MAX_RANK)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "equation term has too many labels");
        if (c == '.') {
            if (strncmp(*p, "...", 3) != 0 || t->has_ellipsis)
                return ld_kernel_fail(ctx, LD_ERR_INPUT, "equation has a malformed ellipsis");
            t->has_ellipsis = true;
            t->labels[t->n++] = EIN_ELLIPSIS;
            *p += 2;
        } else if (letter_index(c) >= 0) {
            t->labels[t->n++] = letter_index(c);
        } else {
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "equation has an invalid character '%c'", c);
        }
    }
    return LD_OK;
}

typedef struct ein_parsed {
    int n_terms;
    ein_term in[EIN_MAX_INPUTS];
    bool explicit_out;
    ein_term out;
} ein_parsed;

static ld_status parse_equation(ld_kernel_ctx *ctx, const char *eq, ein_parsed *e)
{
    const char *p = eq;
    e->n_terms = 0;
    e->explicit_out = false;
    for (;;) {
        if (e->n_terms == EIN_MAX_INPUTS)
            return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "more than %d operands",
                                  EIN_MAX_INPUTS);
        ld_status st = parse_term(ctx, &p, &e->in[e->n_terms++]);
        if (st != LD_OK)
            return st;
        if (*p == ',') {
            p++;
            continue;
        }
        break;
    }
    if (*p == '-') {
        if (p[1] != '>')
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "equation '%s': '-' must start '->'", eq);
        p += 2;
        e->explicit_out = true;
        ld_status st = parse_term(ctx, &p, &e->out);
        if (st != LD_OK)
            return st;
        if (*p)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "equation '%s' has text after the output",
                                  eq);
    }
    return LD_OK;
}

/* Records that loop label `id` has size dim in input i at stride s (summing
 * strides of a repeated label: the diagonal). */
static ld_status bind_dim(ld_kernel_ctx *ctx, int64_t *size, int64_t *stride, int id,
                          int64_t dim, int64_t s)
{
    if (dim != 1) {
        if (size[id] != 1 && size[id] != dim)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "label sizes %lld and %lld do not match",
                                  (long long)size[id], (long long)dim);
        size[id] = dim;
        stride[id] += s;
    }
    return LD_OK;
}

static ld_status ein_bind_inputs(ld_kernel_ctx *ctx, const ein_parsed *e, int E,
                                 int64_t *size, int64_t (*stride)[EIN_MAX_LABELS], int *uses)
{
    for (int i = 0; i < e->n_terms; i++) {
        const ein_term *t = &e->in[i];
        const ld_shape *sh = &ctx->inputs[i]->shape;
        int n_ell = sh->rank - (t->n - (t->has_ellipsis ? 1 : 0));
        int64_t s = 1, strides[LD_MAX_RANK];
        for (int d = sh->rank - 1; d >= 0; d--) {
            strides[d] = s;
            s *= sh->dims[d];
        }
        int d = 0;
        for (int k = 0; k < t->n; k++) {
            if (t->labels[k] == EIN_ELLIPSIS) {
                for (int j = 0; j < n_ell; j++, d++) {
                    ld_status st = bind_dim(ctx, size, stride[i], E - n_ell + j, sh->dims[d],
                                            strides[d]);
                    if (st != LD_OK)
                        return st;
                }
                continue;
            }
            int id = E + t->labels[k];
            uses[id]++;
            ld_status st = bind_dim(ctx, size, stride[i], id, sh->dims[d], strides[d]);
            if (st != LD_OK)
                return st;
            d++;
        }
    }
    return LD_OK;
}

static ld_status ein_plan_make(ld_kernel_ctx *ctx, ein_plan *pl)
{
    const char *eq;
    ein_parsed e;
    ld_status st = ld_node_attr_string(ctx->node, "equation", NULL, &eq, ctx->err);
    if (st != LD_OK)
        return st;
    if (!eq)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'equation' is missing");
    if ((st = parse_equation(ctx, eq, &e)) != LD_OK)
        return st;
    if (e.n_terms != ctx->n_inputs)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "equation '%s' has %d operands but the node "
                              "has %d inputs", eq, e.n_terms, ctx->n_inputs);
    int E = 0;
    for (int i = 0; i < e.n_terms; i++) {
        if ((st = ld_krequire(ctx, i)) != LD_OK)
            return st;
        const ein_term *t = &e.in[i];
        int letters = t->n - (t->has_ellipsis ? 1 : 0), rank = ctx->inputs[i]->shape.rank;
        if (rank < letters || (!t->has_ellipsis && rank != letters))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "operand %d has rank %d but its term in "
                                  "'%s' has %d labels", i, rank, eq, letters);
        if (rank - letters > E)
            E = rank - letters;
    }
    int64_t size[EIN_MAX_LABELS], stride[EIN_MAX_INPUTS][EIN_MAX_LABELS];
    int uses[EIN_MAX_LABELS] = {0};
    for (int id = 0; id < EIN_MAX_LABELS; id++)
        size[id] = 1;
    memset(stride, 0, sizeof stride);
    if ((st = ein_bind_inputs(ctx, &e, E, size, stride, uses)) != LD_OK)
        return st;
    /* Output labels: explicit, or ellipsis dims then letters used once. */
    bool in_out[EIN_MAX_LABELS] = {false};
    int n_out = 0;
    if (e.explicit_out) {
        bool ell = false;
        for (int k = 0; k < e.out.n; k++) {
            int l = e.out.labels[k];
            if (l == EIN_ELLIPSIS) {
                ell = true;
                for (int j = 0; j < E; j++, n_out++)
                    in_out[pl->order[n_out] = j] = true;
                continue;
            }
            if (!uses[E + l] || in_out[E + l])
                return ld_kernel_fail(ctx, LD_ERR_INPUT, "output label %d of '%s' is %s", k,
                                      eq, uses[E + l] ? "repeated" : "not in any input");
            in_out[pl->order[n_out++] = E + l] = true;
        }
        if (E > 0 && !ell)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "equation '%s' broadcasts '...' but its "
                                  "output has no '...'", eq);
    } else {
        for (int j = 0; j < E; j++, n_out++)
            in_out[pl->order[n_out] = j] = true;
        for (int l = 0; l < EIN_LETTERS; l++)
            if (uses[E + l] == 1)
                in_out[pl->order[n_out++] = E + l] = true;
    }
    if (n_out > LD_MAX_RANK)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "output rank %d is too large", n_out);
    int n = n_out;
    for (int id = 0; id < E + EIN_LETTERS; id++)
        if (!in_out[id] && (id < E || uses[id]))
            pl->order[n++] = id;
    pl->n_in = e.n_terms;
    pl->n_labels = n;
    pl->n_out = n_out;
    pl->out_shape.rank = n_out;
    for (int k = 0; k < n; k++) {
        pl->size[k] = size[pl->order[k]];
        for (int i = 0; i < pl->n_in; i++)
            pl->stride[i][k] = stride[i][pl->order[k]];
        if (k < n_out)
            pl->out_shape.dims[k] = pl->size[k];
    }
    return LD_OK;
}

/* The product-sum loop for one element type: output elements [o0, o1). */
#define EIN_DEFINE(SUF, T, ACC)                                                            \
    static void ein_range_##SUF(const ein_plan *pl, const T *const *x, T *y, int64_t o0,   \
                                int64_t o1)                                                \
    {                                                                                      \
        int n_in = pl->n_in, R0 = pl->n_out, NL = pl->n_labels;                            \
        int64_t idx[EIN_MAX_LABELS], off[EIN_MAX_INPUTS] = {0};                            \
        int64_t rest = o0;                                                                 \
        for (int k = R0 - 1; k >= 0; k--) {                                                \
            idx[k] = rest % pl->size[k];                                                   \
            rest /= pl->size[k];                                                           \
            for (int i = 0; i < n_in; i++)                                                 \
                off[i] += idx[k] * pl->stride[i][k];                                       \
        }                                                                                  \
        bool empty = false;                                                                \
        for (int k = R0; k < NL; k++)                                                      \
            empty |= pl->size[k] == 0;                                                     \
        int last = NL - 1;                                                                 \
        int64_t n_last = NL > R0 ? pl->size[last] : 1;                                     \
        for (int64_t o = o0; o < o1; o++) {                                                \
            ACC acc = 0;                                                                   \
            int64_t ridx[EIN_MAX_LABELS], roff[EIN_MAX_INPUTS];                            \
            for (int i = 0; i < n_in; i++)                                                 \
                roff[i] = off[i];                                                          \
            for (int k = R0; k < last; k++)                                                \
                ridx[k] = 0;                                                               \
            while (!empty) {                                                               \
                for (int64_t j = 0; j < n_last; j++) {                                     \
                    ACC p = 1;                                                             \
                    for (int i = 0; i < n_in; i++)                                         \
                        p *= (ACC)x[i][roff[i] + (NL > R0 ? j * pl->stride[i][last] : 0)]; \
                    acc += p;                                                              \
                }                                                                          \
                int k = last - 1;                                                          \
                for (; k >= R0; k--) {                                                     \
                    for (int i = 0; i < n_in; i++)                                         \
                        roff[i] += pl->stride[i][k];                                       \
                    if (++ridx[k] < pl->size[k])                                           \
                        break;                                                             \
                    for (int i = 0; i < n_in; i++)                                         \
                        roff[i] -= pl->size[k] * pl->stride[i][k];                         \
                    ridx[k] = 0;                                                           \
                }                                                                          \
                if (k < R0)                                                                \
                    break;                                                                 \
            }                                                                              \
            y[o] = (T)acc;                                                                 \
            for (int k = R0 - 1; k >= 0; k--) {                                            \
                for (int i = 0; i < n_in; i++)                                             \
                    off[i] += pl->stride[i][k];                                            \
                if (++idx[k] < pl->size[k])                                                \
                    break;                                                                 \
                for (int i = 0; i < n_in; i++)                                             \
                    off[i] -= pl->size[k] * pl->stride[i][k];                              \
                idx[k] = 0;                                                                \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    static void ein_run_##SUF(const ein_plan *pl, const T *const *x, T *y, int64_t n,      \
                              int threads)                                                 \
    {                                                                                      \
        int nt = n >= 64 ? threads : 1;                                                    \
        _Pragma("omp parallel for num_threads(nt) schedule(static)")                       \
        for (int t = 0; t < nt; t++)                                                       \
            ein_range_##SUF(pl, x, y, n * t / nt, n * (t + 1) / nt);                       \
    }

EIN_DEFINE(f32, float, double)
EIN_DEFINE(f64, double, double)
EIN_DEFINE(i64, int64_t, uint64_t)

static bool ein_dtype_ok(ld_dtype d)
{
    switch (d) {
    case LD_DTYPE_FLOAT32: case LD_DTYPE_FLOAT64:
    case LD_DTYPE_INT8: case LD_DTYPE_INT16: case LD_DTYPE_INT32: case LD_DTYPE_INT64:
    case LD_DTYPE_UINT8: case LD_DTYPE_UINT16: case LD_DTYPE_UINT32: case LD_DTYPE_UINT64:
        return true;
    default:
        return false;
    }
}

static ld_status ein_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ein_plan pl;
    if (ctx->n_inputs < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs at least one input");
    ld_status st = ein_plan_make(ctx, &pl);
    if (st != LD_OK)
        return st;
    ld_dtype d = ctx->inputs[0]->dtype;
    for (int i = 1; i < ctx->n_inputs; i++)
        if (ctx->inputs[i]->dtype != d)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "inputs have different dtypes (%s, %s)",
                                  ld_dtype_name(d), ld_dtype_name(ctx->inputs[i]->dtype));
    if (!ein_dtype_ok(d))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(d));
    outs[0].dtype = d;
    outs[0].shape = pl.out_shape;
    return LD_OK;
}

static int64_t int_at(const ld_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case LD_DTYPE_INT8: return ((const int8_t *)t->data)[i];
    case LD_DTYPE_INT16: return ((const int16_t *)t->data)[i];
    case LD_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    case LD_DTYPE_INT64: return ((const int64_t *)t->data)[i];
    case LD_DTYPE_UINT8: return ((const uint8_t *)t->data)[i];
    case LD_DTYPE_UINT16: return ((const uint16_t *)t->data)[i];
    case LD_DTYPE_UINT32: return ((const uint32_t *)t->data)[i];
    case LD_DTYPE_UINT64: return (int64_t)((const uint64_t *)t->data)[i];
    default: return 0;
    }
}

static void int_store(ld_tensor *t, int64_t i, uint64_t v)
{
    switch (t->dtype) {
    case LD_DTYPE_INT8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case LD_DTYPE_INT16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case LD_DTYPE_INT32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case LD_DTYPE_INT64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    case LD_DTYPE_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case LD_DTYPE_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
    case LD_DTYPE_UINT32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case LD_DTYPE_UINT64: ((uint64_t *)t->data)[i] = v; break;
    default: break;
    }
}

/* Integers: int64 copies of the inputs, then a truncating store. */
static ld_status ein_compute_int(ld_kernel_ctx *ctx, const ein_plan *pl)
{
    ld_tensor *y = ctx->outputs[0];
    int64_t *copies[EIN_MAX_INPUTS] = {NULL}, *out = malloc((size_t)(y->count + 1) * 8);
    ld_status st = out ? LD_OK : ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; st == LD_OK && i < pl->n_in; i++) {
        const ld_tensor *t = ctx->inputs[i];
        if (!(copies[i] = malloc((size_t)(t->count + 1) * 8))) {
            st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t k = 0; k < t->count; k++)
            copies[i][k] = int_at(t, k);
    }
    if (st == LD_OK) {
        ein_run_i64(pl, (const int64_t *const *)copies, out, y->count, ctx->threads);
        for (int64_t k = 0; k < y->count; k++)
            int_store(y, k, (uint64_t)out[k]);
    }
    for (int i = 0; i < pl->n_in; i++)
        free(copies[i]);
    free(out);
    return st;
}

static ld_status ein_compute(ld_kernel_ctx *ctx)
{
    ein_plan pl;
    ld_status st = ein_plan_make(ctx, &pl);
    if (st != LD_OK)
        return st;
    ld_tensor *y = ctx->outputs[0];
    const void *x[EIN_MAX_INPUTS];
    for (int i = 0; i < pl.n_in; i++)
        x[i] = ctx->inputs[i]->data;
    if (y->count == 0)
        return LD_OK;
    if (y->dtype == LD_DTYPE_FLOAT32)
        ein_run_f32(&pl, (const float *const *)x, y->data, y->count, ctx->threads);
    else if (y->dtype == LD_DTYPE_FLOAT64)
        ein_run_f64(&pl, (const double *const *)x, y->data, y->count, ctx->threads);
    else
        return ein_compute_int(ctx, &pl);
    return LD_OK;
}

/* --- Det ------------------------------------------------------------------------------- */

static ld_status det_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    const ld_shape *s = &x->shape;
    if (x->dtype != LD_DTYPE_FLOAT32 && x->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    char buf[128];
    if (s->rank < 2 || s->dims[s->rank - 1] != s->dims[s->rank - 2])
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input %s is not a (batch of) square "
                              "matrices", ld_shape_format(s, buf, sizeof buf));
    outs[0].dtype = x->dtype;
    outs[0].shape = *s;
    outs[0].shape.rank -= 2;
    return LD_OK;
}

/* Determinant of the M x M matrix a (destroyed). */
static double det_lu(double *a, int64_t M)
{
    double det = 1.0;
    for (int64_t k = 0; k < M; k++) {
        int64_t piv = k;
        for (int64_t r = k + 1; r < M; r++)
            if (fabs(a[r * M + k]) > fabs(a[piv * M + k]))
                piv = r;
        if (a[piv * M + k] == 0)
            return 0.0;
        if (piv != k) {
            for (int64_t c = 0; c < M; c++) {
                double t = a[k * M + c];
                a[k * M + c] = a[piv * M + c];
                a[piv * M + c] = t;
            }
            det = -det;
        }
        double p = a[k * M + k];
        det *= p;
        for (int64_t r = k + 1; r < M; r++) {
            double f = a[r * M + k] / p;
            for (int64_t c = k + 1; c < M; c++)
                a[r * M + c] -= f * a[k * M + c];
        }
    }
    return det;
}

static ld_status det_compute(ld_kernel_ctx *ctx)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    int64_t M = x->shape.dims[x->shape.rank - 1], MM = M * M;
    double *a = malloc((size_t)(MM ? MM : 1) * sizeof *a);
    if (!a)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    bool f64 = x->dtype == LD_DTYPE_FLOAT64;
    for (int64_t b = 0; b < y->count; b++) {
        for (int64_t i = 0; i < MM; i++)
            a[i] = f64 ? ((const double *)x->data)[b * MM + i]
                       : ((const float *)x->data)[b * MM + i];
        double d = det_lu(a, M);
        if (f64)
            ((double *)y->data)[b] = d;
        else
            ((float *)y->data)[b] = (float)d;
    }
    free(a);
    return LD_OK;
}

static const ld_kernel math_misc_kernels[] = {
    {"", "Det", 11, LD_KERNEL_WIDEN_HALF, NULL, det_infer, det_compute, NULL, NULL},
    {"", "Einsum", 12, LD_KERNEL_WIDEN_HALF, NULL, ein_infer, ein_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(math_misc);
