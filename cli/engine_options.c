/* layerdiff CLI — the emulated engine's flags (see engine_options.h). */
#include "cli/engine_options.h"

#include <stdio.h>
#include <string.h>

const char *ld_cli_engine_first_flag(const ld_cli_engine_values *v)
{
    if (v->fp16)
        return "--fp16";
    if (v->bf16)
        return "--bf16";
    if (v->tf32)
        return "--tf32";
    if (v->no_tf32)
        return "--no-tf32";
    if (v->tf32_rounding)
        return "--tf32-rounding";
    if (v->accumulate)
        return "--accumulate";
    if (v->flush_denormals)
        return "--flush-denormals";
    if (v->respect_declared_types)
        return "--respect-declared-types";
    if (v->constraints)
        return "--precision-constraints";
    if (v->layer_precisions.n)
        return "--layer-precisions";
    if (v->layer_output_types.n)
        return "--layer-output-types";
    return NULL;
}

static ld_status parse_choice(const char *cmd, const char *option, const char *value,
                              const char *const *names, int n, int *out, ld_error *err)
{
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0) {
            *out = i;
            return LD_OK;
        }
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        strcat(list, i ? (i + 1 == n ? " or " : ", ") : "");
        strcat(list, names[i]);
    }
    return ld_cli_usage_error(err, cmd, "%s must be %s, got '%s'", option, list, value);
}

static ld_status add_specs(const char *cmd, const ld_cli_list *specs, bool output_types,
                           ld_engine_config *cfg, ld_error *err)
{
    for (int i = 0; i < specs->n; i++) {
        ld_status st = ld_engine_add_rules(cfg, specs->items[i], output_types, err);
        if (st == LD_ERR_USAGE)
            return ld_cli_usage_error(err, cmd, "%s", err->message);
        if (st != LD_OK)
            return st;
    }
    return LD_OK;
}

static ld_status fill_config(const char *cmd, const ld_cli_engine_values *v,
                             ld_engine_config *cfg, ld_error *err)
{
    static const char *const roundings[] = {"rne", "rna", "rz"};
    static const char *const accumulations[] = {"fp32", "half"};
    static const char *const constraints[] = {"none", "prefer", "obey"};
    int choice = 0;
    ld_status st = LD_OK;
    if (v->fp16 && v->bf16)
        return ld_cli_usage_error(err, cmd, "--fp16 and --bf16 exclude each other: a layer "
                                  "computes in one reduced precision (use --layer-precisions "
                                  "to mix them)");
    if (v->tf32 && v->no_tf32)
        return ld_cli_usage_error(err, cmd, "--tf32 and --no-tf32 contradict each other");
    cfg->fp16 = v->fp16;
    cfg->bf16 = v->bf16;
    cfg->tf32 = !v->no_tf32;
    cfg->tf32_explicit = v->tf32;
    cfg->flush_denormals = v->flush_denormals;
    cfg->respect_declared_types = v->respect_declared_types;
    if (v->tf32_rounding) {
        st = parse_choice(cmd, "--tf32-rounding", v->tf32_rounding, roundings, 3, &choice, err);
        cfg->tf32_rounding = (ld_rounding)choice;
    }
    if (st == LD_OK && v->accumulate) {
        st = parse_choice(cmd, "--accumulate", v->accumulate, accumulations, 2, &choice, err);
        cfg->accumulate_half = choice == 1;
    }
    if (st == LD_OK && v->constraints) {
        st = parse_choice(cmd, "--precision-constraints", v->constraints, constraints, 3,
                          &choice, err);
        cfg->constraints = (ld_constraints)choice;
    }
    if (st == LD_OK)
        st = add_specs(cmd, &v->layer_precisions, false, cfg, err);
    if (st == LD_OK)
        st = add_specs(cmd, &v->layer_output_types, true, cfg, err);
    return st;
}

ld_status ld_cli_engine_config(const char *cmd, const ld_cli_engine_values *v,
                               ld_engine_config *cfg, ld_error *err)
{
    ld_engine_config_init(cfg);
    ld_status st = fill_config(cmd, v, cfg, err);
    if (st != LD_OK)
        ld_engine_config_clear(cfg);
    return st;
}

ld_status ld_cli_engine_plan(const char *cmd, const ld_graph *g, const ld_engine_config *cfg,
                             ld_precision_plan **out, ld_error *err)
{
    ld_precision_plan *plan = NULL;
    ld_status st = ld_precision_plan_build(g, cfg, &plan, err);
    if (st == LD_ERR_USAGE)
        return ld_cli_usage_error(err, cmd, "%s", err->message);
    if (st != LD_OK)
        return st;
    for (int i = 0; i < plan->n_warnings; i++)
        fprintf(stderr, "layerdiff %s: warning: %s\n", cmd, plan->warnings[i]);
    fflush(stderr);
    if (out)
        *out = plan;
    else
        ld_precision_plan_destroy(plan);
    return LD_OK;
}

ld_status ld_cli_engine_setup(const char *cmd, const ld_cli_engine_values *v,
                              const ld_backend_vtable *const *backends, int n_backends,
                              ld_engine_config *cfg, bool *emulated, ld_error *err)
{
    *emulated = false;
    for (int i = 0; i < n_backends; i++)
        *emulated |= strcmp(backends[i]->name, "emulated") == 0;
    const char *flag = ld_cli_engine_first_flag(v);
    ld_engine_config_init(cfg);
    if (flag && !*emulated)
        return ld_cli_usage_error(err, cmd, "%s configures the emulated backend, which is not "
                                  "selected: add it, e.g. --backends reference,emulated", flag);
    return ld_cli_engine_config(cmd, v, cfg, err);
}
