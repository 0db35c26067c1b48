/* layerdiff CLI — shared setup of `bisect` and `reduce` (see bisect_common.h). */
#include "cli/bisect_common.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/onnx.h"
#include "layerdiff/sha256.h"

static ld_status make_inputs(ld_cli_bisect_setup *s, const ld_cli_input_values *iv,
                             ld_error *err)
{
    ld_inputs_options io = {s->shapes, s->ranges, iv->seed >= 0 ? (uint64_t)iv->seed : 1,
                            iv->loads.n, iv->loads.items};
    ld_status st = ld_inputs_make(&s->inputs, s->graph, &io, err);
    if (st == LD_ERR_USAGE)
        st = ld_cli_usage_error(err, s->cmd, "%s", err->message);
    return st;
}

ld_status ld_cli_bisect_open(ld_cli_bisect_setup *s, const char *cmd, const char *model_path,
                             const ld_cli_input_values *iv, ld_cli_engine_values *ev,
                             const ld_cli_compare_values *cv, ld_error *err)
{
    memset(s, 0, sizeof *s);
    s->cmd = cmd;
    s->model_path = model_path;
    if (!ev->fp16 && !ev->bf16)
        ev->fp16 = true;
    ld_summary_options unused;
    ld_status st = ld_cli_input_values_check(cmd, iv, err);
    if (st == LD_OK)
        st = ld_cli_compare_setup(cmd, cv, &s->compare, &unused, err);
    if (st == LD_OK)
        st = ld_cli_engine_config(cmd, ev, &s->engine, err);
    else
        ld_engine_config_init(&s->engine);
    if (st == LD_OK)
        st = ld_cli_list_join(&iv->ranges, &s->ranges, err);
    if (st == LD_OK)
        st = ld_cli_list_join(&iv->shapes, &s->shapes, err);
    if (st == LD_OK)
        st = ld_onnx_load_file(&s->graph, model_path, err);
    if (st == LD_OK)
        st = ld_sha256_file(model_path, s->sha256, err);
    if (st == LD_OK)
        st = make_inputs(s, iv, err);
    if (st == LD_OK)
        st = ld_cli_engine_plan(cmd, s->graph, &s->engine, NULL, err);
    if (st != LD_OK) {
        ld_cli_bisect_close(s);
        return st;
    }
    ld_cli_interrupt_catch(NULL);
    return LD_OK;
}

void ld_cli_bisect_close(ld_cli_bisect_setup *s)
{
    ld_input_set_clear(&s->inputs);
    ld_graph_destroy(s->graph);
    ld_engine_config_clear(&s->engine);
    ld_cli_compare_options_clear(&s->compare);
    free(s->ranges);
    free(s->shapes);
    memset(s, 0, sizeof *s);
}

static void on_progress(void *user, int node, int n_nodes)
{
    ld_cli_bisect_setup *s = user;
    (void)n_nodes;
    ld_progress_update(&s->progress, node + 1, s->graph->nodes[node].name);
}

