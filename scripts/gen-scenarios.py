#!/usr/bin/python3
"""Writes the fp16 / TF32 failure-story models of docs/scenarios.md into FIXTURES/scenarios/.

    /usr/bin/python3 scripts/gen-scenarios.py fixtures            (what `make fixtures` runs)
    /usr/bin/python3 scripts/gen-scenarios.py --verify fixtures   (also checks each design with numpy)

Needs Debian's python3-onnx (1.12) and numpy. As with gen-fixtures.py, every
weight comes from a generator with a fixed seed and every file is written from
scratch, so two runs give identical bytes.

Each model is built so that its diagnosis holds by construction, and --verify
recomputes the part of it that matters in numpy (float16 with numpy's own
round-to-nearest-even conversion, TF32 with the bit trick of docs/numerics.md)
and fails loudly if a design property does not hold: that x^2 overflows 65504
in story 1's first LayerNorm while every layer before it stays within the fp16
tolerance, that story 2's island overflows only when it runs in fp16, that
story 4's error drops by at least 10x with LayerNormalization in fp32, that
story 5's TF32 rounding moves elements across the Clip bounds. The stories:

1. clip_text_encoder.onnx   CLIP-style text encoder, x^2 overflows fp16 in the LayerNorm
2. mixed_fp16_islands.onnx  fp16 model with an fp32 island (Pow, ReduceSum) between Casts
3. conv_fp16_weight_fp32_bias.onnx (not loadable: the PyTorch mistake) and conv_fp16.onnx
4. layernorm_fp32.onnx      LayerNormalization (opset 17) whose input has a large offset
5. conv_clip_tf32.onnx      1x3x512x512 Conv then Clip(0, 6), fp32, for TF32
"""

import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8  # what onnx 1.12 writes for opset 13..17; pinned for stable bytes
PRODUCER = "layerdiff-gen-scenarios"
PRODUCER_VERSION = "1"

FP16_MAX = 65504.0
# The comparator's default tolerance for an fp16 or tf32 test layer: atol = rtol = 10 * 2^-11.
REDUCED_TOL = 10 * 2.0 ** -11


# --- model helpers ------------------------------------------------------------------------

def rng_for(seed):
    """A generator per model so changing one model never changes another."""
    return np.random.default_rng(seed)


def tensor(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def make_model(graph, opset):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name=PRODUCER, producer_version=PRODUCER_VERSION)
    model.ir_version = IR_VERSION
    return model


def write_bytes(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def save_valid(model, path):
    onnx.checker.check_model(model, full_check=True)
    write_bytes(path, model.SerializeToString())


def initializers(model):
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


class Block:
    """Nodes with PyTorch-exporter-style names: node "/text_model/.../Pow", output
    "/text_model/.../Pow_output_0", numbered _1, _2 on repeats in one scope."""

    def __init__(self):
        self.nodes = []
        self.inits = []
        self.used = {}

    def _name(self, scope, op):
        base = "%s/%s" % (scope, op)
        n = self.used.get(base, 0)
        self.used[base] = n + 1
        return base if n == 0 else "%s_%d" % (base, n)

    def op(self, scope, op_type, inputs, out=None, **attrs):
        name = self._name(scope, op_type)
        out = out or name + "_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name, **attrs))
        return out

    def constant(self, scope, value, dtype=np.float32):
        """A Constant node, as torch.onnx emits for scalars."""
        name = self._name(scope, "Constant")
        out = name + "_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=name,
                                           value=tensor("", value, dtype)))
        return out

    def init(self, t):
        self.inits.append(t)
        return t.name


# --- story 1: CLIP-style text encoder -------------------------------------------------------

CLIP_VOCAB, CLIP_T, CLIP_D, CLIP_HEADS, CLIP_LAYERS = 64, 16, 64, 4, 2
# Two "massive activation" channels, present in every token's embedding, as in CLIP's text
# tower: both positive, so the row mean (about 9) sits far from the ordinary channels and
# every (x - mean) there exceeds 256, whose square 65536 is above fp16's 65504.
CLIP_OUTLIERS = {5: 300.0, 40: 280.0}


