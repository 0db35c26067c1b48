/* layerdiff — recurrent layers: RNN, GRU and LSTM (opsets 1, 3 (GRU), 7, 14).
 *
 * The input projection of every time step is one GEMM over the whole
 * sequence (X * W^T plus the biases); each step then adds H_{t-1} * R^T
 * with a second GEMM over the batch and applies the gate equations row by
 * row. Both GEMMs go through ld_sgemm / ld_dgemm (backends/blas.h).
 *
 * sequence_lens: batch entry b runs its own first len[b] steps (the reverse
 * direction starts at step len[b] - 1, as ONNX Runtime); Y is zero past its
 * length and Y_h / Y_c hold the state after its last step (the initial state
 * when len[b] is 0). layout 1 (opset 14) is batch-major X, Y, initial and
 * final states; the kernel works time-major and transposes at the edges.
 *
 * The gate math is generated for float and double from one body
 * (<tgmath.h> picks expf / exp ...), so float32 computes in float. */
#include <ctype.h>
#include <stdint.h>
#include <tgmath.h>

#include "backends/blas.h"
#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

typedef enum { CELL_RNN, CELL_GRU, CELL_LSTM } cell_kind;

typedef enum {
    ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKYRELU, ACT_THRESHOLDEDRELU,
    ACT_SCALEDTANH, ACT_HARDSIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS,
} act_kind;

typedef struct activation {
    act_kind kind;
    float alpha, beta;
} activation;

typedef struct rnn_state {
    cell_kind cell;
    int gates;              /* 1 (RNN), 3 (GRU: z r h), 4 (LSTM: i o f c) */
    int n_act;              /* activations per direction: 1, 2 (f g), 3 (f g h) */
    int directions;
    bool reverse;           /* direction "reverse" */
    int64_t hidden;         /* from the attribute, or -1: taken from R */
    activation act[2][3];   /* per direction */
    bool has_clip;
    float clip;
    bool linear_before_reset;
    bool input_forget;
    int layout;
} rnn_state;

/* --- attributes ----------------------------------------------------------------------- */

static const struct {
    const char *name;
    act_kind kind;
    bool uses_alpha, uses_beta;
    float alpha, beta; /* defaults, as ONNX Runtime */
} activation_table[] = {
    {"relu", ACT_RELU, false, false, 0, 0},
    {"tanh", ACT_TANH, false, false, 0, 0},
    {"sigmoid", ACT_SIGMOID, false, false, 0, 0},
    {"affine", ACT_AFFINE, true, true, 0, 0},
    {"leakyrelu", ACT_LEAKYRELU, true, false, 0.01f, 0},
    {"thresholdedrelu", ACT_THRESHOLDEDRELU, true, false, 0, 0},
    {"scaledtanh", ACT_SCALEDTANH, true, true, 0, 0},
    {"hardsigmoid", ACT_HARDSIGMOID, true, true, 0.2f, 0.5f},
    {"elu", ACT_ELU, true, false, 1.0f, 0},
    {"softsign", ACT_SOFTSIGN, false, false, 0, 0},
    {"softplus", ACT_SOFTPLUS, false, false, 0, 0},
};

/* Parses one activation name (case-insensitive) and takes its alpha/beta
 * from the lists in order, as the spec says ("consumed in the order of the
 * activation functions"). */
static ld_status parse_activation(ld_kernel_ctx *ctx, const char *name, const float *alphas,
                                  size_t n_alpha, size_t *next_alpha, const float *betas,
                                  size_t n_beta, size_t *next_beta, activation *out)
{
    char lower[32];
    size_t len = strlen(name);
    if (len >= sizeof lower)
        len = sizeof lower - 1;
    for (size_t i = 0; i < len; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    lower[len] = '\0';
    for (size_t i = 0; i < sizeof activation_table / sizeof activation_table[0]; i++) {
        if (strcmp(lower, activation_table[i].name) != 0)
            continue;
        out->kind = activation_table[i].kind;
        out->alpha = activation_table[i].alpha;
        out->beta = activation_table[i].beta;
        if (activation_table[i].uses_alpha && *next_alpha < n_alpha)
            out->alpha = alphas[(*next_alpha)++];
        if (activation_table[i].uses_beta && *next_beta < n_beta)
            out->beta = betas[(*next_beta)++];
        return LD_OK;
    }
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "activation '%s' is not supported", name);
}

