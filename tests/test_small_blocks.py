"""The small_blocks option: GPU memory counted in pages, a VA block smaller than 2 MiB taking
only its own pages (docs/semantics.md)."""
from __future__ import annotations

import pytest

import uvmsim
import uvmsim.reference as ref
from uvmsim.errors import ConfigError
from uvmsim.multi import simulate_multi
from uvmsim.trace.builder import TraceBuilder

from helpers import MiB, ping_pong


def small_pair(n: int):
    """Two 64 KiB allocations (16 pages each); n kernels alternate between them."""
    b = TraceBuilder()
    x, y = b.alloc(64 * 1024), b.alloc(64 * 1024)
    px, py = b.pages(x), b.pages(y)
    for i in range(n):
        b.kernel(f"k{i}", reads=px if i % 2 == 0 else py)
    return b.build()


@pytest.mark.parametrize("sim", [uvmsim.simulate, ref.simulate])
def test_small_allocations_share_one_chunk_of_memory(sim):
    t = small_pair(6)
    off = sim(t, capacity_chunks=1)
    on = sim(t, capacity_chunks=1, small_blocks=True)
    # off: each 64 KiB block holds a whole 2 MiB chunk, so every switch evicts the other
    assert off.summary["evicted_chunks"] == 5
    assert off.summary["faults"] == 6 * 16
    # on: 32 pages of 512 fit, each page faults once and nothing is evicted
    assert on.summary["evicted_chunks"] == 0
    assert on.summary["faults"] == 2 * 16
    assert on.config["small_blocks"] is True


def test_partial_window_takes_its_own_pages():
    # 3 MiB: a full 2 MiB block (512 pages) and a 1 MiB block (256 pages): 768 pages do not
    # fit in one chunk's 512, so alternating between them still evicts with the option on
    b = TraceBuilder()
    a = b.alloc(3 * MiB)
    p0, p1 = b.pages(a, 0, 4), b.pages(a, 512, 516)
    for i in range(4):
        b.kernel(f"k{i}", reads=p0 if i % 2 == 0 else p1)
    t = b.build()
    one = uvmsim.simulate(t, capacity_chunks=1, small_blocks=True)
    assert one.summary["evicted_chunks"] == 3
    # two chunks' worth (1,024 pages) hold both
    two = uvmsim.simulate(t, capacity_chunks=2, small_blocks=True)
    assert two.summary["evicted_chunks"] == 0


def test_whole_blocks_count_as_before():
    t = ping_pong(5)
    off = uvmsim.simulate(t, capacity_chunks=1)
    on = uvmsim.simulate(t, capacity_chunks=1, small_blocks=True)
    assert on.summary == off.summary
    assert on.summary["evicted_chunks"] == 4


def test_small_blocks_is_refused_where_not_modelled():
    with pytest.raises(ConfigError, match="small_blocks and remote"):
        uvmsim.simulate(small_pair(2), small_blocks=True, remote="driver")
    with pytest.raises(ConfigError, match="small_blocks"):
        simulate_multi([small_pair(2)], small_blocks=True)
