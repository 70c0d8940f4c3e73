"""uvmtrace v1.1: the optional slices columns and the host_access event (docs/trace-format.md)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import uvmsim
from uvmsim import TraceFormatError, load_trace
from uvmsim.trace.builder import TraceBuilder
from uvmsim.trace.format import ARG_CODE, OP_CODE

MiB = 1 << 20


def sliced_builder():
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    b.host_access(b.base(x), 3 * 4096, "write")
    pages = b.pages(x, 0, 6)
    b.kernel("waves", rows=[(int(p), 1) for p in pages],
             slices=[0b1, 0b11, 0b101, 0b1001, 0b1000, 0b1111], n_slices=4)
    b.host_access(b.base(x) + 8192, 4096)
    b.kernel("plain", reads=b.pages(x, 10, 12))
    return b


def test_round_trip_keeps_slices_and_host_access(tmp_path):
    p = sliced_builder().write(tmp_path / "s.uvmtrace")
    m = json.loads((p / "manifest.json").read_text())
    assert m["version"] == 1 and m["minor"] == 1
    t = load_trace(p)
    T = t.arrays
    assert T.row_slices.tolist() == [0b1, 0b11, 0b101, 0b1001, 0b1000, 0b1111, 1, 1]
    assert T.k_nslices.tolist() == [4, 1]
    ops = t.events["op"].tolist()
    assert ops.count("host_access") == 2
    e = [i for i, o in enumerate(ops) if o == "host_access"]
    assert T.ev_op[e].tolist() == [OP_CODE["host_access"]] * 2
    assert T.ev_arg[e].tolist() == [ARG_CODE["write"], 0]
    # the range is clipped to the allocation like a memcpy: pages 0..2, then page 2
    segs = [(T.seg_first[s], T.seg_last[s]) for i in e
            for s in range(T.ev_seg_start[i], T.ev_seg_start[i + 1])]
    p0 = T.a_page_off[0]
    assert segs == [(p0, p0 + 2), (p0 + 2, p0 + 2)]


def test_v1_trace_stays_v1(tmp_path):
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.kernel("k", reads=b.pages(x, 0, 3))
    p = b.write(tmp_path / "v1.uvmtrace")
    assert "minor" not in json.loads((p / "manifest.json").read_text())
    assert "slices" not in pq.read_schema(p / "accesses.parquet").names
    t = load_trace(p)
    assert t.arrays.row_slices.size == 0
    assert t.arrays.k_nslices.tolist() == [1]


def test_v11_features_are_ignored_with_options_off():
    """With the v1.1 options off, a v1.1 trace replays exactly as its v1 content."""
    t11 = sliced_builder().build()
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    b.kernel("waves", reads=b.pages(x, 0, 6))
    b.kernel("plain", reads=b.pages(x, 10, 12))
    assert uvmsim.simulate(t11, oversub=1.0).summary == \
        uvmsim.simulate(b.build(), oversub=1.0).summary


def _tables(b):
    return b.tables()


def _bad(mutate, match):
    b = sliced_builder()
    t = _tables(b)
    mutate(t)
    with pytest.raises(TraceFormatError, match=match):
        uvmsim.trace_from_tables(**t)


def test_slices_zero_rejected():
    _bad(lambda t: t["accesses"].__setitem__("slices", np.uint64(0)), "slices is 0")


def test_slice_bit_beyond_n_slices_rejected():
    def f(t):
        t["accesses"].loc[2, "slices"] = np.uint64(1 << 4)
    _bad(f, r"at or above n_slices = 4")


def test_missing_n_slices_rejected():
    def f(t):
        t["kernels"]["n_slices"] = pd.array([pd.NA, 1], dtype="UInt8")
    _bad(f, "no n_slices")


@pytest.mark.parametrize("n", [0, 65])
def test_n_slices_range(n):
    def f(t):
        t["kernels"]["n_slices"] = pd.array([n, 1], dtype="Int64")
    _bad(f, "n_slices .* out of range")


def test_host_access_arg_and_size_checked():
    def arg(t):
        t["events"].loc[t["events"]["op"] == "host_access", "arg"] = "gpu"
    _bad(arg, "host_access arg")

    def size(t):
        t["events"].loc[t["events"]["op"] == "host_access", "size"] = 0
    _bad(size, "host_access size must be > 0")


@pytest.mark.parametrize("manifest_patch, match", [
    ({"version": True}, "unknown version True"),
    ({"minor": 3}, "unknown minor version 3"),
    ({"minor": True}, "unknown minor version True"),
    ({"minor": "1"}, "unknown minor version '1'"),
])
def test_manifest_version_types(tmp_path, manifest_patch, match):
    p = sliced_builder().write(tmp_path / "m.uvmtrace")
    m = json.loads((p / "manifest.json").read_text())
    m.update(manifest_patch)
    (p / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(TraceFormatError, match=match):
        load_trace(p)


def test_multi_tenant_merge_mixes_sliced_and_plain():
    from uvmsim.multi import merge_traces
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.kernel("k", reads=b.pages(x, 0, 3))
    m = merge_traces([b.build(), sliced_builder().build()])
    assert m.arrays.row_slices.tolist() == [1, 1, 1, 0b1, 0b11, 0b101, 0b1001, 0b1000,
                                            0b1111, 1, 1]
    assert m.arrays.k_nslices.tolist() == [1, 4, 1]
