/* layerdiff CLI — what `layerdiff run` does with each tensor a backend
 * produces (cli/run_observer.c): write it into the dump, keep statistics of
 * the graph outputs, check the backend's events, and show progress. */
#ifndef LAYERDIFF_CLI_RUN_H
#define LAYERDIFF_CLI_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "layerdiff/backend.h"
#include "layerdiff/dump.h"

/* Summary statistics of one tensor (finite elements only for min/max/mean). */
typedef struct ld_run_stats {
    bool produced;
    ld_dtype dtype;
    ld_shape shape;
    int64_t count;
    int64_t finite;
    int64_t nans;
    int64_t infs;
    double min, max, mean;
} ld_run_stats;

/* The engine counters of a run (ld_tensor_event.counters), each layer counted
 * once (its outputs' events carry the same counters). */
#define LD_RUN_NAMED_LAYERS 3
typedef struct ld_run_counters {
    ld_layer_counters total;       /* present: the backend reported counters */
    int64_t overflow_layers, nan_layers, underflow_layers, subnormal_layers;
    const ld_node *overflowed[LD_RUN_NAMED_LAYERS]; /* first layers with overflows */
    const ld_node *last;           /* the layer whose counters were added last */
} ld_run_counters;

/* Prints "  counters  overflows ..." (one line) when the run had counters. */
void ld_run_counters_print(const ld_run_counters *c, FILE *out);

/* State of one backend's run, passed to ld_run_observe as `user`. */
typedef struct ld_run_sink {
    const ld_graph *graph;
    const char *backend;           /* name, for messages */
    ld_dump_writer *dump;          /* borrowed; NULL: no dump */
    bool outputs_only;             /* --layers outputs */
    bool progress;                 /* draw a progress line on stderr */
    const volatile sig_atomic_t *interrupted; /* signal number, 0 while running */

    /* filled while running */
    int64_t layers;                /* node outputs seen */
    int64_t dumped;                /* tensors written to the dump */
    double dump_seconds;           /* time spent writing them */
    double last_progress;          /* monotonic time of the last progress line */
    bool *seen;                    /* owned; per graph value */
    ld_run_stats *outputs;         /* owned; per graph output */
    ld_run_counters counters;      /* the engine's counters, summed over layers */
} ld_run_sink;

/* Prepares sink for a run of `backend` over g (allocates seen/outputs). */
ld_status ld_run_sink_init(ld_run_sink *sink, const ld_graph *g, const char *backend,
                           ld_error *err);
void ld_run_sink_free(ld_run_sink *sink);

/* The observer (ld_tensor_observer) for the backend's run. */
ld_status ld_run_observe(void *user, const ld_tensor_event *ev, ld_error *err);

/* After the run: every graph output must have been produced. Clears the
 * progress line. */
ld_status ld_run_sink_finish(ld_run_sink *sink, ld_error *err);

/* Statistics of t into *s. */
void ld_run_stats_compute(const ld_tensor *t, ld_run_stats *s);
/* "min -0.25  max 3.5  mean 1.125" (+ "  nan N  inf M" when present) into buf. */
char *ld_run_stats_format(const ld_run_stats *s, char *buf, size_t size);

/* Seconds on the monotonic clock. */
double ld_run_now(void);

#endif
