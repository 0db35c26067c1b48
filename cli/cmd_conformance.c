/* `layerdiff conformance DIR...`: runs ONNX backend test folders (model.onnx
 * + test_data_set_N/{input,output}_N.pb) on the reference backend and checks
 * the outputs with the ONNX backend-test tolerances. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/memory_limit.h"
#include "cli/options.h"
#include "layerdiff/backend.h"
#include "layerdiff/compare.h"
#include "layerdiff/onnx.h"
#include "report/atomic_file.h"

#define CMD "conformance"

static struct {
    const char *pass_list;
    const char *write_pass_list;
    double rtol;
    double atol;
    bool quiet;
    int64_t threads;
    const char *max_memory;
} opt;

static const ld_cli_option conformance_options[] = {
    {"pass-list", 0, LD_OPT_STRING, &opt.pass_list, "FILE",
     "exit 1 unless every test named in FILE (one per line) passes"},
    {"write-pass-list", 0, LD_OPT_STRING, &opt.write_pass_list, "FILE",
     "write the names of the passing tests to FILE"},
    {"rtol", 0, LD_OPT_DOUBLE, &opt.rtol, "X", "relative tolerance (default 1e-3, as ONNX)"},
    {"atol", 0, LD_OPT_DOUBLE, &opt.atol, "X", "absolute tolerance (default 1e-7, as ONNX)"},
    {"quiet", 'q', LD_OPT_FLAG, &opt.quiet, NULL, "print only failures and the totals"},
    {"threads", 't', LD_OPT_INT, &opt.threads, "N", "threads per kernel (default: all cores)"},
    {"max-memory", 0, LD_OPT_STRING, &opt.max_memory, "SIZE", LD_CLI_MAX_MEMORY_HELP},
};
#define N_OPTIONS ((int)(sizeof conformance_options / sizeof conformance_options[0]))

typedef enum { RESULT_PASS, RESULT_FAIL, RESULT_UNSUPPORTED } test_result;

typedef struct name_list {
    char **names;
    int n, cap;
} name_list;

static ld_status name_list_add(name_list *l, const char *name, ld_error *err)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        char **grown = realloc(l->names, (size_t)cap * sizeof *grown);
        if (!grown)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        l->names = grown;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(name)))
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    l->n++;
    return LD_OK;
}

static void name_list_free(name_list *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof *l);
}

static bool name_list_has(const name_list *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return true;
    return false;
}

/* "<dir>/<name>" into out; paths longer than out are cut (and then simply
 * not found), which is fine for test folders. */
static void join_path(char *out, size_t size, const char *dir, const char *name)
{
    if (snprintf(out, size, "%s/%s", dir, name) < 0)
        out[0] = '\0';
}

static bool is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* --- one test ----------------------------------------------------------------------- */

typedef struct output_capture {
    const ld_graph *graph;
    ld_tensor **outputs; /* one per graph output, owned */
} output_capture;

