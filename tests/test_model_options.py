"""The v1.1 model options (slices, host_access), thrashing on every path, the eviction
constants and the Model presets, on hand-computed traces (docs/semantics.md)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import uvmsim
from uvmsim.config import (CONTRACT, FITTED, H200, H200_PCIE5, H200_PCIE5_FIT, MODELS, Hardware, Model,
                           get_model, model_from_constants)
from uvmsim.engine.link import transfer_ns
from uvmsim.trace.builder import TraceBuilder

from helpers import MiB, PAGE, both, ping_pong

R, W = 1, 2


def three_blocks(masks, n_slices=2, duration_ns=1000):
    """One kernel touching the first page of blocks A, B, C with the given slice masks."""
    b = TraceBuilder()
    x = b.alloc(6 * MiB)
    pages = [int(b.pages(x, 512 * i, 512 * i + 1)[0]) for i in range(3)]
    b.kernel("k", rows=[(p, R) for p in pages], slices=masks, n_slices=n_slices,
             duration_ns=duration_ns)
    return b.build()


# ---------------------------------------------------------------- slices
def test_two_slices_over_three_blocks_at_capacity_two_refault_by_hand():
    t = three_blocks([0b11, 0b11, 0b11])
    kw = dict(capacity_chunks=2, prefetch="none", fault_batch_size=1)
    # pass 0: A, B fault into the two chunks, C evicts A; pass 1: A evicts B, B evicts C,
    # C evicts A: every row faults twice
    on = both(t, slices=True, **kw).summary
    assert (on["faults"], on["fault_batches"], on["evicted_chunks"]) == (6, 6, 4)
    assert on["zero_fill_pages"] == 3 and on["htod_bytes_demand"] == 3 * PAGE
    assert on["dtoh_bytes_evict"] == 4 * PAGE
    # the same trace without the option: one pass, A evicted once for C
    off = both(t, **kw).summary
    assert (off["faults"], off["evicted_chunks"]) == (3, 1)


def test_a_page_touched_in_one_slice_only_is_replayed_once():
    # A in both slices, B only in slice 0, C only in slice 1: A hits in pass 1, C evicts A
    t = three_blocks([0b11, 0b01, 0b10])
    r = both(t, slices=True, capacity_chunks=2, prefetch="none", fault_batch_size=1)
    assert (r.summary["faults"], r.summary["evicted_chunks"]) == (3, 1)


def test_the_open_batch_carries_across_passes():
    # batch 256: pass 1 finds A, B, C still in the batch (no new faults); at the kernel's
    # end one batch is serviced, A evicted for C as in one pass
    t = three_blocks([0b11, 0b11, 0b11])
    r = both(t, slices=True, capacity_chunks=2, prefetch="none").summary
    assert (r["faults"], r["fault_batches"], r["evicted_chunks"]) == (3, 1, 1)


def test_slices_option_is_exactly_v1_on_one_slice_kernels():
    b = TraceBuilder()
    x = b.alloc(8 * MiB)
    b.kernel("a", reads=b.pages(x, 0, 700), slices=[1] * 700, n_slices=1)
    b.kernel("b", writes=b.pages(x, 300, 2048, 3))
    t = b.build()
    on = uvmsim.simulate(t, slices=True, oversub=2.0)
    off = uvmsim.simulate(t, oversub=2.0)
    assert on.summary == off.summary and on.kernels.equals(off.kernels)


# ---------------------------------------------------------------- host accesses
def test_host_access_before_a_kernel_turns_zero_fills_into_migrations():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.host_access(b.base(x), 4 * PAGE, "write")
    b.kernel("k", reads=b.pages(x, 0, 4))
    t = b.build()
    on = both(t, host_access=True, prefetch="none")
    assert on.extra["host_populated_pages"] == 4 and on.extra["dtoh_bytes_host"] == 0
    assert on.summary["zero_fill_pages"] == 0 and on.summary["htod_bytes_demand"] == 4 * PAGE
    off = both(t, prefetch="none")
    assert off.summary["zero_fill_pages"] == 4 and off.summary["htod_bytes"] == 0
    assert off.extra["host_populated_pages"] == 0


def test_host_access_on_resident_pages_copies_back_and_frees_the_chunk():
    def trace(nbytes):
        b = TraceBuilder()
        x = b.alloc(4 * MiB)
        b.kernel("init", writes=b.pages(x, 0, 3))        # block A: 3 zero-filled pages
        b.host_access(b.base(x), nbytes, "read")
        b.kernel("other", reads=b.pages(x, 512, 513))     # block B at capacity 1
        b.kernel("again", reads=b.pages(x, 0, 3))
        return b.build()
    kw = dict(host_access=True, capacity_chunks=1, prefetch="none")
    r = both(trace(2 * MiB), **kw)
    assert r.extra["dtoh_bytes_host"] == 3 * PAGE and r.extra["host_populated_pages"] == 509
    k = r.kernels.set_index("name")
    assert k["evicted_chunks"]["other"] == 0             # the chunk went back to the pool
    assert k["htod_bytes_demand"]["again"] == 3 * PAGE   # the pages stayed populated
    assert r.outside_kernels["dtoh_bytes_host"] == 3 * PAGE
    # one page back: the chunk still holds two, so B must evict A
    r1 = both(trace(PAGE), **kw)
    assert r1.extra["dtoh_bytes_host"] == PAGE
    assert r1.kernels.set_index("name")["evicted_chunks"]["other"] == 1


def test_host_access_time_is_its_copies_plus_the_cpu_fault_cost():
    hw = Hardware("t", batch_ns=1000.0, fault_ns=10.0, transfer_latency_ns=100.0,
                  bw_peak_gbps=16.0, bw_b=0.07292, dtoh_bw_gbps=4.0, host_fault_ns=50.0)
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.kernel("w", writes=b.pages(x, 0, 5), duration_ns=0)
    # pages 0..9: 5 resident (one run back), 5 never populated
    b.host_access(b.base(x), 10 * PAGE, "write")
    t = b.build()
    r = both(t, host_access=True, prefetch="none", hardware=hw)
    dtoh = 100.0 + 5 * PAGE / (2 / math.pi * 4.0 * math.atan(0.07292 * 20))
    assert r.outside_kernels["time_ns"] == pytest.approx(dtoh + 10 * 50.0)
    assert r.summary["sim_time_ns"] == pytest.approx(r.kernels["sim_ns"].sum() + dtoh + 500)


# ---------------------------------------------------------------- eviction constants
def test_evict_ns_and_dtoh_bandwidth_charge_evictions_only_when_set():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.kernel("a", writes=b.pages(x, 0, 4), duration_ns=0)
    b.kernel("b", reads=b.pages(x, 512, 513), duration_ns=0)   # evicts A: 4 pages back
    t = b.build()
    base = dict(name="t", batch_ns=1000.0, fault_ns=0.0, transfer_latency_ns=100.0,
                bw_peak_gbps=16.0, bw_b=0.07292)
    plain = both(t, capacity_chunks=1, prefetch="none", hardware=Hardware(**base))
    same = both(t, capacity_chunks=1, prefetch="none",
                hardware=Hardware(**base, dtoh_bw_gbps=16.0))
    assert same.summary["sim_time_ns"] == pytest.approx(plain.summary["sim_time_ns"])
    slow = both(t, capacity_chunks=1, prefetch="none",
                hardware=Hardware(**base, dtoh_bw_gbps=4.0, evict_ns=7000.0))
    bw = lambda a: 2 / math.pi * a * math.atan(0.07292 * 16)   # noqa: E731 (4 pages, 16 KiB)
    extra = 7000.0 + 4 * PAGE / bw(4.0) - 4 * PAGE / bw(16.0)
    assert slow.kernels["stall_ns"][1] - plain.kernels["stall_ns"][1] == pytest.approx(extra)
    assert slow.kernels["stall_ns"][0] == plain.kernels["stall_ns"][0]


def test_new_constants_leave_every_calibrated_preset_time_unchanged():
    # only the oversubscription fit sets them, and its sources say where from; a constant a
    # fit looked at and drove to 0 says so ("not identified")
    fits = {(H200_PCIE5_FIT, "evict_ns"): "validation.md",
            (H200_PCIE5_FIT, "zero_fill_ns"): "validation.md",
            (uvmsim.config.H100_PCIE5_FIT, "zero_fill_ns"): "validation suite",
            (uvmsim.config.H100_PCIE5_FIT, "evict_ns"): "validation suite",
            # the progress preset's grid; its evict_ns is h200-pcie5-fit's
            (uvmsim.config.H200_PCIE5_PROGRESS, "evict_ns"): "validation.md",
            (uvmsim.config.H200_PCIE5_PROGRESS, "zero_fill_ns"): "grid on the fit split"}
    for hw in uvmsim.config.PRESETS.values():
        src = dict(hw.sources)
        for k in ("evict_ns", "dtoh_bw_gbps", "host_fault_ns", "zero_fill_ns"):
            fitted = (hw, k) in fits
            assert fitted == any(w in src[k] for w in ("validation.md", "fit split of the")), \
                (hw.name, k)
            if fitted:
                assert fits[(hw, k)] in src[k], (hw.name, k)
            if k != "zero_fill_ns":
                assert (getattr(hw, k) > 0) == fitted, (hw.name, k)
                assert fitted or "uncalibrated" in src[k] or "not identified" in src[k], \
                    (hw.name, k)
        # the per-migrated-page cost: only fits with the probes in their fit split set it
        # (the H100's, and the progress preset's grid)
        fitted = hw in (uvmsim.config.H100_PCIE5_FIT, uvmsim.config.H200_PCIE5_PROGRESS)
        assert (hw.migrate_page_ns > 0) == fitted, hw.name
        assert fitted == ("probes" in src.get("migrate_page_ns", "")), hw.name


# ---------------------------------------------------------------- thrashing
def test_thrashing_clock_advances_over_slice_passes():
    # A in slices 0 and 3, B in slices 1 and 2, C in slice 3 of a 4,000 ns kernel; one
    # chunk, batch 1. Pass 0: A faults at 0 (stall 1,000); pass 1: B at 1,000 + 1,000,
    # evicting A (copy X); pass 2: B hits; pass 3: A again at 3,000 + 2,000 + X (within the
    # lapse: one thrashing event), evicting B, then C evicting A: 4 faults.
    hw = Hardware("t", batch_ns=1000.0, fault_ns=0.0, transfer_latency_ns=100.0,
                  bw_peak_gbps=16.0, bw_b=0.07292)
    t = three_blocks([0b1001, 0b0110, 0b1000], n_slices=4, duration_ns=4000)
    x = transfer_ns(hw.record(), PAGE)
    d_a, d_b = (int(t.arrays.row_page[i]) for i in range(2))
    for translation in (None, True):
        r = uvmsim.simulate(t, slices=True, thrashing=True, capacity_chunks=1,
                            prefetch="none", fault_batch_size=1, hardware=hw,
                            translation=translation, keep_state=True)
        S = r.state
        assert S.pg_last[d_b] == pytest.approx(2000.0)
        assert S.pg_last[d_a] == pytest.approx(5000.0 + x)
        assert S.pg_thr[d_a] == 1 and S.pg_thr[d_b] == 0
    assert both(t, slices=True, thrashing=True, capacity_chunks=1, prefetch="none",
                fault_batch_size=1, hardware=hw).summary["faults"] == 4


def test_thrashing_reference_and_clocked_replay_throttle_and_pin():
    t = ping_pong(200)
    kw = dict(capacity_chunks=1, prefetch="none", thrashing=True)
    r = both(t, **kw)
    assert r.extra["throttled_faults"] > 0 and r.extra["thrashing_pins"] > 0
    # the clocked replay (translation on) models it too, and matches the reference
    c = both(t, translation=True, **kw)
    assert c.extra["throttled_faults"] > 0 and c.extra["thrashing_pins"] > 0


def test_host_access_migrations_count_as_thrashing_events():
    # the CPU and the GPU take turns on one page every 1 us: the GPU faults are throttled
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    for i in range(8):
        b.kernel(f"k{i}", writes=b.pages(x, 0, 1))
        b.host_access(b.base(x), PAGE, "write")
    t = b.build()
    kw = dict(host_access=True, prefetch="none")
    on = both(t, thrashing=True, **kw).extra
    assert on["throttled_faults"] > 0 and on["dtoh_bytes_host"] == 8 * PAGE
    assert both(t, **kw).extra["throttled_faults"] == 0


# ---------------------------------------------------------------- the Model presets
def v11_trace():
    b = TraceBuilder()
    x = b.alloc(6 * MiB)
    b.host_access(b.base(x), 8 * PAGE, "write")
    pages = [int(b.pages(x, 512 * i, 512 * i + 1)[0]) for i in range(3)]
    b.kernel("waves", rows=[(p, R) for p in pages] + [(int(b.pages(x, 1, 2)[0]), W)],
             slices=[0b11, 0b11, 0b11, 0b10], n_slices=2)
    b.kernel("plain", reads=b.pages(x, 0, 8))
    return b


def v1_trace():
    """v11_trace's v1 content: no host_access, one slice."""
    b = TraceBuilder()
    x = b.alloc(6 * MiB)
    pages = [int(b.pages(x, 512 * i, 512 * i + 1)[0]) for i in range(3)]
    b.kernel("waves", rows=[(p, R) for p in pages] + [(int(b.pages(x, 1, 2)[0]), W)])
    b.kernel("plain", reads=b.pages(x, 0, 8))
    return b


