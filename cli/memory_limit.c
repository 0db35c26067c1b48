/* layerdiff CLI — --max-memory (see memory_limit.h). */
#include "cli/memory_limit.h"

#include <stdlib.h>
#include <sys/stat.h>

#include "cli/options.h"
#include "layerdiff/inputs.h"
#include "layerdiff/memory.h"

ld_status ld_cli_memory_limit(const char *cmd, const char *text, uint64_t *out, ld_error *err)
{
    *out = ld_memory_default_limit();
    if (text) {
        ld_status st = ld_memory_parse_size(text, out, err);
        if (st != LD_OK)
            return ld_cli_usage_error(err, cmd, "--max-memory: %s", err->message);
    }
    ld_memory_limit_set(*out);
    return LD_OK;
}

ld_status ld_cli_memory_check_file(const char *path, uint64_t limit, ld_error *err)
{
    struct stat sb;
    if (!limit || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size <= limit)
        return LD_OK; /* the loader reports a missing file */
    char size[32], lim[32];
    return ld_error_set(err, LD_ERR_NOMEM,
                        "%s: the model file alone is %s, more than the memory limit %s "
                        "(--max-memory)",
                        path, ld_memory_format((uint64_t)sb.st_size, size, sizeof size),
                        ld_memory_format(limit, lim, sizeof lim));
}

ld_status ld_cli_memory_check_run(const ld_graph *g, const char *model_path,
                                  const char *shapes_text, const ld_shape *shapes,
                                  int backends, uint64_t limit, ld_error *err)
{
    ld_input_shape_arg *args = NULL;
    int n_args = 0;
    ld_shape *resolved = NULL;
    ld_memory_estimate est;
    ld_error ignored;
    ld_status st = LD_OK;
    if (!limit)
        return LD_OK;
    if (!shapes) {
        resolved = calloc((size_t)(g->n_inputs ? g->n_inputs : 1), sizeof *resolved);
        if (!resolved)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        if ((shapes_text && ld_inputs_parse_shapes(shapes_text, &args, &n_args, &ignored)) ||
            ld_inputs_resolve_shapes(g, args, n_args, NULL, resolved, &ignored))
            goto out; /* ld_inputs_make will say what is wrong */
        shapes = resolved;
    }
    for (int k = 0; k < g->n_inputs; k++) {
        int64_t count;
        if (ld_shape_count(&shapes[k], &count, "", &ignored) != LD_OK)
            goto out; /* dims overflowing int64: making the inputs says so, naming the input */
    }
    st = ld_memory_estimate_run(g, shapes, &est, err);
    est.backends = backends;
    if (st == LD_OK)
        st = ld_memory_check(g, &est, limit, err);
    if (st != LD_OK)
        ld_error_prefix(err, "%s", model_path);
out:
    ld_input_shape_args_free(args, n_args);
    free(resolved);
    return st;
}
