"""Host-side tests of `uvmsim run` (no GPU): balloon arithmetic, counter attribution, reading a
run's raw files, censoring and argument errors. A fake program stands in for a CUDA program:
it writes the raw files the collector's timing pass would."""
from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from uvmsim.cli import main as cli_main
from uvmsim.groundtruth import (CAUSE_COLUMNS, CAUSES, UM_DTYPE, RunError, attribute_records,
                                counts_by_kernel, driver_counters_text, driver_totals,
                                free_target_bytes, peak_live_managed_bytes, required_traffic,
                                run, trace_bounds)
from uvmsim.trace.builder import TraceBuilder

REPO = Path(__file__).resolve().parents[1]
MiB, GiB = 1 << 20, 1 << 30


@pytest.fixture(autouse=True)
def _fake_gpu(monkeypatch):
    """A fake program stands in for the CUDA program here: skip the check for a real GPU
    (tests/test_gpucheck.py tests it)."""
    monkeypatch.setenv("UVMSIM_SKIP_GPU_CHECK", "1")


# --------------------------------------------------------------------------- balloon arithmetic
@pytest.fixture(scope="module")
def balloon_plan(tmp_path_factory):
    """uvmt_balloon_plan from a fresh build of libuvmtrace.so (the function the library uses)."""
    if shutil.which("cmake") is None or not Path("/usr/local/cuda/include/cupti.h").exists():
        pytest.skip("cmake or the CUDA toolkit (CUPTI headers) not available")
    b = tmp_path_factory.mktemp("gt_build")
    for cmd in (["cmake", "-S", str(REPO / "native_trace"), "-B", str(b),
                 "-DUVMTRACE_SANITIZER_ROOT=/nonexistent", "-DUVMTRACE_BUILD_TESTS=OFF"],
                ["cmake", "--build", str(b), "--target", "uvmtrace", "-j", "2"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lib = ctypes.CDLL(str(b / "libuvmtrace.so"))
    f = lib.uvmt_balloon_plan
    f.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                  ctypes.POINTER(ctypes.c_uint64)]

    def plan(free: int, footprint: int, target: int) -> tuple[int, int]:
        out = ctypes.c_uint64(12345)
        rc = f(free, footprint, target, ctypes.byref(out))
        return rc, out.value
    return plan


def test_balloon_plan_leaves_the_target_free(balloon_plan):
    free = 140 * GiB + 3 * MiB
    rc, balloon = balloon_plan(free, 1 * GiB, free_target_bytes(1 * GiB, 2.0))
    assert rc == 0
    assert balloon % (2 * MiB) == 0                 # cuMemAlloc granularity
    assert 0 <= free - balloon - 512 * MiB < 2 * MiB  # at least the target, within a granule


def test_balloon_plan_never_exceeds_free_and_refuses_oversized_footprints(balloon_plan):
    assert balloon_plan(4 * GiB, 1 * GiB, 0) == (0, 4 * GiB)          # all of free, no more
    assert balloon_plan(4 * GiB, 1 * GiB, 5 * GiB) == (0, 0)          # target above free: none
    assert balloon_plan(4 * GiB, 1 * GiB, 4 * GiB) == (0, 0)
    assert balloon_plan(1 * GiB, 1 * GiB + 1, 0) == (1, 0)            # footprint > free: refused


def test_free_target_bytes():
    assert free_target_bytes(3 * GiB, 3.0) == GiB
    assert free_target_bytes(GiB, 1.25) == int(GiB / 1.25)
    assert free_target_bytes(GiB, 1.0) == GiB
    for bad in (0, -1, 1.5):
        with pytest.raises(RunError, match="footprint"):
            free_target_bytes(bad, 2.0)
    for bad in (0, -2.0, float("nan"), float("inf")):
        with pytest.raises(RunError, match="oversub"):
            free_target_bytes(GiB, bad)


def test_peak_live_managed_bytes():
    b = TraceBuilder()
    x = b.alloc(8 * MiB)
    d = b.alloc(64 * MiB, kind="device")
    y = b.alloc(4 * MiB)
    b.kernel("k", reads=b.pages(x, 0, 4))
    b.free(x)
    b.alloc(2 * MiB)
    b.kernel("k2", reads=b.pages(y, 0, 4))
    b.free(d)
    assert peak_live_managed_bytes(b.build()) == 12 * MiB  # device memory does not count


# --------------------------------------------------------------------------- attribution
def test_attribute_records_by_kernel_interval():
    start, end = np.array([0, 20, 50]), np.array([10, 30, 60])
    t = np.array([0, 5, 10, 15, 25, 30, 31, 55, 70, -3])
    assert attribute_records(start, end, t).tolist() == [0, 0, 0, -1, 1, 1, -1, 2, -1, -1]


def test_attribute_records_overlapping_kernels():
    # kernel 0 [0, 100] on one stream; kernel 1 [10, 20] and kernel 2 [30, 40] on another
    start, end = np.array([0, 10, 30]), np.array([100, 20, 40])
    t = np.array([5, 15, 25, 35, 90])
    assert attribute_records(start, end, t).tolist() == [0, 1, 0, 2, 0]
    # kernels given out of start order
    order = np.array([2, 0, 1])
    got = attribute_records(start[order], end[order], t)
    assert got.tolist() == [1, 2, 1, 0, 1]


def _um(rows):
    a = np.zeros(len(rows), UM_DTYPE)
    for i, (counter, flags, value, start) in enumerate(rows):
        a[i] = (counter, flags, value, start, start + 1, 0, 0, 0)
    return a


def test_counts_by_kernel_sums_by_counter_and_cause():
    start, end = np.array([100, 200]), np.array([150, 250])
    um = _um([(4, 1, 3, 110), (4, 2, 2, 120), (1, 2, 4096, 111), (1, 3, 61440, 112),
              (2, 4, 2 * MiB, 210), (2, 1, 4096, 300), (1, 1, 8192, 50), (3, 0, 0xdead, 60),
              (5, 0, 65536, 220), (6, 0, 0, 230)])
    per, outside = counts_by_kernel(start, end, um)
    assert per["gpu_page_faults"].tolist() == [5, 0]
    assert per["gpu_fault_records"].tolist() == [2, 0]
    assert per["htod_bytes"].tolist() == [4096 + 61440, 0]
    assert per["htod_demand_bytes"].tolist() == [4096, 0]
    assert per["htod_prefetch_bytes"].tolist() == [61440, 0]
    assert per["dtoh_bytes"].tolist() == [0, 2 * MiB]
    assert per["dtoh_eviction_bytes"].tolist() == [0, 2 * MiB]
    assert per["thrashing"].tolist() == [0, 1] and per["throttling"].tolist() == [0, 1]
    assert outside["htod_bytes"] == 8192 and outside["dtoh_bytes"] == 4096
    assert outside["cpu_page_faults"] == 1 and outside["gpu_page_faults"] == 0


def test_counts_by_kernel_has_every_cause_remote_maps_and_cpu_faults_per_kernel():
    start, end = np.array([100, 200]), np.array([150, 250])
    # HtoD user (cause 1) and access counters (5); DtoH coherence (2), prefetch (3) and user;
    # a remote map (7) of 64 KiB in kernel 1; CPU faults (3) in kernel 0 and outside
    um = _um([(1, 1, 4096, 101), (1, 5, 8192, 102), (2, 2, 65536, 201), (2, 3, 12288, 202),
              (2, 1, 4096, 203), (7, 1, 65536, 204), (3, 0, 0xbeef, 105), (3, 0, 0xbeef, 106),
              (3, 0, 0xbeef, 400), (2, 2, 4096, 500)])
    per, outside = counts_by_kernel(start, end, um)
    assert per["htod_user_bytes"].tolist() == [4096, 0]
    assert per["htod_access_counters_bytes"].tolist() == [8192, 0]
    assert per["htod_demand_bytes"].tolist() == [0, 0]          # no coherence HtoD here
    assert per["dtoh_coherence_bytes"].tolist() == [0, 65536]
    assert per["dtoh_prefetch_bytes"].tolist() == [0, 12288]
    assert per["dtoh_user_bytes"].tolist() == [0, 4096]
    assert per["dtoh_eviction_bytes"].tolist() == [0, 0]
    assert per["dtoh_bytes"].tolist() == [0, 65536 + 12288 + 4096]
    assert per["remote_map_records"].tolist() == [0, 1]
    assert per["remote_map_bytes"].tolist() == [0, 65536]
    assert per["cpu_page_faults"].tolist() == [2, 0]
    assert outside["cpu_page_faults"] == 1 and outside["dtoh_coherence_bytes"] == 4096
    # every cause of each direction is a column, and the named three are not repeated
    every = {f"{d}_{c}_bytes" for d in ("htod", "dtoh") for c in CAUSES.values()}
    assert set(CAUSE_COLUMNS) == every - {"htod_coherence_bytes", "htod_prefetch_bytes",
                                          "dtoh_eviction_bytes"}
    # the cause columns and the three named ones add up to each direction's bytes
    for d, named in (("htod", ("htod_demand_bytes", "htod_prefetch_bytes")),
                     ("dtoh", ("dtoh_eviction_bytes",))):
        parts = [c for c in CAUSE_COLUMNS if c.startswith(d)] + list(named)
        assert (sum(per[c] for c in parts) == per[f"{d}_bytes"]).all()


# --------------------------------------------------------------------------- fake runs
FAKE = textwrap.dedent("""
    import json, os, struct, sys, time
    out, pid = os.environ["UVMTRACE_OUT"], os.getpid()
    mode = sys.argv[1]
    fp, target = int(os.environ["UVMTRACE_BALLOON_FOOTPRINT"]), int(os.environ["UVMTRACE_BALLOON_FREE_TARGET"])
    lines = [{{"t": "meta", "pass": "timing"}}]
    free = 100 << 30
    if mode == "refuse":
        lines.append({{"t": "balloon", "status": "refused", "free_before": 1 << 20, "total": free,
                      "footprint": fp, "free_target": target, "t_ns": 5}})
    else:
        lines.append({{"t": "balloon", "status": "ok", "free_before": free, "total": free,
                      "footprint": fp, "free_target": target, "balloon": free - target,
                      "free_after": target, "allocs": 1, "t_ns": 1000}})
        for i, (s, e) in enumerate([(100, 150), (200, 260)]):
            lines.append({{"t": "kact", "corr": i + 1, "name": f"k{{i}}", "start": s, "end": e,
                          "grid": "1,1,1", "block": "1,1,1"}})
    with open(f"{{out}}/timing.{{pid}}.jsonl", "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\\n")
    with open(f"{{out}}/timing.{{pid}}.bin", "wb") as f:  # uvmsim.groundtruth.UM_DTYPE
        for counter, flags, value, start in [(4, 1, 7, 120), (1, 2, 8192, 210), (2, 4, 4096, 300)]:
            f.write(struct.pack("<IIQQQQII", counter, flags, value, start, start + 1, 0, 0, 0))
    if mode == "refuse":
        sys.exit(87)
    if mode == "hang":
        time.sleep(60)
    with open(f"{{out}}/timing.{{pid}}.jsonl", "a") as f:
        f.write(json.dumps({{"t": "end", "how": "exit", "kernels": 2, "managed_peak": fp,
                            "dropped_records": 0, "driver_counters": {{
                                "status": "ok", "htod_bytes": 3 << 20, "dtoh_bytes": 1 << 20,
                                "cpu_faults": 5, "gpu_faults": 40}}, "t_ns": 3000}}) + "\\n")
""")


@pytest.fixture()
def fake(tmp_path):
    p = tmp_path / "fake.py"
    p.write_text(FAKE.format())
    lib = tmp_path / "libfake.so"  # never loaded: the fake program uses no CUDA
    lib.write_text("")
    return {"cmd": [sys.executable, str(p)], "lib": lib, "dir": tmp_path}


def test_run_reads_kernels_counters_and_balloon(fake):
    out = fake["dir"] / "r.json"
    r = run(fake["cmd"] + ["ok"], factor=4.0, footprint=GiB, timeout_s=30, lib=fake["lib"],
            out=out)
    assert json.loads(out.read_text())["real_s"] == r["real_s"]
    assert r["censored"] is False and r["exit_status"] == 0
    assert r["free_target_bytes"] == GiB // 4 and r["free_bytes"] == GiB // 4
    assert r["balloon_made"] and r["balloon_bytes"] == (100 << 30) - GiB // 4
    assert r["real_s"] == pytest.approx((50 + 60) / 1e9)
    assert r["kernels"]["duration_ns"] == [50, 60]
    assert r["kernels"]["gpu_page_faults"] == [7, 0]
    assert r["kernels"]["htod_bytes"] == [0, 8192]
    assert r["totals"]["dtoh_bytes"] == 4096 and r["outside_kernels"]["dtoh_bytes"] == 4096
    assert r["managed_peak_bytes"] == GiB
    assert r["gpu_phase_wall_s"] == pytest.approx(2000 / 1e9)
    # the driver's own totals come through apart from CUPTI's records
    assert r["driver_counters"] == {"status": "ok", "htod_bytes": 3 << 20,
                                    "dtoh_bytes": 1 << 20, "cpu_faults": 5, "gpu_faults": 40}
    assert driver_counters_text(r["driver_counters"]) == (
        "driver counters: HtoD 3.0 MiB, DtoH 1.0 MiB, 40 GPU faults, 5 CPU faults")


def test_driver_counters_text_says_why_there_are_none():
    assert "not read (cannot open /dev/nvidia-uvm-tools" in driver_counters_text(
        {"status": "cannot open /dev/nvidia-uvm-tools: No such file or directory"})
    assert driver_counters_text(None).startswith("driver counters: none")
    # a cut or edited end line: no count, said so, never an exception
    cut = {"status": "ok", "htod_bytes": 5, "dtoh_bytes": "x"}
    assert driver_counters_text(cut) == "driver counters: malformed in the end line"
    assert driver_totals({"driver_counters": cut}) == {}
    assert driver_totals({"driver_counters": [1]}) == {} and driver_totals(None) == {}
    assert driver_counters_text([1]) == "driver counters: not read ([1])"


@pytest.mark.parametrize("counters, driver, cli, expect", [
    (True, None, [], "1"),                                  # with CUPTI's, by default
    (False, None, ["--no-counters"], "0"),                  # a timing run has neither
    (False, True, ["--no-counters", "--driver-counters"], "1"),
    (True, False, ["--no-driver-counters"], "0"),
])
def test_driver_counters_follow_the_counters_unless_asked(fake, monkeypatch, counters, driver,
                                                          cli, expect):
    from uvmsim.record import collector
    seen = []
    real_env = collector.collector_env

    def spy(*args, **kw):
        seen.append(kw["settings"]["UVMTRACE_DRIVER_COUNTERS"])
        return real_env(*args, **kw)
    monkeypatch.setattr(collector, "collector_env", spy)
    run(fake["cmd"] + ["ok"], factor=2.0, footprint=GiB, timeout_s=30, lib=fake["lib"],
        counters=counters, driver_counters=driver)
    assert cli_main(["run", "--oversub", "2", "--footprint", "1GiB", "--lib", str(fake["lib"])]
                    + cli + ["--"] + fake["cmd"] + ["ok"]) == 0
    assert seen == [expect, expect]


def test_run_refused_when_footprint_exceeds_free(fake):
    with pytest.raises(RunError, match="exceeds the GPU's free memory"):
        run(fake["cmd"] + ["refuse"], factor=2.0, footprint=GiB, timeout_s=30, lib=fake["lib"])


def test_run_that_outlives_its_timeout_is_censored_not_dropped(fake):
    r = run(fake["cmd"] + ["hang"], factor=2.0, footprint=GiB, timeout_s=2.0, grace_s=1.0,
            lib=fake["lib"])
    assert r["censored"] is True and r["killed_by_runner"] is True
    assert r["real_s"] == 2.0 and r["timeout_s"] == 2.0
    assert r["kernels"]["duration_ns"] == [50, 60]  # what was measured is kept
    assert r["exit_status"] == 128 + 9
    assert r["driver_counters"] is None  # killed before its end line


# --------------------------------------------------------------------------- CLI errors
@pytest.mark.parametrize("argv, message", [
    (["run", "--oversub", "2", "--", "true"], "one of the arguments --footprint --trace"),
    (["run", "--oversub", "2", "--footprint", "1GiB", "--trace", "x.uvmtrace", "--", "true"],
     "not allowed with argument"),
    (["run", "--oversub", "0", "--footprint", "1GiB", "--", "true"], "must be > 0"),
    (["run", "--oversub", "2", "--footprint", "lots", "--", "true"], "not a byte size"),
    (["run", "--oversub", "2", "--footprint", "1GiB", "--timeout", "-1", "--", "true"],
     "must be > 0"),
])
def test_cli_argument_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_missing_command_and_trace_without_managed_memory(tmp_path, capsys):
    assert cli_main(["run", "--oversub", "2", "--footprint", "1GiB"]) == 2
    assert "no command to run" in capsys.readouterr().err
    b = TraceBuilder()
    d = b.alloc(4 * MiB, kind="device")
    b.kernel("k", reads=b.pages(d, 0, 2))
    b.write(tmp_path / "dev.uvmtrace")
    assert cli_main(["run", "--oversub", "2", "--trace", str(tmp_path / "dev.uvmtrace"),
                     "--", "true"]) == 2
    assert "no managed allocation" in capsys.readouterr().err
    assert cli_main(["run", "--oversub", "2", "--footprint", "1GiB", "--lib",
                     str(tmp_path / "missing.so"), "--", "true"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_traffic_every_run_must_have_moved():
    # 4 pages the CPU wrote, read by k1; k2 then touches those 4 and 6 pages more
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.host_access(b.base(x), 4 * 4096, "write")
    b.kernel("k1", reads=b.pages(x, 0, 4))
    b.kernel("k2", reads=b.pages(x, 0, 10))
    bd = trace_bounds(b.build())
    assert bd[["U", "H", "G"]].values.tolist() == [[4, 4, 0], [10, 0, 4]]
    # unlimited memory: the 4 host pages once, nothing evicted
    assert required_traffic(bd, 1 << 30) == (4 * 4096, 0)
    # 2 pages of memory: k2 finds at most 2 of its 4 GPU pages resident, so 2 come back in;
    # k1 cannot keep its 4, k2 its 10: 2 + 8 pages evicted
    assert required_traffic(bd, 2 * 4096) == (6 * 4096, 10 * 4096)


def test_traffic_counts_a_device_copy_destination_as_on_the_gpu():
    # the CPU wrote 4 pages; a device-to-device copy then wrote 3 of them (the copy engine
    # faults them onto the GPU: docs/model.md, item 10), so k finds 1 on the host
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.host_access(b.base(x), 4 * 4096, "write")
    b.memcpy_dtod(b.base(x), 3 * 4096)
    b.kernel("k", reads=b.pages(x, 0, 4))
    assert trace_bounds(b.build())[["U", "H", "G"]].values.tolist() == [[4, 1, 3]]
