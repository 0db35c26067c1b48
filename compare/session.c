/* layerdiff — a comparison session (include/layerdiff/compare.h, part 3).
 *
 * A session judges tensor pairs the moment they arrive and keeps only a
 * record per tensor (names, metrics, verdict): a live `run` hands it each
 * layer output as the test backend produces it, `compare` one pair read from
 * the dumps at a time, so memory is the records plus the comparator's
 * scratch, whatever the model's depth. Record names are indexed in an
 * open-addressing hash table so inputs resolve and duplicates are found in
 * O(1). The divergence analysis itself is compare/divergence.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compare/clip_crossing.h"
#include "compare/divergence.h"
#include "compare/metrics_internal.h"
#include "layerdiff/compare.h"

struct ld_compare_session {
    ld_compare_options opts;     /* copy; opts.tol's override arrays are borrowed */
    ld_compare_scratch *scratch;
    ld_compare_scratch *scratch_isolated; /* with opts.threads > 1: the isolated pairs' */
    ld_compare_record *records;
    int n, cap;
    int *slots;                  /* hash table of record indices, -1 = empty */
    int n_slots;                 /* power of two, > 2 * n */
    bool any_layer;              /* a record with topo_index >= 0 was added */
    int64_t last_topo;
    int last_output;
    bool finished;
    ld_compare_summary summary;
    int *origins, *culprits;
};

/* --- name index ---------------------------------------------------------------------- */

static uint64_t hash_name(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static int find_slot(const ld_compare_session *s, const char *name)
{
    unsigned mask = (unsigned)s->n_slots - 1;
    unsigned i = (unsigned)hash_name(name) & mask;
    while (s->slots[i] >= 0 && strcmp(s->records[s->slots[i]].name, name) != 0)
        i = (i + 1) & mask;
    return (int)i;
}

static int find_record(const ld_compare_session *s, const char *name)
{
    if (s->n_slots == 0)
        return -1;
    return s->slots[find_slot(s, name)];
}

static ld_status grow_index(ld_compare_session *s, ld_error *err)
{
    if (s->n_slots > 2 * (s->n + 1))
        return LD_OK;
    int n_slots = s->n_slots ? s->n_slots * 2 : 64;
    if (n_slots <= 0 || n_slots > (1 << 30))
        return ld_error_set(err, LD_ERR_NOMEM, "too many tensors in one comparison");
    int *slots = malloc((size_t)n_slots * sizeof *slots);
    if (!slots)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory indexing tensor names");
    for (int i = 0; i < n_slots; i++)
        slots[i] = -1;
    free(s->slots);
    s->slots = slots;
    s->n_slots = n_slots;
    for (int r = 0; r < s->n; r++)
        s->slots[find_slot(s, s->records[r].name)] = r;
    return LD_OK;
}

static ld_status grow_records(ld_compare_session *s, ld_error *err)
{
    if (s->n < s->cap)
        return LD_OK;
    int cap = s->cap ? s->cap * 2 : 64;
    if (cap <= s->cap || (size_t)cap > SIZE_MAX / sizeof *s->records)
        return ld_error_set(err, LD_ERR_NOMEM, "too many tensors in one comparison");
    ld_compare_record *records = realloc(s->records, (size_t)cap * sizeof *records);
    if (!records)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory keeping %d comparison records",
                            cap);
    s->records = records;
    s->cap = cap;
    return LD_OK;
}

/* --- records --------------------------------------------------------------------------- */

static void record_free(ld_compare_record *r)
{
    free(r->name);
    free(r->node);
    free(r->op_type);
    for (int j = 0; r->input_names && j < r->n_inputs; j++)
        free(r->input_names[j]);
    free(r->input_names);
    free(r->inputs);
    memset(r, 0, sizeof *r);
}

static char *copy_string(const char *s)
{
    return strdup(s ? s : "");
}

static ld_status record_names(ld_compare_session *s, ld_compare_record *r,
                              const ld_compare_item *item, ld_error *err)
{
    r->name = copy_string(item->name);
    r->node = copy_string(item->node);
    r->op_type = copy_string(item->op_type);
    if (!r->name || !r->node || !r->op_type)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory recording tensor '%s'",
                            item->name);
    if (item->n_inputs <= 0)
        return LD_OK;
    r->inputs = malloc((size_t)item->n_inputs * sizeof *r->inputs);
    r->input_names = calloc((size_t)item->n_inputs, sizeof *r->input_names);
    if (!r->inputs || !r->input_names)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory recording tensor '%s'",
                            item->name);
    r->n_inputs = item->n_inputs;
    for (int j = 0; j < item->n_inputs; j++) {
        const char *in = item->inputs ? item->inputs[j] : NULL;
        r->input_names[j] = copy_string(in);
        if (!r->input_names[j])
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory recording tensor '%s'",
                                item->name);
        r->inputs[j] = in && *in ? find_record(s, in) : -1;
    }
    return LD_OK;
}