def test_v11_trace_with_options_off_replays_as_its_v1_content():
    for kw in (dict(capacity_chunks=2, fault_batch_size=1), dict(oversub=1.0)):
        a = uvmsim.simulate(v11_trace().build(), **kw)
        b = uvmsim.simulate(v1_trace().build(), **kw)
        assert a.summary == b.summary and a.extra == b.extra
        assert a.kernels.equals(b.kernels)
        c = uvmsim.simulate(v11_trace().build(), model="contract", **kw)
        assert c.summary == a.summary


def test_h200_model_switches_host_access_on_and_overrides_win():
    t = v11_trace().build()
    kw = dict(capacity_chunks=2, fault_batch_size=1, prefetch="none")
    h = uvmsim.simulate(t, model="h200", **kw)
    manual = uvmsim.simulate(t, host_access=True, hardware=H200_PCIE5_FIT, **kw)
    assert h.summary == manual.summary and h.extra == manual.extra
    assert h.config["model"] == "h200" and h.config["host_access"] and not h.config["slices"]
    assert h.extra["host_populated_pages"] == 8
    off = uvmsim.simulate(t, model=H200, slices=False, host_access=False, **kw)
    contract = uvmsim.simulate(t, **kw).summary
    # same counts; the fitted eviction and zero-fill costs make it slower
    assert {k: v for k, v in off.summary.items() if k != "sim_time_ns"} == \
        {k: v for k, v in contract.items() if k != "sim_time_ns"}
    assert off.summary["sim_time_ns"] > contract["sim_time_ns"]
    off_hw = uvmsim.simulate(t, model=H200, host_access=False, hardware="h200-pcie5", **kw)
    assert off_hw.summary == contract
    assert both(t, model="h200", **kw).summary == h.summary