def clip_layer_norm(b, scope, x, pname, rng):
    # x is (B, T, D): decomposed LayerNorm over the last axis, as torch exports it at opset 13
    mean = b.op(scope, "ReduceMean", [x], axes=[-1], keepdims=1)
    centered = b.op(scope, "Sub", [x, mean])
    sq = b.op(scope, "Pow", [centered, b.constant(scope, 2.0)])
    var = b.op(scope, "ReduceMean", [sq], axes=[-1], keepdims=1)
    std = b.op(scope, "Sqrt", [b.op(scope, "Add", [var, b.constant(scope, 1e-5)])])
    normed = b.op(scope, "Div", [centered, std])
    gamma = b.init(tensor(pname + ".weight", 1.0 + 0.05 * rng.standard_normal(CLIP_D)))
    beta = b.init(tensor(pname + ".bias", 0.05 * rng.standard_normal(CLIP_D)))
    return b.op(scope, "Add", [b.op(scope, "Mul", [normed, gamma]), beta])


def clip_linear(b, scope, x, pname, rng, d_in, d_out):
    # (B, T, d_in) @ (d_in, d_out) + (d_out,)
    w = b.init(tensor(pname + ".weight", rng.standard_normal((d_in, d_out)) / np.sqrt(d_in)))
    bias = b.init(tensor(pname + ".bias", 0.02 * rng.standard_normal(d_out)))
    return b.op(scope, "Add", [b.op(scope, "MatMul", [x, w]), bias])


def clip_attention(b, scope, x, pname, rng, mask):
    D, H = CLIP_D, CLIP_HEADS
    HD = D // H
    q = clip_linear(b, scope + "/q_proj", x, pname + ".q_proj", rng, D, D)
    k = clip_linear(b, scope + "/k_proj", x, pname + ".k_proj", rng, D, D)
    v = clip_linear(b, scope + "/v_proj", x, pname + ".v_proj", rng, D, D)
    # (B, T, D) -> (B, H, T, HD); 0 copies the batch and sequence dims
    heads = b.init(tensor(scope + "/heads_shape", [0, 0, H, HD], np.int64))
    qh = b.op(scope, "Transpose", [b.op(scope, "Reshape", [q, heads])], perm=[0, 2, 1, 3])
    kh = b.op(scope, "Transpose", [b.op(scope, "Reshape", [k, heads])], perm=[0, 2, 3, 1])
    vh = b.op(scope, "Transpose", [b.op(scope, "Reshape", [v, heads])], perm=[0, 2, 1, 3])
    scores = b.op(scope, "MatMul", [qh, kh])                 # (B, H, T, T)
    scores = b.op(scope, "Div", [scores, b.constant(scope, float(np.sqrt(HD)))])
    scores = b.op(scope, "Add", [scores, mask])              # causal mask, (T, T)
    # The exporter's explicit Cast: the softmax is asked for in float32.
    scores = b.op(scope, "Cast", [scores], to=TensorProto.FLOAT)
    probs = b.op(scope, "Softmax", [scores], axis=-1)
    ctx = b.op(scope, "Transpose", [b.op(scope, "MatMul", [probs, vh])], perm=[0, 2, 1, 3])
    merged = b.init(tensor(scope + "/merged_shape", [0, 0, D], np.int64))
    ctx = b.op(scope, "Reshape", [ctx, merged])
    return clip_linear(b, scope + "/out_proj", ctx, pname + ".out_proj", rng, D, D)


def clip_mlp(b, scope, x, pname, rng):
    up = clip_linear(b, scope + "/fc1", x, pname + ".fc1", rng, CLIP_D, 4 * CLIP_D)
    # GELU(x) = 0.5 * x * (1 + erf(x / sqrt(2))), as torch exports it
    act = scope + "/activation_fn"
    e = b.op(act, "Erf", [b.op(act, "Div", [up, b.constant(act, 1.4142135381698608)])])
    g = b.op(act, "Mul", [b.op(act, "Mul", [up, b.op(act, "Add", [e, b.constant(act, 1.0)])]),
                          b.constant(act, 0.5)])
    return clip_linear(b, scope + "/fc2", g, pname + ".fc2", rng, 4 * CLIP_D, CLIP_D)


def clip_token_embedding(rng):
    emb = 0.5 * rng.standard_normal((CLIP_VOCAB, CLIP_D))
    for channel, level in CLIP_OUTLIERS.items():
        emb[:, channel] = level + 10.0 * rng.uniform(-1.0, 1.0, CLIP_VOCAB)
    return emb


