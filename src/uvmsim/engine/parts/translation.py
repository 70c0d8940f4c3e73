# Part of the replay engine: TRANSLATION (opt-in). The GPU's TLB and page-table walkers.
#
# A template part (see memory.py's header). Used only when translation is on; the clocked
# replay's front-end translates each row at its time.
#
# Owns: S.tlb_tag, S.tlb_ready, S.tlb_used, S.walk_free, S.translation[0], S.b_vbase and S.b_tenant (read).
# Offers: translate (a front-end's lookup of a row's page), tlb_shootdown (memory: pages
# left the GPU).
# Calls: the walker component (WK_PICK). Nothing of the other parts.


@_jit
def translate(wst, S, T, d, t, row):
    """TLB lookup for dense page d at time t; a miss walks on the walker the walker
    component picks. Returns when the translation is ready (t on a hit)."""
    blk = T.page_block[d]
    ten = S.b_tenant[blk]
    vt = (S.b_vbase[blk] + T.page_pos[d]) >> S.translation[0].shift
    tag = vt * S.t_chunks.size + ten  # tenants' pages never share a tag (MAX_TENANTS)
    ways = S.translation[0].ways
    base = tlb_set_base(S, ten, vt)
    S.translation[0].tick += 1
    slot = -1
    for w in range(base, base + ways):
        if S.tlb_tag[w] == tag:
            S.tlb_used[w] = S.translation[0].tick
            if S.tlb_ready[w] > t:
                # its walk is still in flight: wait for it instead of walking again
                S.counts[row, C_TLB_MISSES] += 1
                return S.tlb_ready[w]
            return t
        # replacement: the first empty way, else the least recently used
        if slot < 0 or (S.tlb_tag[slot] >= 0 and
                        (S.tlb_tag[w] < 0 or S.tlb_used[w] < S.tlb_used[slot])):
            slot = w
    S.counts[row, C_TLB_MISSES] += 1
    S.counts[row, C_PAGE_WALKS] += 1
    wk = WK_PICK(wst, S, ten, t)
    if wk < 0 or wk >= S.walk_free.size:
        raise RuntimeError("walker component picked a walker that does not exist")
    start = max(t, S.walk_free[wk])
    done = start + S.translation[0].walk_ns
    S.walk_free[wk] = done
    S.times[row, T_WALKQ] += start - t
    if S.pstate[d] & RES:
        # only a valid PTE is cached; a walk that ends in a fault leaves no entry
        S.tlb_tag[slot] = tag
        S.tlb_ready[slot] = done
        S.tlb_used[slot] = S.translation[0].tick
    return done


@_jit
def tlb_set_base(S, ten, vt):
    """First way of the TLB set that holds tenant ten's virtual page vt (of translation
    size). With the TLB sliced among tenants (S.translation[0].tlb_slices = their number) a
    tenant's pages map only into its own equal share of the sets. Tenants' pages are spread
    by TLB_TENANT_SPREAD (uvmsim.engine.state); ten < MAX_TENANTS and vt < 2^50 keep the
    sum below 2^63."""
    h = (ten << (TLB_TENANT_SPREAD - S.translation[0].shift)) + vt
    nsets = S.translation[0].sets
    n = S.translation[0].tlb_slices
    if n > 0:
        per = nsets // n
        return ((ten % n) * per + h % per) * S.translation[0].ways
    return (h % nsets) * S.translation[0].ways


@_jit
def tlb_shootdown(S, blk, lo, hi):
    """Pages lo..hi of a block left the GPU: drop the TLB entries that translate them."""
    sh = S.translation[0].shift
    ways = S.translation[0].ways
    ten = S.b_tenant[blk]
    for vt in range((S.b_vbase[blk] + lo) >> sh, ((S.b_vbase[blk] + hi) >> sh) + 1):
        tag = vt * S.t_chunks.size + ten
        base = tlb_set_base(S, ten, vt)
        for w in range(base, base + ways):
            if S.tlb_tag[w] == tag:
                S.tlb_tag[w] = -1
                break
