"""Memory grows with the 2 MiB blocks a trace touches, not with reserved bytes: the loader
numbers only touched blocks (src/uvmsim/trace/io.py) and the engine's state follows it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import uvmsim
from helpers import RSS_CHILD_PRELUDE
from uvmsim import reference
from uvmsim.trace.builder import TraceBuilder

PAGE = 4096
TIB = 1 << 40


def _huge_trace(size: int, write: str | None = None):
    """A managed allocation of `size` bytes with a few pages touched in four blocks (one by
    a memcpy only), an 8 MiB buffer touched whole, and a free of the huge range. Returns
    the trace (or writes it to `write`) and the virtual pages of its access rows."""
    b = TraceBuilder()
    big = b.alloc(size)
    small = b.alloc(8 << 20)
    n = size // PAGE
    few = b.pages(big, 0, 3).tolist() + [int(b.pages(big, 1000, 1001)[0]),
                                          int(b.pages(big, n - 1, n)[0])]
    b.memcpy_htod(b.base(big) + (n // 2) * PAGE, 16 * PAGE)
    b.kernel("touch", reads=few, writes=b.pages(small))
    # a page of the memcpy'd block that the memcpy did not cover
    again = few + [int(b.pages(big, n // 2 + 16, n // 2 + 17)[0])]
    b.kernel("again", reads=again)
    b.free(big)
    b.kernel("after", reads=b.pages(small, 0, 4))
    rows = np.array(sorted(few + b.pages(small).tolist()) + again
                    + b.pages(small, 0, 4).tolist(), np.int64)
    if write:
        b.write(write)
        return None, rows
    return b.build(), rows


def _vpage(T, d):
    """Virtual page of dense pages d."""
    blk = T.page_block[d]
    return T.b_first_vpage[blk] + T.page_pos[d].astype(np.int64) - T.b_lo[blk]


@pytest.fixture(scope="module", params=[TIB, 1 << 46], ids=["1TiB", "2^46B"])
def huge(request):
    return _huge_trace(request.param)


def test_only_touched_blocks_are_numbered(huge):
    trace, rows = huge
    T = trace.arrays
    # 4 blocks of the big range (pages 0-2, page 1000, the memcpy, the last page) + 4 small
    assert T.b_alloc.size == 8
    assert T.b_alloc.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert T.page_block.size == 8 * 512
    assert T.a_nblocks.tolist() == [4, 4] and T.a_npages.tolist() == [2048, 2048]
    # every row still names its page, and the memcpy its 16 pages
    assert (_vpage(T, T.row_page) == rows).all()
    base = trace.allocations["base"].to_numpy(np.int64)
    size = int(trace.allocations["size"].iloc[0])
    mid = base[0] // PAGE + size // PAGE // 2
    assert _vpage(T, T.seg_first).tolist() == [mid]
    assert _vpage(T, T.seg_last).tolist() == [mid + 15]
    # the peak still counts what was reserved
    assert trace.peak_blocks == size // (2 << 20) + 4


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_huge_allocation_replays_in_the_memory_of_its_touched_pages(huge, engine):
    trace, _ = huge
    sim = uvmsim.simulate if engine == "fast" else reference.simulate
    r = sim(trace, capacity_chunks=64, prefetch="none", evict="lru2m", keep_state=True)
    S = r.state
    assert S.pstate.size == 8 * 512
    assert S.bres.size == 8 * 8
    assert S.b_chunk.size == 8
    k = r.kernels
    # kernel 1: 5 pages of the big range + 2048 of the small buffer, never populated: all
    # fault and are zero-filled; kernel 2 faults only on its new page; after the free of
    # the big range the small buffer is still resident
    assert k["faults"].tolist() == [5 + 2048, 1, 0]
    assert k["zero_fill_pages"].tolist() == [5 + 2048, 1, 0]
    assert r.summary["htod_bytes_memcpy"] == 16 * PAGE
    assert r.summary["evicted_chunks"] == 0


def test_same_counts_as_a_small_twin(huge):
    """The huge range replays exactly as a small one with the same touched window
    positions: numbering only touched blocks changes no count or time."""
    small, _ = _huge_trace(8 << 20)
    assert small.arrays.b_alloc.size == 8  # every block of the twin is touched
    kw = dict(capacity_chunks=3, prefetch="density", evict="lru2m")
    a = uvmsim.simulate(small, **kw).kernels
    b = uvmsim.simulate(huge[0], **kw).kernels
    cols = ["faults", "htod_bytes", "zero_fill_pages", "evicted_chunks", "dtoh_bytes_evict",
            "stall_ns"]
    assert a["evicted_chunks"].sum() > 0
    assert (a[cols].to_numpy() == b[cols].to_numpy()).all()


_CHILD = RSS_CHILD_PRELUDE + textwrap.dedent("""
    # compile (or load) the engine on a small trace first, so only the huge one is measured
    kw = dict(capacity_chunks=64, prefetch="none", evict="lru2m")
    uvmsim.simulate(load_trace(sys.argv[2]), **kw)
    before = reset_peak()
    r = uvmsim.simulate(load_trace(sys.argv[1]), **kw)
    print(json.dumps({"growth": status("VmHWM") - before,
                      "faults": r.kernels["faults"].tolist()}))
""")


def test_loading_and_replaying_a_tib_reservation_costs_its_touched_pages(tmp_path):
    """Peak RSS of loading and replaying a 1 TiB reservation, in a fresh process. Maps
    sized by reservation would need 2**28 pages x 6 bytes (page_block and page_pos) = 1.5
    GiB, plus a 32 MiB seen-bitmap, before any temporary: the limit is 48 MiB."""
    huge, small = tmp_path / "huge.uvmtrace", tmp_path / "small.uvmtrace"
    _huge_trace(TIB, write=str(huge))
    _huge_trace(8 << 20, write=str(small))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(huge), str(small)],
                         capture_output=True, text=True, timeout=600, env=os.environ.copy())
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["faults"] == [5 + 2048, 1, 0]
    assert got["growth"] < 48 << 20, got
