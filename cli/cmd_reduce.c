/* `layerdiff reduce MODEL -o repro.onnx`: the smallest standalone model
 * around one layer that still diverges, for a bug report (docs/bisect.md).
 *
 * The layer is named (--node), or found by the comparator over a lockstep
 * run (--first-divergent: the first failing tensor; --origin: the top
 * origin layer). The repro holds the layer and up to --context producers;
 * the tensors they read from outside become graph inputs with the dtypes
 * and shapes of the run, and repro.h5 holds their reference values (a dump
 * whose /inputs `run --load-inputs` takes). Then the repro is loaded back
 * and run with the same flags: does it still diverge? */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bisect_common.h"
#include "cli/commands.h"
#include "layerdiff/dump.h"
#include "layerdiff/onnx.h"
#include "layerdiff/sha256.h"

#define CMD "reduce"

static struct {
    const char *node;
    bool first_divergent, origin;
    int64_t context;
    const char *output;
} opt;

static ld_cli_input_values input_flags;
static ld_cli_engine_values engine_flags;
static ld_cli_compare_values cmp_flags;

static const ld_cli_option reduce_options[] = {
    {"node", 0, LD_OPT_STRING, &opt.node, "NAME", "the layer to keep (a node name)"},
    {"first-divergent", 0, LD_OPT_FLAG, &opt.first_divergent, NULL,
     "the first layer whose output fails (topological order)"},
    {"origin", 0, LD_OPT_FLAG, &opt.origin, NULL,
     "the top origin layer: fails while its inputs pass (highest rate of change)"},
    {"context", 'k', LD_OPT_INT, &opt.context, "K", "keep up to K producer layers too (default 0)"},
    {"output", 'o', LD_OPT_STRING, &opt.output, "REPRO.onnx",
     "the model to write; its inputs go to the same name with .h5"},
    LD_CLI_INPUT_OPTIONS(input_flags),
    LD_CLI_ENGINE_OPTIONS(engine_flags),
    LD_CLI_TOLERANCE_OPTIONS(cmp_flags),
};
#define N_OPTIONS ((int)(sizeof reduce_options / sizeof reduce_options[0]))

/* What the reduction is made of. */
typedef struct reduction {
    int target;
    const char *why;
    int *nodes, n_nodes;
    int *cut, n_cut;
    ld_tensor **values;        /* reference values: the cut tensors, then the target's outputs */
    int *outputs, n_outputs;   /* the target's output values */
    char *h5_path;
} reduction;

static void reduction_free(reduction *r)
{
    for (int k = 0; r->values && k < r->n_cut + r->n_outputs; k++)
        ld_tensor_destroy(r->values[k]);
    free(r->values);
    free(r->nodes);
    free(r->cut);
    free(r->outputs);
    free(r->h5_path);
}

static ld_status check_options(ld_error *err)
{
    int chosen = (opt.node != NULL) + opt.first_divergent + opt.origin;
    if (chosen != 1)
        return ld_cli_usage_error(err, CMD, "give exactly one of --node NAME, --first-divergent "
                                  "and --origin");
    if (opt.context < 0 || opt.context > 100000)
        return ld_cli_usage_error(err, CMD, "--context must be between 0 and 100000, got %" PRId64,
                                  opt.context);
    if (!opt.output || !*opt.output)
        return ld_cli_usage_error(err, CMD, "-o REPRO.onnx is required");
    return LD_OK;
}

/* The node the comparator points at. */
static ld_status pick_from_session(const ld_trials *t, const ld_graph *g, reduction *r,
                                   ld_error *err)
{
    const ld_compare_session *s = ld_trials_session(t);
    const ld_compare_summary *sum = ld_compare_session_summary(s);
    int rec = -1;
    if (opt.first_divergent) {
        rec = sum->first_divergent;
        r->why = "the first divergent layer";
    } else {
        rec = sum->n_origins > 0 ? sum->origins[0] : -1;
        r->why = "the top origin layer";
    }
    const ld_compare_record *record = rec >= 0 ? ld_compare_session_record(s, rec) : NULL;
    if (!record || record->topo_index < 0 || record->topo_index >= g->n_nodes)
        return ld_error_set(err, LD_ERR_MISMATCH, "reduce: no %s: every tensor passes with these "
                            "flags, nothing to reduce", opt.first_divergent
                                                            ? "divergent layer"
                                                            : "origin layer");
    r->target = (int)record->topo_index;
    return LD_OK;
}

