"""uvmsim.testing, the kit users test their own policies with: every shipped policy passes
its check against its shipped model, and a deliberately broken policy fails it with a
readable counterexample.

HYPOTHESIS_PROFILE=slow runs the checks with the kit's "slow" profile and the slow count of
examples (tests/helpers.py:examples), shrinking failures included; the default runs the
"fast" one with fewer examples.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import Phase, given, settings
from hypothesis.stateful import run_state_machine_as_test
from numba import njit

import uvmsim
from uvmsim.engine.bits import fill16
from uvmsim.policies import EVICT, PREFETCH, EvictPolicy, PrefetchPolicy, no_hit
from uvmsim.policies.base import may_evict
from uvmsim.policies.evict import lru2m
from uvmsim.testing import (EVICT_MODELS, PREFETCH_MODELS, PolicyMismatch,
                            check_eviction_policy, check_prefetch_policy, check_settings,
                            eviction_machine, strategies)
from uvmsim.testing.evict_models import Lru2m

from helpers import SLOW_PROFILE as SLOW, examples, shipped
PROFILE = "slow" if SLOW else "fast"
# CI: 6 replays of generated programs and 6 runs of the stateful machine per policy (the
# machine used to run about 7 per eviction policy): every shipped policy times the reference
# model's Python replays is most of this file's cost; the slow profile's count otherwise
EXAMPLES = examples(6)


def test_every_shipped_policy_has_a_model():
    assert set(EVICT_MODELS) == shipped(EVICT, "victim")
    assert set(PREFETCH_MODELS) == shipped(PREFETCH, "prefetch")


def _params(names, in_ci):
    """Every shipped policy; CI (the default `-m "not slow"`) checks those in `in_ci`, since
    each costs its own engines and the reference model's Python replays; `-m slow` all."""
    return [pytest.param(n, marks=() if n in in_ci else pytest.mark.slow) for n in sorted(names)]


@pytest.mark.parametrize("name", _params(EVICT_MODELS, {"lru2m"}))
def test_shipped_evictor_matches_its_model(name):
    r = check_eviction_policy(name, profile=PROFILE, max_examples=EXAMPLES)
    assert r.model == EVICT_MODELS[name].__name__
    assert r.compared > 0 and r.replays > 0 and r.machine_examples > 0


@pytest.mark.parametrize("name", _params(PREFETCH_MODELS, {"density"}))
def test_shipped_prefetcher_matches_its_model(name):
    r = check_prefetch_policy(name, profile=PROFILE, max_examples=EXAMPLES)
    assert r.model == PREFETCH_MODELS[name].__name__
    assert r.compared > 0 and r.engine_replays > 0


# ------------------------------------------------------------------ broken policies
@njit(cache=True)
def victim_most_recent(st, S, T, tick):
    """lru2m's victim taken from the wrong end of its list: the most recent chunk."""
    c = st.ends[1]
    while not may_evict(S, c):
        c = st.prev[c]
    S.victim[0] = c
    S.victim[1] = 0
    S.victim[2] = 511


LRU2M_WRONG_END = EvictPolicy(
    "lru2m_wrong_end", victim=victim_most_recent, on_fill=lru2m.on_fill,
    on_release=lru2m.on_release, on_hit=no_hit, init=lru2m.init, source="test")


@njit(cache=True)
def prefetch_next_big_page(st, S, T, blk, lo, hi):
    """64k off by one big page: the big page after each fault's."""
    for w in range(8):
        if S.fbits[w]:
            S.pbits[w] = fill16(S.fbits[w]) << np.uint64(16)


BIG_PAGE_SHIFTED = PrefetchPolicy("64k_shifted", prefetch_next_big_page, source="test")


@njit(cache=True)
def victim_past_the_pool(st, S, T, tick):
    """Names a chunk past the last one: the rules catch it at the first victim call, so the
    check fails on every generated program that evicts (a victim that is merely wrong,
    e.g. always chunk 0, breaks a rule only on the rare programs where that chunk is free)."""
    S.victim[0] = S.chunk_block.size
    S.victim[1] = 0
    S.victim[2] = 511


PAST_THE_POOL = EvictPolicy("past_the_pool", victim=victim_past_the_pool,
                            on_fill=lru2m.on_fill, on_release=lru2m.on_release,
                            init=lru2m.init, source="test")


def _failing(**kw):
    """Settings for checks expected to fail: deterministic, and shrinking only in the slow
    profile (a shrink replays the program hundreds of times)."""
    s = settings(check_settings(PROFILE, **kw), derandomize=True)
    return s if SLOW else settings(s, phases=[Phase.explicit, Phase.generate])


