/* layerdiff — private helpers of the emulated engine's planner (backends/). */
#ifndef LAYERDIFF_BACKENDS_ENGINE_INTERNAL_H
#define LAYERDIFF_BACKENDS_ENGINE_INTERNAL_H

#include <stdbool.h>

#include "layerdiff/engine.h"

/* What the planner knows about every value before anything runs. */
typedef struct ld_static_info {
    ld_dtype *types;  /* per value: the declared dtype, else one inferred from the producer
                         (Cast's `to`, Shape -> int64, comparisons -> bool, most ops -> their
                         first float input's type); UNDEFINED when unknown */
    bool *dynamic;    /* per value: depends on the values (not only the shapes) of the graph
                         inputs; initializers, Constants and what is computed from them and
                         from Shape/Size outputs is not dynamic */
} ld_static_info;

/* Fills *info for g (one pass in topological order). Return value: arrays
 * new, free with ld_static_info_free. */
ld_status ld_static_info_compute(const ld_graph *g, ld_static_info *info, ld_error *err);
void ld_static_info_free(ld_static_info *info);

/* float32, float16, bfloat16: the types the engine rounds. */
bool ld_engine_is_rounded_type(ld_dtype d);

/* True for the default ONNX domain ("" or "ai.onnx"). */
bool ld_engine_default_domain(const char *domain);

/* The Cast node's `to` type, UNDEFINED for anything that is not a Cast. */
ld_dtype ld_engine_cast_to(const ld_node *node);

#endif
