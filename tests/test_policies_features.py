"""Thrashing mitigation, remote mapping / access counters and cudaMemAdvise."""
from __future__ import annotations

import pytest

import uvmsim
from uvmsim.engine import state as st
from uvmsim.trace import format as fmt
from uvmsim.trace.builder import TraceBuilder
from helpers import MiB, ping_pong

DRIVER_COUNTS = ("faults", "faults_read", "faults_write", "fault_batches", "htod_bytes",
                 "zero_fill_pages", "evicted_chunks", "dtoh_bytes_evict",
                 "dtoh_bytes_api_prefetch")
FEATURE_COUNTS = ("remote_accesses", "throttled_faults", "thrashing_pins", "counter_migrations")


def test_codes_are_defined_once_in_the_format():
    """The engine and the reference model switch on the trace format's codes: neither
    defines op codes or event args of its own, and the advise args are the format's."""
    import ast
    from pathlib import Path
    src = Path(st.__file__).parents[1]
    for f in sorted((src / "engine").rglob("*.py")) + sorted((src / "reference").rglob("*.py")):
        own = [t.id for node in ast.walk(ast.parse(f.read_text())) if isinstance(node, ast.Assign)
               for tgt in node.targets for t in ast.walk(tgt)
               if isinstance(t, ast.Name) and t.id.startswith(("OP_", "ARG_"))]
        assert own == [], f"{f} defines {own}"
    for name, code in [("set_preferred_location_gpu", fmt.ARG_SET_PREF_GPU),
                       ("set_preferred_location_cpu", fmt.ARG_SET_PREF_CPU),
                       ("set_accessed_by_gpu", fmt.ARG_SET_ACCESSED_BY),
                       ("set_read_mostly", fmt.ARG_SET_READ_MOSTLY),
                       ("unset_preferred_location_gpu", fmt.ARG_UNSET_PREF_GPU),
                       ("unset_preferred_location_cpu", fmt.ARG_UNSET_PREF_CPU),
                       ("unset_accessed_by_gpu", fmt.ARG_UNSET_ACCESSED_BY),
                       ("unset_read_mostly", fmt.ARG_UNSET_READ_MOSTLY)]:
        assert fmt.ARG_CODE[name] == code
    assert st.COUNT_NAMES[st.C_REMOTE:st.C_COUNTER_MIG + 1] == FEATURE_COUNTS


def test_features_off_by_default_and_inert_when_nothing_triggers_them():
    from uvmsim.trace import synth
    t = synth.make("training", layers=2, weight_bytes=2 * MiB, activation_bytes=4 * MiB,
                   steps=2)
    base = uvmsim.simulate(t, oversub=1.5).to_row()
    assert all(base[k] == 0 for k in FEATURE_COUNTS)
    # no advise events; kernels of 200 us with 45 us batches never refault within 500 us
    on = uvmsim.simulate(t, oversub=1.5, advise=True, thrashing=True).to_row()
    for k in DRIVER_COUNTS:
        assert on[k] == base[k], k
    assert on["sim_time_ns"] == pytest.approx(base["sim_time_ns"])


def test_thrashing_throttles_then_pins():
    t = ping_pong(400)
    off = uvmsim.simulate(t, capacity_chunks=1, prefetch="none").to_row()
    assert off["faults"] == 400 and off["throttled_faults"] == 0
    on = uvmsim.simulate(t, capacity_chunks=1, prefetch="none", thrashing=True).to_row()
    assert on["throttled_faults"] > 0
    assert on["thrashing_pins"] > 0           # after 10 throttles a page is pinned
    assert on["remote_accesses"] > 0          # and then read over the link
    # with one page pinned remotely, the other block keeps the chunk: its rows hit
    hits = 400 - on["faults"] - on["remote_accesses"]
    assert hits > 0
    assert on["evicted_chunks"] < off["evicted_chunks"] == 399


def test_throttle_costs_exactly_the_nap():
    t = ping_pong(40)
    off = uvmsim.simulate(t, capacity_chunks=1, prefetch="none").to_row()
    on = uvmsim.simulate(t, capacity_chunks=1, prefetch="none",
                         thrashing={"nap_us": 700.0}).to_row()
    assert on["throttled_faults"] > 0 and on["thrashing_pins"] == 0
    assert on["faults"] == off["faults"]
    assert on["sim_time_ns"] - off["sim_time_ns"] == pytest.approx(
        on["throttled_faults"] * 700_000)


def test_no_thrashing_when_refaults_are_slower_than_the_lapse():
    t = ping_pong(100, duration_ns=600_000)
    on = uvmsim.simulate(t, capacity_chunks=1, prefetch="none", thrashing=True).to_row()
    assert on["throttled_faults"] == 0
    with pytest.raises(uvmsim.ConfigError):
        uvmsim.simulate(t, thrashing={"bogus": 1})