static ld_status choose(ld_cli_bisect_setup *s, const ld_trials *t, reduction *r, ld_error *err)
{
    const ld_graph *g = s->graph;
    if (opt.node) {
        r->target = ld_graph_find_node(g, opt.node);
        r->why = "named with --node";
        if (r->target < 0)
            return ld_cli_usage_error(err, CMD, "--node: the model has no node named '%s'",
                                      opt.node);
    } else {
        ld_status st = pick_from_session(t, g, r, err);
        if (st != LD_OK)
            return st;
    }
    r->nodes = malloc((size_t)g->n_nodes * sizeof *r->nodes);
    r->cut = malloc((size_t)(g->n_values + 1) * sizeof *r->cut);
    r->outputs = malloc((size_t)(g->nodes[r->target].n_outputs + 1) * sizeof *r->outputs);
    if (!r->nodes || !r->cut || !r->outputs)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_status st = ld_extract_select(g, r->target, (int)opt.context, r->nodes, &r->n_nodes, err);
    if (st != LD_OK)
        return st;
    ld_extract_cut(g, r->nodes, r->n_nodes, r->cut, &r->n_cut);
    const ld_node *node = &g->nodes[r->target];
    for (int j = 0; j < node->n_outputs; j++)
        if (node->outputs[j] >= 0)
            r->outputs[r->n_outputs++] = node->outputs[j];
    return LD_OK;
}

/* The reference's values of the cut tensors and of the target's outputs. */
static ld_status capture(ld_trials *t, reduction *r, ld_error *err)
{
    int n = r->n_cut + r->n_outputs;
    int *values = malloc((size_t)(n ? n : 1) * sizeof *values);
    r->values = calloc((size_t)(n ? n : 1), sizeof *r->values);
    if (!values || !r->values) {
        free(values);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    memcpy(values, r->cut, (size_t)r->n_cut * sizeof *values);
    memcpy(values + r->n_cut, r->outputs, (size_t)r->n_outputs * sizeof *values);
    ld_status st = ld_trials_capture_reference(t, values, n, r->values, err);
    free(values);
    return st;
}

static ld_status write_repro(const ld_cli_bisect_setup *s, reduction *r, ld_error *err)
{
    const ld_graph *g = s->graph;
    ld_extract_io *io = calloc((size_t)(r->n_cut + r->n_outputs + 1), sizeof *io);
    char doc[512];
    if (!io)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int k = 0; k < r->n_cut + r->n_outputs; k++)
        io[k] = (ld_extract_io){k < r->n_cut ? r->cut[k] : r->outputs[k - r->n_cut],
                                r->values[k]->dtype, r->values[k]->shape};
    snprintf(doc, sizeof doc, "layerdiff reduce: node '%s' (%s) of %s and %d producer(s); "
             "inputs in the .h5 beside this file", g->nodes[r->target].name,
             g->nodes[r->target].op_type, s->model_path, r->n_nodes - 1);
    ld_extract_spec spec = {r->n_nodes, r->nodes, r->n_cut, io, r->n_outputs, io + r->n_cut,
                            NULL, doc};
    ld_status st = ld_onnx_extract(s->model_path, g, &spec, opt.output, err);
    free(io);
    if (st != LD_OK)
        return st;
    char sha[65];
    ld_dump_writer *w = NULL;
    st = ld_sha256_file(opt.output, sha, err);
    ld_dump_file_info info = {.model_path = opt.output, .model_sha256 = sha, .input_seed = -1};
    if (st == LD_OK)
        st = ld_dump_writer_open(&w, r->h5_path, &info, NULL, err);
    for (int k = 0; st == LD_OK && k < r->n_cut; k++)
        st = ld_dump_writer_add_input(w, r->values[k], err);
    if (st == LD_OK)
        st = ld_dump_writer_commit(w, err);
    else
        ld_dump_writer_abort(w);
    return st;
}

