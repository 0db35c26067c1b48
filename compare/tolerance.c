/* layerdiff — tolerances from the command line: --atol / --rtol with
 * per-tensor glob overrides (compare.h; defaults in docs/metrics.md). */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/compare.h"
#include "layerdiff/round.h"

/* A tolerance value: the whole text is a finite number >= 0. */
static bool parse_value(const char *text, double *out)
{
    char *end = NULL;
    if (!*text || strchr(" \t\n", *text))
        return false;
    errno = 0;
    double v = strtod(text, &end);
    if (errno == ERANGE && v != 0) /* overflow; underflow to 0 or a tiny value is fine */
        return false;
    if (*end != '\0' || !isfinite(v) || !(v >= 0))
        return false;
    *out = v == 0 ? 0.0 : v; /* "-0" is 0 */
    return true;
}

ld_status ld_tolerance_spec_add(ld_tolerance_spec *spec, bool is_atol, const char *arg,
                                ld_error *err)
{
    const char *option = is_atol ? "--atol" : "--rtol";
    if (!arg)
        arg = "";
    /* The value follows the last ':', so patterns may hold colons (TF-style "x:0"). */
    const char *colon = strrchr(arg, ':');
    const char *value_text = colon ? colon + 1 : arg;
    double value;
    if (!parse_value(value_text, &value))
        return ld_error_set(err, LD_ERR_USAGE,
                            "%s '%s': '%s' is not a finite number >= 0 (expected VALUE or "
                            "PATTERN:VALUE)",
                            option, arg, value_text);
    if (!colon) {
        if (is_atol) {
            spec->atol = value;
            spec->atol_set = true;
        } else {
            spec->rtol = value;
            spec->rtol_set = true;
        }
        return LD_OK;
    }
    size_t pattern_len = (size_t)(colon - arg);
    if (pattern_len == 0)
        return ld_error_set(err, LD_ERR_USAGE, "%s '%s': empty tensor name pattern before ':'",
                            option, arg);
    ld_tolerance_override **list = is_atol ? &spec->atol_overrides : &spec->rtol_overrides;
    int *count = is_atol ? &spec->n_atol : &spec->n_rtol;
    ld_tolerance_override *grown = realloc(*list, (size_t)(*count + 1) * sizeof *grown);
    if (!grown)
        return ld_error_set(err, LD_ERR_NOMEM, "%s '%s': out of memory", option, arg);
    *list = grown;
    char *pattern = strndup(arg, pattern_len);
    if (!pattern)
        return ld_error_set(err, LD_ERR_NOMEM, "%s '%s': out of memory", option, arg);
    grown[*count].pattern = pattern;
    grown[*count].value = value;
    (*count)++;
    return LD_OK;
}

static void free_overrides(ld_tolerance_override **list, int *count)
{
    for (int i = 0; i < *count; i++)
        free((*list)[i].pattern);
    free(*list);
    *list = NULL;
    *count = 0;
}

void ld_tolerance_spec_free(ld_tolerance_spec *spec)
{
    if (!spec)
        return;
    free_overrides(&spec->atol_overrides, &spec->n_atol);
    free_overrides(&spec->rtol_overrides, &spec->n_rtol);
}

double ld_tolerance_default(ld_precision precision)
{
    /* fp32: Polygraphy's default; reduced precision: ten unit roundoffs, so a
       layer passes with a few roundings' worth of error and no more */
    if (precision == LD_PRECISION_FP16 || precision == LD_PRECISION_TF32 ||
        precision == LD_PRECISION_BF16)
        return 10.0 * ld_precision_unit_roundoff(precision);
    return 1e-5;
}

/* The value of the last override whose pattern matches name, if any. */
static bool last_match(const ld_tolerance_override *list, int count, const char *name,
                       double *value)
{
    for (int i = count - 1; i >= 0; i--) {
        if (fnmatch(list[i].pattern, name, 0) == 0) {
            *value = list[i].value;
            return true;
        }
    }
    return false;
}

ld_tolerance ld_tolerance_for(const ld_tolerance_spec *spec, const char *tensor_name,
                              ld_precision precision)
{
    ld_tolerance tol;
    memset(&tol, 0, sizeof tol);
    double fallback = ld_tolerance_default(precision);
    tol.atol = tol.rtol = fallback;
    tol.mode = LD_TOL_POLYGRAPHY;
    tol.check = LD_CHECK_ELEMWISE;
    tol.quantile = 0.5;
    if (!spec)
        return tol;
    if (!tensor_name)
        tensor_name = "";
    tol.mode = spec->mode;
    tol.check = spec->check;
    tol.quantile = spec->quantile;
    tol.nan_is_error = spec->nan_is_error;
    if (!last_match(spec->atol_overrides, spec->n_atol, tensor_name, &tol.atol))
        tol.atol = spec->atol_set ? spec->atol : fallback;
    if (!last_match(spec->rtol_overrides, spec->n_rtol, tensor_name, &tol.rtol))
        tol.rtol = spec->rtol_set ? spec->rtol : fallback;
    return tol;
}
