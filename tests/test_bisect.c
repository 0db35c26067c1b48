/* Tests of the bisect search (compare/bisect.c) on made-up oracles, where
 * the answer is known by construction: ddmin finds exactly the planted set,
 * its result is 1-minimal and not limited to a contiguous range, several
 * alternative answers each give a 1-minimal set, grow finds the smallest
 * passing prefix, the Polygraphy bisection matches k computed by hand, and
 * the memo never asks the oracle the same set twice. The trial runner on
 * real models is tested in test_trials.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/bisect.h"

/* ---- made-up oracles ------------------------------------------------------------------- */

/* Passes when the set contains every item of one of the groups. */
typedef struct group_oracle {
    int n_groups;
    int groups[8][8];
    int sizes[8];
    int calls;
    int seen_sizes[4096];
} group_oracle;

static bool contains(const int *set, int n, int item)
{
    for (int i = 0; i < n; i++)
        if (set[i] == item)
            return true;
    return false;
}

static ld_status group_test(void *user, const int *set, int n, bool *pass, ld_error *err)
{
    (void)err;
    group_oracle *o = user;
    for (int i = 1; i < n; i++)
        assert_true(set[i - 1] < set[i]); /* the memo hands sets sorted */
    if (o->calls < 4096)
        o->seen_sizes[o->calls] = n;
    o->calls++;
    *pass = false;
    for (int g = 0; g < o->n_groups && !*pass; g++) {
        bool all = true;
        for (int k = 0; k < o->sizes[g] && all; k++)
            all = contains(set, n, o->groups[g][k]);
        *pass = all;
    }
    return LD_OK;
}

static void add_group(group_oracle *o, int n, const int *items)
{
    o->sizes[o->n_groups] = n;
    memcpy(o->groups[o->n_groups], items, (size_t)n * sizeof *items);
    o->n_groups++;
}

static ld_bisect_memo *memo_for(ld_bisect_oracle fn, void *user)
{
    ld_bisect_memo *m = NULL;
    ld_error err;
    assert_int_equal(ld_bisect_memo_create(&m, fn, user, &err), LD_OK);
    return m;
}

static void iota(int *items, int n)
{
    for (int i = 0; i < n; i++)
        items[i] = i;
}

/* ---- ddmin ---------------------------------------------------------------------------- */

static void test_ddmin_finds_two_planted_items(void **state)
{
    (void)state;
    group_oracle o = {0};
    add_group(&o, 2, (int[]){3, 17});
    ld_bisect_memo *m = memo_for(group_test, &o);
    int items[30], out[30], n_out = -1;
    iota(items, 30);
    ld_error err;
    assert_int_equal(ld_bisect_ddmin(m, items, 30, out, &n_out, &err), LD_OK);
    assert_int_equal(n_out, 2);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 17); /* not contiguous: a prefix could not be minimal */
    bool minimal = false;
    assert_int_equal(ld_bisect_is_one_minimal(m, out, n_out, &minimal, &err), LD_OK);
    assert_true(minimal);
    /* ddmin on 30 items finding 2: well under the 2^30 subsets, and no set twice */
    assert_true(ld_bisect_memo_calls(m) < 60);
    assert_int_equal(ld_bisect_memo_calls(m), o.calls);
    ld_bisect_memo_destroy(m);
}

static void test_ddmin_alternatives_give_one_minimal_set(void **state)
{
    (void)state;
    group_oracle o = {0};
    add_group(&o, 3, (int[]){1, 2, 40});
    add_group(&o, 1, (int[]){25});
    ld_bisect_memo *m = memo_for(group_test, &o);
    int items[48], out[48], n_out = -1;
    iota(items, 48);
    ld_error err;
    assert_int_equal(ld_bisect_ddmin(m, items, 48, out, &n_out, &err), LD_OK);
    bool minimal = false;
    assert_int_equal(ld_bisect_is_one_minimal(m, out, n_out, &minimal, &err), LD_OK);
    assert_true(minimal);
    assert_true((n_out == 1 && out[0] == 25) ||
                (n_out == 3 && out[0] == 1 && out[1] == 2 && out[2] == 40));
    ld_bisect_memo_destroy(m);
}

