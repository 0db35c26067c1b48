/* layerdiff — the graph executor (see exec.h): create and destroy, tensors
 * from the pool, the kernel-context helpers and computing one node. The
 * stepwise run is in exec_step.c. */
#include "backends/exec_internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/kernels/inplace.h"
#include "backends/type_check.h"
#include "layerdiff/memory.h"
#include "layerdiff/round.h"

static int default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static const char *node_label(const ld_node *node)
{
    return node->name;
}

ld_status ld_kernel_fail(ld_kernel_ctx *ctx, ld_status status, const char *fmt, ...)
{
    char message[LD_ERROR_MESSAGE_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return ld_error_set(ctx->err, status, "node '%s' (%s): %s", node_label(ctx->node),
                        ctx->node->op_type, message);
}

/* --- tensors from the pool ---------------------------------------------------- */

/* Charges a tensor of nbytes to the run's shared budget (memory.h: every
 * executor of the process together); fails when that would take the run
 * past the limit: shapes known only at run time are checked here. */
static ld_status check_memory_limit(ld_exec *e, const char *name, size_t nbytes, ld_error *err)
{
    if (!e->max_bytes) {
        ld_memory_hold(nbytes);
        return LD_OK;
    }
    if (ld_memory_try_hold(nbytes))
        return LD_OK;
    uint64_t alive = ld_memory_held(), shared = ld_memory_resident();
    uint64_t held = alive + shared;
    char need[32], live[32], resident[32], total[32], limit[32];
    e->over_limit = true;
    return ld_error_set(err, LD_ERR_NOMEM,
                        "node '%s' (%s): tensor '%s' needs %s; with %s of layer outputs alive "
                        "and %s of weights and inputs the run would hold %s, more than the "
                        "memory limit %s (--max-memory)",
                        e->current ? e->current->name : "?", e->current ? e->current->op_type : "?",
                        name, ld_memory_format(nbytes, need, sizeof need),
                        ld_memory_format(alive, live, sizeof live),
                        ld_memory_format(shared, resident, sizeof resident),
                        ld_memory_format(held + nbytes, total, sizeof total),
                        ld_memory_format(e->max_bytes, limit, sizeof limit));
}

static ld_status pool_tensor(ld_exec *e, const char *name, ld_dtype dtype, const ld_shape *shape,
                             ld_tensor **out, ld_error *err)
{
    ld_tensor *t = NULL;
    ld_status st = ld_tensor_wrap(&t, name, dtype, shape, NULL, err);
    if (st != LD_OK)
        return st;
    if (t->nbytes > 0)
        st = check_memory_limit(e, name, t->nbytes, err);
    if (st != LD_OK) {
        ld_tensor_destroy(t);
        return st;
    }
    if (t->nbytes > 0) {
        t->data = ld_pool_get(e->pool, t->nbytes);
        if (!t->data) {
            ld_memory_release(t->nbytes);
            st = ld_error_set(err, LD_ERR_NOMEM, "tensor '%s': cannot allocate %zu bytes", name,
                              t->nbytes);
            ld_tensor_destroy(t);
            return st;
        }
    }
    e->live_bytes += t->nbytes;
    if (e->live_bytes > e->peak_bytes)
        e->peak_bytes = e->live_bytes;
    *out = t;
    return LD_OK;
}

ld_status ld_exec_pool_tensor(ld_exec *e, const char *name, ld_dtype dtype, const ld_shape *shape,
                              ld_tensor **out, ld_error *err)
{
    return pool_tensor(e, name, dtype, shape, out, err);
}

void ld_exec_release_tensor(ld_exec *e, ld_tensor *t)
{
    if (!t)
        return;
    e->live_bytes -= t->nbytes;
    ld_memory_release(t->nbytes);
    ld_pool_put(e->pool, t->data);
    t->data = NULL;
    ld_tensor_destroy(t);
}

static ld_status add_scratch(ld_exec *e, ld_tensor *t, ld_error *err)
{
    if (e->n_scratch == e->cap_scratch) {
        int cap = e->cap_scratch ? 2 * e->cap_scratch : 16;
        ld_tensor **grown = realloc(e->scratch, (size_t)cap * sizeof *grown);
        if (!grown) {
            ld_exec_release_tensor(e, t);
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        }
        e->scratch = grown;
        e->cap_scratch = cap;
    }
    e->scratch[e->n_scratch++] = t;
    return LD_OK;
}

void ld_exec_release_scratch(ld_exec *e)
{
    for (int i = 0; i < e->n_scratch; i++)
        ld_exec_release_tensor(e, e->scratch[i]);
    e->n_scratch = 0;
}

ld_status ld_exec_scratch_clone(ld_kernel_ctx *ctx, const ld_tensor *src, ld_tensor **out)
{
    ld_exec *e = ctx->exec;
    ld_tensor *t = NULL;
    ld_status st = pool_tensor(e, src->name, src->dtype, &src->shape, &t, ctx->err);
    if (st != LD_OK)
        return st;
    if (src->nbytes)
        memcpy(t->data, src->data, src->nbytes);
    st = add_scratch(e, t, ctx->err);
    if (st == LD_OK)
        *out = t;
    return st;
}

ld_status ld_exec_scratch_tensor(ld_kernel_ctx *ctx, const char *name, ld_dtype dtype,
                                 const ld_shape *shape, ld_tensor **out)
{
    ld_tensor *t = NULL;
    ld_status st = pool_tensor(ctx->exec, name, dtype, shape, &t, ctx->err);
    if (st == LD_OK)
        st = add_scratch(ctx->exec, t, ctx->err);
    if (st == LD_OK)
        *out = t;
    return st;
}

ld_status ld_exec_replace_output(ld_kernel_ctx *ctx, int j, ld_dtype dtype, ld_tensor **fresh,
                                 const ld_tensor **old)
{
    ld_tensor *prev = ctx->outputs[j], *t = NULL;
    ld_status st = pool_tensor(ctx->exec, prev->name, dtype, &prev->shape, &t, ctx->err);
    if (st != LD_OK)
        return st;
    st = add_scratch(ctx->exec, prev, ctx->err); /* freed with the node's scratch */
    if (st != LD_OK) {
        ld_exec_release_tensor(ctx->exec, t);
        ctx->outputs[j] = NULL; /* add_scratch released prev */
        return st;
    }
    ctx->outputs[j] = t;
    *fresh = t;
    *old = prev;
    return LD_OK;
}

ld_dtype ld_exec_input_dtype(const ld_kernel_ctx *ctx, int j)
{
    int v = j < ctx->n_inputs ? ctx->node->inputs[j] : -1;
    if (v < 0)
        return LD_DTYPE_UNDEFINED;
    if (ctx->exec->foreign && ctx->exec->foreign[j])
        return ctx->exec->foreign[j]->dtype;
    const ld_value *val = &ctx->graph->values[v];
    if (val->kind == LD_VALUE_INITIALIZER)
        return val->initializer ? val->initializer->dtype : val->type.dtype;
    const ld_tensor *t = ctx->exec->slots[v];
    return t ? t->dtype : LD_DTYPE_UNDEFINED;
}

ld_status ld_kernel_alloc_output(ld_kernel_ctx *ctx, int i, ld_dtype dtype, const ld_shape *shape,
                                 ld_tensor **out)
{
    if (i < 0 || i >= ctx->n_outputs)
        return ld_kernel_fail(ctx, LD_ERR_INTERNAL, "output %d out of range", i);
    if (ctx->outputs[i])
        return ld_kernel_fail(ctx, LD_ERR_INTERNAL, "output %d allocated twice", i);
    int value = ctx->node->outputs[i];
    const char *name = value >= 0 ? ctx->graph->values[value].name : "";
    ld_status st = pool_tensor(ctx->exec, name, dtype, shape, &ctx->outputs[i], ctx->err);
    if (st != LD_OK && !ctx->exec->over_limit) /* that message names the node already */
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    if (st != LD_OK)
        return st;
    *out = ctx->outputs[i];
    return LD_OK;
}

/* --- create ------------------------------------------------------------------------ */

/* A Constant node's output is the same in every run: its value attribute.
 * Such a node is folded: each run shows the attribute's tensor (borrowed,
 * under the output's name) as the node's output, like an initializer,
 * instead of the kernel cloning it at create and copying it into a fresh
 * buffer every run. PaddleOCR det keeps its convolution weights in Constant
 * nodes: 4.6 MB cloned at create and copied every run, ~1800 page faults
 * (12.2k -> 10.3k) of a cold process.
 * With compute hooks it is folded too when its numerics (from the
 * layer_numerics hook, already in xn) leave it untouched: fp32, no output
 * type, so the hooks have nothing to round; before_compute and
 * after_compute are then not called for it (the emulated engine: a Constant
 * is never an emulated layer, engine_plan.c's classify, and its observer
 * wrapper marks the event's counters present as after_compute would). On
 * PaddleOCR det that is 342 nodes, 4.6 MB copied per run (~1 ms).
 * Returns the tensor to show, or NULL when the node is not folded: not a
 * Constant with exactly one value attribute, a tensor one (the kernel
 * makes the others and reports errors), or the hooks round it. */
static const ld_tensor *foldable_constant(const ld_exec *e, const ld_node *node,
                                          const ld_layer_numerics *numerics)
{
    bool hooked = e->hooks.before_compute || e->hooks.after_compute;
    if ((hooked && (numerics->precision != LD_PRECISION_FP32 ||
                    numerics->output_type != LD_DTYPE_UNDEFINED)) ||
        node->domain[0] || strcmp(node->op_type, "Constant") != 0 || node->n_outputs != 1 ||
        node->outputs[0] < 0)
        return NULL;
    const ld_attr *value = NULL;
    for (int i = 0; i < node->n_attrs; i++) {
        const ld_attr *a = &node->attrs[i];
        if (strncmp(a->name, "value", 5) != 0 && strcmp(a->name, "sparse_value") != 0)
            continue;
        if (value)
            return NULL;
        value = a;
    }
    if (!value || (value->type != LD_ATTR_TENSOR && value->type != LD_ATTR_SPARSE_TENSOR) ||
        !value->t || (!value->t->data && value->t->nbytes))
        return NULL;
    return value->t;
}

static ld_status resolve_node(ld_exec *e, const ld_node *node, exec_node *xn, ld_error *err)
{
    xn->kernel = ld_kernel_find(node->domain, node->op_type, node->opset);
    if (!xn->kernel)
        return ld_error_set(err, LD_ERR_UNSUPPORTED,
                            "node '%s': operator %s%s%s (opset %" PRId64 ") is not supported",
                            node->name, *node->domain ? node->domain : "",
                            *node->domain ? "." : "", node->op_type, node->opset);
    ld_status type_st = ld_check_node_input_types(e->graph, node, err);
    if (type_st != LD_OK)
        return type_st;
    xn->numerics = (ld_layer_numerics){.precision = LD_PRECISION_FP32};
    xn->inplace = ld_kernel_inplace_safe(node);
    if (e->hooks.layer_numerics) {
        ld_status st = e->hooks.layer_numerics(e->hooks.user, node, &xn->numerics, err);
        if (st != LD_OK)
            return st;
    }
    const ld_tensor *constant = foldable_constant(e, node, &xn->numerics);
    if (constant)
        return ld_tensor_wrap(&xn->folded, e->graph->values[node->outputs[0]].name,
                              constant->dtype, &constant->shape, constant->data, err);
    if (!xn->kernel->init)
        return LD_OK;
    ld_layer_counters unused = {0};
    ld_kernel_ctx ctx = {
        .graph = e->graph, .node = node, .n_inputs = node->n_inputs,
        .n_outputs = node->n_outputs, .threads = e->threads, .numerics = &xn->numerics,
        .counters = &unused, .err = err, .exec = e,
    };
    ld_status st = xn->kernel->init(&ctx);
    xn->state = ctx.state;
    return st;
}

static ld_status compute_liveness(ld_exec *e, ld_error *err)
{
    const ld_graph *g = e->graph;
    e->last_use = malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *e->last_use);
    if (!e->last_use)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++) {
        int last = -1;
        for (int c = 0; c < g->values[v].n_consumers; c++)
            if (g->values[v].consumers[c] > last)
                last = g->values[v].consumers[c];
        e->last_use[v] = last;
    }
    return LD_OK;
}

