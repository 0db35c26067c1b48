/* layerdiff — the executor's memory plan (see exec_plan.h).
 *
 * The pass mirrors, step by step, what ld_exec_step / ld_exec_finish_step
 * and ld_exec_compute_node (exec.c, exec_step.c) do with the pool:
 * widened float16/bfloat16 inputs (scratch), outputs (or, in ld_exec_run,
 * output 0 taking over a dying input's buffer: kernels/inplace.h), the
 * narrowing back to half, scratch freed after the node, outputs nobody
 * reads freed after the step, values freed after their last reader. Any
 * change there must be mirrored here: tests/test_exec_plan.c compares the
 * plan with real runs (sizes, peaks, the arena's top). */
#include "backends/exec_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/exec_fuse_ops.h"
#include "backends/exec_internal.h"
#include "layerdiff/memory.h"

/* Largest non-float value computed for real at prepare (shape arithmetic:
 * a few int64s); beyond it the pass gives up rather than spend the time. */
#define PLAN_REAL_MAX_BYTES ((size_t)1 << 20)

enum { MODE_RUN, MODE_STEP, N_MODES }; /* ld_exec_run (donation) and stepwise */

/* One buffer the run takes from the pool: its size and its block in each
 * mode's dry arena (none for an empty tensor, or a donated one). */
typedef struct sim_buf {
    size_t nbytes;
    bool has[N_MODES];
    ld_arena_block blk[N_MODES];
} sim_buf;

/* What the pass knows of a graph value while it is live. */
typedef struct plan_value {
    const ld_tensor *t; /* shape and dtype; data only when `real` */
    ld_tensor *own;     /* t when the pass made it (freed with the value) */
    bool real;          /* t->data holds the values (initializers, folded
                           Constants, shape arithmetic computed here) */
    bool owned;         /* the executor's: from the pool, freed when dead */
    sim_buf buf;
} plan_value;

typedef struct planner {
    const ld_exec *e;
    const ld_graph *g;
    plan_value *values;
    /* the walk of ld_exec_run with chain fusion (e->fuse): the live
       placeholders and the values holding a buffer, for ld_exec_fuse_dry */
    bool fused;
    const ld_tensor **view;
    bool *can_donate;
    ld_arena_sim *sim[N_MODES];
    size_t live, peak_run, peak_step;
    int peak_node, node;
    ld_exec_plan *plan;
    char *why;
    size_t why_size;
    bool prepare_kernels; /* ld_exec_plan_prepare: call the kernels' prepare */
} planner;

