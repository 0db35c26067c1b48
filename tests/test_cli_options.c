/* Unit tests for the CLI helpers: option parsing (cli/options.c), text and
 * JSON formatting (cli/format.c) and the colour decision (cli/term.c).
 * The CLI is not part of the library, so its sources are compiled in here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/format.h"
#include "cli/options.h"
#include "cli/term.h"

/* --- option parsing ------------------------------------------------------------ */

typedef struct parsed {
    bool json;
    const char *out;
    int64_t seed;
    double tol;
} parsed;

static parsed values;
static const ld_cli_option table[] = {
    {"json", 'j', LD_OPT_FLAG, &values.json, NULL, "print JSON"},
    {"output", 'o', LD_OPT_STRING, &values.out, "FILE", "write here"},
    {"seed", 0, LD_OPT_INT, &values.seed, "N", "input seed"},
    {"tolerance", 0, LD_OPT_DOUBLE, &values.tol, "X", "allowed error"},
};
#define N_TABLE ((int)(sizeof table / sizeof table[0]))

/* Parses a NULL-terminated argument list (argv[0] = "cmd") into values. */
static ld_status parse(ld_cli_args *args, ld_error *err, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    values = (parsed){.seed = -7, .tol = -1.0};
    ld_error_clear(err);
    return ld_cli_parse("cmd", argc, argv, table, N_TABLE, args, err);
}

static void test_parse_all_kinds(void **state)
{
    (void)state;
    char *argv[] = {"cmd", "a.onnx", "--json", "-o", "x.h5", "--seed=42", "--tolerance", "1e-3",
                    "b.onnx", NULL};
    ld_cli_args args;
    ld_error err;
    assert_int_equal(parse(&args, &err, argv), LD_OK);
    assert_true(values.json);
    assert_string_equal(values.out, "x.h5");
    assert_int_equal(values.seed, 42);
    assert_true(values.tol > 0.999e-3 && values.tol < 1.001e-3);
    assert_false(args.help);
    /* getopt_long permutes: positionals keep their order after the options. */
    assert_int_equal(args.n_positional, 2);
    assert_string_equal(args.positional[0], "a.onnx");
    assert_string_equal(args.positional[1], "b.onnx");
}

static void test_parse_defaults_untouched(void **state)
{
    (void)state;
    char *argv[] = {"cmd", NULL};
    ld_cli_args args;
    ld_error err;
    assert_int_equal(parse(&args, &err, argv), LD_OK);
    assert_false(values.json);
    assert_null(values.out);
    assert_int_equal(values.seed, -7);
    assert_int_equal(args.n_positional, 0);
}

static void test_parse_help_and_double_dash(void **state)
{
    (void)state;
    char *argv[] = {"cmd", "-h", "--", "--json", NULL};
    ld_cli_args args;
    ld_error err;
    assert_int_equal(parse(&args, &err, argv), LD_OK);
    assert_true(args.help);
    assert_false(values.json); /* after "--" it is a positional */
    assert_int_equal(args.n_positional, 1);
    assert_string_equal(args.positional[0], "--json");

    char *argv2[] = {"cmd", "x", "--help", NULL};
    assert_int_equal(parse(&args, &err, argv2), LD_OK);
    assert_true(args.help);
}

/* Expects a usage error whose message is `what` plus the pointer to the help. */
static void expect_usage_error(char **argv, const char *what)
{
    ld_cli_args args;
    ld_error err;
    char message[512];
    snprintf(message, sizeof message, "%s (see 'layerdiff cmd --help')", what);
    assert_int_equal(parse(&args, &err, argv), LD_ERR_USAGE);
    assert_int_equal(err.status, LD_ERR_USAGE);
    assert_string_equal(err.message, message);
}

static void test_parse_errors(void **state)
{
    (void)state;
    char *unknown_long[] = {"cmd", "--foo", NULL};
    expect_usage_error(unknown_long, "unknown option '--foo'");
    char *unknown_long_value[] = {"cmd", "--foo=3", NULL};
    expect_usage_error(unknown_long_value, "unknown option '--foo'");
    char *unknown_short[] = {"cmd", "-x", NULL};
    expect_usage_error(unknown_short, "unknown option '-x'");
    char *flag_value[] = {"cmd", "--json=1", NULL};
    expect_usage_error(flag_value, "option '--json' takes no value");
    char *missing_long[] = {"cmd", "--output", NULL};
    expect_usage_error(missing_long, "option '--output' needs a value");
    char *missing_short[] = {"cmd", "-o", NULL};
    expect_usage_error(missing_short, "option '-o' needs a value");
    char *bad_int[] = {"cmd", "--seed", "12x", NULL};
    expect_usage_error(bad_int, "option '--seed' expects an integer, got '12x'");
    char *big_int[] = {"cmd", "--seed", "99999999999999999999", NULL};
    expect_usage_error(big_int, "option '--seed' expects an integer, got '99999999999999999999'");
    char *bad_double[] = {"cmd", "--tolerance", "nan", NULL};
    expect_usage_error(bad_double, "option '--tolerance' expects a number, got 'nan'");
    char *empty_double[] = {"cmd", "--tolerance=", NULL};
    expect_usage_error(empty_double, "option '--tolerance' expects a number, got ''");
}

