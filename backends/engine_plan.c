/* layerdiff — the emulated engine's precision plan (see engine.h; the rules
 * are documented in docs/numerics.md, "Emulated engine"). */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/engine_internal.h"

/* How one rule fared over the graph. */
typedef struct rule_use {
    int matched;               /* layers the pattern matches */
    int applied;               /* float layers it set */
    const ld_node *unusable;   /* first matched layer it could not apply to */
    const char *unusable_why;  /* why (static string) */
} rule_use;

typedef struct planner {
    const ld_graph *g;
    const ld_engine_config *cfg;
    ld_precision_plan *plan;
    ld_static_info info;
    bool rules_active;         /* constraints prefer or obey */
    rule_use *prec_use;        /* per --layer-precisions rule */
    rule_use *out_use;         /* per --layer-output-types rule */
    ld_error *err;
} planner;

const char *ld_plan_reason_name(ld_plan_reason reason)
{
    switch (reason) {
    case LD_PLAN_DEFAULT: return "default";
    case LD_PLAN_PATTERN: return "pattern";
    case LD_PLAN_CAST: return "cast";
    case LD_PLAN_DECLARED: return "declared";
    case LD_PLAN_NOT_FLOAT: return "not-float";
    case LD_PLAN_SHAPE: return "shape";
    }
    return "unknown";
}

void ld_precision_plan_destroy(ld_precision_plan *plan)
{
    if (!plan)
        return;
    for (int i = 0; i < plan->n_layers; i++)
        free(plan->layers[i].why);
    for (int i = 0; i < plan->n_warnings; i++)
        free(plan->warnings[i]);
    free(plan->layers);
    free(plan->warnings);
    free(plan);
}

static ld_status add_warning(planner *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ld_status add_warning(planner *p, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    char **grown = n < 0 ? NULL
                         : realloc(p->plan->warnings,
                                   ((size_t)p->plan->n_warnings + 1) * sizeof *grown);
    if (!grown) {
        free(n < 0 ? NULL : line);
        return ld_error_set(p->err, LD_ERR_NOMEM, "out of memory");
    }
    p->plan->warnings = grown;
    p->plan->warnings[p->plan->n_warnings++] = line;
    return LD_OK;
}

static bool is_default_rule(const ld_layer_rule *r)
{
    return strcmp(r->pattern, "*") == 0;
}

static bool rule_matches(const ld_layer_rule *r, const ld_node *node)
{
    if (strncmp(r->pattern, "op:", 3) == 0)
        return fnmatch(r->pattern + 3, node->op_type, 0) == 0;
    return fnmatch(r->pattern, node->name, 0) == 0;
}

static bool is_tf32_op(const ld_node *node)
{
    static const char *const ops[] = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
    if (!ld_engine_default_domain(node->domain))
        return false;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(node->op_type, ops[i]) == 0)
            return true;
    return false;
}

static ld_precision precision_of_type(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT16 ? LD_PRECISION_FP16
           : d == LD_DTYPE_BFLOAT16 ? LD_PRECISION_BF16 : LD_PRECISION_FP32;
}

static ld_dtype type_of_precision(ld_precision p)
{
    return p == LD_PRECISION_FP16 ? LD_DTYPE_FLOAT16
           : p == LD_PRECISION_BF16 ? LD_DTYPE_BFLOAT16 : LD_DTYPE_FLOAT32;
}

/* --- classification --------------------------------------------------------------------- */

/* A value the engine may round: a float32/16/bf16 tensor, or one whose type
 * is unknown (rounding a non-float tensor is a no-op at run time). */
static bool maybe_rounded(const planner *p, int v)
{
    return v >= 0 && (p->info.types[v] == LD_DTYPE_UNDEFINED ||
                      ld_engine_is_rounded_type(p->info.types[v]));
}

static bool has_float_outputs(const planner *p, const ld_node *node)
{
    for (int j = 0; j < node->n_outputs; j++)
        if (maybe_rounded(p, node->outputs[j]))
            return true;
    return false;
}

/* LD_PLAN_DEFAULT for a float layer, else why it is untouched. */
static ld_plan_reason classify(const planner *p, const ld_node *node)
{
    bool dynamic = false, floats = has_float_outputs(p, node);
    for (int j = 0; j < node->n_outputs; j++)
        dynamic |= node->outputs[j] >= 0 && p->info.dynamic[node->outputs[j]];
    for (int j = 0; j < node->n_inputs; j++)
        floats |= maybe_rounded(p, node->inputs[j]);
    if (!dynamic)
        return LD_PLAN_SHAPE;
    return floats ? LD_PLAN_DEFAULT : LD_PLAN_NOT_FLOAT;
}

