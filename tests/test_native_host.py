"""Host-side tests of the collector (no GPU): the CMake build of native_trace, and
uvmsim.record's reading and joining of raw pass files, driven by a fake traced program."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from uvmsim import load_trace
from uvmsim.record import (REC_DTYPE, LaunchMismatchError, RecordError, build_tables,
                           join_launches, read_raw_pass, record, timing_order)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fake_gpu(monkeypatch):
    """A fake program stands in for the CUDA program here: skip the check for a real GPU
    (tests/test_gpucheck.py tests it)."""
    monkeypatch.setenv("UVMSIM_SKIP_GPU_CHECK", "1")


# --------------------------------------------------------------------------- CMake build
def _sanitizer_root() -> str | None:
    """The Compute Sanitizer API: $UVMTRACE_SANITIZER_ROOT, the toolkit's, or the pip wheel."""
    env = os.environ.get("UVMTRACE_SANITIZER_ROOT")
    if env:
        return env
    for root in ("/usr/local/cuda/compute-sanitizer",):
        if Path(root, "include", "sanitizer.h").exists():
            return root
    try:
        import nvidia  # the wheel nvidia-cuda-sanitizer-api installs nvidia/cu13
        for p in nvidia.__path__:
            if Path(p, "cu13", "include", "sanitizer.h").exists():
                return str(Path(p, "cu13"))
    except ImportError:
        pass
    return None


needs_toolkit = pytest.mark.skipif(
    shutil.which("cmake") is None or shutil.which("nvcc") is None
    or not Path("/usr/local/cuda/include/cupti.h").exists(),
    reason="cmake, nvcc or CUPTI headers (/usr/local/cuda) not available")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    b = tmp_path_factory.mktemp("native_build")
    san = _sanitizer_root()
    cfg = ["cmake", "-S", str(REPO / "native_trace"), "-B", str(b),
           "-DUVMTRACE_PATCH_ARCHS=75;90"]  # two archs keep CI fast; the default is all
    if san:
        cfg.append(f"-DUVMTRACE_SANITIZER_ROOT={san}")
    else:
        # builds the timing pass only: say so loudly rather than fail
        print("\nCompute Sanitizer API not found: building native_trace WITHOUT the page "
              "pass (pip install nvidia-cuda-sanitizer-api to test it)", file=sys.stderr)
    logs = []
    for cmd in (cfg, ["cmake", "--build", str(b), "-j", "2"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        logs.append(r.stdout + r.stderr)
        assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return {"dir": b, "sanitizer": san, "log": "\n".join(logs)}


@needs_toolkit
def test_library_builds_and_exports_entry(built):
    lib = built["dir"] / "libuvmtrace.so"
    assert lib.is_file()
    syms = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                          text=True).stdout
    assert "InitializeInjection" in syms
    info = json.loads((built["dir"] / "uvmtrace_build.json").read_text())
    assert info["page_pass"] is bool(built["sanitizer"])
    if not built["sanitizer"]:
        assert "WITHOUT the page pass" in built["log"]
        pytest.skip("Sanitizer API unavailable: page-pass part of the build not tested")
    # the device patch is embedded, built for the archs asked for, plus PTX
    allsyms = subprocess.run(["nm", str(lib)], capture_output=True, text=True).stdout
    assert "uvmt_patch_fatbin" in allsyms
    fatbin = built["dir"] / "uvmt_patch.fatbin"
    assert fatbin.stat().st_size > 1000
    cuobjdump = shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    if Path(cuobjdump).exists():  # not in every toolkit install
        listing = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", str(fatbin)],
                                 capture_output=True, text=True).stdout
        assert "sm_75" in listing and "sm_90" in listing and ".ptx" in listing, listing
    assert info["patch_archs"] == "75;90"
    assert (built["dir"] / "uvmt_testprog").is_file()


