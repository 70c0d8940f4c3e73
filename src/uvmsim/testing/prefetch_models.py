"""Plain-Python models of every shipped prefetch policy (docs/semantics.md, "Prefetch
policies", and docs/policies.md), compared by uvmsim.testing.check_prefetch_policy with the
policy's prefetch set at every block serviced. Each returns the set P of window positions
for block K with faulted positions F and resident positions R; in(K) = lo..hi. The engine
(and the comparison) ignore positions of P outside in(K), faulted or resident."""
from __future__ import annotations

BIG = 16   # pages per 64 KiB big page (and per UVMSmart basic block)


def _big_pages(faulted, lo: int, hi: int) -> set[int]:
    """Every in(K) position of each 16-aligned group of 16 positions holding a fault."""
    out: set[int] = set()
    for p in faulted:
        g = p - p % BIG
        out.update(range(max(g, lo), min(g + BIG - 1, hi) + 1))
    return out


class NoPrefetch:
    """`none`: P = ∅."""

    def prefetch(self, block, faulted, resident, lo, hi, mem):
        return set()


class BigPage64k:
    """`64k`: the big page (16 positions, 64 KiB aligned in VA) around each fault."""

    def prefetch(self, block, faulted, resident, lo, hi, mem):
        return _big_pages(faulted, lo, hi)


class WholeBlock2m:
    """`2m`: P = in(K)."""

    def prefetch(self, block, faulted, resident, lo, hi, mem):
        return set(range(lo, hi + 1))


class Density:
    """`density` (parameter `threshold` t): B = R ∪ F ∪ the big pages of F. For each
    faulted p in ascending order not yet in P: the largest aligned window of s = 512, 256,
    .., 1 positions around p, clipped to in(K), in which more than t % of the positions are
    in B, is added to P. Finally P = P \\ F."""

    def start(self, ctx) -> None:
        self.t = float(ctx.params["threshold"])

    def prefetch(self, block, faulted, resident, lo, hi, mem):
        B = set(resident) | set(faulted) | _big_pages(faulted, lo, hi)
        P: set[int] = set()
        for p in sorted(faulted):
            if p in P:
                continue
            s = 512
            while s >= 1:
                a, b = max(p - p % s, lo), min(p - p % s + s - 1, hi)
                if sum(1 for q in range(a, b + 1) if q in B) * 100 > (b - a + 1) * self.t:
                    P.update(range(a, b + 1))
                    break
                s //= 2
        return P - set(faulted)


class Tbn:
    """`tbn` (UVMSmart's tree-based neighbourhood): 32 leaves of 16 positions; a leaf is
    valid when it holds a resident or faulted position. Bottom-up over node sizes 2, 4, ..,
    32 leaves, left to right, a node more than half valid (and not full) becomes fully
    valid, which counts for its parent. P = the in(K) positions of every valid leaf."""

    def prefetch(self, block, faulted, resident, lo, hi, mem):
        valid = [False] * 32
        for p in set(faulted) | set(resident):
            valid[p // BIG] = True
        size = 2
        while size <= 32:
            for n0 in range(0, 32, size):
                cnt = sum(valid[n0:n0 + size])
                if cnt != size and cnt * 2 > size:
                    valid[n0:n0 + size] = [True] * size
            size *= 2
        return {p for p in range(lo, hi + 1) if valid[p // BIG]}


class Seq64k:
    """`seq64k` (UVMSmart's sequential-local): the 64 KiB basic block of each fault, basic
    blocks counted in 16-page steps from the allocation's first page (not from VA 0 as
    `64k`'s big pages)."""

    def prefetch(self, block, faulted, resident, lo, hi, mem):
        out: set[int] = set()
        for p in faulted:
            start = p - mem.alloc_page(block, p) % BIG
            out.update(range(max(start, lo), min(start + BIG - 1, hi) + 1))
        return out


#: The model of each shipped prefetch policy, by name.
PREFETCH_MODELS = {
    "none": NoPrefetch, "64k": BigPage64k, "2m": WholeBlock2m, "density": Density,
    "tbn": Tbn, "seq64k": Seq64k,
}
