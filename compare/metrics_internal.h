/* layerdiff — private to compare/metrics*.c and compare/quantile.c.
 *
 * ld_compare_tensors (metrics.c) walks a tensor pair in blocks of
 * CMP_BLOCK elements. Each block is evaluated either by the portable
 * kernel (metrics_portable.c: any dtypes, any values, in double) or, for
 * blocks of finite values held as float32 (float16/bfloat16 widened
 * first), by a vector kernel (metrics_fast.c drives the AVX-512 one,
 * metrics_fast_avx512.c, or the AVX2 one, metrics_fast_avx2.c); all add
 * the block into a cmp_acc. The order statistics come from quantile.c: all errors kept
 * and selected for small tensors; for large ones, intervals of keys around
 * each wanted rank, planned from a sample, that every block's errors are
 * counted against and kept inside (docs/metrics.md, "How the order
 * statistics are computed"). */
#ifndef LAYERDIFF_COMPARE_METRICS_INTERNAL_H
#define LAYERDIFF_COMPARE_METRICS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "layerdiff/compare.h"

#define CMP_BLOCK 4096

enum { CMP_ABS = 0, CMP_REL, CMP_ULP, CMP_MEASURES };

/* What a kernel needs to judge elements (set once per tensor pair). */
typedef struct cmp_params {
    double atol, rtol;
    ld_tol_mode mode;
    bool nan_is_error;
    bool want_ulp;             /* float tensors: ulp errors are computed */
    int ulp_digits;            /* precision's significand bits (incl. the implicit one) */
    int ulp_emin;              /* exponent of its smallest normal */
    double prec_min_normal;    /* for rel_tiny_ref */
    double prec_max;           /* for would_overflow (+inf when not counted) */
    double ref_min_normal;     /* subnormal counting, by each side's own dtype */
    double test_min_normal;
    double ref_shift;          /* side stats accumulate x - shift (near that side's values, */
    double test_shift;         /* or 0), so the variance does not cancel catastrophically */
    bool kernel_shifted;       /* the vector kernels subtract the shifts (else they sum x
                                  itself: the shifts are small against the spread) */
} cmp_params;

typedef struct cmp_side_acc {
    int64_t nan, pos_inf, neg_inf, subnormal, zero, finite;
    double s1, s2;             /* sums of (x - shift) and its square over finite values */
    double min, max;
} cmp_side_acc;

typedef struct cmp_acc {
    cmp_side_acc ref, test;
    double sum[CMP_MEASURES];
    double max[CMP_MEASURES];
    int64_t max_index[CMP_MEASURES];
    int64_t zero_err[CMP_MEASURES]; /* elements whose error is exactly 0 */
    int64_t inf_err[CMP_MEASURES];  /* ... is +inf */
    double srt, srr, stt, sdd;      /* Σrt, Σr², Σt², Σ(t-r)² over finite pairs */
    double srt_lo, srr_lo, stt_lo, sdd_lo; /* each sum is hi + lo, compensated (cmp_sum2_add):
                                       Σrt may cancel, and the others stay within a few
                                       ulps however many blocks add up */
    /* The vector kernels derive Σrt = (Σr² + Σt² - Σ(t-r)²) / 2 (and, when it
       shifts, Σx² = Σ(x-c)² + c(2Σ(x-c) + n c)): each is off by a few ulps of
       the sum of its terms' magnitudes, accumulated here. When that is not
       small against the result (a cosine near 0, sides of different scales,
       a shift far from the data), metrics.c sums them again
       (cmp_similarity_inexact, cmp_similarity_float_fast / _double). */
    double rt_scale, rr_scale, tt_scale;
    int64_t nonfinite_test_only, special_mismatch, would_overflow, underflow_zero;
    int64_t rel_tiny_ref, n_fail, first_fail, test_nan;
} cmp_acc;

void cmp_acc_init(cmp_acc *acc);

