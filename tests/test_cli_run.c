/* Unit tests for `layerdiff run` (cli/cmd_run.c, cli/run_observer.c) and the
 * repeatable option kind it added to cli/options.c: the observer's checks of
 * backend events, output statistics, and the command run in-process on a
 * small model, including the dump it commits and the errors it returns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/run.h"
#include "tests/support/onnx_builder.h"

#define T(f) cmocka_unit_test_teardown(f, ob_teardown)
#define FLOAT ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT

/* --- LD_OPT_LIST ---------------------------------------------------------------------- */

static void test_list_option(void **state)
{
    (void)state;
    static ld_cli_list list;
    static const char *single;
    const ld_cli_option table[] = {
        {"item", 'i', LD_OPT_LIST, &list, "X", "repeatable"},
        {"one", 0, LD_OPT_STRING, &single, "X", "last wins"},
    };
    char *argv[] = {"cmd", "--item", "a", "pos", "-i", "b", "--one=1", "--item=c,d", "--one", "2",
                    NULL};
    ld_cli_args args;
    ld_error err;
    memset(&list, 0, sizeof list);
    assert_int_equal(ld_cli_parse("cmd", 10, argv, table, 2, &args, &err), LD_OK);
    assert_int_equal(list.n, 3);
    assert_string_equal(list.items[0], "a");
    assert_string_equal(list.items[1], "b");
    assert_string_equal(list.items[2], "c,d");
    assert_string_equal(single, "2");
    assert_int_equal(args.n_positional, 1);
    /* More than LD_CLI_LIST_MAX occurrences is a usage error, not an overflow. */
    enum { N = 2 * (LD_CLI_LIST_MAX + 1) + 1 }; /* "cmd" and 65 "-i x" pairs */
    char *many[N + 1];
    many[0] = "cmd";
    for (int i = 1; i < N; i += 2) {
        many[i] = "-i";
        many[i + 1] = "x";
    }
    many[N] = NULL;
    memset(&list, 0, sizeof list);
    assert_int_equal(ld_cli_parse("cmd", N, many, table, 2, &args, &err), LD_ERR_USAGE);
    if (!strstr(err.message, "option '--item' given more than 64 times"))
        fail_msg("message: %s", err.message);
}

/* --- statistics --------------------------------------------------------------------------- */

