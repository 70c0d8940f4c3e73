"""The oversubscription fit (benchmarks/validate/fit.py) and its stored results."""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("validate_fit", ROOT / "benchmarks/validate/fit.py")
fit = importlib.util.module_from_spec(spec)
sys.modules["validate_fit"] = fit  # its process pools pickle its functions by module name
spec.loader.exec_module(fit)


def test_search_recovers_constants_of_a_linear_time_model():
    rng = np.random.default_rng(1)
    n = 40
    comp = np.zeros((n, 1 + len(fit.LINEAR)))
    comp[:, 0] = rng.uniform(0.01, 0.1, n)                   # compute seconds
    comp[:, 1:] = (rng.uniform(0, 1e-6, (n, len(fit.LINEAR)))
                   * rng.integers(0, 2, (n, len(fit.LINEAR))))
    true = {"batch_ns": 50_000.0, "fault_ns": 300.0, "transfer_latency_ns": 2_000.0,
            "inv_bw": 1 / 50.0, "evict_ns": 20_000.0, "zero_fill_ns": 100.0,
            "host_fault_ns": 5_000.0, "migrate_page_ns": 250.0, "zero_batch_ns": 30_000.0}
    theta = np.array([true[k] for k in fit.LINEAR])
    real = comp[:, 0] + comp[:, 1:] @ theta
    base = np.repeat(np.arange(0, n, 4), 4)                  # every 4th run is a factor-1 run
    free = ("evict_ns", "zero_fill_ns", "migrate_page_ns")
    start = dict(true, evict_ns=1_000.0, zero_fill_ns=1.0, migrate_page_ns=10.0)
    got = fit.search(comp, real, np.zeros(n, bool), base, start, free)
    for k in free:
        assert got[k] == pytest.approx(true[k], rel=0.06), k
    assert got["batch_ns"] == true["batch_ns"]                # not free: kept
    assert fit.comp_loss(np.array([got[k] for k in fit.LINEAR]), comp, real,
                         np.zeros(n, bool), base) < 0.5


def test_unset_zero_batch_ns_follows_batch_ns_in_a_fit():
    from uvmsim.config import get_model
    hw = get_model("h100").hardware
    assert hw.zero_batch_ns is None
    comp = np.zeros((2, 1 + len(fit.LINEAR)))
    b, z = 1 + fit.LINEAR.index("batch_ns"), 1 + fit.LINEAR.index("zero_batch_ns")
    comp[:, b] = [3e-9, 1e-9]    # batches that migrate from the host
    comp[:, z] = [2e-9, 5e-9]    # batches that migrate nothing
    tied = fit.tie_zero_batch(comp, ("batch_ns",), hw)
    assert tied[:, b].tolist() == [5e-9, 6e-9] and not tied[:, z].any()
    assert comp[:, z].tolist() == [2e-9, 5e-9]                # the input is left as it was
    # searched, or set in the model: the two kinds stay apart
    assert fit.tie_zero_batch(comp, ("batch_ns", "zero_batch_ns"), hw) is comp
    import dataclasses
    assert fit.tie_zero_batch(comp, ("batch_ns",),
                              dataclasses.replace(hw, zero_batch_ns=1e4)) is comp


def test_fit_refuses_options_whose_counts_depend_on_time():
    from uvmsim.config import get_model
    for opt in ("block_progress", "thrashing"):
        with pytest.raises(SystemExit, match=opt):
            fit.fit_card("h100", pd.DataFrame(), get_model("h100", **{opt: True}), None)


def test_censored_runs_count_only_when_predicted_below_their_bound():
    comp = np.array([[1.0, 0, 0, 0, 0, 0, 0, 0], [1.0, 1, 0, 0, 0, 0, 0, 0]])
    real = np.array([1.0, 10.0])
    base = np.array([0, 1])
    cen = np.array([False, True])
    theta = np.zeros(7)
    theta[0] = 20.0                                           # predicted 21 s > bound 10 s
    assert fit.comp_loss(theta, comp, real, cen, base) == 0.0
    theta[0] = 4.0                                            # predicted 5 s < bound 10 s
    assert fit.comp_loss(theta, comp, real, cen, base) == pytest.approx(math.log(2))


def test_stored_validation_results_agree_with_the_runs_and_the_doc():
    df = pd.read_csv(ROOT / "benchmarks/validate/results/validation.csv")
    need = {"workload", "kind", "factor", "split", "real_s", "real_base_s", "real_censored",
            "predicted_s", "predicted_base_s"}
    assert need <= set(df.columns)
    assert set(df["split"]) == {"fit", "holdout"}
    wl = pd.read_csv(ROOT / "benchmarks/validate/workloads.csv").set_index("workload")
    assert (df["split"] == df["workload"].map(wl["split"])).all()
    one = df[df["factor"] == 1]
    assert np.allclose(one["real_s"], one["real_base_s"])
    assert np.allclose(df["real_slowdown"], df["real_s"] / df["real_base_s"], rtol=1e-4)
    # the doc's table is what the stored rows give
    doc = (ROOT / "docs/validation.md").read_text()
    assert fit.markdown_summary(df) in doc


