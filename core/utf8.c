/* layerdiff — UTF-8 validation (core/utf8.h). */
#include "core/utf8.h"

#include <stdlib.h>
#include <string.h>

size_t ld_utf8_sequence(const char *str, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    size_t n;
    uint32_t v;
    if (s[0] < 0x80) {
        n = 1;
        v = s[0];
        goto out;
    }
    if ((s[0] & 0xE0) == 0xC0) {
        n = 2;
        v = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        n = 3;
        v = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        n = 4;
        v = s[0] & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min_cp[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
out:
    if (cp)
        *cp = v;
    return n;
}

char *ld_utf8_sanitize(const char *s)
{
    size_t len = strlen(s);
    char *fixed = malloc(len * 3 + 1); /* every byte replaced at worst */
    if (!fixed)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = ld_utf8_sequence(s + i, NULL);
        if (n == 0) {
            memcpy(fixed + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(fixed + o, s + i, n);
            o += n;
            i += n;
        }
    }
    fixed[o] = '\0';
    return fixed;
}
