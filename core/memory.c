/* layerdiff — memory a run needs, and the limit (see layerdiff/memory.h). */
#include "layerdiff/memory.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* --- sizes ------------------------------------------------------------------------------ */

ld_status ld_memory_parse_size(const char *text, uint64_t *out, ld_error *err)
{
    const char *p = text ? text : "";
    char number[64];
    size_t n = 0;
    bool digits = false, dot = false;
    for (; isdigit((unsigned char)*p) || (*p == '.' && !dot); p++) {
        dot |= *p == '.';
        digits |= *p != '.';
        if (n + 1 < sizeof number)
            number[n++] = *p;
    }
    number[n] = '\0';
    int power = 0;
    const char *units = "KMGT";
    const char *unit = *p ? strchr(units, toupper((unsigned char)*p)) : NULL;
    if (unit) {
        power = (int)(unit - units) + 1;
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
    }
    if (*p == 'b' || *p == 'B')
        p++;
    double value = digits && n + 1 < sizeof number ? strtod(number, NULL) * pow(1024.0, power) : 0;
    if (!digits || *p || n + 1 >= sizeof number)
        return ld_error_set(err, LD_ERR_USAGE,
                            "memory size '%s': expected a number of bytes, optionally with K, M, "
                            "G or T (powers of 1024; e.g. 512M, 4G, 1.5GiB)",
                            text ? text : "");
    if (!(value >= 1.0) || value >= 9223372036854775808.0)
        return ld_error_set(err, LD_ERR_USAGE,
                            "memory size '%s': must be at least 1 byte and below 8 EiB",
                            text);
    *out = (uint64_t)value;
    return LD_OK;
}

uint64_t ld_memory_default_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    return (uint64_t)pages / 5 * 4 * (uint64_t)page;
}

/* Set by the CLI before backends start, read by executors at the start of a
 * run: no concurrent writes. */
static uint64_t memory_limit;

void ld_memory_limit_set(uint64_t bytes)
{
    memory_limit = bytes;
}

