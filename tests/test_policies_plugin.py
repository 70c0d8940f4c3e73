"""A user policy written in a test module runs through simulate() and the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from numba import njit

import uvmsim
from uvmsim.errors import ConfigError
from uvmsim.policies import EvictPolicy, PolicyContext, get_evict, no_hit, register_evict
from uvmsim.trace import synth

ROOT = Path(__file__).resolve().parents[1]


# -- a user policy: evict the chunk holding the fewest resident pages (ties: lowest index)

def fewest_init(ctx: PolicyContext) -> tuple:
    return (np.zeros(1, np.int64),)


@njit(cache=True)
def fewest_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    st[0][0] += n_new  # pages made resident so far (checked by the test)


@njit(cache=True)
def fewest_release(st, S, T, chunk, blk):
    return


@njit(cache=True)
def fewest_victim(st, S, T, tick):
    best = -1
    for c in range(S.chunk_block.size):
        b = S.chunk_block[c]
        if b >= 0 and (best < 0 or S.b_nres[b] < S.b_nres[S.chunk_block[best]]):
            best = c
    S.victim[0] = best
    S.victim[1] = 0
    S.victim[2] = 511


FEWEST = EvictPolicy("test_fewest", victim=fewest_victim, on_fill=fewest_fill,
                     on_release=fewest_release, on_hit=no_hit, init=fewest_init,
                     doc="fewest resident pages", source="tests/test_policies_plugin.py")
register_evict(FEWEST, replace=True)


def _trace():
    return synth.make("training", layers=3, weight_bytes=2 << 20, activation_bytes=6 << 20,
                      steps=2)


def test_user_policy_by_name_path_and_object():
    t = _trace()
    by_name = uvmsim.simulate(t, oversub=2.0, evict="test_fewest").summary
    by_obj = uvmsim.simulate(t, oversub=2.0, evict=FEWEST).summary
    by_path = uvmsim.simulate(t, oversub=2.0, evict=f"{__name__}:FEWEST").summary
    assert by_name == by_obj == by_path
    lru = uvmsim.simulate(t, oversub=2.0).summary
    assert by_name["evicted_chunks"] > 0
    assert by_name != lru  # it really chose other victims
    assert get_evict(f"{__name__}:FEWEST") is FEWEST
    with pytest.raises(ConfigError):
        register_evict(EvictPolicy("test_fewest", victim=fewest_victim, on_fill=fewest_fill,
                                   on_release=fewest_release))
    with pytest.raises(ConfigError):
        get_evict(f"{__name__}:nothing_here")


def test_user_policy_runs_at_engine_speed():
    t = synth.make("training", layers=4, steps=3, seed=2)
    def best(ev):
        uvmsim.simulate(t, oversub=1.25, evict=ev)  # compile
        out = []
        for _ in range(3):
            t0 = time.perf_counter()
            uvmsim.simulate(t, oversub=1.25, evict=ev)
            out.append(time.perf_counter() - t0)
        return min(out)
    assert best(FEWEST) < 3 * best("lru2m") + 0.05


def test_user_policy_through_the_cli(tmp_path):
    if not (ROOT / "src" / "uvmsim" / "cli.py").exists():
        pytest.skip("src/uvmsim/cli.py not written yet")
    path = synth.write("training", tmp_path / "t.uvmtrace", layers=3, weight_bytes=2 << 20,
                       activation_bytes=6 << 20, steps=2)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")]))
    out = subprocess.run([sys.executable, "-m", "uvmsim.cli", "replay", str(path), "--oversub",
                          "2", "--evict", "test_policies_plugin:FEWEST", "--json"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = uvmsim.simulate(path, oversub=2.0, evict=FEWEST).summary
    for k in ("faults", "evicted_chunks", "dtoh_bytes_evict", "htod_bytes"):
        assert got[k] == want[k], k
    assert want != uvmsim.simulate(path, oversub=2.0).summary


def test_notebook_style_policy_defined_in_main():
    # hooks from __main__ (a notebook) are injected, not imported: run one in a subprocess
    code = (
        "import numpy as np\nfrom numba import njit\nimport uvmsim\n"
        "from uvmsim.policies import EvictPolicy, no_hit, register_evict\n"
        "from uvmsim.trace import synth\n"
        "@njit\ndef fill(st, S, T, c, b, f, l, n, t):\n    st[0][c] = t\n"
        "@njit\ndef rel(st, S, T, c, b):\n    st[0][c] = -1\n"
        "@njit\ndef vic(st, S, T, t):\n"
        "    s = st[0]\n    best = -1\n"
        "    for c in range(s.size):\n"
        "        if S.chunk_block[c] >= 0 and (best < 0 or s[c] > s[best]):\n"
        "            best = c\n"
        "    S.victim[0] = best\n    S.victim[1] = 0\n    S.victim[2] = 511\n"
        "register_evict(EvictPolicy('nb_mru', victim=vic, on_fill=fill, on_release=rel,\n"
        "    on_hit=no_hit, init=lambda ctx: (np.full(ctx.n_chunks, -1, np.int64),)))\n"
        "t = synth.make('sequential', footprint_bytes=32 << 20, kernels=3)\n"
        "a = uvmsim.simulate(t, oversub=1.5, evict='nb_mru').summary['faults']\n"
        "b = uvmsim.simulate(t, oversub=1.5).summary['faults']\n"
        "print(a, b)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    mru, lru = map(int, out.stdout.split())
    assert mru < lru  # MRU beats LRU on a cyclic scan: the policy really ran


# -- a hook without @njit is named when the policy is registered or looked up

def plain_victim(st, S, T, tick):   # no @njit: the engine cannot compile it
    S.victim[0] = 0


NOT_COMPILED = EvictPolicy("test_plain", victim=plain_victim, on_fill=fewest_fill,
                           on_release=fewest_release, on_hit=no_hit, init=fewest_init)


def test_an_uncompiled_hook_is_named_at_registration():
    with pytest.raises(ConfigError) as e:
        register_evict(NOT_COMPILED)
    msg = str(e.value)
    assert msg == ("eviction policy 'test_plain': hook victim is the function 'plain_victim', "
                   "not compiled with Numba; decorate it with @numba.njit (docs/policies.md)")
    assert "test_plain" not in uvmsim.policies.EVICT
    # passed as an object or a module path, without registering: the same one line
    for spec in (NOT_COMPILED, f"{__name__}:NOT_COMPILED"):
        with pytest.raises(ConfigError, match="hook victim is the function 'plain_victim'"):
            uvmsim.simulate(_trace(), oversub=2.0, evict=spec)


def test_uncompiled_hooks_of_prefetch_policies_and_components_are_named():
    from uvmsim.components.walkers import WALKERS
    from uvmsim.components.walkers.base import WalkerScheduler, register_walkers
    from uvmsim.policies import PrefetchPolicy, register_prefetch

    def ahead(st, S, T, blk, lo, hi):
        return
    with pytest.raises(ConfigError, match="prefetch policy 'test_ahead': hook prefetch is the "
                                          "function 'ahead'"):
        register_prefetch(PrefetchPolicy("test_ahead", prefetch=ahead))
    shared = WALKERS["shared"]
    with pytest.raises(ConfigError, match="walker component 'test_w': hook pick is the "
                                          "function 'pick'"):
        def pick(st, S, ten, t):
            return 0
        register_walkers(WalkerScheduler("test_w", pick=pick, init=shared.init,
                                         pools=shared.pools, choose=shared.choose))


def test_policies_doc_says_how_to_register_a_name_again():
    """The error names replace=True; docs/policies.md says it too, beside the error."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "policies.md").read_text()
    text = " ".join(text.split())
    i = text.index('raises "already registered"')
    assert "register_evict(policy, replace=True)" in text[i:i + 200]


def test_replace_true_re_registers_a_name():
    again = EvictPolicy("test_fewest", victim=fewest_victim, on_fill=fewest_fill,
                        on_release=fewest_release, on_hit=no_hit, init=fewest_init)
    with pytest.raises(ConfigError, match="already registered \\(replace=True replaces it\\)"):
        register_evict(again)
    try:
        assert register_evict(again, replace=True) is again
        assert get_evict("test_fewest") is again
    finally:
        register_evict(FEWEST, replace=True)
