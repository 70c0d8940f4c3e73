"""Binary searches for the trace's compiled passes (one definition, shared by the loader's
row resolution and the plan's: trace/_resolve.py, trace/_plan_resolve.py)."""
from __future__ import annotations

from numba import njit


@njit(cache=True)
def lower_bound(a, lo, hi, x):
    """The first position p in lo..hi with a[p] >= x (hi if none); a[lo:hi] ascending."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def upper_bound(a, x):
    """The first position p with a[p] > x (a.size if none); `a` ascending."""
    lo, hi = 0, a.size
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo
