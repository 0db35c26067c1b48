/* layerdiff — the kernel registry: every family's rows merged into one
 * sorted table, searched by (domain, op type) and opset. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/kernels.h"

static const ld_kernel_family *const families[] = {
    &ld_kernel_family_basic,
    &ld_kernel_family_conv,
    &ld_kernel_family_conv_transpose,
    &ld_kernel_family_gemm,
    &ld_kernel_family_pool,
    &ld_kernel_family_unpool,
    &ld_kernel_family_resize,
    &ld_kernel_family_quantize,
    &ld_kernel_family_signal,
    &ld_kernel_family_rnn,
    &ld_kernel_family_detection,
    &ld_kernel_family_shape,
    &ld_kernel_family_layout,
    &ld_kernel_family_region,
    &ld_kernel_family_indexing,
    &ld_kernel_family_scatter,
    &ld_kernel_family_sort,
    &ld_kernel_family_scan,
    &ld_kernel_family_reduce,
    &ld_kernel_family_softmax,
    &ld_kernel_family_normalization,
    &ld_kernel_family_math_misc,
    &ld_kernel_family_unary,
    &ld_kernel_family_binary,
    &ld_kernel_family_activation,
    &ld_kernel_family_logical,
    &ld_kernel_family_cast,
};

static ld_kernel *merged;
static int n_merged;
static pthread_once_t merge_once = PTHREAD_ONCE_INIT;

static const char *canonical_domain(const char *domain)
{
    return (!domain || strcmp(domain, "ai.onnx") == 0) ? "" : domain;
}

static int compare_rows(const void *pa, const void *pb)
{
    const ld_kernel *a = pa, *b = pb;
    int c = strcmp(a->domain, b->domain);
    if (c == 0)
        c = strcmp(a->op_type, b->op_type);
    if (c == 0)
        c = (a->since_version > b->since_version) - (a->since_version < b->since_version);
    return c;
}

static void merge_families(void)
{
    int n = 0;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        n += families[f]->n_rows;
    merged = malloc((size_t)(n ? n : 1) * sizeof *merged);
    if (!merged)
        return;
    for (size_t f = 0; f < sizeof families / sizeof families[0]; f++)
        for (int r = 0; r < families[f]->n_rows; r++)
            merged[n_merged++] = families[f]->rows[r];
    qsort(merged, (size_t)n_merged, sizeof *merged, compare_rows);
}

const ld_kernel *ld_kernel_table(int *n)
{
    pthread_once(&merge_once, merge_families);
    *n = merged ? n_merged : 0;
    return merged;
}

const ld_kernel *ld_kernel_find(const char *domain, const char *op_type, int64_t opset)
{
    int n;
    const ld_kernel *rows = ld_kernel_table(&n);
    domain = canonical_domain(domain);
    /* Binary search for the first row of (domain, op_type). */
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(rows[mid].domain, domain);
        if (c == 0)
            c = strcmp(rows[mid].op_type, op_type);
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    const ld_kernel *best = NULL;
    for (int i = lo; i < n && strcmp(rows[i].domain, domain) == 0 &&
                     strcmp(rows[i].op_type, op_type) == 0;
         i++)
        if (rows[i].since_version <= opset)
            best = &rows[i];
    return best;
}
