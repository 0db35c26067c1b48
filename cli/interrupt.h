/* layerdiff CLI — Ctrl-C and SIGTERM.
 *
 * Every command: main() installs ld_cli_signals_default, so a SIGINT,
 * SIGTERM or SIGHUP that ends the process first removes the temporary files
 * being written (reports, --profile-json, the dump: report/atomic_file.h);
 * the process then dies of the signal as it would have (exit 128 + N).
 *
 * Long commands (run, bisect, reduce) stop cleanly instead: between
 * ld_cli_interrupt_catch and ld_cli_interrupt_restore the first signal only
 * sets ld_cli_interrupted, which the work polls (between layers, between
 * trials) to stop, clean up and report "interrupted by SIGINT"; a second
 * signal, e.g. while a report is being written after the run, removes the
 * temporary files and kills at once. */
#ifndef LAYERDIFF_CLI_INTERRUPT_H
#define LAYERDIFF_CLI_INTERRUPT_H

#include <signal.h>

/* The signal that asked a long command to stop; 0 while none did. */
extern volatile sig_atomic_t ld_cli_interrupted;

typedef struct ld_cli_saved_signals {
    struct sigaction intr, term;
} ld_cli_saved_signals;

/* For every command (main): temporary files go with the process. A signal
 * the process started with ignored (nohup, `cmd &` in a script) stays
 * ignored. */
void ld_cli_signals_default(void);

/* Resets ld_cli_interrupted and catches SIGINT/SIGTERM as above; saved (may
 * be NULL) receives the previous handlers for ld_cli_interrupt_restore. */
void ld_cli_interrupt_catch(ld_cli_saved_signals *saved);
void ld_cli_interrupt_restore(const ld_cli_saved_signals *saved);

/* "SIGINT" or "SIGTERM": the name of ld_cli_interrupted, for messages. */
const char *ld_cli_interrupt_name(void);

#endif
