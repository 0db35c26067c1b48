#!/usr/bin/env bash
# `layerdiff run --profile / --profile-json / --warmup`: the per-op table,
# the JSON profile (checked with Python: node times add up, the CNN
# fixture's conv/gemm work is its exact multiply-add count, peak RSS set),
# warm-up runs that leave the dump and statistics alone, the emulated
# backend's profile, backends without a profile, bad values; and the OpenMP
# wait policy layerdiff sets for itself (GOMP_SPINCOUNT) unless the user
# chose one.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures
BUILD_DIR=${LAYERDIFF_BUILD:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
cd "$WORK" || exit 1

# cnn.onnx: conv1 3->8 3x3 pad 1 on 32x32, conv2 8->16 3x3 unpadded on 16x16
# (14x14 out), fc 784->10: 2 flops per multiply-add.
CNN_FLOPS=$((2 * (8 * 32 * 32 * 27 + 16 * 14 * 14 * 72 + 10 * 784)))

case_begin "run --profile prints the op table, conv/gemm work and peak RSS"
run "$LAYERDIFF" run --backends reference "$FX/cnn.onnx" --profile
expect_exit 0
expect_stdout_contains "profile  reference: "
expect_stdout_contains "op type"
expect_stdout_contains "Conv "
expect_stdout_contains "other (executor, observer)"
expect_stdout_contains "  $(awk -v f="$CNN_FLOPS" 'BEGIN { printf "%.1f", f / 1e6 }') MFLOP of conv/gemm work"
expect_stdout_contains "peak RSS "

case_begin "run --profile-json writes every node's time and work"
run "$LAYERDIFF" run --backends reference "$FX/cnn.onnx" --profile-json prof.json --threads 1
expect_exit 0
expect_file_exists prof.json
expect_stdout_not_contains "op type" # JSON only: no table
expect_true "profile JSON content" "$PY" - "$CNN_FLOPS" <<'PYEOF'
import json, sys
want = int(sys.argv[1])
d = json.load(open("prof.json"))
assert d["model"].endswith("cnn.onnx") and d["threads"] == 1, d
assert d["peak_rss_bytes"] > 1 << 20, d["peak_rss_bytes"]
(b,) = d["backends"]
assert b["name"] == "reference" and b["run_seconds"] > 0 and b["dump_seconds"] == 0
assert b["dump_cpu_seconds"] == 0, b["dump_cpu_seconds"]
p = b["profile"]
assert "thread" in p["description"], p["description"]
nodes = p["nodes"]
assert [n["op_type"] for n in nodes][:2] == ["Conv", "Relu"], nodes
assert all(n["seconds"] > 0 for n in nodes), nodes
assert sum(n["flops"] for n in nodes) == want, (sum(n["flops"] for n in nodes), want)
assert all(n["flops"] == 0 for n in nodes if n["op_type"] not in ("Conv", "Gemm"))
conv = p["conv_gemm"]
assert conv["flops"] == want and conv["count"] == 3, conv
assert abs(conv["seconds"] - sum(n["seconds"] for n in nodes if n["flops"])) < 1e-9
assert abs(p["node_seconds"] - sum(n["seconds"] for n in nodes)) < 1e-9
assert p["node_seconds"] <= b["run_seconds"]
ops = {o["op_type"]: o for o in p["ops"]}
assert ops["Conv"]["count"] == 2 and ops["Gemm"]["count"] == 1, ops
assert abs(sum(o["share"] for o in p["ops"]) - p["node_seconds"] / b["run_seconds"]) < 1e-9
PYEOF

case_begin "run --backends emulated --fp16 --profile-json profiles the emulated run"
run "$LAYERDIFF" run "$FX/cnn.onnx" --backends emulated --fp16 --profile --profile-json emu.json \
  --threads 1
expect_exit 0
expect_stdout_contains "profile  emulated: "
expect_file_exists emu.json
expect_true "emulated profile JSON: every node timed, exact conv/gemm work" "$PY" - "$CNN_FLOPS" <<'PYEOF'
import json, sys
want = int(sys.argv[1])
(b,) = json.load(open("emu.json"))["backends"]
assert b["name"] == "emulated" and b["run_seconds"] > 0, b
p = b["profile"]
nodes = p["nodes"]
assert [n["op_type"] for n in nodes][:2] == ["Conv", "Relu"], nodes
assert all(n["seconds"] > 0 for n in nodes), nodes
assert sum(n["flops"] for n in nodes) == want, (sum(n["flops"] for n in nodes), want)
assert p["conv_gemm"]["flops"] == want and p["conv_gemm"]["count"] == 3, p["conv_gemm"]
assert abs(p["node_seconds"] - sum(n["seconds"] for n in nodes)) < 1e-9
assert p["node_seconds"] <= b["run_seconds"]
PYEOF

case_begin "--warmup: the real run is still dumped and reported once"
run "$LAYERDIFF" run --backends reference "$FX/cnn.onnx" --warmup 2 --dump w.h5 --profile-json w.json
expect_exit 0
expect_stdout_contains "reference  8 layer outputs"
expect_stdout_contains "(dump "
expect_file_exists w.h5
expect_true "warm-up runs leave the dump as one run" "$PY" - <<'PYEOF'
import h5py, json
f = h5py.File("w.h5", "r")
assert list(f["runs"]) == ["reference"], list(f["runs"])
assert len(f["runs/reference"]) == 8, len(f["runs/reference"])
b = json.load(open("w.json"))["backends"][0]
assert b["dump_seconds"] > 0
# the writing thread's CPU time in the same calls: some, and within their wall time
assert 0 < b["dump_cpu_seconds"] <= b["dump_seconds"] + 1e-3, b
PYEOF
run "$LAYERDIFF" run --backends reference "$FX/cnn.onnx" --dump c.h5
expect_true "a warmed-up run dumps the same tensors" \
  "$PY" -c "import h5py, numpy as np; a = h5py.File('w.h5')['runs/reference']; b = h5py.File('c.h5')['runs/reference']; assert all(np.array_equal(a[k][()], b[k][()]) for k in a)"

case_begin "run --dump --profile-json: a comparing run's dump CPU time per backend"
run "$LAYERDIFF" run "$FX/cnn.onnx" --dump cmp.h5 --profile-json cmp.json
expect_exit 0
expect_true "both backends report their dump's wall and CPU time" "$PY" - <<'PYEOF'
import json
ref, test = json.load(open("cmp.json"))["backends"]
for b in (ref, test): # the test side counts its isolated run's writes too
    assert 0 < b["dump_cpu_seconds"] <= b["dump_seconds"] + 1e-3, b
PYEOF

case_begin "--warmup out of range is a usage error"
run "$LAYERDIFF" run --backends reference "$FX/cnn.onnx" --warmup -1
expect_exit 2
expect_stderr_contains "--warmup must be between 0 and 1000, got -1"
expect_stderr_one_line

case_begin "--profile-json into a missing folder fails after the run, naming the file"
run "$LAYERDIFF" run --backends reference "$FX/cnn.onnx" --profile-json "$WORK/no/such/dir/p.json"
expect_exit 2
expect_stderr_contains "cannot write profile '$WORK/no/such/dir/p.json': No such file or directory"
expect_stderr_one_line

case_begin "--profile-json that fails mid-write leaves the old file and no temporary file"
# A file-size limit of 1 KiB (SIGXFSZ ignored, so write fails with EFBIG): the
# profile, a few KiB, cannot be written whole. Written in place it would be cut.
mkdir -p pj && printf 'old\n' >pj/p.json
run sh -c "trap '' XFSZ; ulimit -f 1; exec '$LAYERDIFF' run --backends reference '$FX/cnn.onnx' --profile-json pj/p.json >/dev/null"
expect_exit 2
expect_stderr_contains "cannot write profile 'pj/p.json': File too large"
expect_stderr_one_line
expect_true "the old file is untouched" grep -qx old pj/p.json
expect_true "no temporary file left ($(ls -A pj | tr '\n' ' '))" test "$(ls -A pj)" = p.json

case_begin "a plugin backend without a profile is reported as such"
PLUGIN=$BUILD_DIR/plugins/passthrough.so
if [ -f "$PLUGIN" ]; then
  "$PY" - <<'PYEOF'
import onnx
from onnx import helper, TensorProto as TP
vi = helper.make_tensor_value_info
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "one",
                      [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, "one.onnx")
PYEOF
  run "$LAYERDIFF" run one.onnx --backend-plugin "$PLUGIN" --backends reference,passthrough \
    --profile --profile-json two.json
  expect_exit 0
  expect_stdout_contains "profile  passthrough: the backend does not profile its nodes"
  expect_true "JSON: null profile for the plugin" "$PY" -c "
import json; b = json.load(open('two.json'))['backends']
assert [x['name'] for x in b] == ['reference', 'passthrough'] and b[1]['profile'] is None, b"
else
  skip_case "$PLUGIN not built"
fi

# --- OpenMP wait policy ------------------------------------------------------------------
# OMP_DISPLAY_ENV=verbose makes libgomp print its settings when it loads.
case_begin "layerdiff run uses libgomp with GOMP_SPINCOUNT=1000 unless told otherwise"
run env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose "$LAYERDIFF" run --backends reference \
  "$FX/cnn.onnx"
expect_exit 0
expect_stdout_contains "reference  8 layer outputs"
expect_stderr_contains "GOMP_SPINCOUNT = '1000'"

case_begin "layerdiff compare does too (it compares isolated pairs on a second thread)"
run "$LAYERDIFF" run "$FX/cnn.onnx" --dump "$WORK/spin.h5"
expect_exit 0
run env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose "$LAYERDIFF" compare \
  "$WORK/spin.h5"
expect_exit 0
expect_stderr_contains "GOMP_SPINCOUNT = '1000'"

case_begin "a policy the user set is kept (OMP_WAIT_POLICY or GOMP_SPINCOUNT)"
run env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose "$LAYERDIFF" run --backends reference \
  "$FX/cnn.onnx"
expect_exit 0
expect_stderr_contains "OMP_WAIT_POLICY = 'ACTIVE'"
expect_stderr_contains "GOMP_SPINCOUNT = '30000000000'"
run env GOMP_SPINCOUNT=123 OMP_DISPLAY_ENV=verbose "$LAYERDIFF" run --backends reference "$FX/cnn.onnx"
expect_stderr_contains "GOMP_SPINCOUNT = '123'"

case_begin "--version runs no kernels and starts only once"
run env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose "$LAYERDIFF" --version
expect_exit 0
expect_stderr_contains "GOMP_SPINCOUNT = '300000'"
expect_true "no second start with GOMP_SPINCOUNT=1000" \
  sh -c "! grep -q \"GOMP_SPINCOUNT = '1000'\" '$STDERR'"

finish
