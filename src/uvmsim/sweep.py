"""Sweeps: traces × scenarios, as a table.

    sweep(traces, [Scenario(oversub=1.0), Scenario(oversub=2.0, prefetch="none")])
    sweep(traces, grid(Scenario(model="h200"), prefetch=["none", "density"], oversub=[1, 2]))
    sweep(traces, oversub=[1, 2], prefetch=["none", "density"], model="h200")  # the same

Each (trace, scenario) is a *cell*: one replay. The keyword form builds the scenarios with
`grid`: models × prefetch × evict × oversub, the other keyword settings common to all. Cells run on a local process pool (the default), on a
dask.distributed cluster (``executor="dask"``, ``scheduler=ADDRESS``; without an address a local
cluster is started) or in this process (``executor="serial"``).

With ``out=DIR`` the sweep is a resumable Parquet dataset: each finished cell is written at once
to ``DIR/cell-<id>.parquet`` (written to a temporary name and renamed, so a file is complete or
absent), and a later call with the same cells reads the finished ones back instead of replaying
them. A cell's id is a hash of the trace's content, its scenario (its prefetch plan by the
plan's content, not its path) and the resolved model configuration (and the uvmsim version): change any of them and the cell is computed again.
``pandas.read_parquet(DIR)`` reads the whole dataset; each row's ``scenario`` column holds its
Scenario as JSON (`Scenario.from_json`).

A pool runs the first cell of each compiled engine (prefetch, eviction, translation on or
off) before the others (`waves`), so an engine not yet in the disk cache is compiled by one
worker and loaded by the rest; on an empty cache that halves a 2-worker sweep of 4 engines
(docs/performance.md, "Simulated sweeps").
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ._atomic import write_atomic
from .config import DEFAULT_MODEL
from .errors import ConfigError
from .scenario import CAPACITY_FIELDS, Scenario
from .simulate import simulate
from .trace import Trace, load_trace

_WORKER_TRACES: dict[str, Trace] = {}
#: per-iteration columns taken from the kernels after the last `segment` marker kernel
SEGMENT_COUNTS = ("faults", "faults_read", "faults_write", "htod_bytes", "htod_bytes_demand",
                  "htod_bytes_prefetch", "evicted_chunks", "dtoh_bytes_evict", "compute_ns",
                  "sim_ns")
EXECUTORS = ("process", "dask", "serial")


def grid(base: Scenario | None = None, **axes: Any) -> list[Scenario]:
    """Every combination of `axes` on `base` (default: all defaults), in a stable order: the
    first axis varies slowest. An axis is a Scenario field or model setting (as
    `Scenario.replace` takes them) with a list of values (a single value: a list of one)."""
    base = base if base is not None else Scenario()
    names = list(axes)
    values = [_axis(axes[n]) for n in names]
    return [base.replace(**dict(zip(names, combo))) for combo in itertools.product(*values)]


def _axis(v: Any) -> list[Any]:
    if isinstance(v, (list, tuple, range, np.ndarray)):
        return list(v)
    return [v]


# ---------------------------------------------------------------- identities

def trace_content_id(trace: Trace | str | os.PathLike) -> str:
    """A stable hash of a trace's content: of the files of a .uvmtrace directory (names and
    bytes), or of an in-memory Trace's tables and access arrays."""
    h = hashlib.sha256()
    if not isinstance(trace, Trace):
        d = Path(trace)
        if not d.is_dir():
            raise ConfigError(f"{d}: not a .uvmtrace directory")
        for p in sorted(d.iterdir()):
            if p.is_file():
                h.update(p.name.encode() + b"\0")
                with open(p, "rb") as f:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h.update(block)
        return h.hexdigest()[:20]
    for name in ("allocations", "events", "kernels"):
        df = getattr(trace, name)
        h.update(name.encode())
        h.update(",".join(map(str, df.columns)).encode())
        # as text: some columns hold arrays (unhashable as objects)
        h.update(pd.util.hash_pandas_object(df.astype(str), index=False).to_numpy().tobytes())
    arrays = trace.arrays
    for name in arrays._fields:
        v = getattr(arrays, name)
        if isinstance(v, np.ndarray):
            h.update(name.encode() + str(v.dtype).encode())
            h.update(np.ascontiguousarray(v).tobytes())
    return h.hexdigest()[:20]


def _policy_name(p: Any) -> str:
    return p if isinstance(p, str) else getattr(p, "name", str(p))


