/* layerdiff — HDF5 dump reader (docs/dump-format.md).
 *
 * ld_dump_open indexes the file: it reads every attribute and checks every
 * dataset's type and shape against its attributes, but no tensor data. The
 * file may come from anywhere (a later issue fuzzes this code), so every
 * HDF5 return value is checked, strings are bounded, ranks and sizes are
 * checked before use, links must be hard links to datasets or groups, and
 * only the filters the writer uses are accepted. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump/dump_internal.h"

/* deflate cannot expand data by more than ~1032x; a chunked dataset that
 * claims more than this many bytes per stored byte is malformed. */
#define MAX_COMPRESSION_RATIO 1100

typedef struct dump_entry {
    ld_dump_tensor_meta meta; /* strings owned */
    char *link;               /* link name inside the group */
    int creation_rank;        /* position in the group's link order */
} dump_entry;

typedef struct dump_group {
    ld_dump_run_info info;    /* strings owned */
    char *path;               /* HDF5 path of the group, for messages */
    hid_t group;
    int count;
    dump_entry *entries;      /* ordered by (topo_index, output_index, creation) */
    int *by_name;             /* entry indices ordered by meta.name */
} dump_group;

struct ld_dump {
    char *path;
    hid_t file;
    ld_dump_file_info info;   /* strings owned */
    dump_group inputs;
    int run_count;
    dump_group *runs;
};

/* --- link listing ----------------------------------------------------------- */

typedef struct link_list {
    char **names;
    int count, capacity;
    bool bad_link;            /* a soft or external link was found */
    bool nomem;
} link_list;

static void link_list_free(link_list *l)
{
    for (int i = 0; i < l->count; i++)
        free(l->names[i]);
    free(l->names);
    *l = (link_list){0};
}

static herr_t link_list_cb(hid_t group, const char *name, const H5L_info_t *info, void *data)
{
    (void)group;
    link_list *l = data;
    if (info->type != H5L_TYPE_HARD) {
        /* External links could make the reader open any file. */
        l->bad_link = true;
        return 1;
    }
    if (l->count == l->capacity) {
        if (l->capacity > INT_MAX / 4) {
            l->nomem = true;
            return 1;
        }
        int cap = l->capacity ? 2 * l->capacity : 16;
        char **names = realloc(l->names, (size_t)cap * sizeof *names);
        if (!names) {
            l->nomem = true;
            return 1;
        }
        l->names = names;
        l->capacity = cap;
    }
    if (strlen(name) > LD_DUMP_MAX_STRING || !(l->names[l->count] = strdup(name))) {
        l->nomem = true;
        return 1;
    }
    l->count++;
    return 0;
}

/* Lists the links of a group in creation order, falling back to name order
 * for groups written without a creation-order index (by other tools). */
static ld_status list_links(hid_t group, const char *what, link_list *l, ld_error *err)
{
    hsize_t idx = 0;
    herr_t rc = H5Literate(group, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, link_list_cb, l);
    if (rc < 0 && !l->bad_link && !l->nomem) {
        link_list_free(l);
        idx = 0;
        rc = H5Literate(group, H5_INDEX_NAME, H5_ITER_INC, &idx, link_list_cb, l);
    }
    if (l->bad_link)
        return ld_error_set(err, LD_ERR_INPUT, "%s holds a soft or external link", what);
    if (l->nomem)
        return ld_error_set(err, LD_ERR_NOMEM, "%s: too many or too long links", what);
    if (rc < 0)
        return ld_error_set(err, LD_ERR_INPUT, "cannot list the links of %s", what);
    return LD_OK;
}

/* --- one dataset ------------------------------------------------------------------ */

static void meta_free(ld_dump_tensor_meta *m)
{
    free((char *)m->name);
    free((char *)m->node);
    free((char *)m->op_type);
    free((char *)m->precision);
    ld_dump_strings_free(m->n_inputs, (const char **)m->inputs);
    m->inputs = NULL;
    m->n_inputs = 0;
}

