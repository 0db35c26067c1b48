/* layerdiff CLI — `layerdiff run --profile / --profile-json` (cli/run_profile.c):
 * where a backend's run spent its time, per operator type, and how fast its
 * convolutions and matrix products ran.
 *
 * "conv/gemm work" is every node that reports floating-point work
 * (ld_node_profile.flops > 0: Conv, ConvTranspose, Gemm, MatMul and their
 * quantized forms); its GFLOP/s is that work over those nodes' whole wall time
 * (im2col, bias and col2im included). Shares are of the backend's run time as
 * `layerdiff run` measures it, so the executor's own overhead and the
 * observer (dump writing) show up as "other". */
#ifndef LAYERDIFF_CLI_PROFILE_H
#define LAYERDIFF_CLI_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "layerdiff/backend.h"

typedef struct ld_profile_report ld_profile_report;

/* A report for runs of model_path (borrowed strings; g must outlive it).
 * threads: what each kernel may use. Return value: new, free with
 * ld_profile_report_free. */
ld_status ld_profile_report_new(ld_profile_report **out, const char *model_path,
                                const ld_graph *g, int threads, ld_error *err);
void ld_profile_report_free(ld_profile_report *r);

/* Time a backend's run spent writing its dump: wall, and the writing
 * thread's CPU time (make bench compares the latter with a plain HDF5 loop's
 * when other processes share the machine). */
typedef struct ld_profile_dump_time {
    double seconds, cpu_seconds;
} ld_profile_dump_time;

/* Adds one backend's run. prof NULL: the backend does not profile (only its
 * times are recorded). out non-NULL: the per-op table is printed there. */
ld_status ld_profile_report_add(ld_profile_report *r, const char *backend, double run_seconds,
                                ld_profile_dump_time dump, const ld_backend_profile *prof,
                                FILE *out, ld_error *err);

/* Peak resident set size of this process so far, in bytes (getrusage). */
int64_t ld_profile_peak_rss(void);

/* Writes the report as JSON (format: docs/cli.md) to path, with the peak RSS
 * at the moment of writing: through a temporary file beside path renamed
 * over it once complete (report/atomic_file.h), so a failed write or a
 * signal leaves no partial file. */
ld_status ld_profile_report_write(ld_profile_report *r, const char *path, ld_error *err);

#endif