static ld_tensor *floats(const char *name, const float *v, int64_t n)
{
    ld_shape shape = {.rank = 1, .dims = {n}};
    ld_tensor *t = NULL;
    ld_error err;
    assert_int_equal(ld_tensor_create(&t, name, LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
    if (n)
        memcpy(t->data, v, (size_t)n * sizeof *v);
    return t;
}

static void test_stats(void **state)
{
    (void)state;
    float v[6] = {1, -2, NAN, INFINITY, 4, -INFINITY};
    ld_tensor *t = floats("t", v, 6);
    ld_run_stats s;
    ld_run_stats_compute(t, &s);
    assert_true(s.produced);
    assert_int_equal(s.finite, 3);
    assert_int_equal(s.nans, 1);
    assert_int_equal(s.infs, 2);
    assert_true(s.min == -2 && s.max == 4 && s.mean == 1);
    char buf[128];
    assert_string_equal(ld_run_stats_format(&s, buf, sizeof buf),
                        "min -2  max 4  mean 1  nan 1  inf 2");
    ld_tensor_destroy(t);
    float nan1[1] = {NAN};
    t = floats("n", nan1, 1);
    ld_run_stats_compute(t, &s);
    assert_string_equal(ld_run_stats_format(&s, buf, sizeof buf), "no finite values  nan 1  inf 0");
    ld_tensor_destroy(t);
    t = floats("e", NULL, 0);
    ld_run_stats_compute(t, &s);
    assert_string_equal(ld_run_stats_format(&s, buf, sizeof buf), "empty");
    ld_tensor_destroy(t);
    /* The float32 fast path agrees with the generic path (the same values as float64). */
    enum { N = 4097 };
    float many[N];
    uint32_t seed = 12345;
    for (int i = 0; i < N; i++) {
        seed = seed * 1664525u + 1013904223u;
        many[i] = (float)((int32_t)seed) * 1e-7f;
    }
    many[7] = NAN;
    many[100] = -INFINITY;
    t = floats("f", many, N);
    ld_tensor *d = NULL;
    ld_shape shape = {.rank = 1, .dims = {N}};
    ld_error err;
    assert_int_equal(ld_tensor_create(&d, "d", LD_DTYPE_FLOAT64, &shape, &err), LD_OK);
    for (int i = 0; i < N; i++)
        ((double *)d->data)[i] = many[i];
    ld_run_stats fast, generic;
    ld_run_stats_compute(t, &fast);
    ld_run_stats_compute(d, &generic);
    assert_int_equal(fast.finite, generic.finite);
    assert_int_equal(fast.nans, 1);
    assert_int_equal(fast.infs, 1);
    assert_true(fast.min == generic.min && fast.max == generic.max && fast.mean == generic.mean);
    ld_tensor_destroy(t);
    ld_tensor_destroy(d);
    /* Zero extremes keep the sign of the first zero in element order (the
     * vector path's sixteen running extremes would not): -0 before +0 in
     * one case, +0 before -0 in the other, over vector and tail elements. */
    for (int first_negative = 0; first_negative <= 1; first_negative++) {
        enum { Z = 37 };
        float z[Z];
        for (int i = 0; i < Z; i++)
            z[i] = (float)(i % 5 + 1); /* positive: the minimum is a zero */
        z[3] = first_negative ? -0.0f : 0.0f;
        z[20] = first_negative ? 0.0f : -0.0f;
        z[36] = NAN;
        t = floats("z", z, Z);
        ld_run_stats_compute(t, &fast);
        assert_true(fast.min == 0 && fast.max == 5);
        assert_int_equal(signbit(fast.min) != 0, first_negative);
        assert_int_equal(fast.nans, 1);
        assert_int_equal(fast.finite, Z - 1);
        ld_tensor_destroy(t);
    }
}

/* --- the observer's checks ------------------------------------------------------------------- */

/* x -> Identity "id" -> y (graph output); z is an unused extra value. */
static ld_graph *small_graph(void)
{
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {2};
    ob_input(m->graph, "x", FLOAT, 1, d);
    ob_node(m->graph, "Identity", "id", "x", "y");
    ob_node(m->graph, "Identity", "id2", "x", "z");
    ob_output(m->graph, "y", FLOAT);
    return ob_load_ok(m);
}

static ld_status observe(ld_run_sink *sink, const ld_graph *g, const ld_node *node, int out,
                         int value, const ld_tensor *t, ld_error *err)
{
    ld_tensor_event ev = {.graph = g, .node = node, .output_index = out, .value = value,
                          .tensor = t};
    return ld_run_observe(sink, &ev, err);
}

static void expect_reject(ld_status st, const ld_error *err, const char *text)
{
    assert_int_equal(st, LD_ERR_INPUT);
    if (!strstr(err->message, text))
        fail_msg("message '%s' lacks '%s'", err->message, text);
}

static void test_observer_checks_events(void **state)
{
    (void)state;
    ld_graph *g = small_graph();
    int x = ld_graph_find_value(g, "x"), y = ld_graph_find_value(g, "y");
    float v[2] = {1, 2};
    ld_tensor *t = floats("t", v, 2);
    ld_node outside = g->nodes[0];
    ld_run_sink sink = {0};
    ld_error err;
    assert_int_equal(ld_run_sink_init(&sink, g, "plug", &err), LD_OK);
    expect_reject(observe(&sink, g, NULL, 0, 99, t, &err), &err,
                  "backend 'plug' reported an event for a value outside the graph");
    expect_reject(observe(&sink, g, NULL, 0, x, NULL, &err), &err, "without tensor data");
    expect_reject(observe(&sink, g, &outside, 0, y, t, &err), &err, "from a node outside");
    expect_reject(observe(&sink, g, &g->nodes[0], 1, y, t, &err), &err,
                  "whose node does not produce that value");
    expect_reject(observe(&sink, g, &g->nodes[1], 0, y, t, &err), &err,
                  "whose node does not produce that value");
    expect_reject(observe(&sink, g, NULL, 0, y, t, &err), &err, "a node output without its node");
    /* A correct run, then a duplicate. */
    assert_int_equal(observe(&sink, g, NULL, 0, x, t, &err), LD_OK);
    assert_int_equal(ld_run_sink_finish(&sink, &err), LD_ERR_INPUT);
    assert_string_equal(err.message, "backend 'plug' did not produce graph output 'y'");
    assert_int_equal(observe(&sink, g, &g->nodes[0], 0, y, t, &err), LD_OK);
    expect_reject(observe(&sink, g, &g->nodes[0], 0, y, t, &err), &err,
                  "backend 'plug' reported tensor 'y' twice");
    assert_int_equal(sink.layers, 1);
    assert_true(sink.outputs[0].produced);
    assert_true(sink.outputs[0].mean == 1.5);
    assert_int_equal(ld_run_sink_finish(&sink, &err), LD_OK);
    /* A pending signal stops the run at the next event. */
    volatile sig_atomic_t flag = SIGINT;
    sink.interrupted = &flag;
    int z = ld_graph_find_value(g, "z");
    assert_int_equal(observe(&sink, g, &g->nodes[1], 0, z, t, &err), LD_ERR_INTERRUPTED);
    assert_string_equal(err.message, "interrupted by SIGINT");
    ld_run_sink_free(&sink);
    ld_tensor_destroy(t);
    ld_graph_destroy(g);
}

/* --- the command in-process ---------------------------------------------------------------- */

/* Runs `layerdiff run ARGS...` with stdout sent to /dev/null. */
static ld_status run_cmd(ld_error *err, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    assert_true(saved >= 0 && null >= 0);
    dup2(null, STDOUT_FILENO);
    ld_error_clear(err);
    ld_status st = ld_cmd_run.run(argc, argv, err);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    close(null);
    return st;
}

static char *write_model(void)
{
    Onnx__ModelProto *m = ob_model();
    int64_t d[] = {-1, 3};
    ob_input(m->graph, "x", FLOAT, 2, d);
    ob_node(m->graph, "Identity", "a/b", "x", "t/0");
    ob_node(m->graph, "Identity", "c", "t/0", "y");
    ob_output(m->graph, "y", FLOAT);
    ob_make_tmpdir();
    size_t size;
    uint8_t *bytes = ob_pack(m, &size);
    char *path = ob_tmp_path("m.onnx");
    ob_write_file(path, bytes, size);
    return path;
}

static void test_run_in_process(void **state)
{
    (void)state;
    char *model = write_model(), *dump = ob_tmp_path("d.h5");
    ld_error err;
    /* One backend: a plain dump of one run (the default compares two). */
    char *ok[] = {"run", model, "--backends", "reference", "--input-shapes", "N:2", "--seed", "9",
                  "--dump", dump, "--threads", "1", NULL};
    assert_int_equal(run_cmd(&err, ok), LD_OK);
    ld_dump *d = NULL;
    assert_int_equal(ld_dump_open(&d, dump, &err), LD_OK);
    assert_int_equal(ld_dump_info(d)->input_seed, 9);
    assert_string_equal(ld_dump_info(d)->model_path, model);
    assert_int_equal(strlen(ld_dump_info(d)->model_sha256), 64);
    assert_int_equal(ld_dump_input_count(d), 1);
    assert_int_equal(ld_dump_run_count(d), 1);
    assert_int_equal(ld_dump_tensor_count(d, 0), 2);
    const ld_dump_tensor_meta *m = ld_dump_tensor_meta_at(d, 0, 0);
    assert_string_equal(m->name, "t/0");
    assert_string_equal(m->node, "a/b");
    assert_string_equal(m->op_type, "Identity");
    assert_int_equal(m->topo_index, 0);
    assert_string_equal(m->precision, "fp32");
    ld_dump_close(d);

    char *outputs[] = {"run", model, "--backends", "reference", "--input-shapes", "x:4x3",
                       "--layers", "outputs", "--dump", dump, NULL};
    assert_int_equal(run_cmd(&err, outputs), LD_OK);
    assert_int_equal(ld_dump_open(&d, dump, &err), LD_OK);
    assert_int_equal(ld_dump_tensor_count(d, 0), 1);
    ld_dump_close(d);

    static const struct {
        char *args[8];
        ld_status status;
        const char *text;
    } bad[] = {
        {{"run", NULL}, LD_ERR_USAGE, "missing MODEL"},
        {{"run", "/no/such.onnx", NULL}, LD_ERR_INPUT, "cannot open '/no/such.onnx'"},
        {{"run", "M", "--layers", "most", NULL}, LD_ERR_USAGE, "--layers must be"},
        {{"run", "M", "--backends", "x", NULL}, LD_ERR_USAGE, "unknown backend 'x'"},
        {{"run", "M", "--backends", ",", NULL}, LD_ERR_USAGE, "--backends is empty"},
        {{"run", "M", NULL}, LD_ERR_USAGE, "pass --input-shapes N:N or x:DIMS"},
        {{"run", "M", "--input-shapes", "N:2", "--val-range", "[2,1]", NULL}, LD_ERR_USAGE,
         "see 'layerdiff run --help'"},
        {{"run", "M", "--load-inputs", "x:nothing.npy", NULL}, LD_ERR_IO, "nothing.npy"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[8];
        memcpy(argv, bad[i].args, sizeof argv);
        for (int k = 0; k < 8 && argv[k]; k++)
            if (strcmp(argv[k], "M") == 0)
                argv[k] = model;
        ld_status st = run_cmd(&err, argv);
        if (st != bad[i].status || !strstr(err.message, bad[i].text))
            fail_msg("case %zu: %s '%s', expected %s with '%s'", i, ld_status_name(st),
                     err.message, ld_status_name(bad[i].status), bad[i].text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_option),
        cmocka_unit_test(test_stats),
        T(test_observer_checks_events),
        T(test_run_in_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
