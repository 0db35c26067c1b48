/* layerdiff — private string -> index hash map (see core/strmap.h). */
#include "core/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct strmap_slot {
    const char *key; /* borrowed; NULL marks an empty slot */
    uint64_t hash;
    int value;
} strmap_slot;

struct ld_strmap {
    strmap_slot *slots;
    size_t capacity; /* power of two */
    size_t size;
};

/* FNV-1a: short, good enough spread for tensor names, no dependencies. */
static uint64_t hash_string(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h;
}

/* Slot holding key, or the empty slot where it would go. The table is never
 * full (load factor <= 1/2), so the probe always terminates. */
static strmap_slot *find_slot(strmap_slot *slots, size_t capacity, const char *key,
                              uint64_t hash)
{
    size_t mask = capacity - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        strmap_slot *slot = &slots[i];
        if (!slot->key || (slot->hash == hash && strcmp(slot->key, key) == 0))
            return slot;
    }
}

static ld_status grow(ld_strmap *map, size_t capacity, ld_error *err)
{
    strmap_slot *slots = calloc(capacity, sizeof *slots);
    if (!slots)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory growing a name index to %zu slots",
                            capacity);
    for (size_t i = 0; i < map->capacity; i++) {
        const strmap_slot *old = &map->slots[i];
        if (old->key)
            *find_slot(slots, capacity, old->key, old->hash) = *old;
    }
    free(map->slots);
    map->slots = slots;
    map->capacity = capacity;
    return LD_OK;
}

ld_status ld_strmap_create(ld_strmap **out, size_t expected, ld_error *err)
{
    ld_strmap *map = calloc(1, sizeof *map);
    if (!map)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory creating a name index");
    size_t capacity = 16;
    while (capacity < SIZE_MAX / 4 && capacity < expected * 2)
        capacity *= 2;
    ld_status st = grow(map, capacity, err);
    if (st != LD_OK) {
        free(map);
        return st;
    }
    *out = map;
    return LD_OK;
}

void ld_strmap_destroy(ld_strmap *map)
{
    if (!map)
        return;
    free(map->slots);
    free(map);
}

int ld_strmap_get(const ld_strmap *map, const char *key)
{
    if (!map || !key)
        return -1;
    const strmap_slot *slot = find_slot(map->slots, map->capacity, key, hash_string(key));
    return slot->key ? slot->value : -1;
}

ld_status ld_strmap_put(ld_strmap *map, const char *key, int value, ld_error *err)
{
    /* Keep the load factor at or below 1/2 so probes stay short. */
    if ((map->size + 1) * 2 > map->capacity) {
        if (map->capacity > SIZE_MAX / 2 / sizeof(strmap_slot))
            return ld_error_set(err, LD_ERR_NOMEM, "name index too large");
        ld_status st = grow(map, map->capacity * 2, err);
        if (st != LD_OK)
            return st;
    }
    uint64_t hash = hash_string(key);
    strmap_slot *slot = find_slot(map->slots, map->capacity, key, hash);
    if (!slot->key) {
        slot->key = key;
        slot->hash = hash;
        map->size++;
    }
    slot->value = value;
    return LD_OK;
}

size_t ld_strmap_size(const ld_strmap *map)
{
    return map ? map->size : 0;
}
