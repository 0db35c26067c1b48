/* layerdiff — what the emulated engine's planner knows before running: the
 * dtype of every value and whether it depends on the input values (see
 * engine_internal.h). The plan must exist before any tensor does (inspect
 * prints it without running), so types come from declarations and a small
 * table of operator typing rules rather than from execution. */
#include <stdlib.h>
#include <string.h>

#include "backends/engine_internal.h"

bool ld_engine_is_rounded_type(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT16 || d == LD_DTYPE_BFLOAT16;
}

bool ld_engine_default_domain(const char *domain)
{
    return !domain || !*domain || strcmp(domain, "ai.onnx") == 0;
}

ld_dtype ld_engine_cast_to(const ld_node *node)
{
    if (!ld_engine_default_domain(node->domain) || strcmp(node->op_type, "Cast") != 0)
        return LD_DTYPE_UNDEFINED;
    const ld_attr *to = ld_node_attr(node, "to");
    if (!to || to->type != LD_ATTR_INT || !ld_dtype_is_known((ld_dtype)to->i))
        return LD_DTYPE_UNDEFINED;
    return (ld_dtype)to->i;
}

static bool op_is(const ld_node *node, const char *const *ops)
{
    for (int i = 0; ops[i]; i++)
        if (strcmp(node->op_type, ops[i]) == 0)
            return true;
    return false;
}

/* An int attribute naming a dtype, or fallback. */
static ld_dtype dtype_attr(const ld_node *node, const char *name, ld_dtype fallback)
{
    const ld_attr *a = ld_node_attr(node, name);
    if (a && a->type == LD_ATTR_INT && ld_dtype_is_known((ld_dtype)a->i))
        return (ld_dtype)a->i;
    return fallback;
}

static ld_dtype constant_dtype(const ld_node *node, ld_dtype fallback)
{
    for (int i = 0; i < node->n_attrs; i++) {
        const ld_attr *a = &node->attrs[i];
        if (strcmp(a->name, "value") == 0 && a->type == LD_ATTR_TENSOR && a->t)
            return a->t->dtype;
        if (strncmp(a->name, "value_float", 11) == 0)
            return LD_DTYPE_FLOAT32;
        if (strncmp(a->name, "value_int", 9) == 0)
            return LD_DTYPE_INT64;
        if (strncmp(a->name, "value_string", 12) == 0)
            return LD_DTYPE_STRING;
    }
    return fallback;
}

static ld_dtype input_type(const ld_node *node, const ld_dtype *types, int j)
{
    return j < node->n_inputs && node->inputs[j] >= 0 ? types[node->inputs[j]]
                                                      : LD_DTYPE_UNDEFINED;
}

/* Most operators: the type of their first float input (Gather's data,
 * Pow's base, Where's X), else of their first input. */
static ld_dtype follow_inputs(const ld_node *node, const ld_dtype *types)
{
    for (int j = 0; j < node->n_inputs; j++)
        if (ld_dtype_is_float(input_type(node, types, j)))
            return input_type(node, types, j);
    return input_type(node, types, 0);
}

