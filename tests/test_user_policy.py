"""Testing your own policies with uvmsim.testing, as a user would: the file docs/policies.md
shows in full.

examples/custom_policy.py is "your package": it registers an MRU evictor (example_mru2m) and
a look-ahead prefetcher (example_ahead). This file states each policy's order in plain
Python (a model), has the kit check the policy against it, shows that the check catches an
order bug the policy's rules cannot see, and adds a property of its own over the kit's
generated programs. HYPOTHESIS_PROFILE=slow runs the kit's slow profile.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import Phase, given, settings
from numba import njit

import uvmsim
from uvmsim.policies import EvictPolicy, register_evict
from uvmsim.policies.base import may_evict
from uvmsim.testing import (PolicyMismatch, check_eviction_policy, check_prefetch_policy,
                            check_settings, strategies)

# your package (here the repository's examples folder) on the path, imported by name so its
# hooks cache on disk; importing it registers its policies
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import custom_policy  # noqa: E402

SLOW = os.environ.get("HYPOTHESIS_PROFILE") == "slow"
PROFILE = "slow" if SLOW else "fast"
EXAMPLES = None if SLOW else 8          # few examples per push, the profile's when slow


class MruOrder:
    """example_mru2m in plain Python: the chunk filled at the latest tick goes first (any
    fill counts, even one making nothing new resident); ties: the lowest chunk."""

    def start(self, ctx):
        self.filled = {}

    def fill(self, chunk, block, first, last, n_new, tick, mem):
        self.filled[chunk] = tick

    def hit(self, chunk, block, pos, tick, count):
        pass

    def release(self, chunk, block):
        del self.filled[chunk]

    def victim(self, mem, tick):
        allowed = [c for c in mem.in_use() if mem.may_evict(c)]
        return max(allowed, key=lambda c: (self.filled[c], -c))


class Ahead:
    """example_ahead in plain Python: each faulted page brings the next `ahead` pages."""

    def start(self, ctx):
        self.n = int(ctx.params["ahead"])

    def prefetch(self, block, faulted, resident, lo, hi, mem):
        return {q for p in faulted for q in range(p + 1, p + self.n + 1)}


def test_mru_follows_its_order():
    # the whole check: generated programs in the reference model with every victim compared
    # with MruOrder's, the same programs on the compiled engine, and the stateful machine
    report = check_eviction_policy("example_mru2m", model=MruOrder(), profile=PROFILE,
                                   max_examples=EXAMPLES)
    assert report.compared > 0 and report.engine_replays > 0 and report.machine_examples > 0


def test_ahead_follows_its_order():
    report = check_prefetch_policy("example_ahead", model=Ahead(), profile=PROFILE,
                                   max_examples=EXAMPLES)
    assert report.compared > 0 and report.engine_replays > 0


# ---- a bug the check must catch: MRU's victim loop with `<` for `>`, which evicts the
# least recent chunk instead; it still names a resident chunk it may take, so only the
# model sees it
@njit(cache=True)
def oldest_victim(st, S, T, tick):
    stamp = st[0]
    best = -1
    for c in range(stamp.size):
        if S.chunk_block[c] >= 0 and may_evict(S, c) and (best < 0 or stamp[c] < stamp[best]):
            best = c
    S.victim[0] = best
    S.victim[1] = 0
    S.victim[2] = 511


MRU_TYPO = register_evict(EvictPolicy(
    "example_mru2m_typo", victim=oldest_victim, on_fill=custom_policy.mru_on_fill,
    on_release=custom_policy.mru_on_release, init=custom_policy.mru_init), replace=True)


def test_the_check_catches_an_order_bug():
    # the reference model's replays alone find it (no engine, no machine); the same
    # examples every run, and no shrinking (a shrink replays the program hundreds of times)
    quick = settings(check_settings(PROFILE, max_examples=60), derandomize=True,
                     phases=[Phase.explicit, Phase.generate])
    with pytest.raises(PolicyMismatch) as failure:
        check_eviction_policy("example_mru2m_typo", model=MruOrder(), engine=False,
                              stateful=False, settings=quick)
    message = str(failure.value)
    assert "'example_mru2m_typo' disagrees with model MruOrder" in message
    assert "policy's victim: chunk" in message and "model's victim:  chunk" in message
    assert "trace = b.build()" in message        # the counterexample, as code


def test_the_rules_alone_pass_the_bug():
    # why a model: without one, the kit checks the hooks' rules only, which the typo keeps
    report = check_eviction_policy("example_mru2m_typo", engine=False, stateful=False,
                                   profile=PROFILE, max_examples=EXAMPLES)
    assert report.model == "none" and report.compared > 0


# ---- a property of your own over the kit's generated programs
@check_settings(PROFILE, max_examples=EXAMPLES)
@given(program=strategies.programs(), kw=strategies.replays())
def test_mru_changes_nothing_while_memory_suffices(program, kw):
    # with a chunk for every block the programs can touch no policy is ever asked for a
    # victim: every count is the one lru2m gives
    trace = program.build()
    kw = dict(kw, capacity_chunks=16, prefetch="none")
    mru = uvmsim.simulate(trace, evict="example_mru2m", **kw)
    lru = uvmsim.simulate(trace, evict="lru2m", **kw)
    assert mru.summary == lru.summary
    assert mru.summary["evicted_chunks"] == 0
