/* layerdiff — the emulated backend: the shared executor and kernels with
 * hooks that round where a GPU engine built with --fp16 / --bf16 / TF32
 * rounds (docs/numerics.md, "Emulated engine").
 *
 * Per float layer of the precision plan: before compute, its float inputs
 * (weights included) are rounded to the layer's precision; after compute,
 * its float outputs are rounded to the layer's output type and the rounding
 * is counted. Rounded weights and constants are cached per node across runs.
 *
 * Inside the run, a layer's rounded float outputs stay float32 tensors
 * holding values exact in the output type, and the backend remembers that
 * per value: the next layer then needs no widening and no rounding, and
 * kernels that only move data never see mixed float types. Observers see
 * each tensor in the type the layer outputs (float16 / bfloat16 / float32):
 * the run's observer is wrapped and converts, exactly, at the moment of the
 * event. Graph outputs leave in the type the model declares. */
#include <stdlib.h>
#include <string.h>

#include "backends/blas.h"
#include "backends/emulated.h"
#include "backends/emulated_count.h"
#include "backends/engine_internal.h"
#include "backends/exec.h"

/* A constant input (initializer or Constant output) as a layer sees it. */
typedef struct cached_input {
    bool ready;
    ld_tensor *tensor;   /* owned float32 copy, rounded; NULL: the input is used as it is */
    ld_emu_tally events;
    bool has_nan, has_inf;
} cached_input;

typedef struct emu_node {
    unsigned kernel_flags;
    cached_input *cache; /* n_inputs entries, allocated at prepare */
} emu_node;

enum { VALUE_KNOWN = 1, VALUE_NAN = 2, VALUE_INF = 4 };

/* What the backend knows about a value's tensor in the current run. */
typedef struct value_state {
    unsigned char flags; /* VALUE_*: NaN / inf scanned or counted */
    int exact;           /* -1, or the ld_precision a float32 tensor's values are exact in */
    ld_dtype show_as;    /* the type observers see it in; UNDEFINED: as stored */
} value_state;

typedef struct emulated_backend {
    int threads;
    ld_engine_config cfg;       /* owned copy */
    const ld_graph *graph;      /* borrowed, set by prepare */
    ld_precision_plan *plan;    /* owned */
    emu_node *nodes;            /* owned, per node */
    value_state *values;        /* owned, per value */
    bool in_nan, in_inf;        /* the node being run: a float input holds NaN / +-inf */
    void *show_buf;             /* owned; what observers see of a converted tensor */
    size_t show_cap;
    int shown_value;            /* the value whose float16 bits show_buf holds from its
                                   rounding (round_output), -1 for none */
    bool observing;             /* the run has an observer */
    ld_exec *exec;              /* owned */
    struct observe_wrap *wrap;  /* owned; the stepwise run's observer (see emu_observe) */
} emulated_backend;

/* --- precisions and conversions ------------------------------------------------------- */

static ld_precision precision_of_type(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT16 ? LD_PRECISION_FP16
           : d == LD_DTYPE_BFLOAT16 ? LD_PRECISION_BF16 : LD_PRECISION_FP32;
}

/* Every value of precision q is a value of precision p (subnormals included). */
static bool precision_within(ld_precision q, ld_precision p)
{
    return q == p || p == LD_PRECISION_FP32 ||
           (p == LD_PRECISION_TF32 && (q == LD_PRECISION_FP16 || q == LD_PRECISION_BF16));
}

/* An input stored as `stored` already holds values of precision p: rounding
 * it would change nothing. With flush on, everything is rounded again (a
 * subnormal may need flushing). */
static bool input_exact(const value_state *vs, ld_dtype stored, ld_precision p,
                        const ld_round_options *o)
{
    if (o->flush_denormals)
        return false;
    if (stored == LD_DTYPE_FLOAT16)
        return precision_within(LD_PRECISION_FP16, p);
    if (stored == LD_DTYPE_BFLOAT16)
        return precision_within(LD_PRECISION_BF16, p);
    return stored == LD_DTYPE_FLOAT32 &&
           (p == LD_PRECISION_FP32 || (vs && vs->exact >= 0 &&
                                       precision_within((ld_precision)vs->exact, p)));
}

