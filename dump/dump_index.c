/* layerdiff — the per-run tensor index table of format version 2
 * (docs/dump-format.md, "Run index").
 *
 * Version 1 kept a dozen attributes on every tensor dataset; creating them
 * cost more than writing the tensor itself (~80 us a dataset, half of the
 * dump's time on a 2,304-tensor model). Version 2 writes one row per tensor
 * into a compound table /index/<run link>, appended a block of rows at a
 * time, so a tensor costs one dataset and a row. The writer buffers at most
 * LD_DUMP_INDEX_BLOCK rows per run; the reader reads the table a block at a
 * time and bounds every string. */
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_internal.h"

/* Rows of one column group: name and offset of the row field. */
typedef struct column {
    const char *name;
    size_t offset;
    int kind; /* 0 string, 1 int64, 2 int8 */
} column;

#define STR_COL(f) {#f, offsetof(ld_dump_index_row, f), 0}
#define I64_COL(f) {#f, offsetof(ld_dump_index_row, f), 1}
#define I8_COL(f) {#f, offsetof(ld_dump_index_row, f), 2}

static const column columns[] = {
    STR_COL(link),        STR_COL(name),          STR_COL(node),
    STR_COL(op_type),     I64_COL(topo_index),    I64_COL(output_index),
    STR_COL(precision),   STR_COL(dtype),         STR_COL(inputs),
    I8_COL(graph_output), I8_COL(counters),       I64_COL(overflows),
    I64_COL(nans_created), I64_COL(underflows),   I64_COL(subnormals),
    I64_COL(partial_overflows),
};
#define N_COLUMNS ((int)(sizeof columns / sizeof columns[0]))

/* The memory (native, ld_dump_index_row layout) or file (packed,
 * little-endian) compound type of a row. Return value: new type (H5Tclose)
 * or H5I_INVALID_HID. */
static hid_t row_type(bool file)
{
    hid_t str = H5Tcopy(H5T_C_S1);
    if (str < 0 || H5Tset_size(str, H5T_VARIABLE) < 0 || H5Tset_cset(str, H5T_CSET_UTF8) < 0) {
        if (str >= 0)
            H5Tclose(str);
        return H5I_INVALID_HID;
    }
    size_t file_size = 0;
    for (int i = 0; i < N_COLUMNS; i++)
        file_size += H5Tget_size(columns[i].kind == 0 ? str : columns[i].kind == 1 ? H5T_STD_I64LE
                                                                                   : H5T_STD_I8LE);
    hid_t t = H5Tcreate(H5T_COMPOUND, file ? file_size : sizeof(ld_dump_index_row));
    size_t at = 0;
    bool ok = t >= 0;
    for (int i = 0; ok && i < N_COLUMNS; i++) {
        const column *c = &columns[i];
        hid_t member = c->kind == 0   ? str
                       : c->kind == 1 ? (file ? H5T_STD_I64LE : H5T_NATIVE_INT64)
                                      : (file ? H5T_STD_I8LE : H5T_NATIVE_INT8);
        ok = H5Tinsert(t, c->name, file ? at : c->offset, member) >= 0;
        at += H5Tget_size(member);
    }
    H5Tclose(str);
    if (!ok && t >= 0) {
        H5Tclose(t);
        t = H5I_INVALID_HID;
    }
    return t;
}

ld_status ld_dump_index_types_init(ld_dump_index_types *types, ld_error *err)
{
    types->mem = row_type(false);
    types->file = row_type(true);
    /* HDF5 converts the rows (their strings go to the global heap) through a
     * type-conversion and a background buffer of 1 MiB each by default, both
     * kept on its free lists and touched: sized for one block instead. */
    types->dxpl = H5Pcreate(H5P_DATASET_XFER);
    size_t row_size = sizeof(ld_dump_index_row);
    if (types->file >= 0 && H5Tget_size(types->file) > row_size)
        row_size = H5Tget_size(types->file);
    if (types->mem < 0 || types->file < 0 || types->dxpl < 0 ||
        H5Pset_buffer(types->dxpl, LD_DUMP_INDEX_BLOCK * row_size, NULL, NULL) < 0)
        return ld_error_set(err, LD_ERR_INTERNAL, "cannot build the HDF5 index row type");
    return LD_OK;
}

void ld_dump_index_types_close(ld_dump_index_types *types)
{
    if (types->mem >= 0)
        H5Tclose(types->mem);
    if (types->file >= 0)
        H5Tclose(types->file);
    if (types->dxpl >= 0)
        H5Pclose(types->dxpl);
    types->mem = types->file = types->dxpl = H5I_INVALID_HID;
}

/* --- inputs column ------------------------------------------------------------- */

