/* `layerdiff compare A.h5 [B.h5]`: compares two runs of one dump, or a run
 * of a golden dump against a run of today's, layer by layer.
 *
 * Tensors are matched by name and streamed one pair at a time (plus the
 * isolated tensor when the test dump has an isolated run of the test run)
 * into a comparison session, so memory stays at the largest pair whatever
 * the dumps' size. The model inputs are compared first: two dumps made from
 * different inputs then show the inputs as the origin of every difference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/compare_options.h"
#include "cli/format.h"
#include "cli/options.h"
#include "cli/progress.h"
#include "cli/run.h"
#include "layerdiff/dump.h"
#include "layerdiff/report.h"

#define CMD "compare"
#define MAX_LISTED 5   /* names listed in a warning line */

static struct {
    const char *ref_run, *test_run, *layers;
    bool quiet;
} opt;
static ld_cli_compare_values cmp_flags;

static const ld_cli_option compare_options[] = {
    {"ref-run", 0, LD_OPT_STRING, &opt.ref_run, "NAME",
     "the reference run (in A.h5; default: see above)"},
    {"test-run", 0, LD_OPT_STRING, &opt.test_run, "NAME",
     "the test run (in B.h5, or A.h5 when alone; default: see above)"},
    {"layers", 0, LD_OPT_STRING, &opt.layers, "all|outputs",
     "compare every tensor (default) or only the graph outputs (and inputs)"},
    {"quiet", 'q', LD_OPT_FLAG, &opt.quiet, NULL,
     "no progress line on stderr (drawn only on a terminal anyway)"},
    LD_CLI_COMPARE_OPTIONS(cmp_flags),
};
#define N_OPTIONS ((int)(sizeof compare_options / sizeof compare_options[0]))

static void compare_help(FILE *out);

/* One side of the comparison: a dump and a run in it. */
typedef struct side {
    const char *path;
    ld_dump *dump;     /* owned unless `borrowed` (one dump for both sides) */
    bool borrowed;
    int run;
} side;

typedef struct job {
    side ref, test;
    int isolated;                 /* run in the test dump holding the isolated layers, -1 */
    bool outputs_only;
    ld_compare_session *session;
    int n_layers;                 /* layer outputs compared (not counting model inputs) */
    int n_missing_in_test, n_missing_in_ref;
    const char **missing_in_test; /* borrowed from the dumps' metadata */
    const char **missing_in_ref;
    ld_progress progress;         /* "compare: tensor 12/300  name" on a terminal */
    double started;               /* monotonic seconds at the command's start */
    double compare_seconds;       /* reading the tensors and comparing them */
} job;

/* --- choosing runs ------------------------------------------------------------------------- */

static bool is_ordinary(const ld_dump *d, int run)
{
    const ld_dump_run_info *r = ld_dump_run(d, run);
    return r && (!r->isolated_of || !r->isolated_of[0]);
}

/* "reference, emulated" into buf, for messages. */
static char *run_names(const ld_dump *d, char *buf, size_t size)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < ld_dump_run_count(d) && o < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? ", " : "", ld_dump_run(d, i)->name);
    if (!ld_dump_run_count(d))
        snprintf(buf, size, "none");
    return buf;
}

static ld_status find_named(const side *s, const char *name, const char *flag, int *out,
                            ld_error *err)
{
    char runs[512];
    *out = ld_dump_find_run(s->dump, name);
    if (*out < 0)
        return ld_error_set(err, LD_ERR_USAGE, "%s: no run '%s' in '%s' (its runs: %s)", flag,
                            name, s->path, run_names(s->dump, runs, sizeof runs));
    return LD_OK;
}

/* The only ordinary run of d (except `skip`), or: -1 when none, -2 when several. */
static int only_run(const ld_dump *d, int skip, bool skip_reference)
{
    int found = -1;
    for (int i = 0; i < ld_dump_run_count(d); i++) {
        if (i == skip || !is_ordinary(d, i) ||
            (skip_reference && strcmp(ld_dump_run(d, i)->name, "reference") == 0))
            continue;
        if (found >= 0)
            return -2;
        found = i;
    }
    return found;
}

