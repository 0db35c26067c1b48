/* layerdiff fuzz target: the ONNX model loader (ld_onnx_load_buffer) and
 * `layerdiff inspect` on what it accepts.
 *
 * External data is looked up in the sandbox, which holds a 4 KiB
 * "weights.bin" and a 16-byte "short_weights.bin" (the names the fixtures
 * use), so offsets, lengths and location checks get exercised. A model that
 * loads is written to a file and inspected as text and JSON with --layers:
 * the file loader must accept what the buffer loader accepted, and the
 * printers must cope with whatever names, dims and attributes it holds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/inspect.h"
#include "layerdiff/inputs.h"
#include "layerdiff/onnx.h"
#include "tests/fuzz/support.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    uint8_t weights[4096];
    for (size_t i = 0; i < sizeof weights; i++)
        weights[i] = (uint8_t)(i * 37u + 11u);
    fuzz_write("weights.bin", weights, sizeof weights);
    fuzz_write("short_weights.bin", weights, 16);
    return 0;
}

/* What a loaded graph must look like, whatever the file held. */
static void check_graph(const ld_graph *g)
{
    if (!g->name || !g->producer_name || !g->opsets)
        fuzz_fail("loaded graph lacks its name, producer or opsets", NULL);
    for (int i = 0; i < g->n_nodes; i++) {
        const ld_node *n = &g->nodes[i];
        if (!n->name || !n->op_type || !n->domain || n->index != i)
            fuzz_fail("node without name/op_type/domain or out of order", NULL);
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= g->n_values || n->inputs[k] < -1)
                fuzz_fail("node input index out of range", NULL);
        for (int k = 0; k < n->n_outputs; k++) {
            int v = n->outputs[k];
            if (v >= g->n_values || v < -1 || (v >= 0 && g->values[v].producer != i))
                fuzz_fail("node output index out of range or producer mismatch", NULL);
        }
    }
    for (int i = 0; i < g->n_values; i++) {
        const ld_tensor *t = g->values[i].initializer;
        if (t && t->data == NULL && t->nbytes != 0 && ld_dtype_is_supported(t->dtype))
            fuzz_fail("initializer of a supported dtype without data", NULL);
    }
}

static void inspect(const char *path, bool json)
{
    ld_error err;
    ld_error_clear(&err);
    ld_inspect_options opts = {.json = json, .layers = true};
    ld_status st = ld_inspect_model(fuzz_null_output(), path, &opts, &err);
    if (st != LD_OK)
        fuzz_fail("inspect failed on a model the buffer loader accepted", &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_graph *g = NULL;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_onnx_load_buffer(&g, data, size, fuzz_sandbox(), "fuzz.onnx", &err);
    fuzz_check_status(st, &err, "ld_onnx_load_buffer");
    if (st != LD_OK) {
        if (g)
            fuzz_fail("failed load left a graph behind", &err);
        if (strncmp(err.message, "fuzz.onnx: ", 11) != 0)
            fuzz_fail("error message does not start with the model name", &err);
        return 0;
    }
    check_graph(g);

    /* Shapes of the inputs with nothing given: fine or a usage error. */
    ld_shape shapes[64];
    if (g->n_inputs <= 64) {
        st = ld_inputs_resolve_shapes(g, NULL, 0, NULL, shapes, &err);
        fuzz_check_status(st, &err, "ld_inputs_resolve_shapes");
    }
    ld_graph_destroy(g);

    const char *path = fuzz_write("model.onnx", data, size);
    inspect(path, false);
    inspect(path, true);
    return 0;
}
