"""Prefetch plans (uvmsim.plans): a plan changes counts exactly as the equivalent prefetch
events in the trace would; the engine and the reference model agree with plans; the build's
online replay is the plan's replay; predictors cannot read the future; plans round-trip
through Arrow files and bad files are refused by name; the shipped predictors do what their
docs say."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import uvmsim
import uvmsim.reference as ref
from uvmsim import plans
from uvmsim.errors import ConfigError
from uvmsim.plans import FutureAccessError, NoFeedbackError, PlanError, Prefetch
from uvmsim.plans.compare import precision
from uvmsim.trace import trace_from_tables
from uvmsim.trace.builder import TraceBuilder

from helpers import MiB, examples
from uvmsim.testing.strategies import programs as _programs
from test_reference_diff import assert_same

ROOT = Path(__file__).resolve().parents[1]


def programs(**kw):
    """The kit's generated programs as their TraceBuilders: the plan entries below are drawn
    over a builder's allocations and kernels."""
    return _programs(**kw).map(lambda p: p.builder())

PROPS = settings(max_examples=examples(10), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PAGE = 4096

replay_settings = st.fixed_dictionaries({
    "capacity_chunks": st.integers(1, 4),
    "fault_batch_size": st.sampled_from([1, 3, 256]),
    "prefetch": st.sampled_from(["none", "density", "2m"]),
})


@st.composite
def plan_entries(draw, b: TraceBuilder):
    """Entries over the builder's kernels: ranges in, across and outside its allocations."""
    allocs = b._allocs
    n_k = len(b._kernels)
    rows = []
    for _ in range(draw(st.integers(0, 12 if n_k else 0))):
        a = draw(st.sampled_from(allocs))
        n_a = -(-a["size"] // PAGE)
        first = a["base"] // PAGE + draw(st.integers(-600, n_a + 600))
        rows.append(dict(kernel_id=draw(st.integers(0, n_k - 1)), page=max(first, 0),
                         n_pages=draw(st.integers(1, 1500)),
                         to=draw(st.sampled_from(["gpu", "gpu", "cpu"])),
                         order=draw(st.integers(0, 3))))
    return pd.DataFrame(rows, columns=["kernel_id", "page", "n_pages", "to", "order"])


def equivalent_tables(b: TraceBuilder, entries: pd.DataFrame) -> dict:
    """The builder's tables with each entry written as a prefetch event before its kernel,
    a kernel's entries in (order, row) order: the trace the plan should be equivalent to."""
    t = b.tables()
    ev = t["events"].to_dict("records")
    e = entries.reset_index(drop=True)
    if "order" not in e:
        e["order"] = np.arange(len(e))
    e = e.assign(row=np.arange(len(e))).sort_values(["kernel_id", "order", "row"])
    out = []
    for r in ev:
        if r["op"] == "kernel":
            for x in e[e["kernel_id"] == int(r["kernel_id"])].itertuples():
                out.append(dict(op="prefetch", addr=int(x.page) * PAGE,
                                size=int(x.n_pages) * PAGE, arg=x.to))
        out.append({k: v for k, v in r.items() if k != "seq"})
    evs = pd.DataFrame(out, columns=list(t["events"].columns))
    evs["seq"] = np.arange(len(evs), dtype=np.uint64)
    t["events"] = evs.astype(t["events"].dtypes.to_dict())
    return t


def assert_same_arrays(A, B) -> None:
    for name in A._fields:
        a, b = getattr(A, name), getattr(B, name)
        assert a.dtype == b.dtype, (name, a.dtype, b.dtype)
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name


@PROPS
@given(data=st.data(), prog=programs(), kw=replay_settings)
def test_a_plan_is_its_prefetch_events(data, prog, kw):
    """The trace with the plan applied has exactly the arrays of the trace with the plan's
    entries written in as prefetch events, so it replays to the same counts."""
    entries = data.draw(plan_entries(prog))
    plan = plans.from_table(entries)
    trace = prog.build()
    eq = trace_from_tables(**equivalent_tables(prog, entries))
    assert_same_arrays(plans.with_plan(trace, plan).arrays, eq.arrays)
    a = uvmsim.simulate(trace, plan=plan, **kw)
    assert_same(a, uvmsim.simulate(eq, **kw))
    assert a.config["plan"]["entries"] == len(entries)


@settings(PROPS, max_examples=examples(4))
@given(data=st.data(), prog=programs(), kw=replay_settings,
       # lru4k with density: a pair other tests compile too (each pair is an engine)
       opts=st.sampled_from([{}, {"thrashing": True}, {"evict": "lru4k", "prefetch": "density"},
                             {"translation": True}]))
def test_engine_equals_reference_with_plans(data, prog, kw, opts):
    plan = plans.from_table(data.draw(plan_entries(prog)))
    trace = prog.build()
    kw = {**kw, **opts}
    assert_same(uvmsim.simulate(trace, plan=plan, **kw), ref.simulate(trace, plan=plan, **kw))


def test_a_plan_reaching_blocks_the_trace_never_touches_numbers_them_in():
    """A block no row or event reaches has no state until a plan prefetches it; then the
    arrays are the loader's for the trace with the prefetch in it, and it takes a chunk."""
    b = TraceBuilder()
    x = b.alloc(8 * MiB)
    b.kernel("a", reads=b.pages(x, 0, 4))
    b.kernel("b", reads=b.pages(x, 1030, 1034))          # window 2; windows 1, 3 untouched
    entries = pd.DataFrame(dict(kernel_id=[1, 1], page=[b.pages(x, 512, 513)[0],
                                                        b.pages(x, 1600, 1601)[0]],
                                n_pages=[3, 8], to=["gpu", "gpu"]))
    trace = b.build()
    applied = plans.with_plan(trace, plans.from_table(entries))
    assert trace.arrays.b_alloc.size == 2 and applied.arrays.b_alloc.size == 4
    assert_same_arrays(applied.arrays,
                       trace_from_tables(**equivalent_tables(b, entries)).arrays)
    r = uvmsim.simulate(trace, plan=plans.from_table(entries), capacity_chunks=2,
                        prefetch="none")
    assert r.summary["zero_fill_pages"] == 4 + 4 + 3 + 8
    assert r.summary["evicted_chunks"] == 2      # the plan's two blocks push out a and b's


def test_empty_plan_replays_as_no_plan():
    t = uvmsim.load_trace(ROOT / "traces/gpt2_small.uvmtrace")
    a = uvmsim.simulate(t, oversub=3.0)
    b = uvmsim.simulate(t, oversub=3.0, plan=plans.empty())
    assert a.summary == b.summary and a.kernels.equals(b.kernels)
    assert b.config["plan"]["entries"] == 0


class RandomPredictor:
    """Feedback predictor drawing from the history: past pages, missed pages, pages pushed
    back, and pages anywhere near the live allocations."""

    name = "random"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def start(self, h) -> None:
        self.rng = np.random.default_rng(self.seed)

    def __call__(self, h):
        rng = self.rng
        gpu, cpu = [], []
        if h.k:
            i = int(rng.integers(0, h.k))
            p = h.pages(i)
            gpu.append(p[rng.permutation(p.size)[:rng.integers(0, 300)]])
            gpu.append(h.missed(-1))
            cpu.append(h.pages(-1)[:rng.integers(0, 50)])
            assert h.faults(-1) == h.counts(-1)["faults"] >= 0
        live = h.live_allocations()
        if len(live) and rng.random() < 0.5:
            a = live.iloc[int(rng.integers(0, len(live)))]
            lo = int(a.first_page) + int(rng.integers(-20, int(a.n_pages)))
            gpu.append(np.arange(max(lo, 0), max(lo, 0) + int(rng.integers(1, 700))))
        return Prefetch(gpu=np.concatenate(gpu) if gpu else (),
                        cpu=np.concatenate(cpu) if cpu else ())


@PROPS
@given(prog=programs(), kw=replay_settings, seed=st.integers(0, 2**32 - 1))
def test_build_replay_is_the_plans_replay(prog, kw, seed):
    """The replay a build runs for feedback, with entries cut to blocks that have state,
    reaches exactly the counts the finished plan replays to."""
    trace = prog.build()
    plan = plans.build(trace, RandomPredictor(seed), **kw)
    assert_same(plan.result, uvmsim.simulate(trace, plan=plan, **kw))


def test_build_replay_is_the_plans_replay_on_a_real_trace_with_options():
    t = uvmsim.load_trace(ROOT / "traces/resnet50_nopca.uvmtrace")    # frees, shared pages
    for kw in ({"oversub": 2.0}, {"oversub": 3.0, "model": "h200", "thrashing": True}):
        plan = plans.build(t, RandomPredictor(7), **kw)
        assert len(plan) > 1000
        assert_same(plan.result, uvmsim.simulate(t, plan=plan, **kw))


# --------------------------------------------------------------------------- no future
def _tiny():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    for i in range(4):
        b.kernel(f"k{i % 2}", reads=b.pages(x, 100 * i, 100 * i + 10))
    return b.build()


@pytest.mark.parametrize("peek", [
    lambda h: h.pages(h.k), lambda h: h.pages(h.k + 1), lambda h: h.touches(h.k),
    lambda h: h.writes(h.n_kernels - 1), lambda h: h.missed(h.k), lambda h: h.counts(h.k),
    lambda h: h.faults(h.k + 2), lambda h: h.name_of(h.k + 1)])
def test_a_predictor_reading_the_future_is_refused(peek):
    calls = []

    def cheat(h):
        calls.append(h.k)
        if h.k == 1:
            return peek(h)
        return None
    with pytest.raises(FutureAccessError, match="has not run yet"):
        plans.build(_tiny(), cheat, capacity_chunks=1)
    assert calls == [0, 1]


def test_the_past_is_readable_and_the_view_is_read_only():
    seen = {}

    def reader(h):
        if h.k == 3:
            seen["pages"] = h.pages(0)
            seen["last"] = h.pages(-1)
            seen["missed"] = h.missed(2)
            seen["name"] = (h.name, h.name_of(0), h.launches("k1").tolist())
            with pytest.raises(ValueError):
                h.pages(0)[0] = 0
            with pytest.raises(IndexError):
                h.pages(-4)
        return None
    plans.build(_tiny(), reader, capacity_chunks=1)
    base = 0x7F0000000000 // PAGE
    assert seen["pages"].tolist() == list(range(base, base + 10))
    assert seen["last"].tolist() == list(range(base + 200, base + 210))
    assert seen["missed"].tolist() == seen["last"].tolist()        # never touched before
    assert seen["name"] == ("k1", "k0", [1])


def test_future_seeing_predictors_need_allow_future():
    t = _tiny()
    with pytest.raises(ConfigError, match="sees the future"):
        plans.build(t, plans.predictors.oracle())
    plan = plans.build(t, plans.predictors.oracle(), allow_future=True, capacity_chunks=2)
    assert plan.sees_future
    r = uvmsim.simulate(t, plan=plan, capacity_chunks=2)
    assert r.summary["faults"] == 0 and r.summary["zero_fill_pages"] == 40

    class Honest:
        name = "honest"

        def __call__(self, h):
            return h.pages(h.k)
    with pytest.raises(FutureAccessError):       # allow_future does not open it to others
        plans.build(t, Honest(), allow_future=True)

    class Seer:
        name = "seer"
        sees_future = True

        def __call__(self, h):
            return h.missed(h.k)                 # nobody has feedback from the future
    with pytest.raises(FutureAccessError):
        plans.build(t, Seer(), allow_future=True)


def test_no_feedback_build_refuses_feedback_reads():
    class P:
        name = "p"
        feedback = False

        def __call__(self, h):
            return h.missed(-1) if h.k else None
    with pytest.raises(NoFeedbackError):
        plans.build(_tiny(), P())


def test_bad_predictions_are_refused_by_name():
    for bad, msg in ((lambda h: "x", "a prediction is None"),
                     (lambda h: np.array([1.5]), "integer page numbers"),
                     (lambda h: [-1], "not a page number"),
                     (lambda h: Prefetch(cpu=[1 << 50]), "not a page number")):
        with pytest.raises(ConfigError, match=msg):
            plans.build(_tiny(), bad)


# --------------------------------------------------------------------------- files
plan_tables = st.builds(
    lambda rows: pd.DataFrame(rows, columns=["kernel_id", "page", "n_pages", "to", "order"]),
    st.lists(st.fixed_dictionaries({
        "kernel_id": st.integers(0, 2**32 - 1), "page": st.integers(0, 2**49),
        "n_pages": st.integers(1, 2**49), "to": st.sampled_from(["gpu", "cpu"]),
        "order": st.integers(-2**63, 2**63 - 1)}), max_size=20))


@settings(max_examples=examples(40), deadline=None)
@given(table=plan_tables, meta=st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
def test_plans_round_trip_through_arrow(tmp_path_factory, table, meta):
    d = tmp_path_factory.mktemp("p")
    p = plans.from_table(table, meta=meta)
    q = plans.load(p.save(d / "p.parquet"))
    a = plans.load(p.save(d / "p.arrow"))
    with open(d / "p.arrow", "rb") as f:      # an Arrow IPC file, not Parquet
        assert f.read(6) == b"ARROW1"
    # written by another tool, without the provenance
    feather.write_feather(pa.Table.from_pandas(p.table, preserve_index=False), d / "p.feather")
    r = plans.load(d / "p.feather")
    for x in (q, a, r):
        for f in ("kernel_id", "page", "n_pages", "to", "order"):
            assert np.array_equal(getattr(p, f), getattr(x, f)), f
    for x in (q, a):
        assert x.meta == p.meta and x.content_id == p.content_id
        assert x.table.equals(p.table)
    assert r.meta == {}


@pytest.mark.parametrize("change,column,row,msg", [
    (lambda t: t.drop(columns="to"), "to", None, "missing column"),
    (lambda t: t.assign(to=["gpu", "host", "cpu"]), "to", 1, "'host' is not one of"),
    (lambda t: t.assign(n_pages=[1, 0, 2]), "n_pages", 1, "n_pages must be >= 1"),
    (lambda t: t.assign(page=[1, 2, 2**50]), "page", 2, "2\\*\\*50"),
    (lambda t: t.assign(kernel_id=[0, -1, 1]), "kernel_id", 1, "out of range"),
    (lambda t: t.assign(page=[1.0, 2.5, 3.0]), "page", 1, "not an integer"),
    (lambda t: t.assign(order=["a", "b", "c"]), "order", None, "not an integer"),
    (lambda t: t.assign(page=pd.array([1, None, 3], dtype="Int64")), "page", 1, "null"),
])
def test_bad_plan_files_are_refused_by_file_column_and_row(tmp_path, change, column, row, msg):
    good = pd.DataFrame(dict(kernel_id=[0, 1, 2], page=[10, 20, 30], n_pages=[1, 2, 3],
                             to=["gpu", "cpu", "gpu"], order=[0, 0, 1]))
    f = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pandas(change(good), preserve_index=False), f)
    with pytest.raises(PlanError, match=msg) as e:
        plans.load(f)
    assert e.value.file == str(f) and e.value.column == column and e.value.row == row


def test_plan_files_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        plans.load(tmp_path / "none.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(PlanError, match="unreadable") as e:
        plans.load(tmp_path / "junk.parquet")
    assert e.value.file == str(tmp_path / "junk.parquet")
    t = pa.Table.from_pandas(plans.empty().table).replace_schema_metadata(
        {b"uvmplan": b'{"format": "uvmplan", "version": 9}'})
    pq.write_table(t, tmp_path / "v9.parquet")
    with pytest.raises(PlanError, match="version 9"):
        plans.load(tmp_path / "v9.parquet")
    p = plans.from_table(pd.DataFrame(dict(kernel_id=[0, 77], page=[1, 2], n_pages=[1, 1],
                                           to=["gpu", "gpu"])))
    p.save(tmp_path / "p.parquet")
    with pytest.raises(PlanError, match="kernel_id 77 is not a kernel") as e:
        uvmsim.simulate(_tiny(), plan=tmp_path / "p.parquet")
    assert (e.value.file, e.value.column, e.value.row) == (str(tmp_path / "p.parquet"),
                                                           "kernel_id", 1)
    with pytest.raises(FileExistsError):
        p.save(tmp_path / "p.parquet")


# --------------------------------------------------------------------------- predictors
def _alternating(n: int = 6):
    """Kernels A and B alternate over two blocks; one chunk: each launch evicts the other."""
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    for i in range(n):
        b.kernel("AB"[i % 2], reads=b.pages(x, 512 * (i % 2), 512 * (i % 2) + 10))
    return b.build()


def test_correlation_prefetches_what_the_same_launch_needed_last_time():
    t = _alternating()
    plan = plans.build(t, plans.predictors.correlation(context=0), capacity_chunks=1)
    assert plan.result.kernels["faults"].tolist() == [10, 10, 0, 0, 0, 0]
    assert uvmsim.simulate(t, capacity_chunks=1).kernels["faults"].tolist() == [10] * 6
    # a launch it has not seen with this context yet falls back to the name alone
    plan = plans.build(t, plans.predictors.correlation(context=3), capacity_chunks=1)
    assert plan.result.summary["faults"] == 20


def test_stride_follows_a_confirmed_stride_per_kernel_name():
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    y = b.alloc(4 * MiB)
    for i in range(6):
        b.kernel("S", reads=b.pages(x, 16 * i, 16 * i + 4))
        b.kernel("R", reads=b.pages(y, 7 * (i % 2), 7 * (i % 2) + 4))   # no steady stride
    t = b.build()
    plan = plans.build(t, plans.predictors.stride(), prefetch="none", replay=False)
    assert plan.result is None                   # no feedback, and no final replay asked
    r = uvmsim.simulate(t, plan=plan, prefetch="none")
    assert plans.build(t, plans.predictors.stride(), prefetch="none").result.summary == \
        r.summary
    assert r.kernels["faults"][0::2].tolist() == [4, 4, 4, 0, 0, 0]
    assert set(plan.kernel_id.tolist()) == {6, 8, 10}        # S's 4th launch on; never R
    assert plan.table.page.tolist() == [b.pages(x, 16 * i, 17 * i)[0] for i in (3, 4, 5)]


def test_oracle_prefetches_at_most_the_capacity_nearest_kernel_last():
    b = TraceBuilder()
    x = b.alloc(16 * MiB)
    b.kernel("big", reads=[int(p) for w in range(5) for p in b.pages(x, 512 * w, 512 * w + 2)])
    b.kernel("next", reads=b.pages(x, 3000, 3002))
    t = b.build()
    plan = plans.build(t, plans.predictors.oracle(lookahead=2), allow_future=True,
                       capacity_chunks=3)
    first = plan.table[plan.table.kernel_id == 0]
    assert (first.page // 512).nunique() == 3          # the capacity's worth of its windows
    plan = plans.build(t, plans.predictors.oracle(lookahead=2), allow_future=True,
                       capacity_chunks=8)
    first = plan.table[plan.table.kernel_id == 0].sort_values("order")
    assert first.page.iloc[0] == b.pages(x, 3000, 3001)[0]   # the farther kernel first
    assert uvmsim.simulate(t, plan=plan, capacity_chunks=8).summary["faults"] == 0


class Always:
    """A model that says every candidate will be touched (sklearn's API)."""

    def predict_proba(self, X):
        return np.column_stack([np.zeros(len(X)), np.ones(len(X))])


def test_learned_takes_any_model_with_predict_proba_and_trains_a_logistic_one():
    t = _alternating(8)
    plan = plans.build(t, plans.predictors.learned(Always()), capacity_chunks=1)
    # every launch after the first has candidates; one chunk: one window each
    per_k = plan.table.groupby("kernel_id").page.apply(lambda p: (p // 512).nunique())
    assert per_k.index.tolist() == list(range(1, 8)) and (per_k == 1).all()
    model = plans.predictors.train([t, _alternating(4)])
    assert np.isfinite(model.coef_).all() and model.coef_.size == len(plans.predictors.FEATURES)
    p = model.predict_proba(np.eye(len(plans.predictors.FEATURES)))
    assert np.allclose(p.sum(axis=1), 1.0)
    plan = plans.build(t, plans.predictors.learned(model), capacity_chunks=1)
    assert plan.meta["params"]["model"] == "LogisticModel"


def test_predictors_by_name():
    g = plans.predictors.get
    assert isinstance(g("oracle", {"lookahead": 3}), plans.predictors.Oracle)
    assert g("correlation").params == {"context": 2, "lookahead": 1}
    assert isinstance(g("test_plans:Always"), Always)          # a class: instantiated
    assert g("test_plans:_tiny") is _tiny                      # a function: the predictor
    with pytest.raises(ConfigError, match="unknown predictor"):
        g("nope")
    with pytest.raises(ConfigError, match="lookahead"):
        g("oracle", {"lookahead": 0})
    with pytest.raises(ConfigError, match="cannot load"):
        g("no_such_module:x")


# --------------------------------------------------------------------------- integration
def test_streamed_trace_replays_a_plan_as_in_memory(tmp_path):
    path = ROOT / "traces/gpt2_small.uvmtrace"
    t = uvmsim.load_trace(path)
    plan = plans.build(t, plans.predictors.correlation(), oversub=3.0)
    s = uvmsim.simulate(uvmsim.load_trace(path, stream=True), oversub=3.0, plan=plan)
    assert s.summary == plan.result.summary
    b = TraceBuilder()
    x = b.alloc(8 * MiB)
    b.kernel("a", reads=b.pages(x, 0, 4))
    b.write(tmp_path / "t.uvmtrace")
    far = plans.from_table(pd.DataFrame(dict(kernel_id=[0], page=[b.pages(x, 1600, 1601)[0]],
                                             n_pages=[1], to=["gpu"])))
    with pytest.raises(ConfigError, match="streamed trace never touches"):
        uvmsim.simulate(uvmsim.load_trace(tmp_path / "t.uvmtrace", stream=True), plan=far)
    assert uvmsim.simulate(uvmsim.load_trace(tmp_path / "t.uvmtrace"),
                           plan=far).summary["zero_fill_pages"] == 16 + 1


def test_sweep_replays_a_plan_and_keys_cells_by_it(tmp_path):
    from uvmsim.sweep import sweep
    t = uvmsim.load_trace(ROOT / "traces/gpt2_small.uvmtrace")
    plan = plans.build(t, plans.predictors.oracle(), allow_future=True, oversub=3.0)
    kw = dict(oversub=[3.0], prefetch=["density"], executor="serial", progress=False)
    with_plan = sweep(t, plan=plan, out=tmp_path / "d", **kw)
    without = sweep(t, out=tmp_path / "d", **kw)
    assert with_plan["faults"].tolist() == [0] and without["faults"].tolist() == [10391]
    assert with_plan["plan"].tolist() == [f"oracle:{plan.content_id}"]
    assert with_plan["cell_id"][0] != without["cell_id"][0]
    # the cell and the factor-1 cell its slowdown divides by, both replayed with the plan
    assert sweep(t, plan=plan, out=tmp_path / "d", **kw).attrs["reused"] == 2


def test_repeat_runs_the_program_again_on_the_same_pages():
    from uvmsim.errors import TraceFormatError
    from uvmsim.trace.repeat import repeat
    path = ROOT / "traces/gpt2_small.uvmtrace"
    one = uvmsim.simulate(uvmsim.load_trace(path), oversub=3.0)
    assert uvmsim.simulate(repeat(path, 1), oversub=3.0).summary == one.summary
    two = uvmsim.simulate(repeat(path, 2), oversub=1.0)
    k = two.kernels
    assert len(k) == 2 * one.summary["kernels"]
    assert k["faults"].iloc[len(k) // 2:].sum() == 0       # everything resident already
    with pytest.raises(TraceFormatError, match="overlaps live"):
        repeat(ROOT / "traces/resnet50_nopca.uvmtrace", 2)  # freed blocks reused by others


def test_compare_reports_the_oracles_share():
    t = _alternating(8)
    df = plans.compare({"alt": t}, {"corr": lambda: plans.predictors.correlation(context=0)},
                       oracle=plans.predictors.oracle, oversub=[2.0])
    row = df.set_index("run")
    assert row.loc["oracle", "faults"] == 0 and row.loc["oracle", "oracle_share"] == 1.0
    assert row.loc["density", "oracle_share"] == 0.0
    assert row.loc["corr", "faults"] == 20
    assert 0 < row.loc["corr", "oracle_share_faults"] < 1
    # what it prefetches before each launch is exactly what that launch touches
    assert row.loc["corr", "precision"] == 1.0 and np.isnan(row.loc["density", "precision"])
    wrong = plans.from_table(pd.DataFrame(dict(kernel_id=[1, 1], page=[
        0x7F0000000000 // PAGE, 0x7F0000000000 // PAGE + 512], n_pages=[10, 30],
        to=["gpu", "gpu"])))
    assert precision(t, wrong) == 0.25     # kernel 1 touches 10 of these 40 pages


def test_cli_builds_and_replays_plans(tmp_path):
    from test_cli import cli
    trace = ROOT / "traces/gpt2_small.uvmtrace"
    out = tmp_path / "corr.parquet"
    p = cli("plan", trace, "--predictor", "correlation", "--param", "context=1",
            "--oversub", "3", "-o", out, "--json", check=True)
    got = json.loads(p.stdout)
    plan = plans.load(out)
    assert got["plan"] == plan.summary() and plan.meta["params"] == {"context": 1,
                                                                     "lookahead": 1}
    r = json.loads(cli("replay", trace, "--oversub", "3", "--plan", out, "--json",
                       check=True).stdout)
    assert r == got["replay"] == uvmsim.simulate(trace, oversub=3.0, plan=plan).summary
    p = cli("plan", trace, "--predictor", "oracle", "-o", tmp_path / "o.parquet")
    assert p.returncode == 2 and "--allow-future" in p.stderr
    (tmp_path / "bad.parquet").write_bytes(b"junk")
    p = cli("replay", trace, "--plan", tmp_path / "bad.parquet")
    assert p.returncode == 2 and "bad.parquet" in p.stderr and "unreadable" in p.stderr
    p = cli("sweep", trace, "--oversub", "3", "--prefetch", "density", "--plan", out,
            "--executor", "serial", "--json", "--no-progress", check=True)
    rows = json.loads(p.stdout)
    assert rows[0]["faults"] == r["faults"] and rows[0]["plan"].startswith("correlation:")


def test_tables_with_plan_write_the_trace_a_plan_is_equivalent_to(tmp_path):
    path = ROOT / "traces/gpt2_small.uvmtrace"
    t = uvmsim.load_trace(path)
    plan = plans.build(t, RandomPredictor(3), oversub=3.0)
    out = uvmsim.write_trace(tmp_path / "baked.uvmtrace", **plans.tables_with_plan(path, plan))
    baked = uvmsim.load_trace(out)
    assert (baked.events["op"] == "prefetch").sum() == len(plan)
    assert_same_arrays(plans.with_plan(t, plan).arrays, baked.arrays)
    assert_same(plan.result, uvmsim.simulate(baked, oversub=3.0))


def test_a_plan_made_directly_is_checked_too():
    z = np.zeros(2, np.int64)
    ok = dict(kernel_id=z, page=np.array([5, 6]), n_pages=np.ones(2, np.int64),
              to=np.ones(2, np.int8), order=z)
    plans.Plan(**ok)
    for change, column, row in ((dict(page=np.array([5, -1])), "page", 1),
                                (dict(n_pages=np.array([1, 0])), "n_pages", 1),
                                (dict(page=np.array([2**50 - 1, 0]),
                                      n_pages=np.array([2, 1])), "n_pages", 0),
                                (dict(to=np.array([1, 3], np.int8)), "to", 1),
                                (dict(kernel_id=np.array([-1, 0])), "kernel_id", 0),
                                (dict(order=np.zeros(3, np.int64)), "order", None),
                                (dict(page=[5, 6]), "page", None)):
        with pytest.raises(PlanError) as e:
            plans.Plan(**{**ok, **change})
        assert (e.value.column, e.value.row) == (column, row)


def test_repeat_allocates_freed_buffers_again_in_each_run(tmp_path):
    from uvmsim.trace.repeat import repeat
    b = TraceBuilder()
    w = b.alloc(2 * MiB)                    # lives to the end: allocated once
    t = b.alloc(2 * MiB)                    # a temporary: allocated and freed every run
    b.kernel("fwd", reads=b.pages(w, 0, 4), writes=b.pages(t, 0, 8))
    b.free(t)
    path = b.write(tmp_path / "p.uvmtrace")
    r = repeat(path, 3)
    ev = r.events
    assert (ev["op"] == "alloc").sum() == 1 + 3 and (ev["op"] == "free").sum() == 3
    assert len(r.allocations) == 1 + 3 and r.n_kernels == 3
    k = uvmsim.simulate(r).kernels
    # the weights stay resident; the freed temporary is zero-filled again in every run
    assert k["faults"].tolist() == [12, 8, 8]
