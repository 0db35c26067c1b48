#!/usr/bin/env bash
# `layerdiff report` and `layerdiff report trend` (issue 6): HTML, Markdown and
# JUnit rendered from real reports of `layerdiff run`, checked by parsing them
# (tests/e2e/check_report.py: xml.etree, html.parser); names built to break
# out of each format; the trend's exit codes on reports where the regression
# is known by construction; a headless Chromium screenshot of the page, which
# must not be blank (skipped when chromium is not installed).
source "$(dirname "$0")/lib.sh"

CHECK="$PY $ROOT/tests/e2e/check_report.py"
OVERFLOW=$ROOT/fixtures/overflow.onnx
CNN=$ROOT/fixtures/cnn.onnx

# overflow.onnx under fp16: 4 of 7 tensors fail, first divergent
# /block1/fc_big_output_0 (fixtures/README.md).
case_begin "run writes the JSON report the renderers read"
run "$LAYERDIFF" run "$OVERFLOW" --report-json "$WORK/ovf.json"
expect_exit 1
expect_file_exists "$WORK/ovf.json"
expect_true "has a created timestamp" \
  $PY -c "import json,sys,re; c=json.load(open(sys.argv[1]))['created']; sys.exit(not re.match(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$', c))" "$WORK/ovf.json"

case_begin "report renders HTML, Markdown and JUnit"
run "$LAYERDIFF" report "$WORK/ovf.json" --html "$WORK/ovf.html" --markdown "$WORK/ovf.md" \
  --junit "$WORK/ovf.xml"
expect_exit 0
expect_true "stdout and stderr empty" test ! -s "$STDOUT" -a ! -s "$STDERR"
expect_file_exists "$WORK/ovf.html"
expect_file_exists "$WORK/ovf.md"
expect_file_exists "$WORK/ovf.xml"
expect_true "no temporary file left" sh -c "! ls '$WORK' | grep -q tmp-"

case_begin "HTML: charts, one row per tensor, no network"
run $CHECK html "$WORK/ovf.html" "$WORK/ovf.json"
expect_exit 0
expect_true "first divergent named" grep -q 'First divergent layer: <a href="#r4">#4</a>' "$WORK/ovf.html"
expect_true "overflow highlighted" grep -q 'class="band-ovf"' "$WORK/ovf.html"
expect_true "tolerance line" grep -q 'class="thr"' "$WORK/ovf.html"

case_begin "JUnit: one case per graph output, failures with metrics"
run $CHECK junit "$WORK/ovf.xml" "$WORK/ovf.json"
expect_exit 0
expect_true "the output y fails" grep -q '<testcase name="y" classname="layerdiff.overflow.outputs"' "$WORK/ovf.xml"

case_begin "JUnit --junit-layers: one case per tensor"
run "$LAYERDIFF" report "$WORK/ovf.json" --junit "$WORK/layers.xml" --junit-layers
expect_exit 0
run $CHECK junit "$WORK/layers.xml" "$WORK/ovf.json" --layers
expect_exit 0

case_begin "Markdown: verdict, first divergent, worst layers, overflow counts"
expect_true "verdict" grep -q '^## layerdiff: \*\*FAIL\*\* — `overflow.onnx`' "$WORK/ovf.md"
expect_true "first divergent" grep -q '^\*\*First divergent layer:\*\* #4 `/block1/fc_big_output_0`' "$WORK/ovf.md"
expect_true "worst layers" grep -q '^### 6 worst layers' "$WORK/ovf.md"
expect_true "overflow counts" grep -q '^- engine counters: 16 overflows' "$WORK/ovf.md"

case_begin "run renders directly (--html/--markdown/--junit)"
run "$LAYERDIFF" run "$OVERFLOW" --html "$WORK/direct.html" --junit "$WORK/direct.xml" \
  --markdown "$WORK/direct.md" --report-json "$WORK/direct.json"
