/* layerdiff — internals of the direct convolution (conv_direct.c): the plan
 * types shared by the width-neutral driver and the per-instruction-set
 * kernels (conv_direct_avx512.c, conv_direct_avx2.c, both built from
 * conv_direct_body.h), and the switch tests use to run every instruction
 * set the CPU supports. Private to backends/kernels/ and tests/. */
#ifndef LAYERDIFF_BACKENDS_KERNELS_CONV_DIRECT_INTERNAL_H
#define LAYERDIFF_BACKENDS_KERNELS_CONV_DIRECT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "backends/kernels/conv_common.h"
#include "backends/kernels/conv_direct.h"

#define LD_CD_MAX_NV 6   /* vectors per tile, any instruction set */
#define LD_CD_MAX_MB 24  /* output channels per tile, any instruction set */
#define LD_CD_MAX_KW 16  /* innermost kernel width */
#define LD_CD_MAX_TAPS 64 /* kernels up to this size run one flat tap loop */

/* Sizes of the repacked input and of the output rows. */
typedef struct ld_cd_layout {
    int64_t in_rows[2];  /* padded depth and height: (D + pads) x (H + pads) */
    int64_t in_w;        /* padded width before the phase split */
    int64_t phases;      /* the innermost stride (1 or 2) */
    int64_t phase_len;   /* floats of one phase of one row of one channel */
    int64_t out_rows[2]; /* output depth and height */
    int64_t out_w;       /* outputs per output row */
    int64_t out_count;   /* outputs per channel (y's plane stride) */
} ld_cd_layout;

typedef struct ld_cd_plan {
    const float *xp, *pack, *bias;
    float *y;
    int64_t C, M, k[3], s[3], d[3];
    ld_cd_layout L;
    int64_t row_floats; /* one padded input row of all channels: C * phases * phase_len */
    int64_t blocks;     /* vectors (of the instruction set's lanes) per output row */
    int64_t tiles;      /* per output row: ceil(blocks / NV) */
    int64_t chunk;      /* input channels per pass over a work item's tiles */
    int64_t group;      /* tiles per work item (consecutive, of one output row) */
    int MB, NV;
    const ld_conv_round *round; /* NULL, or the last pass rounds y to float16 */
} ld_cd_plan;

/* A pointwise convolution as the product W [M][C] x X [C][P]. */
typedef struct ld_cd_pw_plan {
    const float *x, *pack, *bias;
    float *y;
    int64_t C, M, P;
    int64_t x_stride, y_stride; /* floats between channels (rows of X and Y) */
    int64_t blocks;
    int64_t span;               /* positions copied at a time: a multiple of NV vectors */
    int MB, NV;
    bool ask_ahead;             /* prefetch y's lines for writing, tiles ahead (conv_direct.c) */
    const ld_conv_round *round; /* NULL, or y is rounded to float16 as stored */
} ld_cd_pw_plan;

/* One tile of MB (all channel blocks) x nv vectors of output row `row`
 * from vector b0, input channels [c0, c1) (c0 > 0: continuing the sums in
 * y; c1 = C: adding the bias); rows[kd * KH + kh] are the repacked input
 * rows it reads. */
typedef void (*ld_cd_tile_fn)(const ld_cd_plan *p, const float *const *rows, int64_t row,
                              int64_t b0, int64_t c0, int64_t c1);
/* `ntiles` pointwise tiles of nv vectors each from vector b0, every
 * channel block of each; their inputs at buf (rows of p->span floats). */
typedef void (*ld_cd_pw_fn)(const ld_cd_pw_plan *p, int64_t b0, int64_t ntiles,
                            const float *buf);

/* A channel block size MB with tiles of 1..NV vectors ([vectors - 1]). */
typedef struct ld_cd_variant {
    int MB, NV;
    ld_cd_tile_fn tile[LD_CD_MAX_NV];
    ld_cd_pw_fn pw[LD_CD_MAX_NV];
} ld_cd_variant;

/* One instruction set's kernels. */
typedef struct ld_cd_isa {
    const char *name;
    int lanes;                     /* floats per vector */
    const ld_cd_variant *variants; /* the cost model picks among these */
    int n_variants;
    /* The inputs of positions [p0, p0 + p->span) into buf [C][span], zeros
     * past P (prefetching the next span). */
    void (*pointwise_copy)(const ld_cd_pw_plan *p, int64_t p0, float *buf);
    /* even[i] = src[2i], odd[i] = src[2i + 1] for the first n - n % (2 *
     * lanes) floats of src; returns how many it did. */
    int64_t (*deinterleave2)(const float *src, int64_t n, float *even, float *odd);
    /* y[2i] = bias + a[i], y[2i + 1] = bias + b[i] for i < n. */
    void (*interleave2_add)(const float *a, const float *b, float bias, float *y, int64_t n);
} ld_cd_isa;

extern const ld_cd_isa ld_cd_isa_avx512; /* 16 lanes, zmm: target avx512f */
extern const ld_cd_isa ld_cd_isa_avx2;   /* 8 lanes, ymm: target avx2,fma */

typedef enum ld_conv_direct_level {
    LD_CONV_DIRECT_AUTO = -1, /* only for ld_conv_direct_force_level: what was detected */
    LD_CONV_DIRECT_NONE = 0,  /* no kernel: conv.c keeps im2col + GEMM */
    LD_CONV_DIRECT_AVX2,      /* AVX2 + FMA */
    LD_CONV_DIRECT_AVX512,    /* AVX-512F */
} ld_conv_direct_level;

/* Whether this CPU (and OS) runs that level's kernels (NONE: always). */
bool ld_conv_direct_level_supported(ld_conv_direct_level level);
/* What the public functions use now: the forced level, else the best supported. */
ld_conv_direct_level ld_conv_direct_level_active(void);
/* "none", "avx2", "avx512". Static string. */
const char *ld_conv_direct_level_name(ld_conv_direct_level level);
/* Tests: make the public functions (and conv.c's choice) use `level`
 * (LD_CONV_DIRECT_AUTO undoes it). Returns false, changing nothing, when the
 * CPU cannot run it. Global: do not call while convolutions run. */
bool ld_conv_direct_force_level(ld_conv_direct_level level);
/* Tile variants (channel block sizes) of the active level; 0 for NONE. */
int ld_conv_direct_variant_count(void);
/* Tests: every convolution and product uses variant `index` of the active
 * level (an index past the count, or -1, restores the cost model's choice).
 * Global, as ld_conv_direct_force_level. */
void ld_conv_direct_force_variant(int index);
/* Tests: every non-pointwise convolution passes over its input channels in
 * chunks of `channels` (0 restores the cache-sized choice of conv_direct.c)
 * and splits each output row into work items of `tiles` tiles (0: the
 * choice by size and thread count). Global, as ld_conv_direct_force_level. */
void ld_conv_direct_force_blocking(int64_t channels, int64_t tiles);
/* Tests: every pointwise product asks for its output lines ahead (1) or
 * never (0); -1 restores the choice by output size. Global, as
 * ld_conv_direct_force_level. */
void ld_conv_direct_force_ask_ahead(int mode);
/* Whether a pointwise product of M rows over P positions asks for its
 * output lines ahead when nothing is forced. */
bool ld_conv_direct_pw_asks_ahead(int64_t M, int64_t P);

#endif
