/* A complete layerdiff backend plugin, small enough to read in one go.
 *
 * Backend "passthrough" runs graphs made of Identity and Relu nodes only and
 * refuses anything else in prepare, before anything runs. It is built as
 * build/plugins/passthrough.so (Makefile rule tests/plugins/%.c) and loaded
 * with
 *
 *     layerdiff run model.onnx --backend-plugin build/plugins/passthrough.so \
 *                              --backends passthrough --dump d.h5
 *
 * A plugin includes only the public headers and calls the public API
 * (tensors, errors), which the layerdiff binary exports; it does not link
 * the library. What a backend must do (see include/layerdiff/backend.h):
 *  - report every graph input, then every node output once, in topological
 *    order, through the observer, before freeing it;
 *  - return the observer's error unchanged and stop;
 *  - fail with one clear line naming the node when it cannot do something.
 *
 * The variants bad_abi.c, missing_run.c, builtin_name.c and abi2.c include
 * this file with a macro set, to test the loader's checks. It offers none of
 * the optional stepwise slots (ABI 3), so `layerdiff run` compares it with
 * the reference through a temporary dump.
 *
 * Testing aid: PASSTHROUGH_RAISE_AT=N raises SIGINT (SIGTERM when
 * PASSTHROUGH_SIGNAL=TERM) in the process right before node N's output is
 * reported, so the tests can interrupt a run at a known point. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "layerdiff/backend.h"

#ifndef PLUGIN_ABI_VERSION
#define PLUGIN_ABI_VERSION LD_BACKEND_ABI_VERSION
#endif
#ifndef PLUGIN_NAME
#define PLUGIN_NAME "passthrough"
#endif

typedef struct passthrough {
    const ld_graph *graph;  /* borrowed, set by prepare */
    int *last_use;          /* per value: last node reading it, -1 if none */
    int raise_at;           /* node index before which to raise a signal, -1: never */
    int signal;             /* SIGINT or SIGTERM */
} passthrough;

static ld_status pt_create(void **state, const ld_backend_config *cfg, ld_error *err)
{
    if (cfg && cfg->n_options > 0)
        return ld_error_set(err, LD_ERR_USAGE, "backend '" PLUGIN_NAME "' takes no options");
    passthrough *p = calloc(1, sizeof *p);
    if (!p)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    const char *raise_at = getenv("PASSTHROUGH_RAISE_AT");
    const char *sig = getenv("PASSTHROUGH_SIGNAL");
    p->raise_at = raise_at ? atoi(raise_at) : -1;
    p->signal = sig && strcmp(sig, "TERM") == 0 ? SIGTERM : SIGINT;
    *state = p;
    return LD_OK;
}

static bool is_supported(const ld_node *n)
{
    return n->domain[0] == '\0' && n->n_inputs == 1 && n->inputs[0] >= 0 &&
           n->n_outputs == 1 && n->outputs[0] >= 0 &&
           (strcmp(n->op_type, "Identity") == 0 || strcmp(n->op_type, "Relu") == 0);
}

static ld_status pt_prepare(void *state, const ld_graph *g, const ld_shape *input_shapes,
                            ld_error *err)
{
    (void)input_shapes;
    passthrough *p = state;
    for (int i = 0; i < g->n_nodes; i++)
        if (!is_supported(&g->nodes[i]))
            return ld_error_set(err, LD_ERR_UNSUPPORTED, "node '%s' (%s) is not supported: "
                                "backend '" PLUGIN_NAME "' runs only Identity and Relu",
                                g->nodes[i].name, g->nodes[i].op_type);
    free(p->last_use);
    p->last_use = malloc((size_t)(g->n_values ? g->n_values : 1) * sizeof *p->last_use);
    if (!p->last_use)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int v = 0; v < g->n_values; v++) {
        const ld_value *val = &g->values[v];
        p->last_use[v] = val->n_consumers ? val->consumers[val->n_consumers - 1] : -1;
    }
    p->graph = g;
    return LD_OK;
}

/* y = x (Identity) or max(x, 0) (Relu, float32 and float64 only). */
static ld_status compute(const ld_node *n, const ld_tensor *x, ld_tensor *y, ld_error *err)
{
    if (strcmp(n->op_type, "Identity") == 0) {
        if (x->nbytes)
            memcpy(y->data, x->data, x->nbytes);
        return LD_OK;
    }
    if (x->dtype == LD_DTYPE_FLOAT32) {
        for (int64_t i = 0; i < x->count; i++) {
            float v = ((const float *)x->data)[i];
            ((float *)y->data)[i] = v < 0 ? 0.0f : v;
        }
    } else if (x->dtype == LD_DTYPE_FLOAT64) {
        for (int64_t i = 0; i < x->count; i++) {
            double v = ((const double *)x->data)[i];
            ((double *)y->data)[i] = v < 0 ? 0.0 : v;
        }
    } else {
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "node '%s' (Relu): backend '" PLUGIN_NAME
                            "' does not compute %s", n->name, ld_dtype_name(x->dtype));
    }
    return LD_OK;
}

