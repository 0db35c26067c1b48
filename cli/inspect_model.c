/* `layerdiff inspect MODEL.onnx`: a summary of a loaded graph, as text or
 * JSON (shape documented in docs/cli.md). Reads the graph only. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/format.h"
#include "cli/inspect.h"
#include "cli/term.h"
#include "layerdiff/graph.h"
#include "layerdiff/onnx.h"

/* --- operator counts ----------------------------------------------------------- */

typedef struct op_count {
    char *op;  /* owned; "Conv", or "<domain>.<op>" outside the default domain */
    int count;
} op_count;

static int op_count_order(const void *a, const void *b)
{
    const op_count *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1; /* most frequent first */
    return strcmp(x->op, y->op);
}

static bool is_default_domain(const char *domain)
{
    return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

static void free_op_counts(op_count *counts, int n)
{
    for (int i = 0; i < n; i++)
        free(counts[i].op);
    free(counts);
}

/* Counts the graph's nodes per operator, sorted by count desc then name.
 * Return value: *out new (free_op_counts), *n_out entries. */
static ld_status count_ops(const ld_graph *g, op_count **out, int *n_out, ld_error *err)
{
    ld_status st = LD_OK;
    int n = 0;
    op_count *counts = calloc((size_t)g->n_nodes + 1, sizeof *counts);
    if (!counts)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory counting operators");
    for (int i = 0; i < g->n_nodes; i++) {
        const ld_node *node = &g->nodes[i];
        char key[512];
        if (is_default_domain(node->domain))
            snprintf(key, sizeof key, "%s", node->op_type);
        else
            snprintf(key, sizeof key, "%s.%s", node->domain, node->op_type);
        int j = 0;
        /* Quadratic, but models have at most a few hundred distinct ops. */
        while (j < n && strcmp(counts[j].op, key) != 0)
            j++;
        if (j == n) {
            counts[n].op = strdup(key);
            if (!counts[n].op) {
                st = ld_error_set(err, LD_ERR_NOMEM, "out of memory counting operators");
                goto out;
            }
            n++;
        }
        counts[j].count++;
    }
    qsort(counts, (size_t)n, sizeof *counts, op_count_order);
out:
    if (st != LD_OK) {
        free_op_counts(counts, n);
        return st;
    }
    *out = counts;
    *n_out = n;
    return LD_OK;
}

/* Everything inspect derives from the graph, computed once for both outputs. */
typedef struct model_summary {
    op_count *counts; /* owned */
    int n_counts;
    char **notes;     /* owned: the loader's notes, then inspect's own */
    int n_notes;
} model_summary;

static void summary_free(model_summary *s)
{
    free_op_counts(s->counts, s->n_counts);
    for (int i = 0; i < s->n_notes; i++)
        free(s->notes[i]);
    free(s->notes);
}

static ld_status add_note(model_summary *s, ld_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ld_status add_note(model_summary *s, ld_error *err, const char *fmt, ...)
{
    char *note = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&note, fmt, ap);
    va_end(ap);
    char **grown = n < 0 ? NULL : realloc(s->notes, ((size_t)s->n_notes + 1) * sizeof *grown);
    if (!grown) {
        free(n < 0 ? NULL : note);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory collecting notes");
    }
    s->notes = grown;
    s->notes[s->n_notes++] = note;
    return LD_OK;
}

/* The type of a graph input or output layerdiff cannot hold ("sequence",
 * "string"), or NULL when it is a computable tensor. */
static const char *unsupported_kind(const ld_type_info *type)
{
    switch (type->kind) {
    case LD_TYPE_SEQUENCE: return "sequence";
    case LD_TYPE_MAP: return "map";
    case LD_TYPE_OPTIONAL: return "optional";
    case LD_TYPE_SPARSE_TENSOR: return "sparse tensor";
    case LD_TYPE_UNKNOWN:
    case LD_TYPE_TENSOR: break;
    }
    if (type->dtype != LD_DTYPE_UNDEFINED && !ld_dtype_is_supported(type->dtype))
        return ld_dtype_name(type->dtype);
    return NULL;
}

/* Notes on graph inputs/outputs layerdiff cannot feed or compare, and on
 * subgraph bodies (If, Loop, Scan) that inspect does not list. */
static ld_status collect_notes(const ld_graph *g, model_summary *s, ld_error *err)
{
    ld_status st = LD_OK;
    for (int i = 0; i < g->n_notes && st == LD_OK; i++)
        st = add_note(s, err, "%s", g->notes[i]);
    for (int side = 0; side < 2 && st == LD_OK; side++) {
        const int *idx = side == 0 ? g->inputs : g->outputs;
        int n = side == 0 ? g->n_inputs : g->n_outputs;
        for (int i = 0; i < n && st == LD_OK; i++) {
            const ld_value *v = &g->values[idx[i]];
            const char *what = unsupported_kind(&v->type);
            if (what)
                st = add_note(s, err, "graph %s '%s' has type %s, which layerdiff cannot compute",
                              side == 0 ? "input" : "output", v->name, what);
        }
    }
    int with_subgraphs = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int a = 0; a < g->nodes[i].n_attrs; a++)
            if (g->nodes[i].attrs[a].type == LD_ATTR_GRAPH ||
                g->nodes[i].attrs[a].type == LD_ATTR_GRAPHS) {
                with_subgraphs++;
                break;
            }
    if (st == LD_OK && with_subgraphs > 0)
        st = add_note(s, err, "%d node(s) carry subgraphs whose nodes are not listed",
                      with_subgraphs);
    return st;
}

