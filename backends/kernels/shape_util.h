/* layerdiff — helpers for the kernels that move data without arithmetic
 * (shape, layout, indexing, scatter, sort families; private to backends/).
 *
 * These kernels work by element size, never by dtype: a float16 Gather and
 * an int16 Gather are the same 2-byte copy. ld_view_copy is the one strided
 * copy engine (Transpose, Slice, Expand, Tile, DepthToSpace...): it
 * coalesces axes, then copies whole rows with memcpy, transposes in cache
 * blocks, or walks strided rows, with no per-element index arithmetic. */
#ifndef LAYERDIFF_BACKENDS_SHAPE_UTIL_H
#define LAYERDIFF_BACKENDS_SHAPE_UTIL_H

#include <stdint.h>
#include <string.h>

#include "backends/kernels/kernel_util.h"

/* Views may have more axes than tensors: Tile splits every axis in two. */
#define LD_VIEW_MAX_RANK (2 * LD_MAX_RANK)

/* Largest output (in bytes) a kernel creates from a shape it reads from
 * input *values* (Expand, Tile, ConstantOfShape, Range, OneHot, Pad...): a
 * hostile model must get a clear error, not a giant allocation that the
 * kernel then writes into until the OOM killer comes. 16 GiB, or the
 * machine's physical memory when that is smaller. */
#define LD_KERNEL_MAX_VALUE_SHAPED_BYTES ((int64_t)1 << 34)
int64_t ld_kernel_value_shaped_limit(void);

/* Element types by size that may alias any object (the data of a float
 * tensor is copied through uint32 without breaking strict aliasing). */
typedef uint8_t ld_e1 __attribute__((may_alias));
typedef uint16_t ld_e2 __attribute__((may_alias));
typedef uint32_t ld_e4 __attribute__((may_alias));
typedef uint64_t ld_e8 __attribute__((may_alias));

/* A strided view of a source buffer: element (i0, i1, ...) of the view is
 * src[sum(i_k * strides[k])] (strides in elements, may be 0 or negative). */
typedef struct ld_view {
    int rank;
    int64_t dims[LD_VIEW_MAX_RANK];
    int64_t strides[LD_VIEW_MAX_RANK];
} ld_view;

/* Copies the view of src (pointing at the view's element 0) into the
 * contiguous dst (product of dims elements). elem_size is 1, 2, 4 or 8 (any
 * other size works, slower). Uses up to `threads` OpenMP threads on large
 * copies; the result does not depend on the thread count. */
void ld_view_copy(void *dst, const void *src, const ld_view *v, size_t elem_size, int threads);

/* An in-register transpose of a width x width block of elem_size-byte
 * elements: dst[q * ds + p] = src[p * ss + q] (strides in elements). */
typedef void (*ld_block_transpose_fn)(uint8_t *dst, int64_t ds, const uint8_t *src, int64_t ss);

/* The SIMD block transpose for this element size on this CPU, and its
 * width; NULL when there is none (then use a scalar loop). */
ld_block_transpose_fn ld_block_transpose_kernel(size_t elem_size, int *width);

/* Row-major element strides of a shape. */
void ld_shape_strides(const ld_shape *shape, int64_t *strides);

/* Product of dims[begin, end) (no overflow check: use on validated shapes). */
int64_t ld_dims_product(const int64_t *dims, int begin, int end);

/* Element size of a dtype the kernel can move; fails with LD_ERR_UNSUPPORTED
 * naming the dtype for string/complex/undefined tensors. */
ld_status ld_kelem_size(ld_kernel_ctx *ctx, ld_dtype dtype, size_t *size);

/* *x = input i; fails unless it is present and of a dtype with data. */
ld_status ld_krequire_data(ld_kernel_ctx *ctx, int i, const ld_tensor **x);

/* Checks a shape computed from input values (negative dims, int64 overflow,
 * more than ld_kernel_value_shaped_limit() bytes of dtype) with a clear error
 * naming the node and `what`. */
ld_status ld_kcheck_shape(ld_kernel_ctx *ctx, const ld_shape *shape, ld_dtype dtype,
                          const char *what);

