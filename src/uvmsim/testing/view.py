"""What a plain-Python model of a policy is told: the model protocols and the memory view.

A model states a policy's ORDER in a few lines of Python that a reader can check against
the policy's description (docs/policies.md); the kit (uvmsim.testing.check) feeds it the
same events the policy's hooks get, in the same order, and compares what the two choose at
every call. Ids are the replay's own: a *chunk* is an index 0..n_chunks-1 of GPU memory's
2 MiB chunks, a *block* a VA block (an allocation's pages in one 2 MiB window; the trace
arrays number only the blocks the trace touches), a *position* 0..511 a page's place in its
block's 2 MiB window, and a *tick* the index of the access row being replayed (between
kernels: the next kernel's first row; with the `slices` option it restarts at a kernel's
first row with each pass).
"""
from __future__ import annotations

from typing import Iterable, Protocol, Union, runtime_checkable

import numpy as np

from ..engine.state import RES
from ..policies.base import PolicyContext

#: What `EvictionModel.victim` may return: a chunk (its whole window, positions 0..511), a
#: (chunk, first, last) window range, or a set of either, meaning "any one of these".
Victim = Union[int, tuple, frozenset, set]


class MemoryView:
    """GPU memory as the engine state holds it at the moment of a call (read-only).

    Valid only during the call that received it: keep ids, never the view.
    """

    __slots__ = ("_S", "_T")

    def __init__(self, S, T) -> None:
        self._S, self._T = S, T

    @property
    def trace(self):
        """The replay's trace arrays (uvmsim.trace.TraceArrays): the whole program, future
        included (what an offline policy such as `belady2m` reads)."""
        return self._T

    @property
    def n_chunks(self) -> int:
        """Chunks in GPU memory's pool."""
        return int(self._S.chunk_block.size)

    def block_of(self, chunk: int) -> int:
        """The block holding `chunk`, -1 when the chunk is free."""
        return int(self._S.chunk_block[chunk])

    def chunk_of(self, block: int) -> int:
        """The chunk `block` holds, -1 when it holds none."""
        return int(self._S.b_chunk[block])

    def in_use(self) -> list[int]:
        """Chunks held by a block, in ascending order."""
        return [int(c) for c in np.flatnonzero(self._S.chunk_block >= 0)]

    def span(self, block: int) -> tuple[int, int]:
        """(lo, hi): the positions of the block's allocation in its window, inclusive."""
        return int(self._T.b_lo[block]), int(self._T.b_hi[block])

    def resident(self, block: int) -> frozenset[int]:
        """Positions of the block whose pages are resident on the GPU."""
        lo, hi = self.span(block)
        p0 = int(self._T.b_page0[block]) - lo
        res = np.flatnonzero(self._S.pstate[p0 + lo:p0 + hi + 1] & RES)
        return frozenset(int(x) + lo for x in res)

    def is_resident(self, block: int, pos: int) -> bool:
        """Whether the page at position `pos` of `block` is resident."""
        lo, hi = self.span(block)
        if not lo <= pos <= hi:
            return False
        return bool(self._S.pstate[int(self._T.b_page0[block]) - lo + pos] & RES)

    def alloc_page(self, block: int, pos: int) -> int:
        """Index, within its allocation, of the page at position `pos` of `block` (page 0 is
        the allocation's first page)."""
        T = self._T
        return (int(T.b_first_vpage[block]) - int(T.b_lo[block]) + pos
                - int(T.a_first_page[T.b_alloc[block]]))

    def may_evict(self, chunk: int) -> bool:
        """Whether this eviction may take `chunk` (uvmsim.policies.base.may_evict): with
        several tenants a memory component can restrict an eviction to one tenant's chunks;
        a victim skips the others, keeping its own order."""
        S = self._S
        ten = int(S.pool[0].victim_tenant)
        blk = int(S.chunk_block[chunk])
        return blk >= 0 and (ten < 0 or int(S.b_tenant[blk]) == ten)

    def batch(self) -> tuple[tuple[int, int], ...]:
        """The faulted pages of the fault batch being serviced, as (block, position), in
        service order; empty outside a batch (range events, a prefetch)."""
        S = self._S
        keys = S.batch_key[:int(S.driver[0].n_batch)]
        return tuple((int(S.rank_block[int(k) >> 9]), int(k) & 511) for k in keys)


@runtime_checkable
class EvictionModel(Protocol):
    """A plain-Python statement of an eviction policy's order.

    The kit calls these methods exactly when the engine calls the policy's hooks, with the
    same arguments, and compares `victim` with the policy's victim at every call. A model
    keeps its own state (a list, an OrderedDict); it never reads the policy's. Optionally
    `start(ctx)` (ctx: uvmsim.policies.PolicyContext: n_chunks, n_blocks, n_pages, trace,
    params, seed) runs before each replay and must reset that state; the kit replays each
    generated trace with a fresh deep copy of the model object it was given.
    """

    def fill(self, chunk: int, block: int, first: int, last: int, n_new: int, tick: int,
             mem: MemoryView) -> None:
        """Pages of `block` were made resident in `chunk` (demand, prefetch, memcpy, memset
        or an API prefetch): `n_new` of them, all within positions first..last (both -1
        when n_new == 0: a fill can make nothing new resident and is still a fill). `mem`
        shows memory after the fill. The chunk may have just been taken from the pool."""

    def hit(self, chunk: int, block: int, pos: int, tick: int, count: int) -> None:
        """Access row `tick` (`count` accesses) hit the resident page at position `pos` of
        `block`, held in `chunk`. The driver cannot see hits; most policies ignore them."""

    def release(self, chunk: int, block: int) -> None:
        """`chunk`, which `block` held, went back to the pool: evicted, freed, or emptied by
        a prefetch to the CPU or a host access."""

    def victim(self, mem: MemoryView, tick: int) -> Victim:
        """What to evict now: a chunk (its whole window), a (chunk, first, last) range of
        window positions, or a set of such answers when any one is right (a random policy
        whose stream the model does not mirror). The chunk must be in use and pass
        `mem.may_evict`; the range must hold a resident page. The engine copies the
        range's resident pages back, frees the chunk once it holds none, and asks again
        until a chunk is free: one call per policy call. Two answers are equal when they
        name the same chunk and the same resident pages."""


@runtime_checkable
class PrefetchModel(Protocol):
    """A plain-Python statement of a prefetch policy. Optional `start(ctx)` as for
    EvictionModel (ctx.params holds the policy's parameters, e.g. density's threshold)."""

    def prefetch(self, block: int, faulted: frozenset[int], resident: frozenset[int],
                 lo: int, hi: int, mem: MemoryView) -> Iterable[int]:
        """The positions to prefetch while `block` is serviced with the faulted positions
        `faulted`; `resident` are its resident ones, lo..hi the positions of its allocation
        (in(K)). Positions outside lo..hi, faulted or resident may be included: the engine
        ignores them, and so does the comparison."""


def start_model(model, ctx: PolicyContext) -> None:
    """Call the model's optional `start(ctx)`."""
    start = getattr(model, "start", None)
    if start is not None:
        start(ctx)
