/* `layerdiff run MODEL`: runs a model on backends with the same inputs. With
 * two backends (by default the fp32 reference and the emulated fp16 engine)
 * it compares them layer by layer as they run (cli/run_compare.c) and
 * prints the divergence summary; with one (or --no-compare) it runs each in
 * turn. --dump streams every layer output into one HDF5 dump. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/compare_options.h"
#include "cli/engine_options.h"
#include "cli/format.h"
#include "cli/interrupt.h"
#include "cli/memory_limit.h"
#include "cli/options.h"
#include "cli/profile.h"
#include "cli/run.h"
#include "layerdiff/inputs.h"
#include "layerdiff/onnx.h"
#include "layerdiff/report.h"
#include "layerdiff/sha256.h"
#include "report/atomic_file.h"

#define CMD "run"
#define MAX_BACKENDS 16

static struct {
    const char *backends;
    ld_cli_list plugins;
    const char *dump;
    const char *layers;
    ld_cli_input_values in; /* --threads, --seed, --val-range, --load-inputs, --input-shapes */
    bool profile;
    const char *profile_json;
    int64_t warmup;
    const char *max_memory;
    bool isolate, no_isolate, no_compare;
    bool quiet;
    bool no_fuse;
} opt;

/* Comparison (two backends): the flags, and what they give. */
#define DEFAULT_BACKENDS "reference,emulated"
#define ISOLATE_MAX_NODES 5000 /* isolation is on by default below this many nodes */
static ld_cli_compare_values cmp_flags;
static ld_compare_options cmp_opts;
static ld_summary_options summary_opts;
static char run_names[MAX_BACKENDS][96]; /* dump run names ("reference", "reference.2") */
static int run_argc;
static char **run_argv;
static double run_started;            /* ld_run_now() when the command began */
static ld_report_timing run_timing;   /* the comparing run's times, for the report */

/* The emulated engine's flags and the config they give (run_model builds it). */
static ld_cli_engine_values engine_flags;
static ld_engine_config engine_cfg;
static bool engine_selected; /* the emulated backend is among --backends */

static const ld_cli_option run_options[] = {
    {"backends", 0, LD_OPT_STRING, &opt.backends, "LIST",
     "backends, comma-separated; with two, the first is the reference the second is "
     "compared to (default: reference,emulated with --fp16)"},
    {"backend-plugin", 0, LD_OPT_LIST, &opt.plugins, "LIB.so",
     "load a backend from a shared library (repeatable)"},
    {"dump", 0, LD_OPT_STRING, &opt.dump, "FILE.h5", "write the inputs and layer outputs here"},
    {"layers", 0, LD_OPT_STRING, &opt.layers, "all|outputs",
     "dump every layer output (default) or only the graph outputs"},
    LD_CLI_INPUT_OPTIONS(opt.in),
    {"profile", 0, LD_OPT_FLAG, &opt.profile, NULL,
     "print time per op type, conv/gemm GFLOP/s and the peak RSS"},
    {"profile-json", 0, LD_OPT_STRING, &opt.profile_json, "FILE",
     "write that profile (and every node's time) as JSON"},
    {"warmup", 0, LD_OPT_INT, &opt.warmup, "N",
     "run each backend N times unobserved before the real run (benchmarks)"},
    {"max-memory", 0, LD_OPT_STRING, &opt.max_memory, "SIZE", LD_CLI_MAX_MEMORY_HELP},
    {"isolate", 0, LD_OPT_FLAG, &opt.isolate, NULL,
     "also run each test layer on the reference's inputs (default below 5000 nodes)"},
    {"no-isolate", 0, LD_OPT_FLAG, &opt.no_isolate, NULL, "accumulated error only"},
    {"no-compare", 0, LD_OPT_FLAG, &opt.no_compare, NULL,
     "run the backends one after the other without comparing them"},
    {"no-fuse", 0, LD_OPT_FLAG, &opt.no_fuse, NULL,
     "compute every layer on its own, storing each output (runs whose observer reads only "
     "the graph outputs fuse elementwise chains otherwise)"},
    {"quiet", 'q', LD_OPT_FLAG, &opt.quiet, NULL,
     "no progress line on stderr (drawn only on a terminal anyway)"},
    LD_CLI_ENGINE_OPTIONS(engine_flags),
    LD_CLI_COMPARE_OPTIONS(cmp_flags),
};
#define N_OPTIONS ((int)(sizeof run_options / sizeof run_options[0]))

/* --- options -------------------------------------------------------------------------- */

