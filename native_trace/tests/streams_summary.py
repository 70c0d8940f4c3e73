"""Sizes and costs of v1.2 captures against the bundled ones (device_run.sh, step traces12).

    python3 native_trace/tests/streams_summary.py NEW_DIR OLD_DIR --json OUT.json --csv OUT.csv

For every NAME.uvmtrace in NEW_DIR: its files' bytes (the v1.1 part, the stream part), access
rows, stream rows and blocks, the kernels without a stream and why, and the page pass's wall
time; beside the same capture in OLD_DIR (the bundled trace). Each new trace is loaded with its
streams (which checks every row).
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from uvmsim import load_trace  # noqa: E402

STREAM_FILES = ("blocks.parquet", "block_accesses.parquet")


def facts(d: Path) -> dict:
    m = json.loads((d / "manifest.json").read_text())
    src = m["source"]
    sizes = {f.name: f.stat().st_size for f in d.iterdir()}
    rows = {f[:-8]: pq.ParquetFile(d / f).metadata.num_rows for f in sizes if f.endswith(".parquet")}
    out = {"minor": m.get("minor", 0), "bytes": sum(sizes.values()),
           "stream_bytes": sum(v for k, v in sizes.items() if k in STREAM_FILES),
           "kernels": rows.get("kernels"), "access_rows": rows.get("accesses"),
           "stream_rows": rows.get("block_accesses", 0), "stream_blocks": rows.get("blocks", 0),
           "pages_pass_wall_s": (src.get("pass_wall_s") or {}).get("pages"),
           "timing_pass_wall_s": (src.get("pass_wall_s") or {}).get("timing")}
    out["v11_bytes"] = out["bytes"] - out["stream_bytes"]
    st = src.get("streams") or {}
    out["kernels_with_stream"] = st.get("with_stream")
    out["without_stream_by_reason"] = st.get("without_stream_by_reason")
    out["launch_attribute_mismatches"] = src.get("launch_attribute_mismatches")
    end = src.get("pages_pass_end") or {}
    out["timers"] = end.get("timers")
    # pages lost show here: kernels without a page, modules the page pass patched, warnings
    out["kernels_without_pages"] = src.get("kernels_without_pages")
    out["modules_patched"] = end.get("modules")
    out["warnings"] = src.get("warnings") or []
    out["gpu"] = src.get("gpu")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("new")
    ap.add_argument("old")
    ap.add_argument("--json")
    ap.add_argument("--csv")
    a = ap.parse_args()
    res = {}
    for d in sorted(Path(a.new).glob("*.uvmtrace")):
        r = {"new": facts(d)}
        try:
            t = load_trace(d, streams=True)  # every row of every table checked
            r["new"]["units"] = sorted({int(u) for u in t.streams.k_unit if u}) if t.streams else []
        except Exception as e:  # noqa: BLE001 - reported in the row, the other traces go on
            r["new"]["units"] = []
            r["new"]["warnings"] = r["new"]["warnings"] + [f"load_trace failed: {e}"]
        old = Path(a.old) / d.name
        if old.is_dir():
            r["old"] = facts(old)
            o, n = r["old"], r["new"]
            r["stream_rows_per_access_row"] = n["stream_rows"] / max(n["access_rows"] or 1, 1)
            # the same program's pages: near 1 unless pages are lost (or the GPU's libraries
            # pick other kernels: the bundled traces may come from another GPU, see "gpu")
            r["access_rows_vs_old"] = (n["access_rows"] or 0) / max(o["access_rows"] or 1, 1)
            # the size goal: every v1.2 row (accesses, blocks, block accesses) against
            # the v1.1 trace's rows
            r["v12_rows_vs_v11_rows"] = ((n["access_rows"] or 0) + n["stream_rows"] + n["stream_blocks"]) \
                / max(o["access_rows"] or 1, 1)
            r["bytes_vs_old"] = n["bytes"] / max(o["bytes"], 1)
            if o["pages_pass_wall_s"] and n["pages_pass_wall_s"]:
                r["pages_pass_wall_vs_old"] = n["pages_pass_wall_s"] / o["pages_pass_wall_s"]
        res[d.name] = r
        print(json.dumps({d.name: r}, indent=1, default=str), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2, default=str) + "\n")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["trace", "kernels", "kernels_without_pages", "modules_patched", "access_rows",
                        "old_access_rows", "access_rows_vs_old", "stream_blocks", "stream_rows",
                        "stream_rows_per_access_row", "v12_rows_vs_v11_rows", "kernels_with_stream",
                        "bytes", "v11_bytes", "stream_bytes", "old_bytes", "bytes_vs_old",
                        "pages_pass_wall_s", "old_pages_pass_wall_s", "gpu", "old_gpu", "warnings"])
            nan = float("nan")
            for name, r in res.items():
                n, o = r["new"], r.get("old", {})
                w.writerow([name, n["kernels"], n["kernels_without_pages"], n["modules_patched"],
                            n["access_rows"], o.get("access_rows"),
                            f"{r.get('access_rows_vs_old', nan):.3f}", n["stream_blocks"],
                            n["stream_rows"], f"{r.get('stream_rows_per_access_row', nan):.2f}",
                            f"{r.get('v12_rows_vs_v11_rows', nan):.2f}", n["kernels_with_stream"],
                            n["bytes"], n["v11_bytes"], n["stream_bytes"], o.get("bytes"),
                            f"{r.get('bytes_vs_old', nan):.2f}", n["pages_pass_wall_s"],
                            o.get("pages_pass_wall_s"), n["gpu"], o.get("gpu"),
                            " | ".join(n["warnings"])])
    return 0


if __name__ == "__main__":
    sys.exit(main())
