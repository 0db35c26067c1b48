/* The passthrough plugin without its mandatory run function: the loader
 * must refuse it. */
#define PLUGIN_NO_RUN
#define PLUGIN_NAME "missing_run"
#include "passthrough.c"