if grep -q -- '--html' <("$LAYERDIFF" run --help); then
  expect_exit 1
  expect_file_exists "$WORK/direct.html"
  run $CHECK junit "$WORK/direct.xml" "$WORK/direct.json"
  expect_exit 0
  expect_true "same Markdown as re-rendered" cmp -s "$WORK/direct.md" "$WORK/ovf.md"
else
  skip_case "run has no --html yet"
fi

case_begin "hostile names are escaped in every format"
$PY "$ROOT/tests/e2e/check_report.py" hostile "$WORK/ovf.json" "$WORK/hostile.json"
run "$LAYERDIFF" report "$WORK/hostile.json" --html "$WORK/h.html" --markdown "$WORK/h.md" \
  --junit "$WORK/h.xml" --junit-layers
expect_exit 0
run $CHECK html "$WORK/h.html" "$WORK/hostile.json"
expect_exit 0
run $CHECK junit "$WORK/h.xml" "$WORK/hostile.json" --layers
expect_exit 0
expect_true "no injected tag in HTML" sh -c "! grep -q '<img src=x' '$WORK/h.html'"
expect_true "escaped in HTML" grep -q '&lt;img src=x onerror=alert(1)&gt;0' "$WORK/h.html"
expect_true "no raw control byte" sh -c "! grep -q \"\$(printf '\\033')\" '$WORK/h.html' '$WORK/h.xml' '$WORK/h.md'"
expect_true "Markdown pipe escaped in a code span" grep -q '`pipe\\|name`tick`' "$WORK/h.md"

case_begin "stdout output"
run "$LAYERDIFF" report "$WORK/ovf.json" --markdown -
expect_exit 0
expect_stdout_contains "## layerdiff: **FAIL**"

case_begin "usage errors exit 2"
run "$LAYERDIFF" report "$WORK/ovf.json"
expect_exit 2
expect_stderr_contains "nothing to write"
expect_stderr_one_line
run "$LAYERDIFF" report "$WORK/ovf.json" --markdown "$WORK/x.md" --junit-layers
expect_exit 2
expect_stderr_contains "--junit-layers needs --junit"
run "$LAYERDIFF" report "$WORK/ovf.json" --html "$WORK/same" --junit "$WORK/same"
expect_exit 2
expect_stderr_contains "both write to"
run "$LAYERDIFF" report trend "$WORK/ovf.json" --junit "$WORK/t.xml"
expect_exit 2
run "$LAYERDIFF" report trend "$WORK/ovf.json" --regress-factor 0.5
expect_exit 2
expect_stderr_contains "--regress-factor must be above 1"

case_begin "bad input exits 2 naming the file"
printf 'not json' > "$WORK/bad.json"
run "$LAYERDIFF" report "$WORK/bad.json" --html "$WORK/bad.html"
expect_exit 2
expect_stderr_contains "bad.json"
expect_stderr_one_line
expect_no_file "$WORK/bad.html"
run "$LAYERDIFF" report "$WORK/nonexistent.json" --html "$WORK/bad.html"
expect_exit 2
expect_stderr_contains "nonexistent.json"

# The trend: cnn.onnx nightly, fp16 (about 1e-4 max abs error at the output)
# and bf16 (about 8x more); dates set with SOURCE_DATE_EPOCH.
case_begin "trend: reports for the nights"
SOURCE_DATE_EPOCH=1767225600 run "$LAYERDIFF" run "$CNN" --report-json "$WORK/n1.json"
expect_exit 0
SOURCE_DATE_EPOCH=1767312000 run "$LAYERDIFF" run "$CNN" --report-json "$WORK/n2.json"
expect_exit 0
SOURCE_DATE_EPOCH=1767398400 run "$LAYERDIFF" run "$CNN" --bf16 --report-json "$WORK/n3.json"
expect_true "bf16 run done" test -s "$WORK/n3.json"

case_begin "trend: no regression exits 0"
run "$LAYERDIFF" report trend "$WORK/n2.json" "$WORK/n1.json" --html "$WORK/t0.html" \
  --markdown "$WORK/t0.md"
