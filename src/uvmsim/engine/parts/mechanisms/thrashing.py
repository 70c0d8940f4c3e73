# Driver mechanism: THRASHING mitigation (option `thrashing`; docs/policies.md).
#
# A template part (see memory.py's header). The driver's detection of pages that migrate
# back and forth: a migration within the lapse of the page's previous one is a thrashing
# event; a thrashing page's next fault is throttled (the kernel naps) or, after enough
# throttles, the page is pinned: mapped remotely for a while.
#
# Owns: S.pg_last, S.pg_thr, S.pg_throt, S.pg_pin; settings thrash_* of S.driver[0].
# Offers: thrash_fault (gpu_miss), thrash_prefetch (pinned pages are never prefetched),
# thrash_record (a migration that is not a GPU fault: a host access).
# Calls: remote_access (a pinned page's access).


@_jit
def thrash_fault(S, T, k, r, d, now):
    """The driver's thrashing detection on a fault of page d at `now`: throttle or pin.

    A migration within the lapse of the page's previous one is a thrashing event; at
    thrash_threshold consecutive events the page is thrashing and its next fault is
    throttled (the kernel naps thrash_nap_ns, then the fault is serviced), or, after
    thrash_pin_threshold throttles, pinned: mapped remotely for thrash_pin_ns. Returns True when the access is served remotely.
    """
    last = thrash_forget(S, d, now)
    t = now
    if last >= 0.0 and S.pg_thr[d] >= S.driver[0].thrash_threshold and t - last <= S.driver[0].thrash_lapse_ns:
        if S.pg_throt[d] >= S.driver[0].thrash_pin_threshold:
            S.pg_pin[d] = t + S.driver[0].thrash_pin_ns
            S.pg_thr[d] = 0
            S.pg_throt[d] = 0
            S.counts[k, C_PINS] += 1
            remote_access(S, T, k, r, d)
            return True
        if S.pg_throt[d] < 255:
            S.pg_throt[d] += 1
        S.counts[k, C_THROTTLED] += 1
        S.driver[0].pend_ns += S.driver[0].thrash_nap_ns
        t += S.driver[0].thrash_nap_ns
    thrash_count(S, d, last, t)
    return False


@_jit
def thrash_forget(S, d, t):
    """A page idle for thrash_epoch_ns forgets its thrashing history; returns its last event."""
    last = S.pg_last[d]
    if last >= 0.0 and t - last > S.driver[0].thrash_epoch_ns:
        S.pg_thr[d] = 0
        S.pg_throt[d] = 0
    return last


@_jit
def thrash_count(S, d, last, t):
    """Record a migration of page d at t: a thrashing event if within the lapse of `last`."""
    if last >= 0.0:
        if t - last <= S.driver[0].thrash_lapse_ns:
            if S.pg_thr[d] < 255:
                S.pg_thr[d] += 1
        else:
            S.pg_thr[d] = 0
    S.pg_last[d] = t


@_jit
def thrash_record(S, d, t):
    """A migration of page d at t that is not a GPU fault (a host access copying it back)."""
    thrash_count(S, d, thrash_forget(S, d, t), t)


@_jit
def thrash_prefetch(S, T, blk, lo, hi):
    """Pinned (thrashing) pages are never prefetched."""
    p0 = T.b_page0[blk] - lo
    for pos in range(lo, hi + 1):
        if S.pg_pin[p0 + pos] > S.driver[0].clock:
            clear_bit(S.pbits, 0, pos)
