/* `layerdiff run MODEL`: runs a model on one or more backends with the same
 * inputs and streams every layer output into one HDF5 dump. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cli/format.h"
#include "cli/options.h"
#include "cli/profile.h"
#include "cli/run.h"
#include "layerdiff/inputs.h"
#include "layerdiff/onnx.h"
#include "layerdiff/sha256.h"

#define CMD "run"
#define MAX_BACKENDS 16

static struct {
    const char *backends;
    ld_cli_list plugins;
    const char *dump;
    const char *layers;
    int64_t threads;
    int64_t seed;          /* -1: not given */
    ld_cli_list ranges;
    ld_cli_list loads;
    ld_cli_list shapes;
    bool profile;
    const char *profile_json;
    int64_t warmup;
} opt;

/* The emulated engine's flags and the config they give (run_model builds it). */
static ld_cli_engine_values engine_flags;
static ld_engine_config engine_cfg;
static bool engine_selected; /* the emulated backend is among --backends */

static const ld_cli_option run_options[] = {
    {"backends", 0, LD_OPT_STRING, &opt.backends, "LIST",
     "backends to run, comma-separated (default: reference)"},
    {"backend-plugin", 0, LD_OPT_LIST, &opt.plugins, "LIB.so",
     "load a backend from a shared library (repeatable)"},
    {"dump", 0, LD_OPT_STRING, &opt.dump, "FILE.h5", "write the inputs and layer outputs here"},
    {"layers", 0, LD_OPT_STRING, &opt.layers, "all|outputs",
     "dump every layer output (default) or only the graph outputs"},
    {"threads", 't', LD_OPT_INT, &opt.threads, "N", "threads per kernel (default: all cores)"},
    {"seed", 0, LD_OPT_INT, &opt.seed, "N", "seed of the generated inputs (default 1)"},
    {"val-range", 0, LD_OPT_LIST, &opt.ranges, "RANGES",
     "generated values: [LO,HI] and/or NAME:[LO,HI] (default [0,1])"},
    {"load-inputs", 0, LD_OPT_LIST, &opt.loads, "SRC",
     "load inputs: a folder, .npy/.pb file, dump, or NAME:FILE,..."},
    {"input-shapes", 0, LD_OPT_LIST, &opt.shapes, "SHAPES",
     "dynamic dims: NAME:1x3x224x224 or DIM:N, comma-separated"},
    {"profile", 0, LD_OPT_FLAG, &opt.profile, NULL,
     "print time per op type, conv/gemm GFLOP/s and the peak RSS"},
    {"profile-json", 0, LD_OPT_STRING, &opt.profile_json, "FILE",
     "write that profile (and every node's time) as JSON"},
    {"warmup", 0, LD_OPT_INT, &opt.warmup, "N",
     "run each backend N times unobserved before the real run (benchmarks)"},
    LD_CLI_ENGINE_OPTIONS(engine_flags),
};
#define N_OPTIONS ((int)(sizeof run_options / sizeof run_options[0]))

/* --- signals ---------------------------------------------------------------------- */

/* The signal that asked us to stop (0: none). The observer polls it between
 * layers; SA_RESETHAND makes a second Ctrl-C kill at once. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    interrupted = sig;
}

typedef struct saved_signals {
    struct sigaction intr, term;
} saved_signals;

static void catch_signals(saved_signals *saved)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND | SA_RESTART; /* no EINTR in the middle of a dump write */
    interrupted = 0;
    sigaction(SIGINT, &sa, &saved->intr);
    sigaction(SIGTERM, &sa, &saved->term);
}

static void restore_signals(const saved_signals *saved)
{
    sigaction(SIGINT, &saved->intr, NULL);
    sigaction(SIGTERM, &saved->term, NULL);
}

/* --- options -------------------------------------------------------------------------- */

/* The list's items joined with ',' (new string), or NULL when empty. */
static ld_status join_list(const ld_cli_list *list, char **out, ld_error *err)
{
    *out = NULL;
    if (list->n == 0)
        return LD_OK;
    size_t len = 1;
    for (int i = 0; i < list->n; i++)
        len += strlen(list->items[i]) + 1;
    char *s = malloc(len);
    if (!s)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    s[0] = '\0';
    for (int i = 0; i < list->n; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, list->items[i]);
    }
    *out = s;
    return LD_OK;
}

