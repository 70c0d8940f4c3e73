"""The reader at the edges a second fuzz found: many one-row row groups, and memory at the
touched-window limit.

    python benchmarks/reader_limits.py              # both
    python benchmarks/reader_limits.py --row-groups # only the row-group timing
    python benchmarks/reader_limits.py --windows    # only the memory at the window limit

Row groups: gpt2_small's access rows (95,984) rewritten with one row per row group (a 37 MB
footer) and as one row group; each loaded by `load_trace` in a fresh process, after a
warm-up load; best of --repeat. The one-row groups are loaded twice: pinned to one core
(the reader decodes in the loading thread) and on every CPU the process may use (it
decodes runs of row groups in threads: src/uvmsim/trace/io.py, _batches). Goal: <= 2 s
for the one-row groups.

Windows: a 7 KB trace whose one prefetch spans 2^20 windows of 2 MiB (the reader's limit,
2^29 pages) loaded and replayed in a fresh process; printed: peak RSS growth over the
process after its warm-up, in GiB and bytes per page (goal: under 8 GiB). Then the same
trace with 2^20 + 1 and 2^22 - 1 windows, which must be refused with TraceFormatError
before any page map is built (time and peak printed too). Figures: docs/reliability.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))

CHILD = textwrap.dedent("""
    import json, os, sys, time
    sys.path.insert(0, sys.argv[1])
    from _measure import reset_peak, status_kib
    if hasattr(os, "sched_setaffinity") and os.environ.get("READER_LIMITS_PIN") == "1":
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import uvmsim
    from uvmsim import TraceFormatError, load_trace
    path, warm, replay, repeat = sys.argv[2], sys.argv[3], sys.argv[4] == "1", int(sys.argv[5])
    t = load_trace(warm)
    if replay:
        uvmsim.simulate(t, capacity_chunks=64)
    reset_peak()
    base = status_kib("VmRSS")
    best, cpu, out = float("inf"), float("inf"), {}
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            t = load_trace(path)
            out["pages"] = int(t.arrays.page_block.size)
            out["rows"] = int(t.n_accesses)
        except TraceFormatError as e:
            out["refused"] = str(e)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    if repeat > 1:
        # pyarrow alone, for scale: open the file and decode every row group
        import pyarrow.parquet as pq
        f = os.path.join(path, "accesses.parquet")
        pa_best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            pf = pq.ParquetFile(f)
            n = pf.metadata.num_row_groups
            sum(b.num_rows for b in pf.iter_batches(batch_size=1 << 20,
                                                    row_groups=list(range(n))))
            pa_best = min(pa_best, time.perf_counter() - t0)
        out["pyarrow_s"] = pa_best
    out["load_cpu_s"] = cpu
    if replay and "refused" not in out:
        t0 = time.perf_counter()
        r = uvmsim.simulate(t, capacity_chunks=64)
        out["replay_s"] = time.perf_counter() - t0
        out["zero_fill_pages"] = int(r.summary["zero_fill_pages"])
    out["load_s"] = best
    out["peak_growth_kib"] = status_kib("VmHWM") - base
    print(json.dumps(out))
""")


def child(path: Path, warm: Path, replay: bool, repeat: int, pin: bool = True) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), READER_LIMITS_PIN="1" if pin else "0")
    p = subprocess.run([sys.executable, "-c", CHILD, str(HERE), str(path), str(warm),
                        "1" if replay else "0", str(repeat)], env=env, capture_output=True,
                       text=True)
    if p.returncode != 0:
        raise SystemExit(f"child failed ({p.returncode}): {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def row_groups(work: Path, repeat: int) -> None:
    import pyarrow.parquet as pq
    src = ROOT / "traces" / "gpt2_small.uvmtrace"
    one, many = work / "one.uvmtrace", work / "many.uvmtrace"
    shutil.copytree(src, one)
    shutil.copytree(src, many)
    t = pq.read_table(src / "accesses.parquet")
    pq.write_table(t, one / "accesses.parquet")
    pq.write_table(t, many / "accesses.parquet", row_group_size=1)
    md = pq.read_metadata(many / "accesses.parquet")
    foot = (many / "accesses.parquet").stat().st_size
    print(f"gpt2_small access rows: {t.num_rows:,}; one-row groups: {md.num_row_groups:,} "
          f"({foot / 1e6:.0f} MB file)")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    for name, path, pin in (("one row group", one, True), ("one row per group", many, True),
                            ("one row per group", many, False)):
        r = child(path, one, False, repeat, pin)
        where = "1 core" if pin else f"{cpus} CPUs"
        print(f"  {name:<18} {where:<7} load_trace {r['load_s']:.2f} s wall, "
              f"{r['load_cpu_s']:.2f} s CPU (best of {repeat}); pyarrow alone (open, decode "
              f"every row group, one reader) {r['pyarrow_s']:.2f} s; {r['rows']:,} rows")
    print(f"(load average {os.getloadavg()[0]:.1f})")


def windows(work: Path) -> None:
    from uvmsim.trace import _resolve
    from uvmsim.trace.builder import TraceBuilder
    from uvmsim.trace.io import write_trace

    def write(n: int) -> Path:
        b = TraceBuilder()
        x = b.alloc(n << 21)
        b.prefetch(b.base(x), n << 21, "gpu")
        b.kernel("k", reads=b.pages(x, 0, 1))
        return write_trace(work / f"w{n}.uvmtrace", **b.tables(), validate=False)

    warm = write(2)
    size = sum(f.stat().st_size for f in write(1 << 20).iterdir())
    print(f"prefetch over 2^20 windows (the limit, {_resolve.MAX_BLOCKS:,}): a "
          f"{size / 1e3:.1f} KB trace")
    r = child(work / f"w{1 << 20}.uvmtrace", warm, True, 1)
    gib = r["peak_growth_kib"] / (1 << 20)
    print(f"  load {r['load_s']:.1f} s, replay {r['replay_s']:.1f} s; {r['pages']:,} pages; "
          f"peak RSS growth {gib:.2f} GiB ({r['peak_growth_kib'] * 1024 / r['pages']:.1f} "
          f"bytes per page)")
    for n in ((1 << 20) + 1, (1 << 22) - 1):
        r = child(write(n), warm, True, 1)
        print(f"  {n:,} windows: {'refused' if 'refused' in r else 'LOADED'} in "
              f"{r['load_s']:.3f} s, peak growth {r['peak_growth_kib'] / 1024:.0f} MiB: "
              f"{r.get('refused', '')[-90:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--row-groups", action="store_true")
    ap.add_argument("--windows", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    both = not (a.row_groups or a.windows)
    with tempfile.TemporaryDirectory(prefix="uvmsim-limits-") as d:
        if both or a.row_groups:
            row_groups(Path(d), a.repeat)
        if both or a.windows:
            windows(Path(d))


if __name__ == "__main__":
    main()
