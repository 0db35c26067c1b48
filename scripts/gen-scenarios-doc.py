#!/usr/bin/python3
"""Builds docs/scenarios.md from docs/src/scenarios.md.in by running each @@RUN cmd@@ from the
repository root (layerdiff = $LD_BIN) in a scratch dir for output files."""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("LD_BIN", ROOT + "/build/layerdiff")
SCRATCH = os.environ.get("SCRATCH", "/tmp/layerdiff-scenarios-doc")
os.makedirs(SCRATCH, exist_ok=True)


def run(cmd):
    env = dict(os.environ)
    env.pop("NVIDIA_TF32_OVERRIDE", None)
    shell = cmd.replace("layerdiff ", BIN + " ", 1)
    # outputs (json, h5) go to the scratch dir; models are given relative to the root
    shell = re.sub(r"(--report-json|--dump) (\S+)", lambda m: "%s %s/%s" % (m.group(1), SCRATCH, m.group(2)), shell)
    # stdout then stderr: the order a terminal shows them in (stdout is line-buffered there)
    p = subprocess.run(["bash", "-c", shell], cwd=ROOT, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = (p.stdout + p.stderr).replace(SCRATCH + "/", "")
    return "```\n$ %s\n%s%s(exit %d)\n```" % (cmd, out, "" if out.endswith("\n") or not out else "\n", p.returncode)


def clip_fix():
    a = json.load(open(SCRATCH + "/clip.json"))
    b = json.load(open(SCRATCH + "/clipfix.json"))
    oa = next(r for r in a["records"] if r["is_graph_output"])
    ob = next(r for r in b["records"] if r["is_graph_output"])
    return "\n".join(["```", "$ # the graph output in clip.json and clipfix.json",
                      "normalized L2 error: --fp16 %.3g, Pow and ReduceMean_1 in fp32 %.3g"
                      % (float(oa["metrics"]["l2_rel"]), float(ob["metrics"]["l2_rel"])),
                      "overflows counted by the engine: %d and %d"
                      % (a["summary"]["engine_counters"]["overflows"],
                         b["summary"]["engine_counters"]["overflows"]), "```"])


def ln_ratio():
    a = json.load(open(SCRATCH + "/ln16.json"))
    b = json.load(open(SCRATCH + "/ln32.json"))
    oa = next(r for r in a["records"] if r["is_graph_output"])
    ob = next(r for r in b["records"] if r["is_graph_output"])
    lines = ["```", "$ # the graph output's error in the two reports"]
    for stat in ("mean", "max"):
        e16, e32 = float(oa["metrics"]["abs"][stat]), float(ob["metrics"]["abs"][stat])
        lines.append("%-4s abs error: LayerNormalization fp16 %.3g, fp32 %.3g: %.0fx lower"
                     % (stat, e16, e32, e16 / e32))
    lines.append("```")
    return "\n".join(lines)


def main():
    text = open(ROOT + "/docs/src/scenarios.md.in").read()
    v = subprocess.run(["/usr/bin/python3", "scripts/gen-scenarios.py", "--verify", SCRATCH + "/fx"],
                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    text = text.replace("@@VERIFY@@", "```\n$ /usr/bin/python3 scripts/gen-scenarios.py --verify /tmp/fx\n"
                        + v.stdout + "```")
    out = []
    for part in re.split(r"(@@[A-Z]+ ?[^@]*@@)", text):
        m = re.match(r"@@RUN (.*)@@$", part)
        if m:
            out.append(run(m.group(1)))
        elif part == "@@PY clip_fix@@":
            out.append(clip_fix())
        elif part == "@@PY ln_ratio@@":
            out.append(ln_ratio())
        elif part == "@@CLIP@@":
            out.append(clip_part())
        else:
            out.append(part)
    open(ROOT + "/docs/scenarios.md", "w").write("".join(out))


def clip_part():
    d = json.load(open(SCRATCH + "/cc.json"))
    recs = d["records"]
    clip = next(r for r in recs if r["op_type"] == "Clip")
    conv = next(r for r in recs if r["op_type"] == "Conv")
    lines = ["```", "$ # from cc.json"]
    lines.append("Conv: rel error median %.3g (2^-11 = %.3g), cosine %.9f, %d of %d elements fail"
                 % (float(conv["metrics"]["rel"]["median"]), 2.0 ** -11,
                    float(conv["metrics"]["cosine"]), conv["metrics"]["n_fail"], conv["metrics"]["n"]))
    if "clip_crossings" in clip:
        lines.append("Clip: clip_crossings %s" % clip["clip_crossings"])
    lines.append("```")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
