#!/usr/bin/env bash
# The five fp16 / TF32 failure stories of docs/scenarios.md, end to end on the
# models scripts/gen-scenarios.py writes into fixtures/scenarios/. Each case
# asserts the diagnosis the story expects from what layerdiff computes (the
# JSON report of `run`, the dumps, the precision plan, the error messages),
# never from hard-coded numbers: a wrong first divergent layer, a missing
# overflow count or an error that does not drop fails the case.
#   1 clip_text_encoder.onnx   --fp16: x^2 overflows in the first LayerNorm's Pow
#   2 mixed_fp16_islands.onnx  fp32 island: passes when kept, ReduceSum overflows when not
#   3 conv_fp16_weight_fp32_bias.onnx  refused before running, naming node, inputs, types
#   4 layernorm_fp32.onnx      LayerNormalization forced to fp32: error drops >= 10x
#   5 conv_clip_tf32.onnx      TF32 Conv is the origin; --no-tf32 matches the reference
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures/scenarios
L="$LAYERDIFF"
unset NVIDIA_TF32_OVERRIDE
cd "$WORK" || exit 1

# report_check FILE DESCRIPTION ASSERTIONS: in the assertions, j = the JSON report,
# s = its summary, rec(tensor) / node(node name) = a record, fd = the first divergent
# record (None when none), origins = the origin records, out = the graph output records,
# counters(r) = its engine counters (zeros when null), f(x) = float of a real field.
report_check() {
  local out
  out=$("$PY" - "$1" "$3" 2>&1 <<'PYEOF'
import sys, json
j = json.load(open(sys.argv[1]))
assert j["schema"] == "layerdiff-report", j["schema"]
s = j["summary"]
recs = j["records"]
def rec(name): return next(r for r in recs if r["name"] == name)
def node(name): return next(r for r in recs if r["node"] == name)
fd = recs[s["first_divergent"]["record"]] if s["first_divergent"] else None
origins = [recs[e["record"]] for e in s["origins"]]
out = [r for r in recs if r["is_graph_output"]]
ZERO = {"overflows": 0, "nans_created": 0, "underflows": 0}
def counters(r): return r["counters"] or ZERO
def f(x): return float(x)
exec(sys.argv[2])
PYEOF
  ) || _fail "$2: $(echo "$out" | tail -4 | tr '\n' ' ')"
}

# dump_check FILE DESCRIPTION ASSERTIONS: f = the dump, ds(run) = {tensor name: dataset}
# of runs/<run>, arr(run, name) = a tensor as float64.
dump_check() {
  local out
  out=$("$PY" - "$1" "$3" 2>&1 <<'PYEOF'
import sys
import h5py, dump_attrs, numpy as np
f = h5py.File(sys.argv[1], "r")
def ds(run):
    g = f["runs"][run]
    return {g[k].attrs["name"]: g[k] for k in g}
def arr(run, name): return ds(run)[name][()].astype(np.float64)
exec(sys.argv[2])
PYEOF
  ) || _fail "$2: $(echo "$out" | tail -4 | tr '\n' ' ')"
}

