/* layerdiff — the emulated backend's output side (see emulated_internal.h):
 * after compute, a float layer's float outputs are rounded to the layer's
 * output type and the rounding is counted; graph outputs are converted to
 * the type the model declares; observers see each tensor in the type the
 * layer outputs.
 *
 * The rounding pass reads back every output the kernel has just written:
 * on PaddleOCR det that is 170M elements per run, 20% of an emulated --fp16
 * run. Kernels that write their output in blocks (the elementwise drivers)
 * round each block themselves while it is in cache, through
 * ld_kernel_ctx.round_block (ld_emu_offer_rounding below); the values and
 * counters are those of the pass, which then skips that output. */
#include <stdlib.h>
#include <string.h>

#include "backends/emulated_internal.h"
#include "backends/engine_internal.h"

/* --- what observers see: the buffer -------------------------------------------------- */

/* show_buf with room for a float16/bfloat16 copy of count elements. */
static ld_status show_reserve(ld_emulated_backend *b, int64_t count, const char *name,
                              ld_error *err)
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

/* Whether the observer reads value v's data: there is one, and it reads
 * every layer's, or v is a graph output (ld_backend_config.
 * observe_outputs_only, during `run` only: stepwise observers read all).
 * Else the float16 copy observers would see is not
 * made: the event shows the value's type and shape with data NULL. */
static bool shows_data(const ld_emulated_backend *b, int v)
{
    return b->observing && (!b->outputs_only_run || v < 0 || b->graph->values[v].is_graph_output);
}

/* --- rounding in the kernel ------------------------------------------------------------ */

static void add_atomic(int64_t *to, int64_t n)
{
    if (n)
        __atomic_fetch_add(to, n, __ATOMIC_RELAXED);
}

/* ld_kernel_ctx.round_block: rounds a block of output j in place, as
 * round_output would, and counts it; for output 0 observed as float16, the
 * float16 bits go to show_buf at the block's offset when it has room (it
 * grows after the node when it had not). Called from the kernel's threads. */
static void emu_round_block(void *user, int j, float *block, int64_t n)
{
    ld_emulated_backend *b = user;
    ld_emu_fused *f = &b->fused;
    const ld_tensor *out = f->ctx->outputs[j];
    int64_t at = block - (const float *)out->data;
    ld_fp16 *half = NULL;
    if (j == 0 && f->keep && (size_t)(at + n) * 2 <= b->show_cap)
        half = (ld_fp16 *)b->show_buf + at;
    ld_emu_tally t = {0};
    ld_emu_round_block(block, block, half, n, f->precision, &f->round, &t);
    ld_emu_tally *sum = &f->tally[j];
    add_atomic(&sum->overflows, t.overflows);
    add_atomic(&sum->underflows, t.underflows);
    add_atomic(&sum->subnormals, t.subnormals);
    add_atomic(&sum->src_infs, t.src_infs);
    add_atomic(&sum->src_nans, t.src_nans);
    if (half)
        add_atomic(&f->kept, n);
}

void ld_emu_offer_rounding(ld_emulated_backend *b, ld_kernel_ctx *ctx)
{
    const ld_node *node = ctx->node;
    const ld_layer_plan *lp = &b->plan->layers[node->index];
    ld_emu_fused *f = &b->fused;
    /* Only where after_compute rounds a float32 output as freshly computed:
     * an emulated layer, a computing (WIDEN_HALF) kernel, a float type out. */
    if (b->unfused || !lp->emulated ||
        !(b->nodes[node->index].kernel_flags & LD_KERNEL_WIDEN_HALF) ||
        !ld_engine_is_rounded_type(lp->output_type) || node->n_outputs > f->max_outputs)
        return;
    f->ctx = ctx;
    f->precision = ld_emu_precision_of_type(lp->output_type);
    f->round = ctx->numerics->round;
    f->keep = shows_data(b, node->outputs[0]) && lp->output_type == LD_DTYPE_FLOAT16 &&
              !f->round.flush_denormals;
    f->kept = 0;
    memset(f->tally, 0, (size_t)node->n_outputs * sizeof *f->tally);
    if (f->keep)
        b->shown_value = -1; /* the kernel writes over show_buf */
    ctx->round_block = emu_round_block;
    ctx->round_user = b;
    ctx->rounded_outputs = 0;
    /* float16 without flushing: a normal float16 or a zero rounds to itself
     * and counts nothing (count8 in emulated_count_avx2.c), so the kernel may
     * round those values itself (kernel.h), and store their float16 bits in
     * show_buf as the hook does (an output larger than show_buf, in a first
     * run, gets no bits: show_tensor converts it). */
    ctx->round_fp16_inline = f->precision == LD_PRECISION_FP16 && !f->round.flush_denormals;
    ctx->round_fp16_bits = f->keep ? (uint16_t *)b->show_buf : NULL;
    ctx->round_fp16_bits_count = f->keep ? (int64_t)(b->show_cap / 2) : 0;
}

