/* layerdiff — same-type constraints on node inputs (see type_check.h). */
#include <stdio.h>
#include <string.h>

#include "backends/type_check.h"

/* One operator whose inputs first .. first+n-1 share a type variable in the ONNX
 * schema (n = 0: every input, a variadic list), named as the spec names them. */
typedef struct tied_inputs {
    const char *op_type;
    int64_t min_opset, max_opset; /* the schema versions the rule holds for */
    int first;
    const char *const names[5];
} tied_inputs;

#define ANY_OPSET 1, INT64_MAX

static const tied_inputs tied_rules[] = {
    {"Add", ANY_OPSET, 0, {"A", "B"}},
    {"BatchNormalization", 1, 14, 0, {"X", "scale", "B", "input_mean", "input_var"}},
    {"Clip", 11, INT64_MAX, 0, {"input", "min", "max"}},
    {"Concat", ANY_OPSET, 0, {NULL}},
    {"Conv", ANY_OPSET, 0, {"X", "W", "B"}},
    {"ConvTranspose", ANY_OPSET, 0, {"X", "W", "B"}},
    {"Div", ANY_OPSET, 0, {"A", "B"}},
    {"Equal", ANY_OPSET, 0, {"A", "B"}},
    {"Gemm", ANY_OPSET, 0, {"A", "B", "C"}},
    {"Greater", ANY_OPSET, 0, {"A", "B"}},
    {"GreaterOrEqual", ANY_OPSET, 0, {"A", "B"}},
    {"InstanceNormalization", ANY_OPSET, 0, {"input", "scale", "B"}},
    {"LayerNormalization", ANY_OPSET, 0, {"X", "Scale", "B"}},
    {"Less", ANY_OPSET, 0, {"A", "B"}},
    {"LessOrEqual", ANY_OPSET, 0, {"A", "B"}},
    {"MatMul", ANY_OPSET, 0, {"A", "B"}},
    {"Max", ANY_OPSET, 0, {NULL}},
    {"Mean", ANY_OPSET, 0, {NULL}},
    {"Min", ANY_OPSET, 0, {NULL}},
    {"Mul", ANY_OPSET, 0, {"A", "B"}},
    {"PRelu", ANY_OPSET, 0, {"X", "slope"}},
    {"Sub", ANY_OPSET, 0, {"A", "B"}},
    {"Sum", ANY_OPSET, 0, {NULL}},
    {"Where", ANY_OPSET, 1, {"X", "Y"}},
};

static const tied_inputs *rule_for(const ld_node *node)
{
    if (node->domain && *node->domain && strcmp(node->domain, "ai.onnx") != 0)
        return NULL;
    for (size_t i = 0; i < sizeof tied_rules / sizeof tied_rules[0]; i++) {
        const tied_inputs *r = &tied_rules[i];
        if (strcmp(r->op_type, node->op_type) == 0 && node->opset >= r->min_opset &&
            node->opset <= r->max_opset)
            return r;
    }
    return NULL;
}

static int rule_size(const tied_inputs *r, const ld_node *node)
{
    if (!r->names[0])
        return node->n_inputs;
    int n = 0;
    while (n < 5 && r->names[n])
        n++;
    return n;
}

/* The type a value has whatever the inputs are, or UNDEFINED. */
static ld_dtype known_type(const ld_graph *g, int v)
{
    if (v < 0)
        return LD_DTYPE_UNDEFINED;
    const ld_value *val = &g->values[v];
    if (val->kind == LD_VALUE_INITIALIZER && val->initializer)
        return val->initializer->dtype;
    if (val->kind == LD_VALUE_INPUT && val->type.kind == LD_TYPE_TENSOR)
        return val->type.dtype;
    return LD_DTYPE_UNDEFINED;
}

/* Two different float types one of which is float16/bfloat16: the executor widens the
 * half input to float32 for most kernels, so the kernel's own dtype check (Add's "share
 * one dtype", Gemm's, Conv's) sees two float32 tensors and the model would run. Other
 * mismatches (float32 against int32, float32 against float64) reach the kernels as they
 * are and are refused there. */
static bool widening_hides(ld_dtype a, ld_dtype b)
{
    bool a_half = a == LD_DTYPE_FLOAT16 || a == LD_DTYPE_BFLOAT16;
    bool b_half = b == LD_DTYPE_FLOAT16 || b == LD_DTYPE_BFLOAT16;
    return a != b && ld_dtype_is_float(a) && ld_dtype_is_float(b) && (a_half || b_half);
}

static void input_label(const tied_inputs *r, int k, int j, char *buf, size_t size)
{
    if (r->names[0])
        snprintf(buf, size, "%s", r->names[k]);
    else
        snprintf(buf, size, "input %d", j);
}

ld_status ld_check_node_input_types(const ld_graph *g, const ld_node *node, ld_error *err)
{
    const tied_inputs *r = rule_for(node);
    if (!r)
        return LD_OK;
    int n = rule_size(r, node);
    int first_known = -1, odd = -1;
    for (int k = 0; k < n && r->first + k < node->n_inputs; k++) {
        ld_dtype d = known_type(g, node->inputs[r->first + k]);
        if (d == LD_DTYPE_UNDEFINED)
            continue;
        if (first_known < 0)
            first_known = k;
        else if (odd < 0 && widening_hides(d, known_type(g, node->inputs[r->first + first_known])))
            odd = k;
    }
    if (odd < 0)
        return LD_OK;
    /* "inputs X 'x' (float16), W 'w' (float16) and B 'b' (float32)" */
    char list[640];
    size_t pos = 0;
    int listed = 0;
    for (int k = 0; k < n && r->first + k < node->n_inputs && pos < sizeof list; k++) {
        int v = node->inputs[r->first + k];
        ld_dtype d = known_type(g, v);
        if (d == LD_DTYPE_UNDEFINED)
            continue;
        char label[32];
        input_label(r, k, r->first + k, label, sizeof label);
        bool last = k == odd || listed >= 8;
        pos += (size_t)snprintf(list + pos, sizeof list - pos, "%s%s '%s' (%s)",
                                listed == 0 ? "" : last ? " and " : ", ", label,
                                g->values[v].name, ld_dtype_name(d));
        listed++;
        if (last)
            break;
    }
    char odd_label[32];
    input_label(r, odd, r->first + odd, odd_label, sizeof odd_label);
    return ld_error_set(err, LD_ERR_INPUT,
                        "node '%s' (%s): inputs %s must have one type (the operator's type "
                        "constraint), as ONNX Runtime and TensorRT require; convert %s to %s",
                        node->name, node->op_type, list, odd_label,
                        ld_dtype_name(known_type(g, node->inputs[r->first + first_known])));
}
