/* layerdiff — the emulated backend: the shared executor and kernels with
 * hooks that round where a GPU engine built with --fp16 / --bf16 / TF32
 * rounds (docs/numerics.md, "Emulated engine").
 *
 * Per float layer of the precision plan: before compute, its float inputs
 * (weights included) are rounded to the layer's precision; after compute,
 * its float outputs are rounded to the layer's output type and the rounding
 * is counted. Rounded weights and constants are cached per node across runs.
 *
 * Inside the run, a layer's rounded float outputs stay float32 tensors
 * holding values exact in the output type, and the backend remembers that
 * per value: the next layer then needs no widening and no rounding, and
 * kernels that only move data never see mixed float types. Observers see
 * each tensor in the type the layer outputs (float16 / bfloat16 / float32):
 * the run's observer is wrapped and converts, exactly, at the moment of the
 * event. Graph outputs leave in the type the model declares.
 *
 * This file is the vtable; emulated_internal.h says where the rest is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/blas.h"
#include "backends/emulated.h"
#include "backends/emulated_internal.h"
#include "backends/engine_internal.h"
#include "backends/exec_plan.h"

static ld_status emu_layer_numerics(void *user, const ld_node *node, ld_layer_numerics *out,
                                    ld_error *err)
{
    (void)err;
    ld_emulated_backend *b = user;
    ld_precision_plan_numerics(b->plan, &b->cfg, node->index, out);
    return LD_OK;
}

/* --- vtable ---------------------------------------------------------------------------- */

static void free_nodes(ld_emulated_backend *b)
{
    if (!b->nodes)
        return;
    for (int i = 0; i < b->graph->n_nodes; i++) {
        ld_emu_cached_input *c = b->nodes[i].cache;
        for (int j = 0; c && j < b->graph->nodes[i].n_inputs; j++)
            ld_tensor_destroy(c[j].tensor);
        free(c);
    }
    free(b->nodes);
    b->nodes = NULL;
}

static void release_prepared(ld_emulated_backend *b)
{
    /* the exec first: its kernels' state may hold work derived from the
       nodes' cached inputs (ld_kernel_ctx.kept_inputs), keyed by address */
    ld_exec_destroy(b->exec);
    b->exec = NULL;
    free_nodes(b);
    ld_precision_plan_destroy(b->plan);
    b->plan = NULL;
    free(b->values);
    b->values = NULL;
    free(b->show_buf);
    b->show_buf = NULL;
    b->show_cap = 0;
    free(b->wrap);
    b->wrap = NULL;
    free(b->fused.tally);
    b->fused = (ld_emu_fused){0};
    free(b->fuse);
    b->fuse = NULL;
}

static ld_status emulated_create(void **state, const ld_backend_config *cfg, ld_error *err)
{
    if (cfg && cfg->n_options > 0)
        return ld_error_set(err, LD_ERR_USAGE, "backend 'emulated' takes no options (got '%s'); "
                            "its precision comes from the engine flags (--fp16, ...)",
                            cfg->options[0]);
    ld_emulated_backend *b = calloc(1, sizeof *b);
    if (!b)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    b->threads = cfg ? cfg->threads : 0;
    b->fuse_allowed = cfg && cfg->observe_outputs_only;
    b->shown_value = -1;
    ld_status st = LD_OK;
    if (cfg && cfg->engine)
        st = ld_engine_config_copy(&b->cfg, cfg->engine, err);
    else
        ld_engine_config_init(&b->cfg);
    if (st == LD_OK)
        st = ld_engine_config_check(&b->cfg, err);
    if (st != LD_OK) {
        ld_engine_config_clear(&b->cfg);
        free(b);
        return st;
    }
    *state = b;
    return LD_OK;
}

static ld_status prepare_nodes(ld_emulated_backend *b, ld_error *err)
{
    const ld_graph *g = b->graph;
    int max_outputs = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_outputs > max_outputs)
            max_outputs = g->nodes[i].n_outputs;
    b->nodes = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *b->nodes);
    b->values = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *b->values);
    b->fused.tally = calloc((size_t)max_outputs, sizeof *b->fused.tally);
    b->fuse = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof *b->fuse);
    if (!b->fuse)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    b->fused.max_outputs = max_outputs;
    if (!b->nodes || !b->values || !b->fused.tally)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const ld_node *node = &g->nodes[i];
        const ld_kernel *k = ld_kernel_find(node->domain, node->op_type, node->opset);
        b->nodes[i].kernel_flags = k ? k->flags : 0; /* no kernel: ld_exec_create says so */
        b->nodes[i].cache = calloc((size_t)node->n_inputs + 1, sizeof *b->nodes[i].cache);
        if (!b->nodes[i].cache)
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    return LD_OK;
}

