/* layerdiff — the fp32 reference backend: the executor with no rounding
 * hooks. float32 computes in float32, float64 in double, float16/bfloat16 in
 * float32 rounded back per op (as ONNX Runtime's CPU provider does). It is the
 * ground truth every comparison rests on. */
#include <stdio.h>
#include <stdlib.h>

#include "backends/blas.h"
#include "backends/exec.h"
#include "backends/exec_plan.h"
#include "backends/reference.h"

typedef struct reference_backend {
    int threads;
    bool fuse;     /* the config's observe_outputs_only */
    char description[320]; /* the profile's */
    ld_exec *exec; /* owned; set by prepare */
    const ld_graph *exec_graph; /* borrowed; the graph exec runs */
} reference_backend;

static ld_status reference_create(void **state, const ld_backend_config *cfg, ld_error *err)
{
    reference_backend *b = calloc(1, sizeof *b);
    if (!b)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    b->threads = cfg ? cfg->threads : 0;
    b->fuse = cfg && cfg->observe_outputs_only;
    if (cfg && cfg->n_options > 0) {
        free(b);
        return ld_error_set(err, LD_ERR_USAGE, "backend 'reference' takes no options (got '%s')",
                            cfg->options[0]);
    }
    *state = b;
    return LD_OK;
}

static ld_status reference_prepare(void *state, const ld_graph *g, const ld_shape *input_shapes,
                                   ld_error *err)
{
    reference_backend *b = state;
    ld_exec_destroy(b->exec);
    b->exec = NULL;
    ld_exec_config cfg = {.threads = b->threads, .fuse = b->fuse};
    b->exec_graph = g;
    ld_status st = ld_exec_create(&b->exec, g, &cfg, err);
    /* shapes are inferred at run time from the actual inputs; from the given
       ones, the run's memory is planned and faulted in now (exec_plan.h) */
    if (st == LD_OK)
        st = ld_exec_plan_prepare(b->exec, input_shapes, err);
    return st;
}

static ld_status reference_run(void *state, const ld_tensor *const *inputs,
                               ld_tensor_observer observer, void *user, ld_error *err)
{
    reference_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'reference': run before prepare");
    return ld_exec_run(b->exec, inputs, observer, user, err);
}

/* --- stepwise execution: straight to the executor ---------------------------------- */

static ld_status reference_begin(void *state, const ld_tensor *const *inputs,
                                 ld_tensor_observer observer, void *user, ld_error *err)
{
    reference_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'reference': begin before prepare");
    return ld_exec_begin(b->exec, inputs, observer, user, err);
}

static ld_status reference_step(void *state, int node_index, ld_tensor_observer observer,
                                void *user, ld_error *err)
{
    reference_backend *b = state;
    return ld_exec_step(b->exec, node_index, observer, user, err);
}

static const ld_tensor *reference_value(void *state, int value_index)
{
    reference_backend *b = state;
    return ld_exec_value(b->exec, value_index);
}

static void reference_finish_step(void *state, int node_index)
{
    reference_backend *b = state;
    ld_exec_finish_step(b->exec, node_index);
}

static void reference_end(void *state)
{
    reference_backend *b = state;
    if (b->exec)
        ld_exec_end(b->exec);
}

static ld_status reference_run_node_on(void *state, int node_index,
                                       const ld_tensor *const *inputs,
                                       ld_tensor_observer observer, void *user, ld_error *err)
{
    reference_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'reference': run before prepare");
    return ld_exec_run_node_on(b->exec, node_index, inputs, observer, user, err);
}

static void reference_destroy(void *state)
{
    reference_backend *b = state;
    if (!b)
        return;
    ld_exec_destroy(b->exec);
    free(b);
}

static ld_precision reference_node_precision(void *state, int node_index)
{
    (void)state;
    (void)node_index;
    return LD_PRECISION_FP32;
}

static ld_status reference_profile(void *state, ld_backend_profile *out, ld_error *err)
{
    reference_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'reference': profile before prepare");
    const char *fused = ld_exec_fusion_note(b->exec);
    if (fused)
        snprintf(b->description, sizeof b->description, "%s; %s", ld_blas_describe(), fused);
    *out = (ld_backend_profile){b->exec_graph->n_nodes, ld_exec_profile(b->exec),
                                fused ? b->description : ld_blas_describe()};
    return LD_OK;
}

const ld_backend_vtable ld_backend_reference = {
    .abi_version = LD_BACKEND_ABI_VERSION,
    .name = "reference",
    .description = "fp32 reference interpreter (float16/bfloat16 computed in fp32, rounded per op)",
    .create = reference_create,
    .prepare = reference_prepare,
    .run = reference_run,
    .destroy = reference_destroy,
    .node_precision = reference_node_precision,
    .profile = reference_profile,
    .begin = reference_begin,
    .step = reference_step,
    .value = reference_value,
    .finish_step = reference_finish_step,
    .end = reference_end,
    .run_node_on = reference_run_node_on,
};
