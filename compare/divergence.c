/* layerdiff — first divergent layer, origin layers and culprits (see
 * compare/divergence.h; the rules are documented for users in
 * docs/report-schema.md, "Divergence").
 *
 * Everything here reads records only, in record order, which is the
 * topological order the session enforced: so "the first failing record" is
 * the first divergent layer, and sorting ties broken by record index are
 * ties broken by topological order. */
#include "compare/divergence.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double ld_divergence_rate(double delta, double delta_in)
{
    if (isnan(delta))
        delta = 0;
    if (isnan(delta_in))
        delta_in = 0;
    if (isinf(delta) && isinf(delta_in))
        return 0;
    if (isinf(delta_in))
        return -1;
    if (isinf(delta))
        return INFINITY;
    return (delta - delta_in) / (delta_in + 1e-7);
}

double ld_divergence_scaled_ulp(const ld_tensor_metrics *m, ld_precision p, bool is_float)
{
    double err = m->abs.max;
    if (!is_float || isnan(err))
        return NAN;
    if (isinf(err))
        return INFINITY;
    double scale = fmax(fabs(m->ref.min), fabs(m->ref.max)); /* NaN only when both are */
    return err / ld_precision_ulp(p, isnan(scale) ? 0 : scale);
}

double ld_divergence_delta(const ld_compare_record *r)
{
    double d = r->metrics.abs.mean;
    return isnan(d) ? 0 : d;
}

/* Sums engine counters without overflowing: a dump from elsewhere can hold
 * any int64, and signed overflow is undefined. */
static int64_t add_saturated(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

static void count(const ld_compare_record *records, int n, ld_compare_summary *s)
{
    *s = (ld_compare_summary){.first_divergent = -1};
    s->n_compared = n;
    for (int i = 0; i < n; i++) {
        const ld_compare_record *r = &records[i];
        if (!r->metrics.pass) {
            s->n_failed++;
            if (s->first_divergent < 0)
                s->first_divergent = i;
        }
        if (r->counters.present) {
            s->overflows = add_saturated(s->overflows, r->counters.overflows);
            s->nans_created = add_saturated(s->nans_created, r->counters.nans_created);
            s->underflows = add_saturated(s->underflows, r->counters.underflows);
        }
        s->would_overflow = add_saturated(s->would_overflow, r->metrics.would_overflow);
        s->has_isolated |= r->has_isolated;
    }
    s->pass = s->n_failed == 0;
}

static ld_status check_inputs(const ld_compare_record *records, int n, ld_error *err)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < records[i].n_inputs; j++) {
            int k = records[i].inputs[j];
            if (k < -1 || k >= i)
                return ld_error_set(err, LD_ERR_INTERNAL,
                                    "record %d ('%s'): input %d refers to record %d, which "
                                    "is not an earlier record", i, records[i].name, j, k);
        }
    return LD_OK;
}

/* Origin: it fails while every compared input passes. R from its float inputs. */
static void judge_origin(ld_compare_record *records, int i)
{
    ld_compare_record *r = &records[i];
    double delta_in = 0;
    bool inputs_pass = true;
    for (int j = 0; j < r->n_inputs; j++) {
        int k = r->inputs[j];
        if (k < 0)
            continue;
        inputs_pass &= records[k].metrics.pass;
        if (records[k].is_float) {
            double d = ld_divergence_delta(&records[k]);
            if (d > delta_in)
                delta_in = d;
        }
    }
    r->rate_of_change = ld_divergence_rate(ld_divergence_delta(r), delta_in);
    r->origin = !r->metrics.pass && inputs_pass;
}

static bool is_culprit(const ld_compare_record *r, double culprit_ulp)
{
    if (!r->has_isolated)
        return false;
    const ld_tensor_metrics *m = &r->isolated;
    return r->isolated_scaled_ulp > culprit_ulp || m->would_overflow > 0 ||
           m->nonfinite_test_only > 0;
}

typedef struct ranked {
    double key;  /* larger first; NaN sorts last */
    int index;
} ranked;

static int compare_ranked(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    bool a_nan = isnan(a->key), b_nan = isnan(b->key);
    if (a_nan != b_nan)
        return a_nan ? 1 : -1;
    if (!a_nan && a->key != b->key)
        return a->key > b->key ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* The indices of records with flag set, ranked by key (desc), ties by index. */
static ld_status rank(const ld_compare_record *records, int n, bool origins, int **out,
                      int *n_out, ld_error *err)
{
    *out = NULL;
    *n_out = 0;
    int m = 0;
    for (int i = 0; i < n; i++)
        m += origins ? records[i].origin : records[i].culprit;
    if (m == 0)
        return LD_OK;
    ranked *list = malloc((size_t)m * sizeof *list);
    int *indices = malloc((size_t)m * sizeof *indices);
    if (!list || !indices) {
        free(list);
        free(indices);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory ranking %d layers", m);
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (origins ? !records[i].origin : !records[i].culprit)
            continue;
        list[k].key = origins ? records[i].rate_of_change : records[i].isolated_scaled_ulp;
        list[k++].index = i;
    }
    qsort(list, (size_t)m, sizeof *list, compare_ranked);
    for (int i = 0; i < m; i++)
        indices[i] = list[i].index;
    free(list);
    *out = indices;
    *n_out = m;
    return LD_OK;
}

ld_status ld_divergence_analyze(ld_compare_record *records, int n, double culprit_ulp,
                                ld_compare_summary *summary, int **origins, int **culprits,
                                ld_error *err)
{
    *origins = *culprits = NULL;
    if (!(culprit_ulp > 0))
        culprit_ulp = LD_DIVERGENCE_DEFAULT_CULPRIT_ULP;
    ld_status st = check_inputs(records, n, err);
    if (st != LD_OK)
        return st;
    count(records, n, summary);
    for (int i = 0; i < n; i++) {
        ld_compare_record *r = &records[i];
        r->scaled_ulp = ld_divergence_scaled_ulp(&r->metrics, r->precision, r->is_float);
        r->isolated_scaled_ulp = r->has_isolated ? ld_divergence_scaled_ulp(
                                                       &r->isolated, r->precision, r->is_float)
                                                 : NAN;
        judge_origin(records, i);
        records[i].culprit = is_culprit(&records[i], culprit_ulp);
    }
    st = rank(records, n, true, origins, &summary->n_origins, err);
    if (st == LD_OK)
        st = rank(records, n, false, culprits, &summary->n_culprits, err);
    if (st != LD_OK) {
        free(*origins);
        *origins = NULL;
        summary->n_origins = 0;
        return st;
    }
    summary->origins = *origins;
    summary->culprits = *culprits;
    return LD_OK;
}
