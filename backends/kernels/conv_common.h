/* layerdiff — what Conv, ConvTranspose and the pooling kernels share
 * (private to backends/kernels/): window attributes (kernel_shape, strides,
 * dilations, pads, auto_pad, ceil_mode), the output geometry they give, a
 * reusable scratch buffer cache, and im2col.
 *
 * Geometry is always 3-D: a 1-D or 2-D window is padded with leading
 * dimensions of size 1 (kernel 1, stride 1, no padding), so every loop is
 * written once for (D, H, W) and the innermost, contiguous dimension stays W.
 * Spatial ranks above 3 are rejected as unsupported. */
#ifndef LAYERDIFF_BACKENDS_CONV_COMMON_H
#define LAYERDIFF_BACKENDS_CONV_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/kernels/kernel_util.h"

#define LD_WINDOW_MAX_DIMS 3

typedef enum ld_auto_pad {
    LD_AUTO_PAD_NOTSET = 0,
    LD_AUTO_PAD_SAME_UPPER,
    LD_AUTO_PAD_SAME_LOWER,
    LD_AUTO_PAD_VALID
} ld_auto_pad;

/* The window attributes of a node, as given (lengths checked against the
 * input's spatial rank later, when it is known). */
typedef struct ld_window_attrs {
    size_t n_kernel, n_strides, n_dilations, n_pads, n_output_padding, n_output_shape;
    const int64_t *kernel;        /* borrowed from the node; NULL when absent */
    const int64_t *strides;
    const int64_t *dilations;
    const int64_t *pads;          /* [begin..., end...] */
    const int64_t *output_padding; /* ConvTranspose */
    const int64_t *output_shape;   /* ConvTranspose */
    ld_auto_pad auto_pad;
    bool ceil_mode;               /* pools, opset 10+ */
    int64_t group;                /* Conv/ConvTranspose */
    /* Conv: the direct kernel's packed weights per group, kept across runs
     * when the weights are a constant initializer (conv.c); owned, freed by
     * ld_window_kernel_fini. */
    struct ld_conv_direct_pack *packs;
    int64_t n_packs;
} ld_window_attrs;

/* Reads the attributes above that the node has and checks their values
 * (strides, dilations >= 1; pads >= 0; known auto_pad). */
ld_status ld_window_attrs_parse(ld_kernel_ctx *ctx, ld_window_attrs *a);

/* Kernel init/fini shared by Conv, ConvInteger, QLinearConv and ConvTranspose:
 * loads the BLAS, parses the window attributes into a new ld_window_attrs
 * (ctx->state, freed by ld_window_kernel_fini with the packed weights it
 * holds) and holds the shared scratch. */
ld_status ld_window_kernel_init(ld_kernel_ctx *ctx);
void ld_window_kernel_fini(void *state);

/* One call's geometry, padded to 3 dimensions. */
typedef struct ld_window_geom {
    int nd;                               /* spatial rank of the tensors (1..3) */
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int64_t in_size, out_size, k_size;    /* products */
} ld_window_geom;

typedef enum ld_window_kind { LD_WINDOW_CONV, LD_WINDOW_POOL } ld_window_kind;

/* Geometry of a forward window op (Conv, pools) over spatial dims in_dims[nd]
 * with the kernel `kernel` (from the weights or kernel_shape). Computes
 * auto_pad, the output size (ceil_mode for pools: a last window must start
 * inside the input or its left padding, as ONNX Runtime and PyTorch do) and
 * fails naming the node when attributes do not fit the rank or the output
 * would be empty. */
ld_status ld_window_geom_forward(ld_kernel_ctx *ctx, const ld_window_attrs *a, int nd,
                                 const int64_t *in_dims, const int64_t *kernel,
                                 ld_window_kind kind, ld_window_geom *g);

/* Fills the 3-D geometry fields from nd-dim values (helpers for ConvTranspose
 * and MaxUnpool, which compute their own output sizes). */
void ld_window_geom_finish(ld_window_geom *g);

/* Checks that an attribute list has n or 0 (absent) entries. */
ld_status ld_window_check_len(ld_kernel_ctx *ctx, const char *name, size_t have, size_t want);

/* --- scratch ----------------------------------------------------------------------- */

/* A process-wide cache of scratch buffers shared by every conv node: first
 * touch of fresh memory is slow on these VMs, and one buffer per node would
 * hold the sum of all im2col sizes. get returns a buffer of at least `bytes`
 * (contents unspecified) or NULL when out of memory; put gives it back.
 * Nodes call retain in init and release in fini; the cache is freed when the
 * last node is gone. Thread-safe. */
void *ld_scratch_get(size_t bytes);
void ld_scratch_put(void *buffer);
/* For a kernel's prepare (kernel.h): makes sure the cache holds an idle
 * buffer of at least `bytes`, faulted in, so that a run's ld_scratch_get
 * of that size takes it without touching fresh memory. Out of memory:
 * nothing (the run allocates as before). */
void ld_scratch_reserve(size_t bytes);
void ld_scratch_retain(void);
void ld_scratch_release(void);

/* --- im2col -------------------------------------------------------------------------- */

/* Columns of x (C channels of g->in_size elements, float or double by
 * elem_size 4 or 8) for the output positions [p0, p1) of the flattened
 * (D, H, W) output: col has C * k_size rows of p1 - p0 entries; padding
 * reads as 0. OpenMP over rows when large. */
void ld_im2col(const void *x, int64_t C, const ld_window_geom *g, int64_t p0, int64_t p1,
               void *col, size_t elem_size, int threads);

/* Asks for the n floats at p, one prefetch per 64-byte line: for rows the
 * convolutions read a little later from many planes at once, more streams
 * than the hardware prefetcher follows. */
static inline void ld_prefetch_floats(const float *p, int64_t n)
{
    for (int64_t b = 0; b < n * (int64_t)sizeof(float); b += 64)
        __builtin_prefetch((const char *)p + b, 0, 3);
}

/* First output index o in [0, out) whose input position o*s - pb + koff
 * is >= 0, and one past the last whose position is < in. */
static inline void ld_window_valid_range(int64_t in, int64_t out, int64_t s, int64_t pb,
                                         int64_t koff, int64_t *lo, int64_t *hi)
{
    int64_t a = pb - koff, b = in + pb - koff;
    int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
    int64_t h = b <= 0 ? 0 : (b + s - 1) / s;
    *lo = l < out ? l : out;
    *hi = h < out ? h : out;
    if (*hi < *lo)
        *hi = *lo;
}

#endif
