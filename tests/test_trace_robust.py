"""Corrupt inputs the reader once crashed on, hung on, misread or let through: each now
gets a TraceFormatError naming the file (and column and row where they apply), and the
format's silent cases behave as docs/trace-format.md decides."""
from __future__ import annotations

import json
import shutil
import struct

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import uvmsim
from uvmsim import TraceFormatError, load_trace, trace_from_tables
from uvmsim.trace.builder import TraceBuilder

MiB = 1 << 20


def builder():
    b = TraceBuilder()
    x = b.alloc(4 * MiB, name="x")
    b.memcpy_htod(b.base(x), 8192)
    b.kernel("k0", reads=b.pages(x, 0, 40), writes=b.pages(x, 600, 610))
    b.prefetch(b.base(x), 1 * MiB, "gpu")
    b.kernel("k1", reads=b.pages(x, 100, 300))
    b.free(x)
    b.sync()
    return b


@pytest.fixture
def tdir(tmp_path):
    return builder().write(tmp_path / "t.uvmtrace")


def tables():
    return builder().tables()


def counts(trace):
    return uvmsim.simulate(trace, oversub=1.5).summary


def _arr(values, typ):
    """An Arrow column from pandas values that may hold NA and integers beyond int64."""
    return pa.array([None if v is None or v is pd.NA or v != v else v for v in values], typ)


def rejects(match, *, column=None, row=None, file=None, **tabs):
    t = tables()
    t.update(tabs)
    with pytest.raises(TraceFormatError, match=match) as e:
        trace_from_tables(**t)
    assert e.value.column == column and (row is None or e.value.row == row)
    if file:
        assert e.value.file == file
    return e.value


@pytest.mark.parametrize("shift", [52, 55, 58, 61, 63])
def test_page_moved_far_is_out_of_range_not_a_crash(shift):
    t = tables()
    acc = t["accesses"].copy()
    acc.loc[3, "page"] = np.uint64((int(acc.loc[3, "page"]) + (1 << shift)) % (1 << 64))
    with pytest.raises(TraceFormatError, match="outside every allocation") as e:
        trace_from_tables(**dict(t, accesses=acc))
    assert (e.value.column, e.value.row) == ("page", 3)
    # the last row of a kernel: moving it keeps the rows sorted, and dropping it is allowed
    last = int(np.flatnonzero(acc["kernel_id"].to_numpy() == 0)[-1])
    acc = t["accesses"].copy()
    acc.loc[last, "page"] = np.uint64((int(acc.loc[last, "page"]) + (1 << shift)) % (1 << 64))
    tr = trace_from_tables(**dict(t, accesses=acc), drop_out_of_range=True)
    assert tr.dropped_rows == 1 and tr.n_accesses == len(acc) - 1


@pytest.mark.parametrize("col,value,named", [
    ("size", 2**64 - 1, "size"),          # memcpy of 2^64-1 bytes
    ("size", (1 << 62) + 1, "size"),
    ("addr", 2**64 - 1, "addr"),          # was rounded to 0 through float64 and accepted
    ("addr", (1 << 62) - 4096, "size"),   # the start fits, the end does not
])
def test_range_events_beyond_2_62_are_rejected(col, value, named):
    ev = tables()["events"]
    r = int(np.flatnonzero(ev["op"].to_numpy() == "memcpy_htod")[0])
    ev[col] = ev[col].astype(object)
    ev.loc[r, col] = value
    t = pa.Table.from_pandas(ev.drop(columns=[col]), preserve_index=False)
    t = t.append_column(col, _arr(ev[col], pa.uint64()))
    rejects("beyond 2\\*\\*62", column=named, row=r, events=t)


def _with_reservations(n: int, size: int) -> pd.DataFrame:
    """The allocations table plus n rows of `size` bytes at 0x1000 that no event allocates."""
    big = pd.DataFrame(dict(alloc_id=np.arange(1, n + 1, dtype=np.uint32),
                            base=np.full(n, 0x1000, np.uint64),
                            size=np.full(n, size, np.uint64), kind="managed", name=None))
    return pd.concat([tables()["allocations"], big], ignore_index=True)


