"""benchmarks/validate/um_blocks.py: per-kernel, per-2 MiB-block sums of CUPTI records."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from uvmsim.groundtruth import DTOH, GPU_FAULT, HTOD, UM_DTYPE

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("um_blocks", ROOT / "benchmarks/validate/um_blocks.py")
ub = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ub)
MiB = 1 << 20


def records(rows):
    a = np.zeros(len(rows), UM_DTYPE)
    for i, (counter, value, start, addr) in enumerate(rows):
        a[i] = (counter, 0, value, start, start + 1, addr, 0, 0)
    return a


def test_kernel_summary_counts_per_block_and_reload_gaps():
    base = 1 << 40
    us = 1000
    um = records([(HTOD, 4096, 10 * us, base), (DTOH, 2 * MiB, 20 * us, base),
                  (HTOD, 8192, 50 * us, base + 4096), (HTOD, 4096, 60 * us, base + 2 * MiB),
                  *[(GPU_FAULT, 1, i * us, base + (i % 3) * 2 * MiB) for i in range(30)],
                  (HTOD, 4096, 500 * us, base + 4 * MiB)])  # in the second kernel
    k0 = {"name": "k_fill(float*)", "start": 0, "end": 100 * us}
    d = ub.kernel_summary(0, k0, um, base)
    assert d["name"] == "k_fill" and d["dur_ms"] == 0.1
    assert (d["htod_n"], d["htod_bytes_or_value"]) == (3, 16384)
    # block 0 has two HtoD records, block 1 one: min, median, p90, max over those blocks
    assert d["htod_per_block"][0] == 1 and d["htod_per_block"][3] == 2
    assert d["htod_blocks"] == 2 and d["dtoh_blocks"] == 1
    assert d["htod_size_hist"] == {"4096": 2, "8192": 1}
    # block 0 was evicted at 20 us and fetched again at 50 us
    assert d["evict_to_reload_us_p10_50_90"] == [30.0, 30.0, 30.0]
    assert d["fault_n"] == 30 and d["fault_per_block"] == [10, 10, 10, 10]
    win = d["fault_windows_ms_n_min_p10_p50_p90_max_distinct"]
    assert sum(w[1] for w in win) == 30 and max(w[6] for w in win) == 2
    k1 = ub.kernel_summary(1, {"name": "k2", "start": 400 * us, "end": 600 * us}, um, base)
    assert k1["htod_n"] == 1 and k1["fault_n"] == 0 and "evict_to_reload_us_p10_50_90" not in k1
