/* layerdiff — tensor names <-> HDF5 link names (docs/dump-format.md,
 * "Link names").
 *
 * HDF5 splits link paths at '/' and treats "." as the current group, and
 * h5py decodes link names as UTF-8, while ONNX names may hold anything
 * (PyTorch exports "/encoder/layer.0/Add_output_0"). So a link name is the
 * tensor name with these bytes percent-encoded as "%XX" (upper-case hex):
 *   '%' itself, '/', a '.' in first position, control bytes 0x01-0x1F and
 *   0x7F, and every byte that is not part of a well-formed UTF-8 sequence.
 * The empty name becomes "%00" (a NUL cannot occur in a name otherwise).
 * Because '%' is always encoded, the mapping is injective: two different
 * names never share a link name, and unescaping gives the name back. */
#include <stdlib.h>
#include <string.h>

#include "core/utf8.h"
#include "layerdiff/dump.h"

static bool needs_escape(unsigned char c, size_t pos)
{
    return c == '%' || c == '/' || (c == '.' && pos == 0) || c < 0x20 || c == 0x7F;
}

char *ld_dump_escape_name(const char *name)
{
    if (!name)
        return NULL;
    if (!*name)
        return strdup("%00");
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *s = (const unsigned char *)name;
    size_t n = strlen(name);
    char *out = malloc(3 * n + 1); /* every byte escaped at worst */
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t seq = ld_utf8_sequence(name + i, NULL);
        if (seq > 1) { /* well-formed multi-byte character: kept as is */
            memcpy(out + o, s + i, seq);
            o += seq;
            i += seq;
            continue;
        }
        if (seq == 1 && !needs_escape(s[i], i)) {
            out[o++] = (char)s[i++];
            continue;
        }
        out[o++] = '%';
        out[o++] = hex[s[i] >> 4];
        out[o++] = hex[s[i] & 15];
        i++;
    }
    out[o] = '\0';
    return out;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

char *ld_dump_unescape_name(const char *escaped)
{
    if (!escaped)
        return NULL;
    if (strcmp(escaped, "%00") == 0)
        return strdup("");
    size_t n = strlen(escaped);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (escaped[i] != '%') {
            out[o++] = escaped[i];
            continue;
        }
        /* escaped[i + 1] is at worst the terminating NUL, and is a digit
         * (so escaped[i + 2] exists) before escaped[i + 2] is read. */
        int hi = hex_value(escaped[i + 1]);
        int lo = hi >= 0 ? hex_value(escaped[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            return NULL;
        }
        out[o++] = (char)(hi << 4 | lo);
        i += 2;
    }
    out[o] = '\0';
    /* Accept only what ld_dump_escape_name produces ("%41" for 'A' or a
     * bare '/' would decode but are not canonical), so the two functions
     * are exact inverses. */
    char *again = ld_dump_escape_name(out);
    bool canonical = again && strcmp(again, escaped) == 0;
    free(again);
    if (!canonical) {
        free(out);
        return NULL;
    }
    return out;
}
