#!/usr/bin/env bash
# `layerdiff run`: dumps checked with h5dump and h5py, generated inputs
# against an independent Python implementation of the generator, every
# --load-inputs form, the passthrough backend plugin and the loader's
# refusals, every bad-input case (exit 2, one line) and failed or interrupted
# runs (no dump left behind).
#
# Most cases use small Identity-only models made here with python3-onnx, so
# they need no kernel beyond Identity. The cases marked [needs kernels] run
# the bundled fixtures and pass once the Conv/MaxPool/Gemm/MatMul/... kernels
# are in the registry.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures
BUILD_DIR=${LAYERDIFF_BUILD:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
PLUGINS=$BUILD_DIR/plugins
cd "$WORK" || exit 1

# --- models -------------------------------------------------------------------------
"$PY" - <<'PYEOF'
import onnx
from onnx import helper, TensorProto as TP
def save(nodes, inputs, outputs, path, opset=13, domains=()):
    g = helper.make_graph(nodes, path.split(".")[0], inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] +
                          [helper.make_opsetid(d, 1) for d in domains])
    m.ir_version = 8
    onnx.save(m, path)
vi = helper.make_tensor_value_info
# ident.onnx: x [batch,4] float32, ids [batch] int64; PyTorch-style names.
save([helper.make_node("Identity", ["x"], ["/enc/a"], name="/enc/id_a"),
      helper.make_node("Identity", ["/enc/a"], ["/out/y.0"], name="/enc/id_b"),
      helper.make_node("Identity", ["ids"], ["z"], name="ids_copy")],
     [vi("x", TP.FLOAT, ["batch", 4]), vi("ids", TP.INT64, ["batch"])],
     [vi("/out/y.0", TP.FLOAT, ["batch", 4]), vi("z", TP.INT64, ["batch"])], "ident.onnx")
# one.onnx: a single fixed-shape input, Identity then Relu (passthrough runs both).
save([helper.make_node("Identity", ["x"], ["a"], name="id"),
      helper.make_node("Relu", ["a"], ["y"], name="relu")],
     [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 3])], "one.onnx")
# intrelu.onnx: passthrough fails at run time on the second node (Relu on int32).
save([helper.make_node("Identity", ["x"], ["a"], name="id"),
      helper.make_node("Relu", ["a"], ["y"], name="relu_int")],
     [vi("x", TP.INT32, [4])], [vi("y", TP.INT32, [4])], "intrelu.onnx", opset=14)
# custom.onnx: an operator nobody implements.
save([helper.make_node("Identity", ["x"], ["a"], name="id"),
      helper.make_node("Frobnicate", ["a"], ["y"], name="frob", domain="com.example")],
     [vi("x", TP.FLOAT, [2])], [vi("y", TP.FLOAT, [2])], "custom.onnx", domains=["com.example"])
# nodims.onnx: an input with an unnamed dynamic dim.
save([helper.make_node("Identity", ["x"], ["y"], name="id")],
     [vi("x", TP.FLOAT, [None, 3])], [vi("y", TP.FLOAT, [None, 3])], "nodims.onnx")
PYEOF

# Python's own implementation of the input generator (include/layerdiff/inputs.h):
# xoshiro256** seeded by splitmix64 from seed ^ FNV-1a-64(name).
cat >gen.py <<'PYEOF'
import numpy as np
M = (1 << 64) - 1
def rotl(x, k): return ((x << k) | (x >> (64 - k))) & M
class Rng:
    def __init__(self, seed, name):
        h = 0xcbf29ce484222325
        for b in name.encode():
            h = ((h ^ b) * 0x100000001b3) & M
        x = seed ^ h
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
            self.s.append(z ^ (z >> 31))
    def next(self):
        s = self.s
        r = (rotl((s[1] * 5) & M, 7) * 9) & M
        t = (s[1] << 17) & M
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45)
        return r
    def below(self, span):
        threshold = ((1 << 64) - span) % span  # (0 - span) % span in uint64
        while True:
            r = self.next()
            if r >= threshold:
                return r % span
