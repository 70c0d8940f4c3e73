"""The link: the time of a transfer between host and GPU memory.

The curves (transfer_ns, transfer_dtoh_ns) are shared by the engine and the reference model;
`hw` is the HARDWARE record (uvmsim.engine.state, uvmsim.config.Hardware.record). The engine
computes them once per replay into S.xfer (transfer_table) and its parts ask the link for
the time of one copy of a run of pages (htod_ns, dtoh_ns): a load instead of an atan.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

_TWO_OVER_PI = 2.0 / math.pi


@njit(cache=True)
def transfer_ns(hw, nbytes):
    """Latency + bytes / bandwidth(size), bandwidth = 2a/pi * atan(b * KiB) GB/s.

    The curve is UVMSmart's (gpgpu-sim_UVMSmart, src/gpgpu-sim/gpu-sim.cc); 1 GB/s moves
    one byte per nanosecond.
    """
    if nbytes <= 0:
        return 0.0
    h = hw[0]
    gbps = _TWO_OVER_PI * h.bw_peak_gbps * math.atan(h.bw_b * (nbytes / 1024.0))
    return h.transfer_latency_ns + nbytes / gbps


@njit(cache=True)
def transfer_dtoh_ns(hw, nbytes):
    """A device-to-host copy: the same curve with peak dtoh_bw_gbps when it is set (> 0).

    With dtoh_bw_gbps = 0 (every shipped preset) this is exactly transfer_ns: the
    calibration measured device-to-host copies but not yet evictions (docs/calibration.md).
    """
    h = hw[0]
    if h.dtoh_bw_gbps <= 0.0:
        return transfer_ns(hw, nbytes)
    if nbytes <= 0:
        return 0.0
    gbps = _TWO_OVER_PI * h.dtoh_bw_gbps * math.atan(h.bw_b * (nbytes / 1024.0))
    return h.transfer_latency_ns + nbytes / gbps


@njit(cache=True)
def transfer_table(hw):
    """[0, k]: transfer_ns of k pages, [1, k]: transfer_dtoh_ns of k pages, k = 0..512."""
    t = np.zeros((2, 513), np.float64)
    for k in range(1, 513):
        t[0, k] = transfer_ns(hw, k * 4096)
        t[1, k] = transfer_dtoh_ns(hw, k * 4096)
    return t


@njit(cache=True, inline="always")
def htod_ns(S, pages):
    """Time of one host-to-device copy of `pages` adjacent pages of one block (<= 512)."""
    return S.xfer[0, pages]


@njit(cache=True, inline="always")
def dtoh_ns(S, pages):
    """Time of one device-to-host copy of `pages` adjacent pages of one block (<= 512)."""
    return S.xfer[1, pages]
