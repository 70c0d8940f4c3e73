"""The collector against CUDA programs whose page sets are known exactly (GPU only)."""
from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from uvmsim import load_trace
from uvmsim.record import record

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]
KiB, MiB = 1024, 1024 * 1024


def _tables(trace_dir: Path):
    import pyarrow.parquet as pq
    t = {n: pq.read_table(trace_dir / f"{n}.parquet").to_pandas()
         for n in ("allocations", "events", "kernels", "accesses")}
    t["manifest"] = json.loads((trace_dir / "manifest.json").read_text())
    return t


def _pages(counts: Counter, addrs: np.ndarray, flag: int, flags: dict) -> None:
    """Adds one access per address (4-byte elements) to the expected page counts/flags."""
    pages, n = np.unique(addrs.astype(np.uint64) >> np.uint64(12), return_counts=True)
    for p, c in zip(pages.tolist(), n.tolist()):
        counts[p] += c
        flags[p] = flags.get(p, 0) | flag


def _check_kernel(t, kid: int, expect: list[tuple[np.ndarray, int]]) -> None:
    counts: Counter = Counter()
    flags: dict = {}
    for addrs, flag in expect:
        _pages(counts, addrs, flag, flags)
    acc = t["accesses"]
    rows = acc[acc.kernel_id == kid]
    got = {int(p): (int(c), int(f)) for p, c, f in zip(rows["page"], rows["count"], rows["flags"])}
    want = {p: (counts[p], flags[p]) for p in counts}
    name = t["kernels"].name[kid]
    missing = sorted(set(want) - set(got))[:5]
    extra = sorted(set(got) - set(want))[:5]
    assert set(got) == set(want), f"kernel {kid} {name}: missing pages {missing}, extra {extra}"
    wrong = [(p, got[p], want[p]) for p in want if got[p] != want[p]][:5]
    assert not wrong, f"kernel {kid} {name}: (page, got (count, flags), want): {wrong}"
    assert sorted(rows["order"].tolist()) == list(range(len(rows))), f"kernel {kid}: order is not a rank"


