/* layerdiff — .npy reader (numpy's NEP 1 format, versions 1.0-3.0).
 *
 * File layout: "\x93NUMPY", major, minor, a little-endian header length (2
 * bytes in 1.0, 4 in 2.0/3.0), then a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }
 * padded with spaces and ended by '\n', then the raw C-order data. The header
 * comes from whoever wrote the file, so parsing is bounded everywhere: the
 * header length is capped, every read checks the end, integers are
 * overflow-checked and the data size is compared with the file size before
 * anything is allocated. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "layerdiff/inputs.h"

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

typedef struct npy_header {
    ld_dtype dtype;
    ld_shape shape;
    size_t data_offset; /* bytes before the data */
    size_t data_bytes;  /* what the shape needs */
} npy_header;

/* --- the dict literal ---------------------------------------------------------- */

typedef struct cursor {
    const char *p, *end;
    const char *file;
    ld_error *err;
} cursor;

static ld_status bad_header(cursor *c, const char *what)
{
    return ld_error_set(c->err, LD_ERR_INPUT, "%s: malformed .npy header: %s", c->file, what);
}

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool accept(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes (numpy never writes any) into buf. */
static ld_status parse_string(cursor *c, char *buf, size_t size)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return bad_header(c, "expected a quoted string");
    char quote = *c->p++;
    size_t len = 0;
    while (c->p < c->end && *c->p != quote) {
        if (*c->p == '\\')
            return bad_header(c, "escapes in strings are not supported");
        if (len + 1 >= size)
            return bad_header(c, "string too long");
        buf[len++] = *c->p++;
    }
    if (c->p >= c->end)
        return bad_header(c, "unterminated string");
    c->p++;
    buf[len] = '\0';
    return LD_OK;
}

static bool accept_word(cursor *c, const char *word)
{
    skip_space(c);
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

static ld_status parse_int(cursor *c, int64_t *out)
{
    skip_space(c);
    int64_t v = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int digit = *c->p - '0';
        if (v > (INT64_MAX - digit) / 10)
            return bad_header(c, "a shape dimension overflows int64");
        v = v * 10 + digit;
        c->p++;
    }
    if (c->p == start)
        return bad_header(c, "expected a non-negative integer in 'shape'");
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l')) /* Python 2 long */
        c->p++;
    *out = v;
    return LD_OK;
}

/* "(1, 3, 224)" / "(5,)" / "()". */
static ld_status parse_shape(cursor *c, ld_shape *shape)
{
    shape->rank = 0;
    if (!accept(c, '('))
        return bad_header(c, "'shape' is not a tuple");
    if (accept(c, ')'))
        return LD_OK;
    for (;;) {
        if (shape->rank == LD_MAX_RANK)
            return ld_error_set(c->err, LD_ERR_UNSUPPORTED, "%s: .npy shape has more than %d "
                                "dimensions", c->file, LD_MAX_RANK);
        ld_status st = parse_int(c, &shape->dims[shape->rank]);
        if (st != LD_OK)
            return st;
        shape->rank++;
        if (accept(c, ')'))
            return LD_OK;
        if (!accept(c, ','))
            return bad_header(c, "expected ',' or ')' in 'shape'");
        if (accept(c, ')'))
            return LD_OK;
    }
}

static ld_status descr_dtype(cursor *c, const char *descr, ld_dtype *out)
{
    static const struct {
        const char *code;
        ld_dtype dtype;
    } codes[] = {
        {"f2", LD_DTYPE_FLOAT16}, {"f4", LD_DTYPE_FLOAT32}, {"f8", LD_DTYPE_FLOAT64},
        {"i1", LD_DTYPE_INT8},    {"i2", LD_DTYPE_INT16},   {"i4", LD_DTYPE_INT32},
        {"i8", LD_DTYPE_INT64},   {"u1", LD_DTYPE_UINT8},   {"u2", LD_DTYPE_UINT16},
        {"u4", LD_DTYPE_UINT32},  {"u8", LD_DTYPE_UINT64},  {"b1", LD_DTYPE_BOOL},
    };
    char order = descr[0];
    const char *code = descr + 1;
    for (size_t i = 0; order && i < sizeof codes / sizeof codes[0]; i++) {
        if (strcmp(code, codes[i].code) != 0)
            continue;
        bool one_byte = code[1] == '1';
        /* '|' (no byte order) is what numpy writes for 1-byte types. */
        if (order == '<' || (order == '|' && one_byte) || (order == '>' && one_byte)) {
            *out = codes[i].dtype;
            return LD_OK;
        }
        if (order == '>')
            return ld_error_set(c->err, LD_ERR_UNSUPPORTED, "%s: .npy data is big-endian "
                                "('%s'); save it little-endian (arr.astype('<%s'))",
                                c->file, descr, code);
    }
    return ld_error_set(c->err, LD_ERR_UNSUPPORTED, "%s: .npy dtype '%s' is not supported "
                        "(float16/32/64, int8..64, uint8..64, bool)", c->file, descr);
}

