/* layerdiff — kernels that may compute in place (see inplace.h). */
#include "backends/kernels/inplace.h"

#include <string.h>

/* Default-domain op types whose kernels are elementwise maps or broadcasts
 * (elementwise.c: ld_ew_map, ld_ew_broadcast; each row reads element i,
 * then writes it) or, for BatchNormalization, a per-channel affine row map
 * (normalization.c). Sorted. Not listed: Pow (special cases), Sum/Max/Min/
 * Mean (memcpy of a single input), everything that moves data. */
static const char *const inplace_ops[] = {
    "Abs",       "Add",         "BatchNormalization", "Ceil", "Clip",      "Div",
    "Elu",       "Erf",         "Exp",                "Floor", "HardSigmoid", "HardSwish",
    "LeakyRelu", "Log",         "Mul",                "Neg",  "Reciprocal", "Relu",
    "Sigmoid",   "Sqrt",        "Sub",                "Tanh",
};

bool ld_kernel_inplace_safe(const ld_node *node)
{
    if (*node->domain && strcmp(node->domain, "ai.onnx") != 0)
        return false;
    for (size_t i = 0; i < sizeof inplace_ops / sizeof inplace_ops[0]; i++)
        if (strcmp(node->op_type, inplace_ops[i]) == 0)
            return true;
    return false;
}