/* Output j when the kernel rounded it through round_block: its counts and
 * precision, and the float16 bits kept for the observer. False when it did
 * not: the caller rounds. */
static bool rounded_by_kernel(ld_emulated_backend *b, ld_kernel_ctx *ctx, int j, bool fresh,
                              ld_emu_tally *t, int *exact)
{
    ld_emu_fused *f = &b->fused;
    ld_tensor *out = ctx->outputs[j];
    if (f->ctx != ctx || !fresh || j >= 32 || !(ctx->rounded_outputs & (1u << j)))
        return false;
    *t = f->tally[j];
    *exact = (int)f->precision;
    if (j == 0 && f->keep) {
        ld_error unused;
        /* every element's bits: from the hook, or from a kernel that rounded
         * some itself with room for all of them in round_fp16_bits */
        if (f->kept == out->count ||
            (ctx->round_fp16_bits && out->count <= ctx->round_fp16_bits_count))
            b->shown_value = ctx->node->outputs[0];
        else /* the next run keeps them */
            (void)show_reserve(b, out->count, out->name, &unused);
    }
    return true;
}

/* --- rounding after compute ---------------------------------------------------------- */

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
        if (node->inputs[j] >= 0 && ld_emu_is_parameter_input(node, j))
            return true;
    return false;
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
    ld_status st = ld_emu_round_tensor(ctx, ctx->outputs[j], p, o, &r, t);
    return st == LD_OK ? replace_with(ctx, j, to, r->data) : st;
}

/* Rounds output j to float16 (the layer's output type, observed as float16)
 * and keeps the float16 bits for the observer in the same pass (see
 * emu_observe). False when that does not apply: the caller rounds. */
static bool round_and_show(ld_emulated_backend *b, ld_kernel_ctx *ctx, int j, ld_dtype to,
                           const ld_round_options *o, ld_emu_tally *t)
{
    ld_tensor *out = ctx->outputs[j];
    ld_error unused;
    if (!shows_data(b, ctx->node->outputs[j]) || to != LD_DTYPE_FLOAT16 || o->flush_denormals ||
        show_reserve(b, out->count, out->name, &unused) != LD_OK ||
        !ld_emu_round_fp16_keep(out->data, out->data, b->show_buf, out->count, ctx->threads, t))
        return false;
    b->shown_value = ctx->node->outputs[j];
    return true;
}

/* Output j rounded to the layer's output type `to`; *exact receives the
 * precision its float32 values are exact in (-1: none known). */
static ld_status round_output(ld_emulated_backend *b, ld_kernel_ctx *ctx, int j, ld_dtype to,
                              bool fresh, ld_emu_tally *t, int *exact)
{
    const ld_layer_plan *lp = &b->plan->layers[ctx->node->index];
    const ld_round_options *o = &ctx->numerics->round;
    ld_tensor *out = ctx->outputs[j];
    ld_precision tp = ld_emu_precision_of_type(to);
    *exact = -1;
    if (out->dtype != LD_DTYPE_FLOAT32) { /* a half tensor the kernel made (Cast) */
        if (out->dtype == to)
            return LD_OK;
        *exact = (int)tp;
        return convert_output(ctx, j, tp, LD_DTYPE_FLOAT32, o, t);
    }
    if (rounded_by_kernel(b, ctx, j, fresh, t, exact))
        return LD_OK;
    /* A data-moving kernel's output holds values of the layer precision,
     * which its inputs were rounded to. */
    if (!fresh && !o->flush_denormals && !has_parameter_inputs(ctx->node) &&
        ld_emu_precision_within(lp->precision, tp)) {
        *exact = (int)lp->precision;
        return LD_OK;
    }
    if (!round_and_show(b, ctx, j, to, o, t))
        ld_emu_round_counted(out->data, out->data, out->count, tp, o, ctx->threads, t);
    *exact = (int)tp;
    return LD_OK;
}