case_begin "fixtures: gen-scenarios.py writes these exact bytes and its numpy design checks hold"
run "$PY" "$ROOT/scripts/gen-scenarios.py" --verify "$WORK/gen"
expect_exit 0
expect_stdout_contains "gen-scenarios: every design check holds"
for f in "$FX"/*; do
  cmp -s "$f" "$WORK/gen/scenarios/$(basename "$f")" || _fail "$(basename "$f") differs from the script's"
done
[ "$(ls "$WORK/gen/scenarios" | wc -l)" -eq "$(ls "$FX" | wc -l)" ] || _fail "file lists differ"
for f in "$FX"/*.onnx; do
  [ "$(stat -c %s "$f")" -lt 1000000 ] || _fail "$(basename "$f") is not under 1 MB"
done

# --- 1. CLIP-style text encoder in fp16 ---------------------------------------------------
CLIP=$FX/clip_text_encoder.onnx
LN1=/text_model/encoder/layers.0/layer_norm1

# Before the Pow every layer stays within the fp16 tolerance (by construction, checked
# above); the Pow's x^2 overflows; the layers it feeds inherit the error.
STORY1='
assert s["verdict"] == "fail"
assert fd["node"] in (LN1 + "/Pow", LN1 + "/ReduceMean_1"), fd["node"]
assert fd["precision"] == "fp16"
assert counters(fd)["overflows"] > 0, counters(fd)
assert fd["metrics"]["nonfinite_test_only"] > 0
assert fd["metrics"]["would_overflow"] > 0 and s["would_overflow"] > 0
assert origins and origins[0]["node"] == fd["node"], [o["node"] for o in origins]
assert all(r["pass"] for r in recs[:fd["index"]])
assert fd["node"] in [recs[e["record"]]["node"] for e in s["culprits"]]
assert s["engine_counters"]["overflows"] > 0
assert out[0]["shape"] == [BATCH, 16, 64] and not out[0]["pass"]
'
for batch in 1 4; do
  case_begin "story 1: run --fp16, batch $batch: first divergent and origin in the first LayerNorm, overflowing"
  run "$L" run "$CLIP" --input-shapes "batch:$batch" --val-range 'input_ids:[0,63]' --report-json "clip$batch.json"
  expect_exit 1
  expect_stdout_contains "First divergent layer"
  expect_stdout_contains "node    $LN1/Pow (Pow, fp16)"
  expect_stdout_contains "Origin layers"
  report_check "clip$batch.json" "diagnosis" "LN1 = '$LN1'; BATCH = $batch$STORY1"
done

case_begin "story 1: the defaults are reference,emulated with --fp16"
report_check clip1.json "context" '
assert j["context"]["reference"]["backend"] == "reference"
assert j["context"]["test"]["backend"] == "emulated"
assert j["context"]["test"]["config"].startswith("fp16,"), j["context"]["test"]["config"]'

case_begin "story 1: keeping the Pow and its ReduceMean in fp32 removes the overflow"
run "$L" run "$CLIP" --input-shapes batch:4 --val-range 'input_ids:[0,63]' --precision-constraints obey \
    --layer-precisions '*/Pow:fp32,*/ReduceMean_1:fp32' --report-json clipfix.json
report_check clipfix.json "no overflow, output error down" '
assert s["engine_counters"]["overflows"] == 0, s["engine_counters"]
assert all(r["metrics"]["nonfinite_test_only"] == 0 for r in recs)
bad = json.load(open("clip4.json"))["records"]
o_bad = next(r for r in bad if r["is_graph_output"])
assert f(out[0]["metrics"]["l2_rel"]) * 10 < f(o_bad["metrics"]["l2_rel"]), (
    out[0]["metrics"]["l2_rel"], o_bad["metrics"]["l2_rel"])'

case_begin "story 1: the TensorRT mistake '*:fp16,*:fp32' names both patterns"
run "$L" run "$CLIP" --input-shapes batch:1 --precision-constraints obey --layer-output-types '*:fp16,*:fp32'
expect_exit 2
expect_stderr_one_line
expect_stderr_contains "--layer-output-types '*:fp16' and '*:fp32' give every layer two different types"

case_begin "story 1: an output type against a Cast's to names the Cast"
run "$L" run "$CLIP" --input-shapes batch:1 --precision-constraints obey \
    --layer-output-types '*/self_attn/Cast:fp16'
expect_exit 2
expect_stderr_one_line
expect_stderr_contains "--layer-output-types '*/self_attn/Cast:fp16' contradicts node '/text_model/encoder/layers.0/self_attn/Cast' (Cast), whose output type is fixed by its to=float32"

# --- 2. fp16 model with an fp32 island ----------------------------------------------------
ISL=$FX/mixed_fp16_islands.onnx

case_begin "story 2: --respect-declared-types runs the island in fp32 and passes"
run "$L" run "$ISL" --input-shapes batch:8 --respect-declared-types --report-json isl_declared.json \
    --dump isl_declared.h5
expect_exit 0
expect_stdout_contains "PASS"
report_check isl_declared.json "pass" '
assert s["verdict"] == "pass" and s["engine_counters"]["overflows"] == 0
assert node("/head/l2norm/ReduceSum")["precision"] == "fp32"
assert node("/head/l2norm/Pow")["precision"] == "fp32"
assert node("/encoder/proj/MatMul")["precision"] == "fp16"'

