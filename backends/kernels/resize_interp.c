/* layerdiff — Resize interpolation: the nearest gather and the separable
 * linear/cubic passes over the per-axis tables resize.c builds (see resize.c
 * for the method and numerics). */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/kernels/conv_pool.h"
#include "backends/kernels/fast_level.h"
#include "backends/kernels/resize_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* --- nearest: one gather over all axes ----------------------------------------------- */

typedef struct gather_job {
    const resize_plan *p;
    const axis_table *tables;
    int64_t offsets_start[LD_MAX_RANK]; /* into offsets */
    int64_t *offsets;                   /* per axis, per output index: source element offset
                                           or -1 to extrapolate */
    size_t elem;
    unsigned char extrap[8];            /* extrapolation value in the element type */
    int repeat;                         /* > 1: the last axis upsamples 4-byte elements by
                                           this integer factor (repeat_factor) */
    ld_fast_level level;                /* of repeat_row */
} gather_job;

/* --- integer upsampling of the last axis ------------------------------------------
 * Nearest upsampling by an integer factor k (the FPN's 2x, 4x, 8x in
 * PaddleOCR det) reads source element j / k for output j. The general gather
 * below loads an int64 offset per element and copies one element at a time
 * (~0.8 ns per output element on a Zen 3); these loops write each source
 * element k times from registers. A copy: every bit pattern (NaN payloads
 * too) comes out as the gather's. */

/* The factor k > 1 when output j of the last axis reads source j / k for
 * every j (and nothing extrapolates), else 0. */
static int repeat_factor(const resize_plan *p, const axis_table *tables, size_t elem)
{
    int last = p->rank - 1;
    int64_t in = p->in[last], out = p->out[last];
    if (elem != 4 || tables[last].outside || in <= 0 || out % in != 0 || out / in < 2 ||
        out / in > 64)
        return 0;
    int64_t k = out / in;
    for (int64_t j = 0; j < out; j++)
        if (tables[last].index[j] != j / k)
            return 0;
    return (int)k;
}

static void repeat_row_portable(const uint32_t *s, uint32_t *d, int64_t n, int k)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t v = s[i];
        for (int t = 0; t < k; t++)
            d[i * k + t] = v;
    }
}

#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2")))
/* d[i*k + t] = s[i] for i < n, t < k. Loads stay inside s[0, n). */
AVX2 static void repeat_row_avx2(const uint32_t *s, uint32_t *d, int64_t n, int k)
{
    int64_t i = 0;
    const float *sf = (const float *)(const void *)s;
    float *df = (float *)(void *)d;
    if (k == 2) {
        const __m256i idx = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
        for (; i + 8 <= n; i += 8) {
            __m256 a = _mm256_castps128_ps256(_mm_loadu_ps(sf + i));
            __m256 b = _mm256_castps128_ps256(_mm_loadu_ps(sf + i + 4));
            _mm256_storeu_ps(df + 2 * i, _mm256_permutevar8x32_ps(a, idx));
            _mm256_storeu_ps(df + 2 * i + 8, _mm256_permutevar8x32_ps(b, idx));
        }
    } else if (k == 4) {
        const __m256i idx = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
        for (; i + 2 <= n; i += 2) {
            __m128i two = _mm_loadl_epi64((const __m128i *)(const void *)(s + i));
            _mm256_storeu_ps(df + 4 * i, _mm256_permutevar8x32_ps(
                                             _mm256_castps128_ps256(_mm_castsi128_ps(two)), idx));
        }
    } else if (k % 8 == 0) {
        for (; i < n; i++) {
            __m256 v = _mm256_broadcast_ss(sf + i);
            for (int t = 0; t < k; t += 8)
                _mm256_storeu_ps(df + i * k + t, v);
        }
    }
    repeat_row_portable(s + i, d + i * k, n - i, k);
}
#undef AVX2
#endif

