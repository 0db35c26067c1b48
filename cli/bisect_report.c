/* layerdiff CLI — `layerdiff bisect`'s terminal summary and bisect.json
 * (see bisect_output.h; the JSON schema is in docs/bisect.md). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/bisect_output.h"
#include "cli/format.h"

/* --- JSON ---------------------------------------------------------------------------------- */

/* A number, or "NaN" / "Infinity" / "-Infinity" (the report's convention). */
static json_t *jnum(double x)
{
    if (isnan(x))
        return json_string("NaN");
    if (isinf(x))
        return json_string(x > 0 ? "Infinity" : "-Infinity");
    return json_real(x);
}

static json_t *output_json(const ld_graph *g, int k, const ld_tensor_metrics *m)
{
    json_t *o = json_object();
    bool ok = o && ld_json_set(o, "name", ld_json_string(g->values[g->outputs[k]].name)) &&
              ld_json_set(o, "pass", json_boolean(m->pass)) &&
              ld_json_set(o, "max_abs", jnum(m->abs.max)) &&
              ld_json_set(o, "mean_abs", jnum(m->abs.mean)) &&
              ld_json_set(o, "max_rel", jnum(m->rel.max)) &&
              ld_json_set(o, "cosine", jnum(m->cosine)) &&
              ld_json_set(o, "snr_db", jnum(m->snr_db)) &&
              ld_json_set(o, "n_fail", json_integer(m->n_fail)) &&
              ld_json_set(o, "nonfinite_test_only", json_integer(m->nonfinite_test_only));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *outputs_json(const ld_graph *g, const ld_tensor_metrics *m)
{
    if (!m)
        return json_null();
    json_t *a = json_array();
    bool pass = true;
    for (int k = 0; a && k < g->n_outputs; k++) {
        pass &= m[k].pass;
        if (!ld_json_append(a, output_json(g, k, &m[k]))) {
            json_decref(a);
            return NULL;
        }
    }
    json_t *o = json_object();
    if (!o || !ld_json_set(o, "pass", json_boolean(pass)) || !ld_json_set(o, "outputs", a)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *layers_json(const ld_graph *g, const ld_trials *t, const ld_bisect_outcome *o)
{
    json_t *a = json_array();
    for (int k = 0; a && k < o->n_set; k++) {
        const ld_node *node = &g->nodes[o->set[k]];
        ld_trials_layer info;
        ld_trials_layer_info(t, node->index, &info);
        json_t *l = json_object();
        bool ok = l && ld_json_set(l, "node", ld_json_string(node->name)) &&
                  ld_json_set(l, "has_name", json_boolean(node->has_name)) &&
                  ld_json_set(l, "index", json_integer(node->index)) &&
                  ld_json_set(l, "op_type", ld_json_string(node->op_type)) &&
                  ld_json_set(l, "trtexec", json_boolean(ld_bisect_trtexec_expressible(g, node))) &&
                  ld_json_set(l, "isolated_measured", json_boolean(info.measured)) &&
                  ld_json_set(l, "isolated_scaled_ulp", jnum(info.scaled_ulp)) &&
                  ld_json_set(l, "isolated_max_ulp", jnum(info.max_ulp)) &&
                  ld_json_set(l, "isolated_max_abs", jnum(info.max_abs)) &&
                  ld_json_set(l, "overflow", json_boolean(info.overflow));
        if (!ok || !ld_json_append(a, l)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *trials_json(const ld_graph *g, const ld_bisect_outcome *o)
{
    json_t *a = json_array();
    for (int i = 0; a && i < o->n_trials; i++) {
        const ld_bisect_trial_log *l = &o->trials[i];
        json_t *x = json_object();
        bool ok = x && ld_json_set(x, "set_size", json_integer(l->set_size)) &&
                  ld_json_set(x, "first_changed", json_integer(l->first_changed)) &&
                  ld_json_set(x, "start_node", json_integer(l->start_node)) &&
                  ld_json_set(x, "nodes_run", json_integer(l->nodes_run)) &&
                  ld_json_set(x, "pass", json_boolean(l->pass)) &&
                  ld_json_set(x, "worst_output",
                              l->worst_output >= 0
                                  ? ld_json_string(g->values[g->outputs[l->worst_output]].name)
                                  : json_null()) &&
                  ld_json_set(x, "worst_max_abs", jnum(l->worst_abs)) &&
                  ld_json_set(x, "seconds", jnum(l->seconds));
        if (!ok || !ld_json_append(a, x)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *timing_json(const ld_bisect_outcome *o)
{
    const ld_trials_stats *st = &o->stats;
    double per_trial = st->trials ? st->trial_seconds / st->trials : 0;
    json_t *x = json_object();
    bool ok = x && ld_json_set(x, "full_run_seconds", jnum(o->full_run_seconds)) &&
              ld_json_set(x, "baseline_seconds", jnum(st->baseline_seconds)) &&
              ld_json_set(x, "trial_seconds", jnum(st->trial_seconds)) &&
              ld_json_set(x, "total_seconds", jnum(o->total_seconds)) &&
              ld_json_set(x, "trials", json_integer(st->trials)) &&
              ld_json_set(x, "answered_from_memory", json_integer(o->memo_hits)) &&
              ld_json_set(x, "nodes_run", json_integer(st->nodes_run)) &&
              ld_json_set(x, "trials_per_second",
                          jnum(st->trial_seconds > 0 ? st->trials / st->trial_seconds : 0)) &&
              ld_json_set(x, "trial_in_full_runs",
                          jnum(o->full_run_seconds > 0 ? per_trial / o->full_run_seconds : 0)) &&
              ld_json_set(x, "total_in_full_runs",
                          jnum(o->full_run_seconds > 0 ? o->total_seconds / o->full_run_seconds
                                                       : 0));
    if (!ok) {
        json_decref(x);
        return NULL;
    }
    return x;
}

static json_t *cache_json(const ld_bisect_outcome *o)
{
    const ld_trials_stats *st = &o->stats;
    json_t *x = json_object();
    bool ok = x && ld_json_set(x, "budget_bytes", json_integer((json_int_t)st->cache_budget)) &&
              ld_json_set(x, "peak_bytes", json_integer((json_int_t)st->cache_peak)) &&
              ld_json_set(x, "checkpoints_made", json_integer(st->checkpoints_made)) &&
              ld_json_set(x, "checkpoints_evicted", json_integer(st->checkpoints_evicted)) &&
              ld_json_set(x, "checkpoints_skipped", json_integer(st->checkpoints_skipped));
    if (!ok) {
        json_decref(x);
        return NULL;
    }
    return x;
}

ld_status ld_bisect_write_json(const char *path, const ld_cli_bisect_setup *s,
                               const ld_trials *t, const ld_bisect_outcome *o,
                               const char *trtexec, int unexpressed,
                               const char *check_command, ld_error *err)
{
    const ld_graph *g = s->graph;
    char engine[512];
    ld_engine_config_describe(&s->engine, engine, sizeof engine);
    int n_cand = 0;
    ld_trials_candidates(t, &n_cand);
    json_t *root = json_object();
    bool ok = root && ld_json_set(root, "schema", json_string("layerdiff-bisect")) &&
              ld_json_set(root, "version", json_integer(1)) &&
              ld_json_set(root, "model", ld_json_string(s->model_path)) &&
              ld_json_set(root, "model_sha256", json_string(s->sha256)) &&
              ld_json_set(root, "engine", ld_json_string(engine)) &&
              ld_json_set(root, "mode", json_string(o->mode)) &&
              ld_json_set(root, "nodes", json_integer(g->n_nodes)) &&
              ld_json_set(root, "candidates", json_integer(n_cand)) &&
              ld_json_set(root, "found", json_boolean(o->found)) &&
              ld_json_set(root, "one_minimal", json_boolean(o->minimal)) &&
              ld_json_set(root, "k", o->k >= 0 ? json_integer(o->k) : json_null()) &&
              ld_json_set(root, "verified", json_boolean(o->verified)) &&
              ld_json_set(root, "layers", layers_json(g, t, o)) &&
              ld_json_set(root, "before", outputs_json(g, o->before)) &&
              ld_json_set(root, "after", outputs_json(g, o->after)) &&
              ld_json_set(root, "trtexec_flags", ld_json_string(trtexec)) &&
              ld_json_set(root, "trtexec_unexpressed", json_integer(unexpressed)) &&
              ld_json_set(root, "check_command",
                          check_command ? ld_json_string(check_command) : json_null()) &&
              ld_json_set(root, "trials", trials_json(g, o)) &&
              ld_json_set(root, "timing", timing_json(o)) &&
              ld_json_set(root, "cache", cache_json(o));
    ld_status st = ok ? LD_OK : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK && json_dump_file(root, path, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0)
        st = ld_error_set(err, LD_ERR_IO, "%s: cannot write", path);
    json_decref(root);
    return st;
}

/* --- the terminal summary ------------------------------------------------------------------ */

static void print_layers(const ld_graph *g, const ld_trials *t, const ld_bisect_outcome *o)
{
    ld_table *tab = ld_table_create(6);
    ld_error err;
    if (!tab)
        return;
    ld_table_align_right(tab, 0);
    ld_table_align_right(tab, 3);
    ld_table_align_right(tab, 4);
    ld_table_addf(tab, &err, "#");
    ld_table_addf(tab, &err, "node");
    ld_table_addf(tab, &err, "op");
    ld_table_addf(tab, &err, "iso ulp");
    ld_table_addf(tab, &err, "iso max abs");
    ld_table_addf(tab, &err, "overflow");
    for (int k = 0; k < o->n_set; k++) {
        const ld_node *node = &g->nodes[o->set[k]];
        ld_trials_layer info;
        ld_trials_layer_info(t, node->index, &info);
        ld_table_addf(tab, &err, "%d", node->index);
        ld_table_addf(tab, &err, "%s", node->name);
        ld_table_addf(tab, &err, "%s", node->op_type);
        ld_table_addf(tab, &err, info.measured ? "%.3g" : "-", info.scaled_ulp);
        ld_table_addf(tab, &err, info.measured ? "%.3g" : "-", info.max_abs);
        ld_table_addf(tab, &err, "%s", info.overflow ? "yes" : "");
    }
    ld_table_print(tab, stdout, "  ", true, false);
    ld_table_destroy(tab);
}

static void print_outputs(const ld_graph *g, const ld_bisect_outcome *o)
{
    printf("\noutputs (before -> after)\n");
    for (int k = 0; k < g->n_outputs; k++) {
        char before[256], after[256] = "-";
        ld_cli_metrics_brief(&o->before[k], before, sizeof before);
        if (o->after)
            ld_cli_metrics_brief(&o->after[k], after, sizeof after);
        printf("  %s\n    before  %s  %s\n    after   %s  %s\n", g->values[g->outputs[k]].name,
               o->before[k].pass ? "pass" : "FAIL", before,
               o->after ? (o->after[k].pass ? "pass" : "FAIL") : "", after);
    }
}

static void print_header(const ld_cli_bisect_setup *s, const ld_trials *t,
                         const ld_bisect_outcome *o)
{
    char engine[512], peak[32], budget[32];
    int n_cand = 0;
    ld_trials_candidates(t, &n_cand);
    const ld_trials_stats *st = &o->stats;
    double per_trial = st->trials ? st->trial_seconds / st->trials : 0;
    bool base_pass = true;
    for (int k = 0; k < s->graph->n_outputs; k++)
        base_pass &= o->before[k].pass;
    printf("model    %s\nsha256   %s\nengine   %s\n", s->model_path, s->sha256,
           ld_engine_config_describe(&s->engine, engine, sizeof engine));
    printf("mode     %s\n", strcmp(o->mode, "ddmin") == 0
                                ? "ddmin (isolated-error ranking, then delta debugging)"
                                : strcmp(o->mode, "prefix") == 0
                                      ? "prefix (Polygraphy: the first k layers in fp32)"
                                      : "suffix (Polygraphy: the last k layers in fp32)");
    printf("baseline %d nodes, %d can change precision; outputs %s (%.1f ms)\n",
           s->graph->n_nodes, n_cand, base_pass ? "pass" : "FAIL", st->baseline_seconds * 1e3);
    printf("trials   %d run (%d answered from memory), %.2f ms each = %.2fx one full emulated "
           "run (%.2f ms); %.1f trials/s; total %.2f s\n", st->trials, o->memo_hits,
           per_trial * 1e3, o->full_run_seconds > 0 ? per_trial / o->full_run_seconds : 0,
           o->full_run_seconds * 1e3, st->trial_seconds > 0 ? st->trials / st->trial_seconds : 0,
           o->total_seconds);
    printf("cache    %d checkpoints made (%d evicted, %d skipped), peak %s of %s\n",
           st->checkpoints_made, st->checkpoints_evicted, st->checkpoints_skipped,
           ld_fmt_bytes((int64_t)st->cache_peak, peak, sizeof peak),
           ld_fmt_bytes((int64_t)st->cache_budget, budget, sizeof budget));
}

void ld_bisect_print(const ld_cli_bisect_setup *s, const ld_trials *t,
                     const ld_bisect_outcome *o)
{
    int n_cand = 0;
    ld_trials_candidates(t, &n_cand);
    print_header(s, t, o);
    printf("\n");
    if (!o->found)
        printf("no set of fp32 layers makes the outputs pass, not even all %d that can "
               "change precision\n", n_cand);
    else if (o->n_set == 0)
        printf("the outputs pass already: no layer needs fp32\n");
    else if (strcmp(o->mode, "ddmin") == 0)
        printf("fp32 layers: %d%s\n", o->n_set,
               o->minimal ? " (1-minimal: keeping any one of them in reduced precision fails)"
                          : "");
    else
        printf("fp32 layers: %d (the candidates among the %s %d nodes)\n", o->n_set,
               strcmp(o->mode, "prefix") == 0 ? "first" : "last", o->k);
    if (o->found && o->n_set > 0)
        print_layers(s->graph, t, o);
    print_outputs(s->graph, o);
    if (o->found)
        printf("\ncheck    a fresh engine built with these layers in fp32: outputs %s\n",
               o->verified ? "pass" : "FAIL");
}
