/* layerdiff — signal ops of opset 17: DFT, STFT, the Hann / Hamming /
 * Blackman windows and MelWeightMatrix.
 *
 * Transforms accumulate in double (a DFT is a long reduction whose error
 * grows with its length; the ONNX reference uses numpy's double FFT) and
 * round once to the data type: radix-2 FFT for power-of-two lengths, a
 * direct DFT with an exact twiddle table otherwise. Complex values are the
 * last dimension (2: real, imaginary; 1: real input). */
#include <math.h>
#include <stdint.h>

#include "backends/kernels/kernel_util.h"
#include "backends/kernels/kernels.h"
#include "layerdiff/round.h"

#define SIGNAL_PI 3.14159265358979323846
#define SIGNAL_PARALLEL_MIN 4096 /* complex multiply-adds below which one thread runs */

/* Reads a scalar (rank 0 or one element) integer input. */
static ld_status scalar_int(ld_kernel_ctx *ctx, int i, const char *what, int64_t *out)
{
    const ld_tensor *t = ld_kin(ctx, i);
    if (!t)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input %s is missing", what);
    if ((t->dtype != LD_DTYPE_INT32 && t->dtype != LD_DTYPE_INT64) || t->count != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s must be one int32 or int64 value, got %s "
                              "with %lld values", what, ld_dtype_name(t->dtype),
                              (long long)t->count);
    ld_status st = ld_krequire_values(ctx, t, what);
    if (st != LD_OK)
        return st;
    *out = t->dtype == LD_DTYPE_INT32 ? ((const int32_t *)t->data)[0]
                                      : ((const int64_t *)t->data)[0];
    return LD_OK;
}

/* --- the transform -------------------------------------------------------------------- */

/* A length-n transform: twiddles and, for powers of two, the bit reversal. */
typedef struct dft_plan {
    int64_t n;
    bool inverse;
    bool radix2;
    double *cos_table; /* cos(2 pi m / n), m < n */
    double *sin_table;
} dft_plan;

static void dft_plan_free(dft_plan *p)
{
    free(p->cos_table);
    free(p->sin_table);
    p->cos_table = p->sin_table = NULL;
}

static ld_status dft_plan_make(ld_kernel_ctx *ctx, int64_t n, bool inverse, dft_plan *p)
{
    p->n = n;
    p->inverse = inverse;
    p->radix2 = n > 0 && (n & (n - 1)) == 0;
    p->cos_table = malloc((size_t)(n ? n : 1) * sizeof *p->cos_table);
    p->sin_table = malloc((size_t)(n ? n : 1) * sizeof *p->sin_table);
    if (!p->cos_table || !p->sin_table) {
        dft_plan_free(p);
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    }
    for (int64_t m = 0; m < n; m++) {
        double angle = 2 * SIGNAL_PI * (double)m / (double)n;
        p->cos_table[m] = cos(angle);
        p->sin_table[m] = sin(angle);
    }
    return LD_OK;
}

/* In place on re/im (length n); `work` holds 2n doubles for the direct DFT.
 * Forward: X[k] = sum x[j] e^{-2 pi i jk/n}; inverse: e^{+...} / n. */