static ld_status capture_outputs(void *user, const ld_tensor_event *ev, ld_error *err)
{
    output_capture *c = user;
    for (int k = 0; k < c->graph->n_outputs; k++) {
        if (c->graph->outputs[k] != ev->value || c->outputs[k])
            continue;
        ld_status st = ld_tensor_clone(&c->outputs[k], ev->tensor,
                                       c->graph->values[ev->value].name, err);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

static void free_tensors(ld_tensor **t, int n)
{
    for (int i = 0; t && i < n; i++)
        ld_tensor_destroy(t[i]);
    free(t);
}

/* Loads <set>/<prefix>_<k>.pb for k in [0, n). */
static ld_status load_pb_set(const char *set, const char *prefix, int n, ld_tensor ***out,
                             ld_error *err)
{
    ld_tensor **t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    char path[4096];
    for (int k = 0; k < n; k++) {
        char file[64];
        snprintf(file, sizeof file, "%s_%d.pb", prefix, k);
        join_path(path, sizeof path, set, file);
        ld_status st = ld_onnx_load_tensor_file(&t[k], path, err);
        if (st != LD_OK) {
            free_tensors(t, n);
            return st;
        }
    }
    char file[64];
    snprintf(file, sizeof file, "%s_%d.pb", prefix, n);
    join_path(path, sizeof path, set, file);
    if (is_file(path)) {
        free_tensors(t, n);
        return ld_error_set(err, LD_ERR_INPUT, "%s: more %s files than the model has %ss", set,
                            prefix, prefix);
    }
    *out = t;
    return LD_OK;
}

/* Runs one data set; fills `detail` on failure. */
static test_result run_data_set(const ld_backend_vtable *vt, void *backend, const ld_graph *g,
                                const char *set, char *detail, size_t size)
{
    ld_error err;
    ld_tensor **inputs = NULL, **expected = NULL;
    output_capture capture = {g, calloc((size_t)(g->n_outputs ? g->n_outputs : 1),
                                        sizeof(ld_tensor *))};
    test_result result = RESULT_FAIL;
    if (!capture.outputs) {
        snprintf(detail, size, "out of memory");
        goto out;
    }
    ld_status st = load_pb_set(set, "input", g->n_inputs, &inputs, &err);
    /* onnx 1.12's test data stores bfloat16 tensors as uint16 bit patterns. */
    for (int k = 0; st == LD_OK && k < g->n_inputs; k++)
        if (inputs[k]->dtype == LD_DTYPE_UINT16 &&
            g->values[g->inputs[k]].type.dtype == LD_DTYPE_BFLOAT16)
            inputs[k]->dtype = LD_DTYPE_BFLOAT16;
    if (st == LD_OK)
        st = load_pb_set(set, "output", g->n_outputs, &expected, &err);
    if (st == LD_OK)
        st = vt->run(backend, (const ld_tensor *const *)inputs, capture_outputs, &capture, &err);
    if (st != LD_OK) {
        result = st == LD_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
        snprintf(detail, size, "%s", err.message);
        goto out;
    }
    for (int k = 0; k < g->n_outputs; k++) {
        const char *name = g->values[g->outputs[k]].name;
        ld_allclose_result r;
        if (!capture.outputs[k]) {
            snprintf(detail, size, "output '%s' was not produced", name);
            goto out;
        }
        if (ld_allclose(capture.outputs[k], expected[k], opt.rtol, opt.atol, name, &r, &err) !=
            LD_OK) {
            snprintf(detail, size, "output %s", err.message);
            goto out;
        }
        if (!r.pass) {
            snprintf(detail, size,
                     "output '%s' element %lld: got %.9g, expected %.9g (%lld of %lld elements off)",
                     name, (long long)r.worst_index, r.worst_actual, r.worst_expected,
                     (long long)r.n_mismatch, (long long)expected[k]->count);
            goto out;
        }
    }
    result = RESULT_PASS;
out:
    free_tensors(inputs, g->n_inputs);
    free_tensors(expected, g->n_outputs);
    free_tensors(capture.outputs, g->n_outputs);
    return result;
}

static bool has_non_tensor_io(const ld_graph *g)
{
    for (int k = 0; k < g->n_inputs; k++)
        if (g->values[g->inputs[k]].type.kind != LD_TYPE_TENSOR &&
            g->values[g->inputs[k]].type.kind != LD_TYPE_UNKNOWN)
            return true;
    for (int k = 0; k < g->n_outputs; k++)
        if (g->values[g->outputs[k]].type.kind != LD_TYPE_TENSOR &&
            g->values[g->outputs[k]].type.kind != LD_TYPE_UNKNOWN)
            return true;
    return false;
}

static int data_set_filter(const struct dirent *d)
{
    return strncmp(d->d_name, "test_data_set_", 14) == 0;
}

static test_result run_test(const char *dir, char *detail, size_t size)
{
    const ld_backend_vtable *vt = ld_backend_find("reference");
    ld_graph *g = NULL;
    void *backend = NULL;
    struct dirent **sets = NULL;
    int n_sets = 0;
    ld_error err;
    test_result result = RESULT_FAIL;
    char path[4096];
    join_path(path, sizeof path, dir, "model.onnx");
    ld_status st = ld_onnx_load_file(&g, path, &err);
    if (st != LD_OK) {
        snprintf(detail, size, "%s", err.message);
        return st == LD_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
    }
    if (has_non_tensor_io(g)) {
        snprintf(detail, size, "sequence, map or optional graph inputs/outputs");
        result = RESULT_UNSUPPORTED;
        goto out;
    }
    ld_backend_config cfg = {.threads = (int)opt.threads};
    st = vt->create(&backend, &cfg, &err);
    if (st == LD_OK)
        st = vt->prepare(backend, g, NULL, &err);
    if (st != LD_OK) {
        snprintf(detail, size, "%s", err.message);
        result = st == LD_ERR_UNSUPPORTED ? RESULT_UNSUPPORTED : RESULT_FAIL;
        goto out;
    }
    n_sets = scandir(dir, &sets, data_set_filter, alphasort);
    if (n_sets <= 0) {
        snprintf(detail, size, "no test_data_set_* folders");
        n_sets = 0;
        goto out;
    }
    result = RESULT_PASS;
    for (int s = 0; s < n_sets && result == RESULT_PASS; s++) {
        char set[4096];
        join_path(set, sizeof set, dir, sets[s]->d_name);
        result = run_data_set(vt, backend, g, set, detail, size);
    }
out:
    for (int s = 0; s < n_sets; s++)
        free(sets[s]);
    free(sets);
    if (backend)
        vt->destroy(backend);
    ld_graph_destroy(g);
    return result;
}

/* --- many tests ------------------------------------------------------------------------ */

static int has_model_filter(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

/* "node/test_abs" from ".../data/node/test_abs". */
static void test_name(const char *dir, char *out, size_t size)
{
    char copy[4096];
    if (snprintf(copy, sizeof copy, "%s", dir) < 0)
        copy[0] = '\0';
    size_t len = strlen(copy);
    while (len > 1 && copy[len - 1] == '/')
        copy[--len] = '\0';
    char *last = strrchr(copy, '/');
    if (!last) {
        snprintf(out, size, "%s", copy);
        return;
    }
    *last = '\0';
    char *parent = strrchr(copy, '/');
    join_path(out, size, parent ? parent + 1 : copy, last + 1);
}

typedef struct totals {
    int passed, failed, unsupported;
    name_list passing;
} totals;

static ld_status run_one_dir(const char *dir, totals *t, ld_error *err)
{
    char name[4096], detail[LD_ERROR_MESSAGE_SIZE + 256];
    detail[0] = '\0';
    test_name(dir, name, sizeof name);
    test_result r = run_test(dir, detail, sizeof detail);
    if (r == RESULT_PASS) {
        t->passed++;
        if (!opt.quiet)
            printf("PASS         %s\n", name);
        return name_list_add(&t->passing, name, err);
    }
    if (r == RESULT_FAIL)
        t->failed++;
    else
        t->unsupported++;
    if (r == RESULT_FAIL || !opt.quiet)
        printf("%-12s %s: %s\n", r == RESULT_FAIL ? "FAIL" : "UNSUPPORTED", name, detail);
    fflush(stdout);
    return LD_OK;
}

static ld_status run_path(const char *path, totals *t, ld_error *err)
{
    char model[4096];
    join_path(model, sizeof model, path, "model.onnx");
    if (is_file(model))
        return run_one_dir(path, t, err);
    struct dirent **entries = NULL;
    int n = scandir(path, &entries, has_model_filter, alphasort);
    if (n < 0)
        return ld_error_set(err, LD_ERR_IO, "cannot read test folder '%s': %s", path,
                            strerror(errno));
    ld_status st = LD_OK;
    int found = 0;
    for (int i = 0; i < n; i++) {
        char sub[4096];
        join_path(sub, sizeof sub, path, entries[i]->d_name);
        join_path(model, sizeof model, sub, "model.onnx");
        if (st == LD_OK && is_file(model)) {
            found++;
            st = run_one_dir(sub, t, err);
        }
        free(entries[i]);
    }
    free(entries);
    if (st == LD_OK && found == 0)
        st = ld_error_set(err, LD_ERR_INPUT, "'%s' holds no ONNX test (no model.onnx in it or "
                          "its subfolders)", path);
    return st;
}

static ld_status read_name_list(const char *path, name_list *l, ld_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ld_error_set(err, LD_ERR_IO, "cannot open pass list '%s': %s", path,
                            strerror(errno));
    char line[4096];
    ld_status st = LD_OK;
    while (st == LD_OK && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] && line[0] != '#')
            st = name_list_add(l, line, err);
    }
    fclose(f);
    return st;
}

static ld_status put_names(const void *list, FILE *f, ld_error *err)
{
    const name_list *l = list;
    (void)err;
    for (int i = 0; i < l->n; i++)
        fprintf(f, "%s\n", l->names[i]); /* an error shows on the stream */
    return LD_OK;
}

/* Whole or not at all (report/atomic_file.h). */
static ld_status write_name_list(const char *path, const name_list *l, ld_error *err)
{
    return ld_atomic_write_file(path, "list", put_names, l, err);
}

/* Every listed test must have passed; prints the ones that did not. */
static ld_status check_pass_list(const totals *t, ld_error *err)
{
    name_list required = {0};
    ld_status st = read_name_list(opt.pass_list, &required, err);
    int missing = 0;
    for (int i = 0; st == LD_OK && i < required.n; i++) {
        if (!name_list_has(&t->passing, required.names[i])) {
            printf("REGRESSION   %s: listed in %s but did not pass\n", required.names[i],
                   opt.pass_list);
            missing++;
        }
    }
    if (st == LD_OK) {
        printf("conformance guard: %d passed, %d failed\n", required.n - missing, missing);
        if (missing)
            st = ld_error_set(err, LD_ERR_MISMATCH, "%d test(s) listed in %s no longer pass",
                              missing, opt.pass_list);
    }
    name_list_free(&required);
    return st;
}

static ld_status conformance_run(int argc, char **argv, ld_error *err)
{
    memset(&opt, 0, sizeof opt);
    opt.rtol = 1e-3;
    opt.atol = 1e-7;
    ld_cli_args args;
    ld_status st = ld_cli_parse(CMD, argc, argv, conformance_options, N_OPTIONS, &args, err);
    if (st != LD_OK || args.help) {
        if (args.help && st == LD_OK)
            ld_cmd_conformance.help(stdout);
        return st;
    }
    st = ld_cli_expect_positionals(CMD, &args, 1, -1, "DIR", err);
    if (st != LD_OK)
        return st;
    if (opt.rtol < 0 || opt.atol < 0)
        return ld_cli_usage_error(err, CMD, "tolerances must not be negative");
    uint64_t max_memory; /* enforced by the executor on every test's tensors */
    st = ld_cli_memory_limit(CMD, opt.max_memory, &max_memory, err);
    if (st != LD_OK)
        return st;
    totals t = {0};
    for (int i = 0; st == LD_OK && i < args.n_positional; i++)
        st = run_path(args.positional[i], &t, err);
    if (st == LD_OK)
        printf("conformance: %d passed, %d failed, %d unsupported (%d tests)\n", t.passed,
               t.failed, t.unsupported, t.passed + t.failed + t.unsupported);
    if (st == LD_OK && opt.write_pass_list)
        st = write_name_list(opt.write_pass_list, &t.passing, err);
    if (st == LD_OK && opt.pass_list)
        st = check_pass_list(&t, err);
    else if (st == LD_OK && t.failed > 0)
        st = ld_error_set(err, LD_ERR_MISMATCH, "%d test(s) failed", t.failed);
    name_list_free(&t.passing);
    ld_memory_limit_set(0);
    return st;
}

static void conformance_help(FILE *out)
{
    fprintf(out,
            "Usage: layerdiff conformance [options] DIR...\n"
            "\n"
            "Runs ONNX backend test folders (model.onnx + test_data_set_N/input_N.pb and\n"
            "output_N.pb) on the reference backend. DIR is one test folder or a folder of\n"
            "them, e.g. /usr/share/libonnx-testdata/data/node. Prints one line per test\n"
            "(PASS, FAIL with the worst element, UNSUPPORTED with the reason) and the totals.\n"
            "Outputs match when |got - expected| <= atol + rtol * |expected| with NaN and\n"
            "infinity parity (ONNX backend defaults rtol 1e-3, atol 1e-7).\n"
            "\n");
    ld_cli_print_options(out, conformance_options, N_OPTIONS);
    fprintf(out,
            "\nExit status: 0 all run tests passed (with --pass-list: all listed tests passed),\n"
            "1 otherwise, 2 bad usage or unreadable folders.\n"
            "\nExample:\n"
            "  layerdiff conformance /usr/share/libonnx-testdata/data/node --quiet\n");
}

const ld_cli_command ld_cmd_conformance = {
    CMD, "run ONNX backend conformance test folders on the reference backend",
    conformance_run, conformance_help};
