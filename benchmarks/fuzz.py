"""The trace fuzzer at scale: >= 10,000 corrupt traces through load_trace, trace_from_tables
and `uvmsim replay`, each case in a child process with a timeout.

    python benchmarks/fuzz.py                   # 10,000 cases, 2 child processes
    python benchmarks/fuzz.py --cases 2000 --seed 7 --jobs 2
    python benchmarks/fuzz.py --boundscheck     # the same, compiled code bounds-checked

With --boundscheck every engine and compiled reader function is compiled afresh with
NUMBA_BOUNDSCHECK=1 (in caches of its own, removed at the end: Numba's caches do not key on
the flag), and every accepted trace is also replayed as two tenants sharing a TLB, so an
index out of range in compiled code is an IndexError (counted as a failure), not a write
into the heap.

Prints the counts by outcome (rejected, accepted and checked by the oracle, signal, hang,
other exception, and the failure classes of tests/fuzz/fuzzlib.py), then every corruption
class that was accepted, with the rule of docs/trace-format.md that allows it, then every
failing case. Exit status 1 if any case failed. A progress bar on stderr counts finished
cases (`--quiet`: none). Figures: docs/reliability.md.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
sys.path.insert(0, str(ROOT / "src"))

import fuzzlib  # noqa: E402

GROUPS = [
    ("rejected", lambda o: o == "rejected"),
    ("accepted, oracle-checked", lambda o: o == "accepted-ok"),
    ("signal", lambda o: o.startswith("signal")),
    ("hang", lambda o: o == "hang"),
    ("other exception", lambda o: o.startswith("exception") or o.startswith("child")
     or o == "other"),
    ("accepted although forbidden", lambda o: o == "accepted-forbidden"),
    ("valid but rejected", lambda o: o == "rejected-valid"),
    ("replay differs from the oracle", lambda o: o == "oracle-mismatch"),
    ("rejection without file or on several lines", lambda o: o == "unnamed-rejection"),
    ("catalog disagrees with the validator", lambda o: o == "catalog-error"),
    ("mutation not applicable to its base", lambda o: o == "not-applicable"),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per case")
    ap.add_argument("--quiet", action="store_true", help="no progress bar (on stderr)")
    ap.add_argument("--boundscheck", action="store_true",
                    help="compile with NUMBA_BOUNDSCHECK=1; replay accepted traces as two "
                         "tenants too")
    a = ap.parse_args()
    caches = None
    if a.boundscheck:
        caches = tempfile.mkdtemp(prefix="uvmfuzz-boundscheck-")
        os.environ.update(NUMBA_BOUNDSCHECK="1", UVMSIM_FUZZ_MULTI="1",
                          NUMBA_CACHE_DIR=os.path.join(caches, "numba"),
                          UVMSIM_CACHE_DIR=os.path.join(caches, "engines"))
    try:
        return run(a)
    finally:
        if caches:
            shutil.rmtree(caches, ignore_errors=True)


def run(a: argparse.Namespace) -> int:
    cases = fuzzlib.make_cases(a.cases, seed=a.seed)
    t0 = time.monotonic()
    from tqdm import tqdm
    with tqdm(total=len(cases), unit="case", desc="fuzz", file=sys.stderr,
              disable=a.quiet) as bar:
        results = fuzzlib.run_cases(cases, jobs=a.jobs, batch=a.batch,
                                    case_timeout=a.timeout, done=bar.update,
                                    log=lambda s: bar.write(s, file=sys.stderr))
    wall = time.monotonic() - t0
    out = Counter(r["outcome"] for r in results)
    print(f"{len(results)} cases, seed {a.seed}, {a.jobs} jobs, {wall:.0f} s wall"
          + (", NUMBA_BOUNDSCHECK=1, accepted traces also replayed as two tenants"
             if a.boundscheck else ""))
    print(f"{len(fuzzlib.MUTATIONS)} corruption classes in "
          f"{len({m.family for m in fuzzlib.MUTATIONS.values()})} families")
    print("\noutcome counts:")
    for name, pred in GROUPS:
        n = sum(v for k, v in out.items() if pred(k))
        print(f"  {name:<45} {n:>6}")
    by_kind = defaultdict(Counter)
    for r in results:
        by_kind[r.get("kind", "?")][r["outcome"]] += 1
    print("\nby corruption kind:")
    for k, c in sorted(by_kind.items()):
        print(f"  {k:<10} " + ", ".join(f"{o} {n}" for o, n in c.most_common()))
    by_family = defaultdict(Counter)
    for r in results:
        by_family[fuzzlib.MUTATIONS[r["mut"]].family][r["outcome"]] += 1
    print("\nby family (classes):")
    for f, c in sorted(by_family.items()):
        n = sum(1 for m in fuzzlib.MUTATIONS.values() if m.family == f)
        print(f"  {f + f' ({n})':<36} " + ", ".join(f"{o} {k}" for o, k in c.most_common()))
    idx = sum(1 for r in results if "IndexError" in r["outcome"])
    print(f"\nIndexError (an index out of range in compiled code): {idx}")
    acc = Counter(r["mut"] for r in results if r["outcome"] == "accepted-ok")
    print("\naccepted corruption classes (cases) and the rule that allows them:")
    for m, n in sorted(acc.items()):
        mu = fuzzlib.MUTATIONS[m]
        print(f"  {m:<32} {n:>5}  [{mu.verdict}] {mu.rule}")
    bad = [r for r in results if fuzzlib.is_failure(r["outcome"])]
    if bad:
        print(f"\n{len(bad)} failing cases:")
        for r in bad:
            print(f"  case {r['id']} {r['mut']} ({r.get('mode')}): {r['outcome']}: "
                  f"{r['detail'][:300]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