/* The float type the model declares for the node: its first float output's,
 * else its first float input's; UNDEFINED when none is known. */
static ld_dtype declared_float_type(const planner *p, const ld_node *node)
{
    for (int side = 0; side < 2; side++) {
        int n = side == 0 ? node->n_outputs : node->n_inputs;
        const int *idx = side == 0 ? node->outputs : node->inputs;
        for (int j = 0; j < n; j++)
            if (idx[j] >= 0 && ld_engine_is_rounded_type(p->info.types[idx[j]]))
                return p->info.types[idx[j]];
    }
    return LD_DTYPE_UNDEFINED;
}

/* --- rules ------------------------------------------------------------------------------- */

static const char *untouched_why(ld_plan_reason r)
{
    return r == LD_PLAN_SHAPE ? "it computes shapes or constants"
                              : "it has no float32, float16 or bfloat16 tensors";
}

/* The rule that sets this layer (a specific pattern, else "*"), or NULL.
 * Fails when two specific patterns (or two "*") disagree. `usable` false:
 * the layer is matched but cannot take the setting (counted for warnings). */
static ld_status match_rules(planner *p, const ld_node *node, bool output_types, bool usable,
                             const char *unusable_why, const ld_layer_rule **out)
{
    const ld_engine_config *cfg = p->cfg;
    const ld_layer_rule *rules = output_types ? cfg->layer_output_types : cfg->layer_precisions;
    int n = output_types ? cfg->n_layer_output_types : cfg->n_layer_precisions;
    rule_use *use = output_types ? p->out_use : p->prec_use;
    const char *option = output_types ? "--layer-output-types" : "--layer-precisions";
    const ld_layer_rule *specific = NULL, *fallback = NULL;
    *out = NULL;
    for (int r = 0; r < n; r++) {
        if (!rule_matches(&rules[r], node))
            continue;
        use[r].matched++;
        if (!usable) {
            if (!use[r].unusable) {
                use[r].unusable = node;
                use[r].unusable_why = unusable_why;
            }
            continue;
        }
        const ld_layer_rule **slot = is_default_rule(&rules[r]) ? &fallback : &specific;
        if (*slot && (*slot)->precision != rules[r].precision)
            return ld_error_set(p->err, LD_ERR_USAGE,
                                "%s '%s' and '%s' give node '%s' (%s) two different types "
                                "(%s and %s); make the patterns disjoint", option,
                                (*slot)->text, rules[r].text, node->name, node->op_type,
                                ld_precision_name((*slot)->precision),
                                ld_precision_name(rules[r].precision));
        if (!*slot)
            *slot = &rules[r];
    }
    *out = specific ? specific : fallback;
    if (*out)
        use[*out - rules].applied++;
    return LD_OK;
}

/* --- one layer ------------------------------------------------------------------------ */

static ld_status plan_precision(planner *p, const ld_node *node, ld_layer_plan *lp)
{
    const ld_engine_config *cfg = p->cfg;
    const ld_layer_rule *rule = NULL;
    if (p->rules_active) {
        ld_status st = match_rules(p, node, false, lp->emulated,
                                   untouched_why(lp->precision_reason), &rule);
        if (st != LD_OK)
            return st;
    }
    if (!lp->emulated)
        return LD_OK;
    ld_dtype declared = cfg->respect_declared_types ? declared_float_type(p, node)
                                                    : LD_DTYPE_UNDEFINED;
    if (rule) {
        lp->precision = rule->precision;
        lp->precision_reason = LD_PLAN_PATTERN;
        lp->precision_rule = rule;
        return LD_OK;
    }
    if (declared != LD_DTYPE_UNDEFINED) {
        lp->precision = precision_of_type(declared);
        lp->precision_reason = LD_PLAN_DECLARED;
    } else {
        lp->precision = cfg->fp16 ? LD_PRECISION_FP16
                        : cfg->bf16 ? LD_PRECISION_BF16 : LD_PRECISION_FP32;
    }
    if (lp->precision == LD_PRECISION_FP32 && p->plan->tf32 && is_tf32_op(node))
        lp->precision = LD_PRECISION_TF32;
    return LD_OK;
}

