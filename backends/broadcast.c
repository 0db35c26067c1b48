/* layerdiff — numpy multidirectional broadcasting (see broadcast.h). */
#include "backends/broadcast.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

ld_status ld_broadcast_shapes(const ld_shape *const *shapes, int n, ld_shape *out,
                              const char *what, ld_error *err)
{
    int rank = 0;
    for (int i = 0; i < n; i++)
        if (shapes[i]->rank > rank)
            rank = shapes[i]->rank;
    out->rank = rank;
    for (int d = 0; d < rank; d++) {
        int64_t dim = 1;
        int setter = 0; /* the input that gave `dim`, named in the message */
        for (int i = 0; i < n; i++) {
            int off = rank - shapes[i]->rank;
            if (d < off)
                continue;
            int64_t di = shapes[i]->dims[d - off];
            if (di == dim || di == 1)
                continue;
            if (dim != 1) {
                char a[128], b[128];
                ld_shape_format(shapes[setter], a, sizeof a);
                ld_shape_format(shapes[i], b, sizeof b);
                return ld_error_set(err, LD_ERR_INPUT,
                                    "%s%sshapes %s and %s cannot be broadcast together "
                                    "(axis %d: %" PRId64 " vs %" PRId64 ")",
                                    what ? what : "", what ? ": " : "", a, b, d, dim, di);
            }
            dim = di;
            setter = i;
        }
        out->dims[d] = dim;
    }
    return LD_OK;
}

ld_status ld_broadcast_shape(const ld_shape *a, const ld_shape *b, ld_shape *out,
                             const char *what, ld_error *err)
{
    const ld_shape *shapes[2] = {a, b};
    return ld_broadcast_shapes(shapes, 2, out, what, err);
}

void ld_broadcast_iter_init(ld_broadcast_iter *it, const ld_shape *out,
                            const ld_shape *const *inputs, int n)
{
    memset(it, 0, sizeof *it);
    it->n = n;
    /* Element strides of each input laid over the output's axes (0 where the
     * input has size 1 or lacks the axis). */
    int64_t strides[LD_BROADCAST_MAX_INPUTS][LD_MAX_RANK];
    for (int i = 0; i < n; i++) {
        int off = out->rank - inputs[i]->rank;
        int64_t s = 1;
        for (int d = out->rank - 1; d >= 0; d--) {
            int64_t dim = d >= off ? inputs[i]->dims[d - off] : 1;
            strides[i][d] = dim == 1 ? 0 : s;
            s *= dim;
        }
    }
    /* Coalesce adjacent axes that are contiguous for every input. Size-1
     * output axes are dropped. */
    int rank = 0;
    for (int d = 0; d < out->rank; d++) {
        int64_t dim = out->dims[d];
        if (dim == 1)
            continue;
        bool merge = rank > 0;
        for (int i = 0; merge && i < n; i++)
            if (it->strides[i][rank - 1] != strides[i][d] * dim)
                merge = false;
        if (merge) {
            it->dims[rank - 1] *= dim;
            for (int i = 0; i < n; i++)
                it->strides[i][rank - 1] = strides[i][d];
        } else {
            it->dims[rank] = dim;
            for (int i = 0; i < n; i++)
                it->strides[i][rank] = strides[i][d];
            rank++;
        }
    }
    it->rank = rank;
    int64_t total = 1;
    for (int d = 0; d < out->rank; d++)
        total *= out->dims[d];
    if (rank == 0) {
        it->row_length = total; /* 1 (scalar-like) or 0 */
        it->rows_left = total ? 1 : 0;
        return;
    }
    it->row_length = it->dims[rank - 1];
    for (int i = 0; i < n; i++)
        it->row_stride[i] = it->strides[i][rank - 1];
    it->rows_left = it->row_length ? total / it->row_length : 0;
}

bool ld_broadcast_iter_next(ld_broadcast_iter *it)
{
    if (it->rows_left <= 0)
        return false;
    if (!it->started) { /* the first row starts at offset 0 everywhere */
        it->started = true;
        it->rows_left--;
        return true;
    }
    it->rows_left--;
    it->out_offset += it->row_length;
    /* Increment the multi-index over all axes but the innermost. */
    for (int d = it->rank - 2; d >= 0; d--) {
        it->index[d]++;
        for (int i = 0; i < it->n; i++)
            it->offset[i] += it->strides[i][d];
        if (it->index[d] < it->dims[d])
            return true;
        for (int i = 0; i < it->n; i++)
            it->offset[i] -= it->strides[i][d] * it->dims[d];
        it->index[d] = 0;
    }
    return true;
}

void ld_broadcast_iter_seek(ld_broadcast_iter *it, int64_t row)
{
    it->started = true;
    it->rows_left -= row + 1;
    it->out_offset = row * it->row_length;
    for (int i = 0; i < it->n; i++)
        it->offset[i] = 0;
    /* the multi-index of the row over all axes but the innermost */
    for (int d = it->rank - 2; d >= 0; d--) {
        it->index[d] = row % it->dims[d];
        row /= it->dims[d];
        for (int i = 0; i < it->n; i++)
            it->offset[i] += it->index[d] * it->strides[i][d];
    }
}
