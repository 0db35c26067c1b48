/* layerdiff — elementwise chain fusion in the whole-graph run (ld_exec_run;
 * docs/architecture.md "Elementwise chain fusion").
 *
 * Why: PaddleOCR det's folded batch norms and hard-swishes are chains of
 * Mul / Add / Clip / Div over the same tensor (89 Add, 86 Mul, 24 Clip,
 * 24 Div per run); each is one pass over memory at streaming speed, two
 * thirds of the time outside conv. A chain computed block by block, every
 * intermediate in an L1-sized buffer, reads its inputs once and writes
 * only the values someone else needs.
 *
 * What: from node i on, consecutive nodes in topological order (folded
 * Constant nodes in between are skipped, they compute nothing) whose op is
 * fusable (exec_fuse_ops.h, float32) and whose inputs are each
 *   - a value of the chain (produced by an earlier node of it),
 *   - a live tensor or constant of the chain's shape (read block by block),
 *   - a tensor or constant that broadcasts to the chain's shape as one
 *     value or one value per channel (axis 1): a scalar per block;
 * a node after the first must read a value of the chain. The first node
 * that does not qualify ends the chain. A chain value is materialised
 * (a pool tensor) when it is a graph output or a node outside the chain
 * reads it; the others live only in the block buffers and the observer
 * sees them with data NULL (backend.h). Blocks are at most FUSE_BLOCK
 * elements of one channel plane (when a per-channel operand exists), so
 * per-channel operands are scalars; blocks are independent, and threads
 * take them in static order, so results do not depend on the thread count.
 *
 * Profile: the chain's wall time is split evenly over its nodes (they all
 * have the chain's element count); folded Constants between them get 0. */
#include "backends/exec_internal.h"

#include <float.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backends/exec_fuse_ops.h"
#include "backends/kernels/conv_pool.h"
#include "backends/kernels/kernel_util.h"
#include "layerdiff/memory.h"

#define FUSE_BLOCK 1024     /* elements: 4 KB per buffer */
#define FUSE_MAX_STEPS LD_FUSE_DRY_MAX /* exec_internal.h: the dry run reports as many */
#define FUSE_MAX_BUFS 4     /* block buffers in flight: 32 KB, Zen 3's L1 */
#define FUSE_MIN_PLANE 64   /* per-channel operands need planes at least this long */
/* Buffers lie FUSE_BLOCK + FUSE_SKEW floats apart: at exactly 8 KB apart a
 * loop reading one and writing another hits 4K aliasing (the load waits
 * for the store with the same low 12 address bits) on every vector. */
#define FUSE_SKEW 48

static bool default_domain(const char *d)
{
    return !d[0] || strcmp(d, "ai.onnx") == 0;
}

void ld_exec_fuse_classify(const ld_node *node, exec_node *xn)
{
    xn->fuse_op = LD_FUSE_NONE;
    xn->fuse_a = xn->fuse_b = 0;
    if (xn->folded || !xn->kernel || !default_domain(node->domain) || node->n_outputs != 1 ||
        node->outputs[0] < 0 || node->n_implicit_inputs > 0 || node->n_inputs < 1 ||
        node->inputs[0] < 0)
        return;
    static const struct {
        const char *name;
        int op, n_inputs, min_opset;
    } ops[] = {
        {"Add", LD_FUSE_ADD, 2, 7},   {"Sub", LD_FUSE_SUB, 2, 7},
        {"Mul", LD_FUSE_MUL, 2, 7},   {"Div", LD_FUSE_DIV, 2, 7},
        {"Clip", LD_FUSE_CLIP, -1, 6}, {"Relu", LD_FUSE_RELU, 1, 1},
        {"LeakyRelu", LD_FUSE_LEAKYRELU, 1, 1}, {"HardSigmoid", LD_FUSE_HARDSIGMOID, 1, 1},
        {"HardSwish", LD_FUSE_HARDSWISH, 1, 1}, {"Sigmoid", LD_FUSE_SIGMOID, 1, 1},
    };
    int op = LD_FUSE_NONE;
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        if (strcmp(node->op_type, ops[k].name) != 0)
            continue;
        if (node->opset < ops[k].min_opset ||
            (ops[k].n_inputs > 0 && node->n_inputs != ops[k].n_inputs))
            return;
        op = ops[k].op;
    }
    if (op == LD_FUSE_NONE || (op <= LD_FUSE_DIV && node->inputs[1] < 0))
        return;
    ld_error err;
    float a = 0, b = 0;
    ld_status st = LD_OK;
    if (op == LD_FUSE_CLIP) {
        if (node->n_inputs > 3 || (node->opset < 11 && node->n_inputs != 1))
            return;
        a = -FLT_MAX, b = FLT_MAX; /* Clip-6 defaults; Clip-11 bounds come from inputs */
        if (node->opset < 11)
            st = ld_node_attr_float(node, "min", -FLT_MAX, &a, &err);
        if (st == LD_OK && node->opset < 11)
            st = ld_node_attr_float(node, "max", FLT_MAX, &b, &err);
    } else if (op == LD_FUSE_LEAKYRELU) {
        st = ld_node_attr_float(node, "alpha", 0.01f, &a, &err);
    } else if (op == LD_FUSE_HARDSIGMOID) {
        st = ld_node_attr_float(node, "alpha", 0.2f, &a, &err);
        if (st == LD_OK)
            st = ld_node_attr_float(node, "beta", 0.5f, &b, &err);
    }
    if (st != LD_OK)
        return; /* the kernel reports it */
    xn->fuse_op = op;
    xn->fuse_a = a;
    xn->fuse_b = b;
}

