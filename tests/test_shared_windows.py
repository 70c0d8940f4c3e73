"""The shared_windows option: allocations that share a 2 MiB window are one VA range, as the
CUDA driver's sub-allocation makes them (docs/semantics.md; the probe small_allocs)."""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import uvmsim
from uvmsim.trace.builder import TraceBuilder
from uvmsim.trace.windows import share_windows

from helpers import MiB, PAGE, both, examples
from uvmsim.testing.strategies import programs

BASE = 0x7F0000000000   # 2 MiB-aligned


def eight_in_a_window():
    """Eight allocations of 256 KiB packed into one 2 MiB window, each written by a kernel."""
    b = TraceBuilder()
    xs = [b.alloc(256 * 1024, base=BASE + i * 256 * 1024) for i in range(8)]
    for x in xs:
        b.kernel("w", writes=b.pages(x, 0, 64))
    return b, xs


def test_eight_allocations_in_one_window_are_one_block():
    b, xs = eight_in_a_window()
    t = b.build()
    v = share_windows(t)
    assert (t.peak_blocks, v.peak_blocks) == (8, 1)
    rng = v.allocations[v.allocations["name"] == "range of 8 allocations"]
    assert rng[["base", "size"]].values.tolist() == [[BASE, 2 * MiB]]
    kw = dict(capacity_chunks=1, prefetch="none", fault_batch_size=1)
    # one chunk: each allocation's block takes it and evicts the previous one's, whose 64
    # pages are copied back; as one range the eight share the chunk
    off = both(t, **kw).summary
    assert off["evicted_chunks"] == 7 and off["dtoh_bytes_evict"] == 7 * 64 * PAGE
    on = both(t, shared_windows=True, **kw).summary
    assert on["evicted_chunks"] == 0 and on["dtoh_bytes_evict"] == 0
    assert on["faults"] == off["faults"] == 8 * 64 and on["peak_blocks"] == 1


def test_a_range_lives_from_its_first_alloc_to_its_last_free():
    # A and B share a window; A is freed, C reuses A's address while B lives, so C joins
    # the range; D comes after every member is freed: a range of its own (here: alone)
    b = TraceBuilder()
    a = b.alloc(256 * 1024, base=BASE)
    bb = b.alloc(256 * 1024, base=BASE + 256 * 1024)
    b.kernel("a", writes=b.pages(a, 0, 64))
    b.free(a)
    c = b.alloc(256 * 1024, base=BASE)
    b.kernel("c", reads=b.pages(c, 0, 64))
    b.free(bb)
    b.free(c)
    d = b.alloc(256 * 1024, base=BASE)
    b.kernel("d", reads=b.pages(d, 0, 64))
    t = b.build()
    v = share_windows(t)
    ev = v.events[v.events["op"].isin(["alloc", "free"])]
    rid = int(v.allocations.loc[v.allocations["name"] == "range of 3 allocations",
                                "alloc_id"].iloc[0])
    assert ev["alloc_id"].astype(int).tolist() == [rid, rid, d]
    assert ev["op"].tolist() == ["alloc", "free", "alloc"]
    # C's pages are A's, still resident (the CUDA driver's range kept them): no fault; D's
    # range is new, so D's first touch zero-fills again
    r = both(t, shared_windows=True, prefetch="none").kernels
    assert r["faults"].tolist() == [64, 0, 64]
    assert both(t, prefetch="none").kernels["faults"].tolist() == [64, 64, 64]


def test_allocations_in_windows_of_their_own_are_left_alone():
    b = TraceBuilder()
    x = b.alloc(64 * MiB + 16 * 1024)          # a partial last window, but alone in it
    y = b.alloc(3 * MiB)
    b.kernel("k", reads=np.concatenate([b.pages(x, 0, 100), b.pages(y, 0, 100)]))
    t = b.build()
    assert share_windows(t) is t
    assert uvmsim.simulate(t, shared_windows=True, oversub=1.5).summary == \
        uvmsim.simulate(t, oversub=1.5).summary


def test_the_view_is_computed_once_and_is_its_own_view():
    t = eight_in_a_window()[0].build()
    v = share_windows(t)
    assert share_windows(t) is v and share_windows(v) is v


def test_host_allocations_never_share_and_keep_their_windows_unshared():
    # a host allocation between two managed ones in one window: a range covering the window
    # would overlap it, so the window is not shared
    b = TraceBuilder()
    m1 = b.alloc(256 * 1024, base=BASE)
    b.alloc(4096, base=BASE + 256 * 1024, kind="host")
    m2 = b.alloc(256 * 1024, base=BASE + 512 * 1024)
    b.kernel("k", reads=np.concatenate([b.pages(m1, 0, 64), b.pages(m2, 0, 64)]))
    t = b.build()
    assert share_windows(t) is t


