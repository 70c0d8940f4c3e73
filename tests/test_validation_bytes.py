"""benchmarks/validate/bytes_table.py: the replay's bytes against the driver's own counts."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "validate" / "bytes_table.py"
MiB = 1 << 20


def _mod(path=SCRIPT):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _frames(free_new=500 * MiB, card_new="NVIDIA H200"):
    runs = pd.DataFrame({
        "workload": ["a", "a", "b"], "factor": [1.0, 2.0, 2.0],
        "htod_bytes": [100 * MiB, 50 * MiB, 10 * MiB], "dtoh_bytes": [0, 40 * MiB, 0],
        "counters_driver_htod_bytes": [100 * MiB, 400 * MiB, 10 * MiB],
        "counters_driver_dtoh_bytes": [0, 300 * MiB, 0],
        "driver_htod_bytes": [None, 420 * MiB, None], "driver_dtoh_bytes": [None, 310 * MiB, None],
        "free_bytes": [free_new, 500 * MiB, 500 * MiB], "card": [card_new] + ["NVIDIA H200"] * 2})
    val = pd.DataFrame({
        "workload": ["a", "a", "b"], "factor": [1.0, 2.0, 2.0],
        "predicted_htod_bytes": [100 * MiB, 150 * MiB, 0], "predicted_dtoh_bytes": [0, 200 * MiB, 0]})
    base = pd.DataFrame({"workload": ["a", "a", "b"], "factor": [1.0, 2.0, 2.0],
                         "free_bytes": [500 * MiB] * 3, "card": ["NVIDIA H200"] * 3})
    return runs, val, base


def test_table_and_within_two_x_against_each_count():
    m = _mod()
    t = m.table(*_frames())
    row = t[(t.workload == "a") & (t.factor == 2.0)].iloc[0]
    assert row.cupti_htod == 50 * MiB and row.driver_htod == 400 * MiB
    assert row.timing_driver_htod == 420 * MiB and row.replay_htod == 150 * MiB
    # HtoD: a f1 100 vs 100 (in), a f2 150 vs 400 (out by 2.7x); b's 10 MiB is below 64 MiB
    assert m.within(t.replay_htod, t.driver_htod) == (1, 2)
    # against CUPTI's 50 MiB the f2 run does not even count (below 64 MiB)
    assert m.within(t.replay_htod, t.cupti_htod) == (1, 1)
    assert m.within(t.replay_dtoh, t.driver_dtoh) == (1, 1)  # 200 vs 300: within


@pytest.mark.parametrize("kw", [{"free_new": 498 * MiB - 1}, {"card_new": "NVIDIA H100"}])
def test_table_refuses_runs_of_another_capacity_or_card(kw):
    m = _mod()
    with pytest.raises(ValueError, match=r"\('a', 1.0\)"):
        m.table(*_frames(**kw))


def test_cli_prints_tables_and_names_a_missing_file(tmp_path):
    runs, val, base = _frames()
    paths = {}
    for name, df in (("runs", runs), ("validation", val), ("base", base)):
        paths[name] = tmp_path / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    args = [sys.executable, str(SCRIPT)] + [f"--{k}={v}" for k, v in paths.items()]
    r = subprocess.run(args + [f"--csv={tmp_path / 'out.csv'}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "| of the driver's count (same 3 counter runs) | 1 of 2 | 1 of 1 |" in r.stdout
    assert len(pd.read_csv(tmp_path / "out.csv")) == 3
    r = subprocess.run(args[:-1] + [f"--base={tmp_path / 'nope.csv'}"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "nope.csv" in r.stderr


def test_link_rates_compare_bytes_per_extra_second():
    lr = _mod(REPO / "benchmarks" / "validate" / "link_rates.py")
    runs = pd.DataFrame({
        "workload": ["a", "a", "b", "b"], "factor": [1.0, 2.0, 1.0, 2.0],
        "counters_driver_htod_bytes": [0, 1e9, 0, 1e9],
        "counters_driver_dtoh_bytes": [0, 1e9, 100 * MiB, 1e9]})
    val = pd.DataFrame({
        "workload": ["a", "a", "b", "b"], "factor": [1.0, 2.0, 1.0, 2.0],
        "real_s": [0.1, 0.2, 0.1, 0.3], "real_base_s": [0.1] * 4,
        "predicted_s": [0.1, 0.3, 0.1, 0.2], "predicted_base_s": [0.1] * 4,
        "predicted_htod_bytes": [0, 1e9, 0, 1e9], "predicted_dtoh_bytes": [0, 1e9, 0, 1e9]})
    t = lr.rates(runs, val)
    # b's factor-1 run evicted (100 MiB back): its extra time is not its traffic's
    assert t["workload"].tolist() == ["a"]
    r = t.iloc[0]
    assert r.real_GBps == pytest.approx(2 / 0.1) and r.replay_GBps == pytest.approx(2 / 0.2)
    assert r.rate_ratio == pytest.approx(2.0) and r.dtoh_over_htod == pytest.approx(1.0)


def test_link_rates_cli_names_a_file_it_cannot_use(tmp_path):
    bad = tmp_path / "runs.csv"
    bad.write_text("a,b\n1,2\n")
    script = REPO / "benchmarks" / "validate" / "link_rates.py"
    r = subprocess.run([sys.executable, str(script), f"--runs={bad}"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and str(bad) in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, str(script), f"--runs={tmp_path / 'nope.csv'}"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "nope.csv" in r.stderr
