/* layerdiff CLI — the observer of `layerdiff run` (see run.h). Each tensor
 * is written to the dump and summarised the moment the backend produces it,
 * so memory stays at what the executor itself holds. Events from plugins are
 * checked, since a plugin is code layerdiff did not write. */
#include <math.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/run.h"

double ld_run_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double ld_run_thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

ld_status ld_run_sink_init(ld_run_sink *sink, const ld_graph *g, const char *backend,
                           ld_error *err)
{
    sink->graph = g;
    sink->backend = backend;
    sink->layers = sink->dumped = 0;
    sink->dump_seconds = 0;
    sink->dump_cpu_seconds = 0;
    ld_progress_begin(&sink->line, stderr, g->n_nodes, backend, false);
    sink->counters = (ld_run_counters){0};
    sink->dump_run = -1;
    int max_inputs = 1;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].n_inputs > max_inputs)
            max_inputs = g->nodes[i].n_inputs;
    sink->seen = calloc((size_t)(g->n_values ? g->n_values : 1), sizeof *sink->seen);
    sink->outputs = calloc((size_t)(g->n_outputs ? g->n_outputs : 1), sizeof *sink->outputs);
    sink->input_names = calloc((size_t)max_inputs, sizeof *sink->input_names);
    if (!sink->seen || !sink->outputs || !sink->input_names) {
        ld_run_sink_free(sink);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    return LD_OK;
}

void ld_run_sink_free(ld_run_sink *sink)
{
    free(sink->seen);
    free(sink->outputs);
    free(sink->input_names);
    sink->seen = NULL;
    sink->outputs = NULL;
    sink->input_names = NULL;
}

/* Finite values go to STATS_PARTS partial sums, element i to sum i %
 * STATS_PARTS, added in order at the end. Why: one running sum waited on
 * each addition's latency, and the graph output's summary is taken inside
 * the run: det's 640x640 map cost ~1.5 ms of a ~27 ms run (Zen 5, 2
 * threads), 6% of what the benchmark calls the whole model's time. Both
 * paths below use the same partial sums: the same mean. */
#define STATS_PARTS 16

static inline void stats_add(ld_run_stats *s, double *part, double v)
{
    if (isnan(v)) {
        s->nans++;
    } else if (isinf(v)) {
        s->infs++;
    } else {
        s->finite++;
        *part += v;
        if (v < s->min)
            s->min = v;
        if (v > s->max)
            s->max = v;
    }
}

#if defined(__x86_64__)
/* The float32 elements [0, n / 16 * 16) with AVX-512: finite values into
 * part[] by i % 16 (lanes 0-7 and 8-15 in two vectors of doubles), their
 * min and max, the NaN and infinity counts; returns the elements done. */
__attribute__((target("avx512f"))) static int64_t stats_f32_avx512(const float *x, int64_t n,
                                                                  ld_run_stats *s, double *part)
{
    const __m512 inf = _mm512_set1_ps(INFINITY);
    const __m512i abs_bits = _mm512_set1_epi32(0x7fffffff);
    __m512d lo = _mm512_loadu_pd(part), hi = _mm512_loadu_pd(part + 8);
    __m512 vmin = inf, vmax = _mm512_set1_ps(-INFINITY);
    int64_t finite = 0, nans = 0, i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), abs_bits));
        __mmask16 f = _mm512_cmp_ps_mask(a, inf, _CMP_LT_OQ);
        nans += __builtin_popcount(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
        finite += __builtin_popcount(f);
        lo = _mm512_mask_add_pd(lo, (__mmask8)f, lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        hi = _mm512_mask_add_pd(hi, (__mmask8)(f >> 8), hi,
                                _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
                                    _mm512_castps_pd(v), 1))));
        vmin = _mm512_mask_min_ps(vmin, f, vmin, v);
        vmax = _mm512_mask_max_ps(vmax, f, vmax, v);
    }
    _mm512_storeu_pd(part, lo);
    _mm512_storeu_pd(part + 8, hi);
    s->finite += finite;
    s->nans += nans;
    s->infs += i - finite - nans;
    double mn = _mm512_reduce_min_ps(vmin), mx = _mm512_reduce_max_ps(vmax);
    s->min = mn < s->min ? mn : s->min;
    s->max = mx > s->max ? mx : s->max;
    return i;
}
#endif

