/* layerdiff — helpers shared by the two normalization files (private to
 * backends/kernels/): normalization.c (BatchNormalization,
 * InstanceNormalization, LayerNormalization and the kernel table) and
 * normalization_lrn_lp_mvn.c (LRN, LpNormalization,
 * MeanVarianceNormalization). Numerics: see normalization.c. */
#ifndef LAYERDIFF_BACKENDS_NORMALIZATION_INTERNAL_H
#define LAYERDIFF_BACKENDS_NORMALIZATION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/accumulate.h"
#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

/* One value rounded to the layer precision when accumulating in half. */
#define V(ac, v) ld_accum_value(ac, v)

static inline ld_accum accum_of(const ld_kernel_ctx *ctx, const ld_tensor *x)
{
    ld_accum ac = ld_accum_make(ctx->numerics, ctx->counters);
    ac.reduced = ac.reduced && x->dtype == LD_DTYPE_FLOAT32;
    return ac;
}

static inline bool is_f64(const ld_tensor *t)
{
    return t->dtype == LD_DTYPE_FLOAT64;
}

static inline double at(const ld_tensor *t, int64_t i)
{
    return is_f64(t) ? ((const double *)t->data)[i] : ((const float *)t->data)[i];
}

static inline void put(ld_tensor *t, int64_t i, double v)
{
    if (is_f64(t))
        ((double *)t->data)[i] = v;
    else
        ((float *)t->data)[i] = (float)v;
}

static inline ld_status require_float(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what)
{
    if (t->dtype == LD_DTYPE_FLOAT32 || t->dtype == LD_DTYPE_FLOAT64)
        return LD_OK;
    return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "%s: dtype %s is not supported", what,
                          ld_dtype_name(t->dtype));
}

/* Requires inputs [0, n_required) and checks that every present input is float. */
static inline ld_status require_float_inputs(ld_kernel_ctx *ctx, int n_required)
{
    static const char *const names[] = {"input 0", "input 1", "input 2", "input 3", "input 4"};
    for (int i = 0; i < ctx->n_inputs && i < 5; i++) {
        ld_status st = i < n_required ? ld_krequire(ctx, i) : LD_OK;
        if (st == LD_OK && ctx->inputs[i])
            st = require_float(ctx, ctx->inputs[i], names[i]);
        if (st != LD_OK)
            return st;
    }
    return n_required > ctx->n_inputs ? ld_krequire(ctx, n_required - 1) : LD_OK;
}

/* Channels C and elements per (n, c) S of X (N, C, D1..Dn); rank 1 is (N). */
static inline void bn_layout(const ld_tensor *x, int64_t *N, int64_t *C, int64_t *S)
{
    *N = x->shape.rank ? x->shape.dims[0] : 1;
    *C = x->shape.rank >= 2 ? x->shape.dims[1] : 1;
    *S = 1;
    for (int d = 2; d < x->shape.rank; d++)
        *S *= x->shape.dims[d];
}

/* --- normalization_lrn_lp_mvn.c ---------------------------------------------------- */

ld_status ld_lrn_infer(ld_kernel_ctx *ctx, ld_output_desc *outs);
ld_status ld_lrn_compute(ld_kernel_ctx *ctx);
ld_status ld_lp_infer(ld_kernel_ctx *ctx, ld_output_desc *outs);
ld_status ld_lp_compute(ld_kernel_ctx *ctx);
ld_status ld_mvn_infer(ld_kernel_ctx *ctx, ld_output_desc *outs);
ld_status ld_mvn_compute(ld_kernel_ctx *ctx);

#endif
