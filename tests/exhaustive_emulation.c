/* Exhaustive proof that the emulated engine's fp16 arithmetic is correctly
 * rounded: for every pair of fp16 bit patterns (2^32 pairs) and each of add,
 * sub, mul and div, the engine's computation (widen with
 * ld_convert_fp16_to_fp32, compute in fp32, round with
 * ld_convert_fp32_to_fp16) equals the correctly rounded fp16 result; the
 * same for sqrt on all 2^16 patterns. This is the "double rounding is
 * innocuous" theorem (fp32's 24 bits >= 2 * 11 + 2) for these operations,
 * checked instead of assumed, including subnormals, overflow to inf, signed
 * zeros, infinities and NaNs (a NaN result must be a NaN; tests/
 * test_emulation_hw.c compares payloads with AVX512-FP16 where it exists).
 *
 * The reference does not use the library or fp32:
 *  - add, sub, mul: the result is exact in double (at most 40 significant
 *    bits); it is rounded to fp16 by scaling to the fp16 spacing and letting
 *    the FPU round to an integer, to nearest even (AVX-512 getexp / scalef /
 *    roundscale on 8 doubles), with overflow to inf above 65504;
 *  - div: the candidate q is bracketed: lo * |b| <= |a| <= hi * |b| where
 *    [lo, hi] are the values rounding to q (end points only for an even q),
 *    the products exact in double; zeros, infinities and NaNs compare with
 *    IEEE's exact answers;
 *  - sqrt: lo^2 <= a <= hi^2, scalar (tests/support/fp16_reference.h).
 * On every 1021st value of the first operand the scalar reference of
 * tests/support/fp16_reference.h runs too and must agree. Without AVX-512
 * the scalar reference runs alone on every 61st first operand (a sample).
 *
 * Then the engine's counted rounding (backends/emulated_count.c, what
 * every layer output goes through): on all 2^32 fp32 bit patterns, in chunks
 * of 2^16, ld_emu_round_counted_level at every vector level this CPU runs
 * (AVX2 and, where present, AVX-512 F and F+BW+VL) must give the library's
 * values (ld_round_array_isa of the dispatched instruction set, which
 * tests/exhaustive_round.c proves equal to the portable code and the
 * definitions on every input), the same float16 bits (as
 * ld_emu_round_fp16_keep stores them) and, per chunk, the same counters as a scalar
 * tally written from the definitions (overflow: finite -> inf; underflow:
 * nonzero -> 0; subnormal result in the target's range; inf and NaN
 * sources), for fp16 and bf16 (round to nearest even, subnormals kept: the
 * fused paths of --fp16 / --bf16 runs). On every 17th chunk also flushing,
 * tf32 in its three modes, the portable level, fp16 without the float16
 * bits and rounding in place.
 *
 * Built -O2 without sanitizers; two threads; about 50 s of CPU on Zen 3
 * (half that on two idle cores). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backends/emulated_count_internal.h"
#include "layerdiff/round.h"
#include "tests/support/fp16_reference.h"

#define THREADS 2
#define ALL (1u << 16)
#define CROSS_CHECK_EVERY 1021 /* first operands on which the scalar reference runs too */
#define SAMPLE_EVERY 61       /* without AVX-512: first operands checked */

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_SQRT, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"add", "sub", "mul", "div", "sqrt"};

typedef struct check {
    char name[96];
    const char *skip_reason; /* NULL when the check runs */
    pthread_mutex_t lock;
    unsigned long long mismatches, checked;
    int examples;
    uint16_t ex_a[5], ex_b[5], ex_got[5];
} check;

static check checks[OP_COUNT];
static check cross_check; /* the scalar reference beside the vector one */
static float widened[ALL];   /* the engine's fp32 value of every fp16 pattern */
static float reference[ALL]; /* the same from ref_fp16_value (the reference's own decoding) */
static bool have_avx512;
static atomic_uint next_a;