/* A scratch float32 tensor with the half tensor src's values. */
static ld_status widened(ld_kernel_ctx *ctx, const ld_tensor *src, ld_tensor **out)
{
    ld_status st = ld_exec_scratch_tensor(ctx, src->name, LD_DTYPE_FLOAT32, &src->shape, out);
    if (st != LD_OK)
        return st;
    if (src->dtype == LD_DTYPE_FLOAT16)
        ld_convert_fp16_to_fp32(src->data, (*out)->data, (size_t)src->count);
    else
        ld_convert_bf16_to_fp32(src->data, (*out)->data, (size_t)src->count);
    return LD_OK;
}

/* A scratch float32 tensor holding the float tensor src rounded to p (o's
 * mode and flush); the rounding is added to *t. */
static ld_status round_tensor(ld_kernel_ctx *ctx, const ld_tensor *src, ld_precision p,
                              const ld_round_options *o, ld_tensor **out, ld_emu_tally *t)
{
    ld_tensor *r = NULL;
    ld_status st = src->dtype == LD_DTYPE_FLOAT32
                       ? ld_exec_scratch_tensor(ctx, src->name, LD_DTYPE_FLOAT32, &src->shape, &r)
                       : widened(ctx, src, &r);
    if (st != LD_OK)
        return st;
    const float *from = src->dtype == LD_DTYPE_FLOAT32 ? src->data : r->data;
    ld_emu_round_counted(from, r->data, r->count, p, o, ctx->threads, t);
    *out = r;
    return LD_OK;
}

/* Replaces output j by a tensor of dtype `to` holding `values` (float32,
 * exact in `to`). */
static ld_status replace_with(ld_kernel_ctx *ctx, int j, ld_dtype to, const float *values)
{
    ld_tensor *fresh = NULL;
    const ld_tensor *old = NULL;
    ld_status st = ld_exec_replace_output(ctx, j, to, &fresh, &old);
    if (st != LD_OK)
        return st;
    size_t n = (size_t)fresh->count;
    if (to == LD_DTYPE_FLOAT16)
        ld_convert_fp32_to_fp16(values, fresh->data, n);
    else if (to == LD_DTYPE_BFLOAT16)
        ld_convert_fp32_to_bf16(values, fresh->data, n);
    else if (n)
        memcpy(fresh->data, values, n * sizeof(float));
    return LD_OK;
}

/* Output j rounded to precision p and stored as `to` (float32 or p's type). */
static ld_status convert_output(ld_kernel_ctx *ctx, int j, ld_precision p, ld_dtype to,
                                const ld_round_options *o, ld_emu_tally *t)
{
    ld_tensor *r = NULL;
    ld_status st = round_tensor(ctx, ctx->outputs[j], p, o, &r, t);
    return st == LD_OK ? replace_with(ctx, j, to, r->data) : st;
}

/* --- which inputs --------------------------------------------------------------------- */

static bool op_named(const ld_node *node, const char *op)
{
    return ld_engine_default_domain(node->domain) && strcmp(node->op_type, op) == 0;
}

/* Inputs that say how to compute rather than what: output sizes, thresholds,
 * quantization scales, a target type. An engine keeps them in fp32 (on the
 * host, or as build-time constants); rounding Resize's scales to fp16 could
 * change the output shape. */
static bool is_parameter_input(const ld_node *node, int j)
{
    return (op_named(node, "Resize") && (j == 1 || j == 2)) ||
           (op_named(node, "Upsample") && j == 1) || op_named(node, "Range") ||
           (op_named(node, "NonMaxSuppression") && j >= 2) ||
           ((op_named(node, "QuantizeLinear") || op_named(node, "DequantizeLinear")) && j >= 1) ||
           (op_named(node, "CastLike") && j == 1);
}

/* Initializers and Constant outputs: the same values every run. */
static bool is_constant_value(const ld_graph *g, int v)
{
    const ld_value *val = &g->values[v];
    if (val->kind == LD_VALUE_INITIALIZER)
        return true;
    return val->producer >= 0 && g->nodes[val->producer].n_inputs == 0 &&
           op_named(&g->nodes[val->producer], "Constant");
}

/* --- hooks ---------------------------------------------------------------------------- */

static ld_status emu_layer_numerics(void *user, const ld_node *node, ld_layer_numerics *out,
                                    ld_error *err)
{
    (void)err;
    emulated_backend *b = user;
    ld_precision_plan_numerics(b->plan, &b->cfg, node->index, out);
    return LD_OK;
}

