/* layerdiff CLI — profiles of `layerdiff run` (see profile.h). */
#include "cli/profile.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <jansson.h>

#include "cli/format.h"
#include "cli/term.h"
#include "report/atomic_file.h"

struct ld_profile_report {
    const ld_graph *graph;
    json_t *root;     /* owned */
    json_t *backends; /* borrowed from root */
};

/* One operator type's share of a run. */
typedef struct op_total {
    const char *domain, *op_type; /* borrowed from the graph */
    int64_t count, flops;
    double seconds;
} op_total;

/* Totals of one run. */
typedef struct run_totals {
    op_total *ops; /* owned, sorted by time, most first */
    int n_ops;
    double node_seconds;           /* sum over nodes */
    double conv_seconds;           /* nodes with flops > 0 */
    int64_t conv_flops, conv_count;
} run_totals;

static bool is_default_domain(const char *domain)
{
    return !*domain || strcmp(domain, "ai.onnx") == 0;
}

static int by_time_desc(const void *pa, const void *pb)
{
    const op_total *a = pa, *b = pb;
    if (a->seconds != b->seconds)
        return a->seconds < b->seconds ? 1 : -1;
    return strcmp(a->op_type, b->op_type);
}

static ld_status sum_run(const ld_graph *g, const ld_backend_profile *prof, run_totals *t,
                         ld_error *err)
{
    memset(t, 0, sizeof *t);
    if (prof->n_nodes != g->n_nodes)
        return ld_error_set(err, LD_ERR_INTERNAL, "profile has %d nodes, the graph %d",
                            prof->n_nodes, g->n_nodes);
    t->ops = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *t->ops);
    if (!t->ops)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const ld_node *node = &g->nodes[i];
        const ld_node_profile *np = &prof->nodes[i];
        int k = 0;
        while (k < t->n_ops && (strcmp(t->ops[k].op_type, node->op_type) != 0 ||
                                strcmp(t->ops[k].domain, node->domain) != 0))
            k++;
        if (k == t->n_ops)
            t->ops[t->n_ops++] = (op_total){.domain = node->domain, .op_type = node->op_type};
        t->ops[k].count++;
        t->ops[k].seconds += np->seconds;
        t->ops[k].flops += np->flops;
        t->node_seconds += np->seconds;
        if (np->flops > 0) {
            t->conv_seconds += np->seconds;
            t->conv_flops += np->flops;
            t->conv_count++;
        }
    }
    qsort(t->ops, (size_t)t->n_ops, sizeof *t->ops, by_time_desc);
    return LD_OK;
}

static double gflops(int64_t flops, double seconds)
{
    return seconds > 0 ? (double)flops / seconds * 1e-9 : 0;
}

/* --- text ----------------------------------------------------------------------------- */

static ld_status add_row(ld_table *tab, const char *name, int64_t count, double seconds,
                         double run_seconds, int64_t flops, ld_error *err)
{
    ld_status st = ld_table_add(tab, name, err);
    if (st == LD_OK)
        st = count >= 0 ? ld_table_addf(tab, err, "%lld", (long long)count)
                        : ld_table_add(tab, "", err);
    if (st == LD_OK)
        st = ld_table_addf(tab, err, "%.2f", seconds * 1e3);
    if (st == LD_OK)
        st = ld_table_addf(tab, err, "%.1f%%", run_seconds > 0 ? 100 * seconds / run_seconds : 0);
    if (st == LD_OK)
        st = flops > 0 ? ld_table_addf(tab, err, "%.1f", gflops(flops, seconds))
                       : ld_table_add(tab, "", err);
    return st;
}

static ld_status print_totals(FILE *out, const char *backend, const ld_backend_profile *prof,
                              const run_totals *t, double run_seconds, ld_error *err)
{
    ld_table *tab = ld_table_create(5);
    if (!tab)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int c = 1; c < 5; c++)
        ld_table_align_right(tab, c);
    ld_status st = LD_OK;
    const char *head[] = {"op type", "nodes", "ms", "share", "GFLOP/s"};
    for (int c = 0; c < 5 && st == LD_OK; c++)
        st = ld_table_add(tab, head[c], err);
    for (int k = 0; k < t->n_ops && st == LD_OK; k++) {
        char name[160];
        const op_total *o = &t->ops[k];
        snprintf(name, sizeof name, "%s%s%s", is_default_domain(o->domain) ? "" : o->domain,
                 is_default_domain(o->domain) ? "" : ".", o->op_type);
        st = add_row(tab, name, o->count, o->seconds, run_seconds, o->flops, err);
    }
    double other = run_seconds - t->node_seconds;
    if (st == LD_OK)
        st = add_row(tab, "other (executor, observer)", -1, other > 0 ? other : 0, run_seconds,
                     0, err);
    if (st == LD_OK)
        st = add_row(tab, "conv/gemm work", t->conv_count, t->conv_seconds, run_seconds,
                     t->conv_flops, err);
    if (st == LD_OK) {
        fprintf(out, "profile  %s%s%s\n", backend, prof->description ? ": " : "",
                prof->description ? prof->description : "");
        ld_table_print(tab, out, "  ", true, ld_term_use_color(out));
        fprintf(out, "  %.1f MFLOP of conv/gemm work; the run took %.2fx its time\n",
                (double)t->conv_flops * 1e-6,
                t->conv_seconds > 0 ? run_seconds / t->conv_seconds : 0);
    }
    ld_table_destroy(tab);
    return st;
}

/* --- JSON ------------------------------------------------------------------------------ */

