/* layerdiff — TensorProto -> ld_tensor (raw_data, typed fields, external
 * data, sparse) and TypeProto -> ld_type_info.
 *
 * The byte count is checked against dtype * shape before anything is
 * allocated, so a tiny file declaring a huge shape fails cleanly instead of
 * trying to allocate terabytes. */
#include "onnx/onnx_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The typed field ONNX stores each dtype in (onnx.proto, TensorProto). */
typedef enum typed_field {
    FIELD_NONE = 0,
    FIELD_FLOAT,  /* float_data: float32 (complex64) */
    FIELD_INT32,  /* int32_data: int32/16/8, uint16/8, bool, float16/bfloat16 bit patterns */
    FIELD_INT64,  /* int64_data: int64 */
    FIELD_DOUBLE, /* double_data: float64 (complex128) */
    FIELD_UINT64, /* uint64_data: uint32, uint64 */
    FIELD_STRING  /* string_data: string */
} typed_field;

static const char *const typed_field_names[] = {
    "none", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data",
};

static typed_field field_for_dtype(ld_dtype dtype)
{
    switch (dtype) {
    case LD_DTYPE_FLOAT32: case LD_DTYPE_COMPLEX64: return FIELD_FLOAT;
    case LD_DTYPE_INT32: case LD_DTYPE_INT16: case LD_DTYPE_INT8: case LD_DTYPE_UINT16:
    case LD_DTYPE_UINT8: case LD_DTYPE_BOOL: case LD_DTYPE_FLOAT16: case LD_DTYPE_BFLOAT16:
        return FIELD_INT32;
    case LD_DTYPE_INT64: return FIELD_INT64;
    case LD_DTYPE_FLOAT64: case LD_DTYPE_COMPLEX128: return FIELD_DOUBLE;
    case LD_DTYPE_UINT32: case LD_DTYPE_UINT64: return FIELD_UINT64;
    case LD_DTYPE_STRING: return FIELD_STRING;
    default: return FIELD_NONE;
    }
}

/* Which typed field holds values; FIELD_NONE when none does. Fails when
 * several do (the proto allows only one). */
static ld_status populated_field(const Onnx__TensorProto *p, const char *what, typed_field *out,
                                 size_t *n_values, ld_error *err)
{
    const size_t counts[] = {0, p->n_float_data, p->n_int32_data, p->n_int64_data,
                             p->n_double_data, p->n_uint64_data, p->n_string_data};
    *out = FIELD_NONE;
    *n_values = 0;
    for (int f = FIELD_FLOAT; f <= FIELD_STRING; f++) {
        if (!counts[f])
            continue;
        if (*out != FIELD_NONE)
            return ld_error_set(err, LD_ERR_INPUT, "%s: data in both %s and %s", what,
                                typed_field_names[*out], typed_field_names[f]);
        *out = (typed_field)f;
        *n_values = counts[f];
    }
    return LD_OK;
}

/* Copies int32_data into the narrower types it encodes, range-checked: an
 * out-of-range value means the writer got the type wrong. */
static ld_status copy_int32_field(ld_tensor *t, const int32_t *src, const char *what,
                                  ld_error *err)
{
    int64_t lo, hi;
    switch (t->dtype) {
    case LD_DTYPE_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case LD_DTYPE_UINT8: lo = 0; hi = UINT8_MAX; break;
    case LD_DTYPE_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    /* 16-bit patterns: accept them zero- or sign-extended. */
    case LD_DTYPE_UINT16: lo = 0; hi = UINT16_MAX; break;
    case LD_DTYPE_FLOAT16: case LD_DTYPE_BFLOAT16: lo = INT16_MIN; hi = UINT16_MAX; break;
    default: lo = INT32_MIN; hi = INT32_MAX; break;
    }
    for (int64_t i = 0; i < t->count; i++) {
        int32_t v = src[i];
        if (v < lo || v > hi)
            return ld_error_set(err, LD_ERR_INPUT, "%s: int32_data[%" PRId64 "] = %" PRId32
                                " is out of range for %s", what, i, v, ld_dtype_name(t->dtype));
        switch (t->dtype) {
        case LD_DTYPE_INT8: ((int8_t *)t->data)[i] = (int8_t)v; break;
        case LD_DTYPE_UINT8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
        case LD_DTYPE_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
        case LD_DTYPE_INT16: ((int16_t *)t->data)[i] = (int16_t)v; break;
        case LD_DTYPE_UINT16: ((uint16_t *)t->data)[i] = (uint16_t)v; break;
        case LD_DTYPE_FLOAT16: ((ld_fp16 *)t->data)[i].bits = (uint16_t)v; break;
        case LD_DTYPE_BFLOAT16: ((ld_bf16 *)t->data)[i].bits = (uint16_t)v; break;
        default: ((int32_t *)t->data)[i] = v; break;
        }
    }
    return LD_OK;
}

