/* layerdiff — the graph executor's run: ld_exec_begin / step /
 * finish_step / end, ld_exec_run and ld_exec_run_node_on (see exec.h). */
#include "backends/exec_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "layerdiff/memory.h"

static ld_status check_input(const ld_graph *g, int value, const ld_tensor *t, ld_error *err)
{
    const ld_value *v = &g->values[value];
    char got[128], want[160];
    if (!t)
        return ld_error_set(err, LD_ERR_INPUT, "input '%s': no tensor given", v->name);
    if (v->type.dtype != LD_DTYPE_UNDEFINED && v->type.dtype != t->dtype)
        return ld_error_set(err, LD_ERR_INPUT, "input '%s': the model expects %s, got %s",
                            v->name, ld_dtype_name(v->type.dtype), ld_dtype_name(t->dtype));
    if (!v->type.has_shape)
        return LD_OK;
    bool ok = v->type.rank == t->shape.rank;
    for (int i = 0; ok && i < v->type.rank; i++)
        if (v->type.dims[i].value >= 0 && v->type.dims[i].value != t->shape.dims[i])
            ok = false;
    if (ok)
        return LD_OK;
    size_t used = 0;
    want[0] = '\0';
    for (int i = 0; i < v->type.rank && used < sizeof want; i++) {
        const ld_dim *d = &v->type.dims[i];
        int n = d->value >= 0
                    ? snprintf(want + used, sizeof want - used, "%s%" PRId64, i ? "x" : "", d->value)
                    : snprintf(want + used, sizeof want - used, "%s%s", i ? "x" : "",
                               d->param ? d->param : "?");
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (v->type.rank == 0)
        snprintf(want, sizeof want, "scalar");
    return ld_error_set(err, LD_ERR_INPUT, "input '%s': the model expects shape %s, got %s",
                        v->name, want, ld_shape_format(&t->shape, got, sizeof got));
}

static void release_slot(ld_exec *e, int v)
{
    if (v >= 0 && e->owned[v]) {
        ld_exec_release_tensor(e, e->slots[v]);
        e->slots[v] = NULL;
        e->owned[v] = false;
    }
}

/* Frees every value whose last reader is node i. */
static void free_dead_values(ld_exec *e, const ld_node *node)
{
    for (int j = 0; j < node->n_inputs + node->n_implicit_inputs; j++) {
        int v = j < node->n_inputs ? node->inputs[j] : node->implicit_inputs[j - node->n_inputs];
        if (v >= 0 && e->last_use[v] == node->index)
            release_slot(e, v);
    }
}

ld_status ld_exec_observe(ld_exec *e, const ld_node *node, int output_index, int value,
                          const ld_tensor *t, const ld_layer_numerics *numerics,
                          const ld_layer_counters *counters, ld_tensor_observer observer,
                          void *user, ld_error *err)
{
    if (!observer)
        return LD_OK;
    ld_tensor_event ev = {
        .graph = e->graph, .node = node, .output_index = output_index, .value = value,
        .tensor = t, .precision = numerics ? numerics->precision : LD_PRECISION_FP32,
    };
    if (counters)
        ev.counters = *counters;
    return observer(user, &ev, err);
}

static void clear_slots(ld_exec *e)
{
    for (int v = 0; v < e->graph->n_values; v++) {
        if (e->owned[v])
            ld_exec_release_tensor(e, e->slots[v]);
        e->slots[v] = NULL;
        e->owned[v] = false;
    }
}

/* The limit of this run and what it holds besides the executor's tensors. */
static void set_memory_limit(ld_exec *e, const ld_tensor *const *inputs)
{
    const ld_graph *g = e->graph;
    e->max_bytes = ld_memory_limit();
    e->over_limit = false;
    e->current = NULL;
    e->resident_bytes = 0;
    for (int k = 0; k < g->n_initializers; k++) {
        const ld_tensor *t = g->values[g->initializers[k]].initializer;
        e->resident_bytes += t ? t->nbytes : 0;
    }
    for (int j = 0; j < g->n_inputs; j++)
        e->resident_bytes += inputs[j]->nbytes;
    /* shared with the run's other executors (same graph, same inputs): counted
       once; folded constants are this executor's own, held in the budget */
    ld_memory_set_resident(e->resident_bytes);
    for (int i = 0; i < g->n_nodes; i++)
        e->resident_bytes += e->nodes[i].folded ? e->nodes[i].folded->nbytes : 0;
}

ld_status ld_exec_begin(ld_exec *e, const ld_tensor *const *inputs, ld_tensor_observer observer,
                        void *user, ld_error *err)
{
    const ld_graph *g = e->graph;
    ld_status st = LD_OK;
    clear_slots(e); /* a run that was never ended */
    e->running = false;
    e->live_bytes = 0;
    e->peak_bytes = 0;
    memset(e->profile, 0, (size_t)g->n_nodes * sizeof *e->profile);
    e->fused_nodes = e->fused_chains = 0;
    if (!inputs && g->n_inputs > 0)
        return ld_error_set(err, LD_ERR_INPUT, "graph '%s' has %d inputs and none were given",
                            g->name, g->n_inputs);
    for (int j = 0; j < g->n_inputs; j++) {
        st = check_input(g, g->inputs[j], inputs[j], err);
        if (st != LD_OK)
            goto out;
        e->slots[g->inputs[j]] = (ld_tensor *)inputs[j]; /* borrowed, never written */
    }
    set_memory_limit(e, inputs);
    for (int j = 0; st == LD_OK && j < g->n_inputs; j++)
        st = ld_exec_observe(e, NULL, 0, g->inputs[j], inputs[j], NULL, NULL, observer, user, err);
out:
    if (st != LD_OK) {
        clear_slots(e);
        return st;
    }
    e->running = true;
    e->next_node = 0;
    e->pending = -1;
    return LD_OK;
}

ld_status ld_exec_step(ld_exec *e, int i, ld_tensor_observer observer, void *user, ld_error *err)
{
    const ld_graph *g = e->graph;
    if (!e->running || i != e->next_node || e->pending >= 0)
        return ld_error_set(err, LD_ERR_INTERNAL, "executor: step %d out of order (next %d%s)",
                            i, e->next_node, e->running ? "" : ", no run begun");
    const ld_node *node = &g->nodes[i];
    ld_tensor **outputs = e->out_buf;
    ld_layer_counters counters = {0};
    ld_node_profile prof;
    e->next_node = i + 1;
    e->pending = i;
    if (e->nodes[i].folded) { /* a Constant's attribute: borrowed, never written */
        e->slots[node->outputs[0]] = e->nodes[i].folded;
        e->profile[i] = (ld_node_profile){0};
        return ld_exec_observe(e, node, 0, node->outputs[0], e->nodes[i].folded, &e->nodes[i].numerics,
                       &counters, observer, user, err);
    }
    ld_status st = ld_exec_compute_node(e, i, &counters, &prof, err);
    if (st != LD_OK)
        return st;
    e->profile[i] = prof;
    /* Install outputs and show them to the observer; ld_exec_finish_step
     * drops what is dead. */
    for (int j = 0; j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (v < 0) {
            ld_exec_release_tensor(e, outputs[j]);
        } else {
            e->slots[v] = outputs[j];
            e->owned[v] = true;
        }
        outputs[j] = NULL;
    }
    const ld_layer_numerics *numerics = &e->nodes[i].numerics;
    for (int j = 0; st == LD_OK && j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (v >= 0)
            st = ld_exec_observe(e, node, j, v, e->slots[v], numerics, &counters, observer, user, err);
    }
    return st;
}

void ld_exec_retire_node(ld_exec *e, int i)
{
    const ld_node *node = &e->graph->nodes[i];
    for (int j = 0; j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (v >= 0 && e->last_use[v] < 0)
            release_slot(e, v);
    }
    free_dead_values(e, node);
}

void ld_exec_finish_step(ld_exec *e, int i)
{
    if (e->pending != i)
        return;
    ld_exec_retire_node(e, i);
    e->pending = -1;
}

const ld_tensor *ld_exec_value(const ld_exec *e, int v)
{
    if (v < 0 || v >= e->graph->n_values)
        return NULL;
    const ld_value *val = &e->graph->values[v];
    if (val->kind == LD_VALUE_INITIALIZER)
        return val->initializer;
    return e->slots[v];
}

void ld_exec_end(ld_exec *e)
{
    clear_slots(e);
    e->running = false;
    e->pending = -1;
}

ld_status ld_exec_run_node_on(ld_exec *e, int i, const ld_tensor *const *inputs,
                              ld_tensor_observer observer, void *user, ld_error *err)
{
    const ld_graph *g = e->graph;
    if (i < 0 || i >= g->n_nodes)
        return ld_error_set(err, LD_ERR_INTERNAL, "executor: no node %d", i);
    const ld_node *node = &g->nodes[i];
    ld_layer_counters counters = {0};
    ld_node_profile prof;
    e->foreign = inputs;
    ld_status st = ld_exec_compute_node(e, i, &counters, &prof, err);
    e->foreign = NULL;
    if (st != LD_OK)
        return st;
    for (int j = 0; st == LD_OK && j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (v >= 0)
            st = ld_exec_observe(e, node, j, v, e->out_buf[j], &e->nodes[i].numerics, &counters,
                         observer, user, err);
    }
    ld_exec_release_outputs(e, node, e->out_buf);
    return st;
}

ld_status ld_exec_run(ld_exec *e, const ld_tensor *const *inputs, ld_tensor_observer observer,
                      void *user, ld_error *err)
{
    ld_status st = ld_exec_begin(e, inputs, observer, user, err);
    e->donate = true; /* nobody reads a node's inputs after it: they may be overwritten */
    for (int i = 0; st == LD_OK && i < e->graph->n_nodes;) {
        int covered = 0;
        if (e->fuse) /* a chain of elementwise nodes at once (exec_fuse.c) */
            st = ld_exec_fuse_run(e, i, observer, user, &covered, err);
        if (covered > 0) {
            i += covered;
            e->next_node = i;
            continue;
        }
        if (st == LD_OK)
            st = ld_exec_step(e, i, observer, user, err);
        ld_exec_finish_step(e, i);
        i++;
    }
    e->donate = false;
    ld_exec_end(e);
    return st;
}
