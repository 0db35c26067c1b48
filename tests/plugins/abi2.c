/* The passthrough plugin as it was built for backend ABI 2 (a shorter
 * table, without the stepwise slots): the loader must still accept it and
 * must not read past its table (the plugin is built with AddressSanitizer,
 * whose redzones around the table catch such a read). */
#define PLUGIN_V2_TABLE
#define PLUGIN_NAME "passthrough_v2"
#include "passthrough.c"