def build_clip_text():
    """input_ids int32 [batch, 16] -> Cast int64 -> token Gather + position embedding ->
    2 pre-LN blocks (decomposed LayerNorm, 4-head causal attention with an explicit Cast to
    float32 before Softmax, Erf GELU MLP) -> final LayerNorm -> last_hidden_state
    [batch, 16, 64]."""
    rng = rng_for(101)
    b = Block()
    T = CLIP_T
    emb_scope = "/text_model/embeddings"
    ids = b.op(emb_scope, "Cast", ["input_ids"], to=TensorProto.INT64)
    tok_table = b.init(tensor("text_model.embeddings.token_embedding.weight",
                              clip_token_embedding(rng)))
    tok = b.op(emb_scope + "/token_embedding", "Gather", [tok_table, ids], axis=0)
    pos_table = b.init(tensor("text_model.embeddings.position_embedding.weight",
                              0.02 * rng.standard_normal((T, CLIP_D))))
    x = b.op(emb_scope, "Add", [tok, pos_table])
    mask = b.init(tensor("/text_model/causal_attention_mask",
                         np.triu(np.full((T, T), -10000.0), k=1)))
    for i in range(CLIP_LAYERS):
        scope = "/text_model/encoder/layers.%d" % i
        p = "text_model.encoder.layers.%d" % i
        h = clip_layer_norm(b, scope + "/layer_norm1", x, p + ".layer_norm1", rng)
        x = b.op(scope, "Add", [x, clip_attention(b, scope + "/self_attn", h,
                                                  p + ".self_attn", rng, mask)])
        h = clip_layer_norm(b, scope + "/layer_norm2", x, p + ".layer_norm2", rng)
        x = b.op(scope, "Add", [x, clip_mlp(b, scope + "/mlp", h, p + ".mlp", rng)])
    x = clip_layer_norm(b, "/text_model/final_layer_norm", x,
                        "text_model.final_layer_norm", rng)
    b.nodes[-1].output[0] = "last_hidden_state"
    graph = helper.make_graph(
        b.nodes, "clip_text_encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", T])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                       ["batch", T, CLIP_D])],
        initializer=b.inits)
    return make_model(graph, 13)


# --- story 2: fp16 model with an fp32 island ---------------------------------------------------

ISLAND_D = 64


def build_mixed_islands():
    """x float16 [batch, 64] -> MatMul + Add (fp16) -> h; island in float32: Cast, Pow 2,
    ReduceSum, Sqrt, Cast back to float16 -> norm; h / norm -> MatMul + Add -> y float16
    [batch, 16]. For every x in [0, 1]^64, 60 <= |h| <= 196: no single square overflows
    fp16 (196^2 = 38416), but their sum (at least 64 * 60^2 = 230400) does: the island is
    fp32 for a reason."""
    rng = rng_for(102)
    D = ISLAND_D
    b = Block()
    # h_j = sign_j * (sum_i x_i m_ij + c_j) with m in [1, 2], c in [60, 68]: |h_j| is bounded
    # on both sides whatever x in [0, 1] is.
    sign = np.where(np.arange(D) % 2 == 0, 1.0, -1.0)
    w1 = b.init(tensor("encoder.proj.weight", rng.uniform(1.0, 2.0, (D, D)) * sign, np.float16))
    b1 = b.init(tensor("encoder.proj.bias", rng.uniform(60.0, 68.0, D) * sign, np.float16))
    h = b.op("/encoder/proj", "Add", [b.op("/encoder/proj", "MatMul", ["x", w1]), b1])
    island = "/head/l2norm"
    h32 = b.op(island, "Cast", [h], to=TensorProto.FLOAT)
    sq = b.op(island, "Pow", [h32, b.constant(island, 2.0)])
    axes = b.init(tensor(island + "/axes", [-1], np.int64))
    ss = b.op(island, "ReduceSum", [sq, axes], keepdims=1)
    norm = b.op(island, "Cast", [b.op(island, "Sqrt", [ss])], to=TensorProto.FLOAT16)
    unit = b.op("/head", "Div", [h, norm])
    w2 = b.init(tensor("head.fc.weight", rng.standard_normal((D, 16)), np.float16))
    b2 = b.init(tensor("head.fc.bias", 0.1 * rng.standard_normal(16), np.float16))
    b.op("/head/fc", "Add", [b.op("/head/fc", "MatMul", [unit, w2]), b2], out="y")
    f16 = TensorProto.FLOAT16
    graph = helper.make_graph(
        b.nodes, "mixed_fp16_islands",
        [helper.make_tensor_value_info("x", f16, ["batch", D])],
        [helper.make_tensor_value_info("y", f16, ["batch", 16])],
        initializer=b.inits,
        value_info=[helper.make_tensor_value_info(h32, TensorProto.FLOAT, ["batch", D]),
                    helper.make_tensor_value_info(sq, TensorProto.FLOAT, ["batch", D]),
                    helper.make_tensor_value_info(ss, TensorProto.FLOAT, ["batch", 1]),
                    helper.make_tensor_value_info(norm, f16, ["batch", 1])])
    return make_model(graph, 13)