static json_t *op_json(const op_total *o, double run_seconds)
{
    json_t *j = json_object();
    bool ok = j && ld_json_set(j, "op_type", ld_json_string(o->op_type)) &&
              ld_json_set(j, "domain", ld_json_string(o->domain)) &&
              ld_json_set(j, "count", json_integer(o->count)) &&
              ld_json_set(j, "seconds", json_real(o->seconds)) &&
              ld_json_set(j, "share", json_real(run_seconds > 0 ? o->seconds / run_seconds : 0)) &&
              ld_json_set(j, "flops", json_integer(o->flops)) &&
              ld_json_set(j, "gflops", json_real(gflops(o->flops, o->seconds)));
    if (!ok)
        json_decref(j);
    return ok ? j : NULL;
}

static json_t *node_json(const ld_graph *g, int i, const ld_node_profile *np)
{
    json_t *j = json_object();
    bool ok = j && ld_json_set(j, "index", json_integer(i)) &&
              ld_json_set(j, "name", ld_json_string(g->nodes[i].name)) &&
              ld_json_set(j, "op_type", ld_json_string(g->nodes[i].op_type)) &&
              ld_json_set(j, "seconds", json_real(np->seconds)) &&
              ld_json_set(j, "flops", json_integer(np->flops));
    if (!ok)
        json_decref(j);
    return ok ? j : NULL;
}

static json_t *profile_json(const ld_graph *g, const ld_backend_profile *prof,
                            const run_totals *t, double run_seconds)
{
    json_t *conv = json_object(), *ops = json_array(), *nodes = json_array();
    json_t *j = json_object();
    bool ok = conv && ops && nodes && j &&
              ld_json_set(conv, "count", json_integer(t->conv_count)) &&
              ld_json_set(conv, "seconds", json_real(t->conv_seconds)) &&
              ld_json_set(conv, "flops", json_integer(t->conv_flops)) &&
              ld_json_set(conv, "gflops", json_real(gflops(t->conv_flops, t->conv_seconds)));
    for (int k = 0; ok && k < t->n_ops; k++)
        ok = ld_json_append(ops, op_json(&t->ops[k], run_seconds));
    for (int i = 0; ok && i < g->n_nodes; i++)
        ok = ld_json_append(nodes, node_json(g, i, &prof->nodes[i]));
    ok = ok && ld_json_set(j, "description", ld_json_string(prof->description)) &&
         ld_json_set(j, "node_seconds", json_real(t->node_seconds)) &&
         ld_json_set(j, "conv_gemm", json_incref(conv)) &&
         ld_json_set(j, "ops", json_incref(ops)) && ld_json_set(j, "nodes", json_incref(nodes));
    json_decref(conv);
    json_decref(ops);
    json_decref(nodes);
    if (!ok)
        json_decref(j);
    return ok ? j : NULL;
}

/* --- the report ------------------------------------------------------------------------- */

ld_status ld_profile_report_new(ld_profile_report **out, const char *model_path,
                                const ld_graph *g, int threads, ld_error *err)
{
    ld_profile_report *r = calloc(1, sizeof *r);
    json_t *backends = json_array();
    json_t *root = json_object();
    bool ok = r && backends && root && ld_json_set(root, "model", ld_json_string(model_path)) &&
              ld_json_set(root, "threads", json_integer(threads)) &&
              ld_json_set(root, "backends", json_incref(backends));
    json_decref(backends);
    if (!ok) {
        json_decref(root);
        free(r);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    r->graph = g;
    r->root = root;
    r->backends = backends; /* root holds the reference */
    *out = r;
    return LD_OK;
}

void ld_profile_report_free(ld_profile_report *r)
{
    if (!r)
        return;
    json_decref(r->root);
    free(r);
}

ld_status ld_profile_report_add(ld_profile_report *r, const char *backend, double run_seconds,
                                ld_profile_dump_time dump, const ld_backend_profile *prof,
                                FILE *out, ld_error *err)
{
    run_totals t = {0};
    ld_status st = prof ? sum_run(r->graph, prof, &t, err) : LD_OK;
    if (st != LD_OK)
        return ld_error_prefix(err, "backend '%s'", backend);
    if (prof && out)
        st = print_totals(out, backend, prof, &t, run_seconds, err);
    else if (out)
        fprintf(out, "profile  %s: the backend does not profile its nodes\n", backend);
    json_t *j = json_object();
    bool ok = st == LD_OK && j && ld_json_set(j, "name", ld_json_string(backend)) &&
              ld_json_set(j, "run_seconds", json_real(run_seconds)) &&
              ld_json_set(j, "dump_seconds", json_real(dump.seconds)) &&
              ld_json_set(j, "dump_cpu_seconds", json_real(dump.cpu_seconds)) &&
              ld_json_set(j, "profile", prof ? profile_json(r->graph, prof, &t, run_seconds)
                                             : json_null()) &&
              ld_json_append(r->backends, json_incref(j));
    json_decref(j);
    free(t.ops);
    if (st == LD_OK && !ok)
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    return st;
}

int64_t ld_profile_peak_rss(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return (int64_t)ru.ru_maxrss * 1024; /* Linux: KiB */
}

static ld_status write_root(const void *root, FILE *f, ld_error *err)
{
    ld_status st = ld_json_print(f, root, err);
    return st != LD_OK && ferror(f) ? LD_OK : st; /* the writer says which file, and why */
}

ld_status ld_profile_report_write(ld_profile_report *r, const char *path, ld_error *err)
{
    if (!ld_json_set(r->root, "peak_rss_bytes", json_integer(ld_profile_peak_rss())))
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    return ld_atomic_write_file(path, "profile", write_root, r->root, err);
}
