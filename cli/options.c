/* layerdiff CLI — table-driven getopt_long wrapper (see options.h). */
#include "cli/options.h"

#include <errno.h>
#include <inttypes.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long val for an option without a short alias: above any char. */
#define LONG_ONLY_BASE 256

ld_status ld_cli_usage_error(ld_error *err, const char *cmd, const char *fmt, ...)
{
    char what[LD_ERROR_MESSAGE_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (cmd && *cmd)
        return ld_error_set(err, LD_ERR_USAGE, "%s (see 'layerdiff %s --help')", what, cmd);
    return ld_error_set(err, LD_ERR_USAGE, "%s (see 'layerdiff --help')", what);
}

static int option_val(const ld_cli_option *opt, int index)
{
    return opt->short_name ? (unsigned char)opt->short_name : LONG_ONLY_BASE + index;
}

static const ld_cli_option *find_by_val(const ld_cli_option *opts, int n_opts, int val)
{
    for (int i = 0; i < n_opts; i++)
        if (option_val(&opts[i], i) == val)
            return &opts[i];
    return NULL;
}

/* "--name=value" or "--name" -> whether opts has a long option "name". */
static bool is_known_long(const ld_cli_option *opts, int n_opts, const char *text)
{
    size_t len = strcspn(text, "=");
    for (int i = 0; i < n_opts; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, text, len) == 0)
            return true;
    return strlen("help") == len && strncmp("help", text, len) == 0;
}

/* The message for getopt_long's '?': unknown option, or a value given to a flag. */
static ld_status bad_option(const char *cmd, char **argv, const ld_cli_option *opts,
                            int n_opts, ld_error *err)
{
    const char *text = optind > 0 ? argv[optind - 1] : "";
    if (strncmp(text, "--", 2) == 0) {
        int len = (int)strcspn(text, "=");
        if (text[len] == '=' && is_known_long(opts, n_opts, text + 2))
            return ld_cli_usage_error(err, cmd, "option '%.*s' takes no value", len, text);
        return ld_cli_usage_error(err, cmd, "unknown option '%.*s'", len, text);
    }
    if (optopt > 0 && optopt < LONG_ONLY_BASE)
        return ld_cli_usage_error(err, cmd, "unknown option '-%c'", optopt);
    return ld_cli_usage_error(err, cmd, "unknown option '%s'", text);
}

static ld_status store_value(const char *cmd, const ld_cli_option *opt, const char *value,
                             ld_error *err)
{
    char *end = NULL;
    switch (opt->kind) {
    case LD_OPT_FLAG:
        *(bool *)opt->target = true;
        return LD_OK;
    case LD_OPT_STRING:
        *(const char **)opt->target = value;
        return LD_OK;
    case LD_OPT_INT: {
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (errno != 0 || end == value || *end != '\0')
            return ld_cli_usage_error(err, cmd, "option '--%s' expects an integer, got '%s'",
                                      opt->name, value);
        *(int64_t *)opt->target = (int64_t)v;
        return LD_OK;
    }
    case LD_OPT_LIST: {
        ld_cli_list *list = opt->target;
        if (list->n == LD_CLI_LIST_MAX)
            return ld_cli_usage_error(err, cmd, "option '--%s' given more than %d times",
                                      opt->name, LD_CLI_LIST_MAX);
        list->items[list->n++] = value;
        return LD_OK;
    }
    case LD_OPT_DOUBLE: {
        errno = 0;
        double v = strtod(value, &end);
        if (errno != 0 || end == value || *end != '\0' || !isfinite(v))
            return ld_cli_usage_error(err, cmd, "option '--%s' expects a number, got '%s'",
                                      opt->name, value);
        *(double *)opt->target = v;
        return LD_OK;
    }
    }
    return ld_error_set(err, LD_ERR_INTERNAL, "option '--%s' has an unknown kind", opt->name);
}

/* Builds getopt_long's tables: longs (n_opts + help + terminator) and the
 * short string (":" first so a missing value is reported as ':'). */