static void dft_run(const dft_plan *p, double *re, double *im, double *work)
{
    int64_t n = p->n;
    double sign = p->inverse ? 1.0 : -1.0;
    if (p->radix2) {
        for (int64_t i = 1, j = 0; i < n; i++) { /* bit reversal */
            int64_t bit = n >> 1;
            for (; j & bit; bit >>= 1)
                j ^= bit;
            j ^= bit;
            if (i < j) {
                double t = re[i]; re[i] = re[j]; re[j] = t;
                t = im[i]; im[i] = im[j]; im[j] = t;
            }
        }
        for (int64_t len = 2; len <= n; len <<= 1) {
            int64_t step = n / len;
            for (int64_t i = 0; i < n; i += len) {
                for (int64_t k = 0; k < len / 2; k++) {
                    double wr = p->cos_table[k * step], wi = sign * p->sin_table[k * step];
                    int64_t a = i + k, b = a + len / 2;
                    double tr = re[b] * wr - im[b] * wi, ti = re[b] * wi + im[b] * wr;
                    re[b] = re[a] - tr;
                    im[b] = im[a] - ti;
                    re[a] += tr;
                    im[a] += ti;
                }
            }
        }
    } else {
        double *wr = work, *wi = work + n;
        for (int64_t k = 0; k < n; k++) {
            double sr = 0, si = 0;
            for (int64_t j = 0, m = 0; j < n; j++) {
                double c = p->cos_table[m], s = sign * p->sin_table[m];
                sr += re[j] * c - im[j] * s;
                si += re[j] * s + im[j] * c;
                m += k;
                if (m >= n)
                    m -= n;
            }
            wr[k] = sr;
            wi[k] = si;
        }
        memcpy(re, wr, (size_t)n * sizeof *re);
        memcpy(im, wi, (size_t)n * sizeof *im);
    }
    if (p->inverse && n > 0)
        for (int64_t k = 0; k < n; k++) {
            re[k] /= (double)n;
            im[k] /= (double)n;
        }
}

static inline double load_real(const void *data, bool is_double, int64_t i)
{
    return is_double ? ((const double *)data)[i] : (double)((const float *)data)[i];
}

static inline void store_real(void *data, bool is_double, int64_t i, double v)
{
    if (is_double)
        ((double *)data)[i] = v;
    else
        ((float *)data)[i] = (float)v;
}

/* --- DFT (17) ------------------------------------------------------------------------- */

typedef struct dft_geometry {
    int axis;
    int64_t outer, length, inner; /* signal lines: outer x length (along axis) x inner */
    int64_t n_fft, out_len;
    int64_t channels;             /* 1 real, 2 complex */
    bool inverse;
} dft_geometry;

static ld_status dft_geometry_make(ld_kernel_ctx *ctx, dft_geometry *g)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st != LD_OK)
        return st;
    if (ctx->node->opset >= 20) /* the axis moved from an attribute to an input */
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "DFT of opset %lld is not supported "
                              "(only 17)", (long long)ctx->node->opset);
    const ld_tensor *x = ctx->inputs[0];
    int rank = x->shape.rank;
    if (rank < 2 || (x->shape.dims[rank - 1] != 1 && x->shape.dims[rank - 1] != 2))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "input must be [batch, signal dims..., 1 or 2], "
                              "got rank %d", rank);
    int64_t axis_attr, inverse, onesided;
    st = ld_node_attr_int(ctx->node, "axis", 1, &axis_attr, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "inverse", 0, &inverse, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "onesided", 0, &onesided, ctx->err);
    /* The last dimension holds the complex parts, so axes count over rank - 1. */
    if (st == LD_OK)
        st = ld_normalize_axis(ctx, axis_attr, rank - 1, &g->axis);
    if (st != LD_OK)
        return st;
    if (onesided && inverse)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "onesided inverse DFT is not supported");
    g->inverse = inverse != 0;
    g->channels = x->shape.dims[rank - 1];
    g->length = x->shape.dims[g->axis];
    g->outer = g->inner = 1;
    for (int d = 0; d < g->axis; d++)
        g->outer *= x->shape.dims[d];
    for (int d = g->axis + 1; d < rank - 1; d++)
        g->inner *= x->shape.dims[d];
    g->n_fft = g->length;
    if (ld_kin(ctx, 1)) {
        st = scalar_int(ctx, 1, "dft_length", &g->n_fft);
        if (st != LD_OK)
            return st;
        if (g->n_fft < 1)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "dft_length %lld must be positive",
                                  (long long)g->n_fft);
    }
    g->out_len = onesided ? g->n_fft / 2 + 1 : g->n_fft;
    return LD_OK;
}

