/* Unit tests for the shape and layout kernels (backends/kernels/{shape_ops,
 * layout,region_ops,shape_util}.c), for what the ONNX node tests cover
 * poorly: the strided copy engine against a naive reference (every element
 * size, one and several threads), dtypes the node tests lack (int8, uint16,
 * int64, bool, float16), old opsets (attributes that later became inputs),
 * empty tensors, clamping corner cases, and the error paths: bad shapes fail
 * with a message naming the node, hostile value-derived shapes fail before
 * anything is allocated. Indexing, scatter and ordering kernels are tested
 * in test_kernels_indexing.c. Models are one node, run on the reference
 * backend through tests/support/kernel_run.h. */
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

#include "backends/kernels/shape_util.h"
#include "layerdiff/round.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

#define expect_fail kr_expect_fail_op
#define expect_shape kr_expect_shape
#define expect_values kr_expect_values
#define expect_i64 kr_expect_i64

#define I64 LD_DTYPE_INT64
#define F32 LD_DTYPE_FLOAT32
/* A graph input (not an initializer). */
#define IN(...) {__VA_ARGS__, false}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd64(void)
{
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return rng_state >> 11;
}

/* --- the strided copy engine ----------------------------------------------------------- */

/* Random views (permutations, negative and zero strides, size-1 axes) of a
 * buffer of patterned bytes, against a naive per-element walk, for element
 * sizes 1/2/4/8 and 1 or 3 threads (large views go parallel). */
static void test_view_copy_matches_naive(void **state)
{
    (void)state;
    size_t cap = (size_t)1 << 22;
    uint8_t *src = malloc(cap), *dst = malloc(cap), *want = malloc(cap);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(want);
    for (size_t i = 0; i < cap; i++)
        src[i] = (uint8_t)(i * 131 + (i >> 9));
    int ran = 0, large = 0;
    for (int iter = 0; iter < 400; iter++) {
        /* Every 5th view is large (3-D, 30-69 per axis): SIMD blocks, and
         * above 1 MB the threaded path. */
        bool big = iter % 5 == 0;
        size_t es = (size_t)1 << (rnd64() % 4);
        ld_view v = {.rank = big ? 3 : 1 + (int)(rnd64() % 5)};
        int64_t shape[8], strides[8], count = 1, perm[8];
        for (int d = 0; d < v.rank; d++) {
            shape[d] = big ? 30 + (int64_t)(rnd64() % 40) : 1 + (int64_t)(rnd64() % 7);
            perm[d] = d;
        }
        for (int d = v.rank - 1, s = 1; d >= 0; d--) {
            strides[d] = s;
            s *= (int)shape[d];
        }
        for (int d = v.rank - 1; d > 0; d--) { /* shuffle the axes */
            int j = (int)(rnd64() % (uint64_t)(d + 1));
            int64_t t = perm[d];
            perm[d] = perm[j];
            perm[j] = t;
        }
        int64_t base = 0, span = 1;
        for (int d = 0; d < v.rank; d++) {
            v.dims[d] = shape[perm[d]];
            v.strides[d] = strides[perm[d]];
            int kind = (int)(rnd64() % 8);
            if (kind == 0)
                v.strides[d] = 0; /* broadcast */
            if (kind == 1) {     /* reversed */
                base += (v.dims[d] - 1) * v.strides[d];
                v.strides[d] = -v.strides[d];
            }
            count *= v.dims[d];
            span *= shape[d];
        }
        if ((size_t)span * es > cap || (size_t)count * es > cap)
            continue;
        const uint8_t *origin = src + base * (int64_t)es;
        int64_t idx[8] = {0};
        for (int64_t i = 0; i < count; i++) {
            int64_t off = 0;
            for (int d = 0; d < v.rank; d++)
                off += idx[d] * v.strides[d];
            memcpy(want + (size_t)i * es, origin + off * (int64_t)es, es);
            for (int d = v.rank - 1; d >= 0 && ++idx[d] == v.dims[d]; d--)
                idx[d] = 0;
        }
        memset(dst, 0xEE, (size_t)count * es);
        ld_view_copy(dst, origin, &v, es, iter % 2 ? 3 : 1);
        ran++;
        large += (size_t)count * es >= ((size_t)1 << 20);
        if (memcmp(dst, want, (size_t)count * es) != 0)
            fail_msg("iteration %d: rank %d, element size %zu differs", iter, v.rank, es);
    }
    assert_true(ran > 300);
    assert_true(large > 0); /* the multi-threaded path ran too */
    free(src);
    free(dst);
    free(want);
}