def _model_config(sc: Scenario) -> dict[str, Any]:
    """The resolved model configuration a cell replays with (provenance text left out)."""
    d = sc.resolved_model().to_dict()
    d.pop("sources", None)
    d.pop("doc", None)
    if isinstance(d.get("hardware"), dict):
        d["hardware"] = {k: v for k, v in d["hardware"].items() if k != "sources"}
    return d


def cell_id(trace_id: str, scenario: Scenario, segment: str | None,
            plan_id: str | None = None) -> str:
    """The id of one cell (see the module doc). A plan counts by its content
    (`Scenario.plan_id`; `plan_id` gives it when known), not by the path it was read from."""
    from . import __version__
    if plan_id is None and scenario.plan is not None:
        plan_id = scenario.plan_id()
    sc = scenario.to_dict()
    sc["plan"] = plan_id
    key = {"trace": trace_id, "scenario": sc, "model": _model_config(scenario),
           "segment": segment, "uvmsim": __version__}
    blob = json.dumps(key, sort_keys=True, default=repr).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


# ---------------------------------------------------------------- one cell

def _worker_init(objects: dict[str, Trace]) -> None:
    _WORKER_TRACES.clear()
    _WORKER_TRACES.update(objects)


def _get_trace(task: dict[str, Any]) -> Trace:
    if task.get("trace_obj") is not None:
        return task["trace_obj"]
    # keyed by content id too: a trace rewritten in place is read again
    key = f"{task['trace_key']}@{task['trace_id']}@{task['drop']}"
    tr = _WORKER_TRACES.get(key) or _WORKER_TRACES.get(task["trace_key"])
    if tr is None:  # a path: each worker reads it once
        tr = load_trace(task["trace_key"], drop_out_of_range=task["drop"])
        _WORKER_TRACES[key] = tr
    return tr


def _run_cell(task: dict[str, Any]) -> dict[str, Any]:
    """Replay one cell; returns its row."""
    tr = _get_trace(task)
    sc = task["scenario"]
    r = simulate(tr, sc)
    row: dict[str, Any] = {"trace": task["label"], "trace_id": task["trace_id"],
                           "cell_id": task["cell_id"], "oversub": _factor(sc),
                           "prefetch": _policy_name(sc.prefetch),
                           "evict": _policy_name(sc.evict)}
    row.update(r.summary)
    row.update(r.extra)
    row["model"] = r.config["model"]
    row["hardware"] = r.config["hardware"]
    if "plan" in r.config:   # a prefetch plan (plan=...): its name and content id
        row["plan"] = f"{r.config['plan']['name']}:{r.config['plan']['id']}"
    row["compute_ns"] = float(r.kernels["compute_ns"].sum())
    seg = task["segment"]
    if seg is not None:
        k = r.kernels
        marks = np.flatnonzero(k["name"].astype(str).str.contains(seg, regex=False).to_numpy())
        tail = k.iloc[marks[-1] + 1:] if marks.size else k.iloc[0:0]
        row["segment_kernels"] = int(len(tail))
        for c in SEGMENT_COUNTS:
            row[f"iter_{c}"] = float(tail[c].sum()) if len(tail) else float("nan")
    row["scenario"] = sc.to_json()
    return row


def _factor(sc: Scenario) -> float:
    """The oversubscription factor of a scenario: 1 when it gives no capacity, NaN when it
    gives one in bytes or chunks."""
    if sc.oversub is not None:
        return float(sc.oversub)
    return 1.0 if sc.capacity_bytes is None and sc.capacity_chunks is None else float("nan")


# ---------------------------------------------------------------- the sweep

def _as_traces(trace: Any) -> list[tuple[str, str, Trace | None]]:
    """[(label, key, object or None)]: a path (key = the path) or a Trace (key = its id)."""
    if isinstance(trace, Mapping):
        items = list(trace.items())
    elif isinstance(trace, (Trace, str, os.PathLike)):
        items = [(None, trace)]
    else:
        items = [(None, t) for t in trace]
    out = []
    for label, t in items:
        if isinstance(t, Trace):
            key = f"trace:{trace_content_id(t)}"
            out.append((label or (t.path.name if t.path else key), key, t))
        else:
            p = str(Path(t))
            out.append((label or Path(p).name.removesuffix(".uvmtrace"), p, None))
    if not out:
        raise ConfigError("no trace to sweep")
    return out


