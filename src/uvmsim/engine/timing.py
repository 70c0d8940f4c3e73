"""Time of one transfer over the link (shared by the engine and the reference model)."""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .state import HW_BW_A, HW_BW_B, HW_DTOH_BW, HW_XFER_LAT_NS

_TWO_OVER_PI = 2.0 / math.pi


@njit(cache=True)
def transfer_ns(hw, nbytes):
    """Latency + bytes / bandwidth(size), bandwidth = 2a/pi * atan(b * KiB) GB/s.

    The curve is UVMSmart's (gpgpu-sim_UVMSmart, src/gpgpu-sim/gpu-sim.cc); 1 GB/s moves
    one byte per nanosecond.
    """
    if nbytes <= 0:
        return 0.0
    gbps = _TWO_OVER_PI * hw[HW_BW_A] * math.atan(hw[HW_BW_B] * (nbytes / 1024.0))
    return hw[HW_XFER_LAT_NS] + nbytes / gbps


@njit(cache=True)
def transfer_dtoh_ns(hw, nbytes):
    """A device-to-host copy: the same curve with peak HW_DTOH_BW when it is set (> 0).

    With HW_DTOH_BW = 0 (every shipped preset) this is exactly transfer_ns: the calibration
    measured device-to-host copies but not yet evictions (docs/calibration.md).
    """
    if hw[HW_DTOH_BW] <= 0.0:
        return transfer_ns(hw, nbytes)
    if nbytes <= 0:
        return 0.0
    gbps = _TWO_OVER_PI * hw[HW_DTOH_BW] * math.atan(hw[HW_BW_B] * (nbytes / 1024.0))
    return hw[HW_XFER_LAT_NS] + nbytes / gbps


@njit(cache=True)
def transfer_table(hw):
    """[0, k]: transfer_ns of k pages, [1, k]: transfer_dtoh_ns of k pages, k = 0..512."""
    t = np.zeros((2, 513), np.float64)
    for k in range(1, 513):
        t[0, k] = transfer_ns(hw, k * 4096)
        t[1, k] = transfer_dtoh_ns(hw, k * 4096)
    return t
