#!/usr/bin/env bash
# layerdiff benchmark — what `make bench` runs (after building the release
# binary and bench/fma_peak).
#
#   scripts/bench.sh [--build DIR] [--reps N] [--quick]
#
# Measures, on this machine and in this run (machines are shared and noisy,
# so only ratios within one run mean much):
#   - the fp32 FMA peak (bench/fma_peak: registers only, widest vector unit),
#     on 1 thread and on every CPU, at the start and at the end (the best
#     trial counts: other processes only ever lower it);
#   - beside PaddleOCR det's runs (before and after those of each thread
#     count), the direct convolution's tile loop from L1 (fma_peak --mix
#     conv): the rate the core gives the kernels' instruction mix at that
#     time, against which det's conv/gemm rate is also shown;
#   - for the CNN fixture (batch 1 and 32), the transformer fixture (batch 8)
#     and PaddleOCR det at 1x3x640x640 (skipped when models/ lacks it), each
#     on 1 thread and on every CPU: the reference backend's run time, its
#     conv/gemm GFLOP/s and that as a share of the FMA peak, and whole-model
#     time over conv/gemm time — from `layerdiff run --profile-json`, median
#     of N processes (default 5) after one discarded run. "cold" is one run
#     per process, as `layerdiff run` is used (buffers first touched during
#     the run); "warm" is the run after two unobserved ones (--warmup 2:
#     buffers, scratch and caches already in place);
#   - on every CPU, warm runs of the emulated backend with --fp16, interleaved
#     with the reference's warm runs, and its time over the reference's;
#   - peak RSS with `--dump` of every layer against the same run without;
#   - comparator throughput: ld_compare_tensors on float32 pairs, 1 thread,
#     as a ratio of memcpy of the same bytes in the same process;
#   - the live comparison (`run` comparing reference and emulated fp16 in
#     lockstep) on the deepest fixture and PaddleOCR det: peak RSS with
#     --dump against without, and the dump's write rate against
#     bench/hdf5_write_loop writing the same datasets in one plain loop;
#   - `layerdiff bisect` on the transformer fixture and PaddleOCR det: trials
#     per second, a trial and the whole search as multiples of one full
#     emulated run (scripts/bench_bisect.py);
#   - libgomp's default busy waiting against layerdiff's GOMP_SPINCOUNT,
#     on the machine as it is and beside one more busy process
#     (docs/architecture.md).
# Prints tables and the issue's goals as met / not met, and writes
# DIR/bench.json. --quick: 3 repetitions and no wait-policy section.
#
# BLAS kernel: layerdiff chooses OpenBLAS's kernel from the CPU's features
# and ignores a preset OPENBLAS_CORETYPE / BLIS_ARCH_TYPE (this workplace
# and its CI preset Haswell for numpy); LAYERDIFF_BLAS_CORETYPE is the
# user's way to choose (docs/architecture.md, "BLAS"). The tables measure
# the default choice (LAYERDIFF_BLAS_CORETYPE is unset for them); when the
# environment presets OPENBLAS_CORETYPE or sets LAYERDIFF_BLAS_CORETYPE,
# the transformer fixture and PaddleOCR det run once more with that kernel
# (LAYERDIFF_BLAS_CORETYPE=NAME), marked "*" in the first table.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=build
REPS=${BENCH_REPS:-5}
POLICY=1
PY=${PYTHON:-/usr/bin/python3}

