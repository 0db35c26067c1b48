#!/usr/bin/env bash
# `layerdiff inspect` on the fixtures: text, --json (checked against what
# Debian's python3-onnx reads from the same file), --layers, every malformed
# model of fixtures/bad, and files that are neither models nor dumps.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures
VALID=("cnn.onnx" "transformer.onnx" "external_data/model.onnx")

# check_json FILE MODEL [layers]: the JSON in FILE describes MODEL the way onnx sees it.
check_json() {
  "$PY" - "$1" "$2" "${3:-}" <<'PYEOF'
import collections, json, sys
import numpy as np
import onnx
from onnx import numpy_helper
out, path, layers = sys.argv[1], sys.argv[2], sys.argv[3] == "layers"
doc = json.load(open(out))
m = onnx.load(path)  # also resolves external data
g = m.graph

def fail(msg):
    sys.exit("json check: %s" % msg)

def dims(vi):
    t = vi.type.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]

expect_keys = ["kind", "path", "producer", "ir_version", "domain", "model_version",
               "graph_name", "opsets", "inputs", "outputs", "node_count", "op_counts",
               "parameters"] + (["nodes"] if layers else []) + ["notes"]
if list(doc) != expect_keys:
    fail("keys %s != %s" % (list(doc), expect_keys))
if doc["kind"] != "model" or doc["path"] != path:
    fail("kind/path")
if doc["producer"] != {"name": m.producer_name, "version": m.producer_version}:
    fail("producer %s" % doc["producer"])
if doc["ir_version"] != m.ir_version or doc["graph_name"] != g.name:
    fail("ir_version/graph_name")
opsets = [{"domain": o.domain or "ai.onnx", "version": o.version} for o in m.opset_import]
if doc["opsets"] != opsets:
    fail("opsets %s != %s" % (doc["opsets"], opsets))
inits = {t.name for t in g.initializer}
inputs = [{"name": i.name, "dtype": "float32", "shape": dims(i)} for i in g.input if i.name not in inits]
outputs = [{"name": o.name, "dtype": "float32", "shape": dims(o)} for o in g.output]
if doc["inputs"] != inputs or doc["outputs"] != outputs:
    fail("inputs/outputs %s %s != %s %s" % (doc["inputs"], doc["outputs"], inputs, outputs))
if doc["node_count"] != len(g.node):
    fail("node_count")
counts = collections.Counter(n.op_type for n in g.node)
expected = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
if list(doc["op_counts"].items()) != expected:
    fail("op_counts %s != %s" % (doc["op_counts"], expected))
arrays = [numpy_helper.to_array(t) for t in g.initializer]
params = {"count": int(sum(a.size for a in arrays)), "bytes": int(sum(a.nbytes for a in arrays)),
          "initializers": len(arrays)}
if doc["parameters"] != params:
    fail("parameters %s != %s" % (doc["parameters"], params))
if layers:
    nodes = [{"index": i, "name": n.name, "op_type": n.op_type, "domain": n.domain or "ai.onnx",
              "inputs": [x or None for x in n.input], "outputs": [x or None for x in n.output]}
             for i, n in enumerate(g.node)]  # the fixtures are listed in topological order
    if doc["nodes"] != nodes:
        fail("nodes differ, first: %s vs %s" % (doc["nodes"][:1], nodes[:1]))
if doc["notes"] != []:
    fail("notes %s" % doc["notes"])
PYEOF
}

for f in "${VALID[@]}"; do
  case_begin "inspect $f (text)"
  run "$LAYERDIFF" inspect "$FX/$f"
  expect_exit 0
  expect_stdout_contains "ONNX model $FX/$f"
  expect_stdout_contains "producer"
  expect_stdout_contains "layerdiff-gen-fixtures 1"
  expect_stdout_contains "ir version"
  expect_stdout_contains "ai.onnx 13"
  expect_stdout_contains "Inputs (1)"
  expect_stdout_contains "Outputs (1)"
  expect_stdout_contains "Operators"
  expect_stdout_contains "parameters"
  expect_stdout_not_contains "Layers"
  expect_true "stderr is empty" test ! -s "$STDERR"

  case_begin "inspect $f --json"
  run "$LAYERDIFF" inspect "$FX/$f" --json
  expect_exit 0
  expect_true "JSON matches onnx's view of the model ($(check_json "$STDOUT" "$FX/$f" 2>&1 | tail -1))" \
    check_json "$STDOUT" "$FX/$f"

  case_begin "inspect $f --json --layers"
  run "$LAYERDIFF" inspect --layers "$FX/$f" -j
  expect_exit 0
  expect_true "JSON with nodes matches onnx ($(check_json "$STDOUT" "$FX/$f" layers 2>&1 | tail -1))" \
    check_json "$STDOUT" "$FX/$f" layers
done

case_begin "inspect cnn.onnx: text details"
run "$LAYERDIFF" inspect "$FX/cnn.onnx"
expect_stdout_contains "1 x 3 x 32 x 32"
expect_stdout_contains "1 x 10"
expect_stdout_contains "9,242 in 6 initializers, 36,968 bytes (36.1 KiB)"
expect_true "Conv counted twice, listed first" grep -qE '^  Conv +2$' "$STDOUT"
expect_true "operators sorted by count then name" \
  sh -c "sed -n '/^Operators/,/^\$/p' '$STDOUT' | awk 'NR>1 && NF {print \$1}' | tr '\n' ' ' | grep -qx 'Conv MaxPool Relu Flatten Gemm '"

