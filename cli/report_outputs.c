/* layerdiff CLI — the report files (see report_outputs.h). */
#include "cli/report_outputs.h"

#include <string.h>

bool ld_cli_report_any(const ld_cli_report_values *v)
{
    return v->html || v->markdown || v->junit;
}

const char *ld_cli_report_first_flag(const ld_cli_report_values *v)
{
    if (v->html)
        return "--html";
    if (v->markdown)
        return "--markdown";
    if (v->junit)
        return "--junit";
    return v->junit_layers ? "--junit-layers" : NULL;
}

ld_status ld_cli_report_check(const char *cmd, const ld_cli_report_values *v, ld_error *err)
{
    if (v->junit_layers && !v->junit)
        return ld_cli_usage_error(err, cmd, "--junit-layers needs --junit FILE");
    const char *paths[3] = {v->html, v->markdown, v->junit};
    static const char *const flags[3] = {"--html", "--markdown", "--junit"};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (paths[i] && paths[j] && strcmp(paths[i], paths[j]) == 0)
                return ld_cli_usage_error(err, cmd, "%s and %s both write to '%s'", flags[i],
                                          flags[j], paths[i]);
    return LD_OK;
}

ld_status ld_cli_report_write(const ld_cli_report_values *v, const ld_report *r, int top,
                              ld_error *err)
{
    ld_render_options opts = {.junit_layers = v->junit_layers, .top = top};
    ld_status st = LD_OK;
    if (v->html)
        st = ld_report_render_file(r, LD_REPORT_HTML, &opts, v->html, err);
    if (st == LD_OK && v->markdown)
        st = ld_report_render_file(r, LD_REPORT_MARKDOWN, &opts, v->markdown, err);
    if (st == LD_OK && v->junit)
        st = ld_report_render_file(r, LD_REPORT_JUNIT, &opts, v->junit, err);
    return st;
}

ld_status ld_cli_report_write_session(const ld_cli_report_values *v,
                                      const ld_compare_session *s,
                                      const ld_report_context *ctx, ld_error *err)
{
    if (!ld_cli_report_any(v))
        return LD_OK;
    ld_report *r = NULL;
    ld_status st = ld_report_from_session(s, ctx, &r, err);
    if (st == LD_OK)
        st = ld_cli_report_write(v, r, 0, err);
    ld_report_free(r);
    return st;
}
