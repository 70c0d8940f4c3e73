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
