/* layerdiff — small helpers shared by kernel families (private to backends/). */
#ifndef LAYERDIFF_BACKENDS_KERNEL_UTIL_H
#define LAYERDIFF_BACKENDS_KERNEL_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "layerdiff/kernel.h"

/* Parallel loops over cheap per-element work (elementwise maps, copies,
 * im2col, pooling, resizing, col2im): below this many elements or
 * multiply-adds one thread runs the loop. The one threshold for such loops:
 * waking a sleeping OpenMP worker costs tens of microseconds in these VMs
 * (GOMP_SPINCOUNT=1000: workers sleep soon after a loop, docs/architecture.md
 * "OpenMP waiting"), about what one core needs for ~100K floats. Compute-bound
 * kernels (conv_direct.c, blas.c) have their own, in multiply-adds. */
#define LD_PARALLEL_MIN_WORK ((int64_t)1 << 16)

/* Input i, or NULL when omitted or beyond the node's inputs. */
static inline const ld_tensor *ld_kin(const ld_kernel_ctx *ctx, int i)
{
    return i < ctx->n_inputs ? ctx->inputs[i] : NULL;
}

/* Output i, or NULL when the model omits it. */
static inline ld_tensor *ld_kout(const ld_kernel_ctx *ctx, int i)
{
    return i < ctx->n_outputs ? ctx->outputs[i] : NULL;
}

/* Fails unless input i is present. */
static inline ld_status ld_krequire(ld_kernel_ctx *ctx, int i)
{
    if (!ld_kin(ctx, i))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "required input %d is missing", i);
    return LD_OK;
}

/* Output 0 has input 0's dtype and shape (unary ops). */
static inline ld_status ld_infer_like_input0(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    outs[0].shape = ctx->inputs[0]->shape;
    return LD_OK;
}

/* Fails unless the values of input t (named `what`; NULL: omitted, fine)
 * can be read. An infer that reads an input's values (a shape, scales, a
 * count) checks this first: the executor's memory plan (exec_plan.h) runs
 * every infer at prepare with shape-only placeholders (elements, no data)
 * for values not known yet, and gives up on the error. */
static inline ld_status ld_krequire_values(ld_kernel_ctx *ctx, const ld_tensor *t,
                                           const char *what)
{
    if (t && t->count > 0 && !t->data)
        return ld_kernel_fail(ctx, LD_ERR_INTERNAL, "input '%s' holds no values yet", what);
    return LD_OK;
}

/* Normalises a possibly negative axis against rank; fails when out of range. */
static inline ld_status ld_normalize_axis(ld_kernel_ctx *ctx, int64_t axis, int rank, int *out)
{
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= (rank > 0 ? rank : 1))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "axis %lld is out of range for rank %d",
                              (long long)axis, rank);
    *out = (int)a;
    return LD_OK;
}

#endif
