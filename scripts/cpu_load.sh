# shellcheck shell=bash
# layerdiff bench helpers (sourced by scripts/bench.sh and its test): how
# much of the machine other processes used while a benchmark process ran.
# Our own build, tests or a second session on a 2-CPU VM take a CPU and
# memory bandwidth from the run (session 11: PaddleOCR det's conv share on
# 2 threads 0.65-0.68 on an idle VM, 0.34-0.38 beside one unit test); the
# host's other tenants do not show in these counters (docs/architecture.md,
# "Profiling and make bench").

# CPU time so far, in clock ticks: "busy total children". busy and total
# from /proc/stat (all CPUs; idle and iowait are not busy), children the CPU
# time of the calling shell's waited-for children (/proc/$$/stat, fields 16
# and 17: the field after the command name's ")" is field 3).
cpu_ticks() {
  local busy total children
  read -r busy total < <(awk '/^cpu /{t=0; for (i=2;i<=NF;i++) t+=$i; print t-$5-$6, t; exit}' /proc/stat)
  children=$(sed 's/.*) //' "/proc/$$/stat" | awk '{print $14 + $15}')
  echo "$busy $total $children"
}

# The other processes' share of the machine's CPU time between two
# cpu_ticks lines: (busy - ours) / total, 0 when none, three decimals.
other_load() { # BEFORE AFTER
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
    t = y[2] - x[2]; o = (y[1] - x[1]) - (y[3] - x[3]);
    printf "%.3f", (t > 0 && o > 0) ? o / t : 0 }'
}
