/* layerdiff CLI — the progress line (see progress.h). */
#include "cli/progress.h"

#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define MIN_INTERVAL 0.1 /* seconds between redraws: ~10 Hz */
#define DEFAULT_WIDTH 80

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int terminal_width(FILE *stream)
{
    struct winsize ws;
    int fd = fileno(stream);
    if (fd >= 0 && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        return ws.ws_col;
    return DEFAULT_WIDTH;
}

void ld_progress_begin_forced(ld_progress *p, FILE *stream, int total, const char *label,
                              int width)
{
    memset(p, 0, sizeof *p);
    p->out = stream;
    p->enabled = stream != NULL;
    p->total = total;
    p->width = width >= 20 ? width : DEFAULT_WIDTH;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    snprintf(p->unit, sizeof p->unit, "layer");
    p->start = now_seconds();
    p->last = -1;
}

void ld_progress_begin(ld_progress *p, FILE *stream, int total, const char *label, bool quiet)
{
    int fd = stream ? fileno(stream) : -1;
    bool tty = fd >= 0 && isatty(fd) == 1;
    ld_progress_begin_forced(p, stream, total, label, tty ? terminal_width(stream) : 0);
    p->enabled = tty && !quiet;
}

/* Copies at most max bytes of name into buf, control bytes as '?', never
 * cutting a UTF-8 sequence; a cut name ends in "...". */
static void clean_name(const char *name, char *buf, int max)
{
    int n = 0;
    for (; name[n] && n < max; n++)
        buf[n] = (unsigned char)name[n] < 0x20 || name[n] == 0x7F ? '?' : name[n];
    if (name[n] && max >= 4) {
        n = max - 3;
        while (n > 0 && ((unsigned char)buf[n] & 0xC0) == 0x80)
            n--; /* buf[n] starts a character: cut before it */
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
}

/* Columns a UTF-8 string takes (one per character). */
static int columns(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

void ld_progress_set_unit(ld_progress *p, const char *unit)
{
    snprintf(p->unit, sizeof p->unit, "%s", unit);
}

void ld_progress_update(ld_progress *p, int k, const char *name)
{
    if (!p->enabled)
        return;
    double now = now_seconds();
    if (p->last >= 0 && now - p->last < MIN_INTERVAL && k < p->total)
        return;
    p->last = now;
    char head[128];
    int len = snprintf(head, sizeof head, "  %s%s%s %d/%d  ", p->label, *p->label ? ": " : "",
                       p->unit, k, p->total);
    char tail[32];
    snprintf(tail, sizeof tail, "  %.1f s", now - p->start);
    int room = p->width - 1 - len - (int)strlen(tail);
    char shown[512];
    clean_name(name ? name : "", shown, room > 3 ? (room < 511 ? room : 511) : 0);
    int cols = len + columns(shown) + (int)strlen(tail);
    fprintf(p->out, "\r%s%s%s", head, shown, tail);
    for (int i = cols; i < p->drawn; i++)
        fputc(' ', p->out); /* cover the rest of a longer previous line */
    p->drawn = cols;
    fflush(p->out);
}

void ld_progress_end(ld_progress *p)
{
    if (p->enabled && p->drawn > 0) {
        fputc('\r', p->out);
        for (int i = 0; i < p->drawn; i++)
            fputc(' ', p->out);
        fputc('\r', p->out);
        fflush(p->out);
    }
    p->drawn = 0;
    p->last = -1;
}
