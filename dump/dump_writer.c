/* layerdiff — streaming HDF5 dump writer (docs/dump-format.md).
 *
 * Tensors go to disk one at a time (nothing is kept in memory) inside a
 * temporary file "<path>.tmp-<pid>-<random>" in the destination directory;
 * commit closes it and renames it over <path>, which is atomic within one
 * file system. A run killed half-way therefore leaves at most a temporary
 * file, never a file at <path> that looks complete. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "dump/dump_internal.h"

#ifndef LAYERDIFF_VERSION
#define LAYERDIFF_VERSION "unknown"
#endif

/* Chunk size for compressed datasets: big enough that per-chunk overhead is
 * negligible, small enough to stay in cache while it is filtered. */
#define CHUNK_TARGET_BYTES ((size_t)1 << 20)

/* A run group being written, with its index table (format version 2). */
typedef struct open_run {
    hid_t group;      /* H5I_INVALID_HID once closed */
    char *name;       /* for messages */
    ld_dump_index index;
} open_run;

struct ld_dump_writer {
    char *path;       /* final path */
    char *tmp_path;   /* what is being written */
    hid_t file;
    hid_t inputs;     /* /inputs */
    hid_t runs;       /* /runs */
    hid_t index;      /* /index: one table per run */
    open_run *run;    /* every run begun; a handle is an index here */
    int n_run, cap_run;
    int current;      /* the run begin_run opened (add_tensor writes there), -1 */
    hid_t lcpl;       /* link creation: UTF-8 link names */
    hid_t gcpl;       /* group creation: links tracked in creation order */
    hid_t run_gcpl;   /* run groups: no creation order (the index keeps it) */
    /* made once, used for every tensor (the per-call setup of HDF5 objects
       cost as much as writing a small tensor) */
    ld_dump_attr_cache attrs;         /* for the inputs' attributes */
    ld_dump_index_types index_types;  /* the index tables' row types */
    hid_t plain_dcpl;                 /* contiguous dataset properties, or invalid */
    hid_t ftype[LD_DTYPE_COUNT_];     /* per dtype, made on first use */
    hid_t space;                      /* the last tensor's dataspace (H5Dcreate2 copies it), */
    ld_shape space_shape;             /* for that shape: the runs of a layer share it */
    hid_t mtype[LD_DTYPE_COUNT_];
    int gzip_level;
    int version;      /* format version written: 2, or 1 when asked */
    bool sync;
    bool tmp_created; /* tmp_path is ours to remove */
    ld_error failure; /* first error; status LD_OK while healthy */
};

/* Records err as the writer's sticky failure and returns its status. */
static ld_status writer_fail(ld_dump_writer *w, const ld_error *err)
{
    if (w->failure.status == LD_OK && err)
        w->failure = *err;
    return err ? err->status : LD_ERR_INTERNAL;
}

static ld_status writer_check(const ld_dump_writer *w, ld_error *err)
{
    if (!w)
        return ld_error_set(err, LD_ERR_INTERNAL, "dump writer is NULL");
    if (w->failure.status != LD_OK) {
        if (err)
            *err = w->failure;
        return w->failure.status;
    }
    return LD_OK;
}

static char *make_temp_path(const char *path)
{
    uint32_t random_bits = 0;
    if (getrandom(&random_bits, sizeof random_bits, GRND_NONBLOCK) != sizeof random_bits)
        random_bits = (uint32_t)time(NULL) ^ (uint32_t)(uintptr_t)&random_bits;
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp-%ld-%08" PRIx32, path, (long)getpid(), random_bits) < 0)
        return NULL;
    return tmp;
}

static void format_utc_now(char buf[32])
{
    time_t now = time(NULL);
    struct tm tm;
    if (!gmtime_r(&now, &tm) || !strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, 32, "1970-01-01T00:00:00Z");
}

static ld_status create_property_lists(ld_dump_writer *w, ld_error *err)
{
    w->lcpl = H5Pcreate(H5P_LINK_CREATE);
    w->gcpl = H5Pcreate(H5P_GROUP_CREATE);
    w->run_gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (w->lcpl < 0 || w->gcpl < 0 || w->run_gcpl < 0 ||
        H5Pset_char_encoding(w->lcpl, H5T_CSET_UTF8) < 0 ||
        H5Pset_obj_track_times(w->run_gcpl, 0) < 0 ||
        H5Pset_link_creation_order(w->gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED) < 0 ||
        H5Pset_obj_track_times(w->gcpl, 0) < 0)
        return ld_error_set(err, LD_ERR_INTERNAL, "cannot set up HDF5 property lists");
    return LD_OK;
}

