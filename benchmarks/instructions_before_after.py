"""Instructions per replay of two checkouts of uvmsim, counted by valgrind's callgrind.

    git worktree add /tmp/uvmsim-before <commit>
    taskset -c 0 python benchmarks/instructions_before_after.py --before /tmp/uvmsim-before \
        --after . --out benchmarks/results/instructions_before_after.md
    taskset -c 0 python benchmarks/instructions_before_after.py --before /tmp/uvmsim-before \
        --after . --cases policy --policy-steps 4 --replays 1 \
        --out benchmarks/results/instructions_before_after_policy.md

Why: on a shared VM wall-clock replay times drift by +-30 % from run to run, more than most
changes worth measuring (benchmarks/before_after.py needs many rounds to see 5 %). The
number of instructions a replay executes is all but deterministic (two replays of one
process agree to within 3e-4: allocator and garbage-collector paths), so a before/after
ratio of counts measures the work done to that precision.

How: for each case and tree, a child process (pinned like the caller; PYTHONPATH = the
tree's package folder and a per-tree engine cache, as in before_after.py, and checked to
import that tree's uvmsim) loads the case's trace through the tree's own
benchmarks/replay_throughput.py (`ensure_trace`, same trace files and simulate() arguments
as that benchmark's cases). The policy cases (`--cases policy`: all of them) are the pairs
benchmarks/policy_throughput.py runs, each prefetch policy with lru2m and each eviction
policy with density (density/lru2m once, as policy-prefetch-density), on the tree's own
synth training(layers=8, steps=N, seed=1) at oversub 1.25; the policy lists are each tree's
uvmsim.policies, and a policy only one tree has is reported, not counted. N
(`--policy-steps`) sets the trace length only: a smaller one keeps callgrind's time down
but gives the per-replay setup more weight (prefetch 64k: ratio 0.970 at 2, 0.979 at 4,
docs/performance.md). The child runs first natively, which compiles or
loads the engines, then under `valgrind --tool=callgrind --instr-atstart=no`: one
uninstrumented warm-up replay, then each counted replay between client requests (zero
counts, replay, dump), so that import, load and warm-up are excluded. The client requests
come from a five-line C library compiled on the fly with `cc` (valgrind's headers; Python
cannot issue them itself). Both trees must give identical summaries for every case.

Numba under valgrind sees a different CPU (valgrind's synthetic one), keys its cache on it
and would recompile every engine (>12 min); NUMBA_CPU_NAME / NUMBA_CPU_FEATURES are set to
the host's values for every child, so the natively compiled caches are loaded instead.

Leave the measured tree's src/ alone while it runs: an engine's key hashes the source files
when the engine is asked for (uvmsim.engine.build), so a child started before an edit
compiles a new engine, under valgrind for well over ten minutes.

Caveat: instruction counts do not see cache misses, branch mispredictions, memory bandwidth
or clock frequency: a change that executes the same instructions with a better memory
layout shows ratio 1.0 here, and fewer instructions need not mean less time.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from before_after import share_traces, source_dir  # this folder's; each tree's own layout

CASES = ("training", "fault-heavy-1.5-density", "fault-heavy-1.5-none",
         "fault-heavy-3-density")
POLICY_OVERSUB = 1.25  # policy_throughput.py's default --oversub

CLIENT_REQUESTS = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *what) { CALLGRIND_DUMP_STATS_AT(what); }
"""


def callgrind_setup(prefix: str) -> tuple[dict, Path, str]:
    """(environment, work folder, client-request library) for children counted under
    callgrind: Numba told the host's CPU (see above), the library compiled with `cc`."""
    from llvmlite import binding as llvm
    env = dict(os.environ, NUMBA_CPU_NAME=llvm.get_host_cpu_name(),
               NUMBA_CPU_FEATURES=llvm.get_host_cpu_features().flatten())
    work = Path(tempfile.mkdtemp(prefix=prefix))
    (work / "cgreq.c").write_text(CLIENT_REQUESTS)
    lib = str(work / "libcgreq.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", lib, str(work / "cgreq.c")],
                   check=True)
    return env, work, lib


def dumped_counts(out: Path, n: int) -> list[int]:
    """Instructions of the n dumps of one callgrind run (one file per dump, numbered in
    dump order: out.1 .. out.<n>)."""
    got = []
    for i in range(1, n + 1):
        totals = [ln for ln in Path(f"{out}.{i}").read_text().splitlines()
                  if ln.startswith("totals:")]
        got.append(int(totals[0].split()[1]))
    return got