# --- story 3: PyTorch fp16 weight with an fp32 bias ------------------------------------------

def build_conv_fp16(bias_dtype):
    """images float16 [1, 3, 32, 32] -> Conv 3x3 (8, pad 1) -> Relu -> features float16.
    With bias_dtype float32 this is the model torch.onnx writes when a module was .half()'d
    but its bias was not: ONNX's Conv needs X, W and B of one type T."""
    rng = rng_for(103)
    w = tensor("features.0.weight", rng.standard_normal((8, 3, 3, 3)) / np.sqrt(27), np.float16)
    bias = tensor("features.0.bias", 0.1 * rng.standard_normal(8), bias_dtype)
    nodes = [helper.make_node("Conv", ["images", w.name, bias.name], ["/features/0/Conv_output_0"],
                              name="/features/0/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["/features/0/Conv_output_0"], ["features"],
                              name="/features/1/Relu")]
    f16 = TensorProto.FLOAT16
    graph = helper.make_graph(
        nodes, "conv_fp16",
        [helper.make_tensor_value_info("images", f16, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("features", f16, [1, 8, 32, 32])],
        initializer=[w, bias])
    return make_model(graph, 13)


def save_mixed_conv(model, path):
    """The checker's type inference rejects the fp32 bias (that is the point): check the
    structure only, and check that the full check does fail, and why."""
    onnx.checker.check_model(model, full_check=False)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # onnx raises InferenceError / ValidationError by version
        if "bias" not in str(e) and "B" not in str(e):
            raise
    else:
        raise AssertionError("story 3: onnx accepted a Conv with float16 W and float32 B")
    write_bytes(path, model.SerializeToString())


# --- story 4: LayerNormalization with a large input -------------------------------------------

LN_T, LN_D, LN_OUT = 16, 128, 64
# The documented run feeds hidden states in this range: a large common offset, a small
# spread. fp16 holds values near 1000 to 0.5, a fifth of the spread's standard deviation.
LN_VAL_RANGE = (1000.0, 1010.0)


def build_layernorm():
    """hidden_states float32 [batch, 16, 128] -> LayerNormalization (opset 17, axis -1) ->
    MatMul + Add (128 -> 64) -> output [batch, 16, 64]."""
    rng = rng_for(104)
    b = Block()
    scope = "/encoder/final_layer_norm"
    gamma = b.init(tensor("encoder.final_layer_norm.weight",
                          1.0 + 0.1 * rng.standard_normal(LN_D)))
    beta = b.init(tensor("encoder.final_layer_norm.bias", 0.1 * rng.standard_normal(LN_D)))
    h = b.op(scope, "LayerNormalization", ["hidden_states", gamma, beta], axis=-1,
             epsilon=1e-5)
    w = b.init(tensor("head.weight", rng.standard_normal((LN_D, LN_OUT)) / np.sqrt(LN_D)))
    bias = b.init(tensor("head.bias", 0.02 * rng.standard_normal(LN_OUT)))
    b.op("/head", "Add", [b.op("/head", "MatMul", [h, w]), bias], out="output")
    graph = helper.make_graph(
        b.nodes, "layernorm_fp32",
        [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, ["batch", LN_T, LN_D])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["batch", LN_T, LN_OUT])],
        initializer=b.inits)
    return make_model(graph, 17)


# --- story 5: Conv + Clip under TF32 ------------------------------------------------------------

CC_SIZE, CC_OUT = 512, 16