/* HDF5 keeps written objects' headers in its metadata cache, decoded, until
 * the cache, 2 MiB growing to 32 MiB by its on-file accounting, evicts them.
 * With format version 1's dozen attributes per dataset (~15 KiB each in
 * memory for ~1.5 KiB in the file) that held 45 MiB more on a 2,304-tensor
 * dump, and evict-on-close, which fixed it, walked the cache's dirty entries
 * at every dataset close: a fifth of the dump's time. Version 2 datasets
 * carry no attributes (their descriptions go to the run's index table), so
 * their headers are small: the cache is kept at 64 KiB, without
 * evict-on-close. Measured (768-node model, 2,304 tensors): see
 * docs/dump-format.md, "Writing". */
#define METADATA_CACHE_BYTES ((size_t)64 << 10)
static bool bound_metadata_cache(hid_t fapl, int version)
{
    H5AC_cache_config_t c;
    memset(&c, 0, sizeof c);
    c.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    if (H5Pset_evict_on_close(fapl, version < 2) < 0 || H5Pget_mdc_config(fapl, &c) < 0)
        return false;
    c.set_initial_size = true;
    c.initial_size = METADATA_CACHE_BYTES / 2;
    c.min_size = METADATA_CACHE_BYTES / 4;
    c.max_size = METADATA_CACHE_BYTES;
    return H5Pset_mdc_config(fapl, &c) >= 0;
}

static ld_status create_file(ld_dump_writer *w, ld_error *err)
{
    char detail[256];
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    /* 1.8 object formats: readable by every HDF5 since 2008 (h5py, MATLAB,
     * h5dump); SEMI close degree: H5Fclose fails instead of silently keeping
     * the file open if an object were left open; no timestamp on the root
     * group, so the same run gives the same bytes. Memory: see
     * bound_metadata_cache. No data sieve buffer: every dataset is written
     * whole, once, so HDF5's default (a zeroed buffer of up to 64 KiB per
     * dataset, the data copied into it and written at H5Dclose) only added
     * an allocation and a copy to each tensor under 64 KiB; without it each
     * H5Dwrite goes straight to pwrite. */
    if (fapl < 0 || fcpl < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) < 0 ||
        H5Pset_fclose_degree(fapl, H5F_CLOSE_SEMI) < 0 || H5Pset_obj_track_times(fcpl, 0) < 0 ||
        H5Pset_sieve_buf_size(fapl, 0) < 0 || !bound_metadata_cache(fapl, w->version)) {
        if (fapl >= 0)
            H5Pclose(fapl);
        if (fcpl >= 0)
            H5Pclose(fcpl);
        return ld_error_set(err, LD_ERR_INTERNAL, "cannot set up HDF5 file properties");
    }
    w->file = H5Fcreate(w->tmp_path, H5F_ACC_EXCL, fcpl, fapl);
    if (w->file < 0)
        ld_dump_h5_error_detail(detail, sizeof detail);
    else
        w->tmp_created = true;
    H5Pclose(fapl);
    H5Pclose(fcpl);
    if (w->file < 0)
        return ld_error_set(err, LD_ERR_IO, "cannot create dump '%s' (temporary file '%s'): %s",
                            w->path, w->tmp_path, detail);
    w->inputs = H5Gcreate2(w->file, LD_DUMP_INPUTS_GROUP, w->lcpl, w->gcpl, H5P_DEFAULT);
    w->runs = H5Gcreate2(w->file, LD_DUMP_RUNS_GROUP, w->lcpl, w->gcpl, H5P_DEFAULT);
    if (w->version >= 2)
        w->index = H5Gcreate2(w->file, LD_DUMP_INDEX_GROUP, w->lcpl, w->gcpl, H5P_DEFAULT);
    if (w->inputs < 0 || w->runs < 0 || (w->version >= 2 && w->index < 0))
        return ld_error_set(err, LD_ERR_IO, "cannot create groups in dump '%s': %s", w->path,
                            ld_dump_h5_error_detail(detail, sizeof detail));
    return LD_OK;
}

