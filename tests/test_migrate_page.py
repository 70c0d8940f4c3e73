"""Hardware.migrate_page_ns: the driver's work per page a fault migrates from the host, on
top of its copy (docs/semantics.md "Time"; docs/model.md "The time base")."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import uvmsim
from uvmsim.config import H100_PCIE5, Hardware
from uvmsim.engine.state import COUNT_NAMES
from uvmsim.errors import ConfigError
from uvmsim.trace.builder import TraceBuilder

from helpers import MiB, PAGE, both, examples
from uvmsim.testing.strategies import programs

HW = Hardware("t", batch_ns=1000.0, fault_ns=10.0, transfer_latency_ns=100.0,
              bw_peak_gbps=16.0, bw_b=0.07292)


def host_written():
    """32 pages the CPU wrote, 16 pages copied in by cudaMemcpy, 16 pages never written:
    one kernel reads all three."""
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.host_access(b.base(x), 32 * PAGE, "write")
    b.memcpy_htod(b.base(x) + 32 * PAGE, 16 * PAGE)
    b.kernel("r", reads=b.pages(x, 0, 64), duration_ns=0)
    return b.build()


def test_only_a_faults_pages_from_the_host_pay_it():
    t = host_written()
    kw = dict(host_access=True, prefetch="none")
    off = both(t, hardware=HW, **kw)
    on = both(t, hardware=dataclasses.replace(HW, migrate_page_ns=1000.0), **kw)
    k = off.kernels.iloc[0]
    # the 32 host-written pages fault and migrate; the memcpy's 16 are resident before the
    # kernel and the last 16 are zero-filled: neither pays
    assert k["htod_bytes_demand"] == 32 * PAGE and k["zero_fill_pages"] == 16
    assert on.kernels["sim_ns"].iloc[0] - k["sim_ns"] == pytest.approx(32 * 1000.0)
    # the counts are the same: the constant is time only
    assert on.kernels[list(COUNT_NAMES)].equals(off.kernels[list(COUNT_NAMES)])


def test_prefetched_pages_pay_it_too():
    # the kernel faults on 21 of the 32 pages the CPU wrote; the density prefetcher brings
    # the other 11 of their 128 KiB region along
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.host_access(b.base(x), 32 * PAGE, "write")
    b.kernel("r", reads=b.pages(x, 0, 21), duration_ns=0)
    t = b.build()
    kw = dict(host_access=True, prefetch="density")
    off = both(t, hardware=HW, **kw).kernels.iloc[0]
    on = both(t, hardware=dataclasses.replace(HW, migrate_page_ns=7.0), **kw).kernels.iloc[0]
    assert off["htod_bytes_demand"] == 21 * PAGE and off["htod_bytes_prefetch"] == 11 * PAGE
    assert on["sim_ns"] - off["sim_ns"] == pytest.approx(7.0 * 32)


def test_it_must_be_a_number_at_least_zero():
    with pytest.raises(ConfigError, match="migrate_page_ns"):
        dataclasses.replace(HW, migrate_page_ns=-1.0)
    # only the H100 fit sets it: the measured link and the other presets keep their times
    assert H100_PCIE5.migrate_page_ns == 0.0
    assert {n: m.hardware.migrate_page_ns for n, m in uvmsim.config.MODELS.items()} == \
        {"contract": 0.0, "h200": 0.0, "h100": 128.0, "h200-progress": 128.0}
    assert "validation suite" in dict(uvmsim.config.H100_PCIE5_FIT.sources)["migrate_page_ns"]


@settings(max_examples=examples(25), deadline=None)
@given(prog=programs(v11=True), factor=st.sampled_from([1.0, 1.5, 3.0]),
       c=st.sampled_from([1.0, 250.0]))
def test_engine_and_reference_agree_and_the_cost_is_per_migrated_page(prog, factor, c):
    t = prog.build()
    kw = dict(host_access=True, oversub=factor)
    off = uvmsim.simulate(t, hardware=HW, **kw).kernels
    on = both(t, hardware=dataclasses.replace(HW, migrate_page_ns=c), **kw).kernels
    pages = (off["htod_bytes_demand"] + off["htod_bytes_prefetch"]).to_numpy() // PAGE
    assert np.allclose(on["sim_ns"] - off["sim_ns"], c * pages, rtol=1e-9, atol=1e-3)
