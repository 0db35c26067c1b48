/* `layerdiff bisect MODEL`: the smallest set of layers to keep in fp32 so
 * that the graph outputs pass (docs/bisect.md).
 *
 * ddmin (default): rank the candidate layers by isolated error (overflow
 * first), grow the ranking's prefix until the outputs pass, then shrink it
 * with delta debugging to a 1-minimal set. prefix / suffix: Polygraphy's
 * `debug precision --mode bisect` over the first / last k nodes. Every
 * trial is a partial run of the emulated engine (layerdiff/bisect.h). The
 * set found is checked once more with a fresh engine built from the flags
 * written out, so what is pasted is what was tested. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/bisect_output.h"
#include "cli/commands.h"
#include "layerdiff/memory.h"

#define CMD "bisect"

static struct {
    const char *mode;
    const char *output;
    const char *cache_memory;
    bool no_isolate;
    bool quiet;
} opt;

static ld_cli_input_values input_flags;
static ld_cli_engine_values engine_flags;
static ld_cli_compare_values cmp_flags;

static const ld_cli_option bisect_options[] = {
    {"mode", 0, LD_OPT_STRING, &opt.mode, "ddmin|prefix|suffix",
     "search: ddmin (default; 1-minimal, any layers) or Polygraphy's first/last k layers"},
    {"output", 'o', LD_OPT_STRING, &opt.output, "DIR",
     "write layer-precisions.txt, trtexec-flags.txt, ort_node_block_list.json, bisect.json"},
    {"cache-memory", 0, LD_OPT_STRING, &opt.cache_memory, "SIZE",
     "memory for checkpoints of the base run (default 1G; 0: none, slower trials)"},
    {"no-isolate", 0, LD_OPT_FLAG, &opt.no_isolate, NULL,
     "rank layers in topological order instead of by isolated error"},
    {"quiet", 'q', LD_OPT_FLAG, &opt.quiet, NULL, "no trial log on stderr"},
    LD_CLI_INPUT_OPTIONS(input_flags),
    LD_CLI_ENGINE_OPTIONS(engine_flags),
    LD_CLI_TOLERANCE_OPTIONS(cmp_flags),
};
#define N_OPTIONS ((int)(sizeof bisect_options / sizeof bisect_options[0]))

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- the oracle --------------------------------------------------------------------------- */

typedef struct search {
    ld_cli_bisect_setup *s;
    ld_trials *t;
    ld_bisect_outcome *o;
    bool layers_are_nodes;  /* prefix/suffix: the oracle gets node indices, candidates or not */
    int *buf;
} search;

static ld_status log_trial(search *x, int n, const ld_trial_result *r, ld_error *err)
{
    ld_bisect_outcome *o = x->o;
    if (o->n_trials == o->cap_trials) {
        int cap = o->cap_trials ? 2 * o->cap_trials : 32;
        ld_bisect_trial_log *grown = realloc(o->trials, (size_t)cap * sizeof *grown);
        if (!grown)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        o->trials = grown;
        o->cap_trials = cap;
    }
    const ld_graph *g = x->s->graph;
    double worst = r->worst_output >= 0 ? r->metrics[r->worst_output].abs.max : 0;
    o->trials[o->n_trials++] = (ld_bisect_trial_log){
        n, r->first_changed, r->start_node, r->nodes_run, r->pass, r->worst_output, worst,
        r->seconds};
    if (opt.quiet)
        return LD_OK;
    char from[64] = "";
    if (n > 0)
        snprintf(from, sizeof from, " from node %d", r->start_node);
    fprintf(stderr, "  trial %3d: %3d fp32 layer%s, ran %d/%d nodes%s: %s", o->n_trials, n,
            n == 1 ? " " : "s", r->nodes_run, g->n_nodes, from, r->pass ? "pass" : "FAIL");
    if (r->worst_output >= 0)
        fprintf(stderr, ", worst '%s' max abs %.3g", g->values[g->outputs[r->worst_output]].name,
                worst);
    fprintf(stderr, ", %.1f ms\n", r->seconds * 1e3);
    return LD_OK;
}

