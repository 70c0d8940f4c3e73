"""Stateful property tests of eviction: a hypothesis RuleBasedStateMachine drives
the compiled engine's step functions (make_resident, service_batch, prefetch_to_cpu,
free_alloc, the on_hit hook) for every registered eviction policy, and checks after each
step that memory is never over-committed, every resident page's block holds its chunk,
the victim is the one the policy names, nothing populated is lost, and bytes are conserved.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from helpers import examples

from uvmsim.engine.build import engine_for
from uvmsim.engine.state import (C_DTOH_API, C_DTOH_EVICT, C_EVICTED, CAUSE_API, CAUSE_DEMAND,
                                 CAUSE_MEMCPY, CAUSE_MEMSET, CAUSE_PREFETCH, HTOD_COLS, INB,
                                 POP, RES, C_ZERO_FILL, engine_trace, new_state)
from uvmsim.config import get_hardware
from uvmsim.policies import EVICT, get_evict, get_prefetch
from uvmsim.policies.base import PolicyContext, empty_state
from uvmsim.engine.bits import to_positions
from uvmsim.simulate import block_service_rank, block_vbase
from uvmsim.trace.builder import TraceBuilder

PAGE = 4096


def _trace():
    # A: 1100 pages from window position 100 (3 blocks); B: 600 pages aligned (2 blocks);
    # H: a host allocation (never resident)
    b = TraceBuilder()
    b.alloc(1100 * PAGE, base=0x7F0000000000 + 100 * PAGE)
    b.alloc(600 * PAGE, base=0x7F0000800000)
    b.alloc(64 * PAGE, base=0x7F0001000000, kind="host")
    b.kernel(reads=b.pages(0, 0, 1))
    return b.build()


TRACE = _trace()
T = TRACE.arrays
NB = int(T.b_alloc.size)
MANAGED_BLOCKS = [k for k in range(NB) if not T.a_host[T.b_alloc[k]]]


class EvictionMachine(RuleBasedStateMachine):
    @initialize(ev=st.sampled_from(sorted(EVICT)),
                cap=st.integers(1, 4))
    def setup(self, ev, cap):
        self.ev = get_evict(ev)
        pf = get_prefetch("none")   # batches fill exactly their faulted pages
        self.eng = engine_for(pf, self.ev)
        self.cap = cap
        n_pages = int(T.page_block.size)
        ctx = PolicyContext(cap, NB, n_pages, T, {k: float(v) for k, v in self.ev.params.items()}, 0)
        self.est = (self.ev.init or empty_state)(ctx)
        self.pst = (pf.init or empty_state)(PolicyContext(cap, NB, n_pages, T, {}, 0))
        self.S = new_state(n_pages, NB, cap, 1, 256, block_service_rank(TRACE, T),
                           get_hardware(None).record(), b_vbase=block_vbase(T))
        self.T = engine_trace(T)
        self.tick = 0
        self.populated = np.zeros(n_pages, bool)      # shadow: which pages hold data
        self.freed_resident_pages = 0
        self.evictions_seen = 0

    # ------------------------------------------------------------------ helpers
    def _pages(self, blk, lo, hi):
        p0 = int(T.b_page0[blk]) - int(T.b_lo[blk])
        return np.arange(p0 + lo, p0 + hi + 1)

    def _clip(self, blk, a, b):
        lo, hi = int(T.b_lo[blk]), int(T.b_hi[blk])
        a, b = sorted((lo + a % (hi - lo + 1), lo + b % (hi - lo + 1)))
        return a, b

    def _predict_victim(self, blk):
        """What the policy names if making blk resident has to evict (on copies of its
        state, so a stateful policy such as random2m is not advanced)."""
        S = self.S
        if S.b_chunk[blk] >= 0 or S.pool[0].n_free > 0:
            return None
        saved = S.victim.copy()
        est = type(self.est)(*(a.copy() for a in self.est))
        self.ev.victim(est, S, self.T, self.tick)
        named = tuple(int(x) for x in S.victim)
        S.victim[:] = saved
        return named

    def _check_victim(self, named, before_chunk_block, before_res):
        if named is None:
            return
        c, first, last = named
        blk = int(before_chunk_block[c])
        assert blk >= 0, "policy named a free chunk"
        lo, hi = max(first, int(T.b_lo[blk])), min(last, int(T.b_hi[blk]))
        pages = self._pages(blk, lo, hi)
        was = before_res[pages]
        assert was.any(), "policy named a range with no resident page"
        # exactly the named chunk's named pages were copied back
        assert not (self.S.pstate[pages[was]] & RES).any()
        if self.ev.name == "lru2m":
            # independent check: the least recently filled chunk in use
            assert blk == min((b for b in self.order if before_res[self._pages(
                b, int(T.b_lo[b]), int(T.b_hi[b]))].any()), key=self.order.get)

    def _fill(self, blk, lo, hi, go, named=False):
        S = self.S
        if named is False:
            named = self._predict_victim(blk)
        before_cb = S.chunk_block.copy()
        before_res = (S.pstate & RES).astype(bool)
        before_evicted = S.counts[:, C_EVICTED].sum()
        go()
        self._check_victim(named, before_cb, before_res)
        self.evictions_seen += int(S.counts[:, C_EVICTED].sum() - before_evicted)
        self.tick += 1

    # ------------------------------------------------------------------ rules
    @rule(blk=st.sampled_from(MANAGED_BLOCKS), a=st.integers(0, 511), b=st.integers(0, 511),
          cause=st.sampled_from([CAUSE_DEMAND, CAUSE_PREFETCH, CAUSE_MEMCPY, CAUSE_MEMSET,
                                 CAUSE_API]))
    def make_resident(self, blk, a, b, cause):
        lo, hi = self._clip(blk, a, b)
        self._fill(blk, lo, hi, lambda: self.eng.make_range_resident(
            self.est, self.S, self.T, blk, lo, hi, cause, 1, self.tick))
        pages = self._pages(blk, lo, hi)
        assert (self.S.pstate[pages] & RES).all(), "a filled page is not resident"
        self.populated[pages] = True
        self.order[blk] = self.tick

    @rule(faults=st.lists(st.tuples(st.sampled_from(MANAGED_BLOCKS), st.integers(0, 511)),
                          min_size=1, max_size=12))
    def service_batch(self, faults):
        S = self.S
        pages = []
        for blk, p in faults:
            lo, _ = self._clip(blk, p, p)
            d = int(self._pages(blk, lo, lo)[0])
            if not S.pstate[d] & (RES | INB):
                S.pstate[d] |= INB
                pages.append(d)
        if not pages:
            return
        S.batch_page[:len(pages)] = pages
        # the batch may evict more than once; check the first victim only, named while the
        # policy sees the batch as the engine shows it (sorted keys, S_NBATCH)
        blk0 = min({int(T.page_block[d]) for d in pages}, key=lambda k: S.b_rank[k])
        keys = np.sort(S.b_rank[T.page_block[pages]] * 512 + T.page_pos[pages])
        S.batch_key[:len(pages)] = keys
        S.driver[0].n_batch = len(pages)
        for d in pages:
            S.pstate[d] &= ~INB
        named = self._predict_victim(blk0)
        for d in pages:
            S.pstate[d] |= INB
        S.driver[0].n_batch = 0
        if named is not None and S.chunk_block[named[0]] in {int(T.page_block[d]) for d in pages}:
            named = None   # a later block of this batch may refill the victim's block
        self._fill(blk0, 0, 0, lambda: self.eng.service_batch(
            self.pst, self.est, S, self.T, len(pages), 1, self.tick), named=named)
        assert not (S.pstate & INB).any()
        # the driver fills the batch's blocks in service order: later blocks are more recent;
        # a later block may evict an earlier one, never itself
        blks = sorted({int(T.page_block[d]) for d in pages}, key=lambda k: S.b_rank[k])
        last = [d for d in pages if T.page_block[d] == blks[-1]]
        assert (S.pstate[last] & RES).all(), "a faulted page was not made resident"
        # every faulted page now has data (on the GPU, or back on the host if evicted)
        self.populated[pages] = True
        self.populated[(S.pstate & RES).astype(bool)] = True
        for i, blk in enumerate(blks):
            self.order[blk] = self.tick + i / 1000.0

    @rule(blk=st.sampled_from(MANAGED_BLOCKS), a=st.integers(0, 511), b=st.integers(0, 511))
    def prefetch_to_cpu(self, blk, a, b):
        lo, hi = self._clip(blk, a, b)
        self.eng.prefetch_to_cpu(self.est, self.S, self.T, blk, lo, hi, 1, C_DTOH_API)
        assert not (self.S.pstate[self._pages(blk, lo, hi)] & RES).any()

    @rule(a=st.sampled_from([0, 1]))
    def free_alloc(self, a):
        p0, n = int(T.a_page_off[a]), int(T.a_npages[a])
        self.freed_resident_pages += int((self.S.pstate[p0:p0 + n] & RES).astype(bool).sum())
        self.eng.free_alloc(self.est, self.S, self.T, a)
        self.populated[p0:p0 + n] = False
        assert not self.S.pstate[p0:p0 + n].any()

    @rule(data=st.data())
    def hit(self, data):
        res = np.flatnonzero(self.S.pstate & RES)
        if res.size == 0:
            return
        d = int(data.draw(st.sampled_from(res)))
        blk = int(T.page_block[d])
        self.eng.EV_ON_HIT(self.est, self.S, self.T, self.S.b_chunk[blk], blk,
                           int(T.page_pos[d]), self.tick)
        self.tick += 1

    # ------------------------------------------------------------------ invariants
    @invariant()
    def never_over_capacity(self):
        S = self.S
        used = S.chunk_block >= 0
        assert used.sum() <= self.cap
        assert used.sum() + S.pool[0].n_free == self.cap
        assert set(S.free_stack[:S.pool[0].n_free].tolist()) == set(np.flatnonzero(~used).tolist())
        holders = np.flatnonzero(S.b_chunk >= 0)
        assert len(holders) == used.sum()
        assert (S.chunk_block[S.b_chunk[holders]] == holders).all()

    @invariant()
    def resident_pages_have_a_chunk(self):
        S = self.S
        res = (S.pstate & RES).astype(bool)
        blocks = T.page_block[res]
        assert (S.b_chunk[blocks] >= 0).all()
        nres = np.bincount(T.page_block[res], minlength=NB)
        assert (S.b_nres == nres).all()
        assert ((S.b_chunk >= 0) == (nres > 0)).all(), "a chunk held by an empty block"
        assert not res[np.isin(T.page_block, [k for k in range(NB) if k not in MANAGED_BLOCKS])].any()

    @invariant()
    def resident_bits_mirror_pstate(self):
        # S.bres (a bit per window position) and the RES bits of pstate agree everywhere
        S = self.S
        for blk in range(NB):
            lo, hi = int(T.b_lo[blk]), int(T.b_hi[blk])
            res = np.flatnonzero(S.pstate[self._pages(blk, lo, hi)] & RES) + lo
            assert to_positions(S.bres[blk * 8:(blk + 1) * 8]).tolist() == res.tolist()

    @invariant()
    def nothing_lost(self):
        S = self.S
        pop = (S.pstate & POP).astype(bool)
        res = (S.pstate & RES).astype(bool)
        assert (pop == self.populated).all(), "populated pages differ from what was written"
        assert not (res & ~pop).any(), "a resident page without data"

    @invariant()
    def bytes_conserved(self):
        S = self.S
        c = S.counts.sum(axis=0)
        into = int(c[list(HTOD_COLS)].sum()) + int(c[C_ZERO_FILL]) * PAGE
        out = int(c[C_DTOH_EVICT] + c[C_DTOH_API]) + self.freed_resident_pages * PAGE
        assert into - out == int((S.pstate & RES).astype(bool).sum()) * PAGE
        assert int(c[C_EVICTED]) == self.evictions_seen

    def __init__(self):
        super().__init__()
        self.order = {}


EvictionMachine.TestCase.settings = settings(
    max_examples=examples(60), stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestEviction = EvictionMachine.TestCase


def test_belady2m_every_chunk_needed_regression():
    """Found by this machine: with cap=1, block B holds the only chunk and faults on B wait
    in the batch behind A's; belady2m used to name no chunk at all."""
    import uvmsim
    b = TraceBuilder()
    b.alloc(1100 * PAGE, base=0x7F0000000000 + 100 * PAGE)
    b.alloc(600 * PAGE, base=0x7F0000800000)
    b.kernel(reads=b.pages(1, 1, 2))
    b.kernel(reads=list(b.pages(0, 0, 1)) + list(b.pages(1, 0, 1)))
    uvmsim.simulate(b.build(), capacity_chunks=1, evict="belady2m", prefetch="none")
