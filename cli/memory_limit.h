/* layerdiff CLI — --max-memory for `run` and `conformance` (docs/reliability.md):
 * the limit's value, and the checks made before anything runs. The executors
 * enforce the same limit on shapes known only at run time, on what all of
 * them hold together (the shared budget of layerdiff/memory.h). */
#ifndef LAYERDIFF_CLI_MEMORY_LIMIT_H
#define LAYERDIFF_CLI_MEMORY_LIMIT_H

#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/memory.h"
#include "layerdiff/tensor.h"

/* Help text of the option, shared by the commands. */
#define LD_CLI_MAX_MEMORY_HELP \
    "limit on the tensors of all backends together (512M, 4G, 1.5GiB; default 80% of RAM)"

/* The limit: `text` (--max-memory, NULL when not given) parsed, else 80% of
 * the physical RAM (0 = none when the system does not say). Also sets it
 * for the executor (ld_memory_limit_set). Usage errors name cmd. */
ld_status ld_cli_memory_limit(const char *cmd, const char *text, uint64_t *out, ld_error *err);

/* Before loading: fails when the model file alone is larger than the limit. */
ld_status ld_cli_memory_check_file(const char *path, uint64_t limit, ld_error *err);

/* Before inputs are made: estimates the run of g (ld_memory_estimate_run)
 * at the input shapes, `shapes` when given (one per input), else those that
 * `shapes_text` (--input-shapes) resolves to; fails, naming the model, when
 * it needs more than limit with `backends` executors holding layer outputs
 * at once (2 for a lockstep comparison: the limit is the whole run's).
 * Shapes that do not resolve are not an error here: making the inputs
 * reports them. */
ld_status ld_cli_memory_check_run(const ld_graph *g, const char *model_path,
                                  const char *shapes_text, const ld_shape *shapes,
                                  int backends, uint64_t limit, ld_error *err);

#endif
