/* Unit tests for the pooling kernels (backends/kernels/pool.c,
 * pool_unpool.c) against naive references on random data: MaxPool values and
 * Indices (both storage orders, dilations, ceil_mode, NaN propagation),
 * AveragePool with and without count_include_pad (pads, ceil_mode),
 * LpPool, the global pools, 1-D and 3-D windows, thread-count determinism,
 * MaxUnpool round trips and bad indices, MaxRoiPool on known values, and the
 * error paths (messages name the node). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

typedef struct pool_case {
    const char *op;          /* MaxPool, AveragePool, LpPool */
    int nd;
    int64_t N, C, in[3], k[3], s[3], d[3], pads[6];
    bool ceil_mode, include_pad;
    int64_t storage_order, p;
} pool_case;

/* Naive pooling in double over the case's nd dims (padded to 3). Also gives
 * flat indices (row-major within the plane) of MaxPool's choices. */
static void naive_pool(const pool_case *c, const float *x, double *y, int64_t *idx,
                       int64_t *out)
{
    int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1};
    int64_t pb[3] = {0}, pe[3] = {0};
    int sh = 3 - c->nd;
    for (int i = 0; i < c->nd; i++) {
        in[i + sh] = c->in[i], k[i + sh] = c->k[i], s[i + sh] = c->s[i], d[i + sh] = c->d[i];
        pb[i + sh] = c->pads[i], pe[i + sh] = c->pads[i + c->nd];
    }
    for (int i = 0; i < 3; i++) {
        int64_t span = in[i] + pb[i] + pe[i] - ((k[i] - 1) * d[i] + 1);
        out[i] = c->ceil_mode ? (span + s[i] - 1) / s[i] + 1 : span / s[i] + 1;
        if (c->ceil_mode && (out[i] - 1) * s[i] >= in[i] + pb[i])
            out[i]--;
    }
    int64_t in_size = in[0] * in[1] * in[2], out_size = out[0] * out[1] * out[2];
    for (int64_t pl = 0; pl < c->N * c->C; pl++)
        for (int64_t o = 0; o < out_size; o++) {
            int64_t o3[3] = {o / (out[1] * out[2]), (o / out[2]) % out[1], o % out[2]};
            double acc = strcmp(c->op, "MaxPool") == 0 ? -INFINITY : 0;
            int64_t best = -1, real = 0, padded = 1;
            for (int i = 0; i < 3; i++) {
                int64_t cnt = 0;
                for (int64_t t = 0; t < k[i]; t++) {
                    int64_t pos = o3[i] * s[i] - pb[i] + t * d[i];
                    cnt += pos >= -pb[i] && pos < in[i] + pe[i];
                }
                padded *= cnt;
            }
            for (int64_t t = 0; t < k[0] * k[1] * k[2]; t++) {
                int64_t t3[3] = {t / (k[1] * k[2]), (t / k[2]) % k[1], t % k[2]}, pos[3];
                bool inside = true;
                for (int i = 0; i < 3; i++) {
                    pos[i] = o3[i] * s[i] - pb[i] + t3[i] * d[i];
                    inside = inside && pos[i] >= 0 && pos[i] < in[i];
                }
                if (!inside)
                    continue;
                int64_t off = (pos[0] * in[1] + pos[1]) * in[2] + pos[2];
                double v = x[pl * in_size + off];
                real++;
                if (strcmp(c->op, "MaxPool") == 0) {
                    /* the first NaN wins; otherwise the first maximum */
                    if (best >= 0 && isnan(acc))
                        continue;
                    if (best < 0 || isnan(v) || v > acc)
                        acc = v, best = off;
                } else if (strcmp(c->op, "LpPool") == 0) {
                    acc += pow(fabs(v), (double)c->p);
                } else {
                    acc += v;
                }
            }
            if (strcmp(c->op, "AveragePool") == 0)
                acc /= (double)(c->include_pad ? padded : real);
            else if (strcmp(c->op, "LpPool") == 0)
                acc = pow(acc, 1.0 / (double)c->p);
            y[pl * out_size + o] = acc;
            if (idx)
                idx[pl * out_size + o] = best;
        }
}

