"""Joining the page pass's kernels to the timing pass's records by launch order."""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable, Sequence

from .errors import LaunchMismatchError

__all__ = ["join_launches", "timing_order"]


def _groups(kernels: Sequence[dict[str, Any]], key: str) -> list[list[int]]:
    """Launch groups: one per ordinary launch, one per graph launch (its nodes may run in any
    order, so they are matched as a multiset)."""
    groups: list[list[int]] = []
    last = None
    for i, k in enumerate(kernels):
        g = k.get(key)
        if g is not None and g == last:
            groups[-1].append(i)
        else:
            groups.append([i])
        last = g
    return groups


def _sig(k: dict[str, Any]) -> str:
    return f"{k.get('name')} grid={k.get('grid')} block={k.get('block')}"


def timing_order(kact: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kernel activity records in launch order: by correlation id (one per API call), then
    start time within a graph launch (whose nodes share one correlation id)."""
    return sorted(kact, key=lambda r: (r.get("corr", 0), r.get("start", 0), r.get("graph_node", 0)))


def join_launches(pages: Sequence[dict[str, Any]], timing: Sequence[dict[str, Any]]) -> list[int]:
    """Match each page-pass kernel to its timing-pass record; returns timing indices.

    `pages` are the page pass's kernel lines in order (``graph_launch`` set for graph nodes);
    `timing` are timing records in `timing_order` (``graph`` non-zero for graph nodes, which
    share ``corr``). Kernels match on demangled name, grid and block. Raises
    `LaunchMismatchError` at the first difference.
    """
    pg = _groups(pages, "graph_launch")
    tkey = [dict(r, _g=(r.get("corr") if r.get("graph") else None)) for r in timing]
    tg = _groups(tkey, "_g")
    n_p, n_t = len(pages), len(timing)

    def fail(idx: int, msg: str, p: str | None, t: str | None) -> LaunchMismatchError:
        return LaunchMismatchError(
            f"launch sequences differ between the passes at kernel {idx}: {msg} "
            f"(page pass: {p!r}; timing pass: {t!r}; {n_p} vs {n_t} kernels)",
            index=idx, pages_side=p, timing_side=t, n_pages=n_p, n_timing=n_t)

    out = [-1] * n_p
    for gi in range(max(len(pg), len(tg))):
        if gi >= len(pg) or gi >= len(tg):
            idx = pg[gi][0] if gi < len(pg) else n_p
            p = _sig(pages[pg[gi][0]]) if gi < len(pg) else None
            t = _sig(timing[tg[gi][0]]) if gi < len(tg) else None
            raise fail(idx, "one pass has more launches", p, t)
        a, b = pg[gi], tg[gi]
        if len(a) == 1 and len(b) == 1:
            if _sig(pages[a[0]]) != _sig(timing[b[0]]):
                raise fail(a[0], "different kernels", _sig(pages[a[0]]), _sig(timing[b[0]]))
            out[a[0]] = b[0]
            continue
        sa = Counter(_sig(pages[i]) for i in a)
        sb = Counter(_sig(timing[i]) for i in b)
        if sa != sb:
            diff = (sa - sb) or (sb - sa)
            raise fail(a[0], f"graph launch with different kernel nodes ({dict(diff)})",
                       _sig(pages[a[0]]), _sig(timing[b[0]]))
        queues: dict[str, list[int]] = defaultdict(list)
        for i in b:
            queues[_sig(timing[i])].append(i)
        for i in a:
            out[i] = queues[_sig(pages[i])].pop(0)
    return out
