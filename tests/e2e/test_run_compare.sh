#!/usr/bin/env bash
# `layerdiff run` comparing two backends live (cli/run_compare.c): the
# first divergent, origin and culprit layers of the fixtures built to have
# them (fixtures/overflow.onnx, fixtures/accumulate.onnx) read from the JSON
# report, exit codes (0 pass, 1 mismatch, 2 bad usage or input), isolation on
# and off, --layers outputs, the dump of a comparing run (three runs,
# isolated_of, the inputs attribute, read with h5py and by layerdiff
# itself), the reference against itself, and backends without the stepwise
# slots (the passthrough plugin, also built for ABI 2): the comparison then
# goes through a temporary dump that must not outlive the run.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures
BUILD_DIR=${LAYERDIFF_BUILD:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
PLUGINS=$BUILD_DIR/plugins
L="$LAYERDIFF"
unset NVIDIA_TF32_OVERRIDE
cd "$WORK" || exit 1
# Temporary files of the runs go here, so the tests can see none is left.
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"

# report_check FILE ASSERTIONS: s = the report's summary, j = the whole report,
# names(list) = the tensor names of a list of summary entries.
report_check() {
  "$PY" - "$1" "$2" <<'PYEOF'
import sys, json
j = json.load(open(sys.argv[1]))
s = j["summary"]
def names(entries): return [e["name"] for e in entries]
try:
    exec(sys.argv[2])
except (AssertionError, KeyError, TypeError):
    import traceback; traceback.print_exc(); sys.exit(1)
PYEOF
}

# dump_check FILE ASSERTIONS: f = the dump, run(name) = a run group, ds(run) its datasets.
dump_check() {
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
import h5py, dump_attrs, numpy as np
f = h5py.File(sys.argv[1], "r")
def esc(name):
    return "".join("%%%02X" % ord(c) if c in "%/" or (i == 0 and c == ".") else c
                   for i, c in enumerate(name))
def run(name): return f["runs"][esc(name)]
def ds(group): return {group[k].attrs["name"]: group[k] for k in group}
try:
    exec(sys.argv[2])
except (AssertionError, KeyError):
    import traceback; traceback.print_exc(); sys.exit(1)
PYEOF
}

tmp_is_empty() { [ -z "$(ls -A "$TMPDIR")" ]; }

# Small models made here: one.onnx (Identity, Relu: the passthrough plugin runs
# it), intrelu.onnx (the plugin fails at run time on its second node).
"$PY" - <<'PYEOF'
import onnx
from onnx import helper, TensorProto as TP
vi = helper.make_tensor_value_info
def save(nodes, inputs, outputs, path, opset=13):
    m = helper.make_model(helper.make_graph(nodes, path.split(".")[0], inputs, outputs),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)
save([helper.make_node("Identity", ["x"], ["a"], name="id"),
      helper.make_node("Relu", ["a"], ["y"], name="relu")],
     [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3])], "one.onnx")
save([helper.make_node("Identity", ["x"], ["a"], name="id"),
      helper.make_node("Relu", ["a"], ["y"], name="relu_int")],
     [vi("x", TP.INT32, [4])], [vi("y", TP.INT32, [4])], "intrelu.onnx", opset=14)
PYEOF

# --- known answers ---------------------------------------------------------------------------
case_begin "overflow fixture: fc_big is first divergent, the only origin and the top culprit"
run "$L" run "$FX/overflow.onnx" --report-json ovf.json
expect_exit 1
expect_stdout_contains "FAIL"
expect_stdout_contains "emulated  6 layer outputs"
expect_stdout_contains "  counters  overflows 16 in 1 layer (first: /block1/fc_big)"
expect_stdout_contains "isolated  6 layers of emulated on the reference's inputs"
expect_true "report names the layers" report_check ovf.json "
assert s['verdict'] == 'fail'
assert s['first_divergent']['name'] == '/block1/fc_big_output_0', s['first_divergent']
assert names(s['origins']) == ['/block1/fc_big_output_0'], names(s['origins'])
assert names(s['culprits'])[0] == '/block1/fc_big_output_0', names(s['culprits'])
assert '/block0/fc_output_0' not in names(s['culprits'])
assert s['has_isolated'] is True
assert j['context']['command'] == 'run' and j['context']['test']['backend'] == 'emulated'
assert s['compared'] == 7  # the input and six layer outputs
"
[ -s "$STDERR" ] && _fail "stderr not empty: $(head -c 300 "$STDERR")"

case_begin "accumulate fixture: passes with fp32 accumulation (exit 0)"
run "$L" run "$FX/accumulate.onnx" --report-json acc.json
expect_exit 0
expect_stdout_contains "PASS"
expect_true "verdict pass, nothing divergent" report_check acc.json "
assert s['verdict'] == 'pass' and s['first_divergent'] is None and s['origins'] == []
"