uint64_t ld_memory_limit(void)
{
    return memory_limit;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* The shared budget: weights and inputs of the run (declared, not summed:
 * the executors of one run share them) and the tensors every executor holds. */
static _Atomic uint64_t resident_bytes;
static _Atomic uint64_t held_bytes;

void ld_memory_set_resident(uint64_t bytes)
{
    atomic_store(&resident_bytes, bytes);
}

uint64_t ld_memory_resident(void)
{
    return atomic_load(&resident_bytes);
}

bool ld_memory_try_hold(uint64_t bytes)
{
    uint64_t limit = memory_limit, held = atomic_load(&held_bytes);
    for (;;) {
        uint64_t total = sat_add(sat_add(held, bytes), atomic_load(&resident_bytes));
        if (limit && total > limit)
            return false;
        if (atomic_compare_exchange_weak(&held_bytes, &held, held + bytes))
            return true;
    }
}

void ld_memory_hold(uint64_t bytes)
{
    atomic_fetch_add(&held_bytes, bytes);
}

void ld_memory_release(uint64_t bytes)
{
    uint64_t held = atomic_load(&held_bytes);
    while (!atomic_compare_exchange_weak(&held_bytes, &held, held > bytes ? held - bytes : 0))
        ;
}

uint64_t ld_memory_held(void)
{
    return atomic_load(&held_bytes);
}

char *ld_memory_format(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes == UINT64_MAX) {
        snprintf(buf, size, "more than 16 EiB");
        return buf;
    }
    if (bytes < 1024) {
        snprintf(buf, size, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = -1;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

/* --- estimate ------------------------------------------------------------------------------ */


static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

/* A value's statically known type: dtype and dims (dims are >= 0 when known). */
typedef struct static_type {
    bool known;
    ld_dtype dtype;
    int rank;
    int64_t dims[LD_MAX_RANK];
} static_type;

/* Symbolic dims of the graph inputs bound to the given shapes. */
typedef struct binding {
    const char *param;
    int64_t value;
} binding;

typedef struct estimator {
    const ld_graph *g;
    static_type *types;  /* per value */
    binding *bindings;
    int n_bindings;
} estimator;

static uint64_t type_bytes(const static_type *t)
{
    if (!t->known)
        return 0;
    uint64_t n = ld_dtype_size(t->dtype);
    for (int i = 0; i < t->rank; i++)
        n = sat_mul(n, (uint64_t)t->dims[i]);
    return n;
}

static int64_t bound_dim(const estimator *es, const ld_dim *d)
{
    if (d->value >= 0)
        return d->value;
    for (int b = 0; d->param && b < es->n_bindings; b++)
        if (strcmp(es->bindings[b].param, d->param) == 0)
            return es->bindings[b].value;
    return -1;
}

/* The declared type of v with symbolic dims bound, when fully concrete. */
static bool declared_type(const estimator *es, const ld_value *v, static_type *out)
{
    const ld_type_info *t = &v->type;
    if (t->kind != LD_TYPE_TENSOR || !t->has_shape || t->rank > LD_MAX_RANK ||
        ld_dtype_size(t->dtype) == 0)
        return false;
    *out = (static_type){.known = true, .dtype = t->dtype, .rank = t->rank};
    for (int i = 0; i < t->rank; i++)
        if ((out->dims[i] = bound_dim(es, &t->dims[i])) < 0)
            return false;
    return true;
}

static bool op_in(const char *op, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(op, *list) == 0)
            return true;
    return false;
}

/* Ops whose output 0 has input 0's shape and dtype. */
static const char *const same_as_input[] = {
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BatchNormalization", "Ceil",
    "Celu", "Clip", "Cos", "Cosh", "CumSum", "Dropout", "Elu", "Erf", "Exp", "Floor", "Gelu",
    "HardSigmoid", "HardSwish", "Hardmax", "Identity", "InstanceNormalization",
    "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "LpNormalization",
    "MeanVarianceNormalization", "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round", "Selu",
    "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", "Tan",
    "Tanh", "ThresholdedRelu", NULL};
/* Broadcasting ops whose output has input 0's dtype. */
static const char *const broadcast_same[] = {
    "Add", "BitShift", "Div", "Max", "Mean", "Min", "Mod", "Mul", "Pow", "PRelu", "Sub", "Sum",
    NULL};
/* Broadcasting ops with a bool output. */
static const char *const broadcast_bool[] = {
    "And", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Or", "Xor", NULL};

/* Multidirectional (numpy) broadcast of b into *acc; false when incompatible. */
static bool broadcast_into(static_type *acc, const static_type *b)
{
    int rank = acc->rank > b->rank ? acc->rank : b->rank;
    int64_t dims[LD_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        int ia = i - (rank - acc->rank), ib = i - (rank - b->rank);
        int64_t da = ia >= 0 ? acc->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        dims[i] = da == 1 ? db : da;
    }
    acc->rank = rank;
    memcpy(acc->dims, dims, sizeof dims);
    return true;
}

static const static_type *input_type(const estimator *es, const ld_node *node, int j)
{
    int v = j < node->n_inputs ? node->inputs[j] : -1;
    return v >= 0 && es->types[v].known ? &es->types[v] : NULL;
}

static int64_t int_attr(const ld_node *node, const char *name, int64_t fallback)
{
    for (int a = 0; a < node->n_attrs; a++)
        if (node->attrs[a].type == LD_ATTR_INT && strcmp(node->attrs[a].name, name) == 0)
            return node->attrs[a].i;
    return fallback;
}

/* Output 0's type from the inputs' for the ops above; false when unknown. */
static bool propagated_type(const estimator *es, const ld_node *node, static_type *out)
{
    const static_type *in0 = input_type(es, node, 0);
    if (node->n_outputs < 1 || *node->domain || !in0)
        return false;
    const char *op = node->op_type;
    *out = *in0;
    if (op_in(op, same_as_input))
        return true;
    if (strcmp(op, "Cast") == 0) {
        out->dtype = (ld_dtype)int_attr(node, "to", 0);
        return ld_dtype_size(out->dtype) > 0;
    }
    bool to_bool = op_in(op, broadcast_bool), where = strcmp(op, "Where") == 0;
    if (!to_bool && !where && !op_in(op, broadcast_same))
        return false;
    for (int j = 1; j < node->n_inputs; j++) {
        const static_type *in = input_type(es, node, j);
        if (!in || !broadcast_into(out, in))
            return false;
        if (where && j == 1)
            out->dtype = in->dtype;
    }
    if (to_bool)
        out->dtype = LD_DTYPE_BOOL;
    return true;
}

static ld_status bind_inputs(estimator *es, const ld_shape *shapes, ld_error *err)
{
    const ld_graph *g = es->g;
    int n = 0;
    for (int k = 0; k < g->n_inputs; k++)
        n += g->values[g->inputs[k]].type.rank;
    es->bindings = calloc((size_t)(n ? n : 1), sizeof *es->bindings);
    if (!es->bindings)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int k = 0; k < g->n_inputs; k++) {
        const ld_value *v = &g->values[g->inputs[k]];
        static_type *t = &es->types[g->inputs[k]];
        *t = (static_type){.known = ld_dtype_size(v->type.dtype) > 0, .dtype = v->type.dtype,
                           .rank = shapes[k].rank};
        memcpy(t->dims, shapes[k].dims, sizeof t->dims);
        for (int i = 0; v->type.has_shape && i < v->type.rank && i < shapes[k].rank; i++)
            if (v->type.dims[i].value < 0 && v->type.dims[i].param)
                es->bindings[es->n_bindings++] =
                    (binding){v->type.dims[i].param, shapes[k].dims[i]};
    }
    return LD_OK;
}

static void note_largest(ld_memory_estimate *out, int value, uint64_t bytes)
{
    if (bytes > out->largest_bytes || out->largest_value < 0) {
        out->largest_bytes = bytes;
        out->largest_value = value;
    }
}

/* Live node outputs as the executor keeps them: each node's outputs are
 * allocated while its inputs are still alive, outputs nobody reads are freed
 * once observed, node outputs are freed after their last reader. (Once the
 * sum saturates the peak is UINT64_MAX, whatever the later subtractions.) */
static void simulate_liveness(const estimator *es, const int *last_use, ld_memory_estimate *out)
{
    const ld_graph *g = es->g;
    uint64_t live = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ld_node *node = &g->nodes[i];
        for (int j = 0; j < node->n_outputs; j++)
            if (node->outputs[j] >= 0)
                live = sat_add(live, type_bytes(&es->types[node->outputs[j]]));
        if (live > out->peak_bytes || out->peak_node < 0) {
            out->peak_bytes = live;
            out->peak_node = i;
        }
        for (int j = 0; j < node->n_outputs; j++)
            if (node->outputs[j] >= 0 && last_use[node->outputs[j]] < 0)
                live -= type_bytes(&es->types[node->outputs[j]]);
        for (int j = 0; j < node->n_inputs + node->n_implicit_inputs; j++) {
            int v = j < node->n_inputs ? node->inputs[j] : node->implicit_inputs[j - node->n_inputs];
            if (v >= 0 && g->values[v].kind == LD_VALUE_NODE_OUTPUT && last_use[v] == i) {
                live -= type_bytes(&es->types[v]);
                es->types[v].known = false; /* a value read twice by node i is freed once */
            }
        }
    }
}

ld_status ld_memory_estimate_run(const ld_graph *g, const ld_shape *input_shapes,
                                 ld_memory_estimate *out, ld_error *err)
{
    *out = (ld_memory_estimate){.peak_node = -1, .largest_value = -1};
    size_t nv = (size_t)(g->n_values ? g->n_values : 1);
    estimator es = {.g = g, .types = calloc(nv, sizeof *es.types)};
    int *last_use = malloc(nv * sizeof *last_use);
    ld_status st = LD_OK;
    if (!es.types || !last_use) {
        st = ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    st = bind_inputs(&es, input_shapes, err);
    if (st != LD_OK)
        goto out;
    for (int v = 0; v < g->n_values; v++) {
        const ld_value *val = &g->values[v];
        last_use[v] = -1;
        for (int c = 0; c < val->n_consumers; c++)
            if (val->consumers[c] > last_use[v])
                last_use[v] = val->consumers[c];
        if (val->kind == LD_VALUE_INITIALIZER && val->initializer) {
            out->weight_bytes = sat_add(out->weight_bytes, val->initializer->nbytes);
            note_largest(out, v, val->initializer->nbytes);
            es.types[v] = (static_type){.known = true, .dtype = val->initializer->dtype,
                                        .rank = val->initializer->shape.rank};
            memcpy(es.types[v].dims, val->initializer->shape.dims, sizeof es.types[v].dims);
        }
    }
    for (int k = 0; k < g->n_inputs; k++) {
        uint64_t bytes = type_bytes(&es.types[g->inputs[k]]);
        out->input_bytes = sat_add(out->input_bytes, bytes);
        note_largest(out, g->inputs[k], bytes);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const ld_node *node = &g->nodes[i];
        for (int j = 0; j < node->n_outputs; j++) {
            int v = node->outputs[j];
            if (v < 0)
                continue;
            static_type *t = &es.types[v];
            if (!declared_type(&es, &g->values[v], t) && !(j == 0 && propagated_type(&es, node, t)))
                t->known = false;
            if (t->known)
                note_largest(out, v, type_bytes(t));
            else
                out->n_unknown++;
        }
    }
    simulate_liveness(&es, last_use, out);
    out->total_bytes = sat_add(sat_add(out->weight_bytes, out->input_bytes), out->peak_bytes);
out:
    free(es.types);
    free(es.bindings);
    free(last_use);
    return st;
}

ld_status ld_memory_check(const ld_graph *g, const ld_memory_estimate *est, uint64_t limit,
                          ld_error *err)
{
    uint64_t needed = est->backends > 1
                          ? sat_add(sat_add(est->weight_bytes, est->input_bytes),
                                    sat_mul(est->peak_bytes, (uint64_t)est->backends))
                          : est->total_bytes;
    if (!limit || needed <= limit)
        return LD_OK;
    char total[32], weights[32], inputs[32], peak[32], largest[32], lim[32], at[300] = "";
    int o = 0;
    if (est->peak_node >= 0 && est->peak_bytes > 0)
        o = snprintf(at, sizeof at, " at node '%s' (%s)", g->nodes[est->peak_node].name,
                     g->nodes[est->peak_node].op_type);
    if (est->backends > 1 && o >= 0 && (size_t)o < sizeof at)
        snprintf(at + o, sizeof at - (size_t)o, ", in each of the %d backends run together",
                 est->backends);
    return ld_error_set(
        err, LD_ERR_NOMEM,
        "the run needs %s%s of tensors (weights %s, inputs %s, layer outputs alive at once %s%s; "
        "largest tensor '%s', %s), more than the memory limit %s (--max-memory)",
        est->n_unknown ? "at least " : "", ld_memory_format(needed, total, sizeof total),
        ld_memory_format(est->weight_bytes, weights, sizeof weights),
        ld_memory_format(est->input_bytes, inputs, sizeof inputs),
        ld_memory_format(est->peak_bytes, peak, sizeof peak), at,
        est->largest_value >= 0 ? g->values[est->largest_value].name : "",
        ld_memory_format(est->largest_bytes, largest, sizeof largest),
        ld_memory_format(limit, lim, sizeof lim));
}
