"""Build small traces by hand: for tests, examples and notebooks.

    b = TraceBuilder()
    x = b.alloc(8 << 20)                       # 8 MiB managed buffer
    b.kernel("fill", writes=b.pages(x, 0, 16)) # writes its first 16 pages
    trace = b.build()

A kernel can also carry the v1.2 launch columns (`launch={...}`) and a per-thread-block
stream, either as its blocks' page-level first touches (`touches=`, turned into a stream by
the collector's rule in uvmsim.trace.streams) or as the stream's rows as they are written
(`stream_blocks=`, `stream_rows=`, `stream_unit=`, `stream_tick_ns=`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from . import streams as S
from .format import FLAG_READ, FLAG_WRITE, PAGE_SIZE
from .io import trace_from_tables, write_trace
from .model import Trace

_ALIGN = 2 << 20


class TraceBuilder:
    """Accumulates allocations, events, kernels and access rows in program order."""

    def __init__(self, base: int = 0x7F0000000000) -> None:
        self._next_base = base
        self._allocs: list[dict[str, Any]] = []
        self._events: list[dict[str, Any]] = []
        self._kernels: list[dict[str, Any]] = []
        self._acc: list[pd.DataFrame] = []
        self._bases: dict[int, int] = {}
        self._sliced = False
        self._launch_cols: set[str] = set()
        self._streamed = False
        self._sb: list[pd.DataFrame] = []
        self._sa: list[pd.DataFrame] = []

    # -- allocations
    def alloc(self, size: int, *, base: int | None = None, kind: str = "managed",
              name: str | None = None) -> int:
        """Allocate `size` bytes (2 MiB aligned unless `base` is given); returns alloc_id."""
        aid = len(self._allocs)
        if base is None:
            base = self._next_base
            self._next_base += -(-size // _ALIGN) * _ALIGN + _ALIGN
        self._allocs.append(dict(alloc_id=aid, base=base, size=size, kind=kind, name=name))
        self._bases[aid] = base
        self._event("alloc", alloc_id=aid)
        return aid

    def free(self, alloc_id: int) -> None:
        self._event("free", alloc_id=alloc_id)

    def base(self, alloc_id: int) -> int:
        return self._bases[alloc_id]

    def pages(self, alloc_id: int, start: int = 0, stop: int | None = None,
              step: int = 1) -> np.ndarray:
        """Virtual page numbers of pages [start, stop) of an allocation (page indices)."""
        size = self._allocs[alloc_id]["size"]
        first = self._bases[alloc_id] // PAGE_SIZE
        n = (self._bases[alloc_id] + size - 1) // PAGE_SIZE - first + 1
        stop = n if stop is None else stop
        return first + np.arange(start, stop, step, dtype=np.int64)

    # -- program
    def kernel(self, name: str = "kernel", *, reads: Iterable[int] = (),
               writes: Iterable[int] = (), rows: Sequence[tuple[int, int]] | None = None,
               duration_ns: int | None = 1000, counts: Sequence[int] | None = None,
               slices: Sequence[int] | None = None, n_slices: int | None = None,
               launch: dict[str, int] | None = None,
               touches: Sequence[tuple[int, int, int, int]] | None = None,
               block_end_ns: dict[int, int] | None = None,
               stream_blocks: Sequence[tuple[int, int, int]] | None = None,
               stream_rows: Sequence[tuple[int, int, int, int]] | None = None,
               stream_unit: int | None = None, stream_tick_ns: int | None = None) -> int:
        """Launch a kernel. Rows are (page, flags) in first-touch order; `reads`/`writes`
        are shorthands (reads first, then writes, each in the order given).

        `slices` (v1.1) gives each row's bitmask of the time slices that touched it, and
        `n_slices` how many slices the kernel's run has (default: enough for the highest
        bit set). Kernels given without slices are one slice.

        v1.2: `launch` sets launch columns (n_blocks, threads_per_block, regs_per_thread,
        smem_static_bytes, smem_dynamic_bytes, cluster_blocks, sm_count,
        max_blocks_per_sm). A stream is given either as `touches`, (block, page, t_ns,
        flags) per page-level first touch (with `block_end_ns` the blocks' last accesses;
        `stream_unit`/`stream_tick_ns` override the collector's choice), or as written:
        `stream_blocks` (block, t_start, t_end) and `stream_rows` (block, page, t, flags),
        times in ticks of `stream_tick_ns` (default 1), unit `stream_unit` (default 12).
        n_blocks defaults to the highest block + 1.
        """
        if rows is None:
            rows = [(int(p), FLAG_READ) for p in reads] + [(int(p), FLAG_WRITE) for p in writes]
        kid = len(self._kernels)
        sl = None
        if slices is not None:
            sl = np.asarray([int(x) for x in slices], dtype=np.uint64)
            if sl.size != len(rows):
                raise ValueError(f"kernel {name!r}: {sl.size} slices for {len(rows)} rows")
            if n_slices is None:
                n_slices = max([int(x).bit_length() for x in sl] + [1])
            self._sliced = True
        self._kernels.append(dict(kernel_id=kid, name=name, duration_ns=duration_ns,
                                  grid=None, block=None,
                                  n_slices=n_slices if n_slices is not None else 1))
        for k, v in (launch or {}).items():
            if k not in S.LAUNCH_COLUMNS:
                raise ValueError(f"kernel {name!r}: unknown launch column {k!r}")
            self._kernels[-1][k] = v
            self._launch_cols.add(k)
        if touches is not None or stream_rows is not None:
            self._stream(kid, name, len(rows), touches, block_end_ns, stream_blocks,
                         stream_rows, stream_unit, stream_tick_ns)
        self._event("kernel", kernel_id=kid)
        if rows:
            pages = np.array([r[0] for r in rows], dtype=np.uint64)
            flags = np.array([r[1] for r in rows], dtype=np.uint8)
            df = pd.DataFrame(dict(kernel_id=np.full(len(rows), kid, np.uint32), page=pages,
                                   flags=flags,
                                   count=np.asarray(counts if counts is not None
                                                    else np.ones(len(rows)), np.uint32),
                                   order=np.arange(len(rows), dtype=np.uint32),
                                   slices=sl if sl is not None
                                   else np.ones(len(rows), np.uint64)))
            self._acc.append(df.sort_values(["order", "page"], kind="stable"))
        return kid

    def _stream(self, kid, name, n_rows, touches, block_end_ns, stream_blocks, stream_rows,
                unit, tick) -> None:
        k = self._kernels[-1]
        if touches is not None:
            t = np.asarray(touches, np.int64).reshape(-1, 4)
            unit, tick, sb, sa = S.stream_tables(kid, t[:, 0], t[:, 1], t[:, 2], t[:, 3],
                                                 n_rows, block_end_ns=block_end_ns,
                                                 unit=unit, tick_ns=tick)
            if unit == 0:
                raise ValueError(f"kernel {name!r}: its stream exceeds every bound")
            top = int(t[:, 0].max()) + 1 if t.size else 1
        else:
            sb = pd.DataFrame(list(stream_blocks or []),
                              columns=["block", "t_start", "t_end"])
            sa = pd.DataFrame(list(stream_rows), columns=["block", "page", "t", "flags"])
            sb.insert(0, "kernel_id", kid)
            sa.insert(0, "kernel_id", kid)
            unit, tick = unit or 12, tick or 1
            top = max([int(x) for x in sb["block"]] + [int(x) for x in sa["block"]] + [0]) + 1
        k["stream_unit"], k["stream_tick_ns"] = unit, tick
        k.setdefault("n_blocks", top)
        self._launch_cols.add("n_blocks")
        self._streamed = True
        self._sb.append(sb)
        self._sa.append(sa)

    def host_access(self, addr: int, size: int, arg: str | None = None) -> None:
        """The CPU touched [addr, addr + size) since the previous event (v1.1); `arg` is
        'read', 'write' or None (unknown)."""
        self._event("host_access", addr=addr, size=size, arg=arg)

    def memcpy_htod(self, addr: int, size: int) -> None:
        self._event("memcpy_htod", addr=addr, size=size)

    def memcpy_dtoh(self, addr: int, size: int) -> None:
        self._event("memcpy_dtoh", addr=addr, size=size)

    def memcpy_dtod(self, addr: int, size: int) -> None:
        """A device-to-device copy into [addr, addr + size) (its destination)."""
        self._event("memcpy_dtod", addr=addr, size=size)

    def memset(self, addr: int, size: int) -> None:
        self._event("memset", addr=addr, size=size)

    def prefetch(self, addr: int, size: int, to: str = "gpu") -> None:
        self._event("prefetch", addr=addr, size=size, arg=to)

    def advise(self, addr: int, size: int, advice: str) -> None:
        self._event("advise", addr=addr, size=size, arg=advice)

    def sync(self) -> None:
        self._event("sync")

    def _event(self, op: str, **kw: Any) -> None:
        self._events.append(dict(seq=len(self._events), op=op, **kw))

    # -- output
    def tables(self) -> dict[str, pd.DataFrame]:
        """The four tables, typed as docs/trace-format.md says."""
        ev = pd.DataFrame(self._events, columns=["seq", "op", "alloc_id", "kernel_id", "addr",
                                                 "size", "arg", "stream", "t_start_ns",
                                                 "t_end_ns"])
        for c in ("alloc_id", "kernel_id"):
            ev[c] = ev[c].astype("UInt32")
        for c in ("addr", "size"):
            ev[c] = ev[c].astype("UInt64")
        for c in ("stream", "t_start_ns", "t_end_ns"):
            ev[c] = ev[c].astype("Int64")
        ev["seq"] = ev["seq"].astype("uint64")
        ev["arg"] = ev["arg"].astype("string")
        al = pd.DataFrame(self._allocs, columns=["alloc_id", "base", "size", "kind", "name"])
        al = al.astype({"alloc_id": "uint32", "base": "uint64", "size": "uint64"})
        extra = [c for c in S.LAUNCH_COLUMNS if c in self._launch_cols] + \
            (list(S.STREAM_COLUMNS) if self._streamed else [])
        ke = pd.DataFrame(self._kernels, columns=["kernel_id", "name", "duration_ns", "grid",
                                                  "block", "n_slices"] + extra)
        ke = ke.astype({"kernel_id": "uint32", "duration_ns": "Int64", "n_slices": "UInt8",
                        **{c: "Int64" for c in extra}})
        acc = (pd.concat(self._acc, ignore_index=True) if self._acc else
               pd.DataFrame({"kernel_id": pd.Series([], dtype="uint32"),
                             "page": pd.Series([], dtype="uint64"),
                             "flags": pd.Series([], dtype="uint8"),
                             "count": pd.Series([], dtype="uint32"),
                             "order": pd.Series([], dtype="uint32"),
                             "slices": pd.Series([], dtype="uint64")}))
        if not self._sliced:
            # a v1 trace unless some kernel was given slices
            ke = ke.drop(columns="n_slices")
            acc = acc.drop(columns="slices")
        out = {"allocations": al, "events": ev, "kernels": ke, "accesses": acc}
        if self._streamed:
            e = S.empty_tables()
            # the reader casts (losslessly, or names the bad value)
            out["blocks"] = pd.concat([e["blocks"]] + self._sb, ignore_index=True)
            out["block_accesses"] = pd.concat([e["block_accesses"]] + self._sa,
                                              ignore_index=True)
        return out

    def build(self, *, drop_out_of_range: bool = False, source: dict | None = None) -> Trace:
        """Validate and return the trace in memory."""
        return trace_from_tables(**self.tables(), source=source or {"generator": "builder"},
                                 drop_out_of_range=drop_out_of_range)

    def write(self, path: str | Path, *, overwrite: bool = False,
              source: dict | None = None) -> Path:
        return write_trace(path, **self.tables(), source=source or {"generator": "builder"},
                           overwrite=overwrite)