void ld_run_stats_compute(const ld_tensor *t, ld_run_stats *s)
{
    *s = (ld_run_stats){.produced = true, .dtype = t->dtype, .shape = t->shape, .count = t->count};
    double part[STATS_PARTS] = {0};
    s->min = INFINITY;
    s->max = -INFINITY;
    /* float32 outputs (nearly all of them) skip the per-element dtype
     * dispatch of ld_tensor_get_double: on a 400k-element detection map that
     * dispatch cost several milliseconds of every run */
    if (t->dtype == LD_DTYPE_FLOAT32) {
        const float *data = t->data;
        int64_t i = 0;
#if defined(__x86_64__)
        if (__builtin_cpu_supports("avx512f")) {
            i = stats_f32_avx512(data, t->count, s, part);
            /* which zero came first decides a zero extreme's sign: the scalar
               order's answer (a vector keeps sixteen running extremes) */
            if (s->min == 0 || s->max == 0) {
                s->min = INFINITY;
                s->max = -INFINITY;
                for (int64_t j = 0; j < i; j++)
                    if (isfinite(data[j])) {
                        if (data[j] < s->min)
                            s->min = data[j];
                        if (data[j] > s->max)
                            s->max = data[j];
                    }
            }
        }
#endif
        for (; i + STATS_PARTS <= t->count; i += STATS_PARTS)
            for (int k = 0; k < STATS_PARTS; k++)
                stats_add(s, &part[k], (double)data[i + k]);
        for (; i < t->count; i++)
            stats_add(s, &part[i % STATS_PARTS], (double)data[i]);
    } else {
        for (int64_t i = 0; i < t->count; i++)
            stats_add(s, &part[i % STATS_PARTS], ld_tensor_get_double(t, i));
    }
    double sum = 0;
    for (int k = 0; k < STATS_PARTS; k++)
        sum += part[k];
    s->mean = s->finite ? sum / (double)s->finite : NAN;
}

char *ld_run_stats_format(const ld_run_stats *s, char *buf, size_t size)
{
    int n = s->finite ? snprintf(buf, size, "min %.6g  max %.6g  mean %.6g", s->min, s->max,
                                 s->mean)
                      : snprintf(buf, size, "%s", s->count ? "no finite values" : "empty");
    if (n >= 0 && (size_t)n < size && (s->nans || s->infs))
        snprintf(buf + n, size - (size_t)n, "  nan %lld  inf %lld", (long long)s->nans,
                 (long long)s->infs);
    return buf;
}

/* A plugin's event must name a value of our graph, produced by the node it
 * says, with a tensor layerdiff can hold, and each value only once. */
static ld_status check_event(ld_run_sink *sink, const ld_tensor_event *ev, ld_error *err)
{
    const ld_graph *g = sink->graph;
    const char *problem = NULL;
    if (ev->value < 0 || ev->value >= g->n_values)
        problem = "an event for a value outside the graph";
    else if (!ev->tensor || (!ev->tensor->data && ev->tensor->nbytes &&
                             (g->values[ev->value].is_graph_output || !ev->node ||
                              (sink->dump && !sink->outputs_only))))
        problem = "an event without tensor data"; /* allowed for a layer the observer does not
                                                     read (backend.h, observe_outputs_only) */
    else if (!ld_dtype_is_supported(ev->tensor->dtype))
        problem = "a tensor of a type layerdiff cannot hold";
    else if (ev->node && ((uintptr_t)ev->node < (uintptr_t)g->nodes ||
                          (uintptr_t)ev->node >= (uintptr_t)(g->nodes + g->n_nodes)))
        problem = "an event from a node outside the graph";
    else if (ev->node && (ev->output_index < 0 || ev->output_index >= ev->node->n_outputs ||
                          ev->node->outputs[ev->output_index] != ev->value))
        problem = "an event whose node does not produce that value";
    else if (!ev->node && g->values[ev->value].kind != LD_VALUE_INPUT)
        problem = "a node output without its node";
    if (problem)
        return ld_error_set(err, LD_ERR_INPUT, "backend '%s' reported %s", sink->backend, problem);
    if (sink->seen[ev->value])
        return ld_error_set(err, LD_ERR_INPUT, "backend '%s' reported tensor '%s' twice",
                            sink->backend, g->values[ev->value].name);
    sink->seen[ev->value] = true;
    return LD_OK;
}

/* Adds a layer's counters once: every output of a node carries the same. */
static void add_counters(ld_run_counters *c, const ld_tensor_event *ev)
{
    const ld_layer_counters *l = &ev->counters;
    if (!l->present || ev->node == c->last)
        return;
    c->last = ev->node;
    c->total.present = true;
    c->total.overflows += l->overflows;
    c->total.nans_created += l->nans_created;
    c->total.underflows += l->underflows;
    c->total.subnormals += l->subnormals;
    c->total.partial_overflows += l->partial_overflows;
    if (l->overflows > 0 && c->overflow_layers < LD_RUN_NAMED_LAYERS)
        c->overflowed[c->overflow_layers] = ev->node;
    c->overflow_layers += l->overflows > 0;
    c->nan_layers += l->nans_created > 0;
    c->underflow_layers += l->underflows > 0;
    c->subnormal_layers += l->subnormals > 0;
}

/* A model's name with control bytes replaced, to keep them off the terminal. */
static void print_name(FILE *out, const char *name)
{
    for (size_t i = 0; name[i]; i++)
        fputc((unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i], out);
}

static void print_count(FILE *out, const char *what, int64_t n, int64_t layers)
{
    fprintf(out, "%s %lld", what, (long long)n);
    if (n > 0)
        fprintf(out, " in %lld layer%s", (long long)layers, layers == 1 ? "" : "s");
}

