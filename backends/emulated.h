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

#endif
