/* layerdiff — HDF5 datatypes, attributes and error text for dumps
 * (see dump/dump_internal.h and docs/dump-format.md). */
#include "dump/dump_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ld_dump_counter_names[5] = {
    "overflows", "nans_created", "underflows", "subnormals", "partial_overflows",
};

void ld_dump_h5_quiet(void)
{
    /* When closing a file fails (disk full while flushing), HDF5 1.10 keeps
     * a half-destroyed file object and crashes if anything, including its
     * own atexit handler, closes it again. The writer never touches such a
     * file again; skipping HDF5's exit-time cleanup keeps the process from
     * crashing on exit. Only effective before HDF5 is first used, hence
     * first here. Every file layerdiff opens is closed explicitly anyway. */
    H5dont_atexit();
    /* HDF5 would otherwise print its whole stack trace to stderr on every
     * failed call, including the H5Aexists-style probes the reader makes on
     * purpose. Process-wide. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* --- error stack ------------------------------------------------------------ */

typedef struct error_walk {
    char innermost[256];
    char os_message[256];
} error_walk;

/* A failed system call shows up deep in the stack as
 * "... errno = 28, error message = 'No space left on device', ...": that
 * quoted text is what a user needs, the rest is HDF5 internals. */
static void extract_os_message(const char *desc, char *out, size_t size)
{
    static const char key[] = "error message = '";
    const char *start = strstr(desc, key);
    if (!start)
        return;
    start += sizeof key - 1;
    const char *end = strchr(start, '\'');
    size_t len = end ? (size_t)(end - start) : strlen(start);
    if (len >= size)
        len = size - 1;
    memcpy(out, start, len);
    out[len] = '\0';
}

static herr_t error_walk_cb(unsigned n, const H5E_error2_t *e, void *data)
{
    (void)n;
    error_walk *w = data;
    if (e && e->desc) {
        /* Walking downward, the last entry is where the error was detected. */
        snprintf(w->innermost, sizeof w->innermost, "%s", e->desc);
        if (!w->os_message[0])
            extract_os_message(e->desc, w->os_message, sizeof w->os_message);
    }
    return 0;
}

const char *ld_dump_h5_error_detail(char *buf, size_t size)
{
    error_walk w = {{0}, {0}};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, error_walk_cb, &w);
    if (w.os_message[0])
        snprintf(buf, size, "%s", w.os_message);
    else if (w.innermost[0])
        snprintf(buf, size, "%s", w.innermost);
    else
        snprintf(buf, size, "HDF5 error");
    return buf;
}

/* --- datatypes ----------------------------------------------------------------- */

/* Float layouts: sign position, exponent position and size, mantissa size,
 * exponent bias (mantissa always starts at bit 0). */
typedef struct float_layout {
    size_t size, spos, epos, esize, msize, ebias;
} float_layout;

static bool float_layout_of(ld_dtype dtype, float_layout *out)
{
    switch (dtype) {
    case LD_DTYPE_FLOAT16: *out = (float_layout){2, 15, 10, 5, 10, 15}; return true;
    case LD_DTYPE_BFLOAT16: *out = (float_layout){2, 15, 7, 8, 7, 127}; return true;
    case LD_DTYPE_FLOAT32: *out = (float_layout){4, 31, 23, 8, 23, 127}; return true;
    case LD_DTYPE_FLOAT64: *out = (float_layout){8, 63, 52, 11, 52, 1023}; return true;
    default: return false;
    }
}

/* float16 exactly as h5py < 3.12 builds IEEE_F16LE (h5t.pyx: copy of
 * IEEE_F32, set_fields(15, 10, 5, 0, 10), set_size(2), set_ebias(15)), which
 * h5py maps to numpy.float16. bfloat16 the same way with bfloat16's 8/7
 * split; numpy has no bfloat16, so h5py reads it as float32. */
static hid_t small_float_type(const float_layout *l)
{
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0)
        return H5I_INVALID_HID;
    if (H5Tset_fields(t, l->spos, l->epos, l->esize, 0, l->msize) < 0 ||
        H5Tset_size(t, l->size) < 0 || H5Tset_precision(t, 8 * l->size) < 0 ||
        H5Tset_ebias(t, l->ebias) < 0) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

