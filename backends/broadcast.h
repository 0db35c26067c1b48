/* layerdiff — numpy multidirectional broadcasting, the one helper every
 * elementwise kernel uses (private to backends/). */
#ifndef LAYERDIFF_BACKENDS_BROADCAST_H
#define LAYERDIFF_BACKENDS_BROADCAST_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/tensor.h"

#define LD_BROADCAST_MAX_INPUTS 8

/* The broadcast of n shapes (ONNX multidirectional broadcasting: align from
 * the right, each dim equal or 1). Fails with LD_ERR_INPUT naming the shapes
 * when they are incompatible; `what` (node name) prefixes the message. */
ld_status ld_broadcast_shapes(const ld_shape *const *shapes, int n, ld_shape *out,
                              const char *what, ld_error *err);
ld_status ld_broadcast_shape(const ld_shape *a, const ld_shape *b, ld_shape *out,
                             const char *what, ld_error *err);

/* Walks an output shape row by row (a row = the innermost dimension) and
 * gives, for each input, the element offset of the row start and the
 * element stride along the row (0 when that input is broadcast along it).
 * Dimensions are coalesced first, so same-shape inputs give one long row. */
typedef struct ld_broadcast_iter {
    int n;
    int rank;
    int64_t dims[LD_MAX_RANK];
    int64_t strides[LD_BROADCAST_MAX_INPUTS][LD_MAX_RANK];
    int64_t index[LD_MAX_RANK];
    int64_t offset[LD_BROADCAST_MAX_INPUTS]; /* current row's start, per input */
    int64_t row_length;
    int64_t row_stride[LD_BROADCAST_MAX_INPUTS];
    int64_t rows_left;
    int64_t out_offset;                       /* output row start */
    bool started;
} ld_broadcast_iter;

/* n <= LD_BROADCAST_MAX_INPUTS; every input must broadcast to out. */
void ld_broadcast_iter_init(ld_broadcast_iter *it, const ld_shape *out,
                            const ld_shape *const *inputs, int n);
/* Advances to the next row; false when done. Call once before the first row. */
bool ld_broadcast_iter_next(ld_broadcast_iter *it);
/* Positions a fresh iterator (just initialised) on row `row` (0 <= row <
 * its row count), as `row + 1` calls of ld_broadcast_iter_next would; the
 * next call advances to row + 1. For threads that each run a range of rows
 * without walking the rows before it. */
void ld_broadcast_iter_seek(ld_broadcast_iter *it, int64_t row);

#endif
