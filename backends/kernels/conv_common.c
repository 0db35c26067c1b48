/* layerdiff — window geometry, scratch cache and im2col (see conv_common.h). */
#include "backends/blas.h"
#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_direct.h"
#include "backends/pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- attributes ---------------------------------------------------------------------- */

static ld_status parse_ints(ld_kernel_ctx *ctx, const char *name, int64_t min,
                            const int64_t **out, size_t *n)
{
    ld_status st = ld_node_attr_ints(ctx->node, name, out, n, ctx->err);
    if (st != LD_OK)
        return st;
    if (*n > LD_MAX_RANK * 2)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute '%s' has %zu entries", name, *n);
    for (size_t i = 0; i < *n; i++)
        if ((*out)[i] < min)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute '%s'[%zu] = %lld must be >= %lld",
                                  name, i, (long long)(*out)[i], (long long)min);
    return LD_OK;
}

static ld_status parse_auto_pad(ld_kernel_ctx *ctx, ld_auto_pad *out)
{
    const char *s = NULL;
    ld_status st = ld_node_attr_string(ctx->node, "auto_pad", "NOTSET", &s, ctx->err);
    if (st != LD_OK)
        return st;
    if (strcmp(s, "NOTSET") == 0 || *s == '\0')
        *out = LD_AUTO_PAD_NOTSET;
    else if (strcmp(s, "SAME_UPPER") == 0)
        *out = LD_AUTO_PAD_SAME_UPPER;
    else if (strcmp(s, "SAME_LOWER") == 0)
        *out = LD_AUTO_PAD_SAME_LOWER;
    else if (strcmp(s, "VALID") == 0)
        *out = LD_AUTO_PAD_VALID;
    else
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "auto_pad '%s' is not one of NOTSET, SAME_UPPER, "
                              "SAME_LOWER, VALID", s);
    return LD_OK;
}

ld_status ld_window_attrs_parse(ld_kernel_ctx *ctx, ld_window_attrs *a)
{
    memset(a, 0, sizeof *a);
    int64_t ceil_mode = 0;
    ld_status st = parse_ints(ctx, "kernel_shape", 1, &a->kernel, &a->n_kernel);
    if (st == LD_OK)
        st = parse_ints(ctx, "strides", 1, &a->strides, &a->n_strides);
    if (st == LD_OK)
        st = parse_ints(ctx, "dilations", 1, &a->dilations, &a->n_dilations);
    if (st == LD_OK)
        st = parse_ints(ctx, "pads", 0, &a->pads, &a->n_pads);
    if (st == LD_OK)
        st = parse_ints(ctx, "output_padding", 0, &a->output_padding, &a->n_output_padding);
    if (st == LD_OK)
        st = parse_ints(ctx, "output_shape", 0, &a->output_shape, &a->n_output_shape);
    if (st == LD_OK)
        st = parse_auto_pad(ctx, &a->auto_pad);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "ceil_mode", 0, &ceil_mode, ctx->err);
    if (st == LD_OK)
        st = ld_node_attr_int(ctx->node, "group", 1, &a->group, ctx->err);
    if (st != LD_OK)
        return st;
    if (a->group < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "group = %lld must be >= 1", (long long)a->group);
    a->ceil_mode = ceil_mode != 0;
    return LD_OK;
}

ld_status ld_window_check_len(ld_kernel_ctx *ctx, const char *name, size_t have, size_t want)
{
    if (have == 0 || have == want)
        return LD_OK;
    return ld_kernel_fail(ctx, LD_ERR_INPUT, "attribute '%s' has %zu entries, expected %zu for "
                          "this input's spatial rank", name, have, want);
}

/* --- geometry ------------------------------------------------------------------------- */

/* Sizes up to 2^40 keep every product below int64 overflow. */
#define WINDOW_MAX_EXTENT ((int64_t)1 << 40)

void ld_window_geom_finish(ld_window_geom *g)
{
    /* Shift nd dims to the end and fill leading dims with the identity. */
    int shift = LD_WINDOW_MAX_DIMS - g->nd;
    if (shift > 0) {
        for (int i = g->nd - 1; i >= 0; i--) {
            g->in[i + shift] = g->in[i];
            g->out[i + shift] = g->out[i];
            g->k[i + shift] = g->k[i];
            g->s[i + shift] = g->s[i];
            g->d[i + shift] = g->d[i];
            g->pb[i + shift] = g->pb[i];
            g->pe[i + shift] = g->pe[i];
        }
        for (int i = 0; i < shift; i++) {
            g->in[i] = g->out[i] = g->k[i] = g->s[i] = g->d[i] = 1;
            g->pb[i] = g->pe[i] = 0;
        }
    }
    g->in_size = g->in[0] * g->in[1] * g->in[2];
    g->out_size = g->out[0] * g->out[1] * g->out[2];
    g->k_size = g->k[0] * g->k[1] * g->k[2];
}