static void test_ddmin_single_and_empty(void **state)
{
    (void)state;
    group_oracle o = {0};
    add_group(&o, 1, (int[]){7});
    ld_bisect_memo *m = memo_for(group_test, &o);
    int out[1], n_out = -1;
    ld_error err;
    assert_int_equal(ld_bisect_ddmin(m, (int[]){7}, 1, out, &n_out, &err), LD_OK);
    assert_int_equal(n_out, 1);
    assert_int_equal(out[0], 7);
    ld_bisect_memo_destroy(m);

    group_oracle always = {0};
    add_group(&always, 0, (int[]){0}); /* the empty group: every set passes */
    m = memo_for(group_test, &always);
    int items[5];
    iota(items, 5);
    assert_int_equal(ld_bisect_ddmin(m, items, 5, out, &n_out, &err), LD_OK);
    assert_int_equal(n_out, 0);
    ld_bisect_memo_destroy(m);
}

static void test_ddmin_refuses_failing_start(void **state)
{
    (void)state;
    group_oracle o = {0};
    add_group(&o, 1, (int[]){99});
    ld_bisect_memo *m = memo_for(group_test, &o);
    int items[4], out[4], n_out = -1;
    iota(items, 4);
    ld_error err;
    assert_int_equal(ld_bisect_ddmin(m, items, 4, out, &n_out, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "do not pass"));
    ld_bisect_memo_destroy(m);
}

/* Random monotone oracles (an OR of ANDs over 64 items): whatever ddmin
 * returns passes and is 1-minimal. */
static void test_ddmin_random_oracles_one_minimal(void **state)
{
    (void)state;
    uint64_t x = 12345;
    for (int round = 0; round < 40; round++) {
        group_oracle o = {0};
        int groups = 1 + (int)(x % 3);
        for (int g = 0; g < groups; g++) {
            int size = 1 + (int)((x >> 8) % 5), items[8];
            for (int k = 0; k < size; k++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                items[k] = (int)((x >> 33) % 64);
                for (int j = 0; j < k; j++)
                    if (items[j] == items[k])
                        items[k] = (items[k] + 1 + k) % 64, j = -1;
            }
            add_group(&o, size, items);
        }
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ld_bisect_memo *m = memo_for(group_test, &o);
        int all[64], out[64], n_out = -1;
        iota(all, 64);
        ld_error err;
        assert_int_equal(ld_bisect_ddmin(m, all, 64, out, &n_out, &err), LD_OK);
        bool minimal = false;
        assert_int_equal(ld_bisect_is_one_minimal(m, out, n_out, &minimal, &err), LD_OK);
        assert_true(minimal);
        ld_bisect_memo_destroy(m);
    }
}

/* ---- grow ------------------------------------------------------------------------------- */

static void test_grow_smallest_prefix(void **state)
{
    (void)state;
    group_oracle o = {0};
    add_group(&o, 2, (int[]){50, 8});
    ld_bisect_memo *m = memo_for(group_test, &o);
    /* ranking: 50 first, 8 sixth */
    int ranking[12] = {50, 1, 2, 3, 4, 8, 9, 10, 11, 12, 13, 14};
    int k = -2;
    ld_error err;
    assert_int_equal(ld_bisect_grow(m, ranking, 12, &k, &err), LD_OK);
    assert_int_equal(k, 6);
    /* empty, 1, 2, 4, 8 then bisect 4..8: 6, 5 -> at most 8 calls */
    assert_true(ld_bisect_memo_calls(m) <= 8);
    ld_bisect_memo_destroy(m);
}