/* *hi + *lo += x, the rounding error of the addition kept in *lo (Knuth's
 * TwoSum: exact whatever the magnitudes). For sums that may cancel. */
static inline void cmp_sum2_add(double *hi, double *lo, double x)
{
    double sum = *hi + x, x_part = sum - *hi;
    *lo += (*hi - (sum - x_part)) + (x - x_part);
    *hi = sum;
}

void cmp_side_init(cmp_side_acc *side);

/* The ulp scale 1/ulp_p(r) as a power of two, for finite r (exact). */
double cmp_ulp_scale(const cmp_params *p, double r);

/* Σrt, Σr², Σt² over the finite pairs of m elements, compensated (hi + lo,
 * added to the acc's), for when the derived ones are not accurate enough
 * (cmp_acc: rt_scale). Portable (doubles) and vector (floats: AVX-512, or
 * AVX2 in metrics_fast_avx2_exact.c) versions (metrics_similarity.c). */
void cmp_similarity_double(const double *r, const double *t, int m, cmp_acc *acc);
void cmp_similarity_float_fast(const float *r, const float *t, int m, cmp_acc *acc);
/* Whether the acc's derived sums are not accurate to a few ulps. */
bool cmp_similarity_inexact(const cmp_acc *acc);

/* Portable kernel: m elements as doubles, index of the first = base.
 * differs: NULL for float pairs; for integer pairs, which elements are not
 * exactly equal (that, not the tolerance, is their verdict). ulp_out is
 * not written unless p->want_ulp. */
void cmp_block_double(const cmp_params *p, const double *r, const double *t,
                      const uint8_t *differs, int m, int64_t base, cmp_acc *acc,
                      double *abs_out, double *rel_out, double *ulp_out);

/* ---- order statistics (quantile.c) ---- */

#define QSEL_MAX_RANKS 5

/* The key of an error x >= 0: the high 32 bits of its bit pattern, which
 * order like the values (x truncated to 20 fraction bits): key(a) < key(b)
 * implies a < b, and one permute makes the keys of 16 errors. */
static inline uint32_t qsel_key(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (uint32_t)(bits >> 32);
}

/* The order statistics of one error measure over a stream of blocks. From
 * a sample, every wanted rank gets an interval of keys [lo, hi] that should
 * hold it; overlapping intervals are merged, so they are disjoint and
 * ascending. The stream counts, per interval, the keys >= lo and keeps the
 * exact errors whose key falls in any interval, counting how many in each;
 * the rank is then exact by selection among those. Zeros and +inf are
 * counted by the kernels (lo > 0, hi below the key of +inf). */
typedef struct qsel {
    int n_ranks;
    int64_t rank[QSEL_MAX_RANKS];
    int n_iv;
    int32_t lo[QSEL_MAX_RANKS], hi[QSEL_MAX_RANKS]; /* lo[i] <= hi[i] < lo[i + 1] */
    /* Narrow keys (abs and rel in the vector kernels, which compare the two
       side by side as 16-bit numbers): key = ((wide key - 1) >> shift) -
       bias, the shift arithmetic and the result saturated to int16 - a
       monotone map that keeps the intervals inside -32766..32766, everything
       below and above them outside, and 0 (exact zeros) below everything
       else. */
    bool narrow;
    int shift;
    int32_t bias;
    int64_t ge[QSEL_MAX_RANKS];                   /* keys >= lo[i] seen */
    int64_t seen;
    int64_t in_iv[QSEL_MAX_RANKS];                /* errors kept in interval i */
    double *cand;              /* the kept errors (scratch): n of room for cap + 16 */
    int64_t n, cap;
    bool overflow;             /* more than cap: answer by recomputation */
} qsel;

