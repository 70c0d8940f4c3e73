"""The access rows decoded by a few threads, a run of row groups each (src/uvmsim/trace/io.py,
_batches): the rows come out in file order, none lost or repeated, whatever the runs and
threads; a decoding failure in a thread is the same TraceFormatError as in the loading
thread; with one CPU no thread is started."""
from __future__ import annotations

import os
import shutil
import threading

import numpy as np
import pyarrow.parquet as pq
import pytest

import uvmsim
from uvmsim import TraceFormatError, load_trace
from uvmsim.trace import io
from uvmsim.trace._parquet import CheckedFile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPT2 = os.path.join(ROOT, "traces", "gpt2_small.uvmtrace")
ROWS = 20_000


def _groups(tmp_path, sizes, name):
    """gpt2_small's first ROWS access rows written as row groups of the given sizes."""
    d = shutil.copytree(GPT2, tmp_path / f"{name}.uvmtrace")
    f = d / "accesses.parquet"
    t = pq.read_table(f).slice(0, ROWS)
    with pq.ParquetWriter(f, t.schema) as w:
        g = 0
        for n in sizes:
            w.write_table(t.slice(g, n), row_group_size=n)
            g += n
    assert g == ROWS
    md = pq.read_metadata(f)
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == list(sizes)
    return d


def _sizes(seed):
    """Row groups of 1 to 40 rows, a few of hundreds and one of 3,000 (larger than the
    batches below, so it is streamed by the loading thread between threaded runs)."""
    rng = np.random.default_rng(seed)
    sizes, left = [], ROWS
    while left:
        n = int(rng.integers(1, 41)) if rng.random() > 0.01 else int(rng.integers(100, 800))
        if len(sizes) == 300:
            n = 3000
        n = min(n, left)
        sizes.append(n)
        left -= n
    return sizes


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("groups")
    return _groups(tmp, [ROWS], "one"), _groups(tmp, _sizes(1), "varied")


def _same(a, b):
    for field in a.arrays._fields:
        x, y = getattr(a.arrays, field), getattr(b.arrays, field)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), \
            field


@pytest.mark.parametrize("threads,batch_rows", [(2, 4000), (2, 1000), (3, 500), (4, 64)])
def test_varied_row_groups_load_the_same_arrays_as_one_group(files, monkeypatch, threads,
                                                             batch_rows):
    one, varied = files
    want = load_trace(one)
    monkeypatch.setattr(io, "_decode_threads", lambda: threads)
    # runs that really are decoded ahead, in threads other than the loading one
    decoders, starts = set(), []
    real_twin, real_iter = CheckedFile.twin, pq.ParquetFile.iter_batches

    def twin(self):
        decoders.add(threading.get_ident())
        return real_twin(self)

    def iter_batches(self, *a, **kw):
        starts.append(kw["row_groups"][0])
        return real_iter(self, *a, **kw)

    monkeypatch.setattr(CheckedFile, "twin", twin)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", iter_batches)
    got = load_trace(varied, batch_rows=batch_rows)
    monkeypatch.undo()
    assert decoders and threading.get_ident() not in decoders
    assert len(starts) > 2 and len(set(starts)) == len(starts)  # no run decoded twice
    assert got.n_accesses == want.n_accesses == ROWS
    _same(got, want)
    # the streaming mode rereads the rows through the same decoding
    s = load_trace(varied, batch_rows=batch_rows, stream=True)
    kw = dict(oversub=1.5)
    assert uvmsim.simulate(s, **kw).summary == uvmsim.simulate(want, **kw).summary


def test_runs_cover_every_group_once_in_order():
    rng = np.random.default_rng(7)
    for _ in range(200):
        rows = rng.integers(0, 50, int(rng.integers(0, 300)))
        most_rows, most_groups = int(rng.integers(1, 120)), int(rng.integers(1, 40))
        runs = io._runs(rows, most_rows, most_groups).tolist()
        assert [g for g0, g1, _ in runs for g in range(g0, g1)] == list(range(len(rows)))
        for g0, g1, n in runs:
            assert n == rows[g0:g1].sum()
            assert g1 - g0 <= most_groups
            assert g1 - g0 == 1 or rows[g0:g1].sum() <= most_rows
            # greedy: the next group would not have fit
            if g1 < rows.size:
                assert g1 - g0 == most_groups or rows[g0:g1 + 1].sum() > most_rows