def test_uvmsmart_delays_read_migration_until_the_counter_threshold():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.kernel("fill_a", writes=b.pages(x, 0, 1))            # memory is now full
    for i in range(6):
        b.kernel(f"read_b{i}", reads=b.pages(x, 512, 513), counts=[5])
    t = b.build()
    r = uvmsim.simulate(t, capacity_chunks=1, prefetch="none", remote="uvmsmart")
    s = r.to_row()
    # oversubscribed: threshold 10 * penalty 2 * (round trips 0 + 1) = 20 accesses
    assert s["remote_accesses"] == 15 and s["counter_migrations"] == 1
    ks = r.kernels.set_index("name")["faults"]
    assert list(ks[[f"read_b{i}" for i in range(6)]]) == [0, 0, 0, 1, 0, 0]
    off = uvmsim.simulate(t, capacity_chunks=1, prefetch="none")
    assert off.extra["remote_accesses"] == 0 and off.summary["faults"] == 2


def test_uvmsmart_writes_always_migrate():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.kernel("w", writes=b.pages(x, 0, 8))
    s = uvmsim.simulate(b.build(), remote="uvmsmart").to_row()
    assert s["faults"] == 8 and s["remote_accesses"] == 0


def test_accessed_by_maps_remotely_until_the_driver_counter_notifies():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.kernel("a", writes=b.pages(x, 0, 1))
    b.kernel("b", writes=b.pages(x, 512, 513))              # evicts A (1 chunk)
    b.advise(b.base(x), 2 * MiB, "set_accessed_by_gpu")
    for i in range(4):
        b.kernel(f"a{i}", reads=b.pages(x, 0, 1), counts=[100])
    t = b.build()
    adv = uvmsim.simulate(t, capacity_chunks=1, prefetch="none", advise=True).to_row()
    assert adv["remote_accesses"] == 400 and adv["faults"] == 2
    cnt = uvmsim.simulate(t, capacity_chunks=1, prefetch="none", advise=True,
                          remote="driver").to_row()
    # 2 MiB counter, threshold 256: remote 100, 200, then the third access notifies
    assert cnt["remote_accesses"] == 200 and cnt["counter_migrations"] == 1
    assert cnt["faults"] == 3
    plain = uvmsim.simulate(t, capacity_chunks=1, prefetch="none").to_row()
    assert plain["faults"] == 3 and plain["remote_accesses"] == 0


def test_preferred_location_cpu_stays_remote_and_is_not_prefetched():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    y = b.alloc(2 * MiB)
    b.advise(b.base(x), 64 * 1024, "set_preferred_location_cpu")  # first big page of x
    b.kernel("k", reads=list(b.pages(x, 0, 1)) + list(b.pages(x, 16, 17)) +
             list(b.pages(y, 0, 1)))
    t = b.build()
    s = uvmsim.simulate(t, prefetch="64k", advise=True).to_row()
    assert s["remote_accesses"] == 1
    # x's page 16 faults: its big page (16 pages) comes; y's page 0: another 16
    assert s["faults"] == 2 and s["zero_fill_pages"] == 32
    s2 = uvmsim.simulate(t, prefetch="2m", advise=True).to_row()
    # whole-block prefetch skips the 16 CPU-preferred pages of x
    assert s2["zero_fill_pages"] == (512 - 16) + 512


def test_preferred_location_gpu_takes_the_whole_untouched_block():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.advise(b.base(x), 2 * MiB, "set_preferred_location_gpu")
    b.kernel("k", reads=b.pages(x, 3, 4))
    t = b.build()
    assert uvmsim.simulate(t, prefetch="none", advise=True).to_row()["zero_fill_pages"] == 512
    assert uvmsim.simulate(t, prefetch="none").to_row()["zero_fill_pages"] == 1


def test_read_mostly_copies_are_dropped_on_eviction_unless_written():
    def trace(write_after: bool):
        b = TraceBuilder()
        x = b.alloc(4 * MiB)
        b.kernel("init", writes=b.pages(x, 0, 8))
        b.kernel("evict_a", writes=b.pages(x, 512, 513))    # A's 8 pages go back (dirty)
        b.advise(b.base(x), 2 * MiB, "set_read_mostly")
        b.kernel("read_a", reads=b.pages(x, 0, 8))          # read duplicates
        if write_after:
            b.kernel("write_a", writes=b.pages(x, 0, 1))
        b.kernel("evict_a_again", writes=b.pages(x, 512, 513))
        return b.build()
    for write_after, expect in [(False, 0), (True, 4096)]:
        r = uvmsim.simulate(trace(write_after), capacity_chunks=1, prefetch="none",
                            advise=True)
        k = r.kernels.set_index("name")
        assert k["dtoh_bytes_evict"]["evict_a"] == 8 * 4096
        assert k["dtoh_bytes_evict"]["evict_a_again"] == expect
        r0 = uvmsim.simulate(trace(write_after), capacity_chunks=1, prefetch="none")
        assert r0.kernels.set_index("name")["dtoh_bytes_evict"]["evict_a_again"] == 8 * 4096
