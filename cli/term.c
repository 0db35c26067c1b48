/* layerdiff CLI — terminal colours (see term.h). */
#include "cli/term.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool ld_term_use_color(FILE *stream)
{
    const char *no_color = getenv("NO_COLOR");
    if (no_color && *no_color)
        return false;
    const char *term = getenv("TERM");
    if (term && strcmp(term, "dumb") == 0)
        return false;
    int fd = fileno(stream);
    return fd >= 0 && isatty(fd);
}

const char *ld_term_style_code(bool color, ld_term_style style)
{
    if (!color)
        return "";
    switch (style) {
    case LD_STYLE_RESET: return "\033[0m";
    case LD_STYLE_BOLD: return "\033[1m";
    case LD_STYLE_DIM: return "\033[2m";
    case LD_STYLE_RED: return "\033[31m";
    case LD_STYLE_GREEN: return "\033[32m";
    case LD_STYLE_YELLOW: return "\033[33m";
    case LD_STYLE_CYAN: return "\033[36m";
    }
    return "";
}