/* --- shapes ------------------------------------------------------------------------------ */

static void test_reshape_rules_and_errors(void **state)
{
    (void)state;
    int8_t x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (int8_t)(i - 12);
    kr_result r;
    int64_t s1[] = {0, -1, 2};
    kr_input ins[] = {IN("x", LD_DTYPE_INT8, 3, {2, 3, 4}, x), IN("s", I64, 1, {3}, s1)};
    kr_run(14, "Reshape", NULL, ins, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 3, (int64_t[]){2, 6, 2});
    assert_memory_equal(r.t[0]->data, x, 24);
    kr_free(&r);

    int64_t s2[] = {-1, -1};
    kr_input bad2[] = {IN("x", LD_DTYPE_INT8, 3, {2, 3, 4}, x), IN("s", I64, 1, {2}, s2)};
    kr_run(14, "Reshape", NULL, bad2, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Reshape", "at most one dimension can be inferred");
    kr_free(&r);

    int64_t s3[] = {5, 5};
    kr_input bad3[] = {IN("x", LD_DTYPE_INT8, 3, {2, 3, 4}, x), IN("s", I64, 1, {2}, s3)};
    kr_run(14, "Reshape", NULL, bad3, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Reshape", "cannot reshape 2x3x4 (24 elements) to 5x5");
    kr_free(&r);

    int64_t s4[] = {0, -1};
    kr_attr allowzero[] = {{KR_INT, "allowzero", .i = 1}, {0}};
    kr_input bad4[] = {IN("x", LD_DTYPE_INT8, 3, {2, 3, 4}, x), IN("s", I64, 1, {2}, s4)};
    kr_run(14, "Reshape", allowzero, bad4, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Reshape", "cannot hold both 0 and -1");
    kr_free(&r);

    /* allowzero: 0 is a real dimension (an empty tensor from an empty one). */
    int64_t s5[] = {0, 7};
    kr_input ok5[] = {IN("x", LD_DTYPE_INT8, 2, {0, 3}, x), IN("s", I64, 1, {2}, s5)};
    kr_run(14, "Reshape", allowzero, ok5, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){0, 7});
    kr_free(&r);

    /* Reshape-1: the shape is an attribute. */
    kr_attr shape_attr[] = {{KR_INTS, "shape", .n = 2, .ints = {4, -1}}, {0}};
    kr_input one[] = {IN("x", F32, 3, {2, 3, 4}, (float[24]){0})};
    kr_run(1, "Reshape", shape_attr, one, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){4, 6});
    kr_free(&r);
}

static void test_hostile_shapes_fail_cleanly(void **state)
{
    (void)state;
    kr_result r;
    float x[2] = {1, 2};
    int64_t huge[] = {1000000, 1000000, 1000000};
    kr_input expand[] = {IN("x", F32, 1, {1}, x), IN("s", I64, 1, {3}, huge)};
    kr_run(13, "Expand", NULL, expand, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_NOMEM, "Expand", "exceeds the limit of");
    kr_free(&r);

    int64_t overflow[] = {INT64_MAX / 2, 4};
    kr_input cos[] = {IN("s", I64, 1, {2}, overflow)};
    kr_run(9, "ConstantOfShape", NULL, cos, 1, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "ConstantOfShape", "more elements than fit in int64");
    kr_free(&r);

    int64_t negative[] = {3, -2};
    kr_input cos2[] = {IN("s", I64, 1, {2}, negative)};
    kr_run(9, "ConstantOfShape", NULL, cos2, 1, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "ConstantOfShape", "negative dimension -2");
    kr_free(&r);

    int64_t reps[] = {INT64_MAX / 2 + 1};
    kr_input tile[] = {IN("x", F32, 1, {2}, x), IN("r", I64, 1, {1}, reps)};
    kr_run(13, "Tile", NULL, tile, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Tile", "overflows");
    kr_free(&r);

    float start = 0, limit = 1e30f, delta = 1;
    kr_input range[] = {IN("a", F32, 0, {0}, &start), IN("b", F32, 0, {0}, &limit),
                   IN("c", F32, 0, {0}, &delta)};
    kr_run(11, "Range", NULL, range, 3, "y", 1, &r);
    expect_fail(&r, LD_ERR_NOMEM, "Range", "over the limit");
    kr_free(&r);

    int64_t neg_expand[] = {-1, 2};
    kr_input expand2[] = {IN("x", F32, 1, {2}, x), IN("s", I64, 1, {2}, neg_expand)};
    kr_run(13, "Expand", NULL, expand2, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Expand", "negative dimension -1");
    kr_free(&r);
}

static void test_squeeze_unsqueeze_old_and_new(void **state)
{
    (void)state;
    kr_result r;
    uint16_t x[6] = {1, 2, 3, 4, 5, 6};
    kr_attr axes11[] = {{KR_INTS, "axes", .n = 2, .ints = {-1, 0}}, {0}};
    kr_input in11[] = {IN("x", LD_DTYPE_UINT16, 2, {2, 3}, x)};
    kr_run(11, "Unsqueeze", axes11, in11, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 4, (int64_t[]){1, 2, 3, 1});
    kr_free(&r);

    int64_t axes[] = {1, 1};
    kr_input dup[] = {IN("x", LD_DTYPE_UINT16, 2, {2, 3}, x), IN("a", I64, 1, {2}, axes)};
    kr_run(13, "Unsqueeze", NULL, dup, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Unsqueeze", "listed twice");
    kr_free(&r);

    int64_t sq[] = {1};
    kr_input bad[] = {IN("x", LD_DTYPE_UINT16, 3, {2, 3, 1}, x), IN("a", I64, 1, {1}, sq)};
    kr_run(13, "Squeeze", NULL, bad, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Squeeze", "cannot squeeze axis 1 of size 3");
    kr_free(&r);

    kr_input all[] = {IN("x", LD_DTYPE_UINT16, 4, {1, 2, 1, 3}, x)};
    kr_run(13, "Squeeze", NULL, all, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){2, 3});
    assert_memory_equal(r.t[0]->data, x, sizeof x);
    kr_free(&r);
}

static void test_shape_size_eyelike_range(void **state)
{
    (void)state;
    kr_result r;
    bool x[1] = {true};
    kr_attr se[] = {{KR_INT, "start", .i = -10}, {KR_INT, "end", .i = -1}, {0}};
    kr_input in[] = {IN("x", LD_DTYPE_BOOL, 4, {2, 0, 5, 1}, x)};
    kr_run(15, "Shape", se, in, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_i64(r.t[0], (int64_t[]){2, 0, 5}, 3);
    kr_free(&r);

    kr_run(13, "Size", NULL, in, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 0, NULL);
    expect_i64(r.t[0], (int64_t[]){0}, 1);
    kr_free(&r);

    kr_attr eye[] = {{KR_INT, "dtype", .i = LD_DTYPE_INT32}, {KR_INT, "k", .i = -1}, {0}};
    kr_input e[] = {IN("x", F32, 2, {3, 2}, (float[6]){0})};
    kr_run(9, "EyeLike", eye, e, 1, "y", 1, &r);
    kr_expect_ok(&r);
    assert_int_equal(r.t[0]->dtype, LD_DTYPE_INT32);
    expect_values(r.t[0], (double[]){0, 0, 1, 0, 0, 1}, 6);
    kr_free(&r);

    /* Float Range accumulates one addition at a time, in float32. */
    float start = 0, limit = 1, delta = 0.1f;
    kr_input rg[] = {IN("a", F32, 0, {0}, &start), IN("b", F32, 0, {0}, &limit), IN("c", F32, 0, {0}, &delta)};
    kr_run(11, "Range", NULL, rg, 3, "y", 1, &r);
    kr_expect_ok(&r);
    double want[10];
    float acc = 0;
    for (int i = 0; i < 10; i++, acc += delta)
        want[i] = acc;
    expect_values(r.t[0], want, 10);
    kr_free(&r);

    /* int64 near the top of the range: no overflow past the last element. */
    int64_t s = INT64_MAX - 10, l = INT64_MAX, d = 7;
    kr_input ri[] = {IN("a", I64, 0, {0}, &s), IN("b", I64, 0, {0}, &l), IN("c", I64, 0, {0}, &d)};
    kr_run(11, "Range", NULL, ri, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_i64(r.t[0], (int64_t[]){INT64_MAX - 10, INT64_MAX - 3}, 2);
    kr_free(&r);

    int64_t zero = 0;
    kr_input rz[] = {IN("a", I64, 0, {0}, &s), IN("b", I64, 0, {0}, &l), IN("c", I64, 0, {0}, &zero)};
    kr_run(11, "Range", NULL, rz, 3, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Range", "delta is zero");
    kr_free(&r);
}

static void test_tile_opsets(void **state)
{
    (void)state;
    kr_result r;
    int64_t x[] = {1, 2, 3, 4};
    int64_t reps[] = {2, 0};
    kr_input t[] = {IN("x", I64, 2, {2, 2}, x), IN("r", I64, 1, {2}, reps)};
    kr_run(13, "Tile", NULL, t, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){4, 0});
    kr_free(&r);

    /* Tile-1: tiles and axis are scalars. */
    float f[] = {1, 2, 3, 4};
    float tiles = 2, axis = 1;
    kr_input t1[] = {IN("x", F32, 2, {2, 2}, f), IN("t", F32, 0, {0}, &tiles), IN("a", F32, 0, {0}, &axis)};
    kr_run(1, "Tile", NULL, t1, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){1, 2, 1, 2, 3, 4, 3, 4}, 8);
    kr_free(&r);
}

/* --- layout ------------------------------------------------------------------------------- */

static void test_transpose_dtypes_and_threads(void **state)
{
    (void)state;
    enum { A = 37, B = 5, C = 128, D = 9 }; /* 1.7 MB: the copy goes parallel */
    int64_t *x = malloc(A * B * C * D * sizeof *x);
    assert_non_null(x);
    for (int i = 0; i < A * B * C * D; i++)
        x[i] = (int64_t)i * 1000003;
    kr_attr perm[] = {{KR_INTS, "perm", .n = 4, .ints = {2, 0, 3, 1}}, {0}};
    kr_input in[] = {IN("x", I64, 4, {A, B, C, D}, x)};
    for (int threads = 1; threads <= 2; threads++) {
        kr_result r;
        kr_run(13, "Transpose", perm, in, 1, "y", threads, &r);
        kr_expect_ok(&r);
        expect_shape(r.t[0], 4, (int64_t[]){C, A, D, B});
        const int64_t *y = r.t[0]->data;
        for (int c = 0; c < C; c++)
            for (int a = 0; a < A; a++)
                for (int d = 0; d < D; d++)
                    for (int b = 0; b < B; b++)
                        assert_int_equal(*y++, x[((a * B + b) * C + c) * D + d]);
        kr_free(&r);
    }
    free(x);

    kr_result r;
    kr_attr bad[] = {{KR_INTS, "perm", .n = 2, .ints = {0, 0}}, {0}};
    kr_input b[] = {IN("x", LD_DTYPE_BOOL, 2, {1, 2}, (bool[2]){true, false})};
    kr_run(13, "Transpose", bad, b, 1, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Transpose", "perm lists axis 0 twice");
    kr_free(&r);
}

static void test_slice_clamping_and_steps(void **state)
{
    (void)state;
    kr_result r;
    int16_t x[10];
    for (int i = 0; i < 10; i++)
        x[i] = (int16_t)i;
    /* Negative step from past the end down to before the start. */
    int64_t st[] = {INT64_MAX}, en[] = {INT64_MIN}, ax[] = {0}, sp[] = {-3};
    kr_input in[] = {IN("x", LD_DTYPE_INT16, 1, {10}, x), IN("s", I64, 1, {1}, st),
                IN("e", I64, 1, {1}, en), IN("a", I64, 1, {1}, ax), IN("p", I64, 1, {1}, sp)};
    kr_run(13, "Slice", NULL, in, 5, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){9, 6, 3, 0}, 4);
    kr_free(&r);

    /* Empty result: start after end with a positive step. */
    int64_t st2[] = {7}, en2[] = {2};
    kr_input in2[] = {IN("x", LD_DTYPE_INT16, 1, {10}, x), IN("s", I64, 1, {1}, st2),
                 IN("e", I64, 1, {1}, en2)};
    kr_run(13, "Slice", NULL, in2, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 1, (int64_t[]){0});
    kr_free(&r);

    int64_t zero[] = {0};
    kr_input in3[] = {IN("x", LD_DTYPE_INT16, 1, {10}, x), IN("s", I64, 1, {1}, st2),
                 IN("e", I64, 1, {1}, en2), {.name = NULL}, IN("p", I64, 1, {1}, zero)};
    kr_run(13, "Slice", NULL, in3, 5, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Slice", "step for axis 0 is zero");
    kr_free(&r);

    /* Slice-1: attributes, negative start. */
    kr_attr attrs[] = {{KR_INTS, "starts", .n = 1, .ints = {-3}},
                     {KR_INTS, "ends", .n = 1, .ints = {1000}}, {0}};
    kr_input in4[] = {IN("x", LD_DTYPE_INT16, 1, {10}, x)};
    kr_run(1, "Slice", attrs, in4, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){7, 8, 9}, 3);
    kr_free(&r);
}

static void test_concat_split_edge_cases(void **state)
{
    (void)state;
    kr_result r;
    uint8_t a[4] = {1, 2, 3, 4}, b[1] = {0};
    kr_attr axis1[] = {{KR_INT, "axis", .i = 1}, {0}};
    kr_input in[] = {IN("a", LD_DTYPE_UINT8, 2, {2, 2}, a), IN("b", LD_DTYPE_UINT8, 2, {2, 0}, b),
                IN("c", LD_DTYPE_UINT8, 2, {2, 2}, a)};
    kr_run(13, "Concat", axis1, in, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){1, 2, 1, 2, 3, 4, 3, 4}, 8);
    kr_free(&r);

    kr_input mismatch[] = {IN("a", LD_DTYPE_UINT8, 2, {2, 2}, a), IN("b", LD_DTYPE_UINT8, 2, {1, 2}, a)};
    kr_run(13, "Concat", axis1, mismatch, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Concat", "does not match input 0");
    kr_free(&r);

    /* Split-2 (attribute) with an omitted middle output. */
    kr_attr split[] = {{KR_INTS, "split", .n = 3, .ints = {1, 0, 3}}, {0}};
    kr_input x[] = {IN("x", LD_DTYPE_UINT8, 1, {4}, a)};
    kr_run(2, "Split", split, x, 1, "p,,q", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){1}, 1);
    expect_values(r.t[1], (double[]){2, 3, 4}, 3);
    kr_free(&r);

    kr_run(13, "Split", NULL, x, 1, "p,q,s", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Split", "cannot be split into 3 equal parts");
    kr_free(&r);

    int64_t sizes[] = {1, 2};
    kr_input x13[] = {IN("x", LD_DTYPE_UINT8, 1, {4}, a), IN("s", I64, 1, {2}, sizes)};
    kr_run(13, "Split", NULL, x13, 2, "p,q", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Split", "add up to 3");
    kr_free(&r);
}

static void test_pad_modes_and_opsets(void **state)
{
    (void)state;
    kr_result r;
    int32_t x[3] = {1, 2, 3};
    /* Reflect wider than the axis repeats the reflection (numpy). */
    int64_t pads[] = {5, 4};
    kr_attr reflect[] = {{KR_STRING, "mode", .s = "reflect"}, {0}};
    kr_input in[] = {IN("x", LD_DTYPE_INT32, 1, {3}, x), IN("p", I64, 1, {2}, pads)};
    kr_run(13, "Pad", reflect, in, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3}, 12);
    kr_free(&r);

    /* Crop first, then reflect within the kept elements (ONNX Runtime). */
    int32_t x4[4] = {1, 2, 3, 4};
    int64_t crop_reflect[] = {-1, 4};
    kr_input in1[] = {IN("x", LD_DTYPE_INT32, 1, {4}, x4), IN("p", I64, 1, {2}, crop_reflect)};
    kr_run(13, "Pad", reflect, in1, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){2, 3, 4, 3, 2, 3, 4}, 7);
    kr_free(&r);

    /* Negative pads crop; constant_value input of the data's type. */
    int64_t crop[] = {-1, 2};
    int32_t cv = -7;
    kr_input in2[] = {IN("x", LD_DTYPE_INT32, 1, {3}, x), IN("p", I64, 1, {2}, crop),
                 IN("v", LD_DTYPE_INT32, 0, {0}, &cv)};
    kr_run(13, "Pad", NULL, in2, 3, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){2, 3, -7, -7}, 4);
    kr_free(&r);

    /* Pad-2: pads and value attributes, float16 data, 2-D edge mode. */
    ld_fp16 h[4];
    for (int i = 0; i < 4; i++)
        h[i] = ld_fp32_to_fp16((float)i + 0.5f);
    kr_attr edge[] = {{KR_INTS, "pads", .n = 4, .ints = {1, 0, 0, 1}},
                    {KR_STRING, "mode", .s = "edge"}, {0}};
    kr_input in3[] = {IN("x", LD_DTYPE_FLOAT16, 2, {2, 2}, h)};
    kr_run(2, "Pad", edge, in3, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 2, (int64_t[]){3, 3});
    expect_values(r.t[0], (double[]){0.5, 1.5, 1.5, 0.5, 1.5, 1.5, 2.5, 3.5, 3.5}, 9);
    kr_free(&r);

    kr_attr constant[] = {{KR_INTS, "pads", .n = 4, .ints = {0, 1, 1, 0}},
                        {KR_FLOAT, "value", .f = 9.25f}, {0}};
    kr_run(2, "Pad", constant, in3, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){9.25, 0.5, 1.5, 9.25, 2.5, 3.5, 9.25, 9.25, 9.25}, 9);
    kr_free(&r);

    int64_t bad[] = {0, -5};
    kr_input in4[] = {IN("x", LD_DTYPE_INT32, 1, {3}, x), IN("p", I64, 1, {2}, bad)};
    kr_run(13, "Pad", NULL, in4, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "Pad", "give an invalid size");
    kr_free(&r);
}

static void test_depth_space_trilu_reverse(void **state)
{
    (void)state;
    kr_result r;
    int8_t x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (int8_t)i;
    /* DepthToSpace CRD then SpaceToDepth (DCR layout) on int8. */
    kr_attr crd[] = {{KR_INT, "blocksize", .i = 2}, {KR_STRING, "mode", .s = "CRD"}, {0}};
    kr_input in[] = {IN("x", LD_DTYPE_INT8, 4, {1, 4, 2, 2}, x)};
    kr_run(13, "DepthToSpace", crd, in, 1, "y", 1, &r);
    kr_expect_ok(&r);
    expect_shape(r.t[0], 4, (int64_t[]){1, 1, 4, 4});
    expect_values(r.t[0], (double[]){0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}, 16);
    kr_free(&r);

    kr_attr bs[] = {{KR_INT, "blocksize", .i = 3}, {0}};
    kr_run(13, "SpaceToDepth", bs, in, 1, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "SpaceToDepth", "multiples of blocksize 3");
    kr_free(&r);

    /* Trilu lower with a huge k keeps everything; upper with k=1. */
    int64_t k = INT64_MAX;
    kr_attr lower[] = {{KR_INT, "upper", .i = 0}, {0}};
    kr_input tr[] = {IN("x", LD_DTYPE_INT8, 2, {4, 4}, x), IN("k", I64, 0, {0}, &k)};
    kr_run(14, "Trilu", lower, tr, 2, "y", 1, &r);
    kr_expect_ok(&r);
    assert_memory_equal(r.t[0]->data, x, 16);
    kr_free(&r);

    int64_t k1 = 1;
    kr_input tr1[] = {IN("x", LD_DTYPE_INT8, 3, {1, 2, 3}, x), IN("k", I64, 0, {0}, &k1)};
    kr_run(14, "Trilu", NULL, tr1, 2, "y", 1, &r);
    kr_expect_ok(&r);
    expect_values(r.t[0], (double[]){0, 1, 2, 0, 0, 5}, 6);
    kr_free(&r);

    int64_t lens[] = {3, 5};
    kr_input rs[] = {IN("x", LD_DTYPE_INT8, 2, {4, 2}, x), IN("l", I64, 1, {2}, lens)};
    kr_run(10, "ReverseSequence", NULL, rs, 2, "y", 1, &r);
    expect_fail(&r, LD_ERR_INPUT, "ReverseSequence", "sequence_lens[1] = 5 is outside [0, 4]");
    kr_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_copy_matches_naive),
        cmocka_unit_test_teardown(test_reshape_rules_and_errors, ob_teardown),
        cmocka_unit_test_teardown(test_hostile_shapes_fail_cleanly, ob_teardown),
        cmocka_unit_test_teardown(test_squeeze_unsqueeze_old_and_new, ob_teardown),
        cmocka_unit_test_teardown(test_shape_size_eyelike_range, ob_teardown),
        cmocka_unit_test_teardown(test_tile_opsets, ob_teardown),
        cmocka_unit_test_teardown(test_transpose_dtypes_and_threads, ob_teardown),
        cmocka_unit_test_teardown(test_slice_clamping_and_steps, ob_teardown),
        cmocka_unit_test_teardown(test_concat_split_edge_cases, ob_teardown),
        cmocka_unit_test_teardown(test_pad_modes_and_opsets, ob_teardown),
        cmocka_unit_test_teardown(test_depth_space_trilu_reverse, ob_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
