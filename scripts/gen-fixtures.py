#!/usr/bin/python3
"""Writes layerdiff's test fixtures (small ONNX models) into a folder.

    /usr/bin/python3 scripts/gen-fixtures.py fixtures      (what `make fixtures` runs)

Needs Debian's python3-onnx (1.12) and numpy. Output is deterministic: every
random weight comes from a generator with a fixed seed and every file is
written from scratch, so running the script twice gives identical bytes
(tests/e2e and CI rely on the committed files matching the script).

Valid models pass onnx.checker.check_model(full_check=True). The models under
bad/ are malformed on purpose and are never given to the checker; each comes
with bad/<name>.expected: line 1 the expected exit code of `layerdiff inspect`,
line 2 a substring of the expected one-line error. fixtures/README.md lists
every file and what it is for.
"""

import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8  # what onnx 1.12 writes for opset 13..17; pinned for stable bytes
PRODUCER = "layerdiff-gen-fixtures"
PRODUCER_VERSION = "1"


# --- helpers ----------------------------------------------------------------------

def rng_for(seed):
    """A generator per model so adding a model never changes another one."""
    return np.random.default_rng(seed)


def weight(rng, name, shape, scale=None):
    """float32 initializer, He-like scale so activations stay O(1)."""
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
    if scale is None:
        scale = 1.0 / np.sqrt(max(fan_in, 1))
    data = (rng.standard_normal(shape) * scale).astype(np.float32)
    return numpy_helper.from_array(data, name)


def const_tensor(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def make_model(graph, opset=OPSET, extra_opsets=()):
    opsets = [helper.make_opsetid("", opset)] + list(extra_opsets)
    model = helper.make_model(graph, opset_imports=opsets,
                              producer_name=PRODUCER,
                              producer_version=PRODUCER_VERSION)
    model.ir_version = IR_VERSION
    return model


def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def save_valid(model, path):
    onnx.checker.check_model(model, full_check=True)
    write_bytes(path, model.SerializeToString())


def save_bad(out, name, model_bytes, substring, code=2):
    """A malformed model plus its expectation file (never checked by onnx)."""
    write_bytes(os.path.join(out, "bad", name + ".onnx"), model_bytes)
    write_bytes(os.path.join(out, "bad", name + ".expected"),
                ("%d\n%s\n" % (code, substring)).encode())


# --- valid models -------------------------------------------------------------------

def build_cnn():
    """input 1x3x32x32 -> Conv3x3(8,pad1) Relu MaxPool2 Conv3x3(16) Relu MaxPool2
    Flatten Gemm(10) -> output 1x10."""
    rng = rng_for(1)
    inits = [
        weight(rng, "conv1.weight", [8, 3, 3, 3]),
        weight(rng, "conv1.bias", [8], scale=0.1),
        weight(rng, "conv2.weight", [16, 8, 3, 3]),
        weight(rng, "conv2.bias", [16], scale=0.1),
        weight(rng, "fc.weight", [10, 16 * 7 * 7]),
        weight(rng, "fc.bias", [10], scale=0.1),
    ]
    nodes = [
        # x is (1, 3, 32, 32)
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["conv1_out"],
                         name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"),
        # (1, 8, 32, 32) -> (1, 8, 16, 16)
        helper.make_node("MaxPool", ["relu1_out"], ["pool1_out"], name="pool1",
                         kernel_shape=[2, 2], strides=[2, 2]),
        # (1, 8, 16, 16) -> (1, 16, 14, 14): no padding
        helper.make_node("Conv", ["pool1_out", "conv2.weight", "conv2.bias"], ["conv2_out"],
                         name="conv2", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["conv2_out"], ["relu2_out"], name="relu2"),
        # (1, 16, 14, 14) -> (1, 16, 7, 7)
        helper.make_node("MaxPool", ["relu2_out"], ["pool2_out"], name="pool2",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool2_out"], ["flat_out"], name="flatten", axis=1),
        # (1, 784) x (10, 784)^T -> (1, 10)
        helper.make_node("Gemm", ["flat_out", "fc.weight", "fc.bias"], ["output"],
                         name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])],
        initializer=inits)
    return make_model(graph)