def sweep(traces: Any, scenarios: Any = None, *, jobs: int | None = None,
          executor: Any = None, scheduler: str | None = None,
          out: str | os.PathLike | None = None, segment: str | None = None,
          progress: bool = True, drop_out_of_range: bool = False,
          **settings: Any) -> pd.DataFrame:
    """Replay every cell of traces × scenarios; one row per cell.

    `traces`: a .uvmtrace path, a Trace, a list of them or a {label: trace} dict.
    `scenarios`: a Scenario or a list of them (e.g. from `grid`); keyword `settings` then
    change every one (`Scenario.replace`). Without `scenarios` the keyword form builds the
    grid models × prefetch × evict × oversub: `oversub` (default 1, 1.5, 2, 3), `prefetch`
    (default none, 64k, 2m, density), `evict` (default lru2m) and `model` (a name, a Model
    or a list of them) are its axes; every other setting (translation=, thrashing=,
    hardware=, ...) is common to all cells.
    `executor`: "process" (default; `jobs` workers), "dask" (`scheduler` address, else a
    local cluster of `jobs` workers), a dask.distributed Client, or "serial". `out`: a
    directory made a resumable Parquet dataset (module doc). `segment`: a kernel-name
    substring marking iterations (e.g. "spin_kernel", see benchmarks/study/models.py); the
    kernels after its last occurrence give ``iter_*`` columns (one training step).
    (`backend=` and `client=` are the older names of `executor`.) A scenario's `plan` (a
    uvmsim.plans.Plan or a plan file) is keyed into the cell ids by its content, and the
    rows get a `plan` column, "name:content id".

    Columns: trace, trace_id, cell_id, oversub (NaN for a capacity in bytes or chunks),
    prefetch, evict, the summary counts, the extra counts, model, hardware, compute_ns,
    scenario (JSON) and `slowdown`: sim_time_ns over that of the same trace and scenario at
    factor 1. A sweep without that cell replays it too (written to `out` like any cell, but
    no row), so `slowdown` always means the same; the time over compute time is
    ``sim_time_ns / compute_ns``. With `segment`, ``iter_*`` columns and `iter_slowdown`
    (iter_sim_ns over factor 1's). Rows come in the caller's order: traces, then
    scenarios. ``df.attrs["computed"]`` and ``df.attrs["reused"]`` count the cells replayed
    now and read back from `out`, baseline cells included.
    """
    executor, client = _executor(executor, settings)
    scs = _scenarios(scenarios, settings)
    items = _as_traces(traces)
    ids = {key: (key.split(":", 1)[1] if obj is not None else trace_content_id(key))
           for _, key, obj in items}
    if segment is not None:
        _check_segment(items, segment)
    plan_ids = _plan_ids(scs)

    def cells(scenarios: list[Scenario]) -> list[dict[str, Any]]:
        return [{"label": label, "trace_key": key, "trace_obj": obj, "trace_id": ids[key],
                 "cell_id": cell_id(ids[key], sc, segment, plan_ids.get(sc.plan)),
                 "scenario": sc, "segment": segment, "drop": drop_out_of_range}
                for (label, key, obj), sc in itertools.product(items, scenarios)]
    tasks, baseline = cells(scs), cells(_baselines(scs))
    seen: dict[str, dict[str, Any]] = {}
    outdir = Path(out) if out is not None else None
    if outdir is not None:
        outdir.mkdir(parents=True, exist_ok=True)
        for t in tasks + baseline:
            f = outdir / f"cell-{t['cell_id']}.parquet"
            if f.exists() and t["cell_id"] not in seen:
                seen[t["cell_id"]] = pd.read_parquet(f).iloc[0].to_dict()
    todo, queued = [], set()
    for t in tasks + baseline:
        if t["cell_id"] not in seen and t["cell_id"] not in queued:
            queued.add(t["cell_id"])
            todo.append(t)
    reused = len({t["cell_id"] for t in tasks + baseline} & set(seen))

    def finished(row: dict[str, Any]) -> None:
        seen[row["cell_id"]] = row
        if outdir is not None:
            _write_cell(outdir, row)

    with _bar(len(queued) + reused, reused, progress) as bar:
        _execute(todo, executor, jobs, client, scheduler,
                 lambda row: (finished(row), bar.update()))
    rows = []
    for t in tasks + baseline:
        row = dict(seen[t["cell_id"]])
        row["trace"] = t["label"]  # the caller's label, also for cells read back
        rows.append(row)
    df = _add_slowdown(pd.DataFrame(rows)).iloc[:len(tasks)].copy()
    df.attrs["computed"] = len(todo)
    df.attrs["reused"] = reused
    return df


