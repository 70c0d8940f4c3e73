"""examples/prefetch_plans.ipynb runs top to bottom on the small bundled traces
(UVMSIM_PLANS_SMALL=1): in a Jupyter kernel with nbclient (the dev extra), else its code
cells in order in one namespace."""
from __future__ import annotations

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "examples" / "prefetch_plans.ipynb"


def test_prefetch_plans_notebook_runs(monkeypatch):
    monkeypatch.setenv("UVMSIM_PLANS_SMALL", "1")
    monkeypatch.setenv("UVMSIM_ROOT", str(ROOT))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = json.loads(NB.read_text())
    try:
        import nbclient
        import nbformat
    except ImportError:
        import matplotlib
        matplotlib.use("Agg")
        monkeypatch.chdir(ROOT)
        ns: dict = {}
        for c in nb["cells"]:
            if c["cell_type"] == "code":
                exec(compile("".join(c["source"]), f"{NB.name}:{c['id']}", "exec"), ns)
        table = ns["table"]
        assert set(table["run"]) == {"none", "density", "correlation", "stride", "learned",
                                     "oracle"}
        assert (table.loc[table["run"] == "oracle", "faults"] == 0).all()
        return
    node = nbformat.reads(NB.read_text(), as_version=4)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"),
                                                      os.environ.get("PYTHONPATH", "")]))
    nbclient.NotebookClient(node, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    outs = [o for c in node.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outs if o.get("output_type") == "stream")
    assert "small run: True" in text and "refused:" in text
    assert "24 rows: {'correlation': 4, 'density': 4, 'learned': 4, 'none': 4, 'oracle': 4, " \
           "'stride': 4}" in text
    assert "same counts as the build's replay: True" in text
    assert [o for o in outs if "image/png" in o.get("data", {})]