static ld_status forward_dim(ld_kernel_ctx *ctx, const ld_window_attrs *a, ld_window_kind kind,
                             int i, int nd, ld_window_geom *g)
{
    int64_t in = g->in[i], k = g->k[i], s = g->s[i], d = g->d[i];
    if (k > WINDOW_MAX_EXTENT || d > WINDOW_MAX_EXTENT || s > WINDOW_MAX_EXTENT ||
        in > WINDOW_MAX_EXTENT)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "spatial dim %d: kernel %lld, dilation %lld or "
                              "stride %lld is too large", i, (long long)k, (long long)d,
                              (long long)s);
    int64_t ek = (k - 1) * d + 1;
    if (a->auto_pad == LD_AUTO_PAD_SAME_UPPER || a->auto_pad == LD_AUTO_PAD_SAME_LOWER) {
        g->out[i] = (in + s - 1) / s;
        int64_t total = (g->out[i] - 1) * s + ek - in;
        if (total < 0)
            total = 0;
        g->pb[i] = a->auto_pad == LD_AUTO_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        g->pe[i] = total - g->pb[i];
    } else {
        g->pb[i] = a->auto_pad == LD_AUTO_PAD_NOTSET && a->n_pads ? a->pads[i] : 0;
        g->pe[i] = a->auto_pad == LD_AUTO_PAD_NOTSET && a->n_pads ? a->pads[i + nd] : 0;
        if (g->pb[i] > WINDOW_MAX_EXTENT || g->pe[i] > WINDOW_MAX_EXTENT)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "pads of spatial dim %d are too large", i);
        int64_t span = in + g->pb[i] + g->pe[i] - ek;
        if (span < 0)
            return ld_kernel_fail(ctx, LD_ERR_INPUT,
                                  "spatial dim %d: the window (kernel %lld, dilation %lld) is "
                                  "larger than the padded input (%lld + pads %lld + %lld)", i,
                                  (long long)k, (long long)d, (long long)in, (long long)g->pb[i],
                                  (long long)g->pe[i]);
        if (kind == LD_WINDOW_POOL && a->ceil_mode) {
            g->out[i] = (span + s - 1) / s + 1;
            if ((g->out[i] - 1) * s >= in + g->pb[i])
                g->out[i]--;
        } else {
            g->out[i] = span / s + 1;
        }
    }
    return LD_OK;
}

ld_status ld_window_geom_forward(ld_kernel_ctx *ctx, const ld_window_attrs *a, int nd,
                                 const int64_t *in_dims, const int64_t *kernel,
                                 ld_window_kind kind, ld_window_geom *g)
{
    memset(g, 0, sizeof *g);
    if (nd < 1)
        return ld_kernel_fail(ctx, LD_ERR_INPUT, "the input needs at least one spatial dimension "
                              "(rank >= 3)");
    if (nd > LD_WINDOW_MAX_DIMS)
        return ld_kernel_fail(ctx, LD_ERR_UNSUPPORTED, "%d spatial dimensions are not supported "
                              "(at most %d)", nd, LD_WINDOW_MAX_DIMS);
    ld_status st = ld_window_check_len(ctx, "strides", a->n_strides, (size_t)nd);
    if (st == LD_OK)
        st = ld_window_check_len(ctx, "dilations", a->n_dilations, (size_t)nd);
    if (st == LD_OK)
        st = ld_window_check_len(ctx, "pads", a->n_pads, 2 * (size_t)nd);
    if (st != LD_OK)
        return st;
    g->nd = nd;
    for (int i = 0; i < nd; i++) {
        g->in[i] = in_dims[i];
        g->k[i] = kernel[i];
        g->s[i] = a->n_strides ? a->strides[i] : 1;
        g->d[i] = a->n_dilations ? a->dilations[i] : 1;
        if (g->k[i] < 1)
            return ld_kernel_fail(ctx, LD_ERR_INPUT, "kernel size %lld in spatial dim %d must be "
                                  ">= 1", (long long)g->k[i], i);
        st = forward_dim(ctx, a, kind, i, nd, g);
        if (st != LD_OK)
            return st;
    }
    ld_window_geom_finish(g);
    return LD_OK;
}

