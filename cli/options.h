/* layerdiff CLI — option parsing shared by every subcommand.
 *
 * A subcommand describes its options in a table of ld_cli_option; the same
 * table drives getopt_long and the "Options:" part of its --help, so an
 * option cannot be parsed without being documented. -h/--help is always
 * accepted and need not be listed. Usage errors are one line that ends with
 * a pointer to the subcommand's help, e.g.
 *   unknown option '--foo' (see 'layerdiff inspect --help')
 * main.c prints them as "layerdiff inspect: <message>". */
#ifndef LAYERDIFF_CLI_OPTIONS_H
#define LAYERDIFF_CLI_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "layerdiff/error.h"

typedef enum ld_cli_opt_kind {
    LD_OPT_FLAG,   /* no value; target is bool*, set to true */
    LD_OPT_STRING, /* target is const char**, borrowed from argv */
    LD_OPT_INT,    /* target is int64_t*; decimal, whole string must parse */
    LD_OPT_DOUBLE, /* target is double*; finite values only */
    LD_OPT_LIST    /* target is ld_cli_list*; every occurrence appends its value */
} ld_cli_opt_kind;

/* Values of a repeatable option, in command-line order (borrowed from argv).
 * The caller zeroes it before parsing. */
#define LD_CLI_LIST_MAX 64
typedef struct ld_cli_list {
    int n;
    const char *items[LD_CLI_LIST_MAX];
} ld_cli_list;

typedef struct ld_cli_option {
    const char *name;    /* long name without "--" */
    char short_name;     /* single-letter alias, or 0 */
    ld_cli_opt_kind kind;
    void *target;        /* borrowed; written when the option is given */
    const char *metavar; /* value placeholder in help ("N", "FILE"); NULL for flags */
    const char *help;    /* one line */
} ld_cli_option;

typedef struct ld_cli_args {
    bool help;           /* -h/--help was given: print help, run nothing */
    int n_positional;
    char **positional;   /* borrowed: points into argv (getopt_long permutes
                            argv so options may follow positionals) */
} ld_cli_args;

/* Parses argv (argv[0] is the subcommand name, e.g. "inspect") against
 * opts[0..n_opts). On a usage error returns LD_ERR_USAGE with a one-line
 * message naming the offending option and the help to read. A later
 * occurrence of an option overrides an earlier one, except for LD_OPT_LIST
 * options, which collect every occurrence. "--" ends options. */
ld_status ld_cli_parse(const char *cmd, int argc, char **argv, const ld_cli_option *opts,
                       int n_opts, ld_cli_args *out, ld_error *err);

/* LD_ERR_USAGE with a message ending in " (see 'layerdiff <cmd> --help')". */
ld_status ld_cli_usage_error(ld_error *err, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks the positional count is within [min, max] (max < 0: unlimited);
 * `what` names them in the error ("MODEL"). */
ld_status ld_cli_expect_positionals(const char *cmd, const ld_cli_args *args, int min,
                                    int max, const char *what, ld_error *err);

/* Prints the "Options:" block for opts plus -h/--help, aligned. */
void ld_cli_print_options(FILE *out, const ld_cli_option *opts, int n_opts);

#endif