static void record(check *c, uint16_t a, uint16_t b, uint16_t got)
{
    pthread_mutex_lock(&c->lock);
    c->mismatches++;
    if (c->examples < 5) {
        c->ex_a[c->examples] = a;
        c->ex_b[c->examples] = b;
        c->ex_got[c->examples] = got;
        c->examples++;
    }
    pthread_mutex_unlock(&c->lock);
}

static void add_checked(check *c, unsigned long long n)
{
    pthread_mutex_lock(&c->lock);
    c->checked += n;
    pthread_mutex_unlock(&c->lock);
}

/* The engine's results of `op` for first operand a and every b. */
static void engine_row(int op, uint16_t a, float *tmp, uint16_t *out)
{
    float x = widened[a];
    switch (op) { /* one loop each, so the compiler vectorizes them */
    case OP_ADD: for (uint32_t b = 0; b < ALL; b++) tmp[b] = x + widened[b]; break;
    case OP_SUB: for (uint32_t b = 0; b < ALL; b++) tmp[b] = x - widened[b]; break;
    case OP_MUL: for (uint32_t b = 0; b < ALL; b++) tmp[b] = x * widened[b]; break;
    default: for (uint32_t b = 0; b < ALL; b++) tmp[b] = x / widened[b]; break;
    }
    ld_convert_fp32_to_fp16(tmp, (ld_fp16 *)out, ALL);
}

static bool scalar_ok(int op, uint16_t a, uint16_t b, uint16_t got)
{
    double x = ref_fp16_value(a), y = ref_fp16_value(b);
    if (op == OP_DIV)
        return ref_check_div(a, b, got);
    uint16_t want = ref_round_to_fp16(op == OP_ADD ? x + y : op == OP_SUB ? x - y : x * y);
    return ref_fp16_is_nan(want) ? ref_fp16_is_nan(got) : want == got;
}

#if defined(__x86_64__)
#define TARGET_AVX512 __attribute__((target("avx2,f16c,avx512f,avx512bw,avx512vl,avx512dq")))