static ld_status parse_activations(ld_kernel_ctx *ctx, rnn_state *s)
{
    static const char *const defaults[][3] = {
        {"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"},
    };
    const ld_attr *names = ld_node_attr(ctx->node, "activations");
    const float *alphas = NULL, *betas = NULL;
    size_t n_alpha = 0, n_beta = 0, next_alpha = 0, next_beta = 0;
    ld_status st = ld_node_attr_floats(ctx->node, "activation_alpha", &alphas, &n_alpha, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_floats(ctx->node, "activation_beta", &betas, &n_beta, ctx->err);
    if (st != LD_OK)
        return st;
    if (names && names->type != LD_ATTR_STRINGS)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute 'activations' must be strings");
    size_t given = names ? names->n : 0;
    /* One set for both directions is accepted and repeated. */
    if (given && given != (size_t)s->n_act && given != (size_t)(s->n_act * s->directions))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "activations has %zu names, expected %d", given,
                              s->n_act * s->directions);
    for (int d = 0; d < s->directions; d++) {
        for (int k = 0; k < s->n_act; k++) {
            const char *name = defaults[s->cell][k];
            if (given)
                name = names->strings[((size_t)(d * s->n_act + k)) % given];
            st = parse_activation(ctx, name, alphas, n_alpha, &next_alpha, betas, n_beta,
                                  &next_beta, &s->act[d][k]);
            if (st != LD_OK)
                return st;
        }
    }
    return LD_OK;
}

static ld_status parse_basic(ld_kernel_ctx *ctx, rnn_state *s)
{
    const char *direction;
    int64_t layout = 0, flag = 0;
    ld_status st = ld_node_attr_string(ctx->node, "direction", "forward", &direction, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "hidden_size", -1, &s->hidden, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "layout", 0, &layout, ctx->err);
    if (st != LD_OK)
        return st;
    if (strcmp(direction, "forward") == 0 || strcmp(direction, "reverse") == 0)
        s->directions = 1;
    else if (strcmp(direction, "bidirectional") == 0)
        s->directions = 2;
    else
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "direction '%s' is not forward, reverse or "
                              "bidirectional", direction);
    s->reverse = strcmp(direction, "reverse") == 0;
    if (layout != 0 && layout != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "layout must be 0 or 1");
    s->layout = (int)layout;
    s->has_clip = ld_node_attr(ctx->node, "clip") != NULL;
    st = ld_node_attr_float(ctx->node, "clip", 0, &s->clip, ctx->err);
    if (st == LD_OK && s->has_clip && !(s->clip > 0))
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "clip must be positive");
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "linear_before_reset", 0, &flag, ctx->err);
    s->linear_before_reset = flag != 0;
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "input_forget", 0, &flag, ctx->err);
    s->input_forget = flag != 0;
    return st;
}

static ld_status rnn_init(ld_kernel_ctx *ctx)
{
    rnn_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    const char *op = ctx->node->op_type;
    s->cell = strcmp(op, "LSTM") == 0 ? CELL_LSTM : strcmp(op, "GRU") == 0 ? CELL_GRU : CELL_RNN;
    s->gates = s->cell == CELL_LSTM ? 4 : s->cell == CELL_GRU ? 3 : 1;
    s->n_act = s->cell == CELL_LSTM ? 3 : s->cell == CELL_GRU ? 2 : 1;
    ld_status st = parse_basic(ctx, s);
    if (st == LD_OK)
        st = parse_activations(ctx, s);
    /* Loading the BLAS now, single-threaded; without one ld_sgemm still works. */
    ld_error ignored = {0};
    (void)ld_blas_init(&ignored);
    return st;
}

static void rnn_fini(void *state)
{
    free(state);
}