/* One dump: ref = "reference" or the first run; test = the first other run. */
static ld_status choose_in_one(job *j, ld_error *err)
{
    side *s = &j->ref;
    char runs[512];
    ld_status st = LD_OK;
    if (opt.ref_run) {
        st = find_named(s, opt.ref_run, "--ref-run", &j->ref.run, err);
    } else {
        j->ref.run = ld_dump_find_run(s->dump, "reference");
        for (int i = 0; j->ref.run < 0 && i < ld_dump_run_count(s->dump); i++)
            if (is_ordinary(s->dump, i))
                j->ref.run = i;
    }
    if (st == LD_OK && opt.test_run) {
        st = find_named(s, opt.test_run, "--test-run", &j->test.run, err);
    } else if (st == LD_OK) {
        j->test.run = -1;
        for (int i = 0; j->test.run < 0 && i < ld_dump_run_count(s->dump); i++)
            if (i != j->ref.run && is_ordinary(s->dump, i))
                j->test.run = i;
    }
    if (st != LD_OK)
        return st;
    if (j->ref.run < 0 || j->test.run < 0)
        return ld_error_set(err, LD_ERR_INPUT, "'%s' has %s (runs: %s): nothing to compare; "
                            "give a second dump", s->path, j->ref.run < 0 ? "no runs"
                            : "only one run", run_names(s->dump, runs, sizeof runs));
    if (j->ref.run == j->test.run)
        return ld_error_set(err, LD_ERR_USAGE, "the reference and test runs are both '%s' "
                            "of '%s': nothing to compare", ld_dump_run(s->dump, j->ref.run)->name,
                            s->path);
    return LD_OK;
}

/* Two dumps: test = --test-run, the run named as --ref-run, the only run or
 * the only run not named "reference"; ref = --ref-run, the run named as the
 * test run, or the only run. Anything else is ambiguous. */
static ld_status choose_in_two(job *j, ld_error *err)
{
    char runs[512];
    ld_status st = LD_OK;
    const ld_dump *a = j->ref.dump, *b = j->test.dump;
    if (opt.test_run) {
        st = find_named(&j->test, opt.test_run, "--test-run", &j->test.run, err);
    } else {
        j->test.run = opt.ref_run ? ld_dump_find_run(b, opt.ref_run) : -1;
        if (j->test.run < 0)
            j->test.run = only_run(b, -1, false);
        if (j->test.run == -2)
            j->test.run = only_run(b, -1, true);
        if (j->test.run < 0)
            return ld_error_set(err, LD_ERR_USAGE, "cannot tell which run of '%s' to test "
                                "(its runs: %s): pass --test-run NAME", j->test.path,
                                run_names(b, runs, sizeof runs));
    }
    if (st != LD_OK)
        return st;
    const char *test_name = ld_dump_run(b, j->test.run)->name;
    if (opt.ref_run)
        return find_named(&j->ref, opt.ref_run, "--ref-run", &j->ref.run, err);
    j->ref.run = ld_dump_find_run(a, test_name);
    if (j->ref.run < 0)
        j->ref.run = only_run(a, -1, false);
    if (j->ref.run < 0)
        return ld_error_set(err, LD_ERR_USAGE, "cannot tell which run of '%s' is the "
                            "reference: none is named '%s' like the test run (its runs: %s); "
                            "pass --ref-run NAME", j->ref.path, test_name,
                            run_names(a, runs, sizeof runs));
    return LD_OK;
}

/* The isolated run of the test run, if the test dump has one and it means
 * something here: its layers ran on the inputs of the test dump's reference
 * run, so its error is the layer's own only against that reference. Two
 * dumps: used when the reference run comes from another backend (golden
 * reference vs today's engine), not when both sides ran the same backend
 * (golden engine vs today's engine: today's layers never saw golden inputs). */