static ld_status oracle(void *user, const int *set, int n, bool *pass, ld_error *err)
{
    search *x = user;
    int m = 0;
    for (int i = 0; i < n; i++) /* prefix/suffix: layers that cannot change are skipped */
        if (!x->layers_are_nodes || ld_trials_is_candidate(x->t, set[i]))
            x->buf[m++] = set[i];
    ld_trial_result r;
    ld_progress_begin(&x->s->progress, stderr, x->s->graph->n_nodes, "trial", opt.quiet);
    ld_status st = ld_trials_run(x->t, x->buf, m, &r, err);
    ld_progress_end(&x->s->progress);
    if (st == LD_ERR_INTERRUPTED)
        return ld_error_set(err, st, "interrupted by %s",
                            ld_cli_interrupt_name());
    if (st == LD_OK)
        st = log_trial(x, m, &r, err);
    *pass = r.pass;
    return st;
}

/* --- the searches ----------------------------------------------------------------------------- */

/* The nodes where grow's trials will restart: the first changed layer of a
 * prefix of the ranking is the earliest layer in it, so only the ranking's
 * record lows (each earlier than every layer ranked before it) can be cut
 * points. Wishing for every candidate instead made a deep first trial save
 * hundreds of checkpoints (PaddleOCR det: 323, 310 MiB) for nothing. */
static ld_status want_record_lows(ld_trials *t, const int *ranking, int n, ld_error *err)
{
    int *lows = malloc((size_t)(n ? n : 1) * sizeof *lows), n_lows = 0;
    if (!lows)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++)
        if (n_lows == 0 || ranking[i] < lows[n_lows - 1])
            lows[n_lows++] = ranking[i];
    ld_status st = ld_trials_want(t, lows, n_lows, err);
    free(lows);
    return st;
}

static ld_status search_ddmin(search *x, ld_bisect_memo *m, ld_error *err)
{
    int *ranking = NULL, n = 0, k = -1;
    ld_status st = ld_trials_ranking(x->t, &ranking, &n, err);
    if (st == LD_OK)
        st = want_record_lows(x->t, ranking, n, err);
    if (st == LD_OK)
        st = ld_bisect_grow(m, ranking, n, &k, err);
    if (st == LD_OK && k >= 0) {
        x->o->set = malloc((size_t)(k ? k : 1) * sizeof *x->o->set);
        st = x->o->set ? ld_trials_want(x->t, ranking, k, err)
                       : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        if (st == LD_OK)
            st = ld_bisect_ddmin(m, ranking, k, x->o->set, &x->o->n_set, err);
        x->o->found = st == LD_OK;
    }
    if (st == LD_OK && x->o->found) /* cheap: ddmin's last round asked these already */
        st = ld_bisect_is_one_minimal(m, x->o->set, x->o->n_set, &x->o->minimal, err);
    free(ranking);
    return st;
}

static ld_status search_polygraphy(search *x, ld_bisect_memo *m, bool from_end, ld_error *err)
{
    const ld_graph *g = x->s->graph;
    int n_cand = 0, k = -1;
    const int *cand = ld_trials_candidates(x->t, &n_cand);
    x->layers_are_nodes = true;
    /* no wishes: each trial saves the base run where it starts to differ, and
     * the binary search's later cuts restart from the nearest of those */
    ld_status st = ld_trials_want(x->t, NULL, 0, err);
    if (st == LD_OK)
        st = ld_bisect_polygraphy(m, g->n_nodes, from_end, &k, err);
    x->o->k = k;
    if (st != LD_OK || k < 0)
        return st;
    x->o->set = malloc((size_t)(n_cand ? n_cand : 1) * sizeof *x->o->set);
    if (!x->o->set)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_cand; i++)
        if (from_end ? cand[i] >= g->n_nodes - k : cand[i] < k)
            x->o->set[x->o->n_set++] = cand[i];
    x->o->found = true;
    return LD_OK;
}