/* NaN / inf in a value as it is stored this run (scanned once). */
static void value_nonfinite(emulated_backend *b, ld_kernel_ctx *ctx, int v, const ld_tensor *t,
                            bool *nan, bool *inf)
{
    unsigned char *f = &b->values[v].flags;
    if (!(*f & VALUE_KNOWN)) {
        ld_emu_scan_nonfinite(t, ctx->threads, nan, inf);
        *f = (unsigned char)(VALUE_KNOWN | (*nan ? VALUE_NAN : 0) | (*inf ? VALUE_INF : 0));
    }
    *nan = *f & VALUE_NAN;
    *inf = *f & VALUE_INF;
}

/* Rounds (or widens) a constant input once and keeps it for later runs. */
static ld_status cached(ld_kernel_ctx *ctx, cached_input *c, const ld_tensor *in, bool exact)
{
    if (c->ready)
        return LD_OK;
    ld_tensor *r = NULL;
    ld_status st = LD_OK;
    if (!exact)
        st = round_tensor(ctx, in, ctx->numerics->precision, &ctx->numerics->round, &r,
                          &c->events);
    else if (in->dtype != LD_DTYPE_FLOAT32)
        st = widened(ctx, in, &r);
    if (st == LD_OK && r)
        st = ld_tensor_clone(&c->tensor, r, NULL, ctx->err);
    if (st != LD_OK)
        return st;
    ld_emu_scan_nonfinite(c->tensor ? c->tensor : in, ctx->threads, &c->has_nan, &c->has_inf);
    c->ready = true;
    return LD_OK;
}

/* Input j as the layer computes on it: float32, exact in its precision. */
static ld_status round_input(emulated_backend *b, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                             int j, bool widen)
{
    const ld_node *node = ctx->node;
    ld_precision p = ctx->numerics->precision;
    const ld_round_options *o = &ctx->numerics->round;
    int v = node->inputs[j];
    bool exact = input_exact(&b->values[v], ld_exec_input_dtype(ctx, j), p, o);
    bool nan = false, inf = false;
    ld_tensor *r = NULL;
    ld_status st = LD_OK;
    if (is_constant_value(ctx->graph, v)) {
        cached_input *c = &b->nodes[node->index].cache[j];
        st = cached(ctx, c, inputs[j], exact);
        if (st != LD_OK)
            return st;
        if (c->tensor)
            inputs[j] = c->tensor;
        ctx->counters->overflows += c->events.overflows;
        ctx->counters->underflows += c->events.underflows;
        nan = c->has_nan, inf = c->has_inf;
    } else if (!exact) {
        ld_emu_tally t = {0};
        st = round_tensor(ctx, inputs[j], p, o, &r, &t);
        if (st != LD_OK)
            return st;
        inputs[j] = r;
        ctx->counters->overflows += t.overflows;
        ctx->counters->underflows += t.underflows;
        nan = t.src_nans > 0, inf = t.src_infs + t.overflows > 0;
    } else if (inputs[j]->dtype != LD_DTYPE_FLOAT32) {
        st = widened(ctx, inputs[j], &r); /* a kernel that moves data: one float type */
        if (st != LD_OK)
            return st;
        inputs[j] = r;
    }
    if (widen && !is_constant_value(ctx->graph, v) && exact)
        value_nonfinite(b, ctx, v, inputs[j], &nan, &inf);
    b->in_nan |= nan;
    b->in_inf |= inf;
    return LD_OK;
}

