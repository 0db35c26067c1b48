/* layerdiff — the bisect runner's passes over the reference (see trial.c):
 * the baseline (reference, test engine and isolated layers in lockstep, into
 * a comparison session) and captures of reference tensors for `reduce`. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/trial_internal.h"

/* --- the baseline ------------------------------------------------------------------------ */

typedef struct pass_ctx {
    ld_trials *t;
    const ld_node *node;
    ld_tensor **hold;   /* per output index: the node's isolated output (owned copies) */
    int max_outputs;
} pass_ctx;

/* The reference's tensors: graph outputs are kept for every trial. */
static ld_status on_reference(void *user, const ld_tensor_event *ev, ld_error *err)
{
    ld_trials *t = user;
    int k = t->output_of[ev->value];
    if (k < 0 || t->ref_outputs[k])
        return LD_OK;
    return ld_tensor_clone(&t->ref_outputs[k], ev->tensor, NULL, err);
}

static ld_status on_isolated(void *user, const ld_tensor_event *ev, ld_error *err)
{
    pass_ctx *p = user;
    int j = ev->output_index;
    if (ev->node != p->node || j < 0 || j >= p->node->n_outputs || p->hold[j])
        return ld_error_set(err, LD_ERR_INTERNAL, "bisect: unexpected isolated output of "
                            "node '%s'", p->node->name);
    return ld_tensor_clone(&p->hold[j], ev->tensor, NULL, err);
}

static void release_holds(pass_ctx *p)
{
    for (int j = 0; j < p->max_outputs; j++) {
        ld_tensor_destroy(p->hold[j]);
        p->hold[j] = NULL;
    }
}

