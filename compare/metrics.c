/* layerdiff — every metric of one (reference, test) tensor pair (compare.h,
 * definitions in docs/metrics.md).
 *
 * One pass over the pair in blocks (metrics_internal.h) by the AVX-512
 * kernel (metrics_fast.c) where it can, else the portable one
 * (metrics_portable.c). The order statistics are exact without sorting:
 * tensors up to DIRECT_MAX elements keep their errors and select
 * (quantile.c); larger ones first sample s = 16 sqrt(n) elements, plan from
 * their errors an interval of keys around every wanted rank, and keep only
 * what falls inside during the pass, with an exact recomputation in the
 * rare case an interval misses. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compare/metrics_internal.h"
#include "layerdiff/compare.h"
#include "layerdiff/round.h"

#define DIRECT_MAX 131072     /* up to this many elements, errors are kept and selected */
#define SAMPLE_MAX 65536      /* sampled elements that plan the intervals above that: */
#define SAMPLE_MIN 4096       /* 16 sqrt(n) within these bounds, a multiple of CMP_BLOCK */
#define SELECT_TMP_MAX (1 << 22) /* selection among more kept errors uses no extra room */

int64_t cmp_pairs_limit = INT64_MAX;

struct ld_compare_scratch {
    double *full;             /* kept errors, one n-array per measure kept */
    size_t full_cap;          /* in doubles */
    double *cand;             /* errors kept inside the intervals */
    size_t cand_cap;
    double *pairs;            /* (r, t) pairs kept by the AVX-512 kernel, as floats */
    size_t pairs_cap;
    double *select_tmp;       /* the selection's working copy of one measure's cand */
    size_t select_tmp_cap;
    double *sample;           /* CMP_MEASURES * SAMPLE_MAX + a selection buffer */
    double blk_r[CMP_BLOCK], blk_t[CMP_BLOCK]; /* the portable kernel's inputs */
    float f_r[CMP_BLOCK], f_t[CMP_BLOCK];      /* float16/bfloat16 blocks widened, samples */
    double err[CMP_MEASURES][CMP_BLOCK];       /* one block's errors when streaming */
    float sink_r[CMP_BLOCK + 16], sink_t[CMP_BLOCK + 16]; /* pairs that overflowed */
    uint8_t differs[CMP_BLOCK];                /* integer pairs: values not equal */
    int64_t pos[CMP_BLOCK];                    /* sampled positions */
    int64_t recomputed;                        /* passes redone because an interval missed */
};

ld_status ld_compare_scratch_create(ld_compare_scratch **out, ld_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ld_error_set(err, LD_ERR_NOMEM, "comparison scratch: out of memory");
    return LD_OK;
}

void ld_compare_scratch_destroy(ld_compare_scratch *s)
{
    if (!s)
        return;
    free(s->full);
    free(s->cand);
    free(s->pairs);
    free(s->select_tmp);
    free(s->sample);
    free(s);
}

/* Makes *buf hold at least `need` doubles; old contents are not kept. It
 * grows by a quarter more than asked, so sizes that vary a little from
 * tensor to tensor do not free and fault in fresh memory every time. */
static ld_status reserve(double **buf, size_t *cap, size_t need, const char *what, ld_error *err)
{
    if (*cap >= need && *buf)
        return LD_OK;
    free(*buf);
    *cap = 0;
    need += need / 4;
    *buf = malloc(need * sizeof **buf);
    if (!*buf)
        return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory for %zu comparison values",
                            what, need);
    *cap = need;
    return LD_OK;
}

/* ---- loading blocks ---- */

static bool float_as_fp32(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT16 || d == LD_DTYPE_BFLOAT16;
}

