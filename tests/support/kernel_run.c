/* layerdiff tests — run one ONNX node on the reference backend (see kernel_run.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "layerdiff/backend.h"
#include "layerdiff/onnx.h"
#include "onnx/onnx.pb-c.h"
#include "tests/support/kernel_run.h"
#include "tests/support/onnx_builder.h"

static size_t input_bytes(const kr_input *in)
{
    size_t n = 1;
    for (int d = 0; d < in->rank; d++)
        n *= (size_t)in->dims[d];
    return n * ld_dtype_size(in->dtype);
}

static void add_attr(Onnx__NodeProto *node, const kr_attr *a)
{
    Onnx__AttributeProto *p;
    switch (a->kind) {
    case KR_INT:
        p = ob_attr(node, a->name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
        p->has_i = 1, p->i = a->i;
        break;
    case KR_FLOAT:
        p = ob_attr(node, a->name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
        p->has_f = 1, p->f = a->f;
        break;
    case KR_STRING:
        p = ob_attr(node, a->name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
        p->has_s = 1;
        p->s.data = (uint8_t *)ob_str(a->s);
        p->s.len = strlen(a->s);
        break;
    case KR_INTS:
        p = ob_attr(node, a->name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
        p->ints = ob_mem(sizeof a->ints);
        memcpy(p->ints, a->ints, (size_t)a->n * sizeof(int64_t));
        p->n_ints = (size_t)a->n;
        break;
    default:
        fail_msg("bad attribute kind %d", a->kind);
    }
}

static Onnx__ModelProto *one_node(int opset, const char *op, const kr_attr *attrs,
                                  const kr_input *ins, int n_in, const char *outs)
{
    Onnx__ModelProto *m = ob_model();
    m->opset_import[0]->version = opset;
    Onnx__GraphProto *g = m->graph;
    char list[512] = "";
    for (int i = 0; i < n_in; i++) {
        const kr_input *in = &ins[i];
        strcat(list, i ? "," : "");
        if (!in->name)
            continue;
        strcat(list, in->name);
        if (in->initializer) {
            Onnx__TensorProto *t = ob_tensor(in->name, (int)in->dtype, in->rank, in->dims);
            ob_set_raw(t, in->data, input_bytes(in));
            OB_PUSH(g->initializer, g->n_initializer, t);
        } else {
            ob_input(g, in->name, (int)in->dtype, in->rank, in->dims);
        }
    }
    Onnx__NodeProto *node = ob_node(g, op, "node0", list, outs);
    for (const kr_attr *a = attrs; a && a->kind != KR_END; a++)
        add_attr(node, a);
    char copy[256];
    snprintf(copy, sizeof copy, "%s", outs);
    for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
        ob_output(g, tok, 0);
    return m;
}

typedef struct capture {
    const ld_graph *g;
    kr_result *r;
} capture;

static ld_status capture_outputs(void *user, const ld_tensor_event *ev, ld_error *err)
{
    capture *c = user;
    for (int k = 0; k < c->g->n_outputs && k < KR_MAX_OUT; k++)
        if (c->g->outputs[k] == ev->value && !c->r->t[k])
            return ld_tensor_clone(&c->r->t[k], ev->tensor, NULL, err);
    return LD_OK;
}

void kr_run(int opset, const char *op, const kr_attr *attrs, const kr_input *ins, int n_in,
            const char *outs, int threads, kr_result *r)
{
    memset(r, 0, sizeof *r);
    ld_graph *g = ob_load_ok(one_node(opset, op, attrs, ins, n_in, outs));
    const ld_backend_vtable *vt = ld_backend_find("reference");
    assert_non_null(vt);
    void *b = NULL;
    ld_backend_config cfg = {.threads = threads};
    ld_tensor *inputs[16] = {NULL};
    ld_shape shapes[16];
    int n = 0;
    r->st = vt->create(&b, &cfg, &r->err);
    assert_int_equal(r->st, LD_OK);
    for (int i = 0; i < n_in; i++) {
        if (!ins[i].name || ins[i].initializer)
            continue;
        assert_true(n < 16);
        ld_shape s = {.rank = ins[i].rank};
        memcpy(s.dims, ins[i].dims, sizeof ins[i].dims);
        shapes[n] = s;
        assert_int_equal(ld_tensor_wrap(&inputs[n], ins[i].name, ins[i].dtype, &s,
                                        (void *)ins[i].data, &r->err), LD_OK);
        n++;
    }
    assert_int_equal(n, g->n_inputs);
    r->st = vt->prepare(b, g, shapes, &r->err);
    capture c = {g, r};
    if (r->st == LD_OK)
        r->st = vt->run(b, (const ld_tensor *const *)inputs, capture_outputs, &c, &r->err);
    for (int i = 0; i < n; i++)
        ld_tensor_destroy(inputs[i]);
    vt->destroy(b);
    ld_graph_destroy(g);
}

void kr_free(kr_result *r)
{
    for (int k = 0; k < KR_MAX_OUT; k++) {
        ld_tensor_destroy(r->t[k]);
        r->t[k] = NULL;
    }
}

void kr_expect_ok(const kr_result *r)
{
    if (r->st != LD_OK)
        fail_msg("run failed: %s", r->err.message);
}

void kr_expect_fail(const kr_result *r, ld_status want, const char *substring)
{
    ob_expect_message(r->st, want, &r->err, "node 'node0' (", substring);
}

void kr_expect_fail_op(const kr_result *r, ld_status want, const char *op, const char *substring)
{
    char prefix[128];
    kr_expect_fail(r, want, substring);
    snprintf(prefix, sizeof prefix, "node 'node0' (%s): ", op);
    if (strncmp(r->err.message, prefix, strlen(prefix)) != 0)
        fail_msg("message '%s' should start with '%s'", r->err.message, prefix);
}

void kr_expect_shape(const ld_tensor *t, int rank, const int64_t *dims)
{
    assert_non_null(t);
    assert_int_equal(t->shape.rank, rank);
    for (int d = 0; d < rank; d++)
        assert_int_equal(t->shape.dims[d], dims[d]);
}

void kr_expect_values(const ld_tensor *t, const double *want, int64_t n)
{
    assert_non_null(t);
    assert_int_equal(t->count, n);
    for (int64_t i = 0; i < n; i++) {
        double got = ld_tensor_get_double(t, i);
        if (!(got == want[i] || (isnan(got) && isnan(want[i]))))
            fail_msg("element %lld: got %.17g, expected %.17g", (long long)i, got, want[i]);
    }
}

void kr_expect_i64(const ld_tensor *t, const int64_t *want, int64_t n)
{
    assert_non_null(t);
    assert_int_equal(t->dtype, LD_DTYPE_INT64);
    assert_int_equal(t->count, n);
    for (int64_t i = 0; i < n; i++)
        if (((const int64_t *)t->data)[i] != want[i])
            fail_msg("element %lld: got %lld, expected %lld", (long long)i,
                     (long long)((const int64_t *)t->data)[i], (long long)want[i]);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

double kr_uniform(void)
{
    rng_state = rng_state * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
