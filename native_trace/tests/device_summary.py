"""One page that says what a device_run.sh call found (run by it last; also by hand):

    python3 native_trace/tests/device_summary.py OUT_DIR

Reads OUT_DIR/steps.tsv (each step's exit status and seconds), gpu_tests.xml (pytest's JUnit
report), traces12.csv (streams_summary.py) and bench12*.csv (benchmarks/trace_overhead.py);
writes OUT_DIR/gpu_tests.csv (one row per GPU test: outcome, seconds, first line of the
failure) and OUT_DIR/SUMMARY.md, and prints the latter. A file that is missing is said to be
missing (its step did not run, or ran out of time): nothing here fails.
"""
from __future__ import annotations

import csv
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

# the goals for the v1.2 collector (docs/performance.md)
ROWS_GOAL = 10.0       # every v1.2 row against the v1.1 trace's rows
TRAIN_STEPS_GOAL = 15.0  # page pass against plain, on the training steps


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _f(v: str | None) -> float | None:
    try:
        return float(v) if v not in (None, "") else None
    except ValueError:
        return None


def gpu_tests(out: Path, lines: list[str]) -> None:
    xml = out / "gpu_tests.xml"
    if not xml.is_file():
        lines.append("GPU tests: no gpu_tests.xml (the step did not run or was killed); "
                     "see gpu_tests.log\n")
        return
    rows = []
    for tc in ET.parse(xml).getroot().iter("testcase"):
        outcome, msg = "passed", ""
        if not tc.get("name"):
            # pytest interrupted by the step's timeout (SIGINT) writes a nameless testcase for
            # the test that was running: that test did not pass
            outcome, msg = "interrupted", "the step's time ran out during this test"
        for tag in ("failure", "error", "skipped"):
            e = tc.find(tag)
            if e is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                msg = (e.get("message") or e.text or "").strip().splitlines()
                msg = msg[0][:300] if msg else ""
                break
        rows.append({"test": f"{tc.get('classname', '')}::{tc.get('name', '')}",
                     "outcome": outcome, "seconds": tc.get("time", ""), "message": msg})
    with open(out / "gpu_tests.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["test", "outcome", "seconds", "message"])
        w.writeheader()
        w.writerows(rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    lines.append("GPU tests (gpu_tests.csv, full log gpu_tests.log): "
                 + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + "\n")
    for r in rows:
        if r["outcome"] not in ("passed", "skipped"):
            lines.append(f"- {r['outcome'].upper()} {r['test']}: {r['message']}")
    lines.append("")


def traces(out: Path, lines: list[str]) -> None:
    p = out / "traces12.csv"
    if not p.is_file():
        lines.append("v1.2 captures: no traces12.csv (see traces12.log)\n")
        return
    lines.append("v1.2 captures against the bundled v1.1 traces (traces12.csv; goal: v1.2 rows "
                 f"<= {ROWS_GOAL:g}x v1.1 rows; access rows near 1x the bundled trace's, else "
                 "pages are lost or the GPU's libraries chose other kernels):\n")
    lines.append("| trace | kernels | without pages | access rows vs v1.1 | stream rows / access row "
                 "| v1.2 rows / v1.1 rows | bytes vs v1.1 | page pass s (v1.1 s) | warnings |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in _rows(p):
        ratio = _f(r.get("v12_rows_vs_v11_rows"))
        flag = "" if ratio is None or ratio <= ROWS_GOAL else " (over goal)"
        lines.append(f"| {r['trace']} | {r['kernels']} | {r['kernels_without_pages']} | "
                     f"{r['access_rows']} / {r['old_access_rows']} = {r['access_rows_vs_old']} | "
                     f"{r['stream_rows_per_access_row']} | {r['v12_rows_vs_v11_rows']}{flag} | "
                     f"{r['bytes_vs_old']} | {r['pages_pass_wall_s']} ({r['old_pages_pass_wall_s']}) | "
                     f"{r.get('warnings') or ''} |")
    lines.append("")


def bench(out: Path, lines: list[str]) -> None:
    files = sorted(out.glob("bench12*.csv"))
    if not files:
        lines.append("Page-pass cost: no bench12*.csv (see bench12.log)\n")
        return
    lines.append("Page-pass cost (bench12*.csv; goal: pages <= "
                 f"{TRAIN_STEPS_GOAL:g}x plain on the training steps; pages-v11 = streams and "
                 "launch attributes off, what v1.1 recorded):\n")
    lines.append("| model | managed | mode | train steps x plain | process x plain | kernels without "
                 "pages | access rows | stream rows | tool us/launch: wait, process, attrs | error |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    for p in files:
        for r in _rows(p):
            if r["mode"] == "plain" and not r["error"]:
                continue
            s = _f(r.get("slowdown_train_steps"))
            flag = "" if s is None or r["mode"] != "pages" or s <= TRAIN_STEPS_GOAL else " (over goal)"
            lines.append(f"| {r['model']} | {r['managed']} | {r['mode']} | "
                         f"{r['slowdown_train_steps']}{flag} | {r['slowdown_process']} | "
                         f"{r['kernels_without_pages']} | {r['access_rows']} | {r['stream_rows']} | "
                         f"{r['us_wait']}, {r['us_process']}, {r['us_attrs']} | {r['error']} |")
    lines.append("")


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else "device_out")
    lines = ["# device_run.sh summary\n",
             "What a sound collector gives: every GPU test passed; every capture's kernels all "
             "with pages and its access rows close to the bundled v1.1 trace's (microbench: "
             "4,302 exactly; the PyTorch captures may differ a little where the GPU's libraries "
             "pick other kernels); v1.2 rows within the goal; the page pass's training-step "
             "slowdown within the goal, with no kernel without pages.\n"]
    info = out / "gpu.txt"
    if info.is_file():
        lines.append(f"Device: {info.read_text().strip()}\n")
    st = out / "steps.tsv"
    if st.is_file():
        lines.append("| step | exit status | seconds |")
        lines.append("|---|---|---|")
        for ln in st.read_text().splitlines():
            f = ln.split("\t")
            if len(f) == 3:
                lines.append(f"| {f[0]} | {f[1]} | {f[2]} |")
        lines.append("\n(exit status 124: the step ran out of time; SKIPPED: no time was left)\n")
    gpu_tests(out, lines)
    traces(out, lines)
    bench(out, lines)
    text = "\n".join(lines) + "\n"
    (out / "SUMMARY.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
