"""Translation in the reference model: the GPU's TLB and page-table walkers (the engine's
engine/parts/translation.py). A miss is a SimPy process that queues for a walker of the pool
the walker component names (one simpy.Resource per pool), where the engine computes when a
walker frees in closed form.
"""
from __future__ import annotations

import math

from ..engine.state import C_PAGE_WALKS, C_TLB_MISSES, RES, T_WALKQ, TLB_TENANT_SPREAD


class Translation:
    """The TLB and the page-table walkers."""

    def tlb_shootdown(self, blk: int, lo: int, hi: int) -> None:
        """Pages lo..hi of a block left the GPU: drop the TLB entries that translate them."""
        S = self.S
        sh, ways = int(S.translation[0].shift), int(S.translation[0].ways)
        vb, ten = int(S.b_vbase[blk]), int(S.b_tenant[blk])
        for vt in range((vb + lo) >> sh, ((vb + hi) >> sh) + 1):
            tag = vt * S.t_chunks.size + ten
            base = self.tlb_set_base(ten, vt)
            for w in range(base, base + ways):
                if S.tlb_tag[w] == tag:
                    S.tlb_tag[w] = -1
                    self._fill_id.pop(w, None)
                    break

    def tlb_set_base(self, ten: int, vt: int) -> int:
        """First way of the set holding tenant ten's virtual page vt: that of vt plus ten
        << TLB_TENANT_SPREAD; with the TLB sliced among n tenants, a set of the tenant's
        own share (sets // n of them)."""
        S = self.S
        h = (ten << (TLB_TENANT_SPREAD - int(S.translation[0].shift))) + vt
        nsets, n = int(S.translation[0].sets), int(S.translation[0].tlb_slices)
        if n > 0:
            per = nsets // n
            return ((ten % n) * per + h % per) * int(S.translation[0].ways)
        return (h % nsets) * int(S.translation[0].ways)

    def translate(self, d: int, t: float, row: int, walks: list):
        """TLB lookup for dense page d at time t. A miss starts a walk process (appended to
        `walks`); a miss on an entry whose walk is in flight merges with it."""
        S, T = self.S, self.T
        blk = int(T.page_block[d])
        ten = int(S.b_tenant[blk])
        vt = (int(S.b_vbase[blk]) + int(T.page_pos[d])) >> int(S.translation[0].shift)
        tag = vt * S.t_chunks.size + ten   # a (tenant, page) pair, as in the engine
        ways = int(S.translation[0].ways)
        base = self.tlb_set_base(ten, vt)
        S.translation[0].tick += 1
        slot = -1
        for w in range(base, base + ways):
            if S.tlb_tag[w] == tag:
                S.tlb_used[w] = S.translation[0].tick
                if w in self._fill_id or S.tlb_ready[w] > t:
                    S.counts[row, C_TLB_MISSES] += 1   # waits for the walk in flight
                return
            if slot < 0 or (S.tlb_tag[slot] >= 0 and
                            (S.tlb_tag[w] < 0 or S.tlb_used[w] < S.tlb_used[slot])):
                slot = w
        S.counts[row, C_TLB_MISSES] += 1
        S.counts[row, C_PAGE_WALKS] += 1
        fill = None
        if S.pstate[d] & RES:
            # only a valid PTE is cached; its ready time is known once a walker takes it
            S.tlb_tag[slot] = tag
            S.tlb_ready[slot] = math.inf
            S.tlb_used[slot] = S.translation[0].tick
            fill = self._next_fill
            self._next_fill += 1
            self._fill_id[slot] = fill
        # the walker component names the pool; the walk queues there (FIFO). A request
        # granted at once takes its walker now, so the next miss at this instant sees it busy
        p = self.wk.choose(self.wctx, S.walk_free, ten, t)
        req = self.walkers[p].request()
        now = req.triggered
        if now:
            self._grant(p, t, row, slot, fill)
        walks.append(self.env.process(self.walk(p, req, now, t, row, slot, fill)))

    def _grant(self, p: int, t: float, row: int, slot: int, fill) -> None:
        """A walker of pool p takes the walk now: the one of the pool that freed first."""
        S, start = self.S, self.env.now
        wf = S.walk_free
        w = min(self.pools[p], key=lambda i: (wf[i], i))
        wf[w] = start + self.walk_ns                        # the walker this walk holds
        S.times[row, T_WALKQ] += start - t
        if fill is not None and self._fill_id.get(slot) == fill:
            del self._fill_id[slot]
            S.tlb_ready[slot] = start + self.walk_ns

    def walk(self, p: int, req, granted: bool, t: float, row: int, slot: int, fill):
        """One page-table walk: queue in pool p for a walker (unless `granted` at once),
        hold it for walk_ns."""
        with req:
            if not granted:
                yield req
                self._grant(p, t, row, slot, fill)
            yield self.env.timeout(self.walk_ns)
