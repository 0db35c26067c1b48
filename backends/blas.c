/* layerdiff — the single GEMM entry point (see blas.h).
 *
 * Which BLAS, and which of its CPU kernels, by measurement (GFLOP/s of
 * row-major cblas_sgemm, median of 9, on the 2-vCPU CI machines — AMD EPYC
 * Zen 5 with AVX-512; fp32 numbers, 1 thread / 2 threads, shapes 1024^3,
 * conv-like 64x3136x576, 128x768x768; details in docs/architecture.md):
 *
 *   OpenBLAS 0.3.21 (Debian, pthread)  SkylakeX    215/191/205   424/370/357
 *                                      Cooperlake  211/183/200   424/362/360
 *                                      Haswell     113/106/111   226/206/218
 *   BLIS 0.9.0 (Debian, openmp)        auto→generic 38/ 34/ 36    75/ 70/ 74
 *                                      skx (0)     203/160/194   414/316/378
 *
 * Every kernel matched a naive double-precision GEMM to within ~2.5 units of
 * 2^-24 * sum|a*b|. OpenBLAS's AVX-512 kernel wins on one thread and on the
 * conv-like shape, and under load from other processes the OpenMP BLIS build
 * collapsed (3 GFLOP/s at 512^3 on two busy-waiting threads) where the pthread
 * OpenBLAS degraded gracefully — so OpenBLAS is the default, BLIS the
 * fallback (or LAYERDIFF_BLAS=blis).
 *
 * The library must run the right kernel without the user setting anything.
 * OpenBLAS picks its kernel in a library constructor from OPENBLAS_CORETYPE
 * or its own CPU table, which in 0.3.21 misses newer CPUs (Emerald Rapids
 * Xeons fall back to SSE3 "Prescott", 34 GFLOP/s; Zen 5 happens to get
 * Cooperlake), and BLIS 0.9 gives Zen 5 its "generic" kernel. So the
 * library is not linked: at first use we choose the kernel from the CPU's
 * features (blas_core.c: a preset OPENBLAS_CORETYPE / BLIS_ARCH_TYPE is
 * ignored, LAYERDIFF_BLAS_CORETYPE wins), set the library's variable for the
 * moment of dlopen and restore the environment afterwards;
 * ld_blas_describe() says which kernel runs and why. */
#include "backends/blas.h"

#include <dlfcn.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/accumulate.h"
#include "backends/gemm_half.h"

/* CBLAS enum values (the same in every CBLAS); we do not include cblas.h
 * because the library is loaded at run time. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*sgemm_fn)(int order, int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta,
                         float *C, int ldc);
typedef void (*dgemm_fn)(int order, int trans_a, int trans_b, int M, int N, int K, double alpha,
                         const double *A, int lda, const double *B, int ldb, double beta,
                         double *C, int ldc);

/* BLIS 0.9 arch_t ids (BLIS_ARCH_TYPE takes the number); checked against
 * bli_arch_string before use. */
enum { BLIS_ARCH_ID_SKX = 0, BLIS_ARCH_ID_HASWELL = 3 };

typedef struct blas_lib {
    const char *name;                 /* "openblas", "blis"; NULL when none loaded */
    void *handle;
    sgemm_fn sgemm;
    dgemm_fn dgemm;
    void (*openblas_set_threads)(int);
    void (*blis_set_threads)(long);
    char version[32];
    char core[32];
    char why[200];                    /* where the core choice came from */
    ld_status status;
    char message[LD_ERROR_MESSAGE_SIZE];
} blas_lib;

static blas_lib blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static atomic_int blas_threads_set; /* OpenMP threads one product may use; 0 = not set (1) */
static pthread_mutex_t describe_lock = PTHREAD_MUTEX_INITIALIZER;
static char description[LD_ERROR_MESSAGE_SIZE + 256];

/* --- loading ------------------------------------------------------------------ */

static void *load_symbol(void *handle, const char *name)
{
    return handle ? dlsym(handle, name) : NULL;
}

/* A variable set (value) or removed (NULL) for the moment of loading a
 * library, then put back as it was: the process's children (and anything
 * else reading the environment later) see the user's environment. */
typedef struct env_override {
    const char *var;
    bool had;
    char saved[256];
} env_override;

