/* Unit tests for compare/session.c and compare/divergence.c: sessions fed
 * tiny hand-made tensor pairs whose first divergent, origin and culprit
 * layers are known by construction, the ordering and duplicate errors, and
 * the divergence analysis on records built directly (rate-of-change special
 * values, deterministic ranking ties). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare/divergence.h"
#include "layerdiff/compare.h"
#include "layerdiff/round.h"

#define N 4

/* fp32 ulp at 1.0 */
#define ULP1 (1.0f / 8388608.0f)

static const float ones[N] = {1, 1, 1, 1};

static ld_tensor *make_tensor(const char *name, ld_dtype dtype, const void *data)
{
    ld_error err;
    ld_tensor *t = NULL;
    ld_shape shape = {.rank = 1, .dims = {N}};
    assert_int_equal(ld_tensor_create(&t, name, dtype, &shape, &err), LD_OK);
    memcpy(t->data, data, t->nbytes);
    return t;
}

/* ones + delta (element-wise) as a float32 tensor. */
static ld_tensor *shifted(const char *name, float delta)
{
    float v[N];
    for (int i = 0; i < N; i++)
        v[i] = ones[i] + delta;
    return make_tensor(name, LD_DTYPE_FLOAT32, v);
}

typedef struct pair_spec {
    const char *name;
    int64_t topo;
    const char *inputs[3];
    float ref_delta, test_delta;
    float iso_delta;       /* NAN: no isolated tensor */
    ld_precision precision;
} pair_spec;

static ld_status add_pair(ld_compare_session *s, const pair_spec *p, ld_error *err)
{
    ld_tensor *ref = shifted(p->name, p->ref_delta);
    ld_tensor *test = shifted(p->name, p->test_delta);
    ld_tensor *iso = isnan(p->iso_delta) ? NULL : shifted(p->name, p->iso_delta);
    int n_inputs = 0;
    while (n_inputs < 3 && p->inputs[n_inputs])
        n_inputs++;
    ld_compare_item item = {
        .name = p->name, .node = p->topo >= 0 ? p->name : "",
        .op_type = p->topo >= 0 ? "Op" : "", .topo_index = p->topo,
        .precision = p->precision, .n_inputs = n_inputs, .inputs = p->inputs,
        .ref = ref, .test = test, .isolated = iso};
    ld_status st = ld_compare_session_add(s, &item, err);
    ld_tensor_destroy(ref);
    ld_tensor_destroy(test);
    ld_tensor_destroy(iso);
    return st;
}

static ld_compare_session *session_of(const pair_spec *pairs, int n, const ld_compare_options *o)
{
    ld_error err;
    ld_compare_session *s = NULL;
    ld_compare_options defaults = {0};
    assert_int_equal(ld_compare_session_create(&s, o ? o : &defaults, &err), LD_OK);
    for (int i = 0; i < n; i++) {
        ld_status st = add_pair(s, &pairs[i], &err);
        if (st != LD_OK)
            fail_msg("adding %s: %s", pairs[i].name, err.message);
    }
    assert_int_equal(ld_compare_session_finish(s, &err), LD_OK);
    return s;
}

static void assert_close(double a, double b, double rel)
{
    if (!(fabs(a - b) <= rel * fabs(b)))
        fail_msg("%.17g is not within %g of %.17g", a, rel, b);
}

