"""Seeded synthetic trace generators.

Each generator returns the four tables of a uvmtrace as a dict of DataFrames, ready for
`write_trace(path, **tables)` or `trace_from_tables(**tables)`; `make(kind, ...)` returns a
validated Trace and `write(kind, path, ...)` a trace on disk. The same arguments and seed
always give the same trace.

The v1.2 generators (`grid_stride_fill`, `block_slice_fill`, `gemm`) also give the launch
columns and each thread block's access stream, made from a simple schedule: `sm_count` x
`max_blocks_per_sm` blocks run at once, the others start, in block order, as slots free; each
block's first touches are spread over its own run. They let the per-thread-block front-end
be developed without a GPU.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from . import streams as S
from .format import FLAG_READ, FLAG_WRITE, PAGE_SIZE
from .io import trace_from_tables, write_trace
from .model import Trace

MiB = 1 << 20
_BASE = 0x7F0000000000
_GAP = 2 * MiB


class _Program:
    """Vectorised accumulation of a program; kernels' rows are kept as arrays."""

    def __init__(self) -> None:
        self.next_base = _BASE
        self.allocs: list[tuple[int, int, int, str, str | None]] = []
        self.events: list[tuple] = []
        self.kernels: list[tuple[int, str, int]] = []
        self.rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.launch: list[dict[str, int]] = []
        self.streams: list[tuple[pd.DataFrame, pd.DataFrame]] = []

    def alloc(self, size: int, name: str | None = None, kind: str = "managed") -> tuple[int, int]:
        aid = len(self.allocs)
        base = self.next_base
        self.next_base += -(-size // _GAP) * _GAP + _GAP
        self.allocs.append((aid, base, size, kind, name))
        self.events.append(("alloc", aid, None, None, None, None))
        return aid, base // PAGE_SIZE

    def free(self, aid: int) -> None:
        self.events.append(("free", aid, None, None, None, None))

    def range_op(self, op: str, addr: int, size: int, arg: str | None = None) -> None:
        self.events.append((op, None, None, addr, size, arg))

    def kernel(self, name: str, pages: np.ndarray, flags: np.ndarray | int,
               duration_ns: int, counts: np.ndarray | None = None,
               launch: dict[str, int] | None = None) -> None:
        """Rows in first-touch order; pages must be unique within the kernel."""
        kid = len(self.kernels)
        self.kernels.append((kid, name, int(duration_ns)))
        self.launch.append(dict(launch or {}))
        self.events.append(("kernel", None, kid, None, None, None))
        pages = np.asarray(pages, np.uint64)
        fl = np.broadcast_to(np.asarray(flags, np.uint8), pages.shape)
        cnt = np.ones(pages.size, np.uint32) if counts is None else np.asarray(counts, np.uint32)
        self.rows.append((pages, np.ascontiguousarray(fl), cnt))

    def streamed_kernel(self, name: str, launch: dict[str, int], block: np.ndarray,
                        page: np.ndarray, t_ns: np.ndarray, flags: np.ndarray,
                        block_end_ns: np.ndarray, counts_per_touch: int = 1,
                        stream_unit: int | None = None) -> None:
        """A kernel given by its blocks' page-level first touches (block, page, t_ns,
        flags): its access rows (first-touch order over all blocks, flags ORed, counts
        summed) and its stream by the collector's rule (uvmsim.trace.streams), at
        `stream_unit` (log2 bytes) if given, as the collector writes it when its table
        is too small for pages."""
        kid = len(self.kernels)
        o = np.lexsort((page, t_ns))
        pg, inv = np.unique(page, return_inverse=True)
        first_t = np.full(pg.size, np.iinfo(np.int64).max)
        np.minimum.at(first_t, inv, t_ns)
        fl = np.zeros(pg.size, np.uint8)
        np.bitwise_or.at(fl, inv, flags.astype(np.uint8))
        cnt = np.bincount(inv, minlength=pg.size).astype(np.uint32) * np.uint32(counts_per_touch)
        rank = np.lexsort((pg, first_t))
        del o
        span = int(block_end_ns.max() - t_ns.min()) if t_ns.size else 0
        self.kernel(name, pg[rank].astype(np.uint64), fl[rank], max(span, 1), cnt[rank],
                    launch=launch)
        ends = {int(b): int(e) for b, e in enumerate(block_end_ns)}
        unit, tick, sb, sa = S.stream_tables(kid, block, page, t_ns, flags, pg.size,
                                             block_end_ns=ends, unit=stream_unit)
        if unit == 0:
            raise ValueError(f"{name}: the stream exceeds every bound")
        self.launch[-1].update(stream_unit=unit, stream_tick_ns=tick)
        self.streams.append((sb, sa))

    def tables(self) -> dict[str, pd.DataFrame]:
        al = pd.DataFrame(self.allocs, columns=["alloc_id", "base", "size", "kind", "name"])
        al = al.astype({"alloc_id": "uint32", "base": "uint64", "size": "uint64",
                        "name": "string"})
        ev = pd.DataFrame(self.events, columns=["op", "alloc_id", "kernel_id", "addr", "size",
                                                "arg"])
        ev.insert(0, "seq", np.arange(len(ev), dtype=np.uint64))
        ev = ev.astype({"alloc_id": "UInt32", "kernel_id": "UInt32", "addr": "UInt64",
                        "size": "UInt64", "arg": "string"})
        for c in ("stream", "t_start_ns", "t_end_ns"):
            ev[c] = pd.array([None] * len(ev), dtype="Int64")
        ke = pd.DataFrame(self.kernels, columns=["kernel_id", "name", "duration_ns"])
        ke = ke.astype({"kernel_id": "uint32", "duration_ns": "int64"})
        ke["grid"] = pd.array([None] * len(ke), dtype="string")
        ke["block"] = pd.array([None] * len(ke), dtype="string")
        for c in S.LAUNCH_COLUMNS + S.STREAM_COLUMNS:
            if any(c in d for d in self.launch):
                ke[c] = pd.array([d.get(c) for d in self.launch], dtype="Int64")
        n = [r[0].size for r in self.rows]
        acc = pd.DataFrame({
            "kernel_id": np.repeat(np.arange(len(self.rows), dtype=np.uint32), n),
            "page": np.concatenate([r[0] for r in self.rows]) if self.rows else np.zeros(0, np.uint64),
            "flags": np.concatenate([r[1] for r in self.rows]) if self.rows else np.zeros(0, np.uint8),
            "count": np.concatenate([r[2] for r in self.rows]) if self.rows else np.zeros(0, np.uint32),
            "order": np.concatenate([np.arange(k, dtype=np.uint32) for k in n]) if self.rows
            else np.zeros(0, np.uint32),
        })
        out = {"allocations": al, "events": ev, "kernels": ke, "accesses": acc}
        if self.streams:
            e = S.empty_tables()
            out["blocks"] = pd.concat([e["blocks"]] + [b for b, _ in self.streams],
                                      ignore_index=True)
            out["block_accesses"] = pd.concat([e["block_accesses"]] +
                                              [a for _, a in self.streams], ignore_index=True)
        return out


def _flags(rng: np.random.Generator, n: int, write_fraction: float) -> np.ndarray:
    return np.where(rng.random(n) < write_fraction, FLAG_WRITE, FLAG_READ).astype(np.uint8)


def sequential(*, footprint_bytes: int = 256 * MiB, kernels: int = 4, write_fraction: float = 0.0,
               duration_ns: int = 100_000, seed: int = 0) -> dict[str, pd.DataFrame]:
    """Every kernel streams the whole buffer, page by page, in address order."""
    rng = np.random.default_rng(seed)
    p = _Program()
    _, first = p.alloc(footprint_bytes, "buf")
    n = -(-footprint_bytes // PAGE_SIZE)
    pages = first + np.arange(n, dtype=np.uint64)
    for k in range(kernels):
        p.kernel(f"sequential_{k}", pages, _flags(rng, n, write_fraction), duration_ns)
    return p.tables()


def strided(*, footprint_bytes: int = 256 * MiB, stride_pages: int = 16, kernels: int = 4,
            write_fraction: float = 0.0, duration_ns: int = 100_000,
            seed: int = 0) -> dict[str, pd.DataFrame]:
    """Every kernel touches one page every `stride_pages`, each kernel shifted by one page."""
    rng = np.random.default_rng(seed)
    p = _Program()
    _, first = p.alloc(footprint_bytes, "buf")
    n = -(-footprint_bytes // PAGE_SIZE)
    for k in range(kernels):
        idx = np.arange(k % stride_pages, n, stride_pages, dtype=np.uint64)
        p.kernel(f"strided_{k}", first + idx, _flags(rng, idx.size, write_fraction), duration_ns)
    return p.tables()


def random(*, footprint_bytes: int = 256 * MiB, kernels: int = 4, pages_per_kernel: int = 16384,
           write_fraction: float = 0.3, duration_ns: int = 100_000,
           seed: int = 0) -> dict[str, pd.DataFrame]:
    """Each kernel touches `pages_per_kernel` distinct pages drawn uniformly at random."""
    rng = np.random.default_rng(seed)
    p = _Program()
    _, first = p.alloc(footprint_bytes, "buf")
    n = -(-footprint_bytes // PAGE_SIZE)
    m = min(pages_per_kernel, n)
    for k in range(kernels):
        idx = rng.choice(n, size=m, replace=False).astype(np.uint64)
        p.kernel(f"random_{k}", first + idx, _flags(rng, m, write_fraction), duration_ns)
    return p.tables()


def zipf(*, footprint_bytes: int = 256 * MiB, kernels: int = 4, pages_per_kernel: int = 16384,
         alpha: float = 1.2, write_fraction: float = 0.3, duration_ns: int = 100_000,
         seed: int = 0) -> dict[str, pd.DataFrame]:
    """Hot/cold: pages drawn with Zipf(alpha) popularity over a shuffled page order."""
    rng = np.random.default_rng(seed)
    p = _Program()
    _, first = p.alloc(footprint_bytes, "buf")
    n = -(-footprint_bytes // PAGE_SIZE)
    weights = 1.0 / np.arange(1, n + 1) ** alpha
    weights /= weights.sum()
    perm = rng.permutation(n)
    m = min(pages_per_kernel, n)
    for k in range(kernels):
        ranks = rng.choice(n, size=m, replace=False, p=weights)
        idx = perm[ranks].astype(np.uint64)
        p.kernel(f"zipf_{k}", first + idx, _flags(rng, m, write_fraction), duration_ns)
    return p.tables()


def training(*, layers: int = 8, weight_bytes: int = 16 * MiB, activation_bytes: int = 32 * MiB,
             steps: int = 2, prefetch_weights: bool = False, duration_ns: int = 200_000,
             seed: int = 0) -> dict[str, pd.DataFrame]:
    """A layer-by-layer training loop.

    Weights and gradients live for the whole run (weights copied in once); each step
    allocates activations in the forward pass and frees them in the backward pass, then an
    optimizer kernel updates weights in place. Optionally prefetches each layer's weights
    before its forward kernel.
    """
    rng = np.random.default_rng(seed)
    p = _Program()
    wpages = -(-weight_bytes // PAGE_SIZE)
    apages = -(-activation_bytes // PAGE_SIZE)
    W, G = [], []
    for l in range(layers):
        aid, first = p.alloc(weight_bytes, f"w{l}")
        W.append((aid, first))
        p.range_op("memcpy_htod", first * PAGE_SIZE, weight_bytes)
        aid, first = p.alloc(weight_bytes, f"g{l}")
        G.append((aid, first))
    _, xin = p.alloc(activation_bytes, "input")
    p.range_op("memcpy_htod", xin * PAGE_SIZE, activation_bytes)
    wr = np.arange(wpages, dtype=np.uint64)
    ar = np.arange(apages, dtype=np.uint64)
    jitter = lambda: int(duration_ns * (0.8 + 0.4 * rng.random()))  # noqa: E731
    for s in range(steps):
        acts = []
        prev = xin
        for l in range(layers):
            if prefetch_weights:
                p.range_op("prefetch", W[l][1] * PAGE_SIZE, weight_bytes, "gpu")
            aid, a = p.alloc(activation_bytes, f"act{l}")
            acts.append((aid, a))
            pages = np.concatenate([W[l][1] + wr, prev + ar, a + ar])
            fl = np.concatenate([np.full(wpages + apages, FLAG_READ, np.uint8),
                                 np.full(apages, FLAG_WRITE, np.uint8)])
            p.kernel(f"forward_{l}", pages, fl, jitter())
            prev = a
        for l in reversed(range(layers)):
            a = acts[l][1]
            below = acts[l - 1][1] if l else xin
            pages = np.concatenate([a + ar, W[l][1] + wr, below + ar, G[l][1] + wr])
            fl = np.concatenate([np.full(apages + wpages + apages, FLAG_READ, np.uint8),
                                 np.full(wpages, FLAG_WRITE, np.uint8)])
            p.kernel(f"backward_{l}", pages, fl, jitter())
            p.free(acts[l][0])
        for l in range(layers):
            pages = np.concatenate([G[l][1] + wr, W[l][1] + wr])
            fl = np.concatenate([np.full(wpages, FLAG_READ, np.uint8),
                                 np.full(wpages, FLAG_WRITE | FLAG_READ, np.uint8)])
            p.kernel(f"sgd_{l}", pages, fl, jitter() // 4)
        p.events.append(("sync", None, None, None, None, None))
    return p.tables()


# --------------------------------------------------------------------------- v1.2 streams
def _schedule(n_blocks: int, slots: int, block_ns: np.ndarray) -> np.ndarray:
    """Start times of blocks run in order on `slots` resident slots: the first `slots`
    start at 0, each later one when the earliest running block ends."""
    import heapq
    free = [0] * min(slots, n_blocks)
    start = np.empty(n_blocks, np.int64)
    for b in range(n_blocks):
        t = heapq.heappop(free)
        start[b] = t
        heapq.heappush(free, t + int(block_ns[b]))
    return start


def _launch(grid: int, threads: int, sm_count: int, max_blocks_per_sm: int, regs: int,
            smem_static: int = 0) -> dict[str, int]:
    return dict(n_blocks=grid, threads_per_block=threads, regs_per_thread=regs,
                smem_static_bytes=smem_static, smem_dynamic_bytes=0, cluster_blocks=1,
                sm_count=sm_count, max_blocks_per_sm=max_blocks_per_sm)


def _touches(steps: list[tuple[np.ndarray, np.ndarray, int]], start: np.ndarray,
             step_ns: np.ndarray) -> tuple[np.ndarray, ...]:
    """Page-level first touches of blocks that each run through `steps` in order: step i
    of block b (pages of it: steps[i][0][b], an array per block row) happens at
    start[b] + i * step_ns[b]. Returns (block, page, t, flags, block_end)."""
    blocks, pages, times, flags = [], [], [], []
    for i, (pg, fl_, _) in enumerate(steps):
        nb, w = pg.shape
        blocks.append(np.repeat(np.arange(nb), w))
        pages.append(pg.ravel())
        times.append(np.repeat(start + i * step_ns, w))
        flags.append(np.full(nb * w, fl_, np.uint8))
    b, p, t, f = (np.concatenate(x) for x in (blocks, pages, times, flags))
    # first touch of each (block, page): earliest time, flags of all touches
    o = np.lexsort((t, p, b))
    b, p, t, f = b[o], p[o], t[o], f[o]
    first = np.ones(b.size, bool)
    first[1:] = (b[1:] != b[:-1]) | (p[1:] != p[:-1])
    st = np.flatnonzero(first)
    f = np.bitwise_or.reduceat(f, st)
    end = start + len(steps) * step_ns
    return b[st], p[st], t[st], f, end


def grid_stride_fill(*, footprint_bytes: int = 64 * MiB, grid: int = 1024, block: int = 256,
                     sm_count: int = 132, max_blocks_per_sm: int = 8, iter_ns: int = 2000,
                     jitter: float = 0.1, kernels: int = 1, seed: int = 0,
                     stream_unit: int | None = None) -> dict[str, pd.DataFrame]:
    """A grid-stride fill (a[i] = f(i), 4-byte elements, i += grid x block): thread block b
    writes bytes [(k grid + b) block 4, +block 4) at iteration k, so its first page is
    (b block 4) >> 12 and its pages advance by the grid stride; every block is spread over
    the whole array. Each iteration takes `iter_ns` (+- `jitter`, per block).
    `stream_unit` forces the stream's unit (log2 bytes), as a collector whose table filled
    coarsens it."""
    rng = np.random.default_rng(seed)
    p = _Program()
    _, first = p.alloc(footprint_bytes, "a")
    n = footprint_bytes // 4
    stride = grid * block
    iters = -(-n // stride)
    launch = _launch(grid, block, sm_count, max_blocks_per_sm, regs=16)
    for kk in range(kernels):
        step_ns = (iter_ns * (1 + jitter * (2 * rng.random(grid) - 1))).astype(np.int64)
        start = _schedule(grid, sm_count * max_blocks_per_sm, step_ns * iters)
        steps = []
        for k in range(iters):
            e0 = (k * stride + np.arange(grid, dtype=np.int64) * block)
            e1 = np.minimum(e0 + block, n) - 1
            valid = e0 < n
            pg = np.where(valid, e0 * 4 >> 12, -1)
            pg2 = np.where(valid, e1 * 4 >> 12, -1)
            steps.append((np.stack([pg, pg2], 1), FLAG_WRITE, k))
        b, pg, t, f, end = _touches(steps, start, step_ns)
        keep = pg >= 0
        p.streamed_kernel(f"grid_stride_fill_{kk}", launch, b[keep], first + pg[keep],
                          t[keep], f[keep], end, counts_per_touch=block,
                          stream_unit=stream_unit)
    return p.tables()


def block_slice_fill(*, footprint_bytes: int = 64 * MiB, grid: int = 1024, block: int = 256,
                     sm_count: int = 132, max_blocks_per_sm: int = 8, iter_ns: int = 2000,
                     jitter: float = 0.1, seed: int = 0,
                     stream_unit: int | None = None) -> dict[str, pd.DataFrame]:
    """Each thread block writes its own contiguous slice of the array, `block` 4-byte
    elements per iteration (fill_probe.cu's `chunk` mode): block b's pages are its
    slice's, in address order. `stream_unit` as in grid_stride_fill."""
    rng = np.random.default_rng(seed)
    p = _Program()
    _, first = p.alloc(footprint_bytes, "a")
    n = footprint_bytes // 4
    per = -(-n // grid)
    iters = -(-per // block)
    step_ns = (iter_ns * (1 + jitter * (2 * rng.random(grid) - 1))).astype(np.int64)
    start = _schedule(grid, sm_count * max_blocks_per_sm, step_ns * iters)
    lo = np.arange(grid, dtype=np.int64) * per
    hi = np.minimum(lo + per, n)
    steps = []
    for k in range(iters):
        e0 = lo + k * block
        e1 = np.minimum(e0 + block, hi) - 1
        valid = e0 < hi
        steps.append((np.stack([np.where(valid, e0 * 4 >> 12, -1),
                                np.where(valid, e1 * 4 >> 12, -1)], 1), FLAG_WRITE, k))
    b, pg, t, f, end = _touches(steps, start, step_ns)
    keep = pg >= 0
    p.streamed_kernel("block_slice_fill", _launch(grid, block, sm_count, max_blocks_per_sm, 16),
                      b[keep], first + pg[keep], t[keep], f[keep], end, counts_per_touch=block,
                      stream_unit=stream_unit)
    return p.tables()


def gemm(*, m: int = 1024, n: int = 1024, k: int = 1024, tile: int = 64, k_step: int = 32,
         sm_count: int = 16, max_blocks_per_sm: int = 2, step_ns: int = 3000,
         jitter: float = 0.05, seed: int = 0) -> dict[str, pd.DataFrame]:
    """C = A B, fp32, row-major, one thread block per `tile` x `tile` tile of C (block id:
    tile column fastest). Each block walks K in steps of `k_step`, reading its rows of A and
    its columns of B, then writes its tile of C. With fewer resident slots than blocks,
    later waves of blocks re-read A and B."""
    rng = np.random.default_rng(seed)
    p = _Program()
    _, A = p.alloc(m * k * 4, "A")
    _, B = p.alloc(k * n * 4, "B")
    _, Cm = p.alloc(m * n * 4, "C")
    tm, tn = m // tile, n // tile
    grid = tm * tn
    bi = np.arange(grid) // tn
    bj = np.arange(grid) % tn
    rows = np.arange(tile)
    steps = []
    for s in range(k // k_step):
        a_pg = ((bi[:, None] * tile + rows[None, :]) * k + s * k_step) * 4 >> 12
        kr = s * k_step + np.arange(k_step)
        b_pg = ((kr[None, :] * n + bj[:, None] * tile) * 4 >> 12)
        b_pg2 = ((kr[None, :] * n + bj[:, None] * tile + tile - 1) * 4 >> 12)
        steps.append((A + a_pg, FLAG_READ, s))
        steps.append((B + np.concatenate([b_pg, b_pg2], 1), FLAG_READ, s))
    c0 = ((bi[:, None] * tile + rows[None, :]) * n + bj[:, None] * tile) * 4 >> 12
    c1 = ((bi[:, None] * tile + rows[None, :]) * n + bj[:, None] * tile + tile - 1) * 4 >> 12
    steps.append((Cm + np.concatenate([c0, c1], 1), FLAG_WRITE, len(steps)))
    half = (step_ns * (1 + jitter * (2 * rng.random(grid) - 1)) / 2).astype(np.int64)
    start = _schedule(grid, sm_count * max_blocks_per_sm, half * len(steps))
    b, pg, t, f, end = _touches(steps, start, half)
    p.streamed_kernel("gemm", _launch(grid, 256, sm_count, max_blocks_per_sm, regs=128,
                                      smem_static=2 * tile * k_step * 4),
                      b, pg, t, f, end, counts_per_touch=32)
    return p.tables()


GENERATORS: dict[str, Callable[..., dict[str, pd.DataFrame]]] = {
    "sequential": sequential, "strided": strided, "random": random, "zipf": zipf,
    "training": training, "grid_stride_fill": grid_stride_fill,
    "block_slice_fill": block_slice_fill, "gemm": gemm,
}


def tables(kind: str, **kwargs: Any) -> dict[str, pd.DataFrame]:
    """The four tables of a synthetic trace of the given kind."""
    if kind not in GENERATORS:
        raise ValueError(f"unknown synthetic trace kind {kind!r}; known: {', '.join(GENERATORS)}")
    return GENERATORS[kind](**kwargs)


def make(kind: str, **kwargs: Any) -> Trace:
    """A validated in-memory Trace of the given kind."""
    return trace_from_tables(**tables(kind, **kwargs), source=_source(kind, kwargs))


def write(kind: str, path: str | Path, *, overwrite: bool = False, **kwargs: Any) -> Path:
    """Write a synthetic trace to `path` (a directory ending in .uvmtrace)."""
    return write_trace(path, **tables(kind, **kwargs), source=_source(kind, kwargs),
                       overwrite=overwrite)


def _source(kind: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    from .. import __version__
    return {"generator": f"uvmsim.trace.synth.{kind}", "params": kwargs,
            "tool_version": __version__}
