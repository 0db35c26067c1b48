/* layerdiff — the emulated engine's configuration and the parsing of
 * --layer-precisions / --layer-output-types specs (see engine.h). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/engine.h"

void ld_engine_config_init(ld_engine_config *cfg)
{
    *cfg = (ld_engine_config){.tf32 = true, .tf32_rounding = LD_ROUND_NEAREST_EVEN,
                              .constraints = LD_CONSTRAINTS_NONE};
}

static void free_rules(ld_layer_rule *rules, int n)
{
    for (int i = 0; i < n; i++) {
        free(rules[i].pattern);
        free(rules[i].text);
    }
    free(rules);
}

void ld_engine_config_clear(ld_engine_config *cfg)
{
    if (!cfg)
        return;
    free_rules(cfg->layer_precisions, cfg->n_layer_precisions);
    free_rules(cfg->layer_output_types, cfg->n_layer_output_types);
    ld_engine_config_init(cfg);
}

static ld_status copy_rules(ld_layer_rule **dst, const ld_layer_rule *src, int n, ld_error *err)
{
    *dst = NULL;
    if (n == 0)
        return LD_OK;
    ld_layer_rule *rules = calloc((size_t)n, sizeof *rules);
    if (!rules)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        rules[i] = src[i];
        rules[i].pattern = strdup(src[i].pattern);
        rules[i].text = strdup(src[i].text);
        if (!rules[i].pattern || !rules[i].text) {
            free_rules(rules, i + 1);
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        }
    }
    *dst = rules;
    return LD_OK;
}

ld_status ld_engine_config_copy(ld_engine_config *dst, const ld_engine_config *src,
                                ld_error *err)
{
    *dst = *src;
    dst->layer_precisions = dst->layer_output_types = NULL;
    dst->n_layer_precisions = dst->n_layer_output_types = 0;
    ld_status st = copy_rules(&dst->layer_precisions, src->layer_precisions,
                              src->n_layer_precisions, err);
    if (st != LD_OK)
        return st;
    dst->n_layer_precisions = src->n_layer_precisions;
    st = copy_rules(&dst->layer_output_types, src->layer_output_types,
                    src->n_layer_output_types, err);
    if (st != LD_OK) {
        ld_engine_config_clear(dst);
        return st;
    }
    dst->n_layer_output_types = src->n_layer_output_types;
    return LD_OK;
}

ld_status ld_engine_config_check(const ld_engine_config *cfg, ld_error *err)
{
    if (cfg->fp16 && cfg->bf16)
        return ld_error_set(err, LD_ERR_USAGE,
                            "--fp16 and --bf16 exclude each other: a layer computes in one "
                            "reduced precision (use --layer-precisions to mix them)");
    return LD_OK;
}

bool ld_engine_tf32_enabled(const ld_engine_config *cfg)
{
    const char *override = getenv("NVIDIA_TF32_OVERRIDE");
    return cfg->tf32 && !(override && strcmp(override, "0") == 0);
}

static const char *constraints_name(ld_constraints c)
{
    switch (c) {
    case LD_CONSTRAINTS_PREFER: return "prefer";
    case LD_CONSTRAINTS_OBEY: return "obey";
    case LD_CONSTRAINTS_NONE: break;
    }
    return "none";
}

/* Appends "name r1,r2" for a rule list to buf at *pos. */
static void describe_rules(char *buf, size_t size, size_t *pos, const char *name,
                           const ld_layer_rule *rules, int n)
{
    for (int i = 0; i < n && *pos < size; i++) {
        int w = snprintf(buf + *pos, size - *pos, "%s%s", i ? "," : name, rules[i].text);
        *pos = w < 0 ? size : *pos + (size_t)w;
    }
}

