#!/usr/bin/env bash
# The benchmark's own tools (make bench): bench/fma_peak's FMA loop and its
# conv-tile mix (--mix conv), their JSON lines, bad options; and
# bench_report.py's conv_mix section, which relates PaddleOCR det's conv
# rate to the mix measured beside it; the other processes' load during each
# benchmark process (scripts/cpu_load.sh) and the report's warning about it.
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


case_begin "cpu_load.sh: the other processes' share of the machine during a run"
# shellcheck disable=SC2016 # the scripts expand in the child shell
expect_true "other_load from tick counts" bash -c '
source "$1/scripts/cpu_load.sh"
check() { [ "$(other_load "$1" "$2")" = "$3" ] || { echo "other_load $1 / $2: $(other_load "$1" "$2"), want $3"; exit 1; }; }
check "100 1000 10" "300 1400 110" 0.250   # 200 busy, 100 ours, 400 in all
check "100 1000 10" "300 1400 210" 0.000   # all ours
check "100 1000 10" "300 1400 260" 0.000   # ours counted more (rounding): not negative
check "100 1000 10" "100 1000 10" 0.000    # no time passed
' _ "$ROOT"
# shellcheck disable=SC2016
expect_true "cpu_ticks counts a waited-for child's CPU time as ours" bash -c '
source "$1/scripts/cpu_load.sh"
b=$(cpu_ticks)
read -r b1 b2 b3 <<<"$b"
[[ $b1 =~ ^[0-9]+$ && $b2 =~ ^[0-9]+$ && $b3 =~ ^[0-9]+$ ]] || { echo "bad ticks: $b"; exit 1; }
timeout 0.5 sh -c "while :; do :; done"
read -r a1 a2 a3 <<<"$(cpu_ticks)"
[ $((a3 - b3)) -ge 10 ] || { echo "children ticks $b3 -> $a3"; exit 1; }
[ $((a2 - b2)) -ge $((a3 - b3)) ] || { echo "total $b2 -> $a2 below ours"; exit 1; }
' _ "$ROOT"

case_begin "bench_report.machine_load: det's runs that shared the machine"
expect_true "machine_load warns and gives the quiet runs' share" "$PY" - "$ROOT/scripts" <<'PYEOF'
import io, contextlib, sys
sys.path.insert(0, sys.argv[1])
import bench_report as br
runs = [{"conv_gflops": g} for g in (60.0, 30.0, 70.0, 40.0, 65.0)]
s = {"other_load": [0.0, 0.5, 0.01, 0.3, None], "_runs": runs, "_peak": 100.0}
summ = {(br.GOAL_MODEL, "warm", 2): s, (br.GOAL_MODEL, "dump", 2): dict(s),
        ("cnn-b1", "warm", 1): dict(s)}
out = io.StringIO()
with contextlib.redirect_stdout(out):
    load = br.machine_load(summ)
assert list(load) == ["warm 2t"], load
e = load["warm 2t"]
assert e["loads"] == [0.0, 0.5, 0.01, 0.3] and e["max"] == 0.5 and e["quiet_runs"] == 2, e
assert e["quiet_conv_gflops"] == 65.0 and abs(e["quiet_peak_share"] - 0.65) < 1e-12, e
text = out.getvalue()
assert text.startswith("warning: other processes used more than 5% of the machine"), text
assert "warm 2t: 2 of 4 runs (up to 50%; quiet runs' median conv share 0.65)" in text, text
# every run quiet: no warning
s = {"other_load": [0.0, 0.02], "_runs": runs[:2], "_peak": 100.0}
out = io.StringIO()
with contextlib.redirect_stdout(out):
    load = br.machine_load({(br.GOAL_MODEL, "cold", 1): s})
assert out.getvalue() == "" and load["cold 1t"]["max"] == 0.02, (out.getvalue(), load)
# an old manifest without the column: nothing
assert br.machine_load({(br.GOAL_MODEL, "cold", 1): {"other_load": [None], "_runs": runs[:1], "_peak": 1.0}}) == {}
PYEOF

finish
