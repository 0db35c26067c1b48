/* layerdiff — element types.
 *
 * Values equal ONNX's TensorProto.DataType so the loader maps them 1:1.
 * STRING, COMPLEX64 and COMPLEX128 are named (models declare them) but
 * tensors of those types hold no data in layerdiff (ld_dtype_size() == 0). */
#ifndef LAYERDIFF_DTYPE_H
#define LAYERDIFF_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ld_dtype {
    LD_DTYPE_UNDEFINED = 0,
    LD_DTYPE_FLOAT32 = 1,
    LD_DTYPE_UINT8 = 2,
    LD_DTYPE_INT8 = 3,
    LD_DTYPE_UINT16 = 4,
    LD_DTYPE_INT16 = 5,
    LD_DTYPE_INT32 = 6,
    LD_DTYPE_INT64 = 7,
    LD_DTYPE_STRING = 8,
    LD_DTYPE_BOOL = 9,
    LD_DTYPE_FLOAT16 = 10,
    LD_DTYPE_FLOAT64 = 11,
    LD_DTYPE_UINT32 = 12,
    LD_DTYPE_UINT64 = 13,
    LD_DTYPE_COMPLEX64 = 14,
    LD_DTYPE_COMPLEX128 = 15,
    LD_DTYPE_BFLOAT16 = 16,
    LD_DTYPE_COUNT_ /* one past the largest value; not a type */
} ld_dtype;

/* IEEE binary16 and bfloat16 bit patterns, wrapped so they cannot be mixed
 * up with integers (ggml's ggml_bf16_t idea). */
typedef struct ld_fp16 { uint16_t bits; } ld_fp16;
typedef struct ld_bf16 { uint16_t bits; } ld_bf16;

/* Bytes per element; 0 for UNDEFINED, STRING, COMPLEX* and out-of-range values. */
size_t ld_dtype_size(ld_dtype dtype);

/* Lower-case name as numpy/h5py spell it: "float32", "float16", "bfloat16",
 * "int64", "bool", ... ("undefined" for unknown values). Static string. */
const char *ld_dtype_name(ld_dtype dtype);

/* Parses a name produced by ld_dtype_name, plus the aliases "fp32", "fp16",
 * "bf16", "fp64", "half", "float", "double". Returns false if unknown. */
bool ld_dtype_from_name(const char *name, ld_dtype *out);

/* True for a value in the enum that is not UNDEFINED or COUNT_. */
bool ld_dtype_is_known(ld_dtype dtype);
/* True when layerdiff can hold data of this type (size > 0). */
bool ld_dtype_is_supported(ld_dtype dtype);
/* float16, bfloat16, float32, float64. */
bool ld_dtype_is_float(ld_dtype dtype);
bool ld_dtype_is_signed_int(ld_dtype dtype);
bool ld_dtype_is_unsigned_int(ld_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
