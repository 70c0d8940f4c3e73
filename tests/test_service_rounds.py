"""benchmarks/validate/service_rounds.py: services of a kernel estimated from the end times
of CUPTI's GPU fault records."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from uvmsim.groundtruth import GPU_FAULT, HTOD, UM_DTYPE

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location(
    "service_rounds", ROOT / "benchmarks/validate/service_rounds.py")
sr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sr)
US = 1000


def records(rows):
    """(counter, value, start, end, address) rows as the timing pass writes them."""
    a = np.zeros(len(rows), UM_DTYPE)
    for i, (counter, value, start, end, addr) in enumerate(rows):
        a[i] = (counter, 0, value, start, end, addr, 0, 0)
    return a


def test_records_cluster_by_their_end_times_and_count_distinct_pages_regions_blocks():
    base = 1 << 40
    um = records([
        # a service ending at 100 us: three faults on pages 0 and 1 (one 64 KiB region) and
        # one on page 16 (the next region), all in block 0; recorded 3 us apart
        (GPU_FAULT, 2, 10 * US, 100 * US, base),
        (GPU_FAULT, 1, 11 * US, 103 * US, base + 4096),
        (GPU_FAULT, 1, 12 * US, 106 * US, base + 16 * 4096),
        # 30 us later, a service of one fault in block 1
        (GPU_FAULT, 1, 90 * US, 136 * US, base + (2 << 20)),
        # 100 us later, one fault in block 3, and an HtoD record
        (GPU_FAULT, 4, 150 * US, 236 * US, base + (6 << 20)),
        (HTOD, 65536, 160 * US, 170 * US, base + (6 << 20)),
        # outside the kernel (starts after its end): ignored
        (GPU_FAULT, 1, 999 * US, 1000 * US, base)])
    d = sr.kernel_rounds({"name": "k(float*)", "start": 0, "end": 500 * US}, um)
    assert d["name"] == "k" and d["fault_records"] == 5 and d["fault_values"] == 9
    assert d["distinct_end"] == 5 and d["htod_records"] == 1
    # gaps 3, 3, 30, 100 us: a 2 us threshold splits all five, 5 and 20 us give three
    # services, 50 us two
    assert [d[f"g{g}us"]["clusters"] for g in sr.GAPS_US] == [5, 3, 3, 2]
    g5 = d["g5us"]
    # services of 3, 1 and 1 records; 3, 1, 1 pages; 2, 1, 1 regions; one block each
    assert (g5["records_median"], g5["pages_median"], g5["regions64k_median"],
            g5["blocks2m_median"]) == (1.0, 1.0, 1.0, 1.0)
    g50 = d["g50us"]  # services of 4 records (4 pages, 3 regions, 2 blocks) and of 1
    assert (g50["records_median"], g50["pages_median"], g50["regions64k_median"],
            g50["blocks2m_median"]) == (2.5, 2.5, 2.0, 1.5)
    assert d["gap_us_p50_p90_p99_max"][3] == 100.0


def test_a_kernel_without_fault_records_is_skipped():
    um = records([(HTOD, 4096, 10 * US, 20 * US, 1 << 40)])
    assert sr.kernel_rounds({"name": "k", "start": 0, "end": 100 * US}, um) is None


def test_a_folder_without_a_timing_pass_is_refused_by_name(tmp_path):
    import pytest
    with pytest.raises(SystemExit, match=str(tmp_path)):
        sr.raw_records(str(tmp_path))
    with pytest.raises(SystemExit, match="no service_rounds.jsonl"):
        sr.compare(tmp_path)
