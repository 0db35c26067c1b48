/* layerdiff CLI — what `layerdiff bisect` prints and writes (see
 * bisect_output.h). */
#include "cli/bisect_output.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli/format.h"
#include "report/atomic_file.h"

void ld_bisect_outcome_free(ld_bisect_outcome *o)
{
    free(o->set);
    free(o->before);
    free(o->after);
    free(o->trials);
    memset(o, 0, sizeof *o);
}

void ld_bisect_files_free(ld_bisect_files *f)
{
    free(f->precisions);
    free(f->output_types);
    free(f->trtexec);
    free(f->ort);
    free(f->json);
    memset(f, 0, sizeof *f);
}

/* --- rules ------------------------------------------------------------------------------ */

static bool is_float_type(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT16 || d == LD_DTYPE_BFLOAT16;
}

/* The layer gets an output-type rule (as the trial runner's fp32 engine). */
static bool wants_output_rule(const ld_layer_plan *lp)
{
    return is_float_type(lp->output_type) && lp->output_reason != LD_PLAN_CAST;
}

/* Whether a name survives a line of an @FILE: no newline, no trailing
 * whitespace (the parser trims it). */
static bool writable_name(const char *name)
{
    size_t n = strlen(name);
    return !strpbrk(name, "\n\r") && n > 0 && name[n - 1] != ' ' && name[n - 1] != '\t';
}

static ld_status push_rule(ld_layer_rule **rules, int *n, const char *name, ld_error *err)
{
    ld_layer_rule *grown = realloc(*rules, (size_t)(*n + 1) * sizeof *grown);
    if (!grown)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    *rules = grown;
    ld_layer_rule *r = &grown[(*n)++];
    *r = (ld_layer_rule){.precision = LD_PRECISION_FP32, .type = LD_DTYPE_FLOAT32};
    r->pattern = ld_bisect_exact_pattern(name);
    if (r->pattern && asprintf(&r->text, "%s:fp32", r->pattern) < 0)
        r->text = NULL;
    if (!r->pattern || !r->text)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    return LD_OK;
}

ld_status ld_bisect_add_rules(const ld_graph *g, const ld_precision_plan *plan, const int *set,
                              int n, ld_engine_config *cfg, ld_error *err)
{
    ld_status st = LD_OK;
    if (cfg->constraints == LD_CONSTRAINTS_NONE) { /* rules ignored in the base: drop them */
        ld_engine_config plain;
        ld_engine_config_init(&plain);
        st = ld_engine_config_copy(&plain, cfg, err);
        for (int i = 0; st == LD_OK && i < plain.n_layer_precisions; i++)
            free(plain.layer_precisions[i].pattern), free(plain.layer_precisions[i].text);
        for (int i = 0; st == LD_OK && i < plain.n_layer_output_types; i++)
            free(plain.layer_output_types[i].pattern), free(plain.layer_output_types[i].text);
        if (st != LD_OK)
            return st;
        free(plain.layer_precisions);
        free(plain.layer_output_types);
        plain.layer_precisions = plain.layer_output_types = NULL;
        plain.n_layer_precisions = plain.n_layer_output_types = 0;
        ld_engine_config_clear(cfg);
        *cfg = plain;
        cfg->constraints = LD_CONSTRAINTS_OBEY;
    }
    for (int k = 0; k < n && st == LD_OK; k++) {
        const ld_node *node = &g->nodes[set[k]];
        if (!writable_name(node->name))
            return ld_error_set(err, LD_ERR_UNSUPPORTED, "bisect: node name '%s' cannot be "
                                "written in a --layer-precisions file (newline or trailing "
                                "whitespace)", node->name);
        st = push_rule(&cfg->layer_precisions, &cfg->n_layer_precisions, node->name, err);
        if (st == LD_OK && wants_output_rule(&plan->layers[set[k]]))
            st = push_rule(&cfg->layer_output_types, &cfg->n_layer_output_types, node->name,
                           err);
    }
    return st;
}

/* --- trtexec ---------------------------------------------------------------------------- */

/* trtexec's wildcard: a name with one '*' matches every layer name that
 * starts with what precedes it and ends with what follows it. */
static bool trtexec_matches(const char *pattern, const char *name)
{
    const char *star = strchr(pattern, '*');
    if (!star)
        return strcmp(pattern, name) == 0;
    size_t pre = (size_t)(star - pattern), post = strlen(star + 1), n = strlen(name);
    return n >= pre + post && strncmp(name, pattern, pre) == 0 &&
           strcmp(name + n - post, star + 1) == 0;
}