ld_status ld_cli_bisect_trials(ld_cli_bisect_setup *s, bool isolate, size_t cache_bytes,
                               int threads, ld_trials **out, ld_error *err)
{
    ld_trials_config tc = {
        .graph = s->graph, .inputs = (const ld_tensor *const *)s->inputs.tensors,
        .engine = &s->engine, .compare = &s->compare, .threads = threads, .isolate = isolate,
        .cache_bytes = cache_bytes, .progress = on_progress, .progress_user = s,
        .interrupted = &ld_cli_interrupted,
    };
    ld_status st = ld_trials_create(out, &tc, err);
    if (st == LD_ERR_USAGE && !strstr(err->message, "--help"))
        return ld_cli_usage_error(err, s->cmd, "%s", err->message);
    if (st != LD_OK)
        return st;
    ld_progress_begin(&s->progress, stderr, s->graph->n_nodes, "baseline", false);
    st = ld_trials_baseline(*out, err);
    ld_progress_end(&s->progress);
    if (st != LD_OK) {
        ld_trials_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* --- commands written back ------------------------------------------------------------ */

/* A growing string of shell words. */
typedef struct words {
    char *s;
    size_t len, cap;
    bool failed;
} words;

static void add_raw(words *w, const char *text)
{
    size_t n = strlen(text);
    if (w->failed)
        return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = (w->len + n + 1) * 2;
        char *grown = realloc(w->s, cap);
        if (!grown) {
            w->failed = true;
            return;
        }
        w->s = grown;
        w->cap = cap;
    }
    memcpy(w->s + w->len, text, n + 1);
    w->len += n;
}

/* " --flag" and, when value is not NULL, " VALUE" quoted. */
static void add_flag(words *w, const char *flag, const char *value)
{
    add_raw(w, " ");
    add_raw(w, flag);
    if (!value)
        return;
    char *q = ld_cli_shell_quote(value);
    if (!q) {
        w->failed = true;
        return;
    }
    add_raw(w, " ");
    add_raw(w, q);
    free(q);
}

static void add_list(words *w, const char *flag, const ld_cli_list *list)
{
    for (int i = 0; i < list->n; i++)
        add_flag(w, flag, list->items[i]);
}

char *ld_cli_bisect_flags(const ld_cli_input_values *iv, const ld_cli_engine_values *ev,
                          const ld_cli_compare_values *cv, bool skip_inputs)
{
    words w = {0};
    char number[32];
    add_raw(&w, "");
    if (!skip_inputs && iv) {
        if (iv->seed >= 0) {
            snprintf(number, sizeof number, "%" PRId64, iv->seed);
            add_flag(&w, "--seed", number);
        }
        add_list(&w, "--val-range", &iv->ranges);
        add_list(&w, "--load-inputs", &iv->loads);
        add_list(&w, "--input-shapes", &iv->shapes);
    }
    add_flag(&w, ev->bf16 ? "--bf16" : "--fp16", NULL);
    if (ev->no_tf32)
        add_flag(&w, "--no-tf32", NULL);
    if (ev->tf32_rounding)
        add_flag(&w, "--tf32-rounding", ev->tf32_rounding);
    if (ev->accumulate)
        add_flag(&w, "--accumulate", ev->accumulate);
    if (ev->flush_denormals)
        add_flag(&w, "--flush-denormals", NULL);
    if (ev->respect_declared_types)
        add_flag(&w, "--respect-declared-types", NULL);
    if (ev->constraints)
        add_flag(&w, "--precision-constraints", ev->constraints);
    add_list(&w, "--layer-precisions", &ev->layer_precisions);
    add_list(&w, "--layer-output-types", &ev->layer_output_types);
    add_list(&w, "--atol", &cv->atol);
    add_list(&w, "--rtol", &cv->rtol);
    if (cv->tol_mode)
        add_flag(&w, "--tol-mode", cv->tol_mode);
    if (cv->check_error_stat)
        add_flag(&w, "--check-error-stat", cv->check_error_stat);
    if (cv->error_quantile)
        add_flag(&w, "--error-quantile", cv->error_quantile);
    if (cv->nan_is_error)
        add_flag(&w, "--nan-is-error", NULL);
    if (w.failed) {
        free(w.s);
        return NULL;
    }
    return w.s;
}

char *ld_cli_metrics_brief(const ld_tensor_metrics *m, char *buf, size_t size)
{
    int n = snprintf(buf, size, "max abs %.3g  max rel %.3g  cos %.6g", m->abs.max, m->rel.max,
                     m->cosine);
    int64_t nonfinite = m->nonfinite_test_only;
    if (n >= 0 && (size_t)n < size && nonfinite > 0)
        snprintf(buf + n, size - (size_t)n, "  non-finite %" PRId64, nonfinite);
    return buf;
}