/* --- planning ------------------------------------------------------------------------ */

enum { ARG_STEP, ARG_EXT, ARG_CHAN, ARG_SCALAR };

typedef struct arg {
    int kind;
    int step;         /* ARG_STEP: the step producing it */
    int value;        /* ARG_EXT: the graph value read */
    const float *ptr; /* ARG_EXT: the tensor's data; ARG_CHAN: one value per channel */
    float scalar;     /* ARG_SCALAR */
} arg;

typedef struct step {
    int node;
    int op;
    int n_args;
    arg args[2];
    float a, b;       /* attributes, or Clip's bounds */
    int value;        /* the value it produces */
    bool keep;        /* materialised: a pool tensor */
    int buf;          /* else its block buffer */
    int last_read;    /* last step reading it, -1 none */
    ld_tensor *out;   /* keep: the tensor (new until installed in the slot) */
    int donor;        /* keep: the dying value whose buffer out took, or -1 */
    /* with hooks: the node's inputs as fuse_before left them (NULL: a chain
       value), its counters, and the block rounding it asked for */
    const ld_tensor *ins[3];
    ld_layer_counters counters;
    void (*round_block)(void *user, int output, float *block, int64_t n);
    void *round_user;
    bool round_fp16_inline; /* round_block rounds to float16 (kernel.h) */
    ld_fuse_rounding rounding; /* round_fp16_inline: how (set once per chain) */
} step;

typedef struct chain {
    int n;
    step s[FUSE_MAX_STEPS];
    int last_node;
    ld_shape shape;
    int64_t count, plane, channels; /* channels 1: no per-channel operand */
    int n_bufs;
} chain;

/* The live tensors chain planning looks at: the executor's slots in a run;
 * in the memory plan's dry run (ld_exec_fuse_dry) placeholders whose data
 * is NULL, and the values that may give their buffer (can_donate). */
typedef struct fuse_view {
    const ld_tensor *const *slots;
    bool dry;
    const bool *can_donate;
} fuse_view;

static fuse_view run_view(const ld_exec *e)
{
    return (fuse_view){.slots = (const ld_tensor *const *)e->slots};
}

/* An initializer's or a folded Constant's tensor, or NULL. */
static const ld_tensor *constant_tensor(const ld_exec *e, int v)
{
    const ld_value *val = &e->graph->values[v];
    const ld_tensor *t = NULL;
    if (val->kind == LD_VALUE_INITIALIZER)
        t = val->initializer;
    else if (val->producer >= 0 && e->nodes[val->producer].folded)
        t = e->nodes[val->producer].folded;
    return t && (t->data || !t->nbytes) ? t : NULL;
}

static int step_of(const chain *c, int v)
{
    for (int k = 0; k < c->n; k++)
        if (c->s[k].value == v)
            return k;
    return -1;
}

/* How a float32 tensor t enters a chain of shape s: same shape (a row),
 * one value, one value per channel (axis 1), or not at all (-1). */
