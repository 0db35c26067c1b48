/* layerdiff CLI — the live comparison of `layerdiff run` (see run.h).
 *
 * Lockstep: both backends execute node by node through their stepwise
 * slots. For node i the reference steps first; then, with isolation, the
 * test backend computes node i alone on the reference's input tensors (the
 * error that layer introduces by itself) into a small holding buffer; then
 * the test backend steps, and each output it reports is compared at once
 * with the reference's tensor, which is still alive, beside the isolated
 * one. Then both free what died at node i. No tensor outlives the node that
 * last reads it in either backend, so memory is the two live sets plus one
 * node's isolated outputs, whatever the model's depth.
 *
 * Fallback, for backends without the stepwise slots (plugins): the reference
 * runs first into a temporary HDF5 file in $TMPDIR, unlinked as soon as it is
 * open for reading; the test run then reads each reference tensor back by
 * name as the test backend produces its own. No isolation there. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/run.h"

/* State of one comparing run. */
typedef struct cmp_state {
    ld_run_compare *c;
    const ld_node *node;         /* the node being compared (lockstep) */
    ld_tensor **hold;            /* per output index: that node's isolated output, or NULL */
    void **hold_buf;             /* their buffers, reused from node to node */
    size_t *hold_cap;
    int max_outputs;
    const ld_tensor **ref_in;    /* the reference's inputs of the node */
    int iso_run;                 /* dump handle of the isolated run, -1 */
    ld_dump *ref_dump;           /* fallback: the reference run, read back */
} cmp_state;

static bool is_compared(const ld_run_compare *c, int value)
{
    return !c->outputs_only || c->graph->values[value].is_graph_output;
}

static bool node_compared(const ld_run_compare *c, const ld_node *node)
{
    for (int j = 0; j < node->n_outputs; j++)
        if (node->outputs[j] >= 0 && is_compared(c, node->outputs[j]))
            return true;
    return false;
}