def test_huge_reservations_cost_nothing_until_touched():
    """Four rows of almost 2**62 bytes (2**43 pages in all) are valid: never allocated,
    they get no block and change no count."""
    t = tables()
    t["allocations"] = _with_reservations(4, (1 << 62) - 0x2000)
    a, b = trace_from_tables(**tables()), trace_from_tables(**t)
    assert b.arrays.b_alloc.size == a.arrays.b_alloc.size == 2
    assert b.arrays.a_nblocks.tolist() == [2, 0, 0, 0, 0]
    assert counts(a) == counts(b)


def test_block_keys_cannot_overflow():
    # 2**21 + 1 rows of 2**41 blocks each reserve more than 2**62 blocks in all
    al = _with_reservations((1 << 21) + 1, (1 << 62) - 0x2000)
    rejects("2\\*\\*62 or more", column="size", allocations=al)


def test_duplicate_column_is_named():
    ev = tables()["events"]
    t = pa.Table.from_pandas(ev, preserve_index=False)
    t = t.append_column("op", t.column("op"))
    rejects("column appears twice", column="op", events=t)
    df = pd.concat([ev, ev[["seq"]]], axis=1)
    rejects("column appears twice", column="seq", events=df)


def test_invalid_utf8_string_is_named(tdir):
    t = pq.read_table(tdir / "kernels.parquet")
    names = t.column("name").combine_chunks()
    data = bytearray(names.buffers()[2].to_pybytes())
    data[0] = 0xFF
    bad = pa.Array.from_buffers(pa.string(), len(names),
                                [None, names.buffers()[1], pa.py_buffer(bytes(data))])
    t = t.set_column(t.column_names.index("name"), "name", bad)
    pq.write_table(t, tdir / "kernels.parquet")
    with pytest.raises(TraceFormatError, match="not valid UTF-8") as e:
        load_trace(tdir)
    assert (e.value.column, e.value.row) == ("name", 0)


# --------------------------------------------------------------------------- Parquet framing
def _varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def test_footer_row_count_disagreeing_with_row_groups_is_rejected(tdir):
    f = tdir / "accesses.parquet"
    data = f.read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - n
    foot = data[start:-8]
    rows = pq.read_metadata(f).num_rows
    pat = b"\x16" + _varint(rows << 1)  # FileMetaData.num_rows: thrift i64 after the schema
    i = foot.find(pat)
    assert i >= 0
    new = foot[:i] + b"\x16" + _varint((rows + 1000) << 1) + foot[i + len(pat):]
    f.write_bytes(data[:start] + new + struct.pack("<I", len(new)) + b"PAR1")
    with pytest.raises(TraceFormatError, match="rows") as e:
        load_trace(tdir)
    assert e.value.file.endswith("accesses.parquet")


@pytest.mark.parametrize("length", [0, 1, 2**31, 2**32 - 1])
def test_footer_length_corrupted_is_rejected(tdir, length):
    f = tdir / "events.parquet"
    data = bytearray(f.read_bytes())
    data[-8:-4] = struct.pack("<I", length)
    f.write_bytes(bytes(data))
    with pytest.raises(TraceFormatError, match="events.parquet"):
        load_trace(tdir)


@pytest.mark.parametrize("content", [b"", b"PAR1", b"PAR1" * 3, b"not parquet at all!!"])
def test_not_parquet_is_rejected(tdir, content):
    (tdir / "kernels.parquet").write_bytes(content)
    with pytest.raises(TraceFormatError) as e:
        load_trace(tdir)
    assert e.value.file.endswith("kernels.parquet")


def test_layouts_do_not_matter(tdir):
    want = counts(load_trace(tdir))
    for f in ("allocations", "events", "kernels", "accesses"):
        t = pq.read_table(tdir / f"{f}.parquet")
        with pq.ParquetWriter(tdir / f"{f}.parquet", t.schema, compression="lz4") as w:
            w.write_table(t.slice(0, 0))  # an empty row group
            w.write_table(t, row_group_size=3)
    assert counts(load_trace(tdir)) == want


