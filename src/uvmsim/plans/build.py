"""`build(trace, predictor)`: call a predictor written in plain Python once per kernel, with
only the history so far, and collect its answers into a Plan.

Feedback is online, at kernel boundaries: the fast engine replays the trace one span of
events at a time (`replay_span`, as a streamed replay does), and before kernel k the build
stops, shows the predictor the history (what kernels 0..k-1 touched, the pages they missed,
their counts), then runs the predictor's entries for kernel k as prefetch events on the same
engine state and lets kernel k run. The hot loop stays compiled; only the boundary is Python.
The plan it returns replays, under the same settings, to exactly the counts the build's own
replay reached (`Plan.result`; tests/test_plans.py holds the two equal).

A predictor is any callable `predictor(history) -> prediction`, with optional attributes:
`name`, `params` (a dict, for provenance), `feedback` (default True; False skips the replay,
and `history.missed`/`counts` then raise), `sees_future` (default False; True only for
oracles, which `build` refuses unless `allow_future=True`), and a method `start(history)`
called once before kernel 0 (reset state there). A prediction is None, an array of virtual
pages to prefetch to the GPU in that order, or `Prefetch(gpu=..., cpu=...)`: the `cpu` pages
are pushed back to the host first, then the `gpu` pages are prefetched, each list in its
order (runs of consecutive pages become one entry each).
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..engine.state import engine_trace
from ..errors import ConfigError
from ..trace.format import ARG_CPU, ARG_GPU, OP_ALLOC, OP_FREE, OP_PREFETCH
from ..trace.model import Trace
from ..trace.plan_apply import Layout, clip_all, drop_untouched, layout
from .history import History, _Source
from ..trace.plan import PAGE_LIMIT, Plan


@dataclass(frozen=True)
class Prefetch:
    """A prediction: pages to push back to the host (`cpu`, applied first) and pages to
    prefetch to the GPU (`gpu`), each an array-like of virtual page numbers in the order
    to apply them."""

    gpu: Any = ()
    cpu: Any = ()


def _pages(x: Any, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise ConfigError(f"{what}: expected a 1-D array of integer page numbers, got "
                          f"{a.dtype} with shape {a.shape}")
    if a.dtype == np.uint64 and a.max() >= np.uint64(PAGE_LIMIT):
        raise ConfigError(f"{what}: page {int(a.max()):#x} is beyond 2**50 pages")
    a = a.astype(np.int64, copy=False)
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= PAGE_LIMIT:
        raise ConfigError(f"{what}: page {lo if lo < 0 else hi} is not a page number "
                          "(0 <= page < 2**50)")
    return a


def _runs(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of consecutive pages, in the array's order: (first page, length) each."""
    if p.size == 0:
        return p, p
    cut = np.flatnonzero(np.diff(p) != 1) + 1
    starts = np.concatenate([[0], cut])
    lens = np.diff(np.concatenate([starts, [p.size]]))
    return p[starts], lens.astype(np.int64)