@needs_toolkit
def test_bad_pass_name_is_a_clear_error(built, tmp_path):
    """The library refuses an unknown UVMTRACE_PASS, naming the variable, before any CUDA call."""
    lib = built["dir"] / "libuvmtrace.so"
    code = f"import ctypes; ctypes.CDLL({str(lib)!r}).InitializeInjection()"
    env = dict(os.environ, UVMTRACE_PASS="bogus", UVMTRACE_OUT=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 86
    assert "UVMTRACE_PASS=bogus" in r.stderr


@needs_toolkit
def test_missing_environment_does_not_break_the_program(built):
    """Loaded without UVMTRACE_* the library warns and lets the program run (returns 1)."""
    lib = built["dir"] / "libuvmtrace.so"
    code = f"import ctypes; print(ctypes.CDLL({str(lib)!r}).InitializeInjection())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("UVMTRACE_")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "1"
    assert "not tracing" in r.stderr


def test_collector_sources_are_found_from_the_package():
    """`find_library` builds native_trace/ of this clone when no library is given."""
    from uvmsim.record import DEFAULT_BUILD_DIR, NATIVE_DIR
    assert (NATIVE_DIR / "CMakeLists.txt").is_file(), NATIVE_DIR
    assert NATIVE_DIR == REPO / "native_trace" and DEFAULT_BUILD_DIR == NATIVE_DIR / "build"


# --------------------------------------------------------------------------- join logic
def _k(name, grid="1,1,1", block="32,1,1", **kw):
    return dict(name=name, grid=grid, block=block, **kw)


def _t(name, corr, start, grid="1,1,1", block="32,1,1", graph=0, node=0):
    return dict(name=name, grid=grid, block=block, corr=corr, start=start, end=start + 10,
                graph=graph, graph_node=node)


def test_join_matches_in_order():
    pages = [_k("a"), _k("b"), _k("a")]
    timing = timing_order([_t("a", 30, 300), _t("a", 10, 100), _t("b", 20, 200)])
    assert join_launches(pages, timing) == [0, 1, 2]
    assert [timing[i]["corr"] for i in join_launches(pages, timing)] == [10, 20, 30]


def test_join_reports_first_different_kernel():
    pages = [_k("a"), _k("b"), _k("c")]
    timing = [_t("a", 1, 1), _t("x", 2, 2), _t("c", 3, 3)]
    with pytest.raises(LaunchMismatchError) as e:
        join_launches(pages, timing)
    assert e.value.index == 1
    assert "b grid" in e.value.pages_side and "x grid" in e.value.timing_side
    assert "kernel 1" in str(e.value)


def test_join_reports_missing_launch():
    with pytest.raises(LaunchMismatchError) as e:
        join_launches([_k("a"), _k("b")], [_t("a", 1, 1)])
    assert e.value.index == 1 and e.value.timing_side is None
    assert e.value.n_pages == 2 and e.value.n_timing == 1


def test_join_checks_launch_geometry():
    with pytest.raises(LaunchMismatchError):
        join_launches([_k("a", grid="2,1,1")], [_t("a", 1, 1, grid="4,1,1")])


def test_join_graph_nodes_as_multiset():
    # a graph launch: page pass in node order, timing pass in start order (nodes share corr)
    pages = [_k("pre"), _k("x", graph_launch=0), _k("y", graph_launch=0),
             _k("x", graph_launch=0), _k("post")]
    timing = timing_order([_t("pre", 1, 0), _t("y", 2, 50, graph=7, node=2),
                           _t("x", 2, 60, graph=7, node=1), _t("x", 2, 70, graph=7, node=3),
                           _t("post", 3, 100)])
    m = join_launches(pages, timing)
    assert [timing[i]["name"] for i in m] == ["pre", "x", "y", "x", "post"]
    assert sorted(m) == list(range(5))
    bad = timing_order([_t("pre", 1, 0), _t("y", 2, 50, graph=7), _t("y", 2, 60, graph=7),
                        _t("x", 2, 70, graph=7), _t("post", 3, 100)])
    with pytest.raises(LaunchMismatchError, match="graph launch"):
        join_launches(pages, bad)


# --------------------------------------------------------------------------- raw files
def _write_raw(d: Path, pid: int, pages_lines, recs, timing_lines=None, end=True):
    d.mkdir(parents=True, exist_ok=True)
    pl = list(pages_lines) + ([{"t": "end", "kernels": 0}] if end else [])
    (d / f"pages.{pid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in pl))
    np.asarray(recs, REC_DTYPE).tofile(d / f"pages.{pid}.bin")
    if timing_lines is not None:
        tl = list(timing_lines) + ([{"t": "end"}] if end else [])
        (d / f"timing.{pid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in tl))


BASE = 0x7F0000000000


def _scenario(tmp_path: Path, timing_names=("k1", "k2")):
    lines = [
        {"t": "meta", "pass": "pages"},
        {"t": "alloc", "base": BASE, "size": 3 * 4096, "kind": "managed", "name": ""},
        {"t": "alloc", "base": BASE + 0x200000, "size": 4096, "kind": "device", "name": ""},
        {"t": "memcpy", "dir": "htod", "src": 0x1000, "dst": BASE, "size": 8192, "stream": 0},
        {"t": "kernel", "k": 0, "name": "k1", "grid": "1,1,1", "block": "32,1,1", "stream": 0,
         "off": 0, "n": 3, "unknown": 1, "dropped": 0},
        {"t": "prefetch", "addr": BASE, "size": 4096, "dst": "gpu", "stream": 0, "rc": 0},
        {"t": "advise", "addr": BASE, "size": 4096, "advice": "set_accessed_by_cpu", "rc": 0},
        {"t": "free", "base": BASE + 0x200000},
        {"t": "kernel", "k": 1, "name": "k2", "grid": "1,1,1", "block": "32,1,1", "stream": 2,
         "off": 48, "n": 2, "unknown": 0, "dropped": 0},
        {"t": "sync", "scope": "context"},
    ]
    P = BASE >> 12
    recs = [(P + 2, 5, 2, 1), (P, 1, 1, 1), (P + 999, 1, 1, 1),  # k1: last page is in no allocation
            (P + 1, 7, 7, 1), (P + 512, 1, 2, 1)]                # k2: second page was freed before it
    timing = [{"t": "kact", "name": n, "grid": "1,1,1", "block": "32,1,1", "corr": i + 1,
               "start": 1000 * (i + 1), "end": 1000 * (i + 1) + 100 + i, "graph": 0,
               "graph_node": 0} for i, n in enumerate(timing_names)]
    d = tmp_path / "raw"
    _write_raw(d, 4242, lines, recs, timing)
    return d


def test_build_tables_from_raw(tmp_path):
    d = _scenario(tmp_path)
    (pages,) = read_raw_pass(d, "pages")
    (timing,) = read_raw_pass(d, "timing")
    assert pages.pid == 4242 and pages.complete
    tables, stats = build_tables(pages, timing)
    ev = tables["events"]
    assert ev.op.tolist() == ["alloc", "alloc", "memcpy_htod", "kernel", "prefetch", "free",
                              "kernel", "sync"]
    assert ev.seq.tolist() == list(range(8))
    assert stats["skipped"] == {"advice set_accessed_by_cpu (not in uvmtrace v1)": 1}
    k = tables["kernels"]
    assert k.duration_ns.tolist() == [100, 101]
    assert ev[ev.op == "kernel"].t_start_ns.tolist() == [1000, 2000]
    acc = tables["accesses"]
    P = BASE >> 12
    assert acc.page.tolist() == [P + 2, P, P + 1]
    assert acc.kernel_id.tolist() == [0, 0, 1]
    assert acc.order.tolist() == [0, 1, 0]
    assert acc["flags"].tolist() == [2, 1, 7] and acc["count"].tolist() == [5, 1, 7]
    assert stats["access_rows_dropped_outside_live_allocations"] == 2
    assert stats["pages_outside_allocations_device"] == 1
    assert stats["join"]["status"] == "ok"


def test_mismatched_sequences_are_reported_not_joined(tmp_path):
    d = _scenario(tmp_path, timing_names=("k1", "k3"))
    (pages,), (timing,) = read_raw_pass(d, "pages"), read_raw_pass(d, "timing")
    tables, stats = build_tables(pages, timing)
    assert stats["join"]["status"] == "mismatch"
    assert stats["join"]["first_difference"] == 1
    assert tables["kernels"].duration_ns.isna().all()  # nothing joined, not even kernel 0
    with pytest.raises(LaunchMismatchError):
        build_tables(pages, timing, strict=True)


def test_truncated_record_file_is_an_error(tmp_path):
    d = tmp_path / "raw"
    _write_raw(d, 1, [{"t": "alloc", "base": BASE, "size": 4096, "kind": "device"},
                      {"t": "kernel", "name": "k", "grid": "1,1,1", "block": "1,1,1",
                       "stream": 0, "off": 0, "n": 4}], [(BASE >> 12, 1, 1, 1)])
    (pages,) = read_raw_pass(d, "pages")
    with pytest.raises(RecordError, match="beyond the file"):
        build_tables(pages, None)


def test_cut_last_line_is_counted(tmp_path):
    d = tmp_path / "raw"
    _write_raw(d, 7, [{"t": "alloc", "base": BASE, "size": 4096, "kind": "device"}], [],
               end=False)
    with open(d / "pages.7.jsonl", "a") as f:
        f.write('{"t": "kernel", "na')
    (pages,) = read_raw_pass(d, "pages")
    assert pages.bad_lines == 1 and not pages.complete


# --------------------------------------------------------------------------- record()
FAKE = textwrap.dedent('''
    """Stands in for a CUDA program run under libuvmtrace: writes the raw files itself."""
    import json, os, sys, numpy as np
    p, out = os.environ["UVMTRACE_PASS"], os.environ["UVMTRACE_OUT"]
    pid, base = os.getpid(), 0x7F0000000000
    mode = sys.argv[1]
    def w(name, lines):
        with open(os.path.join(out, f"{name}.{pid}.jsonl"), "w") as f:
            for x in lines:
                f.write(json.dumps(x) + "\\n")
    end = [] if mode == "crash" else [{"t": "end"}]
    if p == "pages":
        w("pages", [{"t": "alloc", "base": base, "size": 8192, "kind": "managed", "name": ""},
                    {"t": "host_access", "addr": base + 4096, "size": 4096},
                    {"t": "kernel", "name": "kern", "grid": "1,1,1", "block": "1,1,1",
                     "stream": 0, "off": 0, "n": 2, "n_slices": 3, "slice_ns": 4096}] + end)
        np.array([(base >> 12, 1, 1, 1), ((base >> 12) + 1, 3, 2, 5)],
                 dtype=[("page", "<u8"), ("count", "<u4"), ("flags", "<u4"),
                        ("slices", "<u8")]).tofile(
                     os.path.join(out, f"pages.{pid}.bin"))
    else:
        w("timing", [{"t": "kact", "name": "kern", "grid": "1,1,1", "block": "1,1,1",
                      "corr": 5, "start": 10, "end": 35, "graph": 0}] + end)
    print("loss", 1.25, flush=True)
    if mode == "crash":
        os.abort()
    sys.exit(int(mode))
''')


@pytest.fixture
def fake(tmp_path):
    prog = tmp_path / "fake_prog.py"
    prog.write_text(FAKE)
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"")  # never loaded: the fake program writes what the library would
    return prog, lib


@pytest.mark.parametrize("code", [0, 3])
def test_record_returns_program_status_and_writes_trace(fake, tmp_path, code):
    prog, lib = fake
    out = tmp_path / "t.uvmtrace"
    st = record(out, [sys.executable, str(prog), str(code)], "both", lib=lib)
    assert st == code
    tr = load_trace(out)
    m = json.loads((out / "manifest.json").read_text())["source"]
    assert m["complete"] is True and m["exit_status"] == code
    assert m["join"]["status"] == "ok" and m["command"][-1] == str(code)
    assert m["collector_version"] and m["date"]
    import pyarrow.parquet as pq
    k = pq.read_table(out / "kernels.parquet").to_pandas()
    assert k.duration_ns.tolist() == [25]
    a = pq.read_table(out / "accesses.parquet").to_pandas()
    assert a["count"].tolist() == [1, 3] and a["flags"].tolist() == [1, 2]
    # uvmtrace v1.1 from the page pass: slices, n_slices and the host access
    assert a["slices"].tolist() == [1, 5] and k.n_slices.tolist() == [3]
    assert json.loads((out / "manifest.json").read_text())["minor"] == 1
    assert tr.events.op.tolist() == ["alloc", "host_access", "kernel"]


def test_record_crash_leaves_incomplete_trace(fake, tmp_path):
    prog, lib = fake
    out = tmp_path / "c.uvmtrace"
    st = record(out, [sys.executable, str(prog), "crash"], "both", lib=lib)
    assert st == 128 + 6  # SIGABRT, shell convention
    m = json.loads((out / "manifest.json").read_text())["source"]
    assert m["complete"] is False
    assert any("exit handler" in r for r in m["incomplete_reasons"])
    load_trace(out)


def test_record_pages_only_has_no_durations(fake, tmp_path):
    prog, lib = fake
    out = tmp_path / "p.uvmtrace"
    assert record(out, [sys.executable, str(prog), "0"], "pages", lib=lib) == 0
    import pyarrow.parquet as pq
    assert pq.read_table(out / "kernels.parquet").to_pandas().duration_ns.isna().all()


def test_record_errors_name_the_problem(fake, tmp_path):
    prog, lib = fake
    with pytest.raises(RecordError, match="must end in '.uvmtrace'"):
        record(tmp_path / "x.trace", [sys.executable, str(prog), "0"], lib=lib)
    with pytest.raises(RecordError, match="no such file"):
        record(tmp_path / "x.uvmtrace", ["true"], lib=tmp_path / "nope.so")
    with pytest.raises(RecordError, match="expected pages, timing or both"):
        record(tmp_path / "x.uvmtrace", ["true"], "all", lib=lib)
    with pytest.raises(RecordError, match="cannot run"):
        record(tmp_path / "x.uvmtrace", [str(tmp_path / "missing-program")], lib=lib)
    (tmp_path / "e.uvmtrace").mkdir()
    with pytest.raises(RecordError, match="exists"):
        record(tmp_path / "e.uvmtrace", ["true"], lib=lib)


def test_cli_parser_roundtrip(fake, tmp_path, capsys):
    import argparse
    from uvmsim.record import configure_parser, main, run_from_args
    prog, lib = fake
    p = argparse.ArgumentParser()
    configure_parser(p)
    out = tmp_path / "cli.uvmtrace"
    args = p.parse_args(["-o", str(out), "--pass", "timing", "--lib", str(lib), "--",
                         sys.executable, str(prog), "3"])
    assert args.passes == "timing"
    assert run_from_args(args) == 3
    m = json.loads((out / "manifest.json").read_text())["source"]
    assert m["passes"] == ["timing"] and "timing pass only" in m["join"]["status"]
    bad = ["-o", str(tmp_path / "bad.trace"), "--lib", str(lib), "--", "true"]
    with pytest.raises(RecordError, match="must end in '.uvmtrace'"):
        run_from_args(p.parse_args(bad))
    # the stand-alone entry turns it, and a malformed --env, into one line and status 2
    capsys.readouterr()
    assert main(bad) == 2
    err = capsys.readouterr().err
    assert err.startswith("uvmsim record: error: ") and "must end in '.uvmtrace'" in err
    assert err.count("\n") == 1
    assert main(["-o", str(out), "--env", "NOEQUALS", "--", "true"]) == 2
    assert "--env 'NOEQUALS': expected KEY=VALUE" in capsys.readouterr().err


# --------------------------------------------------------------------------- v1.1: slices, host accesses
def _v11_raw(tmp_path: Path, *, slices=(0b1, 0b101, 0b11), n_slices=(3, 2), end_lines=()):
    """A page pass with two managed allocations, host accesses and two kernels with slices."""
    B2 = BASE + 0x400000
    lines = [
        {"t": "meta", "pass": "pages", "rec_bytes": REC_DTYPE.itemsize, "slices": True},
        {"t": "alloc", "base": BASE, "size": 8 * 4096, "kind": "managed", "name": ""},
        {"t": "alloc", "base": B2, "size": 4 * 4096, "kind": "managed", "name": ""},
        {"t": "host_access", "addr": BASE, "size": 2 * 4096},
        {"t": "host_access", "addr": B2 + 4096, "size": 16 * 4096},  # past B2's end: clipped
        {"t": "host_access", "addr": BASE + 0x100000, "size": 4096},  # in no allocation
        {"t": "kernel", "name": "k1", "grid": "1,1,1", "block": "32,1,1", "stream": 0,
         "off": 0, "n": 2, "n_slices": n_slices[0], "slice_ns": 2048},
        {"t": "host_access", "addr": BASE + 4096, "size": 4096},
        {"t": "kernel", "name": "k2", "grid": "1,1,1", "block": "32,1,1", "stream": 0,
         "off": 2 * REC_DTYPE.itemsize, "n": 1, "n_slices": n_slices[1], "slice_ns": 1024},
        *end_lines,
    ]
    P = BASE >> 12
    recs = [(P + 1, 4, 1, slices[0]), (P, 2, 2, slices[1]), (P + 1, 1, 1, slices[2])]
    d = tmp_path / "raw"
    _write_raw(d, 99, lines, recs)
    (pages,) = read_raw_pass(d, "pages")
    return pages


def test_slices_and_host_accesses_join(tmp_path):
    from uvmsim import write_trace
    tables, stats = build_tables(_v11_raw(tmp_path), None)
    acc, k, ev = tables["accesses"], tables["kernels"], tables["events"]
    assert acc["slices"].dtype == np.uint64
    assert acc["slices"].tolist() == [0b1, 0b101, 0b11]
    assert acc["order"].tolist() == [0, 1, 0]  # first-touch rank, unchanged by slices
    assert k["n_slices"].tolist() == [3, 2] and k["slice_ns"].tolist() == [2048, 1024]
    assert ev.op.tolist() == ["alloc", "alloc", "host_access", "host_access", "kernel",
                              "host_access", "kernel"]
    ha = ev[ev.op == "host_access"]
    B2 = BASE + 0x400000
    assert [(int(a), int(s)) for a, s in zip(ha.addr, ha["size"])] == [
        (BASE, 8192), (B2 + 4096, 3 * 4096), (BASE + 4096, 4096)]
    assert ha.arg.isna().all() and ha.kernel_id.isna().all() and ha.alloc_id.isna().all()
    assert stats["skipped"] == {"host access outside live allocations": 1}
    assert stats["slices"] is True
    assert stats["host_access_events"] == 3 and stats["host_access_pages"] == 6
    # the writer keeps the v1.1 columns and marks the manifest; the reader takes them back
    out = tmp_path / "v11.uvmtrace"
    write_trace(out, allocations=tables["allocations"], events=tables["events"],
                kernels=tables["kernels"], accesses=tables["accesses"], source={})
    assert json.loads((out / "manifest.json").read_text())["minor"] == 1
    tr = load_trace(out)
    assert tr.arrays.row_slices.tolist() == [0b1, 0b101, 0b11]
    assert tr.arrays.k_nslices.tolist() == [3, 2]
    assert (tr.events.op == "host_access").sum() == 3


@pytest.mark.parametrize("slices,n_slices,what", [
    ((0b1, 0, 0b1), (3, 2), "slices 0x0"),        # a touched page in no slice
    ((0b1, 0b1000, 0b1), (3, 2), "slices 0x8"),   # bit 3 of a 3-slice kernel
    ((0b1, 0b1, 0b1), (65, 2), "n_slices 65"),
])
def test_bad_slices_are_an_error_naming_the_kernel(tmp_path, slices, n_slices, what):
    pages = _v11_raw(tmp_path, slices=slices, n_slices=n_slices)
    with pytest.raises(RecordError, match=f"kernel 0 \\(k1\\).*{what}"):
        build_tables(pages, None)


def test_raw_without_slices_gives_a_v1_trace(tmp_path):
    from uvmsim import write_trace
    d = _scenario(tmp_path)
    (pages,) = read_raw_pass(d, "pages")
    tables, stats = build_tables(pages, None)
    assert "slices" not in tables["accesses"] and "n_slices" not in tables["kernels"]
    assert stats["slices"] is False and stats["host_access_events"] == 0
    out = tmp_path / "v1.uvmtrace"
    write_trace(out, allocations=tables["allocations"], events=tables["events"],
                kernels=tables["kernels"], accesses=tables["accesses"], source={})
    assert "minor" not in json.loads((out / "manifest.json").read_text())


def test_kernel_lines_mixing_slices_and_none_are_an_error(tmp_path):
    pages = _v11_raw(tmp_path)
    for r in pages.lines:
        if r.get("name") == "k2":
            del r["n_slices"]
    with pytest.raises(RecordError, match="1 of 2 kernel lines give no n_slices"):
        build_tables(pages, None)


def test_record_size_from_another_library_version_is_an_error(tmp_path):
    pages = _v11_raw(tmp_path)
    pages.lines[0]["rec_bytes"] = 16  # the v1 collector's records
    with pytest.raises(RecordError, match="records of 16 bytes, this reader expects 24"):
        build_tables(pages, None)