def test_wrong_end_victim_fails_against_the_lru2m_model():
    with pytest.raises(PolicyMismatch) as e:
        check_eviction_policy(LRU2M_WRONG_END, model="lru2m", stateful=False, engine=False,
                              settings=_failing(max_examples=60))
    msg = str(e.value)
    assert "'lru2m_wrong_end' disagrees with model Lru2m" in msg
    assert "policy's victim: chunk" in msg and "model's victim:  chunk" in msg
    assert "events before it" in msg and "fill    chunk" in msg
    # the trace, as a table and as code that rebuilds it
    assert "b = TraceBuilder()" in msg and "trace = b.build()" in msg
    assert "replayed with simulate(capacity_chunks=" in msg


def test_wrong_end_victim_keeps_every_rule():
    """Why a model: the rules alone (victim in use, holding a resident page, accounting) do
    not see an order bug."""
    r = check_eviction_policy(LRU2M_WRONG_END, stateful=False, engine=False,
                              profile=PROFILE, max_examples=EXAMPLES)
    assert r.model == "none" and r.compared > 0


def test_wrong_end_victim_fails_in_the_stateful_machine():
    with pytest.raises(PolicyMismatch, match="disagrees with model Lru2m"):
        run_state_machine_as_test(eviction_machine(LRU2M_WRONG_END, Lru2m()),
                                  settings=_failing(max_examples=40))


def test_a_victim_that_breaks_the_rules_fails_without_a_model():
    with pytest.raises(PolicyMismatch, match="broke the victim rule.*which does not exist"):
        check_eviction_policy(PAST_THE_POOL, stateful=False, engine=False,
                              settings=_failing(max_examples=60))


def test_shifted_prefetcher_fails_against_the_64k_model():
    with pytest.raises(PolicyMismatch) as e:
        check_prefetch_policy(BIG_PAGE_SHIFTED, model="64k", engine=False,
                              settings=_failing(max_examples=40))
    msg = str(e.value)
    assert "'64k_shifted' disagrees with model BigPage64k" in msg
    assert "only the policy:" in msg and "only the model:" in msg
    assert "b = TraceBuilder()" in msg


def test_model_arguments_are_checked():
    with pytest.raises(ValueError, match="no shipped model 'nope'"):
        check_eviction_policy("lru2m", model="nope")
    with pytest.raises(TypeError, match="lacks the method.*victim"):
        check_eviction_policy("lru2m", model=object())
    with pytest.raises(ValueError, match="unknown profile"):
        check_eviction_policy("lru2m", profile="quick")


def test_a_users_model_object_and_a_set_of_answers():
    """A model given as an object (deep-copied per replay) may answer with a set: here any
    chunk in use is accepted, as for a random policy whose stream it does not mirror."""
    class AnyChunk:
        def __init__(self):
            self.calls = 0

        def fill(self, chunk, block, first, last, n_new, tick, mem):
            pass

        def hit(self, chunk, block, pos, tick, count):
            pass

        def release(self, chunk, block):
            pass

        def victim(self, mem, tick):
            self.calls += 1
            return {c for c in mem.in_use() if mem.may_evict(c)}

    model = AnyChunk()
    r = check_eviction_policy("random2m", model=model, stateful=False, engine=False,
                              profile=PROFILE, max_examples=EXAMPLES)
    assert r.model == "AnyChunk" and r.compared > 0
    assert model.calls == 0   # each replay had its own copy


# ------------------------------------------------------------------ strategies, programs
@settings(max_examples=20, deadline=None)
@given(prog=strategies.programs(v11=True))
def test_a_programs_code_builds_the_same_trace(prog):
    ns: dict = {}
    exec(prog.code(), ns)
    a, b = ns["trace"], prog.build()
    for name in ("allocations", "events", "kernels"):
        assert getattr(a, name).equals(getattr(b, name)), name
    for x, y in zip(a.arrays, b.arrays):
        np.testing.assert_array_equal(x, y)   # NaN durations compare equal
    assert len(prog.table().splitlines()) == len(prog.allocs) + prog.n_ops


@settings(max_examples=5, deadline=None)
@given(prog=strategies.programs(v11=True))
def test_program_prefix_and_v1(prog):
    assert prog.prefix(0).n_ops == 0 and prog.prefix(1).ops == prog.ops[:1]
    v1 = prog.v1()
    assert all(getattr(o, "op", None) != "host_access" for o in v1.ops)
    assert all(getattr(o, "n_slices", 1) == 1 for o in v1.ops)
    uvmsim.simulate(v1.build(), oversub=2.0)


def test_the_kit_says_how_to_install_hypothesis():
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "try:\n    import uvmsim.testing\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert "pip install uvmsim[testing]" in out.stdout, out.stderr


def test_docs_show_the_users_test_file_in_full():
    """docs/policies.md's worked example is tests/test_user_policy.py, which CI runs: the
    text shown must be the whole file, under the line naming it (tests/test_docs.py then
    checks it as a quote instead of running it again)."""
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs/policies.md").read_text()
    text = (root / "tests/test_user_policy.py").read_text()
    assert f"```python\n# tests/test_user_policy.py\n{text}```" in doc
