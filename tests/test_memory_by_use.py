"""Engine state grows with the 2 MiB blocks a trace touches, not with reserved bytes."""
from __future__ import annotations

import time

import numpy as np
import pytest

import uvmsim
from uvmsim import reference
from uvmsim.engine.compact import compact, touched_blocks
from uvmsim.trace.builder import TraceBuilder

PAGE = 4096
TIB = 1 << 40


def _huge_trace(size: int):
    """A managed allocation of `size` bytes with a few pages touched in four blocks (one by
    a memcpy only), an 8 MiB buffer touched whole, and a free of the huge range."""
    b = TraceBuilder()
    big = b.alloc(size)
    small = b.alloc(8 << 20)
    n = size // PAGE
    few = b.pages(big, 0, 3).tolist() + [int(b.pages(big, 1000, 1001)[0]),
                                          int(b.pages(big, n - 1, n)[0])]
    b.memcpy_htod(b.base(big) + (n // 2) * PAGE, 16 * PAGE)
    b.kernel("touch", reads=few, writes=b.pages(small))
    # a page of the memcpy'd block that the memcpy did not cover
    b.kernel("again", reads=few + [int(b.pages(big, n // 2 + 16, n // 2 + 17)[0])])
    b.free(big)
    b.kernel("after", reads=b.pages(small, 0, 4))
    return b.build()


# The engine's arrays cover touched blocks only, which is what this file checks. The
# loader's own arrays (uvmsim/trace/io.py) still number every reserved page, so loading
# costs about 1 s per 8 GiB reserved: 8 GiB (4,096 blocks, 8 touched) keeps CI fast; make
# it 1 TiB once the loader sizes its arrays by use too.
SIZE = 8 << 30


@pytest.fixture(scope="module")
def huge():
    return _huge_trace(SIZE)


def test_only_touched_blocks_get_state(huge):
    T = huge.arrays
    touched = touched_blocks(T)
    # 4 blocks of the big range (pages 0-2, page 1000, the memcpy, the last page) + 4 small
    assert int(touched.sum()) == 8
    assert T.b_alloc.size == SIZE // (2 << 20) + 4
    C = compact(T)
    assert C.b_alloc.size == 8
    assert C.page_block.size == 8 * 512
    # every row and range still names the same (allocation, virtual page)
    vp = lambda A, d: (A.b_first_vpage[A.page_block[d]]  # noqa: E731
                       + A.page_pos[d].astype(np.int64) - A.b_lo[A.page_block[d]])
    assert (vp(C, C.row_page) == vp(T, T.row_page)).all()
    assert (C.b_alloc[C.page_block[C.row_page]] == T.b_alloc[T.page_block[T.row_page]]).all()
    assert (vp(C, C.seg_first) == vp(T, T.seg_first)).all()
    assert (vp(C, C.seg_last) == vp(T, T.seg_last)).all()


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_huge_allocation_replays_in_the_memory_of_its_touched_pages(huge, engine):
    sim = uvmsim.simulate if engine == "fast" else reference.simulate
    kw = dict(capacity_chunks=64, prefetch="none", evict="lru2m", keep_state=True)
    sim(huge, **kw)  # compiles the engine (or loads it from the cache)
    huge._cache.clear()  # and time the engine's view of the trace being built again
    t0 = time.perf_counter()
    r = sim(huge, **kw)
    elapsed = time.perf_counter() - t0
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
    if engine == "fast":
        # the 16 M reserved pages are only range-checked: about 10 ms on a CI core
        assert elapsed < 1.0


def test_same_counts_as_a_small_twin(huge):
    """The huge range replays exactly as a small one with the same touched window
    positions: compaction changes no count or time."""
    small = _huge_trace(8 << 20)
    kw = dict(capacity_chunks=3, prefetch="density", evict="lru2m")
    a = uvmsim.simulate(small, **kw).kernels
    b = uvmsim.simulate(huge, **kw).kernels
    assert compact(small.arrays) is small.arrays  # every block of the twin is touched
    cols = ["faults", "htod_bytes", "zero_fill_pages", "evicted_chunks", "dtoh_bytes_evict",
            "stall_ns"]
    assert a["evicted_chunks"].sum() > 0
    assert (a[cols].to_numpy() == b[cols].to_numpy()).all()


def test_row_page_out_of_range_is_an_error_naming_the_row(huge):
    """The pass that marks touched blocks checks each row's page before it indexes."""
    from uvmsim.errors import ConfigError
    T = huge.arrays
    rows = T.row_page.copy()
    rows[3] = T.page_block.size  # one past the last page
    with pytest.raises(ConfigError, match=r"row_page .* \(access row 3\)"):
        touched_blocks(T._replace(row_page=rows))
    rows[3] = -1
    with pytest.raises(ConfigError, match=r"\(access row 3\)"):
        touched_blocks(T._replace(row_page=rows))
