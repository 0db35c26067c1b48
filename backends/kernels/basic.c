/* layerdiff — kernels that move tensors without arithmetic: Identity and
 * Constant. */
#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

/* --- Identity (1, 13, 14, 16): y = x, any tensor type ---------------------------- */

static ld_status identity_compute(ld_kernel_ctx *ctx)
{
    if (ctx->inputs[0]->nbytes)
        memcpy(ctx->outputs[0]->data, ctx->inputs[0]->data, ctx->inputs[0]->nbytes);
    return LD_OK;
}

/* --- Constant (1, 9, 11, 12, 13): one of value / value_float(s) / value_int(s) ------- */

typedef struct constant_state {
    ld_tensor *value; /* owned */
} constant_state;

static void constant_fini(void *state)
{
    constant_state *s = state;
    ld_tensor_destroy(s->value);
    free(s);
}

static ld_status constant_from_attr(ld_kernel_ctx *ctx, const ld_attr *a, ld_tensor **out)
{
    ld_shape shape = {.rank = 0};
    ld_dtype dtype;
    const void *src;
    size_t count = 1;
    switch (a->type) {
    case LD_ATTR_TENSOR:
    case LD_ATTR_SPARSE_TENSOR:
        if (!a->t || (!a->t->data && a->t->nbytes))
            return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "attribute '%s' holds a tensor of "
                                  "a type layerdiff cannot compute", a->name);
        return ld_tensor_clone(out, a->t, NULL, ctx->err);
    case LD_ATTR_FLOAT: dtype = LD_DTYPE_FLOAT32; src = &a->f; break;
    case LD_ATTR_INT: dtype = LD_DTYPE_INT64; src = &a->i; break;
    case LD_ATTR_FLOATS:
        dtype = LD_DTYPE_FLOAT32; src = a->floats; count = a->n;
        shape.rank = 1; shape.dims[0] = (int64_t)a->n;
        break;
    case LD_ATTR_INTS:
        dtype = LD_DTYPE_INT64; src = a->ints; count = a->n;
        shape.rank = 1; shape.dims[0] = (int64_t)a->n;
        break;
    default:
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "attribute '%s' (%s) is not supported",
                              a->name, ld_attr_type_name(a->type));
    }
    ld_status st = ld_tensor_create(out, NULL, dtype, &shape, ctx->err);
    if (st == LD_OK && count)
        memcpy((*out)->data, src, count * ld_dtype_size(dtype));
    return st;
}

static ld_status constant_init(ld_kernel_ctx *ctx)
{
    const ld_attr *value = NULL;
    for (int i = 0; i < ctx->node->n_attrs; i++) {
        const ld_attr *a = &ctx->node->attrs[i];
        if (strncmp(a->name, "value", 5) != 0 && strcmp(a->name, "sparse_value") != 0)
            continue;
        if (value)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "has both '%s' and '%s'; exactly one "
                                  "value attribute is allowed", value->name, a->name);
        value = a;
    }
    if (!value)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "has no value attribute");
    constant_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ld_status st = constant_from_attr(ctx, value, &s->value);
    if (st != LD_OK) {
        free(s);
        return st;
    }
    ctx->state = s;
    return LD_OK;
}

static ld_status constant_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    const constant_state *s = ctx->state;
    outs[0].dtype = s->value->dtype;
    outs[0].shape = s->value->shape;
    return LD_OK;
}

static ld_status constant_compute(ld_kernel_ctx *ctx)
{
    const constant_state *s = ctx->state;
    if (s->value->nbytes)
        memcpy(ctx->outputs[0]->data, s->value->data, s->value->nbytes);
    return LD_OK;
}

static const ld_kernel basic_kernels[] = {
    {"", "Constant", 1, 0, constant_init, constant_infer, constant_compute, constant_fini, NULL},
    {"", "Identity", 1, 0, NULL, ld_infer_like_input0, identity_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(basic);
