"""Imports run one way (docs/architecture.md): no import cycle among uvmsim's modules, and
the engine imports nothing above it.

Read from the sources with `ast`, so an import inside a function counts as much as one at the
top of a file: a cycle broken only by importing late is still a cycle.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "uvmsim"
# what uvmsim.engine may import from the rest of uvmsim: the trace format's constants, the
# trace arrays' definition and the exception types (none of them imports uvmsim further)
ENGINE_MAY_IMPORT = {"uvmsim.trace.format", "uvmsim.trace.model", "uvmsim.errors"}


def _name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    """uvmsim's importable modules. The engine's template parts (engine/parts/) are not
    modules: uvmsim.engine.build joins them into a generated one."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if rel.startswith("engine/parts/"):
            continue
        out[_name(p)] = p
    return out


MODULES = _modules()


def _imports(name: str, source: str, path: str) -> set[str]:
    """The uvmsim modules `source` imports (and the packages they are in, whose __init__
    runs first), leaving out the module's own packages."""
    is_pkg = path.endswith("__init__.py")
    pkg = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.add(sub if sub in MODULES else base)
    out: set[str] = set()
    for m in found:
        if not m.startswith("uvmsim"):
            continue
        parts = m.split(".")
        for i in range(1, len(parts) + 1):
            target = ".".join(parts[:i])
            if target in MODULES and not (name + ".").startswith(target + "."):
                out.add(target)
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    return {n: _imports(n, p.read_text(), str(p)) for n, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_checker_sees_a_cycle_and_a_late_import():
    g = {"uvmsim.a": _imports("uvmsim.a", "def f():\n    from .b import x\n", "a.py")}
    assert g["uvmsim.a"] == set()  # uvmsim.b is not a module of the package
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    # a late (function-level) relative import resolves to the module it names
    late = _imports("uvmsim.engine.state", "def f():\n    from .link import t\n",
                    str(PKG / "engine" / "state.py"))
    assert late == {"uvmsim.engine.link"}


def test_no_import_cycle_in_uvmsim():
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_engine_imports_nothing_above_it():
    """uvmsim.engine is the bottom layer: policies, components, simulate and the reference
    model import it, never the reverse (the hooks it calls are given to uvmsim.engine.build;
    their interface is uvmsim.engine.hooks)."""
    bad = {}
    for name, deps in _graph().items():
        if name == "uvmsim.engine" or name.startswith("uvmsim.engine."):
            up = sorted(d for d in deps if not d.startswith("uvmsim.engine")
                        and d not in ENGINE_MAY_IMPORT and d != "uvmsim.trace")
            if up:
                bad[name] = up
    assert bad == {}


def test_generated_engine_header_imports_only_the_engine_and_the_format():
    from uvmsim.engine import build
    header = build._HEADER.format(pf="pf", ev="ev", fe="fe", cache=True)
    deps = _imports("uvmsim.engine.generated", header, "header.py")
    assert deps and all(d.startswith("uvmsim.engine") or d in ENGINE_MAY_IMPORT
                        or d == "uvmsim.trace" for d in deps), deps


@pytest.mark.parametrize("part", sorted(p.relative_to(PKG).as_posix()
                                        for p in (PKG / "engine" / "parts").rglob("*.py")))
def test_template_parts_import_nothing(part):
    """A template part gets its names from the header build writes: an import of its own
    would be invisible to the engine's cache key and to the checks above."""
    tree = ast.parse((PKG / part).read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