/* REPRO.onnx -> REPRO.h5 (other names: NAME.h5). New string or NULL. */
static char *h5_path_for(const char *onnx_path)
{
    size_t n = strlen(onnx_path);
    char *p = NULL;
    if (n > 5 && strcmp(onnx_path + n - 5, ".onnx") == 0) {
        if (asprintf(&p, "%.*s.h5", (int)(n - 5), onnx_path) < 0)
            p = NULL;
    } else if (asprintf(&p, "%s.h5", onnx_path) < 0) {
        p = NULL;
    }
    return p;
}

/* Loads the repro back and compares it as `run` would: does it diverge? */
static ld_status check_repro(const ld_cli_bisect_setup *s, bool *diverges,
                             ld_tensor_metrics *worst, ld_error *err)
{
    ld_graph *g = NULL;
    ld_input_set in = {0};
    ld_trials *t = NULL;
    const char *sources[1] = {NULL};
    char *h5 = NULL;
    ld_status st = ld_onnx_load_file(&g, opt.output, err);
    if (st == LD_OK) {
        h5 = h5_path_for(opt.output);
        sources[0] = h5;
        ld_inputs_options io = {NULL, NULL, 1, 1, sources};
        st = h5 ? ld_inputs_make(&in, g, &io, err)
                : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    ld_trials_config tc = {.graph = g, .inputs = (const ld_tensor *const *)in.tensors,
                           .engine = &s->engine, .compare = &s->compare, .isolate = true,
                           .threads = (int)input_flags.threads};
    if (st == LD_OK)
        st = ld_trials_create(&t, &tc, err);
    if (st == LD_OK)
        st = ld_trials_baseline(t, err);
    if (st == LD_OK) {
        ld_trial_result res;
        ld_trials_base_result(t, &res);
        *diverges = !res.pass;
        if (res.worst_output >= 0)
            *worst = res.metrics[res.worst_output];
    }
    if (st != LD_OK)
        ld_error_prefix(err, "%s, loaded back", opt.output);
    ld_trials_destroy(t);
    ld_input_set_clear(&in);
    ld_graph_destroy(g);
    free(h5);
    return st;
}

static void print_reduction(const ld_cli_bisect_setup *s, const ld_trials *t,
                            const reduction *r)
{
    const ld_graph *g = s->graph;
    const ld_node *node = &g->nodes[r->target];
    ld_trials_layer info;
    ld_trials_layer_info(t, r->target, &info);
    printf("model    %s\nsha256   %s\n", s->model_path, s->sha256);
    printf("layer    %s (%s, node %d): %s", node->name, node->op_type, node->index, r->why);
    if (info.measured)
        printf("; isolated error %.3g ulp, max abs %.3g%s", info.scaled_ulp, info.max_abs,
               info.overflow ? ", overflows" : "");
    printf("\nkept     %d node%s:", r->n_nodes, r->n_nodes == 1 ? "" : "s");
    for (int k = 0; k < r->n_nodes; k++)
        printf(" %s", g->nodes[r->nodes[k]].name);
    printf("\ninputs   %d cut tensor%s (reference values in %s)\n", r->n_cut,
           r->n_cut == 1 ? "" : "s", r->h5_path);
    for (int k = 0; k < r->n_cut; k++) {
        char shape[128];
        printf("  %s  %s  %s\n", g->values[r->cut[k]].name, ld_dtype_name(r->values[k]->dtype),
               ld_shape_format(&r->values[k]->shape, shape, sizeof shape));
    }
}

static ld_status reduce_model(const char *model_path, ld_error *err)
{
    ld_cli_bisect_setup s;
    ld_trials *t = NULL;
    reduction r = {0};
    bool diverges = false;
    ld_tensor_metrics worst = {0};
    char *flags = NULL, *qrepro = NULL, *qh5 = NULL;
    ld_status st = ld_cli_bisect_open(&s, CMD, model_path, &input_flags, &engine_flags,
                                      &cmp_flags, err);
    if (st != LD_OK)
        return st;
    r.h5_path = h5_path_for(opt.output);
    if (!r.h5_path)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK)
        st = ld_cli_bisect_trials(&s, true, 0, (int)input_flags.threads, &t, err);
    if (st == LD_OK)
        st = choose(&s, t, &r, err);
    if (st == LD_OK)
        st = capture(t, &r, err);
    if (st == LD_OK)
        st = write_repro(&s, &r, err);
    if (st == LD_OK)
        st = check_repro(&s, &diverges, &worst, err);
    if (st != LD_OK)
        goto out;
    print_reduction(&s, t, &r);
    flags = ld_cli_bisect_flags(&input_flags, &engine_flags, &cmp_flags, true);
    qrepro = ld_cli_shell_quote(opt.output);
    qh5 = ld_cli_shell_quote(r.h5_path);
    if (!flags || !qrepro || !qh5) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    char brief[256];
    printf("written  %s, %s\n", opt.output, r.h5_path);
    printf("check    the repro loaded back %s: %s\n",
           diverges ? "still diverges" : "does NOT diverge with these flags",
           ld_cli_metrics_brief(&worst, brief, sizeof brief));
    printf("repro    layerdiff run %s --load-inputs %s%s\n", qrepro, qh5, flags);
    if (!diverges) {
        fprintf(stderr, "layerdiff reduce: the reduced model does not reproduce the divergence "
                "(the error needs more context: try a larger --context)\n");
        st = LD_ERR_MISMATCH;
    }
out:
    if (st == LD_ERR_MISMATCH && !diverges && err->status != LD_ERR_MISMATCH)
        ld_error_clear(err);
    free(flags);
    free(qrepro);
    free(qh5);
    reduction_free(&r);
    ld_trials_destroy(t);
    ld_cli_bisect_close(&s);
    return st;
}

