/* layerdiff — a standalone ONNX model made of some nodes of a model
 * (`layerdiff reduce`; see layerdiff/bisect.h).
 *
 * The source file is unpacked again with protobuf-c and the new ModelProto
 * borrows from it: the kept NodeProtos (attributes, subgraphs, names and
 * domains exactly as written), the initializers they read, the opset
 * imports and the model-local functions. Only the graph's inputs and
 * outputs (the cut tensors, with the dtypes and shapes a run gave them) and
 * initializers that cannot be copied as they are (external data, sparse)
 * are made here. Then onnx__model_proto__pack writes it: nothing is encoded
 * by hand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layerdiff/bisect.h"
#include "onnx/onnx_internal.h"

/* Everything this file allocates for the new model, freed together. */
typedef struct bag {
    void **ptrs;
    int n, cap;
    bool failed;
} bag;

static void *bag_add(bag *b, void *p)
{
    if (!p || b->failed) {
        b->failed = true;
        free(p);
        return NULL;
    }
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        void **grown = realloc(b->ptrs, (size_t)cap * sizeof *grown);
        if (!grown) {
            b->failed = true;
            free(p);
            return NULL;
        }
        b->ptrs = grown;
        b->cap = cap;
    }
    b->ptrs[b->n++] = p;
    return p;
}

static void *bag_calloc(bag *b, size_t n, size_t size)
{
    return bag_add(b, calloc(n ? n : 1, size));
}

static void bag_free(bag *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->ptrs[i]);
    free(b->ptrs);
}

/* --- choosing nodes ------------------------------------------------------------------- */

static bool is_constant_node(const ld_node *node)
{
    return node->n_inputs == 0 && strcmp(node->op_type, "Constant") == 0 &&
           (!node->domain[0] || strcmp(node->domain, "ai.onnx") == 0);
}

