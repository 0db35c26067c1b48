/* layerdiff — error object helpers (see include/layerdiff/error.h). */
#include "layerdiff/error.h"

#include <stdio.h>
#include <string.h>

void ld_error_clear(ld_error *err)
{
    if (!err)
        return;
    err->status = LD_OK;
    err->message[0] = '\0';
}

/* Errors are printed as one line, so embedded newlines from formatted
 * file content (names, strings from a model) are flattened. */
static void flatten_newlines(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
}

ld_status ld_error_setv(ld_error *err, ld_status status, const char *fmt, va_list ap)
{
    if (!err)
        return status;
    err->status = status;
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    flatten_newlines(err->message);
    return status;
}

ld_status ld_error_set(ld_error *err, ld_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ld_error_setv(err, status, fmt, ap);
    va_end(ap);
    return status;
}

ld_status ld_error_prefix(ld_error *err, const char *fmt, ...)
{
    if (!err)
        return LD_ERR_INTERNAL;
    char prefix[LD_ERROR_MESSAGE_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);

    char joined[LD_ERROR_MESSAGE_SIZE];
    /* Truncation is fine: the message stays one bounded line. */
    if (snprintf(joined, sizeof joined, "%s: %s", prefix, err->message) < 0)
        return err->status;
    memcpy(err->message, joined, sizeof joined);
    flatten_newlines(err->message);
    return err->status;
}

const char *ld_status_name(ld_status status)
{
    switch (status) {
    case LD_OK: return "ok";
    case LD_ERR_USAGE: return "bad usage";
    case LD_ERR_INPUT: return "bad input";
    case LD_ERR_IO: return "i/o error";
    case LD_ERR_UNSUPPORTED: return "unsupported";
    case LD_ERR_NOMEM: return "out of memory";
    case LD_ERR_MISMATCH: return "mismatch";
    case LD_ERR_INTERNAL: return "internal error";
    case LD_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

int ld_status_exit_code(ld_status status)
{
    switch (status) {
    case LD_OK: return 0;
    case LD_ERR_MISMATCH: return 1;
    case LD_ERR_USAGE:
    case LD_ERR_INPUT:
    case LD_ERR_IO:
    case LD_ERR_UNSUPPORTED:
    case LD_ERR_NOMEM: return 2;
    case LD_ERR_INTERRUPTED: return 130;
    case LD_ERR_INTERNAL: return 3;
    }
    return 3;
}
