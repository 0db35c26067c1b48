#!/usr/bin/python3
"""Writes the bad-input corpus tests/bad-inputs/ (malformed models, tensors, .npy files, dumps).

    /usr/bin/python3 scripts/gen-bad-inputs.py tests/bad-inputs

Needs Debian's python3-onnx (1.12), numpy and h5py. Deterministic: derived
from the committed fixtures and fixed values only, so running it twice gives
the same bytes (HDF5 files are written without timestamps). Every case is
one file plus one row of tests/bad-inputs/cases.tsv:

    file <TAB> exit code <TAB> expected substring <TAB> command

The command is a `layerdiff` argument list where {} is the file and {dir} this
folder; tests/e2e/test_bad_inputs.sh runs it and checks the exit code, that
stderr is one line holding the substring, and that nothing else was written.
Cases found by fuzzing are listed by hand in fuzz-found.tsv (same columns)
and fixtures/bad/*.onnx are run from the test as they are, not copied.

Bit flips are single-bit changes to fixtures/cnn.onnx at positions found by
walking its protobuf encoding, chosen so the outcome can be argued from the
format (a length that runs past the end, a dim that no longer matches the
raw data, ...) rather than taken from whatever layerdiff prints.
"""

import os
import shutil
import struct
import sys

import h5py
import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = []  # (file, exit code, substring, command)

INSPECT = "inspect {}"
LOAD_X = "run {dir}/one_input.onnx --load-inputs x:{}"   # x: float32 [2, 3]
LOAD_DUMP = "run {dir}/one_input.onnx --load-inputs {}"


def case(out, name, data, substring, command=INSPECT, code=2):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    CASES.append((name, code, substring, command))


# --- protobuf wire walking (for bit flips at known places) -----------------------------

def varint(buf, pos):
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def fields(buf, start, end):
    """Yields (number, wire type, tag offset, payload offset, payload length or value)."""
    pos = start
    while pos < end:
        tag_at = pos
        tag, pos = varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            at = pos
            value, pos = varint(buf, pos)
            yield number, wire, tag_at, at, value
        elif wire == 2:
            length, at = varint(buf, pos)
            yield number, wire, tag_at, at, length
            pos = at + length
        elif wire == 5:
            yield number, wire, tag_at, pos, 4
            pos += 4
        elif wire == 1:
            yield number, wire, tag_at, pos, 8
            pos += 8
        else:
            raise ValueError("unexpected wire type %d" % wire)


def find(buf, start, end, number):
    return [f for f in fields(buf, start, end) if f[0] == number]


def flip(buf, offset, bit):
    b = bytearray(buf)
    b[offset] ^= 1 << bit
    return bytes(b)


# --- models ---------------------------------------------------------------------------------

def vi(name, dtype=TP.FLOAT, shape=(2, 3)):
    return helper.make_tensor_value_info(name, dtype, list(shape) if shape is not None else None)


def model_bytes(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                          producer_name="layerdiff-gen-bad-inputs", producer_version="1")
    m.ir_version = 8
    return m.SerializeToString()


def identity_model():
    """x float32 [2,3] -> Identity -> y: the model the input-file cases load into."""
    return model_bytes([helper.make_node("Identity", ["x"], ["y"], name="id")], [vi("x")], [vi("y")])


def external_tensor(location, offset=None, length=None, name="w", dims=(4,)):
    t = TP()
    t.name = name
    t.data_type = TP.FLOAT
    t.dims.extend(dims)
    t.data_location = TP.EXTERNAL
    for key, value in [("location", location), ("offset", offset), ("length", length)]:
        if value is not None:
            e = t.external_data.add()
            e.key, e.value = key, str(value)
    return t


def with_initializer(t):
    return model_bytes([helper.make_node("Identity", [t.name], ["y"], name="id")], [],
                       [vi("y", shape=None)], inits=[t])