static void add_ints(kr_attr *a, int *n, const char *name, const int64_t *v, int count)
{
    a[*n] = (kr_attr){.kind = KR_INTS, .name = name, .n = count};
    memcpy(a[*n].ints, v, (size_t)count * sizeof *v);
    (*n)++;
}

static void run_pool_case_out(const pool_case *c, int threads, bool with_nan, bool indices)
{
    int64_t in_size = 1;
    for (int i = 0; i < c->nd; i++)
        in_size *= c->in[i];
    int64_t nx = c->N * c->C * in_size;
    float *x = malloc((size_t)nx * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)kr_uniform();
    if (with_nan)
        x[nx / 3] = NAN;
    int64_t out[3];
    double *y = malloc((size_t)nx * 4 * sizeof *y);
    int64_t *idx = malloc((size_t)nx * 4 * sizeof *idx);
    naive_pool(c, x, y, idx, out);
    int64_t out_size = out[0] * out[1] * out[2];

    kr_attr attrs[10];
    int na = 0;
    int64_t ks[3], ss[3], ds[3];
    for (int i = 0; i < c->nd; i++)
        ks[i] = c->k[i], ss[i] = c->s[i], ds[i] = c->d[i];
    add_ints(attrs, &na, "kernel_shape", ks, c->nd);
    add_ints(attrs, &na, "strides", ss, c->nd);
    add_ints(attrs, &na, "pads", c->pads, 2 * c->nd);
    bool max = strcmp(c->op, "MaxPool") == 0;
    if (max)
        add_ints(attrs, &na, "dilations", ds, c->nd);
    attrs[na++] = (kr_attr){.kind = KR_INT, .name = "ceil_mode", .i = c->ceil_mode};
    attrs[na++] = (kr_attr){.kind = KR_INT, .name = "count_include_pad", .i = c->include_pad};
    attrs[na++] = (kr_attr){.kind = KR_INT, .name = "storage_order", .i = c->storage_order};
    if (c->p)
        attrs[na++] = (kr_attr){.kind = KR_INT, .name = "p", .i = c->p};
    attrs[na] = (kr_attr){.kind = KR_END};
    kr_input in = {.name = "x", .dtype = LD_DTYPE_FLOAT32, .rank = c->nd + 2,
                   .dims = {c->N, c->C}, .data = x};
    for (int i = 0; i < c->nd; i++)
        in.dims[2 + i] = c->in[i];
    kr_result r;
    kr_run(12, c->op, attrs, &in, 1, max && indices ? "y,i" : "y", threads, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->count, c->N * c->C * out_size);
    for (int i = 0; i < c->nd; i++)
        assert_int_equal(r.t[0]->shape.dims[2 + i], out[3 - c->nd + i]);
    for (int64_t o = 0; o < r.t[0]->count; o++) {
        double got = ((const float *)r.t[0]->data)[o], want = (float)y[o];
        bool ok = isnan(want) ? isnan(got) : got == want;
        if (!ok)
            fail_msg("%s nd=%d threads=%d: y[%lld] = %.9g, expected %.9g", c->op, c->nd, threads,
                     (long long)o, got, want);
        if (!max || !indices)
            continue;
        /* Indices: flat in the whole tensor, storage order applied. */
        int64_t pl = o / out_size, off = idx[o], want_i = off;
        if (c->storage_order == 1 && c->nd == 2)
            want_i = (off / c->in[1]) + (off % c->in[1]) * c->in[0];
        want_i += pl * in_size;
        assert_int_equal(((const int64_t *)r.t[1]->data)[o], want_i);
    }
    kr_free(&r);
    free(x), free(y), free(idx);
}

static void run_pool_case(const pool_case *c, int threads, bool with_nan)
{
    run_pool_case_out(c, threads, with_nan, true);
}

