/* layerdiff bench — the machine's fp32 FMA peak, the yardstick `make bench`
 * divides conv/gemm GFLOP/s by.
 *
 *   fma_peak [--threads N] [--seconds S] [--trials T] [--json]
 *
 * Each thread runs a loop of independent fused multiply-adds on registers
 * (no memory traffic) with the widest vector unit the CPU has: 512-bit
 * (AVX-512F), else 256-bit (AVX2+FMA), else scalar C. There are
 * FMA_CHAINS independent accumulators, more than FMA latency (4-5 cycles) x
 * FMA ports (2) on current x86 cores, so the chains never wait on each
 * other — but no more than fit in registers with the two constants: AVX2
 * has 16 ymm registers, and 16 chains there spill, putting a store-load
 * round trip into every chain (measured on a Zen 3: 55.7 GFLOP/s with 16
 * chains against the 12-chain loop's figure). Every trial runs about S seconds; the report gives the median and
 * the best trial, in GFLOP/s (2 per FMA lane). N defaults to every online
 * CPU; threads start together and the trial's time is the slowest thread's.
 *
 * --mix conv runs the direct convolution's inner loop instead (conv_direct_body.h,
 * the 4 x 3 tile the cost model picks for most layers): per iteration 3
 * vector loads and 4 broadcast loads from a 4 KiB buffer, which stays in
 * L1, and 12 FMAs into 12 accumulators. It never misses a cache, so its
 * rate is what this core gives the kernels' instruction mix at the time:
 * on a calm host about the FMA peak, on a host whose other tenants share
 * the core's load ports and L1 much less (Zen 3 VMs: 57-95 GFLOP/s on one
 * thread minutes apart, while the FMA loop stayed at 90-97). make bench
 * runs it beside PaddleOCR det's runs to tell a slow kernel from a
 * contended host.
 *
 * Built -O2 with -fopenmp like the rest of the project: the vector code is
 * in functions with target attributes, picked at run time. */
#include <immintrin.h>
#include <omp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FMA_CHAINS 16
#define FMA_CHAINS_AVX2 12 /* 12 accumulators + 2 constants <= 16 ymm registers */
_Static_assert(FMA_CHAINS_AVX2 + 2 <= 16, "the AVX2 loop's accumulators must fit in ymm0-15");
#define MAX_TRIALS 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each returns a value that depends on every accumulator, so nothing is
 * optimised away. One iteration is FMA_CHAINS FMAs of `lanes` floats. */
__attribute__((target("avx512f"))) static float loop_avx512(long iters)
{
    __m512 acc[FMA_CHAINS];
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int c = 0; c < FMA_CHAINS; c++)
        acc[c] = _mm512_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 16
        for (int c = 0; c < FMA_CHAINS; c++)
            acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    __m512 sum = acc[0];
    for (int c = 1; c < FMA_CHAINS; c++)
        sum = _mm512_add_ps(sum, acc[c]);
    return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) static float loop_avx2(long iters)
{
    __m256 acc[FMA_CHAINS_AVX2];
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int c = 0; c < FMA_CHAINS_AVX2; c++)
        acc[c] = _mm256_set1_ps((float)c);
    for (long i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int c = 0; c < FMA_CHAINS_AVX2; c++)
            acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    __m256 sum = acc[0];
    for (int c = 1; c < FMA_CHAINS_AVX2; c++)
        sum = _mm256_add_ps(sum, acc[c]);
    float out[8];
    _mm256_storeu_ps(out, sum);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

/* The conv tile's loop (see the header comment); buf: MIX_FLOATS floats. */
#define MIX_FLOATS 1024
static float mix_buf[MIX_FLOATS + 64] __attribute__((aligned(64)));

#define MIX_TILE(VEC, LANES, LOADU, SET1, FMA)                                                 \
    VEC acc[12];                                                                               \
    for (int c = 0; c < 12; c++)                                                               \
        acc[c] = SET1((float)c);                                                               \
    for (long i = 0; i < iters; i++) {                                                         \
        const float *p = mix_buf + (i & (MIX_FLOATS / (4 * LANES) - 1)) * 4 * LANES;           \
        VEC x[3];                                                                              \
        _Pragma("GCC unroll 3") for (int v = 0; v < 3; v++)                                    \
            x[v] = LOADU(p + v * LANES);                                                       \
        _Pragma("GCC unroll 4") for (int m = 0; m < 4; m++) {                                  \
            const VEC w = SET1(p[3 * LANES + m]);                                              \
            _Pragma("GCC unroll 3") for (int v = 0; v < 3; v++)                                \
                acc[m * 3 + v] = FMA(w, x[v], acc[m * 3 + v]);                                 \
        }                                                                                      \
    }                                                                                          \
    VEC sum = acc[0];                                                                          \
    for (int c = 1; c < 12; c++)                                                               \
        sum = FMA(sum, SET1(1.0f), acc[c]);