static ld_status interrupted_error(const ld_run_compare *c, ld_error *err)
{
    return ld_error_set(err, LD_ERR_INTERRUPTED, "interrupted by %s",
                        *c->interrupted == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* Hands one (reference, test) pair to the session. */
static ld_status add_pair(cmp_state *cs, const ld_tensor_event *ev, const ld_tensor *ref,
                          const ld_tensor *isolated, ld_error *err)
{
    ld_run_compare *c = cs->c;
    const ld_value *v = &c->graph->values[ev->value];
    const ld_node *node = ev->node;
    ld_compare_item item = {
        .name = v->name, .node = node ? node->name : "", .op_type = node ? node->op_type : "",
        .topo_index = node ? node->index : -1, .output_index = node ? ev->output_index : 0,
        .precision = node ? ev->precision : LD_PRECISION_FP32, .counters = ev->counters,
        .n_inputs = node ? node->n_inputs : 0,
        .inputs = node ? ld_run_node_inputs(&c->test->sink, node) : NULL,
        .is_graph_output = v->is_graph_output, .ref = ref, .test = ev->tensor,
        .isolated = isolated,
    };
    double t0 = ld_run_now();
    ld_status st = ld_compare_session_add(c->session, &item, err);
    c->compare_seconds += ld_run_now() - t0;
    return st;
}

/* --- lockstep ------------------------------------------------------------------------ */

/* The test backend's tensors (graph inputs and node outputs): dumped and
 * summarised by its sink, then compared with the reference's live tensor. */
static ld_status on_test_tensor(void *user, const ld_tensor_event *ev, ld_error *err)
{
    cmp_state *cs = user;
    ld_run_compare *c = cs->c;
    ld_status st = ld_run_observe(&c->test->sink, ev, err);
    if (st != LD_OK || !is_compared(c, ev->value))
        return st;
    const ld_tensor *ref = c->ref->vt->value(c->ref->state, ev->value);
    if (!ref)
        return ld_error_set(err, LD_ERR_INPUT, "backend '%s' holds no tensor '%s' to compare "
                            "with", c->ref->vt->name, c->graph->values[ev->value].name);
    const ld_tensor *isolated = ev->node ? cs->hold[ev->output_index] : NULL;
    return add_pair(cs, ev, ref, isolated, err);
}

/* A copy of t in hold slot j (its buffer reused from node to node). */
static ld_status hold_copy(cmp_state *cs, int j, const ld_tensor *t, ld_error *err)
{
    if (t->nbytes > cs->hold_cap[j]) {
        void *grown = realloc(cs->hold_buf[j], t->nbytes);
        if (!grown)
            return ld_error_set(err, LD_ERR_NOMEM, "tensor '%s': cannot hold %zu bytes",
                                t->name, t->nbytes);
        cs->hold_buf[j] = grown;
        cs->hold_cap[j] = t->nbytes;
    }
    if (t->nbytes)
        memcpy(cs->hold_buf[j], t->data, t->nbytes);
    return ld_tensor_wrap(&cs->hold[j], t->name, t->dtype, &t->shape, cs->hold_buf[j], err);
}

static void release_holds(cmp_state *cs)
{
    for (int j = 0; j < cs->max_outputs; j++) {
        ld_tensor_destroy(cs->hold[j]); /* the wrapper only: the buffer stays */
        cs->hold[j] = NULL;
    }
}

/* The test layer's outputs on the reference's inputs: kept for the pairs,
 * and dumped into the isolated run. */
static ld_status on_isolated_tensor(void *user, const ld_tensor_event *ev, ld_error *err)
{
    cmp_state *cs = user;
    ld_run_compare *c = cs->c;
    const ld_node *node = cs->node;
    if (ev->node != node || ev->output_index < 0 || ev->output_index >= node->n_outputs ||
        node->outputs[ev->output_index] != ev->value || !ev->tensor ||
        (!ev->tensor->data && ev->tensor->nbytes) || cs->hold[ev->output_index])
        return ld_error_set(err, LD_ERR_INPUT, "backend '%s' reported an isolated output that "
                            "node '%s' does not produce", c->test->vt->name, node->name);
    if (!is_compared(c, ev->value))
        return LD_OK;
    ld_status st = hold_copy(cs, ev->output_index, ev->tensor, err);
    if (st == LD_OK && c->dump)
        st = ld_run_write_tensor(&c->iso_sink, cs->iso_run, ev, err);
    return st;
}

/* Test node i on the reference's inputs (initializers and omitted inputs:
 * the test backend's own). */
static ld_status isolate_node(cmp_state *cs, const ld_node *node, ld_error *err)
{
    ld_run_compare *c = cs->c;
    const ld_graph *g = c->graph;
    for (int j = 0; j < node->n_inputs; j++) {
        int v = node->inputs[j];
        cs->ref_in[j] = NULL;
        if (v < 0 || g->values[v].kind == LD_VALUE_INITIALIZER)
            continue;
        cs->ref_in[j] = c->ref->vt->value(c->ref->state, v);
        if (!cs->ref_in[j])
            return ld_error_set(err, LD_ERR_INPUT, "backend '%s' holds no tensor '%s' for node "
                                "'%s'", c->ref->vt->name, g->values[v].name, node->name);
    }
    double t0 = ld_run_now();
    ld_status st = c->test->vt->run_node_on(c->test->state, node->index, cs->ref_in,
                                            on_isolated_tensor, cs, err);
    double spent = ld_run_now() - t0;
    c->isolated_layers++;
    c->isolate_seconds += spent;
    c->test->seconds += spent;
    if (st != LD_OK)
        ld_error_prefix(err, "backend '%s', isolated", c->test->vt->name);
    return st;
}

static ld_status timed_step(ld_run_side *side, int i, ld_tensor_observer observer, void *user,
                            ld_error *err)
{
    double t0 = ld_run_now();
    ld_status st = side->vt->step(side->state, i, observer, user, err);
    side->seconds += ld_run_now() - t0;
    if (st != LD_OK && st != LD_ERR_INTERRUPTED && err->message[0])
        ld_error_prefix(err, "backend '%s'", side->vt->name);
    return st;
}

/* One node: reference step, isolated test layer, test step (compares). */
static ld_status compare_node(cmp_state *cs, int i, ld_error *err)
{
    ld_run_compare *c = cs->c;
    const ld_node *node = &c->graph->nodes[i];
    cs->node = node;
    ld_status st = timed_step(c->ref, i, ld_run_observe, &c->ref->sink, err);
    bool ref_stepped = true, test_stepped = false;
    if (st == LD_OK && c->isolate && node_compared(c, node))
        st = isolate_node(cs, node, err);
    if (st == LD_OK) {
        test_stepped = true;
        st = timed_step(c->test, i, on_test_tensor, cs, err);
    }
    release_holds(cs);
    if (ref_stepped)
        c->ref->vt->finish_step(c->ref->state, i);
    if (test_stepped)
        c->test->vt->finish_step(c->test->state, i);
    if (st == LD_OK && c->interrupted && *c->interrupted)
        st = interrupted_error(c, err);
    return st;
}

static ld_status begin_side(ld_run_side *side, const ld_tensor *const *inputs,
                            ld_tensor_observer observer, void *user, ld_error *err)
{
    double t0 = ld_run_now();
    ld_status st = side->vt->begin(side->state, inputs, observer, user, err);
    side->seconds += ld_run_now() - t0;
    if (st != LD_OK && err->message[0])
        ld_error_prefix(err, "backend '%s'", side->vt->name);
    return st;
}

static ld_status run_lockstep(cmp_state *cs, ld_error *err)
{
    ld_run_compare *c = cs->c;
    ld_status st = begin_side(c->ref, c->inputs, ld_run_observe, &c->ref->sink, err);
    if (st != LD_OK)
        return st;
    st = begin_side(c->test, c->inputs, on_test_tensor, cs, err);
    if (st != LD_OK) {
        c->ref->vt->end(c->ref->state);
        return st;
    }
    for (int i = 0; st == LD_OK && i < c->graph->n_nodes; i++)
        st = compare_node(cs, i, err);
    c->ref->vt->end(c->ref->state);
    c->test->vt->end(c->test->state);
    return st;
}

/* --- fallback: the reference through a temporary dump ---------------------------------- */

/* The reference's tensors: summarised (and dumped) by its sink, and written
 * into the temporary dump (tmp_sink) when compared. */
static ld_status on_ref_tensor(void *user, const ld_tensor_event *ev, ld_error *err)
{
    ld_run_sink *sinks = user; /* [0] the reference's, [1] the temporary dump's */
    ld_status st = ld_run_observe(&sinks[0], ev, err);
    if (st != LD_OK || !ev->node)
        return st;
    if (sinks[1].outputs_only && !sinks[0].graph->values[ev->value].is_graph_output)
        return LD_OK;
    return ld_run_write_tensor(&sinks[1], -1, ev, err);
}

/* The test backend's tensors, compared with the reference's read back. */
static ld_status on_test_tensor_via_dump(void *user, const ld_tensor_event *ev, ld_error *err)
{
    cmp_state *cs = user;
    ld_run_compare *c = cs->c;
    ld_status st = ld_run_observe(&c->test->sink, ev, err);
    if (st != LD_OK || !is_compared(c, ev->value))
        return st;
    if (!ev->node) /* a graph input: the same tensor on both sides */
        return add_pair(cs, ev, ev->tensor, NULL, err);
    const char *name = c->graph->values[ev->value].name;
    int k = ld_dump_find_tensor(cs->ref_dump, 0, name);
    if (k < 0)
        return ld_error_set(err, LD_ERR_INPUT, "backend '%s' did not produce tensor '%s'",
                            c->ref->vt->name, name);
    ld_tensor *ref = NULL;
    st = ld_dump_read_tensor(cs->ref_dump, 0, k, &ref, err);
    if (st == LD_OK)
        st = add_pair(cs, ev, ref, NULL, err);
    ld_tensor_destroy(ref);
    return st;
}

static ld_status run_side(ld_run_side *side, const ld_tensor *const *inputs,
                          ld_tensor_observer observer, void *user, ld_error *err)
{
    double t0 = ld_run_now();
    ld_status st = side->vt->run(side->state, inputs, observer, user, err);
    side->seconds += ld_run_now() - t0;
    if (st != LD_OK && st != LD_ERR_INTERRUPTED) {
        if (!err->message[0])
            ld_error_set(err, st, "backend '%s' failed (%s)", side->vt->name,
                         ld_status_name(st));
        else
            ld_error_prefix(err, "backend '%s'", side->vt->name);
    }
    return st;
}

/* Runs the reference into <dir>/reference.h5 and opens it for reading. */
static ld_status reference_to_dump(cmp_state *cs, const char *path, ld_error *err)
{
    ld_run_compare *c = cs->c;
    ld_run_sink sinks[2] = {c->ref->sink, {0}};
    ld_dump_writer *w = NULL;
    ld_dump_file_info info = {.model_path = "", .input_seed = -1};
    ld_dump_run_info run = {.name = "reference", .backend = c->ref->vt->name};
    ld_status st = ld_run_sink_init(&sinks[1], c->graph, c->ref->vt->name, err);
    sinks[1].outputs_only = c->outputs_only;
    if (st == LD_OK)
        st = ld_dump_writer_open(&w, path, &info, NULL, err);
    if (st == LD_OK)
        st = ld_dump_writer_begin_run(w, &run, err);
    sinks[1].dump = w;
    if (st == LD_OK)
        st = run_side(c->ref, c->inputs, on_ref_tensor, sinks, err);
    c->ref->sink = sinks[0]; /* its counts */
    if (st == LD_OK)
        st = ld_run_sink_finish(&c->ref->sink, err);
    if (st == LD_OK)
        st = ld_dump_writer_commit(w, err);
    else
        ld_dump_writer_abort(w);
    ld_run_sink_free(&sinks[1]);
    if (st == LD_OK)
        st = ld_dump_open(&cs->ref_dump, path, err);
    return st;
}

static ld_status run_via_dump(cmp_state *cs, ld_error *err)
{
    ld_run_compare *c = cs->c;
    const char *tmpdir = getenv("TMPDIR");
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/layerdiff-ref.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(dir))
        return ld_error_set(err, LD_ERR_IO, "cannot create a temporary folder in '%s' for the "
                            "reference run: %s", tmpdir && *tmpdir ? tmpdir : "/tmp",
                            strerror(errno));
    snprintf(path, sizeof path, "%s/reference.h5", dir);
    ld_status st = reference_to_dump(cs, path, err);
    unlink(path); /* open for reading (or failed): nothing stays on disk */
    rmdir(dir);
    if (st == LD_OK)
        st = run_side(c->test, c->inputs, on_test_tensor_via_dump, cs, err);
    ld_dump_close(cs->ref_dump);
    cs->ref_dump = NULL;
    return st;
}

/* --- entry ------------------------------------------------------------------------------ */

static ld_status open_isolated_run(ld_run_compare *c, cmp_state *cs, ld_error *err)
{
    char name[512];
    snprintf(name, sizeof name, "%s.isolated", c->test->run_name);
    ld_dump_run_info run = {.name = name, .backend = c->test->vt->name,
                            .config = c->test->config, .isolated_of = c->test->run_name};
    return ld_dump_writer_open_run(c->dump, &run, &cs->iso_run, err);
}

/* Sinks, dump runs and the holding buffers. */
static ld_status set_up(ld_run_compare *c, cmp_state *cs, ld_error *err)
{
    const ld_graph *g = c->graph;
    ld_run_side *sides[2] = {c->ref, c->test};
    ld_status st = LD_OK;
    for (int k = 0; k < 2 && st == LD_OK; k++) {
        ld_run_sink *s = &sides[k]->sink;
        st = ld_run_sink_init(s, g, sides[k]->run_name, err);
        s->dump = c->dump;
        s->outputs_only = c->outputs_only;
        s->progress = c->progress && k == 1;
        s->interrupted = c->interrupted;
        ld_dump_run_info run = {.name = sides[k]->run_name, .backend = sides[k]->vt->name,
                                .config = sides[k]->config};
        if (st == LD_OK && c->dump)
            st = ld_dump_writer_open_run(c->dump, &run, &s->dump_run, err);
    }
    if (st == LD_OK)
        st = ld_run_sink_init(&c->iso_sink, g, c->test->vt->name, err);
    c->iso_sink.dump = c->dump;
    if (st == LD_OK && c->dump && c->isolated)
        st = open_isolated_run(c, cs, err);
    int max_in = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].n_outputs > cs->max_outputs)
            cs->max_outputs = g->nodes[i].n_outputs;
        if (g->nodes[i].n_inputs > max_in)
            max_in = g->nodes[i].n_inputs;
    }
    size_t n_out = (size_t)(cs->max_outputs ? cs->max_outputs : 1);
    cs->hold = calloc(n_out, sizeof *cs->hold);
    cs->hold_buf = calloc(n_out, sizeof *cs->hold_buf);
    cs->hold_cap = calloc(n_out, sizeof *cs->hold_cap);
    cs->ref_in = calloc((size_t)max_in, sizeof *cs->ref_in);
    if (st == LD_OK && (!cs->hold || !cs->hold_buf || !cs->hold_cap || !cs->ref_in))
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    return st;
}

