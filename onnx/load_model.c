/* layerdiff — public entry points of the ONNX loader (include/layerdiff/onnx.h):
 * model files and buffers, TensorProto (.pb) files and buffers.
 *
 * protobuf-c unpacks the whole message with the default allocator; the
 * loader copies what it needs into the IR and frees the protobuf before
 * returning. When protobuf-c refuses the bytes, a short scan of the
 * top-level wire format tells an empty file, a truncated file and a file
 * that is not protobuf at all apart, so the message says which it is. */
#include "layerdiff/onnx.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_internal.h"

/* --- diagnosing bytes protobuf-c refused ------------------------------------ */

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* A message's top-level fields: number, name and the wire types allowed
 * (bit per type; repeated scalars may also come packed as LEN). */
typedef struct known_field {
    unsigned number;
    const char *name;
    unsigned wire_mask;
} known_field;

#define W(t) (1u << (t))
static const known_field model_fields[] = {
    {1, "ir_version", W(WIRE_VARINT)},  {2, "producer_name", W(WIRE_LEN)},
    {3, "producer_version", W(WIRE_LEN)}, {4, "domain", W(WIRE_LEN)},
    {5, "model_version", W(WIRE_VARINT)}, {6, "doc_string", W(WIRE_LEN)},
    {7, "graph", W(WIRE_LEN)},          {8, "opset_import", W(WIRE_LEN)},
    {14, "metadata_props", W(WIRE_LEN)}, {20, "training_info", W(WIRE_LEN)},
    {25, "functions", W(WIRE_LEN)},     {0, NULL, 0},
};
static const known_field tensor_fields[] = {
    {1, "dims", W(WIRE_VARINT) | W(WIRE_LEN)},   {2, "data_type", W(WIRE_VARINT)},
    {3, "segment", W(WIRE_LEN)},                 {4, "float_data", W(WIRE_I32) | W(WIRE_LEN)},
    {5, "int32_data", W(WIRE_VARINT) | W(WIRE_LEN)}, {6, "string_data", W(WIRE_LEN)},
    {7, "int64_data", W(WIRE_VARINT) | W(WIRE_LEN)}, {8, "name", W(WIRE_LEN)},
    {9, "raw_data", W(WIRE_LEN)},                {10, "double_data", W(WIRE_I64) | W(WIRE_LEN)},
    {11, "uint64_data", W(WIRE_VARINT) | W(WIRE_LEN)}, {12, "doc_string", W(WIRE_LEN)},
    {13, "external_data", W(WIRE_LEN)},          {14, "data_location", W(WIRE_VARINT)},
    {0, NULL, 0},
};
#undef W

static const known_field *find_field(const known_field *table, uint64_t number)
{
    for (; table->name; table++)
        if (table->number == number)
            return table;
    return NULL;
}

