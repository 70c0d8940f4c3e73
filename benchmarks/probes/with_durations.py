"""A probe trace recorded on one card, with the kernel durations of a recording on another.

    python benchmarks/probes/with_durations.py SRC_DIR DURATIONS_DIR OUT_DIR

For each SRC_DIR/<probe>.uvmtrace (e.g. v1.2 traces with per-thread-block streams, recorded
on an H200 with `RECORD_ONLY=1 bash benchmarks/probes/run_device.sh`) that DURATIONS_DIR also
holds (e.g. benchmarks/probes/traces, v1.1, recorded on the H100 the probes' real runs were
made on), OUT_DIR/<probe>.uvmtrace is SRC's trace with each kernel's `duration_ns` taken from
DURATIONS' kernel of the same rank. The probes' page touches are the same on both cards (one
program, the same grids and arrays); a kernel's duration is its uninstrumented time, the
replay's compute time, which is the card's. The manifest says so
(`source.kernel_durations_gpu`, `source.kernel_durations_from`), and
benchmarks/validate/fit.py takes that card as the trace's. Refuses a pair whose kernels
differ in number, id or name.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq


def with_durations(src: Path, durations: Path, out: Path) -> None:
    a = pq.read_table(src / "kernels.parquet")
    b = pq.read_table(durations / "kernels.parquet")
    for col in ("kernel_id", "name"):
        if a.column(col).to_pylist() != b.column(col).to_pylist():
            raise SystemExit(f"{src.name}: kernels' {col} differ from {durations}'s")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(src, out)
    i = a.schema.get_field_index("duration_ns")
    a = a.set_column(i, a.schema.field(i), b.column("duration_ns").cast(a.schema.field(i).type))
    pq.write_table(a, out / "kernels.parquet")
    m = json.loads((src / "manifest.json").read_text())
    bm = json.loads((durations / "manifest.json").read_text())
    m.setdefault("source", {})
    m["source"]["kernel_durations_gpu"] = bm.get("source", {}).get("gpu", "")
    m["source"]["kernel_durations_from"] = str(durations)
    (out / "manifest.json").write_text(json.dumps(m, indent=1) + "\n")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    src, dur, out = (Path(x) for x in argv)
    for name, d in (("SRC_DIR", src), ("DURATIONS_DIR", dur)):
        if not d.is_dir():
            print(f"{name} {d}: not a folder", file=sys.stderr)
            return 2
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for d in sorted(src.glob("*.uvmtrace")):
        if (dur / d.name).is_dir():
            with_durations(d, dur / d.name, out / d.name)
            n += 1
        else:
            print(f"{d.name}: not in {dur}, left out", file=sys.stderr)
    print(f"{n} traces written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
