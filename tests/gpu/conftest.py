"""GPU tests of the native collector: skipped unless a CUDA GPU, nvcc and cmake are present.

Run on the device machine (docs/collector.md):  python3 -m pytest -m gpu tests/gpu -v
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU, the CUDA toolkit and cmake")


def _gpu_reason() -> str | None:
    if shutil.which("nvidia-smi") is None:
        return "nvidia-smi not found (no NVIDIA driver)"
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"
    if r.returncode != 0 or "GPU" not in r.stdout:
        return "nvidia-smi lists no GPU (CUDA unavailable)"
    for tool in ("nvcc", "cmake"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    return None


_REASON = _gpu_reason()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _REASON is None:
        return
    here = Path(__file__).parent
    skip = pytest.mark.skip(reason=f"GPU tests skipped: {_REASON}")
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(skip)


def _compute_cap() -> str:
    r = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=60)
    return r.stdout.strip().splitlines()[0].replace(".", "")


@pytest.fixture(scope="session")
def collector() -> dict[str, Path]:
    """Builds native_trace (library + test program) for this GPU once per session."""
    build = Path(os.environ.get("UVMTRACE_BUILD_DIR", REPO / "native_trace" / "build"))
    cc = _compute_cap()
    cfg = ["cmake", "-S", str(REPO / "native_trace"), "-B", str(build),
           f"-DUVMT_TEST_ARCH={cc}"]
    for cmd in (cfg, ["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    lib, prog = build / "libuvmtrace.so", build / "uvmt_testprog"
    assert lib.is_file() and prog.is_file()
    return {"lib": lib, "prog": prog, "build": build}
