/* make bench — the plain HDF5 write loop the dump writer's speed is judged
 * against (scripts/bench.sh, "live comparison" section).
 *
 *     hdf5_write_loop SIZES.txt OUT.h5 [--trials N]
 *
 * SIZES.txt holds one dataset size in bytes per line: the datasets a
 * `layerdiff run --dump` wrote. Each trial creates OUT.h5 and writes one
 * contiguous uint8 dataset of each size into the root group, in one loop:
 * H5Dcreate2 + H5Dwrite + H5Dclose, with no attributes, no name escaping,
 * no temporary file and HDF5's default properties — the least a program can
 * do to put the same bytes into an HDF5 file. The timed part is the loop
 * (as layerdiff's dump time is the time of its tensor writes); the file's
 * creation and close are timed apart. Prints one JSON line: bytes,
 * datasets, the best trial's loop seconds (wall), its loop CPU seconds
 * (the process's CPU time over the same loop: what the write cost when
 * other processes share the CPUs, as `layerdiff run` reports
 * dump_cpu_seconds) and close seconds. */
#include <hdf5.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void)
{
    return clock_seconds(CLOCK_MONOTONIC);
}

/* The process has one thread: its CPU time is the loop's. */
static double cpu_now(void)
{
    return clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

static int read_sizes(const char *path, size_t **sizes, size_t *n, size_t *largest)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t cap = 256;
    *sizes = malloc(cap * sizeof **sizes);
    *n = 0;
    *largest = 0;
    unsigned long long v;
    while (*sizes && fscanf(f, "%llu", &v) == 1) {
        if (*n == cap) {
            size_t *grown = realloc(*sizes, 2 * cap * sizeof **sizes);
            if (!grown)
                break;
            *sizes = grown;
            cap *= 2;
        }
        (*sizes)[(*n)++] = (size_t)v;
        if (v > *largest)
            *largest = (size_t)v;
    }
    fclose(f);
    return *sizes ? 0 : -1;
}

/* One trial: returns 0 and the loop's wall and CPU times and the close
 * time, or -1. */
static int trial(const char *out, const size_t *sizes, size_t n, const void *data,
                 double *loop_s, double *loop_cpu_s, double *close_s)
{
    hid_t file = H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        return -1;
    int rc = 0;
    double c0 = cpu_now();
    double t0 = now();
    for (size_t i = 0; i < n && rc == 0; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%zu", i);
        hsize_t dims[1] = {sizes[i]};
        hid_t space = H5Screate_simple(1, dims, NULL);
        hid_t dset = H5Dcreate2(file, name, H5T_NATIVE_UINT8, space, H5P_DEFAULT, H5P_DEFAULT,
                                H5P_DEFAULT);
        if (dset < 0 || (sizes[i] > 0 && H5Dwrite(dset, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL,
                                                  H5P_DEFAULT, data) < 0))
            rc = -1;
        if (dset >= 0)
            H5Dclose(dset);
        H5Sclose(space);
    }
    double t1 = now();
    *loop_cpu_s = cpu_now() - c0;
    if (H5Fclose(file) < 0)
        rc = -1;
    *loop_s = t1 - t0;
    *close_s = now() - t1;
    return rc;
}

int main(int argc, char **argv)
{
    int trials = 3;
    if (argc == 5 && strcmp(argv[3], "--trials") == 0)
        trials = atoi(argv[4]);
    if ((argc != 3 && argc != 5) || trials < 1) {
        fprintf(stderr, "usage: hdf5_write_loop SIZES.txt OUT.h5 [--trials N]\n");
        return 2;
    }
    size_t *sizes = NULL, n = 0, largest = 0;
    if (read_sizes(argv[1], &sizes, &n, &largest) != 0) {
        fprintf(stderr, "hdf5_write_loop: cannot read '%s'\n", argv[1]);
        return 2;
    }
    unsigned char *data = malloc(largest ? largest : 1);
    if (!data)
        return 2;
    for (size_t i = 0; i < largest; i++) /* not all zeros, and touched before timing */
        data[i] = (unsigned char)(i * 2654435761u >> 24);
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += sizes[i];
    double best = 0, best_cpu = 0, best_close = 0;
    for (int t = 0; t < trials; t++) {
        double loop_s, loop_cpu_s, close_s;
        if (trial(argv[2], sizes, n, data, &loop_s, &loop_cpu_s, &close_s) != 0) {
            fprintf(stderr, "hdf5_write_loop: writing '%s' failed\n", argv[2]);
            return 1;
        }
        if (t == 0 || loop_s < best) {
            best = loop_s;
            best_cpu = loop_cpu_s;
            best_close = close_s;
        }
    }
    remove(argv[2]);
    printf("{\"bytes\": %" PRIu64 ", \"datasets\": %zu, \"trials\": %d, \"loop_seconds\": %.6f, "
           "\"loop_cpu_seconds\": %.6f, \"close_seconds\": %.6f}\n",
           bytes, n, trials, best, best_cpu, best_close);
    free(data);
    free(sizes);
    return 0;
}
