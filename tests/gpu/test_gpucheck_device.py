"""On a GPU machine the check `uvmsim record` and `uvmsim run` make first finds the GPU
(src/uvmsim/gpucheck.py; tests/test_gpucheck.py covers the machines without one)."""
from __future__ import annotations

import pytest

from uvmsim.gpucheck import gpu_problem, require_gpu

pytestmark = pytest.mark.gpu


def test_the_gpu_is_found(monkeypatch):
    monkeypatch.delenv("UVMSIM_SKIP_GPU_CHECK", raising=False)
    assert gpu_problem() is None
    require_gpu("record")
