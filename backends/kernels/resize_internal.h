/* layerdiff — the Resize kernel's types shared by its two files (private to
 * backends/kernels/): resize.c parses attributes, plans the output and builds
 * the per-axis tables; resize_interp.c runs the nearest gather and the
 * linear/cubic passes over those tables. */
#ifndef LAYERDIFF_BACKENDS_RESIZE_INTERNAL_H
#define LAYERDIFF_BACKENDS_RESIZE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"

/* Work below this many multiply-adds runs on one thread (kernel_util.h). */
#define RESIZE_PARALLEL_MIN LD_PARALLEL_MIN_WORK

typedef enum { INTERP_NEAREST, INTERP_LINEAR, INTERP_CUBIC } interp_mode;

typedef enum {
    COORD_HALF_PIXEL, COORD_PYTORCH_HALF_PIXEL, COORD_ALIGN_CORNERS, COORD_ASYMMETRIC,
    COORD_TF_HALF_PIXEL_FOR_NN, COORD_TF_CROP_AND_RESIZE,
} coord_mode;

/* NEAREST_SIMPLE is Resize-10 and Upsample: truncate, ceil when downsampling
 * (as ONNX Runtime). */
typedef enum {
    NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL,
    NEAREST_SIMPLE,
} nearest_mode;

typedef struct resize_state {
    interp_mode mode;
    coord_mode coord;
    nearest_mode nearest;
    float cubic_a;
    bool exclude_outside;
    float extrapolation;
    bool upsample;           /* Upsample: scales must be >= 1 */
    int roi_input;           /* input index, -1 when the version has none */
    int scales_input;
    int sizes_input;
    const float *attr_scales; /* Upsample-7: borrowed from the node */
    size_t n_attr_scales;
} resize_state;

/* What one call resizes: shapes, per-axis scales and roi. */
typedef struct resize_plan {
    int rank;
    int64_t in[LD_MAX_RANK];
    int64_t out[LD_MAX_RANK];
    double scale[LD_MAX_RANK];   /* the scale the coordinate formulas divide by */
    double length[LD_MAX_RANK];  /* "length_resized": scale * in (scales) or the size */
    double roi_start[LD_MAX_RANK];
    double roi_end[LD_MAX_RANK];
    bool roi_float;              /* roi was float32 */
} resize_plan;

/* Per-axis sampling table. */
typedef struct axis_table {
    int taps;
    int64_t *index;   /* out * taps clamped source indices */
    double *weight_d; /* out * taps (linear/cubic only) */
    float *weight_f;
    uint8_t *outside; /* out flags: extrapolate (tf_crop_and_resize only), else NULL */
    bool identity;
} axis_table;

/* --- resize_interp.c ------------------------------------------------------------- */

/* Nearest: one gather over all axes, any dtype. */
ld_status ld_resize_nearest(ld_kernel_ctx *ctx, const resize_plan *p, const axis_table *tables);

/* Linear/cubic passes over float (is_double false) or double (is_double true) data, src to dst. */
ld_status ld_resize_separable(ld_kernel_ctx *ctx, const resize_plan *p,
                              const axis_table *tables, bool is_double, const void *src, void *dst);

/* Integer data: interpolate in double, round to nearest even, saturate. */
ld_status ld_resize_integer(ld_kernel_ctx *ctx, const resize_plan *p, const axis_table *tables);

#endif
