"""Watching a policy at work: its hooks wrapped in Python that feed a model the same
events, compare the model's choice with the policy's at every call, and check the rules
every policy must keep. The wrapped policy runs in the reference model
(uvmsim.reference), which calls policy hooks from Python; a disagreement raises
PolicyMismatch at once, before the replay acts on the choice, with the step it happened
at and the events that led to it.
"""
from __future__ import annotations

import copy
import dataclasses
from collections import deque

import numpy as np

from ..engine.bits import to_positions
from ..engine.state import POP
from ..policies.base import EvictPolicy, PolicyContext, PrefetchPolicy, empty_state, no_hit
from .view import MemoryView, start_model


class PolicyMismatch(AssertionError):
    """A policy disagreed with its model, or broke a rule of the hooks. The message is the
    counterexample: the step, what the policy chose, what the model expected, the events
    before it and (from the check functions) the shrunk trace."""


def fresh_model(spec):
    """A new model for one replay: `spec` is None, a class (instantiated) or an object
    (deep-copied, so every replay starts from the state it was given in)."""
    if spec is None:
        return None
    if isinstance(spec, type):
        return spec()
    return copy.deepcopy(spec)


def model_label(spec) -> str:
    if spec is None:
        return "none"
    return spec.__name__ if isinstance(spec, type) else type(spec).__name__


# ------------------------------------------------------------------ descriptions
def describe_block(T, blk: int) -> str:
    """'block 3 (a1 pages 512..1023)': the allocation and its pages a block covers."""
    lo, hi = int(T.b_lo[blk]), int(T.b_hi[blk])
    a = int(T.b_alloc[blk])
    first = int(T.b_first_vpage[blk]) - int(T.a_first_page[a])
    return f"block {blk} (a{a} pages {first}..{first + hi - lo})"


def describe_tick(T, tick: int) -> str:
    """Where access row `tick` is: its kernel (ks: k_row_start) and place in it."""
    ks = T.k_row_start
    if ks.size <= 1 or tick >= int(ks[-1]):
        return f"tick {tick} (after the last kernel's rows)"
    k = int(np.searchsorted(ks, tick, side="right")) - 1
    return f"tick {tick} (kernel k{k}, its row {tick - int(ks[k])}, or an event just before)" \
        if tick == int(ks[k]) else f"tick {tick} (kernel k{k}, its row {tick - int(ks[k])})"


def describe_range(T, mem: MemoryView, answer) -> str:
    c, first, last = answer
    blk = mem.block_of(c) if 0 <= c < mem.n_chunks else -1
    if blk < 0:
        return f"chunk {c}, positions {first}..{last} (a chunk not in use)"
    lo, hi = mem.span(blk)
    res = sorted(p for p in mem.resident(blk) if max(first, lo) <= p <= min(last, hi))
    return (f"chunk {c}, positions {first}..{last} = {describe_block(T, blk)}, "
            f"{len(res)} resident page{'s' if len(res) != 1 else ''} there")


def describe_memory(T, mem: MemoryView) -> str:
    used = mem.in_use()
    if not used:
        return "  (no chunk in use)"
    out = []
    for c in used:
        blk = mem.block_of(c)
        extra = "" if mem.may_evict(c) else ", this eviction may not take it"
        out.append(f"  chunk {c}: {describe_block(T, blk)}, {len(mem.resident(blk))} "
                   f"resident{extra}")
    return "\n".join(out)


def _event_line(ev) -> str:
    kind, a = ev[0], ev[1:]
    if kind == "fill":
        c, blk, first, last, n_new, tick = a
        span = f"positions {first}..{last}" if n_new else "no new page"
        return f"fill    chunk {c} block {blk} {span} ({n_new} new) at tick {tick}"
    if kind == "hit":
        c, blk, pos, tick, count = a
        return f"hit     chunk {c} block {blk} position {pos} at tick {tick} (count {count})"
    if kind == "release":
        return f"release chunk {a[0]} block {a[1]}"
    c, first, last, tick = a
    return f"victim  chunk {c} positions {first}..{last} at tick {tick}"


# ------------------------------------------------------------------ victims
def _answers(want) -> list[tuple[int, int, int]]:
    """A model's victim answer as a list of (chunk, first, last) alternatives."""
    if isinstance(want, (set, frozenset)):
        return [x for w in want for x in _answers(w)]
    if isinstance(want, (int, np.integer)):
        return [(int(want), 0, 511)]
    c, first, last = want
    return [(int(c), int(first), int(last))]


def _effect(mem: MemoryView, answer) -> tuple[int, tuple[int, ...]] | None:
    """What an answer evicts: (chunk, its resident positions in the range)."""
    c, first, last = answer
    if not 0 <= c < mem.n_chunks or mem.block_of(c) < 0:
        return None
    blk = mem.block_of(c)
    lo, hi = mem.span(blk)
    return c, tuple(sorted(p for p in mem.resident(blk)
                           if max(first, lo) <= p <= min(last, hi)))


