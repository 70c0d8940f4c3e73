"""What a predictor sees before kernel k launches: the kernels already run (0..k-1), their
pages, and what the replay reported for them; of kernel k only its name and id (a driver
intercepting the launch knows them). Asking for anything of kernel k or later raises
FutureAccessError, unless the build was told to let a predictor that declares
`sees_future = True` read the future pages (the oracle).

Pages are virtual page numbers (address >> 12), sorted, as int64 arrays. Python cannot stop
code that digs into private attributes or reads the trace file again; the view refuses
every request through its API, and `build` refuses future-seeing predictors unless asked.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..engine.state import COUNT_NAMES, RES
from ..trace.format import FLAG_ATOMIC, FLAG_WRITE


class FutureAccessError(LookupError):
    """A predictor asked for a kernel that has not run yet."""


class NoFeedbackError(LookupError):
    """A predictor asked for replay feedback of a build that ran no replay."""


class _Source:
    """The trace-side data behind every view of one build (not handed to predictors)."""

    def __init__(self, trace, layout, capacity_chunks: int) -> None:
        T = trace.arrays
        self.T = T
        self.ks = T.k_row_start
        self.n_kernels = trace.n_kernels
        self.names = trace.kernels["name"].astype(str).to_numpy()
        self.kernel_ids = trace.kernels["kernel_id"].to_numpy(np.int64)
        self.capacity_chunks = int(capacity_chunks)
        self.peak_blocks = int(trace.peak_blocks)
        # virtual page of every dense page
        blk = T.page_block
        self.d2v = (T.b_first_vpage[blk] - T.b_lo[blk].astype(np.int64) +
                    T.page_pos.astype(np.int64))
        self.alloc_ids = trace.allocations["alloc_id"].to_numpy(np.int64)
        self.alloc_kind = trace.allocations["kind"].astype(str).to_numpy()
        self.layout = layout
        self.sorted_v: np.ndarray | None = None
        self.sorted_d: np.ndarray | None = None
        self._writes: dict[int, np.ndarray] = {}
        self.missed: list[np.ndarray] = []      # per kernel run so far (feedback)
        self.counts: np.ndarray | None = None   # the replay's per-kernel counts (feedback)
        self.feedback = False

    def _sort(self) -> None:
        """Every kernel's rows sorted by virtual page, once: pages(i) is then a slice. One
        sort of kernel * n + (rank of the page's virtual number among the n pages)."""
        T = self.T
        n = max(self.d2v.size, 1)
        by_v = np.argsort(self.d2v, kind="stable")      # dense pages in virtual order
        rank = np.empty(n, np.int64)
        rank[by_v] = np.arange(by_v.size, dtype=np.int64)
        kernel = np.repeat(np.arange(self.n_kernels, dtype=np.int64), np.diff(self.ks))
        if self.n_kernels * n < 2**62:
            key = np.sort(kernel * n + rank[T.row_page])
            self.sorted_d = by_v[key % n]
        else:   # the one key would overflow: sort by the pair
            r = rank[T.row_page]
            self.sorted_d = by_v[r[np.lexsort((r, kernel))]]
        self.sorted_v = self.d2v[self.sorted_d]
        self.sorted_v.setflags(write=False)

    def pages(self, i: int) -> np.ndarray:
        if self.sorted_v is None:
            self._sort()
        return self.sorted_v[self.ks[i]:self.ks[i + 1]]

    def note_missed(self, k: int, pstate: np.ndarray) -> None:
        """Kernel k is about to launch: keep its pages that are not GPU-resident now."""
        if self.sorted_v is None:
            self._sort()
        s, e = self.ks[k], self.ks[k + 1]
        m = self.sorted_v[s:e][(pstate[self.sorted_d[s:e]] & RES) == 0]
        m.setflags(write=False)
        self.missed.append(m)

    def touches(self, i: int) -> np.ndarray:
        return self.d2v[self.T.row_page[self.ks[i]:self.ks[i + 1]]]

    def writes(self, i: int) -> np.ndarray:
        p = self._writes.get(i)
        if p is None:
            s, e = self.ks[i], self.ks[i + 1]
            w = (self.T.row_flags[s:e] & (FLAG_WRITE | FLAG_ATOMIC)) != 0
            p = np.sort(self.d2v[self.T.row_page[s:e][w]])
            p.setflags(write=False)
            self._writes[i] = p
        return p


class History:
    """The history before kernel `k` launches (see the module doc).

    Attributes: `k` (the kernel about to launch, by rank: kernels run so far), `name` and
    `kernel_id` (of kernel k), `n_kernels`, `capacity_chunks` (the GPU's 2 MiB chunks),
    `peak_blocks`, `feedback` (whether missed/counts are available).
    """

    __slots__ = ("_src", "_k", "_future", "_live")

    def __init__(self, src: _Source, k: int, future: bool, live: np.ndarray) -> None:
        self._src = src
        self._k = k
        self._future = future
        self._live = live

    # -- the launch about to happen
    @property
    def k(self) -> int:
        return self._k

    @property
    def name(self) -> str:
        return str(self._src.names[self._k])

    @property
    def kernel_id(self) -> int:
        return int(self._src.kernel_ids[self._k])

    @property
    def n_kernels(self) -> int:
        return self._src.n_kernels

    @property
    def capacity_chunks(self) -> int:
        return self._src.capacity_chunks

    @property
    def peak_blocks(self) -> int:
        return self._src.peak_blocks

    @property
    def feedback(self) -> bool:
        return self._src.feedback

    # -- the past
    def _past(self, i: int, what: str, future_ok: bool = False) -> int:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"kernel index must be an int, got {type(i).__name__}")
        i = int(i)
        if i < 0:
            i += self._k       # -1: the kernel that ran last
            if i < 0:
                raise IndexError(f"{what}: kernel {i - self._k} is before the first kernel")
        if i >= self._k and not (future_ok and self._future and i < self._src.n_kernels):
            seen = f"kernels 0..{self._k - 1}" if self._k else "no kernel yet"
            raise FutureAccessError(
                f"{what}({i}): kernel {i} has not run yet; before kernel {self._k} launches "
                f"a predictor sees {seen}" +
                (" (the pages of later kernels only when it declares sees_future and the "
                 "build allows it)" if future_ok else ""))
        return i

    def name_of(self, i: int) -> str:
        """The name of kernel i (i < k)."""
        return str(self._src.names[self._past(i, "name_of")])

    def kernel_id_of(self, i: int) -> int:
        """The kernel_id of kernel i (i < k)."""
        return int(self._src.kernel_ids[self._past(i, "kernel_id_of")])

    def pages(self, i: int) -> np.ndarray:
        """Virtual pages kernel i touched, sorted (read-only)."""
        return self._src.pages(self._past(i, "pages", future_ok=True))

    def touches(self, i: int) -> np.ndarray:
        """Virtual pages of kernel i's access rows in the trace's (order, page) order: its
        first-touch order."""
        return self._src.touches(self._past(i, "touches", future_ok=True))

    def writes(self, i: int) -> np.ndarray:
        """Virtual pages kernel i wrote (write or atomic flag), sorted."""
        return self._src.writes(self._past(i, "writes", future_ok=True))

    def missed(self, i: int) -> np.ndarray:
        """Pages of kernel i that were not GPU-resident when it was about to launch, before
        its plan entries ran: what it would have faulted in (or had the driver prefetch
        for it) had the plan not moved them. Needs feedback."""
        i = self._past(i, "missed")
        self._need_feedback("missed")
        return self._src.missed[i]

    def counts(self, i: int) -> dict[str, int]:
        """Kernel i's counts in the build's replay (faults, fault_batches, htod_bytes_*,
        evicted_chunks, ...: the columns of Result.kernels). Needs feedback."""
        i = self._past(i, "counts")
        self._need_feedback("counts")
        row = self._src.counts[i]
        return {n: int(row[j]) for j, n in enumerate(COUNT_NAMES)}

    def faults(self, i: int) -> int:
        """Kernel i's faults in the build's replay. Needs feedback."""
        i = self._past(i, "faults")
        self._need_feedback("faults")
        return int(self._src.counts[i, 0])

    def _need_feedback(self, what: str) -> None:
        if not self._src.feedback:
            raise NoFeedbackError(f"{what}: this build ran no replay (the predictor says "
                                  "feedback = False)")

    def launches(self, name: str | None = None) -> np.ndarray:
        """Ranks of the kernels run so far, all or those named `name`."""
        past = self._src.names[:self._k]
        r = np.arange(self._k, dtype=np.int64)
        return r if name is None else r[past == name]

    def live_allocations(self) -> pd.DataFrame:
        """Allocations live at this launch: alloc_id, first_page, n_pages, kind."""
        a = np.flatnonzero(self._live)
        L = self._src.layout
        return pd.DataFrame({"alloc_id": self._src.alloc_ids[a],
                             "first_page": L.first_page[a],
                             "n_pages": L.last_page[a] - L.first_page[a] + 1,
                             "kind": self._src.alloc_kind[a]})

    def __repr__(self) -> str:
        return f"<History before kernel {self._k} ({self.name[:40]})>"