static int find_isolated(const side *ref, const side *test)
{
    const char *name = ld_dump_run(test->dump, test->run)->name;
    const char *ref_backend = ld_dump_run(ref->dump, ref->run)->backend;
    const char *test_backend = ld_dump_run(test->dump, test->run)->backend;
    if (ref->dump != test->dump && ref_backend && test_backend &&
        strcmp(ref_backend, test_backend) == 0)
        return -1;
    for (int i = 0; i < ld_dump_run_count(test->dump); i++) {
        const char *of = ld_dump_run(test->dump, i)->isolated_of;
        if (of && strcmp(of, name) == 0)
            return i;
    }
    return -1;
}

/* --- graph outputs ------------------------------------------------------------------------- */

/* Marks the graph outputs of the test run: from the dump's graph-output
 * flag (format version 2), else (older dumps) the tensors no tensor of the
 * run reads, which misses a graph output a later layer also reads. *known is
 * false when the run records neither. *flagged: the flag was used. */
static ld_status find_outputs(const side *test, bool **out, bool *known, bool *flagged,
                              ld_error *err)
{
    int n = ld_dump_tensor_count(test->dump, test->run);
    bool *consumed = calloc((size_t)(n ? n : 1), sizeof *consumed);
    *out = calloc((size_t)(n ? n : 1), sizeof **out);
    *known = false;
    *flagged = n > 0;
    if (!consumed || !*out) {
        free(consumed);
        free(*out);
        *out = NULL;
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        const ld_dump_tensor_meta *m = ld_dump_tensor_meta_at(test->dump, test->run, i);
        *flagged &= m->graph_output >= 0;
        *known |= m->n_inputs > 0;
        for (int k = 0; k < m->n_inputs; k++) {
            int at = m->inputs[k] && *m->inputs[k]
                         ? ld_dump_find_tensor(test->dump, test->run, m->inputs[k]) : -1;
            if (at >= 0)
                consumed[at] = true;
        }
    }
    *known |= *flagged;
    for (int i = 0; i < n; i++)
        (*out)[i] = *flagged ? ld_dump_tensor_meta_at(test->dump, test->run, i)->graph_output > 0
                             : *known && !consumed[i];
    free(consumed);
    return LD_OK;
}

/* --- comparing ------------------------------------------------------------------------------ */

static ld_status note_missing(const char ***list, int *n, const char *name, ld_error *err)
{
    const char **grown = realloc(*list, (size_t)(*n + 1) * sizeof *grown);
    if (!grown)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    grown[(*n)++] = name;
    *list = grown;
    return LD_OK;
}

static ld_status test_precision(const side *test, const ld_dump_tensor_meta *m,
                                ld_precision *out, ld_error *err)
{
    *out = LD_PRECISION_FP32;
    if (!m->precision || !m->precision[0] || ld_precision_from_name(m->precision, out))
        return LD_OK;
    return ld_error_set(err, LD_ERR_INPUT, "tensor '%s' in run '%s' of '%s': unknown "
                        "precision '%s'", m->name, ld_dump_run(test->dump, test->run)->name,
                        test->path, m->precision);
}

static ld_status check_shapes(const job *j, const ld_dump_tensor_meta *r,
                              const ld_dump_tensor_meta *t, ld_error *err)
{
    char a[128], b[128];
    if (ld_shape_equal(&r->shape, &t->shape))
        return LD_OK;
    return ld_error_set(err, LD_ERR_INPUT, "tensor '%s': shape %s in the reference ('%s') but "
                        "%s in the test ('%s')", t->name, ld_shape_format(&r->shape, a, sizeof a),
                        j->ref.path, ld_shape_format(&t->shape, b, sizeof b), j->test.path);
}

/* One pair: ref tensor ri of run `ref_run`, test tensor ti of `test_run`
 * (run -1: the inputs group), plus the isolated tensor when there is one. */
