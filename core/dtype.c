/* layerdiff — element type table (see include/layerdiff/dtype.h). */
#include "layerdiff/dtype.h"

#include <string.h>

/* One row per ONNX TensorProto.DataType value, indexed by the value. */
static const struct {
    const char *name;
    size_t size;
} dtype_table[LD_DTYPE_COUNT_] = {
    [LD_DTYPE_UNDEFINED] = {"undefined", 0},
    [LD_DTYPE_FLOAT32] = {"float32", 4},
    [LD_DTYPE_UINT8] = {"uint8", 1},
    [LD_DTYPE_INT8] = {"int8", 1},
    [LD_DTYPE_UINT16] = {"uint16", 2},
    [LD_DTYPE_INT16] = {"int16", 2},
    [LD_DTYPE_INT32] = {"int32", 4},
    [LD_DTYPE_INT64] = {"int64", 8},
    [LD_DTYPE_STRING] = {"string", 0},
    [LD_DTYPE_BOOL] = {"bool", 1},
    [LD_DTYPE_FLOAT16] = {"float16", 2},
    [LD_DTYPE_FLOAT64] = {"float64", 8},
    [LD_DTYPE_UINT32] = {"uint32", 4},
    [LD_DTYPE_UINT64] = {"uint64", 8},
    [LD_DTYPE_COMPLEX64] = {"complex64", 0},
    [LD_DTYPE_COMPLEX128] = {"complex128", 0},
    [LD_DTYPE_BFLOAT16] = {"bfloat16", 2},
};

static const struct {
    const char *alias;
    ld_dtype dtype;
} dtype_aliases[] = {
    {"fp32", LD_DTYPE_FLOAT32}, {"float", LD_DTYPE_FLOAT32},
    {"fp16", LD_DTYPE_FLOAT16}, {"half", LD_DTYPE_FLOAT16},
    {"bf16", LD_DTYPE_BFLOAT16}, {"fp64", LD_DTYPE_FLOAT64},
    {"double", LD_DTYPE_FLOAT64},
};

bool ld_dtype_is_known(ld_dtype dtype)
{
    return dtype > LD_DTYPE_UNDEFINED && dtype < LD_DTYPE_COUNT_;
}

size_t ld_dtype_size(ld_dtype dtype)
{
    return ld_dtype_is_known(dtype) ? dtype_table[dtype].size : 0;
}

bool ld_dtype_is_supported(ld_dtype dtype)
{
    return ld_dtype_size(dtype) > 0;
}

const char *ld_dtype_name(ld_dtype dtype)
{
    return ld_dtype_is_known(dtype) ? dtype_table[dtype].name : "undefined";
}

bool ld_dtype_from_name(const char *name, ld_dtype *out)
{
    if (!name)
        return false;
    for (int d = LD_DTYPE_UNDEFINED + 1; d < LD_DTYPE_COUNT_; d++) {
        if (strcmp(name, dtype_table[d].name) == 0) {
            *out = (ld_dtype)d;
            return true;
        }
    }
    for (size_t i = 0; i < sizeof dtype_aliases / sizeof dtype_aliases[0]; i++) {
        if (strcmp(name, dtype_aliases[i].alias) == 0) {
            *out = dtype_aliases[i].dtype;
            return true;
        }
    }
    return false;
}

bool ld_dtype_is_float(ld_dtype dtype)
{
    return dtype == LD_DTYPE_FLOAT32 || dtype == LD_DTYPE_FLOAT16 ||
           dtype == LD_DTYPE_BFLOAT16 || dtype == LD_DTYPE_FLOAT64;
}

bool ld_dtype_is_signed_int(ld_dtype dtype)
{
    return dtype == LD_DTYPE_INT8 || dtype == LD_DTYPE_INT16 ||
           dtype == LD_DTYPE_INT32 || dtype == LD_DTYPE_INT64;
}

bool ld_dtype_is_unsigned_int(ld_dtype dtype)
{
    return dtype == LD_DTYPE_UINT8 || dtype == LD_DTYPE_UINT16 ||
           dtype == LD_DTYPE_UINT32 || dtype == LD_DTYPE_UINT64;
}