#: the axes of the keyword form of `sweep`, with their defaults
GRID_AXES = {"model": (None,), "prefetch": ("none", "64k", "2m", "density"),
             "evict": ("lru2m",), "oversub": (1.0, 1.5, 2.0, 3.0)}


def _scenarios(scenarios: Any, settings: dict[str, Any]) -> list[Scenario]:
    """The scenarios of a sweep: given (with `settings` applied) or the keyword grid."""
    if scenarios is None:
        axes = {k: _axis(settings.pop(k, d)) for k, d in GRID_AXES.items()}
        axes["model"] = [DEFAULT_MODEL if m is None else m for m in axes["model"]]
        if not all(axes.values()):
            raise ConfigError("empty sweep grid")
        return grid(Scenario.from_kwargs(**settings), **axes)
    scs = [scenarios] if isinstance(scenarios, (Scenario, Mapping)) else list(scenarios)
    if not scs:
        raise ConfigError("empty sweep: no scenario")
    axes = sorted(k for k in GRID_AXES if k in settings and _axis(settings[k]) != [settings[k]])
    if axes:
        raise ConfigError(f"{axes[0]}= is a list: an axis of the keyword grid; with "
                          "scenarios, give each its own (or build them with grid())")
    out = []
    for i, sc in enumerate(scs):
        if isinstance(sc, Mapping):
            sc = Scenario.from_dict(sc)
        if not isinstance(sc, Scenario):
            raise ConfigError(f"scenarios[{i}] is a {type(sc).__name__}, not a Scenario")
        out.append(sc.replace(**settings) if settings else sc)
    return out


def _baselines(scs: list[Scenario]) -> list[Scenario]:
    """The factor-1 scenario of each scenario whose factor-1 twin (the same scenario, no
    capacity given or factor 1) the sweep lacks: what `slowdown` divides by."""
    have = {_without_capacity(sc.to_json()) for sc in scs if _factor(sc) == 1.0}
    out: list[Scenario] = []
    for sc in scs:
        key = _without_capacity(sc.to_json())
        if key not in have:
            have.add(key)
            out.append(sc.replace(oversub=1.0))
    return out


def _plan_ids(scs: list[Scenario]) -> dict[Any, str]:
    """The content id of each plan of the scenarios, each read once (a file's content
    decides a cell's id, so a plan file rewritten in place is replayed again)."""
    out: dict[Any, str] = {}
    for sc in scs:
        if sc.plan is not None and sc.plan not in out:
            out[sc.plan] = sc.plan_id()
    return out


def _executor(executor: Any, settings: dict[str, Any]) -> tuple[str, Any]:
    """(kind, dask client or None) from `executor` and the older `backend=`/`client=`."""
    backend, client = settings.pop("backend", None), settings.pop("client", None)
    executor = executor or backend or ("dask" if client is not None else "process")
    if not isinstance(executor, str):
        executor, client = "dask", executor
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}: 'process', 'dask', 'serial' or a "
                          "dask Client")
    return executor, client


def _write_cell(outdir: Path, row: dict[str, Any]) -> None:
    # atomic: a reader sees the whole file or none, and a failed write leaves no partial file
    write_atomic(outdir / f"cell-{row['cell_id']}.parquet",
                 lambda tmp: pd.DataFrame([row]).to_parquet(tmp, index=False))


def read_results(out: str | os.PathLike) -> pd.DataFrame:
    """Every finished cell of a sweep dataset, with `slowdown` recomputed over them."""
    files = sorted(Path(out).glob("cell-*.parquet"))
    if not files:
        raise ConfigError(f"{out}: no finished sweep cells")
    return _add_slowdown(pd.concat([pd.read_parquet(f) for f in files], ignore_index=True))


