/* layerdiff — checks, before anything runs, that a node's inputs which the ONNX
 * operator types with one type variable (Conv's X, W and B share T) do have one
 * type (private to backends/).
 *
 * The executor widens float16/bfloat16 inputs to float32 for most kernels, so
 * without this a Conv with a float16 weight and a float32 bias (what torch.onnx
 * writes when a module was .half()'d but its bias was not) would run silently,
 * where ONNX Runtime and TensorRT refuse the model. */
#ifndef LAYERDIFF_BACKENDS_TYPE_CHECK_H
#define LAYERDIFF_BACKENDS_TYPE_CHECK_H

#include "layerdiff/error.h"
#include "layerdiff/graph.h"

/* Fails with LD_ERR_INPUT when two inputs of node that the operator's schema
 * gives one type have different float types, one of them float16 or bfloat16
 * (the mismatch the executor's widening would hide; other mismatches reach the
 * kernels, which refuse them). Known types are those fixed before a run:
 * initializers' and graph inputs' (inputs computed by other nodes are not
 * checked here). The message names the node, the inputs and their types. Ops
 * outside the default domain and ops without such a rule pass. */
ld_status ld_check_node_input_types(const ld_graph *g, const ld_node *node, ld_error *err);

#endif
