#!/usr/bin/env bash
# `layerdiff inspect --json` on every model of Debian's libonnx-testdata: the
# loader must accept a model (exit 0, valid JSON) or reject it with one clear
# line (exit 2) — never crash, trip a sanitizer or report an internal error.
source "$(dirname "$0")/lib.sh"
DATA=/usr/share/libonnx-testdata/data

for suite in node pytorch-converted pytorch-operator simple real; do
  case_begin "testdata $suite"
  if [ ! -d "$DATA/$suite" ]; then
    skip_case "$DATA/$suite not installed (apt-get install libonnx-testdata)"
    continue
  fi
  mapfile -t models < <(find "$DATA/$suite" -name model.onnx | sort)
  if [ ${#models[@]} -eq 0 ]; then
    skip_case "no model.onnx under $DATA/$suite"
    continue
  fi
  ok=0 rejected=0 bad=0
  out=$WORK/$suite
  mkdir -p "$out"
  : >"$out/accepted.list"
  : >"$out/rejections"
  i=0
  for model in "${models[@]}"; do
    i=$((i + 1))
    "$LAYERDIFF" inspect --json "$model" >"$out/$i.json" 2>"$out/$i.err"
    rc=$?
    case $rc in
      0) ok=$((ok + 1)); printf '%s\t%s\n' "$out/$i.json" "$model" >>"$out/accepted.list" ;;
      2)
        rejected=$((rejected + 1))
        if [ "$(wc -l <"$out/$i.err")" -ne 1 ]; then
          bad=$((bad + 1)); echo "  rejection of $model is not one line:"; head -5 "$out/$i.err"
        fi
        sed -n 1p "$out/$i.err" >>"$out/rejections" ;;
      *) bad=$((bad + 1)); echo "  exit $rc on $model:"; head -5 "$out/$i.err" ;;
    esac
    # A sanitizer report fails the case whatever the exit code.
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$out/$i.err"; then
      bad=$((bad + 1)); echo "  sanitizer report on $model:"; head -20 "$out/$i.err"
    fi
  done
  # Every accepted model printed valid JSON describing a model (one python run for all).
  "$PY" - "$out/accepted.list" >"$out/json.check" 2>&1 <<'PYEOF'
import json, sys
bad = 0
for line in open(sys.argv[1]):
    out, model = line.rstrip("\n").split("\t")
    try:
        d = json.load(open(out))
        assert d["kind"] == "model" and d["path"] == model, "kind/path"
        assert isinstance(d["inputs"], list) and isinstance(d["op_counts"], dict), "fields"
        assert d["node_count"] == sum(d["op_counts"].values()), "op_counts sum"
    except Exception as e:  # report every bad file, then fail
        bad += 1
        print("  bad JSON for %s: %s" % (model, e))
sys.exit(1 if bad else 0)
PYEOF
  json_rc=$?
  cat "$out/json.check"
  echo "  $suite: ${#models[@]} models, $ok accepted, $rejected rejected, $bad failures"
  if [ "$rejected" -gt 0 ]; then
    echo "  most common rejections:"
    sed -E 's/^layerdiff: error: [^:]*: //' "$out/rejections" | sort | uniq -c | sort -rn | head -5 | sed 's/^/   /'
  fi
  expect_true "no crash, sanitizer report or exit other than 0/2 ($bad)" test "$bad" -eq 0
  expect_true "every accepted model printed valid JSON" test "$json_rc" -eq 0
done

finish