/* --- shapes ----------------------------------------------------------------------------- */

typedef struct rnn_dims {
    int64_t seq, batch, input, hidden, dirs, gh; /* gh = gates * hidden */
} rnn_dims;

/* Fails unless optional input `input` is absent or has exactly `dims` and the
 * expected dtype (int32 for sequence_lens, X's type otherwise). */
static ld_status expect_shape(ld_kernel_ctx *ctx, int input, const char *name, int rank,
                              const int64_t *dims)
{
    const ld_tensor *t = ld_kin(ctx, input);
    if (!t)
        return LD_OK;
    ld_dtype want = input == 4 ? LD_DTYPE_INT32 : ctx->inputs[0]->dtype;
    ld_shape expected = {.rank = rank};
    memcpy(expected.dims, dims, (size_t)rank * sizeof *dims);
    if (t->dtype == want && ld_shape_equal(&t->shape, &expected))
        return LD_OK;
    char got[96], exp_text[96];
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "input %s is %s %s; expected %s %s", name,
                          ld_dtype_name(t->dtype), ld_shape_format(&t->shape, got, sizeof got),
                          ld_dtype_name(want),
                          ld_shape_format(&expected, exp_text, sizeof exp_text));
}

static ld_status rnn_dims_make(ld_kernel_ctx *ctx, rnn_dims *d)
{
    const rnn_state *s = ctx->state;
    ld_status st = LD_OK;
    for (int i = 0; st == LD_OK && i < 3; i++)
        st = ld_krequire(ctx, i);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0], *r = ctx->inputs[2];
    if (x->dtype != LD_DTYPE_FLOAT32 && x->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    if (x->shape.rank != 3 || r->shape.rank != 3)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "X and R must be 3-D");
    d->seq = x->shape.dims[s->layout ? 1 : 0];
    d->batch = x->shape.dims[s->layout ? 0 : 1];
    d->input = x->shape.dims[2];
    d->dirs = s->directions;
    d->hidden = s->hidden >= 0 ? s->hidden : r->shape.dims[2];
    d->gh = s->gates * d->hidden;
    int64_t wd[3] = {d->dirs, d->gh, d->input}, rd[3] = {d->dirs, d->gh, d->hidden};
    int64_t bd[2] = {d->dirs, 2 * d->gh}, ld[1] = {d->batch}, pd[2] = {d->dirs, 3 * d->hidden};
    int64_t hd[3] = {d->dirs, d->batch, d->hidden};
    if (s->layout)
        hd[0] = d->batch, hd[1] = d->dirs;
    st = expect_shape(ctx, 1, "W", 3, wd);
    if (st == LD_OK)
        st = expect_shape(ctx, 2, "R", 3, rd);
    if (st == LD_OK)
        st = expect_shape(ctx, 3, "B", 2, bd);
    if (st == LD_OK)
        st = expect_shape(ctx, 4, "sequence_lens", 1, ld);
    if (st == LD_OK)
        st = expect_shape(ctx, 5, "initial_h", 3, hd);
    if (st == LD_OK && s->cell == CELL_LSTM)
        st = expect_shape(ctx, 6, "initial_c", 3, hd);
    if (st == LD_OK && s->cell == CELL_LSTM)
        st = expect_shape(ctx, 7, "P", 2, pd);
    return st;
}

static ld_status rnn_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const rnn_state *s = ctx->state;
    rnn_dims d = {0};
    ld_status st = rnn_dims_make(ctx, &d);
    if (st != LD_OK)
        return st;
    ld_dtype dtype = ctx->inputs[0]->dtype;
    for (int i = 0; i < ctx->n_outputs && i < 3; i++) {
        outs[i].dtype = dtype;
        if (i == 0)
            outs[i].shape = s->layout ? (ld_shape){4, {d.batch, d.seq, d.dirs, d.hidden}}
                                      : (ld_shape){4, {d.seq, d.dirs, d.batch, d.hidden}};
        else
            outs[i].shape = s->layout ? (ld_shape){3, {d.batch, d.dirs, d.hidden}}
                                      : (ld_shape){3, {d.dirs, d.batch, d.hidden}};
    }
    return LD_OK;
}

