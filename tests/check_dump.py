#!/usr/bin/python3
"""Reads the dump written by tests/test_dump_interop.c with h5py and checks
that names, dtypes, attributes, index tables (format version 2) and values
are what the C test wrote.

Usage: /usr/bin/python3 tests/check_dump.py DUMP.h5
Prints "check_dump: OK" and exits 0, or lists every failed check and exits 1.
The expectations below mirror write_interop_dump() in the C test.
"""
import sys

import h5py
import numpy as np

F16_NAME = "/encoder/layer.0/Add_output_0"
BF16_NAME = "na\u00efve \u540d\u524d %2F.x"

F16_BITS = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xBC00,
            0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x7E01, 0xFE00, 0x3555]
BF16_BITS = [0x0000, 0x8000, 0x0001, 0x3F80, 0xC000, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0]

# name -> (numpy dtype h5py must report, layerdiff dtype attribute, expected array)
REFERENCE = {
    F16_NAME: (np.float16, "float16",
               np.array(F16_BITS, dtype=np.uint16).view(np.float16).reshape(2, 7)),
    # numpy has no bfloat16: h5py picks float32, and HDF5 widens exactly.
    BF16_NAME: (np.float32, "bfloat16",
                (np.array(BF16_BITS, dtype=np.uint32) << 16).view(np.float32)),
    ".starts with dot": (np.bool_, "bool", np.array([[True, False], [False, True]])),
    "ints/int8": (np.int8, "int8", np.array([-128, 0, 127], dtype=np.int8)),
    "ints/uint8": (np.uint8, "uint8", np.array([0, 128, 255], dtype=np.uint8)),
    "ints/int16": (np.int16, "int16", np.array([-32768, 0, 32767], dtype=np.int16)),
    "ints/uint16": (np.uint16, "uint16", np.array([0, 32768, 65535], dtype=np.uint16)),
    "ints/int32": (np.int32, "int32", np.array([-2**31, 0, 2**31 - 1], dtype=np.int32)),
    "ints/uint32": (np.uint32, "uint32", np.array([0, 2**31, 2**32 - 1], dtype=np.uint32)),
    "ints/int64": (np.int64, "int64", np.array([-2**63, 0, 2**63 - 1], dtype=np.int64)),
    "ints/uint64": (np.uint64, "uint64", np.array([0, 2**63, 2**64 - 1], dtype=np.uint64)),
    "scalar": (np.float32, "float32", np.array(3.25, dtype=np.float32)),
    "empty": (np.float32, "float32", np.zeros((0, 3), dtype=np.float32)),
    "f64": (np.float64, "float64", np.array([1e308, -5e-324, 0.1])),
}
INPUTS = {
    "input.1": (np.float32, "float32",
                np.array([[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]], dtype=np.float32)),
    "mask": (np.bool_, "bool", np.array([[1, 0, 1], [0, 1, 1]], dtype=bool)),
    "token ids": (np.int64, "int64", np.array([0, 7, 2**40], dtype=np.int64)),
}
EMULATED = {
    F16_NAME: (np.float32, "float32", np.array([1.5, -2.0, 65504.0], dtype=np.float32)),
}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def escape(name):
    """docs/dump-format.md "Link names", enough for the names used here."""
    out = name.replace("%", "%25").replace("/", "%2F")
    return "%2E" + out[1:] if out.startswith(".") else out


def same_values(got, want):
    """Exact equality, NaN matching NaN; float16 compared bit for bit."""
    if got.shape != want.shape:
        return False
    if got.dtype == np.float16:
        return np.array_equal(got.view(np.uint16), want.view(np.uint16))
    if got.dtype.kind == "f":
        both_nan = np.isnan(got) & np.isnan(want)
        return bool(np.all(both_nan | (got == want)))
    return np.array_equal(got, want)


def check_str_attr(obj, key, want):
    value = obj.attrs.get(key)
    check(isinstance(value, str), f"{obj.name}: attribute {key} is {type(value).__name__}, not str")
    check(value == want, f"{obj.name}: attribute {key} is {value!r}, expected {want!r}")


def check_values(name, dset, np_dtype, want):
    check(dset.dtype == np.dtype(np_dtype),
          f"{name!r}: h5py dtype {dset.dtype}, expected {np.dtype(np_dtype)}")
    got = np.asarray(dset[()])
    check(same_values(got, want), f"{name!r}: values {got!r}, expected {want!r}")


def index_rows(f, run_link):
    """The run's index table as {name: {column: value}}; strings inside a
    compound come back from h5py as bytes (UTF-8)."""
    table = f["index"][run_link][()]
    rows = {}
    for row in table:
        values = {k: row[k].decode("utf-8") if isinstance(row[k], bytes) else row[k]
                  for k in table.dtype.names}
        rows[values["name"]] = values
    return rows