case_begin "accumulate fixture: --accumulate half makes the big-K MatMul the culprit"
run "$L" run "$FX/accumulate.onnx" --accumulate half --report-json acch.json
expect_exit 1
expect_true "sumsq first divergent, origin, culprit; scale only inherits" report_check acch.json "
assert s['first_divergent']['name'] == '/stats/sumsq_output_0'
assert names(s['origins']) == ['/stats/sumsq_output_0']
assert names(s['culprits']) == ['/stats/sumsq_output_0'], names(s['culprits'])
assert s['failed'] == 2
"

case_begin "the reference against itself passes (exit 0)"
run "$L" run "$FX/transformer.onnx" --input-shapes batch:2 --backends reference,reference \
  --report-json rr.json --dump rr.h5
expect_exit 0
expect_stdout_contains "PASS"
expect_stdout_contains "reference.2  57 layer outputs"
expect_true "every record exact" report_check rr.json "
assert s['verdict'] == 'pass' and s['failed'] == 0 and s['culprits'] == []
"
expect_true "runs reference, reference.2 and its isolated run" dump_check rr.h5 "
assert sorted(f['runs']) == ['reference', 'reference.2', 'reference.2.isolated'], list(f['runs'])
a, b = ds(run('reference')), ds(run('reference.2'))
assert sorted(a) == sorted(b) and all(np.array_equal(a[k][()], b[k][()]) for k in a)
"

# --- the dump of a comparing run --------------------------------------------------------------
case_begin "--dump: reference, test and isolated runs with inputs attributes"
run "$L" run "$FX/overflow.onnx" --dump ovf.h5
expect_exit 1
expect_stdout_contains "dump     ovf.h5 (3 runs)"
expect_true "three runs, isolated_of, inputs" dump_check ovf.h5 "
assert sorted(f['runs']) == ['emulated', 'emulated.isolated', 'reference'], list(f['runs'])
iso, e, r = run('emulated.isolated'), run('emulated'), run('reference')
assert iso.attrs['isolated_of'] == 'emulated' and 'isolated_of' not in e.attrs
assert iso.attrs['backend'] == 'emulated' and iso.attrs['config'].startswith('fp16')
de, di, dr = ds(e), ds(iso), ds(r)
assert sorted(de) == sorted(di) == sorted(dr) and len(de) == 6
big = de['/block1/fc_big_output_0']
assert list(big.attrs['inputs']) == ['/block0/relu_output_0', 'block1.fc_big.weight']
assert list(dr['y'].attrs['inputs']) == ['/block2/fc_output_0', 'block2.bias']
# the first layer reads the graph input: isolated and accumulated are the same
assert np.array_equal(de['/block0/fc_output_0'][()], di['/block0/fc_output_0'][()])
# fc2 on the reference's (finite) inputs stays finite; accumulated it got infinities
assert np.isfinite(di['/block2/fc_output_0'][()]).all()
assert not np.isfinite(de['/block2/fc_output_0'][()]).any()
assert np.isinf(di['/block1/fc_big_output_0'][()]).all()
assert de['/block1/fc_big_output_0'].dtype == np.float16
"
run "$L" inspect ovf.h5 --json
expect_exit 0
expect_true "layerdiff reads it back" "$PY" -c "
import json; d = json.load(open('$STDOUT'))
assert 'emulated.isolated' in json.dumps(d)
"

case_begin "--no-isolate: accumulated error only, two runs in the dump"
run "$L" run "$FX/overflow.onnx" --no-isolate --report-json noiso.json --dump noiso.h5
expect_exit 1
expect_stdout_not_contains "isolated  "
expect_stdout_contains "dump     noiso.h5 (2 runs)"
expect_true "no isolated metrics, no culprits, same first divergent" report_check noiso.json "
assert s['has_isolated'] is False and s['culprits'] == []
assert s['first_divergent']['name'] == '/block1/fc_big_output_0'
"
expect_true "no isolated run" dump_check noiso.h5 "
assert sorted(f['runs']) == ['emulated', 'reference']
"

case_begin "--layers outputs: only the graph outputs are compared and dumped"
run "$L" run "$FX/overflow.onnx" --layers outputs --report-json outs.json --dump outs.h5
expect_exit 1
expect_true "one record" report_check outs.json "
assert s['compared'] == 1 and s['first_divergent']['name'] == 'y', s
"
expect_true "only y in each run" dump_check outs.h5 "
for k in f['runs']:
    assert list(ds(f['runs'][k])) == ['y'], (k, list(ds(f['runs'][k])))
"

case_begin "--isolate forces isolation, --tolerance flags reach the comparison"
run "$L" run "$FX/overflow.onnx" --isolate --atol 'y:1e9' --atol '/block*:1e9' --report-json tol.json
expect_exit 1 # inf - finite is beyond any tolerance
expect_true "tolerances applied" report_check tol.json "
assert j['tolerances']['atol_overrides'], j['tolerances']
"
run "$L" run "$FX/transformer.onnx" --input-shapes batch:1 --atol 1 --rtol 1
expect_exit 0
expect_stdout_contains "PASS"

