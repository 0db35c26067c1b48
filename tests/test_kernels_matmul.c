/* Unit tests for the matrix-product kernels (backends/kernels/gemm.c)
 * against a naive double reference: MatMul numpy broadcasting (batch
 * broadcast, 1-D operands, the folded x @ W path) in float32/float64 on one
 * and two threads, integer MatMul wrapping like the type, Gemm with every C
 * broadcast (scalar, row, column, full, absent), transposes and alpha/beta,
 * MatMulInteger with per-row/per-column zero points, QLinearMatMul with
 * per-column scales, and the error paths (messages name the node). */
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

static int64_t count_of(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

static void *random_data(ld_dtype d, int64_t n, double *as_double)
{
    void *p = malloc((size_t)(n ? n : 1) * ld_dtype_size(d));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) {
        double v = kr_uniform();
        if (d == LD_DTYPE_FLOAT32)
            v = ((float *)p)[i] = (float)v;
        else
            ((double *)p)[i] = v;
        as_double[i] = v;
    }
    return p;
}

/* numpy matmul of A (ra dims) and B (rb dims), naive, in double. */
static void naive_matmul(const double *a, int ra, const int64_t *ad, const double *b, int rb,
                         const int64_t *bd, double *y, double *mag, int *ry, int64_t *yd)
{
    int64_t M = ra == 1 ? 1 : ad[ra - 2], K = ad[ra - 1], N = rb == 1 ? 1 : bd[rb - 1];
    int bra = ra > 2 ? ra - 2 : 0, brb = rb > 2 ? rb - 2 : 0, br = bra > brb ? bra : brb;
    int64_t bdims[8];
    for (int i = 0; i < br; i++) {
        int ia = i - (br - bra), ib = i - (br - brb);
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        bdims[i] = da == 1 ? db : da;
    }
    *ry = 0;
    for (int i = 0; i < br; i++)
        yd[(*ry)++] = bdims[i];
    if (ra > 1)
        yd[(*ry)++] = M;
    if (rb > 1)
        yd[(*ry)++] = N;
    int64_t batch = count_of(br, bdims);
    for (int64_t t = 0; t < batch; t++) {
        int64_t ai = 0, bi = 0, rest = t, sa = 1, sb = 1;
        for (int d = br - 1; d >= 0; d--) {
            int64_t idx = rest % bdims[d];
            rest /= bdims[d];
            int ia = d - (br - bra), ib = d - (br - brb);
            if (ia >= 0) {
                ai += (ad[ia] == 1 ? 0 : idx) * sa;
                sa *= ad[ia];
            }
            if (ib >= 0) {
                bi += (bd[ib] == 1 ? 0 : idx) * sb;
                sb *= bd[ib];
            }
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = 0, m = 0;
                for (int64_t k = 0; k < K; k++) {
                    double p = a[ai * M * K + i * K + k] * b[bi * K * N + k * N + j];
                    s += p;
                    m += fabs(p);
                }
                y[(t * M + i) * N + j] = s;
                mag[(t * M + i) * N + j] = m;
            }
    }
}

static void check_matmul(ld_dtype dt, int ra, const int64_t *ad, int rb, const int64_t *bd,
                         int threads)
{
    int64_t na = count_of(ra, ad), nb = count_of(rb, bd);
    double *a = malloc((size_t)na * 8), *b = malloc((size_t)nb * 8);
    double *y = malloc(4096 * 8), *mag = malloc(4096 * 8);
    void *as = random_data(dt, na, a), *bs = random_data(dt, nb, b);
    int ry;
    int64_t yd[16];
    naive_matmul(a, ra, ad, b, rb, bd, y, mag, &ry, yd);
    kr_input ins[2] = {{.name = "a", .dtype = dt, .rank = ra, .data = as},
                       {.name = "b", .dtype = dt, .rank = rb, .data = bs}};
    memcpy(ins[0].dims, ad, (size_t)ra * 8);
    memcpy(ins[1].dims, bd, (size_t)rb * 8);
    kr_result r;
    kr_run(13, "MatMul", NULL, ins, 2, "y", threads, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.rank, ry);
    for (int i = 0; i < ry; i++)
        assert_int_equal(r.t[0]->shape.dims[i], yd[i]);
    int64_t K = ad[ra - 1];
    double u = dt == LD_DTYPE_FLOAT32 ? 0x1p-24 : 0x1p-53;
    for (int64_t i = 0; i < r.t[0]->count; i++) {
        double got = ld_tensor_get_double(r.t[0], i);
        if (!(fabs(got - y[i]) <= (double)(K + 2) * u * mag[i]))
            fail_msg("MatMul %s ranks %d x %d threads %d: y[%lld] = %.17g, reference %.17g",
                     ld_dtype_name(dt), ra, rb, threads, (long long)i, got, y[i]);
    }
    kr_free(&r);
    free(a), free(b), free(y), free(mag), free(as), free(bs);
}

