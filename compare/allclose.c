/* layerdiff — numpy-style allclose with NaN/inf parity (see compare.h). */
#include <math.h>
#include <string.h>

#include "layerdiff/compare.h"
#include "layerdiff/round.h"

static bool dtypes_compatible(ld_dtype actual, ld_dtype expected)
{
    return actual == expected ||
           (actual == LD_DTYPE_BFLOAT16 && expected == LD_DTYPE_UINT16);
}

/* Element i as double; uint16 standing in for bfloat16 is decoded as such. */
static double element(const ld_tensor *t, int64_t i, bool as_bf16)
{
    if (as_bf16)
        return ld_bf16_to_fp32(((const ld_bf16 *)t->data)[i]);
    return ld_tensor_get_double(t, i);
}

/* How far apart two elements are: 0 when they match, +inf on NaN/inf parity
 * failure, else |a - e| minus the allowed tolerance (> 0 means failure). */
static double excess_error(double a, double e, double rtol, double atol, double *abs_error)
{
    if (isnan(a) || isnan(e)) {
        *abs_error = (isnan(a) && isnan(e)) ? 0.0 : INFINITY;
        return *abs_error;
    }
    if (isinf(a) || isinf(e)) {
        *abs_error = (a == e) ? 0.0 : INFINITY;
        return *abs_error;
    }
    *abs_error = fabs(a - e);
    return *abs_error - (atol + rtol * fabs(e));
}

ld_status ld_allclose(const ld_tensor *actual, const ld_tensor *expected, double rtol, double atol,
                      const char *what, ld_allclose_result *result, ld_error *err)
{
    if (!what)
        what = "tensor";
    memset(result, 0, sizeof *result);
    result->worst_index = -1;
    if (!dtypes_compatible(actual->dtype, expected->dtype))
        return ld_error_set(err, LD_ERR_INPUT, "%s: dtype %s, expected %s", what,
                            ld_dtype_name(actual->dtype), ld_dtype_name(expected->dtype));
    if (!ld_shape_equal(&actual->shape, &expected->shape)) {
        char a[128], e[128];
        return ld_error_set(err, LD_ERR_INPUT, "%s: shape %s, expected %s", what,
                            ld_shape_format(&actual->shape, a, sizeof a),
                            ld_shape_format(&expected->shape, e, sizeof e));
    }
    bool as_bf16 = expected->dtype == LD_DTYPE_UINT16 && actual->dtype == LD_DTYPE_BFLOAT16;
    bool exact = !ld_dtype_is_float(actual->dtype);
    double worst = 0.0;
    for (int64_t i = 0; i < actual->count; i++) {
        double a = element(actual, i, as_bf16), e = element(expected, i, as_bf16), abs_error;
        double excess;
        if (exact) {
            /* int64 values above 2^53 would collide as doubles: compare bytes. */
            size_t size = ld_dtype_size(actual->dtype);
            bool same = memcmp((const char *)actual->data + (size_t)i * size,
                               (const char *)expected->data + (size_t)i * size, size) == 0;
            abs_error = fabs(a - e);
            excess = same ? 0.0 : (abs_error > 0 ? abs_error : 1.0);
        } else {
            excess = excess_error(a, e, rtol, atol, &abs_error);
        }
        if (excess > 0) {
            result->n_mismatch++;
            if (result->worst_index < 0 || excess > worst) {
                worst = excess;
                result->worst_index = i;
                result->worst_actual = a;
                result->worst_expected = e;
                result->worst_abs_error = abs_error;
            }
        }
    }
    result->pass = result->n_mismatch == 0;
    return LD_OK;
}
