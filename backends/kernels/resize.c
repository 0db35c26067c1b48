/* layerdiff — Resize (10, 11, 13) and the deprecated Upsample (7, 9).
 *
 * Every mode is computed from per-axis tables built once per call: for each
 * output index along an axis, the clamped source indices ("taps") and their
 * weights, and whether tf_crop_and_resize extrapolates there. Nearest then is
 * one gather over all axes (by element size, so every dtype works);
 * linear and cubic are separable passes, innermost axis first, which is
 * exactly the order of the ONNX reference (it interpolates the inner axes of
 * each outer neighbour, then combines them along the outer axis). Axes the
 * tables show to be the identity are skipped; when only the last two axes
 * change (NCHW images) one fused sweep blends cached, horizontally resized
 * source rows without an intermediate tensor.
 *
 * With scales, "length_resized" in the coordinate formulas is scale * input
 * length (not the floored output length), as the ONNX reference computes it.
 *
 * Coordinates and weights are computed in double, as the ONNX reference
 * does; the interpolation itself runs in the data's type (float32 in float,
 * float64 in double). Integer inputs to linear/cubic are interpolated in
 * double and rounded to nearest (ties to even), saturating to the type.
 *
 * This file parses attributes, plans the output and builds the tables;
 * resize_interp.c has the nearest gather and the linear/cubic passes. */
#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "backends/kernels/resize_internal.h"

/* --- attributes ------------------------------------------------------------------- */

static ld_status parse_mode(ld_kernel_ctx *ctx, resize_state *s, bool cubic_allowed)
{
    const char *mode;
    ld_status st = ld_node_attr_string(ctx->node, "mode", "nearest", &mode, ctx->err);
    if (st != LD_OK)
        return st;
    if (strcmp(mode, "nearest") == 0)
        s->mode = INTERP_NEAREST;
    else if (strcmp(mode, "linear") == 0 || (s->upsample && strcmp(mode, "bilinear") == 0))
        s->mode = INTERP_LINEAR;
    else if (cubic_allowed && strcmp(mode, "cubic") == 0)
        s->mode = INTERP_CUBIC;
    else
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "mode '%s' is not one of nearest, linear%s",
                              mode, cubic_allowed ? ", cubic" : "");
    return LD_OK;
}

/* Looks string attribute `attr` (default `fallback`) up in names[] and
 * stores the matching index in *out. */
static ld_status parse_choice(ld_kernel_ctx *ctx, const char *attr, const char *fallback,
                              const char *const *names, int n, int *out)
{
    const char *name;
    ld_status st = ld_node_attr_string(ctx->node, attr, fallback, &name, ctx->err);
    if (st != LD_OK)
        return st;
    for (int i = 0; i < n; i++) {
        if (strcmp(name, names[i]) == 0) {
            *out = i;
            return LD_OK;
        }
    }
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s '%s' is not supported", attr, name);
}

/* Resize 11 and 13: X, roi, scales, sizes and the full attribute set. */
static ld_status parse_resize11(ld_kernel_ctx *ctx, resize_state *s)
{
    /* In coord_mode / nearest_mode order. tf_half_pixel_for_nn left the spec
     * in opset 13; ONNX Runtime still runs it, and so do we. */
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                         "asymmetric", "tf_half_pixel_for_nn",
                                         "tf_crop_and_resize"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    int coord = 0, nearest = 0;
    ld_status st = parse_mode(ctx, s, true);
    if (st == LD_OK)
        st = parse_choice(ctx, "coordinate_transformation_mode", "half_pixel", coords, 6, &coord);
    if (st == LD_OK)
        st = parse_choice(ctx, "nearest_mode", "round_prefer_floor", nearests, 4, &nearest);
    s->coord = (coord_mode)coord;
    s->nearest = (nearest_mode)nearest;
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "cubic_coeff_a", -0.75f, &s->cubic_a, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_float(ctx->node, "extrapolation_value", 0.0f, &s->extrapolation,
                                ctx->err);
    int64_t exclude = 0, antialias = 0;
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "exclude_outside", 0, &exclude, ctx->err);
    s->exclude_outside = exclude != 0;
    /* Opset 18 additions this kernel does not implement: refuse, never ignore. */
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "antialias", 0, &antialias, ctx->err);
    if (st == LD_OK && (antialias || ld_node_attr(ctx->node, "axes") ||
                        ld_node_attr(ctx->node, "keep_aspect_ratio_policy")))
        st = ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "antialias, axes and "
                            "keep_aspect_ratio_policy (opset 18) are not supported");
    s->roi_input = 1;
    s->scales_input = 2;
    s->sizes_input = 3;
    return st;
}

static ld_status resize_init(ld_kernel_ctx *ctx)
{
    resize_state *s = calloc(1, sizeof *s);
    if (!s)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    ctx->state = s;
    s->roi_input = s->scales_input = s->sizes_input = -1;
    s->upsample = strcmp(ctx->node->op_type, "Upsample") == 0;
    if (!s->upsample && ctx->node->opset >= 11)
        return parse_resize11(ctx, s);
    /* Upsample 7/9 and Resize 10: asymmetric coordinates, "simple" nearest. */
    s->coord = COORD_ASYMMETRIC;
    s->nearest = NEAREST_SIMPLE;
    s->cubic_a = -0.75f;
    ld_status st = parse_mode(ctx, s, false);
    if (st != LD_OK)
        return st;
    if (s->upsample && ctx->node->opset < 9) {
        st = ld_node_attr_floats(ctx->node, "scales", &s->attr_scales, &s->n_attr_scales,
                                 ctx->err);
        if (st == LD_OK && !s->attr_scales)
            st = ld_kernel_fail(ctx, LD_ERR_INPUT, "the 'scales' attribute is required");
        return st;
    }
    s->scales_input = 1;
    return LD_OK;
}

static void resize_fini(void *state)
{
    free(state);
}

/* --- the plan: output shape, scales, roi ------------------------------------------ */

static const ld_tensor *optional_input(const ld_kernel_ctx *ctx, int i)
{
    const ld_tensor *t = i >= 0 ? ld_kin(ctx, i) : NULL;
    return t && t->count > 0 ? t : NULL;
}

static ld_status plan_from_scales(ld_kernel_ctx *ctx, const resize_state *s,
                                  const float *scales, int64_t n, resize_plan *p)
{
    if (n != p->rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "scales has %lld values for an input of rank "
                              "%d", (long long)n, p->rank);
    for (int d = 0; d < p->rank; d++) {
        double scale = scales[d];
        if (!(scale > 0) || !isfinite(scale) || (s->upsample && scale < 1))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "scale %g for axis %d is invalid (must be "
                                  "%s)", scale, d, s->upsample ? ">= 1" : "> 0 and finite");
        double out = floor((double)p->in[d] * scale);
        if (out > (double)INT32_MAX * 1024)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "scale %g for axis %d gives an output "
                                  "dimension that is too large", scale, d);
        p->out[d] = (int64_t)out;
        p->scale[d] = scale;
        p->length[d] = scale * (double)p->in[d];
    }
    return LD_OK;
}

static ld_status plan_from_sizes(ld_kernel_ctx *ctx, const ld_tensor *sizes, resize_plan *p)
{
    if (sizes->dtype != LD_DTYPE_INT64)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "sizes must be int64, got %s",
                              ld_dtype_name(sizes->dtype));
    if (sizes->count != p->rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "sizes has %lld values for an input of rank %d",
                              (long long)sizes->count, p->rank);
    ld_status st = ld_krequire_values(ctx, sizes, "sizes");
    if (st != LD_OK)
        return st;
    const int64_t *v = sizes->data;
    for (int d = 0; d < p->rank; d++) {
        if (v[d] < 0 || (p->in[d] == 0 && v[d] != 0))
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "size %lld for axis %d is invalid (input "
                                  "dimension %lld)", (long long)v[d], d, (long long)p->in[d]);
        p->out[d] = v[d];
        p->scale[d] = p->in[d] ? (double)v[d] / (double)p->in[d] : 1.0;
        p->length[d] = (double)v[d];
    }
    return LD_OK;
}

static ld_status plan_roi(ld_kernel_ctx *ctx, const resize_state *s, resize_plan *p)
{
    for (int d = 0; d < p->rank; d++) {
        p->roi_start[d] = 0;
        p->roi_end[d] = 1;
    }
    if (s->coord != COORD_TF_CROP_AND_RESIZE)
        return LD_OK;
    const ld_tensor *roi = optional_input(ctx, s->roi_input);
    if (!roi)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "tf_crop_and_resize needs the roi input");
    if (roi->count != 2 * p->rank)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "roi has %lld values, expected %d (2 * rank)",
                              (long long)roi->count, 2 * p->rank);
    if (roi->dtype != LD_DTYPE_FLOAT32 && roi->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "roi must be a float tensor, got %s",
                              ld_dtype_name(roi->dtype));
    p->roi_float = roi->dtype == LD_DTYPE_FLOAT32;
    ld_status st = ld_krequire_values(ctx, roi, "roi");
    if (st != LD_OK)
        return st;
    for (int d = 0; d < p->rank; d++) {
        p->roi_start[d] = ld_tensor_get_double(roi, d);
        p->roi_end[d] = ld_tensor_get_double(roi, d + p->rank);
    }
    return LD_OK;
}