/* A graph output converted to the type the model declares for it. */
static ld_status deliver(ld_emulated_backend *b, ld_kernel_ctx *ctx, int j, ld_dtype d,
                         ld_layer_counters *counters)
{
    ld_tensor *out = ctx->outputs[j];
    ld_emu_value *vs = &b->values[ctx->node->outputs[j]];
    vs->show_as = LD_DTYPE_UNDEFINED;
    if (out->dtype == d)
        return LD_OK;
    ld_emu_tally t = {0}; /* an exact widening, or counted like an input */
    ld_status st = convert_output(ctx, j, ld_emu_precision_of_type(d), d, &ctx->numerics->round,
                                  &t);
    counters->overflows += t.overflows;
    counters->underflows += t.underflows;
    vs->flags = 0; /* narrowing may have made infinities */
    vs->exact = -1;
    return st;
}

ld_status ld_emu_after_compute(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                               ld_layer_counters *counters, ld_error *err)
{
    (void)err;
    ld_emulated_backend *b = user;
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
        ld_emu_value *vs = &b->values[v];
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
            vs->flags = (unsigned char)(LD_EMU_VALUE_KNOWN | (t.src_nans ? LD_EMU_VALUE_NAN : 0) |
                                        (t.src_infs + t.overflows ? LD_EMU_VALUE_INF : 0));
        vs->show_as = outputs[j]->dtype == LD_DTYPE_FLOAT32 && to != LD_DTYPE_FLOAT32
                          ? to : LD_DTYPE_UNDEFINED;
        ld_dtype d = delivered_type(ctx->graph, lp, v);
        if (d != LD_DTYPE_UNDEFINED) {
            st = deliver(b, ctx, j, d, counters);
            if (st != LD_OK)
                return st;
        }
    }
    b->fused.ctx = NULL;
    return LD_OK;
}

/* --- fused chains (exec_fuse.c) ------------------------------------------------------- */

void ld_emu_fuse_round_block(void *user, int output, float *block, int64_t n)
{
    (void)output;
    ld_emu_fuse_node *f = user;
    ld_emu_tally t = {0};
    ld_emu_round_block(block, block, NULL, n, f->precision, &f->round, &t);
    add_atomic(&f->tally.overflows, t.overflows);
    add_atomic(&f->tally.underflows, t.underflows);
    add_atomic(&f->tally.subnormals, t.subnormals);
    add_atomic(&f->tally.src_infs, t.src_infs);
    add_atomic(&f->tally.src_nans, t.src_nans);
}

/* A node may join a chain when the chain can do exactly what the unfused
 * run does: an emulated layer whose float32 output the kernel would round
 * through round_block (ld_emu_offer_rounding's conditions), not a graph
 * output converted to a declared type, and whose inputs from the chain need
 * no rounding (round_input would use them as they are: no flushing, the
 * producer's output precision within this layer's). */
bool ld_emu_fuse_accept(void *user, const ld_node *node, const bool *chain_input)
{
    ld_emulated_backend *b = user;
    const ld_graph *g = b->graph;
    const ld_layer_plan *lp = &b->plan->layers[node->index];
    const ld_layer_numerics *num = ld_exec_node_numerics(b->exec, node->index);
    if (b->unfused || !lp->emulated ||
        !(b->nodes[node->index].kernel_flags & LD_KERNEL_WIDEN_HALF) ||
        !ld_engine_is_rounded_type(lp->output_type))
        return false;
    /* a graph output delivered as float32 stays the float32 tensor the chain
       wrote (deliver changes nothing then); another type needs a conversion */
    ld_dtype d = delivered_type(g, lp, node->outputs[0]);
    if (d != LD_DTYPE_UNDEFINED && d != LD_DTYPE_FLOAT32)
        return false;
    for (int j = 0; j < node->n_inputs && j < 3; j++) {
        if (!chain_input[j])
            continue;
        const ld_layer_plan *from = &b->plan->layers[g->values[node->inputs[j]].producer];
        if (num->round.flush_denormals || ld_emu_is_parameter_input(node, j) ||
            !from->emulated || !ld_engine_is_rounded_type(from->output_type) ||
            !ld_emu_precision_within(ld_emu_precision_of_type(from->output_type),
                                     num->precision))
            return false;
    }
    return true;
}

