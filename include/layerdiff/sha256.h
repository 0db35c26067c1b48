/* layerdiff — SHA-256 of model files, recorded in dumps and reports so a
 * comparison can tell whether two runs used the same model bytes; and of the
 * HTML report's script, for its Content-Security-Policy. OpenSSL's libcrypto
 * computes it (SHA extensions where the CPU has them). */
#ifndef LAYERDIFF_SHA256_H
#define LAYERDIFF_SHA256_H

#include <stddef.h>

#include "layerdiff/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hex digest (64 lower-case digits and a NUL) of size bytes at data. Fails
 * (LD_ERR_NOMEM / LD_ERR_INTERNAL) only when libcrypto cannot start or run
 * the digest. */
ld_status ld_sha256_hex(const void *data, size_t size, char hex[65], ld_error *err);

/* Raw digest (32 bytes) of size bytes at data; failures as ld_sha256_hex. */
ld_status ld_sha256_raw(const void *data, size_t size, unsigned char digest[32], ld_error *err);

/* Hex digest of a whole file, streamed. Fails with LD_ERR_IO naming the file. */
ld_status ld_sha256_file(const char *path, char hex[65], ld_error *err);

#ifdef __cplusplus
}
#endif
#endif