static void test_grow_none_and_empty(void **state)
{
    (void)state;
    group_oracle never = {0};
    add_group(&never, 1, (int[]){1000});
    ld_bisect_memo *m = memo_for(group_test, &never);
    int ranking[5] = {0, 1, 2, 3, 4}, k = 0;
    ld_error err;
    assert_int_equal(ld_bisect_grow(m, ranking, 5, &k, &err), LD_OK);
    assert_int_equal(k, -1);
    ld_bisect_memo_destroy(m);

    group_oracle always = {0};
    add_group(&always, 0, (int[]){0});
    m = memo_for(group_test, &always);
    assert_int_equal(ld_bisect_grow(m, ranking, 5, &k, &err), LD_OK);
    assert_int_equal(k, 0);
    ld_bisect_memo_destroy(m);
}

/* ---- Polygraphy's bisection -------------------------------------------------------------- */

static void test_polygraphy_prefix_hand_computed(void **state)
{
    (void)state;
    /* 20 layers, culprits 4 and 7: the first k layers hold both for k >= 8.
     * By hand, BisectMarker: 20 pass (good 20) -> 10 pass -> 5 fail (bad 5)
     * -> ceil(15/2) = 8 pass -> floor(13/2) = 6 fail -> ceil(14/2) = 7 fail:
     * good 8, bad 7, stop. */
    group_oracle o = {0};
    add_group(&o, 2, (int[]){4, 7});
    ld_bisect_memo *m = memo_for(group_test, &o);
    int k = 0;
    ld_error err;
    assert_int_equal(ld_bisect_polygraphy(m, 20, false, &k, &err), LD_OK);
    assert_int_equal(k, 8);
    int want[] = {20, 10, 5, 8, 6, 7};
    assert_int_equal(o.calls, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(o.seen_sizes[i], want[i]);
    ld_bisect_memo_destroy(m);
}

static void test_polygraphy_suffix_and_none(void **state)
{
    (void)state;
    group_oracle o = {0};
    add_group(&o, 2, (int[]){4, 7});
    ld_bisect_memo *m = memo_for(group_test, &o);
    int k = 0;
    ld_error err;
    /* the last k of 20 hold layer 4 (and 7) for k >= 16 */
    assert_int_equal(ld_bisect_polygraphy(m, 20, true, &k, &err), LD_OK);
    assert_int_equal(k, 16);
    ld_bisect_memo_destroy(m);

    group_oracle never = {0};
    add_group(&never, 1, (int[]){1000});
    m = memo_for(group_test, &never);
    assert_int_equal(ld_bisect_polygraphy(m, 20, false, &k, &err), LD_OK);
    assert_int_equal(k, -1);
    assert_int_equal(never.calls, 1); /* all 20 fail: nothing else to try */
    ld_bisect_memo_destroy(m);
}

static void test_memo_duplicates_and_hits(void **state)
{
    (void)state;
    group_oracle o = {0};
    add_group(&o, 1, (int[]){2});
    ld_bisect_memo *m = memo_for(group_test, &o);
    bool pass = false;
    ld_error err;
    assert_int_equal(ld_bisect_memo_test(m, (int[]){3, 2}, 2, &pass, &err), LD_OK);
    assert_true(pass);
    assert_int_equal(ld_bisect_memo_test(m, (int[]){2, 3}, 2, &pass, &err), LD_OK);
    assert_true(pass);
    assert_int_equal(ld_bisect_memo_calls(m), 1);
    assert_int_equal(ld_bisect_memo_hits(m), 1);
    assert_int_equal(ld_bisect_memo_test(m, (int[]){2, 2}, 2, &pass, &err), LD_ERR_INTERNAL);
    ld_bisect_memo_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ddmin_finds_two_planted_items),
        cmocka_unit_test(test_ddmin_alternatives_give_one_minimal_set),
        cmocka_unit_test(test_ddmin_single_and_empty),
        cmocka_unit_test(test_ddmin_refuses_failing_start),
        cmocka_unit_test(test_ddmin_random_oracles_one_minimal),
        cmocka_unit_test(test_grow_smallest_prefix),
        cmocka_unit_test(test_grow_none_and_empty),
        cmocka_unit_test(test_polygraphy_prefix_hand_computed),
        cmocka_unit_test(test_polygraphy_suffix_and_none),
        cmocka_unit_test(test_memo_duplicates_and_hits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