static ld_status plan_output(planner *p, const ld_node *node, ld_layer_plan *lp)
{
    const ld_engine_config *cfg = p->cfg;
    const ld_layer_rule *rule = NULL;
    ld_dtype cast_to = ld_engine_cast_to(node);
    bool is_cast = ld_engine_default_domain(node->domain) && strcmp(node->op_type, "Cast") == 0;
    bool usable = lp->emulated && has_float_outputs(p, node);
    if (p->rules_active) {
        ld_status st = match_rules(p, node, true, usable,
                                   lp->emulated ? "it has no float outputs"
                                                : untouched_why(lp->precision_reason),
                                   &rule);
        if (st != LD_OK)
            return st;
    }
    if (!lp->emulated)
        return LD_OK;
    if (rule && is_cast && is_default_rule(rule)) {
        rule = NULL; /* "*" is the default for layers nothing else fixes: a Cast fixes itself */
    } else if (rule && is_cast && cast_to != rule->type) {
        return ld_error_set(p->err, LD_ERR_USAGE,
                            "--layer-output-types '%s' contradicts node '%s' (Cast), whose "
                            "output type is fixed by its to=%s; exclude it from the pattern",
                            rule->text, node->name, ld_dtype_name(cast_to));
    }
    if (rule) {
        lp->output_type = rule->type;
        lp->output_reason = LD_PLAN_PATTERN;
        lp->output_rule = rule;
    } else if (is_cast) {
        lp->output_type = ld_engine_is_rounded_type(cast_to) ? cast_to : LD_DTYPE_UNDEFINED;
        lp->output_reason = LD_PLAN_CAST;
    } else if (!has_float_outputs(p, node)) {
        lp->output_type = LD_DTYPE_UNDEFINED; /* nothing to round (Equal, ArgMax, ...) */
    } else if (cfg->respect_declared_types && declared_float_type(p, node) != LD_DTYPE_UNDEFINED) {
        lp->output_type = declared_float_type(p, node);
        lp->output_reason = LD_PLAN_DECLARED;
    } else {
        lp->output_type = type_of_precision(lp->precision);
    }
    /* Graph outputs leave the engine in the type the model declares (an
     * engine's I/O format), unless a rule says otherwise. */
    for (int j = 0; !rule && j < node->n_outputs; j++) {
        int v = node->outputs[j];
        if (v < 0 || !p->g->values[v].is_graph_output)
            continue;
        ld_dtype d = p->g->values[v].type.kind == LD_TYPE_TENSOR ? p->g->values[v].type.dtype
                                                                : LD_DTYPE_UNDEFINED;
        if (ld_engine_is_rounded_type(d) && d != lp->output_type &&
            lp->output_type != LD_DTYPE_UNDEFINED) {
            lp->delivered_type = d;
            break;
        }
    }
    return LD_OK;
}

/* The "why" column. */
static ld_status describe_layer(planner *p, const ld_node *node, ld_layer_plan *lp)
{
    char why[512];
    size_t pos = 0;
#define ADD(...)                                                                    \
    do {                                                                            \
        int w_ = snprintf(why + pos, sizeof why - pos, __VA_ARGS__);                \
        pos = w_ < 0 || (size_t)w_ >= sizeof why - pos ? sizeof why - 1 : pos + (size_t)w_; \
    } while (0)
    const ld_engine_config *cfg = p->cfg;
    switch (lp->precision_reason) {
    case LD_PLAN_SHAPE:
    case LD_PLAN_NOT_FLOAT:
        ADD("untouched: %s", untouched_why(lp->precision_reason));
        break;
    case LD_PLAN_PATTERN:
        ADD("--layer-precisions '%s'", lp->precision_rule->text);
        break;
    case LD_PLAN_DECLARED:
        ADD("model declares %s", ld_dtype_name(declared_float_type(p, node)));
        break;
    default:
        if (cfg->fp16 || cfg->bf16)
            ADD("%s", cfg->fp16 ? "--fp16" : "--bf16");
        else if (lp->precision == LD_PRECISION_TF32)
            ADD("fp32 default; TF32 for conv/matmul");
        else if (is_tf32_op(node))
            ADD("fp32 default; TF32 off (%s)", cfg->tf32 ? "NVIDIA_TF32_OVERRIDE=0" : "--no-tf32");
        else
            ADD("fp32 default");
        break;
    }
    if (lp->precision_reason == LD_PLAN_DECLARED && lp->precision == LD_PRECISION_TF32)
        ADD("; TF32 for conv/matmul");
    if (lp->output_reason == LD_PLAN_PATTERN)
        ADD("; output: --layer-output-types '%s'", lp->output_rule->text);
    else if (lp->output_reason == LD_PLAN_CAST)
        ADD("; output: Cast to %s", ld_dtype_name(ld_engine_cast_to(node)));
    else if (lp->output_reason == LD_PLAN_DECLARED && lp->precision_reason != LD_PLAN_DECLARED)
        ADD("; output: model declares %s", ld_dtype_name(lp->output_type));
    if (lp->delivered_type != LD_DTYPE_UNDEFINED)
        ADD("; graph output delivered as %s", ld_dtype_name(lp->delivered_type));
#undef ADD
    lp->why = strdup(why);
    return lp->why ? LD_OK : ld_error_set(p->err, LD_ERR_NOMEM, "out of memory");
}