static void test_parse_twice_resets_getopt(void **state)
{
    (void)state;
    char *first[] = {"cmd", "--json", "a", NULL};
    char *second[] = {"cmd", "b", "--seed", "3", NULL};
    ld_cli_args args;
    ld_error err;
    assert_int_equal(parse(&args, &err, first), LD_OK);
    assert_int_equal(parse(&args, &err, second), LD_OK);
    assert_false(values.json);
    assert_int_equal(values.seed, 3);
    assert_int_equal(args.n_positional, 1);
    assert_string_equal(args.positional[0], "b");
}

static void test_expect_positionals(void **state)
{
    (void)state;
    char *argv[] = {"a", "b", NULL};
    ld_cli_args none = {0}, two = {.n_positional = 2, .positional = argv};
    ld_error err;
    assert_int_equal(ld_cli_expect_positionals("inspect", &none, 1, 1, "FILE", &err),
                     LD_ERR_USAGE);
    assert_string_equal(err.message, "missing FILE (see 'layerdiff inspect --help')");
    assert_int_equal(ld_cli_expect_positionals("inspect", &two, 1, 1, "FILE", &err),
                     LD_ERR_USAGE);
    assert_string_equal(err.message, "unexpected argument 'b' (see 'layerdiff inspect --help')");
    assert_int_equal(ld_cli_expect_positionals("inspect", &two, 1, -1, "FILE", &err), LD_OK);
}

static void test_print_options(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ld_cli_print_options(f, table, N_TABLE);
    fclose(f);
    assert_non_null(strstr(buf, "Options:\n"));
    assert_non_null(strstr(buf, "  -j, --json "));
    assert_non_null(strstr(buf, "  -o, --output FILE "));
    assert_non_null(strstr(buf, "      --seed N "));
    assert_non_null(strstr(buf, "  -h, --help "));
    free(buf);
}

/* --- formatting -------------------------------------------------------------------- */

static void test_fmt_count_and_bytes(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(ld_fmt_count(0, b, sizeof b), "0");
    assert_string_equal(ld_fmt_count(999, b, sizeof b), "999");
    assert_string_equal(ld_fmt_count(1000, b, sizeof b), "1,000");
    assert_string_equal(ld_fmt_count(1234567, b, sizeof b), "1,234,567");
    assert_string_equal(ld_fmt_count(-1234, b, sizeof b), "-1,234");
    assert_string_equal(ld_fmt_count(INT64_MIN, b, sizeof b), "-9,223,372,036,854,775,808");
    assert_string_equal(ld_fmt_bytes(0, b, sizeof b), "0 B");
    assert_string_equal(ld_fmt_bytes(1023, b, sizeof b), "1023 B");
    assert_string_equal(ld_fmt_bytes(1024, b, sizeof b), "1.0 KiB");
    assert_string_equal(ld_fmt_bytes(36968, b, sizeof b), "36.1 KiB");
    assert_string_equal(ld_fmt_bytes(3 * 1024 * 1024, b, sizeof b), "3.0 MiB");
    assert_string_equal(ld_fmt_bytes(INT64_MAX, b, sizeof b), "8.0 EiB");
}

static void test_fmt_shapes(void **state)
{
    (void)state;
    char b[128];
    ld_dim dims[3] = {{-1, "batch"}, {16, NULL}, {-1, NULL}};
    ld_type_info t = {.kind = LD_TYPE_TENSOR, .dtype = LD_DTYPE_FLOAT32, .has_shape = true,
                      .rank = 3, .dims = dims};
    assert_string_equal(ld_fmt_type_shape(&t, b, sizeof b), "batch x 16 x ?");
    t.rank = 0;
    assert_string_equal(ld_fmt_type_shape(&t, b, sizeof b), "scalar");
    t.has_shape = false;
    assert_string_equal(ld_fmt_type_shape(&t, b, sizeof b), "unknown");
    /* Truncation keeps the buffer terminated. */
    t = (ld_type_info){.has_shape = true, .rank = 3, .dims = dims};
    assert_string_equal(ld_fmt_type_shape(&t, b, 8), "batch x");

    ld_shape s = {.rank = 4, .dims = {1, 3, 32, 32}};
    assert_string_equal(ld_fmt_shape(&s, b, sizeof b), "1 x 3 x 32 x 32");
    s.rank = 0;
    assert_string_equal(ld_fmt_shape(&s, b, sizeof b), "scalar");

    json_t *j = ld_json_type_shape(&t);
    char *text = json_dumps(j, JSON_COMPACT);
    assert_string_equal(text, "[\"batch\",16,null]");
    free(text);
    json_decref(j);
    t.has_shape = false;
    j = ld_json_type_shape(&t);
    assert_true(json_is_null(j));
    json_decref(j);
}

