"""Sweeps: every backend gives the table simulate() would, in the caller's order."""
from __future__ import annotations

import pytest

import uvmsim
from uvmsim.plot import plot_sweep
from uvmsim.sweep import sweep
from uvmsim.trace import synth

GRID = dict(oversub=[1.0, 2.0], prefetch=["density", "none"])


@pytest.fixture(scope="module")
def trace():
    return synth.make("training", layers=2, steps=1, weight_bytes=3 << 20,
                      activation_bytes=5 << 20)


def _check(df, trace):
    assert list(zip(df["prefetch"], df["oversub"])) == [("density", 1.0), ("density", 2.0),
                                                        ("none", 1.0), ("none", 2.0)]
    for _, row in df.iterrows():
        s = uvmsim.simulate(trace, oversub=row["oversub"], prefetch=row["prefetch"]).summary
        assert row["faults"] == s["faults"] and row["evicted_chunks"] == s["evicted_chunks"]
        assert row["sim_time_ns"] == pytest.approx(s["sim_time_ns"])
    base = df[df["oversub"] == 1.0].set_index("prefetch")["sim_time_ns"]
    for _, row in df.iterrows():
        assert row["slowdown"] == pytest.approx(row["sim_time_ns"] / base[row["prefetch"]])


def test_serial_and_process_pool_agree(trace):
    a = sweep(trace, backend="serial", progress=False, **GRID)
    b = sweep(trace, backend="process", jobs=2, progress=False, **GRID)
    _check(a, trace)
    assert a.drop(columns=["hardware"]).equals(b.drop(columns=["hardware"]))


def test_each_engine_runs_its_first_cell_in_a_first_wave():
    """The pool runs one cell per compiled engine (prefetch, evict, translation on or off)
    before all others, so no two workers compile the same engine (src/uvmsim/sweep.py)."""
    from uvmsim.sweep import waves
    tasks = [{"id": i, "point": {"oversub": f, "prefetch": pf, "evict": "lru2m"},
              "common": {"translation": tr}}
             for i, (tr, pf, f) in enumerate((tr, pf, f) for tr in (None, True)
                                             for pf in ("density", "none") for f in (1, 2, 3))]
    first, rest = waves(tasks)
    assert [t["id"] for t in first] == [0, 3, 6, 9]  # the first cell of each engine
    assert sorted(t["id"] for t in first + rest) == list(range(12))
    assert [t["id"] for t in rest] == [1, 2, 4, 5, 7, 8, 10, 11]  # in order
    assert waves(tasks[:1]) == [tasks[:1]] and waves([]) == []