/* h5py's bool: an enum over int8 with members FALSE=0, TRUE=1. */
static hid_t bool_enum_type(void)
{
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    if (t < 0)
        return H5I_INVALID_HID;
    int8_t false_value = 0, true_value = 1;
    if (H5Tenum_insert(t, "FALSE", &false_value) < 0 ||
        H5Tenum_insert(t, "TRUE", &true_value) < 0) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

hid_t ld_dump_h5_file_type(ld_dtype dtype)
{
    float_layout l;
    switch (dtype) {
    case LD_DTYPE_FLOAT16:
    case LD_DTYPE_BFLOAT16: float_layout_of(dtype, &l); return small_float_type(&l);
    case LD_DTYPE_FLOAT32: return H5Tcopy(H5T_IEEE_F32LE);
    case LD_DTYPE_FLOAT64: return H5Tcopy(H5T_IEEE_F64LE);
    case LD_DTYPE_INT8: return H5Tcopy(H5T_STD_I8LE);
    case LD_DTYPE_INT16: return H5Tcopy(H5T_STD_I16LE);
    case LD_DTYPE_INT32: return H5Tcopy(H5T_STD_I32LE);
    case LD_DTYPE_INT64: return H5Tcopy(H5T_STD_I64LE);
    case LD_DTYPE_UINT8: return H5Tcopy(H5T_STD_U8LE);
    case LD_DTYPE_UINT16: return H5Tcopy(H5T_STD_U16LE);
    case LD_DTYPE_UINT32: return H5Tcopy(H5T_STD_U32LE);
    case LD_DTYPE_UINT64: return H5Tcopy(H5T_STD_U64LE);
    case LD_DTYPE_BOOL: return bool_enum_type();
    default: return H5I_INVALID_HID;
    }
}

hid_t ld_dump_h5_mem_type(ld_dtype dtype)
{
    hid_t t = ld_dump_h5_file_type(dtype);
    if (t < 0 || dtype == LD_DTYPE_BOOL)
        return t; /* one byte: no byte order */
    if (H5Tset_order(t, H5Tget_order(H5T_NATIVE_INT)) < 0) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

static const char *class_name(H5T_class_t cls)
{
    switch (cls) {
    case H5T_INTEGER: return "integer";
    case H5T_FLOAT: return "float";
    case H5T_STRING: return "string";
    case H5T_BITFIELD: return "bitfield";
    case H5T_OPAQUE: return "opaque";
    case H5T_COMPOUND: return "compound";
    case H5T_REFERENCE: return "reference";
    case H5T_ENUM: return "enum";
    case H5T_VLEN: return "variable-length";
    case H5T_ARRAY: return "array";
    default: return "unknown-class";
    }
}

/* One-line description of a stored type, for "holds <why>" messages. */
static void describe_type(hid_t type, char *why, size_t why_size)
{
    H5T_class_t cls = H5Tget_class(type);
    size_t size = H5Tget_size(type);
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    if (cls == H5T_FLOAT && H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) >= 0)
        snprintf(why, why_size, "a %zu-byte float with %zu exponent and %zu mantissa bits, "
                 "bias %zu", size, esize, msize, H5Tget_ebias(type));
    else if (cls == H5T_INTEGER)
        snprintf(why, why_size, "a %zu-byte %s integer", size,
                 H5Tget_sign(type) == H5T_SGN_2 ? "signed" : "unsigned");
    else if (cls == H5T_ENUM)
        snprintf(why, why_size, "a %zu-byte enum with %d members", size, H5Tget_nmembers(type));
    else
        snprintf(why, why_size, "a %zu-byte %s type", size, class_name(cls));
}

static bool float_matches(hid_t type, const float_layout *want)
{
    float_layout got = {H5Tget_size(type), 0, 0, 0, 0, H5Tget_ebias(type)};
    size_t mpos = 0;
    if (H5Tget_fields(type, &got.spos, &got.epos, &got.esize, &mpos, &got.msize) < 0)
        return false;
    return got.size == want->size && got.spos == want->spos && got.epos == want->epos &&
           got.esize == want->esize && mpos == 0 && got.msize == want->msize &&
           got.ebias == want->ebias && H5Tget_offset(type) == 0 &&
           H5Tget_precision(type) == 8 * want->size && H5Tget_norm(type) == H5T_NORM_IMPLIED;
}

static bool int_matches(hid_t type, ld_dtype dtype)
{
    size_t size = H5Tget_size(type);
    H5T_sign_t want_sign = ld_dtype_is_signed_int(dtype) ? H5T_SGN_2 : H5T_SGN_NONE;
    return size == ld_dtype_size(dtype) && H5Tget_sign(type) == want_sign &&
           H5Tget_offset(type) == 0 && H5Tget_precision(type) == 8 * size;
}

/* h5py's rule: an enum whose members are exactly FALSE=0 and TRUE=1. */
static bool bool_matches(hid_t type)
{
    hid_t super = H5Tget_super(type);
    if (super < 0)
        return false;
    bool ok = H5Tget_class(super) == H5T_INTEGER && H5Tget_size(super) == 1 &&
              H5Tget_nmembers(type) == 2;
    H5Tclose(super);
    if (!ok)
        return false;
    int8_t false_value = -1, true_value = -1;
    if (H5Tenum_valueof(type, "FALSE", &false_value) < 0 ||
        H5Tenum_valueof(type, "TRUE", &true_value) < 0)
        return false;
    return false_value == 0 && true_value == 1;
}

bool ld_dump_h5_type_matches(hid_t type, ld_dtype dtype, char *why, size_t why_size)
{
    describe_type(type, why, why_size);
    H5T_class_t cls = H5Tget_class(type);
    float_layout l;
    if (float_layout_of(dtype, &l))
        return cls == H5T_FLOAT && float_matches(type, &l);
    if (ld_dtype_is_signed_int(dtype) || ld_dtype_is_unsigned_int(dtype))
        return cls == H5T_INTEGER && int_matches(type, dtype);
    if (dtype == LD_DTYPE_BOOL)
        return cls == H5T_ENUM && bool_matches(type);
    return false;
}

/* --- attributes -------------------------------------------------------------------- */

/* space: a scalar dataspace to use, or H5I_INVALID_HID to make one. */
static ld_status write_attr_in(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                               hid_t given_space, const void *value, ld_error *err)
{
    ld_status st = LD_OK;
    char detail[256];
    hid_t space = given_space >= 0 ? given_space : H5Screate(H5S_SCALAR);
    hid_t attr = space < 0 ? H5I_INVALID_HID
                           : H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attr < 0 || H5Awrite(attr, mem_type, value) < 0)
        st = ld_error_set(err, LD_ERR_IO, "cannot write attribute '%s': %s", name,
                          ld_dump_h5_error_detail(detail, sizeof detail));
    if (attr >= 0 && H5Aclose(attr) < 0 && st == LD_OK)
        st = ld_error_set(err, LD_ERR_IO, "cannot write attribute '%s': %s", name,
                          ld_dump_h5_error_detail(detail, sizeof detail));
    if (space >= 0 && given_space < 0)
        H5Sclose(space);
    return st;
}

