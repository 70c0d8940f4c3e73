"""What a second fuzz of the reader found, each held to its fix: memory by touched windows
(with a limit that keeps it bounded), Parquet size claims bounded by what Parquet can hold
(never below it), a lone surrogate in the manifest, a symbolic-link loop as the trace path,
and many small row groups read a run at a time."""
from __future__ import annotations

import errno
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow.parquet as pq
import pytest

import uvmsim
from helpers import RSS_CHILD_PRELUDE
from uvmsim import TraceFormatError, load_trace
from uvmsim.trace import _resolve
from uvmsim.trace.builder import TraceBuilder
from uvmsim.trace.io import write_trace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2 = os.path.join(ROOT, "traces", "gpt2_small.uvmtrace")


def _cli(*argv):
    p = subprocess.run([sys.executable, "-m", "uvmsim", *argv], capture_output=True,
                       text=True, timeout=600, env=dict(os.environ))
    return p.returncode, p.stdout, p.stderr


def _prefetch_windows(path, windows: int):
    """A tiny trace: one allocation of `windows` 2 MiB windows, prefetched whole to the GPU,
    and a kernel reading its first page (written without validation: building the dense
    maps is what is measured)."""
    b = TraceBuilder()
    x = b.alloc(windows << 21)
    b.prefetch(b.base(x), windows << 21, "gpu")
    b.kernel("k", reads=b.pages(x, 0, 1))
    return write_trace(path, **b.tables(), validate=False)


# --------------------------------------------------------------------------- memory
@pytest.mark.parametrize("windows", [_resolve.MAX_BLOCKS + 1, (1 << 22) - 1])
def test_touching_more_windows_than_the_limit_is_refused_before_any_page_map(tmp_path,
                                                                              windows):
    with pytest.raises(TraceFormatError, match="blocks of 2 MiB") as e:
        load_trace(_prefetch_windows(tmp_path / "w.uvmtrace", windows))
    assert e.value.file.endswith("allocations.parquet")


def test_rows_in_more_windows_than_the_limit_are_refused():
    """One row in each of 2**20 + 1 windows: the rows' own pass stops at the limit (its
    block slots never grow past it)."""
    n = _resolve.MAX_BLOCKS + 1
    b = TraceBuilder()
    x = b.alloc(n << 21)
    b.kernel("k", reads=b.pages(x, 0, n * 512, 512))
    with pytest.raises(TraceFormatError, match="blocks of 2 MiB") as e:
        b.build()
    assert (e.value.column, e.value.row) == ("page", n - 1)


_CHILD = RSS_CHILD_PRELUDE + textwrap.dedent("""
    load_trace(sys.argv[2])  # the reader's compiled passes loaded first
    before = reset_peak()
    t = load_trace(sys.argv[1])
    print(json.dumps({"growth": status("VmHWM") - before,
                      "pages": int(t.arrays.page_block.size)}))
""")