static ld_status dft_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    dft_geometry g = {0};
    ld_status st = dft_geometry_make(ctx, &g);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    if (x->dtype != LD_DTYPE_FLOAT32 && x->dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(x->dtype));
    outs[0].dtype = x->dtype;
    outs[0].shape = x->shape;
    outs[0].shape.dims[g.axis] = g.out_len;
    outs[0].shape.dims[x->shape.rank - 1] = 2;
    return LD_OK;
}

static ld_status dft_compute(ld_kernel_ctx *ctx)
{
    dft_geometry g = {0};
    ld_status st = dft_geometry_make(ctx, &g);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    bool is_double = x->dtype == LD_DTYPE_FLOAT64;
    dft_plan plan;
    st = dft_plan_make(ctx, g.n_fft, g.inverse, &plan);
    if (st != LD_OK)
        return st;
    int64_t lines = g.outer * g.inner, n = g.n_fft, used = g.length < n ? g.length : n;
    bool failed = false;
    bool par = lines > 1 && lines * n * (plan.radix2 ? 8 : n) > SIGNAL_PARALLEL_MIN;
#pragma omp parallel num_threads(ctx->threads) if (par)
    {
        double *buf = malloc((size_t)n * 4 * sizeof *buf); /* re, im, work[2n] */
        if (!buf) {
#pragma omp atomic write
            failed = true;
        }
#pragma omp for schedule(static)
        for (int64_t line = 0; line < lines; line++) {
            if (!buf)
                continue;
            int64_t o = line / g.inner, i = line % g.inner;
            double *re = buf, *im = buf + n;
            for (int64_t j = 0; j < n; j++) {
                int64_t at = ((o * g.length + j) * g.inner + i) * g.channels;
                re[j] = j < used ? load_real(x->data, is_double, at) : 0;
                im[j] = j < used && g.channels == 2 ? load_real(x->data, is_double, at + 1) : 0;
            }
            dft_run(&plan, re, im, buf + 2 * n);
            for (int64_t k = 0; k < g.out_len; k++) {
                int64_t at = ((o * g.out_len + k) * g.inner + i) * 2;
                store_real(y->data, is_double, at, re[k]);
                store_real(y->data, is_double, at + 1, im[k]);
            }
        }
        free(buf);
    }
    dft_plan_free(&plan);
    if (failed)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    return LD_OK;
}

/* --- STFT (17) ------------------------------------------------------------------------ */

typedef struct stft_geometry {
    int64_t batch, length, channels;
    int64_t step, frame_length, frames, bins;
    const ld_tensor *window; /* NULL: rectangular */
} stft_geometry;

static ld_status stft_geometry_make(ld_kernel_ctx *ctx, stft_geometry *g)
{
    ld_status st = ld_krequire(ctx, 0);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    if (x->shape.rank != 3 || (x->shape.dims[2] != 1 && x->shape.dims[2] != 2))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "signal must be [batch, length, 1 or 2]");
    g->batch = x->shape.dims[0];
    g->length = x->shape.dims[1];
    g->channels = x->shape.dims[2];
    st = scalar_int(ctx, 1, "frame_step", &g->step);
    if (st != LD_OK)
        return st;
    g->window = ld_kin(ctx, 2);
    g->frame_length = -1;
    if (g->window) {
        if (g->window->shape.rank != 1 || g->window->dtype != x->dtype)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "window must be a 1-D %s tensor",
                                  ld_dtype_name(x->dtype));
        g->frame_length = g->window->count;
    }
    if (ld_kin(ctx, 3)) {
        int64_t fl = 0;
        st = scalar_int(ctx, 3, "frame_length", &fl);
        if (st != LD_OK)
            return st;
        if (g->window && fl != g->frame_length)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "frame_length %lld differs from the window "
                                  "length %lld", (long long)fl, (long long)g->frame_length);
        g->frame_length = fl;
    }
    if (g->frame_length < 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "needs a window or a frame_length");
    if (g->step < 1 || g->frame_length < 1 || g->frame_length > g->length)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "frame_step %lld / frame_length %lld do not fit "
                              "a signal of length %lld", (long long)g->step,
                              (long long)g->frame_length, (long long)g->length);
    int64_t onesided;
    st = ld_node_attr_int(ctx->node, "onesided", 1, &onesided, ctx->err);
    if (st != LD_OK)
        return st;
    g->frames = 1 + (g->length - g->frame_length) / g->step;
    g->bins = onesided ? g->frame_length / 2 + 1 : g->frame_length;
    return LD_OK;
}