static ld_status write_scalar_attr(hid_t obj, const char *name, hid_t file_type,
                                   hid_t mem_type, const void *value, ld_error *err)
{
    return write_attr_in(obj, name, file_type, mem_type, H5I_INVALID_HID, value, err);
}

static hid_t utf8_string_type(size_t size, H5T_cset_t cset)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return t;
    if (H5Tset_size(t, size) < 0 || H5Tset_cset(t, cset) < 0 ||
        (size != H5T_VARIABLE && H5Tset_strpad(t, H5T_STR_NULLTERM) < 0)) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

ld_status ld_dump_attr_write_string(hid_t obj, const char *name, const char *value,
                                    ld_error *err)
{
    hid_t type = utf8_string_type(H5T_VARIABLE, H5T_CSET_UTF8);
    if (type < 0)
        return ld_error_set(err, LD_ERR_INTERNAL, "cannot build the string type for '%s'", name);
    const char *v = value ? value : "";
    ld_status st = write_scalar_attr(obj, name, type, type, &v, err);
    H5Tclose(type);
    return st;
}

ld_status ld_dump_attr_write_int64(hid_t obj, const char *name, int64_t value, ld_error *err)
{
    return write_scalar_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value, err);
}

ld_status ld_dump_attr_cache_init(ld_dump_attr_cache *c, ld_error *err)
{
    c->str_type = utf8_string_type(H5T_VARIABLE, H5T_CSET_UTF8);
    c->scalar = H5Screate(H5S_SCALAR);
    if (c->str_type < 0 || c->scalar < 0) {
        ld_dump_attr_cache_close(c);
        return ld_error_set(err, LD_ERR_INTERNAL, "cannot build the attribute types");
    }
    return LD_OK;
}

