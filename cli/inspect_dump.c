/* `layerdiff inspect DUMP.h5`: file attributes, inputs and per run every
 * tensor's metadata, as text or JSON (docs/cli.md). No tensor data is read. */
#include <inttypes.h>
#include <stdlib.h>

#include "cli/format.h"
#include "cli/inspect.h"
#include "cli/term.h"
#include "layerdiff/dump.h"

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

/* Optional string attributes: the reader may give NULL or "" for absent. */
static bool present(const char *s)
{
    return s && *s;
}

/* --- text ------------------------------------------------------------------------ */

static void dump_heading(FILE *out, bool color, const char *title)
{
    fprintf(out, "\n%s%s%s\n", ld_term_style_code(color, LD_STYLE_BOLD), title,
            ld_term_style_code(color, LD_STYLE_RESET));
}

static ld_status dump_pair(ld_table *t, const char *key, const char *value, ld_error *err)
{
    ld_status st = ld_table_add(t, key, err);
    return st == LD_OK ? ld_table_add(t, value, err) : st;
}

static ld_status print_file_info(FILE *out, const char *path, const ld_dump *d, bool color,
                                 ld_error *err)
{
    const ld_dump_file_info *info = ld_dump_info(d);
    char fmt[64], seed[64];
    snprintf(fmt, sizeof fmt, "%s v%d", LD_DUMP_FORMAT_NAME, info->format_version);
    if (info->input_seed >= 0)
        snprintf(seed, sizeof seed, "generated with seed %" PRId64, info->input_seed);
    else
        snprintf(seed, sizeof seed, "loaded, not generated");
    ld_table *t = ld_table_create(2);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_status st = dump_pair(t, "format", fmt, err);
    if (st == LD_OK)
        st = dump_pair(t, "model", or_empty(info->model_path), err);
    if (st == LD_OK)
        st = dump_pair(t, "model sha256", present(info->model_sha256) ? info->model_sha256 : "-",
                       err);
    if (st == LD_OK)
        st = dump_pair(t, "tool version", or_empty(info->tool_version), err);
    if (st == LD_OK)
        st = dump_pair(t, "created", or_empty(info->created), err);
    if (st == LD_OK)
        st = dump_pair(t, "inputs", seed, err);
    if (st == LD_OK) {
        fprintf(out, "%slayerdiff dump%s %s\n", ld_term_style_code(color, LD_STYLE_BOLD),
                ld_term_style_code(color, LD_STYLE_RESET), path);
        ld_table_print(t, out, "  ", false, color);
    }
    ld_table_destroy(t);
    return st;
}

static ld_status print_inputs(FILE *out, const ld_dump *d, bool color, ld_error *err)
{
    int n = ld_dump_input_count(d);
    ld_status st = LD_OK;
    ld_table *t = ld_table_create(3);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n && st == LD_OK; i++) {
        const ld_dump_tensor_meta *m = ld_dump_input_meta(d, i);
        char shape[512];
        st = ld_table_add(t, m->name, err);
        if (st == LD_OK)
            st = ld_table_add(t, ld_dtype_name(m->dtype), err);
        if (st == LD_OK)
            st = ld_table_add(t, ld_fmt_shape(&m->shape, shape, sizeof shape), err);
    }
    if (st == LD_OK) {
        char heading[64];
        snprintf(heading, sizeof heading, "Inputs (%d)", n);
        dump_heading(out, color, heading);
        ld_table_print(t, out, "  ", false, color);
    }
    ld_table_destroy(t);
    return st;
}

static bool run_has_counters(const ld_dump *d, int run)
{
    for (int i = 0; i < ld_dump_tensor_count(d, run); i++)
        if (ld_dump_tensor_meta_at(d, run, i)->counters.present)
            return true;
    return false;
}