def test_one_cpu_decodes_in_the_loading_thread_as_before(files, monkeypatch):
    one, varied = files
    monkeypatch.setattr(io, "_decode_threads", lambda: 1)
    monkeypatch.setattr(CheckedFile, "twin", lambda self: pytest.fail("a thread started"))
    calls = []
    real = pq.ParquetFile.iter_batches

    def counted(self, *a, **kw):
        calls.append((threading.get_ident(), len(kw["row_groups"])))
        return real(self, *a, **kw)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counted)
    got = load_trace(varied)
    groups = pq.read_metadata(varied / "accesses.parquet").num_row_groups
    assert calls == [(threading.get_ident(), groups)]  # one run: every group
    monkeypatch.undo()
    _same(got, load_trace(one))


def test_a_decoding_failure_in_a_thread_names_the_file(files, tmp_path, monkeypatch):
    _, varied = files
    d = shutil.copytree(varied, tmp_path / "bad.uvmtrace")
    f = d / "accesses.parquet"
    md = pq.read_metadata(f)
    g = md.num_row_groups * 3 // 4  # decoded ahead, in a thread
    c = md.row_group(g).column(0)
    raw = bytearray(f.read_bytes())
    raw[c.data_page_offset:c.data_page_offset + c.total_compressed_size] = \
        b"\xff" * c.total_compressed_size
    f.write_bytes(bytes(raw))
    monkeypatch.setattr(io, "_decode_threads", lambda: 2)
    failed = []
    real = io._guarded

    def guarded(batches, shown):
        try:
            yield from real(batches, shown)
        except TraceFormatError:
            failed.append(threading.get_ident())
            raise

    monkeypatch.setattr(io, "_guarded", guarded)
    with pytest.raises(TraceFormatError, match="unreadable Parquet data") as e:
        load_trace(d, batch_rows=1000)
    assert e.value.file == str(f)
    assert failed and failed[0] != threading.get_ident()
    # and the same error in the loading thread, as with one CPU
    monkeypatch.setattr(io, "_decode_threads", lambda: 1)
    with pytest.raises(TraceFormatError, match="unreadable Parquet data") as e1:
        load_trace(d, batch_rows=1000)
    assert str(e1.value) == str(e.value)


@pytest.mark.parametrize("threads,batch_rows", [(2, 1000), (4, 300)])
def test_runs_decoded_ahead_hold_at_most_twice_batch_rows(files, monkeypatch, threads,
                                                         batch_rows):
    _, varied = files
    md = pq.read_metadata(varied / "accesses.parquet")
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    monkeypatch.setattr(io, "_decode_threads", lambda: threads)
    lock = threading.Lock()
    started = [0]  # rows of the runs whose decoding has begun
    real_iter, real_batches = pq.ParquetFile.iter_batches, io._batches

    def iter_batches(self, *a, **kw):
        with lock:
            started[0] += min(sum(sizes[g] for g in kw["row_groups"]), batch_rows)
        return real_iter(self, *a, **kw)

    most = [0]

    def batches(*a, **kw):
        consumed = 0
        for b in real_batches(*a, **kw):
            with lock:
                most[0] = max(most[0], started[0] - consumed)
            yield b
            consumed += b.num_rows

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", iter_batches)
    monkeypatch.setattr(io, "_batches", batches)
    assert load_trace(varied, batch_rows=batch_rows).n_accesses == ROWS
    # decoded ahead (more than one run of batch_rows / threads rows), but within the bound
    # (a streamed group counts batch_rows, as in _batches)
    assert batch_rows // threads < most[0] <= 2 * batch_rows
