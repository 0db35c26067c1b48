#!/usr/bin/env bash
# Real models end to end on the reference backend: PaddleOCR's PP-OCRv4 text
# detector and text-direction classifier (fetched by scripts/fetch-models.sh
# into models/; every case is skipped with a message while they are absent).
#
# Besides running on generated inputs, the models are given text drawn with a
# small bitmap font: the detector must light up exactly where the text is,
# and the classifier must tell upright text from text turned by 180 degrees.
# That checks the whole chain (loader, executor, ~20 kernels) gives a
# network's real answer, with no other ONNX runtime at hand.
#
# Operators used: det (opset 11, 672 nodes): Conv, ConvTranspose,
# BatchNormalization, Add, Mul, Div, Clip (min/max inputs), HardSigmoid,
# Relu, Sigmoid, GlobalAveragePool, Resize (nearest, asymmetric, floor;
# roi + scales inputs), Concat, Constant. cls (opset 9, 471 nodes): Conv,
# BatchNormalization, Add, Mul, Div, Clip (min/max attributes), HardSigmoid,
# Relu, GlobalAveragePool, MaxPool, Shape, Cast, Slice (attributes), Concat,
# Reshape, MatMul, Softmax, Constant.
source "$(dirname "$0")/lib.sh"
MODELS=${LAYERDIFF_MODELS:-$ROOT/models}
DET=$MODELS/ppocr_det.onnx
CLS=$MODELS/ppocr_cls.onnx
L="$LAYERDIFF"
cd "$WORK" || exit 1

have() {
  [ -f "$1" ] && return 0
  skip_case "$(basename "$1") not in $MODELS: run scripts/fetch-models.sh"
  return 1
}

# Inputs: text rendered with a 5x7 bitmap font, normalised as PaddleOCR does.
"$PY" - <<'PYEOF'
import numpy as np
FONT = {
    'H': ["10001", "10001", "10001", "11111", "10001", "10001", "10001"],
    'E': ["11111", "10000", "10000", "11110", "10000", "10000", "11111"],
    'L': ["10000", "10000", "10000", "10000", "10000", "10000", "11111"],
    'O': ["01110", "10001", "10001", "10001", "10001", "10001", "01110"],
    'W': ["10001", "10001", "10001", "10101", "10101", "10101", "01010"],
    'R': ["11110", "10001", "10001", "11110", "10100", "10010", "10001"],
    'D': ["11110", "10001", "10001", "10001", "10001", "10001", "11110"],
    ' ': ["00000"] * 7,
}
def render(text, scale):
    rows = [sum(([int(c) for c in FONT[ch][r]] + [0] for ch in text), []) for r in range(7)]
    return np.kron(np.array(rows, np.uint8), np.ones((scale, scale), np.uint8))
def chw(img): return img.transpose(2, 0, 1)[None].astype(np.float32)
# Detector: black text on white, 640x640, ImageNet mean/std.
img = np.ones((640, 640, 3), np.float32)
t = render("HELLO WORLD", 7)                      # 49 x 462 pixels
img[200:200 + t.shape[0], 100:100 + t.shape[1]] -= t[:, :, None]
mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
np.save("det_text.npy", chw((img - mean) / std))
# Classifier: a 48x192 crop, (x - 0.5) / 0.5, upright and turned by 180 degrees.
for word in ("HELLO", "WORLD"):
    img = np.ones((48, 192, 3), np.float32)
    t = render(word, 5)
    img[(48 - t.shape[0]) // 2:(48 - t.shape[0]) // 2 + t.shape[0], 4:4 + t.shape[1]] -= t[:, :, None]
    x = chw((img - 0.5) / 0.5)
    np.save("cls_up_%s.npy" % word, x)
    np.save("cls_down_%s.npy" % word, np.ascontiguousarray(x[:, :, ::-1, ::-1]))
PYEOF

py_check() {  # DUMP ASSERTIONS (o = the run's first graph output as numpy)
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
import h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
r = f["runs/reference"]
exec(sys.argv[2])
PYEOF
}

case_begin "det: generated input 1x3x640x640"
if have "$DET"; then
  run "$L" run --backends reference "$DET" --input-shapes x:1x3x640x640
  expect_exit 0
  expect_stdout_contains "reference  672 layer outputs"
  expect_stdout_contains "sigmoid_0.tmp_0  float32  1x1x640x640  min"
fi

# A full dump at 640x640 is 700 MB; 160x160 keeps it near 45 MB.
case_begin "det: every layer dumped at 1x3x160x160"
if have "$DET"; then
  run "$L" run --backends reference "$DET" --input-shapes x:1x3x160x160 --dump det.h5
  expect_exit 0
  expect_true "672 tensors, output a probability map" py_check det.h5 "
assert len(r) == 672, len(r)
p = r['sigmoid_0.tmp_0'][()]
assert p.shape == (1, 1, 160, 160) and p.min() >= 0 and p.max() <= 1
assert f['inputs/x'].shape == (1, 3, 160, 160)
"
  rm -f det.h5
fi

case_begin "det: the dynamic input needs --input-shapes"
if have "$DET"; then
  run "$L" run --backends reference "$DET"
  expect_exit 2
  expect_stderr_contains "input 'x': dim 0 is symbolic ('p2o.DynamicDimension.0') and has no value; pass --input-shapes"
  expect_stderr_one_line
fi

case_begin "det: finds drawn text and nothing else"
if have "$DET"; then
  run "$L" run --backends reference "$DET" --load-inputs det_text.npy --layers outputs --dump det_text.h5
  expect_exit 0
  expect_true "text region lit, rest dark" py_check det_text.h5 "
p = r['sigmoid_0.tmp_0'][()][0, 0]
box = p[200:249, 100:562]
outside = np.concatenate([p[:180].ravel(), p[270:].ravel(), p[:, :80].ravel(), p[:, 580:].ravel()])
print('box max %.3f, box mean %.3f, outside max %.3g' % (box.max(), box.mean(), outside.max()))
assert box.max() > 0.9 and (box > 0.5).mean() > 0.2, 'text not detected'
assert outside.max() < 0.05, 'detections away from the text'
"
fi

case_begin "cls: generated input 1x3x48x192, full dump"
if have "$CLS"; then
  run "$L" run --backends reference "$CLS" --input-shapes x:1x3x48x192 --dump cls.h5
  expect_exit 0
  expect_stdout_contains "reference  471 layer outputs"
  expect_stdout_contains "softmax_0.tmp_0  float32  1x2"
  expect_true "every layer dumped, output a distribution" py_check cls.h5 "
assert len(r) == 471, len(r)
o = r['softmax_0.tmp_0'][()]
assert o.shape == (1, 2) and abs(o.sum() - 1) < 1e-5 and (o >= 0).all()
"
fi

for word in HELLO WORLD; do
  case_begin "cls: tells upright '$word' from '$word' turned by 180 degrees"
  if have "$CLS"; then
    run "$L" run --backends reference "$CLS" --load-inputs "cls_up_$word.npy" --layers outputs --dump up.h5
    expect_exit 0
    expect_true "upright: class 0" py_check up.h5 "
o = r['softmax_0.tmp_0'][()][0]
print('upright', o)
assert o[0] > 0.9, o
"
    run "$L" run --backends reference "$CLS" --load-inputs "cls_down_$word.npy" --layers outputs --dump down.h5
    expect_exit 0
    expect_true "turned: class 1" py_check down.h5 "
o = r['softmax_0.tmp_0'][()][0]
print('turned', o)
assert o[1] > 0.9, o
"
  fi
done

finish