/* Without Indices and dilations MaxPool float32 takes the separable path. */
static void test_maxpool_separable(void **state)
{
    (void)state;
    pool_case c = {.op = "MaxPool", .nd = 2, .N = 2, .C = 3, .in = {9, 11}, .k = {3, 2},
                   .s = {2, 3}, .d = {1, 1}, .pads = {1, 0, 1, 2}, .ceil_mode = true};
    for (int threads = 1; threads <= 2; threads++) {
        run_pool_case_out(&c, threads, false, false);
        run_pool_case_out(&c, threads, true, false);
    }
    pool_case c1 = {.op = "MaxPool", .nd = 1, .N = 1, .C = 2, .in = {13}, .k = {4}, .s = {1},
                    .d = {1}, .pads = {2, 1}};
    run_pool_case_out(&c1, 1, true, false);
    pool_case c3 = {.op = "MaxPool", .nd = 3, .N = 1, .C = 2, .in = {5, 4, 6}, .k = {2, 3, 2},
                    .s = {2, 1, 2}, .d = {1, 1, 1}, .pads = {0, 1, 1, 1, 1, 0}};
    run_pool_case_out(&c3, 2, false, false);
}

static void test_maxpool(void **state)
{
    (void)state;
    pool_case c = {.op = "MaxPool", .nd = 2, .N = 2, .C = 3, .in = {9, 11}, .k = {3, 2},
                   .s = {2, 3}, .d = {1, 2}, .pads = {1, 0, 1, 2}, .ceil_mode = true};
    for (int threads = 1; threads <= 2; threads++) {
        run_pool_case(&c, threads, false);
        c.storage_order = 1;
        run_pool_case(&c, threads, false);
        c.storage_order = 0;
        run_pool_case(&c, threads, true); /* NaN propagates */
    }
    pool_case c1 = {.op = "MaxPool", .nd = 1, .N = 1, .C = 2, .in = {13}, .k = {4}, .s = {3},
                    .d = {1}, .pads = {2, 1}};
    run_pool_case(&c1, 1, false);
    pool_case c3 = {.op = "MaxPool", .nd = 3, .N = 1, .C = 2, .in = {5, 4, 6}, .k = {2, 3, 2},
                    .s = {2, 1, 2}, .d = {1, 1, 2}, .pads = {0, 1, 1, 1, 1, 0}};
    run_pool_case(&c3, 2, false);
}

static void test_averagepool_and_lppool(void **state)
{
    (void)state;
    for (int include = 0; include <= 1; include++)
        for (int ceil = 0; ceil <= 1; ceil++) {
            pool_case c = {.op = "AveragePool", .nd = 2, .N = 1, .C = 3, .in = {8, 10},
                           .k = {3, 3}, .s = {2, 2}, .d = {1, 1}, .pads = {1, 1, 0, 1},
                           .ceil_mode = ceil, .include_pad = include};
            run_pool_case(&c, 1, false);
            run_pool_case(&c, 2, false);
        }
    pool_case c3 = {.op = "AveragePool", .nd = 3, .N = 2, .C = 1, .in = {4, 5, 6},
                    .k = {2, 2, 3}, .s = {1, 2, 2}, .d = {1, 1, 1}, .pads = {1, 0, 1, 0, 1, 1},
                    .include_pad = true};
    run_pool_case(&c3, 2, false);
    pool_case lp = {.op = "LpPool", .nd = 2, .N = 1, .C = 2, .in = {7, 7}, .k = {3, 2},
                    .s = {2, 2}, .d = {1, 1}, .pads = {1, 1, 1, 0}, .p = 3};
    run_pool_case(&lp, 1, false);
    lp.p = 2;
    run_pool_case(&lp, 2, false);
}