static ld_status emu_before_compute(void *user, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                                    ld_error *err)
{
    (void)err;
    emulated_backend *b = user;
    const ld_node *node = ctx->node;
    b->in_nan = b->in_inf = false;
    if (!b->plan->layers[node->index].emulated)
        return LD_OK;
    bool widen = b->nodes[node->index].kernel_flags & LD_KERNEL_WIDEN_HALF;
    for (int j = 0; j < node->n_inputs; j++) {
        if (!inputs[j] || !ld_engine_is_rounded_type(inputs[j]->dtype) ||
            is_parameter_input(node, j))
            continue;
        ld_status st = round_input(b, ctx, inputs, j, widen);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

/* The type a graph output leaves the engine in: the float type the model
 * declares for it, unless a --layer-output-types rule set the layer's type
 * (see delivered_type in engine.h). UNDEFINED: as rounded. */
static ld_dtype delivered_type(const ld_graph *g, const ld_layer_plan *lp, int v)
{
    const ld_value *val = &g->values[v];
    if (!val->is_graph_output || lp->output_reason == LD_PLAN_PATTERN ||
        lp->output_type == LD_DTYPE_UNDEFINED || val->type.kind != LD_TYPE_TENSOR ||
        !ld_engine_is_rounded_type(val->type.dtype))
        return LD_DTYPE_UNDEFINED;
    return val->type.dtype;
}

static bool has_parameter_inputs(const ld_node *node)
{
    for (int j = 0; j < node->n_inputs; j++)
        if (node->inputs[j] >= 0 && is_parameter_input(node, j))
            return true;
    return false;
}

/* show_buf with room for a float16/bfloat16 copy of count elements. */
static ld_status show_reserve(emulated_backend *b, int64_t count, const char *name, ld_error *err)
{
    size_t need = (size_t)count * 2 + 1;
    if (need <= b->show_cap)
        return LD_OK;
    void *grown = realloc(b->show_buf, need);
    if (!grown)
        return ld_error_set(err, LD_ERR_NOMEM, "tensor '%s': cannot allocate %zu bytes", name,
                            need);
    b->show_buf = grown;
    b->show_cap = need;
    b->shown_value = -1;
    return LD_OK;
}

/* Rounds output j to float16 (the layer's output type, observed as float16)
 * and keeps the float16 bits for the observer in the same pass (see
 * emu_observe). False when that does not apply: the caller rounds. */
static bool round_and_show(emulated_backend *b, ld_kernel_ctx *ctx, int j, ld_dtype to,
                           const ld_round_options *o, ld_emu_tally *t)
{
    ld_tensor *out = ctx->outputs[j];
    ld_error unused;
    if (!b->observing || to != LD_DTYPE_FLOAT16 || o->flush_denormals ||
        show_reserve(b, out->count, out->name, &unused) != LD_OK ||
        !ld_emu_round_fp16_keep(out->data, out->data, b->show_buf, out->count, ctx->threads, t))
        return false;
    b->shown_value = ctx->node->outputs[j];
    return true;
}

/* Output j rounded to the layer's output type `to`; *exact receives the
 * precision its float32 values are exact in (-1: none known). */
static ld_status round_output(emulated_backend *b, ld_kernel_ctx *ctx, int j, ld_dtype to,
                              bool fresh, ld_emu_tally *t, int *exact)
{
    const ld_layer_plan *lp = &b->plan->layers[ctx->node->index];
    const ld_round_options *o = &ctx->numerics->round;
    ld_tensor *out = ctx->outputs[j];
    ld_precision tp = precision_of_type(to);
    *exact = -1;
    if (out->dtype != LD_DTYPE_FLOAT32) { /* a half tensor the kernel made (Cast) */
        if (out->dtype == to)
            return LD_OK;
        *exact = (int)tp;
        return convert_output(ctx, j, tp, LD_DTYPE_FLOAT32, o, t);
    }
    /* A data-moving kernel's output holds values of the layer precision,
     * which its inputs were rounded to. */
    if (!fresh && !o->flush_denormals && !has_parameter_inputs(ctx->node) &&
        precision_within(lp->precision, tp)) {
        *exact = (int)lp->precision;
        return LD_OK;
    }
    if (!round_and_show(b, ctx, j, to, o, t))
        ld_emu_round_counted(out->data, out->data, out->count, tp, o, ctx->threads, t);
    *exact = (int)tp;
    return LD_OK;
}

/* A graph output converted to the type the model declares for it. */
static ld_status deliver(emulated_backend *b, ld_kernel_ctx *ctx, int j, ld_dtype d,
                         ld_layer_counters *counters)
{
    ld_tensor *out = ctx->outputs[j];
    value_state *vs = &b->values[ctx->node->outputs[j]];
    vs->show_as = LD_DTYPE_UNDEFINED;
    if (out->dtype == d)
        return LD_OK;
    ld_emu_tally t = {0}; /* an exact widening, or counted like an input */
    ld_status st = convert_output(ctx, j, precision_of_type(d), d, &ctx->numerics->round, &t);
    counters->overflows += t.overflows;
    counters->underflows += t.underflows;
    vs->flags = 0; /* narrowing may have made infinities */
    vs->exact = -1;
    return st;
}

static ld_status emu_after_compute(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                                   ld_layer_counters *counters, ld_error *err)
{
    (void)err;
    emulated_backend *b = user;
    const ld_node *node = ctx->node;
    const ld_layer_plan *lp = &b->plan->layers[node->index];
    bool widen = b->nodes[node->index].kernel_flags & LD_KERNEL_WIDEN_HALF;
    ld_dtype to = lp->output_type;
    counters->present = true;
    if (!lp->emulated)
        return LD_OK;
    for (int j = 0; j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (!outputs[j] || v < 0 || !ld_engine_is_rounded_type(outputs[j]->dtype) ||
            to == LD_DTYPE_UNDEFINED)
            continue;
        value_state *vs = &b->values[v];
        ld_emu_tally t = {0};
        bool fresh = widen && outputs[j]->dtype == LD_DTYPE_FLOAT32;
        ld_status st = round_output(b, ctx, j, to, fresh, &t, &vs->exact);
        if (st != LD_OK)
            return st;
        counters->overflows += t.overflows + (fresh && !b->in_inf ? t.src_infs : 0);
        counters->nans_created += fresh && !b->in_nan ? t.src_nans : 0;
        counters->underflows += t.underflows;
        counters->subnormals += t.subnormals;
        if (fresh)
            vs->flags = (unsigned char)(VALUE_KNOWN | (t.src_nans ? VALUE_NAN : 0) |
                                        (t.src_infs + t.overflows ? VALUE_INF : 0));
        vs->show_as = outputs[j]->dtype == LD_DTYPE_FLOAT32 && to != LD_DTYPE_FLOAT32
                          ? to : LD_DTYPE_UNDEFINED;
        ld_dtype d = delivered_type(ctx->graph, lp, v);
        if (d != LD_DTYPE_UNDEFINED) {
            st = deliver(b, ctx, j, d, counters);
            if (st != LD_OK)
                return st;
        }
    }
    return LD_OK;
}

/* --- what observers see ------------------------------------------------------------- */

typedef struct observe_wrap {
    emulated_backend *b;
    ld_tensor_observer inner;
    void *user;
} observe_wrap;

/* The wrapped observer for exec, or NULL when there is none. */
static ld_tensor_observer wrapped(observe_wrap *w, emulated_backend *b, ld_tensor_observer inner,
                                  void *user);

/* A float32 tensor holding half values, as a tensor of that half type
 * (exact). *out is new (its data borrowed from b->show_buf). */
static ld_status show_tensor(emulated_backend *b, const ld_tensor *t, int v, ld_dtype as,
                             ld_tensor **out, ld_error *err)
{
    bool kept = as == LD_DTYPE_FLOAT16 && v == b->shown_value; /* bits from the rounding */
    b->shown_value = -1;
    ld_status st = show_reserve(b, t->count, t->name, err);
    if (st == LD_OK)
        st = ld_tensor_wrap(out, t->name, as, &t->shape, b->show_buf, err);
    if (st != LD_OK || kept)
        return st;
    if (as == LD_DTYPE_FLOAT16)
        ld_convert_fp32_to_fp16(t->data, b->show_buf, (size_t)t->count);
    else
        ld_convert_fp32_to_bf16(t->data, b->show_buf, (size_t)t->count);
    return LD_OK;
}

static ld_status emu_observe(void *user, const ld_tensor_event *ev, ld_error *err)
{
    observe_wrap *w = user;
    const value_state *vs = &w->b->values[ev->value];
    if (!ev->node || vs->show_as == LD_DTYPE_UNDEFINED || ev->tensor->dtype != LD_DTYPE_FLOAT32)
        return w->inner(w->user, ev, err);
    ld_tensor *shown = NULL;
    ld_status st = show_tensor(w->b, ev->tensor, ev->value, vs->show_as, &shown, err);
    if (st != LD_OK)
        return st;
    ld_tensor_event copy = *ev;
    copy.tensor = shown;
    st = w->inner(w->user, &copy, err);
    ld_tensor_destroy(shown);
    return st;
}

/* --- isolated execution: one layer on the reference's inputs ------------------------- */

/* A float32 copy of a float32/float16/bfloat16 tensor (new). */
static ld_status float32_copy(const ld_tensor *src, ld_tensor **out, ld_error *err)
{
    ld_status st = ld_tensor_create(out, src->name, LD_DTYPE_FLOAT32, &src->shape, err);
    if (st != LD_OK)
        return st;
    size_t n = (size_t)src->count;
    if (src->dtype == LD_DTYPE_FLOAT16)
        ld_convert_fp16_to_fp32(src->data, (*out)->data, n);
    else if (src->dtype == LD_DTYPE_BFLOAT16)
        ld_convert_bf16_to_fp32(src->data, (*out)->data, n);
    else if (n)
        memcpy((*out)->data, src->data, n * sizeof(float));
    return LD_OK;
}

/* The foreign tensor f for value v as this engine holds v: in its stored
 * type (own->dtype) and, for a float32 tensor that holds values of a
 * narrower precision, rounded to that precision with the producer's
 * rounding, exactly as the producing layer would have. *out is f itself or
 * a new tensor in *made (freed by the caller); *exact receives what the
 * value state must say about it. */
static ld_status held_as(emulated_backend *b, int v, const ld_tensor *own, const ld_tensor *f,
                         const ld_tensor **out, ld_tensor **made, int *exact, ld_error *err)
{
    int p = b->values[v].exact; /* what own's float32 values are exact in, -1 unknown */
    *out = f;
    *made = NULL;
    *exact = -1;
    if (!own || !ld_engine_is_rounded_type(f->dtype) || !ld_engine_is_rounded_type(own->dtype))
        return LD_OK; /* integers, float64: used as they are */
    bool own_wide = own->dtype == LD_DTYPE_FLOAT32;
    if (own_wide && f->dtype == LD_DTYPE_FLOAT32 && (p < 0 || p == LD_PRECISION_FP32)) {
        *exact = p;
        return LD_OK;
    }
    if (!own_wide && f->dtype == own->dtype)
        return LD_OK;
    ld_tensor *t = NULL;
    ld_status st = float32_copy(f, &t, err);
    if (st != LD_OK)
        return st;
    if (own_wide) {
        if (p >= 0 && p != LD_PRECISION_FP32) {
            int producer = b->graph->values[v].producer;
            ld_round_options o = {0};
            if (producer >= 0)
                o = ld_exec_node_numerics(b->exec, producer)->round;
            ld_round_array(t->data, (size_t)t->count, (ld_precision)p, &o);
        }
        *exact = p >= 0 ? p : (int)precision_of_type(f->dtype); /* f is a half type here */
        *out = *made = t;
        return LD_OK;
    }
    ld_tensor *narrow = NULL; /* own is float16 or bfloat16 */
    st = ld_tensor_create(&narrow, f->name, own->dtype, &f->shape, err);
    if (st == LD_OK && own->dtype == LD_DTYPE_FLOAT16)
        ld_convert_fp32_to_fp16(t->data, narrow->data, (size_t)t->count);
    else if (st == LD_OK)
        ld_convert_fp32_to_bf16(t->data, narrow->data, (size_t)t->count);
    ld_tensor_destroy(t);
    if (st == LD_OK)
        *out = *made = narrow;
    return st;
}

/* Runs node i on the caller's inputs converted to what this engine holds
 * for them. The value states of the node's inputs and outputs are swapped
 * for the call (the foreign tensors have their own NaN/inf and exactness)
 * and restored after it, so the lockstep run goes on undisturbed. */
static ld_status run_isolated(emulated_backend *b, int i, const ld_tensor *const *inputs,
                              ld_tensor_observer observer, void *user, ld_error *err)
{
    const ld_node *node = &b->graph->nodes[i];
    int n_in = node->n_inputs, n_saved = n_in + node->n_outputs;
    const ld_tensor **use = calloc((size_t)n_in + 1, sizeof *use);
    ld_tensor **made = calloc((size_t)n_in + 1, sizeof *made);
    value_state *saved = calloc((size_t)n_saved + 1, sizeof *saved);
    ld_status st = use && made && saved ? LD_OK
                                        : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int k = 0; st == LD_OK && k < n_saved; k++) {
        int v = k < n_in ? node->inputs[k] : node->outputs[k - n_in];
        if (v >= 0)
            saved[k] = b->values[v];
    }
    for (int j = 0; st == LD_OK && j < n_in; j++) {
        int v = node->inputs[j], ex = -1;
        if (v < 0 || !inputs || !inputs[j])
            continue;
        st = held_as(b, v, ld_exec_value(b->exec, v), inputs[j], &use[j], &made[j], &ex, err);
        if (st == LD_OK)
            b->values[v] = (value_state){.exact = ex, .show_as = saved[j].show_as};
    }
    observe_wrap wrap;
    if (st == LD_OK)
        st = ld_exec_run_node_on(b->exec, i, use, wrapped(&wrap, b, observer, user), &wrap, err);
    for (int k = n_saved - 1; saved && k >= 0; k--) { /* reverse: repeated values end right */
        int v = k < n_in ? node->inputs[k] : node->outputs[k - n_in];
        if (v >= 0)
            b->values[v] = saved[k];
    }
    for (int j = 0; made && j < n_in; j++)
        ld_tensor_destroy(made[j]);
    free(use);
    free(made);
    free(saved);
    return st;
}

/* --- vtable ---------------------------------------------------------------------------- */

static void free_nodes(emulated_backend *b)
{
    if (!b->nodes)
        return;
    for (int i = 0; i < b->graph->n_nodes; i++) {
        cached_input *c = b->nodes[i].cache;
        for (int j = 0; c && j < b->graph->nodes[i].n_inputs; j++)
            ld_tensor_destroy(c[j].tensor);
        free(c);
    }
    free(b->nodes);
    b->nodes = NULL;
}

static void release_prepared(emulated_backend *b)
{
    ld_exec_destroy(b->exec);
    b->exec = NULL;
    free_nodes(b);
    ld_precision_plan_destroy(b->plan);
    b->plan = NULL;
    free(b->values);
    b->values = NULL;
    free(b->show_buf);
    b->show_buf = NULL;
    b->show_cap = 0;
    free(b->wrap);
    b->wrap = NULL;
}

static ld_status emulated_create(void **state, const ld_backend_config *cfg, ld_error *err)
{
    if (cfg && cfg->n_options > 0)
        return ld_error_set(err, LD_ERR_USAGE, "backend 'emulated' takes no options (got '%s'); "
                            "its precision comes from the engine flags (--fp16, ...)",
                            cfg->options[0]);
    emulated_backend *b = calloc(1, sizeof *b);
    if (!b)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    b->threads = cfg ? cfg->threads : 0;
    b->shown_value = -1;
    ld_status st = LD_OK;
    if (cfg && cfg->engine)
        st = ld_engine_config_copy(&b->cfg, cfg->engine, err);
    else
        ld_engine_config_init(&b->cfg);
    if (st == LD_OK)
        st = ld_engine_config_check(&b->cfg, err);
    if (st != LD_OK) {
        ld_engine_config_clear(&b->cfg);
        free(b);
        return st;
    }
    *state = b;
    return LD_OK;
}

static ld_status prepare_nodes(emulated_backend *b, ld_error *err)
{
    const ld_graph *g = b->graph;
    b->nodes = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *b->nodes);
    b->values = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *b->values);
    if (!b->nodes || !b->values)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const ld_node *node = &g->nodes[i];
        const ld_kernel *k = ld_kernel_find(node->domain, node->op_type, node->opset);
        b->nodes[i].kernel_flags = k ? k->flags : 0; /* no kernel: ld_exec_create says so */
        b->nodes[i].cache = calloc((size_t)node->n_inputs + 1, sizeof *b->nodes[i].cache);
        if (!b->nodes[i].cache)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    return LD_OK;
}

