"""The package lives in src/uvmsim (a src layout), so a folder named `uvmsim` in front of it
on the import path, as a clone's parent folder shows the clone, cannot shadow it as an empty
namespace package."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("clone_like", [False, True])
def test_a_folder_named_uvmsim_in_front_does_not_shadow_the_package(tmp_path, clone_like):
    shadow = tmp_path / "uvmsim"
    shadow.mkdir()
    if clone_like:   # what a clone holds at its top: no __init__.py, the package under src/
        for d in ("src/uvmsim", "docs", "tests"):
            (shadow / d).mkdir(parents=True)
        (shadow / "README.md").write_text("# uvmsim\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT / "src")]))
    env.pop("UVMSIM_DEBUG", None)
    want = str(ROOT / "src" / "uvmsim" / "__init__.py")
    p = subprocess.run([sys.executable, "-c", "import uvmsim.cli, uvmsim; print(uvmsim.__file__)"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == want
    p = subprocess.run([sys.executable, "-m", "uvmsim", "--help"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: uvmsim") and "replay" in p.stdout


def test_the_installed_package_is_not_shadowed_either(tmp_path):
    """The interpreter's own install (CI's .venv: editable, scripts/setup.sh), with only the
    folder in front of it on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    env.pop("UVMSIM_DEBUG", None)
    probe = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "print(u.find_spec('uvmsim') is not None)"], cwd="/",
                           env=dict(env, PYTHONPATH=""), capture_output=True, text=True)
    if probe.stdout.strip() != "True":
        pytest.skip("uvmsim is not installed in this interpreter")
    (tmp_path / "uvmsim").mkdir()
    p = subprocess.run([sys.executable, "-c", "import uvmsim.cli, uvmsim; print(uvmsim.__file__)"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith(os.path.join("uvmsim", "__init__.py"))
    assert not p.stdout.startswith(str(tmp_path))
