/* layerdiff — setting up the bisect trial runner (see trial.c): the
 * candidate layers, the fp32 engine's rules, the backends and buffers. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/trial_internal.h"

char *ld_bisect_exact_pattern(const char *name)
{
    size_t len = strlen(name);
    char *out = malloc(2 * len + 2), *p = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool special = c == '*' || c == '?' || c == '[' || c == ']' || c == '\\';
        bool at_start = i == 0 && (c == '#' || isspace((unsigned char)c) ||
                                   strncmp(name, "op:", 3) == 0);
        if (special || at_start)
            *p++ = '\\';
        *p++ = c;
    }
    *p = '\0';
    return out;
}

/* --- candidates and the fp32 engine --------------------------------------------------- */

static bool is_float_type(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT16 || d == LD_DTYPE_BFLOAT16;
}

/* The layer gets an output-type rule: it has float outputs whose type no
 * Cast fixes. */
static bool wants_output_rule(const ld_layer_plan *lp)
{
    return is_float_type(lp->output_type) && lp->output_reason != LD_PLAN_CAST;
}

/* A layer whose numerics change when forced to fp32, and that the user's
 * own rules do not already pin. */
static bool is_candidate(const ld_layer_plan *lp)
{
    if (!lp->emulated || lp->precision_reason == LD_PLAN_PATTERN ||
        lp->output_reason == LD_PLAN_PATTERN)
        return false;
    return lp->precision != LD_PRECISION_FP32 ||
           (wants_output_rule(lp) && lp->output_type != LD_DTYPE_FLOAT32);
}

static ld_status push_rule(ld_layer_rule **rules, int *n, const char *name, ld_error *err)
{
    ld_layer_rule *grown = realloc(*rules, (size_t)(*n + 1) * sizeof *grown);
    if (!grown)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    *rules = grown;
    ld_layer_rule *r = &grown[*n];
    *r = (ld_layer_rule){.precision = LD_PRECISION_FP32, .type = LD_DTYPE_FLOAT32};
    r->pattern = ld_bisect_exact_pattern(name);
    if (r->pattern && asprintf(&r->text, "%s:fp32", r->pattern) < 0)
        r->text = NULL;
    if (!r->pattern || !r->text) {
        free(r->pattern);
        free(r->text);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    (*n)++;
    return LD_OK;
}

static void drop_rules(ld_layer_rule **rules, int *n)
{
    for (int i = 0; i < *n; i++) {
        free((*rules)[i].pattern);
        free((*rules)[i].text);
    }
    free(*rules);
    *rules = NULL;
    *n = 0;
}

/* The engine with every candidate forced to fp32: the user's rules stay
 * when their constraints apply them (under `none` they do nothing in the
 * base engine and must do nothing here either). */
static ld_status fp32_config(ld_trials *t, ld_error *err)
{
    ld_engine_config *c = &t->fp32_cfg;
    ld_status st = ld_engine_config_copy(c, &t->base_cfg, err);
    if (st != LD_OK)
        return st;
    if (c->constraints == LD_CONSTRAINTS_NONE) {
        drop_rules(&c->layer_precisions, &c->n_layer_precisions);
        drop_rules(&c->layer_output_types, &c->n_layer_output_types);
        c->constraints = LD_CONSTRAINTS_OBEY;
    }
    for (int k = 0; k < t->n_candidates && st == LD_OK; k++) {
        const ld_node *node = &t->g->nodes[t->candidates[k]];
        const ld_layer_plan *lp = &t->base_plan->layers[node->index];
        st = push_rule(&c->layer_precisions, &c->n_layer_precisions, node->name, err);
        if (st == LD_OK && wants_output_rule(lp))
            st = push_rule(&c->layer_output_types, &c->n_layer_output_types, node->name, err);
    }
    return st;
}

static ld_status find_candidates(ld_trials *t, ld_error *err)
{
    const ld_graph *g = t->g;
    t->candidates = calloc((size_t)g->n_nodes + 1, sizeof *t->candidates);
    if (!t->candidates)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        t->candidate[i] = is_candidate(&t->base_plan->layers[i]);
        if (t->candidate[i])
            t->candidates[t->n_candidates++] = i;
    }
    return LD_OK;
}

/* The fp32 engine's plan must give every candidate fp32 compute and, where
 * it has a rule, fp32 outputs (a duplicate node name or a user rule could
 * interfere). */
