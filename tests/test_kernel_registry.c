/* Unit tests for the kernel registry: every family table sorted and unique,
 * lookup by opset picks the newest row not newer than the model's opset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "layerdiff/kernel.h"

static int compare_keys(const ld_kernel *a, const ld_kernel *b)
{
    int c = strcmp(a->domain, b->domain);
    if (c == 0)
        c = strcmp(a->op_type, b->op_type);
    if (c == 0)
        c = (a->since_version > b->since_version) - (a->since_version < b->since_version);
    return c;
}

static void test_table_sorted_unique_complete(void **state)
{
    (void)state;
    int n = 0;
    const ld_kernel *rows = ld_kernel_table(&n);
    assert_non_null(rows);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        assert_non_null(rows[i].domain);
        assert_non_null(rows[i].op_type);
        assert_true(rows[i].since_version >= 1);
        assert_non_null(rows[i].infer);
        assert_non_null(rows[i].compute);
        if (i > 0 && compare_keys(&rows[i - 1], &rows[i]) >= 0)
            fail_msg("registry rows out of order or duplicated: %s %s %d / %s %s %d",
                     rows[i - 1].domain, rows[i - 1].op_type, rows[i - 1].since_version,
                     rows[i].domain, rows[i].op_type, rows[i].since_version);
    }
}

static void test_lookup_by_opset(void **state)
{
    (void)state;
    const ld_kernel *k = ld_kernel_find("", "Identity", 13);
    assert_non_null(k);
    assert_string_equal(k->op_type, "Identity");
    assert_true(k->since_version <= 13);
    assert_ptr_equal(ld_kernel_find("ai.onnx", "Identity", 13), k);
    assert_null(ld_kernel_find("", "NoSuchOp", 13));
    assert_null(ld_kernel_find("com.example", "Identity", 13));
    /* Nothing implements an op before its first version. */
    assert_null(ld_kernel_find("", "Identity", 0));
    /* The newest row <= the opset wins. */
    int n = 0;
    const ld_kernel *rows = ld_kernel_table(&n);
    for (int i = 0; i + 1 < n; i++) {
        if (strcmp(rows[i].domain, rows[i + 1].domain) != 0 ||
            strcmp(rows[i].op_type, rows[i + 1].op_type) != 0)
            continue;
        const ld_kernel *older = ld_kernel_find(rows[i].domain, rows[i].op_type,
                                                rows[i + 1].since_version - 1);
        const ld_kernel *newer = ld_kernel_find(rows[i].domain, rows[i].op_type,
                                                rows[i + 1].since_version);
        assert_ptr_equal(older, &rows[i]);
        assert_ptr_equal(newer, &rows[i + 1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_sorted_unique_complete),
        cmocka_unit_test(test_lookup_by_opset),
    };
    return cmocka_run_group_tests_name("kernel_registry", tests, NULL, NULL);
}