static ld_status resize_plan_make(ld_kernel_ctx *ctx, resize_plan *p)
{
    const resize_state *s = ctx->state;
    ld_status st = ld_krequire(ctx, 0);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    p->rank = x->shape.rank;
    for (int d = 0; d < p->rank; d++)
        p->in[d] = x->shape.dims[d];
    const ld_tensor *scales = optional_input(ctx, s->scales_input);
    const ld_tensor *sizes = optional_input(ctx, s->sizes_input);
    if (scales && sizes)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "only one of scales and sizes may be given");
    if (s->attr_scales)
        st = plan_from_scales(ctx, s, s->attr_scales, (int64_t)s->n_attr_scales, p);
    else if (scales && scales->dtype != LD_DTYPE_FLOAT32)
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "scales must be float32, got %s",
                            ld_dtype_name(scales->dtype));
    else if (scales) {
        st = ld_krequire_values(ctx, scales, "scales");
        if (st == LD_OK)
            st = plan_from_scales(ctx, s, scales->data, scales->count, p);
    }
    else if (sizes)
        st = plan_from_sizes(ctx, sizes, p);
    else if (p->rank == 0)
        st = LD_OK;
    else
        st = ld_kernel_fail(ctx, LD_ERR_INPUT, "needs a non-empty scales or sizes input");
    if (st != LD_OK)
        return st;
    return plan_roi(ctx, s, p);
}

static ld_status resize_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    resize_plan p = {0};
    ld_status st = resize_plan_make(ctx, &p);
    if (st != LD_OK)
        return st;
    outs[0].dtype = ctx->inputs[0]->dtype;
    outs[0].shape.rank = p.rank;
    for (int d = 0; d < p.rank; d++)
        outs[0].shape.dims[d] = p.out[d];
    return LD_OK;
}

/* --- per-axis tables ----------------------------------------------------------------- */

/* The source coordinate of output index x along axis d (ONNX reference formulas). */
static double source_coord(const resize_state *s, const resize_plan *p, int d, double x)
{
    double in = (double)p->in[d], len = p->length[d], scale = p->scale[d];
    switch (s->coord) {
    case COORD_PYTORCH_HALF_PIXEL:
        return len == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    case COORD_ALIGN_CORNERS:
        return len == 1 ? 0 : x * (in - 1) / (len - 1);
    case COORD_ASYMMETRIC:
        return x / scale;
    case COORD_TF_HALF_PIXEL_FOR_NN:
        return (x + 0.5) / scale;
    case COORD_TF_CROP_AND_RESIZE: {
        /* A float32 roi's span (end - start) is a float subtraction, as in the
         * ONNX reference; exact halves under nearest rounding depend on it. */
        double r0 = p->roi_start[d], r1 = p->roi_end[d];
        double span = p->roi_float ? (double)((float)r1 - (float)r0) : r1 - r0;
        double c = len == 1 ? span * (in - 1) / 2 : x * span * (in - 1) / (len - 1);
        return c + r0 * (in - 1);
    }
    case COORD_HALF_PIXEL:
    default:
        return (x + 0.5) / scale - 0.5;
    }
}

static int64_t nearest_index(const resize_state *s, double x, bool downsampling)
{
    double fl = floor(x), ratio = x - fl;
    switch (s->nearest) {
    case NEAREST_SIMPLE:
        return downsampling ? (int64_t)ceil(x) : (int64_t)x;
    case NEAREST_FLOOR:
        return (int64_t)fl;
    case NEAREST_CEIL:
        return (int64_t)ceil(x);
    case NEAREST_ROUND_PREFER_CEIL:
        return (int64_t)fl + (ratio >= 0.5);
    case NEAREST_ROUND_PREFER_FLOOR:
    default:
        return (int64_t)fl + (ratio > 0.5);
    }
}

