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

#endif