static ld_status emulated_prepare(void *state, const ld_graph *g, const ld_shape *input_shapes,
                                  ld_error *err)
{
    (void)input_shapes; /* shapes are inferred at run time from the actual inputs */
    emulated_backend *b = state;
    release_prepared(b);
    b->graph = g;
    ld_status st = ld_precision_plan_build(g, &b->cfg, &b->plan, err);
    if (st == LD_OK)
        st = prepare_nodes(b, err);
    if (st == LD_OK && !(b->wrap = calloc(1, sizeof *b->wrap)))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK) {
        ld_exec_hooks hooks = {b, emu_layer_numerics, emu_before_compute, emu_after_compute};
        ld_exec_config cfg = {.threads = b->threads, .hooks = &hooks};
        st = ld_exec_create(&b->exec, g, &cfg, err);
    }
    if (st != LD_OK)
        release_prepared(b);
    return st;
}

static void reset_values(emulated_backend *b)
{
    for (int v = 0; v < b->graph->n_values; v++)
        b->values[v] = (value_state){.exact = -1, .show_as = LD_DTYPE_UNDEFINED};
}

static ld_tensor_observer wrapped(observe_wrap *w, emulated_backend *b, ld_tensor_observer inner,
                                  void *user)
{
    *w = (observe_wrap){b, inner, user};
    b->observing = inner != NULL;
    b->shown_value = -1;
    return inner ? emu_observe : NULL;
}