/* in_buf, out_buf and descs, big enough for every node. */
static ld_status allocate_node_buffers(ld_exec *e, ld_error *err)
{
    const ld_graph *g = e->graph;
    int max_in = 1, max_out = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].n_inputs > max_in)
            max_in = g->nodes[i].n_inputs;
        if (g->nodes[i].n_outputs > max_out)
            max_out = g->nodes[i].n_outputs;
    }
    e->in_buf = calloc((size_t)max_in, sizeof *e->in_buf);
    e->out_buf = calloc((size_t)max_out, sizeof *e->out_buf);
    e->descs = calloc((size_t)max_out, sizeof *e->descs);
    if (!e->in_buf || !e->out_buf || !e->descs)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    return LD_OK;
}

ld_status ld_exec_create(ld_exec **out, const ld_graph *g, const ld_exec_config *cfg,
                         ld_error *err)
{
    ld_status st = LD_OK;
    ld_exec *e = calloc(1, sizeof *e);
    if (!e)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    e->graph = g;
    e->pending = -1;
    e->donor = -1;
    e->threads = cfg && cfg->threads > 0 ? cfg->threads : default_threads();
    if (cfg && cfg->hooks)
        e->hooks = *cfg->hooks;
    e->fuse = cfg && cfg->fuse && ld_exec_fusion_allowed(&e->hooks);
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    e->nodes = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *e->nodes);
    e->slots = calloc(nv, sizeof *e->slots);
    e->owned = calloc(nv, sizeof *e->owned);
    e->profile = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *e->profile);
    e->pool = ld_pool_create();
    if (!e->nodes || !e->slots || !e->owned || !e->profile || !e->pool) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = compute_liveness(e, err);
    if (st == LD_OK)
        st = allocate_node_buffers(e, err);
    if (st != LD_OK)
        goto out;
    for (int i = 0; i < g->n_nodes; i++) {
        st = resolve_node(e, &g->nodes[i], &e->nodes[i], err);
        if (st != LD_OK)
            goto out;
        ld_exec_fuse_classify(&g->nodes[i], &e->nodes[i]);
    }
