/* layerdiff — the bisect trial runner (see layerdiff/bisect.h): engines,
 * trials and checkpoints. The baseline pass is in trial_pass.c.
 *
 * Two emulated engines are prepared once: the test engine as configured
 * ("base") and the same with every candidate layer forced to fp32
 * ("fp32"). A layer's numerics depend only on its own plan entry, so a
 * trial with set S is the base engine's run in which the layers of S are
 * computed by the fp32 engine instead. The runner executes the graph itself,
 * node by node, through the engines' run_node_on slot (a layer computed on
 * the runner's tensors): no engine is rebuilt per trial and the rounded
 * weights each engine caches survive from trial to trial.
 *
 * Everything before the first layer of S is the base run, so a trial starts
 * from the latest checkpoint (the base run's live tensors saved before some
 * node) at or before that layer. Checkpoints are made by the trials
 * themselves as they pass through wished-for nodes in the base part of their
 * run, and share tensors by reference count: the cache's bytes are the
 * distinct tensors held, under a budget, oldest-used checkpoints evicted
 * first. The trade-off is in docs/bisect.md. Setup: trial_setup.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/trial_internal.h"
#include "layerdiff/round.h"

double ld_trials_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- buffers ------------------------------------------------------------------------ */

/* Free buffers kept for reuse: at most this many, each reused only for a
 * tensor at least half its size, so the pool stays near the peak live set. */
#define POOL_MAX_BLOCKS 512

static void *pool_take(ld_trials *t, size_t need)
{
    int best = -1;
    for (int i = 0; i < t->n_pool; i++)
        if (t->pool[i].cap >= need && t->pool[i].cap / 2 <= need + 4096 &&
            (best < 0 || t->pool[i].cap < t->pool[best].cap))
            best = i;
    if (best < 0)
        return malloc(need ? need : 1);
    void *data = t->pool[best].data;
    t->pool[best] = t->pool[--t->n_pool];
    return data;
}

static void pool_give(ld_trials *t, void *data, size_t cap)
{
    if (t->n_pool == POOL_MAX_BLOCKS) { /* drop the smallest: big ones are costly to fault in */
        int smallest = 0;
        for (int i = 1; i < t->n_pool; i++)
            if (t->pool[i].cap < t->pool[smallest].cap)
                smallest = i;
        free(t->pool[smallest].data);
        t->pool[smallest] = t->pool[--t->n_pool];
    }
    if (t->n_pool == t->cap_pool) {
        int cap_n = t->cap_pool ? 2 * t->cap_pool : 32;
        trial_block *grown = realloc(t->pool, (size_t)cap_n * sizeof *grown);
        if (!grown) {
            free(data);
            return;
        }
        t->pool = grown;
        t->cap_pool = cap_n;
    }
    t->pool[t->n_pool++] = (trial_block){data, cap};
}

static void tensor_release(ld_trials *t, trial_tensor *tt)
{
    if (!tt || --tt->refs > 0)
        return;
    if (!tt->borrowed) {
        pool_give(t, tt->t->data, tt->t->nbytes ? tt->t->nbytes : 1);
        tt->t->data = NULL;
        ld_tensor_destroy(tt->t);
    }
    free(tt);
}

/* A copy of src held by the runner (refs 1). */
static ld_status tensor_copy(ld_trials *t, const ld_tensor *src, trial_tensor **out,
                             ld_error *err)
{
    trial_tensor *tt = calloc(1, sizeof *tt);
    void *data = tt ? pool_take(t, src->nbytes) : NULL;
    if (!data) {
        free(tt);
        return ld_error_set(err, LD_ERR_NOMEM, "tensor '%s': cannot hold %zu bytes", src->name,
                            src->nbytes);
    }
    if (src->nbytes)
        memcpy(data, src->data, src->nbytes);
    ld_status st = ld_tensor_wrap(&tt->t, src->name, src->dtype, &src->shape, data, err);
    if (st != LD_OK) {
        pool_give(t, data, src->nbytes ? src->nbytes : 1);
        free(tt);
        return st;
    }
    tt->refs = 1;
    *out = tt;
    return LD_OK;
}

/* --- the live set ---------------------------------------------------------------------- */

void ld_trials_live_clear(ld_trials *t)
{
    for (int v = 0; v < t->g->n_values; v++) {
        tensor_release(t, t->live[v]);
        t->live[v] = NULL;
    }
}