static ld_status write_file_attributes(ld_dump_writer *w, const ld_dump_file_info *info,
                                       ld_error *err)
{
    char created[32];
    format_utc_now(created);
    ld_status st = ld_dump_attr_write_string(w->file, "format", LD_DUMP_FORMAT_NAME, err);
    if (st == LD_OK)
        st = ld_dump_attr_write_int64(w->file, "format_version", w->version, err);
    if (st == LD_OK)
        st = ld_dump_attr_write_string(w->file, "model_path",
                                       info && info->model_path ? info->model_path : "", err);
    if (st == LD_OK && info && info->model_sha256)
        st = ld_dump_attr_write_string(w->file, "model_sha256", info->model_sha256, err);
    if (st == LD_OK)
        st = ld_dump_attr_write_string(w->file, "tool_version",
                                       info && info->tool_version ? info->tool_version
                                                                  : LAYERDIFF_VERSION, err);
    if (st == LD_OK)
        st = ld_dump_attr_write_string(w->file, "created",
                                       info && info->created ? info->created : created, err);
    if (st == LD_OK)
        st = ld_dump_attr_write_int64(w->file, "input_seed", info ? info->input_seed : -1, err);
    if (st != LD_OK)
        ld_error_prefix(err, "dump '%s'", w->path);
    return st;
}

ld_status ld_dump_writer_open(ld_dump_writer **out, const char *path,
                              const ld_dump_file_info *info,
                              const ld_dump_writer_options *opts, ld_error *err)
{
    *out = NULL;
    if (!path || !*path)
        return ld_error_set(err, LD_ERR_USAGE, "dump path is empty");
    int gzip_level = opts ? opts->gzip_level : 0;
    if (gzip_level < 0 || gzip_level > 9)
        return ld_error_set(err, LD_ERR_USAGE, "dump '%s': gzip level %d is outside 0..9", path,
                            gzip_level);
    int version = opts && opts->format_version ? opts->format_version : LD_DUMP_FORMAT_VERSION;
    if (version < 1 || version > LD_DUMP_FORMAT_VERSION)
        return ld_error_set(err, LD_ERR_USAGE, "dump '%s': cannot write format version %d", path,
                            version);
    ld_dump_h5_quiet();

    ld_status st = LD_OK;
    ld_dump_writer *w = calloc(1, sizeof *w);
    if (!w)
        return ld_error_set(err, LD_ERR_NOMEM, "dump '%s': out of memory", path);
    w->file = w->inputs = w->runs = w->index = w->lcpl = w->gcpl = w->run_gcpl = H5I_INVALID_HID;
    w->index_types.mem = w->index_types.file = w->index_types.dxpl = H5I_INVALID_HID;
    w->attrs.str_type = w->attrs.scalar = w->plain_dcpl = w->space = H5I_INVALID_HID;
    for (int d = 0; d < LD_DTYPE_COUNT_; d++)
        w->ftype[d] = w->mtype[d] = H5I_INVALID_HID;
    w->current = -1;
    w->gzip_level = gzip_level;
    w->version = version;
    w->sync = opts && opts->sync;
    w->path = strdup(path);
    w->tmp_path = make_temp_path(path);
    if (!w->path || !w->tmp_path) {
        st = ld_error_set(err, LD_ERR_NOMEM, "dump '%s': out of memory", path);
        goto out;
    }
    st = create_property_lists(w, err);
    if (st == LD_OK)
        st = ld_dump_attr_cache_init(&w->attrs, err);
    if (st == LD_OK)
        st = ld_dump_index_types_init(&w->index_types, err);
    if (st == LD_OK)
        st = create_file(w, err);
    if (st == LD_OK)
        st = write_file_attributes(w, info, err);
out:
    if (st != LD_OK) {
        ld_dump_writer_abort(w);
        return st;
    }
    *out = w;
    return LD_OK;
}

const char *ld_dump_writer_temp_path(const ld_dump_writer *w)
{
    return w ? w->tmp_path : NULL;
}

/* --- tensors ------------------------------------------------------------------ */

/* Chunk shape of about CHUNK_TARGET_BYTES: whole trailing axes while they
 * fit, then a slice of the next axis, then 1 for the leading axes. */
