"""Instructions of a replay with a plan against the same prefetch events, counted by
valgrind's callgrind (docs/performance.md, "Prefetch plans").

    taskset -c 0 python benchmarks/plans_instructions.py \
        --out benchmarks/results/plans_instructions.md

Why: `benchmarks/plans.py overhead` times 13-24 ms replays on a shared VM, where two runs of
the same compiled work on equal arrays (`cached` and `events`) already differ by up to 23 %,
more than the 10 % goal. The instructions a replay executes are all but deterministic
(benchmarks/instructions_before_after.py), so their ratio measures the work a plan adds.

The cases are plans.py overhead's: each bundled trace at factors 1.5 and 3 with the oracle's
plan and the correlation predictor's, replayed as `events` (the plan's entries written into
the trace as prefetch events, loaded once), `fresh` (simulate(trace, plan=plan) on a newly
loaded Trace: the trace's layout and the plan's resolution are counted), `new plan` (one
Trace, a new Plan object: the resolution counted, the layout not) and `cached` (one Trace and
one Plan, a sweep). Every mode's summary must equal `events`'. One child process per
trace runs natively first (it compiles or loads the engines and checks the summaries), then
under `valgrind --tool=callgrind --instr-atstart=no`: each mode once uncounted, then each
counted between client requests (zero, replay, dump), with the garbage collector run
before and held off during each. As in instructions_before_after.py,
NUMBA_CPU_NAME and NUMBA_CPU_FEATURES are the host's, so the native run's cached engines load
under valgrind. One window, the first after instrumentation starts, is counted and dropped:
it came out about twice the size of the same work counted later.

Leave the measured tree's src/ alone while it runs: an engine's key hashes the source files
when the engine is asked for (uvmsim.engine.build), so a child started before an edit
compiles a new engine, under valgrind for well over ten minutes.

Caveat: instructions do not see cache misses or memory bandwidth; they count the work done.
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import gc
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TRACES = ("gpt2_small", "resnet50_pca", "resnet50_nopca")
MODES = ("events", "fresh", "new plan", "cached")


def child(name: str, lib: str | None) -> None:
    """In the measured process: every case of one trace; counted only under callgrind."""
    sys.path.insert(0, str(HERE))
    from plans import overhead_cases  # this folder's; it puts the repository's src/ first

    import uvmsim
    path = ROOT / "traces" / f"{name}.uvmtrace"
    base = uvmsim.load_trace(path)
    cg = ctypes.CDLL(lib) if lib else None
    if cg:
        cg.cg_start()
        # the first window counted after the start came out about twice as large as the
        # same replay counted later (gpt2_small's first `events`: 94.2 M, against 45.9 M
        # for `cached`, which is the same work); one window is counted and dropped first
        cg.cg_zero()
        uvmsim.simulate(base, oversub=1.5)
        cg.cg_dump(b"dropped")
    out = []
    for f, pname, plan, baked in overhead_cases(path, base):
        fresh = [uvmsim.load_trace(path) for _ in range(2)]
        runs = {"events": lambda: uvmsim.simulate(baked, oversub=f),
                "fresh": lambda i: uvmsim.simulate(fresh[i], oversub=f, plan=plan),
                "new plan": lambda: uvmsim.simulate(base, oversub=f,
                                                    plan=dataclasses.replace(plan)),
                "cached": lambda: uvmsim.simulate(base, oversub=f, plan=plan)}
        want = runs["events"]().summary
        for mode in MODES:  # uncounted: compiles, and fills the `cached` resolution
            got = (runs[mode](0) if mode == "fresh" else runs[mode]()).summary
            if got != want:
                raise SystemExit(f"{name} {f} {pname} {mode}: summary differs from events")
        for mode in MODES:
            gc.collect()  # no counted replay pays for another's garbage
            gc.disable()
            if cg:
                cg.cg_zero()
            if mode == "fresh":
                runs[mode](1)
            else:
                runs[mode]()
            if cg:
                cg.cg_dump(f"{name}-{f}-{pname}-{mode}".encode())
            gc.enable()
        out.append({"trace": name, "factor": f, "plan": pname,
                    "pages": int(plan.pages("gpu"))})
    print(json.dumps(out))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", default=",".join(TRACES))
    ap.add_argument("--out", type=Path, help="also write the table here (markdown)")
    a = ap.parse_args()
    bad = [n for n in a.traces.split(",") if n not in TRACES]
    if bad:
        raise SystemExit(f"--traces: unknown trace {bad[0]!r} (known: {', '.join(TRACES)})")
    sys.path.insert(0, str(HERE))
    from instructions_before_after import callgrind_setup, dumped_counts
    env, work, lib = callgrind_setup("uvmsim-plan-instructions-")
    me = [sys.executable, str(Path(__file__).resolve()), "--child"]
    lines = ["| trace | factor | plan | pages | events | fresh | ratio | new plan | ratio | "
             "cached | ratio |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | "
             "--- | --- |"]
    for name in a.traces.split(","):
        native = subprocess.run(me + [name], env=env, capture_output=True, text=True)
        if native.returncode:
            raise SystemExit(f"{name}: native run failed:\n{native.stderr[-3000:]}")
        cgout = work / f"{name}.cg"
        vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
              f"--callgrind-out-file={cgout}"]
        p = subprocess.run(vg + me + [name, lib], env=env, capture_output=True, text=True)
        if p.returncode:
            raise SystemExit(f"{name}: run under valgrind failed:\n{p.stderr[-3000:]}")
        cases = json.loads(p.stdout.strip().splitlines()[-1])
        c = dumped_counts(cgout, 1 + len(cases) * len(MODES))[1:]  # the first is dropped
        for i, case in enumerate(cases):
            m = dict(zip(MODES, c[i * len(MODES):(i + 1) * len(MODES)]))
            ev = m["events"]
            row = (f"| {case['trace']} | {case['factor']:g} | {case['plan']} | "
                   f"{case['pages']:,} | {ev / 1e6:,.1f} M | "
                   + " | ".join(f"{m[k] / 1e6:,.1f} M | {m[k] / ev:.3f}"
                                for k in MODES[1:]) + " |")
            lines.append(row)
            print(row, flush=True)
    vg_version = subprocess.run(["valgrind", "--version"], capture_output=True,
                                text=True).stdout.strip()
    import numba
    text = "\n".join(lines + [
        "", "Instructions per replay (callgrind); each ratio is over `events`. Every mode's "
        "summary equals `events'` (checked natively and under valgrind).", "",
        f"- valgrind: {vg_version}; numba: {numba.__version__}", "", "Command:", "", "```",
        shlex.join(["taskset", "-c", str(min(os.sched_getaffinity(0))), "python", *sys.argv]),
        "```"]) + "\n"
    if a.out:
        a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
