"""Command-line value types and the parser class shared by `uvmsim` (cli.py), `uvmsim run`
(groundtruth.py) and `uvmsim record` (record/command.py), which import them from here, not
from cli.py (that imports them: a cycle).

Each type turns a flag's text into a value or raises argparse.ArgumentTypeError (argparse
then names the flag); `kv` and `switch` read repeatable NAME=VALUE flags and raise UserError.
"""
from __future__ import annotations

import argparse
import math
import re
from typing import Any, Sequence

from .errors import UserError

__all__ = ["Parser", "factors", "kv", "names", "nonnegative_float", "parse_bytes", "path",
           "positive_float", "positive_int", "switch", "whole"]

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6,
          "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30, "t": 1 << 40,
          "tb": 10**12, "tib": 1 << 40}


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, like every other error of the command
    (src/uvmsim/errors.py): ``uvmsim COMMAND: error: MESSAGE`` and a pointer to --help, exit
    status 2, instead of the usage block first. Subcommand parsers are of this class too."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see "
                     f"`{self.prog} --help`)\n")


def parse_bytes(text: str) -> int:
    """'8GiB', '512M', '1e9' -> bytes."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a byte size: {text!r} (e.g. 8GiB, 512MiB, 1e9)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def factors(text: str) -> list[float]:
    """Comma-separated oversubscription factors, each a finite number > 0: '1,1.5,2' ->
    [1.0, 1.5, 2.0]."""
    return [positive_float(x) for x in names(text)]


def names(text: str) -> list[str]:
    """'a,b' -> ['a', 'b']."""
    vals = [x.strip() for x in text.split(",") if x.strip()]
    if not vals:
        raise argparse.ArgumentTypeError("empty list")
    return vals


def whole(text: str) -> int:
    """Any integer."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")


def positive_int(text: str) -> int:
    v = whole(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")


def positive_float(text: str) -> float:
    v = _number(text)
    if not 0 < v < math.inf:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be > 0 and finite, got {text}")
    return v


def nonnegative_float(text: str) -> float:
    v = _number(text)
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return v


def path(text: str) -> str:
    """A file or folder argument: an empty one would be ignored (`-o ""`), so it is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    return text


def kv(items: Sequence[str] | None) -> dict[str, float]:
    """Repeated NAME=VALUE -> {name: float}."""
    out: dict[str, float] = {}
    for it in items or ():
        k, sep, v = it.partition("=")
        if not sep or not k:
            raise UserError(f"parameter {it!r} is not NAME=VALUE")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise UserError(f"parameter {it!r}: value is not a number")
    return out


def switch(values: Sequence[str] | None) -> Any:
    """A repeatable `--flag [NAME=VALUE]` -> None (absent), True (bare) or a dict."""
    if not values:
        return None
    items = [v for v in values if v != "on"]
    return kv(items) if items else True
