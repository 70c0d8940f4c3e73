"""Small helpers shared by the tests."""
from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path

import numpy as np
from hypothesis import settings

import uvmsim
import uvmsim.reference as ref
from uvmsim.trace.builder import TraceBuilder

MiB = 1 << 20
PAGE = 4096


def run(b: TraceBuilder, **kw):
    """Build the trace and replay it; returns the Result."""
    return uvmsim.simulate(b.build(), **kw)


def both(trace, **kw):
    """The engine's Result, checked equal to the reference model's counts and times (the
    summary, the extra counts and every kernel's sim_ns)."""
    a = uvmsim.simulate(trace, **kw)
    b = ref.simulate(trace, **kw)
    for k, v in {**a.summary, **a.extra}.items():
        w = b.summary[k] if k in b.summary else b.extra[k]
        assert math.isclose(v, w, rel_tol=1e-9, abs_tol=1e-6), (k, v, w)
    assert np.allclose(a.kernels["sim_ns"], b.kernels["sim_ns"], rtol=1e-9)
    return a


def window_pages(b: TraceBuilder, a: int, block: int, positions) -> list[int]:
    """Virtual pages at window positions of the allocation's block-th 2 MiB window."""
    base_page = b.base(a) // PAGE
    w0 = (base_page >> 9) + block
    return [w0 * 512 + p for p in positions]


def ping_pong(n: int, duration_ns: int = 1000):
    """Two blocks, one chunk's worth: n kernels alternate between their first pages."""
    b = TraceBuilder()
    x = b.alloc(4 * MiB)
    pa, pb = b.pages(x, 0, 1), b.pages(x, 512, 513)
    for i in range(n):
        b.kernel(f"k{i}", reads=pa if i % 2 == 0 else pb, duration_ns=duration_ns)
    return b.build()


#: whether the run is the slow profile (tests/conftest.py): deeper checks, more engines
SLOW_PROFILE = os.environ.get("HYPOTHESIS_PROFILE") == "slow"


def examples(n: int) -> int:
    """A test's own hypothesis example count, raised to the loaded profile's when that is
    larger (HYPOTHESIS_PROFILE=slow), so an explicit count never caps a deep run."""
    return max(n, settings().max_examples) if SLOW_PROFILE else n


def shipped(table: dict, hook: str) -> set[str]:
    """The names in a policy table (uvmsim.policies.PREFETCH or EVICT) of the policies
    uvmsim ships: those whose `hook` is defined in uvmsim.policies (tests register their
    own in the same tables)."""
    return {n for n, p in table.items()
            if getattr(p, hook).py_func.__module__.startswith("uvmsim.policies.")}


#: The start of a child script that measures its own peak RSS growth (Linux /proc):
#: imports json, sys, uvmsim and load_trace; `status(key)` reads /proc/self/status in bytes,
#: `reset_peak()` resets the peak (VmHWM) and returns the current RSS.
RSS_CHILD_PRELUDE = textwrap.dedent("""
    import json, sys
    import uvmsim
    from uvmsim.trace import load_trace
    def status(key):
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))
    def reset_peak():  # Linux: writing 5 to clear_refs resets the peak RSS (VmHWM)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return status("VmRSS")
""")


def boundscheck_env() -> dict[str, str]:
    """The environment of a child process whose compiled code checks every index
    (NUMBA_BOUNDSCHECK=1: an out-of-range index is an IndexError, not a write into the
    heap). Numba's caches do not key on the flag, so the child compiles into caches of its
    own, beside this session's engine cache (tests/conftest.py) and shared by the tests that
    use it: the engines' (UVMSIM_CACHE_DIR) and every other compiled function's
    (NUMBA_CACHE_DIR, else the policies' would load unchecked from their __pycache__)."""
    cache = Path(os.environ["UVMSIM_CACHE_DIR"])
    base = cache.parent / (cache.name + "-boundscheck")
    root = Path(__file__).resolve().parents[1]
    return dict(os.environ, NUMBA_BOUNDSCHECK="1", UVMSIM_CACHE_DIR=str(base / "engines"),
                NUMBA_CACHE_DIR=str(base / "numba"),
                PYTHONPATH=os.pathsep.join([str(root / "src"), str(root / "tests")]))


def fake_venv(folder) -> "os.PathLike":
    """`folder`/.venv/bin as scripts/setup.sh leaves it, for this interpreter: `python`,
    `uvmsim` (like the script pip installs, a file running uvmsim.cli.main, so the current
    folder is not on the import path, unlike `python -m uvmsim`) and `activate`. The
    caller's PYTHONPATH must reach uvmsim. Returns the bin folder."""
    import sys
    b = Path(folder) / ".venv" / "bin"
    b.mkdir(parents=True, exist_ok=True)
    (b / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (b / "uvmsim").write_text(f"#!{sys.executable}\nimport sys\nfrom uvmsim.cli import main\n"
                              "sys.exit(main())\n")
    (b / "activate").write_text(f'export VIRTUAL_ENV="{b.parent}"\nexport PATH="{b}:$PATH"\n')
    for f in ("python", "uvmsim"):
        (b / f).chmod(0o755)
    return b