def floats(seed, name, n, lo, hi, dtype=np.float32):
    r = Rng(seed, name)
    return np.array([min(lo + (hi - lo) * ((r.next() >> 11) * 2.0 ** -53), hi) for _ in range(n)],
                    dtype=np.float64).astype(dtype)
def ints(seed, name, n, lo, hi):
    r = Rng(seed, name)
    return np.array([lo + r.below(hi - lo + 1) for _ in range(n)], dtype=np.int64)
PYEOF

# check_dump FILE PYTHON-ASSERTIONS: runs the assertions with f = h5py.File(FILE),
# np, and run(name) / inp(name) giving a run group / input dataset by original name.
check_dump() {
  local file=$1; shift
  "$PY" - "$file" "$@" <<'PYEOF'
import sys, hashlib
import h5py, dump_attrs, numpy as np
sys.path.insert(0, ".")
import gen
f = h5py.File(sys.argv[1], "r")
def esc(name):
    out = []
    for i, ch in enumerate(name):
        if ch in "%/" or (i == 0 and ch == ".") or ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("%%%02X" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)
def run(name): return f["runs"][esc(name)]
def inp(name): return f["inputs"][esc(name)]
def names(group): return [group[k].attrs["name"] for k in group]
try:
    exec(sys.argv[2])
except AssertionError as e:
    import traceback; traceback.print_exc()
    sys.exit(1)
PYEOF
}

L="$LAYERDIFF"

# --- a run with a dump --------------------------------------------------------------------
case_begin "run: Identity model, dump layout and attributes"
run "$L" run --backends reference ident.onnx --input-shapes batch:3 --dump d.h5
expect_exit 0
expect_stdout_contains "reference  3 layer outputs"
expect_stdout_contains "/out/y.0  float32  3x4  min"
expect_stdout_contains "dump     d.h5 (1 run)"
expect_true "stderr is empty (not a terminal: no progress line)" test ! -s "$STDERR"
expect_true "h5dump lists the escaped names" sh -c "h5dump -n d.h5 | grep -q '/runs/reference/%2Fenc%2Fa'"
expect_true "h5dump shows the original name (index table, format 2)" sh -c "h5dump -d '/index/reference' d.h5 | grep -q '\"/out/y.0\"'"
SHA=$(sha256sum ident.onnx | cut -d' ' -f1)
expect_true "h5py: file attributes, tensors, metadata" check_dump d.h5 "
a = f.attrs
assert a['format'] == 'layerdiff-dump' and a['model_path'] == 'ident.onnx', dict(a)
assert a['model_sha256'] == '$SHA' and a['input_seed'] == 1
assert list(f['runs']) == ['reference']
r = run('reference')
assert r.attrs['backend'] == 'reference'
assert sorted(names(r)) == ['/enc/a', '/out/y.0', 'z'], names(r)
y = r[esc('/out/y.0')]
assert y.attrs['node'] == '/enc/id_b' and y.attrs['op_type'] == 'Identity'
assert y.attrs['topo_index'] == 1 and y.attrs['output_index'] == 0
assert y.attrs['precision'] == 'fp32' and y.attrs['dtype'] == 'float32'
assert 'overflows' not in y.attrs
assert y.shape == (3, 4) and y.dtype == np.float32
assert np.array_equal(y[()], inp('x')[()])
assert np.array_equal(r['z'][()], inp('ids')[()]) and r['z'].dtype == np.int64
assert names(f['inputs']) == ['x', 'ids']
"
expect_true "layerdiff inspect reads the dump" sh -c "'$L' inspect d.h5 | grep -q 'generated with seed 1'"