char *ld_engine_config_describe(const ld_engine_config *cfg, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    bool tf32 = ld_engine_tf32_enabled(cfg);
    int w = snprintf(buf, size, "%s, tf32 %s%s, accumulate %s%s%s, constraints %s",
                     cfg->fp16 ? "fp16" : cfg->bf16 ? "bf16" : "fp32",
                     tf32 ? ld_rounding_name(cfg->tf32_rounding) : "off",
                     cfg->tf32 && !tf32 ? " (NVIDIA_TF32_OVERRIDE=0)" : "",
                     cfg->accumulate_half ? "half" : "fp32",
                     cfg->flush_denormals ? ", flush-denormals" : "",
                     cfg->respect_declared_types ? ", respect-declared-types" : "",
                     constraints_name(cfg->constraints));
    size_t pos = w < 0 ? size : (size_t)w;
    describe_rules(buf, size, &pos, ", layer-precisions ", cfg->layer_precisions,
                   cfg->n_layer_precisions);
    describe_rules(buf, size, &pos, ", layer-output-types ", cfg->layer_output_types,
                   cfg->n_layer_output_types);
    return buf;
}

/* --- specs -------------------------------------------------------------------------- */

/* The spec being parsed, for messages: option name and, for @files, the
 * file and line. */
typedef struct spec_origin {
    const char *option;
    const char *file; /* NULL for an inline list */
    int line;
} spec_origin;