/* --- after the search ------------------------------------------------------------------------- */

static ld_status copy_metrics(const ld_trial_result *r, ld_tensor_metrics **out, ld_error *err)
{
    *out = malloc((size_t)(r->n_outputs ? r->n_outputs : 1) * sizeof **out);
    if (!*out)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (r->n_outputs)
        memcpy(*out, r->metrics, (size_t)r->n_outputs * sizeof **out);
    return LD_OK;
}

/* The fresh engine with the rules exactly as written: its outputs become
 * the "after" metrics. */
static ld_status verify(ld_cli_bisect_setup *s, ld_trials *t, const ld_precision_plan *plan,
                        ld_bisect_outcome *o, ld_error *err)
{
    ld_engine_config cfg;
    ld_trial_result r;
    ld_status st = ld_engine_config_copy(&cfg, &s->engine, err);
    if (st != LD_OK)
        return st;
    st = ld_bisect_add_rules(s->graph, plan, o->set, o->n_set, &cfg, err);
    if (st == LD_OK)
        st = ld_trials_verify(t, &cfg, &r, err);
    if (st == LD_OK)
        st = copy_metrics(&r, &o->after, err);
    if (st == LD_OK)
        o->verified = r.pass;
    ld_engine_config_clear(&cfg);
    return st;
}

/* Whether a --atol / --rtol list has a global value (not PATTERN:VALUE). */
static bool has_global(const ld_cli_list *list)
{
    for (int i = 0; i < list->n; i++)
        if (!strchr(list->items[i], ':'))
            return true;
    return false;
}

/* The `layerdiff run` command that checks the written flags. Bisect judges
 * the graph outputs only, at the tolerance of the test engine's precision
 * whatever a trial sets; `run` judges every tensor at its own layer's
 * precision (1e-5 for fp32 layers, whose inputs carry fp16 error): so the
 * command compares the outputs only and states the tolerance. New string. */
static char *check_command(const char *model, const char *dir)
{
    char *flags = ld_cli_bisect_flags(&input_flags, &engine_flags, &cmp_flags, false);
    char *qmodel = ld_cli_shell_quote(model), *line = NULL;
    char prec[4200], out[4200], tol[96] = "";
    double d = ld_tolerance_default(engine_flags.bf16 ? LD_PRECISION_BF16 : LD_PRECISION_FP16);
    size_t used = 0;
    if (!has_global(&cmp_flags.atol))
        used += (size_t)snprintf(tol + used, sizeof tol - used, " --atol %.3g", d);
    if (!has_global(&cmp_flags.rtol))
        snprintf(tol + used, sizeof tol - used, " --rtol %.3g", d);
    snprintf(prec, sizeof prec, "@%s/layer-precisions.txt", dir);
    snprintf(out, sizeof out, "@%s/layer-output-types.txt", dir);
    char *qprec = ld_cli_shell_quote(prec), *qout = ld_cli_shell_quote(out);
    if (flags && qmodel && qprec && qout &&
        asprintf(&line, "layerdiff run %s%s%s --layer-precisions %s --layer-output-types %s "
                 "--layers outputs%s", qmodel, flags,
                 engine_flags.constraints ? "" : " --precision-constraints obey", qprec, qout,
                 tol) < 0)
        line = NULL;
    free(flags);
    free(qmodel);
    free(qprec);
    free(qout);
    return line;
}