def raw_tensor(name, dtype, dims, raw):
    t = TP()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def small_cnn():
    """input [1,1,6,6] -> Conv(conv1.weight [4,1,3,3], conv1.bias [4]) -> Relu -> output: the
    base of the truncations and bit flips (fixtures/cnn.onnx has the same layout, 100x bigger)."""
    w = numpy_helper.from_array((np.arange(36, dtype=np.float32) / 36).reshape(4, 1, 3, 3), "conv1.weight")
    b = numpy_helper.from_array(np.arange(4, dtype=np.float32), "conv1.bias")
    nodes = [helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["conv1_out"], name="conv1"),
             helper.make_node("Relu", ["conv1_out"], ["output"], name="relu1")]
    return model_bytes(nodes, [vi("input", shape=(1, 1, 6, 6))], [vi("output", shape=(1, 4, 4, 4))],
                       inits=[w, b])


def onnx_cases(out):
    cnn = small_cnn()
    n = len(cnn)
    # Truncations (fixtures/bad/truncated.onnx is the first half).
    case(out, "onnx_truncated_1byte.onnx", cnn[:1], "truncated")
    case(out, "onnx_truncated_last_byte.onnx", cnn[:-1], "truncated")
    graph = find(cnn, 0, n, 7)[0]
    g0, g1 = graph[3], graph[3] + graph[4]
    inits = find(cnn, g0, g1, 5)
    last = inits[-1]
    raw = find(cnn, last[3], last[3] + last[4], 9)[0]
    case(out, "onnx_truncated_in_weights.onnx", cnn[:raw[3] + raw[4] // 2], "truncated")
    case(out, "onnx_truncated_run.onnx", cnn[:n // 3], "truncated", "run {}")

    # Bit flips.
    case(out, "onnx_flip_first_tag.onnx", flip(cnn, 0, 0), "not an ONNX model")  # field 1 varint -> 64-bit
    # Bit 6 of the last byte of the graph's length varint: the graph claims more bytes than the file has.
    case(out, "onnx_flip_graph_length.onnx", flip(cnn, graph[3] - 1, 6), "truncated")
    w = inits[0]  # conv1.weight [8, 3, 3, 3] float32 raw
    w0, w1 = w[3], w[3] + w[4]
    dim0 = find(cnn, w0, w1, 1)[0]
    case(out, "onnx_flip_dims.onnx", flip(cnn, dim0[3], 0), "raw_data has 144 bytes, but 45 elements")  # 4 -> 5
    dtype = find(cnn, w0, w1, 2)[0]
    case(out, "onnx_flip_data_type.onnx", flip(cnn, dtype[3], 6), "unknown data type 65")  # FLOAT(1) -> 65
    # raw_data length 144 (0x90 0x01) -> 145: the last field of the initializer now runs one
    # byte past the initializer's own length, which protobuf-c refuses.
    wraw = find(cnn, w0, w1, 9)[0]
    case(out, "onnx_flip_raw_length.onnx", flip(cnn, wraw[2] + 1, 0), "protobuf parse failed")
    node = find(cnn, g0, g1, 1)[0]  # conv1: inputs input, conv1.weight, conv1.bias
    weight_ref = find(cnn, node[3], node[3] + node[4], 1)[1]
    # "conv1.weight" -> "conv1.weighu": no initializer or node provides it.
    case(out, "onnx_flip_input_name.onnx", flip(cnn, weight_ref[3] + weight_ref[4] - 1, 0),
         "input 'conv1.weighu' is not a graph input, an initializer or the output of any node")

    # Graph structure (fixtures/bad has cycle, dangling_input, duplicate_name).
    relu = lambda i, o, name: helper.make_node("Relu", [i], [o], name=name)
    case(out, "onnx_self_loop.onnx", model_bytes(
        [helper.make_node("Add", ["x", "t"], ["t"], name="loop")], [vi("x")], [vi("t")]), "cycle")
    case(out, "onnx_cycle3.onnx", model_bytes(
        [helper.make_node("Add", ["x", "c"], ["a"], name="n1"), relu("a", "b", "n2"), relu("b", "c", "n3")],
        [vi("x")], [vi("c")]), "cycle")
    case(out, "onnx_duplicate_initializer.onnx", model_bytes(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vi("x")], [vi("y")],
        inits=[numpy_helper.from_array(np.ones((2, 3), np.float32), "w")] * 2),
        "duplicate tensor name 'w': two initializers have it")
    case(out, "onnx_duplicate_input.onnx", model_bytes(
        [relu("x", "y", "r")], [vi("x"), vi("x")], [vi("y")]), "duplicate tensor name 'x'")
    case(out, "onnx_output_shadows_input.onnx", model_bytes(
        [relu("x", "x", "r")], [vi("x")], [vi("x")]), "duplicate tensor name 'x'")
    case(out, "onnx_dangling_output.onnx", model_bytes(
        [relu("x", "y", "r")], [vi("x")], [vi("y"), vi("ghost")]),
        "graph output 'ghost' is not produced by any node")
    then_g = helper.make_graph([relu("ghost", "t", "inner")], "then", [], [vi("t")])
    else_g = helper.make_graph([relu("x", "e", "inner2")], "else", [], [vi("e")])
    case(out, "onnx_dangling_in_subgraph.onnx", model_bytes(
        [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
        [vi("c", TP.BOOL, ()), vi("x")], [vi("y")]),
        "input 'ghost' is not a graph input")
    case(out, "onnx_no_op_type.onnx", model_bytes(
        [helper.make_node("", ["x"], ["y"], name="nothing")], [vi("x")], [vi("y")]), "has no op_type")
    twice = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)
    twice.attribute.extend([helper.make_attribute("axis", 0)])
    case(out, "onnx_duplicate_attribute.onnx", model_bytes([twice], [vi("x")], [vi("y")]),
         "attribute 'axis' given twice")

    # Sizes that overflow (fixtures/bad/dim_overflow has [2^32, 2^32]).
    case(out, "onnx_dims_overflow_3d.onnx",
         with_initializer(raw_tensor("w", TP.FLOAT, [3037000500, 3037000500, 1], b"")), "int64")
    case(out, "onnx_bytes_overflow.onnx",
         with_initializer(raw_tensor("w", TP.DOUBLE, [2**61], b"")),
         "2305843009213693952 elements of 8 bytes exceed the address space")  # count fits, bytes do not
    case(out, "onnx_input_dims_overflow.onnx", model_bytes(
        [relu("x", "y", "r")], [vi("x", shape=(2**32, 2**32))], [vi("y", shape=None)]),
        "shape 4294967296x4294967296 has more elements than fit in int64", "run {}")
    case(out, "onnx_input_shapes_overflow.onnx", model_bytes(
        [relu("x", "y", "r")], [vi("x", shape=("batch", 2**40))], [vi("y", shape=None)]),
        "shape 16777216x1099511627776 has more elements than fit in int64",
        "run {} --input-shapes batch:16777216")

    # External data (fixtures/bad has '../', a missing file and an offset past the end).
    with open(os.path.join(out, "ext16.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    for name, location, offset, length, text in [
        ("absolute", "/etc/hostname", 0, 16, "is not a relative path inside the model's folder"),
        ("backslash", "..\\bad-inputs\\ext16.bin", 0, 16, "is not a relative path inside the model's folder"),
        ("drive", "C:\\weights\\ext16.bin", 0, 16, "is not a relative path inside the model's folder"),
        ("dotdot_middle", "sub/../../bad-inputs/ext16.bin", 0, 16, "is not a relative path inside"),
        ("length_past_end", "ext16.bin", 8, 16, "runs past the end of 'ext16.bin'"),
        ("length_mismatch", "ext16.bin", 0, 8, "is 8 bytes, but its dtype and shape need 16"),
        ("offset_negative", "ext16.bin", -1, 16, "offset '-1' is not a non-negative integer"),
        ("offset_not_number", "ext16.bin", "0x10", 16, "offset '0x10' is not a non-negative integer"),
        ("directory", ".", 0, 16, "is not a regular file"),
        ("huge", "ext16.bin", 0, None, "but its dtype and shape need 1099511627776"),
    ]:
        dims = (2**38,) if name == "huge" else (4,)
        case(out, "onnx_external_%s.onnx" % name,
             with_initializer(external_tensor(location, offset, length, dims=dims)), text)
    no_loc = external_tensor("ext16.bin")
    del no_loc.external_data[0]
    case(out, "onnx_external_no_location.onnx", with_initializer(no_loc), "no 'location' entry")


def deep_type(depth):
    """A graph input whose TypeProto nests sequence_type `depth` times (wire bytes, built inside out)."""
    def ld(number, payload):
        return bytes([(number << 3) | 2]) + encode_varint(len(payload)) + payload
    t = ld(1, b"\x08\x01")  # tensor_type { elem_type: FLOAT }
    for _ in range(depth):
        t = ld(4, ld(1, t))  # sequence_type { elem_type: <t> }
    value_info = ld(1, b"x") + ld(2, t)
    graph = ld(11, value_info) + ld(2, b"deep")
    return b"\x08\x08" + ld(7, graph) + ld(8, b"\x10\x0d")  # ir_version 8, opset 13


def deep_subgraphs(depth):
    """If nodes nested `depth` deep through then_branch (3 messages per level)."""
    def ld(number, payload):
        return bytes([(number << 3) | 2]) + encode_varint(len(payload)) + payload
    node = ld(1, b"x") + ld(2, b"y") + ld(4, b"Relu")
    for _ in range(depth):
        attr = ld(1, b"then_branch") + b"\xa0\x01\x05" + ld(6, ld(1, node) + ld(2, b"g"))  # type GRAPH
        node = ld(1, b"c") + ld(2, b"y") + ld(4, b"If") + ld(5, attr)
    graph = ld(1, node) + ld(2, b"deep")
    return b"\x08\x08" + ld(7, graph) + ld(8, b"\x10\x0d")


def encode_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


# --- TensorProto (.pb) files --------------------------------------------------------------------

def pb_cases(out):
    good = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "x").SerializeToString()
    case(out, "pb_truncated.pb", good[:-5], "truncated", LOAD_X)
    case(out, "pb_text.pb", b"x = [1, 2, 3]\n", "not an ONNX tensor", LOAD_X)
    case(out, "pb_unknown_dtype.pb", raw_tensor("x", 99, [2, 3], b"\0" * 24).SerializeToString(),
         "unknown data type 99", LOAD_X)
    case(out, "pb_raw_size.pb", raw_tensor("x", TP.FLOAT, [2, 3], b"\0" * 20).SerializeToString(),
         "raw_data has 20 bytes", LOAD_X)
    case(out, "pb_dims_overflow.pb", raw_tensor("x", TP.FLOAT, [2**32, 2**32], b"").SerializeToString(),
         "int64", LOAD_X)
    case(out, "pb_negative_dim.pb", raw_tensor("x", TP.FLOAT, [2, -3], b"").SerializeToString(),
         "negative", LOAD_X)
    s = TP()
    s.name, s.data_type = "x", TP.STRING
    s.dims.extend([2])
    s.string_data.extend([b"a", b"b"])
    case(out, "pb_string.pb", s.SerializeToString(), "dtype string is not supported", LOAD_X)
    seq = onnx.SequenceProto()
    seq.name, seq.elem_type = "x", onnx.SequenceProto.TENSOR
    seq.tensor_values.extend([numpy_helper.from_array(np.zeros(3, np.float32))])
    case(out, "pb_sequence.pb", seq.SerializeToString(), "not a plain tensor", LOAD_X)
    both = raw_tensor("x", TP.FLOAT, [2, 3], b"\0" * 24)
    both.float_data.extend([0.0] * 6)
    case(out, "pb_raw_and_typed.pb", both.SerializeToString(), "data in both raw_data and float_data", LOAD_X)
    u8 = TP()
    u8.name, u8.data_type = "x", TP.UINT8
    u8.dims.extend([2])
    u8.int32_data.extend([1, 300])
    case(out, "pb_int32_out_of_range.pb", u8.SerializeToString(), "= 300 is out of range for uint8", LOAD_X)
    case(out, "pb_external_escape.pb", external_tensor("../fixtures/bad/short_weights.bin", 0, 16,
                                                       name="x", dims=(4,)).SerializeToString(),
         "is not a relative path inside the model's folder", LOAD_X)
    case(out, "pb_wrong_dtype.pb", numpy_helper.from_array(np.zeros((2, 3), np.int32), "x").SerializeToString(),
         "the loaded tensor is int32, the model expects float32", LOAD_X)


# --- .npy files ------------------------------------------------------------------------------------

def npy_bytes(header, data=b"", version=(1, 0)):
    """A .npy file with a literal header (padded like numpy does)."""
    h = header.encode("latin1")
    fixed = 10 if version[0] == 1 else 12
    pad = (-(fixed + len(h) + 1)) % 64
    h = h + b" " * pad + b"\n"
    size = struct.pack("<H", len(h)) if version[0] == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes(version) + size + h + data


def npy_cases(out):
    f4 = np.arange(6, dtype=np.float32).tobytes()
    good = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f4)
    case(out, "npy_truncated_header.npy", good[:40], "truncated .npy header", LOAD_X)
    case(out, "npy_truncated_data.npy", good[:-4], ".npy data is 20 bytes, but shape 2x3 of float32 needs 24", LOAD_X)
    case(out, "npy_header_too_long.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{",
         "exceeds the 1048576-byte limit", LOAD_X)
    case(out, "npy_nul_in_header.npy", npy_bytes("{'descr': '<f4',\0 'fortran_order': False, 'shape': (2, 3), }", f4),
         "contains a NUL byte", LOAD_X)
    case(out, "npy_version4.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                            f4, version=(4, 0)), "format version 4.0 is not supported", LOAD_X)
    case(out, "npy_bigendian.npy", npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", f4),
         "big-endian", LOAD_X)
    case(out, "npy_structured.npy", npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2, 3), }", f4),
         "structured .npy arrays are not supported", LOAD_X)
    case(out, "npy_object.npy", npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }", f4),
         ".npy dtype '|O' is not supported", LOAD_X)
    case(out, "npy_shape_overflow.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
         "int64", LOAD_X)
    case(out, "npy_dim_too_long.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }"),
         "a shape dimension overflows int64", LOAD_X)
    case(out, "npy_negative_dim.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", f4),
         "expected a non-negative integer in 'shape'", LOAD_X)
    case(out, "npy_rank17.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % ("1, " * 17), b"\0" * 4),
         "more than 16 dimensions", LOAD_X)
    case(out, "npy_missing_key.npy", npy_bytes("{'descr': '<f4', 'shape': (2, 3), }", f4),
         "needs the keys 'descr', 'fortran_order' and 'shape'", LOAD_X)
    case(out, "npy_repeated_key.npy", npy_bytes("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f4),
         "unexpected or repeated key", LOAD_X)
    case(out, "npy_escape_in_string.npy", npy_bytes("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3), }", f4),
         "escapes in strings are not supported", LOAD_X)
    case(out, "npy_bool_value.npy", npy_bytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2, 3), }", bytes([0, 1, 2, 0, 1, 0])),
         "bool element 2 is 2, not 0 or 1", LOAD_X)
    case(out, "npy_wrong_shape.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", f4),
         "the loaded tensor has shape 3x2, the model declares 2x3", LOAD_X)


