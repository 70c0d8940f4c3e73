"""The reference model: the GPU, the UVM driver and the link as a SimPy simulation.

Written to be read beside src/uvmsim/engine/replay_template.py: every step function below has
the engine's name and does the engine's work, on the same EngineState arrays (S) and trace
arrays (T), calling the same policy hooks. What the engine computes in closed form (when a
walker frees, how long a batch waits for the driver) happens here as SimPy processes
queueing for `simpy.Resource`s:

    GPU front end ─ kernel process ─ rows ──▶ TLB ──miss──▶ page-table walkers (Resource, N)
                         │                                   hold each walk for walk_ns
                         └─ faults ──▶ FaultBuffer ──full/kernel end──▶ driver (Resource, 1)
                                                       service_batch: prefetch, evict,
                                                       copy engine over the link
    memcpy / memset / prefetch events ───────────────────────────────▶ driver (Resource, 1)

Tenants (one for `simulate`) are interleaved by event: the tenant whose clock is earliest
runs its next event whole. Each event is one SimPy run starting at that tenant's clock; the
driver and walkers enter it busy until the times earlier events left them (S.xlf,
S.walk_free), so queueing carries across events and tenants.
"""
from __future__ import annotations

import math

import numpy as np
import simpy

from ..engine.state import (ADV_ACCESSED_BY, ADV_PREF_CPU, ADV_PREF_GPU, ADV_READ_MOSTLY,
                            ARG_SET_ACCESSED_BY, ARG_SET_PREF_CPU, ARG_SET_PREF_GPU,
                            ARG_SET_READ_MOSTLY, ARG_UNSET_ACCESSED_BY, ARG_UNSET_PREF_CPU,
                            ARG_UNSET_PREF_GPU, ARG_UNSET_READ_MOSTLY, C_COUNTER_MIG, DUP,
                            F_AC_PENALTY, F_AC_THRESH, F_ADVISE, F_OVERSUB, F_REMOTE,
                            OP_ADVISE, REMOTE_DRIVER, REMOTE_UVMSMART, S_CAP, C_BATCHES, C_DTOH_API, C_DTOH_EVICT, C_DTOH_HOST, C_EVICTED,
                            C_FAULTS, C_FAULTS_READ, C_FAULTS_WRITE, C_HOST_POP, C_PAGE_WALKS,
                            C_PINS, C_REMOTE, C_THROTTLED, C_TLB_MISSES, C_ZERO_FILL,
                            CAUSE_API, CAUSE_DEMAND, CAUSE_HTOD_COL, CAUSE_MEMCPY,
                            CAUSE_MEMSET, CAUSE_PREFETCH, F_CLOCK, F_EPOCH_NS, F_HOST_ACCESS,
                            F_LAPSE_NS, F_NAP_NS, F_PEND_NS, F_PIN_NS, F_PIN_THRESH,
                            F_REMOTE_NS, F_SLICES, F_SMALL, F_THRASH, F_THRESH, HW_BATCH_NS,
                            HW_EVICT_NS, HW_FAULT_NS, HW_HOST_FAULT_NS, HW_ZERO_NS, INB,
                             F_ON, OP_HOST_ACCESS, POP, RES, S_FREEPG, S_NBATCH, S_NFREE,
                             S_VTEN, T_DRV_WAIT, T_STALL,
                            T_TRANSFER, T_WALKQ, T_XLATE, XF_DRIVER_FREE, XF_WALK_NS, XL_ON,
                            TLB_TENANT_SPREAD, XL_SETS, XL_SHIFT, XL_TICK, XL_TLB_SLICES,
                            XL_WAYS)
from ..engine.build import policy_key
from ..engine.bits import from_positions, to_positions
from ..engine.timing import transfer_dtoh_ns, transfer_ns
from ..components.walkers import WALKERS, WalkerContext
from ..policies.base import no_hit

# event op codes (uvmsim.trace.format.OPS) and prefetch destinations
OP_ALLOC, OP_FREE, OP_KERNEL, OP_HTOD, OP_DTOH, OP_DTOD, OP_MEMSET, OP_PREFETCH = range(8)
ARG_GPU, ARG_CPU = 1, 2


class FaultBuffer:
    """The GPU's replayable fault buffer: faulted pages wait here for the driver."""

    def __init__(self, S, size: int) -> None:
        self.S = S
        self.size = size
        self.n = 0

    def add(self, d: int) -> bool:
        """Record a fault on dense page d; True when the buffer holds a full batch."""
        self.S.pstate[d] |= INB
        self.S.batch_page[self.n] = d
        self.n += 1
        return self.n == self.size