/* Reads an integer tensor (any integer dtype; float dtypes are truncated, for
 * the old opsets that typed such inputs as T) of rank <= 1 into out[0..n),
 * failing when it has more than cap elements. `what` names the input. */
ld_status ld_kread_ints(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what, int64_t *out,
                        int cap, int *n);

/* Same for a tensor of any length: *out is new (malloc; free it), *n its
 * length (out is non-NULL even when n is 0). */
ld_status ld_kread_ints_alloc(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what,
                              int64_t **out, int64_t *n);

/* Reads a one-element tensor (scalar or shape [1]) as an integer. */
ld_status ld_kread_scalar_int(ld_kernel_ctx *ctx, const ld_tensor *t, const char *what,
                              int64_t *out);

/* Integer list from attribute `name` (opsets before it became an input, when
 * from_attr) or from input `input` (later opsets; any integer dtype). At most
 * cap entries. *present is false (and *n 0) when neither is given. */
ld_status ld_kread_list(ld_kernel_ctx *ctx, bool from_attr, const char *name, int input,
                        int64_t *out, int cap, int *n, bool *present);

/* Integer attribute or fallback; a wrong attribute type fails naming the node. */
ld_status ld_kattr_int(ld_kernel_ctx *ctx, const char *name, int64_t fallback, int64_t *out);
/* String attribute (borrowed) or fallback. */
ld_status ld_kattr_string(ld_kernel_ctx *ctx, const char *name, const char *fallback,
                          const char **out);

/* Element i of an integer (or bool, or float: truncated) tensor as int64. */
int64_t ld_tensor_int_at(const ld_tensor *t, int64_t i);

/* Fills n elements of elem_size bytes at dst with the element at value. */
void ld_fill_elements(void *dst, const void *value, size_t elem_size, int64_t n);

/* The value 1 of a dtype into out (up to 8 bytes); false for types without
 * one (string, complex). */
bool ld_dtype_one(ld_dtype dtype, void *out);

/* Normalises an axis in [-rank, rank) to [0, rank) — or, with `inclusive`
 * (Flatten's axis), [-rank, rank] to [0, rank] — failing with an error that
 * names `what`, the axis and the rank. */
ld_status ld_knorm_axis(ld_kernel_ctx *ctx, int64_t axis, int rank, bool inclusive,
                        const char *what, int *out);

/* --- indices (Gather*, Scatter*) ---------------------------------------------------- */

/* *t = input i; fails unless present and int32/int64. */
ld_status ld_krequire_indices(ld_kernel_ctx *ctx, int i, const ld_tensor **t);

/* Element i of an int32/int64 indices tensor. */
static inline int64_t ld_kindex_at(const ld_tensor *t, int64_t i)
{
    return t->dtype == LD_DTYPE_INT64 ? ((const int64_t *)t->data)[i]
                                      : ((const int32_t *)t->data)[i];
}

/* raw normalised into [0, dim) (negative counts from the back); false when
 * out of range. */
static inline bool ld_knormalize_index(int64_t raw, int64_t dim, int64_t *out)
{
    int64_t i = raw < 0 ? raw + dim : raw;
    *out = i;
    return i >= 0 && i < dim;
}

/* "index V (indices element P) is out of range for axis A of size D". */
ld_status ld_kindex_error(ld_kernel_ctx *ctx, int64_t value, int64_t pos, int axis, int64_t dim);

/* GatherElements / ScatterElements: the element offset into data (shape
 * data->shape) of every element of ind (same rank, each dim <= data's except
 * along axis), validated, into offsets[ind->count]. */
ld_status ld_element_offsets(ld_kernel_ctx *ctx, const ld_tensor *data, const ld_tensor *ind,
                             int axis, int64_t *offsets);

/* GatherND / ScatterND: the element offset (within one batch) addressed by
 * index tuple `tuple` (m coordinates for axes b..b+m-1), validated. strides
 * are data_shape's row-major strides. */
ld_status ld_nd_tuple_offset(ld_kernel_ctx *ctx, const ld_shape *data_shape,
                             const int64_t *strides, const ld_tensor *ind, int b, int m,
                             int64_t tuple, int64_t *offset);

#endif
