"""check_eviction_policy and check_prefetch_policy: the project's property and stateful tests,
run on any policy.

Each check replays generated programs (uvmsim.testing.strategies) through the reference
model with the policy's hooks watched (uvmsim.testing.watch): every choice is compared with
the model's as it is made and checked against the hooks' rules; the compiled engine must
then give the same counts. The eviction check also runs the stateful machine
(uvmsim.testing.machine). A failure raises PolicyMismatch whose message is the shrunk
counterexample.
"""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, settings as hsettings, strategies as st, target
from hypothesis.stateful import run_state_machine_as_test

from .. import reference
from ..engine.arrays import engine_arrays
from ..policies import EVICT, PREFETCH, get_evict, get_prefetch
from ..simulate import simulate
from .evict_models import EVICT_MODELS
from .machine import eviction_machine
from .prefetch_models import PREFETCH_MODELS
from .strategies import POLICY_OPS, programs, replays
from .watch import EvictWatch, PolicyMismatch, PrefetchWatch, model_label

#: Hypothesis settings of the checks by name: "fast" (the default) takes seconds per policy
#: once its engine is compiled; "slow" explores ten times deeper. Both draw fresh examples
#: on every run (pass settings=... with derandomize=True for the same ones every time).
PROFILES = {
    "fast": dict(max_examples=30, stateful_step_count=20),
    "slow": dict(max_examples=300, stateful_step_count=50),
}