static ld_status parse_options(ld_cli_bisect_setup *s, uint64_t *cache, ld_error *err)
{
    (void)s;
    if (strcmp(opt.mode, "ddmin") != 0 && strcmp(opt.mode, "prefix") != 0 &&
        strcmp(opt.mode, "suffix") != 0)
        return ld_cli_usage_error(err, CMD, "--mode must be ddmin, prefix or suffix, got '%s'",
                                  opt.mode);
    if ((!engine_flags.constraints || strcmp(engine_flags.constraints, "obey") != 0) &&
        (engine_flags.layer_precisions.n || engine_flags.layer_output_types.n))
        fprintf(stderr, "layerdiff bisect: warning: the fp32 layers found are written for "
                "--precision-constraints obey, which would also obey your own "
                "--layer-precisions / --layer-output-types rules (this search %s them)\n",
                engine_flags.constraints && strcmp(engine_flags.constraints, "prefer") == 0
                    ? "only preferred"
                    : "ignored");
    *cache = (uint64_t)LD_TRIALS_DEFAULT_CACHE;
    if (opt.cache_memory) {
        ld_status st = ld_memory_parse_size(opt.cache_memory, cache, err);
        if (st != LD_OK)
            return ld_cli_usage_error(err, CMD, "--cache-memory: %s", err->message);
        if (*cache == 0)
            *cache = 1; /* only the inputs' checkpoint */
    }
    return LD_OK;
}

static ld_status run_search(ld_cli_bisect_setup *s, ld_trials *t, ld_bisect_outcome *o,
                            ld_error *err)
{
    search x = {s, t, o, false, malloc((size_t)(s->graph->n_nodes + 1) * sizeof(int))};
    ld_bisect_memo *m = NULL;
    ld_status st = x.buf ? ld_bisect_memo_create(&m, oracle, &x, err)
                         : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK && strcmp(opt.mode, "ddmin") == 0)
        st = search_ddmin(&x, m, err);
    else if (st == LD_OK)
        st = search_polygraphy(&x, m, strcmp(opt.mode, "suffix") == 0, err);
    if (m) {
        o->memo_calls = ld_bisect_memo_calls(m);
        o->memo_hits = ld_bisect_memo_hits(m);
    }
    ld_bisect_memo_destroy(m);
    free(x.buf);
    return st;
}

static ld_status bisect_model(const char *model_path, ld_error *err)
{
    double t0 = now_seconds();
    ld_cli_bisect_setup s;
    ld_trials *t = NULL;
    ld_precision_plan *plan = NULL;
    ld_bisect_outcome o = {.mode = opt.mode, .k = -1};
    ld_bisect_files files = {0};
    uint64_t cache = 0;
    char *check = NULL;
    ld_trial_result base;
    ld_status st = parse_options(&s, &cache, err);
    if (st != LD_OK)
        return st;
    st = ld_cli_bisect_open(&s, CMD, model_path, &input_flags, &engine_flags, &cmp_flags, err);
    if (st != LD_OK)
        return st;
    st = ld_precision_plan_build(s.graph, &s.engine, &plan, err);
    if (st == LD_OK)
        st = ld_cli_bisect_trials(&s, !opt.no_isolate, (size_t)cache, (int)input_flags.threads,
                                  &t, err);
    if (st == LD_OK)
        st = ld_trials_time_full_run(t, &o.full_run_seconds, err);
    if (st != LD_OK)
        goto out;
    ld_trials_base_result(t, &base);
    st = copy_metrics(&base, &o.before, err);
    if (st == LD_OK)
        st = run_search(&s, t, &o, err);
    if (st == LD_OK && o.found)
        st = verify(&s, t, plan, &o, err);
    ld_trials_get_stats(t, &o.stats);
    o.total_seconds = now_seconds() - t0;
    if (st != LD_OK)
        goto out;
    check = opt.output ? check_command(model_path, opt.output) : NULL;
    if (opt.output && !check)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK && opt.output)
        st = ld_bisect_write_files(opt.output, &s, plan, t, &o, check, &files, err);
    if (st != LD_OK)
        goto out;
    ld_bisect_print(&s, t, &o);
    if (opt.output)
        printf("written  %s, %s, %s, %s, %s\n", files.precisions, files.output_types,
               files.trtexec, files.ort, files.json);
    if (opt.output && o.found)
        printf("check    %s\n", check);
    if (o.found && !o.verified)
        st = ld_error_set(err, LD_ERR_INTERNAL, "bisect: the trials passed with these layers "
                          "in fp32 but a fresh engine built with the same flags does not");
    else if (!o.found)
        st = err->status = LD_ERR_MISMATCH; /* reported above */