/* The key of x as q compares it (narrow or not). */
static inline int32_t qsel_key_of(const qsel *q, double x)
{
    uint32_t k = qsel_key(x);
    if (!q->narrow)
        return (int32_t)k; /* an error is >= 0: its sign bit is clear */
    int64_t v = (k == 0 ? -1 : (int64_t)((k - 1) >> q->shift)) - q->bias;
    return v < INT16_MIN ? INT16_MIN : v > INT16_MAX ? INT16_MAX : (int32_t)v;
}

/* After a block of m elements a vector kernel fed: ge[i] keys were >=
 * lo[i] (the elements inside went to a cmp_pairs, see cmp_fast_expand). */
void qsel_block_done(qsel *q, int64_t m, const int64_t *ge);

/* The (r, t) pairs of the elements whose error in some measure fell inside
 * one of its intervals, kept by a vector kernel (scratch buffers). */
typedef struct cmp_pairs {
    float *r, *t;              /* cap + 16 each */
    int64_t n, cap;
    float *sink_r, *sink_t;    /* CMP_BLOCK + 16 each: a block that does not fit */
    bool overflow;             /* more than cap: every measure recomputes */
} cmp_pairs;

/* Where the pairs of the next block of m go (sink once they might not fit). */
void cmp_pairs_reserve_block(cmp_pairs *pairs, int64_t m, float **r, float **t);
void cmp_pairs_block_done(cmp_pairs *pairs, int64_t kept);

/* The vector kernels for blocks held as float32 (metrics_fast.c picks one:
 * metrics_fast_avx512.c, metrics_fast_avx2.c), best first. */
typedef enum cmp_level {
    CMP_LEVEL_PORTABLE = 0, /* no vector kernel: cmp_block_double for everything */
    CMP_LEVEL_AVX2,         /* AVX2 + FMA + F16C + BMI2 + POPCNT, 256-bit vectors */
    CMP_LEVEL_AVX512,       /* AVX-512 F/DQ/VL/BW */
} cmp_level;
/* The kernel in use: the best the CPU has, capped by cmp_force_level, or
 * portable with LAYERDIFF_NO_SIMD=1 (anything but "" and "0") in the environment. */
cmp_level cmp_fast_level(void);
/* The best level the CPU supports, whatever is forced. */
cmp_level cmp_cpu_level(void);
/* Whether a vector kernel is in use (cmp_fast_level() > portable). */
bool cmp_fast_available(void);
/* Tests: cap the level (at most the CPU's: a higher one is taken as the
 * CPU's); -1 goes back to the default (the environment decides). */
void cmp_force_level(int level);
/* Tests: force the portable kernels (on) or go back to the default (off). */
void cmp_force_portable(bool on);
/* Tests: how many comparisons with this scratch recomputed their errors
 * because an interval missed. */
int64_t cmp_scratch_recomputed(const ld_compare_scratch *s);
/* Whether a vector kernel can judge with these parameters (the CPU has
 * one, float tensors, finite tolerances >= 0). */
bool cmp_fast_usable(const cmp_params *p);
/* Judges the block like cmp_block_double and returns true, unless a value
 * is NaN or infinite: then it returns false having changed nothing in acc,
 * q or pairs (but maybe written to out), and the caller runs the portable
 * kernel. Either out (where to store the block's errors, all three
 * measures) or q (the CMP_MEASURES interval sets to feed them to; then the
 * kept elements go to pairs as (r, t): the errors are compared straight
 * from registers, never stored). */
bool cmp_block_float_fast(const cmp_params *p, const float *r, const float *t, int m,
                          int64_t base, cmp_acc *acc, double *const out[CMP_MEASURES],
                          qsel *q, cmp_pairs *pairs);
/* After the last block: each measure's errors of the kept pairs, the ones
 * inside its intervals added to q[k] (cand, in_iv). */
void cmp_fast_expand(const cmp_params *p, const cmp_pairs *pairs, qsel *q);

/* ---- inside the vector kernels (metrics_fast*.c) ---- */

