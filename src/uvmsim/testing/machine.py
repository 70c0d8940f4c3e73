"""The stateful machine of eviction: hypothesis drives the compiled engine's step functions
(make_range_resident, service_batch, prefetch_to_cpu, free_alloc, evict_one restricted to
one tenant, the on_hit hook) with one eviction policy, in any order, and checks after every
step that memory is never over-committed, every resident page's block holds its chunk,
each victim is the one the policy names and exactly its pages left, nothing populated is
lost and bytes are conserved. The reference model takes the same steps on a twin state
with the policy's hooks watched (uvmsim.testing.watch): the two states must stay equal, and
with a model every victim must be the model's.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ..config import get_hardware
from ..engine.bits import to_positions
from ..engine.build import engine_for
from ..engine.state import (C_DTOH_API, C_DTOH_EVICT, C_EVICTED, C_ZERO_FILL, CAUSE_API,
                            CAUSE_DEMAND, CAUSE_MEMCPY, CAUSE_MEMSET, CAUSE_PREFETCH,
                            HTOD_COLS, INB, POP, RES, engine_trace, new_state)
from ..policies import get_evict, get_prefetch
from ..policies.base import PolicyContext, empty_state
from ..reference import ReferenceModel
from ..simulate import block_service_rank, block_vbase
from ..trace.builder import TraceBuilder
from .watch import EvictWatch, PolicyMismatch

PAGE = 4096
N_ROWS = 512      # rows of the machine's one kernel: ticks stay below it (on_hit reads counts)


def _trace():
    # A: 1100 pages from window position 100 (3 blocks), tenant 0; B: 600 pages aligned
    # (2 blocks), tenant 1; H: a host allocation (never resident). One kernel of N_ROWS rows
    # over A and B with counts 1..3: the rows on_hit reads and belady2m's future.
    b = TraceBuilder()
    b.alloc(1100 * PAGE, base=0x7F0000000000 + 100 * PAGE)
    b.alloc(600 * PAGE, base=0x7F0000800000)
    b.alloc(64 * PAGE, base=0x7F0001000000, kind="host")
    pages = np.concatenate([b.pages(0), b.pages(1)])
    rng = np.random.default_rng(7)
    rows = rng.choice(pages, N_ROWS, replace=False)
    b.kernel(rows=[(int(p), 1) for p in rows], counts=list(rng.integers(1, 4, N_ROWS)))
    return b.build()


TRACE = _trace()
T = TRACE.arrays
NB = int(T.b_alloc.size)
MANAGED_BLOCKS = [k for k in range(NB) if not T.a_host[T.b_alloc[k]]]
TENANT = np.array([0, 1, 0])[T.b_alloc]     # allocation B belongs to tenant 1


def _copy_state(est):
    """Copies of a policy state's arrays (a namedtuple or a plain tuple)."""
    arrays = [a.copy() for a in est]
    return type(est)(*arrays) if hasattr(est, "_fields") else tuple(arrays)


