"""Golden exact counts of every built-in policy on the shipped traces.

Modelled on libCacheSim's per-policy golden tests: any change to a policy, the engine or a
trace shows up here. The goldens live in tests/data/policy_goldens.json with each trace's
fingerprint; after an intended change (or a re-captured trace) regenerate them with
`PYTHONPATH=src python tests/test_policies_golden.py` and review the diff.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import uvmsim

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "policy_goldens.json"
TRACES = ("microbench", "gpt2_small", "resnet50_pca")
FACTORS = (1.25, 2.0, 4.0)
PREFETCH = ("none", "64k", "2m", "density", "tbn", "seq64k")
EVICT = ("lru2m", "lru2m_access", "fifo2m", "random2m", "lfu2m", "lru64k", "lru4k", "tbn",
         "belady2m")
KEYS = ("faults", "fault_batches", "htod_bytes", "zero_fill_pages", "evicted_chunks",
        "dtoh_bytes_evict")


def cases():
    for name in TRACES:
        for f in FACTORS:
            for pf in PREFETCH:
                yield name, f, pf, "lru2m"
            for ev in EVICT[1:]:
                yield name, f, "density", ev


def fingerprint(t) -> list[int]:
    return [t.n_kernels, t.n_accesses, int(t.peak_blocks), len(t.allocations)]


_TRACES: dict = {}


def load(name):
    if name not in _TRACES:
        _TRACES[name] = uvmsim.load_trace(ROOT / "traces" / f"{name}.uvmtrace")
    return _TRACES[name]


def counts(name, f, pf, ev) -> list[int]:
    s = uvmsim.simulate(load(name), oversub=f, prefetch=pf, evict=ev).summary
    return [int(s[k]) for k in KEYS]


def key(name, f, pf, ev) -> str:
    return f"{name}|{f}|{pf}|{ev}"


@pytest.fixture(scope="module")
def golden():
    if not GOLDEN.exists():
        pytest.skip("no goldens: run this file as a script to create them")
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", TRACES)
def test_traces_are_the_ones_goldens_were_made_from(golden, name):
    if not (ROOT / "traces" / f"{name}.uvmtrace").exists():
        pytest.skip(f"traces/{name}.uvmtrace not shipped")
    assert fingerprint(load(name)) == golden["fingerprints"][name], (
        f"traces/{name}.uvmtrace changed: regenerate tests/data/policy_goldens.json")


@pytest.mark.parametrize("name,f,pf,ev", list(cases()))
def test_golden_counts(golden, name, f, pf, ev):
    if not (ROOT / "traces" / f"{name}.uvmtrace").exists():
        pytest.skip(f"traces/{name}.uvmtrace not shipped")
    if fingerprint(load(name)) != golden["fingerprints"][name]:
        pytest.skip("trace changed since the goldens (see the fingerprint test)")
    assert counts(name, f, pf, ev) == golden["counts"][key(name, f, pf, ev)]


def test_goldens_order_the_bound():
    # sanity of the goldens themselves: MIN never evicts more than LRU or FIFO
    g = json.loads(GOLDEN.read_text())["counts"]
    ev_i = KEYS.index("evicted_chunks")
    for name in TRACES:
        for f in FACTORS:
            opt = g[key(name, f, "density", "belady2m")][ev_i]
            assert opt <= g[key(name, f, "density", "lru2m")][ev_i]
            assert opt <= g[key(name, f, "density", "fifo2m")][ev_i]


if __name__ == "__main__":
    out = {"keys": list(KEYS), "fingerprints": {n: fingerprint(load(n)) for n in TRACES},
           "counts": {key(*c): counts(*c) for c in cases()}}
    GOLDEN.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} ({len(out['counts'])} cases)")
