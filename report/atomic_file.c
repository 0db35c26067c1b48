/* layerdiff — whole-or-nothing output files and the temporary-file registry
 * (see atomic_file.h). */
#include "report/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --- the registry ----------------------------------------------------------------------- */

#define SLOTS 16         /* files being written at once: a dump and a few reports */
#define PATH_CAP 4096

static char slot_path[SLOTS][PATH_CAP];
static volatile sig_atomic_t slot_used[SLOTS];

int ld_temp_files_add(const char *path)
{
    size_t len = strlen(path);
    if (len >= PATH_CAP)
        return -1;
    for (int i = 0; i < SLOTS; i++) {
        if (slot_used[i])
            continue;
        memcpy(slot_path[i], path, len + 1);
        /* the name is complete before a handler can see the slot in use */
        atomic_signal_fence(memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst);
        slot_used[i] = 1;
        return i;
    }
    return -1;
}

void ld_temp_files_remove(int slot)
{
    if (slot >= 0 && slot < SLOTS)
        slot_used[slot] = 0;
}

void ld_temp_files_unlink_all(void)
{
    for (int i = 0; i < SLOTS; i++)
        if (slot_used[i])
            unlink(slot_path[i]);
}

/* --- writing a file whole ----------------------------------------------------------------- */

/* Creates a fresh temporary file beside path, registered (*slot). NULL with
 * errno set on failure. */
static FILE *open_temp(const char *path, char *tmp, size_t size, int *slot)
{
    unsigned seed = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    *slot = -1;
    for (int attempt = 0; attempt < 16; attempt++) {
        seed = seed * 1103515245u + 12345u;
        if ((size_t)snprintf(tmp, size, "%s.tmp-%d-%08x", path, (int)getpid(), seed) >= size) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        *slot = ld_temp_files_add(tmp); /* before it exists: never unregistered on disk */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        int saved = errno;
        if (fd >= 0) {
            FILE *f = fdopen(fd, "w");
            if (f)
                return f;
            saved = errno;
            close(fd);
            unlink(tmp);
        }
        ld_temp_files_remove(*slot);
        *slot = -1;
        errno = saved;
        if (fd >= 0 || errno != EEXIST)
            return NULL;
    }
    return NULL;
}

static ld_status write_stdout(const char *what, ld_file_writer write, const void *ctx,
                              ld_error *err)
{
    ld_status st = write(ctx, stdout, err);
    if (st == LD_OK && (fflush(stdout) != 0 || ferror(stdout)))
        st = ld_error_set(err, LD_ERR_IO, "cannot write the %s to standard output: %s", what,
                          errno ? strerror(errno) : "write error");
    return st;
}

ld_status ld_atomic_write_file(const char *path, const char *what, ld_file_writer write,
                               const void *ctx, ld_error *err)
{
    if (strcmp(path, "-") == 0)
        return write_stdout(what, write, ctx, err);
    char tmp[PATH_CAP];
    int slot;
    FILE *f = open_temp(path, tmp, sizeof tmp, &slot);
    if (!f)
        return ld_error_set(err, LD_ERR_IO, "cannot write %s '%s': %s", what, path,
                            strerror(errno));
    errno = 0;
    ld_status st = write(ctx, f, err);
    int saved = errno;
    bool flushed = fflush(f) == 0 && !ferror(f);
    saved = saved ? saved : errno;
    bool closed = fclose(f) == 0;
    saved = saved ? saved : errno;
    if (st == LD_OK && (!flushed || !closed))
        st = ld_error_set(err, LD_ERR_IO, "cannot write %s '%s': %s", what, path,
                          saved ? strerror(saved) : "write error");
    if (st == LD_OK && rename(tmp, path) != 0)
        st = ld_error_set(err, LD_ERR_IO, "cannot write %s '%s': %s", what, path,
                          strerror(errno));
    if (st != LD_OK)
        unlink(tmp);
    ld_temp_files_remove(slot);
    return st;
}
