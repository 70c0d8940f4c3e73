"""uvmsim.Scenario: one object for everything but the trace, taken by every entry point.

Keyword arguments build one with equal results; it is hashable, readable, round-trips
through a dict and JSON, names the field it rejects, and every field has a CLI flag.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import uvmsim
import uvmsim.reference
from uvmsim import ConfigError, Scenario
from uvmsim.config import OPTION_NAMES, Model, Translation, get_hardware
from uvmsim.trace import synth

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def traces():
    kw = dict(layers=2, steps=1, weight_bytes=3 << 20)
    return (synth.make("training", activation_bytes=5 << 20, **kw),
            synth.make("training", activation_bytes=7 << 20, **kw))


def test_import_uvmsim_gives_scenario():
    r = subprocess.run([sys.executable, "-c", "import uvmsim; print(uvmsim.Scenario())"],
                       capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Scenario()"


# ---------------------------------------------------------------- the same results
SETTINGS = dict(oversub=2.0, prefetch="none", thrashing={"threshold": 2.0}, seed=3,
                remote_access_ns=150.0)


def test_simulate_equal_with_and_without_a_scenario(traces):
    t = traces[0]
    sc = Scenario(oversub=2.0, prefetch="none", seed=3,
                  options={"thrashing": {"threshold": 2.0}, "remote_access_ns": 150.0})
    assert Scenario.from_kwargs(**SETTINGS) == sc
    kw = uvmsim.simulate(t, **SETTINGS)
    given = uvmsim.simulate(t, sc)
    assert given.summary == kw.summary and given.extra == kw.extra
    assert given.config == kw.config and given.config["scenario"] == sc.to_dict()
    assert given.summary["evicted_chunks"] > 0        # the capacity reached the replay
    # a scenario and keywords: the keywords change it
    assert uvmsim.simulate(t, sc, oversub=1.0).summary == uvmsim.simulate(
        t, **{**SETTINGS, "oversub": 1.0}).summary


def test_reference_equal_with_and_without_a_scenario(traces):
    t = traces[0]
    sc = Scenario.from_kwargs(**SETTINGS)
    kw = uvmsim.reference.simulate(t, **SETTINGS)
    given = uvmsim.reference.simulate(t, sc)
    assert given.summary == kw.summary
    assert given.config["engine"] == "reference"
    fast = uvmsim.simulate(t, sc).summary
    assert {k: v for k, v in given.summary.items() if k != "sim_time_ns"} == \
        {k: v for k, v in fast.items() if k != "sim_time_ns"}


def test_simulate_multi_equal_with_and_without_a_scenario(traces):
    kw = dict(oversub=1.5, prefetch="none", translation=True, scheduler="mfit",
              memory="fair")
    a = uvmsim.simulate_multi(list(traces), **kw)
    b = uvmsim.simulate_multi(list(traces), Scenario.from_kwargs(**kw))
    assert a.table.equals(b.table) and a.system == b.system
    assert a.config == b.config and a.config["scheduler"] == "mfit"
    assert [r.summary for r in a.alone] == [r.summary for r in b.alone]


def test_sweep_of_scenarios_equals_the_keyword_grid(traces):
    from uvmsim.sweep import grid, sweep
    kw = dict(executor="serial", progress=False)
    by_kw = sweep(traces[0], oversub=[1.0, 2.0], prefetch=["none", "density"],
                  thrashing=True, **kw)
    scs = grid(Scenario(options={"thrashing": True}), prefetch=["none", "density"],
               oversub=[1.0, 2.0])
    assert [(s.prefetch, s.oversub) for s in scs] == [("none", 1.0), ("none", 2.0),
                                                      ("density", 1.0), ("density", 2.0)]
    by_sc = sweep(traces[0], scs, **kw)
    assert by_sc.equals(by_kw)
    for (_, row), sc in zip(by_sc.iterrows(), scs):
        assert Scenario.from_json(row["scenario"]) == sc
        assert row["faults"] == uvmsim.simulate(traces[0], sc).summary["faults"]
    # settings given beside scenarios change every one; a list is a grid axis
    tr = sweep(traces[0], scs[:1], translation=True, **kw)
    assert Scenario.from_json(tr["scenario"][0]).translation == Translation()
    with pytest.raises(ConfigError, match="oversub= is a list"):
        sweep(traces[0], scs, oversub=[1.0, 2.0], **kw)


def test_simulate_refuses_tenant_components(traces):
    with pytest.raises(ConfigError, match="tenant components of simulate_multi"):
        uvmsim.simulate(traces[0], scheduler="mfit")


# ---------------------------------------------------------------- the chunk pool
def test_tenants_pool_is_bounded_by_their_blocks_as_one_trace_alone_is(traces):
    """A capacity far beyond the tenants' blocks sizes the engine's and the policies'
    chunk arrays by the blocks (chunk_pool), as a replay alone does, and the GPU still
    has that capacity (POOL.capacity); the counts are those of a capacity that just fits."""
    from uvmsim.replay import prepare
    huge = 1 << 22                    # 8 TiB: arrays of this many chunks per policy
    run = prepare(list(traces), capacity_chunks=huge)
    managed = int(np.count_nonzero(~run.arrays.a_host[run.arrays.b_alloc]))
    assert run.state.chunk_block.size == run.state.free_stack.size == managed
    assert run.est.prev.size == managed                   # lru2m's list over the pool
    assert run.state.pool[0].capacity == huge and run.capacity == huge
    alone = prepare(traces[0], capacity_chunks=huge)
    assert alone.state.chunk_block.size < huge and alone.state.pool[0].capacity == huge
    big = uvmsim.simulate_multi(list(traces), capacity_chunks=huge, prefetch="none")
    fits = uvmsim.simulate_multi(list(traces), oversub=1.0, prefetch="none")
    assert big.table.drop(columns=["tenant"]).equals(fits.table.drop(columns=["tenant"]))
    assert big.config["capacity_chunks"] == huge


# ---------------------------------------------------------------- the object
def test_hashable_and_equal_by_value():
    a = Scenario(model="h200", oversub=1.5, prefetch_params={"threshold": 60},
                 options={"thrashing": {"nap_us": 700}})
    b = Scenario.from_kwargs(model="h200", oversub=1.5, prefetch_params={"threshold": 60.0},
                             thrashing={"nap_us": 700.0})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != a.replace(seed=1) and len({a, a.replace(seed=1)}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.oversub = 2.0                                   # type: ignore[misc]
    from uvmsim.policies import get_prefetch
    obj = Scenario(prefetch=get_prefetch("density"))      # a policy object (params: a dict)
    assert hash(obj) == hash(Scenario(prefetch=get_prefetch("density")))


def test_repr_shows_what_differs_from_the_defaults():
    assert repr(Scenario()) == "Scenario()"
    s = Scenario(model="h200", oversub=1.5, prefetch="none", options={"slices": True})
    assert repr(s) == ("Scenario(model='h200', oversub=1.5, prefetch='none', "
                       "options={'slices': True})")


@pytest.mark.parametrize("sc", [
    Scenario(),
    Scenario(model="h200", capacity_bytes=64 << 20, prefetch="64k", evict="lru4k",
             translation={"walkers": 8, "page_size": 65536}, scheduler="amfit", seed=7),
    Scenario(capacity_chunks=12, prefetch_params={"threshold": 70},
             options={"thrashing": {"nap_us": 700.0}, "hardware": "a100-pcie4",
                      "fault_batch_size": 64, "remote": "uvmsmart",
                      "access_counter_penalty": 3.0}),
    Scenario(model=uvmsim.config.model_from_constants({"batch_ns": 1.0}, name="mine"),
             options={"hardware": dataclasses.replace(get_hardware("h100-pcie5"),
                                                      name="custom", fault_ns=9.0)}),
], ids=["defaults", "fields", "options", "objects"])
def test_round_trips_through_dict_and_json(sc):
    d = sc.to_dict()
    assert set(d) == {f.name for f in dataclasses.fields(Scenario)}
    assert json.loads(json.dumps(d)) == d                 # plain JSON values
    assert Scenario.from_dict(d) == sc
    back = Scenario.from_json(sc.to_json())
    assert back == sc and hash(back) == hash(sc)
    assert back.resolved_model() == sc.resolved_model()
    assert Scenario.from_dict({}) == Scenario()


@pytest.mark.parametrize("kw,field", [
    (dict(model="nope"), "Scenario.model: unknown model 'nope'"),
    (dict(oversub=0), "Scenario.oversub"),
    (dict(oversub=float("nan")), "Scenario.oversub"),
    (dict(oversub=2.0, capacity_bytes=1 << 30), "at most one of oversub"),
    (dict(capacity_bytes=4096), "Scenario.capacity_bytes"),
    (dict(capacity_chunks=0), "Scenario.capacity_chunks"),
    (dict(prefetch="bogus"), "Scenario.prefetch: unknown prefetch policy 'bogus'"),
    (dict(prefetch_params={"nope": 1}), "Scenario.prefetch_params: policy 'density' has no"),
    (dict(evict="bogus"), "Scenario.evict: unknown eviction policy"),
    (dict(evict_params={"x": 1}), "Scenario.evict_params"),
    (dict(translation={"walkers": 0}), "Scenario.translation: walkers must be >= 1"),
    (dict(translation={"tlb_entries": 100.5}), "Scenario.translation"),
    (dict(options={"slices": 1}), "Scenario.options: model 'contract': slices must be"),
    (dict(options={"bogus": 1}), "Scenario.options: a model has no setting 'bogus'"),
    (dict(options={"hardware": "tpu"}), "Scenario.options: unknown hardware 'tpu'"),
    (dict(walkers="bogus"), "Scenario.walkers: unknown walker component"),
    (dict(scheduler="bogus"), "Scenario.scheduler: unknown scheduler"),
    (dict(memory="bogus"), "Scenario.memory: unknown memory component"),
    (dict(seed=1.5), "Scenario.seed"),
])
def test_errors_name_the_field(kw, field):
    with pytest.raises(ConfigError) as e:
        Scenario(**kw)
    assert field in str(e.value)


def test_unknown_names_are_errors():
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        Scenario.from_kwargs(colour=1)
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        uvmsim.simulate("x.uvmtrace", colour=1)
    with pytest.raises(ConfigError, match="no field 'colour'"):
        Scenario.from_dict({"colour": 1})
    with pytest.raises(ConfigError, match="must be JSON"):
        Scenario.from_json("{")


def test_replace_keeps_one_capacity_and_none_drops_an_option():
    s = Scenario(capacity_bytes=64 << 20, options={"slices": True, "advise": True})
    r = s.replace(oversub=2.0, slices=None)
    assert (r.oversub, r.capacity_bytes, r.capacity_chunks) == (2.0, None, None)
    assert dict(r.options) == {"advise": True}
    assert s.replace(thrashing={"threshold": 4}).resolved_model().thrashing_settings()[
        "threshold"] == 4.0
    assert s.replace(options={}).options == ()


# ---------------------------------------------------------------- the command line
def _flags(command: str) -> set[str]:
    from uvmsim.cli import build_parser
    ap = build_parser()
    sub = next(a for a in ap._actions if a.dest == "command").choices[command]
    return {o for a in sub._actions for o in a.option_strings}


def test_every_setting_has_a_cli_flag():
    """Each field of Scenario and Model has a flag in `uvmsim replay` (the tenant
    components in `uvmsim multi`; a setting of one trace alone, the plan, not there), is
    set through another field's flag, or is no setting; a new field without one fails
    here."""
    replay, multi, sweep = _flags("replay"), _flags("multi"), _flags("sweep")
    seen = set()
    for cls in (Scenario, Model):
        for f in dataclasses.fields(cls):
            m = f.metadata.get("cli")
            assert m is not None, f"{cls.__name__}.{f.name} has no cli metadata"
            if "flag" in m:
                assert m["flag"] in (multi if m.get("tenants") else replay), m["flag"]
                assert (m["flag"] not in multi) if m.get("alone") else (m["flag"] in multi)
                seen.add(m["flag"])
            elif "via" in m:
                target = m["via"]
                assert target == "Model" or target in {x.name for x in dataclasses.fields(cls)} \
                    | {x.name for x in dataclasses.fields(Scenario)}, (f.name, target)
            else:
                assert m["none"], f.name
    assert {"--access-counter-penalty", "--remote-access-ns", "--capacity-chunks",
            "--seed", "--plan", "--block-progress", "--fault-latency-ns",
            "--shared-windows"} <= seen
    assert set(OPTION_NAMES) <= {f.name for f in dataclasses.fields(Model)}
    # sweep: the same settings, its grid axes as lists, and a file of scenarios
    assert {"--remote-access-ns", "--seed", "--thrashing", "--models", "--scenarios",
            "--scenario", "--plan"} <= sweep
    # uvmsim plan: the settings of the replay that builds the plan, no plan of its own
    assert {"--oversub", "--capacity-chunks", "--thrashing", "--seed"} <= _flags("plan")
    assert "--plan" not in _flags("plan")


def _cli_scenario(*argv: str) -> Scenario:
    from uvmsim.cli import _scenario, build_parser
    return _scenario(build_parser().parse_args(["replay", "t.uvmtrace", *argv]))


def test_cli_flags_reach_the_scenario(tmp_path):
    s = _cli_scenario("--model", "h200", "--capacity-chunks", "9", "--evict", "random2m",
                      "--prefetch-param", "threshold=60", "--seed", "5", "--remote",
                      "uvmsmart", "--access-counter-penalty", "3", "--remote-access-ns",
                      "50", "--translation", "walkers=4", "--thrashing", "--no-host-access",
                      "--shared-windows")
    assert s == Scenario(model="h200", capacity_chunks=9, evict="random2m", seed=5,
                         prefetch_params={"threshold": 60}, translation={"walkers": 4},
                         options={
                             "remote": "uvmsmart", "access_counter_penalty": 3.0,
                             "remote_access_ns": 50.0, "thrashing": True,
                             "host_access": False, "shared_windows": True})
    assert _cli_scenario("--model", "h100", "--block-progress", "--fault-latency-ns",
                         "300", "--fault-order", "age", "--store-ahead", "4",
                         "--sm-store-pool", "8", "--share-units") == Scenario(
                             model="h100", options={
                                 "block_progress": True, "fault_latency_ns": 300.0,
                                 "fault_order": "age", "store_ahead": 4, "sm_store_pool": 8,
                                 "share_units": True})
    assert _cli_scenario() == Scenario()
    f = tmp_path / "s.json"
    f.write_text(s.to_json())
    assert _cli_scenario("--scenario", str(f)) == s
    assert _cli_scenario("--scenario", str(f), "--oversub", "2") == s.replace(oversub=2.0)
    assert _cli_scenario("--scenario", '{"seed": 4}') == Scenario(seed=4)


def test_cli_replay_with_a_scenario_file(traces, tmp_path):
    from uvmsim.cli import main
    path = synth.write("training", tmp_path / "t.uvmtrace", layers=2, steps=1,
                       weight_bytes=3 << 20, activation_bytes=5 << 20)
    sc = Scenario.from_kwargs(**SETTINGS)
    (tmp_path / "s.json").write_text(sc.to_json())
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["replay", str(path), "--scenario", str(tmp_path / "s.json"),
                     "--json"]) == 0
    assert json.loads(out.getvalue()) == uvmsim.simulate(uvmsim.load_trace(path), sc).summary


def test_cli_sweep_of_a_scenarios_file(tmp_path):
    from uvmsim.cli import main
    path = synth.write("training", tmp_path / "t.uvmtrace", layers=2, steps=1,
                       weight_bytes=3 << 20, activation_bytes=5 << 20)
    scs = [Scenario(oversub=2.0, prefetch="none"), Scenario(capacity_chunks=5)]
    (tmp_path / "s.json").write_text(json.dumps([s.to_dict() for s in scs]))
    import contextlib
    import io
    out = io.StringIO()
    argv = ["sweep", str(path), "--scenarios", str(tmp_path / "s.json"), "--executor",
            "serial", "--json", "--thrashing"]
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    rows = json.loads(out.getvalue())
    t = uvmsim.load_trace(path)
    for row, sc in zip(rows, scs):
        sc = sc.replace(thrashing=True)                    # the flag changed every scenario
        assert Scenario.from_json(row["scenario"]) == sc
        assert row["faults"] == uvmsim.simulate(t, sc).summary["faults"]
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(argv + ["--oversub", "1,2"]) == 2
    assert "--oversub does not go with --scenarios" in err.getvalue()


# ---------------------------------------------------------------- the prefetch plan
@pytest.fixture(scope="module")
def plan_file(traces, tmp_path_factory):
    from uvmsim import plans
    p = plans.build(traces[0], plans.predictors.get("oracle"), allow_future=True,
                    oversub=2.0, replay=False)
    assert len(p) > 0
    return p, p.save(tmp_path_factory.mktemp("plan") / "oracle.parquet")


def test_plan_keyword_equals_the_scenario_field(traces, plan_file):
    """plan= is a shortcut of Scenario(plan=...): a Plan or its file, equal Results, in
    simulate and the reference model; and the plan reached the replay."""
    t, (plan, path) = traces[0], plan_file
    base = uvmsim.simulate(t, oversub=2.0)
    kw = uvmsim.simulate(t, oversub=2.0, plan=plan)
    for sc in (Scenario(oversub=2.0, plan=plan), Scenario(oversub=2.0, plan=str(path)),
               Scenario(oversub=2.0, plan=path)):
        r = uvmsim.simulate(t, sc)
        assert r.summary == kw.summary and r.extra == kw.extra
        assert r.config["plan"] == kw.config["plan"] == plan.summary()
    assert kw.summary != base.summary        # the oracle's prefetches changed the counts
    assert "plan" not in base.config
    ref = uvmsim.reference.simulate(t, Scenario(oversub=2.0, plan=str(path)))
    assert ref.summary == uvmsim.reference.simulate(t, oversub=2.0, plan=plan).summary \
        == kw.summary


def test_plan_in_the_dict_a_path_or_a_content_id(plan_file, tmp_path):
    plan, path = plan_file
    by_path = Scenario(plan=path)
    assert by_path.plan == str(path) and by_path == Scenario(plan=str(path))
    assert by_path.to_dict()["plan"] == str(path)
    assert Scenario.from_json(by_path.to_json()) == by_path
    assert by_path.plan_id() == plan.content_id == Scenario(plan=plan).plan_id()
    d = Scenario(plan=plan).to_dict()
    assert d["plan"] == {"id": plan.content_id, "name": plan.name, "entries": len(plan)}
    with pytest.raises(ConfigError, match="Scenario.plan: .* save the plan"):
        Scenario.from_dict(d)
    with pytest.raises(ConfigError, match="Scenario.plan: must be a uvmsim.plans.Plan"):
        Scenario(plan=3)
    with pytest.raises(ConfigError, match="Scenario.plan: empty path"):
        Scenario(plan="")
    with pytest.raises(FileNotFoundError, match="no such plan file"):
        uvmsim.simulate(synth.make("sequential", footprint_bytes=4 << 20, kernels=2),
                        plan=tmp_path / "absent.parquet")


def test_a_plan_is_for_one_trace(traces, plan_file):
    with pytest.raises(ConfigError, match="a prefetch plan is for one trace alone"):
        uvmsim.simulate_multi(list(traces), plan=plan_file[0])


def test_cli_plan_flag_reaches_the_scenario(plan_file):
    path = str(plan_file[1])
    assert _cli_scenario("--plan", path) == Scenario(plan=path)


def test_sweep_keys_a_plan_by_its_content(traces, plan_file, tmp_path):
    """A plan file rewritten with other content gives other cell ids (the cells replay
    again); the same content under another name the same ids."""
    from uvmsim import plans
    from uvmsim.sweep import cell_id
    plan, path = plan_file
    sc = Scenario(oversub=2.0, plan=str(path))
    same = tmp_path / "copy.parquet"
    plan.save(same)
    assert cell_id("t", sc, None) == cell_id("t", Scenario(oversub=2.0, plan=plan), None) \
        == cell_id("t", sc.replace(plan=str(same)), None)
    assert cell_id("t", sc, None) != cell_id("t", Scenario(oversub=2.0), None)
    other = plans.empty({"predictor": "nothing"})
    moved = tmp_path / "moved.parquet"
    other.save(moved)
    ids = {cell_id("t", Scenario(oversub=2.0, plan=str(moved)), None)}
    other2 = plans.build(traces[0], plans.predictors.get("stride"), oversub=2.0,
                         replay=False)
    other2.save(moved, overwrite=True)
    ids.add(cell_id("t", Scenario(oversub=2.0, plan=str(moved)), None))
    assert len(ids) == 2


@pytest.mark.parametrize("opts", [{"block_progress": True, "fault_latency_ns": 300.0},
                                  {"block_progress": True, "fault_latency_ns": 300.0,
                                   "store_ahead": 4, "fault_order": "age",
                                   "sm_store_pool": 8},
                                  {"block_progress": True, "fault_latency_ns": 300.0,
                                   "share_units": True},
                                  {"shared_windows": True}])
def test_newer_options_equal_with_and_without_a_scenario(opts):
    """The progress front-end and shared windows reach the replay from a Scenario as from
    keywords (and change it: a v1.2 trace whose blocks stall, allocations sharing windows)."""
    t = synth.make("grid_stride_fill", footprint_bytes=4 << 20, grid=32, block=256,
                   sm_count=2, max_blocks_per_sm=4, kernels=2)
    sc = Scenario(oversub=1.5, options=opts)
    kw = uvmsim.simulate(t, oversub=1.5, **opts)
    given = uvmsim.simulate(t, sc)
    assert given.summary == kw.summary and given.config == kw.config
    for k in opts:
        assert given.config["scenario"]["options"][k] == opts[k]
    if "block_progress" in opts:
        assert given.config["block_progress"] and given.config["fault_latency_ns"] == 300.0
        assert given.summary != uvmsim.simulate(t, oversub=1.5).summary
    else:
        assert given.config["shared_windows"] is True
