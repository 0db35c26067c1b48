/* layerdiff — names of tolerance modes and error statistics (report.h), shared
 * by the command line, the JSON report and its reader so they cannot drift. */
#include <string.h>

#include "layerdiff/report.h"

static const char *const mode_names[] = {"polygraphy", "allclose"};
static const char *const check_names[] = {"elemwise", "max", "mean", "median", "quantile"};
#define N_MODES ((int)(sizeof mode_names / sizeof mode_names[0]))
#define N_CHECKS ((int)(sizeof check_names / sizeof check_names[0]))

const char *ld_report_tol_mode_name(ld_tol_mode mode)
{
    return (int)mode >= 0 && (int)mode < N_MODES ? mode_names[mode] : "?";
}

bool ld_report_tol_mode_from_name(const char *name, ld_tol_mode *out)
{
    for (int i = 0; name && i < N_MODES; i++)
        if (strcmp(name, mode_names[i]) == 0) {
            *out = (ld_tol_mode)i;
            return true;
        }
    return false;
}

const char *ld_report_check_stat_name(ld_check_stat check)
{
    return (int)check >= 0 && (int)check < N_CHECKS ? check_names[check] : "?";
}

bool ld_report_check_stat_from_name(const char *name, ld_check_stat *out)
{
    for (int i = 0; name && i < N_CHECKS; i++)
        if (strcmp(name, check_names[i]) == 0) {
            *out = (ld_check_stat)i;
            return true;
        }
    return false;
}