def build_conv_clip():
    """images float32 [1, 3, 512, 512] -> Conv 3x3 (16, pad 1) -> Clip(0, 6) -> output
    [1, 16, 512, 512]. Weights N(0, 4^2) and bias N(0.5, 1): outputs spread over about
    -30..30, so many sit within TF32's rounding error of the bounds 0 and 6."""
    rng = rng_for(105)
    w = tensor("stem.conv.weight", 4.0 * rng.standard_normal((CC_OUT, 3, 3, 3)))
    bias = tensor("stem.conv.bias", 0.5 + rng.standard_normal(CC_OUT))
    lo, hi = tensor("/stem/act/min", 0.0), tensor("/stem/act/max", 6.0)
    nodes = [helper.make_node("Conv", ["images", w.name, bias.name], ["/stem/conv/Conv_output_0"],
                              name="/stem/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["/stem/conv/Conv_output_0", lo.name, hi.name], ["output"],
                              name="/stem/act/Clip")]
    s = CC_SIZE
    graph = helper.make_graph(
        nodes, "conv_clip_tf32",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, s, s])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, CC_OUT, s, s])],
        initializer=[w, bias, lo, hi])
    return make_model(graph, 13)


# --- numpy verification of the designs --------------------------------------------------------

def f16(x):
    """Round to fp16 (numpy: round to nearest even, overflow to inf) and widen back."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def tf32(x):
    """fp32 -> tf32, round to nearest even on the 13 dropped bits (finite inputs)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x0FFF + ((u >> 13) & 1)) & ~np.uint64(0x1FFF)
    return u.astype(np.uint32).view(np.float32)


