/* layerdiff — how a layer computes (its precision and rounding) and what the
 * engine counts while it does. Shared by backends (which decide it), the dump
 * (which stores it) and the comparator (which judges errors against it). */
#ifndef LAYERDIFF_NUMERICS_H
#define LAYERDIFF_NUMERICS_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/dtype.h"
#include "layerdiff/round.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Counters an engine keeps per layer while computing. */
typedef struct ld_layer_counters {
    bool present;
    int64_t overflows;         /* finite -> +-inf */
    int64_t nans_created;      /* NaN from non-NaN inputs */
    int64_t underflows;        /* nonzero -> 0 */
    int64_t subnormals;        /* results that became subnormal */
    int64_t partial_overflows; /* accumulate-half partial sums that overflowed */
} ld_layer_counters;

typedef struct ld_layer_numerics {
    ld_precision precision;     /* what the layer computes in */
    ld_dtype output_type;       /* float type of its float outputs (UNDEFINED: as computed) */
    ld_round_options round;     /* rounding mode and flush-to-zero */
    bool accumulate_half;       /* round every partial sum to `precision` */
} ld_layer_numerics;

#ifdef __cplusplus
}
#endif
#endif