static void test_matmul_broadcasting(void **state)
{
    (void)state;
    static const struct {
        int ra, rb;
        int64_t ad[4], bd[4];
    } cases[] = {
        {4, 3, {2, 1, 3, 4}, {5, 4, 2}},  /* batch broadcast both ways */
        {1, 3, {4}, {2, 4, 3}},           /* 1-D A */
        {3, 1, {2, 3, 4}, {4}},           /* 1-D B */
        {1, 1, {7}, {7}},                 /* dot product -> scalar */
        {3, 2, {3, 5, 4}, {4, 6}},        /* folded x @ W */
        {2, 3, {3, 4}, {2, 4, 5}},        /* 2-D A, batched B */
        {2, 2, {1, 0}, {0, 3}},           /* K = 0: zeros */
        {3, 3, {0, 2, 3}, {1, 3, 2}},     /* empty batch */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int threads = 1; threads <= 2; threads++) {
            check_matmul(LD_DTYPE_FLOAT32, cases[c].ra, cases[c].ad, cases[c].rb, cases[c].bd,
                         threads);
            check_matmul(LD_DTYPE_FLOAT64, cases[c].ra, cases[c].ad, cases[c].rb, cases[c].bd,
                         threads);
        }
}

static void test_matmul_integer_wraps(void **state)
{
    (void)state;
    int32_t a[2 * 2] = {INT32_MAX, 2, -3, 4}, b[2 * 2] = {2, 1, 5, -6};
    kr_input ins[2] = {
        {.name = "a", .dtype = LD_DTYPE_INT32, .rank = 2, .dims = {2, 2}, .data = a},
        {.name = "b", .dtype = LD_DTYPE_INT32, .rank = 2, .dims = {2, 2}, .data = b}};
    kr_result r;
    kr_run(13, "MatMul", NULL, ins, 2, "y", 1, &r);
    kr_expect_ok(&r);
    const int32_t *y = r.t[0]->data;
    /* INT32_MAX * 2 + 10 wraps to 8; INT32_MAX - 12 stays. */
    assert_int_equal(y[0], (int32_t)((uint32_t)INT32_MAX * 2u + 10u));
    assert_int_equal(y[1], INT32_MAX - 12);
    assert_int_equal(y[2], 14);
    assert_int_equal(y[3], -27);
    kr_free(&r);
    int64_t a64[3] = {1, -2, 3}, b64[3] = {4, 5, -6};
    kr_input i64[2] = {{.name = "a", .dtype = LD_DTYPE_INT64, .rank = 1, .dims = {3}, .data = a64},
                       {.name = "b", .dtype = LD_DTYPE_INT64, .rank = 1, .dims = {3}, .data = b64}};
    kr_run(13, "MatMul", NULL, i64, 2, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.rank, 0);
    assert_int_equal(((const int64_t *)r.t[0]->data)[0], 4 - 10 - 18);
    kr_free(&r);
}

