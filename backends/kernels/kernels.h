/* layerdiff — the kernel families (private to backends/).
 *
 * Each file under backends/kernels/ implements one op family and exports one
 * table of ld_kernel rows, sorted by (domain, op_type, since_version). The
 * registry (backends/kernel_registry.c) lists the families; adding an op is a
 * function in its family file and a row in that file's table. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_H
#define LAYERDIFF_BACKENDS_KERNELS_H

#include "layerdiff/kernel.h"

typedef struct ld_kernel_family {
    const char *name;
    const ld_kernel *rows;
    int n_rows;
} ld_kernel_family;

#define LD_KERNEL_FAMILY(family)                                                      \
    const ld_kernel_family ld_kernel_family_##family = {                            \
        #family, family##_kernels, (int)(sizeof family##_kernels / sizeof family##_kernels[0])}

extern const ld_kernel_family ld_kernel_family_basic;
extern const ld_kernel_family ld_kernel_family_conv;
extern const ld_kernel_family ld_kernel_family_conv_transpose;
extern const ld_kernel_family ld_kernel_family_gemm;
extern const ld_kernel_family ld_kernel_family_pool;
extern const ld_kernel_family ld_kernel_family_unpool;
extern const ld_kernel_family ld_kernel_family_resize;
extern const ld_kernel_family ld_kernel_family_quantize;
extern const ld_kernel_family ld_kernel_family_signal;
extern const ld_kernel_family ld_kernel_family_rnn;
extern const ld_kernel_family ld_kernel_family_detection;
extern const ld_kernel_family ld_kernel_family_shape;
extern const ld_kernel_family ld_kernel_family_layout;
extern const ld_kernel_family ld_kernel_family_region;
extern const ld_kernel_family ld_kernel_family_indexing;
extern const ld_kernel_family ld_kernel_family_scatter;
extern const ld_kernel_family ld_kernel_family_sort;
extern const ld_kernel_family ld_kernel_family_scan;
extern const ld_kernel_family ld_kernel_family_reduce;
extern const ld_kernel_family ld_kernel_family_softmax;
extern const ld_kernel_family ld_kernel_family_normalization;
extern const ld_kernel_family ld_kernel_family_math_misc;
extern const ld_kernel_family ld_kernel_family_unary;
extern const ld_kernel_family ld_kernel_family_binary;
extern const ld_kernel_family ld_kernel_family_activation;
extern const ld_kernel_family ld_kernel_family_logical;
extern const ld_kernel_family ld_kernel_family_cast;

#endif
