"""native_trace/tests/device_run.sh and device_summary.py without a GPU: the one-call device
script must leave a summary whatever happens, respect its budget and run every program under
`timeout` (the device time is paid for even when a program hangs)."""
from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "native_trace" / "tests" / "device_run.sh"
SUMMARY = ROOT / "native_trace" / "tests" / "device_summary.py"
V12_STEPS = ("build", "tests", "traces12", "bench12")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="bash and coreutils timeout needed")


def _run(tmp_path: Path, *steps: str, budget: int = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "OUT": str(tmp_path), "BUDGET_S": str(budget)}
    return subprocess.run(["bash", str(SCRIPT), *steps], capture_output=True, text=True,
                          env=env, timeout=120)


def _steps(tmp_path: Path) -> list[list[str]]:
    return [ln.split("\t") for ln in (tmp_path / "steps.tsv").read_text().splitlines()]


def test_summary_is_written_whatever_the_steps_did(tmp_path):
    r = _run(tmp_path, "no_such_step")
    assert r.returncode == 0, r.stderr
    assert _steps(tmp_path) == [["no_such_step", "1", "0"]]
    text = (tmp_path / "SUMMARY.md").read_text()
    assert "| no_such_step | 1 | 0 |" in text
    assert "no gpu_tests.xml" in text and "no traces12.csv" in text and "no bench12" in text


def test_steps_without_time_left_are_skipped(tmp_path):
    _run(tmp_path, *V12_STEPS, budget=10)
    assert _steps(tmp_path) == [[s, "SKIPPED", "0"] for s in V12_STEPS]


def _case_body(text: str, step: str) -> str:
    m = re.search(rf"^    {step}\)(.*?);;\s*$", text, re.S | re.M)
    assert m, f"step {step} not found in {SCRIPT.name}"
    return m.group(1)


_PROG = re.compile(r"\b(python3|cmake|bash|nvidia-smi|nvcc)\b")


def _untimed(body: str) -> list[str]:
    """The commands of a step's body that run a program without `timeout` before it."""
    code = "\n".join(ln.split("#")[0] for ln in body.splitlines()).replace("\\\n", " ")
    code = re.sub(r"\$\(\(.*?\)\)|\$\(left \d+\)", "N", code)  # arithmetic, the budget helper
    bad = []
    for part in re.split(r"\|\||&&|;|\||\n|\$\(", code):  # commands, and those inside $(...)
        m = _PROG.search(part)
        if m and not re.search(r"\btimeout\b", part[:m.start()]):
            bad.append(part.strip())
    return bad


def test_the_timeout_check_finds_untimed_programs():
    assert _untimed('x=$(nvidia-smi -L); timeout 9 python3 a.py | tee l') == ["nvidia-smi -L)"]
    assert _untimed('timeout 5 cmake -S . && cmake --build b') == ["cmake --build b"]
    assert _untimed('FOO=1 timeout $(left 9) bash m.sh \\\n  --x 2>&1 | tail') == []


@pytest.mark.parametrize("step", V12_STEPS)
def test_every_program_of_a_v12_step_runs_under_timeout(step):
    assert _untimed(_case_body(SCRIPT.read_text(), step)) == []


def test_summary_lists_failed_tests_and_goals(tmp_path):
    (tmp_path / "gpu_tests.xml").write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.gpu.test_collector" name="test_a" time="1.5"/>'
        '<testcase classname="tests.gpu.test_collector" name="test_b" time="2.0">'
        '<failure message="AssertionError: kernel 0: missing pages [1]&#10;more">tb</failure>'
        '</testcase><testcase classname="" name="" time="0.000"/>'
        '</testsuite></testsuites>')
    with open(tmp_path / "traces12.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["trace", "kernels", "kernels_without_pages", "access_rows", "old_access_rows",
                    "access_rows_vs_old", "stream_rows_per_access_row", "v12_rows_vs_v11_rows",
                    "bytes_vs_old", "pages_pass_wall_s", "old_pages_pass_wall_s", "warnings"])
        w.writerow(["gpt2_small.uvmtrace", 257, 0, 95000, 95984, 0.99, 4.9, 11.2, 3.1, 13, 11, ""])
    with open(tmp_path / "bench12_gpt2.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "mode", "managed", "error", "slowdown_train_steps",
                    "slowdown_process", "kernels_without_pages", "access_rows", "stream_rows",
                    "us_wait", "us_process", "us_attrs"])
        w.writerow(["gpt2", "plain", False, "", "", "", "", "", "", "", "", ""])
        w.writerow(["gpt2", "pages", False, "", 16.5, 2.0, 0, 260000, 1300000, 250, 600, 60])
    r = subprocess.run([sys.executable, str(SUMMARY), str(tmp_path)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "SUMMARY.md").read_text()
    # the nameless testcase pytest writes for the test a SIGINT stopped is not a pass
    assert "1 failed, 1 interrupted, 1 passed" in text
    assert "- FAILED tests.gpu.test_collector::test_b: AssertionError: kernel 0: missing pages [1]" in text
    assert "| 11.2 (over goal) |" in text and "| 16.5 (over goal) |" in text
    assert "| gpt2 | False | plain |" not in text  # plain rows are the baseline, not listed
    rows = list(csv.DictReader(open(tmp_path / "gpu_tests.csv")))
    assert [(x["outcome"], x["seconds"]) for x in rows] == [("passed", "1.5"), ("failed", "2.0"),
                                                            ("interrupted", "0.000")]
