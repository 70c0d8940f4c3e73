"""Multi-tenant replay: per-tenant and system metrics, and the tenant-level components
(page-table walkers, kernel scheduling) on tiny hand-made tenant mixes whose times are
worked out by hand below."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import uvmsim
from uvmsim.config import Translation, get_model
from uvmsim.engine.link import transfer_ns
from uvmsim.multi import simulate_multi, system_metrics
from uvmsim.trace.builder import TraceBuilder

from uvmsim.testing.strategies import programs
from test_reference_diff import assert_same

PAGE = 4096


def copy_then_two_kernels():
    """memcpy_htod of one page, then kernels of 1000 ns and 3000 ns that read it (and a host
    page, which is never translated): no faults, so only the copy uses the driver."""
    b = TraceBuilder()
    a = b.alloc(2 << 20)
    h = b.alloc(2 << 20, kind="host")
    p = int(b.pages(a, 0, 1)[0])
    b.memcpy_htod(b.base(a), PAGE)
    b.kernel(reads=[p], duration_ns=1000)
    b.kernel(reads=[p, int(b.pages(h, 0, 1)[0])], duration_ns=3000)
    return b.build()


def test_tenant_and_system_metrics_by_hand():
    t = copy_then_two_kernels()
    x = transfer_ns(get_model().hardware.record(), PAGE)    # the copy holds the driver x ns
    mr = simulate_multi([t, t], capacity_chunks=4, prefetch="none",
                        translation=Translation(walkers=1))
    # tenant 0 copies in [0, x]; tenant 1's copy waits for the driver, [x, 2x]; kernels do
    # not share compute and their one walk (67.5 ns) hides under 1000 ns of compute
    alone = x + 4000
    assert mr.alone_ns == pytest.approx([alone, alone])
    assert mr.finish_ns == pytest.approx([alone, 2 * x + 4000])
    tab = mr.table
    s1 = (2 * x + 4000) / alone
    assert tab["slowdown"].tolist() == pytest.approx([1.0, s1])
    # latencies 1000 and 3000: p99 = 1000 + 0.99 * 2000
    assert tab["p99_kernel_ns"].tolist() == pytest.approx([2980.0, 2980.0])
    assert tab["faults_per_s"].tolist() == [0.0, 0.0]
    # two lookups each (the host page is not translated): the first walks, the second hits
    # the entry that walk filled
    assert tab["tlb_lookups"].tolist() == [2, 2]
    assert tab["tlb_miss_ratio"].tolist() == [0.5, 0.5]
    assert tab["walk_queue_ns_per_walk"].tolist() == [0.0, 0.0]
    assert tab["driver_wait_ns"].tolist() == pytest.approx([0.0, x])
    assert mr.system["stp"] == pytest.approx(1 + 1 / s1)
    assert mr.system["antt"] == pytest.approx((1 + s1) / 2)
    assert mr.system["fairness"] == pytest.approx(1 / s1)


def test_faults_per_second_and_no_translation():
    b = TraceBuilder()
    a = b.alloc(2 << 20)
    b.kernel(reads=[int(p) for p in b.pages(a, 0, 3)], duration_ns=5000)
    t = b.build()
    mr = simulate_multi([t], capacity_chunks=2, prefetch="none", fault_batch_size=256)
    r = mr.tenants[0]
    assert r.summary["faults"] == 3
    assert mr.table["faults_per_s"][0] == pytest.approx(3 / (mr.finish_ns[0] * 1e-9))
    # alone it is its own mix: slowdown 1, STP 1, fairness 1
    assert mr.system == pytest.approx({"stp": 1.0, "antt": 1.0, "fairness": 1.0})
    # nothing is looked up without translation
    assert mr.table["tlb_lookups"][0] == 0 and math.isnan(mr.table["tlb_miss_ratio"][0])
    assert math.isnan(mr.table["walk_queue_ns_per_walk"][0])


def test_system_metrics_definitions():
    m = system_metrics([1.0, 2.0, 4.0])
    assert m["stp"] == pytest.approx(1 + 0.5 + 0.25)
    assert m["antt"] == pytest.approx(7 / 3)
    assert m["fairness"] == pytest.approx(0.25)
    assert all(math.isnan(v) for v in system_metrics([1.0, float("nan")]).values())


def test_lookups_count_each_slice_pass():
    from uvmsim.multi import tlb_lookups
    b = TraceBuilder()
    a = b.alloc(2 << 20)
    p = [int(x) for x in b.pages(a, 0, 3)]
    # rows in slices {0}, {0,1}, {0,1,2} of a 3-slice kernel: 1 + 2 + 3 passes
    b.kernel(rows=[(q, 1) for q in p], slices=[1, 3, 7], n_slices=3)
    t = b.build()
    assert tlb_lookups(t, slices=False) == 3
    assert tlb_lookups(t, slices=True) == 6
    mr = simulate_multi([t], capacity_chunks=2, slices=True, translation=True)
    assert mr.table["tlb_lookups"][0] == 6
    assert mr.table["tlb_miss_ratio"][0] == pytest.approx(
        mr.tenants[0].extra["tlb_misses"] / 6)
    assert np.isfinite(mr.table["p99_kernel_ns"][0])
    assert uvmsim.simulate_multi is simulate_multi


# ------------------------------------------------------------------ page-table walkers
WALK = Translation(walkers=2, walk_ns=100.0)


def burst(n_pages: int, duration_ns: float):
    """One kernel reading n_pages distinct pages of one block (each misses and walks)."""
    b = TraceBuilder()
    a = b.alloc(2 << 20)
    b.kernel(reads=[int(p) for p in b.pages(a, 0, n_pages)], duration_ns=duration_ns)
    return b.build()


def host_only():
    """A kernel that only reads host memory: it never translates, so never walks."""
    b = TraceBuilder()
    h = b.alloc(2 << 20, kind="host")
    b.kernel(reads=[int(b.pages(h, 0, 1)[0])], duration_ns=1000)
    return b.build()


@pytest.mark.parametrize("walkers,q0,q1", [
    # tenant 0 issues 64 walks at t=0 (0 ns compute), then tenant 1 one walk at t=0.
    # shared: two walkers serve tenant 0's burst in pairs, walk j waits (j // 2) * 100 ns;
    # tenant 1's walk waits for the burst to drain: 32 * 100 ns
    ("shared", 2 * 100 * sum(range(32)), 3200.0),
    # partitioned: tenant 0 has walker 0 only (walk j waits j * 100 ns); tenant 1's own
    # walker 1 is free: the burst cannot delay it
    ("partitioned", 100 * sum(range(64)), 0.0),
    # dws: walk 0 takes its own walker 0, walk 1 tenant 1's idle walker 1, walks 2..63
    # queue for walker 0 (walk j waits (j - 1) * 100 ns); tenant 1's walk finds its walker
    # busy with tenant 0's walk until 100 ns
    ("dws", 100 * sum(range(1, 63)), 100.0),
])
def test_walker_components_on_a_burst(walkers, q0, q1):
    mr = simulate_multi([burst(64, 0), burst(1, 0)], capacity_chunks=4, prefetch="none",
                        translation=WALK, walkers=walkers)
    assert mr.config["walkers"] == walkers
    assert mr.table["page_walks"].tolist() == [64, 1]
    assert mr.table["walk_queue_ns"].tolist() == pytest.approx([q0, q1])
    ref = simulate_multi([burst(64, 0), burst(1, 0)], capacity_chunks=4, prefetch="none",
                         translation=WALK, walkers=walkers, engine="reference")
    assert ref.table["walk_queue_ns"].tolist() == pytest.approx([q0, q1])
    # alone runs use the whole GPU whatever the component: same for every choice
    assert mr.alone[0].extra["walk_queue_ns"] == pytest.approx(2 * 100 * sum(range(32)))


def test_dws_lends_an_idle_tenants_walkers():
    """Rows every 50 ns, walks of 100 ns: one walker cannot keep up, two can. Tenant 1
    never walks, so with dws its idle walker serves every other walk of tenant 0."""
    mix = [burst(64, 3200), host_only()]
    q = {w: simulate_multi(mix, capacity_chunks=4, prefetch="none", translation=WALK,
                           walkers=w).tenants[0].extra["walk_queue_ns"]
         for w in ("partitioned", "dws", "shared")}
    # partitioned: walk j issues at 50 j and starts at 100 j
    assert q["partitioned"] == pytest.approx(50 * sum(range(64)))
    assert q["dws"] == 0.0 and q["shared"] == 0.0


def test_partitioned_slices_the_tlb():
    """A direct-mapped TLB of 2 sets: tenant 0's two pages fall in different sets of the
    whole TLB, but in the same (only) set of its half when the TLB is sliced."""
    b = TraceBuilder()
    a = b.alloc(2 << 20)
    p = [int(x) for x in b.pages(a, 0, 2)]
    b.memcpy_htod(b.base(a), 2 * PAGE)
    b.kernel(reads=p)
    b.kernel(reads=p)
    mix = [b.build(), host_only()]
    tr = Translation(tlb_entries=2, ways=1, walkers=2)
    shared = simulate_multi(mix, capacity_chunks=4, translation=tr)
    part = simulate_multi(mix, capacity_chunks=4, translation=tr, walkers="partitioned")
    assert shared.table["tlb_misses"][0] == 2          # the second kernel hits both
    assert part.table["tlb_misses"][0] == 4            # each page evicts the other
    assert part.table["tlb_miss_ratio"][0] == 1.0


def test_walker_component_errors():
    t = burst(2, 0)
    with pytest.raises(uvmsim.ConfigError, match="at least 3 walkers"):
        simulate_multi([t, t, t], translation=WALK, walkers="partitioned")
    with pytest.raises(uvmsim.ConfigError, match="TLB sets"):
        simulate_multi([t, t, t], translation=Translation(tlb_entries=2, ways=1, walkers=4),
                       walkers="partitioned")
    with pytest.raises(uvmsim.ConfigError, match="unknown walker component"):
        simulate_multi([t], translation=WALK, walkers="nope")


def engine_equals_reference(traces, **kw):
    """simulate_multi on the engine and on the reference model: every tenant's result
    (shared and alone) and every finish time agree; returns both."""
    a = simulate_multi(traces, **kw)
    b = simulate_multi(traces, engine="reference", **kw)
    for x, y in zip(a.tenants + a.alone, b.tenants + b.alone):
        assert_same(x, y)
    np.testing.assert_allclose(a.finish_ns, b.finish_ns, rtol=1e-9, atol=1e-6)
    return a, b


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(progs=st.lists(programs(max_ops=6), min_size=1, max_size=3),
       kw=st.fixed_dictionaries({"capacity_chunks": st.integers(1, 4),
                                 "fault_batch_size": st.sampled_from([1, 3, 256])}),
       # one non-default component at a time: each combination is an engine of its own
       parts=st.sampled_from([("shared", "interleave"), ("partitioned", "interleave"),
                              ("dws", "interleave"), ("shared", "mfit")]),
       tr=st.builds(lambda ways, sets, ps, n, walk: Translation(
           tlb_entries=ways * sets, ways=ways, page_size=ps, walkers=n, walk_ns=walk),
           st.integers(1, 4), st.integers(3, 8), st.sampled_from([4096, 65536]),
           st.integers(3, 6), st.sampled_from([1.0, 67.52, 250.0, 5000.0])))
def test_components_engine_equals_reference(progs, kw, parts, tr):
    traces = [p.build() for p in progs]
    walkers, sched = parts
    # prefetch "none", as in the tests above: one compiled engine per component pair
    a, b = engine_equals_reference(traces, translation=tr, walkers=walkers, scheduler=sched,
                                   prefetch="none", **kw)
    np.testing.assert_allclose(a.table["sched_wait_ns"], b.table["sched_wait_ns"],
                               rtol=1e-9, atol=1e-6)
    # each tenant's clock is the time its own events took, waits included
    for r, c in zip(a.tenants, a.finish_ns):
        assert math.isclose(c, r.summary["sim_time_ns"], rel_tol=1e-9, abs_tol=1e-6)


# ------------------------------------------------------------------ kernel scheduling
def two_blocks_twice():
    """Kernels reading page 0 of blocks 0 and 1, twice: a working set of 2 chunks."""
    b = TraceBuilder()
    a = b.alloc(4 << 20)
    p = [int(b.pages(a, 0, 1)[0]), int(b.pages(a, 512, 513)[0])]
    b.kernel(reads=p)
    b.kernel(reads=p)
    return b.build()


def one_block():
    b = TraceBuilder()
    a = b.alloc(2 << 20)
    b.kernel(reads=[int(b.pages(a, 0, 1)[0])])
    return b.build()


def test_mfit_holds_a_kernel_that_does_not_fit():
    """Capacity 2 chunks. Tenant 0 holds both with its 2-block working set; tenant 1's
    1-block kernel does not fit beside it. Interleaved, tenant 1 evicts one of tenant 0's
    chunks between its two kernels and tenant 0 faults it back; with mfit tenant 1 waits
    until tenant 0 has finished, then takes a chunk nobody will use again."""
    mix = [two_blocks_twice(), one_block()]
    kw = dict(capacity_chunks=2, prefetch="none")
    inter = simulate_multi(mix, **kw)
    mfit = simulate_multi(mix, scheduler="mfit", **kw)
    assert mfit.config["scheduler"] == "mfit"
    assert inter.table["faults"].tolist() == [3, 1]    # tenant 0 re-faults its block
    assert mfit.table["faults"].tolist() == [2, 1]
    assert inter.table["sched_wait_ns"].tolist() == [0.0, 0.0]
    # tenant 1 waited from 0 until tenant 0's last event ended
    assert mfit.table["sched_wait_ns"].tolist() == [0.0, pytest.approx(mfit.finish_ns[0])]
    assert mfit.finish_ns[0] == pytest.approx(mfit.alone_ns[0])   # tenant 0 ran as alone
    r1 = mfit.tenants[1]
    assert mfit.finish_ns[1] == pytest.approx(mfit.finish_ns[0] + r1.kernels["sim_ns"].sum())
    assert r1.summary["sim_time_ns"] == pytest.approx(mfit.finish_ns[1])
    ref = simulate_multi(mix, scheduler="mfit", engine="reference", **kw)
    assert ref.table["faults"].tolist() == [2, 1]
    assert ref.finish_ns == pytest.approx(mfit.finish_ns)


def test_mfit_runs_a_kernel_that_fits_and_one_too_big_alone():
    # capacity 3: 2 + 1 fit together, nobody waits, counts as interleaved
    mix = [two_blocks_twice(), one_block()]
    a = simulate_multi(mix, capacity_chunks=3, prefetch="none", scheduler="mfit")
    b = simulate_multi(mix, capacity_chunks=3, prefetch="none")
    assert a.table["sched_wait_ns"].tolist() == [0.0, 0.0]
    assert a.finish_ns == b.finish_ns
    # capacity 1: tenant 0's 2-block kernel never fits; tenant 1's fits (tenant 0 holds
    # nothing yet) and runs first; tenant 0 then runs anyway, as the only tenant left
    c = simulate_multi(mix, capacity_chunks=1, prefetch="none", scheduler="mfit")
    assert c.table["sched_wait_ns"].tolist() == [pytest.approx(c.finish_ns[1]), 0.0]
    assert c.finish_ns[1] == pytest.approx(c.alone_ns[1])
    # 2 blocks, 1 chunk: kernel 1 faults both (one batch: block 1 evicts block 0); kernel
    # 2 reads block 1 resident and faults block 0 again
    assert c.table["faults"].tolist() == [3, 1]


def test_working_sets_count_distinct_device_blocks():
    from uvmsim.components.sched.base import kernel_working_sets
    b = TraceBuilder()
    a = b.alloc(6 << 20)
    h = b.alloc(2 << 20, kind="host")
    pg = lambda i: int(b.pages(a, i, i + 1)[0])   # noqa: E731
    b.kernel(reads=[pg(0), pg(1), pg(512), int(b.pages(h, 0, 1)[0])])
    b.kernel(reads=[pg(1030)])
    b.kernel(reads=[int(b.pages(h, 3, 4)[0])])
    assert kernel_working_sets(b.build().arrays).tolist() == [2, 1, 0]


def test_cli_multi(tmp_path):
    from test_cli import cli
    b = TraceBuilder()
    a = b.alloc(4 << 20)
    b.kernel(reads=[int(x) for x in b.pages(a, 0, 600, 7)], duration_ns=20_000)
    b.write(tmp_path / "a.uvmtrace")
    one_block_writer = TraceBuilder()
    o = one_block_writer.alloc(2 << 20)
    one_block_writer.kernel(reads=[int(x) for x in one_block_writer.pages(o, 0, 40)])
    one_block_writer.write(tmp_path / "b.uvmtrace")
    paths = [tmp_path / "a.uvmtrace", tmp_path / "b.uvmtrace"]
    p = cli("multi", *paths, "--capacity", "4MiB", "--prefetch", "none",
            "--translation", "walkers=2", "--walkers", "dws", "--json", check=True)
    sched = cli("multi", *paths, "--capacity", "4MiB", "--prefetch", "none", "--scheduler",
                "mfit", "--json", check=True)
    want_sched = simulate_multi([uvmsim.load_trace(x) for x in paths], capacity_bytes=4 << 20,
                                prefetch="none", scheduler="mfit")
    assert [r["sched_wait_ns"] for r in json.loads(sched.stdout)["tenants"]] == \
        pytest.approx(want_sched.table["sched_wait_ns"].tolist())
    mem = cli("multi", *paths, "--capacity", "4MiB", "--prefetch", "none", "--memory",
              "partitioned", "--json", check=True)
    want_mem = simulate_multi([uvmsim.load_trace(x) for x in paths], capacity_bytes=4 << 20,
                              prefetch="none", memory="partitioned")
    assert [r["evicted_chunks"] for r in json.loads(mem.stdout)["tenants"]] == \
        want_mem.table["evicted_chunks"].tolist()
    got = json.loads(p.stdout)
    want = simulate_multi([uvmsim.load_trace(x) for x in paths], capacity_bytes=4 << 20,
                          prefetch="none", translation={"walkers": 2}, walkers="dws")
    assert [r["faults"] for r in got["tenants"]] == want.table["faults"].tolist()
    assert [r["slowdown"] for r in got["tenants"]] == pytest.approx(want.slowdown)
    assert got["system"] == pytest.approx(want.system)
    human = cli("multi", *paths, "--translation", "--walkers", "partitioned", check=True)
    assert "walkers=partitioned" in human.stdout and "STP=" in human.stdout
    bad = cli("multi", *paths, "--walkers", "nope")
    assert bad.returncode == 2 and "unknown walker component" in bad.stderr
    listed = {(r["kind"], r["name"]) for r in json.loads(cli("policies", "--json",
                                                              check=True).stdout)}
    assert {("walkers", "shared"), ("walkers", "partitioned"), ("walkers", "dws"),
            ("scheduler", "interleave"), ("scheduler", "mfit"), ("scheduler", "amfit"),
            ("scheduler", "madvise"), ("memory", "shared"), ("memory", "partitioned"),
            ("memory", "fair")} <= listed


def test_custom_walker_component_from_the_docs():
    """examples/custom_walkers.py (the file docs/policies.md shows): with 2 walkers,
    tenant 0 has walker 0 to itself and tenant 1 walker 1."""
    import importlib
    # imported by the name its script and command line use (examples.custom_walkers, the
    # repository root being on the path), as a user's package would be: its hooks cache on
    # disk, and this test and tests/test_examples.py share one engine (the example's default
    # prefetch too; walks do not depend on it)
    mod = importlib.import_module("examples.custom_walkers")
    # 4 walks at t=0 on one walker: they wait 0, 100, 200 and 300 ns; the other tenant's
    # single walk finds its own walker free
    for engine in ("fast", "reference"):
        mr = simulate_multi([burst(4, 0), burst(1, 0)], capacity_chunks=2,
                            translation=WALK, walkers=mod.RESERVED, engine=engine)
        assert mr.table["walk_queue_ns"].tolist() == pytest.approx([600.0, 0.0]), engine
    shared = simulate_multi([burst(4, 0), burst(1, 0)], capacity_chunks=2, prefetch="none",
                            translation=WALK)
    assert shared.table["walk_queue_ns"].tolist() == pytest.approx([200.0, 200.0])
    from uvmsim.components.walkers import get_walkers
    assert get_walkers("reserved0") is mod.RESERVED


# ------------------------------------------------------------------ memory components
def blocks_kernels(kernels):
    """One tenant: an allocation of 3 blocks (X, Y, Z = 0, 1, 2) and kernels given as
    (blocks read, duration ns); a kernel of no blocks reads a host page instead."""
    b = TraceBuilder()
    a = b.alloc(6 << 20)
    h = b.alloc(2 << 20, kind="host")
    for blocks, dur in kernels:
        reads = [int(b.pages(a, 512 * x, 512 * x + 1)[0]) for x in blocks]
        b.kernel(reads=reads or [int(b.pages(h, 0, 1)[0])], duration_ns=dur)
    return b.build()


def lender_mix():
    """Capacity 2 (quota 1 each). Tenant 0 uses X and Y early, is idle a long while, then
    reads X and then Y again; tenant 1 is idle, then reads its block X once."""
    t0 = blocks_kernels([([0, 1], 1000), ([0, 1], 1000), ([], 10_000_000), ([0], 1000),
                         ([1], 1000)])
    t1 = blocks_kernels([([], 1_000_000), ([0], 1000)])
    return [t0, t1]


@pytest.mark.parametrize("memory,faults,evicted", [
    # shared: tenant 1 evicts X (least recently migrated); tenant 0's X then evicts its own
    # Y, the least recent, and Y faults back (evicting tenant 1's block)
    ("shared", [4, 1], [2, 1]),
    # partitioned: tenant 0 lives in one chunk: Y evicts X in the first batch, the second
    # kernel faults X back (evicting Y), X is resident for the fourth, Y faults again
    ("partitioned", [4, 1], [3, 0]),
    # fair: tenant 0 borrows tenant 1's idle chunk for X and Y; tenant 1 reclaims it (X,
    # tenant 0 being over its quota); tenant 0's X then takes the chunk of tenant 1, which
    # has finished, so Y stays resident
    ("fair", [3, 1], [1, 1]),
])
def test_memory_components_lend_or_keep_quotas(memory, faults, evicted):
    kw = dict(capacity_chunks=2, prefetch="none", memory=memory)
    mr = simulate_multi(lender_mix(), **kw)
    assert mr.config["memory"] == memory
    assert mr.table["faults"].tolist() == faults
    assert mr.table["evicted_chunks"].tolist() == evicted
    ref = simulate_multi(lender_mix(), engine="reference", **kw)
    assert ref.table["faults"].tolist() == faults
    assert ref.table["evicted_chunks"].tolist() == evicted
    assert ref.finish_ns == pytest.approx(mr.finish_ns)
    # the alone runs use the whole GPU, whatever the component
    assert mr.alone[0].summary["faults"] == 2 and mr.alone[1].summary["faults"] == 1


def test_partitioned_memory_never_evicts_another_tenants_chunk():
    """Tenant 1 holds one block the whole time; tenant 0 streams three blocks through its
    one-chunk quota. Shared memory lets tenant 0 evict tenant 1's block; partitioned never."""
    t0 = blocks_kernels([([0], 1000), ([1], 1000), ([2], 1000), ([0], 1000)])
    t1 = blocks_kernels([([0], 100), ([], 10_000_000), ([0], 1000)])
    kw = dict(capacity_chunks=2, prefetch="none")
    shared = simulate_multi([t0, t1], **kw)
    part = simulate_multi([t0, t1], memory="partitioned", **kw)
    assert shared.table["faults"].tolist()[1] == 2      # its block was evicted, faults back
    assert part.table["faults"].tolist() == [4, 1]
    assert part.table["evicted_chunks"].tolist() == [3, 0]


