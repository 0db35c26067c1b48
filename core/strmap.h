/* layerdiff — private string -> index hash map (not a public header).
 *
 * Open addressing with linear probing; the graph uses it to intern value and
 * node names so lookups stay O(1) on 100,000-node graphs. Keys are BORROWED:
 * the caller keeps each key string alive and unchanged while it is in the
 * map (the graph's value and node names live as long as the graph). Values
 * are non-negative ints; -1 means "absent". */
#ifndef LAYERDIFF_CORE_STRMAP_H
#define LAYERDIFF_CORE_STRMAP_H

#include <stddef.h>

#include "layerdiff/error.h"

typedef struct ld_strmap ld_strmap;

/* New empty map sized for about `expected` keys (0 is fine). Return value:
 * new, free with ld_strmap_destroy. */
ld_status ld_strmap_create(ld_strmap **out, size_t expected, ld_error *err);

/* Frees the table (not the borrowed keys). NULL is a no-op. */
void ld_strmap_destroy(ld_strmap *map);

/* Value stored under key, or -1. map may be NULL (then always -1). */
int ld_strmap_get(const ld_strmap *map, const char *key);

/* Inserts key -> value (value >= 0), or overwrites the value when the key is
 * already present. key is borrowed (see above). Grows the table as needed. */
ld_status ld_strmap_put(ld_strmap *map, const char *key, int value, ld_error *err);

/* Number of keys stored. */
size_t ld_strmap_size(const ld_strmap *map);

#endif