static ld_status compare_pair(job *j, int ref_run, int ri, int test_run, int ti, bool is_output,
                              ld_error *err)
{
    ld_tensor *ref = NULL, *test = NULL, *iso = NULL;
    const ld_dump_tensor_meta *rm = ref_run < 0 ? ld_dump_input_meta(j->ref.dump, ri)
                                                : ld_dump_tensor_meta_at(j->ref.dump, ref_run, ri);
    const ld_dump_tensor_meta *tm = test_run < 0
                                        ? ld_dump_input_meta(j->test.dump, ti)
                                        : ld_dump_tensor_meta_at(j->test.dump, test_run, ti);
    ld_precision precision = LD_PRECISION_FP32;
    ld_status st = check_shapes(j, rm, tm, err);
    if (st == LD_OK && test_run >= 0)
        st = test_precision(&j->test, tm, &precision, err);
    if (st == LD_OK)
        st = ld_dump_read_tensor(j->ref.dump, ref_run, ri, &ref, err);
    if (st == LD_OK)
        st = ld_dump_read_tensor(j->test.dump, test_run, ti, &test, err);
    int iso_i = test_run >= 0 && j->isolated >= 0
                    ? ld_dump_find_tensor(j->test.dump, j->isolated, tm->name) : -1;
    if (st == LD_OK && iso_i >= 0)
        st = ld_dump_read_tensor(j->test.dump, j->isolated, iso_i, &iso, err);
    if (st == LD_OK) {
        ld_compare_item item = {
            .name = tm->name, .node = tm->node, .op_type = tm->op_type,
            .topo_index = test_run < 0 ? -1 : tm->topo_index,
            .output_index = test_run < 0 ? 0 : tm->output_index, .precision = precision,
            .counters = tm->counters, .n_inputs = tm->n_inputs, .inputs = tm->inputs,
            .is_graph_output = is_output, .ref = ref, .test = test, .isolated = iso};
        st = ld_compare_session_add(j->session, &item, err);
    }
    ld_tensor_destroy(ref);
    ld_tensor_destroy(test);
    ld_tensor_destroy(iso);
    return st;
}

static int find_input(const ld_dump *d, const char *name)
{
    for (int i = 0; i < ld_dump_input_count(d); i++)
        if (strcmp(ld_dump_input_meta(d, i)->name, name) == 0)
            return i;
    return -1;
}

/* The model inputs (by name when they come from two dumps). */
static ld_status compare_inputs(job *j, ld_error *err)
{
    ld_status st = LD_OK;
    for (int i = 0; st == LD_OK && i < ld_dump_input_count(j->test.dump); i++) {
        const char *name = ld_dump_input_meta(j->test.dump, i)->name;
        int r = find_input(j->ref.dump, name);
        st = r < 0 ? note_missing(&j->missing_in_ref, &j->n_missing_in_ref, name, err)
                   : compare_pair(j, -1, r, -1, i, false, err);
        ld_progress_update(&j->progress, i + 1, name);
    }
    for (int i = 0; st == LD_OK && i < ld_dump_input_count(j->ref.dump); i++) {
        const char *name = ld_dump_input_meta(j->ref.dump, i)->name;
        if (find_input(j->test.dump, name) < 0)
            st = note_missing(&j->missing_in_test, &j->n_missing_in_test, name, err);
    }
    return st;
}