static ld_status read_shape(hid_t dset, ld_shape *shape, ld_error *err)
{
    ld_status st = LD_OK;
    hid_t space = H5Dget_space(dset);
    H5S_class_t cls = space < 0 ? H5S_NO_CLASS : H5Sget_simple_extent_type(space);
    int rank = cls == H5S_SIMPLE ? H5Sget_simple_extent_ndims(space) : 0;
    hsize_t dims[LD_MAX_RANK];
    shape->rank = 0;
    if (cls != H5S_SCALAR && cls != H5S_SIMPLE)
        st = ld_error_set(err, LD_ERR_INPUT, "has no usable dataspace (null or unreadable)");
    else if (rank < 0 || rank > LD_MAX_RANK)
        st = ld_error_set(err, LD_ERR_UNSUPPORTED, "has rank %d (supported: 0..%d)", rank,
                          LD_MAX_RANK);
    else if (rank > 0 && H5Sget_simple_extent_dims(space, dims, NULL) != rank)
        st = ld_error_set(err, LD_ERR_INPUT, "has unreadable dimensions");
    for (int i = 0; st == LD_OK && i < rank; i++) {
        if (dims[i] > (hsize_t)INT64_MAX)
            st = ld_error_set(err, LD_ERR_INPUT, "has a dimension too large for int64");
        shape->dims[i] = (int64_t)dims[i];
    }
    if (st == LD_OK)
        shape->rank = rank;
    if (space >= 0)
        H5Sclose(space);
    return st;
}

/* The dtype named `name` (the dtype attribute or index column), checked
 * against the dataset's stored type. */
static ld_status check_dtype(hid_t dset, const char *name, ld_dtype *dtype, ld_error *err)
{
    if (!ld_dtype_from_name(name, dtype) || !ld_dtype_is_supported(*dtype))
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "has unknown dtype attribute '%.64s'",
                            name);
    ld_status st = LD_OK;
    char why[160];
    hid_t type = H5Dget_type(dset);
    if (type < 0)
        return ld_error_set(err, LD_ERR_INPUT, "has an unreadable datatype");
    if (!ld_dump_h5_type_matches(type, *dtype, why, sizeof why))
        st = ld_error_set(err, LD_ERR_INPUT, "holds %s, but its dtype attribute says %s", why,
                          ld_dtype_name(*dtype));
    H5Tclose(type);
    return st;
}

static ld_status read_dtype(hid_t dset, ld_dtype *dtype, ld_error *err)
{
    const char *name = NULL;
    ld_status st = ld_dump_attr_read_string(dset, "dtype", true, &name, err);
    if (st == LD_OK)
        st = check_dtype(dset, name, dtype, err);
    free((char *)name);
    return st;
}

/* Shape of the dataset, checked to have a size that fits in memory. */
static ld_status read_checked_shape(hid_t dset, const ld_dump_tensor_meta *m, ld_shape *shape,
                                    ld_error *err)
{
    int64_t count;
    size_t nbytes;
    ld_status st = read_shape(dset, shape, err);
    if (st == LD_OK)
        st = ld_shape_count(shape, &count, "shape", err);
    if (st == LD_OK)
        st = ld_shape_nbytes(count, ld_dtype_size(m->dtype), &nbytes, "shape", err);
    return st;
}

static ld_status read_counters(hid_t dset, ld_layer_counters *c, ld_error *err)
{
    int64_t *fields[5] = {&c->overflows, &c->nans_created, &c->underflows, &c->subnormals,
                          &c->partial_overflows};
    bool found = false;
    ld_status st = ld_dump_attr_read_int64(dset, ld_dump_counter_names[0], fields[0], &found,
                                           err);
    c->present = found;
    /* All five or none. */
    for (int i = 1; st == LD_OK && found && i < 5; i++)
        st = ld_dump_attr_read_int64(dset, ld_dump_counter_names[i], fields[i], NULL, err);
    return st;
}