static ld_status copy_typed_field(ld_tensor *t, const Onnx__TensorProto *p, typed_field field,
                                  const char *what, ld_error *err)
{
    switch (field) {
    case FIELD_FLOAT: memcpy(t->data, p->float_data, t->nbytes); return LD_OK;
    case FIELD_INT64: memcpy(t->data, p->int64_data, t->nbytes); return LD_OK;
    case FIELD_DOUBLE: memcpy(t->data, p->double_data, t->nbytes); return LD_OK;
    case FIELD_INT32: return copy_int32_field(t, p->int32_data, what, err);
    case FIELD_UINT64:
        if (t->dtype == LD_DTYPE_UINT64) {
            memcpy(t->data, p->uint64_data, t->nbytes);
            return LD_OK;
        }
        for (int64_t i = 0; i < t->count; i++) {
            if (p->uint64_data[i] > UINT32_MAX)
                return ld_error_set(err, LD_ERR_INPUT, "%s: uint64_data[%" PRId64 "] = %" PRIu64
                                    " is out of range for uint32", what, i, p->uint64_data[i]);
            ((uint32_t *)t->data)[i] = (uint32_t)p->uint64_data[i];
        }
        return LD_OK;
    default:
        return ld_error_set(err, LD_ERR_INTERNAL, "%s: no typed field for %s", what,
                            ld_dtype_name(t->dtype));
    }
}

/* raw_data is little-endian whatever the host; bools are normalised to 0/1. */
static void copy_raw(ld_tensor *t, const uint8_t *src)
{
    memcpy(t->data, src, t->nbytes);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    size_t width = ld_dtype_size(t->dtype);
    for (size_t e = 0; width > 1 && e < t->nbytes; e += width) {
        uint8_t *b = (uint8_t *)t->data + e;
        for (size_t i = 0; i < width / 2; i++) {
            uint8_t tmp = b[i];
            b[i] = b[width - 1 - i];
            b[width - 1 - i] = tmp;
        }
    }
#endif
    if (t->dtype == LD_DTYPE_BOOL)
        for (size_t i = 0; i < t->nbytes; i++)
            ((uint8_t *)t->data)[i] = ((uint8_t *)t->data)[i] != 0;
}

/* Element types ONNX added after IR version 8 (onnx 1.14+): valid models
 * can use them, so they are "unsupported", not "unknown". */
static const char *newer_onnx_dtype(int32_t value)
{
    static const char *const names[] = {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                                        "float8e5m2fnuz", "uint4", "int4", "float4e2m1"};
    if (value >= 17 && value < 17 + (int32_t)(sizeof names / sizeof names[0]))
        return names[value - 17];
    return NULL;
}

/* Maps an ONNX element type number; `field` names it in messages. */
static ld_status map_dtype(int32_t value, const char *what, const char *field, ld_dtype *out,
                           ld_error *err)
{
    const char *newer = newer_onnx_dtype(value);
    if (newer)
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: %s %s (%" PRId32 ") is not supported "
                            "by layerdiff", what, field, newer, value);
    if (!ld_dtype_is_known((ld_dtype)value))
        return ld_error_set(err, LD_ERR_INPUT, "%s: unknown %s %" PRId32, what, field, value);
    *out = (ld_dtype)value;
    return LD_OK;
}

static ld_status read_dtype(const Onnx__TensorProto *p, const char *what, ld_dtype *dtype,
                            ld_error *err)
{
    if (!p->has_data_type || p->data_type == LD_DTYPE_UNDEFINED)
        return ld_error_set(err, LD_ERR_INPUT, "%s: no data type (data_type is unset or "
                            "UNDEFINED)", what);
    return map_dtype(p->data_type, what, "data type", dtype, err);
}

