/* layerdiff CLI — the subcommand table.
 *
 * Adding a subcommand: write cli/cmd_<name>.c defining
 *   const ld_cli_command ld_cmd_<name> = {"<name>", "<summary>", run, help};
 * declare it below and add one row to the table in main.c. */
#ifndef LAYERDIFF_CLI_COMMANDS_H
#define LAYERDIFF_CLI_COMMANDS_H

#include <stdio.h>

#include "layerdiff/error.h"

typedef struct ld_cli_command {
    const char *name;    /* what the user types: "inspect" */
    const char *summary; /* one line for `layerdiff --help` */
    /* argv[0] is the subcommand name. Prints its results to stdout; on
     * failure returns the status and leaves one line in err (main prints it
     * and maps the status to the exit code). A status with an empty message
     * (e.g. LD_ERR_MISMATCH after a printed report) is not printed. */
    ld_status (*run)(int argc, char **argv, ld_error *err);
    /* Writes the full help (usage, description, options, examples). */
    void (*help)(FILE *out);
} ld_cli_command;

extern const ld_cli_command ld_cmd_run;
extern const ld_cli_command ld_cmd_inspect;
extern const ld_cli_command ld_cmd_conformance;
extern const ld_cli_command ld_cmd_compare;
extern const ld_cli_command ld_cmd_report;
extern const ld_cli_command ld_cmd_bisect;
extern const ld_cli_command ld_cmd_reduce;

#endif