static bool give_up(planner *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool give_up(planner *p, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (p->why && p->why_size)
        snprintf(p->why, p->why_size, "%s", text);
    if (getenv("LD_EXEC_PLAN_DEBUG"))
        fprintf(stderr, "exec plan: no plan: %s\n", text);
    return false;
}

/* pool_tensor's get (exec.c): live bytes and both dry arenas; `checked`
 * false for a buffer taken over in place (no pool get, no peak update in
 * ld_exec_run; the stepwise run gets a fresh one). */
static bool sim_get(planner *p, size_t nbytes, sim_buf *b, const sim_buf *donor)
{
    *b = (sim_buf){.nbytes = nbytes};
    p->live += nbytes;
    for (int m = 0; m < N_MODES; m++) {
        if (m == MODE_RUN && donor) {
            b->has[m] = donor->has[m];
            b->blk[m] = donor->blk[m];
            continue;
        }
        if (nbytes && !ld_arena_sim_get(p->sim[m], nbytes, &b->blk[m]))
            return give_up(p, "out of memory in the dry arena");
        b->has[m] = nbytes > 0;
    }
    if (!donor && p->live > p->peak_run) {
        p->peak_run = p->live;
        p->peak_node = p->node;
    }
    if (p->live > p->peak_step)
        p->peak_step = p->live;
    return true;
}

static void sim_put(planner *p, sim_buf *b)
{
    p->live -= b->nbytes;
    for (int m = 0; m < N_MODES; m++)
        if (b->has[m])
            ld_arena_sim_put(p->sim[m], b->blk[m]);
    *b = (sim_buf){0};
}

/* release_slot (exec_step.c). */
static void release_value(planner *p, int v)
{
    plan_value *pv = &p->values[v];
    if (v < 0 || !pv->owned)
        return;
    sim_put(p, &pv->buf);
    ld_tensor_destroy(pv->own);
    *pv = (plan_value){0};
}

static bool is_half(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT16 || d == LD_DTYPE_BFLOAT16;
}

static bool is_graph_attr(const ld_attr *a)
{
    return a->type == LD_ATTR_GRAPH || a->type == LD_ATTR_GRAPHS;
}

/* Nodes the pass does not follow: control flow (subgraphs, implicit
 * inputs) and values that are not tensors (sequences, maps, optionals). */
static bool unplannable(planner *p, const ld_node *node)
{
    if (node->n_implicit_inputs > 0)
        return give_up(p, "node '%s' (%s) reads outer-scope values", node->name, node->op_type),
               true;
    for (int a = 0; a < node->n_attrs; a++)
        if (is_graph_attr(&node->attrs[a]))
            return give_up(p, "node '%s' (%s) has a subgraph", node->name, node->op_type), true;
    for (int j = 0; j < node->n_inputs + node->n_outputs; j++) {
        int v = j < node->n_inputs ? node->inputs[j] : node->outputs[j - node->n_inputs];
        ld_type_kind k = v >= 0 ? p->g->values[v].type.kind : LD_TYPE_TENSOR;
        if (k != LD_TYPE_TENSOR && k != LD_TYPE_UNKNOWN)
            return give_up(p, "node '%s' (%s) handles a non-tensor value", node->name,
                           node->op_type),
                   true;
    }
    return false;
}

/* Kernels whose compute reads only the input's shape. */
static bool reads_shape_only(const ld_node *node)
{
    return (!node->domain[0] || strcmp(node->domain, "ai.onnx") == 0) &&
           (strcmp(node->op_type, "Shape") == 0 || strcmp(node->op_type, "Size") == 0);
}

typedef struct node_io {
    const ld_tensor **in;   /* as the kernel sees them */
    sim_buf *scratch;       /* widened inputs */
    int n_scratch;
    ld_tensor **out;        /* placeholders or real tensors, per output */
    sim_buf *out_buf;
    ld_output_desc *descs;
    bool all_real;          /* every present input holds its values */
} node_io;

/* gather_inputs (exec.c): the tensors the kernel sees, float16/bfloat16
 * widened to float32 scratch for WIDEN_HALF kernels. */
static bool plan_inputs(planner *p, const ld_node *node, const ld_kernel *k, node_io *io,
                        ld_dtype *widened_from)
{
    bool input0_full_float = false;
    *widened_from = LD_DTYPE_UNDEFINED;
    io->all_real = true;
    for (int j = 0; j < node->n_inputs; j++) {
        int v = node->inputs[j];
        io->in[j] = NULL;
        if (v < 0)
            continue;
        const ld_value *val = &p->g->values[v];
        if (val->kind == LD_VALUE_INITIALIZER) {
            if (!val->initializer || (!val->initializer->data && val->initializer->nbytes))
                return give_up(p, "initializer '%s' has no data", val->name);
            io->in[j] = val->initializer;
        } else if (p->values[v].t) {
            io->in[j] = p->values[v].t;
            io->all_real &= p->values[v].real;
        } else {
            return give_up(p, "node '%s': input '%s' is not computed", node->name, val->name);
        }
        if (j == 0 && ld_dtype_is_float(io->in[0]->dtype) && !is_half(io->in[0]->dtype))
            input0_full_float = true;
        if ((k->flags & LD_KERNEL_WIDEN_HALF) && is_half(io->in[j]->dtype)) {
            if (*widened_from == LD_DTYPE_UNDEFINED)
                *widened_from = io->in[j]->dtype;
            ld_tensor *w = NULL;
            if (ld_tensor_wrap(&w, io->in[j]->name, LD_DTYPE_FLOAT32, &io->in[j]->shape, NULL,
                               NULL) != LD_OK)
                return give_up(p, "node '%s': cannot widen input %d", node->name, j);
            sim_buf *b = &io->scratch[io->n_scratch];
            /* the placeholder travels with its scratch buffer: freed at the end of the node */
            io->out[node->n_outputs + io->n_scratch++] = w;
            io->in[j] = w;
            io->all_real = false; /* widened values are not computed here */
            if (!sim_get(p, w->nbytes, b, NULL))
                return false;
        }
    }
    if (input0_full_float)
        *widened_from = LD_DTYPE_UNDEFINED;
    return true;
}

/* donate_input (exec.c), ld_exec_run only: the first input dying here,
 * the executor's, with a buffer, of output 0's dtype and shape. */
static const sim_buf *donor_of(planner *p, const ld_node *node, const ld_output_desc *d)
{
    if (!p->e->nodes[node->index].inplace)
        return NULL;
    for (int k = 0; k < node->n_inputs; k++) {
        int v = node->inputs[k];
        plan_value *pv = v >= 0 ? &p->values[v] : NULL;
        if (!pv || !pv->owned || p->e->last_use[v] != node->index || !pv->buf.nbytes ||
            pv->t->dtype != d->dtype || !ld_shape_equal(&pv->t->shape, &d->shape))
            continue;
        return &pv->buf;
    }
    return NULL;
}

/* The donor's buffer now belongs to the output in ld_exec_run: the input
 * releases no block there when it dies (its bytes still count). */
static void settle_donor(planner *p, const ld_node *node, const sim_buf *donor)
{
    for (int k = 0; k < node->n_inputs; k++) {
        int v = node->inputs[k];
        if (v >= 0 && &p->values[v].buf == donor) {
            p->values[v].buf.has[MODE_RUN] = false;
            return;
        }
    }
}

/* Whether the node is computed here for real: it makes non-float values
 * (shape arithmetic) that a later infer may read. Requires inputs that
 * hold their values (Shape and Size read shapes only), no hook that may
 * round them, and small outputs. */
static bool plan_real(planner *p, const ld_node *node, const node_io *io, bool *real)
{
    const exec_node *xn = &p->e->nodes[node->index];
    bool any_float = false, any_other = false;
    size_t bytes = 0;
    for (int j = 0; j < node->n_outputs; j++) {
        if (node->outputs[j] < 0)
            continue;
        if (io->descs[j].deferred)
            return give_up(p, "node '%s' (%s): output %d is shaped by its values", node->name,
                           node->op_type, j);
        size_t size = ld_dtype_size(io->descs[j].dtype);
        if (!size)
            return give_up(p, "node '%s' (%s): output %d is of type %s", node->name,
                           node->op_type, j, ld_dtype_name(io->descs[j].dtype));
        int64_t count;
        size_t nbytes;
        if (ld_shape_count(&io->descs[j].shape, &count, "", NULL) != LD_OK ||
            ld_shape_nbytes(count, size, &nbytes, "", NULL) != LD_OK)
            return give_up(p, "node '%s' (%s): output %d is too large", node->name,
                           node->op_type, j);
        bytes += nbytes;
        if (ld_dtype_is_float(io->descs[j].dtype))
            any_float = true;
        else
            any_other = true;
    }
    *real = false;
    if (!any_other)
        return true;
    bool hooked = p->e->hooks.before_compute || p->e->hooks.after_compute;
    if (hooked && (any_float || xn->numerics.precision != LD_PRECISION_FP32))
        return give_up(p, "node '%s' (%s): computed non-float value under rounding hooks",
                       node->name, node->op_type);
    if (!io->all_real && !reads_shape_only(node))
        return give_up(p, "node '%s' (%s): non-float output computed from unknown values",
                       node->name, node->op_type);
    if (bytes > PLAN_REAL_MAX_BYTES)
        return give_up(p, "node '%s' (%s): non-float output of %zu bytes", node->name,
                       node->op_type, bytes);
    *real = true;
    return true;
}

/* Runs the kernel on the real tensors made for its outputs. */
static bool compute_real(planner *p, const ld_node *node, node_io *io)
{
    const exec_node *xn = &p->e->nodes[node->index];
    ld_layer_counters counters = {0};
    ld_error err;
    ld_error_clear(&err);
    ld_kernel_ctx ctx = {
        .graph = p->g, .node = node, .n_inputs = node->n_inputs, .inputs = io->in,
        .n_outputs = node->n_outputs, .outputs = io->out, .state = xn->state, .threads = 1,
        .numerics = &xn->numerics, .counters = &counters, .err = &err,
        .exec = (ld_exec *)p->e,
    };
    if (xn->kernel->compute(&ctx) != LD_OK)
        return give_up(p, "node '%s' (%s): computing it failed: %s", node->name, node->op_type,
                       err.message);
    return true;
}

/* ld_exec_retire_node (exec_step.c): outputs nobody reads, then the
 * values that die at the node. */
static void retire_node(planner *p, const ld_node *node)
{
    for (int j = 0; j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (v >= 0 && p->e->last_use[v] < 0)
            release_value(p, v);
    }
    for (int j = 0; j < node->n_inputs; j++) {
        int v = node->inputs[j];
        if (v >= 0 && p->e->last_use[v] == node->index)
            release_value(p, v);
    }
}

/* One node: ld_exec_step's compute and install, then finish_step. */
static bool plan_node(planner *p, int i, node_io *io)
{
    const ld_node *node = &p->g->nodes[i];
    const exec_node *xn = &p->e->nodes[i];
    p->node = i;
    io->n_scratch = 0;
    for (int j = 0; j < node->n_outputs + node->n_inputs; j++)
        io->out[j] = NULL;
    if (xn->folded) { /* borrowed, never from the pool */
        p->values[node->outputs[0]] = (plan_value){.t = xn->folded, .real = true};
    } else {
        if (unplannable(p, node))
            return false;
        ld_dtype widened_from;
        if (!plan_inputs(p, node, xn->kernel, io, &widened_from))
            return false;
        ld_layer_counters counters = {0};
        ld_error err;
        ld_error_clear(&err);
        ld_kernel_ctx ctx = {
            .graph = p->g, .node = node, .n_inputs = node->n_inputs, .inputs = io->in,
            .n_outputs = node->n_outputs, .outputs = io->out, .state = xn->state,
            .threads = p->e->threads, .numerics = &xn->numerics, .counters = &counters,
            .err = &err, .exec = (ld_exec *)p->e,
        };
        for (int j = 0; j < node->n_outputs; j++)
            io->descs[j] = (ld_output_desc){0};
        if (xn->kernel->infer(&ctx, io->descs) != LD_OK)
            return give_up(p, "node '%s' (%s): infer failed: %s", node->name, node->op_type,
                           err.message);
        /* the kernel's own set-up (kernel.h), but not under hooks that hand
           compute other inputs (the emulated engine's rounded weights): what
           it prepared from these would go unused */
        if (p->prepare_kernels && xn->kernel->prepare && !p->e->hooks.before_compute) {
            xn->kernel->prepare(&ctx);
            ld_error_clear(&err);
        }
        bool real;
        if (!plan_real(p, node, io, &real))
            return false;
        for (int j = 0; j < node->n_outputs; j++) {
            int v = node->outputs[j];
            if (v < 0)
                continue;
            const ld_output_desc *d = &io->descs[j];
            const char *name = p->g->values[v].name;
            ld_status st = real ? ld_tensor_create(&io->out[j], name, d->dtype, &d->shape, NULL)
                                : ld_tensor_wrap(&io->out[j], name, d->dtype, &d->shape, NULL,
                                                 NULL);
            if (st != LD_OK)
                return give_up(p, "node '%s': output %d cannot be made", node->name, j);
            const sim_buf *donor = j == 0 ? donor_of(p, node, d) : NULL;
            if (!sim_get(p, io->out[j]->nbytes, &io->out_buf[j], donor))
                return false;
            if (donor)
                settle_donor(p, node, donor);
        }
        if (real && !compute_real(p, node, io))
            return false;
        /* narrow_output (exec.c): float32 results of widened inputs back to half */
        for (int j = 0; j < node->n_outputs; j++) {
            int v = node->outputs[j];
            if (v < 0 || widened_from == LD_DTYPE_UNDEFINED ||
                io->out[j]->dtype != LD_DTYPE_FLOAT32 ||
                ld_dtype_is_float(xn->numerics.output_type))
                continue;
            ld_dtype declared = p->g->values[v].type.dtype, target = widened_from;
            if (ld_dtype_is_float(declared))
                target = declared;
            if (!is_half(target))
                continue;
            ld_tensor *narrow = NULL;
            sim_buf nb;
            if (ld_tensor_wrap(&narrow, io->out[j]->name, target, &io->out[j]->shape, NULL,
                               NULL) != LD_OK)
                return give_up(p, "node '%s': output %d cannot be narrowed", node->name, j);
            bool ok = sim_get(p, narrow->nbytes, &nb, NULL);
            sim_put(p, &io->out_buf[j]);
            ld_tensor_destroy(io->out[j]);
            io->out[j] = narrow;
            io->out_buf[j] = nb;
            if (!ok)
                return false;
        }
        /* release_scratch, then the outputs go to their slots */
        for (int s = 0; s < io->n_scratch; s++) {
            sim_put(p, &io->scratch[s]);
            ld_tensor_destroy(io->out[node->n_outputs + s]);
            io->out[node->n_outputs + s] = NULL;
        }
        io->n_scratch = 0;
        for (int j = 0; j < node->n_outputs; j++) {
            int v = node->outputs[j];
            if (v < 0)
                continue;
            p->plan->value_bytes[v] = io->out_buf[j].nbytes;
            p->values[v] = (plan_value){.t = io->out[j], .own = io->out[j], .real = real,
                                        .owned = true, .buf = io->out_buf[j]};
            io->out[j] = NULL;
        }
    }
    retire_node(p, node);
    return true;
}

/* ld_exec_fuse_run (exec_fuse.c), the fused walk only: the chain's
 * materialised values from the pool or over a dying input's buffer (all
 * before it computes), then every node of it retired in order as
 * ld_exec_retire_node does. Values that live only in block buffers take
 * nothing. The stepwise arena is not meaningful in this walk. */
static bool plan_chain(planner *p, int first, const ld_fuse_dry *d)
{
    p->node = first;
    for (int k = 0; k < d->n; k++) {
        if (!d->keep[k])
            continue;
        int v = d->value[k];
        ld_tensor *t = NULL;
        if (ld_tensor_wrap(&t, p->g->values[v].name, LD_DTYPE_FLOAT32, &d->shape, NULL,
                           NULL) != LD_OK)
            return give_up(p, "node '%s': output cannot be made", p->g->nodes[d->node[k]].name);
        const sim_buf *donor = d->donor[k] >= 0 ? &p->values[d->donor[k]].buf : NULL;
        sim_buf b;
        bool ok = sim_get(p, t->nbytes, &b, donor);
        if (donor)
            p->values[d->donor[k]].buf.has[MODE_RUN] = false;
        p->values[v] = (plan_value){.t = t, .own = t, .owned = true, .buf = b};
        if (!ok)
            return false;
    }
    for (int i = first; i < d->end; i++) {
        const ld_node *node = &p->g->nodes[i];
        const exec_node *xn = &p->e->nodes[i];
        if (xn->folded)
            p->values[node->outputs[0]] = (plan_value){.t = xn->folded, .real = true};
        retire_node(p, node);
    }
    return true;
}

/* Node i in the fused walk: the chain starting there (*next: the node
 * after it), or the node alone. */
static bool plan_step(planner *p, int i, node_io *io, int *next)
{
    *next = i + 1;
    if (p->fused && p->e->nodes[i].fuse_op != LD_FUSE_NONE) {
        for (int v = 0; v < p->g->n_values; v++) {
            const plan_value *pv = &p->values[v];
            p->view[v] = pv->t;
            p->can_donate[v] = pv->owned && pv->buf.has[MODE_RUN];
        }
        ld_fuse_dry d;
        if (ld_exec_fuse_dry(p->e, p->view, p->can_donate, i, &d)) {
            *next = d.end;
            return plan_chain(p, i, &d);
        }
    }
    return plan_node(p, i, io);
}

/* The graph inputs: placeholders of the given shapes and declared dtypes
 * (borrowed by the run: no pool buffer). */
static bool plan_graph_inputs(planner *p, const ld_shape *shapes)
{
    for (int k = 0; k < p->g->n_inputs; k++) {
        int v = p->g->inputs[k];
        const ld_value *val = &p->g->values[v];
        if (val->type.kind != LD_TYPE_TENSOR || !ld_dtype_size(val->type.dtype))
            return give_up(p, "graph input '%s' has no tensor type", val->name);
        ld_tensor *t = NULL;
        if (ld_tensor_wrap(&t, val->name, val->type.dtype, &shapes[k], NULL, NULL) != LD_OK)
            return give_up(p, "graph input '%s': bad shape", val->name);
        p->values[v] = (plan_value){.t = t, .own = t};
    }
    return true;
}

static void planner_free(planner *p, node_io *io, int max_io)
{
    if (p->values)
        for (int v = 0; v < p->g->n_values; v++)
            ld_tensor_destroy(p->values[v].own);
    if (io->out)
        for (int j = 0; j < max_io; j++)
            ld_tensor_destroy(io->out[j]);
    free(p->values);
    free(io->in);
    free(io->scratch);
    free(io->out);
    free(io->out_buf);
    free(io->descs);
    for (int m = 0; m < N_MODES; m++)
        ld_arena_sim_destroy(p->sim[m]);
}

/* One walk over the graph: ld_exec_run without fusion and the stepwise
 * run side by side (fused false), or ld_exec_run with chain fusion; with
 * prepare_kernels, calling each kernel's prepare on the way. */
static bool walk(const ld_exec *e, const ld_shape *input_shapes, bool fused, ld_exec_plan *plan,
                 char *why, size_t why_size, bool prepare_kernels)
{
    const ld_graph *g = e->graph;
    planner p = {.e = e, .g = g, .plan = plan, .why = why, .why_size = why_size,
                 .peak_node = -1, .fused = fused, .prepare_kernels = prepare_kernels};
    *plan = (ld_exec_plan){.n_values = g->n_values, .peak_node = -1};
    int max_in = 1, max_out = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        max_in = g->nodes[i].n_inputs > max_in ? g->nodes[i].n_inputs : max_in;
        max_out = g->nodes[i].n_outputs > max_out ? g->nodes[i].n_outputs : max_out;
    }
    int max_io = max_in + max_out;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    node_io io = {
        .in = calloc((size_t)max_in, sizeof *io.in),
        .scratch = calloc((size_t)max_in, sizeof *io.scratch),
        .out = calloc((size_t)max_io, sizeof *io.out),
        .out_buf = calloc((size_t)max_out, sizeof *io.out_buf),
        .descs = calloc((size_t)max_out, sizeof *io.descs),
    };
    p.values = calloc(nv, sizeof *p.values);
    p.view = fused ? calloc(nv, sizeof *p.view) : NULL;
    p.can_donate = fused ? calloc(nv, sizeof *p.can_donate) : NULL;
    plan->value_bytes = calloc(nv, sizeof *plan->value_bytes);
    for (int m = 0; m < N_MODES; m++)
        p.sim[m] = ld_arena_sim_create();
    bool ok = io.in && io.scratch && io.out && io.out_buf && io.descs && p.values &&
              plan->value_bytes && p.sim[0] && p.sim[1] &&
              (!fused || (p.view && p.can_donate));
    if (!ok)
        give_up(&p, "out of memory");
    if (ok)
        ok = plan_graph_inputs(&p, input_shapes);
    for (int i = 0, next; ok && i < g->n_nodes; i = next)
        ok = plan_step(&p, i, &io, &next);
    if (ok) {
        plan->peak_live = p.peak_step;
        plan->peak_checked_run = p.peak_run;
        plan->peak_node = p.peak_node;
        plan->top_run = ld_arena_sim_top(p.sim[MODE_RUN]);
        plan->top_stepwise = ld_arena_sim_top(p.sim[MODE_STEP]);
        plan->exact = !e->hooks.before_compute && !e->hooks.after_compute;
    } else {
        ld_exec_plan_clear(plan);
    }
    free(p.view);
    free(p.can_donate);
    planner_free(&p, &io, max_io);
    return ok;
}

