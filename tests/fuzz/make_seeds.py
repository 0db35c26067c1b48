#!/usr/bin/python3
"""Seed corpora for the fuzz targets (run by scripts/fuzz.sh with Debian's python3).

    make_seeds.py OUTDIR LAYERDIFF_BINARY

Writes OUTDIR/<target>/ for every target in tests/fuzz/: valid and malformed
inputs taken from the fixtures, the bad-input corpus (tests/bad-inputs/), the
ONNX backend test data (libonnx-testdata) and files made here with numpy,
h5py and `layerdiff run`. Seeds only steer the fuzzer: what it finds is kept
in fuzz-corpus/<target>/ (git-ignored), not here.
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.environ.get("ONNX_TESTDATA", "/usr/share/libonnx-testdata/data")
TESTDATA_DIRS = ["node", "simple", "pytorch-operator", "pytorch-converted"]
MAX_MODEL = 64 * 1024   # the targets' -max_len (scripts/fuzz.sh)
MAX_TENSOR = 16 * 1024


def copy_files(paths, outdir, limit, prefix=""):
    """Copies files no larger than limit into outdir, named after their path."""
    n = 0
    for path in sorted(paths):
        if not os.path.isfile(path) or os.path.getsize(path) > limit:
            continue
        rel = os.path.relpath(path, TESTDATA if path.startswith(TESTDATA) else ROOT)
        shutil.copyfile(path, os.path.join(outdir, prefix + rel.replace("/", "_")))
        n += 1
    return n


def onnx_model_seeds(out):
    paths = glob.glob(os.path.join(ROOT, "fixtures", "**", "*.onnx"), recursive=True)
    paths += glob.glob(os.path.join(ROOT, "tests", "bad-inputs", "**", "*.onnx"), recursive=True)
    for d in TESTDATA_DIRS:
        paths += glob.glob(os.path.join(TESTDATA, d, "*", "model.onnx"))
    return copy_files(paths, out, MAX_MODEL)


def onnx_tensor_seeds(out):
    paths = glob.glob(os.path.join(ROOT, "tests", "bad-inputs", "**", "*.pb"), recursive=True)
    for d in TESTDATA_DIRS:
        paths += glob.glob(os.path.join(TESTDATA, d, "*", "test_data_set_*", "*.pb"))
    n = copy_files(paths, out, MAX_TENSOR)
    # A tensor stored externally in the sandbox's weights.bin (the target writes it).
    t = TP()
    t.name = "w"
    t.data_type = TP.FLOAT
    t.dims.extend([4, 4])
    t.data_location = TP.EXTERNAL
    for k, v in [("location", "weights.bin"), ("offset", "128"), ("length", "64")]:
        e = t.external_data.add()
        e.key, e.value = k, v
    with open(os.path.join(out, "external.pb"), "wb") as f:
        f.write(t.SerializeToString())
    return n + 1


def npy_seeds(out):
    arrays = {
        "f4": np.arange(12, dtype=np.float32).reshape(3, 4),
        "f2": np.linspace(-2, 2, 5).astype(np.float16),
        "f8": np.array(3.5),
        "i1": np.array([-128, 0, 127], np.int8),
        "i2": np.zeros((2, 0, 3), np.int16),
        "i4": np.arange(6, dtype=np.int32).reshape(1, 2, 3),
        "i8": np.array([[1], [2]], np.int64),
        "u1": np.arange(4, dtype=np.uint8),
        "u2": np.array([65535], np.uint16),
        "u4": np.array([1, 2], np.uint32),
        "u8": np.array([2**64 - 1], np.uint64),
        "b1": np.array([True, False, True]),
        "rank6": np.zeros((1, 1, 2, 1, 1, 2), np.float32),
    }
    n = 0
    for name, a in arrays.items():
        np.save(os.path.join(out, name + ".npy"), a)
        n += 1
    for version in [(2, 0), (3, 0)]:
        with open(os.path.join(out, "v%d.npy" % version[0]), "wb") as f:
            np.lib.format.write_array(f, arrays["f4"], version=version)
        n += 1
    np.save(os.path.join(out, "fortran.npy"), np.asfortranarray(arrays["f4"]))
    np.save(os.path.join(out, "bigendian.npy"), arrays["f4"].astype(">f4"))
    np.save(os.path.join(out, "structured.npy"), np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    paths = glob.glob(os.path.join(ROOT, "tests", "bad-inputs", "**", "*.npy"), recursive=True)
    return n + 3 + copy_files(paths, out, MAX_TENSOR)


def dump_seeds(out, layerdiff):
    """Dumps written by `layerdiff run` on a small model, plus h5py variants."""
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        vi = helper.make_tensor_value_info
        nodes = [helper.make_node("Identity", ["x"], ["/enc/a"], name="/enc/id"),
                 helper.make_node("Relu", ["/enc/a"], ["y"], name="relu"),
                 helper.make_node("Identity", ["ids"], ["z"], name="ids_copy"),
                 helper.make_node("Cast", ["x"], ["h"], name="to_half", to=TP.FLOAT16),
                 helper.make_node("Greater", ["x", "y"], ["g"], name="gt")]
        g = helper.make_graph(nodes, "seed", [vi("x", TP.FLOAT, ["batch", 3]), vi("ids", TP.INT64, ["batch"])],
                              [vi("y", TP.FLOAT, ["batch", 3]), vi("z", TP.INT64, ["batch"]),
                               vi("h", TP.FLOAT16, ["batch", 3]), vi("g", TP.BOOL, ["batch", 3])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        model = os.path.join(tmp, "seed.onnx")
        onnx.save(m, model)
        for batch, layers in [(1, "all"), (2, "outputs"), (0, "all")]:
            dump = os.path.join(out, "run_b%d_%s.h5" % (batch, layers))
            subprocess.run([layerdiff, "run", model, "--input-shapes", "batch:%d" % batch,
                            "--layers", layers, "--val-range", "[-1,1]", "--dump", dump],
                           check=True, stdout=subprocess.DEVNULL)
            n += 1
    # A dump as another tool might write it: no creation order, gzip, fixed strings.
    with h5py.File(os.path.join(out, "h5py_gzip.h5"), "w") as f:
        for k, v in [("format", "layerdiff-dump"), ("model_path", "m.onnx"), ("tool_version", "x"),
                     ("created", "2024-01-01T00:00:00Z")]:
            f.attrs[k] = np.bytes_(v)
        f.attrs["format_version"] = np.int64(1)
        f.attrs["input_seed"] = np.int64(-1)
        f.attrs["complete"] = np.int64(1)
        f.create_group("inputs")
        r = f.create_group("runs").create_group("reference")
        r.attrs["name"], r.attrs["backend"] = "reference", "reference"
        d = r.create_dataset("t", data=np.arange(64, dtype=np.float32).reshape(8, 8),
                             compression="gzip", shuffle=True, chunks=(4, 4))
        for k, v in [("name", "t"), ("node", "n"), ("op_type", "Op"), ("precision", "fp16"),
                     ("dtype", "float32")]:
            d.attrs[k] = v
        d.attrs["topo_index"], d.attrs["output_index"] = np.int64(0), np.int64(0)
        for k in ["overflows", "nans_created", "underflows", "subnormals", "partial_overflows"]:
            d.attrs[k] = np.int64(1)
    paths = glob.glob(os.path.join(ROOT, "tests", "bad-inputs", "**", "*.h5"), recursive=True)
    return n + 1 + copy_files(paths, out, MAX_MODEL)


def report_json_seeds(out, layerdiff):
    """JSON reports written by `layerdiff run` comparing the reference with the
    emulated fp16 engine on the small fixtures (reports up to MAX_MODEL bytes)."""
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in ["cnn", "overflow", "accumulate", "deep"]:
            model = os.path.join(ROOT, "fixtures", name + ".onnx")
            for extra in [[], ["--layers", "outputs"], ["--bf16", "--atol", "1e-2"]]:
                report = os.path.join(tmp, "r.json")
                backends = ["--backends", "reference,emulated"] + ([] if "--bf16" in extra else ["--fp16"])
                subprocess.run([layerdiff, "run", model, *backends, *extra, "--report-json", report],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # exit 1: mismatch
                if os.path.isfile(report) and os.path.getsize(report) <= MAX_MODEL:
                    shutil.copyfile(report, os.path.join(out, "%s_%d.json" % (name, n)))
                    n += 1
    return n


def options_seeds(out):
    """First byte: 0 --input-shapes, 1 --val-range, 2 --load-inputs, 3 layer rules (see fuzz_options.c)."""
    seeds = [
        (0, "batch:2"), (0, "x:1x4,batch:1"), (0, "seq:3,batch:2,ids:2"), (0, "flag:scalar"),
        (0, "a:b:2x5"), (0, "x:2x4,ids:3"), (0, "batch:0"), (0, "x:9223372036854775807x4"),
        (1, "[0,1]"), (1, "[-1,1],ids:[0,999]"), (1, "x:[-1e30,1e30]"), (1, "flag:[0,1]"),
        (1, "a:b:[-65504,65504]"), (1, "ids:[-9.2e18,9.2e18]"), (1, "[1e-45,2e-45]"),
        (2, "\nnpy"), (2, "\npb"), (2, "\nd.h5"), (2, "batch:2\nx:npy/x.npy,ids:pb/input_1.pb\na:b:ab.pb\nflag:npy/flag.npy"),
        (2, "\nx:x.npy\nids:ids.npy\na:b:npy/a:b.npy\nflag:badflag.npy"), (2, "\npartial.h5"),
        (2, "seq:3\nx:x8.npy,ids:d.h5,a:b:d.h5,flag:d.h5"),
        (3, "op:Identity:fp16"), (3, "id_*:bf16,*:fp32"), (3 | 8 | 64, "id_x:fp32,op:Id*:tf32"),
        (3 | 4, "id_a?b:float16,*:float32"), (3 | 16 | 32, "@rules.txt"), (3 | 4 | 64, "op:Identity:bfloat16"),
        (3, "id_[xf]*:fp16"), (3 | 4, "*:tf32"), (3, ":fp16"), (3, "id_x"),
    ]
    for i, (selector, text) in enumerate(seeds):
        with open(os.path.join(out, "seed%02d" % i), "wb") as f:
            f.write(bytes([selector]) + text.encode())
    return len(seeds)


def main():
    outdir, layerdiff = sys.argv[1], os.path.abspath(sys.argv[2])
    makers = {
        "onnx_model": onnx_model_seeds,
        "onnx_tensor": onnx_tensor_seeds,
        "npy": npy_seeds,
        "dump": lambda out: dump_seeds(out, layerdiff),
        "options": options_seeds,
        "report_json": lambda out: report_json_seeds(out, layerdiff),
    }
    targets = sys.argv[3:] or list(makers)
    for target in targets:
        out = os.path.join(outdir, target)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        n = makers[target](out)
        print("seeds: %-12s %5d files in %s" % (target, n, out))


if __name__ == "__main__":
    main()