case_begin "story 2: obeying fp32 on the island's layers passes too"
run "$L" run "$ISL" --input-shapes batch:8 --precision-constraints obey \
    --layer-precisions '/head/l2norm/*:fp32' --report-json isl_obey.json
expect_exit 0
report_check isl_obey.json "pass" 'assert s["verdict"] == "pass"'

case_begin "story 2: plain --fp16 runs the island in fp16 and the report points at ReduceSum/Pow"
run "$L" run "$ISL" --input-shapes batch:8 --report-json isl_fp16.json --dump isl_fp16.h5
expect_exit 1
expect_stdout_contains "node    /head/l2norm/"
report_check isl_fp16.json "diagnosis" '
assert fd["op_type"] in ("ReduceSum", "Pow") and fd["node"].startswith("/head/l2norm/"), fd["node"]
assert fd["precision"] == "fp16"
assert counters(fd)["overflows"] > 0
assert origins[0]["index"] == fd["index"]
assert all(r["pass"] for r in recs[:fd["index"]])
assert not out[0]["pass"]'

case_begin "story 2: the dumps hold the island in fp32 with --respect-declared-types, fp16 without"
dump_check isl_declared.h5 "declared" '
e = ds("emulated")
for n in ("/head/l2norm/Pow_output_0", "/head/l2norm/ReduceSum_output_0"):
    assert e[n].attrs["precision"] == "fp32" and e[n].dtype == np.float32, n
assert e["/encoder/proj/Add_output_0"].attrs["precision"] == "fp16"
assert np.isfinite(arr("emulated", "/head/l2norm/ReduceSum_output_0")).all()'
dump_check isl_fp16.h5 "fp16" '
e = ds("emulated")
for n in ("/head/l2norm/Pow_output_0", "/head/l2norm/ReduceSum_output_0"):
    assert e[n].attrs["precision"] == "fp16" and e[n].dtype == np.float16, n
assert np.isposinf(arr("emulated", "/head/l2norm/ReduceSum_output_0")).all()
assert int(e["/head/l2norm/ReduceSum_output_0"].attrs["overflows"]) > 0
assert np.isfinite(arr("reference", "/head/l2norm/ReduceSum_output_0")).all()'

# --- 3. PyTorch fp16 weight with an fp32 bias ---------------------------------------------
BAD=$FX/conv_fp16_weight_fp32_bias.onnx
for backends in reference,emulated reference emulated; do
  case_begin "story 3: float16 W with float32 B is refused before running ($backends)"
  run "$L" run "$BAD" --backends "$backends" --dump bad.h5
  expect_exit 2
  expect_stderr_one_line
  expect_stderr_contains "node '/features/0/Conv' (Conv): inputs X 'images' (float16), W 'features.0.weight' (float16) and B 'features.0.bias' (float32) must have one type"
  expect_stdout_not_contains "layer outputs"
  expect_no_file bad.h5
done

case_begin "story 3: the corrected all-fp16 model runs in both backends"
run "$L" run "$FX/conv_fp16.onnx" --backends reference,emulated --fp16 --report-json conv16.json
expect_exit 0
report_check conv16.json "pass" '
assert s["verdict"] == "pass" and len(recs) == 3
assert rec("features")["test_dtype"] == "float16" and rec("features")["ref_dtype"] == "float16"'

# --- 4. LayerNormalization forced to fp32 -------------------------------------------------
LNM=$FX/layernorm_fp32.onnx
LNN=/encoder/final_layer_norm/LayerNormalization
LN_ARGS=(--input-shapes batch:2 --val-range 'hidden_states:[1000,1010]')

case_begin "story 4: the precision plan shows LayerNormalization in fp32 under obey"
run "$L" inspect "$LNM" --engine --fp16 --precision-constraints obey \
    --layer-precisions op:LayerNormalization:fp32 --json
expect_exit 0
"$PY" - "$STDOUT" <<'PYEOF' || _fail "plan JSON"
import sys, json
p = json.load(open(sys.argv[1]))
ln = next(l for l in p["layers"] if l["op_type"] == "LayerNormalization")
assert ln["precision"] == "fp32" and ln["precision_reason"] == "pattern", ln
assert ln["output_type"] == "float32"
assert all(l["precision"] == "fp16" for l in p["layers"] if l is not ln)
PYEOF
run "$L" inspect "$LNM" --engine --fp16 --precision-constraints obey --layer-precisions op:LayerNormalization:fp32
expect_stdout_contains "LayerNormalization  fp32       float32  --layer-precisions 'op:LayerNormalization:fp32'"