char *ld_dump_join_inputs(int n, const char *const *names)
{
    size_t len = 1;
    char **escaped = calloc((size_t)(n > 0 ? n : 1), sizeof *escaped);
    char *out = NULL;
    if (!escaped)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (!(escaped[i] = ld_dump_escape_name(names[i] ? names[i] : "")))
            goto out;
        len += strlen(escaped[i]) + 1;
    }
    out = malloc(len);
    if (!out)
        goto out;
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        if (i)
            out[o++] = '/'; /* escaping turns every '/' of a name into %2F */
        size_t l = strlen(escaped[i]);
        memcpy(out + o, escaped[i], l);
        o += l;
    }
    out[o] = '\0';
out:
    for (int i = 0; i < n; i++)
        free(escaped[i]);
    free(escaped);
    return out;
}

ld_status ld_dump_split_inputs(const char *joined, int *n, const char ***out, ld_error *err)
{
    *n = 0;
    *out = NULL;
    if (!joined || !*joined)
        return LD_OK;
    int count = 1;
    for (const char *p = joined; *p; p++)
        count += *p == '/';
    if (count > LD_DUMP_MAX_LIST)
        return ld_error_set(err, LD_ERR_INPUT, "lists more than %d inputs", LD_DUMP_MAX_LIST);
    const char **names = calloc((size_t)count, sizeof *names);
    if (!names)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    const char *p = joined;
    for (int i = 0; i < count; i++) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *part = strndup(p, len);
        names[i] = part ? ld_dump_unescape_name(part) : NULL;
        free(part);
        if (!names[i]) {
            ld_dump_strings_free(i, names);
            return ld_error_set(err, LD_ERR_INPUT, "has a malformed inputs entry");
        }
        p = end ? end + 1 : p + len;
    }
    *n = count;
    *out = names;
    return LD_OK;
}

/* --- writing ------------------------------------------------------------------- */

static void row_free(ld_dump_index_row *r)
{
    free(r->link);
    free(r->name);
    free(r->node);
    free(r->op_type);
    free(r->precision);
    free(r->dtype);
    free(r->inputs);
    *r = (ld_dump_index_row){0};
}

ld_status ld_dump_index_create(ld_dump_index *ix, hid_t parent, const char *link, hid_t lcpl,
                               const ld_dump_index_types *types, ld_error *err)
{
    *ix = (ld_dump_index){.dset = H5I_INVALID_HID, .types = types};
    hsize_t dims[1] = {0}, maxdims[1] = {H5S_UNLIMITED}, chunk[1] = {LD_DUMP_INDEX_BLOCK};
    hid_t space = H5Screate_simple(1, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (space >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, 1, chunk) >= 0 &&
        H5Pset_obj_track_times(dcpl, 0) >= 0)
        ix->dset = H5Dcreate2(parent, link, types->file, space, lcpl, dcpl, H5P_DEFAULT);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    ix->rows = calloc(LD_DUMP_INDEX_BLOCK, sizeof *ix->rows);
    if (ix->dset < 0 || !ix->rows) {
        char detail[256];
        return ld_error_set(err, ix->rows ? LD_ERR_IO : LD_ERR_NOMEM, "cannot create index: %s",
                            ld_dump_h5_error_detail(detail, sizeof detail));
    }
    return LD_OK;
}

