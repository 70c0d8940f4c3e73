"""Hardware.zero_batch_ns: the fixed cost of a fault batch that migrates no page from the
host (docs/semantics.md "Time"; docs/validation.md "How many services a first touch
takes"). Unset, every batch costs batch_ns as before."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import uvmsim
from uvmsim.config import Hardware
from uvmsim.engine.state import COUNT_NAMES
from uvmsim.errors import ConfigError
from uvmsim.trace.builder import TraceBuilder

from helpers import MiB, PAGE, both, examples
from uvmsim.testing.strategies import programs

HW = Hardware("t", batch_ns=100_000.0, fault_ns=10.0, transfer_latency_ns=100.0,
              bw_peak_gbps=16.0, bw_b=0.07292)


def first_touch_then_host_read():
    """Kernel 0 zero-fills 64 pages of x; kernel 1 reads 32 pages the CPU wrote in y."""
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    y = b.alloc(2 * MiB)
    b.host_access(b.base(y), 32 * PAGE, "write")
    b.kernel("fill", writes=b.pages(x, 0, 64), duration_ns=0)
    b.kernel("read", reads=b.pages(y, 0, 32), duration_ns=0)
    return b.build()


def test_only_batches_that_migrate_nothing_from_the_host_pay_it():
    t = first_touch_then_host_read()
    kw = dict(host_access=True, prefetch="none")
    off = both(t, hardware=HW, **kw).kernels
    on = both(t, hardware=dataclasses.replace(HW, zero_batch_ns=5_000.0), **kw).kernels
    # one batch each: the fill's zero-fills migrate nothing, the read's pages come from the
    # host
    assert off["fault_batches"].tolist() == [1, 1]
    assert off["zero_fill_pages"].tolist() == [64, 0]
    assert off["htod_bytes_demand"].tolist() == [0, 32 * PAGE]
    assert (off["sim_ns"] - on["sim_ns"]).tolist() == pytest.approx([95_000.0, 0.0])
    # time only: the counts are the same
    assert on[list(COUNT_NAMES)].equals(off[list(COUNT_NAMES)])


def test_unset_it_is_batch_ns_and_every_preset_keeps_its_times():
    assert HW.zero_batch_ns is None
    rec = HW.record()[0]
    assert rec["zero_batch_ns"] == rec["batch_ns"] == 100_000.0
    t = first_touch_then_host_read()
    a = uvmsim.simulate(t, hardware=HW, host_access=True).kernels["sim_ns"]
    b = uvmsim.simulate(t, hardware=dataclasses.replace(HW, zero_batch_ns=100_000.0),
                        host_access=True).kernels["sim_ns"]
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize("bad", [-1.0, True, "5", float("nan")])
def test_it_must_be_none_or_a_number_at_least_zero(bad):
    with pytest.raises(ConfigError, match="zero_batch_ns"):
        dataclasses.replace(HW, zero_batch_ns=bad)


def test_model_from_constants_sets_it():
    m = uvmsim.config.model_from_constants({"zero_batch_ns": 7_000.0}, base="h100")
    assert m.hardware.zero_batch_ns == 7_000.0
    assert m.hardware.batch_ns == uvmsim.config.get_model("h100").hardware.batch_ns


@settings(max_examples=examples(25), deadline=None)
@given(prog=programs(v11=True), factor=st.sampled_from([1.0, 1.5, 3.0]),
       z=st.sampled_from([0.0, 40_000.0]))
def test_engine_and_reference_agree_and_each_batch_saves_at_most_the_difference(prog, factor,
                                                                                 z):
    t = prog.build()
    kw = dict(host_access=True, oversub=factor)
    off = uvmsim.simulate(t, hardware=HW, **kw).kernels
    on = both(t, hardware=dataclasses.replace(HW, zero_batch_ns=z), **kw).kernels
    # every batch costs either batch_ns or zero_batch_ns: the saving is a whole number of
    # batches, none where no batch was serviced, all where nothing came from the host
    saved = (off["sim_ns"] - on["sim_ns"]).to_numpy() / (HW.batch_ns - z)
    n = np.rint(saved)
    assert np.allclose(saved, n, atol=1e-6)
    assert ((n >= 0) & (n <= off["fault_batches"].to_numpy())).all()
    none_in = (off["htod_bytes_demand"] + off["htod_bytes_prefetch"]).to_numpy() == 0
    assert (n[none_in] == off["fault_batches"].to_numpy()[none_in]).all()
