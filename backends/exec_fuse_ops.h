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

#include "layerdiff/kernel.h"

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

/* Sigmoid of in[0, n) into d (d may be in): activation.c's sigmoid_f
 * (libm's expf) bit for bit. ld_fuse_sigmoid_rows takes the AVX-512 row when
 * the CPU has it (exec_fuse_sigmoid.c: why its bits are the same), else the
 * portable one; ld_fuse_sigmoid_rows_avx512 is false, doing nothing, on a
 * CPU without AVX-512F (tests compare the two). */
void ld_fuse_sigmoid_rows(float *d, const float *in, int64_t n);
void ld_fuse_sigmoid_rows_portable(float *d, const float *in, int64_t n);
bool ld_fuse_sigmoid_rows_avx512(float *d, const float *in, int64_t n);

/* d[0, n) = op(a[, b]) with attributes (alpha, beta) or Clip's (min, max).
 * d may be the same memory as a vector operand (in place), never partly
 * overlapping it. */
void ld_fuse_apply(int op, float *d, ld_fuse_arg a, ld_fuse_arg b, float alpha, float beta,
                   int64_t n);

/* How a chain step rounds its blocks to float16 (a kernel offered
 * round_fp16_inline, kernel.h), fixed when the chain starts: the engine's
 * round_block, the levels of elementwise_round.h and activation_round.h
 * (read once per chain, not per block), and whether ld_fuse_round_plain is
 * tried first. ctx is a kernel context with only round_block / round_user
 * set, for the per-group loops, made once per step (not zeroed per block). */
typedef struct ld_fuse_rounding {
    ld_kernel_ctx ctx;
    int ew_level, act_level;
    bool plain;
} ld_fuse_rounding;

void ld_fuse_rounding_init(ld_fuse_rounding *r,
                           void (*round_block)(void *, int, float *, int64_t), void *user);

/* Rounds the block d[0, n) to float16 in place the way a kernel offered
 * round_fp16_inline does (kernel.h): groups of 16 whose roundings are normal
 * float16 or zeros from zeros are rounded here (vcvtps2ph, nearest even),
 * every other group (and the tail) goes to r's round_block unrounded,
 * adjacent ones together. Values and counters are those of round_block over
 * the whole block. Without F16C/AVX2 (elementwise_round.h's level, which
 * tests can force) all of it goes to round_block. */
void ld_fuse_round_fp16(const ld_fuse_rounding *r, float *d, int64_t n);

/* d[0, n) = op(a[, b]) rounded to float16 in the arithmetic loop, for
 * Add/Sub/Mul/Div (elementwise_round.h) and Clip/Relu (activation_round.h)
 * at their AVX2 level: the same values and round_block calls (counters) as
 * ld_fuse_apply followed by ld_fuse_round_fp16, without a second pass over
 * the block. With r->plain, ld_fuse_round_plain first (or, when d is a
 * vector operand's memory, ld_fuse_round_plain_prefix), the per-group loop
 * for what it leaves. False, doing nothing, for other ops and levels. */
bool ld_fuse_apply_round_fp16(const ld_fuse_rounding *r, int op, float *d, ld_fuse_arg a,
                              ld_fuse_arg b, float alpha, float beta, int64_t n);

/* exec_fuse_round.c: d[0, n) = the float16 roundings (fp16_split.h) of
 * op(a, b) for Add/Sub/Mul/Div, or of clamp(a, lo, hi) for Clip/Relu, when
 * every result is "plain" (zero, or magnitude in [2^-14, 65520)): then
 * true, and d holds exactly what the per-group loops would store, none of
 * it for round_block. False otherwise (a NaN, infinity, float16 subnormal
 * or overflow among the results; n not a multiple of 8; no AVX2; another
 * op), with d[0, n) holding anything: the caller recomputes the block from
 * its inputs, so d must not be an input's memory. One test per block
 * instead of one per group of 16 (docs/architecture.md "Emulated engine
 * cost"). */
bool ld_fuse_round_plain(int op, float *d, ld_fuse_arg a, ld_fuse_arg b, float lo, float hi,
                         int64_t n);

/* Like ld_fuse_round_plain for a d that may be a vector operand's memory
 * (in place): groups of 32 results are tested before they are stored, and
 * it stops at the first group that is not all plain. Returns how many
 * values from the start it stored (a multiple of 32; 0 for other ops,
 * fewer than 32 values or no AVX2); the inputs of the others are
 * untouched. */
int64_t ld_fuse_round_plain_prefix(int op, float *d, ld_fuse_arg a, ld_fuse_arg b, float lo,
                                   float hi, int64_t n);

/* For tests: -1 (default) lets chains use ld_fuse_round_plain, 0 turns it
 * off (the per-group loops alone), 1 on. Read when a chain starts. */
void ld_fuse_round_plain_force(int mode);
bool ld_fuse_round_plain_enabled(void);

/* For tests: ld_fuse_round_plain and _prefix run 16 lanes wide on a CPU
 * with AVX-512F (-1, default), or always the 8-lane AVX2 loops (0); same
 * values and verdicts either way. Read per call. */
void ld_fuse_round_plain_force_avx512(int mode);

#endif
