#!/usr/bin/env bash
# `layerdiff compare`: one dump (two runs), two dumps (golden against today),
# the run defaults and their ambiguity errors, exit codes 0/1/2, the JSON
# report checked with Python's json (schema, NaN/inf strings, culprits from an
# isolated run), --atol pattern overrides changing the verdict, missing
# tensors, shape mismatches and --layers outputs. Dumps are made with
# `layerdiff run --backends reference,emulated --fp16 --dump` on the bundled
# cnn and overflow fixtures; variants are edited copies made with h5py.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures
cd "$WORK" || exit 1

mkdump() { # OUT MODEL [run flags...]; `run` compares too: exit 1 is a mismatch, not a failure
  local out=$1 model=$2 rc=0; shift 2
  "$LAYERDIFF" run "$FX/$model.onnx" --dump "$out" "$@" >/dev/null 2>"$out.err" || rc=$?
  [ "$rc" -le 1 ] && [ -s "$out" ] ||
    { echo "setup: layerdiff run $model failed ($rc): $(head -c 400 "$out.err")"; exit 1; }
}
mkdump golden.h5 cnn --backends reference,emulated --fp16
mkdump today.h5 cnn --backends reference,emulated --fp16
mkdump seed2.h5 cnn --backends reference,emulated --fp16 --seed 2
mkdump refonly.h5 cnn --backends reference
mkdump noiso.h5 cnn --backends reference,emulated --fp16 --no-isolate
mkdump overflow.h5 overflow --backends reference,emulated --fp16

# Edited copies: a tensor removed, a tensor reshaped, a third run, and an
# isolated run of "emulated" (reference values, except conv2_out, 0.5 off).
"$PY" - <<'PYEOF' || { echo "setup: h5py edits failed"; exit 1; }
import shutil, h5py, numpy as np
def copy(src, dst):
    shutil.copy(src, dst)
    return h5py.File(dst, "r+")
def drop_row(f, run, name):  # format 2: the run's index table has a row per tensor
    t = f["index/" + run]
    rows = t[()]
    keep = rows[[r["name"] != name.encode() for r in rows]]
    t.resize((len(keep),))
    t[...] = keep
with copy("today.h5", "missing.h5") as f:
    del f["runs/emulated/relu1_out"]
    drop_row(f, "emulated", "relu1_out")
with copy("today.h5", "shape.h5") as f:
    g = f["runs/emulated"]
    attrs = dict(g["relu1_out"].attrs)
    dt = g["relu1_out"].dtype
    del g["relu1_out"]
    d = g.create_dataset("relu1_out", data=np.zeros((1, 8, 16, 64), dtype=dt))
    for k, v in attrs.items():
        d.attrs[k] = v
with copy("today.h5", "three.h5") as f:
    f.copy("runs/emulated", "runs/other")
    f.copy("index/emulated", "index/other")
    f["runs/other"].attrs["name"] = "other"
with copy("noiso.h5", "iso.h5") as f:
    f.copy("runs/emulated", "runs/emulated.isolated")
    f.copy("index/emulated", "index/emulated.isolated")
    g = f["runs/emulated.isolated"]
    g.attrs["name"] = "emulated.isolated"
    g.attrs["isolated_of"] = "emulated"
    for name in g:
        ref = f["runs/reference"][name][()]
        g[name][...] = ref.astype(g[name].dtype)
    v = g["conv2_out"][()]
    v.flat[7] += 0.5
    g["conv2_out"][...] = v
PYEOF

# Checks a JSON report with Python: bare NaN/Infinity literals are refused
# (they are not JSON), then the expression $2 must hold for `r`.
json_check() { # FILE EXPR
  "$PY" -c '
import json, sys
def bad(c): raise ValueError("bare " + c)
r = json.load(open(sys.argv[1]), parse_constant=bad)
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)' "$1" "$2"
}
no_escapes() { ! grep -q "$(printf '\033')" "$1"; }

