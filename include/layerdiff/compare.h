/* layerdiff — comparing tensors and runs (metrics: docs/metrics.md).
 *
 * Three layers, each usable alone:
 *   1. ld_allclose: the element-wise check of the ONNX backend tests.
 *   2. ld_compare_tensors: every metric of one (reference, test) tensor pair,
 *      computed in double, plus the pass/fail verdict under a tolerance.
 *   3. ld_compare_session: fed one tensor pair at a time in topological order
 *      (live from `run`, or from dumps in `compare`), keeps a small record per
 *      tensor (never the tensors) and, at finish, finds the first divergent
 *      layer, the origin layers and the culprits. Reports (report/) render a
 *      finished session. */
#ifndef LAYERDIFF_COMPARE_H
#define LAYERDIFF_COMPARE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "layerdiff/error.h"
#include "layerdiff/numerics.h"
#include "layerdiff/round.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- 1. allclose (conformance) ------------------------------------------------------- */

typedef struct ld_allclose_result {
    bool pass;
    int64_t n_mismatch;      /* elements failing the check */
    int64_t worst_index;     /* flat index of the worst element (-1 if none) */
    double worst_actual;
    double worst_expected;
    double worst_abs_error;  /* |actual - expected| there (inf for NaN/inf parity failures) */
} ld_allclose_result;

/* Checks |actual - expected| <= atol + rtol * |expected| element-wise, with
 * NaN and infinity parity (NaN matches NaN, +inf matches +inf only), in
 * double. Integer and bool tensors must match exactly. Fails with
 * LD_ERR_INPUT naming `what` when dtypes or shapes differ (bfloat16 against
 * a uint16 tensor of the same bits is accepted: the ONNX test data stores
 * bfloat16 that way). */
ld_status ld_allclose(const ld_tensor *actual, const ld_tensor *expected, double rtol, double atol,
                      const char *what, ld_allclose_result *result, ld_error *err);

/* ---- 2. tensor-pair metrics ---------------------------------------------------------- */

/* Polygraphy's epsilon for relative error where the reference is 0, so
 * users' rtol values carry over: rel = |t - r| / (|r| + eps) for r == 0 only
 * (Polygraphy divides by |r| elsewhere too, without eps when r != 0). */
#define LD_COMPARE_REL_EPSILON 2.22e-16

typedef enum ld_tol_mode {
    LD_TOL_POLYGRAPHY = 0, /* element fails when (abs > atol or NaN) AND (rel > rtol or NaN) */
    LD_TOL_ALLCLOSE        /* element fails when !(|t - r| <= atol + rtol * |r|) */
} ld_tol_mode;

typedef enum ld_check_stat {
    LD_CHECK_ELEMWISE = 0, /* every element must pass the element rule */
    LD_CHECK_MAX,          /* the tensor passes when !(max abs > atol AND max rel > rtol) */
    LD_CHECK_MEAN,
    LD_CHECK_MEDIAN,
    LD_CHECK_QUANTILE      /* the `quantile` quantile of abs and of rel */
} ld_check_stat;

/* How one tensor is judged. */
typedef struct ld_tolerance {
    double atol, rtol;
    ld_tol_mode mode;
    ld_check_stat check;
    double quantile;       /* for LD_CHECK_QUANTILE, in [0, 1] */
    bool nan_is_error;     /* any NaN in the test tensor fails it, even where r is NaN */
} ld_tolerance;

/* Exact order statistics of one error measure over all elements (nearest-rank
 * on the sorted values: the q quantile of n values is element
 * ceil(q * n) - 1, clamped to [0, n-1]; median = 0.5 quantile). Elements where
 * exactly one side is NaN or they are unequal infinities count as +inf error;
 * NaN/inf in the same place on both sides count as 0. All NaN when n == 0. */
typedef struct ld_error_stats {
    double max, mean, median, p90, p95, p99;
    double quantile;       /* at ld_tolerance.quantile (LD_CHECK_QUANTILE), else NaN */
    int64_t max_index;     /* flat index of the (first) max, -1 when n == 0 */
} ld_error_stats;

/* One side's values. min/max/mean/std over finite values (NaN when none). */
typedef struct ld_side_stats {
    int64_t nan, pos_inf, neg_inf;
    int64_t subnormal;     /* nonzero values below the smallest normal of the side's own
                              dtype (float32 for float32 tensors, fp16 for float16, ...) */
    int64_t zero;
    double min, max, mean, std;
} ld_side_stats;

