#!/usr/bin/env bash
# `make demo`: the main job on the bundled default model — scenario 1 of
# docs/scenarios.md, a CLIP-style text encoder whose first LayerNorm squares
# activations above 256 and overflows fp16.
# Shows the fp16 precision plan, then runs the model on the fp32 reference
# and the emulated fp16 engine in lockstep, comparing every layer as it is
# produced (with each layer's isolated error), prints the divergence
# summary, and keeps the HTML and JSON reports and the dump of all three
# runs (reference, emulated, emulated.isolated).
set -euo pipefail
bin=${1:-build/layerdiff}
model=fixtures/scenarios/clip_text_encoder.onnx
out=build/demo
mkdir -p "$out"

"$bin" inspect "$model" --engine --fp16 > "$out/plan.txt"
head -n 12 "$out/plan.txt"
echo "  ... (full plan in $out/plan.txt)"
echo
# Exit 1 means "some tensor is beyond tolerance": an answer, not a failure
# of the demo. Anything else is.
status=0
"$bin" run "$model" --backends reference,emulated --fp16 --input-shapes batch:4 \
  --val-range 'input_ids:[0,63]' --html "$out/report.html" --report-json "$out/report.json" \
  --dump "$out/clip_text_encoder.h5" || status=$?
if [ "$status" -gt 1 ]; then
  echo "demo: layerdiff run failed (exit $status)" >&2
  exit "$status"
fi
echo
if [ "$status" = 1 ]; then
  echo "demo: exit 1 — fp16 moved some layers beyond the default tolerance (see the summary above)"
else
  echo "demo: exit 0 — every layer within the default fp16 tolerance"
fi
echo "demo: HTML report: $out/report.html"
echo "demo: every metric of every tensor is in $out/report.json"
echo "demo: the three runs are in $out/clip_text_encoder.h5 (layerdiff inspect $out/clip_text_encoder.h5)"