static ld_status check_options(ld_error *err)
{
    if (strcmp(opt.layers, "all") != 0 && strcmp(opt.layers, "outputs") != 0)
        return ld_cli_usage_error(err, CMD, "--layers must be 'all' or 'outputs', got '%s'",
                                  opt.layers);
    ld_status st = ld_cli_input_values_check(CMD, &opt.in, err);
    if (st != LD_OK)
        return st;
    if (opt.warmup < 0 || opt.warmup > 1000)
        return ld_cli_usage_error(err, CMD, "--warmup must be between 0 and 1000, got %" PRId64,
                                  opt.warmup);
    if (opt.isolate && opt.no_isolate)
        return ld_cli_usage_error(err, CMD, "--isolate and --no-isolate contradict each other");
    return LD_OK;
}

/* Two backends compare, unless --no-compare. */
static bool comparing(int n_backends)
{
    return n_backends == 2 && !opt.no_compare;
}

/* Backends holding layer outputs at once: both when they compare in lockstep
 * (--max-memory is the whole run's), else one at a time. */
static int lockstep_backends(const ld_backend_vtable *const *backends, int n_backends)
{
    return comparing(n_backends) && ld_backend_is_stepwise(backends[0]) &&
                   ld_backend_is_stepwise(backends[1])
               ? 2
               : 1;
}

/* Comparison flags need a comparison; more than two backends need --no-compare. */
static ld_status check_compare_usage(int n_backends, ld_error *err)
{
    const char *flag = ld_cli_compare_first_flag(&cmp_flags);
    if (!flag && opt.isolate)
        flag = "--isolate";
    if (!flag && opt.no_isolate)
        flag = "--no-isolate";
    if (n_backends > 2 && !opt.no_compare)
        return ld_cli_usage_error(err, CMD, "--backends lists %d backends: a comparison is "
                                  "between a reference and one test backend (give two, or "
                                  "--no-compare to run them side by side)", n_backends);
    if (flag && !comparing(n_backends))
        return ld_cli_usage_error(err, CMD, "%s needs a comparison: give two backends, the "
                                  "reference first (and no --no-compare)", flag);
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
        int seen = 0; /* a backend compared with itself is the second run of the same */
        for (int i = 0; vt && i < *n; i++)
            seen += chosen[i] == vt;
        if (seen && (opt.no_compare || *n != 1))
            st = ld_cli_usage_error(err, CMD, "--backends lists '%s' twice", name);
        if (vt && *n < MAX_BACKENDS)
            snprintf(run_names[*n], sizeof run_names[0], seen ? "%.80s.2" : "%.80s", name);
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
        for (int i = 0; i < opt.in.loads.n; i++)
            printf("%s %s", i ? "," : "", opt.in.loads.items[i]);
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
    /* Whether every observer `run` gets reads only the graph outputs' data
     * (backend.h): runs of one backend at a time without a dump of every
     * layer, and the warm-up runs (ignore_tensor) of a lockstep comparison,
     * whose real run is stepwise and never fuses. */
    const ld_backend_vtable *vts[MAX_BACKENDS];
    for (int i = 0; i < n && i < MAX_BACKENDS; i++)
        vts[i] = p[i].vt;
    bool outputs_only = comparing(n) ? lockstep_backends(vts, n) == 2
                                     : !opt.dump || strcmp(opt.layers, "outputs") == 0;
    ld_backend_config cfg = {.threads = (int)opt.in.threads,
                             .observe_outputs_only = outputs_only && !opt.no_fuse};
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
                             ld_profile_dump_time dump, ld_error *err)
{
    ld_backend_profile prof = {0};
    bool have = p->vt->profile != NULL;
    if (have) {
        ld_status st = p->vt->profile(p->state, &prof, err);
        if (st != LD_OK)
            return backend_failed(p->vt->name, st, err);
    }
    return ld_profile_report_add(report, p->vt->name, run_seconds, dump,
                                 have ? &prof : NULL, opt.profile ? stdout : NULL, err);
}

/* The observer of warm-up runs: sees nothing, stops on a signal. */
static ld_status ignore_tensor(void *user, const ld_tensor_event *ev, ld_error *err)
{
    (void)user;
    (void)ev;
    if (ld_cli_interrupted)
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
                        .progress = isatty(STDERR_FILENO) == 1 && !opt.quiet,
                        .interrupted = &ld_cli_interrupted};
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
        st = add_profile(p, report, run_seconds,
                         (ld_profile_dump_time){sink.dump_seconds, sink.dump_cpu_seconds}, err);
    ld_run_sink_free(&sink);
    return st;
}

/* --- comparing ------------------------------------------------------------------------- */

