"""The trace arrays a replay runs on, checked once before compiled code indexes with them.

The loader numbers only the 2 MiB blocks a trace touches (src/uvmsim/trace/io.py,
`_dense_maps`), so engine state sized by the trace's pages and blocks grows with the memory
a program uses, not with what it reserves. The arrays are checked here anyway: `Trace` is
public and a bad index in compiled code is a segfault, not an error.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from ..trace.model import TraceArrays


def _check(T: TraceArrays) -> None:
    n_pages = T.page_block.size
    n_blocks = T.b_alloc.size
    for name in ("row_page", "seg_first", "seg_last"):
        x = getattr(T, name)
        if x.size and (int(x.min()) < 0 or int(x.max()) >= n_pages):
            raise ConfigError(f"trace arrays: {name} holds a page outside 0..{n_pages - 1}")
    if T.page_pos.size != n_pages:
        raise ConfigError("trace arrays: page_pos and page_block differ in length")
    if n_pages and (int(T.page_block.min()) < 0 or int(T.page_block.max()) >= n_blocks):
        raise ConfigError(f"trace arrays: page_block holds a block outside 0..{n_blocks - 1}")
    for name in ("b_lo", "b_hi", "b_page0", "b_first_vpage"):
        if getattr(T, name).size != n_blocks:
            raise ConfigError(f"trace arrays: {name} has {getattr(T, name).size} entries for "
                              f"{n_blocks} blocks")
    if n_blocks:
        lo = T.b_lo.astype(np.int64)
        hi = T.b_hi.astype(np.int64)
        if int(lo.min()) < 0 or int(hi.max()) > 511 or bool((hi < lo).any()):
            raise ConfigError("trace arrays: block windows must satisfy 0 <= b_lo <= b_hi <= 511")
        p0 = T.b_page0.astype(np.int64)
        if int(p0.min()) < 0 or int((p0 + hi - lo).max()) >= n_pages:
            raise ConfigError("trace arrays: a block's pages fall outside the page arrays")


def engine_arrays(trace) -> TraceArrays:
    """The arrays a replay of `trace` (a uvmsim.trace.Trace) runs on, checked once per
    Trace object."""
    cache = trace._cache
    T = trace.arrays
    if cache.get("engine_arrays_of") is not T:
        _check(T)
        cache["engine_arrays_of"] = T
    return T
