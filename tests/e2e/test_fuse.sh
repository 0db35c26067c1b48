#!/usr/bin/env bash
# Elementwise chain fusion (backends/exec_fuse.c) end to end: `layerdiff run`
# fuses when its observer reads only the graph outputs (no --dump, or
# --layers outputs) and --no-fuse turns it off; both must give the same
# graph outputs bit for bit, on the reference and the emulated --fp16
# engine (same counters too), on a hard-swish model made here and on
# PaddleOCR det when it is in models/. --profile names the fusion.
source "$(dirname "$0")/lib.sh"
MODELS=${LAYERDIFF_MODELS:-$ROOT/models}
DET=$MODELS/ppocr_det.onnx
L="$LAYERDIFF"
cd "$WORK" || exit 1

# hswish.onnx: x [1,8,40,50] -> Mul(per-channel) -> Add(per-channel) -> Add(3)
# -> Clip(0,6) -> Mul -> Div(6) -> Relu -> y, as det's folded batch norms.
"$PY" - <<'PYEOF'
import numpy as np, onnx
from onnx import helper, numpy_helper as nh, TensorProto as TP
c = 8
inits = [nh.from_array(np.linspace(-2, 2, c).astype(np.float32).reshape(c, 1, 1), "s"),
         nh.from_array(np.linspace(1, -1, c).astype(np.float32).reshape(1, c, 1, 1), "b"),
         nh.from_array(np.array(3, np.float32), "three"),
         nh.from_array(np.array(0, np.float32), "zero"),
         nh.from_array(np.array(6, np.float32), "six")]
n = helper.make_node
nodes = [n("Mul", ["x", "s"], ["m"], name="m"), n("Add", ["m", "b"], ["a"], name="a"),
         n("Add", ["a", "three"], ["a3"], name="a3"),
         n("Clip", ["a3", "zero", "six"], ["cl"], name="cl"),
         n("Mul", ["a", "cl"], ["hm"], name="hm"), n("Div", ["hm", "six"], ["hs"], name="hs"),
         n("Relu", ["hs"], ["y"], name="y")]
g = helper.make_graph(nodes, "hswish", [helper.make_tensor_value_info("x", TP.FLOAT, [1, c, 40, 50])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [1, c, 40, 50])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, "hswish.onnx")
PYEOF

# same_outputs A.h5 B.h5: every dataset and counter attribute equal, bit for bit
same_outputs() {
  "$PY" - "$1" "$2" <<'PYEOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
def sets(f):
    out = {}
    f.visititems(lambda k, o: out.__setitem__(k, o) if isinstance(o, h5py.Dataset) else None)
    return out
A, B = sets(a), sets(b)
assert set(A) == set(B), (sorted(set(A) ^ set(B)))
for k in A:
    x, y = A[k][()], B[k][()]
    assert x.dtype == y.dtype and x.shape == y.shape, k
    if x.dtype.names:  # the index table: field by field (strings are pointers)
        assert all(np.array_equal(x[f], y[f]) for f in x.dtype.names), k
    else:
        assert np.ascontiguousarray(x).tobytes() == np.ascontiguousarray(y).tobytes(), k
    for key in ("overflows", "nans_created", "underflows", "subnormals"):
        if key in A[k].attrs or key in B[k].attrs:
            assert np.array_equal(A[k].attrs.get(key), B[k].attrs.get(key)), (k, key)
PYEOF
}

for be in "reference" "emulated --fp16"; do
  case_begin "hswish.onnx on $be: fused and --no-fuse give the same outputs"
  run "$L" run hswish.onnx --backends $be --val-range '[-8,8]' --layers outputs --dump f.h5 --profile
  expect_exit 0
  expect_stdout_contains "7 elementwise nodes fused into 1 chains"
  run "$L" run hswish.onnx --backends $be --val-range '[-8,8]' --layers outputs --dump n.h5 --no-fuse --profile
  expect_exit 0
  expect_true "--no-fuse does not fuse" sh -c "! grep -q 'fused into' '$STDOUT'"
  expect_true "same graph outputs and counters" same_outputs f.h5 n.h5
  rm -f f.h5 n.h5
done

case_begin "a dump of every layer does not fuse (every layer has data)"
run "$L" run hswish.onnx --backends reference --dump all.h5 --profile
expect_exit 0
expect_true "no fusion with --dump of every layer" sh -c "! grep -q 'fused into' '$STDOUT'"
expect_stdout_contains "7 tensors"

for be in "reference" "emulated --fp16"; do
  case_begin "PaddleOCR det on $be: fused and --no-fuse give the same outputs"
  if [ -f "$DET" ]; then
    run "$L" run "$DET" --input-shapes x:1x3x640x640 --val-range '[-2,2]' --backends $be --layers outputs --dump f.h5 --profile
    expect_exit 0
    expect_stdout_contains "elementwise nodes fused into"
    cp "$STDOUT" fused.txt
    run "$L" run "$DET" --input-shapes x:1x3x640x640 --val-range '[-2,2]' --backends $be --layers outputs --dump n.h5 --no-fuse
    expect_exit 0
    expect_true "same graph outputs and counters" same_outputs f.h5 n.h5
    expect_true "same counter summary" sh -c "[ \"\$(grep counters fused.txt)\" = \"\$(grep counters '$STDOUT')\" ]"
    rm -f f.h5 n.h5
  else
    skip_case "ppocr_det.onnx not in $MODELS: run scripts/fetch-models.sh"
  fi
done

finish
