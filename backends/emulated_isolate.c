/* layerdiff — the emulated backend's isolated execution (see
 * emulated_internal.h): one layer computed on another backend's inputs (the
 * reference's, in `layerdiff run`'s lockstep comparison), converted to what
 * this engine holds for them, so a layer's own error shows apart from the
 * error it inherits. */
#include <stdlib.h>
#include <string.h>

#include "backends/emulated_internal.h"
#include "backends/engine_internal.h"

/* A float32 copy of a float32/float16/bfloat16 tensor (new). */
static ld_status float32_copy(const ld_tensor *src, ld_tensor **out, ld_error *err)
{
    ld_status st = ld_tensor_create(out, src->name, LD_DTYPE_FLOAT32, &src->shape, err);
    if (st != LD_OK)
        return st;
    size_t n = (size_t)src->count;
    if (src->dtype == LD_DTYPE_FLOAT16)
        ld_convert_fp16_to_fp32(src->data, (*out)->data, n);
    else if (src->dtype == LD_DTYPE_BFLOAT16)
        ld_convert_bf16_to_fp32(src->data, (*out)->data, n);
    else if (n)
        memcpy((*out)->data, src->data, n * sizeof(float));
    return LD_OK;
}

/* The foreign tensor f for value v as this engine holds v: in its stored
 * type (own->dtype) and, for a float32 tensor that holds values of a
 * narrower precision, rounded to that precision with the producer's
 * rounding, exactly as the producing layer would have. *out is f itself or
 * a new tensor in *made (freed by the caller); *exact receives what the
 * value state must say about it. */
static ld_status held_as(ld_emulated_backend *b, int v, const ld_tensor *own, const ld_tensor *f,
                         const ld_tensor **out, ld_tensor **made, int *exact, ld_error *err)
{
    int p = b->values[v].exact; /* what own's float32 values are exact in, -1 unknown */
    *out = f;
    *made = NULL;
    *exact = -1;
    if (!own || !ld_engine_is_rounded_type(f->dtype) || !ld_engine_is_rounded_type(own->dtype))
        return LD_OK; /* integers, float64: used as they are */
    bool own_wide = own->dtype == LD_DTYPE_FLOAT32;
    if (own_wide && f->dtype == LD_DTYPE_FLOAT32 && (p < 0 || p == LD_PRECISION_FP32)) {
        *exact = p;
        return LD_OK;
    }
    if (!own_wide && f->dtype == own->dtype)
        return LD_OK;
    ld_tensor *t = NULL;
    ld_status st = float32_copy(f, &t, err);
    if (st != LD_OK)
        return st;
    if (own_wide) {
        if (p >= 0 && p != LD_PRECISION_FP32) {
            int producer = b->graph->values[v].producer;
            ld_round_options o = {0};
            if (producer >= 0)
                o = ld_exec_node_numerics(b->exec, producer)->round;
            ld_round_array(t->data, (size_t)t->count, (ld_precision)p, &o);
        }
        *exact = p >= 0 ? p : (int)ld_emu_precision_of_type(f->dtype); /* f is a half type here */
        *out = *made = t;
        return LD_OK;
    }
    ld_tensor *narrow = NULL; /* own is float16 or bfloat16 */
    st = ld_tensor_create(&narrow, f->name, own->dtype, &f->shape, err);
    if (st == LD_OK && own->dtype == LD_DTYPE_FLOAT16)
        ld_convert_fp32_to_fp16(t->data, narrow->data, (size_t)t->count);
    else if (st == LD_OK)
        ld_convert_fp32_to_bf16(t->data, narrow->data, (size_t)t->count);
    ld_tensor_destroy(t);
    if (st == LD_OK)
        *out = *made = narrow;
    return st;
}

/* The value states of the node's inputs and outputs are swapped
 * for the call (the foreign tensors have their own NaN/inf and exactness)
 * and restored after it, so the lockstep run goes on undisturbed. */
ld_status ld_emu_run_isolated(ld_emulated_backend *b, int i, const ld_tensor *const *inputs,
                              ld_tensor_observer observer, void *user, ld_error *err)
{
    const ld_node *node = &b->graph->nodes[i];
    int n_in = node->n_inputs, n_saved = n_in + node->n_outputs;
    const ld_tensor **use = calloc((size_t)n_in + 1, sizeof *use);
    ld_tensor **made = calloc((size_t)n_in + 1, sizeof *made);
    ld_emu_value *saved = calloc((size_t)n_saved + 1, sizeof *saved);
    ld_status st = use && made && saved ? LD_OK
                                        : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int k = 0; st == LD_OK && k < n_saved; k++) {
        int v = k < n_in ? node->inputs[k] : node->outputs[k - n_in];
        if (v >= 0)
            saved[k] = b->values[v];
    }
    for (int j = 0; st == LD_OK && j < n_in; j++) {
        int v = node->inputs[j], ex = -1;
        if (v < 0 || !inputs || !inputs[j])
            continue;
        st = held_as(b, v, ld_exec_value(b->exec, v), inputs[j], &use[j], &made[j], &ex, err);
        if (st == LD_OK)
            b->values[v] = (ld_emu_value){.exact = ex, .show_as = saved[j].show_as};
    }
    ld_emu_observe_wrap wrap;
    if (st == LD_OK)
        st = ld_exec_run_node_on(b->exec, i, use, ld_emu_wrap_observer(&wrap, b, observer, user), &wrap, err);
    for (int k = n_saved - 1; saved && k >= 0; k--) { /* reverse: repeated values end right */
        int v = k < n_in ? node->inputs[k] : node->outputs[k - n_in];
        if (v >= 0)
            b->values[v] = saved[k];
    }
    for (int j = 0; made && j < n_in; j++)
        ld_tensor_destroy(made[j]);
    free(use);
    free(made);
    free(saved);
    return st;
}