out:
    if (st != LD_OK) {
        ld_exec_destroy(e);
        return st;
    }
    *out = e;
    return LD_OK;
}

void ld_exec_destroy(ld_exec *e)
{
    if (!e)
        return;
    if (e->nodes) {
        for (int i = 0; i < e->graph->n_nodes; i++) {
            if (e->nodes[i].kernel && e->nodes[i].kernel->fini && e->nodes[i].state)
                e->nodes[i].kernel->fini(e->nodes[i].state);
            ld_tensor_destroy(e->nodes[i].folded); /* borrowed data: not freed */
        }
    }
    ld_exec_release_scratch(e);
    if (e->slots && e->owned) { /* either may be NULL when create ran out of memory */
        for (int v = 0; v < e->graph->n_values; v++)
            if (e->owned[v])
                ld_exec_release_tensor(e, e->slots[v]);
    }
    ld_pool_destroy(e->pool);
    free(e->scratch);
    free(e->nodes);
    free(e->last_use);
    free(e->slots);
    free(e->owned);
    free(e->profile);
    free(e->in_buf);
    free(e->out_buf);
    free(e->descs);
    free(e);
}

const ld_layer_numerics *ld_exec_node_numerics(const ld_exec *e, int node_index)
{
    return &e->nodes[node_index].numerics;
}