/* What the dump and the report say about a backend's configuration. */
static const char *run_config(const ld_backend_vtable *vt, char *buf, size_t size)
{
    return strcmp(vt->name, "emulated") == 0 ? ld_engine_config_describe(&engine_cfg, buf, size)
                                             : NULL;
}

/* The two backends compared as they run (cli/run_compare.c). Prints their
 * lines; *out receives the finished session for the summary (new). */
static ld_status compare_backends(prepared *p, const ld_graph *g, const ld_input_set *in,
                                  ld_dump_writer *dump, ld_profile_report *report,
                                  ld_compare_session **out, int *dump_runs, ld_error *err)
{
    char config[2][1024];
    ld_run_side ref = {.vt = p[0].vt, .state = p[0].state, .run_name = run_names[0],
                       .config = run_config(p[0].vt, config[0], sizeof config[0])};
    ld_run_side test = {.vt = p[1].vt, .state = p[1].state, .run_name = run_names[1],
                        .config = run_config(p[1].vt, config[1], sizeof config[1])};
    ld_run_compare c = {
        .graph = g, .inputs = (const ld_tensor *const *)in->tensors, .ref = &ref, .test = &test,
        .isolate = opt.isolate || (!opt.no_isolate && g->n_nodes < ISOLATE_MAX_NODES),
        .outputs_only = strcmp(opt.layers, "outputs") == 0,
        .progress = isatty(STDERR_FILENO) == 1 && !opt.quiet, .interrupted = &ld_cli_interrupted,
        .dump = dump,
    };
    ld_status st = warm_up(&p[0], in, err);
    if (st == LD_OK)
        st = warm_up(&p[1], in, err);
    if (st == LD_OK)
        st = ld_compare_session_create(out, &cmp_opts, err);
    c.session = *out;
    if (st == LD_OK) {
        ld_error_clear(err);
        st = ld_run_compare_go(&c, err);
    }
    if (st == LD_OK)
        st = ld_compare_session_finish(*out, err);
    if (st == LD_OK) {
        print_backend(&ref.sink, p[0].prepare_seconds, ref.seconds);
        print_backend(&test.sink, p[1].prepare_seconds, test.seconds);
        if (c.isolated)
            printf("isolated  %" PRId64 " layers of %s on the reference's inputs, %.1f ms "
                   "(within its run)\n", c.isolated_layers, run_names[1],
                   c.isolate_seconds * 1e3);
    }
    if (st == LD_OK && report)
        st = add_profile(&p[0], report, ref.seconds,
                         (ld_profile_dump_time){ref.sink.dump_seconds, ref.sink.dump_cpu_seconds},
                         err);
    if (st == LD_OK && report)
        st = add_profile(&p[1], report, test.seconds,
                         (ld_profile_dump_time){
                             test.sink.dump_seconds + c.iso_sink.dump_seconds,
                             test.sink.dump_cpu_seconds + c.iso_sink.dump_cpu_seconds},
                         err);
    run_timing = (ld_report_timing){.present = true, .ref_seconds = ref.seconds,
                                    .test_seconds = test.seconds,
                                    .compare_seconds = c.compare_seconds};
    *dump_runs = c.isolated ? 3 : 2;
    ld_run_compare_clear(&c);
    return st;
}

/* --report-json -: the JSON alone on stdout, so everything else goes to
 * stderr until the report is written (the summary already does). */
static int saved_stdout = -1;

static void stdout_to_stderr(void)
{
    fflush(stdout);
    saved_stdout = dup(STDOUT_FILENO);
    if (saved_stdout >= 0)
        dup2(STDERR_FILENO, STDOUT_FILENO);
}

static void stdout_back(void)
{
    if (saved_stdout < 0)
        return;
    fflush(stdout);
    dup2(saved_stdout, STDOUT_FILENO);
    close(saved_stdout);
    saved_stdout = -1;
}

/* Summary on the terminal, JSON report; LD_ERR_MISMATCH (no message) when a
 * tensor failed. */