static void test_json_string_repairs_utf8(void **state)
{
    (void)state;
    json_t *ok = ld_json_string("/encoder/layer.0/ätt");
    assert_string_equal(json_string_value(ok), "/encoder/layer.0/ätt");
    json_decref(ok);
    json_t *fixed = ld_json_string("a\xff" "b\xc3");
    assert_non_null(fixed);
    assert_string_equal(json_string_value(fixed), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
    json_decref(fixed);
    json_t *overlong = ld_json_string("\xc0\xaf");
    assert_string_equal(json_string_value(overlong), "\xEF\xBF\xBD\xEF\xBF\xBD");
    json_decref(overlong);
    json_t *empty = ld_json_string(NULL);
    assert_string_equal(json_string_value(empty), "");
    json_decref(empty);
}

static void test_table_aligns_and_sanitizes(void **state)
{
    (void)state;
    ld_error err;
    ld_table *t = ld_table_create(3);
    assert_non_null(t);
    ld_table_align_right(t, 2);
    const char *cells[] = {"name", "op", "n", "a", "Conv", "12", "b\033[31m", "Ä", "3"};
    for (int i = 0; i < 9; i++)
        assert_int_equal(ld_table_add(t, cells[i], &err), LD_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ld_table_print(t, f, "> ", true, false);
    fclose(f);
    assert_string_equal(buf, "> name    op     n\n"
                             "> a       Conv  12\n"
                             "> b?[31m  Ä      3\n");
    free(buf);
    ld_table_destroy(t);
}

/* --- colour ---------------------------------------------------------------------------- */

static void test_color_off_for_files_and_no_color(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    unsetenv("NO_COLOR");
    assert_false(ld_term_use_color(f)); /* not a terminal */
    fclose(f);
    assert_string_equal(ld_term_style_code(false, LD_STYLE_BOLD), "");
    assert_string_equal(ld_term_style_code(true, LD_STYLE_BOLD), "\033[1m");
    assert_string_equal(ld_term_style_code(true, LD_STYLE_RESET), "\033[0m");
}

/* Shared option groups: the inputs' checks, list joining, and the command
 * line a report records (shell words that reproduce the command). */
static void test_shared_helpers(void **state)
{
    (void)state;
    ld_error err;
    ld_cli_input_values iv = {.threads = 0, .seed = -1};
    assert_int_equal(ld_cli_input_values_check("run", &iv, &err), LD_OK);
    iv.threads = 4097;
    assert_int_equal(ld_cli_input_values_check("run", &iv, &err), LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "--threads must be between 0 and 4096, got 4097"));
    iv.threads = 1;
    iv.loads = (ld_cli_list){1, {"in.npy"}};
    iv.seed = 3;
    assert_int_equal(ld_cli_input_values_check("bisect", &iv, &err), LD_ERR_USAGE);
    assert_non_null(strstr(err.message, "--load-inputs cannot be combined with --seed"));

    char *joined = NULL;
    ld_cli_list empty = {0}, two = {2, {"a:[0,1]", "b:[2,3]"}};
    assert_int_equal(ld_cli_list_join(&empty, &joined, &err), LD_OK);
    assert_null(joined);
    assert_int_equal(ld_cli_list_join(&two, &joined, &err), LD_OK);
    assert_string_equal(joined, "a:[0,1],b:[2,3]");
    free(joined);

    char *argv[] = {"run", "m.onnx", "--atol", "/head/*:1e-2", "--name", "it's", ""};
    char *line = ld_cli_command_line(7, argv);
    assert_string_equal(line, "layerdiff run m.onnx --atol '/head/*:1e-2' --name 'it'\\''s' ''");
    free(line);
    char bytes[32];
    assert_string_equal(ld_fmt_bytes(-5, bytes, sizeof bytes), "-5 B");
    assert_string_equal(ld_fmt_bytes(3 << 20, bytes, sizeof bytes), "3.0 MiB");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_all_kinds),
        cmocka_unit_test(test_parse_defaults_untouched),
        cmocka_unit_test(test_parse_help_and_double_dash),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_twice_resets_getopt),
        cmocka_unit_test(test_expect_positionals),
        cmocka_unit_test(test_print_options),
        cmocka_unit_test(test_fmt_count_and_bytes),
        cmocka_unit_test(test_fmt_shapes),
        cmocka_unit_test(test_json_string_repairs_utf8),
        cmocka_unit_test(test_table_aligns_and_sanitizes),
        cmocka_unit_test(test_color_off_for_files_and_no_color),
        cmocka_unit_test(test_shared_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