size_t ld_exec_peak_bytes(const ld_exec *e)
{
    return e->peak_bytes;
}

const ld_node_profile *ld_exec_profile(const ld_exec *e)
{
    return e->profile;
}

/* ld_exec_set_fusion's mode: -1 the default (LD_EXEC_FUSE_DEFAULT). */
static int fusion_mode = -1;

void ld_exec_set_fusion(int mode)
{
    fusion_mode = mode;
}

bool ld_exec_fusion_allowed(const ld_exec_hooks *h)
{
    int mode = fusion_mode >= 0 ? fusion_mode : LD_EXEC_FUSE_DEFAULT;
    bool hooked = h->before_compute || h->after_compute;
    return mode == 1 && (!hooked || (h->fuse_accept && h->fuse_before && h->fuse_after));
}

int ld_exec_fused_nodes(const ld_exec *e)
{
    return e->fused_nodes;
}

const char *ld_exec_fusion_note(ld_exec *e)
{
    if (!e->fused_nodes)
        return NULL;
    snprintf(e->fuse_note, sizeof e->fuse_note,
             "%d elementwise nodes fused into %d chains (a chain's time split evenly over "
             "its nodes)", e->fused_nodes, e->fused_chains);
    return e->fuse_note;
}

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- computing one node ------------------------------------------------------------ */