def test_model_registry_and_validation():
    assert set(MODELS) == {"contract", "h200", "h100", "h200-progress"}
    assert get_model() is CONTRACT and not CONTRACT.device_copies
    # the validation chose device copies for h200 (docs/validation.md), not yet for h100
    assert H200.device_copies and not MODELS["h100"].device_copies
    # the progress preset: h200's mechanisms, the front-end's rules and its refitted time
    p = MODELS["h200-progress"]
    assert (p.block_progress, p.store_ahead, p.fault_order, p.share_units) == \
        (True, 16, "age", True)
    assert p.host_access and p.device_copies and p.shared_windows and p.partial_blocks
    assert (p.hardware.batch_ns, p.hardware.zero_fill_ns, p.hardware.migrate_page_ns,
            p.hardware.zero_batch_ns) == (80_000.0, 300.0, 128.0, 30_000.0)
    for k in ("fault_ns", "bw_peak_gbps", "evict_ns"):
        assert getattr(p.hardware, k) == getattr(H200_PCIE5_FIT, k), k
    # the link's latency per copy was refitted by the grid, inside its measured lower bound
    assert p.hardware.transfer_latency_ns == 8_000.0 < H200_PCIE5_FIT.transfer_latency_ns
    assert p.hardware.transfer_latency_ns >= 2_690.0
    for k in ("batch_ns", "transfer_latency_ns"):
        assert "grid" in dict(p.hardware.sources)[k], k
    assert not any((CONTRACT.slices, CONTRACT.host_access, CONTRACT.thrashing))
    assert H200.hardware is H200_PCIE5_FIT and H200.fault_batch_size == 256
    # the fit changed only what the factor-1 calibration could not measure
    for k in ("batch_ns", "fault_ns", "transfer_latency_ns", "bw_peak_gbps", "bw_b"):
        assert getattr(H200_PCIE5_FIT, k) == getattr(H200_PCIE5, k), k
    assert H200_PCIE5_FIT.evict_ns > 0 and H200_PCIE5.evict_ns == 0
    # the H100's: its calibrated link, the suite's fit only adding the zero-fill,
    # per-migrated-page and per-eviction costs
    h100 = MODELS["h100"]
    assert h100.hardware is uvmsim.config.H100_PCIE5_FIT and h100.fault_batch_size == 256
    for k in ("batch_ns", "fault_ns", "transfer_latency_ns", "bw_peak_gbps", "bw_b"):
        assert getattr(h100.hardware, k) == getattr(uvmsim.config.H100_PCIE5, k), k
    assert h100.host_access and h100.shared_windows and not CONTRACT.shared_windows
    assert h100.partial_blocks and not CONTRACT.partial_blocks and not H200.partial_blocks
    with pytest.raises(uvmsim.ConfigError, match="unknown model"):
        get_model("h300")
    with pytest.raises(uvmsim.ConfigError, match="fault_batch_size"):
        Model(fault_batch_size=0)
    with pytest.raises(uvmsim.ConfigError, match="thrashing parameter"):
        get_model(thrashing={"bogus": 1.0})
    m = get_model("h200", thrashing={"nap_us": 700.0}, hardware="a100-pcie4")
    assert m.thrashing and m.thrashing_settings()["nap_us"] == 700.0
    assert m.hardware.name == "a100-pcie4" and m.host_access
    assert hash(m) == hash(dataclasses.replace(m))       # frozen, usable as a key


