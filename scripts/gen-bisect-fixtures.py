#!/usr/bin/python3
"""Writes the fixtures of `layerdiff bisect` and `layerdiff reduce` into a folder.

    /usr/bin/python3 scripts/gen-bisect-fixtures.py fixtures/bisect

Every model is built so the answer is known by construction (docs/bisect.md,
"Fixtures"). Run with the defaults of `layerdiff bisect` (--fp16, inputs from
seed 1 in [0,1], atol = rtol = 0.00488 for fp16 outputs):

two_branches.onnx   Two independent overflowing layers in different branches:
                    a_gain and b_gain multiply by 70000 and 90000, which are
                    +inf in fp16, so the layer's output is inf unless it
                    computes in fp32. The minimal fp32 set is exactly
                    {a_gain, b_gain} (topological indices 2 and 7 of 12
                    nodes), so no prefix or suffix of the node list is minimal:
                    Polygraphy-style prefix search ends at k = 8 (nodes 0..7),
                    suffix search at k = 10 (nodes 2..11).
amplify.onnx        A cancellation: amp_sub = amp_p - amp_r with amp_p = x*1000.5
                    and amp_r = x*1000; in fp16 the products carry errors of
                    0.25 while the true difference is 0.5x. The isolated error
                    blames amp_sub alone (its fp16 input rounding), but the
                    outputs pass only with {amp_p, amp_r, amp_sub} in fp32 (the
                    producers' outputs and the subtraction's inputs must stay
                    fp32). A decoy (decoy_div, 1/(x-0.5), big isolated error)
                    feeds the output scaled by 1e-6 and does not matter: ddmin
                    must drop it.
weird_names.onnx    two_branches with culprits named '/A/gain[0]*x' and
                    '#b:gain,1': glob characters, a leading '#', ':' and ','
                    must survive --layer-precisions @file and trtexec's parser
                    (which cannot express ',': the flags file says so).
subnormal.onnx      y = (x * 1e-39) * 1e38. In fp16 the constant 1e-39 is 0;
                    forcing both Muls to fp32 passes. With --flush-denormals
                    even fp32 flushes the subnormal product: no set passes
                    (bisect exits 1).

Deterministic: no randomness, every file written from scratch.
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8
PRODUCER = "layerdiff-gen-bisect-fixtures"


def const(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def model(name, nodes, inits, width=32):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          producer_name=PRODUCER, producer_version="1")
    m.ir_version = IR_VERSION
    onnx.checker.check_model(m, full_check=True)
    return m


def mul(name, a, c, out):
    return helper.make_node("Mul", [a, c], [out], name=name)


def two_branches(gain_a="a_gain", gain_b="b_gain"):
    nodes = [
        mul("a_scale_in", "x", "c_a_in", "a1"),       # 0: x * 1e-3
        mul("b_scale_in", "x", "c_b_in", "b1"),       # 1: x * 2e-3
        mul(gain_a, "a1", "c_a_gain", "a2"),          # 2: * 70000 (inf in fp16)
        helper.make_node("Relu", ["a2"], ["a3"], name="a_relu"),            # 3
        mul("a_shrink", "a3", "c_a_shrink", "a4"),    # 4: * 0.01
        helper.make_node("Add", ["a4", "c_quarter"], ["a5"], name="a_up"),  # 5
        helper.make_node("Sub", ["a5", "c_quarter"], ["a6"], name="a_down"),  # 6
        mul(gain_b, "b1", "c_b_gain", "b2"),          # 7: * 90000 (inf in fp16)
        mul("b_shrink", "b2", "c_b_shrink", "b3"),    # 8: * 0.005
        helper.make_node("Relu", ["b3"], ["b4"], name="b_relu"),            # 9
        helper.make_node("Add", ["a6", "b4"], ["j"], name="join"),         # 10
        mul("out_scale", "j", "c_one", "y"),          # 11
    ]
    inits = [const("c_a_in", 1e-3), const("c_b_in", 2e-3), const("c_a_gain", 70000.0),
             const("c_a_shrink", 0.01), const("c_quarter", 0.25), const("c_b_gain", 90000.0),
             const("c_b_shrink", 0.005), const("c_one", 1.0)]
    return nodes, inits


def amplify():
    nodes = [
        mul("amp_p", "x", "c_p", "p"),                                      # x * 1000.5
        helper.make_node("Sub", ["x", "c_half"], ["dx"], name="decoy_shift"),
        mul("amp_r", "x", "c_r", "r"),                                      # x * 1000
        helper.make_node("Div", ["c_one", "dx"], ["inv"], name="decoy_div"),  # 1/(x-0.5)
        helper.make_node("Sub", ["p", "r"], ["q"], name="amp_sub"),         # 0.5x
        mul("decoy_scale", "inv", "c_tiny", "d"),                           # * 1e-6
        helper.make_node("Add", ["q", "d"], ["y"], name="join"),
    ]
    inits = [const("c_p", 1000.5), const("c_r", 1000.0), const("c_half", 0.5),
             const("c_one", 1.0), const("c_tiny", 1e-6)]
    return nodes, inits


def subnormal():
    nodes = [mul("tiny", "x", "c_tiny", "t"), mul("huge", "t", "c_huge", "y")]
    return nodes, [const("c_tiny", 1e-39), const("c_huge", 1e38)]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "fixtures/bisect"
    os.makedirs(out, exist_ok=True)
    models = {
        "two_branches": model("two_branches", *two_branches()),
        "amplify": model("amplify", *amplify()),
        "weird_names": model("weird_names", *two_branches("/A/gain[0]*x", "#b:gain,1")),
        "subnormal": model("subnormal", *subnormal()),
    }
    for name, m in models.items():
        path = os.path.join(out, name + ".onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        print(path)


if __name__ == "__main__":
    main()
