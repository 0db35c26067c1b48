"""The bisect section of `make bench` (issue 7), imported by bench_report.py.

bench.sh runs `layerdiff bisect ... -q -o DIR` once per case and lists
"name<TAB>DIR/bisect.json<TAB>exit code" lines in a manifest. bisect measures
one plain run of the emulated engine in the same process (the unit), so the
figures are ratios within one run of one process: trials per second, the
average trial and the whole search (baseline, trials, final check) as
multiples of one full emulated run. Informational: the issue sets no goal.
"""

import json


def _load(path):
    with open(path) as f:
        return json.load(f)


def _num(x):
    return x if isinstance(x, (int, float)) else float("nan")


def report(manifest):
    """Prints the table; returns the figures for bench.json (None when not run)."""
    if not manifest:
        return None
    rows, figures = [], []
    with open(manifest) as f:
        for line in f:
            name, path, code = line.rstrip("\n").split("\t")
            try:
                r = _load(path)
            except (OSError, ValueError):
                print(f"  bisect {name}: no bisect.json (exit {code})")
                continue
            t = r["timing"]
            full = _num(t["full_run_seconds"])
            trials = t["trials"]
            per_trial = t["trial_seconds"] / trials if trials else float("nan")
            fig = {
                "case": name,
                "exit": int(code),
                "nodes": r["nodes"],
                "candidates": r["candidates"],
                "layers_found": len(r["layers"]),
                "found": r["found"],
                "trials": trials,
                "answered_from_memory": t["answered_from_memory"],
                "trials_per_second": _num(t["trials_per_second"]),
                "full_run_ms": full * 1e3,
                "trial_ms": per_trial * 1e3,
                "trial_in_full_runs": _num(t["trial_in_full_runs"]),
                "baseline_in_full_runs": t["baseline_seconds"] / full if full else float("nan"),
                "total_s": t["total_seconds"],
                "total_in_full_runs": _num(t["total_in_full_runs"]),
                "nodes_per_trial": t["nodes_run"] / trials if trials else float("nan"),
                "cache_peak_mib": r["cache"]["peak_bytes"] / 2**20,
            }
            figures.append(fig)
            rows.append(fig)
    if not rows:
        return figures
    print("\nBisect (layerdiff bisect -o DIR; unit: one full emulated run in the same process)")
    head = ("case", "layers", "trials", "trials/s", "trial", "x run", "nodes/trial", "baseline",
            "total", "x run", "cache")
    print("  " + "  ".join(f"{h:>11}" for h in head))
    for x in rows:
        cells = (x["case"], f"{x['layers_found']}/{x['candidates']}", str(x["trials"]),
                 f"{x['trials_per_second']:.2f}", f"{x['trial_ms']:.1f} ms",
                 f"{x['trial_in_full_runs']:.2f}x", f"{x['nodes_per_trial']:.0f}/{x['nodes']}",
                 f"{x['baseline_in_full_runs']:.1f}x", f"{x['total_s']:.2f} s",
                 f"{x['total_in_full_runs']:.1f}x", f"{x['cache_peak_mib']:.0f} MiB")
        print("  " + "  ".join(f"{c:>11}" for c in cells))
    return figures