static void repeat_row(const gather_job *job, const unsigned char *src, unsigned char *dst,
                       int64_t n)
{
#if defined(__x86_64__)
    if (job->level == LD_FAST_AVX2) {
        repeat_row_avx2((const uint32_t *)(const void *)src, (uint32_t *)(void *)dst, n,
                        job->repeat);
        return;
    }
#endif
    repeat_row_portable((const uint32_t *)(const void *)src, (uint32_t *)(void *)dst, n,
                        job->repeat);
}

/* Stores v as element i of dst in dtype: floats as they are, integers
 * rounded to nearest (ties to even) and saturated, NaN as 0. */
static void store_saturated(ld_dtype dtype, void *dst, int64_t i, double v)
{
    double r = nearbyint(v);
#define SAT(T, LO, HI) ((T *)dst)[i] = (T)(r != r ? 0 : fmin(HI, fmax(LO, r)))
    switch (dtype) {
    case LD_DTYPE_FLOAT32: ((float *)dst)[i] = (float)v; break;
    case LD_DTYPE_FLOAT64: ((double *)dst)[i] = v; break;
    case LD_DTYPE_INT8: SAT(int8_t, -128.0, 127.0); break;
    case LD_DTYPE_UINT8: case LD_DTYPE_BOOL: SAT(uint8_t, 0.0, 255.0); break;
    case LD_DTYPE_INT16: SAT(int16_t, -32768.0, 32767.0); break;
    case LD_DTYPE_UINT16: SAT(uint16_t, 0.0, 65535.0); break;
    case LD_DTYPE_INT32: SAT(int32_t, -2147483648.0, 2147483647.0); break;
    case LD_DTYPE_UINT32: SAT(uint32_t, 0.0, 4294967295.0); break;
    case LD_DTYPE_INT64: SAT(int64_t, -9223372036854775808.0, 9223372036854774784.0); break;
    case LD_DTYPE_UINT64: SAT(uint64_t, 0.0, 18446744073709549568.0); break;
    default: break;
    }
#undef SAT
}

/* Copies one output row (the last axis) whose source row starts at base. */
static void gather_row(const gather_job *job, const unsigned char *src, unsigned char *dst,
                       int64_t base, bool row_outside)
{
    int last = job->p->rank - 1;
    int64_t w = job->p->out[last];
    const int64_t *off = job->offsets + job->offsets_start[last];
    size_t e = job->elem;
    if (row_outside) {
        for (int64_t j = 0; j < w; j++)
            memcpy(dst + (size_t)j * e, job->extrap, e);
        return;
    }
    if (job->tables[last].outside) {
        for (int64_t j = 0; j < w; j++)
            memcpy(dst + (size_t)j * e,
                   off[j] < 0 ? job->extrap : src + (size_t)(base + off[j]) * e, e);
        return;
    }
    if (job->repeat > 1) {
        repeat_row(job, src + (size_t)base * e, dst, w / job->repeat);
        return;
    }
#define GATHER_AS(T)                                                                      \
    do {                                                                                  \
        const T *s_ = (const T *)src + base;                                              \
        T *d_ = (T *)dst;                                                                 \
        for (int64_t j = 0; j < w; j++)                                                   \
            d_[j] = s_[off[j]];                                                           \
    } while (0)
    switch (e) {
    case 1: GATHER_AS(uint8_t); break;
    case 2: GATHER_AS(uint16_t); break;
    case 4: GATHER_AS(uint32_t); break;
    default: GATHER_AS(uint64_t); break;
    }
#undef GATHER_AS
}

/* Source offset of output row r (all axes but the last), or -1 when an outer
 * axis extrapolates there. */
static int64_t gather_row_base(const gather_job *job, int64_t r)
{
    int64_t base = 0;
    bool outside = false;
    for (int d = job->p->rank - 2; d >= 0; d--) {
        int64_t n = job->p->out[d], i = r % n;
        r /= n;
        int64_t off = job->offsets[job->offsets_start[d] + i];
        if (off < 0)
            outside = true;
        base += off;
    }
    return outside ? -1 : base;
}

/* Output rounding fused into nearest mode (kernel.h, round_block): each
 * claim hands its consecutive output rows to the hook in runs of at least
 * RESIZE_ROUND_BLOCK values, right after writing them, instead of the
 * engine's second pass over the output. */
