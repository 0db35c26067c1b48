#!/usr/bin/env bash
# Runs libFuzzer targets (built by `make fuzz-build`) one after the other.
#   fuzz.sh --build DIR --seconds N [--targets a,b] BINARY...
# Each target runs N seconds (0: build only, nothing runs) in one process
# (-jobs=1: the machine is shared) on its accumulated corpus fuzz-corpus/<target>/
# (git-ignored) plus fresh seeds made by tests/fuzz/make_seeds.py from the
# fixtures. A crash, leak, timeout (-timeout=$FUZZ_TIMEOUT s per input, default
# 10; wall-clock, so a run at `nice -n 19` on a busy machine needs more, e.g.
# 60, or a starved input counts as a hang) or out-of-memory
# leaves DIR/fuzz/artifacts/<target>-crash-* and makes the script fail; the
# summary line per target is appended to DIR/fuzz/stats.tsv, which
# docs/reliability.md sums up.
set -uo pipefail
cd "$(dirname "$0")/.."

build=build
seconds=60
targets=""
input_timeout=${FUZZ_TIMEOUT:-10}
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    *) break ;;
  esac
done
bins=("$@")
[ "$seconds" -gt 0 ] 2>/dev/null || { echo "fuzz: built ${#bins[@]} targets (FUZZ_SECONDS=0: not running)"; exit 0; }

wanted() {  # NAME: in --targets (or no --targets given)
  [ -z "$targets" ] && return 0
  case ",$targets," in *",$1,"*) return 0 ;; esac
  return 1
}

names=()
for bin in "${bins[@]}"; do
  name=$(basename "$bin"); name=${name#fuzz_}
  wanted "$name" && names+=("$name")
done
[ ${#names[@]} -gt 0 ] || { echo "fuzz: no target matches '$targets'" >&2; exit 2; }

seeds=$build/fuzz/seeds
artifacts=$(pwd)/$build/fuzz/artifacts
stats=$build/fuzz/stats.tsv
mkdir -p "$artifacts" "$build/fuzz/logs"
/usr/bin/python3 tests/fuzz/make_seeds.py "$seeds" "$build/layerdiff" "${names[@]}" || exit 2
[ -f "$stats" ] || printf 'date\ttarget\tseconds\texecs\texec_per_s\tcov\tft\tcorpus\tresult\n' >"$stats"

# Huge allocations return NULL (the code reports LD_ERR_NOMEM) instead of
# aborting; libFuzzer's own limits (-rss_limit_mb 2048, malloc limit the same)
# still flag an input that really makes the process that big.
export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=1900:detect_leaks=1:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/fuzz/lsan.supp:print_suppressions=0:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# No OpenMP spinning threads competing with the other jobs on this machine.
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
# ld_dump_open reads a dump's metadata in a child process first, because HDF5
# 1.10 crashes or loops on some corrupt files (dump/dump_isolate.c); a short
# time limit keeps a looping child below libFuzzer's -timeout.
export LAYERDIFF_HDF5_TIMEOUT=1

# An artifact written by such a child (libFuzzer's crash handler runs there
# too) is a fault inside HDF5 that the isolation contained if replaying the
# input in a fresh process passes: it is moved to artifacts/contained/.
triage() {  # BIN FILE...: prints the number of real (uncontained) crashes
  local bin=$1 real=0 f
  shift
  mkdir -p "$artifacts/contained"
  for f in "$@"; do
    if timeout 60 "$bin" "$f" >"$f.replay.log" 2>&1; then
      mv "$f" "$artifacts/contained/"; rm -f "$f.replay.log"
    else
      real=$((real + 1))
    fi
  done
  echo "$real"
}

failed=()
for name in "${names[@]}"; do
  bin=$build/fuzz/fuzz_$name
  corpus=fuzz-corpus/$name
  log=$build/fuzz/logs/$name.log
  mkdir -p "$corpus"
  dict=()
  [ -f "tests/fuzz/$name.dict" ] && dict=(-dict="tests/fuzz/$name.dict")
  ls "$artifacts" | grep "^$name-" | sort >"$build/fuzz/logs/$name.before"
  echo "fuzz: $name for ${seconds}s (log $log)"
  "$bin" "$corpus" "$seeds/$name" "${dict[@]}" -max_total_time="$seconds" -timeout="$input_timeout" \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/$name-" >"$log" 2>&1
  rc=$?
  new_files=()
  while read -r f; do new_files+=("$artifacts/$f"); done < <(ls "$artifacts" | grep "^$name-" |
    grep -v '\.replay\.log$' | sort | comm -13 "$build/fuzz/logs/$name.before" -)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1)
  cov=$(echo "$last" | grep -oE 'cov: [0-9]+' | grep -oE '[0-9]+')
  ft=$(echo "$last" | grep -oE 'ft: [0-9]+' | grep -oE '[0-9]+')
  corp=$(echo "$last" | grep -oE 'corp: [0-9]+' | grep -oE '[0-9]+')
  result=ok
  real=0
  if [ "$rc" -eq 0 ] && [ ${#new_files[@]} -gt 0 ]; then
    real=$(triage "$bin" "${new_files[@]}")
    contained=$((${#new_files[@]} - real))
    [ "$contained" -gt 0 ] && result="ok ($contained HDF5 faults contained)"
  fi
  if [ "$rc" -ne 0 ] || [ "$real" -gt 0 ]; then
    result="CRASH (exit $rc)"
    failed+=("$name")
    grep -E '^==[0-9]+==ERROR|SUMMARY:|fuzz contract broken|Test unit written' "$log" | head -5 | sed 's/^/    /'
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$name" "$seconds" \
    "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result" >>"$stats"
  printf 'fuzz: %-12s %s  execs %s (%s/s)  cov %s  ft %s  corpus %s\n' "$name" "$result" \
    "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in: ${failed[*]}; inputs in $artifacts (reproduce: $build/fuzz/fuzz_<target> FILE)" >&2
  exit 1
fi
echo "fuzz: ${#names[@]} targets, no crash"