def test_a_prefetch_over_many_windows_loads_in_about_6_bytes_a_page(tmp_path):
    """Loading a prefetch of 2**14 windows (2**23 pages) in a fresh process: the page maps
    are built in place (6 bytes a page); building them with 8-byte temporaries took 21
    bytes a page. (benchmarks/reader_limits.py loads and replays 2**20 windows, the limit.)"""
    big = _prefetch_windows(tmp_path / "big.uvmtrace", 1 << 14)
    small = _prefetch_windows(tmp_path / "small.uvmtrace", 2)
    p = subprocess.run([sys.executable, "-c", _CHILD, str(big), str(small)],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["pages"] == 1 << 23
    assert got["growth"] < 8 * got["pages"], got


# --------------------------------------------------------------------------- Parquet bounds
def test_one_value_per_data_page_is_accepted_with_the_same_counts(tmp_path):
    d = shutil.copytree(GPT2, tmp_path / "gpt2.uvmtrace")
    f = d / "accesses.parquet"
    t = pq.read_table(f)
    pq.write_table(t, f, data_page_size=1, write_batch_size=1)
    md = pq.read_metadata(f)
    page = md.row_group(0).column(t.column_names.index("page"))
    # page headers make this chunk larger than values of 8 bytes plus 8 each and 1 MiB, the
    # bound that once rejected it
    assert page.total_uncompressed_size > t.num_rows * 16 + (1 << 20)
    kw = dict(oversub=1.5)
    assert uvmsim.simulate(load_trace(d), **kw).summary == \
        uvmsim.simulate(load_trace(GPT2), **kw).summary


def _footer(f):
    data = f.read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    return data, len(data) - 8 - n, data[-8 - n:-8]


def _varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _claim_uncompressed(f, column: str, claim: int) -> None:
    """Rewrite the footer's total_uncompressed_size (ColumnMetaData field 6, an i64 after
    field 5) of `column`'s chunk."""
    data, start, foot = _footer(f)
    md = pq.read_metadata(f)
    names = [md.schema.column(i).path for i in range(md.num_columns)]
    c = md.row_group(0).column(names.index(column))
    old = b"\x16" + _varint(c.total_uncompressed_size << 1)
    pat = old + b"\x16" + _varint(c.total_compressed_size << 1)  # then field 7
    i = foot.find(pat)
    assert i >= 0 and foot.count(pat) == 1, "claim to rewrite not found once"
    foot = foot[:i] + b"\x16" + _varint(claim << 1) + foot[i + len(old):]
    f.write_bytes(data[:start] + foot + struct.pack("<I", len(foot)) + b"PAR1")


@pytest.mark.parametrize("table,column", [("kernels", "name"), ("allocations", "kind"),
                                          ("kernels", "duration_ns")])
def test_a_1_tib_uncompressed_claim_is_refused_for_strings_as_for_integers(tmp_path, table,
                                                                          column):
    d = shutil.copytree(GPT2, tmp_path / "gpt2.uvmtrace")
    f = d / f"{table}.parquet"
    pq.write_table(pq.read_table(f), f, compression="zstd")
    _claim_uncompressed(f, column, 1 << 40)
    with pytest.raises(TraceFormatError, match="uncompressed bytes") as e:
        load_trace(d)
    assert e.value.file.endswith(f"{table}.parquet") and e.value.column == column


def test_an_uncompressed_chunk_claiming_more_than_its_bytes_is_refused(tmp_path):
    d = shutil.copytree(GPT2, tmp_path / "gpt2.uvmtrace")
    f = d / "kernels.parquet"
    pq.write_table(pq.read_table(f), f, compression="none")
    c = pq.read_metadata(f).row_group(0).column(1)
    _claim_uncompressed(f, "name", c.total_compressed_size + 1)
    with pytest.raises(TraceFormatError, match="UNCOMPRESSED"):
        load_trace(d)


# --------------------------------------------------------------------------- manifest, paths
def test_a_lone_surrogate_in_the_manifest_is_refused_naming_it(tmp_path):
    d = shutil.copytree(GPT2, tmp_path / "gpt2.uvmtrace")
    m = (d / "manifest.json").read_text()
    # JSON text escaping a lone surrogate: valid JSON, but no Unicode string
    (d / "manifest.json").write_text(m.replace('"source": {', '"source": {"note": "\\ud800", ',
                                               1))
    assert "\\ud800" in (d / "manifest.json").read_text()
    with pytest.raises(TraceFormatError, match="surrogate") as e:
        load_trace(d)
    assert e.value.file.endswith("manifest.json")
    rc, out, err = _cli("info", str(d))
    assert rc == 2 and err.count("\n") == 1 and "manifest.json" in err


def test_a_symlink_loop_as_the_trace_path_is_named_as_such(tmp_path):
    loop = tmp_path / "loop.uvmtrace"
    os.symlink(loop.name, loop)
    with pytest.raises(OSError) as e:
        load_trace(loop)
    assert e.value.errno == errno.ELOOP and "loop of symbolic links" in str(e.value)
    assert not isinstance(e.value, FileNotFoundError)
    rc, _, err = _cli("info", str(loop))
    assert rc == 2 and "loop of symbolic links" in err and str(loop) in err


def test_a_member_file_that_is_a_symlink_loop_is_a_format_error(tmp_path):
    d = shutil.copytree(GPT2, tmp_path / "gpt2.uvmtrace")
    (d / "events.parquet").unlink()
    os.symlink("events.parquet", d / "events.parquet")
    with pytest.raises(TraceFormatError, match="loop of symbolic links") as e:
        load_trace(d)
    assert e.value.file.endswith("events.parquet")


# --------------------------------------------------------------------------- row groups
def test_one_row_groups_are_read_a_run_at_a_time_with_the_same_counts(tmp_path, monkeypatch):
    """5,000 one-row row groups: the footer is walked in compiled code and the rows are
    read by one reader per run of groups, not one per group (benchmarks/reader_limits.py
    times 95,984 of them). Decoded in the loading thread, as with one CPU (the threaded
    runs: tests/test_reader_threads.py)."""
    d = shutil.copytree(GPT2, tmp_path / "gpt2.uvmtrace")
    f = d / "accesses.parquet"
    t = pq.read_table(f).slice(0, 5000)
    pq.write_table(t, f, row_group_size=1)
    assert pq.read_metadata(f).num_row_groups == 5000
    want = pq.read_table(f)
    calls = []
    real = pq.ParquetFile.iter_batches

    def counted(self, *a, **kw):
        calls.append(len(kw.get("row_groups") or []))
        return real(self, *a, **kw)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counted)
    monkeypatch.setattr(uvmsim.trace.io, "_decode_threads", lambda: 1)
    tr = load_trace(d)
    assert calls == [5000]
    calls.clear()
    tr2 = load_trace(d, batch_rows=1000)  # runs of 1,000 groups
    assert calls == [1000] * 5
    assert tr.n_accesses == tr2.n_accesses == want.num_rows
    assert (tr2.arrays.row_page == tr.arrays.row_page).all()
    monkeypatch.undo()
    kw = dict(oversub=1.5)
    one = d.parent / "one.uvmtrace"
    shutil.copytree(d, one)
    pq.write_table(want, one / "accesses.parquet")
    assert uvmsim.simulate(tr, **kw).summary == uvmsim.simulate(load_trace(one), **kw).summary