def entries(pred: Any, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A prediction as entries: (first page, n_pages, to code), in the order to apply."""
    if pred is None:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, np.int8)
    if isinstance(pred, Prefetch):
        c0, cn = _runs(_pages(pred.cpu, f"{what} (cpu)"))
        g0, gn = _runs(_pages(pred.gpu, f"{what} (gpu)"))
        return (np.concatenate([c0, g0]), np.concatenate([cn, gn]),
                np.concatenate([np.full(c0.size, ARG_CPU, np.int8),
                                np.full(g0.size, ARG_GPU, np.int8)]))
    if isinstance(pred, (np.ndarray, list, tuple, range)):
        g0, gn = _runs(_pages(pred, what))
        return g0, gn, np.full(g0.size, ARG_GPU, np.int8)
    raise ConfigError(f"{what}: a prediction is None, an array of pages or "
                      f"uvmsim.plans.Prefetch, got {type(pred).__name__}")


class _EventBuffer:
    """Trace arrays whose events are one kernel's plan entries, sharing every other array
    with the replay's, so the engine runs them on the same state (grown as needed)."""

    def __init__(self, T) -> None:
        self.T = T
        self.cap_ev = self.cap_seg = 0
        self.et = None

    def load(self, to: np.ndarray, s_start: np.ndarray, s_alloc, s_first, s_last):
        m, ns = to.size, s_alloc.size
        if m > self.cap_ev or ns > self.cap_seg:
            self.cap_ev = max(m, 2 * self.cap_ev, 16)
            self.cap_seg = max(ns, 2 * self.cap_seg, 16)
            c, cs = self.cap_ev, self.cap_seg
            self.A = self.T._replace(
                ev_op=np.full(c, OP_PREFETCH, np.int8), ev_alloc=np.full(c, -1, np.int64),
                ev_kernel=np.full(c, -1, np.int64), ev_arg=np.zeros(c, np.int8),
                ev_seg_start=np.zeros(c + 1, np.int64), seg_alloc=np.zeros(cs, np.int64),
                seg_first=np.zeros(cs, np.int64), seg_last=np.zeros(cs, np.int64))
            self.et = engine_trace(self.A)
        A = self.A
        A.ev_arg[:m] = to
        A.ev_seg_start[:m + 1] = s_start
        A.seg_alloc[:ns] = s_alloc
        A.seg_first[:ns] = s_first
        A.seg_last[:ns] = s_last
        return self.et


def build(trace: Trace | str | os.PathLike, predictor: Callable[[History], Any], *,
          allow_future: bool = False, progress: bool = False, replay: bool = True,
          **settings: Any) -> Plan:
    """Build a plan by calling `predictor` before each kernel (module doc).

    `settings` are `simulate`'s (oversub, capacity_chunks, prefetch, evict, model, ...):
    the replay that gives the predictor feedback runs under them, and `Plan.result` is
    its Result. For a predictor without feedback the finished plan is replayed once under
    them for `Plan.result` (`replay=False` skips that: result None). A plan built under
    some settings may be replayed under others (another factor, another trace with the
    same kernel ids); its feedback was then another run's. `progress` shows a bar.

    Of each prediction, pages outside the allocations live at the launch and pages in
    2 MiB blocks the trace never touches (no access row, no range event reaches them)
    are dropped; what is left is recorded, in the prediction's order.
    """
    from ..simulate import _as_trace, prepare
    trace = _as_trace(trace)
    name = str(getattr(predictor, "name", getattr(predictor, "__name__",
                                                  type(predictor).__name__)))
    sees_future = bool(getattr(predictor, "sees_future", False))
    if sees_future and not allow_future:
        raise ConfigError(f"predictor {name!r} sees the future (sees_future = True): its plan "
                          "is a reference point, not a prediction; pass allow_future=True "
                          "(uvmsim plan --allow-future) to build it")
    feedback = bool(getattr(predictor, "feedback", True))
    if trace.rows is not None:
        raise ConfigError("build a plan from a trace in memory (load it without stream=True)")
    if settings.pop("plan", None) is not None:
        raise ConfigError("build takes no plan= (it makes one)")
    if settings.get("translation") not in (None, False):
        raise ConfigError("build replays without translation (the clocked replay has no "
                          "kernel boundaries to stop at); replay the plan with it")
    t0 = time.perf_counter()
    run = prepare(trace, **settings)
    T, S = run.arrays, run.state
    L = layout(trace)
    src = _Source(trace, L, run.capacity)
    src.feedback = feedback
    src.counts = S.counts        # a kernel's row is final once it has run
    n_k = trace.n_kernels
    ks = T.k_row_start
    # alloc/free events, to know the live allocations at each launch
    af = np.flatnonzero((T.ev_op == OP_ALLOC) | (T.ev_op == OP_FREE))
    af_end = np.searchsorted(af, L.k_event)   # af[:af_end[k]] happen before kernel k
    live = np.zeros(T.a_host.size, np.uint8)
    a_done = 0
    online = _Online(run, L, src) if feedback else None
    got: list[tuple] = []
    start = getattr(predictor, "start", None)
    bar = _bar(n_k, progress, name)
    for k in range(n_k):
        if online is not None:
            online.to_launch(k)
        for j in af[a_done:af_end[k]]:
            live[T.ev_alloc[j]] = T.ev_op[j] == OP_ALLOC
        a_done = af_end[k]
        h = History(src, k, sees_future and allow_future, live.copy())
        if k == 0 and callable(start):
            start(h)
        e = entries(predictor(h), f"predictor {name!r} before kernel {k}")
        if e[0].size:
            if online is not None:
                e = online.prefetch(k, live, e)
            if e[0].size:
                got.append((np.full(e[0].size, k, np.int64),) + e)
        bar.update()
    bar.close()
    if got:
        rank, page, n, to = (np.concatenate(c) for c in zip(*got))
    else:
        rank, page, n, to = (np.zeros(0, np.int64),) * 3 + (np.zeros(0, np.int8),)
    result = None
    if online is not None:
        result = online.finish()
    else:
        rank, page, n, to = _clip_offline(T, L, rank, page, n, to)
    build_s = time.perf_counter() - t0
    # each kernel's entries in the order given: 0, 1, ... (ranks are ascending)
    per_k = np.bincount(rank, minlength=n_k)
    order = np.arange(rank.size, dtype=np.int64) - np.repeat(np.cumsum(per_k) - per_k, per_k)
    meta = {"predictor": name, "params": _jsonable(getattr(predictor, "params", {})),
            "sees_future": sees_future, "feedback": feedback,
            "built_on": str(trace.path) if trace.path else None,
            "settings": _jsonable({k: v for k, v in settings.items() if v is not None})}
    plan = Plan(src.kernel_ids[rank], page, n, to.astype(np.int8), order, meta,
                result=result, build_s=build_s)
    if result is not None:
        result.config["plan"] = plan.summary()
    elif replay:
        from ..simulate import simulate
        plan = dataclasses.replace(plan, result=simulate(trace, plan=plan, **settings))
    return plan


def _clip_offline(T, L: Layout, rank, page, n, to):
    """Entries of a build without replay, clipped all at once (as `with_plan` clips) and
    less their pages in blocks without state."""
    if rank.size == 0:
        return rank, page, n, to
    p_start, s_alloc, vfirst, vlast = clip_all(T, L, rank, page, n)
    cut = drop_untouched(L, (page, n, to, rank), p_start, s_alloc, vfirst, vlast)
    if cut is None:
        return rank, page, n, to
    page, n, to, rank = cut
    return rank, page, n, to


class _Online:
    """The build's replay, stopped at each launch (module doc)."""

    def __init__(self, run, L: Layout, src: _Source) -> None:
        from ..engine.build import engine_for
        self.run, self.L, self.src = run, L, src
        self.T, self.S = run.arrays, run.state
        self.eng = engine_for(run.pf, run.ev)
        self.et = engine_trace(self.T)
        self.buf = _EventBuffer(self.T)
        self.e_next = 0
        self.tick = 0
        self.bs = run.fault_batch_size

    def _span(self, e1: int) -> None:
        r = self.run
        self.eng.replay_span(r.pst, r.est, self.S, self.et, self.bs, np.int64(self.e_next),
                             np.int64(e1), np.int64(self.tick))
        self.e_next = e1

    def to_launch(self, k: int) -> None:
        """Replay up to kernel k's event and note which of its pages are not resident."""
        self._span(int(self.L.k_event[k]))
        self.tick = int(self.T.k_row_start[k])
        self.src.note_missed(k, self.S.pstate)

    def prefetch(self, k: int, live: np.ndarray, e: tuple) -> tuple:
        """Run kernel k's entries on the replay's state; returns them as kept."""
        L, T = self.L, self.T
        page, n, to = e
        p_start, s_alloc, vfirst, vlast = L.clip_live(live, page, n)
        cut = drop_untouched(L, e, p_start, s_alloc, vfirst, vlast)
        if cut is not None:
            page, n, to = e = cut
            if page.size == 0:
                return e
            p_start, s_alloc, vfirst, vlast = L.clip_live(live, page, n)
        _, bf, bl = L.locate(s_alloc, vfirst, vlast)
        et = self.buf.load(to, p_start, s_alloc, L.dense(T, bf, vfirst), L.dense(T, bl, vlast))
        r = self.run
        self.eng.replay_span(r.pst, r.est, self.S, et, self.bs, np.int64(0),
                             np.int64(page.size), np.int64(self.tick))
        return e

    def finish(self):
        self._span(int(self.T.ev_op.size))
        return self.run.result()


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, sort_keys=True, default=lambda o: getattr(o, "name",
                                                                                str(o))))


class _NoBar:
    def update(self) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, enabled: bool, name: str):
    if not enabled:   # tqdm.auto is not even imported (in Jupyter it may warn on import)
        return _NoBar()
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=f"plan {name}", unit="kernel")
