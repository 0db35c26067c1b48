#!/usr/bin/env bash
# `make demo`: the main job on the bundled default model.
# Today (foundation stage) that is inspecting the model: the backends and the
# comparison replace this step as they land.
set -euo pipefail
bin=${1:-build/layerdiff}
model=fixtures/transformer.onnx
out=build/demo
mkdir -p "$out"

"$bin" inspect "$model"
"$bin" inspect "$model" --json --layers > "$out/inspect.json"
echo
echo "demo: model summary written to $out/inspect.json"