def check_settings(profile: str = "fast", max_examples: int | None = None) -> hsettings:
    """The hypothesis settings of a profile (PROFILES), `max_examples` overriding its count.
    No example database (a check leaves no files behind) and no explain phase (the
    counterexample says what went wrong; explaining replays it many more times)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
    p = dict(PROFILES[profile])
    if max_examples is not None:
        p["max_examples"] = int(max_examples)
    return hsettings(deadline=None, database=None, report_multiple_bugs=False,
                     suppress_health_check=list(HealthCheck),
                     phases=[ph for ph in Phase if ph.name != "explain"], **p)


@dataclass
class CheckReport:
    """What a check looked at (it raised if anything disagreed)."""

    policy: str
    model: str
    replays: int = 0            # generated programs replayed by the reference model
    engine_replays: int = 0     # of those, also replayed by the compiled engine
    compared: int = 0           # victims (or prefetch sets) compared with the model
    machine_examples: int = 0   # runs of the stateful machine (eviction only)


def _resolve_model(policy, model, shipped: dict, registry: dict, methods: tuple[str, ...]):
    """The model to compare with: a shipped one by name, the user's object or class, or
    for a shipped policy given without one, its own."""
    if model is None:
        if registry.get(policy.name) is policy and policy.name in shipped:
            return shipped[policy.name]
        return None
    if isinstance(model, str):
        if model not in shipped:
            raise ValueError(f"no shipped model {model!r}; shipped: {', '.join(sorted(shipped))}")
        return shipped[model]
    missing = [m for m in methods if not callable(getattr(model, m, None))]
    if missing:
        raise TypeError(f"model {model_label(model)} lacks the method(s) {', '.join(missing)} "
                        f"(uvmsim.testing.EvictionModel / PrefetchModel)")
    return model


def _programs(max_ops: int):
    return programs(min_allocs=2, max_allocs=3, min_ops=3, max_ops=max_ops, v11=True,
                    ops=POLICY_OPS)


def _short(kw: dict, trace) -> int:
    """The drawn capacity, but below the number of GPU blocks the trace touches whenever it
    touches two or more, so that nearly every example evicts."""
    T = engine_arrays(trace)
    touched = int((~T.a_host[T.b_alloc]).sum()) if T.b_alloc.size else 0
    return max(1, min(kw["capacity_chunks"], touched - 1))


def _counterexample(e: PolicyMismatch, program, kw: dict) -> PolicyMismatch:
    args = ", ".join(f"{k}={v!r}" for k, v in kw.items() if k != "evict")
    return PolicyMismatch(
        f"{e}\n\nreplayed with simulate({args}) of this trace (shrunk):\n"
        f"{textwrap.indent(program.table(), '  ')}\n"
        f"as TraceBuilder code:\n{textwrap.indent(program.code(), '  ')}")


def _differences(a, b) -> list[str]:
    out = []
    for k, v in (*a.summary.items(), *a.extra.items()):
        w = b.summary[k] if k in b.summary else b.extra[k]
        same = math.isclose(v, w, rel_tol=1e-9, abs_tol=1e-6) if isinstance(v, float) else v == w
        if not same:
            out.append(f"{k}: engine {v}, reference {w}")
    return out


def _engine_agrees(trace, res, kw: dict, what: str) -> None:
    eng = simulate(trace, **kw)
    diff = _differences(eng, res)
    if diff:
        raise PolicyMismatch(f"{what}: the compiled engine and the reference model (the "
                             f"policy's hooks called from Python) count differently: "
                             + "; ".join(diff))


def check_eviction_policy(policy, model=None, *, max_examples: int | None = None,
                          profile: str = "fast", settings: hsettings | None = None,
                          prefetch=("none", "64k", "density"), stateful: bool = True,
                          engine: bool = True, max_ops: int = 10) -> CheckReport:
    """Check an eviction policy (a registered name, a 'module:object' path or an
    EvictPolicy) on generated programs; raise PolicyMismatch with a shrunk counterexample
    if it breaks a rule or disagrees with `model`.

    `model`: a plain-Python statement of the policy's order (uvmsim.testing.EvictionModel:
    `fill`, `hit`, `release`, `victim`; a class or an object), or the name of a shipped
    one (EVICT_MODELS). A shipped policy given without one is checked against its own;
    another without one is checked against the rules only (every victim in use, allowed and
    holding a resident page; memory and byte accounting), which cannot see an order bug.

    Each example replays a program (allocations, frees, kernels that fault and re-touch,
    copies, memsets, prefetches to the GPU and back, host accesses, read-mostly hints) at a
    random capacity, batch size, prefetch policy (one of `prefetch`) and seed, in the
    reference model with the victims compared as they are made; the first `prefetch` policy's
    examples are also replayed by the compiled engine (`engine`), which must count the same.
    `stateful` also runs the stateful machine (uvmsim.testing.machine) on the engine.
    `settings` (hypothesis settings) overrides `profile` ("fast" or "slow", PROFILES) and
    `max_examples`. Returns a CheckReport.
    """
    ev = get_evict(policy)
    spec = _resolve_model(ev, model, EVICT_MODELS, EVICT, ("fill", "hit", "release", "victim"))
    s = settings if settings is not None else check_settings(profile, max_examples)
    report = CheckReport(ev.name, model_label(spec))
    watch = EvictWatch(ev, spec)
    wev = watch.wrapped()
    pfs = [prefetch] if isinstance(prefetch, str) else list(prefetch)

    @s
    @given(program=_programs(max_ops), kw=replays(), pf=st.sampled_from(pfs))
    def replays_agree(program, kw, pf):
        trace = program.build()
        kw = dict(kw, prefetch=pf, capacity_chunks=_short(kw, trace))
        report.replays += 1
        before = watch.victims
        try:
            res = reference.simulate(trace, evict=wev, **kw)
        except PolicyMismatch as e:
            raise _counterexample(e, program, kw) from None
        target(float(watch.victims - before), label="victim calls")  # seek busy programs
        if engine and pf == pfs[0]:
            report.engine_replays += 1
            try:
                _engine_agrees(trace, res, dict(kw, evict=ev), f"eviction policy {ev.name!r}")
            except PolicyMismatch as e:
                raise _counterexample(e, program, kw) from None

    replays_agree()
    report.compared = watch.victims
    if watch.victims == 0:
        raise PolicyMismatch(f"the generated programs never asked {ev.name!r} for a victim: "
                             "raise max_examples")
    if stateful:
        machine = eviction_machine(ev, spec)
        run_state_machine_as_test(machine, settings=s)
        report.machine_examples = s.max_examples
    return report


def check_prefetch_policy(policy, model=None, *, evict="lru2m", max_examples: int | None = None,
                          profile: str = "fast", settings: hsettings | None = None,
                          engine: bool = True, max_ops: int = 10) -> CheckReport:
    """Check a prefetch policy (a registered name, a 'module:object' path or a
    PrefetchPolicy) on generated programs; raise PolicyMismatch with a shrunk counterexample
    if it disagrees with `model` or the replay does not do what it chose.

    `model`: a plain-Python prefetcher (uvmsim.testing.PrefetchModel: `prefetch(block,
    faulted, resident, lo, hi, mem)` -> positions; a class or an object) or the name of a
    shipped one (PREFETCH_MODELS); a shipped policy given without one is checked against its
    own. The comparison is on the set the engine uses: positions of the block's allocation
    (lo..hi), neither faulted nor resident. Whatever the model, every block serviced must
    gain exactly its faulted and prefetched pages, the prefetch traffic
    (`htod_bytes_prefetch`) must be that of the populated pages prefetched, and the compiled
    engine (with `evict`) must count as the reference model (`engine`). Settings as for
    check_eviction_policy. Returns a CheckReport.
    """
    pf = get_prefetch(policy)
    spec = _resolve_model(pf, model, PREFETCH_MODELS, PREFETCH, ("prefetch",))
    s = settings if settings is not None else check_settings(profile, max_examples)
    report = CheckReport(pf.name, model_label(spec))
    watch = PrefetchWatch(pf, spec)
    wpf = watch.wrapped()
    wev = watch.evict_watch(get_evict(evict))

    @s
    @given(program=_programs(max_ops), kw=replays())
    def replays_agree(program, kw):
        trace = program.build()
        kw = dict(kw, capacity_chunks=_short(kw, trace))
        report.replays += 1
        try:
            res = reference.simulate(trace, prefetch=wpf, evict=wev, **kw)
            got = res.summary["htod_bytes_prefetch"]
            if got != watch.htod_prefetch:
                raise PolicyMismatch(
                    f"prefetch policy {pf.name!r}: the replay counted htod_bytes_prefetch = "
                    f"{got}, but the populated pages it chose to prefetch are "
                    f"{watch.htod_prefetch} bytes")
            if engine:
                report.engine_replays += 1
                _engine_agrees(trace, res, dict(kw, prefetch=pf, evict=evict),
                               f"prefetch policy {pf.name!r}")
        except PolicyMismatch as e:
            raise _counterexample(e, program, dict(kw, prefetch=pf.name)) from None

    replays_agree()
    report.compared = watch.calls
    if watch.calls == 0:
        raise PolicyMismatch(f"the generated programs never asked {pf.name!r} to prefetch: "
                             "raise max_examples")
    return report
