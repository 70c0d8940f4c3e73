"""The uvmsim command line, run as a user would (a subprocess)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import uvmsim
from uvmsim.trace import synth

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, check=False):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("UVMSIM_DEBUG", None)
    p = subprocess.run([sys.executable, "-m", "uvmsim", *map(str, args)], capture_output=True,
                       text=True, env=env, timeout=600)
    if check:
        assert p.returncode == 0, p.stderr
    return p


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return synth.write("training", tmp_path_factory.mktemp("t") / "tr.uvmtrace", layers=3,
                       steps=1, weight_bytes=3 << 20, activation_bytes=5 << 20)


def test_replay_json_is_exactly_the_summary(trace):
    p = cli("replay", trace, "--oversub", "2", "--prefetch", "64k", "--json", check=True)
    got = json.loads(p.stdout)
    assert p.stdout.count("\n") == 1
    want = uvmsim.simulate(uvmsim.load_trace(trace), oversub=2.0, prefetch="64k").summary
    assert got == want


def test_replay_capacity_and_params(trace, tmp_path):
    p = cli("replay", trace, "--capacity", "8MiB", "--prefetch-param", "threshold=80",
            "--fault-batch-size", "32", "--hardware", "a100-pcie4", "--json",
            "--kernels-out", tmp_path / "k.csv", check=True)
    s = json.loads(p.stdout)
    assert s["capacity_chunks"] == 4
    want = uvmsim.simulate(uvmsim.load_trace(trace), capacity_bytes=8 << 20,
                           prefetch_params={"threshold": 80}, fault_batch_size=32,
                           hardware="a100-pcie4").summary
    assert s == want
    k = pd.read_csv(tmp_path / "k.csv")
    assert len(k) == s["kernels"] and k["faults"].sum() == s["faults"]


def test_replay_human_output(trace):
    p = cli("replay", trace, check=True)
    assert "evicted_chunks" in p.stdout and "sim_time_ns" in p.stdout


@pytest.mark.parametrize("args,msg", [
    (["replay", "/nonexistent.uvmtrace"], "no such trace directory"),
    (["replay", "{trace}", "--prefetch", "bogus"], "unknown prefetch policy 'bogus'"),
    (["replay", "{trace}", "--evict", "no.such.module:x"], "cannot load eviction policy"),
    (["replay", "{trace}", "--prefetch-param", "nope=1"], "has no parameter 'nope'"),
    (["replay", "{trace}", "--prefetch-param", "threshold"], "is not NAME=VALUE"),
    (["replay", "{trace}", "--hardware", "tpu"], "unknown hardware 'tpu'"),
    (["synth", "zipf", "-o", "{tmp}/z.uvmtrace", "--param", "colour=1"],
     "takes no parameter 'colour'"),
])
def test_user_errors_are_one_line_no_traceback(trace, tmp_path, args, msg):
    args = [a.format(trace=trace, tmp=tmp_path) for a in args]
    p = cli(*args)
    assert p.returncode == 2
    assert msg in p.stderr
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [["replay", "x", "--oversub", "0"],
                                  ["replay", "x", "--oversub", "2", "--capacity", "1GiB"],
                                  ["replay", "x", "--capacity", "lots"],
                                  ["replay", "x", "--fault-batch-size", "0"],
                                  ["frobnicate"]])
def test_bad_arguments_exit_nonzero(args):
    p = cli(*args)
    assert p.returncode == 2 and "Traceback" not in p.stderr


def test_malformed_trace_is_a_user_error(trace, tmp_path):
    import shutil
    bad = tmp_path / "bad.uvmtrace"
    shutil.copytree(trace, bad)
    (bad / "manifest.json").write_text('{"format": "uvmtrace", "version": 7}')
    p = cli("info", bad)
    assert p.returncode == 2 and "unknown version 7" in p.stderr


def test_info(trace):
    p = cli("info", trace, "--json", check=True)
    info = json.loads(p.stdout)
    t = uvmsim.load_trace(trace)
    assert info["kernels"] == t.n_kernels and info["accesses"] == t.n_accesses
    assert info["peak_blocks"] == t.peak_blocks and info["footprint_bytes"] == t.footprint_bytes
    assert info["allocations"] == len(t.allocations)


def test_synth_writes_a_valid_deterministic_trace(tmp_path):
    a = cli("synth", "zipf", "-o", tmp_path / "a.uvmtrace", "--seed", "4", "--footprint",
            "16MiB", "--kernels", "3", "--param", "alpha=1.1", check=True)
    cli("synth", "zipf", "-o", tmp_path / "b.uvmtrace", "--seed", "4", "--footprint", "16MiB",
        "--kernels", "3", "--param", "alpha=1.1", check=True)
    ta, tb = uvmsim.load_trace(tmp_path / "a.uvmtrace"), uvmsim.load_trace(tmp_path / "b.uvmtrace")
    assert ta.n_kernels == 3 and (ta.arrays.row_page == tb.arrays.row_page).all()
    assert a.stdout.strip().endswith("a.uvmtrace")
    p = cli("synth", "zipf", "-o", tmp_path / "a.uvmtrace")
    assert p.returncode == 2 and "exists" in p.stderr


def test_sweep_table_and_plot(trace, tmp_path):
    p = cli("sweep", trace, "--oversub", "1,2", "--prefetch", "none,2m", "-o",
            tmp_path / "s.parquet", "--plot", tmp_path / "s.png", "--no-progress", "--jobs", "2",
            check=True)
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert len(df) == 4
    assert list(df["prefetch"]) == ["none", "none", "2m", "2m"]     # the caller's order
    assert (df.loc[df["oversub"] == 1.0, "slowdown"] == 1.0).all()
    assert (tmp_path / "s.png").stat().st_size > 10_000
    assert "slowdown" in p.stdout
    one = uvmsim.simulate(uvmsim.load_trace(trace), oversub=2.0, prefetch="2m").summary
    row = df[(df["prefetch"] == "2m") & (df["oversub"] == 2.0)].iloc[0]
    assert row["faults"] == one["faults"] and row["sim_time_ns"] == pytest.approx(one["sim_time_ns"])


def test_policies_and_hardware_lists():
    p = cli("policies", "--json", check=True)
    names = {(r["kind"], r["name"]) for r in json.loads(p.stdout)}
    assert {("prefetch", "density"), ("prefetch", "none"), ("evict", "lru2m")} <= names
    p = cli("hardware", "--json", check=True)
    hw = json.loads(p.stdout)
    assert {"h100-pcie5", "a100-pcie4"} <= set(hw)
    for n, h in hw.items():
        assert set(h["sources"]) >= {"batch_ns", "fault_ns", "bw_peak_gbps"}
        # only the progress preset prices zero-fill batches apart (with its source); in every
        # other one such a batch costs batch_ns
        if n == "h200-pcie5-progress":
            assert h["zero_batch_ns"] == 30_000.0 and "probe" in h["sources"]["zero_batch_ns"]
        else:
            assert h["zero_batch_ns"] is None, n
    # the text listing names an unset zero_batch_ns by what it falls back to
    p = cli("hardware", check=True)
    assert any(ln.split()[:2] == ["zero_batch_ns", "batch_ns"] for ln in p.stdout.splitlines())


@pytest.fixture(scope="module")
def v11_trace(tmp_path_factory):
    from uvmsim.trace.builder import TraceBuilder
    b = TraceBuilder()
    x = b.alloc(6 << 20)
    b.host_access(b.base(x), 8 << 12, "write")
    pages = [int(b.pages(x, 512 * i, 512 * i + 1)[0]) for i in range(3)]
    b.kernel("waves", rows=[(p, 1) for p in pages], slices=[0b11, 0b11, 0b11], n_slices=2)
    b.kernel("plain", reads=b.pages(x, 0, 8))
    return b.write(tmp_path_factory.mktemp("v11") / "v11.uvmtrace")


def test_replay_model_preset_and_overrides(v11_trace):
    t = uvmsim.load_trace(v11_trace)
    kw = dict(capacity_bytes=4 << 20, prefetch="none", fault_batch_size=1)
    h200 = uvmsim.simulate(t, model="h200", slices=True, **kw).summary
    contract = uvmsim.simulate(t, **kw).summary
    assert h200["faults"] > contract["faults"]            # the slice passes re-fault
    args = ("replay", v11_trace, "--capacity", "4MiB", "--prefetch", "none",
            "--fault-batch-size", "1", "--json")
    assert json.loads(cli(*args, "--model", "h200", "--slices", check=True).stdout) == h200
    assert json.loads(cli(*args, check=True).stdout) == contract
    off = cli(*args, "--model", "h200", "--no-slices", "--no-host-access", "--hardware",
              "h200-pcie5", check=True)
    assert json.loads(off.stdout) == contract
    only = cli(*args, "--slices", check=True)
    assert json.loads(only.stdout) == uvmsim.simulate(t, slices=True, **kw).summary
    human = cli("replay", v11_trace, "--model", "h200", check=True).stdout
    assert "model=h200" in human and "host_populated_pages" in human
    bad = cli("replay", v11_trace, "--model", "h300")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_sweep_with_a_model(v11_trace, tmp_path):
    p = cli("sweep", v11_trace, "--oversub", "1,3", "--prefetch", "none", "--model", "h200",
            "--json", check=True)
    df = pd.DataFrame(json.loads(p.stdout))
    assert list(df["model"]) == ["h200", "h200"]
    t = uvmsim.load_trace(v11_trace)
    for _, row in df.iterrows():
        s = uvmsim.simulate(t, model="h200", oversub=row["oversub"], prefetch="none")
        assert row["faults"] == s.summary["faults"]
        assert row["host_populated_pages"] == s.extra["host_populated_pages"] == 8


def test_models_list():
    p = cli("models", "--json", check=True)
    ms = json.loads(p.stdout)
    assert set(ms) == {"contract", "h200", "h100", "h200-progress"}
    assert ms["h200"]["host_access"] and not ms["h200"]["slices"]
    assert ms["h200"]["device_copies"] and "dtod_read" in ms["h200"]["sources"]["device_copies"]
    assert not ms["h100"]["device_copies"] and "H100" in ms["h100"]["sources"]["device_copies"]
    assert ms["h200-progress"]["block_progress"] and ms["h200-progress"]["device_copies"]
    assert ms["h200-progress"]["hardware"]["name"] == "h200-pcie5-progress"
    # the H100 preset: its calibrated link, with the measurement named as the source
    assert ms["h100"]["hardware"]["name"] == "h100-pcie5-fit" and ms["h100"]["host_access"]
    assert ms["h100"]["shared_windows"] and not ms["h200"]["shared_windows"]
    assert "H100" in ms["h100"]["hardware"]["sources"]["batch_ns"]
    assert "probes" in ms["h100"]["sources"]["fault_batch_size"]
    assert not ms["contract"]["host_access"]
    assert ms["h200"]["hardware"]["name"] == "h200-pcie5-fit"
    assert "validation.md" in ms["h200"]["hardware"]["sources"]["evict_ns"]
    assert "thrashing" in ms["h200"]["sources"]
    listing = cli("models", check=True).stdout
    assert "h200:" in listing and "h100:" in listing and "h200-progress:" in listing


# ---------------------------------------------------------------- one-line errors, outputs
@pytest.mark.parametrize("args,msg", [
    (["sweep", "{trace}", "--oversub", "inf"], "argument --oversub: must be > 0 and finite"),
    (["sweep", "{trace}", "--oversub", "1,nan"], "argument --oversub: must be > 0 and finite"),
    (["sweep", "{trace}", "--oversub", "0"], "argument --oversub: must be > 0 and finite"),
    (["sweep", "{trace}", "--oversub", "-1.5"], "argument --oversub: must be > 0 and finite"),
    (["replay", "{trace}", "--oversub", "inf"], "argument --oversub: must be > 0 and finite"),
    (["sweep", "{trace}", "-o", ""], "argument -o/--out: empty path"),
    (["sweep", "{trace}", "--plot", ""], "argument --plot: empty path"),
    (["replay", "{trace}", "--kernels-out", ""], "argument --kernels-out: empty path"),
    (["replay"], "the following arguments are required: trace"),
    (["replay", "{trace}", "--capacity", "lots"], "not a byte size"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    ([], "the following arguments are required: COMMAND"),
    (["sweep", "{trace}", "-o", "{tmp}/t.txt"], "-o {tmp}/t.txt: must end in .parquet or .csv"),
    (["sweep", "{trace}", "--plot", "{tmp}/p.xyz"], "--plot {tmp}/p.xyz: must end in one of"),
    (["sweep", "{trace}", "-o", "{tmp}/afile/t.csv"], "afile is a file, not a folder"),
    (["sweep", "{trace}", "--dataset", "{tmp}/afile"], "afile is a file, not a folder"),
    (["sweep", "{trace}", "--segment", "no_such_kernel"],
     "segment 'no_such_kernel': no kernel of trace 'tr' has it in its name"),
    (["synth", "zipf", "-o", "{trace}"], "exists (use --overwrite to replace it)"),
])
def test_every_error_is_one_line(trace, tmp_path, args, msg):
    (tmp_path / "afile").write_text("x")
    args = [a.format(trace=trace, tmp=tmp_path) for a in args]
    p = cli(*args, *(["--no-progress"] if args and args[0] == "sweep" else []))
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    cmd = args[0] if args and args[0] in ("sweep", "replay", "synth") else None
    assert lines[0].startswith(f"uvmsim {cmd}: error: " if cmd else "uvmsim: error: ")
    assert msg.format(tmp=tmp_path) in lines[0]
    assert p.stdout == ""                          # nothing computed, nothing printed
    assert not list(tmp_path.glob("t.*")) and not list(tmp_path.glob("p.*"))


def test_argparse_errors_point_to_help(trace):
    p = cli("sweep", trace, "--oversub", "inf")
    assert p.stderr.rstrip().endswith("(see `uvmsim sweep --help`)")
    assert "usage:" not in p.stderr


def test_sweep_table_survives_a_failed_write(trace, tmp_path, monkeypatch, capsys):
    """A write that fails after the checks (a full disk, say) still prints the table."""
    import uvmsim.cli as C

    def full_disk(df, path):
        raise OSError(28, "No space left on device", str(path))
    monkeypatch.setattr(C, "_write_table", full_disk)
    out = tmp_path / "s.csv"
    rc = C.main(["sweep", str(trace), "--oversub", "1,2", "--prefetch", "none", "-o", str(out),
                 "--no-progress", "--executor", "serial"])
    got = capsys.readouterr()
    assert rc == 2
    assert got.err.count("\n") == 1 and "No space left on device" in got.err
    assert "the table is printed above" in got.err
    table = got.out.splitlines()
    assert table[0].split()[:3] == ["prefetch", "evict", "oversub"] and len(table) == 3
    want = uvmsim.simulate(uvmsim.load_trace(trace), oversub=2.0, prefetch="none").summary
    assert f"{want['faults']}" in table[2]
    # --json: the records on stdout, the error on stderr
    rc = C.main(["sweep", str(trace), "--oversub", "2", "--prefetch", "none", "-o", str(out),
                 "--json", "--executor", "serial"])
    got = capsys.readouterr()
    assert rc == 2 and json.loads(got.out)[0]["faults"] == want["faults"]


def test_sweep_without_factor_1_keeps_the_meaning_of_slowdown(trace, tmp_path):
    p = cli("sweep", trace, "--oversub", "1.5,2", "--prefetch", "none", "--json",
            "--dataset", tmp_path / "ds", check=True)
    df = pd.DataFrame(json.loads(p.stdout))
    assert list(df["oversub"]) == [1.5, 2.0]        # the baseline is no row
    t = uvmsim.load_trace(trace)
    base = uvmsim.simulate(t, oversub=1.0, prefetch="none").summary["sim_time_ns"]
    for _, row in df.iterrows():
        s = uvmsim.simulate(t, oversub=row["oversub"], prefetch="none").summary
        assert row["slowdown"] == pytest.approx(s["sim_time_ns"] / base)
    assert len(list((tmp_path / "ds").glob("cell-*.parquet"))) == 3   # baseline cell kept


def test_synth_existing_output_names_the_flag(trace):
    p = cli("synth", "zipf", "-o", trace)
    assert "--overwrite" in p.stderr and "overwrite=True" not in p.stderr


def _unwritable_folder(tmp_path) -> Path:
    """A folder where no file can be created: a read-only folder, or for root (who may
    write anywhere on a normal file system) /sys, which the kernel keeps read-only."""
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    if not os.access(d, os.W_OK):
        return d
    if Path("/sys").is_dir() and not os.access("/sys", os.W_OK):
        return Path("/sys")
    try:   # root sees W_OK everywhere: try a file
        (Path("/sys") / ".uvmsim-probe").touch()
    except OSError:
        return Path("/sys")
    pytest.skip("no folder here refuses a new file")


def test_sweep_to_an_unwritable_path_fails_before_any_cell(trace, tmp_path, monkeypatch,
                                                            capsys):
    import uvmsim.cli as C
    import uvmsim.sweep as S
    monkeypatch.setattr(S, "_run_cell", lambda task: pytest.fail("a cell ran"))
    ro = _unwritable_folder(tmp_path)
    for flag in ("-o", "--plot"):
        out = ro / ("s.csv" if flag == "-o" else "s.png")
        rc = C.main(["sweep", str(trace), "--oversub", "1,2", "--prefetch", "none", flag,
                     str(out), "--no-progress", "--executor", "serial"])
        got = capsys.readouterr()
        assert rc == 2 and got.out == ""
        assert got.err.count("\n") == 1, got.err
        assert f"{flag} {out}: cannot write there" in got.err