static ld_status check_options(ld_error *err)
{
    if (strcmp(opt.layers, "all") != 0 && strcmp(opt.layers, "outputs") != 0)
        return ld_cli_usage_error(err, CMD, "--layers must be 'all' or 'outputs', got '%s'",
                                  opt.layers);
    if (opt.threads < 0 || opt.threads > 4096)
        return ld_cli_usage_error(err, CMD, "--threads must be between 0 and 4096, got %" PRId64,
                                  opt.threads);
    if (opt.warmup < 0 || opt.warmup > 1000)
        return ld_cli_usage_error(err, CMD, "--warmup must be between 0 and 1000, got %" PRId64,
                                  opt.warmup);
    if (opt.seed < -1)
        return ld_cli_usage_error(err, CMD, "--seed must not be negative, got %" PRId64,
                                  opt.seed);
    if (opt.loads.n && (opt.seed >= 0 || opt.ranges.n))
        return ld_cli_usage_error(err, CMD, "--load-inputs cannot be combined with --seed or "
                                  "--val-range (those describe generated inputs)");
    return LD_OK;
}

/* Built-in and plugin backends named by --backends, in that order. */
static ld_status resolve_backends(const ld_backend_vtable **chosen, int *n, ld_error *err)
{
    const ld_backend_vtable *plugins[LD_CLI_LIST_MAX];
    for (int i = 0; i < opt.plugins.n; i++) {
        ld_status st = ld_backend_load_plugin(opt.plugins.items[i], &plugins[i], err);
        if (st != LD_OK)
            return st;
    }
    char *names = strdup(opt.backends);
    if (!names)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_status st = LD_OK;
    char *save = NULL;
    *n = 0;
    for (char *name = strtok_r(names, ",", &save); name && st == LD_OK;
         name = strtok_r(NULL, ",", &save)) {
        const ld_backend_vtable *vt = ld_backend_find(name);
        for (int i = 0; !vt && i < opt.plugins.n; i++)
            if (strcmp(plugins[i]->name, name) == 0)
                vt = plugins[i];
        for (int i = 0; vt && i < *n; i++)
            if (chosen[i] == vt)
                st = ld_cli_usage_error(err, CMD, "--backends lists '%s' twice", name);
        if (st == LD_OK && !vt) {
            char avail[512];
            int nb, used = 0;
            const ld_backend_vtable *const *list = ld_backend_list(&nb);
            avail[0] = '\0';
            for (int i = 0; i < nb + opt.plugins.n && used < (int)sizeof avail; i++)
                used += snprintf(avail + used, sizeof avail - (size_t)used, "%s%s", i ? ", " : "",
                                 i < nb ? list[i]->name : plugins[i - nb]->name);
            st = ld_cli_usage_error(err, CMD, "unknown backend '%s' (available: %s)", name, avail);
        }
        if (st == LD_OK && *n == MAX_BACKENDS)
            st = ld_cli_usage_error(err, CMD, "--backends lists more than %d backends",
                                    MAX_BACKENDS);
        if (st == LD_OK)
            chosen[(*n)++] = vt;
    }
    free(names);
    if (st == LD_OK && *n == 0)
        st = ld_cli_usage_error(err, CMD, "--backends is empty");
    return st;
}

/* --- output ------------------------------------------------------------------------------ */

static void print_inputs(const ld_graph *g, const ld_input_set *in, const char *ranges)
{
    if (in->generated) {
        printf("inputs   generated: seed %" PRIu64 ", values in %s\n", in->seed,
               ranges ? ranges : "[0,1]");
    } else {
        printf("inputs   loaded from");
        for (int i = 0; i < opt.loads.n; i++)
            printf("%s %s", i ? "," : "", opt.loads.items[i]);
        printf("\n");
    }
    for (int k = 0; k < g->n_inputs; k++) {
        char shape[128];
        printf("  %s  %s  %s\n", g->values[g->inputs[k]].name,
               ld_dtype_name(in->tensors[k]->dtype),
               ld_shape_format(&in->shapes[k], shape, sizeof shape));
    }
}

static void print_backend(const ld_run_sink *sink, double prepare_s, double run_s)
{
    printf("%s  %" PRId64 " layer outputs, prepare %.1f ms, run %.1f ms", sink->backend,
           sink->layers, prepare_s * 1e3, run_s * 1e3);
    if (sink->dump)
        printf(" (dump %.1f ms, %" PRId64 " tensors)", sink->dump_seconds * 1e3, sink->dumped);
    printf("\n");
    ld_run_counters_print(&sink->counters, stdout);
    const ld_graph *g = sink->graph;
    for (int k = 0; k < g->n_outputs; k++) {
        const ld_run_stats *s = &sink->outputs[k];
        char shape[128], stats[256];
        if (!s->produced)
            continue;
        printf("  %s  %s  %s  %s\n", g->values[g->outputs[k]].name, ld_dtype_name(s->dtype),
               ld_shape_format(&s->shape, shape, sizeof shape),
               ld_run_stats_format(s, stats, sizeof stats));
    }
}

