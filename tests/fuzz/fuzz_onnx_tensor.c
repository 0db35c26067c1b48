/* layerdiff fuzz target: the TensorProto (.pb) loader, from memory and from a
 * file (where external data is allowed: the sandbox holds "weights.bin").
 * Whatever loads must be self-consistent (byte count = dtype size x element
 * count) and the file loader must accept what the buffer loader accepted,
 * with the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/onnx.h"
#include "tests/fuzz/support.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    uint8_t weights[4096];
    for (size_t i = 0; i < sizeof weights; i++)
        weights[i] = (uint8_t)(i * 37u + 11u);
    fuzz_write("weights.bin", weights, sizeof weights);
    return 0;
}

static void check_tensor(const ld_tensor *t)
{
    int64_t count = 1;
    for (int d = 0; d < t->shape.rank; d++)
        count *= t->shape.dims[d]; /* the loader checked for overflow */
    if (!t->name || count != t->count || t->nbytes != (size_t)count * ld_dtype_size(t->dtype))
        fuzz_fail("loaded tensor's count or byte size disagrees with its shape", NULL);
    double sum = 0.0;
    for (int64_t i = 0; i < t->count && i < 4096; i++)
        sum += ld_tensor_get_double(t, i); /* reads every byte it claims to have */
    (void)sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_tensor *from_buffer = NULL, *from_file = NULL;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_onnx_load_tensor_buffer(&from_buffer, data, size, "fuzz.pb", &err);
    fuzz_check_status(st, &err, "ld_onnx_load_tensor_buffer");
    if (st != LD_OK && from_buffer)
        fuzz_fail("failed load left a tensor behind", &err);
    if (from_buffer)
        check_tensor(from_buffer);

    const char *path = fuzz_write("input_0.pb", data, size);
    ld_status file_st = ld_onnx_load_tensor_file(&from_file, path, &err);
    fuzz_check_status(file_st, &err, "ld_onnx_load_tensor_file");
    if (from_file)
        check_tensor(from_file);
    if (st == LD_OK) {
        if (file_st != LD_OK)
            fuzz_fail("the file loader refused what the buffer loader accepted", &err);
        if (from_file->dtype != from_buffer->dtype ||
            !ld_shape_equal(&from_file->shape, &from_buffer->shape) ||
            from_file->nbytes != from_buffer->nbytes ||
            (from_file->nbytes && from_file->data && from_buffer->data &&
             memcmp(from_file->data, from_buffer->data, from_file->nbytes) != 0))
            fuzz_fail("the file and buffer loaders disagree", NULL);
    }
    ld_tensor_destroy(from_buffer);
    ld_tensor_destroy(from_file);
    return 0;
}