static ld_status compare_layers(job *j, ld_error *err)
{
    bool *is_output = NULL, known = false, flagged = false;
    ld_status st = find_outputs(&j->test, &is_output, &known, &flagged, err);
    if (st == LD_OK && j->outputs_only && known && !flagged)
        fprintf(stderr, "note: --layers outputs: '%s' has no graph-output flags (written before "
                "dump format 2); taking the tensors no layer of run '%s' reads as the graph "
                "outputs\n", j->test.path, ld_dump_run(j->test.dump, j->test.run)->name);
    if (st == LD_OK && j->outputs_only && !known)
        st = ld_error_set(err, LD_ERR_INPUT, "--layers outputs: run '%s' of '%s' does not record "
                          "the tensors each layer reads, so its graph outputs are unknown; "
                          "compare all layers", ld_dump_run(j->test.dump, j->test.run)->name,
                          j->test.path);
    int n = ld_dump_tensor_count(j->test.dump, j->test.run);
    for (int i = 0; st == LD_OK && i < n; i++) {
        const ld_dump_tensor_meta *m = ld_dump_tensor_meta_at(j->test.dump, j->test.run, i);
        int r = ld_dump_find_tensor(j->ref.dump, j->ref.run, m->name);
        if (r < 0)
            st = note_missing(&j->missing_in_ref, &j->n_missing_in_ref, m->name, err);
        else if (!j->outputs_only || is_output[i])
            st = compare_pair(j, j->ref.run, r, j->test.run, i, is_output[i], err);
        j->n_layers += r >= 0 && st == LD_OK && (!j->outputs_only || is_output[i]);
        ld_progress_update(&j->progress, ld_dump_input_count(j->test.dump) + i + 1, m->name);
    }
    n = ld_dump_tensor_count(j->ref.dump, j->ref.run);
    for (int i = 0; st == LD_OK && i < n; i++) {
        const char *name = ld_dump_tensor_meta_at(j->ref.dump, j->ref.run, i)->name;
        if (ld_dump_find_tensor(j->test.dump, j->test.run, name) < 0)
            st = note_missing(&j->missing_in_test, &j->n_missing_in_test, name, err);
    }
    free(is_output);
    return st;
}

/* --- reporting ------------------------------------------------------------------------------ */

static void warn_missing(const job *j, int n, const char *const *names, const char *where)
{
    if (n == 0)
        return;
    fprintf(stderr, "layerdiff %s: warning: %d tensor%s only in the %s, not compared:", CMD, n,
            n == 1 ? "" : "s", where);
    for (int i = 0; i < n && i < MAX_LISTED; i++) {
        fputs(i ? ", '" : " '", stderr);
        for (const char *c = names[i]; *c; c++) /* no terminal control from a name */
            fputc((unsigned char)*c < 0x20 || *c == 0x7F ? '?' : *c, stderr);
        fputc('\'', stderr);
    }
    fprintf(stderr, "%s\n", n > MAX_LISTED ? ", ..." : "");
}

static ld_report_context make_context(const job *j, const char *line)
{
    const ld_dump_file_info *info = ld_dump_info(j->test.dump);
    const ld_dump_run_info *r = ld_dump_run(j->ref.dump, j->ref.run);
    const ld_dump_run_info *t = ld_dump_run(j->test.dump, j->test.run);
    return (ld_report_context){
        .command = CMD, .command_line = line, .model_path = info->model_path,
        .model_sha256 = info->model_sha256, .ref_source = j->ref.path,
        .test_source = j->test.path, .ref_run = r->name, .ref_backend = r->backend,
        .ref_config = r->config, .test_run = t->name, .test_backend = t->backend,
        .test_config = t->config, .input_seed = info->input_seed,
        .n_missing_in_test = j->n_missing_in_test,
        .missing_in_test = j->missing_in_test,
        .n_missing_in_ref = j->n_missing_in_ref, .missing_in_ref = j->missing_in_ref,
        .timing = {.present = true, .total_seconds = ld_run_now() - j->started,
                   .compare_seconds = j->compare_seconds}};
}

/* Summary on the terminal, then the JSON report; LD_ERR_MISMATCH (no message)
 * when a tensor failed. */
