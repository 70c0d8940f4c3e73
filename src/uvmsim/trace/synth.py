"""Seeded synthetic trace generators.

Each generator returns the four tables of a uvmtrace as a dict of DataFrames, ready for
`write_trace(path, **tables)` or `trace_from_tables(**tables)`; `make(kind, ...)` returns a
validated Trace and `write(kind, path, ...)` a trace on disk. The same arguments and seed
always give the same trace.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

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
               duration_ns: int, counts: np.ndarray | None = None) -> None:
        """Rows in first-touch order; pages must be unique within the kernel."""
        kid = len(self.kernels)
        self.kernels.append((kid, name, int(duration_ns)))
        self.events.append(("kernel", None, kid, None, None, None))
        pages = np.asarray(pages, np.uint64)
        fl = np.broadcast_to(np.asarray(flags, np.uint8), pages.shape)
        cnt = np.ones(pages.size, np.uint32) if counts is None else np.asarray(counts, np.uint32)
        self.rows.append((pages, np.ascontiguousarray(fl), cnt))

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
        n = [r[0].size for r in self.rows]
        acc = pd.DataFrame({
            "kernel_id": np.repeat(np.arange(len(self.rows), dtype=np.uint32), n),
            "page": np.concatenate([r[0] for r in self.rows]) if self.rows else np.zeros(0, np.uint64),
            "flags": np.concatenate([r[1] for r in self.rows]) if self.rows else np.zeros(0, np.uint8),
            "count": np.concatenate([r[2] for r in self.rows]) if self.rows else np.zeros(0, np.uint32),
            "order": np.concatenate([np.arange(k, dtype=np.uint32) for k in n]) if self.rows
            else np.zeros(0, np.uint32),
        })
        return {"allocations": al, "events": ev, "kernels": ke, "accesses": acc}


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


GENERATORS: dict[str, Callable[..., dict[str, pd.DataFrame]]] = {
    "sequential": sequential, "strided": strided, "random": random, "zipf": zipf,
    "training": training,
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
