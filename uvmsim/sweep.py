"""Sweeps: one trace over policies and oversubscription factors, as a table.

The default backend is a local process pool (one replay per task, the trace loaded once per
worker); `backend="dask"` sends tasks to a dask.distributed cluster for sweeps beyond one
machine; `backend="serial"` runs in this process.
"""
from __future__ import annotations

import itertools
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from .errors import ConfigError
from .simulate import simulate
from .trace import Trace, load_trace

_WORKER_TRACE: dict[str, Trace] = {}


def _worker_init(path: str | None, drop: bool, trace: Trace | None) -> None:
    # each worker reads (or unpickles) the trace once, not once per task
    _WORKER_TRACE["trace"] = trace if trace is not None else load_trace(
        path, drop_out_of_range=drop)


def _run_one(path: str | None, trace: Trace | None, point: dict[str, Any],
             common: dict[str, Any]) -> dict[str, Any]:
    if trace is None:
        trace = _WORKER_TRACE.get("trace") or load_trace(path)
    r = simulate(trace, **point, **common)
    row = dict(point)
    row.update(r.summary)
    row.update(r.extra)
    row["model"] = r.config["model"]
    row["hardware"] = r.config["hardware"]
    row["compute_ns"] = float(r.kernels["compute_ns"].sum())
    return row


def grid(*, oversub: Iterable[float] = (1.0,), prefetch: Iterable[Any] = ("density",),
         evict: Iterable[Any] = ("lru2m",)) -> list[dict[str, Any]]:
    """All (prefetch, evict, oversub) combinations, in a stable order."""
    return [dict(prefetch=p, evict=e, oversub=float(f))
            for p, e, f in itertools.product(prefetch, evict, oversub)]


def sweep(trace: Trace | str | os.PathLike, *, oversub: Sequence[float] = (1.0, 1.5, 2.0, 3.0),
          prefetch: Sequence[Any] = ("none", "64k", "2m", "density"),
          evict: Sequence[Any] = ("lru2m",), model: Any = None, hardware: Any = None,
          fault_batch_size: int | None = None, jobs: int | None = None,
          backend: str = "process",
          progress: bool = True, drop_out_of_range: bool = False,
          client: Any = None, **options: Any) -> pd.DataFrame:
    """Replay `trace` at every grid point; one row per point with the summary counts,
    `sim_time_ns`, `compute_ns` (sum of kernel durations) and `slowdown` (sim_time over the
    same policies at factor 1 when the grid has it, else over compute time). `model` (a
    name in uvmsim.config.MODELS or a Model) and the other keyword arguments
    (translation=, thrashing=, slices=, ...) go to every `simulate` call."""
    points = grid(oversub=oversub, prefetch=prefetch, evict=evict)
    if not points:
        raise ConfigError("empty sweep grid")
    from .config import get_model
    get_model(model)  # an unknown preset fails here, once, not in every worker
    common = dict(model=model, hardware=hardware, fault_batch_size=fault_batch_size, **options)
    path = None
    tr: Trace | None = None
    if isinstance(trace, Trace):
        tr = trace
    else:
        path = str(Path(trace))
        if backend == "serial" or (backend == "process" and jobs == 1) or len(points) == 1:
            tr = load_trace(path, drop_out_of_range=drop_out_of_range)
    rows = _execute(points, path, tr, common, jobs, backend, progress, drop_out_of_range,
                    client)
    df = pd.DataFrame(rows)
    df["prefetch"] = df["prefetch"].map(_policy_name)
    df["evict"] = df["evict"].map(_policy_name)
    # keep the caller's order of policies (tasks finish in any order)
    order = {(_policy_name(p["prefetch"]), _policy_name(p["evict"]), p["oversub"]): i
             for i, p in enumerate(points)}
    df["_i"] = [order[k] for k in zip(df["prefetch"], df["evict"], df["oversub"])]
    df = df.sort_values("_i").drop(columns="_i").reset_index(drop=True)
    return _add_slowdown(df)


def _policy_name(p: Any) -> str:
    return p if isinstance(p, str) else getattr(p, "name", str(p))


def _add_slowdown(df: pd.DataFrame) -> pd.DataFrame:
    base = df[df["oversub"] == 1.0].set_index(["prefetch", "evict"])["sim_time_ns"]
    key = list(zip(df["prefetch"], df["evict"]))
    if len(base):
        ref = [base.get(k, float("nan")) for k in key]
    else:
        ref = df["compute_ns"].tolist()
    df["slowdown"] = [t / r if r and r == r else float("nan")
                      for t, r in zip(df["sim_time_ns"], ref)]
    return df


def _bar(total: int, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc="replays", unit="replay", disable=not enabled)


def _execute(points, path, tr, common, jobs, backend, progress, drop, client):
    rows: list[dict[str, Any]] = []
    n = jobs or min(len(points), os.cpu_count() or 1)
    if backend == "serial" or (backend == "process" and n <= 1):
        if tr is None:
            tr = load_trace(path, drop_out_of_range=drop)
        with _bar(len(points), progress) as bar:
            for p in points:
                rows.append(_run_one(path, tr, p, common))
                bar.update()
        return rows
    if backend == "process":
        with ProcessPoolExecutor(max_workers=n, initializer=_worker_init,
                                 initargs=(path, drop, tr)) as ex, _bar(len(points), progress) as bar:
            futs = [ex.submit(_run_one, path, None, p, common) for p in points]
            for f in as_completed(futs):
                rows.append(f.result())
                bar.update()
        return rows
    if backend == "dask":
        try:
            from dask.distributed import Client, as_completed as das_completed
        except ImportError:
            raise ConfigError("backend='dask' needs the dask extra: pip install 'uvmsim[dask]'")
        own = client is None
        client = client or Client(n_workers=jobs or None, processes=True)
        try:
            futs = [client.submit(_run_one, path, tr, p, common, pure=False) for p in points]
            with _bar(len(points), progress) as bar:
                for f in das_completed(futs):
                    rows.append(f.result())
                    bar.update()
        finally:
            if own:
                client.close()
        return rows
    raise ConfigError(f"unknown backend {backend!r}: 'process', 'dask' or 'serial'")
