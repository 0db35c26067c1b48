/* Tests of the bisect trial runner (backends/trial*.c) on the bisect
 * fixtures (scripts/gen-bisect-fixtures.py) and the transformer fixture:
 *  - a trial (the base engine with some layers computed by the fp32 engine,
 *    restarted from checkpoints) judges the outputs exactly as a fresh
 *    engine built with the same layers forced to fp32 by --layer-precisions
 *    rules, whatever the order of trials and the checkpoint budget;
 *  - the baseline finds the planted culprits (isolated overflow, ranked
 *    first) and the candidates;
 *  - checkpoints are made where wished, shared, evicted under the budget;
 *  - reference captures hand back the reference's tensors;
 *  - exact patterns escape glob characters and @FILE line starts.
 * Runs from the repository root (as `make test` does). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bisect_output.h"
#include "layerdiff/bisect.h"
#include "layerdiff/inputs.h"
#include "layerdiff/onnx.h"

typedef struct fixture {
    ld_graph *g;
    ld_input_set in;
    ld_engine_config engine;
    ld_compare_options compare;
    ld_trials *t;
} fixture;

static void open_fixture(fixture *f, const char *path, const char *shapes, size_t cache)
{
    ld_error err;
    memset(f, 0, sizeof *f);
    if (ld_onnx_load_file(&f->g, path, &err) != LD_OK)
        fail_msg("%s", err.message);
    ld_inputs_options io = {shapes, NULL, 1, 0, NULL};
    if (ld_inputs_make(&f->in, f->g, &io, &err) != LD_OK)
        fail_msg("%s", err.message);
    ld_engine_config_init(&f->engine);
    f->engine.fp16 = true;
    ld_trials_config tc = {.graph = f->g, .inputs = (const ld_tensor *const *)f->in.tensors,
                           .engine = &f->engine, .compare = &f->compare, .isolate = true,
                           .threads = 1, .cache_bytes = cache};
    if (ld_trials_create(&f->t, &tc, &err) != LD_OK || ld_trials_baseline(f->t, &err) != LD_OK)
        fail_msg("%s", err.message);
}

static void close_fixture(fixture *f)
{
    ld_trials_destroy(f->t);
    ld_input_set_clear(&f->in);
    ld_graph_destroy(f->g);
    ld_engine_config_clear(&f->engine);
}

static int node_named(const ld_graph *g, const char *name)
{
    int i = ld_graph_find_node(g, name);
    assert_true(i >= 0);
    return i;
}

static bool same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static void expect_same_metrics(const ld_tensor_metrics *a, const ld_tensor_metrics *b)
{
    assert_int_equal(a->pass, b->pass);
    assert_int_equal(a->n_fail, b->n_fail);
    assert_int_equal(a->nonfinite_test_only, b->nonfinite_test_only);
    assert_true(same_double(a->abs.max, b->abs.max));
    assert_true(same_double(a->abs.mean, b->abs.mean));
    assert_true(same_double(a->rel.max, b->rel.max));
    assert_true(same_double(a->cosine, b->cosine));
    assert_true(same_double(a->test.mean, b->test.mean));
}

/* Trial of `set` against a fresh engine with the same layers in fp32. */
static ld_trial_result check_against_fresh(fixture *f, const int *set, int n)
{
    ld_error err;
    ld_trial_result trial, fresh;
    ld_tensor_metrics kept[8];
    assert_int_equal(ld_trials_run(f->t, set, n, &trial, &err), LD_OK);
    assert_true(trial.n_outputs <= 8);
    memcpy(kept, trial.metrics, (size_t)trial.n_outputs * sizeof *kept);
    ld_precision_plan *plan = NULL;
    assert_int_equal(ld_precision_plan_build(f->g, &f->engine, &plan, &err), LD_OK);
    ld_engine_config cfg;
    assert_int_equal(ld_engine_config_copy(&cfg, &f->engine, &err), LD_OK);
    int *sorted = malloc((size_t)(n + 1) * sizeof *sorted);
    memcpy(sorted, set, (size_t)n * sizeof *set);
    assert_int_equal(ld_bisect_add_rules(f->g, plan, sorted, n, &cfg, &err), LD_OK);
    assert_int_equal(ld_trials_verify(f->t, &cfg, &fresh, &err), LD_OK);
    assert_int_equal(trial.pass, fresh.pass);
    for (int k = 0; k < trial.n_outputs; k++)
        expect_same_metrics(&kept[k], &fresh.metrics[k]);
    ld_engine_config_clear(&cfg);
    ld_precision_plan_destroy(plan);
    free(sorted);
    trial.metrics = NULL;
    return trial;
}

static void test_planted_culprits_ranked_first(void **state)
{
    (void)state;
    fixture f;
    open_fixture(&f, "fixtures/bisect/two_branches.onnx", NULL, 0);
    int a = node_named(f.g, "a_gain"), b = node_named(f.g, "b_gain");
    int n = 0, *ranking = NULL;
    ld_error err;
    ld_trials_candidates(f.t, &n);
    assert_int_equal(n, 12); /* every layer computes in fp16 */
    assert_int_equal(ld_trials_ranking(f.t, &ranking, &n, &err), LD_OK);
    assert_true((ranking[0] == a && ranking[1] == b) || (ranking[0] == b && ranking[1] == a));
    ld_trials_layer info;
    ld_trials_layer_info(f.t, a, &info);
    assert_true(info.measured && info.overflow);
    ld_trials_layer_info(f.t, node_named(f.g, "a_relu"), &info);
    assert_true(info.measured && !info.overflow);
    ld_trial_result base;
    ld_trials_base_result(f.t, &base);
    assert_false(base.pass);
    free(ranking);
    close_fixture(&f);
}