static ld_status read_shape(const Onnx__TensorProto *p, const char *what, ld_shape *shape,
                            int64_t *count, ld_error *err)
{
    if (p->n_dims > LD_MAX_RANK)
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: rank %zu is above the supported %d",
                            what, p->n_dims, LD_MAX_RANK);
    ld_status st = ld_shape_set(shape, (int)p->n_dims, p->dims, err);
    if (st == LD_OK)
        st = ld_shape_count(shape, count, what, err);
    return st;
}

/* Header of a string/complex tensor: shape and dtype, no data. */
static ld_status dataless_tensor(ld_tensor **out, const char *name, ld_dtype dtype,
                                 const ld_shape *shape, int64_t count, ld_error *err)
{
    ld_tensor *t = calloc(1, sizeof *t);
    char *name_copy = strdup(name);
    if (!t || !name_copy) {
        free(t);
        free(name_copy);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    t->name = name_copy;
    t->dtype = dtype;
    t->shape = *shape;
    t->count = count;
    *out = t;
    return LD_OK;
}

static ld_status unsupported_tensor(ld_tensor **out, const Onnx__TensorProto *p,
                                    const char *what, ld_dtype dtype, const ld_shape *shape,
                                    int64_t count, const ld_onnx_ctx *ctx, ld_error *err)
{
    if (!ctx->keep_unsupported || !ctx->root)
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: dtype %s is not supported by "
                            "layerdiff", what, ld_dtype_name(dtype));
    ld_status st = dataless_tensor(out, p->name ? p->name : "", dtype, shape, count, err);
    if (st == LD_OK)
        st = ld_graph_add_note(ctx->root, err, "%s has dtype %s, which layerdiff cannot "
                               "compute; kept without data", what, ld_dtype_name(dtype));
    if (st != LD_OK) {
        ld_tensor_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* Checks that exactly the right amount of data is present, in the right
 * place, before anything is allocated. */
static ld_status check_data_source(const Onnx__TensorProto *p, const char *what, ld_dtype dtype,
                                   int64_t count, size_t nbytes, typed_field *field,
                                   ld_error *err)
{
    size_t n_values;
    char shape_text[32];
    snprintf(shape_text, sizeof shape_text, "%" PRId64 " elements", count);
    ld_status st = populated_field(p, what, field, &n_values, err);
    if (st != LD_OK)
        return st;
    if (p->has_raw_data && *field != FIELD_NONE)
        return ld_error_set(err, LD_ERR_INPUT, "%s: data in both raw_data and %s", what,
                            typed_field_names[*field]);
    if (p->has_raw_data) {
        if (p->raw_data.len != nbytes)
            return ld_error_set(err, LD_ERR_INPUT, "%s: raw_data has %zu bytes, but %s of %s "
                                "need %zu", what, p->raw_data.len, shape_text,
                                ld_dtype_name(dtype), nbytes);
        return LD_OK;
    }
    if (*field == FIELD_NONE) {
        if (count != 0)
            return ld_error_set(err, LD_ERR_INPUT, "%s: no data (neither raw_data nor %s; "
                                "expected %s)", what, typed_field_names[field_for_dtype(dtype)],
                                shape_text);
        return LD_OK;
    }
    if (*field != field_for_dtype(dtype))
        return ld_error_set(err, LD_ERR_INPUT, "%s: %s data stored in %s (expected %s)", what,
                            ld_dtype_name(dtype), typed_field_names[*field],
                            typed_field_names[field_for_dtype(dtype)]);
    if ((uint64_t)n_values != (uint64_t)count)
        return ld_error_set(err, LD_ERR_INPUT, "%s: %s has %zu values, expected %s", what,
                            typed_field_names[*field], n_values, shape_text);
    return LD_OK;
}

ld_status ld_onnx_tensor_from_proto(ld_tensor **out, const Onnx__TensorProto *p,
                                    const char *what, const ld_onnx_ctx *ctx, ld_error *err)
{
    ld_dtype dtype;
    ld_shape shape;
    int64_t count;
    size_t nbytes;
    typed_field field = FIELD_NONE;
    ld_tensor *t = NULL;
    *out = NULL;

    ld_status st = read_dtype(p, what, &dtype, err);
    if (st == LD_OK)
        st = read_shape(p, what, &shape, &count, err);
    if (st != LD_OK)
        return st;
    if (p->segment)
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: segmented tensors (TensorProto."
                            "segment) are not supported", what);
    if (!ld_dtype_is_supported(dtype))
        return unsupported_tensor(out, p, what, dtype, &shape, count, ctx, err);
    st = ld_shape_nbytes(count, ld_dtype_size(dtype), &nbytes, what, err);
    if (st != LD_OK)
        return st;

    bool external = p->has_data_location &&
                    p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    st = external ? ld_onnx_check_external(p, what, ctx->base_dir, nbytes, err)
                  : check_data_source(p, what, dtype, count, nbytes, &field, err);
    if (st != LD_OK)
        return st;
    st = ld_tensor_create(&t, p->name ? p->name : "", dtype, &shape, err);
    if (st != LD_OK) {
        ld_error_prefix(err, "%s", what);
        return st;
    }
    if (external)
        st = ld_onnx_read_external(p, what, ctx->base_dir, t->data, nbytes, err);
    else if (nbytes > 0 && p->has_raw_data) /* an empty tensor's data may be NULL */
        copy_raw(t, p->raw_data.data);
    else if (nbytes > 0 && field != FIELD_NONE)
        st = copy_typed_field(t, p, field, what, err);
    if (st != LD_OK) {
        ld_tensor_destroy(t);
        return st;
    }
    *out = t;
    return LD_OK;
}

/* Linear element index of sparse entry k. indices is (NNZ) of linear
 * indices or (NNZ, rank) of coordinates, both int64. */
static ld_status sparse_position(const ld_tensor *indices, const ld_tensor *dense, int64_t k,
                                 const char *what, int64_t *pos, ld_error *err)
{
    const int64_t *idx = indices->data;
    int64_t linear = 0;
    if (indices->shape.rank == 1) {
        linear = idx[k];
    } else {
        for (int d = 0; d < dense->shape.rank; d++) {
            int64_t c = idx[k * dense->shape.rank + d];
            if (c < 0 || c >= dense->shape.dims[d])
                return ld_error_set(err, LD_ERR_INPUT, "%s: sparse index %" PRId64 " is out of "
                                    "bounds on axis %d", what, c, d);
            linear = linear * dense->shape.dims[d] + c;
        }
    }
    if (linear < 0 || linear >= dense->count)
        return ld_error_set(err, LD_ERR_INPUT, "%s: sparse index %" PRId64 " is out of bounds "
                            "(%" PRId64 " elements)", what, linear, dense->count);
    *pos = linear;
    return LD_OK;
}

ld_status ld_onnx_sparse_to_dense(ld_tensor **out, const Onnx__SparseTensorProto *p,
                                  const char *what, const ld_onnx_ctx *ctx, ld_error *err)
{
    ld_tensor *values = NULL, *indices = NULL, *dense = NULL;
    ld_onnx_ctx strict = *ctx;
    ld_shape shape;
    ld_status st;
    strict.keep_unsupported = false; /* a string sparse tensor cannot be densified */
    if (!p->values || !p->indices)
        return ld_error_set(err, LD_ERR_INPUT, "%s: sparse tensor without values or indices",
                            what);
    if (p->n_dims > LD_MAX_RANK)
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: rank %zu is above the supported %d",
                            what, p->n_dims, LD_MAX_RANK);
    st = ld_onnx_tensor_from_proto(&values, p->values, what, &strict, err);
    if (st == LD_OK)
        st = ld_onnx_tensor_from_proto(&indices, p->indices, what, &strict, err);
    if (st == LD_OK)
        st = ld_shape_set(&shape, (int)p->n_dims, p->dims, err);
    if (st == LD_OK)
        st = ld_tensor_create(&dense, values->name, values->dtype, &shape, err);
    if (st != LD_OK)
        goto out;
    int64_t nnz = values->count;
    bool coords = indices->shape.rank == 2 && indices->shape.dims[0] == nnz &&
                  indices->shape.dims[1] == shape.rank;
    bool linear = indices->shape.rank == 1 && indices->shape.dims[0] == nnz;
    if (values->shape.rank != 1 || indices->dtype != LD_DTYPE_INT64 || !(coords || linear)) {
        st = ld_error_set(err, LD_ERR_INPUT, "%s: sparse tensor needs 1-D values and int64 "
                          "indices of shape (NNZ) or (NNZ, rank)", what);
        goto out;
    }
    size_t width = ld_dtype_size(values->dtype);
    for (int64_t k = 0; k < nnz; k++) {
        int64_t pos = 0;
        st = sparse_position(indices, dense, k, what, &pos, err);
        if (st != LD_OK)
            goto out;
        memcpy((uint8_t *)dense->data + (size_t)pos * width,
               (const uint8_t *)values->data + (size_t)k * width, width);
    }
    *out = dense;
    dense = NULL;
out:
    ld_tensor_destroy(values);
    ld_tensor_destroy(indices);
    ld_tensor_destroy(dense);
    return st;
}

static ld_status read_elem_type(bool has, int32_t elem_type, const char *what, ld_dtype *out,
                                ld_error *err)
{
    *out = LD_DTYPE_UNDEFINED;
    if (!has || elem_type == LD_DTYPE_UNDEFINED)
        return LD_OK;
    return map_dtype(elem_type, what, "element type", out, err);
}

static ld_status read_declared_shape(ld_type_info *out, const Onnx__TensorShapeProto *shape,
                                     const char *what, ld_error *err)
{
    if (!shape)
        return LD_OK;
    if (shape->n_dim > (size_t)INT32_MAX)
        return ld_error_set(err, LD_ERR_INPUT, "%s: rank %zu is absurd", what, shape->n_dim);
    out->has_shape = true;
    out->dims = calloc(shape->n_dim ? shape->n_dim : 1, sizeof *out->dims);
    if (!out->dims)
        return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
    out->rank = (int)shape->n_dim;
    for (size_t i = 0; i < shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
        ld_dim *dim = &out->dims[i];
        dim->value = -1;
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            if (d->dim_value < 0)
                return ld_error_set(err, LD_ERR_INPUT, "%s: negative dimension %" PRId64
                                    " at axis %zu", what, d->dim_value, i);
            dim->value = d->dim_value;
        } else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   d->dim_param) {
            dim->param = strdup(d->dim_param);
            if (!dim->param)
                return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory", what);
        }
    }
    return LD_OK;
}

