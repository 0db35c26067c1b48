/* layerdiff CLI entry point: `layerdiff <subcommand> [options]`.
 *
 * main only dispatches: it finds the subcommand in the table, runs it and
 * turns the returned status into one stderr line and an exit code
 * (ld_status_exit_code: 0 ok, 1 comparison failed, 2 usage/input, 3 bug). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/options.h"

#ifndef LAYERDIFF_VERSION
#define LAYERDIFF_VERSION "unknown"
#endif

/* One row per subcommand, in the order `layerdiff --help` lists them. */
static const ld_cli_command *const commands[] = {
    &ld_cmd_run,
    &ld_cmd_compare,
    &ld_cmd_bisect,
    &ld_cmd_reduce,
    &ld_cmd_report,
    &ld_cmd_inspect,
    &ld_cmd_conformance,
};
#define N_COMMANDS ((int)(sizeof commands / sizeof commands[0]))

static void print_top_help(FILE *out)
{
    fprintf(out,
            "Usage: layerdiff <command> [options]\n"
            "       layerdiff help <command>\n"
            "       layerdiff --help | --version\n"
            "\n"
            "Runs an ONNX model layer by layer in reference and reduced precision and\n"
            "reports where the results diverge.\n"
            "\n"
            "Commands:\n");
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-14s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out,
            "\n"
            "Options:\n"
            "  -h, --help     show this help and exit\n"
            "  -V, --version  print the version and exit\n"
            "\n"
            "Run 'layerdiff <command> --help' for a command's options.\n"
            "Exit codes: 0 ok, 1 comparison failed, 2 bad usage or input, 3 internal error.\n");
}

static const ld_cli_command *find_command(const char *name)
{
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

/* Usage errors name the subcommand ("layerdiff inspect: unknown option ...");
 * every other failure is "layerdiff: error: <message>". */
static int report(const char *cmd, const ld_error *err)
{
    if (err->message[0] == '\0') {
        /* A failed comparison has already printed its report; anything else
         * without a message is still worth one line. */
        if (err->status != LD_ERR_MISMATCH)
            fprintf(stderr, "layerdiff: error: %s\n", ld_status_name(err->status));
    } else if (err->status == LD_ERR_USAGE) {
        fprintf(stderr, "layerdiff%s%s: %s\n", cmd ? " " : "", cmd ? cmd : "", err->message);
    } else {
        fprintf(stderr, "layerdiff: error: %s\n", err->message);
    }
    return ld_status_exit_code(err->status);
}

static int finish_output(int code)
{
    /* A full disk or closed pipe must not look like success. A command that
     * failed already said why in its one line (e.g. "cannot write JSON output"). */
    bool failed = fflush(stdout) != 0 || ferror(stdout);
    if (failed && code == 0) {
        fprintf(stderr, "layerdiff: error: cannot write to standard output\n");
        return ld_status_exit_code(LD_ERR_IO);
    }
    return code;
}

static int run_top_level(int argc, char **argv)
{
    ld_error err;
    ld_error_clear(&err);
    if (argc < 2) {
        ld_cli_usage_error(&err, NULL, "missing command");
        return report(NULL, &err);
    }
    const char *arg = argv[1];
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0 || strcmp(arg, "help") == 0) {
        if (argc > 2 && strcmp(arg, "help") == 0) {
            const ld_cli_command *cmd = find_command(argv[2]);
            if (cmd) {
                cmd->help(stdout);
                return 0;
            }
            ld_cli_usage_error(&err, NULL, "unknown command '%s'", argv[2]);
            return report(NULL, &err);
        }
        print_top_help(stdout);
        return 0;
    }
    if (strcmp(arg, "-V") == 0 || strcmp(arg, "--version") == 0) {
        printf("layerdiff %s\n", LAYERDIFF_VERSION);
        return 0;
    }
    if (arg[0] == '-') {
        ld_cli_usage_error(&err, NULL, "unknown option '%s'", arg);
        return report(NULL, &err);
    }
    const ld_cli_command *cmd = find_command(arg);
    if (!cmd) {
        ld_cli_usage_error(&err, NULL, "unknown command '%s'", arg);
        return report(NULL, &err);
    }
    ld_status st = cmd->run(argc - 1, argv + 1, &err);
    if (st == LD_OK)
        return 0;
    err.status = st; /* the status returned is what counts */
    return report(cmd->name, &err);
}

/* OpenMP waiting. libgomp's default spins up to 300000 rounds at every
 * barrier before it sleeps. On the shared 2-CPU machines the spinning thread
 * then holds a CPU while the thread it waits for is preempted by another
 * process, and each parallel loop waits out a scheduler time slice:
 * PaddleOCR det took 0.1-5 s instead of ~60 ms beside one busy process.
 * GOMP_SPINCOUNT=1000 spins briefly, then sleeps: as fast as one free CPU
 * under load, within noise of full spinning on a quiet machine (passive
 * waiting cost ~25% there). Measurements: docs/architecture.md, `make bench`.
 * libgomp reads the variable once, when it loads before main, so layerdiff
 * re-executes itself with it set, for the subcommands that run kernels —
 * unless the user chose a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT set), or
 * under valgrind, whose exec'd child would run unchecked. It executes the
 * file /proc/self/exe points to (so ps still shows "layerdiff"); without
 * /proc it carries on as it is. */
#define OMP_SPINCOUNT "1000"

static bool runs_kernels(const char *subcommand)
{
    return strcmp(subcommand, "run") == 0 || strcmp(subcommand, "conformance") == 0 ||
           strcmp(subcommand, "bisect") == 0 || strcmp(subcommand, "reduce") == 0 ||
           strcmp(subcommand, "compare") == 0; /* compares isolated pairs on a thread */
}

static void set_omp_wait_policy(int argc, char **argv)
{
    if (argc < 2 || !runs_kernels(argv[1]) || getenv("OMP_WAIT_POLICY") ||
        getenv("GOMP_SPINCOUNT"))
        return;
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload"))
        return;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || n >= (ssize_t)sizeof self - 1)
        return;
    if (setenv("GOMP_SPINCOUNT", OMP_SPINCOUNT, 1) != 0)
        return;
    self[n] = '\0';
    execv(self, argv); /* returns only on failure */
    unsetenv("GOMP_SPINCOUNT");
}

int main(int argc, char **argv)
{
    set_omp_wait_policy(argc, argv);
    ld_cli_signals_default(); /* a fatal signal takes the temporary files with it */
    return finish_output(run_top_level(argc, argv));
}
