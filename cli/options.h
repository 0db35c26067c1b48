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

/* The list's items joined with ',' into *out (new string), or NULL when it
 * is empty. */
ld_status ld_cli_list_join(const ld_cli_list *list, char **out, ld_error *err);

/* The inputs' flags, shared by `run`, `bisect` and `reduce`. */
typedef struct ld_cli_input_values {
    int64_t threads;
    int64_t seed;          /* -1: not given */
    ld_cli_list ranges, loads, shapes;
} ld_cli_input_values;

#define LD_CLI_INPUT_OPTIONS(v)                                                                \
    {"threads", 't', LD_OPT_INT, &(v).threads, "N", "threads per kernel (default: all cores)"}, \
    {"seed", 0, LD_OPT_INT, &(v).seed, "N", "seed of the generated inputs (default 1)"},        \
    {"val-range", 0, LD_OPT_LIST, &(v).ranges, "RANGES",                                        \
     "generated values: [LO,HI] and/or NAME:[LO,HI] (default [0,1])"},                          \
    {"load-inputs", 0, LD_OPT_LIST, &(v).loads, "SRC",                                          \
     "load inputs: a folder, .npy/.pb file, dump, or NAME:FILE,..."},                           \
    {"input-shapes", 0, LD_OPT_LIST, &(v).shapes, "SHAPES",                                     \
     "dynamic dims: NAME:1x3x224x224 or DIM:N, comma-separated"}

/* Usage errors in the inputs' flags (naming cmd): --threads out of 0..4096, a
 * negative --seed, --load-inputs with --seed or --val-range. */
ld_status ld_cli_input_values_check(const char *cmd, const ld_cli_input_values *iv,
                                    ld_error *err);

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