/* --- running ------------------------------------------------------------------------------ */

static ld_status backend_failed(const char *name, ld_status st, ld_error *err)
{
    if (st == LD_ERR_INTERRUPTED)
        return st;
    if (!err->message[0])
        return ld_error_set(err, st, "backend '%s' failed (%s)", name, ld_status_name(st));
    ld_error_prefix(err, "backend '%s'", name);
    return st;
}

/* A backend ready to run. */
typedef struct prepared {
    const ld_backend_vtable *vt;
    void *state;
    double prepare_seconds;
} prepared;

/* Creates and prepares every backend before any runs, so an unsupported
 * operator in the last one fails before the first spends its time. */
static ld_status prepare_backends(prepared *p, int n, const ld_graph *g, const ld_input_set *in,
                                  ld_error *err)
{
    ld_backend_config cfg = {.threads = (int)opt.threads};
    for (int i = 0; i < n; i++) {
        double t0 = ld_run_now();
        ld_error_clear(err);
        cfg.engine = strcmp(p[i].vt->name, "emulated") == 0 ? &engine_cfg : NULL;
        ld_status st = p[i].vt->create(&p[i].state, &cfg, err);
        if (st == LD_OK)
            st = p[i].vt->prepare(p[i].state, g, in->shapes, err);
        p[i].prepare_seconds = ld_run_now() - t0;
        if (st != LD_OK)
            return backend_failed(p[i].vt->name, st, err);
    }
    return LD_OK;
}

static void destroy_backends(prepared *p, int n)
{
    for (int i = 0; i < n; i++)
        if (p[i].state)
            p[i].vt->destroy(p[i].state);
}

/* Adds the backend's profile of the run just done to the report. */
static ld_status add_profile(const prepared *p, ld_profile_report *report, double run_seconds,
                             double dump_seconds, ld_error *err)
{
    ld_backend_profile prof = {0};
    bool have = p->vt->profile != NULL;
    if (have) {
        ld_status st = p->vt->profile(p->state, &prof, err);
        if (st != LD_OK)
            return backend_failed(p->vt->name, st, err);
    }
    return ld_profile_report_add(report, p->vt->name, run_seconds, dump_seconds,
                                 have ? &prof : NULL, opt.profile ? stdout : NULL, err);
}

/* The observer of warm-up runs: sees nothing, stops on a signal. */
static ld_status ignore_tensor(void *user, const ld_tensor_event *ev, ld_error *err)
{
    (void)user;
    (void)ev;
    if (interrupted)
        return ld_error_set(err, LD_ERR_INTERRUPTED, "interrupted");
    return LD_OK;
}

/* --warmup: untimed runs that fill the executor's buffer pool, the scratch
 * caches and the CPU caches, so the real run measures steady-state speed. */
static ld_status warm_up(const prepared *p, const ld_input_set *in, ld_error *err)
{
    ld_status st = LD_OK;
    for (int64_t k = 0; st == LD_OK && k < opt.warmup; k++) {
        ld_error_clear(err);
        st = p->vt->run(p->state, (const ld_tensor *const *)in->tensors, ignore_tensor, NULL,
                        err);
    }
    return st == LD_OK ? LD_OK : backend_failed(p->vt->name, st, err);
}

static bool is_emulated(const prepared *p)
{
    return strcmp(p->vt->name, "emulated") == 0;
}

