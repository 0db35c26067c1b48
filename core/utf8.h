/* layerdiff — UTF-8 validation shared by the JSON writers, the HDF5 name
 * escaping and the renderers. ONNX names are arbitrary bytes; every output
 * format that needs text (JSON, HTML, HDF5 link names) validates them here so
 * they all agree on what "valid" means (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
#ifndef LAYERDIFF_CORE_UTF8_H
#define LAYERDIFF_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define LD_UTF8_REPLACEMENT 0xFFFDu

/* Length (1-4) of the well-formed UTF-8 sequence starting at s, or 0 when the
 * bytes there are not one. s must be NUL-terminated: the NUL stops a
 * truncated sequence. When cp is not NULL it receives the code point. */
size_t ld_utf8_sequence(const char *s, uint32_t *cp);

/* A copy of the NUL-terminated string s in which every byte that does not
 * start a well-formed sequence is replaced by U+FFFD. Returns NULL when out
 * of memory; the caller frees the result. */
char *ld_utf8_sanitize(const char *s);

#endif
