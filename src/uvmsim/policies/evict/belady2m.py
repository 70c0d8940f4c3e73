"""Belady's MIN over 2 MiB chunks: evict the chunk whose block is next used farthest ahead.

The optimal offline bound for whole-chunk eviction: `init` reads the future from the trace
(every access row's block, sorted by block), and the victim is the chunk in use whose block's
next access row after now is latest (never again beats any row). A block with faults still
waiting in the batch being serviced (S.batch_key[:S.driver[0].n_batch], pages not yet resident)
is needed now and is chosen only if every chunk is. Among blocks never used again, one whose
allocation is never freed goes first, then the one freed last: a block about to be freed
gives its chunk back for nothing. Next uses are cached per chunk and looked up again (binary
search) only once they fall behind now.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ...engine.state import RES
from ...trace.format import OP_CODE
from ..base import EvictPolicy, PolicyContext, may_evict, no_hit, register_evict


# rows: access rows sorted by block (then row), start[b]: block b's first in rows; nxt: the
# cached next use of each chunk (-1: look up); needed: victim-call stamp of "needed now";
# stamp: the victim-call counter; free_at: the row from which each block's allocation is
# freed (never: the row count)
BeladyState = namedtuple("BeladyState", "rows start nxt needed stamp free_at")


def init(ctx: PolicyContext) -> BeladyState:
    T = ctx.trace
    row_block = T.page_block[T.row_page].astype(np.int64)
    rows = np.argsort(row_block, kind="stable").astype(np.int64)  # by block, then row
    start = np.searchsorted(row_block[rows], np.arange(ctx.n_blocks + 1)).astype(np.int64)
    # the row index from which each block's allocation is freed (never: the row count)
    never = T.row_page.size
    free_at = np.full(ctx.n_blocks, never, np.int64)
    tick = 0
    for e in range(T.ev_op.size):
        if T.ev_kernel[e] >= 0:
            tick = T.k_row_start[T.ev_kernel[e] + 1]
        elif T.ev_op[e] == OP_CODE["free"]:
            a = T.ev_alloc[e]
            free_at[T.a_block_off[a]:T.a_block_off[a] + T.a_nblocks[a]] = tick
    return BeladyState(rows, start, np.full(ctx.n_chunks, -1, np.int64),
                       np.zeros(ctx.n_chunks, np.int64), np.zeros(1, np.int64), free_at)


@njit(cache=True)
def on_fill(st, S, T, chunk, blk, first, last, n_new, tick):
    st.nxt[chunk] = -1  # a new block may hold the chunk: look its next use up again


@njit(cache=True)
def on_release(st, S, T, chunk, blk):
    st.nxt[chunk] = -1


@njit(cache=True)
def victim(st, S, T, tick):
    rows, start, nxt, needed, stamp, free_at = (st.rows, st.start, st.nxt, st.needed,
                                                 st.stamp, st.free_at)
    stamp[0] += 1
    # blocks with faulted pages of this batch not yet resident are needed now
    for i in range(S.driver[0].n_batch):
        key = S.batch_key[i]
        blk = S.rank_block[key >> 9]
        c = S.b_chunk[blk]
        if c >= 0 and not (S.pstate[T.b_page0[blk] - T.b_lo[blk] + (key & 511)] & RES):
            needed[c] = stamp[0]
    # rows before now are done: tick is the row that filled the batch, or (at a kernel
    # boundary) the first row not yet replayed
    ks = T.k_row_start
    j = np.searchsorted(ks, tick)
    now = tick if (j < ks.size and ks[j] == tick) else tick + 1
    never = T.row_page.size
    best = -1
    best_key = -(1 << 62)
    for c in range(nxt.size):
        blk = S.chunk_block[c]
        if blk < 0 or not may_evict(S, c):
            continue
        u = nxt[c]
        if u < now:
            a = start[blk]
            b = start[blk + 1]
            i = a + np.searchsorted(rows[a:b], now)
            # no next use: rank by when the allocation is freed (never freed ranks highest)
            u = rows[i] if i < b else never + free_at[blk]
            nxt[c] = u
        key = u if needed[c] != stamp[0] else u - 4 * never  # needed now: last resort
        if key > best_key:
            best_key = key
            best = c
    S.victim[0] = best
    S.victim[1] = 0
    S.victim[2] = 511


BELADY2M = register_evict(EvictPolicy(
    "belady2m", victim=victim, on_fill=on_fill, on_release=on_release, on_hit=no_hit,
    init=init, doc="Belady's MIN over 2 MiB chunks (offline optimal bound; reads the future).",
    source="Belady 1966, 'A study of replacement algorithms for a virtual-storage computer'"))
