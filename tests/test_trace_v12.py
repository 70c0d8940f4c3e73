"""uvmtrace v1.2: launch columns and per-thread-block access streams (docs/trace-format.md)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import uvmsim
from uvmsim import TraceFormatError, load_trace
from uvmsim.trace import streams as S
from uvmsim.trace import synth
from uvmsim.trace.builder import TraceBuilder

MiB = 1 << 20


def small_builder(with_stream: bool = True) -> TraceBuilder:
    """Two kernels over one 4 MiB buffer; k0 has a stream of 3 blocks, k1 none."""
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    P = [int(p) for p in b.pages(x, 0, 8)]
    launch = dict(threads_per_block=128, regs_per_thread=32, smem_static_bytes=1024,
                  smem_dynamic_bytes=0, cluster_blocks=1, sm_count=4, max_blocks_per_sm=2)
    kw = {}
    if with_stream:
        kw = dict(stream_blocks=[(0, 0, 50), (1, 5, 40), (2, 60, 90)],
                  stream_rows=[(0, P[0], 0, 2), (0, P[3], 10, 2), (0, P[6], 50, 2),
                               (1, P[1], 0, 2), (1, P[4], 30, 2),
                               (2, P[2], 0, 2), (2, P[5], 20, 2), (2, P[7], 30, 2)],
                  stream_unit=12, stream_tick_ns=16)
    b.kernel("k0", writes=P, launch=dict(n_blocks=3, **launch), **kw)
    b.kernel("k1", reads=P[:2], launch=dict(n_blocks=1, **launch))
    return b


# --------------------------------------------------------------------------- round trip
def test_round_trip(tmp_path):
    p = small_builder().write(tmp_path / "s.uvmtrace")
    m = json.loads((p / "manifest.json").read_text())
    assert m["minor"] == 2
    assert (p / "blocks.parquet").is_file() and (p / "block_accesses.parquet").is_file()
    t = load_trace(p)
    assert "streams" not in t._cache  # read on first use only
    s = t.streams
    assert s.k_unit.tolist() == [12, 0] and s.k_tick_ns.tolist() == [16, 0]
    assert s.k_block_start.tolist() == [0, 3, 3]
    assert s.blk_id.tolist() == [0, 1, 2]
    assert s.blk_t_start.tolist() == [0, 80, 960] and s.blk_t_end.tolist() == [800, 640, 1440]
    assert s.blk_row_start.tolist() == [0, 3, 5, 8]
    p0 = t.arrays.a_page_off[0]
    assert (s.row_page - p0).tolist() == [0, 3, 6, 1, 4, 2, 5, 7]
    assert s.row_t.tolist() == [0, 160, 800, 0, 480, 0, 320, 480]
    assert s.row_flags.tolist() == [2] * 8
    assert s.has_stream(0) and not s.has_stream(1)
    la = t.launch
    assert la.n_blocks.tolist() == [3, 1] and la.max_blocks_per_sm.tolist() == [2, 2]
    assert la.sm_count.tolist() == [4, 4] and la.threads_per_block.tolist() == [128, 128]
    # eager loading gives the same arrays
    t2 = load_trace(p, streams=True)
    assert "streams" in t2._cache
    for a, b in zip(t2.streams, s):
        assert np.array_equal(a, b)


def test_stream_files_are_delta_encoded(tmp_path):
    p = small_builder().write(tmp_path / "s.uvmtrace")
    md = pq.ParquetFile(p / "block_accesses.parquet").metadata
    enc = {md.row_group(0).column(i).path_in_schema: md.row_group(0).column(i).encodings
           for i in range(md.num_columns)}
    for c in ("kernel_id", "block", "page", "t"):
        assert "DELTA_BINARY_PACKED" in enc[c], enc


def test_v11_content_unchanged_and_replay_equal(tmp_path):
    """A v1.2 trace's v1.1 tables are what they would be without streams, and it replays
    with exactly the counts of its v1.1 content."""
    p12 = small_builder().write(tmp_path / "a.uvmtrace")
    p11 = small_builder(with_stream=False).write(tmp_path / "b.uvmtrace")
    for f in ("allocations", "events", "accesses"):
        assert pq.read_table(p12 / f"{f}.parquet").equals(pq.read_table(p11 / f"{f}.parquet"))
    k12 = pq.read_table(p12 / "kernels.parquet").to_pandas()
    k11 = pq.read_table(p11 / "kernels.parquet").to_pandas()
    assert k12[k11.columns].equals(k11)
    t = synth.make("grid_stride_fill", footprint_bytes=8 * MiB, grid=64, block=256)
    tabs = synth.tables("grid_stride_fill", footprint_bytes=8 * MiB, grid=64, block=256)
    del tabs["blocks"], tabs["block_accesses"]
    tabs["kernels"] = tabs["kernels"].drop(columns=list(S.LAUNCH_COLUMNS + S.STREAM_COLUMNS))
    plain = uvmsim.trace_from_tables(**tabs)
    for f in (1.0, 2.0):
        assert uvmsim.simulate(t, oversub=f).summary == uvmsim.simulate(plain, oversub=f).summary


def test_v11_trace_has_no_streams(tmp_path):
    b = TraceBuilder()
    x = b.alloc(MiB)
    b.kernel("k", reads=b.pages(x, 0, 2), slices=[1, 2], n_slices=2)
    p = b.write(tmp_path / "v11.uvmtrace")
    assert json.loads((p / "manifest.json").read_text())["minor"] == 1
    t = load_trace(p)
    assert t.streams is None
    assert t.launch.n_blocks.tolist() == [-1]


def test_launch_columns_alone_make_v12(tmp_path):
    b = TraceBuilder()
    x = b.alloc(MiB)
    b.kernel("k", reads=b.pages(x, 0, 2), launch=dict(n_blocks=7, sm_count=132))
    p = b.write(tmp_path / "l.uvmtrace")
    assert json.loads((p / "manifest.json").read_text())["minor"] == 2
    assert not (p / "blocks.parquet").exists()
    t = load_trace(p)
    assert t.streams is None and t.launch.n_blocks.tolist() == [7]


def test_streamed_trace_loads_streams(tmp_path):
    p = synth.write("gemm", tmp_path / "g.uvmtrace", m=256, n=256, k=256, tile=64)
    a = load_trace(p).streams
    b = load_trace(p, stream=True, batch_rows=100).streams
    for x, y in zip(a, b):
        assert np.array_equal(x, y)


# --------------------------------------------------------------------------- the unit rule
def test_choose_unit_exact():
    block = np.repeat(np.arange(4), 64)
    page = np.tile(np.arange(64), 4) + (7 << 20)
    # rows at unit u: 4 blocks x 64 >> (u - 12) units
    for factor, want in ((8, 12), (3, 13), (2, 13), (1, 14), (0, 18)):
        bound = factor * 64 + 4
        got = S.choose_unit(block, page, 64, factor=factor)
        assert got == want, (factor, got)
        assert 4 * max(1, 64 >> (got - 12)) <= bound
    assert S.choose_unit(block, page, 64, min_unit=16) == 16


def test_stream_tables_merge_to_unit():
    # block 0 touches pages 0..3 at t 30, 10, 20, 40; unit 14 (4 pages): one row, the
    # earliest touch (page 1 at t 10), flags ORed
    unit, tick, sb, sa = S.stream_tables(5, np.zeros(4, np.int64), np.arange(4) + 4096,
                                         np.array([30, 10, 20, 40]), np.array([1, 2, 1, 4]),
                                         4, unit=14, tick_ns=1)
    assert (unit, tick) == (14, 1)
    assert sa[["kernel_id", "block", "page", "t", "flags"]].values.tolist() == [
        [5, 0, 4097, 0, 7]]
    assert sb[["t_start", "t_end"]].values.tolist() == [[0, 30]]
    # the tick: a run of 2**20 ns is cut into ticks of 2**3 ns (at most 2**18 ticks)
    assert S.tick_for(1 << 20) == 8 and S.tick_for(1000) == 1


# --------------------------------------------------------------------------- synthetic
def test_grid_stride_fill_blocks_spread_over_the_array():
    grid, block = 64, 256
    t = synth.make("grid_stride_fill", footprint_bytes=8 * MiB, grid=grid, block=block)
    s = t.streams
    p0 = t.arrays.a_page_off[0]
    stride_pages = grid * block * 4 // 4096
    assert t.launch.n_blocks.tolist() == [grid] and int(s.k_unit[0]) == 12
    for b in range(grid):
        r0, r1 = s.blk_row_start[b], s.blk_row_start[b + 1]
        pages = s.row_page[r0:r1] - p0
        assert pages[0] == (b * block * 4) >> 12
        assert (np.diff(pages) == stride_pages).all()
        assert (np.diff(s.row_t[r0:r1]) >= 0).all()
        assert s.row_t[r1 - 1] <= s.blk_t_end[b] - s.blk_t_start[b]


def test_block_slice_and_gemm_streams():
    t = synth.make("block_slice_fill", footprint_bytes=4 * MiB, grid=16, block=256)
    s = t.streams
    p0 = t.arrays.a_page_off[0]
    for b in range(16):
        pages = s.row_page[s.blk_row_start[b]:s.blk_row_start[b + 1]] - p0
        assert pages.tolist() == list(range(b * 64, b * 64 + 64))  # 256 KiB a block
    g = synth.make("gemm", m=512, n=512, k=512, tile=64, sm_count=4, max_blocks_per_sm=2)
    s = g.streams
    n_blk = s.blk_id.size
    assert n_blk == 64 and int(g.launch.max_blocks_per_sm[0]) == 2
    # page rows would be ~1 per B row per block: the rule coarsens to stay under the bound
    assert s.n_rows <= 8 * g.n_accesses + n_blk
    assert int(s.k_unit[0]) > 12
    # 8 resident slots: the 64 blocks run in 8 waves, later waves start later
    assert s.blk_t_start[:8].max() == 0 and s.blk_t_start[56:].min() > s.blk_t_end[:8].min()


# --------------------------------------------------------------------------- the reader's rules
def _tables():
    return small_builder().tables()


def _bad(mutate, match, file="block_accesses"):
    t = _tables()
    mutate(t)
    with pytest.raises(TraceFormatError, match=match) as e:
        uvmsim.trace_from_tables(**t)
    if file:
        assert e.value.file.startswith(file), e.value
    return e.value


def _set(t, table, col, row, value):
    df = t[table].copy()
    df[col] = df[col].astype("int64")
    df.loc[row, col] = value
    t[table] = df


@pytest.mark.parametrize("col,row,value,match", [
    ("kernel_id", 0, 9, "kernel_id 9 has no row"),
    ("kernel_id", 0, 1, "kernel_id 1 has no stream_unit"),
    ("block", 1, 0, "block 0 is not above the previous"),
    ("block", 2, 3, "at or beyond the kernel's n_blocks = 3"),
    ("t_start", 0, 51, "t_start is after t_end"),
])
def test_blocks_rules(col, row, value, match):
    e = _bad(lambda t: _set(t, "blocks", col, row, value), match, "blocks")
    assert e.column == col and e.row == row


@pytest.mark.parametrize("block,file,row", [(1, "block_accesses", 3), (2, "blocks", 2)])
def test_block_without_rows(block, file, row):
    def f(t):
        t["block_accesses"] = t["block_accesses"][t["block_accesses"]["block"] != block]
    e = _bad(f, "without rows" if block == 1 else "block has no row in block_accesses", file)
    assert e.row == row


@pytest.mark.parametrize("col,row,value,match", [
    ("kernel_id", 3, 9, "kernel_id 9 has no row"),
    ("kernel_id", 0, 1, "kernel_id 1 has no stream_unit"),
    ("block", 3, 2, "not grouped by the blocks"),
    ("t", 1, 60, "t is beyond the block's run"),
    ("t", 2, 5, r"not sorted by \(t, page\)"),
    ("flags", 0, 0, "flags 0 invalid"),
    ("flags", 0, 9, "flags 9 invalid"),
    ("flags", 0, 1, "flags not within its kernel's flags 2"),
])
def test_block_accesses_rules(col, row, value, match):
    e = _bad(lambda t: _set(t, "block_accesses", col, row, value), match)
    assert e.column == col and e.row == row


def test_page_not_accessed_and_uncovered():
    t0 = _tables()
    other = int(t0["block_accesses"]["page"].iloc[0]) + 100
    e = _bad(lambda t: _set(t, "block_accesses", "page", 1, other), "is not among its kernel")
    assert e.row == 1 and e.column == "page"

    def drop_row(t):  # page P[4] then has no row: uncovered
        t["block_accesses"] = t["block_accesses"].drop(index=4).reset_index(drop=True)
    _bad(drop_row, r"touches page .* which no row of its stream covers")


def test_two_rows_in_one_unit():
    def f(t):
        t["kernels"]["stream_unit"] = pd.array([14, None], dtype="Int64")  # 4 pages a unit
    _bad(f, "two rows in one unit")


def test_rows_of_a_block_must_be_together():
    def f(t):
        a = t["block_accesses"]
        t["block_accesses"] = pd.concat([a.iloc[[0, 1, 3, 2]], a.iloc[4:]], ignore_index=True)
    _bad(f, "not grouped by the blocks")


@pytest.mark.parametrize("col,value,match", [
    ("stream_unit", 11, "stream_unit 11 out of range"),
    ("stream_unit", 31, "stream_unit 31 out of range"),
    ("stream_tick_ns", 0, "stream_tick_ns 0 out of range"),
    ("stream_tick_ns", None, "stream_tick_ns missing"),
    ("n_blocks", None, "n_blocks missing"),
    ("n_blocks", 0, "n_blocks must be >= 1"),
    ("n_blocks", 1 << 33, "above 2\\*\\*32"),
    ("threads_per_block", 0, "threads_per_block must be >= 1"),
    ("sm_count", 0, "sm_count must be >= 1"),
])
def test_kernel_column_rules(col, value, match):
    def f(t):
        k = t["kernels"]
        k[col] = pd.array([value, k[col].iloc[1]], dtype="Int64")
    e = _bad(f, match, "kernels")
    assert e.column == col and e.row == 0


def test_negative_value_is_a_cast_error():
    e = _bad(lambda t: _set(t, "block_accesses", "t", 0, -1), "cannot be cast losslessly")
    assert e.column == "t"


def test_one_stream_table_alone_is_an_error():
    t = _tables()
    del t["blocks"]
    with pytest.raises(ValueError, match="come together"):
        uvmsim.trace_from_tables(**t)


def test_stream_unit_without_files(tmp_path):
    p = small_builder().write(tmp_path / "s.uvmtrace")
    for f in ("blocks.parquet", "block_accesses.parquet"):
        (p / f).rename(tmp_path / f)
    with pytest.raises(TraceFormatError, match="has a stream_unit but the trace has no"):
        load_trace(p)
    (tmp_path / "blocks.parquet").rename(p / "blocks.parquet")
    with pytest.raises(TraceFormatError, match="missing file") as e:
        load_trace(p)
    assert e.value.file.endswith("block_accesses.parquet")


@pytest.mark.parametrize("what", ["column", "file"])
def test_v12_feature_under_an_older_minor(tmp_path, what):
    p = small_builder().write(tmp_path / "s.uvmtrace")
    m = json.loads((p / "manifest.json").read_text())
    m["minor"] = 1
    (p / "manifest.json").write_text(json.dumps(m))
    if what == "file":  # keep the files, drop the v1.2 columns
        k = pq.read_table(p / "kernels.parquet").to_pandas()
        k = k.drop(columns=list(S.LAUNCH_COLUMNS + S.STREAM_COLUMNS))
        pq.write_table(__import__("pyarrow").Table.from_pandas(k, preserve_index=False),
                       p / "kernels.parquet")
    with pytest.raises(TraceFormatError, match=f"v1.2 {what} in a trace whose manifest says "
                                               "minor 1"):
        load_trace(p)


def test_rows_checked_on_first_use_framing_at_load(tmp_path):
    p = small_builder().write(tmp_path / "s.uvmtrace")
    t = _tables()
    _set(t, "block_accesses", "flags", 2, 0)
    import pyarrow as pa
    tab = pa.Table.from_pandas(t["block_accesses"].astype({"flags": "uint8"}),
                               preserve_index=False)
    pq.write_table(tab, p / "block_accesses.parquet")
    tr = load_trace(p)  # rows are not read yet
    with pytest.raises(TraceFormatError, match="flags 0 invalid") as e:
        tr.streams
    assert e.value.file == str(p / "block_accesses.parquet") and e.value.row == 2
    with pytest.raises(TraceFormatError, match="flags 0 invalid"):
        load_trace(p, streams=True)
    # a truncated file is caught at load, before any row is read
    data = (p / "blocks.parquet").read_bytes()
    (p / "blocks.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError) as e:
        load_trace(p)
    assert e.value.file == str(p / "blocks.parquet")


def test_writer_validates_streams_before_writing(tmp_path):
    t = _tables()
    _set(t, "block_accesses", "t", 1, 60)
    out = tmp_path / "w.uvmtrace"
    with pytest.raises(TraceFormatError, match="beyond the block's run"):
        uvmsim.write_trace(out, **t)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_missing_stream_column(tmp_path):
    t = _tables()
    t["block_accesses"] = t["block_accesses"].drop(columns=["t"])
    with pytest.raises(TraceFormatError, match="missing column") as e:
        uvmsim.trace_from_tables(**t)
    assert e.value.column == "t"


def test_merge_and_copy_keep_v11_behaviour(tmp_path):
    """Copying a v1.2 trace directory keeps it loadable; the unknown minor 3 is refused."""
    p = small_builder().write(tmp_path / "s.uvmtrace")
    q = tmp_path / "c.uvmtrace"
    shutil.copytree(p, q)
    m = json.loads((q / "manifest.json").read_text())
    m["minor"] = 3
    (q / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(TraceFormatError, match="unknown minor version 3"):
        load_trace(q)


# --------------------------------------------------------------------------- the collector's side
REPO = __import__("pathlib").Path(__file__).resolve().parents[1]
BASE = 0x7F0000000000
P0 = BASE >> 12


@pytest.fixture(scope="module")
def stream_check(tmp_path_factory):
    """native_trace/src/streams_host.h compiled into a small program (no CUDA needed)."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    exe = tmp_path_factory.mktemp("shc") / "streams_host_check"
    import subprocess
    r = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                        str(REPO / "native_trace" / "tests" / "streams_host_check.cpp")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def _run_cpp(exe, block, page, t, flags, n_acc, ends, min_unit=12, factor=8, tick_bits=18):
    import subprocess
    lines = [f"{min_unit} {factor} {tick_bits} {n_acc} {len(block)} {len(ends)}"]
    lines += [f"{b} {p} {x} {f}" for b, p, x, f in zip(block, page, t, flags)]
    lines += [f"{b} {e}" for b, e in ends.items()]
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True,
                         text=True, check=True).stdout.split("\n")
    unit, tick = map(int, out[0].split())
    nb = int(out[1])
    blocks = [tuple(map(int, ln.split())) for ln in out[2:2 + nb]]
    nr = int(out[2 + nb])
    rows = [tuple(map(int, ln.split())) for ln in out[3 + nb:3 + nb + nr]]
    return unit, tick, blocks, rows