/* The dict: exactly the keys descr, fortran_order and shape, as numpy requires. */
static ld_status parse_dict(cursor *c, npy_header *h)
{
    bool have_descr = false, have_order = false, have_shape = false;
    if (!accept(c, '{'))
        return bad_header(c, "does not start with '{'");
    while (!accept(c, '}')) {
        char key[32];
        ld_status st = parse_string(c, key, sizeof key);
        if (st != LD_OK)
            return st;
        if (!accept(c, ':'))
            return bad_header(c, "expected ':' after a key");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            char descr[16];
            skip_space(c);
            if (c->p < c->end && *c->p == '[')
                return ld_error_set(c->err, LD_ERR_UNSUPPORTED, "%s: structured .npy arrays "
                                    "are not supported", c->file);
            st = parse_string(c, descr, sizeof descr);
            if (st == LD_OK)
                st = descr_dtype(c, descr, &h->dtype);
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            if (accept_word(c, "True"))
                return ld_error_set(c->err, LD_ERR_UNSUPPORTED, "%s: .npy array is in Fortran "
                                    "order; save it in C order (np.ascontiguousarray)", c->file);
            if (!accept_word(c, "False"))
                return bad_header(c, "'fortran_order' is not True or False");
            have_order = true;
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            st = parse_shape(c, &h->shape);
            have_shape = true;
        } else {
            return bad_header(c, "unexpected or repeated key");
        }
        if (st != LD_OK)
            return st;
        if (!accept(c, ',')) {
            if (!accept(c, '}'))
                return bad_header(c, "expected ',' or '}'");
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return bad_header(c, "needs the keys 'descr', 'fortran_order' and 'shape'");
    skip_space(c);
    if (c->p != c->end)
        return bad_header(c, "text after the dict");
    return LD_OK;
}

/* --- the fixed part ----------------------------------------------------------------- */

/* Parses magic, version, header length and header from `prefix` (at least
 * the whole header, or the whole file if shorter); total_size is the file's
 * size. */
static ld_status parse_header(const uint8_t *prefix, size_t prefix_len, uint64_t total_size,
                              const char *file, npy_header *h, ld_error *err)
{
    if (prefix_len < 10 || memcmp(prefix, npy_magic, sizeof npy_magic) != 0)
        return ld_error_set(err, LD_ERR_INPUT, "%s: not a .npy file (no \\x93NUMPY magic)", file);
    uint8_t major = prefix[6];
    size_t header_len, fixed;
    if (major == 1) {
        header_len = (size_t)prefix[8] | (size_t)prefix[9] << 8;
        fixed = 10;
    } else if (major == 2 || major == 3) {
        if (prefix_len < 12)
            return ld_error_set(err, LD_ERR_INPUT, "%s: truncated .npy header", file);
        header_len = (size_t)prefix[8] | (size_t)prefix[9] << 8 | (size_t)prefix[10] << 16 |
                     (size_t)prefix[11] << 24;
        fixed = 12;
    } else {
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: .npy format version %d.%d is not "
                            "supported (1.0, 2.0, 3.0)", file, major, prefix[7]);
    }
    if (header_len > LD_NPY_MAX_HEADER)
        return ld_error_set(err, LD_ERR_INPUT, "%s: .npy header length %zu exceeds the %u-byte "
                            "limit", file, header_len, LD_NPY_MAX_HEADER);
    if (fixed + header_len > prefix_len || fixed + header_len > total_size)
        return ld_error_set(err, LD_ERR_INPUT, "%s: truncated .npy header (%zu bytes announced)",
                            file, header_len);
    cursor c = {(const char *)prefix + fixed, (const char *)prefix + fixed + header_len, file, err};
    if (memchr(c.p, '\0', header_len))
        return bad_header(&c, "contains a NUL byte");
    ld_status st = parse_dict(&c, h);
    if (st != LD_OK)
        return st;
    int64_t count;
    st = ld_shape_count(&h->shape, &count, file, err);
    if (st == LD_OK)
        st = ld_shape_nbytes(count, ld_dtype_size(h->dtype), &h->data_bytes, file, err);
    if (st != LD_OK)
        return st;
    h->data_offset = fixed + header_len;
    uint64_t have = total_size - h->data_offset;
    if (have != h->data_bytes) {
        char dims[128];
        return ld_error_set(err, LD_ERR_INPUT, "%s: .npy data is %llu bytes, but shape %s of "
                            "%s needs %zu", file, (unsigned long long)have,
                            ld_shape_format(&h->shape, dims, sizeof dims),
                            ld_dtype_name(h->dtype), h->data_bytes);
    }
    return LD_OK;
}