/* The dtype column: the element type, or the kind for non-tensor types. */
static const char *type_name(const ld_type_info *type)
{
    switch (type->kind) {
    case LD_TYPE_SEQUENCE: return "sequence";
    case LD_TYPE_MAP: return "map";
    case LD_TYPE_OPTIONAL: return "optional";
    case LD_TYPE_UNKNOWN:
    case LD_TYPE_TENSOR:
    case LD_TYPE_SPARSE_TENSOR: break;
    }
    return ld_dtype_name(type->dtype);
}

static const char *domain_name(const char *domain)
{
    return is_default_domain(domain) ? "ai.onnx" : domain;
}

static const char *value_name(const ld_graph *g, int index)
{
    return index >= 0 && index < g->n_values ? g->values[index].name : NULL;
}

/* --- text ------------------------------------------------------------------------ */

static void print_heading(FILE *out, bool color, const char *title)
{
    fprintf(out, "\n%s%s%s\n", ld_term_style_code(color, LD_STYLE_BOLD), title,
            ld_term_style_code(color, LD_STYLE_RESET));
}

static ld_status add_value_rows(ld_table *t, const ld_graph *g, const int *idx, int n,
                                ld_error *err)
{
    ld_status st = LD_OK;
    for (int i = 0; i < n && st == LD_OK; i++) {
        const ld_value *v = &g->values[idx[i]];
        char shape[512];
        st = ld_table_add(t, v->name, err);
        if (st == LD_OK)
            st = ld_table_add(t, type_name(&v->type), err);
        if (st == LD_OK)
            st = ld_table_add(t, ld_fmt_type_shape(&v->type, shape, sizeof shape), err);
    }
    return st;
}

/* "a, b -> c" for one node; omitted optional inputs show as "-". */
static void node_signature(const ld_graph *g, const ld_node *node, char *buf, size_t size)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (int side = 0; side < 2; side++) {
        int n = side == 0 ? node->n_inputs : node->n_outputs;
        const int *idx = side == 0 ? node->inputs : node->outputs;
        if (side == 1 && pos < size)
            pos += (size_t)snprintf(buf + pos, size - pos, " -> ");
        for (int i = 0; i < n && pos < size; i++) {
            const char *name = value_name(g, idx[i]);
            pos += (size_t)snprintf(buf + pos, size - pos, "%s%s", i ? ", " : "",
                                    name ? name : "-");
        }
    }
}

