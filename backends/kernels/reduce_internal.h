/* layerdiff — the reduction kernel's types shared by its two files (private
 * to backends/kernels/): reduce_classes.c holds the accumulator classes (one
 * per input type: float32, float64, float32 in a reduced-precision layer,
 * integers), reduce.c the engine that walks a reduction plan with them, the
 * integer conversions and the kernels. Numerics: see reduce.c. */
#ifndef LAYERDIFF_BACKENDS_REDUCE_INTERNAL_H
#define LAYERDIFF_BACKENDS_REDUCE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/accumulate.h"

typedef enum red_op { OP_SUM, OP_SUMSQ, OP_L1, OP_MAX, OP_MIN, OP_PROD, OP_EXPSUM } red_op;
typedef enum red_post { POST_NONE, POST_MEAN, POST_SQRT, POST_LOG, POST_LSE } red_post;

typedef struct red_kind {
    const char *op_type;
    red_op op;
    red_post post;
} red_kind;

/* One reduction pass over a typed input. The accumulators are double (float
 * classes; c holds the Neumaier compensation for float64 sums, else NULL)
 * or uint64 bits (integer class). */
/* One accumulator: a double (float classes) or uint64 bits (integers). */
typedef union red_acc {
    double d;
    uint64_t u;
    float f;    /* reduced-precision float32 layers */
} red_acc;

typedef struct red_job {
    red_op op;
    red_post post;
    const void *x;       /* input: float, double or int64 */
    void *y;             /* output: float, double or int64 (integers), or double
                            (integer L2/LogSum) */
    int64_t group;       /* inputs per output */
    bool is_unsigned;    /* integer class: the int64 values are uint64 bits */
    const ld_accum *accum; /* reduced-precision class: how to accumulate */
} red_job;

typedef struct red_class {
    void (*init)(const red_job *j, red_acc *acc, double *c, int64_t n);
    /* acc[0] (, c[0]) accumulates x[in_off, in_off + n), for output out_off. */
    void (*inner)(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                  int64_t out_off);
    /* acc[i] (, c[i]) accumulates x[in_off + i] for i < n, output out_off + i. */
    void (*outer)(const red_job *j, red_acc *acc, double *c, int64_t in_off, int64_t n,
                  int64_t out_off);
    /* y[out_off + i] = result of acc[i], i < n. */
    void (*finish)(const red_job *j, const red_acc *acc, const double *c, int64_t n,
                   int64_t out_off);
} red_class;

/* --- reduce_classes.c ------------------------------------------------------------ */

extern const red_class ld_red_f32_class;  /* float32: double accumulators */
extern const red_class ld_red_f64_class;  /* float64: Neumaier-compensated sums */
extern const red_class ld_red_f32r_class; /* float32 in a reduced-precision layer */
extern const red_class ld_red_int_class;  /* integers as int64 (uint64 bits) */

/* Outputs ld_red_f32r_rows sums at once (see reduce_classes.c). */
#define F32R_ROWS 8
/* Whether ld_red_f32r_rows applies to job j. */
bool ld_red_f32r_rows_apply(const red_job *j);
/* Outputs o0 .. o0 + F32R_ROWS - 1 of a [kept, reduced R] layout. */
void ld_red_f32r_rows(const red_job *j, int64_t o0, int64_t R);

#endif