void ld_run_counters_print(const ld_run_counters *c, FILE *out)
{
    if (!c->total.present)
        return;
    const ld_layer_counters *t = &c->total;
    fprintf(out, "  counters  ");
    print_count(out, "overflows", t->overflows, c->overflow_layers);
    int named = c->overflow_layers < LD_RUN_NAMED_LAYERS ? (int)c->overflow_layers
                                                        : LD_RUN_NAMED_LAYERS;
    for (int i = 0; i < named; i++) {
        fprintf(out, "%s", i ? ", " : " (first: ");
        print_name(out, c->overflowed[i]->name);
    }
    if (c->overflow_layers > named)
        fprintf(out, ", ...");
    fprintf(out, "%s", named ? ")" : "");
    print_count(out, ", NaNs created", t->nans_created, c->nan_layers);
    print_count(out, ", underflows", t->underflows, c->underflow_layers);
    fprintf(out, ", subnormals %lld", (long long)t->subnormals);
    if (t->partial_overflows)
        fprintf(out, ", partial-sum overflows %lld", (long long)t->partial_overflows);
    fprintf(out, "\n");
}

/* "  emulated: layer 12/96  /block1/fc (MatMul)  3.2 s", at most ~10 times a
 * second; ld_progress_update keeps control bytes off the terminal. */
static void draw_progress(ld_run_sink *sink, const ld_node *node)
{
    char name[512];
    snprintf(name, sizeof name, "%s (%s)", node->name, node->op_type);
    ld_progress_update(&sink->line, node->index + 1, name);
}

const char *const *ld_run_node_inputs(ld_run_sink *sink, const ld_node *node)
{
    for (int j = 0; j < node->n_inputs; j++)
        sink->input_names[j] = node->inputs[j] >= 0 ? sink->graph->values[node->inputs[j]].name
                                                    : "";
    return sink->input_names;
}

ld_status ld_run_write_tensor(ld_run_sink *sink, int handle, const ld_tensor_event *ev,
                              ld_error *err)
{
    const ld_node *node = ev->node;
    ld_dump_tensor_meta meta = {
        .name = sink->graph->values[ev->value].name,
        .node = node->name,
        .op_type = node->op_type,
        .topo_index = node->index,
        .output_index = ev->output_index,
        .precision = ld_precision_name(ev->precision),
        .counters = ev->counters,
        .n_inputs = node->n_inputs,
        .inputs = ld_run_node_inputs(sink, node),
        .graph_output = sink->graph->values[ev->value].is_graph_output, /* --layers outputs */
    };
    double start = ld_run_now(), cpu_start = ld_run_thread_cpu();
    ld_status st = handle >= 0
                       ? ld_dump_writer_add_tensor_to(sink->dump, handle, ev->tensor, &meta, err)
                       : ld_dump_writer_add_tensor(sink->dump, ev->tensor, &meta, err);
    sink->dump_seconds += ld_run_now() - start;
    sink->dump_cpu_seconds += ld_run_thread_cpu() - cpu_start;
    if (st == LD_OK)
        sink->dumped++;
    return st;
}

ld_status ld_run_observe(void *user, const ld_tensor_event *ev, ld_error *err)
{
    ld_run_sink *sink = user;
    if (sink->interrupted && *sink->interrupted)
        return ld_error_set(err, LD_ERR_INTERRUPTED, "interrupted by %s",
                            *sink->interrupted == SIGTERM ? "SIGTERM" : "SIGINT");
    ld_status st = check_event(sink, ev, err);
    if (st != LD_OK)
        return st;
    const ld_value *v = &sink->graph->values[ev->value];
    if (v->is_graph_output) {
        for (int k = 0; k < sink->graph->n_outputs; k++)
            if (sink->graph->outputs[k] == ev->value)
                ld_run_stats_compute(ev->tensor, &sink->outputs[k]);
    }
    if (!ev->node)
        return LD_OK; /* graph inputs are in the dump's /inputs */
    sink->layers++;
    add_counters(&sink->counters, ev);
    if (sink->progress)
        draw_progress(sink, ev->node);
    if (sink->dump && (!sink->outputs_only || v->is_graph_output))
        st = ld_run_write_tensor(sink, sink->dump_run, ev, err);
    return st;
}

ld_status ld_run_sink_finish(ld_run_sink *sink, ld_error *err)
{
    if (sink->progress)
        ld_progress_end(&sink->line);
    const ld_graph *g = sink->graph;
    for (int k = 0; k < g->n_outputs; k++) {
        const ld_value *v = &g->values[g->outputs[k]];
        if (!sink->outputs[k].produced && v->kind != LD_VALUE_INITIALIZER)
            return ld_error_set(err, LD_ERR_INPUT, "backend '%s' did not produce graph output "
                                "'%s'", sink->backend, v->name);
    }
    return LD_OK;
}
