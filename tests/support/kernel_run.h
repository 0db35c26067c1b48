/* layerdiff tests — run one ONNX node on the reference backend.
 *
 * A test describes the node's inputs (graph inputs or initializers, any
 * dtype) and attributes, kernel_run() builds the one-node model in memory,
 * runs it with the given thread count and clones the graph outputs. Used by
 * tests/test_kernels_{conv,pool,matmul}.c; register ob_teardown as the test's
 * cmocka teardown (the model lives in the onnx_builder arena). */
#ifndef LAYERDIFF_TESTS_KERNEL_RUN_H
#define LAYERDIFF_TESTS_KERNEL_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/tensor.h"

typedef struct kr_input {
    const char *name;  /* NULL: an omitted optional input */
    ld_dtype dtype;
    int rank;
    int64_t dims[LD_MAX_RANK];
    const void *data;
    bool initializer;
} kr_input;

enum { KR_END = 0, KR_INT, KR_FLOAT, KR_STRING, KR_INTS };

typedef struct kr_attr {
    int kind;
    const char *name;
    int64_t i;
    float f;
    const char *s;
    int n;
    int64_t ints[12];
} kr_attr;

#define KR_MAX_OUT 4

typedef struct kr_result {
    ld_status st;
    ld_error err;
    ld_tensor *t[KR_MAX_OUT]; /* graph outputs in order; owned, free with kr_free */
} kr_result;

/* Runs op (opset `opset`, node name "node0") with outputs `outs`
 * (comma-separated) on `threads` threads. attrs ends with kind KR_END (or is
 * NULL). */
void kr_run(int opset, const char *op, const kr_attr *attrs, const kr_input *ins, int n_in,
            const char *outs, int threads, kr_result *r);
void kr_free(kr_result *r);
/* Fails the test with the backend's message unless the run succeeded. */
void kr_expect_ok(const kr_result *r);
/* The run failed with `want`; the message names the node and contains substring. */
void kr_expect_fail(const kr_result *r, ld_status want, const char *substring);

/* Like kr_expect_fail, and the message starts with "node 'node0' (<op>): ". */
void kr_expect_fail_op(const kr_result *r, ld_status want, const char *op, const char *substring);
/* t has exactly this shape. */
void kr_expect_shape(const ld_tensor *t, int rank, const int64_t *dims);
/* Exact comparison through double (integers up to 2^53, floats exactly, NaN
 * matches NaN). */
void kr_expect_values(const ld_tensor *t, const double *want, int64_t n);
/* t is int64 and equals want. */
void kr_expect_i64(const ld_tensor *t, const int64_t *want, int64_t n);

/* Deterministic uniform values in [-1, 1). */
double kr_uniform(void);

#endif