static ld_status add_inputs(ld_trials *t, ld_error *err)
{
    for (int k = 0; k < t->g->n_inputs; k++) {
        const ld_value *v = &t->g->values[t->g->inputs[k]];
        ld_compare_item item = {.name = v->name, .node = "", .op_type = "", .topo_index = -1,
                                .precision = LD_PRECISION_FP32,
                                .is_graph_output = v->is_graph_output,
                                .ref = t->cfg.inputs[k], .test = t->cfg.inputs[k]};
        ld_status st = ld_compare_session_add(t->session, &item, err);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

/* Node i's isolated outputs: computed by the test engine on the
 * reference's inputs (initializers and omitted inputs: the engine's own). */
static ld_status isolate(pass_ctx *p, int i, ld_error *err)
{
    ld_trials *t = p->t;
    const ld_node *node = &t->g->nodes[i];
    for (int j = 0; j < node->n_inputs; j++) {
        int v = node->inputs[j];
        t->in_buf[j] = NULL;
        if (v < 0 || t->g->values[v].kind == LD_VALUE_INITIALIZER)
            continue;
        t->in_buf[j] = t->ref_vt->value(t->ref, v);
        if (!t->in_buf[j])
            return ld_error_set(err, LD_ERR_INTERNAL, "bisect: the reference holds no '%s' "
                                "for node '%s'", t->g->values[v].name, node->name);
    }
    return t->emu_vt->run_node_on(t->base, i, t->in_buf, on_isolated, p, err);
}

/* Hands node i's output pairs to the session. */
static ld_status add_outputs(pass_ctx *p, int i, ld_error *err)
{
    ld_trials *t = p->t;
    const ld_graph *g = t->g;
    const ld_node *node = &g->nodes[i];
    for (int j = 0; j < node->n_inputs; j++)
        t->name_buf[j] = node->inputs[j] >= 0 ? g->values[node->inputs[j]].name : "";
    for (int j = 0; j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (v < 0)
            continue;
        const ld_tensor *ref = t->ref_vt->value(t->ref, v);
        if (!ref || !t->live[v])
            return ld_error_set(err, LD_ERR_INTERNAL, "bisect: output '%s' of node '%s' is "
                                "missing", g->values[v].name, node->name);
        ld_compare_item item = {
            .name = g->values[v].name, .node = node->name, .op_type = node->op_type,
            .topo_index = i, .output_index = j,
            .precision = t->base_plan->layers[i].precision, .counters = t->last_counters,
            .n_inputs = node->n_inputs, .inputs = t->name_buf,
            .is_graph_output = g->values[v].is_graph_output, .ref = ref,
            .test = t->live[v]->t, .isolated = p->hold[j],
        };
        ld_status st = ld_compare_session_add(t->session, &item, err);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

static ld_status baseline_node(pass_ctx *p, int i, ld_error *err)
{
    ld_trials *t = p->t;
    p->node = &t->g->nodes[i];
    t->last_counters = (ld_layer_counters){0};
    ld_status st = t->ref_vt->step(t->ref, i, on_reference, t, err);
    if (st == LD_OK)
        st = ld_trials_compute_node(t, t->base, i, err);
    ld_layer_counters counters = t->last_counters;
    if (st == LD_OK && t->cfg.isolate && t->base_plan->layers[i].emulated)
        st = isolate(p, i, err);
    t->last_counters = counters;
    if (st == LD_OK)
        st = add_outputs(p, i, err);
    release_holds(p);
    ld_trials_release_node(t, i);
    t->ref_vt->finish_step(t->ref, i);
    if (st == LD_OK)
        st = ld_trials_tick(t, i, err);
    return st;
}

/* What the records say about each node's isolated error. */
static void collect_layers(ld_trials *t)
{
    int n = ld_compare_session_count(t->session);
    for (int r = 0; r < n; r++) {
        const ld_compare_record *rec = ld_compare_session_record(t->session, r);
        if (rec->topo_index < 0 || rec->topo_index >= t->g->n_nodes || !rec->has_isolated)
            continue;
        ld_trials_layer *l = &t->layers[rec->topo_index];
        const ld_tensor_metrics *m = &rec->isolated;
        double scaled = isnan(rec->isolated_scaled_ulp) ? 0 : rec->isolated_scaled_ulp;
        double ulp = isnan(m->ulp.max) ? 0 : m->ulp.max;
        double abs_max = isnan(m->abs.max) ? 0 : m->abs.max;
        if (!l->measured || scaled > l->scaled_ulp)
            l->scaled_ulp = scaled;
        if (!l->measured || ulp > l->max_ulp)
            l->max_ulp = ulp;
        if (!l->measured || abs_max > l->max_abs)
            l->max_abs = abs_max;
        l->overflow |= m->would_overflow > 0 || m->nonfinite_test_only > 0;
        l->measured = true;
    }
}

ld_status ld_trials_baseline(ld_trials *t, ld_error *err)
{
    if (t->baseline_done)
        return ld_error_set(err, LD_ERR_INTERNAL, "bisect: baseline run twice");
    double t0 = ld_trials_now();
    pass_ctx p = {.t = t};
    for (int i = 0; i < t->g->n_nodes; i++)
        if (t->g->nodes[i].n_outputs > p.max_outputs)
            p.max_outputs = t->g->nodes[i].n_outputs;
    p.hold = calloc((size_t)p.max_outputs + 1, sizeof *p.hold);
    ld_status st = p.hold ? LD_OK : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK)
        st = ld_compare_session_create(&t->session, t->cfg.compare, err);
    if (st == LD_OK)
        st = t->ref_vt->begin(t->ref, t->cfg.inputs, on_reference, t, err);
    if (st != LD_OK)
        goto out;
    st = ld_trials_live_inputs(t, err);
    if (st == LD_OK)
        st = ld_trials_snapshot(t, 0, err);
    if (st == LD_OK)
        st = add_inputs(t, err);
    for (int k = 0; st == LD_OK && k < t->g->n_outputs; k++) /* a graph input as output */
        if (t->out_producer[k] < 0)
            st = ld_tensor_clone(&t->ref_outputs[k], t->live[t->g->outputs[k]]->t, NULL, err);
    for (int k = 0; st == LD_OK && k < t->g->n_outputs; k++)
        if (t->out_producer[k] < 0)
            st = ld_trials_judge(t, k, t->ref_outputs[k], &t->metrics[k], err);
    for (int i = 0; st == LD_OK && i < t->g->n_nodes; i++)
        st = baseline_node(&p, i, err);
    t->ref_vt->end(t->ref);
    ld_trials_live_clear(t);
    if (st == LD_OK)
        st = ld_compare_session_finish(t->session, err);
    if (st == LD_OK) {
        memcpy(t->base_metrics, t->metrics, (size_t)t->g->n_outputs * sizeof *t->metrics);
        collect_layers(t);
        t->baseline_done = true;
    }
out:
    free(p.hold);
    t->stats.baseline_seconds = ld_trials_now() - t0;
    return st;
}

/* --- what the baseline learnt ------------------------------------------------------------- */

const ld_compare_session *ld_trials_session(const ld_trials *t)
{
    return t->session;
}

const int *ld_trials_candidates(const ld_trials *t, int *n)
{
    *n = t->n_candidates;
    return t->candidates;
}

bool ld_trials_is_candidate(const ld_trials *t, int node)
{
    return node >= 0 && node < t->g->n_nodes && t->candidate[node];
}

void ld_trials_layer_info(const ld_trials *t, int node, ld_trials_layer *out)
{
    *out = (ld_trials_layer){0};
    if (node >= 0 && node < t->g->n_nodes)
        *out = t->layers[node];
}

const ld_tensor *ld_trials_reference_output(const ld_trials *t, int output_index)
{
    if (output_index < 0 || output_index >= t->g->n_outputs)
        return NULL;
    return t->ref_outputs[output_index];
}

static const ld_trials *rank_ctx; /* qsort has no user pointer */

static int by_blame(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    const ld_trials_layer *lx = &rank_ctx->layers[x], *ly = &rank_ctx->layers[y];
    if (lx->overflow != ly->overflow)
        return lx->overflow ? -1 : 1;
    if (lx->scaled_ulp != ly->scaled_ulp)
        return lx->scaled_ulp > ly->scaled_ulp ? -1 : 1;
    if (lx->max_ulp != ly->max_ulp)
        return lx->max_ulp > ly->max_ulp ? -1 : 1;
    return (x > y) - (x < y);
}

ld_status ld_trials_ranking(const ld_trials *t, int **out, int *n, ld_error *err)
{
    int *r = malloc((size_t)(t->n_candidates ? t->n_candidates : 1) * sizeof *r);
    if (!r)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (t->n_candidates)
        memcpy(r, t->candidates, (size_t)t->n_candidates * sizeof *r);
    rank_ctx = t;
    if (t->n_candidates > 1)
        qsort(r, (size_t)t->n_candidates, sizeof *r, by_blame);
    rank_ctx = NULL;
    *out = r;
    *n = t->n_candidates;
    return LD_OK;
}

/* --- captures of reference tensors --------------------------------------------------------- */

typedef struct capture_ctx {
    int *slot;         /* per value: index into out, -1 */
    ld_tensor **out;
} capture_ctx;

static ld_status on_capture(void *user, const ld_tensor_event *ev, ld_error *err)
{
    capture_ctx *c = user;
    int k = c->slot[ev->value];
    if (k < 0 || c->out[k])
        return LD_OK;
    return ld_tensor_clone(&c->out[k], ev->tensor, NULL, err);
}

ld_status ld_trials_capture_reference(ld_trials *t, const int *values, int n, ld_tensor **out,
                                      ld_error *err)
{
    capture_ctx c = {malloc((size_t)t->g->n_values * sizeof *c.slot + 1), out};
    if (!c.slot)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int v = 0; v < t->g->n_values; v++)
        c.slot[v] = -1;
    for (int k = 0; k < n; k++) {
        out[k] = NULL;
        if (values[k] >= 0 && values[k] < t->g->n_values)
            c.slot[values[k]] = k;
    }
    ld_status st = t->ref_vt->begin(t->ref, t->cfg.inputs, on_capture, &c, err);
    for (int i = 0; st == LD_OK && i < t->g->n_nodes; i++) {
        st = t->ref_vt->step(t->ref, i, on_capture, &c, err);
        t->ref_vt->finish_step(t->ref, i);
        if (st == LD_OK)
            st = ld_trials_tick(t, i, err);
    }
    t->ref_vt->end(t->ref); /* also after a failed begin or step */
    for (int k = 0; st == LD_OK && k < n; k++)
        if (!out[k])
            st = ld_error_set(err, LD_ERR_INTERNAL, "bisect: the reference did not produce "
                              "value %d", values[k]);
    if (st != LD_OK)
        for (int k = 0; k < n; k++) {
            ld_tensor_destroy(out[k]);
            out[k] = NULL;
        }
    free(c.slot);
    return st;
}
