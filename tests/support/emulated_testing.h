/* layerdiff tests — scaffolding shared by the emulated backend's tests
 * (test_emulated.c, test_emulated_fused.c); any test may use it. Failures
 * end the test (cmocka).
 *  - emt_run runs a graph on the emulated backend and keeps a clone of every
 *    tensor the observer sees (emt_capture);
 *  - emt_run_every_level runs a cmocka group once per counting level of
 *    backends/emulated_count.c this CPU supports (ld_emu_force_level), so an
 *    AVX-512 machine also tests the AVX2 code. */
#ifndef LAYERDIFF_TESTS_EMULATED_TESTING_H
#define LAYERDIFF_TESTS_EMULATED_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/emulated_count.h"
#include "layerdiff/backend.h"
#include "layerdiff/engine.h"

struct CMUnitTest;

typedef struct emt_event {
    char value[64];        /* the value's name */
    char node[64];         /* the producing node's name ("" for graph inputs) */
    ld_tensor *t;          /* owned clone of the tensor; NULL when it was shown
                              without data (observe_outputs_only) */
    ld_precision precision;
    ld_layer_counters counters;
} emt_event;

typedef struct emt_capture {
    emt_event ev[64];
    int n;
} emt_capture;

/* Frees the clones *c holds and empties it (c itself is the caller's). */
void emt_capture_free(emt_capture *c);
/* The event of value `value` in c; fails the test when there is none. */
const emt_event *emt_find(const emt_capture *c, const char *value);
/* Runs g `runs` times on the emulated backend with `threads` threads and the
 * fused output rounding on or off (ld_emulated_set_fused_rounding; on is the
 * backend's default); inputs: one tensor per graph input. *cap (emptied
 * first with emt_capture_free) holds the last run's tensors: free them with
 * emt_capture_free. */
void emt_run(const ld_graph *g, const ld_engine_config *cfg, ld_tensor *const *inputs,
             emt_capture *cap, int runs, int threads, bool fused);
/* The same, telling the backend whether its observer reads only the graph
 * outputs (ld_backend_config.observe_outputs_only: chains fused, no float16
 * copies of other values). */
void emt_run_observing(const ld_graph *g, const ld_engine_config *cfg,
                       ld_tensor *const *inputs, emt_capture *cap, int runs, int threads,
                       bool fused, bool outputs_only);

/* The bits of f. */
uint32_t emt_bits(float f);
/* Every counter of got equals want's. */
void emt_expect_tally(const ld_emu_tally *got, const ld_emu_tally *want);

/* Runs tests (count of them) once per counting level the CPU supports, as
 * the cmocka group "<name>, counting level <level>", printing "# counting
 * level <level>" before each pass and a skip line for each level the CPU
 * cannot run; restores the automatic level after. Returns the number of
 * failed tests over all passes (main's exit status). */
int emt_run_every_level(const char *name, const struct CMUnitTest *tests, size_t count);

#endif