/* 0: ok, 1: ran past the end, 2: longer than 10 bytes. */
static int read_varint(const uint8_t *data, size_t size, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*pos >= size)
            return 1;
        uint8_t byte = data[(*pos)++];
        v |= (uint64_t)(byte & 0x7f) << (shift < 64 ? shift : 63);
        if (!(byte & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return 2;
}

/* Writes why protobuf-c refused data (a `kind` message) into err. */
static ld_status diagnose_parse_failure(const uint8_t *data, size_t size, const char *kind,
                                        const char *proto, const known_field *fields,
                                        ld_error *err)
{
    size_t pos = 0;
    for (bool first = true; pos < size; first = false) {
        size_t start = pos;
        uint64_t tag, len = 0;
        int r = read_varint(data, size, &pos, &tag);
        const known_field *f = r == 0 ? find_field(fields, tag >> 3) : NULL;
        unsigned wire = (unsigned)(tag & 7);
        if (first && (!f || !(f->wire_mask & (1u << wire))))
            return ld_error_set(err, LD_ERR_INPUT, "not an ONNX %s (does not start with a "
                                "%s field: first byte 0x%02x; a text or other non-protobuf "
                                "file?)", kind, proto, data[0]);
        if (r == 1)
            goto truncated;
        if (r == 2 || (tag >> 3) == 0 || (wire != WIRE_VARINT && wire != WIRE_I64 &&
                                          wire != WIRE_LEN && wire != WIRE_I32))
            return ld_error_set(err, LD_ERR_INPUT, "not a valid ONNX %s (protobuf parse "
                                "failed: corrupt field tag at byte %zu)", kind, start);
        if (wire == WIRE_VARINT)
            r = read_varint(data, size, &pos, &len);
        else if (wire == WIRE_LEN)
            r = read_varint(data, size, &pos, &len);
        else
            len = wire == WIRE_I64 ? 8 : 4;
        if (r == 1)
            goto truncated;
        if (wire != WIRE_VARINT && len > size - pos)
            return ld_error_set(err, LD_ERR_INPUT, "not a valid ONNX %s (protobuf parse "
                                "failed: file truncated; field %" PRIu64 " (%s) at byte %zu "
                                "needs %" PRIu64 " bytes, only %zu remain)", kind, tag >> 3,
                                f ? f->name : "unknown", start, len, size - pos);
        if (wire != WIRE_VARINT)
            pos += (size_t)len;
    }
    return ld_error_set(err, LD_ERR_INPUT, "not a valid ONNX %s (protobuf parse failed: "
                        "corrupt data inside a nested message)", kind);
truncated:
    return ld_error_set(err, LD_ERR_INPUT, "not a valid ONNX %s (protobuf parse failed: file "
                        "truncated in the middle of a field)", kind);
}

/* --- models --------------------------------------------------------------------- */

static ld_status load_opsets(ld_graph *root, const Onnx__ModelProto *mp, ld_error *err)
{
    size_t n = mp->n_opset_import;
    /* IR version < 3 predates opset_import: those models mean ai.onnx v1. */
    bool implied = n == 0 && mp->has_ir_version && mp->ir_version < 3;
    root->opsets = calloc(n ? n : 1, sizeof *root->opsets);
    if (!root->opsets)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (implied) {
        root->opsets[0].domain = strdup("");
        root->opsets[0].version = 1;
        root->n_opsets = 1;
        return root->opsets[0].domain ? LD_OK : ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const Onnx__OperatorSetIdProto *op = mp->opset_import[i];
        const char *domain = op->domain && strcmp(op->domain, "ai.onnx") != 0 ? op->domain : "";
        if (!op->has_version || op->version < 1)
            return ld_error_set(err, LD_ERR_INPUT, "opset import for domain '%s' has no valid "
                                "version", *domain ? domain : "ai.onnx");
        int64_t existing = ld_graph_opset(root, domain);
        if (existing == op->version)
            continue;
        if (existing >= 0)
            return ld_error_set(err, LD_ERR_INPUT, "domain '%s' imported twice, as opset %"
                                PRId64 " and %" PRId64, *domain ? domain : "ai.onnx", existing,
                                op->version);
        ld_opset *slot = &root->opsets[root->n_opsets];
        if (!(slot->domain = strdup(domain)))
            return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
        slot->version = op->version;
        root->n_opsets++;
    }
    return LD_OK;
}

static char *dup_or_empty(const char *s)
{
    return strdup(s ? s : "");
}

static ld_status load_metadata(ld_graph *root, const Onnx__ModelProto *mp, const char *path,
                               ld_error *err)
{
    root->ir_version = mp->has_ir_version ? mp->ir_version : 0;
    root->model_version = mp->has_model_version ? mp->model_version : 0;
    root->producer_name = dup_or_empty(mp->producer_name);
    root->producer_version = dup_or_empty(mp->producer_version);
    root->model_domain = dup_or_empty(mp->domain);
    root->doc_string = dup_or_empty(mp->doc_string);
    root->model_path = path ? strdup(path) : NULL;
    if (!root->producer_name || !root->producer_version || !root->model_domain ||
        !root->doc_string || (path && !root->model_path))
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    if (mp->n_functions > 0)
        return ld_graph_add_note(root, err, "the model defines %zu local function(s) (first: "
                                 "'%s'); layerdiff does not expand them", mp->n_functions,
                                 mp->functions[0]->name ? mp->functions[0]->name : "");
    return LD_OK;
}

static ld_status load_model_proto(ld_graph **out, const Onnx__ModelProto *mp,
                                  const char *base_dir, const char *path, ld_error *err)
{
    if (!mp->graph)
        return ld_error_set(err, LD_ERR_INPUT, "not a valid ONNX model (ModelProto has no "
                            "graph)");
    ld_graph *root = calloc(1, sizeof *root);
    if (!root)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory");
    ld_onnx_ctx ctx = {base_dir, root, true};
    ld_status st = load_metadata(root, mp, path, err);
    if (st == LD_OK)
        st = load_opsets(root, mp, err);
    if (st == LD_OK)
        st = ld_onnx_graph_fill(root, mp->graph, &ctx, err);
    if (st != LD_OK) {
        ld_graph_destroy(root);
        return st;
    }
    *out = root;
    return LD_OK;
}

/* Unpacks and converts. *owned (may be NULL) is a buffer holding `data` that
 * can be freed as soon as protobuf-c has copied what it needs, which keeps
 * the peak memory of large models down. */
static ld_status load_model_bytes(ld_graph **out, const uint8_t *data, size_t size,
                                  uint8_t **owned, const char *base_dir, const char *path,
                                  ld_error *err)
{
    if (size == 0)
        return ld_error_set(err, LD_ERR_INPUT, "empty file (0 bytes), not an ONNX model");
    ld_status st = ld_onnx_check_nesting(data, size, &onnx__model_proto__descriptor, "model",
                                         err);
    if (st != LD_OK)
        return st;
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, size, data);
    if (!mp)
        return diagnose_parse_failure(data, size, "model", "ModelProto", model_fields, err);
    if (owned) {
        free(*owned);
        *owned = NULL;
    }
    st = load_model_proto(out, mp, base_dir, path, err);
    onnx__model_proto__free_unpacked(mp, NULL);
    return st;
}

