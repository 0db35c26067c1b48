#!/usr/bin/env bash
# Runs end-to-end tests on the release binary under valgrind memcheck.
#   valgrind.sh --build DIR [--subset all|ci]
# Every layerdiff process the tests start (forked children included) runs under
#   valgrind --error-exitcode=97 --leak-check=full --errors-for-leak-kinds=definite,indirect
# with tests/valgrind.supp, its log in DIR/valgrind/logs/. The run fails when a
# test fails (a memcheck error turns the expected exit code into 97) or any log
# holds an error. --subset ci (the last step of `make test`) keeps to about two
# minutes: inspect, run and every third case of the bad-input corpus, plus the
# conformance guard on all of the ONNX test data (one process, seconds); all
# (make valgrind) runs every e2e script.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

build=build
subset=all
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --subset) subset=$2; shift 2 ;;
    *) echo "valgrind.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed (scripts/install-deps.sh)" >&2; exit 2; }

vg=$root/$build/valgrind
logs=$vg/logs
rm -rf "$logs"
mkdir -p "$logs"
# The wrapper the tests call instead of the binary. Under valgrind layerdiff
# does not re-execute itself to give libgomp GOMP_SPINCOUNT=1000 (cli/main.c,
# docs/architecture.md): the wrapper does it instead, with the same rule (run
# and conformance, unless the caller chose a wait policy), which also keeps
# idle OpenMP workers from spinning under valgrind's serialised scheduler.
cat >"$vg/layerdiff" <<EOF
#!/bin/sh
if [ -z "\${OMP_WAIT_POLICY+x}\${GOMP_SPINCOUNT+x}" ]; then
  case "\$1" in run|conformance) export GOMP_SPINCOUNT=1000 ;; esac
fi
exec valgrind -q --tool=memcheck --error-exitcode=97 --leak-check=full \\
  --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \\
  --suppressions="$root/tests/valgrind.supp" --log-file="$logs/vg.%p.log" \\
  "$root/$build/layerdiff" "\$@"
EOF
chmod +x "$vg/layerdiff"

export LAYERDIFF=$vg/layerdiff LAYERDIFF_RELEASE=$vg/layerdiff LAYERDIFF_VALGRIND=1

start=$(date +%s)
status=0
if [ "$subset" = ci ]; then
  scripts=(tests/e2e/test_inspect.sh tests/e2e/test_run.sh tests/e2e/test_bad_inputs.sh)
  export LAYERDIFF_BAD_INPUTS_EVERY=3
else
  scripts=(tests/e2e/test_*.sh)
fi
# --build points the tests at the sanitizer-free plugins in DIR/valgrind/plugins.
bash scripts/run-tests.sh --build "$build/valgrind" -- "${scripts[@]}" || status=1

if [ "$subset" = ci ]; then
  data=${ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}
  if [ -d "$data/node" ]; then
    # Every test folder (the tests are small: seconds under memcheck); the
    # tests listed in tests/conformance-pass.txt must pass.
    dirs=()
    for d in node pytorch-converted pytorch-operator simple; do [ -d "$data/$d" ] && dirs+=("$data/$d"); done
    echo "=== conformance under valgrind: ${dirs[*]##*/}"
    "$LAYERDIFF" conformance --quiet --pass-list "$root/tests/conformance-pass.txt" "${dirs[@]}" | tail -2 || status=1
  else
    echo "=== conformance skipped: no ONNX test data at $data"
  fi
fi

bad=()
for f in "$logs"/vg.*.log; do
  [ -s "$f" ] && bad+=("$f")
done
n_logs=$(ls "$logs" | wc -l)
echo
if [ ${#bad[@]} -gt 0 ]; then
  echo "valgrind: errors in ${#bad[@]} of $n_logs processes:"
  for f in "${bad[@]}"; do
    echo "--- $f"
    head -40 "$f"
  done
  status=1
fi
echo "valgrind ($subset): $n_logs processes, ${#bad[@]} with errors, $(( $(date +%s) - start )) s"
exit $status