static ld_status check_fp32_plan(ld_trials *t, ld_error *err)
{
    ld_precision_plan *plan = NULL;
    ld_status st = ld_precision_plan_build(t->g, &t->fp32_cfg, &plan, err);
    for (int k = 0; st == LD_OK && k < t->n_candidates; k++) {
        int i = t->candidates[k];
        const ld_layer_plan *lp = &plan->layers[i];
        bool out_ok = !wants_output_rule(&t->base_plan->layers[i]) ||
                      lp->output_type == LD_DTYPE_FLOAT32;
        if (lp->precision != LD_PRECISION_FP32 || !out_ok)
            st = ld_error_set(err, LD_ERR_USAGE, "bisect: node '%s' (%s) cannot be forced to "
                              "fp32 (%s)", t->g->nodes[i].name, t->g->nodes[i].op_type,
                              lp->why ? lp->why : "?");
    }
    ld_precision_plan_destroy(plan);
    return st;
}

/* --- backends and tables ------------------------------------------------------------------ */

static ld_status make_engine(ld_trials *t, const ld_engine_config *cfg, void **out,
                             const ld_backend_vtable *vt, ld_error *err)
{
    ld_shape *shapes = calloc((size_t)t->g->n_inputs + 1, sizeof *shapes);
    if (!shapes)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int k = 0; k < t->g->n_inputs; k++)
        shapes[k] = t->cfg.inputs[k]->shape;
    /* its runs' observers read graph outputs only (on_verify; NULL) */
    ld_backend_config bc = {.threads = t->cfg.threads, .engine = cfg,
                            .observe_outputs_only = true};
    ld_status st = vt->create(out, &bc, err);
    if (st == LD_OK)
        st = vt->prepare(*out, t->g, shapes, err);
    if (st != LD_OK)
        ld_error_prefix(err, "backend '%s'", vt->name);
    free(shapes);
    return st;
}

static ld_status check_graph(const ld_graph *g, ld_error *err)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_implicit_inputs > 0)
            return ld_error_set(err, LD_ERR_UNSUPPORTED, "bisect: node '%s' (%s) has subgraphs "
                                "reading outer values; bisect runs flat graphs only",
                                g->nodes[i].name, g->nodes[i].op_type);
    return LD_OK;
}

static ld_status allocate_tables(ld_trials *t, ld_error *err)
{
    const ld_graph *g = t->g;
    size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1,
           no = (size_t)g->n_outputs + 1;
    int max_in = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_inputs > max_in)
            max_in = g->nodes[i].n_inputs;
    t->candidate = calloc(nn, sizeof *t->candidate);
    t->in_set = calloc(nn, sizeof *t->in_set);
    t->wanted = calloc(nn, sizeof *t->wanted);
    t->layers = calloc(nn, sizeof *t->layers);
    t->last_use = malloc(nv * sizeof *t->last_use);
    t->output_of = malloc(nv * sizeof *t->output_of);
    t->live = calloc(nv, sizeof *t->live);
    t->in_buf = calloc((size_t)max_in, sizeof *t->in_buf);
    t->name_buf = calloc((size_t)max_in, sizeof *t->name_buf);
    t->wide = calloc((size_t)max_in, sizeof *t->wide);
    t->wide_buf = calloc((size_t)max_in, sizeof *t->wide_buf);
    t->wide_cap = calloc((size_t)max_in, sizeof *t->wide_cap);
    t->max_inputs = max_in;
    t->out_producer = calloc(no, sizeof *t->out_producer);
    t->out_tol = calloc(no, sizeof *t->out_tol);
    t->out_precision = calloc(no, sizeof *t->out_precision);
    t->ref_outputs = calloc(no, sizeof *t->ref_outputs);
    t->base_metrics = calloc(no, sizeof *t->base_metrics);
    t->metrics = calloc(no, sizeof *t->metrics);
    if (!t->candidate || !t->in_set || !t->wanted || !t->layers || !t->last_use ||
        !t->output_of || !t->live || !t->in_buf || !t->name_buf ||
        !t->wide || !t->wide_buf || !t->wide_cap || !t->out_producer ||
        !t->out_tol || !t->out_precision || !t->ref_outputs || !t->base_metrics || !t->metrics)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++) {
        const ld_value *val = &g->values[v];
        t->last_use[v] = val->n_consumers ? val->consumers[val->n_consumers - 1] : -1;
        t->output_of[v] = -1;
    }
    return LD_OK;
}