def test_dask_on_a_local_cluster_by_address(trace, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        df = sweep(trace, executor="dask", scheduler=cluster.scheduler_address,
                   progress=False, out=tmp_path / "ds", **GRID)
    _check(df, trace)
    assert len(list((tmp_path / "ds").glob("cell-*.parquet"))) == 4
    again = sweep(trace, executor="serial", progress=False, out=tmp_path / "ds", **GRID)
    assert again.attrs == {"computed": 0, "reused": 4}
    assert again.equals(df)


def test_options_reach_every_replay_and_extra_counts_are_columns(trace):
    df = sweep(trace, backend="serial", progress=False, translation=True, **GRID)
    assert (df["tlb_misses"] > 0).all()


def test_bad_backend_and_empty_grid(trace):
    with pytest.raises(uvmsim.ConfigError, match="unknown executor"):
        sweep(trace, backend="mpi", jobs=2, progress=False, **GRID)
    with pytest.raises(uvmsim.ConfigError, match="empty"):
        sweep(trace, oversub=[], progress=False)


def test_plot_from_table(trace, tmp_path):
    df = sweep(trace, backend="serial", progress=False, **GRID)
    fig = plot_sweep(df, path=tmp_path / "p.png")
    assert len(fig.axes[0].lines) == 2          # one line per prefetch policy
    assert (tmp_path / "p.png").stat().st_size > 5000
    with pytest.raises(ValueError, match="none of the requested metrics"):
        plot_sweep(df, metrics=["nope"])


def test_model_reaches_every_replay():
    from uvmsim.trace.builder import TraceBuilder
    b = TraceBuilder()
    x = b.alloc(6 << 20)
    b.host_access(b.base(x), 3 << 12)
    b.kernel("k", reads=b.pages(x, 0, 3))
    t = b.build()
    df = sweep(t, backend="serial", progress=False, model="h200", oversub=[1.0, 3.0],
               prefetch=["none"])
    assert list(df["model"]) == ["h200", "h200"]
    assert (df["host_populated_pages"] == 3).all() and (df["zero_fill_pages"] == 0).all()
    plain = sweep(t, backend="serial", progress=False, oversub=[1.0], prefetch=["none"])
    assert plain["model"][0] == "contract" and plain["zero_fill_pages"][0] == 3
    with pytest.raises(uvmsim.ConfigError, match="unknown model"):
        sweep(t, model="nope", progress=False)


# ---------------------------------------------------------------- resumable datasets

FULL = dict(oversub=[1.0, 1.5, 2.0], prefetch=["density", "none"])


def test_interrupted_sweep_resumes_without_recomputing(trace, tmp_path, monkeypatch):
    import uvmsim.sweep as S
    clean = sweep(trace, executor="serial", progress=False, out=tmp_path / "clean", **FULL)
    assert clean.attrs == {"computed": 6, "reused": 0}
    real = S._run_cell
    calls = []

    def dies_after_four(task):
        if len(calls) == 4:
            raise KeyboardInterrupt  # as a user's Ctrl-C in the middle of the sweep
        calls.append(task["cell_id"])
        return real(task)
    monkeypatch.setattr(S, "_run_cell", dies_after_four)
    with pytest.raises(KeyboardInterrupt):
        sweep(trace, executor="serial", progress=False, out=tmp_path / "d", **FULL)
    written = {p.name for p in (tmp_path / "d").glob("cell-*.parquet")}
    assert written == {f"cell-{c}.parquet" for c in calls} and len(written) == 4
    assert not list((tmp_path / "d").glob(".cell-*"))   # no half-written file left

    calls.clear()
    monkeypatch.setattr(S, "_run_cell", lambda task: (calls.append(task["cell_id"]),
                                                      real(task))[1])
    resumed = sweep(trace, executor="serial", progress=False, out=tmp_path / "d", **FULL)
    assert len(calls) == 2 and not set(calls) & {n[5:-8] for n in written}
    assert resumed.attrs == {"computed": 2, "reused": 4}
    assert resumed.equals(clean)


def test_process_pool_resumes_a_smaller_sweep(trace, tmp_path):
    part = sweep(trace, executor="process", jobs=2, progress=False, out=tmp_path / "d",
                 oversub=[1.0, 2.0], prefetch=["density", "none"])
    full = sweep(trace, executor="process", jobs=2, progress=False, out=tmp_path / "d", **FULL)
    assert full.attrs == {"computed": 2, "reused": 4}
    fresh = sweep(trace, executor="serial", progress=False, **FULL)
    assert full.drop(columns=["hardware"]).equals(fresh.drop(columns=["hardware"]))
    assert set(part["cell_id"]) < set(full["cell_id"])
    from uvmsim.sweep import read_results
    back = read_results(tmp_path / "d")
    assert len(back) == 6 and set(back["cell_id"]) == set(full["cell_id"])


def test_cell_ids_follow_content_parameters_and_model(trace, tmp_path):
    from uvmsim.sweep import trace_content_id
    kw_t = dict(layers=2, steps=1, weight_bytes=3 << 20, activation_bytes=5 << 20)
    synth.write("training", tmp_path / "a.uvmtrace", **kw_t)
    synth.write("training", tmp_path / "b.uvmtrace", **kw_t)
    assert trace_content_id(tmp_path / "a.uvmtrace") == trace_content_id(tmp_path / "b.uvmtrace")
    other = synth.make("training", layers=2, steps=1, weight_bytes=3 << 20,
                       activation_bytes=6 << 20)
    assert trace_content_id(other) != trace_content_id(trace)
    assert trace_content_id(trace) == trace_content_id(synth.make("training", **kw_t))
    kw = dict(executor="serial", progress=False, oversub=[2.0], prefetch=["none"])
    base = sweep(tmp_path / "a.uvmtrace", **kw)["cell_id"][0]
    assert sweep(tmp_path / "b.uvmtrace", **kw)["cell_id"][0] == base   # content, not path
    assert sweep(other, **kw)["cell_id"][0] != base
    assert sweep(tmp_path / "a.uvmtrace", model="h200", **kw)["cell_id"][0] != base
    assert sweep(tmp_path / "a.uvmtrace", translation=True, **kw)["cell_id"][0] != base
    assert sweep(tmp_path / "a.uvmtrace", fault_batch_size=64, **kw)["cell_id"][0] != base


def test_traces_models_and_segments_are_dimensions(tmp_path):
    from uvmsim.trace.builder import TraceBuilder

    def make(n):
        b = TraceBuilder()
        x = b.alloc(8 << 20)
        for step in range(2):
            b.kernel("spin_kernel", reads=[])
            b.kernel("fwd", reads=b.pages(x, 0, n))
            b.kernel("bwd", writes=b.pages(x, 0, n))
        return b.build()
    df = sweep({"small": make(600), "large": make(1800)}, model=["contract", "h200"],
               executor="serial", progress=False, oversub=[1.0, 2.0], prefetch=["none"],
               segment="spin_kernel")
    assert len(df) == 8
    assert list(df["trace"].unique()) == ["small", "large"]
    assert set(df["model"]) == {"contract", "h200"}
    assert (df["segment_kernels"] == 2).all()
    one = uvmsim.simulate(make(1800), oversub=2.0, prefetch="none")
    tail = one.kernels.iloc[-2:]
    row = df[(df["trace"] == "large") & (df["model"] == "contract") & (df["oversub"] == 2.0)]
    assert row["iter_faults"].iloc[0] == tail["faults"].sum()
    assert row["iter_sim_ns"].iloc[0] == pytest.approx(tail["sim_ns"].sum())
    assert row["iter_slowdown"].iloc[0] == pytest.approx(
        tail["sim_ns"].sum() / df[(df["trace"] == "large") & (df["model"] == "contract")
                                  & (df["oversub"] == 1.0)]["iter_sim_ns"].iloc[0])


def test_cli_sweep_of_several_traces_and_models_resumes(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    a = synth.write("training", tmp_path / "a.uvmtrace", layers=2, steps=1,
                    weight_bytes=3 << 20, activation_bytes=5 << 20)
    b = synth.write("training", tmp_path / "b.uvmtrace", layers=3, steps=1,
                    weight_bytes=3 << 20, activation_bytes=5 << 20)
    args = [sys.executable, "-m", "uvmsim", "sweep", str(a), str(b), "--oversub", "1,2",
            "--prefetch", "none", "--models", "contract,h200", "--dataset", str(tmp_path / "ds"),
            "--executor", "serial", "--no-progress", "-o", str(tmp_path / "t.csv")]
    env = {**__import__("os").environ, "PYTHONPATH": str(root / "src")}
    first = subprocess.run(args, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert "8 cells computed, 0 reused" in first.stdout
    second = subprocess.run(args, capture_output=True, text=True, env=env)
    assert "0 cells computed, 8 reused" in second.stdout
    import pandas as pd
    t = pd.read_csv(tmp_path / "t.csv")
    assert sorted(t["trace"].unique()) == ["a", "b"] and sorted(t["model"].unique()) == [
        "contract", "h200"]
    row = t[(t["trace"] == "b") & (t["model"] == "h200") & (t["oversub"] == 2.0)].iloc[0]
    s = uvmsim.simulate(uvmsim.load_trace(b), model="h200", oversub=2.0, prefetch="none")
    assert row["faults"] == s.summary["faults"]
    bad = subprocess.run(args[:5] + ["--scheduler", "tcp://x:1"], capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 2 and "--executor dask" in bad.stderr


# ---------------------------------------------------------------- slowdown, bad input

def test_slowdown_is_over_factor_1_even_when_the_sweep_lacks_it(trace, tmp_path):
    df = sweep(trace, executor="serial", progress=False, oversub=[2.0, 1.5],
               prefetch=["density", "none"], out=tmp_path / "d")
    assert list(zip(df["prefetch"], df["oversub"])) == [("density", 2.0), ("density", 1.5),
                                                        ("none", 2.0), ("none", 1.5)]
    for _, row in df.iterrows():
        base = uvmsim.simulate(trace, oversub=1.0, prefetch=row["prefetch"]).summary
        assert row["slowdown"] == pytest.approx(row["sim_time_ns"] / base["sim_time_ns"])
        assert row["slowdown"] != pytest.approx(row["sim_time_ns"] / row["compute_ns"])
    assert df.attrs == {"computed": 6, "reused": 0}     # the two baseline cells included
    # the baseline cells are cells of the dataset: a later sweep with factor 1 reuses them
    again = sweep(trace, executor="serial", progress=False, oversub=[1.0, 2.0],
                  prefetch=["density", "none"], out=tmp_path / "d")
    assert again.attrs == {"computed": 0, "reused": 4}
    assert (again.loc[again["oversub"] == 1.0, "slowdown"] == 1.0).all()


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 0, -1.0, "x"])
def test_bad_factors_are_refused_before_any_cell_runs(trace, monkeypatch, bad):
    import uvmsim.sweep as S
    monkeypatch.setattr(S, "_run_cell", lambda task: pytest.fail("a cell ran"))
    with pytest.raises(uvmsim.ConfigError, match="must be a finite number > 0"):
        sweep(trace, executor="serial", progress=False, oversub=[1.0, bad])
    with pytest.raises(uvmsim.ConfigError, match="finite number > 0"):
        uvmsim.simulate(trace, oversub=bad if bad != "x" else float("inf"))


def test_a_segment_no_kernel_has_is_refused(trace, tmp_path, monkeypatch):
    import uvmsim.sweep as S
    monkeypatch.setattr(S, "_run_cell", lambda task: pytest.fail("a cell ran"))
    path = synth.write("zipf", tmp_path / "z.uvmtrace", footprint_bytes=8 << 20, kernels=2)
    for t, label in ((trace, "trace:"), (path, "z"), ({"mine": path}, "mine")):
        with pytest.raises(uvmsim.ConfigError, match=f"segment 'spin_kernel': no kernel of "
                                                     f"trace '{label}"):
            sweep(t, executor="serial", progress=False, oversub=[1.0], segment="spin_kernel")