case_begin "inspect cnn.onnx --layers (text)"
run "$LAYERDIFF" inspect "$FX/cnn.onnx" --layers
expect_exit 0
expect_stdout_contains "Layers"
expect_true "node 0 row" grep -qE '^ +0  conv1 +Conv +input, conv1.weight, conv1.bias -> conv1_out$' "$STDOUT"
expect_true "node 7 row" grep -qE '^ +7  fc +Gemm +flat_out, fc.weight, fc.bias -> output$' "$STDOUT"

case_begin "inspect transformer.onnx: symbolic dims and '/' names"
run "$LAYERDIFF" inspect "$FX/transformer.onnx" --layers
expect_exit 0
expect_stdout_contains "batch x 16 x 64"
expect_stdout_contains "/encoder/layer.0/attn/MatMul "
expect_stdout_contains "/encoder/layer.0/attn/MatMul_output_0"
expect_stdout_contains "encoder.layer.0.attn.q_proj.weight"
expect_stdout_contains "Erf"

case_begin "inspect transformer.onnx --json: symbolic batch dim"
run "$LAYERDIFF" inspect "$FX/transformer.onnx" --json
expect_exit 0
expect_true "shape is [\"batch\", 16, 64]" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["inputs"][0]["shape"] == ["batch", 16, 64], d["inputs"]
assert d["outputs"][0]["shape"] == ["batch", 16, 64], d["outputs"]' "$STDOUT"

case_begin "external data resolved relative to the model, not the cwd"
(cd "$WORK" && "$LAYERDIFF" inspect "$FX/external_data/model.onnx" --json >"$WORK/ext.json" 2>"$WORK/ext.err")
expect_true "exit 0 from another directory" test $? -eq 0
expect_true "parameters 144 / 576 bytes" "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["parameters"] == {"count": 144, "bytes": 576, "initializers": 2}, d["parameters"]' "$WORK/ext.json"
(cd "$FX" && "$LAYERDIFF" inspect external_data/model.onnx >"$WORK/ext.txt" 2>&1)
expect_true "relative model path works" test $? -eq 0

# --- malformed models ---------------------------------------------------------------
message_contains() { sed "s|$1||g" "$STDERR" | grep -qF -- "$2"; }
n_bad=0
for model in "$FX"/bad/*.onnx; do
  name=$(basename "$model" .onnx)
  expected=$FX/bad/$name.expected
  n_bad=$((n_bad + 1))
  case_begin "bad/$name.onnx is rejected"
  if [ ! -f "$expected" ]; then
    _fail "missing $expected"
    continue
  fi
  code=$(sed -n 1p "$expected")
  substring=$(sed -n 2p "$expected")
  for mode in text json; do
    if [ $mode = json ]; then run "$LAYERDIFF" inspect --json "$model"; else run "$LAYERDIFF" inspect "$model"; fi
    expect_exit "$code"
    # Match in the message without the path: every name here is also a substring.
    expect_true "error says '$substring' (besides the path)" message_contains "$model" "$substring"
    expect_stderr_contains "layerdiff: error: "
    expect_stderr_one_line
    expect_true "nothing on stdout ($mode)" test ! -s "$STDOUT"
  done
done
case_begin "fixtures/bad has the expected models"
expect_true "at least 14 malformed models (found $n_bad)" test "$n_bad" -ge 14

# --- files that are not models ---------------------------------------------------------
case_begin "missing file"
run "$LAYERDIFF" inspect "$WORK/does-not-exist.onnx"
expect_exit 2
expect_stderr_contains "layerdiff: error: cannot open '$WORK/does-not-exist.onnx'"
expect_stderr_one_line

case_begin "a directory"
run "$LAYERDIFF" inspect "$FX"
expect_exit 2
expect_stderr_contains "is a directory"
expect_stderr_one_line

case_begin "unreadable file"
cp "$FX/cnn.onnx" "$WORK/unreadable.onnx"
chmod 000 "$WORK/unreadable.onnx"
if [ "$(id -u)" -eq 0 ]; then
  skip_case "running as root: permissions are not enforced"
else
  run "$LAYERDIFF" inspect "$WORK/unreadable.onnx"
  expect_exit 2
  expect_stderr_contains "cannot open"
  expect_stderr_one_line
fi

# An HDF5 file that is not a layerdiff dump: recognised by its signature (also
# behind a 512-byte user block), then rejected by the dump reader, not the ONNX loader.
for ub in 0 512 2048; do
  case_begin "HDF5 file with user block $ub that is not a dump"
  "$PY" -c '
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", userblock_size=int(sys.argv[2])) as f:
    f["x"] = np.zeros(3, np.float32)' "$WORK/plain_$ub.onnx" "$ub"
  run "$LAYERDIFF" inspect "$WORK/plain_$ub.onnx"
  expect_exit 2
  expect_stderr_one_line
  expect_stderr_contains "layerdiff: error: "
  expect_true "rejected as a dump, not as ONNX" grep -qi "dump" "$STDERR"
done

case_begin "writing to a full disk is an error"
if [ -w /dev/full ]; then
  run sh -c "'$LAYERDIFF' inspect '$FX/transformer.onnx' --layers >/dev/full"
  expect_exit 2
  expect_stderr_contains "cannot write"
else
  skip_case "/dev/full not available"
fi

finish
