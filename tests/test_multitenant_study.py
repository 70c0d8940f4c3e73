"""The multi-tenant study's bookkeeping (benchmarks/multitenant_study.py) and its stored CSV,
which docs/study-multitenant.md quotes."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from uvmsim.components.memory import MEMORY
from uvmsim.components.sched import SCHEDULERS
from uvmsim.components.walkers import WALKERS

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("multitenant_study",
                                              ROOT / "benchmarks/multitenant_study.py")
study = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study)


def kernels(sim, compute, stall, walks, driver):
    return pd.DataFrame({"sim_ns": sim, "compute_ns": compute, "stall_ns": stall,
                         "translation_ns": walks, "driver_wait_ns": driver})


def test_added_latency_splits_only_the_spikes_by_cause():
    alone = kernels([100.0, 20_000.0, 1_000.0], [100.0, 20_000.0, 1_000.0], [0.0] * 3,
                    [0.0] * 3, [0.0] * 3)
    # kernel 0: 5 us over a 100 ns kernel (over 2x, under 10 us: no spike); kernel 1: 15 us
    # over 20 us (over 10 us, under 2x: no spike); kernel 2: the only spike, 30 us added:
    # 4 us of walks, 20 us of driver queue, 6 us of its own faults
    shared = kernels([5_100.0, 35_000.0, 31_000.0], [100.0, 20_000.0, 1_000.0],
                     [5_000.0, 15_000.0, 30_000.0], [0.0, 1_000.0, 4_000.0],
                     [5_000.0, 0.0, 20_000.0])
    sp = study.added_latency(shared, alone, "spike_")
    assert sp == {"spike_kernels": 1, "spike_added_ns": 30_000.0, "spike_compute_ns": 0.0,
                  "spike_walks_ns": 4_000.0, "spike_driver_ns": 20_000.0,
                  "spike_own_ns": 6_000.0}
    al = study.added_latency(shared, alone, "all_")
    assert al["all_kernels"] == 3
    assert al["all_added_ns"] == 50_000.0
    assert (al["all_walks_ns"], al["all_driver_ns"], al["all_own_ns"]) == (5_000.0, 25_000.0,
                                                                           20_000.0)


def test_added_latency_rejects_tables_of_different_kernels():
    a = kernels([1.0], [1.0], [0.0], [0.0], [0.0])
    with pytest.raises(RuntimeError, match="differ in length"):
        study.added_latency(pd.concat([a, a]), a, "all_")


def test_the_grid_takes_every_registered_component():
    reg = study.registered()
    assert reg == {"memory": sorted(MEMORY), "walkers": sorted(WALKERS),
                   "scheduler": sorted(SCHEDULERS)}
    jobs = [j for j in study.plan() if j["study"] == "grid"]
    per_cell = len(MEMORY) * len(WALKERS) * len(SCHEDULERS)
    assert len(jobs) == len(study.MIXES) * len(study.OVERSUB) * per_cell
    assert {j["memory"] for j in jobs} == set(MEMORY)
    assert {j["walkers"] for j in jobs} == set(WALKERS)
    assert {j["scheduler"] for j in jobs} == set(SCHEDULERS)


def test_time_split_sums_tenants_and_leaves_the_rest_to_own_faults():
    df = pd.DataFrame({"mix": 2, "oversub": 1.5, "memory": "shared", "walkers": "shared",
                       "scheduler": "interleave", "finish_ns": [30e6, 20e6],
                       "alone_ns": [10e6, 10e6], "driver_wait_ns": [5e6, 5e6],
                       "sched_wait_ns": [0.0, 2e6], "translation_ns": [4e6, 1e6],
                       "alone_translation_ns": [1e6, 1e6]})
    t = study.time_split(df).iloc[0]
    assert (t.added_ms, t.driver_ms, t.sched_ms, t.walks_ms, t.own_ms) == (30, 10, 2, 3, 15)
    assert t["driver%"] == pytest.approx(100 / 3)


def test_against_static_compares_within_each_mix_and_factor():
    g = pd.DataFrame({"mix": [2, 2, 4, 4], "oversub": 1.5, "memory": "shared",
                      "walkers": ["partitioned", "shared"] * 2, "scheduler": "interleave",
                      "stp": [1.0, 1.5, 2.0, 1.0], "faults": [100, 50, 10, 20]})
    out = study.against_static(g)
    assert out.stp_gain_pct.tolist() == pytest.approx([0.0, 50.0, 0.0, -50.0])
    assert out.faults_pct.tolist() == pytest.approx([0.0, -50.0, 0.0, 100.0])


def test_stored_results_cover_the_grid_with_unshared_compute():
    df = pd.read_csv(study.RESULTS)
    grid = df[df.study == "grid"]
    assert sorted(grid.mix.unique()) == list(study.MIXES)
    assert sorted(grid.oversub.unique()) == list(study.OVERSUB)
    for n in study.MIXES:
        got = grid[grid.mix == n].groupby("tenant").trace.unique()
        assert [list(v) for v in got] == [[study.CYCLE[i % len(study.CYCLE)]] for i in range(n)]
    # compute is not shared among tenants (docs/model.md): kernels never gain compute time
    assert np.all(df.all_compute_ns == 0) and np.all(df.spike_compute_ns == 0)
