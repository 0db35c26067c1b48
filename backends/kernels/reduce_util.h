/* layerdiff — the axis-reduction layout shared by the reduction and
 * normalization kernels (private to backends/kernels/).
 *
 * A reduction over a set of axes is planned once: size-1 axes are dropped
 * and adjacent axes of the same kind (reduced / kept) are merged into
 * blocks, so "reduce the last axis" is [kept, reduced], "reduce axis 0" is
 * [reduced, kept] and NCHW over (2, 3) is [kept, reduced]. The row walker
 * then visits the input one innermost block at a time (a contiguous row),
 * in memory order, giving the row's input offset and the output offset its
 * first element maps to: a reduced row maps entirely to that one output, a
 * kept row maps element i to out_off + i. No per-element index arithmetic. */
#ifndef LAYERDIFF_BACKENDS_REDUCE_UTIL_H
#define LAYERDIFF_BACKENDS_REDUCE_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/tensor.h"

typedef struct ld_reduce_plan {
    int nblk;                        /* >= 1 */
    int64_t size[LD_MAX_RANK];       /* block sizes, outermost first */
    bool reduced[LD_MAX_RANK];
    int64_t in_count;                /* elements of the input */
    int64_t out_count;               /* elements of the output */
    int64_t group;                   /* input elements per output element */
} ld_reduce_plan;

/* reduced[d] says whether axis d of shape is reduced. A plan with nothing
 * left (rank 0, all dims 1) is one reduced block of size 1. */
static inline void ld_reduce_plan_init(ld_reduce_plan *p, const ld_shape *shape,
                                       const bool *reduced)
{
    p->nblk = 0;
    p->in_count = 1;
    p->out_count = 1;
    p->group = 1;
    for (int d = 0; d < shape->rank; d++) {
        int64_t dim = shape->dims[d];
        p->in_count *= dim;
        if (reduced[d])
            p->group *= dim;
        else
            p->out_count *= dim;
        if (dim == 1)
            continue;
        if (p->nblk > 0 && p->reduced[p->nblk - 1] == reduced[d]) {
            p->size[p->nblk - 1] *= dim;
        } else {
            p->size[p->nblk] = dim;
            p->reduced[p->nblk] = reduced[d];
            p->nblk++;
        }
    }
    if (p->nblk == 0) {
        p->size[0] = 1;
        p->reduced[0] = true;
        p->nblk = 1;
    }
}

/* Walks the rows (innermost block) of a plan's input in memory order. */
typedef struct ld_reduce_rows {
    const ld_reduce_plan *p;
    int64_t idx[LD_MAX_RANK];
    int64_t out_stride[LD_MAX_RANK]; /* output elements per step of a kept block */
    int64_t rows_left;
    int64_t row_len;                 /* size of the innermost block */
    bool row_reduced;                /* the whole row maps to out_off */
    int64_t in_off, out_off;         /* current row */
    bool started;
} ld_reduce_rows;

static inline void ld_reduce_rows_init(ld_reduce_rows *it, const ld_reduce_plan *p)
{
    int last = p->nblk - 1;
    it->p = p;
    it->row_len = p->size[last];
    it->row_reduced = p->reduced[last];
    it->rows_left = p->in_count > 0 ? p->in_count / it->row_len : 0;
    int64_t stride = it->row_reduced ? 1 : it->row_len;
    for (int b = last - 1; b >= 0; b--) {
        it->idx[b] = 0;
        it->out_stride[b] = p->reduced[b] ? 0 : stride;
        if (!p->reduced[b])
            stride *= p->size[b];
    }
    it->in_off = 0;
    it->out_off = 0;
    it->started = false;
}

/* Advances to the next row; false when there is none. */
static inline bool ld_reduce_rows_next(ld_reduce_rows *it)
{
    if (it->rows_left <= 0)
        return false;
    it->rows_left--;
    if (!it->started) {
        it->started = true;
        return true;
    }
    it->in_off += it->row_len;
    for (int b = it->p->nblk - 2; b >= 0; b--) {
        it->out_off += it->out_stride[b];
        if (++it->idx[b] < it->p->size[b])
            break;
        it->idx[b] = 0;
        it->out_off -= it->out_stride[b] * it->p->size[b];
    }
    return true;
}

#endif