/* x -> a (exact) -> b (error born: 1e-3) -> c (inherits and grows: 3e-3) -> d (same). */
static void test_chain(void **state)
{
    (void)state;
    const pair_spec pairs[] = {
        {"x", -1, {NULL}, 0, 0, NAN, LD_PRECISION_FP32},
        {"a", 0, {"x"}, 0, 0, NAN, LD_PRECISION_FP32},
        {"b", 1, {"a", "W"}, 0, 1e-3f, NAN, LD_PRECISION_FP32},
        {"c", 2, {"b"}, 0, 3e-3f, NAN, LD_PRECISION_FP32},
        {"d", 3, {"c", ""}, 0, 3e-3f, NAN, LD_PRECISION_FP32},
    };
    ld_compare_session *s = session_of(pairs, 5, NULL);
    const ld_compare_summary *sum = ld_compare_session_summary(s);
    assert_false(sum->pass);
    assert_int_equal(sum->n_compared, 5);
    assert_int_equal(sum->n_failed, 3);
    assert_int_equal(sum->first_divergent, 2);
    assert_int_equal(sum->n_origins, 1);
    assert_int_equal(sum->origins[0], 2);
    assert_int_equal(sum->n_culprits, 0);
    assert_false(sum->has_isolated);
    const ld_compare_record *b = ld_compare_session_record(s, 2);
    assert_true(b->origin);
    assert_int_equal(b->n_inputs, 2);
    assert_int_equal(b->inputs[0], 1);
    assert_int_equal(b->inputs[1], -1); /* "W": an initializer, never compared */
    assert_string_equal(b->input_names[1], "W");
    double delta_b = b->metrics.abs.mean;
    assert_close(delta_b, (double)(1.0f + 1e-3f) - 1.0, 1e-12);
    assert_close(b->rate_of_change, delta_b / 1e-7, 1e-12); /* δ_in = δ_a = 0 */
    const ld_compare_record *c = ld_compare_session_record(s, 3);
    assert_false(c->origin);
    assert_close(c->rate_of_change, (c->metrics.abs.mean - delta_b) / (delta_b + 1e-7), 1e-12);
    const ld_compare_record *d = ld_compare_session_record(s, 4);
    assert_false(d->origin);
    assert_int_equal(d->inputs[1], -1); /* "" = omitted input */
    assert_null(ld_compare_session_record(s, 5));
    ld_compare_session_destroy(s);
}

/* Two origins on separate branches, ranked by R; the join inherits. */
static void test_branches_rank_origins(void **state)
{
    (void)state;
    const pair_spec pairs[] = {
        {"x", -1, {NULL}, 0, 0, NAN, LD_PRECISION_FP32},
        {"a", 0, {"x"}, 0, 1e-3f, NAN, LD_PRECISION_FP32},   /* origin, R = δ_a / 1e-7 */
        {"b", 1, {"x"}, 0, 0, NAN, LD_PRECISION_FP32},       /* passes */
        {"j", 2, {"a", "b"}, 0, 2e-3f, NAN, LD_PRECISION_FP32}, /* inherits from a */
        {"e", 3, {"b"}, 0, 0.25f, NAN, LD_PRECISION_FP32},   /* origin with a larger R */
        {"f", 4, {"W1", "W2"}, 0, 1e-4f, NAN, LD_PRECISION_FP32}, /* fed by initializers only */
    };
    ld_compare_session *s = session_of(pairs, 6, NULL);
    const ld_compare_summary *sum = ld_compare_session_summary(s);
    assert_int_equal(sum->first_divergent, 1);
    assert_int_equal(sum->n_origins, 3);
    assert_int_equal(sum->origins[0], 4); /* e: 0.25 / 1e-7 */
    assert_int_equal(sum->origins[1], 1); /* a: 1e-3 / 1e-7 */
    assert_int_equal(sum->origins[2], 5); /* f: 1e-4 / 1e-7 */
    assert_false(ld_compare_session_record(s, 3)->origin);
    ld_compare_session_destroy(s);
}

/* An integer tensor that fails (an index flipped) is an origin; a float
 * tensor reading it is not, though all its float inputs pass. */
