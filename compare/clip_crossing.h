/* layerdiff — elements of a Clip output that landed on the other side of a
 * bound than in the reference (private to compare/; docs/report-schema.md,
 * records[i].clip_crossings).
 *
 * A small error before a Clip turns into a large one after it when it moves an
 * element across a bound: the reference clamps it to the bound and the test
 * run lets it through a little inside (or the other way round). Such an element
 * is exactly one where one side sits at a bound and the other does not. */
#ifndef LAYERDIFF_COMPARE_CLIP_CROSSING_H
#define LAYERDIFF_COMPARE_CLIP_CROSSING_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/tensor.h"

/* True for the op types whose outputs get a crossing count (Clip). */
bool ld_clip_crossing_applies(const char *op_type);

/* The number of elements i where exactly one of ref[i], test[i] sits at a bound.
 * The bounds are not known to the comparison (they are the node's inputs, often
 * initializers that dumps do not hold); they are read off the tensors: the lower
 * bound is the smallest value when both sides have the same smallest value (ref's
 * converted to test's dtype first), the upper bound likewise with the largest. A
 * bound only one side reaches is not recognised, so elements it clamps in that run
 * alone are not counted. NaNs never sit at a bound. Floating-point tensors of the
 * same element count only; anything else gives 0. */
int64_t ld_clip_crossings(const ld_tensor *ref, const ld_tensor *test);

#endif