static ld_status emulated_run(void *state, const ld_tensor *const *inputs,
                              ld_tensor_observer observer, void *user, ld_error *err)
{
    emulated_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': run before prepare");
    reset_values(b);
    observe_wrap wrap;
    return ld_exec_run(b->exec, inputs, wrapped(&wrap, b, observer, user), &wrap, err);
}

/* --- stepwise execution ---------------------------------------------------------------- */

static ld_status emulated_begin(void *state, const ld_tensor *const *inputs,
                                ld_tensor_observer observer, void *user, ld_error *err)
{
    emulated_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': begin before prepare");
    reset_values(b);
    return ld_exec_begin(b->exec, inputs, wrapped(b->wrap, b, observer, user), b->wrap, err);
}

static ld_status emulated_step(void *state, int node_index, ld_tensor_observer observer,
                               void *user, ld_error *err)
{
    emulated_backend *b = state;
    return ld_exec_step(b->exec, node_index, wrapped(b->wrap, b, observer, user), b->wrap, err);
}

static const ld_tensor *emulated_value(void *state, int value_index)
{
    emulated_backend *b = state;
    return ld_exec_value(b->exec, value_index);
}

static void emulated_finish_step(void *state, int node_index)
{
    emulated_backend *b = state;
    ld_exec_finish_step(b->exec, node_index);
}