static ld_status add_tensor_row(ld_table *t, const ld_dump_tensor_meta *m, bool counters,
                                ld_error *err)
{
    char shape[512];
    ld_status st = ld_table_addf(t, err, "%" PRId64, m->topo_index);
    if (st == LD_OK)
        st = ld_table_add(t, m->name, err);
    if (st == LD_OK)
        st = ld_table_add(t, ld_dtype_name(m->dtype), err);
    if (st == LD_OK)
        st = ld_table_add(t, ld_fmt_shape(&m->shape, shape, sizeof shape), err);
    if (st == LD_OK)
        st = ld_table_add(t, or_empty(m->node), err);
    if (st == LD_OK)
        st = ld_table_add(t, or_empty(m->op_type), err);
    if (st == LD_OK)
        st = ld_table_add(t, m->precision && *m->precision ? m->precision : "-", err);
    if (st != LD_OK || !counters)
        return st;
    const ld_layer_counters *c = &m->counters;
    if (!c->present) {
        for (int i = 0; i < 5 && st == LD_OK; i++)
            st = ld_table_add(t, "-", err);
        return st;
    }
    const int64_t values[5] = {c->overflows, c->nans_created, c->underflows, c->subnormals,
                               c->partial_overflows};
    for (int i = 0; i < 5 && st == LD_OK; i++)
        st = ld_table_addf(t, err, "%" PRId64, values[i]);
    return st;
}

static ld_status print_run(FILE *out, const ld_dump *d, int run, bool color, ld_error *err)
{
    static const char *const head[] = {"#", "tensor", "dtype", "shape", "node", "op",
                                       "precision", "overflows", "nans", "underflows",
                                       "subnormals", "partial_overflows"};
    const ld_dump_run_info *info = ld_dump_run(d, run);
    bool counters = run_has_counters(d, run);
    int n_cols = counters ? 12 : 7;
    int n = ld_dump_tensor_count(d, run);
    ld_status st = LD_OK;
    ld_table *t = ld_table_create(n_cols);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_table_align_right(t, 0);
    for (int c = 7; c < n_cols; c++)
        ld_table_align_right(t, c);
    for (int c = 0; c < n_cols && st == LD_OK; c++)
        st = ld_table_add(t, head[c], err);
    for (int i = 0; i < n && st == LD_OK; i++)
        st = add_tensor_row(t, ld_dump_tensor_meta_at(d, run, i), counters, err);
    if (st == LD_OK) {
        char heading[1024];
        snprintf(heading, sizeof heading, "Run '%s' (backend %s%s%s, %d tensors)",
                 or_empty(info->name), or_empty(info->backend),
                 present(info->config) ? ", config " : "", or_empty(info->config), n);
        dump_heading(out, color, heading);
        ld_table_print(t, out, "  ", true, color);
    }
    ld_table_destroy(t);
    return st;
}

static ld_status print_dump_text(FILE *out, const char *path, const ld_dump *d, bool color,
                                 ld_error *err)
{
    ld_status st = print_file_info(out, path, d, color, err);
    if (st == LD_OK)
        st = print_inputs(out, d, color, err);
    for (int r = 0; r < ld_dump_run_count(d) && st == LD_OK; r++)
        st = print_run(out, d, r, color, err);
    return st;
}

/* --- JSON -------------------------------------------------------------------------- */

static json_t *json_counters(const ld_layer_counters *c)
{
    json_t *o = json_object();
    if (o && ld_json_set(o, "overflows", json_integer(c->overflows)) &&
        ld_json_set(o, "nans_created", json_integer(c->nans_created)) &&
        ld_json_set(o, "underflows", json_integer(c->underflows)) &&
        ld_json_set(o, "subnormals", json_integer(c->subnormals)) &&
        ld_json_set(o, "partial_overflows", json_integer(c->partial_overflows)))
        return o;
    json_decref(o);
    return NULL;
}