void ld_dump_attr_cache_close(ld_dump_attr_cache *c)
{
    if (c->str_type >= 0)
        H5Tclose(c->str_type);
    if (c->scalar >= 0)
        H5Sclose(c->scalar);
    c->str_type = c->scalar = H5I_INVALID_HID;
}

ld_status ld_dump_attr_put_string(hid_t obj, const ld_dump_attr_cache *c, const char *name,
                                  const char *value, ld_error *err)
{
    const char *v = value ? value : "";
    return write_attr_in(obj, name, c->str_type, c->str_type, c->scalar, &v, err);
}

ld_status ld_dump_attr_put_int64(hid_t obj, const ld_dump_attr_cache *c, const char *name,
                                 int64_t value, ld_error *err)
{
    return write_attr_in(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, c->scalar, &value, err);
}

/* Opens attribute `name` and checks it holds exactly one element. Returns
 * LD_OK with *attr < 0 when it is missing. */
static ld_status open_single_attr(hid_t obj, const char *name, hid_t *attr, ld_error *err)
{
    *attr = H5I_INVALID_HID;
    htri_t exists = H5Aexists(obj, name);
    if (exists < 0)
        return ld_error_set(err, LD_ERR_INPUT, "cannot look up attribute '%s'", name);
    if (exists == 0)
        return LD_OK;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return ld_error_set(err, LD_ERR_INPUT, "cannot open attribute '%s'", name);
    hid_t space = H5Aget_space(a);
    hssize_t npoints = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    if (space >= 0)
        H5Sclose(space);
    if (npoints != 1) {
        H5Aclose(a);
        return ld_error_set(err, LD_ERR_INPUT, "attribute '%s' is not a single value", name);
    }
    *attr = a;
    return LD_OK;
}

static ld_status read_vlen_string(hid_t attr, const char *name, H5T_cset_t cset,
                                  const char **out, ld_error *err)
{
    ld_status st = LD_OK;
    char *raw = NULL;
    hid_t mem = utf8_string_type(H5T_VARIABLE, cset);
    if (mem < 0 || H5Aread(attr, mem, &raw) < 0) {
        st = ld_error_set(err, LD_ERR_INPUT, "cannot read string attribute '%s'", name);
        goto out;
    }
    size_t len = raw ? strnlen(raw, LD_DUMP_MAX_STRING + 1) : 0;
    if (len > LD_DUMP_MAX_STRING) {
        st = ld_error_set(err, LD_ERR_INPUT, "attribute '%s' is longer than %u bytes", name,
                          LD_DUMP_MAX_STRING);
        goto out;
    }
    *out = strndup(raw ? raw : "", len);
    if (!*out)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory reading attribute '%s'", name);
out:
    if (raw)
        H5free_memory(raw);
    if (mem >= 0)
        H5Tclose(mem);
    return st;
}

static ld_status read_fixed_string(hid_t attr, hid_t type, const char *name, H5T_cset_t cset,
                                   const char **out, ld_error *err)
{
    size_t size = H5Tget_size(type);
    if (size == 0 || size > LD_DUMP_MAX_STRING)
        return ld_error_set(err, LD_ERR_INPUT, "attribute '%s' has a bad string size %zu", name,
                            size);
    ld_status st = LD_OK;
    char *buf = calloc(1, size + 1);
    hid_t mem = utf8_string_type(size + 1, cset);
    if (!buf) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory reading attribute '%s'", name);
        goto out;
    }
    if (mem < 0 || H5Aread(attr, mem, buf) < 0) {
        st = ld_error_set(err, LD_ERR_INPUT, "cannot read string attribute '%s'", name);
        goto out;
    }
    buf[size] = '\0';
    *out = buf;
    buf = NULL;