/* The tensor a node reads for value v: an initializer, or a live slot. */
static ld_status input_tensor(ld_exec *e, const ld_node *node, int v, const ld_tensor **out,
                              ld_error *err)
{
    const ld_value *val = &e->graph->values[v];
    if (val->kind == LD_VALUE_INITIALIZER) {
        if (!val->initializer || (!val->initializer->data && val->initializer->nbytes))
            return ld_error_set(err, LD_ERR_UNSUPPORTED,
                                "node '%s': initializer '%s' has a type layerdiff cannot hold (%s)",
                                node->name, val->name,
                                ld_dtype_name(val->initializer ? val->initializer->dtype
                                                               : val->type.dtype));
        *out = val->initializer;
        return LD_OK;
    }
    if (!e->slots[v])
        return ld_error_set(err, LD_ERR_INTERNAL, "node '%s': input '%s' was not computed",
                            node->name, val->name);
    *out = e->slots[v];
    return LD_OK;
}

static bool is_half(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT16 || d == LD_DTYPE_BFLOAT16;
}

/* float16/bfloat16 -> float32 scratch copy, for WIDEN_HALF kernels. */
static ld_status widen_input(ld_exec *e, const ld_tensor *in, const ld_tensor **out, ld_error *err)
{
    ld_tensor *t = NULL;
    ld_status st = pool_tensor(e, in->name, LD_DTYPE_FLOAT32, &in->shape, &t, err);
    if (st != LD_OK)
        return st;
    if (in->dtype == LD_DTYPE_FLOAT16)
        ld_convert_fp16_to_fp32(in->data, t->data, (size_t)in->count);
    else
        ld_convert_bf16_to_fp32(in->data, t->data, (size_t)in->count);
    st = add_scratch(e, t, err);
    if (st == LD_OK)
        *out = t;
    return st;
}

/* Rounds a float32 output of a widened node back to its half type: the type
 * the model declares for the value when it declares a float type, else the
 * type the inputs were widened from. */
static ld_status narrow_output(ld_exec *e, int value, ld_dtype widened_from, ld_tensor **slot,
                               ld_error *err)
{
    ld_dtype target = widened_from;
    ld_dtype declared = value >= 0 ? e->graph->values[value].type.dtype : LD_DTYPE_UNDEFINED;
    if (ld_dtype_is_float(declared))
        target = declared;
    if (!is_half(target))
        return LD_OK;
    ld_tensor *wide = *slot, *narrow = NULL;
    ld_status st = pool_tensor(e, wide->name, target, &wide->shape, &narrow, err);
    if (st != LD_OK)
        return st;
    if (target == LD_DTYPE_FLOAT16)
        ld_convert_fp32_to_fp16(wide->data, narrow->data, (size_t)wide->count);
    else
        ld_convert_fp32_to_bf16(wide->data, narrow->data, (size_t)wide->count);
    ld_exec_release_tensor(e, wide);
    *slot = narrow;
    return LD_OK;
}