static ld_status run_backend(const prepared *p, const ld_graph *g, const ld_input_set *in,
                             ld_dump_writer *dump, ld_profile_report *report, ld_error *err)
{
    const char *name = p->vt->name;
    ld_run_sink sink = {.dump = dump, .outputs_only = strcmp(opt.layers, "outputs") == 0,
                        .progress = isatty(STDERR_FILENO) == 1, .interrupted = &interrupted};
    ld_status st = warm_up(p, in, err);
    if (st == LD_OK)
        st = ld_run_sink_init(&sink, g, name, err);
    if (st != LD_OK)
        return st;
    if (dump) {
        char config[1024];
        ld_dump_run_info run = {.name = name, .backend = name, .config = NULL};
        if (is_emulated(p))
            run.config = ld_engine_config_describe(&engine_cfg, config, sizeof config);
        st = ld_dump_writer_begin_run(dump, &run, err);
    }
    double t0 = ld_run_now();
    if (st == LD_OK) {
        ld_error_clear(err);
        st = p->vt->run(p->state, (const ld_tensor *const *)in->tensors, ld_run_observe, &sink,
                        err);
        if (st != LD_OK)
            st = backend_failed(name, st, err);
    }
    double run_seconds = ld_run_now() - t0;
    if (st == LD_OK)
        st = ld_run_sink_finish(&sink, err);
    else if (sink.progress)
        fprintf(stderr, "\r\033[K");
    if (st == LD_OK && dump)
        st = ld_dump_writer_end_run(dump, err);
    if (st == LD_OK)
        print_backend(&sink, p->prepare_seconds, run_seconds);
    if (st == LD_OK && report)
        st = add_profile(p, report, run_seconds, sink.dump_seconds, err);
    ld_run_sink_free(&sink);
    return st;
}

static ld_status open_dump(ld_dump_writer **w, const ld_graph *g, const char *model_path,
                           const char *sha, const ld_input_set *in, ld_error *err)
{
    ld_dump_file_info info = {.model_path = model_path, .model_sha256 = sha,
                              .input_seed = in->generated ? (int64_t)in->seed : -1};
    ld_status st = ld_dump_writer_open(w, opt.dump, &info, NULL, err);
    for (int k = 0; st == LD_OK && k < g->n_inputs; k++)
        st = ld_dump_writer_add_input(*w, in->tensors[k], err);
    return st;
}

/* Everything after option parsing: model, inputs, backends, dump. */
static ld_status run_model(const char *model_path, ld_error *err)
{
    const ld_backend_vtable *backends[MAX_BACKENDS];
    prepared ready[MAX_BACKENDS];
    int n_backends = 0;
    ld_graph *g = NULL;
    ld_input_set in = {0};
    ld_dump_writer *dump = NULL;
    ld_profile_report *report = NULL;
    char *ranges = NULL, *shapes = NULL, sha[65];
    saved_signals saved;
    ld_status st = resolve_backends(backends, &n_backends, err);
    if (st == LD_OK)
        st = ld_cli_engine_setup(CMD, &engine_flags, backends, n_backends, &engine_cfg,
                                 &engine_selected, err);
    if (st == LD_OK)
        st = join_list(&opt.ranges, &ranges, err);
    if (st == LD_OK)
        st = join_list(&opt.shapes, &shapes, err);
    if (st == LD_OK)
        st = ld_onnx_load_file(&g, model_path, err);
    if (st == LD_OK)
        st = ld_sha256_file(model_path, sha, err);
    if (st == LD_OK) {
        ld_inputs_options io = {shapes, ranges, opt.seed >= 0 ? (uint64_t)opt.seed : 1,
                                opt.loads.n, opt.loads.items};
        st = ld_inputs_make(&in, g, &io, err);
        if (st == LD_ERR_USAGE) /* point at the help, as other usage errors do */
            st = ld_cli_usage_error(err, CMD, "%s", err->message);
    }
    if (st == LD_OK && engine_selected) /* conflicts fail here; warnings go to stderr */
        st = ld_cli_engine_plan(CMD, g, &engine_cfg, NULL, err);
    if (st == LD_OK && (opt.profile || opt.profile_json))
        st = ld_profile_report_new(&report, model_path, g,
                                   opt.threads > 0 ? (int)opt.threads
                                                   : (int)sysconf(_SC_NPROCESSORS_ONLN),
                                   err);
    if (st != LD_OK)
        goto out;
    printf("model    %s\nsha256   %s\n", model_path, sha);
    print_inputs(g, &in, ranges);
    for (int i = 0; i < n_backends; i++)
        ready[i] = (prepared){backends[i], NULL, 0};
    catch_signals(&saved);
    st = prepare_backends(ready, n_backends, g, &in, err);
    if (st == LD_OK && opt.dump)
        st = open_dump(&dump, g, model_path, sha, &in, err);
    for (int i = 0; st == LD_OK && i < n_backends; i++)
        st = run_backend(&ready[i], g, &in, dump, report, err);
    destroy_backends(ready, n_backends);
    if (st == LD_OK && interrupted)
        st = ld_error_set(err, LD_ERR_INTERRUPTED, "interrupted by %s",
                          interrupted == SIGTERM ? "SIGTERM" : "SIGINT");
    if (st == LD_OK && dump) {
        st = ld_dump_writer_commit(dump, err);
        dump = NULL;
        if (st == LD_OK)
            printf("dump     %s (%d run%s)\n", opt.dump, n_backends, n_backends == 1 ? "" : "s");
    }
    ld_dump_writer_abort(dump); /* a failed or interrupted run leaves no file */
    if (st == LD_OK && opt.profile) {
        char rss[32];
        printf("peak RSS %s\n", ld_fmt_bytes(ld_profile_peak_rss(), rss, sizeof rss));
    }
    if (st == LD_OK && opt.profile_json)
        st = ld_profile_report_write(report, opt.profile_json, err);
    restore_signals(&saved);
    if (st == LD_ERR_INTERRUPTED && opt.dump)
        ld_error_prefix(err, "%s not written", opt.dump);
out:
    ld_engine_config_clear(&engine_cfg);
    ld_profile_report_free(report);
    ld_input_set_clear(&in);
    ld_graph_destroy(g);
    free(ranges);
    free(shapes);
    return st;
}