@pytest.mark.parametrize("seed", range(12))
def test_cpp_stream_rule_equals_python(stream_check, seed):
    """The collector's C++ (streams_host.h) and the Python rule give the same stream."""
    rng = np.random.default_rng(seed)
    n_blocks = int(rng.integers(1, 40))
    per = int(rng.integers(1, 60))
    spread = int(rng.choice([8, 64, 4096, 1 << 20]))
    block = np.repeat(np.arange(n_blocks), per)
    page = P0 + rng.integers(0, spread, block.size)
    # one entry per (block, page), as the device makes them
    key = np.unique(np.stack([block, page], 1), axis=0)
    block, page = key[:, 0], key[:, 1]
    t = (10**9 + rng.integers(0, int(rng.choice([1000, 10**6, 10**9])), block.size))
    flags = rng.integers(1, 8, block.size)
    n_acc = int(np.unique(page).size)
    ends = {int(b): int(t[block == b].max() + rng.integers(0, 5000))
            for b in np.unique(block) if rng.random() < 0.7}
    min_unit = int(rng.choice([12, 12, 16, 21]))
    factor = int(rng.choice([8, 1, 0]))
    u, tick, sb, sa = S.stream_tables(3, block, page, t, flags, n_acc, block_end_ns=ends,
                                      min_unit=min_unit, factor=factor)
    cu, ctick, cb, cr = _run_cpp(stream_check, block, page, t, flags, n_acc, ends, min_unit,
                                 factor)
    assert cu == u
    if u == 0:
        return
    assert ctick == tick
    nrows = sa.groupby("block").size().reindex(sb["block"]).to_numpy()
    assert cb == [(int(b), int(n), int(s0), int(s1)) for b, n, s0, s1 in
                  zip(sb["block"], nrows, sb["t_start"], sb["t_end"])]
    assert cr == [(int(p), int(x), int(f)) for p, x, f in zip(sa["page"], sa["t"], sa["flags"])]