static void chunk_dims(const ld_shape *shape, size_t elem_size, hsize_t *chunk)
{
    size_t inner = elem_size;
    int i = shape->rank - 1;
    for (; i >= 0; i--) {
        size_t d = (size_t)shape->dims[i];
        if (d > CHUNK_TARGET_BYTES / inner)
            break;
        chunk[i] = d;
        inner *= d;
    }
    if (i >= 0) {
        size_t part = CHUNK_TARGET_BYTES / inner;
        chunk[i] = part > 0 ? part : 1;
        for (i--; i >= 0; i--)
            chunk[i] = 1;
    }
}

/* Dataset creation properties: contiguous by default; chunked with
 * shuffle + gzip when asked (not possible for scalars or empty tensors,
 * which stay contiguous). Fill values are never written: every dataset is
 * written whole right after it is created. Object timestamps are off so
 * that the same run gives the same bytes. */
static hid_t dataset_create_plist(const ld_dump_writer *w, const ld_tensor *t)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl < 0)
        return dcpl;
    /* The dozen attributes stay in the object header (HDF5 would move more
     * than 8 into a separate heap and B-tree per dataset: 2x slower, bigger). */
    bool ok = H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0 &&
              H5Pset_obj_track_times(dcpl, 0) >= 0 && H5Pset_attr_phase_change(dcpl, 32, 24) >= 0;
    if (ok && w->gzip_level > 0 && t->shape.rank > 0 && t->count > 0) {
        hsize_t chunk[LD_MAX_RANK];
        chunk_dims(&t->shape, ld_dtype_size(t->dtype), chunk);
        ok = H5Pset_chunk(dcpl, t->shape.rank, chunk) >= 0 && H5Pset_shuffle(dcpl) >= 0 &&
             H5Pset_deflate(dcpl, (unsigned)w->gzip_level) >= 0;
    }
    if (!ok) {
        H5Pclose(dcpl);
        return H5I_INVALID_HID;
    }
    return dcpl;
}

static hid_t tensor_dataspace(const ld_shape *shape)
{
    if (shape->rank == 0)
        return H5Screate(H5S_SCALAR);
    hsize_t dims[LD_MAX_RANK];
    for (int i = 0; i < shape->rank; i++)
        dims[i] = (hsize_t)shape->dims[i];
    return H5Screate_simple(shape->rank, dims, NULL);
}

/* The dataspace of shape, borrowed from the writer (valid until the next
 * call). A comparing run writes each layer's reference, test and isolated
 * tensors one after another with the same shape, so the last dataspace is
 * kept rather than made and closed per tensor (2,400 instructions each). */
static hid_t writer_dataspace(ld_dump_writer *w, const ld_shape *shape)
{
    bool same = w->space >= 0 && w->space_shape.rank == shape->rank;
    for (int i = 0; same && i < shape->rank; i++)
        same = w->space_shape.dims[i] == shape->dims[i];
    if (same)
        return w->space;
    if (w->space >= 0)
        H5Sclose(w->space);
    w->space = tensor_dataspace(shape);
    w->space_shape = *shape;
    return w->space;
}

static ld_status write_tensor_attributes(ld_dump_writer *w, hid_t dset, const ld_tensor *t,
                                         const ld_dump_tensor_meta *m, ld_error *err)
{
    const ld_dump_attr_cache *c = &w->attrs;
    ld_status st = ld_dump_attr_put_string(dset, c, "name", m->name, err);
    if (st == LD_OK)
        st = ld_dump_attr_put_string(dset, c, "node", m->node, err);
    if (st == LD_OK)
        st = ld_dump_attr_put_string(dset, c, "op_type", m->op_type, err);
    if (st == LD_OK)
        st = ld_dump_attr_put_int64(dset, c, "topo_index", m->topo_index, err);
    if (st == LD_OK)
        st = ld_dump_attr_put_int64(dset, c, "output_index", m->output_index, err);
    if (st == LD_OK)
        st = ld_dump_attr_put_string(dset, c, "precision", m->precision, err);
    if (st == LD_OK)
        st = ld_dump_attr_put_string(dset, c, "dtype", ld_dtype_name(t->dtype), err);
    if (st == LD_OK && m->n_inputs > 0)
        st = ld_dump_attr_write_strings(dset, "inputs", m->n_inputs, m->inputs, err);
    if (m->counters.present) {
        const int64_t values[5] = {m->counters.overflows, m->counters.nans_created,
                                   m->counters.underflows, m->counters.subnormals,
                                   m->counters.partial_overflows};
        for (int i = 0; i < 5 && st == LD_OK; i++)
            st = ld_dump_attr_put_int64(dset, c, ld_dump_counter_names[i], values[i], err);
    }
    return st;
}

