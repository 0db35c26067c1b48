/* layerdiff — model inputs loaded from files (--load-inputs) and the
 * assembly of a run's inputs, loaded or generated (see inputs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/inputs_internal.h"
#include "layerdiff/dump.h"
#include "layerdiff/onnx.h"

typedef enum file_kind { FILE_NPY, FILE_HDF5, FILE_PB } file_kind;

static bool path_exists(const char *path, bool *is_dir)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return false;
    if (is_dir)
        *is_dir = S_ISDIR(sb.st_mode);
    return true;
}

/* Told apart by content: the .npy magic, the HDF5 signature, else a
 * serialized TensorProto. */
static ld_status detect_kind(const char *path, file_kind *kind, ld_error *err)
{
    static const unsigned char npy[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    static const unsigned char hdf5[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return ld_error_set(err, LD_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got >= sizeof npy && memcmp(head, npy, sizeof npy) == 0)
        *kind = FILE_NPY;
    else if (got == sizeof hdf5 && memcmp(head, hdf5, sizeof hdf5) == 0)
        *kind = FILE_HDF5;
    else
        *kind = FILE_PB;
    return LD_OK;
}

/* Input `name` of the dump at path into a new tensor. */
static ld_status load_from_dump(const ld_dump *d, const char *path, const char *name,
                                ld_tensor **out, ld_error *err)
{
    int n = ld_dump_input_count(d);
    for (int i = 0; i < n; i++)
        if (strcmp(ld_dump_input_meta(d, i)->name, name) == 0)
            return ld_dump_read_tensor(d, -1, i, out, err);
    return ld_error_set(err, LD_ERR_INPUT, "input '%s': dump '%s' has no such input (it holds %d "
                        "input%s)", name, path, n, n == 1 ? "" : "s");
}

/* One file (.npy, .pb, or a dump holding input `name`) into a new tensor. */
static ld_status load_file(const char *path, const char *name, ld_tensor **out, ld_error *err)
{
    file_kind kind;
    ld_status st = detect_kind(path, &kind, err);
    if (st != LD_OK)
        return st;
    if (kind == FILE_NPY)
        return ld_npy_read_file(out, path, name, err);
    if (kind == FILE_HDF5) {
        ld_dump *d = NULL;
        st = ld_dump_open(&d, path, err);
        if (st == LD_OK)
            st = load_from_dump(d, path, name, out, err);
        ld_dump_close(d);
        return st;
    }
    st = ld_onnx_load_tensor_file(out, path, err);
    if (st == LD_OK)
        st = ld_tensor_set_name(*out, name, err);
    return st;
}

static bool is_regular_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The file of input k in a folder: NAME.npy (the name escaped as in dumps
 * when it is not a plain file name, or when only the escaped file exists),
 * then input_<k>.pb. *out is new. */
static ld_status find_in_folder(const char *dir, const char *name, int k, char **out,
                                ld_error *err)
{
    char *escaped = ld_dump_escape_name(name);
    if (!escaped)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    bool plain = *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
    const char *stem = plain ? name : escaped;
    ld_status st = LD_OK;
    *out = NULL;
    for (int i = 0; i < 3 && !*out; i++) {
        char *path = NULL;
        int n = i == 0   ? asprintf(&path, "%s/%s.npy", dir, stem)
                : i == 1 ? asprintf(&path, "%s/%s.npy", dir, escaped)
                         : asprintf(&path, "%s/input_%d.pb", dir, k);
        if (n < 0) {
            st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
            break;
        }
        if (is_regular_file(path))
            *out = path;
        else
            free(path);
    }
    if (st == LD_OK && !*out)
        st = ld_error_set(err, LD_ERR_INPUT, "input '%s': folder '%s' has neither %s.npy nor "
                          "input_%d.pb", name, dir, stem, k);
    free(escaped);
    return st;
}

static ld_status load_folder(const ld_graph *g, const char *dir, ld_tensor **loaded, ld_error *err)
{
    for (int k = 0; k < g->n_inputs; k++) {
        const char *name = g->values[g->inputs[k]].name;
        char *path = NULL;
        ld_status st = find_in_folder(dir, name, k, &path, err);
        if (st == LD_OK)
            st = load_file(path, name, &loaded[k], err);
        free(path);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

static ld_status load_single(const ld_graph *g, const char *path, ld_tensor **loaded,
                             ld_error *err)
{
    file_kind kind;
    ld_status st = detect_kind(path, &kind, err);
    if (st != LD_OK)
        return st;
    if (kind == FILE_HDF5) {
        ld_dump *d = NULL;
        st = ld_dump_open(&d, path, err);
        for (int k = 0; st == LD_OK && k < g->n_inputs; k++)
            st = load_from_dump(d, path, g->values[g->inputs[k]].name, &loaded[k], err);
        ld_dump_close(d);
        return st;
    }
    if (g->n_inputs != 1)
        return ld_error_set(err, LD_ERR_USAGE, "--load-inputs '%s': one file can feed only a "
                            "model with one input, this one has %d; give a folder or NAME:FILE "
                            "pairs", path, g->n_inputs);
    return load_file(path, g->values[g->inputs[0]].name, &loaded[0], err);
}

/* "NAME:FILE" split at the first ':' whose left part is an input name: *k
 * is that input, *file points into item. False when no split matches. */
static bool split_pair(const ld_graph *g, const char *item, int *k, const char **file)
{
    for (const char *colon = strchr(item, ':'); colon; colon = strchr(colon + 1, ':')) {
        size_t len = (size_t)(colon - item);
        for (int i = 0; i < g->n_inputs; i++) {
            const char *name = g->values[g->inputs[i]].name;
            if (strlen(name) == len && strncmp(name, item, len) == 0) {
                *k = i;
                *file = colon + 1;
                return true;
            }
        }
    }
    return false;
}

static ld_status load_pair(const ld_graph *g, const char *item, ld_tensor **loaded, ld_error *err)
{
    int k;
    const char *file;
    if (split_pair(g, item, &k, &file)) {
        const char *name = g->values[g->inputs[k]].name;
        if (loaded[k])
            return ld_error_set(err, LD_ERR_USAGE, "--load-inputs gives input '%s' twice", name);
        return load_file(file, name, &loaded[k], err);
    }
    char names[512];
    ld_inputs_list_names(g, names, sizeof names);
    if (!strchr(item, ':'))
        return ld_error_set(err, LD_ERR_USAGE, "--load-inputs '%s': no such file or folder "
                            "(and not NAME:FILE)", item);
    return ld_error_set(err, LD_ERR_USAGE, "--load-inputs '%s': the model has no input named "
                        "like the part before ':' (inputs: %s)", item, names);
}

/* One --load-inputs value of NAME:FILE items. A value that is one pair whose
 * file exists is not split, so a path with commas works given alone. */
static ld_status load_pairs(const ld_graph *g, const char *source, ld_tensor **loaded,
                            ld_error *err)
{
    int k;
    const char *file;
    if (split_pair(g, source, &k, &file) && path_exists(file, NULL))
        return load_pair(g, source, loaded, err);
    char *copy = strdup(source);
    if (!copy)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_status st = LD_OK;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item && st == LD_OK;
         item = strtok_r(NULL, ",", &save))
        st = load_pair(g, item, loaded, err);
    free(copy);
    return st;
}

/* A loaded tensor's dtype against the declaration. bfloat16 saved as uint16
 * (numpy has no bfloat16; the ONNX test data does the same) is relabelled. */
static ld_status check_dtype(const ld_graph *g, int k, ld_tensor *t, ld_error *err)
{
    const ld_value *v = &g->values[g->inputs[k]];
    ld_dtype want = v->type.dtype;
    if (want == LD_DTYPE_BFLOAT16 && t->dtype == LD_DTYPE_UINT16)
        t->dtype = LD_DTYPE_BFLOAT16;
    if (want == LD_DTYPE_UNDEFINED || want == t->dtype)
        return LD_OK;
    return ld_error_set(err, LD_ERR_INPUT, "input '%s': the loaded tensor is %s, the model "
                        "expects %s", v->name, ld_dtype_name(t->dtype), ld_dtype_name(want));
}

ld_status ld_inputs_load(const ld_graph *g, const ld_inputs_options *opts, ld_tensor **loaded,
                         ld_error *err)
{
    ld_status st = LD_OK;
    bool is_dir = false;
    if (opts->n_sources == 1 && path_exists(opts->sources[0], &is_dir)) {
        st = is_dir ? load_folder(g, opts->sources[0], loaded, err)
                    : load_single(g, opts->sources[0], loaded, err);
    } else {
        for (int i = 0; st == LD_OK && i < opts->n_sources; i++) {
            if (opts->n_sources > 1 && path_exists(opts->sources[i], NULL))
                return ld_error_set(err, LD_ERR_USAGE, "--load-inputs '%s': give one folder or "
                                    "file, or NAME:FILE pairs", opts->sources[i]);
            st = load_pairs(g, opts->sources[i], loaded, err);
        }
        for (int k = 0; st == LD_OK && k < g->n_inputs; k++)
            if (!loaded[k])
                st = ld_error_set(err, LD_ERR_USAGE, "input '%s' has no file in --load-inputs",
                                  g->values[g->inputs[k]].name);
    }
    for (int k = 0; st == LD_OK && k < g->n_inputs; k++)
        st = check_dtype(g, k, loaded[k], err);
    return st;
}

/* --- the inputs of a run --------------------------------------------------------------- */

void ld_input_set_clear(ld_input_set *set)
{
    for (int k = 0; set->tensors && k < set->n; k++)
        ld_tensor_destroy(set->tensors[k]);
    free(set->tensors);
    free(set->shapes);
    *set = (ld_input_set){0};
}

/* The range for input `name`: its own, else the global one, else [0, 1]. */
static ld_value_range range_for(const ld_input_range_arg *ranges, int n, const char *name)
{
    ld_value_range r = {0.0, 1.0};
    for (int i = 0; i < n; i++)
        if (!ranges[i].name)
            r = ranges[i].range;
    for (int i = 0; i < n; i++)
        if (ranges[i].name && strcmp(ranges[i].name, name) == 0)
            r = ranges[i].range;
    return r;
}

static ld_status check_range_names(const ld_graph *g, const ld_input_range_arg *ranges, int n,
                                   ld_error *err)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            if ((!ranges[i].name && !ranges[j].name) ||
                (ranges[i].name && ranges[j].name && strcmp(ranges[i].name, ranges[j].name) == 0))
                return ld_error_set(err, LD_ERR_USAGE, "--val-range gives %s%s%s twice",
                                    ranges[i].name ? "input '" : "the global range",
                                    ranges[i].name ? ranges[i].name : "",
                                    ranges[i].name ? "'" : "");
        if (!ranges[i].name)
            continue;
        bool found = false;
        for (int k = 0; k < g->n_inputs && !found; k++)
            found = strcmp(g->values[g->inputs[k]].name, ranges[i].name) == 0;
        if (!found) {
            char names[512];
            return ld_error_set(err, LD_ERR_USAGE, "--val-range: the model has no input '%s' "
                                "(inputs: %s)", ranges[i].name,
                                ld_inputs_list_names(g, names, sizeof names));
        }
    }
    return LD_OK;
}

/* The dtype to generate for input k, or an error saying why it cannot be. */
static ld_status generated_dtype(const ld_graph *g, int k, ld_dtype *out, ld_error *err)
{
    const ld_value *v = &g->values[g->inputs[k]];
    if (v->type.kind != LD_TYPE_TENSOR && v->type.kind != LD_TYPE_UNKNOWN)
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "input '%s' is a %s, not a tensor: "
                            "layerdiff computes tensors only", v->name,
                            ld_type_kind_name(v->type.kind));
    if (v->type.dtype == LD_DTYPE_UNDEFINED)
        return ld_error_set(err, LD_ERR_USAGE, "input '%s': the model declares no element type; "
                            "give its values with --load-inputs", v->name);
    if (!ld_dtype_is_supported(v->type.dtype))
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "input '%s' is a %s tensor: layerdiff "
                            "cannot generate or hold it", v->name, ld_dtype_name(v->type.dtype));
    *out = v->type.dtype;
    return LD_OK;
}

