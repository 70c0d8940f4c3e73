"""FIFO over 2 MiB chunks: evict the chunk that was taken from the free pool first.

A chunk joins the queue when its block first gets pages and leaves it when released; later
fills and hits do not move it. An earlier reading of the driver took this for its order; the
probe `evict_order` showed the driver moves a block's root chunk on every migration into it,
which is lru2m (docs/model.md, item 3).
"""
from __future__ import annotations

from numba import njit

from ..base import EvictPolicy, no_hit, register_evict
from .lru2m import init, on_release, push_recent, victim


@njit(cache=True)
def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    if not st.linked[chunk]:
        push_recent(st, chunk)


FIFO2M = register_evict(EvictPolicy(
    "fifo2m", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=no_hit, init=init,
    doc="First in, first out over 2 MiB chunks (order of taking a chunk).",
    source="textbook FIFO; gpu_ext (noob512/uvm) FIFO eviction",
    shared_roots=True))
