#!/usr/bin/env bash
# Runs test programs and end-to-end scripts, sums their results and prints
# one closing line "tests: N passed, M failed". Exits non-zero when any test
# failed or any program crashed or exited non-zero.
#   run-tests.sh --build DIR [PROGRAM...] -- [E2E_SCRIPT...]
set -uo pipefail

build=build
if [ "${1:-}" = "--build" ]; then build=$2; shift 2; fi
programs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do programs+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
scripts=("$@")

export LAYERDIFF_BUILD="$build"
export LAYERDIFF="${LAYERDIFF:-$build/asan/layerdiff}"
export LAYERDIFF_RELEASE="${LAYERDIFF_RELEASE:-$build/layerdiff}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

passed=0
failed=0
broken=()
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Adds the counts a program printed: cmocka's "[  PASSED  ] N test(s)." and
# "[  FAILED  ] N test(s)", or a plain "N passed, M failed" line.
count_results() {
  local p f
  p=$(grep -aoE '\[  PASSED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1)
  f=$(grep -aoE '\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1)
  if [ -z "$p$f" ]; then
    local line
    line=$(grep -aE '(^|: )[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
    p=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
    f=$(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+')
  fi
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  [ -n "$p$f" ]
}

run_one() {
  local name=$1; shift
  echo "=== $name"
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  if ! count_results; then
    echo "run-tests: $name printed no result line" >&2
    failed=$((failed + 1))
    broken+=("$name (no results)")
  fi
  if [ "$rc" -ne 0 ]; then
    broken+=("$name (exit $rc)")
    # A crash or a non-zero exit with no counted failure still fails the run.
    if ! grep -qaE '\[  FAILED  \] [1-9]|[1-9][0-9]* failed' "$log"; then failed=$((failed + 1)); fi
  fi
}

for prog in "${programs[@]}"; do
  run_one "$(basename "$prog")" "$prog"
done
for script in "${scripts[@]}"; do
  [ -f "$script" ] || continue
  run_one "$(basename "$script")" bash "$script"
done

echo
if [ ${#broken[@]} -gt 0 ]; then
  echo "failing programs:"
  printf '  %s\n' "${broken[@]}"
fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ ${#broken[@]} -eq 0 ]
