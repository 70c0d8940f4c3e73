"""True LRU over 2 MiB chunks: recency of use, hits included.

The driver cannot see GPU hits (its list moves only on migration, `lru2m`); this is the policy
it would be if it could, and the usual baseline of cache studies.
"""
from __future__ import annotations

from numba import njit

from ..base import EvictPolicy, register_evict
from .lru2m import init, on_fill, on_release, push_recent, victim


@njit(cache=True)
def on_hit(st, S, T, chunk, blk, pos, tick):
    # most hits repeat the most recent chunk; skip the relink then
    if st.ends[1] != chunk:
        push_recent(st, chunk)


LRU2M_ACCESS = register_evict(EvictPolicy(
    "lru2m_access", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=on_hit,
    init=init, doc="Least recently used 2 MiB chunk, recency updated on every access.",
    source="textbook LRU; UVMSmart's LRU 2MB (gpgpu-sim_UVMSmart) refreshes on access"))
