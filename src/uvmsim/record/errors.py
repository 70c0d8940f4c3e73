"""The errors of `uvmsim record`: the recording could not be made, or its passes disagree."""
from __future__ import annotations

from typing import Any

from ..errors import UserError

__all__ = ["LaunchMismatchError", "RecordError"]


class RecordError(UserError, RuntimeError):
    """The recording could not be made (missing library, unreadable raw files, ...)."""


class LaunchMismatchError(RecordError):
    """The page pass and the timing pass saw different kernel launch sequences."""

    def __init__(self, message: str, *, index: int, pages_side: str | None,
                 timing_side: str | None, n_pages: int, n_timing: int) -> None:
        super().__init__(message)
        self.index = index
        self.pages_side = pages_side
        self.timing_side = timing_side
        self.n_pages = n_pages
        self.n_timing = n_timing

    def as_dict(self) -> dict[str, Any]:
        return {"status": "mismatch", "message": str(self), "first_difference": self.index,
                "pages_side": self.pages_side, "timing_side": self.timing_side,
                "kernels_pages_pass": self.n_pages, "kernels_timing_pass": self.n_timing}