/* --- scratch cache ------------------------------------------------------------------- */

#define SCRATCH_SLOTS 8
#define SCRATCH_MIN ((size_t)2 << 20)

typedef struct scratch_slot {
    void *p;
    size_t cap;
    bool in_use;
} scratch_slot;

static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;
static scratch_slot scratch_slots[SCRATCH_SLOTS];
static int scratch_users;

void *ld_scratch_get(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    pthread_mutex_lock(&scratch_lock);
    int best = -1, largest = -1, empty = -1;
    for (int i = 0; i < SCRATCH_SLOTS; i++) {
        scratch_slot *s = &scratch_slots[i];
        if (s->in_use)
            continue;
        if (!s->p) {
            if (empty < 0)
                empty = i;
            continue;
        }
        if (s->cap >= bytes && (best < 0 || s->cap < scratch_slots[best].cap))
            best = i;
        if (largest < 0 || s->cap > scratch_slots[largest].cap)
            largest = i;
    }
    void *p = NULL;
    if (best < 0) {
        /* Grow the largest idle buffer (its contents do not matter), or fill
         * an empty slot; with every slot busy, hand out one outside the cache.
         * A cached buffer grows to at least twice its size and SCRATCH_MIN:
         * each growth is fresh memory to fault in (PaddleOCR det's
         * convolutions asked for ten sizes from 50 KB to 1.4 MB, one growth
         * each), and SCRATCH_MIN is one huge page, which the first touch
         * faults in whole anyway. */
        int slot = largest >= 0 ? largest : empty;
        size_t cap = bytes;
        if (slot >= 0) {
            size_t twice = scratch_slots[slot].cap * 2;
            cap = cap > twice ? cap : twice;
            cap = cap > SCRATCH_MIN ? cap : SCRATCH_MIN;
        }
        void *fresh = ld_buffer_alloc(cap); /* huge pages: see backends/pool.h */
        if (fresh && slot >= 0) {
            ld_buffer_free(scratch_slots[slot].p);
            scratch_slots[slot] = (scratch_slot){fresh, cap, false};
            best = slot;
        } else {
            p = fresh;
        }
    }
    if (best >= 0) {
        scratch_slots[best].in_use = true;
        p = scratch_slots[best].p;
    }
    pthread_mutex_unlock(&scratch_lock);
    return p;
}

void ld_scratch_put(void *buffer)
{
    if (!buffer)
        return;
    pthread_mutex_lock(&scratch_lock);
    bool cached = false;
    for (int i = 0; i < SCRATCH_SLOTS; i++)
        if (scratch_slots[i].p == buffer) {
            scratch_slots[i].in_use = false;
            cached = true;
        }
    if (!cached)
        ld_buffer_free(buffer);
    if (scratch_users == 0)
        for (int i = 0; i < SCRATCH_SLOTS; i++)
            if (!scratch_slots[i].in_use) {
                ld_buffer_free(scratch_slots[i].p);
                scratch_slots[i] = (scratch_slot){0};
            }
    pthread_mutex_unlock(&scratch_lock);
}

void ld_scratch_reserve(size_t bytes)
{
    char *p = ld_scratch_get(bytes);
    if (!p)
        return;
    /* one write per 4 KiB page faults the buffer in (whole huge pages where
       it has them); its contents do not matter */
    pthread_mutex_lock(&scratch_lock);
    size_t cap = 0;
    for (int i = 0; i < SCRATCH_SLOTS; i++)
        if (scratch_slots[i].p == p)
            cap = scratch_slots[i].cap;
    pthread_mutex_unlock(&scratch_lock);
    for (size_t off = 0; off < cap; off += 4096)
        ((volatile char *)p)[off] = 0;
    ld_scratch_put(p);
}

void ld_scratch_retain(void)
{
    pthread_mutex_lock(&scratch_lock);
    scratch_users++;
    pthread_mutex_unlock(&scratch_lock);
}

void ld_scratch_release(void)
{
    pthread_mutex_lock(&scratch_lock);
    if (scratch_users > 0)
        scratch_users--;
    if (scratch_users == 0)
        for (int i = 0; i < SCRATCH_SLOTS; i++)
            if (!scratch_slots[i].in_use) {
                ld_buffer_free(scratch_slots[i].p);
                scratch_slots[i] = (scratch_slot){0};
            }
    pthread_mutex_unlock(&scratch_lock);
}

