/* layerdiff — ONNX model and tensor loading (protobuf-c -> IR). */
#ifndef LAYERDIFF_ONNX_H
#define LAYERDIFF_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Loads an ONNX model file into a new graph (caller frees with
 * ld_graph_destroy). External data is read relative to the model's folder
 * with bounds checks; a location that escapes that folder is an error.
 * Nodes are sorted topologically when the file does not list them so; cycles,
 * dangling inputs, duplicate value names are errors. Every error message
 * starts with the model path and names what is wrong. */
ld_status ld_onnx_load_file(ld_graph **out, const char *path, ld_error *err);

/* Same from a buffer already in memory. base_dir is where external data is
 * looked up (NULL: external data is an error); display_name is used in
 * messages (NULL: "<memory>"). The buffer is borrowed. */
ld_status ld_onnx_load_buffer(ld_graph **out, const uint8_t *data, size_t size,
                              const char *base_dir, const char *display_name,
                              ld_error *err);

/* Loads one serialized TensorProto (.pb files of the ONNX test data) into a
 * new tensor, named as in the file. Caller frees with ld_tensor_destroy.
 * String and complex tensors, and sequence/optional .pb files, fail with
 * LD_ERR_UNSUPPORTED (or LD_ERR_INPUT when they do not parse as a tensor).
 * External data is read relative to the file's folder (from a buffer: error). */
ld_status ld_onnx_load_tensor_file(ld_tensor **out, const char *path, ld_error *err);
ld_status ld_onnx_load_tensor_buffer(ld_tensor **out, const uint8_t *data, size_t size,
                                     const char *display_name, ld_error *err);

#ifdef __cplusplus
}
#endif
#endif