# --------------------------------------------------------------------------- manifest
@pytest.mark.parametrize("raw,match", [
    (b'{"format": "uvmtrace", "version": 1, "source": {"x": "\xe9"}}', "not UTF-8"),
    (b'\xef\xbb\xbf{"format": "uvmtrace", "version": 1}', "byte-order mark"),
    (b'{"format": "uvmtrace", "version": true}', "unknown version True"),
    (b'{"format": "uvmtrace", "version": 1.0}', "unknown version 1.0"),
    (b'{"format": "uvmtrace", "version": 1, "minor": true}', "unknown minor"),
    (b'{"format": "uvmtrace", "version": 1, "page_size": 4096.0}', "page_size 4096.0"),
    (b'{"format": "uvmtrace", "version": 1, "page_size": true}', "page_size True"),
    (b'{"format": "uvmtrace", "version": 1, "version": 1}', "appears twice"),
    (b'{"format": "uvmtrace", "version": 1, "source": {"x": NaN}}', "NaN is not JSON"),
    (b'{"format": "uvmtrace", "version": 1, "source": ' + b"[" * 40 + b"]" * 40 + b"}",
     "nested deeper than 32"),
    (b'{"format": "uvmtrace", "version": 1, "source": ' + b"[" * 100000 + b"]" * 100000 +
     b"}", "nested deeper than 32"),
    (b'{"format": "uvmtrace", "version": 1, "source": {"n": "' + b"x" * (1 << 20) + b'"}}',
     "larger than 1048576 bytes"),
])
def test_manifest_is_strict(tdir, raw, match):
    (tdir / "manifest.json").write_bytes(raw)
    with pytest.raises(TraceFormatError, match=match) as e:
        load_trace(tdir)
    assert e.value.file.endswith("manifest.json")


def test_manifest_extra_keys_are_ignored(tdir):
    m = json.loads((tdir / "manifest.json").read_text())
    m["comment"] = {"any": ["thing"]}
    (tdir / "manifest.json").write_text(json.dumps(m))
    assert load_trace(tdir).n_kernels == 2


def test_v11_feature_under_minor_0_is_rejected(tmp_path):
    b = TraceBuilder()
    x = b.alloc(2 * MiB)
    b.kernel("k", reads=b.pages(x, 0, 4), slices=[1, 2, 1, 1], n_slices=2)
    d = b.write(tmp_path / "s.uvmtrace")
    m = json.loads((d / "manifest.json").read_text())
    assert m["minor"] == 1
    del m["minor"]
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(TraceFormatError, match="v1.1 column") as e:
        load_trace(d)
    assert e.value.column in ("n_slices", "slices")


# --------------------------------------------------------------------------- decided cases
def test_unused_event_fields_are_ignored():
    t = tables()
    want = counts(trace_from_tables(**t))
    ev = t["events"].copy()
    for c in ("alloc_id", "kernel_id", "addr", "size", "arg"):
        ev[c] = ev[c].astype(object)
    ops = ev["op"].to_numpy()
    k = np.flatnonzero(ops == "kernel")
    ev.loc[k, "alloc_id"] = 2**32 - 1
    ev.loc[k, "addr"] = 2**64 - 1
    ev.loc[k, "size"] = 2**64 - 1
    ev.loc[np.flatnonzero(ops == "sync"), "arg"] = "junk"
    ev.loc[np.flatnonzero(ops == "memcpy_htod"), "kernel_id"] = 7
    ev.loc[np.flatnonzero(ops == "alloc"), "kernel_id"] = 0
    typed = {c: _arr(ev[c], ty) for c, ty in
             (("alloc_id", pa.uint32()), ("kernel_id", pa.uint32()), ("addr", pa.uint64()),
              ("size", pa.uint64()), ("arg", pa.string()))}
    evt = pa.Table.from_pandas(ev.drop(columns=list(typed)), preserve_index=False)
    for c, arr in typed.items():
        evt = evt.append_column(c, arr)
    assert counts(trace_from_tables(**dict(t, events=evt))) == want