case_begin "--report-json -: stdout holds the JSON alone, everything else goes to stderr"
run "$L" run "$FX/overflow.onnx" --report-json -
expect_exit 1
expect_true "stdout is one JSON document" report_check "$STDOUT" "
assert s['first_divergent']['name'] == '/block1/fc_big_output_0'
"
expect_stderr_contains "emulated  6 layer outputs"
expect_stderr_contains "First divergent layer"

case_begin "PaddleOCR det: a real model compared in lockstep, isolation on"
DET=${LAYERDIFF_MODELS:-$ROOT/models}/ppocr_det.onnx
if [ -f "$DET" ]; then
  run "$L" run "$DET" --input-shapes x:1x3x160x160 --report-json det.json
  [ "$EXIT" -le 1 ] || _fail "exit $EXIT"
  expect_stdout_contains "isolated  672 layers of emulated on the reference's inputs"
  expect_true "every layer compared, with isolated metrics" report_check det.json "
assert s['compared'] == 673 and s['has_isolated'] is True, (s['compared'], s['has_isolated'])
assert len(j['records']) == 673
assert s['engine_counters']['overflows'] > 0  # a BatchNormalization variance beyond fp16
"
else
  skip_case "ppocr_det.onnx not in models/: run scripts/fetch-models.sh"
fi

# --- backends without the stepwise slots -----------------------------------------------------
case_begin "plugin as the test backend: compared through a temporary dump, nothing left"
run "$L" run one.onnx --backend-plugin "$PLUGINS/passthrough.so" --backends reference,passthrough \
  --report-json pt.json --dump pt.h5
expect_exit 0
expect_stderr_contains "backend 'passthrough' cannot run node by node: comparing against a temporary dump of the reference run, without isolated error"
expect_stdout_contains "passthrough  2 layer outputs"
expect_stdout_contains "dump     pt.h5 (2 runs)"
expect_true "pass, no isolation" report_check pt.json "
assert s['verdict'] == 'pass' and s['compared'] == 3 and s['has_isolated'] is False
"
expect_true "both runs dumped" dump_check pt.h5 "
assert sorted(f['runs']) == ['passthrough', 'reference']
assert list(ds(run('passthrough'))['y'].attrs['inputs']) == ['a']
"
expect_true "no temporary file left in TMPDIR" tmp_is_empty

case_begin "plugin as the reference, and a plugin built for ABI 2"
run "$L" run one.onnx --backend-plugin "$PLUGINS/passthrough.so" --backends passthrough,reference
expect_exit 0
expect_stderr_contains "backend 'passthrough' cannot run node by node"
run "$L" run one.onnx --backend-plugin "$PLUGINS/abi2.so" --backends reference,passthrough_v2 \
  --report-json v2.json
expect_exit 0
expect_stdout_contains "passthrough_v2  2 layer outputs"
expect_true "compared" report_check v2.json "assert s['verdict'] == 'pass' and s['compared'] == 3"
expect_true "no temporary file left in TMPDIR" tmp_is_empty

case_begin "a plugin failing half-way: exit 2, no temporary file, no dump"
run "$L" run intrelu.onnx --backend-plugin "$PLUGINS/passthrough.so" \
  --backends reference,passthrough --dump never.h5
expect_exit 2
expect_stderr_contains "backend 'passthrough'"
expect_no_file never.h5
expect_true "no temporary file left in TMPDIR" tmp_is_empty

# --- usage ------------------------------------------------------------------------------------
case_begin "usage: comparison flags need two backends; three need --no-compare"
run "$L" run one.onnx --backends reference --atol 1e-3
expect_exit 2
expect_stderr_contains "--atol needs a comparison"
expect_stderr_one_line
run "$L" run one.onnx --backend-plugin "$PLUGINS/passthrough.so" --backends reference,emulated,passthrough
expect_exit 2
expect_stderr_contains "a comparison is between a reference and one test backend"
run "$L" run one.onnx --isolate --no-isolate
expect_exit 2
expect_stderr_contains "--isolate and --no-isolate contradict each other"
run "$L" run one.onnx --backends reference,reference --no-compare
expect_exit 2
expect_stderr_contains "lists 'reference' twice"
run "$L" run one.onnx --tol-mode nonsense
expect_exit 2
expect_stderr_one_line
run "$L" run "$WORK/missing.onnx"
expect_exit 2

case_begin "--no-compare runs the two backends side by side, as before"
run "$L" run "$FX/overflow.onnx" --no-compare --dump side.h5
expect_exit 0
expect_stdout_not_contains "FAIL"
expect_stdout_contains "dump     side.h5 (2 runs)"

case_begin "a single backend runs without comparing"
run "$L" run "$FX/overflow.onnx" --backends emulated --fp16
expect_exit 0
expect_stdout_contains "emulated  6 layer outputs"
expect_stdout_not_contains "First divergent"

case_begin "--bf16 with the default backends replaces the default --fp16"
run "$L" run "$FX/accumulate.onnx" --bf16 --report-json bf.json
expect_true "test config says bf16" report_check bf.json "
assert j['context']['test']['config'].startswith('bf16'), j['context']['test']
"

finish