# --- one dump -------------------------------------------------------------------------------
case_begin "one dump: reference vs emulated fp16 passes the default tolerances"
run "$LAYERDIFF" compare golden.h5 --report-json one.json
expect_exit 0
expect_stdout_contains "PASS  all 9 tensors within tolerance"
expect_stdout_contains "run 'reference' (backend reference)"
expect_stdout_contains "run 'emulated' (backend emulated; fp16"
expect_stdout_contains "defaults by precision: fp32 1e-05, tf32/fp16 0.00488, bf16 0.0391"
expect_true "no colour when stdout is a file" no_escapes "$STDOUT"
expect_true "report: schema, runs, 9 records, pass" json_check one.json \
  'r["schema"] == "layerdiff-report" and r["schema_version"] == 1 and
   r["context"]["reference"]["run"] == "reference" and r["context"]["test"]["run"] == "emulated"
   and len(r["records"]) == 9 and r["summary"]["verdict"] == "pass"
   and r["summary"]["first_divergent"] is None and r["records"][0]["name"] == "input"'
expect_true "report: every record has metrics, the layers isolated ones too" json_check one.json \
  'all(set(["abs","rel","ulp","cosine","snr_db","ref","test"]) <= set(x["metrics"]) and
       (x["isolated"] is None) == (x["topo_index"] < 0) for x in r["records"])
   and r["summary"]["has_isolated"]'
expect_true "report: fp16 tolerance of a layer" json_check one.json \
  'r["records"][1]["tolerance"]["atol"] == 10 / 2048 and r["records"][1]["precision"] == "fp16"'
expect_true "no temporary file left" sh -c '! ls | grep -q tmp-'

case_begin "one dump: tight tolerances fail (exit 1), first divergent is conv1_out"
run "$LAYERDIFF" compare golden.h5 --atol 1e-5 --rtol 1e-5 --report-json tight.json
expect_exit 1
expect_stdout_contains "FAIL  "
expect_stdout_contains "First divergent layer"
expect_stdout_contains "tensor  conv1_out"
expect_stdout_contains "node    conv1 (Conv, fp16)"
expect_true "stderr is empty (the summary said it)" test ! -s "$STDERR"
expect_true "report: fail, first divergent conv1_out, an origin" json_check tight.json \
  'r["summary"]["verdict"] == "fail" and r["summary"]["first_divergent"]["name"] == "conv1_out"
   and r["summary"]["origins"][0]["name"] == "conv1_out" and r["tolerances"]["atol"] == 1e-5'

case_begin "--atol/--rtol PATTERN:VALUE overrides change the verdict"
run "$LAYERDIFF" compare golden.h5 --atol 1e-5 --rtol 1e-5 --atol '*:1' --rtol '*:1'
expect_exit 0
expect_stdout_contains "atol overrides: '*' 1"
run "$LAYERDIFF" compare golden.h5 --atol 1e-5 --rtol 1e-5 --atol 'conv1*:1' --rtol 'conv1*:1' \
  --report-json part.json
expect_exit 1
expect_true "conv1_out passes under its override, relu1_out is first" json_check part.json \
  'r["records"][1]["pass"] and r["records"][1]["tolerance"]["atol"] == 1
   and r["summary"]["first_divergent"]["name"] != "conv1_out"'

case_begin "--verbose lists every tensor, --top limits rankings"
run "$LAYERDIFF" compare golden.h5 --verbose --top 1
expect_exit 0
expect_stdout_contains "Every tensor"
expect_stdout_contains "flat_out"
expect_true "one row under the worst-layers title" sh -c \
  "sed -n '/^Worst layers by accumulated/,/^\$/p' '$STDOUT' | grep -c ' fp16 ' | grep -qx 1"

case_begin "--report-json - writes pure JSON to stdout, the summary to stderr"
run "$LAYERDIFF" compare golden.h5 --report-json -
expect_exit 0
expect_true "stdout is the report" json_check "$STDOUT" 'r["summary"]["compared"] == 9'
expect_stderr_contains "PASS  all 9 tensors"

case_begin "--layers outputs compares the inputs and the graph outputs only"
run "$LAYERDIFF" compare golden.h5 --layers outputs --report-json outputs.json
expect_exit 0
expect_true "records input and output" json_check outputs.json \
  '[x["name"] for x in r["records"]] == ["input", "output"] and r["records"][1]["is_graph_output"]'

# A graph output that a later layer also reads ("a" below): the dump's
# graph-output flag (format 2) finds it; an older dump without the flag falls
# back to "tensors no layer reads", says so, and misses it.
"$PY" - <<'PYEOF' || { echo "setup: onnx model failed"; exit 1; }
import onnx
from onnx import helper, TensorProto as T
g = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Neg", ["a"], ["b"], name="neg")],
    "chain", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("a", T.FLOAT, [2, 3]), helper.make_tensor_value_info("b", T.FLOAT, [2, 3])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "chain.onnx")