static void test_trials_match_fresh_engine(void **state)
{
    (void)state;
    fixture f;
    open_fixture(&f, "fixtures/bisect/two_branches.onnx", NULL, 0);
    int a = node_named(f.g, "a_gain"), b = node_named(f.g, "b_gain");
    int all[12];
    for (int i = 0; i < 12; i++)
        all[i] = i;
    assert_false(check_against_fresh(&f, (int[]){a}, 1).pass);
    assert_false(check_against_fresh(&f, (int[]){b}, 1).pass);
    assert_true(check_against_fresh(&f, (int[]){b, a}, 2).pass);
    assert_true(check_against_fresh(&f, all, 12).pass);
    assert_false(check_against_fresh(&f, (int[]){0, 5, 9}, 3).pass);
    /* the same set again: restarted from the checkpoint the first made */
    ld_trial_result again = check_against_fresh(&f, (int[]){b}, 1);
    assert_int_equal(again.start_node, b);
    assert_int_equal(again.nodes_run, f.g->n_nodes - b);
    close_fixture(&f);
}

static void test_amplify_needs_three(void **state)
{
    (void)state;
    fixture f;
    open_fixture(&f, "fixtures/bisect/amplify.onnx", NULL, 0);
    int p = node_named(f.g, "amp_p"), r = node_named(f.g, "amp_r"),
        sub = node_named(f.g, "amp_sub");
    assert_true(check_against_fresh(&f, (int[]){p, r, sub}, 3).pass);
    assert_false(check_against_fresh(&f, (int[]){p, sub}, 2).pass);
    assert_false(check_against_fresh(&f, (int[]){r, sub}, 2).pass);
    assert_false(check_against_fresh(&f, (int[]){p, r}, 2).pass);
    close_fixture(&f);
}

/* Random sets on the transformer, with checkpoints wished everywhere, under
 * a budget so small that most cannot be kept, and with plenty. */
static void random_sets(size_t cache)
{
    fixture f;
    open_fixture(&f, "fixtures/transformer.onnx", "batch:2", cache);
    int n = 0;
    const int *cand = ld_trials_candidates(f.t, &n);
    ld_error err;
    assert_true(n > 20);
    assert_int_equal(ld_trials_want(f.t, cand, n, &err), LD_OK);
    uint64_t x = 99;
    int set[64];
    for (int round = 0; round < 12; round++) {
        int m = 0;
        for (int k = 0; k < n && m < 64; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            if ((x >> 60) < 3)
                set[m++] = cand[k];
        }
        check_against_fresh(&f, set, m);
    }
    ld_trials_stats st;
    ld_trials_get_stats(f.t, &st);
    assert_true(st.checkpoints_made > 1);
    assert_true(st.cache_peak <= st.cache_budget);
    if (cache != 0 && cache < 4096)
        assert_true(st.checkpoints_skipped + st.checkpoints_evicted > 0);
    close_fixture(&f);
}

static void test_random_sets_small_cache(void **state)
{
    (void)state;
    random_sets(2048);
}

static void test_random_sets_large_cache(void **state)
{
    (void)state;
    random_sets(0);
}

static void test_capture_reference(void **state)
{
    (void)state;
    fixture f;
    open_fixture(&f, "fixtures/bisect/two_branches.onnx", NULL, 0);
    int values[2] = {ld_graph_find_value(f.g, "a1"), f.g->outputs[0]};
    ld_tensor *got[2];
    ld_error err;
    assert_int_equal(ld_trials_capture_reference(f.t, values, 2, got, &err), LD_OK);
    const ld_tensor *x = f.in.tensors[0], *y = ld_trials_reference_output(f.t, 0);
    for (int64_t i = 0; i < x->count; i++) /* a1 = x * 1e-3 in float32 */
        assert_true(((const float *)got[0]->data)[i] == ((const float *)x->data)[i] * 1e-3f);
    assert_int_equal(got[1]->nbytes, y->nbytes);
    assert_memory_equal(got[1]->data, y->data, y->nbytes);
    ld_tensor_destroy(got[0]);
    ld_tensor_destroy(got[1]);
    close_fixture(&f);
}

static void test_exact_pattern(void **state)
{
    (void)state;
    const char *names[] = {"a*b", "#x", "op:Conv", "plain/name.1", "[0]?\\", " lead", "*"};
    const char *want[] = {"a\\*b", "\\#x", "\\op:Conv", "plain/name.1", "\\[0\\]\\?\\\\",
                          "\\ lead", "\\*"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *p = ld_bisect_exact_pattern(names[i]);
        assert_string_equal(p, want[i]);
        assert_int_equal(fnmatch(p, names[i], 0), 0);
        assert_int_not_equal(fnmatch(p, "a_b", 0), 0);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_planted_culprits_ranked_first),
        cmocka_unit_test(test_trials_match_fresh_engine),
        cmocka_unit_test(test_amplify_needs_three),
        cmocka_unit_test(test_random_sets_small_cache),
        cmocka_unit_test(test_random_sets_large_cache),
        cmocka_unit_test(test_capture_reference),
        cmocka_unit_test(test_exact_pattern),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
