"""The multi-tenant study (docs/study-multitenant.md): every registered component on mixes of
2, 4 and 8 real traces, the CSV the doc's numbers come from, and its plots.

    PYTHONPATH=src python benchmarks/multitenant_study.py            # run, plot, report
    PYTHONPATH=src python benchmarks/multitenant_study.py run|plot|report

`run` replays two studies and writes benchmarks/multitenant/results/multitenant.csv, one row
per tenant of each replay:

- `grid`: each mix (2, 4, 8 tenants cycling resnet50_pca, gpt2_small, resnet50_nopca,
  gpt2_small from traces/: CNNs with a transformer) at oversubscription factors 1.5, 3 and
  10 (of the sum of the tenants' peaks; the seed paper's range is 1.25-10), under
  every memory, walker and scheduler component registered by name (uvmsim.components), with
  translation on at the Translation defaults;
- `tlb`: the same mixes under the walker components `shared` and `partitioned` (default
  memory and scheduler, factor 1.5) at TLB sizes from 1,024 to 262,144 entries, to see when
  sharing the TLB raises miss ratios and when slicing it helps;
- `nwalkers`: the 4-tenant mix under every walker component (default memory and scheduler,
  factor 1.5) with 8, 32 and 128 page-table walkers, to see when walks cause the spikes.

Each row carries the tenant's MultiResult.table columns, its alone run's counts (the same
GPU, whole, with the default components), the mix's STP/ANTT/fairness, and the latency its
kernels gained over their alone runs split by cause (see `added_latency`). `plot` draws
docs/img/multitenant_*.png from the CSV; `report` prints the tables the doc quotes.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import uvmsim
from uvmsim.config import Translation
from uvmsim.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "multitenant" / "results" / "multitenant.csv"
IMG = ROOT / "docs" / "img"
CYCLE = ("resnet50_pca", "gpt2_small", "resnet50_nopca", "gpt2_small")
MIXES = (2, 4, 8)
OVERSUB = (1.5, 3.0, 10.0)
TLB_ENTRIES = (1024, 4096, 16384, 65536, 262144)
TLB_WALKERS = ("shared", "partitioned")
TLB_OVERSUB = 1.5
WALKER_COUNTS = (8, 32, 128)
WALK_MIX = 4
# a latency spike: a kernel whose latency while sharing is more than SPIKE_RATIO times its
# latency alone and at least SPIKE_MIN_NS longer
SPIKE_RATIO, SPIKE_MIN_NS = 2.0, 10_000.0
# each component kind: the simulate_multi keyword and the module holding its registry
KINDS = (("memory", "uvmsim.components.memory"), ("walkers", "uvmsim.components.walkers"),
         ("scheduler", "uvmsim.components.sched"))


def registered() -> dict[str, list[str]]:
    """Names of every registered component of each kind simulate_multi accepts. A kind whose
    package this version of uvmsim lacks is left out (its default is then the only choice)."""
    out = {}
    for kw, mod in KINDS:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError:
            continue
        reg = [v for k, v in vars(m).items() if k.isupper() and isinstance(v, dict)]
        if len(reg) != 1:
            raise RuntimeError(f"{mod} should export one registry dict, found {len(reg)}")
        out[kw] = sorted(reg[0])
    return out


def added_latency(shared: pd.DataFrame, alone: pd.DataFrame, prefix: str) -> dict[str, float]:
    """What a tenant's kernels gained over their alone runs (kernel tables in the same
    order), split by cause: `compute` (traced durations: zero unless compute were shared),
    `walks` (translation_ns: waiting past compute and stalls for page walks), `driver`
    (driver_wait_ns: batches and copies queued behind other tenants'), `own` (the rest of the
    stall: its own fault batches, transfers and evictions). With prefix 'spike_' only the
    latency spikes count (SPIKE_RATIO, SPIKE_MIN_NS); with 'all_' every kernel."""
    if len(shared) != len(alone):
        raise RuntimeError("shared and alone kernel tables differ in length")
    d = {c: shared[c].to_numpy() - alone[c].to_numpy()
         for c in ("sim_ns", "compute_ns", "stall_ns", "translation_ns", "driver_wait_ns")}
    keep = np.ones(len(shared), bool)
    if prefix == "spike_":
        keep = ((shared["sim_ns"].to_numpy() > SPIKE_RATIO * alone["sim_ns"].to_numpy())
                & (d["sim_ns"] >= SPIKE_MIN_NS))
    walks, driver = d["translation_ns"][keep].sum(), d["driver_wait_ns"][keep].sum()
    return {f"{prefix}kernels": int(keep.sum()), f"{prefix}added_ns": d["sim_ns"][keep].sum(),
            f"{prefix}compute_ns": d["compute_ns"][keep].sum(), f"{prefix}walks_ns": walks,
            f"{prefix}driver_ns": driver,
            f"{prefix}own_ns": d["stall_ns"][keep].sum() - walks - driver}


def replay(mix, names, settings: dict, **kw) -> pd.DataFrame:
    """One simulate_multi call; its tenant rows with the alone counts and added latency."""
    mr = uvmsim.simulate_multi(mix, **kw)
    df = mr.table.copy()
    for c in ("tlb_misses", "faults", "evicted_chunks", "walk_queue_ns", "translation_ns"):
        df[f"alone_{c}"] = [a.extra.get(c, a.summary.get(c)) for a in mr.alone]
    df["alone_p99_kernel_ns"] = [float(np.percentile(a.kernels["sim_ns"], 99))
                                 for a in mr.alone]
    extra = [{**added_latency(s.kernels, a.kernels, "all_"),
              **added_latency(s.kernels, a.kernels, "spike_")}
             for s, a in zip(mr.tenants, mr.alone)]
    df = pd.concat([df, pd.DataFrame(extra)], axis=1)
    df.insert(1, "trace", names)
    for k, v in reversed(list(settings.items())):
        df.insert(0, k, v)
    df["capacity_chunks"] = mr.config["capacity_chunks"]
    for k, v in mr.system.items():
        df[k] = v
    return df


def plan() -> list[dict]:
    reg = registered()
    dflt = Translation()
    tr = dict(tlb_entries=dflt.tlb_entries, n_walkers=dflt.walkers)
    jobs = []
    for n in MIXES:
        for o in OVERSUB:
            for mem in reg.get("memory", ["shared"]):
                for wk in reg["walkers"]:
                    for sc in reg["scheduler"]:
                        jobs.append(dict(study="grid", mix=n, oversub=o, memory=mem,
                                         walkers=wk, scheduler=sc, **tr))
        for e in TLB_ENTRIES:
            for wk in TLB_WALKERS:
                jobs.append(dict(study="tlb", mix=n, oversub=TLB_OVERSUB, memory="shared",
                                 walkers=wk, scheduler="interleave", tlb_entries=e,
                                 n_walkers=dflt.walkers))
    for w in WALKER_COUNTS:
        for wk in reg["walkers"]:
            jobs.append(dict(study="nwalkers", mix=WALK_MIX, oversub=TLB_OVERSUB,
                             memory="shared", walkers=wk, scheduler="interleave",
                             tlb_entries=dflt.tlb_entries, n_walkers=w))
    return jobs


def run(out: Path) -> None:
    from tqdm import tqdm
    traces = {n: uvmsim.load_trace(ROOT / "traces" / f"{n}.uvmtrace") for n in set(CYCLE)}
    reg = registered()
    frames, skipped = [], []
    for job in tqdm(plan(), desc="multi-tenant grid", unit="mix"):
        names = [CYCLE[i % len(CYCLE)] for i in range(job["mix"])]
        kw = {k: job[k] for k, _ in KINDS if k in reg}
        try:
            frames.append(replay([traces[x] for x in names], names, job, oversub=job["oversub"],
                                 translation=Translation(tlb_entries=job["tlb_entries"],
                                                         walkers=job["n_walkers"]),
                                 **kw))
        except ConfigError as e:      # a component that cannot serve this mix says why
            skipped.append(f"{job}: {e}")
    for s in skipped:
        print("skipped", s, file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.concat(frames).to_csv(out, index=False, float_format="%.6g")
    print(f"{sum(len(f) for f in frames)} tenant rows of {len(frames)} replays: {out}")


# ---------------------------------------------------------------------------------------
# summaries of the CSV (the doc's tables) and plots

def per_mix(df: pd.DataFrame) -> pd.DataFrame:
    """One row per replay: system metrics, total faults, and the mix's TLB miss ratio
    (all tenants' misses over their lookups) shared and alone."""
    keys = ["study", "mix", "oversub", "memory", "walkers", "scheduler", "tlb_entries",
            "n_walkers"]
    keys = [k for k in keys if k in df]
    g = df.groupby(keys, sort=False)
    m = g.agg(stp=("stp", "first"), antt=("antt", "first"), fairness=("fairness", "first"),
              faults=("faults", "sum"), alone_faults=("alone_faults", "sum"),
              evicted=("evicted_chunks", "sum"), tlb_misses=("tlb_misses", "sum"),
              alone_tlb_misses=("alone_tlb_misses", "sum"), lookups=("tlb_lookups", "sum"),
              sched_wait_ms=("sched_wait_ns", lambda x: x.sum() / 1e6),
              p99=("p99_kernel_ns", "sum"), alone_p99=("alone_p99_kernel_ns", "sum"),
              **{f"{p}{c}": (f"{p}{c}", "sum") for p in ("all_", "spike_")
                 for c in ("kernels", "added_ns", "compute_ns", "walks_ns", "driver_ns",
                           "own_ns")}).reset_index()
    m["miss_ratio"] = m.tlb_misses / m.lookups
    m["alone_miss_ratio"] = m.alone_tlb_misses / m.lookups
    m["miss_rise_pct"] = 100 * (m.tlb_misses / m.alone_tlb_misses - 1)
    m["p99_ratio"] = m.p99 / m.alone_p99      # tenants' p99 latencies summed, over alone's
    return m.drop(columns=["p99", "alone_p99"])


def load(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    df = pd.read_csv(path)
    return df, per_mix(df)


def plot(path: Path, img: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    df, m = load(path)
    img.mkdir(parents=True, exist_ok=True)
    grid = m[m.study == "grid"]

    # 1: STP of every component choice, per mix and factor; colour: change against the
    # default components, on one scale for every panel so small differences look small
    ovs = sorted(grid.oversub.unique())
    dflt = grid[(grid.memory == "shared") & (grid.walkers == "shared")
                & (grid.scheduler == "interleave")].set_index(["mix", "oversub"]).stp
    change = 100 * (grid.stp.to_numpy() / dflt.loc[list(zip(grid.mix, grid.oversub))].to_numpy()
                    - 1)
    lim = max(10.0, float(np.abs(change).max()))
    grid = grid.assign(change=change)
    fig, axes = plt.subplots(len(ovs), len(MIXES), figsize=(3.2 * len(MIXES) + 2.5,
                                                             0.9 + 3.2 * len(ovs)),
                             squeeze=False, layout="constrained")
    for r, o in enumerate(ovs):
        for c, n in enumerate(MIXES):
            ax = axes[r][c]
            g = grid[(grid.oversub == o) & (grid.mix == n)]
            rows = list(dict.fromkeys(zip(g.memory, g.walkers)))
            cols = list(dict.fromkeys(g.scheduler))
            cell = {(a, b, s): (v, d) for a, b, s, v, d in
                    zip(g.memory, g.walkers, g.scheduler, g.stp, g.change)}
            z = np.array([[cell[(a, b, s)][1] for s in cols] for a, b in rows])
            im = ax.imshow(z, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
            for i, (a, b) in enumerate(rows):
                for j, s in enumerate(cols):
                    ax.text(j, i, f"{cell[(a, b, s)][0]:.2f}", ha="center", va="center",
                            fontsize=7)
            ax.set_xticks(range(len(cols)), cols, fontsize=7)
            ax.set_yticks(range(len(rows)), [f"mem={a} walk={b}" for a, b in rows]
                          if c == 0 else [], fontsize=7)
            ax.set_title(f"{n} tenants, oversub {o:g}", fontsize=9)
    fig.colorbar(im, ax=axes, fraction=0.02, label="STP change against the default "
                 "components (%); cells: STP")
    fig.savefig(img / "multitenant_stp.png", dpi=110, bbox_inches="tight")
    plt.close(fig)

    # 2: TLB miss-ratio rise over alone, by TLB size
    t = m[m.study == "tlb"]
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    for n, col in zip(MIXES, ("C0", "C1", "C2")):
        for wk, ls in zip(TLB_WALKERS, ("-", "--")):
            g = t[(t.mix == n) & (t.walkers == wk)].sort_values("tlb_entries")
            ax.plot(g.tlb_entries, g.miss_rise_pct, ls, color=col, marker="o",
                    label=f"{n} tenants, walkers={wk}")
    ax.axhline(41, color="k", lw=0.8, ls=":")
    ax.text(TLB_ENTRIES[-1], 42, "seed claim: +41 % (4 tenants)", fontsize=8, ha="right")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("TLB entries (4 KiB pages, 16 ways)")
    ax.set_ylabel("TLB misses shared / alone - 1 (%)")
    ax.set_title(f"Tenants' TLB miss ratio rise over alone (oversub {TLB_OVERSUB:g})",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(img / "multitenant_tlb.png", dpi=110)
    plt.close(fig)

    # 3: where the spikes' added latency comes from, default memory and scheduler
    sp = grid[(grid.memory == "shared") & (grid.scheduler == "interleave")]
    causes = (("spike_driver_ns", "driver queue (other tenants' faults)"),
              ("spike_own_ns", "own faults, transfers, evictions"),
              ("spike_walks_ns", "page walks"), ("spike_compute_ns", "compute"))
    labels = [f"{n} tenants, f{o:g}, walkers={wk}"
              for n, wk, o in zip(sp.mix, sp.walkers, sp.oversub)]
    tot = sp.spike_added_ns.to_numpy()
    fig, ax = plt.subplots(figsize=(max(6.4, 0.5 * len(sp)) + 2.5, 5.2))
    bottom = np.zeros(len(sp))
    for c, lab in causes:
        v = 100 * sp[c].to_numpy() / np.where(tot > 0, tot, np.nan)
        ax.bar(range(len(sp)), v, bottom=bottom, label=lab)
        bottom += np.nan_to_num(v)
    for i, k in enumerate(sp.spike_kernels):
        ax.text(i, 101, str(int(k)), ha="center", fontsize=7)
    ax.set_xticks(range(len(sp)), labels, fontsize=7, rotation=60, ha="right")
    ax.set_ylim(0, 108)
    ax.set_ylabel("share of the spikes' added latency (%)")
    ax.set_title("Causes of latency spikes (kernels > 2x and >= 10 us over alone; count "
                 "above each bar), memory=shared, scheduler=interleave", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(img / "multitenant_spikes.png", dpi=110)
    plt.close(fig)
    # 4: every scheduler on shared memory and walkers against static partitioning
    vs = against_static(grid)
    vs = vs[(vs.memory == "shared") & (vs.walkers == "shared")]
    cells = list(dict.fromkeys(zip(vs.mix, vs.oversub)))
    scheds = list(dict.fromkeys(vs.scheduler))
    st = static_choice(grid)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    w = 0.8 / len(scheds)
    for ax, col, claim, lab in ((axes[0], "stp_gain_pct", 89, "STP"),
                                (axes[1], "faults_pct", -41, "faults")):
        for i, sc in enumerate(scheds):
            g = vs[vs.scheduler == sc].set_index(["mix", "oversub"]).loc[cells]
            ax.bar(np.arange(len(cells)) + (i - (len(scheds) - 1) / 2) * w, g[col], w,
                   label=f"scheduler={sc}")
        ax.axhline(claim, color="k", lw=0.8, ls=":")
        ax.text(len(cells) - 0.5, claim, f"seed claim {claim:+d} %", fontsize=8, ha="right",
                va="bottom")
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xticks(range(len(cells)), [f"{n} tenants\nf{o:g}" for n, o in cells],
                      fontsize=7)
        ax.set_ylabel(f"{lab} against static partitioning (%)")
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Memory and walkers shared, each scheduler, against static partitioning "
                 f"(memory={st['memory']}, walkers={st['walkers']}, "
                 f"scheduler={st['scheduler']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(img / "multitenant_pilot.png", dpi=110)
    plt.close(fig)
    print(f"plots: {img}/multitenant_{{stp,tlb,spikes,pilot}}.png")


def markdown(df: pd.DataFrame, fmt: str = ".3f") -> str:
    """A markdown table (pandas' to_markdown needs tabulate, not a dependency here)."""
    cell = lambda v: format(v, fmt) if isinstance(v, (float, np.floating)) else str(v)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(False)]
    return "\n".join(lines)


SHARE_COLS = ["all_kernels", "spike_kernels", "spike_driver%", "spike_own%", "spike_walks%",
              "spike_compute%", "all_driver%", "all_own%", "all_walks%"]


def cause_shares(m: pd.DataFrame) -> pd.DataFrame:
    """Each cause's share (%) of the spikes' and of all kernels' added latency."""
    m = m.copy()
    for p in ("spike_", "all_"):
        for c in ("driver", "own", "walks", "compute"):
            m[f"{p}{c}%"] = 100 * m[f"{p}{c}_ns"] / m[f"{p}added_ns"]
    return m


def static_choice(grid: pd.DataFrame) -> dict[str, str]:
    """MIG-like static partitioning from what is registered: partitioned memory (when a
    memory component of that name exists) and partitioned walkers, no admission control."""
    mem = "partitioned" if "partitioned" in set(grid.memory) else "shared"
    return {"memory": mem, "walkers": "partitioned", "scheduler": "interleave"}


def against_static(grid: pd.DataFrame) -> pd.DataFrame:
    """Every component choice's STP and faults relative to static partitioning in the same
    mix and factor: `stp_gain_pct` (STP over static's, minus 1) and `faults_pct` (faults
    over static's, minus 1)."""
    st = static_choice(grid)
    base = grid[(grid.memory == st["memory"]) & (grid.walkers == st["walkers"])
                & (grid.scheduler == st["scheduler"])].set_index(["mix", "oversub"])
    out = grid[["mix", "oversub", "memory", "walkers", "scheduler", "stp", "faults"]].copy()
    b = base.loc[list(zip(out.mix, out.oversub))]
    out["stp_gain_pct"] = 100 * (out.stp.to_numpy() / b.stp.to_numpy() - 1)
    out["faults_pct"] = 100 * (out.faults.to_numpy() / b.faults.to_numpy() - 1)
    return out


def time_split(df: pd.DataFrame) -> pd.DataFrame:
    """The tenants' added time (finish shared minus alone), summed over a replay's tenants,
    split into waiting for the driver busy with other tenants, waiting for the scheduler,
    page walks past compute (more than alone), and the rest (its own extra faults,
    transfers and evictions); every part also as a share (%) of the added time."""
    d = df.assign(added=df.finish_ns - df.alone_ns,
                  walks=df.translation_ns - df.alone_translation_ns)
    keys = ["mix", "oversub", "memory", "walkers", "scheduler"]
    g = d.groupby(keys, sort=False)[["added", "driver_wait_ns", "sched_wait_ns", "walks"]]
    t = g.sum().reset_index()
    t["own"] = t.added - t.driver_wait_ns - t.sched_wait_ns - t.walks
    parts = ["driver_wait_ns", "sched_wait_ns", "walks", "own"]
    for c in parts:
        t[f"{c}%"] = 100 * t[c] / t.added
    t[["added", *parts]] /= 1e6
    return t.rename(columns={"added": "added_ms", "driver_wait_ns": "driver_ms",
                             "sched_wait_ns": "sched_ms", "walks": "walks_ms", "own": "own_ms",
                             "driver_wait_ns%": "driver%", "sched_wait_ns%": "sched%"})


def against_shared_walkers(split: pd.DataFrame, grid: pd.DataFrame) -> pd.DataFrame:
    """Per replay: its STP and its tenants' walk time past compute (time_split's walks_ms)
    relative to the same replay with `shared` walkers, as changes in %."""
    keys = ["mix", "oversub", "memory", "scheduler"]
    t = split.merge(grid[keys + ["walkers", "stp"]], on=keys + ["walkers"])
    base = t[t.walkers == "shared"].set_index(keys)
    b = base.loc[list(zip(*(t[k] for k in keys)))]
    t["stp_change%"] = 100 * (t.stp.to_numpy() / b.stp.to_numpy() - 1)
    t["walks_change%"] = 100 * (t.walks_ms.to_numpy() / b.walks_ms.to_numpy() - 1)
    return t[t.walkers != "shared"][keys + ["walkers", "stp", "stp_change%", "walks_ms",
                                            "walks_change%"]]


def report(path: Path) -> None:
    df, m = load(path)
    grid = m[m.study == "grid"]
    cols = ["mix", "oversub", "memory", "walkers", "scheduler", "stp", "antt", "fairness",
            "faults", "alone_faults", "evicted", "miss_ratio", "alone_miss_ratio",
            "miss_rise_pct", "p99_ratio", "sched_wait_ms"]
    print("## grid (one row per replay)")
    print(markdown(grid[cols]))
    print("\n## where the tenants' added time goes (sums over tenants, ms; shares of it %)")
    print(markdown(time_split(df[df.study == "grid"]), ".1f"))
    print("\n## each walker component against `shared` walkers (same mix, factor, memory, "
          "scheduler): STP and walk time past compute, change %")
    print(markdown(against_shared_walkers(time_split(df[df.study == "grid"]), grid)))
    print("\n## spikes and added latency, shares of each cause (%)")
    keys = ["mix", "oversub", "memory", "walkers", "scheduler"]
    print(markdown(cause_shares(grid)[keys + SHARE_COLS], ".1f"))
    print("\n## walker count (4 tenants, oversub 1.5), shares of each cause (%)")
    w = m[m.study == "nwalkers"]
    print(markdown(cause_shares(w)[["n_walkers", "walkers", "stp", "antt", "miss_ratio"]
                                   + SHARE_COLS], ".3f"))
    print("\n## against static partitioning (memory and walkers partitioned, interleave)")
    print(markdown(against_static(grid), ".3f"))
    print("\n## per tenant, 4 tenants, oversub 1.5, default memory and scheduler")
    d = df[(df.study == "grid") & (df.mix == 4) & (df.oversub == 1.5) & (df.memory == "shared")
           & (df.scheduler == "interleave")].copy()
    d["walks_ms"] = (d.translation_ns - d.alone_translation_ns) / 1e6
    d["driver_ms"] = d.driver_wait_ns / 1e6
    d["alone_miss_ratio"] = d.alone_tlb_misses / d.tlb_lookups
    d["walk_queue_us"] = d.walk_queue_ns_per_walk / 1e3
    d["alone_walk_queue_us"] = d.alone_walk_queue_ns / d.alone_tlb_misses / 1e3
    print(markdown(d[["walkers", "tenant", "trace", "slowdown", "alone_miss_ratio",
                      "tlb_miss_ratio", "alone_walk_queue_us", "walk_queue_us", "walks_ms",
                      "driver_ms"]]))
    print("\n## memory components (walkers shared, scheduler interleave)")
    mem = grid[(grid.walkers == "shared") & (grid.scheduler == "interleave")]
    print(markdown(mem[["mix", "oversub", "memory", "stp", "antt", "fairness", "faults",
                        "evicted"]]))
    print("\n## each scheduler on shared memory and walkers against static partitioning "
          "(STP gain %, faults change %)")
    vs = against_static(grid)
    vs = vs[(vs.memory == "shared") & (vs.walkers == "shared")]
    piv = vs.pivot_table(index=["mix", "oversub"], columns="scheduler",
                         values=["stp_gain_pct", "faults_pct"]).reset_index()
    piv.columns = [f"{a}:{b}" if b else a for a, b in piv.columns]
    print(markdown(piv, ".1f"))
    print("\n## each scheduler against `interleave`, memory and walkers shared (STP change %, "
          "faults change %)")
    sh = grid[(grid.memory == "shared") & (grid.walkers == "shared")]
    base = sh[sh.scheduler == "interleave"].set_index(["mix", "oversub"])
    b = base.loc[list(zip(sh.mix, sh.oversub))]
    sh = sh.assign(stp_change=100 * (sh.stp.to_numpy() / b.stp.to_numpy() - 1),
                   faults_change=100 * (sh.faults.to_numpy() / b.faults.to_numpy() - 1))
    print(markdown(sh[sh.scheduler != "interleave"][["mix", "oversub", "scheduler", "stp",
                                                     "stp_change", "faults",
                                                     "faults_change", "sched_wait_ms"]]))
    print("\n## TLB sweep")
    t = m[m.study == "tlb"]
    print(markdown(t[["mix", "walkers", "tlb_entries", "alone_miss_ratio", "miss_ratio",
                      "miss_rise_pct", "stp"]]))
    print("\n## per tenant, TLB sweep, 4 tenants")
    d = df[(df.study == "tlb") & (df.mix == 4)].copy()
    d["rise_pct"] = 100 * (d.tlb_misses / d.alone_tlb_misses - 1)
    print(markdown(d[["walkers", "tlb_entries", "tenant", "trace", "tlb_miss_ratio",
                      "rise_pct"]]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", nargs="?", choices=("all", "run", "plot", "report"), default="all")
    ap.add_argument("--csv", type=Path, default=RESULTS)
    ap.add_argument("--img", type=Path, default=IMG)
    a = ap.parse_args()
    if a.step in ("all", "run"):
        run(a.csv)
    if a.step in ("all", "plot"):
        plot(a.csv, a.img)
    if a.step in ("all", "report"):
        report(a.csv)


if __name__ == "__main__":
    main()