def failing(ref, test, tol=REDUCED_TOL):
    """The comparator's default element rule (Polygraphy's): abs > atol and rel > rtol."""
    ref = np.asarray(ref, dtype=np.float64)
    test = np.asarray(test, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = np.abs(test - ref)
        rel = err / np.where(ref == 0, 2.22e-16, np.abs(ref))
        bad = (err > tol) | np.isnan(err)
        bad &= (rel > tol) | np.isnan(rel)
    return int(bad.sum())


def margin(ref, test, tol=REDUCED_TOL):
    """max over elements of min(abs/atol, rel/rtol): < 1 passes; how close it gets."""
    ref = np.asarray(ref, dtype=np.float64)
    err = np.abs(np.asarray(test, dtype=np.float64) - ref)
    rel = err / np.maximum(np.abs(ref), 2.22e-16)
    return float(np.max(np.minimum(err / tol, rel / tol)))


def check(cond, what):
    print("  %s %s" % ("ok  " if cond else "FAIL", what))
    if not cond:
        raise SystemExit("gen-scenarios: design check failed: " + what)


def verify_clip(model):
    """fp16 emulation of the embeddings and the first LayerNorm up to Pow, on every token
    id: each layer before Pow passes the fp16 tolerance with room to spare, Pow overflows."""
    p = initializers(model)
    tok = p["text_model.embeddings.token_embedding.weight"]
    pos = p["text_model.embeddings.position_embedding.weight"]
    x_ref = (tok[:, None, :] + pos[None, :, :]).astype(np.float32)       # every id, every slot
    x_t = f16(f16(tok)[:, None, :] + f16(pos)[None, :, :])
    mean_ref = x_ref.astype(np.float64).mean(-1, keepdims=True).astype(np.float32)
    mean_t = f16(x_t.astype(np.float64).mean(-1, keepdims=True))
    cen_ref = x_ref - mean_ref
    cen_t = f16(x_t - mean_t)
    sq_ref = cen_ref.astype(np.float64) ** 2
    sq_t = f16(cen_t.astype(np.float64) ** 2)
    print("story 1 (clip_text_encoder): token ids 0..%d, all positions" % (CLIP_VOCAB - 1))
    check(margin(tok, f16(tok)) < 0.3,
          "Gather: fp16 rounding of the table passes (margin %.2f)" % margin(tok, f16(tok)))
    check(margin(x_ref, x_t) < 0.5, "Add (position): passes (margin %.2f)" % margin(x_ref, x_t))
    check(margin(mean_ref, mean_t) < 0.5,
          "ReduceMean: passes (margin %.2f)" % margin(mean_ref, mean_t))
    check(margin(cen_ref, cen_t) < 0.5, "Sub: passes (margin %.2f)" % margin(cen_ref, cen_t))
    n_inf = int(np.isinf(sq_t).sum())
    check(n_inf >= 2 * CLIP_VOCAB * CLIP_T,
          "Pow: %d of %d squares overflow fp16 (largest %.0f > %.0f)"
          % (n_inf, sq_t.size, sq_ref.max(), FP16_MAX))
    check(np.isfinite(sq_ref).all() and sq_ref.max() < 1e6, "Pow: the fp32 reference is finite")
    check(failing(sq_ref, sq_t) == n_inf, "Pow: fails exactly where it overflows")


def verify_islands(model):
    """Bounds on |h| over all x in [0, 1]^64, then the island on random inputs."""
    p = initializers(model)
    w = p["encoder.proj.weight"].astype(np.float64)
    bias = p["encoder.proj.bias"].astype(np.float64)
    sign = np.sign(bias)
    print("story 2 (mixed_fp16_islands):")
    check(np.all(np.sign(w) == sign), "h_j's terms all have the sign of column j")
    h_min, h_max = np.abs(bias), np.abs(bias) + np.abs(w).sum(0)
    check(h_max.max() ** 2 < FP16_MAX,
          "Pow: no square can overflow fp16 (|h| <= %.1f)" % h_max.max())
    check((h_min ** 2).sum() > 2 * FP16_MAX,
          "ReduceSum: the sum of squares is at least %.0f, over 2x fp16's max" % (h_min ** 2).sum())
    xs = f16(rng_for(2).uniform(0, 1, (4096, ISLAND_D)))
    h = f16(f16(xs.astype(np.float64) @ w) + bias)
    ss_fp32 = (h.astype(np.float64) ** 2).sum(-1)
    ss_fp16 = f16((f16(h.astype(np.float64) ** 2)).astype(np.float64).sum(-1))
    check(np.isfinite(ss_fp32).all() and ss_fp32.max() < 1e7,
          "ReduceSum in fp32: finite (%.3g..%.3g on 4096 inputs)" % (ss_fp32.min(), ss_fp32.max()))
    check(np.isinf(ss_fp16).all(), "ReduceSum in fp16: +inf on all 4096 inputs")


def ln_forward(x, gamma, beta, w, bias, ln_fp32):
    """The model under --fp16, with LayerNormalization in fp16 or fp32 (fp32 statistics
    either way, as the engine's normalizations accumulate in fp32)."""
    xin = x if ln_fp32 else f16(x)
    g, bb = (gamma, beta) if ln_fp32 else (f16(gamma), f16(beta))
    x64 = xin.astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(-1, keepdims=True)
    y = ((x64 - mu) / np.sqrt(var + 1e-5) * g + bb).astype(np.float32)
    y = y if ln_fp32 else f16(y)
    mm = f16(f16(y).astype(np.float64) @ f16(w).astype(np.float64))
    return f16(mm + f16(bias))


def verify_layernorm(model):
    p = initializers(model)
    gamma, beta = p["encoder.final_layer_norm.weight"], p["encoder.final_layer_norm.bias"]
    w, bias = p["head.weight"], p["head.bias"]
    rng = rng_for(4)
    x = rng.uniform(*LN_VAL_RANGE, (4, LN_T, LN_D)).astype(np.float32)
    x64 = x.astype(np.float64)
    mu = x64.mean(-1, keepdims=True)
    ref_ln = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * gamma + beta
    ref = ref_ln @ w.astype(np.float64) + bias
    err16 = np.abs(ln_forward(x, gamma, beta, w, bias, False) - ref)
    err32 = np.abs(ln_forward(x, gamma, beta, w, bias, True) - ref)
    print("story 4 (layernorm_fp32): hidden_states in [%g, %g]" % LN_VAL_RANGE)
    check(err16.mean() >= 10 * err32.mean(),
          "output mean abs error: LayerNormalization fp16 %.3g, fp32 %.3g (%.0fx)"
          % (err16.mean(), err32.mean(), err16.mean() / err32.mean()))
    check(err16.max() >= 10 * err32.max(),
          "output max abs error: fp16 %.3g, fp32 %.3g (%.0fx)"
          % (err16.max(), err32.max(), err16.max() / err32.max()))


def conv3x3(x, w, bias):
    """x (3, H, W), w (O, 3, 3, 3), pad 1, in float64 (products of tf32 values are exact)."""
    _, hgt, wid = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    out = np.zeros((w.shape[0], hgt, wid))
    for c in range(3):
        for i in range(3):
            for j in range(3):
                out += w[:, c, i, j, None, None].astype(np.float64) * xp[c, i:i + hgt, j:j + wid]
    return out + bias[:, None, None]


def verify_conv_clip(model):
    """TF32 Conv against the fp32 one on uniform [0, 1] images: the Conv fails the default
    tf32 tolerance somewhere (so it is an origin layer), its typical error is TF32-sized, and
    elements land on different sides of the bounds 0 and 6."""
    p = initializers(model)
    w, bias = p["stem.conv.weight"], p["stem.conv.bias"]
    x = rng_for(5).uniform(0, 1, (3, CC_SIZE, CC_SIZE)).astype(np.float32)
    ref = conv3x3(x, w, bias).astype(np.float32)
    test = conv3x3(tf32(x), tf32(w), bias).astype(np.float32)
    rel = np.abs(test.astype(np.float64) - ref) / np.maximum(np.abs(ref), 1e-30)
    print("story 5 (conv_clip_tf32): 1x3x%dx%d images in [0, 1]" % (CC_SIZE, CC_SIZE))
    n_fail = failing(ref, test)
    check(n_fail >= 100, "Conv: %d of %d elements fail the tf32 default tolerance"
          % (n_fail, ref.size))
    check(2.0 ** -16 < np.median(rel) < 2.0 ** -10,
          "Conv: median relative error %.3g is TF32-sized (2^-11 = %.3g)"
          % (np.median(rel), 2.0 ** -11))
    for bound in (0.0, 6.0):
        crossed = int(np.sum((ref > bound) != (test > bound)))
        check(crossed >= 10, "Clip bound %g: %d elements on the other side than the reference"
              % (bound, crossed))
    check(np.mean(ref <= 0) > 0.2 and np.mean(ref >= 6) > 0.2,
          "Clip clamps %.0f%% at 0 and %.0f%% at 6"
          % (100 * np.mean(ref <= 0), 100 * np.mean(ref >= 6)))


# --- main ---------------------------------------------------------------------------------------

def main():
    args = sys.argv[1:]
    verify = "--verify" in args
    args = [a for a in args if a != "--verify"]
    if len(args) != 1:
        sys.stderr.write("usage: gen-scenarios.py [--verify] FIXTURES_DIR\n")
        return 2
    out = os.path.join(args[0], "scenarios")
    shutil.rmtree(out, ignore_errors=True)  # no stale files
    os.makedirs(out)

    models = {}
    models["clip_text_encoder"] = build_clip_text()
    models["mixed_fp16_islands"] = build_mixed_islands()
    models["conv_fp16"] = build_conv_fp16(np.float16)
    models["layernorm_fp32"] = build_layernorm()
    models["conv_clip_tf32"] = build_conv_clip()
    for name, model in models.items():
        save_valid(model, os.path.join(out, name + ".onnx"))
    save_mixed_conv(build_conv_fp16(np.float32),
                    os.path.join(out, "conv_fp16_weight_fp32_bias.onnx"))
    write_bytes(os.path.join(out, "README.md"), README.encode())

    if verify:
        verify_clip(models["clip_text_encoder"])
        verify_islands(models["mixed_fp16_islands"])
        verify_layernorm(models["layernorm_fp32"])
        verify_conv_clip(models["conv_clip_tf32"])
        print("gen-scenarios: every design check holds")
    return 0


README = """# Scenario fixtures

Generated by `scripts/gen-scenarios.py` (`make fixtures`); do not edit. The five
fp16 / TF32 failure stories these models reproduce, the commands and their
output are in `docs/scenarios.md`; `tests/e2e/test_scenarios.sh` asserts each
diagnosis. `/usr/bin/python3 scripts/gen-scenarios.py --verify fixtures`
regenerates them and checks each design numerically with numpy.

| File | Story |
|------|-------|
| `clip_text_encoder.onnx` | 1: CLIP-style text encoder; x^2 overflows fp16 in the first LayerNorm |
| `mixed_fp16_islands.onnx` | 2: fp16 model with an fp32 island (Pow, ReduceSum) between Casts |
| `conv_fp16_weight_fp32_bias.onnx` | 3: Conv with a float16 weight and a float32 bias (must not load) |
| `conv_fp16.onnx` | 3: the same Conv, corrected: all float16 |
| `layernorm_fp32.onnx` | 4: LayerNormalization (opset 17) on hidden states with a large offset |
| `conv_clip_tf32.onnx` | 5: 1x3x512x512 Conv then Clip(0, 6), for TF32 |
"""

if __name__ == "__main__":
    sys.exit(main())