def test_a_streamed_trace_streams_its_view(tmp_path):
    from uvmsim.trace import load_trace
    p = eight_in_a_window()[0].write(tmp_path / "t.uvmtrace")
    kw = dict(shared_windows=True, capacity_chunks=1, prefetch="none")
    whole = uvmsim.simulate(load_trace(p), **kw)
    streamed = uvmsim.simulate(load_trace(p, stream=True, batch_rows=100), **kw)
    assert streamed.config["stream"] is True and streamed.summary == whole.summary
    assert whole.summary["peak_blocks"] == 1


def test_the_option_is_named_in_the_result_and_the_cli_flag_reaches_it(tmp_path, capsys):
    import json
    from uvmsim.cli import main
    p = eight_in_a_window()[0].write(tmp_path / "t.uvmtrace")
    r = uvmsim.simulate(str(p), shared_windows=True)
    assert r.config["shared_windows"] is True
    for flag, blocks in (("--shared-windows", 1), ("--no-shared-windows", 8)):
        assert main(["replay", str(p), flag, "--capacity", "2MiB", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["peak_blocks"] == blocks


@settings(max_examples=examples(30), deadline=None)
@given(prog=programs(v11=True, packed=True), factor=st.sampled_from([1.0, 1.5, 3.0]))
def test_packed_programs_take_at_most_as_many_blocks_and_the_same_accesses(prog, factor):
    t = prog.build()
    v = share_windows(t)
    assert v.peak_blocks <= t.peak_blocks
    # the view keeps every access row, in order, on the same virtual pages
    a, b = t.arrays, v.arrays
    assert np.array_equal(virtual_pages(a), virtual_pages(b))
    assert np.array_equal(a.row_flags, b.row_flags)
    assert np.array_equal(a.k_row_start, b.k_row_start)
    on = uvmsim.simulate(t, shared_windows=True, oversub=factor, host_access=True).summary
    assert on["accesses"] == t.n_accesses


def virtual_pages(A) -> np.ndarray:
    """Each access row's virtual page, by its block (an allocation's dense pages cover only
    its touched windows)."""
    blk = A.page_block[A.row_page]
    return (A.b_first_vpage[blk].astype(np.int64) + A.page_pos[A.row_page].astype(np.int64)
            - A.b_lo[blk].astype(np.int64))


def test_the_view_keeps_rows_on_their_pages_past_untouched_windows():
    # an allocation of three windows whose first two no row touches: its dense pages start
    # at the third window, so a row's page is not base + (dense - first dense); and two
    # small allocations sharing a window, so that the view is built
    b = TraceBuilder()
    x = b.alloc(6 * MiB, base=BASE)
    y = b.alloc(256 * 1024, base=BASE + 8 * MiB)
    z = b.alloc(256 * 1024, base=BASE + 8 * MiB + 256 * 1024)
    want = np.concatenate([b.pages(x, 1024, 1030), b.pages(y, 0, 2), b.pages(z, 0, 2)])
    b.kernel("k", reads=want)
    t = b.build()
    v = share_windows(t)
    assert v is not t and v.peak_blocks == t.peak_blocks - 1
    assert np.array_equal(np.sort(virtual_pages(t.arrays)), np.sort(want))
    assert np.array_equal(np.sort(virtual_pages(v.arrays)), np.sort(want))
    # the same faults, on the same pages (the view only joins y and z)
    assert both(v, prefetch="none").summary["faults"] == 10


def test_v12_streams_come_along_with_the_view():
    import pandas as pd
    from uvmsim.trace import synth, trace_from_tables
    tabs = synth.tables("grid_stride_fill", footprint_bytes=1 * MiB, grid=8, block=32)
    al, ev = tabs["allocations"], tabs["events"]
    # a second allocation in the first one's window (never touched): the two are one range
    base = int(al["base"].iloc[0])
    tabs["allocations"] = pd.concat([al, pd.DataFrame({"alloc_id": [1], "base": [base + MiB],
                                                       "size": [512 * 1024],
                                                       "kind": ["managed"], "name": ["b"]})],
                                    ignore_index=True).astype(al.dtypes.to_dict())
    row = ev.iloc[[0]].copy()
    row["alloc_id"] = pd.array([1], dtype="UInt32")
    tabs["events"] = pd.concat([ev.iloc[:1], row, ev.iloc[1:]], ignore_index=True)
    tabs["events"]["seq"] = range(len(tabs["events"]))
    t = trace_from_tables(**tabs)
    v = share_windows(t)
    assert v is not t and v.peak_blocks == 1
    assert v.streams is not None and t.streams is not None
    assert v.streams.n_rows == t.streams.n_rows
