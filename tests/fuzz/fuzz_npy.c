/* layerdiff fuzz target: the .npy reader, from memory and from a file. The
 * two paths parse the header from different buffers (the whole input vs. a
 * bounded prefix read from disk), so they must agree: same status, and the
 * same dtype, shape and bytes when both succeed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/inputs.h"
#include "tests/fuzz/support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_tensor *a = NULL, *b = NULL;
    ld_error err_a, err_b;
    ld_error_clear(&err_a);
    ld_error_clear(&err_b);
    ld_status st_a = ld_npy_read_buffer(&a, data, size, "fuzz.npy", "x", &err_a);
    fuzz_check_status(st_a, &err_a, "ld_npy_read_buffer");
    const char *path = fuzz_write("x.npy", data, size);
    ld_status st_b = ld_npy_read_file(&b, path, "x", &err_b);
    fuzz_check_status(st_b, &err_b, "ld_npy_read_file");
    if ((st_a == LD_OK) != (st_b == LD_OK))
        fuzz_fail(st_a == LD_OK ? "the file reader refused what the buffer reader accepted"
                                : "the buffer reader refused what the file reader accepted",
                  st_a == LD_OK ? &err_b : &err_a);
    if (st_a == LD_OK) {
        if (a->dtype != b->dtype || !ld_shape_equal(&a->shape, &b->shape) ||
            a->nbytes != b->nbytes || strcmp(a->name, "x") != 0 ||
            (a->nbytes && memcmp(a->data, b->data, a->nbytes) != 0))
            fuzz_fail("the buffer and file readers disagree", NULL);
        if (a->nbytes != (size_t)a->count * ld_dtype_size(a->dtype))
            fuzz_fail("byte size disagrees with the shape", NULL);
    } else if (st_a != st_b) {
        fuzz_fail("the buffer and file readers fail with different statuses", &err_b);
    }
    ld_tensor_destroy(a);
    ld_tensor_destroy(b);
    return 0;
}
