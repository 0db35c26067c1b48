/* layerdiff — elementwise chain fusion: the ops a fused chain computes and
 * their block loops (private to backends/exec_fuse*.c; see exec_fuse.c and
 * docs/architecture.md "Elementwise chain fusion").
 *
 * Each loop applies the SAME float32 expression per element as the
 * registry kernel of the op (backends/kernels/elementwise_binary.c,
 * activation.c), so values are bit for bit the kernel's: one IEEE
 * operation per element for Add/Sub/Mul/Div (Div a real division), the
 * kernels' comparisons for Clip/Relu/LeakyRelu/HardSigmoid/HardSwish (NaN
 * kept, -0 kept where the kernel keeps it), and Sigmoid's scalar expf
 * formula. The file is built with -ffp-contract=off like every other. */
#ifndef LAYERDIFF_BACKENDS_EXEC_FUSE_OPS_H
#define LAYERDIFF_BACKENDS_EXEC_FUSE_OPS_H

#include <stdbool.h>
#include <stdint.h>

enum {
    LD_FUSE_NONE = 0,
    LD_FUSE_ADD,
    LD_FUSE_SUB,
    LD_FUSE_MUL,
    LD_FUSE_DIV,
    LD_FUSE_CLIP,
    LD_FUSE_RELU,
    LD_FUSE_LEAKYRELU,
    LD_FUSE_HARDSIGMOID,
    LD_FUSE_HARDSWISH,
    LD_FUSE_SIGMOID,
};

/* One operand of a block: n values at p (vec), or the value s everywhere. */
typedef struct ld_fuse_arg {
    const float *p; /* NULL: the scalar s */
    float s;
} ld_fuse_arg;

/* d[0, n) = op(a[, b]) with attributes (alpha, beta) or Clip's (min, max).
 * d may be the same memory as a vector operand (in place), never partly
 * overlapping it. */
void ld_fuse_apply(int op, float *d, ld_fuse_arg a, ld_fuse_arg b, float alpha, float beta,
                   int64_t n);

/* Rounds the block d[0, n) to float16 in place the way a kernel offered
 * round_fp16_inline does (kernel.h): groups of 16 whose roundings are normal
 * float16 or zeros from zeros are rounded here (vcvtps2ph, nearest even),
 * every other group (and the tail) goes to round_block(user, 0, ...)
 * unrounded, adjacent ones together. Values and counters are those of
 * round_block over the whole block. Without F16C/AVX2 (elementwise_round.h's
 * level, which tests can force) all of it goes to round_block. */
void ld_fuse_round_fp16(float *d, int64_t n, void (*round_block)(void *, int, float *, int64_t),
                        void *user);

/* d[0, n) = op(a[, b]) rounded to float16 in the arithmetic loop, for
 * Add/Sub/Mul/Div (elementwise_round.h) and Clip/Relu (activation_round.h)
 * at their AVX2 level: the same values and round_block calls (counters) as
 * ld_fuse_apply followed by ld_fuse_round_fp16, without a second pass over
 * the block. False, doing nothing, for other ops and levels. */
bool ld_fuse_apply_round_fp16(int op, float *d, ld_fuse_arg a, ld_fuse_arg b, float alpha,
                              float beta, int64_t n,
                              void (*round_block)(void *, int, float *, int64_t), void *user);

#endif
