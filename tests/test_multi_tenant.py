"""Multi-tenant replay: per-tenant and system metrics, and the tenant-level components
(page-table walkers, kernel scheduling) on tiny hand-made tenant mixes whose times are
worked out by hand below."""
from __future__ import annotations

import math

import numpy as np
import pytest

import uvmsim
from uvmsim.config import Translation, get_model
from uvmsim.engine.timing import transfer_ns
from uvmsim.multi import simulate_multi, system_metrics
from uvmsim.trace.builder import TraceBuilder

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
    x = transfer_ns(get_model().hardware.vector(), PAGE)    # the copy holds the driver x ns
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