static ld_status gather_inputs(ld_exec *e, const ld_node *node, const ld_kernel *k,
                               const ld_tensor **inputs, ld_dtype *widened_from, ld_error *err)
{
    /* Outputs are narrowed to input 0's type when input 0 is a float (Pow's
     * base, not its exponent), else to the first half input's type (Where's X).
     * A float32/float64 input 0 means the outputs stay wide. */
    bool input0_full_float = false;
    *widened_from = LD_DTYPE_UNDEFINED;
    for (int j = 0; j < node->n_inputs; j++) {
        inputs[j] = NULL;
        if (node->inputs[j] < 0)
            continue;
        ld_status st = LD_OK;
        if (e->foreign && e->foreign[j])
            inputs[j] = e->foreign[j];
        else
            st = input_tensor(e, node, node->inputs[j], &inputs[j], err);
        if (st != LD_OK)
            return st;
        if (j == 0 && ld_dtype_is_float(inputs[0]->dtype) && !is_half(inputs[0]->dtype))
            input0_full_float = true;
        if ((k->flags & LD_KERNEL_WIDEN_HALF) && is_half(inputs[j]->dtype)) {
            if (*widened_from == LD_DTYPE_UNDEFINED)
                *widened_from = inputs[j]->dtype;
            st = widen_input(e, inputs[j], &inputs[j], err);
            if (st != LD_OK)
                return st;
        }
    }
    if (input0_full_float)
        *widened_from = LD_DTYPE_UNDEFINED;
    return LD_OK;
}

/* Output 0 of an in-place kernel over the buffer of an input that dies at
 * this node, when there is one (kernels/inplace.h): owned by the executor,
 * of the output's dtype and shape. The input's tensor keeps the buffer for
 * the kernel to read; compute_node then hands it over (settle_donation). */
static bool donate_input(ld_exec *e, const ld_node *node, const ld_output_desc *d,
                         ld_tensor **out)
{
    if (!e->donate || e->foreign || !e->nodes[node->index].inplace)
        return false;
    for (int k = 0; k < node->n_inputs; k++) {
        int v = node->inputs[k];
        ld_tensor *t = v >= 0 && e->owned[v] && e->last_use[v] == node->index ? e->slots[v]
                                                                             : NULL;
        if (!t || !t->data || t->dtype != d->dtype || !ld_shape_equal(&t->shape, &d->shape))
            continue;
        if (ld_tensor_wrap(out, e->graph->values[node->outputs[0]].name, d->dtype, &d->shape,
                           t->data, NULL) != LD_OK)
            return false;
        e->live_bytes += t->nbytes; /* as for a new buffer: the input's is released later */
        ld_memory_hold(t->nbytes);
        e->donor = v;
        return true;
    }
    return false;
}

/* After compute: the output keeps the donated buffer (the input's tensor,
 * freed after the node as usual, no longer holds it) or, when the node
 * failed, gives it back to the input. */
static void settle_donation(ld_exec *e, bool ok, ld_tensor *output)
{
    if (e->donor < 0)
        return;
    if (ok)
        e->slots[e->donor]->data = NULL;
    else if (output)
        output->data = NULL;
    e->donor = -1;
}

static ld_status allocate_outputs(ld_exec *e, ld_kernel_ctx *ctx, ld_output_desc *descs)
{
    const ld_node *node = ctx->node;
    for (int j = 0; j < node->n_outputs; j++) {
        ctx->outputs[j] = NULL;
        descs[j] = (ld_output_desc){0};
    }
    ld_status st = e->nodes[node->index].kernel->infer(ctx, descs);
    if (st != LD_OK)
        return st;
    for (int j = 0; j < node->n_outputs; j++) {
        if (node->outputs[j] < 0 || descs[j].deferred)
            continue;
        if (j == 0 && donate_input(e, node, &descs[0], &ctx->outputs[0]))
            continue;
        st = pool_tensor(e, e->graph->values[node->outputs[j]].name, descs[j].dtype,
                         &descs[j].shape, &ctx->outputs[j], ctx->err);
        if (st != LD_OK && e->over_limit) /* that message names the node already */
            return st;
        if (st != LD_OK)
            return ld_error_prefix(ctx->err, "node '%s' (%s)", node->name, node->op_type);
    }
    return LD_OK;
}

