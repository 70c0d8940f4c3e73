"""Every rule of docs/semantics.md on tiny traces whose counts are computed by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

import uvmsim
from uvmsim.config import H100_PCIE5, Hardware
from uvmsim.trace.builder import TraceBuilder

from helpers import MiB, PAGE, run

R, W, A = 1, 2, 4


def one_kernel(pages, flags=R, size=4 * MiB, **kw):
    b = TraceBuilder()
    x = b.alloc(size)
    pg = b.pages(x)
    b.kernel("k", rows=[(int(pg[p]), flags) for p in pages])
    return run(b, **kw), b


# ---------------------------------------------------------------- batching and faults
def test_batch_boundaries_follow_fault_batch_size():
    r, _ = one_kernel(range(10), prefetch="none", fault_batch_size=4)
    assert r.summary["faults"] == 10
    assert r.summary["fault_batches"] == 3          # 4 + 4 + 2
    r, _ = one_kernel(range(8), prefetch="none", fault_batch_size=4)
    assert r.summary["fault_batches"] == 2          # no empty batch at the end


def test_fault_type_read_write_atomic():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    p = b.pages(x)
    b.kernel("k", rows=[(p[0], R), (p[1], W), (p[2], A), (p[3], R | W), (p[4], R | A)])
    r = run(b, prefetch="none")
    assert (r.summary["faults_read"], r.summary["faults_write"]) == (1, 4)


def test_page_made_resident_by_same_batch_prefetch_is_a_hit_later():
    # batch of 1: the first fault brings the whole block with 2m, the next row hits
    r, _ = one_kernel([0, 1, 2], prefetch="2m", fault_batch_size=1)
    assert r.summary["faults"] == 1
    assert r.summary["fault_batches"] == 1
    # with none, every page faults
    r, _ = one_kernel([0, 1, 2], prefetch="none", fault_batch_size=1)
    assert r.summary["faults"] == 3


def test_resident_page_in_later_kernel_is_a_hit():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    p = b.pages(x)
    b.kernel("k1", reads=p[:5])
    b.kernel("k2", reads=p[:5])
    r = run(b, prefetch="none")
    assert list(r.kernels["faults"]) == [5, 0]


def test_blocks_serviced_in_address_order_within_a_batch():
    # one chunk of capacity; the batch faults block 1 first in row order, then block 0.
    # Ascending order services block 0 then block 1 (evicting 0): block 1 stays resident.
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    p = b.pages(x)
    b.kernel("k1", reads=[p[512], p[0]])
    b.kernel("k2", reads=[p[512]])
    b.kernel("k3", reads=[p[0]])
    r = run(b, prefetch="none", capacity_chunks=1)
    assert list(r.kernels["faults"]) == [2, 0, 1]
    assert list(r.kernels["evicted_chunks"]) == [1, 0, 1]


def test_block_order_ties_broken_by_lower_allocation_base():
    # two allocations share one 2 MiB window and one 4 KiB page boundary region
    b = TraceBuilder()
    base = 0x7F0000000000
    lo = b.alloc(6000, base=base)             # pages 0 and 1 of the window
    hi = b.alloc(PAGE, base=base + 6000)      # starts inside page 1, ends in page 2
    pl = b.pages(lo)
    ph = b.pages(hi)
    assert ph[0] == pl[1]                     # they share page 1
    # kernel touches hi's own page 2 (row 0) then lo's page 0: both blocks' first page
    # differ (page 0 vs page 1) so lo's block is serviced first, then hi's evicts it
    b.kernel("k1", reads=[ph[1], pl[0]])
    b.kernel("k2", reads=[ph[1]])
    r = run(b, prefetch="none", capacity_chunks=1)
    assert list(r.kernels["faults"]) == [2, 0]


def test_shared_page_attributed_to_lowest_base_allocation():
    b = TraceBuilder()
    base = 0x7F0000000000
    lo = b.alloc(6000, base=base)
    hi = b.alloc(8192, base=base + 6000)
    shared = b.pages(lo)[1]
    b.kernel("k1", reads=[shared])
    b.kernel("k2", reads=[b.pages(hi)[0]])   # same virtual page, but via hi: still lo's
    r = run(b, prefetch="none")
    assert list(r.kernels["faults"]) == [1, 0]


# ---------------------------------------------------------------- prefetch policies
def _populate_then_spill(b, x, pages):
    """Write pages (zero-filled, populated) and prefetch them back to the CPU."""
    b.kernel("init", writes=pages)
    b.prefetch(b.base(x), b._allocs[x]["size"], "cpu")


def test_none_moves_only_faulted_pages():
    r, _ = one_kernel([3, 40], prefetch="none")
    assert r.summary["zero_fill_pages"] == 2


def test_64k_fills_big_pages_holding_faults():
    r, _ = one_kernel([3, 40], prefetch="64k")
    assert r.summary["faults"] == 2
    assert r.summary["zero_fill_pages"] == 32       # big pages 0 and 2, 16 pages each


def test_64k_clips_big_page_at_allocation_end():
    # 2 MiB + 40 KiB: second block's in(K) is positions 0..9
    b = TraceBuilder()
    x = b.alloc(2 * MiB + 40 * 1024)
    p = b.pages(x)
    b.kernel("k", reads=[p[512 + 3]])
    r = run(b, prefetch="64k")
    assert r.summary["zero_fill_pages"] == 10


def test_64k_clips_big_page_at_allocation_start():
    # allocation starting 24 KiB into a 64 KiB big page: in(K) starts at position 6
    b = TraceBuilder()
    x = b.alloc(1 * MiB, base=0x7F0000000000 + 24 * 1024)
    p = b.pages(x)
    b.kernel("k", reads=[p[0]])
    r = run(b, prefetch="64k")
    assert r.summary["zero_fill_pages"] == 10       # positions 6..15


def test_2m_fills_the_va_block_only_inside_the_allocation():
    b = TraceBuilder()
    x = b.alloc(2 * MiB + 40 * 1024)
    p = b.pages(x)
    b.kernel("k", reads=[p[0], p[512]])
    r = run(b, prefetch="2m")
    assert r.summary["zero_fill_pages"] == 512 + 10


def test_density_grows_to_big_page_then_dense_region():
    # F = 0..8: B = big page 0 (16 pages); [0,16) is 100 % dense, [0,32) is 50 % (not > 51)
    r, _ = one_kernel(range(9), prefetch="density")
    assert r.summary["zero_fill_pages"] == 16


def test_density_threshold_parameter():
    # same faults; with threshold 49, [0,32) at 50 % qualifies, [0,64) at 25 % does not
    r, _ = one_kernel(range(9), prefetch="density", prefetch_params={"threshold": 49})
    assert r.summary["zero_fill_pages"] == 32


def test_density_counts_resident_pages():
    # pages 16..31 resident first; then F = {0}: B = big page 0 + 16..31 -> [0,32) full,
    # [0,64) at 50 % -> region [0,32): prefetches 1..15
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    p = b.pages(x)
    b.kernel("k1", reads=p[16:32])
    b.kernel("k2", reads=[p[0]])
    r = run(b, prefetch="density")
    k2 = r.kernels.iloc[1]
    assert k2["faults"] == 1 and k2["zero_fill_pages"] == 16


def test_density_whole_block_when_more_than_half_is_there():
    # 257 resident-or-faulted pages of 512 -> 50.2 % is not > 51 %; 262 pages (51.2 %) is
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    p = b.pages(x)
    b.kernel("k1", reads=p[0:256])            # big pages 0..15 resident
    b.kernel("k2", reads=[p[256 + 5]])        # F in big page 16 -> B = 272 pages = 53 %
    r = run(b, prefetch="density")
    assert r.kernels.iloc[1]["zero_fill_pages"] == 256   # rest of the block


def test_density_stops_when_region_reaches_end_of_block():
    # F = {0, 300}: block of 512; faults in big pages 0 and 18; B = 32 pages (6 %)
    # p=0 -> [0,16); p=300 -> big page [288,304) -> region [288,304): P from both
    r, _ = one_kernel([0, 300], prefetch="density")
    assert r.summary["zero_fill_pages"] == 32
    # allocation of 40 KiB: in(K) = 0..9, F = {2}: region for p=2 is [0,10) (in(K) of the
    # 16-window), which reaches the last position -> stop
    b = TraceBuilder()
    x = b.alloc(40 * 1024)
    p = b.pages(x)
    b.kernel("k", reads=[p[2], p[7]])
    r = run(b, prefetch="density", fault_batch_size=256)
    assert r.summary["zero_fill_pages"] == 10


def test_prefetch_of_populated_pages_is_a_transfer_under_prefetch():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    p = b.pages(x)
    _populate_then_spill(b, x, p[:16])
    b.kernel("k", reads=[p[0]])
    r = run(b, prefetch="64k")
    k = r.kernels.iloc[1]
    assert k["htod_bytes_demand"] == PAGE
    assert k["htod_bytes_prefetch"] == 15 * PAGE
    assert k["zero_fill_pages"] == 0
    assert r.summary["dtoh_bytes_api_prefetch"] == 16 * PAGE


# ---------------------------------------------------------------- zero-fill vs transfer
def test_first_touch_is_zero_fill_then_transfer_after_eviction():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    p = b.pages(x)
    b.kernel("k1", writes=p[:4])              # block 0: zero-fill 4
    b.kernel("k2", reads=[p[512]])            # block 1: evicts block 0 (4 pages back)
    b.kernel("k3", reads=p[:4])               # block 0 again: 4 transfers, evicts block 1
    r = run(b, prefetch="none", capacity_chunks=1)
    k = r.kernels
    assert list(k["zero_fill_pages"]) == [4, 1, 0]
    assert list(k["htod_bytes_demand"]) == [0, 0, 4 * PAGE]
    assert list(k["dtoh_bytes_evict"]) == [0, 4 * PAGE, PAGE]
    assert r.summary["evicted_chunks"] == 2


# ---------------------------------------------------------------- eviction
def test_lru_is_recency_of_migration_not_of_hits():
    b = TraceBuilder()
    x = b.alloc(6 * MiB)
    p = b.pages(x)
    A, B, C = p[0], p[512], p[1024]
    b.kernel("kA", reads=[A])
    b.kernel("kB", reads=[B])
    b.kernel("kA_hit", reads=[A])             # a hit: does not refresh A
    b.kernel("kC", reads=[C])                 # evicts A (least recently migrated into)
    b.kernel("kB_again", reads=[B])           # still resident
    b.kernel("kA_again", reads=[A])           # faults
    r = run(b, prefetch="none", capacity_chunks=2)
    assert list(r.kernels["faults"]) == [1, 1, 0, 1, 0, 1]
    assert list(r.kernels["evicted_chunks"]) == [0, 0, 0, 1, 0, 1]


def test_migration_into_a_chunk_refreshes_it():
    b = TraceBuilder()
    x = b.alloc(6 * MiB)
    p = b.pages(x)
    b.kernel("kA", reads=[p[0]])
    b.kernel("kB", reads=[p[512]])
    b.kernel("kA2", reads=[p[1]])             # new page in A's chunk: A is most recent
    b.kernel("kC", reads=[p[1024]])           # evicts B
    b.kernel("kA3", reads=[p[0], p[1]])       # hits
    r = run(b, prefetch="none", capacity_chunks=2)
    assert list(r.kernels["faults"]) == [1, 1, 1, 1, 0]


def test_eviction_writes_back_every_resident_page_no_dirty_bits():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    p = b.pages(x)
    b.kernel("read_only", reads=p[:7])
    b.kernel("other", reads=[p[512]])
    r = run(b, prefetch="none", capacity_chunks=1)
    assert r.summary["dtoh_bytes_evict"] == 7 * PAGE


def test_factor_one_never_evicts_and_capacity_formula():
    b = TraceBuilder()
    xs = [b.alloc(3 * MiB) for _ in range(3)]   # 2 blocks each
    for x in xs:
        b.kernel("k", reads=b.pages(x))
    t = b.build()
    assert t.peak_blocks == 6
    r = uvmsim.simulate(t, oversub=1.0, prefetch="none")
    assert r.summary["evicted_chunks"] == 0 and r.summary["capacity_chunks"] == 6
    assert uvmsim.simulate(t, oversub=1.5).summary["capacity_chunks"] == 4
    assert uvmsim.simulate(t, oversub=4.0).summary["capacity_chunks"] == 1
    assert uvmsim.simulate(t, oversub=100.0).summary["capacity_chunks"] == 1   # at least one
    assert uvmsim.simulate(t, capacity_bytes=5 * MiB).summary["capacity_chunks"] == 2


def test_peak_blocks_counts_live_non_host_allocations_only():
    b = TraceBuilder()
    a = b.alloc(4 * MiB)                 # 2 blocks
    h = b.alloc(64 * MiB, kind="host")   # never counts
    b.free(a)
    c = b.alloc(2 * MiB)                 # 1 block
    d = b.alloc(1)                       # 1 block
    b.kernel("k", reads=[b.pages(c)[0], b.pages(d)[0], b.pages(h)[0]])
    t = b.build()
    assert t.peak_blocks == 2


def test_host_allocation_rows_have_no_effect():
    b = TraceBuilder()
    h = b.alloc(4 * MiB, kind="host")
    b.kernel("k", reads=b.pages(h)[:100])
    r = run(b)
    assert r.summary["faults"] == 0 and r.summary["accesses"] == 100
    assert r.summary["zero_fill_pages"] == 0


def test_free_releases_chunks_without_transfer():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.kernel("k1", writes=b.pages(x))
    b.free(x)
    y = b.alloc(2 * MiB)
    b.kernel("k2", reads=b.pages(y)[:3])
    r = run(b, prefetch="none", capacity_chunks=1)
    assert r.summary["evicted_chunks"] == 0
    assert r.summary["dtoh_bytes_evict"] == 0
    assert r.kernels.iloc[1]["zero_fill_pages"] == 3


def test_pages_of_a_reused_address_start_unpopulated():
    b = TraceBuilder()
    base = 0x7F0000000000
    x = b.alloc(2 * MiB, base=base)
    b.kernel("k1", writes=b.pages(x)[:4])
    b.free(x)
    y = b.alloc(2 * MiB, base=base)
    b.kernel("k2", reads=b.pages(y)[:4])
    r = run(b, prefetch="none")
    assert list(r.kernels["zero_fill_pages"]) == [4, 4]
    assert r.summary["htod_bytes"] == 0


# ---------------------------------------------------------------- copies, memset, prefetch
def test_memcpy_htod_makes_overlapped_pages_resident_as_transfers():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    # 3 bytes before the allocation to 10 bytes into page 2: clipped, pages 0..2
    b.memcpy_htod(b.base(x) - 3, 3 + 2 * PAGE + 10)
    b.kernel("k", reads=b.pages(x)[:3])
    r = run(b, prefetch="none")
    assert r.summary["htod_bytes_memcpy"] == 3 * PAGE
    assert r.summary["faults"] == 0
    assert r.kernels["htod_bytes_memcpy"].sum() == 0     # outside every kernel


def test_memcpy_across_blocks_and_with_populated_pages_counts_every_page():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.memcpy_htod(b.base(x) + 2 * MiB - PAGE, 2 * PAGE)  # last page of block 0, first of 1
    r = run(b)
    assert r.summary["htod_bytes_memcpy"] == 2 * PAGE


def test_memset_zero_fills_and_dtoh_dtod_sync_do_nothing():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.memset(b.base(x), 5 * PAGE)
    b.memcpy_dtoh(b.base(x), 2 * MiB)
    b.memcpy_dtod(b.base(x), 2 * MiB)
    b.sync()
    b.kernel("k", reads=b.pages(x)[:6])
    r = run(b, prefetch="none")
    assert r.summary["zero_fill_pages"] == 6       # 5 memset + 1 fault
    assert r.summary["faults"] == 1
    assert r.summary["htod_bytes"] == 0 and r.summary["dtoh_bytes_evict"] == 0


def test_device_copies_make_a_dtod_destination_resident_as_a_fault_would():
    # option device_copies (docs/semantics.md): the copy engine's faults on the destination
    # are serviced as a GPU fault's, outside any kernel: unpopulated pages zero-filled,
    # populated ones (here evicted earlier) copied in as demand; no fault is counted
    b = TraceBuilder()
    x, y = b.alloc(2 * MiB), b.alloc(2 * MiB)
    b.kernel("w", writes=b.pages(x)[:3])                       # x: 3 pages populated
    b.kernel("evict", writes=b.pages(y)[:1])                   # capacity 1: x evicted
    b.memcpy_dtod(b.base(x), 5 * PAGE)                         # 3 populated + 2 new
    b.kernel("r", reads=b.pages(x)[:5])
    off = run(b, capacity_chunks=1, prefetch="none")
    on = run(b, capacity_chunks=1, prefetch="none", device_copies=True)
    assert off.kernels["faults"].tolist() == [3, 1, 5]
    assert on.kernels["faults"].tolist() == [3, 1, 0]
    assert on.outside_kernels["htod_bytes_demand"] == 3 * PAGE
    assert on.outside_kernels["zero_fill_pages"] == 2
    # the copy took y's chunk back (one more eviction than without it, where r did)
    assert on.summary["evicted_chunks"] == off.summary["evicted_chunks"] == 2
    assert on.kernels["htod_bytes_demand"].tolist() == [0, 0, 0]


def test_device_copies_off_keeps_the_contract_counts():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.memcpy_dtod(b.base(x) + MiB, 2 * MiB)
    b.kernel("k", reads=b.pages(x))
    a, c = run(b), run(b, device_copies=False)
    assert a.summary == c.summary and a.summary["faults"] == 1024


def test_memcpy_can_evict():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    b.kernel("k", writes=b.pages(x)[:2])
    b.memcpy_htod(b.base(x) + 2 * MiB, PAGE)
    r = run(b, capacity_chunks=1, prefetch="none")
    assert r.summary["evicted_chunks"] == 1 and r.summary["dtoh_bytes_evict"] == 2 * PAGE


def test_prefetch_to_gpu_no_faults_zero_fill_and_transfer():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    p = b.pages(x)
    _populate_then_spill(b, x, p[:8])
    b.prefetch(b.base(x), 16 * PAGE, "gpu")
    b.kernel("k", reads=p[:16])
    r = run(b, prefetch="none")
    assert r.summary["htod_bytes_api_prefetch"] == 8 * PAGE
    assert r.summary["zero_fill_pages"] == 8 + 8
    assert r.kernels.iloc[1]["faults"] == 0


def test_prefetch_to_cpu_returns_empty_chunk_to_pool_without_eviction_count():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    p = b.pages(x)
    b.kernel("k1", writes=p[:3])
    b.prefetch(b.base(x), PAGE, "cpu")      # one page back: chunk still held
    b.prefetch(b.base(x), 2 * MiB, "cpu")   # the rest: chunk free
    b.kernel("k2", reads=[p[512]])          # capacity 1: no eviction needed
    r = run(b, prefetch="none", capacity_chunks=1)
    assert r.summary["dtoh_bytes_api_prefetch"] == 3 * PAGE
    assert r.summary["evicted_chunks"] == 0


def test_advise_has_no_effect_by_default():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.advise(b.base(x), 2 * MiB, "set_preferred_location_cpu")
    b.kernel("k", reads=b.pages(x)[:4])
    r = run(b, prefetch="none")
    assert r.summary["faults"] == 4


# ---------------------------------------------------------------- totals and time
def test_kernel_counts_sum_to_totals_plus_outside_kernels():
    from uvmsim.trace import synth
    t = synth.make("training", layers=3, steps=1, weight_bytes=3 * MiB,
                   activation_bytes=5 * MiB, prefetch_weights=True)
    r = uvmsim.simulate(t, oversub=2.0)
    for c in ("faults", "htod_bytes_demand", "evicted_chunks", "dtoh_bytes_evict",
              "zero_fill_pages", "htod_bytes_api_prefetch"):
        assert r.kernels[c].sum() + r.outside_kernels[c] == r.summary[c]
    assert r.summary["htod_bytes"] == sum(r.summary[k] for k in (
        "htod_bytes_demand", "htod_bytes_prefetch", "htod_bytes_memcpy",
        "htod_bytes_api_prefetch"))
    assert r.summary["faults"] == r.summary["faults_read"] + r.summary["faults_write"]
    assert r.summary["kernels"] == t.n_kernels and r.summary["accesses"] == t.n_accesses


def test_summary_has_exactly_the_spec_names():
    r, _ = one_kernel([0])
    assert list(r.summary) == [
        "faults", "faults_read", "faults_write", "fault_batches", "htod_bytes_demand",
        "htod_bytes_prefetch", "htod_bytes_memcpy", "htod_bytes_api_prefetch", "htod_bytes",
        "zero_fill_pages", "evicted_chunks", "dtoh_bytes_evict", "dtoh_bytes_api_prefetch",
        "kernels", "accesses", "capacity_chunks", "peak_blocks", "sim_time_ns"]
    for c in ("name", "compute_ns", "stall_ns", "sim_ns", "faults", "htod_bytes"):
        assert c in r.kernels.columns


def _xfer(hw: Hardware, nbytes: int) -> float:
    bw = 2 / math.pi * hw.bw_peak_gbps * math.atan(hw.bw_b * nbytes / 1024)
    return hw.transfer_latency_ns + nbytes / bw


def test_time_layer_charges_batches_faults_runs_and_duration():
    hw = Hardware("t", batch_ns=1000.0, fault_ns=10.0, transfer_latency_ns=100.0,
                  bw_peak_gbps=16.0, bw_b=0.07292)
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    p = b.pages(x)
    b.kernel("w", writes=p[:6], duration_ns=5000)
    b.prefetch(b.base(x), 2 * MiB, "cpu")        # populated, spilled: 6 pages in one run
    # faults at 0,1,2 and 4,5: two runs (3 and 2 pages) in one block, one batch
    b.kernel("r", reads=[p[0], p[1], p[2], p[4], p[5]], duration_ns=7000)
    r = run(b, prefetch="none", hardware=hw)
    k = r.kernels
    assert k.iloc[0]["stall_ns"] == pytest.approx(1000 + 6 * 10)    # zero-fill is free
    expect = 1000 + 5 * 10 + _xfer(hw, 3 * PAGE) + _xfer(hw, 2 * PAGE)
    assert k.iloc[1]["stall_ns"] == pytest.approx(expect)
    assert k.iloc[1]["sim_ns"] == pytest.approx(7000 + expect)
    outside = _xfer(hw, 6 * PAGE)
    assert r.summary["sim_time_ns"] == pytest.approx(k["sim_ns"].sum() + outside)


def test_unknown_duration_counts_as_zero_compute():
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.kernel("k", reads=b.pages(x)[:1], duration_ns=None)
    r = run(b, hardware=H100_PCIE5)
    assert r.kernels.iloc[0]["compute_ns"] == 0


def test_results_identical_run_to_run():
    from uvmsim.trace import synth
    t = synth.make("zipf", footprint_bytes=64 * MiB, pages_per_kernel=4000, seed=3)
    a = uvmsim.simulate(t, oversub=2.0)
    b = uvmsim.simulate(t, oversub=2.0)
    assert a.summary == b.summary
    assert a.kernels.equals(b.kernels)
