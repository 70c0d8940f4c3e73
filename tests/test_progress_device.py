"""benchmarks/validate/progress_device.sh without a GPU: the replays it starts (the options
the published H200 rows were made with, docs/validation.md "The whole H200 suite with v1.2
traces"), and what comes back. fit.py is replaced by a stub that records its arguments."""
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "validate" / "progress_device.sh"

STUB = """#!/bin/sh
# fit.py stands in: record the arguments, write the CSV it was asked for
if [ "$1" = benchmarks/validate/fit.py ]; then
  echo "$*" >> "$CALLS"
  csv=""; prev=""
  for a in "$@"; do [ "$prev" = --csv ] && csv=$a; prev=$a; done
  [ -n "$csv" ] && echo "workload,factor" > "$csv"
  exit 0
fi
exec "$REAL_PY" "$@"
"""


def run(tmp_path: Path, **env: str) -> tuple[list[str], Path]:
    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    stub = tmp_path / "py"
    stub.write_text(STUB)
    stub.chmod(0o755)
    calls = tmp_path / "calls.txt"
    out = tmp_path / "out"
    e = {**os.environ, "PYTHON": str(stub), "REAL_PY": sys.executable, "CALLS": str(calls),
         "OUT": str(out), "WORK": str(tmp_path / "work"), "JOBS": "2",
         "UVMSIM_CACHE_DIR": str(tmp_path / "cache"), **env}
    p = subprocess.run(["bash", str(SCRIPT)], env=e, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return (calls.read_text().splitlines() if calls.exists() else []), out


def test_predict_replays_each_workload_with_page_sets_and_the_progress_front_end(tmp_path):
    calls, out = run(tmp_path, STEPS="predict", WORKLOADS="stream,gemm")
    assert len(calls) == 4
    for w in ("stream", "gemm"):
        mine = [c for c in calls if f"--workloads {w} " in c]
        assert len(mine) == 2, calls
        for c in mine:
            # every row: h200's card, small allocations sharing windows, partial blocks
            assert "predict --card h200 --option shared_windows=on --option partial_blocks=on" in c
        progress = [c for c in mine if "block_progress=on" in c]
        assert len(progress) == 1
        for o in ("store_ahead=16", "fault_order=age", "share_units=on", "batch_ns=80000",
                  "zero_fill_ns=300", "migrate_page_ns=128"):
            assert o in progress[0]
    with tarfile.open(out / "rows.tgz") as t:
        names = set(t.getnames())
    assert {"rows/page_sets/stream.csv", "rows/progress/gemm.csv"} <= names
    # only the tarball and the log come back: the device returns at most 8 files
    assert sorted(p.name for p in out.iterdir()) == ["log.txt", "rows.tgz"]


def test_latency_sets_the_latency_and_replays_the_probes_with_their_traces(tmp_path):
    calls, _ = run(tmp_path, STEPS="latency", WORKLOADS="stream", LATENCIES="5000,40000")
    suite = [c for c in calls if "--probes" not in c]
    probes = [c for c in calls if "--probes" in c]
    assert sorted(c.split("fault_latency_ns=")[1].split()[0] for c in suite) == ["40000", "5000"]
    # every probe of status ok in the H200's quiet runs, at each latency
    import csv
    ok = {r["probe"] for r in csv.DictReader(
        open(REPO / "benchmarks/probes/results/h200/quiet/probes.csv")) if r["status"] == "ok"}
    assert len(ok) > 10
    assert len(probes) == 2 * len(ok)
    assert all("--probe-runs benchmarks/probes/results/h200/quiet/probes.csv" in c for c in probes)


def test_a_past_deadline_starts_no_replay(tmp_path):
    calls, out = run(tmp_path, STEPS="predict", WORKLOADS="stream", DEADLINE_S="30")
    assert calls == []
    assert "skip stream (deadline)" in (out / "log.txt").read_text()