ld_status ld_trials_live_inputs(ld_trials *t, ld_error *err)
{
    for (int k = 0; k < t->g->n_inputs; k++) {
        trial_tensor *tt = calloc(1, sizeof *tt);
        if (!tt)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        *tt = (trial_tensor){(ld_tensor *)t->cfg.inputs[k], true, 1, 0};
        t->live[t->g->inputs[k]] = tt;
    }
    return LD_OK;
}

ld_status ld_trials_tick(ld_trials *t, int node, ld_error *err)
{
    if (t->cfg.interrupted && *t->cfg.interrupted)
        return ld_error_set(err, LD_ERR_INTERRUPTED, "interrupted");
    if (!t->cfg.progress)
        return LD_OK;
    double now = ld_trials_now();
    if (now - t->last_progress >= 0.2) {
        t->last_progress = now;
        t->cfg.progress(t->cfg.progress_user, node, t->g->n_nodes);
    }
    return LD_OK;
}

ld_status ld_trials_judge(ld_trials *t, int k, const ld_tensor *test, ld_tensor_metrics *out,
                          ld_error *err)
{
    const ld_tensor *ref = t->ref_outputs[k];
    if (!ref)
        return ld_error_set(err, LD_ERR_INTERNAL, "bisect: no reference for output '%s'",
                            t->g->values[t->g->outputs[k]].name);
    return ld_compare_tensors(ref, test, t->out_precision[k], &t->out_tol[k], t->scratch,
                              t->g->values[t->g->outputs[k]].name, out, err);
}

typedef struct exec_ctx {
    ld_trials *t;
    const ld_node *node;
} exec_ctx;

/* An output of the node being run: into the live set, judged when it is a
 * graph output. */
static ld_status on_output(void *user, const ld_tensor_event *ev, ld_error *err)
{
    exec_ctx *x = user;
    ld_trials *t = x->t;
    int v = ev->value;
    if (ev->node != x->node || v < 0 || v >= t->g->n_values || t->live[v])
        return ld_error_set(err, LD_ERR_INTERNAL, "bisect: engine reported an unexpected "
                            "output for node '%s'", x->node->name);
    ld_status st = tensor_copy(t, ev->tensor, &t->live[v], err);
    t->last_counters = ev->counters;
    if (st == LD_OK && t->output_of[v] >= 0)
        st = ld_trials_judge(t, t->output_of[v], ev->tensor, &t->metrics[t->output_of[v]], err);
    return st;
}

static void drop(ld_trials *t, int v)
{
    tensor_release(t, t->live[v]);
    t->live[v] = NULL;
}

/* Input j of the node about to run, handed to the engine as float32: a
 * float16/bfloat16 tensor of the live set is widened into a scratch buffer
 * (exact). The engine then rounds it to the layer's precision, which gives
 * back the same values, as its own producer's exact float32 would. Measured:
 * the engine's own path for half inputs (widen, then scan) made the next
 * kernel up to 3x slower on the transformer fixture (Erf), widening here
 * does not (docs/bisect.md, "Speed"). */
static ld_status widened_input(ld_trials *t, int j, const ld_tensor *src, const ld_tensor **out,
                               ld_error *err)
{
    *out = src;
    if (src->dtype != LD_DTYPE_FLOAT16 && src->dtype != LD_DTYPE_BFLOAT16)
        return LD_OK;
    size_t need = (size_t)src->count * sizeof(float);
    if (need > t->wide_cap[j]) {
        void *grown = realloc(t->wide_buf[j], need ? need : 1);
        if (!grown)
            return ld_error_set(err, LD_ERR_NOMEM, "tensor '%s': cannot widen %zu bytes",
                                src->name, need);
        t->wide_buf[j] = grown;
        t->wide_cap[j] = need;
    }
    ld_tensor_destroy(t->wide[j]);
    t->wide[j] = NULL;
    ld_status st = ld_tensor_wrap(&t->wide[j], src->name, LD_DTYPE_FLOAT32, &src->shape,
                                  t->wide_buf[j], err);
    if (st != LD_OK)
        return st;
    if (src->dtype == LD_DTYPE_FLOAT16)
        ld_convert_fp16_to_fp32(src->data, t->wide_buf[j], (size_t)src->count);
    else
        ld_convert_bf16_to_fp32(src->data, t->wide_buf[j], (size_t)src->count);
    *out = t->wide[j];
    return LD_OK;
}

