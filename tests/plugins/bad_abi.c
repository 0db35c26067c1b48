/* The passthrough plugin built for another backend ABI version: the loader
 * must refuse it. */
#define PLUGIN_ABI_VERSION (LD_BACKEND_ABI_VERSION + 100)
#define PLUGIN_NAME "bad_abi"
#include "passthrough.c"