/* The record's metrics, and its Clip crossings. The accumulated and the
 * isolated pair are independent: a comparing run's comparisons take most of
 * its time on one thread while its kernels use every CPU, so with threads
 * they run at once (a second scratch), bit for bit as one after the other. */
static ld_status record_metrics(ld_compare_session *s, ld_compare_record *r,
                                const ld_compare_item *item, ld_error *err)
{
    r->tol = ld_tolerance_for(&s->opts.tol, item->name, item->precision);
    r->has_isolated = item->isolated != NULL;
    bool op_clip = ld_clip_crossing_applies(r->op_type);
    ld_status st = LD_OK, st_isolated = LD_OK;
    ld_error err_isolated;
    ld_error_clear(&err_isolated);
    if (item->isolated && s->scratch_isolated) {
#pragma omp parallel sections num_threads(2)
        {
#pragma omp section
            {
                st = ld_compare_tensors(item->ref, item->test, item->precision, &r->tol,
                                        s->scratch, item->name, &r->metrics, err);
                r->clip_crossings = op_clip ? ld_clip_crossings(item->ref, item->test) : -1;
            }
#pragma omp section
            st_isolated = ld_compare_tensors(item->ref, item->isolated, item->precision,
                                             &r->tol, s->scratch_isolated, item->name,
                                             &r->isolated, &err_isolated);
        }
    } else {
        st = ld_compare_tensors(item->ref, item->test, item->precision, &r->tol, s->scratch,
                                item->name, &r->metrics, err);
        r->clip_crossings = op_clip ? ld_clip_crossings(item->ref, item->test) : -1;
        if (st == LD_OK && item->isolated)
            st_isolated = ld_compare_tensors(item->ref, item->isolated, item->precision,
                                             &r->tol, s->scratch, item->name, &r->isolated,
                                             &err_isolated);
    }
    if (st != LD_OK)
        return st;
    if (st_isolated != LD_OK) {
        if (err)
            *err = err_isolated;
        ld_error_prefix(err, "isolated run");
    }
    return st_isolated;
}

/* --- order ------------------------------------------------------------------------------- */

static ld_status check_item(const ld_compare_session *s, const ld_compare_item *item,
                            ld_error *err)
{
    if (s->finished)
        return ld_error_set(err, LD_ERR_INTERNAL, "tensor '%s' added to a finished comparison",
                            item->name ? item->name : "");
    if (!item->name || !item->ref || !item->test)
        return ld_error_set(err, LD_ERR_INTERNAL, "comparison item without %s",
                            !item->name ? "a name" : "both tensors");
    int dup = find_record(s, item->name);
    if (dup >= 0)
        return ld_error_set(err, LD_ERR_INPUT, "tensor '%s' given twice (first as tensor %d "
                            "of the comparison): tensor names must be unique", item->name,
                            dup + 1);
    if (item->topo_index < -1 || item->output_index < 0)
        return ld_error_set(err, LD_ERR_INPUT, "tensor '%s': bad topological index %lld or "
                            "output index %d", item->name, (long long)item->topo_index,
                            item->output_index);
    if (item->topo_index == -1) {
        if (s->any_layer)
            return ld_error_set(err, LD_ERR_INPUT, "graph input '%s' given after layer "
                                "outputs: tensors must come in topological order, graph "
                                "inputs first", item->name);
        return LD_OK;
    }
    if (s->any_layer && (item->topo_index < s->last_topo ||
                         (item->topo_index == s->last_topo &&
                          item->output_index <= s->last_output)))
        return ld_error_set(err, LD_ERR_INPUT, "tensor '%s' (node %lld, output %d) given after "
                            "node %lld, output %d: tensors must come in topological order",
                            item->name, (long long)item->topo_index, item->output_index,
                            (long long)s->last_topo, s->last_output);
    return LD_OK;
}

/* --- API ------------------------------------------------------------------------------------ */