static void test_integer_inputs(void **state)
{
    (void)state;
    ld_error err;
    ld_compare_session *s = NULL;
    ld_compare_options o = {0};
    assert_int_equal(ld_compare_session_create(&s, &o, &err), LD_OK);
    const pair_spec x = {"x", -1, {NULL}, 0, 0, NAN, LD_PRECISION_FP32};
    assert_int_equal(add_pair(s, &x, &err), LD_OK);
    const int64_t ref_idx[N] = {0, 1, 2, 3}, test_idx[N] = {0, 1, 3, 3};
    ld_tensor *ri = make_tensor("idx", LD_DTYPE_INT64, ref_idx);
    ld_tensor *ti = make_tensor("idx", LD_DTYPE_INT64, test_idx);
    const char *idx_inputs[] = {"x"};
    ld_compare_item item = {.name = "idx", .node = "argmax", .op_type = "ArgMax",
                            .topo_index = 0, .n_inputs = 1, .inputs = idx_inputs,
                            .ref = ri, .test = ti};
    assert_int_equal(ld_compare_session_add(s, &item, &err), LD_OK);
    ld_tensor_destroy(ri);
    ld_tensor_destroy(ti);
    const pair_spec g = {"g", 1, {"x", "idx"}, 0, 1e-2f, NAN, LD_PRECISION_FP32};
    assert_int_equal(add_pair(s, &g, &err), LD_OK);
    assert_int_equal(ld_compare_session_finish(s, &err), LD_OK);
    const ld_compare_summary *sum = ld_compare_session_summary(s);
    assert_int_equal(sum->first_divergent, 1);
    assert_int_equal(sum->n_origins, 1);
    assert_int_equal(sum->origins[0], 1);
    assert_false(ld_compare_session_record(s, 1)->is_float);
    assert_false(ld_compare_session_record(s, 2)->origin);
    /* δ_in only counts float inputs: x passes with δ 0, so R = δ_g / 1e-7 */
    const ld_compare_record *gr = ld_compare_session_record(s, 2);
    assert_close(gr->rate_of_change, gr->metrics.abs.mean / 1e-7, 1e-12);
    ld_compare_session_destroy(s);
}

/* Culprits: isolated error of 16 ulps (above 8), 4 ulps (below), an
 * overflow (reference beyond fp16's range), ranked by isolated max ulp. */
static void test_culprits(void **state)
{
    (void)state;
    const pair_spec pairs[] = {
        {"x", -1, {NULL}, 0, 0, NAN, LD_PRECISION_FP32},
        {"a", 0, {"x"}, 0, 16 * ULP1, 16 * ULP1, LD_PRECISION_FP32},
        {"b", 1, {"a"}, 0, 20 * ULP1, 4 * ULP1, LD_PRECISION_FP32},
        {"c", 2, {"b"}, 0, 40 * ULP1, 32 * ULP1, LD_PRECISION_FP32},
        {"d", 3, {"c"}, 70000.0f, 70000.0f, 70000.0f, LD_PRECISION_FP16},
        {"e", 4, {"d"}, 0, 0, NAN, LD_PRECISION_FP32},
    };
    ld_compare_session *s = session_of(pairs, 6, NULL);
    const ld_compare_summary *sum = ld_compare_session_summary(s);
    assert_true(sum->has_isolated);
    assert_int_equal(sum->n_culprits, 3);
    assert_int_equal(sum->culprits[0], 3); /* c: 32 ulps */
    assert_int_equal(sum->culprits[1], 1); /* a: 16 ulps */
    assert_int_equal(sum->culprits[2], 4); /* d: overflow, 0 ulps */
    assert_false(ld_compare_session_record(s, 2)->culprit);
    assert_false(ld_compare_session_record(s, 5)->has_isolated);
    assert_int_equal(sum->would_overflow, 4);
    ld_compare_session_destroy(s);

    /* A higher threshold leaves the overflow only. */
    ld_compare_options o = {.culprit_ulp = 40};
    s = session_of(pairs, 6, &o);
    sum = ld_compare_session_summary(s);
    assert_int_equal(sum->n_culprits, 1);
    assert_int_equal(sum->culprits[0], 4);
    ld_compare_session_destroy(s);
}

