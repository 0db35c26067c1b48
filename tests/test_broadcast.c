/* Tests of numpy-style broadcasting (backends/broadcast.c): the result
 * shape, the incompatibility message, and the row iterator checked element
 * by element against a naive index computation on many random shapes,
 * including scalars, size-1 and zero-size dims. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/broadcast.h"
#include "layerdiff/inputs.h"

static ld_shape S(int rank, ...)
{
    ld_shape s = {.rank = rank};
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++)
        s.dims[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}
#define I64(x) ((int64_t)(x))

static void expect_shape(const ld_shape *got, const ld_shape *want)
{
    char a[128], b[128];
    if (!ld_shape_equal(got, want))
        fail_msg("shape %s, expected %s", ld_shape_format(got, a, sizeof a),
                 ld_shape_format(want, b, sizeof b));
}

static void test_result_shapes(void **state)
{
    (void)state;
    static const struct {
        ld_shape a, b, want;
    } cases[] = {
        {{2, {3, 4}}, {2, {3, 4}}, {2, {3, 4}}},
        {{2, {3, 4}}, {1, {4}}, {2, {3, 4}}},
        {{2, {3, 1}}, {1, {4}}, {2, {3, 4}}},
        {{0, {0}}, {3, {2, 1, 5}}, {3, {2, 1, 5}}},        /* scalar */
        {{4, {8, 1, 6, 1}}, {3, {7, 1, 5}}, {4, {8, 7, 6, 5}}}, /* numpy's docs example */
        {{1, {0}}, {1, {1}}, {1, {0}}},                   /* zero-size dims broadcast like any */
        {{2, {1, 0}}, {2, {3, 1}}, {2, {3, 0}}},
        {{2, {1, 1}}, {0, {0}}, {2, {1, 1}}},
    };
    ld_error err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ld_shape out;
        assert_int_equal(ld_broadcast_shape(&cases[i].a, &cases[i].b, &out, NULL, &err), LD_OK);
        expect_shape(&out, &cases[i].want);
        assert_int_equal(ld_broadcast_shape(&cases[i].b, &cases[i].a, &out, NULL, &err), LD_OK);
        expect_shape(&out, &cases[i].want);
    }
    /* n shapes, and none at all (a scalar). */
    ld_shape a = S(1, I64(5)), b = S(3, I64(2), I64(1), I64(1)), c = S(2, I64(4), I64(1));
    const ld_shape *three[] = {&a, &b, &c};
    ld_shape out;
    assert_int_equal(ld_broadcast_shapes(three, 3, &out, NULL, &err), LD_OK);
    ld_shape want = S(3, I64(2), I64(4), I64(5));
    expect_shape(&out, &want);
    assert_int_equal(ld_broadcast_shapes(NULL, 0, &out, NULL, &err), LD_OK);
    assert_int_equal(out.rank, 0);
}

static void test_incompatible_message(void **state)
{
    (void)state;
    ld_error err;
    ld_shape out;
    ld_shape a = S(2, I64(2), I64(3)), b = S(1, I64(4));
    assert_int_equal(ld_broadcast_shape(&a, &b, &out, "node 'add'", &err), LD_ERR_INPUT);
    assert_string_equal(err.message, "node 'add': shapes 2x3 and 4 cannot be broadcast together "
                                     "(axis 1: 3 vs 4)");
    assert_int_equal(ld_broadcast_shape(&a, &b, &out, NULL, &err), LD_ERR_INPUT);
    assert_string_equal(err.message, "shapes 2x3 and 4 cannot be broadcast together (axis 1: 3 "
                                     "vs 4)");
    /* Zero does not broadcast against anything but 0 and 1. */
    ld_shape z = S(1, I64(0)), t = S(1, I64(3));
    assert_int_equal(ld_broadcast_shape(&z, &t, &out, NULL, &err), LD_ERR_INPUT);
    assert_non_null(strstr(err.message, "axis 0: 0 vs 3"));
    /* With three shapes the message names the two that clash, not the first. */
    ld_shape one = S(1, I64(1)), three = S(1, I64(3)), four = S(2, I64(2), I64(4));
    const ld_shape *list[] = {&one, &three, &four};
    assert_int_equal(ld_broadcast_shapes(list, 3, &out, "n", &err), LD_ERR_INPUT);
    assert_string_equal(err.message, "n: shapes 3 and 2x4 cannot be broadcast together (axis 1: "
                                     "3 vs 4)");
}

/* Naive offset of output element `flat` in input `in` broadcast to `out`. */
static int64_t naive_offset(const ld_shape *out, const ld_shape *in, int64_t flat)
{
    int64_t idx[LD_MAX_RANK];
    for (int d = out->rank - 1; d >= 0; d--) {
        idx[d] = flat % out->dims[d];
        flat /= out->dims[d];
    }
    int64_t offset = 0, stride = 1;
    int off = out->rank - in->rank;
    for (int d = in->rank - 1; d >= 0; d--) {
        if (in->dims[d] != 1)
            offset += idx[d + off] * stride;
        stride *= in->dims[d];
    }
    return offset;
}