def _add_slowdown(df: pd.DataFrame) -> pd.DataFrame:
    """`slowdown` (and `iter_slowdown`): each row's time over the factor-1 row of the same
    trace and scenario (of the same trace, model and policies in a dataset written before
    rows had their scenario); NaN where there is none (a dataset read back without it)."""
    if "scenario" in df.columns:  # the same trace and scenario at factor 1
        df["_base"] = [_without_capacity(s) for s in df["scenario"]]
        keys = ["trace", "_base"]
    else:  # a dataset written before scenarios had their column
        keys = [c for c in ("trace", "model", "prefetch", "evict") if c in df.columns]
    for col, out in (("sim_time_ns", "slowdown"), ("iter_sim_ns", "iter_slowdown")):
        if col not in df.columns:
            continue
        base = df[df["oversub"] == 1.0].groupby(keys, sort=False)[col].first()
        idx = [k if len(keys) > 1 else k[0] for k in zip(*(df[k] for k in keys))]
        ref = [base.get(k, float("nan")) for k in idx]
        df[out] = [t / r if r and r == r else float("nan") for t, r in zip(df[col], ref)]
    return df.drop(columns=["_base"], errors="ignore")


def _without_capacity(scenario_json: str) -> str:
    d = json.loads(scenario_json)
    for k in CAPACITY_FIELDS:
        d.pop(k, None)
    return json.dumps(d, sort_keys=True)


def _check_segment(traces: list[tuple[str, str, Trace | None]], segment: str) -> None:
    """A segment marker no kernel of a trace has would give all-NaN iter_* columns for it:
    refuse it before any cell runs, naming the trace."""
    import pyarrow.parquet as pq

    from .trace.format import KERNELS
    for label, key, obj in traces:
        if obj is not None:
            names = obj.kernels["name"].astype(str)
        else:
            try:
                names = pd.Series(pq.read_table(Path(key) / KERNELS, columns=["name"])
                                  .column("name").to_pylist(), dtype=object).astype(str)
            except (OSError, KeyError, ValueError) as e:
                raise ConfigError(f"{key}: cannot read its kernel names: {e}") from None
        if not names.str.contains(segment, regex=False).any():
            raise ConfigError(f"segment {segment!r}: no kernel of trace {label!r} has it in "
                              f"its name, so it has no iterations to measure")


def _bar(total: int, initial: int, enabled: bool):
    """A progress bar: a widget in a notebook kernel with ipywidgets, text elsewhere. In a
    kernel without ipywidgets tqdm.auto warns (TqdmWarning "IProgress not found") and falls
    back to text; the warning is not the user's concern, so it is silenced."""
    import warnings

    from tqdm import TqdmWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TqdmWarning)
        from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, desc="cells", unit="cell", disable=not enabled)


def _engine_key(task: dict[str, Any]) -> tuple:
    """What selects the compiled engine (and its signature) a cell runs on."""
    sc = task["scenario"]
    return (_policy_name(sc.prefetch), _policy_name(sc.evict), sc.translation is not None)


def waves(tasks: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The cells in two waves: the first cell of each engine, then the others. Workers run
    the first wave before any other cell, so each engine is compiled once, by one worker,
    and the rest load it from the disk cache; without it every worker compiles every engine
    it meets before the first copy is cached."""
    first, rest, seen = [], [], set()
    for t in tasks:
        k = _engine_key(t)
        (rest if k in seen else first).append(t)
        seen.add(k)
    return [w for w in (first, rest) if w]


def _execute(tasks, executor, jobs, client, scheduler, done) -> None:
    if not tasks:
        return
    n = jobs or min(len(tasks), os.cpu_count() or 1)
    if executor == "serial" or (executor == "process" and (n <= 1 or len(tasks) == 1)):
        for t in tasks:
            done(_run_cell(t))
        return
    if executor == "process":
        # Trace objects go to each worker once (initializer); paths are read there once
        objects = {t["trace_key"]: t["trace_obj"] for t in tasks if t["trace_obj"] is not None}
        with ProcessPoolExecutor(max_workers=n, initializer=_worker_init,
                                 initargs=(objects,)) as ex:
            for wave in waves(tasks):
                pending = {ex.submit(_run_cell, {**t, "trace_obj": None}) for t in wave}
                try:
                    while pending:
                        fin, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for f in fin:
                            done(f.result())
                except BaseException:
                    for f in pending:
                        f.cancel()
                    raise
        return
    try:
        from dask.distributed import Client, as_completed
    except ImportError:
        raise ConfigError("executor 'dask' needs the dask extra: pip install 'uvmsim[dask]'")
    own = client is None
    if own:
        client = Client(scheduler) if scheduler else Client(n_workers=jobs or None,
                                                           processes=True)
    try:
        for wave in waves(tasks):
            for f in as_completed([client.submit(_run_cell, t, pure=False) for t in wave]):
                done(f.result())
    finally:
        if own:
            client.close()