__attribute__((target("avx512f"))) static float mix_avx512(long iters)
{
    MIX_TILE(__m512, 16, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps)
    return _mm512_reduce_add_ps(sum);
}

__attribute__((target("avx2,fma"))) static float mix_avx2(long iters)
{
    MIX_TILE(__m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps)
    float out[8];
    _mm256_storeu_ps(out, sum);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

static float loop_scalar(long iters)
{
    float acc[FMA_CHAINS];
    for (int c = 0; c < FMA_CHAINS; c++)
        acc[c] = (float)c;
    for (long i = 0; i < iters; i++)
        for (int c = 0; c < FMA_CHAINS; c++)
            acc[c] = acc[c] * 0.999999f + 1e-7f;
    float sum = 0;
    for (int c = 0; c < FMA_CHAINS; c++)
        sum += acc[c];
    return sum;
}

typedef struct unit {
    const char *name;
    int lanes;
    int chains; /* independent FMAs per iteration */
    float (*loop)(long);
} unit;

static unit pick_unit(bool mix)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return mix ? (unit){"avx512f conv tile 4x3 (L1)", 16, 12, mix_avx512}
                   : (unit){"avx512f (512-bit FMA)", 16, FMA_CHAINS, loop_avx512};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return mix ? (unit){"avx2+fma conv tile 4x3 (L1)", 8, 12, mix_avx2}
                   : (unit){"avx2+fma (256-bit FMA)", 8, FMA_CHAINS_AVX2, loop_avx2};
    /* No vector FMA unit: the conv tile's loop has no meaning there, so
     * --mix conv runs the scalar FMA loop and its name says so. */
    return mix ? (unit){"scalar C (no FMA unit found; no conv tile mix: the plain FMA loop)", 1,
                        FMA_CHAINS, loop_scalar}
               : (unit){"scalar C (no FMA unit found)", 1, FMA_CHAINS, loop_scalar};
}

/* Seconds for `iters` iterations on every thread at once (the slowest). */
static double run_parallel(const unit *u, int threads, long iters, volatile float *sink)
{
    double t0 = 0, t1 = 0;
#pragma omp parallel num_threads(threads)
    {
#pragma omp barrier
#pragma omp single
        t0 = now();
        float r = u->loop(iters);
#pragma omp atomic
        *sink += r;
#pragma omp barrier
#pragma omp single
        t1 = now();
    }
    return t1 - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: fma_peak [--threads N] [--seconds S] [--trials T] [--mix conv] [--json]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = ncpu > 0 ? (int)ncpu : 1, trials = 5;
    double seconds = 0.2;
    bool json = false, mix = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--trials") == 0 && i + 1 < argc)
            trials = atoi(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--mix") == 0 && i + 1 < argc && strcmp(argv[i + 1], "conv") == 0)
            mix = true, i++;
        else
            usage();
    }
    if (threads < 1 || threads > 1024 || trials < 1 || trials > MAX_TRIALS || !(seconds > 0))
        usage();
    unit u = pick_unit(mix);
    for (int i = 0; i < MIX_FLOATS + 64; i++)
        mix_buf[i] = 1e-3f * (float)(i % 97);
    volatile float sink = 0;
    /* Calibrate: grow the count until one run takes >= 20 ms (also warms
     * up the clock and the vector unit's power state). */
    long iters = 1 << 14;
    double t;
    while ((t = run_parallel(&u, threads, iters, &sink)) < 0.02)
        iters *= 2;
    iters = (long)((double)iters * seconds / t) + 1;
    double rates[MAX_TRIALS];
    for (int k = 0; k < trials; k++) {
        t = run_parallel(&u, threads, iters, &sink);
        rates[k] = 2.0 * u.lanes * u.chains * (double)iters * threads / t * 1e-9;
    }
    qsort(rates, (size_t)trials, sizeof rates[0], cmp_double);
    double median = trials % 2 ? rates[trials / 2]
                               : 0.5 * (rates[trials / 2 - 1] + rates[trials / 2]);
    double best = rates[trials - 1];
    if (json)
        printf("{\"unit\": \"%s\", \"mix\": \"%s\", \"threads\": %d, \"trials\": %d, "
               "\"median_gflops\": %.2f, \"best_gflops\": %.2f}\n",
               u.name, mix ? "conv" : "fma", threads, trials, median, best);
    else
        printf("fp32 %s, %s, %d thread%s: median %.1f GFLOP/s, best %.1f (%d trials)\n",
               mix ? "conv-tile mix" : "FMA peak", u.name, threads, threads == 1 ? "" : "s",
               median, best, trials);
    return 0;
}
