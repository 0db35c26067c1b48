#!/usr/bin/env bash
# Guards the ONNX conformance results: every test listed in
# tests/conformance-pass.txt (written by `make conformance`) must still pass on
# the sanitized binary, and a broken expectation must be caught.
source "$(dirname "$0")/lib.sh"

DATA=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
DIRS=("$DATA/node" "$DATA/pytorch-converted" "$DATA/pytorch-operator" "$DATA/simple")

case_begin "listed conformance tests still pass"
if [ ! -d "$DATA/node" ]; then
  skip_case "no ONNX test data at $DATA (Debian package libonnx-testdata)"
else
  run "$LAYERDIFF" conformance --quiet --pass-list "$ROOT/tests/conformance-pass.txt" "${DIRS[@]}"
  expect_exit 0
  expect_stdout_contains "conformance guard: $(grep -c . "$ROOT/tests/conformance-pass.txt") passed, 0 failed"
  grep -E '^REGRESSION ' "$STDOUT" | head -20
fi

case_begin "node target: at least 850 of the node tests pass"
if [ ! -d "$DATA/node" ]; then
  skip_case "no ONNX test data"
else
  n=$(grep -c '^node/' "$ROOT/tests/conformance-pass.txt")
  expect_true "only $n node tests listed as passing" test "$n" -ge 850
fi

case_begin "a wrong expected output is reported as FAIL with the worst element"
if [ ! -d "$DATA/node/test_relu" ]; then
  skip_case "no ONNX test data"
else
  cp -r "$DATA/node/test_relu" "$WORK/test_relu"
  # Feed the input file as the expected output: relu(x) != x where x < 0.
  cp "$WORK/test_relu/test_data_set_0/input_0.pb" "$WORK/test_relu/test_data_set_0/output_0.pb"
  run "$LAYERDIFF" conformance "$WORK/test_relu"
  expect_exit 1
  expect_stdout_contains "/test_relu: output 'y' element"
  expect_stdout_contains "elements off"
fi

case_begin "a listed test that no longer passes is a regression (exit 1)"
if [ ! -d "$DATA/node/test_relu" ]; then
  skip_case "no ONNX test data"
else
  echo "tmp/test_relu" > "$WORK/list.txt"
  mkdir -p "$WORK/tmp" && mv "$WORK/test_relu" "$WORK/tmp/test_relu"
  run "$LAYERDIFF" conformance --pass-list "$WORK/list.txt" "$WORK/tmp"
  expect_exit 1
  expect_stdout_contains "REGRESSION   tmp/test_relu"
  expect_stdout_contains "conformance guard: 0 passed, 1 failed"
fi

case_begin "an unsupported operator is reported, not fatal"
if [ ! -d "$DATA/node/test_tfidfvectorizer_tf_only_bigrams_skip0" ]; then
  skip_case "no ONNX test data"
else
  run "$LAYERDIFF" conformance "$DATA/node/test_tfidfvectorizer_tf_only_bigrams_skip0"
  expect_exit 0
  expect_stdout_contains "UNSUPPORTED"
  expect_stdout_contains "TfIdfVectorizer"
fi

case_begin "a folder without tests is a usage error"
run "$LAYERDIFF" conformance "$WORK"
expect_exit 2
expect_stderr_contains "holds no ONNX test"
finish