def test_memory_component_errors_and_restricted_victims():
    t = blocks_kernels([([0], 100)])
    with pytest.raises(uvmsim.ConfigError, match="at least 3 chunks"):
        simulate_multi([t, t, t], capacity_chunks=2, memory="partitioned")
    with pytest.raises(uvmsim.ConfigError, match="unknown memory component"):
        simulate_multi([t], memory="nope")
    from uvmsim.components.memory import get_memory
    from uvmsim.components.memory.base import MemoryContext, equal_quotas
    assert equal_quotas(MemoryContext(3, 7)).quota.tolist() == [3, 2, 2]
    assert get_memory("fair").name == "fair"


# ------------------------------------------------------------------ amfit and madvise
def cold_chunk_mix():
    """Capacity 2. Tenant 0 reads X and Y, then only X for 1 ms, then X again; tenant 1
    idles 0.5 ms (tenant 0 is then in its 1 ms kernel), then reads one block."""
    t0 = blocks_kernels([([0, 1], 1000), ([0], 1_000_000), ([0], 1000)])
    t1 = blocks_kernels([([], 500_000), ([0], 1000)])
    return [t0, t1]


def test_amfit_admits_beside_active_chunks_and_reclaims_cold_ones():
    """mfit counts both of tenant 0's chunks: tenant 1 waits until tenant 0 is done. amfit
    counts only tenant 0's active chunk (X, of its latest kernel): tenant 1 starts at once,
    after Y, the cold chunk, is reclaimed (LRU by use: X was hit since Y's migration)."""
    kw = dict(capacity_chunks=2, prefetch="none", evict="lru2m_access")
    mfit = simulate_multi(cold_chunk_mix(), scheduler="mfit", **kw)
    amfit = simulate_multi(cold_chunk_mix(), scheduler="amfit", **kw)
    assert mfit.table["sched_wait_ns"][1] > 5e5
    assert amfit.table["sched_wait_ns"].tolist() == [0.0, 0.0]
    assert amfit.finish_ns[1] < 1e6 < amfit.finish_ns[0]
    # tenant 1's kernel evicted Y before it ran; tenant 0 never faults again
    assert amfit.table["faults"].tolist() == [2, 1]
    assert amfit.table["evicted_chunks"].tolist() == [0, 1]
    assert amfit.tenants[1].kernels["evicted_chunks"].tolist() == [0, 1]
    ref = simulate_multi(cold_chunk_mix(), scheduler="amfit", engine="reference", **kw)
    assert ref.table["faults"].tolist() == [2, 1]
    assert ref.finish_ns == pytest.approx(amfit.finish_ns)


