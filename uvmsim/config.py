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

PRESETS: dict[str, Hardware] = {h.name: h for h in (A100_PCIE4, H100_PCIE5)}
DEFAULT_HARDWARE = "h100-pcie5"


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