out:
    if (st == LD_ERR_MISMATCH)
        err->message[0] = '\0';
    free(check);
    ld_bisect_files_free(&files);
    ld_bisect_outcome_free(&o);
    ld_precision_plan_destroy(plan);
    ld_trials_destroy(t);
    ld_cli_bisect_close(&s);
    return st;
}

static ld_status run_bisect(int argc, char **argv, ld_error *err)
{
    memset(&opt, 0, sizeof opt);
    memset(&input_flags, 0, sizeof input_flags);
    memset(&engine_flags, 0, sizeof engine_flags);
    memset(&cmp_flags, 0, sizeof cmp_flags);
    opt.mode = "ddmin";
    input_flags.seed = -1;
    ld_cli_args args;
    ld_status st = ld_cli_parse(CMD, argc, argv, bisect_options, N_OPTIONS, &args, err);
    if (st != LD_OK)
        return st;
    if (args.help) {
        ld_cmd_bisect.help(stdout);
        return LD_OK;
    }
    st = ld_cli_expect_positionals(CMD, &args, 1, 1, "MODEL (an .onnx file)", err);
    if (st != LD_OK)
        return st;
    return bisect_model(args.positional[0], err);
}

static void bisect_help(FILE *out)
{
    fprintf(out,
            "Usage: layerdiff bisect MODEL.onnx [engine flags] [tolerances] [--mode M] [-o DIR]\n"
            "\n"
            "Finds a minimal set of layers to keep in fp32 (compute precision and output\n"
            "type) so that the graph outputs of the emulated engine (default --fp16) pass\n"
            "against the fp32 reference. --mode ddmin ranks the layers by the error each\n"
            "introduces alone (overflow first), adds them until the outputs pass, then\n"
            "removes what is not needed by delta debugging: the set is 1-minimal (removing\n"
            "any one layer fails) and need not be contiguous. --mode prefix / suffix is\n"
            "Polygraphy's `debug precision` (binary search over the first / last k layers).\n"
            "\n"
            "A trial re-runs the engine only from the first layer whose precision changed,\n"
            "from checkpoints of the base run kept within --cache-memory. The trial log\n"
            "goes to stderr. The set is checked with a fresh engine built from the written\n"
            "flags. -o DIR writes layer-precisions.txt and layer-output-types.txt (for\n"
            "--layer-precisions @FILE), trtexec-flags.txt (--precisionConstraints=obey\n"
            "--layerPrecisions=... --layerOutputTypes=..., exact node names),\n"
            "ort_node_block_list.json (onnxconverter-common's float16 converter) and\n"
            "bisect.json. Exit 0: a set was found; 1: none passes, not even every layer in\n"
            "fp32; 2: bad usage or input. docs/bisect.md has the details.\n"
            "\n");
    ld_cli_print_options(out, bisect_options, N_OPTIONS);
    fprintf(out,
            "\n"
            "Examples:\n"
            "  layerdiff bisect model.onnx -o fp32-layers\n"
            "  layerdiff bisect model.onnx --bf16 --atol 1e-2 --rtol 1e-2\n"
            "  layerdiff bisect model.onnx --mode prefix\n");
}

const ld_cli_command ld_cmd_bisect = {
    .name = CMD,
    .summary = "find the fewest layers to keep in fp32 so the outputs pass",
    .run = run_bisect,
    .help = bisect_help,
};
