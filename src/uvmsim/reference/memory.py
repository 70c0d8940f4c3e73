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
                            POP, RES, SHARED, UNITS)


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
        blk = int(S.chunk_block[c]) if 0 <= c < S.chunk_block.size else -1
        if blk == SHARED:
            self.evict_root(c, out_row)
            return
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
        if self.is_partial(blk):
            self.make_resident_partial(blk, first, last, use_masks, cause_f, cause_p, out_row,
                                       tick)
            return
        c = self.ensure_chunk(blk, out_row, tick)
        n_new, new_first, new_last = self.fill_positions(blk, first, last, use_masks, cause_f,
                                                         cause_p, out_row)
        self.EV_ON_FILL(self.est, S, T, c, blk, new_first, new_last, n_new, tick)

    def fill_positions(self, blk: int, first: int, last: int, use_masks: bool, cause_f: int,
                       cause_p: int, out_row: int) -> tuple[int, int, int]:
        """Step 3 for positions first..last of a block whose memory is held (the engine's
        fill_positions): returns (pages made resident, first, last position)."""
        S, T = self.S, self.T
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
        return n_new, new_first, new_last

    def prefetch_to_cpu(self, blk: int, lo: int, hi: int, out_row: int,
                        col: int = C_DTOH_API) -> int:
        """Copy a block's resident pages lo..hi back to the host (counted in `col`: a
        cudaMemPrefetchAsync to the CPU, or a host access); free an emptied chunk."""
        S, T = self.S, self.T
        if S.b_chunk[blk] == -1:
            return 0
        n = self.copy_back(int(T.b_page0[blk]) - int(T.b_lo[blk]), lo, hi)
        self.sync_bres(blk)
        S.counts[out_row, col] += n * 4096
        if n and self.xl:
            self.tlb_shootdown(blk, lo, hi)
        S.b_nres[blk] -= n
        if n and S.b_chunk[blk] == SHARED:
            self.free_units(blk, max(lo, int(T.b_lo[blk])), min(hi, int(T.b_hi[blk])))
            if S.b_nres[blk] == 0:
                S.b_chunk[blk] = -1
        elif n and S.b_nres[blk] == 0:
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
            c = int(S.b_chunk[blk])
            if c != -1:
                if self.xl:
                    self.tlb_shootdown(blk, int(T.b_lo[blk]), int(T.b_hi[blk]))
                if c == SHARED:
                    self.free_units(blk, int(T.b_lo[blk]), int(T.b_hi[blk]))
                    S.b_chunk[blk] = -1
                else:
                    self.release_chunk(blk)

    # ---- partial_blocks (the engine's memory part has the driver source it rests on)

    def is_partial(self, blk: int) -> bool:
        """Whether a block takes units of shared root chunks."""
        S = self.S
        return bool(S.pool[0].partial_blocks) and int(S.b_slot[blk]) >= 0

    def unit_of(self, blk: int, pos: int) -> tuple[int, int, int]:
        """(unit, first, last position) of a partial block's position: a 64 KiB-aligned
        group wholly inside the block is unit 0..31; a position of a group covered in part
        is unit 32 + its offset (the block's first group) or 48 + its offset (its last)."""
        lo, hi = int(self.T.b_lo[blk]), int(self.T.b_hi[blk])
        g = pos // 16
        if g * 16 >= lo and g * 16 + 15 <= hi:
            return g, g * 16, g * 16 + 15
        return (32 if g == lo // 16 else 48) + pos % 16, pos, pos

    def unit_range(self, blk: int, u: int) -> tuple[int, int]:
        T = self.T
        if u < 32:
            return u * 16, u * 16 + 15
        p = (int(T.b_lo[blk]) // 16 * 16 + u - 32 if u < 48
             else int(T.b_hi[blk]) // 16 * 16 + u - 48)
        return p, p

    def make_resident_partial(self, blk: int, first: int, last: int, use_masks: bool,
                              cause_f: int, cause_p: int, out_row: int, tick: int) -> None:
        """A partial block: units for the wanted positions that are not resident, then the
        fill (no eviction-order update: only a unit's allocation moves its root)."""
        S = self.S
        base = int(S.b_slot[blk]) * UNITS
        p0 = int(self.T.b_page0[blk]) - int(self.T.b_lo[blk])
        again = True
        while again:   # an allocation may evict units taken already: walk until none is
            again = False
            for pos in range(first, last + 1):
                if use_masks and not (self.fmask[pos] or self.pmask[pos]):
                    continue
                if S.pstate[p0 + pos] & RES:
                    continue
                u, ulo, uhi = self.unit_of(blk, pos)
                if S.u_root[base + u] < 0:
                    self.alloc_unit(blk, base + u, ulo, uhi, out_row, tick)
                    again = True
        self.fill_positions(blk, first, last, use_masks, cause_f, cause_p, out_row)
        if S.b_nres[blk] > 0:
            S.b_chunk[blk] = SHARED

    def open_root(self, size: int) -> int:
        """The shared root for a unit of `size` pages: the last one used if it has room,
        else the lowest-numbered with room; -1 if none."""
        S = self.S
        r = int(S.pool[0].cur_root)
        if r >= 0 and S.chunk_block[r] == SHARED and S.r_room[r] >= size:
            return r
        ok = np.flatnonzero((S.chunk_block == SHARED) & (S.r_room >= size))
        return int(ok[0]) if ok.size else -1

    def alloc_unit(self, blk: int, uid: int, ulo: int, uhi: int, out_row: int,
                   tick: int) -> None:
        """Room for a unit in a shared root: an open one, else a new root chunk (a free one,
        or one the policy's victims free); the root moves to the recent end (on_fill)."""
        S = self.S
        size = uhi - ulo + 1
        r = self.open_root(size)
        if r < 0:
            while S.pool[0].n_free == 0:
                self.evict_one(out_row, tick)
            S.pool[0].n_free -= 1
            r = int(S.free_stack[S.pool[0].n_free])
            S.chunk_block[r] = SHARED
            S.r_head[r] = -1
            S.r_room[r] = 512
            S.t_chunks[int(S.b_tenant[blk])] += 1
        h = int(S.r_head[r])
        S.u_prev[uid], S.u_next[uid] = -1, h
        if h >= 0:
            S.u_prev[h] = uid
        S.r_head[r] = uid
        S.u_root[uid] = r
        S.r_room[r] -= size
        S.pool[0].cur_root = r
        self.EV_ON_FILL(self.est, S, self.T, r, blk, ulo, uhi, 0, tick)

    def unlink_unit(self, uid: int, r: int) -> None:
        S = self.S
        p, n = int(S.u_prev[uid]), int(S.u_next[uid])
        if p >= 0:
            S.u_next[p] = n
        else:
            S.r_head[r] = n
        if n >= 0:
            S.u_prev[n] = p
        S.u_prev[uid] = S.u_next[uid] = S.u_root[uid] = -1

    def release_root(self, r: int, ten: int) -> None:
        """A shared root with no unit goes back to the free pool."""
        S = self.S
        S.chunk_block[r] = S.r_head[r] = -1
        S.r_room[r] = 0
        S.free_stack[S.pool[0].n_free] = r
        S.pool[0].n_free += 1
        S.t_chunks[ten] -= 1
        if S.pool[0].cur_root == r:
            S.pool[0].cur_root = -1
        self.EV_ON_RELEASE(self.est, S, self.T, r, -1)

    def free_units(self, blk: int, lo: int, hi: int) -> None:
        """Return the block's units among lo..hi that hold no resident page."""
        S = self.S
        base = int(S.b_slot[blk]) * UNITS
        p0 = int(self.T.b_page0[blk]) - int(self.T.b_lo[blk])
        pos = lo
        while pos <= hi:
            u, ulo, uhi = self.unit_of(blk, pos)
            r = int(S.u_root[base + u])
            if r >= 0 and not (S.pstate[p0 + ulo:p0 + uhi + 1] & RES).any():
                self.unlink_unit(base + u, r)
                S.r_room[r] += uhi - ulo + 1
                if S.r_head[r] < 0:
                    self.release_root(r, int(S.b_tenant[blk]))
            pos = uhi + 1

    def evict_root(self, r: int, out_row: int) -> None:
        """Evict a shared root: each unit in it copies its resident pages back and is
        returned; one evicted chunk."""
        S, T = self.S, self.T
        n_all = ten = 0
        u = int(S.r_head[r])
        while u >= 0:
            nxt = int(S.u_next[u])
            slot = u // UNITS
            blk = int(S.slot_block[slot])
            ten = int(S.b_tenant[blk])
            ulo, uhi = self.unit_range(blk, u - slot * UNITS)
            if self.xl:
                self.tlb_shootdown(blk, ulo, uhi)
            n, ndup = self.copy_back(int(T.b_page0[blk]) - int(T.b_lo[blk]), ulo, uhi,
                                     drop_dup=True)
            self.sync_bres(blk)
            S.b_nres[blk] -= n + ndup
            n_all += n
            if n + ndup:
                self.on_evicted(blk, ulo, uhi)
            S.u_root[u] = S.u_next[u] = S.u_prev[u] = -1
            if S.b_nres[blk] == 0:
                S.b_chunk[blk] = -1
            u = nxt
        S.r_head[r] = -1
        S.counts[out_row, C_DTOH_EVICT] += n_all * 4096
        self.release_root(r, ten)
        S.counts[out_row, C_EVICTED] += 1
        S.driver[0].step_ns += S.hw[0].evict_ns