/* What one kernel call judges and where its by-products go. */
typedef struct cmp_kernel_args {
    const cmp_params *p;
    const float *r, *t;
    int m16;                                    /* elements, a multiple of 16 */
    double *store[CMP_MEASURES];                /* store mode: every error */
    int32_t lo[CMP_MEASURES][QSEL_MAX_RANKS];   /* feed mode: interval bounds (pads */
    int32_t hi[CMP_MEASURES][QSEL_MAX_RANKS];   /* have lo > every key > hi) */
    const qsel *q;                              /* feed mode: the narrow maps */
    float *kept_r, *kept_t;                     /* feed mode: pairs inside an interval
                                                   (room for m16 + 16 each) */
} cmp_kernel_args;

#define CMP_CHUNK_MIN 512

/* What the block adds up to (committed by metrics_fast.c if it was finite). */
typedef struct cmp_kernel_result {
    double sum[CMP_MEASURES], dd, r1, r2, t1, t2;
    double max[CMP_MEASURES];
    float r_min, r_max, t_min, t_max;
    uint32_t min_abs;  /* the smallest |r| or |t|, as bits */
    /* the same per run of CMP_CHUNK_MIN elements (the AVX2 kernel's chunks)
       when n_chunk_min > 0, so that only the runs holding small values are
       recounted (commit); 0: the kernel gives the block's alone */
    int n_chunk_min;
    uint32_t chunk_min_abs[CMP_BLOCK / CMP_CHUNK_MIN];
    int64_t equal;     /* pairs with t == r: every error exactly 0 */
    bool maybe_fail;   /* some element may fail: count_failures recounts */
    int64_t kept;
    int64_t ge[CMP_MEASURES][QSEL_MAX_RANKS];
} cmp_kernel_result;

typedef void (*cmp_kernel_fn)(const cmp_kernel_args *, cmp_kernel_result *);
typedef void (*cmp_expand_fn)(const cmp_params *, const float *, const float *, int64_t, qsel *);

/* One instruction set's kernels; metrics_fast.c drives them alike. */
typedef struct cmp_fast_ops {
    cmp_kernel_fn store[2][2];         /* [allclose][shifted]: every error to A->store */
    cmp_kernel_fn feed[2][2][2][2];    /* [allclose][shifted][ulp has an interval]
                                          [abs or rel has 5]: errors to the intervals */
    /* the exact counts of a block of m16 finite pairs that the kernel only
       flags (zeros, subnormals, tiny references, overflows, underflows; the
       failures), as cmp_block_double counts them */
    void (*count_specials)(const cmp_params *p, const float *r, const float *t, int m16,
                           bool ref_side, bool test_side, cmp_acc *acc);
    void (*count_failures)(const cmp_params *p, const float *r, const float *t, int m16,
                           int64_t base, cmp_acc *acc);
    /* the first index whose error of measure k is x, computed as the kernel does */
    int64_t (*find_first)(const cmp_params *p, const float *r, const float *t, int m16, int k,
                          double x);
    /* the kept pairs' errors into the intervals (n a multiple of 16): [ulp has
       an interval][abs or rel has 5] */
    cmp_expand_fn expand[2][2];
} cmp_fast_ops;

extern const cmp_fast_ops cmp_fast_avx512_ops; /* metrics_fast_avx512.c */
extern const cmp_fast_ops cmp_fast_avx2_ops;   /* metrics_fast_avx2.c */

/* Tests: the AVX2 kernel narrows the abs and rel keys unfolded even where
 * the folded form is exact (metrics_fast_avx2.c, fold_ok), so that both
 * forms are compared with qsel_key_of. */
extern bool cmp_avx2_unfolded;

/* A float32 no larger than x(1 - 2^-21) (x >= 0; FLT_MAX for anything
 * above it): the bounds the kernels screen the verdict with. */
float cmp_screen_bound(double x);

/* The AVX2 Σrt, Σr², Σt² (cmp_similarity_float_fast's, metrics_fast_avx2_exact.c). */
void cmp_similarity_float_avx2(const float *r, const float *t, int m, cmp_acc *acc);

