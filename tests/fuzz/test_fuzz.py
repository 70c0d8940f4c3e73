"""CI slice of the trace fuzzer (tests/fuzz/fuzzlib.py): 520 corruptions of every table, the
manifest, the directory and the Parquet bytes, each run in a child process with a timeout.

No case may end in a signal, a hang, an exception other than TraceFormatError (or OSError for
a missing path), an acceptance the format forbids, or a replay that differs from what the
format says it must be. benchmarks/fuzz.py runs the same catalog at scale.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import fuzzlib

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: helpers

N_CASES = 520


def test_fuzz_corrupt_traces_are_rejected_or_read_right():
    seed = int(os.environ.get("UVMSIM_FUZZ_SEED", "20261123"))
    cases = fuzzlib.make_cases(N_CASES, seed=seed)
    results = fuzzlib.run_cases(cases, jobs=2, batch=-(-len(cases) // 4))
    counts = fuzzlib.summarize(results)
    bad = [r for r in results if fuzzlib.is_failure(r["outcome"])]
    assert not bad, (f"seed {seed}: {counts}\n" + "\n".join(
        f"case {r['id']} {r['mut']} ({r.get('mode')}): {r['outcome']}: {r['detail']}"
        for r in bad[:20]))
    # the run exercised both sides: most corruptions are rejected, and the allowed ones load
    assert counts.get("rejected", 0) > N_CASES // 2
    assert counts.get("accepted-ok", 0) > N_CASES // 10
    # every corruption class ran (a few may have drawn a base they do not apply to)
    covered = {r["mut"] for r in results if r["outcome"] != "not-applicable"}
    missing = set(fuzzlib.MUTATIONS) - covered
    assert len(missing) <= 3, missing


def test_harness_names_the_case_that_crashes_or_hangs(monkeypatch):
    # the child dies on case 1 and stalls on case 3: both are pinpointed, the others answered
    monkeypatch.setenv("UVMSIM_FUZZ_SELFTEST", "segv=1,hang=3")
    cases = [dict(id=i, mut="bytes_magic", base="small", layout="zstd", seed=i, mode="load")
             for i in range(5)]
    done = []
    res = fuzzlib.run_cases(cases, jobs=1, batch=3, case_timeout=2.0, startup=2.0,
                            done=done.append)
    assert [r["outcome"] for r in res] == ["rejected", "signal:SIGSEGV", "rejected", "hang",
                                           "rejected"]
    assert sorted(done) == [2, 3]  # progress: each batch's cases once, crashed ones included
    assert fuzzlib.is_failure("signal:SIGSEGV") and fuzzlib.is_failure("hang")


def test_accepted_cases_replay_in_bounds(monkeypatch):
    """One case of every class whose traces may load (verdict same, valid or either), run
    with every compiled function bounds-checked (NUMBA_BOUNDSCHECK=1, caches of their own)
    and each accepted trace replayed alone and as two tenants sharing a TLB: an index out
    of range would be an IndexError here. benchmarks/fuzz.py --boundscheck runs all 10,000
    cases so (docs/reliability.md)."""
    from helpers import boundscheck_env
    for k, v in boundscheck_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("UVMSIM_FUZZ_MULTI", "1")
    seed = int(os.environ.get("UVMSIM_FUZZ_SEED", "20261123"))
    picked, seen = [], set()
    for c in fuzzlib.make_cases(4000, seed=seed):
        if fuzzlib.MUTATIONS[c["mut"]].verdict != "reject" and c["mut"] not in seen:
            seen.add(c["mut"])
            picked.append(c)
    # one child: it compiles every function afresh, bounds-checked, before its first case
    # (minutes on a loaded machine: the startup allowance is generous)
    results = fuzzlib.run_cases(picked, jobs=1, batch=len(picked), case_timeout=60.0,
                                startup=3600.0)
    bad = [r for r in results if fuzzlib.is_failure(r["outcome"])]
    assert not bad, "\n".join(f"case {r['id']} {r['mut']}: {r['outcome']}: {r['detail']}"
                              for r in bad[:20])
    ok = [r for r in results if r["outcome"] == "accepted-ok"]
    assert len(ok) > len(picked) // 2
    assert {"page_top_of_range", "page_windows_many"} <= {r["mut"] for r in ok}
