"""Hardware presets for the time layer.

Every constant names its source: a measurement on a named GPU or a cited paper or code.
Constants nobody has measured for that system say "uncalibrated".
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

import numpy as np

from .engine.state import (HW_BATCH_NS, HW_BW_A, HW_BW_B, HW_FAULT_NS, HW_XFER_LAT_NS,
                           HW_ZERO_NS, N_HW)
from .errors import ConfigError

CHUNK_BYTES = 2 << 20


@dataclass(frozen=True)
class Hardware:
    """Time constants of one GPU + link. Frozen and hashable; `sources` says where each
    value came from."""

    name: str
    batch_ns: float          # fixed cost of servicing one fault batch
    fault_ns: float          # cost per fault in a batch
    transfer_latency_ns: float  # per transfer (a contiguous run of pages in one block)
    bw_peak_gbps: float      # a in bw(KiB) = 2a/pi * atan(b * KiB) GB/s
    bw_b: float              # b of that curve
    zero_fill_ns: float = 0.0   # per zero-filled page
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    def vector(self) -> np.ndarray:
        v = np.zeros(N_HW, np.float64)
        v[HW_BATCH_NS] = self.batch_ns
        v[HW_FAULT_NS] = self.fault_ns
        v[HW_XFER_LAT_NS] = self.transfer_latency_ns
        v[HW_BW_A] = self.bw_peak_gbps
        v[HW_BW_B] = self.bw_b
        v[HW_ZERO_NS] = self.zero_fill_ns
        return v

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["sources"] = dict(self.sources)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


_UVMSMART = ("DebashisGanguly/gpgpu-sim_UVMSmart src/gpgpu-sim/gpu-sim.cc: bandwidth "
             "2a/pi*atan(b*KB), b = 0.07292")

A100_PCIE4 = Hardware(
    name="a100-pcie4",
    batch_ns=45_000.0, fault_ns=500.0, transfer_latency_ns=1_000.0,
    bw_peak_gbps=24.0, bw_b=0.07292, zero_fill_ns=0.0,
    sources=(
        ("batch_ns", "UVMSmart far-fault latency 66,645 cycles at 1,481 MHz = 45 us "
                     "(anchors.md), charged once per batch; uncalibrated for A100"),
        ("fault_ns", "uncalibrated estimate"),
        ("transfer_latency_ns", "uncalibrated estimate"),
        ("bw_peak_gbps", "UVMSmart a = 24 for a 32 GB/s (PCIe 4 x16) link; " + _UVMSMART),
        ("bw_b", _UVMSMART),
        ("zero_fill_ns", "uncalibrated: GPU-side zero-fill taken as free"),
    ))

H100_PCIE5 = Hardware(
    name="h100-pcie5",
    batch_ns=45_000.0, fault_ns=500.0, transfer_latency_ns=1_000.0,
    bw_peak_gbps=48.0, bw_b=0.07292, zero_fill_ns=0.0,
    sources=(
        ("batch_ns", "UVMSmart far-fault latency 45 us (anchors.md), charged once per batch; "
                     "uncalibrated for H100"),
        ("fault_ns", "uncalibrated estimate"),
        ("transfer_latency_ns", "uncalibrated estimate"),
        ("bw_peak_gbps", "UVMSmart a = 48 for a 64 GB/s (PCIe 5 x16) link; " + _UVMSMART),
        ("bw_b", _UVMSMART),
        ("zero_fill_ns", "uncalibrated: GPU-side zero-fill taken as free"),
    ))

_CALIB = ("measured on an NVIDIA H200 (PCIe 5 x16, driver 580.159.04, CUDA 13.0), "
          "2026-11-22, by benchmarks/calibrate (docs/calibration.md)")

H200_PCIE5 = Hardware(
    name="h200-pcie5",
    batch_ns=137_000.0, fault_ns=150.0, transfer_latency_ns=13_600.0,
    bw_peak_gbps=53.5, bw_b=100.0, zero_fill_ns=0.0,
    sources=(
        ("batch_ns", "least-squares fit of 50 faulting kernels' stalls to the model's counts; "
                     "median relative error 0.14; " + _CALIB),
        ("fault_ns", "same fit; " + _CALIB),
        ("transfer_latency_ns", "same fit; effective: includes ~14 us of per-block driver work "
                                "(CUPTI's pure copy latency is 2,690 ns); " + _CALIB),
        ("bw_peak_gbps", "fit to 94,000 CUPTI host-to-device migration records, 4 KiB-1 MiB, "
                         "3.7 % rms; " + _CALIB),
        ("bw_b", "bandwidth is flat from 4 KiB up; the fit hit its bound (any b >= ~10 fits "
                 "equally); " + _CALIB),
        ("zero_fill_ns", "not fitted (about 80 ns per page unexplained); " + _CALIB),
    ))

PRESETS: dict[str, Hardware] = {h.name: h for h in (H200_PCIE5, H100_PCIE5, A100_PCIE4)}
# the one preset whose constants were measured (the shipped traces were captured on it too)
DEFAULT_HARDWARE = "h200-pcie5"


@dataclass(frozen=True)
class Translation:
    """Opt-in address translation: one GPU-wide TLB and a pool of page-table walkers.

    Every access row of a non-host page looks its translation up in a set-associative LRU
    TLB of `tlb_entries` entries (`ways` per set) over pages of `page_size` bytes. A miss
    takes a walker for `walk_ns` (FIFO, `walkers` of them); a miss on a translation whose
    walk is still in flight merges with it (counted as a TLB miss, not a page walk). Walks
    overlap the kernel's compute: a kernel ends when its compute and its last walk are done.
    The TLB is filled only for resident pages and shot down when pages leave the GPU.
    """

    tlb_entries: int = 4096     # UVMSmart: 4,096 TLB entries (per SM there; one shared here)
    page_size: int = 4096       # translation granularity: 4 KiB, 64 KiB or 2 MiB
    walkers: int = 32           # gem5-gpu: 32 page-table walkers (UVMSmart: unlimited)
    walk_ns: float = 100 / 1.481  # UVMSmart: 100 cycles at 1,481 MHz = 67.5 ns
    ways: int = 16              # uncalibrated: associativity of the modelled TLB
    sources: tuple[tuple[str, str], ...] = field(default=(
        ("tlb_entries", "UVMSmart (gpgpu-sim_UVMSmart) TLB 4096 entries per SM; anchors.md"),
        ("walkers", "gem5-gpu: 32 page walkers; anchors.md"),
        ("walk_ns", "UVMSmart page walk 100 cycles at its 1,481 MHz core clock; anchors.md"),
        ("page_size", "uncalibrated choice: the driver's 4 KiB migration granularity"),
        ("ways", "uncalibrated assumption")), compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.page_size not in (4096, 65536, 2 << 20):
            raise ConfigError(f"page_size must be 4096, 65536 or 2097152, got {self.page_size}")
        if self.ways < 1 or self.tlb_entries < self.ways or self.tlb_entries % self.ways:
            raise ConfigError(f"tlb_entries ({self.tlb_entries}) must be a positive multiple "
                              f"of ways ({self.ways})")
        if self.walkers < 1:
            raise ConfigError(f"walkers must be >= 1, got {self.walkers}")
        if not self.walk_ns > 0:
            raise ConfigError(f"walk_ns must be > 0, got {self.walk_ns}")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["sources"] = dict(self.sources)
        return d


def get_translation(tr: "Translation | dict | bool | None") -> "Translation | None":
    """None/False: off; True: the defaults; a dict of Translation fields; or a Translation."""
    if tr is None or tr is False:
        return None
    if tr is True:
        return Translation()
    if isinstance(tr, Translation):
        return tr
    if isinstance(tr, dict):
        try:
            return Translation(**tr)
        except TypeError as e:
            raise ConfigError(f"bad translation settings: {e}") from None
    raise ConfigError(f"translation must be a Translation, dict, bool or None, got {tr!r}")


def get_hardware(hw: str | Hardware | None) -> Hardware:
    """A preset name or a Hardware."""
    if hw is None:
        return PRESETS[DEFAULT_HARDWARE]
    if isinstance(hw, Hardware):
        return hw
    if hw in PRESETS:
        return PRESETS[hw]
    raise ConfigError(f"unknown hardware {hw!r}; presets: {', '.join(sorted(PRESETS))}")


def capacity_chunks(peak_blocks: int, *, oversub: float | None = None,
                    capacity_bytes: int | None = None,
                    capacity_chunks: int | None = None) -> int:
    """GPU memory in 2 MiB chunks from exactly one of the three ways to give it.

    With none given, factor 1 (the peak number of live VA blocks: nothing is evicted).
    """
    given = [x is not None for x in (oversub, capacity_bytes, capacity_chunks)]
    if sum(given) > 1:
        raise ConfigError("give at most one of oversub, capacity_bytes, capacity_chunks")
    if capacity_chunks is not None:
        if int(capacity_chunks) < 1:
            raise ConfigError(f"capacity_chunks must be >= 1, got {capacity_chunks}")
        return int(capacity_chunks)
    if capacity_bytes is not None:
        if int(capacity_bytes) < CHUNK_BYTES:
            raise ConfigError(f"capacity_bytes must be >= {CHUNK_BYTES} (one 2 MiB chunk), "
                              f"got {capacity_bytes}")
        return int(capacity_bytes) // CHUNK_BYTES
    f = 1.0 if oversub is None else float(oversub)
    if not f > 0 or f != f:
        raise ConfigError(f"oversubscription factor must be > 0, got {oversub}")
    return max(1, int(np.floor(peak_blocks / f)))
