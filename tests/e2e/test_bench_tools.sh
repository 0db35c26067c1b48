#!/usr/bin/env bash
# The benchmark's own tools (make bench): bench/fma_peak's FMA loop and its
# conv-tile mix (--mix conv), their JSON lines, bad options; and
# bench_report.py's conv_mix section, which relates PaddleOCR det's conv
# rate to the mix measured beside it.
source "$(dirname "$0")/lib.sh"
BUILD_DIR=${LAYERDIFF_BUILD:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
FMA=$BUILD_DIR/bench/fma_peak
cd "$WORK" || exit 1

case_begin "fma_peak --json: the FMA loop's rate"
run "$FMA" --threads 1 --seconds 0.02 --trials 2 --json
expect_exit 0
expect_true "JSON line of the FMA loop" "$PY" -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d["mix"] == "fma" and d["threads"] == 1 and d["trials"] == 2, d
assert 0 < d["median_gflops"] <= d["best_gflops"], d' "$STDOUT"

case_begin "fma_peak --mix conv: the conv tile's loop from L1, 1 and 2 threads"
run "$FMA" --threads 1 --seconds 0.02 --trials 3 --mix conv --json
expect_exit 0
expect_true "JSON line of the conv mix" "$PY" -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
flags = [l for l in open("/proc/cpuinfo") if l.startswith("flags")][0].split()
vector = ("avx512f" in flags) or ("avx2" in flags and "fma" in flags)
want = "conv tile 4x3" if vector else "no conv tile mix"
assert d["mix"] == "conv" and want in d["unit"] and d["trials"] == 3, d
assert 0 < d["median_gflops"] <= d["best_gflops"], d' "$STDOUT"
run "$FMA" --threads 2 --seconds 0.02 --trials 1 --mix conv
expect_exit 0
expect_stdout_contains "fp32 conv-tile mix, "
expect_stdout_contains ", 2 threads: median "

case_begin "fma_peak: bad options are usage errors"
for bad in "--mix" "--mix gemm" "--threads 0" "--trials 0" "--seconds 0" "--bogus"; do
  # shellcheck disable=SC2086 # each entry is whole options
  run "$FMA" $bad
  expect_exit 2
  expect_stderr_contains "usage: fma_peak"
done

case_begin "bench_report.conv_mix: det's warm conv rate against the mix beside it"
expect_true "conv_mix relates the rates" "$PY" - "$ROOT/scripts" <<'PYEOF'
import json, os, sys, types, io, contextlib
sys.path.insert(0, sys.argv[1])
import bench_report as br
with open("mix1.json", "w") as f:
    f.write(json.dumps({"mix": "conv", "median_gflops": 60.0, "best_gflops": 70}) + "\n")
    f.write(json.dumps({"mix": "conv", "median_gflops": 80.0, "best_gflops": 90}) + "\n")
a = types.SimpleNamespace(mix1="mix1.json", mix_all="absent.json", nproc=2)
summ = {(br.GOAL_MODEL, "warm", 1): {"conv_gflops": 35.0}}
out = io.StringIO()
with contextlib.redirect_stdout(out):
    mix = br.conv_mix(a, {1: 100.0, 2: 200.0}, summ)
assert list(mix) == ["1"], mix
m = mix["1"]
assert m["gflops"] == 70.0 and m["medians"] == [60.0, 80.0], m
assert abs(m["of_fma_peak"] - 0.7) < 1e-12 and abs(m["det_warm_share"] - 0.5) < 1e-12, m
assert "1t 70.0 GFLOP/s = 0.70 of the FMA peak, det warm conv at 0.50 of it" in out.getvalue()
# nothing measured: nothing printed, an empty section
a = types.SimpleNamespace(mix1="", mix_all="", nproc=2)
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert br.conv_mix(a, {1: 100.0}, {}) == {}
assert out.getvalue() == ""
PYEOF

finish