ld_status ld_dump_index_flush(ld_dump_index *ix, ld_error *err)
{
    if (ix->dset < 0 || ix->n_rows == 0)
        return LD_OK;
    hsize_t start[1] = {ix->written}, count[1] = {(hsize_t)ix->n_rows};
    hsize_t size[1] = {ix->written + (hsize_t)ix->n_rows};
    hid_t file_space = H5I_INVALID_HID;
    hid_t mem_space = H5Screate_simple(1, count, NULL);
    bool ok = mem_space >= 0 && H5Dset_extent(ix->dset, size) >= 0 &&
              (file_space = H5Dget_space(ix->dset)) >= 0 &&
              H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
              H5Dwrite(ix->dset, ix->types->mem, mem_space, file_space, ix->types->dxpl, ix->rows) >=
                  0;
    if (file_space >= 0)
        H5Sclose(file_space);
    if (mem_space >= 0)
        H5Sclose(mem_space);
    for (int i = 0; i < ix->n_rows; i++)
        row_free(&ix->rows[i]);
    ix->written += (hsize_t)ix->n_rows;
    ix->n_rows = 0;
    if (!ok) {
        char detail[256];
        return ld_error_set(err, LD_ERR_IO, "cannot write index rows: %s",
                            ld_dump_h5_error_detail(detail, sizeof detail));
    }
    return LD_OK;
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

ld_status ld_dump_index_add(ld_dump_index *ix, const char *link, const ld_dump_tensor_meta *m,
                            ld_dtype dtype, ld_error *err)
{
    ld_status st = LD_OK;
    if (ix->n_rows == LD_DUMP_INDEX_BLOCK)
        st = ld_dump_index_flush(ix, err);
    if (st != LD_OK)
        return st;
    ld_dump_index_row *r = &ix->rows[ix->n_rows];
    *r = (ld_dump_index_row){
        .link = dup_or_empty(link), .name = dup_or_empty(m->name), .node = dup_or_empty(m->node),
        .op_type = dup_or_empty(m->op_type), .precision = dup_or_empty(m->precision),
        .dtype = dup_or_empty(ld_dtype_name(dtype)),
        .inputs = ld_dump_join_inputs(m->n_inputs, m->inputs),
        .topo_index = m->topo_index, .output_index = m->output_index,
        .graph_output = m->graph_output > 0, .counters = m->counters.present,
        .overflows = m->counters.overflows, .nans_created = m->counters.nans_created,
        .underflows = m->counters.underflows, .subnormals = m->counters.subnormals,
        .partial_overflows = m->counters.partial_overflows,
    };
    if (!r->link || !r->name || !r->node || !r->op_type || !r->precision || !r->dtype ||
        !r->inputs) {
        row_free(r);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    ix->n_rows++;
    return LD_OK;
}

void ld_dump_index_close(ld_dump_index *ix)
{
    if (ix->rows)
        for (int i = 0; i < ix->n_rows; i++)
            row_free(&ix->rows[i]);
    free(ix->rows);
    if (ix->dset >= 0)
        H5Dclose(ix->dset);
    *ix = (ld_dump_index){.dset = H5I_INVALID_HID};
}

/* --- reading ------------------------------------------------------------------- */

/* Every column must be in the file's table (by name; HDF5 converts the rest). */
static ld_status check_columns(hid_t dset, ld_error *err)
{
    hid_t type = H5Dget_type(dset);
    ld_status st = LD_OK;
    if (type < 0 || H5Tget_class(type) != H5T_COMPOUND)
        st = ld_error_set(err, LD_ERR_INPUT, "is not a compound table");
    for (int i = 0; st == LD_OK && i < N_COLUMNS; i++) {
        int at = H5Tget_member_index(type, columns[i].name);
        hid_t member = at >= 0 ? H5Tget_member_type(type, (unsigned)at) : H5I_INVALID_HID;
        H5T_class_t cls = member >= 0 ? H5Tget_class(member) : H5T_NO_CLASS;
        bool want_string = columns[i].kind == 0;
        if (cls != (want_string ? H5T_STRING : H5T_INTEGER) ||
            (want_string && H5Tis_variable_str(member) <= 0))
            st = ld_error_set(err, LD_ERR_INPUT, "has no %s column '%s'",
                              want_string ? "variable-length string" : "integer",
                              columns[i].name);
        if (member >= 0)
            H5Tclose(member);
    }
    if (type >= 0)
        H5Tclose(type);
    return st;
}

/* Reads rows [start, start + n) into rows (HDF5 allocates the strings;
 * the caller reclaims them with H5Dvlen_reclaim). */
static ld_status read_block(hid_t dset, const ld_dump_index_types *types, hsize_t start, int n,
                            ld_dump_index_row *rows, ld_error *err)
{
    hsize_t first[1] = {start}, count[1] = {(hsize_t)n};
    hid_t file_space = H5Dget_space(dset);
    hid_t mem_space = H5Screate_simple(1, count, NULL);
    bool ok = file_space >= 0 && mem_space >= 0 &&
              H5Sselect_hyperslab(file_space, H5S_SELECT_SET, first, NULL, count, NULL) >= 0 &&
              H5Dread(dset, types->mem, mem_space, file_space, types->dxpl, rows) >= 0;
    if (file_space >= 0)
        H5Sclose(file_space);
    if (mem_space >= 0)
        H5Sclose(mem_space);
    return ok ? LD_OK : ld_error_set(err, LD_ERR_INPUT, "has unreadable rows");
}

ld_status ld_dump_index_read(hid_t parent, const char *link, int expected,
                             ld_dump_index_row_fn on_row, void *user, ld_error *err)
{
    ld_dump_index_types types = {H5I_INVALID_HID, H5I_INVALID_HID, H5I_INVALID_HID};
    ld_dump_index_row *rows = NULL;
    hid_t space = H5I_INVALID_HID;
    hid_t dset = H5Dopen2(parent, link, H5P_DEFAULT);
    ld_status st = dset < 0 ? ld_error_set(err, LD_ERR_INPUT, "is missing or not a dataset")
                            : check_columns(dset, err);
    hsize_t n = 0;
    if (st == LD_OK) {
        space = H5Dget_space(dset);
        if (space < 0 || H5Sget_simple_extent_ndims(space) != 1 ||
            H5Sget_simple_extent_dims(space, &n, NULL) != 1)
            st = ld_error_set(err, LD_ERR_INPUT, "is not a 1-D table");
        else if (n != (hsize_t)expected)
            st = ld_error_set(err, LD_ERR_INPUT, "has %" PRIu64 " rows for %d tensor datasets",
                              (uint64_t)n, expected);
    }
    if (st == LD_OK)
        st = ld_dump_index_types_init(&types, err);
    if (st == LD_OK && !(rows = calloc(LD_DUMP_INDEX_BLOCK, sizeof *rows)))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (hsize_t at = 0; st == LD_OK && at < n; at += LD_DUMP_INDEX_BLOCK) {
        int block = n - at < LD_DUMP_INDEX_BLOCK ? (int)(n - at) : LD_DUMP_INDEX_BLOCK;
        memset(rows, 0, (size_t)block * sizeof *rows);
        st = read_block(dset, &types, at, block, rows, err);
        for (int i = 0; st == LD_OK && i < block; i++)
            st = on_row(user, (int)(at + (hsize_t)i), &rows[i], err);
        hsize_t count[1] = {(hsize_t)block};
        hid_t mem_space = H5Screate_simple(1, count, NULL);
        if (mem_space >= 0) { /* frees the strings HDF5 allocated (NULLs are skipped) */
            H5Dvlen_reclaim(types.mem, mem_space, H5P_DEFAULT, rows);
            H5Sclose(mem_space);
        }
    }
    free(rows);
    ld_dump_index_types_close(&types);
    if (space >= 0)
        H5Sclose(space);
    if (dset >= 0)
        H5Dclose(dset);
    return st;
}

/* A copy of a row's string, "" for NULL; NULL when longer than `limit` or
 * out of memory. */
static char *row_string(const char *s, size_t limit)
{
    if (!s)
        return strdup("");
    return strnlen(s, limit + 1) > limit ? NULL : strdup(s);
}

ld_status ld_dump_index_row_meta(const ld_dump_index_row *row, int i, ld_dump_tensor_meta *m,
                                 char **link, ld_error *err)
{
    if (!row->name || !row->link || !row->dtype)
        return ld_error_set(err, LD_ERR_INPUT, "row %d has no name, link or dtype", i);
    *link = row_string(row->link, LD_DUMP_MAX_STRING);
    m->name = row_string(row->name, LD_DUMP_MAX_STRING);
    m->node = row_string(row->node, LD_DUMP_MAX_STRING);
    m->op_type = row_string(row->op_type, LD_DUMP_MAX_STRING);
    m->precision = row_string(row->precision, LD_DUMP_MAX_STRING);
    if (!*link || !m->name || !m->node || !m->op_type || !m->precision)
        return ld_error_set(err, LD_ERR_INPUT, "row %d has a string over %u bytes", i,
                            LD_DUMP_MAX_STRING);
    char *escaped = ld_dump_escape_name(m->name);
    bool linked = escaped && strcmp(escaped, *link) == 0;
    free(escaped);
    if (!linked)
        return ld_error_set(err, LD_ERR_INPUT, "row %d: link '%.64s' is not tensor '%.64s' escaped",
                            i, *link, m->name);
    if (row->output_index < 0 || row->output_index > INT_MAX)
        return ld_error_set(err, LD_ERR_INPUT, "row %d: output_index %" PRId64 " out of range", i,
                            row->output_index);
    if (!ld_dtype_from_name(row->dtype, &m->dtype) || !ld_dtype_is_supported(m->dtype))
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "row %d: unknown dtype '%.64s'", i,
                            row->dtype);
    m->topo_index = row->topo_index;
    m->output_index = (int)row->output_index;
    m->graph_output = row->graph_output != 0;
    m->counters = (ld_layer_counters){
        .present = row->counters != 0, .overflows = row->overflows,
        .nans_created = row->nans_created, .underflows = row->underflows,
        .subnormals = row->subnormals, .partial_overflows = row->partial_overflows,
    };
    if (!m->counters.present)
        m->counters = (ld_layer_counters){0};
    if (row->inputs && strnlen(row->inputs, 64u * LD_DUMP_MAX_STRING + 1) > 64u * LD_DUMP_MAX_STRING)
        return ld_error_set(err, LD_ERR_INPUT, "row %d: inputs over 64 MiB", i);
    const char **inputs = NULL;
    ld_status st = ld_dump_split_inputs(row->inputs, &m->n_inputs, &inputs, err);
    m->inputs = inputs;
    if (st != LD_OK)
        ld_error_prefix(err, "row %d", i);
    return st;
}