static json_t *json_tensor(const ld_dump_tensor_meta *m, bool is_input)
{
    json_t *o = json_object();
    bool ok = o && ld_json_set(o, "name", ld_json_string(m->name)) &&
              ld_json_set(o, "dtype", json_string(ld_dtype_name(m->dtype))) &&
              ld_json_set(o, "shape", ld_json_shape(&m->shape));
    if (ok && !is_input)
        ok = ld_json_set(o, "node", ld_json_string(m->node)) &&
             ld_json_set(o, "op_type", ld_json_string(m->op_type)) &&
             ld_json_set(o, "topo_index", json_integer(m->topo_index)) &&
             ld_json_set(o, "output_index", json_integer(m->output_index)) &&
             ld_json_set(o, "precision", ld_json_string(m->precision)) &&
             ld_json_set(o, "counters",
                         m->counters.present ? json_counters(&m->counters) : json_null());
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

static json_t *json_run(const ld_dump *d, int run)
{
    const ld_dump_run_info *info = ld_dump_run(d, run);
    json_t *o = json_object(), *tensors = json_array();
    bool ok = o && ld_json_set(o, "name", ld_json_string(info->name)) &&
              ld_json_set(o, "backend", ld_json_string(info->backend)) &&
              ld_json_set(o, "config",
                          present(info->config) ? ld_json_string(info->config) : json_null()) &&
              ld_json_set(o, "tensors", json_incref(tensors));
    for (int i = 0; ok && i < ld_dump_tensor_count(d, run); i++)
        ok = ld_json_append(tensors, json_tensor(ld_dump_tensor_meta_at(d, run, i), false));
    json_decref(tensors);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

static ld_status print_dump_json(FILE *out, const char *path, const ld_dump *d, ld_error *err)
{
    const ld_dump_file_info *info = ld_dump_info(d);
    json_t *root = json_object(), *inputs = json_array(), *runs = json_array();
    bool ok = root && ld_json_set(root, "kind", json_string("dump")) &&
              ld_json_set(root, "path", ld_json_string(path)) &&
              ld_json_set(root, "format", json_string(LD_DUMP_FORMAT_NAME)) &&
              ld_json_set(root, "format_version", json_integer(info->format_version)) &&
              ld_json_set(root, "model_path", ld_json_string(info->model_path)) &&
              ld_json_set(root, "model_sha256", present(info->model_sha256)
                                                    ? ld_json_string(info->model_sha256)
                                                    : json_null()) &&
              ld_json_set(root, "tool_version", ld_json_string(info->tool_version)) &&
              ld_json_set(root, "created", ld_json_string(info->created)) &&
              ld_json_set(root, "input_seed", info->input_seed >= 0
                                                  ? json_integer(info->input_seed)
                                                  : json_null()) &&
              ld_json_set(root, "inputs", json_incref(inputs)) &&
              ld_json_set(root, "runs", json_incref(runs));
    for (int i = 0; ok && i < ld_dump_input_count(d); i++)
        ok = ld_json_append(inputs, json_tensor(ld_dump_input_meta(d, i), true));
    for (int r = 0; ok && r < ld_dump_run_count(d); r++)
        ok = ld_json_append(runs, json_run(d, r));
    ld_status st = ok ? ld_json_print(out, root, err)
                      : ld_error_set(err, LD_ERR_NOMEM, "out of memory building JSON");
    json_decref(inputs);
    json_decref(runs);
    json_decref(root);
    return st;
}

/* --- entry point --------------------------------------------------------------------- */

ld_status ld_inspect_dump(FILE *out, const char *path, const ld_inspect_options *opts,
                          ld_error *err)
{
    ld_dump *d = NULL;
    ld_status st = ld_dump_open(&d, path, err);
    if (st != LD_OK)
        goto out;
    if (opts->json)
        st = print_dump_json(out, path, d, err);
    else
        st = print_dump_text(out, path, d, opts->color, err);
out:
    if (d)
        ld_dump_close(d);
    return st;
}