#define RESIZE_ROUND_BLOCK 4096
static bool nearest_rounds_output(const ld_kernel_ctx *ctx, const ld_tensor *y)
{
    return ctx->round_block && ctx->n_outputs > 0 && ctx->outputs[0] == y &&
           y->dtype == LD_DTYPE_FLOAT32;
}

static void nearest_round_rows(const ld_kernel_ctx *ctx, ld_tensor *y, int64_t first,
                               int64_t n_rows, int64_t width)
{
    ctx->round_block(ctx->round_user, 0, (float *)y->data + first * width, n_rows * width);
}

typedef struct {
    const ld_kernel_ctx *ctx;
    const gather_job *job;
    ld_tensor *y;
    const unsigned char *src;
    bool round;
    int64_t width;
    size_t row_bytes;
} nearest_rows_job;

/* Output rows [r0, r1) of a nearest resize (a claim of ld_conv_pool_run). */
static void nearest_rows(void *arg, int worker, int64_t r0, int64_t r1)
{
    (void)worker;
    const nearest_rows_job *j = arg;
    const int64_t width = j->width;
    unsigned char *dst = j->y->data;
    int64_t prev_base = -2, prev_row = -1, run = -1; /* run: first row not yet rounded */
    for (int64_t r = r0; r < r1; r++) {
        int64_t base = gather_row_base(j->job, r);
        unsigned char *out_row = dst + (size_t)r * j->row_bytes;
        /* Upsampling repeats source rows: copy the row just made (while it
         * is not rounded yet: each value is rounded and counted once, as
         * made). */
        if (base == prev_base && prev_row == r - 1 && (!j->round || (run >= 0 && run < r)))
            memcpy(out_row, out_row - j->row_bytes, j->row_bytes);
        else
            gather_row(j->job, j->src, out_row, base < 0 ? 0 : base, base < 0);
        prev_base = base;
        prev_row = r;
        if (j->round) {
            run = run < 0 ? r : run;
            if ((r - run + 1) * width >= RESIZE_ROUND_BLOCK) {
                nearest_round_rows(j->ctx, j->y, run, r + 1 - run, width);
                run = -1;
            }
        }
    }
    if (j->round && run >= 0) /* this claim's last rows */
        nearest_round_rows(j->ctx, j->y, run, prev_row + 1 - run, width);
}

ld_status ld_resize_nearest(ld_kernel_ctx *ctx, const resize_plan *p, const axis_table *tables)
{
    const resize_state *s = ctx->state;
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    gather_job job = {.p = p, .tables = tables, .elem = ld_dtype_size(x->dtype)};
    if (job.elem != 1 && job.elem != 2 && job.elem != 4 && job.elem != 8)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    store_saturated(x->dtype, job.extrap, 0, s->extrapolation);
    int64_t total = 0, stride = 1, in_stride[LD_MAX_RANK];
    for (int d = p->rank - 1; d >= 0; d--) {
        in_stride[d] = stride;
        stride *= p->in[d];
        job.offsets_start[d] = total;
        total += p->out[d];
    }
    job.offsets = malloc((size_t)(total ? total : 1) * sizeof *job.offsets);
    if (!job.offsets)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    for (int d = 0; d < p->rank; d++)
        for (int64_t j = 0; j < p->out[d]; j++)
            job.offsets[job.offsets_start[d] + j] =
                tables[d].outside && tables[d].outside[j] ? -1 : tables[d].index[j] * in_stride[d];
    int64_t width = p->out[p->rank - 1], rows = y->count / width;
    size_t row_bytes = (size_t)width * job.elem;
    bool round = nearest_rounds_output(ctx, y);
    job.repeat = repeat_factor(p, tables, job.elem);
    job.level = ld_fast_level_active();
    nearest_rows_job rj = {.ctx = ctx, .job = &job, .y = y, .src = x->data, .round = round,
                           .width = width, .row_bytes = row_bytes};
    /* on the convolutions' claim pool, as the fused chains (exec_fuse.c):
       one helper thread for the whole run instead of waking OpenMP's */
    int threads = y->count > RESIZE_PARALLEL_MIN ? ctx->threads : 1;
    ld_conv_pool_run(threads, rows, ld_conv_pool_claim(rows, threads), nearest_rows, &rj);
    if (round)
        ctx->rounded_outputs |= 1u;
    free(job.offsets);
    return LD_OK;
}