static ld_status build_tables(const ld_cli_option *opts, int n_opts, struct option **longs_out,
                              char **shorts_out, ld_error *err)
{
    struct option *longs = calloc((size_t)n_opts + 2, sizeof *longs);
    char *shorts = malloc((size_t)n_opts * 2 + 3);
    if (!longs || !shorts) {
        free(longs);
        free(shorts);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory parsing options");
    }
    size_t s = 0;
    shorts[s++] = ':';
    shorts[s++] = 'h';
    for (int i = 0; i < n_opts; i++) {
        bool has_value = opts[i].kind != LD_OPT_FLAG;
        longs[i] = (struct option){opts[i].name, has_value ? required_argument : no_argument,
                                   NULL, option_val(&opts[i], i)};
        if (opts[i].short_name) {
            shorts[s++] = opts[i].short_name;
            if (has_value)
                shorts[s++] = ':';
        }
    }
    shorts[s] = '\0';
    longs[n_opts] = (struct option){"help", no_argument, NULL, 'h'};
    *longs_out = longs;
    *shorts_out = shorts;
    return LD_OK;
}

ld_status ld_cli_parse(const char *cmd, int argc, char **argv, const ld_cli_option *opts,
                       int n_opts, ld_cli_args *out, ld_error *err)
{
    struct option *longs = NULL;
    char *shorts = NULL;
    *out = (ld_cli_args){0};
    ld_status st = build_tables(opts, n_opts, &longs, &shorts, err);
    if (st != LD_OK)
        goto out;

    optind = 0; /* glibc: full re-initialisation, so parsing can run more than once */
    opterr = 0; /* we print our own one-line errors */
    int c;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (c == 'h') {
            out->help = true;
        } else if (c == '?') {
            st = bad_option(cmd, argv, opts, n_opts, err);
            goto out;
        } else if (c == ':') {
            const char *text = argv[optind - 1];
            st = ld_cli_usage_error(err, cmd, "option '%s' needs a value", text);
            goto out;
        } else {
            const ld_cli_option *opt = find_by_val(opts, n_opts, c);
            if (!opt) {
                st = ld_error_set(err, LD_ERR_INTERNAL, "getopt returned unknown option %d", c);
                goto out;
            }
            st = store_value(cmd, opt, optarg, err);
            if (st != LD_OK)
                goto out;
        }
    }
    out->positional = argv + optind;
    out->n_positional = argc - optind;
out:
    free(longs);
    free(shorts);
    return st;
}

ld_status ld_cli_expect_positionals(const char *cmd, const ld_cli_args *args, int min,
                                    int max, const char *what, ld_error *err)
{
    if (args->n_positional < min)
        return ld_cli_usage_error(err, cmd, "missing %s", what);
    if (max >= 0 && args->n_positional > max)
        return ld_cli_usage_error(err, cmd, "unexpected argument '%s'",
                                  args->positional[max]);
    return LD_OK;
}

static void print_option(FILE *out, char short_name, const char *name, const char *metavar,
                         const char *help)
{
    char left[96];
    int n = snprintf(left, sizeof left, "%c%c%s--%s%s%s", short_name ? '-' : ' ',
                     short_name ? short_name : ' ', short_name ? ", " : "  ", name,
                     metavar ? " " : "", metavar ? metavar : "");
    if (n < 0)
        return;
    fprintf(out, "  %-26s %s\n", left, help ? help : "");
}

void ld_cli_print_options(FILE *out, const ld_cli_option *opts, int n_opts)
{
    fprintf(out, "Options:\n");
    for (int i = 0; i < n_opts; i++)
        print_option(out, opts[i].short_name, opts[i].name, opts[i].metavar, opts[i].help);
    print_option(out, 'h', "help", NULL, "show this help and exit");
}

ld_status ld_cli_list_join(const ld_cli_list *list, char **out, ld_error *err)
{
    *out = NULL;
    if (list->n == 0)
        return LD_OK;
    size_t len = 1;
    for (int i = 0; i < list->n; i++)
        len += strlen(list->items[i]) + 1;
    char *s = calloc(1, len);
    if (!s)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < list->n; i++) {
        if (i)
            strcat(s, ",");
        strcat(s, list->items[i]);
    }
    *out = s;
    return LD_OK;
}

ld_status ld_cli_input_values_check(const char *cmd, const ld_cli_input_values *iv,
                                    ld_error *err)
{
    if (iv->threads < 0 || iv->threads > 4096)
        return ld_cli_usage_error(err, cmd, "--threads must be between 0 and 4096, got %" PRId64,
                                  iv->threads);
    if (iv->seed < -1)
        return ld_cli_usage_error(err, cmd, "--seed must not be negative, got %" PRId64,
                                  iv->seed);
    if (iv->loads.n && (iv->seed >= 0 || iv->ranges.n))
        return ld_cli_usage_error(err, cmd, "--load-inputs cannot be combined with --seed or "
                                  "--val-range (those describe generated inputs)");
    return LD_OK;
}