def victim_problem(mem: MemoryView, got) -> str | None:
    """The rule of the victim hook a named range breaks, None when it keeps them all."""
    c = got[0]
    if not 0 <= c < mem.n_chunks:
        return f"named chunk {c}, which does not exist (chunks 0..{mem.n_chunks - 1})"
    if mem.block_of(c) < 0:
        return f"named chunk {c}, which is not in use"
    if not mem.may_evict(c):
        return f"named chunk {c}, which this eviction may not take (may_evict)"
    if not _effect(mem, got)[1]:
        return f"named positions {got[1]}..{got[2]} of chunk {c}, which hold no resident page"
    return None


def _reference_only(policy):
    """Mark the watching wrappers (plain Python, called by the reference model only), so
    that looking the policy up does not refuse them as hooks someone forgot to compile
    (uvmsim.policies.base.check_hooks)."""
    for hook in type(policy).HOOKS:
        fn = getattr(policy, hook, None)
        if fn is not None and not hasattr(fn, "py_func"):
            fn.reference_only = True
    return policy


class EvictWatch:
    """An eviction policy's hooks wrapped to feed `model` (None: only the rules are
    checked) and compare victims. `wrapped()` is the policy to replay with; each replay
    (each call of its init) starts a fresh model and history."""

    def __init__(self, policy: EvictPolicy, model=None, *, history: int = 12) -> None:
        self.policy = policy
        self.model_spec = model
        self.model = None
        self.history: deque = deque(maxlen=history)
        self.victims = 0          # victim calls checked, over every replay

    def begin(self, ctx: PolicyContext) -> None:
        self.model = fresh_model(self.model_spec)
        if self.model is not None:
            start_model(self.model, ctx)
        self.history.clear()

    def _model_call(self, what: str, fn, *args):
        try:
            return fn(*args)
        except PolicyMismatch:
            raise
        except Exception as e:  # a model failing is a disagreement too: say where
            raise PolicyMismatch(
                f"model {model_label(self.model_spec)} raised {e!r} in {what}{args[:6]}\n"
                f"events before it (latest last):\n{self.recent()}") from e

    def recent(self) -> str:
        return "\n".join("  " + _event_line(e) for e in self.history) or "  (none)"

    def wrapped(self) -> EvictPolicy:
        p = self.policy
        init0 = p.init or empty_state
        hit0 = p.on_hit if p.on_hit is not no_hit else None

        def init(ctx):
            st = init0(ctx)
            self.begin(ctx)
            return st

        def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
            p.on_fill(st, S, T, chunk, blk, first, last, n_new, tick)
            a = (int(chunk), int(blk), int(first), int(last), int(n_new), int(tick))
            if self.model is not None:
                self._model_call("fill", self.model.fill, *a, MemoryView(S, T))
            self.history.append(("fill", *a))

        def on_hit(st, S, T, chunk, blk, pos, tick):
            if hit0 is not None:
                hit0(st, S, T, chunk, blk, pos, tick)
            a = (int(chunk), int(blk), int(pos), int(tick), int(T.row_count[tick]))
            if self.model is not None:
                self._model_call("hit", self.model.hit, *a)
            self.history.append(("hit", *a))

        def on_release(st, S, T, chunk, blk):
            p.on_release(st, S, T, chunk, blk)
            if self.model is not None:
                self._model_call("release", self.model.release, int(chunk), int(blk))
            self.history.append(("release", int(chunk), int(blk)))

        def victim(st, S, T, tick):
            p.victim(st, S, T, tick)
            got = (int(S.victim[0]), int(S.victim[1]), int(S.victim[2]))
            self.check_victim(S, T, int(tick), got)
            self.history.append(("victim", *got, int(tick)))

        return _reference_only(dataclasses.replace(p, init=init, on_fill=on_fill,
                                                   on_hit=on_hit, on_release=on_release,
                                                   victim=victim))

    def check_victim(self, S, T, tick: int, got) -> None:
        mem = MemoryView(S, T)
        problem = victim_problem(mem, got)
        head = f"eviction policy {self.policy.name!r}"
        self.victims += 1
        if problem is not None:
            raise PolicyMismatch(
                f"{head} broke the victim rule at {describe_tick(T, tick)}: {problem}\n"
                f"chunks in use:\n{describe_memory(T, mem)}\n"
                f"events before it (latest last):\n{self.recent()}")
        if self.model is None:
            return
        want = self._model_call("victim", self.model.victim, mem, tick)
        alts = _answers(want)
        if _effect(mem, got) in {_effect(mem, a) for a in alts}:
            return
        expected = "\n    or ".join(describe_range(T, mem, a) for a in alts) or "(nothing)"
        raise PolicyMismatch(
            f"{head} disagrees with model {model_label(self.model_spec)} at "
            f"{describe_tick(T, tick)}:\n"
            f"  policy's victim: {describe_range(T, mem, got)}\n"
            f"  model's victim:  {expected}\n"
            f"chunks in use:\n{describe_memory(T, mem)}\n"
            f"events before it (latest last):\n{self.recent()}")


