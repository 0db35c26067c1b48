/* layerdiff — nesting-depth check run before protobuf-c unpacks a file.
 *
 * protobuf-c (1.4) unpacks nested messages recursively with no depth limit,
 * and ONNX messages can nest without bound (a subgraph attribute holds a
 * graph whose nodes hold subgraphs; a sequence type holds a type), so a
 * 30 KB file nesting 5,000 levels overflows the stack. This walks the wire
 * format first with an explicit stack, descending only into fields the
 * message descriptors declare as messages, and refuses files nested deeper
 * than any real model. Malformed encodings are left for protobuf-c to
 * refuse (and diagnose_parse_failure to explain). */
#include "onnx/onnx_internal.h"

#include <inttypes.h>

enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* 0: ok, else the varint runs past end or is longer than 10 bytes. */
static int next_varint(const uint8_t *data, size_t end, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 70 && *pos < end; shift += 7) {
        uint8_t byte = data[(*pos)++];
        if (shift < 64)
            v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return 1;
}

ld_status ld_onnx_check_nesting(const uint8_t *data, size_t size,
                                const ProtobufCMessageDescriptor *root, const char *kind,
                                ld_error *err)
{
    struct level {
        const ProtobufCMessageDescriptor *desc;
        size_t end;
    } stack[LD_ONNX_MAX_NESTING + 1];
    int depth = 0;
    size_t pos = 0;
    stack[0].desc = root;
    stack[0].end = size;
    for (;;) {
        if (pos >= stack[depth].end) {
            if (depth == 0)
                return LD_OK;
            depth--;
            continue;
        }
        size_t end = stack[depth].end;
        uint64_t tag, value;
        if (next_varint(data, end, &pos, &tag) != 0)
            return LD_OK; /* malformed: protobuf-c refuses it */
        switch (tag & 7) {
        case WIRE_VARINT:
            if (next_varint(data, end, &pos, &value) != 0)
                return LD_OK;
            break;
        case WIRE_I64:
        case WIRE_I32:
            if (end - pos < ((tag & 7) == WIRE_I64 ? 8u : 4u))
                return LD_OK;
            pos += (tag & 7) == WIRE_I64 ? 8 : 4;
            break;
        case WIRE_LEN: {
            if (next_varint(data, end, &pos, &value) != 0 || value > end - pos)
                return LD_OK;
            const ProtobufCFieldDescriptor *f =
                tag >> 3 <= UINT32_MAX
                    ? protobuf_c_message_descriptor_get_field(stack[depth].desc,
                                                              (unsigned)(tag >> 3))
                    : NULL;
            if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || !f->descriptor) {
                pos += (size_t)value; /* bytes, string, packed scalars, unknown field */
                break;
            }
            if (depth == LD_ONNX_MAX_NESTING)
                return ld_error_set(err, LD_ERR_INPUT, "not a valid ONNX %s: messages nested "
                                    "more than %d deep (at byte %zu); layerdiff refuses such "
                                    "files to protect its parser", kind, LD_ONNX_MAX_NESTING,
                                    pos);
            depth++;
            stack[depth].desc = f->descriptor;
            stack[depth].end = pos + (size_t)value;
            break;
        }
        default:
            return LD_OK; /* groups (unused by ONNX) or garbage: protobuf-c decides */
        }
    }
}
