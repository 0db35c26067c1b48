/* layerdiff — the emulated backend's input side (see emulated_internal.h):
 * before compute, a float layer's float inputs (weights included) are
 * rounded to the layer's precision. Inputs already exact in it (the
 * previous layer's rounded outputs, float16 tensors for an fp16 layer) are
 * used as they are; constants are rounded once and kept across runs. */
#include <string.h>

#include "backends/emulated_internal.h"
#include "backends/engine_internal.h"

/* --- precisions ------------------------------------------------------------------------ */

ld_precision ld_emu_precision_of_type(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT16 ? LD_PRECISION_FP16
           : d == LD_DTYPE_BFLOAT16 ? LD_PRECISION_BF16 : LD_PRECISION_FP32;
}

bool ld_emu_precision_within(ld_precision q, ld_precision p)
{
    return q == p || p == LD_PRECISION_FP32 ||
           (p == LD_PRECISION_TF32 && (q == LD_PRECISION_FP16 || q == LD_PRECISION_BF16));
}

/* An input stored as `stored` already holds values of precision p: rounding
 * it would change nothing. With flush on, everything is rounded again (a
 * subnormal may need flushing). */
static bool input_exact(const ld_emu_value *vs, ld_dtype stored, ld_precision p,
                        const ld_round_options *o)
{
    if (o->flush_denormals)
        return false;
    if (stored == LD_DTYPE_FLOAT16)
        return ld_emu_precision_within(LD_PRECISION_FP16, p);
    if (stored == LD_DTYPE_BFLOAT16)
        return ld_emu_precision_within(LD_PRECISION_BF16, p);
    return stored == LD_DTYPE_FLOAT32 &&
           (p == LD_PRECISION_FP32 ||
            (vs && vs->exact >= 0 && ld_emu_precision_within((ld_precision)vs->exact, p)));
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

ld_status ld_emu_round_tensor(ld_kernel_ctx *ctx, const ld_tensor *src, ld_precision p,
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

/* --- which inputs ---------------------------------------------------------------------- */

static bool op_named(const ld_node *node, const char *op)
{
    return ld_engine_default_domain(node->domain) && strcmp(node->op_type, op) == 0;
}

/* Inputs that say how to compute rather than what: output sizes, thresholds,
 * quantization scales, a target type. An engine keeps them in fp32 (on the
 * host, or as build-time constants); rounding Resize's scales to fp16 could
 * change the output shape. */
bool ld_emu_is_parameter_input(const ld_node *node, int j)
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

/* --- rounding -------------------------------------------------------------------------- */

/* NaN / inf in a value as it is stored this run (scanned once). */
static void value_nonfinite(ld_emulated_backend *b, ld_kernel_ctx *ctx, int v, const ld_tensor *t,
                            bool *nan, bool *inf)
{
    unsigned char *f = &b->values[v].flags;
    if (!(*f & LD_EMU_VALUE_KNOWN)) {
        ld_emu_scan_nonfinite(t, ctx->threads, nan, inf);
        *f = (unsigned char)(LD_EMU_VALUE_KNOWN | (*nan ? LD_EMU_VALUE_NAN : 0) |
                             (*inf ? LD_EMU_VALUE_INF : 0));
    }
    *nan = *f & LD_EMU_VALUE_NAN;
    *inf = *f & LD_EMU_VALUE_INF;
}

/* Rounds (or widens) a constant input once and keeps it for later runs. */
static ld_status cached(ld_kernel_ctx *ctx, ld_emu_cached_input *c, const ld_tensor *in,
                        bool exact)
{
    if (c->ready)
        return LD_OK;
    ld_tensor *r = NULL;
    ld_status st = LD_OK;
    if (!exact)
        st = ld_emu_round_tensor(ctx, in, ctx->numerics->precision, &ctx->numerics->round, &r,
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
static ld_status round_input(ld_emulated_backend *b, ld_kernel_ctx *ctx, const ld_tensor **inputs,
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
        ld_emu_cached_input *c = &b->nodes[node->index].cache[j];
        st = cached(ctx, c, inputs[j], exact);
        if (st != LD_OK)
            return st;
        if (c->tensor) {
            inputs[j] = c->tensor;
            /* kept until the exec (and the kernel state) is gone: free_nodes
               runs after ld_exec_destroy and nothing else frees or rewrites
               it, so a kernel may cache what it derives from it */
            if (j < 32)
                ctx->kept_inputs |= 1u << j;
        }
        ctx->counters->overflows += c->events.overflows;
        ctx->counters->underflows += c->events.underflows;
        nan = c->has_nan, inf = c->has_inf;
    } else if (!exact) {
        ld_emu_tally t = {0};
        st = ld_emu_round_tensor(ctx, inputs[j], p, o, &r, &t);
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

ld_status ld_emu_before_compute(void *user, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                                ld_error *err)
{
    (void)err;
    ld_emulated_backend *b = user;
    const ld_node *node = ctx->node;
    b->in_nan = b->in_inf = false;
    b->fused.ctx = NULL;
    if (!b->plan->layers[node->index].emulated)
        return LD_OK;
    bool widen = b->nodes[node->index].kernel_flags & LD_KERNEL_WIDEN_HALF;
    for (int j = 0; j < node->n_inputs; j++) {
        if (!inputs[j] || !ld_engine_is_rounded_type(inputs[j]->dtype) ||
            ld_emu_is_parameter_input(node, j))
            continue;
        ld_status st = round_input(b, ctx, inputs, j, widen);
        if (st != LD_OK)
            return st;
    }
    ld_emu_offer_rounding(b, ctx);
    return LD_OK;
}

/* Like before_compute for a node of a fused chain (exec_fuse.c; accepted by
 * ld_emu_fuse_accept, so an emulated layer whose output the chain rounds
 * through round_block): inputs from outside the chain are rounded (or
 * taken from the constant cache) and scanned as round_input does; the
 * chain's own inputs (NULL) are values of the producer's precision, exact
 * in this layer's (accept checked), whose NaN/inf flags are known only
 * after the chain: ld_emu_fuse_after adds them. */
ld_status ld_emu_fuse_before(void *user, ld_kernel_ctx *ctx, const ld_tensor **inputs,
                             ld_error *err)
{
    (void)err;
    ld_emulated_backend *b = user;
    const ld_node *node = ctx->node;
    const ld_layer_plan *lp = &b->plan->layers[node->index];
    ld_emu_fuse_node *f = &b->fuse[node->index];
    b->in_nan = b->in_inf = false;
    b->fused.ctx = NULL;
    for (int j = 0; j < node->n_inputs; j++) {
        if (!inputs[j] || !ld_engine_is_rounded_type(inputs[j]->dtype) ||
            ld_emu_is_parameter_input(node, j))
            continue;
        ld_status st = round_input(b, ctx, inputs, j, true);
        if (st != LD_OK)
            return st;
    }
    *f = (ld_emu_fuse_node){.b = b, .precision = ld_emu_precision_of_type(lp->output_type),
                            .round = ctx->numerics->round, .in_nan = b->in_nan,
                            .in_inf = b->in_inf};
    ctx->round_block = ld_emu_fuse_round_block;
    ctx->round_user = f;
    /* float16 without flushing: normal float16 values and zeros round to
     * themselves and count nothing, so the chain may round those itself */
    ctx->round_fp16_inline = f->precision == LD_PRECISION_FP16 && !f->round.flush_denormals;
    return LD_OK;
}
