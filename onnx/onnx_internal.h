/* layerdiff — private interfaces between the files of the ONNX loader.
 *
 * load_model.c   ModelProto / TensorProto files -> graph / tensor (public API)
 * load_graph.c   GraphProto -> ld_graph (values, nodes, scopes, then finalize)
 * load_attr.c    AttributeProto -> ld_attr (subgraphs recurse into load_graph.c)
 * load_tensor.c  TensorProto -> ld_tensor (raw, typed, sparse), TypeProto -> ld_type_info
 * file_io.c      whole-file reads and bounds-checked external data reads
 *
 * Error messages produced here name the tensor/node/attribute; the public
 * entry points prefix them with the model path. */
#ifndef LAYERDIFF_ONNX_INTERNAL_H
#define LAYERDIFF_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layerdiff/graph.h"
#include "layerdiff/tensor.h"
#include "onnx/onnx.pb-c.h"

typedef struct ld_onnx_ctx {
    const char *base_dir;  /* folder external data is read from; NULL: none allowed */
    ld_graph *root;        /* top-level graph: opset imports, notes; NULL for tensor files */
    bool keep_unsupported; /* string/complex tensors: keep without data and add a note
                              (models) instead of failing with LD_ERR_UNSUPPORTED (.pb files) */
} ld_onnx_ctx;

/* --- load_tensor.c --- */

/* Converts a TensorProto (raw_data, typed fields or external data) into a new
 * tensor named as in the proto. `what` names it in messages ("initializer
 * 'w'"). Return value: new, caller frees with ld_tensor_destroy. */
ld_status ld_onnx_tensor_from_proto(ld_tensor **out, const Onnx__TensorProto *proto,
                                    const char *what, const ld_onnx_ctx *ctx, ld_error *err);

/* Converts a SparseTensorProto into a new dense tensor (zeros elsewhere),
 * named after its values tensor. Return value: new. */
ld_status ld_onnx_sparse_to_dense(ld_tensor **out, const Onnx__SparseTensorProto *proto,
                                  const char *what, const ld_onnx_ctx *ctx, ld_error *err);

/* Fills *out (zeroed first) from a TypeProto; proto may be NULL (unknown
 * type). Fails on an unknown element type or a negative dim. On failure *out
 * holds nothing that needs freeing. */
ld_status ld_onnx_type_from_proto(ld_type_info *out, const Onnx__TypeProto *proto,
                                  const char *what, ld_error *err);

/* The declared type of a tensor: kind TENSOR, its dtype, its exact shape. */
ld_status ld_onnx_type_from_tensor(ld_type_info *out, const ld_tensor *t, ld_error *err);

/* --- load_attr.c --- */

/* Converts one attribute of node `node_name` in graph `scope` into *out
 * (zeroed first; on failure cleared again). Subgraphs get `scope` as parent. */
ld_status ld_onnx_attr_from_proto(ld_attr *out, const Onnx__AttributeProto *proto,
                                  ld_graph *scope, const char *node_name,
                                  const ld_onnx_ctx *ctx, ld_error *err);

/* --- load_graph.c --- */

/* Fills g (allocated and zeroed by the caller, parent already set, model
 * metadata left alone) from a GraphProto, then finalizes it (topological
 * order, consumers, indexes). On failure g may be partly filled: the caller
 * destroys it. */
ld_status ld_onnx_graph_fill(ld_graph *g, const Onnx__GraphProto *proto,
                             const ld_onnx_ctx *ctx, ld_error *err);

/* --- nesting.c --- */

/* Deepest message nesting accepted: 3 levels per subgraph (graph, node,
 * attribute), 2 per sequence/map/optional type level; real models stay far
 * below, and protobuf-c recurses once per level. */
#define LD_ONNX_MAX_NESTING 100

/* Fails (LD_ERR_INPUT, "... nested more than N deep ...") when the protobuf
 * encoding of a `root` message in data nests messages deeper than
 * LD_ONNX_MAX_NESTING. Malformed encodings pass: protobuf-c rejects them.
 * `kind` ("model", "tensor") names the file in the message. */
ld_status ld_onnx_check_nesting(const uint8_t *data, size_t size,
                                const ProtobufCMessageDescriptor *root, const char *kind,
                                ld_error *err);

/* --- file_io.c --- */

/* Reads a whole file into new malloc'd memory (size_t sizes, no 2 GB limit).
 * *data is non-NULL even for an empty file. Caller frees *data. */
ld_status ld_onnx_read_file(const char *path, uint8_t **data, size_t *size, ld_error *err);

/* New string: the folder part of path ("." when there is none). */
char *ld_onnx_dirname(const char *path);

/* Reads the external data of `proto` into dst, which holds exactly nbytes
 * (the size its dtype and shape need). Checks: location present, relative,
 * without '..' components; file exists; offset/length inside the file;
 * length == nbytes. `what` names the tensor in messages. */
ld_status ld_onnx_read_external(const Onnx__TensorProto *proto, const char *what,
                                const char *base_dir, void *dst, size_t nbytes,
                                ld_error *err);

/* The same checks without reading, so a bad reference is refused before
 * nbytes are allocated (a tiny model can claim terabytes). */
ld_status ld_onnx_check_external(const Onnx__TensorProto *proto, const char *what,
                                 const char *base_dir, size_t nbytes, ld_error *err);

#endif
