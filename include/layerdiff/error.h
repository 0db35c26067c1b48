/* layerdiff — status codes and the error object every fallible function fills.
 *
 * Pattern (jansson's json_error_t): a function returns an ld_status and, on
 * failure, writes one formatted line into a caller-supplied ld_error. The
 * message names the file, node or tensor and what is wrong; callers add
 * context by prefixing (ld_error_prefix) rather than overwriting. */
#ifndef LAYERDIFF_ERROR_H
#define LAYERDIFF_ERROR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ld_status {
    LD_OK = 0,
    LD_ERR_USAGE,       /* bad command-line usage or option value       (exit 2) */
    LD_ERR_INPUT,       /* malformed or inconsistent input file/model    (exit 2) */
    LD_ERR_IO,          /* cannot open/read/write a file                 (exit 2) */
    LD_ERR_UNSUPPORTED, /* valid input that layerdiff cannot handle      (exit 2) */
    LD_ERR_NOMEM,       /* allocation failed or a size limit exceeded    (exit 2) */
    LD_ERR_MISMATCH,    /* a comparison failed                           (exit 1) */
    LD_ERR_INTERNAL,    /* a bug in layerdiff                            (exit 3) */
    LD_ERR_INTERRUPTED  /* SIGINT/SIGTERM while running                  (exit 130/143) */
} ld_status;

#define LD_ERROR_MESSAGE_SIZE 1024

typedef struct ld_error {
    ld_status status;
    char message[LD_ERROR_MESSAGE_SIZE];
} ld_error;

/* Resets err to LD_OK with an empty message. err may be NULL. */
void ld_error_clear(ld_error *err);

/* Sets err (may be NULL) to status with a printf-style message and returns
 * status, so callers can write `return ld_error_set(err, LD_ERR_INPUT, ...)`.
 * Newlines in the message are replaced by spaces: errors are one line. */
ld_status ld_error_set(ld_error *err, ld_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ld_status ld_error_setv(ld_error *err, ld_status status, const char *fmt, va_list ap);

/* Prepends "<prefix>: " to err's message (keeps its status). Use it to add
 * the file or node name when an error passes up a layer. Returns err->status. */
ld_status ld_error_prefix(ld_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Short name of a status ("bad input", "internal error", ...). Static string. */
const char *ld_status_name(ld_status status);

/* The process exit code the CLI uses for a status: 0 ok, 1 mismatch,
 * 2 usage/input/io/unsupported/nomem, 3 internal, 130 interrupted. */
int ld_status_exit_code(ld_status status);

#ifdef __cplusplus
}
#endif
#endif