typedef struct ld_tensor_metrics {
    int64_t n;                  /* elements compared */
    ld_error_stats abs;         /* |t - r| */
    ld_error_stats rel;         /* |t - r| / |r| (epsilon rule above) */
    ld_error_stats ulp;         /* |t - r| / ulp_p(r), p = the layer precision; only max,
                                   mean, p99 are filled, others NaN */
    int64_t rel_tiny_ref;       /* elements with 0 < |r| < smallest normal of p: rel error
                                   there is meaningless, reported not hidden */
    double cosine;              /* Σrt / sqrt(Σr² Σt²); 1 when both all-zero, NaN if any
                                   non-finite pair remains after removing matching specials */
    double snr_db;              /* 10 log10(Σr² / Σ(t-r)²); +inf when equal */
    double l2_rel;              /* sqrt(Σ(t-r)²) / sqrt(Σr²); 0 when equal, +inf when r = 0 */
    ld_side_stats ref, test;
    int64_t nonfinite_test_only;/* t NaN/inf where r is finite */
    int64_t special_mismatch;   /* NaN/inf not matched on the other side, either way */
    int64_t would_overflow;     /* |r| > max finite of p, for p = fp16 or bf16 (else 0) */
    int64_t underflow_zero;     /* t == 0 where r != 0 */
    /* verdict under the tolerance given */
    int64_t n_fail;             /* elements failing the element rule (also counted for the
                                   statistic checks, for reports) */
    int64_t first_fail_index;   /* flat index, -1 when none */
    bool pass;
} ld_tensor_metrics;

/* Reusable scratch (sorting buffers) so a session does not allocate per
 * tensor. Created empty; grows to the largest tensor seen. */
typedef struct ld_compare_scratch ld_compare_scratch;
ld_status ld_compare_scratch_create(ld_compare_scratch **out, ld_error *err);
void ld_compare_scratch_destroy(ld_compare_scratch *s);

/* Computes every metric of the pair. ref and test must have the same shape
 * (else LD_ERR_INPUT naming `what`, both shapes); any two float dtypes
 * compare (an fp16 test tensor against an fp32 reference is the normal case);
 * integer/bool tensors compare only with integer/bool tensors, exactly
 * (abs/rel on their values; ulp NaN). precision: what the test layer computed
 * in (for ulp, tiny-reference and overflow counts). scratch may be NULL
 * (allocates then). */
ld_status ld_compare_tensors(const ld_tensor *ref, const ld_tensor *test, ld_precision precision,
                             const ld_tolerance *tol, ld_compare_scratch *scratch,
                             const char *what, ld_tensor_metrics *out, ld_error *err);

/* ---- tolerances from the command line ------------------------------------------------ */

/* --atol / --rtol: a default and per-tensor overrides, "PATTERN:VALUE" with
 * PATTERN a glob over tensor names (fnmatch, last matching entry wins). */
typedef struct ld_tolerance_override {
    char *pattern;
    double value;
} ld_tolerance_override;

typedef struct ld_tolerance_spec {
    bool atol_set, rtol_set;         /* a global value was given */
    double atol, rtol;
    int n_atol, n_rtol;
    ld_tolerance_override *atol_overrides, *rtol_overrides;
    ld_tol_mode mode;
    ld_check_stat check;
    double quantile;
    bool nan_is_error;
} ld_tolerance_spec;

/* Parses one --atol/--rtol argument ("1e-3" or "PATTERN:1e-2") into spec.
 * LD_ERR_USAGE with a one-line message on a bad number or empty pattern. */
ld_status ld_tolerance_spec_add(ld_tolerance_spec *spec, bool is_atol, const char *arg,
                                ld_error *err);
void ld_tolerance_spec_free(ld_tolerance_spec *spec);
/* The default atol = rtol for a test layer precision: 1e-5 for fp32, ten
 * times the unit roundoff otherwise (fp16/tf32 10*2^-11, bf16 10*2^-8). */
double ld_tolerance_default(ld_precision precision);
/* The tolerance for one tensor: overrides, else the global value, else the
 * default for its precision. */
ld_tolerance ld_tolerance_for(const ld_tolerance_spec *spec, const char *tensor_name,
                              ld_precision precision);

/* ---- 3. a comparison session --------------------------------------------------------- */

/* One tensor pair handed to a session. Everything borrowed for the call. */
typedef struct ld_compare_item {
    const char *name;           /* tensor name */
    const char *node;           /* producing node ("" for graph inputs) */
    const char *op_type;        /* "" for graph inputs */
    int64_t topo_index;         /* producing node's topological index, -1 for inputs */
    int output_index;
    ld_precision precision;     /* what the test layer computed in */
    ld_layer_counters counters; /* the test engine's counters for the layer */
    int n_inputs;               /* the producing node's input tensor names; "" = omitted */
    const char *const *inputs;
    bool is_graph_output;
    const ld_tensor *ref;
    const ld_tensor *test;
    const ld_tensor *isolated;  /* the test layer run on the reference's inputs, or NULL */
} ld_compare_item;