static int arg_kind(const ld_tensor *t, const ld_shape *s)
{
    if (ld_shape_equal(&t->shape, s))
        return ARG_EXT;
    if (t->shape.rank > s->rank)
        return -1;
    if (t->count == 1)
        return ARG_SCALAR;
    if (s->rank < 2 || t->shape.rank < s->rank - 1)
        return -1;
    for (int k = 0; k < t->shape.rank; k++) {
        int axis = k + s->rank - t->shape.rank;
        if (t->shape.dims[k] != (axis == 1 ? s->dims[1] : 1))
            return -1;
    }
    return ARG_CHAN;
}

/* Node input v as an argument of a chain of shape c->shape. */
static bool resolve_arg(const ld_exec *e, const fuse_view *view, const chain *c, int v,
                        arg *out)
{
    *out = (arg){.step = step_of(c, v), .value = v};
    if (out->step >= 0) {
        out->kind = ARG_STEP;
        return true;
    }
    const ld_tensor *t = constant_tensor(e, v);
    if (!t && e->graph->values[v].kind != LD_VALUE_INITIALIZER)
        t = view->slots[v];
    if (!t || t->dtype != LD_DTYPE_FLOAT32 || (!t->data && !view->dry) || t->count == 0)
        return false;
    out->kind = arg_kind(t, &c->shape);
    if (out->kind == ARG_SCALAR && t->data)
        out->scalar = ((const float *)t->data)[0];
    else
        out->ptr = t->data;
    if (out->kind == ARG_CHAN && c->shape.dims[1] > 1) {
        int64_t plane = c->count / (c->shape.dims[0] * c->shape.dims[1]);
        if (plane < FUSE_MIN_PLANE)
            return false; /* blocks would be too short */
    }
    return out->kind >= 0;
}

/* Clip-11's bound input j: a constant scalar, or omitted (the default). */
static bool clip_bound(const ld_exec *e, const ld_node *node, int j, float *bound)
{
    if (j >= node->n_inputs || node->inputs[j] < 0)
        return true;
    const ld_tensor *t = constant_tensor(e, node->inputs[j]);
    if (!t || t->dtype != LD_DTYPE_FLOAT32 || t->count != 1)
        return false;
    *bound = ((const float *)t->data)[0];
    return true;
}

/* Node i as step c->s[c->n] of the chain; false when it cannot join. */
static bool add_step(const ld_exec *e, const fuse_view *view, chain *c, int i)
{
    const ld_node *node = &e->graph->nodes[i];
    const exec_node *xn = &e->nodes[i];
    if (xn->fuse_op == LD_FUSE_NONE || c->n == FUSE_MAX_STEPS)
        return false;
    step *s = &c->s[c->n];
    *s = (step){.node = i, .op = xn->fuse_op, .a = xn->fuse_a, .b = xn->fuse_b,
                .value = node->outputs[0], .buf = -1, .last_read = -1, .donor = -1};
    s->n_args = xn->fuse_op <= LD_FUSE_DIV ? 2 : 1;
    bool reads_chain = false;
    for (int j = 0; j < s->n_args; j++) {
        if (!resolve_arg(e, view, c, node->inputs[j], &s->args[j]))
            return false;
        reads_chain |= s->args[j].kind == ARG_STEP;
    }
    /* unary ops read a row; a binary op needs at least one */
    if (s->args[0].kind != ARG_STEP && s->args[0].kind != ARG_EXT &&
        (s->n_args == 1 || (s->args[1].kind != ARG_STEP && s->args[1].kind != ARG_EXT)))
        return false;
    if (c->n > 0 && !reads_chain)
        return false;
    if (s->op == LD_FUSE_CLIP && node->opset >= 11 &&
        (!clip_bound(e, node, 1, &s->a) || !clip_bound(e, node, 2, &s->b)))
        return false;
    if (e->hooks.fuse_accept) { /* the backend's say (the emulated engine's rounding) */
        bool chain_input[3] = {false, false, false};
        for (int j = 0; j < s->n_args; j++)
            chain_input[j] = s->args[j].kind == ARG_STEP;
        if (!e->hooks.fuse_accept(e->hooks.user, node, chain_input))
            return false;
    }
    for (int j = 0; j < s->n_args; j++)
        if (s->args[j].kind == ARG_CHAN)
            c->channels = c->shape.dims[1];
    c->n++;
    return true;
}

/* The chain's shape from the first node: its first float32 live (not
 * constant) input of a non-empty shape the other input broadcasts to. */
