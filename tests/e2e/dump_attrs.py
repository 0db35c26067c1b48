"""Per-tensor metadata of a layerdiff dump as dataset attributes, whatever the
format version, for the end-to-end tests' h5py checks.

Format version 1 kept a tensor's metadata (name, node, op_type, topo_index,
output_index, precision, dtype, inputs, counters) as attributes of its
dataset; version 2 keeps it as a row of the run's index table
/index/<run link> (docs/dump-format.md). Importing this module makes
`dataset.attrs` of a version 2 run dataset return that row in the version 1
shape (strings as str, integers as numpy.int64, inputs as a list of names,
counters only when the engine recorded them, plus graph_output), so checks
written as `d.attrs["precision"]` read both versions. Other objects and
version 1 files are untouched.
"""
from urllib.parse import unquote

import h5py
import numpy as np

_plain_attrs = h5py.Dataset.attrs
_rows = {}  # (file id, run link) -> {dataset link: attrs dict}
COUNTERS = ("overflows", "nans_created", "underflows", "subnormals", "partial_overflows")


def _text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _split_inputs(joined):
    """Escaped names joined by '/' ("%00" is the empty name)."""
    if not joined:
        return []
    return ["" if x == "%00" else unquote(x, errors="surrogateescape") for x in joined.split("/")]


def run_rows(f, run_link):
    """{dataset link: version-1-style attributes} of one run of a version 2 dump."""
    key = (f.id.id, run_link)
    if key not in _rows:
        table = f["index"][run_link][()]
        rows = {}
        for row in table:
            r = {k: _text(row[k]) for k in table.dtype.names}
            a = {k: r[k] for k in ("name", "node", "op_type", "precision", "dtype")}
            a["topo_index"] = np.int64(r["topo_index"])
            a["output_index"] = np.int64(r["output_index"])
            a["graph_output"] = np.int64(r["graph_output"])
            inputs = _split_inputs(r["inputs"])
            if inputs:
                a["inputs"] = inputs
            if r["counters"]:
                for c in COUNTERS:
                    a[c] = np.int64(r[c])
            rows[r["link"]] = a
        _rows[key] = rows
    return _rows[key]


def _attrs(self):
    plain = _plain_attrs.fget(self)
    parts = (self.name or "").split("/")
    if len(parts) != 4 or parts[1] != "runs" or len(plain) > 0:
        return plain
    f = self.file
    if int(f.attrs.get("format_version", 1)) < 2 or "index" not in f:
        return plain
    return run_rows(f, parts[2]).get(parts[3], plain)


h5py.Dataset.attrs = property(_attrs)
