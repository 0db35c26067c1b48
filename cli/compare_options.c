/* layerdiff CLI — the comparison flags (see compare_options.h). */
#include "cli/compare_options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/term.h"

#define DEFAULT_QUANTILE 0.99
#define MAX_TOP 100000

static bool is_stdout(const char *path)
{
    return path && strcmp(path, "-") == 0;
}

FILE *ld_cli_compare_summary_stream(const ld_cli_compare_values *v)
{
    const ld_cli_report_values *r = &v->render;
    bool taken = is_stdout(v->report_json) || is_stdout(r->html) || is_stdout(r->markdown) ||
                 is_stdout(r->junit);
    return taken ? stderr : stdout;
}

const char *ld_cli_compare_first_flag(const ld_cli_compare_values *v)
{
    if (v->atol.n)
        return "--atol";
    if (v->rtol.n)
        return "--rtol";
    if (v->tol_mode)
        return "--tol-mode";
    if (v->check_error_stat)
        return "--check-error-stat";
    if (v->error_quantile)
        return "--error-quantile";
    if (v->nan_is_error)
        return "--nan-is-error";
    if (v->culprit_ulp)
        return "--culprit-ulp";
    if (v->report_json)
        return "--report-json";
    if (v->verbose)
        return "--verbose";
    if (v->top)
        return "--top";
    return ld_cli_report_first_flag(&v->render);
}

/* A finite number in [lo, hi] (lo excluded when lo_open). */
static ld_status parse_number(const char *cmd, const char *option, const char *text, double lo,
                              double hi, bool lo_open, double *out, ld_error *err)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    bool ok = errno == 0 && end != text && *end == '\0' && isfinite(v) && v <= hi &&
              (lo_open ? v > lo : v >= lo);
    if (!ok && lo_open)
        return ld_cli_usage_error(err, cmd, "%s expects a number > %g, got '%s'", option, lo,
                                  text);
    if (!ok)
        return ld_cli_usage_error(err, cmd, "%s expects a number in [%g, %g], got '%s'",
                                  option, lo, hi, text);
    *out = v;
    return LD_OK;
}

static ld_status add_tolerances(const char *cmd, const ld_cli_list *list, bool is_atol,
                                ld_tolerance_spec *spec, ld_error *err)
{
    for (int i = 0; i < list->n; i++) {
        ld_status st = ld_tolerance_spec_add(spec, is_atol, list->items[i], err);
        if (st == LD_ERR_USAGE) {
            char message[LD_ERROR_MESSAGE_SIZE];
            snprintf(message, sizeof message, "%s", err->message);
            return ld_cli_usage_error(err, cmd, "%s", message);
        }
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

static ld_status set_rule(const char *cmd, const ld_cli_compare_values *v,
                          ld_tolerance_spec *spec, ld_error *err)
{
    if (v->tol_mode && !ld_report_tol_mode_from_name(v->tol_mode, &spec->mode))
        return ld_cli_usage_error(err, cmd, "--tol-mode must be polygraphy or allclose, got "
                                  "'%s'", v->tol_mode);
    if (v->check_error_stat && !ld_report_check_stat_from_name(v->check_error_stat,
                                                               &spec->check))
        return ld_cli_usage_error(err, cmd, "--check-error-stat must be elemwise, max, mean, "
                                  "median or quantile, got '%s'", v->check_error_stat);
    spec->quantile = DEFAULT_QUANTILE;
    if (v->error_quantile) {
        if (spec->check != LD_CHECK_QUANTILE)
            return ld_cli_usage_error(err, cmd, "--error-quantile applies to "
                                      "--check-error-stat quantile only");
        ld_status st = parse_number(cmd, "--error-quantile", v->error_quantile, 0, 1, false,
                                    &spec->quantile, err);
        if (st != LD_OK)
            return st;
    }
    spec->nan_is_error = v->nan_is_error;
    return LD_OK;
}

static ld_status set_summary(const char *cmd, const ld_cli_compare_values *v,
                             ld_summary_options *sopts, ld_error *err)
{
    *sopts = (ld_summary_options){.verbose = v->verbose};
    sopts->color = ld_term_use_color(ld_cli_compare_summary_stream(v));
    if (v->top) {
        char *end = NULL;
        errno = 0;
        long n = strtol(v->top, &end, 10);
        if (errno != 0 || end == v->top || *end != '\0' || n < 1 || n > MAX_TOP)
            return ld_cli_usage_error(err, cmd, "--top expects a count from 1 to %d, got '%s'",
                                      MAX_TOP, v->top);
        sopts->top = (int)n;
    }
    if (v->report_json && !*v->report_json)
        return ld_cli_usage_error(err, cmd, "--report-json needs a file name ('-' for "
                                  "standard output)");
    const ld_cli_report_values *r = &v->render;
    if (is_stdout(v->report_json) && (is_stdout(r->html) || is_stdout(r->markdown) ||
                                      is_stdout(r->junit)))
        return ld_cli_usage_error(err, cmd, "--report-json and a report flag both write to "
                                  "standard output");
    return ld_cli_report_check(cmd, r, err);
}

ld_status ld_cli_compare_setup(const char *cmd, const ld_cli_compare_values *v,
                               ld_compare_options *copts, ld_summary_options *sopts,
                               ld_error *err)
{
    memset(copts, 0, sizeof *copts);
    ld_status st = add_tolerances(cmd, &v->atol, true, &copts->tol, err);
    if (st == LD_OK)
        st = add_tolerances(cmd, &v->rtol, false, &copts->tol, err);
    if (st == LD_OK)
        st = set_rule(cmd, v, &copts->tol, err);
    if (st == LD_OK && v->culprit_ulp)
        st = parse_number(cmd, "--culprit-ulp", v->culprit_ulp, 0, 1e300, true,
                          &copts->culprit_ulp, err);
    if (st == LD_OK)
        st = set_summary(cmd, v, sopts, err);
    if (st != LD_OK)
        ld_cli_compare_options_clear(copts);
    return st;
}

void ld_cli_compare_options_clear(ld_compare_options *copts)
{
    ld_tolerance_spec_free(&copts->tol);
    memset(copts, 0, sizeof *copts);
}