/* 8 exact doubles rounded to fp16 (NaN: 0x7E00), as 8 patterns. */
static inline TARGET_AVX512 __m128i v_round_to_fp16(__m512d d)
{
    __m512d sign = _mm512_set1_pd(-0.0), ad = _mm512_andnot_pd(sign, d);
    __m512d e = _mm512_max_pd(_mm512_getexp_pd(ad), _mm512_set1_pd(-14.0));
    __m512d q = _mm512_sub_pd(e, _mm512_set1_pd(10.0)); /* spacing 2^q */
    __m512d r = _mm512_roundscale_pd(_mm512_scalef_pd(ad, _mm512_sub_pd(_mm512_setzero_pd(), q)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d v = _mm512_scalef_pd(r, q);
    __mmask8 over = _mm512_cmp_pd_mask(ad, _mm512_set1_pd(INFINITY), _CMP_EQ_OQ) |
                    _mm512_cmp_pd_mask(v, _mm512_set1_pd(65504.0), _CMP_GT_OQ);
    __mmask8 zero = _mm512_cmp_pd_mask(ad, _mm512_setzero_pd(), _CMP_EQ_OQ);
    v = _mm512_mask_mov_pd(v, over, _mm512_set1_pd(INFINITY));
    v = _mm512_mask_mov_pd(v, zero, _mm512_setzero_pd());
    v = _mm512_or_pd(v, _mm512_and_pd(d, sign)); /* the sign of d, zeros included */
    __mmask8 nan = _mm512_cmp_pd_mask(d, d, _CMP_UNORD_Q);
    v = _mm512_mask_mov_pd(v, nan, _mm512_set1_pd(NAN));
    /* v is an fp16 value (or inf / NaN): both conversions are exact */
    return _mm256_cvtps_ph(_mm512_cvtpd_ps(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

static inline TARGET_AVX512 __mmask8 v_is_nan16(__m128i h)
{
    __m128i mag = _mm_and_si128(h, _mm_set1_epi16(0x7FFF));
    return _mm_cmpgt_epu16_mask(mag, _mm_set1_epi16(0x7C00));
}

/* Lanes where got equals want (NaN: any NaN). */
static inline TARGET_AVX512 __mmask8 v_same16(__m128i got, __m128i want)
{
    return _mm_cmpeq_epi16_mask(got, want) | (v_is_nan16(got) & v_is_nan16(want));
}

/* Division by bracketing, 8 lanes: x = a (broadcast), y = b values, got = q patterns. */
static inline TARGET_AVX512 __mmask8 v_div_ok(__m512d x, __m512d y, __m128i got)
{
    __m512d sign = _mm512_set1_pd(-0.0), inf = _mm512_set1_pd(INFINITY);
    __m512d A = _mm512_andnot_pd(sign, x), B = _mm512_andnot_pd(sign, y);
    __mmask8 general = _mm512_cmp_pd_mask(A, inf, _CMP_LT_OQ) &
                       _mm512_cmp_pd_mask(B, inf, _CMP_LT_OQ) &
                       _mm512_cmp_pd_mask(A, _mm512_setzero_pd(), _CMP_NEQ_OQ) &
                       _mm512_cmp_pd_mask(B, _mm512_setzero_pd(), _CMP_NEQ_OQ);
    /* specials: IEEE's exact answer, rounded */
    __mmask8 special_ok = v_same16(got, v_round_to_fp16(_mm512_div_pd(x, y)));
    /* general: sign, then the bracket around |q| */
    __m128i qa = _mm_and_si128(got, _mm_set1_epi16(0x7FFF));
    __m512d xs = _mm512_and_pd(_mm512_xor_pd(x, y), sign);
    __m512d Q = _mm512_cvtps_pd(_mm256_cvtph_ps(qa));
    __m512d qsigned = _mm512_cvtps_pd(_mm256_cvtph_ps(got));
    __mmask8 sign_ok = _mm512_cmp_pd_mask(_mm512_and_pd(qsigned, sign), xs, _CMP_EQ_OQ);
    __mmask8 q_inf = _mm_cmpeq_epi16_mask(qa, _mm_set1_epi16(0x7C00));
    __mmask8 q_nan = v_is_nan16(got);
    __mmask8 inf_ok = _mm512_cmp_pd_mask(A, _mm512_mul_pd(_mm512_set1_pd(65520.0), B), _CMP_GE_OQ);
    __m512d e = _mm512_max_pd(_mm512_getexp_pd(Q), _mm512_set1_pd(-14.0));
    __m512d spacing = _mm512_scalef_pd(_mm512_set1_pd(1.0), _mm512_sub_pd(e, _mm512_set1_pd(10.0)));
    __mmask8 power = _mm_testn_epi16_mask(qa, _mm_set1_epi16(0x03FF)) &
                     _mm_cmpgt_epu16_mask(qa, _mm_set1_epi16(0x07FF));
    __m512d half = _mm512_mul_pd(spacing, _mm512_set1_pd(0.5));
    __m512d below = _mm512_mask_mul_pd(half, power, spacing, _mm512_set1_pd(0.25));
    __m512d lo = _mm512_mul_pd(_mm512_sub_pd(Q, below), B);
    __m512d hi = _mm512_mul_pd(_mm512_add_pd(Q, half), B);
    __mmask8 even = _mm_testn_epi16_mask(qa, _mm_set1_epi16(1));
    __mmask8 lo_ok = (_mm512_cmp_pd_mask(lo, A, _CMP_LT_OQ)) |
                     (even & _mm512_cmp_pd_mask(lo, A, _CMP_EQ_OQ));
    __mmask8 hi_ok = (_mm512_cmp_pd_mask(A, hi, _CMP_LT_OQ)) |
                     (even & _mm512_cmp_pd_mask(A, hi, _CMP_EQ_OQ));
    __mmask8 finite_ok = lo_ok & hi_ok & ~q_inf & ~q_nan;
    __mmask8 general_ok = sign_ok & ((q_inf & inf_ok) | finite_ok);
    return (general & general_ok) | (~general & special_ok);
}

/* Checks the row of op for first operand a against the vector reference. */
static TARGET_AVX512 void check_row_avx512(int op, uint16_t a, const uint16_t *got)
{
    __m512d x = _mm512_set1_pd(ref_fp16_value(a));
    for (uint32_t b0 = 0; b0 < ALL; b0 += 8) {
        __m512d y = _mm512_cvtps_pd(_mm256_loadu_ps(reference + b0));
        __m128i g = _mm_loadu_si128((const __m128i *)(got + b0));
        __mmask8 ok;
        if (op == OP_DIV) {
            ok = v_div_ok(x, y, g);
        } else {
            __m512d d = op == OP_ADD ? _mm512_add_pd(x, y)
                        : op == OP_SUB ? _mm512_sub_pd(x, y) : _mm512_mul_pd(x, y);
            ok = v_same16(g, v_round_to_fp16(d));
        }
        for (int l = 0; ok != 0xFF && l < 8; l++)
            if (!(ok >> l & 1))
                record(&checks[op], a, (uint16_t)(b0 + l), got[b0 + l]);
    }
}
#endif

static void check_row_scalar(check *c, int op, uint16_t a, const uint16_t *got)
{
    for (uint32_t b = 0; b < ALL; b++)
        if (!scalar_ok(op, a, (uint16_t)b, got[b]))
            record(c, a, (uint16_t)b, got[b]);
}

static void *worker(void *arg)
{
    (void)arg;
    float *tmp = malloc(ALL * sizeof *tmp);
    uint16_t *got = malloc(ALL * sizeof *got);
    if (!tmp || !got) {
        fprintf(stderr, "exhaustive_emulation: out of memory\n");
        exit(2);
    }
    for (;;) {
        unsigned a = atomic_fetch_add(&next_a, 1u);
        if (a >= ALL)
            break;
        bool vector = have_avx512, scalar = !have_avx512 ? a % SAMPLE_EVERY == 0
                                                         : a % CROSS_CHECK_EVERY == 0;
        if (!vector && !scalar)
            continue;
        for (int op = OP_ADD; op <= OP_DIV; op++) {
            engine_row(op, (uint16_t)a, tmp, got);
#if defined(__x86_64__)
            if (vector) {
                check_row_avx512(op, (uint16_t)a, got);
                add_checked(&checks[op], ALL);
            }
#endif
            if (scalar) {
                /* alone: the check; beside the vector one: the cross-check */
                check_row_scalar(vector ? &cross_check : &checks[op], op, (uint16_t)a, got);
                add_checked(vector ? &cross_check : &checks[op], ALL);
            }
        }
    }
    free(tmp);
    free(got);
    return NULL;
}

static void check_sqrt(void)
{
    float x[ALL];
    uint16_t got[ALL];
    for (uint32_t a = 0; a < ALL; a++)
        x[a] = sqrtf(widened[a]);
    ld_convert_fp32_to_fp16(x, (ld_fp16 *)got, ALL);
    for (uint32_t a = 0; a < ALL; a++)
        if (!ref_check_sqrt((uint16_t)a, got[a]))
            record(&checks[OP_SQRT], (uint16_t)a, 0, got[a]);
    checks[OP_SQRT].checked = ALL;
}

/* --- the engine's counted rounding, all 2^32 inputs ---------------------------------------- */

#define COUNT_CHUNK (1u << 16)
#define COUNT_CHUNKS (1u << 16) /* COUNT_CHUNK * COUNT_CHUNKS = 2^32 */
#define COUNT_SAMPLE_EVERY 17   /* chunks between runs of the sampled variants (odd) */

typedef struct count_variant {
    const char *name;
    ld_precision p;
    ld_round_options o;
    bool every_chunk; /* else every COUNT_SAMPLE_EVERY-th */
} count_variant;

static const count_variant count_variants[] = {
    {"fp16", LD_PRECISION_FP16, {LD_ROUND_NEAREST_EVEN, false}, true},
    {"bf16", LD_PRECISION_BF16, {LD_ROUND_NEAREST_EVEN, false}, true},
    {"fp16 flush", LD_PRECISION_FP16, {LD_ROUND_NEAREST_EVEN, true}, false},
    {"bf16 flush", LD_PRECISION_BF16, {LD_ROUND_NEAREST_EVEN, true}, false},
    {"tf32 rne", LD_PRECISION_TF32, {LD_ROUND_NEAREST_EVEN, false}, false},
    {"tf32 rna", LD_PRECISION_TF32, {LD_ROUND_NEAREST_AWAY, false}, false},
    {"tf32 rz flush", LD_PRECISION_TF32, {LD_ROUND_TOWARD_ZERO, true}, false},
};
#define COUNT_VARIANTS (int)(sizeof count_variants / sizeof count_variants[0])

static check count_checks[COUNT_VARIANTS][LD_EMU_LEVEL_COUNT_];
static ld_round_isa library_isa; /* ld_round_isa_detected() */
static atomic_uint next_count_chunk;

/* The counters from their definitions, on float values (no bit tricks);
 * written with & on comparisons so that the loop vectorizes. */
static void reference_tally(const float *x, const float *r, uint32_t n, ld_precision p,
                            ld_emu_tally *t)
{
    const float min_normal = p == LD_PRECISION_FP16 ? 0x1p-14f : 0x1p-126f;
    uint32_t ov = 0, un = 0, sub = 0, inf = 0, nan = 0;
    for (uint32_t i = 0; i < n; i++) {
        float ax = fabsf(x[i]), ar = fabsf(r[i]);
        ov += (ax < INFINITY) & (ar == INFINITY);
        un += (x[i] != 0) & (r[i] == 0);
        sub += (ar != 0) & (ar < min_normal);
        inf += ax == INFINITY;
        nan += x[i] != x[i];
    }
    *t = (ld_emu_tally){ov, un, sub, inf, nan};
}

static bool same_tally(const ld_emu_tally *a, const ld_emu_tally *b)
{
    return a->overflows == b->overflows && a->underflows == b->underflows &&
           a->subnormals == b->subnormals && a->src_infs == b->src_infs &&
           a->src_nans == b->src_nans;
}

typedef struct count_buffers {
    float x[COUNT_CHUNK], want[COUNT_CHUNK], got[COUNT_CHUNK];
    ld_fp16 half_want[COUNT_CHUNK], half[COUNT_CHUNK];
} count_buffers;

/* Records the first wrong value of a chunk (a = its input's high half, b its
 * low half, got its bits' high half), or, values right, a wrong tally (b =
 * 0xFFFF, got = the counter: 0 overflows, ..., 4 NaN sources). */
static void check_counted(check *c, const count_buffers *bb, uint32_t chunk, bool with_half,
                          const ld_emu_tally *got, const ld_emu_tally *want)
{
    if (memcmp(bb->got, bb->want, sizeof bb->got) != 0) {
        for (uint32_t i = 0; i < COUNT_CHUNK; i++) {
            uint32_t g, w;
            memcpy(&g, &bb->got[i], 4), memcpy(&w, &bb->want[i], 4);
            if (g != w) {
                record(c, (uint16_t)chunk, (uint16_t)i, (uint16_t)(g >> 16));
                return;
            }
        }
    }
    if (with_half && memcmp(bb->half, bb->half_want, sizeof bb->half) != 0) {
        for (uint32_t i = 0; i < COUNT_CHUNK; i++)
            if (bb->half[i].bits != bb->half_want[i].bits) {
                record(c, (uint16_t)chunk, (uint16_t)i, bb->half[i].bits);
                return;
            }
    }
    if (!same_tally(got, want)) {
        uint16_t which = got->overflows != want->overflows     ? 0
                         : got->underflows != want->underflows ? 1
                         : got->subnormals != want->subnormals ? 2
                         : got->src_infs != want->src_infs     ? 3 : 4;
        record(c, (uint16_t)chunk, 0xFFFF, which);
    }
}

static void count_chunk(count_buffers *bb, uint32_t chunk)
{
    for (uint32_t i = 0; i < COUNT_CHUNK; i++) {
        uint32_t u = chunk << 16 | i;
        memcpy(&bb->x[i], &u, 4);
    }
    bool sampled = chunk % COUNT_SAMPLE_EVERY == 0;
    for (int v = 0; v < COUNT_VARIANTS; v++) {
        const count_variant *cv = &count_variants[v];
        if (!cv->every_chunk && !sampled)
            continue;
        /* the library's values, from its dispatched code: tests/
         * exhaustive_round.c proves them equal to the portable code's */
        memcpy(bb->want, bb->x, sizeof bb->want);
        ld_round_array_isa(library_isa, bb->want, COUNT_CHUNK, cv->p, &cv->o);
        ld_emu_tally want;
        reference_tally(bb->x, bb->want, COUNT_CHUNK, cv->p, &want);
        bool with_half = cv->p == LD_PRECISION_FP16 && !cv->o.flush_denormals;
        if (with_half)
            ld_convert_fp32_to_fp16_isa(library_isa, bb->want, bb->half_want, COUNT_CHUNK);
        for (int level = LD_EMU_LEVEL_PORTABLE; level < LD_EMU_LEVEL_COUNT_; level++) {
            check *c = &count_checks[v][level];
            if (c->skip_reason || (level == LD_EMU_LEVEL_PORTABLE && !sampled))
                continue;
            ld_emu_tally got = {0};
            if (with_half && sampled) { /* the same without the float16 bits */
                ld_emu_round_counted_level((ld_emu_level)level, bb->x, bb->got, NULL, COUNT_CHUNK,
                                           cv->p, &cv->o, &got);
                check_counted(c, bb, chunk, false, &got, &want);
                got = (ld_emu_tally){0};
            }
            if (sampled && (chunk / COUNT_SAMPLE_EVERY) % 2) { /* in place */
                memcpy(bb->got, bb->x, sizeof bb->got);
                ld_emu_round_counted_level((ld_emu_level)level, bb->got, bb->got,
                                           with_half ? bb->half : NULL, COUNT_CHUNK, cv->p, &cv->o,
                                           &got);
            } else {
                ld_emu_round_counted_level((ld_emu_level)level, bb->x, bb->got,
                                           with_half ? bb->half : NULL, COUNT_CHUNK, cv->p, &cv->o,
                                           &got);
            }
            check_counted(c, bb, chunk, with_half, &got, &want);
            add_checked(c, COUNT_CHUNK);
        }
    }
}

static void *count_worker(void *arg)
{
    (void)arg;
    count_buffers *bb = malloc(sizeof *bb);
    if (!bb) {
        fprintf(stderr, "exhaustive_emulation: out of memory\n");
        exit(2);
    }
    for (;;) {
        unsigned chunk = atomic_fetch_add(&next_count_chunk, 1u);
        if (chunk >= COUNT_CHUNKS)
            break;
        count_chunk(bb, chunk);
    }
    free(bb);
    return NULL;
}

static void setup_count_checks(void)
{
    library_isa = ld_round_isa_detected();
    for (int v = 0; v < COUNT_VARIANTS; v++)
        for (int level = 0; level < LD_EMU_LEVEL_COUNT_; level++) {
            check *c = &count_checks[v][level];
            const count_variant *cv = &count_variants[v];
            pthread_mutex_init(&c->lock, NULL);
            c->skip_reason = ld_emu_level_supported((ld_emu_level)level)
                                 ? NULL : "this CPU cannot run this level";
            snprintf(c->name, sizeof c->name, "counted rounding %s, level %s (%s)", cv->name,
                     ld_emu_level_name((ld_emu_level)level),
                     cv->every_chunk && level != LD_EMU_LEVEL_PORTABLE ? "all 2^32 inputs"
                                                                      : "1/17 of the inputs");
        }
}

static void report_check(void **state)
{
    check *c = *state;
    if (c->skip_reason) {
        print_message("skipped: %s\n", c->skip_reason);
        skip();
    }
    if (c->mismatches == 0)
        return;
    print_error("%s: %llu of %llu results wrong; first ones found:\n", c->name, c->mismatches,
                c->checked);
    for (int i = 0; i < c->examples; i++)
        print_error("  a = 0x%04x, b = 0x%04x: got 0x%04x\n", c->ex_a[i], c->ex_b[i],
                    c->ex_got[i]);
    fail();
}

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + 1e-9 * (double)(now.tv_nsec - start->tv_nsec);
}

int main(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("f16c");
#endif
    for (uint32_t h = 0; h < ALL; h++)
        reference[h] = (float)ref_fp16_value((uint16_t)h);
    {
        uint16_t all[ALL];
        for (uint32_t h = 0; h < ALL; h++)
            all[h] = (uint16_t)h;
        ld_convert_fp16_to_fp32((const ld_fp16 *)all, widened, ALL);
    }
    for (int op = 0; op < OP_COUNT; op++) {
        pthread_mutex_init(&checks[op].lock, NULL);
        snprintf(checks[op].name, sizeof checks[op].name,
                 "fp16 %s via fp32 is correctly rounded (%s)", op_names[op],
                 op == OP_SQRT ? "all 2^16 inputs"
                 : have_avx512 ? "all 2^32 pairs"
                               : "scalar reference on 1/61 of the pairs");
    }
    pthread_mutex_init(&cross_check.lock, NULL);
    snprintf(cross_check.name, sizeof cross_check.name,
             "add, sub, mul, div by the scalar reference too (a = 0, 1021, 2042, ...)");
    printf("exhaustive_emulation: conversions: %s; reference: %s\n", ld_round_cpu_features(),
           have_avx512 ? "AVX-512 double code, scalar C on 1/1021 of the pairs" : "scalar C");

    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    check_sqrt();
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&threads[t], NULL, worker, NULL) != 0) {
            fprintf(stderr, "exhaustive_emulation: cannot start a thread\n");
            return 2;
        }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    printf("exhaustive_emulation: %llu results checked in %.1f s on %d threads\n",
           checks[OP_ADD].checked + checks[OP_SUB].checked + checks[OP_MUL].checked +
               checks[OP_DIV].checked + checks[OP_SQRT].checked,
           seconds_since(&start), THREADS);
    fflush(stdout);

    setup_count_checks();
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&threads[t], NULL, count_worker, NULL) != 0) {
            fprintf(stderr, "exhaustive_emulation: cannot start a thread\n");
            return 2;
        }
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    unsigned long long counted = 0;
    for (int v = 0; v < COUNT_VARIANTS; v++)
        for (int level = 0; level < LD_EMU_LEVEL_COUNT_; level++)
            counted += count_checks[v][level].checked;
    printf("exhaustive_emulation: %llu counted roundings checked in %.1f s on %d threads\n",
           counted, seconds_since(&start), THREADS);
    fflush(stdout);

    struct CMUnitTest tests[OP_COUNT + 1 + COUNT_VARIANTS * LD_EMU_LEVEL_COUNT_];
    int n = 0;
    for (int op = 0; op < OP_COUNT; op++)
        tests[n++] = (struct CMUnitTest){checks[op].name, report_check, NULL, NULL, &checks[op]};
    if (have_avx512)
        tests[n++] = (struct CMUnitTest){cross_check.name, report_check, NULL, NULL, &cross_check};
    for (int v = 0; v < COUNT_VARIANTS; v++)
        for (int level = 0; level < LD_EMU_LEVEL_COUNT_; level++)
            tests[n++] = (struct CMUnitTest){count_checks[v][level].name, report_check, NULL, NULL,
                                             &count_checks[v][level]};
    return _cmocka_run_group_tests("exhaustive_emulation", tests, (size_t)n, NULL, NULL);
}