static void test_global_pools(void **state)
{
    (void)state;
    /* 18 planes: GlobalAveragePool sums 16 of them 8 at a time, the rest alone */
    float x[2 * 9 * 5];
    for (int i = 0; i < 90; i++)
        x[i] = (float)kr_uniform();
    x[7] = NAN; /* plane 1 */
    kr_input in = {.name = "x", .dtype = LD_DTYPE_FLOAT32, .rank = 3, .dims = {2, 9, 5},
                   .data = x};
    const char *ops[] = {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"};
    for (int k = 0; k < 3; k++) {
        kr_result r;
        kr_run(2, ops[k], NULL, &in, 1, "y", 2, &r);
        kr_expect_ok(&r);
        assert_int_equal(r.t[0]->shape.rank, 3);
        assert_int_equal(r.t[0]->shape.dims[2], 1);
        for (int pl = 0; pl < 18; pl++) {
            double acc = k == 1 ? -INFINITY : 0;
            for (int i = 0; i < 5; i++) {
                double v = x[pl * 5 + i];
                acc = k == 0 ? acc + v : k == 2 ? acc + v * v : (v > acc || isnan(v)) ? v : acc;
                if (k == 1 && isnan(v))
                    break;
            }
            double want = k == 0 ? acc / 5 : k == 2 ? sqrt(acc) : acc;
            float got = ((const float *)r.t[0]->data)[pl];
            if (!(isnan(want) ? isnan(got) : got == (float)want))
                fail_msg("%s plane %d: got %.9g, expected %.9g", ops[k], pl, got, want);
        }
        kr_free(&r);
    }
}

/* MaxPool with indices, then MaxUnpool: the maxima land where they came from. */
static void test_maxunpool_round_trip(void **state)
{
    (void)state;
    float x[1 * 2 * 4 * 6];
    for (int i = 0; i < 48; i++)
        x[i] = (float)i * (i % 2 ? -1.0f : 1.0f);
    kr_input in = {.name = "x", .dtype = LD_DTYPE_FLOAT32, .rank = 4, .dims = {1, 2, 4, 6},
                   .data = x};
    kr_attr attrs[] = {{.kind = KR_INTS, .name = "kernel_shape", .n = 2, .ints = {2, 2}},
                       {.kind = KR_INTS, .name = "strides", .n = 2, .ints = {2, 2}},
                       {0}};
    kr_result pooled, un;
    kr_run(12, "MaxPool", attrs, &in, 1, "y,i", 1, &pooled);
    kr_expect_ok(&pooled);
    kr_input back[2] = {
        {.name = "y", .dtype = LD_DTYPE_FLOAT32, .rank = 4, .dims = {1, 2, 2, 3},
         .data = pooled.t[0]->data},
        {.name = "i", .dtype = LD_DTYPE_INT64, .rank = 4, .dims = {1, 2, 2, 3},
         .data = pooled.t[1]->data},
    };
    kr_run(11, "MaxUnpool", attrs, back, 2, "z", 2, &un);
    kr_expect_ok(&un);
    assert_int_equal(un.t[0]->count, 48);
    int nonzero = 0;
    for (int i = 0; i < 48; i++) {
        float v = ((const float *)un.t[0]->data)[i];
        if (v != 0) {
            assert_true(v == x[i]);
            nonzero++;
        }
    }
    assert_int_equal(nonzero, 12); /* every 2x2 window's maximum is positive */
    kr_free(&un);
    /* A bad index is an error naming the node. */
    ((int64_t *)pooled.t[1]->data)[3] = 48;
    kr_run(11, "MaxUnpool", attrs, back, 2, "z", 1, &un);
    kr_expect_fail(&un, LD_ERR_INPUT, "index I[3] = 48 is outside the output");
    kr_free(&un);
    kr_free(&pooled);
}

static void test_maxroipool(void **state)
{
    (void)state;
    float x[1 * 1 * 4 * 5];
    for (int i = 0; i < 20; i++)
        x[i] = (float)i;
    /* ROI (x1, y1, x2, y2) = (1, 0, 3, 3) scaled by 1: 4 rows x 3 cols,
     * pooled 2x2: bin 2 rows x 1.5 cols. */
    float rois[2 * 5] = {0, 1, 0, 3, 3, 0, 2, 2, 2, 2};
    kr_input ins[2] = {
        {.name = "x", .dtype = LD_DTYPE_FLOAT32, .rank = 4, .dims = {1, 1, 4, 5}, .data = x},
        {.name = "r", .dtype = LD_DTYPE_FLOAT32, .rank = 2, .dims = {2, 5}, .data = rois},
    };
    kr_attr attrs[] = {{.kind = KR_INTS, .name = "pooled_shape", .n = 2, .ints = {2, 2}}, {0}};
    kr_result r;
    kr_run(1, "MaxRoiPool", attrs, ins, 2, "y", 1, &r);
    kr_expect_ok(&r);
    /* ROI 0: rows [0,2) and [2,4); cols [1, 1+ceil(1.5)=3) and [1+1, 1+3). */
    const float want[8] = {7, 8, 17, 18, 12, 12, 12, 12};
    assert_int_equal(r.t[0]->count, 8);
    for (int i = 0; i < 8; i++)
        if (((const float *)r.t[0]->data)[i] != want[i])
            fail_msg("y[%d] = %g, expected %g", i, ((const float *)r.t[0]->data)[i], want[i]);
    kr_free(&r);
    rois[5] = 3; /* batch index out of range */
    kr_run(1, "MaxRoiPool", attrs, ins, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "rois[1] has batch index 3 outside [0, 1)");
    kr_free(&r);
}

static void test_pool_errors(void **state)
{
    (void)state;
    float x[64] = {0};
    kr_input in = {.name = "x", .dtype = LD_DTYPE_FLOAT32, .rank = 4, .dims = {1, 1, 4, 4},
                   .data = x};
    kr_result r;
    kr_run(12, "MaxPool", NULL, &in, 1, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "attribute 'kernel_shape' is required");
    kr_free(&r);
    kr_attr k3[] = {{.kind = KR_INTS, .name = "kernel_shape", .n = 3, .ints = {2, 2, 2}}, {0}};
    kr_run(12, "AveragePool", k3, &in, 1, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "attribute 'kernel_shape' has 3 entries, expected 2");
    kr_free(&r);
    kr_attr k5[] = {{.kind = KR_INTS, .name = "kernel_shape", .n = 2, .ints = {5, 1}}, {0}};
    kr_run(12, "MaxPool", k5, &in, 1, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "larger than the padded input");
    kr_free(&r);
    kr_attr order[] = {{.kind = KR_INTS, .name = "kernel_shape", .n = 2, .ints = {2, 2}},
                       {.kind = KR_INT, .name = "storage_order", .i = 2},
                       {0}};
    kr_run(12, "MaxPool", order, &in, 1, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "storage_order must be 0 or 1");
    kr_free(&r);
    int32_t xi[16] = {0};
    kr_input ini = {.name = "x", .dtype = LD_DTYPE_INT32, .rank = 4, .dims = {1, 1, 4, 4},
                    .data = xi};
    kr_attr k2[] = {{.kind = KR_INTS, .name = "kernel_shape", .n = 2, .ints = {2, 2}}, {0}};
    kr_run(12, "AveragePool", k2, &ini, 1, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_UNSUPPORTED, "dtype int32 is not supported");
    kr_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_maxpool, ob_teardown),
        cmocka_unit_test_teardown(test_maxpool_separable, ob_teardown),
        cmocka_unit_test_teardown(test_averagepool_and_lppool, ob_teardown),
        cmocka_unit_test_teardown(test_global_pools, ob_teardown),
        cmocka_unit_test_teardown(test_maxunpool_round_trip, ob_teardown),
        cmocka_unit_test_teardown(test_maxroipool, ob_teardown),
        cmocka_unit_test_teardown(test_pool_errors, ob_teardown),
    };
    return cmocka_run_group_tests_name("kernels_pool", tests, NULL, NULL);
}
