"""Exceptions raised by uvmsim."""
from __future__ import annotations


class TraceFormatError(ValueError):
    """A uvmtrace breaks the uvmtrace v1 contract.

    The message names the file, the column and the first offending row where they apply;
    the same facts are kept as attributes for programs.
    """

    def __init__(self, message: str, *, file: str | None = None, column: str | None = None,
                 row: int | None = None) -> None:
        parts = []
        if file is not None:
            parts.append(str(file))
        if column is not None:
            parts.append(f"column '{column}'")
        if row is not None:
            parts.append(f"row {row}")
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.file = file
        self.column = column
        self.row = row


class ConfigError(ValueError):
    """A simulation argument is invalid (unknown policy, bad capacity, ...)."""
