"""benchmarks/engine_hook_free.py: the template functions that reach no hook
(docs/reliability.md, "What the suite's time goes to")."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from engine_hook_free import hook_free  # noqa: E402


def test_hook_free_follows_calls_through_the_template():
    lines, free = hook_free("progress")
    # service_batch calls the prefetch hook, progress_kernel the eviction policy's on-hit
    assert "service_batch" not in free
    assert "progress_kernel" not in free
    # run_kernel names no hook: it reaches them only through the kernels it calls
    assert "run_kernel" not in free
    # the tournament of running blocks and the fault queue touch only the front-end's own
    # arrays
    assert {"tree_build", "tree_set", "queue_fault"} <= free
    assert set(free) < set(lines)
