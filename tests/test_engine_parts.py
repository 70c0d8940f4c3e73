"""The engine's parts (engine/parts/, docs/architecture.md) keep to their seams.

uvmsim.engine.build joins the parts into one module, so nothing but these checks stops one
part from calling any function of another: they read the parts' sources with `ast` and hold
each part to what its header says it calls.
"""
from __future__ import annotations

import ast
import shutil

import pytest

from uvmsim.engine import build
from uvmsim.engine.hooks import HOOKS
from uvmsim.errors import ConfigError

HOOK_NAMES = {h[0] for h in HOOKS}


def _part(path) -> str:
    rel = path.relative_to(build.PARTS_DIR).with_suffix("").as_posix()
    return rel.split("/")[0] if "/" in rel else rel  # mechanisms/x -> mechanisms


def _parse():
    """(functions each part file defines, names each part file calls), by file."""
    defs, calls = {}, {}
    for p in sorted(build.PARTS_DIR.rglob("*.py")):
        tree = ast.parse(p.read_text(), str(p))
        key = p.relative_to(build.PARTS_DIR).as_posix()
        defs[key] = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        calls[key] = {n.func.id for n in ast.walk(tree)
                      if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return defs, calls


DEFS, CALLS = _parse()
OWNER = {}
for _f, _names in DEFS.items():
    for _n in _names:
        OWNER.setdefault(_n, []).append(_f)


def _used_parts(f: str) -> dict[str, set[str]]:
    """Functions of other part files (and hooks) that file f calls, by the part they are in."""
    out: dict[str, set[str]] = {}
    for name in CALLS[f] - DEFS[f]:
        if name in HOOK_NAMES:
            out.setdefault("hooks", set()).add(name)
        for g in OWNER.get(name, []):
            out.setdefault(_part(build.PARTS_DIR / g), set()).add(name)
    return out


def test_every_function_is_defined_once():
    """The parts share one namespace in the generated module: a name defined twice would
    silently be the later part's. Each front-end defines run_kernel (an engine joins one
    front-end, and a base front-end without its run_kernel: build.FRONTEND_BASES)."""
    twice = {n: fs for n, fs in OWNER.items() if len(fs) > 1}
    assert set(twice.pop("run_kernel")) == {f for f in DEFS if f.startswith("frontends/")}
    assert twice == {}


def test_a_base_front_end_is_joined_without_its_entry():
    text = build.template("progress")
    assert "# ==== frontends/page_sets.py" in text and "# ==== frontends/progress.py" in text
    assert text.count("def run_kernel(") == 1
    assert "def page_set_kernel(" in text


@pytest.mark.parametrize("f", sorted(f for f in DEFS if f.startswith("frontends/")))
def test_a_front_end_uses_only_the_front_end_interface(f):
    used = _used_parts(f)
    assert set().union(*used.values()) <= build.FRONTEND_USES, used
    assert "run_kernel" in DEFS[f]


@pytest.mark.parametrize("f", sorted(f for f in DEFS if not f.startswith("frontends/")
                                     and f != "program.py"))
def test_no_part_below_calls_the_front_end_or_the_program(f):
    used = _used_parts(f)
    assert "frontends" not in used and "program" not in used, used


def test_each_part_calls_only_what_its_header_says():
    memory = _used_parts("memory.py")
    assert set(memory) <= {"hooks", "translation", "driver"}
    assert memory["translation"] == {"tlb_shootdown"}
    assert memory["driver"] == {"on_evicted"}  # an eviction, told to the mechanisms
    assert memory["hooks"] == {"EV_VICTIM", "EV_ON_FILL", "EV_ON_RELEASE", "MEM_RESERVE"}
    assert _used_parts("translation.py") == {"hooks": {"WK_PICK"}}
    driver = _used_parts("driver.py")
    assert set(driver) == {"hooks", "memory", "mechanisms"}
    assert driver["hooks"] == {"PF_PREFETCH", "EV_ON_FILL", "SC_START"}
    for f in DEFS:
        if f.startswith("mechanisms/"):
            used = _used_parts(f)
            assert set(used) <= {"mechanisms", "memory", "driver"}, f
            assert used.get("driver", set()) <= {"for_each_block"}, f  # a range event's blocks
    program = _used_parts("program.py")
    assert program["hooks"] == {"SC_ADMIT"}
    assert program["frontends"] >= {"run_kernel"}


def test_the_program_calls_the_front_end_only_through_run_kernel():
    assert _used_parts("program.py")["frontends"] == {"run_kernel"}


def test_a_second_front_end_is_one_file(tmp_path, monkeypatch):
    """An engine joins exactly one front-end, chosen by name: a new file in
    engine/parts/frontends/ is a new choice and leaves every other part as it is."""
    parts = tmp_path / "parts"
    shutil.copytree(build.PARTS_DIR, parts)
    (parts / "frontends" / "streams.py").write_text(
        "# FRONT-END `streams` (a test's stand-in)\n"
        "@_jit\ndef run_kernel(pst, est, wst, S, T, k, batch_size, t0):\n    return t0\n")
    monkeypatch.setattr(build, "PARTS_DIR", parts)
    assert build.frontends() == ["page_sets", "progress", "streams"]
    one, two = build.template("page_sets"), build.template("streams")
    assert "# ==== frontends/streams.py" in two and "frontends/page_sets.py" not in two
    # every other part, joined before the front-end, is the same text
    others = lambda t: t.split("# ==== frontends/")[0]  # noqa: E731
    assert others(one) == others(two) and "# ==== driver.py" in others(one)
    with pytest.raises(ConfigError, match="unknown front-end 'warps'"):
        build.template("warps")