static void load_doubles(const ld_tensor *t, int64_t i0, int m, double *dst)
{
    const void *p = t->data;
    switch (t->dtype) {
#define LOAD_AS(type) for (int i = 0; i < m; i++) dst[i] = (double)((const type *)p)[i0 + i]; break
    case LD_DTYPE_FLOAT32: LOAD_AS(float);
    case LD_DTYPE_FLOAT64: LOAD_AS(double);
    case LD_DTYPE_INT8: LOAD_AS(int8_t);
    case LD_DTYPE_INT16: LOAD_AS(int16_t);
    case LD_DTYPE_INT32: LOAD_AS(int32_t);
    case LD_DTYPE_INT64: LOAD_AS(int64_t);
    case LD_DTYPE_UINT8: LOAD_AS(uint8_t);
    case LD_DTYPE_UINT16: LOAD_AS(uint16_t);
    case LD_DTYPE_UINT32: LOAD_AS(uint32_t);
    case LD_DTYPE_UINT64: LOAD_AS(uint64_t);
#undef LOAD_AS
    case LD_DTYPE_BOOL:
        for (int i = 0; i < m; i++)
            dst[i] = ((const uint8_t *)p)[i0 + i] ? 1.0 : 0.0;
        break;
    case LD_DTYPE_FLOAT16:
        for (int i = 0; i < m; i++)
            dst[i] = ld_fp16_to_fp32(((const ld_fp16 *)p)[i0 + i]);
        break;
    case LD_DTYPE_BFLOAT16:
        for (int i = 0; i < m; i++)
            dst[i] = ld_bf16_to_fp32(((const ld_bf16 *)p)[i0 + i]);
        break;
    default:
        for (int i = 0; i < m; i++)
            dst[i] = NAN;
        break;
    }
}

/* Integer element i exactly (every integer dtype fits in __int128). */
static __int128 int_at(const ld_tensor *t, int64_t i)
{
    const void *p = t->data;
    switch (t->dtype) {
    case LD_DTYPE_INT8: return ((const int8_t *)p)[i];
    case LD_DTYPE_INT16: return ((const int16_t *)p)[i];
    case LD_DTYPE_INT32: return ((const int32_t *)p)[i];
    case LD_DTYPE_INT64: return ((const int64_t *)p)[i];
    case LD_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case LD_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case LD_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case LD_DTYPE_UINT64: return ((const uint64_t *)p)[i];
    case LD_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0;
    }
}

/* A block as float32 (float16/bfloat16 widened exactly into buf). */
static const float *load_floats(const ld_tensor *t, int64_t i0, int m, float *buf)
{
    if (t->dtype == LD_DTYPE_FLOAT32)
        return (const float *)t->data + i0;
    if (t->dtype == LD_DTYPE_FLOAT16)
        ld_convert_fp16_to_fp32((const ld_fp16 *)t->data + i0, buf, (size_t)m);
    else
        ld_convert_bf16_to_fp32((const ld_bf16 *)t->data + i0, buf, (size_t)m);
    return buf;
}

/* ---- one pass over the pair ---- */

typedef struct cmp_pass {
    const ld_tensor *ref, *test;
    cmp_params params;
    bool is_float, fast;
    int n_measures;
    ld_compare_scratch *scratch;
    unsigned keep;            /* measures whose errors are kept in scratch->full */
    qsel *intervals;          /* per measure; NULL: none fed */
    cmp_pairs pairs;          /* what the AVX-512 kernel kept for the intervals */
} cmp_pass;

/* One block: the AVX-512 kernel when it can (it feeds the intervals
 * itself), else the portable one, whose errors are then fed. */
static void evaluate_block(cmp_pass *ps, int64_t i0, int m, cmp_acc *acc, double *out[])
{
    ld_compare_scratch *s = ps->scratch;
    const cmp_params *p = &ps->params;
    if (ps->fast) {
        const float *r = load_floats(ps->ref, i0, m, s->f_r);
        const float *t = load_floats(ps->test, i0, m, s->f_t);
        if (cmp_block_float_fast(p, r, t, m, i0, acc, ps->intervals ? NULL : out,
                                 ps->intervals, &ps->pairs))
            return;
        for (int i = 0; i < m; i++) {
            s->blk_r[i] = r[i];
            s->blk_t[i] = t[i];
        }
    } else {
        load_doubles(ps->ref, i0, m, s->blk_r);
        load_doubles(ps->test, i0, m, s->blk_t);
    }
    const uint8_t *differs = NULL;
    if (!ps->is_float) {
        for (int i = 0; i < m; i++)
            s->differs[i] = int_at(ps->ref, i0 + i) != int_at(ps->test, i0 + i);
        differs = s->differs;
    }
    cmp_block_double(p, s->blk_r, s->blk_t, differs, m, i0, acc, out[CMP_ABS], out[CMP_REL],
                     out[CMP_ULP]);
    if (ps->intervals)
        for (int k = 0; k < ps->n_measures; k++)
            qsel_feed(&ps->intervals[k], out[k], m);
}