ld_status ld_trials_compute_node(ld_trials *t, void *backend, int i, ld_error *err)
{
    const ld_graph *g = t->g;
    const ld_node *node = &g->nodes[i];
    for (int j = 0; j < node->n_inputs; j++) {
        int v = node->inputs[j];
        t->in_buf[j] = NULL;
        if (v < 0 || g->values[v].kind == LD_VALUE_INITIALIZER)
            continue;
        if (!t->live[v])
            return ld_error_set(err, LD_ERR_INTERNAL, "bisect: node '%s' reads '%s', which is "
                                "not live", node->name, g->values[v].name);
        ld_status st = widened_input(t, j, t->live[v]->t, &t->in_buf[j], err);
        if (st != LD_OK)
            return st;
    }
    exec_ctx x = {t, node};
    return t->emu_vt->run_node_on(backend, i, t->in_buf, on_output, &x, err);
}

void ld_trials_release_node(ld_trials *t, int i)
{
    const ld_node *node = &t->g->nodes[i];
    for (int j = 0; j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (v >= 0 && t->last_use[v] < 0)
            drop(t, v);
    }
    for (int j = 0; j < node->n_inputs; j++) {
        int v = node->inputs[j];
        if (v >= 0 && t->last_use[v] == i)
            drop(t, v);
    }
}

ld_status ld_trials_exec_node(ld_trials *t, void *backend, int i, ld_error *err)
{
    ld_status st = ld_trials_compute_node(t, backend, i, err);
    if (st == LD_OK)
        ld_trials_release_node(t, i);
    return st;
}

/* --- checkpoints -------------------------------------------------------------------------- */

static void checkpoint_free(ld_trials *t, trial_checkpoint *cp)
{
    for (int k = 0; k < cp->n; k++) {
        trial_tensor *tt = cp->tensors[k];
        if (--tt->pins == 0 && !tt->borrowed)
            t->cache_bytes -= tt->t->nbytes;
        tensor_release(t, tt);
    }
    free(cp->values);
    free(cp->tensors);
}

static void checkpoint_remove(ld_trials *t, int idx)
{
    checkpoint_free(t, &t->cps[idx]);
    memmove(&t->cps[idx], &t->cps[idx + 1], (size_t)(t->n_cps - idx - 1) * sizeof *t->cps);
    t->n_cps--;
}

/* Bytes the live set would add to the cache if saved now. */
static size_t snapshot_cost(const ld_trials *t)
{
    size_t add = 0;
    for (int v = 0; v < t->g->n_values; v++) {
        const trial_tensor *tt = t->live[v];
        if (tt && !tt->borrowed && tt->pins == 0)
            add += tt->t->nbytes;
    }
    return add;
}

/* Evicts least recently used checkpoints (never the one at node 0) until
 * `add` more bytes fit; false when they cannot. */
static bool make_room(ld_trials *t, size_t add)
{
    while (t->cache_bytes + add > t->cfg.cache_bytes) {
        int victim = -1;
        for (int i = 0; i < t->n_cps; i++)
            if (t->cps[i].node > 0 && (victim < 0 || t->cps[i].used < t->cps[victim].used))
                victim = i;
        if (victim < 0)
            return false;
        checkpoint_remove(t, victim);
        t->stats.checkpoints_evicted++;
        add = snapshot_cost(t); /* evicting may have unpinned live tensors */
    }
    return true;
}

void ld_trials_checkpoints_clear(ld_trials *t)
{
    while (t->n_cps > 0)
        checkpoint_remove(t, t->n_cps - 1);
}

ld_status ld_trials_snapshot(ld_trials *t, int node, ld_error *err)
{
    if (node > 0 && !make_room(t, snapshot_cost(t))) {
        t->stats.checkpoints_skipped++;
        return LD_OK;
    }
    int n = 0;
    for (int v = 0; v < t->g->n_values; v++)
        n += t->live[v] != NULL;
    trial_checkpoint cp = {.node = node, .used = ++t->clock};
    cp.values = malloc((size_t)(n ? n : 1) * sizeof *cp.values);
    cp.tensors = malloc((size_t)(n ? n : 1) * sizeof *cp.tensors);
    if (t->n_cps == t->cap_cps) {
        int cap = t->cap_cps ? 2 * t->cap_cps : 16;
        trial_checkpoint *grown = realloc(t->cps, (size_t)cap * sizeof *grown);
        if (grown) {
            t->cps = grown;
            t->cap_cps = cap;
        }
    }
    if (!cp.values || !cp.tensors || t->n_cps == t->cap_cps) {
        free(cp.values);
        free(cp.tensors);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < t->g->n_values; v++) {
        trial_tensor *tt = t->live[v];
        if (!tt)
            continue;
        tt->refs++;
        if (tt->pins++ == 0 && !tt->borrowed)
            t->cache_bytes += tt->t->nbytes;
        cp.values[cp.n] = v;
        cp.tensors[cp.n++] = tt;
    }
    int at = t->n_cps;
    while (at > 0 && t->cps[at - 1].node > node)
        at--;
    memmove(&t->cps[at + 1], &t->cps[at], (size_t)(t->n_cps - at) * sizeof *t->cps);
    t->cps[at] = cp;
    t->n_cps++;
    t->stats.checkpoints_made++;
    if (t->cache_bytes > t->cache_peak)
        t->cache_peak = t->cache_bytes;
    return LD_OK;
}