static void env_override_begin(env_override *o, const char *var, const char *value)
{
    const char *now = getenv(var);
    o->var = var;
    o->had = now != NULL && strlen(now) < sizeof o->saved;
    snprintf(o->saved, sizeof o->saved, "%s", o->had ? now : "");
    if (value)
        setenv(var, value, 1);
    else
        unsetenv(var);
}

static void env_override_end(const env_override *o)
{
    if (o->had)
        setenv(o->var, o->saved, 1);
    else
        unsetenv(o->var);
}

static const char *env_nonempty(const char *var)
{
    const char *v = getenv(var);
    return v && *v ? v : NULL;
}

static void load_openblas(blas_lib *b, const ld_blas_core_choice *choice)
{
    /* Already in the process (linked by something else): its constructor has
     * run and our choice cannot apply; say so instead of pretending. */
    void *already = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (already) {
        b->handle = already;
    } else {
        /* One thread: the library then starts no worker threads (they would
         * only idle, since gemm_dispatch runs it single-threaded). */
        env_override core, threads;
        env_override_begin(&core, "OPENBLAS_CORETYPE", *choice->core ? choice->core : NULL);
        env_override_begin(&threads, "OPENBLAS_NUM_THREADS", "1");
        b->handle = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
        env_override_end(&threads);
        env_override_end(&core);
    }
    if (!b->handle) {
        snprintf(b->message, sizeof b->message, "libopenblas.so.0: %s", dlerror());
        return;
    }
    b->sgemm = (sgemm_fn)load_symbol(b->handle, "cblas_sgemm");
    b->dgemm = (dgemm_fn)load_symbol(b->handle, "cblas_dgemm");
    b->openblas_set_threads = (void (*)(int))load_symbol(b->handle, "openblas_set_num_threads");
    char *(*corename)(void) = (char *(*)(void))load_symbol(b->handle, "openblas_get_corename");
    char *(*config)(void) = (char *(*)(void))load_symbol(b->handle, "openblas_get_config");
    if (!b->sgemm || !b->dgemm) {
        snprintf(b->message, sizeof b->message, "libopenblas.so.0 has no cblas_sgemm/cblas_dgemm");
        dlclose(b->handle);
        b->handle = NULL;
        return;
    }
    b->name = "openblas";
    snprintf(b->core, sizeof b->core, "%s", corename ? corename() : "?");
    /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64" */
    if (config)
        sscanf(config(), "OpenBLAS %31s", b->version);
    if (already)
        snprintf(b->why, sizeof b->why, "already loaded by the process: its own choice");
    else
        snprintf(b->why, sizeof b->why, "%s", choice->why);
}

static void load_blis(blas_lib *b, const ld_blas_core_choice *choice)
{
    b->handle = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!b->handle) {
        size_t used = strlen(b->message);
        snprintf(b->message + used, sizeof b->message - used, "%slibblis.so.4: %s",
                 used ? "; " : "", dlerror());
        return;
    }
    b->sgemm = (sgemm_fn)load_symbol(b->handle, "cblas_sgemm");
    b->dgemm = (dgemm_fn)load_symbol(b->handle, "cblas_dgemm");
    b->blis_set_threads = (void (*)(long))load_symbol(b->handle, "bli_thread_set_num_threads");
    int (*arch_id)(void) = (int (*)(void))load_symbol(b->handle, "bli_arch_query_id");
    char *(*arch_name)(int) = (char *(*)(int))load_symbol(b->handle, "bli_arch_string");
    char *(*version)(void) = (char *(*)(void))load_symbol(b->handle, "bli_info_get_version_str");
    void (*init)(void) = (void (*)(void))load_symbol(b->handle, "bli_init");
    if (!b->sgemm || !b->dgemm || !arch_id || !arch_name || !init) {
        snprintf(b->message, sizeof b->message, "libblis.so.4 lacks cblas or bli_arch symbols");
        dlclose(b->handle);
        b->handle = NULL;
        return;
    }
    /* BLIS reads BLIS_ARCH_TYPE lazily, on its first call: bli_init (which
     * must come before bli_arch_query_id) is that call. Its own detection
     * gives "generic" (38 GFLOP/s) on CPUs newer than its table, so the
     * kernel follows the OpenBLAS choice's instructions. */
    int want = choice->needs & LD_CPU_AVX512 ? BLIS_ARCH_ID_SKX
               : choice->needs & LD_CPU_AVX2_FMA ? BLIS_ARCH_ID_HASWELL : -1;
    const char *want_name = want == BLIS_ARCH_ID_SKX ? "skx" : "haswell";
    char value[8] = "";
    if (want >= 0 && strcmp(arch_name(want), want_name) == 0)
        snprintf(value, sizeof value, "%d", want);
    env_override arch;
    env_override_begin(&arch, "BLIS_ARCH_TYPE", *value ? value : NULL);
    init();
    int id = arch_id();
    env_override_end(&arch);
    b->name = "blis";
    snprintf(b->core, sizeof b->core, "%s", arch_name(id));
    snprintf(b->version, sizeof b->version, "%s", version ? version() : "?");
    const char *requested = env_nonempty("LAYERDIFF_BLAS_CORETYPE");
    const char *preset = env_nonempty("BLIS_ARCH_TYPE");
    if (requested)
        snprintf(b->why, sizeof b->why, "LAYERDIFF_BLAS_CORETYPE=%s set by the user%s", requested,
                 *value ? "" : "; no BLIS equivalent: the library's own CPU detection");
    else if (*value)
        snprintf(b->why, sizeof b->why, "chosen by layerdiff for this %s CPU%s%s%s",
                 want == BLIS_ARCH_ID_SKX ? "AVX-512" : "AVX2+FMA",
                 preset ? "; BLIS_ARCH_TYPE=" : "", preset ? preset : "",
                 preset ? " in the environment ignored" : "");
    else
        snprintf(b->why, sizeof b->why, "the library's own CPU detection");
}