PYEOF
"$LAYERDIFF" run chain.onnx --dump chain.h5 >/dev/null 2>chain.err ||
  { echo "setup: layerdiff run chain.onnx failed: $(head -c 400 chain.err)"; exit 1; }
"$PY" - <<'PYEOF' || { echo "setup: h5py v1 conversion failed"; exit 1; }
# chain.h5 rewritten as format version 1: attributes on every dataset, no index.
import shutil, h5py, numpy as np
from urllib.parse import unquote
shutil.copy("chain.h5", "chain-v1.h5")
with h5py.File("chain-v1.h5", "r+") as f:
    str_t = h5py.string_dtype()
    for run in f["runs"]:
        for row in f["index"][run][()]:
            r = {k: row[k].decode() if isinstance(row[k], bytes) else row[k] for k in row.dtype.names}
            d = f["runs"][run][r["link"]]
            for k in ("name", "node", "op_type", "precision", "dtype"):
                d.attrs[k] = r[k]
            d.attrs["topo_index"] = np.int64(r["topo_index"])
            d.attrs["output_index"] = np.int64(r["output_index"])
            if r["inputs"]:
                ins = ["" if x == "%00" else unquote(x) for x in r["inputs"].split("/")]
                d.attrs.create("inputs", ins, dtype=str_t)
    del f["index"]
    f.attrs["format_version"] = np.int64(1)
PYEOF

case_begin "--layers outputs: the dump's graph-output flag finds an output a later layer reads"
run "$LAYERDIFF" compare chain.h5 --layers outputs --report-json chain.json
expect_exit 0
expect_true "records x, a, b; a and b graph outputs" json_check chain.json \
  '[(x["name"], x["is_graph_output"]) for x in r["records"]] == [("x", False), ("a", True), ("b", True)]'
expect_true "no fallback note" sh -c "! grep -q 'graph-output flags' '$STDERR'"

case_begin "--layers outputs on a format 1 dump: a note, tensors no layer reads"
run "$LAYERDIFF" compare chain-v1.h5 --layers outputs --report-json chain1.json
expect_exit 0
expect_stderr_contains "has no graph-output flags (written before dump format 2)"
expect_true "records x and b only" json_check chain1.json \
  '[x["name"] for x in r["records"]] == ["x", "b"]'

case_begin "overflow fixture: inf encoded as strings, engine counters, origin"
run "$LAYERDIFF" compare overflow.h5 --report-json overflow.json
expect_exit 1
expect_stdout_contains "overflows"
expect_true "Infinity strings, non-finite counts" json_check overflow.json \
  'r["summary"]["first_divergent"]["max_abs"] == "Infinity" and
   r["summary"]["engine_counters"]["overflows"] > 0 and
   any(x["metrics"]["nonfinite_test_only"] > 0 for x in r["records"])'

# --- isolated run ---------------------------------------------------------------------------
case_begin "no isolated run: accumulated metrics only"
run "$LAYERDIFF" compare noiso.h5 --report-json noiso.json
expect_exit 0
expect_true "isolated null everywhere" json_check noiso.json \
  'all(x["isolated"] is None for x in r["records"]) and not r["summary"]["has_isolated"]'

case_begin "an isolated run of the test run gives isolated metrics and culprits"
run "$LAYERDIFF" compare iso.h5 --report-json iso.json
expect_exit 0
expect_stdout_contains "each test layer also ran on the reference's inputs"
expect_stdout_contains "Culprits (1"
expect_true "culprit conv2_out, isolated metrics present" json_check iso.json \
  '[c["name"] for c in r["summary"]["culprits"]] == ["conv2_out"] and r["summary"]["has_isolated"]
   and abs(r["records"][4]["isolated"]["abs"]["max"] - 0.5) < 0.01 and r["records"][0]["isolated"] is None'
run "$LAYERDIFF" compare iso.h5 --culprit-ulp 1e9 --report-json iso2.json
expect_exit 0
expect_true "a higher threshold: no culprit" json_check iso2.json \
  'r["summary"]["culprits"] == [] and r["tolerances"]["culprit_ulp"] == 1e9'

