/* layerdiff fuzzing — shared helpers (see support.h). */
#include "tests/fuzz/support.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char sandbox[256];
static pid_t sandbox_owner;

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_sandbox(void)
{
    /* Forked children (none today) must not delete the parent's directory. */
    if (sandbox[0] && getpid() == sandbox_owner)
        nftw(sandbox, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_sandbox(void)
{
    if (sandbox[0])
        return sandbox;
    const char *base = getenv("TMPDIR");
    struct stat sb;
    if (!base || !*base)
        base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0
                   ? "/dev/shm"
                   : "/tmp";
    snprintf(sandbox, sizeof sandbox, "%s/layerdiff-fuzz.XXXXXX", base);
    if (!mkdtemp(sandbox)) {
        fprintf(stderr, "fuzz: cannot create a scratch directory in %s: %s\n", base,
                strerror(errno));
        abort();
    }
    sandbox_owner = getpid();
    atexit(remove_sandbox);
    return sandbox;
}

const char *fuzz_write(const char *name, const void *data, size_t size)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", fuzz_sandbox(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const uint8_t *p = data;
    size_t done = 0;
    while (fd >= 0 && done < size) {
        ssize_t n = write(fd, p + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    if (fd < 0 || done != size || close(fd) != 0) {
        fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
    return path;
}

char *fuzz_cstring(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

FILE *fuzz_null_output(void)
{
    static FILE *null_output;
    if (!null_output && !(null_output = fopen("/dev/null", "w")))
        abort();
    return null_output;
}

void fuzz_fail(const char *what, const ld_error *err)
{
    fprintf(stderr, "fuzz contract broken: %s\n", what);
    if (err)
        fprintf(stderr, "  status %d (%s), message: \"%s\"\n", (int)err->status,
                ld_status_name(err->status), err->message);
    abort();
}

void fuzz_check_status(ld_status st, const ld_error *err, const char *what)
{
    if (st == LD_OK)
        return;
    char why[256];
    if (st == LD_ERR_INTERNAL) {
        snprintf(why, sizeof why, "%s: internal error on user input", what);
        fuzz_fail(why, err);
    }
    if (st == LD_ERR_MISMATCH || st == LD_ERR_INTERRUPTED) {
        snprintf(why, sizeof why, "%s: status %s makes no sense for a loader", what,
                 ld_status_name(st));
        fuzz_fail(why, err);
    }
    if (!err->message[0]) {
        snprintf(why, sizeof why, "%s: failed without a message", what);
        fuzz_fail(why, err);
    }
    if (strchr(err->message, '\n')) {
        snprintf(why, sizeof why, "%s: message is more than one line", what);
        fuzz_fail(why, err);
    }
}