static void test_counters_and_tolerance(void **state)
{
    (void)state;
    ld_error err;
    ld_compare_options o = {0};
    assert_int_equal(ld_tolerance_spec_add(&o.tol, true, "b*:1", &err), LD_OK);
    assert_int_equal(ld_tolerance_spec_add(&o.tol, false, "b*:1", &err), LD_OK);
    ld_compare_session *s = NULL;
    assert_int_equal(ld_compare_session_create(&s, &o, &err), LD_OK);
    ld_tensor *r = shifted("r", 0), *t = shifted("t", 0.5f);
    const char *names[] = {"a", "big", "c"};
    for (int i = 0; i < 3; i++) {
        ld_compare_item item = {.name = names[i], .node = names[i], .op_type = "Op",
                                .topo_index = i, .ref = r, .test = t,
                                .counters = {.present = i != 2, .overflows = INT64_MAX - 1,
                                             .nans_created = 2, .underflows = 3}};
        assert_int_equal(ld_compare_session_add(s, &item, &err), LD_OK);
    }
    assert_int_equal(ld_compare_session_finish(s, &err), LD_OK);
    assert_int_equal(ld_compare_session_finish(s, &err), LD_OK); /* idempotent */
    const ld_compare_summary *sum = ld_compare_session_summary(s);
    assert_int_equal(sum->overflows, INT64_MAX); /* saturates */
    assert_int_equal(sum->nans_created, 4);      /* "c" has no counters */
    assert_int_equal(sum->underflows, 6);
    assert_int_equal(sum->n_failed, 2);          /* "big" passes under its override */
    assert_true(ld_compare_session_record(s, 1)->metrics.pass);
    assert_true(ld_compare_session_record(s, 1)->tol.atol == 1.0);
    assert_true(ld_compare_session_record(s, 0)->tol.atol == 1e-5);
    assert_true(ld_compare_session_options(s)->culprit_ulp == 8);
    assert_int_equal(ld_compare_session_add(s, &(ld_compare_item){.name = "late", .ref = r,
                                                                    .test = t, .topo_index = 9},
                                            &err),
                     LD_ERR_INTERNAL); /* after finish */
    ld_tensor_destroy(r);
    ld_tensor_destroy(t);
    ld_compare_session_destroy(s);
    ld_tolerance_spec_free(&o.tol);
}

static ld_status add_named(ld_compare_session *s, const char *name, int64_t topo, int out_index,
                           const char *input, ld_error *err)
{
    ld_tensor *r = shifted(name, 0);
    const char *inputs[] = {input};
    ld_compare_item item = {.name = name, .node = name, .op_type = "Op", .topo_index = topo,
                            .output_index = out_index, .n_inputs = input ? 1 : 0,
                            .inputs = inputs, .ref = r, .test = r};
    ld_status st = ld_compare_session_add(s, &item, err);
    ld_tensor_destroy(r);
    return st;
}

static void test_order_and_duplicates(void **state)
{
    (void)state;
    ld_error err;
    ld_compare_session *s = NULL;
    assert_int_equal(ld_compare_session_create(&s, NULL, &err), LD_OK);
    assert_int_equal(add_named(s, "x", -1, 0, NULL, &err), LD_OK);
    assert_int_equal(add_named(s, "a", 3, 0, "x", &err), LD_OK);
    assert_int_equal(add_named(s, "a2", 3, 1, "x", &err), LD_OK);
    assert_int_equal(add_named(s, "a", 4, 0, NULL, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "'a' given twice"));
    assert_int_equal(add_named(s, "b", 2, 0, NULL, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "topological order"));
    assert_int_equal(add_named(s, "b", 3, 1, NULL, &err), LD_ERR_INPUT); /* same output */
    assert_int_equal(add_named(s, "y", -1, 0, NULL, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "graph input 'y'"));
    assert_int_equal(add_named(s, "bad", 5, -1, NULL, &err), LD_ERR_INPUT);
    assert_int_equal(ld_compare_session_count(s), 3); /* failed adds left nothing */
    /* "c" reads "d", which comes after it: refused at finish */
    assert_int_equal(add_named(s, "c", 5, 0, "d", &err), LD_OK);
    assert_int_equal(add_named(s, "d", 6, 0, "c", &err), LD_OK);
    assert_int_equal(ld_compare_session_finish(s, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "'c' uses 'd', which was given after it"));
    ld_compare_session_destroy(s);
}

static void shape_mismatch_body(int threads)
{
    ld_error err;
    ld_compare_session *s = NULL;
    ld_compare_options o = {.threads = threads};
    assert_int_equal(ld_compare_session_create(&s, &o, &err), LD_OK);
    ld_tensor *r = shifted("r", 0), *t = NULL;
    ld_shape other = {.rank = 2, .dims = {2, 2}};
    assert_int_equal(ld_tensor_create(&t, "t", LD_DTYPE_FLOAT32, &other, &err), LD_OK);
    ld_compare_item item = {.name = "conv_out", .topo_index = 0, .ref = r, .test = t};
    assert_int_equal(ld_compare_session_add(s, &item, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "conv_out"));
    item.isolated = t;
    item.test = r;
    assert_int_equal(ld_compare_session_add(s, &item, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "isolated run"));
    assert_int_equal(ld_compare_session_count(s), 0);
    /* the name stays free after the failed adds */
    item.isolated = NULL;
    assert_int_equal(ld_compare_session_add(s, &item, &err), LD_OK);
    ld_tensor_destroy(r);
    ld_tensor_destroy(t);
    ld_compare_session_destroy(s);
}

