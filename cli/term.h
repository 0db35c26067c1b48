/* layerdiff CLI — terminal colours.
 *
 * Colour is used only when the stream is a terminal, NO_COLOR is unset or
 * empty (https://no-color.org) and TERM is not "dumb". Callers ask once per
 * stream and pass the answer down; with colour off every style is "". */
#ifndef LAYERDIFF_CLI_TERM_H
#define LAYERDIFF_CLI_TERM_H

#include <stdbool.h>
#include <stdio.h>

bool ld_term_use_color(FILE *stream);

typedef enum ld_term_style {
    LD_STYLE_RESET = 0,
    LD_STYLE_BOLD,
    LD_STYLE_DIM,
    LD_STYLE_RED,
    LD_STYLE_GREEN,
    LD_STYLE_YELLOW,
    LD_STYLE_CYAN
} ld_term_style;

/* The escape sequence for style, or "" when color is false. Static string. */
const char *ld_term_style_code(bool color, ld_term_style style);

#endif
