"""A learned prefetcher: a small model, trained on one trace, that scores the 2 MiB windows
a kernel is likely to touch from the launch history, evaluated on another trace.

Features are relative (recency, launch history, counts), never addresses, so a model
trained on one program applies to another. Before kernel k, the candidates are the windows
(virtual page >> 9) touched by the last `window` kernels, by the last launch of kernel k's
name and by the last launch of the same (previous name, name) pair. Each gets the features
of `FEATURES`; the model's probability that kernel k touches it decides: windows at or above
`threshold`, at most the GPU's capacity of them, most likely last (the most recently
filled), each with the pages ever touched in it.

The model is anything with scikit-learn's `predict_proba(X)` (column 1: touched); the
default is `LogisticModel`, a logistic regression fitted with Newton's method in numpy.
`train(trace)` labels the training trace's windows with what each kernel really touched
(it reads the training trace's future, as supervised learning does; the trace you then
evaluate on is another one). Copy this file to try your own features or model.
"""
from __future__ import annotations

import numpy as np

FEATURES = ("bias", "inv_age", "last_kernel", "last_4", "same_name_last", "same_pair_last",
            "touch_rate", "written_last", "name_seen")


class BlockHistory:
    """Per-window state built from the pages of past kernels, and the feature rows of the
    candidates for the next launch."""

    def __init__(self, window: int = 16) -> None:
        self.window = window
        self.slot: dict[int, int] = {}
        self.win = np.zeros(64, np.int64)            # window number of each slot
        self.last = np.full(64, -1, np.int64)        # last kernel touching it
        self.wrote = np.full(64, -1, np.int64)       # last kernel writing it
        self.count = np.zeros(64, np.int64)          # kernels touching it
        self.mask = np.zeros((64, 512), np.bool_)    # pages ever touched in it
        self.by_name: dict[str, np.ndarray] = {}
        self.by_pair: dict[tuple, np.ndarray] = {}
        self.recent: list[np.ndarray] = []
        self.prev_name: str | None = None

    def _slots(self, w: np.ndarray) -> np.ndarray:
        out = np.empty(w.size, np.int64)
        for i, x in enumerate(w.tolist()):
            s = self.slot.get(x)
            if s is None:
                s = self.slot[x] = len(self.slot)
                if s == self.win.size:
                    self._grow()
                self.win[s] = x
            out[i] = s
        return out

    def _grow(self) -> None:
        n = self.win.size
        self.win = np.concatenate([self.win, np.zeros(n, np.int64)])
        self.last = np.concatenate([self.last, np.full(n, -1, np.int64)])
        self.wrote = np.concatenate([self.wrote, np.full(n, -1, np.int64)])
        self.count = np.concatenate([self.count, np.zeros(n, np.int64)])
        self.mask = np.concatenate([self.mask, np.zeros((n, 512), np.bool_)])

    def add(self, i: int, name: str, pages: np.ndarray, writes: np.ndarray) -> None:
        """Kernel i (named `name`) ran and touched `pages`, writing `writes`."""
        w, inv = np.unique(pages >> 9, return_inverse=True)
        s = self._slots(w)
        self.last[s] = i
        self.count[s] += 1
        self.mask[s[inv], pages & 511] = True
        if writes.size:
            self.wrote[self._slots(np.unique(writes >> 9))] = i
        self.by_name[name] = s
        self.by_pair[(self.prev_name, name)] = s
        self.prev_name = name
        self.recent.append(s)
        if len(self.recent) > self.window:
            self.recent.pop(0)

    def candidates(self, k: int, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(slots, feature rows) of the windows kernel k (named `name`) may touch."""
        same = self.by_name.get(name, np.zeros(0, np.int64))
        pair = self.by_pair.get((self.prev_name, name), np.zeros(0, np.int64))
        c = np.unique(np.concatenate(self.recent + [same, pair])) if self.recent else \
            np.zeros(0, np.int64)
        age = (k - self.last[c]).astype(np.float64)
        X = np.empty((c.size, len(FEATURES)))
        X[:, 0] = 1.0
        X[:, 1] = 1.0 / age
        X[:, 2] = age == 1
        X[:, 3] = age <= 4
        X[:, 4] = np.isin(c, same)
        X[:, 5] = np.isin(c, pair)
        X[:, 6] = np.log1p(self.count[c]) / np.log1p(max(k, 1))
        X[:, 7] = self.wrote[c] == self.last[c]
        X[:, 8] = name in self.by_name
        return c, X

    def pages(self, slots: np.ndarray) -> np.ndarray:
        """The pages ever touched in these windows, window by window in this order."""
        sub = self.mask[slots]
        r, pos = np.nonzero(sub)
        return (self.win[slots][r] << 9) + pos


class LogisticModel:
    """Logistic regression (Newton's method with a small ridge), scikit-learn's API."""

    def __init__(self, ridge: float = 1e-3, iterations: int = 25) -> None:
        self.ridge, self.iterations = ridge, iterations
        self.coef_: np.ndarray | None = None

    def fit(self, X: np.ndarray, y: np.ndarray) -> "LogisticModel":
        X = np.asarray(X, np.float64)
        y = np.asarray(y, np.float64)
        w = np.zeros(X.shape[1])
        for _ in range(self.iterations):
            p = 1.0 / (1.0 + np.exp(-np.clip(X @ w, -30, 30)))
            g = X.T @ (p - y) + self.ridge * w
            H = (X * (p * (1 - p))[:, None]).T @ X + self.ridge * np.eye(X.shape[1])
            step = np.linalg.solve(H, g)
            w -= step
            if np.abs(step).max() < 1e-8:
                break
        self.coef_ = w
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        p = 1.0 / (1.0 + np.exp(-np.clip(np.asarray(X, np.float64) @ self.coef_, -30, 30)))
        return np.column_stack([1 - p, p])


class Learned:
    """The prefetcher (module doc): `model` must be trained (see `train`)."""

    name = "learned"
    feedback = False      # its features come from past page sets only

    def __init__(self, model, threshold: float = 0.5, window: int = 16) -> None:
        self.model, self.threshold, self.window = model, float(threshold), int(window)
        self.params = {"model": type(model).__name__, "threshold": self.threshold,
                       "window": self.window}

    def start(self, h) -> None:
        self.state = BlockHistory(self.window)

    def __call__(self, h):
        st, k = self.state, h.k
        if k:
            st.add(k - 1, h.name_of(k - 1), h.pages(k - 1), h.writes(k - 1))
        c, X = st.candidates(k, h.name)
        if c.size == 0:
            return None
        p = self.model.predict_proba(X)[:, 1]
        pick = np.flatnonzero(p >= self.threshold)
        pick = pick[np.argsort(p[pick], kind="stable")][-h.capacity_chunks:]
        return st.pages(c[pick]) if pick.size else None


class _Labeller:
    """Training only: sees the training trace's future to label each candidate."""

    name = "learned-training"
    sees_future = True
    feedback = False

    def __init__(self, window: int) -> None:
        self.window = window
        self.X: list[np.ndarray] = []
        self.y: list[np.ndarray] = []

    def start(self, h) -> None:
        self.state = BlockHistory(self.window)

    def __call__(self, h):
        st, k = self.state, h.k
        if k:
            st.add(k - 1, h.name_of(k - 1), h.pages(k - 1), h.writes(k - 1))
        c, X = st.candidates(k, h.name)
        if c.size:
            self.X.append(X)
            self.y.append(np.isin(st.win[c], np.unique(h.pages(k) >> 9)))
        return None


def train(traces, model=None, window: int = 16):
    """Fit `model` (default LogisticModel) on the candidates of every kernel of `traces`
    (a trace or a list of them), labelled by what each kernel touched. Returns the model."""
    from ..build import build
    lab = _Labeller(window)
    for t in traces if isinstance(traces, (list, tuple)) else [traces]:
        build(t, lab, allow_future=True)
    model = model if model is not None else LogisticModel()
    return model.fit(np.concatenate(lab.X), np.concatenate(lab.y).astype(np.float64))


def learned(model, threshold: float = 0.5, window: int = 16) -> Learned:
    """The learned prefetcher with a trained `model` (see `train`)."""
    return Learned(model, threshold, window)