static bool plan_build(const ld_exec *e, const ld_shape *input_shapes, ld_exec_plan *plan,
                       char *why, size_t why_size, bool prepare_kernels)
{
    if (!walk(e, input_shapes, false, plan, why, why_size, prepare_kernels))
        return false;
    if (!e->fuse)
        return true;
    /* This executor's ld_exec_run fuses chains: its figures come from a
     * walk that fuses as it will; the stepwise ones stay. */
    ld_exec_plan fused;
    if (!walk(e, input_shapes, true, &fused, why, why_size, false)) {
        ld_exec_plan_clear(plan);
        return false;
    }
    plan->peak_checked_run = fused.peak_checked_run;
    plan->peak_node = fused.peak_node;
    plan->top_run = fused.top_run;
    ld_exec_plan_clear(&fused);
    return true;
}

bool ld_exec_plan_build(const ld_exec *e, const ld_shape *input_shapes, ld_exec_plan *plan,
                        char *why, size_t why_size)
{
    return plan_build(e, input_shapes, plan, why, why_size, false);
}

void ld_exec_plan_clear(ld_exec_plan *plan)
{
    free(plan->value_bytes);
    *plan = (ld_exec_plan){.peak_node = -1};
}

/* What the run holds besides its layer outputs, as set_memory_limit
 * (exec_step.c) declares it: initializers and inputs. */
