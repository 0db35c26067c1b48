/* layerdiff — SHA-256 of model files, recorded in dumps and reports so a
 * comparison can tell whether two runs used the same model bytes. */
#ifndef LAYERDIFF_SHA256_H
#define LAYERDIFF_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "layerdiff/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ld_sha256 {
    uint32_t state[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_used;
} ld_sha256;

void ld_sha256_init(ld_sha256 *ctx);
void ld_sha256_update(ld_sha256 *ctx, const void *data, size_t size);
/* Writes 64 lower-case hex digits and a NUL into hex. */
void ld_sha256_final_hex(ld_sha256 *ctx, char hex[65]);

/* Hex digest of a whole file, streamed. Fails with LD_ERR_IO naming the file. */
ld_status ld_sha256_file(const char *path, char hex[65], ld_error *err);

#ifdef __cplusplus
}
#endif
#endif
