"""Prefetch plans: what replaying a plan costs, what building one costs, and how the shipped
predictors compare (docs/performance.md, "Prefetch plans"; docs/policies.md, "Plans").

    python benchmarks/plans.py overhead   # replay with a plan vs the same prefetch events
    python benchmarks/plans.py build      # plan-building time per million trace rows
    python benchmarks/plans.py results    # the comparison table (none, density, plans, oracle)

overhead: for each bundled trace and factor, the oracle's plan (an entry before nearly every
kernel) and the correlation predictor's, replayed in ways that prefetch exactly the same
pages: `events`, `simulate(baked)` where `baked` is the trace with the plan's entries
written in as prefetch events (plans.tables_with_plan), loaded once; `fresh`,
`simulate(trace, plan=plan)` on a fresh Trace object, so resolving the plan into the event
arrays (`resolve`, also timed alone) and the trace's layout are paid in every replay; `new
plan`, one Trace object replaying a new Plan object each time (the layout is kept, the plan
resolved: a plan built and replayed once, the common case); `cached`, one Trace object and
one Plan, whose resolution is kept (a sweep replaying one plan).
Counts are asserted equal. Printed: the best of `--repeat` interleaved runs (the order
rotated each round, the garbage collector run before each call), in CPU time,
and each over `events` (goal <= 1.10); `no plan` (no prefetch events)
for scale.

build: `plans.build` CPU time (the predictor's calls, the history, the feedback replay for
predictors that use it; not the final replay of predictors without feedback, replay=False)
per million access rows (goal <= 1 s for the oracle and the correlation predictor), best
of `--repeat` after a warm-up build, at factor 2.

Times are CPU time of this process (time.process_time): the replay and the build run on one
thread, and on a shared machine wall time also counts other processes' use of the cores.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

import uvmsim  # noqa: E402
from uvmsim import plans  # noqa: E402
from uvmsim.plans import predictors as P  # noqa: E402
from uvmsim.plans.compare import add_oracle_share, precision  # noqa: E402
from uvmsim.trace import trace_from_tables  # noqa: E402
from uvmsim.trace.repeat import repeat  # noqa: E402

TR = ROOT / "traces"


def machine() -> str:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} CPUs, Python "
            f"{platform.python_version()}, load average {load[0]:.1f} at start")


def bundled(looped: bool = False) -> dict:
    t = {"gpt2_small": uvmsim.load_trace(TR / "gpt2_small.uvmtrace"),
         "resnet50_pca": uvmsim.load_trace(TR / "resnet50_pca.uvmtrace"),
         "resnet50_nopca": uvmsim.load_trace(TR / "resnet50_nopca.uvmtrace")}
    if looped:
        t["gpt2_small×3"] = repeat(TR / "gpt2_small.uvmtrace", 3)
        t["resnet50_pca×3"] = repeat(TR / "resnet50_pca.uvmtrace", 3)
    return t


def cpu(fn, *args, **kw) -> float:
    """CPU seconds of one call (process_time: this process only; the replay and the
    build are single-threaded, and the machine is shared, so wall time would count the
    other processes' share of the cores), with the garbage collector run before and held
    off during the call, so no call pays for another's garbage."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        fn(*args, **kw)
        return time.process_time() - t0
    finally:
        gc.enable()


def overhead_cases(path: Path, base):
    """overhead's cases of one bundled trace (`base`, loaded from `path`): (factor, plan
    name, plan, the trace with the plan written in as prefetch events) for the oracle's
    plan and the correlation predictor's at factors 1.5 and 3."""
    for f in (1.5, 3.0):
        for pname, plan in (
                ("oracle", plans.build(base, P.oracle(), allow_future=True, oversub=f,
                                       replay=False)),
                ("correlation", plans.build(base, P.correlation(), oversub=f))):
            yield f, pname, plan, trace_from_tables(**plans.tables_with_plan(path, plan))


def overhead(a) -> None:
    print("replay with a plan vs the same prefetch events written into the trace "
          f"(best of {a.repeat}, CPU ms)")
    print(f"{'trace':15s} {'factor':>6s} {'plan':12s} {'pages':>9s} {'no plan':>8s} "
          f"{'events':>8s} {'fresh':>8s} {'ratio':>6s} {'new plan':>8s} {'ratio':>6s} "
          f"{'cached':>8s} {'ratio':>6s} {'resolve':>8s}")
    for name in ("gpt2_small", "resnet50_pca", "resnet50_nopca"):
        path = TR / f"{name}.uvmtrace"
        base = uvmsim.load_trace(path)
        for f, pname, plan, baked in overhead_cases(path, base):
            want = uvmsim.simulate(baked, oversub=f)
            got = uvmsim.simulate(uvmsim.load_trace(path), oversub=f, plan=plan)
            assert got.summary == want.summary, (name, f, pname)
            fresh = [uvmsim.load_trace(path) for _ in range(2 * a.repeat)]
            t = {"none": [], "events": [], "plan": [], "new": [], "cached": [],
                 "resolve": []}
            for i in range(a.repeat):
                runs = [
                    ("plan", lambda: uvmsim.simulate(fresh[i], oversub=f, plan=plan)),
                    ("events", lambda: uvmsim.simulate(baked, oversub=f)),
                    ("new", lambda: uvmsim.simulate(base, oversub=f,
                                                    plan=dataclasses.replace(plan))),
                    ("cached", lambda: uvmsim.simulate(base, oversub=f, plan=plan)),
                    ("none", lambda: uvmsim.simulate(base, oversub=f)),
                    ("resolve", lambda: plans.with_plan(fresh[a.repeat + i], plan))]
                for key, fn in runs[i % 6:] + runs[:i % 6]:   # each first in turn
                    t[key].append(cpu(fn))
            m = {k: min(v) * 1e3 for k, v in t.items()}
            print(f"{name:15s} {f:6.1f} {pname:12s} {plan.pages('gpu'):9,d} "
                  f"{m['none']:8.1f} {m['events']:8.1f} {m['plan']:8.1f} "
                  f"{m['plan'] / m['events']:6.2f} {m['new']:8.1f} "
                  f"{m['new'] / m['events']:6.2f} {m['cached']:8.1f} "
                  f"{m['cached'] / m['events']:6.2f} {m['resolve']:8.1f}", flush=True)


def build_times(a) -> None:
    print(f"plan building time (best of {a.repeat}, CPU s per million access rows)")
    print(f"{'trace':15s} {'rows':>10s} {'kernels':>7s} " +
          " ".join(f"{n:>12s}" for n in ("oracle", "correlation", "stride", "learned")))
    model = P.train(uvmsim.load_trace(TR / "resnet50_nopca.uvmtrace"))
    makers = {"oracle": (P.oracle, True), "correlation": (P.correlation, False),
              "stride": (P.stride, False), "learned": (lambda: P.learned(model), False)}
    for name, t in bundled(looped=True).items():
        cells = []
        for pname, (make, future) in makers.items():
            plans.build(t, make(), allow_future=future, oversub=2.0, replay=False)   # warm
            s = [cpu(plans.build, t, make(), allow_future=future, oversub=2.0, replay=False)
                 for _ in range(a.repeat)]
            cells.append(min(s) / t.n_accesses * 1e6)
        print(f"{name:15s} {t.n_accesses:10,d} {t.n_kernels:7,d} " +
              " ".join(f"{c:12.2f}" for c in cells), flush=True)


def results(a) -> None:
    import pandas as pd
    model = P.train(uvmsim.load_trace(TR / "resnet50_nopca.uvmtrace"))
    traces = bundled(looped=True)
    del traces["resnet50_nopca"]          # the learned model's training trace
    df = plans.compare(traces, {"stride": P.stride, "correlation": P.correlation,
                                "learned": lambda: P.learned(model)},
                       oracle=P.oracle, oversub=(1.25, 1.5, 2.0, 2.5, 3.0))
    # the learned plan replacing the driver's density prefetching (prefetch none)
    rows = []
    for name, t in traces.items():
        for f in (1.25, 1.5, 2.0, 2.5, 3.0):
            p = plans.build(t, P.learned(model), oversub=f, prefetch="none")
            rows.append({"trace": name, "oversub": f, "run": "learned/none",
                         "faults": p.result.summary["faults"],
                         "sim_time_ns": p.result.summary["sim_time_ns"],
                         "precision": precision(t, p)})
    df = add_oracle_share(pd.concat([df, pd.DataFrame(rows)], ignore_index=True))
    order = ["none", "density", "stride", "correlation", "learned", "learned/none", "oracle"]
    t = df.pivot_table(index=["trace", "oversub"], columns="run", values="sim_time_ns",
                       sort=False)[order] / 1e6
    s = df.pivot_table(index=["trace", "oversub"], columns="run", values="oracle_share",
                       sort=False)[order]
    print("simulated time, ms (share of the oracle's gain over density in brackets)")
    print("| trace | factor | " + " | ".join(order) + " |")
    print("|---|---:|" + "---:|" * len(order))
    for (tr, f), row in t.iterrows():
        cells = [f"{row[c]:,.1f}" + ("" if c in ("none", "density", "oracle") else
                                     f" ({s.loc[(tr, f), c]:+.2f})") for c in order]
        print(f"| {tr} | {f:g} | " + " | ".join(cells) + " |")
    fl = df.pivot_table(index=["trace", "oversub"], columns="run", values="faults",
                        sort=False)[order]
    print("\nfaults")
    print(fl.to_string())
    plan_runs = ["stride", "correlation", "learned", "learned/none", "oracle"]
    pr = df[df["run"].isin(plan_runs)].pivot_table(index=["trace", "oversub"], columns="run",
                                                   values="precision", sort=False)
    print("\nprecision: share of each plan's pages the kernel they precede touches")
    print(pr[[c for c in plan_runs if c in pr]].round(3).to_string())
    if a.csv:
        df.to_csv(a.csv, index=False)
        print(f"table: {a.csv}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["overhead", "build", "results"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--csv", help="results: also write the long table here")
    a = ap.parse_args()
    print(machine(), flush=True)
    uvmsim.simulate(TR / "gpt2_small.uvmtrace", oversub=2.0)   # load the engine once
    {"overhead": overhead, "build": build_times, "results": results}[a.what](a)


if __name__ == "__main__":
    main()