die() { echo "bench: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --quick) REPS=3; POLICY=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]*$ ]] || die "--reps wants a positive number, got '$REPS'"
BIN=$BUILD/layerdiff
FMA=$BUILD/bench/fma_peak
if [ ! -x "$BIN" ] || [ ! -x "$FMA" ]; then
  die "$BIN or $FMA missing: run 'make BUILD=$BUILD bench'"
fi
[ -x "$PY" ] || die "$PY not found (Debian's python3 computes the report)"
NPROC=$(nproc)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/layerdiff-bench.XXXXXX")
HOG=
LIVE_SHM= # the live comparison's dump folder in /dev/shm, removed at exit
cleanup() {
  [ -n "$LIVE_SHM" ] && rm -rf "$LIVE_SHM"
  [ -n "$HOG" ] && kill "$HOG" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
MANIFEST=$WORK/manifest.tsv # case, mode, threads, rep, profile JSON, other load
: >"$MANIFEST"

# The kernel the environment asks for, kept aside (see the header): the
# user's LAYERDIFF_BLAS_CORETYPE, else a preset OPENBLAS_CORETYPE.
USER_CORE=${LAYERDIFF_BLAS_CORETYPE:-${OPENBLAS_CORETYPE:-}}
USER_CORE_WHY=
if [ -n "${LAYERDIFF_BLAS_CORETYPE:-}" ]; then
  USER_CORE_WHY="LAYERDIFF_BLAS_CORETYPE=$USER_CORE set by the user"
elif [ -n "$USER_CORE" ]; then
  USER_CORE_WHY="OPENBLAS_CORETYPE=$USER_CORE preset in the environment, which layerdiff ignores"
fi
unset LAYERDIFF_BLAS_CORETYPE

log() { printf '%s\n' "$*" >&2; }

# --- FMA peak -------------------------------------------------------------------
log "bench: fp32 FMA peak (1 and $NPROC threads) ..."
"$FMA" --threads 1 --trials "$REPS" --json >"$WORK/fma_1.json"
"$FMA" --threads "$NPROC" --trials "$REPS" --json >"$WORK/fma_all.json"

# --- cases ------------------------------------------------------------------------
# name | model | extra arguments
CASES=("cnn-b1|fixtures/cnn.onnx|")
# The CNN fixture has a fixed batch of 1; a copy with a symbolic batch runs 32.
if "$PY" - "$WORK/cnn_batch.onnx" <<'EOF' 2>"$WORK/cnn_batch.log"; then
import sys, onnx
m = onnx.load("fixtures/cnn.onnx")
for v in list(m.graph.input) + list(m.graph.output):
    v.type.tensor_type.shape.dim[0].dim_param = "batch"
onnx.save(m, sys.argv[1])
EOF
  CASES+=("cnn-b32|$WORK/cnn_batch.onnx|--input-shapes batch:32")
else
  log "bench: skipping cnn batch 32 (could not make the batched copy: $(tail -1 "$WORK/cnn_batch.log"))"
fi
CASES+=("transformer-b8|fixtures/transformer.onnx|--input-shapes batch:8")
DET=models/ppocr_det.onnx
if [ -f "$DET" ]; then
  CASES+=("ppocr-det|$DET|--input-shapes x:1x3x640x640")
else
  log "bench: skipping PaddleOCR det: $DET is missing (scripts/fetch-models.sh fetches it)"
fi

# cpu_ticks / other_load: the other processes' share of the machine during
# each run (scripts/cpu_load.sh).
# shellcheck source=scripts/cpu_load.sh
source "$ROOT/scripts/cpu_load.sh"

# run CASE MODE THREADS REP [layerdiff run options...]: one process, profile
# and the other processes' load recorded in the manifest. A failure stops
# the benchmark with its message.
run_one() {
  local name=$1 mode=$2 threads=$3 rep=$4 model=$5 extra=$6
  shift 6
  local out=$WORK/$name.$mode.$threads.$rep.json before after
  before=$(cpu_ticks)
  # shellcheck disable=SC2086 # extra holds whole options
  if ! "$BIN" run "$model" --backends reference $extra --threads "$threads" --profile-json "$out" "$@" \
      >"$WORK/last.out" 2>&1; then
    cat "$WORK/last.out" >&2
    die "layerdiff run $model failed"
  fi
  after=$(cpu_ticks)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$mode" "$threads" "$rep" "$out" \
    "$(other_load "$before" "$after")" >>"$MANIFEST"
}

THREADS=(1)
[ "$NPROC" -gt 1 ] && THREADS+=("$NPROC")
for c in "${CASES[@]}"; do
  IFS='|' read -r name model extra <<<"$c"
  for t in "${THREADS[@]}"; do
    # On every CPU, the emulated fp16 runs too, next to the reference's warm
    # runs so that both see the same machine.
    emulated=0 what="cold and warm runs"
    if [ "$t" = "$NPROC" ]; then
      emulated=1 what="$what, emulated fp16 warm runs"
    fi
    log "bench: $name, $t thread(s): $what ..."
    run_one "$name" discard "$t" 0 "$model" "$extra" # page cache, CPU frequency
    # PaddleOCR det's runs are bracketed by the conv tile's instruction mix
    # from L1 (fma_peak --mix conv): what the core gives the kernels' loop
    # right then, which the host's other tenants move (docs/architecture.md).
    if [ "$name" = ppocr-det ]; then
      "$FMA" --threads "$t" --mix conv --trials 3 --json >>"$WORK/mix_$t.json"
    fi
    for ((r = 1; r <= REPS; r++)); do
      run_one "$name" cold "$t" "$r" "$model" "$extra"
      run_one "$name" warm "$t" "$r" "$model" "$extra" --warmup 2
      if [ $emulated = 1 ]; then
        run_one "$name" emulated "$t" "$r" "$model" "$extra" --backends emulated --fp16 \
          --warmup 2
      fi
    done
    if [ "$name" = ppocr-det ]; then
      "$FMA" --threads "$t" --mix conv --trials 3 --json >>"$WORK/mix_$t.json"
    fi
  done
  # Peak RSS with every layer dumped, against the cold runs on all CPUs.
  log "bench: $name: runs with --dump of every layer ..."
  for ((r = 1; r <= (REPS < 3 ? REPS : 3); r++)); do
    run_one "$name" dump "$NPROC" "$r" "$model" "$extra" --dump "$WORK/dump.h5" --layers all
    stat -c %s "$WORK/dump.h5" >"$WORK/$name.dump_bytes"
    rm -f "$WORK/dump.h5"
  done
done

# The transformer fixture (GEMM-bound) and PaddleOCR det with the kernel
# the environment asks for, for comparison.
if [ -n "$USER_CORE" ]; then
  for c in "${CASES[@]}"; do
    IFS='|' read -r name model extra <<<"$c"
    [ "$name" = transformer-b8 ] || [ "$name" = ppocr-det ] || continue
    log "bench: $name with LAYERDIFF_BLAS_CORETYPE=$USER_CORE ($USER_CORE_WHY) ..."
    for ((r = 1; r <= REPS; r++)); do
      out=$WORK/$name.userenv.$r.json
      # shellcheck disable=SC2086 # extra holds whole options
      if ! env LAYERDIFF_BLAS_CORETYPE="$USER_CORE" "$BIN" run "$model" --backends reference \
          $extra --warmup 2 --threads "$NPROC" --profile-json "$out" >"$WORK/last.out" 2>&1; then
        cat "$WORK/last.out" >&2
        die "layerdiff run $model with LAYERDIFF_BLAS_CORETYPE=$USER_CORE failed"
      fi
      printf '%s\tuserenv\t%s\t%s\t%s\n' "$name" "$NPROC" "$r" "$out" >>"$MANIFEST"
    done
  done
fi

# --- OpenMP wait policy --------------------------------------------------------------
# layerdiff sets GOMP_SPINCOUNT unless the user chose a policy (cli/main.c);
# GOMP_SPINCOUNT=300000 is libgomp's own default. Warm runs of the biggest
# model on every CPU, on the machine as it is and beside one more busy
# process.
if [ "$POLICY" = 1 ] && [ "$NPROC" -gt 1 ] && [ -z "${OMP_WAIT_POLICY:-}${GOMP_SPINCOUNT:-}" ]; then
  IFS='|' read -r pname pmodel pextra <<<"${CASES[${#CASES[@]} - 1]}"
  policy_runs() { # LOAD POLICY [env...]
    local load=$1 policy=$2
    shift 2
    for ((r = 1; r <= 3; r++)); do
      local out=$WORK/policy.$load.$policy.$r.json
      # shellcheck disable=SC2086
      env "$@" "$BIN" run "$pmodel" --backends reference $pextra --warmup 1 --threads "$NPROC" \
        --profile-json "$out" >/dev/null
      printf '%s\tpolicy-%s-%s\t%s\t%s\t%s\n' "$pname" "$load" "$policy" "$NPROC" "$r" "$out" \
        >>"$MANIFEST"
    done
  }
  for load in asis busy; do
    if [ "$load" = busy ]; then
      sh -c 'while :; do :; done' &
      HOG=$!
      sleep 0.2
    fi
    log "bench: $pname, OpenMP wait policy, $load machine ..."
    policy_runs "$load" layerdiff
    policy_runs "$load" spin GOMP_SPINCOUNT=300000
  done
  kill "$HOG" 2>/dev/null || true
  wait "$HOG" 2>/dev/null || true
  HOG=
fi

# --- comparator throughput (issue 5) -------------------------------------------------
# bench/compare_throughput: GB/s of float32 pairs through ld_compare_tensors on
# one thread, over memcpy of the same bytes timed in the same process (goal
# >= 0.5; median of the repetitions, at least 5).
COMPARE_TP=$BUILD/bench/compare_throughput
COMPARE_TP_JSON=
if [ -x "$COMPARE_TP" ]; then
  log "bench: comparator throughput (1 thread) ..."
  "$COMPARE_TP" --reps "$((REPS < 5 ? 5 : REPS))" --json >"$WORK/compare_throughput.json"
  COMPARE_TP_JSON=$WORK/compare_throughput.json
else
  log "bench: skipping comparator throughput: $COMPARE_TP is missing (make BUILD=$BUILD bench)"
fi

# --- live comparison: peak RSS and dump write rate (issue 5) ------------------------------
# `layerdiff run` with its defaults (reference against emulated fp16, in
# lockstep, isolation on) on the deepest fixture (fixtures/deep.onnx, 768
# nodes, batch 256) and PaddleOCR det at 640x640, 3 repetitions each: the run
# without --dump, the run with --dump of every layer (peak RSS of both from
# --profile-json; the dump's write time is the time of its tensor writes, all
# three runs), then bench/hdf5_write_loop writing the same dataset sizes in
# one plain loop. Goals: RSS with --dump <= 1.3x without; write rate >= 0.7 of
# the plain loop (bench_live.py, on CPU times). Dumps go to /dev/shm when it
# is there (BENCH_DUMP_DIR chooses another folder): on the disk, other
# processes' page-cache writeback made single measurements of either vary 5x.
# A first dump run per case, not timed, gives the dataset sizes; before each
# timed writer (the dump run and the loop) warm_pages writes and removes a
# scratch file of the dump's size plus the run's peak RSS, so that both write
# into recently used memory (scripts/warm_pages.sh: on a VM, pages the host
# has not backed cost a host fault at first write, and the loop used to get
# the pages the dump had just freed while the dump got such pages).
LOOP=$BUILD/bench/hdf5_write_loop
LIVE_MANIFEST=
if [ -x "$LOOP" ]; then
  if [ -n "${BENCH_DUMP_DIR:-}" ]; then
    DUMPDIR=$BENCH_DUMP_DIR
  elif [ -d /dev/shm ] && [ -w /dev/shm ]; then
    LIVE_SHM=$(mktemp -d /dev/shm/layerdiff-bench.XXXXXX)
    DUMPDIR=$LIVE_SHM
  else
    DUMPDIR=$WORK
  fi
  LIVE_MANIFEST=$WORK/live.tsv
  : >"$LIVE_MANIFEST"
  # shellcheck source=scripts/warm_pages.sh
  source "$ROOT/scripts/warm_pages.sh"
  LIVE_CASES=("deep|fixtures/deep.onnx|--input-shapes batch:256")
  [ -f "$DET" ] && LIVE_CASES+=("ppocr-det|$DET|--input-shapes x:1x3x640x640")
  live_run() { # OUT.json [run options...]: a comparing run; exit 1 (a mismatch) is fine
    local out=$1 rc=0
    shift
    "$BIN" run "$@" --profile-json "$out" >"$WORK/live.out" 2>&1 || rc=$?
    if [ "$rc" -gt 1 ]; then
      cat "$WORK/live.out" >&2
      die "layerdiff run $* failed"
    fi
  }
  for c in "${LIVE_CASES[@]}"; do
    IFS='|' read -r name model extra <<<"$c"
    log "bench: $name, comparing run: peak RSS and dump write rate ($DUMPDIR) ..."
    # not timed: the sizes of every dataset the runs write
    # shellcheck disable=SC2086 # extra holds whole options
    live_run "$WORK/live.$name.sizes.json" "$model" $extra --dump "$DUMPDIR/live.h5"
    "$PY" - "$DUMPDIR/live.h5" >"$WORK/live.$name.sizes" <<'EOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    for run in f["runs"].values():
        for d in run.values():
            print(d.size * d.dtype.itemsize)
EOF
    rm -f "$DUMPDIR/live.h5"
    dump_bytes=$(awk '{s += $1} END {printf "%.0f", s}' "$WORK/live.$name.sizes")
    for ((r = 1; r <= 3; r++)); do
      base=$WORK/live.$name.$r
      # shellcheck disable=SC2086
      live_run "$base.plain.json" "$model" $extra --report-json "$base.report.json"
      sync
      rss=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["peak_rss_bytes"])' \
        "$base.plain.json")
      warm=$((dump_bytes + rss))
      warm_pages "$DUMPDIR" "$warm" || die "cannot write $warm bytes into $DUMPDIR"
      # shellcheck disable=SC2086
      live_run "$base.dump.json" "$model" $extra --dump "$DUMPDIR/live.h5"
      rm -f "$DUMPDIR/live.h5"
      sync
      warm_pages "$DUMPDIR" "$warm" || die "cannot write $warm bytes into $DUMPDIR"
      "$LOOP" "$WORK/live.$name.sizes" "$DUMPDIR/loop.h5" --trials 1 >"$base.loop.json"
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$r" "$base.plain.json" "$base.dump.json" \
        "$base.loop.json" "$base.report.json" >>"$LIVE_MANIFEST"
    done
  done
  [ -n "$LIVE_SHM" ] && rm -rf "$LIVE_SHM"
  LIVE_SHM=
else
  log "bench: skipping the live comparison: $LOOP is missing (make BUILD=$BUILD bench)"
fi

# --- bisect (issue 7) ------------------------------------------------------------------
# `layerdiff bisect -q -o DIR` on the transformer fixture (batch 8) and PaddleOCR
# det at 640x640, with tolerances tight enough that fp16 fails and the search
# has work to do. bisect times one plain emulated run in its own process (the
# unit) and writes trials/s, trial and total time as multiples of it into
# bisect.json (scripts/bench_bisect.py prints them). Exit 1 (no set) is a result.
BISECT_MANIFEST=$WORK/bisect.tsv
: >"$BISECT_MANIFEST"
BISECT_CASES=("transformer-b8|fixtures/transformer.onnx|--input-shapes batch:8 --atol 1e-3 --rtol 1e-3")
[ -f "$DET" ] && BISECT_CASES+=("ppocr-det|$DET|--input-shapes x:1x3x640x640 --atol 1e-6 --rtol 1e-3")
for c in "${BISECT_CASES[@]}"; do
  IFS='|' read -r name model extra <<<"$c"
  log "bench: $name, bisect ..."
  rc=0
  # shellcheck disable=SC2086 # extra holds whole options
  "$BIN" bisect "$model" $extra -q -o "$WORK/bisect.$name" >"$WORK/bisect.$name.out" 2>&1 || rc=$?
  [ "$rc" -le 1 ] || { cat "$WORK/bisect.$name.out" >&2; die "layerdiff bisect $model failed"; }
  printf '%s\t%s\t%s\n' "$name" "$WORK/bisect.$name/bisect.json" "$rc" >>"$BISECT_MANIFEST"
done

# --- report ---------------------------------------------------------------------------
# The peak again: other processes only ever lower it, so the report takes the
# best trial of both measurements.
log "bench: fp32 FMA peak again ..."
"$FMA" --threads 1 --trials "$REPS" --json >>"$WORK/fma_1.json"
"$FMA" --threads "$NPROC" --trials "$REPS" --json >>"$WORK/fma_all.json"
"$PY" scripts/bench_report.py --manifest "$MANIFEST" --fma1 "$WORK/fma_1.json" \
  --fma-all "$WORK/fma_all.json" --work "$WORK" --nproc "$NPROC" \
  --mix1 "$WORK/mix_1.json" --mix-all "$WORK/mix_$NPROC.json" \
  --user-blas-env "${USER_CORE:+LAYERDIFF_BLAS_CORETYPE=$USER_CORE ($USER_CORE_WHY)}" \
  --compare-throughput "$COMPARE_TP_JSON" \
  --live-compare "$LIVE_MANIFEST" \
  --bisect "$BISECT_MANIFEST" \
  --out "$BUILD/bench.json"