# --- dumps -----------------------------------------------------------------------------------------

STRING_ATTRS = {"format": "layerdiff-dump", "model_path": "one_input.onnx", "tool_version": "0.1.0",
                "created": "2024-01-01T00:00:00Z"}


def timeless_group(parent, name):
    """A group with link creation order and no timestamps (stable bytes)."""
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    gcpl.set_link_creation_order(h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED)
    return h5py.Group(h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl))


def tensor_dataset(group, name, data, attrs):
    d = group.create_dataset(name, data=data, track_times=False)
    for k, v in attrs.items():
        d.attrs[k] = v
    return d


def write_dump(path, mutate=None, inputs=None):
    """A minimal valid dump (docs/dump-format.md) of x float32 [2,3]; mutate(f) breaks it."""
    if inputs is None:
        inputs = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_V18, h5py.h5f.LIBVER_V18)
    with h5py.File(h5py.h5f.create(path.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)) as f:
        for k, v in STRING_ATTRS.items():
            f.attrs[k] = v
        f.attrs["format_version"] = np.int64(1)
        f.attrs["input_seed"] = np.int64(-1)
        g = timeless_group(f, "inputs")
        for name, arr in inputs.items():
            dtype = "bool" if arr.dtype == np.bool_ else str(arr.dtype)
            tensor_dataset(g, name, arr, {"name": name, "node": "", "op_type": "", "precision": "",
                                          "dtype": dtype, "topo_index": np.int64(-1),
                                          "output_index": np.int64(0)})
        r = timeless_group(timeless_group(f, "runs"), "reference")
        r.attrs["name"], r.attrs["backend"], r.attrs["config"] = "reference", "reference", ""
        tensor_dataset(r, "y", np.arange(6, dtype=np.float32).reshape(2, 3),
                       {"name": "y", "node": "id", "op_type": "Identity", "precision": "fp32",
                        "dtype": "float32", "topo_index": np.int64(0), "output_index": np.int64(0)})
        f.attrs["complete"] = np.int64(1)
        if mutate:
            mutate(f)