class PrefetchWatch:
    """A prefetch policy's hook wrapped to compare its prefetch set with `model`'s (None:
    only the rules) at every block serviced; `evict_watch(ev)` wraps the eviction policy of
    the same replay to check that each serviced block then gained exactly its faulted and
    prefetched pages. `htod_prefetch` is the prefetch traffic the replay must count."""

    def __init__(self, policy: PrefetchPolicy, model=None) -> None:
        self.policy = policy
        self.model_spec = model
        self.model = None
        self.calls = 0
        self.pending: dict[int, tuple] = {}
        self.htod_prefetch = 0

    def wrapped(self) -> PrefetchPolicy:
        p = self.policy
        init0 = p.init or empty_state

        def init(ctx):
            st = init0(ctx)
            self.model = fresh_model(self.model_spec)
            if self.model is not None:
                start_model(self.model, ctx)
            self.pending.clear()
            self.htod_prefetch = 0
            return st

        def prefetch(st, S, T, blk, lo, hi):
            F = frozenset(int(x) for x in to_positions(S.fbits))
            R = frozenset(int(x) for x in to_positions(S.rbits))
            p.prefetch(st, S, T, blk, lo, hi)
            self.check(S, T, int(blk), int(lo), int(hi), F, R,
                       frozenset(int(x) for x in to_positions(S.pbits)))

        return _reference_only(dataclasses.replace(p, init=init, prefetch=prefetch))

    def check(self, S, T, blk, lo, hi, F, R, raw) -> None:
        got = frozenset(x for x in raw if lo <= x <= hi) - F - R
        mem = MemoryView(S, T)
        p0 = int(T.b_page0[blk]) - lo
        self.htod_prefetch += 4096 * sum(1 for x in got if S.pstate[p0 + x] & POP)
        self.pending[blk] = (F, got, R)
        self.calls += 1
        if self.model is None:
            return
        try:
            want_raw = self.model.prefetch(blk, F, R, lo, hi, mem)
        except Exception as e:
            raise PolicyMismatch(f"model {model_label(self.model_spec)} raised {e!r} for "
                                 f"{describe_block(T, blk)}") from e
        want = frozenset(int(x) for x in want_raw if lo <= x <= hi) - F - R
        if got == want:
            return
        raise PolicyMismatch(
            f"prefetch policy {self.policy.name!r} disagrees with model "
            f"{model_label(self.model_spec)} on {describe_block(T, blk)} (in(K) = positions "
            f"{lo}..{hi}):\n"
            f"  faulted:  {_runs(F)}\n  resident: {_runs(R)}\n"
            f"  policy prefetches: {_runs(got)}\n  model prefetches:  {_runs(want)}\n"
            f"  only the policy: {_runs(got - want)}; only the model: {_runs(want - got)}")

    def evict_watch(self, ev: EvictPolicy) -> EvictPolicy:
        """`ev` with an on_fill that checks the block just serviced gained exactly F ∪ P."""
        fill0 = ev.on_fill

        def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
            fill0(st, S, T, chunk, blk, first, last, n_new, tick)
            job = self.pending.pop(int(blk), None)
            if job is None:
                return
            F, P, R = job
            want = sorted((F | P) - R)
            got = (int(n_new), int(first), int(last))
            exp = (len(want), want[0] if want else -1, want[-1] if want else -1)
            if got != exp or not all(MemoryView(S, T).is_resident(int(blk), x) for x in want):
                raise PolicyMismatch(
                    f"servicing {describe_block(T, int(blk))} made {n_new} page(s) resident in "
                    f"positions {first}..{last}; the faulted {_runs(F)} and prefetched "
                    f"{_runs(P)} positions not resident before are {len(want)}: "
                    f"{_runs(frozenset(want))}")

        return _reference_only(dataclasses.replace(ev, on_fill=on_fill))


def _runs(positions) -> str:
    """Positions as compact runs: '{0..15, 20, 32..47}'."""
    xs = sorted(positions)
    if not xs:
        return "{}"
    out, a, b = [], xs[0], xs[0]
    for x in xs[1:]:
        if x == b + 1:
            b = x
            continue
        out.append(f"{a}..{b}" if b > a else f"{a}")
        a = b = x
    out.append(f"{a}..{b}" if b > a else f"{a}")
    return "{" + ", ".join(out) + "}"