/* --- the typed math ----------------------------------------------------------------------- */

typedef struct step_args {
    const rnn_state *s;
    int dir;
    int64_t batch, hidden;
    const void *R;        /* [gh, hidden] of this direction */
    const void *Rbh;      /* GRU with linear_before_reset: recurrence bias of h, else NULL */
    const void *P;        /* LSTM peepholes [3 * hidden] (i, o, f) or NULL */
    void *gates;          /* [batch, gh]: X*W^T + biases of each row's time step */
    void *h, *c;          /* [batch, hidden] state, updated in place for active rows */
    void *scratch;        /* [batch, hidden] */
    const uint8_t *active;
    const ld_layer_numerics *numerics;
    ld_layer_counters *counters;
} step_args;

#define DEFINE_RNN_MATH(T, SFX, GEMM)                                                         \
    static void act_##SFX(const activation *a, T *x, int64_t n)                               \
    {                                                                                         \
        const T al = (T)a->alpha, be = (T)a->beta, one = 1, zero = 0;                         \
        for (int64_t i = 0; i < n; i++) {                                                     \
            T v = x[i];                                                                       \
            switch (a->kind) {                                                                \
            case ACT_RELU: v = v > zero ? v : zero; break;                                    \
            case ACT_TANH: v = tanh(v); break;                                                \
            case ACT_SIGMOID: v = one / (one + exp(-v)); break;                               \
            case ACT_AFFINE: v = al * v + be; break;                                          \
            case ACT_LEAKYRELU: v = v >= zero ? v : al * v; break;                            \
            case ACT_THRESHOLDEDRELU: v = v >= al ? v : zero; break;                          \
            case ACT_SCALEDTANH: v = al * tanh(be * v); break;                                \
            case ACT_HARDSIGMOID: v = fmin(one, fmax(zero, al * v + be)); break;              \
            case ACT_ELU: v = v >= zero ? v : al * (exp(v) - one); break;                     \
            case ACT_SOFTSIGN: v = v / (one + fabs(v)); break;                                \
            case ACT_SOFTPLUS: v = fmax(v, zero) + log1p(exp(-fabs(v))); break;               \
            }                                                                                 \
            x[i] = v;                                                                         \
        }                                                                                     \
    }                                                                                         \
                                                                                              \
    static void clip_##SFX(const rnn_state *s, T *x, int64_t n)                               \
    {                                                                                         \
        if (!s->has_clip)                                                                     \
            return;                                                                           \
        const T c = (T)s->clip;                                                               \
        for (int64_t i = 0; i < n; i++)                                                       \
            x[i] = x[i] > c ? c : (x[i] < -c ? -c : x[i]);                                    \
    }                                                                                         \
                                                                                              \
    /* rows[i][j] += wb[j] + (j < rb_width ? rb[j] : 0) */                                    \
    static void bias_rows_##SFX(void *rows_, int64_t n, int64_t width, const void *wb_,       \
                                const void *rb_, int64_t rb_width)                            \
    {                                                                                         \
        T *rows = rows_;                                                                      \
        const T *wb = wb_, *rb = rb_;                                                         \
        for (int64_t i = 0; i < n; i++)                                                       \
            for (int64_t j = 0; j < width; j++)                                               \
                rows[i * width + j] += wb[j] + (j < rb_width ? rb[j] : (T)0);                 \
    }                                                                                         \
                                                                                              \
    static void gemm_nt_##SFX(int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,    \
                              const void *b, int64_t ldb, double beta, void *c, int64_t ldc,  \
                              const ld_layer_numerics *num, ld_layer_counters *cnt)           \
    {                                                                                         \
        if (m && n)                                                                           \
            GEMM(false, true, m, n, k, 1, (const T *)a, lda, (const T *)b, ldb, (T)beta,      \
                 (T *)c, ldc, num, cnt);                                                      \
    }                                                                                         \
                                                                                              \
    static void gru_rows_##SFX(const step_args *a, T *g, T *h, T *tmp, int64_t gh)            \
    {                                                                                         \
        const rnn_state *s = a->s;                                                            \
        const activation *gact = &s->act[a->dir][1];                                          \
        const int64_t H = a->hidden;                                                          \
        for (int64_t b = 0; b < a->batch; b++) {                                              \
            if (!a->active[b])                                                                \
                continue;                                                                     \
            T *z = g + b * gh, *r = z + H, *hh = z + 2 * H, *hp = h + b * H;                  \
            if (s->linear_before_reset)                                                       \
                for (int64_t j = 0; j < H; j++)                                               \
                    hh[j] += r[j] * tmp[b * H + j];                                           \
            clip_##SFX(s, hh, H);                                                             \
            act_##SFX(gact, hh, H);                                                           \
            for (int64_t j = 0; j < H; j++)                                                   \
                hp[j] = ((T)1 - z[j]) * hh[j] + z[j] * hp[j];                                 \
        }                                                                                     \
    }                                                                                         \
                                                                                              \
    static void gru_step_##SFX(const step_args *a)                                            \
    {                                                                                         \
        const rnn_state *s = a->s;                                                            \
        const int64_t H = a->hidden, gh = 3 * H;                                              \
        T *g = a->gates, *h = a->h, *tmp = a->scratch;                                        \
        const T *R = a->R, *Rbh = a->Rbh;                                                     \
        gemm_nt_##SFX(a->batch, 2 * H, H, h, H, R, H, 1, g, gh, a->numerics,                  \
                      a->counters);                                                           \
        for (int64_t b = 0; b < a->batch; b++) {                                              \
            if (!a->active[b])                                                                \
                continue;                                                                     \
            clip_##SFX(s, g + b * gh, 2 * H);                                                 \
            act_##SFX(&s->act[a->dir][0], g + b * gh, 2 * H);                                 \
        }                                                                                     \
        if (s->linear_before_reset) { /* tmp = H * Rh^T + Rbh, times r later */               \
            gemm_nt_##SFX(a->batch, H, H, h, H, R + 2 * H * H, H, 0, tmp, H, a->numerics,     \
                          a->counters);                                                       \
            for (int64_t b = 0; b < a->batch; b++)                                            \
                for (int64_t j = 0; j < H; j++)                                               \
                    tmp[b * H + j] += Rbh ? Rbh[j] : (T)0;                                    \
        } else { /* gates_h += (r . H) * Rh^T */                                              \
            for (int64_t b = 0; b < a->batch; b++)                                            \
                for (int64_t j = 0; j < H; j++)                                               \
                    tmp[b * H + j] = a->active[b] ? g[b * gh + H + j] * h[b * H + j] : (T)0;  \
            gemm_nt_##SFX(a->batch, H, H, tmp, H, R + 2 * H * H, H, 1, g + 2 * H, gh,         \
                          a->numerics, a->counters);                                          \
        }                                                                                     \
        gru_rows_##SFX(a, g, h, tmp, gh);                                                     \
    }                                                                                         \
                                                                                              \
    static void lstm_row_##SFX(const step_args *a, T *g, T *h, T *c)                          \
    {                                                                                         \
        const rnn_state *s = a->s;                                                            \
        const activation *act = s->act[a->dir];                                               \
        const int64_t H = a->hidden;                                                          \
        const T *P = a->P;                                                                    \
        T *i = g, *o = g + H, *f = g + 2 * H, *cc = g + 3 * H;                                \
        for (int64_t j = 0; P && j < H; j++) {                                                \
            i[j] += P[j] * c[j];                                                              \
            f[j] += P[2 * H + j] * c[j];                                                      \
        }                                                                                     \
        clip_##SFX(s, i, H);                                                                  \
        act_##SFX(&act[0], i, H);                                                             \
        if (s->input_forget) {                                                                \
            for (int64_t j = 0; j < H; j++)                                                   \
                f[j] = (T)1 - i[j];                                                           \
        } else {                                                                              \
            clip_##SFX(s, f, H);                                                              \
            act_##SFX(&act[0], f, H);                                                         \
        }                                                                                     \
        clip_##SFX(s, cc, H);                                                                 \
        act_##SFX(&act[1], cc, H);                                                            \
        for (int64_t j = 0; j < H; j++)                                                       \
            c[j] = f[j] * c[j] + i[j] * cc[j];                                                \
        for (int64_t j = 0; P && j < H; j++)                                                  \
            o[j] += P[H + j] * c[j];                                                          \
        clip_##SFX(s, o, H);                                                                  \
        act_##SFX(&act[0], o, H);                                                             \
        for (int64_t j = 0; j < H; j++)                                                       \
            h[j] = c[j];                                                                      \
        act_##SFX(&act[2], h, H);                                                             \
        for (int64_t j = 0; j < H; j++)                                                       \
            h[j] *= o[j];                                                                     \
    }                                                                                         \
                                                                                              \
    static void step_##SFX(const step_args *a)                                                \
    {                                                                                         \
        const rnn_state *s = a->s;                                                            \
        const int64_t H = a->hidden, gh = s->gates * H;                                       \
        T *g = a->gates, *h = a->h, *c = a->c;                                                \
        if (s->cell == CELL_GRU) {                                                            \
            gru_step_##SFX(a);                                                                \
            return;                                                                           \
        }                                                                                     \
        gemm_nt_##SFX(a->batch, gh, H, h, H, a->R, H, 1, g, gh, a->numerics,                  \
                      a->counters);                                                           \
        for (int64_t b = 0; b < a->batch; b++) {                                              \
            if (!a->active[b])                                                                \
                continue;                                                                     \
            if (s->cell == CELL_LSTM) {                                                       \
                lstm_row_##SFX(a, g + b * gh, h + b * H, c + b * H);                          \
            } else {                                                                          \
                clip_##SFX(s, g + b * gh, H);                                                 \
                act_##SFX(&s->act[a->dir][0], g + b * gh, H);                                 \
                memcpy(h + b * H, g + b * gh, (size_t)H * sizeof(T));                         \
            }                                                                                 \
        }                                                                                     \
    }