/* Gemm with C of shape cdims (rank crank; -1: no C) and both transposes. */
static void check_gemm(int crank, const int64_t *cdims, bool ta, bool tb, float alpha, float beta)
{
    enum { M = 3, N = 4, K = 5 };
    double a[M * K], b[K * N], c[M * N];
    float *as = random_data(LD_DTYPE_FLOAT32, M * K, a);
    float *bs = random_data(LD_DTYPE_FLOAT32, K * N, b);
    int64_t nc = crank >= 0 ? count_of(crank, cdims) : 0;
    float *cs = random_data(LD_DTYPE_FLOAT32, nc, c);
    kr_input ins[3] = {
        {.name = "a", .dtype = LD_DTYPE_FLOAT32, .rank = 2, .dims = {ta ? K : M, ta ? M : K},
         .data = as},
        {.name = "b", .dtype = LD_DTYPE_FLOAT32, .rank = 2, .dims = {tb ? N : K, tb ? K : N},
         .data = bs, .initializer = true},
        {.name = "c", .dtype = LD_DTYPE_FLOAT32, .rank = crank, .data = cs, .initializer = true},
    };
    if (crank > 0)
        memcpy(ins[2].dims, cdims, (size_t)crank * 8);
    kr_attr attrs[] = {{.kind = KR_INT, .name = "transA", .i = ta},
                       {.kind = KR_INT, .name = "transB", .i = tb},
                       {.kind = KR_FLOAT, .name = "alpha", .f = alpha},
                       {.kind = KR_FLOAT, .name = "beta", .f = beta},
                       {0}};
    kr_result r;
    kr_run(13, "Gemm", attrs, ins, crank >= 0 ? 3 : 2, "y", 2, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->shape.dims[0], M);
    assert_int_equal(r.t[0]->shape.dims[1], N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, m = 0;
            for (int k = 0; k < K; k++) {
                double p = (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
                s += p;
                m += fabs(p);
            }
            double cv = 0;
            if (crank >= 0) {
                int64_t rows = crank == 2 ? cdims[0] : 1, cols = crank >= 1 ? cdims[crank - 1] : 1;
                cv = c[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)];
            }
            double want = alpha * s + beta * cv;
            double bound = (K + 3) * 0x1p-24 * (fabs(alpha) * m + fabs(beta * cv));
            double got = ((const float *)r.t[0]->data)[i * N + j];
            if (!(fabs(got - want) <= bound))
                fail_msg("Gemm C rank %d ta=%d tb=%d: y[%d,%d] = %.9g, expected %.9g", crank, ta,
                         tb, i, j, got, want);
        }
    kr_free(&r);
    free(as), free(bs), free(cs);
}

static void test_gemm_bias_broadcasts(void **state)
{
    (void)state;
    const int64_t full[] = {3, 4}, row[] = {4}, row2[] = {1, 4}, col[] = {3, 1}, one[] = {1};
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        check_gemm(2, full, ta, tb, 1.0f, 1.0f);
        check_gemm(1, row, ta, tb, 0.5f, -2.0f);
        check_gemm(2, row2, ta, tb, 1.0f, 0.25f);
        check_gemm(2, col, ta, tb, -1.5f, 1.0f);
        check_gemm(1, one, ta, tb, 1.0f, 3.0f);
        check_gemm(0, NULL, ta, tb, 2.0f, 1.0f);
        check_gemm(-1, NULL, ta, tb, 1.0f, 1.0f);
    }
}

/* MatMulInteger: per-row a_zero_point and per-column b_zero_point. */
static void test_matmul_integer_zero_points(void **state)
{
    (void)state;
    uint8_t a[2 * 3] = {10, 200, 3, 255, 0, 77};
    int8_t b[3 * 2] = {-128, 5, 127, -7, 0, 33};
    uint8_t azp[2] = {12, 100};
    int8_t bzp[2] = {-1, 4};
    kr_input ins[4] = {
        {.name = "a", .dtype = LD_DTYPE_UINT8, .rank = 2, .dims = {2, 3}, .data = a},
        {.name = "b", .dtype = LD_DTYPE_INT8, .rank = 2, .dims = {3, 2}, .data = b},
        {.name = "azp", .dtype = LD_DTYPE_UINT8, .rank = 1, .dims = {2}, .data = azp},
        {.name = "bzp", .dtype = LD_DTYPE_INT8, .rank = 1, .dims = {2}, .data = bzp},
    };
    kr_result r;
    kr_run(10, "MatMulInteger", NULL, ins, 4, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_INT32);
    int32_t want[4];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            int32_t s = 0;
            for (int k = 0; k < 3; k++)
                s += (a[i * 3 + k] - azp[i]) * (b[k * 2 + j] - bzp[j]);
            want[i * 2 + j] = s;
        }
    assert_memory_equal(r.t[0]->data, want, sizeof want);
    kr_free(&r);

    float as = 0.1f, bs[2] = {0.02f, 0.5f}, ys = 0.3f;
    uint8_t yzp = 128;
    kr_input q[8] = {
        ins[0],
        {.name = "as", .dtype = LD_DTYPE_FLOAT32, .rank = 0, .data = &as, .initializer = true},
        {.name = "azp", .dtype = LD_DTYPE_UINT8, .rank = 0, .data = azp, .initializer = true},
        ins[1],
        {.name = "bs", .dtype = LD_DTYPE_FLOAT32, .rank = 1, .dims = {2}, .data = bs,
         .initializer = true},
        {.name = "bzp", .dtype = LD_DTYPE_INT8, .rank = 1, .dims = {2}, .data = bzp,
         .initializer = true},
        {.name = "ys", .dtype = LD_DTYPE_FLOAT32, .rank = 0, .data = &ys, .initializer = true},
        {.name = "yzp", .dtype = LD_DTYPE_UINT8, .rank = 0, .data = &yzp, .initializer = true},
    };
    kr_run(10, "QLinearMatMul", NULL, q, 8, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_UINT8);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            int32_t s = 0;
            for (int k = 0; k < 3; k++)
                s += (a[i * 3 + k] - azp[0]) * (b[k * 2 + j] - bzp[j]);
            double v = nearbyintf((float)s * (as * bs[j] / ys)) + yzp;
            v = v < 0 ? 0 : v > 255 ? 255 : v;
            assert_int_equal(((const uint8_t *)r.t[0]->data)[i * 2 + j], (int)v);
        }
    kr_free(&r);
}