static ld_status read_meta(hid_t dset, ld_dump_tensor_meta *m, ld_error *err)
{
    int64_t output_index = 0;
    m->graph_output = -1; /* format version 1 does not say */
    ld_status st = ld_dump_attr_read_string(dset, "name", true, &m->name, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(dset, "node", true, &m->node, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(dset, "op_type", true, &m->op_type, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(dset, "precision", true, &m->precision, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_int64(dset, "topo_index", &m->topo_index, NULL, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_int64(dset, "output_index", &output_index, NULL, err);
    if (st == LD_OK && (output_index < 0 || output_index > INT_MAX))
        st = ld_error_set(err, LD_ERR_INPUT, "has output_index %" PRId64 " out of range",
                          output_index);
    m->output_index = (int)output_index;
    if (st == LD_OK)
        st = read_counters(dset, &m->counters, err);
    if (st == LD_OK) { /* optional: absent in dumps written before it was stored */
        const char **inputs = NULL;
        st = ld_dump_attr_read_strings(dset, "inputs", &m->n_inputs, &inputs, err);
        m->inputs = inputs;
    }
    if (st == LD_OK)
        st = read_dtype(dset, &m->dtype, err);
    if (st == LD_OK)
        st = read_checked_shape(dset, m, &m->shape, err);
    return st;
}

static ld_status index_entry(dump_group *g, const char *link, dump_entry *e, ld_error *err)
{
    hid_t dset = H5Dopen2(g->group, link, H5P_DEFAULT);
    if (dset < 0)
        return ld_error_set(err, LD_ERR_INPUT, "'%s/%s' is not a readable dataset", g->path,
                            link);
    ld_status st = read_meta(dset, &e->meta, err);
    if (st != LD_OK)
        ld_error_prefix(err, "dataset '%s/%s'", g->path, link);
    H5Dclose(dset);
    return st;
}

/* --- groups -------------------------------------------------------------------------- */

static int compare_topo(const void *a, const void *b)
{
    const dump_entry *x = a, *y = b;
    if (x->meta.topo_index != y->meta.topo_index)
        return x->meta.topo_index < y->meta.topo_index ? -1 : 1;
    if (x->meta.output_index != y->meta.output_index)
        return x->meta.output_index < y->meta.output_index ? -1 : 1;
    return (x->creation_rank > y->creation_rank) - (x->creation_rank < y->creation_rank);
}

static int compare_name(const void *a, const void *b, void *entries)
{
    const dump_entry *e = entries;
    return strcmp(e[*(const int *)a].meta.name, e[*(const int *)b].meta.name);
}

static ld_status build_name_index(dump_group *g, ld_error *err)
{
    g->by_name = malloc((size_t)(g->count ? g->count : 1) * sizeof *g->by_name);
    if (!g->by_name)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory indexing %s", g->path);
    for (int i = 0; i < g->count; i++)
        g->by_name[i] = i;
    qsort_r(g->by_name, (size_t)g->count, sizeof *g->by_name, compare_name, g->entries);
    for (int i = 1; i < g->count; i++) {
        const char *name = g->entries[g->by_name[i]].meta.name;
        if (strcmp(g->entries[g->by_name[i - 1]].meta.name, name) == 0)
            return ld_error_set(err, LD_ERR_INPUT, "%s holds two tensors named '%s'", g->path,
                                name);
    }
    return LD_OK;
}

/* Indexes every dataset of g (g->group and g->path already set). */
static ld_status index_group(dump_group *g, ld_error *err)
{
    link_list links = {0};
    ld_status st = list_links(g->group, g->path, &links, err);
    if (st != LD_OK)
        goto out;
    g->entries = calloc((size_t)(links.count ? links.count : 1), sizeof *g->entries);
    if (!g->entries) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory indexing %s", g->path);
        goto out;
    }
    for (int i = 0; i < links.count && st == LD_OK; i++) {
        dump_entry *e = &g->entries[i];
        e->creation_rank = i;
        e->link = links.names[i];
        links.names[i] = NULL;
        g->count = i + 1;
        st = index_entry(g, e->link, e, err);
    }
    if (st != LD_OK)
        goto out;
    qsort(g->entries, (size_t)g->count, sizeof *g->entries, compare_topo);
    st = build_name_index(g, err);
out:
    link_list_free(&links);
    return st;
}

/* --- format version 2: a run's index table ------------------------------------------ */

/* ld_dump_index_row_fn: row i describes entry i of the group. */
static ld_status take_row(void *user, int i, const ld_dump_index_row *row, ld_error *err)
{
    dump_group *g = user;
    dump_entry *e = &g->entries[i];
    g->count = i + 1;
    e->creation_rank = i;
    return ld_dump_index_row_meta(row, i, &e->meta, &e->link, err);
}

/* Checks the dataset a row describes: its stored type against the row's
 * dtype, and its shape. */
static ld_status check_entry_dataset(dump_group *g, dump_entry *e, ld_error *err)
{
    hid_t dset = H5Dopen2(g->group, e->link, H5P_DEFAULT);
    if (dset < 0)
        return ld_error_set(err, LD_ERR_INPUT, "'%s/%s' (in the run's index) is not a readable "
                            "dataset", g->path, e->link);
    ld_status st = check_dtype(dset, ld_dtype_name(e->meta.dtype), &e->meta.dtype, err);
    if (st == LD_OK)
        st = read_checked_shape(dset, &e->meta, &e->meta.shape, err);
    if (st != LD_OK)
        ld_error_prefix(err, "dataset '%s/%s'", g->path, e->link);
    H5Dclose(dset);
    return st;
}

/* Indexes run group g from its table index/<link> (format version 2): one
 * row per dataset of the group, nothing else in the group. */
static ld_status index_run_table(dump_group *g, hid_t index, const char *link, ld_error *err)
{
    link_list links = {0};
    ld_status st = list_links(g->group, g->path, &links, err);
    if (st != LD_OK)
        goto out;
    g->entries = calloc((size_t)(links.count ? links.count : 1), sizeof *g->entries);
    if (!g->entries) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory indexing %s", g->path);
        goto out;
    }
    st = ld_dump_index_read(index, link, links.count, take_row, g, err);
    if (st != LD_OK) {
        ld_error_prefix(err, "index table '%s/%s'", LD_DUMP_INDEX_GROUP, link);
        goto out;
    }
    for (int i = 0; i < g->count && st == LD_OK; i++)
        st = check_entry_dataset(g, &g->entries[i], err);
    if (st != LD_OK)
        goto out;
    qsort(g->entries, (size_t)g->count, sizeof *g->entries, compare_topo);
    st = build_name_index(g, err);
out:
    link_list_free(&links);
    return st;
}

static void group_free(dump_group *g)
{
    for (int i = 0; i < g->count; i++) {
        meta_free(&g->entries[i].meta);
        free(g->entries[i].link);
    }
    free(g->entries);
    free(g->by_name);
    free((char *)g->info.name);
    free((char *)g->info.backend);
    free((char *)g->info.config);
    free((char *)g->info.isolated_of);
    free(g->path);
    if (g->group >= 0)
        H5Gclose(g->group);
    *g = (dump_group){.group = H5I_INVALID_HID};
}

static ld_status open_group(hid_t parent, const char *link, const char *parent_path,
                            dump_group *g, ld_error *err)
{
    *g = (dump_group){.group = H5I_INVALID_HID};
    if (asprintf(&g->path, "%s/%s", parent_path, link) < 0) {
        g->path = NULL;
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    g->group = H5Gopen2(parent, link, H5P_DEFAULT);
    if (g->group < 0)
        return ld_error_set(err, LD_ERR_INPUT, "missing or unreadable group '%s'", g->path);
    return LD_OK;
}

/* index: the /index group of a version 2 file, H5I_INVALID_HID in version 1. */
static ld_status read_run(hid_t runs, hid_t index, const char *link, dump_group *g,
                          ld_error *err)
{
    ld_status st = open_group(runs, link, LD_DUMP_RUNS_GROUP, g, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(g->group, "name", true, &g->info.name, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(g->group, "backend", true, &g->info.backend, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(g->group, "config", false, &g->info.config, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(g->group, "isolated_of", false, &g->info.isolated_of, err);
    if (st == LD_OK && !g->info.isolated_of && !(g->info.isolated_of = strdup("")))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st != LD_OK && g->path)
        ld_error_prefix(err, "run group '%s'", g->path);
    if (st == LD_OK)
        st = index >= 0 ? index_run_table(g, index, link, err) : index_group(g, err);
    return st;
}

static ld_status read_runs(ld_dump *d, ld_error *err)
{
    link_list links = {0};
    dump_group runs_group, tables = {.group = H5I_INVALID_HID};
    ld_status st = open_group(d->file, LD_DUMP_RUNS_GROUP + 1, "", &runs_group, err);
    if (st == LD_OK && d->info.format_version >= 2)
        st = open_group(d->file, LD_DUMP_INDEX_GROUP + 1, "", &tables, err);
    if (st == LD_OK)
        st = list_links(runs_group.group, LD_DUMP_RUNS_GROUP, &links, err);
    if (st == LD_OK && links.count > 0) {
        d->runs = calloc((size_t)links.count, sizeof *d->runs);
        if (!d->runs)
            st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; st == LD_OK && i < links.count; i++) {
        d->run_count = i + 1;
        st = read_run(runs_group.group, tables.group, links.names[i], &d->runs[i], err);
        for (int j = 0; st == LD_OK && j < i; j++)
            if (strcmp(d->runs[j].info.name, d->runs[i].info.name) == 0)
                st = ld_error_set(err, LD_ERR_INPUT, "two runs are named '%s'",
                                  d->runs[i].info.name);
    }
    link_list_free(&links);
    group_free(&runs_group);
    group_free(&tables);
    return st;
}

/* --- file ------------------------------------------------------------------------------- */

static ld_status check_format(ld_dump *d, ld_error *err)
{
    const char *format = NULL;
    int64_t version = 0, complete = 0;
    bool found = false;
    ld_status st = ld_dump_attr_read_string(d->file, "format", false, &format, err);
    if (st == LD_OK && (!format || strcmp(format, LD_DUMP_FORMAT_NAME) != 0))
        st = ld_error_set(err, LD_ERR_INPUT, "not a layerdiff dump (no format attribute '%s')",
                          LD_DUMP_FORMAT_NAME);
    free((char *)format);
    if (st == LD_OK)
        st = ld_dump_attr_read_int64(d->file, "format_version", &version, NULL, err);
    if (st == LD_OK && version > LD_DUMP_FORMAT_VERSION)
        st = ld_error_set(err, LD_ERR_UNSUPPORTED,
                          "was written by a newer layerdiff (format version %" PRId64 " > %d)",
                          version, LD_DUMP_FORMAT_VERSION);
    else if (st == LD_OK && version < 1)
        st = ld_error_set(err, LD_ERR_INPUT, "has an invalid format version %" PRId64, version);
    if (st == LD_OK)
        st = ld_dump_attr_read_int64(d->file, "complete", &complete, &found, err);
    if (st == LD_OK && (!found || complete != 1))
        st = ld_error_set(err, LD_ERR_INPUT,
                          "is an incomplete dump (the writer did not finish it)");
    if (st == LD_OK)
        d->info.format_version = (int)version;
    return st;
}

static ld_status read_file_info(ld_dump *d, ld_error *err)
{
    ld_dump_file_info *info = &d->info;
    ld_status st = ld_dump_attr_read_string(d->file, "model_path", true,
                                            &info->model_path, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(d->file, "model_sha256", false,
                                      &info->model_sha256, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(d->file, "tool_version", true,
                                      &info->tool_version, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_string(d->file, "created", true, &info->created, err);
    if (st == LD_OK)
        st = ld_dump_attr_read_int64(d->file, "input_seed", &info->input_seed, NULL, err);
    return st;
}

static ld_status open_hdf5(ld_dump *d, ld_error *err)
{
    FILE *probe = fopen(d->path, "rb");
    if (!probe)
        return ld_error_set(err, LD_ERR_IO, "cannot open: %s", strerror(errno));
    fclose(probe);
    htri_t is_hdf5 = H5Fis_hdf5(d->path);
    if (is_hdf5 <= 0)
        return ld_error_set(err, LD_ERR_INPUT, "not an HDF5 file (so not a layerdiff dump)");
    d->file = H5Fopen(d->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (d->file < 0) {
        char detail[256];
        return ld_error_set(err, LD_ERR_INPUT, "cannot open as HDF5: %s",
                            ld_dump_h5_error_detail(detail, sizeof detail));
    }
    return LD_OK;
}

/* Opens and indexes the file: everything ld_dump_open does but the isolation. */
static ld_status open_indexed(ld_dump **out, const char *path, ld_error *err)
{
    ld_status st = LD_OK;
    ld_dump *d = calloc(1, sizeof *d);
    if (!d || !(d->path = strdup(path))) {
        free(d);
        return ld_error_set(err, LD_ERR_NOMEM, "dump '%s': out of memory", path);
    }
    d->file = H5I_INVALID_HID;
    d->inputs.group = H5I_INVALID_HID;
    st = open_hdf5(d, err);
    if (st == LD_OK)
        st = check_format(d, err);
    if (st == LD_OK)
        st = read_file_info(d, err);
    if (st == LD_OK)
        st = open_group(d->file, LD_DUMP_INPUTS_GROUP + 1, "", &d->inputs, err);
    if (st == LD_OK)
        st = index_group(&d->inputs, err);
    if (st == LD_OK)
        st = read_runs(d, err);
    if (st != LD_OK) {
        ld_error_prefix(err, "dump '%s'", path);
        ld_dump_close(d);
        return st;
    }
    *out = d;
    return LD_OK;
}

static ld_status probe(const char *path, ld_error *err)
{
    ld_dump *d = NULL;
    ld_status st = open_indexed(&d, path, err);
    ld_dump_close(d);
    return st;
}

ld_status ld_dump_open(ld_dump **out, const char *path, ld_error *err)
{
    *out = NULL;
    if (!path)
        return ld_error_set(err, LD_ERR_INTERNAL, "dump path is NULL");
    ld_dump_h5_quiet();
    /* HDF5 1.10 crashes or hangs on some corrupt files: see dump_isolate.c. */
    ld_status st = ld_dump_probe_isolated(path, probe, err);
    if (st != LD_OK)
        return st;
    return open_indexed(out, path, err);
}

void ld_dump_close(ld_dump *d)
{
    if (!d)
        return;
    group_free(&d->inputs);
    for (int i = 0; i < d->run_count; i++)
        group_free(&d->runs[i]);
    free(d->runs);
    free((char *)d->info.model_path);
    free((char *)d->info.model_sha256);
    free((char *)d->info.tool_version);
    free((char *)d->info.created);
    if (d->file >= 0)
        H5Fclose(d->file);
    free(d->path);
    free(d);
}

/* --- queries ----------------------------------------------------------------------------- */

const ld_dump_file_info *ld_dump_info(const ld_dump *d)
{
    return &d->info;
}

int ld_dump_input_count(const ld_dump *d)
{
    return d->inputs.count;
}

/* run = -1 selects the inputs. NULL when out of range. */
static const dump_group *group_at(const ld_dump *d, int run)
{
    if (run == -1)
        return &d->inputs;
    return run >= 0 && run < d->run_count ? &d->runs[run] : NULL;
}

static const dump_entry *entry_at(const ld_dump *d, int run, int i)
{
    const dump_group *g = group_at(d, run);
    return g && i >= 0 && i < g->count ? &g->entries[i] : NULL;
}

const ld_dump_tensor_meta *ld_dump_input_meta(const ld_dump *d, int i)
{
    const dump_entry *e = entry_at(d, -1, i);
    return e ? &e->meta : NULL;
}

int ld_dump_run_count(const ld_dump *d)
{
    return d->run_count;
}

const ld_dump_run_info *ld_dump_run(const ld_dump *d, int i)
{
    return i >= 0 && i < d->run_count ? &d->runs[i].info : NULL;
}

int ld_dump_find_run(const ld_dump *d, const char *name)
{
    for (int i = 0; name && i < d->run_count; i++)
        if (strcmp(d->runs[i].info.name, name) == 0)
            return i;
    return -1;
}

int ld_dump_tensor_count(const ld_dump *d, int run)
{
    const dump_group *g = group_at(d, run);
    return g ? g->count : 0;
}

const ld_dump_tensor_meta *ld_dump_tensor_meta_at(const ld_dump *d, int run, int i)
{
    const dump_entry *e = entry_at(d, run, i);
    return e ? &e->meta : NULL;
}

int ld_dump_find_tensor(const ld_dump *d, int run, const char *name)
{
    const dump_group *g = group_at(d, run);
    if (!g || !name)
        return -1;
    int lo = 0, hi = g->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(g->entries[g->by_name[mid]].meta.name, name);
        if (c == 0)
            return g->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* --- data ------------------------------------------------------------------------------------ */

/* Refuses datasets whose stored size cannot hold their claimed size (a
 * hostile file could otherwise make us allocate far more than it contains)
 * and filters the writer never uses. */
static ld_status check_storage(hid_t dset, size_t nbytes, ld_error *err)
{
    if (nbytes == 0)
        return LD_OK;
    hid_t dcpl = H5Dget_create_plist(dset);
    if (dcpl < 0)
        return ld_error_set(err, LD_ERR_INPUT, "has unreadable creation properties");
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int nfilters = H5Pget_nfilters(dcpl);
    ld_status st = LD_OK;
    for (int i = 0; i < nfilters && st == LD_OK; i++) {
        unsigned flags = 0, config = 0;
        size_t nvalues = 0;
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nvalues, NULL, 0, NULL,
                                         &config);
        if (id != H5Z_FILTER_DEFLATE && id != H5Z_FILTER_SHUFFLE && id != H5Z_FILTER_FLETCHER32)
            st = ld_error_set(err, LD_ERR_UNSUPPORTED, "uses HDF5 filter %d, which layerdiff "
                              "does not read", (int)id);
    }
    H5Pclose(dcpl);
    if (st != LD_OK)
        return st;
    if (nfilters < 0 || layout < 0)
        return ld_error_set(err, LD_ERR_INPUT, "has unreadable layout or filters");
    hsize_t stored = H5Dget_storage_size(dset);
    bool too_small = nfilters > 0 ? stored < nbytes / MAX_COMPRESSION_RATIO : stored < nbytes;
    if (too_small)
        return ld_error_set(err, LD_ERR_INPUT, "stores only %" PRIu64 " bytes for %zu bytes "
                            "of data (truncated or malformed)", (uint64_t)stored, nbytes);
    return LD_OK;
}

/* h5py's bool enum could hold any int8; layerdiff's bool is 0 or 1. */
static ld_status check_bools(const ld_tensor *t, ld_error *err)
{
    const uint8_t *p = t->data;
    for (size_t i = 0; i < t->nbytes; i++)
        if (p[i] > 1)
            return ld_error_set(err, LD_ERR_INPUT, "holds bool value %u at element %zu",
                                p[i], i);
    return LD_OK;
}

ld_status ld_dump_read_tensor(const ld_dump *d, int run, int i, ld_tensor **out, ld_error *err)
{
    *out = NULL;
    const dump_group *g = group_at(d, run);
    const dump_entry *e = entry_at(d, run, i);
    if (!e)
        return ld_error_set(err, LD_ERR_INTERNAL, "dump '%s': no tensor %d in run %d", d->path,
                            i, run);
    ld_tensor *t = NULL;
    hid_t mtype = H5I_INVALID_HID;
    char detail[256];
    int64_t count = 0;
    size_t nbytes = 0;
    hid_t dset = H5Dopen2(g->group, e->link, H5P_DEFAULT);
    ld_status st = dset < 0 ? ld_error_set(err, LD_ERR_INPUT, "cannot open the dataset")
                            : ld_shape_count(&e->meta.shape, &count, "shape", err);
    if (st == LD_OK)
        st = ld_shape_nbytes(count, ld_dtype_size(e->meta.dtype), &nbytes, "shape", err);
    /* Before allocating: a small file can claim a huge dataset. */
    if (st == LD_OK)
        st = check_storage(dset, nbytes, err);
    if (st == LD_OK)
        st = ld_tensor_create(&t, e->meta.name, e->meta.dtype, &e->meta.shape, err);
    if (st == LD_OK && t->count > 0) {
        mtype = ld_dump_h5_mem_type(e->meta.dtype);
        if (mtype < 0 || H5Dread(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)
            st = ld_error_set(err, LD_ERR_INPUT, "cannot read data: %s",
                              ld_dump_h5_error_detail(detail, sizeof detail));
    }
    if (st == LD_OK && t->dtype == LD_DTYPE_BOOL)
        st = check_bools(t, err);
    if (mtype >= 0)
        H5Tclose(mtype);
    if (dset >= 0)
        H5Dclose(dset);
    if (st != LD_OK) {
        ld_error_prefix(err, "dump '%s': tensor '%s' (dataset '%s/%s')", d->path, e->meta.name,
                        g->path, e->link);
        ld_tensor_destroy(t);
        return st;
    }
    *out = t;
    return LD_OK;
}