def test_madvise_maps_a_tenant_that_does_not_fit_remotely():
    """Capacity 2; tenant 0 holds both chunks and has events left when tenant 1's kernel
    starts: tenant 1 reads its block remotely, faulting and evicting nothing."""
    mix = [two_blocks_twice(), one_block()]
    for engine in ("fast", "reference"):
        mr = simulate_multi(mix, capacity_chunks=2, prefetch="none", scheduler="madvise",
                            engine=engine)
        assert mr.table["faults"].tolist() == [2, 0], engine
        assert mr.table["evicted_chunks"].tolist() == [0, 0]
        assert mr.tenants[1].extra["remote_accesses"] == 1
        assert mr.table["sched_wait_ns"].tolist() == [0.0, 0.0]
        assert mr.finish_ns[0] == pytest.approx(mr.alone_ns[0])
    # with room for both, nothing is hinted: tenant 1 faults its block in
    roomy = simulate_multi(mix, capacity_chunks=3, prefetch="none", scheduler="madvise")
    assert roomy.table["faults"].tolist() == [2, 1]
    assert roomy.tenants[1].extra["remote_accesses"] == 0


# the memory/scheduler variants the tests above compile, checked against the reference
# model on random programs (walkers "shared", prefetch "none": no further engines)
MEM_SCHED = [("partitioned", "interleave"), ("fair", "interleave"), ("shared", "amfit"),
             ("shared", "madvise")]


