"""The study notebook runs end to end on the small shipped traces (UVMSIM_STUDY_SMALL=1).

With nbclient (the dev extra) the notebook is executed in a Jupyter kernel; without it its code
cells run in order in one namespace, which checks the same code."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "examples" / "dl_oversubscription_study.ipynb"


def _run_cells(cells, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    for c in cells:
        if c["cell_type"] == "code":
            src = "".join(c["source"])
            exec(compile(src, f"{NB.name}:{c['id']}", "exec"), ns)
    return ns


def test_study_notebook_runs_on_the_small_traces(monkeypatch, tmp_path):
    monkeypatch.setenv("UVMSIM_STUDY_SMALL", "1")
    monkeypatch.setenv("UVMSIM_ROOT", str(ROOT))
    monkeypatch.delenv("MPLBACKEND", raising=False)   # the kernel's inline backend draws PNGs
    nb = json.loads(NB.read_text())
    try:
        import nbclient
        import nbformat
    except ImportError:
        ns = _run_cells(nb["cells"], monkeypatch)
        assert ns["FULL"] is False
        assert set(ns["sim_new"]["trace"]) == {"resnet50small_on", "resnet50small_off"}
        assert len(ns["sim_new"]) == 6 and (ns["sim_new"]["faults"] > 0).all()
        assert len(ns["fig"].axes) >= 2
        return
    node = nbformat.reads(NB.read_text(), as_version=4)
    env_path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", env_path)
    nbclient.NotebookClient(node, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    outs = [o for c in node.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outs if o.get("output_type") == "stream")
    assert "full run: False" in text and "6 cells:" in text
    assert "Warning" not in text        # e.g. tqdm's "IProgress not found" in a kernel
    images = [o for o in outs if "image/png" in o.get("data", {})]
    assert len(images) >= 6     # the six figures
