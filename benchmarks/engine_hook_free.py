"""Which functions of an engine's template call no policy or component hook, directly or
through the template's other functions (docs/reliability.md, "What the suite's time goes
to"): those need not be compiled again for every policy pair.

    python benchmarks/engine_hook_free.py
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from uvmsim.engine import build  # noqa: E402
from uvmsim.engine.hooks import HOOKS  # noqa: E402


def hook_free(frontend: str) -> tuple[dict[str, int], set[str]]:
    """Lines of every template function, and the names of those reaching no hook."""
    hooks = {g for g, _, _ in HOOKS}
    names: dict[str, set[str]] = {}
    lines: dict[str, int] = {}
    for n in ast.parse(build.template(frontend)).body:
        if isinstance(n, ast.FunctionDef):
            names[n.name] = ({x.id for x in ast.walk(n) if isinstance(x, ast.Name)}
                             | {x.attr for x in ast.walk(n) if isinstance(x, ast.Attribute)})
            lines[n.name] = n.end_lineno - n.lineno + 1
    reaches = {f for f in names if names[f] & hooks}
    grew = True
    while grew:  # a function calling one that reaches a hook reaches it too
        grew = False
        for f in names:
            if f not in reaches and names[f] & reaches:
                reaches.add(f)
                grew = True
    return lines, set(names) - reaches


if __name__ == "__main__":
    for fe in build.frontends():
        lines, free = hook_free(fe)
        print(f"{fe}: {len(free)} of {len(lines)} functions call no hook "
              f"({sum(lines[f] for f in free)} of {sum(lines.values())} lines)")
