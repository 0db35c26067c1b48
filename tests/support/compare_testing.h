/* layerdiff tests — scaffolding shared by the comparator tests
 * (test_compare_metrics.c, test_compare_streaming.c); any test may use it.
 * Failures end the test (cmocka). */
#ifndef LAYERDIFF_TESTS_COMPARE_TESTING_H
#define LAYERDIFF_TESTS_COMPARE_TESTING_H

#include <stdbool.h>
#include <stdint.h>

#include "layerdiff/compare.h"

/* a and b equal within rel (relative to the larger), NaN only with NaN, an
 * infinity only with itself; differences below 1e-300 count as equal. */
bool cmpt_same_double(double a, double b, double rel);

#define cmpt_assert_close(a, b, rel)                                                            \
    do {                                                                                        \
        double a_ = (a), b_ = (b);                                                              \
        if (!cmpt_same_double(a_, b_, rel))                                                     \
            fail_msg("%s = %.17g, expected %.17g (%s:%d)", #a, a_, b_, __FILE__, __LINE__);     \
    } while (0)

#define cmpt_assert_exact(a, b) cmpt_assert_close(a, b, 0.0)

/* A new zero-filled tensor named "t" (free with ld_tensor_destroy). */
ld_tensor *cmpt_make_tensor(ld_dtype dtype, int rank, const int64_t *dims);

/* Polygraphy-mode tolerances, element-wise check, quantile 0.5. */
ld_tolerance cmpt_tolerance(double atol, double rtol);

/* ld_compare_tensors without a scratch; fails the test on an error. */
ld_tensor_metrics cmpt_compare(const ld_tensor *r, const ld_tensor *t, ld_precision p,
                               const ld_tolerance *tol);

/* An exact sum of doubles: Shewchuk's nonoverlapping expansion (as
 * Python's math.fsum), independent of the library's compensated sums.
 * Zero-initialise. The parts never overlap, so there are at most as many
 * as the ~2100 bit positions doubles span. */
typedef struct cmpt_exact_sum {
    int n;
    double part[2200];
} cmpt_exact_sum;

void cmpt_exact_add(cmpt_exact_sum *s, double x);
/* Adds a * b exactly (the product and its rounding error, by fma). */
void cmpt_exact_add_product(cmpt_exact_sum *s, double a, double b);
/* The sum, rounded (to nearest but for rare ties). */
double cmpt_exact_value(const cmpt_exact_sum *s);

/* docs/metrics.md's cosine, snr_db and l2_rel from Σrt, Σr², Σt², Σ(t-r)²
 * (and whether a special pair mismatched). */
void cmpt_similarity(double srt, double srr, double stt, double sdd, int64_t mismatch,
                     double *cosine, double *snr_db, double *l2_rel);

/* How close the library's cosine, snr_db and l2_rel must be to the ones
 * from exact sums, relative (for snr_db, to max(|snr_db|, 10/ln 10): its
 * error is 10/ln 10 times the relative error of Σr²/Σ(t-r)²). The portable
 * kernel's compensated sums are within 2 ulps; the AVX-512 kernel sums
 * Σr², Σt², Σ(t-r)² in 8 lanes of 512 plain additions per block (tens of
 * ulps at worst: 21 seen), whatever the cancellation (docs/metrics.md). */
#define CMPT_SIMILARITY_REL (64 * 0x1p-53)

/* Fails unless got is within CMPT_SIMILARITY_REL of want, as above. */
void cmpt_assert_similarity(const ld_tensor_metrics *got, double cosine, double snr_db,
                            double l2_rel, const char *label);

/* Runs body with every comparator kernel the CPU supports, best first
 * (AVX-512, AVX2, portable; cmp_force_level), then restores the default. */
void cmpt_each_kernel(void (*body)(void));
/* The kernel in use: "AVX-512", "AVX2" or "portable". Static string. */
const char *cmpt_kernel_name(void);

#endif
