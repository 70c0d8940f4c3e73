# Driver mechanism: HOST ACCESSES (v1.1 host_access events, option `host_access`;
# docs/semantics.md).
#
# A template part (see memory.py's header). The CPU touched a range: its GPU-resident pages
# migrate back (CPU faults), its never-populated pages are populated in host memory.
#
# Offers: host_access_event (the program, through the driver's range_event_clocked when
# clocked).
# Calls: memory's prefetch_to_cpu, thrashing's thrash_record, the driver's for_each_block.


@_jit
def host_access_event(est, S, T, e, out_row):
    """host_access (v1.1, option): the CPU touched the event's range (clipped to live
    non-host allocations). GPU-resident pages are copied back (dtoh_bytes_host) and stay
    populated, an emptied chunk returns to the pool; unpopulated pages become populated
    with no transfer (host_populated_pages). Each such page costs hw.host_fault_ns on top
    of the copies. Leaves the event's time in driver.step_ns."""
    S.driver[0].step_ns = 0.0
    moved = 0
    thrash = S.driver[0].thrashing != 0
    for seg in range(T.ev_seg_start[e], T.ev_seg_start[e + 1]):
        if T.a_host[T.seg_alloc[seg]]:
            continue
        b_first, b_last = for_each_block(T, seg)
        for blk in range(b_first, b_last + 1):
            lo = T.page_pos[T.seg_first[seg]] if blk == b_first else T.b_lo[blk]
            hi = T.page_pos[T.seg_last[seg]] if blk == b_last else T.b_hi[blk]
            p0 = T.b_page0[blk] - T.b_lo[blk]
            for pos in range(lo, hi + 1):
                d = p0 + pos
                ps = S.pstate[d]
                if ps & RES:
                    if thrash:
                        # a CPU fault migrating the page back is a migration event
                        thrash_record(S, d, S.driver[0].clock)
                elif not (ps & POP):
                    S.pstate[d] = ps | POP
                    S.counts[out_row, C_HOST_POP] += 1
                    moved += 1
            moved += prefetch_to_cpu(est, S, T, blk, lo, hi, out_row, np.int64(C_DTOH_HOST))
    S.times[out_row, T_TRANSFER] += S.driver[0].step_ns
    S.driver[0].step_ns += moved * S.hw[0].host_fault_ns
    S.times[out_row, T_STALL] += S.driver[0].step_ns
