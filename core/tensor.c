/* layerdiff — dense tensors (see include/layerdiff/tensor.h). */
#include "layerdiff/tensor.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/round.h"

ld_status ld_shape_set(ld_shape *shape, int rank, const int64_t *dims, ld_error *err)
{
    if (rank < 0 || rank > LD_MAX_RANK)
        return ld_error_set(err, LD_ERR_UNSUPPORTED,
                            "rank %d is outside the supported range 0..%d", rank, LD_MAX_RANK);
    shape->rank = rank;
    for (int i = 0; i < rank; i++)
        shape->dims[i] = dims[i];
    return LD_OK;
}

ld_status ld_shape_count(const ld_shape *shape, int64_t *count, const char *what, ld_error *err)
{
    if (!what)
        what = "tensor";
    if (shape->rank < 0 || shape->rank > LD_MAX_RANK)
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: rank %d is outside 0..%d", what,
                            shape->rank, LD_MAX_RANK);
    int64_t n = 1;
    for (int i = 0; i < shape->rank; i++) {
        int64_t d = shape->dims[i];
        if (d < 0)
            return ld_error_set(err, LD_ERR_INPUT, "%s: negative dimension %" PRId64
                                " at axis %d", what, d, i);
        if (d != 0 && n > INT64_MAX / d) {
            char buf[256];
            return ld_error_set(err, LD_ERR_INPUT,
                                "%s: shape %s has more elements than fit in int64", what,
                                ld_shape_format(shape, buf, sizeof buf));
        }
        n *= d;
    }
    *count = n;
    return LD_OK;
}

ld_status ld_shape_nbytes(int64_t count, size_t elem_size, size_t *nbytes, const char *what,
                          ld_error *err)
{
    if (count < 0 || (elem_size && (uint64_t)count > SIZE_MAX / elem_size))
        return ld_error_set(err, LD_ERR_NOMEM, "%s: %" PRId64 " elements of %zu bytes "
                            "exceed the address space", what ? what : "tensor", count, elem_size);
    *nbytes = (size_t)count * elem_size;
    return LD_OK;
}

bool ld_shape_equal(const ld_shape *a, const ld_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

char *ld_shape_format(const ld_shape *shape, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    if (shape->rank == 0) {
        snprintf(buf, size, "scalar");
        return buf;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < shape->rank && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%" PRId64, i ? "x" : "", shape->dims[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

/* Validates dtype and shape and fills everything but data. */
static ld_status tensor_alloc_header(ld_tensor **out, const char *name, ld_dtype dtype,
                                     const ld_shape *shape, ld_error *err)
{
    const char *what = name && *name ? name : "tensor";
    int64_t count = 0;
    size_t nbytes = 0;
    if (!ld_dtype_is_supported(dtype))
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: dtype %s cannot hold data in layerdiff",
                            what, ld_dtype_name(dtype));
    ld_status st = ld_shape_count(shape, &count, what, err);
    if (st != LD_OK)
        return st;
    st = ld_shape_nbytes(count, ld_dtype_size(dtype), &nbytes, what, err);
    if (st != LD_OK)
        return st;

    ld_tensor *t = calloc(1, sizeof *t);
    char *name_copy = strdup(name ? name : "");
    if (!t || !name_copy) {
        free(t);
        free(name_copy);
        return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
    }
    t->name = name_copy;
    t->dtype = dtype;
    t->shape = *shape;
    t->count = count;
    t->nbytes = nbytes;
    *out = t;
    return LD_OK;
}

ld_status ld_tensor_create(ld_tensor **out, const char *name, ld_dtype dtype,
                           const ld_shape *shape, ld_error *err)
{
    ld_tensor *t = NULL;
    ld_status st = tensor_alloc_header(&t, name, dtype, shape, err);
    if (st != LD_OK)
        return st;
    if (t->nbytes > 0) {
        t->data = calloc(1, t->nbytes);
        if (!t->data) {
            st = ld_error_set(err, LD_ERR_NOMEM, "%s: cannot allocate %zu bytes",
                              *t->name ? t->name : "tensor", t->nbytes);
            ld_tensor_destroy(t);
            return st;
        }
    }
    *out = t;
    return LD_OK;
}

ld_status ld_tensor_wrap(ld_tensor **out, const char *name, ld_dtype dtype,
                         const ld_shape *shape, void *data, ld_error *err)
{
    ld_tensor *t = NULL;
    ld_status st = tensor_alloc_header(&t, name, dtype, shape, err);
    if (st != LD_OK)
        return st;
    t->data = data;
    t->borrowed_data = true;
    *out = t;
    return LD_OK;
}

ld_status ld_tensor_clone(ld_tensor **out, const ld_tensor *src, const char *name, ld_error *err)
{
    ld_tensor *t = NULL;
    ld_status st = ld_tensor_create(&t, name ? name : src->name, src->dtype, &src->shape, err);
    if (st != LD_OK)
        return st;
    if (src->nbytes)
        memcpy(t->data, src->data, src->nbytes);
    *out = t;
    return LD_OK;
}

ld_status ld_tensor_set_name(ld_tensor *t, const char *name, ld_error *err)
{
    char *copy = strdup(name ? name : "");
    if (!copy)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory renaming tensor '%s'", t->name);
    free(t->name);
    t->name = copy;
    return LD_OK;
}

void ld_tensor_destroy(ld_tensor *t)
{
    if (!t)
        return;
    if (!t->borrowed_data)
        free(t->data);
    free(t->name);
    free(t);
}

double ld_tensor_get_double(const ld_tensor *t, int64_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case LD_DTYPE_FLOAT32: return ((const float *)p)[i];
    case LD_DTYPE_FLOAT64: return ((const double *)p)[i];
    case LD_DTYPE_FLOAT16: return ld_fp16_to_fp32(((const ld_fp16 *)p)[i]);
    case LD_DTYPE_BFLOAT16: return ld_bf16_to_fp32(((const ld_bf16 *)p)[i]);
    case LD_DTYPE_INT8: return ((const int8_t *)p)[i];
    case LD_DTYPE_INT16: return ((const int16_t *)p)[i];
    case LD_DTYPE_INT32: return ((const int32_t *)p)[i];
    case LD_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case LD_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case LD_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case LD_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case LD_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    case LD_DTYPE_BOOL: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    default: return 0.0;
    }
}