def dump_case(out, name, mutate, substring, command=INSPECT, inputs=None):
    path = os.path.join(out, name)
    write_dump(path, mutate, inputs)
    CASES.append((name, 2, substring, command))


def dump_cases(out):
    y = "runs/reference/y"

    def set_attr(obj, key, value):
        return lambda f: f[obj].attrs.__setitem__(key, value) if obj != "/" else f.attrs.__setitem__(key, value)

    def delete(path):
        return lambda f: f.__delitem__(path)

    def del_attr(obj, key):
        return lambda f: (f[obj] if obj != "/" else f).attrs.__delitem__(key)

    dump_case(out, "dump_no_format.h5", del_attr("/", "format"), "not a layerdiff dump")
    dump_case(out, "dump_newer_version.h5", set_attr("/", "format_version", np.int64(3)),
              "was written by a newer layerdiff (format version 3 > 2)")
    dump_case(out, "dump_incomplete.h5", set_attr("/", "complete", np.int64(0)), "is an incomplete dump")
    dump_case(out, "dump_no_inputs.h5", delete("inputs"), "missing or unreadable group '/inputs'")
    dump_case(out, "dump_no_runs.h5", delete("runs"), "missing or unreadable group '/runs'")
    dump_case(out, "dump_no_name_attr.h5", del_attr(y, "name"), "missing attribute 'name'")
    dump_case(out, "dump_wrong_dtype.h5", set_attr(y, "dtype", "int32"), "but its dtype attribute says int32")
    dump_case(out, "dump_unknown_dtype.h5", set_attr(y, "dtype", "float128"), "unknown dtype attribute 'float128'")

    def replace_y(data, dtype_attr="float32"):
        def mutate(f):
            r = f["runs/reference"]
            attrs = dict(r["y"].attrs)
            del r["y"]
            attrs["dtype"] = dtype_attr
            tensor_dataset(r, "y", data, attrs)
        return mutate

    dump_case(out, "dump_int_data_float_attr.h5", replace_y(np.zeros((2, 3), np.int32)),
              "but its dtype attribute says float32")
    dump_case(out, "dump_string_data.h5", replace_y(np.array([b"ab", b"cd"])), "but its dtype attribute says float32")
    dump_case(out, "dump_rank17.h5", replace_y(np.zeros((1,) * 17, np.float32)), "has rank 17")
    dump_case(out, "dump_soft_link.h5", lambda f: f["runs/reference"].__setitem__("z", h5py.SoftLink("/inputs/x")),
              "holds a soft or external link")
    dump_case(out, "dump_external_link.h5",
              lambda f: f["runs/reference"].__setitem__("z", h5py.ExternalLink("/etc/passwd", "/x")),
              "holds a soft or external link")
    dump_case(out, "dump_duplicate_name.h5", lambda f: f["runs/reference"].__setitem__("y2", f[y]),
              "holds two tensors named 'y'")
    dump_case(out, "dump_bad_output_index.h5", set_attr(y, "output_index", np.int64(-3)), "output_index -3 out of range")
    dump_case(out, "dump_bool_value.h5", None, "holds bool value 2 at element 1",
              "run {dir}/bool_input.onnx --load-inputs {}",
              inputs={"x": np.array([0, 2, 1], np.uint8).view(np.bool_)})
    dump_case(out, "dump_missing_input.h5", None, "has no such input (it holds 1 input)", LOAD_DUMP, inputs={"q": np.zeros((2, 3), np.float32)})
    dump_case(out, "dump_wrong_input_dtype.h5", None, "the loaded tensor is float64, the model expects float32",
              LOAD_DUMP, inputs={"x": np.zeros((2, 3), np.float64)})

    def huge_unwritten_input(f):
        g = f["inputs"]
        attrs = dict(g["x"].attrs)
        del g["x"]
        d = g.create_dataset("x", shape=(2**38,), dtype=np.float32, chunks=(1024,), track_times=False)
        for k, v in attrs.items():
            d.attrs[k] = v

    # 1 TiB declared, nothing stored: refused before anything is allocated.
    dump_case(out, "dump_storage_short.h5", huge_unwritten_input,
              "stores only 0 bytes for 1099511627776 bytes of data", LOAD_DUMP)
    # A valid dump cut short: HDF5 refuses it (its end of file moved).
    whole = os.path.join(out, "dump_truncated.h5")
    write_dump(whole)
    data = open(whole, "rb").read()
    with open(whole, "wb") as f:
        f.write(data[: len(data) // 2])
    CASES.append(("dump_truncated.h5", 2, "cannot open as HDF5: truncated file", INSPECT))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "bad-inputs")
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        if name.split("_")[0] in ("onnx", "pb", "npy", "dump") or name in (
                "cases.tsv", "one_input.onnx", "bool_input.onnx", "ext16.bin"):
            os.remove(os.path.join(out, name))
    with open(os.path.join(out, "one_input.onnx"), "wb") as f:
        f.write(identity_model())
    with open(os.path.join(out, "bool_input.onnx"), "wb") as f:
        f.write(model_bytes([helper.make_node("Identity", ["x"], ["y"], name="id")],
                            [vi("x", TP.BOOL, (3,))], [vi("y", TP.BOOL, (3,))]))
    onnx_cases(out)
    case(out, "onnx_deep_types.onnx", deep_type(60), "messages nested more than 100 deep")
    case(out, "onnx_deep_subgraphs.onnx", deep_subgraphs(40), "messages nested more than 100 deep")
    pb_cases(out)
    npy_cases(out)
    dump_cases(out)
    with open(os.path.join(out, "cases.tsv"), "w") as f:
        f.write("# generated by scripts/gen-bad-inputs.py: file, exit code, expected substring, command\n")
        for name, code, substring, command in CASES:
            f.write("%s\t%d\t%s\t%s\n" % (name, code, substring, command))
    print("gen-bad-inputs: %d cases in %s" % (len(CASES), out))


if __name__ == "__main__":
    main()