/* after_compute for a fused node, in node order: its counters from its
 * blocks' tally, as after_compute counts a kernel-rounded output; the NaN /
 * inf of its chain inputs from their producers' flags (set just before). */
ld_status ld_emu_fuse_after(void *user, ld_kernel_ctx *ctx, ld_tensor **outputs,
                            ld_layer_counters *counters, ld_error *err)
{
    (void)err;
    (void)outputs;
    ld_emulated_backend *b = user;
    const ld_node *node = ctx->node;
    const ld_layer_plan *lp = &b->plan->layers[node->index];
    const ld_emu_fuse_node *f = &b->fuse[node->index];
    bool in_nan = f->in_nan, in_inf = f->in_inf;
    for (int j = 0; j < node->n_inputs; j++) {
        if (ctx->inputs[j] || node->inputs[j] < 0)
            continue;
        unsigned char flags = b->values[node->inputs[j]].flags;
        in_nan |= (flags & LD_EMU_VALUE_NAN) != 0;
        in_inf |= (flags & LD_EMU_VALUE_INF) != 0;
    }
    const ld_emu_tally *t = &f->tally;
    counters->present = true;
    counters->overflows += t->overflows + (!in_inf ? t->src_infs : 0);
    counters->nans_created += !in_nan ? t->src_nans : 0;
    counters->underflows += t->underflows;
    counters->subnormals += t->subnormals;
    ld_emu_value *vs = &b->values[node->outputs[0]];
    vs->exact = (int)f->precision;
    vs->flags = (unsigned char)(LD_EMU_VALUE_KNOWN | (t->src_nans ? LD_EMU_VALUE_NAN : 0) |
                                (t->src_infs + t->overflows ? LD_EMU_VALUE_INF : 0));
    vs->show_as = lp->output_type != LD_DTYPE_FLOAT32 ? lp->output_type : LD_DTYPE_UNDEFINED;
    if (delivered_type(ctx->graph, lp, node->outputs[0]) != LD_DTYPE_UNDEFINED)
        vs->show_as = LD_DTYPE_UNDEFINED; /* deliver: already the declared float32 */
    return LD_OK;
}

/* --- what observers see: the events ---------------------------------------------------- */

/* A float32 tensor holding half values, as a tensor of that half type
 * (exact). *out is new (its data borrowed from b->show_buf). */
static ld_status show_tensor(ld_emulated_backend *b, const ld_tensor *t, int v, ld_dtype as,
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
    ld_emu_observe_wrap *w = user;
    const ld_emu_value *vs = &w->b->values[ev->value];
    if (ev->node && !ev->counters.present) {
        /* a folded Constant (exec.c's foldable_constant): after_compute,
         * not called for it, would have marked its counters present */
        ld_tensor_event copy = *ev;
        copy.counters.present = true;
        return w->inner(w->user, &copy, err);
    }
    if (!ev->node || vs->show_as == LD_DTYPE_UNDEFINED || ev->tensor->dtype != LD_DTYPE_FLOAT32)
        return w->inner(w->user, ev, err);
    ld_tensor *shown = NULL;
    ld_status st;
    if (!ev->tensor->data || !shows_data(w->b, ev->value)) /* a fused chain's value, not
                                        stored, or one nobody reads: its type, no data */
        st = ld_tensor_wrap(&shown, ev->tensor->name, vs->show_as, &ev->tensor->shape, NULL,
                            err);
    else
        st = show_tensor(w->b, ev->tensor, ev->value, vs->show_as, &shown, err);
    if (st != LD_OK)
        return st;
    ld_tensor_event copy = *ev;
    copy.tensor = shown;
    st = w->inner(w->user, &copy, err);
    ld_tensor_destroy(shown);
    return st;
}

ld_tensor_observer ld_emu_wrap_observer(ld_emu_observe_wrap *w, ld_emulated_backend *b,
                                        ld_tensor_observer inner, void *user)
{
    *w = (ld_emu_observe_wrap){b, inner, user};
    b->observing = inner != NULL;
    b->shown_value = -1;
    return inner ? emu_observe : NULL;
}