static ld_dtype infer_output(const ld_node *node, int j, const ld_dtype *types)
{
    static const char *const int64_ops[] = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin",
                                            "NonMaxSuppression", NULL};
    static const char *const bool_ops[] = {"Equal", "Less", "LessOrEqual", "Greater",
                                           "GreaterOrEqual", "Not", "And", "Or", "Xor",
                                           "IsNaN", "IsInf", NULL};
    static const char *const float_generators[] = {"HannWindow", "HammingWindow",
                                                   "BlackmanWindow", "MelWeightMatrix", NULL};
    if (!ld_engine_default_domain(node->domain))
        return follow_inputs(node, types);
    const char *op = node->op_type;
    if (op_is(node, int64_ops) || (j > 0 && (strcmp(op, "TopK") == 0 ||
                                             strcmp(op, "MaxPool") == 0 ||
                                             strcmp(op, "Unique") == 0)))
        return LD_DTYPE_INT64;
    if (op_is(node, bool_ops) || (j == 1 && strcmp(op, "Dropout") == 0))
        return LD_DTYPE_BOOL;
    if (strcmp(op, "Cast") == 0)
        return ld_engine_cast_to(node);
    if (strcmp(op, "CastLike") == 0 || strcmp(op, "Where") == 0)
        return input_type(node, types, 1);
    if (strcmp(op, "OneHot") == 0)
        return input_type(node, types, 2);
    if (strcmp(op, "Constant") == 0)
        return constant_dtype(node, LD_DTYPE_UNDEFINED);
    if (strcmp(op, "ConstantOfShape") == 0)
        return constant_dtype(node, LD_DTYPE_FLOAT32);
    if (op_is(node, float_generators))
        return dtype_attr(node, "output_datatype", LD_DTYPE_FLOAT32);
    if (strncmp(op, "Random", 6) == 0 || strcmp(op, "EyeLike") == 0 ||
        strcmp(op, "Bernoulli") == 0)
        return dtype_attr(node, "dtype", strstr(op, "Like") || strcmp(op, "Bernoulli") == 0
                                             ? input_type(node, types, 0)
                                             : LD_DTYPE_FLOAT32);
    if (strcmp(op, "QuantizeLinear") == 0) {
        ld_dtype zp = input_type(node, types, 2);
        return zp != LD_DTYPE_UNDEFINED ? zp : LD_DTYPE_UINT8;
    }
    if (strcmp(op, "DynamicQuantizeLinear") == 0)
        return j == 1 ? LD_DTYPE_FLOAT32 : LD_DTYPE_UINT8;
    if (strcmp(op, "DequantizeLinear") == 0) {
        ld_dtype scale = input_type(node, types, 1);
        return scale != LD_DTYPE_UNDEFINED ? scale : LD_DTYPE_FLOAT32;
    }
    if (strcmp(op, "QLinearConv") == 0 || strcmp(op, "QLinearMatMul") == 0)
        return input_type(node, types, node->n_inputs - 1);
    if (strcmp(op, "ConvInteger") == 0 || strcmp(op, "MatMulInteger") == 0)
        return LD_DTYPE_INT32;
    if (strcmp(op, "LayerNormalization") == 0 && j > 0)
        return LD_DTYPE_FLOAT32; /* mean and inverse std dev, in stash_type */
    return follow_inputs(node, types);
}

static bool declared(const ld_value *v)
{
    return v->type.kind == LD_TYPE_TENSOR && v->type.dtype != LD_DTYPE_UNDEFINED;
}

void ld_static_info_free(ld_static_info *info)
{
    free(info->types);
    free(info->dynamic);
    info->types = NULL;
    info->dynamic = NULL;
}

ld_status ld_static_info_compute(const ld_graph *g, ld_static_info *info, ld_error *err)
{
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    info->types = calloc(nv, sizeof *info->types);
    info->dynamic = calloc(nv, sizeof *info->dynamic);
    if (!info->types || !info->dynamic) {
        ld_static_info_free(info);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    for (int v = 0; v < g->n_values; v++) {
        const ld_value *val = &g->values[v];
        if (val->kind == LD_VALUE_INITIALIZER && val->initializer)
            info->types[v] = val->initializer->dtype;
        else if (declared(val))
            info->types[v] = val->type.dtype;
        info->dynamic[v] = val->kind == LD_VALUE_INPUT || val->kind == LD_VALUE_OUTER_SCOPE;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ld_node *node = &g->nodes[i];
        bool dyn = false;
        for (int j = 0; j < node->n_inputs; j++)
            dyn |= node->inputs[j] >= 0 && info->dynamic[node->inputs[j]];
        for (int j = 0; j < node->n_implicit_inputs; j++)
            dyn |= node->implicit_inputs[j] >= 0 && info->dynamic[node->implicit_inputs[j]];
        /* Shape and Size read the shape, not the values. */
        if (ld_engine_default_domain(node->domain) &&
            (strcmp(node->op_type, "Shape") == 0 || strcmp(node->op_type, "Size") == 0))
            dyn = false;
        for (int j = 0; j < node->n_outputs; j++) {
            int v = node->outputs[j];
            if (v < 0)
                continue;
            info->dynamic[v] = dyn;
            if (!declared(&g->values[v]))
                info->types[v] = infer_output(node, j, info->types);
        }
    }
    return LD_OK;
}