def test_timestamps_out_of_order_are_ignored():
    t = tables()
    want = counts(trace_from_tables(**t))
    ev = t["events"].copy()
    n = len(ev)
    ev["t_start_ns"] = pd.array(np.arange(n)[::-1] * 1000, dtype="Int64")
    ev["t_end_ns"] = pd.array(np.full(n, -5), dtype="Int64")  # ends before it starts
    ev["stream"] = pd.array([None] * n, dtype="Int64")
    assert counts(trace_from_tables(**dict(t, events=ev))) == want


def test_allocation_row_without_alloc_event_changes_nothing():
    t = tables()
    want = counts(trace_from_tables(**t))
    al = pd.concat([t["allocations"], pd.DataFrame(dict(
        alloc_id=np.array([9], np.uint32), base=np.array([0x1000_0000], np.uint64),
        size=np.array([3 * MiB], np.uint64), kind=["managed"], name=["never"]))],
        ignore_index=True)
    tr = trace_from_tables(**dict(t, allocations=al))
    assert counts(tr) == want and tr.peak_blocks == trace_from_tables(**t).peak_blocks


# --------------------------------------------------------------------------- CLI boundary
def _main(*argv, capsys):
    from uvmsim import cli
    rc = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    return rc, err


def test_cli_missing_path_is_one_line(tmp_path, capsys):
    rc, err = _main("replay", tmp_path / "absent.uvmtrace", capsys=capsys)
    assert rc == 2 and err.count("\n") == 1
    assert "No such" in err or "no such trace directory" in err
    assert "absent.uvmtrace" in err


def test_cli_corrupt_parquet_is_one_line(tdir, capsys):
    (tdir / "accesses.parquet").write_bytes(b"PAR1garbagePAR1")
    rc, err = _main("info", tdir, capsys=capsys)
    assert rc == 2 and err.count("\n") == 1 and "accesses.parquet" in err


def test_cli_internal_error_is_one_line(tdir, capsys, monkeypatch):
    from uvmsim import cli

    def boom(a):
        raise RuntimeError("synthetic\nfailure")
    monkeypatch.setitem(cli.COMMANDS, "info", boom)
    rc, err = _main("info", tdir, capsys=capsys)
    assert rc == 1 and err.count("\n") == 1
    assert "internal error RuntimeError: synthetic failure" in err and "UVMSIM_DEBUG" in err


def test_cli_memory_error_is_one_line(tdir, capsys, monkeypatch):
    from uvmsim import cli

    def oom(a):
        raise MemoryError()
    monkeypatch.setitem(cli.COMMANDS, "info", oom)
    rc, err = _main("info", tdir, capsys=capsys)
    assert rc == 2 and err.count("\n") == 1 and "out of memory" in err


def test_missing_member_file_and_directory_member(tdir):
    (tdir / "events.parquet").unlink()
    (tdir / "events.parquet").mkdir()
    with pytest.raises(TraceFormatError, match="not a regular file"):
        load_trace(tdir)
    shutil.rmtree(tdir / "events.parquet")
    with pytest.raises(TraceFormatError, match="missing file"):
        load_trace(tdir)


def test_level_histogram_that_would_abort_pyarrow_is_rejected(tdir):
    # pyarrow terminates the process (std::terminate) on a size-statistics histogram whose
    # length disagrees with the column's levels; the footer is checked before it is opened
    f = tdir / "kernels.parquet"
    t = pq.read_table(f)
    t = t.set_column(t.column_names.index("duration_ns"), "duration_ns",
                     pa.array([5, 7], pa.int64()))  # optional column, 2 values: hist [0, 2]
    pq.write_table(t, f, compression="none")
    data = f.read_bytes()
    n = struct.unpack("<I", data[-8:-4])[0]
    start = len(data) - 8 - n
    foot = data[start:-8]
    hist = b"\x26\x00\x04"  # list of 2 i64: zigzag 0, zigzag 2
    assert foot.count(hist) >= 1
    foot = foot.replace(hist, b"\x16\x04")  # a list of 1: one level short
    f.write_bytes(data[:start] + foot + struct.pack("<I", len(foot)) + b"PAR1")
    with pytest.raises(TraceFormatError, match="histogram") as e:
        load_trace(tdir)
    assert e.value.file.endswith("kernels.parquet")
