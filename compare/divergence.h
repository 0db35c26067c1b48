/* layerdiff — divergence analysis over a session's records (private to
 * compare/, and to tests/test_compare_session.c, which builds records by hand).
 *
 * ld_divergence_analyze works on records alone (no tensors, no metrics
 * computation), so it can be checked on hand-made records whose first
 * divergent, origin and culprit layers are known by construction. */
#ifndef LAYERDIFF_COMPARE_DIVERGENCE_H
#define LAYERDIFF_COMPARE_DIVERGENCE_H

#include "layerdiff/compare.h"

/* The default culprit threshold in ulps (ld_compare_options.culprit_ulp == 0). */
#define LD_DIVERGENCE_DEFAULT_CULPRIT_ULP 8.0

/* CRADLE's rate of change R = (δ - δ_in) / (δ_in + 1e-7), made total:
 * a NaN δ or δ_in (an empty tensor) counts as 0; δ = δ_in = +inf gives 0
 * (the infinity is inherited); δ_in = +inf with δ finite gives -1 (the
 * limit); δ = +inf with δ_in finite gives +inf. Never NaN. */
double ld_divergence_rate(double delta, double delta_in);

/* Max abs error of m in ulps of p at the tensor's scale (its largest finite
 * |reference|; the ulp at 0 when it has none): +inf for an infinite error,
 * NaN for non-float or empty tensors. */
double ld_divergence_scaled_ulp(const ld_tensor_metrics *m, ld_precision p, bool is_float);

/* The δ of a record: its accumulated mean abs error, 0 when that is NaN. */
double ld_divergence_delta(const ld_compare_record *r);

/* Fills every record's scaled ulps, origin / rate_of_change / culprit and *summary
 * (whose origins/culprits point to *origins / *culprits: new arrays, caller
 * frees, NULL when empty). records[i].inputs must hold -1 or an index below
 * i (LD_ERR_INTERNAL otherwise). culprit_ulp <= 0 means the default.
 * Deterministic: ties in either ranking go to the earlier record. */
ld_status ld_divergence_analyze(ld_compare_record *records, int n, double culprit_ulp,
                                ld_compare_summary *summary, int **origins, int **culprits,
                                ld_error *err);

#endif