static bool has_checkpoint(const ld_trials *t, int node)
{
    for (int i = 0; i < t->n_cps; i++)
        if (t->cps[i].node == node)
            return true;
    return false;
}

/* The latest checkpoint at or before node c, restored into the live set. */
static const trial_checkpoint *restore(ld_trials *t, int c)
{
    trial_checkpoint *best = NULL;
    for (int i = 0; i < t->n_cps && t->cps[i].node <= c; i++)
        best = &t->cps[i];
    best->used = ++t->clock;
    for (int k = 0; k < best->n; k++) {
        best->tensors[k]->refs++;
        t->live[best->values[k]] = best->tensors[k];
    }
    return best;
}

ld_status ld_trials_want(ld_trials *t, const int *nodes, int n, ld_error *err)
{
    for (int i = 0; i < t->g->n_nodes; i++)
        t->wanted[i] = false;
    for (int k = 0; k < n; k++) {
        if (nodes[k] < 0 || nodes[k] >= t->g->n_nodes)
            return ld_error_set(err, LD_ERR_INTERNAL, "bisect: no node %d", nodes[k]);
        t->wanted[nodes[k]] = true;
    }
    return LD_OK;
}

/* --- trials ------------------------------------------------------------------------------- */

/* The graph output whose error is worst against its tolerance (failing first). */
static int worst_output(const ld_trials *t, const ld_tensor_metrics *m)
{
    int worst = -1;
    double worst_score = -1;
    for (int k = 0; k < t->g->n_outputs; k++) {
        double atol = t->out_tol[k].atol > 0 ? t->out_tol[k].atol : 1e-30;
        double score = m[k].abs.max != m[k].abs.max ? 1e300 : m[k].abs.max / atol;
        if (!m[k].pass)
            score += 1e200;
        if (score > worst_score) {
            worst_score = score;
            worst = k;
        }
    }
    return worst;
}

static void fill_result(const ld_trials *t, const ld_tensor_metrics *m, ld_trial_result *res)
{
    res->pass = true;
    for (int k = 0; k < t->g->n_outputs; k++)
        res->pass &= m[k].pass;
    res->n_outputs = t->g->n_outputs;
    res->metrics = m;
    res->worst_output = worst_output(t, m);
}

void ld_trials_base_result(const ld_trials *t, ld_trial_result *res)
{
    *res = (ld_trial_result){.start_node = t->g->n_nodes, .first_changed = t->g->n_nodes};
    fill_result(t, t->base_metrics, res);
}

/* Marks the set; *first receives its first node. */
static ld_status mark_set(ld_trials *t, const int *nodes, int n, int *first, ld_error *err)
{
    *first = t->g->n_nodes;
    for (int k = 0; k < n; k++) {
        int i = nodes[k];
        if (i < 0 || i >= t->g->n_nodes || !t->candidate[i])
            return ld_error_set(err, LD_ERR_USAGE, "bisect: node %d is not a layer whose "
                                "precision can change", i);
        t->in_set[i] = true;
        if (i < *first)
            *first = i;
    }
    return LD_OK;
}

static ld_status run_from(ld_trials *t, const trial_checkpoint *cp, int first,
                          ld_trial_result *res, ld_error *err)
{
    const ld_graph *g = t->g;
    ld_status st = LD_OK;
    int start = cp->node;
    for (int k = 0; k < g->n_outputs; k++) /* outputs made before the start: as in the base */
        if (t->out_producer[k] < start)
            t->metrics[k] = t->base_metrics[k];
    for (int i = start; i < g->n_nodes && st == LD_OK; i++) {
        if (i > start && i <= first && (i == first || t->wanted[i]) && !has_checkpoint(t, i))
            st = ld_trials_snapshot(t, i, err);
        if (st == LD_OK)
            st = ld_trials_exec_node(t, t->in_set[i] ? t->fp32 : t->base, i, err);
        if (st == LD_OK)
            st = ld_trials_tick(t, i, err);
        res->nodes_run++;
    }
    return st;
}

