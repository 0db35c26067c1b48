/* layerdiff fuzzing — helpers shared by the libFuzzer targets tests/fuzz/fuzz_*.c
 * (built by `make fuzz`, run by scripts/fuzz.sh; results in docs/reliability.md).
 *
 * Every target checks the same contract on whatever bytes it gets: a loader
 * either succeeds or fails with a status other than LD_ERR_INTERNAL and a
 * non-empty one-line message. A broken contract calls fuzz_fail(), which
 * aborts so libFuzzer records the input as a crash, just like a sanitizer
 * report or a signal would. */
#ifndef LAYERDIFF_TESTS_FUZZ_SUPPORT_H
#define LAYERDIFF_TESTS_FUZZ_SUPPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "layerdiff/error.h"

/* A per-process scratch directory (made on first use under $TMPDIR, /dev/shm
 * when available, removed at exit). Borrowed. */
const char *fuzz_sandbox(void);

/* Writes data to "<sandbox>/<name>" (replacing it) and returns that path in
 * a static buffer (valid until the next call). Aborts when the write fails:
 * the harness itself is broken then, not the code under test. */
const char *fuzz_write(const char *name, const void *data, size_t size);

/* A NUL-terminated copy of data (malloc; caller frees). Bytes after an
 * embedded NUL are kept but invisible to C string functions. */
char *fuzz_cstring(const uint8_t *data, size_t size);

/* An open "/dev/null" stream for output the harness throws away. */
FILE *fuzz_null_output(void);

/* Prints "fuzz contract broken: <what>" and the error (if any), then aborts. */
void fuzz_fail(const char *what, const ld_error *err) __attribute__((noreturn));

/* Checks a loader's result against the contract: LD_OK, or a failure with a
 * non-empty one-line message and a status other than LD_ERR_INTERNAL. */
void fuzz_check_status(ld_status st, const ld_error *err, const char *what);

#endif