static ld_status plan_layer(planner *p, int i)
{
    const ld_node *node = &p->g->nodes[i];
    ld_layer_plan *lp = &p->plan->layers[i];
    ld_plan_reason kind = classify(p, node);
    *lp = (ld_layer_plan){.emulated = kind == LD_PLAN_DEFAULT, .precision = LD_PRECISION_FP32,
                          .precision_reason = kind,
                          .output_reason = kind == LD_PLAN_DEFAULT ? LD_PLAN_DEFAULT : kind};
    ld_status st = plan_precision(p, node, lp);
    if (st == LD_OK)
        st = plan_output(p, node, lp);
    if (st == LD_OK)
        st = describe_layer(p, node, lp);
    return st;
}

/* --- rule bookkeeping ---------------------------------------------------------------- */

/* "'a:fp16', 'b:fp32'" for a warning. */
static void list_rules(char *buf, size_t size, const ld_layer_rule *rules, int n)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && pos < size; i++) {
        int w = snprintf(buf + pos, size - pos, "%s'%s'", i ? ", " : "", rules[i].text);
        pos = w < 0 ? size : pos + (size_t)w;
    }
}

static ld_status warn_ignored_rules(planner *p)
{
    const ld_engine_config *cfg = p->cfg;
    if (cfg->n_layer_precisions + cfg->n_layer_output_types == 0)
        return LD_OK;
    char prec[600], out[600];
    list_rules(prec, sizeof prec, cfg->layer_precisions, cfg->n_layer_precisions);
    list_rules(out, sizeof out, cfg->layer_output_types, cfg->n_layer_output_types);
    return add_warning(p, "--precision-constraints none (the default) ignores %s%s%s%s%s; "
                       "use --precision-constraints prefer or obey",
                       cfg->n_layer_precisions ? "--layer-precisions " : "", prec,
                       cfg->n_layer_precisions && cfg->n_layer_output_types ? " and " : "",
                       cfg->n_layer_output_types ? "--layer-output-types " : "", out);
}

/* Warnings (or, under obey, an error) for rules that set nothing. */
static ld_status check_rule_use(planner *p, bool output_types)
{
    const ld_engine_config *cfg = p->cfg;
    const ld_layer_rule *rules = output_types ? cfg->layer_output_types : cfg->layer_precisions;
    int n = output_types ? cfg->n_layer_output_types : cfg->n_layer_precisions;
    const rule_use *use = output_types ? p->out_use : p->prec_use;
    const char *option = output_types ? "--layer-output-types" : "--layer-precisions";
    ld_status st = LD_OK;
    for (int r = 0; r < n && st == LD_OK; r++) {
        if (use[r].matched == 0) {
            st = add_warning(p, "%s '%s' matches no layer", option, rules[r].text);
        } else if (use[r].applied == 0 && use[r].unusable && !is_default_rule(&rules[r])) {
            const ld_node *node = use[r].unusable;
            if (cfg->constraints == LD_CONSTRAINTS_OBEY)
                return ld_error_set(p->err, LD_ERR_USAGE,
                                    "%s '%s' cannot be obeyed: it matches only layers it cannot "
                                    "apply to, e.g. node '%s' (%s): %s", option, rules[r].text,
                                    node->name, node->op_type, use[r].unusable_why);
            st = add_warning(p, "%s '%s' is not applied: it matches only layers it cannot "
                             "apply to, e.g. node '%s' (%s): %s", option, rules[r].text,
                             node->name, node->op_type, use[r].unusable_why);
        }
    }
    return st;
}

