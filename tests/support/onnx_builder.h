/* layerdiff tests — build ONNX models in memory with protobuf-c structs, so
 * a test can state exactly the (possibly malformed) model it needs, pack it
 * and load it. Used by test_onnx*.c; any test may use it.
 *
 * Memory: everything ob_* allocates (structs, strings, packed bytes) lives in
 * one arena freed by ob_teardown, which also removes the ob_make_tmpdir
 * directory. Register ob_teardown as the cmocka teardown of every test that
 * uses the builders:  cmocka_unit_test_teardown(test_x, ob_teardown).
 * Repeated fields the builders create hold at most OB_CAP entries; a test
 * that needs more allocates the array itself (see the 100,000-node chain). */
#ifndef LAYERDIFF_TESTS_ONNX_BUILDER_H
#define LAYERDIFF_TESTS_ONNX_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "layerdiff/onnx.h"
#include "onnx/onnx.pb-c.h"

#define OB_CAP 32
/* Appends item to a builder-made repeated field (arr, n). */
#define OB_PUSH(arr, n, item) do { assert_true((n) < OB_CAP); (arr)[(n)++] = (item); } while (0)

/* Arena memory: zeroed, never NULL, freed by ob_teardown. */
void *ob_mem(size_t size);
char *ob_str(const char *s);
void *ob_ptrs(void); /* an array of OB_CAP pointers */
int ob_teardown(void **state);

/* A fresh mkdtemp directory (the same one until ob_teardown removes it). */
const char *ob_make_tmpdir(void);
const char *ob_tmpdir(void);
char *ob_tmp_path(const char *name); /* "<tmpdir>/<name>" */
void ob_write_file(const char *path, const void *data, size_t size);

/* Model: IR version 8, opset_import {"": 17}, an empty graph "main". */
Onnx__ModelProto *ob_model(void);
void ob_opset(Onnx__ModelProto *m, const char *domain, int64_t version);
Onnx__GraphProto *ob_graph(const char *name);
/* ins and outs are comma-separated names; "" entries are omitted optional
 * inputs/outputs ("a,,b"); an empty string means none. */
Onnx__NodeProto *ob_node(Onnx__GraphProto *g, const char *op, const char *name,
                         const char *ins, const char *outs);
/* A tensor type; rank -1 gives no shape; a dim of -1 becomes the symbol "N". */
Onnx__ValueInfoProto *ob_value_info(const char *name, int dtype, int rank,
                                    const int64_t *dims);
void ob_input(Onnx__GraphProto *g, const char *name, int dtype, int rank, const int64_t *dims);
void ob_output(Onnx__GraphProto *g, const char *name, int dtype);
/* A TensorProto header without data; dims are copied. */
Onnx__TensorProto *ob_tensor(const char *name, int dtype, int rank, const int64_t *dims);
void ob_set_raw(Onnx__TensorProto *t, const void *data, size_t size);
/* Adds a float32 (n) initializer holding 0, 1, 2, ... */
Onnx__TensorProto *ob_float_init(Onnx__GraphProto *g, const char *name, int64_t n);
/* type 0 leaves the type unset (IR v1 style). */
Onnx__AttributeProto *ob_attr(Onnx__NodeProto *n, const char *name, int type);
/* Adds an external_data entry and marks the tensor EXTERNAL. */
void ob_external(Onnx__TensorProto *t, const char *key, const char *value);
uint8_t *ob_pack(const Onnx__ModelProto *m, size_t *size);

/* x (N, 3) float32 -> Relu (unnamed) -> y */
Onnx__ModelProto *ob_relu_model(void);

/* Pack and load from memory as "test.onnx" (no folder: external data fails). */
ld_status ob_load(const Onnx__ModelProto *m, ld_graph **g, ld_error *err);
/* Same, failing the test with the loader's message when it fails. */
ld_graph *ob_load_ok(const Onnx__ModelProto *m);
/* Checks status, that the message starts with prefix, contains substring and
 * is one line. Prints it when LD_TEST_VERBOSE is set. */
void ob_expect_message(ld_status st, ld_status want, const ld_error *err, const char *prefix,
                       const char *substring);
/* ob_load must fail with `want` and "test.onnx: ...substring...". */
void ob_expect_error(const Onnx__ModelProto *m, ld_status want, const char *substring);

#endif
