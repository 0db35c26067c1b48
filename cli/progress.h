/* layerdiff CLI — one progress line on stderr during long runs:
 *
 *   "  emulated: layer 812/1024  /blocks.11/attn/MatMul_2  12.4 s"
 *
 * Drawn only when the stream is a terminal and the user did not ask for
 * --quiet; redrawn at most ten times a second (and for the last layer), so
 * a model with 100,000 small layers spends no time on the terminal; cut to
 * the terminal's width; erased by ld_progress_end, so what follows starts on
 * a clean line. Layer names come from the model: control bytes are shown
 * as '?'. Clearing uses spaces, not escape sequences, so TERM=dumb works. */
#ifndef LAYERDIFF_CLI_PROGRESS_H
#define LAYERDIFF_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct ld_progress {
    FILE *out;
    bool enabled;
    int total;
    int width;          /* columns available */
    char label[64];     /* "emulated" */
    char unit[16];      /* what a step is: "layer" (default), "tensor" */
    double start, last; /* monotonic seconds; last < 0 before the first draw */
    int drawn;          /* columns of the line on screen (to erase it) */
} ld_progress;

/* Starts a progress of `total` steps on stream, enabled when stream is a
 * terminal and !quiet. label may be NULL. */
void ld_progress_begin(ld_progress *p, FILE *stream, int total, const char *label, bool quiet);
/* Same, enabled unconditionally with a fixed width (tests, or a caller that
 * decided itself). */
void ld_progress_begin_forced(ld_progress *p, FILE *stream, int total, const char *label,
                              int width);
/* What the line counts ("tensor 3/10"; "layer" unless set). Call after begin. */
void ld_progress_set_unit(ld_progress *p, const char *unit);
/* Step k (1-based) of total is running or done; name may be NULL. */
void ld_progress_update(ld_progress *p, int k, const char *name);
/* Erases the line (if one was drawn); p may be begun again. */
void ld_progress_end(ld_progress *p);

#endif