def policy_pairs(policies) -> dict[str, tuple[str, str]]:
    """Case name -> (prefetch, evict) of every pair policy_throughput.py runs, from a tree's
    uvmsim.policies (its evict-lru2m row is density/lru2m again: counted once)."""
    pairs = {f"policy-prefetch-{p}": (p, "lru2m") for p in policies.PREFETCH}
    pairs.update((f"policy-evict-{e}", ("density", e)) for e in policies.EVICT
                 if e != "lru2m")
    return pairs


def case_args(rt, case: str, steps: int) -> tuple[object, dict]:
    """Trace and simulate() keywords of a case. replay_throughput.py's: `training` is its
    default run (--oversub 1.5 --prefetch density --evict lru2m), `fault-heavy-F-P` its
    --fault-heavy case at factor F with prefetch P (evict lru2m); policy_throughput.py's:
    `policy-prefetch-P` / `policy-evict-E` on synth training(layers=8, steps=`steps`)."""
    import uvmsim
    if case.startswith("policy-"):
        from uvmsim import policies
        from uvmsim.trace import synth
        if case not in policy_pairs(policies):
            raise SystemExit(f"unknown case {case}")
        pf, ev = policy_pairs(policies)[case]
        return (synth.make("training", layers=8, steps=steps, seed=1),
                dict(oversub=POLICY_OVERSUB, prefetch=pf, evict=ev))
    if case == "training":
        return (uvmsim.load_trace(rt.ensure_trace("training")),
                dict(oversub=1.5, prefetch="density", evict="lru2m"))
    for oversub, pf in rt.FAULT_HEAVY_CASES:
        if case == f"fault-heavy-{oversub:g}-{pf}":
            return (uvmsim.load_trace(rt.ensure_trace("fault-heavy")),
                    dict(oversub=oversub, prefetch=pf, evict="lru2m"))
    raise SystemExit(f"unknown case {case}")


def child(tree: Path, case: str, replays: int, steps: int, lib: str | None) -> None:
    """Runs in the measured process: warm-up replay, then `replays` counted ones (counted
    only when `lib`, the client-request library, is given, i.e. under callgrind). Case
    `list` prints the tree's policy cases instead."""
    sys.path.insert(0, str(tree / "benchmarks"))
    import numba
    import replay_throughput as rt
    import uvmsim
    if not Path(uvmsim.__file__).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree} would measure the uvmsim at {uvmsim.__file__}")
    if case == "list":
        from uvmsim import policies
        print(json.dumps(list(policy_pairs(policies))))
        return
    tr, kw = case_args(rt, case, steps)

    def replay() -> dict:
        s = uvmsim.simulate(tr, **kw).summary
        return {k: v.item() if hasattr(v, "item") else v for k, v in s.items()}

    summary = replay()
    if lib:
        cg = ctypes.CDLL(lib)
        cg.cg_start()
        for i in range(replays):
            cg.cg_zero()
            if replay() != summary:
                raise SystemExit(f"replay {i} of {case} changed the summary")
            cg.cg_dump(f"replay{i}".encode())
    print(json.dumps({"summary": summary, "numba": numba.__version__}, default=str))


def tree_env(tree: Path, cache: Path, env: dict) -> dict:
    return dict(env, PYTHONPATH=str(source_dir(tree)), UVMSIM_CACHE_DIR=str(cache))


def policy_cases(tree: Path, cache: Path, env: dict) -> list[str]:
    """The policy cases of a tree (from its own uvmsim.policies)."""
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(tree),
                        "list", "0", "0"], cwd="/", env=tree_env(tree, cache, env),
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_case(tree: Path, cache: Path, case: str, replays: int, steps: int, lib: str,
             work: Path, env: dict) -> tuple[dict, list[int], list[str]]:
    """Summary, instructions of each counted replay, and the two commands run."""
    env = tree_env(tree, cache, env)
    me = [sys.executable, str(Path(__file__).resolve()), "--child", str(tree), case,
          str(replays), str(steps)]
    out = work / f"{tree.name}-{case}.cg"
    vg = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=no",
          f"--callgrind-out-file={out}"]
    cmds = [me, vg + me + [lib]]
    results = []
    for cmd in cmds:
        p = subprocess.run(cmd, cwd="/", env=env, capture_output=True, text=True)
        if p.returncode:
            raise SystemExit(f"{shlex.join(cmd)} failed:\n{p.stderr[-3000:]}")
        results.append(json.loads(p.stdout.strip().splitlines()[-1]))
    if results[0]["summary"] != results[1]["summary"]:
        raise SystemExit(f"{tree} {case}: summary under valgrind differs from the native one")
    counts = dumped_counts(out, replays)
    env_str = " ".join(f"{k}={shlex.quote(env[k])}" for k in
                       ("PYTHONPATH", "UVMSIM_CACHE_DIR", "NUMBA_CPU_NAME"))
    return (results[1], counts,
            [f"{env_str} NUMBA_CPU_FEATURES=... {shlex.join(c)}" for c in cmds])