static void emulated_end(void *state)
{
    emulated_backend *b = state;
    if (b->exec)
        ld_exec_end(b->exec);
}

static ld_status emulated_run_node_on(void *state, int node_index,
                                      const ld_tensor *const *inputs,
                                      ld_tensor_observer observer, void *user, ld_error *err)
{
    emulated_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': run before prepare");
    if (node_index < 0 || node_index >= b->graph->n_nodes)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': no node %d", node_index);
    return run_isolated(b, node_index, inputs, observer, user, err);
}

static void emulated_destroy(void *state)
{
    emulated_backend *b = state;
    if (!b)
        return;
    release_prepared(b);
    ld_engine_config_clear(&b->cfg);
    free(b);
}

static ld_precision emulated_node_precision(void *state, int node_index)
{
    emulated_backend *b = state;
    if (!b->plan || node_index < 0 || node_index >= b->plan->n_layers)
        return LD_PRECISION_FP32;
    return b->plan->layers[node_index].precision;
}

static ld_status emulated_profile(void *state, ld_backend_profile *out, ld_error *err)
{
    emulated_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': profile before prepare");
    *out = (ld_backend_profile){b->graph->n_nodes, ld_exec_profile(b->exec), ld_blas_describe()};
    return LD_OK;
}

const ld_precision_plan *ld_emulated_plan(void *state)
{
    emulated_backend *b = state;
    return b ? b->plan : NULL;
}

const ld_backend_vtable ld_backend_emulated = {
    .abi_version = LD_BACKEND_ABI_VERSION,
    .name = "emulated",
    .description = "reduced-precision engine emulation (--fp16, --bf16, TF32, per-layer "
                   "precision controls), bit-exact on the CPU",
    .create = emulated_create,
    .prepare = emulated_prepare,
    .run = emulated_run,
    .destroy = emulated_destroy,
    .node_precision = emulated_node_precision,
    .profile = emulated_profile,
    .begin = emulated_begin,
    .step = emulated_step,
    .value = emulated_value,
    .finish_step = emulated_finish_step,
    .end = emulated_end,
    .run_node_on = emulated_run_node_on,
};