static void run_pass(cmp_pass *ps, cmp_acc *acc)
{
    ld_compare_scratch *s = ps->scratch;
    int64_t n = ps->ref->count;
    cmp_acc_init(acc);
    for (int64_t i0 = 0; i0 < n; i0 += CMP_BLOCK) {
        int m = n - i0 < CMP_BLOCK ? (int)(n - i0) : CMP_BLOCK;
        double *out[CMP_MEASURES];
        int slot = 0;
        for (int k = 0; k < CMP_MEASURES; k++) {
            if (ps->keep & (1u << k))
                out[k] = s->full + (size_t)slot++ * (size_t)n + (size_t)i0;
            else
                out[k] = s->err[k];
        }
        evaluate_block(ps, i0, m, acc, out);
    }
}

/* Σrt, Σr² and Σt² summed again, compensated, when the AVX-512 kernel's
 * derived ones are not accurate to a few ulps of the result
 * (cmp_similarity_inexact): a cosine near 0, sides of different scales.
 * Every other sum of acc stays. */
static void similarity_pass(cmp_pass *ps, cmp_acc *acc)
{
    ld_compare_scratch *s = ps->scratch;
    int64_t n = ps->ref->count;
    acc->srt = acc->srt_lo = acc->srr = acc->srr_lo = acc->stt = acc->stt_lo = 0;
    acc->rt_scale = acc->rr_scale = acc->tt_scale = 0;
    for (int64_t i0 = 0; i0 < n; i0 += CMP_BLOCK) {
        int m = n - i0 < CMP_BLOCK ? (int)(n - i0) : CMP_BLOCK;
        if (ps->fast) {
            cmp_similarity_float_fast(load_floats(ps->ref, i0, m, s->f_r),
                                      load_floats(ps->test, i0, m, s->f_t), m, acc);
        } else {
            load_doubles(ps->ref, i0, m, s->blk_r);
            load_doubles(ps->test, i0, m, s->blk_t);
            cmp_similarity_double(s->blk_r, s->blk_t, m, acc);
        }
    }
}

/* ---- order statistics ---- */

/* The ranks one measure needs and where each answer goes. */
typedef struct wanted_ranks {
    int k;
    int64_t rank[QSEL_MAX_RANKS];
    double *dest[QSEL_MAX_RANKS];
} wanted_ranks;

static void want(wanted_ranks *w, double q, int64_t n, double *dest)
{
    w->rank[w->k] = qsel_rank(q, n);
    w->dest[w->k] = dest;
    w->k++;
}

static void plan_wanted(const ld_tolerance *tol, int64_t n, ld_tensor_metrics *out, bool ulp,
                        wanted_ranks w[CMP_MEASURES])
{
    ld_error_stats *stats[2] = {&out->abs, &out->rel};
    memset(w, 0, CMP_MEASURES * sizeof *w);
    for (int k = 0; k < 2; k++) {
        want(&w[k], 0.5, n, &stats[k]->median);
        want(&w[k], 0.9, n, &stats[k]->p90);
        want(&w[k], 0.95, n, &stats[k]->p95);
        want(&w[k], 0.99, n, &stats[k]->p99);
        if (tol->check == LD_CHECK_QUANTILE)
            want(&w[k], tol->quantile, n, &stats[k]->quantile);
    }
    if (ulp)
        want(&w[CMP_ULP], 0.99, n, &out->ulp.p99);
}

/* Exact answers from kept errors (v reordered). */
static void select_kept(double *v, int64_t n, const wanted_ranks *w, double *tmp)
{
    int order[QSEL_MAX_RANKS];
    int64_t ranks[QSEL_MAX_RANKS];
    double vals[QSEL_MAX_RANKS];
    for (int i = 0; i < w->k; i++)
        order[i] = i;
    for (int i = 1; i < w->k; i++) /* ranks ascending, tiny insertion sort */
        for (int j = i; j > 0 && w->rank[order[j]] < w->rank[order[j - 1]]; j--) {
            int swap = order[j];
            order[j] = order[j - 1];
            order[j - 1] = swap;
        }
    for (int i = 0; i < w->k; i++)
        ranks[i] = w->rank[order[i]];
    qsel_select_fast(v, n, ranks, w->k, tmp, vals);
    for (int i = 0; i < w->k; i++)
        *w->dest[order[i]] = vals[i];
}

/* A splitmix64 step: deterministic sample positions, the same every run. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Elements pos[0, m) of t as float32 into out (m <= CMP_BLOCK). The
 * positions are scattered, each a cache miss: the loads are announced well
 * ahead so that many are under way at once. float16 and bfloat16 elements
 * are gathered as bits and widened together by the vector converter (an
 * emulated run's test tensors are float16: one call per element was a
 * fifth of sampling a large tensor). */
