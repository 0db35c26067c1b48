/* A plugin whose entry point returns NULL: the loader must refuse it. */
#include <stddef.h>

#include "layerdiff/backend.h"

const ld_backend_vtable *layerdiff_backend_plugin(void);

const ld_backend_vtable *layerdiff_backend_plugin(void)
{
    return NULL;
}