case_begin "story 4: --fp16 alone: LayerNormalization is the first divergent and origin layer"
run "$L" run "$LNM" "${LN_ARGS[@]}" --report-json ln16.json
expect_exit 1
report_check ln16.json "diagnosis" "
assert fd['node'] == '$LNN' and fd['precision'] == 'fp16', fd['node']
assert origins[0]['node'] == '$LNN'"

case_begin "story 4: obey + op:LayerNormalization:fp32 drops the output error at least 10x"
run "$L" run "$LNM" "${LN_ARGS[@]}" --precision-constraints obey \
    --layer-precisions op:LayerNormalization:fp32 --report-json ln32.json
expect_exit 0
report_check ln32.json "ratio" "
assert node('$LNN')['precision'] == 'fp32'
bad = next(r for r in json.load(open('ln16.json'))['records'] if r['is_graph_output'])
for stat in ('mean', 'max'):
    e16, e32 = f(bad['metrics']['abs'][stat]), f(out[0]['metrics']['abs'][stat])
    assert e16 >= 10 * e32 > 0, (stat, e16, e32)"

case_begin "story 4: under --precision-constraints none the setting is ignored with a warning"
run "$L" run "$LNM" "${LN_ARGS[@]}" --layer-precisions op:LayerNormalization:fp32 --report-json lnnone.json
expect_exit 1
expect_stderr_contains "layerdiff run: warning: --precision-constraints none (the default) ignores --layer-precisions 'op:LayerNormalization:fp32'"
report_check lnnone.json "like fp16" "
assert node('$LNN')['precision'] == 'fp16'
bad = next(r for r in json.load(open('ln16.json'))['records'] if r['is_graph_output'])
assert out[0]['metrics']['abs']['max'] == bad['metrics']['abs']['max']"
run "$L" inspect "$LNM" --engine --fp16 --layer-precisions op:LayerNormalization:fp32
expect_exit 0
expect_stderr_contains "warning: --precision-constraints none (the default) ignores --layer-precisions 'op:LayerNormalization:fp32'"
expect_stdout_contains "LayerNormalization  fp16"

# --- 5. Conv + Clip under TF32 ------------------------------------------------------------
CC=$FX/conv_clip_tf32.onnx
CONV=/stem/conv/Conv

case_begin "story 5: TF32 on (the default): the Conv is the origin at TF32-sized error"
run "$L" run "$CC" --backends reference,emulated --report-json cc_tf32.json --dump cc_tf32.h5
expect_exit 1
expect_stdout_contains "node    $CONV (Conv, tf32)"
expect_stdout_contains "clip crossings"
report_check cc_tf32.json "diagnosis" "
assert j['context']['test']['config'].startswith('fp32, tf32 rne')
assert fd['node'] == '$CONV' and fd['precision'] == 'tf32'
assert [o['node'] for o in origins] == ['$CONV']
assert f(fd['scaled_ulp']) < 4 and not fd['culprit'], (fd['scaled_ulp'], fd['culprit'])
m = fd['metrics']
assert 2.0 ** -16 < f(m['rel']['median']) < 2.0 ** -9, m['rel']['median']
assert f(m['cosine']) > 1 - 1e-6 and f(m['abs']['max']) < 0.1, (m['cosine'], m['abs']['max'])
assert s['engine_counters']['overflows'] == 0
assert not node('/stem/act/Clip')['pass']"

case_begin "story 5: the report counts the elements TF32 moved across a Clip bound"
# Recount from the dump: elements where exactly one run sits at 0 or 6, and check that
# each one's Conv output (before the Clip) is on the other side of that bound.
"$PY" - cc_tf32.json cc_tf32.h5 <<'PYEOF' || _fail "clip crossings"
import sys, json
import h5py, dump_attrs, numpy as np
j = json.load(open(sys.argv[1]))
clip = next(r for r in j["records"] if r["op_type"] == "Clip")
conv = next(r for r in j["records"] if r["op_type"] == "Conv")
f = h5py.File(sys.argv[2], "r")
def get(run, name):
    g = f["runs"][run]
    return next(g[k] for k in g if g[k].attrs["name"] == name)[()].astype(np.float64)