static ld_status stft_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    stft_geometry g = {0};
    ld_status st = stft_geometry_make(ctx, &g);
    if (st != LD_OK)
        return st;
    ld_dtype dtype = ctx->inputs[0]->dtype;
    if (dtype != LD_DTYPE_FLOAT32 && dtype != LD_DTYPE_FLOAT64)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "dtype %s is not supported",
                              ld_dtype_name(dtype));
    outs[0].dtype = dtype;
    outs[0].shape = (ld_shape){.rank = 4, .dims = {g.batch, g.frames, g.bins, 2}};
    return LD_OK;
}

static ld_status stft_compute(ld_kernel_ctx *ctx)
{
    stft_geometry g = {0};
    ld_status st = stft_geometry_make(ctx, &g);
    if (st != LD_OK)
        return st;
    const ld_tensor *x = ctx->inputs[0];
    ld_tensor *y = ctx->outputs[0];
    bool is_double = x->dtype == LD_DTYPE_FLOAT64;
    dft_plan plan;
    st = dft_plan_make(ctx, g.frame_length, false, &plan);
    if (st != LD_OK)
        return st;
    int64_t n = g.frame_length, jobs = g.batch * g.frames;
    bool failed = false;
    bool par = jobs > 1 && jobs * n * (plan.radix2 ? 8 : n) > SIGNAL_PARALLEL_MIN;
#pragma omp parallel num_threads(ctx->threads) if (par)
    {
        double *buf = malloc((size_t)n * 4 * sizeof *buf);
        if (!buf) {
#pragma omp atomic write
            failed = true;
        }
#pragma omp for schedule(static)
        for (int64_t job = 0; job < jobs; job++) {
            if (!buf)
                continue;
            int64_t b = job / g.frames, f = job % g.frames;
            double *re = buf, *im = buf + n;
            for (int64_t j = 0; j < n; j++) {
                int64_t at = (b * g.length + f * g.step + j) * g.channels;
                double w = g.window ? load_real(g.window->data, is_double, j) : 1.0;
                re[j] = load_real(x->data, is_double, at) * w;
                im[j] = g.channels == 2 ? load_real(x->data, is_double, at + 1) * w : 0;
            }
            dft_run(&plan, re, im, buf + 2 * n);
            for (int64_t k = 0; k < g.bins; k++) {
                int64_t at = ((b * g.frames + f) * g.bins + k) * 2;
                store_real(y->data, is_double, at, re[k]);
                store_real(y->data, is_double, at + 1, im[k]);
            }
        }
        free(buf);
    }
    dft_plan_free(&plan);
    if (failed)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    return LD_OK;
}

/* --- generated tensors: windows and the mel matrix ------------------------------------ */

static ld_status output_datatype(ld_kernel_ctx *ctx, ld_dtype *out)
{
    int64_t v;
    ld_status st = ld_node_attr_int(ctx->node, "output_datatype", LD_DTYPE_FLOAT32, &v, ctx->err);
    if (st != LD_OK)
        return st;
    ld_dtype d = (ld_dtype)v;
    if (v < 0 || v >= LD_DTYPE_COUNT_ || !ld_dtype_is_supported(d) || d == LD_DTYPE_BOOL)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "output_datatype %lld is not a numeric type",
                              (long long)v);
    *out = d;
    return LD_OK;
}

/* Stores v as element i of t, converting like a C cast (integers truncate
 * toward zero, saturating at the type's range). */
