#!/usr/bin/env bash
# The command-line surface: help, version, usage errors (docs/cli.md).
source "$(dirname "$0")/lib.sh"

# Subcommands as `layerdiff --help` lists them ("  name   summary").
no_escapes() { ! grep -q "$(printf '\033')" "$1"; }
commands() { "$LAYERDIFF" --help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }'; }

for flag in --help -h; do
  case_begin "top-level $flag"
  run "$LAYERDIFF" $flag
  expect_exit 0
  expect_stdout_contains "Usage: layerdiff <command>"
  expect_stdout_contains "inspect"
  expect_true "stderr is empty" test ! -s "$STDERR"
done

case_begin "top-level help lists at least inspect"
expect_true "commands found" test "$(commands | grep -c .)" -ge 1
expect_true "inspect listed" sh -c "'$LAYERDIFF' --help | grep -q '^  inspect '"

for cmd in $(commands); do
  for flag in --help -h; do
    case_begin "$cmd $flag"
    run "$LAYERDIFF" "$cmd" $flag
    expect_exit 0
    expect_stdout_contains "Usage: layerdiff $cmd"
    expect_stdout_contains "--help"
    expect_true "stderr is empty" test ! -s "$STDERR"
  done
  case_begin "help $cmd"
  run "$LAYERDIFF" help "$cmd"
  expect_exit 0
  expect_stdout_contains "Usage: layerdiff $cmd"

  case_begin "$cmd: unknown option"
  run "$LAYERDIFF" "$cmd" --no-such-option
  expect_exit 2
  expect_stderr_contains "layerdiff $cmd: unknown option '--no-such-option' (see 'layerdiff $cmd --help')"
  expect_stderr_one_line

  case_begin "$cmd: unknown short option"
  run "$LAYERDIFF" "$cmd" -Z
  expect_exit 2
  expect_stderr_contains "unknown option '-Z'"
  expect_stderr_one_line
done

for flag in --version -V; do
  case_begin "top-level $flag"
  run "$LAYERDIFF" $flag
  expect_exit 0
  expect_true "prints 'layerdiff X.Y.Z'" grep -qE '^layerdiff [0-9]+\.[0-9]+\.[0-9]+' "$STDOUT"
done

case_begin "unknown command"
run "$LAYERDIFF" frobnicate
expect_exit 2
expect_stderr_contains "unknown command 'frobnicate'"
expect_stderr_contains "layerdiff --help"
expect_stderr_one_line

case_begin "help of an unknown command"
run "$LAYERDIFF" help frobnicate
expect_exit 2
expect_stderr_contains "unknown command 'frobnicate'"
expect_stderr_one_line

case_begin "unknown top-level option"
run "$LAYERDIFF" --frobnicate
expect_exit 2
expect_stderr_contains "unknown option '--frobnicate'"
expect_stderr_one_line

case_begin "no command"
run "$LAYERDIFF"
expect_exit 2
expect_stderr_contains "missing command"
expect_stderr_one_line

case_begin "inspect: flag given a value"
run "$LAYERDIFF" inspect --json=yes "$ROOT/fixtures/cnn.onnx"
expect_exit 2
expect_stderr_contains "option '--json' takes no value"
expect_stderr_one_line

case_begin "inspect: missing FILE"
run "$LAYERDIFF" inspect
expect_exit 2
expect_stderr_contains "layerdiff inspect: missing FILE"
expect_stderr_one_line

case_begin "inspect: too many arguments"
run "$LAYERDIFF" inspect "$ROOT/fixtures/cnn.onnx" extra.onnx
expect_exit 2
expect_stderr_contains "unexpected argument 'extra.onnx'"
expect_stderr_one_line

case_begin "no colour when stdout is not a terminal"
run "$LAYERDIFF" inspect "$ROOT/fixtures/cnn.onnx"
expect_exit 0
expect_true "no escape sequences" no_escapes "$STDOUT"

case_begin "colour on a terminal, none with NO_COLOR"
if command -v script >/dev/null 2>&1; then
  TERM=xterm script -qec "'$LAYERDIFF' inspect '$ROOT/fixtures/cnn.onnx'" /dev/null >"$WORK/tty.out" 2>&1
  expect_true "escape sequences on a tty" grep -q "$(printf '\033')\[1m" "$WORK/tty.out"
  TERM=xterm NO_COLOR=1 script -qec "'$LAYERDIFF' inspect '$ROOT/fixtures/cnn.onnx'" /dev/null >"$WORK/tty2.out" 2>&1
  expect_true "NO_COLOR disables colour" no_escapes "$WORK/tty2.out"
  expect_true "output still printed" grep -q "ONNX model" "$WORK/tty2.out"
else
  skip_case "util-linux 'script' not installed"
fi

finish