def test_model_from_constants_is_the_fitting_hook():
    fit = model_from_constants({"evict_ns": 150_000.0, "dtoh_bw_gbps": 12.0,
                                "fault_batch_size": 32, "nap_us": 100.0})
    assert fit.name == "h200" and not fit.slices and fit.host_access and not fit.thrashing
    hw = fit.hardware
    assert (hw.evict_ns, hw.dtoh_bw_gbps, hw.batch_ns) == (150_000.0, 12.0, 137_000.0)
    assert dict(hw.sources)["evict_ns"] == FITTED
    assert dict(hw.sources)["batch_ns"] == dict(H200_PCIE5.sources)["batch_ns"]
    assert fit.fault_batch_size == 32 and dict(fit.sources)["fault_batch_size"] == FITTED
    assert fit.thrashing_settings()["nap_us"] == 100.0
    # the registered preset is untouched: the hook returns a new Model
    assert MODELS["h200"].hardware.evict_ns == H200_PCIE5_FIT.evict_ns == 13_440.0
    with pytest.raises(uvmsim.ConfigError, match="unknown constant 'evict_us'"):
        model_from_constants({"evict_us": 1.0})
    t = v11_trace().build()
    a = uvmsim.simulate(t, model=fit, capacity_chunks=1)
    assert a.config["hardware"] == "h200-fitted" and a.config["fault_batch_size"] == 32


def test_multi_tenant_replay_takes_the_model():
    from uvmsim.multi import simulate_multi
    t = v11_trace().build()
    kw = dict(model="h200", capacity_chunks=2, fault_batch_size=1, prefetch="none")
    a = simulate_multi([t, t], **kw)
    b = simulate_multi([t, t], engine="reference", **kw)
    s = uvmsim.simulate(t, **kw)
    for x, y in zip(a.tenants + a.alone, b.tenants + b.alone):
        assert x.summary["faults"] == y.summary["faults"]
        assert x.summary["sim_time_ns"] == pytest.approx(y.summary["sim_time_ns"])
    # alone, a tenant's clocked replay is simulate() with the same model
    alone = a.alone[0].summary
    assert {k: v for k, v in alone.items() if k != "sim_time_ns"} == {
        k: v for k, v in s.summary.items() if k != "sim_time_ns"}
    assert alone["sim_time_ns"] == pytest.approx(s.summary["sim_time_ns"])
    assert a.config["model"] == "h200" and a.tenants[0].extra["host_populated_pages"] == 8
    with pytest.raises(uvmsim.ConfigError, match="engine"):
        simulate_multi([t], engine="slow")
    assert np.isfinite(a.slowdown[0])
