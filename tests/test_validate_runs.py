"""benchmarks/validate/validate.py: the real_runs.csv row of a run and its counter run, with
the driver's lossless totals beside CUPTI's records."""
from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _validate():
    spec = importlib.util.spec_from_file_location(
        "validate_under_test", REPO / "benchmarks" / "validate" / "validate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


W = {"workload": "stream", "kind": "cuda", "split": "fit"}


def _run(factor: float, driver: dict | None) -> dict:
    return {"factor": factor, "exit_status": 0, "censored": False, "real_s": 0.5,
            "timeout_s": 30, "footprint_bytes": 96 << 20, "free_bytes": 48 << 20,
            "kernels_n": 6, "reserve_bytes": 0, "wall_s": 1.0, "balloon_bytes": 1 << 30,
            "free_at_exit_bytes": 1, "managed_peak_bytes": 96 << 20, "date": "d",
            "gpu": "NVIDIA H200", "driver_counters": driver}


def _counter_run(driver: dict | None) -> dict:
    totals = {"gpu_page_faults": 3, "htod_bytes": 1 << 20, "dtoh_bytes": 0,
              "gpu_fault_records": 3, "htod_demand_bytes": 1 << 20, "htod_prefetch_bytes": 0,
              "dtoh_eviction_bytes": 0, "thrashing": 0, "throttling": 0}
    return {**_run(2.0, driver), "real_s": 0.7, "totals": totals}


def test_run_row_keeps_the_driver_totals_of_both_runs_apart():
    v = _validate()
    ok = {"status": "ok", "htod_bytes": 64 << 20, "dtoh_bytes": 32 << 20, "gpu_faults": 900,
          "cpu_faults": 12}
    lossy = {**ok, "htod_bytes": 70 << 20, "dtoh_bytes": 33 << 20}
    row = v.run_row(W, _run(2.0, ok), _counter_run(lossy))
    assert row["driver_htod_bytes"] == 64 << 20 and row["driver_dtoh_bytes"] == 32 << 20
    assert row["driver_gpu_faults"] == 900 and row["driver_cpu_faults"] == 12
    # the counter run's own driver totals, next to CUPTI's records of that same run
    assert row["counters_driver_htod_bytes"] == 70 << 20
    assert row["counters_driver_dtoh_bytes"] == 33 << 20
    assert row["htod_bytes"] == 1 << 20
    assert set(row) <= set(v.RUN_COLUMNS)


def test_run_row_leaves_driver_columns_empty_without_them():
    v = _validate()
    refused = {"status": "cannot open /dev/nvidia-uvm-tools: No such file or directory"}
    row = v.run_row(W, _run(1.0, refused), None)
    assert not any(k.startswith(("driver_", "counters_driver_")) for k in row)
    row = v.run_row(W, {k: x for k, x in _run(1.0, None).items() if k != "driver_counters"},
                    None)  # a run JSON from before the driver counters
    assert "driver_htod_bytes" not in row


def test_upsert_keeps_old_rows_under_the_new_columns(tmp_path):
    v = _validate()
    path = tmp_path / "real_runs.csv"
    old = [c for c in v.RUN_COLUMNS if "driver" not in c]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=old)
        w.writeheader()
        w.writerow({c: "" for c in old} | {"workload": "gemm", "factor": "1", "real_s": "0.2"})
    ok = {"status": "ok", "htod_bytes": 5, "dtoh_bytes": 6, "gpu_faults": 7, "cpu_faults": 8}
    v.upsert(path, v.RUN_COLUMNS, v.run_row(W, _run(2.0, ok), None), ("workload", "factor"))
    rows = list(csv.DictReader(open(path)))
    assert [(r["workload"], r["factor"]) for r in rows] == [("gemm", "1"), ("stream", "2")]
    assert rows[0]["real_s"] == "0.2" and rows[0]["driver_htod_bytes"] == ""
    assert rows[1]["driver_htod_bytes"] == "5" and rows[1]["driver_cpu_faults"] == "8"


def test_trace_budget_follows_the_last_recording(tmp_path, monkeypatch):
    v = _validate()
    monkeypatch.setattr(v, "RESULTS", tmp_path)
    monkeypatch.setattr(v, "DEFAULT_RESULTS", tmp_path / "default")
    (tmp_path / "default").mkdir()
    cols = ["workload", "record_s"]
    with open(tmp_path / "footprints.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows([{"workload": "stream", "record_s": "8.0"},
                     {"workload": "gemm", "record_s": "200"},
                     {"workload": "mv_row", "record_s": ""}])
    with open(tmp_path / "default" / "footprints.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerow({"workload": "mv_row", "record_s": "2.5"})
    assert v.trace_budget_s({"workload": "stream"}) == 3 * 8.0 + 20
    assert v.trace_budget_s({"workload": "gemm"}) == 120.0     # capped
    assert v.trace_budget_s({"workload": "mv_row"}) == 30.0    # from the default folder, floor
    assert v.trace_budget_s({"workload": "never"}) == 120.0


def test_run_device_keeps_an_empty_counter_factors():
    text = (REPO / "benchmarks" / "validate" / "run_device.sh").read_text()
    # ${X-default}: only an unset COUNTER_FACTORS gets the default, so "" means no counter run
    assert '"${COUNTER_FACTORS-1,1.5,2}"' in text
