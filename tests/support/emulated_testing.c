/* layerdiff tests — scaffolding shared by the emulated backend's tests
 * (emulated_testing.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "backends/emulated.h"
#include "backends/emulated_count_internal.h"
#include "tests/support/emulated_testing.h"

static ld_status keep(void *user, const ld_tensor_event *e, ld_error *err)
{
    emt_capture *c = user;
    assert_true(c->n < (int)(sizeof c->ev / sizeof c->ev[0]));
    emt_event *ev = &c->ev[c->n++];
    snprintf(ev->value, sizeof ev->value, "%s", e->graph->values[e->value].name);
    snprintf(ev->node, sizeof ev->node, "%s", e->node ? e->node->name : "");
    ev->precision = e->precision;
    ev->counters = e->counters;
    ev->t = NULL;
    if (!e->tensor->data) /* not materialised (observe_outputs_only) */
        return LD_OK;
    return ld_tensor_clone(&ev->t, e->tensor, NULL, err);
}

void emt_capture_free(emt_capture *c)
{
    for (int i = 0; i < c->n; i++)
        ld_tensor_destroy(c->ev[i].t);
    c->n = 0;
}

const emt_event *emt_find(const emt_capture *c, const char *value)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->ev[i].value, value) == 0)
            return &c->ev[i];
    fail_msg("no event for '%s'", value);
    return NULL;
}

void emt_run(const ld_graph *g, const ld_engine_config *cfg, ld_tensor *const *inputs,
             emt_capture *cap, int runs, int threads, bool fused)
{
    emt_run_observing(g, cfg, inputs, cap, runs, threads, fused, false);
}

void emt_run_observing(const ld_graph *g, const ld_engine_config *cfg,
                       ld_tensor *const *inputs, emt_capture *cap, int runs, int threads,
                       bool fused, bool outputs_only)
{
    const ld_backend_vtable *vt = ld_backend_find("emulated");
    assert_non_null(vt);
    assert_true(g->n_inputs <= 8);
    ld_backend_config bc = {.threads = threads, .engine = cfg,
                            .observe_outputs_only = outputs_only};
    void *state = NULL;
    ld_error err;
    ld_shape shapes[8];
    for (int i = 0; i < g->n_inputs; i++)
        shapes[i] = inputs[i]->shape;
    if (vt->create(&state, &bc, &err) != LD_OK || vt->prepare(state, g, shapes, &err) != LD_OK)
        fail_msg("emulated backend: %s", err.message);
    ld_emulated_set_fused_rounding(state, fused);
    for (int r = 0; r < runs; r++) {
        emt_capture_free(cap);
        if (vt->run(state, (const ld_tensor *const *)inputs, keep, cap, &err) != LD_OK)
            fail_msg("emulated run: %s", err.message);
    }
    vt->destroy(state);
}

uint32_t emt_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

void emt_expect_tally(const ld_emu_tally *got, const ld_emu_tally *want)
{
    assert_int_equal(got->overflows, want->overflows);
    assert_int_equal(got->underflows, want->underflows);
    assert_int_equal(got->subnormals, want->subnormals);
    assert_int_equal(got->src_infs, want->src_infs);
    assert_int_equal(got->src_nans, want->src_nans);
}

int emt_run_every_level(const char *name, const struct CMUnitTest *tests, size_t count)
{
    /* the values and counters must not depend on the level */
    int failed = 0;
    for (int level = LD_EMU_LEVEL_PORTABLE; level < LD_EMU_LEVEL_COUNT_; level++) {
        const char *level_name = ld_emu_level_name((ld_emu_level)level);
        if (!ld_emu_force_level((ld_emu_level)level)) {
            printf("# counting level %s: this CPU cannot run it, skipped\n", level_name);
            continue;
        }
        char group[128];
        printf("# counting level %s\n", level_name);
        snprintf(group, sizeof group, "%s, counting level %s", name, level_name);
        failed += _cmocka_run_group_tests(group, tests, count, NULL, NULL);
    }
    ld_emu_force_level(LD_EMU_LEVEL_AUTO);
    return failed;
}