static void load_blas(void)
{
    const char *force = getenv("LAYERDIFF_BLAS");
    bool want_openblas = !force || !*force || strcmp(force, "openblas") == 0;
    bool want_blis = !force || !*force || strcmp(force, "blis") == 0;
    if (!want_openblas && !want_blis) {
        blas.status = LD_ERR_USAGE;
        snprintf(blas.message, sizeof blas.message,
                 "LAYERDIFF_BLAS=%s: expected \"openblas\" or \"blis\"", force);
        return;
    }
    ld_blas_core_choice choice;
    ld_error err;
    ld_error_clear(&err);
    blas.status = ld_blas_choose_core(env_nonempty("LAYERDIFF_BLAS_CORETYPE"),
                                      env_nonempty("OPENBLAS_CORETYPE"), ld_blas_cpu_features(),
                                      &choice, &err);
    if (blas.status != LD_OK) {
        snprintf(blas.message, sizeof blas.message, "%s", err.message);
        return;
    }
    if (want_openblas)
        load_openblas(&blas, &choice);
    if (!blas.name && want_blis)
        load_blis(&blas, &choice);
    blas.status = blas.name ? LD_OK : LD_ERR_UNSUPPORTED;
    /* The library itself always runs single-threaded; ld_sgemm splits the
     * product over OpenMP threads (see gemm_dispatch). */
    if (blas.openblas_set_threads)
        blas.openblas_set_threads(1);
    else if (blas.blis_set_threads)
        blas.blis_set_threads(1);
}

ld_status ld_blas_init(ld_error *err)
{
    pthread_once(&blas_once, load_blas);
    if (blas.status == LD_OK)
        return LD_OK;
    if (blas.status == LD_ERR_USAGE)
        return ld_error_set(err, blas.status, "%s", blas.message);
    return ld_error_set(err, blas.status,
                        "no BLAS could be loaded (%s); run scripts/install-deps.sh", blas.message);
}

const char *ld_blas_describe(void)
{
    pthread_once(&blas_once, load_blas);
    int threads = atomic_load(&blas_threads_set);
    char count[32];
    threads = threads > 0 ? threads : 1;
    snprintf(count, sizeof count, "%d thread%s", threads, threads == 1 ? "" : "s");
    pthread_mutex_lock(&describe_lock);
    if (blas.name)
        snprintf(description, sizeof description, "%s %s %s (%s), %s", blas.name, blas.version,
                 blas.core, blas.why, count);
    else
        snprintf(description, sizeof description, "naive C loops (no BLAS: %s)", blas.message);
    pthread_mutex_unlock(&describe_lock);
    return description;
}

void ld_blas_set_threads(int n)
{
    atomic_store(&blas_threads_set, n < 1 ? 1 : n);
}

int ld_blas_threads(void)
{
    int n = atomic_load(&blas_threads_set);
    return n > 0 ? n : 1;
}

/* --- the entry point ------------------------------------------------------------ */