static ld_status report_comparison(const ld_compare_session *session, const char *model_path,
                                   const char *sha, const ld_input_set *in,
                                   const ld_backend_vtable *const *backends, ld_error *err)
{
    char config[2][1024], *line = ld_cli_command_line(run_argc, run_argv);
    ld_report_context ctx = {
        .command = CMD, .command_line = line, .model_path = model_path, .model_sha256 = sha,
        .ref_run = run_names[0], .ref_backend = backends[0]->name,
        .ref_config = run_config(backends[0], config[0], sizeof config[0]),
        .test_run = run_names[1], .test_backend = backends[1]->name,
        .test_config = run_config(backends[1], config[1], sizeof config[1]),
        .input_seed = in->generated ? (int64_t)in->seed : -1, .timing = run_timing,
    };
    ctx.timing.total_seconds = ld_run_now() - run_started;
    fflush(stdout);
    ld_report_print_summary(session, &ctx, &summary_opts,
                            ld_cli_compare_summary_stream(&cmp_flags));
    ld_status st = LD_OK;
    stdout_back();
    if (cmp_flags.report_json)
        st = ld_report_write_json(session, &ctx, cmp_flags.report_json, err);
    if (st == LD_OK)
        st = ld_cli_report_write_session(&cmp_flags.render, session, &ctx, err);
    free(line);
    if (st == LD_OK && !ld_compare_session_summary(session)->pass) {
        ld_error_clear(err);
        st = err->status = LD_ERR_MISMATCH; /* the summary said it all */
    }
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
    ld_cli_saved_signals saved;
    int dump_temp = -1; /* the dump's temporary file in the signal registry */
    uint64_t max_memory = 0;
    ld_compare_session *session = NULL;
    int dump_runs = 0;
    ld_status st = resolve_backends(backends, &n_backends, err);
    if (st == LD_OK)
        st = check_compare_usage(n_backends, err);
    if (st == LD_OK && comparing(n_backends))
        st = ld_cli_compare_setup(CMD, &cmp_flags, &cmp_opts, &summary_opts, err);
    /* as many as the kernels: the isolated pairs compared beside the accumulated ones */
    cmp_opts.threads = opt.in.threads > 0 ? (int)opt.in.threads
                                          : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (st == LD_OK && comparing(n_backends) && cmp_flags.report_json &&
        strcmp(cmp_flags.report_json, "-") == 0)
        stdout_to_stderr();
    if (st == LD_OK)
        st = ld_cli_engine_setup(CMD, &engine_flags, backends, n_backends, &engine_cfg,
                                 &engine_selected, err);
    if (st == LD_OK)
        st = ld_cli_list_join(&opt.in.ranges, &ranges, err);
    if (st == LD_OK)
        st = ld_cli_list_join(&opt.in.shapes, &shapes, err);
    if (st == LD_OK)
        st = ld_cli_memory_limit(CMD, opt.max_memory, &max_memory, err);
    if (st == LD_OK)
        st = ld_cli_memory_check_file(model_path, max_memory, err);
    if (st == LD_OK)
        st = ld_onnx_load_file(&g, model_path, err);
    if (st == LD_OK && !opt.in.loads.n) /* before generating inputs that would not fit */
        st = ld_cli_memory_check_run(g, model_path, shapes, NULL,
                                     lockstep_backends(backends, n_backends), max_memory, err);
    if (st == LD_OK)
        st = ld_sha256_file(model_path, sha, err);
    if (st == LD_OK) {
        ld_inputs_options io = {shapes, ranges, opt.in.seed >= 0 ? (uint64_t)opt.in.seed : 1,
                                opt.in.loads.n, opt.in.loads.items};
        st = ld_inputs_make(&in, g, &io, err);
        if (st == LD_ERR_USAGE) /* point at the help, as other usage errors do */
            st = ld_cli_usage_error(err, CMD, "%s", err->message);
    }
    if (st == LD_OK && opt.in.loads.n)
        st = ld_cli_memory_check_run(g, model_path, NULL, in.shapes,
                                     lockstep_backends(backends, n_backends), max_memory, err);
    if (st == LD_OK && engine_selected) /* conflicts fail here; warnings go to stderr */
        st = ld_cli_engine_plan(CMD, g, &engine_cfg, NULL, err);
    if (st == LD_OK && (opt.profile || opt.profile_json))
        st = ld_profile_report_new(&report, model_path, g,
                                   opt.in.threads > 0 ? (int)opt.in.threads
                                                   : (int)sysconf(_SC_NPROCESSORS_ONLN),
                                   err);
    if (st != LD_OK)
        goto out;
    printf("model    %s\nsha256   %s\n", model_path, sha);
    print_inputs(g, &in, ranges);
    for (int i = 0; i < n_backends; i++)
        ready[i] = (prepared){backends[i], NULL, 0};
    ld_cli_interrupt_catch(&saved);
    st = prepare_backends(ready, n_backends, g, &in, err);
    if (st == LD_OK && opt.dump)
        st = open_dump(&dump, g, model_path, sha, &in, err);
    if (dump) /* a second Ctrl-C removes it (the writer frees its own copy of the name) */
        dump_temp = ld_temp_files_add(ld_dump_writer_temp_path(dump));
    dump_runs = n_backends;
    if (st == LD_OK && comparing(n_backends))
        st = compare_backends(ready, g, &in, dump, report, &session, &dump_runs, err);
    for (int i = 0; st == LD_OK && !comparing(n_backends) && i < n_backends; i++) {
        st = run_backend(&ready[i], g, &in, dump, report, err);
        destroy_backends(&ready[i], 1); /* its buffers go before the next backend runs */
        ready[i].state = NULL;
    }
    destroy_backends(ready, n_backends);
    if (st == LD_OK && ld_cli_interrupted)
        st = ld_error_set(err, LD_ERR_INTERRUPTED, "interrupted by %s", ld_cli_interrupt_name());
    if (st == LD_OK && dump) {
        st = ld_dump_writer_commit(dump, err);
        dump = NULL;
        if (st == LD_OK)
            printf("dump     %s (%d run%s)\n", opt.dump, dump_runs, dump_runs == 1 ? "" : "s");
    }
    ld_dump_writer_abort(dump); /* a failed or interrupted run leaves no file */
    ld_temp_files_remove(dump_temp);
    if (st == LD_OK && opt.profile) {
        char rss[32];
        printf("peak RSS %s\n", ld_fmt_bytes(ld_profile_peak_rss(), rss, sizeof rss));
    }
    if (st == LD_OK && opt.profile_json)
        st = ld_profile_report_write(report, opt.profile_json, err);
    if (st == LD_OK && session)
        st = report_comparison(session, model_path, sha, &in, backends, err);
    ld_cli_interrupt_restore(&saved);
    if (st == LD_ERR_INTERRUPTED && opt.dump)
        ld_error_prefix(err, "%s not written", opt.dump);
out:
    stdout_back();
    ld_compare_session_destroy(session);
    ld_cli_compare_options_clear(&cmp_opts); /* after the session, which borrows it */
    ld_memory_limit_set(0);
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
    memset(&cmp_flags, 0, sizeof cmp_flags);
    memset(&cmp_opts, 0, sizeof cmp_opts);
    opt.layers = "all";
    opt.in.seed = -1;
    run_argc = argc;
    run_argv = argv;
    run_started = ld_run_now();
    run_timing = (ld_report_timing){0}; /* set by a comparing run */
    ld_cli_args args;
    ld_status st = ld_cli_parse(CMD, argc, argv, run_options, N_OPTIONS, &args, err);
    if (st != LD_OK)
        return st;
    if (!opt.backends) {
        /* The default: the fp32 reference against the emulated engine in fp16
         * (unless the flags ask for bf16). */
        opt.backends = DEFAULT_BACKENDS;
        engine_flags.fp16 = !engine_flags.bf16;
    }
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
    if (st == LD_ERR_INTERRUPTED && ld_cli_interrupted == SIGTERM) {
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
            "By default runs the fp32 reference and the emulated engine in fp16 in\n"
            "lockstep and compares every layer of the second with the first as it is\n"
            "produced: the accumulated error and, with --isolate (default below 5000\n"
            "nodes), the layer's own error on the reference's inputs. Prints the\n"
            "divergence summary (first divergent layer, origin layers, culprits); exit 0\n"
            "when every tensor is within tolerance, 1 when one is not. Memory stays at\n"
            "both backends' live tensors, whatever the depth. With one backend or\n"
            "--no-compare, runs each backend in turn. docs/cli.md has the details.\n"
            "\n"
            "--dump streams every layer output into one HDF5 dump (format:\n"
            "docs/dump-format.md): the inputs under /inputs, one group per run under\n"
            "/runs (a comparison adds '<test>.isolated'). The dump is written under a\n"
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
            LD_CLI_COMPARE_HELP
            "\n"
            "Examples:\n"
            "  layerdiff run model.onnx\n"
            "  layerdiff run model.onnx --report-json report.json --dump run.h5\n"
            "  layerdiff run model.onnx --accumulate half --atol 'head/*:1e-2'\n"
            "  layerdiff run model.onnx --backends reference --dump run.h5\n"
            "  layerdiff run bert.onnx --input-shapes batch:1,seq:128 --val-range ids:[0,30521]\n"
            "  layerdiff run model.onnx --load-inputs test_data_set_0 --layers outputs --dump o.h5\n"
            "  layerdiff run model.onnx --backend-plugin ./mine.so --backends reference,mine\n"
            "  layerdiff run model.onnx --backends reference,emulated --fp16 --dump fp16.h5\n");
}

const ld_cli_command ld_cmd_run = {
    .name = CMD,
    .summary = "run a model on two backends and compare every layer live (dump: HDF5)",
    .run = run_run,
    .help = run_help,
};
