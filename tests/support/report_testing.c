/* layerdiff tests — sessions and reports for renderer tests (report_testing.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/report_testing.h"

static ld_tensor *make(const float *v)
{
    ld_error err;
    ld_tensor *t = NULL;
    ld_shape shape = {.rank = 2, .dims = {2, 2}};
    if (ld_tensor_create(&t, "t", LD_DTYPE_FLOAT32, &shape, &err) != LD_OK)
        fail_msg("%s", err.message);
    memcpy(t->data, v, 4 * sizeof *v);
    return t;
}

static void add(ld_compare_session *s, const char *name, const char *op, int64_t topo,
                const char *input, double error, bool output)
{
    ld_error err;
    const float ref_v[4] = {1, 2, 3, 4};
    float test_v[4] = {1, 2, 3, 4};
    test_v[0] = (float)(1 + error);
    ld_tensor *r = make(ref_v), *t = make(test_v);
    const char *inputs[] = {input};
    ld_compare_item item = {
        .name = name, .node = topo >= 0 ? name : "", .op_type = topo >= 0 ? op : "",
        .topo_index = topo, .precision = topo >= 0 ? LD_PRECISION_FP16 : LD_PRECISION_FP32,
        .counters = {.present = topo >= 0, .overflows = isinf(error) ? 1 : 0,
                     .nans_created = isnan(error) ? 1 : 0},
        .n_inputs = input ? 1 : 0, .inputs = inputs, .is_graph_output = output,
        .ref = r, .test = t, .isolated = topo >= 0 ? t : NULL};
    if (ld_compare_session_add(s, &item, &err) != LD_OK)
        fail_msg("%s", err.message);
    ld_tensor_destroy(r);
    ld_tensor_destroy(t);
}

void rt_session_make(rt_session *rs, const rt_layer *layers, int n)
{
    ld_error err;
    memset(rs, 0, sizeof *rs);
    if (ld_compare_session_create(&rs->s, &rs->opts, &err) != LD_OK)
        fail_msg("%s", err.message);
    add(rs->s, "x", "", -1, NULL, 0, false);
    for (int i = 0; i < n; i++)
        add(rs->s, layers[i].name, layers[i].op ? layers[i].op : "Conv", i,
            i ? layers[i - 1].name : "x", layers[i].error, layers[i].output);
    if (ld_compare_session_finish(rs->s, &err) != LD_OK)
        fail_msg("%s", err.message);
}

void rt_session_free(rt_session *rs)
{
    ld_compare_session_destroy(rs->s);
    ld_tolerance_spec_free(&rs->opts.tol);
}

ld_report *rt_report(const rt_layer *layers, int n, const ld_report_context *ctx)
{
    rt_session rs;
    ld_error err;
    ld_report *r = NULL;
    rt_session_make(&rs, layers, n);
    if (ld_report_from_session(rs.s, ctx, &r, &err) != LD_OK)
        fail_msg("%s", err.message);
    rt_session_free(&rs);
    return r;
}

void rt_write_json(const char *path, const rt_layer *layers, int n, const char *sha,
                   long long epoch)
{
    rt_session rs;
    ld_error err;
    char value[32];
    rt_session_make(&rs, layers, n);
    ld_report_context ctx = {.command = "run", .model_path = "/models/net.onnx",
                             .model_sha256 = sha, .ref_backend = "reference",
                             .test_backend = "emulated", .input_seed = 1};
    if (epoch >= 0) {
        snprintf(value, sizeof value, "%lld", epoch);
        setenv("SOURCE_DATE_EPOCH", value, 1);
    }
    ld_status st = ld_report_write_json(rs.s, &ctx, path, &err);
    unsetenv("SOURCE_DATE_EPOCH");
    if (st != LD_OK)
        fail_msg("%s", err.message);
    rt_session_free(&rs);
}

char *rt_render(const ld_report *r, ld_report_format format, const ld_render_options *opts)
{
    char *buf = NULL;
    size_t len = 0;
    ld_error err;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ld_status st = ld_report_render(r, format, opts, f, &err);
    fclose(f);
    if (st != LD_OK)
        fail_msg("%s", err.message);
    return buf;
}

int rt_count(const char *haystack, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = haystack; (p = strstr(p, needle)) != NULL; p += len)
        n++;
    return n;
}
