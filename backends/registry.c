/* layerdiff — the table of built-in backends and the plugin loader. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "backends/emulated.h"
#include "backends/reference.h"
#include "layerdiff/backend.h"

static const ld_backend_vtable *const builtin_backends[] = {
    &ld_backend_reference,
    &ld_backend_emulated,
};

const ld_backend_vtable *const *ld_backend_list(int *n)
{
    *n = (int)(sizeof builtin_backends / sizeof builtin_backends[0]);
    return builtin_backends;
}

const ld_backend_vtable *ld_backend_find(const char *name)
{
    for (size_t i = 0; i < sizeof builtin_backends / sizeof builtin_backends[0]; i++)
        if (strcmp(builtin_backends[i]->name, name) == 0)
            return builtin_backends[i];
    return NULL;
}

bool ld_backend_is_stepwise(const ld_backend_vtable *vt)
{
    return vt && vt->abi_version >= 3 && vt->begin && vt->step && vt->value && vt->finish_step &&
           vt->end && vt->run_node_on;
}

/* Bytes of the table a plugin of ABI `version` provides (0: unknown version). */
static size_t table_size(int version)
{
    switch (version) {
    case 2:
        return offsetof(ld_backend_vtable, begin);
    case 3:
        return sizeof(ld_backend_vtable);
    default:
        return 0;
    }
}

/* Full-size copies of older plugins' tables (a process loads a handful). */
#define MAX_OLD_PLUGINS 16
static ld_backend_vtable old_tables[MAX_OLD_PLUGINS];
static int n_old_tables;

/* vt as a full-size table: itself for the current ABI, else a copy of the
 * part it has with the rest NULL. NULL when no copy slot is left. */
static const ld_backend_vtable *full_table(const ld_backend_vtable *vt)
{
    size_t have = table_size(vt->abi_version);
    if (have == sizeof *vt)
        return vt;
    if (n_old_tables == MAX_OLD_PLUGINS)
        return NULL;
    ld_backend_vtable *copy = &old_tables[n_old_tables++];
    memset(copy, 0, sizeof *copy);
    memcpy(copy, vt, have);
    return copy;
}

ld_status ld_backend_load_plugin(const char *path, const ld_backend_vtable **out, ld_error *err)
{
    /* A bare file name would make dlopen search the library path; plugins are
     * files the user names, so insist on a path. */
    if (!strchr(path, '/'))
        return ld_error_set(err, LD_ERR_USAGE, "backend plugin '%s': give a path (e.g. ./%s)",
                            path, path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return ld_error_set(err, LD_ERR_INPUT, "backend plugin '%s': cannot load: %s", path,
                            dlerror());
    typedef const ld_backend_vtable *(*plugin_fn)(void);
    plugin_fn entry;
    void *sym = dlsym(lib, LD_BACKEND_PLUGIN_SYMBOL);
    memcpy(&entry, &sym, sizeof entry); /* object -> function pointer, as POSIX allows */
    const ld_backend_vtable *vt = entry ? entry() : NULL;
    const char *problem = NULL;
    if (!entry)
        problem = "does not export " LD_BACKEND_PLUGIN_SYMBOL "()";
    else if (!vt)
        problem = LD_BACKEND_PLUGIN_SYMBOL "() returned NULL";
    else if (vt->abi_version < LD_BACKEND_ABI_MIN_VERSION ||
             vt->abi_version > LD_BACKEND_ABI_VERSION)
        problem = "was built for another layerdiff backend ABI version";
    else if (!(vt = full_table(vt)))
        problem = "is one old-ABI plugin too many (at most 16 per process)";
    else if (!vt->name || !*vt->name || !vt->create || !vt->prepare || !vt->run || !vt->destroy)
        problem = "vtable lacks a name or a mandatory function (create, prepare, run, destroy)";
    else if (ld_backend_find(vt->name))
        problem = "uses the name of a built-in backend";
    if (problem) {
        if (vt == &old_tables[n_old_tables > 0 ? n_old_tables - 1 : 0] && n_old_tables > 0)
            n_old_tables--; /* the copy just made is not needed */
        dlclose(lib);
        return ld_error_set(err, LD_ERR_INPUT, "backend plugin '%s': %s", path, problem);
    }
    *out = vt; /* the library stays loaded for the process lifetime */
    return LD_OK;
}
