/* layerdiff — float32 depthwise convolution with AVX-512 (depthwise.c) and
 * AVX2 (depthwise_avx2.c), private to backends/kernels/ and tests/: conv.c
 * calls ld_depthwise_plane_f32_fast and keeps its portable loop for other
 * CPUs, planes the kernels do not fit, and float64. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_DEPTHWISE_H
#define LAYERDIFF_BACKENDS_KERNELS_DEPTHWISE_H

#include <stdbool.h>

#include "backends/kernels/conv_common.h"

/* Whether a plane's padding taps may be computed as zero inputs instead of
 * skipped without changing a bit: finite weights (0 * w = +-0) and a bias
 * other than -0 (a sum that starts there never becomes -0). The narrow-plane
 * copy, the sliding rows and the stride-2 phase rows rely on it. */
bool ld_depthwise_padding_is_neutral(const float *wp, float bias, int64_t k_size);

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

/* Its stride-2 planes from even/odd phase rows (depthwise_stride2.c): 2-D,
 * 3x3 or 5x5, stride 2, no dilation, finite weights and a bias that is not
 * -0. Computes the plane, with the same contract, and returns true; false,
 * writing nothing, for a plane it does not take. Only on AVX-512 CPUs. */
bool ld_depthwise_stride2_avx512(const float *xp, const float *wp, float bias, float *yp,
                                 const ld_window_geom *g);

/* The AVX2 kernel (8 lanes): the same contract as the AVX-512 one. Only
 * call it when ld_depthwise_level_supported(LD_DEPTHWISE_AVX2) and
 * ld_depthwise_avx2_fits(g) (output width / 8 x kernel width <= 4096). */
bool ld_depthwise_avx2_fits(const ld_window_geom *g);
void ld_depthwise_plane_f32_avx2(const float *xp, const float *wp, float bias, float *yp,
                                 const ld_window_geom *g);

typedef enum ld_depthwise_level {
    LD_DEPTHWISE_AUTO = -1, /* only for ld_depthwise_force_level: what was detected */
    LD_DEPTHWISE_NONE = 0,  /* no kernel: conv.c's portable loop */
    LD_DEPTHWISE_AVX2,
    LD_DEPTHWISE_AVX512,
} ld_depthwise_level;

/* Whether this CPU (and OS) runs that level's kernel (NONE: always). */
bool ld_depthwise_level_supported(ld_depthwise_level level);
/* The forced level, else the best supported: AVX-512 > AVX2 > none. */
ld_depthwise_level ld_depthwise_level_active(void);
/* Tests: make ld_depthwise_plane_f32_fast use `level` (AUTO undoes it).
 * Returns false, changing nothing, when the CPU cannot run it. Global: do
 * not call while convolutions run. */
bool ld_depthwise_force_level(ld_depthwise_level level);

/* One plane as above with the active level's kernel when it fits g; returns
 * false, writing nothing, when there is none (the caller's portable loop
 * then computes the same bits). */
bool ld_depthwise_plane_f32_fast(const float *xp, const float *wp, float bias, float *yp,
                                 const ld_window_geom *g);

#endif