/* Interval half-width in standard deviations of the sample rank (4).
 * Tests set it negative to force every interval to miss. */
extern double qsel_bracket_sigmas;
/* Tests: the same for the pivots of qsel_select_fast (3.5; negative makes
 * every bracket miss), and limits on the room for kept errors per measure
 * (qsel_cap_limit) and for the vector kernels' kept pairs (cmp_pairs_limit),
 * to force the overflow paths. */
extern double qsel_pivot_sigmas;
extern int64_t qsel_cap_limit;
extern int64_t cmp_pairs_limit;

/* Plans q for `ranks` from the errors of s sampled elements of n (sample
 * is reordered; tmp NULL or room for s + 16 doubles), with narrow keys if
 * asked. Sets everything but cand. */
void qsel_plan(qsel *q, double *sample, int64_t s, int64_t n, const int64_t *ranks, int k,
               double *tmp, bool narrow);
/* Counts and keeps one block of errors (all >= 0, +inf allowed). */
void qsel_feed(qsel *q, const double *x, int64_t m);
/* out[i] for q->rank[i] once every block was fed, given the measure's zero
 * and +inf counts over n elements. False when some rank fell outside the
 * kept errors (or they overflowed): the caller recomputes exactly. tmp:
 * NULL or room for q->cap + 16 doubles (the faster selection). */
bool qsel_answer(qsel *q, int64_t n, int64_t zeros, int64_t infs, double *tmp, double *out);

/* Exact order statistics of v[0..m) (non-negative doubles or +inf) at the
 * given ranks (ascending, duplicates allowed), out[i] for ranks[i].
 * Reorders v. MSD radix partition on the bit patterns: O(m) per digit. */
void qsel_select(double *v, int64_t m, const int64_t *ranks, int k, double *out);

/* The same, faster for large arrays when tmp (room for m + 16 doubles, NULL
 * for none) and a vector level (AVX-512, AVX2) are there: Floyd and
 * Rivest's selection with vector passes (at most QSEL_MAX_RANKS ranks at a
 * time). v and tmp are overwritten. */
void qsel_select_fast(double *v, int64_t m, const int64_t *ranks, int k, double *tmp, double *out);

/* The AVX2 passes of qsel_select_fast and qsel_plan (quantile_avx2.c), as
 * quantile.c's AVX-512 ones: one bracketing pass (how many of src are < lo,
 * those in [lo, hi] to dst, room for len + 16, may be src); the counts of
 * the same without keeping; the pass bracketing k ranks at once
 * (qsel_bracket_avx2_k: m a multiple of 8, each bracket to dst[t] while it
 * stays QSEL_CHUNK + 8 under end[t], full[t] set when it would not); and the
 * sample keys inside each of q's intervals. */
#define QSEL_CHUNK 1024
int64_t qsel_bracket_pass_avx2(const double *src, int64_t len, double lo, double hi,
                               double *dst, int64_t *below);
int64_t qsel_count_in_avx2(const double *v, int64_t len, double lo, double hi, int64_t *below);
#define QSEL_BRACKET_AVX2(k)                                                                   \
    void qsel_bracket_avx2_##k(const double *v, int64_t m, const double *lo, const double *hi, \
                               int64_t *below, double **dst, double *const *end, bool *full);
QSEL_BRACKET_AVX2(1) QSEL_BRACKET_AVX2(2) QSEL_BRACKET_AVX2(3) QSEL_BRACKET_AVX2(4)
QSEL_BRACKET_AVX2(5)
#undef QSEL_BRACKET_AVX2
void qsel_count_inside_avx2(const qsel *q, const double *sample, int64_t s, int64_t *inside);

/* Nearest rank: element ceil(q n) - 1 of the sorted values, clamped. */
int64_t qsel_rank(double q, int64_t n);

#endif
