/* layerdiff — built-in backend vtables (private to backends/). */
#ifndef LAYERDIFF_BACKENDS_REFERENCE_H
#define LAYERDIFF_BACKENDS_REFERENCE_H

#include "layerdiff/backend.h"

extern const ld_backend_vtable ld_backend_reference;

#endif
