"""The driver probes' runner and analysis (benchmarks/probes/probes.py, analyze.py) on fake
runs: no GPU, no collector (a fake program writes what the collector would)."""
from __future__ import annotations

import gzip
import importlib.util
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


probes = _load("probes_runner", ROOT / "benchmarks/probes/probes.py")
analyze = _load("probes_analyze", ROOT / "benchmarks/probes/analyze.py")
MiB = 1 << 20


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    """The dry run's fake program (probes.FAKE) as an executable, and a library path."""
    monkeypatch.setenv("UVMSIM_SKIP_GPU_CHECK", "1")  # `uvmsim run` of a fake, with no GPU
    py = tmp_path / "fake_probe.py"
    py.write_text(probes.FAKE)
    exe = tmp_path / "fake_probe"
    exe.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(py))} \"$@\"\n")
    exe.chmod(0o755)
    lib = tmp_path / "libfake.so"
    lib.write_text("")
    return {"exe": exe, "lib": str(lib), "work": tmp_path / "work", "out": tmp_path / "out"}


def test_probe_lines_are_parsed_and_junk_skipped():
    text = ('PROBE {"t":"alloc","group":"A","base":4096,"size":8192}\nnoise\n'
            'PROBE {broken\nPROBE {"t":"phase","phase":"k","ms":1.0,"cpu_mapped":{"A":[1,2]}}\n')
    lines = probes.parse_probe_lines(text)
    assert [x["t"] for x in lines] == ["alloc", "phase"]
    f = probes.program_facts(lines)
    assert f["main_group"] == "A" and f["allocs"] == 1
    assert (f["cpu_mapped_end"], f["pages_end"]) == (1, 2)
    assert "uvm_ranges" not in f  # no maps line: nothing made up


def test_every_probe_names_a_known_mode_and_a_recorded_trace():
    modes = {"host_read_stream", "host_read_rows", "host_read_cols", "host_rw",
             "host_firstread", "gpu_read", "memset_read", "memcpy_read", "host_read_drain",
             "flood_gpu_read", "partial", "small_allocs", "cpu_retouch", "evict_order",
             "dtod_read"}
    src = (ROOT / "benchmarks/probes/probes.cu").read_text()
    for m in modes:
        assert f'"{m}"' in src, m
    for p in probes.PROBES:
        assert p.args[0] in modes, p.name
        # a probe replayed with another's trace must name one that is itself recorded
        assert probes.BY_NAME[p.trace].trace_of is None, p.name


def test_device_runs_every_probe_keeps_failures_and_resumes(fake):
    ps = [probes.BY_NAME["host_read_stream"], probes.BY_NAME["evict_order"]]
    fake["out"].mkdir()
    probes.device(fake["out"], [1.0, 2.0], ps, deadline_s=600, started_at=time.time(),
                  record=False, binary=fake["exe"], lib=fake["lib"], work=fake["work"],
                  grace_s=5)
    p = pd.read_csv(fake["out"] / "results" / "probes.csv")
    assert list(zip(p.probe, p.factor, p.status)) == [
        ("host_read_stream", 1, "ok"), ("host_read_stream", 2, "ok"),
        ("evict_order", 1, "failed"), ("evict_order", 2, "failed")]
    ok = p.iloc[0]
    assert ok.capacity_bytes == ok.free_bytes - probes.RESERVE
    assert ok.free_bytes == (256 * MiB) // 1 + probes.RESERVE    # factor 1: the footprint
    assert p.iloc[1].free_bytes == 128 * MiB + probes.RESERVE   # factor 2: half of it
    assert [ok.gpu_fault_records, ok.htod_demand_bytes, ok.dtoh_eviction_bytes,
            ok.dtoh_coherence_bytes, ok.remote_map_bytes, ok.cpu_page_faults] == \
        [1, 4096, 2 * MiB, 65536, 65536, 1]
    assert ok.counter_kinds == 7 and ok.main_ranges == 1 and ok.cpu_mapped_end == 1024
    # the driver's own totals beside CUPTI's (the counters are on in these runs)
    assert [ok.driver_htod_bytes, ok.driver_dtoh_bytes, ok.driver_gpu_faults,
            ok.driver_cpu_faults] == [9 * MiB, 5 * MiB, 77, 3]
    k = pd.read_csv(fake["out"] / "results" / "kernels.csv")
    assert len(k) == 4 and set(k.name) == {"k_read"}
    ph = pd.read_csv(fake["out"] / "results" / "phases.csv")
    assert list(ph.phase[:2]) == ["host_write", "k_read"]
    # a second call starts nothing already done
    stamp = {q: q.stat().st_mtime_ns for q in (fake["work"] / "runs").glob("*.json.gz")}
    probes.device(fake["out"], [1.0, 2.0], ps, deadline_s=600, started_at=time.time(),
                  record=False, binary=fake["exe"], lib=fake["lib"], work=fake["work"])
    assert {q: q.stat().st_mtime_ns for q in (fake["work"] / "runs").glob("*.json.gz")} == stamp
    table = probes.summary(fake["out"])
    assert "failed" in table and "f1.5" not in table


