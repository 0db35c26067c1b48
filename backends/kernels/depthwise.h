/* layerdiff — float32 depthwise convolution with AVX-512 (private to
 * backends/kernels/; used by conv.c, which keeps the portable loop for
 * other CPUs and for float64). */
#ifndef LAYERDIFF_BACKENDS_KERNELS_DEPTHWISE_H
#define LAYERDIFF_BACKENDS_KERNELS_DEPTHWISE_H

#include <stdbool.h>

#include "backends/kernels/conv_common.h"

/* Whether this CPU (and OS) runs ld_depthwise_plane_f32_avx512. */
bool ld_depthwise_avx512_available(void);

/* Whether a plane of geometry g is within the kernel's limits (its mask
 * table: output width / 16 x kernel width <= 4096). */
bool ld_depthwise_avx512_fits(const ld_window_geom *g);

/* One output plane of a convolution with one input channel per group: yp
 * (g->out_size floats) = bias + the plane xp (g->in_size) convolved with the
 * kernel wp (g->k_size), in the portable loop's exact arithmetic (see
 * depthwise.c). Only call it when ld_depthwise_avx512_available() and _fits(g). */
void ld_depthwise_plane_f32_avx512(const float *xp, const float *wp, float bias, float *yp,
                                   const ld_window_geom *g);

#endif