out:
    free(buf);
    if (mem >= 0)
        H5Tclose(mem);
    return st;
}

ld_status ld_dump_attr_read_string(hid_t obj, const char *name, bool required,
                                   const char **out, ld_error *err)
{
    *out = NULL;
    hid_t attr;
    ld_status st = open_single_attr(obj, name, &attr, err);
    if (st != LD_OK)
        return st;
    if (attr < 0)
        return required ? ld_error_set(err, LD_ERR_INPUT, "missing attribute '%s'", name) : LD_OK;
    hid_t type = H5Aget_type(attr);
    if (type < 0 || H5Tget_class(type) != H5T_STRING) {
        st = ld_error_set(err, LD_ERR_INPUT, "attribute '%s' is not a string", name);
        goto out;
    }
    H5T_cset_t cset = H5Tget_cset(type);
    if (cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8) {
        st = ld_error_set(err, LD_ERR_INPUT, "attribute '%s' has an unknown character set",
                          name);
        goto out;
    }
    htri_t variable = H5Tis_variable_str(type);
    if (variable < 0)
        st = ld_error_set(err, LD_ERR_INPUT, "attribute '%s' has a bad string type", name);
    else if (variable)
        st = read_vlen_string(attr, name, cset, out, err);
    else
        st = read_fixed_string(attr, type, name, cset, out, err);
out:
    if (type >= 0)
        H5Tclose(type);
    H5Aclose(attr);
    return st;
}

ld_status ld_dump_attr_read_int64(hid_t obj, const char *name, int64_t *out, bool *found,
                                  ld_error *err)
{
    if (found)
        *found = false;
    hid_t attr;
    ld_status st = open_single_attr(obj, name, &attr, err);
    if (st != LD_OK)
        return st;
    if (attr < 0)
        return found ? LD_OK : ld_error_set(err, LD_ERR_INPUT, "missing attribute '%s'", name);
    hid_t type = H5Aget_type(attr);
    int64_t value = 0;
    if (type < 0 || H5Tget_class(type) != H5T_INTEGER)
        st = ld_error_set(err, LD_ERR_INPUT, "attribute '%s' is not an integer", name);
    else if (H5Aread(attr, H5T_NATIVE_INT64, &value) < 0)
        st = ld_error_set(err, LD_ERR_INPUT, "cannot read attribute '%s'", name);
    if (type >= 0)
        H5Tclose(type);
    H5Aclose(attr);
    if (st == LD_OK) {
        *out = value;
        if (found)
            *found = true;
    }
    return st;
}

/* --- string lists (a tensor's producing-node inputs) ----------------------------------- */

/* Sum of the lengths of one attribute's strings a reader accepts. */
#define MAX_LIST_BYTES ((size_t)64 << 20)

ld_status ld_dump_attr_write_strings(hid_t obj, const char *name, int n,
                                     const char *const *values, ld_error *err)
{
    ld_status st = LD_OK;
    char detail[256];
    hsize_t dims[1] = {(hsize_t)n};
    const char **v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    hid_t type = utf8_string_type(H5T_VARIABLE, H5T_CSET_UTF8);
    hid_t space = n > 0 ? H5Screate_simple(1, dims, NULL) : H5I_INVALID_HID;
    hid_t attr = H5I_INVALID_HID;
    if (!v || type < 0 || space < 0) {
        st = ld_error_set(err, n > 0 && v ? LD_ERR_INTERNAL : LD_ERR_NOMEM,
                          "cannot build string list attribute '%s'", name);
        goto out;
    }
    for (int i = 0; i < n; i++)
        v[i] = values[i] ? values[i] : "";
    attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attr < 0 || H5Awrite(attr, type, v) < 0)
        st = ld_error_set(err, LD_ERR_IO, "cannot write attribute '%s': %s", name,
                          ld_dump_h5_error_detail(detail, sizeof detail));
out:
    if (attr >= 0 && H5Aclose(attr) < 0 && st == LD_OK)
        st = ld_error_set(err, LD_ERR_IO, "cannot write attribute '%s': %s", name,
                          ld_dump_h5_error_detail(detail, sizeof detail));
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    free(v);
    return st;
}