def test_runs_without_counters_ask_for_none_and_keep_no_records(fake, monkeypatch):
    """--no-counters: the same runs with CUPTI's counters off (the kernel times alone): the
    runner is asked for none and no raw records are kept; the rows are assembled as ever."""
    import uvmsim.groundtruth as gt
    asked = []
    real_run = gt.run

    def spy(cmd, **kw):
        asked.append((kw["counters"], kw["keep_raw"]))
        return real_run(cmd, **kw)
    monkeypatch.setattr(gt, "run", spy)
    fake["out"].mkdir()
    for counters in (False, True):
        probes.device(fake["out"], [1.0], [probes.BY_NAME["host_read_stream"]],
                      deadline_s=600, started_at=time.time(), record=False,
                      binary=fake["exe"], lib=fake["lib"], work=fake["work"] / str(counters),
                      grace_s=5, counters=counters)
        p = pd.read_csv(fake["out"] / "results" / "probes.csv")
        assert list(zip(p.probe, p.status)) == [("host_read_stream", "ok")]
        # without the counters, no driver totals either: the run measures time only
        assert p.driver_htod_bytes.isna().all() != counters
        assert len(pd.read_csv(fake["out"] / "results" / "kernels.csv")) == 2
    assert asked[0] == (False, None)
    assert asked[1][0] is True and str(asked[1][1]).endswith("raw/host_read_stream__f1")


def test_device_starts_nothing_past_its_deadline(fake, capsys):
    fake["out"].mkdir()
    probes.device(fake["out"], [1.5], [probes.BY_NAME["gpu_read"]], deadline_s=5,
                  started_at=time.time(), record=False, binary=fake["exe"], lib=fake["lib"],
                  work=fake["work"])
    assert not list((fake["work"] / "runs").glob("*.json.gz"))
    assert "not done (deadline; call again to resume): gpu_read__f1.5" in capsys.readouterr().out


def test_traces_are_packed_under_the_size_limit_and_too_large_ones_left_out(tmp_path):
    tr = tmp_path / "traces"
    for name, n in (("a", 400), ("b", 400), ("c", 400), ("big", 5000)):
        d = tr / f"{name}.uvmtrace"
        d.mkdir(parents=True)
        (d / "accesses.parquet").write_bytes(b"x" * n)
    tars = probes.pack_traces(tr, tmp_path, max_tar=1000)
    import tarfile
    names = [sorted({m.name.split("/")[0] for m in tarfile.open(t)}) for t in tars]
    assert names == [["a.uvmtrace", "b.uvmtrace"], ["c.uvmtrace"]]


def test_probe_table_from_rows():
    base = {c: 0 for c in probes.PROBE_COLUMNS}
    rows = []
    for v in ("h200", "contract"):
        for f, htod, dtoh, mapped in ((1.0, 256 * MiB, 0, 0), (2.0, 128 * MiB, 0, 32768)):
            rows.append(dict(base, probe="host_read_stream", factor=f, status="ok",
                             real_s=0.05 * f, htod_bytes=htod, dtoh_bytes=dtoh,
                             capacity_bytes=int(256 * MiB / f), footprint_bytes=256 * MiB,
                             cpu_mapped_end=mapped, pages_end=65536, variant=v, model=v,
                             replay_s=(0.04 if v == "h200" else 0.02) * f * f,
                             replay_faults=10, replay_htod_bytes=htod, replay_dtoh_bytes=dtoh,
                             replay_evicted_chunks=0 if f == 1 else (7 if v == "h200" else 9),
                             required_htod_bytes=300 * MiB, required_dtoh_bytes=0))
        rows.append(dict(base, probe="evict_order", factor=1.0, status="failed", variant=v,
                         model=v))
    df = pd.DataFrame(rows)
    df["real_slowdown"] = df["real_s"] / 0.05
    df["replay_slowdown"] = df["replay_s"] / np.where(df["variant"] == "h200", 0.04, 0.02)
    md = analyze.markdown(df, ["h200", "contract"])
    t1, t2 = md.strip().split("\n\n")
    for t in (t1, t2):
        lines = t.splitlines()
        assert all(x.count("|") == lines[0].count("|") for x in lines)
    # time: real against each variant's kernel time, slowdown and evictions
    assert ("| host_read_stream | 2 | 100.0 (2.00) | 160.0 (4.00) [7] | 80.0 (4.00) [9] |"
            in t1)
    assert "| evict_order | 1 | failed |" in t1
    # traffic: CUPTI's bytes beside what the run must have moved; the CPU-mapped share
    assert "| host_read_stream | 2 | 0 | 10 | 128 (0 / 0) | 300 | 128 |" in t2 and "50%" in t2