DEFINE_RNN_MATH(float, f32, ld_sgemm)
DEFINE_RNN_MATH(double, f64, ld_dgemm)

typedef struct rnn_ops {
    size_t elem;
    void (*gemm_nt)(int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
                    int64_t ldb, double beta, void *c, int64_t ldc, const ld_layer_numerics *num,
                    ld_layer_counters *cnt);
    void (*bias_rows)(void *rows, int64_t n, int64_t width, const void *wb, const void *rb,
                      int64_t rb_width);
    void (*step)(const step_args *a);
} rnn_ops;

static const rnn_ops ops_f32 = {sizeof(float), gemm_nt_f32, bias_rows_f32, step_f32};
static const rnn_ops ops_f64 = {sizeof(double), gemm_nt_f64, bias_rows_f64, step_f64};

/* --- the driver (type-agnostic: byte copies and the ops above) ------------------------- */

typedef struct rnn_work {
    const rnn_ops *ops;
    rnn_dims d;
    int32_t *lens;      /* [batch] */
    char *x;            /* time-major X [seq, batch, input] (borrowed when layout 0) */
    char *xw;           /* [seq, batch, gh] */
    char *gates;        /* [batch, gh] */
    char *h, *c;        /* [batch, hidden] */
    char *scratch;      /* [batch, hidden] */
    uint8_t *active;    /* [batch] */
    bool own_x;
} rnn_work;