ld_status ld_compare_session_create(ld_compare_session **out, const ld_compare_options *opts,
                                    ld_error *err)
{
    *out = NULL;
    ld_compare_session *s = calloc(1, sizeof *s);
    if (!s)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory creating a comparison");
    if (opts)
        s->opts = *opts;
    if (!(s->opts.culprit_ulp > 0))
        s->opts.culprit_ulp = LD_DIVERGENCE_DEFAULT_CULPRIT_ULP;
    s->summary.first_divergent = -1;
    ld_status st = ld_compare_scratch_create(&s->scratch, err);
    if (st == LD_OK && s->opts.threads > 1) {
        st = ld_compare_scratch_create(&s->scratch_isolated, err);
        (void)cmp_fast_available(); /* its CPU check, before any thread asks */
    }
    if (st != LD_OK) {
        ld_compare_scratch_destroy(s->scratch);
        free(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

void ld_compare_session_destroy(ld_compare_session *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        record_free(&s->records[i]);
    free(s->records);
    free(s->slots);
    free(s->origins);
    free(s->culprits);
    ld_compare_scratch_destroy(s->scratch);
    ld_compare_scratch_destroy(s->scratch_isolated);
    free(s);
}

ld_status ld_compare_session_add(ld_compare_session *s, const ld_compare_item *item,
                                 ld_error *err)
{
    ld_status st = check_item(s, item, err);
    if (st == LD_OK)
        st = grow_records(s, err);
    if (st == LD_OK)
        st = grow_index(s, err);
    if (st != LD_OK)
        return st;
    ld_compare_record *r = &s->records[s->n];
    memset(r, 0, sizeof *r);
    r->topo_index = item->topo_index;
    r->output_index = item->output_index;
    r->precision = item->precision;
    r->counters = item->counters;
    r->ref_dtype = item->ref->dtype;
    r->test_dtype = item->test->dtype;
    r->shape = item->test->shape;
    r->is_graph_output = item->is_graph_output;
    r->is_float = ld_dtype_is_float(item->test->dtype);
    r->rate_of_change = 0;
    st = record_names(s, r, item, err);
    if (st == LD_OK)
        st = record_metrics(s, r, item, err);
    if (st != LD_OK) {
        record_free(r);
        return st;
    }
    s->slots[find_slot(s, r->name)] = s->n;
    s->n++;
    if (item->topo_index >= 0) {
        s->any_layer = true;
        s->last_topo = item->topo_index;
        s->last_output = item->output_index;
    }
    return LD_OK;
}

/* An input named before its producer was added: the items were not in
 * topological order (or the producer's name was reused). */
static ld_status check_late_inputs(const ld_compare_session *s, ld_error *err)
{
    for (int i = 0; i < s->n; i++) {
        const ld_compare_record *r = &s->records[i];
        for (int j = 0; j < r->n_inputs; j++) {
            if (r->inputs[j] >= 0 || !r->input_names[j][0])
                continue;
            int k = find_record(s, r->input_names[j]);
            if (k >= 0)
                return ld_error_set(err, LD_ERR_INPUT, "tensor '%s' uses '%s', which was given "
                                    "after it: tensors must come in topological order",
                                    r->name, r->input_names[j]);
        }
    }
    return LD_OK;
}

/* -1 when no record is a Clip output (compare/clip_crossing.h). */
static int64_t sum_clip_crossings(const ld_compare_session *s)
{
    int64_t sum = -1;
    for (int i = 0; i < s->n; i++) {
        int64_t c = s->records[i].clip_crossings;
        if (c >= 0)
            sum = (sum < 0 ? 0 : sum) + c;
    }
    return sum;
}

ld_status ld_compare_session_finish(ld_compare_session *s, ld_error *err)
{
    if (s->finished)
        return LD_OK;
    ld_status st = check_late_inputs(s, err);
    if (st == LD_OK)
        st = ld_divergence_analyze(s->records, s->n, s->opts.culprit_ulp, &s->summary,
                                   &s->origins, &s->culprits, err);
    s->summary.clip_crossings = sum_clip_crossings(s);
    if (st == LD_OK)
        s->finished = true;
    return st;
}

int ld_compare_session_count(const ld_compare_session *s)
{
    return s->n;
}

const ld_compare_record *ld_compare_session_record(const ld_compare_session *s, int i)
{
    return i >= 0 && i < s->n ? &s->records[i] : NULL;
}

const ld_compare_summary *ld_compare_session_summary(const ld_compare_session *s)
{
    return &s->summary;
}

const ld_compare_options *ld_compare_session_options(const ld_compare_session *s)
{
    return &s->opts;
}