static void store_as(ld_tensor *t, int64_t i, double v)
{
    float f = (float)v;
    void *d = t->data;
    switch (t->dtype) {
    case LD_DTYPE_FLOAT32: ((float *)d)[i] = (float)v; break;
    case LD_DTYPE_FLOAT64: ((double *)d)[i] = v; break;
    case LD_DTYPE_FLOAT16: ld_convert_fp32_to_fp16(&f, (ld_fp16 *)d + i, 1); break;
    case LD_DTYPE_BFLOAT16: ld_convert_fp32_to_bf16(&f, (ld_bf16 *)d + i, 1); break;
    case LD_DTYPE_INT8: ((int8_t *)d)[i] = (int8_t)fmax(-128, fmin(127, v)); break;
    case LD_DTYPE_UINT8: ((uint8_t *)d)[i] = (uint8_t)fmax(0, fmin(255, v)); break;
    case LD_DTYPE_INT16: ((int16_t *)d)[i] = (int16_t)fmax(-32768, fmin(32767, v)); break;
    case LD_DTYPE_UINT16: ((uint16_t *)d)[i] = (uint16_t)fmax(0, fmin(65535, v)); break;
    case LD_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)fmax(INT32_MIN, fmin(INT32_MAX, v)); break;
    case LD_DTYPE_UINT32: ((uint32_t *)d)[i] = (uint32_t)fmax(0, fmin(UINT32_MAX, v)); break;
    case LD_DTYPE_INT64: ((int64_t *)d)[i] = (int64_t)fmax(-9.2e18, fmin(9.2e18, v)); break;
    case LD_DTYPE_UINT64: ((uint64_t *)d)[i] = (uint64_t)fmax(0, fmin(1.8e19, v)); break;
    default: break;
    }
}

static ld_status window_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    int64_t size = 0;
    ld_status st = scalar_int(ctx, 0, "size", &size);
    if (st == LD_OK)
        st = output_datatype(ctx, &outs[0].dtype);
    if (st != LD_OK)
        return st;
    if (size < 0)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "size %lld is negative", (long long)size);
    outs[0].shape = (ld_shape){.rank = 1, .dims = {size}};
    return LD_OK;
}

/* Generalised cosine window a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), with
 * N = size (periodic) or size - 1 (symmetric). */
static ld_status window_compute(ld_kernel_ctx *ctx)
{
    const char *op = ctx->node->op_type;
    double a0, a1, a2 = 0;
    if (strcmp(op, "HannWindow") == 0) {
        a0 = 0.5;
        a1 = 0.5;
    } else if (strcmp(op, "HammingWindow") == 0) {
        a0 = 25.0 / 46.0;
        a1 = 1 - a0;
    } else {
        a0 = 0.42;
        a1 = 0.5;
        a2 = 0.08;
    }
    int64_t periodic;
    ld_status st = ld_node_attr_int(ctx->node, "periodic", 1, &periodic, ctx->err);
    if (st != LD_OK)
        return st;
    ld_tensor *y = ctx->outputs[0];
    double n_div = (double)(periodic ? y->count : y->count - 1);
    for (int64_t i = 0; i < y->count; i++) {
        double v = 1.0; /* a window of one point (symmetric: 0/0) is 1, as scipy's */
        if (n_div > 0) {
            double angle = 2 * SIGNAL_PI * (double)i / n_div;
            v = a0 - a1 * cos(angle) + a2 * cos(2 * angle);
        }
        store_as(y, i, v);
    }
    return LD_OK;
}

typedef struct mel_params {
    int64_t mel_bins, dft_length, sample_rate;
    double lower_hz, upper_hz;
} mel_params;

static ld_status scalar_float(ld_kernel_ctx *ctx, int i, const char *what, double *out)
{
    const ld_tensor *t = ld_kin(ctx, i);
    if (!t || !ld_dtype_is_float(t->dtype) || t->count != 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "%s must be one float value", what);
    ld_status st = ld_krequire_values(ctx, t, what);
    if (st != LD_OK)
        return st;
    *out = ld_tensor_get_double(t, 0);
    return LD_OK;
}

