/* layerdiff — the table of built-in backends and the plugin loader. */
#include <dlfcn.h>
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
    else if (vt->abi_version != LD_BACKEND_ABI_VERSION)
        problem = "was built for another layerdiff backend ABI version";
    else if (!vt->name || !*vt->name || !vt->create || !vt->prepare || !vt->run || !vt->destroy)
        problem = "vtable lacks a name or a mandatory function (create, prepare, run, destroy)";
    else if (ld_backend_find(vt->name))
        problem = "uses the name of a built-in backend";
    if (problem) {
        dlclose(lib);
        return ld_error_set(err, LD_ERR_INPUT, "backend plugin '%s': %s", path, problem);
    }
    *out = vt; /* the library stays loaded for the process lifetime */
    return LD_OK;
}