class Block:
    """Builds nodes with PyTorch-exporter-style names: node "/encoder/layer.0/attn/MatMul",
    output "/encoder/layer.0/attn/MatMul_output_0", numbered _1, _2 on repeats."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.nodes = []
        self.inits = []
        self.used = {}

    def _name(self, scope, op):
        base = "%s/%s/%s" % (self.prefix, scope, op) if scope else "%s/%s" % (self.prefix, op)
        n = self.used.get(base, 0)
        self.used[base] = n + 1
        return base if n == 0 else "%s_%d" % (base, n)

    def op(self, scope, op_type, inputs, **attrs):
        name = self._name(scope, op_type)
        out = name + "_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name, **attrs))
        return out

    def constant(self, scope, value, dtype=np.float32):
        """A Constant node, as torch.onnx emits for scalars."""
        name = self._name(scope, "Constant")
        out = name + "_output_0"
        self.nodes.append(helper.make_node(
            "Constant", [], [out], name=name,
            value=numpy_helper.from_array(np.array(value, dtype=dtype), "")))
        return out

    def init(self, tensor):
        self.inits.append(tensor)
        return tensor.name


def layer_norm(b, scope, x, pname, rng, d):
    # x is (B, T, d); normalise over the last axis, as torch exports it (opset 13)
    mean = b.op(scope, "ReduceMean", [x], axes=[-1], keepdims=1)
    centered = b.op(scope, "Sub", [x, mean])
    sq = b.op(scope, "Pow", [centered, b.constant(scope, 2.0)])
    var = b.op(scope, "ReduceMean", [sq], axes=[-1], keepdims=1)
    var_eps = b.op(scope, "Add", [var, b.constant(scope, 1e-5)])
    std = b.op(scope, "Sqrt", [var_eps])
    normed = b.op(scope, "Div", [centered, std])
    gamma = b.init(const_tensor(pname + ".weight", 1.0 + 0.1 * rng.standard_normal(d)))
    beta = b.init(const_tensor(pname + ".bias", 0.1 * rng.standard_normal(d)))
    scaled = b.op(scope, "Mul", [normed, gamma])
    return b.op(scope, "Add", [scaled, beta])


def linear(b, scope, x, pname, rng, d_in, d_out):
    # x is (B, T, d_in) @ (d_in, d_out) + (d_out,)
    w = b.init(weight(rng, pname + ".weight", [d_in, d_out], scale=1.0 / np.sqrt(d_in)))
    bias = b.init(weight(rng, pname + ".bias", [d_out], scale=0.02))
    y = b.op(scope, "MatMul", [x, w])
    return b.op(scope, "Add", [y, bias])


def build_transformer():
    """One pre-LN encoder block: x + attn(ln1(x)), then + mlp(ln2(.)); input
    [batch, 16, 64] with a symbolic batch dim."""
    rng = rng_for(2)
    T, D, H = 16, 64, 4
    HD = D // H
    MLP = 4 * D
    b = Block("/encoder/layer.0")
    p = "encoder.layer.0."

    h = layer_norm(b, "ln1", "input", p + "ln1", rng, D)

    q = linear(b, "attn/q_proj", h, p + "attn.q_proj", rng, D, D)
    k = linear(b, "attn/k_proj", h, p + "attn.k_proj", rng, D, D)
    v = linear(b, "attn/v_proj", h, p + "attn.v_proj", rng, D, D)
    # (B, T, D) -> (B, T, H, HD); 0 copies the batch and sequence dims
    heads_shape = b.init(const_tensor("/encoder/layer.0/attn/heads_shape",
                                      [0, 0, H, HD], np.int64))
    qh = b.op("attn", "Transpose", [b.op("attn", "Reshape", [q, heads_shape])], perm=[0, 2, 1, 3])
    kh = b.op("attn", "Transpose", [b.op("attn", "Reshape", [k, heads_shape])], perm=[0, 2, 3, 1])
    vh = b.op("attn", "Transpose", [b.op("attn", "Reshape", [v, heads_shape])], perm=[0, 2, 1, 3])
    # (B, H, T, HD) @ (B, H, HD, T) -> (B, H, T, T)
    scores = b.op("attn", "MatMul", [qh, kh])
    scaled = b.op("attn", "Div", [scores, b.constant("attn", float(np.sqrt(HD)))])
    probs = b.op("attn", "Softmax", [scaled], axis=-1)
    # (B, H, T, T) @ (B, H, T, HD) -> (B, H, T, HD) -> (B, T, H, HD) -> (B, T, D)
    ctx = b.op("attn", "MatMul", [probs, vh])
    ctx = b.op("attn", "Transpose", [ctx], perm=[0, 2, 1, 3])
    merged_shape = b.init(const_tensor("/encoder/layer.0/attn/merged_shape",
                                       [0, 0, D], np.int64))
    ctx = b.op("attn", "Reshape", [ctx, merged_shape])
    attn_out = linear(b, "attn/out_proj", ctx, p + "attn.out_proj", rng, D, D)
    x1 = b.op("", "Add", ["input", attn_out])

    h2 = layer_norm(b, "ln2", x1, p + "ln2", rng, D)
    up = linear(b, "mlp/fc1", h2, p + "mlp.fc1", rng, D, MLP)
    # GELU(x) = 0.5 * x * (1 + erf(x / sqrt(2))), as torch exports it
    e = b.op("mlp/act", "Erf", [b.op("mlp/act", "Div", [up, b.constant("mlp/act", 1.4142135381698608)])])
    e1 = b.op("mlp/act", "Add", [e, b.constant("mlp/act", 1.0)])
    g = b.op("mlp/act", "Mul", [b.op("mlp/act", "Mul", [up, e1]), b.constant("mlp/act", 0.5)])
    down = linear(b, "mlp/fc2", g, p + "mlp.fc2", rng, MLP, D)
    # The last node writes the graph output directly, as exporters do.
    b.nodes.append(helper.make_node("Add", [x1, down], ["output"], name="/encoder/layer.0/Add_1"))

    graph = helper.make_graph(
        b.nodes, "tiny_transformer",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", T, D])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", T, D])],
        initializer=b.inits)
    return make_model(graph)


def build_matmul_add(w_name="weight", b_name="bias"):
    """x [2, 8] @ weight [8, 16] + bias [16] -> y [2, 16]."""
    rng = rng_for(3)
    w = weight(rng, w_name, [8, 16])
    bias = weight(rng, b_name, [16], scale=0.1)
    nodes = [
        helper.make_node("MatMul", ["x", w_name], ["xw"], name="matmul"),
        helper.make_node("Add", ["xw", b_name], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "matmul_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])],
        initializer=[w, bias])
    return make_model(graph)


def build_overflow():
    """x [1, 16] -> MatMul "/block0/fc" (positive weights, outputs ~1.6) -> Relu
    "/block0/relu" -> MatMul "/block1/fc_big" (weights ~10000: outputs ~2.5e5, beyond
    fp16's 65504) -> Mul "/block1/scale" by 1e-3 (back to ~250) -> MatMul "/block2/fc"
    -> Add "/block2/add" -> y [1, 16].

    Known answers under --fp16 (tests/e2e/test_run_compare.sh): "/block1/fc_big" is the
    first divergent layer, the only origin and the first culprit (its output overflows
    whatever its inputs); every later layer inherits the infinities. Under fp32 every
    layer matches."""
    rng = rng_for(4)
    d = 16
    w0 = np.abs(rng.standard_normal((d, d))).astype(np.float32) * np.float32(0.25)
    w1 = (10000.0 + 2000.0 * rng.random((d, d))).astype(np.float32)
    w2 = (rng.standard_normal((d, d)) * 0.25).astype(np.float32)
    inits = [numpy_helper.from_array(w0, "block0.fc.weight"),
             numpy_helper.from_array(w1, "block1.fc_big.weight"),
             const_tensor("block1.scale", 1e-3),
             numpy_helper.from_array(w2, "block2.fc.weight"),
             const_tensor("block2.bias", (0.1 * rng.standard_normal(d)).astype(np.float32))]
    nodes = [
        helper.make_node("MatMul", ["x", "block0.fc.weight"], ["/block0/fc_output_0"],
                         name="/block0/fc"),
        helper.make_node("Relu", ["/block0/fc_output_0"], ["/block0/relu_output_0"],
                         name="/block0/relu"),
        helper.make_node("MatMul", ["/block0/relu_output_0", "block1.fc_big.weight"],
                         ["/block1/fc_big_output_0"], name="/block1/fc_big"),
        helper.make_node("Mul", ["/block1/fc_big_output_0", "block1.scale"],
                         ["/block1/scale_output_0"], name="/block1/scale"),
        helper.make_node("MatMul", ["/block1/scale_output_0", "block2.fc.weight"],
                         ["/block2/fc_output_0"], name="/block2/fc"),
        helper.make_node("Add", ["/block2/fc_output_0", "block2.bias"], ["y"],
                         name="/block2/add"),
    ]
    graph = helper.make_graph(
        nodes, "overflow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, d])],
        initializer=inits)
    return make_model(graph)


def build_accumulate():
    """x [1, 16384] -> Transpose "/stats/transpose" -> MatMul "/stats/sumsq" (x @ x^T:
    the sum of 16384 squares, ~5461) -> Mul "/head/scale" by 1/16384 -> y [1, 1].

    Known answers: with --fp16 (fp32 accumulation) every layer passes; with
    --accumulate half the running fp16 sum stops growing at 2048 (adding a square below 1
    no longer changes it), so "/stats/sumsq" is the first divergent layer, the origin and
    the culprit, and "/head/scale" inherits. No weights: the file stays tiny."""
    k = 16384
    nodes = [
        helper.make_node("Transpose", ["x"], ["/stats/transpose_output_0"],
                         name="/stats/transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["x", "/stats/transpose_output_0"],
                         ["/stats/sumsq_output_0"], name="/stats/sumsq"),
        helper.make_node("Mul", ["/stats/sumsq_output_0", "head.scale"], ["y"],
                         name="/head/scale"),
    ]
    graph = helper.make_graph(
        nodes, "accumulate",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1])],
        initializer=[const_tensor("head.scale", 1.0 / k)])
    return make_model(graph)


def build_deep(blocks=256, d=64):
    """The deepest fixture: `blocks` blocks of MatMul (one shared orthogonal 64x64
    weight) -> Add (shared bias) -> Tanh on x [batch, 64], 3 x blocks nodes. For
    memory that must not grow with depth (make bench, tests)."""
    rng = rng_for(5)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    inits = [numpy_helper.from_array(q.astype(np.float32), "deep.weight"),
             const_tensor("deep.bias", (0.05 * rng.standard_normal(d)).astype(np.float32))]
    nodes, x = [], "x"
    for i in range(blocks):
        p = "/block%d" % i
        nodes.append(helper.make_node("MatMul", [x, "deep.weight"], [p + "/fc_output_0"],
                                      name=p + "/fc"))
        nodes.append(helper.make_node("Add", [p + "/fc_output_0", "deep.bias"],
                                      [p + "/add_output_0"], name=p + "/add"))
        x = "y" if i == blocks - 1 else p + "/tanh_output_0"
        nodes.append(helper.make_node("Tanh", [p + "/add_output_0"], [x], name=p + "/tanh"))
    graph = helper.make_graph(
        nodes, "deep",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", d])],
        initializer=inits)
    return make_model(graph)


def externalize(tensor, location, offset, length=None):
    """Moves tensor's bytes out (returned) and points it at location/offset."""
    raw = tensor.raw_data
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entries = [("location", location), ("offset", str(offset)),
               ("length", str(len(raw) if length is None else length))]
    for key, value in entries:
        e = tensor.external_data.add()
        e.key = key
        e.value = value
    return raw


def build_external(out):
    """external_data/model.onnx + weights.bin: both initializers stored outside.
    The bias comes first, the weight at offset 128 after zero padding, so the
    loader must honour offsets rather than read the file front to back."""
    model = build_matmul_add()
    inits = {t.name: t for t in model.graph.initializer}
    w_off = 128
    b_raw = externalize(inits["bias"], "weights.bin", 0)
    w_raw = externalize(inits["weight"], "weights.bin", w_off)
    blob = b_raw + b"\0" * (w_off - len(b_raw)) + w_raw
    folder = os.path.join(out, "external_data")
    write_bytes(os.path.join(folder, "weights.bin"), blob)
    write_bytes(os.path.join(folder, "model.onnx"), model.SerializeToString())
    # The checker resolves the external file relative to the model's path.
    onnx.checker.check_model(os.path.join(folder, "model.onnx"), full_check=True)


# --- malformed models -------------------------------------------------------------------

def small_graph_model(nodes, inputs, outputs, inits=(), opsets=None):
    graph = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, producer_name=PRODUCER, producer_version=PRODUCER_VERSION,
                              opset_imports=opsets or [helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    return model


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def model_with_initializer(tensor):
    """y = x + c where c is the given (possibly malformed) initializer."""
    return small_graph_model(
        [helper.make_node("Add", ["x", tensor.name], ["y"], name="add")],
        [vi("x", [4])], [vi("y", [4])], [tensor])


def raw_tensor(name, dtype, dims, raw):
    """A TensorProto filled field by field: helper.make_tensor validates sizes."""
    t = TensorProto()
    t.name = name
    t.data_type = dtype
    t.dims.extend(dims)
    t.raw_data = raw
    return t


def build_bad(out, cnn_bytes):
    bad = os.path.join(out, "bad")

    save_bad(out, "truncated", cnn_bytes[: len(cnn_bytes) // 2], "truncated")
    save_bad(out, "not_onnx", b"this is a text file, not an ONNX model\n", "not an ONNX model")
    save_bad(out, "empty", b"", "empty")

    save_bad(out, "unknown_dtype",
             model_with_initializer(raw_tensor("c", 99, [4], b"\0" * 16)).SerializeToString(),
             "data type")
    # 4 float32 need 16 bytes; give 10
    save_bad(out, "raw_data_size",
             model_with_initializer(raw_tensor("c", TensorProto.FLOAT, [4], b"\0" * 10))
             .SerializeToString(), "raw_data")
    save_bad(out, "negative_dim",
             model_with_initializer(raw_tensor("c", TensorProto.FLOAT, [-4], b""))
             .SerializeToString(), "negative")
    # 2^32 * 2^32 = 2^64 does not fit in int64
    save_bad(out, "dim_overflow",
             model_with_initializer(raw_tensor("c", TensorProto.FLOAT, [1 << 32, 1 << 32], b""))
             .SerializeToString(), "int64")

    # External data problems; the referenced files are relative to fixtures/bad/.
    def external_model(location, offset, length):
        c = numpy_helper.from_array(np.arange(4, dtype=np.float32), "c")
        externalize(c, location, offset, length)
        return model_with_initializer(c).SerializeToString()

    save_bad(out, "external_missing", external_model("no_such_weights.bin", 0, 16),
             "no_such_weights.bin")
    # Points at a file that exists (the valid fixture's), but outside bad/.
    save_bad(out, "external_escape", external_model("../external_data/weights.bin", 0, 16),
             "external data")
    write_bytes(os.path.join(bad, "short_weights.bin"), np.arange(4, dtype=np.float32).tobytes())
    save_bad(out, "external_offset", external_model("short_weights.bin", 1024, 16),
             "external data")

    # Graph structure problems.
    save_bad(out, "duplicate_name", small_graph_model(
        [helper.make_node("Relu", ["x"], ["t"], name="relu_a"),
         helper.make_node("Neg", ["x"], ["t"], name="neg_b"),
         helper.make_node("Identity", ["t"], ["y"], name="out")],
        [vi("x", [4])], [vi("y", [4])]).SerializeToString(), "duplicate")
    save_bad(out, "cycle", small_graph_model(
        [helper.make_node("Add", ["x", "b"], ["a"], name="add_a"),
         helper.make_node("Relu", ["a"], ["b"], name="relu_b"),
         helper.make_node("Identity", ["b"], ["y"], name="out")],
        [vi("x", [4])], [vi("y", [4])]).SerializeToString(), "cycle")
    save_bad(out, "dangling_input", small_graph_model(
        [helper.make_node("Add", ["x", "nobody_makes_this"], ["y"], name="add")],
        [vi("x", [4])], [vi("y", [4])]).SerializeToString(), "nobody_makes_this")
    save_bad(out, "missing_opset", small_graph_model(
        [helper.make_node("Relu", ["x"], ["t"], name="relu"),
         helper.make_node("FancyOp", ["t"], ["y"], name="fancy", domain="com.example")],
        [vi("x", [4])], [vi("y", [4])]).SerializeToString(), "opset")


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: gen-fixtures.py OUTPUT_DIR\n")
        return 2
    out = sys.argv[1]
    # Start from clean generated folders so stale files never linger.
    for sub in ("bad", "external_data"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    os.makedirs(out, exist_ok=True)

    cnn = build_cnn()
    save_valid(cnn, os.path.join(out, "cnn.onnx"))
    save_valid(build_transformer(), os.path.join(out, "transformer.onnx"))
    save_valid(build_overflow(), os.path.join(out, "overflow.onnx"))
    save_valid(build_accumulate(), os.path.join(out, "accumulate.onnx"))
    save_valid(build_deep(), os.path.join(out, "deep.onnx"))
    build_external(out)
    build_bad(out, cnn.SerializeToString())
    return 0


if __name__ == "__main__":
    sys.exit(main())