class ReferenceModel:
    """One GPU shared by tenants: memory (S), driver + copy engine, walkers and a TLB."""

    def __init__(self, S, T, pf, ev, pst, est, batch_size: int, walkers=None,
                 walker_ctx: WalkerContext | None = None, scheduler=None,
                 sched_state: tuple = (), memory=None) -> None:
        self.S, self.T = S, T
        self.pst, self.est = pst, est
        # the hooks run from Python here: key their disk caches as the engine's are
        _, hooks = policy_key(pf, ev, walkers, scheduler, memory)
        # the memory component's hook and the scheduler's start hook are called as the
        # engine calls them (as policy hooks are)
        self.MEM_RESERVE = hooks["MEM_RESERVE"]
        self.SC_START = hooks["SC_START"]
        self.PF_PREFETCH = pf.prefetch
        self.EV_ON_FILL = ev.on_fill
        self.EV_ON_HIT = None if ev.on_hit in (None, no_hit) else ev.on_hit
        self.EV_ON_RELEASE = ev.on_release
        self.EV_VICTIM = ev.victim
        self.batch_size = batch_size
        self.faults = FaultBuffer(S, batch_size)
        # faulted / prefetch-chosen positions of the block being serviced
        self.fmask = np.zeros(512, np.uint8)
        self.pmask = np.zeros(512, np.uint8)
        self.xl = bool(S.xli[XL_ON])
        self.thrashing = bool(S.fcfg[F_THRASH])
        # any optional mechanism on: kernels run on the mechanisms' clock (F_CLOCK, F_PEND_NS)
        self.ft = bool(S.fcfg[F_ON])
        self.walk_ns = float(S.xlf[XF_WALK_NS])
        # the walker component's FIFO pools (one simpy.Resource each) and pool choice
        self.wk = walkers if walkers is not None else WALKERS["shared"]
        self.wctx = walker_ctx or WalkerContext(1, int(S.walk_free.size),
                                                max(int(S.xli[XL_SETS]), 1))
        self.pools = [list(p) for p in self.wk.pools(self.wctx)]
        # the scheduler component's mirror: may a tenant start its next kernel now
        self.admit = scheduler.admit_py if scheduler is not None else None
        self.sched_state = sched_state
        # TLB slot -> id of the fill whose walk has not been granted a walker yet
        self._fill_id = {}
        self._next_fill = 0
        self.env: simpy.Environment | None = None

    # ---------------------------------------------------------------- memory (driver side)
    def evict_one(self, out_row: int, tick: int) -> None:
        """Ask the policy for a victim and copy its resident pages back (no dirty bits)."""
        S, T = self.S, self.T
        self.EV_VICTIM(self.est, S, T, tick)
        c = int(S.victim[0])
        blk = int(S.chunk_block[c])
        if c < 0 or blk < 0:
            raise RuntimeError("eviction policy named a chunk that is not in use")
        if S.scal[S_VTEN] >= 0 and int(S.b_tenant[blk]) != S.scal[S_VTEN]:
            raise RuntimeError("eviction policy named a chunk of another tenant than asked")
        lo = int(T.b_lo[blk])
        p0 = int(T.b_page0[blk]) - lo
        first = max(int(S.victim[1]), lo)
        last = min(int(S.victim[2]), int(T.b_hi[blk]))
        if self.xl:
            self.tlb_shootdown(blk, first, last)
        n, ndup = self._copy_back(p0, first, last, drop_dup=True)
        self.sync_bres(blk)
        if n + ndup == 0:
            raise RuntimeError("eviction policy named a range with no resident page")
        S.counts[out_row, C_DTOH_EVICT] += n * 4096
        S.b_nres[blk] -= n + ndup
        if S.fcfg[F_REMOTE] == REMOTE_UVMSMART:
            # the evicted 64 KiB leaves made one more round trip; their counters restart
            for leaf in range(first >> 4, (last >> 4) + 1):
                S.ac_trips[blk * 32 + leaf] += 1
                S.ac_count[blk * 32 + leaf] = 0
        if S.b_nres[blk] == 0:
            self.release_chunk(blk)
            S.counts[out_row, C_EVICTED] += 1
            S.tacc[0] += S.hw[HW_EVICT_NS]          # the driver's fixed work per eviction

    def _copy_back(self, p0: int, first: int, last: int, drop_dup: bool = False):
        """Device-to-host copy of the resident pages among positions first..last; each
        contiguous run is one transfer on the link. With `drop_dup` (an eviction) a read
        duplicate is dropped, not copied (the CPU copy is current): returns (copied,
        dropped); else every resident page is copied: returns the number copied."""
        S = self.S
        n = ndup = run = 0
        for pos in range(first, last + 1):
            d = p0 + pos
            ps = S.pstate[d]
            if ps & RES and not (drop_dup and ps & DUP):
                S.pstate[d] = ps & ~(RES | DUP)
                n += 1
                run += 1
                continue
            if ps & RES:
                S.pstate[d] = ps & ~(RES | DUP)
                ndup += 1
            if run:
                S.tacc[0] += transfer_dtoh_ns(S.hw, run * 4096)
                run = 0
        if run:
            S.tacc[0] += transfer_dtoh_ns(S.hw, run * 4096)
        return (n, ndup) if drop_dup else n

    def sync_bres(self, blk: int) -> None:
        """S.bres (resident positions of each block, a bit each) after pstate changed."""
        S, T = self.S, self.T
        p0 = int(T.b_page0[blk]) - int(T.b_lo[blk])
        lo, hi = int(T.b_lo[blk]), int(T.b_hi[blk])
        res = np.flatnonzero(S.pstate[p0 + lo:p0 + hi + 1] & RES) + lo
        S.bres[blk * 8:(blk + 1) * 8] = from_positions(res)

    def release_chunk(self, blk: int) -> None:
        """Return a block's chunk to the free pool (its pages are already not resident)."""
        S = self.S
        c = int(S.b_chunk[blk])
        S.b_chunk[blk] = -1
        S.chunk_block[c] = -1
        S.free_stack[S.scal[S_NFREE]] = c
        S.scal[S_NFREE] += 1
        if S.fcfg[F_SMALL]:
            S.scal[S_FREEPG] += self.block_pages(blk)
        S.t_chunks[int(S.b_tenant[blk])] -= 1
        self.EV_ON_RELEASE(self.est, S, self.T, c, blk)

    def block_pages(self, blk: int) -> int:
        """GPU memory a block takes with small_blocks, in 4 KiB pages: its own pages, as the
        driver backs a VA block smaller than 2 MiB with 64 KiB and 4 KiB chunks
        (docs/semantics.md)."""
        return int(self.T.b_hi[blk]) - int(self.T.b_lo[blk]) + 1

    def ensure_chunk(self, blk: int, out_row: int, tick: int) -> int:
        """Step 1: the block takes a free chunk, evicting the policy's victims until one is
        (with small_blocks: until its own pages of GPU memory are free); first, the
        evictions from one tenant's chunks the memory component demands."""
        S = self.S
        c = int(S.b_chunk[blk])
        if c >= 0:
            return c
        ten = int(S.b_tenant[blk])
        while (j := int(self.MEM_RESERVE(S.mem, S, self.T, ten))) >= 0:
            self.evict_from(j, out_row, tick)
        while S.scal[S_NFREE] == 0:
            self.evict_one(out_row, tick)
        if S.fcfg[F_SMALL]:
            need = self.block_pages(blk)
            while S.scal[S_FREEPG] < need:
                self.evict_one(out_row, tick)
            S.scal[S_FREEPG] -= need
        S.scal[S_NFREE] -= 1
        c = int(S.free_stack[S.scal[S_NFREE]])
        S.chunk_block[c] = blk
        S.b_chunk[blk] = c
        S.t_chunks[ten] += 1
        return c

    def evict_from(self, j: int, out_row: int, tick: int) -> None:
        """One eviction among tenant j's chunks only (the policy's victim restricted)."""
        S = self.S
        if not 0 <= j < S.t_chunks.size or S.t_chunks[j] <= 0:
            raise RuntimeError(f"asked to evict from tenant {j}, which holds no chunk")
        S.scal[S_VTEN] = j
        self.evict_one(out_row, tick)
        S.scal[S_VTEN] = -1

    def make_resident(self, blk: int, first: int, last: int, use_masks: bool, cause_f: int,
                      cause_p: int, out_row: int, tick: int) -> None:
        """Steps 1-3 of driver-model.md for positions first..last of a block."""
        S, T = self.S, self.T
        c = self.ensure_chunk(blk, out_row, tick)
        p0 = int(T.b_page0[blk]) - int(T.b_lo[blk])
        pstate, hw = S.pstate, S.hw
        run = n_new = 0
        new_first = new_last = -1
        for pos in range(first, last + 1):
            if use_masks:
                if self.fmask[pos]:
                    cause = cause_f
                elif self.pmask[pos]:
                    cause = cause_p
                else:
                    if run:
                        S.tacc[0] += transfer_ns(hw, run * 4096)
                        run = 0
                    continue
            else:
                cause = cause_f
            d = p0 + pos
            ps = pstate[d]
            if ps & RES:
                if run:
                    S.tacc[0] += transfer_ns(hw, run * 4096)
                    run = 0
                continue
            if cause == CAUSE_MEMSET or (cause != CAUSE_MEMCPY and not (ps & POP)):
                S.counts[out_row, C_ZERO_FILL] += 1       # zero-filled on the GPU
                S.tacc[0] += hw[HW_ZERO_NS]
                if run:
                    S.tacc[0] += transfer_ns(hw, run * 4096)
                    run = 0
            else:
                S.counts[out_row, CAUSE_HTOD_COL[cause]] += 4096  # over the link
                run += 1
            pstate[d] = ps | RES | POP
            n_new += 1
            if new_first < 0:
                new_first = pos
            new_last = pos
        if run:
            S.tacc[0] += transfer_ns(hw, run * 4096)
        S.b_nres[blk] += n_new
        self.sync_bres(blk)
        self.EV_ON_FILL(self.est, S, T, c, blk, new_first, new_last, n_new, tick)

    def service_batch(self, nb: int, out_row: int, tick: int) -> None:
        """The driver services the fault buffer: blocks in order, prefetch, make resident."""
        S, T = self.S, self.T
        pages = S.batch_page[:nb]
        for d in pages:
            S.pstate[d] &= ~INB
        blocks: dict[int, list[int]] = {}
        for d in pages:
            blocks.setdefault(int(T.page_block[d]), []).append(int(T.page_pos[d]))
        # policies may read the batch being serviced: its keys (block rank * 512 + position)
        # sorted in S.batch_key[:nb], their number in S.scal[S_NBATCH]
        S.batch_key[:nb] = np.sort(S.b_rank[T.page_block[pages]] * 512 + T.page_pos[pages])
        S.scal[S_NBATCH] = nb
        self.faults.n = 0
        for blk in sorted(blocks, key=lambda b: S.b_rank[b]):
            lo, hi = int(T.b_lo[blk]), int(T.b_hi[blk])
            for pos in blocks[blk]:
                self.fmask[pos] = 1
            p0 = int(T.b_page0[blk]) - lo
            # the policy sees the block's faulted and resident positions as bits
            S.fbits[:] = from_positions(np.flatnonzero(self.fmask))
            S.rbits[:] = S.bres[blk * 8:(blk + 1) * 8]
            S.pbits[:] = 0
            self.PF_PREFETCH(self.pst, S, T, blk, lo, hi)
            self.pmask[:] = 0
            self.pmask[to_positions(S.pbits)] = 1
            if S.fcfg[F_ADVISE]:
                self.hint_prefetch(p0, lo, hi)
            if self.thrashing:
                # pages pinned by thrashing mitigation are never prefetched
                for pos in range(lo, hi + 1):
                    if S.pg_pin[p0 + pos] > S.fcfg[F_CLOCK]:
                        self.pmask[pos] = 0
            self.make_resident(blk, lo, hi, True, CAUSE_DEMAND, CAUSE_PREFETCH, out_row, tick)
            self.fmask[lo:hi + 1] = 0
        S.counts[out_row, C_BATCHES] += 1
        S.scal[S_NBATCH] = 0

    def hint_prefetch(self, p0: int, lo: int, hi: int) -> None:
        """The driver's hint rules on the prefetch set: a fault on a page preferring the GPU,
        in a block resident nowhere, takes the whole block; pages preferring the CPU are
        not prefetched."""
        S = self.S
        adv = S.pg_adv[p0 + lo:p0 + hi + 1]
        pref = bool(np.any(self.fmask[lo:hi + 1].astype(bool) & (adv & ADV_PREF_GPU != 0)))
        nowhere = not np.any(S.pstate[p0 + lo:p0 + hi + 1] & (POP | RES))
        if pref and nowhere:
            self.pmask[lo:hi + 1] = 1
        self.pmask[lo:hi + 1][adv & ADV_PREF_CPU != 0] = 0

    def prefetch_to_cpu(self, blk: int, lo: int, hi: int, out_row: int,
                        col: int = C_DTOH_API) -> int:
        """Copy a block's resident pages lo..hi back to the host (counted in `col`: a
        cudaMemPrefetchAsync to the CPU, or a host access); free an emptied chunk."""
        S, T = self.S, self.T
        if S.b_chunk[blk] < 0:
            return 0
        n = self._copy_back(int(T.b_page0[blk]) - int(T.b_lo[blk]), lo, hi)
        self.sync_bres(blk)
        S.counts[out_row, col] += n * 4096
        if n and self.xl:
            self.tlb_shootdown(blk, lo, hi)
        S.b_nres[blk] -= n
        if n and S.b_nres[blk] == 0:
            self.release_chunk(blk)
        return n

    def host_access_event(self, e: int, out_row: int) -> None:
        """The CPU touched the event's range: its GPU-resident pages migrate back to the
        host (CPU faults), its never-populated pages are populated in host memory. Leaves
        the time (copies, plus the CPU fault cost per page) in S.tacc."""
        S, T = self.S, self.T
        S.tacc[0] = 0.0
        moved = 0
        for seg in range(int(T.ev_seg_start[e]), int(T.ev_seg_start[e + 1])):
            if T.a_host[T.seg_alloc[seg]]:
                continue
            b_first, b_last = self.for_each_block(seg)
            for blk in range(b_first, b_last + 1):
                lo = int(T.page_pos[T.seg_first[seg]]) if blk == b_first else int(T.b_lo[blk])
                hi = int(T.page_pos[T.seg_last[seg]]) if blk == b_last else int(T.b_hi[blk])
                p0 = int(T.b_page0[blk]) - int(T.b_lo[blk])
                for d in range(p0 + lo, p0 + hi + 1):
                    if S.pstate[d] & RES:
                        if self.thrashing:
                            self.thrash_record(d, float(S.fcfg[F_CLOCK]))
                    elif not S.pstate[d] & POP:
                        S.pstate[d] |= POP
                        S.counts[out_row, C_HOST_POP] += 1
                        moved += 1
                moved += self.prefetch_to_cpu(blk, lo, hi, out_row, C_DTOH_HOST)
        S.times[out_row, T_TRANSFER] += S.tacc[0]
        S.tacc[0] += moved * S.hw[HW_HOST_FAULT_NS]
        S.times[out_row, T_STALL] += S.tacc[0]

    # ---------------------------------------------------------------- thrashing (driver side)
    def thrash_record(self, d: int, t: float) -> None:
        """A migration of page d at time t: idle past the epoch, its history is forgotten;
        within the lapse of the previous migration it is one more thrashing event, later
        the count restarts."""
        S = self.S
        last = float(S.pg_last[d])
        if last >= 0.0 and t - last > S.fcfg[F_EPOCH_NS]:
            S.pg_thr[d] = 0
            S.pg_throt[d] = 0
        self._record(d, last, t)

    def _record(self, d: int, last: float, t: float) -> None:
        S = self.S
        if last >= 0.0:
            if t - last <= S.fcfg[F_LAPSE_NS]:
                S.pg_thr[d] = min(255, int(S.pg_thr[d]) + 1)
            else:
                S.pg_thr[d] = 0
        S.pg_last[d] = t

    def thrash_fault(self, k: int, r: int, d: int, now: float) -> bool:
        """The driver's thrashing mitigation on a GPU fault of page d at `now`. A pinned
        page is read remotely; a page with F_THRESH thrashing events faulting again within
        the lapse is throttled (the kernel naps) or, after F_PIN_THRESH throttles, pinned in
        host memory for F_PIN_NS. True when the access is served remotely."""
        S = self.S
        if S.pg_pin[d] > now:
            self.remote_access(k, r, d)
            return True
        last = float(S.pg_last[d])
        if last >= 0.0 and now - last > S.fcfg[F_EPOCH_NS]:
            S.pg_thr[d] = 0
            S.pg_throt[d] = 0
        t = now
        if last >= 0.0 and S.pg_thr[d] >= S.fcfg[F_THRESH] and t - last <= S.fcfg[F_LAPSE_NS]:
            if S.pg_throt[d] >= S.fcfg[F_PIN_THRESH]:
                S.pg_pin[d] = t + S.fcfg[F_PIN_NS]
                S.pg_thr[d] = 0
                S.pg_throt[d] = 0
                S.counts[k, C_PINS] += 1
                self.remote_access(k, r, d)
                return True
            S.pg_throt[d] = min(255, int(S.pg_throt[d]) + 1)
            S.counts[k, C_THROTTLED] += 1
            S.fcfg[F_PEND_NS] += S.fcfg[F_NAP_NS]          # the kernel naps, then faults
            t += S.fcfg[F_NAP_NS]
        self._record(d, last, t)
        return False

    def gpu_miss(self, k: int, r: int, d: int, now: float) -> bool:
        """Where a GPU miss on page d goes, in the driver's order: read duplication
        (read-mostly), preferred location CPU, the scheduler's remote hint for the tenant, a
        thrashing pin, an accessed-by mapping (remote until an access counter notifies),
        UVMSmart's delayed migration of reads, thrashing detection. True: served remotely."""
        S, T = self.S, self.T
        write = T.row_flags[r] & 6
        adv = 0
        if S.fcfg[F_ADVISE]:
            adv = int(S.pg_adv[d])
            if adv & ADV_READ_MOSTLY:
                if not write:
                    S.pstate[d] |= DUP
                return False
            if adv & ADV_PREF_CPU:
                self.remote_access(k, r, d)
                return True
        if S.t_remote[int(S.b_tenant[T.page_block[d]])]:
            self.remote_access(k, r, d)
            return True
        if self.thrashing and S.pg_pin[d] > now:
            self.remote_access(k, r, d)
            return True
        if adv & ADV_ACCESSED_BY and not adv & ADV_PREF_GPU and S.pstate[d] & POP:
            if not (S.fcfg[F_REMOTE] == REMOTE_DRIVER and self.counter_driver(k, r, d)):
                self.remote_access(k, r, d)
                return True
        elif S.fcfg[F_REMOTE] == REMOTE_UVMSMART and not write:
            if not self.counter_uvmsmart(k, r, d):
                self.remote_access(k, r, d)
                return True
        return self.thrashing and self.thrash_fault(k, r, d, now)

    def counter_driver(self, k: int, r: int, d: int) -> bool:
        """The driver's access counter of page d's 2 MiB block; True when it notifies."""
        S, T = self.S, self.T
        blk = int(T.page_block[d])
        S.ac_count[blk] += T.row_count[r]
        if S.ac_count[blk] >= S.fcfg[F_AC_THRESH]:
            S.ac_count[blk] = 0
            S.counts[k, C_COUNTER_MIG] += 1
            return True
        return False

    def counter_uvmsmart(self, k: int, r: int, d: int) -> bool:
        """UVMSmart's adaptive delayed migration of page d's 64 KiB leaf; True: migrate."""
        S, T = self.S, self.T
        g = int(T.page_block[d]) * 32 + (int(T.page_pos[d]) >> 4)
        S.ac_count[g] += T.row_count[r]
        used = S.free_stack.size - int(S.scal[S_NFREE])
        cap = int(S.scal[S_CAP])
        if used >= cap:
            S.fcfg[F_OVERSUB] = 1.0
        if S.fcfg[F_OVERSUB]:
            thr = S.fcfg[F_AC_THRESH] * S.fcfg[F_AC_PENALTY] * (S.ac_trips[g] + 1)
        else:
            thr = 1.0 + S.fcfg[F_AC_THRESH] * used / cap
        if S.ac_count[g] >= thr:
            S.counts[k, C_COUNTER_MIG] += 1
            return True
        return False

    def advise(self, e: int) -> None:
        """cudaMemAdvise on the event's range (clipped to live non-host allocations)."""
        S, T = self.S, self.T
        arg = int(T.ev_arg[e])
        for seg in range(int(T.ev_seg_start[e]), int(T.ev_seg_start[e + 1])):
            if T.a_host[T.seg_alloc[seg]]:
                continue
            for d in range(int(T.seg_first[seg]), int(T.seg_last[seg]) + 1):
                a = int(S.pg_adv[d])
                if arg == ARG_SET_PREF_GPU:
                    a = (a | ADV_PREF_GPU) & ~ADV_PREF_CPU
                elif arg == ARG_SET_PREF_CPU:
                    a = (a | ADV_PREF_CPU) & ~ADV_PREF_GPU
                elif arg == ARG_SET_ACCESSED_BY:
                    a |= ADV_ACCESSED_BY
                elif arg == ARG_SET_READ_MOSTLY:
                    a |= ADV_READ_MOSTLY
                elif arg in (ARG_UNSET_PREF_GPU, ARG_UNSET_PREF_CPU):
                    a &= ~(ADV_PREF_GPU | ADV_PREF_CPU)
                elif arg == ARG_UNSET_ACCESSED_BY:
                    a &= ~ADV_ACCESSED_BY
                elif arg == ARG_UNSET_READ_MOSTLY:
                    a &= ~ADV_READ_MOSTLY
                    S.pstate[d] &= ~DUP
                S.pg_adv[d] = a

    def remote_access(self, k: int, r: int, d: int) -> None:
        """Row r reads page d over the link from host memory: no fault."""
        S, T = self.S, self.T
        n = int(T.row_count[r])
        S.counts[k, C_REMOTE] += n
        S.fcfg[F_PEND_NS] += n * S.fcfg[F_REMOTE_NS]
        S.pstate[d] |= POP

    def free_alloc(self, a: int) -> None:
        """cudaFree: pages become unpopulated and not resident with no transfer."""
        S, T = self.S, self.T
        p0 = int(T.a_page_off[a])
        S.pstate[p0:p0 + int(T.a_npages[a])] = 0
        b0 = int(T.a_block_off[a])
        S.bres[b0 * 8:(b0 + int(T.a_nblocks[a])) * 8] = 0
        for blk in range(b0, b0 + int(T.a_nblocks[a])):
            S.b_nres[blk] = 0
            if S.b_chunk[blk] >= 0:
                if self.xl:
                    self.tlb_shootdown(blk, int(T.b_lo[blk]), int(T.b_hi[blk]))
                self.release_chunk(blk)

    # ---------------------------------------------------------------- translation (GPU side)
    def tlb_shootdown(self, blk: int, lo: int, hi: int) -> None:
        """Pages lo..hi of a block left the GPU: drop the TLB entries that translate them."""
        S = self.S
        sh, ways = int(S.xli[XL_SHIFT]), int(S.xli[XL_WAYS])
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
        h = (ten << (TLB_TENANT_SPREAD - int(S.xli[XL_SHIFT]))) + vt
        nsets, n = int(S.xli[XL_SETS]), int(S.xli[XL_TLB_SLICES])
        if n > 0:
            per = nsets // n
            return ((ten % n) * per + h % per) * int(S.xli[XL_WAYS])
        return (h % nsets) * int(S.xli[XL_WAYS])

    def translate(self, d: int, t: float, row: int, walks: list):
        """TLB lookup for dense page d at time t. A miss starts a walk process (appended to
        `walks`); a miss on an entry whose walk is in flight merges with it."""
        S, T = self.S, self.T
        blk = int(T.page_block[d])
        ten = int(S.b_tenant[blk])
        vt = (int(S.b_vbase[blk]) + int(T.page_pos[d])) >> int(S.xli[XL_SHIFT])
        tag = vt * S.t_chunks.size + ten   # a (tenant, page) pair, as in the engine
        ways = int(S.xli[XL_WAYS])
        base = self.tlb_set_base(ten, vt)
        S.xli[XL_TICK] += 1
        slot = -1
        for w in range(base, base + ways):
            if S.tlb_tag[w] == tag:
                S.tlb_used[w] = S.xli[XL_TICK]
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
            S.tlb_used[slot] = S.xli[XL_TICK]
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

    # ---------------------------------------------------------------- processes
    def service(self, nb: int, k: int, tick: int, t: float):
        """Hand the fault buffer to the driver; returns the stall it added to the kernel."""
        S, env = self.S, self.env
        with self.driver.request() as req:
            yield req
            start = env.now
            S.tacc[0] = 0.0
            self.service_batch(nb, k, tick)
            cost = S.hw[HW_BATCH_NS] + S.hw[HW_FAULT_NS] * nb + S.tacc[0]
            S.times[k, T_TRANSFER] += S.tacc[0]
            S.times[k, T_DRV_WAIT] += start - t
            S.xlf[XF_DRIVER_FREE] = start + cost
            yield env.timeout(cost)
        return (start - t) + cost

    def passes(self, k: int, t0: float, dur: float):
        """Kernel k's rows in replay order with the time each issues (before stalls): one
        pass over all rows, or with the slices option one pass per time slice s over the
        rows touched in it, spread evenly over [s/n, (s+1)/n) of the compute time."""
        S, T = self.S, self.T
        r0, r1 = int(T.k_row_start[k]), int(T.k_row_start[k + 1])
        n = int(T.k_nslices[k]) if S.fcfg[F_SLICES] and T.row_slices.size else 1
        if n <= 1:
            gap = dur / (r1 - r0) if r1 > r0 else 0.0
            for r in range(r0, r1):
                yield r, t0 + (r - r0) * gap
            return
        width = dur / n
        for s in range(n):
            rows = [r for r in range(r0, r1) if (int(T.row_slices[r]) >> s) & 1]
            gap = dur / (n * len(rows)) if rows else 0.0
            base = t0 + s * width
            for j, r in enumerate(rows):
                yield r, base + j * gap

    def run_kernel(self, k: int, t0: float):
        """Replay one kernel's rows: rows issue evenly over its compute time (shifted by
        stalls), each is translated, faults fill the buffer, full buffers go to the driver.
        With thrashing on, a fault first passes the driver's thrashing mitigation."""
        S, T, env = self.S, self.T, self.env
        r1 = int(T.k_row_start[k + 1])
        dur = float(T.k_duration_ns[k])
        if not dur > 0.0:
            dur = 0.0
        if self.ft:
            S.fcfg[F_CLOCK] = t0
        stall = 0.0
        walks: list = []
        buf = self.faults
        for r, issue in self.passes(k, t0, dur):
            d = int(T.row_page[r])
            blk = int(T.page_block[d])
            if T.a_host[T.b_alloc[blk]]:
                continue
            t = issue + stall
            if self.ft:
                t += S.fcfg[F_PEND_NS]     # naps and remote reads so far delay the row
            if self.xl:
                if t > env.now:
                    yield env.timeout(t - env.now)
                self.translate(d, t, k, walks)
            ps = S.pstate[d]
            if ps & RES:
                if ps & DUP and T.row_flags[r] & 6:
                    # a write to a read duplicate: the driver collapses the copies
                    S.pstate[d] &= ~DUP
                    S.fcfg[F_PEND_NS] += S.hw[HW_BATCH_NS] + S.hw[HW_FAULT_NS]
                if self.EV_ON_HIT is not None:
                    self.EV_ON_HIT(self.est, S, T, S.b_chunk[blk], blk, T.page_pos[d], r)
                continue
            if ps & INB:
                continue
            if self.ft and self.gpu_miss(k, r, d, t):
                continue
            S.counts[k, C_FAULTS] += 1
            S.counts[k, C_FAULTS_WRITE if T.row_flags[r] & 6 else C_FAULTS_READ] += 1
            if buf.add(d):
                if t > env.now:
                    yield env.timeout(t - env.now)
                stall += yield env.process(self.service(buf.n, k, r, t))
        if buf.n:
            t = t0 + dur + stall
            if self.ft:
                t += S.fcfg[F_PEND_NS]
            if t > env.now:
                yield env.timeout(t - env.now)
            stall += yield env.process(self.service(buf.n, k, r1, t))
        if self.ft:
            stall += S.fcfg[F_PEND_NS]
            S.fcfg[F_PEND_NS] = 0.0
            S.fcfg[F_CLOCK] = t0 + dur + stall
        end = t0 + dur + stall
        S.times[k, T_STALL] += stall
        if end > env.now:
            yield env.timeout(end - env.now)
        if walks:
            yield env.all_of(walks)      # the kernel retires when its last walk is done
        if env.now > end:
            S.times[k, T_XLATE] += env.now - end
            S.times[k, T_STALL] += env.now - end
            end = env.now
        return end

    def range_event(self, e: int, out_row: int, tick: int, t: float):
        """memcpy_htod, memset, prefetch and (option) host_access: the driver (and its copy
        engine) works through the range clipped to live non-host allocations."""
        S, T, env = self.S, self.T, self.env
        with self.driver.request() as req:
            yield req
            start = env.now
            if int(T.ev_op[e]) == OP_HOST_ACCESS:
                S.fcfg[F_CLOCK] = start        # thrashing sees the migrations at this time
                self.host_access_event(e, out_row)
            else:
                self.copy_range(e, out_row, tick)
            S.times[out_row, T_STALL] += start - t
            S.times[out_row, T_DRV_WAIT] += start - t
            S.xlf[XF_DRIVER_FREE] = start + S.tacc[0]
            yield env.timeout(S.tacc[0])
        return env.now

    def copy_range(self, e: int, out_row: int, tick: int) -> None:
        """memcpy_htod, memset and prefetch, block by block; leaves their time in S.tacc."""
        S, T = self.S, self.T
        op = int(T.ev_op[e])
        S.tacc[0] = 0.0
        for seg in range(int(T.ev_seg_start[e]), int(T.ev_seg_start[e + 1])):
            if T.a_host[T.seg_alloc[seg]]:
                continue
            b_first, b_last = self.for_each_block(seg)
            for blk in range(b_first, b_last + 1):
                lo = int(T.page_pos[T.seg_first[seg]]) if blk == b_first else int(T.b_lo[blk])
                hi = int(T.page_pos[T.seg_last[seg]]) if blk == b_last else int(T.b_hi[blk])
                if op == OP_PREFETCH and T.ev_arg[e] != ARG_GPU:
                    self.prefetch_to_cpu(blk, lo, hi, out_row)
                    continue
                cause = {OP_HTOD: CAUSE_MEMCPY, OP_MEMSET: CAUSE_MEMSET}.get(op, CAUSE_API)
                self.make_resident(blk, lo, hi, False, cause, cause, out_row, tick)
        S.times[out_row, T_TRANSFER] += S.tacc[0]
        S.times[out_row, T_STALL] += S.tacc[0]

    def for_each_block(self, seg: int) -> tuple[int, int]:
        """First/last block of a segment (helper for range events)."""
        T = self.T
        return int(T.page_block[T.seg_first[seg]]), int(T.page_block[T.seg_last[seg]])

    # ---------------------------------------------------------------- the front end
    def _open(self, t: float) -> simpy.Environment:
        """A SimPy run starting at time t, with the driver and the walkers busy until the
        times earlier events (of any tenant) left them."""
        env = self.env = simpy.Environment(initial_time=t)
        self.driver = simpy.Resource(env, capacity=1)
        self.walkers = [simpy.Resource(env, capacity=len(p)) for p in self.pools]

        def busy_until(res, until):
            with res.request() as req:
                yield req
                yield env.timeout(until - env.now)

        if self.S.xlf[XF_DRIVER_FREE] > t:
            env.process(busy_until(self.driver, float(self.S.xlf[XF_DRIVER_FREE])))
        if self.xl:
            for p, pool in enumerate(self.pools):
                for w in pool:
                    if self.S.walk_free[w] > t:
                        env.process(busy_until(self.walkers[p], float(self.S.walk_free[w])))
        return env

    def event(self, e: int, out_row: int, tick: int, t: float):
        """One event of a tenant starting at its clock t; returns the tenant's new clock."""
        T = self.T
        op = int(T.ev_op[e])
        if op == OP_KERNEL:
            return (yield self.env.process(self.run_kernel(int(T.ev_kernel[e]), t)))
        if op == OP_FREE:
            self.free_alloc(int(T.ev_alloc[e]))
        elif op == OP_ADVISE and self.S.fcfg[F_ADVISE]:
            self.advise(e)
        elif op in (OP_HTOD, OP_MEMSET, OP_PREFETCH) or (op == OP_HOST_ACCESS and
                                                          self.S.fcfg[F_HOST_ACCESS]):
            return (yield self.env.process(self.range_event(e, out_row, tick, t)))
        return t

    def reclaim(self, ten: int, k: int, tick: int, t: float) -> None:
        """Kernel k of tenant ten starts at t: the evictions the scheduler's `start` names
        (proactive reclamation), done by the driver from when it is free; the kernel does
        not wait for them, its batches queue behind them."""
        S = self.S
        j = int(self.SC_START(self.sched_state, S, self.T, ten, k, S.t_live))
        if j < 0:
            return
        start = max(t, float(S.xlf[XF_DRIVER_FREE]))
        S.tacc[0] = 0.0
        while j >= 0:
            self.evict_from(j, k, tick)
            j = int(self.SC_START(self.sched_state, S, self.T, ten, k, S.t_live))
        S.times[k, T_TRANSFER] += S.tacc[0]
        S.xlf[XF_DRIVER_FREE] = start + S.tacc[0]

    def replay(self, ten_ev: np.ndarray, ten_out: np.ndarray, clock: np.ndarray,
               waited: np.ndarray | None = None) -> None:
        """Replay tenants' events (tenant i: events ten_ev[i]..ten_ev[i+1]-1, outside row
        ten_out[i], time clock[i]): the earliest clock (ties: lowest index) among tenants
        not waiting goes next. A kernel the scheduler does not admit waits until another
        tenant's event ends (its clock moves there; waited[i] adds the time); when every
        tenant waits, the earliest goes anyway."""
        T, S = self.T, self.S
        n_t = len(ten_ev) - 1
        cur = [int(x) for x in ten_ev[:n_t]]
        tick = [0] * n_t
        waiting: set[int] = set()
        while True:
            live = [j for j in range(n_t) if cur[j] < ten_ev[j + 1]]
            S.t_live[:] = [j in live for j in range(n_t)]
            if not live:
                return
            ready = [j for j in live if j not in waiting] or live
            i = min(ready, key=lambda j: (clock[j], j))
            e = cur[i]
            if (self.admit is not None and int(T.ev_op[e]) == OP_KERNEL and i not in waiting
                    and not self.admit(self.sched_state, S, T, i, int(T.ev_kernel[e]),
                                       np.array([j in live for j in range(n_t)], np.uint8))):
                waiting.add(i)
                continue
            cur[i] += 1
            if int(T.ev_op[e]) == OP_KERNEL:
                self.reclaim(i, int(T.ev_kernel[e]), tick[i], float(clock[i]))
            env = self._open(float(clock[i]))
            proc = env.process(self.event(e, int(ten_out[i]), tick[i], float(clock[i])))
            clock[i] = env.run(until=proc)
            if T.ev_op[e] == OP_KERNEL:
                tick[i] = int(T.k_row_start[int(T.ev_kernel[e]) + 1])
            for j in sorted(waiting):
                if clock[i] > clock[j]:
                    if waited is not None:
                        waited[j] += clock[i] - clock[j]
                    S.times[int(ten_out[j]), T_STALL] += clock[i] - clock[j]
                    clock[j] = clock[i]
            waiting.clear()
