/* layerdiff CLI — what `layerdiff run` does with each tensor a backend
 * produces (cli/run_observer.c): write it into the dump, keep statistics of
 * the graph outputs, check the backend's events, and show progress. */
#ifndef LAYERDIFF_CLI_RUN_H
#define LAYERDIFF_CLI_RUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/progress.h"
#include "layerdiff/backend.h"
#include "layerdiff/compare.h"
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
    int dump_run;                  /* the dump run handle tensors go to (-1, set by init:
                                      the writer's current run) */
    bool outputs_only;             /* --layers outputs */
    bool progress;                 /* draw a progress line on stderr */
    const volatile sig_atomic_t *interrupted; /* signal number, 0 while running */

    /* filled while running */
    int64_t layers;                /* node outputs seen */
    int64_t dumped;                /* tensors written to the dump */
    double dump_seconds;           /* time spent writing them (wall) */
    double dump_cpu_seconds;       /* the writing thread's CPU time in those writes: what
                                      they cost when other processes share the CPUs */
    ld_progress line;              /* the progress line (cli/progress.h): begun by init,
                                      drawn only when `progress` */
    bool *seen;                    /* owned; per graph value */
    ld_run_stats *outputs;         /* owned; per graph output */
    ld_run_counters counters;      /* the engine's counters, summed over layers */
    const char **input_names;      /* owned scratch for ld_run_node_inputs */
} ld_run_sink;

/* Prepares sink for a run of `backend` over g (allocates seen/outputs). */
ld_status ld_run_sink_init(ld_run_sink *sink, const ld_graph *g, const char *backend,
                           ld_error *err);
void ld_run_sink_free(ld_run_sink *sink);

/* The observer (ld_tensor_observer) for the backend's run. */
ld_status ld_run_observe(void *user, const ld_tensor_event *ev, ld_error *err);

/* Writes ev's tensor into sink->dump's run `handle` (-1: the current run),
 * with the producing node's metadata and input names; counts it and its
 * time in sink. */
ld_status ld_run_write_tensor(ld_run_sink *sink, int handle, const ld_tensor_event *ev,
                              ld_error *err);

/* The names of node's inputs ("" for omitted ones), in sink's scratch
 * (valid until the next call). */
const char *const *ld_run_node_inputs(ld_run_sink *sink, const ld_node *node);

/* After the run: every graph output must have been produced. Clears the
 * progress line. */
ld_status ld_run_sink_finish(ld_run_sink *sink, ld_error *err);

/* --- the live comparison (cli/run_compare.c) ------------------------------------------ */

/* One backend of a comparing run. */
typedef struct ld_run_side {
    const ld_backend_vtable *vt;
    void *state;                   /* created and prepared */
    const char *run_name;          /* its dump run's name */
    const char *config;            /* its dump run's config, or NULL */
    ld_run_sink sink;              /* set up by ld_run_compare_go (labelled with run_name);
                                      free with ld_run_compare_clear */
    double seconds;                /* time spent in the backend's calls */
} ld_run_side;

/* A reference and a test backend compared tensor by tensor. */
typedef struct ld_run_compare {
    const ld_graph *graph;
    const ld_tensor *const *inputs;     /* one per graph input, borrowed */
    ld_run_side *ref, *test;            /* borrowed */
    bool isolate;                       /* also run each test layer on the reference's inputs */
    bool outputs_only;                  /* --layers outputs: compare (and dump) graph outputs */
    bool progress;                      /* a progress line on stderr */
    const volatile sig_atomic_t *interrupted;
    ld_dump_writer *dump;               /* borrowed; NULL: no dump */
    ld_compare_session *session;        /* borrowed: receives every compared pair */
    /* filled by ld_run_compare_go: */
    bool lockstep;                      /* false: the reference ran first into a temporary
                                           dump (a backend without the stepwise slots) */
    bool isolated;                      /* isolated error was computed */
    int64_t isolated_layers;            /* nodes run on the reference's inputs */
    double isolate_seconds;             /* time of the isolated layers (in test->seconds too) */
    double compare_seconds;             /* time in the comparison session (in the sides'
                                           seconds too when it ran inside their observers) */
    ld_run_sink iso_sink;               /* the isolated run's dump writes */
} ld_run_compare;

/* Runs both backends on c->inputs and hands every compared tensor pair to
 * c->session, in topological order, graph inputs first. Lockstep when both
 * backends offer the stepwise slots: node by node, the reference steps, the
 * test layer runs on the reference's inputs (isolation), the test steps and
 * its outputs are compared with the reference's, then both free what died;
 * memory is the two backends' live sets plus one node's isolated outputs.
 * Otherwise the reference runs first into a temporary dump in $TMPDIR
 * (removed whatever happens; nothing large is kept in memory) and the test
 * run reads the reference tensors back by name, without isolation (said on
 * stderr). With c->dump, the runs are written there (the isolated one as
 * "<test run>.isolated", isolated_of = the test run). */
ld_status ld_run_compare_go(ld_run_compare *c, ld_error *err);
void ld_run_compare_clear(ld_run_compare *c);

/* Statistics of t into *s. */
void ld_run_stats_compute(const ld_tensor *t, ld_run_stats *s);
/* "min -0.25  max 3.5  mean 1.125" (+ "  nan N  inf M" when present) into buf. */
char *ld_run_stats_format(const ld_run_stats *s, char *buf, size_t size);

/* Seconds on the monotonic clock. */
double ld_run_now(void);
/* CPU time of the calling thread, in seconds. */
double ld_run_thread_cpu(void);

#endif