# --- two dumps ------------------------------------------------------------------------------
case_begin "two identical dumps: same run name on both sides, exit 0"
run "$LAYERDIFF" compare golden.h5 today.h5 --report-json two.json
expect_exit 0
expect_stdout_contains "golden.h5, run 'emulated'"
expect_stdout_contains "today.h5, run 'emulated'"
expect_true "max abs error 0 everywhere" json_check two.json \
  'all(x["metrics"]["abs"]["max"] == 0 for x in r["records"]) and
   r["context"]["reference"]["source"] == "golden.h5"'

case_begin "two dumps, same backend on both sides: isolated runs are not used"
expect_true "golden emulated vs today's emulated has no isolated metrics" json_check two.json \
  'not r["summary"]["has_isolated"]'
run "$LAYERDIFF" compare refonly.h5 today.h5 --test-run emulated --report-json cross.json
expect_true "golden reference vs today's emulated uses today's isolated run" json_check cross.json \
  'r["summary"]["has_isolated"]'

case_begin "two dumps from different inputs: the input is the origin (exit 1)"
run "$LAYERDIFF" compare golden.h5 seed2.h5 --report-json seed.json
expect_exit 1
expect_true "first divergent and origin: input" json_check seed.json \
  'r["summary"]["first_divergent"]["name"] == "input" and
   [o["name"] for o in r["summary"]["origins"]] == ["input"]'

case_begin "two dumps: --ref-run picks the same name in the test dump"
run "$LAYERDIFF" compare golden.h5 today.h5 --ref-run reference
expect_exit 0
expect_stdout_contains "today.h5, run 'reference'"

case_begin "a golden reference-only dump against today's emulated run"
run "$LAYERDIFF" compare refonly.h5 today.h5 --test-run emulated
expect_exit 0
expect_stdout_contains "refonly.h5, run 'reference'"

case_begin "a tensor missing on one side: warning, listed in the report"
run "$LAYERDIFF" compare golden.h5 missing.h5 --report-json missing.json
expect_exit 0
expect_stderr_contains "warning: 1 tensor only in the reference, not compared: 'relu1_out'"
expect_stdout_contains "not compared: 1 tensors only in the reference run, 0 only in the test run"
expect_true "missing_in_test lists it" json_check missing.json \
  'r["context"]["missing_in_test"] == ["relu1_out"] and len(r["records"]) == 8'

# --- errors (exit 2) -------------------------------------------------------------------------
expect_usage() { # CASE EXPECTED-SUBSTRING ARGS...
  local name=$1 want=$2; shift 2
  case_begin "$name"
  run "$LAYERDIFF" compare "$@"
  expect_exit 2
  expect_stderr_contains "$want"
  expect_stderr_one_line
}
expect_usage "no dump" "missing DUMP"
expect_usage "three dumps" "unexpected argument 'c.h5'" golden.h5 today.h5 c.h5
expect_usage "no such file" "no-such.h5" no-such.h5
expect_usage "not a dump" "cnn.onnx" "$FX/cnn.onnx"
expect_usage "no such run" "no run 'nope' in 'golden.h5' (its runs: reference, emulated, emulated.isolated)" \
  golden.h5 --test-run nope
expect_usage "same run twice" "both 'reference'" golden.h5 --ref-run reference --test-run reference
expect_usage "one run only" "only one run" refonly.h5
expect_usage "ambiguous test run" "cannot tell which run of 'three.h5' to test" golden.h5 three.h5
expect_usage "ambiguous reference run" "cannot tell which run of 'golden.h5' is the reference" \
  golden.h5 three.h5 --test-run other
case_begin "dumps of different models: a warning, then the error"
run "$LAYERDIFF" compare golden.h5 overflow.h5
expect_exit 2
expect_stderr_contains "warning: 'golden.h5' and 'overflow.h5' were made from different models"
expect_stderr_contains "have no layer output in common"
expect_usage "shape mismatch names the tensor" "tensor 'relu1_out': shape" golden.h5 shape.h5
expect_usage "bad --layers" "--layers must be 'all' or 'outputs'" golden.h5 --layers some
expect_usage "bad --tol-mode" "--tol-mode must be polygraphy or allclose" golden.h5 --tol-mode x
expect_usage "bad --check-error-stat" "--check-error-stat must be" golden.h5 --check-error-stat p
expect_usage "--error-quantile needs quantile" "--error-quantile applies to" golden.h5 \
  --error-quantile 0.5
expect_usage "--error-quantile out of range" "in [0, 1]" golden.h5 --check-error-stat quantile \
  --error-quantile 2