static bool start_chain(const ld_exec *e, const fuse_view *view, chain *c, int i)
{
    const ld_node *node = &e->graph->nodes[i];
    if (e->nodes[i].fuse_op == LD_FUSE_NONE)
        return false;
    int n_args = e->nodes[i].fuse_op <= LD_FUSE_DIV ? 2 : 1;
    for (int j = 0; j < n_args; j++) {
        int v = node->inputs[j];
        const ld_tensor *t = e->graph->values[v].kind == LD_VALUE_INITIALIZER ? NULL
                                                                               : view->slots[v];
        if (!t || constant_tensor(e, v) || t->dtype != LD_DTYPE_FLOAT32 || t->count == 0)
            continue;
        c->n = 0;
        c->shape = t->shape;
        c->count = t->count;
        c->channels = 1;
        if (add_step(e, view, c, i))
            return true;
    }
    return false;
}

static bool in_chain(const chain *c, int node)
{
    for (int k = 0; k < c->n; k++)
        if (c->s[k].node == node)
            return true;
    return false;
}

/* Which values are materialised, who reads what last, and the block
 * buffers of the others; false when more than FUSE_MAX_BUFS would be in
 * flight at step *stuck. */
static bool allocate(const ld_exec *e, chain *c, int *stuck)
{
    const ld_graph *g = e->graph;
    for (int k = 0; k < c->n; k++) {
        step *s = &c->s[k];
        const ld_value *val = &g->values[s->value];
        s->keep = val->is_graph_output;
        for (int u = 0; u < val->n_consumers && !s->keep; u++)
            s->keep = !in_chain(c, val->consumers[u]);
        s->last_read = -1;
        s->buf = -1;
    }
    for (int k = 0; k < c->n; k++)
        for (int j = 0; j < c->s[k].n_args; j++)
            if (c->s[k].args[j].kind == ARG_STEP)
                c->s[c->s[k].args[j].step].last_read = k;
    int owner[FUSE_MAX_BUFS];
    for (int b = 0; b < FUSE_MAX_BUFS; b++)
        owner[b] = -1;
    c->n_bufs = 0;
    for (int k = 0; k < c->n; k++) {
        for (int b = 0; b < FUSE_MAX_BUFS; b++) /* values read for the last time here */
            if (owner[b] >= 0 && c->s[owner[b]].last_read <= k)
                owner[b] = -1;
        if (c->s[k].keep)
            continue;
        int b = 0;
        while (b < FUSE_MAX_BUFS && owner[b] >= 0)
            b++;
        if (b == FUSE_MAX_BUFS) {
            *stuck = k;
            return false;
        }
        owner[b] = k;
        c->s[k].buf = b;
        if (b + 1 > c->n_bufs)
            c->n_bufs = b + 1;
    }
    return true;
}

/* The chain starting at node i, up to the first node that cannot join;
 * *end receives the index after its last node. False: no chain of two. */
static bool plan(const ld_exec *e, const fuse_view *view, chain *c, int i, int *end)
{
    const ld_graph *g = e->graph;
    if (!start_chain(e, view, c, i))
        return false;
    c->last_node = i;
    for (int j = i + 1; j < g->n_nodes; j++) {
        if (e->nodes[j].folded)
            continue;
        if (!add_step(e, view, c, j))
            break;
        c->last_node = j;
    }
    int stuck;
    while (c->n >= 2 && !allocate(e, c, &stuck)) {
        c->n = stuck;
        c->last_node = c->s[stuck - 1].node;
    }
    if (c->n < 2)
        return false;
    c->channels = 1;
    for (int k = 0; k < c->n; k++)
        for (int j = 0; j < c->s[k].n_args; j++)
            if (c->s[k].args[j].kind == ARG_CHAN)
                c->channels = c->shape.dims[1];
    c->plane = c->channels > 1 ? c->count / (c->shape.dims[0] * c->channels) : c->count;
    *end = c->last_node + 1;
    return true;
}

/* --- computing ------------------------------------------------------------------------- */

/* The step and value of the last read of live value v in the chain. */
static int last_ext_read(const chain *c, int v)
{
    int last = -1;
    for (int k = 0; k < c->n; k++)
        for (int j = 0; j < c->s[k].n_args; j++)
            if (c->s[k].args[j].kind == ARG_EXT && c->s[k].args[j].value == v)
                last = k;
    return last;
}

/* A live input that dies in the chain and is read for the last time at or
 * before step k: step k's output may be written over it (each block is
 * read before the same block is written). -1 when none. */