static ld_status report(const ld_graph *g, const ld_node *n, int value, const ld_tensor *t,
                        ld_tensor_observer observer, void *user, ld_error *err)
{
    ld_tensor_event ev = {.graph = g, .node = n, .output_index = 0, .value = value,
                          .tensor = t, .precision = LD_PRECISION_FP32};
    return observer ? observer(user, &ev, err) : LD_OK;
}

#ifdef PLUGIN_NO_RUN
__attribute__((unused))
#endif
static ld_status pt_run(void *state, const ld_tensor *const *inputs, ld_tensor_observer observer,
                        void *user, ld_error *err)
{
    passthrough *p = state;
    const ld_graph *g = p->graph;
    if (!g)
        return ld_error_set(err, LD_ERR_INTERNAL, "backend '" PLUGIN_NAME "': run before prepare");
    /* Per value: the tensor holding it; owned ones are ours to free. */
    const ld_tensor **live = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *live);
    bool *owned = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *owned);
    ld_status st = live && owned ? LD_OK : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int k = 0; st == LD_OK && k < g->n_inputs; k++) {
        live[g->inputs[k]] = inputs[k];
        st = report(g, NULL, g->inputs[k], inputs[k], observer, user, err);
    }
    for (int i = 0; st == LD_OK && i < g->n_nodes; i++) {
        const ld_node *n = &g->nodes[i];
        int in = n->inputs[0], out = n->outputs[0];
        const ld_tensor *x = g->values[in].initializer ? g->values[in].initializer : live[in];
        ld_tensor *y = NULL;
        st = ld_tensor_create(&y, g->values[out].name, x->dtype, &x->shape, err);
        if (st == LD_OK)
            st = compute(n, x, y, err);
        if (st != LD_OK) {
            ld_tensor_destroy(y);
            break;
        }
        live[out] = y;
        owned[out] = true;
        if (i == p->raise_at)
            raise(p->signal);
        st = report(g, n, out, y, observer, user, err);
        /* Free what no later node reads. */
        if (owned[in] && p->last_use[in] == i) {
            ld_tensor_destroy((ld_tensor *)live[in]);
            live[in] = NULL;
            owned[in] = false;
        }
        if (p->last_use[out] < 0) {
            ld_tensor_destroy(y);
            live[out] = NULL;
            owned[out] = false;
        }
    }
    for (int v = 0; live && owned && v < g->n_values; v++)
        if (owned[v])
            ld_tensor_destroy((ld_tensor *)live[v]);
    free(live);
    free(owned);
    return st;
}

static void pt_destroy(void *state)
{
    passthrough *p = state;
    if (!p)
        return;
    free(p->last_use);
    free(p);
}

#ifdef PLUGIN_V2_TABLE
/* The table exactly as a plugin built against ABI 2 lays it out: it ends
 * after `profile`, so a loader reading further would read past it. */
static const struct {
    int abi_version;
    const char *name, *description;
    ld_status (*create)(void **, const ld_backend_config *, ld_error *);
    ld_status (*prepare)(void *, const ld_graph *, const ld_shape *, ld_error *);
    ld_status (*run)(void *, const ld_tensor *const *, ld_tensor_observer, void *, ld_error *);
    void (*destroy)(void *);
    ld_precision (*node_precision)(void *, int);
    ld_status (*profile)(void *, ld_backend_profile *, ld_error *);
} vtable_v2 = {2, PLUGIN_NAME, "test plugin: the passthrough backend built for ABI 2",
               pt_create, pt_prepare, pt_run, pt_destroy, NULL, NULL};

const ld_backend_vtable *layerdiff_backend_plugin(void);

const ld_backend_vtable *layerdiff_backend_plugin(void)
{
    return (const ld_backend_vtable *)(const void *)&vtable_v2;
}
#else
static const ld_backend_vtable vtable = {
    .abi_version = PLUGIN_ABI_VERSION,
    .name = PLUGIN_NAME,
    .description = "test plugin: Identity and Relu only, computed in place of the reference",
    .create = pt_create,
    .prepare = pt_prepare,
#ifdef PLUGIN_NO_RUN
    .run = NULL,
#else
    .run = pt_run,
#endif
    .destroy = pt_destroy,
};

const ld_backend_vtable *layerdiff_backend_plugin(void);

const ld_backend_vtable *layerdiff_backend_plugin(void)
{
    return &vtable;
}
#endif