ld_status ld_trials_run(ld_trials *t, const int *nodes, int n, ld_trial_result *res,
                        ld_error *err)
{
    if (!t->baseline_done)
        return ld_error_set(err, LD_ERR_INTERNAL, "bisect: trial before the baseline");
    double t0 = ld_trials_now();
    int first = t->g->n_nodes;
    *res = (ld_trial_result){0};
    ld_status st = mark_set(t, nodes, n, &first, err);
    if (st == LD_OK && n == 0) {
        ld_trials_base_result(t, res);
    } else if (st == LD_OK) {
        const trial_checkpoint *cp = restore(t, first);
        res->start_node = cp->node;
        st = run_from(t, cp, first, res, err);
        ld_trials_live_clear(t);
        if (st == LD_OK)
            fill_result(t, t->metrics, res);
    }
    for (int k = 0; k < n; k++)
        if (nodes[k] >= 0 && nodes[k] < t->g->n_nodes)
            t->in_set[nodes[k]] = false;
    res->first_changed = first;
    res->seconds = ld_trials_now() - t0;
    t->stats.trials++;
    t->stats.nodes_run += res->nodes_run;
    t->stats.trial_seconds += res->seconds;
    return st;
}

/* --- a fresh engine, for the final check and the time unit ---------------------------------- */

typedef struct verify_ctx {
    ld_trials *t;
    bool *seen;
} verify_ctx;

static ld_status on_verify(void *user, const ld_tensor_event *ev, ld_error *err)
{
    verify_ctx *x = user;
    int k = x->t->output_of[ev->value];
    if (k < 0 || x->seen[k])
        return LD_OK;
    x->seen[k] = true;
    return ld_trials_judge(x->t, k, ev->tensor, &x->t->metrics[k], err);
}

static ld_status fresh_engine(const ld_trials *t, const ld_engine_config *cfg, void **out,
                              ld_error *err)
{
    ld_shape *shapes = calloc((size_t)t->g->n_inputs + 1, sizeof *shapes);
    if (!shapes)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int k = 0; k < t->g->n_inputs; k++)
        shapes[k] = t->cfg.inputs[k]->shape;
    /* its runs' observers read graph outputs only (on_verify; NULL) */
    ld_backend_config bc = {.threads = t->cfg.threads, .engine = cfg,
                            .observe_outputs_only = true};
    *out = NULL;
    ld_status st = t->emu_vt->create(out, &bc, err);
    if (st == LD_OK)
        st = t->emu_vt->prepare(*out, t->g, shapes, err);
    free(shapes);
    if (st != LD_OK && *out) {
        t->emu_vt->destroy(*out);
        *out = NULL;
    }
    return st;
}

ld_status ld_trials_verify(ld_trials *t, const ld_engine_config *cfg, ld_trial_result *res,
                           ld_error *err)
{
    double t0 = ld_trials_now();
    void *engine = NULL;
    verify_ctx x = {t, calloc((size_t)t->g->n_outputs + 1, sizeof *x.seen)};
    *res = (ld_trial_result){.start_node = 0, .first_changed = 0};
    ld_status st = x.seen ? LD_OK : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK)
        st = fresh_engine(t, cfg, &engine, err);
    if (st == LD_OK)
        st = t->emu_vt->run(engine, t->cfg.inputs, on_verify, &x, err);
    for (int k = 0; st == LD_OK && k < t->g->n_outputs; k++) {
        if (x.seen[k])
            continue;
        if (t->out_producer[k] >= 0)
            st = ld_error_set(err, LD_ERR_INTERNAL, "bisect: the check run did not produce "
                              "output '%s'", t->g->values[t->g->outputs[k]].name);
        else
            t->metrics[k] = t->base_metrics[k]; /* a graph input passed through */
    }
    if (engine)
        t->emu_vt->destroy(engine);
    free(x.seen);
    if (st == LD_OK) {
        fill_result(t, t->metrics, res);
        res->nodes_run = t->g->n_nodes;
    }
    res->seconds = ld_trials_now() - t0;
    return st;
}

ld_status ld_trials_time_full_run(ld_trials *t, double *seconds, ld_error *err)
{
    double t0 = ld_trials_now();
    ld_status st = t->emu_vt->run(t->base, t->cfg.inputs, NULL, NULL, err);
    *seconds = ld_trials_now() - t0;
    return st;
}

void ld_trials_get_stats(const ld_trials *t, ld_trials_stats *out)
{
    *out = t->stats;
    out->checkpoints = t->n_cps;
    out->cache_bytes = t->cache_bytes;
    out->cache_peak = t->cache_peak;
    out->cache_budget = t->cfg.cache_bytes;
}
