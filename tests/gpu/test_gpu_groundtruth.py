"""`uvmsim run` on the GPU: the balloon, real faults and migrations, censoring (GPU only)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from uvmsim.groundtruth import free_target_bytes, run

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20


@pytest.fixture(scope="module")
def workloads(collector, tmp_path_factory) -> Path:
    """benchmarks/validate/workloads.cu built for this GPU."""
    cc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                        capture_output=True, text=True).stdout.split()[0].replace(".", "")
    exe = tmp_path_factory.mktemp("wl") / "uvm_workloads"
    r = subprocess.run(["nvcc", "-O2", f"-arch=sm_{cc}", "-o", str(exe),
                        str(REPO / "benchmarks" / "validate" / "workloads.cu")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def test_balloon_leaves_requested_free_memory(collector, workloads):
    # stream --mib 96: three managed arrays of exactly 32 MiB
    fp = 96 * MiB
    r = run([str(workloads), "stream", "--mib", "96", "--init", "gpu"], factor=2.0,
            footprint=fp, timeout_s=60, lib=collector["lib"])
    assert r["exit_status"] == 0 and not r["censored"]
    assert r["balloon_made"]
    target = free_target_bytes(fp, 2.0)
    assert r["free_target_bytes"] == target == 48 * MiB
    assert abs(r["free_bytes"] - target) <= 4 * MiB, (r["free_bytes"], target)
    assert r["balloon_bytes"] <= r["free_before_bytes"]
    assert r["managed_peak_bytes"] == fp
    assert r["kernels_n"] == 2 + 4  # two fills, four triads


def test_oversubscribed_run_reports_faults_and_migrations(collector, workloads):
    # host-initialised 64 MiB row-wise matrix-vector at factor 2: every page must migrate to
    # the GPU at least once, and half the data cannot stay there
    cmd = [str(workloads), "mv_row", "--mib", "64", "--init", "host"]
    r = run(cmd, factor=2.0, footprint=64 * MiB + 64 * 1024, timeout_s=120,
            lib=collector["lib"])
    assert r["exit_status"] == 0 and not r["censored"]
    assert r["counters_enabled"], r["counter_attempts"]
    k = r["in_kernels"]
    assert k["gpu_page_faults"] > 0 and k["gpu_fault_records"] > 0
    assert k["htod_bytes"] >= 60 * MiB   # the matrix (60.5 MiB) came over
    assert k["dtoh_bytes"] > 0           # and pages were evicted to make room
    # the driver's own totals count at least what CUPTI's records (which can drop) did
    dc = r["driver_counters"]
    assert dc["status"] == "ok", dc
    assert dc["htod_bytes"] >= r["totals"]["htod_bytes"] and dc["htod_bytes"] >= 60 * MiB
    assert dc["dtoh_bytes"] >= r["totals"]["dtoh_bytes"] and dc["dtoh_bytes"] > 0
    assert dc["gpu_faults"] > 0
    per = r["kernels"]
    assert sum(per["htod_bytes"]) == k["htod_bytes"]
    assert len(per["duration_ns"]) == r["kernels_n"] == 2
    assert r["real_s"] == pytest.approx(sum(per["duration_ns"]) / 1e9)


def test_driver_counters_count_exactly_what_migrated(collector, workloads):
    # stream --mib 96 --init host at factor 1: the CPU writes b and c (32 MiB each), the GPU
    # reads them (each page migrates once, nothing is evicted) and zero-fills a on the GPU
    # (no migration); then the CPU reads 64 words of one array back
    r = run([str(workloads), "stream", "--mib", "96", "--init", "host"], factor=1.0,
            footprint=96 * MiB, timeout_s=60, lib=collector["lib"], counters=False,
            reserve=32 * MiB, driver_counters=True)
    # (the reserve leaves room for the context: without it the triads evict)
    assert r["exit_status"] == 0 and not r["censored"]
    dc = r["driver_counters"]
    assert dc["status"] == "ok", dc
    assert dc["htod_bytes"] == 64 * MiB
    assert 0 < dc["dtoh_bytes"] <= 32 * MiB   # what the CPU read back, and its neighbours
    assert dc["cpu_faults"] >= 64 and dc["gpu_faults"] > 0
    assert r["counter_records"] == 0  # CUPTI's counters were off: the totals are the driver's


def test_timeout_is_reported_censored(collector, workloads):
    cmd = [str(workloads), "mv_row", "--mib", "64", "--init", "gpu", "--iters", "100000"]
    r = run(cmd, factor=3.0, footprint=64 * MiB + 64 * 1024, timeout_s=3,
            lib=collector["lib"])
    assert r["censored"] is True
    assert r["real_s"] == 3.0
    # the library's watchdog ended it (124, or SIGALRM when flushing CUPTI blocked), well
    # before the runner's own kill
    assert r["exit_status"] in (124, 128 + 14) and not r["killed_by_runner"]
    assert r["wall_s"] < 3 + 30
