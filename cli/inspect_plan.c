/* `layerdiff inspect MODEL.onnx --engine [engine flags]`: the emulated
 * engine's precision plan, every layer with the precision it computes in,
 * the type of its float outputs and why, as text or JSON (docs/cli.md). */
#include <stdlib.h>
#include <string.h>

#include "cli/engine_options.h"
#include "cli/format.h"
#include "cli/inspect.h"
#include "cli/term.h"
#include "layerdiff/onnx.h"

#define CMD "inspect"

static const char *precision_cell(const ld_layer_plan *lp)
{
    return lp->emulated ? ld_precision_name(lp->precision) : "-";
}

static const char *output_cell(const ld_layer_plan *lp)
{
    return lp->emulated && lp->output_type != LD_DTYPE_UNDEFINED ? ld_dtype_name(lp->output_type)
                                                                 : "-";
}

static bool is_default_domain(const char *domain)
{
    return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

/* "fp16 12, tf32 2, fp32 1, untouched 7". */
static void count_line(const ld_precision_plan *plan, char *buf, size_t size)
{
    int counts[LD_PRECISION_BF16 + 1] = {0}, untouched = 0;
    static const ld_precision order[] = {LD_PRECISION_FP16, LD_PRECISION_BF16,
                                         LD_PRECISION_TF32, LD_PRECISION_FP32};
    for (int i = 0; i < plan->n_layers; i++) {
        if (plan->layers[i].emulated)
            counts[plan->layers[i].precision]++;
        else
            untouched++;
    }
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < sizeof order / sizeof order[0] && pos < size; k++)
        if (counts[order[k]]) {
            int w = snprintf(buf + pos, size - pos, "%s %d, ", ld_precision_name(order[k]),
                             counts[order[k]]);
            pos = w < 0 ? size : pos + (size_t)w;
        }
    if (pos < size)
        snprintf(buf + pos, size - pos, "untouched %d", untouched);
}

static ld_status print_plan_text(FILE *out, const char *path, const ld_graph *g,
                                 const ld_engine_config *cfg, const ld_precision_plan *plan,
                                 bool color, ld_error *err)
{
    char config[1024], counts[256];
    count_line(plan, counts, sizeof counts);
    fprintf(out, "%sPrecision plan%s %s\n", ld_term_style_code(color, LD_STYLE_BOLD),
            ld_term_style_code(color, LD_STYLE_RESET), path);
    fprintf(out, "  engine  %s\n", ld_engine_config_describe(cfg, config, sizeof config));
    fprintf(out, "  layers  %d: %s\n\n", plan->n_layers, counts);
    ld_table *t = ld_table_create(6);
    if (!t)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_table_align_right(t, 0);
    const char *head[] = {"#", "node", "op", "precision", "output", "why"};
    ld_status st = LD_OK;
    for (int i = 0; i < 6 && st == LD_OK; i++)
        st = ld_table_add(t, head[i], err);
    for (int i = 0; i < plan->n_layers && st == LD_OK; i++) {
        const ld_node *node = &g->nodes[i];
        const ld_layer_plan *lp = &plan->layers[i];
        st = ld_table_addf(t, err, "%d", i);
        if (st == LD_OK)
            st = ld_table_add(t, node->name, err);
        if (st == LD_OK)
            st = is_default_domain(node->domain)
                     ? ld_table_add(t, node->op_type, err)
                     : ld_table_addf(t, err, "%s.%s", node->domain, node->op_type);
        if (st == LD_OK)
            st = ld_table_add(t, precision_cell(lp), err);
        if (st == LD_OK)
            st = ld_table_add(t, output_cell(lp), err);
        if (st == LD_OK)
            st = ld_table_add(t, lp->why, err);
    }
    if (st == LD_OK)
        ld_table_print(t, out, "  ", true, color);
    ld_table_destroy(t);
    return st;
}

static json_t *json_type_or_null(ld_dtype d)
{
    return d == LD_DTYPE_UNDEFINED ? json_null() : json_string(ld_dtype_name(d));
}

static json_t *json_layer(const ld_graph *g, const ld_precision_plan *plan, int i)
{
    const ld_node *node = &g->nodes[i];
    const ld_layer_plan *lp = &plan->layers[i];
    json_t *o = json_object();
    bool ok = o && ld_json_set(o, "index", json_integer(i)) &&
              ld_json_set(o, "name", ld_json_string(node->name)) &&
              ld_json_set(o, "op_type", ld_json_string(node->op_type)) &&
              ld_json_set(o, "emulated", json_boolean(lp->emulated)) &&
              ld_json_set(o, "precision", lp->emulated
                                              ? json_string(ld_precision_name(lp->precision))
                                              : json_null()) &&
              ld_json_set(o, "output_type",
                          json_type_or_null(lp->emulated ? lp->output_type
                                                         : LD_DTYPE_UNDEFINED)) &&
              ld_json_set(o, "delivered_type", json_type_or_null(lp->delivered_type)) &&
              ld_json_set(o, "precision_reason",
                          json_string(ld_plan_reason_name(lp->precision_reason))) &&
              ld_json_set(o, "output_reason",
                          json_string(ld_plan_reason_name(lp->output_reason))) &&
              ld_json_set(o, "precision_rule", lp->precision_rule
                                                   ? ld_json_string(lp->precision_rule->text)
                                                   : json_null()) &&
              ld_json_set(o, "output_rule", lp->output_rule
                                                ? ld_json_string(lp->output_rule->text)
                                                : json_null()) &&
              ld_json_set(o, "why", ld_json_string(lp->why));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static ld_status print_plan_json(FILE *out, const char *path, const ld_graph *g,
                                 const ld_engine_config *cfg, const ld_precision_plan *plan,
                                 ld_error *err)
{
    char config[1024];
    json_t *root = json_object(), *layers = json_array(), *warnings = json_array();
    bool ok = root && layers && warnings &&
              ld_json_set(root, "kind", json_string("precision_plan")) &&
              ld_json_set(root, "path", ld_json_string(path)) &&
              ld_json_set(root, "engine", ld_json_string(ld_engine_config_describe(
                                              cfg, config, sizeof config))) &&
              ld_json_set(root, "tf32", json_boolean(plan->tf32)) &&
              ld_json_set(root, "layers", json_incref(layers)) &&
              ld_json_set(root, "warnings", json_incref(warnings));
    for (int i = 0; ok && i < plan->n_layers; i++)
        ok = ld_json_append(layers, json_layer(g, plan, i));
    for (int i = 0; ok && i < plan->n_warnings; i++)
        ok = ld_json_append(warnings, ld_json_string(plan->warnings[i]));
    ld_status st = ok ? ld_json_print(out, root, err)
                      : ld_error_set(err, LD_ERR_NOMEM, "out of memory building JSON");
    json_decref(layers);
    json_decref(warnings);
    json_decref(root);
    return st;
}

ld_status ld_inspect_plan(FILE *out, const char *path, const ld_engine_config *cfg,
                          const ld_inspect_options *opts, ld_error *err)
{
    ld_graph *g = NULL;
    ld_precision_plan *plan = NULL;
    ld_status st = ld_onnx_load_file(&g, path, err);
    if (st == LD_OK)
        st = ld_cli_engine_plan(CMD, g, cfg, &plan, err);
    if (st == LD_OK && opts->json)
        st = print_plan_json(out, path, g, cfg, plan, err);
    else if (st == LD_OK)
        st = print_plan_text(out, path, g, cfg, plan, opts->color, err);
    ld_precision_plan_destroy(plan);
    ld_graph_destroy(g);
    return st;
}