/* --- linear / cubic: separable passes ------------------------------------------------ */

/* Typed loops: one interpolated row, a blend of rows, a pass along one axis
 * of a tensor viewed as [outer, in_len, inner] -> [outer, out_len, inner],
 * and the fused resize of the last two axes. */
#define DEFINE_RESIZE_LOOPS(T, SFX, WEIGHTS)                                                 \
    static void resize_row_##SFX(const T *src, T *dst, const axis_table *t, int64_t n,       \
                                 T extrap)                                                   \
    {                                                                                        \
        const int taps = t->taps;                                                            \
        if (taps == 2 && !t->outside) { /* linear: the hot case, unrolled */                 \
            const int64_t *ix = t->index;                                                    \
            const T *w = t->WEIGHTS;                                                         \
            for (int64_t j = 0; j < n; j++)                                                  \
                dst[j] = w[2 * j] * src[ix[2 * j]] + w[2 * j + 1] * src[ix[2 * j + 1]];      \
            return;                                                                          \
        }                                                                                    \
        for (int64_t j = 0; j < n; j++) {                                                    \
            const int64_t *ix = t->index + j * taps;                                         \
            const T *w = t->WEIGHTS + j * taps;                                              \
            T acc = w[0] * src[ix[0]];                                                       \
            for (int k = 1; k < taps; k++)                                                   \
                acc += w[k] * src[ix[k]];                                                    \
            dst[j] = t->outside && t->outside[j] ? extrap : acc;                             \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    /* d = sum_k w[k] * rows[k], or the extrapolation value when outside */                 \
    static void blend_rows_##SFX(const T *const *rows, const T *w, int taps, bool outside,   \
                                 T extrap, T *d, int64_t n)                                  \
    {                                                                                        \
        if (outside) {                                                                       \
            for (int64_t i = 0; i < n; i++)                                                  \
                d[i] = extrap;                                                               \
            return;                                                                          \
        }                                                                                    \
        const T *s0 = rows[0], w0 = w[0];                                                    \
        if (taps == 2) { /* the same sums as below, in one sweep */                          \
            const T *s1 = rows[1], w1 = w[1];                                                \
            for (int64_t i = 0; i < n; i++)                                                  \
                d[i] = w0 * s0[i] + w1 * s1[i];                                              \
            return;                                                                          \
        }                                                                                    \
        for (int64_t i = 0; i < n; i++)                                                      \
            d[i] = w0 * s0[i];                                                               \
        for (int k = 1; k < taps; k++) {                                                     \
            const T *sk = rows[k], wk = w[k];                                                \
            for (int64_t i = 0; i < n; i++)                                                  \
                d[i] += wk * sk[i];                                                          \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    static void resize_pass_##SFX(const T *src, T *dst, int64_t outer, int64_t in_len,       \
                                  int64_t out_len, int64_t inner, const axis_table *t,       \
                                  T extrap, int threads)                                     \
    {                                                                                        \
        const int taps = t->taps;                                                            \
        const int64_t rows = outer * out_len;                                                \
        const bool par = rows * inner * taps > RESIZE_PARALLEL_MIN;                          \
        if (inner == 1) {                                                                    \
            _Pragma("omp parallel for num_threads(threads) if (par)")                        \
            for (int64_t o = 0; o < outer; o++)                                              \
                resize_row_##SFX(src + o * in_len, dst + o * out_len, t, out_len, extrap);   \
            return;                                                                          \
        }                                                                                    \
        _Pragma("omp parallel for num_threads(threads) if (par)")                            \
        for (int64_t r = 0; r < rows; r++) {                                                 \
            int64_t o = r / out_len, j = r % out_len;                                        \
            const T *rowp[4];                                                                \
            for (int k = 0; k < taps; k++)                                                   \
                rowp[k] = src + (o * in_len + t->index[j * taps + k]) * inner;               \
            blend_rows_##SFX(rowp, t->WEIGHTS + j * taps, taps, t->outside && t->outside[j], \
                             extrap, dst + r * inner, inner);                                \
        }                                                                                    \
    }                                                                                        \
                                                                                             \
    /* [outer, in_h, in_w] -> [outer, out_h, out_w] in one sweep: each output row           \
     * blends horizontally resized source rows, which a per-thread cache of one             \
     * row per tap (slot = source row mod taps; a row's taps are distinct mod taps)        \
     * computes once. Tasks are bands of output rows. */                                    \
    static void resize_2d_##SFX(const T *src, T *dst, int64_t outer, int64_t in_h,           \
                                int64_t in_w, const axis_table *th, int64_t out_h,           \
                                const axis_table *tw, int64_t out_w, T extrap, T *cache,     \
                                int threads)                                                 \
    {                                                                                        \
        const int taps = th->taps;                                                           \
        const int64_t band = 16, bands = (out_h + band - 1) / band, tasks = outer * bands;   \
        const bool par = tasks > 1 && outer * out_h * out_w * taps > RESIZE_PARALLEL_MIN;    \
        _Pragma("omp parallel num_threads(threads) if (par)")                                \
        {                                                                                    \
            T *rows = cache + (size_t)omp_get_thread_num() * (size_t)(taps * out_w);         \
            _Pragma("omp for schedule(static)")                                              \
            for (int64_t task = 0; task < tasks; task++) {                                   \
                int64_t o = task / bands, j0 = task % bands * band;                          \
                int64_t j1 = j0 + band < out_h ? j0 + band : out_h, tag[4] = {-1, -1, -1, -1}; \
                const T *plane = src + o * in_h * in_w;                                      \
                for (int64_t j = j0; j < j1; j++) {                                          \
                    const T *rowp[4];                                                        \
                    for (int k = 0; k < taps; k++) {                                         \
                        int64_t sr = th->index[j * taps + k], slot = sr % taps;              \
                        if (tag[slot] != sr) {                                               \
                            resize_row_##SFX(plane + sr * in_w, rows + slot * out_w, tw,     \
                                             out_w, extrap);                                 \
                            tag[slot] = sr;                                                  \
                        }                                                                    \
                        rowp[k] = rows + slot * out_w;                                       \
                    }                                                                        \
                    blend_rows_##SFX(rowp, th->WEIGHTS + j * taps, taps,                     \
                                     th->outside && th->outside[j], extrap,                  \
                                     dst + (o * out_h + j) * out_w, out_w);                  \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }

DEFINE_RESIZE_LOOPS(float, f32, weight_f)
DEFINE_RESIZE_LOOPS(double, f64, weight_d)

/* The last two axes only (NCHW images): the fused 2-D sweep. */
static ld_status resize_last_two(ld_kernel_ctx *ctx, const resize_plan *p,
                                 const axis_table *tables, bool is_double, const void *src,
                                 void *dst)
{
    const resize_state *s = ctx->state;
    int r = p->rank;
    int64_t outer = 1;
    for (int d = 0; d < r - 2; d++)
        outer *= p->in[d];
    int threads = ctx->threads > 0 ? ctx->threads : 1;
    size_t n = (size_t)threads * (size_t)tables[r - 1].taps * (size_t)p->out[r - 1];
    void *cache = malloc((n ? n : 1) * (is_double ? sizeof(double) : sizeof(float)));
    if (!cache)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    if (is_double)
        resize_2d_f64(src, dst, outer, p->in[r - 2], p->in[r - 1], &tables[r - 2], p->out[r - 2],
                      &tables[r - 1], p->out[r - 1], s->extrapolation, cache, threads);
    else
        resize_2d_f32(src, dst, outer, p->in[r - 2], p->in[r - 1], &tables[r - 2], p->out[r - 2],
                      &tables[r - 1], p->out[r - 1], s->extrapolation, cache, threads);
    free(cache);
    return LD_OK;
}

/* Runs the passes for every non-identity axis, innermost first, from src
 * (float32 or float64, shape p->in) into dst (shape p->out). */
ld_status ld_resize_separable(ld_kernel_ctx *ctx, const resize_plan *p,
                              const axis_table *tables, bool is_double, const void *src,
                              void *dst)
{
    const resize_state *s = ctx->state;
    size_t elem = is_double ? sizeof(double) : sizeof(float);
    int axes[LD_MAX_RANK], n_axes = 0;
    for (int d = p->rank - 1; d >= 0; d--)
        if (!tables[d].identity)
            axes[n_axes++] = d;
    int64_t cur[LD_MAX_RANK], in_count = 1, max_tmp = 0;
    for (int d = 0; d < p->rank; d++) {
        cur[d] = p->in[d];
        in_count *= p->in[d];
    }
    if (n_axes == 0) {
        if (in_count)
            memcpy(dst, src, (size_t)in_count * elem);
        return LD_OK;
    }
    if (n_axes == 2 && axes[0] == p->rank - 1 && axes[1] == p->rank - 2)
        return resize_last_two(ctx, p, tables, is_double, src, dst);
    /* Size of the largest intermediate result. */
    for (int a = 0; a + 1 < n_axes; a++) {
        cur[axes[a]] = p->out[axes[a]];
        int64_t count = 1;
        for (int d = 0; d < p->rank; d++)
            if (__builtin_mul_overflow(count, cur[d], &count) || count > INT64_MAX / 8)
                return ld_kernel_fail(ctx, LD_ERR_NOMEM, "intermediate result is too large");
        if (count > max_tmp)
            max_tmp = count;
    }
    void *tmp[2] = {NULL, NULL};
    if (n_axes > 1) {
        tmp[0] = malloc((size_t)(max_tmp ? max_tmp : 1) * elem);
        tmp[1] = n_axes > 2 ? malloc((size_t)(max_tmp ? max_tmp : 1) * elem) : NULL;
        if (!tmp[0] || (n_axes > 2 && !tmp[1])) {
            free(tmp[0]);
            free(tmp[1]);
            return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        }
    }
    for (int d = 0; d < p->rank; d++)
        cur[d] = p->in[d];
    const void *from = src;
    for (int a = 0; a < n_axes; a++) {
        int d = axes[a];
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < d; k++)
            outer *= cur[k];
        for (int k = d + 1; k < p->rank; k++)
            inner *= cur[k];
        void *to = a + 1 == n_axes ? dst : tmp[a % 2];
        if (is_double)
            resize_pass_f64(from, to, outer, cur[d], p->out[d], inner, &tables[d],
                            s->extrapolation, ctx->threads);
        else
            resize_pass_f32(from, to, outer, cur[d], p->out[d], inner, &tables[d],
                            s->extrapolation, ctx->threads);
        cur[d] = p->out[d];
        from = to;
    }
    free(tmp[0]);
    free(tmp[1]);
    return LD_OK;
}

/* Integer data: interpolate in double, round to nearest even, saturate. */
ld_status ld_resize_integer(ld_kernel_ctx *ctx, const resize_plan *p, const axis_table *tables)
{
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    if (!ld_dtype_is_signed_int(x->dtype) && !ld_dtype_is_unsigned_int(x->dtype))
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported for "
                              "linear or cubic resize", ld_dtype_name(x->dtype));
    double *in = malloc((size_t)(x->count ? x->count : 1) * sizeof *in);
    double *out = malloc((size_t)(y->count ? y->count : 1) * sizeof *out);
    ld_status st = LD_OK;
    if (!in || !out) {
        st = ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < x->count; i++)
        in[i] = ld_tensor_get_double(x, i);
    st = ld_resize_separable(ctx, p, tables, true, in, out);
    for (int64_t i = 0; st == LD_OK && i < y->count; i++)
        store_saturated(y->dtype, y->data, i, out[i]);
out:
    free(in);
    free(out);
    return st;
}
