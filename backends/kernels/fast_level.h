/* layerdiff — the instruction-set level of the AVX2 paths of Resize
 * (nearest, integer upsampling) and GlobalAveragePool (grouped sums)
 * (private to backends/kernels/ and its tests).
 *
 * Why one switch: these paths are small AVX2 loops next to a portable loop
 * that gives the same bits; the tests run every level the CPU has
 * (ld_fast_force_level), so an AVX-512 machine also tests the AVX2 loops. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_FAST_LEVEL_H
#define LAYERDIFF_BACKENDS_KERNELS_FAST_LEVEL_H

#include <stdbool.h>

typedef enum ld_fast_level {
    LD_FAST_AUTO = -1,   /* only for ld_fast_force_level: what was detected */
    LD_FAST_PORTABLE = 0,
    LD_FAST_AVX2 = 1,    /* AVX2 (also picked on AVX-512 CPUs) */
} ld_fast_level;

/* Whether this CPU runs that level (PORTABLE: always). */
bool ld_fast_level_supported(ld_fast_level level);

/* The forced level, else AVX2 when the CPU has it, else PORTABLE. */
ld_fast_level ld_fast_level_active(void);

/* Tests: pin the level (AUTO undoes it). False, changing nothing, when the
 * CPU cannot run it. Global: not while kernels run. */
bool ld_fast_force_level(ld_fast_level level);

#endif
