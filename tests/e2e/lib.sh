# layerdiff end-to-end test helpers. Source this from tests/e2e/test_*.sh.
#
#   case_begin NAME             start a case (a fresh $WORK dir is made per script)
#   run CMD...                  run a command; sets $EXIT, $STDOUT, $STDERR (files)
#   expect_exit CODE            the last run's exit status
#   expect_stdout_contains STR / expect_stderr_contains STR
#   expect_stderr_one_line      stderr is exactly one line
#   expect_file_exists F / expect_no_file F
#   expect_true DESC CMD...     any command as a check
#   skip_case REASON            mark the current case skipped
#   finish                      print "NAME: N passed, M failed" and exit non-zero on failure
#
# $LAYERDIFF is the sanitized binary (set by scripts/run-tests.sh), $ROOT the
# repository root, $PY Debian's python3 (has onnx, numpy, h5py).

set -u
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAYERDIFF=${LAYERDIFF:-$ROOT/build/asan/layerdiff}
case "$LAYERDIFF" in /*) ;; *) LAYERDIFF=$ROOT/$LAYERDIFF ;; esac
PY=/usr/bin/python3
# tests/e2e/dump_attrs.py: `import dump_attrs` shows a dump's index rows as dataset attributes
export PYTHONPATH=$ROOT/tests/e2e${PYTHONPATH:+:$PYTHONPATH}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/layerdiff-e2e.XXXXXX")
STDOUT=$WORK/.stdout
STDERR=$WORK/.stderr
EXIT=0
_case=""
_case_failed=0
_passed=0
_failed=0
_skipped=0
_script=$(basename "$0" .sh)
trap 'rm -rf "$WORK"' EXIT

_close_case() {
  [ -z "$_case" ] && return 0
  if [ "$_case_failed" -eq 0 ]; then
    echo "ok - $_case"; _passed=$((_passed + 1))
  elif [ "$_case_failed" -lt 0 ]; then
    _skipped=$((_skipped + 1))
  else
    echo "FAIL - $_case"; _failed=$((_failed + 1))
  fi
  _case=""
}

case_begin() { _close_case; _case=$1; _case_failed=0; }

_fail() {
  echo "  FAILED [$_case]: $*"
  echo "    stdout: $(head -c 600 "$STDOUT" 2>/dev/null)"
  echo "    stderr: $(head -c 600 "$STDERR" 2>/dev/null)"
  _case_failed=1
}

run() {
  "$@" >"$STDOUT" 2>"$STDERR"
  EXIT=$?
  return 0
}

expect_exit() {
  [ "$EXIT" -eq "$1" ] || _fail "exit status $EXIT, expected $1"
}
expect_stdout_contains() {
  grep -qF -- "$1" "$STDOUT" || _fail "stdout lacks '$1'"
}
expect_stderr_contains() {
  grep -qF -- "$1" "$STDERR" || _fail "stderr lacks '$1'"
}
expect_stdout_not_contains() {
  ! grep -qF -- "$1" "$STDOUT" || _fail "stdout has '$1'"
}
expect_stderr_one_line() {
  local n; n=$(wc -l <"$STDERR")
  [ "$n" -eq 1 ] || _fail "stderr has $n lines, expected exactly one"
}
expect_file_exists() { [ -s "$1" ] || _fail "file '$1' missing or empty"; }
expect_no_file() { [ ! -e "$1" ] || _fail "file '$1' should not exist"; }
expect_true() {
  local desc=$1; shift
  "$@" >/dev/null 2>&1 || _fail "$desc"
}
skip_case() { echo "skip - $_case: $*"; _case_failed=-1; }

finish() {
  _close_case
  echo "$_script: $_passed passed, $_failed failed, $_skipped skipped"
  [ "$_failed" -eq 0 ]
  exit $?
}