static ld_status print_layers(FILE *out, const ld_graph *g, bool color, ld_error *err)
{
    ld_status st = LD_OK;
    ld_table *t = ld_table_create(4);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_table_align_right(t, 0);
    const char *head[] = {"#", "node", "op", "inputs -> outputs"};
    for (int i = 0; i < 4 && st == LD_OK; i++)
        st = ld_table_add(t, head[i], err);
    for (int i = 0; i < g->n_nodes && st == LD_OK; i++) {
        const ld_node *node = &g->nodes[i];
        char sig[2048];
        node_signature(g, node, sig, sizeof sig);
        st = ld_table_addf(t, err, "%d", i);
        if (st == LD_OK)
            st = ld_table_add(t, node->name, err);
        if (st == LD_OK)
            st = is_default_domain(node->domain)
                     ? ld_table_add(t, node->op_type, err)
                     : ld_table_addf(t, err, "%s.%s", node->domain, node->op_type);
        if (st == LD_OK)
            st = ld_table_add(t, sig, err);
    }
    if (st == LD_OK) {
        print_heading(out, color, "Layers");
        ld_table_print(t, out, "  ", true, color);
    }
    ld_table_destroy(t);
    return st;
}

/* One "key  value" row of the summary table. */
static ld_status add_pair(ld_table *t, ld_error *err, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ld_status add_pair(ld_table *t, ld_error *err, const char *key, const char *fmt, ...)
{
    char value[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(value, sizeof value, fmt, ap);
    va_end(ap);
    ld_status st = ld_table_add(t, key, err);
    return st == LD_OK ? ld_table_add(t, value, err) : st;
}

static ld_status print_summary(FILE *out, const char *path, const ld_graph *g, bool color,
                               ld_error *err)
{
    int64_t params = 0, bytes = 0;
    char count[48], nbytes[48], human[48];
    ld_table *t = ld_table_create(2);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_graph_parameter_totals(g, &params, &bytes);
    fprintf(out, "%sONNX model%s %s\n", ld_term_style_code(color, LD_STYLE_BOLD),
            ld_term_style_code(color, LD_STYLE_RESET), path);
    ld_status st = add_pair(t, err, "producer", "%s%s%s",
                            *g->producer_name ? g->producer_name : "(none)",
                            *g->producer_version ? " " : "", g->producer_version);
    if (st == LD_OK)
        st = add_pair(t, err, "ir version", "%" PRId64, g->ir_version);
    for (int i = 0; i < g->n_opsets && st == LD_OK; i++)
        st = add_pair(t, err, i == 0 ? "opsets" : "", "%s %" PRId64,
                      domain_name(g->opsets[i].domain), g->opsets[i].version);
    if (st == LD_OK && *g->model_domain)
        st = add_pair(t, err, "domain", "%s", g->model_domain);
    if (st == LD_OK && g->model_version != 0)
        st = add_pair(t, err, "model version", "%" PRId64, g->model_version);
    if (st == LD_OK)
        st = add_pair(t, err, "graph", "%s", g->name);
    if (st == LD_OK)
        st = add_pair(t, err, "nodes", "%d", g->n_nodes);
    if (st == LD_OK)
        st = add_pair(t, err, "parameters", "%s in %d initializers, %s bytes (%s)",
                      ld_fmt_count(params, count, sizeof count), g->n_initializers,
                      ld_fmt_count(bytes, nbytes, sizeof nbytes),
                      ld_fmt_bytes(bytes, human, sizeof human));
    if (st == LD_OK)
        ld_table_print(t, out, "  ", false, color);
    ld_table_destroy(t);
    return st;
}

static ld_status print_values(FILE *out, const ld_graph *g, const char *title, const int *idx,
                              int n, bool color, ld_error *err)
{
    ld_table *t = ld_table_create(3);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_status st = add_value_rows(t, g, idx, n, err);
    if (st == LD_OK) {
        char heading[64];
        snprintf(heading, sizeof heading, "%s (%d)", title, n);
        print_heading(out, color, heading);
        ld_table_print(t, out, "  ", false, color);
    }
    ld_table_destroy(t);
    return st;
}

static ld_status print_ops(FILE *out, const op_count *counts, int n, bool color, ld_error *err)
{
    ld_status st = LD_OK;
    ld_table *t = ld_table_create(2);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_table_align_right(t, 1);
    for (int i = 0; i < n && st == LD_OK; i++) {
        st = ld_table_add(t, counts[i].op, err);
        if (st == LD_OK)
            st = ld_table_addf(t, err, "%d", counts[i].count);
    }
    if (st == LD_OK) {
        print_heading(out, color, "Operators");
        ld_table_print(t, out, "  ", false, color);
    }
    ld_table_destroy(t);
    return st;
}

static ld_status print_model_text(FILE *out, const char *path, const ld_graph *g,
                                  const model_summary *sum, const ld_inspect_options *opts,
                                  ld_error *err)
{
    bool color = opts->color;
    ld_status st = print_summary(out, path, g, color, err);
    if (st == LD_OK)
        st = print_values(out, g, "Inputs", g->inputs, g->n_inputs, color, err);
    if (st == LD_OK)
        st = print_values(out, g, "Outputs", g->outputs, g->n_outputs, color, err);
    if (st == LD_OK)
        st = print_ops(out, sum->counts, sum->n_counts, color, err);
    if (st == LD_OK && sum->n_notes > 0) {
        print_heading(out, color, "Notes");
        for (int i = 0; i < sum->n_notes; i++)
            fprintf(out, "  - %s\n", sum->notes[i]);
    }
    if (st == LD_OK && opts->layers)
        st = print_layers(out, g, color, err);
    return st;
}

/* --- JSON -------------------------------------------------------------------------- */

static json_t *json_values(const ld_graph *g, const int *idx, int n)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        const ld_value *v = &g->values[idx[i]];
        json_t *o = json_object();
        if (!ld_json_append(arr, o) || !ld_json_set(o, "name", ld_json_string(v->name)) ||
            !ld_json_set(o, "dtype", json_string(type_name(&v->type))) ||
            !ld_json_set(o, "shape", ld_json_type_shape(&v->type))) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *json_names(const ld_graph *g, const int *idx, int n)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        const char *name = value_name(g, idx[i]);
        if (!ld_json_append(arr, name ? ld_json_string(name) : json_null())) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *json_nodes(const ld_graph *g)
{
    json_t *arr = json_array();
    for (int i = 0; arr && i < g->n_nodes; i++) {
        const ld_node *node = &g->nodes[i];
        json_t *o = json_object();
        if (!ld_json_append(arr, o) || !ld_json_set(o, "index", json_integer(i)) ||
            !ld_json_set(o, "name", ld_json_string(node->name)) ||
            !ld_json_set(o, "op_type", ld_json_string(node->op_type)) ||
            !ld_json_set(o, "domain", ld_json_string(domain_name(node->domain))) ||
            !ld_json_set(o, "inputs", json_names(g, node->inputs, node->n_inputs)) ||
            !ld_json_set(o, "outputs", json_names(g, node->outputs, node->n_outputs))) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* The model-level fields; root keeps the key order of docs/cli.md. New reference. */
static json_t *json_summary(const ld_graph *g, const char *path)
{
    json_t *root = json_object(), *producer = json_object(), *opsets = json_array();
    bool ok = root && ld_json_set(root, "kind", json_string("model")) &&
              ld_json_set(root, "path", ld_json_string(path)) &&
              ld_json_set(root, "producer", json_incref(producer)) &&
              ld_json_set(producer, "name", ld_json_string(g->producer_name)) &&
              ld_json_set(producer, "version", ld_json_string(g->producer_version)) &&
              ld_json_set(root, "ir_version", json_integer(g->ir_version)) &&
              ld_json_set(root, "domain", ld_json_string(g->model_domain)) &&
              ld_json_set(root, "model_version", json_integer(g->model_version)) &&
              ld_json_set(root, "graph_name", ld_json_string(g->name)) &&
              ld_json_set(root, "opsets", json_incref(opsets));
    for (int i = 0; ok && i < g->n_opsets; i++) {
        json_t *o = json_object();
        ok = ld_json_append(opsets, o) &&
             ld_json_set(o, "domain", ld_json_string(domain_name(g->opsets[i].domain))) &&
             ld_json_set(o, "version", json_integer(g->opsets[i].version));
    }
    json_decref(producer);
    json_decref(opsets);
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static ld_status print_model_json(FILE *out, const char *path, const ld_graph *g,
                                  const model_summary *sum, const ld_inspect_options *opts,
                                  ld_error *err)
{
    int64_t params = 0, bytes = 0;
    ld_graph_parameter_totals(g, &params, &bytes);
    json_t *root = json_summary(g, path);
    json_t *ops = json_object(), *param = json_object(), *notes = json_array();
    bool ok = root && ld_json_set(root, "inputs", json_values(g, g->inputs, g->n_inputs)) &&
              ld_json_set(root, "outputs", json_values(g, g->outputs, g->n_outputs)) &&
              ld_json_set(root, "node_count", json_integer(g->n_nodes)) &&
              ld_json_set(root, "op_counts", json_incref(ops)) &&
              ld_json_set(root, "parameters", json_incref(param)) &&
              ld_json_set(param, "count", json_integer(params)) &&
              ld_json_set(param, "bytes", json_integer(bytes)) &&
              ld_json_set(param, "initializers", json_integer(g->n_initializers));
    for (int i = 0; ok && i < sum->n_counts; i++) {
        /* Keys must be UTF-8 like values; an op type is bytes: fix it up the same
         * way (two op types that differ only in bad bytes then share a key). */
        json_t *op = ld_json_string(sum->counts[i].op);
        const char *key = op ? json_string_value(op) : NULL;
        json_int_t count = sum->counts[i].count;
        if (key && json_object_get(ops, key))
            count += json_integer_value(json_object_get(ops, key));
        ok = key && ld_json_set(ops, key, json_integer(count));
        json_decref(op);
    }
    if (ok && opts->layers)
        ok = ld_json_set(root, "nodes", json_nodes(g));
    ok = ok && ld_json_set(root, "notes", json_incref(notes));
    for (int i = 0; ok && i < sum->n_notes; i++)
        ok = ld_json_append(notes, ld_json_string(sum->notes[i]));
    ld_status st = ok ? ld_json_print(out, root, err)
                      : ld_error_set(err, LD_ERR_NOMEM, "out of memory building JSON");
    json_decref(ops);
    json_decref(param);
    json_decref(notes);
    json_decref(root);
    return st;
}

/* --- entry point --------------------------------------------------------------------- */

ld_status ld_inspect_model(FILE *out, const char *path, const ld_inspect_options *opts,
                           ld_error *err)
{
    ld_graph *g = NULL;
    model_summary sum = {0};
    ld_status st = ld_onnx_load_file(&g, path, err);
    if (st != LD_OK)
        goto out;
    st = count_ops(g, &sum.counts, &sum.n_counts, err);
    if (st == LD_OK)
        st = collect_notes(g, &sum, err);
    if (st != LD_OK)
        goto out;
    if (opts->json)
        st = print_model_json(out, path, g, &sum, opts, err);
    else
        st = print_model_text(out, path, g, &sum, opts, err);
out:
    summary_free(&sum);
    ld_graph_destroy(g);
    return st;
}