expect_usage "bad --atol" "--atol 'x:abc'" golden.h5 --atol x:abc
expect_usage "bad --top" "--top expects a count" golden.h5 --top 0
expect_usage "bad --culprit-ulp" "--culprit-ulp expects a number > 0" golden.h5 --culprit-ulp -1
expect_usage "unwritable --report-json" "cannot write report" golden.h5 --report-json no/dir/r.json

case_begin "three runs, explicit choice works"
run "$LAYERDIFF" compare golden.h5 three.h5 --test-run other --ref-run emulated
expect_exit 0

case_begin "--check-error-stat quantile with --error-quantile"
run "$LAYERDIFF" compare golden.h5 --check-error-stat quantile --error-quantile 0.5 \
  --tol-mode allclose --nan-is-error --report-json q.json
expect_exit 0
expect_true "rule in the report" json_check q.json \
  'r["tolerances"]["check_error_stat"] == "quantile" and r["tolerances"]["error_quantile"] == 0.5
   and r["tolerances"]["mode"] == "allclose" and r["tolerances"]["nan_is_error"]'

case_begin "colour on a terminal, not with NO_COLOR"
if command -v script >/dev/null 2>&1; then
  TERM=xterm script -qec "'$LAYERDIFF' compare golden.h5" /dev/null >tty.out 2>&1
  expect_true "escape codes on a TTY" grep -q "$(printf '\033')\[32mPASS" tty.out
  TERM=xterm NO_COLOR=1 script -qec "'$LAYERDIFF' compare golden.h5" /dev/null >tty2.out 2>&1
  expect_true "none with NO_COLOR" no_escapes tty2.out
else
  skip_case "no script(1)"
fi

# (getopt moves the operands after the options: the line is an equivalent command)
case_begin "report 1.1: the command line as shell words and the command's timing; JUnit times from it"
run "$LAYERDIFF" compare golden.h5 --atol '*:1' --report-json cl.json --junit cl.xml
expect_exit 0
expect_true "command_line quoted, timing present" json_check cl.json \
  'r["schema_version"] == 1 and r["schema_minor"] == 1 and
   r["context"]["command_line"] == "layerdiff compare --atol '"'"'*:1'"'"' --report-json cl.json --junit cl.xml golden.h5" and
   0 < r["context"]["timing"]["compare_seconds"] <= r["context"]["timing"]["total_seconds"] < 60 and
   r["context"]["timing"]["reference_seconds"] == 0'
expect_true "JUnit suite time is the command's, not 0" "$PY" -c "
import json, xml.etree.ElementTree as ET
t = json.load(open('cl.json'))['context']['timing']
s = ET.parse('cl.xml').getroot()
assert abs(float(s.get('time')) - t['total_seconds']) < 0.001 and float(s.get('time')) > 0
cases = s.findall('testsuite/testcase')
assert cases and sum(float(c.get('time')) for c in cases) <= t['compare_seconds'] + 1e-5
assert all(float(c.get('time')) > 0 for c in cases)"
run "$LAYERDIFF" run "$FX/cnn.onnx" --report-json live.json
expect_exit 0
expect_true "a live run times both backends" json_check live.json \
  'all(r["context"]["timing"][k] > 0 for k in ("total_seconds", "reference_seconds", "test_seconds", "compare_seconds"))
   and r["context"]["timing"]["test_seconds"] < r["context"]["timing"]["total_seconds"]'

case_begin "progress line on a terminal's stderr: tensors compared / total; none with --quiet or off a TTY"
if command -v script >/dev/null 2>&1; then
  TERM=xterm script -qec "'$LAYERDIFF' compare golden.h5 >/dev/null" /dev/null >prog.out 2>&1
  expect_true "the last step is drawn ($(head -c 200 prog.out | tr '\r' '|'))" grep -q "compare: tensor 9/9  " prog.out
  expect_true "and erased: the output ends in a carriage return" sh -c "tail -c 1 prog.out | od -c | grep -q '\\r'"
  TERM=xterm script -qec "'$LAYERDIFF' compare golden.h5 --quiet >/dev/null" /dev/null >prog2.out 2>&1
  expect_true "nothing with --quiet" test ! -s prog2.out
  run "$LAYERDIFF" compare golden.h5
  expect_true "nothing when stderr is a file" test ! -s "$STDERR"
else
  skip_case "no script(1)"
fi

finish
