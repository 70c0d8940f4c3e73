"""The oracle: SEES THE FUTURE. Before kernel k it prefetches the pages kernels k..k+L-1
will touch (L = `lookahead`), the nearest kernel's last so that they are the most recently
filled when eviction chooses, and no more than the GPU holds: kernels are added nearest
first while their 2 MiB windows fit in the capacity (kernel k's own pages always, in the
capacity's worth of its first windows when they alone do not fit).

It is a reference point for what knowing the next kernels' pages buys under this driver
model, not an achievable predictor, and not a proven bound (prefetching can evict pages a
kernel needs, and the driver's own prefetching still runs). `build` refuses it unless
called with allow_future=True.
"""
from __future__ import annotations

import numpy as np


class Oracle:
    name = "oracle"
    sees_future = True
    feedback = False     # it needs no replay: the trace's pages are its whole input

    def __init__(self, lookahead: int = 1) -> None:
        if not isinstance(lookahead, int) or lookahead < 1:
            raise ValueError(f"lookahead must be an int >= 1, got {lookahead!r}")
        self.lookahead = lookahead
        self.params = {"lookahead": lookahead}

    def __call__(self, h):
        cap = h.capacity_chunks
        last = min(h.k + self.lookahead, h.n_kernels)
        if last == h.k + 1:
            p = h.pages(h.k)
            w = p >> 9
            n_w = int(np.count_nonzero(np.diff(w))) + 1 if p.size else 0
            return p if n_w <= cap else p[w < np.unique(w)[cap]]
        # nearest kernel first; a page or a window belongs to its nearest use
        ps = [h.pages(j) for j in range(h.k, last)]
        p = np.concatenate(ps)
        src = np.repeat(np.arange(len(ps)), [x.size for x in ps])
        u, first = np.unique(p, return_index=True)
        j_of = src[first]                          # the nearest kernel using each page
        wu, wfirst = np.unique(u >> 9, return_index=True)
        new_w = np.bincount(j_of[wfirst], minlength=len(ps))   # windows each kernel adds
        fits = np.cumsum(new_w) <= cap
        n_j = int(np.argmin(fits)) if not fits.all() else len(ps)
        if n_j == 0:                               # its own windows alone do not fit
            return self.__class__(1)(h)
        keep = j_of < n_j
        u, j_of = u[keep], j_of[keep]
        return u[np.argsort(-j_of, kind="stable")]  # farthest first, kernel k last


def oracle(lookahead: int = 1) -> Oracle:
    """The next `lookahead` kernels' pages (sees the future; see the module doc)."""
    return Oracle(lookahead)
