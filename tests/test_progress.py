"""The progress front-end (option `block_progress`, docs/semantics.md "Progress"): its rules on
hand-built and synthetic v1.2 traces, its defaults, what it refuses, and the engine equal to
the SimPy reference model with it on (hypothesis; HYPOTHESIS_PROFILE=slow for many)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import uvmsim
import uvmsim.reference as ref
from uvmsim.engine.blocks import (MAX_PROGRESS_UNIT, instrumented_concurrency, kernel_slots,
                                  progress_arrays, share_unit_rows)
from uvmsim.errors import ConfigError
from uvmsim.trace import synth
from uvmsim.trace.builder import TraceBuilder
from uvmsim.trace.streams import launch_arrays

from helpers import examples
from test_reference_diff import assert_same

MiB = 1 << 20


def launch(sm_count: int, per_sm: int, n_blocks: int) -> dict:
    return dict(n_blocks=n_blocks, threads_per_block=128, regs_per_thread=32,
                smem_static_bytes=0, smem_dynamic_bytes=0, cluster_blocks=1,
                sm_count=sm_count, max_blocks_per_sm=per_sm)


def three_blocks(slots: int, *, again: bool = False):
    """One kernel of 3 thread blocks over 8 pages of one buffer, each block touching its
    own pages (block 0: 0, 3, 6; block 1: 1, 4; block 2: 2, 5, 7), `slots` resident at once;
    `again`: the same kernel launched a second time."""
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    P = [int(p) for p in b.pages(x, 0, 8)]
    kw = dict(writes=P, launch=launch(1, slots, 3), duration_ns=9000,
              stream_blocks=[(0, 0, 50), (1, 5, 40), (2, 60, 90)],
              stream_rows=[(0, P[0], 0, 2), (0, P[3], 10, 2), (0, P[6], 50, 2),
                           (1, P[1], 0, 2), (1, P[4], 30, 2),
                           (2, P[2], 0, 2), (2, P[5], 20, 2), (2, P[7], 30, 2)],
              stream_unit=12, stream_tick_ns=16)
    b.kernel("k0", **kw)
    if again:
        b.kernel("k1", **kw)
    return b.build()


def run(trace, **kw):
    return uvmsim.simulate(trace, block_progress=True, **kw)


def test_blocks_stall_on_their_own_faults_and_batch_in_arrival_order():
    one, three = three_blocks(1), three_blocks(3)
    a = run(one, prefetch="none")
    b = run(three, prefetch="none")
    # every page faults once either way (each is first touched by one block)
    assert a.summary["faults"] == b.summary["faults"] == 8
    # one slot: a block's fault is alone in the buffer when the driver takes it
    assert a.summary["fault_batches"] == 8
    # three slots: the three first touches at time 0 form one batch
    assert b.summary["fault_batches"] < 8
    # the blocks' waits overlap: less stall with more slots
    assert b.kernels.stall_ns[0] < a.kernels.stall_ns[0]
    for t in (one, three):
        assert_same(run(t, prefetch="none"), ref.simulate(t, block_progress=True, prefetch="none"))


def test_a_fault_free_kernel_takes_its_uninstrumented_time():
    for slots in (1, 2, 3):
        r = run(three_blocks(slots, again=True))
        assert r.kernels.faults[1] == 0
        assert r.kernels.stall_ns[1] == 0.0
        assert r.kernels.sim_ns[1] == 9000.0
        # the first launch faulted: it took longer
        assert r.kernels.stall_ns[0] > 0.0


def test_synthetic_fill_factor_one_second_kernel_has_no_stall():
    tr = synth.make("grid_stride_fill", footprint_bytes=4 * MiB, grid=32, block=256,
                    sm_count=2, max_blocks_per_sm=4, kernels=2)
    r = run(tr)
    assert r.kernels.faults[1] == 0 and r.kernels.stall_ns[1] == 0.0
    assert r.kernels.sim_ns[1] == pytest.approx(r.kernels.compute_ns[1], rel=1e-12)


def test_evicted_pages_fault_again_and_the_fill_thrashes():
    tr = synth.make("block_slice_fill", footprint_bytes=8 * MiB, grid=32, block=256,
                    sm_count=4, max_blocks_per_sm=2)
    pages = int(tr.arrays.row_page.size)
    fits = run(tr)
    small = run(tr, oversub=3)
    assert fits.summary["faults"] <= pages
    # pages made resident, evicted before their block touched them, fault again
    assert small.summary["faults"] > pages
    assert small.summary["evicted_chunks"] > 0
    assert small.summary["sim_time_ns"] > 10 * fits.summary["sim_time_ns"]


def test_off_by_default_and_kernels_without_streams_replay_their_page_set():
    tr = synth.make("grid_stride_fill", footprint_bytes=4 * MiB, grid=32, block=256,
                    sm_count=2, max_blocks_per_sm=4)
    base = uvmsim.simulate(tr, oversub=1.5)
    assert base.config["block_progress"] is False
    assert uvmsim.simulate(tr, oversub=1.5, block_progress=False).summary == base.summary
    v11 = synth.make("sequential", footprint_bytes=8 * MiB, kernels=2)
    assert_same(run(v11, oversub=2), uvmsim.simulate(v11, oversub=2))


def two_blocks_at_16k():
    """One kernel of 2 thread blocks over pages 0-2 and 4-6 of a buffer, its stream at unit
    16 KiB (4-page windows): block 0 first touches P0, P2 and P4, block 1 P1, P5 and P6."""
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    P = [int(p) for p in b.pages(x, 0, 8)]
    touches = [(0, P[0], 0, 2), (0, P[4], 100, 2), (1, P[1], 0, 2), (1, P[5], 50, 2),
               (0, P[2], 10, 2), (1, P[6], 70, 2)]
    b.kernel("k", writes=[P[i] for i in (0, 1, 2, 4, 5, 6)], launch=launch(1, 2, 2),
             duration_ns=5000, touches=touches, stream_unit=14, stream_tick_ns=1)
    return b.build()


def test_a_coarse_unit_row_stands_for_the_kernels_pages_in_it():
    """Unit 16 KiB: a row is the kernel's access pages in the 4-page window; the block
    waits until all of them are resident."""
    tr = two_blocks_at_16k()
    assert tr.streams.k_unit[0] == 14 and tr.streams.n_rows == 4
    r = run(tr, prefetch="none")
    assert r.summary["faults"] == 6  # each access page once, though 4 rows name 2 of them
    assert_same(r, ref.simulate(tr, block_progress=True, prefetch="none"))


# ------------------------------------------------------------------ share_units
def test_share_units_gives_a_coarse_row_its_blocks_pages():
    """The unit-16 KiB kernel above: block 0 names P0 (and P4), block 1 P1 (and P5) in
    their windows; shared, block 0's row in window 0 spans P0 (up to block 1's P1), block
    1's P1 and P2 (to the window's end); the window 4..7 the same with P4 and P5, P6."""
    tr = two_blocks_at_16k()
    arrays = {s: progress_arrays(tr.arrays, tr.streams, launch_arrays(tr), share_units=s)
              for s in (False, True)}

    def spans(a):  # per stream row (block order), the pages it stands for
        page = tr.arrays.row_page[a["fe_acc"]]
        return [sorted(int(tr.arrays.page_pos[d]) for d in page[lo:hi])
                for lo, hi in zip(a["fe_rlo"], a["fe_rhi"])]
    assert spans(arrays[False]) == [[0, 1, 2], [4, 5, 6], [0, 1, 2], [4, 5, 6]]
    assert spans(arrays[True]) == [[0], [4], [1, 2], [5, 6]]
    r = run(tr, prefetch="none", share_units=True)
    assert r.config["share_units"] is True
    assert r.summary["faults"] == 6
    assert_same(r, ref.simulate(tr, block_progress=True, prefetch="none", share_units=True))


@pytest.mark.parametrize("unit", [14, 16])
def test_share_units_recovers_a_grid_stride_fills_pages_from_a_coarse_stream(unit):
    """A grid-stride fill whose stride is 64 KiB (64 blocks x 1 KiB): every block touches
    one page per unit of 16 or 64 KiB, its first touch there, so the coarse stream shared
    out is the 4 KiB stream: the same replay, fault for fault. Unshared, every block waits
    for all of its unit's pages. (At a unit wider than the stride a block's later touches
    of the unit are not in the stream, shared or not.)"""
    kw = dict(footprint_bytes=4 * MiB, grid=64, block=256, sm_count=2, max_blocks_per_sm=4)
    fine = synth.make("grid_stride_fill", **kw)
    coarse = synth.make("grid_stride_fill", stream_unit=unit, **kw)
    assert fine.streams.k_unit.tolist() == [12] and coarse.streams.k_unit.tolist() == [unit]
    for cap in (None, 1):
        o = {} if cap is None else {"capacity_chunks": cap}
        want = run(fine, **o)
        got = run(coarse, share_units=True, **o)
        assert got.summary == want.summary
        assert got.summary["sim_time_ns"] == want.summary["sim_time_ns"]
        assert run(coarse, **o).summary["faults"] > want.summary["faults"]
        assert_same(got, ref.simulate(coarse, block_progress=True, share_units=True, **o))
    # at unit 4 KiB there is nothing to share
    assert_same(run(fine, share_units=True, oversub=2), run(fine, oversub=2))


@st.composite
def unit_rows(draw):
    """Rows of one kernel: units (spans lo..hi over a sorted page index) and, per row, the
    index of the page it names inside its unit."""
    lo, hi, own = [], [], []
    start = 0
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 9))
        for _ in range(draw(st.integers(1, 6))):
            lo.append(start)
            hi.append(start + n)
            own.append(start + draw(st.integers(0, n - 1)))
        start += n
    perm = draw(st.permutations(range(len(lo))))
    return tuple(np.array(v, np.int64)[list(perm)] for v in (own, lo, hi))


@settings(max_examples=examples(100), deadline=None)
@given(rows=unit_rows())
def test_share_unit_rows_partitions_each_unit_between_its_rows(rows):
    own, lo, hi = rows
    a, b = share_unit_rows(own, lo, hi)
    assert ((lo <= a) & (a < b) & (b <= hi)).all()
    assert ((a <= own) & (own < b)).all()  # a row keeps the page it names
    for u in np.unique(lo):
        m = lo == u
        cover = np.zeros(int(hi[m][0] - u), int)
        for x, y in zip(a[m], b[m]):
            cover[x - u:y - u] += 1
        assert (cover > 0).all()  # every page of the unit goes to some row
        # rows naming the same page share one span; others' spans do not overlap
        spans = {(int(x), int(y)) for x, y in zip(a[m], b[m])}
        assert len(spans) == len(np.unique(own[m]))
        assert (cover <= 1).all() or len(spans) < m.sum()
        assert sum(y - x for x, y in spans) == hi[m][0] - u


def test_share_units_refused_without_block_progress():
    with pytest.raises(ConfigError, match="share_units"):
        uvmsim.simulate(three_blocks(1), share_units=True)


def test_a_unit_coarser_than_a_va_block_replays_the_page_set():
    """Unit 4 MiB (coarser than MAX_PROGRESS_UNIT): a row would be every access page of the
    kernel in 4 MiB, so the kernel replays its page set; at unit 2 MiB it replays blocks."""
    def kernel_at(unit: int):
        b = TraceBuilder()
        x = b.alloc(4 * MiB, name="x")
        P = [int(p) for p in b.pages(x, 0, 1024)]
        touches = [(0, P[0], 0, 2), (1, P[600], 0, 2)]
        b.kernel("k", writes=[P[i] for i in range(0, 1024, 8)], launch=launch(1, 2, 2),
                 duration_ns=5000, touches=touches, stream_unit=unit, stream_tick_ns=1)
        return b.build()
    coarse, fine = kernel_at(MAX_PROGRESS_UNIT + 1), kernel_at(MAX_PROGRESS_UNIT)
    streams = coarse.streams
    assert streams.k_unit[0] == 22
    assert kernel_slots(streams, launch_arrays(coarse))[0] == 0
    assert kernel_slots(fine.streams, launch_arrays(fine))[0] == 2
    kw = dict(prefetch="none", fault_batch_size=8)
    # the coarse kernel's replay is its page set's, in the engine and the reference alike
    assert_same(run(coarse, **kw), uvmsim.simulate(coarse, **kw))
    assert_same(ref.simulate(coarse, block_progress=True, **kw), uvmsim.simulate(coarse, **kw))
    # at 2 MiB the blocks replay their rows (one window each), engine as the reference
    assert_same(run(fine, **kw), ref.simulate(fine, block_progress=True, **kw))


def test_a_coarse_kernel_refaults_across_its_slices_only_with_slices_on():
    """A kernel too coarse for its stream (unit 4 MiB) replays its page set, which holds each
    page once: it cannot fault again on a page it lost. Its v1.1 slices can: here it reads
    three 2 MiB windows in slice 0 and again in slice 1 with room for two, so with `slices`
    every window is lost before its second read (docs/validation.md, gemm "with slices")."""
    b = TraceBuilder()
    x = b.alloc(6 * MiB, name="x")
    P = [int(p) for p in b.pages(x, 0, 1536)]
    W = [P[0], P[512], P[1024]]  # one page in each window
    unit = MAX_PROGRESS_UNIT + 1
    first = {}  # a row (block 0) naming the first page of each 4 MiB unit the kernel touches
    for w in W:
        first.setdefault(w >> (unit - 12), w)
    touches = [(0, w, t, 1) for t, w in enumerate(first.values())]
    b.kernel("k", reads=W, slices=[0b11, 0b11, 0b11], launch=launch(1, 2, 1),
             duration_ns=5000, touches=touches, stream_unit=unit, stream_tick_ns=1)
    tr = b.build()
    kw = dict(prefetch="none", capacity_bytes=4 * MiB, fault_batch_size=1)
    off = run(tr, **kw)
    on = run(tr, slices=True, **kw)
    assert off.summary["faults"] == 3                     # each page once: no refault
    assert on.summary["faults"] == 6                      # every window again in slice 1
    assert on.summary["evicted_chunks"] == 4 and off.summary["evicted_chunks"] == 1
    # the page-set front-end's slices rule, in the engine and the reference alike
    assert_same(on, uvmsim.simulate(tr, slices=True, **kw))
    assert_same(ref.simulate(tr, block_progress=True, slices=True, **kw), on)


def test_slots_default_to_the_instrumented_runs_concurrency():
    assert instrumented_concurrency(np.array([0, 5, 60]), np.array([50, 40, 90])) == 2
    assert instrumented_concurrency(np.array([0, 10]), np.array([10, 20])) == 2  # touching
    assert instrumented_concurrency(np.array([0, 11]), np.array([10, 20])) == 1
    tr = three_blocks(2)
    la = launch_arrays(tr)
    assert kernel_slots(tr.streams, la).tolist() == [2]
    unknown = la._replace(max_blocks_per_sm=np.array([-1]))
    assert kernel_slots(tr.streams, unknown).tolist() == [2]  # blocks 0 and 1 overlap
    none_fits = la._replace(max_blocks_per_sm=np.array([0]))
    assert kernel_slots(tr.streams, none_fits).tolist() == [2]
    big = la._replace(sm_count=np.array([100]))
    assert kernel_slots(tr.streams, big).tolist() == [3]  # never more than the blocks


def test_refused_combinations(tmp_path):
    tr = three_blocks(1)
    with pytest.raises(ConfigError, match="translation"):
        run(tr, translation=True)
    with pytest.raises(ConfigError, match="thrashing"):
        run(tr, thrashing=True)
    with pytest.raises(ConfigError, match="fault_latency_ns"):
        run(tr, fault_latency_ns=-1.0)
    p = synth.write("grid_stride_fill", tmp_path / "g.uvmtrace", footprint_bytes=2 * MiB,
                    grid=8, block=256, sm_count=1, max_blocks_per_sm=2)
    with pytest.raises(ConfigError, match="streamed"):
        run(uvmsim.load_trace(p, stream=True))


def test_fault_latency_delays_the_driver_and_fills_batches():
    tr = synth.make("grid_stride_fill", footprint_bytes=4 * MiB, grid=32, block=256,
                    sm_count=2, max_blocks_per_sm=4)
    a = run(tr, prefetch="none")
    b = run(tr, prefetch="none", fault_latency_ns=20_000.0)
    assert a.summary["faults"] == b.summary["faults"]
    assert b.summary["fault_batches"] < a.summary["fault_batches"]
    assert_same(b, ref.simulate(tr, block_progress=True, prefetch="none", fault_latency_ns=20_000.0))


# ------------------------------------------------------------------ engine == reference
KINDS = {
    "grid_stride_fill": lambda d: dict(footprint_bytes=d(st.sampled_from([2, 4, 6])) * MiB,
                                       grid=d(st.sampled_from([4, 16, 48])), block=256,
                                       kernels=d(st.integers(1, 2)),
                                       stream_unit=d(st.sampled_from([None, 14, 16]))),
    "block_slice_fill": lambda d: dict(footprint_bytes=d(st.sampled_from([2, 4, 6])) * MiB,
                                       grid=d(st.sampled_from([4, 16, 48])), block=256,
                                       stream_unit=d(st.sampled_from([None, 16]))),
    "gemm": lambda d: dict(m=128, n=d(st.sampled_from([128, 256])), k=128, tile=32,
                           k_step=32),
}


@st.composite
def progress_cases(draw):
    kind = draw(st.sampled_from(sorted(KINDS)))
    kw = KINDS[kind](draw)
    kw.update(sm_count=draw(st.integers(1, 3)), max_blocks_per_sm=draw(st.integers(1, 4)),
              seed=draw(st.integers(0, 3)))
    opts = dict(capacity_chunks=draw(st.integers(1, 4)),
                fault_batch_size=draw(st.sampled_from([1, 3, 8, 256])),
                fault_latency_ns=draw(st.sampled_from([0.0, 500.0, 5000.0])),
                store_ahead=draw(st.sampled_from([0, 0, 1, 4, 64])),
                fault_order=draw(st.sampled_from(["arrival", "age"])),
                share_units=draw(st.booleans()),
                evict=draw(st.sampled_from(["lru2m", "lru2m_access"])))
    if opts["store_ahead"]:
        opts["sm_store_pool"] = draw(st.sampled_from([0, 1, 4, 16]))
    return kind, kw, opts


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=progress_cases())
def test_engine_equals_reference_with_progress(case):
    kind, kw, opts = case
    tr = synth.make(kind, **kw)
    assert_same(run(tr, **opts), ref.simulate(tr, block_progress=True, **opts))


def test_exposed_in_the_cli_and_sweeps(tmp_path, capsys):
    from uvmsim.cli import main
    from uvmsim.multi import simulate_multi
    from uvmsim.sweep import sweep
    p = synth.write("grid_stride_fill", tmp_path / "g.uvmtrace", footprint_bytes=2 * MiB,
                    grid=8, block=256, sm_count=1, max_blocks_per_sm=2)
    want = run(uvmsim.load_trace(p), oversub=2)
    assert main(["replay", str(p), "--oversub", "2", "--block-progress", "--json"]) == 0
    import json
    assert json.loads(capsys.readouterr().out) == want.summary
    df = sweep([str(p)], oversub=[2.0], prefetch=["density"], evict=["lru2m"],
               block_progress=True, progress=False, executor="serial")
    assert df["faults"].tolist() == [want.summary["faults"]]
    assert df["sim_time_ns"].tolist() == [want.summary["sim_time_ns"]]
    assert want.summary["sim_time_ns"] != uvmsim.simulate(p, oversub=2).summary["sim_time_ns"]
    with pytest.raises(ConfigError, match="several tenants"):
        simulate_multi([p, p], block_progress=True)


# ------------------------------------------------------------------ store_ahead
def test_store_ahead_lets_a_writing_block_run_on_to_its_next_faults():
    """three_blocks' rows are writes: with store_ahead the lone slot's block leaves its
    faults outstanding and runs on, so they share batches and the kernel stalls less; each
    block still ends only once its stores have landed (every page faulted and resident)."""
    t = three_blocks(1)
    base = run(t, prefetch="none")
    for sa in (1, 3, 64):
        r = run(t, prefetch="none", store_ahead=sa)
        assert r.summary["faults"] == base.summary["faults"] == 8
        assert r.summary["htod_bytes"] == base.summary["htod_bytes"]
        assert_same(r, ref.simulate(t, block_progress=True, prefetch="none", store_ahead=sa))
    three = run(t, prefetch="none", store_ahead=3)
    # block 0's three rows go out together, then block 1's two, then block 2's three
    assert three.summary["fault_batches"] < base.summary["fault_batches"]
    assert three.kernels.stall_ns[0] < base.kernels.stall_ns[0]
    # one slot of outstanding stores: each row's fault waits for the one before it to land,
    # so the block still faults one page at a time
    assert run(t, prefetch="none", store_ahead=1).summary["fault_batches"] == 8


def test_store_ahead_does_not_let_a_block_pass_a_page_it_reads():
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    P = [int(p) for p in b.pages(x, 0, 4)]
    b.kernel("k", reads=P, launch=launch(1, 1, 1), duration_ns=4000,
             stream_blocks=[(0, 0, 40)],
             stream_rows=[(0, p, 10 * i, 1) for i, p in enumerate(P)],
             stream_unit=12, stream_tick_ns=16)
    t = b.build()
    a = run(t, prefetch="none")
    for sa in (1, 8):
        r = run(t, prefetch="none", store_ahead=sa)
        assert r.summary == a.summary
        assert_same(r, ref.simulate(t, block_progress=True, prefetch="none", store_ahead=sa))
    assert a.summary["fault_batches"] == 4


def test_store_ahead_refusals():
    t = three_blocks(1)
    with pytest.raises(ConfigError, match="store_ahead"):
        run(t, store_ahead=-1)
    with pytest.raises(ConfigError, match="block_progress"):
        uvmsim.simulate(t, store_ahead=4)


# ------------------------------------------------------------------ fault_order
def young_first(sm_count: int, per_sm: int):
    """Four thread blocks reading a page each, all resident: blocks 2 and 3 fault at time 0,
    blocks 0 and 1 at 10 ns (during the first service); block 3 has a long run after its
    fault, the others end soon after theirs."""
    b = TraceBuilder()
    x = b.alloc(2 * MiB, name="x")
    P = [int(p) for p in b.pages(x, 0, 4)]
    b.kernel("k", reads=P, launch=launch(sm_count, per_sm, 4), duration_ns=5000,
             stream_blocks=[(0, 0, 20), (1, 0, 20), (2, 0, 12), (3, 0, 5000)],
             stream_rows=[(0, P[0], 10, 1), (1, P[1], 10, 1), (2, P[2], 0, 1),
                          (3, P[3], 0, 1)])
    return b.build()


def test_fault_order_age_serves_the_blocks_oldest_on_their_sm_first():
    """Batches of one fault. In arrival order block 3's fault is served second and its long
    run overlaps the last two services; by age (two SMs: blocks 0 and 1 are first on
    theirs, 2 and 3 second) it is served last, so the kernel ends later. With one block per
    SM every block is first on its SM and the orders agree."""
    t = young_first(2, 2)
    kw = dict(prefetch="none", fault_batch_size=1)
    arrival = run(t, **kw)
    age = run(t, fault_order="age", **kw)
    assert age.summary["faults"] == arrival.summary["faults"] == 4
    assert age.summary["fault_batches"] == arrival.summary["fault_batches"] == 4
    assert age.summary["sim_time_ns"] > arrival.summary["sim_time_ns"]
    for r, order in ((arrival, "arrival"), (age, "age")):
        assert_same(r, ref.simulate(t, block_progress=True, fault_order=order, **kw))
    flat = young_first(4, 1)
    assert run(flat, fault_order="age", **kw).summary == run(flat, **kw).summary


def test_fault_order_refusals():
    t = three_blocks(1)
    with pytest.raises(ConfigError, match="fault_order"):
        run(t, fault_order="lifo")
    with pytest.raises(ConfigError, match="block_progress"):
        uvmsim.simulate(t, fault_order="age")


# ------------------------------------------------------------------ sm_store_pool
def faulter_and_hitter():
    """A first kernel writes 8 pages H (they stay resident); then one SM runs two blocks:
    block 0 stores into 8 fresh pages F, one every 10 ns, and ends; block 1 stores into H,
    one every 10 ns (it never faults), then computes for 2 ms, longer than the faults take."""
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    H = [int(p) for p in b.pages(x, 0, 8)]
    F = [int(p) for p in b.pages(x, 512, 520)]  # in the second 2 MiB block
    b.kernel("warm", writes=H, duration_ns=1000)
    b.kernel("pair", writes=F + H, launch=launch(1, 2, 2), duration_ns=2_000_000,
             stream_blocks=[(0, 0, 100), (1, 0, 2_000_000)],
             stream_rows=[(0, p, 10 * i, 2) for i, p in enumerate(F)]
             + [(1, p, 10 * i, 2) for i, p in enumerate(H)])
    return b.build()


def test_sm_store_pool_holds_back_every_block_on_the_sm():
    """With a pool of 2 the faulting block's stores keep its SM's pool full, so the block
    that never faults waits at its second row until they have landed, as on the GPU (a
    faulting block stalls its SM: docs/validation.md), and its 2 ms of compute come
    after the faults instead of beside them; with a pool larger than the stores, or none,
    it runs through."""
    t = faulter_and_hitter()
    kw = dict(prefetch="none", store_ahead=8, fault_batch_size=1)
    free = run(t, **kw)
    held = run(t, sm_store_pool=2, **kw)
    assert held.summary["faults"] == free.summary["faults"] == 16
    assert free.kernels.stall_ns[1] == 0  # the faults fit inside block 1's compute
    assert held.kernels.stall_ns[1] > 500_000  # block 1 waited for most of them
    assert run(t, sm_store_pool=9, **kw).summary == free.summary  # never full
    for r, pool in ((free, 0), (held, 2)):
        assert_same(r, ref.simulate(t, block_progress=True, sm_store_pool=pool, **kw))


def test_sm_store_pool_refusals():
    t = three_blocks(1)
    with pytest.raises(ConfigError, match="sm_store_pool"):
        run(t, store_ahead=4, sm_store_pool=-1)
    with pytest.raises(ConfigError, match="store_ahead"):
        run(t, sm_store_pool=4)