def check_run(f, run_link, expected):
    group, rows = f["runs"][run_link], index_rows(f, run_link)
    check(set(rows) == set(expected),
          f"{run_link}: index rows {sorted(rows)} != expected {sorted(expected)}")
    check(len(group) == len(rows), f"{run_link}: {len(group)} datasets, {len(rows)} rows")
    for index, (name, (np_dtype, ld_dtype, want)) in enumerate(expected.items()):
        row = rows.get(name)
        if row is None:
            continue
        check(row["link"] == escape(name), f"link {row['link']!r} is not {name!r} escaped")
        check(len(group[row["link"]].attrs) == 0, f"{name!r}: dataset has attributes")
        check_values(name, group[row["link"]], np_dtype, want)
        check(row["dtype"] == ld_dtype, f"{name!r}: dtype column {row['dtype']!r}")
        check(row["topo_index"] == index, f"{name!r}: topo_index {row['topo_index']}")
        check(row["graph_output"] in (0, 1), f"{name!r}: graph_output {row['graph_output']}")
    return rows


def check_group(group, expected, topo_from_order):
    names = {}
    for link, dset in group.items():
        name = dset.attrs.get("name")
        if not check(isinstance(name, str), f"{dset.name}: name attribute is not str"):
            continue
        names[name] = dset
        check(link == escape(name), f"link {link!r} is not the escaped form of {name!r}")
    check(set(names) == set(expected),
          f"{group.name}: tensors {sorted(names)} != expected {sorted(expected)}")
    for index, (name, (np_dtype, ld_dtype, want)) in enumerate(expected.items()):
        dset = names.get(name)
        if dset is None:
            continue
        check(dset.dtype == np.dtype(np_dtype),
              f"{name!r}: h5py dtype {dset.dtype}, expected {np.dtype(np_dtype)}")
        check_str_attr(dset, "dtype", ld_dtype)
        got = dset[()]
        got = np.asarray(got)
        check(same_values(got, want), f"{name!r}: values {got!r}, expected {want!r}")
        topo = dset.attrs.get("topo_index")
        check(isinstance(topo, np.int64), f"{name!r}: topo_index is not int64")
        check(topo == (index if topo_from_order else -1), f"{name!r}: topo_index {topo}")
        for key in ("node", "op_type", "precision"):
            check(isinstance(dset.attrs.get(key), str), f"{name!r}: {key} is not str")


def main(path):
    with h5py.File(path, "r") as f:
        check_str_attr(f, "format", "layerdiff-dump")
        check(f.attrs.get("format_version") == 2, "format_version != 2")
        check(f.attrs.get("complete") == 1, "complete != 1")
        check_str_attr(f, "model_path", "models/tiny.onnx")
        check_str_attr(f, "model_sha256",
                       "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        check_str_attr(f, "tool_version", "test-1.0")
        check_str_attr(f, "created", "2024-05-06T07:08:09Z")
        check(f.attrs.get("input_seed") == 1234, "input_seed != 1234")

        check_group(f["inputs"], INPUTS, topo_from_order=False)
        check(list(f["inputs"].keys()) != [], "no inputs")
        runs = f["runs"]
        if not check(set(runs.keys()) == {"reference", "emulated%2Ffp16"},
                     f"run groups {sorted(runs.keys())}"):
            return report()
        ref, emu = runs["reference"], runs["emulated%2Ffp16"]
        check_str_attr(ref, "name", "reference")
        check_str_attr(ref, "backend", "reference")
        check_str_attr(ref, "config", "fp32 everywhere")
        check_str_attr(emu, "name", "emulated/fp16")
        rows = check_run(f, "reference", REFERENCE)
        check_run(f, "emulated%2Ffp16", EMULATED)

        counted = rows.get(F16_NAME, {})
        check(counted.get("counters") == 1, "counters flag not set")
        for key, want in (("overflows", 1), ("nans_created", 2), ("underflows", 3),
                          ("subnormals", 4), ("partial_overflows", 5)):
            check(counted.get(key) == want, f"counter {key} = {counted.get(key)}")
        check(rows.get("scalar", {}).get("counters") == 0, "counters on a tensor without them")
        check(counted.get("node") == "/encoder/layer.0/Add", "node")
        check(counted.get("op_type") == "Add", "op_type")
        check(counted.get("precision") == "fp16", "precision")
        # inputs: escaped names joined by '/'; graph output: the last tensor
        check(counted.get("inputs") == "input.1/%00/%2Fa%2Fb", f"inputs {counted.get('inputs')!r}")
        check([n for n, r in rows.items() if r["graph_output"] == 1] == ["f64"],
              "graph_output should be set on 'f64' only")

    return report()


def report():
    for line in failures:
        print("check_dump: FAIL", line)
    if failures:
        return 1
    print("check_dump: OK")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: check_dump.py DUMP.h5")
    sys.exit(main(sys.argv[1]))
