"""A correlation prefetcher after DeepUM (Jung et al., ASPLOS 2023): remember what each
kernel launch needed and prefetch it before the same launch comes again.

A launch is keyed by its kernel's name and the names of the `context` kernels before it
(DeepUM keys by an execution ID from the name and arguments; a trace has no arguments, so
the launch history tells repeated launches apart). After a launch runs, the table keeps,
for its key, the pages it needed: those it missed (not GPU-resident when it was about to
launch, `history.missed`) and those this predictor had prefetched for it and it touched
(they would have been missed otherwise). Before a launch, the pages of its key are
prefetched, and, as DeepUM's kernel correlation table does, those of the launches that
followed it last time, up to `lookahead` launches ahead (the farthest first, so the
nearest are the most recently filled). An unseen key with context falls back to the
kernel name alone.
"""
from __future__ import annotations

import numpy as np


class Correlation:
    name = "correlation"
    feedback = True

    def __init__(self, context: int = 2, lookahead: int = 1) -> None:
        if context < 0 or lookahead < 1:
            raise ValueError("context must be >= 0 and lookahead >= 1")
        self.context, self.lookahead = int(context), int(lookahead)
        self.params = {"context": self.context, "lookahead": self.lookahead}

    def start(self, h) -> None:
        self.table: dict[tuple, np.ndarray] = {}    # key -> pages its last launch needed
        self.succ: dict[tuple, tuple] = {}          # key -> key of the launch after it
        self.keys: list[tuple] = []                 # key of each launch so far
        self.sent: np.ndarray | None = None         # pages prefetched for the last launch
        self.names: tuple = ()                       # the last `context` kernel names

    def __call__(self, h):
        k = h.k
        if k:
            last = self.keys[-1]
            needed = h.missed(k - 1)
            if self.sent is not None and self.sent.size:
                used = self.sent[np.isin(self.sent, h.pages(k - 1), assume_unique=False)]
                needed = np.union1d(needed, used)
            self.table[last] = needed
            self.table[last[-1:]] = needed      # the name alone, for unseen contexts
            if k >= 2:
                self.succ[self.keys[-2]] = last
        key = self.names + (h.name,)
        self.names = key[1:] if len(key) > self.context else key
        self.keys.append(key)
        chain, kk = [], key
        for _ in range(self.lookahead):
            p = self.table.get(kk)
            if p is None and len(kk) > 1:
                p = self.table.get(kk[-1:])
            if p is not None:
                chain.append(p)
            kk = self.succ.get(kk)
            if kk is None:
                break
        if not chain:
            self.sent = None
            return None
        self.sent = chain[0]
        return np.concatenate(chain[::-1])


def correlation(context: int = 2, lookahead: int = 1) -> Correlation:
    """DeepUM-style correlation prefetcher (see the module doc)."""
    return Correlation(context, lookahead)
