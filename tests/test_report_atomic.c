/* Unit tests for report/atomic_file.c: a file is written whole or not at all
 * (the old file stays when the writer fails, no temporary file is left), and
 * every temporary file is in the registry while it exists, so a fatal-signal
 * handler's ld_temp_files_unlink_all removes it (here called from inside a
 * writer, as a second Ctrl-C during a report would). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report/atomic_file.h"

typedef struct dir {
    char path[64];
    char file[128];
} dir;

static int setup(void **state)
{
    dir *d = calloc(1, sizeof *d);
    snprintf(d->path, sizeof d->path, "/tmp/ld-atomic-XXXXXX");
    assert_non_null(mkdtemp(d->path));
    snprintf(d->file, sizeof d->file, "%s/out.txt", d->path);
    *state = d;
    return 0;
}

/* Names in the folder, space-separated, sorted by readdir order. */
static char *entries(const dir *d, char *buf, size_t size)
{
    DIR *h = opendir(d->path);
    struct dirent *e;
    size_t o = 0;
    buf[0] = '\0';
    while (h && (e = readdir(h)))
        if (e->d_name[0] != '.' && o < size)
            o += (size_t)snprintf(buf + o, size - o, "%s%s", o ? " " : "", e->d_name);
    if (h)
        closedir(h);
    return buf;
}

static int teardown(void **state)
{
    dir *d = *state;
    char names[1024], p[256];
    entries(d, names, sizeof names);
    for (char *save = NULL, *n = strtok_r(names, " ", &save); n; n = strtok_r(NULL, " ", &save)) {
        snprintf(p, sizeof p, "%s/%s", d->path, n);
        unlink(p);
    }
    rmdir(d->path);
    free(d);
    return 0;
}

static char *slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static ld_status write_text(const void *text, FILE *out, ld_error *err)
{
    (void)err;
    fputs(text, out);
    return LD_OK;
}

static ld_status write_then_fail(const void *text, FILE *out, ld_error *err)
{
    fputs(text, out);
    return ld_error_set(err, LD_ERR_INPUT, "the writer gave up");
}

/* What a second Ctrl-C does in the middle of a write. */
static ld_status write_then_signal(const void *d, FILE *out, ld_error *err)
{
    char names[1024];
    (void)err;
    fputs("half", out);
    entries(d, names, sizeof names);
    assert_non_null(strstr(names, "out.txt.tmp-")); /* the temporary file exists... */
    ld_temp_files_unlink_all();
    entries(d, names, sizeof names);
    assert_null(strstr(names, ".tmp-")); /* ...and the handler removes it */
    return LD_OK;
}

static void test_whole_or_old(void **state)
{
    dir *d = *state;
    ld_error err;
    char buf[256], names[1024];
    assert_int_equal(ld_atomic_write_file(d->file, "list", write_text, "first\n", &err), LD_OK);
    assert_string_equal(slurp(d->file, buf, sizeof buf), "first\n");
    assert_int_equal(ld_atomic_write_file(d->file, "list", write_then_fail, "second\n", &err),
                     LD_ERR_INPUT);
    assert_string_equal(err.message, "the writer gave up");
    assert_string_equal(slurp(d->file, buf, sizeof buf), "first\n"); /* the old file stays */
    assert_string_equal(entries(d, names, sizeof names), "out.txt");  /* no temporary file */
    assert_int_equal(ld_atomic_write_file(d->file, "list", write_text, "third\n", &err), LD_OK);
    assert_string_equal(slurp(d->file, buf, sizeof buf), "third\n");
}

static void test_errors_name_the_file(void **state)
{
    dir *d = *state;
    ld_error err;
    char path[192];
    snprintf(path, sizeof path, "%s/no/such/dir/p.json", d->path);
    assert_int_equal(ld_atomic_write_file(path, "profile", write_text, "x", &err), LD_ERR_IO);
    char want[300];
    snprintf(want, sizeof want, "cannot write profile '%s': No such file or directory", path);
    assert_string_equal(err.message, want);
}

static void test_signal_during_write(void **state)
{
    dir *d = *state;
    ld_error err;
    char names[1024];
    /* the rename finds its temporary file gone: an error, and nothing on disk */
    assert_int_equal(ld_atomic_write_file(d->file, "report", write_then_signal, d, &err),
                     LD_ERR_IO);
    assert_non_null(strstr(err.message, "cannot write report '"));
    assert_string_equal(entries(d, names, sizeof names), "");
    /* the registry was emptied by the write: a later signal removes nothing new */
    assert_int_equal(ld_atomic_write_file(d->file, "report", write_text, "ok", &err), LD_OK);
    ld_temp_files_unlink_all();
    assert_string_equal(entries(d, names, sizeof names), "out.txt");
}

static void test_registry(void **state)
{
    dir *d = *state;
    char path[40][192], names[1024];
    int slot[40];
    int n = 0;
    for (; n < 40; n++) {
        snprintf(path[n], sizeof path[n], "%s/t%02d", d->path, n);
        fclose(fopen(path[n], "w"));
        slot[n] = ld_temp_files_add(path[n]);
        if (slot[n] < 0)
            break;
    }
    assert_true(n >= 4 && n < 40); /* room for a dump and a few reports, but bounded */
    ld_temp_files_remove(slot[0]); /* unregistered: kept */
    ld_temp_files_remove(-1);      /* harmless */
    ld_temp_files_unlink_all();
    for (int i = 1; i < n; i++)
        ld_temp_files_remove(slot[i]);
    entries(d, names, sizeof names);
    assert_non_null(strstr(names, "t00"));   /* removed from the registry, so kept */
    assert_null(strstr(names, "t01"));       /* registered: removed */
    assert_non_null(strstr(names, path[n] + strlen(d->path) + 1)); /* never registered */
    char long_path[5000];
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    assert_int_equal(ld_temp_files_add(long_path), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_whole_or_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_name_the_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_during_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registry, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