static ld_status report(const job *j, const ld_summary_options *sopts, int argc, char **argv,
                        ld_error *err)
{
    char *line = ld_cli_command_line(argc, argv);
    ld_report_context ctx = make_context(j, line);
    warn_missing(j, j->n_missing_in_test, j->missing_in_test, "reference");
    warn_missing(j, j->n_missing_in_ref, j->missing_in_ref, "test");
    ld_report_print_summary(j->session, &ctx, sopts, ld_cli_compare_summary_stream(&cmp_flags));
    ld_status st = LD_OK;
    if (cmp_flags.report_json)
        st = ld_report_write_json(j->session, &ctx, cmp_flags.report_json, err);
    if (st == LD_OK)
        st = ld_cli_report_write_session(&cmp_flags.render, j->session, &ctx, err);
    free(line);
    if (st == LD_OK && !ld_compare_session_summary(j->session)->pass) {
        ld_error_clear(err);
        st = LD_ERR_MISMATCH;
    }
    return st;
}

/* --- the command ------------------------------------------------------------------------ */

static ld_status open_sides(job *j, int n_paths, char **paths, ld_error *err)
{
    j->ref.path = paths[0];
    j->test.path = paths[n_paths - 1];
    ld_status st = ld_dump_open(&j->ref.dump, j->ref.path, err);
    if (st == LD_OK && n_paths == 2) {
        st = ld_dump_open(&j->test.dump, j->test.path, err);
    } else if (st == LD_OK) {
        j->test.dump = j->ref.dump;
        j->test.borrowed = true;
    }
    if (st != LD_OK)
        return st;
    st = n_paths == 2 ? choose_in_two(j, err) : choose_in_one(j, err);
    if (st == LD_ERR_USAGE)
        return ld_cli_usage_error(err, CMD, "%s", err->message);
    const char *a = ld_dump_info(j->ref.dump)->model_sha256;
    const char *b = ld_dump_info(j->test.dump)->model_sha256;
    if (st == LD_OK && n_paths == 2 && a && b && strcmp(a, b) != 0)
        fprintf(stderr, "layerdiff %s: warning: '%s' and '%s' were made from different models "
                "(sha256 differ)\n", CMD, j->ref.path, j->test.path);
    return st;
}

/* The progress line's total: the test side's inputs and tensors, each a
 * step whether it is compared, skipped (--layers outputs) or missing. */
static int pairs_to_compare(const job *j)
{
    return ld_dump_input_count(j->test.dump) + ld_dump_tensor_count(j->test.dump, j->test.run);
}

static ld_status run_job(job *j, const ld_compare_options *copts, const ld_summary_options *sopts,
                         int argc, char **argv, ld_error *err)
{
    ld_status st = ld_compare_session_create(&j->session, copts, err);
    double t0 = ld_run_now();
    ld_progress_begin(&j->progress, stderr, pairs_to_compare(j), CMD, opt.quiet);
    ld_progress_set_unit(&j->progress, "tensor");
    if (st == LD_OK)
        st = compare_inputs(j, err);
    if (st == LD_OK)
        st = compare_layers(j, err);
    ld_progress_end(&j->progress); /* the summary starts on a clean line */
    j->compare_seconds = ld_run_now() - t0;
    if (st == LD_OK)
        st = ld_compare_session_finish(j->session, err);
    if (st == LD_OK && j->n_layers == 0 && ld_dump_tensor_count(j->test.dump, j->test.run) > 0)
        st = ld_error_set(err, LD_ERR_INPUT, "run '%s' of '%s' and run '%s' of '%s' have no "
                          "layer output in common (dumps of different models?)",
                          ld_dump_run(j->ref.dump, j->ref.run)->name,
                          j->ref.path, ld_dump_run(j->test.dump, j->test.run)->name,
                          j->test.path);
    if (st == LD_OK)
        st = report(j, sopts, argc, argv, err);
    return st;
}

