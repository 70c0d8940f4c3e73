"""Exceptions raised by uvmsim, and the one place where the command line turns them into one
line on stderr and an exit status (docs/reliability.md)."""
from __future__ import annotations

import os
import sys
from typing import Callable, Iterable


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


class UserError(Exception):
    """An error the user can fix (a bad argument, an impossible run); printed as one line."""


def parse_env(pairs: Iterable[str] | None) -> dict[str, str]:
    """``--env KEY=VALUE`` arguments as a dict; a malformed one is a UserError naming it."""
    env: dict[str, str] = {}
    for kv in pairs or []:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            raise UserError(f"--env {kv!r}: expected KEY=VALUE")
        env[k] = v
    return env


def run_command(command: str, fn: Callable[[], int]) -> int:
    """Run one command of the ``uvmsim`` CLI and return its exit status.

    Problems with the input (UserError, TraceFormatError, ConfigError, a missing or unreadable
    path, too little memory) print ``uvmsim COMMAND: error: ...`` and give 2; anything else is a
    bug in uvmsim and gives 1, still as one line; UVMSIM_DEBUG=1 re-raises for the traceback.
    """
    try:
        return fn()
    except (UserError, TraceFormatError, ConfigError, OSError) as e:
        return _fail(command, str(e), 2)
    except MemoryError:
        return _fail(command, "out of memory (the trace is too large for this machine)", 2)
    except KeyboardInterrupt:
        print(f"uvmsim {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        return _fail(command, f"internal error {type(e).__name__}: {e} (a bug; rerun with "
                     "UVMSIM_DEBUG=1 for the traceback)", 1)


def _fail(command: str, msg: str, status: int) -> int:
    if os.environ.get("UVMSIM_DEBUG"):
        raise
    print(f"uvmsim {command}: error: {' '.join(msg.split())}", file=sys.stderr)
    return status