static ld_status generate(ld_input_set *set, const ld_graph *g, const ld_inputs_options *opts,
                          ld_error *err)
{
    ld_input_range_arg *ranges = NULL;
    int n_ranges = 0;
    ld_status st = LD_OK;
    if (opts->ranges)
        st = ld_inputs_parse_ranges(opts->ranges, &ranges, &n_ranges, err);
    if (st == LD_OK)
        st = check_range_names(g, ranges, n_ranges, err);
    for (int k = 0; st == LD_OK && k < g->n_inputs; k++) {
        const char *name = g->values[g->inputs[k]].name;
        ld_dtype dtype = LD_DTYPE_UNDEFINED;
        st = generated_dtype(g, k, &dtype, err);
        if (st == LD_OK)
            st = ld_tensor_create(&set->tensors[k], name, dtype, &set->shapes[k], err);
        if (st == LD_OK)
            st = ld_inputs_fill_random(set->tensors[k], opts->seed,
                                       range_for(ranges, n_ranges, name), err);
    }
    ld_input_range_args_free(ranges, n_ranges);
    set->generated = true;
    set->seed = opts->seed;
    return st;
}

ld_status ld_inputs_make(ld_input_set *out, const ld_graph *g, const ld_inputs_options *opts,
                         ld_error *err)
{
    ld_input_set set = {.n = g->n_inputs};
    ld_input_shape_arg *shape_args = NULL;
    int n_shape_args = 0;
    size_t n = (size_t)(g->n_inputs ? g->n_inputs : 1);
    set.tensors = calloc(n, sizeof *set.tensors);
    set.shapes = calloc(n, sizeof *set.shapes);
    ld_status st = LD_OK;
    if (!set.tensors || !set.shapes)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK && opts->shapes)
        st = ld_inputs_parse_shapes(opts->shapes, &shape_args, &n_shape_args, err);
    if (st == LD_OK && opts->n_sources > 0) {
        st = ld_inputs_load(g, opts, set.tensors, err);
        if (st == LD_OK)
            st = ld_inputs_resolve_shapes(g, shape_args, n_shape_args,
                                          (const ld_tensor *const *)set.tensors, set.shapes, err);
    } else if (st == LD_OK) {
        st = ld_inputs_resolve_shapes(g, shape_args, n_shape_args, NULL, set.shapes, err);
        if (st == LD_OK)
            st = generate(&set, g, opts, err);
    }
    ld_input_shape_args_free(shape_args, n_shape_args);
    if (st != LD_OK) {
        ld_input_set_clear(&set);
        return st;
    }
    *out = set;
    return LD_OK;
}