static ld_status compare_run(int argc, char **argv, ld_error *err)
{
    memset(&opt, 0, sizeof opt);
    memset(&cmp_flags, 0, sizeof cmp_flags);
    opt.layers = "all";
    ld_cli_args args;
    ld_status st = ld_cli_parse(CMD, argc, argv, compare_options, N_OPTIONS, &args, err);
    if (st != LD_OK)
        return st;
    if (args.help) {
        compare_help(stdout);
        return LD_OK;
    }
    st = ld_cli_expect_positionals(CMD, &args, 1, 2, "DUMP, a .h5 file written by "
                                   "'layerdiff run --dump'", err);
    if (st != LD_OK)
        return st;
    if (strcmp(opt.layers, "all") != 0 && strcmp(opt.layers, "outputs") != 0)
        return ld_cli_usage_error(err, CMD, "--layers must be 'all' or 'outputs', got '%s'",
                                  opt.layers);
    ld_compare_options copts;
    ld_summary_options sopts;
    st = ld_cli_compare_setup(CMD, &cmp_flags, &copts, &sopts, err);
    if (st != LD_OK)
        return st;
    job j = {.isolated = -1, .outputs_only = strcmp(opt.layers, "outputs") == 0,
             .ref.run = -1, .test.run = -1, .started = ld_run_now()};
    st = open_sides(&j, args.n_positional, args.positional, err);
    if (st == LD_OK) {
        j.isolated = find_isolated(&j.ref, &j.test);
        /* every CPU: the isolated pairs compared beside the accumulated ones */
        copts.threads = j.isolated >= 0 ? (int)sysconf(_SC_NPROCESSORS_ONLN) : 1;
        st = run_job(&j, &copts, &sopts, argc, argv, err);
    }
    ld_compare_session_destroy(j.session);
    free(j.missing_in_test);
    free(j.missing_in_ref);
    if (!j.test.borrowed)
        ld_dump_close(j.test.dump);
    ld_dump_close(j.ref.dump);
    ld_cli_compare_options_clear(&copts);
    return st;
}

static void compare_help(FILE *out)
{
    fprintf(out,
            "Usage: layerdiff compare A.h5 [B.h5] [--ref-run NAME] [--test-run NAME]\n"
            "                         [--layers all|outputs] [comparison flags]\n"
            "\n"
            "Compares two runs layer by layer, tensors matched by name: two runs of one dump\n"
            "(e.g. reference and emulated, from 'layerdiff run --dump'), or a run of a\n"
            "golden dump A.h5 against a run of today's dump B.h5. Prints the verdict, the\n"
            "first divergent layer, the layers where error originates and the worst layers;\n"
            "--report-json writes every metric (schema: docs/report-schema.md). When the\n"
            "test dump holds an isolated run of the test run (each layer computed on the\n"
            "reference's inputs), each layer's own error is judged too (culprits); with two\n"
            "dumps only when the reference run is another backend's.\n"
            "\n"
            "Runs, one dump: the reference is --ref-run, else the run named 'reference',\n"
            "else the first; the test is --test-run, else the first other run.\n"
            "Runs, two dumps: the test run (in B.h5) is --test-run, else the run named like\n"
            "--ref-run, else B's only run, else B's only run not named 'reference'; the\n"
            "reference (in A.h5) is --ref-run, else the run named like the test run, else\n"
            "A's only run. Anything else is ambiguous and an error.\n"
            "The model inputs are compared too. Tensors found on one side only are listed\n"
            "(warning, and in the report); a shape mismatch is an error.\n"
            "\n");
    ld_cli_print_options(out, compare_options, N_OPTIONS);
    fprintf(out,
            "\n%s"
            "\n"
            "Exit status: 0 every tensor within tolerance, 1 some tensor is not,\n"
            "2 bad usage or input (not a dump, no such run, shape mismatch).\n"
            "\n"
            "Examples:\n"
            "  layerdiff run model.onnx --backends reference,emulated --fp16 --dump run.h5\n"
            "  layerdiff compare run.h5\n"
            "  layerdiff compare golden.h5 today.h5 --report-json report.json\n"
            "  layerdiff compare run.h5 --atol 1e-3 --rtol 1e-3 --atol '/head/*:1e-2'\n",
            LD_CLI_COMPARE_HELP);
}

const ld_cli_command ld_cmd_compare = {
    .name = CMD,
    .summary = "compare two runs of a dump, or a golden dump with today's, layer by layer",
    .run = compare_run,
    .help = compare_help,
};