static void gather_floats(const ld_tensor *t, const int64_t *pos, int m, float *out)
{
    enum { AHEAD = 96 };
    size_t size = ld_dtype_size(t->dtype);
    const char *base = t->data;
    for (int i = 0; i < m && i < AHEAD; i++)
        __builtin_prefetch(base + (size_t)pos[i] * size, 0, 1);
    if (t->dtype == LD_DTYPE_FLOAT32) {
        const float *v = t->data;
        for (int i = 0; i < m; i++) {
            if (i + AHEAD < m)
                __builtin_prefetch(v + pos[i + AHEAD], 0, 1);
            out[i] = v[pos[i]];
        }
        return;
    }
    if (t->dtype == LD_DTYPE_FLOAT16) {
        ld_fp16 h[CMP_BLOCK];
        const ld_fp16 *v = t->data;
        for (int i = 0; i < m; i++) {
            if (i + AHEAD < m)
                __builtin_prefetch(v + pos[i + AHEAD], 0, 1);
            h[i] = v[pos[i]];
        }
        ld_convert_fp16_to_fp32(h, out, (size_t)m);
        return;
    }
    ld_bf16 b[CMP_BLOCK]; /* bfloat16: float_as_fp32 lets nothing else in */
    const ld_bf16 *v = t->data;
    for (int i = 0; i < m; i++) {
        if (i + AHEAD < m)
            __builtin_prefetch(v + pos[i + AHEAD], 0, 1);
        b[i] = v[pos[i]];
    }
    ld_convert_bf16_to_fp32(b, out, (size_t)m);
}

static void gather_pairs(const ld_tensor *ref, const ld_tensor *test, const int64_t *pos, int m,
                         float *r, float *t)
{
    gather_floats(ref, pos, m, r);
    gather_floats(test, pos, m, t);
}

/* How many elements to sample: more narrows the intervals (fewer errors
 * kept, ~1/sqrt(s)) but costs a random access each. */
static int sample_size(int64_t n)
{
    double s = 16.0 * sqrt((double)n);
    s = s < SAMPLE_MIN ? SAMPLE_MIN : s > SAMPLE_MAX ? SAMPLE_MAX : s;
    return ((int)s + CMP_BLOCK - 1) / CMP_BLOCK * CMP_BLOCK;
}

/* Sums over a side's sampled values, for the choice of its shift. */
typedef struct sample_sums {
    double n, s1, s2;
} sample_sums;

static void sum_finite(const float *v, int m, sample_sums *side)
{
    enum { LANES = 8 }; /* independent sums: no chain of dependent additions */
    double n[LANES] = {0}, s1[LANES] = {0}, s2[LANES] = {0};
    for (int i = 0; i + LANES <= m; i += LANES)
        for (int j = 0; j < LANES; j++) {
            bool ok = isfinite(v[i + j]);
            double x = ok ? v[i + j] : 0.0;
            n[j] += ok;
            s1[j] += x;
            s2[j] += x * x;
        }
    for (int j = 0; j < LANES; j++) {
        side->n += n[j];
        side->s1 += s1[j];
        side->s2 += s2[j];
    }
}

/* Errors of s elements, one per stratum of n / s, into scratch->sample
 * (measure k at k * SAMPLE_MAX), by the same kernels; also the sampled
 * values' sums (finite values only, AVX-512 path only) in side[]. */
