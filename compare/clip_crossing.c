/* layerdiff — Clip bound crossings (see clip_crossing.h). */
#include <math.h>
#include <string.h>

#include "compare/clip_crossing.h"
#include "layerdiff/round.h"

#define BLOCK 4096

bool ld_clip_crossing_applies(const char *op_type)
{
    return op_type && strcmp(op_type, "Clip") == 0;
}

static bool is_float_dtype(ld_dtype d)
{
    return d == LD_DTYPE_FLOAT32 || d == LD_DTYPE_FLOAT16 || d == LD_DTYPE_BFLOAT16 ||
           d == LD_DTYPE_FLOAT64;
}

/* Elements [start, start + n) of t as doubles (exact for every float dtype). */
static void load_block(const ld_tensor *t, int64_t start, int n, double *out)
{
    switch (t->dtype) {
    case LD_DTYPE_FLOAT32:
        for (int i = 0; i < n; i++)
            out[i] = ((const float *)t->data)[start + i];
        break;
    case LD_DTYPE_FLOAT64:
        memcpy(out, (const double *)t->data + start, (size_t)n * sizeof *out);
        break;
    case LD_DTYPE_FLOAT16:
        for (int i = 0; i < n; i++)
            out[i] = ld_fp16_to_fp32(((const ld_fp16 *)t->data)[start + i]);
        break;
    default: /* BFLOAT16: is_float_dtype let nothing else through */
        for (int i = 0; i < n; i++)
            out[i] = ld_bf16_to_fp32(((const ld_bf16 *)t->data)[start + i]);
        break;
    }
}

/* Smallest and largest non-NaN value (NaN, NaN when there is none). */
static void extremes(const ld_tensor *t, double *lo, double *hi)
{
    double buf[BLOCK];
    *lo = NAN;
    *hi = NAN;
    for (int64_t start = 0; start < t->count; start += BLOCK) {
        int n = (int)(t->count - start < BLOCK ? t->count - start : BLOCK);
        load_block(t, start, n, buf);
        for (int i = 0; i < n; i++) {
            if (isnan(buf[i]))
                continue;
            if (!(buf[i] >= *lo))
                *lo = buf[i];
            if (!(buf[i] <= *hi))
                *hi = buf[i];
        }
    }
}

/* v as the nearest value of dtype d: a bound in the reference's float32 and the
 * same bound in an fp16 test tensor must compare equal. */
static double in_dtype(double v, ld_dtype d)
{
    if (d == LD_DTYPE_FLOAT16)
        return ld_fp16_to_fp32(ld_fp32_to_fp16((float)v));
    if (d == LD_DTYPE_BFLOAT16)
        return ld_bf16_to_fp32(ld_fp32_to_bf16((float)v));
    if (d == LD_DTYPE_FLOAT32)
        return (float)v;
    return v;
}

int64_t ld_clip_crossings(const ld_tensor *ref, const ld_tensor *test)
{
    if (!ref || !test || !is_float_dtype(ref->dtype) || !is_float_dtype(test->dtype) ||
        ref->count != test->count || ref->count == 0)
        return 0;
    double r_lo, r_hi, t_lo, t_hi;
    extremes(ref, &r_lo, &r_hi);
    extremes(test, &t_lo, &t_hi);
    /* NaN (no value) compares unequal, so a side of NaNs only recognises no bound */
    bool has_lo = in_dtype(r_lo, test->dtype) == t_lo;
    bool has_hi = in_dtype(r_hi, test->dtype) == t_hi;
    if (!has_lo && !has_hi)
        return 0;
    double rb[BLOCK], tb[BLOCK];
    int64_t crossed = 0;
    for (int64_t start = 0; start < ref->count; start += BLOCK) {
        int n = (int)(ref->count - start < BLOCK ? ref->count - start : BLOCK);
        load_block(ref, start, n, rb);
        load_block(test, start, n, tb);
        for (int i = 0; i < n; i++) {
            bool lo_differs = has_lo && ((rb[i] == r_lo) != (tb[i] == t_lo));
            bool hi_differs = has_hi && ((rb[i] == r_hi) != (tb[i] == t_hi));
            crossed += lo_differs || hi_differs;
        }
    }
    return crossed;
}