case_begin "run: generated inputs match an independent implementation"
run "$L" run --backends reference ident.onnx --input-shapes batch:5 --seed 7 --val-range '[-1,1]' --val-range 'ids:[0,9]' --dump s.h5
expect_exit 0
expect_true "x and ids as gen.py makes them" check_dump s.h5 "
assert f.attrs['input_seed'] == 7
x = inp('x')[()]
assert np.array_equal(x.ravel(), gen.floats(7, 'x', 20, -1.0, 1.0)), x
ids = inp('ids')[()]
assert np.array_equal(ids, gen.ints(7, 'ids', 5, 0, 9)), ids
"
run "$L" run --backends reference ident.onnx --input-shapes batch:5 --seed 7 --val-range '[-1,1],ids:[0,9]' --dump s2.h5
expect_exit 0
expect_true "comma-joined ranges give the same inputs" check_dump s2.h5 "
g = h5py.File('s.h5', 'r')
assert np.array_equal(f['inputs/x'][()], g['inputs/x'][()])
assert np.array_equal(f['inputs/ids'][()], g['inputs/ids'][()])
"

case_begin "run: --layers outputs dumps only the graph outputs"
run "$L" run --backends reference ident.onnx --input-shapes batch:2 --layers outputs --dump o.h5
expect_exit 0
expect_stdout_contains "3 layer outputs"
expect_true "only graph outputs" check_dump o.h5 "
assert sorted(names(run('reference'))) == ['/out/y.0', 'z'], names(run('reference'))
assert names(f['inputs']) == ['x', 'ids']
"

case_begin "run: without --dump no file is written"
before=$(ls -A | wc -l)
run "$L" run --backends reference ident.onnx --input-shapes batch:1
expect_exit 0
expect_true "no file appeared" test "$(ls -A | wc -l)" -eq "$before"

# --- loading inputs ----------------------------------------------------------------------
"$PY" - <<'PYEOF'
import os
import numpy as np
from onnx import numpy_helper
os.makedirs("npy", exist_ok=True)
os.makedirs("pb", exist_ok=True)
x = (np.arange(8, dtype=np.float32) - 3.5).reshape(2, 4)
ids = np.array([5, -6], dtype=np.int64)
np.save("npy/x.npy", x)
np.save("npy/ids.npy", ids)
np.save("x64.npy", x.astype(np.float64))
np.save("x33.npy", np.zeros((3, 3), np.float32))
np.save("xf.npy", np.asfortranarray(np.zeros((2, 4), np.float32)))
np.save("one.npy", np.arange(6, dtype=np.float32).reshape(2, 3) - 2)
for k, (name, arr) in enumerate([("x", x), ("ids", ids)]):
    with open("pb/input_%d.pb" % k, "wb") as fh:
        fh.write(numpy_helper.from_array(arr, name).SerializeToString())
PYEOF

check_loaded() {  # FILE: the dump holds the arrays made above, run outputs included
  check_dump "$1" "
x = (np.arange(8, dtype=np.float32) - 3.5).reshape(2, 4)
assert f.attrs['input_seed'] == -1
assert np.array_equal(inp('x')[()], x)
assert np.array_equal(inp('ids')[()], [5, -6])
assert np.array_equal(run('reference')[esc('/out/y.0')][()], x)
"
}

case_begin "run: --load-inputs from a folder of .npy files"
run "$L" run --backends reference ident.onnx --load-inputs npy --dump l1.h5
expect_exit 0
expect_stdout_contains "inputs   loaded from npy"
expect_true "inputs and outputs" check_loaded l1.h5

case_begin "run: --load-inputs from a folder of input_N.pb files"
run "$L" run --backends reference ident.onnx --load-inputs pb --dump l2.h5
expect_exit 0
expect_true "inputs and outputs" check_loaded l2.h5

case_begin "run: --load-inputs NAME:FILE pairs, repeated and comma-separated"
run "$L" run --backends reference ident.onnx --load-inputs x:npy/x.npy --load-inputs ids:pb/input_1.pb --dump l3.h5
expect_exit 0
expect_true "inputs and outputs" check_loaded l3.h5
run "$L" run --backends reference ident.onnx --load-inputs x:pb/input_0.pb,ids:npy/ids.npy --dump l4.h5
expect_exit 0
expect_true "inputs and outputs" check_loaded l4.h5

