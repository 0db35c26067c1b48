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
#   - libgomp's default busy waiting against layerdiff's GOMP_SPINCOUNT,
#     on the machine as it is and beside one more busy process
#     (docs/architecture.md).
# Prints tables and the issue's goals as met / not met, and writes
# DIR/bench.json. --quick: 3 repetitions and no wait-policy section.
#
# BLAS kernel: a preset OPENBLAS_CORETYPE / BLIS_ARCH_TYPE (some sites set
# Haswell) is what `layerdiff run` respects, but it caps GEMM at the AVX2
# kernel; the benchmark measures layerdiff's own choice and, when such a
# variable is set, PaddleOCR det once more with it (BENCH_KEEP_ENV=1 keeps
# the environment for every run instead).
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
cleanup() {
  [ -n "$HOG" ] && kill "$HOG" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
MANIFEST=$WORK/manifest.tsv # case, mode, threads, rep, profile JSON, note
: >"$MANIFEST"

# The user's BLAS kernel choice, kept aside (see the header).
USER_BLAS_ENV=()
for var in OPENBLAS_CORETYPE BLIS_ARCH_TYPE; do
  if [ -n "${!var+x}" ] && [ "${BENCH_KEEP_ENV:-0}" != 1 ]; then
    USER_BLAS_ENV+=("$var=${!var}")
    unset "$var"
  fi
done

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

# run CASE MODE THREADS REP [layerdiff run options...]: one process, profile
# recorded in the manifest. A failure stops the benchmark with its message.
run_one() {
  local name=$1 mode=$2 threads=$3 rep=$4 model=$5 extra=$6
  shift 6
  local out=$WORK/$name.$mode.$threads.$rep.json
  # shellcheck disable=SC2086 # extra holds whole options
  if ! "$BIN" run "$model" $extra --threads "$threads" --profile-json "$out" "$@" \
      >"$WORK/last.out" 2>&1; then
    cat "$WORK/last.out" >&2
    die "layerdiff run $model failed"
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$mode" "$threads" "$rep" "$out" >>"$MANIFEST"
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
    for ((r = 1; r <= REPS; r++)); do
      run_one "$name" cold "$t" "$r" "$model" "$extra"
      run_one "$name" warm "$t" "$r" "$model" "$extra" --warmup 2
      if [ $emulated = 1 ]; then
        run_one "$name" emulated "$t" "$r" "$model" "$extra" --backends emulated --fp16 \
          --warmup 2
      fi
    done
  done
  # Peak RSS with every layer dumped, against the cold runs on all CPUs.
  log "bench: $name: runs with --dump of every layer ..."
  for ((r = 1; r <= (REPS < 3 ? REPS : 3); r++)); do
    run_one "$name" dump "$NPROC" "$r" "$model" "$extra" --dump "$WORK/dump.h5" --layers all
    stat -c %s "$WORK/dump.h5" >"$WORK/$name.dump_bytes"
    rm -f "$WORK/dump.h5"
  done
done

# PaddleOCR det with the user's BLAS kernel preset, for comparison.
if [ "${#USER_BLAS_ENV[@]}" -gt 0 ] && [ -f "$DET" ]; then
  log "bench: ppocr-det with ${USER_BLAS_ENV[*]} from the environment ..."
  for ((r = 1; r <= REPS; r++)); do
    env "${USER_BLAS_ENV[@]}" "$BIN" run "$DET" --input-shapes x:1x3x640x640 --warmup 2 \
      --threads "$NPROC" --profile-json "$WORK/det_userenv.$r.json" >/dev/null
    printf 'ppocr-det\tuserenv\t%s\t%s\t%s\n' "$NPROC" "$r" "$WORK/det_userenv.$r.json" \
      >>"$MANIFEST"
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
      env "$@" "$BIN" run "$pmodel" $pextra --warmup 1 --threads "$NPROC" \
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

# --- report ---------------------------------------------------------------------------
# The peak again: other processes only ever lower it, so the report takes the
# best trial of both measurements.
log "bench: fp32 FMA peak again ..."
"$FMA" --threads 1 --trials "$REPS" --json >>"$WORK/fma_1.json"
"$FMA" --threads "$NPROC" --trials "$REPS" --json >>"$WORK/fma_all.json"
"$PY" scripts/bench_report.py --manifest "$MANIFEST" --fma1 "$WORK/fma_1.json" \
  --fma-all "$WORK/fma_all.json" --work "$WORK" --nproc "$NPROC" \
  --user-blas-env "${USER_BLAS_ENV[*]:-}" --out "$BUILD/bench.json"