/* What a session keeps per tensor (owned by the session). */
typedef struct ld_compare_record {
    char *name, *node, *op_type;
    int64_t topo_index;
    int output_index;
    ld_precision precision;
    ld_layer_counters counters;
    ld_dtype ref_dtype, test_dtype;
    ld_shape shape;
    bool is_graph_output;
    bool is_float;
    int n_inputs;               /* indices of input records (earlier in the session), -1 for
                                   inputs that were not compared (initializers, omitted) */
    int *inputs;
    char **input_names;         /* the item's input names, n_inputs of them ("" = omitted) */
    ld_tolerance tol;
    ld_tensor_metrics metrics;  /* accumulated: test run vs reference */
    bool has_isolated;
    ld_tensor_metrics isolated; /* isolated: test layer on reference inputs vs reference */
    /* filled by ld_compare_session_finish: */
    bool origin;                /* fails while all its compared inputs pass: its float
                                   inputs (the rule) and also its integer ones (a
                                   failing index/shape input means the error is inherited) */
    double rate_of_change;      /* CRADLE R = (δ - δ_in) / (δ_in + 1e-7), δ = mean abs error,
                                   δ_in the largest δ of its compared float inputs (0 if none);
                                   special values: docs/report-schema.md, "Divergence" */
    bool culprit;               /* isolated error far above normal rounding, or overflowed */
    /* Max abs error in ulps of `precision` at the tensor's scale, its largest finite
       |reference| (ulp at 0 when it has none): unlike ulp.max, which is per element and
       explodes where cancellation makes r tiny, this measures the error against the
       layer's dynamic range. NaN for non-float or empty tensors. Filled by finish. */
    double scaled_ulp;          /* accumulated */
    double isolated_scaled_ulp; /* isolated (NaN without isolated metrics) */
    /* Clip outputs: elements on the other side of a bound than in the reference (exactly
       one of r, t sits at a bound; bounds read off the tensors, compare/clip_crossing.h),
       accumulated run. -1 for tensors of other ops. Filled by add. */
    int64_t clip_crossings;
} ld_compare_record;

typedef struct ld_compare_options {
    ld_tolerance_spec tol;      /* borrowed by the session */
    /* A layer is a culprit when its isolated error in ulps at its scale
       (ld_compare_record.isolated_scaled_ulp) exceeds this (default 8 when 0) or its
       isolated output overflowed (would_overflow or nonfinite_test_only > 0). */
    double culprit_ulp;
    /* Threads a session may use (0 or 1: the caller's only). With 2 or more, a record's
       accumulated and isolated pairs are compared at once, each on its own scratch: the
       same code on the same data, so the same values either way. */
    int threads;
} ld_compare_options;

typedef struct ld_compare_summary {
    bool pass;                  /* every compared tensor passed */
    int n_compared, n_failed;
    int first_divergent;        /* record index, -1 when none */
    int n_origins;              /* origin record indices, ranked by rate_of_change desc */
    const int *origins;
    int n_culprits;             /* culprit record indices, ranked by isolated_scaled_ulp desc */
    const int *culprits;
    int64_t overflows, nans_created, underflows; /* sums of the test engine's counters */
    int64_t would_overflow;     /* sum over records */
    bool has_isolated;          /* any record has isolated metrics */
    int64_t clip_crossings;     /* sum of the records' clip_crossings; -1 when no record is a
                                   Clip output */
} ld_compare_summary;

typedef struct ld_compare_session ld_compare_session;

/* opts is copied except opts->tol, which is borrowed and must outlive the
 * session. Return value: new session, free with ld_compare_session_destroy. */
ld_status ld_compare_session_create(ld_compare_session **out, const ld_compare_options *opts,
                                    ld_error *err);
void ld_compare_session_destroy(ld_compare_session *s);
/* Judges one pair (metrics computed now; tensors not kept). Items must come
 * in topological order (graph inputs first); a duplicate name is an error.
 * Order means (topo_index, output_index) increasing, graph inputs
 * (topo_index -1) before every layer output; finish also refuses an item
 * that named as input a tensor added after it. Add graph inputs as items
 * (a live run passes the same tensor as ref and test): they take part in
 * pass/fail like any tensor and let origin analysis see a differing input
 * (two dumps made from different inputs). Inputs never added (initializers,
 * layers not compared) are -1 in the record and do not count as inputs. */
ld_status ld_compare_session_add(ld_compare_session *s, const ld_compare_item *item,
                                 ld_error *err);
/* Divergence analysis over all records; call once, after the last add. */
ld_status ld_compare_session_finish(ld_compare_session *s, ld_error *err);
int ld_compare_session_count(const ld_compare_session *s);
/* Borrowed, valid until destroy. */
const ld_compare_record *ld_compare_session_record(const ld_compare_session *s, int i);
/* Borrowed; valid after finish. */
const ld_compare_summary *ld_compare_session_summary(const ld_compare_session *s);
/* The options the session judges with (its copy; tol as given). Borrowed. */
const ld_compare_options *ld_compare_session_options(const ld_compare_session *s);

#ifdef __cplusplus
}
#endif
#endif