void ld_exec_release_outputs(ld_exec *e, const ld_node *node, ld_tensor **outputs)
{
    for (int j = 0; j < node->n_outputs; j++) {
        ld_exec_release_tensor(e, outputs[j]);
        outputs[j] = NULL;
    }
}

/* A folded Constant computed all the same (ld_exec_run_node_on; a step
 * shows the borrowed tensor instead): a pool copy in e->out_buf[0]. */
static ld_status copy_folded(ld_exec *e, const ld_tensor *folded, ld_node_profile *prof,
                             ld_error *err)
{
    e->out_buf[0] = NULL;
    ld_status st = pool_tensor(e, folded->name, folded->dtype, &folded->shape, &e->out_buf[0],
                               err);
    if (st == LD_OK && folded->nbytes)
        memcpy(e->out_buf[0]->data, folded->data, folded->nbytes);
    *prof = (ld_node_profile){0};
    return st;
}

ld_status ld_exec_compute_node(ld_exec *e, int i, ld_layer_counters *counters,
                               ld_node_profile *prof, ld_error *err)
{
    const ld_graph *g = e->graph;
    const ld_node *node = &g->nodes[i];
    exec_node *xn = &e->nodes[i];
    const ld_tensor **inputs = e->in_buf;
    ld_tensor **outputs = e->out_buf;
    ld_dtype widened_from;
    ld_kernel_ctx ctx = {
        .graph = g, .node = node, .n_inputs = node->n_inputs, .inputs = inputs,
        .n_outputs = node->n_outputs, .outputs = outputs, .state = xn->state,
        .threads = e->threads, .numerics = &xn->numerics, .counters = counters, .err = err,
        .exec = e,
    };
    e->current = node; /* for the --max-memory message */
    if (xn->folded)
        return copy_folded(e, xn->folded, prof, err);
    double started = monotonic_seconds(); /* profile: two clock reads per node */
    for (int j = 0; j < node->n_outputs; j++)
        outputs[j] = NULL;
    ld_status st = gather_inputs(e, node, xn->kernel, inputs, &widened_from, err);
    if (st == LD_OK && e->hooks.before_compute)
        st = e->hooks.before_compute(e->hooks.user, &ctx, inputs, err);
    if (st == LD_OK)
        st = allocate_outputs(e, &ctx, e->descs);
    if (st == LD_OK)
        st = xn->kernel->compute(&ctx);
    settle_donation(e, st == LD_OK, outputs[0]);
    for (int j = 0; st == LD_OK && j < node->n_outputs; j++) {
        if (node->outputs[j] >= 0 && !outputs[j])
            st = ld_kernel_fail(&ctx, LD_ERR_INTERNAL, "kernel produced no output %d", j);
        else if (outputs[j] && widened_from != LD_DTYPE_UNDEFINED &&
                 outputs[j]->dtype == LD_DTYPE_FLOAT32 &&
                 !ld_dtype_is_float(xn->numerics.output_type)) /* else after_compute does */
            st = narrow_output(e, node->outputs[j], widened_from, &outputs[j], err);
    }
    if (st == LD_OK && e->hooks.after_compute)
        st = e->hooks.after_compute(e->hooks.user, &ctx, outputs, counters, err);
    ld_exec_release_scratch(e);
    if (st != LD_OK) {
        ld_exec_release_outputs(e, node, outputs);
        return st;
    }
    *prof = (ld_node_profile){monotonic_seconds() - started, ctx.flops};
    return LD_OK;
}
