/* Loads every model.onnx and every test_data_set_N/{input,output}_N.pb of
 * Debian's libonnx-testdata (node, pytorch-converted, pytorch-operator,
 * simple). A model must load, or fail with a clean one-line
 * LD_ERR_UNSUPPORTED error that names the file; a valid ONNX file refused
 * as bad input is a loader bug. A .pb file must load with the dtype the
 * model declares for it, unless that is a string/complex tensor or a
 * sequence/optional/map value, which must fail cleanly instead. Skips (with
 * a message) when the package is not installed. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "layerdiff/onnx.h"

#define DATA_ROOT "/usr/share/libonnx-testdata/data"

typedef struct sweep_counts {
    int models, models_ok, models_unsupported, models_bad;
    int pb, pb_ok, pb_refused, pb_bad;
} sweep_counts;

#define PATH_SIZE 4096

/* out = a + "/" + b; the paths of the test data are far below PATH_SIZE. */
static void join(char *out, const char *a, const char *b)
{
    int n = snprintf(out, PATH_SIZE, "%s/%s", a, b);
    assert_true(n > 0 && n < PATH_SIZE);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A clean failure: the expected status, one line, naming the file. */
static bool clean_failure(ld_status st, const ld_error *err, const char *path)
{
    return (st == LD_ERR_UNSUPPORTED || st == LD_ERR_INPUT) && err->message[0] &&
           !strchr(err->message, '\n') && strncmp(err->message, path, strlen(path)) == 0;
}

/* The declared type of input/output `index` of the model, or NULL. */
static const ld_type_info *declared_type(const ld_graph *g, bool output, int index)
{
    int n = output ? g->n_outputs : g->n_inputs;
    if (index < 0 || index >= n)
        return NULL;
    return &g->values[output ? g->outputs[index] : g->inputs[index]].type;
}

static bool holds_data(const ld_type_info *type)
{
    return type && type->kind == LD_TYPE_TENSOR && ld_dtype_is_supported(type->dtype);
}

/* numpy has no bfloat16, so the ONNX test generator wrote bfloat16 test
 * data as UINT16 tensors holding the bit patterns (data_type 4, not 16). */
static bool bf16_stored_as_uint16(const ld_type_info *type, const ld_tensor *t)
{
    return type->dtype == LD_DTYPE_BFLOAT16 && t->dtype == LD_DTYPE_UINT16;
}

static void check_pb(const ld_graph *g, const char *path, const char *file, sweep_counts *c)
{
    int index;
    bool output = strncmp(file, "output_", 7) == 0;
    if (sscanf(file + (output ? 7 : 6), "%d", &index) != 1)
        return;
    const ld_type_info *type = declared_type(g, output, index);
    ld_tensor *t = NULL;
    ld_error err;
    ld_status st = ld_onnx_load_tensor_file(&t, path, &err);
    c->pb++;
    if (holds_data(type)) {
        if (st != LD_OK) {
            c->pb_bad++;
            print_error("%s: expected a %s tensor, got: %s\n", path,
                        ld_dtype_name(type->dtype), err.message);
        } else if (t->dtype != type->dtype && !bf16_stored_as_uint16(type, t)) {
            c->pb_bad++;
            print_error("%s: declared %s, loaded %s\n", path, ld_dtype_name(type->dtype),
                        ld_dtype_name(t->dtype));
        } else {
            /* Ranks are not compared: the castlike tests' "like" files hold
             * one element where the model declares (3, 4). */
            c->pb_ok++;
        }
    } else if (st == LD_OK) {
        c->pb_bad++; /* garbage read as a tensor */
        print_error("%s: a %s value loaded as a tensor\n", path,
                    type ? ld_type_kind_name(type->kind) : "undeclared");
    } else if (!clean_failure(st, &err, path)) {
        c->pb_bad++;
        print_error("%s: unclean failure (%s): %s\n", path, ld_status_name(st), err.message);
    } else {
        c->pb_refused++;
    }
    ld_tensor_destroy(t);
}

static void check_data_sets(const ld_graph *g, const char *dir, sweep_counts *c)
{
    struct dirent **sets = NULL;
    int n_sets = scandir(dir, &sets, NULL, alphasort);
    for (int s = 0; s < n_sets; s++) {
        char set_dir[PATH_SIZE];
        join(set_dir, dir, sets[s]->d_name);
        if (strncmp(sets[s]->d_name, "test_data_set_", 14) == 0 && is_dir(set_dir)) {
            struct dirent **files = NULL;
            int n_files = scandir(set_dir, &files, NULL, alphasort);
            for (int f = 0; f < n_files; f++) {
                const char *name = files[f]->d_name;
                size_t len = strlen(name);
                char path[PATH_SIZE];
                join(path, set_dir, name);
                if (len > 3 && strcmp(name + len - 3, ".pb") == 0)
                    check_pb(g, path, name, c);
                free(files[f]);
            }
            free(files);
        }
        free(sets[s]);
    }
    free(sets);
}

static void check_model(const char *dir, sweep_counts *c)
{
    char path[PATH_SIZE];
    join(path, dir, "model.onnx");
    ld_graph *g = NULL;
    ld_error err;
    ld_status st = ld_onnx_load_file(&g, path, &err);
    c->models++;
    if (st == LD_OK) {
        c->models_ok++;
        check_data_sets(g, dir, c);
        ld_graph_destroy(g);
    } else if (st == LD_ERR_UNSUPPORTED && clean_failure(st, &err, path)) {
        c->models_unsupported++;
        print_message("unsupported: %s\n", err.message);
    } else {
        c->models_bad++;
        print_error("%s: %s: %s\n", path, ld_status_name(st), err.message);
    }
}

static void test_every_model_and_pb_file(void **state)
{
    (void)state;
    if (!is_dir(DATA_ROOT)) {
        print_message("%s missing (install libonnx-testdata): skipped\n", DATA_ROOT);
        skip();
    }
    static const char *const suites[] = {"node", "pytorch-converted", "pytorch-operator",
                                         "simple"};
    sweep_counts total = {0};
    for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++) {
        char suite_dir[PATH_SIZE];
        join(suite_dir, DATA_ROOT, suites[s]);
        struct dirent **tests = NULL;
        int n = scandir(suite_dir, &tests, NULL, alphasort);
        sweep_counts c = {0};
        for (int i = 0; i < n; i++) {
            char dir[PATH_SIZE], model[PATH_SIZE];
            join(dir, suite_dir, tests[i]->d_name);
            join(model, dir, "model.onnx");
            struct stat st;
            if (tests[i]->d_name[0] != '.' && stat(model, &st) == 0)
                check_model(dir, &c);
            free(tests[i]);
        }
        free(tests);
        print_message("%-18s models: %4d ok %4d unsupported %d bad | .pb: %4d ok %3d refused "
                      "cleanly %d bad\n", suites[s], c.models_ok, c.models_unsupported,
                      c.models_bad, c.pb_ok, c.pb_refused, c.pb_bad);
        total.models += c.models;
        total.models_ok += c.models_ok;
        total.models_unsupported += c.models_unsupported;
        total.models_bad += c.models_bad;
        total.pb += c.pb;
        total.pb_ok += c.pb_ok;
        total.pb_refused += c.pb_refused;
        total.pb_bad += c.pb_bad;
    }
    print_message("total: %d models (%d ok, %d unsupported), %d .pb files (%d ok, %d refused "
                  "cleanly)\n", total.models, total.models_ok, total.models_unsupported,
                  total.pb, total.pb_ok, total.pb_refused);
    assert_true(total.models > 1000); /* the sweep really ran */
    assert_int_equal(total.models_bad, 0);
    assert_int_equal(total.pb_bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_model_and_pb_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
