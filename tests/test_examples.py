"""The examples run as their docstrings say, from the repository's root with .venv active,
and print what they promise. (examples/custom_policy.py's command line is a block of
docs/policies.md, run by tests/test_docs.py.)"""
from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers import fake_venv

ROOT = Path(__file__).resolve().parents[1]


def docstring_commands(example: Path) -> list[str]:
    """The shell commands in an example's docstring: lines starting with `uvmsim `,
    `python ` or `PYTHONPATH=` (after an optional `Run:`/`CLI:` label), continuation lines
    joined, a trailing parenthesis remark dropped."""
    doc = ast.get_docstring(ast.parse(example.read_text()))
    text = re.sub(r"\\\n\s*", " ", doc)
    out = []
    for line in text.splitlines():
        line = re.sub(r"^\s*(Run|CLI):\s*", "", line).strip()
        if re.match(r"(uvmsim|python|PYTHONPATH=\S+ python) ", line):
            out.append(" ".join(re.sub(r"\s+\(.*\)$", "", line).split()))
    return out


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    venv = fake_venv(tmp_path_factory.mktemp("venv"))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("UVMSIM_DEBUG", None)

    def run(cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", f"source {venv / 'activate'} && {cmd}"], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=900)
    return run


def test_docstring_commands_are_found():
    assert docstring_commands(ROOT / "examples" / "custom_walkers.py") == [
        "python examples/custom_walkers.py",
        "uvmsim multi traces/microbench.uvmtrace traces/gpt2_small.uvmtrace --oversub 1.5 "
        "--translation walkers=4 --walkers examples.custom_walkers:RESERVED"]


def test_custom_walkers_compares_shared_and_reserved_walkers(shell):
    run, cli = docstring_commands(ROOT / "examples" / "custom_walkers.py")
    p = shell(run)
    assert p.returncode == 0, p.stderr
    rows = [ln.split() for ln in p.stdout.splitlines()[1:]]
    assert [(r[0], r[2], r[3]) for r in rows] == [
        ("shared", "0", "microbench"), ("shared", "1", "gpt2_small"),
        ("reserved0", "0", "microbench"), ("reserved0", "1", "gpt2_small")]
    slowdown = {(r[0], r[2]): float(r[5]) for r in rows}
    assert all(s >= 1.0 for s in slowdown.values())
    # the command line gives the reserved run's numbers (the `uvmsim` script: the current
    # folder is not on its import path, yet examples.custom_walkers resolves)
    p = shell(cli)
    assert p.returncode == 0, p.stderr
    assert "walkers=reserved0" in p.stdout
    table = [ln.split() for ln in p.stdout.splitlines()[2:4]]   # after the header
    got = {r[0]: float(r[4]) for r in table}         # tenant -> slowdown column
    assert got == pytest.approx({"0": slowdown[("reserved0", "0")],
                                 "1": slowdown[("reserved0", "1")]}, abs=6e-4)