/* The isolated pair's error keeps its prefix when it is compared on a
 * thread of its own. */
static void test_shape_mismatch_names_tensor(void **state)
{
    (void)state;
    shape_mismatch_body(1);
    shape_mismatch_body(2);
}

static bool same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void assert_same_stats(const char *what, const ld_error_stats *a, const ld_error_stats *b)
{
    if (!same_bits(a->max, b->max) || !same_bits(a->mean, b->mean) ||
        !same_bits(a->median, b->median) || !same_bits(a->p90, b->p90) ||
        !same_bits(a->p95, b->p95) || !same_bits(a->p99, b->p99) ||
        !same_bits(a->quantile, b->quantile) || a->max_index != b->max_index)
        fail_msg("%s: max %a/%a mean %a/%a median %a/%a p99 %a/%a", what, a->max, b->max,
                 a->mean, b->mean, a->median, b->median, a->p99, b->p99);
}

static void assert_same_metrics(const char *what, const ld_tensor_metrics *a,
                                const ld_tensor_metrics *b)
{
    assert_same_stats(what, &a->abs, &b->abs);
    assert_same_stats(what, &a->rel, &b->rel);
    assert_same_stats(what, &a->ulp, &b->ulp);
    if (a->n != b->n || !same_bits(a->cosine, b->cosine) || !same_bits(a->snr_db, b->snr_db) ||
        !same_bits(a->l2_rel, b->l2_rel) || a->n_fail != b->n_fail ||
        a->first_fail_index != b->first_fail_index || a->pass != b->pass ||
        a->underflow_zero != b->underflow_zero || a->would_overflow != b->would_overflow ||
        !same_bits(a->test.std, b->test.std) || !same_bits(a->ref.mean, b->ref.mean))
        fail_msg("%s: cosine %a/%a snr %a/%a failing %lld/%lld", what, a->cosine, b->cosine,
                 a->snr_db, b->snr_db, (long long)a->n_fail, (long long)b->n_fail);
}

/* A session with two threads (the isolated pairs compared beside the
 * accumulated ones, on a scratch of their own) records what one thread
 * records, bit for bit: float16 and float32 test tensors, small ones (every
 * error kept) and large ones (sampled intervals), Clip outputs among them. */