static void take_sample(cmp_pass *ps, int s_count, sample_sums side[2])
{
    ld_compare_scratch *s = ps->scratch;
    int64_t n = ps->ref->count;
    uint64_t state = 0x6C61796572646966ull; /* "layerdif" */
    double stride = (double)n / s_count;
    cmp_acc unused;
    cmp_acc_init(&unused);
    memset(side, 0, 2 * sizeof *side);
    int64_t *pos = s->pos;
    for (int c0 = 0; c0 < s_count; c0 += CMP_BLOCK) {
        for (int i = 0; i < CMP_BLOCK; i++) {
            double u = (double)(next_random(&state) >> 11) * 0x1p-53;
            pos[i] = (int64_t)(((double)(c0 + i) + u) * stride);
            pos[i] = pos[i] >= n ? n - 1 : pos[i];
        }
        double *o = s->sample + c0;
        double *out[CMP_MEASURES] = {o, o + SAMPLE_MAX,
                                     ps->params.want_ulp ? o + 2 * SAMPLE_MAX : NULL};
        if (ps->fast) {
            gather_pairs(ps->ref, ps->test, pos, CMP_BLOCK, s->f_r, s->f_t);
            sum_finite(s->f_r, CMP_BLOCK, &side[0]);
            sum_finite(s->f_t, CMP_BLOCK, &side[1]);
            if (cmp_block_float_fast(&ps->params, s->f_r, s->f_t, CMP_BLOCK, 0, &unused, out,
                                     NULL, NULL))
                continue;
        }
        for (int i = 0; i < CMP_BLOCK; i++) {
            load_doubles(ps->ref, pos[i], 1, &s->blk_r[i]);
            load_doubles(ps->test, pos[i], 1, &s->blk_t[i]);
        }
        cmp_block_double(&ps->params, s->blk_r, s->blk_t, NULL, CMP_BLOCK, 0, &unused,
                         out[CMP_ABS], out[CMP_REL], out[CMP_ULP]);
    }
}

/* The side sums' shifts from the sample: none for a side whose mean is
 * within 8 standard deviations of 0 (the variance then loses at most 6
 * bits to cancellation, and the kernel skips the subtraction), else the
 * sampled mean. */
static void choose_shifts(cmp_params *p, const sample_sums side[2])
{
    double *shift[2] = {&p->ref_shift, &p->test_shift};
    bool centered[2];
    for (int i = 0; i < 2; i++) {
        double mean = side[i].n > 0 ? side[i].s1 / side[i].n : NAN;
        double var = side[i].n > 0 ? side[i].s2 / side[i].n - mean * mean : NAN;
        centered[i] = isfinite(mean) && isfinite(var) && mean * mean <= 64.0 * var;
        if (isfinite(mean))
            *shift[i] = centered[i] ? 0.0 : mean;
    }
    p->kernel_shifted = !(centered[0] && centered[1]);
}

/* Plans the intervals and points them at storage for the kept errors. */
static ld_status plan_intervals(cmp_pass *ps, const wanted_ranks *w, qsel *q, const char *what,
                                ld_error *err)
{
    ld_compare_scratch *s = ps->scratch;
    int64_t n = ps->ref->count;
    ld_status st = LD_OK;
    if (!s->sample) {
        s->sample = malloc(((CMP_MEASURES + 1) * SAMPLE_MAX + 16) * sizeof *s->sample);
        if (!s->sample)
            return ld_error_set(err, LD_ERR_NOMEM, "%s: out of memory for the error sample", what);
    }
    int s_count = sample_size(n);
    sample_sums side[2];
    take_sample(ps, s_count, side);
    if (ps->fast)
        choose_shifts(&ps->params, side);
    size_t total = 0, pairs = 0, largest = 0;
    for (int k = 0; k < ps->n_measures; k++) {
        qsel_plan(&q[k], s->sample + (size_t)k * SAMPLE_MAX, s_count, n, w[k].rank, w[k].k,
                  s->sample + (size_t)CMP_MEASURES * SAMPLE_MAX,
                  ps->fast && k != CMP_ULP); /* the kernel compares abs and rel narrow */
        total += (size_t)q[k].cap + 16;
        pairs += (size_t)q[k].cap; /* the union of the measures' kept elements */
        largest = (size_t)q[k].cap > largest ? (size_t)q[k].cap : largest;
    }
    if ((st = reserve(&s->cand, &s->cand_cap, total, what, err)) != LD_OK ||
        (st = reserve(&s->select_tmp, &s->select_tmp_cap, largest + 16, what, err)) != LD_OK)
        return st;
    double *next = s->cand;
    for (int k = 0; k < ps->n_measures; k++) {
        q[k].cand = next;
        next += q[k].cap + 16;
    }
    memset(&ps->pairs, 0, sizeof ps->pairs);
    if (ps->fast) {
        pairs = pairs < (size_t)n ? pairs : (size_t)n;
        pairs = (int64_t)pairs < cmp_pairs_limit ? pairs : (size_t)cmp_pairs_limit;
        /* r and t as floats side by side: pairs + 16 each */
        if ((st = reserve(&s->pairs, &s->pairs_cap, pairs + 16, what, err)) != LD_OK)
            return st;
        ps->pairs.r = (float *)(void *)s->pairs;
        ps->pairs.t = ps->pairs.r + pairs + 16;
        ps->pairs.cap = (int64_t)pairs;
        ps->pairs.sink_r = s->sink_r;
        ps->pairs.sink_t = s->sink_t;
    }
    return LD_OK;
}