def table(rows: dict, info: dict) -> str:
    lines = ["| case | before instructions per replay | after | after / before |",
             "| --- | --- | --- | --- |"]
    counted = {case: r for case, r in rows.items() if "only" not in r}
    for case, r in rows.items():
        if case not in counted:
            lines.append(f"| {case} | | | only the {r['only']} tree has it: not counted |")
            continue
        b, a = (sum(r[k]) / len(r[k]) for k in ("before", "after"))
        lines.append(f"| {case} | {b / 1e6:,.1f} M | {a / 1e6:,.1f} M | {a / b:.4f} |")
    lines += ["", "Every counted replay (instructions):", ""]
    lines += [f"- {case}: before {r['before']}, after {r['after']}"
              for case, r in counted.items()]
    lines += ["", "Summaries identical before and after (and native vs. under valgrind) for "
              "every counted case above."]
    if any(case.startswith("policy-") for case in rows):
        lines += ["", f"Policy cases: synth training(layers=8, steps={info['steps']}, seed=1) "
                  f"at oversub {POLICY_OVERSUB:g}, as benchmarks/policy_throughput.py "
                  "(which runs steps=24 by default); the steps set the trace length only, "
                  "but a short trace gives the per-replay setup more weight, so the ratios "
                  "move somewhat with them."]
    lines += ["", f"- valgrind: {info['valgrind']}",
              f"- numba: {info['numba']}", f"- before: {info['before']}",
              f"- after: {info['after']}", "", "Commands:", "", "```", info["argv"]]
    lines += info["commands"] + ["```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        tree, case, replays, steps, *lib = sys.argv[2:]
        child(Path(tree), case, int(replays), int(steps), lib[0] if lib else None)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--cases", default=",".join(CASES),
                    help="comma-separated; `policy` stands for every policy case of the trees")
    ap.add_argument("--replays", type=int, default=2,
                    help="counted replays per case and tree (1 is enough: two agree to ~3e-4)")
    ap.add_argument("--policy-steps", type=int, default=24,
                    help="training steps of the policy cases' trace (policy_throughput.py's "
                         "--steps; fewer keep callgrind's time down)")
    ap.add_argument("--cache-dir", type=Path,
                    help="keep each tree's engine cache here (default: fresh temporary ones)")
    ap.add_argument("--out", type=Path,
                    help="also write the table here after every case, so that a run stopped "
                         "part-way keeps the cases it finished")
    a = ap.parse_args()
    trees = {"before": a.before.resolve(), "after": a.after.resolve()}
    share_traces(trees["before"], trees["after"])
    env, work, lib = callgrind_setup("uvmsim-instructions-")
    caches = {k: (a.cache_dir / k if a.cache_dir
                  else Path(tempfile.mkdtemp(prefix=f"uvmsim-{k}-cache-"))) for k in trees}
    info = {"valgrind": subprocess.run(["valgrind", "--version"], capture_output=True,
                                       text=True).stdout.strip(),
            "argv": shlex.join(["taskset", "-c", str(min(os.sched_getaffinity(0))),
                                "python", *sys.argv]),
            "commands": [], "steps": a.policy_steps, **{k: str(t) for k, t in trees.items()}}
    for c in caches.values():
        c.mkdir(parents=True, exist_ok=True)
    have = {k: policy_cases(trees[k], caches[k], env) for k in trees}
    cases = []
    for case in a.cases.split(","):
        cases += dict.fromkeys(have["before"] + have["after"]) if case == "policy" else [case]
    rows: dict = {}
    for case in dict.fromkeys(cases):
        if case.startswith("policy-") and (case in have["before"]) != (case in have["after"]):
            rows[case] = {"only": "before" if case in have["before"] else "after"}
            print(f"{case}: only in the {rows[case]['only']} tree", file=sys.stderr)
            continue
        summaries = {}
        for k in trees:
            res, counts, cmds = run_case(trees[k], caches[k], case, a.replays, a.policy_steps,
                                         lib, work, env)
            summaries[k] = res["summary"]
            info["numba"] = res["numba"]
            info["commands"] += cmds
            rows.setdefault(case, {})[k] = counts
            print(f"{case} {k}: {counts}", file=sys.stderr, flush=True)
        if summaries["before"] != summaries["after"]:
            raise SystemExit(f"{case}: summaries differ\n{summaries}")
        if a.out:
            a.out.write_text(table(rows, info))
    print(table(rows, info), end="")


if __name__ == "__main__":
    main()