static uint64_t resident_bytes(const ld_graph *g, const ld_shape *shapes)
{
    uint64_t total = 0;
    for (int k = 0; k < g->n_initializers; k++) {
        const ld_tensor *t = g->values[g->initializers[k]].initializer;
        total += t ? t->nbytes : 0;
    }
    for (int k = 0; k < g->n_inputs; k++) {
        int64_t count;
        size_t nbytes = 0;
        ld_dtype d = g->values[g->inputs[k]].type.dtype;
        if (ld_shape_count(&shapes[k], &count, "", NULL) == LD_OK &&
            ld_shape_nbytes(count, ld_dtype_size(d), &nbytes, "", NULL) == LD_OK)
            total += nbytes;
    }
    return total;
}

ld_status ld_exec_plan_prepare(ld_exec *e, const ld_shape *input_shapes, ld_error *err)
{
    ld_exec_plan plan;
    if (!input_shapes || !plan_build(e, input_shapes, &plan, NULL, 0, true))
        return LD_OK;
    uint64_t limit = ld_memory_limit();
    uint64_t resident = resident_bytes(e->graph, input_shapes);
    /* Sure to fail only when exact: with hooks the emulated engine may hold
     * less of a value than planned (graph outputs it delivers as float16). The
     * smaller peak (ld_exec_run's, which does not check buffers taken over in
     * place) plus weights and inputs already passes the limit at an
     * allocation the run checks, whatever the other executors hold. (No
     * allocation at all: weights and inputs alone are the CLI's estimate's.) */
    if (plan.exact && limit && plan.peak_node >= 0 && plan.peak_checked_run + resident > limit) {
        const ld_node *at = &e->graph->nodes[plan.peak_node];
        char need[32], live[32], res[32], lim[32];
        ld_status st = ld_error_set(
            err, LD_ERR_NOMEM,
            "memory plan: the run needs %s (%s of layer outputs alive at node '%s' (%s) and %s "
            "of weights and inputs), more than the memory limit %s (--max-memory)",
            ld_memory_format(plan.peak_checked_run + resident, need, sizeof need),
            ld_memory_format(plan.peak_checked_run, live, sizeof live), at->name, at->op_type,
            ld_memory_format(resident, res, sizeof res), ld_memory_format(limit, lim, sizeof lim));
        ld_exec_plan_clear(&plan);
        return st;
    }
    /* Stepwise runs (the lockstep comparison) and ld_exec_run lay buffers
     * out differently; the prepare cannot know which comes, so it faults
     * the smaller top, which either run reaches. */
    size_t top = plan.top_run < plan.top_stepwise ? plan.top_run : plan.top_stepwise;
    ld_pool_prefault(e->pool, top);
    ld_exec_plan_clear(&plan);
    return LD_OK;
}

size_t ld_exec_plan_prefaulted(const ld_exec *e)
{
    return ld_pool_prefaulted(e->pool);
}