static ld_status emulated_prepare(void *state, const ld_graph *g, const ld_shape *input_shapes,
                                  ld_error *err)
{
    ld_emulated_backend *b = state;
    release_prepared(b);
    b->graph = g;
    ld_status st = ld_precision_plan_build(g, &b->cfg, &b->plan, err);
    if (st == LD_OK)
        st = prepare_nodes(b, err);
    if (st == LD_OK && !(b->wrap = calloc(1, sizeof *b->wrap)))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (st == LD_OK) {
        ld_exec_hooks hooks = {b, emu_layer_numerics, ld_emu_before_compute,
                               ld_emu_after_compute, ld_emu_fuse_accept, ld_emu_fuse_before,
                               ld_emu_fuse_after};
        ld_exec_config cfg = {.threads = b->threads, .hooks = &hooks, .fuse = b->fuse_allowed};
        st = ld_exec_create(&b->exec, g, &cfg, err);
    }
    /* shapes are inferred at run time from the actual inputs; from the given
       ones, the run's memory is planned and faulted in now (exec_plan.h) */
    if (st == LD_OK)
        st = ld_exec_plan_prepare(b->exec, input_shapes, err);
    if (st != LD_OK)
        release_prepared(b);
    return st;
}

static void reset_values(ld_emulated_backend *b)
{
    for (int v = 0; v < b->graph->n_values; v++)
        b->values[v] = (ld_emu_value){.exact = -1, .show_as = LD_DTYPE_UNDEFINED};
}

static ld_status emulated_run(void *state, const ld_tensor *const *inputs,
                              ld_tensor_observer observer, void *user, ld_error *err)
{
    ld_emulated_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': run before prepare");
    reset_values(b);
    ld_emu_observe_wrap wrap;
    b->outputs_only_run = b->fuse_allowed;
    ld_status st = ld_exec_run(b->exec, inputs, ld_emu_wrap_observer(&wrap, b, observer, user),
                               &wrap, err);
    b->outputs_only_run = false;
    return st;
}

/* --- stepwise execution ---------------------------------------------------------------- */

static ld_status emulated_begin(void *state, const ld_tensor *const *inputs,
                                ld_tensor_observer observer, void *user, ld_error *err)
{
    ld_emulated_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': begin before prepare");
    reset_values(b);
    return ld_exec_begin(b->exec, inputs, ld_emu_wrap_observer(b->wrap, b, observer, user), b->wrap, err);
}

static ld_status emulated_step(void *state, int node_index, ld_tensor_observer observer,
                               void *user, ld_error *err)
{
    ld_emulated_backend *b = state;
    return ld_exec_step(b->exec, node_index, ld_emu_wrap_observer(b->wrap, b, observer, user), b->wrap, err);
}

static const ld_tensor *emulated_value(void *state, int value_index)
{
    ld_emulated_backend *b = state;
    return ld_exec_value(b->exec, value_index);
}

static void emulated_finish_step(void *state, int node_index)
{
    ld_emulated_backend *b = state;
    ld_exec_finish_step(b->exec, node_index);
}

static void emulated_end(void *state)
{
    ld_emulated_backend *b = state;
    if (b->exec)
        ld_exec_end(b->exec);
}

static ld_status emulated_run_node_on(void *state, int node_index,
                                      const ld_tensor *const *inputs,
                                      ld_tensor_observer observer, void *user, ld_error *err)
{
    ld_emulated_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': run before prepare");
    if (node_index < 0 || node_index >= b->graph->n_nodes)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': no node %d", node_index);
    return ld_emu_run_isolated(b, node_index, inputs, observer, user, err);
}

static void emulated_destroy(void *state)
{
    ld_emulated_backend *b = state;
    if (!b)
        return;
    release_prepared(b);
    ld_engine_config_clear(&b->cfg);
    free(b);
}

static ld_precision emulated_node_precision(void *state, int node_index)
{
    ld_emulated_backend *b = state;
    if (!b->plan || node_index < 0 || node_index >= b->plan->n_layers)
        return LD_PRECISION_FP32;
    return b->plan->layers[node_index].precision;
}

static ld_status emulated_profile(void *state, ld_backend_profile *out, ld_error *err)
{
    ld_emulated_backend *b = state;
    if (!b->exec)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend 'emulated': profile before prepare");
    const char *fused = ld_exec_fusion_note(b->exec);
    if (fused)
        snprintf(b->description, sizeof b->description, "%s; %s", ld_blas_describe(), fused);
    *out = (ld_backend_profile){b->graph->n_nodes, ld_exec_profile(b->exec),
                                fused ? b->description : ld_blas_describe()};
    return LD_OK;
}

const ld_precision_plan *ld_emulated_plan(void *state)
{
    ld_emulated_backend *b = state;
    return b ? b->plan : NULL;
}

void ld_emulated_set_fused_rounding(void *state, bool on)
{
    ld_emulated_backend *b = state;
    b->unfused = !on;
}

const ld_backend_vtable ld_backend_emulated = {
    .abi_version = LD_BACKEND_ABI_VERSION,
    .name = "emulated",
    .description = "reduced-precision engine emulation (--fp16, --bf16, TF32, per-layer "
                   "precision controls), bit-exact on the CPU",
    .create = emulated_create,
    .prepare = emulated_prepare,
    .run = emulated_run,
    .destroy = emulated_destroy,
    .node_precision = emulated_node_precision,
    .profile = emulated_profile,
    .begin = emulated_begin,
    .step = emulated_step,
    .value = emulated_value,
    .finish_step = emulated_finish_step,
    .end = emulated_end,
    .run_node_on = emulated_run_node_on,
};