static void rnn_work_free(rnn_work *w)
{
    free(w->lens);
    if (w->own_x)
        free(w->x);
    free(w->xw);
    free(w->gates);
    free(w->h);
    free(w->c);
    free(w->scratch);
    free(w->active);
}

/* Offset in elements of state row (dir, b) in a [dirs, batch, H] or
 * [batch, dirs, H] tensor. */
static int64_t state_offset(const rnn_state *s, const rnn_dims *d, int64_t dir, int64_t b)
{
    return (s->layout ? b * d->dirs + dir : dir * d->batch + b) * d->hidden;
}

static int64_t y_offset(const rnn_state *s, const rnn_dims *d, int64_t t, int64_t dir, int64_t b)
{
    return (s->layout ? (b * d->seq + t) * d->dirs + dir : (t * d->dirs + dir) * d->batch + b) *
           d->hidden;
}

static ld_status rnn_work_make(ld_kernel_ctx *ctx, rnn_work *w)
{
    const rnn_state *s = ctx->state;
    const ld_tensor *x = ctx->inputs[0], *lens = ld_kin(ctx, 4);
    ld_status st = rnn_dims_make(ctx, &w->d);
    if (st != LD_OK)
        return st;
    const rnn_dims *d = &w->d;
    size_t e = w->ops->elem, b = (size_t)(d->batch ? d->batch : 1);
    size_t xw_n = (size_t)(d->seq * d->batch * d->gh);
    size_t hid = b * (size_t)(d->hidden ? d->hidden : 1);
    w->lens = malloc(b * sizeof *w->lens);
    w->xw = calloc(xw_n ? xw_n : 1, e);
    w->gates = calloc(b * (size_t)(d->gh ? d->gh : 1), e);
    w->h = calloc(hid, e);
    w->c = calloc(hid, e);
    w->scratch = calloc(hid, e);
    w->active = calloc(b, 1);
    w->own_x = s->layout == 1;
    w->x = w->own_x ? malloc((x->nbytes ? x->nbytes : 1)) : x->data;
    if (!w->lens || !w->xw || !w->gates || !w->h || !w->c || !w->scratch || !w->active || !w->x)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < d->batch; i++) {
        int32_t len = lens ? ((const int32_t *)lens->data)[i] : (int32_t)d->seq;
        if (len < 0 || len > d->seq)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "sequence_lens[%lld] = %d is outside "
                                  "[0, %lld]", (long long)i, len, (long long)d->seq);
        w->lens[i] = len;
    }
    if (w->own_x) { /* [batch, seq, input] -> [seq, batch, input] */
        size_t row = (size_t)d->input * e;
        for (int64_t t = 0; t < d->seq; t++)
            for (int64_t i = 0; i < d->batch; i++)
                memcpy(w->x + (size_t)(t * d->batch + i) * row,
                       (const char *)x->data + (size_t)(i * d->seq + t) * row, row);
    }
    return LD_OK;
}

