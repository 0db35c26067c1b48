#!/usr/bin/env bash
# `make demo`: the main job on the bundled default model.
# Until the emulated engine and the comparator land (issues 4-5), the main job
# is: inspect the model, run it on the fp32 reference backend and dump every
# layer to HDF5. The comparison replaces the last step when it lands.
set -euo pipefail
bin=${1:-build/layerdiff}
model=fixtures/transformer.onnx
out=build/demo
mkdir -p "$out"

"$bin" inspect "$model"
echo
"$bin" run "$model" --backends reference --input-shapes batch:2 --dump "$out/transformer.h5"
"$bin" inspect "$out/transformer.h5" --json > "$out/dump-summary.json"
echo
echo "demo: every layer of $model (reference backend) is in $out/transformer.h5"
echo "demo: its summary is in $out/dump-summary.json (h5dump -H $out/transformer.h5 shows the layout)"
