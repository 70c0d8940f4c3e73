"""The compiled-engine cache key covers every source the engine is built from."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from uvmsim.engine import build
from uvmsim.policies import get_evict, get_prefetch

ROOT = Path(__file__).resolve().parents[1]

_RUN = r"""
import json, uvmsim
from uvmsim.trace import synth
t = synth.make("sequential", footprint_bytes=8 << 20, kernels=2)
r = uvmsim.simulate(t, oversub=2.0, prefetch="none", evict="lru2m")
print(json.dumps({"file": uvmsim.__file__, "transfer_ns": float(r.kernels["transfer_ns"].sum()),
                  "faults": int(r.summary["faults"])}))
"""


def _copy_package(tmp_path: Path) -> Path:
    dst = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "uvmsim", dst / "uvmsim",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    return dst


def _run(src: Path, cache: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), UVMSIM_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", _RUN], env=env, check=True, cwd=src,
                         capture_output=True, text=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_edited_helper_changes_the_result(tmp_path):
    """Edit a constant in engine/link.py in a copy of the package: the next run in the same
    engine cache must recompile and see it (it used to load the stale engine)."""
    src = _copy_package(tmp_path)
    cache = tmp_path / "cache"
    first = _run(src, cache)
    assert first["file"].startswith(str(src))
    again = _run(src, cache)
    assert again == first  # same sources: the cached engine, same answer
    link = src / "uvmsim" / "engine" / "link.py"
    text = link.read_text()
    assert "_TWO_OVER_PI = 2.0 / math.pi" in text
    link.write_text(text.replace("_TWO_OVER_PI = 2.0 / math.pi",
                                 "_TWO_OVER_PI = 1.0 / math.pi"))
    edited = _run(src, cache)
    assert edited["faults"] == first["faults"]
    # half the bandwidth: every transfer's byte term doubles
    assert edited["transfer_ns"] > 1.5 * first["transfer_ns"] - 1e-6


def test_key_covers_policy_helper_modules(tmp_path, monkeypatch):
    """lru4k's hooks call helpers of lru2m.py: that file is in its key, and the key changes
    when a file of the closure changes (Python and Numba versions too)."""
    files = build.module_closure(["uvmsim.policies.evict.lru4k"])
    assert "uvmsim.policies.evict.lru2m" in files
    assert "uvmsim.engine.state" in files
    assert "uvmsim.policies.base" in files
    k1 = build.source_key(["uvmsim.policies.evict.lru4k"])
    src = _copy_package(tmp_path)
    helper = src / "uvmsim" / "policies" / "evict" / "lru2m.py"
    monkeypatch.setitem(sys.modules, "uvmsim.policies.evict.lru2m",
                        type(sys)("uvmsim.policies.evict.lru2m"))
    sys.modules["uvmsim.policies.evict.lru2m"].__file__ = str(helper)
    assert build.source_key(["uvmsim.policies.evict.lru4k"]) == k1  # copy: same bytes
    helper.write_text(helper.read_text() + "\n# edited\n")
    assert build.source_key(["uvmsim.policies.evict.lru4k"]) != k1
    monkeypatch.undo()
    monkeypatch.setattr(build.numba, "__version__", "0.0.0")
    assert build.source_key(["uvmsim.policies.evict.lru4k"]) != k1


def test_hook_helpers_get_the_key_in_their_disk_cache():
    """Numba's per-function disk cache of a hook is keyed by its module's closure, which
    holds the helpers it calls from other files."""
    _, hooks = build.policy_key(get_prefetch("density"), get_evict("lru4k"))
    from uvmsim.engine import link
    from uvmsim.policies.evict import lru2m
    lru4k_key = build.source_key(["uvmsim.policies.evict.lru4k"])
    assert hooks["EV_ON_FILL"]._cache._uvmsim_key == lru4k_key
    assert lru2m.push_recent._cache._uvmsim_key == build.source_key(
        ["uvmsim.policies.evict.lru2m"])
    assert link.transfer_ns._cache._uvmsim_key == build.source_key(
        ["uvmsim.engine.link"])
    idx = hooks["EV_ON_FILL"]._cache._index_key((), hooks["EV_ON_FILL"].targetctx.codegen())
    assert idx[-1] == lru4k_key


def test_default_components_are_the_engine_defaults():
    """A replay naming no tenant component and one naming the built-in defaults (`shared`
    walkers, `interleave`, `shared` memory) bind the same hooks, so they share one engine."""
    from uvmsim.components.memory import MEMORY
    from uvmsim.components.sched import SCHEDULERS
    from uvmsim.components.walkers import WALKERS
    pf, ev = get_prefetch("density"), get_evict("lru2m")
    k0, h0 = build.policy_key(pf, ev)
    k1, h1 = build.policy_key(pf, ev, WALKERS["shared"], SCHEDULERS["interleave"],
                              MEMORY["shared"])
    assert (k0, h0) == (k1, h1)
    k2, _ = build.policy_key(pf, ev, WALKERS["dws"])
    assert k2 != k0  # another component's module is in the key


def test_an_index_naming_a_vanished_type_is_stale_not_an_error():
    """Numba unpickles a function's cache index before checking it is fresh: an index an
    earlier uvmsim wrote may name a state class that is gone. That index reads as empty (the
    function compiles again) instead of failing the replay."""
    def vanished():
        raise AttributeError("Can't get attribute 'NoMemState' on <module 'uvmsim.engine.state'>")
    assert build._tolerant(vanished)() == {}
    assert build._tolerant(lambda: {"sig": 1})() == {"sig": 1}
    _, hooks = build.policy_key(get_prefetch("density"), get_evict("lru2m"))
    cf = hooks["EV_VICTIM"]._cache._cache_file
    assert cf._uvmsim_tolerant
