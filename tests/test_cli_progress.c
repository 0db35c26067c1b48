/* Unit tests for the progress line (cli/progress.c): what it draws, that it
 * redraws at most ~10 times a second (and always for the last step), fits
 * the width, keeps control bytes off the terminal and erases itself; and
 * that it stays silent when not enabled (not a terminal, or --quiet). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/progress.h"

typedef struct capture {
    char *buf;
    size_t len;
    FILE *f;
} capture;

static void open_capture(capture *c)
{
    c->buf = NULL;
    c->len = 0;
    c->f = open_memstream(&c->buf, &c->len);
    assert_non_null(c->f);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The text after the last '\r' (what the terminal shows). */
static const char *shown(const capture *c)
{
    fflush(c->f);
    const char *cr = strrchr(c->buf, '\r');
    return cr ? cr + 1 : c->buf;
}

static void test_draws_and_rate_limits(void **state)
{
    (void)state;
    capture c;
    open_capture(&c);
    ld_progress p;
    ld_progress_begin_forced(&p, c.f, 10, "emulated", 80);
    ld_progress_update(&p, 1, "conv1");
    assert_non_null(strstr(shown(&c), "emulated: layer 1/10  conv1  0."));
    assert_non_null(strstr(shown(&c), " s"));
    ld_progress_update(&p, 2, "conv2"); /* too soon: not drawn */
    assert_null(strstr(c.buf, "conv2"));
    sleep_ms(120);
    ld_progress_update(&p, 3, "conv3");
    assert_non_null(strstr(shown(&c), "layer 3/10  conv3"));
    ld_progress_update(&p, 10, "last"); /* the last step always shows */
    assert_non_null(strstr(shown(&c), "layer 10/10  last"));
    size_t before = strlen(c.buf);
    ld_progress_end(&p);
    fflush(c.f);
    const char *erase = c.buf + before;
    assert_int_equal(erase[0], '\r');
    for (size_t i = 1; erase[i] != '\r'; i++)
        assert_int_equal(erase[i], ' ');
    assert_string_equal(shown(&c), "");
    fclose(c.f);
    free(c.buf);
}

static void test_width_and_control_bytes(void **state)
{
    (void)state;
    capture c;
    open_capture(&c);
    ld_progress p;
    char name[300];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    name[0] = '\x1b';
    name[1] = '\n';
    ld_progress_begin_forced(&p, c.f, 5, NULL, 40);
    ld_progress_update(&p, 5, name);
    const char *line = shown(&c);
    assert_true(strlen(line) <= 39);
    assert_memory_equal(line, "  layer 5/5  ??nn", 17);
    assert_non_null(strstr(line, "...  "));
    assert_null(strchr(c.buf, '\x1b'));
    assert_null(strchr(c.buf, '\n'));
    /* a shorter line covers the longer one before it */
    sleep_ms(120);
    p.total = 6;
    ld_progress_update(&p, 6, "x");
    assert_true(strlen(shown(&c)) >= strlen("  layer 5/5  ??") + 10);
    ld_progress_end(&p);
    fclose(c.f);
    free(c.buf);
}

/* `compare` counts tensors, not layers; a new begin counts layers again. */
static void test_unit(void **state)
{
    (void)state;
    capture c;
    open_capture(&c);
    ld_progress p;
    ld_progress_begin_forced(&p, c.f, 12, "compare", 80);
    ld_progress_set_unit(&p, "tensor");
    ld_progress_update(&p, 12, "y");
    assert_non_null(strstr(shown(&c), "  compare: tensor 12/12  y  0."));
    ld_progress_end(&p);
    ld_progress_begin_forced(&p, c.f, 2, NULL, 80);
    ld_progress_update(&p, 2, "z");
    assert_non_null(strstr(shown(&c), "  layer 2/2  z"));
    fclose(c.f);
    free(c.buf);
}

static void test_silent_when_disabled(void **state)
{
    (void)state;
    capture c;
    open_capture(&c);
    ld_progress p;
    ld_progress_begin(&p, c.f, 3, "x", false); /* a memory stream is no terminal */
    assert_false(p.enabled);
    ld_progress_update(&p, 3, "a");
    ld_progress_end(&p);
    ld_progress_begin(&p, stderr, 3, "x", true); /* --quiet, even on a terminal */
    assert_false(p.enabled);
    fflush(c.f);
    assert_int_equal(c.len, 0);
    fclose(c.f);
    free(c.buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draws_and_rate_limits),
        cmocka_unit_test(test_width_and_control_bytes),
        cmocka_unit_test(test_unit),
        cmocka_unit_test(test_silent_when_disabled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
