#!/usr/bin/env bash
# The emulated engine from the command line: `layerdiff run --backends
# reference,emulated` with every engine control on the fixtures and PaddleOCR
# models (dumps checked with h5py: per-layer precision, float16/bfloat16
# datasets where expected, counters on every tensor, the run's config), every
# conflict (message, exit 2, one line) and warning (stderr, exit 0), and
# `layerdiff inspect MODEL --engine` (text and JSON).
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures
MODELS=${LAYERDIFF_MODELS:-$ROOT/models}
L="$LAYERDIFF"
unset NVIDIA_TF32_OVERRIDE
cd "$WORK" || exit 1

# mixed.onnx: x [1,4] f32 -> Relu "relu" -> Cast "to16" -> Mul "sq16" -> Cast "to32"
# -> Softmax "sm" -> y; x -> Shape "shp" -> s (int64); the fp16 island is declared.
"$PY" - <<'PYEOF'
import onnx
from onnx import helper, TensorProto as TP
vi = helper.make_tensor_value_info
nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Cast", ["r"], ["h"], name="to16", to=TP.FLOAT16),
         helper.make_node("Mul", ["h", "h"], ["hh"], name="sq16"),
         helper.make_node("Cast", ["hh"], ["f"], name="to32", to=TP.FLOAT),
         helper.make_node("Softmax", ["f"], ["y"], name="sm", axis=1),
         helper.make_node("Shape", ["x"], ["s"], name="shp")]