expect_exit 0
expect_stdout_contains "2 reports of cnn.onnx, 2026-01-01T00:00:00Z to 2026-01-02T00:00:00Z"
expect_stdout_contains "no regression in the newest report"
expect_true "HTML trend has a chart" grep -q '<svg ' "$WORK/t0.html"
expect_true "Markdown trend" grep -q '^## layerdiff trend: no regression' "$WORK/t0.md"

case_begin "trend: bf16 tonight is a regression, exit 1"
run "$LAYERDIFF" report trend "$WORK/n3.json" "$WORK/n1.json" "$WORK/n2.json" \
  --html "$WORK/t1.html" --markdown "$WORK/t1.md"
expect_exit 1
expect_stdout_contains "REGRESSION"
expect_stdout_contains "output: "
expect_true "Markdown names it" grep -q '^### Regressions in the newest report' "$WORK/t1.md"
expect_true "HTML marks it" grep -q 'class="pt-reg"' "$WORK/t1.html"

case_begin "trend: a large enough factor tolerates it"
run "$LAYERDIFF" report trend "$WORK/n1.json" "$WORK/n2.json" "$WORK/n3.json" --regress-factor 1000
expect_exit 0

case_begin "trend: bf16 then back to fp16 is history, exit 0"
SOURCE_DATE_EPOCH=1767484800 run "$LAYERDIFF" run "$CNN" --report-json "$WORK/n4.json"
run "$LAYERDIFF" report trend "$WORK/n1.json" "$WORK/n3.json" "$WORK/n4.json"
expect_exit 0
expect_stdout_contains "no regression in the newest report"

case_begin "trend: different models warn"
run "$LAYERDIFF" report trend "$WORK/ovf.json" "$WORK/n1.json"
expect_true "exit 0 or 1" test "$EXIT" -le 1
expect_stdout_contains "differs from the newest report"

case_begin "trend: a bad report exits 2"
run "$LAYERDIFF" report trend "$WORK/n1.json" "$WORK/bad.json"
expect_exit 2
expect_stderr_contains "bad.json"

case_begin "HTML renders in headless Chromium (not blank)"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
  skip_case "chromium not installed (scripts/install-deps.sh installs it)"
else
  # --user-data-dir keeps the profile out of $HOME; no network is needed: the
  # page is self-contained and its CSP forbids loads.
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$WORK/chromium" --screenshot="$WORK/shot.png" --window-size=1280,2000 \
    "file://$WORK/ovf.html" >"$WORK/chromium.log" 2>&1
  expect_file_exists "$WORK/shot.png"
  run $CHECK png "$WORK/shot.png"
  expect_exit 0
fi

case_begin "HTML: the table sorts and filters in Chromium; the CSP lets the script run"
if [ -z "$CHROMIUM" ]; then
  skip_case "chromium not installed (scripts/install-deps.sh installs it)"
else
  # The page's own script, under its own CSP, replaces the static count.
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$WORK/chromium" \
    --dump-dom "file://$WORK/ovf.html" >"$WORK/dom.html" 2>"$WORK/chromium.log"
  expect_true "script ran under the CSP" grep -q 'id="shown" class="muted">7 of 7 tensors shown<' "$WORK/dom.html"
  # A copy that clicks: max abs descending (the four inf first, in order; the
  # input's 0 last), ascending, a filter, failing only.
  $PY "$ROOT/tests/e2e/check_report.py" harness "$WORK/ovf.html" "$WORK/harness.html"
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$WORK/chromium" \
    --dump-dom "file://$WORK/harness.html" >"$WORK/hdom.html" 2>"$WORK/chromium.log"
  run $CHECK harness-check "$WORK/hdom.html" \
    '{"desc": "4,5,6,7,2,3,1", "asc": "1,2,3,4,5,6,7", "filtered": "2 of 7 tensors shown", "failing": "4 of 7 tensors shown"}'
  expect_exit 0
fi

finish
