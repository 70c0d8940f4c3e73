"""Property tests of the engine over generated programs."""
from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

import uvmsim
from uvmsim.engine.arrays import engine_arrays
from uvmsim.engine.state import RES

from uvmsim.testing import Free
from uvmsim.testing.strategies import programs as _programs

programs = _programs(max_ops=12)
programs_v11 = _programs(max_ops=12, v11=True)

PAGE = 4096
POLICIES = ["none", "64k", "2m", "density"]


def _check_state(r):
    S = r.state
    res = (S.pstate & RES) != 0
    used = S.chunk_block >= 0
    cap = r.summary["capacity_chunks"]
    assert used.sum() <= cap
    assert used.sum() == (S.b_chunk >= 0).sum()
    # every resident page's block holds a chunk, and block counters match the pages
    T = r._trace_arrays
    blocks_with_res = np.unique(T.page_block[res])
    assert (S.b_chunk[blocks_with_res] >= 0).all()
    per_block = np.bincount(T.page_block[res], minlength=S.b_nres.size)
    assert (per_block == S.b_nres).all()
    # a chunk is held only by a block with resident pages
    assert (S.b_nres[S.b_chunk >= 0] > 0).all()
    # chunk <-> block maps agree
    held = np.flatnonzero(used)
    assert (S.b_chunk[S.chunk_block[held]] == held).all()
    return int(res.sum())


def _sim(trace, **kw):
    r = uvmsim.simulate(trace, keep_state=True, **kw)
    # the state covers the blocks the trace touches: index it with the engine's arrays
    r._trace_arrays = engine_arrays(trace)
    return r


@given(programs, st.sampled_from(POLICIES), st.sampled_from([1.0, 1.5, 3.0, 10.0]),
       st.sampled_from([1, 3, 256]))
def test_capacity_residency_and_byte_conservation(program, pf, f, bs):
    has_free = any(isinstance(o, Free) for o in program.ops)
    for upto in range(1, program.n_ops + 1):   # every prefix: "never exceeds", not "at the end"
        trace = program.prefix(upto).build()
        r = _sim(trace, oversub=f, prefetch=pf, fault_batch_size=bs)
        resident = _check_state(r)
        s = r.summary
        moved_in = (s["htod_bytes"] // PAGE) + s["zero_fill_pages"]
        moved_out = (s["dtoh_bytes_evict"] + s["dtoh_bytes_api_prefetch"]) // PAGE
        dropped_by_free = moved_in - moved_out - resident
        assert dropped_by_free >= 0
        if not has_free:
            assert dropped_by_free == 0
        assert s["htod_bytes"] % PAGE == 0 and s["dtoh_bytes_evict"] % PAGE == 0
        # every eviction copies back at least one page
        assert s["dtoh_bytes_evict"] >= s["evicted_chunks"] * PAGE
        assert s["faults"] == s["faults_read"] + s["faults_write"]
        assert s["fault_batches"] * bs >= s["faults"]


@given(programs, st.sampled_from(POLICIES))
def test_factor_one_never_evicts(program, pf):
    r = uvmsim.simulate(program.build(), oversub=1.0, prefetch=pf)
    assert r.summary["evicted_chunks"] == 0
    assert r.summary["dtoh_bytes_evict"] == 0


@given(programs, st.sampled_from(POLICIES), st.sampled_from([1.5, 4.0]))
def test_identical_run_to_run(program, pf, f):
    t = program.build()
    a = uvmsim.simulate(t, oversub=f, prefetch=pf)
    b = uvmsim.simulate(t, oversub=f, prefetch=pf)
    assert a.summary == b.summary
    assert a.kernels.equals(b.kernels)


@given(programs)
def test_a_page_is_zero_filled_at_most_once_but_by_memset(program):
    # pages of an allocation start unpopulated once; after that they move, not zero-fill,
    # except that a memset zero-fills every page it covers that is not resident, populated
    # or not (docs/semantics.md): a page moved back to the host and memset again counts twice
    t = program.build()
    r = uvmsim.simulate(t, oversub=1.0, prefetch="2m")
    n_pages = int(t.arrays.a_npages[~t.arrays.a_host].sum())
    ev = t.events
    ms = ev[ev["op"] == "memset"]
    memset_pages = int(sum(int(sz) // 4096 + 2 for sz in ms["size"]))
    assert r.summary["zero_fill_pages"] <= n_pages + memset_pages


@given(programs_v11, st.sampled_from(POLICIES), st.sampled_from([1.0, 2.0]),
       st.sampled_from([1, 256]))
def test_v11_program_with_options_off_replays_as_its_v1_content(program, pf, f, bs):
    a = uvmsim.simulate(program.build(), oversub=f, prefetch=pf, fault_batch_size=bs)
    b = uvmsim.simulate(program.v1().build(), oversub=f, prefetch=pf,
                        fault_batch_size=bs)
    assert a.summary == b.summary and a.extra == b.extra
    assert a.kernels.equals(b.kernels)


@given(programs_v11, st.sampled_from(POLICIES), st.sampled_from([1.5, 3.0]),
       st.sampled_from([1, 3, 256]))
def test_h200_model_keeps_residency_and_conserves_pages(program, pf, f, bs):
    trace = program.build()
    r = _sim(trace, model="h200", oversub=f, prefetch=pf, fault_batch_size=bs)
    resident = _check_state(r)
    s, x = r.summary, r.extra
    moved_in = (s["htod_bytes"] // PAGE) + s["zero_fill_pages"]
    moved_out = (s["dtoh_bytes_evict"] + s["dtoh_bytes_api_prefetch"] +
                 x["dtoh_bytes_host"]) // PAGE
    dropped_by_free = moved_in - moved_out - resident
    assert dropped_by_free >= 0
    if not any(isinstance(o, Free) for o in program.ops):
        assert dropped_by_free == 0
    # a page populated by the host is never zero-filled on the GPU afterwards; a page is
    # zero-filled once, but a memset zero-fills again every page it covers that is not
    # resident (docs/semantics.md). The trace's pages are those of its touched blocks.
    n_pages = int(trace.arrays.a_npages[~trace.arrays.a_host].sum())
    ms = trace.events[trace.events["op"] == "memset"]
    memset_pages = int(sum(int(sz) // 4096 + 2 for sz in ms["size"]))
    if not any(isinstance(o, Free) for o in program.ops):
        assert s["zero_fill_pages"] + x["host_populated_pages"] <= n_pages + memset_pages