g = helper.make_graph(nodes, "mixed", [vi("x", TP.FLOAT, [1, 4])],
                      [vi("y", TP.FLOAT, [1, 4]), vi("s", TP.INT64, [2])],
                      value_info=[vi("hh", TP.FLOAT16, [1, 4])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, "mixed.onnx")
PYEOF
printf '# rules\nop:Relu:fp32\n\nconv2:bf16\n' >rules.txt

# dump_check FILE ASSERTIONS: f = the dump, e = its emulated run, r = the reference run,
# ds(run) = its datasets, attrs of each as a dict.
dump_check() {
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
import h5py, dump_attrs, numpy as np
f = h5py.File(sys.argv[1], "r")
e = f["runs/emulated"]
r = f["runs/reference"] if "reference" in f["runs"] else None
def ds(run): return [run[k] for k in run]
def by_node(run, node): return [d for d in ds(run) if d.attrs["node"] == node]
COUNTERS = ("overflows", "nans_created", "underflows", "subnormals", "partial_overflows")
def counters_everywhere(run):
    for d in ds(run):
        for c in COUNTERS:
            assert c in d.attrs, (d.name, c)
def total(run, c): return sum(int(d.attrs[c]) for d in ds(run))
try:
    exec(sys.argv[2])
except AssertionError:
    import traceback; traceback.print_exc(); sys.exit(1)
PYEOF
}

# fp16 runs: every non-output float layer is float16; outputs keep their declared float32.
FP16_COMMON='
counters_everywhere(e)
assert e.attrs["config"].startswith("fp16, tf32 rne, accumulate fp32"), e.attrs["config"]
assert len(ds(e)) == len(ds(r))
outs = set(OUTS)
for d in ds(e):
    name = d.attrs["name"]
    if d.attrs["dtype"] in ("float32", "float16"):
        if name in outs:
            assert d.attrs["dtype"] == "float32" and d.attrs["precision"] == "fp16", name
        elif d.attrs["op_type"] != "Constant":
            assert d.dtype == np.float16 and d.attrs["precision"] == "fp16", (name, d.dtype)
assert "precision" in r[list(r)[0]].attrs and "overflows" not in r[list(r)[0]].attrs
'

case_begin "run: cnn fixture, reference and emulated --fp16"
run "$L" run "$FX/cnn.onnx" --backends reference,emulated --fp16 --no-compare --dump cnn.h5
expect_exit 0
expect_stdout_contains "emulated  8 layer outputs"
expect_stdout_contains "dump     cnn.h5 (2 runs)"
expect_true "fp16 datasets, precision, counters" dump_check cnn.h5 "OUTS = ['output']
$FP16_COMMON
y, ref = e['output'][()], r['output'][()]
assert 0 < np.abs(y - ref).max() < 1e-2, np.abs(y - ref).max()
assert (y.astype(np.float16).astype(np.float32) == y).all()  # fp16 values in float32
"

case_begin "run: transformer fixture (batch 2), reference and emulated --fp16"
run "$L" run "$FX/transformer.onnx" --input-shapes batch:2 --backends reference,emulated --fp16 --no-compare --dump tr.h5
expect_exit 0
expect_true "fp16 datasets, untouched Constants, counters" dump_check tr.h5 "OUTS = [r[k].attrs['name'] for k in r if r[k].attrs['topo_index'] == max(d.attrs['topo_index'] for d in ds(r))]
$FP16_COMMON
consts = [d for d in ds(e) if d.attrs['op_type'] == 'Constant']
assert consts and all(d.attrs['precision'] == 'fp32' for d in consts)
assert by_node(e, '/encoder/layer.0/attn/Softmax')[0].dtype == np.float16
"

case_begin "run: external-data fixture, reference and emulated --fp16"
run "$L" run "$FX/external_data/model.onnx" --backends reference,emulated --fp16 --no-compare --dump ext.h5
expect_exit 0
expect_true "graph output float32 holding fp16 values" dump_check ext.h5 "OUTS = ['y']
$FP16_COMMON
assert e['y'].attrs['precision'] == 'fp16'
"

case_begin "run: PaddleOCR detector, reference and emulated --fp16"
if [ -f "$MODELS/ppocr_det.onnx" ]; then
  run "$L" run "$MODELS/ppocr_det.onnx" --input-shapes x:1x3x160x160 --backends reference,emulated --fp16 --no-compare --dump det.h5
  expect_exit 0
  expect_stdout_contains "emulated  672 layer outputs"
  expect_true "every layer in both runs, counters flag fp16 trouble" dump_check det.h5 "OUTS = ['sigmoid_0.tmp_0']
$FP16_COMMON
assert len(ds(e)) == 672
# a BatchNormalization's running variance does not fit fp16: its inputs overflow
bn = [d for d in ds(e) if d.attrs['op_type'] == 'BatchNormalization' and d.attrs['overflows'] > 0]
assert bn, 'no BatchNormalization overflow counted'
assert total(e, 'underflows') > 0
"
  rm -f det.h5
else
  skip_case "ppocr_det.onnx not in $MODELS: run scripts/fetch-models.sh"
fi

case_begin "run: PaddleOCR classifier, reference and emulated --fp16"
if [ -f "$MODELS/ppocr_cls.onnx" ]; then
  run "$L" run "$MODELS/ppocr_cls.onnx" --input-shapes x:1x3x48x192 --backends reference,emulated --fp16 --no-compare --dump cls.h5
  expect_exit 0
  expect_stdout_contains "emulated  471 layer outputs"
  expect_true "every layer, shape computations untouched" dump_check cls.h5 "OUTS = ['softmax_0.tmp_0']
$FP16_COMMON
assert len(ds(e)) == 471
shapes = [d for d in ds(e) if d.attrs['op_type'] == 'Shape']
assert shapes and all(d.attrs['precision'] == 'fp32' and d.dtype == np.int64 for d in shapes)
o = e['softmax_0.tmp_0'][()]
assert abs(float(o.sum()) - 1) < 1e-2
"
  rm -f cls.h5
else
  skip_case "ppocr_cls.onnx not in $MODELS: run scripts/fetch-models.sh"
fi

# --- controls ------------------------------------------------------------------------------

case_begin "run: --bf16 gives bfloat16 tensors"
run "$L" run "$FX/cnn.onnx" --backends emulated --bf16 --dump bf.h5
expect_exit 0
expect_true "bfloat16 dtype attribute, bf16 precision" dump_check bf.h5 "
assert e.attrs['config'].startswith('bf16,')
assert e['relu1_out'].attrs['dtype'] == 'bfloat16' and e['relu1_out'].attrs['precision'] == 'bf16'
assert e['output'].attrs['dtype'] == 'float32'
"

case_begin "run: default engine is fp32 with TF32 conv; --no-tf32 and NVIDIA_TF32_OVERRIDE=0 turn it off"
run "$L" run "$FX/cnn.onnx" --backends emulated --dump tf.h5
expect_exit 0
expect_true "tf32 convs, fp32 rest" dump_check tf.h5 "
assert e['conv1_out'].attrs['precision'] == 'tf32' and e['conv1_out'].dtype == np.float32
assert e['relu1_out'].attrs['precision'] == 'fp32'
assert e.attrs['config'].startswith('fp32, tf32 rne')
"
run "$L" run "$FX/cnn.onnx" --backends emulated --no-tf32 --dump notf.h5
expect_exit 0
expect_true "fp32 convs" dump_check notf.h5 "assert e['conv1_out'].attrs['precision'] == 'fp32'"
NVIDIA_TF32_OVERRIDE=0 run "$L" run "$FX/cnn.onnx" --backends emulated --dump env.h5
expect_exit 0
expect_true "fp32 convs under the override" dump_check env.h5 "
assert e['conv1_out'].attrs['precision'] == 'fp32'
assert 'NVIDIA_TF32_OVERRIDE=0' in e.attrs['config']
"
NVIDIA_TF32_OVERRIDE=0 run "$L" run "$FX/cnn.onnx" --backends emulated --tf32
expect_exit 0
expect_stderr_contains "layerdiff run: warning: --tf32 has no effect: NVIDIA_TF32_OVERRIDE=0 in the environment turns TF32 off, as on a GPU"
expect_stderr_one_line

case_begin "run: --tf32-rounding rz truncates, --flush-denormals and --accumulate half are recorded"
run "$L" run "$FX/cnn.onnx" --backends emulated --tf32-rounding rz --dump rz.h5
expect_exit 0
run "$L" run "$FX/cnn.onnx" --backends emulated --fp16 --flush-denormals --accumulate half --dump fl.h5
expect_exit 0
expect_true "rz values differ from rne, config strings" dump_check rz.h5 "
g = h5py.File('tf.h5', 'r')['runs/emulated']
assert e.attrs['config'].startswith('fp32, tf32 rz')
assert (e['conv1_out'][()] != g['conv1_out'][()]).any()
fl = h5py.File('fl.h5', 'r')['runs/emulated']
assert 'flush-denormals' in fl.attrs['config'] and 'accumulate half' in fl.attrs['config']
assert fl['relu1_out'].attrs['subnormals'] == 0
"

case_begin "run: per-layer precisions and output types (obey, prefer, @file)"
run "$L" run "$FX/cnn.onnx" --backends emulated --fp16 --precision-constraints obey --layer-precisions 'op:Relu:fp32' --layer-output-types conv1:fp32 --dump lp.h5
expect_exit 0
expect_true "relu in fp32, conv1 fp16 with float32 output" dump_check lp.h5 "
assert e['relu1_out'].attrs['precision'] == 'fp32' and e['relu1_out'].dtype == np.float32
assert e['conv1_out'].attrs['precision'] == 'fp16' and e['conv1_out'].dtype == np.float32
assert e['pool1_out'].dtype == np.float16
assert 'layer-precisions op:Relu:fp32' in e.attrs['config']
"
run "$L" run "$FX/cnn.onnx" --backends emulated --fp16 --precision-constraints prefer --layer-precisions @rules.txt --dump file.h5
expect_exit 0
expect_true "rules from the file" dump_check file.h5 "
assert e['relu2_out'].attrs['precision'] == 'fp32'
assert e['conv2_out'].attrs['precision'] == 'bf16' and e['conv2_out'].attrs['dtype'] == 'bfloat16'
"

case_begin "run: fp32 islands follow --fp16, or the model with --respect-declared-types"
run "$L" run mixed.onnx --backends reference,emulated --fp16 --no-compare --dump mix.h5
expect_exit 0
run "$L" run mixed.onnx --backends emulated --fp16 --respect-declared-types --dump resp.h5
expect_exit 0
expect_true "island types" dump_check mix.h5 "
assert e['r'].dtype == np.float16 and e['f'].dtype == np.float32
assert e['y'].attrs['precision'] == 'fp16'
assert e['s'].dtype == np.int64 and e['s'].attrs['precision'] == 'fp32'
q = h5py.File('resp.h5', 'r')['runs/emulated']
assert q['r'].dtype == np.float32 and q['r'].attrs['precision'] == 'fp32'
assert q['hh'].dtype == np.float16 and q['hh'].attrs['precision'] == 'fp16'
assert q['y'].attrs['precision'] == 'fp32'
"

# --- conflicts and bad values: exit 2, one line -------------------------------------------

bad_engine() {  # NAME EXPECTED-TEXT ARGS...
  local name=$1 text=$2; shift 2
  case_begin "conflict: $name"
  run "$L" "$@"
  expect_exit 2
  expect_stderr_contains "$text"
  expect_stderr_one_line
}
CNN="$FX/cnn.onnx"
bad_engine "--fp16 with --bf16" "layerdiff run: --fp16 and --bf16 exclude each other" run "$CNN" --backends emulated --fp16 --bf16
bad_engine "--tf32 with --no-tf32" "--tf32 and --no-tf32 contradict each other" run "$CNN" --backends emulated --tf32 --no-tf32
bad_engine "engine flag without the emulated backend" "--fp16 configures the emulated backend, which is not selected: add it, e.g. --backends reference,emulated" run "$CNN" --backends reference --fp16
bad_engine "*:fp16,*:fp32" "--layer-precisions '*:fp16' and '*:fp32' give every layer two different types" run "$CNN" --backends emulated --precision-constraints prefer --layer-precisions '*:fp16,*:fp32'
bad_engine "two patterns, one layer" "--layer-precisions 'conv*:fp16' and '*1:fp32' give node 'conv1' (Conv) two different types (fp16 and fp32)" run "$CNN" --backends emulated --precision-constraints obey --layer-precisions 'conv*:fp16,*1:fp32'
bad_engine "output type against a Cast" "--layer-output-types 'to*:fp16' contradicts node 'to32' (Cast), whose output type is fixed by its to=float32" run mixed.onnx --backends emulated --precision-constraints prefer --layer-output-types 'to*:fp16'
bad_engine "obey on a shape layer" "--layer-precisions 'shp:fp16' cannot be obeyed: it matches only layers it cannot apply to, e.g. node 'shp' (Shape): it computes shapes or constants" run mixed.onnx --backends emulated --precision-constraints obey --layer-precisions shp:fp16
bad_engine "not a float type" "--layer-precisions: entry 'conv1:int8': 'int8' is not a float type (use fp32, tf32, fp16 or bf16)" run "$CNN" --backends emulated --layer-precisions conv1:int8
bad_engine "tf32 output type" "entry 'conv1:tf32': tf32 is a compute precision" run "$CNN" --backends emulated --layer-output-types conv1:tf32
bad_engine "empty pattern" "--layer-precisions: entry ':fp16' has an empty pattern" run "$CNN" --backends emulated --layer-precisions :fp16
bad_engine "no type" "entry 'conv1' is not PATTERN:TYPE" run "$CNN" --backends emulated --layer-precisions conv1
bad_engine "missing rules file" "--layer-precisions @nope.txt: cannot open" run "$CNN" --backends emulated --layer-precisions @nope.txt
bad_engine "bad constraints" "--precision-constraints must be none, prefer or obey, got 'strict'" run "$CNN" --backends emulated --precision-constraints strict
bad_engine "bad tf32 rounding" "--tf32-rounding must be rne, rna or rz, got 'up'" run "$CNN" --backends emulated --tf32-rounding up
bad_engine "bad accumulate" "--accumulate must be fp32 or half, got 'fp16'" run "$CNN" --backends emulated --accumulate fp16
bad_engine "inspect: engine flag without --engine" "--fp16 is an engine flag: add --engine to print the precision plan it gives" inspect "$CNN" --fp16
bad_engine "inspect: --engine on a dump" "--engine needs an ONNX model, and 'cnn.h5' is an HDF5 dump" inspect cnn.h5 --engine
bad_engine "inspect: conflict" "give node 'conv1' (Conv) two different types" inspect "$CNN" --engine --precision-constraints obey --layer-precisions 'conv*:fp16,*1:fp32'

# --- warnings: stderr, exit 0 ------------------------------------------------------------------

case_begin "warning: a pattern matching no layer"
run "$L" run "$CNN" --backends emulated --precision-constraints prefer --layer-precisions 'nothing*:fp16'
expect_exit 0
expect_stderr_contains "layerdiff run: warning: --layer-precisions 'nothing*:fp16' matches no layer"
expect_stderr_one_line

case_begin "warning: rules ignored under --precision-constraints none"
run "$L" run "$CNN" --backends emulated --layer-precisions conv1:fp32 --layer-output-types relu1:fp32 --dump none.h5
expect_exit 0
expect_stderr_contains "warning: --precision-constraints none (the default) ignores --layer-precisions 'conv1:fp32' and --layer-output-types 'relu1:fp32'; use --precision-constraints prefer or obey"
expect_stderr_one_line
expect_true "nothing applied" dump_check none.h5 "assert e['conv1_out'].attrs['precision'] == 'tf32'"

case_begin "warning: prefer cannot apply a rule"
run "$L" run mixed.onnx --backends emulated --precision-constraints prefer --layer-precisions shp:fp16
expect_exit 0
expect_stderr_contains "warning: --layer-precisions 'shp:fp16' is not applied"
expect_stderr_one_line

# --- inspect --engine ----------------------------------------------------------------------------

case_begin "inspect --engine: the plan as text"
run "$L" inspect mixed.onnx --engine --fp16
expect_exit 0
expect_stdout_contains "Precision plan mixed.onnx"
expect_stdout_contains "engine  fp16, tf32 rne, accumulate fp32, constraints none"
expect_stdout_contains "layers  6: fp16 5, untouched 1"
expect_stdout_contains "to32  Cast     fp16       float32  --fp16; output: Cast to float32"
expect_stdout_contains "shp   Shape    -          -        untouched: it computes shapes or constants"
expect_stdout_contains "sm    Softmax  fp16       float16  --fp16; graph output delivered as float32"
run "$L" inspect mixed.onnx --engine --fp16 --respect-declared-types
expect_exit 0
expect_stdout_contains "relu  Relu     fp32       float32  model declares float32"
expect_stdout_contains "sq16  Mul      fp16       float16  model declares float16"
run "$L" inspect "$CNN" --engine
expect_exit 0
expect_stdout_contains "conv1    Conv     tf32       float32  fp32 default; TF32 for conv/matmul"
NVIDIA_TF32_OVERRIDE=0 run "$L" inspect "$CNN" --engine
expect_stdout_contains "conv1    Conv     fp32       float32  fp32 default; TF32 off (NVIDIA_TF32_OVERRIDE=0)"
run "$L" inspect "$CNN" --engine --no-tf32
expect_stdout_contains "fp32 default; TF32 off (--no-tf32)"

case_begin "inspect --engine --json"
run "$L" inspect "$CNN" --engine --fp16 --precision-constraints prefer --layer-precisions 'fc:fp32,ghost:fp16' --json
expect_exit 0
expect_stderr_contains "warning: --layer-precisions 'ghost:fp16' matches no layer"
expect_true "JSON plan" "$PY" -c "
import json
p = json.load(open('$STDOUT'))
assert p['kind'] == 'precision_plan' and p['tf32'] is True
assert [l['name'] for l in p['layers']][:2] == ['conv1', 'relu1']
fc = p['layers'][-1]
assert fc['precision'] == 'fp32' and fc['precision_reason'] == 'pattern' and fc['precision_rule'] == 'fc:fp32'
assert fc['output_type'] == 'float32' and fc['delivered_type'] is None
c1 = p['layers'][0]
assert c1['precision'] == 'fp16' and c1['why'] == '--fp16' and c1['output_type'] == 'float16'
assert p['warnings'] == [\"--layer-precisions 'ghost:fp16' matches no layer\"]
"

case_begin "run: the summary counts the engine's overflows"
# ovf.onnx: x [2,3] -> Mul 1000 "/enc/big1" -> Mul 1000 "/enc/big2" -> y; with x in [1,2]
# big1 stays below 65504 and every element of big2 overflows fp16.
"$PY" - <<'PYEOF'
import onnx
from onnx import helper, TensorProto as TP
vi = helper.make_tensor_value_info
k = helper.make_tensor("k", TP.FLOAT, [], [1000.0])
nodes = [helper.make_node("Mul", ["x", "k"], ["a"], name="/enc/big1"),
         helper.make_node("Mul", ["a", "k"], ["y"], name="/enc/big2")]
g = helper.make_graph(nodes, "ovf", [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3])],
                      initializer=[k])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, "ovf.onnx")
PYEOF
run "$L" run ovf.onnx --backends reference,emulated --fp16 --no-compare --val-range '[1,2]'
expect_exit 0
expect_stdout_contains "  counters  overflows 6 in 1 layer (first: /enc/big2), NaNs created 0, underflows 0, subnormals 0"
expect_true "counters line right after the emulated line, once" "$PY" -c "
lines = open('$STDOUT').read().splitlines()
i = [k for k, l in enumerate(lines) if l.startswith('emulated  ')][0]
assert lines[i + 1].startswith('  counters  overflows 6'), lines[i + 1]
assert sum(l.startswith('  counters') for l in lines) == 1, lines
"
run "$L" run ovf.onnx --backends reference --val-range '[1,2]'
expect_exit 0
expect_stdout_contains "reference  2 layer outputs"
expect_stdout_not_contains "counters"

finish