static ld_status run_reduce(int argc, char **argv, ld_error *err)
{
    memset(&opt, 0, sizeof opt);
    memset(&input_flags, 0, sizeof input_flags);
    memset(&engine_flags, 0, sizeof engine_flags);
    memset(&cmp_flags, 0, sizeof cmp_flags);
    input_flags.seed = -1;
    ld_cli_args args;
    ld_status st = ld_cli_parse(CMD, argc, argv, reduce_options, N_OPTIONS, &args, err);
    if (st != LD_OK)
        return st;
    if (args.help) {
        ld_cmd_reduce.help(stdout);
        return LD_OK;
    }
    st = ld_cli_expect_positionals(CMD, &args, 1, 1, "MODEL (an .onnx file)", err);
    if (st == LD_OK)
        st = check_options(err);
    if (st != LD_OK)
        return st;
    return reduce_model(args.positional[0], err);
}

static void reduce_help(FILE *out)
{
    fprintf(out,
            "Usage: layerdiff reduce MODEL.onnx (--node NAME | --first-divergent | --origin)\n"
            "                        [--context K] [engine flags] [tolerances] -o REPRO.onnx\n"
            "\n"
            "Writes the smallest standalone ONNX model around one layer: the layer and up to\n"
            "K producer layers, their initializers, and as graph inputs the tensors they\n"
            "read from the rest of the model, with the dtypes and shapes of the run.\n"
            "REPRO.h5 (beside it) holds the reference values of those inputs: a layerdiff\n"
            "dump `run --load-inputs` takes. --first-divergent and --origin pick the layer\n"
            "from a comparison of the fp32 reference with the emulated engine (as `run`).\n"
            "The repro is loaded back and compared with the same flags; the one command\n"
            "that reproduces it is printed. Exit 0: the repro diverges; 1: it does not (or\n"
            "nothing diverges); 2: bad usage or input. docs/bisect.md has the details.\n"
            "\n");
    ld_cli_print_options(out, reduce_options, N_OPTIONS);
    fprintf(out,
            "\n"
            "Examples:\n"
            "  layerdiff reduce model.onnx --first-divergent -o repro.onnx\n"
            "  layerdiff reduce model.onnx --node /blocks.3/attn/Softmax --context 2 -o sm.onnx\n");
}

const ld_cli_command ld_cmd_reduce = {
    .name = CMD,
    .summary = "write the smallest model around a diverging layer, with its inputs",
    .run = run_reduce,
    .help = reduce_help,
};