/* Graph outputs: producer, and the tolerance they are judged with (the
 * base engine's precision for the producing layer, whatever a trial sets:
 * the bar does not move with the trial). */
static void describe_outputs(ld_trials *t)
{
    const ld_graph *g = t->g;
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        if (t->output_of[v] < 0)
            t->output_of[v] = k;
        int p = g->values[v].producer;
        t->out_producer[k] = p;
        t->out_precision[k] = p >= 0 ? t->base_plan->layers[p].precision : LD_PRECISION_FP32;
        t->out_tol[k] = ld_tolerance_for(&t->cfg.compare->tol, g->values[v].name,
                                         t->out_precision[k]);
    }
}

ld_status ld_trials_create(ld_trials **out, const ld_trials_config *cfg, ld_error *err)
{
    ld_trials *t = calloc(1, sizeof *t);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    t->cfg = *cfg;
    t->g = cfg->graph;
    if (!t->cfg.cache_bytes)
        t->cfg.cache_bytes = LD_TRIALS_DEFAULT_CACHE;
    t->ref_vt = ld_backend_find("reference");
    t->emu_vt = ld_backend_find("emulated");
    ld_engine_config_init(&t->base_cfg);
    ld_engine_config_init(&t->fp32_cfg);
    ld_status st = t->ref_vt && t->emu_vt && ld_backend_is_stepwise(t->ref_vt) &&
                           ld_backend_is_stepwise(t->emu_vt)
                       ? LD_OK
                       : ld_error_set(err, LD_ERR_INTERNAL, "bisect: the reference and "
                                      "emulated backends must run node by node");
    if (st == LD_OK)
        st = check_graph(t->g, err);
    if (st == LD_OK)
        st = allocate_tables(t, err);
    if (st == LD_OK)
        st = ld_engine_config_copy(&t->base_cfg, cfg->engine, err);
    if (st == LD_OK)
        st = ld_precision_plan_build(t->g, &t->base_cfg, &t->base_plan, err);
    if (st == LD_OK)
        st = find_candidates(t, err);
    if (st == LD_OK) {
        ld_engine_config_clear(&t->fp32_cfg);
        st = fp32_config(t, err);
    }
    if (st == LD_OK)
        st = check_fp32_plan(t, err);
    if (st == LD_OK)
        st = ld_compare_scratch_create(&t->scratch, err);
    if (st == LD_OK)
        describe_outputs(t);
    if (st == LD_OK)
        st = make_engine(t, NULL, &t->ref, t->ref_vt, err);
    if (st == LD_OK)
        st = make_engine(t, &t->base_cfg, &t->base, t->emu_vt, err);
    if (st == LD_OK)
        st = make_engine(t, &t->fp32_cfg, &t->fp32, t->emu_vt, err);
    if (st != LD_OK) {
        ld_trials_destroy(t);
        return st;
    }
    *out = t;
    return LD_OK;
}

void ld_trials_destroy(ld_trials *t)
{
    if (!t)
        return;
    if (t->live)
        ld_trials_live_clear(t);
    ld_trials_checkpoints_clear(t);
    if (t->ref)
        t->ref_vt->destroy(t->ref);
    if (t->base)
        t->emu_vt->destroy(t->base);
    if (t->fp32)
        t->emu_vt->destroy(t->fp32);
    for (int k = 0; t->ref_outputs && k < t->g->n_outputs; k++)
        ld_tensor_destroy(t->ref_outputs[k]);
    for (int i = 0; i < t->n_pool; i++)
        free(t->pool[i].data);
    ld_compare_session_destroy(t->session);
    ld_compare_scratch_destroy(t->scratch);
    ld_precision_plan_destroy(t->base_plan);
    ld_engine_config_clear(&t->base_cfg);
    ld_engine_config_clear(&t->fp32_cfg);
    free(t->pool);
    free(t->cps);
    free(t->candidate);
    free(t->candidates);
    free(t->in_set);
    free(t->wanted);
    free(t->layers);
    free(t->last_use);
    free(t->output_of);
    free(t->live);
    for (int j = 0; t->wide && j < t->max_inputs; j++) {
        ld_tensor_destroy(t->wide[j]);
        free(t->wide_buf[j]);
    }
    free(t->wide);
    free(t->wide_buf);
    free(t->wide_cap);
    free(t->in_buf);
    free(t->name_buf);
    free(t->out_producer);
    free(t->out_tol);
    free(t->out_precision);
    free(t->ref_outputs);
    free(t->base_metrics);
    free(t->metrics);
    free(t);
}
