#!/usr/bin/env bash
# `layerdiff bisect` on the fixtures of scripts/gen-bisect-fixtures.py, where
# the answer is known by construction: the fp32 set equals the planted
# culprits (two independent overflows in different branches: not a prefix);
# the cancellation fixture needs three layers and drops the decoy; prefix /
# suffix mode match the k computed by hand (8 and 10); the written flags pass
# when pasted into `layerdiff run` and one layer fewer fails (1-minimal);
# trtexec flags name existing nodes exactly (checked by parsing them as
# trtexec does); node names with glob characters, '#', ':' and ',' survive;
# no passing set exits 1; usage errors exit 2 with one line.
source "$(dirname "$0")/lib.sh"
FX=$ROOT/fixtures/bisect
cd "$WORK" || exit 1

json() { # FILE EXPR: the Python expression over `r` (the parsed JSON) must hold
  "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}

case_begin "ddmin finds exactly the two planted culprits"
run "$LAYERDIFF" bisect "$FX/two_branches.onnx" -o tb
expect_exit 0
expect_stdout_contains "fp32 layers: 2 (1-minimal"
expect_stdout_contains "check    a fresh engine built with these layers in fp32: outputs pass"
expect_stderr_contains "trial "
expect_true "layer-precisions lists a_gain and b_gain" \
  diff <(grep -v '^#' tb/layer-precisions.txt) <(printf 'a_gain:fp32\nb_gain:fp32\n')
expect_true "layer-output-types lists a_gain and b_gain" \
  diff <(grep -v '^#' tb/layer-output-types.txt) <(printf 'a_gain:fp32\nb_gain:fp32\n')
expect_true "bisect.json: found, 1-minimal, verified, the two layers" json tb/bisect.json \
  "r['found'] and r['one_minimal'] and r['verified'] and [l['node'] for l in r['layers']] == ['a_gain','b_gain'] and all(l['overflow'] for l in r['layers']) and not r['before']['pass'] and r['after']['pass']"
expect_true "ort node_block_list" json tb/ort_node_block_list.json \
  "r == {'node_block_list': ['a_gain', 'b_gain']}"
expect_true "the trial log is in bisect.json" json tb/bisect.json \
  "len(r['trials']) >= 3 and r['timing']['trials'] == len(r['trials']) and r['timing']['full_run_seconds'] > 0"

case_begin "the written flags pass in layerdiff run; one layer fewer fails"
cmd=$("$PY" -c "import json; print(json.load(open('tb/bisect.json'))['check_command'])")
run bash -c "LAYERDIFF_BIN=$LAYERDIFF; ${cmd/layerdiff/\$LAYERDIFF_BIN}"
expect_exit 0
grep -v b_gain tb/layer-precisions.txt >one.txt
grep -v b_gain tb/layer-output-types.txt >one-out.txt
run "$LAYERDIFF" run "$FX/two_branches.onnx" --fp16 --precision-constraints obey \
  --layer-precisions @one.txt --layer-output-types @one-out.txt --layers outputs
expect_exit 1

case_begin "trtexec flags name existing nodes exactly"
expect_true "trtexec-flags.txt" grep -qx -- "--fp16 --precisionConstraints=obey --layerPrecisions=a_gain:fp32,b_gain:fp32 --layerOutputTypes=a_gain:fp32,b_gain:fp32" tb/trtexec-flags.txt
# Parse the flags as trtexec does (split at ',', name before the last ':',
# single quotes removed) and check every name is a node of the model.
expect_true "names are nodes" "$PY" - "$FX/two_branches.onnx" tb/trtexec-flags.txt <<'PYEOF'
import shlex, sys, onnx
nodes = {n.name for n in onnx.load(sys.argv[1]).graph.node}
words = shlex.split(open(sys.argv[2]).read())
names = []
for w in words:
    for flag in ("--layerPrecisions=", "--layerOutputTypes="):
        if w.startswith(flag):
            for spec in w[len(flag):].split(","):
                names.append(spec.rsplit(":", 1)[0].replace("'", ""))
sys.exit(0 if names and all(n in nodes for n in names) else 1)
PYEOF

case_begin "amplify: three layers, not the decoy, although the decoy ranks higher"
run "$LAYERDIFF" bisect "$FX/amplify.onnx" -o amp
expect_exit 0
expect_true "the set" json amp/bisect.json \
  "sorted(l['node'] for l in r['layers']) == ['amp_p','amp_r','amp_sub'] and r['one_minimal']"

case_begin "prefix mode matches the hand-computed k = 8"
run "$LAYERDIFF" bisect "$FX/two_branches.onnx" --mode prefix -o pre
expect_exit 0
expect_stdout_contains "the candidates among the first 8 nodes"
expect_true "k" json pre/bisect.json "r['k'] == 8 and len(r['layers']) == 8 and r['verified']"

case_begin "suffix mode matches the hand-computed k = 10"
run "$LAYERDIFF" bisect "$FX/two_branches.onnx" --mode suffix -o suf
expect_exit 0
expect_true "k" json suf/bisect.json "r['k'] == 10 and r['layers'][0]['node'] == 'a_gain' and r['verified']"

case_begin "glob characters, '#', ':' and ',' in node names"
run "$LAYERDIFF" bisect "$FX/weird_names.onnx" -o wn
expect_exit 0
expect_stderr_contains "cannot be named in trtexec flags"
expect_true "flags keep the name with one '*' (it matches no other node)" \
  grep -qF "'--layerPrecisions=/A/gain[0]*x:fp32'" wn/trtexec-flags.txt
expect_true "the name with ',' is marked" json wn/bisect.json \
  "[l['trtexec'] for l in r['layers']] == [True, False] and r['trtexec_unexpressed'] == 1"
cmd=$("$PY" -c "import json; print(json.load(open('wn/bisect.json'))['check_command'])")
run bash -c "LAYERDIFF_BIN=$LAYERDIFF; ${cmd/layerdiff/\$LAYERDIFF_BIN}"
expect_exit 0

case_begin "no set passes: exit 1, reported"
run "$LAYERDIFF" bisect "$FX/subnormal.onnx" --flush-denormals -o sub
expect_exit 1
expect_stdout_contains "no set of fp32 layers makes the outputs pass, not even all 2"
expect_true "bisect.json" json sub/bisect.json "not r['found'] and r['after'] is None"

case_begin "outputs already pass: empty set, exit 0"
run "$LAYERDIFF" bisect "$ROOT/fixtures/transformer.onnx" --input-shapes batch:1 -q
expect_exit 0
expect_stdout_contains "the outputs pass already"

case_begin "quiet, and the trial log otherwise"
run "$LAYERDIFF" bisect "$FX/two_branches.onnx" -q
expect_exit 0
expect_true "no trial lines with -q" bash -c "! grep -q 'trial ' '$STDERR'"

case_begin "bad usage and input exit 2 with one line"
run "$LAYERDIFF" bisect "$FX/two_branches.onnx" --mode fastest
expect_exit 2
expect_stderr_one_line
expect_stderr_contains "--mode must be ddmin, prefix or suffix"
run "$LAYERDIFF" bisect "$WORK/none.onnx"
expect_exit 2
expect_stderr_one_line
run "$LAYERDIFF" bisect "$FX/two_branches.onnx" --cache-memory lots
expect_exit 2
expect_stderr_one_line

finish