static int64_t clamp_index(int64_t i, int64_t n)
{
    return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

/* Cubic convolution weights of the 4 taps floor(x)-1 .. floor(x)+2 for the
 * fraction r (Keys, coefficient a). */
static void cubic_weights(double a, double r, double w[4])
{
    double t = r + 1, u = 1 - r, v = 2 - r;
    w[0] = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    w[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    w[2] = ((a + 2) * u - (a + 3)) * u * u + 1;
    w[3] = ((a * v - 5 * a) * v + 8 * a) * v - 4 * a;
}

static void fill_entry(const resize_state *s, int64_t in, double x, int64_t *idx, double *w)
{
    double fl = floor(x), r = x - fl;
    int64_t base = (int64_t)fl;
    if (s->mode == INTERP_LINEAR) {
        idx[0] = base;
        idx[1] = base + 1;
        w[0] = 1 - r;
        w[1] = r;
    } else {
        cubic_weights(s->cubic_a, r, w);
        double sum = 0;
        for (int k = 0; k < 4; k++) {
            idx[k] = base - 1 + k;
            if (s->exclude_outside && (idx[k] < 0 || idx[k] >= in))
                w[k] = 0;
            sum += w[k];
        }
        if (s->exclude_outside && sum != 0)
            for (int k = 0; k < 4; k++)
                w[k] /= sum;
    }
    int taps = s->mode == INTERP_LINEAR ? 2 : 4;
    for (int k = 0; k < taps; k++)
        idx[k] = clamp_index(idx[k], in);
}

static void table_free(axis_table *t)
{
    free(t->index);
    free(t->weight_d);
    free(t->weight_f);
    free(t->outside);
    memset(t, 0, sizeof *t);
}

/* True when output j reads exactly source j with weight 1. */
static bool entry_is_identity(const axis_table *t, int64_t j)
{
    if (t->outside && t->outside[j])
        return false;
    double total = 0;
    for (int k = 0; k < t->taps; k++) {
        double w = t->weight_d ? t->weight_d[j * t->taps + k] : 1;
        if (t->index[j * t->taps + k] == j)
            total += w;
        else if (w != 0)
            return false;
    }
    return total == 1;
}

static ld_status table_build(ld_kernel_ctx *ctx, const resize_plan *p, int d, axis_table *t)
{
    const resize_state *s = ctx->state;
    int64_t in = p->in[d], out = p->out[d];
    t->taps = s->mode == INTERP_NEAREST ? 1 : (s->mode == INTERP_LINEAR ? 2 : 4);
    size_t n = (size_t)(out ? out : 1) * (size_t)t->taps;
    t->index = malloc(n * sizeof *t->index);
    if (s->mode != INTERP_NEAREST) {
        t->weight_d = malloc(n * sizeof *t->weight_d);
        t->weight_f = malloc(n * sizeof *t->weight_f);
    }
    if (s->coord == COORD_TF_CROP_AND_RESIZE)
        t->outside = calloc((size_t)(out ? out : 1), 1);
    if (!t->index || (s->mode != INTERP_NEAREST && (!t->weight_d || !t->weight_f)) ||
        (s->coord == COORD_TF_CROP_AND_RESIZE && !t->outside)) {
        table_free(t);
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    }
    t->identity = in == out;
    for (int64_t j = 0; j < out; j++) {
        double x = source_coord(s, p, d, (double)j);
        int64_t *idx = t->index + j * t->taps;
        if (t->outside && (x < 0 || x > (double)(in - 1))) {
            t->outside[j] = 1;
            x = 0;
        }
        if (s->mode == INTERP_NEAREST) {
            idx[0] = clamp_index(nearest_index(s, x, p->scale[d] < 1), in);
        } else {
            double *w = t->weight_d + j * t->taps;
            fill_entry(s, in, x, idx, w);
            for (int k = 0; k < t->taps; k++)
                t->weight_f[j * t->taps + k] = (float)w[k];
        }
        if (t->identity && !entry_is_identity(t, j))
            t->identity = false;
    }
    return LD_OK;
}

static ld_status resize_compute(ld_kernel_ctx *ctx)
{
    const resize_state *s = ctx->state;
    resize_plan p = {0};
    ld_status st = resize_plan_make(ctx, &p);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    if (y->count == 0)
        return LD_OK;
    if (p.rank == 0) {
        memcpy(y->data, x->data, x->nbytes);
        return LD_OK;
    }
    axis_table tables[LD_MAX_RANK];
    memset(tables, 0, sizeof tables);
    for (int d = 0; st == LD_OK && d < p.rank; d++)
        st = table_build(ctx, &p, d, &tables[d]);
    if (st != LD_OK)
        goto out;
    if (s->mode == INTERP_NEAREST)
        st = ld_resize_nearest(ctx, &p, tables);
    else if (x->dtype == LD_DTYPE_FLOAT32 || x->dtype == LD_DTYPE_FLOAT64)
        st = ld_resize_separable(ctx, &p, tables, x->dtype == LD_DTYPE_FLOAT64, x->data, y->data);
    else
        st = ld_resize_integer(ctx, &p, tables);
out:
    for (int d = 0; d < p.rank; d++)
        table_free(&tables[d]);
    return st;
}

static const ld_kernel resize_kernels[] = {
    {"", "Resize", 10, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini, NULL},
    {"", "Resize", 11, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini, NULL},
    {"", "Resize", 13, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini, NULL},
    {"", "Upsample", 7, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini, NULL},
    {"", "Upsample", 9, LD_KERNEL_WIDEN_HALF, resize_init, resize_infer, resize_compute, resize_fini, NULL},
};

LD_KERNEL_FAMILY(resize);