/* Fills every order statistic: kept errors when small, intervals when
 * large, a second pass keeping the errors of any measure that missed. */
static ld_status order_statistics(cmp_pass *ps, const wanted_ranks *w, cmp_acc *acc,
                                  const char *what, ld_error *err)
{
    ld_compare_scratch *s = ps->scratch;
    int64_t n = ps->ref->count;
    ld_status st = LD_OK;
    qsel q[CMP_MEASURES];
    unsigned all = (1u << ps->n_measures) - 1, missed = 0;
    if (n <= DIRECT_MAX) {
        if ((st = reserve(&s->full, &s->full_cap, (size_t)ps->n_measures * (size_t)n, what,
                          err)) != LD_OK)
            return st;
        ps->keep = all;
        run_pass(ps, acc);
        missed = all;
    } else {
        if ((st = plan_intervals(ps, w, q, what, err)) != LD_OK)
            return st;
        ps->intervals = q;
        run_pass(ps, acc);
        ps->intervals = NULL;
        if (ps->fast) { /* the errors of what the AVX-512 kernel kept */
            if (ps->pairs.overflow)
                for (int k = 0; k < ps->n_measures; k++)
                    q[k].overflow = true;
            else
                cmp_fast_expand(&ps->params, &ps->pairs, q);
        }
        for (int k = 0; k < ps->n_measures; k++) {
            double vals[QSEL_MAX_RANKS];
            if (!qsel_answer(&q[k], n, acc->zero_err[k], acc->inf_err[k], s->select_tmp, vals)) {
                missed |= 1u << k;
                continue;
            }
            for (int i = 0; i < w[k].k; i++)
                *w[k].dest[i] = vals[i];
        }
        if (missed) {
            int kept = __builtin_popcount(missed);
            if ((st = reserve(&s->full, &s->full_cap, (size_t)kept * (size_t)n, what, err)) !=
                LD_OK)
                return st;
            cmp_acc again;
            ps->keep = missed;
            run_pass(ps, &again);
            s->recomputed++;
        }
    }
    /* the faster selection needs as much room again, unless that is huge */
    double *tmp = NULL;
    if (missed && n <= SELECT_TMP_MAX &&
        reserve(&s->select_tmp, &s->select_tmp_cap, (size_t)n + 16, what, err) == LD_OK)
        tmp = s->select_tmp;
    int slot = 0;
    for (int k = 0; k < ps->n_measures; k++)
        if (missed & (1u << k))
            select_kept(s->full + (size_t)slot++ * (size_t)n, n, &w[k], tmp);
    ps->keep = 0;
    return LD_OK;
}

/* ---- results ---- */

static void empty_stats(ld_error_stats *e)
{
    e->max = e->mean = e->median = e->p90 = e->p95 = e->p99 = e->quantile = NAN;
    e->max_index = -1;
}

static void side_result(const cmp_side_acc *a, double shift, ld_side_stats *out)
{
    out->nan = a->nan;
    out->pos_inf = a->pos_inf;
    out->neg_inf = a->neg_inf;
    out->subnormal = a->subnormal;
    out->zero = a->zero;
    if (a->finite == 0) {
        out->min = out->max = out->mean = out->std = NAN;
        return;
    }
    double cnt = (double)a->finite, m1 = a->s1 / cnt, var = a->s2 / cnt - m1 * m1;
    out->min = a->min;
    out->max = a->max;
    out->mean = shift + m1;
    out->std = sqrt(var > 0 ? var : 0.0);
}

static void similarity(const cmp_acc *acc, ld_tensor_metrics *out)
{
    if (acc->special_mismatch > 0) {
        out->cosine = NAN;
        out->snr_db = -INFINITY;
        out->l2_rel = INFINITY;
        return;
    }
    /* the compensated sums (hi + lo) */
    double srt = acc->srt + acc->srt_lo, srr = acc->srr + acc->srr_lo;
    double stt = acc->stt + acc->stt_lo, sdd = acc->sdd + acc->sdd_lo;
    if (srr == 0 && stt == 0)
        out->cosine = 1.0;
    else if (srr == 0 || stt == 0)
        out->cosine = 0.0;
    else if (sdd == 0)
        out->cosine = 1.0; /* equal tensors: exactly, whatever the sums' rounding */
    else {
        /* separate roots only if the product overflows */
        double prod = srr * stt;
        double c = srt / (isinf(prod) ? sqrt(srr) * sqrt(stt) : sqrt(prod));
        out->cosine = c > 1.0 ? 1.0 : c < -1.0 ? -1.0 : c; /* rounding can step past +-1 */
    }
    out->snr_db = sdd == 0 ? INFINITY : 10.0 * log10(srr / sdd);
    out->l2_rel = sdd == 0 ? 0.0 : sqrt(sdd) / sqrt(srr);
}

