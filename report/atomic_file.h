/* layerdiff — output files written whole or not at all, and the temporary
 * files a fatal signal must not leave behind. Internal: used by report/ and
 * cli/ (reports, --profile-json, bisect's files, the dump's temporary name).
 *
 * ld_atomic_write_file writes through "PATH.tmp-PID-XXXXXXXX" beside path
 * (same directory, so the rename is atomic), created exclusively and renamed
 * over path once complete: a failed or interrupted write never leaves a file
 * that looks whole, and a reader never sees half of one.
 *
 * While a temporary file exists its name is in a small process-wide
 * registry, so the handler of a fatal signal (a second Ctrl-C, SIGTERM
 * during a report) can remove them all with ld_temp_files_unlink_all, which
 * only calls unlink (async-signal-safe). A name is registered before the
 * file is created and unregistered after it is renamed or removed, so there
 * is no moment when the file exists unregistered; unlinking a name that is
 * already gone is harmless. The registry is written from one thread (the
 * one writing files); a handler may read it on any thread. */
#ifndef LAYERDIFF_REPORT_ATOMIC_FILE_H
#define LAYERDIFF_REPORT_ATOMIC_FILE_H

#include <stdio.h>

#include "layerdiff/error.h"

/* Writes the whole file to out; LD_OK or a status with err set. A write
 * error on out needs no message: the caller sees it on the stream. */
typedef ld_status (*ld_file_writer)(const void *ctx, FILE *out, ld_error *err);

/* Writes path with write(ctx, ...): "-" is stdout; anything else goes
 * through a registered temporary file renamed over path once complete, and
 * removed on failure. Errors name `what` and path: "cannot write HTML report
 * 'r.html': No space left on device". */
ld_status ld_atomic_write_file(const char *path, const char *what, ld_file_writer write,
                               const void *ctx, ld_error *err);

/* Registers a temporary file (e.g. the dump writer's) for removal on a fatal
 * signal. Returns its slot for ld_temp_files_remove, or -1 when the registry
 * is full or the path too long (then it is simply not removed by a signal). */
int ld_temp_files_add(const char *path);
/* Unregisters a slot (-1 is ignored); the file itself is the caller's. */
void ld_temp_files_remove(int slot);
/* Removes every registered file. Async-signal-safe; the registry is kept, so
 * a later unregister works as usual. */
void ld_temp_files_unlink_all(void);

#endif