/* Public functions work on a local error so they can prefix the path even
 * when the caller passed err == NULL. */
static ld_status finish(ld_status st, ld_error *local, const char *display, ld_error *err)
{
    if (st != LD_OK && display)
        ld_error_prefix(local, "%s", display);
    if (err)
        *err = *local;
    return st;
}

ld_status ld_onnx_load_file(ld_graph **out, const char *path, ld_error *err)
{
    ld_error local;
    uint8_t *data = NULL;
    size_t size = 0;
    char *base_dir = NULL;
    ld_error_clear(&local);
    *out = NULL;
    ld_status st = ld_onnx_read_file(path, &data, &size, &local);
    if (st != LD_OK)
        return finish(st, &local, NULL, err); /* the message names the path already */
    base_dir = ld_onnx_dirname(path);
    if (!base_dir)
        st = ld_error_set(&local, LD_ERR_NOMEM, "out of memory");
    else
        st = load_model_bytes(out, data, size, &data, base_dir, path, &local);
    free(data);
    free(base_dir);
    return finish(st, &local, path, err);
}

ld_status ld_onnx_load_buffer(ld_graph **out, const uint8_t *data, size_t size,
                              const char *base_dir, const char *display_name, ld_error *err)
{
    ld_error local;
    ld_error_clear(&local);
    *out = NULL;
    ld_status st = load_model_bytes(out, data, size, NULL, base_dir, NULL, &local);
    return finish(st, &local, display_name ? display_name : "<memory>", err);
}

/* --- TensorProto files -------------------------------------------------------------- */

static ld_status load_tensor_bytes(ld_tensor **out, const uint8_t *data, size_t size,
                                   const char *base_dir, ld_error *err)
{
    if (size == 0)
        return ld_error_set(err, LD_ERR_INPUT, "empty file (0 bytes), not an ONNX tensor");
    ld_status st = ld_onnx_check_nesting(data, size, &onnx__tensor_proto__descriptor, "tensor",
                                         err);
    if (st != LD_OK)
        return st;
    Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, data);
    if (!tp)
        return diagnose_parse_failure(data, size, "tensor", "TensorProto", tensor_fields, err);
    char what[300];
    snprintf(what, sizeof what, "tensor '%s'", tp->name ? tp->name : "");
    ld_onnx_ctx ctx = {base_dir, NULL, false};
    /* Sequence and optional .pb files (SequenceProto, OptionalProto) parse
     * as a TensorProto whose field 3 (their elements) reads as `segment`. */
    if (tp->segment)
        st = ld_error_set(err, LD_ERR_UNSUPPORTED, "%s: not a plain tensor (it has a segment "
                          "field: a segmented tensor, or a sequence/optional .pb file, neither "
                          "of which layerdiff supports)", what);
    else
        st = ld_onnx_tensor_from_proto(out, tp, what, &ctx, err);
    onnx__tensor_proto__free_unpacked(tp, NULL);
    return st;
}

ld_status ld_onnx_load_tensor_file(ld_tensor **out, const char *path, ld_error *err)
{
    ld_error local;
    uint8_t *data = NULL;
    size_t size = 0;
    char *base_dir = NULL;
    ld_error_clear(&local);
    *out = NULL;
    ld_status st = ld_onnx_read_file(path, &data, &size, &local);
    if (st != LD_OK)
        return finish(st, &local, NULL, err);
    base_dir = ld_onnx_dirname(path);
    if (!base_dir)
        st = ld_error_set(&local, LD_ERR_NOMEM, "out of memory");
    else
        st = load_tensor_bytes(out, data, size, base_dir, &local);
    free(data);
    free(base_dir);
    return finish(st, &local, path, err);
}

ld_status ld_onnx_load_tensor_buffer(ld_tensor **out, const uint8_t *data, size_t size,
                                     const char *display_name, ld_error *err)
{
    ld_error local;
    ld_error_clear(&local);
    *out = NULL;
    ld_status st = load_tensor_bytes(out, data, size, NULL, &local);
    return finish(st, &local, display_name ? display_name : "<memory>", err);
}