case_begin "run: --load-inputs with one file for a one-input model"
run "$L" run one.onnx --backend-plugin "$PLUGINS/passthrough.so" --backends passthrough --load-inputs one.npy --dump l5.h5
expect_exit 0
expect_true "relu of the file" check_dump l5.h5 "
x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
assert np.array_equal(inp('x')[()], x)
assert np.array_equal(run('passthrough')['y'][()], np.maximum(x, 0))
"

case_begin "run: inputs round trip through a dump"
run "$L" run --backends reference ident.onnx --input-shapes batch:4 --seed 123 --val-range '[-5,5],ids:[0,1000]' --dump A.h5
expect_exit 0
run "$L" run --backends reference ident.onnx --load-inputs A.h5 --dump B.h5
expect_exit 0
expect_true "same inputs and outputs, B marked as loaded" check_dump B.h5 "
a = h5py.File('A.h5', 'r')
assert f.attrs['input_seed'] == -1 and a.attrs['input_seed'] == 123
for g in ('inputs', 'runs/reference'):
    assert list(a[g]) == list(f[g]), (list(a[g]), list(f[g]))
    for k in a[g]:
        assert a[g][k].dtype == f[g][k].dtype and np.array_equal(a[g][k][()], f[g][k][()]), k
"

# --- the plugin ----------------------------------------------------------------------------
case_begin "plugin: passthrough backend next to the reference"
run "$L" run ident.onnx --input-shapes batch:2 --backend-plugin "$PLUGINS/passthrough.so" --backends reference,passthrough --dump p.h5
expect_exit 0
expect_stdout_contains "passthrough  3 layer outputs"
expect_stdout_contains "dump     p.h5 (2 runs)"
expect_true "two runs with identical tensors" check_dump p.h5 "
assert list(f['runs']) == ['passthrough', 'reference'] or sorted(f['runs']) == ['passthrough', 'reference']
a, b = run('reference'), run('passthrough')
assert b.attrs['backend'] == 'passthrough'
assert sorted(a) == sorted(b)
for k in a:
    assert np.array_equal(a[k][()], b[k][()]) and dict(a[k].attrs) == dict(b[k].attrs), k
"

case_begin "plugin: an operator it does not run fails before anything runs"
run "$L" run custom.onnx --backend-plugin "$PLUGINS/passthrough.so" --backends passthrough --dump c.h5
expect_exit 2
expect_stderr_contains "backend 'passthrough': node 'frob' (Frobnicate) is not supported"
expect_stderr_one_line
expect_no_file c.h5