static void test_threads_same_records(void **state)
{
    (void)state;
    enum { LAYERS = 6 };
    const int64_t sizes[LAYERS] = {5, 4099, 70000, 200001, 1, 150000};
    ld_compare_session *s[2] = {NULL, NULL};
    ld_error err;
    for (int v = 0; v < 2; v++) {
        ld_compare_options o = {.threads = v ? 2 : 1};
        assert_int_equal(ld_compare_session_create(&s[v], &o, &err), LD_OK);
    }
    uint64_t seed = 99;
    for (int l = 0; l < LAYERS; l++) {
        int64_t n = sizes[l];
        ld_shape shape = {.rank = 1, .dims = {n}};
        ld_dtype test_type = l % 2 ? LD_DTYPE_FLOAT16 : LD_DTYPE_FLOAT32;
        ld_tensor *r = NULL, *t = NULL, *iso = NULL;
        assert_int_equal(ld_tensor_create(&r, "r", LD_DTYPE_FLOAT32, &shape, &err), LD_OK);
        assert_int_equal(ld_tensor_create(&t, "t", test_type, &shape, &err), LD_OK);
        assert_int_equal(ld_tensor_create(&iso, "i", test_type, &shape, &err), LD_OK);
        for (int64_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            float x = (float)((double)(seed >> 11) * 0x1p-53 * 10.0 - 2.0);
            x = l == 2 ? (x < 0 ? 0 : x > 6 ? 6 : x) : x; /* a Clip's output */
            float e1 = x * (float)((double)(seed >> 40 & 1023) * 1e-6), e2 = e1 * 0.25f;
            if (l == 2) { /* the test runs' Clip clamps too: crossings near 6 */
                e1 = x + e1 > 6 ? 6 - x : e1;
                e2 = x + e2 > 6 ? 6 - x : e2;
            }
            ((float *)r->data)[i] = x;
            if (test_type == LD_DTYPE_FLOAT16) {
                ((ld_fp16 *)t->data)[i] = ld_fp32_to_fp16(x + e1);
                ((ld_fp16 *)iso->data)[i] = ld_fp32_to_fp16(x + e2);
            } else {
                ((float *)t->data)[i] = x + e1;
                ((float *)iso->data)[i] = x + e2;
            }
        }
        char name[32];
        snprintf(name, sizeof name, "layer%d", l);
        ld_compare_item item = {.name = name, .node = name, .op_type = l == 2 ? "Clip" : "Op",
                                .topo_index = l, .precision = LD_PRECISION_FP16,
                                .ref = r, .test = t, .isolated = iso};
        for (int v = 0; v < 2; v++)
            assert_int_equal(ld_compare_session_add(s[v], &item, &err), LD_OK);
        ld_tensor_destroy(r);
        ld_tensor_destroy(t);
        ld_tensor_destroy(iso);
    }
    for (int v = 0; v < 2; v++)
        assert_int_equal(ld_compare_session_finish(s[v], &err), LD_OK);
    for (int l = 0; l < LAYERS; l++) {
        const ld_compare_record *a = ld_compare_session_record(s[0], l);
        const ld_compare_record *b = ld_compare_session_record(s[1], l);
        assert_true(a->has_isolated && b->has_isolated);
        assert_same_metrics(a->name, &a->metrics, &b->metrics);
        assert_same_metrics(a->name, &a->isolated, &b->isolated);
        assert_int_equal(a->clip_crossings, b->clip_crossings);
        assert_int_equal(a->clip_crossings, l == 2 ? a->clip_crossings : -1);
    }
    assert_true(ld_compare_session_record(s[0], 2)->clip_crossings > 0);
    ld_compare_session_destroy(s[0]);
    ld_compare_session_destroy(s[1]);
}

static void test_empty_session(void **state)
{
    (void)state;
    ld_error err;
    ld_compare_session *s = NULL;
    assert_int_equal(ld_compare_session_create(&s, NULL, &err), LD_OK);
    assert_int_equal(ld_compare_session_finish(s, &err), LD_OK);
    const ld_compare_summary *sum = ld_compare_session_summary(s);
    assert_true(sum->pass);
    assert_int_equal(sum->first_divergent, -1);
    assert_int_equal(sum->n_origins, 0);
    assert_null(sum->origins);
    ld_compare_session_destroy(s);
    ld_compare_session_destroy(NULL);
}

/* Many records force the name index and record array to grow. */
static void test_many_records(void **state)
{
    (void)state;
    ld_error err;
    ld_compare_session *s = NULL;
    assert_int_equal(ld_compare_session_create(&s, NULL, &err), LD_OK);
    char name[32], prev[32] = "";
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "t%d", i);
        assert_int_equal(add_named(s, name, i, 0, i ? prev : NULL, &err), LD_OK);
        memcpy(prev, name, sizeof name);
    }
    assert_int_equal(ld_compare_session_finish(s, &err), LD_OK);
    for (int i = 1; i < 1000; i++)
        assert_int_equal(ld_compare_session_record(s, i)->inputs[0], i - 1);
    ld_compare_session_destroy(s);
}

/* --- divergence on records built directly ---------------------------------------------- */

static void test_rate_special_values(void **state)
{
    (void)state;
    assert_true(ld_divergence_rate(1e-3, 0) == 1e-3 / 1e-7);
    assert_true(ld_divergence_rate(0, 1e-3) == -1e-3 / (1e-3 + 1e-7));
    assert_true(ld_divergence_rate(NAN, NAN) == 0);
    assert_true(ld_divergence_rate(NAN, 1) == -1 / (1 + 1e-7));
    assert_true(ld_divergence_rate(INFINITY, 1) == INFINITY);
    assert_true(ld_divergence_rate(INFINITY, INFINITY) == 0);
    assert_true(ld_divergence_rate(1, INFINITY) == -1);
    assert_true(ld_divergence_rate(INFINITY, NAN) == INFINITY);
}