static void check_gemm_args(const char *what, bool trans_a, bool trans_b, int64_t M, int64_t N,
                            int64_t K, int64_t lda, int64_t ldb, int64_t ldc)
{
    int64_t need_a = trans_a ? M : K, need_b = trans_b ? K : N;
    if (M < 0 || N < 0 || K < 0 || lda < (need_a > 1 ? need_a : 1) ||
        ldb < (need_b > 1 ? need_b : 1) || ldc < (N > 1 ? N : 1)) {
        fprintf(stderr,
                "layerdiff: internal error: %s(M=%lld N=%lld K=%lld lda=%lld ldb=%lld ldc=%lld)\n",
                what, (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb,
                (long long)ldc);
        abort();
    }
}

static bool fits_blas_int(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc)
{
    return M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && lda <= INT_MAX && ldb <= INT_MAX &&
           ldc <= INT_MAX;
}

/* K == 0: C = beta * C (some BLAS builds mishandle it; it is cheap here). */
#define SCALE_C(C, M, N, ldc, beta)                                                      \
    do {                                                                                \
        for (int64_t i_ = 0; i_ < (M); i_++)                                            \
            for (int64_t j_ = 0; j_ < (N); j_++)                                        \
                (C)[i_ * (ldc) + j_] = (beta) == 0 ? 0 : (beta) * (C)[i_ * (ldc) + j_]; \
    } while (0)

/* One product for the loaded library (es 4: sgemm, 8: dgemm). */
typedef struct gemm_call {
    bool ta, tb;
    int64_t M, N, K, lda, ldb, ldc;
    size_t es;
    const void *A, *B;
    void *C;
    double alpha, beta; /* exactly the float values for sgemm */
} gemm_call;

/* Rows [m0, m1) and columns [n0, n1) of C. */
static void gemm_slice(const gemm_call *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    const char *A = (const char *)g->A + (size_t)(g->ta ? m0 : m0 * g->lda) * g->es;
    const char *B = (const char *)g->B + (size_t)(g->tb ? n0 * g->ldb : n0) * g->es;
    char *C = (char *)g->C + (size_t)(m0 * g->ldc + n0) * g->es;
    int ta = g->ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = g->tb ? CBLAS_TRANS : CBLAS_NO_TRANS;
    if (g->es == 4)
        blas.sgemm(CBLAS_ROW_MAJOR, ta, tb, (int)(m1 - m0), (int)(n1 - n0), (int)g->K,
                   (float)g->alpha, (const float *)A, (int)g->lda, (const float *)B, (int)g->ldb,
                   (float)g->beta, (float *)C, (int)g->ldc);
    else
        blas.dgemm(CBLAS_ROW_MAJOR, ta, tb, (int)(m1 - m0), (int)(n1 - n0), (int)g->K, g->alpha,
                   (const double *)A, (int)g->lda, (const double *)B, (int)g->ldb, g->beta,
                   (double *)C, (int)g->ldc);
}

/* Products below this many multiply-adds are one BLAS call. */
#define GEMM_SPLIT_MIN ((double)(1 << 20))
/* Larger ones are cut into blocks of this many columns (or rows, when C is
 * taller than wide), one single-threaded BLAS call each. */
#define GEMM_BLOCK 128
/* The blocks go to several threads only from this many multiply-adds (~40 us
 * of one core's work): when the other CPU is busy with another process, a
 * parallel loop waits for its woken worker up to a scheduler slice (~3 ms,
 * measured: the transformer fixture's 2.1M-MAC MLP products took 3.5 ms each
 * on two threads against 15 us on one). Same blocks either way: same bits. */
#define GEMM_PARALLEL_MIN ((double)(1 << 22))

/* Threads. The BLAS runs single-threaded and a large product is cut into
 * fixed blocks of C that OpenMP threads take dynamically (inside another
 * parallel region, e.g. MatMul's per-batch loop, the blocks run on the
 * calling thread). Measured on the shared 2-vCPU machines: letting
 * OpenBLAS's pthreads and the kernels' OpenMP threads take turns made a
 * ResNet-like model 7x slower than one thread (libgomp's spinning workers
 * and OpenBLAS's workers fight for the two CPUs after every parallel loop);
 * with passive waiting one OpenMP team still beat OpenBLAS's own threading
 * by 1.8x. The blocks do not depend on the thread count, so neither do the
 * results (the same calls compute the same elements); they may differ in the
 * last bit from one unsplit call. Cost of the blocking on one thread: ~5%. */
static void gemm_dispatch(const gemm_call *g)
{
    int threads = ld_blas_threads();
    if ((double)g->M * (double)g->N * (double)g->K < GEMM_SPLIT_MIN) {
        gemm_slice(g, 0, g->M, 0, g->N);
        return;
    }
    bool by_columns = g->N >= g->M;
    int64_t len = by_columns ? g->N : g->M;
    int64_t blocks = (len + GEMM_BLOCK - 1) / GEMM_BLOCK;
    bool parallel = threads > 1 && !omp_in_parallel() &&
                    (double)g->M * (double)g->N * (double)g->K >= GEMM_PARALLEL_MIN;
#pragma omp parallel for num_threads(threads) if (parallel) schedule(dynamic, 1)
    for (int64_t t = 0; t < blocks; t++) {
        int64_t a = t * GEMM_BLOCK, b = a + GEMM_BLOCK < len ? a + GEMM_BLOCK : len;
        if (by_columns)
            gemm_slice(g, 0, g->M, a, b);
        else
            gemm_slice(g, a, b, 0, g->N);
    }
}

void ld_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
              int64_t ldc, const ld_layer_numerics *numerics, ld_layer_counters *counters)
{
    check_gemm_args("ld_sgemm", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    if (M == 0 || N == 0)
        return;
    if (ld_numerics_accumulate_half(numerics)) {
        ld_count_partial_overflows(
            counters, ld_sgemm_half(LD_GEMM_HALF_AUTO, ld_blas_threads(), trans_a, trans_b, M, N,
                                    K, alpha, A, lda, B, ldb, beta, C, ldc,
                                    numerics->precision, &numerics->round));
        return;
    }
    if (K == 0 || alpha == 0) {
        SCALE_C(C, M, N, ldc, beta);
        return;
    }
    pthread_once(&blas_once, load_blas);
    if (!blas.sgemm || !fits_blas_int(M, N, K, lda, ldb, ldc)) {
        ld_sgemm_naive(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_call g = {trans_a, trans_b, M, N, K, lda, ldb, ldc, sizeof(float), A, B, C, alpha, beta};
    gemm_dispatch(&g);
}

void ld_dgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
              const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
              double *C, int64_t ldc, const ld_layer_numerics *numerics,
              ld_layer_counters *counters)
{
    check_gemm_args("ld_dgemm", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    if (M == 0 || N == 0)
        return;
    if (ld_numerics_accumulate_half(numerics)) {
        ld_count_partial_overflows(
            counters, ld_dgemm_half(ld_blas_threads(), trans_a, trans_b, M, N, K, alpha, A, lda,
                                    B, ldb, beta, C, ldc, numerics->precision,
                                    &numerics->round));
        return;
    }
    if (K == 0 || alpha == 0) {
        SCALE_C(C, M, N, ldc, beta);
        return;
    }
    pthread_once(&blas_once, load_blas);
    if (!blas.dgemm || !fits_blas_int(M, N, K, lda, ldb, ldc)) {
        ld_dgemm_naive(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    gemm_call g = {trans_a, trans_b, M, N, K, lda, ldb, ldc, sizeof(double), A, B, C, alpha, beta};
    gemm_dispatch(&g);
}

/* --- naive references --------------------------------------------------------------- */

void ld_sgemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc)
{
    check_gemm_args("ld_sgemm_naive", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            if (alpha != 0)
                for (int64_t k = 0; k < K; k++) {
                    double a = trans_a ? A[k * lda + i] : A[i * lda + k];
                    double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
                    acc += a * b;
                }
            double c = (double)alpha * acc;
            if (beta != 0)
                c += (double)beta * C[i * ldc + j];
            C[i * ldc + j] = (float)c;
        }
    }
}

void ld_dgemm_naive(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                    const double *A, int64_t lda, const double *B, int64_t ldb, double beta,
                    double *C, int64_t ldc)
{
    check_gemm_args("ld_dgemm_naive", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            if (alpha != 0)
                for (int64_t k = 0; k < K; k++) {
                    double a = trans_a ? A[k * lda + i] : A[i * lda + k];
                    double b = trans_b ? B[j * ldb + k] : B[k * ldb + j];
                    acc += a * b;
                }
            double c = alpha * acc;
            if (beta != 0)
                c += beta * C[i * ldc + j];
            C[i * ldc + j] = c;
        }
    }
}
