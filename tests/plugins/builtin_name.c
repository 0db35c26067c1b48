/* The passthrough plugin calling itself "reference": the loader must not let
 * a plugin shadow a built-in backend. */
#define PLUGIN_NAME "reference"
#include "passthrough.c"