static void tear_down(cmp_state *cs)
{
    if (cs->hold)
        release_holds(cs);
    for (int j = 0; cs->hold_buf && j < cs->max_outputs; j++)
        free(cs->hold_buf[j]);
    free(cs->hold);
    free(cs->hold_buf);
    free(cs->hold_cap);
    free(cs->ref_in);
}

ld_status ld_run_compare_go(ld_run_compare *c, ld_error *err)
{
    cmp_state cs = {.c = c, .iso_run = -1};
    c->lockstep = ld_backend_is_stepwise(c->ref->vt) && ld_backend_is_stepwise(c->test->vt);
    c->isolated = c->lockstep && c->isolate;
    c->isolate_seconds = 0;
    c->compare_seconds = 0;
    c->isolated_layers = 0;
    if (!c->lockstep) {
        const ld_backend_vtable *slow = ld_backend_is_stepwise(c->ref->vt) ? c->test->vt
                                                                           : c->ref->vt;
        fprintf(stderr, "layerdiff run: backend '%s' cannot run node by node: comparing "
                "against a temporary dump of the reference run%s\n", slow->name,
                c->isolate ? ", without isolated error" : "");
    }
    ld_status st = set_up(c, &cs, err);
    if (st == LD_OK)
        st = c->lockstep ? run_lockstep(&cs, err) : run_via_dump(&cs, err);
    if (st == LD_OK && c->lockstep)
        st = ld_run_sink_finish(&c->ref->sink, err);
    if (st == LD_OK)
        st = ld_run_sink_finish(&c->test->sink, err);
    else if (c->progress)
        fprintf(stderr, "\r\033[K");
    tear_down(&cs);
    return st;
}

void ld_run_compare_clear(ld_run_compare *c)
{
    ld_run_sink_free(&c->ref->sink);
    ld_run_sink_free(&c->test->sink);
    ld_run_sink_free(&c->iso_sink);
}