static ld_status mel_params_read(ld_kernel_ctx *ctx, mel_params *m)
{
    ld_status st = scalar_int(ctx, 0, "num_mel_bins", &m->mel_bins);
    if (st == LD_OK)
        st = scalar_int(ctx, 1, "dft_length", &m->dft_length);
    if (st == LD_OK)
        st = scalar_int(ctx, 2, "sample_rate", &m->sample_rate);
    if (st == LD_OK)
        st = scalar_float(ctx, 3, "lower_edge_hertz", &m->lower_hz);
    if (st == LD_OK)
        st = scalar_float(ctx, 4, "upper_edge_hertz", &m->upper_hz);
    if (st != LD_OK)
        return st;
    if (m->mel_bins < 1 || m->dft_length < 1 || m->sample_rate < 1 || m->mel_bins > (1 << 24))
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "num_mel_bins, dft_length and sample_rate "
                              "must be positive");
    return LD_OK;
}

static ld_status mel_infer(ld_kernel_ctx *ctx, ld_output_desc *outs)
{
    mel_params m = {0};
    ld_status st = mel_params_read(ctx, &m);
    if (st == LD_OK)
        st = output_datatype(ctx, &outs[0].dtype);
    outs[0].shape = (ld_shape){.rank = 2, .dims = {m.dft_length / 2 + 1, m.mel_bins}};
    return st;
}

/* Triangular filters between mel-spaced DFT bins, as the ONNX reference
 * (including its step of (high - low) / (num_mel_bins + 2)). Filter points
 * outside the spectrogram are left out. */
static ld_status mel_compute(ld_kernel_ctx *ctx)
{
    mel_params m = {0};
    ld_status st = mel_params_read(ctx, &m);
    if (st != LD_OK)
        return st;
    ld_tensor *y = ctx->outputs[0];
    int64_t spec_bins = m.dft_length / 2 + 1, n_points = m.mel_bins + 2;
    int64_t *bins = malloc((size_t)n_points * sizeof *bins);
    if (!bins)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    double low_mel = 2595 * log10(1 + m.lower_hz / 700);
    double high_mel = 2595 * log10(1 + m.upper_hz / 700);
    double step = (high_mel - low_mel) / (double)n_points;
    for (int64_t i = 0; i < n_points; i++) {
        double hz = 700 * (pow(10, ((double)i * step + low_mel) / 2595) - 1);
        bins[i] = (int64_t)floor((double)(m.dft_length + 1) * hz / (double)m.sample_rate);
    }
    for (int64_t i = 0; i < y->count; i++)
        store_as(y, i, 0);
    for (int64_t i = 0; i < m.mel_bins; i++) {
        int64_t lo = bins[i], center = bins[i + 1], hi = bins[i + 2];
        if (center == lo) {
            if (center >= 0 && center < spec_bins)
                store_as(y, center * m.mel_bins + i, 1);
        } else {
            for (int64_t j = lo; j <= center; j++)
                if (j >= 0 && j < spec_bins)
                    store_as(y, j * m.mel_bins + i, (double)(j - lo) / (double)(center - lo));
        }
        for (int64_t j = center; hi > center && j < hi; j++)
            if (j >= 0 && j < spec_bins)
                store_as(y, j * m.mel_bins + i, (double)(hi - j) / (double)(hi - center));
    }
    free(bins);
    return LD_OK;
}

static const ld_kernel signal_kernels[] = {
    {"", "BlackmanWindow", 17, 0, NULL, window_infer, window_compute, NULL, NULL},
    {"", "DFT", 17, LD_KERNEL_WIDEN_HALF, NULL, dft_infer, dft_compute, NULL, NULL},
    {"", "HammingWindow", 17, 0, NULL, window_infer, window_compute, NULL, NULL},
    {"", "HannWindow", 17, 0, NULL, window_infer, window_compute, NULL, NULL},
    {"", "MelWeightMatrix", 17, 0, NULL, mel_infer, mel_compute, NULL, NULL},
    {"", "STFT", 17, LD_KERNEL_WIDEN_HALF, NULL, stft_infer, stft_compute, NULL, NULL},
};

LD_KERNEL_FAMILY(signal);
