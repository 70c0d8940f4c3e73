"""uvmsim.record's launch attributes (uvmtrace v1.2) from synthetic raw passes (no GPU): which
pass each column comes from, graph nodes, and the page pass's run-wide warnings."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from uvmsim.record import REC_DTYPE, build_tables, read_raw_pass
from uvmsim.record.tables import timing_launch_attrs

BASE = 0x7F0000000000
P0 = BASE >> 12


def _kline(name: str, block: str = "256,1,1", **kw) -> dict:
    threads = int(np.prod([int(x) for x in block.split(",")]))
    return {"t": "kernel", "name": name, "mangled": f"_Z{name}", "grid": "4,1,1",
            "block": block, "stream": 0, "n_blocks": 4, "threads": threads, "cluster": 1,
            "regs": 20, "smem_static": 0, "smem_dyn": 0, "sm_count": 132, "occupancy": 6,
            "unknown": 0, "dropped": 0, **kw}


def _kact(name: str, corr: int, start: int, block: str = "256,1,1", graph: int = 0,
          **kw) -> dict:
    return {"t": "kact", "name": name, "mangled": f"_Z{name}", "grid": "4,1,1", "block": block,
            "corr": corr, "start": start, "end": start + 100, "graph": graph, "graph_node": 0,
            "regs_cupti": 16, "smem_static": 0, "smem_dyn": 0, **kw}


def _raw(tmp: Path, klines: list[dict], kact: list[dict] | None, end: dict | None = None):
    """A page pass with one allocation whose kernels each touched one page (or none, n=0)."""
    d = tmp / "raw"
    d.mkdir()
    lines = [{"t": "meta", "pass": "pages", "rec_bytes": REC_DTYPE.itemsize},
             {"t": "alloc", "base": BASE, "size": 1 << 20, "kind": "device", "name": ""}]
    recs = []
    for k in klines:
        n = int(k.pop("n", 1))
        lines.append(dict(k, off=len(recs) * REC_DTYPE.itemsize, n=n))
        recs += [(P0 + len(recs), 1, 2, 1)] * n
    lines.append(end if end is not None else {"t": "end", "modules": 1})
    (d / "pages.9.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    np.asarray(recs, REC_DTYPE).tofile(d / "pages.9.bin")
    if kact is not None:
        (d / "timing.9.jsonl").write_text("".join(json.dumps(x) + "\n" for x in kact))
    (pages,) = read_raw_pass(d, "pages")
    timing = read_raw_pass(d, "timing")
    return pages, (timing[0] if timing else None)


def test_timing_attrs_fill_graph_nodes_from_the_same_function():
    kact = [_kact("a", 1, 0, regs=12, occupancy=8),
            _kact("b", 2, 10, block="128,1,1", smem_dyn=3072, regs=30, occupancy=5),
            _kact("a", 3, 20, graph=7),                                   # node of a launched a
            _kact("b", 3, 30, graph=7, block="128,1,1", smem_dyn=3072),   # same configuration
            _kact("b", 3, 40, graph=7, block="64,1,1", smem_dyn=3072),    # another block size
            _kact("c", 3, 50, graph=7)]                                   # never launched directly
    got = timing_launch_attrs(kact)
    assert got[0] == {"regs": 12, "smem_static": 0, "smem_dyn": 0, "occupancy": 8}
    assert got[2] == {"regs": 12, "smem_static": 0, "smem_dyn": 0, "occupancy": 8}
    assert got[3] == {"regs": 30, "smem_static": 0, "smem_dyn": 3072, "occupancy": 5}
    # registers are the function's; occupancy depends on the block size, so none is borrowed
    assert got[4] == {"regs": 30, "smem_static": 0, "smem_dyn": 3072}
    assert got[5] == {"smem_static": 0, "smem_dyn": 0}
    # CUPTI's registersPerThread is not the function's register count: never used
    assert all("regs" not in a for a in timing_launch_attrs([_kact("d", 1, 0)]))


def test_kernel_columns_prefer_the_uninstrumented_function(tmp_path):
    klines = [_kline("a", regs=24, occupancy=7),             # instrumented: more registers
              _kline("a", regs=24, occupancy=7, graph_launch=0, node=0),
              _kline("c", regs=40, occupancy=3, graph_launch=0, node=1)]
    kact = [_kact("a", 1, 0, regs=12, occupancy=8),
            _kact("a", 2, 10, graph=5), _kact("c", 2, 20, graph=5)]
    pages, timing = _raw(tmp_path, klines, kact)
    tables, stats = build_tables(pages, timing)
    assert stats["join"]["status"] == "ok"
    k = tables["kernels"]
    # kernel 1 (a graph node) borrows the direct launch's registers and occupancy; kernel 2's
    # function was never launched directly, so the page pass's values stay
    assert k["regs_per_thread"].tolist() == [12, 12, 40]
    assert k["max_blocks_per_sm"].tolist() == [8, 8, 3]
    assert k["smem_dynamic_bytes"].tolist() == [0, 0, 0]
    assert stats["launch_attribute_mismatches"] == 2
    assert stats["launch_attribute_mismatch_examples"][0] == (
        "kernel 0 a: regs 24 (page pass) vs 12 (timing pass), "
        "occupancy 7 (page pass) vs 8 (timing pass)")
    assert stats["warnings"] == []


def test_without_timing_pass_the_page_pass_values_stay(tmp_path):
    pages, _ = _raw(tmp_path, [_kline("a", regs=24, occupancy=7)], None)
    tables, stats = build_tables(pages, None)
    assert tables["kernels"]["regs_per_thread"].tolist() == [24]
    assert tables["kernels"]["max_blocks_per_sm"].tolist() == [7]
    assert stats["launch_attribute_mismatches"] == 0


def test_a_page_pass_that_patched_no_module_is_reported(tmp_path):
    pages, _ = _raw(tmp_path, [_kline("a", n=0), _kline("b", n=0)], None,
                    end={"t": "end", "modules": 0, "modules_loaded_in_tool_calls": 0})
    _, stats = build_tables(pages, None)
    assert stats["kernels_without_pages"] == 2
    (w,) = stats["warnings"]
    assert w.startswith("the page pass patched no module, so its 2 kernels recorded no page")


def test_a_page_pass_that_patched_modules_gives_no_warning(tmp_path):
    # modules loaded inside the collector's own calls are patched all the same: only counted
    pages, _ = _raw(tmp_path, [_kline("a"), _kline("b", n=0)], None,
                    end={"t": "end", "modules": 1, "modules_loaded_in_tool_calls": 2})
    _, stats = build_tables(pages, None)
    assert stats["warnings"] == [] and stats["kernels_without_pages"] == 1


def test_an_incomplete_page_pass_has_no_run_wide_warning(tmp_path):
    pages, _ = _raw(tmp_path, [_kline("a", n=0)], None, end={"t": "meta"})  # no end line
    assert not pages.complete
    _, stats = build_tables(pages, None)
    assert stats["warnings"] == []
