/* layerdiff tests — builds ONNX models in memory with protobuf-c structs
 * (see tests/support/onnx_builder.h). */
#include "tests/support/onnx_builder.h"

#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void **arena;
static size_t arena_len, arena_cap;
static char tmpdir[64];

void *ob_mem(size_t size)
{
    if (arena_len == arena_cap) {
        arena_cap = arena_cap ? 2 * arena_cap : 256;
        arena = realloc(arena, arena_cap * sizeof *arena);
        assert_non_null(arena);
    }
    void *p = calloc(1, size ? size : 1);
    assert_non_null(p);
    arena[arena_len++] = p;
    return p;
}

char *ob_str(const char *s)
{
    return strcpy(ob_mem(strlen(s) + 1), s);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

const char *ob_tmpdir(void)
{
    return tmpdir;
}

int ob_teardown(void **state)
{
    (void)state;
    for (size_t i = 0; i < arena_len; i++)
        free(arena[i]);
    free(arena);
    arena = NULL;
    arena_len = arena_cap = 0;
    if (tmpdir[0])
        nftw(tmpdir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    tmpdir[0] = '\0';
    return 0;
}

const char *ob_make_tmpdir(void)
{
    if (tmpdir[0])
        return tmpdir;
    strcpy(tmpdir, "/tmp/ld_test_onnx_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    return tmpdir;
}

char *ob_tmp_path(const char *name)
{
    char *p = ob_mem(strlen(tmpdir) + strlen(name) + 2);
    sprintf(p, "%s/%s", tmpdir, name);
    return p;
}

void ob_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
}

/* --- model builders ---------------------------------------------------------------- */


void *ob_ptrs(void)
{
    return ob_mem(OB_CAP * sizeof(void *));
}

/* "a,,b" -> {"a", "", "b"}; "" -> none. */
static char **split_list(const char *list, size_t *n)
{
    char **out = ob_ptrs();
    *n = 0;
    if (!*list)
        return out;
    for (const char *p = list;;) {
        size_t len = strcspn(p, ",");
        char *item = ob_mem(len + 1);
        memcpy(item, p, len);
        OB_PUSH(out, *n, item);
        if (!p[len])
            return out;
        p += len + 1;
    }
}

Onnx__GraphProto *ob_graph(const char *name)
{
    Onnx__GraphProto *g = ob_mem(sizeof *g);
    onnx__graph_proto__init(g);
    g->name = ob_str(name);
    g->node = ob_ptrs();
    g->initializer = ob_ptrs();
    g->sparse_initializer = ob_ptrs();
    g->input = ob_ptrs();
    g->output = ob_ptrs();
    g->value_info = ob_ptrs();
    return g;
}

void ob_opset(Onnx__ModelProto *m, const char *domain, int64_t version)
{
    Onnx__OperatorSetIdProto *op = ob_mem(sizeof *op);
    onnx__operator_set_id_proto__init(op);
    op->domain = ob_str(domain);
    op->has_version = 1;
    op->version = version;
    OB_PUSH(m->opset_import, m->n_opset_import, op);
}

Onnx__ModelProto *ob_model(void)
{
    Onnx__ModelProto *m = ob_mem(sizeof *m);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    m->ir_version = 8;
    m->producer_name = ob_str("test_onnx");
    m->opset_import = ob_ptrs();
    ob_opset(m, "", 17);
    m->graph = ob_graph("main");
    return m;
}

Onnx__NodeProto *ob_node(Onnx__GraphProto *g, const char *op, const char *name,
                                 const char *ins, const char *outs)
{
    Onnx__NodeProto *n = ob_mem(sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = ob_str(op);
    n->name = ob_str(name);
    n->input = split_list(ins, &n->n_input);
    n->output = split_list(outs, &n->n_output);
    n->attribute = ob_ptrs();
    OB_PUSH(g->node, g->n_node, n);
    return n;
}

/* dims: -1 becomes the symbolic dim "N". */
Onnx__ValueInfoProto *ob_value_info(const char *name, int dtype, int rank,
                                        const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = ob_mem(sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = ob_str(name);
    Onnx__TypeProto *tp = ob_mem(sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = ob_mem(sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = dtype;
    if (rank >= 0) {
        Onnx__TensorShapeProto *sh = ob_mem(sizeof *sh);
        onnx__tensor_shape_proto__init(sh);
        sh->dim = ob_ptrs();
        for (int i = 0; i < rank; i++) {
            Onnx__TensorShapeProto__Dimension *d = ob_mem(sizeof *d);
            onnx__tensor_shape_proto__dimension__init(d);
            if (dims[i] == -1) {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = ob_str("N");
            } else {
                d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            }
            OB_PUSH(sh->dim, sh->n_dim, d);
        }
        tt->shape = sh;
    }
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}

void ob_input(Onnx__GraphProto *g, const char *name, int dtype, int rank,
                      const int64_t *dims)
{
    OB_PUSH(g->input, g->n_input, ob_value_info(name, dtype, rank, dims));
}

void ob_output(Onnx__GraphProto *g, const char *name, int dtype)
{
    OB_PUSH(g->output, g->n_output, ob_value_info(name, dtype, -1, NULL));
}

Onnx__TensorProto *ob_tensor(const char *name, int dtype, int rank, const int64_t *dims)
{
    Onnx__TensorProto *t = ob_mem(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = ob_str(name);
    t->has_data_type = 1;
    t->data_type = dtype;
    t->n_dims = (size_t)rank;
    t->dims = ob_mem((size_t)(rank ? rank : 1) * sizeof(int64_t));
    if (rank)
        memcpy(t->dims, dims, (size_t)rank * sizeof(int64_t));
    return t;
}

void ob_set_raw(Onnx__TensorProto *t, const void *data, size_t size)
{
    t->has_raw_data = 1;
    t->raw_data.len = size;
    t->raw_data.data = ob_mem(size);
    if (size)
        memcpy(t->raw_data.data, data, size);
}

/* A float32 initializer of shape (n) with values 0, 1, 2, ... */
Onnx__TensorProto *ob_float_init(Onnx__GraphProto *g, const char *name, int64_t n)
{
    Onnx__TensorProto *t = ob_tensor(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &n);
    float *v = ob_mem((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)i;
    ob_set_raw(t, v, (size_t)n * sizeof(float));
    OB_PUSH(g->initializer, g->n_initializer, t);
    return t;
}

Onnx__AttributeProto *ob_attr(Onnx__NodeProto *n, const char *name, int type)
{
    Onnx__AttributeProto *a = ob_mem(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = ob_str(name);
    a->has_type = type != 0;
    a->type = type;
    OB_PUSH(n->attribute, n->n_attribute, a);
    return a;
}

void ob_external(Onnx__TensorProto *t, const char *key, const char *value)
{
    if (!t->external_data)
        t->external_data = ob_ptrs();
    Onnx__StringStringEntryProto *e = ob_mem(sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = ob_str(key);
    e->value = ob_str(value);
    OB_PUSH(t->external_data, t->n_external_data, e);
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

uint8_t *ob_pack(const Onnx__ModelProto *m, size_t *size)
{
    *size = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = ob_mem(*size);
    assert_int_equal(onnx__model_proto__pack(m, buf), *size);
    return buf;
}

ld_status ob_load(const Onnx__ModelProto *m, ld_graph **g, ld_error *err)
{
    size_t size;
    uint8_t *buf = ob_pack(m, &size);
    return ld_onnx_load_buffer(g, buf, size, NULL, "test.onnx", err);
}

ld_graph *ob_load_ok(const Onnx__ModelProto *m)
{
    ld_graph *g = NULL;
    ld_error err;
    ld_status st = ob_load(m, &g, &err);
    if (st != LD_OK)
        fail_msg("load failed: %s", err.message);
    return g;
}

void ob_expect_message(ld_status st, ld_status want, const ld_error *err, const char *prefix,
                           const char *substring)
{
    if (st != want)
        fail_msg("status %s, expected %s (message: %s)", ld_status_name(st), ld_status_name(want),
                 err->message);
    if (strncmp(err->message, prefix, strlen(prefix)) != 0 || !strstr(err->message, substring))
        fail_msg("message '%s' should start with '%s' and contain '%s'", err->message, prefix,
                 substring);
    if (strchr(err->message, '\n'))
        fail_msg("message has a newline: '%s'", err->message);
    if (getenv("LD_TEST_VERBOSE"))
        print_message("  error: %s\n", err->message);
}

/* Loads m from memory and expects failure with `substring` in the message. */
void ob_expect_error(const Onnx__ModelProto *m, ld_status want, const char *substring)
{
    ld_graph *g = NULL;
    ld_error err;
    ld_status st = ob_load(m, &g, &err);
    if (st == LD_OK)
        ld_graph_destroy(g);
    assert_null(st == LD_OK ? NULL : g);
    ob_expect_message(st, want, &err, "test.onnx: ", substring);
}

Onnx__ModelProto *ob_relu_model(void)
{
    Onnx__ModelProto *m = ob_model();
    int64_t dims[] = {-1, 3};
    ob_input(m->graph, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dims);
    ob_node(m->graph, "Relu", "", "x", "y");
    ob_output(m->graph, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    return m;
}