/* trtexec splits --layerPrecisions at ',' and takes the name up to the last
 * ':' (quotes are removed): ',' and '\'' cannot be written. A '*' is its
 * wildcard: a name with one is still exact when it matches no other node
 * (two cannot be written). Nodes without a name in the model have none in
 * TensorRT either. */
bool ld_bisect_trtexec_expressible(const ld_graph *g, const ld_node *node)
{
    const char *star = strchr(node->name, '*');
    if (!node->has_name || strpbrk(node->name, ",'\n") || (star && strchr(star + 1, '*')))
        return false;
    for (int i = 0; star && i < g->n_nodes; i++)
        if (i != node->index && trtexec_matches(node->name, g->nodes[i].name))
            return false;
    return true;
}

/* "fp32", or "fp32+fp32" for a layer with two float outputs. */
static void output_types(const ld_graph *g, const ld_node *node, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int j = 0; j < node->n_outputs && used + 6 < size; j++) {
        if (node->outputs[j] < 0)
            continue;
        ld_dtype d = g->values[node->outputs[j]].type.dtype;
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? "+" : "",
                                 d == LD_DTYPE_UNDEFINED || is_float_type(d) ? "fp32"
                                                                           : "unknown");
    }
}

/* Appends s to a growing string (*out, *len). */
static bool append(char **out, size_t *len, const char *s)
{
    size_t n = strlen(s);
    char *grown = realloc(*out, *len + n + 1);
    if (!grown)
        return false;
    memcpy(grown + *len, s, n + 1);
    *out = grown;
    *len += n;
    return true;
}

char *ld_bisect_trtexec_flags(const ld_graph *g, const ld_precision_plan *plan,
                              const ld_engine_config *cfg, const int *set, int n,
                              int *unexpressed)
{
    char *prec = NULL, *outs = NULL, *line = NULL;
    size_t lp = 0, lo = 0, ll = 0;
    bool ok = append(&prec, &lp, "--layerPrecisions=") && append(&outs, &lo, "--layerOutputTypes=");
    int n_prec = 0, n_out = 0;
    *unexpressed = 0;
    for (int k = 0; k < n && ok; k++) {
        const ld_node *node = &g->nodes[set[k]];
        char types[256];
        if (!ld_bisect_trtexec_expressible(g, node)) {
            (*unexpressed)++;
            continue;
        }
        ok = (!n_prec++ || append(&prec, &lp, ",")) && append(&prec, &lp, node->name) &&
             append(&prec, &lp, ":fp32");
        output_types(g, node, types, sizeof types);
        if (ok && wants_output_rule(&plan->layers[set[k]]) && !strstr(types, "unknown"))
            ok = (!n_out++ || append(&outs, &lo, ",")) && append(&outs, &lo, node->name) &&
                 append(&outs, &lo, ":") && append(&outs, &lo, types);
    }
    char *qprec = ok ? ld_cli_shell_quote(prec) : NULL, *qouts = ok ? ld_cli_shell_quote(outs) : NULL;
    ok = qprec && qouts && append(&line, &ll, cfg->bf16 ? "--bf16" : "--fp16") &&
         (ld_engine_tf32_enabled(cfg) || append(&line, &ll, " --noTF32")) &&
         append(&line, &ll, " --precisionConstraints=obey");
    if (ok && n_prec)
        ok = append(&line, &ll, " ") && append(&line, &ll, qprec);
    if (ok && n_out)
        ok = append(&line, &ll, " ") && append(&line, &ll, qouts);
    free(prec);
    free(outs);
    free(qprec);
    free(qouts);
    if (!ok) {
        free(line);
        return NULL;
    }
    return line;
}

/* --- files ------------------------------------------------------------------------------- */

static ld_status put_text(const void *text, FILE *f, ld_error *err)
{
    (void)err;
    fputs(text, f); /* an error shows on the stream */
    return LD_OK;
}

/* Whole or not at all (report/atomic_file.h). */
static ld_status write_text(const char *path, const char *text, ld_error *err)
{
    return ld_atomic_write_file(path, "file", put_text, text, err);
}

/* One --layer-precisions / --layer-output-types @FILE: a comment, then one
 * exact pattern per line. */
