#!/usr/bin/env bash
# `make demo`: the main job on the bundled default model.
# Until the comparator lands (issue 5), the main job is: show the fp16
# precision plan, run the model on the fp32 reference and the emulated fp16
# engine and dump every layer of both runs to one HDF5 file. The comparison
# report replaces the dump summary when it lands.
set -euo pipefail
bin=${1:-build/layerdiff}
model=fixtures/transformer.onnx
out=build/demo
mkdir -p "$out"

"$bin" inspect "$model" --engine --fp16 > "$out/plan.txt"
head -n 12 "$out/plan.txt"
echo "  ... (full plan in $out/plan.txt)"
echo
"$bin" run "$model" --backends reference,emulated --fp16 --input-shapes batch:2 \
  --dump "$out/transformer.h5"
"$bin" inspect "$out/transformer.h5" --json > "$out/dump-summary.json"
echo
echo "demo: every layer of $model, reference and emulated fp16, is in $out/transformer.h5"
echo "demo: its summary is in $out/dump-summary.json (h5dump -H $out/transformer.h5 shows the layout)"
