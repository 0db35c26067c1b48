/* layerdiff bench — comparator throughput against a plain memory copy.
 *
 *   compare_throughput [--elements N] [--reps R] [--json]
 *
 * Two float32 tensors of N elements (default 16 Mi): a reference and a test
 * tensor holding the reference rounded to fp16 (the error an emulated fp16
 * layer leaves), both touched before timing. Each repetition times, on one
 * thread, memcpy of both tensors into two more buffers (also pre-touched),
 * then ld_compare_tensors on the pair with every metric (a reused scratch,
 * as a comparison session uses). Reported: GB/s of the pair's bytes
 * (2 * 4 * N) for each, medians over R repetitions (default 7) after one
 * untimed warm-up, and the ratio comparator / memcpy (the goal:
 * >= 0.5). Also the fp16-test variant (fp16 test tensor against the fp32
 * reference, 6 * N bytes) for information, and each section's CPU time
 * (this thread's), which other processes on a shared machine disturb far
 * less than the wall time. --json prints one JSON object. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layerdiff/compare.h"
#include "layerdiff/round.h"

#define MAX_REPS 101
#define GOAL_RATIO 0.5

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* This thread's CPU time: on a shared machine, time other processes take
 * the core away counts in the wall time but not here. */
static double cpu_now(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

/* Wall and CPU seconds of one timed section. */
typedef struct span {
    double wall0, cpu0;
} span;

static span span_start(void)
{
    span s = {now(), cpu_now()};
    return s;
}

static void span_end(const span *s, double *wall, double *cpu)
{
    *cpu = cpu_now() - s->cpu0;
    *wall = now() - s->wall0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double minimum(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

static void usage(void)
{
    fprintf(stderr, "usage: compare_throughput [--elements N] [--reps R] [--json]\n");
    exit(2);
}

static ld_tensor *wrap(ld_dtype dtype, int64_t n, void *data)
{
    ld_shape shape;
    ld_tensor *t = NULL;
    ld_error err;
    if (ld_shape_set(&shape, 1, &n, &err) != LD_OK ||
        ld_tensor_wrap(&t, "bench", dtype, &shape, data, &err) != LD_OK) {
        fprintf(stderr, "compare_throughput: %s\n", err.message);
        exit(1);
    }
    return t;
}

/* One comparison, its wall and CPU seconds; exits on an error. */
static void time_compare(const ld_tensor *r, const ld_tensor *t, const ld_tolerance *tol,
                         ld_compare_scratch *scratch, ld_tensor_metrics *m, double *wall,
                         double *cpu)
{
    ld_error err;
    span s = span_start();
    if (ld_compare_tensors(r, t, LD_PRECISION_FP16, tol, scratch, "bench", m, &err) != LD_OK) {
        fprintf(stderr, "compare_throughput: %s\n", err.message);
        exit(1);
    }
    span_end(&s, wall, cpu);
}

int main(int argc, char **argv)
{
    long long n = 16ll << 20;
    int reps = 7;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--elements") && i + 1 < argc)
            n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = true;
        else
            usage();
    }
    if (n < 1 || reps < 1 || reps > MAX_REPS)
        usage();
    size_t bytes = (size_t)n * sizeof(float);
    float *ref = malloc(bytes), *test = malloc(bytes), *copy_r = malloc(bytes);
    float *copy_t = malloc(bytes);
    ld_fp16 *test16 = malloc((size_t)n * sizeof *test16);
    if (!ref || !test || !copy_r || !copy_t || !test16) {
        fprintf(stderr, "compare_throughput: out of memory for %lld elements\n", n);
        return 1;
    }
    /* smooth activations-like values; every buffer written before timing */
    uint64_t state = 88172645463325252ull;
    for (long long i = 0; i < n; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ref[i] = (float)(((double)(state >> 11) * 0x1p-53 - 0.5) * 6.0);
    }
    ld_convert_fp32_to_fp16(ref, test16, (size_t)n);
    ld_convert_fp16_to_fp32(test16, test, (size_t)n);
    memset(copy_r, 1, bytes);
    memset(copy_t, 1, bytes);

    ld_tensor *rt = wrap(LD_DTYPE_FLOAT32, n, ref), *tt = wrap(LD_DTYPE_FLOAT32, n, test);
    ld_tensor *t16 = wrap(LD_DTYPE_FLOAT16, n, test16);
    ld_compare_scratch *scratch = NULL;
    ld_error err;
    if (ld_compare_scratch_create(&scratch, &err) != LD_OK) {
        fprintf(stderr, "compare_throughput: %s\n", err.message);
        return 1;
    }
    ld_tolerance tol = ld_tolerance_for(NULL, "bench", LD_PRECISION_FP16);
    ld_tensor_metrics m;
    double unused_wall, unused_cpu; /* warm-up: scratch, page faults, caches */
    time_compare(rt, tt, &tol, scratch, &m, &unused_wall, &unused_cpu);
    time_compare(rt, t16, &tol, scratch, &m, &unused_wall, &unused_cpu);

    double copy_s[MAX_REPS], cmp_s[MAX_REPS], cmp16_s[MAX_REPS];
    double copy_cpu[MAX_REPS], cmp_cpu[MAX_REPS], cmp16_cpu[MAX_REPS];
    volatile float sink = 0;
    for (int r = 0; r < reps; r++) {
        span s = span_start();
        memcpy(copy_r, ref, bytes);
        memcpy(copy_t, test, bytes);
        span_end(&s, &copy_s[r], &copy_cpu[r]);
        sink += copy_r[r % n] + copy_t[(r * 7) % n];
        time_compare(rt, tt, &tol, scratch, &m, &cmp_s[r], &cmp_cpu[r]);
        time_compare(rt, t16, &tol, scratch, &m, &cmp16_s[r], &cmp16_cpu[r]);
    }
    (void)sink;
    double pair_bytes = 2.0 * (double)bytes, pair16_bytes = (double)bytes + (double)n * 2;
    double copy_med = median(copy_s, reps), cmp_med = median(cmp_s, reps);
    double cmp16_med = median(cmp16_s, reps);
    double copy_cpu_med = median(copy_cpu, reps), cmp_cpu_med = median(cmp_cpu, reps);
    double cmp16_cpu_med = median(cmp16_cpu, reps);
    double copy_gbs = pair_bytes / copy_med / 1e9, cmp_gbs = pair_bytes / cmp_med / 1e9;
    double cmp16_gbs = pair16_bytes / cmp16_med / 1e9;
    double ratio = cmp_gbs / copy_gbs, cpu_ratio = copy_cpu_med / cmp_cpu_med;
    const char *met = ratio >= GOAL_RATIO ? "met" : "NOT MET";
    if (json) {
        printf("{\"elements\": %lld, \"reps\": %d, \"pair_bytes\": %.0f, "
               "\"memcpy_gbs\": %.4f, \"compare_gbs\": %.4f, \"ratio\": %.4f, "
               "\"goal\": %.2f, \"goal_met\": %s, \"compare_fp16_test_gbs\": %.4f, "
               "\"memcpy_ms\": %.3f, \"compare_ms\": %.3f, \"compare_fp16_test_ms\": %.3f, "
               "\"memcpy_cpu_ms\": %.3f, \"compare_cpu_ms\": %.3f, "
               "\"compare_fp16_test_cpu_ms\": %.3f, \"cpu_ratio\": %.4f, "
               "\"abs_p99\": %.6g, \"simd\": \"%s\"}\n",
               n, reps, pair_bytes, copy_gbs, cmp_gbs, ratio, GOAL_RATIO,
               ratio >= GOAL_RATIO ? "true" : "false", cmp16_gbs, copy_med * 1e3, cmp_med * 1e3,
               cmp16_med * 1e3, copy_cpu_med * 1e3, cmp_cpu_med * 1e3, cmp16_cpu_med * 1e3,
               cpu_ratio, m.abs.p99, ld_round_cpu_features());
    } else {
        printf("comparator throughput, %lld float32 pairs, 1 thread, median of %d "
               "(wall, and this thread's CPU time):\n", n, reps);
        printf("  memcpy of both tensors   %8.3f ms  %7.2f GB/s   cpu %8.3f ms\n", copy_med * 1e3,
               copy_gbs, copy_cpu_med * 1e3);
        printf("  ld_compare_tensors       %8.3f ms  %7.2f GB/s   cpu %8.3f ms\n", cmp_med * 1e3,
               cmp_gbs, cmp_cpu_med * 1e3);
        printf("  (fp16 test vs fp32 ref   %8.3f ms  %7.2f GB/s of its %.0f MB, cpu %.3f ms)\n",
               cmp16_med * 1e3, cmp16_gbs, pair16_bytes / 1e6, cmp16_cpu_med * 1e3);
        printf("  ratio %.3f (by CPU time %.3f) — goal >= %.1f: %s\n", ratio, cpu_ratio,
               GOAL_RATIO, met);
        printf("  fastest: memcpy %.3f ms, compare %.3f ms, fp16 test %.3f ms (cpu %.3f, %.3f, "
               "%.3f)\n", minimum(copy_s, reps) * 1e3, minimum(cmp_s, reps) * 1e3,
               minimum(cmp16_s, reps) * 1e3, minimum(copy_cpu, reps) * 1e3,
               minimum(cmp_cpu, reps) * 1e3, minimum(cmp16_cpu, reps) * 1e3);
    }
    ld_compare_scratch_destroy(scratch);
    ld_tensor_destroy(rt);
    ld_tensor_destroy(tt);
    ld_tensor_destroy(t16);
    free(ref);
    free(test);
    free(copy_r);
    free(copy_t);
    free(test16);
    return 0;
}
