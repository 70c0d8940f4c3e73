"""Is there an NVIDIA GPU and driver here? The one check `uvmsim record` and `uvmsim run`
make before they build the collector or start the program (docs/collector.md).

Without a GPU both commands would otherwise build native_trace, run the program with a
collector that never loads and write an empty trace or a result full of NaN, and exit 0.
The check looks, in order, for what a CUDA program needs:

1. a device node: ``/dev/nvidiactl`` or ``/dev/nvidia<N>`` (``/dev/dxg`` under WSL 2);
2. the driver's CUDA library, ``libcuda.so.1``, loadable;
3. ``cuInit(0)`` succeeding and ``cuDeviceGetCount`` finding at least one device (this is
   what fails with the toolkit's stub library, or with a driver but no visible GPU).

``UVMSIM_SKIP_GPU_CHECK=1`` skips it (for a setup the check misjudges; the tests of the
collector's host side use it with a fake program).
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys

from .errors import UserError

__all__ = ["NoGPUError", "gpu_problem", "require_gpu"]

SKIP_ENV = "UVMSIM_SKIP_GPU_CHECK"
LIBCUDA = "libcuda.so.1"


class NoGPUError(UserError):
    """No usable NVIDIA GPU or driver: the command needs one."""


def _device_nodes() -> list[str]:
    return (glob.glob("/dev/nvidiactl") + glob.glob("/dev/nvidia[0-9]*")
            + glob.glob("/dev/dxg"))


def _cuda_error(lib: ctypes.CDLL, code: int) -> str:
    name = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
            return f"{name.value.decode()} ({code})"
    except AttributeError:
        pass
    return f"error {code}"


def gpu_problem() -> str | None:
    """Why no NVIDIA GPU can be used here, or None when one can."""
    if not sys.platform.startswith("linux"):
        return f"the collector runs on Linux only (this is {sys.platform})"
    if not _device_nodes():
        return "no /dev/nvidia* device"
    try:
        lib = ctypes.CDLL(LIBCUDA)
    except OSError as e:
        return f"the NVIDIA driver's {LIBCUDA} cannot be loaded ({e})"
    try:
        rc = lib.cuInit(0)
        if rc != 0:
            return f"cuInit failed: {_cuda_error(lib, rc)}"
        n = ctypes.c_int(0)
        rc = lib.cuDeviceGetCount(ctypes.byref(n))
        if rc != 0:
            return f"cuDeviceGetCount failed: {_cuda_error(lib, rc)}"
    except AttributeError as e:  # not the driver's library
        return f"{LIBCUDA} lacks the CUDA driver API ({e})"
    if n.value < 1:
        return "the CUDA driver sees no GPU"
    return None


def require_gpu(command: str) -> None:
    """Raise NoGPUError (one line, exit status 2 from the CLI) unless a GPU can be used."""
    if os.environ.get(SKIP_ENV, "") not in ("", "0"):
        return
    why = gpu_problem()
    if why is not None:
        raise NoGPUError(f"no NVIDIA GPU or driver found ({why}); `uvmsim {command}` needs "
                         f"one ({SKIP_ENV}=1 skips this check)")
