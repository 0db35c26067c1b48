#!/usr/bin/env bash
# The benchmark's own tools (make bench): bench/fma_peak's FMA loop and its
# conv-tile mix (--mix conv), their JSON lines, bad options; and
# bench_report.py's conv_mix section, which relates PaddleOCR det's conv
# rate to the mix measured beside it; the other processes' load during each
# benchmark process (scripts/cpu_load.sh) and the report's warning about it;
# the live comparison's yardstick bench/hdf5_write_loop, the page warming
# before each timed writer (scripts/warm_pages.sh) and bench_live.py's write
# ratio on CPU times.
source "$(dirname "$0")/lib.sh"
BUILD_DIR=${LAYERDIFF_BUILD:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$ROOT/$BUILD_DIR ;; esac
FMA=$BUILD_DIR/bench/fma_peak
LOOP=$BUILD_DIR/bench/hdf5_write_loop
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

case_begin "hdf5_write_loop: the loop's wall and CPU time for the given sizes"
printf '%s\n' 1000 0 65536 3 >sizes.txt
run "$LOOP" sizes.txt loop.h5 --trials 2
expect_exit 0
expect_no_file loop.h5
expect_true "JSON line with the loop's CPU time" "$PY" -c '
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d["bytes"] == 66539 and d["datasets"] == 4 and d["trials"] == 2, d
assert d["loop_seconds"] > 0 and d["loop_cpu_seconds"] > 0, d
assert d["loop_cpu_seconds"] <= d["loop_seconds"] + 1e-3, d  # one thread' "$STDOUT"
run "$LOOP" sizes.txt
expect_exit 2
expect_stderr_contains "usage: hdf5_write_loop"

case_begin "warm_pages.sh: writes the bytes asked for into the folder, leaves no file"
mkdir -p warm
# shellcheck disable=SC2016 # the script expands in the child shell
expect_true "warm_pages writes whole MiB and removes its file" bash -c '
source "$1/scripts/warm_pages.sh"
trap "" XFSZ # past ulimit -f the write fails (EFBIG) instead of killing dd
warm_pages warm 3145729 || { echo "3 MiB + 1 failed"; exit 1; }
[ -z "$(ls -A warm)" ] || { echo "left: $(ls -A warm)"; exit 1; }
# 2048 KiB of file size allowed: 2 MiB fits, 2 MiB + 1 byte (3 MiB written) does not,
# so the bytes are really written; a failed write leaves nothing either
(ulimit -f 2048; warm_pages warm 2097152) || { echo "2 MiB under a 2 MiB limit failed"; exit 1; }
(ulimit -f 2048; warm_pages warm 2097153) && { echo "2 MiB + 1 under a 2 MiB limit passed"; exit 1; }
[ -z "$(ls -A warm)" ] || { echo "left after a failure: $(ls -A warm)"; exit 1; }
! warm_pages missing-folder 10 2>/dev/null || { echo "a missing folder passed"; exit 1; }
' _ "$ROOT"

case_begin "bench_live: the write ratio on CPU times, wall times beside it"
expect_true "CPU ratio when both sides have CPU times, else wall" "$PY" - "$ROOT/scripts" <<'PYEOF'
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])
import bench_live as bl
def dump(wall, cpu):
    b = [{"name": "reference", "run_seconds": 1.0, "dump_seconds": wall / 2},
         {"name": "emulated", "run_seconds": 2.0, "dump_seconds": wall / 2}]
    if cpu is not None:
        b[0]["dump_cpu_seconds"], b[1]["dump_cpu_seconds"] = cpu / 4, 3 * cpu / 4
    return {"peak_rss_bytes": 200 << 20, "backends": b}
def write(name, doc):
    with open(name, "w") as f:
        json.dump(doc, f)
    return name
plain = write("plain.json", {"peak_rss_bytes": 100 << 20,
                             "backends": [{"name": "reference", "run_seconds": 1.0}]})
rows = []
# the first: wall 2.0 s against a loop of 0.5 s (0.25), CPU 0.8 s against 0.6 s (0.75)
for r, (dw, dc, lw, lc) in enumerate([(2.0, 0.8, 0.5, 0.6), (1.0, 0.5, 0.5, 0.5),
                                      (4.0, 1.0, 0.5, 0.65)]):
    d = write("dump%d.json" % r, dump(dw, dc))
    l = write("loop%d.json" % r, {"bytes": 1 << 30, "datasets": 9, "loop_seconds": lw,
                                  "loop_cpu_seconds": lc})
    rows.append("ppocr-det\t%d\t%s\t%s\t%s\n" % (r, plain, d, l))
open("live.tsv", "w").writelines(rows)
out = io.StringIO()
with contextlib.redirect_stdout(out):
    figs, goals = bl.report("live.tsv")
f = figs["ppocr-det"]
near = lambda a, b: abs(a - b) < 1e-9
assert f["write_on_cpu"] and f["write_ratios"] == [0.75, 1.0, 0.65], f
assert near(f["write_ratio"], 0.75) and near(f["wall_write_ratio"], 0.25), f
assert near(f["dump_write_cpu_seconds"], 0.8) and f["plain_loop_cpu_seconds"] == 0.6, f
assert goals[0]["met"] and "ppocr-det 0.75 (" in goals[0]["detail"], goals[0]
assert "loop 0.600 s CPU; wall 0.25)" in goals[0]["detail"], goals[0]["detail"]
assert "CPU time of the writing thread" in out.getvalue(), out.getvalue()
# an older run without dump_cpu_seconds: the wall ratio, and the goal judged on it
write("dump1.json", dump(1.0, None))
with contextlib.redirect_stdout(io.StringIO()) as out:
    figs, goals = bl.report("live.tsv")
f = figs["ppocr-det"]
assert not f["write_on_cpu"] and f["write_ratios"] == [0.75, 0.5, 0.65], f
assert near(f["write_ratio"], 0.65) and not goals[0]["met"], (f, goals[0])
assert "wall time (a side without CPU times)" in out.getvalue(), out.getvalue()
PYEOF

finish