ld_status ld_extract_select(const ld_graph *g, int target, int context, int *out, int *n_out,
                            ld_error *err)
{
    if (target < 0 || target >= g->n_nodes)
        return ld_error_set(err, LD_ERR_INTERNAL, "reduce: no node %d", target);
    bool *kept = calloc((size_t)g->n_nodes, sizeof *kept);
    int *queue = malloc((size_t)g->n_nodes * sizeof *queue);
    if (!kept || !queue) {
        free(kept);
        free(queue);
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    int head = 0, tail = 0, producers = 0;
    kept[target] = true;
    queue[tail++] = target;
    while (head < tail) { /* breadth first: nearest producers first */
        const ld_node *node = &g->nodes[queue[head++]];
        for (int j = 0; j < node->n_inputs; j++) {
            int v = node->inputs[j];
            int p = v >= 0 ? g->values[v].producer : -1;
            if (p < 0 || kept[p])
                continue;
            bool constant = is_constant_node(&g->nodes[p]);
            if (!constant && producers >= context)
                continue;
            kept[p] = true;
            producers += !constant;
            queue[tail++] = p;
        }
    }
    *n_out = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (kept[i])
            out[(*n_out)++] = i;
    free(kept);
    free(queue);
    return LD_OK;
}

void ld_extract_cut(const ld_graph *g, const int *nodes, int n_nodes, int *out, int *n_out)
{
    *n_out = 0;
    for (int k = 0; k < n_nodes; k++) {
        const ld_node *node = &g->nodes[nodes[k]];
        for (int j = 0; j < node->n_inputs + node->n_implicit_inputs; j++) {
            int v = j < node->n_inputs ? node->inputs[j] : node->implicit_inputs[j - node->n_inputs];
            if (v < 0 || g->values[v].kind == LD_VALUE_INITIALIZER)
                continue;
            int p = g->values[v].producer;
            bool inside = false;
            for (int m = 0; p >= 0 && m < n_nodes && !inside; m++)
                inside = nodes[m] == p;
            bool seen = false;
            for (int m = 0; m < *n_out && !seen; m++)
                seen = out[m] == v;
            if (!inside && !seen)
                out[(*n_out)++] = v;
        }
    }
}

/* --- building the model ------------------------------------------------------------- */

static Onnx__ValueInfoProto *value_info(bag *b, const char *name, const ld_extract_io *io)
{
    Onnx__ValueInfoProto *vi = bag_calloc(b, 1, sizeof *vi);
    Onnx__TypeProto *tp = bag_calloc(b, 1, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = bag_calloc(b, 1, sizeof *tt);
    Onnx__TensorShapeProto *sp = bag_calloc(b, 1, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dims = bag_calloc(b, (size_t)io->shape.rank, sizeof *dims);
    if (b->failed)
        return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    for (int d = 0; d < io->shape.rank; d++) {
        dims[d] = bag_calloc(b, 1, sizeof *dims[d]);
        if (!dims[d])
            return NULL;
        onnx__tensor_shape_proto__dimension__init(dims[d]);
        dims[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dims[d]->dim_value = io->shape.dims[d];
    }
    sp->n_dim = (size_t)io->shape.rank;
    sp->dim = dims;
    tt->has_elem_type = true;
    tt->elem_type = (int32_t)io->dtype;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)name; /* borrowed from the graph */
    vi->type = tp;
    return vi;
}

/* An initializer as raw data from the loaded graph (external or sparse in
 * the source). */
static Onnx__TensorProto *raw_initializer(bag *b, const ld_value *val, ld_error *err)
{
    const ld_tensor *t = val->initializer;
    if (!t || (!t->data && t->nbytes))
        return ld_error_set(err, LD_ERR_UNSUPPORTED, "reduce: initializer '%s' has no data "
                            "layerdiff can write", val->name), NULL;
    Onnx__TensorProto *tp = bag_calloc(b, 1, sizeof *tp);
    int64_t *dims = bag_calloc(b, (size_t)t->shape.rank, sizeof *dims);
    uint8_t *raw = bag_calloc(b, t->nbytes, 1);
    if (b->failed)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory"), NULL;
    onnx__tensor_proto__init(tp);
    memcpy(dims, t->shape.dims, (size_t)t->shape.rank * sizeof *dims);
    if (t->nbytes)
        memcpy(raw, t->data, t->nbytes); /* layerdiff holds little-endian data, as raw_data */
    tp->n_dims = (size_t)t->shape.rank;
    tp->dims = dims;
    tp->has_data_type = true;
    tp->data_type = (int32_t)t->dtype;
    tp->has_raw_data = true;
    tp->raw_data = (ProtobufCBinaryData){t->nbytes, raw};
    tp->name = val->name;
    return tp;
}

/* The source's TensorProto named `name`, when it can be copied as it is. */
static Onnx__TensorProto *source_initializer(const Onnx__GraphProto *gp, const char *name)
{
    for (size_t i = 0; i < gp->n_initializer; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        if (tp->name && strcmp(tp->name, name) == 0)
            return tp->has_data_location &&
                           tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL
                       ? NULL
                       : tp;
    }
    return NULL;
}

/* Maps each graph node to its NodeProto through the first output it names
 * (the loader may have reordered nodes, and generated names are not in the
 * file). */
static ld_status map_nodes(const ld_graph *g, const Onnx__GraphProto *gp, int *proto_of,
                           ld_error *err)
{
    for (int i = 0; i < g->n_nodes; i++)
        proto_of[i] = -1;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *np = gp->node[i];
        for (size_t k = 0; k < np->n_output; k++) {
            if (!np->output[k] || !*np->output[k])
                continue;
            int v = ld_graph_find_value(g, np->output[k]);
            int p = v >= 0 ? g->values[v].producer : -1;
            if (p >= 0)
                proto_of[p] = (int)i;
            break;
        }
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (proto_of[i] < 0)
            return ld_error_set(err, LD_ERR_INPUT, "reduce: node '%s' not found again in the "
                                "model file", g->nodes[i].name);
    return LD_OK;
}

static ld_status add_initializers(bag *b, const ld_graph *g, const Onnx__GraphProto *gp,
                                  const ld_extract_spec *spec, Onnx__GraphProto *ng,
                                  ld_error *err)
{
    bool *done = bag_calloc(b, (size_t)g->n_values, sizeof *done);
    ng->initializer = bag_calloc(b, (size_t)g->n_values, sizeof *ng->initializer);
    if (b->failed)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    for (int k = 0; k < spec->n_nodes; k++) {
        const ld_node *node = &g->nodes[spec->nodes[k]];
        for (int j = 0; j < node->n_inputs + node->n_implicit_inputs; j++) {
            int v = j < node->n_inputs ? node->inputs[j] : node->implicit_inputs[j - node->n_inputs];
            if (v < 0 || done[v] || g->values[v].kind != LD_VALUE_INITIALIZER)
                continue;
            done[v] = true;
            Onnx__TensorProto *tp = source_initializer(gp, g->values[v].name);
            if (!tp && !(tp = raw_initializer(b, &g->values[v], err)))
                return err->status;
            ng->initializer[ng->n_initializer++] = tp;
        }
    }
    return LD_OK;
}

static ld_status add_io(bag *b, const ld_graph *g, const ld_extract_spec *spec,
                        Onnx__GraphProto *ng, ld_error *err)
{
    ng->input = bag_calloc(b, (size_t)spec->n_inputs, sizeof *ng->input);
    ng->output = bag_calloc(b, (size_t)spec->n_outputs, sizeof *ng->output);
    for (int k = 0; k < spec->n_inputs && !b->failed; k++)
        ng->input[k] = value_info(b, g->values[spec->inputs[k].value].name, &spec->inputs[k]);
    for (int k = 0; k < spec->n_outputs && !b->failed; k++)
        ng->output[k] = value_info(b, g->values[spec->outputs[k].value].name, &spec->outputs[k]);
    if (b->failed)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ng->n_input = (size_t)spec->n_inputs;
    ng->n_output = (size_t)spec->n_outputs;
    return LD_OK;
}

static ld_status write_atomically(const char *path, const uint8_t *data, size_t size,
                                  ld_error *err)
{
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp-%ld", path, (long)getpid()) < 0)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    FILE *f = fopen(tmp, "wb");
    ld_status st = f ? LD_OK : ld_error_set(err, LD_ERR_IO, "%s: cannot create: %s", path,
                                            strerror(errno));
    if (st == LD_OK) {
        bool ok = fwrite(data, 1, size, f) == size;
        ok = fclose(f) == 0 && ok;
        if (!ok || rename(tmp, path) != 0)
            st = ld_error_set(err, LD_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        if (st != LD_OK)
            unlink(tmp);
    }
    free(tmp);
    return st;
}

static ld_status build_and_write(bag *b, const ld_graph *g, const Onnx__ModelProto *mp,
                                 const ld_extract_spec *spec, const char *out_path,
                                 ld_error *err)
{
    const Onnx__GraphProto *gp = mp->graph;
    int *proto_of = bag_calloc(b, (size_t)g->n_nodes, sizeof *proto_of);
    Onnx__GraphProto *ng = bag_calloc(b, 1, sizeof *ng);
    char *name = NULL;
    if (b->failed || asprintf(&name, "%s_reduced", g->name ? g->name : "graph") < 0)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    bag_add(b, name);
    onnx__graph_proto__init(ng);
    ld_status st = map_nodes(g, gp, proto_of, err);
    ng->node = bag_calloc(b, (size_t)spec->n_nodes, sizeof *ng->node);
    for (int k = 0; st == LD_OK && k < spec->n_nodes && ng->node; k++)
        ng->node[ng->n_node++] = gp->node[proto_of[spec->nodes[k]]];
    if (st == LD_OK)
        st = add_initializers(b, g, gp, spec, ng, err);
    if (st == LD_OK)
        st = add_io(b, g, spec, ng, err);
    if (st != LD_OK)
        return st;
    ng->name = spec->graph_name ? (char *)spec->graph_name : name;
    ng->doc_string = (char *)spec->doc_string;
    Onnx__ModelProto nm = ONNX__MODEL_PROTO__INIT;
    nm.has_ir_version = true;
    nm.ir_version = mp->has_ir_version ? mp->ir_version : 8;
    nm.n_opset_import = mp->n_opset_import;
    nm.opset_import = mp->opset_import;
    nm.n_functions = mp->n_functions;
    nm.functions = mp->functions;
    nm.producer_name = "layerdiff reduce";
    nm.producer_version = LAYERDIFF_VERSION;
    nm.graph = ng;
    size_t size = onnx__model_proto__get_packed_size(&nm);
    uint8_t *buf = bag_add(b, malloc(size ? size : 1));
    if (!buf)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    onnx__model_proto__pack(&nm, buf);
    return write_atomically(out_path, buf, size, err);
}

ld_status ld_onnx_extract(const char *model_path, const ld_graph *g, const ld_extract_spec *spec,
                          const char *out_path, ld_error *err)
{
    uint8_t *data = NULL;
    size_t size = 0;
    bag b = {0};
    Onnx__ModelProto *mp = NULL;
    ld_status st = ld_onnx_read_file(model_path, &data, &size, err);
    if (st == LD_OK)
        st = ld_onnx_check_nesting(data, size, &onnx__model_proto__descriptor, "model", err);
    if (st == LD_OK && !(mp = onnx__model_proto__unpack(NULL, size, data)))
        st = ld_error_set(err, LD_ERR_INPUT, "%s: not an ONNX model", model_path);
    if (st == LD_OK && !mp->graph)
        st = ld_error_set(err, LD_ERR_INPUT, "%s: the model has no graph", model_path);
    if (st == LD_OK)
        st = build_and_write(&b, g, mp, spec, out_path, err);
    bag_free(&b);
    if (mp)
        onnx__model_proto__free_unpacked(mp, NULL);
    free(data);
    return st;
}
