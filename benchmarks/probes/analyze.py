"""The probe table for docs: real runs against replays of the probes' traces.

    python3 benchmarks/probes/analyze.py RESULTS_DIR [--traces DIR] [--models h200,contract]

RESULTS_DIR holds what benchmarks/probes/run_device.sh returned under results/
(probes.csv, kernels.csv, phases.csv). --traces is a folder with the returned
traces_N.tar.gz (unpacked into RESULTS_DIR/traces/) or with the *.uvmtrace folders
themselves; default: the folder above RESULTS_DIR. Each run is replayed with
``uvmsim.simulate(trace, model=M, capacity_bytes=free_bytes - reserve_bytes)``: the memory
the balloon left for managed data, as in the validation (docs/validation.md).

Writes into RESULTS_DIR: probe_table.csv (one row per run and model: real and replayed
times, GPU faults, HtoD and DtoH bytes, evictions, the pages still mapped on the CPU at the
end), probe_table.md (the same for docs, model h200), kernels_compare.csv (per kernel, when
the trace and the run have the same kernels) and hypotheses.md (each hypothesis of
docs/model.md with the rows that decide it and what they say).
"""
from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from uvmsim import simulate  # noqa: E402
from uvmsim.trace import load_trace  # noqa: E402

MiB = 1 << 20
BLOCK = 2 * MiB


def find_traces(results: Path, where: Path) -> dict[str, Path]:
    """name -> trace folder; tarballs in `where` are unpacked into results/traces first."""
    dest = results / "traces"
    for t in sorted(where.glob("traces_*.tar*")):
        dest.mkdir(exist_ok=True)
        with tarfile.open(t) as tf:
            tf.extractall(dest, filter="data")
    found = {}
    for d in (dest, where):
        for p in sorted(d.glob("*.uvmtrace")):
            found.setdefault(p.name[: -len(".uvmtrace")], p)
    return found


def replay(trace, capacity_bytes: int, model: str) -> tuple[dict, pd.DataFrame]:
    r = simulate(trace, model=model, capacity_bytes=int(capacity_bytes))
    s, x = r.summary, r.extra
    dtoh = (int(s["dtoh_bytes_evict"]) + int(s["dtoh_bytes_api_prefetch"])
            + int(x.get("dtoh_bytes_host", 0)))
    return ({"replay_s": float(r.kernels["sim_ns"].sum()) / 1e9,
             "replay_faults": int(s["faults"]),
             "replay_fault_batches": int(s["fault_batches"]),
             "replay_htod_bytes": int(s["htod_bytes"]), "replay_dtoh_bytes": dtoh,
             "replay_dtoh_evict_bytes": int(s["dtoh_bytes_evict"]),
             "replay_evicted_chunks": int(s["evicted_chunks"]),
             "replay_zero_fill_pages": int(s["zero_fill_pages"]),
             "replay_capacity_chunks": int(s["capacity_chunks"]),
             "replay_peak_blocks": int(s["peak_blocks"])}, r.kernels)


def build(results: Path, traces: dict[str, Path], models: list[str]) -> tuple[pd.DataFrame,
                                                                               pd.DataFrame]:
    runs = pd.read_csv(results / "probes.csv")
    kern = pd.read_csv(results / "kernels.csv") if (results / "kernels.csv").exists() else None
    loaded: dict[str, object] = {}
    rows, krows = [], []
    for _, r in runs.iterrows():
        base = r.to_dict()
        ok = r["status"] in ("ok", "censored") and not pd.isna(r.get("capacity_bytes"))
        tname = r["trace"] if isinstance(r["trace"], str) else r["probe"]
        for m in models:
            row = dict(base, model=m)
            if ok and tname in traces:
                if tname not in loaded:
                    loaded[tname] = load_trace(traces[tname])
                p, kdf = replay(loaded[tname], int(r["capacity_bytes"]), m)
                row.update(p)
                if kern is not None:
                    rk = kern[(kern.probe == r["probe"]) & (kern.factor == r["factor"])]
                    if len(rk) == len(kdf):
                        for (_, a), (_, b) in zip(rk.iterrows(), kdf.iterrows()):
                            krows.append({"probe": r["probe"], "factor": r["factor"], "model": m,
                                          "k": a["k"], "name": a["name"],
                                          "real_ms": a["duration_ns"] / 1e6,
                                          "replay_ms": b["sim_ns"] / 1e6,
                                          "real_htod_bytes": a["htod_bytes"],
                                          "replay_htod_bytes": b["htod_bytes"],
                                          "real_dtoh_bytes": a["dtoh_bytes"],
                                          "replay_dtoh_evict_bytes": b["dtoh_bytes_evict"],
                                          "real_gpu_fault_records": a["gpu_fault_records"],
                                          "replay_faults": b["faults"],
                                          "replay_evicted_chunks": b["evicted_chunks"]})
            rows.append(row)
    df = pd.DataFrame(rows)
    for side, col in (("real", "real_s"), ("replay", "replay_s")):
        if col in df:
            b = df[df["factor"] == 1].set_index(["probe", "model"])[col]
            df[f"{side}_slowdown"] = [v / b.get((p, m), np.nan)
                                      for p, m, v in zip(df["probe"], df["model"], df[col])]
    return df, pd.DataFrame(krows)


