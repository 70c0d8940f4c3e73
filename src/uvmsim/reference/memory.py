"""Memory in the reference model: chunks, residency and eviction (the engine's
engine/parts/memory.py, step for step and by the same names).

A part class of ReferenceModel (uvmsim.reference.model, which composes the parts and holds
their shared attributes): it works on the model's S (EngineState) and T and calls the
eviction policy's hooks and the memory component's reserve; pages that leave the GPU are shot
down in the TLB (Translation.tlb_shootdown) and evictions are told to the driver
(Driver.on_evicted). Each copy's time goes to S.driver[0].step_ns.
"""
from __future__ import annotations

import numpy as np

from ..engine.bits import from_positions
from ..engine.link import transfer_dtoh_ns, transfer_ns
from ..engine.state import (C_DTOH_API, C_DTOH_EVICT, C_EVICTED, C_ZERO_FILL, CAUSE_DEMAND,
                            CAUSE_HTOD_COL, CAUSE_MEMCPY, CAUSE_MEMSET, CAUSE_PREFETCH, DUP,
                            POP, RES)


class Memory:
    """Chunks, residency and eviction."""

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
        while S.pool[0].n_free == 0:
            self.evict_one(out_row, tick)
        if S.pool[0].small_blocks:
            need = self.block_pages(blk)
            while S.pool[0].free_pages < need:
                self.evict_one(out_row, tick)
            S.pool[0].free_pages -= need
        S.pool[0].n_free -= 1
        c = int(S.free_stack[S.pool[0].n_free])
        S.chunk_block[c] = blk
        S.b_chunk[blk] = c
        S.t_chunks[ten] += 1
        return c

    def evict_from(self, j: int, out_row: int, tick: int) -> None:
        """One eviction among tenant j's chunks only (the policy's victim restricted)."""
        S = self.S
        if not 0 <= j < S.t_chunks.size or S.t_chunks[j] <= 0:
            raise RuntimeError(f"asked to evict from tenant {j}, which holds no chunk")
        S.pool[0].victim_tenant = j
        self.evict_one(out_row, tick)
        S.pool[0].victim_tenant = -1

    def evict_one(self, out_row: int, tick: int) -> None:
        """Ask the policy for a victim and copy its resident pages back (no dirty bits)."""
        S, T = self.S, self.T
        self.EV_VICTIM(self.est, S, T, tick)
        c = int(S.victim[0])
        blk = int(S.chunk_block[c])
        if c < 0 or blk < 0:
            raise RuntimeError("eviction policy named a chunk that is not in use")
        if S.pool[0].victim_tenant >= 0 and int(S.b_tenant[blk]) != S.pool[0].victim_tenant:
            raise RuntimeError("eviction policy named a chunk of another tenant than asked")
        lo = int(T.b_lo[blk])
        p0 = int(T.b_page0[blk]) - lo
        first = max(int(S.victim[1]), lo)
        last = min(int(S.victim[2]), int(T.b_hi[blk]))
        if self.xl:
            self.tlb_shootdown(blk, first, last)
        n, ndup = self.copy_back(p0, first, last, drop_dup=True)
        self.sync_bres(blk)
        if n + ndup == 0:
            raise RuntimeError("eviction policy named a range with no resident page")
        S.counts[out_row, C_DTOH_EVICT] += n * 4096
        S.b_nres[blk] -= n + ndup
        self.on_evicted(blk, first, last)
        if S.b_nres[blk] == 0:
            self.release_chunk(blk)
            S.counts[out_row, C_EVICTED] += 1
            S.driver[0].step_ns += S.hw[0].evict_ns          # the driver's fixed work per eviction

    def copy_back(self, p0: int, first: int, last: int, drop_dup: bool = False):
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
                S.driver[0].step_ns += transfer_dtoh_ns(S.hw, run * 4096)
                run = 0
        if run:
            S.driver[0].step_ns += transfer_dtoh_ns(S.hw, run * 4096)
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
        S.free_stack[S.pool[0].n_free] = c
        S.pool[0].n_free += 1
        if S.pool[0].small_blocks:
            S.pool[0].free_pages += self.block_pages(blk)
        S.t_chunks[int(S.b_tenant[blk])] -= 1
        self.EV_ON_RELEASE(self.est, S, self.T, c, blk)

    def block_pages(self, blk: int) -> int:
        """GPU memory a block takes with small_blocks, in 4 KiB pages: its own pages, as the
        driver backs a VA block smaller than 2 MiB with 64 KiB and 4 KiB chunks
        (docs/semantics.md)."""
        return int(self.T.b_hi[blk]) - int(self.T.b_lo[blk]) + 1

    def make_resident(self, blk: int, first: int, last: int, use_masks: bool, cause_f: int,
                      cause_p: int, out_row: int, tick: int) -> None:
        """Steps 1-3 of docs/semantics.md ("Making pages of one VA block resident") for
        positions first..last of a block."""
        S, T = self.S, self.T
        c = self.ensure_chunk(blk, out_row, tick)
        p0 = int(T.b_page0[blk]) - int(T.b_lo[blk])
        pstate, hw = S.pstate, S.hw
        run = n_new = n_mig = 0
        new_first = new_last = -1
        for pos in range(first, last + 1):
            if use_masks:
                if self.fmask[pos]:
                    cause = cause_f
                elif self.pmask[pos]:
                    cause = cause_p
                else:
                    if run:
                        S.driver[0].step_ns += transfer_ns(hw, run * 4096)
                        run = 0
                    continue
            else:
                cause = cause_f
            d = p0 + pos
            ps = pstate[d]
            if ps & RES:
                if run:
                    S.driver[0].step_ns += transfer_ns(hw, run * 4096)
                    run = 0
                continue
            if cause == CAUSE_MEMSET or (cause != CAUSE_MEMCPY and not (ps & POP)):
                S.counts[out_row, C_ZERO_FILL] += 1       # zero-filled on the GPU
                S.driver[0].step_ns += hw[0].zero_fill_ns
                if run:
                    S.driver[0].step_ns += transfer_ns(hw, run * 4096)
                    run = 0
            else:
                S.counts[out_row, CAUSE_HTOD_COL[cause]] += 4096  # over the link
                run += 1
                if cause in (CAUSE_DEMAND, CAUSE_PREFETCH):   # a fault's page from the host
                    n_mig += 1
            pstate[d] = ps | RES | POP
            n_new += 1
            if new_first < 0:
                new_first = pos
            new_last = pos
        if run:
            S.driver[0].step_ns += transfer_ns(hw, run * 4096)
        if n_mig:
            S.driver[0].step_ns += n_mig * hw[0].migrate_page_ns
        S.b_nres[blk] += n_new
        self.sync_bres(blk)
        self.EV_ON_FILL(self.est, S, T, c, blk, new_first, new_last, n_new, tick)

    def prefetch_to_cpu(self, blk: int, lo: int, hi: int, out_row: int,
                        col: int = C_DTOH_API) -> int:
        """Copy a block's resident pages lo..hi back to the host (counted in `col`: a
        cudaMemPrefetchAsync to the CPU, or a host access); free an emptied chunk."""
        S, T = self.S, self.T
        if S.b_chunk[blk] < 0:
            return 0
        n = self.copy_back(int(T.b_page0[blk]) - int(T.b_lo[blk]), lo, hi)
        self.sync_bres(blk)
        S.counts[out_row, col] += n * 4096
        if n and self.xl:
            self.tlb_shootdown(blk, lo, hi)
        S.b_nres[blk] -= n
        if n and S.b_nres[blk] == 0:
            self.release_chunk(blk)
        return n

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