/* The file and memory types of dtype d, made on first use. */
static bool types_for(ld_dump_writer *w, ld_dtype d, hid_t *ftype, hid_t *mtype)
{
    if (w->ftype[d] < 0)
        w->ftype[d] = ld_dump_h5_file_type(d);
    if (w->mtype[d] < 0)
        w->mtype[d] = ld_dump_h5_mem_type(d);
    *ftype = w->ftype[d];
    *mtype = w->mtype[d];
    return *ftype >= 0 && *mtype >= 0;
}

/* Dataset creation properties for t: the writer's contiguous ones when
 * that is what t gets. *made: the caller must close the returned list. */
static hid_t dcpl_for(ld_dump_writer *w, const ld_tensor *t, bool *made)
{
    *made = w->gzip_level > 0 && t->shape.rank > 0 && t->count > 0;
    if (*made)
        return dataset_create_plist(w, t);
    if (w->plain_dcpl < 0)
        w->plain_dcpl = dataset_create_plist(w, t);
    return w->plain_dcpl;
}

static ld_status check_tensor(const ld_tensor *t, const ld_dump_tensor_meta *m, ld_error *err)
{
    if (!t || !m || !m->name)
        return ld_error_set(err, LD_ERR_INTERNAL, "tensor, metadata or name is NULL");
    if (!ld_dtype_is_supported(t->dtype))
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "dtype %s cannot be dumped",
                            ld_dtype_name(t->dtype));
    int64_t count;
    size_t nbytes;
    ld_status st = ld_shape_count(&t->shape, &count, NULL, err);
    if (st == LD_OK)
        st = ld_shape_nbytes(count, ld_dtype_size(t->dtype), &nbytes, NULL, err);
    if (st != LD_OK)
        return st;
    if (count != t->count || nbytes != t->nbytes || (nbytes > 0 && !t->data))
        return ld_error_set(err, LD_ERR_INTERNAL, "tensor's count, size or data is inconsistent");
    return LD_OK;
}

/* "run '<run>'", or "inputs" for run NULL, in buf: the group in messages
 * (made only for them: formatting it per tensor cost 800 instructions). */
static const char *where_of(char buf[160], const char *run)
{
    if (!run)
        return "inputs";
    snprintf(buf, 160, "run '%.120s'", run);
    return buf;
}

/* Creates dataset <group>/<escaped name>, writes the data, then its
 * description: a row of the run's index, or (index NULL: model inputs) the
 * dataset's attributes. `run` names the run in messages (NULL: the inputs). */