static ld_status spec_error(ld_error *err, const spec_origin *o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ld_status spec_error(ld_error *err, const spec_origin *o, const char *fmt, ...)
{
    char what[LD_ERROR_MESSAGE_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (o->file)
        return ld_error_set(err, LD_ERR_USAGE, "%s @%s line %d: %s", o->option, o->file,
                            o->line, what);
    return ld_error_set(err, LD_ERR_USAGE, "%s: %s", o->option, what);
}

/* [*start, *end) without leading and trailing white space. */
static void trim(const char **start, const char **end)
{
    while (*start < *end && isspace((unsigned char)**start))
        (*start)++;
    while (*end > *start && isspace((unsigned char)(*end)[-1]))
        (*end)--;
}

/* Reads TYPE into the rule; messages name the whole entry. */
static ld_status parse_type(const char *type, const char *entry, bool output_types,
                            const spec_origin *o, ld_layer_rule *rule, ld_error *err)
{
    ld_dtype dtype = LD_DTYPE_UNDEFINED;
    ld_precision p;
    bool known = ld_precision_from_name(type, &p);
    if (!known && ld_dtype_from_name(type, &dtype)) {
        if (dtype == LD_DTYPE_FLOAT64)
            return spec_error(err, o, "entry '%s': float64 layers are left alone (use fp32, "
                              "fp16 or bf16)", entry);
        if (!ld_dtype_is_float(dtype))
            return spec_error(err, o, "entry '%s': '%s' is not a float type (use fp32, %sfp16 "
                              "or bf16)", entry, type, output_types ? "" : "tf32, ");
        known = true;
        p = dtype == LD_DTYPE_FLOAT16 ? LD_PRECISION_FP16
            : dtype == LD_DTYPE_BFLOAT16 ? LD_PRECISION_BF16 : LD_PRECISION_FP32;
    }
    if (!known)
        return spec_error(err, o, "entry '%s': unknown type '%s' (use fp32, %sfp16 or bf16)",
                          entry, type, output_types ? "" : "tf32, ");
    if (output_types && p == LD_PRECISION_TF32)
        return spec_error(err, o, "entry '%s': tf32 is a compute precision, not a type a "
                          "tensor is stored in (use fp32)", entry);
    rule->precision = p;
    rule->type = p == LD_PRECISION_FP16 ? LD_DTYPE_FLOAT16
                 : p == LD_PRECISION_BF16 ? LD_DTYPE_BFLOAT16 : LD_DTYPE_FLOAT32;
    return LD_OK;
}

/* Parses one PATTERN:TYPE entry [start, end) into *rule (owned strings). */
static ld_status parse_entry(const char *start, const char *end, bool output_types,
                             const spec_origin *o, ld_layer_rule *rule, ld_error *err)
{
    ld_status st = LD_OK;
    trim(&start, &end);
    char *entry = strndup(start, (size_t)(end - start));
    if (!entry)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    char *colon = strrchr(entry, ':');
    if (!*entry) {
        st = spec_error(err, o, "empty entry (expected PATTERN:TYPE)");
        goto out;
    }
    if (!colon) {
        st = spec_error(err, o, "entry '%s' is not PATTERN:TYPE", entry);
        goto out;
    }
    const char *pat_start = entry, *pat_end = colon, *type_start = colon + 1,
               *type_end = entry + strlen(entry);
    trim(&pat_start, &pat_end);
    trim(&type_start, &type_end);
    char type[32];
    snprintf(type, sizeof type, "%.*s", (int)(type_end - type_start), type_start);
    if (pat_start == pat_end ||
        (pat_end - pat_start == 3 && strncmp(pat_start, "op:", 3) == 0)) {
        st = spec_error(err, o, "entry '%s' has an empty pattern", entry);
        goto out;
    }
    st = parse_type(type, entry, output_types, o, rule, err);
    if (st != LD_OK)
        goto out;
    rule->pattern = strndup(pat_start, (size_t)(pat_end - pat_start));
    rule->text = entry;
    entry = NULL;
    if (!rule->pattern) {
        free(rule->text);
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
out:
    free(entry);
    return st;
}

/* A growing list of parsed rules. */
typedef struct rule_list {
    ld_layer_rule *rules;
    int n, cap;
} rule_list;

static ld_status push_entry(rule_list *l, const char *start, const char *end,
                            bool output_types, const spec_origin *o, ld_error *err)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        ld_layer_rule *grown = realloc(l->rules, (size_t)cap * sizeof *grown);
        if (!grown)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        l->rules = grown;
        l->cap = cap;
    }
    ld_layer_rule rule = {0};
    ld_status st = parse_entry(start, end, output_types, o, &rule, err);
    if (st == LD_OK)
        l->rules[l->n++] = rule;
    return st;
}

/* Reads @file: one entry per line. */
static ld_status parse_file(rule_list *l, const char *path, bool output_types, spec_origin *o,
                            ld_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return ld_error_set(err, LD_ERR_IO, "%s @%s: cannot open: %s", o->option, path,
                            strerror(errno));
    ld_status st = LD_OK;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    o->file = path;
    o->line = 0;
    while (st == LD_OK && (len = getline(&line, &cap, f)) >= 0) {
        o->line++;
        const char *start = line, *end = line + len;
        trim(&start, &end);
        if (start == end || *start == '#')
            continue;
        st = push_entry(l, start, end, output_types, o, err);
    }
    if (st == LD_OK && ferror(f))
        st = ld_error_set(err, LD_ERR_IO, "%s @%s: cannot read: %s", o->option, path,
                          strerror(errno));
    if (st == LD_OK && l->n == 0)
        st = ld_error_set(err, LD_ERR_USAGE, "%s @%s: no entries in the file", o->option, path);
    free(line);
    fclose(f);
    return st;
}

static ld_status parse_spec(rule_list *l, const char *spec, bool output_types, ld_error *err)
{
    spec_origin o = {output_types ? "--layer-output-types" : "--layer-precisions", NULL, 0};
    if (spec[0] == '@')
        return parse_file(l, spec + 1, output_types, &o, err);
    const char *s = spec;
    const char *end_all = spec + strlen(spec), *t = s;
    trim(&t, &end_all);
    if (t == end_all)
        return spec_error(err, &o, "empty list (expected PATTERN:TYPE,...)");
    for (;;) {
        const char *comma = strchr(s, ',');
        const char *end = comma ? comma : s + strlen(s);
        ld_status st = push_entry(l, s, end, output_types, &o, err);
        if (st != LD_OK || !comma)
            return st;
        s = comma + 1;
    }
}

ld_status ld_engine_add_rules(ld_engine_config *cfg, const char *spec, bool output_types,
                              ld_error *err)
{
    rule_list parsed = {0};
    ld_status st = parse_spec(&parsed, spec, output_types, err);
    int *n = output_types ? &cfg->n_layer_output_types : &cfg->n_layer_precisions;
    ld_layer_rule **rules = output_types ? &cfg->layer_output_types : &cfg->layer_precisions;
    ld_layer_rule *grown = NULL;
    if (st == LD_OK && parsed.n > 0) {
        grown = realloc(*rules, (size_t)(*n + parsed.n) * sizeof *grown);
        if (!grown)
            st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    if (st != LD_OK) {
        free_rules(parsed.rules, parsed.n);
        return st;
    }
    if (grown) {
        memcpy(grown + *n, parsed.rules, (size_t)parsed.n * sizeof *grown);
        *rules = grown;
        *n += parsed.n;
    }
    free(parsed.rules);
    return LD_OK;
}