r, t = get("reference", "output"), get("emulated", "output")
cr, ct = get("reference", conv["name"]), get("emulated", conv["name"])
crossed = ((r == 0) != (t == 0)) | ((r == 6) != (t == 6))
n = int(crossed.sum())
assert n > 0 and clip["clip_crossings"] == n == j["summary"]["clip_crossings"], (
    n, clip["clip_crossings"], j["summary"]["clip_crossings"])
assert conv["clip_crossings"] is None
sides_differ = ((cr > 0) != (ct > 0)) | ((cr < 6) != (ct < 6))
assert sides_differ[crossed].all()
assert np.abs(ct - cr)[crossed].max() <= float(conv["metrics"]["abs"]["max"])
PYEOF

for how in --no-tf32 NVIDIA_TF32_OVERRIDE=0; do
  case_begin "story 5: $how: the emulated run matches the reference to fp32 rounding"
  if [ "$how" = --no-tf32 ]; then
    run "$L" run "$CC" --backends reference,emulated --no-tf32 --dump cc.h5 --report-json cc_fp32.json
  else
    run env NVIDIA_TF32_OVERRIDE=0 "$L" run "$CC" --backends reference,emulated --dump cc.h5 \
        --report-json cc_fp32.json
  fi
  expect_exit 0
  expect_stdout_contains "PASS"
  report_check cc_fp32.json "pass" "
assert s['verdict'] == 'pass'
assert node('$CONV')['precision'] == 'fp32'
assert s['clip_crossings'] == 0"
  dump_check cc.h5 "dump" "
e, r = ds('emulated'), ds('reference')
assert e['/stem/conv/Conv_output_0'].attrs['precision'] == 'fp32'
assert f['runs']['emulated'].attrs['config'].startswith('fp32, tf32 off'), f['runs']['emulated'].attrs['config']
for name in ('/stem/conv/Conv_output_0', 'output'):
    a, b = arr('emulated', name), arr('reference', name)
    assert np.abs(a - b).max() <= 2.0 ** -22 * np.abs(b).max(), (name, np.abs(a - b).max())"
  rm -f cc.h5
done

# Story 1, the fix and the bug report: bisect names layers of the overflowing
# LayerNorm (its Pow first: it overflows on its own), and reduce --origin writes
# a repro around that Pow that still overflows.
case_begin "story 1: bisect keeps the first LayerNorm's Pow in fp32, verified"
run "$L" bisect "$CLIP" --fp16 --input-shapes batch:1 --val-range 'input_ids:[0,63]' -o bis -q
expect_exit 0
expect_file_exists bis/bisect.json
expect_true "bisect.json: verified set holding layers.0/layer_norm1/Pow, which overflows" "$PY" -c "
import json, sys
d = json.load(open('bis/bisect.json'))
assert d['found'] and d['verified'] and d['one_minimal'], d
nodes = [l['node'] for l in d['layers']]
assert '/text_model/encoder/layers.0/layer_norm1/Pow' in nodes, nodes
assert all(l['overflow'] for l in d['layers'] if l['node'].endswith('layer_norm1/Pow'))
"
expect_true "trtexec flags name the Pow exactly" grep -q "layers.0/layer_norm1/Pow:fp32" bis/trtexec-flags.txt

case_begin "story 1: reduce --origin writes a repro that still overflows"
run "$L" reduce "$CLIP" --fp16 --input-shapes batch:1 --val-range 'input_ids:[0,63]' --origin \
    -o repro.onnx
expect_exit 0
expect_stdout_contains "still diverges"
expect_file_exists repro.onnx
expect_file_exists repro.h5
run "$L" run repro.onnx --load-inputs repro.h5 --fp16 --report-json repro.json
expect_exit 1
expect_true "the repro's origin is the Pow, with an overflow" "$PY" -c "
import json
d = json.load(open('repro.json'))
origins = [o['node'] for o in d['summary']['origins']]
assert origins == ['/text_model/encoder/layers.0/layer_norm1/Pow'], origins
"

finish
