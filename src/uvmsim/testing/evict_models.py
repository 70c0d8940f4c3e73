"""Plain-Python models of the order of every shipped eviction policy (docs/policies.md).

Each model says in a few lines what its policy's numba hooks implement with linked lists
over flat arrays; uvmsim.testing.check_eviction_policy compares the two at every victim
call. Ties are part of the order and are spelled out. Written from the policies'
descriptions; where a description leaves a choice open (which chunk of equal rank), the
model states the one the policy makes, so a change of it shows up as a disagreement.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import OrderedDict

from ..trace.format import OP_CODE
from .view import MemoryView

LEAF = 16      # pages per 64 KiB leaf
M64 = (1 << 64) - 1


class Lru2m:
    """`lru2m`: chunks ordered by their latest fill (any fill moves a chunk to the most
    recent end, even one making no new page resident); hits are invisible. The victim is the
    least recent chunk the eviction may take, whole."""

    def start(self, ctx) -> None:
        self.order: OrderedDict[int, None] = OrderedDict()

    def fill(self, chunk, block, first, last, n_new, tick, mem) -> None:
        self.order.pop(chunk, None)
        self.order[chunk] = None

    def hit(self, chunk, block, pos, tick, count) -> None:
        pass

    def release(self, chunk, block) -> None:
        self.order.pop(chunk, None)

    def victim(self, mem: MemoryView, tick):
        return next(c for c in self.order if mem.may_evict(c))


class Lru2mAccess(Lru2m):
    """`lru2m_access`: as `lru2m`, and every hit also moves its chunk to the most recent
    end (recency of use)."""

    def hit(self, chunk, block, pos, tick, count) -> None:
        self.order.pop(chunk, None)
        self.order[chunk] = None


class Fifo2m(Lru2m):
    """`fifo2m`: chunks in the order they were taken from the pool (their first fill);
    later fills and hits do not move them."""

    def fill(self, chunk, block, first, last, n_new, tick, mem) -> None:
        self.order.setdefault(chunk, None)


class Lfu2m:
    """`lfu2m`: use = pages made resident in the chunk + hits weighted by the row's count,
    since the chunk was taken (its first fill; both restart when it is released). The
    victim has the least use; ties: taken at the earliest tick, then the lowest chunk."""

    def start(self, ctx) -> None:
        self.use: dict[int, int] = {}
        self.since: dict[int, int] = {}

    def fill(self, chunk, block, first, last, n_new, tick, mem) -> None:
        self.since.setdefault(chunk, tick)
        self.use[chunk] = self.use.get(chunk, 0) + n_new

    def hit(self, chunk, block, pos, tick, count) -> None:
        self.use[chunk] = self.use.get(chunk, 0) + count

    def release(self, chunk, block) -> None:
        self.use.pop(chunk, None)
        self.since.pop(chunk, None)

    def victim(self, mem: MemoryView, tick):
        return min((c for c in mem.in_use() if mem.may_evict(c)),
                   key=lambda c: (self.use.get(c, 0), self.since.get(c, -1), c))


class Random2m:
    """`random2m`, mirrored exactly: chunks in use are kept in an array in the order they
    were taken, a released chunk's slot taking the last one (swap-remove); a victim draws
    i = xorshift64*() mod len from the seeded stream and takes the first chunk from slot i
    on (wrapping) the eviction may take. Mirroring the stream pins the policy's choices; a
    model of your own random policy can instead return the set of chunks it may choose
    (EvictionModel.victim)."""

    def start(self, ctx) -> None:
        self.members: list[int] = []
        # the policy's seeding: mix the seed so seeds 0, 1, 2 are unrelated streams
        s = (int(ctx.seed) * 0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D) & M64
        self.rng = s or 1

    def _next(self) -> int:
        x = self.rng
        x ^= x >> 12
        x ^= (x << 25) & M64
        x ^= x >> 27
        self.rng = x
        return (x * 0x2545F4914F6CDD1D) & M64

    def fill(self, chunk, block, first, last, n_new, tick, mem) -> None:
        if chunk not in self.members:
            self.members.append(chunk)

    def hit(self, chunk, block, pos, tick, count) -> None:
        pass

    def release(self, chunk, block) -> None:
        if chunk in self.members:
            i = self.members.index(chunk)
            last = self.members.pop()
            if last != chunk:
                self.members[i] = last

    def victim(self, mem: MemoryView, tick):
        n = len(self.members)
        i = self._next() % n
        while not mem.may_evict(self.members[i]):
            i = (i + 1) % n
        return self.members[i]


class _LeafLru:
    """LRU over (chunk, unit) nodes refreshed by fills, for `lru4k` (unit = a page) and
    `lru64k`/`tbn` (unit = a 64 KiB leaf). A fill moves, in ascending order, every unit
    between its first and last new position that holds a resident page (old ones too) to
    the most recent end; a released chunk's units leave. The victim is the least recent unit
    still holding a resident page, of a chunk the eviction may take (units of other chunks
    keep their place; units that lost their pages behind the policy's back, through a
    prefetch to the CPU or a host access, are dropped as they are met)."""

    unit = 1

    def start(self, ctx) -> None:
        self.order: OrderedDict[tuple[int, int], None] = OrderedDict()

    def _live(self, mem: MemoryView, chunk: int, u: int) -> bool:
        blk = mem.block_of(chunk)
        return blk >= 0 and any(mem.is_resident(blk, p)
                                for p in range(u * self.unit, (u + 1) * self.unit))

    def fill(self, chunk, block, first, last, n_new, tick, mem) -> None:
        if n_new == 0:
            return
        for u in range(first // self.unit, last // self.unit + 1):
            if self._live(mem, chunk, u):
                self.order.pop((chunk, u), None)
                self.order[(chunk, u)] = None

    def hit(self, chunk, block, pos, tick, count) -> None:
        pass

    def release(self, chunk, block) -> None:
        for node in [n for n in self.order if n[0] == chunk]:
            del self.order[node]

    def _oldest(self, mem: MemoryView) -> tuple[int, int]:
        """Take the least recent live unit the eviction may take out of the order."""
        for node in list(self.order):
            c, u = node
            if not self._live(mem, c, u):
                del self.order[node]
            elif mem.may_evict(c):
                del self.order[node]
                return node
        raise AssertionError("model: no resident unit to evict")

    def victim(self, mem: MemoryView, tick):
        c, u = self._oldest(mem)
        return (c, u * self.unit, (u + 1) * self.unit - 1)


class Lru4k(_LeafLru):
    """`lru4k`: LRU over 4 KiB pages by migration (see _LeafLru); the victim is one page."""

    unit = 1


class Lru64k(_LeafLru):
    """`lru64k`: LRU over 64 KiB leaves by migration (see _LeafLru); the victim is a leaf,
    positions 16·leaf .. 16·leaf + 15."""

    unit = LEAF


class Tbn(Lru64k):
    """`tbn` (UVMSmart's pre-eviction): the least recent leaf goes (as `lru64k`); then the
    victim chunk's tree of 32 leaves, as it is once that leaf has gone, is walked bottom-up
    (node sizes 2, 4, .., 32 leaves, left to right): every node with valid leaves (holding a
    resident page) that is less than half valid has them all pre-evicted, which can tip its
    parent under one half. Pre-evicted leaves are pushed on a stack and handed out one per
    victim call, the last pushed first, before any LRU leaf; a leaf whose chunk changed
    hands or that lost its pages is skipped; one of a chunk this eviction may not take
    empties the whole stack."""

    def start(self, ctx) -> None:
        super().start(ctx)
        self.pending: list[tuple[int, int, int]] = []   # (chunk, leaf, block when pushed)

    def victim(self, mem: MemoryView, tick):
        while self.pending:
            c, leaf, blk = self.pending[-1]
            live = mem.block_of(c) == blk and self._live(mem, c, leaf)
            if live and not mem.may_evict(c):
                self.pending.clear()
                break
            self.pending.pop()
            if live:
                self.order.pop((c, leaf), None)
                return (c, leaf * LEAF, leaf * LEAF + LEAF - 1)
        c, leaf = self._oldest(mem)
        blk = mem.block_of(c)
        valid = [x != leaf and self._live(mem, c, x) for x in range(32)]
        size = 2
        while size <= 32:
            for n0 in range(0, 32, size):
                node = range(n0, n0 + size)
                cnt = sum(valid[x] for x in node)
                if cnt and cnt * 2 < size:
                    for x in node:
                        if valid[x]:
                            valid[x] = False
                            self.pending.append((c, x, blk))
            size *= 2
        return (c, leaf * LEAF, leaf * LEAF + LEAF - 1)


class Belady2m:
    """`belady2m` (Belady's MIN over chunks): the victim is the chunk whose block's next
    access row at or after now is latest; a block never used again ranks after every used
    one, by when its allocation is freed (a later free ranks later; never freed, last). A
    block with a faulted page of the batch being serviced that is not yet
    resident is needed now: it goes only if every chunk is. Ties: the lowest chunk.

    "now" is the tick when it is a kernel's first row (a range event between kernels) and
    the row after it otherwise (the row being replayed is done). A chunk's next use is
    remembered until it falls behind now or the chunk is filled or released, as the policy
    caches it: with the `slices` option ticks restart per pass, and the remembered value
    then stands."""

    def start(self, ctx) -> None:
        T = ctx.trace
        self.never = int(T.row_page.size)
        self.uses: dict[int, list[int]] = {}
        for r, d in enumerate(T.row_page):
            self.uses.setdefault(int(T.page_block[d]), []).append(r)
        self.kernel_starts = {int(x) for x in T.k_row_start}
        # rows replayed before each block's allocation is freed (never: the row count)
        self.freed = {}
        rows_done = 0
        for e in range(T.ev_op.size):
            if T.ev_kernel[e] >= 0:
                rows_done = int(T.k_row_start[T.ev_kernel[e] + 1])
            elif T.ev_op[e] == OP_CODE["free"]:
                a = int(T.ev_alloc[e])
                for b in range(int(T.a_block_off[a]), int(T.a_block_off[a] + T.a_nblocks[a])):
                    self.freed[b] = rows_done
        self.next_use: dict[int, int] = {}

    def fill(self, chunk, block, first, last, n_new, tick, mem) -> None:
        self.next_use.pop(chunk, None)

    def hit(self, chunk, block, pos, tick, count) -> None:
        pass

    def release(self, chunk, block) -> None:
        self.next_use.pop(chunk, None)

    def victim(self, mem: MemoryView, tick):
        now = tick if tick in self.kernel_starts else tick + 1
        needed = {mem.chunk_of(b) for b, p in mem.batch()
                  if mem.chunk_of(b) >= 0 and not mem.is_resident(b, p)}
        best, best_key = -1, None
        for c in mem.in_use():
            if not mem.may_evict(c):
                continue
            u = self.next_use.get(c, -1)
            if u < now:
                blk = mem.block_of(c)
                rows = self.uses.get(blk, [])
                i = bisect_left(rows, now)
                u = rows[i] if i < len(rows) else self.never + self.freed.get(blk, self.never)
                self.next_use[c] = u
            key = u - 4 * self.never if c in needed else u
            if best_key is None or key > best_key:
                best, best_key = c, key
        return best


#: The model of each shipped eviction policy, by name (a class: the kit makes one per replay).
EVICT_MODELS = {
    "lru2m": Lru2m, "lru2m_access": Lru2mAccess, "fifo2m": Fifo2m, "lfu2m": Lfu2m,
    "random2m": Random2m, "lru4k": Lru4k, "lru64k": Lru64k, "tbn": Tbn,
    "belady2m": Belady2m,
}