ld_status ld_onnx_type_from_proto(ld_type_info *out, const Onnx__TypeProto *p, const char *what,
                                  ld_error *err)
{
    ld_status st = LD_OK;
    memset(out, 0, sizeof *out);
    if (!p)
        return LD_OK;
    switch (p->value_case) {
    case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        out->kind = LD_TYPE_TENSOR;
        st = read_elem_type(p->tensor_type->has_elem_type, p->tensor_type->elem_type, what,
                            &out->dtype, err);
        if (st == LD_OK)
            st = read_declared_shape(out, p->tensor_type->shape, what, err);
        break;
    case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        out->kind = LD_TYPE_SPARSE_TENSOR;
        st = read_elem_type(p->sparse_tensor_type->has_elem_type,
                            p->sparse_tensor_type->elem_type, what, &out->dtype, err);
        if (st == LD_OK)
            st = read_declared_shape(out, p->sparse_tensor_type->shape, what, err);
        break;
    case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: out->kind = LD_TYPE_SEQUENCE; break;
    case ONNX__TYPE_PROTO__VALUE_MAP_TYPE: out->kind = LD_TYPE_MAP; break;
    case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: out->kind = LD_TYPE_OPTIONAL; break;
    default: break;
    }
    if (st != LD_OK)
        ld_type_info_clear(out);
    return st;
}

ld_status ld_onnx_type_from_tensor(ld_type_info *out, const ld_tensor *t, ld_error *err)
{
    memset(out, 0, sizeof *out);
    out->kind = LD_TYPE_TENSOR;
    out->dtype = t->dtype;
    out->has_shape = true;
    out->rank = t->shape.rank;
    out->dims = calloc(t->shape.rank ? (size_t)t->shape.rank : 1, sizeof *out->dims);
    if (!out->dims)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < t->shape.rank; i++)
        out->dims[i].value = t->shape.dims[i];
    return LD_OK;
}
