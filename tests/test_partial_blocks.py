"""The partial_blocks option: a VA block smaller than 2 MiB takes 64 KiB / 4 KiB units of
root chunks it shares with other such blocks, and a shared root chunk is evicted whole
(docs/semantics.md, "Partial blocks")."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import uvmsim
import uvmsim.reference as ref
from uvmsim.engine.arrays import engine_arrays
from uvmsim.engine.state import SHARED, UNITS
from uvmsim.errors import ConfigError
from uvmsim.multi import simulate_multi
from uvmsim.testing.strategies import programs
from uvmsim.trace.builder import TraceBuilder

from helpers import MiB, examples

KiB = 1024
SIMS = [uvmsim.simulate, ref.simulate]


def time_stepping():
    """The issue's time-stepping program: two arrays of 64 MiB + 16 KiB and one of 64 MiB,
    four kernels reading the first two and writing the third: 96 whole blocks and two
    blocks of 4 pages (one 64 KiB unit's room is not needed: 4 KiB units)."""
    b = TraceBuilder()
    xs = [b.alloc(64 * MiB + 16 * KiB), b.alloc(64 * MiB + 16 * KiB), b.alloc(64 * MiB)]
    ps = [b.pages(x) for x in xs]
    for i in range(4):
        b.kernel(f"k{i}", reads=np.concatenate(ps[:2]), writes=ps[2])
    return b.build()


@pytest.mark.parametrize("sim", SIMS)
def test_partial_blocks_share_a_root_chunk_and_do_not_evict(sim):
    t = time_stepping()
    # 98 blocks: every one a chunk of its own, so 97 chunks evict at factor 1
    off = sim(t, capacity_chunks=97)
    assert off.summary["evicted_chunks"] > 0
    # the two 16 KiB blocks take 8 pages of one shared root: 97 root chunks hold it all
    on = sim(t, capacity_chunks=97, partial_blocks=True)
    assert on.summary["evicted_chunks"] == 0
    assert on.summary["dtoh_bytes_evict"] == 0
    assert on.config["partial_blocks"] is True
    # every page is zero-filled once (written on the GPU) and never comes back
    assert on.summary["zero_fill_pages"] == 3 * 16384 + 2 * 4
    assert on.summary["htod_bytes"] == 0
    assert on.summary["sim_time_ns"] < off.summary["sim_time_ns"]


def three_heads_then_a_block():
    """Three 64 KiB allocations (one 64 KiB unit each, all in one shared root), read by k0;
    a 2 MiB allocation k1 writes; k2 reads the first small one again."""
    b = TraceBuilder()
    small = [b.alloc(64 * KiB) for _ in range(3)]
    big = b.alloc(2 * MiB)
    b.kernel("k0", reads=np.concatenate([b.pages(a) for a in small]))
    b.kernel("k1", writes=b.pages(big))
    b.kernel("k2", reads=b.pages(small[0]))
    return b.build()


@pytest.mark.parametrize("sim", SIMS)
def test_a_shared_root_is_evicted_with_every_unit_in_it(sim):
    r = sim(three_heads_then_a_block(), capacity_chunks=1, partial_blocks=True,
            prefetch="none")
    k = r.kernels.set_index("name")
    # k1's block needs the only root chunk: the shared one goes, with all three units
    assert k.loc["k1", "evicted_chunks"] == 1
    assert k.loc["k1", "dtoh_bytes_evict"] == 3 * 64 * KiB
    # k2's allocation faults again (16 pages) and evicts k1's block to come back
    assert k.loc["k2", "faults"] == 16
    assert k.loc["k2", "evicted_chunks"] == 1
    # without the option each small block holds a chunk of its own: k1 evicts one of them
    # (the least recently filled), and k2's is gone too only because k0 filled it first
    off = sim(three_heads_then_a_block(), capacity_chunks=1, prefetch="none")
    assert off.kernels.set_index("name").loc["k0", "evicted_chunks"] == 2


def unaligned_end():
    """64 KiB + 8 KiB: one 64 KiB unit (positions 0-15) and two 4 KiB units (16, 17)."""
    b = TraceBuilder()
    a = b.alloc(72 * KiB)
    b.kernel("k0", writes=b.pages(a))
    return b.build()


def test_units_follow_the_driver_chunk_sizes():
    r = uvmsim.simulate(unaligned_end(), capacity_chunks=2, partial_blocks=True,
                        keep_state=True)
    S = r.state
    roots = np.flatnonzero(S.chunk_block == SHARED)
    assert roots.size == 1
    assert S.r_room[roots[0]] == 512 - 18
    held = np.flatnonzero(S.u_root[:UNITS] >= 0)
    # unit 0 (the 64 KiB group), then positions 16 and 17 of the block's last group
    assert held.tolist() == [0, 48, 49]
    assert S.b_chunk[0] == SHARED


def test_whole_windows_are_unchanged():
    """With every allocation a multiple of 2 MiB, the option changes nothing."""
    b = TraceBuilder()
    x, y = b.alloc(4 * MiB), b.alloc(2 * MiB)
    for i in range(5):
        b.kernel(f"k{i}", reads=b.pages(x if i % 2 else y, 0, 700 if i % 2 else 300))
    t = b.build()
    for cap in (1, 2, 3):
        a = uvmsim.simulate(t, capacity_chunks=cap)
        p = uvmsim.simulate(t, capacity_chunks=cap, partial_blocks=True)
        assert a.kernels.equals(p.kernels)
        assert a.summary == p.summary


def test_partial_blocks_is_refused_where_not_modelled():
    t = unaligned_end()
    with pytest.raises(ConfigError, match="lfu2m.*shared"):
        uvmsim.simulate(t, partial_blocks=True, evict="lfu2m")
    with pytest.raises(ConfigError, match="partial_blocks cannot be combined"):
        uvmsim.simulate(t, partial_blocks=True, small_blocks=True)
    with pytest.raises(ConfigError, match="partial_blocks cannot be combined"):
        uvmsim.simulate(t, partial_blocks=True, remote="driver")
    with pytest.raises(ConfigError, match="partial_blocks is not yet modelled"):
        simulate_multi([t, t], partial_blocks=True)


def check_units(S, T) -> None:
    """The shared roots' bookkeeping after a replay (no fill in progress); T the trace's
    engine arrays."""
    n_chunks = S.chunk_block.size
    whole = S.chunk_block >= 0
    shared = S.chunk_block == SHARED
    assert S.pool[0].n_free == n_chunks - whole.sum() - shared.sum()
    free = set(S.free_stack[:S.pool[0].n_free].tolist())
    assert free == set(np.flatnonzero(S.chunk_block == -1).tolist())
    for r in np.flatnonzero(shared):
        units, u = [], int(S.r_head[r])
        while u >= 0:
            units.append(u)
            assert S.u_root[u] == r
            u = int(S.u_next[u])
        assert units, "a shared root chunk with no unit is free"
        sizes = [16 if u % UNITS < 32 else 1 for u in units]
        assert S.r_room[r] == 512 - sum(sizes) >= 0
    # every held unit holds a resident page; a block's units exist only while it holds any
    for u in np.flatnonzero(S.u_root >= 0):
        slot, k = divmod(int(u), UNITS)
        blk = int(S.slot_block[slot])
        if k < 32:
            lo, hi = k * 16, k * 16 + 15
        else:
            lo = hi = (int(T.b_lo[blk] if k < 48 else T.b_hi[blk]) // 16 * 16) + (k - 32) % 16
        assert T.b_lo[blk] <= lo <= hi <= T.b_hi[blk], f"unit {k} outside block {blk}"
        word = S.bres[blk * 8:(blk + 1) * 8]
        bits = np.unpackbits(word.view(np.uint8), bitorder="little").astype(bool)
        assert bits[lo:hi + 1].any(), f"unit {k} of block {blk} holds no resident page"
        assert S.b_chunk[blk] == SHARED
        assert S.b_nres[blk] == bits.sum()


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(prog=st.booleans().flatmap(lambda packed: programs(v11=True, packed=packed)),
       cap=st.integers(1, 4), batch=st.sampled_from([1, 3, 256]),
       ev=st.sampled_from(["lru2m", "fifo2m", "random2m"]), host=st.booleans())
def test_shared_roots_keep_their_books(prog, cap, batch, ev, host):
    trace = prog.build()
    r = uvmsim.simulate(trace, capacity_chunks=cap, fault_batch_size=batch, evict=ev,
                        host_access=host, partial_blocks=True, keep_state=True)
    check_units(r.state, engine_arrays(trace))
    assert (r.state.chunk_block >= 0).sum() + (r.state.chunk_block == SHARED).sum() <= cap