@pytest.fixture(scope="module")
def prog_trace(collector, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prog")
    prog = collector["prog"]
    plain = subprocess.run([str(prog), "all"], capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    out = tmp / "prog.uvmtrace"
    # each pass writes the program's stdout next to its raw files, for the comparison
    cmd = ["sh", "-c", f'exec "{prog}" all > "$UVMTRACE_OUT/stdout.txt"']
    status = record(out, cmd, "both", lib=collector["lib"], keep_raw=tmp / "raw")
    return {"status": status, "trace": out, "t": _tables(out), "plain": plain.stdout,
            "raw": tmp / "raw"}


def test_program_output_unchanged(prog_trace):
    assert prog_trace["status"] == 0
    for p in ("pages", "timing"):
        traced = (prog_trace["raw"] / p / "stdout.txt").read_text()
        assert traced == prog_trace["plain"], f"{p} pass changed the program's output"


def test_manifest_and_join(prog_trace):
    src = prog_trace["t"]["manifest"]["source"]
    assert src["complete"] is True and src["exit_status"] == 0
    assert src["join"]["status"] == "ok"
    assert src["dropped_accesses_device"] == 0
    assert src["access_rows_dropped_outside_live_allocations"] == 0
    # every kernel's module patched (under lazy loading the collector once loaded modules
    # inside its own calls and left them unpatched: docs/collector.md, launch attributes)
    assert src["kernels_without_pages"] == 0 and src["warnings"] == []
    end = src["pages_pass_end"]
    print("modules patched:", end["modules"], "of which loaded inside the collector's calls:",
          end["modules_loaded_in_tool_calls"])
    assert end["modules"] >= 1
    for key in ("gpu", "driver", "command", "date", "collector_version"):
        assert src.get(key), f"manifest source lacks {key}"
    k = prog_trace["t"]["kernels"]
    assert k.duration_ns.notna().all() and (k.duration_ns > 0).all()
    load_trace(prog_trace["trace"])  # validates the whole trace


def _allocs(t) -> dict:
    a = t["allocations"]
    by = {}
    for sz, name in ((4 * MiB, "A"), (12 * KiB, "B"), (16 * KiB, "I"), (20 * KiB, "C"),
                     (24 * KiB, "D"), (28 * KiB, "Fl"), (1 * MiB, "E"), (512 * KiB, "F"),
                     (256 * KiB, "G"), (260 * KiB, "H"), (2 * MiB, "M"), (3 * MiB, "N")):
        rows = a[(a["size"] == sz) & (a["name"].isna())]
        assert len(rows) == 1, f"expected one allocation of {sz} bytes ({name}), got {len(rows)}"
        by[name] = rows.iloc[0]
    return by


def test_kernel_sequence_and_pages(prog_trace):
    t = prog_trace["t"]
    al = _allocs(t)
    assert al["M"]["kind"] == "managed" and al["N"]["kind"] == "managed"
    assert all(al[n]["kind"] == "device" for n in "ABCDEFGHI")
    names = [n.split("(")[0] for n in t["kernels"].name]
    assert names == ["k_seq_write", "k_strided_read", "k_random_read", "k_rmw", "k_atomics",
                     "k_fill", "k_fill", "k_fill", "k_scale", "k_fill", "k_scale",
                     "k_seq_write", "k_seq_write", "k_fill", "k_fill", "k_fill"]
    base = {n: int(al[n]["base"]) for n in al}
    f4 = lambda name, idx: base[name] + 4 * np.asarray(idx, dtype=np.int64)  # noqa: E731
    nA = 4 * MiB // 4
    _check_kernel(t, 0, [(f4("A", np.arange(nA)), 2)])
    _check_kernel(t, 1, [(f4("A", np.arange(64) * 16384), 1), (f4("B", np.arange(64)), 2)])
    x, idx = 12345, []
    for _ in range(2000):
        x = (x * 1103515245 + 12345) % 2147483648
        idx.append(x % nA)
    _check_kernel(t, 2, [(f4("I", np.arange(2000)), 1), (f4("A", idx), 1),
                         (f4("C", np.arange(2000)), 2)])
    rng = np.arange(100 * 1024, 109 * 1024 + 512)
    _check_kernel(t, 3, [(f4("A", rng), 1), (f4("A", rng), 2)])
    _check_kernel(t, 4, [(f4("D", (np.arange(4096) % 4) * 1024), 7)])
    _check_kernel(t, 5, [(f4("E", np.arange(MiB // 4)), 2)])
    _check_kernel(t, 6, [(f4("F", np.arange(128 * KiB)), 2)])
    nG = 256 * KiB // 4
    for k in (7, 9):
        _check_kernel(t, k, [(f4("G", np.arange(nG)), 2)])
        _check_kernel(t, k + 1, [(f4("G", np.arange(nG)), 1), (f4("H", np.arange(nG)), 2)])
    _check_kernel(t, 11, [(f4("M", np.arange(2 * MiB // 4)), 2)])
    _check_kernel(t, 12, [(f4("N", np.arange(3 * MiB // 4)), 2)])
    # two nodes of one graph running the same function share their state: each gets the
    # union of both nodes' pages, and the manifest says so
    both = [(f4("G", np.arange(nG)), 2), (f4("H", np.arange(nG)), 2)]
    _check_kernel(t, 13, both)
    _check_kernel(t, 14, both)
    assert t["manifest"]["source"]["graph_kernels_with_merged_pages"] == 2
    # cudaMallocAsync: its own allocation (kind pool), written, then freed
    a = t["allocations"]
    pool = a[a["kind"] == "pool"]
    assert len(pool) == 1 and int(pool["size"].iloc[0]) == 40 * KiB
    assert pool["name"].iloc[0] == "cudaMallocAsync"
    _check_kernel(t, 15, [(int(pool["base"].iloc[0]) + 4 * np.arange(10 * KiB), 2)])
    ev = t["events"]
    pid = int(pool["alloc_id"].iloc[0])
    k15 = int(ev[(ev.op == "kernel") & (ev.kernel_id == 15)].seq.iloc[0])
    assert int(ev[(ev.op == "alloc") & (ev.alloc_id == pid)].seq.iloc[0]) < k15
    assert int(ev[(ev.op == "free") & (ev.alloc_id == pid)].seq.iloc[0]) > k15


def test_streams(prog_trace):
    ev = prog_trace["t"]["events"]
    kev = ev[ev.op == "kernel"].reset_index(drop=True)
    s = kev.stream.tolist()
    assert s[0] == 0, "default-stream launch should be stream 0"
    assert s[5] != s[6] and s[5] != 0 and s[6] != 0, f"two streams expected, got {s[5:7]}"
    assert s[7] == s[8] == s[9] == s[10], "graph kernels report the graph's stream"
    assert s[15] == s[6], "the cudaMallocAsync kernel ran on s2"


def test_events_copies_hints(prog_trace):
    t = prog_trace["t"]
    ev, al = t["events"], _allocs(t)
    M = int(al["M"]["base"])
    adv = ev[ev.op == "advise"]
    assert adv.arg.tolist() == ["set_read_mostly", "set_preferred_location_gpu",
                                "set_accessed_by_gpu", "unset_read_mostly"]
    assert (adv.addr == M).all() and (adv["size"] == 2 * MiB).all()
    pf = ev[ev.op == "prefetch"]
    assert pf.arg.tolist() == ["gpu", "cpu"]
    assert pf["size"].tolist() == [2 * MiB, 1 * MiB] and (pf.addr == M).all()
    # the GPU prefetch comes before the managed kernel, the CPU one after
    kseq = ev[(ev.op == "kernel")].seq.tolist()[11]  # the kernel on M
    assert pf.seq.iloc[0] < kseq < pf.seq.iloc[1]
    h = ev[ev.op == "memcpy_htod"]
    assert {(int(a), int(s)) for a, s in zip(h.addr, h["size"])} >= {
        (int(al["I"]["base"]), 8000), (int(al["E"]["base"]), 256 * KiB)}
    d = ev[ev.op == "memcpy_dtod"]
    assert (int(al["F"]["base"]), 256 * KiB) in {(int(a), int(s)) for a, s in zip(d.addr, d["size"])}
    o = ev[ev.op == "memcpy_dtoh"]
    assert (int(al["B"]["base"]), 256) in {(int(a), int(s)) for a, s in zip(o.addr, o["size"])}
    ms = ev[ev.op == "memset"]
    assert {(int(a), int(s)) for a, s in zip(ms.addr, ms["size"])} >= {
        (int(al["D"]["base"]), 24 * KiB), (int(al["E"]["base"]), 4 * KiB)}
    assert (ev.op == "sync").sum() >= 3
    frees = ev[ev.op == "free"].alloc_id.tolist()
    for n in al:
        assert int(al[n]["alloc_id"]) in frees, f"{n} was not freed in the trace"


def test_crash_leaves_incomplete_trace(collector, tmp_path):
    out = tmp_path / "crash.uvmtrace"
    status = record(out, [str(collector["prog"]), "crash"], "both", lib=collector["lib"])
    assert status == 134  # SIGABRT
    t = _tables(out)
    src = t["manifest"]["source"]
    assert src["complete"] is False and src["incomplete_reasons"]
    assert len(t["kernels"]) == 1 and len(t["accesses"]) == 1024


def test_exit_status_returned(collector, tmp_path):
    out = tmp_path / "exit3.uvmtrace"
    assert record(out, [str(collector["prog"]), "exit3"], "both", lib=collector["lib"]) == 3
    src = _tables(out)["manifest"]["source"]
    assert src["complete"] is True and src["exit_status"] == 3


def test_preload_injection(collector, tmp_path):
    out = tmp_path / "preload.uvmtrace"
    st = record(out, [str(collector["prog"]), "exit3"], "pages", lib=collector["lib"],
                inject="preload")
    assert st == 3
    t = _tables(out)
    assert len(t["kernels"]) == 1 and len(t["accesses"]) == 1024


def test_torch_training_loop(collector, tmp_path):
    script = REPO / "native_trace" / "tests" / "torch_train.py"
    args = [sys.executable, str(script), "--model", "mlp", "--batch", "64", "--steps", "3"]
    plain = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    losses = [ln for ln in plain.stdout.splitlines() if ln.startswith("step ")]
    assert len(losses) == 3
    out = tmp_path / "mlp.uvmtrace"
    cmd = ["sh", "-c", "exec " + " ".join(f'"{a}"' for a in args) + ' > "$UVMTRACE_OUT/stdout.txt"']
    assert record(out, cmd, "both", lib=collector["lib"], keep_raw=tmp_path / "raw") == 0
    for p in ("pages", "timing"):
        got = [ln for ln in (tmp_path / "raw" / p / "stdout.txt").read_text().splitlines()
               if ln.startswith("step ")]
        assert got == losses, f"{p} pass changed the losses"
    t = _tables(out)
    src = t["manifest"]["source"]
    assert src["join"]["status"] == "ok", src["join"]
    assert src["dropped_accesses_device"] == 0
    k = t["kernels"]
    assert len(k) >= 20 and k.duration_ns.notna().all()
    touched = t["accesses"].kernel_id.nunique()
    assert touched == len(k), f"{len(k) - touched} kernels recorded no page"
    load_trace(out)


def test_uvm_counters(collector, tmp_path):
    """CUPTI unified-memory counters, enabled once the context exists (a separate run)."""
    import pyarrow.parquet as pq
    out = tmp_path / "um.uvmtrace"
    assert record(out, [str(collector["prog"]), "all"], "timing", lib=collector["lib"],
                  uvm_counters=True) == 0
    src = json.loads((out / "manifest.json").read_text())["source"]
    print("uvm counter attempts:", src["uvm_counter_attempts"])
    assert any(a["enable"] == 0 for a in src["uvm_counter_attempts"])
    u = pq.read_table(out / "uvm_events.parquet").to_pandas()
    kinds = set(u.counter)
    # N is written by the GPU right after the host touched it: faults and migrations
    assert "gpu_page_fault" in kinds and "bytes_htod" in kinds, kinds
    assert u[u.counter == "bytes_htod"].value.sum() >= 2 * MiB  # at least M's prefetch


def test_cli_timing_only(collector, tmp_path):
    """`python -m uvmsim.record --pass timing` (the CLI the lead wires as `uvmsim record`)."""
    out = tmp_path / "t.uvmtrace"
    # the child imports the uvmsim this test imports, installed or not (a bare device
    # machine runs the tests from the tree without installing it)
    import os
    import uvmsim
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(uvmsim.__file__).parents[1]), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "uvmsim.record", "-o", str(out), "--pass",
                        "timing", "--lib", str(collector["lib"]), "--",
                        str(collector["prog"]), "exit3"], capture_output=True, text=True,
                       cwd=REPO, timeout=120, env=env)
    assert r.returncode == 3, r.stderr
    t = _tables(out)
    assert len(t["kernels"]) == 1 and t["kernels"].duration_ns.iloc[0] > 0
    assert len(t["accesses"]) == 0


# --------------------------------------------------------------------------- v1.1 additions
def _runs(mask: int) -> int:
    """Runs of consecutive set bits in a slice mask."""
    return bin(mask ^ (mask << 1)).count("1") // 2


def _prog_list(name: str) -> list[int]:
    """A page list of native_trace/tests/uvmt_testprog.cu (so the test and program agree)."""
    import re
    src = (REPO / "native_trace" / "tests" / "uvmt_testprog.cu").read_text()
    m = re.search(rf"{name}\[\] = \{{([^}}]*)\}}", src)
    vals = [int(v) for v in m.group(1).replace("\n", " ").split(",")]
    assert vals[-1] == -1
    return vals[:-1]


def _blocks64k(pages: Iterable[int], base: int) -> set[int]:
    """The pages (relative to `base`) of the 64 KiB blocks holding `pages`: what the driver
    moves to the host on a CPU fault, and so what the collector reports."""
    first = base >> 12
    return {q - first for p in pages for q in range((first + p) & ~15, ((first + p) | 15) + 1)}


def _host_pages(ev, base: int) -> set[int]:
    out: set[int] = set()
    for a, s in zip(ev.addr, ev["size"]):
        out.update(range((int(a) - base) >> 12, ((int(a) + int(s) - 1 - base) >> 12) + 1))
    return out


def test_host_writes_between_kernels_are_recorded_exactly(collector, tmp_path):
    out = tmp_path / "host.uvmtrace"
    assert record(out, [str(collector["prog"]), "host"], "both", lib=collector["lib"]) == 0
    t = _tables(out)
    assert t["manifest"]["minor"] == 2  # v1.1 host accesses, v1.2 streams
    al = t["allocations"]
    (mrow,) = al[(al["kind"] == "managed") & (al["size"] == 256 * 4096)].itertuples()
    ev = t["events"]
    kseq = ev[ev.op == "kernel"].seq.tolist()
    assert len(kseq) == 2
    ha = ev[ev.op == "host_access"]
    assert ha.arg.isna().all() and ha.kernel_id.isna().all() and ha.alloc_id.isna().all()
    base = int(mrow.base)
    before1 = _host_pages(ha[ha.seq < kseq[0]], base)
    between = _host_pages(ha[(ha.seq > kseq[0]) & (ha.seq < kseq[1])], base)
    after = ha[ha.seq > kseq[1]]
    in_buffer = set(range(256))  # the test program's buffer: 256 pages
    want1 = _blocks64k(_prog_list("host_pages_1"), base) & in_buffer
    assert before1 == want1, sorted(before1 ^ want1)
    want2 = _blocks64k(_prog_list("host_pages_2") + [250], base) & in_buffer  # 250: read
    assert between == want2, sorted(between ^ want2)
    assert len(after) == 0
    # ranges are coalesced: no two events of one gap touch or overlap
    for part in (ha[ha.seq < kseq[0]], ha[(ha.seq > kseq[0]) & (ha.seq < kseq[1])]):
        spans = sorted((int(a), int(a) + int(s)) for a, s in zip(part.addr, part["size"]))
        assert all(e1 < s2 for (_, e1), (s2, _) in zip(spans, spans[1:])), spans
    load_trace(out)


def test_retouch_slices(collector, tmp_path):
    passes = 4  # RETOUCH_PASSES in uvmt_testprog.cu
    out = tmp_path / "retouch.uvmtrace"
    assert record(out, [str(collector["prog"]), "retouch"], "both", lib=collector["lib"]) == 0
    t = _tables(out)
    k, acc = t["kernels"], t["accesses"]
    assert [n.split("(")[0] for n in k.name] == ["k_page_once", "k_repass"]
    assert (k.slice_ns > 0).all()
    assert t["manifest"]["minor"] == 2
    a_base = int(t["allocations"].query("size == 4 * 1048576").base.iloc[0]) >> 12
    # one store per page: exactly one slice each
    once = acc[acc.kernel_id == 0]
    assert len(once) == 1024
    assert all(int(m) & (int(m) - 1) == 0 for m in once.slices), "a page stored once has one slice"
    # one block reading the buffer `passes` times: every page in `passes` separated runs
    rep = acc[(acc.kernel_id == 1) & (acc.page.astype(np.int64) - a_base).between(0, 1023)]
    rep = rep.sort_values("order")
    assert len(rep) == 1024
    n = int(k.n_slices[1])
    assert n >= 4 * passes, f"only {n} slices for a kernel of {passes} passes"
    runs = [_runs(int(m)) for m in rep.slices]
    assert runs == [passes] * 1024, Counter(runs)
    # the first pass walks the buffer in page order: order is the page rank and the first
    # slice of each page never decreases along it
    assert (rep.page.to_numpy(np.int64) - a_base).tolist() == list(range(1024))
    first = [(int(m) & -int(m)).bit_length() for m in rep.slices]
    assert first == sorted(first) and first[0] == 1 and first[-1] < n

    # with slices, streams and launch attributes switched off, the trace is plain v1
    out2 = tmp_path / "noslices.uvmtrace"
    assert record(out2, [str(collector["prog"]), "retouch"], "pages", lib=collector["lib"],
                  extra_env={"UVMTRACE_SLICES": "0", "UVMTRACE_STREAMS": "0",
                             "UVMTRACE_LAUNCH_ATTRS": "0"}) == 0
    t2 = _tables(out2)
    assert "slices" not in t2["accesses"] and "n_slices" not in t2["kernels"]
    assert "minor" not in t2["manifest"]
    load_trace(out)
    load_trace(out2)


def test_host_accesses_in_full_program(prog_trace):
    """The full program initialises managed M on the CPU before prefetching it to the GPU."""
    t = prog_trace["t"]
    al, ev = _allocs(t), t["events"]
    M = int(al["M"]["base"])
    first_pf = int(ev[ev.op == "prefetch"].seq.iloc[0])
    ha = ev[ev.op == "host_access"]
    assert _host_pages(ha[ha.seq < first_pf], M) >= set(range(512))
    # every kernel row carries a valid slice mask (load_trace checks the rest)
    acc, k = t["accesses"], t["kernels"]
    assert (acc.slices > 0).all()
    ns = k.set_index("kernel_id").n_slices
    assert all(int(m) < (1 << int(ns[kid])) for kid, m in zip(acc.kernel_id, acc.slices))


# --------------------------------------------------------------------------- v1.2 additions
def _attrs(stdout: str) -> dict:
    """The `attr` lines of uvmt_testprog blocks (the runtime's own view, uninstrumented)."""
    out = {}
    for ln in stdout.splitlines():
        if ln.startswith("attr "):
            f = ln.split()
            out[f[1]] = {f[i]: int(f[i + 1]) for i in range(2, len(f), 2)}
    return out


@pytest.fixture(scope="module")
def blocks_trace(collector, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("blocks")
    prog = collector["prog"]
    plain = subprocess.run([str(prog), "blocks"], capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    out = tmp / "blocks.uvmtrace"
    assert record(out, [str(prog), "blocks"], "both", lib=collector["lib"],
                  extra_env={"UVMTRACE_TIMERS": "1"}) == 0
    off = tmp / "off.uvmtrace"  # the same run with streams and launch attributes off
    assert record(off, [str(prog), "blocks"], "pages", lib=collector["lib"],
                  extra_env={"UVMTRACE_STREAMS": "0", "UVMTRACE_LAUNCH_ATTRS": "0"}) == 0
    return {"out": out, "off": off, "t": _tables(out), "attrs": _attrs(plain.stdout)}


def test_launch_attributes(blocks_trace):
    t, want = blocks_trace["t"], blocks_trace["attrs"]
    assert t["manifest"]["minor"] == 2
    k = t["kernels"]
    names = [n.split("(")[0] for n in k.name]
    assert names == ["k_gstride", "k_smem", "k_grid2d", "k_smem"]
    geo = {"k_gstride": (64, 256, 0), "k_smem": (512, 128, 3072), "k_grid2d": (8, 256, 0)}
    for i, name in enumerate(names):
        row, w = k.iloc[i], want[name]
        n_blocks, threads, dyn = geo[name]
        got = (int(row.n_blocks), int(row.threads_per_block), int(row.smem_dynamic_bytes))
        assert got == (n_blocks, threads, dyn), (i, name, got)  # kernel 3 is a graph node
        assert int(row.regs_per_thread) == w["regs"], (i, name)
        assert int(row.smem_static_bytes) == w["smem_static"], (i, name)
        assert int(row.sm_count) == w["sm_count"] and int(row.cluster_blocks) == 1
        assert int(row.max_blocks_per_sm) == w["occupancy"], (i, name, int(row.max_blocks_per_sm))
    assert int(k.smem_static_bytes[1]) == 2048
    src = t["manifest"]["source"]
    # the page pass's view (instrumented functions) against the timing pass's; the trace takes
    # the latter, and the graph node (kernel 3) the direct launch's of the same function
    print("launch attribute mismatches:", src["launch_attribute_mismatches"],
          src["launch_attribute_mismatch_examples"])
    end = src["pages_pass_end"]
    assert end["attr_errors"] == 0 and end["stream_status"] == {"ok": 4}, end
    assert end["timers"]["launches"] == 4 and end["timers"]["copies"] >= 4


def test_grid_stride_blocks_keep_their_own_touch_order(blocks_trace):
    """Each block of a grid-stride fill over an array: its first page is
    (b x blockDim x 4 bytes) >> 12 and its pages advance by the grid stride."""
    tr = load_trace(blocks_trace["out"], streams=True)
    s, A = tr.streams, tr.arrays
    grid, threads, iters = 64, 256, 16
    al = tr.allocations
    a_row = int(np.flatnonzero(al["size"].to_numpy() == 1 << 20)[0])
    p0 = int(A.a_page_off[a_row])
    assert int(s.k_unit[0]) == 12
    b0, b1 = s.k_block_start[0], s.k_block_start[1]
    assert s.blk_id[b0:b1].tolist() == list(range(grid))
    stride = grid * threads * 4 // 4096
    for b in range(grid):
        r0, r1 = s.blk_row_start[b0 + b], s.blk_row_start[b0 + b + 1]
        pages = (s.row_page[r0:r1] - p0).tolist()
        assert pages == [(b * threads * 4 >> 12) + k * stride for k in range(iters)], (b, pages)
        t = s.row_t[r0:r1]
        assert (np.diff(t) >= 0).all() and t[0] == 0
        assert s.blk_t_end[b0 + b] - s.blk_t_start[b0 + b] >= t[-1]
        assert (s.row_flags[r0:r1] == 2).all()
    assert s.blk_t_start[b0:b1].min() == 0
    # the 2-D grid: block x + 4 y wrote page x + 4 y of its buffer
    g_row = int(np.flatnonzero(al["size"].to_numpy() == 8 * 4096)[0])
    g0 = int(A.a_page_off[g_row])
    b0, b1 = s.k_block_start[2], s.k_block_start[3]
    assert s.blk_id[b0:b1].tolist() == list(range(8))
    for b in range(8):
        r0, r1 = s.blk_row_start[b0 + b], s.blk_row_start[b0 + b + 1]
        assert (s.row_page[r0:r1] - g0).tolist() == [b]


def _alloc_pages(tabs, kid):
    """Kernel `kid`'s access rows as (alloc_id, page offset in it, flags, count) columns."""
    a = tabs["allocations"].sort_values("base")
    base_page = (a["base"].to_numpy(np.uint64) >> np.uint64(12))
    acc = tabs["accesses"][tabs["accesses"].kernel_id == kid]
    page = acc["page"].to_numpy(np.uint64)
    i = np.searchsorted(base_page, page, side="right") - 1
    assert (i >= 0).all(), "an access below every allocation"
    return (a["alloc_id"].to_numpy()[i].tolist(), (page - base_page[i]).tolist(),
            acc["flags"].tolist(), acc["count"].tolist())


def test_streams_leave_v11_content_and_replay_unchanged(blocks_trace):
    import uvmsim
    from uvmsim.trace import streams as S
    t, off = blocks_trace["t"], _tables(blocks_trace["off"])
    assert "minor" not in off["manifest"] or off["manifest"]["minor"] == 1
    # per kernel: the same pages, flags and counts with streams on and off. The two runs are
    # two processes, whose allocations land at other addresses (a device probe on an H100 saw
    # every page shifted, two streams-off runs alike), so pages compare by allocation and offset.
    cols = ["size", "kind"]
    assert t["allocations"][cols].values.tolist() == off["allocations"][cols].values.tolist()
    for kid in range(4):
        key = lambda tabs: sorted(zip(*_alloc_pages(tabs, kid)))  # noqa: E731
        on, of = key(t), key(off)
        assert len(on) > 0 and on == of, (kid, len(on), len(of))
    tr = load_trace(blocks_trace["out"])
    tabs = {n: t[n] for n in ("allocations", "events", "kernels", "accesses")}
    tabs["kernels"] = tabs["kernels"].drop(columns=[c for c in S.LAUNCH_COLUMNS + S.STREAM_COLUMNS
                                                    if c in tabs["kernels"]])
    plain = uvmsim.trace_from_tables(**tabs)
    for f in (1.0, 3.0):
        assert uvmsim.simulate(tr, oversub=f).summary == uvmsim.simulate(plain, oversub=f).summary
