#!/usr/bin/env bash
# `layerdiff reduce`: the repro of the first divergent layer of the planted
# fixture is that layer alone, passes onnx.checker (full check), loads back
# in layerdiff, its .h5 holds the reference values of the cut tensor (equal
# to a reference dump of the full model), and the printed command reproduces
# the divergence (exit 1). --origin with context on the cancellation
# fixture; a layer whose error is inherited does not reproduce alone (exit
# 1, said so); the transformer's attention with producers and a Constant;
# usage errors exit 2 with one line.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures/bisect
cd "$WORK" || exit 1

checker() { # MODEL: onnx.checker with the full check (shape inference too)
  "$PY" -c "import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)" "$1"
}

case_begin "--first-divergent: the overflowing layer alone, checker-valid"
run "$LAYERDIFF" reduce "$FX/two_branches.onnx" --first-divergent -o repro.onnx
expect_exit 0
expect_stdout_contains "layer    a_gain (Mul, node 2): the first divergent layer"
expect_stdout_contains "the repro loaded back still diverges"
expect_stdout_contains "repro    layerdiff run repro.onnx --load-inputs repro.h5 --fp16"
expect_file_exists repro.onnx
expect_file_exists repro.h5
expect_true "onnx.checker" checker repro.onnx
expect_true "one node, input a1 1x32 float, initializer, output a2" "$PY" - repro.onnx <<'PYEOF'
import sys, onnx
g = onnx.load(sys.argv[1]).graph
t = g.input[0].type.tensor_type
ok = ([n.name for n in g.node] == ["a_gain"] and [i.name for i in g.input] == ["a1"]
      and t.elem_type == onnx.TensorProto.FLOAT and [d.dim_value for d in t.shape.dim] == [1, 32]
      and [i.name for i in g.initializer] == ["c_a_gain"] and [o.name for o in g.output] == ["a2"])
sys.exit(0 if ok else 1)
PYEOF

case_begin "repro.h5 holds the reference values of the cut tensor"
run "$LAYERDIFF" run "$FX/two_branches.onnx" --backends reference --dump ref.h5
expect_exit 0
expect_true "inputs/a1 equals the reference run's a1" "$PY" - <<'PYEOF'
import sys, h5py, numpy as np
with h5py.File("repro.h5", "r") as r, h5py.File("ref.h5", "r") as f:
    sys.exit(0 if np.array_equal(r["inputs"]["a1"][()], f["runs"]["reference"]["a1"][()]) else 1)
PYEOF

case_begin "the printed command reproduces the divergence"
run "$LAYERDIFF" run repro.onnx --load-inputs repro.h5 --fp16
expect_exit 1
expect_stdout_contains "a2"

case_begin "--origin with --context 2 keeps the cancellation's producers"
run "$LAYERDIFF" reduce "$FX/amplify.onnx" --origin --context 2 -o amp.onnx
expect_exit 0
expect_stdout_contains "kept     3 nodes: amp_p amp_r amp_sub"
expect_true "onnx.checker" checker amp.onnx
run "$LAYERDIFF" run amp.onnx --load-inputs amp.h5 --fp16
expect_exit 1

case_begin "an inherited error does not reproduce alone: exit 1, said so"
run "$LAYERDIFF" reduce "$FX/two_branches.onnx" --node a_relu -o relu.onnx
expect_exit 1
expect_stdout_contains "does NOT diverge"
expect_stderr_contains "try a larger --context"
expect_true "onnx.checker" checker relu.onnx

case_begin "transformer attention: producers, a Constant, two cut tensors"
run "$LAYERDIFF" reduce "$ROOT/fixtures/transformer.onnx" --input-shapes batch:2 \
  --node /encoder/layer.0/attn/Softmax --context 3 -o sm.onnx
expect_exit 1 # fp16 attention on these inputs is within tolerance: nothing to reproduce
expect_stdout_contains "inputs   2 cut tensors"
expect_stdout_not_contains "--input-shapes" # the repro's shapes are fixed
expect_true "onnx.checker" checker sm.onnx
run "$LAYERDIFF" run sm.onnx --load-inputs sm.h5 --fp16
expect_exit 0

case_begin "bad usage exits 2 with one line"
run "$LAYERDIFF" reduce "$FX/two_branches.onnx" -o x.onnx
expect_exit 2
expect_stderr_one_line
run "$LAYERDIFF" reduce "$FX/two_branches.onnx" --node nope -o x.onnx
expect_exit 2
expect_stderr_one_line
expect_stderr_contains "no node named 'nope'"
run "$LAYERDIFF" reduce "$FX/two_branches.onnx" --node a_gain --origin -o x.onnx
expect_exit 2
run "$LAYERDIFF" reduce "$FX/two_branches.onnx" --node a_gain
expect_exit 2
expect_stderr_contains "-o REPRO.onnx is required"

finish