static bool stat_fails(double abs_stat, double rel_stat, const ld_tolerance *tol)
{
    return abs_stat > tol->atol && rel_stat > tol->rtol;
}

static bool verdict(const ld_tensor_metrics *m, const cmp_acc *acc, const ld_tolerance *tol,
                    bool is_float)
{
    if (!is_float)
        return m->n_fail == 0;
    if (tol->nan_is_error && acc->test_nan > 0)
        return false;
    switch (tol->check) {
    case LD_CHECK_MAX: return !stat_fails(m->abs.max, m->rel.max, tol);
    case LD_CHECK_MEAN: return !stat_fails(m->abs.mean, m->rel.mean, tol);
    case LD_CHECK_MEDIAN: return !stat_fails(m->abs.median, m->rel.median, tol);
    case LD_CHECK_QUANTILE: return !stat_fails(m->abs.quantile, m->rel.quantile, tol);
    case LD_CHECK_ELEMWISE:
    default: return m->n_fail == 0;
    }
}

static void fill_results(const cmp_pass *ps, const cmp_acc *acc, const ld_tolerance *tol,
                         ld_tensor_metrics *out)
{
    double n = (double)out->n;
    ld_error_stats *stats[CMP_MEASURES] = {&out->abs, &out->rel, &out->ulp};
    for (int k = 0; k < ps->n_measures; k++) {
        stats[k]->max = acc->max[k];
        stats[k]->max_index = acc->max_index[k];
        stats[k]->mean = acc->sum[k] / n;
    }
    side_result(&acc->ref, ps->params.ref_shift, &out->ref);
    side_result(&acc->test, ps->params.test_shift, &out->test);
    similarity(acc, out);
    out->rel_tiny_ref = acc->rel_tiny_ref;
    out->nonfinite_test_only = acc->nonfinite_test_only;
    out->special_mismatch = acc->special_mismatch;
    out->would_overflow = acc->would_overflow;
    out->underflow_zero = acc->underflow_zero;
    out->n_fail = acc->n_fail;
    out->first_fail_index = acc->first_fail;
    out->pass = verdict(out, acc, tol, ps->is_float);
}

/* ---- checks and setup ---- */

static double dtype_min_normal(ld_dtype d)
{
    switch (d) {
    case LD_DTYPE_FLOAT16: return 0x1p-14;
    case LD_DTYPE_FLOAT32:
    case LD_DTYPE_BFLOAT16: return FLT_MIN;
    case LD_DTYPE_FLOAT64: return DBL_MIN;
    default: return 0.0; /* integers are never subnormal */
    }
}

/* The first finite value of t (0 when none): the shift for its variance. */
static double first_finite(const ld_tensor *t)
{
    double x;
    for (int64_t i = 0; i < t->count; i++) {
        load_doubles(t, i, 1, &x);
        if (isfinite(x))
            return x;
    }
    return 0.0;
}

static ld_status check_pair(const ld_tensor *ref, const ld_tensor *test, const char *what,
                            bool *is_float, ld_error *err)
{
    char rs[160], ts[160];
    if (!ld_shape_equal(&ref->shape, &test->shape))
        return ld_error_set(err, LD_ERR_INPUT,
                            "%s: shape %s in the test run, %s in the reference", what,
                            ld_shape_format(&test->shape, ts, sizeof ts),
                            ld_shape_format(&ref->shape, rs, sizeof rs));
    if (!ld_dtype_is_supported(ref->dtype) || !ld_dtype_is_supported(test->dtype))
        return ld_error_set(err, LD_ERR_UNSUPPORTED,
                            "%s: cannot compare %s (test) with %s (reference) tensors", what,
                            ld_dtype_name(test->dtype), ld_dtype_name(ref->dtype));
    bool rf = ld_dtype_is_float(ref->dtype), tf = ld_dtype_is_float(test->dtype);
    if (rf != tf)
        return ld_error_set(err, LD_ERR_INPUT,
                            "%s: dtype %s in the test run, %s in the reference: a float tensor "
                            "compares only with a float tensor",
                            what, ld_dtype_name(test->dtype), ld_dtype_name(ref->dtype));
    *is_float = rf;
    return LD_OK;
}