void ld_dump_strings_free(int n, const char **values)
{
    for (int i = 0; values && i < n; i++)
        free((char *)values[i]);
    free(values);
}

/* Copies raw strings (each at most `width` bytes, or NUL-terminated when
 * width is 0) into out, checking the bounds. */
static ld_status copy_list(const char *const *raw, const char *fixed, size_t width, int n,
                           const char *name, const char **out, ld_error *err)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const char *s = fixed ? fixed + (size_t)i * (width + 1) : raw[i];
        size_t len = s ? strnlen(s, LD_DUMP_MAX_STRING + 1) : 0;
        total += len;
        if (len > LD_DUMP_MAX_STRING || total > MAX_LIST_BYTES)
            return ld_error_set(err, LD_ERR_INPUT, "attribute '%s' holds too long strings", name);
        if (!(out[i] = strndup(s ? s : "", len)))
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory reading attribute '%s'", name);
    }
    return LD_OK;
}

/* Reads the n strings of attr (type: a string type) into out. */
static ld_status read_list(hid_t attr, hid_t type, const char *name, int n, const char **out,
                           ld_error *err)
{
    H5T_cset_t cset = H5Tget_cset(type);
    htri_t variable = H5Tis_variable_str(type);
    size_t size = variable ? 0 : H5Tget_size(type);
    if ((cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8) || variable < 0 ||
        (!variable && (size == 0 || size > LD_DUMP_MAX_STRING ||
                       (size + 1) * (size_t)n > MAX_LIST_BYTES)))
        return ld_error_set(err, LD_ERR_INPUT, "attribute '%s' has a bad string type", name);
    ld_status st = LD_OK;
    char **raw = variable ? calloc((size_t)n, sizeof *raw) : NULL;
    char *fixed = variable ? NULL : calloc((size_t)n, size + 1);
    hid_t mem = utf8_string_type(variable ? H5T_VARIABLE : size + 1, cset);
    if ((variable ? !raw : !fixed) || mem < 0)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory reading attribute '%s'", name);
    else if (H5Aread(attr, mem, variable ? (void *)raw : (void *)fixed) < 0)
        st = ld_error_set(err, LD_ERR_INPUT, "cannot read string attribute '%s'", name);
    else
        st = copy_list((const char *const *)raw, fixed, size, n, name, out, err);
    for (int i = 0; raw && i < n; i++)
        if (raw[i])
            H5free_memory(raw[i]);
    free(raw);
    free(fixed);
    if (mem >= 0)
        H5Tclose(mem);
    return st;
}

ld_status ld_dump_attr_read_strings(hid_t obj, const char *name, int *n, const char ***out,
                                    ld_error *err)
{
    *n = 0;
    *out = NULL;
    htri_t exists = H5Aexists(obj, name);
    if (exists <= 0)
        return exists < 0 ? ld_error_set(err, LD_ERR_INPUT, "cannot look up attribute '%s'", name)
                          : LD_OK;
    ld_status st = LD_OK;
    const char **list = NULL;
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t space = attr < 0 ? H5I_INVALID_HID : H5Aget_space(attr);
    hid_t type = attr < 0 ? H5I_INVALID_HID : H5Aget_type(attr);
    int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    hssize_t count = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    if (attr < 0 || type < 0 || H5Tget_class(type) != H5T_STRING || rank < 0 || rank > 1 ||
        count < 0 || count > LD_DUMP_MAX_LIST) {
        st = ld_error_set(err, LD_ERR_INPUT, "attribute '%s' is not a list of at most %d strings",
                          name, LD_DUMP_MAX_LIST);
        goto out;
    }
    list = calloc((size_t)(count ? count : 1), sizeof *list);
    if (!list)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory reading attribute '%s'", name);
    else if (count > 0)
        st = read_list(attr, type, name, (int)count, list, err);
out:
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    if (attr >= 0)
        H5Aclose(attr);
    if (st != LD_OK) {
        ld_dump_strings_free((int)(count > 0 ? count : 0), list);
        return st;
    }
    *n = (int)count;
    *out = list;
    return LD_OK;
}
