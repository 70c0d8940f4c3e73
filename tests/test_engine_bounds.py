"""Pages anywhere below 2^50 (the format's limit) replay in bounds, single- and
multi-tenant: the tenant of a block is its own array (S.b_tenant), never bits of a page
number, and TLB tags are (tenant, page) pairs.

The replays run in child processes with NUMBA_BOUNDSCHECK=1 (and their own engine cache, as
Numba's cache does not key on the flag), where an out-of-range index in compiled code is an
IndexError instead of a silent write into the heap.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from helpers import boundscheck_env
from uvmsim.engine.state import MAX_TENANTS, StateSizes, new_state
from uvmsim.errors import ConfigError
from uvmsim.trace.builder import TraceBuilder

ROOT = Path(__file__).resolve().parents[1]
PAGE = 4096
TOP = (1 << 62) - PAGE  # the last page below 2^62: virtual page 2^50 - 1


def high_and_low(d: Path) -> tuple[Path, Path]:
    """The issue's trace (a 4095-byte allocation at 2^62 - 4096, page 2^50 - 1 written,
    then a second kernel that reads it and a 2 MiB buffer's pages) and its twin at an
    ordinary base, written as uvmtraces."""
    out = []
    for name, base in (("high", TOP), ("low", 0x7F0000000000)):
        b = TraceBuilder(base=0x7E0000000000)
        x = b.alloc(4095, base=base)
        y = b.alloc(2 << 20)
        b.kernel("w", writes=b.pages(x))
        b.kernel("r", reads=list(b.pages(x)) + list(b.pages(y, 0, 8)))
        b.prefetch(base, 4095, "cpu")
        b.kernel("again", reads=b.pages(x))
        out.append(b.write(d / f"{name}.uvmtrace"))
    return out[0], out[1]


_REPLAY = textwrap.dedent("""
    import json, sys
    import uvmsim
    from uvmsim.trace import load_trace
    hi, lo = load_trace(sys.argv[1]), load_trace(sys.argv[2])
    assert int(hi.arrays.b_first_vpage.max()) == 2**50 - 1
    cols = ["faults", "htod_bytes", "zero_fill_pages", "evicted_chunks", "tlb_misses",
            "page_walks"]
    def single(t):
        return uvmsim.simulate(t, capacity_chunks=1).kernels[cols].to_numpy().tolist()
    def multi(ts, **kw):
        m = uvmsim.simulate_multi(ts, capacity_chunks=2, translation=True, **kw)
        return [r.kernels[cols].to_numpy().tolist() for r in m.tenants]
    out = {"single": [single(hi), single(lo)],
           "multi": [multi([hi, lo, hi]), multi([lo, lo, lo])],
           "fair": [multi([hi, lo], memory="fair", walkers="partitioned", scheduler="mfit"),
                    multi([lo, lo], memory="fair", walkers="partitioned", scheduler="mfit")]}
    print(json.dumps(out))
""")


def test_pages_near_2_50_replay_in_bounds_and_like_an_ordinary_base(tmp_path):
    hi, lo = high_and_low(tmp_path)
    p = subprocess.run([sys.executable, "-c", _REPLAY, str(hi), str(lo)],
                       capture_output=True, text=True, timeout=900, env=boundscheck_env())
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    # where the pages are changes no count: each tenant is charged its own chunks and the
    # TLB never matches another tenant's page
    for key in ("single", "multi", "fair"):
        assert got[key][0] == got[key][1], key
    assert got["single"][0][0][0] == 1  # the write faults; its page was never populated


_ROUNDS = textwrap.dedent("""
    import json, sys
    import uvmsim
    from uvmsim.trace import load_trace
    hi, lo = load_trace(sys.argv[1]), load_trace(sys.argv[2])
    first = uvmsim.simulate(lo, capacity_chunks=1).summary
    for _ in range(20):
        uvmsim.simulate(hi, capacity_chunks=1)
        uvmsim.simulate_multi([hi, lo], capacity_chunks=2, translation=True)
    last = uvmsim.simulate(lo, capacity_chunks=1).summary
    print(json.dumps([first, last]))
""")


def test_twenty_rounds_then_an_ordinary_trace_in_one_process(tmp_path):
    """Without bounds checks, an out-of-range write corrupted the C heap: a process that
    replayed the trace a dozen times and then another one aborted (SIGABRT)."""
    hi, lo = high_and_low(tmp_path)
    p = subprocess.run([sys.executable, "-c", _ROUNDS, str(hi), str(lo)],
                       capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert p.returncode == 0, (p.returncode, p.stderr[-3000:])
    first, last = json.loads(p.stdout.strip().splitlines()[-1])
    assert first == last and first["faults"] > 0


def test_engine_state_refuses_tenants_and_bases_compiled_code_cannot_index():
    hw = np.zeros(9)
    rank = np.arange(2, dtype=np.int64)
    with pytest.raises(ConfigError, match="b_tenant"):
        new_state(StateSizes(1024, 2, 2, 1, 8, n_tenants=2), rank, hw,
                  b_tenant=np.array([0, 2]))
    with pytest.raises(ConfigError, match="b_vbase"):
        new_state(StateSizes(1024, 2, 2, 1, 8), rank, hw, b_vbase=np.array([0, 1 << 50]))
    with pytest.raises(ConfigError, match="tenants"):
        new_state(StateSizes(1024, 2, 2, 1, 8, n_tenants=MAX_TENANTS + 1), rank, hw)


@pytest.mark.parametrize("field,edit", [
    ("b_alloc", lambda x: x + 5), ("seg_alloc", lambda x: x - 9), ("ev_alloc", lambda x: x + 9),
    ("ev_kernel", lambda x: np.where(x >= 0, x + 3, x)), ("a_npages", lambda x: x + 1),
    ("a_block_off", lambda x: x + 1), ("ev_seg_start", lambda x: x[::-1].copy()),
    ("k_row_start", lambda x: x + 1), ("k_nslices", lambda x: x * 0),
    ("row_count", lambda x: x[:-1])])
def test_engine_arrays_refuse_an_index_compiled_code_would_take_out_of_range(field, edit):
    import dataclasses
    from uvmsim.engine.arrays import engine_arrays
    b = TraceBuilder()
    x = b.alloc(4 << 20)
    b.memcpy_htod(b.base(x), 8192)
    b.kernel("k", reads=b.pages(x, 0, 4))
    b.prefetch(b.base(x), 1 << 20, "gpu")
    b.kernel("k2", reads=b.pages(x, 600, 604))
    b.free(x)
    t = b.build()
    engine_arrays(t)
    T = t.arrays
    bad = dataclasses.replace(t, arrays=T._replace(**{field: edit(getattr(T, field))}),
                              _cache={})
    with pytest.raises(ConfigError, match="trace arrays"):
        engine_arrays(bad)


def test_engine_state_refuses_hardware_that_is_not_one_record():
    """The hardware constants are one record of named fields (config.Hardware.record): a
    plain vector of them would otherwise become records of zeros."""
    from uvmsim.config import get_hardware
    rank = np.arange(2, dtype=np.int64)
    with pytest.raises(ConfigError, match="HARDWARE record"):
        new_state(StateSizes(1024, 2, 2, 1, 8), rank, np.zeros(9))
    S = new_state(StateSizes(1024, 2, 2, 1, 8), rank, get_hardware(None).record())
    assert S.hw[0].bw_peak_gbps == get_hardware(None).bw_peak_gbps > 0