static ld_status write_dataset(ld_dump_writer *w, hid_t group, ld_dump_index *index,
                               const char *run, const ld_tensor *t,
                               const ld_dump_tensor_meta *m, ld_error *err)
{
    char where[160];
    ld_status st = check_tensor(t, m, err);
    char detail[256];
    char *link = NULL;
    hid_t ftype = H5I_INVALID_HID, mtype = H5I_INVALID_HID, space = H5I_INVALID_HID;
    hid_t dcpl = H5I_INVALID_HID, dset = H5I_INVALID_HID;
    bool own_dcpl = false;
    if (st != LD_OK)
        goto out;
    link = ld_dump_escape_name(m->name);
    if (!link) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    space = writer_dataspace(w, &t->shape);
    dcpl = dcpl_for(w, t, &own_dcpl);
    if (!types_for(w, t->dtype, &ftype, &mtype) || space < 0 || dcpl < 0) {
        st = ld_error_set(err, LD_ERR_INTERNAL, "cannot build HDF5 type or properties");
        goto out;
    }
    dset = H5Dcreate2(group, link, ftype, space, w->lcpl, dcpl, H5P_DEFAULT);
    if (dset < 0 && H5Lexists(group, link, H5P_DEFAULT) > 0) { /* looked up only now */
        st = ld_error_set(err, LD_ERR_INPUT, "duplicate tensor name in %s", where_of(where, run));
        goto out;
    }
    if (dset < 0 ||
        (t->count > 0 && H5Dwrite(dset, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0)) {
        st = ld_error_set(err, LD_ERR_IO, "%s", ld_dump_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    st = index ? ld_dump_index_add(index, link, m, t->dtype, err)
               : write_tensor_attributes(w, dset, t, m, err);
out:
    if (dset >= 0 && H5Dclose(dset) < 0 && st == LD_OK)
        st = ld_error_set(err, LD_ERR_IO, "%s", ld_dump_h5_error_detail(detail, sizeof detail));
    if (dcpl >= 0 && own_dcpl)
        H5Pclose(dcpl);
    free(link); /* space is the writer's */
    if (st != LD_OK) {
        ld_error_prefix(err, "dump '%s': cannot write tensor '%s' of %s", w->path,
                        m && m->name ? m->name : "(null)", where_of(where, run));
        writer_fail(w, err);
    }
    return st;
}

ld_status ld_dump_writer_add_input(ld_dump_writer *w, const ld_tensor *t, ld_error *err)
{
    ld_status st = writer_check(w, err);
    if (st != LD_OK)
        return st;
    ld_dump_tensor_meta m = {
        .name = t ? t->name : NULL, .node = "", .op_type = "", .topo_index = -1,
        .output_index = 0, .precision = "",
    };
    return write_dataset(w, w->inputs, NULL, NULL, t, &m, err);
}

/* The open run behind handle, or NULL with an internal error in err. */
static open_run *run_at(ld_dump_writer *w, int handle, ld_error *err)
{
    if (handle < 0 || handle >= w->n_run || w->run[handle].group < 0) {
        ld_error_set(err, LD_ERR_INTERNAL, "dump '%s': tensor written outside an open run",
                     w->path);
        return NULL;
    }
    return &w->run[handle];
}

ld_status ld_dump_writer_add_tensor_to(ld_dump_writer *w, int run, const ld_tensor *t,
                                       const ld_dump_tensor_meta *meta, ld_error *err)
{
    ld_status st = writer_check(w, err);
    if (st != LD_OK)
        return st;
    open_run *r = run_at(w, run, err);
    if (!r)
        return LD_ERR_INTERNAL;
    return write_dataset(w, r->group, w->version >= 2 ? &r->index : NULL, r->name, t, meta, err);
}

ld_status ld_dump_writer_add_tensor(ld_dump_writer *w, const ld_tensor *t,
                                    const ld_dump_tensor_meta *meta, ld_error *err)
{
    return ld_dump_writer_add_tensor_to(w, w ? w->current : -1, t, meta, err);
}

/* --- runs --------------------------------------------------------------------- */

static ld_status write_run_attributes(hid_t group, const ld_dump_run_info *run, ld_error *err)
{
    ld_status st = ld_dump_attr_write_string(group, "name", run->name, err);
    if (st == LD_OK)
        st = ld_dump_attr_write_string(group, "backend", run->backend, err);
    if (st == LD_OK)
        st = ld_dump_attr_write_string(group, "config", run->config, err);
    if (st == LD_OK && run->isolated_of && *run->isolated_of) /* optional: ordinary runs
                                                                  stay as before */
        st = ld_dump_attr_write_string(group, "isolated_of", run->isolated_of, err);
    return st;
}

static ld_status grow_runs(ld_dump_writer *w, ld_error *err)
{
    if (w->n_run < w->cap_run)
        return LD_OK;
    int cap = w->cap_run ? 2 * w->cap_run : 4;
    open_run *grown = realloc(w->run, (size_t)cap * sizeof *grown);
    if (!grown)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    w->run = grown;
    w->cap_run = cap;
    return LD_OK;
}

ld_status ld_dump_writer_open_run(ld_dump_writer *w, const ld_dump_run_info *run, int *handle,
                                  ld_error *err)
{
    ld_status st = writer_check(w, err);
    if (st != LD_OK)
        return st;
    if (!run || !run->name || !*run->name)
        return ld_error_set(err, LD_ERR_INTERNAL, "dump '%s': run without a name", w->path);
    char detail[256];
    char *link = ld_dump_escape_name(run->name);
    open_run r = {.group = H5I_INVALID_HID, .name = strdup(run->name),
                  .index = {.dset = H5I_INVALID_HID}};
    if (!link || !r.name || grow_runs(w, err) != LD_OK) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    htri_t exists = H5Lexists(w->runs, link, H5P_DEFAULT);
    if (exists != 0) {
        st = exists > 0 ? ld_error_set(err, LD_ERR_INPUT, "duplicate run name")
                        : ld_error_set(err, LD_ERR_IO, "cannot look up run");
        goto out;
    }
    /* No creation-order index: the index table keeps the order, and a plain
     * group takes a link faster. */
    r.group = H5Gcreate2(w->runs, link, w->lcpl, w->version >= 2 ? w->run_gcpl : w->gcpl,
                         H5P_DEFAULT);
    if (r.group < 0) {
        st = ld_error_set(err, LD_ERR_IO, "%s", ld_dump_h5_error_detail(detail, sizeof detail));
        goto out;
    }
    if (w->version >= 2)
        st = ld_dump_index_create(&r.index, w->index, link, w->lcpl, &w->index_types, err);
    if (st != LD_OK)
        goto out;
    w->run[w->n_run] = r; /* closed with the writer from here on */
    *handle = w->n_run++;
    r = (open_run){.group = H5I_INVALID_HID, .index = {.dset = H5I_INVALID_HID}};
    st = write_run_attributes(w->run[*handle].group, run, err);
out:
    free(link);
    free(r.name);
    ld_dump_index_close(&r.index);
    if (r.group >= 0)
        H5Gclose(r.group);
    if (st != LD_OK) {
        ld_error_prefix(err, "dump '%s': cannot start run '%s'", w->path, run->name);
        return writer_fail(w, err);
    }
    return LD_OK;
}

ld_status ld_dump_writer_close_run(ld_dump_writer *w, int handle, ld_error *err)
{
    ld_status st = writer_check(w, err);
    if (st != LD_OK)
        return st;
    open_run *r = handle >= 0 && handle < w->n_run && w->run[handle].group >= 0 ? &w->run[handle]
                                                                                : NULL;
    if (!r)
        return ld_error_set(err, LD_ERR_INTERNAL, "dump '%s': closing a run that is not open",
                            w->path);
    char detail[256];
    st = ld_dump_index_flush(&r->index, err);
    ld_dump_index_close(&r->index);
    herr_t closed = H5Gclose(r->group);
    r->group = H5I_INVALID_HID;
    if (st != LD_OK) {
        ld_error_prefix(err, "dump '%s': run '%s'", w->path, r->name);
        st = writer_fail(w, err);
    } else if (closed < 0) {
        ld_error_set(err, LD_ERR_IO, "dump '%s': cannot close run '%s': %s", w->path, r->name,
                     ld_dump_h5_error_detail(detail, sizeof detail));
        st = writer_fail(w, err);
    }
    if (w->current == handle)
        w->current = -1;
    return st;
}

ld_status ld_dump_writer_begin_run(ld_dump_writer *w, const ld_dump_run_info *run,
                                   ld_error *err)
{
    ld_status st = writer_check(w, err);
    if (st != LD_OK)
        return st;
    if (w->current >= 0)
        return ld_error_set(err, LD_ERR_INTERNAL, "dump '%s': run '%s' begun inside run '%s'",
                            w->path, run && run->name ? run->name : "", w->run[w->current].name);
    int handle;
    st = ld_dump_writer_open_run(w, run, &handle, err);
    if (st == LD_OK)
        w->current = handle;
    return st;
}

ld_status ld_dump_writer_end_run(ld_dump_writer *w, ld_error *err)
{
    ld_status st = writer_check(w, err);
    if (st != LD_OK)
        return st;
    if (w->current < 0)
        return ld_error_set(err, LD_ERR_INTERNAL, "dump '%s': end_run without a run", w->path);
    return ld_dump_writer_close_run(w, w->current, err);
}

/* --- finishing ---------------------------------------------------------------- */

/* Closes every HDF5 object of the writer; returns false when closing the
 * file failed (data may not have reached it), with detail filled. */
static bool close_all(ld_dump_writer *w, char *detail, size_t size)
{
    for (int i = 0; i < w->n_run; i++) {
        ld_dump_index_close(&w->run[i].index);
        if (w->run[i].group >= 0) {
            H5Gclose(w->run[i].group);
            w->run[i].group = H5I_INVALID_HID;
        }
    }
    if (w->index >= 0)
        H5Gclose(w->index);
    if (w->inputs >= 0)
        H5Gclose(w->inputs);
    if (w->runs >= 0)
        H5Gclose(w->runs);
    if (w->lcpl >= 0)
        H5Pclose(w->lcpl);
    if (w->gcpl >= 0)
        H5Pclose(w->gcpl);
    if (w->run_gcpl >= 0)
        H5Pclose(w->run_gcpl);
    if (w->plain_dcpl >= 0)
        H5Pclose(w->plain_dcpl);
    if (w->space >= 0)
        H5Sclose(w->space);
    w->space = H5I_INVALID_HID;
    for (int d = 0; d < LD_DTYPE_COUNT_; d++) {
        if (w->ftype[d] >= 0)
            H5Tclose(w->ftype[d]);
        if (w->mtype[d] >= 0)
            H5Tclose(w->mtype[d]);
        w->ftype[d] = w->mtype[d] = H5I_INVALID_HID;
    }
    ld_dump_attr_cache_close(&w->attrs);
    ld_dump_index_types_close(&w->index_types);
    w->plain_dcpl = H5I_INVALID_HID;
    bool ok = true;
    if (w->file >= 0 && H5Fclose(w->file) < 0) {
        ld_dump_h5_error_detail(detail, size);
        ok = false;
    }
    w->inputs = w->runs = w->index = w->lcpl = w->gcpl = w->run_gcpl = w->file = H5I_INVALID_HID;
    return ok;
}

static void writer_free(ld_dump_writer *w)
{
    free(w->path);
    free(w->tmp_path);
    for (int i = 0; i < w->n_run; i++)
        free(w->run[i].name);
    free(w->run);
    free(w);
}

/* fsync of the file, then of its directory so the rename is durable too. */
static ld_status sync_path(const char *path, bool directory, ld_error *err)
{
    int fd = open(path, (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        return ld_error_set(err, LD_ERR_IO, "cannot sync '%s': %s", path, strerror(saved));
    }
    close(fd);
    return LD_OK;
}

static ld_status sync_parent_dir(const char *path, ld_error *err)
{
    char *copy = strdup(path);
    if (!copy)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_status st = sync_path(dirname(copy), true, err);
    free(copy);
    return st;
}

ld_status ld_dump_writer_commit(ld_dump_writer *w, ld_error *err)
{
    ld_status st = writer_check(w, err);
    char detail[256];
    if (!w)
        return st;
    if (st != LD_OK)
        goto out;
    for (int i = 0; i < w->n_run && st == LD_OK; i++)
        if (w->run[i].group >= 0)
            st = ld_dump_writer_close_run(w, i, err);
    if (st != LD_OK)
        goto out;
    /* Written last: a reader can tell a finished file even if it was copied
     * from a temporary name by hand. */
    st = ld_dump_attr_write_int64(w->file, "complete", 1, err);
    if (st != LD_OK) {
        ld_error_prefix(err, "dump '%s'", w->path);
        goto out;
    }
    if (!close_all(w, detail, sizeof detail)) {
        st = ld_error_set(err, LD_ERR_IO, "dump '%s': cannot finish temporary file '%s': %s",
                          w->path, w->tmp_path, detail);
        goto out;
    }
    if (w->sync && (st = sync_path(w->tmp_path, false, err)) != LD_OK)
        goto out;
    if (rename(w->tmp_path, w->path) != 0) {
        st = ld_error_set(err, LD_ERR_IO, "cannot rename temporary dump '%s' to '%s': %s",
                          w->tmp_path, w->path, strerror(errno));
        goto out;
    }
    if (w->sync)
        st = sync_parent_dir(w->path, err); /* the file is in place: keep it */
    writer_free(w);
    return st;
out:
    ld_dump_writer_abort(w);
    return st;
}

void ld_dump_writer_abort(ld_dump_writer *w)
{
    if (!w)
        return;
    char detail[256];
    close_all(w, detail, sizeof detail);
    if (w->tmp_created)
        unlink(w->tmp_path);
    writer_free(w);
}