def test_torch_context_is_what_the_fit_splits_program_took_at_exit():
    """The PyTorch rows' capacity leaves out TORCH_CONTEXT_MIB: the memory mlp_nopca (fit
    split, every managed tensor freed before exit) no longer had free at its exit beyond
    what the balloon left, at every factor past 1 (at factor 1, 4 MiB more). A new run of
    it that took more or less would fail here."""
    runs = pd.read_csv(ROOT / "benchmarks/validate/results/real_runs.csv")
    wl = pd.read_csv(ROOT / "benchmarks/validate/workloads.csv").set_index("workload")
    mlp = runs[(runs["workload"] == "mlp_nopca") & (runs["factor"] > 1)]
    assert wl.loc["mlp_nopca", "split"] == "fit" and len(mlp) >= 3
    taken = (mlp["free_bytes"] - mlp["free_at_exit_bytes"]).astype(int)
    assert set(taken) == {fit.TORCH_CONTEXT_MIB << 20}
    assert fit.parse_context(fit.DEFAULT_CONTEXT) == {"cuda": 4 << 20,
                                                       "torch": fit.TORCH_CONTEXT_MIB << 20}


def test_each_card_is_replayed_with_its_model_at_the_drivers_capacity(tmp_path, monkeypatch,
                                                                      capsys):
    from uvmsim.trace import synth
    MiB = 1 << 20
    (tmp_path / "traces").mkdir()
    for w in ("stream", "mlp_pca"):
        synth.write("sequential", tmp_path / "traces" / f"{w}.uvmtrace",
                    footprint_bytes=16 * MiB, kernels=2)
    rows = []
    # the H200's runs in results/, the H100's in their card's folder (validate.py --results)
    for w, kind, gpu, f in (("stream", "cuda", "NVIDIA H200", 1), ("stream", "cuda", "NVIDIA H200", 2),
                            ("stream", "cuda", "NVIDIA H100 80GB HBM3", 1),
                            ("mlp_pca", "torch", "", 1)):
        rows.append({"workload": w, "kind": kind, "factor": f, "real_s": 0.01 * f,
                     "censored": "false", "faults": 1 if f == 1 else None,
                     "htod_bytes": 4 * MiB if f == 1 else None, "dtoh_bytes": 0,
                     "free_bytes": int(32 * MiB / f), "reserve_bytes": 16 * MiB,
                     "split": "fit", "card": gpu})
    (tmp_path / "results" / "h100").mkdir(parents=True)
    df = pd.DataFrame(rows)
    h100 = df["card"].str.contains("H100")
    df[~h100].to_csv(tmp_path / "results" / "real_runs.csv", index=False)
    df[h100].to_csv(tmp_path / "results" / "h100" / "real_runs.csv", index=False)
    monkeypatch.setattr(fit, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(fit, "TRACES", tmp_path / "traces")
    monkeypatch.setattr(fit, "_TRACES", {})
    monkeypatch.setattr(fit, "_BOUNDS", {})
    runs = fit.load_runs("cuda=4")
    cap = dict(zip(zip(runs["workload"], runs["card"], runs["factor"]), runs["capacity_bytes"]))
    # CUDA rows lose the context's 4 MiB; PyTorch rows (and runs from before the card column,
    # the H200's) their measured reserve
    assert cap[("stream", "h200", 2)] == 16 * MiB - 4 * MiB
    assert cap[("stream", "h100", 1)] == 32 * MiB - 4 * MiB
    assert cap[("mlp_pca", "h200", 1)] == 32 * MiB - 16 * MiB
    assert fit.load_runs("cuda=reserve")["capacity_bytes"].max() == 32 * MiB - 16 * MiB
    # the same run in a second folder (an H200 run remeasured) is refused, naming both files
    (tmp_path / "results" / "again").mkdir()
    df[~h100].head(1).to_csv(tmp_path / "results" / "again" / "real_runs.csv", index=False)
    with pytest.raises(SystemExit, match=r"stream at factor 1 on h200, in .*again.*real_runs"):
        fit.load_runs("cuda=4")
    (tmp_path / "results" / "again" / "real_runs.csv").unlink()
    df = fit.predict(runs, fit.model_maker("auto", {}, {}))
    assert dict(zip(df["card"], df["model"])) == {"h200": "h200", "h100": "h100"}
    # each card's slowdown is over its own factor-1 run
    h200 = df[(df["workload"] == "stream") & (df["card"] == "h200")].set_index("factor")
    assert h200.loc[2, "real_slowdown"] == pytest.approx(2.0)
    # beside CUPTI's bytes, what the run must have moved: a fresh synthetic trace has no host
    # data, and 32 MiB of memory hold its 16 MiB
    one = df[df["real_htod_bytes"].notna()]
    assert (one["required_htod_bytes"] == 0).all() and (one["required_dtoh_bytes"] == 0).all()
    # the synthetic trace names no card: its H100 rows replay another card's durations
    assert "stream was traced on h200, its h100 runs" in capsys.readouterr().err
    forced = fit.predict(runs, fit.model_maker("contract", {"slices": True}, {}))
    assert set(forced["model"]) == {"contract"}
    # a synthetic trace has no v1.2 streams: with the progress front-end its rows are page
    # sets, which fit.py says once per trace (a grid over such traces fits page sets)
    monkeypatch.setattr(fit, "_WARNED", set())
    fit.predict(runs, fit.model_maker("auto", {"block_progress": True}, {}))
    err = capsys.readouterr().err
    assert err.count("stream has no v1.2 per-thread-block streams") == 1
    assert err.count("mlp_pca has no v1.2 per-thread-block streams") == 1
    # with processes, a (workload, card) each: the same rows in the same order
    pd.testing.assert_frame_equal(fit.predict_jobs(runs, fit.model_maker("auto", {}, {}), 3),
                                  df)
    with pytest.raises(SystemExit, match="not KIND=MiB"):
        fit.parse_context("cuda=four")


def test_grid_replays_each_point_and_keeps_the_least_loss(tmp_path, monkeypatch):
    """`fit.py grid`: each point is the fit split replayed with those constants (its loss
    the one `fit` minimises, on replayed times), the best is the least, and the processes
    change nothing."""
    import argparse
    from uvmsim.trace import synth
    MiB = 1 << 20
    (tmp_path / "traces").mkdir()
    synth.write("sequential", tmp_path / "traces" / "stream.uvmtrace",
                footprint_bytes=16 * MiB, kernels=2)
    rows = [{"workload": "stream", "kind": "cuda", "factor": f, "real_s": r,
             "censored": "false", "faults": None, "htod_bytes": None, "dtoh_bytes": None,
             "free_bytes": int(20 * MiB / f), "reserve_bytes": 16 * MiB, "split": "fit",
             "card": "NVIDIA H100 80GB HBM3"} for f, r in ((1, 0.004), (2, 0.02), (3, 0.05))]
    (tmp_path / "results").mkdir()
    pd.DataFrame(rows).to_csv(tmp_path / "results" / "real_runs.csv", index=False)
    monkeypatch.setattr(fit, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(fit, "TRACES", tmp_path / "traces")
    monkeypatch.setattr(fit, "_TRACES", {})
    runs = fit.load_runs("cuda=4")
    a = argparse.Namespace(model="auto", option=[], set=["fault_ns=100"],
                           grid=["batch_ns=1000,100000"], jobs=1)
    res = fit.grid_card("h100", runs, a)
    assert [p["point"] for p in res["points"]] == [{"batch_ns": 1000.0},
                                                   {"batch_ns": 100000.0}]
    for p in res["points"]:
        df = fit.predict(runs, fit.model_maker("auto", {}, {"fault_ns": 100.0, **p["point"]}))
        assert p["predicted_s"] == pytest.approx(df["predicted_s"].tolist())
        pred = np.array(p["predicted_s"])
        assert p["loss"] == pytest.approx(fit.comp_loss(
            np.zeros(0), pred[:, None], np.array([0.004, 0.02, 0.05]), np.zeros(3, bool),
            np.zeros(3, int)))
    assert res["loss"] == min(p["loss"] for p in res["points"])
    assert res["points"][0]["loss"] != res["points"][1]["loss"]  # the constant matters
    a.jobs = 2
    # the forked workers find _grid_point by its module's name (as __main__ when run)
    import sys
    monkeypatch.setitem(sys.modules, fit.__name__, fit)
    assert fit.grid_card("h100", runs, a)["points"] == res["points"]
    with pytest.raises(SystemExit, match="CONSTANT"):
        fit.parse_grid(["bogus=1,2"])
    with pytest.raises(SystemExit, match="not numbers"):
        fit.parse_grid(["batch_ns=1,x"])
    assert fit.parse_grid(["batch_ns=1,2", "fault_ns=3"]) == [
        {"batch_ns": 1.0, "fault_ns": 3.0}, {"batch_ns": 2.0, "fault_ns": 3.0}]


def test_probe_runs_join_the_suite_with_their_trace_split_and_capacity(tmp_path, monkeypatch):
    """`fit.py --probes`: the driver probes' runs of status ok become rows of their card,
    each replaying its probe's trace (host_read_drain replays host_read_stream's), in the
    split benchmarks/probes/split.csv gives that trace, at free_bytes less the context."""
    MiB = 1 << 20
    (tmp_path / "results").mkdir()
    cols = dict(censored="false", gpu_fault_records=3, htod_bytes=8 * MiB, dtoh_bytes=0,
                reserve_bytes=16 * MiB, gpu="NVIDIA H100 80GB HBM3")
    pd.DataFrame([
        dict(probe="host_read_stream", trace="host_read_stream", factor=1, status="ok",
             real_s=0.068, free_bytes=272 * MiB, **cols),
        dict(probe="host_read_drain", trace="host_read_stream", factor=1.25, status="ok",
             real_s=0.17, free_bytes=220 * MiB, **cols),
        dict(probe="evict_order", trace="evict_order", factor=2, status="ok", real_s=0.08,
             free_bytes=130 * MiB, **cols),
        dict(probe="evict_order", trace="evict_order", factor=1, status="timeout",
             real_s=None, free_bytes=260 * MiB, **cols),
    ]).to_csv(tmp_path / "results" / "probes.csv", index=False)
    (tmp_path / "split.csv").write_text(
        "trace,split,why\nhost_read_stream,fit,a\nevict_order,holdout,b\n")
    monkeypatch.setattr(fit, "PROBES", tmp_path)
    runs = fit.probe_runs("cuda=4")
    got = {(r.workload, r.factor): (r.trace, r.split, r.capacity_bytes, r.card)
           for r in runs.itertuples()}
    assert got == {("host_read_stream", 1.0): ("host_read_stream", "fit", 268 * MiB, "h100"),
                   ("host_read_drain", 1.25): ("host_read_stream", "fit", 216 * MiB, "h100"),
                   ("evict_order", 2.0): ("evict_order", "holdout", 126 * MiB, "h100")}
    assert not runs["censored"].any() and (runs["faults"] == 3).all()
    (tmp_path / "split.csv").write_text("trace,split,why\nhost_read_stream,fit,a\n")
    with pytest.raises(SystemExit, match="misses.*evict_order"):
        fit.probe_runs("cuda=4")


def test_with_durations_takes_the_other_recordings_kernel_times(tmp_path):
    """benchmarks/probes/with_durations.py: the trace's pages and streams stay, its kernels'
    durations become the other recording's, the manifest names that card (fit.py's card
    check reads it), and kernels that differ are refused."""
    import filecmp
    import json
    import pyarrow as pa
    import pyarrow.parquet as pq
    from uvmsim.trace import load_trace, synth
    spec2 = importlib.util.spec_from_file_location(
        "with_durations", ROOT / "benchmarks/probes/with_durations.py")
    wd = importlib.util.module_from_spec(spec2)
    spec2.loader.exec_module(wd)
    a, b = tmp_path / "a.uvmtrace", tmp_path / "b.uvmtrace"
    synth.write("sequential", a, footprint_bytes=4 << 20, kernels=3)
    synth.write("sequential", b, footprint_bytes=4 << 20, kernels=3)
    t = pq.read_table(b / "kernels.parquet")
    dur = [111, 222, 333]
    t = t.set_column(t.schema.get_field_index("duration_ns"), "duration_ns",
                     pa.array(dur, t.schema.field("duration_ns").type))
    pq.write_table(t, b / "kernels.parquet")
    m = json.loads((b / "manifest.json").read_text())
    m.setdefault("source", {})["gpu"] = "NVIDIA H100 80GB HBM3"
    (b / "manifest.json").write_text(json.dumps(m))
    out = tmp_path / "out.uvmtrace"
    wd.with_durations(a, b, out)
    got, orig = load_trace(out), load_trace(a)
    assert got.kernels.sort_values("kernel_id")["duration_ns"].tolist() == dur
    assert orig.kernels["duration_ns"].tolist() != dur
    for f in ("accesses.parquet", "events.parquet", "allocations.parquet"):
        assert filecmp.cmp(a / f, out / f, shallow=False), f
    assert got.manifest["source"]["kernel_durations_gpu"] == "NVIDIA H100 80GB HBM3"
    c = tmp_path / "c.uvmtrace"
    synth.write("sequential", c, footprint_bytes=4 << 20, kernels=2)
    with pytest.raises(SystemExit, match="kernel_id"):
        wd.with_durations(a, c, tmp_path / "x.uvmtrace")