static ld_status run_run(int argc, char **argv, ld_error *err)
{
    memset(&opt, 0, sizeof opt);
    memset(&engine_flags, 0, sizeof engine_flags);
    opt.backends = "reference";
    opt.layers = "all";
    opt.seed = -1;
    ld_cli_args args;
    ld_status st = ld_cli_parse(CMD, argc, argv, run_options, N_OPTIONS, &args, err);
    if (st != LD_OK)
        return st;
    if (args.help) {
        ld_cmd_run.help(stdout);
        return LD_OK;
    }
    st = ld_cli_expect_positionals(CMD, &args, 1, 1, "MODEL (an .onnx file)", err);
    if (st == LD_OK)
        st = check_options(err);
    if (st != LD_OK)
        return st;
    st = run_model(args.positional[0], err);
    if (st == LD_ERR_INTERRUPTED && interrupted == SIGTERM) {
        /* Die of the signal, so the parent sees 128 + 15 as for any killed process. */
        fprintf(stderr, "layerdiff: error: %s\n", err->message);
        fflush(NULL);
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
    }
    return st;
}

static void run_help(FILE *out)
{
    fprintf(out,
            "Usage: layerdiff run MODEL.onnx [--backends LIST] [--dump FILE.h5] [options]\n"
            "\n"
            "Runs the model on each backend with the same inputs and streams every layer\n"
            "output into one HDF5 dump (format: docs/dump-format.md): the inputs under\n"
            "/inputs, one group per backend under /runs. The dump is written under a\n"
            "temporary name and renamed only when every backend succeeded; a failed or\n"
            "interrupted run leaves no file. Prints each backend's time and the graph\n"
            "outputs' shapes and statistics; a progress line goes to stderr when it is a\n"
            "terminal.\n"
            "\n"
            "Inputs are generated from --seed (xoshiro256**, the same values on every\n"
            "machine) in --val-range, or loaded with --load-inputs from a folder of\n"
            "NAME.npy or input_N.pb files (ONNX test-data layout), one .npy/.pb file\n"
            "(one-input models), a layerdiff dump (its /inputs), or NAME:FILE pairs.\n"
            "Symbolic dims need values: --input-shapes batch:2 or x:1x3x224x224.\n"
            "\n");
    ld_cli_print_options(out, run_options, N_OPTIONS);
    fprintf(out,
            "\n"
            "Repeatable: --backend-plugin, --val-range, --load-inputs, --input-shapes,\n"
            "--layer-precisions, --layer-output-types.\n"
            "\n"
            "The engine flags configure the emulated backend (a GPU engine built with\n"
            "--fp16 / --bf16 / TF32, bit-exact on the CPU; docs/numerics.md, \"Emulated\n"
            "engine\") and need it among --backends. `layerdiff inspect MODEL --engine`\n"
            "with the same flags prints the precision every layer gets and why.\n"
            "\n"
            "Examples:\n"
            "  layerdiff run model.onnx --dump run.h5\n"
            "  layerdiff run bert.onnx --input-shapes batch:1,seq:128 --val-range ids:[0,30521]\n"
            "  layerdiff run model.onnx --load-inputs test_data_set_0 --layers outputs --dump o.h5\n"
            "  layerdiff run model.onnx --backend-plugin ./mine.so --backends reference,mine\n"
            "  layerdiff run model.onnx --backends reference,emulated --fp16 --dump fp16.h5\n");
}

const ld_cli_command ld_cmd_run = {
    .name = CMD,
    .summary = "run a model on backends and dump every layer output (HDF5)",
    .run = run_run,
    .help = run_help,
};
