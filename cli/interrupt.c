/* layerdiff CLI — Ctrl-C and SIGTERM (see interrupt.h). */
#include "cli/interrupt.h"

#include <string.h>

#include "report/atomic_file.h"

volatile sig_atomic_t ld_cli_interrupted;

/* Removes the temporary files, then dies of sig as if it had not been caught. */
static void die_of(int sig)
{
    ld_temp_files_unlink_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_fatal_signal(int sig)
{
    die_of(sig);
}

static void on_interrupt(int sig)
{
    if (ld_cli_interrupted)
        die_of(sig); /* the second: at once */
    ld_cli_interrupted = sig;
}

static void install(int sig, void (*handler)(int), int flags, struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = flags;
    sigaction(sig, &sa, old);
}

void ld_cli_signals_default(void)
{
    static const int fatal[] = {SIGINT, SIGTERM, SIGHUP};
    for (int i = 0; i < 3; i++) {
        struct sigaction now;
        if (sigaction(fatal[i], NULL, &now) == 0 && now.sa_handler != SIG_IGN)
            install(fatal[i], on_fatal_signal, 0, NULL); /* an ignored one stays ignored */
    }
}

void ld_cli_interrupt_catch(ld_cli_saved_signals *saved)
{
    ld_cli_interrupted = 0;
    /* SA_RESTART: no EINTR in the middle of a dump or report write */
    install(SIGINT, on_interrupt, SA_RESTART, saved ? &saved->intr : NULL);
    install(SIGTERM, on_interrupt, SA_RESTART, saved ? &saved->term : NULL);
}

void ld_cli_interrupt_restore(const ld_cli_saved_signals *saved)
{
    sigaction(SIGINT, &saved->intr, NULL);
    sigaction(SIGTERM, &saved->term, NULL);
}

const char *ld_cli_interrupt_name(void)
{
    return ld_cli_interrupted == SIGTERM ? "SIGTERM" : "SIGINT";
}