for variant in bad_abi:"was built for another layerdiff backend ABI version" \
               missing_run:"vtable lacks a name or a mandatory function" \
               builtin_name:"uses the name of a built-in backend" \
               no_symbol:"does not export layerdiff_backend_plugin()" \
               null_vtable:"layerdiff_backend_plugin() returned NULL"; do
  name=${variant%%:*}; text=${variant#*:}
  case_begin "plugin: $name is refused"
  run "$L" run --backends reference ident.onnx --input-shapes batch:1 --backend-plugin "$PLUGINS/$name.so" --dump v.h5
  expect_exit 2
  expect_stderr_contains "backend plugin '$PLUGINS/$name.so': $text"
  expect_stderr_one_line
  expect_no_file v.h5
done

case_begin "plugin: missing file"
run "$L" run --backends reference ident.onnx --input-shapes batch:1 --backend-plugin "$WORK/nothing.so"
expect_exit 2
expect_stderr_contains "backend plugin '$WORK/nothing.so': cannot load"
expect_stderr_one_line

case_begin "plugin: a bare file name is refused (no library path search)"
run "$L" run --backends reference ident.onnx --input-shapes batch:1 --backend-plugin passthrough.so
expect_exit 2
expect_stderr_contains "give a path (e.g. ./passthrough.so)"
expect_stderr_one_line

# --- bad input: exit 2, one line -------------------------------------------------------------
bad_case() {  # NAME EXPECTED-TEXT ARGS...
  local name=$1 text=$2; shift 2
  case_begin "bad input: $name"
  run "$L" run --backends reference "$@"
  expect_exit 2
  expect_stderr_contains "$text"
  expect_stderr_one_line
}
bad_case "missing model" "cannot open 'nope.onnx'" nope.onnx
bad_case "no model" "missing MODEL" --dump x.h5
bad_case "two models" "unexpected argument 'one.onnx'" ident.onnx one.onnx
bad_case "--input-shapes syntax" "--input-shapes: expected NAME:DIMS such as x:1x3x224x224 or batch:2, got 'batch=2'" ident.onnx --input-shapes batch=2
bad_case "--input-shapes unknown name" "no input or symbolic dim named 'bogus' (inputs: 'x', 'ids')" ident.onnx --input-shapes bogus:2
bad_case "symbolic dim without a value" "input 'x': dim 0 is symbolic ('batch') and has no value; pass --input-shapes batch:N or x:DIMS" ident.onnx
bad_case "unnamed dynamic dim without a value" "input 'x': dim 0 is dynamic (unnamed) and has no value; pass --input-shapes x:DIMS" nodims.onnx
bad_case "--input-shapes against a fixed dim" "input 'x': --input-shapes has shape 2x5, the model declares batchx4 (dim 1 must be 4)" ident.onnx --input-shapes x:2x5
bad_case "--input-shapes contradicting itself" "symbolic dim 'batch' is 2" ident.onnx --input-shapes x:2x4,ids:3
bad_case "wrong input shape" "input 'x': the loaded tensor has shape 3x3, the model declares batchx4 (dim 1 must be 4)" ident.onnx --load-inputs x:x33.npy,ids:npy/ids.npy
bad_case "wrong input dtype" "input 'x': the loaded tensor is float64, the model expects float32" ident.onnx --load-inputs x:x64.npy,ids:npy/ids.npy
bad_case "Fortran-order .npy" "Fortran order" ident.onnx --load-inputs x:xf.npy,ids:npy/ids.npy
bad_case "input missing from --load-inputs" "input 'ids' has no file in --load-inputs" ident.onnx --load-inputs x:npy/x.npy
bad_case "--load-inputs names no input" "the model has no input named like the part before ':'" ident.onnx --load-inputs q:npy/x.npy
bad_case "--load-inputs file missing" "cannot open 'npy/none.npy'" ident.onnx --load-inputs x:npy/none.npy,ids:npy/ids.npy
bad_case "--load-inputs single file, two inputs" "one file can feed only a model with one input, this one has 2" ident.onnx --load-inputs one.npy
bad_case "--load-inputs with --seed" "--load-inputs cannot be combined with --seed or --val-range" ident.onnx --load-inputs npy --seed 3
bad_case "unknown backend" "unknown backend 'fast' (available: reference, emulated)" ident.onnx --input-shapes batch:1 --backends reference,fast
bad_case "backend twice" "--backends lists 'reference' twice" ident.onnx --input-shapes batch:1 --backends reference,reference --no-compare
bad_case "--val-range reversed" "--val-range: expected [LO,HI] or NAME:[LO,HI] with finite LO <= HI, got '[1,0]'" ident.onnx --input-shapes batch:1 --val-range '[1,0]'
bad_case "--val-range without brackets" "--val-range '0,1': expected [LO,HI] or NAME:[LO,HI] with finite LO <= HI, got '0'" ident.onnx --input-shapes batch:1 --val-range 0,1
bad_case "--val-range unknown input" "--val-range: the model has no input 'nope'" ident.onnx --input-shapes batch:1 --val-range 'nope:[0,1]'
bad_case "--val-range outside an integer type" "input 'ids' (int64): value range [0, 1e+20] leaves the type's range" ident.onnx --input-shapes batch:1 --val-range 'ids:[0,1e20]'
bad_case "--layers" "--layers must be 'all' or 'outputs', got 'some'" ident.onnx --layers some
bad_case "--seed negative" "--seed must not be negative" ident.onnx --seed -4
bad_case "--threads negative" "--threads must be between 0 and 4096" ident.onnx --threads -1
bad_case "unsupported operator" "backend 'reference': node 'frob': operator com.example.Frobnicate (opset 1) is not supported" custom.onnx --dump u.h5
expect_no_file u.h5
bad_case "--dump into a missing folder" "no/such/dir/d.h5" ident.onnx --input-shapes batch:1 --dump no/such/dir/d.h5

# --- failed and interrupted runs ---------------------------------------------------------------
no_leftovers() { ! ls -a "$WORK" | grep -q '\.tmp-'; }

case_begin "failed run mid-way leaves no dump"
run "$L" run intrelu.onnx --backend-plugin "$PLUGINS/passthrough.so" --backends reference,passthrough --no-compare --dump f.h5
expect_exit 2
expect_stderr_contains "backend 'passthrough': node 'relu_int' (Relu): backend 'passthrough' does not compute int32"
expect_stderr_one_line
expect_no_file f.h5
expect_true "no temporary file left" no_leftovers

case_begin "SIGINT during a run: exit 130, no dump"
PASSTHROUGH_RAISE_AT=1 run "$L" run one.onnx --backend-plugin "$PLUGINS/passthrough.so" --backends passthrough --dump i.h5
expect_exit 130
expect_stderr_contains "i.h5 not written: interrupted by SIGINT"
expect_stderr_one_line
expect_no_file i.h5
expect_true "no temporary file left" no_leftovers

case_begin "SIGTERM during a run: killed by the signal (143), no dump"
PASSTHROUGH_SIGNAL=TERM PASSTHROUGH_RAISE_AT=0 run "$L" run one.onnx --backend-plugin "$PLUGINS/passthrough.so" --backends passthrough --dump t.h5
expect_exit 143
expect_stderr_contains "t.h5 not written: interrupted by SIGTERM"
expect_no_file t.h5
expect_true "no temporary file left" no_leftovers

case_begin "progress line only on a terminal"
if command -v script >/dev/null 2>&1; then
  run script -qec "'$L' run --backends reference ident.onnx --input-shapes batch:2 --dump tty.h5" /dev/null
  expect_exit 0
  expect_stdout_contains "reference: layer 3/3"
  expect_file_exists tty.h5
else
  skip_case "script(1) not available to fake a terminal"
fi

# --- fixtures [needs kernels] ----------------------------------------------------------------
case_begin "[needs kernels: Conv Relu MaxPool Flatten Gemm] cnn.onnx with a dump"
run "$L" run --backends reference "$FX/cnn.onnx" --dump cnn.h5
expect_exit 0
expect_stdout_contains "output  float32  1x10"
expect_true "8 layer outputs, one per node, output 1x10" check_dump cnn.h5 "
r = run('reference')
assert len(r) == 8, names(r)
assert r['output'].shape == (1, 10) and np.isfinite(r['output'][()]).all()
assert inp('input').shape == (1, 3, 32, 32)
"

case_begin "[needs kernels: MatMul Softmax Erf ReduceMean ...] transformer.onnx, batch 2"
run "$L" run --backends reference "$FX/transformer.onnx" --input-shapes batch:2 --dump tr.h5
expect_exit 0
expect_stdout_contains "output  float32  2x16x64"
expect_true "names with '/' and '.' kept intact" check_dump tr.h5 "
r = run('reference')
n = names(r)
assert '/encoder/layer.0/attn/MatMul_output_0' in n, n[:5]
t = r[esc('/encoder/layer.0/attn/MatMul_output_0')]
assert t.attrs['node'] == '/encoder/layer.0/attn/MatMul'
assert r['output'].shape == (2, 16, 64)
"

case_begin "[needs kernels] transformer.onnx --layers outputs"
run "$L" run --backends reference "$FX/transformer.onnx" --input-shapes batch:1 --layers outputs --dump tro.h5
expect_exit 0
expect_true "only the output" check_dump tro.h5 "assert names(run('reference')) == ['output']"

finish