def _mib(x) -> str:
    return "" if pd.isna(x) else f"{x / MiB:,.0f}"


def markdown(df: pd.DataFrame, model: str) -> str:
    d = df[df["model"] == model]
    head = ("| probe | factor | real ms | replay ms | real slowdown | replayed | CUPTI fault records "
            "| replay faults | real HtoD MiB (demand / prefetch) | replay HtoD MiB | real DtoH MiB "
            "(eviction / coherence) | replay DtoH MiB | replay evicted chunks | CPU-mapped at end |")
    lines = [head, "| " + " | ".join(["---"] * (head.count("|") - 1)) + " |"]
    for _, r in d.iterrows():
        if r["status"] not in ("ok", "censored"):
            lines.append(f"| {r['probe']} | {r['factor']:g} | {r['status']} |" + " |" * 11)
            continue
        cen = ">" if r["status"] == "censored" else ""
        mapped = ("" if pd.isna(r.get("cpu_mapped_end")) or pd.isna(r.get("pages_end"))
                  else f"{r['cpu_mapped_end'] / max(r['pages_end'], 1):.0%}")
        lines.append(
            f"| {r['probe']} | {r['factor']:g} | {cen}{r['real_s'] * 1e3:,.1f} | "
            f"{r.get('replay_s', np.nan) * 1e3:,.1f} | {r.get('real_slowdown', np.nan):.2f} | "
            f"{r.get('replay_slowdown', np.nan):.2f} | {int(r['gpu_fault_records'])} | "
            f"{'' if pd.isna(r.get('replay_faults')) else int(r['replay_faults'])} | "
            f"{_mib(r['htod_bytes'])} ({_mib(r['htod_demand_bytes'])} / "
            f"{_mib(r['htod_prefetch_bytes'])}) | {_mib(r.get('replay_htod_bytes'))} | "
            f"{_mib(r['dtoh_bytes'])} ({_mib(r['dtoh_eviction_bytes'])} / "
            f"{_mib(r['dtoh_coherence_bytes'])}) | {_mib(r.get('replay_dtoh_bytes'))} | "
            f"{'' if pd.isna(r.get('replay_evicted_chunks')) else int(r['replay_evicted_chunks'])}"
            f" | {mapped} |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- hypotheses
def _get(df: pd.DataFrame, probe: str, factor: float, col: str):
    m = df[(df["probe"] == probe) & (df["factor"] == factor)]
    return None if m.empty or pd.isna(m.iloc[0].get(col)) else m.iloc[0][col]


def hypotheses(runs: pd.DataFrame, kern: pd.DataFrame | None) -> str:
    """docs/model.md's hypotheses with the rows that decide them (probes.csv, kernels.csv)."""
    out = []

    def say(h: str, lines: list[str]) -> None:
        out.append(f"## {h}\n" + "\n".join(f"- {x}" for x in lines) + "\n")

    # H1: host data past capacity is read where it is (CPU mappings stay) or migrated
    lines = []
    for p in ("host_read_stream", "host_read_rows", "host_read_cols", "host_rw"):
        for f in (1.0, 1.25, 1.5, 2.0):
            m, n = _get(runs, p, f, "cpu_mapped_end"), _get(runs, p, f, "pages_end")
            h, d = _get(runs, p, f, "htod_bytes"), _get(runs, p, f, "dtoh_bytes")
            cap, fp = _get(runs, p, f, "capacity_bytes"), _get(runs, p, f, "footprint_bytes")
            if m is None or n is None or h is None:
                continue
            lines.append(f"{p} f{f:g}: {m / n:.0%} of A still mapped on the CPU after the last "
                         f"GPU pass; HtoD {h / MiB:,.0f} MiB, DtoH {d / MiB:,.0f} MiB, capacity "
                         f"{cap / MiB:,.0f} MiB of {fp / MiB:,.0f}")
    say("H1 (host data read in place past capacity): confirmed where a large share stays "
        "CPU-mapped with HtoD ~ capacity and DtoH 0; refuted where ~0% stays mapped", lines)
    # H2: CUPTI drops GPU fault records after a burst of CPU-fault events
    lines = []
    for p in ("host_read_stream", "host_read_nocpu", "host_read_drain", "flood_gpu_read",
              "gpu_read"):
        for f in (1.0, 1.5):
            g = _get(runs, p, f, "gpu_fault_records")
            if g is not None:
                lines.append(f"{p} f{f:g}: {int(g)} GPU fault records, "
                             f"{int(_get(runs, p, f, 'cpu_page_faults') or 0)} CPU fault records, "
                             f"HtoD demand {(_get(runs, p, f, 'htod_demand_bytes') or 0) / MiB:,.1f} MiB")
    say("H2 (zero GPU fault records are CUPTI's, not the driver's): confirmed if nocpu or "
        "drain show records where host_read_stream shows none, or flood_gpu_read loses them", lines)
    # H3: eviction copies back every resident page; read-only host data too
    lines = []
    for p in ("gpu_read", "host_read_stream", "host_rw", "memset_read", "memcpy_read"):
        for f in (1.5, 2.0):
            e, h = _get(runs, p, f, "dtoh_eviction_bytes"), _get(runs, p, f, "htod_bytes")
            cap = _get(runs, p, f, "capacity_bytes")
            if e is not None:
                d = _get(runs, p, f, "dtoh_bytes") or 0
                lines.append(f"{p} f{f:g}: DtoH eviction {e / MiB:,.0f} MiB, HtoD {h / MiB:,.0f} "
                             f"MiB, capacity {cap / MiB:,.0f} MiB; HtoD - DtoH - capacity = "
                             f"{(h - d - cap) / MiB:,.0f} MiB (> 0: DtoH records missing, "
                             "since what stays on the GPU fits in its capacity)")
    say("H3 (eviction copies every GPU-resident page back): confirmed where DtoH eviction ~ "
        "HtoD - capacity for GPU- and host-written data alike; a read-only host array with "
        "HtoD > capacity, no DtoH and ~0% CPU-mapped at the end means lost records, not a "
        "clean eviction", lines)
    # H4/H5: partial blocks and small allocations
    lines = []
    for p in ("partial_16k", "partial_0k", "small_allocs"):
        for f in (1.0, 1.25):
            e = _get(runs, p, f, "dtoh_eviction_bytes")
            if e is not None:
                lines.append(f"{p} f{f:g}: DtoH eviction {e / MiB:,.1f} MiB, real "
                             f"{(_get(runs, p, f, 'real_s') or 0) * 1e3:,.1f} ms; VA ranges of "
                             f"its first group {_get(runs, p, f, 'main_ranges')} "
                             f"({(_get(runs, p, f, 'main_range_bytes') or 0) / MiB:,.2f} MiB, "
                             f"{_get(runs, p, f, 'main_ranges_2m_aligned')} 2 MiB-aligned) for "
                             f"{_get(runs, p, f, 'allocs')} allocations")
    say("H4/H5 (partial blocks and small allocations take only their pages; small managed "
        "allocations share VA ranges): see the eviction at f1 and the VA ranges", lines)
    # H6: first-arrival eviction order
    lines = []
    if kern is not None and not kern.empty:
        for f in (1.0, 1.25, 1.5, 2.0):
            k = kern[(kern.probe == "evict_order") & (kern.factor == f)]
            for name in ("k_ev_probe_first", "k_ev_probe_second"):
                r = k[k["name"] == name]
                if len(r):
                    lines.append(f"evict_order f{f:g} {name}: HtoD {int(r.iloc[0]['htod_bytes']) / MiB:,.2f}"
                                 f" MiB, {r.iloc[0]['duration_ns'] / 1e3:,.0f} us")
    say("H6 (eviction order is first arrival, fifo2m): confirmed where k_ev_probe_first moves "
        "block 0 back in (HtoD ~2 MiB) at f1.25 and f1.5 while the block was re-filled after "
        "blocks 1..Q-1; LRU by last residency change would keep it", lines)
    # H7: CPU re-touches
    lines = []
    for p in ("cpu_retouch_read", "cpu_retouch_write"):
        for f in (1.0, 1.5):
            c = _get(runs, p, f, "dtoh_coherence_bytes")
            if c is not None:
                lines.append(f"{p} f{f:g}: DtoH coherence {c / MiB:,.1f} MiB, CPU fault records "
                             f"{int(_get(runs, p, f, 'cpu_page_faults') or 0)}, HtoD "
                             f"{(_get(runs, p, f, 'htod_bytes') or 0) / MiB:,.1f} MiB, remote maps "
                             f"{int(_get(runs, p, f, 'remote_map_records') or 0)}")
    say("H7 (a CPU touch migrates its 64 KiB block or more back, read or write alike): "
        "DtoH coherence per touched 64 KiB; equal for read and write", lines)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--traces", type=Path)
    ap.add_argument("--models", default="h200")
    a = ap.parse_args(argv)
    res = a.results
    if not (res / "probes.csv").exists():
        ap.error(f"{res / 'probes.csv'}: missing (the results/ folder run_device.sh returned)")
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    traces = find_traces(res, a.traces or res.parent)
    df, kc = build(res, traces, models)
    df.to_csv(res / "probe_table.csv", index=False)
    if not kc.empty:
        kc.to_csv(res / "kernels_compare.csv", index=False)
    md = markdown(df, models[0])
    (res / "probe_table.md").write_text(md)
    kern = pd.read_csv(res / "kernels.csv") if (res / "kernels.csv").exists() else None
    hyp = hypotheses(pd.read_csv(res / "probes.csv"), kern)
    (res / "hypotheses.md").write_text(hyp)
    print(md)
    print(hyp)
    missing = sorted({t for t in df["trace"].dropna()} - set(traces))
    if missing:
        print(f"no trace for: {', '.join(missing)} (those rows are not replayed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