/* --- im2col ---------------------------------------------------------------------------- */

typedef uint32_t im_e4 __attribute__((may_alias));
typedef uint64_t im_e8 __attribute__((may_alias));

/* dst[0..n) = src[0], src[s], src[2s], ... by element size. */
static void copy_strided(void *dst, const void *src, int64_t n, int64_t s, size_t elem_size)
{
    if (s == 1) {
        memcpy(dst, src, (size_t)n * elem_size);
    } else if (elem_size == 4) {
        im_e4 *o = dst;
        const im_e4 *x = src;
        for (int64_t j = 0; j < n; j++)
            o[j] = x[j * s];
    } else {
        im_e8 *o = dst;
        const im_e8 *x = src;
        for (int64_t j = 0; j < n; j++)
            o[j] = x[j * s];
    }
}

/* One row of col: channel c, kernel offset (kd, kh, kw), output positions
 * [p0, p1) of the flattened (D, H, W) output. All-zero bits are +0.0 in float
 * and double, so padding is a memset. */
static void im2col_row(const char *x, const ld_window_geom *g, int64_t kd, int64_t kh,
                       int64_t kw, int64_t p0, int64_t p1, char *dst, size_t es)
{
    int64_t out2 = g->out[2], lo, hi;
    ld_window_valid_range(g->in[2], out2, g->s[2], g->pb[2], kw * g->d[2], &lo, &hi);
    for (int64_t p = p0; p < p1;) {
        int64_t row = p / out2, a = p - row * out2;
        int64_t b = p1 - row * out2 < out2 ? p1 - row * out2 : out2; /* this row's [a, b) */
        int64_t od = row / g->out[1], oh = row % g->out[1];
        int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
        int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
        int64_t n = b - a;
        if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {
            memset(dst, 0, (size_t)n * es);
        } else {
            int64_t ca = a > lo ? a : lo, cb = b < hi ? b : hi; /* copied part */
            if (cb <= ca) {
                memset(dst, 0, (size_t)n * es);
            } else {
                int64_t iw = ca * g->s[2] - g->pb[2] + kw * g->d[2];
                const char *src = x + (size_t)((id * g->in[1] + ih) * g->in[2] + iw) * es;
                memset(dst, 0, (size_t)(ca - a) * es);
                copy_strided(dst + (size_t)(ca - a) * es, src, cb - ca, g->s[2], es);
                memset(dst + (size_t)(cb - a) * es, 0, (size_t)(b - cb) * es);
            }
        }
        dst += (size_t)n * es;
        p += n;
    }
}

void ld_im2col(const void *x, int64_t C, const ld_window_geom *g, int64_t p0, int64_t p1,
               void *col, size_t elem_size, int threads)
{
    int64_t rows = C * g->k_size, row_len = p1 - p0;
    const char *xb = x;
    char *cb = col;
#pragma omp parallel for num_threads(threads) if (rows * row_len > LD_PARALLEL_MIN_WORK) \
    schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t c = r / g->k_size, kidx = r % g->k_size;
        int64_t kw = kidx % g->k[2], kh = (kidx / g->k[2]) % g->k[1];
        int64_t kd = kidx / (g->k[2] * g->k[1]);
        im2col_row(xb + (size_t)(c * g->in_size) * elem_size, g, kd, kh, kw, p0, p1,
                   cb + (size_t)(r * row_len) * elem_size, elem_size);
    }
}

ld_status ld_window_kernel_init(ld_kernel_ctx *ctx)
{
    ld_status st = ld_blas_init(ctx->err);
    if (st != LD_OK)
        return ld_error_prefix(ctx->err, "node '%s' (%s)", ctx->node->name, ctx->node->op_type);
    ld_window_attrs *a = calloc(1, sizeof *a);
    if (!a)
        return ld_kernel_fail(ctx, LD_ERR_NOMEM, "out of memory");
    st = ld_window_attrs_parse(ctx, a);
    if (st != LD_OK) {
        free(a);
        return st;
    }
    ld_scratch_retain();
    ctx->state = a;
    return LD_OK;
}

void ld_window_kernel_fini(void *state)
{
    ld_window_attrs *a = state;
    ld_scratch_release();
    for (int64_t i = 0; a && i < a->n_packs; i++)
        ld_conv_direct_pack_clear(&a->packs[i]);
    if (a)
        free(a->packs);
    free(state);
}
