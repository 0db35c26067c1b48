/* layerdiff — comparing tensors.
 *
 * This header starts with the element-wise closeness check the ONNX backend
 * tests use (numpy.testing.assert_allclose semantics); the per-layer metrics
 * and divergence analysis of the comparator extend it. */
#ifndef LAYERDIFF_COMPARE_H
#define LAYERDIFF_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/error.h"
#include "layerdiff/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif
