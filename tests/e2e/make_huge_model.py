#!/usr/bin/env python3
"""Makes DIR/big.onnx with 2.06 GiB of external data in DIR/weights.bin (for
test_resources.sh; Debian's python3-onnx).

w: float32 [N, 16], N = 2^25 + 2^20 (2,214,592,512 bytes, past 2 GiB) at
offset 0; v: int64 [4] at offset 5 GiB (past 2^32). weights.bin is sparse:
only rows 0, k (whose bytes start past 2^31) and N-1, holding 100+i, 200+i and
300+i, and v = [7, -8, 2^40, 9] are written, so it takes a few KB of disk.
The graph: rows = Gather(w, [0, k, N-1]), vv = Identity(v)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

out = sys.argv[1]
N = (1 << 25) + (1 << 20)
ROW = 16 * 4
k = (1 << 31) // ROW + 5
V_OFFSET = 5 << 30

with open(f"{out}/weights.bin", "wb") as f:
    for row, base in ((0, 100), (k, 200), (N - 1, 300)):
        f.seek(row * ROW)
        f.write((np.arange(16, dtype=np.float32) + base).tobytes())
    f.seek(V_OFFSET)
    f.write(np.array([7, -8, 1 << 40, 9], dtype=np.int64).tobytes())


def external(name, dtype, dims, offset, length):
    t = onnx.TensorProto(name=name, data_type=dtype, dims=dims)
    t.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", str(offset)), ("length", str(length))):
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


inits = [external("w", T.FLOAT, [N, 16], 0, N * ROW), external("v", T.INT64, [4], V_OFFSET, 32),
         numpy_helper.from_array(np.array([0, k, N - 1], dtype=np.int64), "idx")]
nodes = [h.make_node("Gather", ["w", "idx"], ["rows"], name="gather", axis=0),
         h.make_node("Identity", ["v"], ["vv"], name="ident")]
outputs = [h.make_tensor_value_info("rows", T.FLOAT, None), h.make_tensor_value_info("vv", T.INT64, None)]
model = h.make_model(h.make_graph(nodes, "huge", [], outputs, inits), opset_imports=[h.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, f"{out}/big.onnx")
print(k)