def test_a_footer_too_big_for_the_first_walk_is_walked_again_with_the_same_facts(
        monkeypatch):
    """The footer walk fills arrays sized for any footer a writer makes and walks again
    only when one is full (src/uvmsim/trace/_parquet.py): with arrays of no or one row,
    every footer takes the second walk (after a first that filled nothing, or some), and
    it must find the same facts and the same errors, here for gpt2_small's footers with
    bytes changed at random."""
    from uvmsim.trace import _parquet

    rng = np.random.default_rng(3)
    footers = []
    for name in ("accesses.parquet", "kernels.parquet", "events.parquet"):
        data = open(os.path.join(GPT2, name), "rb").read()
        n = struct.unpack("<I", data[-8:-4])[0]
        footers.append(data[-8 - n:-8])
    cases = list(footers)
    for _ in range(300):
        b = bytearray(footers[int(rng.integers(len(footers)))])
        for i in rng.integers(0, len(b), int(rng.integers(1, 4))):
            b[i] = int(rng.integers(256))
        cases.append(bytes(b))

    def walk(footer):
        try:
            ft = _parquet._check_footer_bytes(footer, "f")
        except TraceFormatError as e:
            return str(e)
        return [ft.num_rows] + [a.tolist() for a in (ft.rg_rows, ft.rg_ncols, ft.chunks,
                                                      ft.leaf_type, ft.leaf_rep)]

    first = [walk(f) for f in cases]
    for room in ((0, 0, 0), (1, 1, 1), (100, 1, 3)):
        monkeypatch.setattr(_parquet, "_room", lambda n: room)
        assert [walk(f) for f in cases] == first, room
    assert sum(isinstance(w, str) for w in first) > 50  # damage found...
    assert sum(not isinstance(w, str) for w in first) > 3  # ...and not everywhere
