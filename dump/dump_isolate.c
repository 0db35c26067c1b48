/* layerdiff — reading a dump's metadata in a child process first.
 *
 * Dumps come from other machines, and Debian 12's HDF5 (1.10.8) does not
 * survive every corrupt file: fuzzing (docs/reliability.md) found files that
 * make it copy past a buffer while reading a global-heap string (H5HG_read),
 * crash while walking an object header's messages (H5Aexists) and loop
 * forever while loading a global-heap collection. None of that can be
 * checked from outside HDF5. So ld_dump_open first indexes the file in a
 * forked child: if HDF5 crashes or hangs there, the caller gets a one-line
 * error instead of a dead or stuck process, and only a file the child read
 * to the end is opened in the caller (the same, deterministic reads).
 *
 * This contains crashes and hangs, not silent memory corruption, and covers
 * the metadata read by ld_dump_open, not the tensor data read later.
 * LAYERDIFF_HDF5_ISOLATION=0 turns it off (e.g. to debug the reader in gdb);
 * LAYERDIFF_HDF5_TIMEOUT sets the child's time limit in seconds (default
 * 120: indexing 100,000 tensors takes a few seconds). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dump/dump_internal.h"

#define DEFAULT_TIMEOUT_S 120

static int timeout_seconds(void)
{
    const char *text = getenv("LAYERDIFF_HDF5_TIMEOUT");
    char *end;
    long v = text ? strtol(text, &end, 10) : 0;
    return text && *text && !*end && v > 0 && v < 86400 ? (int)v : DEFAULT_TIMEOUT_S;
}

bool ld_dump_isolation_enabled(void)
{
    const char *text = getenv("LAYERDIFF_HDF5_ISOLATION");
    return !text || strcmp(text, "0") != 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void run_child(int fd, const char *path, ld_dump_probe_fn probe)
{
    /* Die by the signal, not through handlers inherited from the caller:
     * the parent turns "killed by SIGSEGV" into the error message. */
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGINT, SIGTERM};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        signal(fatal[i], SIG_DFL);
    ld_error result;
    ld_error_clear(&result);
    result.status = probe(path, &result);
    /* All of it goes down the pipe: define the bytes after the message (error
     * objects are copied around with only the message's NUL set). */
    size_t len = strnlen(result.message, sizeof result.message - 1);
    memset(result.message + len, 0, sizeof result.message - len);
    const char *p = (const char *)&result;
    size_t done = 0;
    while (done < sizeof result) {
        ssize_t n = write(fd, p + done, sizeof result - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    _exit(done == sizeof result ? 0 : 1); /* no atexit handlers, no stdio flush */
}

/* Reads the child's report until EOF, the buffer is full or the deadline.
 * Returns bytes read, or -1 on timeout. */
static ssize_t read_report(int fd, ld_error *report, int timeout_s)
{
    int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
    size_t got = 0;
    while (got < sizeof *report) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {fd, POLLIN, 0};
        int r = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            continue; /* re-check the deadline */
        ssize_t n = r < 0 ? -1 : read(fd, (char *)report + got, sizeof *report - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

ld_status ld_dump_probe_isolated(const char *path, ld_dump_probe_fn probe, ld_error *err)
{
    if (!ld_dump_isolation_enabled())
        return LD_OK;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return ld_error_set(err, LD_ERR_IO, "dump '%s': cannot create a pipe: %s", path,
                            strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return ld_error_set(err, LD_ERR_IO, "dump '%s': cannot start a process to check it: %s",
                            path, strerror(e));
    }
    if (pid == 0) {
        close(fds[0]);
        run_child(fds[1], path, probe);
    }
    close(fds[1]);
    int timeout_s = timeout_seconds();
    ld_error report;
    ld_error_clear(&report);
    ssize_t got = read_report(fds[0], &report, timeout_s);
    close(fds[0]);
    if (got < 0)
        kill(pid, SIGKILL);
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    if (got < 0)
        return ld_error_set(err, LD_ERR_INPUT, "dump '%s': HDF5 did not finish reading its "
                            "metadata within %d s: the file is corrupt (HDF5 1.10 loops "
                            "forever on some corrupt files) or its file system hangs", path,
                            timeout_s);
    if (WIFSIGNALED(wstatus) && (WTERMSIG(wstatus) == SIGINT || WTERMSIG(wstatus) == SIGTERM))
        return ld_error_set(err, LD_ERR_INTERRUPTED, "dump '%s': interrupted by %s while "
                            "reading it", path, WTERMSIG(wstatus) == SIGINT ? "SIGINT" : "SIGTERM");
    if (got != (ssize_t)sizeof report) {
        if (WIFSIGNALED(wstatus))
            return ld_error_set(err, LD_ERR_INPUT, "dump '%s': the HDF5 library crashed (%s) "
                                "reading its metadata: the file is corrupt", path,
                                strsignal(WTERMSIG(wstatus)));
        return ld_error_set(err, LD_ERR_INPUT, "dump '%s': reading its metadata failed "
                            "abnormally (exit status %d): the file is corrupt", path,
                            WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    }
    if (report.status == LD_OK)
        return LD_OK;
    report.message[sizeof report.message - 1] = '\0';
    if (err)
        *err = report;
    return report.status;
}