static ld_compare_record rec(bool pass, double mean_abs, int n_inputs, int *inputs)
{
    ld_compare_record r;
    memset(&r, 0, sizeof r);
    r.name = (char *)"r";
    r.is_float = true;
    r.metrics.pass = pass;
    r.metrics.abs.mean = mean_abs;
    r.metrics.abs.max = mean_abs;
    r.metrics.ulp.max = NAN;
    r.n_inputs = n_inputs;
    r.inputs = inputs;
    return r;
}

static void test_analyze_ties_and_infinities(void **state)
{
    (void)state;
    ld_error err;
    int in0[] = {0}, in1[] = {1};
    ld_compare_record records[6] = {
        rec(true, 0, 0, NULL),
        rec(false, INFINITY, 1, in0),  /* origin, R = +inf */
        rec(false, INFINITY, 1, in1),  /* inherits inf: R = 0, not an origin */
        rec(false, 2e-3, 1, in0),      /* origin, R = 2e-3/1e-7 */
        rec(false, 2e-3, 1, in0),      /* same R: after 3 */
        rec(false, NAN, 0, NULL),      /* empty tensor failing: origin with R = 0 */
    };
    /* isolated errors of 9 ulps of fp32 at a scale of 1 (so 9 * 2^-23) */
    for (int i = 3; i <= 4; i++) {
        records[i].has_isolated = true;
        records[i].isolated.abs.max = 9.0 / 8388608.0;
        records[i].isolated.ref.min = -1;
        records[i].isolated.ref.max = 0.5;
    }
    records[2].has_isolated = true;
    records[2].isolated.abs.max = NAN; /* e.g. empty, but flagged by its non-finite count */
    records[2].isolated.nonfinite_test_only = 1;
    records[1].has_isolated = true;    /* 8 ulps is not above the threshold */
    records[1].isolated.abs.max = 8.0 / 8388608.0;
    records[1].isolated.ref.min = records[1].isolated.ref.max = 1;
    ld_compare_summary sum;
    int *origins = NULL, *culprits = NULL;
    assert_int_equal(ld_divergence_analyze(records, 6, 0, &sum, &origins, &culprits, &err), LD_OK);
    assert_int_equal(sum.first_divergent, 1);
    assert_int_equal(sum.n_origins, 4);
    assert_int_equal(origins[0], 1);
    assert_int_equal(origins[1], 3);
    assert_int_equal(origins[2], 4);
    assert_int_equal(origins[3], 5);
    assert_true(records[2].rate_of_change == 0);
    assert_int_equal(sum.n_culprits, 3);
    assert_int_equal(culprits[0], 3); /* 9 ulps, tie broken by order */
    assert_int_equal(culprits[1], 4);
    assert_int_equal(culprits[2], 2); /* NaN ulp (non-finite) last */
    assert_true(records[3].isolated_scaled_ulp == 9);
    assert_true(records[1].isolated_scaled_ulp == 8);
    assert_false(records[1].culprit);
    assert_true(isnan(records[0].isolated_scaled_ulp));
    assert_true(records[1].scaled_ulp == INFINITY); /* an infinite error */
    assert_true(isnan(records[5].scaled_ulp));      /* an empty tensor */
    free(origins);
    free(culprits);

    int bad[] = {3};
    records[1].inputs = bad; /* a later record */
    assert_int_equal(ld_divergence_analyze(records, 6, 0, &sum, &origins, &culprits, &err),
                     LD_ERR_INTERNAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_branches_rank_origins),
        cmocka_unit_test(test_integer_inputs),
        cmocka_unit_test(test_culprits),
        cmocka_unit_test(test_counters_and_tolerance),
        cmocka_unit_test(test_order_and_duplicates),
        cmocka_unit_test(test_shape_mismatch_names_tensor),
        cmocka_unit_test(test_threads_same_records),
        cmocka_unit_test(test_empty_session),
        cmocka_unit_test(test_many_records),
        cmocka_unit_test(test_rate_special_values),
        cmocka_unit_test(test_analyze_ties_and_infinities),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