static ld_status setup_params(const ld_tensor *ref, const ld_tensor *test, ld_precision precision,
                              const ld_tolerance *tol, bool is_float, cmp_params *p,
                              const char *what, ld_error *err)
{
    double u = ld_precision_unit_roundoff(precision);
    if (isnan(u))
        return ld_error_set(err, LD_ERR_USAGE, "%s: unknown layer precision %d", what,
                            (int)precision);
    if (tol->check == LD_CHECK_QUANTILE && !(tol->quantile >= 0 && tol->quantile <= 1))
        return ld_error_set(err, LD_ERR_USAGE, "%s: error quantile %g is not in [0, 1]", what,
                            tol->quantile);
    memset(p, 0, sizeof *p);
    p->atol = tol->atol;
    p->rtol = tol->rtol;
    p->mode = tol->mode;
    p->nan_is_error = tol->nan_is_error;
    p->want_ulp = is_float;
    p->ulp_digits = -ilogb(u);
    p->ulp_emin = ilogb(ld_precision_min_normal(precision));
    p->prec_min_normal = ld_precision_min_normal(precision);
    p->prec_max = (precision == LD_PRECISION_FP16 || precision == LD_PRECISION_BF16)
                      ? ld_precision_max(precision) : INFINITY;
    p->ref_min_normal = dtype_min_normal(ref->dtype);
    p->test_min_normal = dtype_min_normal(test->dtype);
    p->ref_shift = first_finite(ref);
    p->test_shift = first_finite(test);
    p->kernel_shifted = true;
    return LD_OK;
}

static void init_metrics(ld_tensor_metrics *out, int64_t n)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    empty_stats(&out->abs);
    empty_stats(&out->rel);
    empty_stats(&out->ulp);
    out->cosine = out->snr_db = out->l2_rel = NAN;
    out->ref.min = out->ref.max = out->ref.mean = out->ref.std = NAN;
    out->test.min = out->test.max = out->test.mean = out->test.std = NAN;
    out->first_fail_index = -1;
    out->pass = true;
}

ld_status ld_compare_tensors(const ld_tensor *ref, const ld_tensor *test, ld_precision precision,
                             const ld_tolerance *tol, ld_compare_scratch *scratch,
                             const char *what, ld_tensor_metrics *out, ld_error *err)
{
    ld_status st = LD_OK;
    ld_compare_scratch *own = NULL;
    ld_tolerance default_tol;
    cmp_pass ps;
    cmp_acc acc;
    wanted_ranks w[CMP_MEASURES];
    if (!what)
        what = "tensor";
    if (!tol) {
        memset(&default_tol, 0, sizeof default_tol);
        default_tol.atol = default_tol.rtol = ld_tolerance_default(precision);
        tol = &default_tol;
    }
    init_metrics(out, 0);
    memset(&ps, 0, sizeof ps);
    if ((st = check_pair(ref, test, what, &ps.is_float, err)) != LD_OK)
        goto out;
    if ((st = setup_params(ref, test, precision, tol, ps.is_float, &ps.params, what, err)) !=
        LD_OK)
        goto out;
    init_metrics(out, ref->count);
    if (ref->count == 0)
        goto out;
    if (!scratch) {
        if ((st = ld_compare_scratch_create(&own, err)) != LD_OK)
            goto out;
        scratch = own;
    }
    ps.ref = ref;
    ps.test = test;
    ps.scratch = scratch;
    ps.n_measures = ps.is_float ? CMP_MEASURES : 2;
    ps.fast = ps.is_float && float_as_fp32(ref->dtype) && float_as_fp32(test->dtype) &&
              cmp_fast_usable(&ps.params);
    plan_wanted(tol, ref->count, out, ps.is_float, w);
    if ((st = order_statistics(&ps, w, &acc, what, err)) != LD_OK)
        goto out;
    if (acc.special_mismatch == 0 && cmp_similarity_inexact(&acc))
        similarity_pass(&ps, &acc);
    fill_results(&ps, &acc, tol, out);
out:
    ld_compare_scratch_destroy(own);
    return st;
}

int64_t cmp_scratch_recomputed(const ld_compare_scratch *s)
{
    return s ? s->recomputed : 0;
}