/* Byte-swaps data on big-endian hosts (the file is little-endian) and checks
 * bool bytes. */
static ld_status fix_data(ld_tensor *t, const char *file, ld_error *err)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    size_t size = ld_dtype_size(t->dtype);
    uint8_t *b = t->data;
    for (size_t i = 0; size > 1 && i < t->nbytes; i += size)
        for (size_t j = 0; j < size / 2; j++) {
            uint8_t tmp = b[i + j];
            b[i + j] = b[i + size - 1 - j];
            b[i + size - 1 - j] = tmp;
        }
#endif
    if (t->dtype == LD_DTYPE_BOOL) {
        const uint8_t *b = t->data;
        for (int64_t i = 0; i < t->count; i++)
            if (b[i] > 1)
                return ld_error_set(err, LD_ERR_INPUT, "%s: bool element %lld is %u, not 0 or 1",
                                    file, (long long)i, b[i]);
    }
    return LD_OK;
}

ld_status ld_npy_read_buffer(ld_tensor **out, const uint8_t *data, size_t size,
                             const char *display_name, const char *name, ld_error *err)
{
    const char *file = display_name ? display_name : "<memory>";
    npy_header h = {0};
    ld_status st = parse_header(data, size, size, file, &h, err);
    if (st != LD_OK)
        return st;
    ld_tensor *t = NULL;
    st = ld_tensor_create(&t, name, h.dtype, &h.shape, err);
    if (st != LD_OK)
        return st;
    if (h.data_bytes)
        memcpy(t->data, data + h.data_offset, h.data_bytes);
    st = fix_data(t, file, err);
    if (st != LD_OK) {
        ld_tensor_destroy(t);
        return st;
    }
    *out = t;
    return LD_OK;
}

ld_status ld_npy_read_file(ld_tensor **out, const char *path, const char *name, ld_error *err)
{
    ld_status st = LD_OK;
    ld_tensor *t = NULL;
    uint8_t *prefix = NULL;
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0) {
        st = ld_error_set(err, LD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = ld_error_set(err, LD_ERR_IO, "'%s' is not a regular file", path);
        goto out;
    }
    /* Read at most the fixed part plus the largest header we accept. */
    size_t want = 12 + LD_NPY_MAX_HEADER;
    if ((uint64_t)sb.st_size < want)
        want = (size_t)sb.st_size;
    prefix = malloc(want ? want : 1);
    if (!prefix) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory reading '%s'", path);
        goto out;
    }
    size_t got = fread(prefix, 1, want, f);
    if (got != want) {
        st = ld_error_set(err, LD_ERR_IO, "cannot read '%s'", path);
        goto out;
    }
    npy_header h = {0};
    st = parse_header(prefix, got, (uint64_t)sb.st_size, path, &h, err);
    if (st == LD_OK)
        st = ld_tensor_create(&t, name, h.dtype, &h.shape, err);
    if (st != LD_OK)
        goto out;
    if (fseeko(f, (off_t)h.data_offset, SEEK_SET) != 0 ||
        (h.data_bytes && fread(t->data, 1, h.data_bytes, f) != h.data_bytes)) {
        st = ld_error_set(err, LD_ERR_IO, "cannot read the data of '%s'", path);
        goto out;
    }
    st = fix_data(t, path, err);
out:
    if (f)
        fclose(f);
    free(prefix);
    if (st != LD_OK) {
        ld_tensor_destroy(t);
        return st;
    }
    *out = t;
    return LD_OK;
}
