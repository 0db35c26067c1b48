/* layerdiff — dense tensors.
 *
 * A tensor is a name, a dtype, a shape of int64 dims (row-major, C order)
 * and a contiguous data buffer of count * ld_dtype_size(dtype) bytes.
 * Scalars have rank 0 and count 1; a zero dim gives count 0 (and data may
 * then be NULL). Element counts and byte sizes are overflow-checked. */
#ifndef LAYERDIFF_TENSOR_H
#define LAYERDIFF_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layerdiff/dtype.h"
#include "layerdiff/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ONNX sets no rank limit; real models stay far below this. Larger ranks
 * are rejected with a clear error rather than truncated. */
#define LD_MAX_RANK 16

typedef struct ld_shape {
    int rank;
    int64_t dims[LD_MAX_RANK];
} ld_shape;

typedef struct ld_tensor {
    char *name;        /* owned; "" when unnamed, never NULL */
    ld_dtype dtype;
    ld_shape shape;
    int64_t count;     /* product of dims (1 for a scalar) */
    size_t nbytes;     /* count * ld_dtype_size(dtype) */
    void *data;        /* owned (malloc) unless borrowed_data */
    bool borrowed_data; /* data belongs to someone else: not freed */
} ld_tensor;

/* Element count of a shape; fails (LD_ERR_INPUT, message names `what`) on a
 * negative dim, rank > LD_MAX_RANK or an int64 product overflow. */
ld_status ld_shape_count(const ld_shape *shape, int64_t *count, const char *what,
                         ld_error *err);

/* count * elem_size as size_t, failing with LD_ERR_NOMEM on overflow. */
ld_status ld_shape_nbytes(int64_t count, size_t elem_size, size_t *nbytes,
                          const char *what, ld_error *err);

/* Fills shape from rank and dims (dims may be NULL when rank == 0). Fails on
 * rank < 0 or > LD_MAX_RANK. */
ld_status ld_shape_set(ld_shape *shape, int rank, const int64_t *dims, ld_error *err);

bool ld_shape_equal(const ld_shape *a, const ld_shape *b);

/* Writes "1x3x224x224" ("scalar" for rank 0) into buf, truncating safely.
 * Returns buf. */
char *ld_shape_format(const ld_shape *shape, char *buf, size_t size);

/* New tensor with a zero-filled buffer. Return value: new, caller frees with
 * ld_tensor_destroy. name is copied (NULL means ""). Fails on an unsupported
 * dtype, a bad shape or out of memory. */
ld_status ld_tensor_create(ld_tensor **out, const char *name, ld_dtype dtype,
                           const ld_shape *shape, ld_error *err);

/* Like ld_tensor_create but wraps caller memory: the tensor borrows `data`
 * (nbytes must match the shape) and will not free it. */
ld_status ld_tensor_wrap(ld_tensor **out, const char *name, ld_dtype dtype,
                         const ld_shape *shape, void *data, ld_error *err);

/* Deep copy with a new name (NULL keeps the source name). Return value: new. */
ld_status ld_tensor_clone(ld_tensor **out, const ld_tensor *src, const char *name,
                          ld_error *err);

/* Replaces the tensor's name (copied). */
ld_status ld_tensor_set_name(ld_tensor *t, const char *name, ld_error *err);

/* Frees the tensor, its name and (unless borrowed) its data. NULL is a no-op. */
void ld_tensor_destroy(ld_tensor *t);

/* Element i converted to double (float16/bfloat16 widened exactly, bool 0/1,
 * integers converted). For tests, printing and slow paths only. */
double ld_tensor_get_double(const ld_tensor *t, int64_t i);

#ifdef __cplusplus
}
#endif
#endif
