/* layerdiff — the model inputs a run is fed: generated from a seed, or
 * loaded from .npy / .pb files or a layerdiff dump.
 *
 * Generated inputs are reproducible on every machine: each input has its own
 * xoshiro256** stream (https://prng.di.unimi.it/), seeded from the run's seed
 * and the input's name (below), and values are made with integer arithmetic
 * and IEEE double operations only. The same seed, name, dtype, shape and range
 * give the same bytes everywhere, whatever the input order.
 *
 * Shapes: a graph input's declared dims may be symbolic ("batch") or unknown.
 * --input-shapes gives them values, either per symbolic dim ("batch:2") or as
 * an input's whole shape ("x:1x3x224x224"); loaded tensors bring their own
 * shapes. Anything left without a value is an error that says what to pass. */
#ifndef LAYERDIFF_INPUTS_H
#define LAYERDIFF_INPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/graph.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- the random generator ------------------------------------------------------ */

/* xoshiro256** (Blackman & Vigna, 2018), state filled by splitmix64. */
typedef struct ld_rng {
    uint64_t s[4];
} ld_rng;

/* splitmix64: advances *x and returns the next output. */
uint64_t ld_splitmix64(uint64_t *x);
/* State = four splitmix64 outputs starting from `seed`. */
void ld_rng_seed(ld_rng *rng, uint64_t seed);
uint64_t ld_rng_next(ld_rng *rng);
/* Uniform double in [0, 1): the top 53 bits of ld_rng_next times 2^-53. */
double ld_rng_uniform(ld_rng *rng);
/* Uniform integer in [0, span) without modulo bias (rejection sampling);
 * span 0 means the full 2^64 range. */
uint64_t ld_rng_below(ld_rng *rng, uint64_t span);

/* The stream of input `name` under `seed`: ld_rng_seed(seed XOR FNV-1a-64(name)). */
void ld_rng_for_input(ld_rng *rng, uint64_t seed, const char *name);

/* --- generating values -------------------------------------------------------- */

/* Closed interval of generated values. */
typedef struct ld_value_range {
    double lo, hi;
} ld_value_range;

/* Fills t (its dtype and shape already set) with values from the stream of
 * t->name under seed:
 *   float types: lo + (hi - lo) * u, u = ld_rng_uniform, computed in double and
 *                rounded to the dtype (RNE);
 *   integers:    uniform over the integers in [ceil(lo), floor(hi)];
 *   bool:        the top bit of ld_rng_next.
 * Fails (LD_ERR_USAGE, naming t->name) when the range is not finite, lo > hi,
 * it leaves the dtype's range, or holds no integer for an integer dtype;
 * LD_ERR_UNSUPPORTED for dtypes without data (string, complex). */
ld_status ld_inputs_fill_random(ld_tensor *t, uint64_t seed, ld_value_range range,
                                ld_error *err);

/* --- .npy files ---------------------------------------------------------------- */

/* Header limit: numpy writes ~128 bytes; hostile files claim gigabytes. */
#define LD_NPY_MAX_HEADER (1u << 20)

/* Reads a .npy file (format versions 1.0, 2.0 and 3.0) into a new tensor
 * named `name` (NULL: ""). Little-endian (or byte-order-free) dtypes <f2 <f4
 * <f8 <i1..<i8 <u1..<u8 |b1, C order. Fortran order, big-endian and
 * structured dtypes, malformed or truncated headers, a data size that does not
 * match the shape and bool bytes other than 0/1 fail with one line naming the
 * file. Caller frees with ld_tensor_destroy. */
ld_status ld_npy_read_file(ld_tensor **out, const char *path, const char *name,
                           ld_error *err);
/* The same from memory; display_name is used in messages. */
ld_status ld_npy_read_buffer(ld_tensor **out, const uint8_t *data, size_t size,
                             const char *display_name, const char *name, ld_error *err);

/* --- parsing the command-line forms ------------------------------------------- */

/* One NAME:VALUE item of --input-shapes / --val-range, parsed. */
typedef struct ld_input_shape_arg {
    char *name;     /* owned; an input name or a symbolic dim name */
    ld_shape shape; /* the value; a single number is rank 1 */
} ld_input_shape_arg;

typedef struct ld_input_range_arg {
    char *name;     /* owned; NULL for the global "[lo,hi]" */
    ld_value_range range;
} ld_input_range_arg;

/* "a:1x3x224x224,batch:2" (items split at commas, NAME at the last ':';
 * "scalar" is rank 0). New array in *out (free with ld_input_shape_args_free). */
ld_status ld_inputs_parse_shapes(const char *text, ld_input_shape_arg **out, int *n,
                                 ld_error *err);
void ld_input_shape_args_free(ld_input_shape_arg *args, int n);
/* "[0,1],ids:[0,999]" (commas inside brackets belong to the range). */
ld_status ld_inputs_parse_ranges(const char *text, ld_input_range_arg **out, int *n,
                                 ld_error *err);
void ld_input_range_args_free(ld_input_range_arg *args, int n);

/* --- the inputs of a run ---------------------------------------------------------- */

typedef struct ld_inputs_options {
    const char *shapes;           /* --input-shapes text, or NULL */
    const char *ranges;           /* --val-range text, or NULL (default [0,1]) */
    uint64_t seed;                /* --seed (default 1) */
    int n_sources;                /* --load-inputs values; 0: generate */
    const char *const *sources;
} ld_inputs_options;

typedef struct ld_input_set {
    int n;                        /* = graph->n_inputs */
    ld_tensor **tensors;          /* owned; one per graph->inputs, named as the input */
    ld_shape *shapes;             /* owned; the tensors' shapes (for backend prepare) */
    bool generated;               /* true: made from `seed`; false: loaded */
    uint64_t seed;
} ld_input_set;

/* Makes the inputs of graph g: loads them when opts->sources are given, else
 * generates them. Sources: one folder (NAME.npy, or input_N.pb in graph-input
 * order as in the ONNX test data; a name that is not a plain file name is
 * looked up escaped as in dumps, e.g. "a%2Fb.npy"), one .npy or .pb file
 * (models with one input), one layerdiff dump (its /inputs), or NAME:FILE
 * items (comma-separated and/or one per source) covering every input.
 * Every dtype and shape is checked against the model; errors name the input.
 * On failure *out is left empty. Free with ld_input_set_clear. */
ld_status ld_inputs_make(ld_input_set *out, const ld_graph *g, const ld_inputs_options *opts,
                         ld_error *err);
void ld_input_set_clear(ld_input_set *set);

/* Concrete shapes for g's inputs from --input-shapes items and the shapes of
 * already loaded tensors (loaded may be NULL, or hold NULL entries). Checks
 * every given shape against the declared one (rank, fixed dims, the same
 * symbolic dim bound to one value) and fails naming the input and what to
 * pass when a dim stays without a value. out has g->n_inputs entries. */
ld_status ld_inputs_resolve_shapes(const ld_graph *g, const ld_input_shape_arg *args, int n_args,
                                   const ld_tensor *const *loaded, ld_shape *out,
                                   ld_error *err);

#ifdef __cplusplus
}
#endif
#endif