static void test_matmul_errors(void **state)
{
    (void)state;
    float d[64] = {0};
    kr_result r;
    kr_input k_mismatch[2] = {
        {.name = "a", .dtype = LD_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = d},
        {.name = "b", .dtype = LD_DTYPE_FLOAT32, .rank = 2, .dims = {4, 2}, .data = d}};
    kr_run(13, "MatMul", NULL, k_mismatch, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "A (2x3) and B (4x2): inner dimensions 3 and 4 differ");
    kr_free(&r);
    kr_input batch[2] = {
        {.name = "a", .dtype = LD_DTYPE_FLOAT32, .rank = 3, .dims = {2, 2, 3}, .data = d},
        {.name = "b", .dtype = LD_DTYPE_FLOAT32, .rank = 3, .dims = {3, 3, 2}, .data = d}};
    kr_run(13, "MatMul", NULL, batch, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT,
                   "batch dimensions of A (2x2x3) and B (3x3x2) do not broadcast");
    kr_free(&r);
    kr_run(13, "Gemm", NULL, k_mismatch, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "inner dimensions differ");
    kr_free(&r);
    kr_input no_c[2] = {
        {.name = "a", .dtype = LD_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = d},
        {.name = "b", .dtype = LD_DTYPE_FLOAT32, .rank = 2, .dims = {3, 2}, .data = d}};
    kr_run(9, "Gemm", NULL, no_c, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "input C is required before opset 11");
    kr_free(&r);
    kr_input bad_c[3] = {no_c[0], no_c[1],
                         {.name = "c", .dtype = LD_DTYPE_FLOAT32, .rank = 1, .dims = {3},
                          .data = d}};
    kr_run(13, "Gemm", NULL, bad_c, 3, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "C (3) does not broadcast to [2, 2]");
    kr_free(&r);
    kr_input vec[2] = {
        {.name = "a", .dtype = LD_DTYPE_FLOAT32, .rank = 1, .dims = {3}, .data = d}, no_c[1]};
    kr_run(13, "Gemm", NULL, vec, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_INPUT, "A (3) and B (3x2) must be 2-D");
    kr_free(&r);
    uint8_t u[8] = {0};
    kr_input u8[2] = {{.name = "a", .dtype = LD_DTYPE_UINT8, .rank = 2, .dims = {2, 2}, .data = u},
                      {.name = "b", .dtype = LD_DTYPE_UINT8, .rank = 2, .dims = {2, 2}, .data = u}};
    kr_run(13, "MatMul", NULL, u8, 2, "y", 1, &r);
    kr_expect_fail(&r, LD_ERR_UNSUPPORTED, "dtype uint8 is not supported");
    kr_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_matmul_broadcasting, ob_teardown),
        cmocka_unit_test_teardown(test_matmul_integer_wraps, ob_teardown),
        cmocka_unit_test_teardown(test_gemm_bias_broadcasts, ob_teardown),
        cmocka_unit_test_teardown(test_matmul_integer_zero_points, ob_teardown),
        cmocka_unit_test_teardown(test_matmul_errors, ob_teardown),
    };
    return cmocka_run_group_tests_name("kernels_matmul", tests, NULL, NULL);
}
