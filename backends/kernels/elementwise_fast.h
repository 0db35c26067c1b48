/* layerdiff — float32 Add, Sub, Mul, Div rows on AVX2, unrolled and with
 * software prefetch (private to backends/kernels/ and its tests; see
 * elementwise_fast.c for why). */
#ifndef LAYERDIFF_BACKENDS_KERNELS_ELEMENTWISE_FAST_H
#define LAYERDIFF_BACKENDS_KERNELS_ELEMENTWISE_FAST_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/kernels/elementwise.h"

/* out[i] = a[i*st[0]] op b[i*st[1]] for i < n (op ADD..DIV; st[k] 0 or 1,
 * not both 0) at the active level (fast_level.h), where fn (params) is the
 * op's float32 row function: groups with a NaN result and the tail (< 32)
 * are fn's, so every bit is as fn gives it. Returns false, writing nothing,
 * at the portable level (the caller runs fn). out may be a or b. */
bool ld_ew_arith_f32_fast(ld_ew_arith op, float *out, const float *a, const float *b,
                          const int64_t *st, int64_t n, ld_ew_row_fn fn, const void *params);

#endif
