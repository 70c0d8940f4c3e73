"""`uvmsim record` and `uvmsim run` on a machine without an NVIDIA GPU: one line, exit 2,
before the collector is built or the program started (src/uvmsim/gpucheck.py)."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from uvmsim import gpucheck
from uvmsim.gpucheck import NoGPUError, gpu_problem, require_gpu

ROOT = Path(__file__).resolve().parents[1]
HAS_GPU = gpu_problem() is None


def _cli(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for k in ("UVMSIM_DEBUG", gpucheck.SKIP_ENV, "UVMTRACE_LIB"):
        env.pop(k, None)
    return subprocess.run([sys.executable, "-m", "uvmsim", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture
def marker_prog(tmp_path):
    """A program that leaves a file behind if it is ever started."""
    prog = tmp_path / "prog.py"
    prog.write_text("import pathlib, sys\npathlib.Path(sys.argv[1]).write_text('ran')\n")
    return [sys.executable, str(prog), str(tmp_path / "ran.txt")], tmp_path / "ran.txt"


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU: the commands would run")
@pytest.mark.parametrize("command", [
    ["record", "-o", "{tmp}/x.uvmtrace", "--"],
    ["run", "--oversub", "2", "--footprint", "1GiB", "--"],
    ["run", "--oversub", "2", "--footprint", "1GiB", "-o", "{tmp}/r.json", "--"],
])
def test_gpu_commands_without_a_gpu_say_so_in_one_line(command, marker_prog, tmp_path):
    prog, ran = marker_prog
    args = [a.format(tmp=tmp_path) for a in command] + prog
    p = _cli(*args, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr          # no CMake output, no warnings, no traceback
    assert lines[0].startswith(f"uvmsim {command[0]}: error: no NVIDIA GPU or driver found")
    assert gpu_problem() in lines[0]           # the reason is named
    assert p.stdout == ""
    assert not ran.exists()                    # the program never started
    assert not (tmp_path / "x.uvmtrace").exists() and not (tmp_path / "r.json").exists()


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_python_api_refuses_too(tmp_path, marker_prog, monkeypatch):
    from uvmsim.groundtruth import run
    from uvmsim.record import record
    monkeypatch.delenv(gpucheck.SKIP_ENV, raising=False)
    prog, ran = marker_prog
    with pytest.raises(NoGPUError, match="no NVIDIA GPU"):
        record(tmp_path / "x.uvmtrace", prog)
    with pytest.raises(NoGPUError, match="no NVIDIA GPU"):
        run(prog, factor=2.0, footprint=1 << 30)
    assert not ran.exists()


def test_argument_errors_still_come_first(tmp_path):
    # a wrong command line is reported as such, GPU or not
    p = _cli("record", "-o", tmp_path / "x.trace", "--", "true", cwd=tmp_path)
    assert p.returncode == 2 and "must end in '.uvmtrace'" in p.stderr
    p = _cli("run", "--oversub", "2", "--footprint", "1GiB", cwd=tmp_path)
    assert p.returncode == 2 and "no command to run" in p.stderr


# --------------------------------------------------------------------------- the check itself
class _FakeCuda:
    """Stands in for libcuda.so.1: cuInit's and cuDeviceGetCount's results are set."""

    def __init__(self, init_rc=0, count=1, count_rc=0):
        self.init_rc, self.count, self.count_rc = init_rc, count, count_rc

    def cuInit(self, flags):
        return self.init_rc

    def cuDeviceGetCount(self, ref):
        ctypes.cast(ref, ctypes.POINTER(ctypes.c_int))[0] = self.count
        return self.count_rc

    def cuGetErrorName(self, code, ref):
        ctypes.cast(ref, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_NO_DEVICE"
        return 0


def _machine(monkeypatch, nodes, lib):
    monkeypatch.setattr(gpucheck.sys, "platform", "linux")
    monkeypatch.setattr(gpucheck, "_device_nodes", lambda: list(nodes))

    def cdll(name):
        assert name == "libcuda.so.1"
        if lib is None:
            raise OSError("libcuda.so.1: cannot open shared object file")
        return lib
    monkeypatch.setattr(gpucheck.ctypes, "CDLL", cdll)


# the device machine: /dev/nvidia0, /dev/nvidia-uvm, /dev/nvidiactl and a working driver
DEVICE_NODES = ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"]


@pytest.mark.parametrize("nodes, lib, expect", [
    (DEVICE_NODES, _FakeCuda(), None),
    (["/dev/dxg"], _FakeCuda(), None),                                  # WSL 2
    ([], _FakeCuda(), "no /dev/nvidia* device"),
    (DEVICE_NODES, None, "libcuda.so.1 cannot be loaded"),
    (DEVICE_NODES, _FakeCuda(init_rc=100), "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"),
    (DEVICE_NODES, _FakeCuda(count_rc=3), "cuDeviceGetCount failed"),
    (DEVICE_NODES, _FakeCuda(count=0), "the CUDA driver sees no GPU"),
    (DEVICE_NODES, object(), "lacks the CUDA driver API"),
])
def test_gpu_problem(monkeypatch, nodes, lib, expect):
    _machine(monkeypatch, nodes, lib)
    got = gpu_problem()
    if expect is None:
        assert got is None
    else:
        assert got is not None and expect in got


def test_require_gpu_raises_one_line_and_can_be_skipped(monkeypatch):
    _machine(monkeypatch, [], None)
    monkeypatch.delenv(gpucheck.SKIP_ENV, raising=False)
    with pytest.raises(NoGPUError) as e:
        require_gpu("record")
    assert "\n" not in str(e.value) and "`uvmsim record` needs one" in str(e.value)
    monkeypatch.setenv(gpucheck.SKIP_ENV, "1")
    require_gpu("record")  # skipped: no error
    monkeypatch.setenv(gpucheck.SKIP_ENV, "0")
    with pytest.raises(NoGPUError):
        require_gpu("run")