/* Loads the initial state of direction dir into h (and c). */
static void load_initial(ld_kernel_ctx *ctx, rnn_work *w, int dir)
{
    const rnn_state *s = ctx->state;
    const ld_tensor *h0 = ld_kin(ctx, 5), *c0 = s->cell == CELL_LSTM ? ld_kin(ctx, 6) : NULL;
    size_t e = w->ops->elem, row = (size_t)w->d.hidden * e;
    for (int64_t b = 0; b < w->d.batch; b++) {
        size_t at = (size_t)state_offset(s, &w->d, dir, b) * e;
        if (h0)
            memcpy(w->h + (size_t)b * row, (const char *)h0->data + at, row);
        else
            memset(w->h + (size_t)b * row, 0, row);
        if (c0)
            memcpy(w->c + (size_t)b * row, (const char *)c0->data + at, row);
        else
            memset(w->c + (size_t)b * row, 0, row);
    }
}

static void run_direction(ld_kernel_ctx *ctx, rnn_work *w, int dir)
{
    const rnn_state *s = ctx->state;
    const rnn_dims *d = &w->d;
    const ld_tensor *W = ctx->inputs[1], *R = ctx->inputs[2], *B = ld_kin(ctx, 3);
    const ld_tensor *P = s->cell == CELL_LSTM ? ld_kin(ctx, 7) : NULL;
    ld_tensor *y = ld_kout(ctx, 0);
    size_t e = w->ops->elem, gh_bytes = (size_t)d->gh * e, h_bytes = (size_t)d->hidden * e;
    bool reverse = s->reverse || dir == 1;
    const char *bias = B ? (const char *)B->data + (size_t)(dir * 2 * d->gh) * e : NULL;
    /* GRU with linear_before_reset keeps Rbh apart: it is multiplied by r. */
    bool split_rbh = s->cell == CELL_GRU && s->linear_before_reset;
    w->ops->gemm_nt(d->seq * d->batch, d->gh, d->input, w->x, d->input,
                    (const char *)W->data + (size_t)(dir * d->gh * d->input) * e, d->input, 0,
                    w->xw, d->gh, ctx->numerics, ctx->counters);
    if (bias)
        w->ops->bias_rows(w->xw, d->seq * d->batch, d->gh, bias, bias + gh_bytes,
                          split_rbh ? 2 * d->hidden : d->gh);
    load_initial(ctx, w, dir);
    step_args a = {
        .s = s, .dir = dir, .batch = d->batch, .hidden = d->hidden,
        .R = (const char *)R->data + (size_t)(dir * d->gh * d->hidden) * e,
        .Rbh = split_rbh && bias ? bias + gh_bytes + 2 * h_bytes : NULL,
        .P = P ? (const char *)P->data + (size_t)(dir * 3 * d->hidden) * e : NULL,
        .gates = w->gates, .h = w->h, .c = w->c, .scratch = w->scratch, .active = w->active,
        .numerics = ctx->numerics, .counters = ctx->counters,
    };
    for (int64_t step = 0; step < d->seq; step++) {
        bool any = false;
        for (int64_t b = 0; b < d->batch; b++) {
            w->active[b] = step < w->lens[b];
            if (!w->active[b])
                continue;
            any = true;
            int64_t t = reverse ? w->lens[b] - 1 - step : step;
            memcpy(w->gates + (size_t)b * gh_bytes, w->xw + (size_t)(t * d->batch + b) * gh_bytes,
                   gh_bytes);
        }
        if (!any)
            break;
        w->ops->step(&a);
        for (int64_t b = 0; y && b < d->batch; b++) {
            if (!w->active[b])
                continue;
            int64_t t = reverse ? w->lens[b] - 1 - step : step;
            memcpy((char *)y->data + (size_t)y_offset(s, d, t, dir, b) * e,
                   w->h + (size_t)b * h_bytes, h_bytes);
        }
    }
    for (int k = 1; k <= 2; k++) {
        ld_tensor *out = ld_kout(ctx, k);
        if (!out || (k == 2 && s->cell != CELL_LSTM))
            continue;
        for (int64_t b = 0; b < d->batch; b++)
            memcpy((char *)out->data + (size_t)state_offset(s, d, dir, b) * e,
                   (k == 1 ? w->h : w->c) + (size_t)b * h_bytes, h_bytes);
    }
}

static ld_status rnn_compute(ld_kernel_ctx *ctx)
{
    const rnn_state *s = ctx->state;
    rnn_work w = {.ops = ctx->inputs[0]->dtype == LD_DTYPE_FLOAT64 ? &ops_f64 : &ops_f32};
    ld_status st = rnn_work_make(ctx, &w);
    if (st != LD_OK)
        goto out;
    ld_tensor *y = ld_kout(ctx, 0);
    if (y && y->nbytes)
        memset(y->data, 0, y->nbytes); /* steps past a sequence's length stay 0 */
    ld_blas_set_threads(ctx->threads);
    for (int dir = 0; dir < s->directions; dir++)
        run_direction(ctx, &w, dir);
out:
    rnn_work_free(&w);
    return st;
}

static const ld_kernel rnn_kernels[] = {
    {"", "GRU", 1, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "GRU", 3, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "GRU", 7, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "GRU", 14, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "LSTM", 1, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "LSTM", 7, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "LSTM", 14, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "RNN", 1, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "RNN", 7, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
    {"", "RNN", 14, LD_KERNEL_WIDEN_HALF, rnn_init, rnn_infer, rnn_compute, rnn_fini, NULL},
};

LD_KERNEL_FAMILY(rnn);