def test_hypotheses_decide_from_rows():
    base = {c: 0 for c in probes.PROBE_COLUMNS}
    runs = [dict(base, probe="evict_order", factor=f, status="ok") for f in (1.25, 1.5)]
    kern = []
    for f in (1.25, 1.5):
        kern += [dict(probe="evict_order", factor=f, k=0, name="k_ev_fill", duration_ns=1000,
                      htod_bytes=0, dtoh_eviction_bytes=65536),
                 dict(probe="evict_order", factor=f, k=1, name="k_ev_probe_first",
                      duration_ns=15_000, htod_bytes=0, dtoh_eviction_bytes=0),
                 dict(probe="evict_order", factor=f, k=2, name="k_ev_probe_second",
                      duration_ns=800_000, htod_bytes=65536, dtoh_eviction_bytes=0)]
    hyp = analyze.hypotheses(pd.DataFrame(runs), pd.DataFrame(kern))
    assert "## H6" in hyp and "**Refuted: the order is the last residency change" in hyp
    # block 0 evicted instead: the rows do not refute first arrival
    for k in kern:
        if k["name"] == "k_ev_probe_first":
            k["htod_bytes"] = 2 * MiB
    hyp = analyze.hypotheses(pd.DataFrame(runs), pd.DataFrame(kern))
    assert "**Not refuted by these rows.**" in hyp.split("## H6")[1]


def test_run_json_keeps_the_probe_lines_and_status(fake):
    fake["out"].mkdir()
    probes.device(fake["out"], [1.0], [probes.BY_NAME["host_read_stream"]], deadline_s=600,
                  started_at=time.time(), record=False, binary=fake["exe"], lib=fake["lib"],
                  work=fake["work"])
    r = json.load(gzip.open(fake["work"] / "runs" / "host_read_stream__f1.json.gz"))
    assert r["status"] == "ok" and r["replay_trace"] == "host_read_stream"
    assert [x["t"] for x in r["probe_lines"]] == ["alloc", "maps", "attr", "phase", "phase"]


figure = _load("probes_figure", ROOT / "benchmarks/probes/figure.py")


def test_figure_errors_are_the_fits_medians_and_the_committed_figures_hold(tmp_path):
    # two probes, each at f1 and f2: the slowdown is over the probe's own factor-1 run
    runs = pd.DataFrame({"probe": ["a", "a", "b", "b"], "factor": [1, 2, 1, 2],
                         "split": ["fit", "fit", "holdout", "holdout"],
                         "real_ms": [10.0, 40.0, 5.0, 10.0],
                         "predicted_ms": [20.0, 40.0, 5.0, 40.0]})
    df = figure.with_slowdowns(runs)
    assert df["real_slowdown"].tolist() == [1.0, 4.0, 1.0, 2.0]
    assert df["predicted_slowdown"].tolist() == [1.0, 2.0, 1.0, 8.0]
    e = figure.errors(df)
    assert e["fit"]["f1_median_x"] == pytest.approx(2.0)
    assert e["fit"]["slowdown_median_x"] == pytest.approx(2.0)
    assert e["holdout"]["slowdown_median_x"] == pytest.approx(4.0)
    assert e["holdout"]["slowdown_within_2x"] == 0.0
    with pytest.raises(SystemExit, match="no factor-1 run"):
        figure.with_slowdowns(runs[runs["factor"] == 2])
    # the committed fit: the holdout errors docs/model.md quotes for h100
    h = figure.errors(figure.with_slowdowns(
        pd.read_csv(ROOT / "benchmarks/probes/results/timefit_migrate_runs.csv")))["holdout"]
    assert (round(h["f1_median_x"], 2), round(h["slowdown_median_x"], 2)) == (1.11, 1.10)
    assert figure.main(["--out", str(tmp_path / "f.png")]) == 0
    assert (tmp_path / "f.png").stat().st_size > 10_000


def test_the_dry_run_needs_no_gpu(tmp_path, monkeypatch):
    # run_device.sh DRY_RUN=1 on a machine without a GPU: `uvmsim run` refused the fake
    # program (NoGPUError) until the dry run said that it needs no GPU
    monkeypatch.setenv("UVMSIM_SKIP_GPU_CHECK", "0")
    assert probes.dry(tmp_path) == 0
    p = pd.read_csv(tmp_path / "results" / "probes.csv")
    assert (p.loc[p.probe != "evict_order", "status"] == "ok").all()
