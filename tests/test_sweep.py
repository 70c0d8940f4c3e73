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


def test_dask_backend(trace):
    pytest.importorskip("dask.distributed")
    df = sweep(trace, backend="dask", jobs=2, progress=False, **GRID)
    _check(df, trace)


def test_options_reach_every_replay_and_extra_counts_are_columns(trace):
    df = sweep(trace, backend="serial", progress=False, translation=True, **GRID)
    assert (df["tlb_misses"] > 0).all()


def test_bad_backend_and_empty_grid(trace):
    with pytest.raises(uvmsim.ConfigError, match="unknown backend"):
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
