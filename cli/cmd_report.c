/* `layerdiff report`: re-renders a JSON report (HTML, Markdown, JUnit), and
 * `layerdiff report trend`: lines up nightly reports and flags regressions. */
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/report_outputs.h"
#include "layerdiff/report.h"

#define CMD "report"

static struct {
    ld_cli_report_values out;
    int64_t top;
    double regress_factor;
    bool factor_given;
} report_values;

static const ld_cli_option report_options[] = {
    LD_CLI_REPORT_OPTIONS(report_values.out),
    {"top", 0, LD_OPT_INT, &report_values.top, "N",
     "worst layers listed (Markdown) and charted (HTML); default 10"},
    {"regress-factor", 0, LD_OPT_DOUBLE, &report_values.regress_factor, "F",
     "trend: a metric growing more than F times is a regression (default 2)"},
};
#define N_REPORT_OPTIONS ((int)(sizeof report_options / sizeof report_options[0]))

static void report_help(FILE *out);

static ld_status render_one(const char *path, ld_error *err)
{
    const ld_cli_report_values *v = &report_values.out;
    if (report_values.factor_given)
        return ld_cli_usage_error(err, CMD, "--regress-factor is for 'layerdiff report trend'");
    if (!ld_cli_report_any(v))
        return ld_cli_usage_error(err, CMD, "nothing to write: give --html, --markdown or "
                                  "--junit FILE");
    ld_report *r = NULL;
    ld_status st = ld_report_read_json(path, &r, err);
    if (st == LD_OK)
        st = ld_cli_report_write(v, r, (int)report_values.top, err);
    ld_report_free(r);
    return st;
}

static ld_status render_trend(int n, char **paths, ld_error *err)
{
    const ld_cli_report_values *v = &report_values.out;
    if (n < 1)
        return ld_cli_usage_error(err, CMD, "trend needs one or more REPORT.json files");
    if (v->junit || v->junit_layers)
        return ld_cli_usage_error(err, CMD, "the trend renders as --html or --markdown, not "
                                  "JUnit");
    if (report_values.factor_given && !(report_values.regress_factor > 1))
        return ld_cli_usage_error(err, CMD, "--regress-factor must be above 1, got %g",
                                  report_values.regress_factor);
    ld_trend *t = NULL;
    ld_status st = ld_trend_load((const char *const *)paths, n, report_values.regress_factor,
                                 &t, err);
    if (st == LD_OK && v->html)
        st = ld_trend_render_file(t, LD_REPORT_HTML, v->html, err);
    if (st == LD_OK && v->markdown)
        st = ld_trend_render_file(t, LD_REPORT_MARKDOWN, v->markdown, err);
    if (st == LD_OK) {
        bool to_stdout = (v->html && strcmp(v->html, "-") == 0) ||
                         (v->markdown && strcmp(v->markdown, "-") == 0);
        ld_trend_print_summary(t, to_stdout ? stderr : stdout);
        if (t->n_regressions > 0)
            st = LD_ERR_MISMATCH; /* exit 1; the summary said why */
    }
    ld_trend_free(t);
    return st;
}

static ld_status report_run(int argc, char **argv, ld_error *err)
{
    memset(&report_values, 0, sizeof report_values);
    report_values.regress_factor = -1;
    ld_cli_args args;
    ld_status st = ld_cli_parse(CMD, argc, argv, report_options, N_REPORT_OPTIONS, &args, err);
    if (st != LD_OK)
        return st;
    if (args.help) {
        report_help(stdout);
        return LD_OK;
    }
    report_values.factor_given = report_values.regress_factor != -1;
    if (report_values.top < 0 || report_values.top > 100000)
        return ld_cli_usage_error(err, CMD, "--top must be between 1 and 100000");
    st = ld_cli_report_check(CMD, &report_values.out, err);
    if (st != LD_OK)
        return st;
    if (args.n_positional >= 1 && strcmp(args.positional[0], "trend") == 0)
        return render_trend(args.n_positional - 1, args.positional + 1, err);
    st = ld_cli_expect_positionals(CMD, &args, 1, 1, "REPORT.json (or 'trend' and reports)",
                                   err);
    if (st != LD_OK)
        return st;
    return render_one(args.positional[0], err);
}

static void report_help(FILE *out)
{
    fprintf(out,
            "Usage: layerdiff report REPORT.json [--html FILE] [--markdown FILE]\n"
            "                        [--junit FILE [--junit-layers]] [--top N]\n"
            "       layerdiff report trend R1.json R2.json ... [--html FILE] [--markdown FILE]\n"
            "                        [--regress-factor F]\n"
            "\n"
            "Renders a JSON report written by `run` or `compare` (--report-json) for\n"
            "people and CI; `run` and `compare` take the same flags and render directly.\n"
            "  --html      one self-contained page (no network access): verdict and\n"
            "              configuration, graph outputs, first divergent / origin layers,\n"
            "              per-layer error charts (log scale, tolerance line), the error\n"
            "              distribution of the worst layers, every tensor in a table that\n"
            "              sorts and filters. Prints well.\n"
            "  --markdown  a short summary for a pull-request comment.\n"
            "  --junit     JUnit XML: a test case per graph output (per tensor with\n"
            "              --junit-layers), failures carrying the metrics.\n"
            "Exit status 0 when the files were written, whatever the report's verdict.\n"
            "\n"
            "`report trend` lines up reports of one model over time, ordered by their\n"
            "\"created\" timestamps, charts each graph output's error over the runs and\n"
            "flags regressions between consecutive reports: a tensor that passed and now\n"
            "fails, NaN/inf that appeared, or max abs / mean abs error or the error in\n"
            "ulps at the tensor's scale grown more than F times (ignoring errors below\n"
            "1%% of atol or 1 ulp). Only\n"
            "regressions in the newest report count: exit 1 when there is one, 0 when\n"
            "not, 2 on bad input. Reports of different models are lined up with a warning.\n"
            "\n");
    ld_cli_print_options(out, report_options, N_REPORT_OPTIONS);
    fprintf(out,
            "\n"
            "Examples:\n"
            "  layerdiff report out.json --html out.html --markdown comment.md\n"
            "  layerdiff report out.json --junit results.xml --junit-layers\n"
            "  layerdiff report trend nightly/*.json --html trend.html --regress-factor 3\n");
}

const ld_cli_command ld_cmd_report = {
    .name = CMD,
    .summary = "render a JSON report as HTML, Markdown or JUnit; the nightly trend",
    .run = report_run,
    .help = report_help,
};