def eviction_machine(policy, model=None) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine for one eviction policy (a name or an EvictPolicy), checked
    against `model` (an EvictionModel class or object, or None for the rules only)."""
    ev = get_evict(policy)
    pf = get_prefetch("none")   # batches fill exactly their faulted pages

    class EvictionMachine(RuleBasedStateMachine):
        @initialize(cap=st.integers(1, 4))
        def setup(self, cap):
            self.eng = engine_for(pf, ev)
            self.cap = cap
            n_pages = int(T.page_block.size)
            params = {k: float(v) for k, v in ev.params.items()}
            ctx = PolicyContext(cap, NB, n_pages, T, params, 0)
            self.est = (ev.init or empty_state)(ctx)
            self.pst = empty_state(ctx)
            self.T = engine_trace(T)

            def state():
                return new_state(n_pages, NB, cap, 1, 256, block_service_rank(TRACE, T),
                                 get_hardware(None).record(), b_vbase=block_vbase(T),
                                 b_tenant=TENANT, n_tenants=2)
            self.S = state()
            # the twin: the reference model with the policy's hooks watched
            self.watch = EvictWatch(ev, model)
            wev = self.watch.wrapped()
            self.S2 = state()
            self.est2 = wev.init(ctx)
            self.ref = ReferenceModel(self.S2, self.T, pf, wev, self.pst, self.est2, 256)
            self.tick = 0
            self.populated = np.zeros(n_pages, bool)      # shadow: which pages hold data
            self.freed_resident_pages = 0
            self.evictions_seen = 0

        # -------------------------------------------------------------- helpers
        def _pages(self, blk, lo, hi):
            p0 = int(T.b_page0[blk]) - int(T.b_lo[blk])
            return np.arange(p0 + lo, p0 + hi + 1)

        def _clip(self, blk, a, b):
            lo, hi = int(T.b_lo[blk]), int(T.b_hi[blk])
            return tuple(sorted((lo + a % (hi - lo + 1), lo + b % (hi - lo + 1))))

        def _predict_victim(self, blk):
            """What the policy names if making blk resident has to evict (on copies of its
            state, so a stateful policy such as random2m is not advanced)."""
            S = self.S
            if S.b_chunk[blk] >= 0 or S.pool[0].n_free > 0:
                return None
            saved = S.victim.copy()
            ev.victim(_copy_state(self.est), S, self.T, self.tick)
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

        def _step(self, go, twin, named=None):
            """Run `go` on the engine and `twin` on the reference; check the victim the
            policy named, if any, left."""
            S = self.S
            before_cb = S.chunk_block.copy()
            before_res = (S.pstate & RES).astype(bool)
            before_evicted = S.counts[:, C_EVICTED].sum()
            go()
            self._check_victim(named, before_cb, before_res)
            self.evictions_seen += int(S.counts[:, C_EVICTED].sum() - before_evicted)
            twin()
            self.tick = min(self.tick + 1, N_ROWS - 1)

        # -------------------------------------------------------------- rules
        @rule(blk=st.sampled_from(MANAGED_BLOCKS), a=st.integers(0, 511),
              b=st.integers(0, 511),
              cause=st.sampled_from([CAUSE_DEMAND, CAUSE_PREFETCH, CAUSE_MEMCPY,
                                     CAUSE_MEMSET, CAUSE_API]))
        def make_resident(self, blk, a, b, cause):
            lo, hi = self._clip(blk, a, b)
            t = self.tick
            self._step(lambda: self.eng.make_range_resident(
                self.est, self.S, self.T, blk, lo, hi, cause, 1, t),
                lambda: self.ref.make_resident(blk, lo, hi, False, cause, cause, 1, t),
                self._predict_victim(blk))
            pages = self._pages(blk, lo, hi)
            assert (self.S.pstate[pages] & RES).all(), "a filled page is not resident"
            self.populated[pages] = True

        @rule(faults=st.lists(st.tuples(st.sampled_from(MANAGED_BLOCKS), st.integers(0, 511)),
                              min_size=1, max_size=12))
        def service_batch(self, faults):
            S, S2 = self.S, self.S2
            pages = []
            for blk, p in faults:
                lo, _ = self._clip(blk, p, p)
                d = int(self._pages(blk, lo, lo)[0])
                if not S.pstate[d] & (RES | INB):
                    S.pstate[d] |= INB
                    S2.pstate[d] |= INB
                    pages.append(d)
            if not pages:
                return
            S.batch_page[:len(pages)] = pages
            S2.batch_page[:len(pages)] = pages
            # the batch may evict more than once; check the first victim only, named while
            # the policy sees the batch as the engine shows it (sorted keys, driver.n_batch)
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
            if named is not None and S.chunk_block[named[0]] in {int(T.page_block[d])
                                                                  for d in pages}:
                named = None   # a later block of this batch may refill the victim's block
            t = self.tick
            self._step(lambda: self.eng.service_batch(self.pst, self.est, S, self.T,
                                                      len(pages), 1, t),
                       lambda: self.ref.service_batch(len(pages), 1, t), named)
            assert not (S.pstate & INB).any()
            # the driver fills the batch's blocks in service order; a later block may evict
            # an earlier one, never itself
            blks = sorted({int(T.page_block[d]) for d in pages}, key=lambda k: S.b_rank[k])
            last = [d for d in pages if T.page_block[d] == blks[-1]]
            assert (S.pstate[last] & RES).all(), "a faulted page was not made resident"
            # every faulted page now has data (on the GPU, or back on the host if evicted)
            self.populated[pages] = True
            self.populated[(S.pstate & RES).astype(bool)] = True

        @rule(blk=st.sampled_from(MANAGED_BLOCKS), a=st.integers(0, 511),
              b=st.integers(0, 511))
        def prefetch_to_cpu(self, blk, a, b):
            lo, hi = self._clip(blk, a, b)
            self.eng.prefetch_to_cpu(self.est, self.S, self.T, blk, lo, hi, 1, C_DTOH_API)
            self.ref.prefetch_to_cpu(blk, lo, hi, 1, C_DTOH_API)
            assert not (self.S.pstate[self._pages(blk, lo, hi)] & RES).any()

        @rule(a=st.sampled_from([0, 1]))
        def free_alloc(self, a):
            p0, n = int(T.a_page_off[a]), int(T.a_npages[a])
            self.freed_resident_pages += int((self.S.pstate[p0:p0 + n] & RES)
                                             .astype(bool).sum())
            self.eng.free_alloc(self.est, self.S, self.T, a)
            self.ref.free_alloc(a)
            self.populated[p0:p0 + n] = False
            assert not self.S.pstate[p0:p0 + n].any()

        @precondition(lambda self: (self.S.chunk_block >= 0).any())
        @rule(ten=st.sampled_from([0, 1]))
        def evict_from_tenant(self, ten):
            """A memory component's restricted eviction: the victim among one tenant's
            chunks only (may_evict)."""
            S = self.S
            if S.t_chunks[ten] <= 0:
                return
            S.pool[0].victim_tenant = ten
            saved = S.victim.copy()
            ev.victim(_copy_state(self.est), S, self.T, self.tick)
            named = tuple(int(x) for x in S.victim)
            S.victim[:] = saved
            assert TENANT[S.chunk_block[named[0]]] == ten, "victim of another tenant"
            t = self.tick

            def go():
                self.eng.evict_one(self.est, S, self.T, 1, t)
                S.pool[0].victim_tenant = -1
            self._step(go, lambda: self.ref.evict_from(ten, 1, t), named)

        @rule(data=st.data())
        def hit(self, data):
            res = np.flatnonzero(self.S.pstate & RES)
            if res.size == 0:
                return
            d = int(data.draw(st.sampled_from(res)))
            blk = int(T.page_block[d])
            args = (self.S.b_chunk[blk], blk, int(T.page_pos[d]), self.tick)
            self.eng.EV_ON_HIT(self.est, self.S, self.T, *args)
            self.ref.EV_ON_HIT(self.est2, self.S2, self.T, *args)
            self.tick = min(self.tick + 1, N_ROWS - 1)

        # -------------------------------------------------------------- invariants
        @invariant()
        def never_over_capacity(self):
            S = self.S
            used = S.chunk_block >= 0
            assert used.sum() <= self.cap
            assert used.sum() + S.pool[0].n_free == self.cap
            assert (set(S.free_stack[:S.pool[0].n_free].tolist())
                    == set(np.flatnonzero(~used).tolist()))
            holders = np.flatnonzero(S.b_chunk >= 0)
            assert len(holders) == used.sum()
            assert (S.chunk_block[S.b_chunk[holders]] == holders).all()
            for ten in (0, 1):
                assert S.t_chunks[ten] == int((TENANT[S.chunk_block[used]] == ten).sum())

        @invariant()
        def resident_pages_have_a_chunk(self):
            S = self.S
            res = (S.pstate & RES).astype(bool)
            blocks = T.page_block[res]
            assert (S.b_chunk[blocks] >= 0).all()
            nres = np.bincount(T.page_block[res], minlength=NB)
            assert (S.b_nres == nres).all()
            assert ((S.b_chunk >= 0) == (nres > 0)).all(), "a chunk held by an empty block"
            host = [k for k in range(NB) if k not in MANAGED_BLOCKS]
            assert not res[np.isin(T.page_block, host)].any()

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

        @invariant()
        def engine_equals_reference(self):
            S, S2 = self.S, self.S2
            for f in ("pstate", "chunk_block", "b_chunk", "b_nres", "bres", "free_stack",
                      "pool", "driver", "counts", "t_chunks"):
                a, b = getattr(S, f), getattr(S2, f)
                if not np.array_equal(a, b):
                    raise PolicyMismatch(
                        f"eviction policy {ev.name!r}: the engine and the reference model "
                        f"disagree on S.{f} after the steps above (the policy behaves "
                        f"differently compiled into the engine than called from Python)")

    EvictionMachine.__name__ = EvictionMachine.__qualname__ = f"EvictionMachine[{ev.name}]"
    return EvictionMachine