static char *rules_text(const ld_engine_config *cfg, bool output_types, const char *model)
{
    const ld_layer_rule *rules = output_types ? cfg->layer_output_types : cfg->layer_precisions;
    int n = output_types ? cfg->n_layer_output_types : cfg->n_layer_precisions;
    char *text = NULL;
    size_t len = 0;
    char head[512];
    snprintf(head, sizeof head, "# layerdiff bisect %s: layers kept in fp32 (%s), one exact "
             "node name per line\n# use with --precision-constraints obey --%s @FILE\n", model,
             output_types ? "output type" : "compute precision",
             output_types ? "layer-output-types" : "layer-precisions");
    bool ok = append(&text, &len, head);
    for (int i = 0; i < n && ok; i++)
        ok = append(&text, &len, rules[i].text) && append(&text, &len, "\n");
    if (!ok)
        free(text);
    return ok ? text : NULL;
}

static char *join_path(const char *dir, const char *name)
{
    char *p = NULL;
    return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

static ld_status make_paths(const char *dir, ld_bisect_files *f, ld_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ld_error_set(err, LD_ERR_IO, "%s: cannot create the folder: %s", dir,
                            strerror(errno));
    f->precisions = join_path(dir, "layer-precisions.txt");
    f->output_types = join_path(dir, "layer-output-types.txt");
    f->trtexec = join_path(dir, "trtexec-flags.txt");
    f->ort = join_path(dir, "ort_node_block_list.json");
    f->json = join_path(dir, "bisect.json");
    if (!f->precisions || !f->output_types || !f->trtexec || !f->ort || !f->json)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    return LD_OK;
}

static ld_status write_ort(const ld_graph *g, const ld_bisect_outcome *o, const char *path,
                           ld_error *err)
{
    json_t *root = json_object(), *names = json_array();
    bool ok = root && names;
    int unnamed = 0;
    for (int k = 0; k < o->n_set && ok; k++) {
        const ld_node *node = &g->nodes[o->set[k]];
        if (node->has_name)
            ok = ld_json_append(names, ld_json_string(node->name));
        else
            unnamed++;
    }
    ok = ok && ld_json_set(root, "node_block_list", names);
    if (!ok) {
        json_decref(root);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    if (unnamed)
        fprintf(stderr, "layerdiff bisect: warning: %d layer%s without a name in the model "
                "cannot be listed in %s\n", unnamed, unnamed == 1 ? "" : "s", path);
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    ld_status st = text ? LD_OK : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    size_t len = text ? strlen(text) : 0;
    if (st == LD_OK && !append(&text, &len, "\n"))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK)
        st = write_text(path, text, err);
    free(text);
    return st;
}

ld_status ld_bisect_write_files(const char *dir, const ld_cli_bisect_setup *s,
                                const ld_precision_plan *plan, const ld_trials *t,
                                const ld_bisect_outcome *o, const char *check_command,
                                ld_bisect_files *files, ld_error *err)
{
    ld_engine_config mine; /* only the set's rules: the user's own stay on their command line */
    char *prec = NULL, *outs = NULL, *trt = NULL;
    size_t trt_len = 0;
    int unexpressed = 0;
    ld_engine_config_init(&mine);
    mine.constraints = LD_CONSTRAINTS_OBEY;
    ld_status st = make_paths(dir, files, err);
    if (st == LD_OK)
        st = ld_bisect_add_rules(s->graph, plan, o->set, o->n_set, &mine, err);
    if (st == LD_OK) {
        prec = rules_text(&mine, false, s->model_path);
        outs = rules_text(&mine, true, s->model_path);
        trt = ld_bisect_trtexec_flags(s->graph, plan, &s->engine, o->set, o->n_set, &unexpressed);
        trt_len = trt ? strlen(trt) : 0;
        if (!prec || !outs || !trt || !append(&trt, &trt_len, "\n"))
            st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    if (st == LD_OK)
        st = write_text(files->precisions, prec, err);
    if (st == LD_OK)
        st = write_text(files->output_types, outs, err);
    if (st == LD_OK)
        st = write_text(files->trtexec, trt, err);
    if (st == LD_OK)
        st = write_ort(s->graph, o, files->ort, err);
    if (st == LD_OK)
        st = ld_bisect_write_json(files->json, s, t, o, trt, unexpressed, check_command, err);
    if (st == LD_OK && unexpressed)
        fprintf(stderr, "layerdiff bisect: warning: %d fp32 layer%s cannot be named in "
                "trtexec flags (no name in the model, ',' or \"'\" in the name, or a '*' "
                "matching other layers): set "
                "%s with the TensorRT API (\"trtexec\": false in bisect.json)\n", unexpressed,
                unexpressed == 1 ? "" : "s", unexpressed == 1 ? "it" : "them");
    free(prec);
    free(outs);
    free(trt);
    ld_engine_config_clear(&mine);
    return st;
}
