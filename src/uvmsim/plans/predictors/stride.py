"""A stride prefetcher over launches, like a hardware stride prefetcher indexed by the
instruction's address (Chen and Baer's reference prediction table) with the kernel's name in
place of the instruction.

For each kernel name it remembers the pages of its last launch and the delta between the
first pages of its last two launches. When the same delta has been seen `confirm` times in
a row (a steady stride), the next launch of that name gets the last launch's pages shifted
by the delta. A delta of 0 (the same pages again) is a stride too: the pages it predicts are
the last launch's.
"""
from __future__ import annotations


class Stride:
    name = "stride"
    feedback = False     # it reads only the pages of past launches

    def __init__(self, confirm: int = 2) -> None:
        if confirm < 1:
            raise ValueError("confirm must be >= 1")
        self.confirm = int(confirm)
        self.params = {"confirm": self.confirm}

    def start(self, h) -> None:
        # name -> [pages of the last launch, its first page, delta, times seen in a row]
        self.rpt: dict[str, list] = {}

    def __call__(self, h):
        k = h.k
        if k:
            name, p = h.name_of(k - 1), h.pages(k - 1)
            if p.size:
                e = self.rpt.get(name)
                if e is None:
                    self.rpt[name] = [p, int(p[0]), None, 0]
                else:
                    d = int(p[0]) - e[1]
                    e[3] = e[3] + 1 if d == e[2] else 1
                    e[0], e[1], e[2] = p, int(p[0]), d
        e = self.rpt.get(h.name)
        if e is None or e[3] < self.confirm:
            return None
        q = e[0] + e[2]
        return q[q >= 0]


def stride(confirm: int = 2) -> Stride:
    """Per-kernel-name stride prefetcher (see the module doc)."""
    return Stride(confirm)
