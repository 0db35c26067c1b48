/* layerdiff — the emulated reduced-precision backend (private to backends/;
 * see backends/emulated.c and docs/numerics.md, "Emulated engine"). Its
 * ld_backend_config.engine is a const ld_engine_config * (NULL: defaults),
 * copied at create. */
#ifndef LAYERDIFF_BACKENDS_EMULATED_H
#define LAYERDIFF_BACKENDS_EMULATED_H

#include "layerdiff/backend.h"
#include "layerdiff/engine.h"

extern const ld_backend_vtable ld_backend_emulated;

/* The plan a prepared emulated backend runs (state as from its create), or
 * NULL before prepare. Borrowed. */
const ld_precision_plan *ld_emulated_plan(void *state);

/* Whether kernels may round their outputs themselves (ld_kernel_ctx's
 * round_block; on by default). Off, every output is rounded by the pass
 * after compute: the same values and counters, which tests check. */
void ld_emulated_set_fused_rounding(void *state, bool on);

#endif
