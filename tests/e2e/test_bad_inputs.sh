#!/usr/bin/env bash
# The bad-input corpus (tests/bad-inputs/, docs/reliability.md): every file
# must be refused with its expected exit code and a one-line error holding the
# expected text, write nothing, and not crash the sanitized binary.
#
# Cases come from tests/bad-inputs/cases.tsv (made with the files by
# scripts/gen-bad-inputs.py) and fuzz-found.tsv (inputs fuzzing found, kept
# by hand): file, exit code, expected substring, command. In the command {}
# is the file and {dir} tests/bad-inputs; a leading "release:" runs the
# release binary (for faults inside HDF5, whose sanitizer reports would be
# extra output; skipped under `make valgrind`, LAYERDIFF_VALGRIND=1, which
# would report it), leading NAME=VALUE words set environment variables.
# fixtures/bad/*.onnx (checked with `inspect` by test_inspect.sh) are also
# run through `layerdiff run`. LAYERDIFF_BAD_INPUTS_EVERY=N runs every Nth
# case of the manifests only (the valgrind subset of `make test` uses 3).
source "$(dirname "$0")/lib.sh"
DIR=$ROOT/tests/bad-inputs
RELEASE=${LAYERDIFF_RELEASE:-$ROOT/build/layerdiff}
case "$RELEASE" in /*) ;; *) RELEASE=$ROOT/$RELEASE ;; esac
cd "$WORK" || exit 1

entries() { ls -A "$WORK" | grep -v '^\.std' | sort; }

# check_case FILE CODE SUBSTRING COMMAND
check_case() {
  local file=$1 code=$2 substring=$3 command=$4 bin=$LAYERDIFF release=0 w
  local -a words envs=() args=()
  read -r -a words <<<"$command"
  if [ "${words[0]}" = "release:" ]; then
    bin=$RELEASE
    release=1
    words=("${words[@]:1}")
  fi
  while [[ "${words[0]}" == *=* ]]; do
    envs+=("${words[0]}")
    words=("${words[@]:1}")
  done
  for w in "${words[@]}"; do
    w=${w//\{dir\}/$DIR}
    args+=("${w//\{\}/$DIR/$file}")
  done
  case_begin "$file: ${command//\{dir\}\//}"
  if [ ! -f "$DIR/$file" ]; then
    _fail "missing $DIR/$file"
    return
  fi
  if [ "$release" = 1 ] && [ -n "${LAYERDIFF_VALGRIND:-}" ]; then
    skip_case "HDF5 crashes on purpose in the isolation child; valgrind would report that"
    return
  fi
  if [ "$release" = 1 ] && [ ! -x "$RELEASE" ]; then
    skip_case "no release binary at $RELEASE"
    return
  fi
  local before
  before=$(entries)
  run env "${envs[@]}" "$bin" "${args[@]}"
  expect_exit "$code"
  if [ "$code" -eq 0 ]; then
    expect_stdout_contains "$substring"
  else
    expect_stderr_contains "$substring"
    expect_stderr_contains "layerdiff"
    expect_stderr_one_line
    expect_true "nothing on stdout" test ! -s "$STDOUT"
  fi
  expect_true "no file written" test "$(entries)" = "$before"
}

n_cases=0
listed=()
every=${LAYERDIFF_BAD_INPUTS_EVERY:-1}
for manifest in cases.tsv fuzz-found.tsv; do
  case_begin "$manifest exists"
  expect_true "$DIR/$manifest is there" test -f "$DIR/$manifest"
  [ -f "$DIR/$manifest" ] || continue
  while IFS=$'\t' read -r file code substring command; do
    [ -z "$file" ] || [ "${file:0:1}" = "#" ] && continue
    [ $((n_cases % every)) -eq 0 ] && check_case "$file" "$code" "$substring" "$command"
    listed+=("$file")
    n_cases=$((n_cases + 1))
  done <"$DIR/$manifest"
done

case_begin "every file in tests/bad-inputs is a case or a helper"
helpers=" one_input.onnx bool_input.onnx ext16.bin cases.tsv fuzz-found.tsv README.md "
for f in $(ls "$DIR"); do
  case "$helpers" in *" $f "*) continue ;; esac
  printf '%s\n' "${listed[@]}" | grep -qxF "$f" || _fail "$f is in no manifest"
done
expect_true "at least 80 cases (found $n_cases)" test "$n_cases" -ge 80

# fixtures/bad through `run` (test_inspect.sh runs them through `inspect`).
for model in "$ROOT"/fixtures/bad/*.onnx; do
  name=$(basename "$model" .onnx)
  [ -f "$ROOT/fixtures/bad/$name.expected" ] || continue
  case_begin "fixtures/bad/$name.onnx: run"
  run "$LAYERDIFF" run "$model" --dump "$WORK/never.h5"
  expect_exit "$(sed -n 1p "$ROOT/fixtures/bad/$name.expected")"
  expect_stderr_contains "$(sed -n 2p "$ROOT/fixtures/bad/$name.expected")"
  expect_stderr_one_line
  expect_no_file "$WORK/never.h5"
done

# Messages nested past any real model overflow protobuf-c's recursion: made here
# (not committed) at a depth far beyond the limit of 100.
case_begin "a model nesting 100,000 sequence types is refused, not a stack overflow"
"$PY" - "$WORK/deep.onnx" <<'PYEOF'
import sys
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)
def ld(number, payload):
    return bytes([(number << 3) | 2]) + varint(len(payload)) + payload
t = ld(1, b"\x08\x01")
for _ in range(100000):
    t = ld(4, ld(1, t))
graph = ld(11, ld(1, b"x") + ld(2, t)) + ld(2, b"deep")
open(sys.argv[1], "wb").write(b"\x08\x08" + ld(7, graph) + ld(8, b"\x10\x0d"))
PYEOF
run "$LAYERDIFF" inspect "$WORK/deep.onnx"
expect_exit 2
expect_stderr_contains "messages nested more than 100 deep"
expect_stderr_one_line
rm -f "$WORK/deep.onnx"

# JSON reports read by `layerdiff report` (and `report trend`): wrong schema name or
# version, a truncated file, not an object. Made here from a fresh report of the
# cnn fixture, so they follow the writer as the schema grows.
case_begin "a JSON report to break"
run "$LAYERDIFF" run "$ROOT/fixtures/cnn.onnx" --backends reference,emulated --fp16 --layers outputs \
  --report-json "$WORK/base.json"
expect_true "run wrote base.json" test -s "$WORK/base.json"
if [ -s "$WORK/base.json" ]; then
  "$PY" - "$WORK" <<'PYEOF'
import json, os, sys
d = sys.argv[1]
text = open(os.path.join(d, "base.json")).read()
base = json.loads(text)
def write(name, value):
    with open(os.path.join(d, name), "w") as f:
        f.write(value if isinstance(value, str) else json.dumps(value))
for name, key, value in [("report_version2.json", "schema_version", 2),
                         ("report_version0.json", "schema_version", 0),
                         ("report_version_string.json", "schema_version", "1"),
                         ("report_other_schema.json", "schema", "layerdiff-dump")]:
    write(name, dict(base, **{key: value}))
write("report_no_version.json", {k: v for k, v in base.items() if k != "schema_version"})
write("report_truncated.json", text.rstrip()[:-1])  # the closing brace cut off: a deterministic message
write("report_array.json", "[]")
PYEOF
  mv "$WORK/base.json" "$WORK/base_ok.json" # trend: a good report, then the bad one
  while IFS='|' read -r file substring; do
    for command in "report" "report trend $WORK/base_ok.json"; do
      case_begin "$file: ${command/ $WORK\/base_ok.json/ base_ok.json}"
      before=$(entries)
      run "$LAYERDIFF" $command "$WORK/$file" --markdown "$WORK/out.md"
      expect_exit 2
      expect_stderr_contains "layerdiff: error: $WORK/$file: "
      expect_stderr_contains "$substring"
      expect_stderr_one_line
      expect_no_file "$WORK/out.md"
      expect_true "no file written" test "$(entries)" = "$before"
    done
  done <<'CASES'
report_version2.json|schema_version: 2: written by a newer layerdiff (this one reads version 1)
report_version0.json|schema_version: 0 is out of range
report_version_string.json|schema_version: expected an integer
report_no_version.json|schema_version: missing
report_other_schema.json|schema: expected "layerdiff-report": not a layerdiff report
report_truncated.json|'}' expected near end of file
report_array.json|not a layerdiff report (the JSON is not an object)
CASES
fi

finish