/* "*:fp16,*:fp32" fails even on a graph without float layers. */
static ld_status check_default_rules(planner *p, bool output_types)
{
    const ld_engine_config *cfg = p->cfg;
    const ld_layer_rule *rules = output_types ? cfg->layer_output_types : cfg->layer_precisions;
    int n = output_types ? cfg->n_layer_output_types : cfg->n_layer_precisions;
    const ld_layer_rule *first = NULL;
    for (int r = 0; r < n; r++) {
        if (!is_default_rule(&rules[r]))
            continue;
        if (first && first->precision != rules[r].precision)
            return ld_error_set(p->err, LD_ERR_USAGE,
                                "%s '%s' and '%s' give every layer two different types",
                                output_types ? "--layer-output-types" : "--layer-precisions",
                                first->text, rules[r].text);
        if (!first)
            first = &rules[r];
    }
    return LD_OK;
}

/* --- entry points -------------------------------------------------------------------- */

static ld_status plan_all(planner *p)
{
    const ld_engine_config *cfg = p->cfg;
    ld_status st = ld_static_info_compute(p->g, &p->info, p->err);
    if (st != LD_OK)
        return st;
    if (cfg->tf32_explicit && !p->plan->tf32)
        st = add_warning(p, "--tf32 has no effect: NVIDIA_TF32_OVERRIDE=0 in the environment "
                         "turns TF32 off, as on a GPU");
    if (st == LD_OK && cfg->constraints == LD_CONSTRAINTS_NONE)
        st = warn_ignored_rules(p);
    if (st == LD_OK && p->rules_active)
        st = check_default_rules(p, false);
    if (st == LD_OK && p->rules_active)
        st = check_default_rules(p, true);
    for (int i = 0; i < p->g->n_nodes && st == LD_OK; i++)
        st = plan_layer(p, i);
    if (st == LD_OK && p->rules_active)
        st = check_rule_use(p, false);
    if (st == LD_OK && p->rules_active)
        st = check_rule_use(p, true);
    return st;
}

ld_status ld_precision_plan_build(const ld_graph *g, const ld_engine_config *cfg,
                                  ld_precision_plan **out, ld_error *err)
{
    ld_status st = ld_engine_config_check(cfg, err);
    if (st != LD_OK)
        return st;
    planner p = {.g = g, .cfg = cfg, .err = err,
                 .rules_active = cfg->constraints != LD_CONSTRAINTS_NONE};
    p.plan = calloc(1, sizeof *p.plan);
    if (p.plan)
        p.plan->layers = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *p.plan->layers);
    p.prec_use = calloc((size_t)cfg->n_layer_precisions + 1, sizeof *p.prec_use);
    p.out_use = calloc((size_t)cfg->n_layer_output_types + 1, sizeof *p.out_use);
    if (!p.plan || !p.plan->layers || !p.prec_use || !p.out_use) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    p.plan->n_layers = g->n_nodes;
    p.plan->tf32 = ld_engine_tf32_enabled(cfg);
    st = plan_all(&p);
out:
    ld_static_info_free(&p.info);
    free(p.prec_use);
    free(p.out_use);
    if (st != LD_OK) {
        ld_precision_plan_destroy(p.plan);
        return st;
    }
    *out = p.plan;
    return LD_OK;
}

void ld_precision_plan_numerics(const ld_precision_plan *plan, const ld_engine_config *cfg,
                                int node_index, ld_layer_numerics *out)
{
    const ld_layer_plan *lp = &plan->layers[node_index];
    *out = (ld_layer_numerics){.precision = lp->precision, .output_type = LD_DTYPE_UNDEFINED};
    if (!lp->emulated)
        return;
    out->output_type = lp->output_type;
    out->round.mode = lp->precision == LD_PRECISION_TF32 ? cfg->tf32_rounding
                                                          : LD_ROUND_NEAREST_EVEN;
    out->round.flush_denormals = cfg->flush_denormals;
    out->accumulate_half = cfg->accumulate_half && (lp->precision == LD_PRECISION_FP16 ||
                                                    lp->precision == LD_PRECISION_BF16);
}
