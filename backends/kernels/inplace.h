/* layerdiff — which kernels may write their output over a dying input
 * (private to backends/; used by the executor).
 *
 * Why. PaddleOCR det runs chains of 8 elementwise ops after most
 * convolutions (scale, bias, HardSwish as Add/Clip/Mul/Div, scale, bias) on
 * 1-13 MB tensors. Each op writing a fresh buffer streams input and output
 * through the caches; writing over the input, which dies at that op anyway,
 * halves the traffic (measured: 3.3M-float Add, 0.79 ms into a new buffer
 * against 0.39 ms in place).
 *
 * A kernel listed here must compute output 0 so that element i depends on
 * element i of each full-shape input only, read before element i of the
 * output is written (elementwise maps and broadcasts, BatchNormalization's
 * per-channel affine map). The executor decides the rest: only in a whole
 * run (not stepwise, where the caller may still read the inputs), only an
 * input it owns, of the output's dtype and shape, whose last reader is this
 * node. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_INPLACE_H
#define LAYERDIFF_BACKENDS_KERNELS_INPLACE_H

#include <stdbool.h>

#include "layerdiff/graph.h"

/* Whether the node's kernel may compute output 0 over an input (above). */
bool ld_kernel_inplace_safe(const ld_node *node);

#endif