/* Walks the iterator over out and checks every element's input offsets. */
static void check_iterator(const ld_shape *out, const ld_shape *const *ins, int n)
{
    int64_t total = 1;
    for (int d = 0; d < out->rank; d++)
        total *= out->dims[d];
    ld_broadcast_iter it;
    ld_broadcast_iter_init(&it, out, ins, n);
    int64_t visited = 0, row = 0;
    while (ld_broadcast_iter_next(&it)) {
        /* seeking a fresh iterator to this row gives the walked state, and
           walks on from there the same way */
        ld_broadcast_iter sought;
        ld_broadcast_iter_init(&sought, out, ins, n);
        ld_broadcast_iter_seek(&sought, row++);
        assert_int_equal(sought.out_offset, it.out_offset);
        assert_int_equal(sought.rows_left, it.rows_left);
        for (int i = 0; i < n; i++)
            assert_int_equal(sought.offset[i], it.offset[i]);
        ld_broadcast_iter walked = it;
        bool more = ld_broadcast_iter_next(&walked);
        assert_int_equal(ld_broadcast_iter_next(&sought), more);
        for (int i = 0; more && i < n; i++)
            assert_int_equal(sought.offset[i], walked.offset[i]);
        assert_int_equal(it.out_offset, visited);
        assert_true(it.row_length > 0);
        for (int64_t k = 0; k < it.row_length; k++, visited++) {
            assert_true(visited < total);
            for (int i = 0; i < n; i++) {
                int64_t got = it.offset[i] + k * it.row_stride[i];
                int64_t want = naive_offset(out, ins[i], visited);
                if (got != want) {
                    char o[128], s[128];
                    fail_msg("out %s, input %d (%s), element %lld: offset %lld, expected %lld",
                             ld_shape_format(out, o, sizeof o), i,
                             ld_shape_format(ins[i], s, sizeof s), (long long)visited,
                             (long long)got, (long long)want);
                }
            }
        }
    }
    assert_int_equal(visited, total);
    assert_false(ld_broadcast_iter_next(&it)); /* stays finished */
}

static void test_iterator_against_naive(void **state)
{
    (void)state;
    static const int64_t dim_choices[] = {1, 1, 2, 3, 4, 5, 7, 0};
    uint64_t seed = 2024;
    ld_error err;
    int zero_cases = 0, scalar_cases = 0;
    for (int iter = 0; iter < 4000; iter++) {
        /* A target shape, then each input keeps a suffix of it with some
         * dims set to 1. */
        ld_shape target = {.rank = (int)(ld_splitmix64(&seed) % 6)};
        bool allow_zero = iter % 8 == 0;
        for (int d = 0; d < target.rank; d++)
            target.dims[d] = dim_choices[ld_splitmix64(&seed) % (allow_zero ? 8 : 7)];
        int n = 1 + (int)(ld_splitmix64(&seed) % 4);
        ld_shape shapes[4];
        const ld_shape *ins[4];
        for (int i = 0; i < n; i++) {
            int rank = (int)(ld_splitmix64(&seed) % (uint64_t)(target.rank + 1));
            shapes[i].rank = rank;
            for (int d = 0; d < rank; d++) {
                int64_t t = target.dims[target.rank - rank + d];
                shapes[i].dims[d] = ld_splitmix64(&seed) % 3 == 0 ? 1 : t;
            }
            ins[i] = &shapes[i];
        }
        ld_shape out;
        assert_int_equal(ld_broadcast_shapes(ins, n, &out, NULL, &err), LD_OK);
        int64_t total = 1;
        for (int d = 0; d < out.rank; d++)
            total *= out.dims[d];
        zero_cases += total == 0;
        scalar_cases += out.rank == 0;
        check_iterator(&out, ins, n);
    }
    assert_true(zero_cases > 10);
    assert_true(scalar_cases > 10);
}

static void test_iterator_special_cases(void **state)
{
    (void)state;
    /* Scalar output: one row of one element at offset 0. */
    ld_shape scalar = S(0);
    const ld_shape *one[] = {&scalar};
    ld_broadcast_iter it;
    ld_broadcast_iter_init(&it, &scalar, one, 1);
    assert_true(ld_broadcast_iter_next(&it));
    assert_int_equal(it.row_length, 1);
    assert_int_equal(it.offset[0], 0);
    assert_false(ld_broadcast_iter_next(&it));
    /* Same shapes coalesce into one long row. */
    ld_shape a = S(3, I64(2), I64(3), I64(4));
    const ld_shape *same[] = {&a, &a};
    ld_broadcast_iter_init(&it, &a, same, 2);
    assert_true(ld_broadcast_iter_next(&it));
    assert_int_equal(it.row_length, 24);
    assert_int_equal(it.row_stride[0], 1);
    assert_false(ld_broadcast_iter_next(&it));
    /* A zero-size output has no rows. */
    ld_shape z = S(2, I64(3), I64(0));
    const ld_shape *zs[] = {&z};
    ld_broadcast_iter_init(&it, &z, zs, 1);
    assert_false(ld_broadcast_iter_next(&it));
    /* A bias broadcast along rows: stride 0 along the row, 1 per row. */
    ld_shape m = S(2, I64(3), I64(4)), col = S(2, I64(3), I64(1));
    const ld_shape *mc[] = {&m, &col};
    check_iterator(&m, mc, 2);
    ld_broadcast_iter_init(&it, &m, mc, 2);
    assert_true(ld_broadcast_iter_next(&it));
    assert_int_equal(it.row_length, 4);
    assert_int_equal(it.row_stride[1], 0);
    assert_true(ld_broadcast_iter_next(&it));
    assert_int_equal(it.offset[1], 1);
    assert_int_equal(it.offset[0], 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_result_shapes),
        cmocka_unit_test(test_incompatible_message),
        cmocka_unit_test(test_iterator_against_naive),
        cmocka_unit_test(test_iterator_special_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