def test_cpp_stream_over_bound(stream_check):
    # 2 blocks each touching 1 GiB-apart pages: 4 rows at every unit, bound 0 x 2 + 2
    block = np.array([0, 0, 1, 1])
    page = np.array([P0, P0 + (1 << 19), P0, P0 + (1 << 19)])
    args = (block, page, np.array([1, 2, 3, 4]), np.ones(4, np.int64), 2)
    assert _run_cpp(stream_check, *args, {}, factor=0)[0] == 0
    assert S.stream_tables(0, *args, factor=0)[0] == 0


def _raw(tmp_path, kernels, stream_lines, blk_recs, row_recs, timing=None):
    """A page pass with one 4 MiB allocation, the given kernel lines (each followed by its
    stream line) and stream records."""
    from uvmsim.record import REC_DTYPE, read_raw_pass
    from uvmsim.record.raw import SBLK_DTYPE, SROW_DTYPE
    d = tmp_path / "raw"
    d.mkdir()
    lines = [{"t": "meta", "pass": "pages", "rec_bytes": REC_DTYPE.itemsize, "slices": True},
             {"t": "alloc", "base": BASE, "size": 4 * MiB, "kind": "device", "name": ""}]
    recs = []
    for (kl, pages), sl in zip(kernels, stream_lines):
        kl = dict(kl, off=len(recs) * REC_DTYPE.itemsize, n=len(pages))
        recs += [(p, 1, f, 1) for p, f in pages]
        lines += [kl] + ([sl] if sl else [])
    lines.append({"t": "end"})
    (d / "pages.7.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    np.asarray(recs, REC_DTYPE).tofile(d / "pages.7.bin")
    with open(d / "pages.7.streams.bin", "wb") as f:
        f.write(np.asarray(blk_recs, SBLK_DTYPE).tobytes())
        f.write(np.asarray(row_recs, SROW_DTYPE).tobytes())
    if timing is not None:
        (d / "timing.7.jsonl").write_text("".join(json.dumps(x) + "\n" for x in timing))
    (pages,) = read_raw_pass(d, "pages")
    tim = read_raw_pass(d, "timing")
    return pages, (tim[0] if tim else None)


def _kline(name="k", **kw):
    return {"t": "kernel", "name": name, "grid": "2,1,1", "block": "128,1,1", "stream": 0,
            "n_blocks": 2, "threads": 128, "cluster": 1, "regs": 40, "smem_static": 0,
            "smem_dyn": 256, "smem_dyn_dev": 256, "sm_count": 132, "occupancy": 12,
            "unknown": 0, "dropped": 0, "n_slices": 1, "slice_ns": 1024, **kw}


def _sline(**kw):
    return {"t": "stream", "status": "ok", "unit": 12, "tick_ns": 2, "b_off": 0, "b_n": 2,
            "r_off": 32, "r_n": 3, **kw}


BLK = [(0, 2, 0, 10), (1, 1, 3, 9)]
ROWS = [(P0 + 1, 0, 2), (P0, 4, 2), (P0 + 2, 0, 1)]
PAGES = [(P0 + 1, 2), (P0, 2), (P0 + 2, 1)]


def test_raw_streams_to_tables_and_back(tmp_path):
    from uvmsim.record import build_tables
    timing = [{"t": "kact", "name": "k", "grid": "2,1,1", "block": "128,1,1", "corr": 1,
               "start": 0, "end": 500, "graph": 0, "regs": 38, "smem_static": 0,
               "smem_dyn": 256, "occupancy": 10}]
    pages, tim = _raw(tmp_path, [(_kline(), PAGES)], [_sline()], BLK, ROWS, timing)
    tables, stats = build_tables(pages, tim)
    k = tables["kernels"]
    assert k["n_blocks"].tolist() == [2] and k["threads_per_block"].tolist() == [128]
    assert k["sm_count"].tolist() == [132] and k["smem_dynamic_bytes"].tolist() == [256]
    # registers and occupancy from the uninstrumented (timing) pass; differences are reported
    assert k["regs_per_thread"].tolist() == [38] and k["max_blocks_per_sm"].tolist() == [10]
    assert stats["launch_attribute_mismatches"] == 1
    ex = stats["launch_attribute_mismatch_examples"][0]
    assert "regs 40 (page pass) vs 38 (timing pass)" in ex and "occupancy 12 (page pass) vs 10" in ex
    assert k["stream_unit"].tolist() == [12] and k["stream_tick_ns"].tolist() == [2]
    assert tables["blocks"][["block", "t_start", "t_end"]].values.tolist() == [[0, 0, 10], [1, 3, 9]]
    assert tables["block_accesses"][["block", "page", "t", "flags"]].values.tolist() == [
        [0, P0 + 1, 0, 2], [0, P0, 4, 2], [1, P0 + 2, 0, 1]]
    assert stats["streams"]["with_stream"] == 1 and stats["streams"]["rows"] == 3
    out = tmp_path / "t.uvmtrace"
    uvmsim.write_trace(out, **tables)
    assert json.loads((out / "manifest.json").read_text())["minor"] == 2
    s = load_trace(out).streams
    assert s.row_t.tolist() == [0, 8, 0] and s.blk_t_end.tolist() == [20, 18]


@pytest.mark.parametrize("sline,blk,rows,reason", [
    (_sline(status="table_full"), BLK, ROWS, "table_full"),
    (_sline(), [(0, 2, 0, 10), (1, 1, 3, 9)], [(P0 + 1, 0, 2), (P0, 11, 2), (P0 + 2, 0, 1)],
     "breaks R_T_RANGE"),
    (_sline(), BLK, [(P0 + 1, 0, 2), (P0, 4, 2), (P0 + 3, 0, 1)], "breaks R_NOT_ACCESSED"),
    (_sline(), [(0, 3, 0, 10)], [(P0 + 1, 0, 2), (P0, 4, 2), (P0 + 2, 4, 4)],
     "breaks R_FLAGS_SUBSET"),
    (_sline(b_n=1, r_off=16, r_n=2), [(0, 2, 0, 10)], [(P0 + 1, 0, 2), (P0, 4, 2)],
     "breaks R_UNCOVERED"),
    (_sline(unit=40), BLK, ROWS, "bad_line"),
])
def test_a_broken_stream_leaves_the_kernel_without_one(tmp_path, sline, blk, rows, reason):
    from uvmsim.record import build_tables
    pages, _ = _raw(tmp_path, [(_kline(), PAGES), (_kline("k2"), PAGES)], [sline, _sline()],
                    blk + BLK, rows + ROWS)
    # the file holds both kernels' blocks, then both kernels' rows
    nb = 16 * (len(blk) + len(BLK))
    pages.lines[3].update(b_n=len(blk), r_off=nb, r_n=len(rows))
    pages.lines[5].update(b_off=16 * len(blk), r_off=nb + 16 * len(rows))
    tables, stats = build_tables(pages, None)
    assert tables["kernels"]["stream_unit"].isna().tolist() == [True, False]
    assert stats["streams"]["without_stream_by_reason"] == {reason: 1}
    uvmsim.write_trace(tmp_path / "w.uvmtrace", **tables)  # still a valid trace


def test_stream_rows_outside_live_allocations_are_dropped(tmp_path):
    from uvmsim.record import build_tables
    far = P0 + (8 << 8)  # beyond the 4 MiB allocation
    pages, _ = _raw(tmp_path, [(_kline(), PAGES + [(far, 1)])],
                    [_sline(b_n=2, r_n=4)], [(0, 3, 0, 10), (1, 1, 3, 9)],
                    [(far, 0, 1), (P0 + 1, 1, 2), (P0, 4, 2), (P0 + 2, 0, 1)])
    tables, stats = build_tables(pages, None)
    assert stats["access_rows_dropped_outside_live_allocations"] == 1
    assert stats["streams"]["rows_dropped_outside_live_allocations"] == 1
    assert tables["block_accesses"]["page"].tolist() == [P0 + 1, P0, P0 + 2]
    load = uvmsim.trace_from_tables(**tables)
    assert load.streams.n_rows == 3


def test_truncated_streams_file_is_an_error(tmp_path):
    from uvmsim.record import RecordError, build_tables
    pages, _ = _raw(tmp_path, [(_kline(), PAGES)], [_sline(r_n=30)], BLK, ROWS)
    with pytest.raises(RecordError, match="beyond the file's 80"):
        build_tables(pages, None)


def test_raw_without_attributes_or_streams_stays_v11(tmp_path):
    from uvmsim.record import build_tables
    kl = {k: v for k, v in _kline().items() if k not in ("n_blocks", "threads", "cluster", "regs",
                                                        "smem_static", "smem_dyn",
                                                        "smem_dyn_dev", "sm_count",
                                                        "occupancy")}
    pages, _ = _raw(tmp_path, [(kl, PAGES)], [None], [], [])
    tables, stats = build_tables(pages, None)
    assert "blocks" not in tables and "n_blocks" not in tables["kernels"]
    out = tmp_path / "v11.uvmtrace"
    uvmsim.write_trace(out, **tables)
    assert json.loads((out / "manifest.json").read_text())["minor"] == 1


FAKE = '''
import json, os, sys, numpy as np
p, out, pid = os.environ["UVMTRACE_PASS"], os.environ["UVMTRACE_OUT"], os.getpid()
base = 0x7F0000000000
P0 = base >> 12
assert p == "pages"
kern = %s
strm = %s
with open(os.path.join(out, f"pages.{pid}.jsonl"), "w") as f:
    for x in [{"t": "alloc", "base": base, "size": 1 << 22, "kind": "device", "name": ""},
              kern, strm, {"t": "end"}]:
        f.write(json.dumps(x) + "\\n")
np.array([(P0 + 1, 1, 2, 1), (P0, 1, 2, 1), (P0 + 2, 1, 1, 1)],
         dtype=[("page", "<u8"), ("count", "<u4"), ("flags", "<u4"), ("slices", "<u8")]
         ).tofile(os.path.join(out, f"pages.{pid}.bin"))
with open(os.path.join(out, f"pages.{pid}.streams.bin"), "wb") as f:
    f.write(np.array(%s, dtype=[("b", "<u4"), ("n", "<u4"), ("s", "<u4"), ("e", "<u4")]).tobytes())
    f.write(np.array(%s, dtype=[("p", "<u8"), ("t", "<u4"), ("f", "<u4")]).tobytes())
'''


def test_record_writes_the_streams(tmp_path, monkeypatch):
    from uvmsim.record import record
    monkeypatch.setenv("UVMSIM_SKIP_GPU_CHECK", "1")  # a fake program, on a machine with no GPU
    prog = tmp_path / "fake.py"
    prog.write_text(FAKE % (repr(dict(_kline(), off=0, n=3)), repr(_sline()), repr(BLK),
                            repr(ROWS)))
    lib = tmp_path / "libfake.so"
    lib.write_bytes(b"")
    out = tmp_path / "r.uvmtrace"
    import sys
    assert record(out, [sys.executable, str(prog)], "pages", lib=lib) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["minor"] == 2 and m["source"]["streams"]["with_stream"] == 1
    t = load_trace(out, streams=True)
    assert t.streams.blk_id.tolist() == [0, 1] and t.launch.max_blocks_per_sm.tolist() == [12]