@settings(max_examples=16, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(progs=st.lists(programs(max_ops=6), min_size=2, max_size=3),
       cap=st.integers(3, 5), batch=st.sampled_from([1, 3, 256]),
       pair=st.sampled_from(MEM_SCHED), translated=st.booleans())
def test_memory_and_schedulers_engine_equals_reference(progs, cap, batch, pair, translated):
    traces = [p.build() for p in progs]
    memory, sched = pair
    kw = dict(capacity_chunks=cap, fault_batch_size=batch, memory=memory, scheduler=sched,
              prefetch="none", translation=Translation(walkers=3) if translated else None)
    engine_equals_reference(traces, **kw)


def test_component_files_shown_in_the_docs_match_the_source():
    """docs/policies.md shows built-in component files in full (less docstrings): every
    line of such a block appears, in order, in the file its first line names."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    blocks = re.findall(r"```python\n# (src/uvmsim/components/\S+\.py)\n(.*?)```",
                        (root / "docs/policies.md").read_text(), re.S)
    assert {p for p, _ in blocks} >= {"src/uvmsim/components/memory/partitioned.py",
                                      "src/uvmsim/components/sched/mfit.py"}
    for path, body in blocks:
        src = iter((root / path).read_text().splitlines())
        for line in filter(str.strip, body.splitlines()):
            assert any(s == line for s in src), (path, line)


# ------------------------------------------------------------------ optional mechanisms
@settings(max_examples=16, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(progs=st.lists(programs(max_ops=7), min_size=1, max_size=3),
       cap=st.integers(1, 4), batch=st.sampled_from([1, 3, 256]),
       opts=st.sampled_from([
           {"thrashing": {"threshold": 1, "pin_threshold": 1, "lapse_us": 1e9}},
           {"remote": "driver", "advise": True, "access_counter_threshold": 2},
           {"remote": "uvmsmart", "access_counter_threshold": 2},
           {"advise": True, "thrashing": True}]),
       translated=st.booleans())
def test_tenants_with_thrashing_remote_and_advise_engine_equals_reference(
        progs, cap, batch, opts, translated):
    """The optional mechanisms with several tenants, on the engine variant the component
    tests above already compile (all defaults, prefetch "none")."""
    traces = [p.build() for p in progs]
    kw = dict(capacity_chunks=cap, fault_batch_size=batch, prefetch="none",
              translation=Translation(walkers=2) if translated else None, **opts)
    engine_equals_reference(traces, **kw)


def test_advise_hints_apply_per_tenant():
    """Tenant 0 sets preferred location CPU on its allocation: its reads go remote; tenant
    1's identical program without the hint faults. Read-mostly copies are dropped, not
    copied back, when evicted."""
    def prog(hint):
        b = TraceBuilder()
        a = b.alloc(2 << 20)
        if hint:
            b.advise(b.base(a), 2 << 20, hint)
        b.kernel(reads=[int(p) for p in b.pages(a, 0, 4)], duration_ns=1000)
        return b.build()
    for engine in ("fast", "reference"):
        mr = simulate_multi([prog("set_preferred_location_cpu"), prog(None)],
                            capacity_chunks=2, prefetch="none", advise=True, engine=engine)
        assert mr.table["faults"].tolist() == [0, 4], engine
        assert [r.extra["remote_accesses"] for r in mr.tenants] == [4, 0]
        rm = simulate_multi([prog("set_read_mostly"), prog(None)], capacity_chunks=1,
                            prefetch="none", advise=True, engine=engine)
        # tenant 1's fault evicts tenant 0's read duplicates: nothing is copied back
        assert rm.table["evicted_chunks"].tolist() == [0, 1]
        assert rm.tenants[1].kernels["dtoh_bytes_evict"].sum() == 0
        # without the hint the same eviction copies tenant 0's 4 pages back
        plain = simulate_multi([prog(None), prog(None)], capacity_chunks=1, prefetch="none",
                               advise=True, engine=engine)
        assert plain.tenants[1].kernels["dtoh_bytes_evict"].sum() == 4 * PAGE


def test_one_model_object_serves_simulate_multi_and_the_reference_model():
    """The frozen Model is the one configuration: simulate, simulate_multi (one tenant:
    the clocked front end) and the reference model take the same object and agree."""
    import dataclasses
    from uvmsim.reference import simulate as ref_simulate
    m = dataclasses.replace(get_model("contract"), name="mine", fault_batch_size=3,
                            thrashing=True)
    t = blocks_kernels([([0, 1], 1000), ([2], 1000), ([0], 1000)])
    one = uvmsim.simulate(t, model=m, capacity_chunks=2, prefetch="none")
    mr = simulate_multi([t], model=m, capacity_chunks=2, prefetch="none")
    ref = ref_simulate(t, model=m, capacity_chunks=2, prefetch="none")
    assert one.config["model"] == mr.config["model"] == ref.config["model"] == "mine"
    assert_same(one, mr.tenants[0])
    assert_same(one, ref)
    # a batch of 3 (not the default 256): kernel 1's two faults go in one batch
    assert one.summary["fault_batches"] == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.fault_batch_size = 4


@pytest.mark.parametrize("ev", ["lru2m", "lru2m_access", "fifo2m", "random2m", "lfu2m",
                                "belady2m", "lru4k", "lru64k", "tbn"])
def test_every_eviction_policy_takes_victims_of_the_tenant_asked(ev):
    """Four chunks filled in order by blocks of tenants 0, 1, 0, 1 (each block's first
    page): a victim restricted to tenant j (pool.victim_tenant, may_evict) is one of j's chunks; under
    the recency policies it is j's least recent one, and unrestricted the overall oldest."""
    from uvmsim.engine.arrays import engine_arrays
    from uvmsim.engine.state import RES, StateSizes, engine_trace, new_state
    from uvmsim.policies import get_evict
    from uvmsim.policies.base import PolicyContext, empty_state
    from uvmsim.simulate import block_service_rank
    b = TraceBuilder()
    a = b.alloc(8 << 20)
    b.kernel(reads=[int(b.pages(a, 512 * x, 512 * x + 1)[0]) for x in range(4)])
    t = b.build()
    T = engine_arrays(t)
    pol = get_evict(ev)
    st = (pol.init or empty_state)(PolicyContext(4, 4, int(T.page_block.size), T, pol.params))
    S = new_state(StateSizes(int(T.page_block.size), 4, 4, 1, 256, n_tenants=2),
                  block_service_rank(t, T), get_model().hardware.record(),
                  b_tenant=np.arange(4) % 2)
    ET = engine_trace(T)
    for blk in range(4):
        c = int(S.free_stack[3 - blk])
        S.chunk_block[c] = blk
        S.b_chunk[blk] = c
        d = int(T.b_page0[blk])
        S.pstate[d] |= RES
        S.b_nres[blk] = 1
        pos = int(T.page_pos[d])
        S.bres[blk * 8 + (pos >> 6)] |= np.uint64(1) << np.uint64(pos & 63)
        pol.on_fill(st, S, ET, c, blk, pos, pos, 1, blk)
    S.pool[0].n_free = 0   # no chunk free
    owner = {int(S.b_chunk[blk]): blk % 2 for blk in range(4)}
    oldest = {0: int(S.b_chunk[0]), 1: int(S.b_chunk[1])}
    for ten in (0, 1):
        S.pool[0].victim_tenant = ten
        pol.victim(st, S, ET, 0)
        assert owner[int(S.victim[0])] == ten, ev
        if ev in ("lru2m", "lru2m_access", "fifo2m", "lru4k", "lru64k", "tbn"):
            assert int(S.victim[0]) == oldest[ten], ev
    S.pool[0].victim_tenant = -1
    pol.victim(st, S, ET, 0)
    if ev in ("lru2m", "fifo2m", "lru2m_access"):
        assert int(S.victim[0]) == oldest[0]