static int find_donor(const ld_exec *e, const fuse_view *view, const chain *c, int k)
{
    for (int t = 0; t <= k; t++) {
        for (int j = 0; j < c->s[t].n_args; j++) {
            const arg *a = &c->s[t].args[j];
            int v = a->value;
            bool can = view->dry ? view->can_donate[v]
                                 : e->owned[v] && e->slots[v] && e->slots[v]->data;
            if (a->kind != ARG_EXT || !can || e->last_use[v] > c->last_node ||
                last_ext_read(c, v) > k)
                continue;
            bool taken = false;
            for (int u = 0; u < k; u++)
                taken |= c->s[u].donor == v;
            if (!taken)
                return v;
        }
    }
    return -1;
}

static ld_status allocate_outputs(ld_exec *e, chain *c, ld_error *err)
{
    for (int k = 0; k < c->n; k++) {
        step *s = &c->s[k];
        if (!s->keep)
            continue;
        const char *name = e->graph->values[s->value].name;
        fuse_view view = run_view(e);
        int donor = e->donate ? find_donor(e, &view, c, k) : -1;
        if (donor >= 0) {
            ld_tensor *from = e->slots[donor];
            ld_status st = ld_tensor_wrap(&s->out, name, LD_DTYPE_FLOAT32, &c->shape, from->data,
                                          err);
            if (st != LD_OK)
                return st;
            s->donor = donor;
            e->live_bytes += from->nbytes; /* as donate_input in exec.c */
            ld_memory_hold(from->nbytes);
            continue;
        }
        ld_status st = ld_exec_pool_tensor(e, name, LD_DTYPE_FLOAT32, &c->shape, &s->out, err);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

static ld_kernel_ctx step_ctx(ld_exec *e, step *s, ld_tensor **outputs, ld_error *err)
{
    const ld_node *node = &e->graph->nodes[s->node];
    exec_node *xn = &e->nodes[s->node];
    return (ld_kernel_ctx){
        .graph = e->graph, .node = node, .n_inputs = node->n_inputs, .inputs = s->ins,
        .n_outputs = 1, .outputs = outputs, .state = xn->state, .threads = e->threads,
        .numerics = &xn->numerics, .counters = &s->counters, .err = err, .exec = e,
    };
}

/* fuse_before for every node, in order; then the arguments read from the
 * inputs as the hook left them (rounded constants, rounded copies). */
static ld_status hooks_before(ld_exec *e, chain *c, ld_error *err)
{
    const ld_graph *g = e->graph;
    for (int i = c->s[0].node; i <= c->last_node; i++) /* Constants the chain reads */
        if (e->nodes[i].folded)
            e->slots[g->nodes[i].outputs[0]] = e->nodes[i].folded;
    for (int k = 0; k < c->n; k++) {
        step *s = &c->s[k];
        const ld_node *node = &g->nodes[s->node];
        for (int j = 0; j < node->n_inputs && j < 3; j++) {
            int v = node->inputs[j];
            s->ins[j] = NULL;
            if (v < 0 || (j < s->n_args && s->args[j].kind == ARG_STEP))
                continue;
            const ld_tensor *t = constant_tensor(e, v);
            s->ins[j] = t ? t : e->slots[v];
        }
        ld_tensor *none = NULL;
        ld_kernel_ctx ctx = step_ctx(e, s, &none, err);
        ld_status st = e->hooks.fuse_before(e->hooks.user, &ctx, s->ins, err);
        if (st != LD_OK)
            return st;
        s->round_block = ctx.round_block;
        s->round_user = ctx.round_user;
        s->round_fp16_inline = ctx.round_block && ctx.round_fp16_inline;
        if (s->round_fp16_inline)
            ld_fuse_rounding_init(&s->rounding, s->round_block, s->round_user);
        for (int j = 0; j < s->n_args; j++) {
            arg *a = &s->args[j];
            const ld_tensor *t = s->ins[j];
            if (a->kind == ARG_STEP)
                continue;
            if (!t || t->dtype != LD_DTYPE_FLOAT32 || !t->data)
                return ld_error_set(err, LD_ERR_INTERNAL, "node '%s': fused input %d changed",
                                    node->name, j);
            if (a->kind == ARG_SCALAR)
                a->scalar = ((const float *)t->data)[0];
            else
                a->ptr = t->data;
        }
        if (s->op == LD_FUSE_CLIP && node->opset >= 11) {
            if (node->n_inputs > 1 && s->ins[1])
                s->a = ((const float *)s->ins[1]->data)[0];
            if (node->n_inputs > 2 && s->ins[2])
                s->b = ((const float *)s->ins[2]->data)[0];
        }
    }
    return LD_OK;
}

/* fuse_after for every node, in order. */
static ld_status hooks_after(ld_exec *e, chain *c, ld_error *err)
{
    for (int k = 0; k < c->n; k++) {
        step *s = &c->s[k];
        ld_tensor *outputs[1] = {s->keep ? s->out : NULL};
        ld_kernel_ctx ctx = step_ctx(e, s, outputs, err);
        ld_status st = e->hooks.fuse_after(e->hooks.user, &ctx, outputs, &s->counters, err);
        if (st != LD_OK)
            return st;
        if (outputs[0] != (s->keep ? s->out : NULL))
            return ld_error_set(err, LD_ERR_INTERNAL, "node '%s': fused output replaced",
                                e->graph->nodes[s->node].name);
    }
    return LD_OK;
}

/* Block `b` of the chain: plane b / per, offset (b % per) * FUSE_BLOCK. */
static void run_block(const chain *c, int64_t b, int64_t per, float *bufs)
{
    int64_t plane = b / per, off = (b % per) * FUSE_BLOCK;
    int64_t n = c->plane - off < FUSE_BLOCK ? c->plane - off : FUSE_BLOCK;
    int64_t at = plane * c->plane + off;
    int64_t channel = c->channels > 1 ? plane % c->channels : 0;
    const float *where[FUSE_MAX_STEPS];
    for (int k = 0; k < c->n; k++) {
        const step *s = &c->s[k];
        ld_fuse_arg x[2] = {{0}, {0}};
        for (int j = 0; j < s->n_args; j++) {
            const arg *a = &s->args[j];
            switch (a->kind) {
            case ARG_STEP: x[j].p = where[a->step]; break;
            case ARG_EXT: x[j].p = a->ptr + at; break;
            case ARG_CHAN: x[j].s = a->ptr[channel]; break;
            default: x[j].s = a->scalar; break;
            }
        }
        float *d = s->keep ? (float *)s->out->data + at
                           : bufs + (size_t)s->buf * (FUSE_BLOCK + FUSE_SKEW);
        /* the backend's rounding, before the next node reads the block:
         * in the op's loop where it can, else a pass over the block */
        if (s->round_fp16_inline) {
            if (!ld_fuse_apply_round_fp16(&s->rounding, s->op, d, x[0], x[1], s->a, s->b, n)) {
                ld_fuse_apply(s->op, d, x[0], x[1], s->a, s->b, n);
                ld_fuse_round_fp16(&s->rounding, d, n);
            }
        } else {
            ld_fuse_apply(s->op, d, x[0], x[1], s->a, s->b, n);
            if (s->round_block)
                s->round_block(s->round_user, 0, d, n);
        }
        where[k] = d;
    }
}

typedef struct {
    const chain *c;
    int64_t per;
} blocks_job;

static void run_blocks(void *job_arg, int worker, int64_t b0, int64_t b1)
{
    (void)worker;
    const blocks_job *j = job_arg;
    _Alignas(64) float bufs[FUSE_MAX_BUFS * (FUSE_BLOCK + FUSE_SKEW)];
    for (int64_t b = b0; b < b1; b++)
        run_block(j->c, b, j->per, bufs);
}

/* The blocks go through the convolutions' claim pool (conv_pool.h), not an
 * OpenMP region: a run alternates convolutions and chains, and with two
 * pools each parallel step woke the other pool's sleeping thread (~25-50 µs
 * here, and their spins took the CPU from each other); det on 2 threads,
 * Zen 5, interleaved: 0.5-2 ms less outside its convolutions. Blocks are
 * independent and counted with atomics, so which thread runs one changes
 * nothing. */
static void compute(const ld_exec *e, const chain *c)
{
    int64_t per = (c->plane + FUSE_BLOCK - 1) / FUSE_BLOCK;
    int64_t blocks = c->count / c->plane * per;
    int threads = e->threads > 1 && c->count >= LD_PARALLEL_MIN_WORK ? e->threads : 1;
    if (threads > blocks)
        threads = (int)blocks;
    blocks_job job = {c, per};
    ld_conv_pool_run(threads, blocks, ld_conv_pool_claim(blocks, threads), run_blocks, &job);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Installs the chain's values and folded Constants in node order, showing
 * each to the observer (non-materialised values with data NULL). */
static ld_status show(ld_exec *e, chain *c, int first, ld_tensor_observer observer, void *user,
                      ld_error *err)
{
    const ld_graph *g = e->graph;
    ld_status st = LD_OK;
    int k = 0;
    for (int i = first; st == LD_OK && i <= c->last_node; i++) {
        const ld_node *node = &g->nodes[i];
        ld_layer_counters counters = {0};
        if (e->nodes[i].folded) {
            e->slots[node->outputs[0]] = e->nodes[i].folded;
            st = ld_exec_observe(e, node, 0, node->outputs[0], e->nodes[i].folded,
                                 &e->nodes[i].numerics, &counters, observer, user, err);
            continue;
        }
        step *s = &c->s[k++];
        if (s->keep) {
            e->slots[s->value] = s->out;
            e->owned[s->value] = true;
            s->out = NULL;
            st = ld_exec_observe(e, node, 0, s->value, e->slots[s->value],
                                 &e->nodes[i].numerics, &s->counters, observer, user, err);
            continue;
        }
        ld_tensor *shown = NULL;
        st = ld_tensor_wrap(&shown, g->values[s->value].name, LD_DTYPE_FLOAT32, &c->shape, NULL,
                            err);
        if (st == LD_OK)
            st = ld_exec_observe(e, node, 0, s->value, shown, &e->nodes[i].numerics,
                                 &s->counters, observer, user, err);
        ld_tensor_destroy(shown);
    }
    return st;
}

ld_status ld_exec_fuse_run(ld_exec *e, int i, ld_tensor_observer observer, void *user,
                           int *covered, ld_error *err)
{
    *covered = 0;
    chain c;
    int end;
    fuse_view view = run_view(e);
    if (!plan(e, &view, &c, i, &end))
        return LD_OK;
    double started = now_seconds();
    e->current = &e->graph->nodes[i]; /* for the --max-memory message */
    bool hooked = e->hooks.fuse_before != NULL;
    ld_status st = hooked ? hooks_before(e, &c, err) : LD_OK;
    if (st == LD_OK)
        st = allocate_outputs(e, &c, err);
    if (st == LD_OK)
        compute(e, &c);
    if (st == LD_OK && hooked)
        st = hooks_after(e, &c, err);
    ld_exec_release_scratch(e);
    for (int k = 0; k < c.n; k++) { /* the donors' tensors no longer hold their buffers */
        if (c.s[k].donor >= 0 && st == LD_OK)
            e->slots[c.s[k].donor]->data = NULL;
        else if (c.s[k].donor >= 0 && c.s[k].out)
            c.s[k].out->data = NULL;
    }
    double share = (now_seconds() - started) / c.n;
    for (int j = i; j < end; j++)
        e->profile[j] = (ld_node_profile){e->nodes[j].folded ? 0 : share, 0};
    if (st == LD_OK)
        st = show(e, &c, i, observer, user, err);
    for (int k = 0; k < c.n; k++) /* not installed: failed before show */
        ld_exec_release_tensor(e, c.s[k].out);
    *covered = end - i;
    for (int j = i; j < end; j++)
        ld_exec_retire_node(e, j);
    e->fused_nodes += c.n;
    e->fused_chains++;
    return st;
}

bool ld_exec_fuse_dry(const ld_exec *e, const ld_tensor *const *slots, const bool *can_donate,
                      int i, ld_fuse_dry *out)
{
    chain c;
    int end;
    fuse_view view = {.slots = slots, .dry = true, .can_donate = can_donate};
    if (!e->fuse || !plan(e, &view, &c, i, &end))
        return false;
    *out = (ld_fuse_dry){.end = end, .shape = c.shape, .n = c.n};
    for (int k = 0; k < c.n; k++) {
        out->node[k] = c.s[k].node;
        out->value[k] = c.s[k].value;
        out->keep[k] = c.s[k].keep;
        out->donor[k] = -1;
        if (c.s[k].keep) { /* ld_exec_run donates */
            out->donor[k] = find_donor(e, &view, &c, k);
            c.s[k].donor = out->donor[k]; /* taken: later steps look for another */
        }
    }
    return true;
}
