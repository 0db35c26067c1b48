/* layerdiff — whole-file reads and bounds-checked external data reads for
 * the ONNX loader. Sizes are size_t/off_t (64-bit) throughout: models and
 * external weight files above 2 GB must load. */
#define _FILE_OFFSET_BITS 64
#include "onnx/onnx_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(off_t) == 8, "64-bit file offsets are needed for models above 2 GB");

/* read()/pread() move at most ~2 GB per call on Linux: loop until done. */
static ld_status read_fully(int fd, void *dst, size_t nbytes, off_t offset, bool positional,
                            const char *path, ld_error *err)
{
    uint8_t *p = dst;
    size_t done = 0;
    while (done < nbytes) {
        size_t chunk = nbytes - done;
        if (chunk > ((size_t)1 << 30))
            chunk = (size_t)1 << 30;
        ssize_t got = positional ? pread(fd, p + done, chunk, offset + (off_t)done)
                                 : read(fd, p + done, chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return ld_error_set(err, LD_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        if (got == 0)
            return ld_error_set(err, LD_ERR_IO, "'%s' shrank while being read (got %zu of %zu "
                                "bytes)", path, done, nbytes);
        done += (size_t)got;
    }
    return LD_OK;
}

/* Opens path read-only and checks it is a regular file. *missing tells a
 * file that does not exist apart from other failures, so callers that know
 * what the file was meant to be can say so. */
static ld_status open_regular(const char *path, int *fd_out, off_t *size, bool *missing,
                              ld_error *err)
{
    *missing = false;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *missing = errno == ENOENT;
        return ld_error_set(err, *missing ? LD_ERR_INPUT : LD_ERR_IO, "cannot open '%s': %s",
                            path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ld_status s = ld_error_set(err, LD_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
        close(fd);
        return s;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ld_error_set(err, LD_ERR_INPUT, "'%s' is not a regular file", path);
    }
    *fd_out = fd;
    *size = st.st_size;
    return LD_OK;
}

ld_status ld_onnx_read_file(const char *path, uint8_t **data, size_t *size, ld_error *err)
{
    int fd = -1;
    off_t file_size = 0;
    uint8_t *buf = NULL;
    bool missing;
    ld_status st = open_regular(path, &fd, &file_size, &missing, err);
    if (st != LD_OK)
        return st;
    if ((uint64_t)file_size > SIZE_MAX - 1) {
        st = ld_error_set(err, LD_ERR_NOMEM, "'%s' (%" PRId64 " bytes) does not fit in memory",
                          path, (int64_t)file_size);
        goto out;
    }
    buf = malloc((size_t)file_size + 1);
    if (!buf) {
        st = ld_error_set(err, LD_ERR_NOMEM, "cannot allocate %" PRId64 " bytes to read '%s'",
                          (int64_t)file_size, path);
        goto out;
    }
    st = read_fully(fd, buf, (size_t)file_size, 0, false, path, err);
    if (st != LD_OK)
        goto out;
    *data = buf;
    *size = (size_t)file_size;
    buf = NULL;
out:
    free(buf);
    close(fd);
    return st;
}

char *ld_onnx_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* A location must stay inside the model's folder: relative, and no ".."
 * component (either separator, since models exported on Windows use '\'). */
static bool location_is_safe(const char *location)
{
    if (!*location || location[0] == '/' || location[0] == '\\')
        return false;
    if (location[0] && location[1] == ':') /* "C:\..." */
        return false;
    const char *part = location;
    for (;;) {
        size_t len = strcspn(part, "/\\");
        if (len == 2 && part[0] == '.' && part[1] == '.')
            return false;
        if (!part[len])
            return true;
        part += len + 1;
    }
}

/* Strict non-negative decimal int64 ("12", not "-1", "1e3", "0x10", ""). */
static bool parse_offset(const char *text, int64_t *out)
{
    if (!text || !*text)
        return false;
    int64_t v = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        int digit = *p - '0';
        if (v > (INT64_MAX - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    *out = v;
    return true;
}

typedef struct external_ref {
    const char *location;
    const char *offset_text;
    const char *length_text;
} external_ref;

static ld_status parse_external_ref(const Onnx__TensorProto *proto, const char *what,
                                    external_ref *ref, ld_error *err)
{
    memset(ref, 0, sizeof *ref);
    for (size_t i = 0; i < proto->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = proto->external_data[i];
        if (!e->key)
            continue;
        if (strcmp(e->key, "location") == 0)
            ref->location = e->value ? e->value : "";
        else if (strcmp(e->key, "offset") == 0)
            ref->offset_text = e->value ? e->value : "";
        else if (strcmp(e->key, "length") == 0)
            ref->length_text = e->value ? e->value : "";
        /* "checksum" and unknown keys are ignored, as onnx itself does. */
    }
    if (!ref->location)
        return ld_error_set(err, LD_ERR_INPUT, "%s: external data has no 'location' entry", what);
    if (!location_is_safe(ref->location))
        return ld_error_set(err, LD_ERR_INPUT, "%s: external data location '%s' is not a "
                            "relative path inside the model's folder (absolute paths and '..' "
                            "are refused)", what, ref->location);
    return LD_OK;
}

/* Opens proto's external data file and checks the reference: location
 * present and safe, a folder to read from, offset and length inside the
 * file, length == nbytes. On success *fd is open and *offset set; *path is
 * new (freed by the caller in every case). */
static ld_status open_external(const Onnx__TensorProto *proto, const char *what,
                               const char *base_dir, size_t nbytes, int *fd, int64_t *offset,
                               char **path, ld_error *err)
{
    external_ref ref;
    off_t file_size = 0;
    int64_t length = -1;
    *fd = -1;
    *offset = 0;
    *path = NULL;
    ld_status st = parse_external_ref(proto, what, &ref, err);
    if (st != LD_OK)
        return st;
    if (!base_dir)
        return ld_error_set(err, LD_ERR_INPUT, "%s: uses external data ('%s') but the model was "
                            "not loaded from a file, so there is no folder to read it from",
                            what, ref.location);
    if (ref.offset_text && !parse_offset(ref.offset_text, offset))
        return ld_error_set(err, LD_ERR_INPUT, "%s: external data offset '%s' is not a "
                            "non-negative integer", what, ref.offset_text);
    if (ref.length_text && !parse_offset(ref.length_text, &length))
        return ld_error_set(err, LD_ERR_INPUT, "%s: external data length '%s' is not a "
                            "non-negative integer", what, ref.length_text);

    if (asprintf(path, "%s/%s", base_dir, ref.location) < 0) {
        *path = NULL;
        return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
    }
    bool missing;
    st = open_regular(*path, fd, &file_size, &missing, err);
    if (st != LD_OK) {
        *fd = -1;
        if (missing)
            return ld_error_set(err, LD_ERR_INPUT, "%s: external data file '%s' not found "
                                "(looked for '%s')", what, ref.location, *path);
        return ld_error_prefix(err, "%s: external data", what);
    }
    if (*offset > (int64_t)file_size)
        return ld_error_set(err, LD_ERR_INPUT, "%s: external data offset %" PRId64 " is past "
                            "the end of '%s' (%" PRId64 " bytes)", what, *offset, ref.location,
                            (int64_t)file_size);
    if (length < 0)
        length = (int64_t)file_size - *offset; /* no length: the rest of the file */
    else if (length > (int64_t)file_size - *offset)
        return ld_error_set(err, LD_ERR_INPUT, "%s: external data offset %" PRId64 " + length %"
                            PRId64 " runs past the end of '%s' (%" PRId64 " bytes)", what,
                            *offset, length, ref.location, (int64_t)file_size);
    if ((uint64_t)length != (uint64_t)nbytes)
        return ld_error_set(err, LD_ERR_INPUT, "%s: external data in '%s' is %" PRId64 " bytes, "
                            "but its dtype and shape need %zu", what, ref.location, length,
                            nbytes);
    return LD_OK;
}

ld_status ld_onnx_check_external(const Onnx__TensorProto *proto, const char *what,
                                 const char *base_dir, size_t nbytes, ld_error *err)
{
    int fd;
    int64_t offset;
    char *path;
    ld_status st = open_external(proto, what, base_dir, nbytes, &fd, &offset, &path, err);
    if (fd >= 0)
        close(fd);
    free(path);
    return st;
}

ld_status ld_onnx_read_external(const Onnx__TensorProto *proto, const char *what,
                                const char *base_dir, void *dst, size_t nbytes, ld_error *err)
{
    int fd;
    int64_t offset;
    char *path;
    ld_status st = open_external(proto, what, base_dir, nbytes, &fd, &offset, &path, err);
    if (st == LD_OK) {
        st = read_fully(fd, dst, nbytes, (off_t)offset, true, path, err);
        if (st != LD_OK)
            ld_error_prefix(err, "%s: external data", what);
    }
    if (fd >= 0)
        close(fd);
    free(path);
    return st;
}
